//! One MapReduce operation: map (with combine), node aggregation, shuffle, reduce.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Weak;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use spillway_comm::{Collectives, Comm, Max, Sum};

use crate::data::{put, put_raw, take_raw, Data, Values};
use crate::dataset::{decode_records, Dataset, DatasetBuilder, Origin};
use crate::emit::{CombineFn, EmitState, Emitter, Sink};
use crate::error::Error;
use crate::ft::{self, FaultTolerance, FtStats, KillAt, Members, RecoveryStats, Replicated, Store};
use crate::hash::HashRanges;
use crate::lost::{self, Plan, Report};
use crate::run::{merge, push_entry, Cursor, Piece, Run, RunWriter, Spill, Store as RunStore};
use crate::{Input, Recovery};

/// What one operation did on one rank (or, after [`OpStats::total`], on all ranks: counts
/// added up, times the slowest rank's).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OpStats {
    /// Time in the map function and emitting.
    pub map: Duration,
    /// Time sorting, combining and merging map output into the send buffer (including the
    /// merge after node aggregation).
    pub combine: Duration,
    /// Time in the exchanges (node aggregation and the all-to-all).
    pub shuffle: Duration,
    /// Time merging received data and in the reduce function.
    pub reduce: Duration,
    /// Pairs the map function emitted.
    pub records_emitted: u64,
    /// Bytes of those pairs as entries (before combining).
    pub bytes_emitted: u64,
    /// Entries in the send buffer after combining (within the rank and, with node
    /// aggregation, within the node).
    pub records_combined: u64,
    /// Bytes of the send buffer after combining.
    pub bytes_combined: u64,
    /// Bytes moved between ranks of a node for node aggregation.
    pub bytes_node_shuffled: u64,
    /// Bytes sent to other ranks in the all-to-all.
    pub bytes_shuffled: u64,
    /// Bytes written to spill files (sorted runs and received data).
    pub bytes_spilled: u64,
    /// All-to-all rounds (1 unless the data exceeded the memory allowance).
    pub rounds: u64,
    /// Records the reduce function emitted.
    pub records_out: u64,
}

impl OpStats {
    /// The operation over all ranks: counts summed, times of the slowest rank (a
    /// collective).
    ///
    /// # Errors
    /// A communication error.
    pub fn total(&self, comm: &Comm) -> Result<OpStats, Error> {
        let c = comm.allreduce(
            &[
                self.records_emitted,
                self.bytes_emitted,
                self.records_combined,
                self.bytes_combined,
                self.bytes_node_shuffled,
                self.bytes_shuffled,
                self.bytes_spilled,
                self.records_out,
            ],
            Sum,
        )?;
        let ns = |d: Duration| d.as_nanos() as u64;
        let t = comm.allreduce(
            &[
                ns(self.map),
                ns(self.combine),
                ns(self.shuffle),
                ns(self.reduce),
                self.rounds,
            ],
            Max,
        )?;
        Ok(OpStats {
            map: Duration::from_nanos(t[0]),
            combine: Duration::from_nanos(t[1]),
            shuffle: Duration::from_nanos(t[2]),
            reduce: Duration::from_nanos(t[3]),
            rounds: t[4],
            records_emitted: c[0],
            bytes_emitted: c[1],
            records_combined: c[2],
            bytes_combined: c[3],
            bytes_node_shuffled: c[4],
            bytes_shuffled: c[5],
            bytes_spilled: c[6],
            records_out: c[7],
        })
    }
}

/// Where a reduce function puts its output records (they stay on this rank), and the
/// operation's totals ([`add`](Self::add)).
pub struct Output<K, V> {
    /// Where records go: a dataset, or (re-running a reduce in a recovery) a byte buffer.
    builder: Option<DatasetBuilder<K, V>>,
    raw: Vec<u8>,
    error: Option<Error>,
    records: u64,
    /// This rank's share of the operation's totals.
    sums: [f64; MAX_TOTALS],
}

/// The most totals an operation keeps ([`MapReduce::with_totals`]).
pub const MAX_TOTALS: usize = 8;

impl<K: Data, V: Data> Output<K, V> {
    /// Emits an output record.
    #[inline]
    pub fn emit(&mut self, key: &K, value: &V) {
        if self.error.is_none() {
            match &mut self.builder {
                Some(b) => {
                    if let Err(e) = b.push(key, value) {
                        self.error = Some(e);
                    }
                }
                None => {
                    put(key, &mut self.raw);
                    put(value, &mut self.raw);
                }
            }
            self.records += 1;
        }
    }

    /// Adds `value` to total `slot` of the operation: the sums over all ranks are
    /// [`MapReduce::totals`] once the operation has returned (declare the slots with
    /// [`MapReduce::with_totals`]). A reduce function that counts or sums on the side (changes,
    /// a residual) should do it here rather than in variables of its own: the totals are
    /// computed with the operation's own collectives, and the lost ranks' shares are computed
    /// again when ranks are lost.
    ///
    /// # Panics
    /// If `slot` is not below [`MAX_TOTALS`].
    #[inline]
    pub fn add(&mut self, slot: usize, value: f64) {
        self.sums[slot] += value;
    }
}

impl<K: Data, V: Data> Output<K, V> {
    fn new(builder: Option<DatasetBuilder<K, V>>, raw: Vec<u8>) -> Output<K, V> {
        Output {
            builder,
            raw,
            error: None,
            records: 0,
            sums: [0.0; MAX_TOTALS],
        }
    }
}

/// A reduce function kept for a recovery: the bodies of one hash in, the encoded output
/// records appended to the buffer.
type KeptReduce = Box<dyn FnMut(&[&[u8]], &mut Vec<u8>) -> Result<(), Error>>;

/// Erases the types of a reduce function so it can be kept for the next operation.
fn keep_reduce<K: Data, V: Data, K2: Data, V2: Data, R>(mut reduce: R) -> KeptReduce
where
    R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>) + 'static,
{
    Box::new(move |bodies: &[&[u8]], raw: &mut Vec<u8>| {
        let mut out = Output::<K2, V2>::new(None, std::mem::take(raw));
        for_each_key::<K>(bodies, |key, vals| {
            reduce(K::read(key), Values::new(vals), &mut out);
            Ok(())
        })?;
        *raw = out.raw;
        Ok(())
    })
}

/// What a merge calls for every hash: the hash and the bodies of its entries.
type OnHash<'a> = dyn FnMut(u64, &[&[u8]]) -> Result<(), Error> + 'a;

