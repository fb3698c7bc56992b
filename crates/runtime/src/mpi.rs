//! The MPI backend: one MPI process per node, the node's ranks as threads, one progress thread.
//!
//! # Design
//!
//! Each process of the communicator is one node; node `i` is MPI rank `i` and holds a
//! contiguous block of spillway ranks, which run exactly as with the local backend (node
//! scheduler, memory budget, spill files). The thread that starts the job becomes the node's
//! *progress thread* and is the only thread that calls MPI, so `MPI_THREAD_FUNNELED` suffices.
//!
//! * **Sending.** A rank's message for a rank of another node goes into the outbox; the
//!   progress thread sends a header (context, source, destination, tag, length) and, for
//!   messages above 8 KiB, the payload straight from the rank's buffer as separate chunks
//!   of at most 1 GiB, without copying.
//! * **Receiving.** The progress thread probes for headers, receives the payload into a fresh
//!   16-byte aligned buffer and delivers the messages of each source process in the order they
//!   were sent, so MPI's non-overtaking rule holds between spillway ranks. A large message that
//!   does not fit the node's message memory goes to a spill file as with the local backend.
//! * **Failures.** The first failure of a rank is announced to every other process, whose
//!   ranks then abort; each process ends with its own error ([`JobError::Remote`] naming the
//!   node where it began). Every MPI call on the job's communicator returns its error code
//!   (`MPI_ERRORS_RETURN`) and a failing call ends the job with [`JobError::Transport`]. Open
//!   MPI as packaged by Debian has no ULFM: when a process is lost, `mpirun` usually ends the
//!   others itself; where the survivors see an MPI error first, they report it.
//! * **Deadlocks.** A blocked rank may still be woken by a message from another process, so
//!   the progress threads decide together with a token ring (Mattern's counting waves): each
//!   process counts the messages it sent to and received from other processes. When two
//!   consecutive waves find every process without running or runnable ranks and the same
//!   totals with as many messages received as sent, nothing was in flight and nothing changed
//!   in between: every process reports a deadlock with what its own ranks wait for.
//! * **Lost processes.** Every process sends a heartbeat to its successor in the ring each
//!   second. A process that hears nothing from its predecessor for `Config::peer_timeout`
//!   announces it as lost; the survivors then end without waiting for it.
//! * **End.** When its ranks have finished and its sends completed, a process enters a
//!   non-blocking barrier and keeps serving messages until everybody has; then the processes
//!   agree on whether the job failed and combine their counters.

pub use ::mpi as rsmpi;

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::{CommunicatorCollectives, Destination, Root, Source};

use spillway_transport::{AlignedBuf, Envelope, Layout, LinkModel, Payload};

use crate::config::Config;
use crate::error::JobError;
use crate::job::{execute, Job, JobStats, Part, RankStats};
use crate::net::{Outgoing, Remote};
use crate::rank::Rank;
use crate::MemoryStats;

const TAG_HEADER: c_int = 1;
const TAG_DATA: c_int = 2;
const TAG_CONTROL: c_int = 3;
/// Payloads up to this size travel inside the header message.
const INLINE: usize = 8 << 10;
/// Largest chunk of one MPI message (counts are `int`).
const CHUNK: usize = 1 << 30;
const HEADER_WORDS: usize = 5;
const HEADER_BYTES: usize = HEADER_WORDS * 8;

const CONTROL_ABORT: u64 = 1;
const CONTROL_TOKEN: u64 = 2;
const CONTROL_DEADLOCK: u64 = 3;
const CONTROL_HEARTBEAT: u64 = 4;
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Set once a process of some job was lost: `MPI_Finalize` would wait for it forever, so the
/// process exits without finalising.
static PEER_LOST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs `f` as a job on every process of `MPI_COMM_WORLD`, initialising MPI first if needed
/// (it is then finalised when the process exits).
pub(crate) fn run_world<R, E, F>(config: &Config, f: F) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    ensure_initialized()?;
    hook_with_stats(&SimpleCommunicator::world(), config, f)
}

