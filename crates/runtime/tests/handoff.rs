//! Stress tests of the hand-off between rank fibers and the node scheduler: thousands of ranks
//! on two nodes doing randomised sequences of blocking operations, checked against a plan
//! computed beforehand.
//!
//! # Why this is a stress test and not a `loom` model
//!
//! `loom` explores the interleavings of threads that synchronise through its own replacements
//! of `std::sync` (mutexes, atomics, `thread::park`/`unpark`), and it runs each modelled
//! thread as a generator that it switches itself. The protocol under test cannot be put under
//! it without modelling something else than the code:
//! * a rank is a *fiber*: `corosensei` switches stacks with inline assembly on a worker
//!   thread. Loom cannot see or schedule such a switch (a switch is neither a loom thread nor
//!   a loom synchronisation operation), and running a second stack switcher inside loom's own
//!   generator-based threads is not supported;
//! * the scheduler (`sched/mod.rs`), the mailboxes and the wait queues use `std::sync::Mutex`,
//!   `std` atomics and `std::thread::park` directly; loom needs every one of them replaced by
//!   its type under `cfg(loom)` across the runtime, and a model of the hand-off written
//!   beside the code would check a copy of the protocol, not the protocol;
//! * the states that matter (`Running { notified }`, `Blocking { woken }`, `Blocked`) are
//!   reached only through the real job machinery (the mailbox lock, then the scheduler lock,
//!   then the fiber suspending on its worker), which loom cannot drive.
//!
//! Instead, every rank checks the scheduler's guarantees each time it resumes and before it
//! blocks, while 2,000 ranks run 1, 2 or 3 at a time per node through many rounds of
//! any-source receives, probes, groups of receives, node barriers (wait queues), a
//! dissemination barrier of messages and critical sections:
//! * no rank's code runs twice at once (a per-rank "inside" flag);
//! * a worker never runs a second rank while one is between two blocking calls (a per-thread
//!   "current rank");
//! * at most `running` ranks of a node execute at once;
//! * rank `r` of a node runs only on worker `r % running` (sched/README.md: "Rank `r` of a
//!   node belongs to worker `r % slots` and only ever runs on it"; workers are named
//!   `node-N-worker-W`);
//! * every message arrives exactly once and, per (sender, tag), in the order it was sent;
//! * nobody leaves a barrier before everybody has arrived, and critical sections exclude.
//!
//! Each job runs under a deadline that, when it passes, reports how far each rank got.

mod support;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spillway_runtime::{
    run_with_stats, Config, Error, Pattern, Payload, Rank, RecvId, ResumePolicy, WaitKind,
};
use support::{node_barrier, with_deadline, Mix};

const RANKS: u32 = 2000;
const NODES: u32 = 2;
const ROUNDS: u32 = 40;
const TAGS: i32 = 3;
/// Round `k` sends its data in context `DATA + k`, its barrier messages in `BARRIER + k`.
const DATA: u64 = 0x0da7_a000;
const BARRIER: u64 = 0x0ba2_2000;
/// Node table keys of the node barriers: `NODE_BARRIER + k`.
const NODE_BARRIER: u64 = 0x70de_0000;
const NOBODY: u32 = u32::MAX;

/// How a rank takes its messages of one round.
#[derive(Debug, Clone, Copy)]
enum RecvMode {
    /// Blocking receives from any source with any tag.
    AnyAny,
    /// Blocking receives from any source, tag by tag.
    AnySourceByTag,
    /// A blocking probe from any source, then a receive of exactly what it found.
    ProbeThenExact,
    /// Post every receive (any source, any tag), wait for all, take them in posting order.
    WaitAll,
    /// Post every receive (any source, any tag), wait for one at a time.
    WaitAny,
}

const MODES: [RecvMode; 5] = [
    RecvMode::AnyAny,
    RecvMode::AnySourceByTag,
    RecvMode::ProbeThenExact,
    RecvMode::WaitAll,
    RecvMode::WaitAny,
];

/// One message of the plan: sent by `source` to `dest` with `tag`, the `seq`-th message of
/// the round from `source` to `dest` with that tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Msg {
    round: u32,
    source: u32,
    dest: u32,
    tag: i32,
    seq: u32,
}