/// Fault-tolerance state of a [`MapReduce`] object.
struct FtState {
    id: u64,
    inject: Vec<crate::ft::Injection>,
    members: Members,
    /// Runs this rank sent in the last shuffle (and runs adopted from lost ranks).
    kept: Vec<Run>,
    /// Who owned each hash in the last shuffle (indices of the current communicator).
    table: HashRanges,
    /// Replicas of the node-local segments of wards' kept runs: (ward index, run).
    held: Vec<(usize, Run)>,
    /// The operation whose send buffers are kept, and its reduce.
    prev: Option<(u64, KeptReduce)>,
    stores: Vec<Weak<RefCell<Store>>>,
    spill: Spill,
    stats: FtStats,
    /// Whether processes can really be lost (MPI with ULFM): then the kept buffers, replicas
    /// and table of the operation before stay ([`prior`](Self::prior)) until an operation
    /// has ended everywhere, so that it can go back before its shuffle.
    survivable: bool,
    /// The generation before the current one, while the current operation may go back.
    prior: Option<Generation>,
    /// Buffers of released replicas, to receive the next ones into (their pages are mapped).
    reuse: Vec<Vec<u8>>,
    /// This rank's position in the fault-tolerant collectives (see [`crate::lost`]).
    pos: u64,
    /// The totals of the last detection after a reduce that completed here.
    last_totals: Option<Vec<f64>>,
    /// Ranks lost for real whose own kept buffers the survivors lack, until the next shuffle
    /// has replaced the kept buffers.
    kept_partial: Option<Vec<u32>>,
    /// A recovery from a real loss is under way.
    recovering: bool,
}

/// What a shuffle leaves for a recovery: the send buffers kept, the replicas held and who
/// owned each hash.
struct Generation {
    kept: Vec<Run>,
    held: Vec<(usize, Run)>,
    table: HashRanges,
}

impl FtState {
    /// A run to keep across operations: as it is, or (under a memory budget) moved from
    /// `from`'s allowance to a file.
    fn stash(&self, run: Run, from: &Spill, bounded: bool) -> Result<Run, Error> {
        if bounded {
            ft::run_to_file(run, from, &self.spill)
        } else {
            Ok(run)
        }
    }

    /// Releases the kept runs and the replicas held.
    fn release_kept(&mut self) {
        for r in self.kept.drain(..) {
            r.release(&self.spill);
        }
        for (_, r) in self.held.drain(..) {
            r.release(&self.spill);
        }
    }

    /// Releases a generation; the buffers of its replicas are kept for receiving the next.
    fn release_generation(&mut self, g: Generation) {
        for r in g.kept {
            r.release(&self.spill);
        }
        for (_, r) in g.held {
            match r.store {
                RunStore::Mem(v) => {
                    self.spill.give_back(v.len());
                    self.reuse.push(v);
                }
                RunStore::File(_) => {}
            }
        }
    }

    /// The operation ended everywhere: the generation before it is not needed any more.
    fn ended(&mut self, op: u64) {
        self.pos = crate::lost::at(op + 1, 0);
        self.recovering = false;
        if let Some(g) = self.prior.take() {
            self.release_generation(g);
        }
    }
}

