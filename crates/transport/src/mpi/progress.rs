//! The progress loop: sends the outbox, receives and delivers messages in order, handles
//! control messages, and ends the job with the other processes.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::frame::{
    framed, header, unframe, CHUNK, CONTROL_ABORT, CONTROL_DEADLOCK, CONTROL_HEARTBEAT,
    CONTROL_TOKEN, HEADER_WORDS, INLINE, TAG_CONTROL, TAG_DATA, TAG_HEADER,
};
use super::liveness::Liveness;
use super::termination::{Termination, Token};
use super::{empty_request, empty_status, mpi_error};
use crate::host::{Announced, Claim, Expect, Failure, Host};
use crate::outbox::{Drive, Outbox, Outgoing};
use crate::{AlignedBuf, Envelope, Layout, Payload};

struct PendingSend {
    requests: Vec<ffi::MPI_Request>,
    /// The bytes the requests read, alive until they complete.
    _keep: Payload,
}

struct PendingRecv {
    header: [u64; HEADER_WORDS],
    target: Target,
    requests: Vec<ffi::MPI_Request>,
}

impl PendingRecv {
    /// The message as its header describes it.
    fn announced(&self) -> Announced {
        let [context, source, dest, tag, len] = self.header;
        Announced {
            dest: dest as u32,
            context,
            source: source as u32,
            tag: tag as u32 as i32,
            len: len as usize,
        }
    }
}

/// Where an arriving message's bytes go.
enum Target {
    /// A buffer of the engine's, delivered to the mailbox when complete.
    Buf(AlignedBuf),
    /// The receiver's own buffer (a claimed receive).
    Claimed(Claim),
    /// Nowhere yet: the data receives are not posted (see [`Progress::place`]); it moves at
    /// the latest at this instant.
    Parked(Instant),
}

/// How long a large message may stay parked waiting for its receiver's buffer: about the time
/// that receiving it into a buffer of the engine's and copying it again would cost (the
/// classic rent-or-buy bound), at least 100 us and at most 20 ms.
fn park_limit(len: usize) -> Duration {
    const BYTES_PER_SECOND: f64 = 2e9;
    Duration::from_secs_f64((1e-4 + len as f64 / BYTES_PER_SECOND).min(0.02))
}

pub(super) struct Progress {
    pub(super) host: Arc<dyn Host>,
    pub(super) outbox: Arc<Outbox>,
    pub(super) comm: ffi::MPI_Comm,
    /// The duplicate of `comm` on which message data travels (tag [`TAG_DATA`]).
    data: ffi::MPI_Comm,
    layout: Layout,
    pub(super) me: c_int,
    pub(super) size: c_int,
    sends: Vec<PendingSend>,
    incoming: Vec<VecDeque<PendingRecv>>,
    pub(super) term: Termination,
    pub(super) live: Liveness,
    /// The first failure announced by another process.
    pub(super) remote_failure: Option<(u32, String)>,
    transport_failed: bool,
    /// The end-of-job barrier, once entered.
    barrier: Option<ffi::MPI_Request>,
    /// Set by the progress thread when it leaves its loop: nobody else calls MPI then.
    closed: bool,
}

// SAFETY: the raw MPI handles (communicator, requests) are process-wide objects, not tied to
// a thread. A `Progress` is used by one thread at a time: the progress thread alone when MPI
// provides only MPI_THREAD_FUNNELED, or whichever thread holds the engine's mutex when it
// provides MPI_THREAD_SERIALIZED or more, which is exactly what that level allows.
unsafe impl Send for Progress {}

/// The progress engine of one process: its state behind a mutex, so that besides the progress
/// thread a rank that waits can make progress itself (when MPI allows calls from any thread,
/// one at a time), without handing messages over between threads.
pub(super) struct Engine {
    state: Mutex<Progress>,
}

impl Drive for Engine {
    fn try_send(&self) -> bool {
        let Ok(mut p) = self.state.try_lock() else {
            return false;
        };
        if p.closed || p.transport_failed {
            return false;
        }
        if let Err(e) = p.fast_step() {
            p.transport_failure(e);
        }
        true
    }