impl Msg {
    fn encode(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        for (i, v) in [
            self.round,
            self.source,
            self.dest,
            self.tag as u32,
            self.seq,
        ]
        .into_iter()
        .enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    fn decode(b: &[u8]) -> Msg {
        assert_eq!(b.len(), 20, "a data message of {} bytes", b.len());
        let w = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
        Msg {
            round: w(0),
            source: w(1),
            dest: w(2),
            tag: w(3) as i32,
            seq: w(4),
        }
    }
}

/// What every rank does, decided before the job from one seed (the sequential reference).
struct Plan {
    /// `[round][rank]`: the messages the rank sends, in order.
    sends: Vec<Vec<Vec<Msg>>>,
    /// `[round][rank][tag]`: how many messages the rank receives.
    expect: Vec<Vec<[u32; TAGS as usize]>>,
    mode: Vec<Vec<RecvMode>>,
    /// `[round][rank]`: sends its messages inside the node's critical section.
    critical: Vec<Vec<bool>>,
    node_barrier: Vec<bool>,
    global_barrier: Vec<bool>,
}

impl Plan {
    fn new(seed: u64) -> Plan {
        let n = RANKS as usize;
        let mut plan = Plan {
            sends: Vec::new(),
            expect: Vec::new(),
            mode: Vec::new(),
            critical: Vec::new(),
            node_barrier: Vec::new(),
            global_barrier: Vec::new(),
        };
        let mut g = Mix::new(seed, 1);
        for round in 0..ROUNDS {
            let mut sends = vec![Vec::new(); n];
            let mut expect = vec![[0u32; TAGS as usize]; n];
            for (source, out) in sends.iter_mut().enumerate() {
                let mut seq: HashMap<(u32, i32), u32> = HashMap::new();
                for _ in 0..g.below(4) {
                    let dest = match g.below(8) {
                        // Itself, a neighbour (usually on its node), or anybody.
                        0 => source as u32,
                        1 => (source as u32 + 1) % RANKS,
                        _ => g.below(u64::from(RANKS)) as u32,
                    };
                    let tag = g.below(TAGS as u64) as i32;
                    let s = seq.entry((dest, tag)).or_insert(0);
                    out.push(Msg {
                        round,
                        source: source as u32,
                        dest,
                        tag,
                        seq: *s,
                    });
                    *s += 1;
                    expect[dest as usize][tag as usize] += 1;
                }
            }
            plan.sends.push(sends);
            plan.expect.push(expect);
            plan.mode
                .push((0..n).map(|_| MODES[g.below(5) as usize]).collect());
            plan.critical.push((0..n).map(|_| g.one_in(6)).collect());
            plan.node_barrier.push(g.one_in(3));
            plan.global_barrier.push(g.one_in(3));
        }
        plan
    }

