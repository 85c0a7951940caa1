/*
 * A switch-heavy benchmark worker for benches/offcpu.sh: NPAIRS pairs of
 * threads ping-ponging on condition variables (each hand-over is a wakeup
 * and two context switches), like a query engine's exchange operators
 * handing batches back and forth.
 *
 *   pingpong NPAIRS OUTFILE
 *
 * Every 100 ms the main thread writes "HANDOVERS NS" (hand-overs done so
 * far by all pairs, CLOCK_MONOTONIC nanoseconds) to OUTFILE, atomically via
 * rename, as benches/programs/units.c does. Runs until killed.
 *
 * Build: gcc -O2 -fno-omit-frame-pointer -pthread pingpong.c -o pingpong
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct pair {
    pthread_mutex_t m;
    pthread_cond_t c;
    int turn;
    unsigned long count;
    char pad[64];
};

static struct pair *pairs;

struct arg {
    struct pair *p;
    int me;
};

__attribute__((noinline)) static void hand_over(struct pair *p, int me) {
    pthread_mutex_lock(&p->m);
    while (p->turn != me)
        pthread_cond_wait(&p->c, &p->m);
    p->turn = !me;
    p->count++;
    pthread_cond_signal(&p->c);
    pthread_mutex_unlock(&p->m);
}

static void *player(void *a) {
    struct arg *x = a;
    for (;;)
        hand_over(x->p, x->me);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: pingpong NPAIRS OUTFILE\n");
        return 2;
    }
    int n = atoi(argv[1]);
    pairs = calloc(n, sizeof *pairs);
    struct arg *args = calloc(2 * n, sizeof *args);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&pairs[i].m, NULL);
        pthread_cond_init(&pairs[i].c, NULL);
        for (int k = 0; k < 2; k++) {
            pthread_t t;
            args[2 * i + k] = (struct arg){&pairs[i], k};
            if (pthread_create(&t, &attr, player, &args[2 * i + k]) != 0) {
                perror("pthread_create");
                return 1;
            }
        }
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    for (;;) {
        unsigned long total = 0;
        for (int i = 0; i < n; i++)
            total += __atomic_load_n(&pairs[i].count, __ATOMIC_RELAXED);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        FILE *f = fopen(tmp, "w");
        if (f) {
            fprintf(f, "%lu %lld\n", total, ts.tv_sec * 1000000000LL + ts.tv_nsec);
            fclose(f);
            rename(tmp, argv[2]);
        }
        usleep(100000);
    }
}