    fn drive(&self) -> bool {
        let Ok(mut p) = self.state.try_lock() else {
            // Another thread is making progress right now. It may be the progress thread,
            // preempted on this core while it holds the engine: let it finish.
            std::thread::yield_now();
            return false;
        };
        if p.closed || p.transport_failed {
            return false;
        }
        match p.fast_step() {
            Ok(busy) => busy,
            Err(e) => {
                p.transport_failure(e);
                true
            }
        }
    }
}

/// Serves the job of `host` on the processes of `comm` until it has ended on every one of
/// them: the progress thread's whole life. Every process of `comm` must call it.
///
/// With `shared`, the job's ranks may make progress themselves while they wait (through
/// [`Outbox::drive`]); this needs MPI initialised with `MPI_THREAD_SERIALIZED` or more.
pub fn run_progress(
    host: Arc<dyn Host>,
    outbox: Arc<Outbox>,
    comm: &SimpleCommunicator,
    layout: &Layout,
    peer_timeout: Duration,
    shared: bool,
) {
    // Message data travels on a communicator of its own, so that probing for headers and
    // control messages (any tag) never sees data whose receive is not posted yet.
    let data = comm.duplicate();
    let engine = Arc::new(Engine {
        state: Mutex::new(Progress {
            host,
            outbox: Arc::clone(&outbox),
            comm: comm.as_raw(),
            data: data.as_raw(),
            layout: layout.clone(),
            me: comm.rank(),
            size: comm.size(),
            sends: Vec::new(),
            incoming: (0..comm.size()).map(|_| VecDeque::new()).collect(),
            term: Termination::new(),
            live: Liveness::new(peer_timeout),
            remote_failure: None,
            transport_failed: false,
            barrier: None,
            closed: false,
        }),
    });
    if shared {
        let driver: Arc<dyn Drive> = engine.clone();
        outbox.set_driver(Arc::downgrade(&driver));
    }
    engine.run();
    // The engine no longer calls MPI (`closed`): the data communicator can go.
    drop(data);
}

impl Engine {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self) {
        let mut idle = 0u32;
        let mut idle_since = Instant::now();
        loop {
            let mut p = self.lock();
            if p.transport_failed {
                break;
            }
            let busy = match p.step() {
                Ok(busy) => busy,
                Err(e) => {
                    p.transport_failure(e);
                    break;
                }
            };
            if p.finish_round() {
                break;
            }
            if busy {
                idle = 0;
                idle_since = Instant::now();
            } else {
                idle = idle.saturating_add(1);
            }
            let wait = p.pause(idle, idle_since.elapsed());
            let outbox = Arc::clone(&p.outbox);
            drop(p);
            match wait {
                Pause::None => {}
                Pause::Yield => std::thread::yield_now(),
                Pause::Sleep(d) => outbox.wait(d),
            }
        }
        let mut p = self.lock();
        p.closed = true;
        if p.transport_failed || p.live.lost.is_some() {
            p.release_rank_memory();
        }
        if p.transport_failed {
            // The network cannot be trusted any more: let the local ranks end and leave.
            while !p.host.local_done() {
                std::thread::sleep(Duration::from_millis(1));
            }
            return;
        }
        if p.live.lost.is_some() {
            return;
        }
        // Late messages (e.g. an announcement sent just before the barrier) are read so that
        // nothing is left in the communicator.
        let _ = p.step();
        p.agree();
    }
}

/// What the progress thread does between two rounds.
enum Pause {
    None,
    Yield,
    Sleep(Duration),
}

impl Progress {
    fn transport_failure(&mut self, why: String) {
        self.transport_failed = true;
        self.host.fail(Failure::Transport(why), false);
    }

