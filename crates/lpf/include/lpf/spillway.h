/* spillway's extensions to LPF: storage-backed memory for registered areas. */
#ifndef SPILLWAY_LPF_SPILLWAY_H
#define SPILLWAY_LPF_SPILLWAY_H

#include <lpf/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/** size zeroed bytes of storage-backed memory owned by this process of ctx: under a memory
 *  budget (SPILLWAY_MEM_BUDGET) it lives in the spill directory and is in memory only while
 *  the process runs, so registered memory may exceed RAM. Page-aligned when size is a page or
 *  more. Freed by spillway_lpf_free or at the end of the SPMD section. NULL on failure. */
void *spillway_lpf_alloc(lpf_t ctx, size_t size);

/** Frees memory of spillway_lpf_alloc (deregister it first). */
lpf_err_t spillway_lpf_free(lpf_t ctx, void *pointer);

#ifdef __cplusplus
}
#endif

#endif
