/* Every data-moving collective, through the BDMPI_ (size_t counts) and the MPI_ (int counts)
 * names, on COMM_WORLD, COMM_NODE, COMM_CWORLD, a split and a duplicate of COMM_WORLD:
 * Barrier, Bcast (every root, small and large), Gather/Gatherv and Scatter/Scatterv (three
 * roots, uneven counts, gaps that must stay untouched), Allgather/Allgatherv, Alltoall/
 * Alltoallv, and the overlapping buffers BDMPI allows (Alltoall with sendbuf == recvbuf,
 * Allgather from the caller's own place in recvbuf). Prints a checksum of what every rank
 * received. */
#define _GNU_SOURCE
#include <bdmpi.h>
#include "conf.h"

static int g; /* the rank in COMM_WORLD */

/* The element i that rank `from` gives to rank `to` in the collective numbered `op`. */
static int val(int op, int from, int to, int i) { return op * 10000000 + from * 100000 + to * 1000 + i; }

static void report(const char *comm, const char *what, const void *buf, size_t bytes) {
    say("%s %s hash %016llx", comm, what, (unsigned long long)hash(HASH0, buf, bytes));
}

static void collectives(const char *name, BDMPI_Comm c) {
    int q, m, i, j, root, names;
    char what[64];
    CHECK_OK(BDMPI_Comm_size(c, &q));
    CHECK_OK(MPI_Comm_rank(c, &m));

    CHECK_OK(BDMPI_Barrier(c));
    CHECK_OK(MPI_Barrier(c));

    /* Bcast from every root: small, and 200,000 ints from root 0 */
    for (root = 0; root < q; root++) {
        size_t n = root == 0 ? 200000 : (size_t)(root % 4) + 1;
        int *b = malloc(n * sizeof *b);
        for (size_t k = 0; k < n; k++) b[k] = m == root ? val(1, root, 0, (int)k) : -1;
        if (root % 2)
            CHECK_OK(MPI_Bcast(b, (int)n, MPI_INT, root, c));
        else
            CHECK_OK(BDMPI_Bcast(b, n, BDMPI_INT, root, c));
        size_t bad = 0;
        for (size_t k = 0; k < n; k++) bad += b[k] != val(1, root, 0, (int)k);
        CHECK(bad == 0, "%s: bcast from %d: %zu of %zu wrong", name, root, bad, n);
        snprintf(what, sizeof what, "bcast root %d", root);
        report(name, what, b, n * sizeof *b);
        free(b);
    }

    int roots[3] = {0, q - 1, q / 2};
    for (int ri = 0; ri < 3; ri++) {
        root = roots[ri];
        for (names = 0; names < 2; names++) {
            int op = 2 + names;
            /* Gather: 4 ints each */
            int mine[64], *all = malloc(sizeof(int) * (size_t)(4 * q + 2 * q * q + 8));
            for (i = 0; i < 4; i++) mine[i] = val(op, m, root, i);
            for (i = 0; i < 4 * q; i++) all[i] = -7;
            if (names)
                CHECK_OK(MPI_Gather(mine, 4, MPI_INT, all, 4, MPI_INT, root, c));
            else
                CHECK_OK(BDMPI_Gather(mine, 4, BDMPI_INT, all, 4, BDMPI_INT, root, c));
            if (m == root) {
                for (i = 0; i < q; i++)
                    for (j = 0; j < 4; j++)
                        CHECK(all[i * 4 + j] == val(op, i, root, j), "%s: gather [%d][%d]", name, i, j);
                snprintf(what, sizeof what, "gather%d root %d", names, root);
                report(name, what, all, (size_t)(4 * q) * sizeof *all);
            }
            /* Gatherv: rank i gives (i % 5) + 1 ints, placed with gaps of 2 */
            size_t counts[64], displs[64];
            int icounts[64], idispls[64], at = 0;
            for (i = 0; i < q; i++) {
                counts[i] = icounts[i] = i % 5 + 1;
                displs[i] = idispls[i] = at;
                at += icounts[i] + 2;
            }
            for (i = 0; i < at; i++) all[i] = -7;
            for (i = 0; i <= m % 5; i++) mine[i] = val(op + 2, m, root, i);
            if (names)
                CHECK_OK(MPI_Gatherv(mine, m % 5 + 1, MPI_INT, all, icounts, idispls, MPI_INT, root, c));
            else
                CHECK_OK(BDMPI_Gatherv(mine, (size_t)(m % 5 + 1), BDMPI_INT, all, counts, displs,
                                       BDMPI_INT, root, c));
            if (m == root) {
                for (i = 0; i < q; i++) {
                    for (j = 0; j < icounts[i]; j++)
                        CHECK(all[displs[i] + j] == val(op + 2, i, root, j), "%s: gatherv [%d][%d]", name, i, j);
                    CHECK(all[displs[i] + icounts[i]] == -7 && all[displs[i] + icounts[i] + 1] == -7,
                          "%s: gatherv wrote into the gap after %d", name, i);
                }
                snprintf(what, sizeof what, "gatherv%d root %d", names, root);
                report(name, what, all, (size_t)at * sizeof *all);
            }

            /* Scatter: 3 ints each */
            int got[16];
            for (i = 0; i < q; i++)
                for (j = 0; j < 3; j++) all[i * 3 + j] = val(op + 4, root, i, j);
            for (i = 0; i < 16; i++) got[i] = -1;
            if (names)
                CHECK_OK(MPI_Scatter(all, 3, MPI_INT, got, 3, MPI_INT, root, c));
            else
                CHECK_OK(BDMPI_Scatter(all, 3, BDMPI_INT, got, 3, BDMPI_INT, root, c));
            for (i = 0; i < 3; i++) CHECK(got[i] == val(op + 4, root, m, i), "%s: scatter [%d]", name, i);
            CHECK(got[3] == -1, "%s: scatter wrote past its piece", name);
            snprintf(what, sizeof what, "scatter%d root %d", names, root);
            report(name, what, got, 3 * sizeof *got);
            /* Scatterv: rank i gets (i * 7) % 5 + 1 ints, taken from places with gaps */
            at = 0;
            for (i = 0; i < q; i++) {
                counts[i] = icounts[i] = (i * 7) % 5 + 1;
                displs[i] = idispls[i] = at;
                for (j = 0; j < icounts[i]; j++) all[at + j] = val(op + 6, root, i, j);
                all[at + icounts[i]] = -5;
                at += icounts[i] + 1;
            }
            for (i = 0; i < 16; i++) got[i] = -1;
            if (names)
                CHECK_OK(MPI_Scatterv(all, icounts, idispls, MPI_INT, got, 8, MPI_INT, root, c));
            else
                CHECK_OK(BDMPI_Scatterv(all, counts, displs, BDMPI_INT, got, 8, BDMPI_INT, root, c));
            int want = (m * 7) % 5 + 1;
            for (i = 0; i < want; i++) CHECK(got[i] == val(op + 6, root, m, i), "%s: scatterv [%d]", name, i);
            CHECK(got[want] == -1, "%s: scatterv wrote past its piece", name);
            snprintf(what, sizeof what, "scatterv%d root %d", names, root);
            report(name, what, got, (size_t)(want + 1) * sizeof *got);
            free(all);
        }
    }

    for (names = 0; names < 2; names++) {
        /* Allgather: 2 doubles each */
        double d[2] = {m + 0.25 + names, -m - 0.5}, *alld = malloc(2 * (size_t)q * sizeof *alld);
        if (names)
            CHECK_OK(MPI_Allgather(d, 2, MPI_DOUBLE, alld, 2, MPI_DOUBLE, c));
        else
            CHECK_OK(BDMPI_Allgather(d, 2, BDMPI_DOUBLE, alld, 2, BDMPI_DOUBLE, c));
        for (i = 0; i < q; i++)
            CHECK(alld[2 * i] == i + 0.25 + names && alld[2 * i + 1] == -i - 0.5, "%s: allgather %d", name, i);
        snprintf(what, sizeof what, "allgather%d", names);
        report(name, what, alld, 2 * (size_t)q * sizeof *alld);
        free(alld);

        /* Allgatherv: rank i gives q - i shorts, placed with gaps of 1 */
        short s[64], *alls = malloc(sizeof(short) * (size_t)(q * q + 2 * q + 1));
        size_t counts[64], displs[64];
        int icounts[64], idispls[64], at = 0;
        for (i = 0; i < q; i++) {
            counts[i] = icounts[i] = q - i;
            displs[i] = idispls[i] = at;
            at += q - i + 1;
        }
        for (i = 0; i < q - m; i++) s[i] = (short)(m * 64 + i + names);
        for (i = 0; i < at; i++) alls[i] = -9;
        if (names)
            CHECK_OK(MPI_Allgatherv(s, q - m, MPI_SHORT, alls, icounts, idispls, MPI_SHORT, c));
        else
            CHECK_OK(BDMPI_Allgatherv(s, (size_t)(q - m), BDMPI_SHORT, alls, counts, displs,
                                      BDMPI_SHORT, c));
        for (i = 0; i < q; i++) {
            for (j = 0; j < q - i; j++)
                CHECK(alls[displs[i] + j] == i * 64 + j + names, "%s: allgatherv [%d][%d]", name, i, j);
            CHECK(alls[displs[i] + q - i] == -9, "%s: allgatherv gap %d", name, i);
        }
        snprintf(what, sizeof what, "allgatherv%d", names);
        report(name, what, alls, (size_t)at * sizeof *alls);
        free(alls);

        /* Alltoall: 3000 ints to every rank */
        int n = 3000, op = 20 + names;
        int *out = malloc(sizeof(int) * (size_t)(n * q)), *in = malloc(sizeof(int) * (size_t)(n * q));
        for (i = 0; i < q; i++)
            for (j = 0; j < n; j++) out[i * n + j] = val(op, m, i, j);
        if (names)
            CHECK_OK(MPI_Alltoall(out, n, MPI_INT, in, n, MPI_INT, c));
        else
            CHECK_OK(BDMPI_Alltoall(out, (size_t)n, BDMPI_INT, in, (size_t)n, BDMPI_INT, c));
        size_t bad = 0;
        for (i = 0; i < q; i++)
            for (j = 0; j < n; j++) bad += in[i * n + j] != val(op, i, m, j);
        CHECK(bad == 0, "%s: alltoall: %zu wrong", name, bad);
        snprintf(what, sizeof what, "alltoall%d", names);
        report(name, what, in, sizeof(int) * (size_t)(n * q));
        /* the same in place: sendbuf == recvbuf */
        if (names)
            CHECK_OK(MPI_Alltoall(out, n, MPI_INT, out, n, MPI_INT, c));
        else
            CHECK_OK(BDMPI_Alltoall(out, (size_t)n, BDMPI_INT, out, (size_t)n, BDMPI_INT, c));
        CHECK(memcmp(in, out, sizeof(int) * (size_t)(n * q)) == 0, "%s: alltoall in place", name);
        free(out);
        free(in);

        /* Alltoallv: rank m sends (m + i) % 4 longs to rank i, spaced with gaps */
        size_t sc[64], sd[64], rc[64], rd[64];
        int isc[64], isd[64], irc[64], ird[64], sat = 0, rat = 0;
        long *sbuf = malloc(sizeof(long) * 6 * (size_t)q), *rbuf = malloc(sizeof(long) * 6 * (size_t)q);
        for (i = 0; i < q; i++) {
            sc[i] = isc[i] = (m + i) % 4;
            sd[i] = isd[i] = sat;
            for (j = 0; j < isc[i]; j++) sbuf[sat + j] = (long)val(op + 2, m, i, j);
            sat += isc[i] + 1;
            rc[i] = irc[i] = (i + m) % 4;
            rd[i] = ird[i] = rat;
            rat += irc[i] + 2;
        }
        for (i = 0; i < rat; i++) rbuf[i] = -3;
        if (names)
            CHECK_OK(MPI_Alltoallv(sbuf, isc, isd, MPI_LONG, rbuf, irc, ird, MPI_LONG, c));
        else
            CHECK_OK(BDMPI_Alltoallv(sbuf, sc, sd, BDMPI_LONG, rbuf, rc, rd, BDMPI_LONG, c));
        for (i = 0; i < q; i++) {
            for (j = 0; j < irc[i]; j++)
                CHECK(rbuf[rd[i] + j] == val(op + 2, i, m, j), "%s: alltoallv [%d][%d] = %ld", name, i, j, rbuf[rd[i] + j]);
            CHECK(rbuf[rd[i] + irc[i]] == -3 && rbuf[rd[i] + irc[i] + 1] == -3,
                  "%s: alltoallv wrote past the piece from %d", name, i);
        }
        snprintf(what, sizeof what, "alltoallv%d", names);
        report(name, what, rbuf, sizeof(long) * (size_t)rat);
        free(sbuf);
        free(rbuf);

        /* Allgather from the caller's own place in the receive buffer */
        int *ag = malloc(sizeof(int) * 2 * (size_t)q);
        for (i = 0; i < 2 * q; i++) ag[i] = -1;
        ag[2 * m] = val(op + 4, m, 0, 0);
        ag[2 * m + 1] = val(op + 4, m, 0, 1);
        if (names)
            CHECK_OK(MPI_Allgather(ag + 2 * m, 2, MPI_INT, ag, 2, MPI_INT, c));
        else
            CHECK_OK(BDMPI_Allgather(ag + 2 * m, 2, BDMPI_INT, ag, 2, BDMPI_INT, c));
        for (i = 0; i < q; i++)
            CHECK(ag[2 * i] == val(op + 4, i, 0, 0) && ag[2 * i + 1] == val(op + 4, i, 0, 1),
                  "%s: allgather in place [%d]", name, i);
        snprintf(what, sizeof what, "allgather-in-place%d", names);
        report(name, what, ag, sizeof(int) * 2 * (size_t)q);
        free(ag);
    }
    /* empty pieces, empty calls, and more overlapping buffers */
    for (names = 0; names < 2; names++) {
        int op = 30 + names, root = (names * 5) % q;
        size_t counts[64], displs[64];
        int icounts[64], idispls[64], at = 0;
        int *buf = malloc(sizeof(int) * (size_t)(4 * q + 4)), mine[4];
        /* Gatherv and Allgatherv where every third rank gives nothing */
        for (i = 0; i < q; i++) {
            counts[i] = icounts[i] = i % 3 ? 2 : 0;
            displs[i] = idispls[i] = at;
            at += icounts[i] + 1;
        }
        for (i = 0; i < 2; i++) mine[i] = val(op, m, root, i);
        for (i = 0; i < at; i++) buf[i] = -4;
        if (names)
            CHECK_OK(MPI_Allgatherv(mine, icounts[m], MPI_INT, buf, icounts, idispls, MPI_INT, c));
        else
            CHECK_OK(BDMPI_Gatherv(icounts[m] ? mine : NULL, counts[m], BDMPI_INT, buf, counts, displs,
                                   BDMPI_INT, root, c));
        if (names || m == root) {
            for (i = 0; i < q; i++) {
                for (j = 0; j < icounts[i]; j++)
                    CHECK(buf[displs[i] + j] == val(op, i, root, j), "%s: empty-piece gather [%d][%d]", name, i, j);
                CHECK(buf[displs[i] + icounts[i]] == -4, "%s: empty-piece gather gap %d", name, i);
            }
            snprintf(what, sizeof what, "empty-piece gather%d", names);
            report(name, what, buf, sizeof(int) * (size_t)at);
        }
        /* Scatterv that gives every third rank nothing */
        for (i = 0; i < at; i++) buf[i] = m == root ? val(op + 2, root, i, 0) : -4;
        mine[0] = mine[1] = mine[2] = -6;
        if (names)
            CHECK_OK(MPI_Scatterv(buf, icounts, idispls, MPI_INT, mine, icounts[m], MPI_INT, root, c));
        else
            CHECK_OK(BDMPI_Scatterv(buf, counts, displs, BDMPI_INT, mine, counts[m], BDMPI_INT, root, c));
        for (j = 0; j < icounts[m]; j++)
            CHECK(mine[j] == val(op + 2, root, idispls[m] + j, 0), "%s: empty-piece scatterv [%d]", name, j);
        CHECK(mine[icounts[m]] == -6, "%s: empty-piece scatterv wrote past its piece", name);
        snprintf(what, sizeof what, "empty-piece scatterv%d", names);
        report(name, what, mine, sizeof(int) * 3);

        /* nothing at all */
        if (names) {
            CHECK_OK(MPI_Bcast(NULL, 0, MPI_INT, root, c));
            CHECK_OK(MPI_Allreduce(NULL, NULL, 0, MPI_INT, MPI_SUM, c));
        } else {
            CHECK_OK(BDMPI_Bcast(NULL, 0, BDMPI_INT, root, c));
            CHECK_OK(BDMPI_Alltoall(NULL, 0, BDMPI_INT, NULL, 0, BDMPI_INT, c));
        }

        /* Gather from the root's own place in recvbuf; Scatter into the root's own place in
         * sendbuf; Alltoallv with sendbuf == recvbuf (the counts are symmetric) */
        for (i = 0; i < 4 * q; i++) buf[i] = -4;
        int *from = m == root ? buf + 2 * root : mine;
        from[0] = val(op + 4, m, root, 0);
        from[1] = val(op + 4, m, root, 1);
        if (names)
            CHECK_OK(MPI_Gather(from, 2, MPI_INT, buf, 2, MPI_INT, root, c));
        else
            CHECK_OK(BDMPI_Gather(from, 2, BDMPI_INT, buf, 2, BDMPI_INT, root, c));
        if (m == root) {
            for (i = 0; i < q; i++)
                CHECK(buf[2 * i] == val(op + 4, i, root, 0) && buf[2 * i + 1] == val(op + 4, i, root, 1),
                      "%s: gather in place [%d]", name, i);
            snprintf(what, sizeof what, "gather-in-place%d", names);
            report(name, what, buf, sizeof(int) * 2 * (size_t)q);
            for (i = 0; i < 2 * q; i++) buf[i] = val(op + 6, root, i / 2, i % 2);
        }
        int *into = m == root ? buf + 2 * root : mine;
        if (m != root) mine[0] = mine[1] = -6;
        if (names)
            CHECK_OK(MPI_Scatter(buf, 2, MPI_INT, into, 2, MPI_INT, root, c));
        else
            CHECK_OK(BDMPI_Scatter(buf, 2, BDMPI_INT, into, 2, BDMPI_INT, root, c));
        CHECK(into[0] == val(op + 6, root, m, 0) && into[1] == val(op + 6, root, m, 1),
              "%s: scatter in place: %d %d", name, into[0], into[1]);
        snprintf(what, sizeof what, "scatter-in-place%d", names);
        report(name, what, into, sizeof(int) * 2);

        size_t sc[64], sd[64];
        int isc[64], isd[64], sat = 0;
        for (i = 0; i < q; i++) {
            sc[i] = isc[i] = (m + i + names) % 3;
            sd[i] = isd[i] = sat;
            for (j = 0; j < isc[i]; j++) buf[sat + j] = val(op + 8, m, i, j);
            sat += isc[i];
        }
        if (names)
            CHECK_OK(MPI_Alltoallv(buf, isc, isd, MPI_INT, buf, isc, isd, MPI_INT, c));
        else
            CHECK_OK(BDMPI_Alltoallv(buf, sc, sd, BDMPI_INT, buf, sc, sd, BDMPI_INT, c));
        for (i = 0; i < q; i++)
            for (j = 0; j < isc[i]; j++)
                CHECK(buf[sd[i] + j] == val(op + 8, i, m, j), "%s: alltoallv in place [%d][%d]", name, i, j);
        snprintf(what, sizeof what, "alltoallv-in-place%d", names);
        report(name, what, buf, sizeof(int) * (size_t)sat);
        free(buf);
    }

    CHECK_OK(BDMPI_Barrier(c));
}

int main(int argc, char **argv) {
    int p;
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &g));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    conf_rank = g;

    collectives("world", BDMPI_COMM_WORLD);
    collectives("node", BDMPI_COMM_NODE);
    collectives("cworld", BDMPI_COMM_CWORLD);
    BDMPI_Comm half = BDMPI_COMM_NULL, dup = BDMPI_COMM_NULL;
    CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, g % 2, -g, &half));
    collectives(g % 2 ? "odd" : "even", half);
    CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    collectives("dup", dup);
    CHECK_OK(MPI_Comm_free(&dup));
    CHECK_OK(BDMPI_Comm_free(&half));

    CHECK_OK(MPI_Finalize());
    return finish();
}
