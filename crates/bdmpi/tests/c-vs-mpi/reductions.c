/* Reductions, through both names: Reduce (every root), Allreduce, Scan and Exscan for every
 * integer and floating datatype and every operation MPI defines on it; MAXLOC/MINLOC on the
 * five pair types (ties go to the lowest location); sendbuf == recvbuf (which BDMPI allows);
 * BDMPI's Reduce_init/Reduce_fine and Merge. Expected results are folded here over the ranks'
 * contributions (values chosen so that no sum, product or order of combining rounds). Prints
 * a checksum of every rank's results per datatype. */
#define _GNU_SOURCE
#include <bdmpi.h>
#include "conf.h"

#define N 7
static int r, p;

/* Contribution of rank q, element i, to operation op. */
static long contrib(int q, int i, BDMPI_Op op, int is_signed) {
    if (op == BDMPI_SUM) return (q + 2 * i) % 5;
    if (op == BDMPI_PROD)
        return ((q + i) % 4 == 0 ? 2 : 1) * (is_signed && (q + i) % 3 == 0 ? -1 : 1);
    if (op == BDMPI_MIN || op == BDMPI_MAX) return (q * 7 + i * 3) % 11 - (is_signed ? 5 : 0);
    if (op == BDMPI_LAND || op == BDMPI_LOR || op == BDMPI_LXOR) return ((q + i) % 3) ? 2 : 0;
    return (q * 37 + i * 11) & 0x7f;
}

static long fold(long a, long b, BDMPI_Op op) {
    if (op == BDMPI_SUM) return a + b;
    if (op == BDMPI_PROD) return a * b;
    if (op == BDMPI_MIN) return a < b ? a : b;
    if (op == BDMPI_MAX) return a > b ? a : b;
    if (op == BDMPI_LAND) return a && b;
    if (op == BDMPI_LOR) return a || b;
    if (op == BDMPI_LXOR) return !a != !b;
    if (op == BDMPI_BAND) return a & b;
    if (op == BDMPI_BOR) return a | b;
    return a ^ b;
}

/* Ranks [0, upto) folded, element i. */
static long expect(int upto, int i, BDMPI_Op op, int is_signed) {
    long acc = contrib(0, i, op, is_signed);
    for (int q = 1; q < upto; q++) acc = fold(acc, contrib(q, i, op, is_signed), op);
    return acc;
}

#define NOPS 10
static BDMPI_Op all_ops[NOPS];
static const char *op_names[NOPS] = {"sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor"};

/* Reduce at a root that moves with the operation, Allreduce (BDMPI_ or MPI_ name by
 * operation), Scan, Exscan, and the in-place forms, of N elements of type T; `nops` of the
 * operations apply to T (the first 4 for floating types, all 10 for integers). */
