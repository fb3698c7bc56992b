//! One process's share of a job: what a round of progress does (send the outbox, receive and
//! deliver, handle control messages, heartbeats and termination waves), what happens when
//! processes are lost, and the end of the job with the other processes.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::ffi;

use super::direct::Direct;
use super::frame::{
    unframe, CONTROL_ABORT, CONTROL_DEADLOCK, CONTROL_HEARTBEAT, CONTROL_TOKEN, TAG_HEADER,
};
use super::liveness::Liveness;
use super::net::Net;
use super::peers::Peers;
use super::receives::Receives;
use super::sends::Sends;
use super::termination::{Counts, Termination, Token, TokenStep};
use super::{empty_request, mpi_error, ulfm};
use crate::exchange::Exchange;
use crate::host::{Failure, Host};
use crate::outbox::{Outbox, Outgoing};
use crate::{AlignedBuf, Layout};

mod losses;

/// The communicator of the engine's collectives (whether the job failed, the survivors'
/// counters): it loses the failed processes (`MPIX_Comm_shrink`) while point-to-point traffic
/// stays on the original communicators, so that nothing in flight between survivors is lost.
pub(super) struct Coll {
    pub(super) comm: ffi::MPI_Comm,
    /// Whether `comm` was made by a shrink (the engine then frees it).
    shrunk: bool,
}

/// The end of the job: every process agrees that it is done, and whether any failed.
enum End {
    /// Ranks still run here.
    Running,
    /// Without ULFM: the barrier every process enters when done.
    Barrier(ffi::MPI_Request),
    /// With ULFM: the agreement every survivor enters when done (its flag: 1 if this process
    /// did not fail), which completes whatever processes fail meanwhile.
    Agree(ffi::MPI_Request, Box<c_int>),
    /// Every process is done.
    Done {
        /// With ULFM: whether every survivor ended without a failure (the same in all of
        /// them); without: not known yet.
        agreed: Option<bool>,
    },
}

pub(super) struct Progress {
    pub(super) host: Arc<dyn Host>,
    pub(super) outbox: Arc<Outbox>,
    pub(super) net: Net,
    pub(super) coll: Coll,
    /// The communicator of the agreement (or barrier) that ends the job: never shrunk; after
    /// an agreement that reported failed processes they are acknowledged on it.
    end_comm: ffi::MPI_Comm,
    layout: Layout,
    pub(super) sends: Sends,
    pub(super) receives: Receives,
    /// Direct exchanges (see [`Direct`]).
    pub(super) direct: Direct,
    pub(super) peers: Peers,
    term: Termination,
    pub(super) live: Liveness,
    /// The first failure announced by another process.
    remote_failure: Option<(u32, String)>,
    pub(super) transport_failed: bool,
    end: End,
    /// Set by the progress thread when it leaves its loop: nobody else calls MPI then.
    pub(super) closed: bool,
    /// Rounds that only tested direct exchanges (see [`fast_step`](Self::fast_step)).
    light_rounds: u32,
    /// Reports of failed processes that changed nothing (see `on_peer_failed`).
    stale: StaleFailures,
}

/// Reports of failed processes that brought nothing new.
#[derive(Default)]
struct StaleFailures {
    /// Since when every report has been stale (`None` after a shrink).
    since: Option<Instant>,
    /// Stale reports since then.
    reports: u64,
    /// When the failures were last acknowledged.
    last_ack: Option<Instant>,
}

/// Stale reports acknowledge failures at most this often.
const ACK_EVERY: Duration = Duration::from_millis(10);

/// Stale reports needed (besides the peer timeout) before they end the job.
const STALE_REPORTS: u64 = 1000;

/// While a direct exchange is awaited, one round in this many does everything else too.
const LIGHT_ROUNDS: u32 = 4;

// SAFETY: the raw MPI handles (communicators, requests) are process-wide objects, not tied
// to a thread. A `Progress` is used by one thread at a time: the progress thread alone when
// MPI provides only MPI_THREAD_FUNNELED, or whichever thread holds the engine's mutex when it
// provides MPI_THREAD_SERIALIZED or more, which is exactly what that level allows.
unsafe impl Send for Progress {}

/// What the progress thread does between two rounds.
pub(super) enum Pause {
    None,
    Yield,
    Sleep(Duration),
}

