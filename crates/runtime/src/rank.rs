//! The rank-local context.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use spillway_transport::{Envelope, Layout, Payload};

use crate::error::Error;
use crate::job::{Job, RankStats};
use crate::mailbox::{MessageInfo, Msg, Pattern, RecvId};
use crate::memory::NodeMem;

/// What a blocked rank is doing, for deadlock reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitKind {
    /// A point-to-point receive.
    Recv,
    /// A blocking probe.
    Probe,
    /// Waiting on a request.
    Wait,
    /// Inside the named collective.
    Collective(&'static str),
    /// Entering a critical section.
    Critical,
}

/// One rank's view of the job, handed to the SPMD function.
///
/// A `Rank` lives on its rank's thread and is neither `Send` nor `Sync`; rank-local state built
/// on it may use `Rc` and `RefCell`.
pub struct Rank {
    job: Arc<Job>,
    rank: u32,
    node: u32,
    local: u32,
    stats: Cell<RankStats>,
    _not_send: PhantomData<*const ()>,
}

impl Rank {
    pub(crate) fn new(job: Arc<Job>, rank: u32) -> Rank {
        let node = job.layout.node_of(rank);
        let local = job.layout.local_rank(rank);
        Rank {
            job,
            rank,
            node,
            local,
            stats: Cell::new(RankStats::default()),
            _not_send: PhantomData,
        }
    }

    /// This rank's global number, `0..size()`.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Total number of ranks.
    pub fn size(&self) -> u32 {
        self.job.layout.ranks()
    }

    /// This rank's node.
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Number of nodes.
    pub fn nodes(&self) -> u32 {
        self.job.layout.nodes()
    }

    /// Index of this rank among the ranks of its node.
    pub fn local_rank(&self) -> u32 {
        self.local
    }

    /// Number of ranks on this rank's node.
    pub fn local_size(&self) -> u32 {
        self.job.layout.local_size(self.node)
    }

    /// Lowest global rank on this rank's node (BDMPI's `rrank`).
    pub fn node_first_rank(&self) -> u32 {
        self.job.layout.first_rank(self.node)
    }

    /// The placement of all ranks on nodes.
    pub fn layout(&self) -> &Layout {
        &self.job.layout
    }

    /// The cost of a message between nodes, when known (measured at start-up by the MPI
    /// backend, or set with [`Config::link_model`](crate::Config::link_model)); collectives
    /// choose their algorithm between nodes from it.
    pub fn link_model(&self) -> Option<spillway_transport::LinkModel> {
        self.job.link_model
    }

    /// The job's private spill directory (mode 0700, removed when the job ends).
    pub fn spill_dir(&self) -> &std::path::Path {
        self.job.node_mem(self.rank).0.dir()
    }

    /// Memory counters of this rank's node so far.
    pub fn node_memory_stats(&self) -> crate::MemoryStats {
        self.job.node_mem(self.rank).0.stats()
    }

    /// Whether the job is being aborted.
    pub fn aborted(&self) -> bool {
        self.job.aborted()
    }

    /// Counters of this rank so far.
    pub fn stats(&self) -> RankStats {
        self.stats.get()
    }