/// Identifies MapReduce objects within a process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What detection decided.
enum Verdict<'r> {
    /// Nobody was lost.
    Fine,
    /// These members (sorted indices) were lost; this rank survives.
    Recover(Vec<usize>),
    /// These members were lost for real (their processes died): the survivors go on with
    /// this communicator.
    Real(Vec<usize>, Comm<'r>),
}

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

    fn operation<I, K, V, K2, V2, M, R>(
        &mut self,
        input: I,
        mut map: M,
        combine: Option<CombineFn<'_, V>>,
        mut reduce: R,
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
        let op = self.stats.len() as u64 + 1;
        let node = self.node_comm(combine.is_some());
        let rank = self.comm.runtime();
        let spill = Spill::new(rank.spill_dir(), self.memory);
        let flush_at = if self.memory == usize::MAX {
            UNBOUNDED_FLUSH
        } else {
            self.memory
        };
        let mut st = OpStats::default();
        let recovery = self.ft.as_ref().map(|_| input.recovery());

        // Map (and combine within the rank), then one sorted send buffer. Under fault
        // tolerance a panic here makes this rank a lost one.
        let t = Instant::now();
        let mapped = catch_unwind(AssertUnwindSafe(|| -> Result<(Run, _), Error> {
            let ranges = &self.ranges;
            let mut sink: Sink<'_, '_, K, V> =
                Sink::new(EmitState::new(&spill, ranges, flush_at), combine);
            input.for_each(&mut |k, v| {
                map(k, v, &mut sink.emitter);
                sink.maybe_flush();
            })?;
            let out = sink.finish()?;
            let map_time = t.elapsed().saturating_sub(out.flush_time);
            let t = Instant::now();
            let send = merge_runs::<K, V>(out.runs, &spill, ranges, combine, false)?;
            Ok((
                send,
                (
                    map_time,
                    out.flush_time + t.elapsed(),
                    out.records,
                    out.bytes,
                ),
            ))
        }));
        let mut send = match mapped {
            Ok(Ok((send, (map_time, combine_time, records, bytes)))) => {
                st.map = map_time;
                st.combine = combine_time;
                st.records_emitted = records;
                st.bytes_emitted = bytes;
                Some(send)
            }
            Ok(Err(e)) => return Err(e),
            Err(panic) if self.ft.is_none() => resume_unwind(panic),
            Err(_) => None,
        };

        // Failures before the shuffle: injected losses, a panicking map, a process lost for
        // real (found here, or by survivors at the end of the last operation: the recovery
        // they decided on).
        let mut recovered = false;
        if self.ft.is_some() {
            self.maybe_kill(op, KillAt::Map);
            let injected = {
                let f = self.ft.as_ref().expect("fault tolerance");
                f.inject
                    .iter()
                    .any(|i| i.hits(rank.rank(), rank.node(), op))
            };
            let cause = if send.is_none() {
                Some("a map or combine function panicked")
            } else if injected {
                Some("injected failure")
            } else {
                None
            };
            let verdict = match self.pending_loss.take() {
                Some((lost, new)) => Verdict::Real(lost, new),
                None => match self.detect(op, cause, &[]) {
                    Ok((v, _)) => v,
                    Err(e) if e.is_process_lost() => {
                        let (plan, lost, new) = self.real_loss(op, 0, send.is_none())?;
                        debug_assert_eq!(plan, Plan::BeforeShuffle);
                        Verdict::Real(lost, new)
                    }
                    Err(e) => return Err(e),
                },
            };
            let rec = recovery.as_ref().expect("fault tolerance");
            match verdict {
                Verdict::Fine => {}
                Verdict::Recover(lost) => {
                    recovered = true;
                    send = Some(self.recover_before_shuffle(
                        op,
                        &lost,
                        send.take(),
                        rec,
                        &mut map,
                        combine,
                        &spill,
                        flush_at,
                        None,
                    )?);
                }
                Verdict::Real(lost, new) => {
                    recovered = true;
                    send = Some(self.recover_before_shuffle(
                        op,
                        &lost,
                        send.take(),
                        rec,
                        &mut map,
                        combine,
                        &spill,
                        flush_at,
                        Some(new),
                    )?);
                }
            }
            self.ft.as_mut().expect("fault tolerance").pos = lost::at(op, lost::DETECTED);
        }
        let mut send = send.expect("a send buffer");
        let mut node = if recovered {
            // A recovery changed the ranks: the node communicators too.
            self.node_comm(combine.is_some())
        } else {
            node
        };

        // From here on a real loss may send the survivors back to just before the shuffle,
        // with the send buffer (merged with the lost ranks' share) as it was then.
        self.maybe_kill(op, KillAt::Shuffle);
        'shuffle: loop {
            st.records_combined = send.entries;
            st.bytes_combined = send.len;

            // Node aggregation.
            if let Some(node_comm) = node.clone() {
                let t = Instant::now();
                let p = self.comm.size();
                let ls = node_comm.size();
                // Node rank j takes world destinations d with d * ls / p == j (contiguous).
                let bounds: Vec<u64> = (0..=ls)
                    .map(|j| send.offsets[(j * p).div_ceil(ls).min(p)])
                    .collect();
                let (inbox, moved, _) =
                    match exchange(&node_comm, &send, &bounds, &spill, self.memory) {
                        Ok(x) => x,
                        Err(e) if e.is_process_lost() && self.ft.is_some() => {
                            send = self.back_before_shuffle(
                                op,
                                lost::DETECTED,
                                send,
                                recovery.as_ref().expect("fault tolerance"),
                                &mut map,
                                combine,
                                &spill,
                                flush_at,
                            )?;
                            node = self.node_comm(combine.is_some());
                            continue 'shuffle;
                        }
                        Err(e) => return Err(e),
                    };
                send.release(&spill);
                st.bytes_node_shuffled = moved;
                st.shuffle += t.elapsed();
                let t = Instant::now();
                let ranges = &self.ranges;
                let merged = catch_unwind(AssertUnwindSafe(|| -> Result<Run, Error> {
                    let mut cursors = inbox.cursors(&spill)?;
                    let mut w = RunWriter::new(&spill, ranges);
                    merge(&mut cursors, &spill, |h, bodies| {
                        for_each_key::<K>(bodies, |key, vals| {
                            write_group::<K, V>(&mut w, h, key, vals, combine)
                        })
                    })?;
                    drop(cursors);
                    w.finish()
                }));
                inbox.release(&spill);
                send = match merged {
                    Ok(r) => r?,
                    Err(panic) if self.ft.is_none() => resume_unwind(panic),
                    Err(_) => {
                        return Err(Error::Unrecoverable {
                            op,
                            lost: vec![rank.rank()],
                            reason: "a combine function panicked during node aggregation, \
                                     after the node's data had been exchanged"
                                .into(),
                        })
                    }
                };
                st.combine += t.elapsed();
                st.records_combined = send.entries;
                st.bytes_combined = send.len;
            }

            // The all-to-all.
            let t = Instant::now();
            let (inbox, moved, rounds) =
                match exchange(&self.comm, &send, &send.offsets, &spill, self.memory) {
                    Ok(x) => x,
                    Err(e) if e.is_process_lost() && self.ft.is_some() => {
                        send = self.back_before_shuffle(
                            op,
                            lost::DETECTED,
                            send,
                            recovery.as_ref().expect("fault tolerance"),
                            &mut map,
                            combine,
                            &spill,
                            flush_at,
                        )?;
                        node = self.node_comm(combine.is_some());
                        continue 'shuffle;
                    }
                    Err(e) => return Err(e),
                };
            st.bytes_shuffled = moved;
            st.rounds = rounds;
            st.shuffle += t.elapsed();
            if self.ft.is_some() {
                self.ft.as_mut().expect("fault tolerance").pos = lost::at(op, lost::SHUFFLED);
                self.maybe_kill(op, KillAt::Keep);
                match self.keep_replicas(&send, &spill) {
                    Ok(got) => self.keep(send, got, &spill)?,
                    Err(e) if e.is_process_lost() => {
                        inbox.release(&spill);
                        send = self.back_before_shuffle(
                            op,
                            lost::SHUFFLED,
                            send,
                            recovery.as_ref().expect("fault tolerance"),
                            &mut map,
                            combine,
                            &spill,
                            flush_at,
                        )?;
                        node = self.node_comm(combine.is_some());
                        continue 'shuffle;
                    }
                    Err(e) => return Err(e),
                }
                self.ft.as_mut().expect("fault tolerance").pos = lost::at(op, lost::KEPT);
                self.maybe_kill(op, KillAt::Reduce);
            } else {
                send.release(&spill);
            }

            // Reduce.
            let t = Instant::now();
            let mut output = Output::new(Some(DatasetBuilder::new(rank)?), Vec::new());
            let reduced = catch_unwind(AssertUnwindSafe(|| -> Result<(), Error> {
                let mut cursors = inbox.cursors(&spill)?;
                merge(&mut cursors, &spill, |_, bodies| {
                    reduce_hash(bodies, &mut reduce, &mut output)
                })
            }));
            inbox.release(&spill);
            let reduce_failed = match reduced {
                Ok(r) => {
                    r?;
                    false
                }
                Err(panic) if self.ft.is_none() => resume_unwind(panic),
                Err(_) => true,
            };

            // Failures in the reduce, and the totals.
            let slots = self.total_slots;
            let totals = if self.ft.is_some() {
                let cause = reduce_failed.then_some("a reduce function panicked");
                loop {
                    match self.detect_after_reduce(op, cause, &output.sums[..slots]) {
                        Ok((Verdict::Recover(lost), totals)) => {
                            self.recover_after_reduce(
                                op,
                                &lost,
                                &mut reduce,
                                &mut output,
                                &spill,
                                None,
                            )?;
                            break totals;
                        }
                        Ok((_, totals)) => break totals,
                        Err(e) if e.is_process_lost() => {
                            let (plan, lost, new) =
                                self.real_loss(op, lost::KEPT, reduce_failed)?;
                            match plan {
                                Plan::AfterReduce => {
                                    // The lost ranks' share joins this output; the totals are
                                    // taken again, over the survivors.
                                    self.recover_after_reduce(
                                        op,
                                        &lost,
                                        &mut reduce,
                                        &mut output,
                                        &spill,
                                        Some(new),
                                    )?;
                                }
                                Plan::Finish(totals) => {
                                    let lost_global = {
                                        let f = self.ft.as_ref().expect("fault tolerance");
                                        ft::globals(&f.members, &lost)
                                    };
                                    self.pending_loss = Some((lost, new));
                                    let f = self.ft.as_mut().expect("fault tolerance");
                                    f.ended(op);
                                    f.recovering = true;
                                    f.kept_partial = Some(lost_global);
                                    break totals;
                                }
                                Plan::BeforeShuffle => {
                                    drop(output);
                                    let send_back = self.roll_back();
                                    send = self.recover_before_shuffle(
                                        op,
                                        &lost,
                                        Some(send_back),
                                        recovery.as_ref().expect("fault tolerance"),
                                        &mut map,
                                        combine,
                                        &spill,
                                        flush_at,
                                        Some(new),
                                    )?;
                                    self.ft.as_mut().expect("fault tolerance").pos =
                                        lost::at(op, lost::DETECTED);
                                    node = self.node_comm(combine.is_some());
                                    continue 'shuffle;
                                }
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
            } else if slots > 0 {
                self.comm.allreduce(&output.sums[..slots], Sum)?
            } else {
                Vec::new()
            };
            st.records_out = output.records;
            let mut result = output.builder.take().expect("a dataset output").finish()?;
            st.reduce = t.elapsed();
            st.bytes_spilled = spill.spilled();
            self.stats.push(st);
            self.totals = totals;
            if let Some(f) = &mut self.ft {
                if self.pending_loss.is_none() {
                    f.ended(op);
                    f.last_totals = Some(self.totals.clone());
                }
                f.prev = Some((op, keep_reduce(reduce)));
                result.origin = Origin::Output { mr: f.id, op };
            }
            return Ok(result);
        }
    }

    /// An injected process kill at `at` of operation `op` on this rank's node: the process
    /// dies here (SIGKILL), as when its machine is lost.
    fn maybe_kill(&self, op: u64, at: KillAt) {
        let Some(f) = &self.ft else {
            return;
        };
        let node = self.comm.runtime().node();
        if f.inject.iter().any(|i| i.kills(node, op, at)) {
            // SAFETY: sends SIGKILL to this process (no memory is touched).
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }

    /// A real loss found at `stage` of operation `op` after the detection before the
    /// shuffle: the survivors agree on the recovery, which here can only be to go back
    /// before the shuffle. Returns the send buffer for the shuffle on the survivors.
    #[allow(clippy::too_many_arguments)]
    fn back_before_shuffle<IK: Data, IV: Data, K: Data, V: Data, M>(
        &mut self,
        op: u64,
        stage: u64,
        send: Run,
        rec: &Recovery<IK, IV>,
        map: &mut M,
        combine: Option<CombineFn<'_, V>>,
        spill: &Spill,
        flush_at: usize,
    ) -> Result<Run, Error>
    where
        M: FnMut(IK, IV, &mut Emitter<'_, K, V>),
    {
        let (plan, lost, new) = self.real_loss(op, stage, false)?;
        if plan != Plan::BeforeShuffle {
            send.release(spill);
            return Err(Error::Unrecoverable {
                op,
                lost: Vec::new(),
                reason: format!("the survivors chose {plan:?} in the middle of the shuffle"),
            });
        }
        let send = self.recover_before_shuffle(
            op,
            &lost,
            Some(send),
            rec,
            map,
            combine,
            spill,
            flush_at,
            Some(new),
        )?;
        self.ft.as_mut().expect("fault tolerance").pos = lost::at(op, lost::DETECTED);
        Ok(send)
    }

    /// Back to before the shuffle after the send buffer was kept: it is the send buffer
    /// again, and the generation before it the current one.
    fn roll_back(&mut self) -> Run {
        let f = self.ft.as_mut().expect("fault tolerance");
        let send = f.kept.pop().expect("the kept send buffer");
        debug_assert!(f.kept.is_empty());
        for (_, r) in f.held.drain(..) {
            r.release(&f.spill);
        }
        let g = f.prior.take().expect("the generation before");
        f.kept = g.kept;
        f.held = g.held;
        f.table = g.table;
        send
    }

    /// A process was lost for real (MPI with ULFM) while this rank stood at `stage` of
    /// operation `op`: the survivors tell each other where they stood, on a communicator
    /// without the lost ranks, and all choose the same recovery (see [`crate::lost`]).
    /// Returns it, the lost members (indices of the current communicator) and the survivors'
    /// communicator.
    fn real_loss(
        &mut self,
        op: u64,
        stage: u64,
        failed: bool,
    ) -> Result<(Plan, Vec<usize>, Comm<'r>), Error> {
        let rank = self.comm.runtime();
        let position = lost::at(op, stage);
        loop {
            let Some(lostp) = rank.acknowledge_loss() else {
                return Err(Error::Unrecoverable {
                    op,
                    lost: Vec::new(),
                    reason: "a blocking call reported a lost process that the runtime does not \
                             know"
                        .into(),
                });
            };
            let f = self.ft.as_ref().expect("fault tolerance");
            let lost: Vec<usize> = (0..f.members.global.len())
                .filter(|&i| lostp.ranks.binary_search(&f.members.global[i]).is_ok())
                .collect();
            let lost_global = ft::globals(&f.members, &lost);
            let unrecoverable = |reason: String| Error::Unrecoverable {
                op,
                lost: lost_global.clone(),
                reason: format!(
                    "{reason} ({lostp}; with the spillway CLI, a job saved with \
                                 --checkpoint-dir resumes with --resume)"
                ),
            };
            if !f.survivable {
                return Err(unrecoverable(
                    "processes were lost but this job does not keep what a recovery needs".into(),
                ));
            }
            if f.recovering {
                return Err(unrecoverable(
                    "a process was lost during the recovery from an earlier loss".into(),
                ));
            }
            if let Some(before) = &f.kept_partial {
                return Err(unrecoverable(format!(
                    "a process was lost before the shuffle after the loss of rank(s) {before:?} \
                     had completed: the kept buffers miss what those ranks sent"
                )));
            }
            if lost.is_empty() {
                return Err(unrecoverable(
                    "the lost processes held none of this operation's ranks".into(),
                ));
            }
            if lost.len() == f.members.global.len() {
                return Err(unrecoverable("every rank was lost".into()));
            }
            let mut nodes: Vec<u32> = lost.iter().map(|&i| f.members.node[i]).collect();
            nodes.dedup();
            if nodes.len() > 1 {
                return Err(unrecoverable(format!(
                    "ranks of nodes {nodes:?} were lost in the same operation: what one of them \
                     sent another in the last shuffle is in neither's replicas"
                )));
            }
            if let Some(reason) = ft::coverage(&f.members, &lost) {
                return Err(unrecoverable(reason));
            }
            let new = self
                .comm
                .without(&lostp.ranks)
                .expect("a survivor is in the survivors' communicator");
            let report = Report {
                position,
                totals: f.last_totals.clone(),
                failed,
            };
            match new.allgather_obj(&report) {
                Ok(all) => {
                    let plan = lost::plan(position, &all).map_err(unrecoverable)?;
                    self.ft.as_mut().expect("fault tolerance").recovering = true;
                    return Ok((plan, lost, new));
                }
                // Another process was lost meanwhile: tell each other again, without it too.
                Err(spillway_comm::Error::ProcessLost(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The failure detection collective: every rank says whether it is lost (`cause`),
    /// and adds its share of the `sums` (returned summed over all ranks).
    /// Lost ranks leave (a split without them) and get [`Error::Lost`]; if the loss cannot
    /// be recovered every rank gets [`Error::Unrecoverable`].
    fn detect(
        &mut self,
        op: u64,
        cause: Option<&str>,
        sums: &[f64],
    ) -> Result<(Verdict<'r>, Vec<f64>), Error> {
        let p = self.comm.size();
        let mut flags = vec![0f64; p + sums.len()];
        flags[self.comm.rank()] = f64::from(u8::from(cause.is_some()));
        flags[p..].copy_from_slice(sums);
        let all = self.comm.allreduce(&flags, Sum)?;
        let totals = all[p..].to_vec();
        let lost: Vec<usize> = (0..p).filter(|&i| all[i] != 0.0).collect();
        if lost.is_empty() {
            return Ok((Verdict::Fine, totals));
        }
        let f = self.ft.as_ref().expect("fault tolerance");
        let lost_global = ft::globals(&f.members, &lost);
        if lost.len() == p {
            return Err(Error::Unrecoverable {
                op,
                lost: lost_global,
                reason: "every rank was lost".into(),
            });
        }
        if let Some(reason) = ft::coverage(&f.members, &lost) {
            return Err(Error::Unrecoverable {
                op,
                lost: lost_global,
                reason,
            });
        }
        Ok((Verdict::Recover(lost), totals))
    }

    /// As [`detect`](Self::detect), after the reduce: a lost rank first hands its kept
    /// send buffer to its buddy (its own messages are then not lost with it).
    fn detect_after_reduce(
        &mut self,
        op: u64,
        cause: Option<&str>,
        sums: &[f64],
    ) -> Result<(Verdict<'r>, Vec<f64>), Error> {
        let (verdict, totals) = self.detect(op, cause, sums)?;
        if let Verdict::Recover(lost) = &verdict {
            let f = self.ft.as_mut().expect("fault tolerance");
            let me = self.comm.rank();
            let leaving = lost.binary_search(&me).is_ok();
            let mut bytes = Vec::new();
            if leaving {
                for run in &f.kept {
                    let (b, _) = run.read_block(0, run.len, usize::MAX, &f.spill)?;
                    bytes.extend_from_slice(&b);
                }
            }
            let to = if leaving { f.members.buddy(me) } else { None };
            let got = ft::to_buddy(&self.comm, to, &bytes)?;
            let bounded = self.memory != usize::MAX;
            for (_, b) in got {
                if !b.is_empty() {
                    let run = f.stash(ft::bytes_run(b), &f.spill, bounded)?;
                    f.kept.push(run);
                }
            }
            if leaving {
                return self.leave(op, cause.unwrap_or("lost"));
            }
        }
        Ok((verdict, totals))
    }

    /// Lost ranks take part in the split that removes them, then leave.
    fn leave<T>(&mut self, op: u64, cause: &str) -> Result<T, Error> {
        let _ = self.comm.split(None, 0)?;
        let rank = self.comm.runtime().rank();
        Err(Error::Lost {
            rank,
            op,
            cause: cause.to_string(),
        })
    }

    /// The survivors' side of the shrink: the communicator without `lost` (`real`, when
    /// the survivors made it after a real loss; otherwise a split the lost ranks join).
    fn shrink(&mut self, lost: &[usize], real: Option<Comm<'r>>) -> Result<Comm<'r>, Error> {
        if let Some(new) = real {
            return Ok(new);
        }
        let me = self.comm.rank();
        debug_assert!(lost.binary_search(&me).is_err());
        let new = self
            .comm
            .split(Some(0), me as i64)?
            .expect("a survivor is in the new communicator");
        Ok(new)
    }

    /// Sends every kept message addressed to a lost rank to the survivors (the lost
    /// hashes split evenly over them) and calls `on_hash` for every hash received, in
    /// order. `held` adds the replicas of lost wards' node-local messages.
    #[allow(clippy::too_many_arguments)]
    fn recover_messages(
        &mut self,
        new: &Comm<'r>,
        lost: &[usize],
        held: bool,
        spill: &Spill,
        rs: &mut RecoveryStats,
        on_hash: &mut OnHash<'_>,
    ) -> Result<(), Error> {
        let t = Instant::now();
        let f = self.ft.as_ref().expect("fault tolerance");
        let split = f.table.split_lost(lost);
        let run = {
            let mut w = RunWriter::new(spill, &split);
            let mut cursors = Vec::new();
            for r in &f.kept {
                cursors.push(Cursor::new(vec![r.piece(0, r.len)], &f.spill)?);
            }
            if held {
                for (ward, r) in &f.held {
                    if lost.binary_search(ward).is_ok() {
                        cursors.push(Cursor::new(vec![r.piece(0, r.len)], &f.spill)?);
                    }
                }
            }
            let table = &f.table;
            merge(&mut cursors, spill, |h, bodies| {
                if lost.binary_search(&table.owner(h)).is_ok() {
                    for b in bodies {
                        w.entry(h, |x| x.extend_from_slice(b))?;
                    }
                }
                Ok(())
            })?;
            drop(cursors);
            w.finish()?
        };
        rs.redistribute += t.elapsed();
        let t = Instant::now();
        let (inbox, moved, _) = exchange(new, &run, &run.offsets, spill, self.memory)?;
        run.release(spill);
        rs.bytes_moved += moved;
        rs.shuffle += t.elapsed();
        let t = Instant::now();
        {
            let mut cursors = inbox.cursors(spill)?;
            merge(&mut cursors, spill, on_hash)?;
        }
        inbox.release(spill);
        rs.reduce += t.elapsed();
        Ok(())
    }

    /// Recovery before the shuffle of operation `op` (thesis algorithms 19-20): rebuilds
    /// the lost ranks' input, maps it, and returns this rank's send buffer merged with
    /// that map output, partitioned for the survivors.
    #[allow(clippy::too_many_arguments)]
    fn recover_before_shuffle<IK: Data, IV: Data, K: Data, V: Data, M>(
        &mut self,
        op: u64,
        lost: &[usize],
        send: Option<Run>,
        rec: &Recovery<IK, IV>,
        map: &mut M,
        combine: Option<CombineFn<'_, V>>,
        spill: &Spill,
        flush_at: usize,
        real: Option<Comm<'r>>,
    ) -> Result<Run, Error>
    where
        M: FnMut(IK, IV, &mut Emitter<'_, K, V>),
    {
        let t0 = Instant::now();
        let f = self.ft.as_ref().expect("fault tolerance");
        let lost_global = ft::globals(&f.members, lost);
        let kept_op = f.prev.as_ref().map(|(k, _)| *k);
        let release = |send: Option<Run>| {
            if let Some(s) = send {
                s.release(spill);
            }
        };
        if let Some(reason) = ft::unrecoverable(rec, f.id, kept_op) {
            release(send);
            return Err(Error::Unrecoverable {
                op,
                lost: lost_global,
                reason,
            });
        }
        let mut nodes: Vec<u32> = lost.iter().map(|&i| f.members.node[i]).collect();
        nodes.sort_unstable();
        nodes.dedup();
        if nodes.len() > 1 {
            release(send);
            return Err(Error::Unrecoverable {
                op,
                lost: lost_global,
                reason: format!(
                    "ranks of nodes {nodes:?} were lost before the same shuffle: what one of \
                     them sent another in the last shuffle is in neither's replicas"
                ),
            });
        }
        if lost.binary_search(&self.comm.rank()).is_ok() {
            release(send);
            return self.leave(op, "lost before the shuffle");
        }
        let send = send.expect("a survivor has its send buffer");
        let mut rs = RecoveryStats {
            op,
            detected: "before shuffle",
            lost_ranks: lost_global.clone(),
            ..RecoveryStats::default()
        };
        let old_size = self.comm.size();
        let new = self.shrink(lost, real)?;
        let new_ranges = HashRanges::even(new.size());
        let mut runs = vec![send];
        let failed = {
            let mut sink: Sink<'_, '_, K, V> =
                Sink::new(EmitState::new(spill, &new_ranges, flush_at), combine);
            let mut map_time = Duration::ZERO;
            let mut remap_time = Duration::ZERO;
            let (_, mut prev) = self
                .ft
                .as_mut()
                .expect("fault tolerance")
                .prev
                .take()
                .unwrap_or((0, Box::new(|_: &[&[u8]], _: &mut Vec<u8>| Ok(()))));
            let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), Error> {
                if ft::uses_output(rec) {
                    let mut raw = Vec::new();
                    self.recover_messages(&new, lost, true, spill, &mut rs, &mut |_, bodies| {
                        raw.clear();
                        prev(bodies, &mut raw)?;
                        let t = Instant::now();
                        decode_records::<IK, IV>(&raw, &mut |k, v| map(k, v, &mut sink.emitter));
                        sink.maybe_flush();
                        remap_time += t.elapsed();
                        Ok(())
                    })?;
                }
                let t = Instant::now();
                ft::rebuild_input(
                    rec,
                    &lost_global,
                    lost,
                    old_size,
                    new.rank(),
                    new.size(),
                    &mut |k, v| {
                        map(k, v, &mut sink.emitter);
                        sink.maybe_flush();
                    },
                )?;
                map_time += t.elapsed();
                Ok(())
            }));
            rs.reduce = rs.reduce.saturating_sub(remap_time);
            rs.map = map_time + remap_time;
            match outcome {
                Ok(r) => {
                    r?;
                    runs.extend(sink.finish()?.runs);
                    false
                }
                Err(_) => true,
            }
        };
        recovered_everywhere(&new, failed, op, &lost_global)?;
        let t = Instant::now();
        let send = merge_runs::<K, V>(runs, spill, &new_ranges, combine, true)?;
        self.take_over(new, lost);
        let f = self.ft.as_mut().expect("fault tolerance");
        // The kept buffers are replaced after this operation's shuffle.
        f.release_kept();
        f.table = self.ranges.clone();
        self.end_recovery(rs, &lost_global, t, t0)?;
        Ok(send)
    }

    /// The survivors go on with `new` (the communicator without the members `lost`): even
    /// hash ranges over it, node communicators to be made again.
    fn take_over(&mut self, new: Comm<'r>, lost: &[usize]) {
        self.comm = new;
        self.ranges = HashRanges::even(self.comm.size());
        self.node = None;
        let f = self.ft.as_mut().expect("fault tolerance");
        f.members = f.members.without(lost);
    }

    /// Ends a recovery: replicated datasets adopt the lost parts and are replicated again;
    /// the recovery's statistics (its merge phase started at `merge`) are recorded.
    fn end_recovery(
        &mut self,
        mut rs: RecoveryStats,
        lost_global: &[u32],
        merge: Instant,
        start: Instant,
    ) -> Result<(), Error> {
        let f = self.ft.as_mut().expect("fault tolerance");
        let sent = ft::adopt_and_replicate(&self.comm, &f.members, &mut f.stores, lost_global)?;
        f.stats.bytes_replicated += sent;
        rs.merge = merge.elapsed();
        rs.ranks_after = self.comm.size() as u64;
        rs.total = start.elapsed();
        f.stats.recoveries.push(rs);
        Ok(())
    }

    /// Recovery after the reduce of operation `op`: the survivors reduce what was sent to
    /// the lost ranks (whose kept buffers their buddies now hold) into their outputs, then
    /// replicate their kept buffers again for the new owners.
    fn recover_after_reduce<K: Data, V: Data, K2: Data, V2: Data, R>(
        &mut self,
        op: u64,
        lost: &[usize],
        reduce: &mut R,
        output: &mut Output<K2, V2>,
        spill: &Spill,
        real: Option<Comm<'r>>,
    ) -> Result<(), Error>
    where
        R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>),
    {
        let t0 = Instant::now();
        let f = self.ft.as_ref().expect("fault tolerance");
        let lost_global = ft::globals(&f.members, lost);
        let mut rs = RecoveryStats {
            op,
            detected: "after reduce",
            lost_ranks: lost_global.clone(),
            ..RecoveryStats::default()
        };
        // A rank lost for real did not hand its kept buffer over: the replicas of its node's
        // messages to itself stand in for it.
        let held = real.is_some();
        let new = self.shrink(lost, real)?;
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), Error> {
            self.recover_messages(&new, lost, held, spill, &mut rs, &mut |_, bodies| {
                reduce_hash(bodies, reduce, output)
            })
        }));
        let failed = match outcome {
            Ok(r) => {
                r?;
                false
            }
            Err(_) => true,
        };
        recovered_everywhere(&new, failed, op, &lost_global)?;
        let t = Instant::now();
        self.take_over(new, lost);
        let f = self.ft.as_mut().expect("fault tolerance");
        if held {
            // What the lost ranks sent in this shuffle is gone with them.
            f.kept_partial = Some(lost_global.clone());
        }
        f.table = f.table.after_loss(lost);
        // Replicas again: the owners and the buddies changed.
        for (_, r) in f.held.drain(..) {
            r.release(&f.spill);
        }
        let me = self.comm.rank();
        let members = &f.members;
        let table = &f.table;
        let mut local = Vec::new();
        {
            let mut cursors = f
                .kept
                .iter()
                .map(|r| Cursor::new(vec![r.piece(0, r.len)], &f.spill))
                .collect::<Result<Vec<_>, _>>()?;
            merge(&mut cursors, &f.spill, |h, bodies| {
                if members.same_node(me, table.owner(h)) {
                    for b in bodies {
                        push_entry(&mut local, h, b);
                    }
                }
                Ok(())
            })?;
        }
        let to = members.buddy(me);
        let got = ft::to_buddy(&self.comm, to, &local)?;
        if to.is_some() {
            f.stats.bytes_replicated += local.len() as u64;
        }
        let bounded = self.memory != usize::MAX;
        f.held = got
            .into_iter()
            .map(|(src, b)| Ok((src, f.stash(ft::bytes_run(b), &f.spill, bounded)?)))
            .collect::<Result<_, Error>>()?;
        self.end_recovery(rs, &lost_global, t, t0)
    }

    /// Sends the node-local segments of this operation's send buffer to the buddy (a
    /// collective) and returns the segments the wards sent here. Without real losses
    /// possible the kept buffers and replicas of the operation before are released first
    /// (their buffers receive the new replicas); otherwise nothing changes until
    /// [`keep`](Self::keep), so that the operation can still go back before its shuffle.
    fn keep_replicas(&mut self, send: &Run, spill: &Spill) -> Result<Vec<(usize, Vec<u8>)>, Error> {
        let t = Instant::now();
        let f = self.ft.as_mut().expect("fault tolerance");
        if !f.survivable {
            for r in f.kept.drain(..) {
                r.release(&f.spill);
            }
            for (_, r) in f.held.drain(..) {
                if let RunStore::Mem(v) = r.store {
                    f.spill.give_back(v.len());
                    f.reuse.push(v);
                }
            }
        }
        let reuse = std::mem::take(&mut f.reuse);
        let me = self.comm.rank();
        // The segments for this node's ranks: one range of the run when the node's ranks
        // are consecutive (as they are), sent from the run itself.
        let local_dests: Vec<usize> = (0..self.comm.size())
            .filter(|&d| f.members.same_node(me, d))
            .collect();
        let (a, b) = (local_dests[0], *local_dests.last().expect("this rank"));
        let local: Cow<'_, [u8]> = if b - a + 1 == local_dests.len() {
            send.read_block(send.offsets[a], send.offsets[b + 1], usize::MAX, spill)?
                .0
        } else {
            let mut v = Vec::new();
            for &d in &local_dests {
                let (b, _) =
                    send.read_block(send.offsets[d], send.offsets[d + 1], usize::MAX, spill)?;
                v.extend_from_slice(&b);
            }
            Cow::Owned(v)
        };
        let to = f.members.buddy(me);
        let got = ft::to_buddy_reusing(&self.comm, to, &local, reuse)?;
        if to.is_some() {
            f.stats.bytes_replicated += local.len() as u64;
        }
        f.stats.save += t.elapsed();
        Ok(got)
    }

    /// Keeps this operation's send buffer and the replicas its wards sent
    /// ([`keep_replicas`](Self::keep_replicas)); the generation before stays while real
    /// losses are possible, until the operation has ended everywhere.
    fn keep(&mut self, send: Run, got: Vec<(usize, Vec<u8>)>, spill: &Spill) -> Result<(), Error> {
        let t = Instant::now();
        let f = self.ft.as_mut().expect("fault tolerance");
        if f.survivable {
            let g = Generation {
                kept: std::mem::take(&mut f.kept),
                held: std::mem::take(&mut f.held),
                table: f.table.clone(),
            };
            if let Some(older) = f.prior.replace(g) {
                f.release_generation(older);
            }
        }
        f.stats.bytes_kept += send.len;
        let bounded = self.memory != usize::MAX;
        f.kept = vec![f.stash(send, spill, bounded)?];
        f.table = self.ranges.clone();
        f.held = got
            .into_iter()
            .map(|(src, b)| Ok((src, f.stash(ft::bytes_run(b), &f.spill, bounded)?)))
            .collect::<Result<_, Error>>()?;
        // The kept buffers are whole again.
        f.kept_partial = None;
        f.stats.save += t.elapsed();
        Ok(())
    }
}

/// Whether every survivor got through the recovery (a collective over `new`): a failure
/// during a recovery cannot be recovered, and ends the job on every rank.
fn recovered_everywhere(new: &Comm, failed: bool, op: u64, lost: &[u32]) -> Result<(), Error> {
    if new.allreduce(&[u8::from(failed)], Max)?[0] != 0 {
        return Err(Error::Unrecoverable {
            op,
            lost: lost.to_vec(),
            reason: "a rank failed during the recovery".into(),
        });
    }
    Ok(())
}

/// Runs `reduce` on every key among the entry bodies of one hash, into `output`.
fn reduce_hash<K: Data, V: Data, K2: Data, V2: Data, R>(
    bodies: &[&[u8]],
    reduce: &mut R,
    output: &mut Output<K2, V2>,
) -> Result<(), Error>
where
    R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>),
{
    for_each_key::<K>(bodies, |key, vals| {
        reduce(K::read(key), Values::new(vals), output);
        Ok(())
    })?;
    match output.error.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Calls `f(key, values)` for each distinct key among entry bodies of one hash, in order of
/// first appearance; `values` are the value bytes of that key's entries.
fn for_each_key<K: Data>(
    bodies: &[&[u8]],
    mut f: impl FnMut(&[u8], &[&[u8]]) -> Result<(), Error>,
) -> Result<(), Error> {
    let split = |b: &&[u8]| -> (usize, usize) {
        let mut at = 0;
        let key = take_raw::<K>(b, &mut at);
        (key.len(), at)
    };
    if let [b] = bodies {
        let (klen, at) = split(b);
        return f(&b[at - klen..at], &[&b[at..]]);
    }
    let mut groups: Vec<(&[u8], Vec<&[u8]>)> = Vec::new();
    for b in bodies {
        let (klen, at) = split(b);
        let key = &b[at - klen..at];
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, vs)) => vs.push(&b[at..]),
            None => groups.push((key, vec![&b[at..]])),
        }
    }
    for (key, vals) in &groups {
        f(key, vals)?;
    }
    Ok(())
}

