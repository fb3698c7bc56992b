//! Fault tolerance without checkpoints (the thesis's section 5.2.2): what each rank keeps
//! after a shuffle, where its replicas go, how failures are injected and what a recovery
//! cost.
//!
//! * After every shuffle each rank keeps its send buffer (a hash-sorted run). The segments
//!   it sent to ranks of its own node (itself included) are copied to its *buddy*: the rank
//!   with the same local index on the next node (with one node: the next rank).
//! * Failures are detected at two points of every operation, by a collective over a flag
//!   per rank: before the shuffle (injected failures, a map or combine function that
//!   panicked) and after the reduce (a reduce function that panicked).
//! * Before the shuffle of operation `K`, a lost rank's input (the output of operation
//!   `K - 1`) is rebuilt by the survivors: every survivor sends what it sent to the lost
//!   ranks in the last shuffle, buddies add the lost node's node-local messages, the lost
//!   hash ranges are split evenly over the survivors, the previous reduce runs on that data
//!   and the current map on its output, which joins the survivors' map output,
//!   re-partitioned for the new rank count.

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::rc::{Rc, Weak};
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;
use spillway_comm::{Collectives, Comm};
use spillway_runtime::{Rank, SbVec};

use crate::data::Data;
use crate::dataset::{decode_records, Dataset};
use crate::error::Error;
use crate::run::{Run, Spill, Store as RunStore};
use crate::{Input, Recovery, RecoveryKind};

/// Fault-tolerance settings of a [`MapReduce`](crate::MapReduce) object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultTolerance {
    pub(crate) inject: Vec<Injection>,
}

impl FaultTolerance {
    /// Fault tolerance with no injected failures.
    pub fn new() -> FaultTolerance {
        FaultTolerance::default()
    }

    /// Adds an injected failure.
    pub fn inject(mut self, failure: Injection) -> FaultTolerance {
        self.inject.push(failure);
        self
    }

    /// The injected failures.
    pub fn injections(&self) -> &[Injection] {
        &self.inject
    }
}

/// A failure to inject (for tests and demonstrations): the ranks are lost just before the
/// shuffle of operation `op` (operations count from 1 in the order they run on a
/// [`MapReduce`](crate::MapReduce) object; nodes and ranks from 0, in the job's original
/// numbering). A lost rank never comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injection {
    /// Every rank of virtual node `node`.
    Node {
        /// The node.
        node: u32,
        /// The operation.
        op: u64,
    },
    /// One rank.
    Rank {
        /// The rank.
        rank: u32,
        /// The operation.
        op: u64,
    },
    /// The MPI process of node `node` kills itself (SIGKILL) at `at` of operation `op`: a
    /// real loss, which the survivors recover from only with an MPI that has ULFM (see
    /// [`Rank::survives_lost_processes`](spillway_runtime::Rank::survives_lost_processes)).
    Process {
        /// The node (MPI process).
        node: u32,
        /// The operation.
        op: u64,
        /// Where in the operation.
        at: KillAt,
    },
}

/// Where in an operation an injected process kill happens ([`Injection::Process`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillAt {
    /// After the map, before the failure detection that precedes the shuffle.
    Map,
    /// After that detection, before the shuffle.
    Shuffle,
    /// After the shuffle, before the send buffer's replicas go to the buddy.
    Keep,
    /// After the replicas, before the reduce (the others find out after theirs).
    Reduce,
}

impl KillAt {
    fn name(self) -> &'static str {
        match self {
            KillAt::Map => "map",
            KillAt::Shuffle => "shuffle",
            KillAt::Keep => "keep",
            KillAt::Reduce => "reduce",
        }
    }
}

impl Injection {
    /// Whether the failure hits the rank `rank` of node `node` at operation `op` (a loss
    /// detected before the shuffle; process kills are not: see [`kills`](Self::kills)).
    pub fn hits(&self, rank: u32, node: u32, op: u64) -> bool {
        match *self {
            Injection::Node { node: n, op: k } => n == node && k == op,
            Injection::Rank { rank: r, op: k } => r == rank && k == op,
            Injection::Process { .. } => false,
        }
    }

