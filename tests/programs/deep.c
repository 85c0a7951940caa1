/* A worker whose stacks are deeper than perf records, for tests/symbols.rs:
 * the truncation judged from the call chains (a frame-pointer chain of 127
 * frames or more hit perf's depth limit, kernel.perf_event_max_stack).
 *
 *   deep SECONDS [DEPTH]
 *
 * One thread recurses DEPTH calls deep (default 200) and spins at the
 * bottom, over and over, until SECONDS have passed. Build: gcc -O0 -g
 * -fno-omit-frame-pointer deep.c -o deep (-O0: every call a real frame,
 * no tail calls or recursion turned into a loop).
 */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long spin(void) {
    unsigned long x = sink ^ 0x5a;
    for (int i = 0; i < 2000000; i++)
        x = (x ^ (x >> 7)) * 31 + (unsigned long)i;
    return x;
}

__attribute__((noinline)) static unsigned long deep(int n) {
    if (n == 0)
        return spin();
    unsigned long r = deep(n - 1);
    sink += r;
    return r + (unsigned long)n;
}

int main(int argc, char **argv) {
    double deadline = now() + (argc > 1 ? atof(argv[1]) : 10.0);
    int depth = argc > 2 ? atoi(argv[2]) : 200;
    while (now() < deadline)
        sink += deep(depth);
    return 0;
}