fn ensure_initialized() -> Result<(), JobError> {
    if mpi::is_initialized() {
        return Ok(());
    }
    let Some((universe, _level)) = mpi::initialize_with_threading(mpi::Threading::Funneled) else {
        return Err(JobError::Startup(std::io::Error::other(
            "MPI could not be initialised",
        )));
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
            if done == 0 && !PEER_LOST.load(std::sync::atomic::Ordering::Acquire) {
                ffi::MPI_Finalize();
            }
        }
    }
    // SAFETY: registers a plain `extern "C"` function without captured state.
    if unsafe { libc::atexit(finalize_at_exit) } != 0 {
        return Err(JobError::Startup(std::io::Error::other(
            "cannot register MPI_Finalize at exit",
        )));
    }
    Ok(())
}

/// Runs the SPMD function `f` as a spillway job on the processes of `comm`, an existing MPI
/// program's communicator: the interoperability hook of LPF (`lpf_hook`).
///
/// Every process of `comm` must call `hook` collectively with the same configuration. Each
/// process becomes one node (node `i` is the process of rank `i` in `comm`) and runs its block
/// of the job's ranks as threads; the calling thread makes all MPI calls for the job, on a
/// duplicate of `comm`, so the caller's own traffic on `comm` is never disturbed. MPI must
/// have been initialised with at least `MPI_THREAD_FUNNELED`, and with exactly that level
/// `hook` must be called from the main thread.
///
/// Returns the results of this process's ranks in rank order.
///
/// ```no_run
/// use mpi::traits::*;
/// use spillway_runtime::{mpi::hook, Backend, Config};
///
/// let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled).unwrap();
/// let world = universe.world();
/// let config = Config::new(8).backend(Backend::Mpi);
/// let ranks = hook(&world, &config, |rank| Ok::<_, spillway_runtime::Error>(rank.rank())).unwrap();
/// println!("process {} ran ranks {ranks:?}", world.rank());
/// ```
///
/// # Errors
/// As [`run`](crate::run); [`JobError::Config`] when MPI is not initialised or its thread
/// level is too low, or `config` asks for a node count other than the size of `comm`.
pub fn hook<C, R, E, F>(comm: &C, config: &Config, f: F) -> Result<Vec<R>, JobError>
where
    C: Communicator,
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    hook_with_stats(comm, config, f).map(|(r, _)| r)
}

/// [`hook`], also returning the job's counters, combined over all processes.
pub fn hook_with_stats<C, R, E, F>(
    comm: &C,
    config: &Config,
    f: F,
) -> Result<(Vec<R>, JobStats), JobError>
where
    C: Communicator,
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    check_threading()?;
    let size = comm.size() as u32;
    let me = comm.rank() as u32;
    if config.nodes != 1 && config.nodes != size {
        return Err(JobError::Config(format!(
            "with the mpi backend every MPI process is one node: {size} processes, \
             but {} nodes were asked for",
            config.nodes
        )));
    }
    let config = config.clone().nodes(size);
    let layout = config.layout()?;
    let comm = comm.duplicate();
    // SAFETY: `comm` is a valid communicator owned by this function; ERRORS_RETURN makes
    // failing calls return their error code instead of aborting the process.
    unsafe { ffi::MPI_Comm_set_errhandler(comm.as_raw(), ffi::RSMPI_ERRORS_RETURN) };
    if size == 1 {
        let part = Part {
            local_nodes: 0..1,
            remote: None,
            link_model: None,
        };
        return execute(&config, layout, part, f, |_| {});
    }
    let link_model = match config.link_model {
        Some(m) => m,
        None => measure_link(&comm),
    };
    let remote = Arc::new(Remote::default());
    let part = Part {
        local_nodes: me..me + 1,
        remote: Some(remote),
        link_model: Some(link_model),
    };
    let outcome = execute(&config, layout.clone(), part, f, |job| {
        Progress::new(job, &comm, &layout, config.peer_timeout).run()
    });
    // Every process agreed on success or failure at the end of the progress loop, so either
    // all or none take part in combining the counters.
    let (results, mut stats) = outcome?;
    combine_stats(&comm, &layout, &mut stats);
    Ok((results, stats))
}

