/* Sample sort, BDMPI style: every rank sorts its keys (in storage-backed memory), gives p - 1
 * regular samples (Allgather), rank 0 picks p - 1 splitters from the sorted samples and
 * broadcasts them (Bcast), the keys go to their buckets' ranks (Alltoall of counts,
 * Alltoallv of keys) and each rank sorts what it got. Checks: neighbours' boundaries in order
 * (Sendrecv), the global count (Allreduce), each rank's offset (Exscan), and, at rank 0, the
 * whole output (Gather of counts, Gatherv of keys) against a sequential sort of every rank's
 * input. Keys repeat (they are drawn from a range smaller than their number).
 *
 * Usage: samplesort [KEYS_PER_RANK] (default 20000; rank r has KEYS_PER_RANK + r * 37). */
#define _GNU_SOURCE
#include <bdmpi.h>
#include "conf.h"

static int r, p;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static size_t keys_of(int q, size_t per) { return per + (size_t)q * 37; }
static uint64_t key(int q, size_t i, size_t range) { return mix((uint64_t)q, i) % range; }

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    conf_rank = r;
    size_t per = argc > 1 ? (size_t)atol(argv[1]) : 20000, total = 0;
    for (int q = 0; q < p; q++) total += keys_of(q, per);
    size_t range = total / 3 + 1, n = keys_of(r, per);

    uint64_t *keys = BDMPI_sbmalloc((n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = key(r, i, range);
    qsort(keys, n, sizeof *keys, cmp_u64);

    /* p - 1 regular samples of every rank; splitters from rank 0 */
    size_t ns = (size_t)(p - 1);
    uint64_t *samples = malloc((ns + 1) * sizeof *samples);
    uint64_t *all_samples = malloc((ns * (size_t)p + 1) * sizeof *all_samples);
    uint64_t *splitters = malloc((size_t)p * sizeof *splitters);
    for (size_t k = 0; k < ns; k++) samples[k] = keys[(k + 1) * n / (size_t)p];
    CHECK_OK(BDMPI_Allgather(samples, ns, BDMPI_UINT64_T, all_samples, ns, BDMPI_UINT64_T,
                             BDMPI_COMM_WORLD));
    if (r == 0) {
        qsort(all_samples, ns * (size_t)p, sizeof *all_samples, cmp_u64);
        for (size_t k = 0; k < ns; k++) splitters[k] = all_samples[(k + 1) * ns];
    }
    CHECK_OK(MPI_Bcast(splitters, p - 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
    for (int k = 1; k < p - 1; k++) CHECK(splitters[k - 1] <= splitters[k], "splitters out of order");

    /* buckets: keys below splitter t (and not below splitter t - 1) go to rank t */
    size_t *scount = calloc((size_t)p, sizeof *scount), *sdispl = calloc((size_t)p, sizeof *sdispl);
    size_t *rcount = calloc((size_t)p, sizeof *rcount), *rdispl = calloc((size_t)p, sizeof *rdispl);
    for (size_t i = 0, t = 0; i < n; i++) {
        while ((int)t < p - 1 && keys[i] >= splitters[t]) t++;
        scount[t]++;
    }
    for (int q = 1; q < p; q++) sdispl[q] = sdispl[q - 1] + scount[q - 1];
    CHECK_OK(BDMPI_Alltoall(scount, 1, BDMPI_SIZE_T, rcount, 1, BDMPI_SIZE_T, BDMPI_COMM_WORLD));
    for (int q = 1; q < p; q++) rdispl[q] = rdispl[q - 1] + rcount[q - 1];
    size_t mine = rdispl[p - 1] + rcount[p - 1];
    uint64_t *out = BDMPI_sbmalloc((mine + 1) * sizeof *out);
    CHECK_OK(BDMPI_Alltoallv(keys, scount, sdispl, BDMPI_UINT64_T, out, rcount, rdispl, BDMPI_UINT64_T,
                             BDMPI_COMM_WORLD));
    BDMPI_sbfree(keys);
    qsort(out, mine, sizeof *out, cmp_u64);

    /* checks: the count, the offsets, the boundaries between neighbours */
    unsigned long count = mine, all = 0, offset = 0;
    CHECK_OK(BDMPI_Allreduce(&count, &all, 1, BDMPI_UNSIGNED_LONG, BDMPI_SUM, BDMPI_COMM_WORLD));
    CHECK(all == total, "%lu keys in all, want %zu", all, total);
    CHECK_OK(MPI_Exscan(&count, &offset, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD));
    if (r == 0) offset = 0;
    uint64_t last[2] = {mine ? out[mine - 1] : 0, mine > 0}, before[2] = {0, 0};
    CHECK_OK(BDMPI_Sendrecv(last, 2, BDMPI_UINT64_T, (r + 1) % p, 5, before, 2, BDMPI_UINT64_T,
                            (r + p - 1) % p, 5, BDMPI_COMM_WORLD, BDMPI_STATUS_IGNORE));
    if (r > 0 && mine > 0 && before[1]) CHECK(before[0] <= out[0], "rank %d ends above my first key", r - 1);
    say("keys %lu..%lu (%zu): first %llu last %llu hash %016llx", offset, offset + mine, mine,
        (unsigned long long)(mine ? out[0] : 0), (unsigned long long)(mine ? out[mine - 1] : 0),
        (unsigned long long)hash(HASH0, out, mine * sizeof *out));

    /* rank 0: the whole output against a sequential sort */
    int icount = (int)mine, *counts = NULL, *displs = NULL;
    uint64_t *everything = NULL;
    if (r == 0) {
        counts = malloc((size_t)p * sizeof *counts);
        displs = malloc((size_t)p * sizeof *displs);
        everything = malloc((total + 1) * sizeof *everything);
    }
    CHECK_OK(BDMPI_Gather(&icount, 1, BDMPI_INT, counts, 1, BDMPI_INT, 0, BDMPI_COMM_WORLD));
    if (r == 0)
        for (int q = 0, at = 0; q < p; q++) displs[q] = at, at += counts[q];
    CHECK_OK(MPI_Gatherv(out, icount, MPI_UINT64_T, everything, counts, displs, MPI_UINT64_T, 0,
                         MPI_COMM_WORLD));
    if (r == 0) {
        uint64_t *ref = malloc((total + 1) * sizeof *ref);
        size_t at = 0;
        for (int q = 0; q < p; q++)
            for (size_t i = 0; i < keys_of(q, per); i++) ref[at++] = key(q, i, range);
        qsort(ref, total, sizeof *ref, cmp_u64);
        CHECK(memcmp(ref, everything, total * sizeof *ref) == 0, "the sorted keys differ from a sequential sort");
        say("checked %zu keys against a sequential sort: hash %016llx", total,
            (unsigned long long)hash(HASH0, everything, total * sizeof *everything));
        free(ref);
    }
    free(everything);
    free(counts);
    free(displs);
    BDMPI_sbfree(out);
    free(samples);
    free(all_samples);
    free(splitters);
    free(scount);
    free(sdispl);
    free(rcount);
    free(rdispl);
    CHECK_OK(MPI_Finalize());
    return finish();
}
