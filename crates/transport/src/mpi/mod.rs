//! The MPI engine: one MPI process per node, the node's ranks in it, one progress thread.
//!
//! # Design
//!
//! Each process of the communicator is one node; node `i` is MPI rank `i`. The thread that
//! starts the job becomes the node's *progress thread*. With `MPI_THREAD_FUNNELED` it is the
//! only thread that calls MPI; with `MPI_THREAD_SERIALIZED` or more (what `run` asks for) a
//! rank that waits may also make a round of progress itself, under the engine's mutex
//! ([`Outbox::drive`](crate::Outbox::drive)), so that a message moves between processes
//! without a hand-off between threads at either end. The engine talks to the job only
//! through [`Host`] (deliver, fail, passive, local done) and the [`Outbox`].
//!
//! * **Sending** ([`progress`]). A rank's message for a rank of another node goes into the
//!   outbox; the progress thread sends a header (context, source, destination, tag, length)
//!   and, for messages above 8 KiB, the payload straight from the rank's buffer as separate
//!   chunks of at most 1 GiB, without copying.
//! * **Receiving** ([`progress`]). The progress thread probes for headers, receives the
//!   payload into a pooled 16-byte aligned buffer and delivers the messages of each source
//!   process in the order they were sent, so MPI's non-overtaking rule holds between spillway
//!   ranks; the host stores them (spilling large ones under its memory budget).
//! * **Failures.** The first failure of a rank is announced to every other process, whose
//!   ranks then abort; each process ends with its own error naming the node where it began.
//!   Every MPI call on the job's communicator returns its error code (`MPI_ERRORS_RETURN`) and
//!   a failing call ends the job with a transport failure. Open MPI as packaged by Debian has
//!   no ULFM: when a process is lost, `mpirun` usually ends the others itself.
//! * **Deadlocks** ([`termination`]). A blocked rank may still be woken by a message from
//!   another process, so the progress threads decide together with a token ring (Mattern's
//!   counting waves).
//! * **Lost processes** ([`liveness`]). Every process sends a heartbeat to its successor in
//!   the ring each second; a process that hears nothing from its predecessor for the peer
//!   timeout announces it as lost, and the survivors end without waiting for it.
//! * **End** ([`termination`]). When its ranks have finished and its sends completed, a
//!   process enters a non-blocking barrier and keeps serving messages until everybody has;
//!   then the processes agree on whether the job failed.

pub use ::mpi as rsmpi;

mod frame;
mod liveness;
mod progress;
mod termination;

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::{Destination, Root, Source};

use crate::LinkModel;

pub use progress::run_progress;

/// Set once a process of some job was lost: `MPI_Finalize` would wait for it forever, so the
/// process exits without finalising.
static PEER_LOST: AtomicBool = AtomicBool::new(false);

/// Whether a process of some job was lost (MPI must then not be finalised).
pub fn peer_lost() -> bool {
    PEER_LOST.load(Ordering::Acquire)
}

/// Initialises MPI with `MPI_THREAD_SERIALIZED` (any thread may call MPI, one at a time, so
/// that waiting ranks can make progress themselves) if it is not yet initialised; it is then
/// finalised when the process exits (unless a process was lost).
///
/// # Errors
/// A message when MPI cannot be initialised or the exit hook cannot be registered.
pub fn ensure_initialized() -> Result<(), String> {
    if mpi::is_initialized() {
        return Ok(());
    }
    let Some((universe, _level)) = mpi::initialize_with_threading(mpi::Threading::Serialized)
    else {
        return Err("MPI could not be initialised".into());
    };
    // MPI can be initialised once per process and later jobs reuse it: keep it for the
    // lifetime of the process and finalise at exit.
    std::mem::forget(universe);
    extern "C" fn finalize_at_exit() {
        let mut done: c_int = 0;
        // SAFETY: MPI_Finalized may be called at any time; MPI_Finalize runs once, from the
        // thread that exits the process, after every job (and its progress loop) has ended.
        unsafe {
            ffi::MPI_Finalized(&mut done);
            if done == 0 && !peer_lost() {
                ffi::MPI_Finalize();
            }
        }
    }
    // SAFETY: registers a plain `extern "C"` function without captured state.
    if unsafe { libc::atexit(finalize_at_exit) } != 0 {
        return Err("cannot register MPI_Finalize at exit".into());
    }
    Ok(())
}

