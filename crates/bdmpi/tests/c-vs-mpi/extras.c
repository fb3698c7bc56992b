/* BDMPI's own calls around the messages: storage-backed memory (sbmalloc, sbrealloc, sbfree,
 * sbload, sbloadall, sbunload, sbunloadall, sbdiscard) whose contents survive blocking calls
 * and unloading, used as the buffers of sends, receives and collectives while unloaded;
 * critical sections (Entercritical/Exitcritical); the mlock wrappers; Print_vm_info and
 * Wtime through both names. Prints checksums of the storage-backed data after every step. */
#define _GNU_SOURCE
#include <bdmpi.h>
#include <errno.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "conf.h"

static int r, p;

static uint64_t pattern(int rank, size_t i, int round) { return mix((uint64_t)rank * 131 + (uint64_t)round, i); }

static void fill(uint64_t *a, size_t from, size_t to, int rank, int round) {
    for (size_t i = from; i < to; i++) a[i] = pattern(rank, i, round);
}

static void verify(const uint64_t *a, size_t from, size_t to, int rank, int round, const char *when) {
    size_t bad = 0;
    for (size_t i = from; i < to; i++) bad += a[i] != pattern(rank, i, round);
    CHECK(bad == 0, "%s: %zu of %zu elements differ", when, bad, to - from);
    say("%s: hash %016llx", when, (unsigned long long)hash(HASH0, a + from, (to - from) * sizeof *a));
}

