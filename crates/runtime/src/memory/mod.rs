//! Storage-backed memory (SBMA) under a per-node memory budget.
//!
//! # Design
//!
//! A storage-backed allocation ([`SbVec`]) is a `MAP_SHARED` mapping of its own nameless file
//! in the spill directory (see [`spill`]: nothing outlives the process). Residency is managed
//! without signal handlers:
//!
//! * **unload**: `sync_file_range` starts writing modified pages to the file (asynchronously:
//!   the write-back overlaps with other ranks' work; the file's blocks are allocated up front so
//!   it cannot run out of space), `madvise(MADV_DONTNEED)` drops the pages from the process.
//!   The region's pages then leave the page cache too (`posix_fadvise(POSIX_FADV_DONTNEED)`):
//!   clean ones at once, those being written back two blocking calls later on the node. Left
//!   to the kernel, the page cache beyond the budget is reclaimed least recently used first,
//!   which in a rotation of ranks drops the pages needed soonest, and the ranks the budget
//!   keeps loaded lose their pages to that reclaim too: K-means with 4x the budget read 1.4-1.5x
//!   the least it must per iteration in a memory cgroup, 1.01-1.08x with the drop.
//!   `SPILLWAY_KEEP_PAGE_CACHE=1` leaves it to the kernel; `SPILLWAY_SYNC_UNLOAD=1` waits for
//!   the write-back (`msync`) and drops everything at once;
//! * **prefetch**: when a worker takes up a rank, the unloaded allocations of the rank it will
//!   resume next are read into the page cache in the background (`MADV_WILLNEED`; aggressive-read
//!   policies only; `SPILLWAY_NO_PREFETCH=1` turns it off) — those that were loaded when that
//!   rank last blocked (its working set), not those it left untouched since an earlier block,
//!   and the messages waiting for it in spill files (`POSIX_FADV_WILLNEED`);
//! * **load**: the pages are read back (aggressive: the whole allocation at its first access
//!   after a block, with one `MADV_POPULATE_READ`; lazy: page by page as the rank touches them).
//!
//! Unloading never invalidates a slice: a page that is touched again is simply read back. So
//! the policies below decide *when* memory is released and can never corrupt data.
//!
//! A node without a budget never releases memory, so there its allocations are private
//! anonymous mappings instead (no spill file), with transparent huge pages requested for
//! those of 2 MiB and more: random access to large arrays (PageRank's gathers, graph
//! transposition) then avoids a page-table walk per 4 KiB page and the file system's page
//! faults. Unloading such an allocation does nothing.
//!
//! # Policies (Iverson, ch. 6)
//!
//! * [`Policy::Araw`] — aggressive read, aggressive write: a rank unloads all its allocations
//!   whenever it blocks; each allocation is loaded whole at its first access afterwards.
//! * [`Policy::Arlw`] — aggressive read, lazy write: allocations stay resident across blocking
//!   calls until a load would exceed the node budget; then blocked ranks' allocations are
//!   unloaded, the rank that blocked most recently first (when the ranks take turns, as in
//!   a collective, it is the one needed last; evicting the rank with the most resident memory
//!   instead read 8-12% more per iteration of K-means 4x the budget).
//! * [`Policy::Lrlw`] — lazy read, lazy write: as ARLW, but a load reads only the pages the rank
//!   touches.
//!
//! # Accounting
//!
//! The node tracks the bytes of loaded allocations per rank, and the bytes of messages and
//! collective buffers it holds in memory. A load that cannot be made to fit (every resident
//! byte belongs to running ranks) proceeds and is counted as an overcommit. Pages of a
//! blocked rank's allocation that another rank reads inside a collective (zero-copy) are
//! counted as I/O when the owner next unloads.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use spillway_transport::AlignedBuf;

/// When storage-backed memory is released and how it is read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Policy {
    /// Unload everything when blocking; load whole allocations on access.
    #[default]
    Araw,
    /// Keep resident until the budget needs room; load whole allocations.
    Arlw,
    /// Keep resident until the budget needs room; load pages as touched.
    Lrlw,
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        Policy::from_name(s)
            .ok_or_else(|| format!("unknown policy '{s}' (available: araw, arlw, lrlw)"))
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Policy {
    /// Every policy.
    pub const ALL: [Policy; 3] = [Policy::Araw, Policy::Arlw, Policy::Lrlw];

    /// Parses `araw`, `arlw` or `lrlw`.
    pub fn from_name(name: &str) -> Option<Policy> {
        match name {
            "araw" => Some(Policy::Araw),
            "arlw" => Some(Policy::Arlw),
            "lrlw" => Some(Policy::Lrlw),
            _ => None,
        }
    }

    /// The policy's name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Araw => "araw",
            Policy::Arlw => "arlw",
            Policy::Lrlw => "lrlw",
        }
    }
}

