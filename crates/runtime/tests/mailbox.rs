//! Message matching through the public API, against a sequential model of MPI's rules.
//!
//! Random schedules of sends (from three other ranks and from the receiver itself, on one or
//! two nodes, small messages and messages large enough to spill to disk under a budget),
//! receives posted with exact and wildcard patterns, tests, blocking waits (also a wait that
//! only the next send completes, so the receiver blocks and is woken by it), cancels and
//! probes. The receiver (rank 0) orders every event: another rank sends only when told to,
//! and tells when it has, so the order of arrivals is the schedule's. After each event the
//! runtime's answer is compared with the model's:
//! * a message goes to the oldest posted receive it matches, else to the queue;
//! * a receive takes the oldest queued message it matches;
//! * a cancelled receive that had matched a message puts it back in its place by arrival;
//! * a probe reports the oldest queued message it matches.
//!
//! Together these give per (source, tag) FIFO with wildcard receives.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use spillway_runtime::{run, Config, Envelope, Pattern, Payload, Rank, RecvId, WaitKind};
use support::with_deadline;

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Ranks 1..=SENDERS send when told; rank 0 receives (and sends to itself).
const SENDERS: u32 = 3;
const TAGS: i32 = 3;
const DATA: u64 = 0xda7a;
/// Rank 0 to a sender: send a message (tag 1) or stop (tag 2).
const ORDER: u64 = 0x0de2;
/// A sender to rank 0: sent.
const SENT: u64 = 0x5e47;
const SMALL: usize = 12;
/// Longer than the spill threshold of the budgeted runs.
const BIG: usize = 6000;

#[derive(Debug, Clone)]
enum Op {
    /// `from` sends a message with `tag`; with `wait`, if the model says the message
    /// completes a posted receive, rank 0 waits for that receive instead of for the sender's
    /// word (it blocks until the delivery wakes it).
    Send {
        from: u32,
        tag: i32,
        big: bool,
        wait: bool,
    },
    Post(Option<u32>, Option<i32>),
    /// `test_recv` of a receive posted earlier (index modulo the receives so far).
    Test(usize),
    /// `wait_recv` of a receive posted earlier, if the model says it has its message (else
    /// `test_recv`, which must find nothing).
    Wait(usize),
    Cancel(usize),
    Probe(Option<u32>, Option<i32>),
}

fn op() -> impl Strategy<Value = Op> {
    let source = proptest::option::weighted(0.6, 0..=SENDERS);
    let tag = proptest::option::weighted(0.6, 0..TAGS);
    prop_oneof![
        4 => (0..=SENDERS, 0..TAGS, proptest::bool::weighted(0.2), any::<bool>())
            .prop_map(|(from, tag, big, wait)| Op::Send { from, tag, big, wait }),
        4 => (source.clone(), tag.clone()).prop_map(|(s, t)| Op::Post(s, t)),
        2 => (0..64usize).prop_map(Op::Test),
        1 => (0..64usize).prop_map(Op::Wait),
        1 => (0..64usize).prop_map(Op::Cancel),
        1 => (source, tag).prop_map(|(s, t)| Op::Probe(s, t)),
    ]
}

/// A message as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct M {
    id: u32,
    source: u32,
    tag: i32,
    len: usize,
    arrival: u64,
}

type Pat = (Option<u32>, Option<i32>);

fn matches(p: Pat, m: &M) -> bool {
    p.0.is_none_or(|s| s == m.source) && p.1.is_none_or(|t| t == m.tag)
}

/// MPI matching, sequentially and without indexes: lists in arrival and posting order.
#[derive(Default)]
struct Model {
    /// Unmatched messages in arrival order.
    queued: Vec<M>,
    /// Pending receives (index, pattern) in posting order.
    posted: Vec<(usize, Pat)>,
    /// Receives that matched a message not taken yet.
    matched: HashMap<usize, M>,
    arrivals: u64,
}

impl Model {
    /// A message arrives; returns the receive it completes.
    fn arrive(&mut self, mut m: M) -> Option<usize> {
        m.arrival = self.arrivals;
        self.arrivals += 1;
        match self.posted.iter().position(|&(_, p)| matches(p, &m)) {
            Some(i) => {
                let (idx, _) = self.posted.remove(i);
                self.matched.insert(idx, m);
                Some(idx)
            }
            None => {
                self.queued.push(m);
                None
            }
        }
    }

