/* A message larger than INT_MAX bytes: process 1 puts 2^31 + 24 bytes to process 0 (P = 2). */
#include <lpf/core.h>
#include <limits.h>
#include <stdint.h>
#include "check.h"

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    CHECK(p == 2, "needs 2 processes");
    size_t bytes = (size_t)INT_MAX + 25, n = bytes / 8;
    uint64_t *x = pid == 1 ? malloc(n * 8) : NULL;
    uint64_t *y = pid == 0 ? calloc(n, 8) : NULL;
    if (pid == 1) for (size_t i = 0; i < n; i++) x[i] = i * 0x9E3779B97F4A7C15ull;
    lpf_resize_memory_register(ctx, 2);
    lpf_resize_message_queue(ctx, 1);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_memslot_t sx, sy;
    lpf_register_local(ctx, x, pid == 1 ? n * 8 : 0, &sx);
    lpf_register_global(ctx, y, pid == 0 ? n * 8 : 0, &sy);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    if (pid == 1) CHECK(lpf_put(ctx, sx, 0, 0, sy, 0, n * 8, LPF_MSG_DEFAULT) == LPF_SUCCESS, "put");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    if (pid == 0) {
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += y[i] != i * 0x9E3779B97F4A7C15ull;
        CHECK(bad == 0, "%zu of %zu words wrong", bad, n);
    }
    lpf_deregister(ctx, sx);
    lpf_deregister(ctx, sy);
    free(x);
    free(y);
}

int main(void) {
    CHECK(lpf_exec(LPF_ROOT, 2, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
