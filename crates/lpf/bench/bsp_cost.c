/* Costs of LPF's primitives as a C program sees them, for any LPF implementation this file is
 * linked with (spillway's, or LPF's own engines): the time of an empty lpf_sync (latency l),
 * and of a total exchange of h bytes per process in P puts (h-relation), best of REPS.
 * Prints one line per measurement: "<what> P=<p> h=<bytes> <seconds>". */
#include <lpf/core.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)args;
    const int syncs = 2000, reps = 5;
    lpf_resize_memory_register(ctx, 2);
    lpf_resize_message_queue(ctx, 2 * p);
    lpf_sync(ctx, LPF_SYNC_DEFAULT);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        lpf_sync(ctx, LPF_SYNC_DEFAULT);
        double t = now();
        for (int i = 0; i < syncs; i++) lpf_sync(ctx, LPF_SYNC_DEFAULT);
        t = (now() - t) / syncs;
        if (t < best) best = t;
    }
    if (pid == 0) printf("sync P=%u h=0 %.3e\n", p, best);
    size_t hs[] = {1 << 10, 1 << 16, 1 << 20, 1 << 24};
    for (int k = 0; k < 4; k++) {
        size_t h = hs[k], b = h / p;
        if (b == 0) continue;
        char *src = malloc(b * p), *dst = malloc(b * p);
        memset(src, (int)pid, b * p);
        lpf_memslot_t ss, sd;
        lpf_register_local(ctx, src, b * p, &ss);
        lpf_register_global(ctx, dst, b * p, &sd);
        lpf_sync(ctx, LPF_SYNC_DEFAULT);
        double bt = 1e30;
        int n = h >= (1 << 20) ? 5 : 50;
        for (int r = 0; r < reps; r++) {
            double t = now();
            for (int i = 0; i < n; i++) {
                for (lpf_pid_t q = 0; q < p; q++)
                    lpf_put(ctx, ss, q * b, q, sd, pid * b, b, LPF_MSG_DEFAULT);
                lpf_sync(ctx, LPF_SYNC_DEFAULT);
            }
            t = (now() - t) / n;
            if (t < bt) bt = t;
        }
        if (pid == 0) printf("exchange P=%u h=%zu %.3e\n", p, b * p, bt);
        lpf_deregister(ctx, ss);
        lpf_deregister(ctx, sd);
        free(src);
        free(dst);
    }
}

int main(void) {
    return lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS ? 0 : 1;
}
