/* Code folded by a linker, as identical code folding leaves it (pyarrow's
 * libarrow.so.2600 names one 128-byte function CTypeImpl<FloatType>::layout,
 * CTypeImpl<UInt32Type>::layout, CTypeImpl<Int32Type>::layout and
 * ListType::layout), for tests/perf_data.rs: three local function symbols
 * of one size at one address, the longest name listed last, and no debug
 * information. perf names the address by the longest name; binutils'
 * addr2line, which `perf script --inline` asks, by the first listed.
 *
 *   folded
 *
 * Runs until killed. Build: gcc -O1 folded.c -o folded (no -g).
 */
static volatile unsigned long sink;
__attribute__((noinline)) static unsigned long b_spin(unsigned long x) {
    for (int i = 0; i < 1000000; i++)
        x = (x ^ (x >> 7)) * 31 + (unsigned long)i;
    return x;
}
static unsigned long a_spin_with_a_much_longer_name(unsigned long) __attribute__((alias("b_spin")));
static unsigned long c_s(unsigned long) __attribute__((alias("b_spin")));
unsigned long (*volatile fp)(unsigned long) = a_spin_with_a_much_longer_name;
unsigned long (*volatile fq)(unsigned long) = c_s;
int main(void) {
    for (;;) sink = fp(sink) + fq(sink);
}
