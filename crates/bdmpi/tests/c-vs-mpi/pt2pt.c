/* Point-to-point, through the BDMPI_ and the MPI_ names: Send/Recv of 1 to 300,000 elements,
 * sends to every rank before any receive (BDMPI's sends are buffered), ANY_SOURCE, ANY_TAG and
 * both together, the order of one sender's messages, Isend/Irecv with Wait, Test and Waitall
 * (posted receives match in posting order), Probe/Iprobe with Get_count, Sendrecv, and
 * PROC_NULL. Prints what arrived (sources, tags, counts, checksums). */
#define _GNU_SOURCE
#include <bdmpi.h>
#include "conf.h"

static double value(int from, int to, size_t i) { return from * 1000003.0 + to * 7.0 + (double)i; }

int main(int argc, char **argv) {
    int r, p, i;
    BDMPI_Status st;
    CHECK_OK(BDMPI_Init(&argc, &argv));
    CHECK_OK(BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r));
    CHECK_OK(BDMPI_Comm_size(BDMPI_COMM_WORLD, &p));
    conf_rank = r;
    int next = (r + 1) % p, prev = (r + p - 1) % p;

    /* a ring of messages of growing size */
    for (size_t n = 1; n <= 300000; n *= 23) {
        double *out = malloc(n * sizeof *out), *in = malloc(n * sizeof *in);
        for (size_t k = 0; k < n; k++) out[k] = value(r, next, k);
        if (n % 2)
            CHECK_OK(BDMPI_Send(out, n, BDMPI_DOUBLE, next, 1, BDMPI_COMM_WORLD));
        else
            CHECK_OK(MPI_Send(out, (int)n, MPI_DOUBLE, next, 1, MPI_COMM_WORLD));
        CHECK_OK(BDMPI_Recv(in, n, BDMPI_DOUBLE, prev, 1, BDMPI_COMM_WORLD, &st));
        size_t cnt = 0;
        CHECK_OK(BDMPI_Get_count(&st, BDMPI_DOUBLE, &cnt));
        CHECK(st.MPI_SOURCE == prev && st.BDMPI_SOURCE == prev && st.MPI_TAG == 1 && cnt == n &&
                  st.count == n,
              "status of %zu doubles: source %d tag %d count %zu", n, st.MPI_SOURCE, st.MPI_TAG,
              cnt);
        size_t bad = 0;
        for (size_t k = 0; k < n; k++) bad += in[k] != value(prev, r, k);
        CHECK(bad == 0, "%zu of %zu doubles from %d differ", bad, n, prev);
        say("ring %zu: from %d tag %d count %zu hash %016llx", n, st.MPI_SOURCE, st.MPI_TAG, cnt,
            (unsigned long long)hash(HASH0, in, n * sizeof *in));
        free(out);
        free(in);
    }

    /* every rank sends to every rank (itself too) before receiving; ANY_SOURCE receives */
    {
        int *from = calloc((size_t)p, sizeof *from);
        for (i = 0; i < p; i++) {
            int msg[3] = {r, i, r * i + 5};
            CHECK_OK(MPI_Send(msg, 3, MPI_INT, i, 7, MPI_COMM_WORLD));
        }
        for (i = 0; i < p; i++) {
            int msg[3] = {-1, -1, -1}, n = -1;
            MPI_Status s;
            CHECK_OK(MPI_Recv(msg, 3, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &s));
            CHECK_OK(MPI_Get_count(&s, MPI_INT, &n));
            CHECK(n == 3 && s.MPI_SOURCE == msg[0] && msg[1] == r && msg[2] == msg[0] * r + 5,
                  "ANY_SOURCE got %d %d %d from %d (count %d)", msg[0], msg[1], msg[2],
                  s.MPI_SOURCE, n);
            if (s.MPI_SOURCE >= 0 && s.MPI_SOURCE < p) from[s.MPI_SOURCE] = msg[2];
        }
        uint64_t h = hash(HASH0, from, (size_t)p * sizeof *from);
        for (i = 0; i < p; i++) CHECK(from[i] == i * r + 5, "nothing from rank %d", i);
        say("all-to-all sends: hash %016llx", (unsigned long long)h);
        free(from);
    }

    /* one sender's messages arrive in order; ANY_TAG reports the tags */
    for (i = 0; i < 12; i++) CHECK_OK(BDMPI_Send(&i, 1, BDMPI_INT, next, 100 + i % 3, BDMPI_COMM_WORLD));
    {
        char tags[64] = "";
        for (i = 0; i < 12; i++) {
            int v = -1;
            CHECK_OK(BDMPI_Recv(&v, 1, BDMPI_INT, prev, BDMPI_ANY_TAG, BDMPI_COMM_WORLD, &st));
            CHECK(v == i && st.MPI_TAG == 100 + i % 3 && st.BDMPI_TAG == st.MPI_TAG,
                  "message %d of the sequence: %d tag %d", i, v, st.MPI_TAG);
            tags[i] = (char)('a' + st.MPI_TAG - 100);
        }
        say("any-tag sequence %s", tags);
    }

    /* both wild cards at rank 0: one message of every rank, tag = 1000 + its rank */
    {
        int mine = 1000 + r;
        CHECK_OK(MPI_Send(&mine, 1, MPI_INT, 0, 1000 + r, MPI_COMM_WORLD));
        if (r == 0) {
            int *tag_of = calloc((size_t)p, sizeof *tag_of);
            for (i = 0; i < p; i++) {
                int v = -1;
                CHECK_OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                CHECK(v == 1000 + st.MPI_SOURCE && st.MPI_TAG == 1000 + st.MPI_SOURCE,
                      "wild cards: %d from %d tag %d", v, st.MPI_SOURCE, st.MPI_TAG);
                if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < p) tag_of[st.MPI_SOURCE] = st.MPI_TAG;
            }
            for (i = 0; i < p; i++) CHECK(tag_of[i] == 1000 + i, "wild cards: rank %d", i);
            say("wild cards: %d messages, hash %016llx", p,
                (unsigned long long)hash(HASH0, tag_of, (size_t)p * sizeof *tag_of));
            free(tag_of);
        }
        /* nobody sends rank 0 anything else before it has received these */
        CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* posted receives match in posting order; Test once, then Wait; Waitall with statuses */
    {
        BDMPI_Request rreq[4], sreq[4];
        int in[4] = {-1, -1, -1, -1}, out[4];
        for (i = 0; i < 4; i++)
            CHECK_OK(BDMPI_Irecv(&in[i], 1, BDMPI_INT, prev, 9, BDMPI_COMM_WORLD, &rreq[i]));
        for (i = 0; i < 4; i++) {
            out[i] = r * 10 + i;
            if (i % 2)
                CHECK_OK(MPI_Isend(&out[i], 1, MPI_INT, next, 9, MPI_COMM_WORLD, &sreq[i]));
            else
                CHECK_OK(BDMPI_Isend(&out[i], 1, BDMPI_INT, next, 9, BDMPI_COMM_WORLD, &sreq[i]));
        }
        BDMPI_Status sts[4];
        int flag = 0;
        CHECK_OK(BDMPI_Test(&rreq[0], &flag, &sts[0]));
        if (flag) CHECK(rreq[0] == BDMPI_REQUEST_NULL, "a completed request is freed");
        CHECK_OK(BDMPI_Waitall(4, sreq, BDMPI_STATUS_IGNORE));
        if (flag)
            CHECK_OK(MPI_Waitall(3, rreq + 1, sts + 1));
        else
            CHECK_OK(BDMPI_Waitall(4, rreq, sts));
        for (i = 0; i < 4; i++) {
            CHECK(in[i] == prev * 10 + i, "posted receive %d got %d", i, in[i]);
            CHECK(sts[i].MPI_SOURCE == prev && sts[i].MPI_TAG == 9 && sts[i].count == 1,
                  "status %d: source %d tag %d count %zu", i, sts[i].MPI_SOURCE, sts[i].MPI_TAG,
                  sts[i].count);
            CHECK(rreq[i] == BDMPI_REQUEST_NULL && sreq[i] == BDMPI_REQUEST_NULL, "requests freed");
        }
        say("posted receives: %d %d %d %d", in[0], in[1], in[2], in[3]);

        /* a large message into a posted receive with ANY_SOURCE; MPI_Test, then MPI_Wait */
        size_t n = 200000;
        long *big = malloc(n * sizeof *big), *got = malloc(n * sizeof *got);
        for (size_t k = 0; k < n; k++) big[k] = (long)(r * 1000000 + k);
        MPI_Request q, s;
        CHECK_OK(MPI_Irecv(got, (int)n, MPI_LONG, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &q));
        CHECK_OK(MPI_Isend(big, (int)n, MPI_LONG, next, 11, MPI_COMM_WORLD, &s));
        int f = 0;
        CHECK_OK(MPI_Test(&q, &f, &st));
        if (!f) {
            CHECK(q != MPI_REQUEST_NULL, "an incomplete request stays");
            CHECK_OK(MPI_Wait(&q, &st));
        }
        CHECK_OK(BDMPI_Wait(&s, BDMPI_STATUS_IGNORE));
        CHECK(q == MPI_REQUEST_NULL && s == MPI_REQUEST_NULL, "requests freed");
        CHECK(st.MPI_SOURCE == prev && st.count == n, "large Irecv: source %d count %zu",
              st.MPI_SOURCE, st.count);
        size_t bad = 0;
        for (size_t k = 0; k < n; k++) bad += got[k] != (long)(prev * 1000000 + k);
        CHECK(bad == 0, "%zu longs of the large Irecv differ", bad);
        say("large irecv: from %d count %zu hash %016llx", st.MPI_SOURCE, st.count,
            (unsigned long long)hash(HASH0, got, n * sizeof *got));
        free(big);
        free(got);
        MPI_Request none = MPI_REQUEST_NULL;
        CHECK_OK(MPI_Wait(&none, MPI_STATUS_IGNORE));
    }

    /* Probe (ANY_SOURCE) and Get_count size the receive; Iprobe sees it too */
    for (int names = 0; names < 2; names++) {
        int n = 3 + (r + names) % 5, want = 3 + (prev + names) % 5;
        short *out = malloc((size_t)n * sizeof *out);
        for (i = 0; i < n; i++) out[i] = (short)(r * 100 + i);
        CHECK_OK(BDMPI_Send(out, (size_t)n, BDMPI_SHORT, next, 21 + names, BDMPI_COMM_WORLD));
        int cnt = -1, flag = 0;
        if (names) {
            MPI_Status s;
            CHECK_OK(MPI_Probe(MPI_ANY_SOURCE, 22, MPI_COMM_WORLD, &s));
            CHECK_OK(MPI_Get_count(&s, MPI_SHORT, &cnt));
            CHECK(s.MPI_SOURCE == prev && s.MPI_TAG == 22, "MPI_Probe: %d %d", s.MPI_SOURCE, s.MPI_TAG);
            CHECK_OK(MPI_Iprobe(prev, 22, MPI_COMM_WORLD, &flag, &s));
        } else {
            size_t c = 0;
            CHECK_OK(BDMPI_Probe(BDMPI_ANY_SOURCE, BDMPI_ANY_TAG, BDMPI_COMM_WORLD, &st));
            CHECK_OK(BDMPI_Get_count(&st, BDMPI_SHORT, &c));
            CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 21, "BDMPI_Probe: %d %d", st.MPI_SOURCE, st.MPI_TAG);
            cnt = (int)c;
            CHECK_OK(BDMPI_Iprobe(BDMPI_ANY_SOURCE, 21, BDMPI_COMM_WORLD, &flag, &st));
            CHECK(st.MPI_SOURCE == prev, "Iprobe's source %d", st.MPI_SOURCE);
        }
        CHECK(cnt == want && flag == 1, "probe: count %d (want %d), Iprobe flag %d", cnt, want, flag);
        int none = 1;
        CHECK_OK(BDMPI_Iprobe(prev, 23, BDMPI_COMM_WORLD, &none, BDMPI_STATUS_IGNORE));
        CHECK(none == 0, "Iprobe of a tag nobody sent");
        short *in = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *in);
        CHECK_OK(MPI_Recv(in, cnt, MPI_SHORT, prev, 21 + names, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (i = 0; i < cnt && i < want; i++) CHECK(in[i] == prev * 100 + i, "probed message [%d]", i);
        say("probe %d: count %d hash %016llx", names, cnt,
            (unsigned long long)hash(HASH0, in, (size_t)cnt * sizeof *in));
        free(out);
        free(in);
    }

    /* Sendrecv around the ring both ways, and with PROC_NULL */
    {
        double a = r + 0.5, b = -1;
        CHECK_OK(BDMPI_Sendrecv(&a, 1, BDMPI_DOUBLE, next, 31, &b, 1, BDMPI_DOUBLE, prev, 31,
                                BDMPI_COMM_WORLD, &st));
        CHECK(b == prev + 0.5 && st.MPI_SOURCE == prev && st.count == 1, "Sendrecv got %g", b);
        int x = r, y = -1;
        CHECK_OK(MPI_Sendrecv(&x, 1, MPI_INT, prev, 32, &y, 1, MPI_INT, next, 32, MPI_COMM_WORLD, &st));
        CHECK(y == next && st.MPI_SOURCE == next, "MPI_Sendrecv got %d", y);
        say("sendrecv: %g %d", b, y);
        b = -1;
        CHECK_OK(MPI_Sendrecv(&a, 1, MPI_DOUBLE, MPI_PROC_NULL, 33, &b, 1, MPI_DOUBLE,
                              MPI_PROC_NULL, 33, MPI_COMM_WORLD, &st));
        CHECK(b == -1 && st.MPI_SOURCE == MPI_PROC_NULL && st.count == 0,
              "Sendrecv with PROC_NULL: %g from %d count %zu", b, st.MPI_SOURCE, st.count);
        CHECK_OK(BDMPI_Send(&a, 1, BDMPI_DOUBLE, BDMPI_PROC_NULL, 34, BDMPI_COMM_WORLD));
        CHECK_OK(BDMPI_Recv(&b, 1, BDMPI_DOUBLE, BDMPI_PROC_NULL, 34, BDMPI_COMM_WORLD, &st));
        CHECK(b == -1 && st.MPI_SOURCE == BDMPI_PROC_NULL, "Recv from PROC_NULL");
        BDMPI_Request q[2];
        CHECK_OK(BDMPI_Irecv(&b, 1, BDMPI_DOUBLE, BDMPI_PROC_NULL, 35, BDMPI_COMM_WORLD, &q[0]));
        CHECK_OK(MPI_Isend(&a, 1, MPI_DOUBLE, MPI_PROC_NULL, 35, MPI_COMM_WORLD, &q[1]));
        CHECK_OK(BDMPI_Wait(&q[0], &st));
        CHECK(b == -1 && st.MPI_SOURCE == BDMPI_PROC_NULL && st.count == 0, "Irecv from PROC_NULL");
        CHECK_OK(MPI_Wait(&q[1], MPI_STATUS_IGNORE));
        CHECK_OK(BDMPI_Probe(BDMPI_PROC_NULL, 36, BDMPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == BDMPI_PROC_NULL, "Probe of PROC_NULL: source %d", st.MPI_SOURCE);
        int flag = 0;
        CHECK_OK(MPI_Iprobe(MPI_PROC_NULL, 36, MPI_COMM_WORLD, &flag, &st));
        CHECK(flag == 1 && st.MPI_SOURCE == MPI_PROC_NULL, "Iprobe of PROC_NULL: flag %d", flag);
        say("proc_null: untouched %g", b);
    }

    /* empty messages (NULL buffers), null requests, a count that is not whole */
    {
        int flag = 0, cnt = -1;
        size_t c = 7;
        CHECK_OK(BDMPI_Send(NULL, 0, BDMPI_INT, next, 41, BDMPI_COMM_WORLD));
        CHECK_OK(BDMPI_Probe(prev, 41, BDMPI_COMM_WORLD, &st));
        CHECK_OK(BDMPI_Get_count(&st, BDMPI_INT, &c));
        CHECK(c == 0 && st.MPI_SOURCE == prev, "an empty message: count %zu from %d", c, st.MPI_SOURCE);
        CHECK_OK(BDMPI_Recv(NULL, 0, BDMPI_INT, prev, 41, BDMPI_COMM_WORLD, &st));
        CHECK(st.count == 0 && st.MPI_TAG == 41, "an empty message received: count %zu", st.count);
        BDMPI_Request reqs[3] = {BDMPI_REQUEST_NULL, BDMPI_REQUEST_NULL, BDMPI_REQUEST_NULL};
        short three[3] = {1, 2, 3}, back[4];
        CHECK_OK(BDMPI_Irecv(back, 4, BDMPI_SHORT, prev, 42, BDMPI_COMM_WORLD, &reqs[1]));
        CHECK_OK(BDMPI_Send(three, 3, BDMPI_SHORT, next, 42, BDMPI_COMM_WORLD));
        BDMPI_Status sts[3];
        CHECK_OK(BDMPI_Waitall(3, reqs, sts));
        CHECK(reqs[1] == BDMPI_REQUEST_NULL && sts[1].count == 3 && sts[1].MPI_SOURCE == prev,
              "Waitall over null requests: count %zu", sts[1].count);
        CHECK_OK(MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE));
        CHECK(flag == 1, "Test of a null request");
        CHECK_OK(MPI_Get_count(&sts[1], MPI_INT, &cnt));
        CHECK(cnt == MPI_UNDEFINED, "3 shorts as ints: %d", cnt);
        CHECK_OK(MPI_Get_count(&sts[1], MPI_BYTE, &cnt));
        CHECK(cnt == 6, "3 shorts as bytes: %d", cnt);
        say("empty and null: count %zu, three shorts %d %d %d", c, back[0], back[1], back[2]);
    }

    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    CHECK_OK(BDMPI_Finalize());
    return finish();
}
