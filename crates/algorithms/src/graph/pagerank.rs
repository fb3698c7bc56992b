//! PageRank by pushing contributions along out-edges (BDMPI's benchmark).
//!
//! # Semantics
//! The column-stochastic formulation: with damping `d`, `N` vertices and out-degree `deg(u)`
//! counting parallel edges,
//!
//! `x'(v) = (1 - d) / N + d * (sum over edges u->v of x(u) / deg(u) + D / N)`
//!
//! where `D` is the rank mass of vertices without out-edges (spread uniformly). Start:
//! `x = 1/N`. Iteration stops after `iterations` or when the L1 change `sum |x' - x|` drops
//! below `tolerance` (0 disables). This equals networkx's and scipy's definition.
//!
//! # Algorithm
//! Each rank owns a block of rows (sources). Set-up relabels its rows by out-degree class
//! (a counting sort; the most-read contributions end up in a short prefix that stays in
//! cache) and transposes its edges once into pull form, with compact indices: the edges into
//! its own vertices as a CSC over local ids (a counting sort), and the edges into other
//! ranks' vertices grouped by distinct target (an LSD radix sort, no comparison sort and no
//! per-edge search), so that the distinct remote targets are sorted and grouped by owner. An
//! iteration computes `x(u) / deg(u)` once per row, pulls one sum per distinct remote target
//! (sequential writes, gathered reads of the rows' values) and sends each owner one message of
//! sums, and pulls the local sums plus what arrived.
//!
//! An iteration is one stretch of computation between blocking calls: it takes the sums
//! sent to it in the last iteration (the all-reduce that ended that iteration came after
//! every rank had sent them), computes the new values and their contributions, sends the sums
//! for other ranks' rows, and ends in the all-reduce of the L1 change and the dangling mass.
//! Out of core this brings a rank's data in once per iteration, and a blocked rank's sums
//! wait in its mailbox (on disk when the budget is full) rather than in its arrays: with
//! the exchange and the all-reduce as two blocking steps, the values, the contributions and
//! the inverse degrees were loaded twice per iteration, and device reads were about 1.3x
//! what they are now. What an iteration reads is also kept small: sources of three bytes (when
//! a rank has at most 2^24 rows; else four), list lengths of one byte each, and for each rank
//! that sends values a bitmap of the rows receiving them where that beats a list of
//! positions.
//!
//! # Cost per iteration (p ranks, m local edges, r local rows, u distinct remote targets)
//! O(m + r + u) local work, u values sent (one message per owner that any local edge points
//! into), one allreduce of 2 values. The communication pattern is set up
//! once: indices travel only in the first exchange. Set-up costs O(m) plus one exchange.
//!
//! # Checkpoints
//! [`pagerank_checkpointed`] saves the iteration state after every K iterations: each rank's
//! part of the rank vector (8 r bytes, in the set-up's row order, which depends only on the
//! graph and the rank count), the iteration count, the dangling mass and the last L1 change.
//! A resumed run repeats the set-up and continues from there; its result is bitwise that of an
//! uninterrupted run.

use std::time::{Duration, Instant};

use spillway_checkpoint::{header, split_header, Checkpointer};
use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::graph::pagerank_survive::{Keep, Resume};
use crate::graph::DistGraph;
use crate::radix;
use crate::Progress;

/// PageRank parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageRankOptions {
    /// Iteration limit (default 20).
    pub iterations: usize,
    /// Stop when the L1 change falls below this; 0 disables early stopping (default 0).
    pub tolerance: f64,
    /// Damping factor (default 0.85).
    pub damping: f64,
}

impl Default for PageRankOptions {
    fn default() -> Self {
        PageRankOptions {
            iterations: 20,
            tolerance: 0.0,
            damping: 0.85,
        }
    }
}

/// This rank's part of the result.
#[derive(Debug)]
pub struct PageRankResult {
    /// First vertex of this rank.
    pub lo: u64,
    /// Ranks of vertices `lo ..` (storage-backed).
    pub ranks: SbVec<f64>,
    /// Iterations performed.
    pub iterations: usize,
    /// L1 change of the last iteration.
    pub delta: f64,
    /// Wall time of each iteration on this rank.
    pub iteration_times: Vec<Duration>,
    /// Bytes an iteration of this rank reads or writes: its arrays (the in-lists, the
    /// per-row and per-slot values) and the values it receives. Out of core, what an
    /// iteration must bring back beyond the budget is at most this.
    pub iteration_bytes: u64,
}

/// The edges of one rank in pull form (see the module notes).
struct Pull {
    /// Local row of each position: rows are relabelled by out-degree class (see
    /// [`degree_order`]); every per-row array below is indexed by position.
    row_of: SbVec<u32>,
    /// `1 / deg(u)` per position, 0 for rows without out-edges (dangling).
    inv_deg: SbVec<f64>,
    /// Local targets by position: offsets (rows + 1) into `local_src`, the positions of the
    /// local rows pointing at each (packed, see [`Sources`]).
    local_off: Offsets,
    local_src: Sources,
    /// Distinct remote targets: offsets (slots + 1) into `remote_src` (source positions).
    remote_off: Offsets,
    remote_src: Sources,
    /// Per owner of remote targets: (owner, first slot, slots).
    blocks: Vec<(usize, usize, usize)>,
    /// Where the values that arrive each iteration go.
    incoming: Incoming,
}

/// Out-degree classes: class 0 holds the rows without out-edges, class `c >= 1` the rows
/// with `2^(c-1) <= deg < 2^c`.
const DEGREE_CLASSES: usize = 65;

