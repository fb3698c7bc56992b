/* Concurrent writes (LPF's CRCW with arbitrary order): after a superstep in which several
 * requests write the same destination bytes, the destination must match a serialisation of
 * those requests, so each request's bytes land whole or are overwritten whole.
 *  A: every process puts two different K-byte values into the same area of every process:
 *     the area holds exactly one of the 2p values, complete.
 *  B: process w puts 2B bytes at offset wB of every process's area: each B-byte stretch,
 *     covered by two writers (one at the ends), holds one of them, complete.
 *  C: every process puts a value into every process's area and gets every process's source
 *     into the same area: it holds one of the 2p values, complete.
 * Also concurrent reads: every process reads every source (C). */
#include <lpf/core.h>
#include <string.h>
#include "check.h"

#define K 4099 /* not a multiple of a word or of a cache line */
#define B 1000

static unsigned char pattern(lpf_pid_t w, unsigned v, size_t j) {
    unsigned x = (w + 1) * 2654435761u ^ (v + 1) * 40503u ^ (unsigned)j * 2246822519u;
    x ^= x >> 13;
    return (unsigned char)(x * 97u >> 5);
}

/* Which (writer, version) among `p` writers and `versions` wrote `buf` whole, or -1 when no
 * candidate or more than one matches. */
static long whole(const unsigned char *buf, size_t len, size_t first, lpf_pid_t p,
                  const unsigned *versions, unsigned nv) {
    long found = -1;
    int matches = 0;
    for (lpf_pid_t w = 0; w < p; w++)
        for (unsigned v = 0; v < nv; v++) {
            size_t j = 0;
            while (j < len && buf[j] == pattern(w, versions[v], first + j)) j++;
            if (j == len) {
                matches++;
                found = (long)w * nv + v;
            }
        }
    return matches == 1 ? found : -1;
}

static void sync_ok(lpf_t ctx, const char *what) {
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "%s: sync", what);
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    unsigned char *val[2], *a = calloc(K, 1), *e = calloc((size_t)(p + 1) * B, 1);
    unsigned char *c = calloc(K, 1), *srcc = malloc(K), *mine_b = malloc(2 * B);
    for (int v = 0; v < 2; v++) {
        val[v] = malloc(K);
        for (size_t j = 0; j < K; j++) val[v][j] = pattern(pid, v, j);
    }
    for (size_t j = 0; j < K; j++) srcc[j] = pattern(pid, 2, j);
    for (size_t j = 0; j < 2 * B; j++) mine_b[j] = pattern(pid, 3, pid * B + j);
    CHECK(lpf_resize_memory_register(ctx, 7) == LPF_SUCCESS, "resize");
    CHECK(lpf_resize_message_queue(ctx, 2 * p) == LPF_SUCCESS, "resize");
    sync_ok(ctx, "start");
    lpf_memslot_t sv[2], sa, se, sc, ssrc, sb;
    for (int v = 0; v < 2; v++)
        CHECK(lpf_register_local(ctx, val[v], K, &sv[v]) == LPF_SUCCESS, "register");
    CHECK(lpf_register_global(ctx, a, K, &sa) == LPF_SUCCESS, "register");
    CHECK(lpf_register_global(ctx, e, (size_t)(p + 1) * B, &se) == LPF_SUCCESS, "register");
    CHECK(lpf_register_global(ctx, c, K, &sc) == LPF_SUCCESS, "register");
    CHECK(lpf_register_global(ctx, srcc, K, &ssrc) == LPF_SUCCESS, "register");
    CHECK(lpf_register_local(ctx, mine_b, 2 * B, &sb) == LPF_SUCCESS, "register");
    sync_ok(ctx, "registration");

    /* A: 2p writers of the same K bytes. */
    for (lpf_pid_t q = 0; q < p; q++)
        for (int v = 0; v < 2; v++)
            CHECK(lpf_put(ctx, sv[v], 0, q, sa, 0, K, LPF_MSG_DEFAULT) == LPF_SUCCESS, "put");
    sync_ok(ctx, "A");
    const unsigned both[2] = {0, 1};
    CHECK(whole(a, K, 0, p, both, 2) >= 0, "A: pid %u: the area is not one writer's value", pid);

    /* B: writer w covers stretches w and w + 1. */
    for (lpf_pid_t q = 0; q < p; q++)
        CHECK(lpf_put(ctx, sb, 0, q, se, (size_t)pid * B, 2 * B, LPF_MSG_DEFAULT) == LPF_SUCCESS,
              "put");
    sync_ok(ctx, "B");
    const unsigned three[1] = {3};
    for (lpf_pid_t r = 0; r <= p; r++) {
        long w = whole(e + (size_t)r * B, B, (size_t)r * B, p, three, 1);
        CHECK(w >= 0 && (w == (long)r || w + 1 == (long)r), "B: pid %u: stretch %u written by %ld",
              pid, r, w);
    }

    /* C: p puts and p gets into the same K bytes; every source read by every process. */
    for (lpf_pid_t q = 0; q < p; q++) {
        CHECK(lpf_put(ctx, sv[1], 0, q, sc, 0, K, LPF_MSG_DEFAULT) == LPF_SUCCESS, "put");
        CHECK(lpf_get(ctx, q, ssrc, 0, sc, 0, K, LPF_MSG_DEFAULT) == LPF_SUCCESS, "get");
    }
    sync_ok(ctx, "C");
    const unsigned put_or_get[2] = {1, 2};
    CHECK(whole(c, K, 0, p, put_or_get, 2) >= 0, "C: pid %u: the area is not one request's value",
          pid);
    for (size_t j = 0; j < K; j++) CHECK(srcc[j] == pattern(pid, 2, j), "C: source changed");

    lpf_memslot_t all[] = {sv[0], sv[1], sa, se, sc, ssrc, sb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        CHECK(lpf_deregister(ctx, all[i]) == LPF_SUCCESS, "deregister");
    free(val[0]); free(val[1]); free(a); free(e); free(c); free(srcc); free(mine_b);
}

int main(void) {
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
