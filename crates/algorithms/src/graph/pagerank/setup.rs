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

/// The position of every local row when rows are ordered by out-degree class, highest first,
/// and by row within a class (a counting sort). Each out-edge reads its source's contribution
/// once per iteration, so this packs the most-read contributions into a short prefix that
/// stays in cache, while rows of one class keep their order. Returns (position of each row,
/// row of each position).
pub(super) fn degree_order(
    comm: &Comm,
    offsets: &[u64],
) -> Result<(SbVec<u32>, SbVec<u32>), AlgoError> {
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
pub(super) fn set_up(comm: &Comm, graph: &DistGraph) -> Result<Pull, AlgoError> {
    let rt = comm.runtime();
    let rows = graph.local_rows();
    let (pos, row_of) = degree_order(comm, graph.offsets.as_slice())?;
    let mut inv_deg: SbVec<f64> = SbVec::zeroed(rt, rows)?;
    let mut local_off: SbVec<u64> = SbVec::zeroed(rt, rows + 1)?;
    // Row-indexed counters and cursors of 4 bytes when the rank's edges allow it: the random
    // accesses of the two passes then touch half the cache. The remote edges come grouped by
    // target, each target's sources in row order.
    let (local_src, sorted) = if graph.targets.len() <= u32::MAX as usize {
        local_lists::<u32>(rt, graph, pos.as_slice(), &mut inv_deg, &mut local_off)?
    } else {
        local_lists::<u64>(rt, graph, pos.as_slice(), &mut inv_deg, &mut local_off)?
    };
    let remote_count = sorted.len();
    // The graph is not needed again in set-up: let it go to storage.
    graph.offsets.unload();
    graph.targets.unload();
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

/// The local in-lists (`local_off`, which holds a zero per position plus one, and the
/// returned sources, by position) and the remote edges as (target, source position) grouped
/// by target, each target's sources in edge order; `inv_deg` by position on the way. The
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
pub(super) fn local_lists<C: Cursor>(
    rt: &spillway_runtime::Rank,
    graph: &DistGraph,
    pos: &[u32],
    inv_deg: &mut SbVec<f64>,
    local_off: &mut SbVec<u64>,
) -> Result<(SbVec<u32>, SbVec<[u32; 2]>), AlgoError> {
    let rows = graph.local_rows();
    let lo = graph.lo;
    let mut per_row: Vec<C> = vec![C::default(); rows];
    let key_bits = u64::BITS - graph.n.saturating_sub(1).leading_zeros();
    let shift = key_bits.saturating_sub(TARGET_BUCKET_BITS);
    let mut bucket_at = vec![0usize; (graph.n.saturating_sub(1) >> shift) as usize + 2];
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
                    bucket_at[(u64::from(t) >> shift) as usize + 1] += 1;
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
    Ok((local_src, pairs))
}
