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
//!
//! The settings and injected failures are in `inject`, what fault tolerance cost in `stats`,
//! the members and their buddies in `members`; this module keeps the replicated datasets and
//! the helpers the recoveries of [`MapReduce`](crate::MapReduce) use.

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::rc::{Rc, Weak};

use spillway_comm::Comm;
use spillway_runtime::{Rank, SbVec};

use crate::data::Data;
use crate::dataset::{decode_records, Dataset};
use crate::error::Error;
use crate::run::{Run, Spill, Store as RunStore};
use crate::{Input, Recovery, RecoveryKind};

mod inject;
mod members;
mod stats;
#[cfg(test)]
mod tests;

pub use inject::{FaultTolerance, Injection, KillAt};
pub(crate) use members::{coverage, globals, Members};
pub use stats::{FtStats, RecoveryStats};

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

/// Keeps what a rank needs across operations when the budget is bounded.
pub(crate) fn keep_spill(rank: &Rank, bounded: bool) -> Spill {
    Spill::new(rank.spill_dir(), if bounded { 0 } else { usize::MAX })
}
