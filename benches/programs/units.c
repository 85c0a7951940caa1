/*
 * A benchmark worker for benches/prearm.sh: NBUSY CPU-bound threads that
 * count their own work units, next to NIDLE idle threads (a query engine's
 * worker: a few busy threads, thousands of idle pool threads).
 *
 *   units NIDLE NBUSY OUTFILE
 *
 * A work unit is 20,000 steps of a 64-bit LCG (no memory traffic, no
 * system calls). Every 100 ms the main thread writes "UNITS NS" (work units
 * done so far by all busy threads, CLOCK_MONOTONIC nanoseconds) to OUTFILE,
 * atomically via rename. The idle threads sleep in pthread_cond_wait
 * forever. Runs until killed.
 *
 * Build: gcc -O2 -fno-omit-frame-pointer -pthread units.c -o units
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static unsigned long counts[64 * 16];
static volatile unsigned long sink;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

__attribute__((noinline)) static unsigned long work_unit(unsigned long x) {
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

static void *busy(void *arg) {
    long i = (long)arg;
    unsigned long x = (unsigned long)i;
    for (;;) {
        x = work_unit(x);
        __atomic_store_n(&counts[i * 16], counts[i * 16] + 1, __ATOMIC_RELAXED);
        sink = x;
    }
    return NULL;
}

static void *idle(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m);
    for (;;) pthread_cond_wait(&never, &m);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s NIDLE NBUSY OUTFILE\n", argv[0]);
        return 2;
    }
    int nidle = atoi(argv[1]), nbusy = atoi(argv[2]);
    if (nbusy < 1 || nbusy > 64) {
        fprintf(stderr, "NBUSY must be 1..64\n");
        return 2;
    }
    const char *out = argv[3];
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (long i = 0; i < nidle; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, idle, NULL) != 0) { perror("pthread_create"); return 1; }
    }
    for (long i = 0; i < nbusy; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, busy, (void *)i) != 0) { perror("pthread_create"); return 1; }
    }
    for (;;) {
        unsigned long total = 0;
        for (int i = 0; i < nbusy; i++) total += __atomic_load_n(&counts[i * 16], __ATOMIC_RELAXED);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        FILE *f = fopen(tmp, "w");
        if (!f) { perror(tmp); return 1; }
        fprintf(f, "%lu %ld\n", total, ts.tv_sec * 1000000000L + ts.tv_nsec);
        fclose(f);
        if (rename(tmp, out) != 0) { perror(out); return 1; }
        usleep(100000);
    }
}
