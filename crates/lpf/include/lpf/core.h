/*
 * spillway's implementation of the LPF core API (Lightweight Parallel Foundations,
 * Suijlen and Yzelman), version 2020.
 *
 * This header declares the types, constants and functions of LPF's core API with LPF's ABI:
 * a program compiled against this header, or against LPF's own include/lpf/core.h, links
 * against libspillway_lpf (shared or static) unchanged. The semantics are LPF's; where
 * spillway adds something (more processes than cores, storage-backed memory, settings from
 * the environment) it is said below and in the crate's README.
 *
 * Settings read from the environment by lpf_exec from LPF_ROOT:
 *   LPF_MAX_PROCS         the number of processes LPF_MAX_P stands for (default: the cores
 *                         available to this process)
 *   SPILLWAY_NODES        nodes the processes are spread over (local backend, default 1)
 *   SPILLWAY_RUNNING      processes running at once per node (default: the cores)
 *   SPILLWAY_MEM_BUDGET   memory budget per node, e.g. 256M (default: none)
 *   SPILLWAY_POLICY       araw, arlw or lrlw (storage-backed memory policy)
 *   SPILLWAY_SPILL_DIR    where storage-backed memory and spilled messages go
 *   SPILLWAY_STACK_SIZE   stack of each process, e.g. 8M (default 4M)
 *   SPILLWAY_LPF_CHECKED  1: check every sync across processes (slower; reports mismatches)
 */
#ifndef SPILLWAY_LPF_CORE_H
#define SPILLWAY_LPF_CORE_H

#ifdef __cplusplus
#include <cstddef>
extern "C" {
#else
#include <stddef.h>
#endif

/** The version of the LPF API this library implements. */
#define _LPF_VERSION 202000L
/** Registered memory may be reused after deregistration (LPF's inclusive memory model). */
#define _LPF_INCLUSIVE_MEMORY 202000L

/** A context: LPF_ROOT, or the handle an SPMD function receives. */
typedef void *lpf_t;
/** A process identifier, 0 .. nprocs-1. */
typedef unsigned lpf_pid_t;
/** A function symbol passed to an SPMD section. */
typedef void (*lpf_func_t)();

/** The arguments of an SPMD section. Only process 0 receives input and output; every process
 *  receives the function symbols. */
typedef struct lpf_args {
    const void *input;      /**< readable block of input_size bytes */
    size_t input_size;
    void *output;           /**< writeable block of output_size bytes */
    size_t output_size;
    const lpf_func_t *f_symbols; /**< f_size function symbols */
    size_t f_size;
} lpf_args_t;

/** An error code: LPF_SUCCESS, LPF_ERR_OUT_OF_MEMORY (nothing happened) or LPF_ERR_FATAL
 *  (the context can no longer be used). */
typedef int lpf_err_t;
/** The result of lpf_mpi_initialize_with_mpicomm, for lpf_hook. */
typedef void *lpf_init_t;
/** Attributes of lpf_sync; use LPF_SYNC_DEFAULT. */
typedef int lpf_sync_attr_t;
/** Attributes of lpf_put and lpf_get; use LPF_MSG_DEFAULT. */
typedef int lpf_msg_attr_t;
/** A registered memory area. */
typedef size_t lpf_memslot_t;

/** The BSP machine: processors, and the cost of communication as functions of the number of
 *  processes, the smallest message size and the sync attribute. */
typedef struct lpf_machine {
    lpf_pid_t p;       /**< all processors of the machine (LPF_MAX_PROCS) */
    lpf_pid_t free_p;  /**< processors a nested lpf_exec of this process may use */
    double (*g)(lpf_pid_t p, size_t min_msg_size, lpf_sync_attr_t attr); /**< seconds per byte */
    double (*l)(lpf_pid_t p, size_t min_msg_size, lpf_sync_attr_t attr); /**< seconds per sync */
} lpf_machine_t;

/** The function an SPMD section runs on every process. */
typedef void (*lpf_spmd_t)(const lpf_t ctx, const lpf_pid_t pid, const lpf_pid_t nprocs,
                           const lpf_args_t args);

extern const lpf_args_t LPF_NO_ARGS;
extern const lpf_err_t LPF_SUCCESS;
extern const lpf_err_t LPF_ERR_OUT_OF_MEMORY;
extern const lpf_err_t LPF_ERR_FATAL;
extern const lpf_t LPF_NONE;
extern const lpf_t LPF_ROOT;
extern const lpf_init_t LPF_INIT_NONE;
extern const lpf_sync_attr_t LPF_SYNC_DEFAULT;
extern const lpf_msg_attr_t LPF_MSG_DEFAULT;
extern const lpf_pid_t LPF_MAX_P;
extern const lpf_machine_t LPF_INVALID_MACHINE;
extern const lpf_memslot_t LPF_INVALID_MEMSLOT;

/** Runs spmd on min(P, free processors) new processes; returns when all have returned. */
lpf_err_t lpf_exec(lpf_t ctx, lpf_pid_t P, lpf_spmd_t spmd, lpf_args_t args);
/** Runs spmd on the processes described by init (an MPI communicator, see lpf/mpi.h). */
lpf_err_t lpf_hook(lpf_init_t init, lpf_spmd_t spmd, lpf_args_t args);
/** Runs spmd on the processes of ctx with a fresh context; called by every process. */
lpf_err_t lpf_rehook(lpf_t ctx, lpf_spmd_t spmd, lpf_args_t args);
/** Registers size bytes at pointer, the same way on every process; usable remotely after the
 *  next lpf_sync. */
lpf_err_t lpf_register_global(lpf_t ctx, void *pointer, size_t size, lpf_memslot_t *memslot);
/** Registers size bytes at pointer for this process only (put sources, get destinations). */
lpf_err_t lpf_register_local(lpf_t ctx, void *pointer, size_t size, lpf_memslot_t *memslot);
/** Deregisters a slot (global slots on every process, in the same order). */
lpf_err_t lpf_deregister(lpf_t ctx, lpf_memslot_t memslot);
/** Copies size bytes to another process's global slot at the next lpf_sync. */
lpf_err_t lpf_put(lpf_t ctx, lpf_memslot_t src_slot, size_t src_offset, lpf_pid_t dst_pid,
                  lpf_memslot_t dst_slot, size_t dst_offset, size_t size, lpf_msg_attr_t attr);
/** Copies size bytes from another process's global slot at the next lpf_sync. */
lpf_err_t lpf_get(lpf_t ctx, lpf_pid_t src_pid, lpf_memslot_t src_slot, size_t src_offset,
                  lpf_memslot_t dst_slot, size_t dst_offset, size_t size, lpf_msg_attr_t attr);
/** Ends the superstep: every put and get of every process has happened when it returns. */
lpf_err_t lpf_sync(lpf_t ctx, lpf_sync_attr_t attr);
/** The BSP machine parameters of ctx. */
lpf_err_t lpf_probe(lpf_t ctx, lpf_machine_t *params);
/** Room for max_regs registrations, in force after the next lpf_sync. */
lpf_err_t lpf_resize_memory_register(lpf_t ctx, size_t max_regs);
/** Room for max_msgs puts and gets per superstep, in force after the next lpf_sync. */
lpf_err_t lpf_resize_message_queue(lpf_t ctx, size_t max_msgs);

#ifdef __cplusplus
}
#endif

#endif
