//! One MapReduce operation: map (with combine), node aggregation, shuffle, reduce.

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use serde::Serialize;
use spillway_comm::{Collectives, Comm, Max, Sum};

use crate::data::{put, put_raw, take_raw, Data, Values};
use crate::dataset::{Dataset, DatasetBuilder};
use crate::emit::{CombineFn, EmitState, Emitter, Sink};
use crate::error::Error;
use crate::hash::HashRanges;
use crate::run::{merge, Cursor, Piece, Run, RunWriter, Spill};
use crate::Input;

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
    builder: DatasetBuilder<K, V>,
    error: Option<Error>,
    records: u64,
}

impl<K: Data, V: Data> Output<K, V> {
    /// Emits an output record.
    #[inline]
    pub fn emit(&mut self, key: &K, value: &V) {
        if self.error.is_none() {
            if let Err(e) = self.builder.push(key, value) {
                self.error = Some(e);
            }
            self.records += 1;
        }
    }
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
///   with a combiner, into a hash table seeded differently that combines the values of
///   equal keys at once. Full buffers are radix-sorted by hash, grouped by key and written
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
/// # Fault tolerance (next step)
/// The send buffer of an operation is one hash-sorted run with per-destination offsets,
/// so it can be kept after the shuffle, and a lost rank's range can be split among the
/// survivors by changing [`HashRanges`] only.
pub struct MapReduce<'c, 'r> {
    comm: &'c Comm<'r>,
    node: Option<Comm<'r>>,
    ranges: HashRanges,
    memory: usize,
    node_aggregation: NodeAggregation,
    stats: Vec<OpStats>,
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
            comm,
            node: None,
            ranges: HashRanges::even(comm.size()),
            memory,
            node_aggregation: NodeAggregation::Auto,
            stats: Vec::new(),
        }
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
        K: Data,
        V: Data,
        K2: Data,
        V2: Data,
        M: FnMut(I::Key, I::Value, &mut Emitter<'_, K, V>),
        R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>),
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
        K: Data,
        V: Data,
        K2: Data,
        V2: Data,
        M: FnMut(I::Key, I::Value, &mut Emitter<'_, K, V>),
        C: Fn(&mut V, V),
        R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>),
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
        if !(wanted && world && rank.local_size() > 1) {
            return None;
        }
        if self.node.is_none() {
            self.node = Some(Comm::node(rank));
        }
        self.node.clone()
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
        K: Data,
        V: Data,
        K2: Data,
        V2: Data,
        M: FnMut(I::Key, I::Value, &mut Emitter<'_, K, V>),
        R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>),
    {
        let node = self.node_comm(combine.is_some());
        let rank = self.comm.runtime();
        let spill = Spill::new(rank.spill_dir(), self.memory);
        let flush_at = if self.memory == usize::MAX {
            UNBOUNDED_FLUSH
        } else {
            self.memory
        };
        let mut st = OpStats::default();
        let ranges = &self.ranges;

        // Map (and combine within the rank).
        let t = Instant::now();
        let mut sink: Sink<'_, '_, K, V> =
            Sink::new(EmitState::new(&spill, ranges, flush_at), combine);
        input.for_each(&mut |k, v| {
            map(k, v, &mut sink.emitter);
            sink.maybe_flush();
        })?;
        let out = sink.finish()?;
        st.map = t.elapsed().saturating_sub(out.flush_time);
        st.combine = out.flush_time;
        st.records_emitted = out.records;
        st.bytes_emitted = out.bytes;

        // One sorted send buffer.
        let t = Instant::now();
        let mut send = merge_runs::<K, V>(out.runs, &spill, ranges, combine)?;
        st.combine += t.elapsed();
        st.records_combined = send.entries;
        st.bytes_combined = send.len;

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
            let mut cursors = inbox.cursors(&spill)?;
            let mut w = RunWriter::new(&spill, ranges);
            merge(&mut cursors, &spill, |h, bodies| {
                for_each_key::<K>(bodies, |key, vals| {
                    write_group::<K, V>(&mut w, h, key, vals, combine)
                })
            })?;
            drop(cursors);
            inbox.release(&spill);
            send = w.finish()?;
            st.combine += t.elapsed();
            st.records_combined = send.entries;
            st.bytes_combined = send.len;
        }

        // The all-to-all.
        let t = Instant::now();
        let (inbox, moved, rounds) =
            exchange(self.comm, &send, &send.offsets, &spill, self.memory)?;
        send.release(&spill);
        st.bytes_shuffled = moved;
        st.rounds = rounds;
        st.shuffle += t.elapsed();

        // Reduce.
        let t = Instant::now();
        let mut output = Output {
            builder: DatasetBuilder::new(rank)?,
            error: None,
            records: 0,
        };
        {
            let mut cursors = inbox.cursors(&spill)?;
            merge(&mut cursors, &spill, |_, bodies| {
                for_each_key::<K>(bodies, |key, vals| {
                    reduce(K::read(key), Values::new(vals), &mut output);
                    Ok(())
                })?;
                match output.error.take() {
                    Some(e) => Err(e),
                    None => Ok(()),
                }
            })?;
        }
        inbox.release(&spill);
        st.records_out = output.records;
        let result = output.builder.finish()?;
        st.reduce = t.elapsed();
        st.bytes_spilled = spill.spilled();
        self.stats.push(st);
        Ok(result)
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
) -> Result<Run, Error> {
    if runs.len() == 1 {
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
