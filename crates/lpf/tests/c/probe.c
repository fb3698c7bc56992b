/* lpf_probe in LPF_ROOT and in a section: p is the number of processors (LPF_MAX_PROCS) and
 * the same everywhere; free_p is p in LPF_ROOT and at least 1 in a section, the shares of a
 * section adding up to p when there are more processors than processes; g and l are positive
 * and finite for every p' from 1 to p and message sizes from 0 to SIZE_MAX, the same on every
 * process bit for bit (gathered with puts and compared), and the same at every call. */
#include <lpf/core.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "check.h"

#define SIZES 5
static const size_t sizes[SIZES] = {0, 1, 4096, 1u << 20, SIZE_MAX};
/* The values compared across processes: g and l at p' = 1, 2 and p for every size. */
#define VALUES (3 * SIZES * 2)

static void check_machine(lpf_machine_t m, const char *where) {
    for (lpf_pid_t q = 1; q <= m.p; q++)
        for (int i = 0; i < SIZES; i++) {
            double g = m.g(q, sizes[i], LPF_SYNC_DEFAULT), l = m.l(q, sizes[i], LPF_SYNC_DEFAULT);
            CHECK(isfinite(g) && g > 0.0 && g < 1.0, "%s: g(%u, %zu) = %g", where, q, sizes[i], g);
            CHECK(isfinite(l) && l > 0.0 && l < 10.0, "%s: l(%u, %zu) = %g", where, q, sizes[i], l);
        }
}

static void values(lpf_machine_t m, double *v) {
    lpf_pid_t qs[3] = {1, m.p < 2 ? 1 : 2, m.p};
    int k = 0;
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < SIZES; i++) {
            v[k++] = m.g(qs[j], sizes[i], LPF_SYNC_DEFAULT);
            v[k++] = m.l(qs[j], sizes[i], LPF_SYNC_DEFAULT);
        }
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    unsigned procs = env_procs();
    lpf_machine_t m = LPF_INVALID_MACHINE;
    CHECK(lpf_probe(ctx, &m) == LPF_SUCCESS, "probe");
    CHECK(m.p == procs, "pid %u: p %u, want %u", pid, m.p, procs);
    CHECK(m.free_p >= 1, "pid %u: free_p %u", pid, m.free_p);
    check_machine(m, "section");

    /* Every process's g and l, and free_p, at process 0. */
    double mine[VALUES], again[VALUES], *all = calloc((size_t)p * VALUES, sizeof(double));
    unsigned free_p = m.free_p, *frees = calloc(p, sizeof(unsigned));
    values(m, mine);
    lpf_machine_t m2;
    CHECK(lpf_probe(ctx, &m2) == LPF_SUCCESS, "probe");
    values(m2, again);
    CHECK(m2.p == m.p && m2.free_p == m.free_p && memcmp(mine, again, sizeof mine) == 0,
          "pid %u: a second probe differs", pid);
    lpf_resize_memory_register(ctx, 4);
    lpf_resize_message_queue(ctx, 2);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_memslot_t s_all, s_mine, s_frees, s_free;
    lpf_register_global(ctx, all, (size_t)p * VALUES * sizeof(double), &s_all);
    lpf_register_local(ctx, mine, sizeof mine, &s_mine);
    lpf_register_global(ctx, frees, p * sizeof(unsigned), &s_frees);
    lpf_register_local(ctx, &free_p, sizeof free_p, &s_free);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(lpf_put(ctx, s_mine, 0, 0, s_all, pid * sizeof mine, sizeof mine, LPF_MSG_DEFAULT) ==
          LPF_SUCCESS, "put");
    CHECK(lpf_put(ctx, s_free, 0, 0, s_frees, pid * sizeof free_p, sizeof free_p,
                  LPF_MSG_DEFAULT) == LPF_SUCCESS, "put");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    if (pid == 0) {
        unsigned sum = 0;
        for (lpf_pid_t q = 0; q < p; q++) {
            CHECK(memcmp(all + (size_t)q * VALUES, mine, sizeof mine) == 0,
                  "g or l of process %u differ from process 0's", q);
            sum += frees[q];
        }
        if (procs >= p) CHECK(sum == procs, "free_p adds up to %u of %u processors", sum, procs);
    }
    lpf_deregister(ctx, s_all);
    lpf_deregister(ctx, s_mine);
    lpf_deregister(ctx, s_frees);
    lpf_deregister(ctx, s_free);
    free(all);
    free(frees);
}

int main(void) {
    lpf_machine_t m = LPF_INVALID_MACHINE;
    CHECK(LPF_INVALID_MACHINE.p == 0 && LPF_INVALID_MACHINE.free_p == 0, "invalid machine");
    CHECK(lpf_probe(LPF_ROOT, &m) == LPF_SUCCESS, "probe");
    CHECK(m.p == env_procs() && m.free_p == m.p, "root p %u free_p %u", m.p, m.free_p);
    check_machine(m, "root");
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    if (m.p > 1) /* a section on some of the processors */
        CHECK(lpf_exec(LPF_ROOT, m.p - 1, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    lpf_machine_t after;
    CHECK(lpf_probe(LPF_ROOT, &after) == LPF_SUCCESS && after.p == m.p && after.free_p == m.p,
          "root after the sections: p %u free_p %u", after.p, after.free_p);
    return failures();
}
