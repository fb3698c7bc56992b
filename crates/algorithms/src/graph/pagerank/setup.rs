//! Set-up of PageRank: this rank's edges turned once into pull form, with the rows relabelled
//! by out-degree class and compact indices, and the index pattern of the exchange agreed
//! with the other ranks.

use spillway_comm::radix;
use spillway_comm::{Collectives, Comm};
use spillway_runtime::SbVec;

use super::packed::{Incoming, Offsets, Sources};
use crate::error::AlgoError;
use crate::graph::DistGraph;

/// The edges of one rank in pull form (see the module notes).
pub(super) struct Pull {
    /// Local row of each position: rows are relabelled by out-degree class (see
    /// [`degree_order`]); every per-row array below is indexed by position.
    pub(super) row_of: SbVec<u32>,
    /// `1 / deg(u)` per position, 0 for rows without out-edges (dangling).
    pub(super) inv_deg: SbVec<f64>,
    /// Local targets by position: offsets (rows + 1) into `local_src`, the positions of the
    /// local rows pointing at each (packed, see [`Sources`](super::packed::Sources)).
    pub(super) local_off: Offsets,
    pub(super) local_src: Sources,
    /// Distinct remote targets: offsets (slots + 1) into `remote_src` (source positions).
    pub(super) remote_off: Offsets,
    pub(super) remote_src: Sources,
    /// Per owner of remote targets: (owner, first slot, slots).
    pub(super) blocks: Vec<(usize, usize, usize)>,
    /// Where the values that arrive each iteration go.
    pub(super) incoming: Incoming,
}

/// Remote edges are placed in buckets of targets by this many top bits of the target before
/// each bucket is sorted (see [`local_lists`]).
const TARGET_BUCKET_BITS: u32 = 11;

/// Out-degree classes: class 0 holds the rows without out-edges, class `c >= 1` the rows
/// with `2^(c-1) <= deg < 2^c`.
pub(super) const DEGREE_CLASSES: usize = 65;

/// In-list lengths told apart when lists are ordered by length: `0..LENGTH_GROUPS - 1` each,
/// the longer ones together. The gathers of an in-list loop as long as the list, and most
/// lists of a power-law graph are a few edges long: in an order of mixed lengths nearly every
/// list end was a mispredicted branch, which also discards the gathers issued after it. In
/// lists of equal length the branches are predicted (R-MAT scale 20 at 2 ranks: an iteration
/// 9.0 ms in target order, 6.0-6.4 ms with both the local and the remote lists grouped).
pub(super) const LENGTH_GROUPS: usize = 32;

/// The group of an in-list of `len` edges (see [`LENGTH_GROUPS`]).
fn length_group(len: u64) -> usize {
    len.min(LENGTH_GROUPS as u64 - 1) as usize
}

/// The position of every local row when rows are ordered by out-degree class, highest first,
/// then by the length group of the row's local in-list, then by row (a counting sort). Each
/// out-edge reads its source's contribution once per iteration, so the class order packs the
/// most-read contributions into a short prefix that stays in cache; within a class, rows with
/// in-lists of one length follow each other, so that the pull over the local in-lists (by
/// position) meets runs of equal lengths (see [`LENGTH_GROUPS`]). `local_in` holds the length
/// of each row's local in-list. Returns (position of each row, row of each position).
pub(super) fn degree_order<C: Cursor>(
    rt: &spillway_runtime::Rank,
    offsets: &[u64],
    local_in: &[C],
) -> Result<(SbVec<u32>, SbVec<u32>), AlgoError> {
    let rows = offsets.len() - 1;
    // Highest class first, then shortest in-list first.
    let bucket = |u: usize| {
        let deg = offsets[u + 1] - offsets[u];
        let class = (u64::BITS - deg.leading_zeros()) as usize;
        (DEGREE_CLASSES - 1 - class) * LENGTH_GROUPS + length_group(local_in[u].get())
    };
    let mut start = vec![0usize; DEGREE_CLASSES * LENGTH_GROUPS + 1];
    for u in 0..rows {
        start[bucket(u) + 1] += 1;
    }
    for b in 0..DEGREE_CLASSES * LENGTH_GROUPS {
        start[b + 1] += start[b];
    }
    let mut pos: SbVec<u32> = SbVec::zeroed(rt, rows)?;
    let mut row_of: SbVec<u32> = SbVec::zeroed(rt, rows)?;
    {
        let (pos, row_of) = (pos.as_mut_slice(), row_of.as_mut_slice());
        for u in 0..rows {
            let at = &mut start[bucket(u)];
            pos[u] = *at as u32;
            row_of[*at] = u as u32;
            *at += 1;
        }
    }
    Ok((pos, row_of))
}