/// Memory counters of a node (or, summed, of a job).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes of storage-backed memory written to spill files (upper bound: resident bytes of
    /// modified allocations at unload).
    pub bytes_written: u64,
    /// Bytes read back from spill files (pages that were not resident when loaded).
    pub bytes_read: u64,
    /// Allocation loads.
    pub loads: u64,
    /// Allocation unloads.
    pub unloads: u64,
    /// Loads that exceeded the budget because nothing could be evicted.
    pub overcommits: u64,
    /// Messages written to spill files instead of memory.
    pub messages_spilled: u64,
    /// Bytes of those messages.
    pub message_bytes_spilled: u64,
    /// Highest number of bytes of loaded allocations on the node.
    pub peak_resident: u64,
    /// Highest number of bytes of storage-backed allocations on the node, loaded or not (the
    /// rank data that the budget has to hold).
    pub peak_allocated: u64,
    /// Bytes of unloaded allocations whose reading back was started in the background
    /// before their rank resumed (prefetch of its working set).
    pub prefetched_bytes: u64,
}

impl MemoryStats {
    /// Adds another node's counters (peaks add up: nodes are separate machines).
    pub fn add(&mut self, o: &MemoryStats) {
        self.bytes_written += o.bytes_written;
        self.bytes_read += o.bytes_read;
        self.loads += o.loads;
        self.unloads += o.unloads;
        self.overcommits += o.overcommits;
        self.messages_spilled += o.messages_spilled;
        self.message_bytes_spilled += o.message_bytes_spilled;
        self.peak_resident += o.peak_resident;
        self.peak_allocated += o.peak_allocated;
        self.prefetched_bytes += o.prefetched_bytes;
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) bytes_written: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) loads: AtomicU64,
    pub(crate) unloads: AtomicU64,
    pub(crate) overcommits: AtomicU64,
    pub(crate) messages_spilled: AtomicU64,
    pub(crate) message_bytes_spilled: AtomicU64,
    pub(crate) peak_resident: AtomicU64,
    pub(crate) allocated: AtomicU64,
    pub(crate) peak_allocated: AtomicU64,
    pub(crate) prefetched_bytes: AtomicU64,
}

mod sbvec;
pub(crate) mod spill;

pub use sbvec::SbVec;
pub(crate) use sbvec::{Owner, Region};
pub(crate) use spill::SpillStore;

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct NodeMemState {
    /// Bytes of loaded allocations (ranks' and the node's own).
    resident: u64,
    per_rank: Vec<u64>,
    allocated: Vec<u64>,
}

/// The memory of one node: budget, accounting, the ranks' allocations.
pub(crate) struct NodeMem {
    budget: Option<u64>,
    pub(crate) policy: Policy,
    spill: Arc<SpillStore>,
    state: Mutex<NodeMemState>,
    evictable: Vec<AtomicBool>,
    /// When each rank last blocked (a node-wide count of blocking calls).
    blocked_at: Vec<AtomicU64>,
    blocks: AtomicU64,
    ranks: Vec<Mutex<Vec<Weak<Region>>>>,
    /// Per rank: the spill files of the messages waiting in its mailbox (and their lengths),
    /// read ahead with its memory before it resumes.
    spilled: Vec<Mutex<Vec<SpilledMessage>>>,
    /// Regions unloaded while pages of theirs were being written back: their page cache is
    /// dropped a few blocking calls later, when the write-back has most likely finished.
    pending_drops: Mutex<VecDeque<PendingDrop>>,
    pub(crate) counters: Counters,
    /// Bytes of message payloads and collective buffers held in memory by this node.
    pub(crate) message_bytes: AtomicU64,
    /// Messages and node buffers at least this long spill when the budget is full.
    message_spill_threshold: usize,
    first_error: Mutex<Option<io::Error>>,
    /// The ranks' regions by start address (to recognise storage-backed memory that another
    /// rank read in place).
    by_addr: Mutex<BTreeMap<usize, Weak<Region>>>,
    /// The node's index and first rank (for trace events).
    pub(crate) node_id: u32,
    pub(crate) first_rank: u32,
}

/// A message waiting on disk: its spill file (while the message lives) and its length.
type SpilledMessage = (Weak<File>, u64);

