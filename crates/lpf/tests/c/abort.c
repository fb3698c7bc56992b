/* lpf_abort ends the whole program at once with exit code 6 (LPF_HAS_ABORT is non-zero, so the
 * call does not return): from one process of a section while the others wait in lpf_sync
 * (ABORT_IN=section, the process ABORT_PID modulo p), from a section of one process nested in
 * a section (ABORT_IN=nested), or from LPF_ROOT (ABORT_IN=root). The test expects exit code 6
 * and the message on standard error; any path that goes on exits with 1. */
#include <lpf/core.h>
#include <lpf/abort.h>
#include <string.h>
#include "check.h"

static unsigned abort_pid;

static void aborts(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)pid; (void)p; (void)args;
    lpf_abort(ctx);
    fprintf(stderr, "lpf_abort returned\n");
    exit(1);
}

static void section(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    if (pid == abort_pid % p) aborts(ctx, pid, p, LPF_NO_ARGS);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
}

static void nested(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    if (pid == p - 1) lpf_exec(ctx, 1, aborts, LPF_NO_ARGS);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
}

int main(void) {
    CHECK(LPF_HAS_ABORT != 0, "LPF_HAS_ABORT");
    const char *in = getenv("ABORT_IN"), *who = getenv("ABORT_PID");
    abort_pid = who ? (unsigned)atoi(who) : 0;
    if (in && strcmp(in, "root") == 0) {
        aborts(LPF_ROOT, 0, 1, LPF_NO_ARGS);
    } else if (in && strcmp(in, "nested") == 0) {
        lpf_exec(LPF_ROOT, LPF_MAX_P, nested, LPF_NO_ARGS);
    } else {
        lpf_exec(LPF_ROOT, LPF_MAX_P, section, LPF_NO_ARGS);
    }
    fprintf(stderr, "the program went on after lpf_abort\n");
    return 1;
}
