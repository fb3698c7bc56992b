//! Collectives among the ranks of one node, through shared memory.
//!
//! The members of a communicator on one node are threads of one process. For each collective
//! call they meet at a *rendezvous*: a node-level object found in the node table under a key
//! derived from the communicator and the call's sequence number. Each member publishes where
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
//! the rendezvous, giving up its slot if that takes long), so the pointers stay valid. Buffers
//! may be storage-backed (`SbVec`) and their owners blocked: a blocked rank's allocation may be
//! unloaded at any time, but unloading changes residency, never contents, so a reader simply
//! faults the pages back in.
//!
//! Waiting follows the runtime's protocol ([`Rank::wait_until`]): members spin briefly while
//! no rank of the node waits for a slot, so a collective among running ranks costs no
//! hand-off; otherwise they park until the member that completes a phase wakes them. The last
//! member to leave removes the rendezvous from the table.
//!
//! Operands are always combined in rank order (the published inputs are folded from the first
//! member to the last), so results do not depend on timing or on how many ranks run.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytemuck::Pod;
use spillway_runtime::{Describe, NodeBuf, WaitKind, WaitQueue};
use spillway_transport::AlignedBuf;

use crate::comm::{mix, Comm};
use crate::ops::Operation;
use crate::Result;

/// Where one member's data is.
#[derive(Default)]
pub(crate) struct Slot {
    /// Address of the member's input (or send) buffer.
    pub(crate) ptr: AtomicUsize,
    /// Its length in elements (or bytes, as the collective says).
    pub(crate) len: AtomicUsize,
    /// Address of the member's output buffer, when others write into it.
    pub(crate) out: AtomicUsize,
    /// Address of an auxiliary array (the block table of an all-to-all).
    pub(crate) aux: AtomicUsize,
    /// A copy of the member's data owned by the node, when the member does not wait for its
    /// readers (small all-to-alls).
    pub(crate) copy: Mutex<Option<NodeBuf>>,
}

