/* A multi-threaded stand-in for a benchmark worker, for tests/slurm_e2e.rs.
 *
 *   queries CONTROL_FILE PID_FILE [THREADS]
 *
 * Writes its PID into PID_FILE (temporary file + rename), then THREADS
 * threads (default 3) work according to the first word of CONTROL_FILE,
 * re-read every 20 ms: `qa` runs query_alpha(), `qb` query_beta() (both
 * each also calling common_scan(), a frame both share), anything else idles
 * (sleeps, so it is not sampled by cpu-clock:u), `exit` ends the program.
 * Build: gcc -fno-omit-frame-pointer -O1 -pthread queries.c -o queries
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int mode; /* 0 idle, 1 alpha, 2 beta, 3 exit */
static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long common_scan(unsigned long x, int rounds) {
    for (int i = 0; i < rounds; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

/* Each query spends about half its time in its own loop, so that its own
 * frame is the sampled leaf (a frame-pointer unwind from inside a callee
 * can miss the callee's caller). */
__attribute__((noinline)) static void query_alpha(void) {
    unsigned long x = sink ^ 0xa1;
    for (int i = 0; i < 200000; i++)
        x = (x ^ (x >> 7)) * 31 + (unsigned long)i;
    sink += common_scan(x, 200000);
}

__attribute__((noinline)) static void query_beta(void) {
    unsigned long x = sink ^ 0xb2;
    for (int i = 0; i < 200000; i++)
        x = (x ^ (x << 5)) * 17 + (unsigned long)i;
    sink += common_scan(x, 200000);
}

static void *work(void *arg) {
    (void)arg;
    struct timespec nap = {0, 5 * 1000 * 1000};
    for (;;) {
        switch (mode) {
        case 1: query_alpha(); break;
        case 2: query_beta(); break;
        case 3: return NULL;
        default: nanosleep(&nap, NULL);
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CONTROL_FILE PID_FILE [THREADS]\n", argv[0]);
        return 2;
    }
    int threads = argc > 3 ? atoi(argv[3]) : 3;
    if (threads < 1 || threads > 64)
        threads = 3;
    pthread_t tid[64];
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, work, NULL);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, argv[2]) != 0) {
        perror(argv[2]);
        return 1;
    }
    struct timespec poll = {0, 20 * 1000 * 1000};
    while (mode != 3) {
        char word[16] = "";
        FILE *c = fopen(argv[1], "r");
        if (c) {
            if (fscanf(c, "%15s", word) != 1)
                word[0] = 0;
            fclose(c);
        }
        mode = !strcmp(word, "qa") ? 1 : !strcmp(word, "qb") ? 2 : !strcmp(word, "exit") ? 3 : 0;
        nanosleep(&poll, NULL);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    return 0;
}
