/* lpf_register_global, lpf_register_local and lpf_deregister, in a section and in LPF_ROOT:
 * the capacity of lpf_resize_memory_register (in force after the next lpf_sync, local and global
 * registrations counted together, LPF_ERR_OUT_OF_MEMORY without effect when it is full, slots
 * recycled by lpf_deregister, growing and shrinking), slots distinct from each other and from
 * LPF_INVALID_MEMSLOT, zero-size and NULL registrations, a global slot named remotely from the
 * superstep after its registration, other memory registered in a recycled slot. Every put is
 * checked against the value its sender computed. */
#include <lpf/core.h>
#include <string.h>
#include "check.h"

#define K 6  /* the first capacity */
#define W 8  /* longs per area */

static long val(lpf_pid_t pid, int area, int i) { return (long)pid * 10000 + area * 100 + i; }

/* Registers with a capacity that is full: LPF_ERR_OUT_OF_MEMORY, the slot untouched. */
static void full(lpf_t ctx, const char *where, int line) {
    long x;
    lpf_memslot_t s = LPF_INVALID_MEMSLOT;
    lpf_err_t g = lpf_register_global(ctx, &x, sizeof x, &s);
    lpf_err_t l = lpf_register_local(ctx, &x, sizeof x, &s);
    CHECK(g == LPF_ERR_OUT_OF_MEMORY && l == LPF_ERR_OUT_OF_MEMORY,
          "%s, line %d: registered beyond the capacity (%d %d)", where, line, g, l);
    CHECK(s == LPF_INVALID_MEMSLOT, "%s, line %d: a failed registration wrote the slot", where, line);
}

static void distinct(const lpf_memslot_t *s, int n, const char *where) {
    for (int i = 0; i < n; i++) {
        CHECK(s[i] != LPF_INVALID_MEMSLOT, "%s: slot %d is LPF_INVALID_MEMSLOT", where, i);
        for (int j = 0; j < i; j++) CHECK(s[i] != s[j], "%s: slots %d and %d are equal", where, i, j);
    }
}

static void sync_ok(lpf_t ctx, const char *where) {
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "%s: sync", where);
}

