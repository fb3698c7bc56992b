//! MapReduce operations: the [`MapReduce`] object and its settings ([`stats`] counts what an
//! operation did, [`pipeline`] runs one operation, [`group`] groups entries by key and
//! reduces them, [`inbox`] exchanges the sorted runs, [`kept`] keeps what a recovery needs,
//! [`recovery`] detects and recovers lost ranks, [`process_loss`] handles processes lost for
//! real).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use spillway_comm::Comm;

use crate::data::{Data, Values};
use crate::dataset::Dataset;
use crate::emit::Emitter;
use crate::error::Error;
use crate::ft::{self, FaultTolerance, FtStats, Members, Replicated};
use crate::hash::HashRanges;
use crate::Input;

mod group;
mod inbox;
mod kept;
mod pipeline;
mod process_loss;
mod recovery;
mod stats;

pub use group::{Output, MAX_TOTALS};
pub use stats::OpStats;

use kept::FtState;

/// Identifies MapReduce objects within a process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Local aggregation across the ranks of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAggregation {
    /// With a combiner and more than one node (the default).
    Auto,
    /// Always when there is a combiner and a node has more than one rank.
    On,
    /// Never.
    Off,
}

impl NodeAggregation {
    /// Every setting.
    pub const ALL: [NodeAggregation; 3] = [
        NodeAggregation::Auto,
        NodeAggregation::On,
        NodeAggregation::Off,
    ];

    /// The setting's name on a command line: `auto`, `on` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            NodeAggregation::Auto => "auto",
            NodeAggregation::On => "on",
            NodeAggregation::Off => "off",
        }
    }
}

/// Iterative MapReduce over the ranks of a communicator (the thesis's design):
///
/// * A key's encoding is hashed with a seeded 64-bit xxHash (XXH3); rank `l` owns a
///   contiguous range of hashes ([`HashRanges`]).
/// * The map function emits pairs into a buffer of entries with (hash, index) pairs, or,
///   with a combiner, into a hash table (indexed by the low bits of the same hash, each
///   slot holding the hash, a short key and the value, prefetched ahead) that combines the
///   values of equal keys at once. Full buffers are radix-sorted by hash, grouped by key and written
///   as sorted runs `[hash][size][key][values...]` (the size lets a reader skip an entry);
///   runs beyond the memory allowance go to the spill directory, and several runs are
///   merged (from disk) into one send buffer sorted by hash, hence by destination.
/// * With a combiner and several nodes, the ranks of a node first exchange their send
///   buffers inside the node (shared memory) and combine again, so one merged output per
///   node and key crosses the network (Twister's local aggregation).
/// * One all-to-all-v per operation moves every destination's segment; when the data
///   exceeds the allowance it runs in rounds of bounded size and received blocks beyond
///   the allowance are appended to a spill file. The receiver merges the sorted blocks of
///   all sources (from memory or disk), groups the entries of each key and calls the
///   reduce function.
///
/// The output of an operation is a [`Dataset`] on the ranks that reduced it and the input
/// of the next operation, in place: there is no other per-rank state.
///
/// # Memory
/// Each rank holds at most about the allowance (default: a quarter of the node's budget
/// divided by its ranks, or unbounded without a budget) on its heap in each phase, plus
/// one entry per source while merging; everything else is in the spill directory or in
/// storage-backed memory.
///
/// # Fault tolerance
/// With [`fault_tolerance`](Self::fault_tolerance) (the thesis's section 5.2.2) every
/// operation keeps its send buffer after the shuffle, and the segments a rank sent to the
/// ranks of its own node go to its *buddy* (the rank with the same local index on the next
/// node; with one node, the next rank). Failures are detected by a collective before the
/// shuffle (injected losses, [`Injection`](crate::Injection); a panicking map or combine
/// function) and after the reduce (a panicking reduce function). Then:
///
/// * before the shuffle of operation `K`: the lost ranks leave (a split without them); the
///   survivors send what they sent to the lost ranks in the shuffle of `K - 1`, buddies add
///   the lost ranks' node-local messages, the lost hash ranges are split evenly over the
///   survivors ([`HashRanges::split_lost`]); the reduce of `K - 1` runs on that data and
///   the map of `K` on its output, which joins the survivors' own map output, re-partitioned
///   for the new rank count; the shuffle of `K` runs on the survivors;
/// * after the reduce of `K`: the lost rank hands its kept buffer to its buddy and leaves;
///   the survivors reduce what had been sent to it into their outputs and replicate their
///   kept buffers again for the new owners and buddies.
///
/// An operation's input must be rebuildable: the previous operation's output, a
/// [`Replicated`] dataset ([`replicate`](Self::replicate), for inputs of the first
/// operation or datasets read later), or re-readable files ([`TextFiles`](crate::TextFiles)).
/// Losses the replicas do not cover (a node and the node holding its replicas in the same
/// operation, every rank), a failure during a recovery, or an input that cannot be rebuilt
/// end the job on every rank with [`Error::Unrecoverable`]; a lost rank gets
/// [`Error::Lost`] and must leave the job. A reduce function keeps no state across
/// operations except through values it owns (it may be run again in a recovery): hence
/// the `'static` bound on reduce functions.
///
/// Under MPI a lost node is a process whose ranks all leave; a process that dies ends the
/// job (MPI without ULFM cannot let the others go on; use checkpoints).
pub struct MapReduce<'c, 'r> {
    comm: Comm<'r>,
    node: Option<Comm<'r>>,
    ranges: HashRanges,
    memory: usize,
    node_aggregation: NodeAggregation,
    stats: Vec<OpStats>,
    ft: Option<FtState>,
    /// Totals kept per operation ([`with_totals`](Self::with_totals)), and those of the last.
    total_slots: usize,
    totals: Vec<f64>,
    /// After a real loss found at the end of an operation that other survivors had already
    /// left: the lost members and the survivors' communicator, for the recovery before the
    /// next shuffle.
    pending_loss: Option<(Vec<usize>, Comm<'r>)>,
    _c: std::marker::PhantomData<&'c Comm<'r>>,
}

/// Map-side buffers become runs at this size when there is no memory budget.
const UNBOUNDED_FLUSH: usize = 256 << 20;

impl<'c, 'r> MapReduce<'c, 'r> {
    /// MapReduce over the ranks of `comm`, with the memory allowance derived from the
    /// node's budget.
    pub fn new(comm: &'c Comm<'r>) -> MapReduce<'c, 'r> {
        let rank = comm.runtime();
        let memory = match rank.mem_budget() {
            Some(b) => {
                (b / (4 * u64::from(rank.local_size().max(1)))).clamp(256 << 10, 1 << 30) as usize
            }
            None => usize::MAX,
        };
        MapReduce {
            comm: comm.clone(),
            node: None,
            ranges: HashRanges::even(comm.size()),
            memory,
            node_aggregation: NodeAggregation::Auto,
            stats: Vec::new(),
            ft: None,
            total_slots: 0,
            totals: Vec::new(),
            pending_loss: None,
            _c: std::marker::PhantomData,
        }
    }

