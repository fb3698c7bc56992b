/* A process that returns while the others still sync: their sync returns LPF_ERR_FATAL
 * instead of hanging, and lpf_exec returns LPF_ERR_FATAL. */
#include <lpf/core.h>
#include "check.h"

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "first sync");
    if (pid == p - 1) return;
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_ERR_FATAL, "sync after an exit");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_ERR_FATAL, "the context stays dead");
}

int main(void) {
    lpf_err_t rc = lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS);
    if (env_procs() >= 2)
        CHECK(rc == LPF_ERR_FATAL, "exec returned %d", rc);
    else
        CHECK(rc == LPF_SUCCESS, "exec returned %d", rc);
    return failures();
}
