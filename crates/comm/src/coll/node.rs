//! Collectives among the ranks of one node, through shared memory.
//!
//! The members of a communicator on one node are threads of one process. For each collective
//! call they meet at a *rendezvous*: the entry of the communicator's ring (shared by its
//! members on the node) that the call's sequence number selects, so joining takes no lock and
//! allocates nothing. Each member publishes where
//! its data is (a pointer and a length: its own buffer, not a copy), and the members then read
//! each other's buffers directly:
//!
//! * broadcast: every receiver copies straight from the root's buffer (one pass);
//! * reduction: the published inputs are folded block by block into one node buffer, the
//!   blocks shared among the members that are running (a parallel reduce-scatter); each member
//!   then copies the result (two passes in all);
//! * all-to-all: every receiver gathers its blocks straight from the senders' buffers (one
//!   pass).
//!
//! A member whose buffer others read does not return before they are done with it (it waits on
//! the rendezvous, giving up its slot if that takes long), so the pointers stay valid. When
//! the job fails (its waits return an error) a member may have to leave first: it then closes
//! the rendezvous to reads and waits for the reads under way, which never block
//! ([`Entered::reading`]). Buffers
//! may be storage-backed (`SbVec`) and their owners blocked: a blocked rank's allocation may be
//! unloaded at any time, but unloading changes residency, never contents, so a reader simply
//! faults the pages back in.
//!
//! Waiting follows the runtime's protocol ([`Rank::wait_until`]): members spin briefly while
//! no rank of the node waits for a slot, so a collective among running ranks costs no
//! hand-off; otherwise they park until the member that completes a phase wakes them. The last
//! member to leave resets the entry and hands it to the call that comes a ring's length later.
//!
//! Operands are always combined in rank order (the published inputs are folded from the first
//! member to the last), so results do not depend on timing or on how many ranks run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytemuck::Pod;
use spillway_runtime::{Describe, NodeBuf, WaitKind};

use crate::comm::Comm;
use crate::ops::Operation;
use crate::rendezvous::RING;
pub(crate) use crate::rendezvous::{lock, Rendezvous};
use crate::Error;
use crate::Result;

/// A member's presence at a rendezvous; leaving (dropping) counts its departure, and the last
/// to leave resets the entry and hands it to the call `RING` later.
pub(crate) struct Entered<'c, 'r> {
    pub(crate) rv: Arc<Rendezvous>,
    comm: &'c Comm<'r>,
    describe: Arc<dyn Describe>,
    name: &'static str,
    /// Which of the communicator's rendezvous calls this is.
    seq: u32,
}

impl Drop for Entered<'_, '_> {
    fn drop(&mut self) {
        // A member that leaves because the job is failing may leave before the others are
        // done with its buffers: stop their reads first (see `reading`).
        if std::thread::panicking() || self.comm.rank.interrupted().is_some() {
            self.close_reads();
        }
        if self.rv.departed.fetch_add(1, Ordering::AcqRel) + 1 == self.rv.size {
            let kept = self.rv.reset(self.seq.wrapping_add(RING as u32));
            self.comm.rank.wake_all(&self.rv.queue);
            drop(kept);
        }
    }
}

impl<'c, 'r> Entered<'c, 'r> {
    /// Joins the rendezvous of the next collective on `comm` that meets on the node (waiting
    /// for its turn if the ring entry is still in use by an earlier call); `slots` says whether
    /// members publish buffers. Every member of the node joins the same calls in the same
    /// order (collectives that go by messages only, like the rank-ordered flat reductions,
    /// join none).
    ///
    /// # Errors
    /// [`Error::Aborted`](crate::Error::Aborted) when the job ends while waiting.
    pub(crate) fn join(
        comm: &'c Comm<'r>,
        name: &'static str,
        slots: bool,
    ) -> Result<Entered<'c, 'r>> {
        let seq = comm.next_ring_seq();
        let ring = comm.ring();
        let rv = Arc::clone(&ring.entries[seq as usize % RING]);
        if rv.turn.load(Ordering::Acquire) != seq {
            let describe: Arc<dyn Describe> = rv.clone();
            comm.rank.wait_until(
                &rv.queue,
                WaitKind::Collective(name),
                Some(&describe),
                || rv.turn.load(Ordering::Acquire) == seq,
            )?;
        }
        if slots {
            rv.slots();
            rv.inbox();
            if !rv.uses_slots.load(Ordering::Relaxed) {
                rv.uses_slots.store(true, Ordering::Relaxed);
            }
        }
        let describe: Arc<dyn Describe> = rv.clone();
        Ok(Entered {
            rv,
            comm,
            describe,
            name,
            seq,
        })
    }

