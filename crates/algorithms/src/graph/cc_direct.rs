//! Connected components on the communication layer: a union-find per rank over its part of
//! the edges, then the ranks' forests merged along a binomial tree (the direct engine; the
//! MapReduce small-star/large-star version is [`crate::graph::cc`]).
//!
//! # Semantics
//! Edges are undirected; a vertex exists when it is an endpoint of an edge (a self loop makes
//! its vertex exist alone). The label of a vertex is the smallest vertex id of its component,
//! as in [`crate::graph::cc`]. The result does not depend on the number of ranks, nodes or the
//! memory budget.
//!
//! # Algorithm
//! 1. *Local*: every rank streams its edges once through a union-find over all vertex ids
//!    (Rem's algorithm with splicing, linking by index: a parent is never larger than its
//!    child, so each root is its set's smallest id), prefetching the parents of the edges a few
//!    steps ahead. Every edge is touched once.
//! 2. *Merge*: each rank compresses its forest to stars (one pass in increasing id order
//!    suffices, since parents precede children) and, along a binomial tree towards rank 0,
//!    sends `(vertex, root)` for each vertex it has seen; the receiver unites them into its own
//!    forest. `ceil(log2 p)` rounds; a rank sends once.
//! 3. *Labels*: rank 0 compresses the merged forest (label = root) and scatters it in blocks
//!    of consecutive ids, one per rank.
//!
//! # Memory
//! The edges stay in storage-backed memory and are streamed in pieces (under a memory budget
//! each piece is released after use, so only the parent array and one piece are resident);
//! the parent array (4 bytes per vertex id) is storage-backed too. Messages hold 8 bytes per
//! vertex seen by the sender.
//!
//! # Cost
//! Local: O(m_r α) for the rank's `m_r` edges plus O(n) to initialise and compress the
//! parents. Merge: at most `ceil(log2 p)` messages of at most 8 bytes per vertex at the
//! receiver, each united in O(α) per pair. Labels: O(n) at rank 0 and one scatter of 4 bytes
//! per vertex id.

use std::path::Path;
use std::time::{Duration, Instant};

use spillway_comm::{Collectives, Comm, Max, Sum};
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::graph::load::LargestId;
use crate::io::chunks::{agree_on_error, heap_allowance, read_chunks};
use crate::io::{parse_snap_chunk_into, InputError};
use crate::state::{check_state, Origin};

/// The parent of an id that is in no edge.
const ABSENT: u32 = u32::MAX;

/// Edges per piece of the local pass (8 bytes each: 8 MiB).
const PIECE: usize = 1 << 20;

/// How far ahead of the current edge the parents are prefetched.
const AHEAD: usize = 16;

/// One rank's part of an undirected edge list, in storage-backed memory.
#[derive(Debug)]
pub struct EdgeList {
    /// This rank's edges `[u, v]` (any order, repeats and self loops allowed).
    pub edges: SbVec<[u32; 2]>,
    /// One more than the largest vertex id of all ranks' edges (0 without edges).
    pub n: u64,
}

impl EdgeList {
    /// This rank's `edges`; a collective (the ranks agree on the id range).
    ///
    /// # Errors
    /// Communication and storage errors.
    pub fn from_pairs(comm: &Comm, edges: &[(u32, u32)]) -> Result<EdgeList, AlgoError> {
        let mut stored: SbVec<[u32; 2]> = SbVec::zeroed(comm.runtime(), edges.len())?;
        let mut top = 0u64;
        for (o, &(u, v)) in stored.as_mut_slice().iter_mut().zip(edges) {
            *o = [u, v];
            top = top.max(u64::from(u.max(v)) + 1);
        }
        let n = comm.allreduce(&[top], Max)?[0];
        Ok(EdgeList { edges: stored, n })
    }
}