    /// Whether the process of node `node` is to kill itself at `at` of operation `op`.
    pub fn kills(&self, node: u32, op: u64, at: KillAt) -> bool {
        matches!(*self, Injection::Process { node: n, op: k, at: a } if n == node && k == op && a == at)
    }

    /// The operation it happens at.
    pub fn op(&self) -> u64 {
        match *self {
            Injection::Node { op, .. }
            | Injection::Rank { op, .. }
            | Injection::Process { op, .. } => op,
        }
    }
}

impl fmt::Display for Injection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Injection::Node { node, op } => write!(f, "node:{node}@op:{op}"),
            Injection::Rank { rank, op } => write!(f, "rank:{rank}@op:{op}"),
            Injection::Process {
                node,
                op,
                at: KillAt::Map,
            } => write!(f, "process:{node}@op:{op}"),
            Injection::Process { node, op, at } => {
                write!(f, "process:{node}@op:{op}:{}", at.name())
            }
        }
    }
}

impl FromStr for Injection {
    type Err = String;

    /// Parses `node:N@op:K`, `rank:R@op:K` or `process:N@op:K[:map|shuffle|keep|reduce]`
    /// (`K >= 1`).
    fn from_str(s: &str) -> Result<Injection, String> {
        let bad = || {
            format!(
                "`{s}`: expected node:N@op:K, rank:R@op:K or \
                 process:N@op:K[:map|shuffle|keep|reduce] (K from 1)"
            )
        };
        let (what, op) = s.split_once('@').ok_or_else(bad)?;
        let rest = op.strip_prefix("op:").ok_or_else(bad)?;
        let (op, at) = match rest.split_once(':') {
            Some((k, at)) => (k, Some(at)),
            None => (rest, None),
        };
        let op: u64 = op.parse().ok().filter(|&k| k >= 1).ok_or_else(bad)?;
        let at = match at {
            None => None,
            Some(name) => Some(
                [KillAt::Map, KillAt::Shuffle, KillAt::Keep, KillAt::Reduce]
                    .into_iter()
                    .find(|a| a.name() == name)
                    .ok_or_else(bad)?,
            ),
        };
        if let Some(n) = what.strip_prefix("process:") {
            return Ok(Injection::Process {
                node: n.parse().map_err(|_| bad())?,
                op,
                at: at.unwrap_or(KillAt::Map),
            });
        }
        if at.is_some() {
            return Err(bad());
        }
        if let Some(n) = what.strip_prefix("node:") {
            Ok(Injection::Node {
                node: n.parse().map_err(|_| bad())?,
                op,
            })
        } else if let Some(r) = what.strip_prefix("rank:") {
            Ok(Injection::Rank {
                rank: r.parse().map_err(|_| bad())?,
                op,
            })
        } else {
            Err(bad())
        }
    }
}

/// Serialises a duration as seconds.
fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// What fault tolerance cost on one rank (after [`FtStats::total`]: counts summed over the
/// ranks, times of the slowest).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FtStats {
    /// Time keeping send buffers and sending the node-local segments to the buddy.
    #[serde(serialize_with = "secs", rename = "save_seconds")]
    pub save: Duration,
    /// Bytes of send buffers kept (summed over operations).
    pub bytes_kept: u64,
    /// Bytes sent to buddies as replicas (send-buffer segments and replicated datasets).
    pub bytes_replicated: u64,
    /// Every recovery, in order.
    pub recoveries: Vec<RecoveryStats>,
}

