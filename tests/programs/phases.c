/*
 * A worker for jobprof-record's tests: NTHREADS busy threads whose work
 * switches between three functions on cue, so a test can tell from the
 * recorded stacks exactly which phase perf sampled.
 *
 *   phases NTHREADS CUEFILE [BURST_US] [SLEEP_US]
 *
 * Every thread repeatedly runs the current phase's function for BURST_US
 * microseconds of busy work, then sleeps SLEEP_US (so hundreds of threads
 * do not saturate a small machine). The main thread polls CUEFILE every
 * 2 ms; its first byte selects the phase: 'A' phase_alpha_work, 'B'
 * phase_beta_work, 'C' phase_gamma_work, 'Q' quit. Each time a phase takes
 * effect (and once at start, when every thread runs) the main thread
 * writes the phase letter to CUEFILE.ack (atomically, via rename).
 * 'E' ends the newer half of the first NTHREADS threads; 'N' creates
 * NTHREADS new threads (once; the main thread creates them, so perf
 * follows them with --inherit), acknowledged once they all run.
 *
 * Build: gcc -O1 -fno-omit-frame-pointer -pthread phases.c -o phases
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int phase = 'A';
static volatile int end_half = 0;
static int nthreads;
static long burst_us = 200, sleep_us = 20000;
static volatile unsigned long sink;
static volatile char *started_new;

static long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

#define WORK(name)                                                   \
    __attribute__((noinline)) static void name(void) {               \
        long end = now_us() + burst_us;                              \
        do {                                                         \
            for (int i = 0; i < 2000; i++) sink += (unsigned long)i; \
        } while (now_us() < end);                                    \
    }

WORK(phase_alpha_work)
WORK(phase_beta_work)
WORK(phase_gamma_work)

static void *worker(void *arg) {
    long index = (long)arg;
    for (;;) {
        if (end_half && index >= nthreads / 2 && index < nthreads) return NULL;
        if (index >= nthreads && !started_new[index - nthreads]) started_new[index - nthreads] = 1;
        switch (phase) {
        case 'B': phase_beta_work(); break;
        case 'C': phase_gamma_work(); break;
        default: phase_alpha_work(); break;
        }
        usleep(sleep_us);
    }
    return NULL;
}

static void ack(const char *cue, int p) {
    char path[4096], tmp[4100];
    snprintf(path, sizeof path, "%s.ack", cue);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { perror(tmp); exit(1); }
    fprintf(f, "%c\n", p);
    fclose(f);
    if (rename(tmp, path) != 0) { perror(path); exit(1); }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s NTHREADS CUEFILE [BURST_US] [SLEEP_US]\n", argv[0]);
        return 2;
    }
    int n = nthreads = atoi(argv[1]);
    const char *cue = argv[2];
    if (argc > 3) burst_us = atol(argv[3]);
    if (argc > 4) sleep_us = atol(argv[4]);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker, (void *)(long)i) != 0) { perror("pthread_create"); return 1; }
    }
    ack(cue, phase);
    for (;;) {
        FILE *f = fopen(cue, "r");
        if (f) {
            int c = fgetc(f);
            fclose(f);
            if (c == 'Q') return 0;
            if (c == 'N' && !started_new) {
                started_new = calloc(n, 1);
                for (int i = 0; i < n; i++) {
                    pthread_t t;
                    if (pthread_create(&t, &attr, worker, (void *)(long)(n + i)) != 0) { perror("pthread_create"); return 1; }
                }
                for (int i = 0; i < n; i++)
                    while (!started_new[i]) usleep(1000);
                ack(cue, c);
            }
            if (c == 'E' && !end_half) {
                end_half = 1;
                ack(cue, c);
            }
            if ((c == 'A' || c == 'B' || c == 'C') && c != phase) {
                phase = c;
                ack(cue, c);
            }
        }
        usleep(2000);
    }
}
