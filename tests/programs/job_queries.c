/*
 * A benchmark worker for tests/job.rs: NTHREADS threads that run a fixed
 * amount of work per query, so that the CPU time a query takes (what
 * cpu-clock samples measure) does not depend on how busy the machine is.
 *
 *   job_queries NTHREADS CUEFILE
 *
 * The main thread polls CUEFILE every 2 ms for a line `SEQ PHASE UNITS`;
 * when SEQ changes, every thread runs UNITS units of the phase's function
 * (A query_alpha_work, B query_beta_work, C query_gamma_work; one unit is
 * a million loop iterations), then the main thread writes SEQ to
 * CUEFILE.ack (atomically, via rename). Between queries the threads sleep
 * (not sampled by cpu-clock). `SEQ Q 0` ends the program. At start it
 * acknowledges SEQ 0.
 *
 * Build: gcc -O1 -fno-omit-frame-pointer -pthread job_queries.c -o job_queries
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static long seq, units, finished;
static int phase;
static volatile unsigned long sink;

#define WORK(name)                                                     \
    __attribute__((noinline)) static void name(long n) {               \
        unsigned long x = sink;                                        \
        for (long u = 0; u < n; u++)                                   \
            for (long i = 0; i < 1000000; i++) x = x * 31 + (unsigned long)i; \
        sink += x;                                                     \
    }

WORK(query_alpha_work)
WORK(query_beta_work)
WORK(query_gamma_work)

static void *worker(void *arg) {
    (void)arg;
    long seen = 0;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (seq == seen) pthread_cond_wait(&go, &mu);
        seen = seq;
        int p = phase;
        long n = units;
        pthread_mutex_unlock(&mu);
        if (p == 'Q') return NULL;
        if (p == 'A') query_alpha_work(n);
        else if (p == 'B') query_beta_work(n);
        else query_gamma_work(n);
        pthread_mutex_lock(&mu);
        finished++;
        pthread_cond_signal(&done);
        pthread_mutex_unlock(&mu);
    }
}

static void ack(const char *cue, long s) {
    char path[4096], tmp[4100];
    snprintf(path, sizeof path, "%s.ack", cue);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { perror(tmp); exit(1); }
    fprintf(f, "%ld\n", s);
    fclose(f);
    if (rename(tmp, path) != 0) { perror(path); exit(1); }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s NTHREADS CUEFILE\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    const char *cue = argv[2];
    if (n < 1 || n > 64) n = 2;
    pthread_t t[64];
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
    ack(cue, 0);
    long current = 0;
    for (;;) {
        long s = 0, u = 0;
        char p = 0;
        FILE *f = fopen(cue, "r");
        if (f) {
            if (fscanf(f, "%ld %c %ld", &s, &p, &u) != 3) s = current;
            fclose(f);
        }
        if (f && s != current) {
            pthread_mutex_lock(&mu);
            seq = current = s;
            phase = p;
            units = u;
            finished = 0;
            pthread_cond_broadcast(&go);
            if (p == 'Q') {
                pthread_mutex_unlock(&mu);
                for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
                return 0;
            }
            while (finished < n) pthread_cond_wait(&done, &mu);
            pthread_mutex_unlock(&mu);
            ack(cue, s);
        }
        usleep(2000);
    }
}
