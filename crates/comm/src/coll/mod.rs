//! Collective operations.
//!
//! # Algorithms
//!
//! The members of a communicator are grouped by node; each group's lowest rank is its
//! *leader*. Every collective runs in up to three phases (BDMPI's two-phase collectives, with
//! the phase inside a node done through shared memory, see [`node`]):
//!
//! 1. inside each node, members publish their buffers at a rendezvous and the node combines
//!    them (reads them directly: no messages between ranks of a node);
//! 2. between nodes, the leaders exchange once per node along the algorithm chosen from the
//!    job's link model ([`leaders`], [`choose`]);
//! 3. inside each node, members take their results straight from the node's buffers.
//!
//! | operation | inside a node | between nodes (l leaders, n bytes) |
//! |---|---|---|
//! | `barrier` | arrival counter | dissemination, ceil(log2 l) rounds |
//! | `bcast` | receivers copy from the root's buffer (or a shared copy below 16 KiB) | binomial tree; large, l >= 3: pipelined chain |
//! | `reduce`, `allreduce` | parallel fold of the published inputs in rank order, blocks shared by the running ranks; each copies the result | tree reduce (+ bcast); large and commutative: ring reduce-scatter + allgather |
//! | `scan`, `exscan` | the leader folds prefixes into the members' outputs | recursive doubling over node totals |
//! | `gather(v)`, `scatter(v)`, `allgather(v)` | the leader packs one bundle per node | one bundle per node to / from the root; allgather: every leader to every leader |
//! | `alltoall(v)` | each receiver copies its blocks from the senders' buffers | one bundle per pair of nodes |
//! | `aggregate` | members add into one node buffer | allreduce of the node buffers |
//! | `aggregate_scatter`, `aggregate_gather` | members add (write their block) into one node buffer | ring reduce-scatter / allgather of the node blocks ([`regroup`]) |
//!
//! "Large" is decided by the job's link model ([`Rank::link_model`](spillway_runtime::Rank::link_model)):
//! measured at start-up by the MPI backend, absent on the local backend (whose virtual nodes
//! pass pointers), where the trees are always used. The choice depends only on the model, the
//! layout and the size, so every member takes the same one.
//!
//! Results are deterministic: operands are always combined in the same order for a given
//! communicator and link model, whatever the timing or the number of running ranks. The ring
//! allreduce associates differently from the tree when there are more than two nodes. A
//! non-commutative operation on a communicator whose nodes interleave in rank order (e.g. the
//! cyclic world) is combined along a binomial tree over the communicator's ranks instead.
//!
//! Mismatched arguments that the members of a node discover together (operands of different
//! lengths) end the job, like any other protocol error: the members could not agree on a
//! result.

mod alltoall;
mod bcast;
pub(crate) mod choose;
mod flat;
mod gather;
mod leaders;
mod node;
mod reduce;
mod regroup;
mod scan;
mod split;
mod typed;

use bytemuck::Pod;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::comm::Comm;
use crate::ops::Operation;
use crate::{Error, Result};

pub use node::Aggregate;
pub use regroup::Regrouped;

impl Comm<'_> {
    pub(crate) fn check_root(&self, root: usize) -> Result<()> {
        if root >= self.size() {
            return Err(Error::InvalidRank {
                rank: root,
                size: self.size(),
            });
        }
        Ok(())
    }

    /// Ends the job because the members of a collective disagree (a protocol error).
    pub(crate) fn misuse(&self, name: &str, what: &str) -> Error {
        self.rank
            .fail_job(format!("{name} on communicator {:#x}: {what}", self.id()));
        Error::InvalidArgument("collective arguments differ between ranks")
    }
}

/// What [`Collectives::exchange`] returns: the data that arrived, concatenated in source
/// rank order, and `(source, count)` for every non-empty block.
pub type Exchanged<T> = (Vec<T>, Vec<(usize, usize)>);

