//! LPF's MPI extension (`lpf/mpi.h`): `lpf_hook` on the processes of an MPI communicator.

use std::ffi::c_int;

use mpi::ffi::MPI_Comm;
use mpi::raw::FromRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use spillway_comm::Comm;
use spillway_runtime::Backend;

use crate::env;
use crate::ffi::{lpf_err_t, lpf_init_t, ERR_FATAL, SUCCESS};
use crate::section::{hook_comm, report, Section};

/// What an `lpf_init_t` of this extension points to.
struct Init {
    comm: MPI_Comm,
}

#[no_mangle]
#[used]
/// `LPF_MPI_AUTO_INITIALIZE`: 0, the program initialises MPI itself.
pub static LPF_MPI_AUTO_INITIALIZE: c_int = 0;

/// `lpf_mpi_initialize_with_mpicomm`: an `lpf_init_t` for `lpf_hook` on the processes of
/// `comm` (duplicated: the caller may free `comm` afterwards).
///
/// # Safety
/// `comm` is a valid intra-communicator; `init` is writable. MPI is initialised.
#[no_mangle]
pub unsafe extern "C" fn lpf_mpi_initialize_with_mpicomm(
    comm: MPI_Comm,
    init: *mut lpf_init_t,
) -> lpf_err_t {
    if init.is_null() {
        eprintln!("spillway-lpf: lpf_mpi_initialize_with_mpicomm: init is NULL");
        return ERR_FATAL;
    }
    let mut dup: MPI_Comm = comm;
    // SAFETY: duplicating a valid communicator into a local handle (MPI's contract).
    let rc = unsafe { mpi::ffi::MPI_Comm_dup(comm, &mut dup) };
    if rc != 0 {
        eprintln!("spillway-lpf: lpf_mpi_initialize_with_mpicomm: MPI_Comm_dup failed ({rc})");
        return ERR_FATAL;
    }
    let b = Box::new(Init { comm: dup });
    // SAFETY: checked non-null above.
    unsafe { init.write(Box::into_raw(b).cast()) };
    SUCCESS
}

/// `lpf_mpi_finalize`: releases an `lpf_init_t`.
///
/// # Safety
/// `init` comes from [`lpf_mpi_initialize_with_mpicomm`] and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn lpf_mpi_finalize(init: lpf_init_t) -> lpf_err_t {
    if init.is_null() {
        return ERR_FATAL;
    }
    // SAFETY: made by `Box::into_raw` in `lpf_mpi_initialize_with_mpicomm`.
    let b = unsafe { Box::from_raw(init.cast::<Init>()) };
    // SAFETY: the duplicate is ours; wrapping it frees it when dropped.
    drop(unsafe { SimpleCommunicator::from_raw(b.comm) });
    SUCCESS
}

/// `lpf_hook` over MPI: every process of the communicator runs `section` as one LPF process
/// (`SPILLWAY_LPF_PROCS_PER_RANK` per MPI process).
///
/// # Safety
/// `init` comes from [`lpf_mpi_initialize_with_mpicomm`].
pub(crate) unsafe fn hook(init: lpf_init_t, section: Section) -> lpf_err_t {
    // SAFETY: made by `lpf_mpi_initialize_with_mpicomm`, not yet finalised.
    let init = unsafe { &*init.cast::<Init>() };
    let settings = match env::settings() {
        Ok(s) => s,
        Err(m) => {
            eprintln!("spillway-lpf: lpf_hook: {m}");
            return ERR_FATAL;
        }
    };
    let per = match std::env::var("SPILLWAY_LPF_PROCS_PER_RANK") {
        Err(_) => 1,
        Ok(v) => match v.trim().parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => {
                eprintln!("spillway-lpf: lpf_hook: SPILLWAY_LPF_PROCS_PER_RANK={v}: expected a whole number of at least 1");
                return ERR_FATAL;
            }
        },
    };
    let mut dup: MPI_Comm = init.comm;
    // SAFETY: duplicating the init's communicator for the time of the hook.
    if unsafe { mpi::ffi::MPI_Comm_dup(init.comm, &mut dup) } != 0 {
        eprintln!("spillway-lpf: lpf_hook: MPI_Comm_dup failed");
        return ERR_FATAL;
    }
    // SAFETY: a live intra-communicator owned here (freed when dropped).
    let comm = unsafe { SimpleCommunicator::from_raw(dup) };
    let size = comm.size() as u32;
    let total = size * per;
    crate::machine::set_layout(size as usize, "mpi");
    let config = settings
        .config(total, false)
        .nodes(size)
        .backend(Backend::Mpi);
    let r = spillway_runtime::mpi::hook(&comm, &config, |rank| {
        let world = Comm::world(rank);
        Ok::<_, spillway_bsp::Error>(hook_comm(&world, total, settings.checked, &section))
    });
    report("lpf_hook", r)
}

/// Ends every process of the MPI program with `code` (for `lpf_abort`), if MPI is running.
pub(crate) fn abort(code: c_int) {
    let mut up: c_int = 0;
    let mut down: c_int = 0;
    // SAFETY: MPI_Initialized and MPI_Finalized may be called at any time.
    unsafe {
        mpi::ffi::MPI_Initialized(&mut up);
        mpi::ffi::MPI_Finalized(&mut down);
        if up != 0 && down == 0 {
            mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, code);
        }
    }
}
