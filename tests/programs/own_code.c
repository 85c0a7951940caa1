/* A worker that spends its time in its own code only, for
 * tests/perf_data.rs: after main starts, no call reaches a shared library,
 * so libc appears in its stacks only as their root
 * (__libc_start_main, __libc_start_call_main), in call chains, never
 * where a sample hit; perf records no build id for it.
 *
 *   own_code
 *
 * Runs until killed. Build: gcc -O1 -g own_code.c -o own_code.
 */
static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long spin(unsigned long x) {
    for (int i = 0; i < 1000000; i++)
        x = (x ^ (x >> 7)) * 31 + (unsigned long)i;
    return x;
}

int main(void) {
    for (;;)
        sink = spin(sink);
}