/// Writes one key's values as one entry: combined into one value, or concatenated.
fn write_group<K: Data, V: Data>(
    w: &mut RunWriter<'_>,
    hash: u64,
    key: &[u8],
    vals: &[&[u8]],
    combine: Option<CombineFn<'_, V>>,
) -> Result<(), Error> {
    match combine {
        Some(c) => {
            let mut it = Values::<V>::new(vals);
            let mut acc = it.next().expect("an entry has a value");
            for v in it {
                c(&mut acc, v);
            }
            w.entry(hash, |b| {
                put_raw::<K>(key, b);
                put(&acc, b);
            })
        }
        None => w.entry(hash, |b| {
            put_raw::<K>(key, b);
            for v in vals {
                b.extend_from_slice(v);
            }
        }),
    }
}

/// Merges the map side's sorted runs into one (combining equal keys if there is a
/// combiner); an empty run if there are none.
fn merge_runs<K: Data, V: Data>(
    mut runs: Vec<Run>,
    spill: &Spill,
    ranges: &HashRanges,
    combine: Option<CombineFn<'_, V>>,
    repartition: bool,
) -> Result<Run, Error> {
    if runs.len() == 1 && !repartition {
        return Ok(runs.pop().expect("one run"));
    }
    let mut w = RunWriter::new(spill, ranges);
    {
        let mut cursors = runs
            .iter()
            .map(|r| Cursor::new(vec![r.piece(0, r.len)], spill))
            .collect::<Result<Vec<_>, _>>()?;
        merge(&mut cursors, spill, |h, bodies| {
            for_each_key::<K>(bodies, |key, vals| {
                write_group::<K, V>(&mut w, h, key, vals, combine)
            })
        })?;
    }
    for r in runs {
        r.release(spill);
    }
    w.finish()
}

