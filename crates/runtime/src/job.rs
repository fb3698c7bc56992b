//! The job as this process holds it: its nodes, the blocking protocol, and failure handling.
//!
//! Scheduling is in [`sched`](crate::sched) (its README is the design note), message routing
//! in [`route`](crate::route), deadlock reports in [`deadlock`](crate::deadlock).

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spillway_transport::{Layout, LinkModel};

use crate::config::Config;
use crate::error::{Error, JobError};
use crate::lost::LostProcesses;
use crate::mailbox::Mailbox;
use crate::memory::{NodeMem, SpillStore};
use crate::node::{Node, NodeTable, WaitQueue};
use crate::sched::{Activity, Describe, Released, Sched, WaitInfo, WaitKind, WaitOn};
use spillway_transport::lock;
use spillway_transport::Outbox;

/// Counters of one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RankStats {
    /// Messages sent (point-to-point, and collective traffic between nodes).
    pub messages_sent: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// How often the rank blocked and gave up its slot.
    pub blocks: u64,
    /// Time spent blocked or waiting for a slot.
    pub blocked: Duration,
}

/// Counters of a whole job.
#[derive(Debug, Clone, Default)]
pub struct JobStats {
    /// One entry per rank, in rank order.
    pub ranks: Vec<RankStats>,
    /// Wall-clock time of the job.
    pub elapsed: Duration,
    /// Storage-backed memory and message spilling, summed over nodes.
    pub memory: crate::MemoryStats,
    /// The per-node memory budget, if any.
    pub budget: Option<u64>,
    /// Peak resident set size (VmHWM) at the end of the job: of this process, or with the MPI
    /// backend the largest over the processes.
    pub peak_rss: Option<u64>,
    /// The ranks whose results this process returned: all of them with the local backend,
    /// the ranks of this process's node with the MPI backend.
    pub local_ranks: Range<u32>,
    /// Number of nodes of the job.
    pub nodes: u32,
    /// Nodes (MPI processes) lost while the job ran (MPI with ULFM), in increasing order.
    pub lost_nodes: Vec<u32>,
    /// The lowest rank still in the job at its end (0 unless its node was lost): the rank
    /// whose process reports for the job.
    pub lead_rank: u32,
}

impl JobStats {
    /// Messages sent by all ranks.
    pub fn messages_sent(&self) -> u64 {
        self.ranks.iter().map(|r| r.messages_sent).sum()
    }

    /// Payload bytes sent by all ranks.
    pub fn bytes_sent(&self) -> u64 {
        self.ranks.iter().map(|r| r.bytes_sent).sum()
    }
}

/// The part of a job that this process runs.
pub(crate) struct Part {
    /// Nodes held by this process.
    pub(crate) local_nodes: Range<u32>,
    /// The outbox to the progress thread, when other processes hold other nodes.
    pub(crate) remote: Option<Arc<Outbox>>,
    /// The measured cost of a message between nodes.
    pub(crate) link_model: Option<LinkModel>,
}

pub(crate) struct Job {
    pub(crate) layout: Layout,
    /// The nodes this process holds (all of them with the local backend).
    local_nodes: Range<u32>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) activity: Arc<Activity>,
    /// Set when other processes hold the other nodes.
    pub(crate) remote: Option<Arc<Outbox>>,
    pub(crate) link_model: Option<LinkModel>,
    /// The ranks of this process.
    local: Range<u32>,
    /// Ranks of this process that have finished.
    pub(crate) finished: AtomicUsize,
    /// The first local failure, to be announced to the other processes.
    announce: Mutex<Option<String>>,
    failure: Mutex<Option<JobError>>,
    /// Processes lost while the job runs (see [`crate::lost`]).
    pub(crate) losses: crate::lost::Losses,
    spin: Duration,
}

/// How long a rank that drives the MPI engine while it waits spins before it blocks.
const DRIVE_SPIN: Duration = Duration::from_millis(2);