    fn update_stats(&self, f: impl FnOnce(&mut RankStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// Buffered send of raw bytes to global rank `dest`; never blocks.
    ///
    /// # Errors
    /// [`Error::InvalidRank`] for a destination outside the job, [`Error::Aborted`] when the
    /// job is ending.
    pub fn post(&self, dest: u32, context: u64, tag: i32, payload: Payload) -> Result<(), Error> {
        if dest >= self.size() {
            return Err(Error::InvalidRank {
                rank: dest as usize,
                size: self.size() as usize,
            });
        }
        if self.job.aborted() {
            return Err(Error::Aborted);
        }
        let bytes = payload.len() as u64;
        self.update_stats(|s| {
            s.messages_sent += 1;
            s.bytes_sent += bytes;
        });
        let env = Envelope {
            context,
            source: self.rank,
            tag,
            payload,
        };
        self.job.send(dest, env)
    }

    fn open(&self, msg: Msg) -> Result<Envelope, Error> {
        self.job.received(self.rank, &msg);
        Ok(msg.into_envelope()?)
    }

    pub(crate) fn node_memory(&self) -> (&std::sync::Arc<NodeMem>, usize) {
        self.job.node_mem(self.rank)
    }

    /// Posts a receive; it matches messages in MPI order (see the mailbox rules).
    pub fn post_recv(&self, pattern: Pattern) -> RecvId {
        self.job.post_recv(self.rank, pattern)
    }

    /// Takes the message of a posted receive if it has arrived.
    ///
    /// # Errors
    /// An I/O error reading back a message that was spilled to disk.
    pub fn test_recv(&self, id: RecvId) -> Result<Option<Envelope>, Error> {
        match self.job.test_recv(self.rank, id) {
            None => Ok(None),
            Some(msg) => self.open(msg).map(Some),
        }
    }

    /// Blocks (giving up the node slot) until the posted receive completes.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends while waiting.
    pub fn wait_recv(&self, id: RecvId, kind: WaitKind) -> Result<Envelope, Error> {
        let msg = self.timed(|| self.job.wait_recv(self.rank, id, kind))?;
        self.open(msg)
    }

    /// Withdraws a posted receive; a message it already matched is kept for later receives.
    pub fn cancel_recv(&self, id: RecvId) {
        self.job.cancel_recv(self.rank, id)
    }

    /// Receives the first message matching `pattern`, blocking until there is one.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends while waiting.
    pub fn recv(&self, pattern: Pattern, kind: WaitKind) -> Result<Envelope, Error> {
        let id = self.post_recv(pattern);
        self.wait_recv(id, kind)
    }

    /// Reports a queued message matching `pattern`, without receiving it.
    pub fn iprobe(&self, pattern: &Pattern) -> Option<MessageInfo> {
        self.job.iprobe(self.rank, pattern)
    }

    /// Like [`iprobe`](Self::iprobe) but blocks until a matching message is queued.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends while waiting.
    pub fn probe(&self, pattern: Pattern, kind: WaitKind) -> Result<MessageInfo, Error> {
        self.timed(|| self.job.probe(self.rank, pattern, kind))
    }

    /// Blocks (giving up the node slot) until every pattern matches a queued message, without
    /// receiving them. Collectives use it so that a rank takes its incoming data only when all
    /// of it is there: data in flight stays in the mailboxes, where it can spill, instead of
    /// the heap of a blocked rank. The patterns should be disjoint.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends while waiting.
    pub fn wait_present(&self, patterns: &[Pattern], kind: WaitKind) -> Result<(), Error> {
        self.timed(|| self.job.wait_present(self.rank, patterns, kind))
    }

    /// Blocks (giving up the node slot) until some pattern matches a queued message, without
    /// receiving it; returns the index of the first pattern that does. Collectives use it when
    /// the first message of an operation may come by one of several algorithms.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends while waiting.
    pub fn wait_any(&self, patterns: &[Pattern], kind: WaitKind) -> Result<usize, Error> {
        self.timed(|| self.job.wait_any(self.rank, patterns, kind))
    }

    /// Enters the node's critical section: at most one rank per node holds it (BDMPI's
    /// `enter_critical`, used to serialise disk I/O). Waiting for it gives up the node slot.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends while waiting.
    pub fn enter_critical(&self) -> Result<CriticalGuard<'_>, Error> {
        self.timed(|| self.job.enter_critical(self.rank))?;
        Ok(CriticalGuard { rank: self })
    }

    fn timed<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        let start = Instant::now();
        let out = f();
        let waited = start.elapsed();
        if waited.as_micros() > 0 {
            self.update_stats(|s| {
                s.blocks += 1;
                s.blocked += waited;
            });
        }
        out
    }
}

/// Holds the node's critical section; leaving it (dropping the guard) lets the next rank in.
pub struct CriticalGuard<'a> {
    rank: &'a Rank,
}

impl Drop for CriticalGuard<'_> {
    fn drop(&mut self) {
        self.rank.job.exit_critical(self.rank.rank);
    }
}

impl std::fmt::Debug for Rank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rank")
            .field("rank", &self.rank)
            .field("size", &self.size())
            .field("node", &self.node)
            .field("local_rank", &self.local)
            .finish()
    }
}
