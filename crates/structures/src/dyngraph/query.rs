//! The thesis's three query kernels (section 4.3): breadth-first traversal, neighbour-set
//! intersection and adjacency lookup, written once over a structure's neighbour iteration and
//! specialised where a structure allows better.
//!
//! # Semantics
//! - Traversal ([`DynGraph::bft`]): levels from `source` (0 at the source) by a FIFO queue;
//!   with `whole`, when the queue runs dry the traversal restarts at the smallest unvisited
//!   id (level 0 again) until every vertex is visited, as the thesis's BFT does (it restarts at
//!   a random unvisited vertex). Every arc is scanned once per visited vertex.
//! - Intersection ([`DynGraph::common_neighbours`]): `|N(u) ∩ N(v)|` of two sorted lists.
//!   Arrays (CSR, DAA, BCSR once folded) merge, or gallop through the longer list when it is
//!   over 16 times longer; LL merges its two linked lists; DIAA and DCAA intersect intervals
//!   without expanding them (two intervals cost one comparison whatever their lengths, a
//!   residual is counted inside an interval by binary search; thesis section 4.3) and their
//!   residuals as arrays.
//! - Lookup ([`DynGraph::contains`]): binary search in arrays and DIAA's interval starts and
//!   residuals; a walk of LL's list (and BCSR's overflow); DCAA decodes until it passes the id.
//!
//! # Cost
//! Traversal O(V + E) for `whole`, plus per arc the structure's decoding (none for arrays, a
//! pointer chase for LL, a varint for DCAA). Intersection O(Δu + Δv) (runs for DIAA/DCAA),
//! O(min log(max/min)) when galloping. Lookup as in the [module table](super).

use super::csr::Csr;
use super::pool::{Lists, NIL};
use super::DynGraph;

/// Level of a vertex the traversal has not reached.
pub const UNREACHED: u32 = u32::MAX;

/// What a breadth-first traversal saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Traversal {
    /// Vertices visited.
    pub reached: u64,
    /// Traversal roots: 1 for a traversal from a source in range, plus one per restart.
    pub components: u64,
    /// The largest level reached.
    pub depth: u32,
    /// Arcs scanned (each arc of each visited vertex once).
    pub arcs: u64,
}

/// Reusable buffers of the query kernels (levels and queue of a traversal, decoded lists of
/// an intersection), so that repeated queries do not allocate.
#[derive(Debug, Default, Clone)]
pub struct QueryScratch {
    levels: Vec<u32>,
    queue: Vec<u32>,
    pub(crate) a: Vec<u32>,
    pub(crate) b: Vec<u32>,
}

impl QueryScratch {
    /// Empty buffers.
    pub fn new() -> QueryScratch {
        QueryScratch::default()
    }

    /// The levels of the last traversal, one per vertex ([`UNREACHED`] if not visited).
    pub fn levels(&self) -> &[u32] {
        &self.levels
    }

    /// Levels (all unreached) and a queue of one slot per vertex, for a traversal of `n`.
    fn reset(&mut self, n: usize) -> (&mut [u32], &mut [u32]) {
        self.levels.clear();
        self.levels.resize(n, UNREACHED);
        self.queue.resize(n, 0);
        (&mut self.levels, &mut self.queue[..n])
    }
}

/// A structure's neighbours in any order, for the traversal; implemented by every structure
/// with its cheapest iteration (no merge of intervals, overflow or decoded streams).
pub(crate) trait Visit {
    /// Number of vertex ids.
    fn vertex_count(&self) -> usize;
    /// Calls `f` with every neighbour of `v` (in range), in any order.
    fn visit(&self, v: u32, f: impl FnMut(u32));

    /// Hints that `v`'s list will be read soon: with `far`, what locates the list (its
    /// header or offset, found without a load); otherwise the list itself.
    #[inline]
    fn prefetch(&self, v: u32, far: bool) {
        let _ = (v, far);
    }
}

