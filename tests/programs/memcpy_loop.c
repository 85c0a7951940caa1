/* A memcpy loop for the report's self-time test (tests/report.rs): nearly
 * every sample lands in libc's memcpy, which perf 6.1 prints, under
 * libc's debug info and `--call-graph dwarf`, as an inlined line alone
 * (`__memcpy_avx512_unaligned_erms (inlined)`, the ELF symbol being
 * `__memmove_...`; the variant depends on the CPU) called from copyit.
 *
 *   memcpy_loop [SECONDS]   (default 1)
 *
 * Build: gcc -O2 -g -fno-omit-frame-pointer memcpy_loop.c -o memcpy_loop
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char src[1 << 20], dst[1 << 20];

__attribute__((noinline)) void copyit(size_t n) {
    memcpy(dst, src, n);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        for (int i = 0; i < 1000; i++)
            copyit(sizeof src);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs)
            break;
    }
    return 0;
}
