/* Shared by the programs of tests/c-vs-mpi. Each program is built twice from one source:
 * against crates/bdmpi/include/bdmpi.h (linked with libbdmpi, run under bdmprun) and against
 * tests/mpi-shim/bdmpi.h (plain MPI, run under mpirun); the test compares the two outputs.
 *
 * A program checks its results against formulas or a sequential computation (CHECK: a failed
 * check prints where and why and makes the program exit with status 1), and prints what it
 * computed as result lines (say()), which must be the same under either launcher: the test
 * compares the sorted lines of the two runs. Lines starting with '[' (Print_vm_info's) are
 * not compared. */
#ifndef CONF_H
#define CONF_H
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int conf_failures;
static int conf_rank = -1;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            conf_failures++;                                                              \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", conf_rank, __FILE__,    \
                    __LINE__, #cond);                                                     \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
        }                                                                                 \
    } while (0)

#define CHECK_OK(call) CHECK((call) == BDMPI_SUCCESS, "%s", #call)

/* One result line, prefixed with the rank (so that sorted lines group by rank). */
static inline void say(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("r%03d %s\n", conf_rank, line);
}

/* FNV-1a over bytes: a checksum of a buffer to print. */
#define HASH0 0xcbf29ce484222325ull
static inline uint64_t hash(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* A deterministic pseudo-random number of (a, b): splitmix64 of their combination. */
static inline uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline int finish(void) {
    fflush(stdout);
    if (conf_failures) fprintf(stderr, "rank %d: %d checks failed\n", conf_rank, conf_failures);
    return conf_failures ? 1 : 0;
}
#endif