/// Reads a SNAP edge list ("src dst" per line, `#` comments), each rank its line-aligned part
/// in bounded chunks, into storage-backed memory.
///
/// # Errors
/// [`AlgoError::Input`] with the file, line and reason of the first malformed line (the same
/// on every rank), or an unreadable file.
pub fn load_edge_list(comm: &Comm, path: &Path) -> Result<EdgeList, AlgoError> {
    let mut stored: SbVec<[u32; 2]> = SbVec::with_capacity(comm.runtime(), 0)?;
    let mut largest = LargestId::default();
    let mut parsed: Vec<(u32, u32)> = Vec::new();
    let chunk = heap_allowance(comm) / 2;
    let (read, before) = read_chunks(comm, path, 0, chunk, |bytes| {
        parsed.clear();
        let error = parse_snap_chunk_into(bytes, &mut parsed);
        largest.observe(bytes, &parsed);
        let start = stored.len();
        stored.resize(start + parsed.len())?;
        for (o, &(u, v)) in stored
            .range_mut(start..start + parsed.len())
            .iter_mut()
            .zip(&parsed)
        {
            *o = [u, v];
        }
        if comm.runtime().mem_budget().is_some() {
            stored.unload();
        }
        Ok(error)
    })?;
    agree_on_error(comm, path, read.error, before)?;
    let Some((id, line)) = largest.agree(comm, before)? else {
        return Err(InputError::new(path, None, "no edges").into());
    };
    let n = id + 1;
    // Every rank's forest covers the whole id range: check what the largest id implies before
    // `components` allocates it (all ranks counted, the most one process can hold).
    let ranks = comm.size() as u64;
    let units = format!("{ranks} union-find forests of {n} vertex ids");
    let what = format!("vertex id {id}");
    let bytes = n.saturating_mul(4).saturating_mul(ranks);
    check_state(
        comm,
        bytes,
        &units,
        Origin::Line {
            path,
            line: Some(line),
            what: &what,
        },
    )?;
    Ok(EdgeList { edges: stored, n })
}

/// The components found, as this rank's block of labels.
#[derive(Debug)]
pub struct Components {
    /// First vertex id of this rank's block (blocks of consecutive ids, in rank order).
    pub lo: u64,
    /// The label of each id `lo + i` of the block, or `u32::MAX` for an id in no edge.
    pub labels: SbVec<u32>,
    /// Vertices (ids in some edge) of the whole graph.
    pub vertices: u64,
    /// Components of the whole graph.
    pub components: u64,
    /// Where the time went on this rank.
    pub timing: CcTiming,
}

/// Wall time of the phases on one rank.
#[derive(Debug, Clone, Copy, Default)]
pub struct CcTiming {
    /// The union-find over the rank's edges.
    pub local: Duration,
    /// Sending, receiving and uniting forests.
    pub merge: Duration,
    /// Labelling at rank 0 and the scatter of the labels.
    pub labels: Duration,
}

impl Components {
    /// Calls `f` with `(vertex, label)` for every vertex of this rank's block, in increasing
    /// id order.
    pub fn for_each(&self, mut f: impl FnMut(u32, u32)) {
        for (i, &l) in self.labels.as_slice().iter().enumerate() {
            if l != ABSENT {
                f((self.lo + i as u64) as u32, l);
            }
        }
    }
}

/// The first id of rank `r`'s block of `n` ids over `p` ranks.
fn block_start(n: u64, p: usize, r: usize) -> u64 {
    (u128::from(n) * r as u128 / p as u128) as u64
}

/// Unites the sets of `x` and `y` (both present) by Rem's algorithm with splicing: walks up
/// from both at once, always from the one whose parent is larger, re-pointing each node passed
/// to the other side's (smaller) parent. Parents only decrease, so `p[v] <= v` holds and each
/// root is its set's smallest id.
#[inline(always)]
fn unite(p: &mut [u32], x: u32, y: u32) {
    let (mut rx, mut ry) = (x as usize, y as usize);
    loop {
        let (mut px, mut py) = (p[rx], p[ry]);
        if px == py {
            return;
        }
        if px < py {
            std::mem::swap(&mut rx, &mut ry);
            std::mem::swap(&mut px, &mut py);
        }
        if px as usize == rx {
            p[rx] = py;
            return;
        }
        p[rx] = py;
        rx = px as usize;
    }
}

/// Marks `v` present (its own root) if it was absent.
#[inline(always)]
fn touch(p: &mut [u32], v: u32) {
    let slot = &mut p[v as usize];
    if *slot == ABSENT {
        *slot = v;
    }
}

