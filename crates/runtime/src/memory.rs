//! Storage-backed memory (SBMA) under a per-node memory budget.
//!
//! # Design
//!
//! A storage-backed allocation ([`SbVec`]) is a `MAP_SHARED` mapping of its own file in the
//! job's private spill directory (the file is unlinked at once, so nothing outlives the
//! process). Residency is managed without signal handlers:
//!
//! * **unload**: `msync` writes modified pages to the file, `madvise(MADV_DONTNEED)` drops them
//!   from the process, `posix_fadvise(POSIX_FADV_DONTNEED)` drops them from the page cache, so
//!   the data then lives only in storage;
//! * **load**: touching the pages reads them back (aggressive: the whole allocation at its first
//!   access after a block; lazy: page by page as the rank touches them).
//!
//! Unloading never invalidates a slice: a page that is touched again is simply read back. So
//! the policies below decide *when* memory is released and can never corrupt data.
//!
//! # Policies (Iverson, ch. 6)
//!
//! * [`Policy::Araw`] — aggressive read, aggressive write: a rank unloads all its allocations
//!   whenever it blocks; each allocation is loaded whole at its first access afterwards.
//! * [`Policy::Arlw`] — aggressive read, lazy write: allocations stay resident across blocking
//!   calls until a load would exceed the node budget; then blocked ranks' allocations are
//!   unloaded, the rank with the most resident memory first.
//! * [`Policy::Lrlw`] — lazy read, lazy write: as ARLW, but a load reads only the pages the rank
//!   touches.
//!
//! # Accounting
//!
//! The node tracks the bytes of loaded allocations per rank. A load that cannot be made to fit
//! (every resident byte belongs to running ranks) proceeds and is counted as an overcommit.

use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytemuck::Pod;

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

impl Policy {
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
    }
}

#[derive(Default)]
struct Counters {
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    loads: AtomicU64,
    unloads: AtomicU64,
    overcommits: AtomicU64,
    messages_spilled: AtomicU64,
    message_bytes_spilled: AtomicU64,
    peak_resident: AtomicU64,
    allocated: AtomicU64,
    peak_allocated: AtomicU64,
}

/// The job's private spill directory, removed when dropped.
#[derive(Debug)]
pub(crate) struct SpillDir {
    path: PathBuf,
}

