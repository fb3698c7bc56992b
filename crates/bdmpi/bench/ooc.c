/* Out of core: every rank keeps its data in storage-backed memory (BDMPI_sbmalloc) and
 * sweeps all of it in every iteration (reads each element and writes it back changed), with
 * an allreduce of the sums in between. Together the ranks hold far more than the node's
 * memory limit (-rm); run with -sbma araw, the node releases a rank's data whenever it blocks.
 *
 * Usage: ooc MIB_PER_RANK ITERATIONS. Prints the checksum of every iteration and checks it
 * against the value computed from the formula; exits 1 on a mismatch. */
#include <bdmpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t f(uint64_t rank, uint64_t i) { return (rank * 1000003u + i) % 1000; }

int main(int argc, char **argv) {
    int r, p;
    BDMPI_Init(&argc, &argv);
    BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r);
    BDMPI_Comm_size(BDMPI_COMM_WORLD, &p);
    if (argc != 3) {
        if (r == 0) fprintf(stderr, "usage: %s MIB_PER_RANK ITERATIONS\n", argv[0]);
        BDMPI_Finalize();
        return 2;
    }
    size_t n = (size_t)atol(argv[1]) << 17; /* 8-byte elements */
    int iters = atoi(argv[2]), bad = 0;
    uint64_t *a = BDMPI_sbmalloc(n * sizeof *a);
    if (!a) {
        fprintf(stderr, "rank %d: no memory for %zu elements\n", r, n);
        return 1;
    }
    for (size_t i = 0; i < n; i++) a[i] = f((uint64_t)r, i);
    BDMPI_Barrier(BDMPI_COMM_WORLD);
    for (int it = 0; it < iters; it++) {
        uint64_t s = 0, total = 0, want = 0;
        for (size_t i = 0; i < n; i++) {
            s += a[i];
            a[i] += 1;
        }
        BDMPI_Allreduce(&s, &total, 1, BDMPI_UINT64_T, BDMPI_SUM, BDMPI_COMM_WORLD);
        /* every element was f(q, i) + it before this sweep */
        for (int q = 0; q < p; q++) {
            /* f is periodic in i with period 1000 */
            uint64_t full = n / 1000, rest = n % 1000, per = 0, part = 0;
            for (size_t i = 0; i < 1000; i++) per += f((uint64_t)q, i);
            for (size_t i = 0; i < rest; i++) part += f((uint64_t)q, i);
            want += full * per + part + (uint64_t)it * n;
        }
        if (r == 0) printf("iteration %d checksum %llu\n", it, (unsigned long long)total);
        if (total != want) {
            if (r == 0) fprintf(stderr, "iteration %d: checksum %llu, want %llu\n", it, (unsigned long long)total, (unsigned long long)want);
            bad = 1;
        }
    }
    BDMPI_Finalize();
    BDMPI_sbfree(a);
    return bad;
}
