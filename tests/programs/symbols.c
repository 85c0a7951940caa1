/* A worker whose time is spread over its own code, libc and the kernel, for
 * tests/symbols.rs (the reference test: jobprof process against perf script
 * run directly).
 *
 *   symbols SECONDS [THREADS]
 *
 * THREADS threads (default 3) loop until SECONDS have passed, each round
 * spending time in:
 *   - its own functions (spin_own),
 *   - libc called from its own functions (qsort with a callback, memcpy,
 *     snprintf, strlen): libc's symbols live in its separate debug info,
 *   - system calls (read from /dev/zero, write to /dev/null, getppid): kernel
 *     frames under the libc syscall wrappers.
 * Build: gcc -O2 -g -fno-omit-frame-pointer -pthread symbols.c -o symbols
 * (dynamically linked, so that libc is a shared library with its own
 * debug file).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static double deadline;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void spin_own(void) {
    unsigned long x = sink ^ 0x5a;
    for (int i = 0; i < 300000; i++)
        x = (x ^ (x >> 7)) * 31 + (unsigned long)i;
    sink += x;
}

static int cmp_ulong(const void *a, const void *b) {
    unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) static void use_libc(void) {
    enum { N = 4096 };
    static __thread unsigned long v[N], w[N];
    static __thread char text[256];
    unsigned long x = sink | 1;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        v[i] = x;
    }
    qsort(v, N, sizeof v[0], cmp_ulong);
    for (int r = 0; r < 20; r++)
        memcpy(w, v, sizeof v);
    size_t len = 0;
    for (int i = 0; i < 200; i++) {
        snprintf(text, sizeof text, "row %d value %lu %f", i, w[i % N], (double)i / 7.0);
        len += strlen(text);
    }
    sink += len + w[N / 2];
}

__attribute__((noinline)) static void make_syscalls(int zero, int null) {
    static __thread char buf[1 << 16];
    for (int i = 0; i < 20; i++) {
        if (read(zero, buf, sizeof buf) < 0)
            abort();
        if (write(null, buf, sizeof buf) < 0)
            abort();
        sink += (unsigned long)getppid();
    }
}

static void *work(void *arg) {
    (void)arg;
    int zero = open("/dev/zero", O_RDONLY);
    int null = open("/dev/null", O_WRONLY);
    if (zero < 0 || null < 0)
        abort();
    while (now() < deadline) {
        spin_own();
        use_libc();
        make_syscalls(zero, null);
    }
    close(zero);
    close(null);
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    int threads = argc > 2 ? atoi(argv[2]) : 3;
    if (threads < 1 || threads > 64)
        threads = 3;
    deadline = now() + seconds;
    pthread_t t[64];
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("%lu\n", sink);
    return 0;
}
