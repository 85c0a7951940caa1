/* A worker that, once the file argv[1] exists, loads libm with dlopen and
 * starts two named threads ("late_cos0", "late_cos1") that call cos() in a
 * loop through the dlopen'd handle; the main thread then waits. Used to
 * check that a capture armed before the load names libm's frames and the
 * new threads (tests/record/prearm.rs). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static double (*cos_fn)(double);
static volatile double sink;

static void *spin(void *arg) {
    char name[16];
    snprintf(name, sizeof name, "late_cos%ld", (long)arg);
    pthread_setname_np(pthread_self(), name);
    for (;;) {
        double s = 0;
        for (int i = 0; i < 100000; i++)
            s += cos_fn(i * 0.001);
        sink = s;
    }
    return NULL;
}

int main(int argc, char **argv) {
    struct stat st;
    if (argc < 2)
        return 2;
    while (stat(argv[1], &st) != 0)
        usleep(10000);
    void *h = dlopen("libm.so.6", RTLD_NOW);
    if (!h || !(cos_fn = (double (*)(double))dlsym(h, "cos"))) {
        fprintf(stderr, "late_loader: %s\n", dlerror());
        return 1;
    }
    for (long i = 0; i < 2; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, spin, (void *)i) != 0)
            return 1;
    }
    for (;;)
        pause();
}
