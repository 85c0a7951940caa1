/*
 * A switch-heavy worker, for jobprof-record's tests and benches/arm.sh
 * (issue 35, item 9): NSLEEP threads asleep (each wakes every 50 ms, a
 * context switch out and in) and NSPAWN threads that each create a
 * short-lived thread every GAP_US microseconds (it spins briefly in
 * switchy_short_work and exits): thousands of thread creations and
 * switches a second, the load under which attaching perf was slow.
 *
 *   switchy NSLEEP CUEFILE NSPAWN GAP_US
 *
 * Writes 'A' to CUEFILE.ack (atomically, via rename) once every thread
 * runs; exits when CUEFILE starts with 'Q'.
 *
 * Build: gcc -O1 -fno-omit-frame-pointer -pthread switchy.c -o switchy
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile int running;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_attr_t small;

static void up(void) {
    pthread_mutex_lock(&lock);
    running++;
    pthread_mutex_unlock(&lock);
}

static void *sleeper(void *arg) {
    (void)arg;
    up();
    for (;;) usleep(50000);
    return NULL;
}

__attribute__((noinline)) static void switchy_short_work(void) {
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i;
}

static void *short_lived(void *arg) {
    (void)arg;
    switchy_short_work();
    return NULL;
}

static void *spawner(void *arg) {
    long gap_us = (long)arg;
    up();
    for (;;) {
        pthread_t t;
        if (pthread_create(&t, &small, short_lived, NULL) == 0) pthread_detach(t);
        usleep(gap_us);
    }
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

static void start(void *(*fn)(void *), void *arg) {
    pthread_t t;
    if (pthread_create(&t, &small, fn, arg) != 0) {
        perror("pthread_create");
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: switchy NSLEEP CUEFILE NSPAWN GAP_US\n");
        return 2;
    }
    int nsleep = atoi(argv[1]), nspawn = atoi(argv[3]);
    const char *cue = argv[2];
    long gap_us = atol(argv[4]);
    pthread_attr_init(&small);
    pthread_attr_setstacksize(&small, 64 * 1024);
    for (int i = 0; i < nsleep; i++) start(sleeper, NULL);
    for (int i = 0; i < nspawn; i++) start(spawner, (void *)gap_us);
    while (running < nsleep + nspawn) usleep(1000);
    ack(cue);
    for (;;) {
        char buf[1] = {0};
        FILE *f = fopen(cue, "r");
        if (f) {
            size_t n = fread(buf, 1, 1, f);
            fclose(f);
            if (n == 1 && buf[0] == 'Q') return 0;
        }
        usleep(20000);
    }
}
