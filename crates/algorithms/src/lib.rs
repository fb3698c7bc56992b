//! The algorithms of spillway, as library functions on communicators, grouped by family.
//!
//! Each algorithm is a function that every rank calls with its communicator and its part of
//! the data, plus loaders that read or generate that part in parallel. Every family is a
//! folder:
//!
//! * [`io`]: one reader per input format (SNAP edge lists, Matrix Market, CSV, SVMlight) that
//!   rejects malformed input with the file, line and reason; files split into line-aligned
//!   parts read in bounded chunks; sparse matrices with values; output files that appear
//!   only when complete, written by all ranks in turn.
//! * [`graph`]: the distributed graph ([`graph::load_graph`], a 1-D row decomposition
//!   balanced by non-zeros), PageRank ([`graph::pagerank`] directly, [`graph::pagerank_mr`]
//!   as MapReduce), connected components ([`graph::cc_direct`] on the communication layer,
//!   [`graph::cc`] as MapReduce), Jones-Plassmann colouring
//!   ([`graph::colour`]) and R-MAT with duplicate removal ([`graph::rmat`]).
//! * [`cluster`]: Lloyd's K-means in the Harp style ([`cluster::kmeans`]), for a large `k`
//!   ([`cluster::harp`]), spherical K-means on sparse rows ([`cluster::spkmeans`]), the
//!   blocked nearest-centre kernel ([`cluster::assign`]) and the points they run on
//!   ([`cluster::points`]).
//! * [`factor`]: matrix factorisation by SGD on a grid of blocks ([`factor::sgd`]).
//! * [`bsp`]: algorithms on the BSP primitives: the FFT of Inda and Bisseling ([`bsp::fft`])
//!   and sample sort by regular sampling ([`bsp::sort`]).
//! * [`text`]: word count as MapReduce ([`text::wordcount`]).
//! * [`state`]: the memory a size read from the input implies, checked before it is
//!   allocated.
//! * [`generate`]: R-MAT graphs (Graph500 parameters) and Gaussian blobs, as pure functions of
//!   a seed and a global index, so any split over ranks generates the same data.
//!
//! Iterative algorithms that can resume take a [`spillway_checkpoint::Checkpointer`];
//! checkpointing does not depend on MapReduce.
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(missing_docs, unreachable_pub)]

pub mod bsp;
pub mod cluster;
mod error;
pub mod factor;
pub mod generate;
pub mod graph;
pub mod io;
pub mod state;
pub mod survive;
pub mod text;

pub use error::AlgoError;

/// Progress of an iterative algorithm, reported after every iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// 1-based iteration just finished.
    pub iteration: usize,
    /// The iteration limit.
    pub max_iterations: usize,
    /// The algorithm's convergence measure (PageRank: L1 change; K-means: points that moved).
    pub delta: f64,
}