impl Progress {
    pub(super) fn new(
        host: Arc<dyn Host>,
        outbox: Arc<Outbox>,
        net: Net,
        coll: ffi::MPI_Comm,
        end_comm: ffi::MPI_Comm,
        layout: &Layout,
        peer_timeout: Duration,
    ) -> Progress {
        let (me, size) = (net.me, net.size);
        Progress {
            receives: Receives::new(Arc::clone(&host), Arc::clone(&outbox), size),
            host,
            outbox,
            net,
            coll: Coll {
                comm: coll,
                shrunk: false,
            },
            end_comm,
            layout: layout.clone(),
            sends: Sends::default(),
            direct: Direct::default(),
            peers: Peers::new(me, size),
            term: Termination::new(),
            live: Liveness::new(peer_timeout),
            remote_failure: None,
            transport_failed: false,
            end: End::Running,
            closed: false,
            light_rounds: 0,
            stale: StaleFailures::default(),
        }
    }

    pub(super) fn transport_failure(&mut self, why: String) {
        self.transport_failed = true;
        self.host.fail(Failure::Transport(why), false);
    }

    /// Whether the job is ending here (messages are not parked any more).
    fn ending(&self) -> bool {
        self.host.failed() || self.host.local_done() || self.live.silent.is_some()
    }

