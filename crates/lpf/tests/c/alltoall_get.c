/* All-to-all with lpf_get: every process fetches its block from every process. */
#include <lpf/core.h>
#include "check.h"

#define B 333 /* elements per block: not a multiple of anything */

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    int *src = malloc(sizeof(int) * B * p), *dst = malloc(sizeof(int) * B * p);
    for (unsigned i = 0; i < B * p; i++) { src[i] = (int)(pid * 7919u + i * 31u); dst[i] = -1; }
    lpf_resize_memory_register(ctx, 2);
    lpf_resize_message_queue(ctx, p);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_memslot_t s, d;
    lpf_register_global(ctx, src, sizeof(int) * B * p, &s);
    lpf_register_local(ctx, dst, sizeof(int) * B * p, &d);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    for (lpf_pid_t q = 0; q < p; q++)
        CHECK(lpf_get(ctx, q, s, sizeof(int) * B * pid, d, sizeof(int) * B * q, sizeof(int) * B,
                      LPF_MSG_DEFAULT) == LPF_SUCCESS, "get");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    for (lpf_pid_t q = 0; q < p; q++)
        for (unsigned i = 0; i < B; i++) {
            int want = (int)(q * 7919u + (B * pid + i) * 31u);
            CHECK(dst[B * q + i] == want, "from %u at %u: %d, want %d", q, i, dst[B * q + i], want);
        }
    lpf_deregister(ctx, s);
    lpf_deregister(ctx, d);
    free(src);
    free(dst);
}

int main(void) {
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