    /// Every message each rank must receive, sorted.
    fn received_by(&self) -> Vec<Vec<Msg>> {
        let mut out = vec![Vec::new(); RANKS as usize];
        for round in &self.sends {
            for sent in round {
                for m in sent {
                    out[m.dest as usize].push(*m);
                }
            }
        }
        for v in &mut out {
            v.sort();
        }
        out
    }
}

/// State the ranks check their guarantees against.
struct Checks {
    running: u32,
    /// Per rank: its code is running (between two blocking calls).
    inside: Vec<AtomicBool>,
    /// Per node: ranks running now, and the most seen at once.
    executing: Vec<AtomicUsize>,
    most_executing: Vec<AtomicUsize>,
    /// Per node: the holder of the critical section, as the ranks see it.
    critical: Vec<AtomicU32>,
    /// Per round: ranks that entered its dissemination barrier.
    arrived: Vec<AtomicUsize>,
    /// Per rank: `round * 8 + step`, for the deadline's report.
    progress: Vec<AtomicU32>,
}

thread_local! {
    /// The rank whose code this worker runs now (ranks of one worker share the thread).
    static CURRENT: Cell<u32> = const { Cell::new(NOBODY) };
}

impl Checks {
    fn new(running: u32) -> Checks {
        let n = RANKS as usize;
        Checks {
            running,
            inside: (0..n).map(|_| AtomicBool::new(false)).collect(),
            executing: (0..NODES).map(|_| AtomicUsize::new(0)).collect(),
            most_executing: (0..NODES).map(|_| AtomicUsize::new(0)).collect(),
            critical: (0..NODES).map(|_| AtomicU32::new(NOBODY)).collect(),
            arrived: (0..ROUNDS).map(|_| AtomicUsize::new(0)).collect(),
            progress: (0..n).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// The worker thread rank `rank` must run on.
    fn worker_name(&self, rank: &Rank) -> String {
        let workers = self.running.min(rank.local_size());
        format!(
            "node-{}-worker-{}",
            rank.node(),
            rank.local_rank() % workers
        )
    }

    /// The rank's code starts running (at its start, or back from a blocking call).
    fn enter(&self, rank: &Rank, worker: &str) {
        let r = rank.rank();
        assert!(
            !self.inside[r as usize].swap(true, Ordering::AcqRel),
            "rank {r} resumed while its code was already running"
        );
        let before = CURRENT.with(|c| c.replace(r));
        assert_eq!(
            before, NOBODY,
            "rank {r} resumed on a worker where rank {before} had not blocked"
        );
        let name = std::thread::current().name().map(str::to_owned);
        assert_eq!(
            name.as_deref(),
            Some(worker),
            "rank {r} (local {}) runs on the wrong worker",
            rank.local_rank()
        );
        let node = rank.node() as usize;
        let now = self.executing[node].fetch_add(1, Ordering::AcqRel) + 1;
        assert!(
            now <= self.running as usize,
            "{now} ranks of node {node} execute at once with running = {}",
            self.running
        );
        self.most_executing[node].fetch_max(now, Ordering::Relaxed);
    }

    /// The rank's code is about to block (or return).
    fn leave(&self, rank: &Rank) {
        let r = rank.rank();
        self.executing[rank.node() as usize].fetch_sub(1, Ordering::AcqRel);
        let before = CURRENT.with(|c| c.replace(NOBODY));
        assert_eq!(
            before, r,
            "rank {r} blocks on a worker that runs rank {before}"
        );
        assert!(
            self.inside[r as usize].swap(false, Ordering::AcqRel),
            "rank {r} was not marked running"
        );
    }

    fn progress(&self, rank: &Rank, round: u32, step: u32) {
        self.progress[rank.rank() as usize].store(round * 8 + step, Ordering::Relaxed);
    }

    /// Which ranks got least far, for the deadline's report.
    fn report(&self) -> String {
        let mut at: Vec<(u32, u32)> = self
            .progress
            .iter()
            .enumerate()
            .map(|(r, p)| (p.load(Ordering::Relaxed), r as u32))
            .collect();
        at.sort();
        let behind: Vec<String> = at
            .iter()
            .take(12)
            .map(|&(p, r)| format!("rank {r} in round {} step {}", p / 8, p % 8))
            .collect();
        format!("ranks least far along: {}", behind.join(", "))
    }
}

/// One rank's view while it runs: checks around every blocking call.
struct Me<'a> {
    rank: &'a Rank,
    checks: &'a Checks,
    worker: String,
}

impl Me<'_> {
    fn blocking<T>(&self, f: impl FnOnce() -> T) -> T {
        self.checks.leave(self.rank);
        let out = f();
        self.checks.enter(self.rank, &self.worker);
        out
    }

    /// Takes a data message of `round` and checks its envelope against its contents.
    fn open(&self, env: spillway_runtime::Envelope, round: u32) -> Msg {
        let m = Msg::decode(env.payload.as_bytes());
        assert_eq!(env.context, DATA + u64::from(round));
        assert_eq!((m.round, m.source, m.tag), (round, env.source, env.tag));
        assert_eq!(m.dest, self.rank.rank(), "a message for rank {}", m.dest);
        m
    }

    /// The dissemination barrier of `round` over all ranks, with exact-source receives.
    fn global_barrier(&self, round: u32) -> Result<(), Error> {
        let (r, n) = (self.rank.rank(), self.rank.size());
        let context = BARRIER + u64::from(round);
        self.checks.arrived[round as usize].fetch_add(1, Ordering::AcqRel);
        let (mut dist, mut step) = (1u32, 0i32);
        while dist < n {
            self.rank
                .post((r + dist) % n, context, step, Payload::empty())?;
            let from = (r + n - dist) % n;
            let pattern = Pattern {
                context,
                source: Some(from),
                tag: Some(step),
            };
            let env = self.blocking(|| {
                self.rank
                    .recv(pattern, WaitKind::Collective("dissemination barrier"))
            })?;
            assert_eq!((env.source, env.tag), (from, step));
            dist *= 2;
            step += 1;
        }
        let seen = self.checks.arrived[round as usize].load(Ordering::Acquire);
        assert_eq!(
            seen, n as usize,
            "rank {r} left the barrier of round {round} with {seen} of {n} arrived"
        );
        Ok(())
    }

