/* A worker whose frame-pointer chains end in 0xffffffffffffffff, for the
 * native symbolizer's test of corrupted call chains (tests/native.rs):
 * spin() points RBP at a frame record {next: 0, return address: -1} while
 * it loops, so the kernel's frame-pointer walk records -1 as its caller
 * (an entry at or above PERF_CONTEXT_MAX that is no context marker: perf
 * 6.1 discards such a chain whole). honest() does the same work with a
 * real frame. THREADS threads (default 1) and the main thread alternate.
 *
 *   bad_fp_worker [THREADS]
 *
 * Runs until killed. Build: gcc -O2 -g -fno-omit-frame-pointer
 * -mno-red-zone -pthread bad_fp_worker.c -o bad_fp_worker
 */
#include <pthread.h>
#include <stdlib.h>

#define NI __attribute__((noinline))

static volatile unsigned long sink;

NI void spin(void) {
    static __thread unsigned long frame[2] = {0, ~0UL};
    __asm__ volatile("push %%rbp\n\t"
                     "mov %0, %%rbp\n\t"
                     "mov $2000000, %%ecx\n"
                     "1:\n\t"
                     "dec %%ecx\n\t"
                     "jnz 1b\n\t"
                     "pop %%rbp\n\t"
                     :
                     : "r"(frame)
                     : "rcx", "memory");
}

NI void honest(void) {
    unsigned long x = sink;
    for (int i = 0; i < 2000000; i++)
        x = x * 6364136223846793005UL + 1;
    sink = x;
}

static void *loop(void *arg) {
    (void)arg;
    for (;;) {
        spin();
        honest();
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        pthread_create(&t, NULL, loop, NULL);
    }
    loop(NULL);
    return 0;
}
