/* Point-to-point: Send/Recv of small and large messages (above -im, so that they may go
 * through files), Isend/Irecv with Wait, Test and Waitall, Probe/Iprobe, ANY_SOURCE and
 * ANY_TAG, PROC_NULL, Sendrecv, Get_count, message order, sends to every rank before any
 * receive (buffered sends), truncation; through both the BDMPI_ and the MPI_ names. */
#include <bdmpi.h>
#include "check.h"

static double value(int from, int to, size_t i) { return from * 1000003.0 + to * 7.0 + (double)i; }

int main(int argc, char **argv) {
    int r, p, i;
    size_t k;
    BDMPI_Status st;
    CHECK_OK(BDMPI_Init(&argc, &argv));
    CHECK_OK(BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r));
    CHECK_OK(BDMPI_Comm_size(BDMPI_COMM_WORLD, &p));
    check_rank = r;
    int next = (r + 1) % p, prev = (r + p - 1) % p;

    /* a ring of messages of growing size, up to 4 MiB */
    for (size_t n = 1; n <= ((size_t)1 << 19); n *= 8) {
        double *out = malloc(n * sizeof(double)), *in = malloc(n * sizeof(double));
        for (k = 0; k < n; k++) out[k] = value(r, next, k);
        CHECK_OK(BDMPI_Send(out, n, BDMPI_DOUBLE, next, 1, BDMPI_COMM_WORLD));
        CHECK_OK(BDMPI_Recv(in, n, BDMPI_DOUBLE, prev, 1, BDMPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == prev && st.BDMPI_SOURCE == prev && st.MPI_TAG == 1 &&
                  st.count == n && st.datatype == BDMPI_DOUBLE,
              "status of %zu doubles: source %d tag %d count %zu", n, st.MPI_SOURCE,
              st.MPI_TAG, st.count);
        size_t cnt = 0;
        CHECK_OK(BDMPI_Get_count(&st, BDMPI_DOUBLE, &cnt));
        CHECK(cnt == n, "Get_count: %zu of %zu", cnt, n);
        CHECK_OK(BDMPI_Get_count(&st, BDMPI_BYTE, &cnt));
        CHECK(cnt == n * 8, "Get_count in bytes: %zu", cnt);
        for (k = 0; k < n; k++)
            if (in[k] != value(prev, r, k)) {
                CHECK(0, "element %zu of %zu from %d: %g", k, n, prev, in[k]);
                break;
            }
        free(out);
        free(in);
    }

    /* every rank sends to every rank (itself too) before receiving anything; then receives
     * with ANY_SOURCE and sorts out who sent what by the status */
    int *seen = calloc(p, sizeof(int));
    for (i = 0; i < p; i++) {
        int msg[3] = {r, i, r * i};
        CHECK_OK(MPI_Send(msg, 3, MPI_INT, i, 7, MPI_COMM_WORLD));
    }
    for (i = 0; i < p; i++) {
        int msg[3];
        MPI_Status s;
        CHECK_OK(MPI_Recv(msg, 3, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &s));
        int n = -1;
        CHECK_OK(MPI_Get_count(&s, MPI_INT, &n));
        CHECK(n == 3 && s.MPI_SOURCE == msg[0] && msg[1] == r && msg[2] == msg[0] * r,
              "ANY_SOURCE message %d %d %d from %d (count %d)", msg[0], msg[1], msg[2],
              s.MPI_SOURCE, n);
        if (s.MPI_SOURCE >= 0 && s.MPI_SOURCE < p) seen[s.MPI_SOURCE]++;
    }
    for (i = 0; i < p; i++) CHECK(seen[i] == 1, "%d messages from rank %d", seen[i], i);
    free(seen);

    /* messages of one sender and tag arrive in order; ANY_TAG sees the tags */
    for (i = 0; i < 20; i++) CHECK_OK(BDMPI_Send(&i, 1, BDMPI_INT, next, 100 + i % 3, BDMPI_COMM_WORLD));
    int last[3] = {-1, -1, -1};
    for (i = 0; i < 20; i++) {
        int v;
        CHECK_OK(BDMPI_Recv(&v, 1, BDMPI_INT, prev, BDMPI_ANY_TAG, BDMPI_COMM_WORLD, &st));
        CHECK(st.MPI_TAG == 100 + v % 3 && v > last[v % 3], "message %d with tag %d", v, st.MPI_TAG);
        last[v % 3] = v;
        CHECK(v == i, "ANY_TAG gets messages of one sender in order: %d at %d", v, i);
    }

    /* Isend/Irecv: posted receives match in posting order; Test before and after; Waitall */
    {
        BDMPI_Request sreq[4], rreq[4];
        int out[4], in[4];
        for (i = 0; i < 4; i++) in[i] = -1;
        for (i = 0; i < 4; i++)
            CHECK_OK(BDMPI_Irecv(&in[i], 1, BDMPI_INT, prev, 9, BDMPI_COMM_WORLD, &rreq[i]));
        int flag = 7;
        CHECK_OK(BDMPI_Test(&rreq[0], &flag, &st));
        /* the previous rank may already have sent: either way the answer is a 0/1 flag */
        CHECK(flag == 0 || flag == 1, "Test's flag: %d", flag);
        if (flag) CHECK(rreq[0] == BDMPI_REQUEST_NULL, "a completed request is freed");
        for (i = 0; i < 4; i++) {
            out[i] = r * 10 + i;
            CHECK_OK(BDMPI_Isend(&out[i], 1, BDMPI_INT, next, 9, BDMPI_COMM_WORLD, &sreq[i]));
        }
        BDMPI_Status sts[4];
        CHECK_OK(BDMPI_Waitall(4, rreq, sts));
        CHECK_OK(BDMPI_Waitall(4, sreq, BDMPI_STATUS_IGNORE));
        for (i = 0; i < 4; i++) {
            CHECK(in[i] == prev * 10 + i, "posted receive %d got %d", i, in[i]);
            CHECK(rreq[i] == BDMPI_REQUEST_NULL && sreq[i] == BDMPI_REQUEST_NULL, "requests freed");
        }
        CHECK(flag || (sts[0].MPI_SOURCE == prev && sts[0].count == 1), "Waitall status");
        /* Test, then Wait if it was not complete */
        MPI_Request q;
        int v = -1, f = 0;
        CHECK_OK(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &q));
        CHECK_OK(MPI_Send(&r, 1, MPI_INT, next, 11, MPI_COMM_WORLD));
        CHECK_OK(MPI_Test(&q, &f, &st));
        if (!f) {
            CHECK(q != MPI_REQUEST_NULL, "an incomplete request stays");
            CHECK_OK(MPI_Wait(&q, &st));
        }
        CHECK(q == MPI_REQUEST_NULL, "the request is freed");
        CHECK(v == prev && st.MPI_SOURCE == prev, "MPI_Test/Wait got %d from %d", v, st.MPI_SOURCE);
        MPI_Request none = MPI_REQUEST_NULL;
        CHECK_OK(MPI_Wait(&none, &st));
    }

    /* Probe and Iprobe, then a receive of what was probed */
    {
        int n = 5 + r;
        long *out = malloc(n * sizeof(long));
        for (i = 0; i < n; i++) out[i] = (long)r << 32 | i;
        CHECK_OK(BDMPI_Send(out, n, BDMPI_LONG, next, 21, BDMPI_COMM_WORLD));
        CHECK_OK(BDMPI_Probe(BDMPI_ANY_SOURCE, 21, BDMPI_COMM_WORLD, &st));
        size_t cnt = 0;
        CHECK_OK(BDMPI_Get_count(&st, BDMPI_LONG, &cnt));
        int want = 5 + prev;
        CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 21 && cnt == (size_t)want,
              "Probe: source %d tag %d count %zu", st.MPI_SOURCE, st.MPI_TAG, cnt);
        int flag = 0;
        CHECK_OK(BDMPI_Iprobe(prev, 21, BDMPI_COMM_WORLD, &flag, &st));
        CHECK(flag == 1 && st.MPI_SOURCE == prev, "Iprobe sees the probed message");
        CHECK_OK(BDMPI_Iprobe(prev, 22, BDMPI_COMM_WORLD, &flag, &st));
        CHECK(flag == 0, "Iprobe of a tag nobody sent");
        long *in = malloc(want * sizeof(long));
        CHECK_OK(BDMPI_Recv(in, want, BDMPI_LONG, prev, 21, BDMPI_COMM_WORLD, &st));
        for (i = 0; i < want; i++) CHECK(in[i] == ((long)prev << 32 | i), "probed message %d", i);
        free(out);
        free(in);
    }

    /* Sendrecv around the ring, and with PROC_NULL */
    {
        double a = r + 0.5, b = -1;
        CHECK_OK(BDMPI_Sendrecv(&a, 1, BDMPI_DOUBLE, next, 31, &b, 1, BDMPI_DOUBLE, prev, 31,
                                BDMPI_COMM_WORLD, &st));
        CHECK(b == prev + 0.5 && st.MPI_SOURCE == prev, "Sendrecv got %g", b);
        b = -1;
        CHECK_OK(MPI_Sendrecv(&a, 1, MPI_DOUBLE, MPI_PROC_NULL, 32, &b, 1, MPI_DOUBLE,
                              MPI_PROC_NULL, 32, MPI_COMM_WORLD, &st));
        CHECK(b == -1 && st.MPI_SOURCE == MPI_PROC_NULL && st.count == 0, "PROC_NULL");
    }

    /* a message longer than the receive buffer: MPI_ERR_TRUNCATE, the first part kept */
    {
        char out[64], in[16];
        memset(out, 'a' + r % 26, sizeof out);
        memset(in, 0, sizeof in);
        CHECK_OK(BDMPI_Send(out, 64, BDMPI_CHAR, next, 41, BDMPI_COMM_WORLD));
        int rc = BDMPI_Recv(in, 16, BDMPI_CHAR, prev, 41, BDMPI_COMM_WORLD, &st);
        CHECK(rc == BDMPI_ERR_TRUNCATE, "truncation returned %d", rc);
        CHECK(in[0] == 'a' + prev % 26 && in[15] == 'a' + prev % 26, "the first part is kept");
    }

    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    CHECK_OK(BDMPI_Finalize());
    return finish();
}