/// The position of every local row when rows are ordered by out-degree class, highest first,
/// and by row within a class (a counting sort). Each out-edge reads its source's contribution
/// once per iteration, so this packs the most-read contributions into a short prefix that
/// stays in cache, while rows of one class keep their order. Returns (position of each row,
/// row of each position).
fn degree_order(comm: &Comm, offsets: &[u64]) -> Result<(SbVec<u32>, SbVec<u32>), AlgoError> {
    let rows = offsets.len() - 1;
    let class = |u: usize| {
        let deg = offsets[u + 1] - offsets[u];
        (u64::BITS - deg.leading_zeros()) as usize
    };
    let mut start = [0usize; DEGREE_CLASSES + 1];
    for u in 0..rows {
        // Highest class first: bucket index DEGREE_CLASSES - 1 - class.
        start[DEGREE_CLASSES - class(u)] += 1;
    }
    for c in 0..DEGREE_CLASSES {
        start[c + 1] += start[c];
    }
    let mut pos: SbVec<u32> = SbVec::zeroed(comm.runtime(), rows)?;
    let mut row_of: SbVec<u32> = SbVec::zeroed(comm.runtime(), rows)?;
    {
        let (pos, row_of) = (pos.as_mut_slice(), row_of.as_mut_slice());
        for u in 0..rows {
            let bucket = &mut start[DEGREE_CLASSES - 1 - class(u)];
            pos[u] = *bucket as u32;
            row_of[*bucket] = u as u32;
            *bucket += 1;
        }
    }
    Ok((pos, row_of))
}

/// Builds the pull form of this rank's edges and exchanges the index pattern.
fn set_up(comm: &Comm, graph: &DistGraph) -> Result<Pull, AlgoError> {
    let rt = comm.runtime();
    let rows = graph.local_rows();
    let (pos, row_of) = degree_order(comm, graph.offsets.as_slice())?;
    let mut inv_deg: SbVec<f64> = SbVec::zeroed(rt, rows)?;
    let mut local_off: SbVec<u64> = SbVec::zeroed(rt, rows + 1)?;
    // Row-indexed counters and cursors of 4 bytes when the rank's edges allow it: the random
    // accesses of the two passes then touch half the cache.
    let (local_src, mut pairs) = if graph.targets.len() <= u32::MAX as usize {
        local_lists::<u32>(rt, graph, pos.as_slice(), &mut inv_deg, &mut local_off)?
    } else {
        local_lists::<u64>(rt, graph, pos.as_slice(), &mut inv_deg, &mut local_off)?
    };
    let remote_count = pairs.len();
    // The graph is not needed again in set-up: let it go to storage before the sort.
    graph.offsets.unload();
    graph.targets.unload();
    // Group the remote edges by target: a stable radix sort keeps each target's sources in
    // row order.
    let mut scratch: SbVec<[u32; 2]> = SbVec::zeroed(rt, remote_count)?;
    let in_scratch =
        radix::sort_by_key(pairs.as_mut_slice(), scratch.as_mut_slice(), graph.n, |e| {
            u64::from(e[0])
        });
    let sorted = if in_scratch { scratch } else { pairs };
    let mut slots = 0usize;
    {
        let mut prev = None;
        for e in sorted.as_slice() {
            if prev != Some(e[0]) {
                slots += 1;
                prev = Some(e[0]);
            }
        }
    }
    let mut remote_off: SbVec<u64> = SbVec::zeroed(rt, slots + 1)?;
    let mut remote_src: SbVec<u32> = SbVec::zeroed(rt, remote_count)?;
    let mut target_ids: SbVec<u32> = SbVec::zeroed(rt, slots)?;
    let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
    {
        let ro = remote_off.as_mut_slice();
        let rs = remote_src.as_mut_slice();
        let ids = target_ids.as_mut_slice();
        let mut slot = 0usize;
        let mut owner = 0usize;
        let mut prev = None;
        for (k, e) in sorted.as_slice().iter().enumerate() {
            if prev != Some(e[0]) {
                let t = u64::from(e[0]);
                while graph.bounds[owner + 1] <= t {
                    owner += 1;
                }
                // The receiver knows its targets by local row.
                ids[slot] = (t - graph.bounds[owner]) as u32;
                match blocks.last_mut() {
                    Some((o, _, len)) if *o == owner => *len += 1,
                    _ => blocks.push((owner, slot, 1)),
                }
                ro[slot] = k as u64;
                slot += 1;
                prev = Some(e[0]);
            }
            rs[k] = e[1];
        }
        ro[slots] = remote_count as u64;
    }
    drop(sorted);
    let index_blocks: Vec<(usize, &[u32])> = {
        let ids = target_ids.as_slice();
        blocks
            .iter()
            .map(|&(q, start, len)| (q, &ids[start..start + len]))
            .collect()
    };
    let (rows_in, from) = comm.exchange(&index_blocks)?;
    drop(index_blocks);
    drop(target_ids);
    let incoming = Incoming::new(rt, rows, &rows_in, &from, pos)?;
    drop(rows_in);
    // What `pull_sums` relies on, checked once (the lists are built above and never change).
    for (off, src) in [(&local_off, &local_src), (&remote_off, &remote_src)] {
        let off = off.as_slice();
        assert!(
            off.windows(2).all(|w| w[0] <= w[1]) && off.last() == Some(&(src.len() as u64)),
            "pull offsets out of order"
        );
        assert!(
            src.as_slice().iter().all(|&u| (u as usize) < rows),
            "pull source out of range"
        );
    }
    let local_off = Offsets::new(comm, local_off)?;
    let remote_off = Offsets::new(comm, remote_off)?;
    let local_src = Sources::new(rt, local_src, rows)?;
    let remote_src = Sources::new(rt, remote_src, rows)?;
    Ok(Pull {
        row_of,
        inv_deg,
        local_off,
        local_src,
        remote_off,
        remote_src,
        blocks,
        incoming,
    })
}