    /// The end-of-job protocol after a round; returns whether the loop is over.
    pub(super) fn finish_round(&mut self) -> bool {
        if self.live.silent.is_some() {
            super::PEER_LOST.store(true, std::sync::atomic::Ordering::Release);
            // Data from the silent process will not come: free the ranks waiting for it.
            if self.receives.has_claims() {
                self.release_rank_memory();
            }
            // The silent process will never end its part: tell the others (already queued)
            // and leave once the local ranks have ended.
            if self.host.local_done() {
                let deadline = Instant::now() + Duration::from_secs(1);
                while !self.sends.is_empty() && Instant::now() < deadline {
                    if self.sends.test(&self.net).is_err() {
                        break;
                    }
                    std::thread::yield_now();
                }
                return true;
            }
            return false;
        }
        match std::mem::replace(&mut self.end, End::Running) {
            End::Running => {
                if self.host.local_done() && self.sends.is_empty() {
                    self.enter_end();
                }
            }
            End::Barrier(mut request) => match self.net.test(&mut request, "MPI_Ibarrier") {
                Ok(true) if self.sends.is_empty() => self.end = End::Done { agreed: None },
                Ok(_) => self.end = End::Barrier(request),
                Err(e) => {
                    self.transport_failure(e);
                    return true;
                }
            },
            End::Agree(mut request, flag) => {
                let mut done: c_int = 0;
                // SAFETY: an active agreement request; `flag` stays alive (boxed) until it
                // completes.
                let code =
                    unsafe { ffi::MPI_Test(&mut request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
                if code != 0 && !ulfm::is_process_failure(code) {
                    self.transport_failure(mpi_error("MPIX_Comm_iagree", code));
                    return true;
                }
                if code != 0 {
                    // A process failed before it agreed (every survivor sees this error):
                    // all of them acknowledge it and agree again.
                    self.after_failed_agreement();
                } else if done != 0 {
                    self.end = End::Done {
                        agreed: Some(*flag != 0),
                    };
                } else {
                    self.end = End::Agree(request, flag);
                }
            }
            done @ End::Done { .. } => self.end = done,
        }
        matches!(self.end, End::Done { .. }) && self.sends.is_empty()
    }

    /// This process is done: it enters the end barrier (or agreement, with ULFM).
    fn enter_end(&mut self) {
        let mut request = empty_request();
        if ulfm::AVAILABLE {
            let mut flag = Box::new(c_int::from(!self.host.failed()));
            // SAFETY: valid communicator; `flag` (boxed, so it does not move) and `request`
            // outlive the operation, which is tested until complete.
            let code = unsafe { ulfm::iagree(self.end_comm, &mut *flag, &mut request) };
            if code != 0 {
                if ulfm::is_process_failure(code) {
                    self.after_failed_agreement();
                } else {
                    self.transport_failure(mpi_error("MPIX_Comm_iagree", code));
                }
                return;
            }
            self.end = End::Agree(request, flag);
        } else {
            // SAFETY: valid communicator; `request` outlives the call and is tested until
            // complete.
            let code = unsafe { ffi::MPI_Ibarrier(self.end_comm, &mut request) };
            if code != 0 {
                self.transport_failure(mpi_error("MPI_Ibarrier", code));
                return;
            }
            self.end = End::Barrier(request);
        }
    }

    /// How to wait before the next round. While transfers are in flight it only yields: MPI
    /// moves large messages only while both sides call into it (Open MPI's shared-memory
    /// transport, for one). While no rank of this process can run (they all wait, typically
    /// for messages from other nodes) it also only yields, for up to `SPIN` after the last
    /// activity: answers within a collective come quickly and nothing here needs the core.
    /// Otherwise it sleeps on the outbox with a growing timeout of up to 200 us; a rank's send
    /// wakes it at once. While ranks drive the engine themselves, or may do so and some rank
    /// runs (nothing in flight), it sleeps 200 us at a time.
    pub(super) fn pause(&self, idle: u32, idle_for: Duration) -> Pause {
        const SPIN: Duration = Duration::from_millis(5);
        if self.outbox.driven() {
            // Waiting ranks make progress themselves; this thread only keeps the periodic
            // work (heartbeats, deadlock detection) going and stays off their core.
            return Pause::Sleep(Duration::from_micros(200));
        }
        if idle == 0 {
            return Pause::None;
        }
        let in_flight = !self.sends.is_empty() || self.receives.in_flight();
        if self.outbox.drivable() && !in_flight && !self.host.passive() {
            // Ranks run here and make progress themselves when they wait: keep off their
            // core (MPI typically binds the process to one), waking only for the periodic
            // work and for anything sent to a rank meanwhile.
            return Pause::Sleep(Duration::from_micros(200));
        }
        if idle < 64 || in_flight || (self.host.passive() && idle_for < SPIN) {
            return Pause::Yield;
        }
        let micros = (2u64 << ((idle - 64) / 32).min(10)).min(200);
        Pause::Sleep(Duration::from_micros(micros))
    }

    /// One round of the progress thread: liveness, announcements, a look at the collective
    /// communicator (revoked when another process found a failed one), deadlock detection
    /// and [`fast_step`](Self::fast_step). Returns whether anything happened.
    pub(super) fn step(&mut self) -> Result<bool, String> {
        let mut busy = self.check_liveness()?;
        if let Some(text) = self.host.take_announcement() {
            let silent = self.live.silent.map_or(0, |l| l as u64 + 1);
            let others: Vec<c_int> = self.peers.others().collect();
            for p in others {
                if Some(p as u32) != self.live.silent {
                    self.sends.control(
                        &self.net,
                        p,
                        CONTROL_ABORT,
                        [self.net.me as u64, silent, 0, 0],
                        text.as_bytes(),
                    )?;
                }
            }
            busy = true;
        }
        if ulfm::AVAILABLE && matches!(self.end, End::Running | End::Agree(..)) {
            busy |= self.watch_collectives()?;
        }
        busy |= self.fast_step()?;
        if self.net.peer_failed() {
            busy |= self.on_peer_failed();
        }
        busy |= self.detect_deadlock()?;
        Ok(busy)
    }

    /// What moves messages: the outbox, sends in flight, arriving headers and control
    /// messages, and data. The round a waiting rank makes; it calls MPI as little as it can
    /// (one probe when nothing is in flight). Returns whether anything happened.
    pub(super) fn fast_step(&mut self) -> Result<bool, String> {
        let mut busy = false;
        for out in self.outbox.take() {
            self.send_message(out)?;
            busy = true;
        }
        for ex in self.outbox.take_exchanges() {
            self.start_exchange(ex)?;
            busy = true;
        }
        if self.direct.active() {
            busy |= self.direct.test(&self.net, &self.outbox)?;
            if !busy && self.direct.waiting() {
                // A rank waits for a direct exchange: most rounds only test its receive, so
                // that the message is seen soon after it arrives; every few rounds the rest
                // (probes, sends, other receives) moves too.
                self.light_rounds = self.light_rounds.wrapping_add(1);
                if !self.light_rounds.is_multiple_of(LIGHT_ROUNDS) {
                    return Ok(false);
                }
            }
        }
        if !self.sends.is_empty() {
            busy |= self.sends.test(&self.net)?;
        }
        busy |= self.receive_messages()?;
        if self.receives.in_flight() {
            let ending = self.ending();
            busy |= self.receives.complete(&self.net, &mut self.peers, ending)?;
        }
        if self.net.peer_failed() {
            // The progress thread finds out which processes failed, with the others.
            self.outbox.notify();
        }
        Ok(busy)
    }

    /// Starts a direct exchange (it fails at once if its peers were lost).
    pub(super) fn start_exchange(&mut self, ex: Arc<Exchange>) -> Result<(), String> {
        if self.peers.alive(ex.to as c_int) && self.peers.alive(ex.from as c_int) {
            self.direct
                .start(&self.net, &mut self.sends, &self.outbox, ex)
        } else {
            ex.fail();
            Ok(())
        }
    }

    fn send_message(&mut self, out: Outgoing) -> Result<(), String> {
        let dest = self.layout.node_of(out.dest) as c_int;
        if !self.peers.alive(dest) {
            // Its destination was lost: nobody will receive it.
            self.peers.count_dropped();
            return Ok(());
        }
        if self.sends.message(&self.net, dest, out)? {
            self.peers.count_sent(dest);
        } else {
            self.peers.count_dropped();
        }
        Ok(())
    }

    fn send_control(
        &mut self,
        dest: c_int,
        kind: u64,
        words: [u64; 4],
        text: &[u8],
    ) -> Result<(), String> {
        self.sends.control(&self.net, dest, kind, words, text)?;
        Ok(())
    }

    /// Receives every header and control message that has arrived.
    fn receive_messages(&mut self) -> Result<bool, String> {
        let mut busy = false;
        while let Some((source, tag, buf)) = Receives::probe(&self.net)? {
            busy = true;
            self.live.heard_from(source, self.peers.predecessor());
            if !self.peers.alive(source) {
                // Sent just before its sender was declared lost: dropped with the rest.
                continue;
            }
            if tag == TAG_HEADER {
                let ending = self.ending();
                self.receives.on_header(&self.net, source, buf, ending)?;
            } else {
                self.on_control(source, buf)?;
            }
        }
        Ok(busy)
    }

    /// Sends the heartbeat when due and checks the predecessor; returns whether anything was
    /// done.
    fn check_liveness(&mut self) -> Result<bool, String> {
        let now = Instant::now();
        let mut busy = false;
        if self.live.heartbeat_due(now) {
            let next = self.peers.successor();
            if next != self.net.me {
                self.send_control(next, CONTROL_HEARTBEAT, [0; 4], &[])?;
            }
            busy = true;
        }
        let pred = self.peers.predecessor();
        if pred != self.net.me {
            if let Some(silent) = self.live.newly_silent(now, pred) {
                let resume = if ulfm::AVAILABLE {
                    "it may hang, so the job ends"
                } else {
                    "this MPI has no fault tolerance (ULFM), so the job ends"
                };
                self.host.fail(
                    Failure::Transport(format!(
                        "node {silent} (MPI process {silent}) was not heard from for {:.0?}: it \
                         was probably lost ({resume}; with the spillway CLI, a job saved with \
                         --checkpoint-dir resumes with --resume)",
                        self.live.peer_timeout()
                    )),
                    true,
                );
                busy = true;
            }
        }
        Ok(busy)
    }

    /// A control message: a failure announcement, a termination token, a deadlock verdict or
    /// a heartbeat.
    fn on_control(&mut self, source: c_int, buf: AlignedBuf) -> Result<(), String> {
        let (head, text) = unframe(buf.as_bytes(), "control message", source)?;
        match head[0] {
            CONTROL_ABORT => {
                let node = head[1] as u32;
                if head[2] > 0 && self.live.silent.is_none() {
                    self.live.silent = Some(head[2] as u32 - 1);
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
                    all_passive: head[4] & 1 != 0,
                    all_done: head[4] & 2 != 0,
                };
                let step = self
                    .term
                    .on_token(self.peers.is_leader(), token, self.counts());
                self.on_token_step(step)?;
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

    /// This process's contribution to a termination wave: its messages to and from live
    /// processes, and whether no rank here runs.
    fn counts(&self) -> Counts {
        use std::sync::atomic::Ordering::Acquire;
        // Read `received` before `sent`: a message counted as received was sent earlier.
        let received = self.outbox.received.load(Acquire);
        let sent = self.outbox.sent.load(Acquire);
        let (lost_sent, lost_received) = self.peers.lost_traffic();
        Counts {
            sent: sent - lost_sent,
            received: received - lost_received,
            passive: self.host.passive(),
            done: self.host.local_done(),
        }
    }

    fn send_token(&mut self, token: Token) -> Result<(), String> {
        let next = self.peers.successor();
        self.send_control(
            next,
            CONTROL_TOKEN,
            [
                token.wave,
                token.sent,
                token.received,
                u64::from(token.all_passive) | u64::from(token.all_done) << 1,
            ],
            &[],
        )
    }

    /// The leader starts a wave when due and passive. Returns whether it sent a token.
    fn detect_deadlock(&mut self) -> Result<bool, String> {
        if !self.peers.is_leader() || self.host.aborted() {
            return Ok(false);
        }
        let counts = self.counts();
        match self.term.start(Instant::now(), counts) {
            Some(token) if self.peers.successor() == self.net.me => {
                // Alone: the token is back at once.
                let step = self.term.on_token(true, token, counts);
                self.on_token_step(step)?;
                Ok(true)
            }
            Some(token) => {
                self.send_token(token)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn on_token_step(&mut self, step: TokenStep) -> Result<(), String> {
        match step {
            TokenStep::Forward(token) => self.send_token(token),
            TokenStep::Deadlock => {
                let others: Vec<c_int> = self.peers.others().collect();
                for p in others {
                    self.send_control(p, CONTROL_DEADLOCK, [0; 4], &[])?;
                }
                self.declare_deadlock();
                Ok(())
            }
            TokenStep::Nothing => Ok(()),
        }
    }

    fn declare_deadlock(&self) {
        self.host.report_deadlock(format!(
            "ranks of node {} only; every MPI process reports its own ranks",
            self.net.me
        ));
    }

    /// After the end of the job: all processes learn whether any of them failed, so that
    /// they all end with an error (or all combine their counters).
    pub(super) fn agree(&mut self) {
        let failed_here = self.host.failed();
        if let End::Done { agreed: Some(true) } = self.end {
            // Every survivor ended well (a failure recorded here since is this process's own
            // to report: the others do not take part in another collective).
            return;
        }
        let size = self.net.size;
        let mine: c_int = if failed_here { self.net.me } else { size };
        let mut first: c_int = size;
        // SAFETY: valid communicator; one int in and out.
        let code = unsafe {
            ffi::MPI_Allreduce(
                (&mine as *const c_int).cast::<std::ffi::c_void>(),
                (&mut first as *mut c_int).cast::<std::ffi::c_void>(),
                1,
                ffi::RSMPI_INT32_T,
                ffi::RSMPI_MIN,
                self.coll.comm,
            )
        };
        if code != 0 {
            if ulfm::is_process_failure(code) {
                // A process failed after everybody agreed on the end: the job is over
                // everywhere, only the failed node's name is unknown.
                super::PEER_LOST.store(true, std::sync::atomic::Ordering::Release);
                first = size;
            } else {
                self.host
                    .fail(Failure::Transport(mpi_error("MPI_Allreduce", code)), false);
                return;
            }
        }
        let some_failed = matches!(
            self.end,
            End::Done {
                agreed: Some(false)
            }
        ) || first < size;
        if some_failed && !failed_here {
            let (node, message) = match &self.remote_failure {
                Some((n, m)) => (*n, m.clone()),
                None => (
                    first.min(size - 1) as u32,
                    "failed (see that process's error output)".to_string(),
                ),
            };
            self.host.fail(Failure::Remote { node, message }, false);
        }
    }

    /// On the way out after a failure: ends every transfer that reads or writes memory of a
    /// rank (sends from borrowed buffers, receives into claimed ones), so that no rank's
    /// memory is touched by MPI after the rank was told it is free. Receives are cancelled;
    /// sends are given time to complete. If MPI holds on to a rank's memory regardless, the
    /// process cannot go on safely and aborts.
    pub(super) fn release_rank_memory(&mut self) {
        // Parked messages are received into the engine's buffers, so that their senders'
        // transfers can end.
        self.receives.unpark_all(&self.net);
        self.receives.cancel_claims(&|_| true);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut left = self.receives.release_claims(&self.net, &|_| true);
            let _ = self.sends.test(&self.net);
            left |= self.sends.reads_rank_memory();
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
}
