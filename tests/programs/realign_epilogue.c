/* A worker for the dwarf unwinder's test of stack-realigning epilogues
 * (tests/perf_data/per_sample.rs), the construct of Velox's
 * `libvelox.so` where jobprof stopped at the leaf: realigned_small()
 * realigns its stack through r10 (a 64-byte-aligned local and an
 * alloca), and gcc's rows for its epilogue (`leave; lea -0x8(%r10),%rsp;
 * ret`) keep RBP = [RBP] (DW_CFA_expression rbp: DW_OP_breg6 0) after
 * RBP is restored. Its caller keeps a count in RBP (not a pointer), so
 * that saved-RBP slot cannot be read; perf's libunwind never reads it
 * (counting() saves and restores RBP itself) and unwinds on to main.
 *
 *   realign_epilogue
 *
 * Runs until killed. Build: gcc -O2 -g -fomit-frame-pointer
 * realign_epilogue.c -o realign_epilogue
 */
#include <stdalign.h>

#define NI __attribute__((noinline))

static volatile int scratch_words = 16;
static volatile unsigned long sink;

NI unsigned long realigned_small(unsigned long seed) {
    alignas(64) volatile unsigned long v[2];
    int n = scratch_words;
    volatile unsigned long *w = __builtin_alloca((unsigned long)n * sizeof *w);
    v[0] = seed;
    w[0] = seed;
    return v[0] + w[0];
}

NI void counting(unsigned long seed) {
    register unsigned long count __asm__("rbp") = 50000;
    unsigned long acc = 0;
    for (;;) {
        __asm__ volatile("" : "+r"(count));
        acc += realigned_small(seed + count);
        count += 1;
        __asm__ volatile("" : "+r"(count));
        sink = acc;
    }
}

int main(void) {
    counting(1);
    return 0;
}
