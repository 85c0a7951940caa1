/* A worker for the dwarf unwinder's test of threads sampled inside
 * `clone3` (tests/perf_data/per_sample.rs): start_batch() starts 8 short
 * threads (a little work each) and joins them, over and over, so that
 * many samples of the starting thread land in glibc's `clone3` (the
 * kernel creating the thread). glibc ends `clone3`'s unwind table before
 * its system call, for the child's sake. It starts no thread for its
 * first second: perf record -p attaching to a process that starts and
 * ends threads meanwhile sometimes records next to nothing (perf 6.1).
 *
 *   thread_starter
 *
 * Runs until killed. Build: gcc -O2 -g -pthread thread_starter.c -o
 * thread_starter
 */
#include <pthread.h>
#include <unistd.h>

#define NI __attribute__((noinline))

static volatile unsigned long sink;

static void *short_work(void *arg) {
    unsigned long x = (unsigned long)arg;
    for (int i = 0; i < 2000; i++)
        x = x * 6364136223846793005UL + (unsigned long)i;
    sink += x;
    return 0;
}

NI void start_batch(void) {
    pthread_t t[8];
    for (long i = 0; i < 8; i++)
        pthread_create(&t[i], 0, short_work, (void *)i);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], 0);
}

NI void start_forever(void) {
    for (;;)
        start_batch();
}

int main(void) {
    sleep(1);
    start_forever();
    return 0;
}
