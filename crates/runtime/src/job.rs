//! The job: nodes, their schedulers, failure handling and deadlock detection.
//!
//! # Scheduling (BDMPI node-level cooperative multitasking)
//!
//! Each node has `running` slots. A rank executes only while it holds a slot. When it blocks it
//! gives its slot to the next runnable rank of its node (or returns it to the pool); when the
//! condition it waits for is met — by the rank that delivers the message or passes the critical
//! section — it becomes runnable and takes a free slot at once or queues for one.
//!
//! # Deadlock detection
//!
//! `active` counts ranks that are running or runnable. It is changed only under the lock of the
//! node of the rank concerned, and a wake-up increments it *before* the waker can block. So when
//! a block makes it zero, every unfinished rank is blocked; the detector then takes every node's
//! lock, confirms the count is still zero and reports what each rank waits for. With the local
//! backend every send is delivered before `send` returns, so nothing can be in flight.
//!
//! When the job spans processes (MPI backend) this process holds only some nodes; messages
//! for the others go through the outbox of [`Remote`] to the progress thread, and a deadlock
//! is decided by the progress threads together (see the `mpi` module), because a blocked
//! rank here may be woken by a message still in flight from another process.

use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use spillway_transport::{Envelope, Layout, LinkModel};

use crate::config::{Config, ResumePolicy};
use crate::error::{DeadlockReport, Error, JobError, WaitState};
use crate::mailbox::{Body, Delivered, Mailbox, Msg, Pattern, RecvId};
use crate::memory::{spill_file, MemoryStats, NodeMem, SpillDir};
use crate::net::{Outgoing, Remote};
use crate::rank::{Rank, WaitKind};

/// Counters of one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RankStats {
    /// Messages sent (point-to-point and inside collectives).
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
    pub memory: MemoryStats,
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

#[derive(Debug, Clone, Copy)]
pub(crate) enum WaitOn {
    Recv(RecvId),
    Probe(Pattern),
    /// Every pattern in the slot's `waiting_for` list has a queued message.
    AllPresent,
    /// Some pattern in the slot's `waiting_for` list has a queued message.
    AnyPresent,
    Critical,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Status {
    Runnable,
    Running,
    Blocked(WaitKind, WaitOn),
    Finished,
}

pub(crate) struct Slot {
    pub(crate) status: Status,
    pub(crate) mailbox: Mailbox,
    waiting_for: Vec<Pattern>,
}

pub(crate) struct NodeState {
    free: u32,
    /// Slots of the node (`running`); with dynamic running only the first is unconditional.
    slots: u32,
    ready: VecDeque<u32>,
    pub(crate) ranks: Vec<Slot>,
    critical_owner: Option<u32>,
    critical_queue: VecDeque<u32>,
}

pub(crate) struct Node {
    first: u32,
    pub(crate) state: Mutex<NodeState>,
    cv: Vec<Condvar>,
    pub(crate) mem: Arc<NodeMem>,
}

pub(crate) struct Job {
    pub(crate) layout: Layout,
    /// The nodes this process holds (all of them with the local backend).
    local_nodes: Range<u32>,
    nodes: Vec<Node>,
    /// Set when other processes hold the other nodes.
    pub(crate) remote: Option<Arc<Remote>>,
    pub(crate) link_model: Option<LinkModel>,
    /// The ranks of this process.
    local: Range<u32>,
    /// Ranks of this process that have finished.
    finished: AtomicUsize,
    /// The first local failure, to be announced to the other processes.
    announce: Mutex<Option<String>>,
    abort: AtomicBool,
    failure: Mutex<Option<JobError>>,
    active: AtomicUsize,
    resume: ResumePolicy,
    pub(crate) message_spill_threshold: usize,
    dynamic: bool,
}

fn lock(m: &Mutex<NodeState>) -> MutexGuard<'_, NodeState> {
    // A poisoned node lock means a rank panicked while holding it; the state itself is only
    // changed by short, non-panicking sections, so it is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Job {
    fn new(config: &Config, layout: Layout, spill: Arc<SpillDir>, part: Part) -> Job {
        let running = config.running_per_node();
        let nodes = part
            .local_nodes
            .clone()
            .map(|n| {
                let size = layout.local_size(n);
                Node {
                    first: layout.first_rank(n),
                    state: Mutex::new(NodeState {
                        free: running.min(size),
                        slots: running.min(size),
                        ready: VecDeque::new(),
                        ranks: (0..size)
                            .map(|_| Slot {
                                status: Status::Runnable,
                                mailbox: Mailbox::default(),
                                waiting_for: Vec::new(),
                            })
                            .collect(),
                        critical_owner: None,
                        critical_queue: VecDeque::new(),
                    }),
                    cv: (0..size).map(|_| Condvar::new()).collect(),
                    mem: Arc::new(NodeMem::new(
                        config.mem_budget,
                        config.policy,
                        Arc::clone(&spill),
                        size as usize,
                    )),
                }
            })
            .collect();
        let local_ranks = layout.first_rank(part.local_nodes.start)
            ..layout.first_rank(part.local_nodes.end - 1)
                + layout.local_size(part.local_nodes.end - 1);
        Job {
            active: AtomicUsize::new(local_ranks.len()),
            local: local_ranks,
            layout,
            local_nodes: part.local_nodes,
            nodes,
            remote: part.remote,
            link_model: config.link_model.or(part.link_model),
            finished: AtomicUsize::new(0),
            announce: Mutex::new(None),
            abort: AtomicBool::new(false),
            failure: Mutex::new(None),
            resume: config.resume,
            message_spill_threshold: config.message_spill_threshold,
            dynamic: config.dynamic_running,
        }
    }

