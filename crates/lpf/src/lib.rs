//! LPF's C API on spillway: `libspillway_lpf.so` / `libspillway_lpf.a` export the core API of
//! LPF (Suijlen and Yzelman, "Lightweight Parallel Foundations"), its `lpf_abort` extension
//! and, with the `mpi` feature, its MPI hook, with LPF's ABI. Programs written against LPF's
//! header link against this library unchanged and gain spillway's runtime: more processes than
//! cores, storage-backed memory under a budget, and reports instead of hangs.
//!
//! | LPF | spillway |
//! |---|---|
//! | `lpf_exec(LPF_ROOT, P, ...)` | a job of `min(P, LPF_MAX_PROCS)` ranks (fibers), configured from `SPILLWAY_*` variables |
//! | `lpf_exec` in a section | a nested job on the process's free processors, or an in-place one-process context |
//! | `lpf_hook` | `spillway_runtime::mpi::hook` on a duplicate of the MPI communicator |
//! | `lpf_rehook` | [`spillway_bsp::Bsp::rehook`] |
//! | `lpf_register_*`, `lpf_put`, `lpf_get`, `lpf_sync`, `lpf_resize_*` | the BSP layer ([`spillway_bsp`]), memory registered by address |
//! | `lpf_probe` | the probe cache of `spillway probe`, or an estimate |
//! | `LPF_ROOT` | a one-process context: copies at sync in issue order |
//!
//! # Errors
//! `LPF_ERR_OUT_OF_MEMORY` for capacities that cannot be reserved or are exceeded (nothing
//! happened; the first one per context is also explained on standard error).
//! `LPF_ERR_FATAL` when the section cannot go on: a misuse that LPF leaves undefined (slot not
//! registered, out of bounds, conflicting accesses, NULL arguments: reported on standard error,
//! and the section ends on every process), a failed process, or processes that returned from
//! the SPMD function while others still sync. The context is then in LPF's failure state: its
//! later calls, `lpf_sync`, `lpf_exec` and `lpf_rehook` among them, return `LPF_ERR_FATAL`
//! (`LPF_ROOT` and one-process sections alike). `lpf_exec` returns `LPF_ERR_FATAL` if any of
//! this happened in the section.
//!
//! # Extensions
//! `lpf/spillway.h`: [`spillway_lpf_alloc`] and [`spillway_lpf_free`], storage-backed memory
//! for registered areas, so that registered memory may exceed the node's budget.

#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(missing_docs)]

mod ctx;
mod env;
pub mod ffi;
mod machine;
#[cfg(feature = "mpi")]
mod mpi;
mod section;
mod solo;
mod spmd;

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use crate::ctx::{code, misuse, Context, Res};
use crate::ffi::*;
use crate::section::{Ctx, Section};
use crate::solo::Solo;

/// The context of `LPF_ROOT`.
static ROOT: Mutex<Option<Solo>> = Mutex::new(None);

/// Runs an API call, turning a panic into `LPF_ERR_FATAL` (no unwinding into C).
fn guard(call: &str, f: impl FnOnce() -> lpf_err_t) -> lpf_err_t {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        eprintln!("spillway-lpf: {call}: internal error");
        ERR_FATAL
    })
}

/// Runs `f` on the context behind `ctx`; a context in LPF's failure state refuses every call
/// with `LPF_ERR_FATAL`.
fn with_ctx(ctx: lpf_t, call: &str, f: impl FnOnce(&mut dyn Context) -> Res<()>) -> lpf_err_t {
    let run = |d: &mut dyn Context| {
        if d.failed() {
            return ERR_FATAL;
        }
        let r = f(d);
        code(r, d, call)
    };
    guard(call, || {
        if ctx == root() {
            let mut g = spillway_transport::lock(&ROOT);
            let p = env::max_procs();
            run(g.get_or_insert_with(|| Solo::new((p, p))))
        } else if ctx.is_null() {
            eprintln!("spillway-lpf: {call}: the context is LPF_NONE");
            ERR_FATAL
        } else {
            // SAFETY: every other `lpf_t` this library hands out points to a live `Ctx` for
            // the duration of its SPMD function, used by that process only (LPF's contract).
            run(unsafe { &mut *ctx.cast::<Ctx>() }.as_dyn())
        }
    })
}

/// Whether the context behind `ctx` (`LPF_ROOT` or a process's) is in LPF's failure state.
fn failed(ctx: lpf_t) -> bool {
    if ctx == root() {
        return spillway_transport::lock(&ROOT)
            .as_ref()
            .is_some_and(|s| s.failed());
    }
    // SAFETY: as in `with_ctx`.
    !ctx.is_null() && unsafe { &mut *ctx.cast::<Ctx>() }.as_dyn().failed()
}

fn section(call: &str, spmd: lpf_spmd_t, args: lpf_args_t, to_first: bool) -> Option<Section> {
    match spmd {
        Some(spmd) => Some(Section {
            spmd,
            args,
            args_to_first: to_first,
        }),
        None => {
            eprintln!("spillway-lpf: {call}: the SPMD function is NULL");
            None
        }
    }
}

