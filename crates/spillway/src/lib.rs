//! spillway: bulk-synchronous parallel computing for data larger than memory.
//!
//! One SPMD program, written the way MPI and BSP programmers think. [`run`] starts a function
//! on every rank; ranks talk through communicators ([`Comm`]) with MPI's point-to-point
//! operations and collectives ([`Collectives`]). Many more ranks than cores can run on one
//! node: at most `running` of a node's ranks execute at once, and every blocking call yields.
//!
//! ```
//! use spillway::prelude::*;
//!
//! let config = Config::new(6).nodes(2).running(1);
//! let out = run(&config, |rank| {
//!     let world = Comm::world(rank);
//!     // Ring: send to the right, receive from the left.
//!     let right = (world.rank() + 1) % world.size();
//!     let left = (world.rank() + world.size() - 1) % world.size();
//!     world.send(right, 0, &[world.rank() as u64])?;
//!     let (got, _) = world.recv::<u64>(left, 0)?;
//!     let total = world.allreduce(&got, Sum)?;
//!     Ok::<_, spillway::Error>(total[0])
//! })?;
//! assert_eq!(out, vec![15; 6]);
//! # Ok::<(), spillway::JobError>(())
//! ```
//!
//! The layers are separate crates: `spillway-transport` (payloads, layouts, backends),
//! `spillway-runtime` (launch, scheduler, topology), `spillway-comm` (communication),
//! `spillway-bsp` (LPF's BSP primitives, [`bsp`]), `spillway-mapreduce` (iterative
//! MapReduce, [`mapreduce`]), `spillway-checkpoint` ([`checkpoint`]) and
//! `spillway-algorithms` ([`algorithms`]: PageRank, K-means, the BSP FFT and sample sort,
//! generators, readers).
//!
//! The [`tutorial`] goes through the library a piece at a time: the rank context and
//! collectives, data larger than memory, BSP, MapReduce and LPF's C API, each with an example.
#![deny(missing_docs, unreachable_pub)]

pub use spillway_algorithms as algorithms;
pub use spillway_bsp as bsp;
pub use spillway_checkpoint as checkpoint;
pub use spillway_comm::{
    wait_all, Aggregate, BitAnd, BitOr, BitXor, Collectives, Comm, Exchanged, Logical, LogicalAnd,
    LogicalOr, LogicalXor, Max, Min, Operation, Prod, RecvRequest, SendRequest, Source, Status,
    Sum, Tag, UserOp,
};
pub use spillway_mapreduce as mapreduce;
pub use spillway_runtime::{
    available_memory, available_swap, cgroup_memory, current_rss, interrupt, peak_rss, run,
    run_with_stats, Backend, ByteSize, Config, CriticalGuard, DeadlockReport, Error, JobError,
    JobStats, LinkModel, MemoryStats, NodeBuf, Policy, Rank, RankStats, ResumePolicy, SbVec,
    WaitState,
};

/// The MPI backend's interoperability hook (feature `mpi`): run a spillway job on the
/// processes of an existing MPI program's communicator. `rsmpi` is the `mpi` crate spillway
/// was built with.
#[cfg(feature = "mpi")]
pub mod mpi {
    pub use spillway_runtime::mpi::{
        built_with_ulfm, hook, hook_with_stats, rsmpi, survives_lost_processes,
    };
}

/// Everything an SPMD program usually needs, in one `use`.
pub mod prelude {
    pub use spillway_comm::{
        BitAnd, BitOr, BitXor, Collectives, Comm, LogicalAnd, LogicalOr, LogicalXor, Max, Min,
        Prod, Source, Sum, Tag, UserOp,
    };
    pub use spillway_runtime::{run, Config, Error, JobError, Policy, Rank, SbVec};
}

/// The README's code, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

// The tutorial is `docs/library.md`, so that the repository and the crate documentation show
// one text; its examples are this crate's doc tests.
#[doc = include_str!("../../../docs/library.md")]
pub mod tutorial {}
