/* Barrier, Bcast, Gather(v), Scatter(v), Allgather(v), Alltoall(v), with the BDMPI_ (size_t)
 * and the MPI_ (int) names, from every root, with uneven counts, gaps between the pieces
 * (which must stay untouched) and different send and receive datatypes. */
#define _GNU_SOURCE
#include <bdmpi.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"

static int val(int from, int to, int i) { return from * 100000 + to * 100 + i; }

/* A counter shared by the ranks of this node (a file named after bdmprun's pid). */
static long *node_counter(void) {
    char name[64];
    snprintf(name, sizeof name, "/bdmpi-test-%d", (int)getppid());
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) return NULL;
    long *c = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return c == MAP_FAILED ? NULL : c;
}

int main(int argc, char **argv) {
    int r, p, i, j, root;
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    check_rank = r;
    int ns = test_ns();

    /* Barrier: nobody leaves round k before every rank of its node has entered it. */
    long *counter = node_counter();
    CHECK(counter != NULL, "shared counter");
    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    for (int k = 0; counter && k < 5; k++) {
        __atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
        CHECK_OK(k % 2 ? MPI_Barrier(MPI_COMM_WORLD) : BDMPI_Barrier(BDMPI_COMM_NODE));
        long c = __atomic_load_n(counter, __ATOMIC_SEQ_CST);
        CHECK(c >= (long)(k + 1) * ns && c <= (long)(k + 2) * ns, "round %d: counter %ld", k, c);
    }
    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    if (r % ns == 0) {
        char name[64];
        snprintf(name, sizeof name, "/bdmpi-test-%d", (int)getppid());
        shm_unlink(name);
    }

    /* Bcast from every root, small and large */
    for (root = 0; root < p; root++) {
        size_t n = root % 2 ? 3 : 300000;
        int *b = malloc(n * sizeof(int));
        for (size_t k = 0; k < n; k++) b[k] = r == root ? val(root, 0, (int)k) : -1;
        if (root % 3 == 0)
            CHECK_OK(BDMPI_Bcast(b, n, BDMPI_INT, root, BDMPI_COMM_WORLD));
        else
            CHECK_OK(MPI_Bcast(b, (int)n, MPI_INT, root, MPI_COMM_WORLD));
        for (size_t k = 0; k < n; k += (n > 10 ? 997 : 1)) CHECK(b[k] == val(root, 0, (int)k), "bcast from %d: [%zu] = %d", root, k, b[k]);
        CHECK(b[n - 1] == val(root, 0, (int)n - 1), "bcast last");
        free(b);
    }

    /* Gather, Gatherv (rank i gives i + 1 elements, placed with gaps of 2) */
    for (root = 0; root < p; root += (p > 3 ? p / 3 : 1)) {
        int mine[64], all[64 * 64 + 8];
        for (i = 0; i < 4; i++) mine[i] = val(r, root, i);
        for (i = 0; i < 4 * p; i++) all[i] = -7;
        CHECK_OK(BDMPI_Gather(mine, 4, BDMPI_INT, all, 4, BDMPI_INT, root, BDMPI_COMM_WORLD));
        if (r == root)
            for (i = 0; i < p; i++)
                for (j = 0; j < 4; j++) CHECK(all[i * 4 + j] == val(i, root, j), "gather [%d][%d]", i, j);
        /* the same as bytes on the receiving side */
        for (i = 0; i < 4 * p; i++) all[i] = -7;
        CHECK_OK(MPI_Gather(mine, 4, MPI_INT, all, 16, MPI_BYTE, root, MPI_COMM_WORLD));
        if (r == root)
            for (i = 0; i < p; i++) CHECK(all[i * 4 + 3] == val(i, root, 3), "gather as bytes [%d]", i);

        size_t counts[64], displs[64];
        int icounts[64], idispls[64], at = 0;
        for (i = 0; i < p; i++) {
            counts[i] = icounts[i] = i + 1;
            displs[i] = idispls[i] = at;
            at += i + 1 + 2;
        }
        for (i = 0; i < at; i++) all[i] = -7;
        for (i = 0; i <= r; i++) mine[i] = val(r, root, i);
        if (root % 2)
            CHECK_OK(MPI_Gatherv(mine, r + 1, MPI_INT, all, icounts, idispls, MPI_INT, root, MPI_COMM_WORLD));
        else
            CHECK_OK(BDMPI_Gatherv(mine, r + 1, BDMPI_INT, all, counts, displs, BDMPI_INT, root, BDMPI_COMM_WORLD));
        if (r == root)
            for (i = 0; i < p; i++) {
                for (j = 0; j <= i; j++) CHECK(all[displs[i] + j] == val(i, root, j), "gatherv [%d][%d]", i, j);
                CHECK(all[displs[i] + i + 1] == -7 && all[displs[i] + i + 2] == -7, "gatherv gap %d", i);
            }
    }

    /* Scatter, Scatterv */
    for (root = 0; root < p; root += (p > 3 ? p / 3 : 1)) {
        int src[64 * 68], mine[70];
        for (i = 0; i < p; i++)
            for (j = 0; j < 3; j++) src[i * 3 + j] = val(root, i, j);
        for (i = 0; i < 3; i++) mine[i] = -1;
        CHECK_OK(BDMPI_Scatter(src, 3, BDMPI_INT, mine, 3, BDMPI_INT, root, BDMPI_COMM_WORLD));
        for (i = 0; i < 3; i++) CHECK(mine[i] == val(root, r, i), "scatter [%d] = %d", i, mine[i]);
        size_t counts[64], displs[64];
        int icounts[64], idispls[64], at = 0;
        for (i = 0; i < p; i++) {
            counts[i] = icounts[i] = (i * 7) % 5 + 1;
            displs[i] = idispls[i] = at;
            for (j = 0; j < icounts[i]; j++) src[at + j] = val(root, i, j);
            at += icounts[i] + 1;
        }
        for (i = 0; i < 6; i++) mine[i] = -1;
        int want = (r * 7) % 5 + 1;
        if (root % 2)
            CHECK_OK(MPI_Scatterv(src, icounts, idispls, MPI_INT, mine, 6, MPI_INT, root, MPI_COMM_WORLD));
        else
            CHECK_OK(BDMPI_Scatterv(src, counts, displs, BDMPI_INT, mine, 6, BDMPI_INT, root, BDMPI_COMM_WORLD));
        for (i = 0; i < want; i++) CHECK(mine[i] == val(root, r, i), "scatterv [%d] = %d", i, mine[i]);
        CHECK(mine[want] == -1, "scatterv wrote past its piece");
    }

    /* Allgather, Allgatherv */
    {
        double d[2] = {r + 0.25, -r - 0.5}, all[2 * 64];
        CHECK_OK(BDMPI_Allgather(d, 2, BDMPI_DOUBLE, all, 2, BDMPI_DOUBLE, BDMPI_COMM_WORLD));
        for (i = 0; i < p; i++) CHECK(all[2 * i] == i + 0.25 && all[2 * i + 1] == -i - 0.5, "allgather %d", i);
        short s[64], alls[64 * 66];
        size_t counts[64], displs[64];
        int icounts[64], idispls[64], at = 0;
        for (i = 0; i < p; i++) {
            counts[i] = icounts[i] = p - i;
            displs[i] = idispls[i] = at;
            at += p - i + 1;
        }
        for (i = 0; i < p - r; i++) s[i] = (short)(r * 64 + i);
        for (int names = 0; names < 2; names++) {
            for (i = 0; i < at; i++) alls[i] = -9;
            if (names)
                CHECK_OK(MPI_Allgatherv(s, p - r, MPI_SHORT, alls, icounts, idispls, MPI_SHORT, MPI_COMM_WORLD));
            else
                CHECK_OK(BDMPI_Allgatherv(s, p - r, BDMPI_SHORT, alls, counts, displs, BDMPI_SHORT, BDMPI_COMM_WORLD));
            for (i = 0; i < p; i++) {
                for (j = 0; j < p - i; j++) CHECK(alls[displs[i] + j] == i * 64 + j, "allgatherv [%d][%d]", i, j);
                CHECK(alls[displs[i] + p - i] == -9, "allgatherv gap %d", i);
            }
        }
        int x = r, xs[64];
        CHECK_OK(MPI_Allgather(&x, 1, MPI_INT, xs, 1, MPI_INT, MPI_COMM_WORLD));
        for (i = 0; i < p; i++) CHECK(xs[i] == i, "MPI_Allgather %d", i);
    }

    /* Alltoall, Alltoallv */
    {
        int n = 1000;
        int *out = malloc(sizeof(int) * n * p), *in = malloc(sizeof(int) * n * p);
        for (i = 0; i < p; i++)
            for (j = 0; j < n; j++) out[i * n + j] = val(r, i, j);
        CHECK_OK(BDMPI_Alltoall(out, n, BDMPI_INT, in, n, BDMPI_INT, BDMPI_COMM_WORLD));
        for (i = 0; i < p; i++)
            for (j = 0; j < n; j += 99) CHECK(in[i * n + j] == val(i, r, j), "alltoall [%d][%d]", i, j);
        for (i = 0; i < n * p; i++) in[i] = -1;
        CHECK_OK(MPI_Alltoall(out, n, MPI_INT, in, n, MPI_INT, MPI_COMM_WORLD));
        for (i = 0; i < p; i++) CHECK(in[i * n + n - 1] == val(i, r, n - 1), "MPI_Alltoall %d", i);
        free(out);
        free(in);

        /* rank r sends (r + i) % 4 elements to rank i, spaced with gaps */
        size_t sc[64], sd[64], rc[64], rd[64];
        int isc[64], isd[64], irc[64], ird[64], sat = 0, rat = 0;
        long sbuf[64 * 6], rbuf[64 * 6];
        for (i = 0; i < p; i++) {
            sc[i] = isc[i] = (r + i) % 4;
            sd[i] = isd[i] = sat;
            for (j = 0; j < isc[i]; j++) sbuf[sat + j] = (long)val(r, i, j);
            sat += isc[i] + 1;
            rc[i] = irc[i] = (i + r) % 4 + 1; /* room for one more than comes */
            rd[i] = ird[i] = rat;
            rat += irc[i] + 1;
        }
        for (int names = 0; names < 2; names++) {
            for (i = 0; i < rat; i++) rbuf[i] = -3;
            if (names)
                CHECK_OK(MPI_Alltoallv(sbuf, isc, isd, MPI_LONG, rbuf, irc, ird, MPI_LONG, MPI_COMM_WORLD));
            else
                CHECK_OK(BDMPI_Alltoallv(sbuf, sc, sd, BDMPI_LONG, rbuf, rc, rd, BDMPI_LONG, BDMPI_COMM_WORLD));
            for (i = 0; i < p; i++) {
                int got = (i + r) % 4;
                for (j = 0; j < got; j++) CHECK(rbuf[rd[i] + j] == val(i, r, j), "alltoallv [%d][%d] = %ld", i, j, rbuf[rd[i] + j]);
                CHECK(rbuf[rd[i] + got] == -3, "alltoallv wrote past the piece from %d", i);
            }
        }
    }

    CHECK_OK(MPI_Finalize());
    return finish();
}