/// One recovery.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecoveryStats {
    /// The operation during which the failure was detected.
    pub op: u64,
    /// Where: "before shuffle" or "after reduce".
    pub detected: &'static str,
    /// The lost ranks (original numbering).
    pub lost_ranks: Vec<u32>,
    /// Ranks left.
    pub ranks_after: u64,
    /// Shrinking, collecting what was sent to the lost ranks and splitting it.
    #[serde(serialize_with = "secs", rename = "redistribute_seconds")]
    pub redistribute: Duration,
    /// The recovery shuffle.
    #[serde(serialize_with = "secs", rename = "shuffle_seconds")]
    pub shuffle: Duration,
    /// Re-running the reduce on the recovered data.
    #[serde(serialize_with = "secs", rename = "reduce_seconds")]
    pub reduce: Duration,
    /// Re-running the map on the recovered input (before the shuffle only).
    #[serde(serialize_with = "secs", rename = "map_seconds")]
    pub map: Duration,
    /// Merging with the survivors' map output, re-partitioned (and re-establishing
    /// replicas).
    #[serde(serialize_with = "secs", rename = "merge_seconds")]
    pub merge: Duration,
    /// All of it.
    #[serde(serialize_with = "secs", rename = "total_seconds")]
    pub total: Duration,
    /// Bytes moved in the recovery shuffle.
    pub bytes_moved: u64,
}

impl FtStats {
    /// Over all ranks of `comm` (a collective): counts summed, times of the slowest rank.
    ///
    /// # Errors
    /// A communication error.
    pub fn total(&self, comm: &Comm) -> Result<FtStats, Error> {
        use spillway_comm::{Max, Sum};
        let ns = |d: Duration| d.as_nanos() as u64;
        let c = comm.allreduce(&[self.bytes_kept, self.bytes_replicated], Sum)?;
        let mut times = vec![ns(self.save)];
        let mut moved = Vec::new();
        for r in &self.recoveries {
            times.extend([r.redistribute, r.shuffle, r.reduce, r.map, r.merge, r.total].map(ns));
            moved.push(r.bytes_moved);
        }
        let t = comm.allreduce(&times, Max)?;
        let moved = comm.allreduce(&moved, Sum)?;
        let d = Duration::from_nanos;
        let recoveries = self
            .recoveries
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let b = 1 + 6 * i;
                RecoveryStats {
                    redistribute: d(t[b]),
                    shuffle: d(t[b + 1]),
                    reduce: d(t[b + 2]),
                    map: d(t[b + 3]),
                    merge: d(t[b + 4]),
                    total: d(t[b + 5]),
                    bytes_moved: moved[i],
                    ..r.clone()
                }
            })
            .collect();
        Ok(FtStats {
            save: d(t[0]),
            bytes_kept: c[0],
            bytes_replicated: c[1],
            recoveries,
        })
    }
}

/// The members of a communicator: original rank and node of each.
#[derive(Debug, Clone)]
pub(crate) struct Members {
    pub(crate) global: Vec<u32>,
    pub(crate) node: Vec<u32>,
}

impl Members {
    /// Learns every member's rank and node (a collective).
    pub(crate) fn of(comm: &Comm) -> Result<Members, Error> {
        let rank = comm.runtime();
        let all = comm.allgather(&[rank.rank(), rank.node()])?;
        Ok(Members {
            global: all.iter().step_by(2).copied().collect(),
            node: all.iter().skip(1).step_by(2).copied().collect(),
        })
    }

    /// Without the members in `lost` (sorted indices).
    pub(crate) fn without(&self, lost: &[usize]) -> Members {
        let keep = |i: &usize| lost.binary_search(i).is_err();
        Members {
            global: (0..self.global.len())
                .filter(keep)
                .map(|i| self.global[i])
                .collect(),
            node: (0..self.node.len())
                .filter(keep)
                .map(|i| self.node[i])
                .collect(),
        }
    }

    /// The member holding member `i`'s replicas: the one with the same local index (modulo
    /// the next node's size) on the next node that has members; with one node, the next
    /// member on it; none if `i` is alone.
    pub(crate) fn buddy(&self, i: usize) -> Option<usize> {
        let mut nodes: Vec<u32> = self.node.clone();
        nodes.sort_unstable();
        nodes.dedup();
        let mine = self.node[i];
        let on = |n: u32| -> Vec<usize> {
            (0..self.node.len())
                .filter(|&j| self.node[j] == n)
                .collect()
        };
        let here = on(mine);
        let local = here
            .iter()
            .position(|&j| j == i)
            .expect("a member of its node");
        if nodes.len() == 1 {
            return (here.len() > 1).then(|| here[(local + 1) % here.len()]);
        }
        let k = nodes.binary_search(&mine).expect("its node");
        let next = on(nodes[(k + 1) % nodes.len()]);
        Some(next[local % next.len()])
    }

