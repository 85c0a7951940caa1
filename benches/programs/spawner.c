/* A worker for benches/prearm_changed.sh: N idle threads; each time the file
 * argv[2] appears it is removed and the worker creates one more idle
 * thread (named "late"), and loads libm (dlopen) the first time: what a
 * query engine does between queries, which a capture armed before it has
 * no record of.
 *
 *   gcc -O2 -pthread -o spawner spawner.c -ldl && ./spawner 1000 CUE */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *idle(void *arg) {
    if (arg)
        pthread_setname_np(pthread_self(), "late");
    for (;;)
        pause();
    return NULL;
}

static void start(pthread_attr_t *at, void *arg) {
    pthread_t t;
    if (pthread_create(&t, at, idle, arg) != 0) {
        perror("pthread_create");
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    int n = atoi(argv[1]);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64 * 1024);
    for (int i = 0; i < n; i++)
        start(&at, NULL);
    for (;;) {
        if (unlink(argv[2]) == 0) {
            if (!dlopen("libm.so.6", RTLD_NOW)) {
                fprintf(stderr, "spawner: %s\n", dlerror());
                return 1;
            }
            start(&at, (void *)1);
        }
        usleep(10000);
    }
}
