/*
 * A worker that churns threads like a query engine's task pool, for
 * jobprof-record's tests: NLONG long-lived threads (bursts of work in
 * churn_long_work, then a sleep) while the main thread, the pool, creates
 * about RATE short-lived detached threads a second, each living 1-20 ms (a
 * little work in churn_short_work, the rest asleep). With NLONG = 127 the
 * main and the long-lived threads are exactly 128, the default shard size:
 * every newer TID is short-lived and about to vanish.
 *
 *   churn NLONG CUEFILE RATE
 *
 * Writes 'A' to CUEFILE.ack (atomically, via rename) once every long-lived
 * thread runs; exits when CUEFILE starts with 'Q'.
 *
 * Build: gcc -O1 -fno-omit-frame-pointer -pthread churn.c -o churn
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile int running;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

__attribute__((noinline)) static void churn_long_work(long us) {
    long end = now_us() + us;
    do {
        for (int i = 0; i < 1000; i++) sink += (unsigned long)i;
    } while (now_us() < end);
}

__attribute__((noinline)) static void churn_short_work(long us) {
    long end = now_us() + us;
    do {
        for (int i = 0; i < 1000; i++) sink ^= (unsigned long)i;
    } while (now_us() < end);
}

static void *long_lived(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    running++;
    pthread_mutex_unlock(&lock);
    for (;;) {
        churn_long_work(300);
        usleep(50000);
    }
    return NULL;
}

static void *short_lived(void *arg) {
    long life_us = (long)arg;
    churn_short_work(100);
    usleep(life_us > 100 ? life_us - 100 : 0);
    return NULL;
}

static void ack(const char *cue) {
    char tmp[4096], path[4096];
    snprintf(path, sizeof path, "%s.ack", cue);
    snprintf(tmp, sizeof tmp, "%s.ack.tmp", cue);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fputs("A\n", f);
    fclose(f);
    rename(tmp, path);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: churn NLONG CUEFILE RATE\n");
        return 2;
    }
    int nlong = atoi(argv[1]);
    const char *cue = argv[2];
    long rate = atol(argv[3]);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (int i = 0; i < nlong; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, long_lived, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    while (running < nlong) usleep(1000);
    ack(cue);
    long gap_us = 1000000L / (rate > 0 ? rate : 1);
    unsigned seed = 12345;
    pthread_attr_t detached;
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&detached, 64 * 1024);
    long next_check = 0;
    for (;;) {
        long life_us = 1000 + (long)(rand_r(&seed) % 19000);
        pthread_t t;
        pthread_create(&t, &detached, short_lived, (void *)life_us);
        usleep(gap_us);
        if (now_us() < next_check) continue;
        next_check = now_us() + 20000;
        char buf[8] = {0};
        FILE *f = fopen(cue, "r");
        if (f) {
            size_t n = fread(buf, 1, 1, f);
            fclose(f);
            if (n == 1 && buf[0] == 'Q') return 0;
        }
    }
}
