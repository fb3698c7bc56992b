/* Every process reports in: pid and nprocs are right, only pid 0 gets the arguments, and
 * pid 0's output is visible after lpf_exec. */
#include <lpf/core.h>
#include "check.h"

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t nprocs, lpf_args_t args) {
    (void)ctx;
    unsigned want = env_procs();
    CHECK(nprocs == want, "nprocs %u, LPF_MAX_PROCS %u", nprocs, want);
    CHECK(pid < nprocs, "pid %u of %u", pid, nprocs);
    if (pid == 0) {
        CHECK(args.input_size == sizeof(int) && *(const int *)args.input == 42, "input");
        *(int *)args.output = (int)nprocs * 1000 + 7;
    } else {
        CHECK(args.input == NULL && args.input_size == 0, "pid %u got input", pid);
        CHECK(args.output == NULL && args.output_size == 0, "pid %u got output", pid);
    }
    printf("hello from %u of %u\n", pid, nprocs);
}

int main(void) {
    int in = 42, out = -1;
    lpf_args_t args = {&in, sizeof in, &out, sizeof out, NULL, 0};
    lpf_err_t rc = lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, args);
    CHECK(rc == LPF_SUCCESS, "lpf_exec returned %d", rc);
    CHECK(out == (int)env_procs() * 1000 + 7, "output %d", out);
    CHECK(_LPF_VERSION == 202000L, "version");
    return failures();
}
