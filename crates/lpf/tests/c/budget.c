/* Registered memory beyond the memory budget: every process allocates MIB_PER_PROC MiB with
 * spillway_lpf_alloc, registers it, and in each of ROUNDS supersteps gets a slice of the next
 * process's area; values are checked against a formula. Prints the peak RSS (VmHWM) in KiB
 * on the last line, for the test to compare with the budget. */
#include <lpf/core.h>
#include <lpf/spillway.h>
#include <string.h>
#include "check.h"

#define ROUNDS 3

static size_t bytes_per_proc(void) {
    const char *v = getenv("MIB_PER_PROC");
    return (size_t)(v ? atoi(v) : 4) << 20;
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    size_t n = bytes_per_proc() / sizeof(unsigned);
    unsigned *a = spillway_lpf_alloc(ctx, n * sizeof(unsigned));
    unsigned *got = spillway_lpf_alloc(ctx, 4096 * sizeof(unsigned));
    CHECK(a != NULL && got != NULL, "alloc");
    if (!a || !got) return;
    for (size_t i = 0; i < n; i++) a[i] = (unsigned)(pid * 2654435761u + i);
    lpf_resize_memory_register(ctx, 2);
    lpf_resize_message_queue(ctx, 1);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    lpf_memslot_t sa, sg;
    lpf_register_global(ctx, a, n * sizeof(unsigned), &sa);
    lpf_register_local(ctx, got, 4096 * sizeof(unsigned), &sg);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_pid_t next = (pid + 1) % p;
    for (int r = 0; r < ROUNDS; r++) {
        size_t at = (n / ROUNDS) * (size_t)r + 17;
        CHECK(lpf_get(ctx, next, sa, at * sizeof(unsigned), sg, 0, 4096 * sizeof(unsigned),
                      LPF_MSG_DEFAULT) == LPF_SUCCESS, "get");
        CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
        for (size_t i = 0; i < 4096; i++)
            CHECK(got[i] == (unsigned)(next * 2654435761u + at + i), "round %d at %zu", r, i);
        /* Touch the whole area again: the process works on its data between syncs. */
        unsigned long sum = 0;
        for (size_t i = 0; i < n; i += 1024) sum += a[i];
        CHECK(sum != 1, "sum");
    }
    lpf_deregister(ctx, sa);
    lpf_deregister(ctx, sg);
    CHECK(spillway_lpf_free(ctx, a) == LPF_SUCCESS, "free");
    CHECK(spillway_lpf_free(ctx, got) == LPF_SUCCESS, "free");
}

int main(void) {
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long hwm = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) hwm = atol(line + 6);
    if (f) fclose(f);
    printf("peak_rss_kib %ld\n", hwm);
    return failures();
}
