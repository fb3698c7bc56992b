//! Receiving: the engine probes for headers and control messages, receives the payload of a
//! large message into its receiver's own buffer or into a pooled 16-byte aligned buffer, and
//! delivers the messages of each source process in the order they were sent, so MPI's
//! non-overtaking rule holds between spillway ranks.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::ffi;

use super::frame::{unframe, CHUNK, HEADER_WORDS, INLINE, TAG_CONTROL, TAG_DATA, TAG_HEADER};
use super::net::Net;
use super::peers::Peers;
use super::{empty_request, empty_status};
use crate::host::{Announced, Claim, Expect, Failure, Host};
use crate::outbox::Outbox;
use crate::{AlignedBuf, Envelope, Payload};

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
    /// Nowhere yet: the data receives are not posted (see [`Receives::place`]); it moves at
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

/// The messages whose header arrived and that are not yet delivered, per source process.
pub(super) struct Receives {
    host: Arc<dyn Host>,
    outbox: Arc<Outbox>,
    incoming: Vec<VecDeque<PendingRecv>>,
    /// Abandoned receives into the engine's buffers (from lost processes), kept until MPI
    /// has let go of the buffers.
    zombies: Vec<PendingRecv>,
}

impl Receives {
    pub(super) fn new(host: Arc<dyn Host>, outbox: Arc<Outbox>, size: c_int) -> Receives {
        Receives {
            host,
            outbox,
            incoming: (0..size).map(|_| VecDeque::new()).collect(),
            zombies: Vec::new(),
        }
    }

    /// Whether messages are on their way in.
    pub(super) fn in_flight(&self) -> bool {
        self.incoming.iter().any(|q| !q.is_empty())
    }

