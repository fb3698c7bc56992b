//! The memory of one node: its budget, the accounting of loaded allocations and messages,
//! the ranks' regions, and the eviction, prefetch and deferred page-cache drops that keep the
//! node within its budget (see the policies in the module doc of [`super`]).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::msglog::{MessageLog, Spilled};
use super::{lock, Counters, MemoryStats, Owner, Policy, Region, SpillStore};

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
    /// Per rank: the [`wait_key`] bit of the wait it is blocked on (its next turn begins
    /// after it), and of the wait its current turn began after.
    next_after: Vec<AtomicU64>,
    turn_after: Vec<AtomicU64>,
    ranks: Vec<Mutex<Vec<Weak<Region>>>>,
    /// Per rank: the messages for it that went to storage, read ahead with its memory
    /// before it resumes.
    logs: Vec<Arc<MessageLog>>,
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
    /// Free scratch buffers, for the next rank to take (see [`super::Scratch`]).
    pub(crate) scratch: super::scratch::Pool,
    /// The node's index and first rank (for trace events).
    pub(crate) node_id: u32,
    pub(crate) first_rank: u32,
}

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
            next_after: (0..ranks).map(|_| AtomicU64::new(0)).collect(),
            turn_after: (0..ranks).map(|_| AtomicU64::new(0)).collect(),
            ranks: (0..ranks).map(|_| Mutex::new(Vec::new())).collect(),
            logs: (0..ranks).map(|_| Arc::default()).collect(),
            pending_drops: Mutex::new(VecDeque::new()),
            counters: Counters::default(),
            message_bytes: AtomicU64::new(0),
            message_spill_threshold,
            first_error: Mutex::new(None),
            by_addr: Mutex::new(BTreeMap::new()),
            scratch: Default::default(),
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

    /// Writes a message of `bytes` for rank `local` to storage (its log, which
    /// [`prefetch_rank`](Self::prefetch_rank) reads ahead), and counts it.
    ///
    /// # Errors
    /// The spill directory cannot hold it.
    pub(crate) fn spill_message(&self, local: usize, bytes: &[u8]) -> io::Result<Spilled> {
        let spilled = self.logs[local].append(&self.spill, bytes)?;
        self.count_spilled_message(bytes.len() as u64);
        Ok(spilled)
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

    /// Whether `bytes` of message data should go to storage instead of memory: the budget
    /// has no room for it beside the resident allocations and the other messages, and it is
    /// large, or the messages in memory already take an eighth of the budget (many small
    /// messages: PageRank's sums at 64 ranks held 43 MB of a 16 MB budget on the heap). Large
    /// messages take at most half the budget even when little is resident: the rest is for
    /// the data of the ranks that run next and for the message copies receivers hold, which
    /// the budget does not count (PageRank at R-MAT scale 24, 64 ranks, 256 MiB budget: 218
    /// MiB of messages waited in memory at one point, and the peak RSS was 372 MiB; 303-318 MiB
    /// with this limit).
    pub(crate) fn should_spill(&self, bytes: usize) -> bool {
        let Some(budget) = self.budget else {
            return false;
        };
        let messages = self.message_bytes.load(Ordering::Relaxed) + bytes as u64;
        if bytes < self.message_spill_threshold && messages <= budget / 8 {
            return false;
        }
        let resident = lock(&self.state).resident;
        resident + messages > budget || messages > budget / 2
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
        let Some(budget) = self.budget else {
            return;
        };
        if self.policy == Policy::Lrlw || off {
            return;
        }
        // Read ahead only what the budget can take beside what is resident now: the page
        // cache is charged to the job's memory cgroup too, and read-ahead that does not fit
        // is evicted before the rank runs and read again (R-MAT scale 24 on 64 ranks at a
        // 256 MiB budget: 3.2 GB read an iteration with it, 1.3-1.8 GB without).
        let room = {
            let st = lock(&self.state);
            st.resident + self.message_bytes.load(Ordering::Relaxed) + st.allocated[local] <= budget
        };
        if !room {
            return;
        }
        let after = self.next_after[local].load(Ordering::Relaxed);
        for r in self.regions_of(local) {
            r.prefetch(after);
        }
        // The messages waiting for it on disk: it reads them when it receives them.
        let waiting = self.logs[local].prefetch();
        self.counters
            .prefetched_bytes
            .fetch_add(waiting, Ordering::Relaxed);
    }

    /// The rank blocks: under ARAW (with a budget) it unloads; under the lazy-write policies it
    /// becomes a candidate for eviction.
    pub(crate) fn on_block(&self, local: usize) {
        // Without a budget memory is not constrained: nothing is released.
        if self.budget.is_none() {
            return;
        }
        let after = self.turn_after[local].load(Ordering::Relaxed);
        for r in self.regions_of(local) {
            r.note_block(after);
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
    ///
    /// `wait` names what it waits on ([`wait_key`] of it is remembered for read-ahead).
    pub(crate) fn mark_blocked(&self, local: usize, wait: &str) {
        self.next_after[local].store(wait_key(wait), Ordering::Relaxed);
        let t = self.blocks.fetch_add(1, Ordering::Relaxed) + 1;
        self.blocked_at[local].store(t, Ordering::Relaxed);
        self.evictable[local].store(true, Ordering::Release);
    }

    /// The rank runs again: its allocations may no longer be evicted by others.
    pub(crate) fn on_resume(&self, local: usize) {
        self.evictable[local].store(false, Ordering::Release);
        let after = self.next_after[local].load(Ordering::Relaxed);
        self.turn_after[local].store(after, Ordering::Relaxed);
    }
}

/// One of 64 bits for a kind of wait (a receive, a probe, each collective by name): FNV-1a
/// of the name. Two kinds may share a bit; read-ahead is then less precise, never wrong.
pub(crate) fn wait_key(name: &str) -> u64 {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    1 << (h % 64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::region::Owner;
    use crate::memory::spill::SpillStore;

    /// One turn of rank 0: resumed from its last wait, it writes `region` if `touch`, then
    /// blocks on `next`.
    fn turn(mem: &NodeMem, region: &Arc<Region>, touch: bool, next: &str) {
        mem.on_resume(0);
        if touch {
            region.ensure_loaded(true);
        }
        mem.mark_blocked(0, next);
        mem.on_block(0);
    }

    #[test]
    fn read_ahead_follows_what_turns_after_the_same_wait_touched() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Arc::new(SpillStore::open(Some(dir.path())).unwrap());
        let mem = Arc::new(NodeMem::new(
            Some(64 << 20),
            Policy::Araw,
            spill,
            1,
            1 << 20,
        ));
        let region = Region::new(&mem, Owner::Rank(0), 1 << 20).unwrap();
        let prefetched = || mem.counters.prefetched_bytes.load(Ordering::Relaxed);
        mem.mark_blocked(0, "bcast");
        mem.on_block(0);
        // Two rounds: the turn after a broadcast writes the region, the one after a reduce
        // does not.
        for _ in 0..2 {
            turn(&mem, &region, true, "reduce");
            turn(&mem, &region, false, "bcast");
        }
        turn(&mem, &region, true, "reduce");
        // Blocked on the reduce: its last turn touched the region, but turns after a reduce
        // do not. Nothing is read ahead.
        let before = prefetched();
        mem.prefetch_rank(0);
        assert_eq!(prefetched(), before, "read ahead for a turn after a reduce");
        turn(&mem, &region, false, "bcast");
        // Blocked on the broadcast: its last turn did not touch the region, turns after a
        // broadcast do. The region is read ahead.
        mem.prefetch_rank(0);
        assert_eq!(prefetched() - before, region.map_len() as u64);
    }
}
