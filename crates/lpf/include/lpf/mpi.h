/* LPF's MPI extension, as implemented by spillway (library built with the `mpi` feature). */
#ifndef SPILLWAY_LPF_MPI_H
#define SPILLWAY_LPF_MPI_H

#include <lpf/core.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Zero: the program initialises MPI itself (MPI_Init_thread, MPI_THREAD_FUNNELED or more). */
extern const int LPF_MPI_AUTO_INITIALIZE;

/** Makes an lpf_init_t from an MPI communicator: every MPI process of comm becomes one LPF
 *  process of lpf_hook (SPILLWAY_LPF_PROCS_PER_RANK, default 1, runs more per MPI process). */
lpf_err_t lpf_mpi_initialize_with_mpicomm(MPI_Comm comm, lpf_init_t *init);

/** Releases an lpf_init_t. */
lpf_err_t lpf_mpi_finalize(lpf_init_t init);

#ifdef __cplusplus
}
#endif

#endif