    /// Whether members `a` and `b` are on the same node.
    pub(crate) fn same_node(&self, a: usize, b: usize) -> bool {
        self.node[a] == self.node[b]
    }
}

/// A replicated dataset's data on one rank: its own part (with parts it adopted from lost
/// ranks) and the copies it holds of its wards' parts.
pub(crate) struct Store {
    primary: SbVec<u8>,
    /// (ward's original rank, its encoded records).
    held: Vec<(u32, Vec<u8>)>,
    consumed: bool,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("bytes", &self.primary.len())
            .field("held", &self.held.len())
            .field("consumed", &self.consumed)
            .finish()
    }
}

/// A dataset whose parts are also held by each rank's buddy, so that a fault-tolerant
/// operation can read the part of a lost rank (made by
/// [`MapReduce::replicate`](crate::MapReduce::replicate)). Use it for inputs that are not
/// the output of the operation before (the first operation's input, or a dataset read
/// again later).
pub struct Replicated<K, V> {
    pub(crate) store: Rc<RefCell<Store>>,
    _kv: PhantomData<fn() -> (K, V)>,
}

impl<K, V> fmt::Debug for Replicated<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.store.borrow().fmt(f)
    }
}

impl<K: Data, V: Data> Replicated<K, V> {
    /// This rank's records as stored (a copy, e.g. for a checkpoint) and their number; see
    /// [`Dataset::from_encoded`].
    pub fn encoded(&self) -> (Vec<u8>, u64) {
        let s = self.store.borrow();
        let bytes = s.primary.as_slice().to_vec();
        s.primary.unload();
        let mut n = 0;
        decode_records::<K, V>(&bytes, &mut |_, _| n += 1);
        (bytes, n)
    }
}

impl<K: Data, V: Data> Input for Replicated<K, V> {
    type Key = K;
    type Value = V;

    fn for_each(self, f: &mut dyn FnMut(K, V)) -> Result<(), Error> {
        let mut s = self.store.borrow_mut();
        s.consumed = true;
        decode_records(s.primary.as_slice(), f);
        s.primary.unload();
        Ok(())
    }

    fn recovery(&self) -> Recovery<K, V> {
        Recovery(RecoveryKind::Replicated(self.store.clone()))
    }
}

/// Sends `bytes` to member `to` (if any) and returns what arrived, by source (a
/// collective).
pub(crate) fn to_buddy(
    comm: &Comm,
    to: Option<usize>,
    bytes: &[u8],
) -> Result<Vec<(usize, Vec<u8>)>, Error> {
    to_buddy_reusing(comm, to, bytes, Vec::new())
}

/// As [`to_buddy`], receiving into the buffers of `reuse` while they last (their pages are
/// already mapped: receiving replicas every operation then costs no page faults).
pub(crate) fn to_buddy_reusing(
    comm: &Comm,
    to: Option<usize>,
    bytes: &[u8],
    mut reuse: Vec<Vec<u8>>,
) -> Result<Vec<(usize, Vec<u8>)>, Error> {
    let blocks: Vec<(usize, &[u8])> = to.map(|b| (b, bytes)).into_iter().collect();
    let mut got = Vec::new();
    comm.alltoallv_stream(&blocks, &mut |src, b| {
        let mut v = reuse.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(b);
        got.push((src, v));
        Ok(())
    })?;
    Ok(got)
}

/// Replicates the stores: every rank sends its part to its buddy and keeps what its wards
/// send (a collective; parts of wards that have none arrive empty).
pub(crate) fn replicate_store(
    comm: &Comm,
    members: &Members,
    store: &mut Store,
) -> Result<u64, Error> {
    let me = comm.rank();
    if members.global.len() != comm.size() {
        return Ok(0);
    }
    let to = members.buddy(me);
    let got = to_buddy(comm, to, store.primary.as_slice())?;
    let sent = if to.is_some() {
        store.primary.len() as u64
    } else {
        0
    };
    store.primary.unload();
    store.held = got
        .into_iter()
        .map(|(src, b)| (members.global[src], b))
        .collect();
    Ok(sent)
}