/// Builds the pull form of this rank's edges and exchanges the index pattern.
pub(super) fn set_up(comm: &Comm, graph: &DistGraph) -> Result<Pull, AlgoError> {
    let rt = comm.runtime();
    let rows = graph.local_rows();
    let mut inv_deg: SbVec<f64> = SbVec::zeroed(rt, rows)?;
    let mut local_off: SbVec<u64> = SbVec::zeroed(rt, rows + 1)?;
    // Row-indexed counters and cursors of 4 bytes when the rank's edges allow it: the random
    // accesses of the two passes then touch half the cache. The remote edges come grouped by
    // target, each target's sources in row order.
    let (pos, row_of, local_src, sorted) = if graph.targets.len() <= u32::MAX as usize {
        local_lists::<u32>(rt, graph, &mut inv_deg, &mut local_off)?
    } else {
        local_lists::<u64>(rt, graph, &mut inv_deg, &mut local_off)?
    };
    // The graph is not needed again in set-up: let it go to storage.
    graph.offsets.unload();
    graph.targets.unload();
    let (remote_off, remote_src, target_ids, blocks) = remote_lists(rt, graph, &sorted)?;
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

/// The remote in-lists from the remote edges grouped by target (`sorted`: (target, source
/// position)): (offsets, sources, each list's target as the owner's local row, and per owner
/// (owner, first list, lists)). The lists of one owner are ordered by length group (see
/// [`LENGTH_GROUPS`]), then by target, so that the owner receives a few ascending runs of
/// rows (see [`Incoming`]); each list keeps its sources in edge order.
#[allow(clippy::type_complexity)]
fn remote_lists(
    rt: &spillway_runtime::Rank,
    graph: &DistGraph,
    sorted: &SbVec<[u32; 2]>,
) -> Result<
    (
        SbVec<u64>,
        SbVec<u32>,
        SbVec<u32>,
        Vec<(usize, usize, usize)>,
    ),
    AlgoError,
> {
    let se = sorted.as_slice();
    // Per owner: (owner, first list, lists) and the first list of each length group.
    let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
    let mut groups: Vec<[usize; LENGTH_GROUPS]> = Vec::new();
    let mut owner = 0usize;
    let mut slots = 0usize;
    for (a, b) in lists(se) {
        let t = u64::from(se[a][0]);
        while graph.bounds[owner + 1] <= t {
            owner += 1;
        }
        match blocks.last_mut() {
            Some((o, _, len)) if *o == owner => *len += 1,
            _ => {
                blocks.push((owner, slots, 1));
                groups.push([0; LENGTH_GROUPS]);
            }
        }
        groups.last_mut().expect("a block")[length_group((b - a) as u64)] += 1;
        slots += 1;
    }
    for (&(_, first, _), g) in blocks.iter().zip(&mut groups) {
        let mut at = first;
        for n in g.iter_mut() {
            (*n, at) = (at, at + *n);
        }
    }
    // Two passes over the lists in target order, each placing a list at the next slot of its
    // block's length group: the lengths (then offsets), then the sources and ids.
    let place = |mut groups: Vec<[usize; LENGTH_GROUPS]>,
                 each: &mut dyn FnMut(usize, usize, usize)| {
        let mut block = 0usize;
        for (j, (a, b)) in lists(se).enumerate() {
            while j >= blocks[block].1 + blocks[block].2 {
                block += 1;
            }
            let at = &mut groups[block][length_group((b - a) as u64)];
            each(*at, a, b);
            *at += 1;
        }
    };
    let mut remote_off: SbVec<u64> = SbVec::zeroed(rt, slots + 1)?;
    {
        let ro = remote_off.as_mut_slice();
        place(groups.clone(), &mut |slot, a, b| {
            ro[slot + 1] = (b - a) as u64
        });
        for s in 0..slots {
            ro[s + 1] += ro[s];
        }
    }
    let mut remote_src: SbVec<u32> = SbVec::zeroed(rt, se.len())?;
    let mut target_ids: SbVec<u32> = SbVec::zeroed(rt, slots)?;
    {
        let (ro, rs, ids) = (
            remote_off.as_slice(),
            remote_src.as_mut_slice(),
            target_ids.as_mut_slice(),
        );
        let mut owner = 0usize;
        place(groups, &mut |slot, a, b| {
            let t = u64::from(se[a][0]);
            while graph.bounds[owner + 1] <= t {
                owner += 1;
            }
            // The receiver knows its targets by local row.
            ids[slot] = (t - graph.bounds[owner]) as u32;
            let start = ro[slot] as usize;
            for (d, e) in rs[start..start + (b - a)].iter_mut().zip(&se[a..b]) {
                *d = e[1];
            }
        });
    }
    Ok((remote_off, remote_src, target_ids, blocks))
}

/// The lists of edges grouped by target (`(target, source)`, see [`remote_lists`]): (first
/// edge, end) of each, in order.
fn lists(se: &[[u32; 2]]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut k = 0;
    std::iter::from_fn(move || {
        (k < se.len()).then(|| {
            let a = k;
            while k < se.len() && se[k][0] == se[a][0] {
                k += 1;
            }
            (a, k)
        })
    })
}

/// A row-indexed counter, then list cursor, of the set-up.
pub(super) trait Cursor: Copy + Default {
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

/// The position of every row and the row of every position (see [`degree_order`]), the local
/// in-lists (`local_off`, which holds a zero per position plus one, and the returned sources,
/// by position) and the remote edges as (target, source position) grouped by target, each
/// target's sources in edge order; `inv_deg` by position on the way. The
/// edges are counted and placed by row, with one random access per edge, and the counts moved
/// to positions once per row (indexing by position would look every target's position up
/// per edge). `C` must hold the rank's edge count.
///
/// The remote edges are grouped without a second buffer as long as they are: the first pass
/// counts them per bucket of targets (the top [`TARGET_BUCKET_BITS`] bits), the second places
/// each in its bucket, and each bucket is then sorted by target (stable, so the sources of a
/// target stay in edge order; the scratch is on the heap and as long as the largest bucket).
/// A sort of the whole array with a second array as long beside it was the largest part of
/// the set-up's peak memory.
#[allow(clippy::type_complexity)]
pub(super) fn local_lists<C: Cursor>(
    rt: &spillway_runtime::Rank,
    graph: &DistGraph,
    inv_deg: &mut SbVec<f64>,
    local_off: &mut SbVec<u64>,
) -> Result<(SbVec<u32>, SbVec<u32>, SbVec<u32>, SbVec<[u32; 2]>), AlgoError> {
    let rows = graph.local_rows();
    let lo = graph.lo;
    let mut per_row: Vec<C> = vec![C::default(); rows];
    let key_bits = u64::BITS - graph.n.saturating_sub(1).leading_zeros();
    let shift = key_bits.saturating_sub(TARGET_BUCKET_BITS);
    let mut bucket_at = vec![0usize; (graph.n.saturating_sub(1) >> shift) as usize + 2];
    {
        let off = graph.offsets.as_slice();
        let tg = graph.targets.as_slice();
        for u in 0..rows {
            let (a, b) = (off[u] as usize, off[u + 1] as usize);
            for &t in &tg[a..b] {
                let r = u64::from(t).wrapping_sub(lo);
                if r < rows as u64 {
                    per_row[r as usize].bump();
                } else {
                    bucket_at[(u64::from(t) >> shift) as usize + 1] += 1;
                }
            }
        }
    }
    let (pos, row_of) = degree_order(rt, graph.offsets.as_slice(), &per_row)?;
    {
        let (off, pos) = (graph.offsets.as_slice(), pos.as_slice());
        let inv = inv_deg.as_mut_slice();
        for u in 0..rows {
            if off[u + 1] > off[u] {
                inv[pos[u] as usize] = 1.0 / (off[u + 1] - off[u]) as f64;
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
    for b in 1..bucket_at.len() {
        bucket_at[b] += bucket_at[b - 1];
    }
    let remote_count = bucket_at[bucket_at.len() - 1];
    // From here on: where the next edge of each bucket goes; afterwards, where it ends.
    let bucket_start = bucket_at.clone();
    let local_edges = local_off.as_slice()[rows] as usize;
    let mut local_src: SbVec<u32> = SbVec::zeroed(rt, local_edges)?;
    let mut pairs: SbVec<[u32; 2]> = SbVec::zeroed(rt, remote_count)?;
    {
        let pos = pos.as_slice();
        let off = graph.offsets.as_slice();
        let tg = graph.targets.as_slice();
        let src = local_src.as_mut_slice();
        let pr = pairs.as_mut_slice();
        for u in 0..rows {
            let pu = pos[u];
            for &t in &tg[off[u] as usize..off[u + 1] as usize] {
                let r = u64::from(t).wrapping_sub(lo);
                if r < rows as u64 {
                    src[per_row[r as usize].bump() as usize] = pu;
                } else {
                    let at = &mut bucket_at[(u64::from(t) >> shift) as usize];
                    pr[*at] = [t, pu];
                    *at += 1;
                }
            }
        }
        // Each bucket by the target's remaining low bits (a radix sort, stable), with a
        // scratch as long as the largest bucket; a bucket longer than a sixteenth of the
        // edges (a skewed graph) by the standard library's stable sort instead.
        let low = (1u64 << shift) - 1;
        let cap = (remote_count / 16).max(4096);
        let largest = bucket_start
            .iter()
            .zip(&bucket_at)
            .map(|(&a, &b)| b - a)
            .filter(|&len| len <= cap)
            .max()
            .unwrap_or(0);
        let mut scratch = vec![[0u32; 2]; largest];
        for (&a, &b) in bucket_start.iter().zip(&bucket_at) {
            let bucket = &mut pr[a..b];
            if bucket.len() > cap {
                bucket.sort_by_key(|e| e[0]);
                continue;
            }
            let tmp = &mut scratch[..bucket.len()];
            if radix::sort_by_key(bucket, tmp, low + 1, 11, |e| u64::from(e[0]) & low) {
                bucket.copy_from_slice(tmp);
            }
        }
    }
    Ok((pos, row_of, local_src, pairs))
}