    fn send_all(&self, plan: &Plan, round: u32) -> Result<(), Error> {
        let r = self.rank.rank();
        let sends = &plan.sends[round as usize][r as usize];
        let critical = plan.critical[round as usize][r as usize];
        let guard = if critical {
            let g = self.blocking(|| self.rank.enter_critical())?;
            let holder = &self.checks.critical[self.rank.node() as usize];
            let was = holder.swap(r, Ordering::AcqRel);
            assert_eq!(
                was, NOBODY,
                "rank {r} entered the critical section held by {was}"
            );
            Some(g)
        } else {
            None
        };
        for m in sends {
            self.rank.post(
                m.dest,
                DATA + u64::from(round),
                m.tag,
                Payload::copy_of(&m.encode()),
            )?;
        }
        if let Some(g) = guard {
            let holder = &self.checks.critical[self.rank.node() as usize];
            let was = holder.swap(NOBODY, Ordering::AcqRel);
            assert_eq!(was, r, "rank {r} left a critical section held by {was}");
            drop(g);
        }
        Ok(())
    }

    fn receive_all(&self, plan: &Plan, round: u32, got: &mut Vec<Msg>) -> Result<(), Error> {
        let r = self.rank.rank() as usize;
        let per_tag = plan.expect[round as usize][r];
        let count: u32 = per_tag.iter().sum();
        let context = DATA + u64::from(round);
        let any = Pattern {
            context,
            source: None,
            tag: None,
        };
        match plan.mode[round as usize][r] {
            RecvMode::AnyAny => {
                for _ in 0..count {
                    let env = self.blocking(|| self.rank.recv(any, WaitKind::Recv))?;
                    got.push(self.open(env, round));
                }
            }
            RecvMode::AnySourceByTag => {
                for (tag, &n) in per_tag.iter().enumerate() {
                    let pattern = Pattern {
                        tag: Some(tag as i32),
                        ..any
                    };
                    for _ in 0..n {
                        let env = self.blocking(|| self.rank.recv(pattern, WaitKind::Recv))?;
                        got.push(self.open(env, round));
                    }
                }
            }
            RecvMode::ProbeThenExact => {
                for _ in 0..count {
                    let info = self.blocking(|| self.rank.probe(any, WaitKind::Probe))?;
                    let exact = Pattern {
                        context,
                        source: Some(info.source),
                        tag: Some(info.tag),
                    };
                    // The probed message is queued: this receive must not block.
                    let id = self.rank.post_recv(exact);
                    let env = self
                        .rank
                        .test_recv(id)?
                        .expect("the probed message is there");
                    assert_eq!(env.payload.len(), info.bytes);
                    got.push(self.open(env, round));
                }
            }
            RecvMode::WaitAll => {
                let ids: Vec<RecvId> = (0..count).map(|_| self.rank.post_recv(any)).collect();
                if !ids.is_empty() {
                    self.blocking(|| self.rank.wait_recv_all(&ids, WaitKind::Wait))?;
                }
                for id in ids {
                    let env = self.rank.test_recv(id)?.expect("wait_recv_all returned");
                    got.push(self.open(env, round));
                }
            }
            RecvMode::WaitAny => {
                let ids: Vec<RecvId> = (0..count).map(|_| self.rank.post_recv(any)).collect();
                let mut slots: Vec<Option<Msg>> = vec![None; ids.len()];
                let mut pending: Vec<usize> = (0..ids.len()).collect();
                while !pending.is_empty() {
                    let wait: Vec<RecvId> = pending.iter().map(|&i| ids[i]).collect();
                    let k = self.blocking(|| self.rank.wait_recv_any(&wait, WaitKind::Wait))?;
                    let i = pending.swap_remove(k);
                    let env = self.rank.test_recv(ids[i])?.expect("wait_recv_any said so");
                    slots[i] = Some(self.open(env, round));
                }
                // In posting order: the order in which the receives matched arrivals.
                got.extend(slots.into_iter().map(|m| m.expect("every slot filled")));
            }
        }
        Ok(())
    }
}

/// One rank's whole life: every round of the plan; returns the messages in matching order.
fn rank_main(rank: &Rank, plan: &Plan, checks: &Checks) -> Result<Vec<Msg>, Error> {
    let me = Me {
        rank,
        checks,
        worker: checks.worker_name(rank),
    };
    checks.enter(rank, &me.worker);
    let _reset = Reset { rank, checks };
    let mut got = Vec::new();
    for round in 0..ROUNDS {
        checks.progress(rank, round, 1);
        if plan.node_barrier[round as usize] {
            me.blocking(|| node_barrier(rank, NODE_BARRIER + u64::from(round)))?;
        }
        checks.progress(rank, round, 2);
        me.send_all(plan, round)?;
        checks.progress(rank, round, 3);
        me.receive_all(plan, round, &mut got)?;
        checks.progress(rank, round, 4);
        if plan.global_barrier[round as usize] {
            me.global_barrier(round)?;
        }
    }
    checks.progress(rank, ROUNDS, 0);
    checks.leave(rank);
    Ok(got)
}

/// Clears a rank's marks when it ends early (an error or a failed check), so that the ranks
/// its worker runs afterwards report their own problems, not this one's.
struct Reset<'a> {
    rank: &'a Rank,
    checks: &'a Checks,
}

