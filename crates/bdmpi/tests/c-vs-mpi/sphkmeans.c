/* Spherical K-means on sparse rows, BDMPI style: rank r holds a block of unit-length sparse
 * rows (CSR, in storage-backed memory). A centroid is the sum of its members' rows; a row goes
 * to the centroid of highest cosine similarity. The sums are kept in fixed point (each unit
 * row scaled by 2^30 and rounded), so combining them is integer addition, exact in any order:
 * a run gives the same bits under bdmprun and mpirun, and a sequential run of the same
 * algorithm at rank 0 must give exactly the same objective in every iteration.
 *
 * The initial centroids are K rows spread over the matrix, broadcast by their owners (Bcast
 * from several roots; two start on the same row). Every iteration: assign, then combine the per-cluster sums and counts
 * (Allreduce; every third iteration Reduce to rank 0 + Bcast) and the objective and number of
 * moved rows (Allreduce). An empty cluster is reseeded with the row least similar to its
 * centroid (Allreduce MINLOC over (similarity, row), then a Bcast of the row by its owner).
 *
 * Rows come from a hash: row i is about topic mix(i, 0) % TOPICS, with 6..11 non-zeros, most in
 * the topic's band of columns, values 1..5.
 *
 * Usage: sphkmeans [ROWS [COLS [K [ITERATIONS]]]] (default 4000 300 10 25). */
#define _GNU_SOURCE
#include <bdmpi.h>
#include <math.h>
#include "conf.h"

#define TOPICS 6
#define SCALE 1073741824.0 /* 2^30 */

static int r, p, d, k;
static long m;

/* Row i as (column, fixed-point unit value) pairs, sorted by column; returns the count. */
static int make_row(long i, int *cols, int64_t *vals) {
    int topic = (int)(mix((uint64_t)i, 0) % TOPICS), nz = 6 + (int)(mix((uint64_t)i, 1) % 6), n = 0;
    int band = d / TOPICS;
    double raw[32], norm = 0;
    for (int j = 0; j < nz; j++) {
        uint64_t h = mix((uint64_t)i, (uint64_t)j + 2);
        int c = j < nz - 2 ? (topic * band + (int)(h % (uint64_t)(band + band / 2))) % d
                         : (int)(h % (uint64_t)d);
        int dup = 0;
        for (int t = 0; t < n; t++) dup |= cols[t] == c;
        if (dup) continue;
        cols[n] = c;
        raw[n] = (double)(1 + (h >> 32) % 5);
        n++;
    }
    /* sort by column (insertion) */
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && cols[b - 1] > cols[b]; b--) {
            int tc = cols[b]; cols[b] = cols[b - 1]; cols[b - 1] = tc;
            double tv = raw[b]; raw[b] = raw[b - 1]; raw[b - 1] = tv;
        }
    for (int t = 0; t < n; t++) norm += raw[t] * raw[t];
    norm = sqrt(norm);
    for (int t = 0; t < n; t++) vals[t] = llround(raw[t] / norm * SCALE);
    return n;
}

/* Cosine similarity of a row with every centroid (sums S, their norms); the best cluster
 * (ties to the lowest) and its similarity. */
static int assign(const int *cols, const int64_t *vals, int nz, const int64_t *S, const double *norms,
                  double *best_sim) {
    int best = -1;
    double bs = 0;
    for (int c = 0; c < k; c++) {
        if (norms[c] == 0) continue;
        double dot = 0;
        for (int t = 0; t < nz; t++) dot += (double)vals[t] * (double)S[(size_t)c * d + cols[t]];
        double s = dot / (norms[c] * SCALE);
        if (best < 0 || s > bs) best = c, bs = s;
    }
    *best_sim = bs;
    return best;
}

static void centroid_norms(const int64_t *S, double *norms) {
    for (int c = 0; c < k; c++) {
        double s = 0;
        for (int j = 0; j < d; j++) s += (double)S[(size_t)c * d + j] * (double)S[(size_t)c * d + j];
        norms[c] = sqrt(s);
    }
}

/* The last cluster starts on the same row as the first, so that it is empty after the first
 * assignment (ties go to the lower cluster) and gets reseeded. */
static long seed_row(int c) { return c == k - 1 && c > 0 ? 7 % m : ((long)c * m / k + 7) % m; }
static int owner(long i) {
    int q = (int)(i * p / m);
    while (q > 0 && m * q / p > i) q--;
    while (q < p - 1 && m * (q + 1) / p <= i) q++;
    return q;
}