impl Job {
    pub(crate) fn new(config: &Config, layout: Layout, spill: Arc<SpillStore>, part: Part) -> Job {
        let running = config.running_per_node();
        let local = layout.first_rank(part.local_nodes.start)
            ..layout.first_rank(part.local_nodes.end - 1)
                + layout.local_size(part.local_nodes.end - 1);
        let activity = Arc::new(Activity::new(local.len()));
        let local_count = local.len();
        let nodes = part
            .local_nodes
            .clone()
            .map(|n| {
                let size = layout.local_size(n) as usize;
                let mem = Arc::new(
                    NodeMem::new(
                        config.mem_budget,
                        config.policy,
                        Arc::clone(&spill),
                        size,
                        config.message_spill_threshold,
                    )
                    .ids(n, layout.first_rank(n)),
                );
                Node {
                    first: layout.first_rank(n),
                    sched: Sched::new(
                        size,
                        running,
                        config.resume,
                        config.dynamic_running,
                        Arc::clone(&mem),
                        Arc::clone(&activity),
                    )
                    .ids(n, layout.first_rank(n)),
                    mailboxes: (0..size).map(|_| Mutex::new(Mailbox::default())).collect(),
                    mail_seq: (0..size).map(|_| Default::default()).collect(),
                    mem,
                    table: NodeTable::default(),
                    block_hooks: (0..size).map(|_| Mutex::new(None)).collect(),
                }
            })
            .collect();
        Job {
            activity,
            local,
            layout,
            local_nodes: part.local_nodes,
            nodes,
            remote: part.remote,
            link_model: config.link_model.or(part.link_model),
            finished: AtomicUsize::new(0),
            announce: Mutex::new(None),
            failure: Mutex::new(None),
            losses: crate::lost::Losses::new(local_count),
            spin: config.spin,
        }
    }

    pub(crate) fn aborted(&self) -> bool {
        self.activity.aborted()
    }

    /// The node of `rank`, which must be held by this process, and the rank's local index.
    pub(crate) fn node_of(&self, rank: u32) -> (&Node, usize) {
        let n = self.layout.node_of(rank);
        let node = &self.nodes[(n - self.local_nodes.start) as usize];
        (node, (rank - node.first) as usize)
    }

    pub(crate) fn node_mem(&self, rank: u32) -> (&Arc<NodeMem>, usize) {
        let (node, local) = self.node_of(rank);
        (&node.mem, local)
    }

    /// Whether `rank` runs in this process.
    pub(crate) fn is_local(&self, rank: u32) -> bool {
        self.local_nodes.contains(&self.layout.node_of(rank))
    }

    /// The ranks of this process.
    pub(crate) fn local_ranks(&self) -> Range<u32> {
        self.local.clone()
    }

