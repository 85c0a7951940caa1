/* A shared library with two hot functions, for tests/symbols.rs: built with
 * its segments away from their file offsets, then its function symbols'
 * section indices rewritten (as manylinux repair tools leave them). */
#include <stdint.h>

const char hot_lib_name[] = "hot library";

__attribute__((noinline)) uint64_t hot_a(uint64_t n)
{
    uint64_t x = n;
    for (uint64_t i = 0; i < 20000000; i++)
        x = x * 6364136223846793005ULL + i;
    return x;
}

__attribute__((noinline)) uint64_t hot_b(uint64_t n)
{
    uint64_t x = n;
    for (uint64_t i = 0; i < 20000000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x += i;
    }
    return x;
}

const char *hot_lib_id(void) { return hot_lib_name; }