    /// Receives the next message of any tag (headers and control messages: data travels in
    /// receives posted when its header arrives) into a new buffer; returns its source, tag
    /// and bytes. `None` when nothing arrived, or when a process failed (noted on `net`).
    ///
    /// A matched probe (`MPI_Improbe`) takes the message out of MPI's queue before it is
    /// received (`MPI_Mrecv`): a message that cannot be received any more (its sender died
    /// before MPI had all of it) is dropped with its sender instead of being found first by
    /// every later probe, which would keep every other message of the communicator (headers,
    /// heartbeats, tokens) from being received.
    pub(super) fn probe(net: &Net) -> Result<Option<(c_int, c_int, AlignedBuf)>, String> {
        let mut flag: c_int = 0;
        let mut status = empty_status();
        // SAFETY: reads an immutable handle constant exported by the MPI library.
        let mut message = unsafe { ffi::RSMPI_MESSAGE_NULL };
        // SAFETY: valid communicator; the flag, message handle and status are written by the
        // call.
        let code = unsafe {
            ffi::MPI_Improbe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                net.comm,
                &mut flag,
                &mut message,
                &mut status,
            )
        };
        if !net.check("MPI_Improbe", code)? || flag == 0 {
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
        // SAFETY: the buffer holds `count` bytes, the size of the matched message, which only
        // this call receives (the handle is consumed).
        let code = unsafe {
            ffi::MPI_Mrecv(
                buf.as_bytes_mut().as_mut_ptr().cast::<c_void>(),
                count,
                ffi::RSMPI_UINT8_T,
                &mut message,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
        if !net.check("MPI_Mrecv", code)? {
            net.note_peer_failed(&format!(
                "MPI_Mrecv of a {count}-byte message (tag {tag}) from process {source}"
            ));
            return Ok(None);
        }
        Ok(Some((source, tag, buf)))
    }

    /// A message header: the message is complete (inline payload) or waits for its data
    /// (see [`place`](Self::place)); either way it queues behind the earlier messages of its
    /// source. `ending` says that the job is ending (nothing is parked then).
    pub(super) fn on_header(
        &mut self,
        net: &Net,
        source: c_int,
        buf: AlignedBuf,
        ending: bool,
    ) -> Result<(), String> {
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
        self.place(net, source as usize, ending)?;
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
    /// the job is ending (`ending`).
    fn place(&mut self, net: &Net, source: usize, ending: bool) -> Result<bool, String> {
        let Some(first) = self.incoming[source]
            .iter()
            .position(|p| matches!(p.target, Target::Parked(_)))
        else {
            return Ok(false);
        };
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
            self.post_data(net, source, i, claim)?;
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
    fn post_data(
        &mut self,
        net: &Net,
        source: usize,
        at: usize,
        claim: Option<Claim>,
    ) -> Result<(), String> {
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
                    net.data,
                    &mut request,
                )
            };
            match net.check("MPI_Irecv", code) {
                // The source failed: the message is dropped with it (see `abandon`).
                Ok(true) => requests.push(request),
                Ok(false) => break,
                Err(e) => {
                    let pending = &mut self.incoming[source][at];
                    pending.target = target;
                    pending.requests = requests;
                    return Err(e);
                }
            }
            offset += n;
        }
        let pending = &mut self.incoming[source][at];
        pending.target = target;
        pending.requests = requests;
        Ok(())
    }

    /// Delivers, per source process and in sending order, the messages that have arrived,
    /// and moves parked messages on; returns whether anything happened.
    pub(super) fn complete(
        &mut self,
        net: &Net,
        peers: &mut Peers,
        ending: bool,
    ) -> Result<bool, String> {
        let mut busy = false;
        if !self.zombies.is_empty() {
            self.bury(net);
        }
        for source in 0..self.incoming.len() {
            if !peers.alive(source as c_int) {
                continue;
            }
            loop {
                busy |= self.place(net, source, ending)?;
                let Some(front) = self.incoming[source].front_mut() else {
                    break;
                };
                if matches!(front.target, Target::Parked(_)) {
                    break;
                }
                let mut all = true;
                for r in front.requests.iter_mut() {
                    if !net.test(r, "MPI_Test (receive)")? {
                        all = false;
                    }
                }
                if !all || net.peer_failed() {
                    // A receive that failed may be from a lost process: the loss handling
                    // decides.
                    break;
                }
                let done = self.incoming[source].pop_front().expect("front");
                self.deliver(done);
                peers.count_received(source as c_int);
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

    /// Whether a receive writes into a rank's own buffer.
    pub(super) fn has_claims(&self) -> bool {
        self.incoming
            .iter()
            .any(|q| q.iter().any(|p| matches!(p.target, Target::Claimed(_))))
    }

    /// Receives every parked message into the engine's buffers, so that its sender's
    /// transfer can end (on the way out after a failure).
    pub(super) fn unpark_all(&mut self, net: &Net) {
        for source in 0..self.incoming.len() {
            let _ = self.place(net, source, true);
        }
    }

    /// Cancels the receives into ranks' own buffers (of every source, or of the sources
    /// `from` accepts) and completes their claims, without data, once MPI has let go of the
    /// buffers. Returns whether some are still held by MPI.
    pub(super) fn release_claims(&mut self, net: &Net, from: &dyn Fn(usize) -> bool) -> bool {
        let mut left = false;
        for (source, queue) in self.incoming.iter_mut().enumerate() {
            if !from(source) {
                continue;
            }
            let mut kept = VecDeque::new();
            while let Some(mut pending) = queue.pop_front() {
                let Target::Claimed(c) = pending.target else {
                    // The engine's own buffer: it stays with its requests.
                    kept.push_back(pending);
                    continue;
                };
                let mut all = true;
                for r in pending.requests.iter_mut() {
                    if !net.test(r, "MPI_Test (cancelled receive)").unwrap_or(true) {
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
            *queue = kept;
        }
        left
    }

    /// Cancels the data receives into ranks' own buffers (of the sources `from` accepts).
    pub(super) fn cancel_claims(&mut self, from: &dyn Fn(usize) -> bool) {
        for (source, queue) in self.incoming.iter_mut().enumerate() {
            if !from(source) {
                continue;
            }
            for pending in queue.iter_mut() {
                if matches!(pending.target, Target::Claimed(_)) {
                    for r in pending.requests.iter_mut() {
                        if *r != empty_request() {
                            // SAFETY: an active receive request of this process.
                            unsafe { ffi::MPI_Cancel(r) };
                        }
                    }
                }
            }
        }
    }

    /// Drops everything that was on its way from the lost process `source`: receives into
    /// ranks' buffers end without data (their claims complete), the rest is discarded once
    /// MPI lets go of its buffers. Returns whether MPI still holds a rank's buffer (the
    /// caller tries again).
    pub(super) fn abandon(&mut self, net: &Net, source: usize) -> bool {
        let from = |s: usize| s == source;
        self.cancel_claims(&from);
        if self.release_claims(net, &from) {
            return true;
        }
        for mut pending in std::mem::take(&mut self.incoming[source]) {
            for r in pending.requests.iter_mut() {
                if *r != empty_request() {
                    // SAFETY: an active receive request into the engine's own buffer, which
                    // is kept (as a zombie) until the request completes.
                    unsafe { ffi::MPI_Cancel(r) };
                }
            }
            self.zombies.push(pending);
        }
        self.bury(net);
        false
    }

    /// Drops the abandoned receives whose requests completed.
    fn bury(&mut self, net: &Net) {
        self.zombies.retain_mut(|z| {
            let mut all = true;
            for r in z.requests.iter_mut() {
                if !net.test(r, "MPI_Test (abandoned receive)").unwrap_or(true) {
                    all = false;
                }
            }
            !all
        });
    }
}