/// Where one source's received blocks are.
#[derive(Clone, Copy)]
enum Loc {
    Mem(usize, usize),
    File(u64, u64),
}

/// Blocks received in an exchange: in memory while the allowance lasts, then appended to
/// one spill file.
struct Inbox {
    mem: Vec<Vec<u8>>,
    file: Option<File>,
    file_len: u64,
    pieces: Vec<Vec<Loc>>,
    held: usize,
}

impl Inbox {
    fn accept(&mut self, src: usize, bytes: &[u8], spill: &Spill) -> Result<(), Error> {
        if spill.try_take(bytes.len()) {
            self.held += bytes.len();
            let m = &mut self.mem[src];
            let a = m.len();
            m.extend_from_slice(bytes);
            self.pieces[src].push(Loc::Mem(a, m.len()));
        } else {
            if self.file.is_none() {
                self.file = Some(spill.file()?);
            }
            let f = self.file.as_ref().expect("created");
            f.write_all_at(bytes, self.file_len)
                .map_err(|e| Error::spill(spill.dir(), e))?;
            spill.note_written(bytes.len());
            let a = self.file_len;
            self.file_len += bytes.len() as u64;
            self.pieces[src].push(Loc::File(a, self.file_len));
        }
        Ok(())
    }

    fn cursors<'a>(&'a self, spill: &Spill) -> Result<Vec<Cursor<'a>>, Error> {
        self.pieces
            .iter()
            .enumerate()
            .filter(|(_, locs)| !locs.is_empty())
            .map(|(src, locs)| {
                let pieces = locs
                    .iter()
                    .map(|&l| match l {
                        Loc::Mem(a, b) => Piece::Mem(&self.mem[src][a..b]),
                        Loc::File(a, b) => {
                            Piece::File(self.file.as_ref().expect("spilled blocks"), a, b)
                        }
                    })
                    .collect();
                Cursor::new(pieces, spill)
            })
            .collect()
    }

    fn release(self, spill: &Spill) {
        spill.give_back(self.held);
    }
}