/* One dense row (fixed point) into S's row c. */
static void put_row(int64_t *S, int c, long i) {
    int cols[32];
    int64_t vals[32];
    memset(S + (size_t)c * d, 0, (size_t)d * sizeof *S);
    int nz = make_row(i, cols, vals);
    for (int t = 0; t < nz; t++) S[(size_t)c * d + cols[t]] = vals[t];
}

/* The sequential run at rank 0: the objective and moved rows of every iteration. */
static void sequential(int iters, long long *obj, long *moved, int *ran) {
    int *cols = malloc((size_t)m * 32 * sizeof *cols), *nz = malloc((size_t)m * sizeof *nz);
    int64_t *vals = malloc((size_t)m * 32 * sizeof *vals), *S = calloc((size_t)k * d, sizeof *S);
    int *part = malloc((size_t)m * sizeof *part);
    long *count = malloc((size_t)k * sizeof *count);
    double *norms = malloc((size_t)k * sizeof *norms), *sims = malloc((size_t)m * sizeof *sims);
    for (long i = 0; i < m; i++) nz[i] = make_row(i, cols + i * 32, vals + i * 32), part[i] = -1;
    for (int c = 0; c < k; c++) put_row(S, c, seed_row(c));
    int it;
    for (it = 0; it < iters; it++) {
        centroid_norms(S, norms);
        long long o = 0;
        long mv = 0;
        int64_t *next = calloc((size_t)k * d, sizeof *next);
        memset(count, 0, (size_t)k * sizeof *count);
        for (long i = 0; i < m; i++) {
            int c = assign(cols + i * 32, vals + i * 32, nz[i], S, norms, &sims[i]);
            mv += c != part[i];
            part[i] = c;
            o += llround(sims[i] * SCALE);
            count[c]++;
            for (int t = 0; t < nz[i]; t++) next[(size_t)c * d + cols[i * 32 + t]] += vals[i * 32 + t];
        }
        memcpy(S, next, (size_t)k * d * sizeof *S);
        free(next);
        for (int c = 0; c < k; c++)
            if (count[c] == 0) {
                long worst = -1;
                for (long i = 0; i < m; i++)
                    if (worst < 0 || sims[i] < sims[worst]) worst = i;
                put_row(S, c, worst);
                sims[worst] = 2; /* taken */
            }
        obj[it] = o;
        moved[it] = mv;
        if (mv == 0) {
            it++;
            break;
        }
    }
    *ran = it;
    free(cols); free(nz); free(vals); free(S); free(part); free(count); free(norms); free(sims);
}

