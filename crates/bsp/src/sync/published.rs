//! What the ranks of a node publish to each other at a sync ([`Published`]: requests between
//! node ranks, area tables, segments for other nodes) and the node object that holds it
//! ([`NodeState`]), shared by the ranks of one context on one node.

use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use spillway_transport::{lock, AlignedBuf};

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

/// What a rank publishes to its node at a sync.
#[derive(Debug, Default)]
pub(super) struct Published {
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
    pub(super) members: Box<[Mutex<Option<Arc<Published>>>]>,
    pub(super) exchanges: Box<[Mutex<Exchange>]>,
    /// Arrivals of the members in each remote round, counted over the whole context: the
    /// member whose arrival completes a multiple of the member count arrives last.
    pub(super) arrivals: [AtomicU64; 2],
}

impl NodeState {
    pub(crate) fn new(local: usize) -> NodeState {
        NodeState {
            members: (0..local).map(|_| Mutex::new(None)).collect(),
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

    pub(super) fn get(&self, i: usize) -> Arc<Published> {
        lock(&self.members[i])
            .clone()
            .expect("every node member published before the barrier")
    }

    pub(super) fn set(&self, i: usize, p: Option<Arc<Published>>) {
        *lock(&self.members[i]) = p;
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