    /// Keeps `slots` totals per operation (at most [`MAX_TOTALS`]): what reduce functions
    /// [`add`](Output::add) is summed over all ranks with the operation's own collectives and
    /// is [`totals`](Self::totals) once it has returned. Every rank must ask for the same
    /// number.
    pub fn with_totals(mut self, slots: usize) -> Self {
        self.total_slots = slots.min(MAX_TOTALS);
        self
    }

    /// The totals of the last operation (see [`with_totals`](Self::with_totals)).
    pub fn totals(&self) -> &[f64] {
        &self.totals
    }

    /// Turns on fault tolerance (a collective): from now on every operation keeps its send
    /// buffer and replicates its node-local segments to the buddy rank, and a lost rank or
    /// node is recovered without restarting (see the crate's `ft` notes). Ranks that are
    /// lost get [`Error::Lost`] from the operation and must leave the job; the survivors
    /// go on with [`comm`](Self::comm).
    ///
    /// # Errors
    /// A communication error.
    pub fn fault_tolerance(mut self, settings: FaultTolerance) -> Result<Self, Error> {
        let members = Members::of(&self.comm)?;
        let bounded = self.memory != usize::MAX;
        let survivable = self.comm.runtime().survives_lost_processes();
        if let Some(kill) = settings
            .inject
            .iter()
            .find(|i| matches!(i, crate::Injection::Process { .. }))
        {
            if !survivable {
                return Err(Error::Invalid(format!(
                    "the injected failure {kill} kills an MPI process: it needs the MPI backend \
                     over several processes, built against an MPI with ULFM (Open MPI 5, run \
                     with mpirun --with-ft ulfm)"
                )));
            }
        }
        self.ft = Some(FtState {
            survivable,
            prior: None,
            reuse: Vec::new(),
            pos: crate::lost::at(self.stats.len() as u64 + 1, 0),
            last_totals: None,
            kept_partial: None,
            recovering: false,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            inject: settings.inject,
            members,
            kept: Vec::new(),
            table: self.ranges.clone(),
            held: Vec::new(),
            prev: None,
            stores: Vec::new(),
            spill: ft::keep_spill(self.comm.runtime(), bounded),
            stats: FtStats::default(),
        });
        Ok(self)
    }