fn check_threading() -> Result<(), JobError> {
    if !mpi::is_initialized() {
        return Err(JobError::Config(
            "MPI is not initialised: call mpi::initialize_with_threading first".into(),
        ));
    }
    match mpi::environment::threading_support() {
        mpi::Threading::Single => Err(JobError::Config(
            "spillway runs ranks on threads and needs MPI_THREAD_FUNNELED or higher".into(),
        )),
        mpi::Threading::Funneled => {
            let mut main: c_int = 0;
            // SAFETY: MPI is initialised; the call only writes the flag.
            unsafe { ffi::MPI_Is_thread_main(&mut main) };
            if main == 0 {
                Err(JobError::Config(
                    "MPI was initialised with MPI_THREAD_FUNNELED: start the job from the \
                     main thread"
                        .into(),
                ))
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// Ping-pong between processes 0 and 1: alpha from 8-byte messages, beta from 4 MiB ones;
/// process 0 broadcasts the result.
fn measure_link(comm: &SimpleCommunicator) -> LinkModel {
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

fn combine_stats(comm: &SimpleCommunicator, layout: &Layout, stats: &mut JobStats) {
    let m = &stats.memory;
    let mine = [
        m.bytes_written,
        m.bytes_read,
        m.loads,
        m.unloads,
        m.overcommits,
        m.messages_spilled,
        m.message_bytes_spilled,
        m.peak_resident,
        m.peak_allocated,
    ];
    let mut sum = [0u64; 9];
    comm.all_reduce_into(
        &mine[..],
        &mut sum[..],
        mpi::collective::SystemOperation::sum(),
    );
    stats.memory = MemoryStats {
        bytes_written: sum[0],
        bytes_read: sum[1],
        loads: sum[2],
        unloads: sum[3],
        overcommits: sum[4],
        messages_spilled: sum[5],
        message_bytes_spilled: sum[6],
        peak_resident: sum[7],
        peak_allocated: sum[8],
    };
    let rss = stats.peak_rss.unwrap_or(0);
    let mut max_rss = 0u64;
    comm.all_reduce_into(&rss, &mut max_rss, mpi::collective::SystemOperation::max());
    stats.peak_rss = (max_rss > 0).then_some(max_rss);
    let width = (0..layout.nodes())
        .map(|n| layout.local_size(n))
        .max()
        .unwrap_or(0) as usize;
    let mut rows = vec![0u64; width * 4];
    for (i, r) in stats.ranks.iter().enumerate() {
        rows[i * 4..i * 4 + 4].copy_from_slice(&[
            r.messages_sent,
            r.bytes_sent,
            r.blocks,
            r.blocked.as_nanos() as u64,
        ]);
    }
    let mut all = vec![0u64; width * 4 * layout.nodes() as usize];
    comm.all_gather_into(&rows[..], &mut all[..]);
    let mut ranks = Vec::with_capacity(layout.ranks() as usize);
    for n in 0..layout.nodes() {
        for l in 0..layout.local_size(n) as usize {
            let row = &all[(n as usize * width + l) * 4..][..4];
            ranks.push(RankStats {
                messages_sent: row[0],
                bytes_sent: row[1],
                blocks: row[2],
                blocked: Duration::from_nanos(row[3]),
            });
        }
    }
    stats.ranks = ranks;
}

/// A message header: context, source rank, destination rank, tag, payload length.
fn header(o: &Outgoing) -> [u64; HEADER_WORDS] {
    [
        o.context,
        o.source as u64,
        o.dest as u64,
        o.tag as u32 as u64,
        o.payload.len() as u64,
    ]
}

/// A header (or control words) followed by `body`, as one buffer.
fn framed(head: [u64; HEADER_WORDS], body: &[u8]) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(HEADER_BYTES + body.len());
    let bytes = buf.as_bytes_mut();
    bytes[..HEADER_BYTES].copy_from_slice(bytemuck::cast_slice(&head));
    bytes[HEADER_BYTES..].copy_from_slice(body);
    buf
}

/// The header words and the rest of a framed message from process `source`.
fn unframe<'b>(
    bytes: &'b [u8],
    what: &str,
    source: c_int,
) -> Result<([u64; HEADER_WORDS], &'b [u8]), JobError> {
    if bytes.len() < HEADER_BYTES {
        return Err(JobError::Transport(format!(
            "a {what} of {} bytes from process {source}",
            bytes.len()
        )));
    }
    let mut head = [0u64; HEADER_WORDS];
    bytemuck::cast_slice_mut(&mut head).copy_from_slice(&bytes[..HEADER_BYTES]);
    Ok((head, &bytes[HEADER_BYTES..]))
}

struct PendingSend {
    requests: Vec<ffi::MPI_Request>,
    /// The bytes the requests read, alive until they complete.
    _keep: Payload,
}

struct PendingRecv {
    header: [u64; HEADER_WORDS],
    buf: AlignedBuf,
    requests: Vec<ffi::MPI_Request>,
}

/// The token of a deadlock-detection wave.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Token {
    wave: u64,
    sent: u64,
    received: u64,
    all_passive: bool,
}

struct Progress<'a> {
    job: &'a Job,
    remote: &'a Remote,
    comm: ffi::MPI_Comm,
    layout: &'a Layout,
    me: c_int,
    size: c_int,
    sends: Vec<PendingSend>,
    incoming: Vec<VecDeque<PendingRecv>>,
    /// Process 0: whether a wave is under way, the last complete quiet wave's totals, when to
    /// start the next wave.
    wave_out: bool,
    waves: u64,
    last_quiet: Option<(u64, u64)>,
    next_wave: Instant,
    /// The first failure announced by another process.
    remote_failure: Option<(u32, String)>,
    transport_failed: bool,
    /// Liveness: when the predecessor was last heard from, when to send the next heartbeat,
    /// and a process known to be lost.
    last_heard: Instant,
    next_heartbeat: Instant,
    peer_timeout: Duration,
    lost: Option<u32>,
}

fn mpi_error(call: &str, code: c_int) -> JobError {
    let mut text = vec![0u8; 512];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING (256 in Open MPI and MPICH) characters.
    unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr().cast(), &mut len) };
    text.truncate(len.clamp(0, 512) as usize);
    JobError::Transport(format!(
        "{call} failed with MPI error {code}: {}",
        String::from_utf8_lossy(&text)
    ))
}

