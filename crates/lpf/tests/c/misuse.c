/* Misuse that LPF leaves undefined and this library reports (README: "Reports instead of
 * undefined behaviour"). One run does one case (MISUSE=<case>, below) in one place
 * (MISUSE_IN=section: a section on every processor, process 0 misbehaving towards the last
 * process; root: in LPF_ROOT; nested: in a one-process section nested in a section). The bad
 * call, or the lpf_sync after it, returns LPF_ERR_FATAL; from then on every lpf_sync of the
 * context returns LPF_ERR_FATAL (LPF's failure state), on every process; the lpf_exec of the
 * section returns LPF_ERR_FATAL. The test checks the message on standard error. Exit status 3
 * when all of this held (so that a crash or a plain failure cannot pass). */
#include <lpf/core.h>
#include <stdint.h>
#include <string.h>
#include "check.h"

static const char *which;

/* Does the case's bad call on process 0 (others take part in the collective calls); returns
 * what the bad call returned. */
static lpf_err_t misuse(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p) {
    char a[16] = {0}, b[16] = {0}, l[16] = "0123456789abcde";
    lpf_pid_t last = p - 1, next = (pid + 1) % p;
    /* Not checked: once process 0 misbehaves, the others' calls may fail at any point. */
    lpf_resize_memory_register(ctx, 4);
    lpf_resize_message_queue(ctx, 4);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_memslot_t sa, sl, sb;
    lpf_register_global(ctx, a, sizeof a, &sa);
    lpf_register_local(ctx, l, sizeof l, &sl);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_err_t rc = LPF_SUCCESS;
    const char *w = which;
    int me = pid == 0;
#define IS(name) (strcmp(w, name) == 0)
    if (IS("put_dst_bounds")) { /* 8 bytes too far */
        if (me) rc = lpf_put(ctx, sl, 0, last, sa, 8, 16, LPF_MSG_DEFAULT);
    } else if (IS("put_src_bounds")) {
        if (me) rc = lpf_put(ctx, sl, 8, last, sa, 0, 16, LPF_MSG_DEFAULT);
    } else if (IS("get_src_bounds")) {
        if (me) rc = lpf_get(ctx, last, sa, 8, sl, 0, 16, LPF_MSG_DEFAULT);
    } else if (IS("get_dst_bounds")) {
        if (me) rc = lpf_get(ctx, last, sa, 0, sl, 8, 16, LPF_MSG_DEFAULT);
    } else if (IS("offset_overflow")) { /* offset + size wraps around */
        if (me) rc = lpf_put(ctx, sl, 0, last, sa, SIZE_MAX - 3, 8, LPF_MSG_DEFAULT);
    } else if (IS("local_slot_remotely")) {
        if (me) rc = lpf_put(ctx, sl, 0, last, sl, 0, 8, LPF_MSG_DEFAULT);
    } else if (IS("before_registration_sync")) {
        lpf_register_global(ctx, b, sizeof b, &sb);
        if (me) rc = lpf_put(ctx, sl, 0, last, sb, 0, 8, LPF_MSG_DEFAULT);
    } else if (IS("deregistered_slot")) {
        lpf_deregister(ctx, sa);
        if (me) rc = lpf_put(ctx, sl, 0, last, sa, 0, 8, LPF_MSG_DEFAULT);
    } else if (IS("invalid_memslot")) {
        if (me) rc = lpf_put(ctx, LPF_INVALID_MEMSLOT, 0, last, sa, 0, 8, LPF_MSG_DEFAULT);
    } else if (IS("invalid_pid")) {
        if (me) rc = lpf_put(ctx, sl, 0, p, sa, 0, 8, LPF_MSG_DEFAULT);
    } else if (IS("read_write_conflict")) { /* every process: a[0..8) read and written */
        rc = lpf_put(ctx, sa, 0, next, sa, 0, 8, LPF_MSG_DEFAULT);
    } else if (IS("deregister_pending")) {
        if (me) {
            CHECK(lpf_put(ctx, sl, 0, last, sa, 0, 8, LPF_MSG_DEFAULT) == LPF_SUCCESS, "put");
            rc = lpf_deregister(ctx, sl);
        }
    } else if (IS("null_memslot")) {
        if (me) rc = lpf_register_global(ctx, b, sizeof b, NULL);
    } else if (IS("null_area")) {
        if (me) rc = lpf_register_local(ctx, NULL, 8, &sb);
    } else if (IS("null_machine")) {
        if (me) rc = lpf_probe(ctx, NULL);
    } else {
        fprintf(stderr, "unknown case %s\n", w);
        exit(1);
    }
#undef IS
    return rc;
}

/* Runs the case and checks the failure state: the sync after the bad call returns
 * LPF_ERR_FATAL, and so does every sync after it. On several nodes a process may still see
 * that first sync succeed when the error is found on another node during it (LPF: the other
 * processes enter the failure state at a later sync); the next one fails. */
static void expect_failure(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, int one_node) {
    lpf_err_t bad = misuse(ctx, pid, p);
    lpf_err_t s1 = lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_err_t s2 = lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_err_t s3 = lpf_sync(ctx, LPF_SYNC_DEFAULT);
    CHECK(bad == LPF_SUCCESS || bad == LPF_ERR_FATAL, "pid %u: the bad call returned %d", pid, bad);
    CHECK(s1 == LPF_ERR_FATAL || (!one_node && s1 == LPF_SUCCESS),
          "pid %u: the sync after it returned %d", pid, s1);
    CHECK(s2 == LPF_ERR_FATAL && s3 == LPF_ERR_FATAL, "pid %u: the next syncs returned %d, %d",
          pid, s2, s3);
}

static int one_node(void) {
    const char *n = getenv("SPILLWAY_NODES");
    return !n || atoi(n) <= 1;
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    expect_failure(ctx, pid, p, one_node());
}

static void solo(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    expect_failure(ctx, pid, p, 1);
}

/* Process 0 runs the case in a nested section of one process; the outer section is not
 * affected by its failure. */
static void outer(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)p; (void)args;
    if (pid == 0) {
        lpf_err_t rc = lpf_exec(ctx, 1, solo, LPF_NO_ARGS);
        CHECK(rc == LPF_ERR_FATAL, "the nested exec returned %d", rc);
    }
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "pid %u: the outer section failed", pid);
}

int main(void) {
    which = getenv("MISUSE");
    const char *in = getenv("MISUSE_IN");
    if (!which || !in) {
        fprintf(stderr, "set MISUSE and MISUSE_IN\n");
        return 1;
    }
    if (strcmp(in, "root") == 0) {
        expect_failure(LPF_ROOT, 0, 1, 1);
        /* LPF_ROOT is in the failure state: no section starts from it. */
        CHECK(lpf_exec(LPF_ROOT, 1, spmd, LPF_NO_ARGS) == LPF_ERR_FATAL, "exec after the failure");
        CHECK(lpf_rehook(LPF_ROOT, spmd, LPF_NO_ARGS) == LPF_ERR_FATAL, "rehook after the failure");
    } else if (strcmp(in, "nested") == 0) {
        CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, outer, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    } else {
        lpf_err_t rc = lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS);
        CHECK(rc == LPF_ERR_FATAL, "exec returned %d", rc);
    }
    return failures() ? 1 : 3;
}
