//! What the ranks of a node publish to each other at a sync ([`Published`]: requests between
//! node ranks, area tables, segments for other nodes) and the node object that holds it
//! ([`NodeState`]), shared by the ranks of one context on one node.

use std::panic::Location;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use spillway_runtime::Describe;
use spillway_transport::{lock, AlignedBuf};

use super::barrier::{Line, NodeBarrier};

/// A put between ranks of one node, as published by its source.
#[derive(Clone, Copy, Debug)]
pub(super) struct NodePut {
    /// Address of the source bytes (in a registered area or the source's put buffer).
    pub(super) src: usize,
    /// Whether the source is a registered area (then it counts as read memory).
    pub(super) src_is_area: bool,
    pub(super) dst_slot: u32,
    pub(super) dst_off: usize,
    pub(super) len: usize,
    pub(super) loc: &'static Location<'static>,
}

/// A get between ranks of one node, as published by the getting rank.
#[derive(Clone, Copy, Debug)]
pub(super) struct NodeGet {
    pub(super) src_slot: u32,
    pub(super) src_off: usize,
    /// Address of the destination bytes (in the getter's area, bounds checked at the get).
    pub(super) dst: usize,
    pub(super) len: usize,
    pub(super) loc: &'static Location<'static>,
}

/// What a rank publishes to its node at a sync (kept by its rank between syncs, to be
/// filled again without allocating).
#[derive(Debug, Default)]
pub(crate) struct Published {
    pub(super) superstep: u64,
    /// Per global slot index: (address, bytes) of the area, `(0, 0)` when not usable.
    pub(super) globals: Vec<(usize, usize)>,
    /// Puts to each node-local rank.
    pub(super) puts_to: Vec<Vec<NodePut>>,
    /// Gets from each node-local rank.
    pub(super) gets_from: Vec<Vec<NodeGet>>,
    /// Requests to ranks of other nodes (round A segments).
    pub(super) remote_out: Vec<Out>,
}

/// The node-pair messages a rank received and the get replies it made, shared with its node.
#[derive(Default)]
pub(super) struct Exchange {
    /// Round A messages received: (sending rank, message).
    pub(super) inbox_a: Vec<(usize, Arc<AlignedBuf>)>,
    /// Replies to the gets of other nodes' ranks (round B segments).
    pub(super) replies: Vec<Out>,
    /// Round B messages received: (sending rank, message).
    pub(super) inbox_b: Vec<(usize, Arc<AlignedBuf>)>,
}

/// The node object of a BSP context: where its ranks on this node publish their requests.
pub(crate) struct NodeState {
    /// What each member published in the current sync (null outside it); see [`get`].
    ///
    /// [`get`]: NodeState::get
    members: Box<[Line<AtomicPtr<Published>>]>,
    pub(super) exchanges: Box<[Mutex<Exchange>]>,
    /// Arrivals of the members in each remote round, counted over the whole context: the
    /// member whose arrival completes a multiple of the member count arrives last.
    pub(super) arrivals: [AtomicU64; 2],
    /// The node barrier of the syncs.
    pub(super) barrier: Arc<NodeBarrier>,
    /// The same, as what a rank waiting in it waits for.
    pub(super) waiting_for: Arc<dyn Describe>,
}

impl NodeState {
    pub(crate) fn new(local: usize) -> NodeState {
        let barrier = NodeBarrier::new(local);
        NodeState {
            waiting_for: barrier.clone(),
            barrier,
            members: (0..local)
                .map(|_| Line(AtomicPtr::new(std::ptr::null_mut())))
                .collect(),
            exchanges: (0..local).map(|_| Mutex::default()).collect(),
            arrivals: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Counts this member's arrival in remote round `round`; true for the last of the node.
    /// Every member arrives once per round of a sync, and the node barriers keep the syncs
    /// apart, so the multiples of the member count separate the syncs.
    pub(super) fn arrive(&self, round: usize) -> bool {
        let n = self.members.len() as u64;
        (self.arrivals[round].fetch_add(1, Ordering::AcqRel) + 1).is_multiple_of(n)
    }

    /// Runs `f` on node member `i`'s exchange.
    pub(super) fn exchange<R>(&self, i: usize, f: impl FnOnce(&mut Exchange) -> R) -> R {
        f(&mut lock(&self.exchanges[i]))
    }

    /// What member `i` published in this sync.
    ///
    /// # Safety
    /// Member `i` published in the current sync and does not take its publication back
    /// while the returned reference is alive: a member takes it back only after the sync's
    /// last node barrier, so a reference taken after the barrier that follows the
    /// publication and dropped before the last barrier is safe.
    ///
    /// # Panics
    /// When member `i` has not published.
    pub(super) unsafe fn get(&self, i: usize) -> &Published {
        let p = self.members[i].0.load(Ordering::Acquire);
        assert!(
            !p.is_null(),
            "every node member published before the barrier"
        );
        // SAFETY: `p` came from `Box::into_raw` in `publish` and is freed only by `take`,
        // which the caller guarantees does not run while the reference lives; the owner
        // does not write the publication after handing it over (Release/Acquire above).
        unsafe { &*p }
    }

    /// Publishes member `i`'s requests for the current sync.
    pub(super) fn publish(&self, i: usize, p: Box<Published>) {
        let old = self.members[i].0.swap(Box::into_raw(p), Ordering::AcqRel);
        // SAFETY: a non-null pointer in the slot came from `Box::into_raw` and nobody else
        // can reach it once swapped out.
        drop((!old.is_null()).then(|| unsafe { Box::from_raw(old) }));
    }

    /// Takes member `i`'s publication back (when nobody reads it any more: see [`get`]).
    ///
    /// [`get`]: NodeState::get
    pub(super) fn take(&self, i: usize) -> Option<Box<Published>> {
        let p = self.members[i]
            .0
            .swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: as in `publish`.
        (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
    }
}

impl Drop for NodeState {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            drop(self.take(i));
        }
    }
}

/// A segment this rank sends to a rank of another node (requests in round A, get replies in
/// round B).
#[derive(Debug)]
pub(super) struct Out {
    pub(super) dst: usize,
    /// The segment, or nothing when it travels on its own.
    pub(super) bytes: AlignedBuf,
    /// Whether it travels on its own.
    pub(super) direct: bool,
    /// Whether it holds gets (round A).
    pub(super) asks: bool,
}