    /// The end-of-job protocol after a round; returns whether the loop is over.
    fn finish_round(&mut self) -> bool {
        if self.live.lost.is_some() {
            super::PEER_LOST.store(true, std::sync::atomic::Ordering::Release);
            // Data from the lost process will not come: free the ranks waiting for it.
            if self.has_claims() {
                self.release_rank_memory();
            }
            // The lost process will never enter the barrier: tell the others (already
            // queued) and leave once the local ranks have ended.
            if self.host.local_done() {
                let deadline = Instant::now() + Duration::from_secs(1);
                while !self.sends.is_empty() && Instant::now() < deadline {
                    if self.test_sends().is_err() {
                        break;
                    }
                    std::thread::yield_now();
                }
                return true;
            }
        } else if let Some(mut request) = self.barrier.take() {
            match self.test(&mut request, "MPI_Ibarrier") {
                Ok(true) if self.sends.is_empty() => return true,
                Ok(_) => self.barrier = Some(request),
                Err(e) => {
                    self.transport_failure(e);
                    return true;
                }
            }
        } else if self.host.local_done() && self.sends.is_empty() {
            let mut request = empty_request();
            // SAFETY: valid communicator; `request` outlives the call and is tested until
            // complete.
            let code = unsafe { ffi::MPI_Ibarrier(self.comm, &mut request) };
            if code != 0 {
                self.transport_failure(mpi_error("MPI_Ibarrier", code));
                return true;
            }
            self.barrier = Some(request);
        }
        false
    }

    /// How to wait before the next round. While transfers are in flight it only yields: MPI
    /// moves large messages only while both sides call into it (Open MPI's shared-memory
    /// transport, for one). While no rank of this process can run (they all wait, typically
    /// for messages from other nodes) it also only yields, for up to `SPIN` after the last
    /// activity: answers within a collective come quickly and nothing here needs the core.
    /// Otherwise it sleeps on the outbox with a growing timeout of up to 200 us; a rank's send
    /// wakes it at once. While ranks drive the engine themselves it sleeps 200 us at a time.
    fn pause(&self, idle: u32, idle_for: Duration) -> Pause {
        const SPIN: Duration = Duration::from_millis(5);
        if self.outbox.driven() {
            // Waiting ranks make progress themselves; this thread only keeps the periodic
            // work (heartbeats, deadlock detection) going and stays off their core.
            return Pause::Sleep(Duration::from_micros(200));
        }
        if idle == 0 {
            return Pause::None;
        }
        let in_flight = !self.sends.is_empty() || self.incoming.iter().any(|q| !q.is_empty());
        if idle < 64 || in_flight || (self.host.passive() && idle_for < SPIN) {
            return Pause::Yield;
        }
        let micros = (2u64 << ((idle - 64) / 32).min(10)).min(200);
        Pause::Sleep(Duration::from_micros(micros))
    }

