/* Reductions: Reduce (every root), Allreduce, Scan and Exscan for every datatype and every
 * operation that applies to it, MAXLOC/MINLOC on the five pair types, sendbuf == recvbuf,
 * Reduce_init/Reduce_fine and Merge; through both names. Expected results are folded here
 * over the ranks' contributions, which every rank can compute. */
#include <bdmpi.h>
#include <wchar.h>
#include "check.h"

#define N 7
static int r, p;

/* Contribution of rank q, element i, for operation op (values that cannot overflow). */
static long contrib(int q, int i, int op, int is_signed) {
    switch (op) {
    case BDMPI_SUM: return (q + i) % 5;
    case BDMPI_PROD: return is_signed ? (((q + i) % 3 == 0) ? -1 : 1) : (((q + i) % 4 == 0) ? 2 : 1);
    case BDMPI_MIN: case BDMPI_MAX: return (q * 7 + i * 3) % 11 - (is_signed ? 5 : 0);
    case BDMPI_LAND: case BDMPI_LOR: case BDMPI_LXOR: return ((q >> (i % 3)) & 1) ? 3 : 0;
    default: return (q * 37 + i * 11) & 0x7f;
    }
}

static long fold(long a, long b, int op) {
    switch (op) {
    case BDMPI_SUM: return a + b;
    case BDMPI_PROD: return a * b;
    case BDMPI_MIN: return a < b ? a : b;
    case BDMPI_MAX: return a > b ? a : b;
    case BDMPI_LAND: return (a != 0) && (b != 0);
    case BDMPI_LOR: return (a != 0) || (b != 0);
    case BDMPI_LXOR: return (a != 0) != (b != 0);
    case BDMPI_BAND: return a & b;
    case BDMPI_BOR: return a | b;
    default: return a ^ b;
    }
}

/* Folds ranks [0, upto) of element i. */
static long expect(int upto, int i, int op, int is_signed) {
    long acc = contrib(0, i, op, is_signed);
    for (int q = 1; q < upto; q++) acc = fold(acc, contrib(q, i, op, is_signed), op);
    /* PROD of unsigned values grows as 2^k: keep it small enough for 8 bits */
    return acc;
}

static const int int_ops[] = {BDMPI_SUM, BDMPI_PROD, BDMPI_MIN, BDMPI_MAX, BDMPI_LAND,
                              BDMPI_LOR, BDMPI_LXOR, BDMPI_BAND, BDMPI_BOR, BDMPI_BXOR};
static const int float_ops[] = {BDMPI_SUM, BDMPI_PROD, BDMPI_MIN, BDMPI_MAX};