/// How far ahead in the queue a traversal prefetches lists (twice that for headers).
const AHEAD: usize = 8;

/// Asks the CPU to bring the cache line holding `p` into the cache; no effect on other
/// architectures.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it reads no memory architecturally and never faults,
    // whatever the address; SSE, which it belongs to, is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Breadth-first traversal of `g` from `source` (see the [module documentation](self)).
pub(crate) fn bft<G: Visit + ?Sized>(
    g: &G,
    source: u32,
    whole: bool,
    s: &mut QueryScratch,
) -> Traversal {
    let n = g.vertex_count();
    let (levels, queue) = s.reset(n);
    let mut t = Traversal::default();
    let mut tail = 0;
    if (source as usize) < n {
        tail = component(g, source, levels, queue, tail, &mut t);
    }
    if whole {
        for r in 0..n {
            if levels[r] == UNREACHED {
                tail = component(g, r as u32, levels, queue, tail, &mut t);
            }
        }
    }
    t
}

/// Visits the vertices reachable from the unvisited `root`, appending them to `queue` from
/// `tail` on; returns the new tail. The queue is a slice of one slot per vertex (no push, so
/// no capacity checks or reloads in the inner loop).
fn component<G: Visit + ?Sized>(
    g: &G,
    root: u32,
    levels: &mut [u32],
    queue: &mut [u32],
    mut tail: usize,
    t: &mut Traversal,
) -> usize {
    let mut head = tail;
    levels[root as usize] = 0;
    queue[tail] = root;
    tail += 1;
    let mut arcs = 0u64;
    while head < tail {
        if head + 2 * AHEAD < tail {
            g.prefetch(queue[head + 2 * AHEAD], true);
        }
        if head + AHEAD < tail {
            g.prefetch(queue[head + AHEAD], false);
        }
        let u = queue[head];
        head += 1;
        let next = levels[u as usize] + 1;
        g.visit(u, |w| {
            arcs += 1;
            let l = &mut levels[w as usize];
            if *l == UNREACHED {
                *l = next;
                queue[tail] = w;
                tail += 1;
            }
        });
    }
    t.components += 1;
    t.reached = tail as u64;
    t.arcs += arcs;
    t.depth = t.depth.max(levels[queue[tail - 1] as usize]);
    tail
}

/// Lists walked at once by [`bft_lists`].
const LANES: usize = 16;

/// Breadth-first traversal of linked lists (LL and BCSR's overflow have the same arena),
/// walking up to [`LANES`] lists of one level at once: a linked list is a chain of
/// dependent loads, one cache miss after another; independent chains let the misses overlap.
/// Only vertices of one level share the lanes, so the levels are those of [`bft`] (the
/// order within a level differs).
pub(crate) fn bft_lists(g: &Lists, source: u32, whole: bool, s: &mut QueryScratch) -> Traversal {
    let n = g.heads.len();
    let (levels, queue) = s.reset(n);
    let mut t = Traversal::default();
    let mut tail = 0;
    if (source as usize) < n {
        tail = lanes_component(g, source, levels, queue, tail, &mut t);
    }
    if whole {
        for r in 0..n {
            if levels[r] == UNREACHED {
                tail = lanes_component(g, r as u32, levels, queue, tail, &mut t);
            }
        }
    }
    t
}

