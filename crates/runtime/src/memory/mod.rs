//! Storage-backed memory (SBMA) under a per-node memory budget.
//!
//! # Design
//!
//! A storage-backed allocation ([`SbVec`]) is a `MAP_SHARED` mapping of its own nameless file
//! in the spill directory (see [`spill`]: nothing outlives the process). Residency is managed
//! without signal handlers:
//!
//! * **unload**: `madvise(MADV_DONTNEED)` drops the pages from the process (their modifications
//!   stay in the page cache), then `sync_file_range` starts writing the modified pages to the
//!   file (asynchronously: the write-back overlaps with other ranks' work; the file's blocks are
//!   allocated up front so it cannot run out of space). In that order the write-back finds no
//!   mapped page to write-protect, each with a TLB shootdown.
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
//! * **scratch**: arrays that a rank writes before it reads them and no longer needs once it
//!   blocks are [`Scratch`] buffers instead: private anonymous memory from a pool of the node,
//!   counted against the budget and never written out, passed from rank to rank (see
//!   `scratch`).
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

use std::sync::atomic::AtomicU64;

mod buf;
mod msglog;
mod node;
pub mod pages;
mod region;
mod residency;
mod sbvec;
mod scratch;
pub(crate) mod spill;

pub use buf::NodeBuf;
pub(crate) use msglog::Spilled;
pub(crate) use node::NodeMem;
pub(crate) use region::{Owner, Region};
pub use sbvec::SbVec;
pub use scratch::Scratch;
pub(crate) use spill::SpillStore;

pub(crate) use spillway_transport::lock;

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

spillway_transport::named_enum!(Policy, "policy", [Araw => "araw", Arlw => "arlw", Lrlw => "lrlw"]);

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

/// Makes glibc's allocator give freed memory back to the system, so that the heap of blocked
/// ranks does not stay resident: one arena shared by all rank threads (only `running` of them
/// allocate at once) and a fixed mmap threshold at the message pool's smallest buffer
/// ([`POOLED_MIN`](spillway_transport::POOLED_MIN), 64 KiB): message buffers are mapped and
/// unmapped instead of being carved from the heap. With a threshold of 1 MiB, PageRank's
/// sums at R-MAT scale 24 on 64 ranks (messages of 100-500 KiB, a few hundred in flight) left
/// 285 MiB of freed heap resident under a 256 MiB budget, and the job was killed by its
/// memory cgroup. Applied when a job has a memory budget.
pub(crate) fn configure_allocator_for_budget() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning parameters; it is called before the rank
    // threads start and has no memory-safety preconditions.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(
            libc::M_MMAP_THRESHOLD,
            spillway_transport::POOLED_MIN as i32,
        );
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
