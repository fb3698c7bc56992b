//! The node scheduler: at most `slots` ranks of a node execute at once (BDMPI's node-level
//! cooperative multitasking). Ranks are fibers ([`fiber`]) run by `slots` worker threads per
//! node; a rank that blocks suspends its fiber and its worker runs the next runnable rank.
//! The state machine, who wakes whom and what each operation costs are written down in
//! `README.md` beside this file.

mod fiber;

use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::Thread;

use crate::config::ResumePolicy;
use crate::error::Error;
use crate::memory::NodeMem;
use spillway_transport::lock;

pub(crate) use fiber::{Fiber, FiberYielder};

/// What a blocked rank is doing, for deadlock reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitKind {
    /// A point-to-point receive.
    Recv,
    /// A blocking probe.
    Probe,
    /// Waiting on a request.
    Wait,
    /// Inside the named collective.
    Collective(&'static str),
    /// Entering a critical section.
    Critical,
}

impl WaitKind {
    /// The name of a blocked interval in a trace.
    fn trace_name(self) -> &'static str {
        match self {
            WaitKind::Recv => "recv",
            WaitKind::Probe => "probe",
            WaitKind::Wait => "wait",
            WaitKind::Collective(name) => name,
            WaitKind::Critical => "critical",
        }
    }
}

/// Moves a worker's trace events to the job's list when the worker ends.
struct FlushTrace;

impl Drop for FlushTrace {
    fn drop(&mut self) {
        crate::trace::flush_thread();
    }
}

/// Something that can say what a blocked rank waits for (shown in deadlock reports).
pub trait Describe: Send + Sync {
    /// One line: what the rank waits for.
    fn describe(&self) -> String;
}

/// What a blocked rank waits on.
#[derive(Clone)]
pub(crate) enum WaitOn {
    /// Its mailbox (the registration there says what).
    Mailbox,
    /// A node-level wait queue of a collective.
    Node(Option<Arc<dyn Describe>>),
    /// The node's critical section.
    Critical,
}

/// A blocked rank's wait, for reports.
#[derive(Clone)]
pub(crate) struct WaitInfo {
    pub(crate) kind: WaitKind,
    pub(crate) on: WaitOn,
}

/// Counters shared by the schedulers of all nodes of this process.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    /// Ranks running or queued for a slot.
    active: AtomicUsize,
    /// Incremented every time a blocked rank becomes active (lets a deadlock report check that
    /// nothing changed while it was being written).
    wakes: AtomicU64,
    abort: AtomicBool,
}

impl Activity {
    pub(crate) fn new(ranks: usize) -> Activity {
        Activity {
            active: AtomicUsize::new(ranks),
            wakes: AtomicU64::new(0),
            abort: AtomicBool::new(false),
        }
    }

    pub(crate) fn aborted(&self) -> bool {
        self.abort.load(Ordering::Acquire)
    }

    pub(crate) fn set_abort(&self) {
        self.abort.store(true, Ordering::Release);
    }

    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    pub(crate) fn wakes(&self) -> u64 {
        self.wakes.load(Ordering::Acquire)
    }
}

/// A rank's scheduling state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Waiting for its worker (not started yet, or runnable again).
    Queued,
    /// Its worker runs it; `notified` records a wake that arrived before it blocked.
    Running {
        notified: bool,
    },
    /// Gave up its slot and is on the way out of its fiber; `woken` records a wake that
    /// arrived in between (its worker queues it again once the fiber has suspended).
    Blocking {
        woken: bool,
    },
    /// Suspended, waiting to be woken.
    Blocked,
    Finished,
}

/// What [`Sched::release`] did.
pub(crate) enum Released {
    /// A wake-up arrived since the rank registered its wait (or the job is aborting): it
    /// keeps its slot and re-checks.
    Notified,
    /// The rank gave up its slot and must suspend; `last_active` says that no rank of this
    /// process is running or queued any more.
    Blocked { last_active: bool },
}

enum Ready {
    Fifo(VecDeque<u32>),
    /// By resident bytes at the time the rank became runnable (most first), then FIFO.
    Resident(BTreeSet<(Reverse<u64>, u64, u32)>),
}

impl Ready {
    fn is_empty(&self) -> bool {
        match self {
            Ready::Fifo(q) => q.is_empty(),
            Ready::Resident(q) => q.is_empty(),
        }
    }
}