/// Where the values that arrive each iteration go: for each sending rank, in the order of
/// arrival (rank order), the rows it sends to, ascending. A sender's rows are a bitmap over
/// this rank's rows when that is smaller than a list of 4-byte positions (more than one row
/// in 32 receives from it), else the list; the bitmaps need the position of every row.
/// Out of core this is read every iteration: as lists, one 4-byte entry per value received,
/// it was a sixth of PageRank's reads at 32 ranks.
struct Incoming {
    /// Per sender: (sender, values, bitmap or list, start in `bits` or `list`).
    blocks: Vec<(usize, usize, bool, usize)>,
    bits: SbVec<u64>,
    list: SbVec<u32>,
    /// Position of every row when some sender has a bitmap (else empty).
    pos: SbVec<u32>,
    rows: usize,
}

impl Incoming {
    /// From the rows each sender announced (`rows_in`, concatenated in the order of `from`:
    /// (sender, count)), ascending per sender, and the position of each row.
    fn new(
        rt: &spillway_runtime::Rank,
        rows: usize,
        rows_in: &[u32],
        from: &[(usize, usize)],
        pos: SbVec<u32>,
    ) -> Result<Incoming, AlgoError> {
        let words = rows.div_ceil(64);
        let mut blocks = Vec::with_capacity(from.len());
        let (mut nbits, mut nlist) = (0, 0);
        for &(sender, count) in from {
            let bitmap = words * 8 < count * 4;
            blocks.push((sender, count, bitmap, if bitmap { nbits } else { nlist }));
            if bitmap {
                nbits += words;
            } else {
                nlist += count;
            }
        }
        let mut bits: SbVec<u64> = SbVec::zeroed(rt, nbits)?;
        let mut list: SbVec<u32> = SbVec::zeroed(rt, nlist)?;
        {
            let (b, l, p) = (bits.as_mut_slice(), list.as_mut_slice(), pos.as_slice());
            let mut at = 0;
            for &(_, count, bitmap, start) in &blocks {
                let mine = &rows_in[at..at + count];
                at += count;
                assert!(
                    mine.windows(2).all(|w| w[0] < w[1])
                        && mine.last().is_none_or(|&r| (r as usize) < rows),
                    "incoming rows out of order or range"
                );
                if bitmap {
                    for &r in mine {
                        b[start + r as usize / 64] |= 1 << (r % 64);
                    }
                } else {
                    for (e, &r) in l[start..start + count].iter_mut().zip(mine) {
                        *e = p[r as usize];
                    }
                }
            }
        }
        let pos = if nbits > 0 {
            pos
        } else {
            SbVec::zeroed(rt, 0)?
        };
        Ok(Incoming {
            blocks,
            bits,
            list,
            pos,
            rows,
        })
    }

    /// Bytes of the bitmaps, lists and positions, and of the values received.
    fn bytes(&self) -> u64 {
        let values: usize = self.blocks.iter().map(|b| b.1).sum();
        (8 * self.bits.len() + 4 * self.list.len() + 4 * self.pos.len() + 8 * values) as u64
    }

    /// `nx[position of r] += value` for every value received, in arrival order: `received`
    /// holds the values of every sender, one after the other.
    ///
    /// # Panics
    /// Unless `received` holds as many values as announced and `nx` one per row.
    #[cfg(test)]
    fn add(&self, received: &[f64], nx: &mut [f64]) {
        let total: usize = self.blocks.iter().map(|b| b.1).sum();
        assert!(received.len() == total);
        let mut k = 0;
        for (b, &(_, count, _, _)) in self.blocks.iter().enumerate() {
            self.add_from(b, &received[k..k + count], nx);
            k += count;
        }
    }

    /// `nx[position of r] += value` for the values of sender number `b` (in the order of
    /// [`Incoming::blocks`]), in the order of its rows.
    ///
    /// # Panics
    /// Unless `values` holds as many values as the sender announced and `nx` one per row.
    fn add_from(&self, b: usize, values: &[f64], nx: &mut [f64]) {
        let (_, count, bitmap, start) = self.blocks[b];
        assert!(values.len() == count && nx.len() == self.rows);
        if bitmap {
            let (bits, pos) = (self.bits.as_slice(), self.pos.as_slice());
            let words = self.rows.div_ceil(64);
            let mut v = values.iter();
            for (i, &word) in bits[start..start + words].iter().enumerate() {
                let mut w = word;
                while w != 0 {
                    let r = i * 64 + w.trailing_zeros() as usize;
                    w &= w - 1;
                    nx[pos[r] as usize] += v.next().expect("one value per bit");
                }
            }
        } else {
            let list = self.list.as_slice();
            for (&p, &val) in list[start..start + count].iter().zip(values) {
                nx[p as usize] += val;
            }
        }
    }
}

/// A row-indexed counter, then list cursor, of the set-up.
trait Cursor: Copy + Default {
    /// The value, then one more.
    fn bump(&mut self) -> u64;
    fn get(self) -> u64;
    fn from_u64(v: u64) -> Self;
}

impl Cursor for u32 {
    fn bump(&mut self) -> u64 {
        *self += 1;
        u64::from(*self - 1)
    }
    fn get(self) -> u64 {
        u64::from(self)
    }
    fn from_u64(v: u64) -> Self {
        v as u32
    }
}

impl Cursor for u64 {
    fn bump(&mut self) -> u64 {
        *self += 1;
        *self - 1
    }
    fn get(self) -> u64 {
        self
    }
    fn from_u64(v: u64) -> Self {
        v
    }
}

