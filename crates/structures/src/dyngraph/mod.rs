//! Dynamic sparse graphs with sorted adjacency lists (thesis chapter 4).
//!
//! # Summary
//! Five structures behind one trait, [`DynGraph`], each with single-arc updates and a
//! batched insertion ([`insert_batch`](DynGraph::insert_batch): sort the batch once, update
//! every touched list once):
//!
//! | structure | adjacency of a vertex | insert / delete | batch of `k` arcs of one vertex |
//! |---|---|---|---|
//! | [`LinkedLists`] (LL) | a sorted singly linked list of nodes from a pooled arena | walk the list, O(degree) | one walk, O(degree + k) |
//! | [`Bcsr`] (BCSR) | a static CSR segment plus an LL overflow list, folded into a new CSR by a [`FoldPolicy`] | insert into the overflow list; delete in place; fold O(V + E) | merged into the overflow list, or folded with the batch in one pass O(V + E) when the policy says |
//! | [`Daa`] (DAA) | one exact-size sorted array | reallocate to the new size and shift, O(degree) | one merge into a new exact-size array, O(degree + k log degree) |
//! | [`Diaa`] (DIAA) | one exact-size array of intervals `[start, length]` and residual ids | local interval surgery (new, extend, join, split) and one shift, O(degree) | decode, merge, re-intervalise, O(degree + k) |
//! | [`Dcaa`] (DCAA) | DIAA's intervals and residuals gap-coded as varints in an exact-size byte array | decode, update as DIAA, encode, O(3 degree) | decode, merge, encode, O(degree + k) |
//!
//! # Semantics
//! - A graph holds arcs: [`insert`](DynGraph::insert)`(u, v)` puts `v` into `u`'s list. An
//!   undirected graph stores each edge as both arcs ([`insert_undirected`](DynGraph::insert_undirected)).
//! - Vertices are the ids `0..num_vertices()`; the range grows to cover every id used
//!   (ids up to [`MAX_VERTEX`]). Vertices without arcs cost their per-vertex header only.
//! - Inserting an arc that is present, or deleting one that is absent, changes nothing and
//!   returns `false`; asking for the neighbours or degree of an id beyond the range gives
//!   nothing and 0.
//! - [`neighbours`](DynGraph::neighbours) lists a vertex's neighbours in increasing order.
//! - [`bytes_used`](DynGraph::bytes_used) is the heap memory the structure holds (every
//!   allocation's requested size, capacity included), plus the structure itself; the
//!   allocator's own overhead per allocation is not included.
//!
//! # Queries
//! The thesis's three kernels (section 4.3) on every structure and on [`Csr`]:
//! [`bft`](DynGraph::bft) (breadth-first traversal, levels in a [`QueryScratch`]),
//! [`common_neighbours`](DynGraph::common_neighbours) (neighbour-set intersection) and
//! [`contains`](DynGraph::contains) (adjacency lookup). How each structure answers them is in
//! the `query` module's documentation, summarised here:
//!
//! | structure | traversal reads | intersection | lookup |
//! |---|---|---|---|
//! | LL | the linked list | merge of two linked lists | walk, O(Δ) |
//! | BCSR | the CSR segment, then the overflow list | arrays when no overflow, else merged copies | binary search + overflow walk |
//! | DAA, CSR | the array | merge, or gallop when one list is 16x longer | binary search |
//! | DIAA | intervals, then residuals | by parts: intervals whole, residuals as arrays | binary searches of starts and residuals |
//! | DCAA | varints decoded as they are read | decoded, then as DIAA | decode until past the id |
//!
//! # Cost
//! Per structure in the table above; `Δ` is the degree. Queries: `degree` O(1) everywhere;
//! `contains` O(log Δ) for BCSR's CSR part, DAA and DIAA, O(Δ) for LL and DCAA.

mod batch;
mod bcsr;
mod csr;
mod daa;
mod dcaa;
mod diaa;
mod intervals;
mod ll;
mod pool;
mod query;

use std::fmt;

pub use bcsr::{Bcsr, FoldPolicy};
pub use csr::Csr;
pub use daa::Daa;
pub use dcaa::Dcaa;
pub use diaa::Diaa;
pub use ll::LinkedLists;
pub use query::{QueryScratch, Traversal, UNREACHED};

/// The largest vertex id (`u32::MAX` is reserved).
pub const MAX_VERTEX: u32 = u32::MAX - 1;

/// A dynamic graph with sorted adjacency lists.
///
/// Every implementation has the semantics given in the [module documentation](self).
///
/// # Panics
/// Inserting an arc with an endpoint above [`MAX_VERTEX`].
pub trait DynGraph {
    /// Adds the arc `u -> v`; `false` (and no change) if it is present.
    fn insert(&mut self, u: u32, v: u32) -> bool;

    /// Removes the arc `u -> v`; `false` (and no change) if it is absent.
    fn delete(&mut self, u: u32, v: u32) -> bool;

    /// Whether the arc `u -> v` is present.
    fn contains(&self, u: u32, v: u32) -> bool;

    /// Number of arcs leaving `v`.
    fn degree(&self, v: u32) -> usize;

    /// Replaces the contents of `out` with the neighbours of `v`, in increasing order.
    fn neighbours_into(&self, v: u32, out: &mut Vec<u32>);

    /// Number of vertex ids covered (one more than the largest id used or reserved).
    fn num_vertices(&self) -> usize;

    /// Number of arcs.
    fn num_arcs(&self) -> u64;