/// One component of [`bft_lists`], from the unvisited `root`; returns the new queue tail.
fn lanes_component(
    g: &Lists,
    root: u32,
    levels: &mut [u32],
    queue: &mut [u32],
    mut tail: usize,
    t: &mut Traversal,
) -> usize {
    let mut head = tail;
    levels[root as usize] = 0;
    queue[tail] = root;
    tail += 1;
    let mut cur = [NIL; LANES];
    // The vertices of the level being expanded are queue[..level_end].
    let (mut level, mut level_end, mut busy, mut arcs) = (0u32, tail, 0usize, 0u64);
    loop {
        // Fill idle lanes with vertices of the current level, prefetching ahead.
        for c in cur.iter_mut().filter(|c| **c == NIL) {
            while head < level_end {
                if head + 2 * AHEAD < tail {
                    prefetch(&g.heads[queue[head + 2 * AHEAD] as usize]);
                }
                if head + AHEAD < tail {
                    g.prefetch_node(g.heads[queue[head + AHEAD] as usize]);
                }
                let h = g.heads[queue[head] as usize];
                head += 1;
                if h != NIL {
                    *c = h;
                    busy += 1;
                    break;
                }
            }
        }
        if busy == 0 {
            if head == tail {
                break;
            }
            level += 1;
            level_end = tail;
            continue;
        }
        for c in cur.iter_mut().filter(|c| **c != NIL) {
            let node = g.node(*c);
            arcs += 1;
            let l = &mut levels[node.value as usize];
            if *l == UNREACHED {
                *l = level + 1;
                queue[tail] = node.value;
                tail += 1;
            }
            *c = node.next;
            busy -= usize::from(node.next == NIL);
        }
    }
    t.components += 1;
    t.reached = tail as u64;
    t.arcs += arcs;
    t.depth = t.depth.max(levels[queue[tail - 1] as usize]);
    tail
}

/// The traversal through [`DynGraph::neighbours_into`]: the default for implementations
/// outside this crate.
pub(crate) struct ByLists<'a, G: ?Sized>(pub(crate) &'a G);

impl<G: DynGraph + ?Sized> Visit for ByLists<'_, G> {
    fn vertex_count(&self) -> usize {
        self.0.num_vertices()
    }

    fn visit(&self, v: u32, f: impl FnMut(u32)) {
        self.0.neighbours(v).into_iter().for_each(f);
    }
}

/// `|a ∩ b|` of two increasing lists: a branch-free merge, or a galloping search of the
/// longer list for each id of the shorter one when it is over 16 times longer.
pub(crate) fn intersect_sorted(a: &[u32], b: &[u32]) -> u64 {
    let (a, b) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if a.is_empty() {
        return 0;
    }
    if a.len() * 16 < b.len() {
        return intersect_gallop(a, b);
    }
    let (mut i, mut j, mut c) = (0, 0, 0u64);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        c += u64::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    c
}

/// `|a ∩ b|` by galloping through the much longer `b`.
fn intersect_gallop(a: &[u32], b: &[u32]) -> u64 {
    let mut rest = b;
    let mut c = 0u64;
    for &x in a {
        rest = &rest[gallop(rest, x)..];
        match rest.first() {
            None => break,
            Some(&y) => c += u64::from(y == x),
        }
    }
    c
}

/// The intervals (as `start, length` pairs) and the residuals of an intervalised array
/// (`[i, E1, L1, ..., Ei, Li, R1, ..., Rk]`, or empty; see `intervals`).
#[inline]
fn split(a: &[u32]) -> (&[u32], &[u32]) {
    match a.split_first() {
        Some((&i, rest)) => rest.split_at(2 * i as usize),
        None => (a, a),
    }
}

/// `|A ∩ B|` of two intervalised arrays, as four disjoint parts: residuals against residuals
/// (an array intersection), intervals against intervals (one comparison per pair of
/// overlapping intervals, whatever their lengths), and each side's intervals against the
/// other's residuals (two binary searches per interval). Lists without intervals cost what
/// an array intersection costs.
pub(crate) fn intersect_intervalised(a: &[u32], b: &[u32]) -> u64 {
    let ((ia, ra), (ib, rb)) = (split(a), split(b));
    let mut c = intersect_sorted(ra, rb);
    if !ia.is_empty() || !ib.is_empty() {
        c += intersect_intervals(ia, ib) + residuals_in(ia, rb) + residuals_in(ib, ra);
    }
    c
}

