/* Checks for the C tests: a failed check prints where and why (with the rank) and makes the
 * program exit with status 1 at the end. Expected values are computed here from formulas,
 * never taken from the library. */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;
static int check_rank = -1;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            check_failures++;                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", check_rank, __FILE__,   \
                    __LINE__, #cond);                                                     \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
        }                                                                                 \
    } while (0)

#define CHECK_OK(call) CHECK((call) == BDMPI_SUCCESS, "%s", #call)

/* The layout the test harness asked bdmprun for (read from the environment the harness set,
 * independently of the library). */
static inline int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v ? atoi(v) : dflt;
}
static inline int test_ns(void) { return env_int("BDMPI_TEST_NS", 1); }
static inline int test_nodes(void) { return env_int("BDMPI_TEST_NODES", 1); }

static inline int finish(void) {
    if (check_failures) fprintf(stderr, "rank %d: %d checks failed\n", check_rank, check_failures);
    return check_failures ? 1 : 0;
}
#endif