int main(int argc, char **argv) {
    CHECK_OK(BDMPI_Init(&argc, &argv));
    CHECK_OK(BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r));
    CHECK_OK(BDMPI_Comm_size(BDMPI_COMM_WORLD, &p));
    conf_rank = r;
    m = argc > 1 ? atol(argv[1]) : 4000;
    d = argc > 2 ? atoi(argv[2]) : 300;
    k = argc > 3 ? atoi(argv[3]) : 10;
    int iters = argc > 4 ? atoi(argv[4]) : 25;
    long lo = m * r / p, hi = m * (r + 1) / p, nl = hi - lo;

    /* the local rows, CSR, in storage-backed memory */
    size_t *rowptr = BDMPI_sbmalloc((size_t)(nl + 1) * sizeof *rowptr);
    int *cols = BDMPI_sbmalloc((size_t)(nl * 32 + 1) * sizeof *cols);
    int64_t *vals = BDMPI_sbmalloc((size_t)(nl * 32 + 1) * sizeof *vals);
    rowptr[0] = 0;
    for (long i = 0; i < nl; i++) {
        int nz = make_row(lo + i, cols + rowptr[i], vals + rowptr[i]);
        rowptr[i + 1] = rowptr[i] + (size_t)nz;
    }
    int *part = BDMPI_sbmalloc((size_t)(nl + 1) * sizeof *part);
    double *sims = BDMPI_sbmalloc((size_t)(nl + 1) * sizeof *sims);
    for (long i = 0; i < nl; i++) part[i] = -1;

    int64_t *S = calloc((size_t)k * d, sizeof *S), *local = calloc((size_t)k * d, sizeof *local);
    long *count = calloc((size_t)k, sizeof *count), *all_count = calloc((size_t)k, sizeof *all_count);
    double *norms = calloc((size_t)k, sizeof *norms);
    for (int c = 0; c < k; c++) {
        long i = seed_row(c);
        if (owner(i) == r) put_row(S, c, i);
        CHECK_OK(BDMPI_Bcast(S + (size_t)c * d, (size_t)d, BDMPI_INT64_T, owner(i), BDMPI_COMM_WORLD));
    }

    long long *objs = calloc((size_t)iters + 1, sizeof *objs);
    long *moves = calloc((size_t)iters + 1, sizeof *moves);
    int it;
    for (it = 0; it < iters; it++) {
        centroid_norms(S, norms);
        long long o = 0, all_o = 0;
        long mv = 0, all_mv = 0;
        memset(local, 0, (size_t)k * d * sizeof *local);
        memset(count, 0, (size_t)k * sizeof *count);
        for (long i = 0; i < nl; i++) {
            int nz = (int)(rowptr[i + 1] - rowptr[i]);
            int c = assign(cols + rowptr[i], vals + rowptr[i], nz, S, norms, &sims[i]);
            mv += c != part[i];
            part[i] = c;
            o += llround(sims[i] * SCALE);
            count[c]++;
            for (int t = 0; t < nz; t++) local[(size_t)c * d + cols[rowptr[i] + (size_t)t]] += vals[rowptr[i] + (size_t)t];
        }
        if (it % 3 == 2) {
            CHECK_OK(BDMPI_Reduce(local, S, (size_t)k * d, BDMPI_INT64_T, BDMPI_SUM, 0, BDMPI_COMM_WORLD));
            CHECK_OK(MPI_Bcast(S, k * d, MPI_INT64_T, 0, MPI_COMM_WORLD));
            CHECK_OK(MPI_Reduce(count, all_count, k, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
            CHECK_OK(BDMPI_Bcast(all_count, (size_t)k, BDMPI_LONG, 0, BDMPI_COMM_WORLD));
        } else {
            CHECK_OK(MPI_Allreduce(local, S, k * d, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
            CHECK_OK(BDMPI_Allreduce(count, all_count, (size_t)k, BDMPI_LONG, BDMPI_SUM, BDMPI_COMM_WORLD));
        }
        CHECK_OK(BDMPI_Allreduce(&o, &all_o, 1, BDMPI_LONG_LONG_INT, BDMPI_SUM, BDMPI_COMM_WORLD));
        CHECK_OK(MPI_Allreduce(&mv, &all_mv, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        int reseeded = 0;
        for (int c = 0; c < k; c++) {
            if (all_count[c] != 0) continue;
            struct { double val; int loc; } mine = {2, -1}, worst;
            for (long i = 0; i < nl; i++)
                if (mine.loc < 0 || sims[i] < mine.val) mine.val = sims[i], mine.loc = (int)(lo + i);
            CHECK_OK(BDMPI_Allreduce(&mine, &worst, 1, BDMPI_DOUBLE_INT, BDMPI_MINLOC, BDMPI_COMM_WORLD));
            int from = owner(worst.loc);
            if (from == r) {
                put_row(S, c, worst.loc);
                sims[worst.loc - lo] = 2; /* taken */
            }
            CHECK_OK(BDMPI_Bcast(S + (size_t)c * d, (size_t)d, BDMPI_INT64_T, from, BDMPI_COMM_WORLD));
            reseeded++;
        }
        objs[it] = all_o;
        moves[it] = all_mv;
        if (r == 0) say("iteration %d: objective %lld, moved %ld, reseeded %d", it, all_o, all_mv, reseeded);
        if (all_mv == 0) {
            it++;
            break;
        }
    }

    say("rows %ld..%ld: assignment hash %016llx", lo, hi,
        (unsigned long long)hash(HASH0, part, (size_t)nl * sizeof *part));
    if (r == 0) {
        long long ref_obj[256];
        long ref_moved[256];
        int ran = 0;
        sequential(iters < 256 ? iters : 256, ref_obj, ref_moved, &ran);
        CHECK(ran == it, "the sequential run took %d iterations, the distributed one %d", ran, it);
        for (int t = 0; t < it && t < ran; t++)
            CHECK(ref_obj[t] == objs[t] && ref_moved[t] == moves[t],
                  "iteration %d: objective %lld moved %ld, sequentially %lld and %ld", t, objs[t],
                  moves[t], ref_obj[t], ref_moved[t]);
        say("checked %d iterations against a sequential run", ran);
        for (int c = 0; c < k; c++) say("cluster %d: %ld rows", c, all_count[c]);
    }
    free(objs);
    free(moves);
    free(S);
    free(local);
    free(count);
    free(all_count);
    free(norms);
    CHECK_OK(BDMPI_Finalize());
    return finish();
}