    /// Whether rank `local` may take a free slot now: always when no rank of the node runs;
    /// with dynamic running, another rank only if the budget has room for its data.
    fn may_start(&self, node: &Node, st: &NodeState, local: usize) -> bool {
        if st.free == 0 {
            return false;
        }
        if !self.dynamic || st.free == st.slots {
            return true;
        }
        let running = st
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r.status, Status::Running))
            .map(|(i, _)| i);
        node.mem.has_room_for(local, running)
    }

    pub(crate) fn node_mem(&self, rank: u32) -> (&Arc<NodeMem>, usize) {
        let (node, local) = self.node_of(rank);
        (&node.mem, local)
    }

    /// Takes a completed message out of the node's accounting.
    pub(crate) fn received(&self, rank: u32, msg: &Msg) {
        if let Body::Mem(_) = msg.body {
            let (node, _) = self.node_of(rank);
            node.mem
                .message_bytes
                .fetch_sub(msg.len as u64, Ordering::Relaxed);
        }
    }

    pub(crate) fn aborted(&self) -> bool {
        self.abort.load(Ordering::Acquire)
    }

    /// The node of `rank`, which must be held by this process, and the rank's local index.
    fn node_of(&self, rank: u32) -> (&Node, usize) {
        let n = self.layout.node_of(rank);
        let node = &self.nodes[(n - self.local_nodes.start) as usize];
        (node, (rank - node.first) as usize)
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
        self.active.load(Ordering::Acquire) == 0
    }

    /// Sends `env` to rank `dest`: into its mailbox if it is held here, else through the
    /// outbox to the progress thread.
    pub(crate) fn send(&self, dest: u32, env: Envelope) -> Result<(), Error> {
        if self.is_local(dest) {
            let msg = self.to_msg(dest, env)?;
            self.deliver(dest, msg);
            return Ok(());
        }
        let remote = self.remote.as_ref().expect("a job without remote nodes");
        remote.push(Outgoing {
            dest,
            context: env.context,
            source: env.source,
            tag: env.tag,
            payload: env.payload,
        });
        Ok(())
    }

    /// A message for local rank `dest`: in memory, or in a spill file of `dest`'s node when it
    /// is large and the node's message memory is full (BDMPI: large buffered messages live on
    /// the destination node's disk).
    pub(crate) fn to_msg(&self, dest: u32, env: Envelope) -> Result<Msg, Error> {
        let (mem, _) = self.node_mem(dest);
        let bytes = env.payload.len() as u64;
        let spill = env.payload.len() >= self.message_spill_threshold
            && mem
                .message_room()
                .is_some_and(|room| mem.message_bytes.load(Ordering::Relaxed) + bytes > room);
        if !spill {
            return Ok(Msg::in_memory(env));
        }
        use std::os::unix::fs::FileExt;
        let file = spill_file(mem.dir(), "msg")?;
        file.write_all_at(env.payload.as_bytes(), 0).map_err(|e| {
            Error::Io(std::io::Error::new(
                e.kind(),
                format!("spill directory {}: {e}", mem.dir().display()),
            ))
        })?;
        mem.count_spilled_message(bytes);
        Ok(Msg {
            context: env.context,
            source: env.source,
            tag: env.tag,
            len: env.payload.len(),
            body: Body::Disk(file),
        })
    }

    /// Makes a blocked rank runnable; gives it a slot if one is free.
    fn wake(&self, node: &Node, st: &mut NodeState, local: usize) {
        self.active.fetch_add(1, Ordering::AcqRel);
        if self.may_start(node, st, local) {
            st.free -= 1;
            st.ranks[local].status = Status::Running;
            node.cv[local].notify_one();
        } else {
            st.ranks[local].status = Status::Runnable;
            st.ready.push_back(local as u32);
        }
    }

    fn pick_ready(&self, node: &Node, st: &mut NodeState) -> Option<u32> {
        match self.resume {
            ResumePolicy::Fifo => st.ready.pop_front(),
            ResumePolicy::MostResident => {
                let best = st
                    .ready
                    .iter()
                    .enumerate()
                    .max_by_key(|&(i, &r)| (node.mem.resident_of(r as usize), std::cmp::Reverse(i)))
                    .map(|(i, _)| i)?;
                st.ready.remove(best)
            }
        }
    }

    /// Passes a slot given up by a rank to the next runnable one.
    fn release_slot(&self, node: &Node, st: &mut NodeState) {
        st.free += 1;
        while st.free > 0 && !st.ready.is_empty() {
            let Some(next) = self.pick_ready(node, st) else {
                break;
            };
            if !self.may_start(node, st, next as usize) {
                st.ready.push_front(next);
                break;
            }
            st.free -= 1;
            st.ranks[next as usize].status = Status::Running;
            node.cv[next as usize].notify_one();
        }
    }

    /// Blocks `local` until it is running again; the caller has checked that its condition is
    /// not met and holds the node lock.
    fn block<'a>(
        &self,
        node: &'a Node,
        mut st: MutexGuard<'a, NodeState>,
        local: usize,
        kind: WaitKind,
        on: WaitOn,
    ) -> Result<MutexGuard<'a, NodeState>, Error> {
        st.ranks[local].status = Status::Blocked(kind, on);
        node.mem.mark_blocked(local);
        self.release_slot(node, &mut st);
        let last_active = self.active.fetch_sub(1, Ordering::AcqRel) == 1;
        drop(st);
        // The slot is given away; release memory (ARAW) outside the node lock, while another
        // rank runs.
        node.mem.on_block(local);
        if let Some(e) = node.mem.take_error() {
            self.fail(JobError::Storage(e));
        }
        if last_active {
            self.check_deadlock();
        }
        let st = self.wait_running(node, lock(&node.state), local)?;
        node.mem.on_resume(local);
        Ok(st)
    }

    fn wait_running<'a>(
        &self,
        node: &'a Node,
        mut st: MutexGuard<'a, NodeState>,
        local: usize,
    ) -> Result<MutexGuard<'a, NodeState>, Error> {
        loop {
            if self.aborted() {
                return Err(Error::Aborted);
            }
            if matches!(st.ranks[local].status, Status::Running) {
                return Ok(st);
            }
            st = node.cv[local].wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// First scheduling of a rank.
    fn start(&self, rank: u32) -> Result<(), Error> {
        let (node, local) = self.node_of(rank);
        let mut st = lock(&node.state);
        if self.may_start(node, &st, local) {
            st.free -= 1;
            st.ranks[local].status = Status::Running;
            return Ok(());
        }
        st.ranks[local].status = Status::Runnable;
        st.ready.push_back(local as u32);
        self.wait_running(node, st, local).map(drop)
    }

    fn finish(&self, rank: u32) {
        let (node, local) = self.node_of(rank);
        let mut st = lock(&node.state);
        match st.ranks[local].status {
            Status::Running => self.release_slot(node, &mut st),
            Status::Runnable => st.ready.retain(|&r| r as usize != local),
            _ => {}
        }
        let was_active = !matches!(st.ranks[local].status, Status::Blocked(..));
        st.ranks[local].status = Status::Finished;
        if st.critical_owner == Some(local as u32) {
            self.pass_critical(node, &mut st);
        }
        self.finished.fetch_add(1, Ordering::AcqRel);
        if was_active && self.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            drop(st);
            self.check_deadlock();
        }
        if let Some(remote) = &self.remote {
            remote.notify();
        }
    }

    /// Delivers a message to its destination's mailbox and wakes the destination if it waits
    /// for it.
    pub(crate) fn deliver(&self, dest: u32, msg: Msg) {
        let (node, local) = self.node_of(dest);
        if let Body::Mem(_) = msg.body {
            node.mem
                .message_bytes
                .fetch_add(msg.len as u64, Ordering::Relaxed);
        }
        let mut st = lock(&node.state);
        let delivered = st.ranks[local].mailbox.deliver(msg);
        let wake = match (st.ranks[local].status, delivered) {
            (Status::Blocked(_, WaitOn::Recv(w)), Delivered::Matched(id)) => w == id,
            (Status::Blocked(_, WaitOn::Probe(p)), Delivered::Queued(info, context)) => {
                p.context == context
                    && p.source.is_none_or(|s| s == info.source)
                    && p.tag.is_none_or(|t| t == info.tag)
            }
            (Status::Blocked(_, WaitOn::AllPresent), Delivered::Queued(..)) => {
                let slot = &st.ranks[local];
                slot.mailbox.all_present(&slot.waiting_for)
            }
            (Status::Blocked(_, WaitOn::AnyPresent), Delivered::Queued(..)) => {
                let slot = &st.ranks[local];
                slot.mailbox.any_present(&slot.waiting_for).is_some()
            }
            _ => false,
        };
        if wake {
            self.wake(node, &mut st, local);
        }
    }

    pub(crate) fn post_recv(&self, rank: u32, pattern: Pattern) -> RecvId {
        let (node, local) = self.node_of(rank);
        lock(&node.state).ranks[local].mailbox.post(pattern)
    }

    pub(crate) fn test_recv(&self, rank: u32, id: RecvId) -> Option<Msg> {
        let (node, local) = self.node_of(rank);
        lock(&node.state).ranks[local].mailbox.take(id)
    }

    pub(crate) fn cancel_recv(&self, rank: u32, id: RecvId) {
        let (node, local) = self.node_of(rank);
        lock(&node.state).ranks[local].mailbox.cancel(id)
    }

    pub(crate) fn wait_recv(&self, rank: u32, id: RecvId, kind: WaitKind) -> Result<Msg, Error> {
        let (node, local) = self.node_of(rank);
        let mut st = lock(&node.state);
        loop {
            if let Some(env) = st.ranks[local].mailbox.take(id) {
                return Ok(env);
            }
            if self.aborted() {
                return Err(Error::Aborted);
            }
            st = self.block(node, st, local, kind, WaitOn::Recv(id))?;
        }
    }

    pub(crate) fn iprobe(&self, rank: u32, pattern: &Pattern) -> Option<crate::MessageInfo> {
        let (node, local) = self.node_of(rank);
        lock(&node.state).ranks[local].mailbox.probe(pattern)
    }

    pub(crate) fn probe(
        &self,
        rank: u32,
        pattern: Pattern,
        kind: WaitKind,
    ) -> Result<crate::MessageInfo, Error> {
        let (node, local) = self.node_of(rank);
        let mut st = lock(&node.state);
        loop {
            if let Some(info) = st.ranks[local].mailbox.probe(&pattern) {
                return Ok(info);
            }
            if self.aborted() {
                return Err(Error::Aborted);
            }
            st = self.block(node, st, local, kind, WaitOn::Probe(pattern))?;
        }
    }

    pub(crate) fn wait_present(
        &self,
        rank: u32,
        patterns: &[Pattern],
        kind: WaitKind,
    ) -> Result<(), Error> {
        let (node, local) = self.node_of(rank);
        let mut st = lock(&node.state);
        loop {
            if st.ranks[local].mailbox.all_present(patterns) {
                st.ranks[local].waiting_for.clear();
                return Ok(());
            }
            if self.aborted() {
                return Err(Error::Aborted);
            }
            st.ranks[local].waiting_for = patterns.to_vec();
            st = self.block(node, st, local, kind, WaitOn::AllPresent)?;
        }
    }

    pub(crate) fn wait_any(
        &self,
        rank: u32,
        patterns: &[Pattern],
        kind: WaitKind,
    ) -> Result<usize, Error> {
        let (node, local) = self.node_of(rank);
        let mut st = lock(&node.state);
        loop {
            if let Some(i) = st.ranks[local].mailbox.any_present(patterns) {
                st.ranks[local].waiting_for.clear();
                return Ok(i);
            }
            if self.aborted() {
                return Err(Error::Aborted);
            }
            st.ranks[local].waiting_for = patterns.to_vec();
            st = self.block(node, st, local, kind, WaitOn::AnyPresent)?;
        }
    }

    pub(crate) fn enter_critical(&self, rank: u32) -> Result<(), Error> {
        let (node, local) = self.node_of(rank);
        let mut st = lock(&node.state);
        if self.aborted() {
            return Err(Error::Aborted);
        }
        if st.critical_owner.is_none() {
            st.critical_owner = Some(local as u32);
            return Ok(());
        }
        st.critical_queue.push_back(local as u32);
        let st = self.block(node, st, local, WaitKind::Critical, WaitOn::Critical)?;
        debug_assert_eq!(st.critical_owner, Some(local as u32));
        Ok(())
    }

    pub(crate) fn exit_critical(&self, rank: u32) {
        let (node, local) = self.node_of(rank);
        let mut st = lock(&node.state);
        if st.critical_owner == Some(local as u32) {
            self.pass_critical(node, &mut st);
        }
    }

    fn pass_critical(&self, node: &Node, st: &mut NodeState) {
        match st.critical_queue.pop_front() {
            Some(next) => {
                st.critical_owner = Some(next);
                self.wake(node, st, next as usize);
            }
            None => st.critical_owner = None,
        }
    }

    /// Records the first failure and wakes every rank so blocking calls return `Aborted`.
    pub(crate) fn fail(&self, error: JobError) {
        self.fail_with(error, true)
    }

    /// Like [`fail`](Self::fail); `announce` says whether the other processes must be told
    /// (not when the failure came from one of them).
    pub(crate) fn fail_with(&self, error: JobError, announce: bool) {
        {
            let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
            if f.is_none() && !self.aborted() {
                if announce && self.remote.is_some() {
                    *self.announce.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(error.to_string());
                }
                *f = Some(error);
            }
        }
        self.abort.store(true, Ordering::Release);
        if let Some(remote) = &self.remote {
            remote.notify();
        }
        for node in &self.nodes {
            let _st = lock(&node.state);
            for cv in &node.cv {
                cv.notify_all();
            }
        }
    }

    /// The first local failure not yet announced to the other processes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn take_announcement(&self) -> Option<String> {
        self.announce
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
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
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn check_deadlock(&self) {
        if let Some(remote) = &self.remote {
            // Other processes may still send a message that wakes a rank: the progress
            // threads decide together.
            remote.notify();
            return;
        }
        self.report_deadlock(None);
    }

    /// Ends the job with a deadlock report of this process's ranks, once every rank here is
    /// blocked or finished; `note` says that other processes report their own ranks.
    pub(crate) fn report_deadlock(&self, note: Option<String>) {
        let guards: Vec<_> = self.nodes.iter().map(|n| lock(&n.state)).collect();
        if self.aborted() || self.active.load(Ordering::Acquire) != 0 {
            return;
        }
        let mut ranks = Vec::new();
        let mut blocked = 0;
        for (n, st) in guards.iter().enumerate() {
            let first = self.nodes[n].first;
            for (l, slot) in st.ranks.iter().enumerate() {
                let n = n as u32 + self.local_nodes.start;
                let waiting_for = match slot.status {
                    Status::Finished => "finished".to_string(),
                    Status::Blocked(kind, on) => {
                        blocked += 1;
                        self.describe(kind, on, &slot.mailbox)
                    }
                    Status::Running | Status::Runnable => return,
                };
                ranks.push(WaitState {
                    rank: first + l as u32,
                    node: n,
                    waiting_for,
                });
            }
        }
        if blocked == 0 && note.is_none() {
            return;
        }
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(JobError::Deadlock(DeadlockReport { ranks, note }));
        self.abort.store(true, Ordering::Release);
        for node in &self.nodes {
            for cv in &node.cv {
                cv.notify_all();
            }
        }
        drop(guards);
    }

    fn describe(&self, kind: WaitKind, on: WaitOn, mailbox: &Mailbox) -> String {
        let (queued, _) = mailbox.pending();
        let what = match on {
            WaitOn::Recv(id) => match mailbox.pattern_of(id) {
                Some(p) => format!("a message {}", describe_pattern(&p)),
                None => "a message".to_string(),
            },
            WaitOn::Probe(p) => format!("a message {} (probe)", describe_pattern(&p)),
            WaitOn::AllPresent => "messages from several ranks".to_string(),
            WaitOn::AnyPresent => "a message from one of several ranks".to_string(),
            WaitOn::Critical => "the node's critical section".to_string(),
        };
        let label = match kind {
            WaitKind::Recv => "receive".to_string(),
            WaitKind::Probe => "probe".to_string(),
            WaitKind::Wait => "wait".to_string(),
            WaitKind::Collective(name) => format!("collective {name}"),
            WaitKind::Critical => "enter_critical".to_string(),
        };
        format!("blocked in {label}, waiting for {what}; {queued} unmatched message(s) queued")
    }

    fn take_failure(&self) -> Option<JobError> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