    /// The communicator of the ranks still in the job (the one given, until a rank is
    /// lost).
    pub fn comm(&self) -> &Comm<'r> {
        &self.comm
    }

    /// Fault-tolerance costs and recoveries on this rank (`None` without fault tolerance).
    pub fn ft_stats(&self) -> Option<&FtStats> {
        self.ft.as_ref().map(|f| &f.stats)
    }

    /// Makes `data` a dataset whose parts are also held by each rank's buddy, so that a
    /// fault-tolerant operation reading it can rebuild a lost rank's part (a collective).
    /// Without fault tolerance it only wraps the data.
    ///
    /// # Errors
    /// Communication or storage errors.
    pub fn replicate<K: Data, V: Data>(
        &mut self,
        data: Dataset<K, V>,
    ) -> Result<Replicated<K, V>, Error> {
        let t = Instant::now();
        let members = self.ft.as_ref().map(|f| &f.members);
        let (r, sent) = ft::new_replicated(&self.comm, members, data)?;
        if let Some(f) = &mut self.ft {
            f.stores.push(std::rc::Rc::downgrade(&r.store));
            f.stats.bytes_replicated += sent;
            f.stats.save += t.elapsed();
        }
        Ok(r)
    }

    /// Sets the heap allowance of each rank in bytes (map buffers, the send buffer and
    /// received data each stay within it; beyond it they spill).
    pub fn memory(mut self, bytes: usize) -> Self {
        self.memory = bytes.max(1);
        self
    }

    /// The heap allowance of each rank in bytes, `None` when there is no memory budget.
    pub fn allowance(&self) -> Option<usize> {
        (self.memory != usize::MAX).then_some(self.memory)
    }

    /// Sets when node aggregation runs.
    pub fn node_aggregation(mut self, mode: NodeAggregation) -> Self {
        self.node_aggregation = mode;
        self
    }

    /// The hash ranges of the ranks.
    pub fn ranges(&self) -> &HashRanges {
        &self.ranges
    }

    /// Statistics of every operation so far, on this rank.
    pub fn stats(&self) -> &[OpStats] {
        &self.stats
    }

    /// One operation without a combiner: `map` is called for every input record and emits
    /// pairs; `reduce` is called once per distinct emitted key, on the rank that owns its
    /// hash, with all its values, and emits the output records.
    ///
    /// # Errors
    /// Communication errors, unreadable input, spill I/O errors.
    pub fn map_reduce<I, K, V, K2, V2, M, R>(
        &mut self,
        input: I,
        map: M,
        reduce: R,
    ) -> Result<Dataset<K2, V2>, Error>
    where
        I: Input,
        I::Key: Data,
        I::Value: Data,
        K: Data,
        V: Data,
        K2: Data,
        V2: Data,
        M: FnMut(I::Key, I::Value, &mut Emitter<'_, K, V>),
        R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>) + 'static,
    {
        self.operation(input, map, None, reduce)
    }

    /// One operation with a combiner: `combine(a, b)` merges value `b` into `a` and must be
    /// associative and commutative; it runs on the map side (within the rank and the node)
    /// so that each key reaches the reduce with few values.
    ///
    /// # Errors
    /// As [`map_reduce`](Self::map_reduce).
    pub fn map_combine_reduce<I, K, V, K2, V2, M, C, R>(
        &mut self,
        input: I,
        map: M,
        combine: C,
        reduce: R,
    ) -> Result<Dataset<K2, V2>, Error>
    where
        I: Input,
        I::Key: Data,
        I::Value: Data,
        K: Data,
        V: Data,
        K2: Data,
        V2: Data,
        M: FnMut(I::Key, I::Value, &mut Emitter<'_, K, V>),
        C: Fn(&mut V, V),
        R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>) + 'static,
    {
        self.operation(input, map, Some(&combine), reduce)
    }

    fn node_comm(&mut self, combining: bool) -> Option<Comm<'r>> {
        let rank = self.comm.runtime();
        let world = self.comm.size() == rank.size() as usize;
        let wanted = match self.node_aggregation {
            NodeAggregation::Off => false,
            NodeAggregation::Auto => combining && rank.nodes() > 1,
            NodeAggregation::On => combining,
        };
        if !wanted {
            return None;
        }
        if self.node.is_none() {
            self.node = if world {
                (rank.local_size() > 1).then(|| Comm::node(rank))
            } else {
                // After a failure: the survivors of this node (a collective on every rank,
                // whatever the size of its node).
                self.comm
                    .split(Some(rank.node()), i64::from(rank.rank()))
                    .ok()
                    .flatten()
            };
        }
        self.node.clone().filter(|n| n.size() > 1)
    }
}