/// Makes a replicated dataset from `data` (a collective).
pub(crate) fn new_replicated<K: Data, V: Data>(
    comm: &Comm,
    members: Option<&Members>,
    data: Dataset<K, V>,
) -> Result<(Replicated<K, V>, u64), Error> {
    let primary = data.into_raw();
    let mut store = Store {
        primary,
        held: Vec::new(),
        consumed: false,
    };
    let sent = match members {
        Some(m) => replicate_store(comm, m, &mut store)?,
        None => 0,
    };
    Ok((
        Replicated {
            store: Rc::new(RefCell::new(store)),
            _kv: PhantomData,
        },
        sent,
    ))
}

/// After losing the members `lost_global`: every store that has not been read yet adopts
/// the parts of the lost ranks it holds, then all are replicated again over `comm` (the
/// survivors; a collective). Returns the bytes sent.
pub(crate) fn adopt_and_replicate(
    comm: &Comm,
    members: &Members,
    stores: &mut Vec<Weak<RefCell<Store>>>,
    lost_global: &[u32],
) -> Result<u64, Error> {
    stores.retain(|w| w.upgrade().is_some_and(|s| !s.borrow().consumed));
    let mut sent = 0;
    for w in stores.iter() {
        let s = w.upgrade().expect("retained");
        let mut s = s.borrow_mut();
        let held = std::mem::take(&mut s.held);
        for (ward, bytes) in held {
            if lost_global.contains(&ward) {
                s.primary.extend_from_slice(&bytes)?;
            }
        }
        sent += replicate_store(comm, members, &mut s)?;
    }
    Ok(sent)
}

/// Reads the parts of the lost ranks that this rank can rebuild from an input's recovery
/// description: replicas it holds, and, for re-readable inputs, the parts of the lost
/// ranks assigned to it (lost rank `lost[i]` to survivor `i % survivors`).
pub(crate) fn rebuild_input<K: Data, V: Data>(
    rec: &Recovery<K, V>,
    lost_global: &[u32],
    lost: &[usize],
    old_size: usize,
    new_rank: usize,
    new_size: usize,
    f: &mut dyn FnMut(K, V),
) -> Result<(), Error> {
    match &rec.0 {
        RecoveryKind::None | RecoveryKind::Output { .. } => Ok(()),
        RecoveryKind::Replicated(store) => {
            let s = store.borrow();
            for (ward, bytes) in &s.held {
                if lost_global.contains(ward) {
                    decode_records(bytes, f);
                }
            }
            Ok(())
        }
        RecoveryKind::Reread(read) => {
            for (i, &l) in lost.iter().enumerate() {
                if i % new_size == new_rank {
                    read(l, old_size, f)?;
                }
            }
            Ok(())
        }
        RecoveryKind::Both(a, b) => {
            rebuild_input(a, lost_global, lost, old_size, new_rank, new_size, f)?;
            rebuild_input(b, lost_global, lost, old_size, new_rank, new_size, f)
        }
    }
}

/// Why an input's lost parts cannot be rebuilt (`None` if they can), given the operation
/// whose send buffers are kept.
pub(crate) fn unrecoverable<K, V>(
    rec: &Recovery<K, V>,
    mr: u64,
    kept_op: Option<u64>,
) -> Option<String> {
    match &rec.0 {
        RecoveryKind::None => Some(
            "the operation's input is neither the previous operation's output nor replicated \
             (MapReduce::replicate) nor re-readable"
                .into(),
        ),
        RecoveryKind::Output { mr: m, op } => {
            if *m != mr {
                Some("the operation's input is the output of another MapReduce object".into())
            } else if kept_op != Some(*op) {
                Some(format!(
                    "the operation's input is the output of operation {op}, but the kept send \
                     buffers are those of operation {}",
                    kept_op.map_or("none".into(), |k| k.to_string())
                ))
            } else {
                None
            }
        }
        RecoveryKind::Replicated(_) | RecoveryKind::Reread(_) => None,
        RecoveryKind::Both(a, b) => {
            unrecoverable(a, mr, kept_op).or_else(|| unrecoverable(b, mr, kept_op))
        }
    }
}