/// A region whose page cache is to be dropped once its write-back is done.
struct PendingDrop {
    region: Weak<Region>,
    /// The region's generation at the unload (see [`Region::drop_written`]).
    gen: u64,
    /// The node's count of blocking calls at the unload.
    at: u64,
}

impl PendingDrop {
    /// Drops the region's page cache, if the region still exists.
    fn run(self) {
        if let Some(r) = self.region.upgrade() {
            r.drop_written(self.gen);
        }
    }
}

/// Blocking calls on a node after an unload before the pages it handed to write-back are
/// dropped from the page cache (a rank's turn usually outlasts writing its modified pages).
const DROP_AFTER_BLOCKS: u64 = 2;

/// Most regions waiting for their page cache to be dropped.
const MAX_PENDING_DROPS: usize = 1024;

impl NodeMem {
    pub(crate) fn new(
        budget: Option<u64>,
        policy: Policy,
        spill: Arc<SpillStore>,
        ranks: usize,
        message_spill_threshold: usize,
    ) -> NodeMem {
        NodeMem {
            budget,
            policy,
            spill,
            state: Mutex::new(NodeMemState {
                resident: 0,
                per_rank: vec![0; ranks],
                allocated: vec![0; ranks],
            }),
            evictable: (0..ranks).map(|_| AtomicBool::new(false)).collect(),
            blocked_at: (0..ranks).map(|_| AtomicU64::new(0)).collect(),
            blocks: AtomicU64::new(0),
            ranks: (0..ranks).map(|_| Mutex::new(Vec::new())).collect(),
            spilled: (0..ranks).map(|_| Mutex::new(Vec::new())).collect(),
            pending_drops: Mutex::new(VecDeque::new()),
            counters: Counters::default(),
            message_bytes: AtomicU64::new(0),
            message_spill_threshold,
            first_error: Mutex::new(None),
            by_addr: Mutex::new(BTreeMap::new()),
            node_id: 0,
            first_rank: 0,
        }
    }

    /// Names the node (index and first rank) for trace events.
    pub(crate) fn ids(mut self, node: u32, first_rank: u32) -> NodeMem {
        self.node_id = node;
        self.first_rank = first_rank;
        self
    }

    /// Records where `region` is mapped (again after it moved from `old`).
    pub(crate) fn map_address(&self, region: &Arc<Region>, old: Option<usize>) {
        let mut map = lock(&self.by_addr);
        if let Some(old) = old {
            map.remove(&old);
        }
        map.insert(region.ptr() as usize, Arc::downgrade(region));
    }

    /// Forgets the mapping of a region at `addr`.
    pub(crate) fn unmap_address(&self, addr: usize) {
        lock(&self.by_addr).remove(&addr);
    }

    /// Another rank has read `[addr, addr + len)` in place (inside a collective). If it lies in
    /// a rank's storage-backed allocation that is not loaded (its owner is blocked and holds it
    /// in storage), the pages just faulted in are dropped again, so that reading other ranks'
    /// data does not keep it resident. Anything else is left alone.
    pub(crate) fn release_read(&self, addr: usize, len: usize) {
        if len == 0 || self.budget.is_none() {
            return;
        }
        let region = {
            let map = lock(&self.by_addr);
            map.range(..=addr)
                .next_back()
                .and_then(|(_, w)| w.upgrade())
        };
        if let Some(region) = region {
            region.drop_pages_if_unloaded(addr, len);
        }
    }

    /// Whether `addr` lies in a storage-backed allocation of this node.
    pub(crate) fn is_storage_backed(&self, addr: usize) -> bool {
        let map = lock(&self.by_addr);
        map.range(..=addr)
            .next_back()
            .and_then(|(_, w)| w.upgrade())
            .is_some_and(|r| r.contains(addr))
    }

    pub(crate) fn spill(&self) -> &SpillStore {
        &self.spill
    }

    pub(crate) fn dir(&self) -> &Path {
        self.spill.dir()
    }

    pub(crate) fn budget(&self) -> Option<u64> {
        self.budget
    }

    pub(crate) fn resident_of(&self, local: usize) -> u64 {
        lock(&self.state).per_rank[local]
    }