struct State {
    status: Vec<Status>,
    wait: Vec<Option<WaitInfo>>,
    /// Per worker: its queued ranks in resume order.
    ready: Vec<Ready>,
    /// Per worker: ranks not finished.
    left: Vec<usize>,
    /// Per worker: parked for lack of work.
    idle: Vec<bool>,
    /// Ranks holding a slot (for dynamic admission).
    running: Vec<u32>,
    seq: u64,
    critical_owner: Option<u32>,
    critical_queue: VecDeque<u32>,
}

/// The scheduler of one node: `workers` threads, each running the fibers of the ranks
/// `local % workers == w`.
pub(crate) struct Sched {
    state: Mutex<State>,
    workers: usize,
    threads: Box<[OnceLock<Thread>]>,
    /// Per worker: ranks queued for it (read without the lock by spinning waiters).
    queued: Box<[AtomicUsize]>,
    /// Per rank: its fiber's yielder (set when the fiber starts, used only on the fiber).
    yielders: Box<[AtomicUsize]>,
    dynamic: bool,
    mem: Arc<NodeMem>,
    activity: Arc<Activity>,
    /// The node's index and its first rank (for trace events).
    node_id: u32,
    first_rank: u32,
}

impl Sched {
    pub(crate) fn new(
        size: usize,
        slots: u32,
        resume: ResumePolicy,
        dynamic: bool,
        mem: Arc<NodeMem>,
        activity: Arc<Activity>,
    ) -> Sched {
        let workers = (slots as usize).min(size).max(1);
        let mut sched = Sched {
            state: Mutex::new(State {
                status: vec![Status::Queued; size],
                wait: vec![None; size],
                ready: (0..workers)
                    .map(|_| match resume {
                        ResumePolicy::MostResident => Ready::Resident(BTreeSet::new()),
                        _ => Ready::Fifo(VecDeque::new()),
                    })
                    .collect(),
                left: (0..workers)
                    .map(|w| (size + workers - 1 - w) / workers)
                    .collect(),
                idle: vec![false; workers],
                running: Vec::with_capacity(workers),
                seq: 0,
                critical_owner: None,
                critical_queue: VecDeque::new(),
            }),
            workers,
            threads: (0..workers).map(|_| OnceLock::new()).collect(),
            queued: (0..workers).map(|_| AtomicUsize::new(0)).collect(),
            yielders: (0..size).map(|_| AtomicUsize::new(0)).collect(),
            dynamic,
            mem,
            activity,
            node_id: 0,
            first_rank: 0,
        };
        // Every rank starts queued on its worker, in rank order.
        let st = sched
            .state
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for local in 0..size {
            let w = local % workers;
            st.seq += 1;
            match &mut st.ready[w] {
                Ready::Fifo(q) => q.push_back(local as u32),
                Ready::Resident(q) => {
                    q.insert((Reverse(0), st.seq, local as u32));
                }
            }
            *sched.queued[w].get_mut() += 1;
        }
        sched
    }

    /// Names the node (index and first rank) for trace events.
    pub(crate) fn ids(mut self, node: u32, first_rank: u32) -> Sched {
        self.node_id = node;
        self.first_rank = first_rank;
        self
    }

    /// Slots of the node: the most ranks executing at once (its worker threads).
    pub(crate) fn slots(&self) -> u32 {
        self.workers as u32
    }

    /// Worker threads of the node.
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    fn worker_of(&self, local: usize) -> usize {
        local % self.workers
    }

    /// Whether another rank waits for the worker of `local` (read without the lock): then a
    /// waiting `local` should give the worker up rather than spin.
    pub(crate) fn has_queued_for(&self, local: usize) -> bool {
        self.queued[self.worker_of(local)].load(Ordering::Relaxed) > 0
    }

    /// Whether `local` may take its worker now: always when no rank of the node runs; with
    /// dynamic running, another rank only if the budget has room for its data.
    fn may_start(&self, st: &State, local: usize) -> bool {
        !self.dynamic || st.running.is_empty() || self.mem.has_room_for(local, &st.running)
    }

