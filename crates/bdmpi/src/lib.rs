//! BDMPI's C API on spillway: `libbdmpi.so` / `libbdmpi.a` export every function of BDMPI's
//! `bdmpi.h` (LaSalle and Karypis, "MPI for Big Data: New Tricks for an Old Dog"), with BDMPI's
//! ABI, and the `MPI_*` names that the header maps onto them. A program compiled against
//! BDMPI's header (or ours, `include/bdmpi.h`) and linked with `-lbdmpi` runs under spillway's
//! `bdmprun`, one process per rank.
//!
//! This library is the rank's side only: it turns each call into one message to the rank's
//! node process (`bdmprun`, which runs spillway's runtime and carries the call out through
//! spillway's communication layer) and waits for the answer. The node reads and writes the
//! rank's buffers directly, so no data passes through the socket. While a call waits, the node
//! may ask the rank to release its storage-backed memory ([`sb`]). See `docs/bdmpi.md` in the
//! repository for its use and tests.
//!
//! # Safety contract of the C functions
//! Every exported function is `unsafe`: it trusts its caller as MPI does (buffers are valid for
//! the counts and datatypes given, handles come from this library, output pointers are
//! writable). Invalid handles, datatypes, operations, counts, ranks, roots and tags are
//! detected and answered with BDMPI's error codes and a message naming the rank and the call.

#![deny(missing_docs)]

mod api;
mod handles;
mod link;
mod mpi;
#[allow(missing_docs)]
mod proto;
mod report;
pub mod sb;

pub use api::*;
pub use handles::{bdrequest_t, bdscomm_t, BDMPI_Comm, BDMPI_Request, BDMPI_Status};
pub use mpi::*;
pub use sb::*;