    pub(crate) fn stats(&self) -> MemoryStats {
        let c = &self.counters;
        MemoryStats {
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            bytes_read: c.bytes_read.load(Ordering::Relaxed),
            loads: c.loads.load(Ordering::Relaxed),
            unloads: c.unloads.load(Ordering::Relaxed),
            overcommits: c.overcommits.load(Ordering::Relaxed),
            messages_spilled: c.messages_spilled.load(Ordering::Relaxed),
            message_bytes_spilled: c.message_bytes_spilled.load(Ordering::Relaxed),
            peak_resident: c.peak_resident.load(Ordering::Relaxed),
            peak_allocated: c.peak_allocated.load(Ordering::Relaxed),
            prefetched_bytes: c.prefetched_bytes.load(Ordering::Relaxed),
        }
    }

    /// Whether the budget has room for all storage-backed data of the running ranks and of rank
    /// `local` together, plus queued messages (the admission test of dynamic running: what the
    /// running ranks may still load counts, not only what is resident now).
    pub(crate) fn has_room_for(&self, local: usize, running: &[u32]) -> bool {
        let Some(budget) = self.budget else {
            return true;
        };
        let st = lock(&self.state);
        let needed: u64 = running
            .iter()
            .map(|&r| st.allocated[r as usize])
            .sum::<u64>()
            + st.allocated[local];
        let messages = self.message_bytes.load(Ordering::Relaxed);
        needed + messages <= budget
    }

    pub(crate) fn allocated(&self, owner: Owner, bytes: u64) {
        let now = self.counters.allocated.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.counters
            .peak_allocated
            .fetch_max(now, Ordering::Relaxed);
        if let Owner::Rank(local) = owner {
            lock(&self.state).allocated[local] += bytes;
        }
    }

    pub(crate) fn freed(&self, owner: Owner, bytes: u64) {
        self.counters.allocated.fetch_sub(bytes, Ordering::Relaxed);
        if let Owner::Rank(local) = owner {
            lock(&self.state).allocated[local] -= bytes;
        }
    }

    /// Counts a message of `bytes` for rank `local` spilled to `file`, and keeps the file (as
    /// long as the message waits) for [`prefetch_rank`](Self::prefetch_rank).
    pub(crate) fn spilled_message(&self, local: usize, file: &Arc<File>, bytes: u64) {
        {
            let mut files = lock(&self.spilled[local]);
            files.retain(|(f, _)| f.strong_count() > 0);
            files.push((Arc::downgrade(file), bytes));
        }
        self.count_spilled_message(bytes);
    }