    /// Queues `local` on its worker; if the worker is idle, marks it busy and returns it, to
    /// be unparked once the lock is released.
    #[must_use]
    fn enqueue(&self, st: &mut State, local: usize) -> Option<usize> {
        st.status[local] = Status::Queued;
        st.seq += 1;
        let seq = st.seq;
        let w = self.worker_of(local);
        match &mut st.ready[w] {
            Ready::Fifo(q) => q.push_back(local as u32),
            Ready::Resident(q) => {
                let resident = self.mem.resident_of(local);
                q.insert((Reverse(resident), seq, local as u32));
            }
        }
        self.queued[w].fetch_add(1, Ordering::Relaxed);
        if st.idle[w] {
            st.idle[w] = false;
            return Some(w);
        }
        None
    }

    fn unpark_worker(&self, w: usize) {
        if let Some(t) = self.threads[w].get() {
            t.unpark();
        }
    }

    fn unpark_all_of(&self, workers: impl IntoIterator<Item = usize>) {
        for w in workers {
            self.unpark_worker(w);
        }
    }

    /// Idle workers that have queued ranks (admission may have changed), marked busy, to be
    /// unparked once the lock is released.
    fn nudge_idle(&self, st: &mut State) -> Vec<usize> {
        let mut out = Vec::new();
        for w in 0..self.workers {
            if st.idle[w] && !st.ready[w].is_empty() {
                st.idle[w] = false;
                out.push(w);
            }
        }
        out
    }

    /// The next rank worker `w` may run, taken off its queue.
    fn pick(&self, st: &mut State, w: usize) -> Option<usize> {
        let next = match &st.ready[w] {
            Ready::Fifo(q) => q.front().copied(),
            Ready::Resident(q) => q.first().map(|&(_, _, l)| l),
        }? as usize;
        if !self.may_start(st, next) {
            return None;
        }
        match &mut st.ready[w] {
            Ready::Fifo(q) => {
                q.pop_front();
            }
            Ready::Resident(q) => {
                q.pop_first();
            }
        }
        self.queued[w].fetch_sub(1, Ordering::Relaxed);
        Some(next)
    }

