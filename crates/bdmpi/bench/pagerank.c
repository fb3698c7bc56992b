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
 * Or the graph is read from a CSR file of `spillway-bench serial-ooc build` (a header of u64
 * words: magic "SPWYCSR1", n, m, where the row offsets start, where the targets start; then the
 * n + 1 row offsets as u64 and the m targets as u32): each rank reads its block of rows, one
 * rank of a node at a time (BDMPI's critical section), so that bdmprun runs on the same graph
 * as spillway and the serial out-of-core program.
 *
 * Usage: pagerank N DEG ITERATIONS, or pagerank --graph FILE ITERATIONS. Rank 0 prints the L1
 * change of every iteration, the sum of the ranks (1 up to rounding) and the seconds per
 * iteration (the set-up excluded). */
#define _GNU_SOURCE
#include <bdmpi.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Reads `len` bytes at `off` of `fd` into `buf`, or exits naming the file. */
static void read_at(int fd, const char *path, void *buf, size_t len, off_t off) {
    char *p = buf;
    while (len > 0) {
        ssize_t got = pread(fd, p, len > (1 << 26) ? (1 << 26) : len, off);
        if (got <= 0) {
            fprintf(stderr, "pagerank: %s: cannot read %zu bytes at %lld\n", path, len, (long long)off);
            exit(1);
        }
        p += got, len -= (size_t)got, off += got;
    }
}

/* Opens the CSR file at `path` and reads its header into `head`, or exits. */
static int open_graph(const char *path, uint64_t head[5]) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "pagerank: %s: cannot open\n", path);
        exit(1);
    }
    read_at(fd, path, head, 5 * sizeof *head, 0);
    return fd;
}

/* The rows [lo, hi) of the CSR file at `path` (n vertices): their local row offsets and their
 * targets, in storage-backed memory. */
static void read_rows(const char *path, long lo, long hi, size_t **rowptr, int **col) {
    uint64_t head[5];
    int fd = open_graph(path, head);
    uint64_t *offs = BDMPI_sbmalloc((size_t)(hi - lo + 1) * sizeof *offs);
    BDMPI_Entercritical();
    read_at(fd, path, offs, (size_t)(hi - lo + 1) * 8, (off_t)(head[3] + 8 * (uint64_t)lo));
    size_t nnz = offs[hi - lo] - offs[0];
    *rowptr = BDMPI_sbmalloc((size_t)(hi - lo + 1) * sizeof **rowptr);
    for (long u = 0; u <= hi - lo; u++) (*rowptr)[u] = offs[u] - offs[0];
    *col = BDMPI_sbmalloc((nnz ? nnz : 1) * sizeof **col);
    /* targets are u32 below 2^31 (n is an int) and int has their layout */
    read_at(fd, path, *col, nnz * 4, (off_t)(head[4] + 4 * offs[0]));
    BDMPI_Exitcritical();
    BDMPI_sbfree(offs);
    close(fd);
}

/* The vertex count of the CSR file at `path`, or exits. */
static long graph_vertices(const char *path) {
    uint64_t head[5];
    int fd = open_graph(path, head);
    close(fd);
    if (memcmp(head, "SPWYCSR1", 8) != 0 || head[1] >= (1ull << 31)) {
        fprintf(stderr, "pagerank: %s: not a CSR file of spillway-bench serial-ooc build\n", path);
        exit(1);
    }
    return (long)head[1];
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
    int from_file = argc == 4 && strcmp(argv[1], "--graph") == 0;
    if (argc != 4) {
        if (r == 0) fprintf(stderr, "usage: %s N DEG ITERATIONS | --graph FILE ITERATIONS\n", argv[0]);
        BDMPI_Finalize();
        return 2;
    }
    long n = from_file ? graph_vertices(argv[2]) : atol(argv[1]);
    int deg = from_file ? 0 : atoi(argv[2]), iters = atoi(argv[3]);
    long lo = n * r / p, hi = n * (r + 1) / p, nl = hi - lo;

    /* the local rows, in storage-backed memory */
    size_t *rowptr;
    int *col;
    if (from_file) {
        read_rows(argv[2], lo, hi, &rowptr, &col);
    } else {
        rowptr = BDMPI_sbmalloc((nl + 1) * sizeof *rowptr);
        rowptr[0] = 0;
        for (long u = lo; u < hi; u++)
            rowptr[u - lo + 1] = rowptr[u - lo] + mix((uint64_t)u) % (2 * deg + 1);
        col = BDMPI_sbmalloc((rowptr[nl] ? rowptr[nl] : 1) * sizeof *col);
        for (long u = lo; u < hi; u++)
            for (size_t k = rowptr[u - lo]; k < rowptr[u - lo + 1]; k++)
                col[k] = (int)(mix(((uint64_t)u << 20) ^ (k - rowptr[u - lo])) % (uint64_t)n);
    }
    size_t nnz = rowptr[nl];

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
