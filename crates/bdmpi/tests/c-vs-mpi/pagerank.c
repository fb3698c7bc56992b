/* PageRank, BDMPI style: a 1-D row distribution (rank r owns a block of vertices and their
 * out-edges, in storage-backed memory), each iteration pushing pr(u) / deg(u) along the
 * edges and sending the partial sums for other ranks' vertices to their owners. Two ways of
 * exchanging them, run one after the other on the same graph:
 *   a2a: one Alltoallv of the partial sums (which targets go to whom was agreed once, with an
 *        Alltoall of counts and an Alltoallv of ids);
 *   p2p: an Isend to every owner, received with Probe(ANY_SOURCE) + Get_count + Recv.
 * Received sums are added in source-rank order and the sinks' mass and the L1 change are
 * Allgather'ed and added in rank order, so a run's numbers do not depend on arrival order:
 * both ways give the same bits, under bdmprun and under mpirun. Rank 0 gathers the result
 * (Gatherv) and checks it against a sequential PageRank of the whole graph.
 *
 * The graph comes from a hash: vertex u has mix(u, 0) % (2 DEG + 1) out-edges (0: a sink), to
 * mix(u, k + 1) % N.
 *
 * Usage: pagerank [N [DEG [ITERATIONS]]] (default 3000 8 15). */
#define _GNU_SOURCE
#include <bdmpi.h>
#include <math.h>
#include "conf.h"

static long n;
static int deg, r, p;

static long first(int q) { return n * q / p; }
static int owner(long v) {
    int q = (int)((v * p) / n);
    while (q > 0 && first(q) > v) q--;
    while (q < p - 1 && first(q + 1) <= v) q++;
    return q;
}
static int degree(long u) { return (int)(mix((uint64_t)u, 0) % (uint64_t)(2 * deg + 1)); }
static long target(long u, int k) { return (long)(mix((uint64_t)u, (uint64_t)k + 1) % (uint64_t)n); }

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The sequential PageRank of the whole graph, for the check at rank 0. */
static double *sequential(int iters) {
    double *pr = malloc(n * sizeof *pr), *acc = malloc(n * sizeof *acc);
    for (long u = 0; u < n; u++) pr[u] = 1.0 / n;
    for (int it = 0; it < iters; it++) {
        double sinks = 0;
        memset(acc, 0, n * sizeof *acc);
        for (long u = 0; u < n; u++) {
            int d = degree(u);
            if (d == 0) sinks += pr[u];
            for (int k = 0; k < d; k++) acc[target(u, k)] += pr[u] / d;
        }
        for (long v = 0; v < n; v++) pr[v] = 0.15 / n + 0.85 * (acc[v] + sinks / n);
    }
    free(acc);
    return pr;
}

/* The sum in rank order of one double of every rank. */
static double rank_order_sum(double mine) {
    double *all = malloc((size_t)p * sizeof *all), s = 0;
    CHECK_OK(BDMPI_Allgather(&mine, 1, BDMPI_DOUBLE, all, 1, BDMPI_DOUBLE, BDMPI_COMM_WORLD));
    for (int q = 0; q < p; q++) s += all[q];
    free(all);
    return s;
}