/// The ids two increasing lists of disjoint intervals (`start, length` pairs) share: a
/// merge, or when one list is over 8 times longer, a gallop through it for each interval of
/// the shorter.
fn intersect_intervals(a: &[u32], b: &[u32]) -> u64 {
    let (a, b) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if a.len() * 8 < b.len() {
        return intersect_intervals_few(a, b);
    }
    let (mut i, mut j, mut c) = (0, 0, 0u64);
    while i < a.len() && j < b.len() {
        let (e1, e2) = (a[i] + a[i + 1], b[j] + b[j + 1]);
        let (lo, hi) = (a[i].max(b[j]), e1.min(e2));
        c += u64::from(hi.saturating_sub(lo));
        if e1 <= e2 {
            i += 2;
        } else {
            j += 2;
        }
    }
    c
}

/// [`intersect_intervals`] for a much shorter `a`.
fn intersect_intervals_few(a: &[u32], b: &[u32]) -> u64 {
    let k = b.len() / 2;
    let (mut from, mut c) = (0, 0u64);
    for pair in a.chunks_exact(2) {
        let (s, e) = (pair[0], pair[0] + pair[1]);
        from = first_ending_above(b, from, s);
        while from < k && b[2 * from] < e {
            let end = b[2 * from] + b[2 * from + 1];
            c += u64::from(end.min(e) - b[2 * from].max(s));
            if end > e {
                break;
            }
            from += 1;
        }
        if from == k {
            break;
        }
    }
    c
}