/* Runs the four reductions for type T / datatype DT and the listed operations. */
#define TEST_TYPE(T, DT, SIGNED, OPS)                                                        \
    do {                                                                                     \
        for (size_t o = 0; o < sizeof(OPS) / sizeof(OPS[0]); o++) {                          \
            int op = OPS[o];                                                                 \
            /* unsigned 8-bit products overflow past 8 ranks: skip them there */             \
            if (op == BDMPI_PROD && !SIGNED && sizeof(T) == 1 && p > 7) continue;            \
            T in[N], out[N];                                                                 \
            for (int i = 0; i < N; i++) in[i] = (T)contrib(r, i, op, SIGNED);                \
            int root = (o + 1) % p;                                                          \
            for (int i = 0; i < N; i++) out[i] = (T)99;                                      \
            CHECK_OK(BDMPI_Reduce(in, out, N, DT, op, root, BDMPI_COMM_WORLD));              \
            if (r == root)                                                                   \
                for (int i = 0; i < N; i++)                                                  \
                    CHECK(out[i] == (T)expect(p, i, op, SIGNED), "%s op %d reduce [%d]",     \
                          #DT, op, i);                                                       \
            CHECK_OK(MPI_Allreduce(in, out, N, DT, op, MPI_COMM_WORLD));                     \
            for (int i = 0; i < N; i++)                                                      \
                CHECK(out[i] == (T)expect(p, i, op, SIGNED), "%s op %d allreduce [%d]", #DT, \
                      op, i);                                                                \
            CHECK_OK(BDMPI_Scan(in, out, N, DT, op, BDMPI_COMM_WORLD));                      \
            for (int i = 0; i < N; i++)                                                      \
                CHECK(out[i] == (T)expect(r + 1, i, op, SIGNED), "%s op %d scan [%d]", #DT,  \
                      op, i);                                                                \
            CHECK_OK(MPI_Exscan(in, out, N, DT, op, MPI_COMM_WORLD));                        \
            if (r > 0)                                                                       \
                for (int i = 0; i < N; i++)                                                  \
                    CHECK(out[i] == (T)expect(r, i, op, SIGNED), "%s op %d exscan [%d]",     \
                          #DT, op, i);                                                       \
            /* in place: sendbuf == recvbuf */                                               \
            CHECK_OK(BDMPI_Allreduce(in, in, N, DT, op, BDMPI_COMM_WORLD));                  \
            for (int i = 0; i < N; i++)                                                      \
                CHECK(in[i] == (T)expect(p, i, op, SIGNED), "%s op %d in place [%d]", #DT,   \
                      op, i);                                                                \
        }                                                                                    \
    } while (0)

typedef struct { float val; int loc; } fi_t;
typedef struct { double val; int loc; } di_t;
typedef struct { long val; int loc; } li_t;
typedef struct { short val; int loc; } si_t;
typedef struct { int val; int loc; } ii_t;

/* MAXLOC / MINLOC: value (r * 5 + i) % 7 has ties; location r * 10 + i */
#define TEST_PAIR(T, VT, DT)                                                                 \
    do {                                                                                     \
        T in[N], out[N];                                                                     \
        for (int i = 0; i < N; i++) {                                                        \
            memset(&in[i], 0, sizeof(T));                                                    \
            in[i].val = (VT)((r * 5 + i) % 7);                                               \
            in[i].loc = r * 10 + i;                                                          \
        }                                                                                    \
        for (int mx = 0; mx < 2; mx++) {                                                     \
            int op = mx ? BDMPI_MAXLOC : BDMPI_MINLOC;                                       \
            CHECK_OK(BDMPI_Allreduce(in, out, N, DT, op, BDMPI_COMM_WORLD));                 \
            for (int i = 0; i < N; i++) {                                                    \
                VT best = (VT)((0 * 5 + i) % 7);                                             \
                int loc = i;                                                                 \
                for (int q = 1; q < p; q++) {                                                \
                    VT v = (VT)((q * 5 + i) % 7);                                            \
                    if (mx ? v > best : v < best) { best = v; loc = q * 10 + i; }            \
                }                                                                            \
                CHECK(out[i].val == best && out[i].loc == loc, "%s %s [%d]: %g at %d, want " \
                      "%g at %d", #DT, mx ? "MAXLOC" : "MINLOC", i, (double)out[i].val,      \
                      out[i].loc, (double)best, loc);                                        \
            }                                                                                \
        }                                                                                    \
    } while (0)

int main(int argc, char **argv) {
    CHECK_OK(BDMPI_Init(&argc, &argv));
    CHECK_OK(BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r));
    CHECK_OK(BDMPI_Comm_size(BDMPI_COMM_WORLD, &p));
    check_rank = r;

    TEST_TYPE(char, BDMPI_CHAR, 1, int_ops);
    TEST_TYPE(signed char, BDMPI_SIGNED_CHAR, 1, int_ops);
    TEST_TYPE(unsigned char, BDMPI_UNSIGNED_CHAR, 0, int_ops);
    TEST_TYPE(unsigned char, BDMPI_BYTE, 0, int_ops);
    TEST_TYPE(wchar_t, BDMPI_WCHAR, 1, int_ops);
    TEST_TYPE(short, BDMPI_SHORT, 1, int_ops);
    TEST_TYPE(unsigned short, BDMPI_UNSIGNED_SHORT, 0, int_ops);
    TEST_TYPE(int, BDMPI_INT, 1, int_ops);
    TEST_TYPE(unsigned, BDMPI_UNSIGNED, 0, int_ops);
    TEST_TYPE(long, BDMPI_LONG, 1, int_ops);
    TEST_TYPE(unsigned long, BDMPI_UNSIGNED_LONG, 0, int_ops);
    TEST_TYPE(long long, BDMPI_LONG_LONG_INT, 1, int_ops);
    TEST_TYPE(unsigned long long, BDMPI_UNSIGNED_LONG_LONG, 0, int_ops);
    TEST_TYPE(int8_t, BDMPI_INT8_T, 1, int_ops);
    TEST_TYPE(uint8_t, BDMPI_UINT8_T, 0, int_ops);
    TEST_TYPE(int16_t, BDMPI_INT16_T, 1, int_ops);
    TEST_TYPE(uint16_t, BDMPI_UINT16_T, 0, int_ops);
    TEST_TYPE(int32_t, BDMPI_INT32_T, 1, int_ops);
    TEST_TYPE(uint32_t, BDMPI_UINT32_T, 0, int_ops);
    TEST_TYPE(int64_t, BDMPI_INT64_T, 1, int_ops);
    TEST_TYPE(uint64_t, BDMPI_UINT64_T, 0, int_ops);
    TEST_TYPE(size_t, BDMPI_SIZE_T, 0, int_ops);
    TEST_TYPE(ssize_t, BDMPI_SSIZE_T, 1, int_ops);
    TEST_TYPE(float, BDMPI_FLOAT, 1, float_ops);
    TEST_TYPE(double, BDMPI_DOUBLE, 1, float_ops);

    TEST_PAIR(fi_t, float, BDMPI_FLOAT_INT);
    TEST_PAIR(di_t, double, BDMPI_DOUBLE_INT);
    TEST_PAIR(li_t, long, BDMPI_LONG_INT);
    TEST_PAIR(si_t, short, BDMPI_SHORT_INT);
    TEST_PAIR(ii_t, int, BDMPI_2INT);

    /* sphkmeans' pattern: MAXLOC of (rand, rank) with MPI_2INT picks the rank of the largest */
    {
        ii_t mine = {(r * 7919) % 13, r}, best;
        CHECK_OK(MPI_Allreduce(&mine, &best, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
        int bv = -1, bl = -1;
        for (int q = 0; q < p; q++)
            if ((q * 7919) % 13 > bv) { bv = (q * 7919) % 13; bl = q; }
        CHECK(best.val == bv && best.loc == bl, "2INT MAXLOC: %d at %d", best.val, best.loc);
    }

    /* a large in-place sum (sphkmeans' Reduce(centers, centers, ...) at a root) */
    {
        size_t n = 1 << 18;
        float *c = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) c[i] = (float)((r + i) % 4);
        int root = p - 1;
        CHECK_OK(BDMPI_Reduce(c, c, n, BDMPI_FLOAT, BDMPI_SUM, root, BDMPI_COMM_WORLD));
        if (r == root)
            for (size_t i = 0; i < n; i += 4099) {
                float want = 0;
                for (int q = 0; q < p; q++) want += (float)((q + i) % 4);
                CHECK(c[i] == want, "in-place reduce [%zu]: %g, want %g", i, c[i], want);
            }
        free(c);
    }

    /* Reduce_init / Reduce_fine: the contribution is taken at init */
    for (int names = 0; names < 2; names++) {
        long in[3] = {r, 2 * r, 1}, out[3] = {-1, -1, -1};
        BDMPI_Request req = NULL;
        int root = p / 2;
        if (names)
            CHECK_OK(MPI_Reduce_init(in, out, 3, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD, &req));
        else
            CHECK_OK(BDMPI_Reduce_init(in, out, 3, BDMPI_LONG, BDMPI_SUM, root, BDMPI_COMM_WORLD, &req));
        CHECK(req != NULL, "Reduce_init gives a request");
        in[0] = in[1] = in[2] = 1000000; /* must not matter any more */
        int x = r, y = -1;
        CHECK_OK(BDMPI_Sendrecv(&x, 1, BDMPI_INT, (r + 1) % p, 3, &y, 1, BDMPI_INT, (r + p - 1) % p, 3, BDMPI_COMM_WORLD, BDMPI_STATUS_IGNORE));
        if (names)
            CHECK_OK(MPI_Reduce_fine(out, 3, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD, &req));
        else
            CHECK_OK(BDMPI_Reduce_fine(out, 3, BDMPI_LONG, BDMPI_SUM, root, BDMPI_COMM_WORLD, &req));
        CHECK(req == NULL, "Reduce_fine frees the request");
        long s = (long)p * (p - 1) / 2;
        if (r == root) CHECK(out[0] == s && out[1] == 2 * s && out[2] == p, "Reduce_fine: %ld %ld %ld", out[0], out[1], out[2]);
        else CHECK(out[0] == -1, "Reduce_fine wrote at a non-root");
    }

    /* Merge: rank q contributes ids q, q+2, q+4 (sorted) with value q + 0.5 each; the root
     * gets every id once, in order, with the values of equal ids summed */
    for (int names = 0; names < 2; names++) {
        int ids[3] = {r, r + 2, r + 4}, rids[256];
        double vals[3] = {r + 0.5, r + 0.5, r + 0.5}, rvals[256];
        int root = 0;
        size_t cap = 256;
        int icap = 256;
        if (names)
            CHECK_OK(MPI_Merge(vals, ids, 3, rvals, rids, &icap, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD));
        else
            CHECK_OK(BDMPI_Merge(vals, ids, 3, rvals, rids, &cap, BDMPI_DOUBLE, BDMPI_SUM, root, BDMPI_COMM_WORLD));
        if (r == root) {
            int n = names ? icap : (int)cap, at = 0;
            for (int id = 0; id < p + 4; id++) {
                double want = 0;
                int present = 0;
                for (int q = 0; q < p; q++)
                    if (id == q || id == q + 2 || id == q + 4) { want += q + 0.5; present = 1; }
                if (!present) continue;
                CHECK(at < n && rids[at] == id && rvals[at] == want, "merge [%d]: id %d value %g, want id %d value %g", at, rids[at], rvals[at], id, want);
                at++;
            }
            CHECK(n == at, "merge: %d ids, want %d", n, at);
        }
    }
    {
        int ids[1] = {r}, rids[1];
        double vals[1] = {1}, rvals[1];
        size_t cap = 1;
        int rc = BDMPI_Merge(vals, ids, 1, rvals, rids, &cap, BDMPI_DOUBLE, BDMPI_SUM, 0, BDMPI_COMM_WORLD);
        if (r == 0) CHECK(p == 1 ? rc == BDMPI_SUCCESS : rc == BDMPI_ERR_TRUNCATE, "merge into too little room: %d", rc);
    }

    /* operations that do not apply */
    {
        double d = 1, e;
        fi_t f = {1, 1}, g;
        CHECK(BDMPI_Allreduce(&d, &e, 1, BDMPI_DOUBLE, BDMPI_BAND, BDMPI_COMM_WORLD) == BDMPI_ERR_OP, "BAND on doubles");
        CHECK(BDMPI_Allreduce(&f, &g, 1, BDMPI_FLOAT_INT, BDMPI_SUM, BDMPI_COMM_WORLD) == BDMPI_ERR_OP, "SUM on a pair");
        CHECK(BDMPI_Allreduce(&d, &e, 1, BDMPI_DOUBLE, BDMPI_MAXLOC, BDMPI_COMM_WORLD) == BDMPI_ERR_OP, "MAXLOC on doubles");
        CHECK(BDMPI_Allreduce(&d, &e, 1, BDMPI_DOUBLE, 4242, BDMPI_COMM_WORLD) == BDMPI_ERR_OP, "an unknown op");
    }

    CHECK_OK(BDMPI_Finalize());
    return finish();
}
