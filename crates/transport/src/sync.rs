//! Locking that survives a panicking rank.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking the guard of a mutex poisoned by a panic elsewhere all the same.
///
/// Every mutex of spillway guards short sections that leave their state consistent (they do
/// not panic halfway), and a rank that fails by panicking must not take the node's or the
/// job's shared structures down with it: the other ranks still need them, if only to abort.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