/// Collective operations on a communicator (an extension trait, like rsmpi's).
///
/// Every member must call the same collectives in the same order. Each call blocks (giving up
/// the node slot if it waits long) until this rank's part is complete. See the module table
/// for algorithms and costs.
///
/// # Errors
/// [`Error::Aborted`] when the job ends during the call; [`Error::InvalidRank`] for a root
/// outside the communicator; [`Error::InvalidArgument`] for arguments that violate the
/// operation's contract (a root without data, counts that do not add up). Operands that differ
/// between ranks where they must agree end the whole job with a message naming the collective.
pub trait Collectives {
    /// Blocks until every member has entered the barrier.
    fn barrier(&self) -> Result<()>;

    /// Replaces `data` on every member with the root's `data`.
    fn bcast<T: Pod>(&self, root: usize, data: &mut Vec<T>) -> Result<()>;

    /// Like [`bcast`](Self::bcast) into a buffer of the same length on every member.
    fn bcast_into<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()>;

    /// Broadcasts a serialisable value; the root passes `Some`.
    fn bcast_obj<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: Option<T>,
    ) -> Result<T>;

    /// Combines every member's `data` element-wise; the result arrives at the root only.
    fn reduce<T: Pod, O: Operation<T>>(
        &self,
        root: usize,
        data: &[T],
        op: O,
    ) -> Result<Option<Vec<T>>>;

    /// Combines every member's `data`; every member receives the same result.
    fn allreduce<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>>;

    /// [`allreduce`](Self::allreduce) in place: the caller's buffer is the input and the
    /// output, and nothing is allocated for the result.
    fn allreduce_into<T: Pod, O: Operation<T>>(&self, data: &mut [T], op: O) -> Result<()>;

    /// Inclusive prefix reduction in rank order.
    fn scan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>>;

    /// Exclusive prefix reduction in rank order; `None` on rank 0.
    fn exscan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Option<Vec<T>>>;

    /// Concatenates equally long contributions in rank order at the root.
    fn gather<T: Pod>(&self, root: usize, data: &[T]) -> Result<Option<Vec<T>>>;

    /// Concatenates contributions of any length at the root, with each member's count.
    fn gatherv<T: Pod>(&self, root: usize, data: &[T]) -> Result<Option<(Vec<T>, Vec<usize>)>>;

    /// Gathers serialisable values at the root.
    fn gather_obj<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: &T,
    ) -> Result<Option<Vec<T>>>;

    /// Splits the root's data into `size` equal parts, part `i` to member `i`.
    fn scatter<T: Pod>(&self, root: usize, data: Option<&[T]>) -> Result<Vec<T>>;

    /// Sends `counts[i]` consecutive elements of the root's data to member `i`.
    fn scatterv<T: Pod>(&self, root: usize, data: Option<(&[T], &[usize])>) -> Result<Vec<T>>;

    /// Every member receives all equally long contributions in rank order.
    fn allgather<T: Pod>(&self, data: &[T]) -> Result<Vec<T>>;

    /// Every member receives all contributions and their counts.
    fn allgatherv<T: Pod>(&self, data: &[T]) -> Result<(Vec<T>, Vec<usize>)>;

    /// Every member receives every member's value.
    fn allgather_obj<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Vec<T>>;

    /// Combines serialisable values with `f` in rank order; every member gets the result.
    /// Cost: an allgather of the values.
    fn allreduce_obj<T: Serialize + DeserializeOwned, F: Fn(T, T) -> T>(
        &self,
        value: &T,
        f: F,
    ) -> Result<T>;

    /// Block `j` of `data` (of `size` equal blocks) goes to member `j`; the result holds the
    /// blocks received, in rank order.
    fn alltoall<T: Pod>(&self, data: &[T]) -> Result<Vec<T>>;

    /// [`alltoall`](Self::alltoall) into the caller's buffer (MPI_Alltoall's meaning):
    /// `recv`, as long as `data`, receives member `j`'s block for this rank as its block `j`.
    /// Nothing is allocated for the result; within a node each block is copied once, from the
    /// sender's buffer into `recv`.
    fn alltoall_into<T: Pod>(&self, data: &[T], recv: &mut [T]) -> Result<()>;

    /// `counts[j]` consecutive elements go to member `j`; returns what arrived and the count
    /// from each member.
    fn alltoallv<T: Pod>(&self, data: &[T], counts: &[usize]) -> Result<(Vec<T>, Vec<usize>)>;

    /// `parts[j]` goes to member `j`; returns the part from each member.
    fn alltoallv_vecs<T: Pod>(&self, parts: Vec<Vec<T>>) -> Result<Vec<Vec<T>>>;

    /// Local aggregation (Twister and Harp): every member adds its contribution with `add`
    /// straight into one buffer of `len` elements per node (made filled with `identity`), the
    /// nodes' buffers are combined with `op` across nodes, and every member gets a read-only
    /// handle to its node's copy of the result. A node holds one buffer however many ranks it
    /// runs, where `allreduce` needs one input per rank.
    ///
    /// # Semantics
    /// Members add in the order they arrive (each with exclusive access), so `add` must make
    /// the result independent of that order: exact operations (integer sums, min, max, bitwise)
    /// are deterministic; floating-point sums may differ in the last bits between runs.
    ///
    /// # Cost
    /// `len` elements of node memory; between nodes one allreduce of `len` elements.
    fn aggregate<T: Pod, O: Operation<T>>(
        &self,
        identity: T,
        len: usize,
        op: O,
        add: &mut dyn FnMut(&mut [T]),
    ) -> Result<Aggregate<T>>;

    /// Local aggregation followed by a reduce-scatter (Harp's "regroup"): every member adds
    /// its contribution with `add` into one buffer per node (made filled with `identity`), the
    /// nodes' buffers are combined with `op` so that each member gets its block of the result:
    /// `counts[r]` elements for member `r`, consecutive in rank order (`counts` the same on
    /// every member). The block is read-only, in the node's shared buffer.
    ///
    /// # Semantics
    /// As [`aggregate`](Self::aggregate): members add in the order they arrive. Between nodes
    /// the node blocks are combined around a ring of the nodes (deterministic for a layout).
    ///
    /// # Cost
    /// `sum(counts)` elements of node memory; between `l` nodes, a ring reduce-scatter: each
    /// node sends and receives `(l - 1) / l` of the vector in `l - 1` steps (when the nodes'
    /// members are contiguous in rank order and `op` is commutative; otherwise an allreduce).
    fn aggregate_scatter<T: Pod, O: Operation<T>>(
        &self,
        identity: T,
        counts: &[usize],
        op: O,
        add: &mut dyn FnMut(&mut [T]),
    ) -> Result<Regrouped<T>>;

    /// Allgather into one buffer per node, the way back from
    /// [`aggregate_scatter`](Self::aggregate_scatter): each member writes its block
    /// (`counts[r]` elements for member `r`, consecutive in rank order) with `fill`, and every
    /// member gets a read-only handle to its node's copy of the whole vector.
    ///
    /// # Cost
    /// `sum(counts)` elements of node memory; between `l` nodes a ring allgather of the node
    /// blocks: `l - 1` steps, each node sends and receives `(l - 1) / l` of the vector.
    fn aggregate_gather<T: Pod>(
        &self,
        counts: &[usize],
        fill: &mut dyn FnMut(&mut [T]),
    ) -> Result<Aggregate<T>>;

    /// A sparse all-to-all (MPI's neighbourhood all-to-all without declaring the graph):
    /// `blocks` lists `(destination, data)` for the members this rank sends to, at most one
    /// block per destination. Returns the data that arrived, concatenated in source rank order,
    /// and `(source, count)` for every non-empty block that arrived.
    ///
    /// # Cost
    /// Proportional to the blocks that exist (and their bytes), not to the communicator's
    /// size: use it instead of [`alltoallv`](Self::alltoallv) when most blocks are empty.
    fn exchange<T: Pod>(&self, blocks: &[(usize, &[T])]) -> Result<Exchanged<T>>;

    /// `parts[j]` goes to member `j`, for serialisable values.
    fn alltoall_obj<T: Serialize + DeserializeOwned>(&self, parts: Vec<T>) -> Result<Vec<T>>;
}