int main(int argc, char **argv) {
    CHECK_OK(BDMPI_Init(&argc, &argv));
    CHECK_OK(BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r));
    CHECK_OK(BDMPI_Comm_size(BDMPI_COMM_WORLD, &p));
    conf_rank = r;
    n = argc > 1 ? atol(argv[1]) : 3000;
    deg = argc > 2 ? atoi(argv[2]) : 8;
    int iters = argc > 3 ? atoi(argv[3]) : 15;
    long lo = first(r), hi = first(r + 1), nl = hi - lo;

    /* the local rows: out-edges as local indices (< nl) or slots of the remote targets */
    CHECK_OK(BDMPI_Entercritical()); /* "reading the input": one rank at a time */
    size_t *rowptr = BDMPI_sbmalloc((size_t)(nl + 1) * sizeof *rowptr);
    rowptr[0] = 0;
    for (long u = lo; u < hi; u++) rowptr[u - lo + 1] = rowptr[u - lo] + (size_t)degree(u);
    size_t nnz = rowptr[nl];
    long *col = BDMPI_sbmalloc((nnz + 1) * sizeof *col);
    for (long u = lo; u < hi; u++)
        for (int k = 0; k < degree(u); k++) col[rowptr[u - lo] + (size_t)k] = target(u, k);
    CHECK_OK(BDMPI_Exitcritical());

    /* the distinct remote targets, sorted (so grouped by owner), and what goes to whom */
    long *remote = BDMPI_sbmalloc((nnz + 1) * sizeof *remote);
    size_t nsend = 0;
    for (size_t k = 0; k < nnz; k++)
        if (col[k] < lo || col[k] >= hi) remote[nsend++] = col[k];
    qsort(remote, nsend, sizeof *remote, cmp_long);
    size_t distinct = 0;
    for (size_t k = 0; k < nsend; k++)
        if (k == 0 || remote[k] != remote[k - 1]) remote[distinct++] = remote[k];
    nsend = distinct;
    size_t *scount = calloc((size_t)p, sizeof *scount), *sdispl = calloc((size_t)p + 1, sizeof *sdispl);
    size_t *rcount = calloc((size_t)p, sizeof *rcount), *rdispl = calloc((size_t)p + 1, sizeof *rdispl);
    for (size_t k = 0; k < nsend; k++) scount[owner(remote[k])]++;
    for (int q = 0; q < p; q++) sdispl[q + 1] = sdispl[q] + scount[q];
    for (size_t k = 0; k < nnz; k++) {
        if (col[k] >= lo && col[k] < hi) {
            col[k] -= lo;
        } else {
            long *at = bsearch(&col[k], remote, nsend, sizeof *remote, cmp_long);
            col[k] = nl + (at - remote);
        }
    }
    CHECK_OK(BDMPI_Alltoall(scount, 1, BDMPI_SIZE_T, rcount, 1, BDMPI_SIZE_T, BDMPI_COMM_WORLD));
    for (int q = 0; q < p; q++) rdispl[q + 1] = rdispl[q] + rcount[q];
    size_t nrecv = rdispl[p];
    long *rinds = BDMPI_sbmalloc((nrecv + 1) * sizeof *rinds);
    CHECK_OK(BDMPI_Alltoallv(remote, scount, sdispl, BDMPI_LONG, rinds, rcount, rdispl, BDMPI_LONG,
                             BDMPI_COMM_WORLD));
    for (size_t k = 0; k < nrecv; k++) {
        CHECK(rinds[k] >= lo && rinds[k] < hi, "a partial sum for vertex %ld, not mine", rinds[k]);
        rinds[k] -= lo;
    }
    BDMPI_sbfree(remote);

    double *pr = BDMPI_sbmalloc((size_t)(nl + 1) * sizeof *pr);
    double *acc = BDMPI_sbmalloc((size_t)(nl + (long)nsend + 1) * sizeof *acc);
    double *recv = BDMPI_sbmalloc((nrecv + 1) * sizeof *recv);
    double *result[2];
    for (int mode = 0; mode < 2; mode++) {
        const char *name = mode ? "p2p" : "a2a";
        for (long u = 0; u < nl; u++) pr[u] = 1.0 / n;
        for (int it = 0; it < iters; it++) {
            double sinks = 0, change = 0, most = 0, all_most = 0;
            memset(acc, 0, (size_t)(nl + (long)nsend) * sizeof *acc);
            for (long u = 0; u < nl; u++) {
                size_t d = rowptr[u + 1] - rowptr[u];
                if (d == 0) sinks += pr[u];
                for (size_t k = rowptr[u]; k < rowptr[u + 1]; k++) acc[col[k]] += pr[u] / (double)d;
            }
            double all_sinks = rank_order_sum(sinks);
            if (mode == 0) {
                CHECK_OK(BDMPI_Alltoallv(acc + nl, scount, sdispl, BDMPI_DOUBLE, recv, rcount, rdispl,
                                         BDMPI_DOUBLE, BDMPI_COMM_WORLD));
            } else {
                BDMPI_Request *reqs = malloc((size_t)p * sizeof *reqs);
                int nreq = 0;
                for (int q = 0; q < p; q++)
                    if (scount[q] > 0)
                        CHECK_OK(BDMPI_Isend(acc + nl + sdispl[q], scount[q], BDMPI_DOUBLE, q, it,
                                             BDMPI_COMM_WORLD, &reqs[nreq++]));
                for (int q = 0; q < p; q++) {
                    if (rcount[q] == 0) continue;
                    BDMPI_Status st;
                    size_t got = 0;
                    CHECK_OK(BDMPI_Probe(BDMPI_ANY_SOURCE, it, BDMPI_COMM_WORLD, &st));
                    CHECK_OK(BDMPI_Get_count(&st, BDMPI_DOUBLE, &got));
                    int from = st.MPI_SOURCE;
                    CHECK(from >= 0 && from < p && got == rcount[from], "%zu partial sums from %d", got, from);
                    if (from < 0 || from >= p) break;
                    CHECK_OK(BDMPI_Recv(recv + rdispl[from], got, BDMPI_DOUBLE, from, it, BDMPI_COMM_WORLD, &st));
                }
                CHECK_OK(BDMPI_Waitall(nreq, reqs, BDMPI_STATUS_IGNORE));
                free(reqs);
            }
            for (size_t k = 0; k < nrecv; k++) acc[rinds[k]] += recv[k];
            for (long u = 0; u < nl; u++) {
                double v = 0.15 / n + 0.85 * (acc[u] + all_sinks / n);
                double dv = fabs(v - pr[u]);
                change += dv;
                most = dv > most ? dv : most;
                pr[u] = v;
            }
            double l1 = rank_order_sum(change);
            CHECK_OK(BDMPI_Allreduce(&most, &all_most, 1, BDMPI_DOUBLE, BDMPI_MAX, BDMPI_COMM_WORLD));
            if (r == 0) say("%s iteration %d: L1 change %.17g, largest %.17g", name, it, l1, all_most);
        }
        /* the whole vector at rank 0 */
        int *counts = malloc((size_t)p * sizeof *counts), *displs = malloc((size_t)p * sizeof *displs);
        for (int q = 0; q < p; q++) counts[q] = (int)(first(q + 1) - first(q)), displs[q] = (int)first(q);
        result[mode] = r == 0 ? malloc((size_t)n * sizeof(double)) : NULL;
        CHECK_OK(MPI_Gatherv(pr, (int)nl, MPI_DOUBLE, result[mode], counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD));
        free(counts);
        free(displs);
        long best = -1;
        for (long u = 0; u < nl; u++)
            if (best < 0 || pr[u] > pr[best]) best = u;
        say("%s: vertices %ld..%ld, highest %ld (%.17g), hash %016llx", name, lo, hi, best + lo,
            best >= 0 ? pr[best] : 0.0, (unsigned long long)hash(HASH0, pr, (size_t)nl * sizeof *pr));
    }

    if (r == 0) {
        double *ref = sequential(iters), worst = 0, sum = 0;
        for (long v = 0; v < n; v++) {
            double e = fabs(result[0][v] - ref[v]) / ref[v];
            worst = e > worst ? e : worst;
            sum += result[0][v];
        }
        CHECK(worst < 1e-12, "the distributed PageRank is off the sequential one by %g", worst);
        CHECK(memcmp(result[0], result[1], (size_t)n * sizeof(double)) == 0,
              "the a2a and p2p exchanges give different bits");
        CHECK(fabs(sum - 1) < 1e-9, "the ranks sum to %.17g", sum);
        say("checked against the sequential PageRank of %ld vertices (sum %.12f)", n, sum);
        free(ref);
        free(result[0]);
        free(result[1]);
    }
    CHECK_OK(BDMPI_Finalize());
    return finish();
}
