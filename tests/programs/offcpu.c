/*
 * A worker for the off-CPU tests: its query thread runs 200 ms cycles,
 * self-timed against CLOCK_MONOTONIC so that the shares hold however loaded
 * the machine is: burns until 50 ms into the cycle (phase_burn), sleeps in
 * nanosleep until 150 ms (phase_sleep), then waits on a condition variable
 * (phase_wait) that a second thread signals at 200 ms. The main thread
 * blocks in pthread_join for the whole run (a thread blocked across the
 * whole window).
 *
 *   offcpu CUEFILE
 *
 * Writes 'A' to CUEFILE.ack (via rename) once both threads run; exits when
 * CUEFILE starts with 'Q'.
 *
 * Build: gcc -O0 -g -fno-omit-frame-pointer -pthread offcpu.c -o offcpu
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MS 1000000LL

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long long signal_at; /* ns: when the signaller signals next */
static unsigned long generation;
static volatile int quit;
static volatile unsigned long sink;
static const char *cue;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until(long long t) {
    struct timespec ts = {t / 1000000000LL, t % 1000000000LL};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

__attribute__((noinline)) void burn_loop(long long until) {
    while (now_ns() < until)
        for (int i = 0; i < 1000; i++)
            sink += i;
}

__attribute__((noinline)) void phase_burn(long long until) { burn_loop(until); }

__attribute__((noinline)) void do_nanosleep(long long until) {
    long long left = until - now_ns();
    if (left > 0) {
        struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
        nanosleep(&ts, NULL);
    }
}

__attribute__((noinline)) void phase_sleep(long long until) { do_nanosleep(until); }

__attribute__((noinline)) void do_wait(unsigned long seen) {
    pthread_mutex_lock(&lock);
    while (generation == seen && !quit)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

__attribute__((noinline)) void phase_wait(unsigned long seen) { do_wait(seen); }

static void *query_thread(void *arg) {
    (void)arg;
    long long t0 = now_ns();
    while (!quit) {
        pthread_mutex_lock(&lock);
        unsigned long seen = generation;
        signal_at = t0 + 200 * MS;
        pthread_mutex_unlock(&lock);
        phase_burn(t0 + 50 * MS);
        phase_sleep(t0 + 150 * MS);
        phase_wait(seen);
        t0 += 200 * MS;
        /* Fell behind (a stall longer than a cycle): start afresh. */
        if (now_ns() > t0 + 100 * MS)
            t0 = now_ns();
    }
    return NULL;
}

static void *signal_thread(void *arg) {
    (void)arg;
    while (!quit) {
        pthread_mutex_lock(&lock);
        long long at = signal_at;
        pthread_mutex_unlock(&lock);
        if (at == 0) {
            sleep_until(now_ns() + MS);
            continue;
        }
        sleep_until(at);
        pthread_mutex_lock(&lock);
        if (signal_at == at) {
            generation++;
            pthread_cond_signal(&cond);
        }
        pthread_mutex_unlock(&lock);
        /* The next cycle's time is published by the query thread. */
        while (!quit) {
            pthread_mutex_lock(&lock);
            int same = signal_at == at;
            pthread_mutex_unlock(&lock);
            if (!same)
                break;
            sleep_until(now_ns() + MS);
        }
    }
    return NULL;
}

static void *cue_thread(void *arg) {
    (void)arg;
    char ack[4096];
    snprintf(ack, sizeof ack, "%s.ack", cue);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", ack);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fputc('A', f);
        fclose(f);
        rename(tmp, ack);
    }
    while (!quit) {
        FILE *c = fopen(cue, "r");
        if (c) {
            if (fgetc(c) == 'Q')
                quit = 1;
            fclose(c);
        }
        sleep_until(now_ns() + 50 * MS);
    }
    pthread_mutex_lock(&lock);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: offcpu CUEFILE\n");
        return 2;
    }
    cue = argv[1];
    pthread_t q, s, c;
    pthread_create(&q, NULL, query_thread, NULL);
    pthread_create(&s, NULL, signal_thread, NULL);
    pthread_create(&c, NULL, cue_thread, NULL);
    pthread_join(q, NULL);
    pthread_join(s, NULL);
    pthread_join(c, NULL);
    return 0;
}
