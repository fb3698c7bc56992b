//! DAA: one exact-size sorted array per vertex (thesis section 4.2.3).

use super::batch::{for_each_run, max_id, merge_into, sorted_keys};
use super::query::{self, QueryScratch, Traversal, Visit};
use super::{vec_bytes, vertex_index, DynGraph};

/// Dynamic adjacency arrays: every vertex owns a heap array of exactly its degree, sorted.
///
/// # Semantics
/// As [`DynGraph`]. The array's length is the degree (the thesis stores the degree in the
/// vertex object; here it is the length of the boxed slice).
///
/// # Cost
/// Insert and delete: a binary search, a reallocation to the new exact size and a shift of
/// the tail, O(Δ). A batch: one new exact-size array per touched vertex, its old list copied
/// in stretches between the new arcs (found by galloping search), O(Δ + k log Δ). Contains:
/// O(log Δ). Memory: 16 bytes per vertex (pointer and length) + 4 per arc, with no slack.
pub struct Daa {
    lists: Vec<Box<[u32]>>,
    arcs: u64,
}

impl Daa {
    /// An empty graph.
    pub fn new() -> Daa {
        Daa::with_vertices(0)
    }

    /// An empty graph with ids `0..n` reserved.
    pub fn with_vertices(n: usize) -> Daa {
        let mut lists = Vec::new();
        lists.resize_with(n, Default::default);
        Daa { lists, arcs: 0 }
    }

    fn ensure(&mut self, u: usize) {
        if u >= self.lists.len() {
            self.lists.resize_with(u + 1, Default::default);
        }
    }
}

impl Default for Daa {
    fn default() -> Self {
        Daa::new()
    }
}

impl Visit for Daa {
    fn vertex_count(&self) -> usize {
        self.lists.len()
    }

    #[inline]
    fn visit(&self, v: u32, f: impl FnMut(u32)) {
        self.lists[v as usize].iter().copied().for_each(f);
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

impl Daa {
    fn list(&self, v: u32) -> &[u32] {
        self.lists.get(v as usize).map_or(&[], |l| l)
    }
}

impl DynGraph for Daa {
    fn bft(&self, source: u32, whole: bool, scratch: &mut QueryScratch) -> Traversal {
        query::bft(self, source, whole, scratch)
    }

    /// A merge of the two arrays in place (galloping when one is much longer).
    fn common_neighbours(&self, u: u32, v: u32, _: &mut QueryScratch) -> u64 {
        query::intersect_sorted(self.list(u), self.list(v))
    }

    fn insert(&mut self, u: u32, v: u32) -> bool {
        let ui = vertex_index(u);
        self.ensure(ui.max(vertex_index(v)));
        let pos = match self.lists[ui].binary_search(&v) {
            Ok(_) => return false,
            Err(p) => p,
        };
        let mut list = std::mem::take(&mut self.lists[ui]).into_vec();
        list.reserve_exact(1);
        list.insert(pos, v);
        self.lists[ui] = list.into_boxed_slice();
        self.arcs += 1;
        true
    }

    /// Each touched array is rebuilt once, exact-size, by a merge with its new arcs.
    fn insert_batch(&mut self, batch: &[(u32, u32)]) -> u64 {
        let keys = sorted_keys(batch);
        let Some(top) = max_id(&keys) else {
            return 0;
        };
        self.ensure(vertex_index(top));
        let mut new = 0u64;
        let mut vals = Vec::new();
        let mut merged = Vec::new();
        for_each_run(&keys, &mut vals, |u, vs| {
            let list = &mut self.lists[u as usize];
            let added = merge_into(list, vs, &mut merged);
            if added > 0 {
                *list = merged.as_slice().into();
                new += added as u64;
            }
        });
        self.arcs += new;
        new
    }

    fn delete(&mut self, u: u32, v: u32) -> bool {
        let ui = u as usize;
        let Some(list) = self.lists.get_mut(ui) else {
            return false;
        };
        let Ok(pos) = list.binary_search(&v) else {
            return false;
        };
        let mut vec = std::mem::take(list).into_vec();
        vec.remove(pos);
        *list = vec.into_boxed_slice();
        self.arcs -= 1;
        true
    }

    fn contains(&self, u: u32, v: u32) -> bool {
        self.lists
            .get(u as usize)
            .is_some_and(|l| l.binary_search(&v).is_ok())
    }

    fn degree(&self, v: u32) -> usize {
        self.lists.get(v as usize).map_or(0, |l| l.len())
    }

    fn neighbours_into(&self, v: u32, out: &mut Vec<u32>) {
        out.clear();
        if let Some(l) = self.lists.get(v as usize) {
            out.extend_from_slice(l);
        }
    }

    fn num_vertices(&self) -> usize {
        self.lists.len()
    }

    fn num_arcs(&self) -> u64 {
        self.arcs
    }

    fn bytes_used(&self) -> usize {
        std::mem::size_of::<Self>() + vec_bytes(&self.lists) + 4 * self.arcs as usize
    }

    fn name(&self) -> &'static str {
        "daa"
    }
}