/// Sends segment `[bounds[j], bounds[j + 1])` of `run` to member `j` of `comm`, in rounds of
/// at most about `quota` bytes per member (one round when everything fits); returns what
/// arrived, the bytes sent to other members and the number of rounds.
fn exchange(
    comm: &Comm,
    run: &Run,
    bounds: &[u64],
    spill: &Spill,
    quota: usize,
) -> Result<(Inbox, u64, u64), Error> {
    let p = comm.size();
    let per_dest = if quota == usize::MAX {
        usize::MAX
    } else {
        (quota / p).max(4 << 10)
    };
    let mut inbox = Inbox {
        mem: vec![Vec::new(); p],
        file: None,
        file_len: 0,
        pieces: vec![Vec::new(); p],
        held: 0,
    };
    let mut pos: Vec<u64> = bounds[..p].to_vec();
    let mut sent = 0u64;
    let mut rounds = 0u64;
    match exchange_rounds(
        comm,
        run,
        bounds,
        spill,
        per_dest,
        &mut inbox,
        &mut pos,
        &mut sent,
        &mut rounds,
    ) {
        Ok(()) => Ok((inbox, sent, rounds)),
        Err(e) => {
            // Give the allowance back (an exchange that failed because a process was lost
            // is run again on the survivors).
            inbox.release(spill);
            Err(e)
        }
    }
}

