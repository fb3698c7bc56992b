//! Memory-constrained data structures (Iverson, part I): when data does not fit, make it
//! smaller.
//!
//! * [`compress`]: epsilon-bounded lossy compression of values on structured and
//!   unstructured grids (SBD1, SBD2, RBD1-3 with SQE/DE encodings and a zstd stage), with the
//!   pointwise bound `|x - x'| <= epsilon` guaranteed after rounding to the output type, in a
//!   versioned, checksummed container.
//! * [`dyngraph`]: dynamic sparse graphs with sorted adjacency (LL, BCSR, DAA, DIAA, DCAA)
//!   behind one trait, [`dyngraph::DynGraph`].
#![deny(missing_docs, unreachable_pub)]

pub mod compress;
pub mod dyngraph;
mod varint;