/// Whether the input includes the output of an operation (then the previous reduce must
/// run on the recovered messages).
pub(crate) fn uses_output<K, V>(rec: &Recovery<K, V>) -> bool {
    match &rec.0 {
        RecoveryKind::Output { .. } => true,
        RecoveryKind::Both(a, b) => uses_output(a) || uses_output(b),
        _ => false,
    }
}

/// Moves a run to a file of `spill` (for runs kept across operations under a memory
/// budget).
pub(crate) fn run_to_file(run: Run, from: &Spill, to: &Spill) -> Result<Run, Error> {
    match run.store {
        RunStore::Mem(ref v) => {
            use std::io::Write;
            let mut f = to.file()?;
            f.write_all(v).map_err(|e| Error::spill(to.dir(), e))?;
            to.note_written(v.len());
            from.give_back(v.len());
            Ok(Run {
                store: RunStore::File(f),
                len: run.len,
                offsets: run.offsets,
                entries: run.entries,
            })
        }
        RunStore::File(_) => Ok(run),
    }
}

/// An in-memory run of entries (the offsets are not used).
pub(crate) fn bytes_run(bytes: Vec<u8>) -> Run {
    Run {
        len: bytes.len() as u64,
        store: RunStore::Mem(bytes),
        offsets: Vec::new(),
        entries: 0,
    }
}

/// The original ranks of the members `lost` of `members`.
pub(crate) fn globals(members: &Members, lost: &[usize]) -> Vec<u32> {
    lost.iter().map(|&i| members.global[i]).collect()
}

/// Checks that every lost member's replicas are on a survivor.
pub(crate) fn coverage(members: &Members, lost: &[usize]) -> Option<String> {
    for &l in lost {
        match members.buddy(l) {
            None => {
                return Some(format!(
                    "rank {} had nobody to hold its replicas (one rank left)",
                    members.global[l]
                ))
            }
            Some(b) if lost.binary_search(&b).is_ok() => {
                return Some(format!(
                    "rank {} (node {}) and the holder of its replicas, rank {} (node {}), were \
                     lost in the same operation",
                    members.global[l], members.node[l], members.global[b], members.node[b]
                ))
            }
            Some(_) => {}
        }
    }
    None
}

/// Keeps what a rank needs across operations when the budget is bounded.
pub(crate) fn keep_spill(rank: &Rank, bounded: bool) -> Spill {
    Spill::new(rank.spill_dir(), if bounded { 0 } else { usize::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injections_parse_and_print() {
        for s in [
            "node:2@op:3",
            "rank:0@op:1",
            "process:1@op:2",
            "process:3@op:1:shuffle",
            "process:0@op:4:keep",
            "process:2@op:2:reduce",
        ] {
            assert_eq!(s.parse::<Injection>().unwrap().to_string(), s);
        }
        for bad in [
            "node:2",
            "node:x@op:1",
            "rank:1@op:0",
            "disk:1@op:2",
            "rank:1@2",
            "process:1@op:2:later",
            "node:1@op:2:reduce",
        ] {
            assert!(bad.parse::<Injection>().is_err(), "{bad}");
        }
    }

    #[test]
    fn buddies_are_on_the_next_node() {
        // 3 nodes of 2 members.
        let m = Members {
            global: (0..6).collect(),
            node: vec![0, 0, 1, 1, 2, 2],
        };
        assert_eq!(
            (0..6).map(|i| m.buddy(i).unwrap()).collect::<Vec<_>>(),
            [2, 3, 4, 5, 0, 1]
        );
        // Node 1 lost one member: local index 1 of node 0 wraps to node 1's only member.
        let m2 = m.without(&[3]);
        assert_eq!(m2.buddy(1), Some(2));
        assert_eq!(m2.buddy(2), Some(3));
        // One node: the next member.
        let one = Members {
            global: vec![0, 1, 2],
            node: vec![0, 0, 0],
        };
        assert_eq!(one.buddy(2), Some(0));
        assert!(coverage(&one, &[1]).is_none());
        assert!(coverage(&m, &[2, 3, 4]).is_some());
    }
}
