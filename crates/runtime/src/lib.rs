//! spillway's runtime: launching an SPMD job, rank contexts, the node scheduler and topology.
//!
//! [`run`] starts one function on every rank, like `lpf_exec` or `mpirun`. Each rank is a
//! thread; the ranks of one node share a *node scheduler* that lets at most `running` of them
//! execute at once (BDMPI's node-level cooperative multitasking). Every blocking call — a
//! receive, a wait, a collective, a critical section — gives up the node slot, and the rank
//! becomes runnable again only when the condition it waits for is met.
//!
//! The runtime also watches for the two ways an SPMD job goes wrong:
//! * a rank fails (returns an error or panics): the whole job ends with that rank's id and
//!   message, and every other rank's blocking calls return [`Error::Aborted`];
//! * every rank is blocked and nothing is in flight: a deadlock, reported with what each rank
//!   waits for, never a hang.
//!
//! The typed, MPI-style communication API lives in `spillway-comm`; this crate offers the
//! untyped primitives it is built on ([`Rank::post`], [`Rank::post_recv`], [`Rank::wait_recv`],
//! [`Rank::probe`]).
//!
//! ```
//! use spillway_runtime::{run, Config};
//! let sizes = run(&Config::new(4).nodes(2), |rank| {
//!     Ok::<_, spillway_runtime::Error>((rank.rank(), rank.node(), rank.local_rank()))
//! })
//! .unwrap();
//! assert_eq!(sizes, vec![(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)]);
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(missing_docs, unreachable_pub)]

mod bytesize;
mod cgroup;
mod config;
mod deadlock;
mod error;
mod execute;
mod interrupt;
mod job;
mod launch;
mod lost;
mod mailbox;
mod memory;
#[cfg(feature = "mpi")]
pub mod mpi;
mod node;
mod rank;
mod route;
mod sched;
mod trace;

pub use bytesize::{ByteSize, ParseSizeError};
pub use cgroup::{cgroup_memory, CgroupMemory};
pub use config::{available_memory, available_swap, Config, ResumePolicy};
pub use error::{DeadlockReport, Error, JobError, WaitState};
pub use interrupt::interrupt;
pub use job::{JobStats, RankStats};
pub use launch::{run, run_with_stats};
pub use lost::LostProcesses;
pub use mailbox::{MessageInfo, Pattern, RecvId};
/// The system calls of storage-backed memory, shared with libbdmpi's `BDMPI_sbmalloc`.
#[doc(hidden)]
pub use memory::pages as sbpages;
pub use memory::{current_rss, peak_rss, MemoryStats, NodeBuf, Policy, SbVec, Scratch};
pub use node::{NodeTable, WaitQueue};
pub use rank::{CriticalGuard, Rank};
pub use sched::{Describe, WaitKind};
pub use spillway_transport::{advise_huge, prefetch};
pub use spillway_transport::{AlignedBuf, Backend, Envelope, Layout, LinkModel, Payload};