fn describe_pattern(p: &Pattern) -> String {
    let source = match p.source {
        Some(s) => format!("from rank {s}"),
        None => "from any rank".to_string(),
    };
    let tag = match p.tag {
        Some(t) => format!("tag {t}"),
        None => "any tag".to_string(),
    };
    format!("{source} with {tag} in context {:#x}", p.context)
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Runs `f` on every rank and returns each rank's result in rank order.
///
/// # Semantics
/// `f` runs once per rank, on the rank's own thread, with at most `running` ranks of a node
/// executing at once. The job ends when every rank has returned.
///
/// # Errors
/// The first rank to return an error or to panic ends the job: the other ranks' blocking calls
/// return [`Error::Aborted`] and the job returns [`JobError::RankFailed`] or
/// [`JobError::RankPanicked`] with that rank's id. A deadlock returns [`JobError::Deadlock`].
/// A rank that computes forever without calling the runtime cannot be interrupted.
pub fn run<R, E, F>(config: &Config, f: F) -> Result<Vec<R>, JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    run_with_stats(config, f).map(|(r, _)| r)
}

/// [`run`], also returning the job's counters.
///
/// With [`Backend::Mpi`](crate::Backend::Mpi) this process runs only the ranks of its node
/// (the node is its MPI rank) and returns their results, in rank order; see
/// [`JobStats::local_ranks`].
pub fn run_with_stats<R, E, F>(config: &Config, f: F) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match config.backend {
        spillway_transport::Backend::Local => {
            let layout = config.layout()?;
            let part = Part {
                local_nodes: 0..layout.nodes(),
                remote: None,
                link_model: None,
            };
            execute(config, layout, part, f, |_| {})
        }
        spillway_transport::Backend::Mpi => run_mpi(config, f),
        #[allow(unreachable_patterns)]
        other => Err(JobError::Config(format!(
            "backend '{}' is not supported",
            other.name()
        ))),
    }
}