    /// Heap bytes held plus the size of the structure itself.
    fn bytes_used(&self) -> usize;

    /// The structure's short name (`ll`, `bcsr`, `daa`, `diaa`, `dcaa`).
    fn name(&self) -> &'static str;

    /// The neighbours of `v`, in increasing order.
    fn neighbours(&self, v: u32) -> Vec<u32> {
        let mut out = Vec::new();
        self.neighbours_into(v, &mut out);
        out
    }

    /// Adds every arc of `batch`, as [`insert`](Self::insert) of each in turn would (repeats
    /// and arcs already present change nothing); returns how many arcs were new.
    ///
    /// # Cost
    /// This default inserts one arc at a time. Every structure overrides it: the batch is
    /// sorted by source and target (a radix sort, O(m)), and each vertex's list is updated once
    /// for all its new arcs, O(Δ + k) for `k` new arcs instead of O(k Δ) (see each structure).
    fn insert_batch(&mut self, batch: &[(u32, u32)]) -> u64 {
        batch.iter().filter(|&&(u, v)| self.insert(u, v)).count() as u64
    }

    /// Adds both arcs of every edge of `edges` with [`insert_batch`](Self::insert_batch);
    /// returns how many arcs were new.
    fn insert_batch_undirected(&mut self, edges: &[(u32, u32)]) -> u64 {
        let mut arcs = Vec::with_capacity(2 * edges.len());
        for &(u, v) in edges {
            arcs.push((u, v));
            if u != v {
                arcs.push((v, u));
            }
        }
        self.insert_batch(&arcs)
    }

    /// Breadth-first traversal from `source`; with `whole`, restarts at the smallest
    /// unvisited id until every vertex is visited (the thesis's BFT). The levels are left in
    /// `scratch` ([`QueryScratch::levels`]).
    ///
    /// # Cost
    /// O(V + E) plus the structure's per-arc decoding. This default copies each list with
    /// [`neighbours`](Self::neighbours); every structure of this crate reads its lists in
    /// place instead.
    fn bft(&self, source: u32, whole: bool, scratch: &mut QueryScratch) -> Traversal {
        query::bft(&query::ByLists(self), source, whole, scratch)
    }

    /// Number of common neighbours of `u` and `v`, `|N(u) ∩ N(v)|` (0 beyond the range).
    ///
    /// # Cost
    /// O(Δu + Δv); this default copies both lists into `scratch` and merges them, or gallops
    /// through the longer one; DIAA and DCAA intersect intervals whole.
    fn common_neighbours(&self, u: u32, v: u32, scratch: &mut QueryScratch) -> u64 {
        self.neighbours_into(u, &mut scratch.a);
        self.neighbours_into(v, &mut scratch.b);
        query::intersect_sorted(&scratch.a, &scratch.b)
    }

    /// Adds the undirected edge `{u, v}` as both arcs; `true` if either was new.
    fn insert_undirected(&mut self, u: u32, v: u32) -> bool {
        let a = self.insert(u, v);
        let b = u != v && self.insert(v, u);
        a || b
    }

    /// Removes both arcs of the undirected edge `{u, v}`; `true` if either was present.
    fn delete_undirected(&mut self, u: u32, v: u32) -> bool {
        let a = self.delete(u, v);
        let b = u != v && self.delete(v, u);
        a || b
    }
}

/// The five structures, for choosing one at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Structure {
    /// [`LinkedLists`].
    Ll,
    /// [`Bcsr`].
    Bcsr,
    /// [`Daa`].
    Daa,
    /// [`Diaa`].
    Diaa,
    /// [`Dcaa`].
    Dcaa,
}

impl Structure {
    /// All structures.
    pub const ALL: [Structure; 5] = [
        Structure::Ll,
        Structure::Bcsr,
        Structure::Daa,
        Structure::Diaa,
        Structure::Dcaa,
    ];

    /// The short name.
    pub fn name(self) -> &'static str {
        match self {
            Structure::Ll => "ll",
            Structure::Bcsr => "bcsr",
            Structure::Daa => "daa",
            Structure::Diaa => "diaa",
            Structure::Dcaa => "dcaa",
        }
    }

    /// Parses a short name.
    pub fn from_name(s: &str) -> Option<Structure> {
        Structure::ALL.into_iter().find(|x| x.name() == s)
    }

    /// An empty graph of this structure with `vertices` ids reserved (BCSR folds by
    /// `fold`).
    pub fn create(self, vertices: usize, fold: FoldPolicy) -> Box<dyn DynGraph + Send> {
        match self {
            Structure::Ll => Box::new(LinkedLists::with_vertices(vertices)),
            Structure::Bcsr => Box::new(Bcsr::with_vertices(vertices, fold)),
            Structure::Daa => Box::new(Daa::with_vertices(vertices)),
            Structure::Diaa => Box::new(Diaa::with_vertices(vertices)),
            Structure::Dcaa => Box::new(Dcaa::with_vertices(vertices)),
        }
    }
}

impl fmt::Display for Structure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Checks a vertex id and returns it as an index.
#[inline]
#[track_caller]
pub(crate) fn vertex_index(v: u32) -> usize {
    assert!(
        v <= MAX_VERTEX,
        "vertex id {v} is above the largest id {MAX_VERTEX}"
    );
    v as usize
}

/// Heap bytes of a vector's buffer.
#[inline]
pub(crate) fn vec_bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * std::mem::size_of::<T>()
}

#[cfg(test)]
mod query_tests;
#[cfg(test)]
mod tests;
