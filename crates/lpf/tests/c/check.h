/* A check that records failures from any process of a section; main returns failures(). */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>

static atomic_int check_failures;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            atomic_fetch_add(&check_failures, 1);                                 \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                \
        }                                                                         \
    } while (0)

/* The number of processes LPF_MAX_P stands for, read independently of the library. */
static inline unsigned env_procs(void) {
    const char *v = getenv("LPF_MAX_PROCS");
    return v ? (unsigned)atoi(v) : 0;
}

static inline int failures(void) {
    int f = atomic_load(&check_failures);
    if (f) fprintf(stderr, "%d checks failed\n", f);
    return f ? 1 : 0;
}
#endif
