//! Iterative MapReduce on spillway ranks, after the decentralised BSP MapReduce of the
//! fault-tolerance thesis (KIT) with Twister's local aggregation.
//!
//! * [`Dataset`]: records partitioned over the ranks, in storage-backed memory; made from
//!   rank-local records ([`Dataset::from_local`], [`DatasetBuilder`]), counted, gathered.
//! * [`MapReduce`]: one object per communicator that runs operations
//!   ([`map_reduce`](MapReduce::map_reduce), [`map_combine_reduce`](MapReduce::map_combine_reduce));
//!   an operation's output is the next one's input ([`Input`]), and so are text files read in
//!   bounded chunks ([`TextFiles`]).
//! * [`Data`]: how keys and values become bytes (plain data by copy, others through
//!   [`Serde`]).
//! * Fault tolerance ([`MapReduce::fault_tolerance`], [`FaultTolerance`], [`Injection`],
//!   [`Replicated`]): lost ranks and nodes are recovered from kept send buffers and
//!   node-local replicas, without restarting, as in the thesis (section 5.2.2).
//!
//! ```
//! use spillway_comm::Comm;
//! use spillway_mapreduce::{Dataset, MapReduce};
//! use spillway_runtime::{run, Config};
//!
//! // Word count over 3 ranks: every rank contributes one line.
//! let counts = run(&Config::new(3), |rank| {
//!     let world = Comm::world(rank);
//!     let line = ["a b a", "b c", "a"][world.rank()].as_bytes().to_vec();
//!     let lines = Dataset::from_local(rank, [(0u64, line)])?;
//!     let mut mr = MapReduce::new(&world);
//!     let counts = mr.map_combine_reduce(
//!         lines,
//!         |_, text: Vec<u8>, emit| {
//!             for w in text.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty()) {
//!                 emit.emit_raw_key(w, 1u64);
//!             }
//!         },
//!         |a, b| *a += b,
//!         |word: Vec<u8>, ones, out| out.emit(&word, &ones.sum::<u64>()),
//!     )?;
//!     let mut all = counts.gather(&world, 0)?.unwrap_or_default();
//!     all.sort();
//!     Ok::<_, spillway_mapreduce::Error>(all)
//! })
//! .unwrap();
//! assert_eq!(counts[0], [(b"a".to_vec(), 3), (b"b".to_vec(), 2), (b"c".to_vec(), 1)]);
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(missing_docs, unreachable_pub)]

mod binary;
mod data;
mod dataset;
mod distinct;
mod emit;
mod error;
mod ft;
mod hash;
mod job;
mod lost;
mod run;
mod share;
mod text;
mod write;

pub use binary::BinaryFiles;
pub use data::{Data, Serde, Values};
pub use dataset::{Dataset, DatasetBuilder};
pub use emit::Emitter;
pub use error::Error;
pub use ft::{FaultTolerance, FtStats, Injection, KillAt, RecoveryStats, Replicated};
pub use hash::HashRanges;
pub use job::{MapReduce, NodeAggregation, OpStats, Output, MAX_TOTALS};
pub use text::{is_space, TextFiles};

/// The input of an operation: a source of `(key, value)` records on each rank, consumed
/// once.
pub trait Input {
    /// Key of an input record.
    type Key;
    /// Value of an input record.
    type Value;

    /// Calls `f` with every record of this rank's part.
    ///
    /// # Errors
    /// If the records cannot be read.
    fn for_each(self, f: &mut dyn FnMut(Self::Key, Self::Value)) -> Result<(), Error>;

    /// How the part of a lost rank is rebuilt when the input is used by a fault-tolerant
    /// operation ([`MapReduce::fault_tolerance`]); by default it cannot be, and losing a
    /// rank in an operation reading this input ends the job with an error.
    fn recovery(&self) -> Recovery<Self::Key, Self::Value> {
        Recovery::none()
    }
}

/// How a fault-tolerant operation rebuilds the part of its input that was on a lost rank.
pub struct Recovery<K, V>(pub(crate) RecoveryKind<K, V>);

/// A function that calls its last argument with every record of the part of rank `r` of
/// `p` ranks (`(r, p, f)`).
pub type RereadFn<K, V> = Box<dyn Fn(usize, usize, &mut dyn FnMut(K, V)) -> Result<(), Error>>;

pub(crate) enum RecoveryKind<K, V> {
    None,
    /// The output of an operation: rebuilt from the kept send buffers.
    Output {
        mr: u64,
        op: u64,
    },
    /// A replicated dataset: rebuilt from its replica.
    Replicated(std::rc::Rc<std::cell::RefCell<ft::Store>>),
    /// Any rank can read a lost rank's part.
    Reread(RereadFn<K, V>),
    Both(Box<Recovery<K, V>>, Box<Recovery<K, V>>),
}

impl<K, V> Recovery<K, V> {
    /// Not rebuildable.
    pub fn none() -> Recovery<K, V> {
        Recovery(RecoveryKind::None)
    }

    /// Rebuildable by any surviving rank: `read(r, p, f)` calls `f` with every record of
    /// the part rank `r` of `p` had.
    pub fn reread(read: RereadFn<K, V>) -> Recovery<K, V> {
        Recovery(RecoveryKind::Reread(read))
    }
}

impl<K, V> std::fmt::Debug for Recovery<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.0 {
            RecoveryKind::None => "none",
            RecoveryKind::Output { .. } => "output",
            RecoveryKind::Replicated(_) => "replicated",
            RecoveryKind::Reread(_) => "reread",
            RecoveryKind::Both(..) => "both",
        };
        f.write_str(kind)
    }
}

/// Two inputs read one after the other as one (e.g. a dataset of edges and a dataset of
/// vertices, so that a map sees both).
#[derive(Debug)]
pub struct Chain<A, B>(pub A, pub B);

impl<A: Input, B: Input<Key = A::Key, Value = A::Value>> Input for Chain<A, B> {
    type Key = A::Key;
    type Value = A::Value;

    fn for_each(self, f: &mut dyn FnMut(A::Key, A::Value)) -> Result<(), Error> {
        self.0.for_each(f)?;
        self.1.for_each(f)
    }

    fn recovery(&self) -> Recovery<A::Key, A::Value> {
        Recovery(RecoveryKind::Both(
            Box::new(self.0.recovery()),
            Box::new(self.1.recovery()),
        ))
    }
}
