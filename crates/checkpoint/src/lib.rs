//! Consistent, atomic checkpoints of a job's state: one part per rank, written collectively.
//!
//! Any engine can checkpoint with it (direct algorithms on communicators, BSP programs,
//! MapReduce): it needs only collectives. [`Checkpointer`] drives it for an iterative
//! algorithm: when to save, what to resume from, and counters.
//!
//! # Layout on disk
//! A checkpoint directory `DIR` holds complete checkpoints `DIR/ckpt-<seq>/` (at most two after
//! a [`save`]) and possibly a torn one `DIR/ckpt-<seq>.tmp/` left by a job that was killed while
//! writing it. A complete checkpoint holds `rank-<r>` (the part of rank `r`) and `manifest`, a
//! text file with the job's fingerprint, the sequence number, the rank count, the length and the
//! XXH3-64 checksum of every part, and a final line with the checksum of the manifest itself.
//!
//! # Semantics
//! [`save`] writes every part into `ckpt-<seq>.tmp/` and syncs it; after all parts are on
//! storage rank 0 writes and syncs the manifest, renames the directory to `ckpt-<seq>` (atomic
//! on POSIX file systems), syncs `DIR`, and deletes older checkpoints. So a checkpoint becomes
//! visible all at once or not at all: a job killed at any moment leaves the previous complete
//! checkpoint usable. [`load`] takes the newest checkpoint whose manifest is intact and whose
//! parts all match their checksums, and falls back to an older one otherwise; a torn `.tmp`
//! directory is never read.
//!
//! A checkpoint belongs to one job: its *fingerprint* is a canonical string of everything that
//! determines the result (input, parameters, rank count, node count). [`load`] refuses a
//! directory whose newest complete checkpoint was written by another job
//! ([`CheckpointError::Mismatch`]) or with another rank count.
//!
//! The directory must be visible to every rank under the same path (with the MPI backend: a
//! file system shared by the nodes).
//!
//! # Cost
//! [`save`]: every rank writes and syncs its part (its bytes to storage, in parallel); one
//! broadcast of one word, one gather of three words per rank, one broadcast of two words; rank 0
//! writes `O(p)` bytes of manifest and syncs two directories. [`load`]: rank 0 reads the
//! manifests; one broadcast of `O(p)` words per manifest; every rank reads its part; one
//! allreduce of one word per candidate checkpoint.
//!
//! ```
//! use spillway_checkpoint as checkpoint;
//! use spillway_comm::Comm;
//! use spillway_runtime::{run, Config};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path();
//! run(&Config::new(2), |rank| {
//!     let world = Comm::world(rank);
//!     let mine = vec![world.rank() as u8; 10];
//!     checkpoint::save(&world, path, 3, "demo v1", &[&mine]).unwrap();
//!     let back = checkpoint::load(&world, path, "demo v1").unwrap().unwrap();
//!     assert_eq!((back.seq, back.part), (3, mine));
//!     Ok::<_, checkpoint::CheckpointError>(())
//! })
//! .unwrap();
//! ```
#![deny(missing_docs, unreachable_pub)]

mod checkpointer;
mod error;
mod load;
mod manifest;
mod save;
mod store;
#[cfg(test)]
mod tests;

pub use checkpointer::{CheckpointStats, Checkpointer};
pub use error::CheckpointError;
pub use load::{latest, load, Restored};
pub use manifest::{Manifest, PartInfo};
pub use save::{save, PAUSE_ENV};

/// The header of a checkpoint part: `words` as little-endian bytes (see [`split_header`]).
pub fn header(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The first `n` words of a part written with [`header`] and the bytes after them; `None`
/// if the part is shorter than the header.
pub fn split_header(part: &[u8], n: usize) -> Option<(Vec<u64>, &[u8])> {
    let (head, rest) = (part.get(..n * 8)?, &part[n * 8..]);
    let words = head
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
        .collect();
    Some((words, rest))
}