/// Hints the cache that `p[v]` is needed soon.
#[inline(always)]
fn prefetch(p: &[u32], v: u32) {
    #[cfg(target_arch = "x86_64")]
    if let Some(slot) = p.get(v as usize) {
        // SAFETY: a prefetch of a valid address only hints the cache; it has no effect on
        // memory or program state.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (slot as *const u32).cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, v);
}

/// Unites the endpoints of every edge of `edges`.
fn unite_edges(p: &mut [u32], edges: &[[u32; 2]]) {
    for (i, &[u, v]) in edges.iter().enumerate() {
        if let Some(&[a, b]) = edges.get(i + AHEAD) {
            prefetch(p, a);
            prefetch(p, b);
        }
        touch(p, u);
        touch(p, v);
        unite(p, u, v);
    }
}

/// Points every present id at its root; one pass in increasing order is enough because a
/// parent is never larger than its child (its own parent is already final).
fn compress(p: &mut [u32]) {
    for v in 0..p.len() {
        let q = p[v];
        if q != ABSENT {
            p[v] = p[q as usize];
        }
    }
}

/// The message of a merge round.
const FOREST: i32 = 17;

/// Connected components of the edges of all ranks (a collective).
///
/// # Errors
/// Communication and storage errors; [`AlgoError::BadParameter`] when the id range exceeds
/// what 32-bit labels can hold.
pub fn components(comm: &Comm, edges: &EdgeList) -> Result<Components, AlgoError> {
    let comm = comm.dup();
    let (p, me) = (comm.size(), comm.rank());
    let n = edges.n;
    if n > u64::from(ABSENT) {
        return Err(AlgoError::BadParameter {
            name: "graph",
            reason: format!("{n} vertex ids: at most {ABSENT} are supported"),
        });
    }
    let budget = comm.runtime().mem_budget().is_some();
    let t0 = Instant::now();
    let mut parent: SbVec<u32> = SbVec::zeroed(comm.runtime(), n as usize)?;
    {
        let par = parent.as_mut_slice();
        par.fill(ABSENT);
        let m = edges.edges.len();
        let mut at = 0;
        while at < m {
            let end = (at + PIECE).min(m);
            unite_edges(par, edges.edges.range(at..end));
            at = end;
            if budget {
                edges.edges.unload();
            }
        }
    }
    let local = t0.elapsed();

    // Merge along a binomial tree: in round `k` (step = 2^k) a rank whose id has bit k set as
    // its lowest set bit sends its forest to `me - step`, and stops.
    let t1 = Instant::now();
    let mut step = 1;
    while step < p {
        if me % (2 * step) == step {
            compress(parent.as_mut_slice());
            let pairs: Vec<[u32; 2]> = {
                let par = parent.as_slice();
                par.iter()
                    .enumerate()
                    .filter(|&(_, &q)| q != ABSENT)
                    .map(|(v, &q)| [v as u32, q])
                    .collect()
            };
            comm.send(me - step, FOREST, &pairs)?;
            break;
        }
        if me + step < p {
            let (pairs, _) = comm.recv::<[u32; 2]>(me + step, FOREST)?;
            let par = parent.as_mut_slice();
            for (i, &[v, r]) in pairs.iter().enumerate() {
                if let Some(&[a, b]) = pairs.get(i + AHEAD) {
                    prefetch(par, a);
                    prefetch(par, b);
                }
                touch(par, v);
                touch(par, r);
                unite(par, v, r);
            }
        }
        step *= 2;
    }
    if me == 0 {
        compress(parent.as_mut_slice());
    }
    let merge = t1.elapsed();

    // Rank 0 holds every component: its compressed parents are the labels.
    let t2 = Instant::now();
    let counts: Vec<usize> = (0..p)
        .map(|r| (block_start(n, p, r + 1) - block_start(n, p, r)) as usize)
        .collect();
    let block = if me == 0 {
        comm.scatterv(0, Some((parent.as_slice(), &counts)))?
    } else {
        drop(parent);
        comm.scatterv::<u32>(0, None)?
    };
    let labels = SbVec::from_slice(comm.runtime(), &block)?;
    let lo = block_start(n, p, me);
    let mut present = 0u64;
    let mut roots = 0u64;
    for (i, &l) in block.iter().enumerate() {
        if l != ABSENT {
            present += 1;
            roots += u64::from(u64::from(l) == lo + i as u64);
        }
    }
    drop(block);
    let totals = comm.allreduce(&[present, roots], Sum)?;
    let labels_time = t2.elapsed();
    Ok(Components {
        lo,
        labels,
        vertices: totals[0],
        components: totals[1],
        timing: CcTiming {
            local,
            merge,
            labels: labels_time,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quadratic reference: labels by repeated relaxation over the edges.
    fn relax(n: usize, edges: &[[u32; 2]]) -> Vec<u32> {
        let mut l = vec![ABSENT; n];
        for &[u, v] in edges {
            l[u as usize] = u;
            l[v as usize] = v;
        }
        loop {
            let mut changed = false;
            for &[u, v] in edges {
                let m = l[u as usize].min(l[v as usize]);
                for x in [u, v] {
                    if l[x as usize] != m {
                        l[x as usize] = m;
                        changed = true;
                    }
                }
            }
            if !changed {
                return l;
            }
        }
    }

    #[test]
    fn union_find_roots_are_the_smallest_ids_of_their_sets() {
        let mut x = 12345u64;
        for n in [1usize, 2, 7, 50, 300] {
            let edges: Vec<[u32; 2]> = (0..n)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    let a = ((x >> 33) % n as u64) as u32;
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    let b = ((x >> 33) % n as u64) as u32;
                    [a, b]
                })
                .collect();
            let mut p = vec![ABSENT; n];
            unite_edges(&mut p, &edges);
            compress(&mut p);
            assert_eq!(p, relax(n, &edges), "n {n}");
        }
    }
}