/// The first interval of `ivl` (`start, length` pairs) at index `from` or later that ends
/// above `r` (the number of intervals if none), by galloping.
#[inline]
fn first_ending_above(ivl: &[u32], from: usize, r: u32) -> usize {
    let k = ivl.len() / 2;
    let end = |j: usize| ivl[2 * j] + ivl[2 * j + 1];
    let mut hi = 1;
    while from + hi <= k && end(from + hi - 1) <= r {
        hi *= 2;
    }
    let (mut lo, mut hi) = (from + hi / 2, (from + hi).min(k));
    while lo < hi {
        let mid = (lo + hi) / 2;
        if end(mid) <= r {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// How many of the increasing `res` lie in the intervals `ivl` (`start, length` pairs):
/// galloping through whichever side is over 8 times longer (O(k log(r / k)) for `k`
/// intervals and `r` residuals, or O(r log(k / r))), else one merge, O(k + r).
fn residuals_in(ivl: &[u32], res: &[u32]) -> u64 {
    let k = ivl.len() / 2;
    if res.len() * 8 < k {
        return residuals_in_few(ivl, res);
    }
    if k * 8 >= res.len() {
        return residuals_in_merge(ivl, res);
    }
    let mut rest = res;
    let mut c = 0u64;
    for pair in ivl.chunks_exact(2) {
        if rest.is_empty() {
            break;
        }
        let (s, e) = (pair[0], pair[0] + pair[1]);
        rest = &rest[gallop(rest, s)..];
        let inside = gallop(rest, e);
        c += inside as u64;
        rest = &rest[inside..];
    }
    c
}

/// [`residuals_in`] by one merge of the residuals with the interval ends.
fn residuals_in_merge(ivl: &[u32], res: &[u32]) -> u64 {
    let k = ivl.len() / 2;
    let (mut j, mut c) = (0, 0u64);
    for &x in res {
        while j < k && ivl[2 * j] + ivl[2 * j + 1] <= x {
            j += 1;
        }
        if j == k {
            break;
        }
        c += u64::from(ivl[2 * j] <= x);
    }
    c
}

/// [`residuals_in`] for few residuals: each finds its interval by galloping over the
/// interval ends from the previous one's.
fn residuals_in_few(ivl: &[u32], res: &[u32]) -> u64 {
    let k = ivl.len() / 2;
    let (mut from, mut c) = (0, 0u64);
    for &r in res {
        from = first_ending_above(ivl, from, r);
        if from == k {
            break;
        }
        c += u64::from(ivl[2 * from] <= r);
    }
    c
}

/// The number of ids of the increasing `a` below `x`, by exponential then binary search.
#[inline]
fn gallop(a: &[u32], x: u32) -> usize {
    let mut hi = 1;
    while hi < a.len() && a[hi - 1] < x {
        hi *= 2;
    }
    let hi = hi.min(a.len());
    let lo = hi / 2;
    lo + a[lo..hi].partition_point(|&y| y < x)
}

impl Visit for Csr {
    fn vertex_count(&self) -> usize {
        self.num_vertices()
    }

    #[inline]
    fn visit(&self, v: u32, f: impl FnMut(u32)) {
        self.neighbours(v).iter().copied().for_each(f);
    }

    #[inline]
    fn prefetch(&self, v: u32, far: bool) {
        let at = &self.offsets[v as usize];
        if far {
            prefetch(at);
        } else {
            prefetch(self.targets.as_ptr().wrapping_add(*at as usize));
        }
    }
}

impl Csr {
    /// Breadth-first traversal from `source`, the whole graph with `whole` (see
    /// [`DynGraph::bft`]); the levels are left in `scratch`.
    pub fn bft(&self, source: u32, whole: bool, scratch: &mut QueryScratch) -> Traversal {
        bft(self, source, whole, scratch)
    }

    /// Number of common neighbours of `u` and `v` (see [`DynGraph::common_neighbours`]).
    pub fn common_neighbours(&self, u: u32, v: u32) -> u64 {
        intersect_sorted(self.neighbours(u), self.neighbours(v))
    }

    /// Whether the arc `u -> v` is present: a binary search.
    pub fn contains(&self, u: u32, v: u32) -> bool {
        self.neighbours(u).binary_search(&v).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervalised_lists_intersect_by_parts() {
        // [3,5), [10,14) and residuals 0, 7, 20.
        let a = [2, 3, 2, 10, 4, 0, 7, 20];
        // [4, 12) and residual 20: 4, 7, 10, 11 and 20.
        let b = [1, 4, 8, 20];
        assert_eq!(intersect_intervalised(&a, &b), 5);
        assert_eq!(intersect_intervalised(&b, &a), 5);
        assert_eq!(intersect_intervalised(&a, &[]), 0);
        assert_eq!(intersect_intervalised(&a, &a), 9);
        // Many intervals against few residuals, and the reverse.
        let mut many = vec![100];
        for j in 0..100 {
            many.extend([10 * j, 3]);
        }
        let few = [0, 2, 15, 31, 995, 2000];
        assert_eq!(residuals_in(&many[1..], &few), 3);
        assert_eq!(residuals_in_few(&many[1..], &few), 3);
        let dense: Vec<u32> = (0..1000).filter(|x| x % 10 == 1).collect();
        assert_eq!(residuals_in(&many[1..], &dense), 100);
        assert_eq!(residuals_in_merge(&many[1..], &dense), 100);
        assert_eq!(residuals_in_merge(&many[1..], &few), 3);
        // Few intervals against many: [1, 12) meets [0, 3) and [10, 13) in 2 ids each;
        // [995, 1005) meets nothing (the last is [990, 993)).
        let short = [1, 11, 995, 10];
        assert_eq!(intersect_intervals(&short, &many[1..]), 2 + 2);
        assert_eq!(intersect_intervals_few(&short, &many[1..]), 4);
    }

    #[test]
    fn gallop_and_merge_agree() {
        let b: Vec<u32> = (0..5000).map(|x| x * 3).collect();
        for a in [vec![0u32, 3, 4, 9, 14_997, 15_000], vec![], vec![1, 2]] {
            let want = a.iter().filter(|x| b.binary_search(x).is_ok()).count() as u64;
            assert_eq!(intersect_sorted(&a, &b), want);
            assert_eq!(intersect_sorted(&b, &a), want);
            let mut merged = 0;
            let (mut i, mut j) = (0, 0);
            while i < a.len() && j < b.len() {
                merged += u64::from(a[i] == b[j]);
                if a[i] <= b[j] {
                    i += 1;
                } else {
                    j += 1;
                }
            }
            assert_eq!(merged, want);
        }
    }
}