/// `lpf_exec`: runs `spmd` on `min(P, free processors)` new processes.
///
/// # Safety
/// LPF's contract: `ctx` is `LPF_ROOT` or the context of the calling process, `args` points
/// to valid memory of the given sizes.
#[no_mangle]
pub unsafe extern "C" fn lpf_exec(
    ctx: lpf_t,
    p: lpf_pid_t,
    spmd: lpf_spmd_t,
    args: lpf_args_t,
) -> lpf_err_t {
    guard("lpf_exec", || {
        let Some(section) = section("lpf_exec", spmd, args, true) else {
            return ERR_FATAL;
        };
        if p == 0 {
            eprintln!("spillway-lpf: lpf_exec: P must be at least 1");
            return ERR_FATAL;
        }
        if failed(ctx) {
            return ERR_FATAL;
        }
        let settings = match env::settings() {
            Ok(s) => s,
            Err(m) => {
                eprintln!("spillway-lpf: lpf_exec: {m}");
                return ERR_FATAL;
            }
        };
        if ctx == root() {
            let n = p.min(settings.max_procs);
            let total = settings.max_procs;
            machine::set_layout(settings.nodes.min(n) as usize, "local");
            let config = settings.config(n, false);
            return section::exec_job(&config, total, total, settings.checked, section);
        }
        if ctx.is_null() {
            eprintln!("spillway-lpf: lpf_exec: the context is LPF_NONE");
            return ERR_FATAL;
        }
        // SAFETY: as in `with_ctx`; the borrow ends before the section runs.
        let (total, free) = unsafe { &mut *ctx.cast::<Ctx>() }.as_dyn().processors();
        let k = p.min(free);
        if k <= 1 {
            section::exec_solo((total, free), section)
        } else {
            section::exec_job(
                &settings.config(k, true),
                total,
                free,
                settings.checked,
                section,
            )
        }
    })
}

/// `lpf_hook`: runs `spmd` on the processes of `init` (see `lpf/mpi.h`).
///
/// # Safety
/// `init` comes from `lpf_mpi_initialize_with_mpicomm`; `args` as in [`lpf_exec`].
#[no_mangle]
pub unsafe extern "C" fn lpf_hook(
    init: lpf_init_t,
    spmd: lpf_spmd_t,
    args: lpf_args_t,
) -> lpf_err_t {
    guard("lpf_hook", || {
        let Some(section) = section("lpf_hook", spmd, args, false) else {
            return ERR_FATAL;
        };
        if init.is_null() {
            eprintln!("spillway-lpf: lpf_hook: init is LPF_INIT_NONE");
            return ERR_FATAL;
        }
        #[cfg(feature = "mpi")]
        {
            // SAFETY: forwarded (see above).
            unsafe { mpi::hook(init, section) }
        }
        #[cfg(not(feature = "mpi"))]
        {
            let _ = section;
            eprintln!("spillway-lpf: lpf_hook: this library was built without MPI (feature `mpi`)");
            ERR_FATAL
        }
    })
}

/// `lpf_rehook`: runs `spmd` on the processes of `ctx` with a fresh context.
///
/// # Safety
/// As [`lpf_exec`]; every process of `ctx` calls it.
#[no_mangle]
pub unsafe extern "C" fn lpf_rehook(ctx: lpf_t, spmd: lpf_spmd_t, args: lpf_args_t) -> lpf_err_t {
    guard("lpf_rehook", || {
        let Some(section) = section("lpf_rehook", spmd, args, false) else {
            return ERR_FATAL;
        };
        if failed(ctx) {
            return ERR_FATAL;
        }
        if ctx == root() {
            let p = env::max_procs();
            return section::exec_solo((p, p), section);
        }
        if ctx.is_null() {
            eprintln!("spillway-lpf: lpf_rehook: the context is LPF_NONE");
            return ERR_FATAL;
        }
        // SAFETY: as in `with_ctx`.
        match unsafe { &mut *ctx.cast::<Ctx>() } {
            Ctx::Spmd(s) => section::rehook(s, section),
            Ctx::Solo(s) => section::exec_solo(s.processors(), section),
        }
    })
}

unsafe fn register(
    ctx: lpf_t,
    global: bool,
    pointer: *mut c_void,
    size: usize,
    memslot: *mut lpf_memslot_t,
) -> lpf_err_t {
    let call = if global {
        "lpf_register_global"
    } else {
        "lpf_register_local"
    };
    with_ctx(ctx, call, |c| {
        if memslot.is_null() {
            return Err(misuse(call, "memslot is NULL"));
        }
        if pointer.is_null() && size > 0 {
            return Err(misuse(call, format!("NULL pointer with {size} bytes")));
        }
        // SAFETY: LPF's contract: `pointer` is valid for `size` bytes while registered.
        let s = unsafe { c.register(global, pointer.cast(), size) }?;
        // SAFETY: checked non-null; the caller passes a writable `lpf_memslot_t`.
        unsafe { memslot.write(s) };
        Ok(())
    })
}