    /// Publishes this member's buffer and counts its arrival; returns whether it is the last
    /// of the node to arrive.
    pub(crate) fn arrive(&self, ptr: usize, len: usize, out: usize, aux: usize) -> bool {
        if let Some(slot) = self
            .rv
            .slots
            .get()
            .and_then(|s| s.get(self.comm.local_rank()))
        {
            slot.ptr.store(ptr, Ordering::Relaxed);
            slot.len.store(len, Ordering::Relaxed);
            slot.out.store(out, Ordering::Relaxed);
            slot.aux.store(aux, Ordering::Relaxed);
        }
        let last = self.rv.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.rv.size;
        if last {
            self.wake();
        }
        last
    }

    /// Whether every member of the node has arrived (its slot is readable).
    pub(crate) fn all_arrived(&self) -> bool {
        self.rv.arrived.load(Ordering::Acquire) == self.rv.size
    }

    pub(crate) fn stage(&self) -> u32 {
        self.rv.stage.load(Ordering::Acquire)
    }

    /// Raises the stage to `stage` and wakes the waiting members.
    pub(crate) fn set_stage(&self, stage: u32) {
        self.rv.stage.fetch_max(stage, Ordering::AcqRel);
        self.wake();
    }

    /// Counts one more member done reading; returns the new count.
    pub(crate) fn mark_done(&self) -> usize {
        let n = self.rv.done.fetch_add(1, Ordering::AcqRel) + 1;
        self.wake();
        n
    }

    pub(crate) fn done(&self) -> usize {
        self.rv.done.load(Ordering::Acquire)
    }

    pub(crate) fn wake(&self) {
        self.comm.rank.wake_all(&self.rv.queue);
    }

