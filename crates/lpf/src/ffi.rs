//! LPF's C types and constants, with LPF's ABI (see `include/lpf/core.h`).

#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_uint, c_void};

/// `lpf_t`: a context handle.
pub type lpf_t = *mut c_void;
/// `lpf_pid_t`.
pub type lpf_pid_t = c_uint;
/// `lpf_err_t`.
pub type lpf_err_t = c_int;
/// `lpf_init_t`.
pub type lpf_init_t = *mut c_void;
/// `lpf_sync_attr_t`.
pub type lpf_sync_attr_t = c_int;
/// `lpf_msg_attr_t`.
pub type lpf_msg_attr_t = c_int;
/// `lpf_memslot_t`.
pub type lpf_memslot_t = usize;
/// `lpf_func_t`: a function symbol.
pub type lpf_func_t = Option<unsafe extern "C" fn()>;
/// `lpf_spmd_t`: an SPMD function.
pub type lpf_spmd_t =
    Option<unsafe extern "C" fn(ctx: lpf_t, pid: lpf_pid_t, nprocs: lpf_pid_t, args: lpf_args_t)>;
/// The cost functions of `lpf_machine_t`.
pub type lpf_cost_t = unsafe extern "C" fn(lpf_pid_t, usize, lpf_sync_attr_t) -> f64;

/// `lpf_args_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lpf_args_t {
    /// Input block (process 0 only).
    pub input: *const c_void,
    /// Bytes of `input`.
    pub input_size: usize,
    /// Output block (process 0 only).
    pub output: *mut c_void,
    /// Bytes of `output`.
    pub output_size: usize,
    /// Function symbols (every process).
    pub f_symbols: *const lpf_func_t,
    /// Number of `f_symbols`.
    pub f_size: usize,
}

/// `lpf_machine_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lpf_machine_t {
    /// All processors.
    pub p: lpf_pid_t,
    /// Processors free for a nested `lpf_exec`.
    pub free_p: lpf_pid_t,
    /// Seconds per byte.
    pub g: lpf_cost_t,
    /// Seconds per sync.
    pub l: lpf_cost_t,
}

/// A constant holding a pointer: raw pointers are not `Sync`, these never change.
#[repr(transparent)]
pub struct ConstPtr(pub *mut c_void);
// SAFETY: the pointer is an immutable value (an address used as a tag, or null); nothing is
// ever read or written through it by this library.
unsafe impl Sync for ConstPtr {}

/// A constant `lpf_args_t` (its pointers are null).
#[repr(transparent)]
pub struct ConstArgs(pub lpf_args_t);
// SAFETY: the value is immutable and its pointers are null.
unsafe impl Sync for ConstArgs {}

/// Success.
pub const SUCCESS: lpf_err_t = 0;
/// A mitigable error: nothing happened.
pub const ERR_OUT_OF_MEMORY: lpf_err_t = 1;
/// A fatal error: the context cannot be used any more.
pub const ERR_FATAL: lpf_err_t = 2;

/// The tag whose address is `LPF_ROOT`.
pub static ROOT_TAG: u8 = 0;

#[no_mangle]
#[used]
/// `LPF_SUCCESS`.
pub static LPF_SUCCESS: lpf_err_t = SUCCESS;
#[no_mangle]
#[used]
/// `LPF_ERR_OUT_OF_MEMORY`.
pub static LPF_ERR_OUT_OF_MEMORY: lpf_err_t = ERR_OUT_OF_MEMORY;
#[no_mangle]
#[used]
/// `LPF_ERR_FATAL`.
pub static LPF_ERR_FATAL: lpf_err_t = ERR_FATAL;
#[no_mangle]
#[used]
/// `LPF_NONE`: no context.
pub static LPF_NONE: ConstPtr = ConstPtr(std::ptr::null_mut());
#[no_mangle]
#[used]
/// `LPF_ROOT`: the context of the program outside SPMD sections.
pub static LPF_ROOT: ConstPtr = ConstPtr(&ROOT_TAG as *const u8 as *mut c_void);
#[no_mangle]
#[used]
/// `LPF_INIT_NONE`.
pub static LPF_INIT_NONE: ConstPtr = ConstPtr(std::ptr::null_mut());
#[no_mangle]
#[used]
/// `LPF_SYNC_DEFAULT`.
pub static LPF_SYNC_DEFAULT: lpf_sync_attr_t = 0;
#[no_mangle]
#[used]
/// `LPF_MSG_DEFAULT`.
pub static LPF_MSG_DEFAULT: lpf_msg_attr_t = 0;
#[no_mangle]
#[used]
/// `LPF_MAX_P`: as many processes as the machine has (`LPF_MAX_PROCS`).
pub static LPF_MAX_P: lpf_pid_t = c_uint::MAX;
#[no_mangle]
#[used]
/// `LPF_INVALID_MEMSLOT`.
pub static LPF_INVALID_MEMSLOT: lpf_memslot_t = usize::MAX;
#[no_mangle]
#[used]
/// `LPF_NO_ARGS`.
pub static LPF_NO_ARGS: ConstArgs = ConstArgs(NO_ARGS);
#[no_mangle]
#[used]
/// `LPF_INVALID_MACHINE`: zero processors, infinite costs.
pub static LPF_INVALID_MACHINE: lpf_machine_t = lpf_machine_t {
    p: 0,
    free_p: 0,
    g: invalid_cost,
    l: invalid_cost,
};
#[no_mangle]
#[used]
/// `LPF_HAS_ABORT`.
pub static LPF_HAS_ABORT: c_int = 1;

/// Empty arguments.
pub const NO_ARGS: lpf_args_t = lpf_args_t {
    input: std::ptr::null(),
    input_size: 0,
    output: std::ptr::null_mut(),
    output_size: 0,
    f_symbols: std::ptr::null(),
    f_size: 0,
};

unsafe extern "C" fn invalid_cost(_p: lpf_pid_t, _min: usize, _attr: lpf_sync_attr_t) -> f64 {
    f64::INFINITY
}

/// The handle of `LPF_ROOT`.
pub fn root() -> lpf_t {
    LPF_ROOT.0
}