#define TEST_TYPE(T, DT, SIGNED, NOPS_)                                                          \
    do {                                                                                         \
        uint64_t h = HASH0;                                                                      \
        for (int o = 0; o < (NOPS_); o++) {                                                      \
            BDMPI_Op op = all_ops[o];                                                            \
            T in[N], out[N];                                                                     \
            int root = (o + 1) % p, i;                                                           \
            for (i = 0; i < N; i++) in[i] = (T)contrib(r, i, op, SIGNED);                        \
            for (i = 0; i < N; i++) out[i] = (T)99;                                              \
            if (o % 2)                                                                           \
                CHECK_OK(MPI_Reduce(in, out, N, DT, op, root, MPI_COMM_WORLD));                  \
            else                                                                                 \
                CHECK_OK(BDMPI_Reduce(in, out, N, DT, op, root, BDMPI_COMM_WORLD));              \
            if (r == root) {                                                                     \
                for (i = 0; i < N; i++)                                                          \
                    CHECK(out[i] == (T)expect(p, i, op, SIGNED), "%s %s reduce [%d]", #DT,       \
                          op_names[o], i);                                                       \
                h = hash(h, out, sizeof out);                                                    \
            }                                                                                    \
            if (o % 2)                                                                           \
                CHECK_OK(BDMPI_Allreduce(in, out, N, DT, op, BDMPI_COMM_WORLD));                 \
            else                                                                                 \
                CHECK_OK(MPI_Allreduce(in, out, N, DT, op, MPI_COMM_WORLD));                     \
            for (i = 0; i < N; i++)                                                              \
                CHECK(out[i] == (T)expect(p, i, op, SIGNED), "%s %s allreduce [%d]", #DT,        \
                      op_names[o], i);                                                           \
            h = hash(h, out, sizeof out);                                                        \
            if (o % 2)                                                                           \
                CHECK_OK(MPI_Scan(in, out, N, DT, op, MPI_COMM_WORLD));                          \
            else                                                                                 \
                CHECK_OK(BDMPI_Scan(in, out, N, DT, op, BDMPI_COMM_WORLD));                      \
            for (i = 0; i < N; i++)                                                              \
                CHECK(out[i] == (T)expect(r + 1, i, op, SIGNED), "%s %s scan [%d]", #DT,         \
                      op_names[o], i);                                                           \
            h = hash(h, out, sizeof out);                                                        \
            if (o % 2)                                                                           \
                CHECK_OK(BDMPI_Exscan(in, out, N, DT, op, BDMPI_COMM_WORLD));                    \
            else                                                                                 \
                CHECK_OK(MPI_Exscan(in, out, N, DT, op, MPI_COMM_WORLD));                        \
            if (r > 0) {                                                                         \
                for (i = 0; i < N; i++)                                                          \
                    CHECK(out[i] == (T)expect(r, i, op, SIGNED), "%s %s exscan [%d]", #DT,       \
                          op_names[o], i);                                                       \
                h = hash(h, out, sizeof out);                                                    \
            }                                                                                    \
            /* in place */                                                                       \
            memcpy(out, in, sizeof in);                                                          \
            CHECK_OK(BDMPI_Scan(out, out, N, DT, op, BDMPI_COMM_WORLD));                         \
            for (i = 0; i < N; i++)                                                              \
                CHECK(out[i] == (T)expect(r + 1, i, op, SIGNED), "%s %s scan in place [%d]",     \
                      #DT, op_names[o], i);                                                      \
            memcpy(out, in, sizeof in);                                                          \
            CHECK_OK(MPI_Reduce(out, out, N, DT, op, root, MPI_COMM_WORLD));                     \
            if (r == root)                                                                       \
                for (i = 0; i < N; i++)                                                          \
                    CHECK(out[i] == (T)expect(p, i, op, SIGNED), "%s %s reduce in place [%d]",   \
                          #DT, op_names[o], i);                                                  \
            CHECK_OK(BDMPI_Allreduce(in, in, N, DT, op, BDMPI_COMM_WORLD));                      \
            for (i = 0; i < N; i++)                                                              \
                CHECK(in[i] == (T)expect(p, i, op, SIGNED), "%s %s allreduce in place [%d]",     \
                      #DT, op_names[o], i);                                                      \
        }                                                                                        \
        say("%s hash %016llx", #DT, (unsigned long long)h);                                      \
    } while (0)

typedef struct { float val; int loc; } fi_t;
typedef struct { double val; int loc; } di_t;
typedef struct { long val; int loc; } li_t;
typedef struct { short val; int loc; } si_t;
typedef struct { int val; int loc; } ii_t;

/* MAXLOC / MINLOC with Allreduce, Reduce and Scan: value (q * 5 + i) % 7 has ties between
 * ranks; the location is q * 10 + i, so the lowest location is the lowest rank. */
#define TEST_PAIR(T, VT, DT)                                                                     \
    do {                                                                                         \
        uint64_t h = HASH0;                                                                      \
        T in[N], out[N];                                                                         \
        memset(in, 0, sizeof in);                                                                \
        for (int i = 0; i < N; i++) {                                                            \
            in[i].val = (VT)((r * 5 + i) % 7);                                                   \
            in[i].loc = r * 10 + i;                                                              \
        }                                                                                        \
        for (int call = 0; call < 6; call++) {                                                   \
            BDMPI_Op op = call % 2 ? BDMPI_MAXLOC : BDMPI_MINLOC;                                \
            int upto = call < 4 ? p : r + 1, root = p - 1;                                      \
            memset(out, 0, sizeof out);                                                          \
            if (call < 2)                                                                        \
                CHECK_OK(BDMPI_Allreduce(in, out, N, DT, op, BDMPI_COMM_WORLD));                 \
            else if (call < 4)                                                                   \
                CHECK_OK(MPI_Reduce(in, out, N, DT, op, root, MPI_COMM_WORLD));                  \
            else                                                                                 \
                CHECK_OK(MPI_Scan(in, out, N, DT, op, MPI_COMM_WORLD));                          \
            if (call >= 2 && call < 4 && r != root) continue;                                    \
            for (int i = 0; i < N; i++) {                                                        \
                VT best = (VT)(i % 7);                                                           \
                int loc = i;                                                                     \
                for (int q = 1; q < upto; q++) {                                                 \
                    VT v = (VT)((q * 5 + i) % 7);                                                \
                    if (op == BDMPI_MAXLOC ? v > best : v < best) best = v, loc = q * 10 + i;    \
                }                                                                                \
                CHECK(out[i].val == best && out[i].loc == loc, "%s call %d [%d]: %g at %d, want %g at %d", \
                      #DT, call, i, (double)out[i].val, out[i].loc, (double)best, loc);          \
                h = hash(h, &out[i].val, sizeof out[i].val);                                     \
                h = hash(h, &out[i].loc, sizeof out[i].loc);                                     \
            }                                                                                    \
        }                                                                                        \
        say("%s hash %016llx", #DT, (unsigned long long)h);                                      \
    } while (0)

int main(int argc, char **argv) {
    CHECK_OK(BDMPI_Init(&argc, &argv));
    CHECK_OK(BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r));
    CHECK_OK(BDMPI_Comm_size(BDMPI_COMM_WORLD, &p));
    conf_rank = r;
    BDMPI_Op ops[NOPS] = {BDMPI_SUM, BDMPI_PROD, BDMPI_MIN, BDMPI_MAX, BDMPI_LAND,
                          BDMPI_LOR, BDMPI_LXOR, BDMPI_BAND, BDMPI_BOR, BDMPI_BXOR};
    memcpy(all_ops, ops, sizeof ops);

    TEST_TYPE(signed char, BDMPI_SIGNED_CHAR, 1, NOPS);
    TEST_TYPE(unsigned char, BDMPI_UNSIGNED_CHAR, 0, NOPS);
    TEST_TYPE(short, BDMPI_SHORT, 1, NOPS);
    TEST_TYPE(unsigned short, BDMPI_UNSIGNED_SHORT, 0, NOPS);
    TEST_TYPE(int, BDMPI_INT, 1, NOPS);
    TEST_TYPE(unsigned, BDMPI_UNSIGNED, 0, NOPS);
    TEST_TYPE(long, BDMPI_LONG, 1, NOPS);
    TEST_TYPE(unsigned long, BDMPI_UNSIGNED_LONG, 0, NOPS);
    TEST_TYPE(long long, BDMPI_LONG_LONG_INT, 1, NOPS);
    TEST_TYPE(unsigned long long, BDMPI_UNSIGNED_LONG_LONG, 0, NOPS);
    TEST_TYPE(int8_t, BDMPI_INT8_T, 1, NOPS);
    TEST_TYPE(uint8_t, BDMPI_UINT8_T, 0, NOPS);
    TEST_TYPE(int16_t, BDMPI_INT16_T, 1, NOPS);
    TEST_TYPE(uint16_t, BDMPI_UINT16_T, 0, NOPS);
    TEST_TYPE(int32_t, BDMPI_INT32_T, 1, NOPS);
    TEST_TYPE(uint32_t, BDMPI_UINT32_T, 0, NOPS);
    TEST_TYPE(int64_t, BDMPI_INT64_T, 1, NOPS);
    TEST_TYPE(uint64_t, BDMPI_UINT64_T, 0, NOPS);
    TEST_TYPE(size_t, MPI_SIZE_T, 0, NOPS);
    TEST_TYPE(ssize_t, MPI_SSIZE_T, 1, NOPS);
    TEST_TYPE(float, BDMPI_FLOAT, 1, 4);
    TEST_TYPE(double, MPI_DOUBLE, 1, 4);

    TEST_PAIR(fi_t, float, BDMPI_FLOAT_INT);
    TEST_PAIR(di_t, double, MPI_DOUBLE_INT);
    TEST_PAIR(li_t, long, BDMPI_LONG_INT);
    TEST_PAIR(si_t, short, MPI_SHORT_INT);
    TEST_PAIR(ii_t, int, BDMPI_2INT);

    /* MPI_BYTE takes the bitwise operations */
    {
        unsigned char in[N], out[N];
        for (int o = 7; o < NOPS; o++) {
            for (int i = 0; i < N; i++) in[i] = (unsigned char)contrib(r, i, all_ops[o], 0);
            CHECK_OK(BDMPI_Allreduce(in, out, N, BDMPI_BYTE, all_ops[o], BDMPI_COMM_WORLD));
            for (int i = 0; i < N; i++)
                CHECK(out[i] == (unsigned char)expect(p, i, all_ops[o], 0), "BYTE %s [%d]", op_names[o], i);
            say("BDMPI_BYTE %s hash %016llx", op_names[o], (unsigned long long)hash(HASH0, out, sizeof out));
        }
    }

    /* a large sum of doubles in place at a root */
    {
        size_t n = 1 << 17;
        double *c = malloc(n * sizeof *c);
        for (size_t i = 0; i < n; i++) c[i] = (double)((r + i) % 4) * 0.5;
        int root = p - 1;
        CHECK_OK(BDMPI_Reduce(c, c, n, BDMPI_DOUBLE, BDMPI_SUM, root, BDMPI_COMM_WORLD));
        if (r == root) {
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) {
                double want = 0;
                for (int q = 0; q < p; q++) want += (double)((q + i) % 4) * 0.5;
                bad += c[i] != want;
            }
            CHECK(bad == 0, "large in-place reduce: %zu wrong", bad);
            say("large reduce hash %016llx", (unsigned long long)hash(HASH0, c, n * sizeof *c));
        }
        free(c);
    }

    /* Reduce_init / Reduce_fine: the contribution is taken at init */
    for (int names = 0; names < 2; names++) {
        long in[3] = {r, 2 * r, 1}, out[3] = {-1, -1, -1};
        BDMPI_Request req = BDMPI_REQUEST_NULL;
        int root = (p / 2 + names) % p;
        if (names)
            CHECK_OK(MPI_Reduce_init(in, out, 3, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD, &req));
        else
            CHECK_OK(BDMPI_Reduce_init(in, out, 3, BDMPI_LONG, BDMPI_SUM, root, BDMPI_COMM_WORLD, &req));
        in[0] = in[1] = in[2] = 1000000; /* must not matter any more */
        int x = r, y = -1;
        CHECK_OK(BDMPI_Sendrecv(&x, 1, BDMPI_INT, (r + 1) % p, 3, &y, 1, BDMPI_INT, (r + p - 1) % p,
                                3, BDMPI_COMM_WORLD, BDMPI_STATUS_IGNORE));
        if (names)
            CHECK_OK(MPI_Reduce_fine(out, 3, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD, &req));
        else
            CHECK_OK(BDMPI_Reduce_fine(out, 3, BDMPI_LONG, BDMPI_SUM, root, BDMPI_COMM_WORLD, &req));
        CHECK(req == BDMPI_REQUEST_NULL, "Reduce_fine frees the request");
        long s = (long)p * (p - 1) / 2;
        if (r == root) {
            CHECK(out[0] == s && out[1] == 2 * s && out[2] == p, "Reduce_fine: %ld %ld %ld", out[0], out[1], out[2]);
            say("reduce_fine%d: %ld %ld %ld", names, out[0], out[1], out[2]);
        }
    }

    /* Merge: rank q gives ids q, q + 2, q + 5 (sorted) with value q + 0.5 (doubles, summed) or
     * q * 3 % 7 (ints, largest); the root gets every id once, in order */
    for (int names = 0; names < 2; names++) {
        int ids[3] = {r, r + 2, r + 5}, rids[256];
        double dv[3] = {r + 0.5, r + 0.5, r + 0.5}, drv[256];
        int iv[3] = {r * 3 % 7, r * 3 % 7, r * 3 % 7}, irv[256];
        int root = names ? p - 1 : 0;
        size_t cap = 256;
        int icap = 256, n;
        if (names)
            CHECK_OK(MPI_Merge(iv, ids, 3, irv, rids, &icap, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD));
        else
            CHECK_OK(BDMPI_Merge(dv, ids, 3, drv, rids, &cap, BDMPI_DOUBLE, BDMPI_SUM, root, BDMPI_COMM_WORLD));
        if (r != root) continue;
        n = names ? icap : (int)cap;
        int at = 0;
        uint64_t h = HASH0;
        for (int id = 0; id < p + 5; id++) {
            double dwant = 0;
            int iwant = -1, present = 0;
            for (int q = 0; q < p; q++)
                if (id == q || id == q + 2 || id == q + 5) {
                    dwant += q + 0.5;
                    iwant = iwant > q * 3 % 7 ? iwant : q * 3 % 7;
                    present = 1;
                }
            if (!present) continue;
            CHECK(at < n && rids[at] == id && (names ? irv[at] == iwant : drv[at] == dwant),
                  "merge%d [%d]: id %d, want id %d", names, at, at < n ? rids[at] : -1, id);
            at++;
        }
        CHECK(n == at, "merge%d: %d ids, want %d", names, n, at);
        h = hash(h, rids, (size_t)n * sizeof *rids);
        h = names ? hash(h, irv, (size_t)n * sizeof *irv) : hash(h, drv, (size_t)n * sizeof *drv);
        say("merge%d: %d ids hash %016llx", names, n, (unsigned long long)h);
    }

    /* on a split communicator (odd and even ranks, order reversed): two Reduce_init pending
     * at once, a Scan, an Exscan, and a Merge to which the first member gives nothing */
    {
        BDMPI_Comm half;
        int q, m;
        CHECK_OK(BDMPI_Comm_split(BDMPI_COMM_WORLD, r % 2, p - r, &half));
        CHECK_OK(BDMPI_Comm_size(half, &q));
        CHECK_OK(BDMPI_Comm_rank(half, &m));
        /* the members in communicator order: world ranks from the highest down */
        int members[64], nm = 0;
        for (int g = p - 1; g >= 0; g--)
            if (g % 2 == r % 2) members[nm++] = g;
        CHECK(nm == q && members[m] == r, "split: %d members, rank %d", q, m);
        long a = r + 1, b = 10L * r, ra = -1, rb = -1;
        BDMPI_Request qa, qb;
        CHECK_OK(BDMPI_Reduce_init(&a, &ra, 1, BDMPI_LONG, BDMPI_SUM, 0, half, &qa));
        CHECK_OK(MPI_Reduce_init(&b, &rb, 1, MPI_LONG, MPI_MAX, q - 1, half, &qb));
        CHECK_OK(BDMPI_Reduce_fine(&ra, 1, BDMPI_LONG, BDMPI_SUM, 0, half, &qa));
        CHECK_OK(MPI_Reduce_fine(&rb, 1, MPI_LONG, MPI_MAX, q - 1, half, &qb));
        long sum = 0, most = 0, pre = 0, ex = -1;
        for (int i = 0; i < q; i++) sum += members[i] + 1, most = most > 10L * members[i] ? most : 10L * members[i];
        if (m == 0) CHECK(ra == sum, "Reduce_init on a split: %ld, want %ld", ra, sum);
        if (m == q - 1) CHECK(rb == most, "second Reduce_init on a split: %ld, want %ld", rb, most);
        CHECK_OK(MPI_Scan(&a, &pre, 1, MPI_LONG, MPI_SUM, half));
        CHECK_OK(BDMPI_Exscan(&a, &ex, 1, BDMPI_LONG, BDMPI_SUM, half));
        long want = 0;
        for (int i = 0; i <= m; i++) want += members[i] + 1;
        CHECK(pre == want, "Scan on a split: %ld, want %ld", pre, want);
        if (m > 0) CHECK(ex == want - a, "Exscan on a split: %ld, want %ld", ex, want - a);
        int ids[2] = {r / 2, r / 2 + 1}, rids[64];
        long vals[2] = {r, r}, rvals[64];
        size_t cap = 64;
        CHECK_OK(BDMPI_Merge(m ? vals : NULL, m ? ids : NULL, m ? 2 : 0, rvals, rids, &cap, BDMPI_LONG,
                             BDMPI_MIN, 0, half));
        if (m == 0) {
            /* ids from the members other than the first, each the smallest world rank */
            int at = 0;
            for (int id = 0; id <= p; id++) {
                long low = -1;
                for (int i = 1; i < q; i++)
                    if (members[i] / 2 == id || members[i] / 2 + 1 == id) low = low < 0 || members[i] < low ? members[i] : low;
                if (low < 0) continue;
                CHECK(at < (int)cap && rids[at] == id && rvals[at] == low, "merge on a split [%d]", at);
                at++;
            }
            CHECK(at == (int)cap, "merge on a split: %zu ids, want %d", cap, at);
            say("split merge: %zu ids hash %016llx", cap,
                (unsigned long long)hash(hash(HASH0, rids, cap * sizeof *rids), rvals, cap * sizeof *rvals));
        }
        say("split of %d: reduce_init %ld %ld scan %ld exscan %ld", q, m == 0 ? ra : 0, m == q - 1 ? rb : 0, pre,
            m > 0 ? ex : 0);
        CHECK_OK(MPI_Comm_free(&half));
    }

    CHECK_OK(BDMPI_Finalize());
    return finish();
}