#[cfg(feature = "mpi")]
fn run_mpi<R, E, F>(config: &Config, f: F) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    crate::mpi::run_world(config, f)
}

#[cfg(not(feature = "mpi"))]
fn run_mpi<R, E, F>(_config: &Config, _f: F) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Err(JobError::Config(
        "the mpi backend is not in this build: rebuild with `--features mpi` \
         (needs a system MPI such as libopenmpi-dev, and libclang-dev)"
            .into(),
    ))
}

/// The part of a job that this process runs.
pub(crate) struct Part {
    /// Nodes held by this process.
    pub(crate) local_nodes: Range<u32>,
    /// The outbox to the progress thread, when other processes hold other nodes.
    pub(crate) remote: Option<Arc<Remote>>,
    /// The measured cost of a message between nodes.
    pub(crate) link_model: Option<LinkModel>,
}

/// Runs the ranks of `part` on threads of this process; `progress` runs on the calling thread
/// meanwhile and must return only when the job has ended everywhere (for the local backend it
/// has nothing to do).
pub(crate) fn execute<R, E, F>(
    config: &Config,
    layout: Layout,
    part: Part,
    f: F,
    progress: impl FnOnce(&Job),
) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let spill = SpillDir::create(config.spill_dir.as_deref()).map_err(|(path, e)| {
        JobError::Startup(std::io::Error::new(
            e.kind(),
            format!("spill directory {}: {e}", path.display()),
        ))
    })?;
    if config.mem_budget.is_some() {
        crate::memory::configure_allocator_for_budget();
    }
    let job = Arc::new(Job::new(config, layout.clone(), Arc::new(spill), part));
    let local = job.local_ranks();
    let start = Instant::now();
    let slots: Vec<Mutex<Option<(R, RankStats)>>> =
        local.clone().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for r in local.clone() {
            let rank_job = Arc::clone(&job);
            let f = &f;
            let slot = &slots[(r - local.start) as usize];
            let spawned = std::thread::Builder::new()
                .name(format!("rank-{r}"))
                .stack_size(config.stack_size)
                .spawn_scoped(s, move || {
                    let job = rank_job;
                    let rank = Rank::new(Arc::clone(&job), r);
                    if job.start(r).is_ok() {
                        match catch_unwind(AssertUnwindSafe(|| f(&rank))) {
                            Ok(Ok(value)) => {
                                *slot.lock().unwrap_or_else(|e| e.into_inner()) =
                                    Some((value, rank.stats()));
                            }
                            Ok(Err(e)) => job.fail(JobError::RankFailed {
                                rank: r,
                                error: e.into(),
                            }),
                            Err(p) => job.fail(JobError::RankPanicked {
                                rank: r,
                                message: panic_message(p.as_ref()),
                            }),
                        }
                    }
                    job.finish(r);
                });
            if let Err(e) = spawned {
                job.fail(JobError::Startup(e));
                // Ranks never started count as finished, so the job can end.
                for _ in r..local.end {
                    job.finished.fetch_add(1, Ordering::AcqRel);
                }
                break;
            }
        }
        progress(&job);
    });
    if let Some(failure) = job.take_failure() {
        return Err(failure);
    }
    let mut memory = MemoryStats::default();
    for node in &job.nodes {
        if let Some(e) = node.mem.take_error() {
            return Err(JobError::Storage(e));
        }
        memory.add(&node.mem.stats());
    }
    let mut results = Vec::with_capacity(local.len());
    let mut stats = JobStats {
        ranks: Vec::with_capacity(local.len()),
        elapsed: start.elapsed(),
        memory,
        budget: config.mem_budget,
        peak_rss: crate::memory::peak_rss(),
        local_ranks: local,
        nodes: layout.nodes(),
    };
    for slot in slots {
        let (value, st) = slot
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or_else(|| JobError::Config("a rank produced no result".into()))?;
        results.push(value);
        stats.ranks.push(st);
    }
    Ok((results, stats))
}
