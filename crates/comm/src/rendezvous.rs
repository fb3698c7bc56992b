//! The meeting points of node-level collectives: for each communicator, a ring of
//! rendezvous shared by its members on a node (see `coll::node` for how collectives use them).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use spillway_runtime::{Describe, NodeBuf, WaitQueue};
use spillway_transport::AlignedBuf;

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
    /// Room for a small operand, copied in by its member before it arrives (small
    /// reductions need then no other synchronisation than the arrival of every member).
    pub(crate) inline: Inline,
}

/// Bytes of [`Slot::inline`].
pub(crate) const INLINE_BYTES: usize = 64;

/// A member's small operand, written by that member before it counts its arrival and read by
/// the others after they saw every member arrive (the arrival counter orders the accesses).
pub(crate) struct Inline(UnsafeCell<[u128; INLINE_BYTES / 16]>);

impl Default for Inline {
    fn default() -> Inline {
        Inline(UnsafeCell::new([0; INLINE_BYTES / 16]))
    }
}

// SAFETY: accesses follow the protocol above: one writer (the slot's member) before its
// arrival is published with Release, readers only after observing every arrival with Acquire,
// and no write again until the entry is reset after every member has left. (The accumulator
// of a small reduction, `Rendezvous::small_acc`, follows the same protocol with the stage in
// place of the arrivals: one writer, the last member to arrive, before it raises the stage.)
unsafe impl Sync for Inline {}

impl Inline {
    /// Copies `bytes` (at most [`INLINE_BYTES`]) in.
    ///
    /// # Safety
    /// Only the slot's member calls this, before it arrives (for `small_acc`: only the last
    /// member to arrive, before it raises the stage).
    pub(crate) unsafe fn write(&self, bytes: &[u8]) {
        // SAFETY: no reader before the arrival (caller); the length is checked by the slice.
        let words = unsafe { &mut *self.0.get() };
        bytemuck::cast_slice_mut::<u128, u8>(words)[..bytes.len()].copy_from_slice(bytes);
    }

    /// The first `len` bytes (16-byte aligned).
    ///
    /// # Safety
    /// Every member has arrived (for `small_acc`: the stage was raised), and nobody writes
    /// until the entry is reset.
    pub(crate) unsafe fn bytes(&self, len: usize) -> &[u8] {
        // SAFETY: guaranteed by the caller.
        let words = unsafe { &*self.0.get() };
        &bytemuck::cast_slice::<u128, u8>(words)[..len]
    }
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

/// Rendezvous a communicator's calls on one node take in turn: call `t` (its collective
/// position among the calls that meet on the node, `Comm::next_ring_seq`) uses entry
/// `t % RING`.
///
/// The ring is shared by the members on the node (found once per communicator in the node
/// table), so joining a collective costs no lock and no allocation. An entry is reused once
/// every member has left the call that used it: a member that runs `RING` calls ahead of the
/// slowest (possible only through collectives that do not wait for the others, such as a
/// small broadcast's root) waits for its turn.
pub(crate) struct CollRing {
    pub(crate) entries: Box<[Arc<Rendezvous>]>,
}

/// Number of entries of a [`CollRing`]. A power of two that divides the tag space.
pub(crate) const RING: usize = 4;

impl CollRing {
    /// The ring of a communicator with `size` members on this node.
    pub(crate) fn new(size: usize) -> CollRing {
        CollRing {
            entries: (0..RING)
                .map(|i| {
                    Arc::new(Rendezvous {
                        size,
                        turn: AtomicU32::new(i as u32),
                        queue: WaitQueue::new(),
                        arrived: AtomicUsize::new(0),
                        departed: AtomicUsize::new(0),
                        stage: AtomicU32::new(0),
                        done: AtomicUsize::new(0),
                        readers: AtomicUsize::new(0),
                        slots: OnceLock::new(),
                        uses_slots: AtomicBool::new(false),
                        inbox: OnceLock::new(),
                        src: Slot::default(),
                        next_block: AtomicUsize::new(0),
                        blocks_done: AtomicUsize::new(0),
                        nblocks: AtomicUsize::new(0),
                        acc_ptr: AtomicUsize::new(0),
                        acc: Mutex::new(None),
                        result: Mutex::new(None),
                        shared: Mutex::new(None),
                        bundles: Mutex::new(Vec::new()),
                        keep: Mutex::new(None),
                        pinned: AtomicBool::new(false),
                        small_acc: Inline::default(),
                    })
                })
                .collect(),
        }
    }
}

/// The meeting point of one collective call on one node (an entry of a [`CollRing`], reset
/// for the next call by the last member to leave).
pub(crate) struct Rendezvous {
    /// Members of the communicator on this node.
    pub(crate) size: usize,
    /// The ring position (`Comm::next_ring_seq`) of the call that may use this
    /// entry now.
    pub(crate) turn: AtomicU32,
    pub(crate) queue: WaitQueue,
    pub(crate) arrived: AtomicUsize,
    pub(crate) departed: AtomicUsize,
    /// Progress of the operation; what each value means is the collective's business.
    pub(crate) stage: AtomicU32,
    /// Members (or readers) done with the others' buffers.
    pub(crate) done: AtomicUsize,
    /// Reads of members' buffers under way, plus `node::CLOSED` once a member left the call
    /// early (see `Entered::reading`).
    pub(crate) readers: AtomicUsize,
    /// Per member: where its data is (made at the first call that publishes buffers).
    pub(crate) slots: OnceLock<Box<[Slot]>>,
    /// Whether the current call uses `slots` and `inbox` (then the reset clears them).
    pub(crate) uses_slots: AtomicBool,
    /// Per member: blocks other members of the node sent it (all-to-all), as (source rank,
    /// address, length).
    pub(crate) inbox: OnceLock<Box<[Mutex<Vec<InboxBlock>>]>>,
    /// The root's buffer of a broadcast or scatter.
    pub(crate) src: Slot,
    /// Shared fold: blocks handed out, blocks finished, number of blocks.
    pub(crate) next_block: AtomicUsize,
    pub(crate) blocks_done: AtomicUsize,
    pub(crate) nblocks: AtomicUsize,
    /// The fold's accumulator (address mirrored for lock-free writers of disjoint blocks).
    pub(crate) acc_ptr: AtomicUsize,
    pub(crate) acc: Mutex<Option<NodeBuf>>,
    /// The accumulator of an aggregate, once complete: shared with the members' handles,
    /// which outlive the call.
    pub(crate) result: Mutex<Option<Arc<NodeBuf>>>,
    /// A buffer the node shares (a broadcast payload from another node).
    pub(crate) shared: Mutex<Option<Arc<AlignedBuf>>>,
    /// Buffers from other nodes (bundles of gathers and all-to-alls), by group.
    pub(crate) bundles: Mutex<Vec<(usize, Arc<AlignedBuf>)>>,
    /// The ring itself, held while a member that dropped its communicator has left this call
    /// before the others came (the node table holds rings only weakly); released by the
    /// reset.
    pub(crate) keep: Mutex<Option<Arc<CollRing>>>,
    /// Whether `keep` holds the ring.
    pub(crate) pinned: AtomicBool,
    /// The result of a small reduction among many members: written by the last member to
    /// arrive, before it raises the stage (Release), read by the others after they saw the
    /// stage (Acquire), written again only in a later call (after the reset).
    pub(crate) small_acc: Inline,
}

impl Rendezvous {
    /// Per member: where its data is.
    pub(crate) fn slots(&self) -> &[Slot] {
        self.slots
            .get_or_init(|| (0..self.size).map(|_| Slot::default()).collect())
    }