    /// Counts a message or node buffer of `bytes` that went to storage.
    pub(crate) fn count_spilled_message(&self, bytes: u64) {
        self.counters
            .messages_spilled
            .fetch_add(1, Ordering::Relaxed);
        self.counters
            .message_bytes_spilled
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// Whether `bytes` of message data should go to a spill file instead of memory: it is
    /// large and the budget has no room for it beside the resident allocations and the other
    /// messages.
    pub(crate) fn should_spill(&self, bytes: usize) -> bool {
        let Some(budget) = self.budget else {
            return false;
        };
        if bytes < self.message_spill_threshold {
            return false;
        }
        let resident = lock(&self.state).resident;
        resident + self.message_bytes.load(Ordering::Relaxed) + bytes as u64 > budget
    }

    /// Takes the first storage error of this node, if any.
    pub(crate) fn take_error(&self) -> Option<io::Error> {
        lock(&self.first_error).take()
    }

    pub(crate) fn record_error(&self, e: io::Error) {
        let mut f = lock(&self.first_error);
        if f.is_none() {
            *f = Some(e);
        }
    }

    /// Reserves room for `bytes` of `owner`, evicting blocked ranks' allocations if the budget
    /// needs it (ARLW, LRLW; under ARAW blocked ranks hold nothing).
    pub(crate) fn reserve(&self, owner: Owner, bytes: u64) {
        let me = match owner {
            Owner::Rank(l) => Some(l),
            Owner::Node => None,
        };
        loop {
            let mut st = lock(&self.state);
            let messages = self.message_bytes.load(Ordering::Relaxed);
            let fits = self
                .budget
                .is_none_or(|b| st.resident + messages + bytes <= b);
            let victim = if fits {
                None
            } else {
                (0..st.per_rank.len())
                    .filter(|&r| {
                        Some(r) != me
                            && st.per_rank[r] > 0
                            && self.evictable[r].load(Ordering::Acquire)
                    })
                    // The rank that blocked last: when the ranks take turns (every rank
                    // in a collective, resumed in order), it runs again last, so this is
                    // Belady's choice for a cyclic scan.
                    .max_by_key(|&r| self.blocked_at[r].load(Ordering::Relaxed))
            };
            match victim {
                None => {
                    if !fits {
                        self.counters.overcommits.fetch_add(1, Ordering::Relaxed);
                    }
                    st.resident += bytes;
                    if let Some(l) = me {
                        st.per_rank[l] += bytes;
                    }
                    self.counters
                        .peak_resident
                        .fetch_max(st.resident, Ordering::Relaxed);
                    return;
                }
                Some(v) => {
                    drop(st);
                    self.unload_rank(v);
                }
            }
        }
    }

    pub(crate) fn release(&self, owner: Owner, bytes: u64) {
        let mut st = lock(&self.state);
        st.resident -= bytes;
        if let Owner::Rank(l) = owner {
            st.per_rank[l] -= bytes;
        }
    }

    pub(crate) fn register(&self, local: usize, region: &Arc<Region>) {
        let mut regions = lock(&self.ranks[local]);
        regions.retain(|w| w.strong_count() > 0);
        regions.push(Arc::downgrade(region));
    }

    /// The live allocations of rank `local` (taken out of the lock, so that unloading or
    /// prefetching them does not hold it).
    fn regions_of(&self, local: usize) -> Vec<Arc<Region>> {
        lock(&self.ranks[local])
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Unloads every allocation of rank `local`.
    pub(crate) fn unload_rank(&self, local: usize) {
        let regions = self.regions_of(local);
        for r in regions {
            r.unload();
        }
    }

    /// Starts reading `local`'s unloaded storage-backed memory in the background (the kernel's
    /// readahead into the page cache), because the scheduler will resume it next: its loads
    /// then find the pages in memory instead of waiting for the disk (OpenOOC's overlap of
    /// page-in with computation). Nothing is reserved under the budget until the rank loads.
    /// Only under the aggressive-read policies (which load whole allocations anyway: LRLW
    /// reads only what the rank touches), and not when `SPILLWAY_NO_PREFETCH=1` (for
    /// measuring what prefetching gains).
    pub(crate) fn prefetch_rank(&self, local: usize) {
        static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let off =
            *OFF.get_or_init(|| std::env::var_os("SPILLWAY_NO_PREFETCH").is_some_and(|v| v == "1"));
        if self.budget.is_none() || self.policy == Policy::Lrlw || off {
            return;
        }
        let regions = self.regions_of(local);
        for r in regions {
            r.prefetch();
        }
        // The messages waiting for it on disk: it reads them when it receives them.
        let files: Vec<(Arc<File>, u64)> = {
            let mut files = lock(&self.spilled[local]);
            files.retain(|(f, _)| f.strong_count() > 0);
            files
                .iter()
                .filter_map(|(f, len)| Some((f.upgrade()?, *len)))
                .collect()
        };
        for (file, len) in files {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid open descriptor (the Arc keeps the file open); the advice only
            // starts readahead into the page cache and changes no data.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
            self.counters
                .prefetched_bytes
                .fetch_add(len, Ordering::Relaxed);
        }
    }

    /// The rank blocks: under ARAW (with a budget) it unloads; under the lazy-write policies it
    /// becomes a candidate for eviction.
    pub(crate) fn on_block(&self, local: usize) {
        // Without a budget memory is not constrained: nothing is released.
        if self.budget.is_none() {
            return;
        }
        for r in self.regions_of(local) {
            r.note_block();
            if self.policy == Policy::Araw {
                r.unload();
            }
        }
        self.drop_written();
    }

    /// Remembers to drop `region`'s page cache after its write-back (see
    /// [`Region::unload`]).
    pub(crate) fn defer_drop(&self, region: Weak<Region>, gen: u64) {
        let at = self.blocks.load(Ordering::Relaxed);
        let oldest = {
            let mut q = lock(&self.pending_drops);
            q.push_back(PendingDrop { region, gen, at });
            // Unloads without blocking calls in between (explicit ones in a loop) must not
            // grow the queue without bound: the oldest is dropped now (pages still being
            // written stay for the kernel).
            (q.len() > MAX_PENDING_DROPS)
                .then(|| q.pop_front())
                .flatten()
        };
        if let Some(d) = oldest {
            d.run();
        }
    }

    /// Drops the page cache of regions unloaded at least [`DROP_AFTER_BLOCKS`] blocking calls
    /// ago, unless they were loaded or prefetched since.
    fn drop_written(&self) {
        let now = self.blocks.load(Ordering::Relaxed);
        let due: Vec<PendingDrop> = {
            let mut q = lock(&self.pending_drops);
            let n = q
                .iter()
                .take_while(|d| now.saturating_sub(d.at) >= DROP_AFTER_BLOCKS)
                .count();
            q.drain(..n).collect()
        };
        for d in due {
            d.run();
        }
    }

    /// The rank is about to give up its slot: from now on other ranks may evict its memory.
    /// Called before the slot is handed on, so a rank started in its place finds it evictable.
    pub(crate) fn mark_blocked(&self, local: usize) {
        let t = self.blocks.fetch_add(1, Ordering::Relaxed) + 1;
        self.blocked_at[local].store(t, Ordering::Relaxed);
        self.evictable[local].store(true, Ordering::Release);
    }

    /// The rank runs again: its allocations may no longer be evicted by others.
    pub(crate) fn on_resume(&self, local: usize) {
        self.evictable[local].store(false, Ordering::Release);
    }

    /// A buffer of `len` bytes owned by the node (collective buffers): heap memory counted
    /// with the node's messages, or, when it is large and the budget has no room, a
    /// storage-backed region whose pages the system can write out.
    pub(crate) fn buffer(self: &Arc<Self>, len: usize) -> io::Result<NodeBuf> {
        if self.should_spill(len) {
            let region = Region::new(self, Owner::Node, len)?;
            self.map_address(&region, None);
            region.ensure_loaded(true);
            self.count_spilled_message(len as u64);
            return Ok(NodeBuf {
                inner: NodeBufInner::Mapped(region, len),
                node: Arc::clone(self),
            });
        }
        self.message_bytes.fetch_add(len as u64, Ordering::Relaxed);
        Ok(NodeBuf {
            inner: NodeBufInner::Heap(AlignedBuf::for_overwrite(len)),
            node: Arc::clone(self),
        })
    }
}

enum NodeBufInner {
    Heap(AlignedBuf),
    Mapped(Arc<Region>, usize),
}

/// A buffer owned by a node rather than a rank (the accumulator of a collective), counted
/// against the node's memory budget while it exists. Its contents are unspecified when made.
pub struct NodeBuf {
    inner: NodeBufInner,
    node: Arc<NodeMem>,
}

impl NodeBuf {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match &self.inner {
            NodeBufInner::Heap(b) => b.len(),
            NodeBufInner::Mapped(_, len) => *len,
        }
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes (16-byte aligned). A spilled buffer that was unloaded is read back page by
    /// page as the bytes are touched.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.inner {
            NodeBufInner::Heap(b) => b.as_bytes(),
            // SAFETY: the region maps at least `len` bytes of a file that holds the contents
            // whether or not they are resident; node-owned regions never move; the borrow
            // keeps the mapping alive.
            NodeBufInner::Mapped(r, len) => unsafe { std::slice::from_raw_parts(r.ptr(), *len) },
        }
    }

