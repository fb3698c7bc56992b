//! The MPI engine: one MPI process per node, the node's ranks in it, one progress thread.
//!
//! # Design
//!
//! Each process of the communicator is one node; node `i` is MPI rank `i`. The thread that
//! starts the job becomes the node's *progress thread*. With `MPI_THREAD_FUNNELED` it is the
//! only thread that calls MPI; with `MPI_THREAD_SERIALIZED` or more (what `run` asks for) a
//! rank that waits may also make a round of progress itself, under the engine's mutex
//! ([`Outbox::drive`](crate::Outbox::drive)), so that a message moves between processes
//! without a hand-off between threads at either end ([`engine`]). The engine talks to the job
//! only through [`Host`](crate::Host) (deliver, fail, lost, passive, local done) and the
//! [`Outbox`](crate::Outbox).
//!
//! * **Sending** ([`sends`]). A rank's message for a rank of another node goes into the
//!   outbox; the progress thread sends a header (context, source, destination, tag, length)
//!   and, for messages above 8 KiB, the payload straight from the rank's buffer as separate
//!   chunks of at most 1 GiB, without copying.
//! * **Receiving** ([`receives`]). The progress thread probes for headers, receives the
//!   payload into the receiver's buffer or a pooled 16-byte aligned one and delivers the
//!   messages of each source process in the order they were sent, so MPI's non-overtaking
//!   rule holds between spillway ranks; the host stores them (spilling large ones under its
//!   memory budget).
//! * **Direct exchanges** ([`direct`]). The latency-bound steps of collectives between
//!   processes (a barrier's rounds, a small all-reduce's recursive doubling) skip the outbox
//!   and the mailboxes: the rank sends its small message framed with its context and tag and
//!   tests for the expected one itself, under the engine's lock, with a receive for the next
//!   direct message from each peer always posted ([`Exchange`](crate::Exchange)).
//! * **Failures.** The first failure of a rank is announced to every other process, whose
//!   ranks then abort; each process ends with its own error naming the node where it began.
//!   Every MPI call on the engine's communicators returns its error code
//!   (`MPI_ERRORS_RETURN`).
//! * **Lost processes.** With ULFM (Open MPI 5, detected when the engine is built:
//!   [`ulfm`]) a call that reports a failed process does not end the job: the failures are
//!   acknowledged on the point-to-point communicators (whose traffic between survivors goes
//!   on, nothing in flight is lost), the collective communicator is revoked (so that every
//!   survivor learns of it) and shrunk (so that the survivors agree on who was lost); the
//!   ring and the termination waves then skip the lost processes ([`peers`]), what was on
//!   its way to or from them is dropped, and the job is told ([`Host::lost`](crate::Host)).
//!   Without ULFM a lost process is noticed by the heartbeats ([`liveness`]): every process
//!   sends one to its successor in the ring each second, and a process that hears nothing
//!   from its predecessor for the peer timeout ends the job naming it.
//! * **Deadlocks** ([`termination`]). A blocked rank may still be woken by a message from
//!   another process, so the progress threads decide together with a token ring (Mattern's
//!   counting waves).
//! * **Start** ([`Comms::start`]). The processes duplicate the communicators the engine uses
//!   and measure the link; with ULFM they then agree that every one of them got through, so a
//!   process lost meanwhile ends the job on every survivor before any rank runs.
//! * **End** ([`progress`]). When its ranks have finished and its sends completed, a process
//!   enters a non-blocking barrier (with ULFM, an agreement that completes whatever fails
//!   meanwhile) on a communicator of its own, and keeps serving messages, and joining the
//!   shrinks that processes still running start, until everybody has; then the processes
//!   agree on whether the job failed. After a lost process MPI is not finalised (`MPI_Finalize` would
//!   wait for it; see [`ensure_initialized`]).

pub use ::mpi as rsmpi;

mod direct;
mod engine;
mod frame;
mod liveness;
mod net;
mod peers;
mod progress;
mod receives;
mod sends;
mod termination;
mod ulfm;

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::LinkModel;

pub use engine::{run_progress, Comms, Survivors};

/// Set once a process of some job was lost: `MPI_Finalize` would wait for it forever, so the
/// process exits without finalising.
static PEER_LOST: AtomicBool = AtomicBool::new(false);