    /// Runs `read`, which reads or writes buffers other members published, unless a member
    /// has left the call early (the job is failing: see [`close_reads`](Self::close_reads)).
    /// `read` must not block: a member that leaves early waits for the reads under way.
    ///
    /// # Errors
    /// Why the rank's blocking calls fail ([`Rank::interrupted`]) when the reads are closed.
    ///
    /// [`Rank::interrupted`]: spillway_runtime::Rank::interrupted
    pub(crate) fn reading<R>(&self, read: impl FnOnce() -> R) -> Result<R> {
        struct Release<'a>(&'a AtomicUsize);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Release);
            }
        }
        let ticket = self.rv.readers.fetch_add(1, Ordering::AcqRel);
        let _release = Release(&self.rv.readers);
        if ticket & CLOSED != 0 {
            return Err(self.comm.rank.interrupted().unwrap_or(Error::Aborted));
        }
        Ok(read())
    }

    /// Stops reads of the members' buffers from starting and waits for those under way: a
    /// member that leaves before the others are done with its buffers (its wait failed)
    /// calls it, so that nobody touches them once it has returned. The reads do not block,
    /// so the wait is short.
    fn close_reads(&self) {
        self.rv.readers.fetch_or(CLOSED, Ordering::AcqRel);
        let mut spins = 0u32;
        while self.rv.readers.load(Ordering::Acquire) & !CLOSED != 0 {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Blocks until `poll` returns true (see the module notes on waiting).
    pub(crate) fn wait(&self, mut poll: impl FnMut() -> bool) -> Result<()> {
        self.comm.rank.wait_until(
            &self.rv.queue,
            WaitKind::Collective(self.name),
            Some(&self.describe),
            &mut poll,
        )?;
        Ok(())
    }

    /// Sets up the shared fold of `n` elements of `T` (called once, by the last member to
    /// arrive): into the first member's output when it published one (`out` of slot 0),
    /// otherwise into a new node buffer.
    pub(crate) fn open_fold<T: Pod>(&self, n: usize) -> Result<()> {
        let target = self.rv.slots()[0].out.load(Ordering::Relaxed);
        if target != 0 {
            self.rv.acc_ptr.store(target, Ordering::Relaxed);
        } else {
            let bytes = n * std::mem::size_of::<T>();
            let mut buf = self.comm.rank.node_buffer(bytes)?;
            self.rv
                .acc_ptr
                .store(buf.as_bytes_mut().as_mut_ptr() as usize, Ordering::Relaxed);
            *lock(&self.rv.acc) = Some(buf);
        }
        let per_block = (FOLD_BLOCK / std::mem::size_of::<T>()).max(1);
        self.rv
            .nblocks
            .store(n.div_ceil(per_block).max(1), Ordering::Relaxed);
        Ok(())
    }

    /// Whether the fold went into the first member's output (see [`open_fold`](Self::open_fold)).
    pub(crate) fn folds_in_place(&self) -> bool {
        self.rv.slots()[0].out.load(Ordering::Relaxed) != 0
    }

    /// Takes blocks of the shared fold and folds the members' published inputs (`n` elements
    /// each, in rank order) into the accumulator, until none is left to take. Returns true
    /// for the member that finished the last block.
    ///
    /// # Safety
    /// Every member's slot holds a pointer to `n` readable elements of `T` that stay valid and
    /// unchanged until the fold is complete or the reads are closed (a member that leaves
    /// early closes them first), and the fold was opened for `n` elements of `T`.
    pub(crate) unsafe fn fold<T: Pod, O: Operation<T> + ?Sized>(&self, n: usize, op: &O) -> bool {
        let release = |s: &[T]| self.comm.rank.release_read(bytemuck::cast_slice(s));
        let nblocks = self.rv.nblocks.load(Ordering::Relaxed);
        let per_block = (FOLD_BLOCK / std::mem::size_of::<T>()).max(1);
        let acc = self.rv.acc_ptr.load(Ordering::Relaxed) as *mut T;
        let mut finished_last = false;
        // One block per read: a member that leaves early waits for at most one block each.
        let fold_one = || {
            let b = self.rv.next_block.fetch_add(1, Ordering::Relaxed);
            if b >= nblocks {
                return false;
            }
            let start = b * per_block;
            let len = per_block.min(n - start.min(n));
            // SAFETY: blocks are disjoint ranges of the accumulator of `n` elements, each
            // handed to exactly one member by `next_block`; the caller guarantees the inputs
            // while the reads are open (`reading`).
            unsafe {
                let slots = self.rv.slots();
                let first = slots[0].ptr::<T>().add(start);
                let target = acc.add(start);
                // The first member's input may be the accumulator itself (an in-place
                // all-reduce): then there is nothing to copy.
                if !std::ptr::eq(first, target) {
                    let first = std::slice::from_raw_parts(first, len);
                    std::slice::from_raw_parts_mut(target, len).copy_from_slice(first);
                    release(first);
                }
                let out = std::slice::from_raw_parts_mut(target, len);
                for slot in slots[1..].iter() {
                    let other = std::slice::from_raw_parts(slot.ptr::<T>().add(start), len);
                    op.combine(out, other);
                    release(other);
                }
            }
            true
        };
        while let Ok(true) = self.reading(fold_one) {
            if self.rv.blocks_done.fetch_add(1, Ordering::AcqRel) + 1 == nblocks {
                finished_last = true;
            }
        }
        finished_last
    }

    /// The accumulator as a slice of `n` elements, for reading.
    ///
    /// # Safety
    /// The fold was opened for at least `n` elements of `T` and nobody writes the accumulator
    /// while the returned slice is alive.
    pub(crate) unsafe fn acc_ref<T: Pod>(&self, n: usize) -> &[T] {
        let acc = self.rv.acc_ptr.load(Ordering::Acquire) as *const T;
        // SAFETY: guaranteed by the caller; the node buffer lives as long as the rendezvous.
        unsafe { std::slice::from_raw_parts(acc, n) }
    }

    /// The accumulator as a slice of `n` elements.
    ///
    /// # Safety
    /// The fold was opened for at least `n` elements of `T`, and no member writes to the
    /// accumulator while the returned slice is alive (the fold is complete, or the caller is
    /// the only member allowed to write it at this stage).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn acc<T: Pod>(&self, n: usize) -> &mut [T] {
        let acc = self.rv.acc_ptr.load(Ordering::Acquire) as *mut T;
        // SAFETY: guaranteed by the caller; the node buffer lives as long as the rendezvous.
        unsafe { std::slice::from_raw_parts_mut(acc, n) }
    }
}

/// The node-level result of [`Collectives::aggregate`](crate::Collectives::aggregate): one
/// buffer shared by the members of a node, read-only.
pub struct Aggregate<T: Pod> {
    buf: Arc<NodeBuf>,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: Pod> Aggregate<T> {
    /// The same shared buffer seen as its first `len` elements (at most its length).
    pub fn truncated(mut self, len: usize) -> Aggregate<T> {
        self.len = self.len.min(len);
        self
    }
}

impl<T: Pod> std::ops::Deref for Aggregate<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let bytes = &self.buf.as_bytes()[..self.len * std::mem::size_of::<T>()];
        // The buffer came from the node's allocator, which aligns to 16 bytes.
        bytemuck::cast_slice(bytes)
    }
}

