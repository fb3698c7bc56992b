/* lpf_exec from LPF_ROOT: how many processes run (P above, at and below the processors,
 * LPF_MAX_P, 1), every pid once, input and output of process 0 (contents and sizes; NULL and 0
 * on the other processes), function symbols on every process, LPF_NO_ARGS, a fresh context in
 * every section (no slot or message capacity before the first resize and sync), and calls that
 * cannot start a section (P = 0, a NULL SPMD function, lpf_hook with LPF_INIT_NONE), which
 * return LPF_ERR_FATAL with a message (the test checks the messages). */
#include <lpf/core.h>
#include <limits.h>
#include <string.h>
#include "check.h"

#define IN_BYTES 1000
#define OUT_BYTES 777

/* What the input of a section tells process 0, and what it reports back. */
struct in {
    unsigned want_p;
    unsigned char data[IN_BYTES];
};
struct out {
    unsigned nprocs;
    unsigned pids_seen; /* processes whose pid reached process 0 exactly once */
    unsigned char data[OUT_BYTES];
};

static unsigned char in_byte(size_t i) { return (unsigned char)(i * 13 + 5); }
static unsigned char out_byte(size_t i, unsigned p) { return (unsigned char)(i * 7 + p); }

/* The function symbols: each adds to its own counter. */
static atomic_uint sum_of_pids, calls;
static void add_pid(unsigned pid) { atomic_fetch_add(&sum_of_pids, pid + 1); }
static void count_call(unsigned pid) { (void)pid; atomic_fetch_add(&calls, 1); }
typedef void (*symbol_t)(unsigned);

/* Written by main before the sections: with _LPF_INCLUSIVE_MEMORY process 0 shares main's
 * address space. */
static int set_by_main;

/* The first calls of a section find no capacity: lpf_exec reserves none. */
static void fresh_context(lpf_t ctx, lpf_pid_t pid) {
    long x = 0;
    lpf_memslot_t s = LPF_INVALID_MEMSLOT;
    CHECK(lpf_register_global(ctx, &x, sizeof x, &s) == LPF_ERR_OUT_OF_MEMORY,
          "pid %u: a registration before any resize", pid);
    CHECK(s == LPF_INVALID_MEMSLOT, "pid %u: a failed registration wrote the slot", pid);
    CHECK(lpf_resize_memory_register(ctx, 1) == LPF_SUCCESS, "resize");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(lpf_register_global(ctx, &x, sizeof x, &s) == LPF_SUCCESS, "register");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(lpf_put(ctx, s, 0, pid, s, 0, 0, LPF_MSG_DEFAULT) == LPF_ERR_OUT_OF_MEMORY,
          "pid %u: a put before any message queue resize", pid);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(lpf_deregister(ctx, s) == LPF_SUCCESS, "deregister");
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    CHECK(pid < p, "pid %u of %u", pid, p);
    fresh_context(ctx, pid);
    /* Every process gets the symbols. */
    CHECK(args.f_size == 2 && args.f_symbols != NULL, "pid %u: %zu symbols", pid, args.f_size);
    if (args.f_size == 2) {
        ((symbol_t)args.f_symbols[0])(pid);
        ((symbol_t)args.f_symbols[1])(pid);
    }
    /* Every pid once: each process puts a 1 into its own cell of process 0's array. */
    unsigned char *seen = calloc(p, 1), one = 1;
    CHECK(lpf_resize_memory_register(ctx, 2) == LPF_SUCCESS, "resize");
    CHECK(lpf_resize_message_queue(ctx, 1) == LPF_SUCCESS, "resize");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_memslot_t s_seen, s_one;
    CHECK(lpf_register_global(ctx, seen, p, &s_seen) == LPF_SUCCESS, "register");
    CHECK(lpf_register_local(ctx, &one, 1, &s_one) == LPF_SUCCESS, "register");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    CHECK(lpf_put(ctx, s_one, 0, 0, s_seen, pid, 1, LPF_MSG_DEFAULT) == LPF_SUCCESS, "put");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_deregister(ctx, s_seen);
    lpf_deregister(ctx, s_one);
    if (pid != 0) {
        CHECK(args.input == NULL && args.input_size == 0, "pid %u got input", pid);
        CHECK(args.output == NULL && args.output_size == 0, "pid %u got output", pid);
        free(seen);
        return;
    }
#ifdef _LPF_INCLUSIVE_MEMORY
    CHECK(set_by_main == 42, "process 0 does not see main's memory");
#endif
    CHECK(args.input_size == sizeof(struct in) && args.output_size == sizeof(struct out),
          "sizes %zu %zu", args.input_size, args.output_size);
    const struct in *in = args.input;
    struct out *out = args.output;
    CHECK(p == in->want_p, "nprocs %u, want %u", p, in->want_p);
    for (size_t i = 0; i < IN_BYTES; i++)
        CHECK(in->data[i] == in_byte(i), "input byte %zu", i);
    out->nprocs = p;
    out->pids_seen = 0;
    for (unsigned q = 0; q < p; q++) out->pids_seen += seen[q] == 1;
    for (size_t i = 0; i < OUT_BYTES; i++) out->data[i] = out_byte(i, p);
    free(seen);
}