/// Whether a process of some job was lost (MPI must then not be finalised).
pub fn peer_lost() -> bool {
    PEER_LOST.load(Ordering::Acquire)
}

/// Whether the engine was built against an MPI with ULFM (see [`survives_lost_processes`]).
pub fn built_with_ulfm() -> bool {
    ulfm::AVAILABLE
}

/// Whether jobs of this process survive lost processes: the MPI library it was built against
/// has ULFM (`MPIX_Comm_revoke`, `MPIX_Comm_shrink`, `MPIX_Comm_iagree` in `mpi-ext.h`, as
/// Open MPI 5 has) and the job was started with it on (`mpirun --with-ft ulfm`, which sets
/// `OMPI_MCA_mpi_ft_enable=1`; otherwise `mpirun` ends every process when one is lost).
/// Without, a lost process ends the job.
pub fn survives_lost_processes() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    ulfm::AVAILABLE
        && *ON.get_or_init(|| {
            std::env::var("OMPI_MCA_mpi_ft_enable")
                .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "enabled"))
        })
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
    let started = init_watchdog();
    let Some((universe, _level)) = mpi::initialize_with_threading(mpi::Threading::Serialized)
    else {
        return Err("MPI could not be initialised".into());
    };
    started.store(true, Ordering::Release);
    // MPI can be initialised once per process and later jobs reuse it: keep it for the
    // lifetime of the process and finalise at exit.
    std::mem::forget(universe);
    // Nothing aborts on its own: the engine handles every error (lost processes included).
    // SAFETY: MPI is initialised; MPI_COMM_WORLD is a valid communicator.
    unsafe { ffi::MPI_Comm_set_errhandler(ffi::RSMPI_COMM_WORLD, ffi::RSMPI_ERRORS_RETURN) };
    check_library()?;
    if !exit_hook::register() {
        return Err("cannot register MPI_Finalize at exit".into());
    }
    Ok(())
}

/// How long `MPI_Init_thread` and the agreement that ends a job's start may take (with ULFM)
/// before the process gives up: Open MPI waits forever there for a process lost while the job
/// starts. `SPILLWAY_MPI_INIT_TIMEOUT` (seconds) overrides it.
const INIT_LIMIT: Duration = Duration::from_secs(60);

/// [`INIT_LIMIT`], or `SPILLWAY_MPI_INIT_TIMEOUT`.
fn init_limit() -> Duration {
    std::env::var("SPILLWAY_MPI_INIT_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .map_or(INIT_LIMIT, Duration::from_secs_f64)
}

/// With ULFM: a thread that ends the process with a message if MPI is not initialised in
/// time (when the returned flag is not set by then).
fn init_watchdog() -> Arc<AtomicBool> {
    if !ulfm::AVAILABLE {
        return Arc::new(AtomicBool::new(false));
    }
    let limit = init_limit();
    watchdog("mpi-init-watchdog", limit, move || {
        format!(
            "spillway: MPI was not initialised within {limit:?}: a process was probably lost \
             while the job started (Open MPI waits for it forever there); the job ends \
             (SPILLWAY_MPI_INIT_TIMEOUT sets the limit)"
        )
    })
}

/// A thread that ends the process (exit status 1) with `message` unless the returned flag is
/// set within `limit`: for MPI calls that can wait forever for a process that is gone.
pub(crate) fn watchdog(
    name: &str,
    limit: Duration,
    message: impl FnOnce() -> String + Send + 'static,
) -> Arc<AtomicBool> {
    let done = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&done);
    let _ = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let until = Instant::now() + limit;
            while Instant::now() < until {
                if flag.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if !flag.load(Ordering::Acquire) {
                eprintln!("{}", message());
                // SAFETY: ends the process at once; MPI is in an unknown state.
                unsafe { libc::_exit(1) };
            }
        });
    done
}

