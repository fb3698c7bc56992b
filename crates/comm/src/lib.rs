//! MPI-style communication between spillway ranks, typed and safe.
//!
//! A [`Comm`] is a communicator: an ordered group of ranks with its own message space. Every
//! rank gets the world communicator from [`Comm::world`], the ranks of its node from
//! [`Comm::node`] and a cyclically numbered world from [`Comm::cyclic_world`] (BDMPI's
//! `COMM_CWORLD`); [`Comm::dup`] and [`Comm::split`] derive new ones.
//!
//! * Point-to-point: sends are *buffered* — they never block and the caller may reuse its
//!   buffer at once. Receives match MPI's rules: by source and tag (or any), and messages from
//!   one sender with one tag never overtake each other.
//! * Collectives ([`Collectives`], an extension trait like rsmpi's): every member calls them in
//!   the same order. Inside a node the ranks are threads of one process and meet in shared
//!   memory (each reads the others' buffers directly, no messages); between nodes one rank per
//!   node exchanges along trees, pipelined chains or rings chosen from the link model.
//! * Plain-data element types (`bytemuck::Pod`) travel without serialisation; any
//!   `serde` type travels through the `_obj` methods.
//!
//! ```
//! use spillway_comm::{Collectives, Comm, Sum};
//! use spillway_runtime::{run, Config};
//!
//! let sums = run(&Config::new(4).nodes(2), |rank| {
//!     let world = Comm::world(rank);
//!     let total = world.allreduce(&[world.rank() as u64 + 1], Sum)?;
//!     Ok::<_, spillway_runtime::Error>(total[0])
//! })
//! .unwrap();
//! assert_eq!(sums, vec![10; 4]);
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(missing_docs, unreachable_pub)]

mod codec;
mod coll;
mod comm;
mod ops;
mod p2p;
pub mod radix;
mod rendezvous;
pub mod splitmix;

pub use coll::{Aggregate, Collectives, Exchanged, Regrouped};
pub use comm::Comm;
pub use ops::{
    BitAnd, BitOr, BitXor, Logical, LogicalAnd, LogicalOr, LogicalXor, Max, Min, Operation, Prod,
    Sum, UserOp,
};
pub use p2p::{wait_all, RecvRequest, SendRequest, Source, Status, Tag};
pub use spillway_runtime::Error;

/// Result of communication calls.
pub type Result<T> = std::result::Result<T, Error>;
