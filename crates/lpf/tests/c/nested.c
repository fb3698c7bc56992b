/* Nested lpf_exec: the outer section uses half the processors; each of its processes runs a
 * section on its free processors (free_p of lpf_probe, the shares adding up to p), which
 * communicates and runs a third level the same way. p stays the same at every level and free_p
 * never grows from a level to the next; input reaches process 0 of each nested section and
 * its output comes back; a section of one process (when free_p is 1) is a full context; the
 * outer context still works afterwards. */
#include <lpf/core.h>
#include "check.h"

struct in {
    unsigned level, parent_free_p;
};

static void level(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    /* Process 0's input, broadcast with gets. */
    struct in in = {0, 0};
    if (pid == 0) {
        CHECK(args.input_size == sizeof in, "input size %zu", args.input_size);
        in = *(const struct in *)args.input;
    }
    lpf_machine_t m;
    CHECK(lpf_probe(ctx, &m) == LPF_SUCCESS, "probe");
    /* Sum of pid + 1 and of free_p by puts into process 0. */
    unsigned *all = calloc(2 * p, sizeof(unsigned)), me[2] = {pid + 1, m.free_p};
    lpf_resize_memory_register(ctx, 3);
    lpf_resize_message_queue(ctx, p + 1);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_memslot_t sa, sm, si;
    lpf_register_global(ctx, all, 2 * p * sizeof(unsigned), &sa);
    lpf_register_local(ctx, me, sizeof me, &sm);
    lpf_register_global(ctx, &in, sizeof in, &si);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(lpf_put(ctx, sm, 0, 0, sa, 2 * pid * sizeof(unsigned), sizeof me, LPF_MSG_DEFAULT) ==
          LPF_SUCCESS, "put");
    if (pid != 0)
        CHECK(lpf_get(ctx, 0, si, 0, si, 0, sizeof in, LPF_MSG_DEFAULT) == LPF_SUCCESS, "get");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(in.level >= 1 && in.parent_free_p >= 1, "pid %u: input %u %u", pid, in.level,
          in.parent_free_p);
    CHECK(m.p == env_procs(), "level %u: p %u", in.level, m.p);
    CHECK(m.free_p >= 1 && m.free_p <= in.parent_free_p, "level %u: free_p %u, parent's %u",
          in.level, m.free_p, in.parent_free_p);
    CHECK(p <= in.parent_free_p, "level %u: %u processes on %u free processors", in.level, p,
          in.parent_free_p);
    unsigned ran = 0;
    if (pid == 0) {
        unsigned s = 0, frees = 0;
        for (unsigned i = 0; i < p; i++) {
            s += all[2 * i];
            frees += all[2 * i + 1];
        }
        CHECK(s == p * (p + 1) / 2, "level %u: sum %u", in.level, s);
        CHECK(frees == (in.parent_free_p > p ? in.parent_free_p : p),
              "level %u: free_p adds up to %u with %u processes on %u", in.level, frees, p,
              in.parent_free_p);
        ran = in.level * 1000 + p; /* the output tells what the input said */
    }
    lpf_deregister(ctx, sa);
    lpf_deregister(ctx, sm);
    lpf_deregister(ctx, si);
    free(all);
    /* The next level, while there is one: each process on its free processors. */
    struct in next = {in.level + 1, m.free_p};
    if (next.level <= 3) {
        unsigned got = 0;
        lpf_args_t a = {&next, sizeof next, &got, sizeof got, NULL, 0};
        CHECK(lpf_exec(ctx, LPF_MAX_P, level, a) == LPF_SUCCESS, "exec at level %u", next.level);
        CHECK(got == next.level * 1000 + m.free_p, "level %u: output %u, free_p %u", next.level,
              got, m.free_p);
        /* This context still works after the nested section. */
        CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync after the nested section");
    }
    if (pid == 0) *(unsigned *)args.output = ran;
}

int main(void) {
    unsigned P = env_procs();
    unsigned half = P / 2 ? P / 2 : 1, got = 0;
    struct in in = {1, P};
    lpf_args_t a = {&in, sizeof in, &got, sizeof got, NULL, 0};
    CHECK(lpf_exec(LPF_ROOT, half, level, a) == LPF_SUCCESS, "exec");
    CHECK(got == 1000 + half, "the outer section's output %u", got);
    return failures();
}
