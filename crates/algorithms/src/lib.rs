//! The algorithms of spillway, as library functions on communicators.
//!
//! Each algorithm is a function that every rank calls with its communicator and its part of
//! the data, plus loaders that read or generate that part in parallel:
//!
//! * [`pagerank()`](pagerank::pagerank): BDMPI's push PageRank on a 1-D row decomposition
//!   balanced by non-zeros and rows ([`graph::load_graph`]).
//! * [`kmeans()`](kmeans::kmeans): Lloyd's K-means in the Harp style — local assignment and
//!   partial sums, then an allreduce ([`points::load_points`]).
//! * [`kmeans_regroup()`](harp::kmeans_regroup): K-means for a large `k` (Harp's regroup +
//!   allgather with one copy of the centroids and sums per node).
//! * [`assign`]: the blocked nearest-centre kernel (exact re-check near ties).
//! * [`generate`]: R-MAT graphs (Graph500 parameters) and Gaussian blobs, as pure functions of
//!   a seed and a global index, so any split over ranks generates the same data.
//! * [`fft()`](fft::fft): the BSP FFT of Inda and Bisseling on BSP primitives, rustfft locally.
//! * [`sample_sort()`](sort::sample_sort): BSP sample sort by regular sampling.
//! * [`word_count`](wordcount::word_count) and [`connected_components`](cc::connected_components):
//!   MapReduce algorithms (thesis algorithms 2-3 and 6-9) on `spillway-mapreduce`, and
//!   [`pagerank_mapreduce`](pagerank_mr::pagerank_mapreduce) (algorithms 4-5).
//! * [`spkmeans()`](spkmeans::spkmeans): BDMPI's spherical K-means on sparse rows balanced by
//!   non-zeros ([`sparse::load_rows`]).
//! * [`sgd()`](sgd::sgd): matrix factorisation by SGD on a sqrt(p) x sqrt(p) grid, one diagonal
//!   of blocks per step ([`sgd::load_ratings`]).
//! * [`colour()`](colour::colour): Jones-Plassmann graph colouring.
//! * [`input`]: chunked readers for SNAP edge lists, Matrix Market and CSV that reject
//!   malformed input with the file, line and reason.
#![deny(missing_docs, unreachable_pub)]

pub mod assign;
pub mod cc;
pub mod colour;
mod error;
pub mod fft;
pub mod generate;
pub mod graph;
pub mod harp;
pub mod input;
pub mod kmeans;
pub mod output;
pub mod pagerank;
pub mod pagerank_mr;
pub mod points;
mod radix;
pub mod rmat;
pub mod sgd;
pub mod sort;
pub mod sparse;
pub mod spkmeans;
pub mod wordcount;

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