    fn post(&mut self, idx: usize, p: Pat) {
        match self.queued.iter().position(|m| matches(p, m)) {
            Some(i) => {
                let m = self.queued.remove(i);
                self.matched.insert(idx, m);
            }
            None => self.posted.push((idx, p)),
        }
    }

    fn take(&mut self, idx: usize) -> Option<M> {
        self.matched.remove(&idx)
    }

    fn has(&self, idx: usize) -> bool {
        self.matched.contains_key(&idx)
    }

    fn cancel(&mut self, idx: usize) {
        if let Some(i) = self.posted.iter().position(|&(x, _)| x == idx) {
            self.posted.remove(i);
        } else if let Some(m) = self.matched.remove(&idx) {
            let at = self.queued.partition_point(|q| q.arrival < m.arrival);
            self.queued.insert(at, m);
        }
    }

    fn probe(&self, p: Pat) -> Option<M> {
        self.queued.iter().find(|m| matches(p, m)).copied()
    }
}

fn body(id: u32, len: usize) -> Vec<u8> {
    let mut b: Vec<u8> = (0..len).map(|i| (id as usize * 31 + i) as u8).collect();
    b[..4].copy_from_slice(&id.to_le_bytes());
    b
}

/// Checks a received envelope against the model's message.
fn same(env: &Envelope, want: &M, what: &str) -> TestResult {
    let bytes = env.payload.as_bytes();
    let id = u32::from_le_bytes(bytes[..4].try_into()?);
    if (env.context, env.source, env.tag, id, bytes.len())
        != (DATA, want.source, want.tag, want.id, want.len)
    {
        return Err(format!(
            "{what}: got message {id} from {} tag {} ({} bytes), the model says {want:?}",
            env.source,
            env.tag,
            bytes.len()
        )
        .into());
    }
    if bytes != body(id, want.len) {
        return Err(format!("{what}: the body of message {id} changed").into());
    }
    Ok(())
}

fn pattern(p: Pat) -> Pattern {
    Pattern {
        context: DATA,
        source: p.0,
        tag: p.1,
    }
}