/// With ULFM: checks that the MPI library this process loaded is the one the engine was
/// built against (Open MPI 4 and 5 have the same soname, `libmpi.so.40`: the wrong one is
/// found when the program was linked without a run path to the right one).
fn check_library() -> Result<(), String> {
    let Some(built) = ulfm::built_with() else {
        return Ok(());
    };
    let mut text = vec![0u8; 8192];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_LIBRARY_VERSION_STRING (at most 8192 in Open MPI and
    // MPICH) bytes; the call writes at most that many and their length.
    unsafe { ffi::MPI_Get_library_version(text.as_mut_ptr().cast(), &mut len) };
    text.truncate(len.clamp(0, 8192) as usize);
    let loaded = String::from_utf8_lossy(&text);
    let loaded = loaded.trim_end_matches('\0');
    let wanted = built.trim();
    if !wanted.is_empty() && !loaded.contains(wanted) {
        return Err(format!(
            "spillway was built against {wanted} (with ULFM) but this process loaded another MPI \
             library ({}): link with a run path to the right library directory \
             (-C link-arg=-Wl,-rpath,DIR) or set LD_LIBRARY_PATH",
            loaded.lines().next().unwrap_or("unknown")
        ));
    }
    Ok(())
}

/// Finalising MPI when the process exits.
///
/// After a lost process `MPI_Finalize` is skipped: with ULFM it may wait for the lost process
/// forever (Open MPI 5 hangs there in some runs), and `mpirun --with-ft ulfm` accepts processes
/// that exit without it. A process can also be lost after every job ended, while the others
/// finalise: with ULFM, `MPI_Finalize` runs under a watchdog that ends the process (with the
/// exit status it was leaving with) if it has not returned after [`FINALIZE_LIMIT`].
mod exit_hook {
    use std::ffi::{c_int, c_void};
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::time::Duration;

    use mpi::ffi;

    /// How long `MPI_Finalize` may take before the watchdog ends the process.
    pub(super) const FINALIZE_LIMIT: Duration = Duration::from_secs(10);

    /// The status the process exits with (known to `on_exit` handlers).
    static STATUS: AtomicI32 = AtomicI32::new(0);

    extern "C" {
        /// glibc: like `atexit`, with the exit status passed to the handler.
        fn on_exit(f: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
    }

    extern "C" fn finalize_at_exit(status: c_int, _arg: *mut c_void) {
        STATUS.store(status, Ordering::Release);
        let mut done: c_int = 0;
        // SAFETY: MPI_Finalized may be called at any time.
        unsafe { ffi::MPI_Finalized(&mut done) };
        if done != 0 || super::peer_lost() {
            return;
        }
        if super::ulfm::AVAILABLE {
            let _ = std::thread::Builder::new()
                .name("mpi-finalize-watchdog".into())
                .spawn(|| {
                    std::thread::sleep(FINALIZE_LIMIT);
                    eprintln!(
                        "spillway: MPI_Finalize did not return within {FINALIZE_LIMIT:?} (a \
                         process was probably lost at the end); exiting without it"
                    );
                    // SAFETY: ends the process at once, without running exit handlers again.
                    unsafe { libc::_exit(STATUS.load(Ordering::Acquire)) };
                });
        }
        // SAFETY: MPI_Finalize runs once, from the thread that exits the process, after every
        // job (and its progress loop) has ended.
        unsafe { ffi::MPI_Finalize() };
    }

    /// Registers the handler; whether that worked.
    pub(super) fn register() -> bool {
        // SAFETY: registers a plain `extern "C"` function without captured state.
        unsafe { on_exit(finalize_at_exit, std::ptr::null_mut()) == 0 }
    }
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

/// Makes failing MPI calls on `comm` return their error code instead of aborting (every
/// communicator the engine uses: failures, lost processes included, are the engine's to
/// handle).
pub fn set_errors_return(comm: &SimpleCommunicator) {
    // SAFETY: `comm` is a valid communicator; ERRORS_RETURN makes failing calls return their
    // error code instead of aborting the process.
    unsafe { ffi::MPI_Comm_set_errhandler(comm.as_raw(), ffi::RSMPI_ERRORS_RETURN) };
}

/// Ping-pong between processes 0 and 1: alpha from 8-byte messages, beta from 4 MiB ones;
/// process 0 broadcasts the result.
///
/// # Errors
/// A message when an MPI call failed (a process lost during the start of the job).
pub fn measure_link(comm: &SimpleCommunicator) -> Result<LinkModel, String> {
    let me = comm.rank();
    let raw = comm.as_raw();
    let mut model = [0.0f64; 2];
    if me < 2 {
        let peer = 1 - me;
        let small = [0u8; 8];
        let mut small_in = [0u8; 8];
        let big = vec![0u8; 4 << 20];
        let mut big_in = vec![0u8; 4 << 20];
        let send = |out: &[u8]| -> Result<(), String> {
            // SAFETY: valid communicator; `out` is readable for its length.
            let code = unsafe {
                ffi::MPI_Send(
                    out.as_ptr().cast::<c_void>(),
                    out.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    peer,
                    0,
                    raw,
                )
            };
            startup_check("MPI_Send", code)
        };
        let recv = |inp: &mut [u8]| -> Result<(), String> {
            // SAFETY: valid communicator; `inp` is writable for its length.
            let code = unsafe {
                ffi::MPI_Recv(
                    inp.as_mut_ptr().cast::<c_void>(),
                    inp.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    peer,
                    0,
                    raw,
                    ffi::RSMPI_STATUS_IGNORE,
                )
            };
            startup_check("MPI_Recv", code)
        };
        let exchange = |out: &[u8], inp: &mut [u8]| -> Result<(), String> {
            if me == 0 {
                send(out)?;
                recv(inp)
            } else {
                recv(inp)?;
                send(out)
            }
        };
        let round_trip = |out: &[u8], inp: &mut [u8], reps: u32| -> Result<f64, String> {
            exchange(out, inp)?;
            let start = Instant::now();
            for _ in 0..reps {
                exchange(out, inp)?;
            }
            Ok(start.elapsed().as_secs_f64() / reps as f64)
        };
        let t_small = round_trip(&small, &mut small_in, 50)?;
        let t_big = round_trip(&big, &mut big_in, 4)?;
        let alpha = (t_small / 2.0).max(1e-7);
        let beta = ((t_big / 2.0 - alpha) / big.len() as f64).max(1e-12);
        model = [alpha, beta];
    }
    // SAFETY: valid communicator; two doubles in and out at every process.
    let code = unsafe {
        ffi::MPI_Bcast(
            model.as_mut_ptr().cast::<c_void>(),
            2,
            ffi::RSMPI_DOUBLE,
            0,
            raw,
        )
    };
    startup_check("MPI_Bcast", code)?;
    Ok(LinkModel {
        alpha: model[0],
        beta: model[1],
    })
}

/// A duplicate of `comm` on which failing calls return their error code.
///
/// # Errors
/// A message when the duplication failed (a process lost during the start of the job).
pub fn duplicate<C: Communicator>(comm: &C) -> Result<SimpleCommunicator, String> {
    // SAFETY: reads an immutable handle constant exported by the MPI library.
    let mut dup = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: valid communicator; the new one is written to `dup`.
    let code = unsafe { ffi::MPI_Comm_dup(comm.as_raw(), &mut dup) };
    startup_check("MPI_Comm_dup", code)?;
    // SAFETY: `dup` is a live intra-communicator just made, owned by nobody else.
    let dup = unsafe { SimpleCommunicator::from_raw(dup) };
    set_errors_return(&dup);
    Ok(dup)
}

/// The end of a job's start (with lost processes survived: [`survives_lost_processes`]):
/// every process of `comm` agrees on whether all of them got through their start-up calls
/// (`outcome`; `made` holds the communicators made so far). A process whose start-up call
/// failed first revokes `comm` and `made`, so that the others still waiting in a start-up
/// call on them return; then all agree (`MPIX_Comm_agree` on `comm`, whose result and error
/// are the same in every survivor). So either every survivor starts the job or none does, and
/// a process lost after the agreement is lost from a running job, which survives it.
/// Without ULFM the outcome is returned as it is (a lost process ends the job anyway).
fn agree_on_start<T>(
    comm: &impl Communicator,
    made: &[SimpleCommunicator],
    outcome: Result<T, String>,
) -> Result<T, String> {
    if !survives_lost_processes() {
        return outcome;
    }
    if outcome.is_err() {
        for c in made {
            ulfm::revoke(c.as_raw());
        }
        ulfm::revoke(comm.as_raw());
    }
    let mut all_started: c_int = c_int::from(outcome.is_ok());
    let limit = init_limit();
    let agreed = watchdog("mpi-start-watchdog", limit, move || {
        format!(
            "spillway: transport between nodes failed: the processes did not agree within \
             {limit:?} that the job started (MPIX_Comm_agree; a process was probably lost while \
             it started): the job ends (SPILLWAY_MPI_INIT_TIMEOUT sets the limit; with the \
             spillway CLI, a job saved with --checkpoint-dir resumes with --resume)"
        )
    });
    let code = ulfm::agree(comm.as_raw(), &mut all_started);
    agreed.store(true, Ordering::Release);
    match outcome {
        // Open MPI 5.0 may report a process lost during the start as MPI_ERR_OTHER (from
        // MPI_Comm_dup, say): the agreement reports the failure (no process acknowledged it),
        // and it is the loss it is.
        Err(e) if !PEER_LOST.load(Ordering::Acquire) && ulfm::is_process_failure(code) => {
            Err(lost_at_start(&e))
        }
        Err(e) => Err(e),
        Ok(_) if code != 0 => Err(startup_error("MPIX_Comm_agree", code)),
        Ok(_) if all_started == 0 => {
            PEER_LOST.store(true, Ordering::Release);
            Err(
                "another process failed while the job started (its error output names the \
                 call and the cause): the job ends on every process before any rank runs \
                 (with the spillway CLI, a job saved with --checkpoint-dir resumes with \
                 --resume)"
                    .into(),
            )
        }
        Ok(t) => Ok(t),
    }
}

/// A failed call while a job starts: a process lost then ends the job (the engine that
/// survives lost processes runs only once the job has started).
fn startup_check(call: &str, code: c_int) -> Result<(), String> {
    if code == 0 {
        Ok(())
    } else {
        Err(startup_error(call, code))
    }
}

/// The error of a failed call (`code`) while a job starts.
fn startup_error(call: &str, code: c_int) -> String {
    if ulfm::is_process_failure(code) {
        return lost_at_start(call);
    }
    mpi_error(call, code)
}

/// The error of a process lost while the job started, as `what` (the call) reported it.
fn lost_at_start(what: &str) -> String {
    PEER_LOST.store(true, Ordering::Release);
    format!(
        "a process was lost while the job started ({what}): the job ends (with the spillway \
         CLI, a job saved with --checkpoint-dir resumes with --resume)"
    )
}

/// Sums `mine` over the processes of `comm` into `out` (same length); false if the call
/// failed (a process lost meanwhile: then MPI is not finalised).
pub fn all_reduce_sum(comm: &SimpleCommunicator, mine: &[u64], out: &mut [u64]) -> bool {
    // SAFETY: reads an immutable handle constant exported by the MPI library.
    all_reduce(comm, mine, out, unsafe { ffi::RSMPI_SUM })
}

/// As [`all_reduce_sum`], with the maximum.
pub fn all_reduce_max(comm: &SimpleCommunicator, mine: &[u64], out: &mut [u64]) -> bool {
    // SAFETY: reads an immutable handle constant exported by the MPI library.
    all_reduce(comm, mine, out, unsafe { ffi::RSMPI_MAX })
}

fn all_reduce(comm: &SimpleCommunicator, mine: &[u64], out: &mut [u64], op: ffi::MPI_Op) -> bool {
    assert_eq!(mine.len(), out.len(), "all_reduce: lengths differ");
    // SAFETY: valid communicator; both buffers hold `mine.len()` u64s.
    let code = unsafe {
        ffi::MPI_Allreduce(
            mine.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            mine.len() as c_int,
            ffi::RSMPI_UINT64_T,
            op,
            comm.as_raw(),
        )
    };
    checked(code)
}

/// Gathers `mine` from every process of `comm` into `out` (`mine.len()` times the size of
/// `comm`), in rank order; false if the call failed (as [`all_reduce_sum`]).
pub fn all_gather(comm: &SimpleCommunicator, mine: &[u64], out: &mut [u64]) -> bool {
    assert_eq!(
        mine.len() * comm.size() as usize,
        out.len(),
        "all_gather: wrong output length"
    );
    // SAFETY: valid communicator; `out` holds one block of `mine.len()` u64s per process.
    let code = unsafe {
        ffi::MPI_Allgather(
            mine.as_ptr().cast::<c_void>(),
            mine.len() as c_int,
            ffi::RSMPI_UINT64_T,
            out.as_mut_ptr().cast::<c_void>(),
            mine.len() as c_int,
            ffi::RSMPI_UINT64_T,
            comm.as_raw(),
        )
    };
    checked(code)
}

fn checked(code: c_int) -> bool {
    if code != 0 && ulfm::is_process_failure(code) {
        PEER_LOST.store(true, Ordering::Release);
    }
    code == 0
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
