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
use crate::ft::{self, FaultTolerance, FtStats, Members, RecoveryStats, Replicated, Store};
use crate::hash::HashRanges;
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

/// Where a reduce function puts its output records (they stay on this rank).
pub struct Output<K, V> {
    /// Where records go: a dataset, or (re-running a reduce in a recovery) a byte buffer.
    builder: Option<DatasetBuilder<K, V>>,
    raw: Vec<u8>,
    error: Option<Error>,
    records: u64,
}

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
        let mut out = Output::<K2, V2> {
            builder: None,
            raw: std::mem::take(raw),
            error: None,
            records: 0,
        };
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
}

/// Identifies MapReduce objects within a process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What detection decided.
enum Verdict {
    /// Nobody was lost.
    Fine,
    /// These members (sorted indices) were lost; this rank survives.
    Recover(Vec<usize>),
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
            _c: std::marker::PhantomData,
        }
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
        self.ft = Some(FtState {
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

        // Failures before the shuffle.
        let mut recovered = false;
        if self.ft.is_some() {
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
            if let Verdict::Recover(lost) = self.detect(op, cause)? {
                let rec = recovery.as_ref().expect("fault tolerance");
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
                )?);
            }
        }
        let mut send = send.expect("a send buffer");
        let node = if recovered {
            // A recovery changed the ranks: the node communicators too.
            self.node_comm(combine.is_some())
        } else {
            node
        };
        st.records_combined = send.entries;
        st.bytes_combined = send.len;
        let ranges = &self.ranges;

        // Node aggregation.
        if let Some(node) = node {
            let t = Instant::now();
            let p = self.comm.size();
            let ls = node.size();
            // Node rank j takes world destinations d with d * ls / p == j (contiguous).
            let bounds: Vec<u64> = (0..=ls)
                .map(|j| send.offsets[(j * p).div_ceil(ls).min(p)])
                .collect();
            let (inbox, moved, _) = exchange(&node, &send, &bounds, &spill, self.memory)?;
            send.release(&spill);
            st.bytes_node_shuffled = moved;
            st.shuffle += t.elapsed();
            let t = Instant::now();
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
                        reason: "a combine function panicked during node aggregation, after \
                                 the node's data had been exchanged"
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
            exchange(&self.comm, &send, &send.offsets, &spill, self.memory)?;
        st.bytes_shuffled = moved;
        st.rounds = rounds;
        st.shuffle += t.elapsed();
        match self.ft.is_some() {
            true => self.keep(send, &spill)?,
            false => send.release(&spill),
        }

        // Reduce.
        let t = Instant::now();
        let mut output = Output {
            builder: Some(DatasetBuilder::new(rank)?),
            raw: Vec::new(),
            error: None,
            records: 0,
        };
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

        // Failures in the reduce.
        if self.ft.is_some() {
            let cause = reduce_failed.then_some("a reduce function panicked");
            if let Verdict::Recover(lost) = self.detect_after_reduce(op, cause)? {
                self.recover_after_reduce(op, &lost, &mut reduce, &mut output, &spill)?;
            }
        }
        st.records_out = output.records;
        let mut result = output.builder.take().expect("a dataset output").finish()?;
        st.reduce = t.elapsed();
        st.bytes_spilled = spill.spilled();
        self.stats.push(st);
        if let Some(f) = &mut self.ft {
            f.prev = Some((op, keep_reduce(reduce)));
            result.origin = Origin::Output { mr: f.id, op };
        }
        Ok(result)
    }

    /// The failure detection collective: every rank says whether it is lost (`cause`).
    /// Lost ranks leave (a split without them) and get [`Error::Lost`]; if the loss cannot
    /// be recovered every rank gets [`Error::Unrecoverable`].
    fn detect(&mut self, op: u64, cause: Option<&str>) -> Result<Verdict, Error> {
        let p = self.comm.size();
        let mut flags = vec![0u8; p];
        flags[self.comm.rank()] = u8::from(cause.is_some());
        let flags = self.comm.allreduce(&flags, Max)?;
        let lost: Vec<usize> = (0..p).filter(|&i| flags[i] != 0).collect();
        if lost.is_empty() {
            return Ok(Verdict::Fine);
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
        Ok(Verdict::Recover(lost))
    }

    /// As [`detect`](Self::detect), after the reduce: a lost rank first hands its kept
    /// send buffer to its buddy (its own messages are then not lost with it).
    fn detect_after_reduce(&mut self, op: u64, cause: Option<&str>) -> Result<Verdict, Error> {
        let verdict = self.detect(op, cause)?;
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
        Ok(verdict)
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

    /// The survivors' side of the shrink: the communicator without `lost`.
    fn shrink(&mut self, lost: &[usize]) -> Result<Comm<'r>, Error> {
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
        let new = self.shrink(lost)?;
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
        let new = self.shrink(lost)?;
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), Error> {
            self.recover_messages(&new, lost, false, spill, &mut rs, &mut |_, bodies| {
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

    /// Keeps this operation's send buffer and sends its node-local segments to the buddy.
    fn keep(&mut self, send: Run, spill: &Spill) -> Result<(), Error> {
        let t = Instant::now();
        let f = self.ft.as_mut().expect("fault tolerance");
        for r in f.kept.drain(..) {
            r.release(&f.spill);
        }
        let mut reuse = Vec::new();
        for (_, r) in f.held.drain(..) {
            if let RunStore::Mem(v) = r.store {
                f.spill.give_back(v.len());
                reuse.push(v);
            }
        }
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
        drop(local);
        f.stats.bytes_kept += send.len;
        let bounded = self.memory != usize::MAX;
        f.kept = vec![f.stash(send, spill, bounded)?];
        f.table = self.ranges.clone();
        f.held = got
            .into_iter()
            .map(|(src, b)| Ok((src, f.stash(ft::bytes_run(b), &f.spill, bounded)?)))
            .collect::<Result<_, Error>>()?;
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
    let me = comm.rank();
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
    loop {
        let mut blocks: Vec<(usize, Cow<'_, [u8]>)> = Vec::new();
        for j in 0..p {
            if pos[j] < bounds[j + 1] {
                let (b, next) = run.read_block(pos[j], bounds[j + 1], per_dest, spill)?;
                pos[j] = next;
                if j != me {
                    sent += b.len() as u64;
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
        rounds += 1;
        let left = pos.iter().zip(&bounds[1..]).any(|(a, b)| a < b);
        if comm.allreduce(&[u8::from(left)], Max)?[0] == 0 {
            break;
        }
    }
    Ok((inbox, sent, rounds))
}