impl Drop for Reset<'_> {
    fn drop(&mut self) {
        let r = self.rank.rank();
        if self.checks.inside[r as usize].swap(false, Ordering::AcqRel) {
            self.checks.executing[self.rank.node() as usize].fetch_sub(1, Ordering::AcqRel);
            CURRENT.with(|c| c.set(NOBODY));
        }
    }
}

/// Runs the plan of `seed` with `running` ranks per node at once and checks what arrived.
fn stress(running: u32, resume: ResumePolicy, seed: u64) {
    let plan = Arc::new(Plan::new(seed));
    let checks = Arc::new(Checks::new(running));
    let config = Config::new(RANKS)
        .nodes(NODES)
        .running(running)
        .resume_policy(resume)
        .stack_size(128 << 10);
    let (p, c) = (Arc::clone(&plan), Arc::clone(&checks));
    let what = format!("{RANKS} ranks on {NODES} nodes, running {running}, {resume:?}");
    let report = {
        let c = Arc::clone(&checks);
        move || c.report()
    };
    let (out, stats) = with_deadline(&what, Duration::from_secs(120), report, move || {
        run_with_stats(&config, |rank| rank_main(rank, &p, &c))
    })
    .unwrap_or_else(|e| panic!("{what}: {e}"));

    // Exactly once: what each rank received is what the plan sent it.
    let expected = plan.received_by();
    let mut total = 0;
    for (r, got) in out.iter().enumerate() {
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(
            sorted, expected[r],
            "{what}: rank {r} received other messages than were sent to it"
        );
        total += got.len();
        // In order: per (round, source, tag), in the order sent.
        let mut next: HashMap<(u32, u32, i32), u32> = HashMap::new();
        for m in got {
            let n = next.entry((m.round, m.source, m.tag)).or_insert(0);
            assert_eq!(
                m.seq, *n,
                "{what}: rank {r} matched {m:?} out of order (expected seq {n})"
            );
            *n += 1;
        }
    }
    assert!(
        total > RANKS as usize * ROUNDS as usize,
        "{what}: only {total} messages"
    );
    for (node, most) in checks.most_executing.iter().enumerate() {
        let most = most.load(Ordering::Relaxed);
        assert!(
            (1..=running as usize).contains(&most),
            "{what}: node {node} ran {most} ranks at once"
        );
    }
    // With more ranks than slots, ranks had to give their slots up.
    let blocked = stats.ranks.iter().filter(|s| s.blocks > 0).count();
    assert!(
        blocked > RANKS as usize / 2,
        "{what}: only {blocked} ranks ever blocked"
    );
    let blocks: u64 = stats.ranks.iter().map(|s| s.blocks).sum();
    let most: Vec<usize> = checks
        .most_executing
        .iter()
        .map(|m| m.load(Ordering::Relaxed))
        .collect();
    eprintln!(
        "{what}: {total} data messages, {} messages in all, {blocks} blocking waits, \
         at most {most:?} ranks running at once per node, {:?}",
        stats.messages_sent(),
        stats.elapsed
    );
}

#[test]
fn two_thousand_ranks_one_running_per_node() {
    stress(1, ResumePolicy::Fifo, 0x5eed_0001);
}

#[test]
fn two_thousand_ranks_two_running_per_node() {
    stress(2, ResumePolicy::MostResident, 0x5eed_0002);
}

#[test]
fn two_thousand_ranks_three_running_per_node() {
    stress(3, ResumePolicy::Fifo, 0x5eed_0003);
}