static void registers(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, const char *where) {
    lpf_pid_t next = (pid + 1) % p, prev = (pid + p - 1) % p;
    long g[3][W], loc[2][W], big[2 * W];
    memset(g, 0, sizeof g);
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < W; i++) loc[a][i] = val(pid, a, i);
    memset(big, 0, sizeof big);

    /* The capacity is in force after the next sync only. */
    CHECK(lpf_resize_memory_register(ctx, K) == LPF_SUCCESS, "%s: resize", where);
    CHECK(lpf_resize_message_queue(ctx, 8) == LPF_SUCCESS, "%s: resize", where);
    full(ctx, where, __LINE__);
    sync_ok(ctx, where);

    /* K slots: three global areas, two local ones, a global NULL of zero bytes. */
    lpf_memslot_t s[K];
    for (int i = 0; i < K; i++) s[i] = LPF_INVALID_MEMSLOT;
    for (int a = 0; a < 3; a++)
        CHECK(lpf_register_global(ctx, g[a], sizeof g[a], &s[a]) == LPF_SUCCESS, "%s: global", where);
    for (int a = 0; a < 2; a++)
        CHECK(lpf_register_local(ctx, loc[a], sizeof loc[a], &s[3 + a]) == LPF_SUCCESS, "%s: local", where);
    CHECK(lpf_register_global(ctx, NULL, 0, &s[5]) == LPF_SUCCESS, "%s: NULL, 0", where);
    distinct(s, K, where);
    full(ctx, where, __LINE__);
    sync_ok(ctx, where);

    /* Every global slot is usable remotely now: local area a to g[a] of the next process,
     * and zero bytes into and out of the NULL slot of zero bytes (a put and a get). */
    for (int a = 0; a < 2; a++)
        CHECK(lpf_put(ctx, s[3 + a], 0, next, s[a], 0, sizeof g[a], LPF_MSG_DEFAULT) == LPF_SUCCESS,
              "%s: put", where);
    CHECK(lpf_put(ctx, s[4], 0, next, s[5], 0, 0, LPF_MSG_DEFAULT) == LPF_SUCCESS, "%s: put", where);
    CHECK(lpf_get(ctx, prev, s[5], 0, s[3], W * sizeof(long), 0, LPF_MSG_DEFAULT) == LPF_SUCCESS,
          "%s: get", where);
    sync_ok(ctx, where);
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < W; i++)
            CHECK(g[a][i] == val(prev, a, i), "%s: g[%d][%d] = %ld", where, a, i, g[a][i]);

    /* Deregister g[1] (collectively) and the second local area; two registrations fit again:
     * a larger global area and the local one again. */
    CHECK(lpf_deregister(ctx, s[1]) == LPF_SUCCESS, "%s: deregister", where);
    CHECK(lpf_deregister(ctx, s[4]) == LPF_SUCCESS, "%s: deregister", where);
    CHECK(lpf_register_global(ctx, big, sizeof big, &s[1]) == LPF_SUCCESS, "%s: recycled", where);
    CHECK(lpf_register_local(ctx, loc[1], sizeof loc[1], &s[4]) == LPF_SUCCESS, "%s: recycled", where);
    distinct(s, K, where);
    full(ctx, where, __LINE__);
    sync_ok(ctx, where);
    /* The recycled global slot names the larger area: write its second half. */
    CHECK(lpf_put(ctx, s[4], 0, next, s[1], W * sizeof(long), sizeof loc[1], LPF_MSG_DEFAULT) ==
          LPF_SUCCESS, "%s: put", where);
    sync_ok(ctx, where);
    for (int i = 0; i < W; i++) {
        CHECK(big[i] == 0, "%s: big[%d] = %ld", where, i, big[i]);
        CHECK(big[W + i] == val(prev, 1, i), "%s: big[%d] = %ld", where, W + i, big[W + i]);
        CHECK(g[1][i] == val(prev, 1, i), "%s: the deregistered area changed", where);
    }

    /* Growing: in force after the next sync. */
    long extra[2] = {0, 0};
    lpf_memslot_t e[2];
    CHECK(lpf_resize_memory_register(ctx, K + 2) == LPF_SUCCESS, "%s: grow", where);
    full(ctx, where, __LINE__);
    sync_ok(ctx, where);
    CHECK(lpf_register_global(ctx, &extra[0], sizeof(long), &e[0]) == LPF_SUCCESS, "%s: grown", where);
    CHECK(lpf_register_local(ctx, &extra[1], sizeof(long), &e[1]) == LPF_SUCCESS, "%s: grown", where);
    full(ctx, where, __LINE__);

    /* Shrinking succeeds; with more slots in use than the new capacity, registrations fail
     * until deregistrations bring the count below it. */
    CHECK(lpf_resize_memory_register(ctx, 2) == LPF_SUCCESS, "%s: shrink", where);
    sync_ok(ctx, where);
    full(ctx, where, __LINE__);
    lpf_memslot_t all[K + 2] = {s[0], s[1], s[2], s[3], s[4], s[5], e[0], e[1]};
    for (int i = 0; i < K + 2 - 1; i++)
        CHECK(lpf_deregister(ctx, all[i]) == LPF_SUCCESS, "%s: deregister %d", where, i);
    CHECK(lpf_register_local(ctx, &extra[1], sizeof(long), &e[1]) == LPF_SUCCESS, "%s: 2 of 2", where);
    full(ctx, where, __LINE__);
    CHECK(lpf_deregister(ctx, e[1]) == LPF_SUCCESS, "%s: deregister", where);
    CHECK(lpf_deregister(ctx, all[K + 1]) == LPF_SUCCESS, "%s: deregister", where);
    sync_ok(ctx, where);

    /* The same memory registered twice, globally and locally: both slots work. */
    lpf_memslot_t t[2];
    long twice[2] = {val(pid, 9, 0), 0};
    CHECK(lpf_register_global(ctx, twice, sizeof twice, &t[0]) == LPF_SUCCESS, "%s: twice", where);
    CHECK(lpf_register_local(ctx, twice, sizeof twice, &t[1]) == LPF_SUCCESS, "%s: twice", where);
    CHECK(t[0] != t[1], "%s: one slot for two registrations", where);
    sync_ok(ctx, where);
    CHECK(lpf_put(ctx, t[1], 0, next, t[0], sizeof(long), sizeof(long), LPF_MSG_DEFAULT) == LPF_SUCCESS,
          "%s: put", where);
    sync_ok(ctx, where);
    CHECK(twice[1] == val(prev, 9, 0), "%s: twice[1] = %ld", where, twice[1]);
    CHECK(lpf_deregister(ctx, t[0]) == LPF_SUCCESS && lpf_deregister(ctx, t[1]) == LPF_SUCCESS,
          "%s: deregister", where);
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    registers(ctx, pid, p, "section");
}

int main(void) {
    registers(LPF_ROOT, 0, 1, "LPF_ROOT");
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
