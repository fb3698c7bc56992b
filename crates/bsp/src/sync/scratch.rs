//! What a rank keeps from sync to sync for itself: the lists a sync fills, with their
//! capacity, so that a sync allocates nothing once they are large enough.

use super::conflict::Touch;

/// A write into this rank's memory found in the checks, applied in the data phase.
pub(super) struct Copy {
    pub(super) src: usize,
    pub(super) dst: usize,
    pub(super) len: usize,
    /// Whether the source is another rank's memory that may be storage-backed.
    pub(super) foreign: bool,
}

/// Lists a sync fills, kept by the rank between syncs (with their capacity).
#[derive(Default)]
pub(crate) struct Scratch {
    pub(super) reads: Vec<Touch>,
    pub(super) writes: Vec<Touch>,
    pub(super) copies: Vec<Copy>,
}
