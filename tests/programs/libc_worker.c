/* A worker for the native symbolizer's exactness tests (tests/native.rs):
 * THREADS threads (default 3) plus the main thread loop over stages that
 * spend their time in the program itself (compute_stage, with an inlined
 * helper), in libc (qsort with a callback, snprintf, strlen, memset) and in
 * the kernel (write(2) to /dev/null, getppid(2)) and in the vDSO
 * (clock_gettime), so that recorded stacks hold user, libc, vDSO and kernel
 * frames.
 *
 *   libc_worker [THREADS]
 *
 * Runs until killed. Build: gcc -O2 -g -fno-omit-frame-pointer -pthread
 * libc_worker.c -o libc_worker (dynamically linked, so libc frames come
 * from the shared library and its separate debug file).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NI __attribute__((noinline))

static volatile unsigned long sink;

static inline unsigned long mix(unsigned long x) {
    for (int i = 0; i < 50; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

NI int compare_keys(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

NI void sort_stage(void) {
    static __thread long v[4096];
    for (int i = 0; i < 4096; i++)
        v[i] = (long)mix((unsigned long)i);
    qsort(v, 4096, sizeof v[0], compare_keys);
    sink += (unsigned long)v[7];
}

NI void io_stage(int fd) {
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < 50; i++) {
        if (write(fd, buf, sizeof buf) < 0)
            sink++;
        sink += (unsigned long)getppid();
    }
}

NI void clock_stage(void) {
    struct timespec t;
    for (int i = 0; i < 20000; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        sink += (unsigned long)t.tv_nsec;
    }
}

NI void format_stage(void) {
    char b[128];
    for (int i = 0; i < 2000; i++) {
        snprintf(b, sizeof b, "%d %s %f", i, "row", i * 1.5);
        sink += strlen(b);
    }
}

NI void compute_stage(void) {
    unsigned long s = 0;
    for (int i = 0; i < 200000; i++)
        s += mix((unsigned long)i);
    sink += s;
}

NI void *worker(void *arg) {
    (void)arg;
    int fd = open("/dev/null", O_WRONLY);
    for (;;) {
        sort_stage();
        io_stage(fd);
        clock_stage();
        format_stage();
        compute_stage();
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    pthread_t t[64];
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    worker(NULL);
    return 0;
}
