//! The BSP primitives of LPF (Suijlen and Yzelman, "Lightweight Parallel Foundations") on
//! spillway's runtime: a BSP context per rank with registered memory, one-sided `put` and
//! `get` that take effect at `sync`, and the cost model `g*h + l` measured by [`measure`].
//!
//! | LPF | here | cost |
//! |---|---|---|
//! | `lpf_exec` | [`exec`] | starting a job |
//! | `lpf_hook` | [`hook`] (on a communicator of a running job, or the MPI processes of a program through `spillway::mpi::hook`) | `O(p)` words |
//! | `lpf_rehook` | [`Bsp::rehook`] | `O(p)` words |
//! | `lpf_register_global` / `_local` | [`Bsp::register_global`] / [`Bsp::register_local`] | local |
//! | `lpf_deregister` | [`Bsp::deregister`] | local |
//! | `lpf_put` / `lpf_get` | [`Bsp::put`] (and the buffered [`Bsp::put_from`]) / [`Bsp::get`] | `O(1)` now, bytes in the next sync's h-relation |
//! | `lpf_sync` | [`Bsp::sync`] | `g*h + l` |
//! | `lpf_probe` | [`Bsp::probe`] (measured once by [`measure`], `spillway probe`) | local |
//! | `lpf_resize_memory_register` / `_message_queue` | [`Bsp::resize_memory_register`] / [`Bsp::resize_message_queue`] | local, effective after the next sync |
//!
//! # Semantics (LPF's, section 2)
//! * Communication is delayed until the sync that ends the superstep: sources are read and
//!   destinations written inside `sync`.
//! * Concurrent writes to one place resolve in some sequential order (CRCW), never a torn
//!   element: every write into a rank's memory is done by that rank's thread.
//! * Reading and writing the same bytes in one superstep is illegal; `sync` detects it (in
//!   every mode) and fails the job before any byte moves.
//! * Capacities (registered slots, queued requests) take effect after the next sync; a call
//!   beyond them returns a mitigable [`Error::CapacityExceeded`] and has no effect. Only `sync`,
//!   `exec` and `hook` fail fatally because of another rank.
//!
//! # Implementation
//! Within a node, ranks are threads of one process: at a sync each rank publishes its
//! requests and area addresses in a node object, and each rank copies into its own areas
//! straight from the source areas (LPF's shared-memory rule: destinations copy, so no two
//! threads write one cache line's worth of a destination). Between nodes one message goes to
//! each rank of another node with the puts' data and the gets' headers, and one reply with
//! the data of the gets (see `sync/mod.rs`). Registered memory may be storage-backed
//! ([`Memory::Storage`]) so that BSP programs run out of core under the node's budget.
//!
//! # Checked mode
//! [`Options::checked`] (default in debug builds) adds to the checks that always run (bounds,
//! slots, capacities, read-write conflicts, all reported with the caller's location where the
//! reporting rank knows it) an agreement of all ranks at every sync and at the end of the SPMD
//! function: mismatched syncs are reported with each side's location.
//!
//! ```
//! use spillway_bsp::{exec, Options};
//! use spillway_runtime::Config;
//!
//! let sums = exec(&Config::new(4), Options::default(), |bsp| {
//!     let p = bsp.nprocs();
//!     bsp.resize_memory_register(1)?;
//!     bsp.resize_message_queue(p)?;
//!     bsp.sync()?;
//!     let all = bsp.register_global(vec![0u64; p])?;
//!     bsp.sync()?;
//!     // Everyone writes its pid + 1 into slot `pid` on every rank.
//!     for q in 0..p {
//!         bsp.put_from(&[bsp.pid() as u64 + 1], q, all, bsp.pid())?;
//!     }
//!     bsp.sync()?;
//!     Ok(bsp.slice(all).iter().sum::<u64>())
//! })
//! .unwrap();
//! assert_eq!(sums, vec![10; 4]);
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(missing_docs, unreachable_pub)]

pub mod coll;
mod context;
mod error;
mod exec;
mod machine;
mod memory;
mod probe;
mod register;
mod rma;
mod sync;

pub use context::{Bsp, Options};
pub use error::{Capacity, Error, Misuse, Result};
pub use exec::{exec, hook};
pub use machine::{cache_dir, cache_file, machine, Machine, Pattern, ProbeReport, Sample};
pub use memory::{Memory, Slot};
pub use probe::{fit, last_level_cache, measure, ProbeOptions, MAX_REPS};