/// Rank 0: runs the schedule against the model.
fn receiver(rank: &Rank, ops: &[Op]) -> TestResult<usize> {
    let mut model = Model::default();
    let mut ids: Vec<RecvId> = Vec::new();
    let mut next_id = 0u32;
    let mut checks = 0usize;
    for (step, op) in ops.iter().enumerate() {
        let what = format!("step {step} ({op:?})");
        match *op {
            Op::Send {
                from,
                tag,
                big,
                wait,
            } => {
                let len = if big { BIG } else { SMALL };
                let m = M {
                    id: next_id,
                    source: from,
                    tag,
                    len,
                    arrival: 0,
                };
                next_id += 1;
                let completes = model.arrive(m);
                if from == 0 {
                    rank.post(0, DATA, tag, Payload::copy_of(&body(m.id, len)))?;
                } else {
                    let mut order = m.id.to_le_bytes().to_vec();
                    order.extend_from_slice(&(len as u32).to_le_bytes());
                    order.extend_from_slice(&tag.to_le_bytes());
                    rank.post(from, ORDER, 1, Payload::copy_of(&order))?;
                }
                if let (true, Some(idx)) = (wait, completes) {
                    let env = rank.wait_recv(ids[idx], WaitKind::Recv)?;
                    let want = model.take(idx).expect("the model matched it");
                    same(&env, &want, &what)?;
                    checks += 1;
                }
                if from != 0 {
                    let done = Pattern {
                        context: SENT,
                        source: Some(from),
                        tag: Some(0),
                    };
                    rank.recv(done, WaitKind::Recv)?;
                }
            }
            Op::Post(s, t) => {
                ids.push(rank.post_recv(pattern((s, t))));
                model.post(ids.len() - 1, (s, t));
            }
            Op::Test(i) | Op::Wait(i) if !ids.is_empty() => {
                let idx = i % ids.len();
                let got = if matches!(op, Op::Wait(_)) && model.has(idx) {
                    Some(rank.wait_recv(ids[idx], WaitKind::Recv)?)
                } else {
                    rank.test_recv(ids[idx])?
                };
                match (got, model.take(idx)) {
                    (None, None) => {}
                    (Some(env), Some(want)) => same(&env, &want, &what)?,
                    (got, want) => {
                        return Err(format!(
                            "{what}: receive {idx} got {:?}, the model says {want:?}",
                            got.map(|e| (e.source, e.tag))
                        )
                        .into())
                    }
                }
                checks += 1;
            }
            Op::Cancel(i) if !ids.is_empty() => {
                let idx = i % ids.len();
                rank.cancel_recv(ids[idx]);
                model.cancel(idx);
            }
            Op::Probe(s, t) => {
                let got = rank.iprobe(&pattern((s, t)));
                let want = model.probe((s, t)).map(|m| (m.source, m.tag, m.len));
                if got.map(|i| (i.source, i.tag, i.bytes)) != want {
                    return Err(format!("{what}: probe found {got:?}, the model {want:?}").into());
                }
                checks += 1;
            }
            Op::Test(_) | Op::Wait(_) | Op::Cancel(_) => {}
        }
    }
    // Whatever matched and was not taken, then everything still queued, in the model's order.
    let mut left: Vec<usize> = model.matched.keys().copied().collect();
    left.sort();
    for idx in left {
        let env = rank.test_recv(ids[idx])?;
        let want = model.take(idx);
        match env {
            Some(env) => same(&env, &want.expect("left"), "at the end")?,
            None => return Err(format!("at the end: receive {idx} lost {want:?}").into()),
        }
        checks += 1;
    }
    while let Some(want) = model.probe((None, None)) {
        ids.push(rank.post_recv(pattern((None, None))));
        model.post(ids.len() - 1, (None, None));
        let env = rank.test_recv(*ids.last().expect("just posted"))?;
        let want = model.take(ids.len() - 1).unwrap_or(want);
        same(
            &env.ok_or("at the end: a queued message is missing")?,
            &want,
            "drain",
        )?;
        checks += 1;
    }
    if let Some(extra) = rank.iprobe(&pattern((None, None))) {
        return Err(format!("at the end: an unexpected message is queued: {extra:?}").into());
    }
    for s in 1..=SENDERS {
        rank.post(s, ORDER, 2, Payload::empty())?;
    }
    Ok(checks)
}

/// Ranks 1..: send what rank 0 orders, then say so.
fn sender(rank: &Rank) -> TestResult<usize> {
    let order = Pattern {
        context: ORDER,
        source: Some(0),
        tag: None,
    };
    loop {
        let env = rank.recv(order, WaitKind::Recv)?;
        if env.tag == 2 {
            return Ok(0);
        }
        let b = env.payload.as_bytes();
        let id = u32::from_le_bytes(b[..4].try_into()?);
        let len = u32::from_le_bytes(b[4..8].try_into()?) as usize;
        let tag = i32::from_le_bytes(b[8..12].try_into()?);
        rank.post(0, DATA, tag, Payload::copy_of(&body(id, len)))?;
        rank.post(0, SENT, 0, Payload::empty())?;
    }
}

fn run_schedule(ops: Vec<Op>, nodes: u32, running: u32, spill: bool) -> Result<usize, String> {
    let mut config = Config::new(SENDERS + 1).nodes(nodes).running(running);
    if spill {
        config = config.mem_budget(32 << 10).message_spill_threshold(1024);
    }
    let ops = Arc::new(ops);
    let what = format!("nodes {nodes} running {running} spill {spill}");
    let out = with_deadline(&what, Duration::from_secs(30), String::new, move || {
        run(&config, |rank| {
            if rank.rank() == 0 {
                receiver(rank, &ops)
            } else {
                sender(rank)
            }
        })
    });
    out.map(|c| c[0]).map_err(|e| format!("{what}: {e}"))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mailbox_matches_a_sequential_model_of_mpi_matching(
        ops in proptest::collection::vec(op(), 1..80),
        nodes in 1u32..=2,
        running in 1u32..=2,
        spill in proptest::bool::weighted(0.3),
    ) {
        let checks = run_schedule(ops, nodes, running, spill);
        prop_assert!(checks.is_ok(), "{}", checks.unwrap_err());
    }
}
