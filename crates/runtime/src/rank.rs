//! The rank-local context.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use spillway_transport::{Envelope, Layout, Payload, SendGuard};

use crate::error::{Error, JobError};
use crate::job::{Job, RankStats};
use crate::mailbox::{MessageInfo, Msg, Pattern, RecvId};
use crate::memory::{NodeBuf, NodeMem};
use crate::node::{NodeTable, WaitQueue};
use crate::sched::{Describe, WaitKind};

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
    /// Values kept per rank by the layers above ([`Rank::rank_local`]).
    locals: std::cell::RefCell<std::collections::HashMap<u64, std::rc::Rc<dyn std::any::Any>>>,
    _not_send: PhantomData<*const ()>,
}

/// Receive buffers larger than this may be written directly by the MPI engine (smaller
/// messages travel inside their header), and larger sends may be read in place.
const DIRECT_MIN: usize = 8 << 10;

/// How long a rank that starts a direct exchange waits for its message testing nothing else,
/// before it waits as for any message (driving the engine, then blocking).
const EXCHANGE_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// What a rank waits for in a direct exchange (for deadlock reports).
struct AwaitedFrom(u32);

impl Describe for AwaitedFrom {
    fn describe(&self) -> String {
        format!("a message from rank {} (another process)", self.0)
    }
}

/// Whether the transport is done with the bytes of a [`Rank::send_while`].
#[derive(Default)]
struct SendDone {
    flag: std::sync::atomic::AtomicBool,
    queue: WaitQueue,
}

/// Waits, also when dropped (unwinding), until the transport has released a send's bytes.
struct Settle<'r> {
    rank: &'r Rank,
    done: Arc<SendDone>,
}

impl Settle<'_> {
    fn is_done(&self) -> bool {
        self.done.flag.load(std::sync::atomic::Ordering::Acquire)
    }

    fn wait(self) {
        drop(self)
    }
}

