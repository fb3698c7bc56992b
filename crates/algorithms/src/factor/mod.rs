//! Matrix factorisation.
//!
//! [`sgd`]: the ratings matrix approximated by a product of two factor matrices, by
//! stochastic gradient descent on a sqrt(p) x sqrt(p) grid of blocks (BDMPI's benchmark).

pub mod block;
pub mod sgd;
