/* A worker for the native unwinder's test of stack-realigning functions
 * (tests/native.rs): realigned() keeps a 64-byte-aligned local and an
 * alloca, so gcc realigns its stack through r10 (a dynamic realignment
 * argument pointer) and describes its frame with DWARF
 * expressions (DW_CFA_def_cfa_expression: DW_OP_breg6 -8; DW_OP_deref, and
 * DW_CFA_expression for the saved registers), as jemalloc's do_rallocx
 * does. Its callers keep no frame pointer (-fomit-frame-pointer), so a
 * step through realigned() that gets the caller's stack pointer wrong
 * derails the walk. THREADS threads (default 1) and the main thread loop
 * in realigned() and in a leaf it calls.
 *
 *   realign_worker [THREADS]
 *
 * Runs until killed. Build: gcc -O2 -g -fomit-frame-pointer -pthread
 * realign_worker.c -o realign_worker
 */
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>

#define NI __attribute__((noinline))

static volatile unsigned long sink;

NI unsigned long leaf_work(unsigned long *v, int n) {
    unsigned long x = 0;
    for (int r = 0; r < 200; r++)
        for (int i = 0; i < n; i++)
            x = x * 6364136223846793005UL + v[i] + (unsigned long)r;
    return x;
}

static volatile int scratch_words = 16;

NI unsigned long realigned(unsigned long seed) {
    alignas(64) unsigned long v[64];
    int n = scratch_words;
    unsigned long *w = __builtin_alloca((unsigned long)n * sizeof *w);
    for (int i = 0; i < 64; i++)
        v[i] = seed + (unsigned long)i;
    for (int i = 0; i < n; i++)
        w[i] = seed * (unsigned long)i;
    for (int r = 0; r < 300; r++)
        for (int i = 1; i < 64; i++)
            v[i] = v[i] * 2862933555777941757UL + v[i - 1] + w[i % n];
    return leaf_work(v, 64) + leaf_work(w, n) + v[63];
}

NI void middle(unsigned long seed) {
    unsigned long acc = 0;
    for (int i = 0; i < 8; i++)
        acc += realigned(seed + (unsigned long)i);
    sink += acc;
}

NI void outer(unsigned long seed) {
    for (;;)
        middle(seed++);
}

static void *thread_main(void *arg) {
    outer((unsigned long)arg);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        pthread_create(&t, NULL, thread_main, (void *)(long)(i + 1));
    }
    outer(0);
    return 0;
}
