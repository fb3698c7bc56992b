/* LPF's abort extension, as implemented by spillway. */
#ifndef SPILLWAY_LPF_ABORT_H
#define SPILLWAY_LPF_ABORT_H

#include <lpf/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Non-zero: lpf_abort is available. */
extern const int LPF_HAS_ABORT;

/** Ends the whole program at once with exit code 6 (under MPI: MPI_Abort with code 6). */
lpf_err_t lpf_abort(lpf_t ctx);

#ifdef __cplusplus
}
#endif

#endif
