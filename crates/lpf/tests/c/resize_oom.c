/* Impossible reservations fail with LPF_ERR_OUT_OF_MEMORY and change nothing: the capacities
 * in force before still work, in LPF_ROOT and in a section. */
#include <lpf/core.h>
#include <stdint.h>
#include "check.h"

static void use(lpf_t ctx, lpf_pid_t pid, const char *where) {
    CHECK(lpf_resize_memory_register(ctx, 2) == LPF_SUCCESS, "%s", where);
    CHECK(lpf_resize_message_queue(ctx, 1) == LPF_SUCCESS, "%s", where);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "%s", where);
    CHECK(lpf_resize_memory_register(ctx, SIZE_MAX / 10) == LPF_ERR_OUT_OF_MEMORY, "%s regs", where);
    CHECK(lpf_resize_message_queue(ctx, SIZE_MAX / 10) == LPF_ERR_OUT_OF_MEMORY, "%s msgs", where);
    CHECK(lpf_resize_memory_register(ctx, SIZE_MAX) == LPF_ERR_OUT_OF_MEMORY, "%s regs max", where);
    CHECK(lpf_resize_message_queue(ctx, SIZE_MAX) == LPF_ERR_OUT_OF_MEMORY, "%s msgs max", where);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "%s", where);
    char a[8] = "abcdefg", b[8] = "ABCDEFG";
    lpf_memslot_t sa, sb;
    CHECK(lpf_register_global(ctx, a, 8, &sa) == LPF_SUCCESS, "%s: capacity 2 still in force", where);
    CHECK(lpf_register_local(ctx, b, 8, &sb) == LPF_SUCCESS, "%s: capacity 2 still in force", where);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "%s", where);
    CHECK(lpf_put(ctx, sb, 0, pid, sa, 0, 3, LPF_MSG_DEFAULT) == LPF_SUCCESS, "%s: queue of 1", where);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "%s", where);
    CHECK(a[0] == 'A' && a[2] == 'C' && a[3] == 'd', "%s: put landed: %s", where, a);
    lpf_deregister(ctx, sa);
    lpf_deregister(ctx, sb);
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)p; (void)args;
    use(ctx, pid, "section");
}

int main(void) {
    use(LPF_ROOT, 0, "LPF_ROOT");
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