    /// Whether every rank of this process has finished.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn local_done(&self) -> bool {
        self.finished.load(Ordering::Acquire) == self.local.len()
    }

    /// Whether no rank of this process is running or runnable.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn passive(&self) -> bool {
        self.activity.active() == 0
    }

    /// The rank's function has returned.
    pub(crate) fn finish(&self, rank: u32) {
        let (node, local) = self.node_of(rank);
        lock(&node.mailboxes[local]).clear_waiting();
        let last_active = node.sched.finish(local);
        self.finished.fetch_add(1, Ordering::AcqRel);
        if last_active {
            self.check_deadlock();
        }
        if let Some(remote) = &self.remote {
            remote.notify();
        }
    }

    /// Gives up the slot of `local` after it registered a wait (see the scheduler's README),
    /// releases its memory as the policy says, and parks until it is resumed. Returns at once
    /// if a wake-up arrived in between; the caller re-checks its condition either way.
    pub(crate) fn block(&self, node: &Node, local: usize, info: WaitInfo) -> Result<(), Error> {
        if self.aborted() {
            return Err(Error::Aborted);
        }
        if let Some(e) = self.loss_unacknowledged(node.first + local as u32) {
            return Err(e);
        }
        match node.sched.release(local, info) {
            Released::Notified => Ok(()),
            Released::Blocked { last_active } => {
                // Release memory (ARAW) before the worker moves on to another rank.
                node.mem.on_block(local);
                if let Some(hook) = lock(&node.block_hooks[local]).as_mut() {
                    hook();
                }
                if let Some(e) = node.mem.take_error() {
                    self.fail(JobError::Storage(e));
                }
                if last_active {
                    // A loss the ranks were not told of yet is told now that none runs.
                    self.arm_loss();
                    self.check_deadlock();
                }
                node.sched.suspend(local)
            }
        }
    }

    /// Spins on `poll` for a short while, if no rank waits for the worker of `local` (which
    /// would make better use of it). Returns whether `poll` succeeded.
    pub(crate) fn spin(&self, node: &Node, local: usize, poll: &mut dyn FnMut() -> bool) -> bool {
        if self.spin.is_zero() || node.sched.has_queued_for(local) {
            return false;
        }
        // With other processes, what a rank waits for may have to come through the engine.
        // If ranks may drive it, a spinning rank makes the progress itself; if not, spinning
        // would only keep the progress thread from the core (e.g. when MPI binds the process
        // to one core), so the rank blocks at once.
        let remote = self.remote.as_deref();
        if remote.is_some_and(|r| !r.drivable()) {
            return false;
        }
        let _driving = remote.map(|r| r.start_driving());
        // A rank that drives the engine polls the network for its process: it may go on
        // longer (the progress thread sleeps meanwhile), as long as no rank waits for its slot.
        let limit = if remote.is_some() {
            self.spin.max(DRIVE_SPIN)
        } else {
            self.spin
        };
        // Between two rounds of the engine a driving rank only looks once: a message from
        // another process is seen only when the engine runs, and 32 pause instructions take
        // about as long as a message between two processes of a node.
        let polls = if remote.is_some() { 1 } else { 32 };
        let start = Instant::now();
        loop {
            for _ in 0..polls {
                if poll() {
                    return true;
                }
                std::hint::spin_loop();
            }
            if let Some(r) = remote {
                if r.drive() && poll() {
                    return true;
                }
            }
            if self.aborted() || node.sched.has_queued_for(local) || start.elapsed() > limit {
                return false;
            }
        }
    }

    /// Blocks `rank` until `poll` returns true; see [`Rank::wait_until`](crate::Rank).
    pub(crate) fn wait_until(
        &self,
        rank: u32,
        queue: &WaitQueue,
        kind: WaitKind,
        describe: Option<&Arc<dyn Describe>>,
        poll: &mut dyn FnMut() -> bool,
    ) -> Result<(), Error> {
        let (node, local) = self.node_of(rank);
        loop {
            if let Some(e) = self.loss_unacknowledged(rank) {
                return Err(e);
            }
            if poll() {
                return Ok(());
            }
            if self.aborted() {
                return Err(Error::Aborted);
            }
            if self.spin(node, local, poll) {
                return Ok(());
            }
            queue.register(local as u32);
            if poll() {
                return Ok(());
            }
            let info = WaitInfo {
                kind,
                on: WaitOn::Node(describe.cloned()),
            };
            self.block(node, local, info)?;
        }
    }

    /// Wakes every rank waiting on `queue` (ranks of the node of `rank`).
    pub(crate) fn wake_all(&self, rank: u32, queue: &WaitQueue) {
        let (node, _) = self.node_of(rank);
        let waiting = queue.take();
        if !waiting.is_empty() {
            node.sched.wake_many(&waiting);
        }
    }

    pub(crate) fn enter_critical(&self, rank: u32) -> Result<(), Error> {
        let (node, local) = self.node_of(rank);
        loop {
            if self.aborted() {
                return Err(Error::Aborted);
            }
            if let Some(e) = self.loss_unacknowledged(rank) {
                return Err(e);
            }
            if node.sched.try_enter_critical(local) {
                return Ok(());
            }
            let info = WaitInfo {
                kind: WaitKind::Critical,
                on: WaitOn::Critical,
            };
            self.block(node, local, info)?;
        }
    }

    pub(crate) fn exit_critical(&self, rank: u32) {
        let (node, local) = self.node_of(rank);
        node.sched.exit_critical(local);
    }

    /// Records the first failure and wakes every rank so blocking calls return `Aborted`.
    pub(crate) fn fail(&self, error: JobError) {
        self.fail_with(error, true)
    }

    /// Like [`fail`](Self::fail); `announce` says whether the other processes must be told
    /// (not when the failure came from one of them).
    pub(crate) fn fail_with(&self, error: JobError, announce: bool) {
        {
            let mut f = lock(&self.failure);
            if f.is_none() && !self.aborted() {
                if announce && self.remote.is_some() {
                    *lock(&self.announce) = Some(error.to_string());
                }
                *f = Some(error);
            }
        }
        self.abort_all();
    }

    pub(crate) fn abort_all(&self) {
        self.activity.set_abort();
        if let Some(remote) = &self.remote {
            remote.notify();
        }
        for node in &self.nodes {
            node.sched.abort();
        }
    }

    /// Records `error` as the failure unless one is recorded (used by deadlock reports).
    pub(crate) fn set_failure(&self, error: JobError) -> bool {
        let mut f = lock(&self.failure);
        if f.is_some() || self.aborted() {
            return false;
        }
        *f = Some(error);
        true
    }

    /// The first local failure not yet announced to the other processes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn take_announcement(&self) -> Option<String> {
        lock(&self.announce).take()
    }

    /// Records spill-storage errors of this process's nodes as the job's failure; whether
    /// there was one.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn storage_failed(&self) -> bool {
        let mut failed = false;
        for node in &self.nodes {
            if let Some(e) = node.mem.take_error() {
                self.fail_with(JobError::Storage(e), false);
                failed = true;
            }
        }
        failed
    }

    /// Whether this process recorded a failure.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn has_failure(&self) -> bool {
        lock(&self.failure).is_some()
    }

    pub(crate) fn take_failure(&self) -> Option<JobError> {
        lock(&self.failure).take()
    }
}

/// The job as the MPI engine sees it (the narrow interface between engine and runtime).
#[cfg(feature = "mpi")]
impl spillway_transport::Host for Job {
    fn is_local(&self, rank: u32) -> bool {
        Job::is_local(self, rank)
    }

