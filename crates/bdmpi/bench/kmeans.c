/* K-means (Lloyd) on dense points against BDMPI's API: a benchmark for bdmprun and, compiled
 * with crates/bdmpi/tests/mpi-shim/bdmpi.h, the same program as plain MPI.
 *
 * Rank r holds N / p points of D floats (in storage-backed memory), generated from a hash
 * around K hidden centres, the same for every rank count. The initial centres are the first K
 * points of rank 0, broadcast; an iteration assigns every point to its nearest centre
 * (squared Euclidean distance), sums the points and counts per centre, allreduces them and
 * moves the centres.
 *
 * Usage: kmeans N D K ITERATIONS. Rank 0 prints the points that changed centre in every
 * iteration, a checksum of the final centres and the seconds per iteration. */
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

static float unit(uint64_t h) { return (float)(h >> 40) / (float)(1ull << 24); }

int main(int argc, char **argv) {
    int r, p;
    BDMPI_Init(&argc, &argv);
    BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r);
    BDMPI_Comm_size(BDMPI_COMM_WORLD, &p);
    if (argc != 5) {
        if (r == 0) fprintf(stderr, "usage: %s N D K ITERATIONS\n", argv[0]);
        BDMPI_Finalize();
        return 2;
    }
    long n = atol(argv[1]);
    int d = atoi(argv[2]), k = atoi(argv[3]), iters = atoi(argv[4]);
    long lo = n * r / p, hi = n * (r + 1) / p, nl = hi - lo;

    float *x = BDMPI_sbmalloc((size_t)nl * d * sizeof *x);
    int *part = BDMPI_sbmalloc((size_t)(nl ? nl : 1) * sizeof *part);
    for (long i = 0; i < nl; i++) {
        uint64_t g = (uint64_t)(lo + i), c = mix(g) % (uint64_t)k;
        for (int j = 0; j < d; j++)
            x[i * d + j] = 10.0f * unit(mix(c * 1000003u + (uint64_t)j)) + unit(mix(g * 7919u + (uint64_t)j)) - 0.5f;
        part[i] = -1;
    }
    float *centres = malloc((size_t)k * d * sizeof *centres);
    double *sums = malloc((size_t)k * d * sizeof *sums), *all = malloc((size_t)k * d * sizeof *all);
    long *counts = malloc(k * sizeof *counts), *allc = malloc(k * sizeof *allc);
    if (r == 0) memcpy(centres, x, (size_t)k * d * sizeof *centres);
    BDMPI_Bcast(centres, (size_t)k * d, BDMPI_FLOAT, 0, BDMPI_COMM_WORLD);
    BDMPI_Barrier(BDMPI_COMM_WORLD);
    double t0 = BDMPI_Wtime();
    for (int it = 0; it < iters; it++) {
        long moved = 0, all_moved = 0;
        memset(sums, 0, (size_t)k * d * sizeof *sums);
        memset(counts, 0, k * sizeof *counts);
        for (long i = 0; i < nl; i++) {
            const float *pt = x + i * d;
            int best = 0;
            float bd = 0;
            for (int c = 0; c < k; c++) {
                float s = 0;
                for (int j = 0; j < d; j++) {
                    float t = pt[j] - centres[c * d + j];
                    s += t * t;
                }
                if (c == 0 || s < bd) { bd = s; best = c; }
            }
            if (best != part[i]) moved++;
            part[i] = best;
            counts[best]++;
            for (int j = 0; j < d; j++) sums[best * d + j] += pt[j];
        }
        BDMPI_Allreduce(sums, all, (size_t)k * d, BDMPI_DOUBLE, BDMPI_SUM, BDMPI_COMM_WORLD);
        BDMPI_Allreduce(counts, allc, k, BDMPI_LONG, BDMPI_SUM, BDMPI_COMM_WORLD);
        BDMPI_Allreduce(&moved, &all_moved, 1, BDMPI_LONG, BDMPI_SUM, BDMPI_COMM_WORLD);
        for (int c = 0; c < k; c++)
            if (allc[c] > 0)
                for (int j = 0; j < d; j++) centres[c * d + j] = (float)(all[c * d + j] / allc[c]);
        if (r == 0) printf("iteration %d moved %ld\n", it, all_moved);
    }
    double secs = BDMPI_Wtime() - t0, check = 0;
    for (int c = 0; c < k * d; c++) check += centres[c] * (double)(c % 7 + 1);
    if (r == 0) printf("centres %.6f\nseconds per iteration %.4f\n", check, secs / iters);
    BDMPI_Finalize();
    return 0;
}
