/* A put beyond the end of the destination: the section fails with a message on standard
 * error (exit status checked by the test: 3 when everything was reported as expected). */
#include <lpf/core.h>
#include "check.h"

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    char buf[16] = {0};
    lpf_resize_memory_register(ctx, 1);
    lpf_resize_message_queue(ctx, 1);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_memslot_t s;
    lpf_register_global(ctx, buf, sizeof buf, &s);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    if (pid == 0) lpf_put(ctx, s, 0, p - 1, s, 8, 16, LPF_MSG_DEFAULT); /* 8 bytes too far */
    lpf_err_t rc = lpf_sync(ctx, LPF_SYNC_DEFAULT);
    CHECK(rc == LPF_ERR_FATAL, "sync returned %d", rc);
}

int main(void) {
    lpf_err_t rc = lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS);
    CHECK(rc == LPF_ERR_FATAL, "exec returned %d", rc);
    return failures() ? 1 : 3;
}