impl Slot {
    pub(crate) fn ptr<T>(&self) -> *const T {
        self.ptr.load(Ordering::Relaxed) as *const T
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

/// A block in a member's inbox: (source rank, address, length).
pub(crate) type InboxBlock = (u32, usize, usize);

/// The meeting point of one collective call on one node.
pub(crate) struct Rendezvous {
    key: u64,
    /// Members of the communicator on this node.
    pub(crate) size: usize,
    name: &'static str,
    pub(crate) queue: WaitQueue,
    pub(crate) arrived: AtomicUsize,
    departed: AtomicUsize,
    /// Progress of the operation; what each value means is the collective's business.
    pub(crate) stage: AtomicU32,
    /// Members (or readers) done with the others' buffers.
    pub(crate) done: AtomicUsize,
    pub(crate) slots: Box<[Slot]>,
    /// Per member: blocks other members of the node sent it (all-to-all), as (source rank,
    /// address, length).
    pub(crate) inbox: Box<[Mutex<Vec<InboxBlock>>]>,
    /// The root's buffer of a broadcast or scatter.
    pub(crate) src: Slot,
    /// Shared fold: blocks handed out, blocks finished, number of blocks.
    next_block: AtomicUsize,
    blocks_done: AtomicUsize,
    nblocks: AtomicUsize,
    /// The fold's accumulator (address mirrored for lock-free writers of disjoint blocks).
    acc_ptr: AtomicUsize,
    acc: Mutex<Option<NodeBuf>>,
    /// A buffer the node shares (a broadcast payload from another node).
    pub(crate) shared: Mutex<Option<Arc<AlignedBuf>>>,
    /// Buffers from other nodes (bundles of gathers and all-to-alls), by group.
    pub(crate) bundles: Mutex<Vec<(usize, Arc<AlignedBuf>)>>,
}

impl Describe for Rendezvous {
    fn describe(&self) -> String {
        format!(
            "the other ranks of its node in {} ({} of {} arrived, stage {}, {} done)",
            self.name,
            self.arrived.load(Ordering::Relaxed),
            self.size,
            self.stage.load(Ordering::Relaxed),
            self.done.load(Ordering::Relaxed),
        )
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A member's presence at a rendezvous; leaving (dropping) counts its departure, and the last
/// to leave removes the rendezvous from the node table.
pub(crate) struct Entered<'c, 'r> {
    pub(crate) rv: Arc<Rendezvous>,
    comm: &'c Comm<'r>,
    describe: Arc<dyn Describe>,
}

impl Drop for Entered<'_, '_> {
    fn drop(&mut self) {
        if self.rv.departed.fetch_add(1, Ordering::AcqRel) + 1 == self.rv.size {
            self.comm.rank.node_table().remove(self.rv.key);
        }
    }
}

impl<'c, 'r> Entered<'c, 'r> {
    /// Joins the rendezvous of the collective with sequence number `tag` on `comm`; `slots`
    /// says whether members publish buffers.
    pub(crate) fn join(
        comm: &'c Comm<'r>,
        tag: i32,
        name: &'static str,
        slots: bool,
    ) -> Entered<'c, 'r> {
        let key = mix(comm.id() ^ mix(tag as u32 as u64 ^ 0x5256_0000_0000));
        let size = comm.local_size();
        let rv = comm
            .rank
            .node_table()
            .get_or_insert_with(key, || Rendezvous {
                key,
                size,
                name,
                queue: WaitQueue::new(),
                arrived: AtomicUsize::new(0),
                departed: AtomicUsize::new(0),
                stage: AtomicU32::new(0),
                done: AtomicUsize::new(0),
                slots: if slots {
                    (0..size).map(|_| Slot::default()).collect()
                } else {
                    Box::new([])
                },
                inbox: if slots {
                    (0..size).map(|_| Mutex::new(Vec::new())).collect()
                } else {
                    Box::new([])
                },
                src: Slot::default(),
                next_block: AtomicUsize::new(0),
                blocks_done: AtomicUsize::new(0),
                nblocks: AtomicUsize::new(0),
                acc_ptr: AtomicUsize::new(0),
                acc: Mutex::new(None),
                shared: Mutex::new(None),
                bundles: Mutex::new(Vec::new()),
            });
        let describe: Arc<dyn Describe> = rv.clone();
        Entered { rv, comm, describe }
    }

    /// Publishes this member's buffer and counts its arrival; returns whether it is the last
    /// of the node to arrive.
    pub(crate) fn arrive(&self, ptr: usize, len: usize, out: usize, aux: usize) -> bool {
        if let Some(slot) = self.rv.slots.get(self.comm.local_rank()) {
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

    /// Blocks until `poll` returns true (see the module notes on waiting).
    pub(crate) fn wait(&self, mut poll: impl FnMut() -> bool) -> Result<()> {
        self.comm.rank.wait_until(
            &self.rv.queue,
            WaitKind::Collective(self.rv.name),
            Some(&self.describe),
            &mut poll,
        )?;
        Ok(())
    }

    /// Sets up the shared fold of `n` elements of `T` into a new node buffer (called once, by
    /// the last member to arrive).
    pub(crate) fn open_fold<T: Pod>(&self, n: usize) -> Result<()> {
        let bytes = n * std::mem::size_of::<T>();
        let mut buf = self.comm.rank.node_buffer(bytes)?;
        self.rv
            .acc_ptr
            .store(buf.as_bytes_mut().as_mut_ptr() as usize, Ordering::Relaxed);
        let per_block = (FOLD_BLOCK / std::mem::size_of::<T>()).max(1);
        self.rv
            .nblocks
            .store(n.div_ceil(per_block).max(1), Ordering::Relaxed);
        *lock(&self.rv.acc) = Some(buf);
        Ok(())
    }

    /// Takes blocks of the shared fold and folds the members' published inputs (`n` elements
    /// each, in rank order) into the accumulator, until none is left to take. Returns true
    /// for the member that finished the last block.
    ///
    /// # Safety
    /// Every member's slot holds a pointer to `n` readable elements of `T` that stay valid and
    /// unchanged until the fold is complete, and the fold was opened for `n` elements of `T`.
    pub(crate) unsafe fn fold<T: Pod, O: Operation<T> + ?Sized>(&self, n: usize, op: &O) -> bool {
        let release = |s: &[T]| self.comm.rank.release_read(bytemuck::cast_slice(s));
        let nblocks = self.rv.nblocks.load(Ordering::Relaxed);
        let per_block = (FOLD_BLOCK / std::mem::size_of::<T>()).max(1);
        let acc = self.rv.acc_ptr.load(Ordering::Relaxed) as *mut T;
        let mut finished_last = false;
        loop {
            let b = self.rv.next_block.fetch_add(1, Ordering::Relaxed);
            if b >= nblocks {
                return finished_last;
            }
            let start = b * per_block;
            let len = per_block.min(n - start.min(n));
            // SAFETY: blocks are disjoint ranges of the accumulator of `n` elements, each
            // handed to exactly one member by `next_block`; the caller guarantees the inputs.
            unsafe {
                let out = std::slice::from_raw_parts_mut(acc.add(start), len);
                let first = std::slice::from_raw_parts(self.rv.slots[0].ptr::<T>().add(start), len);
                out.copy_from_slice(first);
                release(first);
                for slot in self.rv.slots[1..].iter() {
                    let other = std::slice::from_raw_parts(slot.ptr::<T>().add(start), len);
                    op.combine(out, other);
                    release(other);
                }
            }
            if self.rv.blocks_done.fetch_add(1, Ordering::AcqRel) + 1 == nblocks {
                finished_last = true;
            }
        }
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
    rv: Arc<Rendezvous>,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: Pod> std::ops::Deref for Aggregate<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let acc = self.rv.acc_ptr.load(Ordering::Acquire) as *const T;
        // SAFETY: the accumulator holds `len` elements of `T`, complete before any member
        // got this handle, and never written again; the handle keeps the rendezvous (which
        // owns the buffer) alive.
        unsafe { std::slice::from_raw_parts(acc, self.len) }
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
        Aggregate {
            rv: Arc::clone(&self.rv),
            len,
            _t: std::marker::PhantomData,
        }
    }
}

/// Bytes folded per block of a shared reduction: small enough to share the work among the
/// running members and to stay in cache, large enough to amortise taking a block.
const FOLD_BLOCK: usize = 32 << 10;

/// Broadcast payloads at least this long are read straight from the root's buffer; shorter
/// ones are copied once into a shared buffer so that the root need not wait for the readers.
pub(crate) const ZERO_COPY_MIN: usize = 16 << 10;
