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
#![deny(missing_docs, unreachable_pub)]

mod layout;
mod payload;

pub use layout::{Layout, LayoutError};
pub use payload::{AlignedBuf, Envelope, Payload};

/// The engine that carries messages between nodes.
///
/// A closed set: the communication layer never sees which one is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Backend {
    /// All ranks are threads of this process; nodes are simulated inside it.
    #[default]
    Local,
}

impl Backend {
    /// Parses a backend name as written on the command line (`local`).
    pub fn from_name(name: &str) -> Option<Backend> {
        match name {
            "local" => Some(Backend::Local),
            _ => None,
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Local => "local",
        }
    }
}