impl<T: Pod> std::fmt::Debug for Aggregate<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Aggregate<{}>({} elements)",
            std::any::type_name::<T>(),
            self.len
        )
    }
}

impl<'c, 'r> Entered<'c, 'r> {
    /// Runs `add` on the node's accumulator of `len` elements (made, filled with `identity`,
    /// by the first member to get here), with exclusive access. Returns false if another
    /// member made it with another length.
    pub(crate) fn accumulate<T: Pod>(
        &self,
        len: usize,
        identity: T,
        add: &mut dyn FnMut(&mut [T]),
    ) -> Result<bool> {
        let mut acc = lock(&self.rv.acc);
        if acc.is_none() {
            let mut buf = self.comm.rank.node_buffer(len * std::mem::size_of::<T>())?;
            bytemuck::cast_slice_mut::<u8, T>(buf.as_bytes_mut()).fill(identity);
            self.rv
                .acc_ptr
                .store(buf.as_bytes_mut().as_mut_ptr() as usize, Ordering::Release);
            self.rv.nblocks.store(len, Ordering::Relaxed);
            *acc = Some(buf);
        }
        if self.rv.nblocks.load(Ordering::Relaxed) != len {
            return Ok(false);
        }
        let ptr = self.rv.acc_ptr.load(Ordering::Relaxed) as *mut T;
        // SAFETY: the accumulator holds `len` elements; the lock held here gives exclusive
        // access until every member has added (nobody reads it before then).
        add(unsafe { std::slice::from_raw_parts_mut(ptr, len) });
        Ok(true)
    }

    /// A read-only handle to the completed accumulator of `len` elements.
    pub(crate) fn aggregate<T: Pod>(&self, len: usize) -> Aggregate<T> {
        let mut result = lock(&self.rv.result);
        let buf = match &*result {
            Some(buf) => Arc::clone(buf),
            None => {
                let buf = Arc::new(lock(&self.rv.acc).take().expect("the accumulator exists"));
                *result = Some(Arc::clone(&buf));
                buf
            }
        };
        Aggregate {
            buf,
            len,
            _t: std::marker::PhantomData,
        }
    }
}

impl Comm<'_> {
    /// The frame of the local-aggregation collectives: every member adds into one node buffer
    /// of `len` elements (made filled with `identity`) with `add`; when there are several
    /// nodes, the node's leader then runs `between` on the complete buffer with the call's
    /// tag (combining it with the other nodes'); every member gets the node's buffer.
    /// `mismatch` says what differed when members of a node passed different lengths.
    pub(crate) fn aggregate_with<T: Pod>(
        &self,
        name: &'static str,
        identity: T,
        len: usize,
        add: &mut dyn FnMut(&mut [T]),
        mismatch: &'static str,
        between: impl FnOnce(&mut [T], i32) -> Result<()>,
    ) -> Result<Aggregate<T>> {
        crate::codec::check_type::<T>()?;
        let tag = self.next_coll_tag();
        let e = Entered::join(self, name, false)?;
        if !e.accumulate(len, identity, add)? {
            return Err(self.misuse(name, mismatch));
        }
        e.arrive(0, len, 0, 0);
        if self.shape().groups() > 1 {
            if self.is_leader() {
                e.wait(|| e.all_arrived())?;
                // SAFETY: every member has added; only the leader touches the accumulator
                // until it raises the stage.
                let acc = unsafe { e.acc::<T>(len) };
                between(acc, tag)?;
                e.set_stage(1);
            }
            e.wait(|| e.stage() >= 1)?;
        } else {
            e.wait(|| e.all_arrived())?;
        }
        Ok(e.aggregate(len))
    }
}

/// All-reduces of at least this many bytes fold into the first member's output instead of a
/// node buffer (one pass less for that member, no node buffer), at the price of that member
/// waiting for the others to copy the result.
pub(crate) const IN_PLACE_MIN: usize = 16 << 10;

/// Set in a rendezvous's count of reads once a member left the call early: no read of the
/// members' buffers starts any more (see [`Entered::reading`]).
const CLOSED: usize = 1 << (usize::BITS - 1);

/// Bytes folded per block of a shared reduction: small enough to share the work among the
/// running members and to stay in cache, large enough to amortise taking a block.
const FOLD_BLOCK: usize = 32 << 10;

/// Broadcast payloads at least this long are read straight from the root's buffer; shorter
/// ones are copied once into a shared buffer so that the root need not wait for the readers.
pub(crate) const ZERO_COPY_MIN: usize = 16 << 10;