/// Checks that MPI is initialised with a thread level that lets ranks run on threads while
/// this thread makes the MPI calls. Returns whether other threads may call MPI too (one at a
/// time: `MPI_THREAD_SERIALIZED` or more), so that waiting ranks can drive the engine.
///
/// # Errors
/// A message saying what is wrong.
pub fn check_threading() -> Result<bool, String> {
    if !mpi::is_initialized() {
        return Err("MPI is not initialised: call mpi::initialize_with_threading first".into());
    }
    match mpi::environment::threading_support() {
        mpi::Threading::Single => {
            Err("spillway runs ranks on threads and needs MPI_THREAD_FUNNELED or higher".into())
        }
        mpi::Threading::Funneled => {
            let mut main: c_int = 0;
            // SAFETY: MPI is initialised; the call only writes the flag.
            unsafe { ffi::MPI_Is_thread_main(&mut main) };
            if main == 0 {
                Err(
                    "MPI was initialised with MPI_THREAD_FUNNELED: start the job from the \
                     main thread"
                        .into(),
                )
            } else {
                Ok(false)
            }
        }
        _ => Ok(true),
    }
}

/// Makes failing MPI calls on `comm` return their error code instead of aborting.
pub fn set_errors_return(comm: &SimpleCommunicator) {
    // SAFETY: `comm` is a valid communicator; ERRORS_RETURN makes failing calls return their
    // error code instead of aborting the process.
    unsafe { ffi::MPI_Comm_set_errhandler(comm.as_raw(), ffi::RSMPI_ERRORS_RETURN) };
}

/// Ping-pong between processes 0 and 1: alpha from 8-byte messages, beta from 4 MiB ones;
/// process 0 broadcasts the result.
pub fn measure_link(comm: &SimpleCommunicator) -> LinkModel {
    let me = comm.rank();
    let mut model = [0.0f64; 2];
    if me < 2 {
        let peer = comm.process_at_rank(1 - me);
        let small = [0u8; 8];
        let mut small_in = [0u8; 8];
        let big = vec![0u8; 4 << 20];
        let mut big_in = vec![0u8; 4 << 20];
        let exchange = |out: &[u8], inp: &mut [u8]| {
            if me == 0 {
                peer.send(out);
                peer.receive_into(inp);
            } else {
                peer.receive_into(inp);
                peer.send(out);
            }
        };
        let round_trip = |out: &[u8], inp: &mut [u8], reps: u32| {
            exchange(out, inp);
            let start = Instant::now();
            for _ in 0..reps {
                exchange(out, inp);
            }
            start.elapsed().as_secs_f64() / reps as f64
        };
        let t_small = round_trip(&small, &mut small_in, 50);
        let t_big = round_trip(&big, &mut big_in, 4);
        let alpha = (t_small / 2.0).max(1e-7);
        let beta = ((t_big / 2.0 - alpha) / big.len() as f64).max(1e-12);
        model = [alpha, beta];
    }
    comm.process_at_rank(0).broadcast_into(&mut model[..]);
    LinkModel {
        alpha: model[0],
        beta: model[1],
    }
}

/// An MPI error code as a message naming the call.
pub(crate) fn mpi_error(call: &str, code: c_int) -> String {
    let mut text = vec![0u8; 512];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING (256 in Open MPI and MPICH) characters.
    unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr().cast(), &mut len) };
    text.truncate(len.clamp(0, 512) as usize);
    format!(
        "{call} failed with MPI error {code}: {}",
        String::from_utf8_lossy(&text)
    )
}

pub(crate) fn empty_request() -> ffi::MPI_Request {
    // SAFETY: reads an immutable handle constant exported by the MPI library.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

pub(crate) fn empty_status() -> ffi::MPI_Status {
    // SAFETY: MPI_Status is a plain C struct of integers; all zeros is a valid value.
    unsafe { std::mem::zeroed() }
}
