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
pub(crate) mod choose;
mod flat;
mod gather;
mod leaders;
mod node;
mod regroup;
mod scan;
mod split;

use std::sync::Arc;

use bytemuck::Pod;
use serde::de::DeserializeOwned;
use serde::Serialize;
use spillway_transport::copy::copy;
use spillway_transport::AlignedBuf;

use crate::codec::{check_type, decode_obj, encode_obj, view};
use crate::comm::Comm;
use crate::ops::Operation;
use crate::{Error, Result};

use crate::rendezvous::INLINE_BYTES;
use leaders::length_mismatch;
pub use node::Aggregate;
use node::{lock, Entered, IN_PLACE_MIN, ZERO_COPY_MIN};
pub use regroup::Regrouped;

/// Broadcasts into the members' buffers of at least this many bytes between nodes go the
/// direct way (no intermediate buffers; see `bcast_into_direct`).
const DIRECT_BCAST_MIN: usize = 256 << 10;

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

    /// The broadcast: the root passes `src`; every other member's `sink` gets the bytes once.
    pub(crate) fn bcast_core(
        &self,
        root: usize,
        src: Option<&[u8]>,
        name: &'static str,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        self.check_root(root)?;
        let tag = self.next_coll_tag();
        self.bcast_core_tagged(root, src, name, sink, tag)
    }

    /// [`bcast_core`](Self::bcast_core) with its collective tag already taken.
    fn bcast_core_tagged(
        &self,
        root: usize,
        src: Option<&[u8]>,
        name: &'static str,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
        tag: i32,
    ) -> Result<()> {
        let shape = self.shape();
        let me = self.rank();
        let my_g = self.inner.my_group;
        let root_g = shape.group_of(root);
        let multi = shape.groups() > 1;
        let e = Entered::join(self, name, false)?;
        if my_g != root_g {
            if self.is_leader() {
                let buf = self.leaders_bcast(root_g, None, tag, name)?;
                *lock(&e.rv.shared) = Some(Arc::clone(&buf));
                e.set_stage(1);
                return sink(buf.as_bytes());
            }
            e.wait(|| e.stage() >= 1)?;
            return self.take_published(&e, sink);
        }
        if me == root {
            let Some(src) = src else {
                return Err(self.misuse(name, "the root supplied no data"));
            };
            let zero_copy = src.len() >= ZERO_COPY_MIN && e.rv.size > 1;
            let shared = if zero_copy {
                e.rv.src
                    .ptr
                    .store(src.as_ptr() as usize, std::sync::atomic::Ordering::Relaxed);
                e.rv.src
                    .len
                    .store(src.len(), std::sync::atomic::Ordering::Relaxed);
                None
            } else {
                let buf = Arc::new(AlignedBuf::from_bytes(src));
                *lock(&e.rv.shared) = Some(Arc::clone(&buf));
                Some(buf)
            };
            e.set_stage(1);
            if multi && self.is_leader() {
                let buf = shared.unwrap_or_else(|| Arc::new(AlignedBuf::from_bytes(src)));
                self.leaders_bcast(root_g, Some(buf), tag, name)?;
            }
            if zero_copy {
                // The others read straight from `src`: stay until they are done.
                e.wait(|| e.done() + 1 == e.rv.size)?;
            }
            return Ok(());
        }
        e.wait(|| e.stage() >= 1)?;
        let shared = lock(&e.rv.shared).clone();
        let forward = multi && self.is_leader();
        let outcome = match shared {
            Some(buf) => {
                e.mark_done();
                let out = sink(buf.as_bytes());
                if forward {
                    self.leaders_bcast(root_g, Some(buf), tag, name)?;
                }
                out
            }
            None => {
                let ptr = e.rv.src.ptr::<u8>();
                let len = e.rv.src.len();
                // SAFETY: the root published `len` readable bytes at `ptr` and does not return
                // (nor touch them) before every member has marked itself done.
                let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
                if forward {
                    let buf = Arc::new(AlignedBuf::from_bytes(bytes));
                    e.mark_done();
                    let out = sink(buf.as_bytes());
                    self.leaders_bcast(root_g, Some(buf), tag, name)?;
                    out
                } else {
                    let out = sink(bytes);
                    self.rank.release_read(bytes);
                    e.mark_done();
                    out
                }
            }
        };
        outcome
    }

    /// A member of a group whose leader received a broadcast takes it: from the leader's
    /// shared buffer, or read in place from the leader's own buffer (see
    /// [`bcast_into_direct`](Self::bcast_into_direct)), which the leader keeps until every
    /// member is done.
    fn take_published(
        &self,
        e: &Entered<'_, '_>,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        if let Some(buf) = lock(&e.rv.shared).clone() {
            return sink(buf.as_bytes());
        }
        let ptr = e.rv.src.ptr::<u8>();
        let len = e.rv.src.len();
        // SAFETY: the leader published `len` readable bytes at `ptr` and does not return (nor
        // write them) before every member has marked itself done.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
        let out = sink(bytes);
        self.rank.release_read(bytes);
        e.mark_done();
        out
    }

    /// Whether a broadcast of `len` bytes into the members' own buffers goes the direct way:
    /// between nodes, large, and over the binomial tree (every member decides alike from the
    /// length, which [`bcast_into`](Collectives::bcast_into) requires to be the same).
    fn bcast_direct(&self, len: usize) -> bool {
        let groups = self.shape().groups();
        groups > 1
            && len >= DIRECT_BCAST_MIN
            && choose::chain_chunk(self.rank.link_model(), groups, len).is_none()
    }

    /// The broadcast into the members' own buffers (`data` is the root's input and every other
    /// member's output) without intermediate copies: the root's leader sends from the root's
    /// buffer, another leader receives from its tree parent straight into its buffer and
    /// forwards from there, and the members of each node copy once from their leader's buffer.
    /// The messages are those of the tree broadcast, so members that broadcast into fresh
    /// vectors take part unchanged.
    fn bcast_into_direct(&self, root: usize, data: &mut [u8], name: &'static str) -> Result<()> {
        let tag = self.next_coll_tag();
        let shape = self.shape();
        let l = shape.groups();
        let my_g = self.inner.my_group;
        let root_g = shape.group_of(root);
        let me = self.rank();
        let leader = self.is_leader();
        if my_g == root_g && root != self.leader_of(root_g) {
            // The root is not its node's leader: that node goes the usual way (its leader
            // forwards a copy of the root's data; the members copy from the root).
            return if me == root {
                self.bcast_core_tagged(root, Some(data), name, &mut |_| Ok(()), tag)
            } else {
                self.bcast_core_tagged(root, None, name, &mut sink_exact(data), tag)
            };
        }
        let e = Entered::join(self, name, false)?;
        if !leader {
            e.wait(|| e.stage() >= 1)?;
            return self.take_published(&e, &mut sink_exact(data));
        }
        let rel = (my_g + l - root_g) % l;
        if me != root {
            let parent = ((rel & (rel - 1)) + root_g) % l;
            let pattern = self.coll_pattern(self.leader_of(parent), tag);
            let info =
                self.rank
                    .recv_into(pattern, spillway_runtime::WaitKind::Collective(name), data)?;
            if info.bytes != data.len() {
                return Err(length_mismatch());
            }
        }
        // Publish to this node's members, forward to the children, then stay until the
        // members have read.
        let members = e.rv.size;
        if members > 1 {
            e.rv.src
                .ptr
                .store(data.as_ptr() as usize, std::sync::atomic::Ordering::Relaxed);
            e.rv.src
                .len
                .store(data.len(), std::sync::atomic::Ordering::Relaxed);
            e.set_stage(1);
        }
        let data: &[u8] = data;
        let mut mask = 1;
        while mask < l && rel & mask == 0 {
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if rel + mask < l {
                let child = (rel + mask + root_g) % l;
                self.csend_while(self.leader_of(child), tag, data, || Ok(()))?;
            }
            mask >>= 1;
        }
        if members > 1 {
            e.wait(|| e.done() + 1 == members)?;
        }
        Ok(())
    }

    /// The exchange of `blocks` (bytes of whole `T`s), concatenating what arrives as `T`s in
    /// source order; `count` learns each source's element count.
    pub(crate) fn exchange_into<T: Pod>(
        &self,
        blocks: &[(usize, &[u8])],
        name: &'static str,
        count: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>();
        let out: std::cell::RefCell<Vec<T>> = std::cell::RefCell::new(Vec::new());
        self.alltoall_core(
            blocks,
            name,
            &mut |total| out.borrow_mut().reserve_exact(total / size),
            &mut |src, bytes| {
                let v = view::<T>(bytes)?;
                count(src, v.len());
                out.borrow_mut().extend_from_slice(v);
                Ok(())
            },
        )?;
        Ok(out.into_inner())
    }

    /// Reduction of the `n` elements at `src` (readable, and unchanged by anybody but the fold,
    /// until this call returns) with `op`: to the root (`Some`), or to every member (`None`);
    /// `sink` gets the result where it is due.
    ///
    /// `out`, for an all-reduce, is where this member wants the result (`n` elements, writable
    /// until this call returns; it may be `src` itself). Large all-reduces fold straight into
    /// the output of the node's first member when it is ordinary memory, so that member's
    /// `sink` gets its own `out` back (the result is already there) and the others copy from
    /// it; otherwise the fold goes to a node buffer.
    ///
    /// # Safety
    /// `src` points to `n` readable elements; `out` is null or points to `n` writable elements
    /// that nobody else touches during the call.
    pub(crate) unsafe fn reduce_core<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        root: Option<usize>,
        operands: Operands<T>,
        op: &O,
        name: &'static str,
        sink: &mut dyn FnMut(&[T]) -> Result<()>,
    ) -> Result<()> {
        let Operands { src, n, out } = operands;
        check_type::<T>()?;
        if let Some(r) = root {
            self.check_root(r)?;
        }
        let shape = self.shape();
        if !op.commutative() && !shape.contiguous() {
            // SAFETY: guaranteed by the caller; the flat path copies its input first.
            let data = unsafe { std::slice::from_raw_parts(src, n) };
            return self.reduce_flat(root, data, op, name, sink);
        }
        let tag = self.next_coll_tag();
        let multi = shape.groups() > 1;
        let e = Entered::join(self, name, true)?;
        let bytes = n * std::mem::size_of::<T>();
        if !multi && bytes <= INLINE_BYTES && std::mem::align_of::<T>() <= 16 {
            // SAFETY: `src` holds `n` readable elements (caller).
            let data = unsafe { std::slice::from_raw_parts(src, n) };
            return self.reduce_small(&e, root, data, op, name, sink);
        }
        let in_place = root.is_none()
            && !out.is_null()
            && bytes >= IN_PLACE_MIN
            && self.local_rank() == 0
            // SAFETY: `out` points to `n` elements (caller); only its address is looked at.
            && !self.rank.is_storage_backed(unsafe { std::slice::from_raw_parts(out as *const u8, bytes.min(1)) });
        let out_addr = if in_place { out as usize } else { 0 };
        if e.arrive(src as usize, n, out_addr, 0) {
            if e.rv.slots().iter().any(|s| s.len() != n) {
                return Err(self.misuse(name, "reduction operands differ in length"));
            }
            if let Err(err) = e.open_fold::<T>(n) {
                self.rank.fail_job(format!("{name}: {err}"));
                return Err(err);
            }
            e.set_stage(1);
        }
        // Take blocks of the node's fold while waiting for it to complete.
        e.wait(|| {
            let stage = e.stage();
            // SAFETY: every member published `n` elements (checked by the last to arrive
            // before stage 1) and stays in this call until at least stage 2.
            if stage == 1 && unsafe { e.fold(n, op) } {
                e.set_stage(2);
                return true;
            }
            stage >= 2
        })?;
        let my_g = self.inner.my_group;
        let root_g = root.map(|r| shape.group_of(r));
        if multi && self.is_leader() {
            // SAFETY: the fold is complete and only the leader touches the accumulator until
            // it raises the stage to 3.
            let acc = unsafe { e.acc::<T>(n) };
            match root_g {
                None => self.leaders_allreduce(acc, op, tag, name)?,
                Some(rg) => {
                    let top = self.leaders_reduce(acc, op, tag, name)?;
                    if rg != 0 && top {
                        self.csend(shape.leader(rg), tag, crate::codec::encode(acc))?;
                    } else if rg != 0 && my_g == rg {
                        self.crecv_exact(
                            shape.leader(0),
                            tag,
                            name,
                            bytemuck::cast_slice_mut(acc),
                        )?;
                    }
                }
            }
            e.set_stage(3);
        }
        let wanted = root.is_none_or(|r| r == self.rank());
        if wanted {
            let ready = if multi { 3 } else { 2 };
            e.wait(|| e.stage() >= ready)?;
            // SAFETY: the result is complete (stage `ready`) and nobody writes it any more.
            let result = unsafe { e.acc_ref::<T>(n) };
            let outcome = sink(result);
            if e.folds_in_place() {
                // The result lives in the first member's output: it stays until the others
                // have copied it.
                if in_place {
                    e.wait(|| e.done() + 1 == e.rv.size)?;
                } else {
                    e.mark_done();
                }
            }
            outcome?;
        }
        Ok(())
    }

    /// A reduction of at most [`INLINE_BYTES`] on one node: every member copies its operand
    /// into its slot and arrives; once all have arrived, each member that wants the result
    /// combines the operands itself, in rank order. One synchronisation, no allocation.
    fn reduce_small<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        e: &Entered<'_, '_>,
        root: Option<usize>,
        data: &[T],
        op: &O,
        name: &'static str,
        sink: &mut dyn FnMut(&[T]) -> Result<()>,
    ) -> Result<()> {
        let n = data.len();
        let bytes = std::mem::size_of_val(data);
        let slots = e.rv.slots();
        // SAFETY: this member's own slot, before its arrival.
        unsafe {
            slots[self.local_rank()]
                .inline
                .write(bytemuck::cast_slice(data))
        };
        e.arrive(0, n, 0, 0);
        e.wait(|| e.all_arrived())?;
        if slots.iter().any(|s| s.len() != n) {
            return Err(self.misuse(name, "reduction operands differ in length"));
        }
        if root.is_some_and(|r| r != self.rank()) {
            return Ok(());
        }
        let mut acc = [0u128; INLINE_BYTES / 16];
        let acc: &mut [T] =
            bytemuck::cast_slice_mut(&mut bytemuck::cast_slice_mut::<u128, u8>(&mut acc)[..bytes]);
        // SAFETY: every member has arrived.
        acc.copy_from_slice(bytemuck::cast_slice(unsafe {
            slots[0].inline.bytes(bytes)
        }));
        for slot in &slots[1..] {
            // SAFETY: as above.
            op.combine(
                acc,
                bytemuck::cast_slice(unsafe { slot.inline.bytes(bytes) }),
            );
        }
        sink(acc)
    }
}

