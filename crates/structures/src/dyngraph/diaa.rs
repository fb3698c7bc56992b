//! DIAA: exact-size arrays of intervals and residuals (thesis section 4.2.4).

use super::batch::{for_each_run, max_id, merge_into, sorted_keys};
use super::query::{self, QueryScratch, Traversal, Visit};
use super::{intervals, vec_bytes, vertex_index, DynGraph};

/// Dynamic intervalised adjacency arrays: every vertex owns one exact-size heap array
/// `[i, E1, L1, ..., Ei, Li, R1, ..., Rk]` of `i` intervals (maximal runs of two or more
/// consecutive ids, as start and length) and `k` residual ids, plus its degree.
///
/// # Semantics
/// As [`DynGraph`]. The array is kept canonical (see the thesis's figure 4.2): an insert
/// creates a residual, turns residuals into an interval, extends an interval (*int-new*),
/// extends it over a residual (*int-new-res*) or joins two intervals (*int-int*); a delete
/// splits an interval.
///
/// # Cost
/// Insert and delete: binary searches over interval starts and residuals, then one
/// reallocation and a shift of at most the array, O(Δ) and often much less for well
/// intervalised lists. Contains: O(log Δ). Memory: 20 bytes per vertex (pointer, length,
/// degree) + 4 per residual + 8 per interval + 4 for the interval count of a non-empty list.
pub struct Diaa {
    lists: Vec<Box<[u32]>>,
    degrees: Vec<u32>,
    arcs: u64,
    words: u64,
}

impl Diaa {
    /// An empty graph.
    pub fn new() -> Diaa {
        Diaa::with_vertices(0)
    }

    /// An empty graph with ids `0..n` reserved.
    pub fn with_vertices(n: usize) -> Diaa {
        let mut lists = Vec::new();
        lists.resize_with(n, Default::default);
        Diaa {
            lists,
            degrees: vec![0; n],
            arcs: 0,
            words: 0,
        }
    }

    fn ensure(&mut self, u: usize) {
        if u >= self.lists.len() {
            self.lists.resize_with(u + 1, Default::default);
            self.degrees.resize(u + 1, 0);
        }
    }

    /// Applies `op` to `u`'s array, which it grows by at most `extra` words, keeping the heap
    /// array exact-size.
    fn update(&mut self, u: usize, extra: usize, op: impl FnOnce(&mut Vec<u32>) -> bool) -> bool {
        let mut vec = std::mem::take(&mut self.lists[u]).into_vec();
        let before = vec.len();
        vec.reserve_exact(extra);
        let changed = op(&mut vec);
        self.words = self.words - before as u64 + vec.len() as u64;
        self.lists[u] = vec.into_boxed_slice();
        changed
    }

    /// Number of intervals over all vertices (a measure of how well the graph intervalises).
    pub fn intervals(&self) -> u64 {
        self.lists
            .iter()
            .map(|l| l.first().map_or(0, |&c| u64::from(c)))
            .sum()
    }
}

impl Default for Diaa {
    fn default() -> Self {
        Diaa::new()
    }
}

impl Visit for Diaa {
    fn vertex_count(&self) -> usize {
        self.lists.len()
    }

    #[inline]
    fn visit(&self, v: u32, f: impl FnMut(u32)) {
        intervals::visit(&self.lists[v as usize], f);
    }

    #[inline]
    fn prefetch(&self, v: u32, far: bool) {
        let at = &self.lists[v as usize];
        if far {
            query::prefetch(at);
        } else {
            query::prefetch(at.as_ptr());
        }
    }
}

impl Diaa {
    fn list(&self, v: u32) -> &[u32] {
        self.lists.get(v as usize).map_or(&[], |l| l)
    }
}

impl DynGraph for Diaa {
    fn bft(&self, source: u32, whole: bool, scratch: &mut QueryScratch) -> Traversal {
        query::bft(self, source, whole, scratch)
    }

    /// Intersects the two arrays in place by parts: intervals whole, residuals as arrays.
    fn common_neighbours(&self, u: u32, v: u32, _: &mut QueryScratch) -> u64 {
        query::intersect_intervalised(self.list(u), self.list(v))
    }

    fn insert(&mut self, u: u32, v: u32) -> bool {
        let ui = vertex_index(u);
        self.ensure(ui.max(vertex_index(v)));
        if intervals::contains(&self.lists[ui], v) {
            return false;
        }
        // An insert grows the array by at most one word (two for the first id).
        let extra = if self.lists[ui].is_empty() { 2 } else { 1 };
        let changed = self.update(ui, extra, |a| intervals::insert(a, v));
        debug_assert!(changed);
        self.degrees[ui] += 1;
        self.arcs += 1;
        true
    }

    /// Each touched list is expanded to its ids, merged with its new arcs and intervalised
    /// again into a new exact-size array.
    fn insert_batch(&mut self, batch: &[(u32, u32)]) -> u64 {
        let keys = sorted_keys(batch);
        let Some(top) = max_id(&keys) else {
            return 0;
        };
        self.ensure(vertex_index(top));
        let (mut vals, mut ids, mut merged, mut flat, mut res) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut new = 0u64;
        for_each_run(&keys, &mut vals, |u, vs| {
            let u = u as usize;
            ids.clear();
            intervals::for_each(&self.lists[u], |x| ids.push(x));
            let added = merge_into(&ids, vs, &mut merged);
            if added > 0 {
                intervals::from_sorted(&merged, &mut flat, &mut res);
                self.words = self.words - self.lists[u].len() as u64 + flat.len() as u64;
                self.lists[u] = flat.as_slice().into();
                self.degrees[u] += added as u32;
                new += added as u64;
            }
        });
        self.arcs += new;
        new
    }

    fn delete(&mut self, u: u32, v: u32) -> bool {
        let ui = u as usize;
        if ui >= self.lists.len() || !intervals::contains(&self.lists[ui], v) {
            return false;
        }
        // Splitting an interval in two adds two words.
        let changed = self.update(ui, 2, |a| intervals::delete(a, v));
        debug_assert!(changed);
        self.degrees[ui] -= 1;
        self.arcs -= 1;
        true
    }

    fn contains(&self, u: u32, v: u32) -> bool {
        self.lists
            .get(u as usize)
            .is_some_and(|l| intervals::contains(l, v))
    }

    fn degree(&self, v: u32) -> usize {
        self.degrees.get(v as usize).map_or(0, |&d| d as usize)
    }

    fn neighbours_into(&self, v: u32, out: &mut Vec<u32>) {
        out.clear();
        if let Some(l) = self.lists.get(v as usize) {
            intervals::for_each(l, |x| out.push(x));
        }
    }

    fn num_vertices(&self) -> usize {
        self.lists.len()
    }

    fn num_arcs(&self) -> u64 {
        self.arcs
    }

    fn bytes_used(&self) -> usize {
        std::mem::size_of::<Self>()
            + vec_bytes(&self.lists)
            + vec_bytes(&self.degrees)
            + 4 * self.words as usize
    }

    fn name(&self) -> &'static str {
        "diaa"
    }
}