    /// The bytes, mutable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.inner {
            NodeBufInner::Heap(b) => b.as_bytes_mut(),
            NodeBufInner::Mapped(r, len) => {
                r.ensure_loaded(true);
                // SAFETY: as in `as_bytes`; `&mut self` makes this the only live view.
                unsafe { std::slice::from_raw_parts_mut(r.ptr(), *len) }
            }
        }
    }

    /// Whether the buffer lives in a spill file (the budget had no room for it).
    pub fn is_spilled(&self) -> bool {
        matches!(self.inner, NodeBufInner::Mapped(..))
    }

    /// A buffer in a spill file writes its contents back and leaves memory: readers fault
    /// the pages back in and, reading through [`Rank::release_read`](crate::Rank), drop them
    /// again. A heap buffer stays as it is.
    pub fn unload(&self) {
        if let NodeBufInner::Mapped(r, _) = &self.inner {
            r.unload();
        }
    }
}

impl Drop for NodeBuf {
    fn drop(&mut self) {
        if let NodeBufInner::Heap(b) = &self.inner {
            self.node
                .message_bytes
                .fetch_sub(b.len() as u64, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for NodeBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeBuf({} bytes)", self.len())
    }
}

/// Makes glibc's allocator give freed memory back to the system, so that the heap of blocked
/// ranks does not stay resident: one arena shared by all rank threads (only `running` of them
/// allocate at once) and a fixed mmap threshold of 1 MiB (large buffers are mapped and unmapped,
/// instead of staying in per-thread arenas). Applied when a job has a memory budget.
pub(crate) fn configure_allocator_for_budget() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning parameters; it is called before the rank
    // threads start and has no memory-safety preconditions.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Peak resident set size of this process (VmHWM), in bytes.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Current resident set size of this process (VmRSS), in bytes.
pub fn current_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