/// `lpf_register_global`.
///
/// # Safety
/// `pointer` valid for `size` bytes until deregistered; `memslot` writable.
#[no_mangle]
pub unsafe extern "C" fn lpf_register_global(
    ctx: lpf_t,
    pointer: *mut c_void,
    size: usize,
    memslot: *mut lpf_memslot_t,
) -> lpf_err_t {
    // SAFETY: forwarded.
    unsafe { register(ctx, true, pointer, size, memslot) }
}

/// `lpf_register_local`.
///
/// # Safety
/// As [`lpf_register_global`].
#[no_mangle]
pub unsafe extern "C" fn lpf_register_local(
    ctx: lpf_t,
    pointer: *mut c_void,
    size: usize,
    memslot: *mut lpf_memslot_t,
) -> lpf_err_t {
    // SAFETY: forwarded.
    unsafe { register(ctx, false, pointer, size, memslot) }
}

/// The calls that hand their arguments to the context's method of the same name, the
/// message or sync attribute (which LPF reserves) ignored.
macro_rules! forward {
    ($name:ident => $method:ident($($arg:ident: $ty:ty),*) $(, $attr:ident: $attr_ty:ty)?) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        ///
        /// # Safety
        /// `ctx` as in [`lpf_exec`].
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            ctx: lpf_t,
            $($arg: $ty,)*
            $($attr: $attr_ty)?
        ) -> lpf_err_t {
            with_ctx(ctx, stringify!($name), |c| c.$method($($arg),*))
        }
    };
}

forward!(lpf_deregister => deregister(memslot: lpf_memslot_t));
forward!(lpf_put => put(
    src_slot: lpf_memslot_t,
    src_offset: usize,
    dst_pid: lpf_pid_t,
    dst_slot: lpf_memslot_t,
    dst_offset: usize,
    size: usize
), _attr: lpf_msg_attr_t);
forward!(lpf_get => get(
    src_pid: lpf_pid_t,
    src_slot: lpf_memslot_t,
    src_offset: usize,
    dst_slot: lpf_memslot_t,
    dst_offset: usize,
    size: usize
), _attr: lpf_msg_attr_t);
forward!(lpf_sync => sync(), _attr: lpf_sync_attr_t);
forward!(lpf_resize_memory_register => resize_memory_register(max_regs: usize));
forward!(lpf_resize_message_queue => resize_message_queue(max_msgs: usize));

/// `lpf_probe`.
///
/// # Safety
/// `params` writable.
#[no_mangle]
pub unsafe extern "C" fn lpf_probe(ctx: lpf_t, params: *mut lpf_machine_t) -> lpf_err_t {
    with_ctx(ctx, "lpf_probe", |c| {
        if params.is_null() {
            return Err(misuse("lpf_probe", "params is NULL"));
        }
        // SAFETY: checked non-null; the caller passes a writable `lpf_machine_t`.
        unsafe { params.write(machine::machine(c.processors())) };
        Ok(())
    })
}

/// `lpf_abort`: ends the program with exit code 6 (LPF's convention), at once.
///
/// # Safety
/// Always safe to call; it does not return.
#[no_mangle]
pub unsafe extern "C" fn lpf_abort(_ctx: lpf_t) -> lpf_err_t {
    eprintln!("spillway-lpf: lpf_abort was called: exiting with code 6");
    #[cfg(feature = "mpi")]
    mpi::abort(6);
    // SAFETY: flushing C's output streams (NULL: all of them) and ending the process without
    // running destructors while other processes of the section still run.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(6)
    }
}

/// Allocates `size` zeroed bytes of storage-backed memory owned by the calling process of
/// `ctx` (spillway's extension, `lpf/spillway.h`); NULL on failure.
///
/// # Safety
/// `ctx` as in [`lpf_exec`].
#[no_mangle]
pub unsafe extern "C" fn spillway_lpf_alloc(ctx: lpf_t, size: usize) -> *mut c_void {
    let mut out = std::ptr::null_mut();
    let rc = with_ctx(ctx, "spillway_lpf_alloc", |c| {
        out = c.alloc(size)?;
        Ok(())
    });
    if rc == SUCCESS {
        out
    } else {
        std::ptr::null_mut()
    }
}

/// Frees memory of [`spillway_lpf_alloc`].
///
/// # Safety
/// `ctx` as in [`lpf_exec`]; `pointer` no longer registered or used.
#[no_mangle]
pub unsafe extern "C" fn spillway_lpf_free(ctx: lpf_t, pointer: *mut c_void) -> lpf_err_t {
    with_ctx(ctx, "spillway_lpf_free", |c| {
        if pointer.is_null() {
            return Ok(());
        }
        c.free(pointer)
    })
}