/// The local in-lists (`local_off`, which holds a zero per position plus one, and the
/// returned sources, by position) and the remote edges as (target, source position) in edge
/// order; `inv_deg` by position on the way. The edges are counted and placed by row, with one
/// random access per edge, and the counts moved to positions once per row (indexing by
/// position would look every target's position up per edge). `C` must hold the rank's edge
/// count.
fn local_lists<C: Cursor>(
    rt: &spillway_runtime::Rank,
    graph: &DistGraph,
    pos: &[u32],
    inv_deg: &mut SbVec<f64>,
    local_off: &mut SbVec<u64>,
) -> Result<(SbVec<u32>, SbVec<[u32; 2]>), AlgoError> {
    let rows = graph.local_rows();
    let lo = graph.lo;
    let mut per_row: Vec<C> = vec![C::default(); rows];
    let mut remote_count = 0usize;
    {
        let off = graph.offsets.as_slice();
        let tg = graph.targets.as_slice();
        let inv = inv_deg.as_mut_slice();
        for u in 0..rows {
            let (a, b) = (off[u] as usize, off[u + 1] as usize);
            if b > a {
                inv[pos[u] as usize] = 1.0 / (b - a) as f64;
            }
            for &t in &tg[a..b] {
                let r = u64::from(t).wrapping_sub(lo);
                if r < rows as u64 {
                    per_row[r as usize].bump();
                } else {
                    remote_count += 1;
                }
            }
        }
        let cnt = local_off.as_mut_slice();
        for (r, &n) in per_row.iter().enumerate() {
            cnt[pos[r] as usize + 1] = n.get();
        }
        for v in 0..rows {
            cnt[v + 1] += cnt[v];
        }
        // From here on: where the next source of each row's list goes.
        for (r, at) in per_row.iter_mut().enumerate() {
            *at = C::from_u64(cnt[pos[r] as usize]);
        }
    }
    let local_edges = local_off.as_slice()[rows] as usize;
    let mut local_src: SbVec<u32> = SbVec::zeroed(rt, local_edges)?;
    let mut pairs: SbVec<[u32; 2]> = SbVec::zeroed(rt, remote_count)?;
    {
        let off = graph.offsets.as_slice();
        let tg = graph.targets.as_slice();
        let src = local_src.as_mut_slice();
        let pr = pairs.as_mut_slice();
        let mut k = 0;
        for u in 0..rows {
            let pu = pos[u];
            for &t in &tg[off[u] as usize..off[u + 1] as usize] {
                let r = u64::from(t).wrapping_sub(lo);
                if r < rows as u64 {
                    src[per_row[r as usize].bump() as usize] = pu;
                } else {
                    pr[k] = [t, pu];
                    k += 1;
                }
            }
        }
    }
    Ok((local_src, pairs))
}

/// The sources of the in-lists (row positions, each below the rank's row count), packed in
/// three bytes each when the rank has at most 2^24 rows, else four. Out of core they are the
/// largest part of what an iteration reads (one per edge): a quarter less to read, for a
/// mask per edge.
struct Sources {
    /// The packed values, then one byte so that a 4-byte read of the last one stays inside.
    bytes: SbVec<u8>,
    /// Bytes per value: 3 or 4.
    width: usize,
    len: usize,
}

impl Sources {
    /// Packs `src` (every value below `rows`, checked by [`set_up`]).
    fn new(
        rt: &spillway_runtime::Rank,
        src: SbVec<u32>,
        rows: usize,
    ) -> Result<Sources, AlgoError> {
        let width = if rows <= 1 << 24 { 3 } else { 4 };
        let len = src.len();
        let mut bytes: SbVec<u8> = SbVec::zeroed(rt, len * width + 1)?;
        for (b, &u) in bytes
            .as_mut_slice()
            .chunks_exact_mut(width)
            .zip(src.as_slice())
        {
            b.copy_from_slice(&u.to_le_bytes()[..width]);
        }
        Ok(Sources { bytes, width, len })
    }