/// Ranks stay on their worker across blocking calls at small layouts too, including nodes
/// with fewer ranks than `running` (then a node has as many workers as ranks).
#[test]
fn ranks_run_only_on_their_worker_at_every_layout() {
    for ranks in [1u32, 2, 3, 5, 8] {
        for nodes in (1..=3).filter(|&n| n <= ranks) {
            for running in [1u32, 2, 3, 4] {
                let config = Config::new(ranks).nodes(nodes).running(running);
                let what = format!("ranks {ranks} nodes {nodes} running {running}");
                let out = with_deadline(&what, Duration::from_secs(30), String::new, move || {
                    spillway_runtime::run(&config, |rank| -> Result<Vec<String>, Error> {
                        let mut seen = Vec::new();
                        let (r, n) = (rank.rank(), rank.size());
                        let context = 9;
                        for step in 0..4 {
                            seen.push(std::thread::current().name().unwrap_or("").to_owned());
                            rank.post((r + 1) % n, context, step, Payload::empty())?;
                            let pattern = Pattern {
                                context,
                                source: Some((r + n - 1) % n),
                                tag: Some(step),
                            };
                            rank.recv(pattern, WaitKind::Recv)?;
                        }
                        seen.push(std::thread::current().name().unwrap_or("").to_owned());
                        Ok(seen)
                    })
                })
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                // The reference: contiguous blocks of ranks per node, as the layout documents.
                let layout = Config::new(ranks).nodes(nodes).layout().unwrap();
                for (r, names) in out.iter().enumerate() {
                    let node = layout.node_of(r as u32);
                    let local = r as u32 - layout.first_rank(node);
                    let workers = running.min(layout.local_size(node));
                    let want = format!("node-{node}-worker-{}", local % workers);
                    assert!(
                        names.iter().all(|n| *n == want),
                        "{what}: rank {r} ran on {names:?}, not only on {want}"
                    );
                }
            }
        }
    }
}

/// The race the waiting protocol exists for: a wake-up that arrives between a rank's
/// registration and its giving up the slot (`Running { notified }`), or between that and its
/// fiber suspending (`Blocking { woken }`). With one rank per worker and no spinning, every
/// wait registers and releases at once while its partner, on another worker thread, delivers;
/// a lost wake-up ends the job as a deadlock (or hits the deadline).
#[test]
fn wakeups_racing_with_blocking_are_never_lost() {
    const ITERATIONS: u32 = 30_000;
    for (ranks, nodes) in [(2u32, 1u32), (3, 1), (4, 2)] {
        let running = ranks.div_ceil(nodes);
        let config = Config::new(ranks)
            .nodes(nodes)
            .running(running)
            .spin(Duration::ZERO);
        let what = format!("ranks {ranks} nodes {nodes} running {running}, no spinning");
        let at: Arc<Vec<AtomicU32>> = Arc::new((0..ranks).map(|_| AtomicU32::new(0)).collect());
        let report = {
            let at = Arc::clone(&at);
            move || {
                let at: Vec<u32> = at.iter().map(|a| a.load(Ordering::Relaxed)).collect();
                format!("messages received per rank: {at:?}")
            }
        };
        let out = with_deadline(&what, Duration::from_secs(60), report, move || {
            spillway_runtime::run(&config, |rank| -> Result<u32, Error> {
                let (r, n) = (rank.rank(), rank.size());
                let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
                let any = Pattern {
                    context: 5,
                    source: None,
                    tag: None,
                };
                let mut expected = 0u32;
                for i in 0..ITERATIONS {
                    rank.post(next, 5, (i % 4) as i32, Payload::copy_of(&i.to_le_bytes()))?;
                    let env = if i % 3 == 0 {
                        let info = rank.probe(any, WaitKind::Probe)?;
                        rank.recv(
                            Pattern {
                                source: Some(info.source),
                                tag: Some(info.tag),
                                ..any
                            },
                            WaitKind::Recv,
                        )?
                    } else {
                        rank.recv(any, WaitKind::Recv)?
                    };
                    let got = u32::from_le_bytes(env.payload.as_bytes().try_into().unwrap());
                    assert_eq!(
                        (env.source, env.tag, got),
                        (prev, (expected % 4) as i32, expected),
                        "rank {r}: message {expected} from rank {prev} out of order"
                    );
                    expected += 1;
                    at[r as usize].store(expected, Ordering::Relaxed);
                    if i % 256 == 255 {
                        node_barrier(rank, 0xb000 + u64::from(i / 256))?;
                    }
                }
                Ok(expected)
            })
        })
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(out.iter().all(|&c| c == ITERATIONS), "{what}: {out:?}");
    }
}
