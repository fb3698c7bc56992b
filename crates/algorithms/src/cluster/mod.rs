//! Clustering: K-means on dense points and spherical K-means on sparse rows.
//!
//! [`kmeans`] is Lloyd's algorithm with every rank holding the centroids (local assignment
//! and partial sums, then one allreduce); [`harp`] runs the same iterations for a large `k`
//! with one copy of the centroids per node (Harp's regroup + allgather); [`spkmeans`] is
//! BDMPI's spherical K-means on rows balanced by non-zeros. [`assign`] is the blocked
//! nearest-centre kernel the dense ones share, [`points`] loads or generates the points.

pub mod assign;
pub mod harp;
pub mod kmeans;
pub mod points;
pub mod spkmeans;
