//! How bytes move between spillway ranks.
//!
//! This crate is the bottom layer of spillway. It knows nothing about scheduling or typed data:
//! it defines the unit that travels ([`Envelope`] carrying a [`Payload`]), how ranks are laid
//! out over nodes ([`Layout`]), and which engine carries traffic between nodes ([`Backend`]).
//!
//! * `local`: every rank is a thread of one process. Nodes are *virtual*: the runtime keeps one
//!   scheduler, one memory budget and one set of mailboxes per node, so node-level logic runs and
//!   is tested without MPI. A message between two ranks of the process moves a pointer.
//! * `mpi`: one OS process per node, started by `mpirun`; traffic between nodes goes through MPI.
//!
//! Payloads are 16-byte aligned so that receivers can view them as slices of any plain-data
//! element type without copying.
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(missing_docs, unreachable_pub)]

pub mod copy;
mod exchange;
mod host;
mod layout;
#[cfg(feature = "mpi")]
pub mod mpi;
mod named;
mod outbox;
mod payload;
mod pool;
mod sync;

pub use exchange::{Exchange, EXCHANGE_MAX};
pub use host::{Announced, Claim, Expect, Failure, Host, Lost};
pub use layout::{Layout, LayoutError};
pub use outbox::{Drive, Driving, Outbox, Outgoing};
pub use payload::{AlignedBuf, Borrowed, Envelope, Payload, SendGuard};
pub use pool::{advise_huge, pool_cached_bytes, prefetch, set_pool_limit, POOLED_MIN};
pub use sync::lock;

/// The engine that carries messages between nodes.
///
/// A closed set: the communication layer never sees which one is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Backend {
    /// All ranks are threads of this process; nodes are simulated inside it.
    #[default]
    Local,
    /// One MPI process per node, started by `mpirun`; the ranks of a node are threads of its
    /// process and one progress thread per process makes every MPI call. Needs spillway built
    /// with the `mpi` cargo feature.
    Mpi,
}

crate::named_enum!(Backend, "backend", [Local => "local", Mpi => "mpi"]);

/// The cost of one message between nodes under the alpha-beta (Hockney) model: `alpha`
/// seconds of start-up plus `beta` seconds per byte. Collectives choose their algorithm between
/// nodes from it (Twister's broadcast analysis).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkModel {
    /// Start-up time of a message in seconds.
    pub alpha: f64,
    /// Transfer time per byte in seconds.
    pub beta: f64,
}

impl LinkModel {
    /// Predicted time of one message of `bytes` bytes.
    pub fn time(&self, bytes: f64) -> f64 {
        self.alpha + bytes * self.beta
    }
}
