/* Nested lpf_exec: the outer section uses half the processors, each process runs an inner
 * section on its free processors, which communicates; free_p shares add up to p. */
#include <lpf/core.h>
#include "check.h"

static void inner(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    lpf_machine_t m;
    CHECK(lpf_probe(ctx, &m) == LPF_SUCCESS, "probe");
    CHECK(m.free_p >= 1, "free_p %u", m.free_p);
    /* Sum of pids by a put of everyone's pid into process 0. */
    unsigned *all = calloc(p, sizeof(unsigned));
    unsigned me = pid + 1;
    lpf_resize_memory_register(ctx, 2);
    lpf_resize_message_queue(ctx, p);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_memslot_t sa, sm;
    lpf_register_global(ctx, all, p * sizeof(unsigned), &sa);
    lpf_register_local(ctx, &me, sizeof me, &sm);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(lpf_put(ctx, sm, 0, 0, sa, pid * sizeof(unsigned), sizeof me, LPF_MSG_DEFAULT) == LPF_SUCCESS, "put");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    if (pid == 0) {
        unsigned s = 0;
        for (unsigned i = 0; i < p; i++) s += all[i];
        CHECK(s == p * (p + 1) / 2, "sum %u", s);
        *(unsigned *)args.output = p;
    }
    lpf_deregister(ctx, sa);
    lpf_deregister(ctx, sm);
    free(all);
}

static void outer(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    lpf_machine_t m;
    CHECK(lpf_probe(ctx, &m) == LPF_SUCCESS, "probe");
    unsigned P = env_procs();
    CHECK(m.p == P, "p %u, want %u", m.p, P);
    unsigned want = P / p + (pid < P % p ? 1 : 0);
    CHECK(m.free_p == want, "free_p %u, want %u", m.free_p, want);
    unsigned ran = 0;
    lpf_args_t a = {NULL, 0, &ran, sizeof ran, NULL, 0};
    CHECK(lpf_exec(ctx, LPF_MAX_P, inner, a) == LPF_SUCCESS, "nested exec");
    CHECK(ran == m.free_p, "inner ran on %u processes, free_p %u", ran, m.free_p);
    /* The outer context still works after the nested section. */
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "outer sync");
}

int main(void) {
    unsigned P = env_procs();
    unsigned half = P / 2 ? P / 2 : 1;
    CHECK(lpf_exec(LPF_ROOT, half, outer, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
