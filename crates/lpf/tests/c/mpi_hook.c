/* lpf_hook over MPI: the MPI program initialises MPI, makes an lpf_init_t from
 * MPI_COMM_WORLD, and runs an SPMD function on its processes (SPILLWAY_LPF_PROCS_PER_RANK
 * LPF processes per MPI process). The function checks its pid and nprocs against MPI's view,
 * exchanges values with puts and gets, and the MPI program checks the output afterwards. */
#include <lpf/core.h>
#include <lpf/mpi.h>
#include "check.h"

static void spmd(lpf_t ctx, lpf_pid_t pid, lpf_pid_t p, lpf_args_t args) {
    unsigned per = getenv("SPILLWAY_LPF_PROCS_PER_RANK") ? (unsigned)atoi(getenv("SPILLWAY_LPF_PROCS_PER_RANK")) : 1;
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    CHECK(p == (unsigned)world * per, "nprocs %u, MPI size %d x %u", p, world, per);
    CHECK(args.input_size == sizeof(int), "every process gets its own input");
    unsigned long *all = calloc(p, sizeof *all), mine = 1000ul * pid + 7, got = 0;
    lpf_resize_memory_register(ctx, 3);
    lpf_resize_message_queue(ctx, 2 * p);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    lpf_memslot_t sa, sm, sg;
    lpf_register_global(ctx, all, p * sizeof *all, &sa);
    lpf_register_global(ctx, &mine, sizeof mine, &sm);
    lpf_register_local(ctx, &got, sizeof got, &sg);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    for (lpf_pid_t q = 0; q < p; q++)
        lpf_put(ctx, sm, 0, q, sa, pid * sizeof mine, sizeof mine, LPF_MSG_DEFAULT);
    lpf_get(ctx, (pid + 1) % p, sm, 0, sg, 0, sizeof got, LPF_MSG_DEFAULT);
    CHECK(lpf_sync(ctx, LPF_SYNC_DEFAULT) == LPF_SUCCESS, "sync");
    for (lpf_pid_t q = 0; q < p; q++) CHECK(all[q] == 1000ul * q + 7, "from %u: %lu", q, all[q]);
    CHECK(got == 1000ul * ((pid + 1) % p) + 7, "get: %lu", got);
    lpf_deregister(ctx, sa);
    lpf_deregister(ctx, sm);
    lpf_deregister(ctx, sg);
    free(all);
    if (args.output_size == sizeof(int)) *(int *)args.output = (int)p;
}

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    lpf_init_t init = LPF_INIT_NONE;
    CHECK(lpf_mpi_initialize_with_mpicomm(MPI_COMM_WORLD, &init) == LPF_SUCCESS, "init");
    int in = rank, out = -1;
    lpf_args_t args = {&in, sizeof in, &out, sizeof out, NULL, 0};
    CHECK(lpf_hook(init, spmd, args) == LPF_SUCCESS, "hook");
    CHECK(out > 0, "output %d", out);
    CHECK(lpf_mpi_finalize(init) == LPF_SUCCESS, "finalize");
    int bad = failures(), any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
