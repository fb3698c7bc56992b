/* Put to the next process and get from the previous one, several supersteps in a row, with
 * slots registered and deregistered in between; values checked against a formula. */
#include <lpf/core.h>
#include "check.h"

#define N 1000

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    long mine[N], from_prev[N], got[N];
    for (int i = 0; i < N; i++) { mine[i] = (long)pid * 100000 + i; from_prev[i] = -1; got[i] = -1; }
    CHECK(lpf_resize_memory_register(ctx, 3) == LPF_SUCCESS, "resize");
    CHECK(lpf_resize_message_queue(ctx, 2) == LPF_SUCCESS, "resize");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_memslot_t s_mine, s_prev, s_got;
    CHECK(lpf_register_global(ctx, mine, sizeof mine, &s_mine) == LPF_SUCCESS, "reg");
    CHECK(lpf_register_global(ctx, from_prev, sizeof from_prev, &s_prev) == LPF_SUCCESS, "reg");
    CHECK(lpf_register_local(ctx, got, sizeof got, &s_got) == LPF_SUCCESS, "reg");
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_pid_t next = (pid + 1) % p, prev = (pid + p - 1) % p;
    for (int round = 0; round < 5; round++) {
        /* The second half of the next process's from_prev gets our mine's first half. */
        CHECK(lpf_put(ctx, s_mine, 0, next, s_prev, N / 2 * sizeof(long), N / 2 * sizeof(long),
                      LPF_MSG_DEFAULT) == LPF_SUCCESS, "put");
        CHECK(lpf_get(ctx, prev, s_mine, N / 2 * sizeof(long), s_got, 0, N / 2 * sizeof(long),
                      LPF_MSG_DEFAULT) == LPF_SUCCESS, "get");
        CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
        for (int i = 0; i < N / 2; i++) {
            CHECK(from_prev[N / 2 + i] == (long)prev * 100000 + i + round, "put value at %d", i);
            CHECK(got[i] == (long)prev * 100000 + N / 2 + i + round, "get value at %d", i);
        }
        for (int i = 0; i < N; i++) mine[i] += 1; /* next round sends new values */
    }
    CHECK(lpf_deregister(ctx, s_got) == LPF_SUCCESS, "dereg");
    CHECK(lpf_deregister(ctx, s_prev) == LPF_SUCCESS, "dereg");
    CHECK(lpf_deregister(ctx, s_mine) == LPF_SUCCESS, "dereg");
}

int main(void) {
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