/// The rounds of [`exchange`].
#[allow(clippy::too_many_arguments)]
fn exchange_rounds(
    comm: &Comm,
    run: &Run,
    bounds: &[u64],
    spill: &Spill,
    per_dest: usize,
    inbox: &mut Inbox,
    pos: &mut [u64],
    sent: &mut u64,
    rounds: &mut u64,
) -> Result<(), Error> {
    let p = comm.size();
    let me = comm.rank();
    loop {
        let mut blocks: Vec<(usize, Cow<'_, [u8]>)> = Vec::new();
        for j in 0..p {
            if pos[j] < bounds[j + 1] {
                let (b, next) = run.read_block(pos[j], bounds[j + 1], per_dest, spill)?;
                pos[j] = next;
                if j != me {
                    *sent += b.len() as u64;
                }
                blocks.push((j, b));
            }
        }
        let refs: Vec<(usize, &[u8])> = blocks.iter().map(|(j, b)| (*j, &b[..])).collect();
        let mut failed: Option<Error> = None;
        comm.alltoallv_stream(&refs, &mut |src, bytes| {
            if failed.is_none() {
                if let Err(e) = inbox.accept(src, bytes, spill) {
                    failed = Some(e);
                }
            }
            Ok(())
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        drop(refs);
        drop(blocks);
        *rounds += 1;
        let left = pos.iter().zip(&bounds[1..]).any(|(a, b)| a < b);
        if comm.allreduce(&[u8::from(left)], Max)?[0] == 0 {
            return Ok(());
        }
    }
}