    /// Per member: blocks sent to it by the other members of the node.
    pub(crate) fn inbox(&self) -> &[Mutex<Vec<InboxBlock>>] {
        self.inbox
            .get_or_init(|| (0..self.size).map(|_| Mutex::new(Vec::new())).collect())
    }

    /// Keeps `ring` (this entry's ring) alive while a call is under way at this entry: for a
    /// member that drops its last handle of the communicator after leaving a call the others
    /// have not all left (the root of a broadcast that does not wait). Without it, members
    /// that join later would find no ring in the node table, make a new one, and wait there
    /// for the root forever.
    pub(crate) fn pin_while_in_use(&self, ring: &Arc<CollRing>) {
        let in_use =
            self.departed.load(Ordering::Acquire) > 0 || self.arrived.load(Ordering::Acquire) > 0;
        if in_use {
            // A reset that ran since leaves the pin to the next reset of this entry.
            let mut keep = lock(&self.keep);
            if keep.is_none() {
                *keep = Some(Arc::clone(ring));
                self.pinned.store(true, Ordering::Release);
            }
        }
    }

    /// Makes the entry ready for the call `next` (called by the last member to leave, when
    /// nobody else touches it); returns the ring if this entry kept it alive (the caller
    /// drops it when done with the entry).
    pub(crate) fn reset(&self, next: u32) -> Option<Arc<CollRing>> {
        self.arrived.store(0, Ordering::Relaxed);
        self.departed.store(0, Ordering::Relaxed);
        self.stage.store(0, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
        self.readers.store(0, Ordering::Relaxed);
        self.next_block.store(0, Ordering::Relaxed);
        self.blocks_done.store(0, Ordering::Relaxed);
        self.nblocks.store(0, Ordering::Relaxed);
        self.acc_ptr.store(0, Ordering::Relaxed);
        let acc = lock(&self.acc).take();
        let result = lock(&self.result).take();
        let shared = lock(&self.shared).take();
        let bundles = std::mem::take(&mut *lock(&self.bundles));
        // Copies of small all-to-alls, and blocks left in inboxes by a call that ended early
        // (the job aborted): nothing of them may reach the next call.
        if self.uses_slots.swap(false, Ordering::Relaxed) {
            if let Some(slots) = self.slots.get() {
                for slot in slots.iter() {
                    drop(lock(&slot.copy).take());
                }
            }
            if let Some(inbox) = self.inbox.get() {
                for blocks in inbox.iter() {
                    lock(blocks).clear();
                }
            }
        }
        drop((acc, result, shared, bundles));
        let kept = if self.pinned.load(Ordering::Acquire) {
            let mut keep = lock(&self.keep);
            self.pinned.store(false, Ordering::Relaxed);
            keep.take()
        } else {
            None
        };
        // Publishes the resets above to the next call's members (they load `turn` with
        // Acquire before touching anything else).
        self.turn.store(next, Ordering::Release);
        kept
    }
}

impl Describe for Rendezvous {
    fn describe(&self) -> String {
        format!(
            "the other ranks of its node ({} of {} arrived, stage {}, {} done)",
            self.arrived.load(Ordering::Relaxed),
            self.size,
            self.stage.load(Ordering::Relaxed),
            self.done.load(Ordering::Relaxed),
        )
    }
}

pub(crate) use spillway_transport::lock;