/// The operands of [`Comm::reduce_core`]: `n` elements at `src`, and where this member wants
/// the result of an all-reduce (`out`, or null).
pub(crate) struct Operands<T> {
    pub(crate) src: *const T,
    pub(crate) n: usize,
    pub(crate) out: *mut T,
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

fn sink_exact<T: Pod>(dst: &mut [T]) -> impl FnMut(&[u8]) -> Result<()> + '_ {
    move |bytes| {
        let v = view::<T>(bytes)?;
        if v.len() != dst.len() {
            return Err(Error::Truncated {
                message_bytes: bytes.len(),
                buffer_bytes: std::mem::size_of_val(dst),
            });
        }
        copy(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(v));
        Ok(())
    }
}

impl Collectives for Comm<'_> {
    fn barrier(&self) -> Result<()> {
        let tag = self.next_coll_tag();
        let e = Entered::join(self, "barrier", false)?;
        let multi = self.shape().groups() > 1;
        let last = e.arrive(0, 0, 0, 0);
        if !multi {
            if last {
                e.set_stage(1);
            }
        } else if self.is_leader() {
            e.wait(|| e.all_arrived())?;
            self.leaders_barrier(tag)?;
            e.set_stage(1);
        }
        e.wait(|| e.stage() >= 1)
    }

    fn bcast<T: Pod>(&self, root: usize, data: &mut Vec<T>) -> Result<()> {
        check_type::<T>()?;
        if self.rank() == root {
            return self.bcast_core(root, Some(bytemuck::cast_slice(data)), "bcast", &mut |_| {
                Ok(())
            });
        }
        self.bcast_core(root, None, "bcast", &mut |bytes| {
            let v = view::<T>(bytes)?;
            data.clear();
            data.extend_from_slice(v);
            Ok(())
        })
    }

    fn bcast_into<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()> {
        check_type::<T>()?;
        self.check_root(root)?;
        if self.bcast_direct(std::mem::size_of_val(data)) {
            return self.bcast_into_direct(root, bytemuck::cast_slice_mut(data), "bcast");
        }
        if self.rank() == root {
            return self.bcast_core(root, Some(bytemuck::cast_slice(data)), "bcast", &mut |_| {
                Ok(())
            });
        }
        self.bcast_core(root, None, "bcast", &mut sink_exact(data))
    }

    fn bcast_obj<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: Option<T>,
    ) -> Result<T> {
        if self.rank() == root {
            let value = value.ok_or(Error::InvalidArgument(
                "the root of a broadcast must supply data",
            ))?;
            let bytes = encode_obj(&value)?;
            self.bcast_core(root, Some(bytes.as_bytes()), "bcast", &mut |_| Ok(()))?;
            Ok(value)
        } else {
            let mut out = None;
            self.bcast_core(root, None, "bcast", &mut |bytes| {
                out = Some(decode_obj(bytes)?);
                Ok(())
            })?;
            Ok(out.expect("the broadcast delivered"))
        }
    }

    fn reduce<T: Pod, O: Operation<T>>(
        &self,
        root: usize,
        data: &[T],
        op: O,
    ) -> Result<Option<Vec<T>>> {
        let mut out = None;
        // SAFETY: `data` is borrowed for the whole call; no output buffer.
        unsafe {
            self.reduce_core(
                Some(root),
                Operands {
                    src: data.as_ptr(),
                    n: data.len(),
                    out: std::ptr::null_mut(),
                },
                &op,
                "reduce",
                &mut |r| {
                    out = Some(r.to_vec());
                    Ok(())
                },
            )
        }?;
        Ok(out)
    }

    fn allreduce<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>> {
        let n = data.len();
        let mut out: Vec<T> = Vec::with_capacity(n);
        let dst = out.as_mut_ptr();
        let mut filled = false;
        // SAFETY: `data` is borrowed for the whole call; `dst` is the spare capacity of `out`
        // (n elements), which nothing else touches until the call returns.
        unsafe {
            let operands = Operands {
                src: data.as_ptr(),
                n,
                out: dst,
            };
            self.reduce_core(None, operands, &op, "allreduce", &mut |r| {
                if r.len() != n {
                    return Err(length_mismatch());
                }
                if !std::ptr::eq(r.as_ptr(), dst) {
                    std::ptr::copy_nonoverlapping(r.as_ptr(), dst, n);
                }
                filled = true;
                Ok(())
            })
        }?;
        if filled {
            // SAFETY: the sink wrote all `n` elements (copied, or folded in place).
            unsafe { out.set_len(n) };
        }
        Ok(out)
    }

    fn allreduce_into<T: Pod, O: Operation<T>>(&self, data: &mut [T], op: O) -> Result<()> {
        if !op.commutative() && !self.shape().contiguous() {
            // Rank-ordered messages: the input is copied anyway.
            let r = self.allreduce(data, op)?;
            data.copy_from_slice(&r);
            return Ok(());
        }
        let n = data.len();
        let ptr = data.as_mut_ptr();
        // SAFETY: `data` is borrowed mutably for the whole call and only accessed through
        // `ptr`: other members read it during the fold; the fold may write the result into it
        // (then the sink gets it back and copies nothing), otherwise the sink copies the
        // result from the node's accumulator, which does not alias it.
        unsafe {
            let operands = Operands {
                src: ptr,
                n,
                out: ptr,
            };
            self.reduce_core(None, operands, &op, "allreduce", &mut |r| {
                if r.len() != n {
                    return Err(length_mismatch());
                }
                if !std::ptr::eq(r.as_ptr(), ptr) {
                    std::ptr::copy_nonoverlapping(r.as_ptr(), ptr, n);
                }
                Ok(())
            })
        }
    }

    fn scan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>> {
        Ok(self
            .scan_core(data, &op, true)?
            .expect("inclusive scan has a result"))
    }

    fn exscan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Option<Vec<T>>> {
        self.scan_core(data, &op, false)
    }

    fn gather<T: Pod>(&self, root: usize, data: &[T]) -> Result<Option<Vec<T>>> {
        match self.gatherv(root, data)? {
            None => Ok(None),
            Some((v, counts)) => {
                if counts.iter().any(|&c| c != counts[0]) {
                    return Err(Error::InvalidArgument(
                        "gather contributions differ in length; use gatherv",
                    ));
                }
                Ok(Some(v))
            }
        }
    }

    fn gatherv<T: Pod>(&self, root: usize, data: &[T]) -> Result<Option<(Vec<T>, Vec<usize>)>> {
        check_type::<T>()?;
        let got = self.gather_core(root, bytemuck::cast_slice(data), "gather")?;
        got.map(|pieces| gather::concat::<T>(&pieces)).transpose()
    }

    fn gather_obj<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: &T,
    ) -> Result<Option<Vec<T>>> {
        let bytes = encode_obj(value)?;
        match self.gather_core(root, bytes.as_bytes(), "gather")? {
            None => Ok(None),
            Some(pieces) => pieces
                .iter()
                .map(decode_obj)
                .collect::<Result<Vec<T>>>()
                .map(Some),
        }
    }

    fn scatter<T: Pod>(&self, root: usize, data: Option<&[T]>) -> Result<Vec<T>> {
        let p = self.size();
        let counts = match data {
            Some(d) if self.rank() == root => {
                if d.len() % p != 0 {
                    return Err(Error::InvalidArgument(
                        "scatter data is not a multiple of the communicator size",
                    ));
                }
                vec![d.len() / p; p]
            }
            _ => Vec::new(),
        };
        self.scatterv(root, data.map(|d| (d, &counts[..])))
    }

    fn scatterv<T: Pod>(&self, root: usize, data: Option<(&[T], &[usize])>) -> Result<Vec<T>> {
        check_type::<T>()?;
        let parts = match (self.rank() == root, data) {
            (true, Some((d, counts))) => {
                let parts = gather::split_by_counts(d, counts, self.size())?;
                Some(parts.into_iter().map(bytemuck::cast_slice).collect())
            }
            (true, None) => {
                return Err(Error::InvalidArgument(
                    "the root of a scatter must supply data",
                ))
            }
            (false, _) => None,
        };
        let mut out = Vec::new();
        self.scatter_core(root, parts, "scatterv", &mut |bytes| {
            out.extend_from_slice(view::<T>(bytes)?);
            Ok(())
        })?;
        Ok(out)
    }

    fn allgather<T: Pod>(&self, data: &[T]) -> Result<Vec<T>> {
        let (v, counts) = self.allgatherv(data)?;
        if counts.iter().any(|&c| c != counts[0]) {
            return Err(Error::InvalidArgument(
                "allgather contributions differ in length; use allgatherv",
            ));
        }
        Ok(v)
    }

    fn allgatherv<T: Pod>(&self, data: &[T]) -> Result<(Vec<T>, Vec<usize>)> {
        check_type::<T>()?;
        let pieces = self.allgather_core(bytemuck::cast_slice(data), "allgather")?;
        gather::concat::<T>(&pieces)
    }

    fn allgather_obj<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Vec<T>> {
        let bytes = encode_obj(value)?;
        let pieces = self.allgather_core(bytes.as_bytes(), "allgather")?;
        pieces.iter().map(decode_obj).collect()
    }

    fn allreduce_obj<T: Serialize + DeserializeOwned, F: Fn(T, T) -> T>(
        &self,
        value: &T,
        f: F,
    ) -> Result<T> {
        let all = self.allgather_obj(value)?;
        let mut it = all.into_iter();
        let first = it
            .next()
            .ok_or(Error::InvalidArgument("empty communicator"))?;
        Ok(it.fold(first, f))
    }

    fn alltoall<T: Pod>(&self, data: &[T]) -> Result<Vec<T>> {
        let p = self.size();
        if !data.len().is_multiple_of(p) {
            return Err(Error::InvalidArgument(
                "all-to-all data is not a multiple of the communicator size",
            ));
        }
        let counts = vec![data.len() / p; p];
        Ok(self.alltoallv(data, &counts)?.0)
    }

    fn alltoall_into<T: Pod>(&self, data: &[T], recv: &mut [T]) -> Result<()> {
        check_type::<T>()?;
        let p = self.size();
        if !data.len().is_multiple_of(p) || recv.len() != data.len() {
            return Err(Error::InvalidArgument(
                "all-to-all data must be a multiple of the communicator size and as long as the \
                 receive buffer",
            ));
        }
        let block = data.len() / p;
        if block == 0 {
            return self.barrier();
        }
        let blocks: Vec<(usize, &[u8])> = data
            .chunks_exact(block)
            .enumerate()
            .map(|(j, b)| (j, bytemuck::cast_slice(b)))
            .collect();
        let mut arrived = 0usize;
        let mut short = false;
        self.alltoall_core(&blocks, "alltoall", &mut |_| {}, &mut |src, bytes| {
            let v = view::<T>(bytes)?;
            if v.len() != block {
                short = true;
                return Ok(());
            }
            copy(
                bytemuck::cast_slice_mut(&mut recv[src * block..(src + 1) * block]),
                bytemuck::cast_slice(v),
            );
            arrived += 1;
            Ok(())
        })?;
        if short || arrived != p {
            return Err(self.misuse("alltoall", "members passed blocks of different lengths"));
        }
        Ok(())
    }

    fn alltoallv<T: Pod>(&self, data: &[T], counts: &[usize]) -> Result<(Vec<T>, Vec<usize>)> {
        check_type::<T>()?;
        if counts.len() != self.size() || counts.iter().sum::<usize>() != data.len() {
            return Err(Error::InvalidArgument(
                "counts must have one entry per member and add up to the data length",
            ));
        }
        let mut blocks: Vec<(usize, &[u8])> = Vec::new();
        let mut at = 0;
        for (j, &c) in counts.iter().enumerate() {
            if c > 0 {
                blocks.push((j, bytemuck::cast_slice(&data[at..at + c])));
                at += c;
            }
        }
        let mut got = vec![0usize; self.size()];
        let out = self.exchange_into(&blocks, "alltoallv", &mut |src, n| got[src] = n)?;
        Ok((out, got))
    }

    fn alltoallv_vecs<T: Pod>(&self, parts: Vec<Vec<T>>) -> Result<Vec<Vec<T>>> {
        check_type::<T>()?;
        if parts.len() != self.size() {
            return Err(Error::InvalidArgument(
                "all-to-all needs one part per member",
            ));
        }
        let blocks: Vec<(usize, &[u8])> = parts
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(j, b)| (j, bytemuck::cast_slice(b)))
            .collect();
        let mut out: Vec<Vec<T>> = (0..self.size()).map(|_| Vec::new()).collect();
        self.alltoall_core(&blocks, "alltoallv", &mut |_| {}, &mut |src, bytes| {
            out[src] = view::<T>(bytes)?.to_vec();
            Ok(())
        })?;
        Ok(out)
    }

    fn aggregate<T: Pod, O: Operation<T>>(
        &self,
        identity: T,
        len: usize,
        op: O,
        add: &mut dyn FnMut(&mut [T]),
    ) -> Result<Aggregate<T>> {
        self.aggregate_with(
            "aggregate",
            identity,
            len,
            add,
            "ranks passed different lengths",
            |acc, tag| self.leaders_allreduce(acc, &op, tag, "aggregate"),
        )
    }

    fn aggregate_scatter<T: Pod, O: Operation<T>>(
        &self,
        identity: T,
        counts: &[usize],
        op: O,
        add: &mut dyn FnMut(&mut [T]),
    ) -> Result<Regrouped<T>> {
        self.aggregate_scatter_core(identity, counts, op, add)
    }

    fn aggregate_gather<T: Pod>(
        &self,
        counts: &[usize],
        fill: &mut dyn FnMut(&mut [T]),
    ) -> Result<Aggregate<T>> {
        self.aggregate_gather_core(counts, fill)
    }

    fn exchange<T: Pod>(&self, blocks: &[(usize, &[T])]) -> Result<Exchanged<T>> {
        check_type::<T>()?;
        let mut seen = std::collections::HashSet::with_capacity(blocks.len());
        if !blocks.iter().all(|(j, _)| seen.insert(*j)) {
            return Err(Error::InvalidArgument(
                "exchange: at most one block per destination",
            ));
        }
        let bytes: Vec<(usize, &[u8])> = blocks
            .iter()
            .filter(|(_, b)| !b.is_empty())
            .map(|&(j, b)| (j, bytemuck::cast_slice(b)))
            .collect();
        let mut sources = Vec::new();
        let out = self.exchange_into(&bytes, "exchange", &mut |src, n| sources.push((src, n)))?;
        Ok((out, sources))
    }

    fn alltoall_obj<T: Serialize + DeserializeOwned>(&self, parts: Vec<T>) -> Result<Vec<T>> {
        if parts.len() != self.size() {
            return Err(Error::InvalidArgument(
                "all-to-all needs one part per member",
            ));
        }
        let encoded = parts.iter().map(encode_obj).collect::<Result<Vec<_>>>()?;
        drop(parts);
        let blocks: Vec<(usize, &[u8])> = encoded
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .map(|(j, p)| (j, p.as_bytes()))
            .collect();
        let mut out: Vec<Option<T>> = (0..self.size()).map(|_| None).collect();
        self.alltoall_core(&blocks, "alltoall", &mut |_| {}, &mut |src, bytes| {
            out[src] = Some(decode_obj::<T>(bytes)?);
            Ok(())
        })?;
        // Empty blocks are not delivered: they decode from no bytes.
        out.into_iter()
            .map(|v| v.map_or_else(|| decode_obj::<T>(&[]), Ok))
            .collect()
    }
}