impl SpillDir {
    pub(crate) fn create(base: Option<&Path>) -> Result<SpillDir, (PathBuf, io::Error)> {
        use std::os::unix::fs::DirBuilderExt;
        let base = base
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let meta = std::fs::metadata(&base).map_err(|e| (base.clone(), e))?;
        if !meta.is_dir() {
            return Err((
                base,
                io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let mut n = 0u32;
        loop {
            let path = base.join(format!("spillway-{}-{nanos:x}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(SpillDir { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                Err(e) => return Err((base, e)),
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Creates an anonymous (unlinked) file in the spill directory.
pub(crate) fn spill_file(dir: &Path, prefix: &str) -> io::Result<File> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("{prefix}-{n}"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

struct NodeMemState {
    resident: u64,
    per_rank: Vec<u64>,
    allocated: Vec<u64>,
}

/// The memory of one node: budget, accounting, the ranks' allocations.
pub(crate) struct NodeMem {
    budget: Option<u64>,
    pub(crate) policy: Policy,
    dir: Arc<SpillDir>,
    state: Mutex<NodeMemState>,
    evictable: Vec<AtomicBool>,
    ranks: Vec<Mutex<Vec<Weak<Region>>>>,
    counters: Counters,
    /// Bytes of message payloads held in memory by this node's mailboxes.
    pub(crate) message_bytes: AtomicU64,
    first_error: Mutex<Option<io::Error>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl NodeMem {
    pub(crate) fn new(
        budget: Option<u64>,
        policy: Policy,
        dir: Arc<SpillDir>,
        ranks: usize,
    ) -> NodeMem {
        NodeMem {
            budget,
            policy,
            dir,
            state: Mutex::new(NodeMemState {
                resident: 0,
                per_rank: vec![0; ranks],
                allocated: vec![0; ranks],
            }),
            evictable: (0..ranks).map(|_| AtomicBool::new(false)).collect(),
            ranks: (0..ranks).map(|_| Mutex::new(Vec::new())).collect(),
            counters: Counters::default(),
            message_bytes: AtomicU64::new(0),
            first_error: Mutex::new(None),
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
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
        }
    }

    /// Whether the budget has room for all storage-backed data of the running ranks and of rank
    /// `local` together, plus queued messages (the admission test of dynamic running: what the
    /// running ranks may still load counts, not only what is resident now).
    pub(crate) fn has_room_for(&self, local: usize, running: impl Iterator<Item = usize>) -> bool {
        let Some(budget) = self.budget else {
            return true;
        };
        let st = lock(&self.state);
        let needed: u64 = running.map(|r| st.allocated[r]).sum::<u64>() + st.allocated[local];
        let messages = self.message_bytes.load(Ordering::Relaxed);
        needed + messages <= budget
    }

    fn allocated(&self, bytes: u64) {
        let now = self.counters.allocated.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.counters
            .peak_allocated
            .fetch_max(now, Ordering::Relaxed);
    }

    fn freed(&self, bytes: u64) {
        self.counters.allocated.fetch_sub(bytes, Ordering::Relaxed);
    }

    pub(crate) fn count_spilled_message(&self, bytes: u64) {
        self.counters
            .messages_spilled
            .fetch_add(1, Ordering::Relaxed);
        self.counters
            .message_bytes_spilled
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// Budget left for in-memory messages: what the budget leaves beside resident allocations.
    pub(crate) fn message_room(&self) -> Option<u64> {
        let budget = self.budget?;
        let resident = lock(&self.state).resident;
        Some(budget.saturating_sub(resident))
    }

    /// Takes the first storage error of this node, if any.
    pub(crate) fn take_error(&self) -> Option<io::Error> {
        lock(&self.first_error).take()
    }

    fn record_error(&self, e: io::Error) {
        let mut f = lock(&self.first_error);
        if f.is_none() {
            *f = Some(e);
        }
    }

    /// Reserves room for `bytes` of rank `local`, evicting blocked ranks' allocations if the
    /// budget needs it (ARLW, LRLW; under ARAW blocked ranks hold nothing).
    fn reserve(&self, local: usize, bytes: u64) {
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
                        r != local
                            && st.per_rank[r] > 0
                            && self.evictable[r].load(Ordering::Acquire)
                    })
                    .max_by_key(|&r| st.per_rank[r])
            };
            match victim {
                None => {
                    if !fits {
                        self.counters.overcommits.fetch_add(1, Ordering::Relaxed);
                    }
                    st.resident += bytes;
                    st.per_rank[local] += bytes;
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

    fn release(&self, local: usize, bytes: u64) {
        let mut st = lock(&self.state);
        st.resident -= bytes;
        st.per_rank[local] -= bytes;
    }

    fn register(&self, local: usize, region: &Arc<Region>) {
        let mut regions = lock(&self.ranks[local]);
        regions.retain(|w| w.strong_count() > 0);
        regions.push(Arc::downgrade(region));
    }

    /// Unloads every allocation of rank `local`.
    pub(crate) fn unload_rank(&self, local: usize) {
        let regions: Vec<Arc<Region>> = lock(&self.ranks[local])
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for r in regions {
            r.unload();
        }
    }

    /// The rank blocks: under ARAW (with a budget) it unloads; under the lazy-write policies it
    /// becomes a candidate for eviction.
    pub(crate) fn on_block(&self, local: usize) {
        // Without a budget memory is not constrained: nothing is released.
        if self.policy == Policy::Araw && self.budget.is_some() {
            self.unload_rank(local);
        }
    }

    /// The rank is about to give up its slot: from now on other ranks may evict its memory.
    /// Called before the slot is handed on, so a rank started in its place finds it evictable.
    pub(crate) fn mark_blocked(&self, local: usize) {
        self.evictable[local].store(true, Ordering::Release);
    }

    /// The rank runs again: its allocations may no longer be evicted by others.
    pub(crate) fn on_resume(&self, local: usize) {
        self.evictable[local].store(false, Ordering::Release);
    }
}

const PAGE: usize = 4096;

struct RegionState {
    loaded: bool,
    dirty: bool,
    /// Some contents live only in the file (the region was unloaded after being written).
    on_disk: bool,
}

/// One storage-backed allocation: a shared mapping of an unlinked spill file.
pub(crate) struct Region {
    file: File,
    ptr: *mut u8,
    /// Mapped length (whole pages, at least one).
    map_len: usize,
    node: Arc<NodeMem>,
    local: usize,
    state: Mutex<RegionState>,
}

// SAFETY: the mapping is process-wide memory owned by this value; all state changes go
// through the `state` mutex, and unloading only changes residency, never contents, so sharing
// the pointer between the owning rank and a rank that evicts it on the owner's behalf is sound.
unsafe impl Send for Region {}
// SAFETY: as above; `&Region` exposes no unsynchronised mutation.
unsafe impl Sync for Region {}

impl Region {
    fn new(node: &Arc<NodeMem>, local: usize, bytes: usize) -> io::Result<Arc<Region>> {
        let map_len = bytes.div_ceil(PAGE).max(1) * PAGE;
        let file = spill_file(node.dir(), "sb")?;
        file.set_len(map_len as u64)?;
        // Reserve the blocks now: running out of space must be an error here, not a SIGBUS
        // when a page of the mapping is first written back.
        // SAFETY: plain fallocate on our own descriptor within the file's length.
        if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, map_len as i64) } != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("spill directory {}: {e}", node.dir().display()),
            ));
        }
        // SAFETY: a fresh shared read-write mapping of `map_len` bytes of a file we just sized
        // to that length; the kernel picks the address; failure is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let region = Arc::new(Region {
            file,
            ptr: ptr.cast(),
            map_len,
            node: Arc::clone(node),
            local,
            state: Mutex::new(RegionState {
                loaded: false,
                dirty: false,
                on_disk: false,
            }),
        });
        node.register(local, &region);
        node.allocated(map_len as u64);
        lock(&node.state).allocated[local] += map_len as u64;
        Ok(region)
    }

    /// Pages of the mapping resident in memory (mincore).
    fn resident_pages(&self) -> usize {
        let pages = self.map_len / PAGE;
        let mut vec = vec![0u8; pages];
        // SAFETY: `ptr` is page-aligned and maps `map_len` bytes; `vec` has one byte per page.
        let rc = unsafe { libc::mincore(self.ptr.cast(), self.map_len, vec.as_mut_ptr().cast()) };
        if rc != 0 {
            return pages;
        }
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    /// Makes the allocation accessible under the node budget. `write` marks it modified.
    fn ensure_loaded(&self, write: bool) {
        let mut st = lock(&self.state);
        if write {
            st.dirty = true;
        }
        if st.loaded {
            return;
        }
        self.node.reserve(self.local, self.map_len as u64);
        self.node.counters.loads.fetch_add(1, Ordering::Relaxed);
        st.loaded = true;
        if self.node.policy != Policy::Lrlw && st.on_disk {
            let before = self.resident_pages();
            // Aggressive read: bring the whole allocation in now.
            for off in (0..self.map_len).step_by(PAGE) {
                // SAFETY: `off < map_len`, inside the mapping; a volatile read faults the page
                // in without changing it.
                unsafe { std::ptr::read_volatile(self.ptr.add(off)) };
            }
            let read = (self.map_len / PAGE).saturating_sub(before) * PAGE;
            self.node
                .counters
                .bytes_read
                .fetch_add(read as u64, Ordering::Relaxed);
        }
    }

    /// Writes modified pages back and releases the memory.
    fn unload(&self) {
        let mut st = lock(&self.state);
        if !st.loaded {
            return;
        }
        let resident = self.resident_pages();
        if self.node.policy == Policy::Lrlw && st.on_disk {
            // Lazy read: count what was faulted in since the load.
            self.node
                .counters
                .bytes_read
                .fetch_add((resident * PAGE) as u64, Ordering::Relaxed);
        }
        if st.dirty {
            // SAFETY: the whole mapping, page-aligned.
            let rc = unsafe { libc::msync(self.ptr.cast(), self.map_len, libc::MS_SYNC) };
            if rc != 0 {
                self.node.record_error(io::Error::last_os_error());
                return;
            }
            self.node
                .counters
                .bytes_written
                .fetch_add((resident * PAGE) as u64, Ordering::Relaxed);
            st.on_disk = true;
        }
        // SAFETY: dropping the pages of a shared file mapping keeps their contents in the file
        // (synced above when modified); later accesses fault them back in.
        unsafe {
            libc::madvise(self.ptr.cast(), self.map_len, libc::MADV_DONTNEED);
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                0,
                self.map_len as i64,
                libc::POSIX_FADV_DONTNEED,
            );
        }
        st.loaded = false;
        st.dirty = false;
        self.node.counters.unloads.fetch_add(1, Ordering::Relaxed);
        self.node.release(self.local, self.map_len as u64);
    }

    /// Drops the contents without writing them (the next access reads zeros).
    fn discard(&self) {
        let mut st = lock(&self.state);
        // SAFETY: punching a hole in our own file within its length; the mapping sees zeros.
        unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                0,
                self.map_len as i64,
            );
            libc::madvise(self.ptr.cast(), self.map_len, libc::MADV_DONTNEED);
        }
        st.dirty = false;
        st.on_disk = false;
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.node.freed(self.map_len as u64);
        lock(&self.node.state).allocated[self.local] -= self.map_len as u64;
        let loaded = lock(&self.state).loaded;
        if loaded {
            self.node.release(self.local, self.map_len as u64);
        }
        // SAFETY: unmapping the mapping created in `new`; no slice can outlive the SbVec that
        // owns the last reference to this region.
        unsafe {
            libc::munmap(self.ptr.cast(), self.map_len);
        }
    }
}

/// A fixed-length array of plain data whose pages live in a spill file and are kept in memory
/// only as the node's memory policy allows (SBMA's storage-backed allocation).
///
/// # Semantics
/// Accessing the contents ([`as_slice`](Self::as_slice), [`as_mut_slice`](Self::as_mut_slice),
/// or through `Deref`) loads the allocation under the node budget; blocking calls may unload it
/// (see [`Policy`]). Unloading never changes the contents and never invalidates a slice.
/// A new `SbVec` is zero-filled.
///
/// # Errors
/// Creation fails with an I/O error naming the spill file when the spill directory cannot hold
/// it.
pub struct SbVec<T: Pod> {
    region: Arc<Region>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> SbVec<T> {
    /// A zero-filled array of `len` elements owned by `rank`.
    pub fn zeroed(rank: &crate::Rank, len: usize) -> Result<SbVec<T>, crate::Error> {
        let bytes =
            len.checked_mul(std::mem::size_of::<T>())
                .ok_or(crate::Error::InvalidArgument(
                    "storage-backed array too large",
                ))?;
        let (node, local) = rank.node_memory();
        let region = Region::new(node, local, bytes)?;
        Ok(SbVec {
            region,
            len,
            _t: PhantomData,
        })
    }

    /// A copy of `data` owned by `rank`.
    pub fn from_slice(rank: &crate::Rank, data: &[T]) -> Result<SbVec<T>, crate::Error> {
        let mut v = SbVec::zeroed(rank, data.len())?;
        v.as_mut_slice().copy_from_slice(data);
        Ok(v)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The contents, loaded for reading.
    pub fn as_slice(&self) -> &[T] {
        self.region.ensure_loaded(false);
        // SAFETY: the mapping is at least `len * size_of::<T>()` bytes, page-aligned (so
        // aligned for any Pod type up to 4096), zero-initialised or written through typed
        // slices, and every bit pattern is a valid `T: Pod`. The borrow of `self` keeps the
        // mapping alive.
        unsafe { std::slice::from_raw_parts(self.region.ptr.cast::<T>(), self.len) }
    }

    /// The contents, loaded for writing.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.region.ensure_loaded(true);
        // SAFETY: as in `as_slice`; `&mut self` makes this the only live slice of the mapping
        // (eviction by another rank changes residency only, never contents).
        unsafe { std::slice::from_raw_parts_mut(self.region.ptr.cast::<T>(), self.len) }
    }

    /// Writes back and releases this allocation now, whatever the policy.
    pub fn unload(&self) {
        self.region.unload();
    }

    /// Forgets the contents without writing them back (a buffer about to be overwritten);
    /// afterwards the array reads as zeros.
    pub fn discard(&mut self) {
        self.region.discard();
    }
}

impl<T: Pod> std::ops::Deref for SbVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Pod> std::ops::DerefMut for SbVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Pod> std::fmt::Debug for SbVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SbVec<{}>({} elements)",
            std::any::type_name::<T>(),
            self.len
        )
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