/* Runs spmd with P requested, expecting `want` processes. */
static void run(lpf_pid_t P, unsigned want) {
    static struct in in;
    struct out out;
    memset(&out, 0xAB, sizeof out);
    in.want_p = want;
    for (size_t i = 0; i < IN_BYTES; i++) in.data[i] = in_byte(i);
    lpf_func_t symbols[2] = {(lpf_func_t)add_pid, (lpf_func_t)count_call};
    lpf_args_t args = {&in, sizeof in, &out, sizeof out, symbols, 2};
    atomic_store(&sum_of_pids, 0);
    atomic_store(&calls, 0);
    lpf_err_t rc = lpf_exec(LPF_ROOT, P, spmd, args);
    CHECK(rc == LPF_SUCCESS, "exec(P=%u) returned %d", P, rc);
    CHECK(out.nprocs == want, "P=%u: %u processes, want %u", P, out.nprocs, want);
    CHECK(out.pids_seen == want, "P=%u: %u pids seen once", P, out.pids_seen);
    for (size_t i = 0; i < OUT_BYTES; i++)
        CHECK(out.data[i] == out_byte(i, want), "P=%u: output byte %zu", P, i);
    CHECK(atomic_load(&calls) == want, "P=%u: symbol called %u times", P, atomic_load(&calls));
    CHECK(atomic_load(&sum_of_pids) == want * (want + 1) / 2, "P=%u: sum of pids %u", P,
          atomic_load(&sum_of_pids));
}

static atomic_uint no_args_runs;
static void no_args(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)ctx; (void)p;
    CHECK(args.input == NULL && args.input_size == 0 && args.output == NULL &&
          args.output_size == 0 && args.f_symbols == NULL && args.f_size == 0,
          "pid %u: LPF_NO_ARGS is not empty", pid);
    atomic_fetch_add(&no_args_runs, 1);
}

int main(void) {
    set_by_main = 42;
    unsigned n = env_procs();
    CHECK(LPF_NO_ARGS.input == NULL && LPF_NO_ARGS.input_size == 0 &&
          LPF_NO_ARGS.output == NULL && LPF_NO_ARGS.output_size == 0 &&
          LPF_NO_ARGS.f_symbols == NULL && LPF_NO_ARGS.f_size == 0, "LPF_NO_ARGS");
    CHECK(LPF_MAX_P == UINT_MAX, "LPF_MAX_P %u", LPF_MAX_P);
    run(LPF_MAX_P, n);      /* all processors */
    run(n, n);              /* exactly as many */
    run(n + 3, n);          /* more than there are: as many as there are */
    run(LPF_MAX_P - 1, n);
    run(1, 1);
    if (n > 2) run(n - 1, n - 1);
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, no_args, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    CHECK(atomic_load(&no_args_runs) == n, "LPF_NO_ARGS section ran on %u", atomic_load(&no_args_runs));

    /* Sections that cannot start: reported, LPF_ERR_FATAL, and LPF_ROOT still works. */
    CHECK(lpf_exec(LPF_ROOT, 0, no_args, LPF_NO_ARGS) == LPF_ERR_FATAL, "P = 0");
    CHECK(lpf_exec(LPF_ROOT, 2, NULL, LPF_NO_ARGS) == LPF_ERR_FATAL, "NULL spmd");
    CHECK(lpf_hook(LPF_INIT_NONE, no_args, LPF_NO_ARGS) == LPF_ERR_FATAL, "hook");
    CHECK(lpf_rehook(LPF_ROOT, NULL, LPF_NO_ARGS) == LPF_ERR_FATAL, "NULL spmd to rehook");
    run(LPF_MAX_P, n);
    return failures();
}
