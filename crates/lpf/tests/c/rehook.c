/* lpf_rehook from inside a section: the new section runs on the same processes with the same
 * pids, every process gets the arguments it passed itself (its own input and output), the new
 * context starts without slot or message capacity and communicates on its own, a rehook inside
 * the rehooked section works too, and the outer context's slots, capacities and data are
 * intact afterwards. Also lpf_rehook from LPF_ROOT (one process). */
#include <lpf/core.h>
#include "check.h"

struct in {
    lpf_pid_t pid, nprocs;
    unsigned long tag;
};

static unsigned long value(lpf_pid_t pid, unsigned long tag) { return tag * 1000 + pid; }

static void innermost(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    const struct in *in = args.input;
    CHECK(args.input_size == sizeof *in && in->pid == pid && in->nprocs == p,
          "pid %u of %u: second rehook", pid, p);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    *(unsigned *)args.output = pid + 1;
}

static void inner(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    const struct in *in = args.input;
    CHECK(args.input_size == sizeof *in && args.output_size == sizeof(unsigned long),
          "pid %u: sizes %zu %zu", pid, args.input_size, args.output_size);
    CHECK(in->pid == pid && in->nprocs == p, "pid %u of %u, outer %u of %u", pid, p, in->pid,
          in->nprocs);
    /* A pristine context: no capacity yet. */
    unsigned long *all = calloc(p, sizeof *all), mine = value(pid, in->tag);
    lpf_memslot_t sa = LPF_INVALID_MEMSLOT, sm;
    CHECK(lpf_register_global(ctx, all, p * sizeof *all, &sa) == LPF_ERR_OUT_OF_MEMORY,
          "pid %u: the rehooked context has slots", pid);
    CHECK(lpf_resize_memory_register(ctx, 2) == LPF_SUCCESS, "resize");
    CHECK(lpf_resize_message_queue(ctx, p) == LPF_SUCCESS, "resize");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(lpf_register_global(ctx, all, p * sizeof *all, &sa) == LPF_SUCCESS, "register");
    CHECK(lpf_register_local(ctx, &mine, sizeof mine, &sm) == LPF_SUCCESS, "register");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    for (lpf_pid_t q = 0; q < p; q++)
        CHECK(lpf_put(ctx, sm, 0, q, sa, pid * sizeof mine, sizeof mine, LPF_MSG_DEFAULT) ==
              LPF_SUCCESS, "put");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    unsigned long sum = 0;
    for (lpf_pid_t q = 0; q < p; q++) {
        CHECK(all[q] == value(q, in->tag), "pid %u: from %u %lu", pid, q, all[q]);
        sum += all[q];
    }
    lpf_deregister(ctx, sa);
    lpf_deregister(ctx, sm);
    free(all);
    /* One level deeper. */
    unsigned got = 0;
    lpf_args_t a = {in, sizeof *in, &got, sizeof got, NULL, 0};
    CHECK(lpf_rehook(ctx, innermost, a) == LPF_SUCCESS, "pid %u: second rehook", pid);
    CHECK(got == pid + 1, "pid %u: second rehook's output %u", pid, got);
    *(unsigned long *)args.output = sum;
}

static void outer(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    lpf_pid_t next = (pid + 1) % p;
    unsigned long from_prev[2] = {0, 0}, mine = value(pid, 7);
    CHECK(lpf_resize_memory_register(ctx, 2) == LPF_SUCCESS, "resize");
    CHECK(lpf_resize_message_queue(ctx, 1) == LPF_SUCCESS, "resize");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_memslot_t sf, sm;
    CHECK(lpf_register_global(ctx, from_prev, sizeof from_prev, &sf) == LPF_SUCCESS, "register");
    CHECK(lpf_register_local(ctx, &mine, sizeof mine, &sm) == LPF_SUCCESS, "register");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(lpf_put(ctx, sm, 0, next, sf, 0, sizeof mine, LPF_MSG_DEFAULT) == LPF_SUCCESS, "put");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");

    for (unsigned long tag = 1; tag <= 3; tag++) {
        struct in in = {pid, p, tag};
        unsigned long sum = 0;
        lpf_args_t a = {&in, sizeof in, &sum, sizeof sum, NULL, 0};
        CHECK(lpf_rehook(ctx, inner, a) == LPF_SUCCESS, "pid %u: rehook", pid);
        unsigned long want = tag * 1000 * p + (unsigned long)p * (p - 1) / 2;
        CHECK(sum == want, "pid %u: rehook's sum %lu, want %lu", pid, sum, want);
    }

    /* The outer context is as it was: its slots work, its capacities are unchanged (both
     * slots in use, a third registration fails; one message per superstep). */
    lpf_pid_t prev = (pid + p - 1) % p;
    CHECK(from_prev[0] == value(prev, 7), "pid %u: outer data %lu", pid, from_prev[0]);
    lpf_memslot_t s3;
    CHECK(lpf_register_local(ctx, &mine, sizeof mine, &s3) == LPF_ERR_OUT_OF_MEMORY,
          "pid %u: the outer capacity changed", pid);
    mine += 1;
    CHECK(lpf_put(ctx, sm, 0, next, sf, sizeof mine, sizeof mine, LPF_MSG_DEFAULT) == LPF_SUCCESS,
          "put");
    CHECK(lpf_put(ctx, sm, 0, next, sf, 0, sizeof mine, LPF_MSG_DEFAULT) == LPF_ERR_OUT_OF_MEMORY,
          "pid %u: the outer queue changed", pid);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(from_prev[0] == value(prev, 7) && from_prev[1] == value(prev, 7) + 1,
          "pid %u: after the rehooks %lu %lu", pid, from_prev[0], from_prev[1]);
    lpf_deregister(ctx, sf);
    lpf_deregister(ctx, sm);
}

int main(void) {
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, outer, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    struct in in = {0, 1, 5};
    unsigned long sum = 0;
    lpf_args_t a = {&in, sizeof in, &sum, sizeof sum, NULL, 0};
    CHECK(lpf_rehook(LPF_ROOT, inner, a) == LPF_SUCCESS, "rehook from LPF_ROOT");
    CHECK(sum == value(0, 5), "rehook from LPF_ROOT: %lu", sum);
    return failures();
}
