/*
 * What one PERF_EVENT_IOC_ENABLE costs, the unit of an armed `start`
 * (docs/pre-arm.md): NTHREADS idle threads pinned to CPU 0, one disabled
 * cpu-clock event per thread and online CPU with `inherit` set (what
 * `perf record -t TIDS --inherit --delay=-1` opens), then every event
 * enabled once from CPU 0 (the threads' own CPU: the kernel calls its
 * enable function directly) and once from CPU 1 (it has to send an
 * inter-processor interrupt to CPU 0 and wait for it), and once more on
 * events already enabled. Needs root (or perf_event_paranoid <= 1), two
 * CPUs and NTHREADS * CPUs open files.
 *
 *   enable_cost NTHREADS
 *
 * Build: gcc -O2 -pthread enable_cost.c -o enable_cost
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int tids[65536];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) { perror("sched_setaffinity"); exit(1); }
}

static void *idle(void *arg) {
    pin(0);
    tids[(long)arg] = (int)syscall(SYS_gettid);
    pthread_mutex_lock(&m);
    for (;;) pthread_cond_wait(&never, &m);
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Microseconds per ioctl REQ over all fds, issued from CPU `from`. */
static double per_ioctl(const int *fds, int k, int from, unsigned long req) {
    pin(from);
    usleep(10000);
    double t0 = now();
    for (int i = 0; i < k; i++) ioctl(fds[i], req, 0);
    return (now() - t0) / k * 1e6;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 500;
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1 || n > 65536 || ncpu < 2) {
        fprintf(stderr, "usage: %s NTHREADS (1..65536; needs 2 or more CPUs)\n", argv[0]);
        return 2;
    }
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, idle, (void *)i) != 0) { perror("pthread_create"); return 1; }
    }
    for (int i = 0; i < n; i++)
        while (!tids[i]) usleep(1000);
    usleep(100000);
    int *fds = malloc(sizeof(int) * (size_t)n * (size_t)ncpu);
    int k = 0;
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.disabled = 1;
    a.inherit = 1;
    a.freq = 1;
    a.sample_freq = 99;
    for (int i = 0; i < n; i++)
        for (int cpu = 0; cpu < ncpu; cpu++) {
            int fd = (int)syscall(SYS_perf_event_open, &a, tids[i], cpu, -1, 0);
            if (fd < 0) { perror("perf_event_open"); return 1; }
            fds[k++] = fd;
        }
    double local = per_ioctl(fds, k, 0, PERF_EVENT_IOC_ENABLE);
    per_ioctl(fds, k, 0, PERF_EVENT_IOC_DISABLE);
    double remote = per_ioctl(fds, k, 1, PERF_EVENT_IOC_ENABLE);
    double again = per_ioctl(fds, k, 1, PERF_EVENT_IOC_ENABLE);
    printf("%d events (%d threads x %d CPUs): enable %.1f us each from the threads' CPU, "
           "%.1f us each from another CPU, %.1f us each when already enabled\n",
           k, n, ncpu, local, remote, again);
    return 0;
}
