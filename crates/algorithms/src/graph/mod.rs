//! Graph algorithms on a distributed directed graph.
//!
//! The graph is loaded (from a SNAP edge list or a Matrix Market file) or generated (R-MAT)
//! as a 1-D row decomposition balanced by non-zeros ([`load_graph`], [`DistGraph`]); the
//! direct engines ([`pagerank`], [`colour`]) run on it. Connected components' direct engine
//! ([`cc_direct`]) streams an edge list through a union-find per rank and merges the ranks'
//! forests. The MapReduce engines ([`pagerank_mr`], [`cc`], [`rmat`]) keep their edges as
//! `spillway-mapreduce` datasets.

pub mod cc;
pub mod cc_direct;
pub mod colour;
mod copies;
mod load;
pub mod pagerank;
pub mod pagerank_mr;
pub mod pagerank_survive;
pub mod rmat;

pub use load::{load_graph, DistGraph, GraphSource, ROW_WEIGHT, VERTEX_STATE_BYTES};