    /// One round of the progress thread: liveness, announcements, deadlock detection and
    /// [`fast_step`](Self::fast_step). Returns whether anything happened.
    fn step(&mut self) -> Result<bool, String> {
        let mut busy = self.check_liveness()?;
        if let Some(text) = self.host.take_announcement() {
            let lost = self.live.lost.map_or(0, |l| l as u64 + 1);
            for p in 0..self.size {
                if p != self.me && Some(p as u32) != self.live.lost {
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
        busy |= self.fast_step()?;
        busy |= self.detect_deadlock()?;
        Ok(busy)
    }

    /// What moves messages: the outbox, sends in flight, arriving headers and control
    /// messages, and data. The round a waiting rank makes; it calls MPI as little as it can
    /// (one probe when nothing is in flight). Returns whether anything happened.
    fn fast_step(&mut self) -> Result<bool, String> {
        let mut busy = false;
        for out in self.outbox.take() {
            self.send_message(out)?;
            busy = true;
        }
        if !self.sends.is_empty() {
            busy |= self.test_sends()?;
        }
        busy |= self.receive_messages()?;
        if self.incoming.iter().any(|q| !q.is_empty()) {
            busy |= self.complete_receives()?;
        }
        Ok(busy)
    }

    pub(super) fn test(&self, request: &mut ffi::MPI_Request, call: &str) -> Result<bool, String> {
        let mut flag: c_int = 0;
        // SAFETY: `request` is an active or null request of this process; the buffers it
        // refers to are kept alive by the caller until it completes.
        let code = unsafe { ffi::MPI_Test(request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        if code != 0 {
            return Err(mpi_error(call, code));
        }
        Ok(flag != 0)
    }

    /// Starts a non-blocking send of `len` bytes at `ptr` on `comm`.
    ///
    /// # Safety
    /// The bytes must stay valid and unchanged until the returned request completes.
    unsafe fn isend(
        &self,
        comm: ffi::MPI_Comm,
        ptr: *const u8,
        len: usize,
        dest: c_int,
        tag: c_int,
    ) -> Result<ffi::MPI_Request, String> {
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
                comm,
                &mut request,
            )
        };
        if code != 0 {
            return Err(mpi_error("MPI_Isend", code));
        }
        Ok(request)
    }

    fn send_message(&mut self, out: Outgoing) -> Result<(), String> {
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
            requests.push(unsafe {
                self.isend(self.data, chunk.as_ptr(), chunk.len(), dest, TAG_DATA)?
            });
        }
        self.sends.push(PendingSend {
            requests,
            _keep: payload,
        });
        Ok(())
    }

    pub(super) fn send_control(
        &mut self,
        dest: c_int,
        kind: u64,
        words: [u64; 4],
        text: &[u8],
    ) -> Result<(), String> {
        let head = [kind, words[0], words[1], words[2], words[3]];
        self.send_framed(dest, TAG_CONTROL, framed(head, text))
    }

    /// Sends one framed buffer, kept with its request until it completes.
    fn send_framed(&mut self, dest: c_int, tag: c_int, buf: AlignedBuf) -> Result<(), String> {
        // SAFETY: `buf` moves into the pending send (its heap storage does not move) and is
        // dropped only after the request completes.
        let request =
            unsafe { self.isend(self.comm, buf.as_bytes().as_ptr(), buf.len(), dest, tag)? };
        self.sends.push(PendingSend {
            requests: vec![request],
            _keep: Payload::Owned(buf),
        });
        Ok(())
    }

    fn test_sends(&mut self) -> Result<bool, String> {
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

    /// Receives the next message of any tag (headers and control messages: data travels in
    /// receives posted when its header arrives) into a new buffer; returns its source, tag
    /// and bytes.
    fn receive_probed(&mut self) -> Result<Option<(c_int, c_int, AlignedBuf)>, String> {
        let mut flag: c_int = 0;
        let mut status = empty_status();
        // SAFETY: valid communicator; the status and flag are written by the call.
        let code = unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
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
        let (source, tag) = (status.MPI_SOURCE, status.MPI_TAG);
        if tag != TAG_HEADER && tag != TAG_CONTROL {
            // Data travels on the data communicator: any other tag here means the processes
            // disagree on the protocol.
            return Err(format!(
                "a message with tag {tag} from process {source} arrived without its header"
            ));
        }
        let mut count: c_int = 0;
        // SAFETY: `status` was filled by the successful probe.
        unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
        let mut buf = AlignedBuf::for_overwrite(count.max(0) as usize);
        // SAFETY: the buffer holds `count` bytes; the probed message is received at once
        // (receives on the communicator are made under the engine's lock, so nothing else can
        // match it).
        let code = unsafe {
            ffi::MPI_Recv(
                buf.as_bytes_mut().as_mut_ptr().cast::<c_void>(),
                count,
                ffi::RSMPI_UINT8_T,
                source,
                tag,
                self.comm,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        if code != 0 {
            return Err(mpi_error("MPI_Recv", code));
        }
        self.live.heard_from(source, self.me, self.size);
        Ok(Some((source, tag, buf)))
    }

    /// Receives every header and control message that has arrived.
    fn receive_messages(&mut self) -> Result<bool, String> {
        let mut busy = false;
        while let Some((source, tag, buf)) = self.receive_probed()? {
            busy = true;
            if tag == TAG_HEADER {
                self.on_header(source, buf)?;
            } else {
                self.on_control(source, buf)?;
            }
        }
        Ok(busy)
    }

    /// A message header: the message is complete (inline payload) or waits for its data
    /// (see [`place`](Self::place)); either way it queues behind the earlier messages of its
    /// source.
    fn on_header(&mut self, source: c_int, buf: AlignedBuf) -> Result<(), String> {
        let (head, inline) = unframe(buf.as_bytes(), "message header", source)?;
        let len = head[4] as usize;
        let pending = if len <= INLINE {
            if inline.len() != len {
                return Err(format!(
                    "a message of {} bytes announced as {len} from process {source}",
                    inline.len()
                ));
            }
            PendingRecv {
                header: head,
                target: Target::Buf(AlignedBuf::from_bytes(inline)),
                requests: Vec::new(),
            }
        } else {
            PendingRecv {
                header: head,
                target: Target::Parked(Instant::now() + park_limit(len)),
                requests: Vec::new(),
            }
        };
        self.incoming[source as usize].push_back(pending);
        self.place(source as usize)?;
        Ok(())
    }

    /// Posts the data receives of the parked messages of `source` that should move now, in
    /// arrival order (MPI matches the data of one source in the order it was sent).
    ///
    /// A large message goes straight into its receiver's buffer when a receive posted with a
    /// big enough buffer matches it and nothing earlier of its source is pending (a claim).
    /// Until then it stays parked, as MPI's rendezvous protocol keeps a large message at its
    /// sender until the receive is posted, rather than going into a buffer of the engine's
    /// to be copied again: typically the receiver is still computing and posts its receive
    /// moments later. It is received into an engine buffer instead as soon as a receive
    /// without a fitting buffer matches it, its receiver or the receiver of a message queued
    /// behind it is blocked on something else, its time limit ([`park_limit`]) has passed, or
    /// the job is ending.
    fn place(&mut self, source: usize) -> Result<bool, String> {
        let Some(first) = self.incoming[source]
            .iter()
            .position(|p| matches!(p.target, Target::Parked(_)))
        else {
            return Ok(false);
        };
        let ending = self.host.failed() || self.host.local_done() || self.live.lost.is_some();
        let now = Instant::now();
        let mut placed = false;
        for i in first..self.incoming[source].len() {
            let Target::Parked(limit) = self.incoming[source][i].target else {
                continue;
            };
            let msg = self.incoming[source][i].announced();
            let expect = self.host.expects(msg);
            let claim = if i == 0 && expect == Expect::Buffer {
                self.host.claim(msg)
            } else {
                None
            };
            let now_or_never = claim.is_some()
                || ending
                || now >= limit
                || expect == Expect::Mailbox
                || self.wanted_behind(source, i + 1);
            if !now_or_never {
                // Later messages of this source cannot overtake it.
                break;
            }
            self.post_data(source, i, claim)?;
            placed = true;
        }
        Ok(placed)
    }

    /// Whether the receiver of a message of `source` queued from position `from` on is ready
    /// for it: that message cannot arrive before the ones ahead of it.
    fn wanted_behind(&self, source: usize, from: usize) -> bool {
        self.incoming[source]
            .iter()
            .skip(from)
            .any(|p| self.host.expects(p.announced()) != Expect::Unknown)
    }

    /// Posts the data receives of the parked message at position `at` of `source`'s queue,
    /// into the claimed buffer or into a new buffer of the engine's.
    fn post_data(&mut self, source: usize, at: usize, claim: Option<Claim>) -> Result<(), String> {
        let len = self.incoming[source][at].header[4] as usize;
        let (target, base) = match claim {
            Some(c) => (Target::Claimed(c), c.ptr as *mut u8),
            None => {
                let mut body = AlignedBuf::for_overwrite(len);
                let base = body.as_bytes_mut().as_mut_ptr();
                (Target::Buf(body), base)
            }
        };
        let mut requests = Vec::with_capacity(len.div_ceil(CHUNK));
        let mut offset = 0;
        while offset < len {
            let n = CHUNK.min(len - offset);
            let mut request = empty_request();
            // SAFETY: `base` has `len` writable bytes that stay valid until the requests
            // complete: the engine's own buffer moves into the pending receive (its heap
            // storage does not move), and a claimed buffer stays valid until the claim is
            // completed, which happens only after the requests completed or were cancelled.
            let code = unsafe {
                ffi::MPI_Irecv(
                    base.add(offset).cast::<c_void>(),
                    n as c_int,
                    ffi::RSMPI_UINT8_T,
                    source as c_int,
                    TAG_DATA,
                    self.data,
                    &mut request,
                )
            };
            if code != 0 {
                if let Target::Claimed(c) = target {
                    self.host.complete_claim(c, false);
                }
                return Err(mpi_error("MPI_Irecv", code));
            }
            requests.push(request);
            offset += n;
        }
        let pending = &mut self.incoming[source][at];
        pending.target = target;
        pending.requests = requests;
        Ok(())
    }

    /// Delivers, per source process and in sending order, the messages that have arrived,
    /// and moves parked messages on.
    fn complete_receives(&mut self) -> Result<bool, String> {
        let mut busy = false;
        for source in 0..self.incoming.len() {
            loop {
                busy |= self.place(source)?;
                let Some(front) = self.incoming[source].front_mut() else {
                    break;
                };
                if matches!(front.target, Target::Parked(_)) {
                    break;
                }
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
        let buf = match done.target {
            Target::Claimed(c) => {
                self.host.complete_claim(c, true);
                self.outbox
                    .received
                    .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                return;
            }
            Target::Buf(buf) => buf,
            Target::Parked(_) => unreachable!("a parked message is never complete"),
        };
        if !self.host.is_local(dest) {
            self.host.fail(
                Failure::Transport(format!(
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
            payload: Payload::Owned(buf),
        };
        if let Err(why) = self.host.deliver(dest, env) {
            self.host.fail(
                Failure::Transport(format!("cannot store a message from another node: {why}")),
                true,
            );
        }
        self.outbox
            .received
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    fn has_claims(&self) -> bool {
        self.incoming
            .iter()
            .any(|q| q.iter().any(|p| matches!(p.target, Target::Claimed(_))))
    }

    /// On the way out after a failure: ends every transfer that reads or writes memory of a
    /// rank (sends from borrowed buffers, receives into claimed ones), so that no rank's
    /// memory is touched by MPI after the rank was told it is free. Receives are cancelled;
    /// sends are given time to complete. If MPI holds on to a rank's memory regardless, the
    /// process cannot go on safely and aborts.
    fn release_rank_memory(&mut self) {
        // Parked messages are received into the engine's buffers, so that their senders'
        // transfers can end.
        for source in 0..self.incoming.len() {
            let _ = self.place(source);
        }
        for queue in &mut self.incoming {
            for pending in queue.iter_mut() {
                if matches!(pending.target, Target::Claimed(_)) {
                    for r in pending.requests.iter_mut() {
                        // SAFETY: an active receive request of this process.
                        unsafe { ffi::MPI_Cancel(r) };
                    }
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut left = false;
            for queue in 0..self.incoming.len() {
                let mut kept = VecDeque::new();
                while let Some(mut pending) = self.incoming[queue].pop_front() {
                    let Target::Claimed(c) = pending.target else {
                        // The engine's own buffer: it stays with its requests.
                        kept.push_back(pending);
                        continue;
                    };
                    let mut all = true;
                    for r in pending.requests.iter_mut() {
                        if !self.test(r, "MPI_Test (cancelled receive)").unwrap_or(true) {
                            all = false;
                        }
                    }
                    if all {
                        self.host.complete_claim(c, false);
                    } else {
                        left = true;
                        kept.push_back(pending);
                    }
                }
                self.incoming[queue] = kept;
            }
            let _ = self.test_sends();
            if self
                .sends
                .iter()
                .any(|s| matches!(s._keep, Payload::Borrowed(_)))
            {
                left = true;
            }
            if !left {
                break;
            }
            if Instant::now() > deadline {
                eprintln!(
                    "spillway: MPI still uses memory of this process's ranks after a transport \
                     failure; aborting"
                );
                std::process::abort();
            }
            std::thread::yield_now();
        }
        // What is left reads only the engine's own buffers.
    }

    /// A control message: a failure announcement, a termination token, a deadlock verdict or
    /// a heartbeat.
    fn on_control(&mut self, source: c_int, buf: AlignedBuf) -> Result<(), String> {
        let (head, text) = unframe(buf.as_bytes(), "control message", source)?;
        match head[0] {
            CONTROL_ABORT => {
                let node = head[1] as u32;
                if head[2] > 0 && self.live.lost.is_none() {
                    self.live.lost = Some(head[2] as u32 - 1);
                }
                let message = String::from_utf8_lossy(text).into_owned();
                if self.remote_failure.is_none() {
                    self.remote_failure = Some((node, message.clone()));
                }
                self.host.fail(Failure::Remote { node, message }, false);
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
                return Err(format!(
                    "unknown control message {other} from process {source}"
                ))
            }
        }
        Ok(())
    }
}