impl Drop for Settle<'_> {
    fn drop(&mut self) {
        let waited = self.rank.job.wait_until(
            self.rank.rank,
            &self.done.queue,
            WaitKind::Wait,
            None,
            &mut || self.is_done(),
        );
        if waited.is_err() {
            // The job is ending; the engine completes or abandons every transfer on its way
            // out, and the bytes must stay untouched until it has.
            while !self.is_done() {
                if let Some(remote) = self.rank.job.remote.as_deref() {
                    remote.drive();
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }
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
            locals: Default::default(),
            _not_send: PhantomData,
        }
    }

    /// The value this rank keeps under `key` until the job ends, made by `init` at the first
    /// call: per-rank state of the layers above (e.g. the sequence numbers that every handle
    /// of one communicator must share).
    ///
    /// # Panics
    /// If `key` holds a value of another type (keys must be unique per purpose), or if `init`
    /// itself calls `rank_local`.
    pub fn rank_local<T: std::any::Any>(
        &self,
        key: u64,
        init: impl FnOnce() -> T,
    ) -> std::rc::Rc<T> {
        let value = self
            .locals
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| std::rc::Rc::new(init()))
            .clone();
        value.downcast::<T>().unwrap_or_else(|_| {
            panic!(
                "rank-local key {key:#x} holds a value of another type than {}",
                std::any::type_name::<T>()
            )
        })
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

    /// The directory where the job keeps its spill files (which have no names: nothing is
    /// left there when the job ends, however it ends).
    pub fn spill_dir(&self) -> &std::path::Path {
        self.job.node_mem(self.rank).0.dir()
    }

    /// The node's memory budget in bytes, if the job has one.
    pub fn mem_budget(&self) -> Option<u64> {
        self.job.node_mem(self.rank).0.budget()
    }

    /// The most ranks of this rank's node that execute at once (the node's slots).
    pub fn running_slots(&self) -> u32 {
        self.job.node_of(self.rank).0.sched.slots()
    }

    /// Memory counters of this rank's node so far.
    pub fn node_memory_stats(&self) -> crate::MemoryStats {
        self.job.node_mem(self.rank).0.stats()
    }

    /// Whether the job is being aborted.
    pub fn aborted(&self) -> bool {
        self.job.aborted()
    }

    /// Why this rank's blocking calls fail at the moment: the job is being aborted
    /// ([`Error::Aborted`]), or processes were lost and this rank has not acknowledged it yet
    /// ([`Error::ProcessLost`]); `None` while they work.
    pub fn interrupted(&self) -> Option<Error> {
        if self.job.aborted() {
            return Some(Error::Aborted);
        }
        self.job.loss_unacknowledged(self.rank)
    }

    /// Whether processes of this job can be lost while the others go on: the MPI backend over
    /// more than one process, built against an MPI with ULFM. Layers that recover from lost
    /// ranks keep what a recovery from a real loss needs only then.
    pub fn survives_lost_processes(&self) -> bool {
        #[cfg(feature = "mpi")]
        {
            self.job.remote.is_some() && spillway_transport::mpi::survives_lost_processes()
        }
        #[cfg(not(feature = "mpi"))]
        {
            false
        }
    }

    /// The processes lost from the job so far, once the ranks were told (MPI with ULFM: see
    /// [`Error::ProcessLost`]); `None` while none was lost.
    pub fn lost_processes(&self) -> Option<crate::LostProcesses> {
        self.job.lost_processes()
    }

    /// Acknowledges the loss this rank was told of ([`Error::ProcessLost`]): its blocking
    /// calls work again (with ranks that were not lost; a message from or to a lost rank is
    /// never delivered). Returns the processes lost so far. A rank that goes on must stop
    /// using communication that involves lost ranks (e.g. collectives of communicators that
    /// include them).
    pub fn acknowledge_loss(&self) -> Option<crate::LostProcesses> {
        self.job.acknowledge_loss(self.rank)
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

    /// Sends `bytes` to global rank `dest` and runs `meanwhile` while they travel; returns
    /// `meanwhile`'s result once it has returned and the transport no longer reads `bytes`.
    ///
    /// A large message to another process is read where it is, without a copy (the MPI
    /// engine sends it straight from `bytes`); anything else is copied as by [`post`]. Use it
    /// where a rank sends part of its own data and then receives (`meanwhile` posts and waits
    /// for the receive), as in exchanges between pairs of nodes: with a blocking send both
    /// partners would wait for each other.
    ///
    /// # Errors
    /// As [`post`](Self::post); `meanwhile` is not run then.
    pub fn send_while<R>(
        &self,
        dest: u32,
        context: u64,
        tag: i32,
        bytes: &[u8],
        meanwhile: impl FnOnce() -> R,
    ) -> Result<R, Error> {
        if !self.job.is_local(dest) && bytes.len() > DIRECT_MIN && self.job.remote.is_some() {
            let done = Arc::new(SendDone::default());
            let guard = {
                let (job, done) = (Arc::clone(&self.job), Arc::clone(&done));
                let rank = self.rank;
                SendGuard::new(move || {
                    done.flag.store(true, std::sync::atomic::Ordering::Release);
                    job.wake_all(rank, &done.queue);
                })
            };
            // SAFETY: `bytes` is borrowed for this whole call, and the call does not return
            // (not even by unwinding out of `meanwhile`: `Settle` waits in its drop) before
            // the guard's callback has run, i.e. before the transport dropped the payload.
            let payload = unsafe { Payload::borrowed(bytes, guard) };
            let settle = Settle { rank: self, done };
            self.post(dest, context, tag, payload)?;
            let out = meanwhile();
            settle.wait();
            return Ok(out);
        }
        self.post(dest, context, tag, Payload::copy_of(bytes))?;
        Ok(meanwhile())
    }

    /// Whether [`exchange`](Self::exchange) can send `len` bytes to global rank `to` and
    /// receive as many from global rank `from`: both are held by other processes, the engine
    /// lets waiting ranks make progress themselves, and `len` is at most
    /// [`EXCHANGE_MAX`](spillway_transport::EXCHANGE_MAX). The answer is the same on every
    /// process of the job for the same arguments.
    pub fn can_exchange(&self, to: u32, from: u32, len: usize) -> bool {
        len <= spillway_transport::EXCHANGE_MAX
            && to < self.size()
            && from < self.size()
            && !self.job.is_local(to)
            && !self.job.is_local(from)
            && self.job.remote.as_deref().is_some_and(|r| r.exchanges())
    }

    /// Sends `out` to global rank `to` and receives the message with the same `context` and
    /// `tag` from global rank `from` into `into`, as a direct exchange of the engine (a receive
    /// posted before the message arrives, no mailbox): the latency-bound step of a collective
    /// between processes. Only where [`can_exchange`](Self::can_exchange) says so, for
    /// messages that the receiving rank takes the same way (`to` calls `exchange` with this
    /// rank as `from`). Returns the number of bytes received (at most `into.len()`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the exchange is not possible or the message received is
    /// longer than `into`; [`Error::Aborted`] or [`Error::ProcessLost`] when the job ends or
    /// loses a process while waiting, or (`ProcessLost`) when it lost one that this rank has
    /// not acknowledged yet (as every blocking call).
    #[allow(clippy::too_many_arguments)]
    pub fn exchange(
        &self,
        to: u32,
        from: u32,
        context: u64,
        tag: i32,
        out: &[u8],
        into: &mut [u8],
        kind: WaitKind,
    ) -> Result<usize, Error> {
        if !self.can_exchange(to, from, out.len().max(into.len())) {
            return Err(Error::InvalidArgument(
                "a direct exchange needs ranks of other processes and small messages",
            ));
        }
        if self.job.aborted() {
            return Err(Error::Aborted);
        }
        // Like every blocking call: a loss this rank was told of and has not acknowledged
        // fails it, even when the expected message is already here (the exchange below may
        // complete without waiting).
        if let Some(e) = self.job.loss_unacknowledged(self.rank) {
            return Err(e);
        }
        let remote = self.job.remote.as_deref().expect("checked by can_exchange");
        let done = Arc::new(SendDone::default());
        let ex = {
            let (job, done) = (Arc::clone(&self.job), Arc::clone(&done));
            let rank = self.rank;
            Arc::new(spillway_transport::Exchange::new(
                self.job.layout.node_of(to),
                self.job.layout.node_of(from),
                context,
                tag,
                out,
                into.len(),
                Box::new(move || {
                    done.flag.store(true, std::sync::atomic::Ordering::Release);
                    job.wake_all(rank, &done.queue);
                }),
            ))
        };
        self.update_stats(|s| {
            s.messages_sent += 1;
            s.bytes_sent += out.len() as u64;
        });
        if !remote.exchange_now(&ex, EXCHANGE_SPIN) {
            let describe: Arc<dyn Describe> = Arc::new(AwaitedFrom(from));
            let waited =
                self.job
                    .wait_until(self.rank, &done.queue, kind, Some(&describe), &mut || {
                        ex.is_done()
                    });
            if let Err(e) = waited {
                ex.abandon();
                return Err(e);
            }
        }
        let got = ex.take();
        if got.len() > into.len() {
            return Err(Error::InvalidArgument(
                "a direct exchange received a longer message than expected",
            ));
        }
        into[..got.len()].copy_from_slice(&got);
        Ok(got.len())
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

    /// Receives the first message matching `pattern` into `buf`, blocking until there is
    /// one: one copy from the message (or one read from its spill file) into the buffer.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the message is longer than `buf` (the message is consumed, as
    /// in MPI); [`Error::Aborted`] when the job ends while waiting; an I/O error reading a
    /// spilled message.
    pub fn recv_into(
        &self,
        pattern: Pattern,
        kind: WaitKind,
        buf: &mut [u8],
    ) -> Result<MessageInfo, Error> {
        // A large message from another process may go straight into `buf` (the engine
        // claims this receive when its header arrives), unless `buf` is storage-backed memory
        // that may be written back while this rank is blocked.
        let direct =
            self.job.remote.is_some() && buf.len() > DIRECT_MIN && !self.is_storage_backed(buf);
        let id = if direct {
            self.job.post_recv_into(self.rank, pattern, buf)
        } else {
            self.post_recv(pattern)
        };
        let msg = match self.timed(|| self.job.wait_recv(self.rank, id, kind)) {
            Ok(msg) => msg,
            Err(e) => {
                if direct {
                    // Nothing may write into `buf` once this call returns.
                    self.job.settle_recv(self.rank, id);
                }
                return Err(e);
            }
        };
        self.job.received(self.rank, &msg);
        let info = msg.info();
        if msg.len > buf.len() {
            return Err(Error::Truncated {
                message_bytes: msg.len,
                buffer_bytes: buf.len(),
            });
        }
        msg.read_into(buf)?;
        Ok(info)
    }

    /// Blocks (giving up the node slot) until every posted receive of `ids` has its message
    /// (they stay in the mailbox, where they can spill, until taken with
    /// [`wait_recv`](Self::wait_recv) or [`test_recv`](Self::test_recv)). Collectives use it so
    /// that a rank takes its incoming data only when all of it is there.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends while waiting.
    pub fn wait_recv_all(&self, ids: &[RecvId], kind: WaitKind) -> Result<(), Error> {
        self.timed(|| self.job.wait_group(self.rank, ids, false, kind))
            .map(drop)
    }

    /// Blocks (giving up the node slot) until one of the posted receives `ids` has its
    /// message; returns the index of one that has. Collectives use it when the first message
    /// of an operation may come by one of several algorithms.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends while waiting.
    pub fn wait_recv_any(&self, ids: &[RecvId], kind: WaitKind) -> Result<usize, Error> {
        self.timed(|| self.job.wait_group(self.rank, ids, true, kind))
    }

    /// Objects shared by the ranks of this rank's node (see [`NodeTable`]).
    pub fn node_table(&self) -> &NodeTable {
        &self.job.node_of(self.rank).0.table
    }

    /// Blocks until `poll` returns true, where another rank of the node makes it true and then
    /// calls [`wake_all`](Self::wake_all) on `queue` (the protocol of node-level
    /// collectives).
    ///
    /// # Semantics
    /// `poll` is called repeatedly and may do useful work (e.g. take a share of a reduction)
    /// before it reports completion. While no other rank of the node waits for a slot, the
    /// rank spins on `poll` for a few microseconds before it gives up its slot, so a wait that
    /// a running rank satisfies at once costs no hand-off. `describe` says, in a deadlock
    /// report, what the rank waits for.
    ///
    /// # Errors
    /// [`Error::Aborted`] when the job ends while waiting.
    pub fn wait_until(
        &self,
        queue: &WaitQueue,
        kind: WaitKind,
        describe: Option<&std::sync::Arc<dyn Describe>>,
        mut poll: impl FnMut() -> bool,
    ) -> Result<(), Error> {
        self.timed(|| {
            self.job
                .wait_until(self.rank, queue, kind, describe, &mut poll)
        })
    }

    /// Wakes the ranks of this node waiting on `queue` (they re-check their condition).
    pub fn wake_all(&self, queue: &WaitQueue) {
        self.job.wake_all(self.rank, queue)
    }

    /// A buffer of `len` bytes owned by this rank's node, counted against its memory budget
    /// (in a spill file when it is large and the budget is full); for collective buffers that
    /// outlive the rank's part in the operation.
    ///
    /// # Errors
    /// An I/O error when a spill file cannot be made.
    pub fn node_buffer(&self, len: usize) -> Result<NodeBuf, Error> {
        let (mem, _) = self.job.node_mem(self.rank);
        Ok(mem.buffer(len)?)
    }

    /// Zero-filled working memory of `len` elements for one stretch of computation between
    /// blocking calls ([`Scratch`](crate::Scratch)): anonymous memory the node's ranks pass
    /// on to each other, never written to storage, counted against the budget.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `len` elements do not fit in the address space;
    /// [`Error::Io`] when the memory cannot be mapped.
    pub fn scratch<T: bytemuck::Pod>(&self, len: usize) -> Result<crate::Scratch<T>, Error> {
        let (mem, _) = self.job.node_mem(self.rank);
        crate::Scratch::new(mem, len)
    }

    /// Tells the runtime that this rank has read `bytes`, part of another rank's buffer, in
    /// place (inside a collective). Pages of a storage-backed allocation whose owner holds it
    /// unloaded are dropped again, so that reading other ranks' data does not keep it
    /// resident beyond the memory budget; anything else is left alone.
    pub fn release_read(&self, bytes: &[u8]) {
        let (mem, _) = self.job.node_mem(self.rank);
        mem.release_read(bytes.as_ptr() as usize, bytes.len());
    }

    /// Whether `bytes` start in a storage-backed allocation ([`SbVec`](crate::SbVec)) of this
    /// node: such memory may be written back and dropped while its owner is blocked, so a
    /// collective writes into it only through its owner.
    pub fn is_storage_backed(&self, bytes: &[u8]) -> bool {
        let (mem, _) = self.job.node_mem(self.rank);
        mem.is_storage_backed(bytes.as_ptr() as usize)
    }

    /// Ends the job with `message` as this rank's failure, as if the rank had returned an
    /// error: every other rank's blocking calls return [`Error::Aborted`].
    pub fn fail_job(&self, message: String) {
        self.job.fail(JobError::RankFailed {
            rank: self.rank,
            error: message.into(),
        })
    }

    /// Runs `hook` on this rank's thread every time the rank gives up its slot in a blocking
    /// call, after the runtime has released the rank's own storage-backed memory and before
    /// its worker runs another rank; replaces an earlier hook. A rank that stands for memory
    /// the runtime does not manage (the address space of another process, say) releases it
    /// here, so that the rank run next in its place finds the room.
    ///
    /// # Semantics
    /// The hook must not call the runtime (it runs inside a blocking call); it may take as
    /// long as releasing the memory takes, during which the worker waits.
    pub fn on_block(&self, hook: impl FnMut() + Send + 'static) {
        let (node, local) = self.job.node_of(self.rank);
        *spillway_transport::lock(&node.block_hooks[local]) = Some(Box::new(hook));
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
