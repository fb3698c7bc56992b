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
//!   over 16 times longer; LL merges its two linked lists; DIAA and DCAA intersect runs
//!   (intervals and residuals as runs of one) without expanding intervals, so two intervals
//!   cost one comparison whatever their lengths (thesis section 4.3).
//! - Lookup ([`DynGraph::contains`]): binary search in arrays and DIAA's interval starts and
//!   residuals; a walk of LL's list (and BCSR's overflow); DCAA decodes until it passes the id.
//!
//! # Cost
//! Traversal O(V + E) for `whole`, plus per arc the structure's decoding (none for arrays, a
//! pointer chase for LL, a varint for DCAA). Intersection O(Δu + Δv) (runs for DIAA/DCAA),
//! O(min log(max/min)) when galloping. Lookup as in the [module table](super).

use super::csr::Csr;
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
}

/// A structure's neighbours in any order, for the traversal; implemented by every structure
/// with its cheapest iteration (no merge of intervals, overflow or decoded streams).
pub(crate) trait Visit {
    /// Number of vertex ids.
    fn vertex_count(&self) -> usize;
    /// Calls `f` with every neighbour of `v` (in range), in any order.
    fn visit(&self, v: u32, f: impl FnMut(u32));
}

/// Breadth-first traversal of `g` from `source` (see the [module documentation](self)).
pub(crate) fn bft<G: Visit + ?Sized>(
    g: &G,
    source: u32,
    whole: bool,
    s: &mut QueryScratch,
) -> Traversal {
    let n = g.vertex_count();
    s.levels.clear();
    s.levels.resize(n, UNREACHED);
    s.queue.clear();
    s.queue.reserve(n);
    let mut t = Traversal::default();
    if (source as usize) < n {
        component(g, source, s, &mut t);
    }
    if whole {
        for r in 0..n {
            if s.levels[r] == UNREACHED {
                component(g, r as u32, s, &mut t);
            }
        }
    }
    t
}

/// Visits the vertices reachable from the unvisited `root`, appending them to the queue.
fn component<G: Visit + ?Sized>(g: &G, root: u32, s: &mut QueryScratch, t: &mut Traversal) {
    let QueryScratch { levels, queue, .. } = s;
    let mut head = queue.len();
    levels[root as usize] = 0;
    queue.push(root);
    let mut arcs = 0u64;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        let next = levels[u as usize] + 1;
        g.visit(u, |w| {
            arcs += 1;
            let l = &mut levels[w as usize];
            if *l == UNREACHED {
                *l = next;
                queue.push(w);
            }
        });
    }
    t.components += 1;
    t.reached = queue.len() as u64;
    t.arcs += arcs;
    let last = queue[queue.len() - 1];
    t.depth = t.depth.max(levels[last as usize]);
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
    let mut from = 0;
    let mut c = 0u64;
    for &x in a {
        let rest = &b[from..];
        let mut hi = 1;
        while hi < rest.len() && rest[hi - 1] < x {
            hi *= 2;
        }
        let hi = hi.min(rest.len());
        let lo = hi / 2;
        let pos = lo + rest[lo..hi].partition_point(|&y| y < x);
        c += u64::from(rest.get(pos) == Some(&x));
        from += pos;
        if from >= b.len() {
            break;
        }
    }
    c
}

/// The runs `[start, end)` of an intervalised array (see `intervals`) in increasing order:
/// its intervals and its residuals (runs of one), merged by start.
pub(crate) struct Runs<'a> {
    ivl: &'a [u32],
    res: &'a [u32],
}

impl<'a> Runs<'a> {
    /// The runs of the flat array `a` (`[i, E1, L1, ..., Ei, Li, R1, ..., Rk]`, or empty).
    pub(crate) fn new(a: &'a [u32]) -> Runs<'a> {
        let i = a.first().map_or(0, |&c| c as usize);
        let (ivl, res) = if a.is_empty() {
            (a, a)
        } else {
            a[1..].split_at(2 * i)
        };
        Runs { ivl, res }
    }
}

impl Iterator for Runs<'_> {
    type Item = (u32, u32);

    #[inline]
    fn next(&mut self) -> Option<(u32, u32)> {
        match (self.ivl.first(), self.res.first()) {
            (Some(&s), r) if r.is_none_or(|&r| s < r) => {
                let l = self.ivl[1];
                self.ivl = &self.ivl[2..];
                Some((s, s + l))
            }
            (_, Some(&r)) => {
                self.res = &self.res[1..];
                Some((r, r + 1))
            }
            _ => None,
        }
    }
}

/// `|A ∩ B|` of two increasing sequences of disjoint runs `[start, end)`: one comparison per
/// pair of overlapping or adjacent runs, whatever their lengths.
pub(crate) fn intersect_runs(
    mut a: impl Iterator<Item = (u32, u32)>,
    mut b: impl Iterator<Item = (u32, u32)>,
) -> u64 {
    let (mut x, mut y) = (a.next(), b.next());
    let mut c = 0u64;
    while let (Some((s1, e1)), Some((s2, e2))) = (x, y) {
        let (lo, hi) = (s1.max(s2), e1.min(e2));
        if hi > lo {
            c += u64::from(hi - lo);
        }
        if e1 <= e2 {
            x = a.next();
        } else {
            y = b.next();
        }
    }
    c
}

impl Visit for Csr {
    fn vertex_count(&self) -> usize {
        self.num_vertices()
    }

    #[inline]
    fn visit(&self, v: u32, f: impl FnMut(u32)) {
        self.neighbours(v).iter().copied().for_each(f);
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
    fn runs_merge_intervals_and_residuals() {
        // [3,5), [10,14) and residuals 0, 7, 20.
        let a = [2, 3, 2, 10, 4, 0, 7, 20];
        let runs: Vec<_> = Runs::new(&a).collect();
        assert_eq!(runs, vec![(0, 1), (3, 5), (7, 8), (10, 14), (20, 21)]);
        assert_eq!(Runs::new(&[]).count(), 0);
        // [4, 12) and residual 20: 4, 7, 10, 11 and 20.
        let b = [1, 4, 8, 20];
        assert_eq!(intersect_runs(Runs::new(&a), Runs::new(&b)), 5);
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
