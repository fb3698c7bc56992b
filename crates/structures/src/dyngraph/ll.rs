//! LL: a sorted singly linked list per vertex (thesis section 4.2.1).

use super::batch::{for_each_run, max_id, sorted_keys};
use super::pool::Lists;
use super::query::{self, QueryScratch, Traversal};
use super::{vertex_index, DynGraph};

/// Linked lists: every vertex has a sorted singly linked list of its neighbours.
///
/// # Semantics
/// As [`DynGraph`]. Nodes (a neighbour id and a next index, 8 bytes) come from a pooled
/// arena in chunks of 16384 nodes; deleted nodes are reused. Each vertex keeps a head index
/// and its degree (8 bytes).
///
/// # Cost
/// Insert, delete and contains walk the list: O(Δ) pointer chases; a batch walks each
/// touched list once. Memory:
/// 8 bytes per vertex + 8 bytes per arc (+ under one chunk of slack).
pub struct LinkedLists {
    lists: Lists,
}

impl LinkedLists {
    /// An empty graph.
    pub fn new() -> LinkedLists {
        LinkedLists::with_vertices(0)
    }

    /// An empty graph with ids `0..n` reserved.
    pub fn with_vertices(n: usize) -> LinkedLists {
        LinkedLists {
            lists: Lists::with_vertices(n),
        }
    }
}

impl Default for LinkedLists {
    fn default() -> Self {
        LinkedLists::new()
    }
}

impl DynGraph for LinkedLists {
    /// Walks up to 16 lists of one level at once, so that their cache misses overlap.
    fn bft(&self, source: u32, whole: bool, scratch: &mut QueryScratch) -> Traversal {
        query::bft_lists(&self.lists, source, whole, scratch)
    }

    /// One merge walk of the two linked lists.
    fn common_neighbours(&self, u: u32, v: u32, _: &mut QueryScratch) -> u64 {
        self.lists.intersect(u as usize, v as usize)
    }

    fn insert(&mut self, u: u32, v: u32) -> bool {
        let ui = vertex_index(u);
        self.lists.ensure(ui.max(vertex_index(v)));
        self.lists.insert(ui, v)
    }

    /// One walk of each touched list for all its new arcs.
    fn insert_batch(&mut self, batch: &[(u32, u32)]) -> u64 {
        let keys = sorted_keys(batch);
        let Some(top) = max_id(&keys) else {
            return 0;
        };
        self.lists.ensure(vertex_index(top));
        let mut new = 0u64;
        let mut vals = Vec::new();
        for_each_run(&keys, &mut vals, |u, vs| {
            new += u64::from(self.lists.insert_sorted(u as usize, vs));
        });
        new
    }

    fn delete(&mut self, u: u32, v: u32) -> bool {
        self.lists.delete(u as usize, v)
    }

    fn contains(&self, u: u32, v: u32) -> bool {
        self.lists.contains(u as usize, v)
    }

    fn degree(&self, v: u32) -> usize {
        self.lists
            .degrees
            .get(v as usize)
            .map_or(0, |&d| d as usize)
    }

    fn neighbours_into(&self, v: u32, out: &mut Vec<u32>) {
        out.clear();
        self.lists.for_each(v as usize, |x| out.push(x));
    }

    fn num_vertices(&self) -> usize {
        self.lists.heads.len()
    }

    fn num_arcs(&self) -> u64 {
        self.lists.arcs
    }

    fn bytes_used(&self) -> usize {
        std::mem::size_of::<Self>() + self.lists.heap_bytes()
    }

    fn name(&self) -> &'static str {
        "ll"
    }
}