    /// Bytes of the packed values.
    fn bytes(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// The lists of an edge list as their lengths, one byte each; lengths of [`LONG`] and more are
/// [`LONG`] there and their value is in a side list, read in order. Out of core these are read
/// every iteration, and most in-lists of a power-law graph are a few edges long (a remote
/// in-list, one per distinct target on another rank, holds 1-2 edges on average), so 4-byte
/// offsets were about a sixth of PageRank's per-iteration reads.
struct Offsets {
    lens: SbVec<u8>,
    long: SbVec<u64>,
    /// Sum of the lengths.
    total: usize,
}

/// The byte value of a length found in [`Offsets::long`].
const LONG: u8 = u8::MAX;

impl Offsets {
    /// The lists between consecutive `offsets` (checked by [`set_up`]: non-decreasing).
    fn new(comm: &Comm, offsets: SbVec<u64>) -> Result<Offsets, AlgoError> {
        let rt = comm.runtime();
        let off = offsets.as_slice();
        let lists = off.len().saturating_sub(1);
        let mut lens: SbVec<u8> = SbVec::zeroed(rt, lists)?;
        let mut long = Vec::new();
        for (l, w) in lens.as_mut_slice().iter_mut().zip(off.windows(2)) {
            let n = w[1] - w[0];
            if n >= u64::from(LONG) {
                *l = LONG;
                long.push(n);
            } else {
                *l = n as u8;
            }
        }
        let total = off.last().map_or(0, |&e| (e - off[0]) as usize);
        Ok(Offsets {
            lens,
            long: SbVec::from_slice(rt, &long)?,
            total,
        })
    }

    /// Number of lists.
    fn lists(&self) -> usize {
        self.lens.len()
    }

    /// Bytes of the lengths.
    fn bytes(&self) -> u64 {
        (self.lens.len() + 8 * self.long.len()) as u64
    }

    /// `out[s] = sum of c[u]` over list `s` of `src` (see [`pull_sums`]).
    ///
    /// # Panics
    /// Unless `out` has one value per list, `c` one per row and `src` the lists' edges.
    fn pull(&self, c: &[f64], rows: usize, src: &Sources, out: &mut [f64]) {
        assert!(c.len() == rows && self.lists() == out.len() && src.len == self.total);
        assert!(src.bytes.len() > src.len * src.width && matches!(src.width, 3 | 4));
        // SAFETY: `c` has one value per row and `src` holds the edges of every list (asserted;
        // `new` made the lengths sum to `total` with one `long` entry per `LONG` byte), and
        // `set_up` checked that every source is a row; the lists never change after.
        let (lens, long, packed) = (
            self.lens.as_slice(),
            self.long.as_slice(),
            src.bytes.as_slice(),
        );
        // SAFETY: as above, and `packed` holds `total` values of `width` bytes and one byte
        // more (asserted).
        unsafe {
            match src.width {
                3 => pull_sums::<3>(c, lens, long, packed, out),
                _ => pull_sums::<4>(c, lens, long, packed, out),
            }
        }
    }
}

/// `out[s] = sum of c[u]` over list `s` of the sources packed in `src` (`W` bytes each,
/// little-endian, see [`Sources`]), the lists following each other with lengths `lens` (a
/// [`LONG`] byte: the next value of `long`), each sum as [`gather_sum`] forms it (bitwise),
/// without bounds checks: half the instructions of the gathers were compares, and most
/// in-lists of a power-law graph are a few edges long.
///
/// # Safety
/// `W` is 3 or 4, `lens.len() == out.len()`, `long` has an entry for every `LONG` byte of
/// `lens`, `src` holds the values of all lists, `W` bytes each, and at least one byte more,
/// and every value is below `c.len()` (what [`set_up`], [`Sources::new`] and
/// [`Offsets::new`] ensure of their lists).
#[inline(always)]
unsafe fn pull_sums<const W: usize>(
    c: &[f64],
    lens: &[u8],
    long: &[u64],
    src: &[u8],
    out: &mut [f64],
) {
    let mask: u32 = if W == 3 { 0x00ff_ffff } else { u32::MAX };
    let (c, p) = (c.as_ptr(), src.as_ptr());
    // SAFETY (of every call): value `i` starts at byte `W * i`, and its 4-byte read ends at
    // most one byte past the values, inside `src` (the caller's contract).
    let s = |i: usize| unsafe {
        (u32::from_le(p.add(W * i).cast::<u32>().read_unaligned()) & mask) as usize
    };
    let mut a = 0usize;
    let mut next_long = 0usize;
    for (&len, o) in lens.iter().zip(out.iter_mut()) {
        // SAFETY: the window `a..b` lies in `src` and its values index `c`, and a `LONG` byte
        // has its entry in `long` (the caller's contract).
        unsafe {
            let n = if len == LONG {
                next_long += 1;
                *long.get_unchecked(next_long - 1) as usize
            } else {
                usize::from(len)
            };
            let b = a + n;
            let mut acc = [0.0f64; 4];
            let mut i = a;
            while i + 4 <= b {
                for (j, acc) in acc.iter_mut().enumerate() {
                    *acc += *c.add(s(i + j));
                }
                i += 4;
            }
            let mut sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
            while i < b {
                sum += *c.add(s(i));
                i += 1;
            }
            *o = sum;
            a = b;
        }
    }
}

/// `sum of c[u]` over `sources`, with four independent partial sums so that the additions of a
/// long in-list do not wait on each other (the order differs from a left-to-right sum by a few
/// units in the last place): the checked form of one sum of [`pull_sums`].
#[cfg(test)]
fn gather_sum(c: &[f64], sources: &[u32]) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut quads = sources.chunks_exact(4);
    for q in &mut quads {
        for (a, &u) in acc.iter_mut().zip(q) {
            *a += c[u as usize];
        }
    }
    let mut sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for &u in quads.remainder() {
        sum += c[u as usize];
    }
    sum
}

/// `c[i] = x[i] * inv_deg[i]`: what each row gives each of its out-edges (the same product
/// as the one [`update`] forms with the new values).
fn contributions(c: &mut [f64], x: &[f64], inv_deg: &[f64]) {
    for ((c, &xu), &w) in c.iter_mut().zip(x).zip(inv_deg) {
        *c = xu * w;
    }
}

/// `x[i] = base + d * next[i]` for every row, and when `contrib` is given the next
/// iteration's contributions `contrib[i] = x[i] * inv_deg[i]` with it; returns the L1 change of
/// `x` and the sum of the new values of the dangling rows (`inv_deg == 0`). Four independent
/// partial sums of each, so that the additions do not wait on each other and the loop
/// vectorises (the order differs from a left-to-right sum by a few units in the last place).
fn update(
    x: &mut [f64],
    next: &[f64],
    inv_deg: &[f64],
    contrib: Option<&mut [f64]>,
    base: f64,
    d: f64,
) -> (f64, f64) {
    match contrib {
        Some(c) => update_with(x, next, inv_deg, base, d, |i, v, w| c[i] = v * w),
        None => update_with(x, next, inv_deg, base, d, |_, _, _| {}),
    }
}

#[inline(always)]
fn update_with(
    x: &mut [f64],
    next: &[f64],
    inv_deg: &[f64],
    base: f64,
    d: f64,
    mut each: impl FnMut(usize, f64, f64),
) -> (f64, f64) {
    assert!(next.len() == x.len() && inv_deg.len() == x.len());
    let mut delta = [0.0f64; 4];
    let mut dangling = [0.0f64; 4];
    let quads = x.len() / 4 * 4;
    for i in (0..quads).step_by(4) {
        for j in 0..4 {
            let (xi, w) = (&mut x[i + j], inv_deg[i + j]);
            let v = base + d * next[i + j];
            delta[j] += (v - *xi).abs();
            dangling[j] += if w == 0.0 { v } else { 0.0 };
            *xi = v;
            each(i + j, v, w);
        }
    }
    let mut delta = (delta[0] + delta[1]) + (delta[2] + delta[3]);
    let mut dangling = (dangling[0] + dangling[1]) + (dangling[2] + dangling[3]);
    for i in quads..x.len() {
        let (xi, w) = (&mut x[i], inv_deg[i]);
        let v = base + d * next[i];
        delta += (v - *xi).abs();
        if w == 0.0 {
            dangling += v;
        }
        *xi = v;
        each(i, v, w);
    }
    (delta, dangling)
}

/// Runs PageRank on a distributed graph; `progress` is called on every rank after each
/// iteration.
///
/// # Errors
/// [`AlgoError::BadParameter`] for a damping outside [0, 1] or a negative tolerance;
/// communication errors.
pub fn pagerank(
    comm: &Comm,
    graph: &DistGraph,
    options: &PageRankOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<PageRankResult, AlgoError> {
    pagerank_checkpointed(comm, graph, options, progress, None)
}

/// Words before the rank vector in a checkpoint part: iterations done, dangling mass, L1
/// change, rows.
const STATE_WORDS: usize = 4;

/// [`pagerank`] with checkpoints: with `checkpoint`, starts from the state it restores (if
/// any) and saves the state whenever one is due (see the module notes). `progress` is called
/// only for the iterations this call performs.
///
/// # Errors
/// As [`pagerank`]; [`AlgoError::Checkpoint`] if a checkpoint cannot be written or read or
/// belongs to another job; [`AlgoError::BadParameter`] if a restored state does not fit the
/// graph.
pub fn pagerank_checkpointed(
    comm: &Comm,
    graph: &DistGraph,
    options: &PageRankOptions,
    progress: &mut dyn FnMut(&Progress),
    checkpoint: Option<&mut Checkpointer>,
) -> Result<PageRankResult, AlgoError> {
    run_pagerank(comm, graph, options, progress, checkpoint, None, None)
}

/// [`pagerank_checkpointed`], from `resume` if given (the state of an iteration, after a
/// recovery from lost processes), keeping the state of the last two iterations in `keep` if
/// given (see [`crate::graph::pagerank_survive`]).
pub(crate) fn run_pagerank(
    comm: &Comm,
    graph: &DistGraph,
    options: &PageRankOptions,
    progress: &mut dyn FnMut(&Progress),
    mut checkpoint: Option<&mut Checkpointer>,
    resume: Option<Resume>,
    mut keep: Option<&mut Keep>,
) -> Result<PageRankResult, AlgoError> {
    if !(0.0..=1.0).contains(&options.damping) {
        return Err(AlgoError::BadParameter {
            name: "damping",
            reason: format!("{} is not in [0, 1]", options.damping),
        });
    }
    if options.tolerance.is_nan() || options.tolerance < 0.0 {
        return Err(AlgoError::BadParameter {
            name: "tolerance",
            reason: format!("{} is negative", options.tolerance),
        });
    }
    let rt = comm.runtime();
    let rows = graph.local_rows();
    let pull = set_up(comm, graph)?;
    let n = graph.n as f64;
    let d = options.damping;
    let mut x: SbVec<f64> = SbVec::zeroed(rt, rows)?;
    x.as_mut_slice().iter_mut().for_each(|v| *v = 1.0 / n);
    let mut dangling_local: f64 = pull
        .inv_deg
        .as_slice()
        .iter()
        .filter(|&&w| w == 0.0)
        .map(|_| 1.0 / n)
        .sum();
    let slots = pull.remote_off.lists();
    let mut contrib: SbVec<f64> = SbVec::zeroed(rt, rows)?;
    let mut outgoing: SbVec<f64> = SbVec::zeroed(rt, slots)?;
    let mut next: SbVec<f64> = SbVec::zeroed(rt, rows)?;
    let iteration_bytes = pull.local_off.bytes()
        + pull.remote_off.bytes()
        + pull.local_src.bytes()
        + pull.remote_src.bytes()
        + pull.incoming.bytes()
        + 8 * (pull.inv_deg.len() + x.len() + contrib.len() + outgoing.len() + next.len()) as u64;
    let mut times = Vec::new();
    let mut delta = f64::INFINITY;
    let mut done = 0;
    let mut restored_dangling = None;
    if let Some(ck) = checkpoint.as_deref_mut() {
        if let Some((seq, part)) = ck.take_restored(comm)? {
            let bad = |reason: String| AlgoError::BadParameter {
                name: "checkpoint",
                reason,
            };
            let (word, values) = split_header(&part, STATE_WORDS)
                .ok_or_else(|| bad(format!("checkpoint {seq} is too short")))?;
            if word[3] != rows as u64 || values.len() != rows * 8 || word[0] != seq {
                return Err(bad(format!(
                    "checkpoint {seq} holds {} rows for rank {}, which has {rows}",
                    word[3],
                    comm.rank()
                )));
            }
            done = seq as usize;
            restored_dangling = Some(f64::from_bits(word[1]));
            delta = f64::from_bits(word[2]);
            for (v, b) in x.as_mut_slice().iter_mut().zip(values.chunks_exact(8)) {
                *v = f64::from_le_bytes(b.try_into().expect("8 bytes"));
            }
        }
    }
    if let Some(r) = resume {
        if r.x_rows.len() != rows {
            return Err(AlgoError::BadParameter {
                name: "recovery",
                reason: format!("{} values for {rows} rows", r.x_rows.len()),
            });
        }
        done = r.done;
        restored_dangling = Some(r.dangling);
        delta = r.delta;
        for (v, &row) in x.as_mut_slice().iter_mut().zip(pull.row_of.as_slice()) {
            *v = r.x_rows[row as usize];
        }
    }
    // With `keep`: replicas of every rank's values go to its buddy, on a communicator of
    // their own.
    let replicas = keep.as_ref().map(|_| comm.dup());
    if let (Some(k), Some(replicas)) = (keep.as_deref_mut(), &replicas) {
        k.start(replicas, done, x.as_slice(), pull.row_of.as_slice(), delta)?;
    }
    let stopped = |delta: f64| options.tolerance > 0.0 && delta < options.tolerance;
    let first = if stopped(delta) {
        options.iterations
    } else {
        done
    };
    // The sums for other ranks' rows travel as point-to-point messages in a message space of
    // their own; round `k` (the sums of iteration k's contributions) has tag `k % 2`: a rank
    // sends round k + 1 only after the all-reduce that ends iteration k, which its receivers
    // enter after taking round k, so at most two rounds are ever in flight.
    let values = comm.dup();
    let tag = |round: usize| (round % 2) as i32;
    let send_sums = |c: &[f64], out: &mut [f64], round: usize| -> Result<(), AlgoError> {
        pull.remote_off.pull(c, rows, &pull.remote_src, out);
        for &(q, start, len) in &pull.blocks {
            values.send(q, tag(round), &out[start..start + len])?;
        }
        Ok(())
    };
    // Out of core, the per-iteration buffers that are overwritten before they are read again
    // (the contributions, the sums sent, the next values) are discarded once dead: blocking
    // calls then neither write them back nor load them again. In memory discarding would only
    // cost page faults.
    let discard = rt.mem_budget().is_some();
    // In memory the contributions of an iteration are written by the update of the one before
    // (a pass over `x` and the inverse degrees saved) and kept; out of core they are made
    // again from `x` where they are needed, since `x` and the inverse degrees are read there
    // anyway.
    let keep_contrib = !discard;
    let mut contrib_ready = false;
    if first < options.iterations {
        let c = contrib.as_mut_slice();
        contributions(c, x.as_slice(), pull.inv_deg.as_slice());
        send_sums(c, outgoing.as_mut_slice(), first)?;
        contrib_ready = keep_contrib;
        if discard {
            contrib.discard();
            outgoing.discard();
        }
    }
    // After the sends of the first round, so that its receives rarely wait.
    let mut dangling = comm.allreduce(&[dangling_local], Sum)?[0];
    if let Some(restored) = restored_dangling {
        dangling = restored;
    }
    if let Some(k) = keep.as_deref_mut() {
        k.set_dangling(dangling);
    }
    // One iteration is one stretch of computation between blocking calls, so that out of core
    // a rank's data is brought in once per iteration: with `x` = x_k, the sums of round k
    // sent, and `dangling` the dangling mass of x_k, it pulls the local sums of x_k's
    // contributions, adds the sums received, computes x_{k+1} and its contributions, sends
    // their sums for other ranks' rows (round k + 1), and ends in the all-reduce of the L1
    // change and the dangling mass.
    for it in first..options.iterations {
        let start = Instant::now();
        let more = it + 1 < options.iterations;
        {
            // Slices are taken after every blocking call so that loads are accounted.
            let c = contrib.as_mut_slice();
            if !contrib_ready {
                contributions(c, x.as_slice(), pull.inv_deg.as_slice());
            }
            pull.local_off
                .pull(c, rows, &pull.local_src, next.as_mut_slice());
        }
        // Round `it` was sent before the all-reduce that ended the last iteration: these
        // receives wait only in the first iteration.
        for (b, &(sender, count, _, _)) in pull.incoming.blocks.iter().enumerate() {
            let (buf, _) = values.recv_shared(sender, tag(it))?;
            let sums: &[f64] = bytemuck::try_cast_slice(buf.as_bytes())
                .ok()
                .filter(|v: &&[f64]| v.len() == count)
                .ok_or(AlgoError::Comm(spillway_comm::Error::Truncated {
                    message_bytes: buf.len(),
                    buffer_bytes: 8 * count,
                }))?;
            pull.incoming.add_from(b, sums, next.as_mut_slice());
        }
        let base = (1.0 - d) / n + d * dangling / n;
        let local_delta;
        {
            let c = contrib.as_mut_slice();
            (local_delta, dangling_local) = update(
                x.as_mut_slice(),
                next.as_slice(),
                pull.inv_deg.as_slice(),
                more.then_some(&mut *c),
                base,
                d,
            );
            if more {
                send_sums(c, outgoing.as_mut_slice(), it + 1)?;
            }
            contrib_ready = more && keep_contrib;
        }
        if let (Some(k), Some(replicas)) = (keep.as_deref_mut(), &replicas) {
            // Before the all-reduce: a rank that completes it holds its wards' new values.
            k.replicate(replicas, it + 1, x.as_slice(), pull.row_of.as_slice())?;
        }
        if discard {
            contrib.discard();
            next.discard();
            outgoing.discard();
        }
        let sums = comm.allreduce(&[local_delta, dangling_local], Sum)?;
        delta = sums[0];
        dangling = sums[1];
        done = it + 1;
        times.push(start.elapsed());
        if let Some(k) = keep.as_deref_mut() {
            k.commit(done, dangling, delta, start.elapsed());
        }
        progress(&Progress {
            iteration: done,
            max_iterations: options.iterations,
            delta,
        });
        if let Some(ck) = checkpoint.as_deref_mut() {
            if ck.due(done as u64) {
                let header = header(&[
                    done as u64,
                    dangling.to_bits(),
                    delta.to_bits(),
                    rows as u64,
                ]);
                ck.save(comm, done as u64, &[&header, as_le_bytes(x.as_slice())])?;
            }
        }
        if stopped(delta) {
            if more {
                // Round `done` was sent and is not needed: take it out of the mailboxes.
                for &(sender, ..) in &pull.incoming.blocks {
                    values.recv_shared(sender, tag(done))?;
                }
            }
            break;
        }
    }
    // Back from positions to rows.
    let mut ranks: SbVec<f64> = SbVec::zeroed(rt, rows)?;
    {
        let out = ranks.as_mut_slice();
        for (&u, &v) in pull.row_of.as_slice().iter().zip(x.as_slice()) {
            out[u as usize] = v;
        }
    }
    Ok(PageRankResult {
        lo: graph.lo,
        ranks,
        iterations: done,
        delta,
        iteration_times: times,
        iteration_bytes,
    })
}

/// The bytes of `values` in little-endian order (the checkpoint format).
fn as_le_bytes(values: &[f64]) -> &[u8] {
    // The format is little-endian; on big-endian targets this would need a converted copy.
    const _: () = assert!(
        cfg!(target_endian = "little"),
        "checkpoints assume little-endian"
    );
    bytemuck::cast_slice(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_sums_equal_the_checked_gather_bitwise() {
        // In-lists of every length from 0 to 11 and some of 255 and more (kept in the side
        // list), sources anywhere in `c`, which is long enough for three-byte sources to use
        // their third byte; the sources packed in three and in four bytes.
        const N: usize = 70_001;
        let c: Vec<f64> = (0..N).map(|i| 1.0 / (i as f64 + 0.37)).collect();
        let mut off = vec![0u64];
        let mut src = Vec::new();
        let lengths = (0..12).chain([255, 3, 300, 254, 256]).chain((0..12).rev());
        for len in lengths {
            src.extend((0..len).map(|j| ((len * 40_031 + j * 17_389) % N) as u32));
            off.push(src.len() as u64);
        }
        assert!(
            src.iter().any(|&u| u >= 1 << 16),
            "no source uses a third byte"
        );
        let mut lens = Vec::new();
        let mut long = Vec::new();
        for w in off.windows(2) {
            let n = w[1] - w[0];
            lens.push(if n >= 255 { 255 } else { n as u8 });
            if n >= 255 {
                long.push(n);
            }
        }
        let pack = |width: usize| -> Vec<u8> {
            let mut bytes: Vec<u8> = src
                .iter()
                .flat_map(|u| u.to_le_bytes()[..width].to_vec())
                .collect();
            bytes.push(0);
            bytes
        };
        for width in [3, 4] {
            let packed = pack(width);
            let mut out = vec![f64::NAN; off.len() - 1];
            // SAFETY: the lengths sum to `src.len()`, one `long` entry per 255 byte, the
            // values packed in `width` bytes with one byte more, every source below `N`.
            unsafe {
                match width {
                    3 => pull_sums::<3>(&c, &lens, &long, &packed, &mut out),
                    _ => pull_sums::<4>(&c, &lens, &long, &packed, &mut out),
                }
            };
            for (k, &got) in out.iter().enumerate() {
                let want = gather_sum(&c, &src[off[k] as usize..off[k + 1] as usize]);
                assert_eq!(got.to_bits(), want.to_bits(), "width {width}, slot {k}");
            }
        }
    }

    #[test]
    fn incoming_values_land_at_their_rows_as_bitmaps_and_as_lists() {
        // 1000 rows; three senders: dense (bitmap), sparse (list), dense again; an arbitrary
        // permutation of positions.
        let rows = 1000usize;
        let pos_of = |r: usize| ((r * 389 + 17) % rows) as u32;
        let dense_a: Vec<u32> = (0..rows as u32).filter(|r| r % 3 == 0).collect();
        let sparse: Vec<u32> = vec![5, 64, 127, 128, 999];
        let dense_b: Vec<u32> = (0..rows as u32).filter(|r| r % 7 != 1).collect();
        let from = [(4, dense_a.len()), (9, sparse.len()), (11, dense_b.len())];
        let rows_in: Vec<u32> = [&dense_a[..], &sparse, &dense_b].concat();
        let received: Vec<f64> = (0..rows_in.len()).map(|k| 1.0 + k as f64 * 0.5).collect();
        let mut want = vec![0.25f64; rows];
        for (&r, &v) in rows_in.iter().zip(&received) {
            want[pos_of(r as usize) as usize] += v;
        }
        let out = spillway_runtime::run(&spillway_runtime::Config::new(1), |rt| {
            let mut pos: SbVec<u32> = SbVec::zeroed(rt, rows)?;
            for (r, p) in pos.as_mut_slice().iter_mut().enumerate() {
                *p = pos_of(r);
            }
            let incoming = Incoming::new(rt, rows, &rows_in, &from, pos)?;
            let kinds: Vec<bool> = incoming.blocks.iter().map(|b| b.2).collect();
            let mut nx = vec![0.25f64; rows];
            incoming.add(&received, &mut nx);
            Ok::<_, AlgoError>((kinds, nx))
        })
        .unwrap();
        let (kinds, nx) = &out[0];
        assert_eq!(kinds, &[true, false, true], "bitmap, list, bitmap");
        assert_eq!(nx, &want);
    }
}