fn empty_status() -> ffi::MPI_Status {
    // SAFETY: MPI_Status is a plain C struct of integers; all zeros is a valid value.
    unsafe { std::mem::zeroed() }
}

impl<'a> Progress<'a> {
    fn new(
        job: &'a Job,
        comm: &SimpleCommunicator,
        layout: &'a Layout,
        peer_timeout: Duration,
    ) -> Progress<'a> {
        Progress {
            job,
            remote: job.remote.as_deref().expect("a job across processes"),
            comm: comm.as_raw(),
            layout,
            me: comm.rank(),
            size: comm.size(),
            sends: Vec::new(),
            incoming: (0..comm.size()).map(|_| VecDeque::new()).collect(),
            wave_out: false,
            waves: 0,
            last_quiet: None,
            next_wave: Instant::now() + Duration::from_millis(50),
            remote_failure: None,
            transport_failed: false,
            last_heard: Instant::now(),
            next_heartbeat: Instant::now(),
            peer_timeout,
            lost: None,
        }
    }

    /// Serves the job until it has ended on every process.
    fn run(mut self) {
        let mut barrier: Option<ffi::MPI_Request> = None;
        let mut idle = 0u32;
        let mut idle_since = Instant::now();
        loop {
            let busy = match self.step() {
                Ok(busy) => busy,
                Err(e) => {
                    self.transport_failed = true;
                    self.job.fail_with(e, false);
                    break;
                }
            };
            if self.lost.is_some() {
                PEER_LOST.store(true, std::sync::atomic::Ordering::Release);
                // The lost process will never enter the barrier: tell the others (already
                // queued) and leave once the local ranks have ended.
                if self.job.local_done() {
                    let deadline = Instant::now() + Duration::from_secs(1);
                    while !self.sends.is_empty() && Instant::now() < deadline {
                        if self.test_sends().is_err() {
                            break;
                        }
                        std::thread::yield_now();
                    }
                    return;
                }
            } else if let Some(mut request) = barrier {
                match self.test(&mut request, "MPI_Ibarrier") {
                    Ok(true) if self.sends.is_empty() => break,
                    Ok(_) => barrier = Some(request),
                    Err(e) => {
                        self.transport_failed = true;
                        self.job.fail_with(e, false);
                        break;
                    }
                }
            } else if self.job.local_done() && self.sends.is_empty() {
                let mut request = empty_request();
                // SAFETY: valid communicator; `request` outlives the call and is tested until
                // complete.
                let code = unsafe { ffi::MPI_Ibarrier(self.comm, &mut request) };
                if code != 0 {
                    self.transport_failed = true;
                    self.job.fail_with(mpi_error("MPI_Ibarrier", code), false);
                    break;
                }
                barrier = Some(request);
            }
            if busy {
                idle = 0;
                idle_since = Instant::now();
            } else {
                idle = idle.saturating_add(1);
            }
            self.pause(idle, idle_since.elapsed());
        }
        if self.transport_failed {
            // The network cannot be trusted any more: let the local ranks end and leave.
            while !self.job.local_done() {
                std::thread::sleep(Duration::from_millis(1));
            }
            return;
        }
        // Late messages (e.g. an announcement sent just before the barrier) are read so that
        // nothing is left in the communicator.
        let _ = self.step();
        self.agree();
    }

    /// Waits before the next round. While transfers are in flight it only yields: MPI moves
    /// large messages only while both sides call into it (Open MPI's shared-memory transport,
    /// for one). While no rank of this process can run (they all wait, typically for messages
    /// from other nodes) it also only yields, for up to `SPIN` after the last activity: answers
    /// within a collective come quickly and nothing here needs the core. Otherwise it sleeps on
    /// the outbox with a growing timeout of up to 200 us; a rank's send wakes it at once.
    fn pause(&self, idle: u32, idle_for: Duration) {
        const SPIN: Duration = Duration::from_millis(5);
        if idle == 0 {
            return;
        }
        let in_flight = !self.sends.is_empty() || self.incoming.iter().any(|q| !q.is_empty());
        if idle < 64 || in_flight || (self.job.passive() && idle_for < SPIN) {
            std::thread::yield_now();
            return;
        }
        let micros = (2u64 << ((idle - 64) / 32).min(10)).min(200);
        self.remote.wait(Duration::from_micros(micros));
    }

    /// One round: announce failures, send the outbox, test sends, receive headers and data,
    /// handle control messages and run deadlock detection. Returns whether anything happened.
    fn step(&mut self) -> Result<bool, JobError> {
        let mut busy = false;
        let now = Instant::now();
        if now >= self.next_heartbeat {
            let next = (self.me + 1) % self.size;
            self.send_control(next, CONTROL_HEARTBEAT, [0; 4], &[])?;
            self.next_heartbeat = now + HEARTBEAT;
        }
        if self.lost.is_none() && now.duration_since(self.last_heard) > self.peer_timeout {
            let pred = ((self.me + self.size - 1) % self.size) as u32;
            self.lost = Some(pred);
            self.job.fail_with(
                JobError::Transport(format!(
                    "node {pred} (MPI process {pred}) was not heard from for {:.0?}: it was \
                     probably lost (this MPI has no fault tolerance, so the job ends)",
                    self.peer_timeout
                )),
                true,
            );
        }
        if let Some(text) = self.job.take_announcement() {
            let lost = self.lost.map_or(0, |l| l as u64 + 1);
            for p in 0..self.size {
                if p != self.me && Some(p as u32) != self.lost {
                    self.send_control(
                        p,
                        CONTROL_ABORT,
                        [self.me as u64, lost, 0, 0],
                        text.as_bytes(),
                    )?;
                }
            }
            busy = true;
        }
        for out in self.remote.take() {
            self.send_message(out)?;
            busy = true;
        }
        busy |= self.test_sends()?;
        busy |= self.receive_headers()?;
        busy |= self.complete_receives()?;
        busy |= self.receive_control()?;
        busy |= self.detect_deadlock()?;
        Ok(busy)
    }

    fn test(&self, request: &mut ffi::MPI_Request, call: &str) -> Result<bool, JobError> {
        let mut flag: c_int = 0;
        // SAFETY: `request` is an active or null request of this process; the buffers it
        // refers to are kept alive by the caller until it completes.
        let code = unsafe { ffi::MPI_Test(request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        if code != 0 {
            return Err(mpi_error(call, code));
        }
        Ok(flag != 0)
    }

    /// Starts a non-blocking send of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The bytes must stay valid and unchanged until the returned request completes.
    unsafe fn isend(
        &self,
        ptr: *const u8,
        len: usize,
        dest: c_int,
        tag: c_int,
    ) -> Result<ffi::MPI_Request, JobError> {
        let mut request = empty_request();
        // SAFETY: the caller keeps the buffer alive; `len` fits in an int (at most CHUNK or a
        // header plus INLINE bytes).
        let code = unsafe {
            ffi::MPI_Isend(
                ptr.cast::<c_void>(),
                len as c_int,
                ffi::RSMPI_UINT8_T,
                dest,
                tag,
                self.comm,
                &mut request,
            )
        };
        if code != 0 {
            return Err(mpi_error("MPI_Isend", code));
        }
        Ok(request)
    }

    fn send_message(&mut self, out: Outgoing) -> Result<(), JobError> {
        let dest = self.layout.node_of(out.dest) as c_int;
        let head = header(&out);
        let len = out.payload.len();
        if len <= INLINE {
            return self.send_framed(dest, TAG_HEADER, framed(head, out.payload.as_bytes()));
        }
        self.send_framed(dest, TAG_HEADER, framed(head, &[]))?;
        let payload = out.payload;
        let mut requests = Vec::with_capacity(len.div_ceil(CHUNK));
        for chunk in payload.as_bytes().chunks(CHUNK) {
            // SAFETY: the payload (owned or shared, never mutated while shared) is kept with
            // the requests until they complete.
            requests.push(unsafe { self.isend(chunk.as_ptr(), chunk.len(), dest, TAG_DATA)? });
        }
        self.sends.push(PendingSend {
            requests,
            _keep: payload,
        });
        Ok(())
    }

    fn send_control(
        &mut self,
        dest: c_int,
        kind: u64,
        words: [u64; 4],
        text: &[u8],
    ) -> Result<(), JobError> {
        let head = [kind, words[0], words[1], words[2], words[3]];
        self.send_framed(dest, TAG_CONTROL, framed(head, text))
    }

    /// Sends one framed buffer, kept with its request until it completes.
    fn send_framed(&mut self, dest: c_int, tag: c_int, buf: AlignedBuf) -> Result<(), JobError> {
        // SAFETY: `buf` moves into the pending send (its heap storage does not move) and is
        // dropped only after the request completes.
        let request = unsafe { self.isend(buf.as_bytes().as_ptr(), buf.len(), dest, tag)? };
        self.sends.push(PendingSend {
            requests: vec![request],
            _keep: Payload::Owned(buf),
        });
        Ok(())
    }

    fn test_sends(&mut self) -> Result<bool, JobError> {
        let mut done_any = false;
        let mut i = 0;
        while i < self.sends.len() {
            let mut all = true;
            let mut requests = std::mem::take(&mut self.sends[i].requests);
            for r in requests.iter_mut() {
                if !self.test(r, "MPI_Test (send)")? {
                    all = false;
                }
            }
            self.sends[i].requests = requests;
            if all {
                self.sends.swap_remove(i);
                done_any = true;
            } else {
                i += 1;
            }
        }
        Ok(done_any)
    }

    /// Receives a probed message of `tag` into a new buffer; returns the source and bytes.
    fn receive_probed(&mut self, tag: c_int) -> Result<Option<(c_int, AlignedBuf)>, JobError> {
        let mut flag: c_int = 0;
        let mut status = empty_status();
        // SAFETY: valid communicator; the status and flag are written by the call.
        let code = unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                tag,
                self.comm,
                &mut flag,
                &mut status,
            )
        };
        if code != 0 {
            return Err(mpi_error("MPI_Iprobe", code));
        }
        if flag == 0 {
            return Ok(None);
        }
        let mut count: c_int = 0;
        // SAFETY: `status` was filled by the successful probe.
        unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
        let mut buf = AlignedBuf::zeroed(count.max(0) as usize);
        // SAFETY: the buffer holds `count` bytes; the probed message is received at once
        // (only this thread receives on the communicator, so nothing else can match it).
        let code = unsafe {
            ffi::MPI_Recv(
                buf.as_bytes_mut().as_mut_ptr().cast::<c_void>(),
                count,
                ffi::RSMPI_UINT8_T,
                status.MPI_SOURCE,
                tag,
                self.comm,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        if code != 0 {
            return Err(mpi_error("MPI_Recv", code));
        }
        if status.MPI_SOURCE == (self.me + self.size - 1) % self.size {
            self.last_heard = Instant::now();
        }
        Ok(Some((status.MPI_SOURCE, buf)))
    }

    fn receive_headers(&mut self) -> Result<bool, JobError> {
        let mut busy = false;
        while let Some((source, buf)) = self.receive_probed(TAG_HEADER)? {
            busy = true;
            let (head, inline) = unframe(buf.as_bytes(), "message header", source)?;
            let len = head[4] as usize;
            let pending = if len <= INLINE {
                if inline.len() != len {
                    return Err(JobError::Transport(format!(
                        "a message of {} bytes announced as {len} from process {source}",
                        inline.len()
                    )));
                }
                PendingRecv {
                    header: head,
                    buf: AlignedBuf::from_bytes(inline),
                    requests: Vec::new(),
                }
            } else {
                let mut body = AlignedBuf::zeroed(len);
                let mut requests = Vec::with_capacity(len.div_ceil(CHUNK));
                for chunk in body.as_bytes_mut().chunks_mut(CHUNK) {
                    let mut request = empty_request();
                    // SAFETY: the chunk belongs to `body`, which moves into the pending
                    // receive (its heap storage does not move) and is read only after every
                    // request completed.
                    let code = unsafe {
                        ffi::MPI_Irecv(
                            chunk.as_mut_ptr().cast::<c_void>(),
                            chunk.len() as c_int,
                            ffi::RSMPI_UINT8_T,
                            source,
                            TAG_DATA,
                            self.comm,
                            &mut request,
                        )
                    };
                    if code != 0 {
                        return Err(mpi_error("MPI_Irecv", code));
                    }
                    requests.push(request);
                }
                PendingRecv {
                    header: head,
                    buf: body,
                    requests,
                }
            };
            self.incoming[source as usize].push_back(pending);
        }
        Ok(busy)
    }

    /// Delivers, per source process and in sending order, the messages that have arrived.
    fn complete_receives(&mut self) -> Result<bool, JobError> {
        let mut busy = false;
        for source in 0..self.incoming.len() {
            while let Some(front) = self.incoming[source].front_mut() {
                let mut requests = std::mem::take(&mut front.requests);
                let mut all = true;
                for r in requests.iter_mut() {
                    if !self.test(r, "MPI_Test (receive)")? {
                        all = false;
                    }
                }
                let front = self.incoming[source].front_mut().expect("front");
                front.requests = requests;
                if !all {
                    break;
                }
                let done = self.incoming[source].pop_front().expect("front");
                self.deliver(done);
                busy = true;
            }
        }
        Ok(busy)
    }

    fn deliver(&self, done: PendingRecv) {
        let [context, source, dest, tag, _] = done.header;
        let dest = dest as u32;
        if !self.job.is_local(dest) {
            self.job.fail_with(
                JobError::Transport(format!(
                    "received a message for rank {dest}, which is not on this node"
                )),
                true,
            );
            return;
        }
        let env = Envelope {
            context,
            source: source as u32,
            tag: tag as u32 as i32,
            payload: Payload::Owned(done.buf),
        };
        match self.job.to_msg(dest, env) {
            Ok(msg) => self.job.deliver(dest, msg),
            Err(e) => self.job.fail_with(
                JobError::Storage(std::io::Error::other(format!(
                    "cannot spill a message from another node: {e}"
                ))),
                true,
            ),
        }
        self.remote
            .received
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    fn receive_control(&mut self) -> Result<bool, JobError> {
        let mut busy = false;
        while let Some((source, buf)) = self.receive_probed(TAG_CONTROL)? {
            busy = true;
            let (head, text) = unframe(buf.as_bytes(), "control message", source)?;
            match head[0] {
                CONTROL_ABORT => {
                    let node = head[1] as u32;
                    if head[2] > 0 && self.lost.is_none() {
                        self.lost = Some(head[2] as u32 - 1);
                    }
                    let message = String::from_utf8_lossy(text).into_owned();
                    if self.remote_failure.is_none() {
                        self.remote_failure = Some((node, message.clone()));
                    }
                    self.job
                        .fail_with(JobError::Remote { node, message }, false);
                }
                CONTROL_TOKEN => {
                    let token = Token {
                        wave: head[1],
                        sent: head[2],
                        received: head[3],
                        all_passive: head[4] != 0,
                    };
                    self.on_token(token)?;
                }
                CONTROL_DEADLOCK => self.declare_deadlock(),
                CONTROL_HEARTBEAT => {}
                other => {
                    return Err(JobError::Transport(format!(
                        "unknown control message {other} from process {source}"
                    )))
                }
            }
        }
        Ok(busy)
    }

    fn counts(&self) -> (u64, u64, bool) {
        use std::sync::atomic::Ordering::Acquire;
        // Read `received` before `sent`: a message counted as received was sent earlier.
        let received = self.remote.received.load(Acquire);
        let sent = self.remote.sent.load(Acquire);
        (sent, received, self.job.passive())
    }

    fn send_token(&mut self, token: Token) -> Result<(), JobError> {
        let next = (self.me + 1) % self.size;
        self.send_control(
            next,
            CONTROL_TOKEN,
            [
                token.wave,
                token.sent,
                token.received,
                token.all_passive as u64,
            ],
            &[],
        )
    }

    fn detect_deadlock(&mut self) -> Result<bool, JobError> {
        if self.me != 0 || self.wave_out || self.job.aborted() || Instant::now() < self.next_wave {
            return Ok(false);
        }
        let (sent, received, passive) = self.counts();
        if !passive {
            self.last_quiet = None;
            self.next_wave = Instant::now() + Duration::from_millis(50);
            return Ok(false);
        }
        self.waves += 1;
        self.wave_out = true;
        self.send_token(Token {
            wave: self.waves,
            sent,
            received,
            all_passive: true,
        })?;
        Ok(true)
    }

    fn on_token(&mut self, token: Token) -> Result<(), JobError> {
        if self.me != 0 {
            let (sent, received, passive) = self.counts();
            return self.send_token(Token {
                wave: token.wave,
                sent: token.sent + sent,
                received: token.received + received,
                all_passive: token.all_passive && passive,
            });
        }
        self.wave_out = false;
        let quiet = token.all_passive && token.sent == token.received;
        if !quiet {
            self.last_quiet = None;
            self.next_wave = Instant::now() + Duration::from_millis(50);
            return Ok(());
        }
        if self.last_quiet == Some((token.sent, token.received)) {
            for p in 1..self.size {
                self.send_control(p, CONTROL_DEADLOCK, [0; 4], &[])?;
            }
            self.declare_deadlock();
            return Ok(());
        }
        // Confirm with a second wave soon.
        self.last_quiet = Some((token.sent, token.received));
        self.next_wave = Instant::now() + Duration::from_millis(5);
        Ok(())
    }

    fn declare_deadlock(&self) {
        self.job.report_deadlock(Some(format!(
            "ranks of node {} only; every MPI process reports its own ranks",
            self.me
        )));
    }

    /// After the barrier: all processes learn whether any of them failed, so that they all
    /// end with an error (or all combine their counters).
    fn agree(&mut self) {
        let failed_here = self.job.has_failure() || self.job.storage_failed();
        let mine: c_int = if failed_here { self.me } else { self.size };
        let mut first: c_int = self.size;
        // SAFETY: valid communicator; one int in and out.
        let code = unsafe {
            ffi::MPI_Allreduce(
                (&mine as *const c_int).cast::<c_void>(),
                (&mut first as *mut c_int).cast::<c_void>(),
                1,
                ffi::RSMPI_INT32_T,
                ffi::RSMPI_MIN,
                self.comm,
            )
        };
        if code != 0 {
            self.job.fail_with(mpi_error("MPI_Allreduce", code), false);
            return;
        }
        if first < self.size && !failed_here {
            let message = match &self.remote_failure {
                Some((_, m)) => m.clone(),
                None => "failed (see that process's error output)".to_string(),
            };
            self.job.fail_with(
                JobError::Remote {
                    node: first as u32,
                    message,
                },
                false,
            );
        }
    }
}

fn empty_request() -> ffi::MPI_Request {
    // SAFETY: reads an immutable handle constant exported by the MPI library.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}