int main(int argc, char **argv) {
    CHECK_OK(BDMPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    CHECK_OK(BDMPI_Comm_size(BDMPI_COMM_WORLD, &p));
    conf_rank = r;
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), per = page / sizeof(uint64_t);

    /* Wtime through both names: it advances with the clock */
    double w0 = BDMPI_Wtime();
    struct timespec pause = {0, 5000000};
    nanosleep(&pause, NULL);
    double w1 = MPI_Wtime();
    CHECK(w1 - w0 >= 0.004 && w1 - w0 < 10, "Wtime advanced %g s over a 5 ms sleep", w1 - w0);

    /* new storage-backed memory is zero; its contents survive blocking calls */
    size_t n = (size_t)1 << 19; /* 4 MiB */
    uint64_t *a = BDMPI_sbmalloc(n * sizeof *a);
    CHECK(a != NULL, "sbmalloc");
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += a[i] != 0;
    CHECK(nonzero == 0, "new storage-backed memory has %zu non-zero elements", nonzero);
    fill(a, 0, n, r, 0);
    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    verify(a, 0, n, r, 0, "after a barrier");

    /* unloaded memory as a send buffer, and as a receive buffer */
    uint64_t *in = BDMPI_sbmalloc(n * sizeof *in);
    BDMPI_sbunload(a);
    BDMPI_sbunload(in);
    CHECK_OK(BDMPI_Sendrecv(a, n, BDMPI_UINT64_T, next, 1, in, n, BDMPI_UINT64_T, prev, 1,
                            BDMPI_COMM_WORLD, BDMPI_STATUS_IGNORE));
    verify(in, 0, n, prev, 0, "received into unloaded memory");
    BDMPI_sbload(a);
    verify(a, 0, n, r, 0, "after sbunload, a send and sbload");

    /* a receive and a send posted on storage-backed memory that is released while the rank
     * waits in a barrier before it completes them */
    {
        BDMPI_Request rq, sq;
        uint64_t *out = BDMPI_sbmalloc(n / 4 * sizeof *out);
        fill(out, 0, n / 4, r, 4);
        CHECK_OK(BDMPI_Irecv(in, n / 4, BDMPI_UINT64_T, prev, 2, BDMPI_COMM_WORLD, &rq));
        CHECK_OK(MPI_Isend(out, (int)(n / 4), MPI_UINT64_T, next, 2, MPI_COMM_WORLD, &sq));
        CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
        CHECK_OK(BDMPI_Wait(&sq, BDMPI_STATUS_IGNORE));
        CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
        CHECK_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        verify(in, 0, n / 4, prev, 4, "Irecv into storage-backed memory across barriers");
        BDMPI_sbfree(out);
    }

    /* everything unloaded, then an allreduce and a bcast straight out of and into it */
    BDMPI_sbunloadall();
    CHECK_OK(MPI_Allreduce(a, in, (int)n, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD));
    {
        size_t bad = 0;
        for (size_t i = 0; i < n; i += 97) {
            uint64_t x = 0;
            for (int q = 0; q < p; q++) x ^= pattern(q, i, 0);
            bad += in[i] != x;
        }
        CHECK(bad == 0, "allreduce of unloaded memory: %zu wrong", bad);
        say("allreduce of unloaded memory: hash %016llx", (unsigned long long)hash(HASH0, in, n * sizeof *in));
    }
    BDMPI_sbunloadall();
    if (r == p - 1) fill(in, 0, n, 777, 3);
    CHECK_OK(BDMPI_Bcast(in, n, BDMPI_UINT64_T, p - 1, BDMPI_COMM_WORLD));
    BDMPI_sbloadall();
    verify(in, 0, n, 777, 3, "bcast into unloaded memory");
    verify(a, 0, n, r, 0, "after sbunloadall and sbloadall");

    /* sbrealloc keeps the contents; sbdiscard'ed memory is written again before it is read */
    a = BDMPI_sbrealloc(a, 2 * n * sizeof *a);
    CHECK(a != NULL, "sbrealloc up");
    verify(a, 0, n, r, 0, "after growing");
    fill(a, n, 2 * n, r, 1);
    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    verify(a, n, 2 * n, r, 1, "the grown part after a barrier");
    a = BDMPI_sbrealloc(a, n / 2 * sizeof *a);
    CHECK(a != NULL, "sbrealloc down");
    verify(a, 0, n / 2, r, 0, "after shrinking");
    BDMPI_sbdiscard(a + per, (ssize_t)(8 * page));
    verify(a, 0, per, r, 0, "before the discarded pages");
    verify(a, 9 * per, n / 2, r, 0, "after the discarded pages");
    fill(a, per, 9 * per, r, 2);
    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    verify(a, per, 9 * per, r, 2, "discarded pages written again");
    uint64_t *b = BDMPI_sbrealloc(NULL, 3 * page);
    CHECK(b != NULL, "sbrealloc(NULL)");
    b[0] = 42;
    BDMPI_sbfree(in);

    /* critical sections: entered and left; the data stays */
    for (int round = 0; round < 2; round++) {
        CHECK_OK(BDMPI_Entercritical());
        b[1 + round] = (uint64_t)r * 10 + (uint64_t)round;
        CHECK_OK(BDMPI_Exitcritical());
        CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    }
    CHECK(b[0] == 42 && b[1] == (uint64_t)r * 10 && b[2] == (uint64_t)r * 10 + 1, "critical rounds");
    say("critical: %llu %llu", (unsigned long long)b[1], (unsigned long long)b[2]);

    /* the mlock wrappers do what mlock(2) and friends do */
    static char lockme[2 * 4096];
    int rc = BDMPI_mlock(lockme, sizeof lockme);
    CHECK(rc == 0 || errno == EPERM || errno == ENOMEM || errno == EAGAIN, "BDMPI_mlock: %d", rc);
    CHECK(BDMPI_munlock(lockme, sizeof lockme) == 0 || rc != 0, "BDMPI_munlock");
    rc = BDMPI_mlockall(MCL_CURRENT | MCL_ONFAULT);
    CHECK(rc == 0 || errno == EPERM || errno == ENOMEM || errno == EINVAL, "BDMPI_mlockall: %d", rc);
    CHECK(BDMPI_munlockall() == 0, "BDMPI_munlockall");

    /* Print_vm_info through both names (lines starting with '[', not compared) */
    char hdr[] = "vm";
    CHECK_OK(BDMPI_Print_vm_info(hdr));
    CHECK_OK(MPI_Print_vm_info(hdr));

    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    CHECK_OK(BDMPI_Finalize());
    BDMPI_sbfree(a);
    BDMPI_sbfree(b);
    return finish();
}