    /// Worker `w`'s loop: runs the fibers of its ranks as they become runnable (making each
    /// with `make` the first time) until all of them have finished.
    pub(crate) fn run_worker(
        &self,
        w: usize,
        make: &mut dyn FnMut(usize) -> Result<Fiber, Error>,
        on_error: &dyn Fn(usize, Error),
    ) {
        let _ = self.threads[w].set(std::thread::current());
        let mut fibers: Vec<Option<Fiber>> = (0..self.left_of(w)).map(|_| None).collect();
        // Trace: since when, and on what, each of this worker's ranks has been blocked.
        let mut blocked: Vec<Option<(u64, &'static str)>> = vec![None; fibers.len()];
        let _flush = FlushTrace;
        loop {
            let local = {
                let mut st = lock(&self.state);
                loop {
                    if st.left[w] == 0 {
                        return;
                    }
                    if let Some(local) = self.pick(&mut st, w) {
                        st.status[local] = Status::Running { notified: false };
                        st.running.push(local as u32);
                        // The rank this worker will resume after this one: its data is read
                        // while this one runs.
                        let after = match &st.ready[w] {
                            Ready::Fifo(q) => q.front().copied(),
                            Ready::Resident(q) => q.first().map(|&(_, _, l)| l),
                        };
                        drop(st);
                        if let Some(after) = after {
                            self.mem.prefetch_rank(after as usize);
                        }
                        break local;
                    }
                    st.idle[w] = true;
                    drop(st);
                    std::thread::park();
                    st = lock(&self.state);
                    st.idle[w] = false;
                }
            };
            let slot = &mut fibers[local / self.workers];
            if slot.is_none() {
                match make(local) {
                    Ok(f) => *slot = Some(f),
                    Err(e) => {
                        // The rank cannot run: the job fails and the rank counts as
                        // finished (`on_error` finishes it).
                        on_error(local, e);
                        continue;
                    }
                }
            }
            let tracing = crate::trace::enabled();
            let rank = self.first_rank + local as u32;
            let t0 = if tracing { crate::trace::now() } else { 0 };
            if let Some((since, what)) = blocked[local / self.workers].take() {
                if tracing {
                    crate::trace::interval(what, "blocked", self.node_id, rank, since, t0, None);
                }
            }
            let done = slot.as_mut().expect("the fiber exists").resume();
            if tracing {
                let t1 = crate::trace::now();
                crate::trace::interval("running", "sched", self.node_id, rank, t0, t1, None);
            }
            if done {
                // Its stack goes now; `finish` ran on the fiber.
                *slot = None;
                continue;
            }
            let mut st = lock(&self.state);
            if tracing {
                let what = st.wait[local]
                    .as_ref()
                    .map_or("blocked", |w| w.kind.trace_name());
                blocked[local / self.workers] = Some((crate::trace::now(), what));
            }
            match st.status[local] {
                Status::Blocking { woken: true } => {
                    // Its own worker: not idle, nothing to unpark.
                    let _ = self.enqueue(&mut st, local);
                }
                Status::Blocking { woken: false } => st.status[local] = Status::Blocked,
                other => unreachable!("a suspended rank is {other:?}"),
            }
        }
    }

    fn left_of(&self, w: usize) -> usize {
        lock(&self.state).left[w]
    }

    /// Records the yielder of `local`'s fiber (called first thing on the fiber).
    pub(crate) fn set_yielder(&self, local: usize, yielder: &FiberYielder) {
        self.yielders[local].store(yielder as *const FiberYielder as usize, Ordering::Relaxed);
    }

    /// Step 4 of the waiting protocol (see README.md): gives up the slot unless a wake-up
    /// arrived since the caller registered its wait, or the job is aborting.
    pub(crate) fn release(&self, local: usize, info: WaitInfo) -> Released {
        let mut st = lock(&self.state);
        if self.activity.aborted() {
            return Released::Notified;
        }
        if let Status::Running { notified: true } = st.status[local] {
            st.status[local] = Status::Running { notified: false };
            return Released::Notified;
        }
        st.status[local] = Status::Blocking { woken: false };
        self.mem.mark_blocked(local, info.kind.trace_name());
        st.wait[local] = Some(info);
        if let Some(i) = st.running.iter().position(|&r| r as usize == local) {
            st.running.swap_remove(i);
        }
        let last_active = self.activity.active.fetch_sub(1, Ordering::AcqRel) == 1;
        let nudge = if self.dynamic {
            self.nudge_idle(&mut st)
        } else {
            Vec::new()
        };
        drop(st);
        self.unpark_all_of(nudge);
        Released::Blocked { last_active }
    }

    /// Suspends `local`'s fiber (after [`release`](Self::release) said so) until it is
    /// resumed.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job is being aborted.
    pub(crate) fn suspend(&self, local: usize) -> Result<(), Error> {
        let y = self.yielders[local].load(Ordering::Relaxed) as *const FiberYielder;
        assert!(!y.is_null(), "a rank suspends outside its fiber");
        // SAFETY: the yielder was recorded by this rank's fiber when it started and lives at
        // the base of its stack for as long as the fiber runs; this runs on that fiber.
        unsafe { (*y).suspend(()) };
        self.mem.on_resume(local);
        if self.activity.aborted() {
            return Err(Error::Aborted);
        }
        Ok(())
    }

    /// Makes `local` runnable, or records the wake-up if it has not blocked yet.
    pub(crate) fn wake(&self, local: usize) {
        let mut st = lock(&self.state);
        let w = self.wake_locked(&mut st, local);
        drop(st);
        self.unpark_all_of(w);
    }

    /// [`wake`](Self::wake) for many ranks, in one lock section.
    pub(crate) fn wake_many(&self, locals: &[u32]) {
        let mut st = lock(&self.state);
        let mut workers = Vec::new();
        for &l in locals {
            workers.extend(self.wake_locked(&mut st, l as usize));
        }
        drop(st);
        self.unpark_all_of(workers);
    }

    #[must_use]
    fn wake_locked(&self, st: &mut State, local: usize) -> Option<usize> {
        match st.status[local] {
            Status::Running { .. } => {
                st.status[local] = Status::Running { notified: true };
                None
            }
            Status::Blocking { woken: false } => {
                st.status[local] = Status::Blocking { woken: true };
                st.wait[local] = None;
                self.activity.active.fetch_add(1, Ordering::AcqRel);
                self.activity.wakes.fetch_add(1, Ordering::AcqRel);
                None
            }
            Status::Blocked => {
                st.wait[local] = None;
                self.activity.active.fetch_add(1, Ordering::AcqRel);
                self.activity.wakes.fetch_add(1, Ordering::AcqRel);
                self.enqueue(st, local)
            }
            Status::Blocking { woken: true } | Status::Queued | Status::Finished => None,
        }
    }

    /// The rank's function returned (called on its fiber): its slot and the critical section,
    /// if it holds it, go to others. Returns whether no rank of this process is running or
    /// queued any more.
    pub(crate) fn finish(&self, local: usize) -> bool {
        let mut st = lock(&self.state);
        let was_active = match st.status[local] {
            Status::Running { .. } => {
                if let Some(i) = st.running.iter().position(|&r| r as usize == local) {
                    st.running.swap_remove(i);
                }
                true
            }
            Status::Blocking { woken } => woken,
            Status::Queued => true,
            Status::Blocked | Status::Finished => false,
        };
        if st.status[local] == Status::Finished {
            return false;
        }
        st.status[local] = Status::Finished;
        st.wait[local] = None;
        let w = self.worker_of(local);
        st.left[w] -= 1;
        let mut unpark = Vec::new();
        if st.critical_owner == Some(local as u32) {
            unpark.extend(self.pass_critical(&mut st));
        }
        if self.dynamic {
            unpark.extend(self.nudge_idle(&mut st));
        }
        drop(st);
        self.unpark_all_of(unpark);
        was_active && self.activity.active.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Under the scheduler's lock: if `cond()` holds, wakes every rank that waits (as
    /// [`wake`](Self::wake) does). Returns whether it did.
    pub(crate) fn wake_all_if(&self, cond: impl FnOnce() -> bool) -> bool {
        let mut st = lock(&self.state);
        if !cond() {
            return false;
        }
        let mut workers = Vec::new();
        for local in 0..st.status.len() {
            workers.extend(self.wake_locked(&mut st, local));
        }
        drop(st);
        self.unpark_all_of(workers);
        true
    }

    /// The job is being aborted: every blocked rank is made runnable, so that its blocking
    /// call returns [`Error::Aborted`].
    pub(crate) fn abort(&self) {
        let mut st = lock(&self.state);
        for local in 0..st.status.len() {
            match st.status[local] {
                Status::Blocked => {
                    let _ = self.enqueue(&mut st, local);
                }
                Status::Blocking { woken: false } => {
                    st.status[local] = Status::Blocking { woken: true };
                }
                _ => {}
            }
        }
        drop(st);
        self.unpark_all_of(0..self.workers);
    }

    /// Takes the critical section if it is free; otherwise queues for it. Returns whether the
    /// caller owns it now.
    pub(crate) fn try_enter_critical(&self, local: usize) -> bool {
        let mut st = lock(&self.state);
        match st.critical_owner {
            None => {
                st.critical_owner = Some(local as u32);
                true
            }
            Some(o) if o as usize == local => true,
            Some(_) => {
                if !st.critical_queue.contains(&(local as u32)) {
                    st.critical_queue.push_back(local as u32);
                }
                false
            }
        }
    }

    /// Leaves the critical section (if `local` holds it) and passes it to the next queued
    /// rank.
    pub(crate) fn exit_critical(&self, local: usize) {
        let mut st = lock(&self.state);
        if st.critical_owner == Some(local as u32) {
            let w = self.pass_critical(&mut st);
            drop(st);
            self.unpark_all_of(w);
        }
    }

    #[must_use]
    fn pass_critical(&self, st: &mut State) -> Option<usize> {
        match st.critical_queue.pop_front() {
            Some(next) => {
                st.critical_owner = Some(next);
                self.wake_locked(st, next as usize)
            }
            None => {
                st.critical_owner = None;
                None
            }
        }
    }

    /// A snapshot of every rank's status and wait, for deadlock reports; `None` if some rank
    /// is running or queued.
    pub(crate) fn snapshot(&self) -> Option<Vec<(Status, Option<WaitInfo>)>> {
        let st = lock(&self.state);
        if st.status.iter().any(|s| {
            matches!(
                s,
                Status::Running { .. } | Status::Queued | Status::Blocking { woken: true }
            )
        }) {
            return None;
        }
        Some(
            st.status
                .iter()
                .zip(&st.wait)
                .map(|(s, w)| (*s, w.clone()))
                .collect(),
        )
    }
}
