/* PageRank (push, 1-D row decomposition) against BDMPI's API: a benchmark for bdmprun and,
 * compiled with crates/bdmpi/tests/mpi-shim/bdmpi.h, the same program as plain MPI.
 *
 * The graph is generated from a hash, the same for every rank count: vertex u has
 * hash(u) % (2 * DEG + 1) out-edges (0 makes it a sink), to hash(u, k) % N. Rank r owns a
 * block of vertices with their out-edges (in storage-backed memory). The set-up finds, for
 * every other rank, the distinct targets it owns (one value per target and iteration goes to
 * it, as in BDMPI's pr1d); an iteration pushes pr(u) / deg(u) along the edges, exchanges the
 * remote sums with one all-to-all, spreads the sinks' rank evenly, damps with 0.85.
 *
 * Usage: pagerank N DEG ITERATIONS. Rank 0 prints the L1 change of every iteration, the sum of
 * the ranks (1 up to rounding) and the seconds per iteration (the set-up excluded). */
#include <bdmpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int r, p;
    BDMPI_Init(&argc, &argv);
    BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r);
    BDMPI_Comm_size(BDMPI_COMM_WORLD, &p);
    if (argc != 4) {
        if (r == 0) fprintf(stderr, "usage: %s N DEG ITERATIONS\n", argv[0]);
        BDMPI_Finalize();
        return 2;
    }
    long n = atol(argv[1]);
    int deg = atoi(argv[2]), iters = atoi(argv[3]);
    long lo = n * r / p, hi = n * (r + 1) / p, nl = hi - lo;

    /* the local rows, in storage-backed memory */
    size_t *rowptr = BDMPI_sbmalloc((nl + 1) * sizeof *rowptr);
    rowptr[0] = 0;
    for (long u = lo; u < hi; u++) rowptr[u - lo + 1] = rowptr[u - lo] + mix((uint64_t)u) % (2 * deg + 1);
    size_t nnz = rowptr[nl];
    int *col = BDMPI_sbmalloc((nnz ? nnz : 1) * sizeof *col);
    for (long u = lo; u < hi; u++)
        for (size_t k = rowptr[u - lo]; k < rowptr[u - lo + 1]; k++)
            col[k] = (int)(mix(((uint64_t)u << 20) ^ (k - rowptr[u - lo])) % (uint64_t)n);

    /* set-up: the distinct remote targets per owner; edges renumbered into [0, nl + nsend) */
    size_t *scount = calloc(p, sizeof *scount), *sdispl = calloc(p + 1, sizeof *sdispl);
    size_t *rcount = calloc(p, sizeof *rcount), *rdispl = calloc(p + 1, sizeof *rdispl);
    /* storage-backed too: every rank holds it across the all-to-alls below, and with many
     * ranks per node plain malloc'd memory of the waiting ranks would add up in memory */
    int *remote = BDMPI_sbmalloc((nnz ? nnz : 1) * sizeof *remote);
    size_t nremote = 0;
    for (size_t k = 0; k < nnz; k++)
        if (col[k] < lo || col[k] >= hi) remote[nremote++] = col[k];
    qsort(remote, nremote, sizeof *remote, cmp_int);
    size_t nsend = 0;
    for (size_t k = 0; k < nremote; k++)
        if (k == 0 || remote[k] != remote[k - 1]) remote[nsend++] = remote[k];
    for (size_t k = 0; k < nsend; k++) {
        int owner = (int)(((long)remote[k] * p + p - 1) / n);
        while ((long)n * owner / p > remote[k]) owner--;
        while ((long)n * (owner + 1) / p <= remote[k]) owner++;
        scount[owner]++;
    }
    for (int q = 0; q < p; q++) sdispl[q + 1] = sdispl[q] + scount[q];
    for (size_t k = 0; k < nnz; k++) {
        if (col[k] >= lo && col[k] < hi) {
            col[k] -= (int)lo;
        } else {
            int *at = bsearch(&col[k], remote, nsend, sizeof *remote, cmp_int);
            col[k] = (int)(nl + (at - remote));
        }
    }
    BDMPI_Alltoall(scount, 1, BDMPI_SIZE_T, rcount, 1, BDMPI_SIZE_T, BDMPI_COMM_WORLD);
    for (int q = 0; q < p; q++) rdispl[q + 1] = rdispl[q] + rcount[q];
    size_t nrecv = rdispl[p];
    int *rinds = BDMPI_sbmalloc((nrecv ? nrecv : 1) * sizeof *rinds);
    BDMPI_Alltoallv(remote, scount, sdispl, BDMPI_INT, rinds, rcount, rdispl, BDMPI_INT,
                    BDMPI_COMM_WORLD);
    BDMPI_sbfree(remote);
    for (size_t k = 0; k < nrecv; k++) rinds[k] -= (int)lo;

    double *pr = BDMPI_sbmalloc(nl * sizeof *pr), *acc = BDMPI_sbmalloc((nl + nsend + 1) * sizeof *acc);
    double *recv = BDMPI_sbmalloc((nrecv + 1) * sizeof *recv);
    for (long u = 0; u < nl; u++) pr[u] = 1.0 / n;
    BDMPI_Barrier(BDMPI_COMM_WORLD);
    double t0 = BDMPI_Wtime();
    for (int it = 0; it < iters; it++) {
        double sinks = 0, all_sinks = 0, change = 0, all_change = 0;
        memset(acc, 0, (nl + nsend) * sizeof *acc);
        for (long u = 0; u < nl; u++) {
            size_t d = rowptr[u + 1] - rowptr[u];
            if (d == 0) {
                sinks += pr[u];
                continue;
            }
            double x = pr[u] / (double)d;
            for (size_t k = rowptr[u]; k < rowptr[u + 1]; k++) acc[col[k]] += x;
        }
        BDMPI_Allreduce(&sinks, &all_sinks, 1, BDMPI_DOUBLE, BDMPI_SUM, BDMPI_COMM_WORLD);
        BDMPI_Alltoallv(acc + nl, scount, sdispl, BDMPI_DOUBLE, recv, rcount, rdispl,
                        BDMPI_DOUBLE, BDMPI_COMM_WORLD);
        for (size_t k = 0; k < nrecv; k++) acc[rinds[k]] += recv[k];
        for (long u = 0; u < nl; u++) {
            double v = 0.15 / n + 0.85 * (acc[u] + all_sinks / n);
            change += v > pr[u] ? v - pr[u] : pr[u] - v;
            pr[u] = v;
        }
        BDMPI_Allreduce(&change, &all_change, 1, BDMPI_DOUBLE, BDMPI_SUM, BDMPI_COMM_WORLD);
        if (r == 0) printf("iteration %d change %.6e\n", it, all_change);
    }
    double secs = BDMPI_Wtime() - t0, sum = 0, all = 0;
    for (long u = 0; u < nl; u++) sum += pr[u];
    BDMPI_Allreduce(&sum, &all, 1, BDMPI_DOUBLE, BDMPI_SUM, BDMPI_COMM_WORLD);
    if (r == 0) printf("sum %.12f\nseconds per iteration %.4f\n", all, secs / iters);
    BDMPI_Finalize();
    return 0;
}
