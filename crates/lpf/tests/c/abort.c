/* lpf_abort ends the program with exit code 6 (the test expects 6, not 0). */
#include <lpf/core.h>
#include <lpf/abort.h>
#include "check.h"

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args; (void)p;
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    if (pid == 0) lpf_abort(ctx);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
}

int main(void) {
    CHECK(LPF_HAS_ABORT != 0, "LPF_HAS_ABORT");
    lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS);
    fprintf(stderr, "lpf_abort returned\n");
    return 1;
}