    fn deliver(&self, dest: u32, env: spillway_transport::Envelope) -> Result<(), String> {
        let msg = self.to_msg(dest, env).map_err(|e| e.to_string())?;
        Job::deliver(self, dest, msg);
        Ok(())
    }

    fn claim(&self, msg: spillway_transport::Announced) -> Option<spillway_transport::Claim> {
        if !Job::is_local(self, msg.dest) {
            return None;
        }
        let (id, ptr) = Job::claim(self, msg.dest, (msg.context, msg.source, msg.tag), msg.len)?;
        Some(spillway_transport::Claim {
            dest: msg.dest,
            id,
            ptr,
        })
    }

    fn expects(&self, msg: spillway_transport::Announced) -> spillway_transport::Expect {
        if !Job::is_local(self, msg.dest) {
            return spillway_transport::Expect::Mailbox;
        }
        Job::expects(self, msg.dest, (msg.context, msg.source, msg.tag), msg.len)
    }

    fn complete_claim(&self, claim: spillway_transport::Claim, ok: bool) {
        Job::complete_claim(self, claim.dest, claim.id, claim.ptr, ok)
    }

    fn fail(&self, failure: spillway_transport::Failure, announce: bool) {
        let error = match failure {
            spillway_transport::Failure::Remote { node, message } => {
                JobError::Remote { node, message }
            }
            spillway_transport::Failure::Transport(why) => JobError::Transport(why),
            other => JobError::Transport(format!("{other:?}")),
        };
        self.fail_with(error, announce)
    }

    fn lost(&self, lost: spillway_transport::Lost) {
        self.on_lost(lost.epoch, lost.all)
    }

    fn aborted(&self) -> bool {
        Job::aborted(self)
    }

    fn passive(&self) -> bool {
        Job::passive(self)
    }

    fn local_done(&self) -> bool {
        Job::local_done(self)
    }

    fn take_announcement(&self) -> Option<String> {
        Job::take_announcement(self)
    }

    fn failed(&self) -> bool {
        let storage = self.storage_failed();
        self.has_failure() || storage
    }

    fn report_deadlock(&self, note: String) {
        Job::report_deadlock(self, Some(note))
    }
}

/// Processes lost while the job runs (see [`crate::lost`]).
impl Job {
    /// The engine reports lost processes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn on_lost(&self, epoch: u32, all_nodes: Vec<u32>) {
        let mut ranks = Vec::new();
        for &n in &all_nodes {
            let first = self.layout.first_rank(n);
            ranks.extend(first..first + self.layout.local_size(n));
        }
        lock(&self.losses.state).latest = Some(LostProcesses {
            epoch,
            nodes: all_nodes,
            ranks,
        });
        self.arm_loss();
    }

    /// Arms the latest loss if no rank of this process runs: wakes every rank, whose
    /// blocking calls then fail until it acknowledges.
    pub(crate) fn arm_loss(&self) {
        let Some(epoch) = lock(&self.losses.state).latest.as_ref().map(|l| l.epoch) else {
            return;
        };
        if self.losses.armed.load(Ordering::Acquire) >= epoch {
            return;
        }
        for node in &self.nodes {
            // Under the scheduler's lock: no rank can start running in between.
            node.sched.wake_all_if(|| {
                if self.activity.active() != 0 {
                    return false;
                }
                self.losses.armed.fetch_max(epoch, Ordering::AcqRel);
                true
            });
        }
    }

    /// The error for a blocking call of `rank`, if a loss it has not acknowledged is armed.
    pub(crate) fn loss_unacknowledged(&self, rank: u32) -> Option<Error> {
        let armed = self.losses.armed.load(Ordering::Acquire);
        if armed == 0 {
            return None;
        }
        let local = (rank - self.local_ranks().start) as usize;
        if self.losses.acked[local].load(Ordering::Acquire) >= armed {
            return None;
        }
        self.lost_processes().map(Error::ProcessLost)
    }

    /// `rank` acknowledges the armed loss: its blocking calls work again. Returns the lost
    /// processes so far.
    pub(crate) fn acknowledge_loss(&self, rank: u32) -> Option<LostProcesses> {
        let armed = self.losses.armed.load(Ordering::Acquire);
        let local = (rank - self.local_ranks().start) as usize;
        self.losses.acked[local].fetch_max(armed, Ordering::AcqRel);
        self.lost_processes()
    }

    /// The lost processes the ranks were told of (the armed loss).
    pub(crate) fn lost_processes(&self) -> Option<LostProcesses> {
        let armed = self.losses.armed.load(Ordering::Acquire);
        if armed == 0 {
            return None;
        }
        lock(&self.losses.state)
            .latest
            .clone()
            .filter(|l| l.epoch >= armed)
    }
}
