/* Calls hot_a and hot_b of tests/programs/hot_lib.c for ever. */
#include <stdint.h>
#include <stdio.h>

uint64_t hot_a(uint64_t);
uint64_t hot_b(uint64_t);

int main(void)
{
    uint64_t s = 0;
    for (uint64_t i = 0;; i++) {
        s += hot_a(i);
        s += hot_b(s);
        if (s == 42)
            puts("never");
    }
}
