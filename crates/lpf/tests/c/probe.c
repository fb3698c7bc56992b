/* lpf_probe in LPF_ROOT and in a section: p, free_p and positive g and l. */
#include <lpf/core.h>
#include "check.h"

static void check_machine(lpf_machine_t m, const char *where) {
    unsigned sizes[3] = {1, m.p, m.p};
    size_t msgs[3] = {0, 0, (size_t)-1};
    for (int i = 0; i < 3; i++) {
        CHECK(m.g(sizes[i], msgs[i], LPF_SYNC_DEFAULT) > 0.0, "%s g", where);
        CHECK(m.l(sizes[i], msgs[i], LPF_SYNC_DEFAULT) > 0.0, "%s l", where);
    }
}

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    (void)pid; (void)args;
    lpf_machine_t m = LPF_INVALID_MACHINE;
    CHECK(lpf_probe(ctx, &m) == LPF_SUCCESS, "probe");
    CHECK(m.p == env_procs(), "p %u", m.p);
    CHECK(m.free_p == 1 || p < m.p, "free_p %u with all processors in use", m.free_p);
    check_machine(m, "section");
}

int main(void) {
    lpf_machine_t m = LPF_INVALID_MACHINE;
    CHECK(LPF_INVALID_MACHINE.p == 0, "invalid machine");
    CHECK(lpf_probe(LPF_ROOT, &m) == LPF_SUCCESS, "probe");
    CHECK(m.p == env_procs() && m.free_p >= m.p, "root p %u free_p %u", m.p, m.free_p);
    check_machine(m, "root");
    CHECK(lpf_exec(LPF_ROOT, LPF_MAX_P, spmd, LPF_NO_ARGS) == LPF_SUCCESS, "exec");
    return failures();
}
