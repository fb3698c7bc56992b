//! Storage-backed allocations: [`SbVec`] and the mapped [`Region`] behind it.

use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytemuck::Pod;

use super::{lock, NodeMem, Policy};

pub(crate) const PAGE: usize = 4096;

/// Who an allocation belongs to: a rank of the node (its data follows the rank's scheduling)
/// or the node itself (a collective buffer, loaded while it exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Rank(usize),
    Node,
}

struct RegionState {
    loaded: bool,
    /// Bytes reserved for parts loaded by range accesses while not wholly loaded.
    partial: u64,
    dirty: bool,
    /// Some contents live only in the file (the region was unloaded after being written).
    on_disk: bool,
    /// The owner had the region (or part of it) loaded when it last blocked: it belongs to
    /// the rank's working set, and is worth prefetching before the rank resumes. A region
    /// the rank did not touch between two blocking calls (a graph kept for later while the
    /// iterations run) is left on disk until it is touched again.
    warm: bool,
    /// Counts loads and prefetches: a drop of the page cache deferred at an unload (see
    /// [`NodeMem::drop_written`]) is skipped if the region was loaded or prefetched since.
    gen: u64,
}

/// Mappings at least this long ask for transparent huge pages when anonymous.
const HUGE_PAGE: usize = 2 << 20;

/// One storage-backed allocation: a shared mapping of an unnamed spill file, or, on a node
/// without a memory budget (where nothing is ever written out), a private anonymous mapping
/// that may use transparent huge pages: random access then costs no page-table walks per
/// 4 KiB and no file-system page faults.
pub(crate) struct Region {
    /// The spill file; `None` for an anonymous mapping.
    file: Option<File>,
    /// Start of the mapping; changes only when the region grows (under `state`).
    ptr: AtomicPtr<u8>,
    /// Mapped length (whole pages, at least one); changes only when the region grows.
    map_len: AtomicUsize,
    node: Arc<NodeMem>,
    owner: Owner,
    /// Mirrors of `state.loaded` / `state.dirty`, so that the owner's accesses while it runs
    /// cost an atomic load instead of a lock.
    loaded_fast: AtomicBool,
    dirty_fast: AtomicBool,
    state: Mutex<RegionState>,
}

// SAFETY: the mapping is process-wide memory owned by this value; every change of residency
// goes through the `state` mutex, and unloading only changes residency, never contents, so
// sharing the pointer between the owning rank and a rank that evicts it on the owner's behalf
// is sound. The pointer itself changes only under `state` while the owner holds `&mut SbVec`.
unsafe impl Send for Region {}
// SAFETY: as above; `&Region` exposes no unsynchronised mutation of the mapping's metadata.
unsafe impl Sync for Region {}

fn map_len_for(bytes: usize) -> usize {
    bytes.div_ceil(PAGE).max(1) * PAGE
}

fn fallocate(file: &File, from: usize, to: usize) -> io::Result<()> {
    // Reserve the blocks now: running out of space must be an error here, not a SIGBUS when a
    // page of the mapping is first written back.
    // SAFETY: plain fallocate on our own descriptor within the file's length.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, from as i64, (to - from) as i64) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks for transparent huge pages on an anonymous mapping of `len` bytes at `ptr` (a hint:
/// failure, e.g. THP disabled, changes nothing).
fn advise_huge(ptr: *mut libc::c_void, len: usize) {
    if len >= HUGE_PAGE {
        // SAFETY: the range is exactly one mapping of ours; MADV_HUGEPAGE changes only how
        // the kernel backs it, never its contents.
        unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) };
    }
}

impl Region {
    pub(crate) fn new(node: &Arc<NodeMem>, owner: Owner, bytes: usize) -> io::Result<Arc<Region>> {
        let map_len = map_len_for(bytes);
        let file = if node.budget().is_some() {
            let file = node.spill().file()?;
            file.set_len(map_len as u64)
                .and_then(|()| fallocate(&file, 0, map_len))
                .map_err(|e| node.spill().error(e))?;
            Some(file)
        } else {
            None
        };
        let (flags, fd) = match &file {
            Some(f) => (libc::MAP_SHARED, f.as_raw_fd()),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
        };
        // SAFETY: a fresh read-write mapping of `map_len` bytes, shared over a file we just
        // sized to that length or private and anonymous; the kernel picks the address;
        // failure is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        if file.is_none() {
            advise_huge(ptr.cast(), map_len);
        }
        let region = Arc::new(Region {
            file,
            ptr: AtomicPtr::new(ptr.cast()),
            map_len: AtomicUsize::new(map_len),
            node: Arc::clone(node),
            owner,
            loaded_fast: AtomicBool::new(false),
            dirty_fast: AtomicBool::new(false),
            state: Mutex::new(RegionState {
                loaded: false,
                partial: 0,
                dirty: false,
                on_disk: false,
                warm: true,
                gen: 0,
            }),
        });
        node.allocated(owner, map_len as u64);
        if let Owner::Rank(local) = owner {
            node.register(local, &region);
            node.map_address(&region, None);
        }
        Ok(region)
    }

    /// Whether `addr` lies inside the mapping.
    pub(crate) fn contains(&self, addr: usize) -> bool {
        let ptr = self.ptr() as usize;
        addr >= ptr && addr < ptr + self.map_len()
    }

    /// Drops the pages of `[addr, addr + len)` (within this mapping) from memory if the region
    /// is not loaded: they were faulted in by a rank reading this buffer in place.
    pub(crate) fn drop_pages_if_unloaded(&self, addr: usize, len: usize) {
        // Anonymous memory is never unloaded (and dropping its pages would lose them).
        let Some(file) = &self.file else {
            return;
        };
        let st = lock(&self.state);
        let (ptr, map_len) = (self.ptr() as usize, self.map_len());
        if st.loaded || st.partial > 0 || addr < ptr || addr + len > ptr + map_len {
            return;
        }
        let start = (addr - ptr) / PAGE * PAGE;
        let end = ((addr - ptr + len).div_ceil(PAGE) * PAGE).min(map_len);
        // SAFETY: a page-aligned range inside our shared file mapping; the owner does not use
        // the region while it is unloaded, and dropping pages of a shared file mapping keeps
        // their contents in the file (they were written back when the region was unloaded).
        unsafe {
            libc::madvise(
                (ptr + start) as *mut libc::c_void,
                end - start,
                libc::MADV_DONTNEED,
            );
        }
        drop_page_cache(file, start, end - start);
        drop(st);
        self.node
            .counters
            .bytes_read
            .fetch_add((end - start) as u64, Ordering::Relaxed);
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.load(Ordering::Acquire)
    }

    pub(crate) fn map_len(&self) -> usize {
        self.map_len.load(Ordering::Acquire)
    }

    /// Pages of the mapping resident in memory (mincore).
    fn resident_pages(&self) -> usize {
        let (ptr, len) = (self.ptr(), self.map_len());
        let pages = len / PAGE;
        let mut vec = vec![0u8; pages];
        // SAFETY: `ptr` is page-aligned and maps `len` bytes; `vec` has one byte per page.
        let rc = unsafe { libc::mincore(ptr.cast(), len, vec.as_mut_ptr().cast()) };
        if rc != 0 {
            return pages;
        }
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    /// Makes the allocation accessible under the node budget. `write` marks it modified.
    pub(crate) fn ensure_loaded(&self, write: bool) {
        if self.loaded_fast.load(Ordering::Acquire)
            && (!write || self.dirty_fast.load(Ordering::Relaxed))
        {
            return;
        }
        let mut st = lock(&self.state);
        if write {
            st.dirty = true;
            self.dirty_fast.store(true, Ordering::Relaxed);
        }
        if st.loaded {
            return;
        }
        let map_len = self.map_len();
        self.node.reserve(self.owner, map_len as u64 - st.partial);
        st.partial = 0;
        self.node.counters.loads.fetch_add(1, Ordering::Relaxed);
        st.loaded = true;
        st.gen += 1;
        if self.node.policy != Policy::Lrlw && st.on_disk {
            let t0 = crate::trace::enabled().then(crate::trace::now);
            // Pages already resident were read back since the unload by other ranks reading
            // this buffer in a collective: they count as read too, so every page is.
            // Aggressive read: bring the whole allocation in now (one system call; the kernel
            // reads ahead in large requests).
            // SAFETY: the whole mapping, page-aligned; MADV_POPULATE_READ only faults pages in.
            let rc = unsafe {
                libc::madvise(self.ptr().cast(), map_len, 22 /* MADV_POPULATE_READ */)
            };
            if rc != 0 {
                // Older kernels: touch every page.
                for off in (0..map_len).step_by(PAGE) {
                    // SAFETY: `off < map_len`, inside the mapping; a volatile read faults the
                    // page in without changing it.
                    unsafe { std::ptr::read_volatile(self.ptr().add(off)) };
                }
            }
            self.node
                .counters
                .bytes_read
                .fetch_add(map_len as u64, Ordering::Relaxed);
            if let Some(t0) = t0 {
                self.trace("load", t0, map_len as u64);
            }
        }
        self.loaded_fast.store(true, Ordering::Release);
    }

    /// Makes bytes `[offset, offset + len)` accessible under the node budget without loading
    /// the rest: only their pages are reserved and (under the aggressive policies) read.
    pub(crate) fn ensure_range_loaded(&self, offset: usize, len: usize, write: bool) {
        if self.loaded_fast.load(Ordering::Acquire)
            && (!write || self.dirty_fast.load(Ordering::Relaxed))
        {
            return;
        }
        let mut st = lock(&self.state);
        if write {
            st.dirty = true;
            self.dirty_fast.store(true, Ordering::Relaxed);
        }
        if st.loaded || len == 0 {
            return;
        }
        let map_len = self.map_len();
        let start = offset / PAGE * PAGE;
        let end = (offset + len).div_ceil(PAGE) * PAGE;
        let bytes = ((end - start) as u64).min(map_len as u64 - st.partial);
        if st.partial + bytes >= map_len as u64 {
            // The parts add up to the whole: load it all.
            drop(st);
            return self.ensure_loaded(write);
        }
        self.node.reserve(self.owner, bytes);
        st.partial += bytes;
        st.gen += 1;
        if self.node.policy != Policy::Lrlw && st.on_disk {
            // SAFETY: a page-aligned range inside the mapping; MADV_POPULATE_READ only faults
            // pages in (failure on older kernels only costs the page faults later).
            unsafe {
                libc::madvise(
                    self.ptr().add(start).cast(),
                    end - start,
                    22, /* MADV_POPULATE_READ */
                );
            }
            self.node
                .counters
                .bytes_read
                .fetch_add((end - start) as u64, Ordering::Relaxed);
        }
    }

    /// Writes modified pages back and releases the memory, and drops the region's pages from
    /// the page cache: clean ones at once, those still being written back at a later blocking
    /// call on the node ([`NodeMem::drop_written`]), unless `SPILLWAY_KEEP_PAGE_CACHE=1`. An
    /// anonymous region (no budget) stays as it is.
    pub(crate) fn unload(self: &Arc<Self>) {
        let Some(file) = &self.file else {
            return;
        };
        let mut st = lock(&self.state);
        if !st.loaded && st.partial == 0 {
            return;
        }
        let (ptr, map_len) = (self.ptr(), self.map_len());
        let t0 = crate::trace::enabled().then(crate::trace::now);
        let mut written = 0u64;
        // Pages faulted in by anybody since the load (the owner, or another rank reading this
        // buffer inside a collective) are counted here, whatever the policy.
        let resident = self.resident_pages();
        if self.node.policy == Policy::Lrlw && st.on_disk {
            self.node
                .counters
                .bytes_read
                .fetch_add((resident * PAGE) as u64, Ordering::Relaxed);
        }
        let sync = sync_unload();
        if st.dirty {
            // Write-back starts now and proceeds while the rank is blocked and others run
            // (the file's blocks were allocated when it was created, so it cannot fail for
            // lack of space later); SPILLWAY_SYNC_UNLOAD=1 waits for it instead.
            // SAFETY: the whole mapping, page-aligned; the file range of the same length.
            let rc = unsafe {
                if sync {
                    libc::msync(ptr.cast(), map_len, libc::MS_SYNC)
                } else {
                    libc::sync_file_range(
                        file.as_raw_fd(),
                        0,
                        map_len as i64,
                        libc::SYNC_FILE_RANGE_WRITE,
                    )
                }
            };
            if rc != 0 {
                self.node.record_error(io::Error::last_os_error());
                return;
            }
            self.node
                .counters
                .bytes_written
                .fetch_add((resident * PAGE) as u64, Ordering::Relaxed);
            written = (resident * PAGE) as u64;
            st.on_disk = true;
        }
        // SAFETY: dropping the pages of a shared file mapping keeps their contents in the file
        // (modified pages stay in the page cache until written back); later accesses fault
        // them back in.
        unsafe {
            libc::madvise(ptr.cast(), map_len, libc::MADV_DONTNEED);
        }
        let drop_cache = sync || !keep_page_cache();
        if drop_cache {
            // The page cache is not left to the kernel's reclaim: under memory pressure it
            // evicts the least recently used pages, which in a rank rotation are the ones
            // needed soonest, and it counts against the same memory as the budget. Pages under
            // write-back are skipped here and dropped later (below).
            drop_page_cache(file, 0, map_len);
        }
        if drop_cache && !sync && written > 0 {
            self.node.defer_drop(Arc::downgrade(self), st.gen);
        }
        let reserved = if st.loaded {
            map_len as u64
        } else {
            st.partial
        };
        st.loaded = false;
        st.partial = 0;
        st.dirty = false;
        self.loaded_fast.store(false, Ordering::Release);
        self.dirty_fast.store(false, Ordering::Relaxed);
        self.node.counters.unloads.fetch_add(1, Ordering::Relaxed);
        self.node.release(self.owner, reserved);
        if let Some(t0) = t0 {
            self.trace("unload", t0, written);
        }
    }

    /// Drops the region's pages from the page cache if it was not loaded or prefetched since
    /// the unload that handed them to write-back (generation `gen`). Pages still being written
    /// stay for the kernel to reclaim.
    pub(crate) fn drop_written(&self, gen: u64) {
        let Some(file) = &self.file else {
            return;
        };
        let st = lock(&self.state);
        if st.gen != gen || st.loaded || st.partial > 0 {
            return;
        }
        drop_page_cache(file, 0, self.map_len());
    }

    /// The owner blocks: records whether the region is in its working set (loaded now).
    pub(crate) fn note_block(&self) {
        if self.file.is_none() {
            return;
        }
        let mut st = lock(&self.state);
        st.warm = st.loaded || st.partial > 0;
    }

    /// Asks the kernel to read the unloaded allocation into the page cache in the background,
    /// if it is in the owner's working set.
    pub(crate) fn prefetch(&self) {
        if self.file.is_none() || self.loaded_fast.load(Ordering::Acquire) {
            return;
        }
        let mut st = lock(&self.state);
        if st.loaded || !st.on_disk || !st.warm {
            return;
        }
        st.gen += 1;
        // SAFETY: the whole mapping, page-aligned; MADV_WILLNEED only starts readahead.
        unsafe { libc::madvise(self.ptr().cast(), self.map_len(), libc::MADV_WILLNEED) };
        self.node
            .counters
            .prefetched_bytes
            .fetch_add(self.map_len() as u64, Ordering::Relaxed);
    }

    /// Records a trace interval of this region's owner from `t0` to now.
    fn trace(&self, name: &'static str, t0: u64, bytes: u64) {
        let track = match self.owner {
            Owner::Rank(l) => self.node.first_rank + l as u32,
            Owner::Node => crate::trace::NODE_TRACK,
        };
        let t1 = crate::trace::now();
        crate::trace::interval(
            name,
            "memory",
            self.node.node_id,
            track,
            t0,
            t1,
            Some(bytes),
        );
    }

    /// Drops the contents without writing them (the next access reads zeros).
    pub(crate) fn discard(&self) {
        let mut st = lock(&self.state);
        let (ptr, map_len) = (self.ptr(), self.map_len());
        let Some(file) = &self.file else {
            // SAFETY: dropping the pages of our own private anonymous mapping: later accesses
            // read zeros, which is what discarding means.
            unsafe { libc::madvise(ptr.cast(), map_len, libc::MADV_DONTNEED) };
            return;
        };
        // SAFETY: punching a hole in our own file within its length; the mapping sees zeros.
        unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                0,
                map_len as i64,
            );
            libc::madvise(ptr.cast(), map_len, libc::MADV_DONTNEED);
        }
        // The blocks must be there again when the pages are written back.
        if let Err(e) = fallocate(file, 0, map_len) {
            self.node.record_error(self.node.spill().error(e));
        }
        st.dirty = false;
        st.on_disk = false;
        self.dirty_fast.store(false, Ordering::Relaxed);
    }

    /// Grows the mapping to hold at least `bytes` bytes (the new part reads as zeros).
    /// Only the owner calls this, while it holds the only reference to the contents.
    fn grow(self: &Arc<Self>, bytes: usize) -> io::Result<()> {
        let st = lock(&self.state);
        let old = self.map_len();
        let new = map_len_for(bytes);
        if new <= old {
            return Ok(());
        }
        if let Some(file) = &self.file {
            file.set_len(new as u64)
                .and_then(|()| fallocate(file, old, new))
                .map_err(|e| self.node.spill().error(e))?;
        }
        // SAFETY: remaps our own mapping of `old` bytes to `new` bytes of the same file (which
        // now has that length) or of anonymous memory; MREMAP_MAYMOVE lets the kernel move it
        // (keeping the contents); no slice of the old
        // mapping is alive (the owner holds `&mut SbVec`, and other ranks only read a buffer
        // while its owner is inside a collective, never while it grows).
        let ptr = unsafe { libc::mremap(self.ptr().cast(), old, new, libc::MREMAP_MAYMOVE) };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        if self.file.is_none() {
            advise_huge(ptr.cast(), new);
        }
        let old_ptr = self.ptr() as usize;
        self.ptr.store(ptr.cast(), Ordering::Release);
        self.map_len.store(new, Ordering::Release);
        let delta = (new - old) as u64;
        self.node.allocated(self.owner, delta);
        if st.loaded {
            self.node.reserve(self.owner, delta);
        }
        if let Owner::Rank(_) = self.owner {
            self.node.map_address(self, Some(old_ptr));
        }
        Ok(())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        let map_len = self.map_len();
        self.node.unmap_address(self.ptr() as usize);
        self.node.freed(self.owner, map_len as u64);
        let (loaded, partial, on_disk) = {
            let st = lock(&self.state);
            (st.loaded, st.partial, st.on_disk)
        };
        if loaded {
            self.node.release(self.owner, map_len as u64);
        } else if partial > 0 {
            self.node.release(self.owner, partial);
        } else if on_disk {
            // Read back by other ranks (collectives reading this buffer in place) since the
            // last unload.
            let read = self.resident_pages() * PAGE;
            self.node
                .counters
                .bytes_read
                .fetch_add(read as u64, Ordering::Relaxed);
        }
        // SAFETY: unmapping the mapping created in `new` (or moved by `grow`); no slice can
        // outlive the SbVec that owns the last reference to this region.
        unsafe {
            libc::munmap(self.ptr().cast(), map_len);
        }
    }
}

/// Whether unloads write back synchronously and drop the page cache (`SPILLWAY_SYNC_UNLOAD=1`).
/// Drops the clean, unmapped pages of `file`'s bytes `[start, start + len)` from the page
/// cache (their contents are in the file; dirty and mapped pages stay).
fn drop_page_cache(file: &File, start: usize, len: usize) {
    // SAFETY: advice on our own open descriptor; it changes no data.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            start as i64,
            len as i64,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

/// `SPILLWAY_KEEP_PAGE_CACHE=1`: unloads leave the page cache to the kernel's reclaim (for
/// measuring what dropping it gains).
fn keep_page_cache() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SPILLWAY_KEEP_PAGE_CACHE").is_some_and(|v| v == "1"))
}

fn sync_unload() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SPILLWAY_SYNC_UNLOAD").is_some_and(|v| v == "1"))
}

enum Storage<T> {
    /// Below one page: ordinary heap memory (a mapping would waste a page and a memory map).
    Heap(Vec<T>),
    Mapped(Arc<Region>),
}

/// A growable array of plain data whose pages live in a spill file and are kept in memory only
/// as the node's memory policy allows (SBMA's storage-backed allocation). On a node without a
/// memory budget it is plain anonymous memory (huge pages when large) that is never unloaded.
///
/// # Semantics
/// Accessing the contents ([`as_slice`](Self::as_slice), [`as_mut_slice`](Self::as_mut_slice),
/// or through `Deref`) loads the allocation under the node budget; blocking calls may unload it
/// (see [`Policy`]). Unloading never changes the contents and never invalidates a slice. New
/// elements are zero. As in SBMA, allocations smaller than one page stay on the ordinary heap
/// (they are too small to be worth a mapping) and count as always resident.
///
/// # Errors
/// Creation and growth fail with an I/O error naming the spill directory when it cannot hold
/// the data.
pub struct SbVec<T: Pod> {
    storage: Storage<T>,
    len: usize,
    node: Arc<NodeMem>,
    owner: usize,
    _t: PhantomData<T>,
}

fn bytes_of<T>(len: usize) -> Result<usize, crate::Error> {
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or(crate::Error::InvalidArgument(
            "storage-backed array too large",
        ))
}

impl<T: Pod> SbVec<T> {
    /// An empty array owned by `rank` with room for `capacity` elements.
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the allocation.
    pub fn with_capacity(rank: &crate::Rank, capacity: usize) -> Result<SbVec<T>, crate::Error> {
        let (node, local) = rank.node_memory();
        let bytes = bytes_of::<T>(capacity)?;
        let storage = if bytes < PAGE {
            Storage::Heap(Vec::with_capacity(capacity))
        } else {
            Storage::Mapped(Region::new(node, Owner::Rank(local), bytes)?)
        };
        Ok(SbVec {
            storage,
            len: 0,
            node: Arc::clone(node),
            owner: local,
            _t: PhantomData,
        })
    }

    /// A zero-filled array of `len` elements owned by `rank`.
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the allocation.
    pub fn zeroed(rank: &crate::Rank, len: usize) -> Result<SbVec<T>, crate::Error> {
        let mut v = SbVec::with_capacity(rank, len)?;
        match &mut v.storage {
            Storage::Heap(h) => h.resize(len, T::zeroed()),
            Storage::Mapped(_) => {}
        }
        v.len = len;
        Ok(v)
    }

    /// A copy of `data` owned by `rank`.
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the allocation.
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

    /// Elements the array holds without growing.
    pub fn capacity(&self) -> usize {
        match &self.storage {
            Storage::Heap(h) => h.capacity(),
            Storage::Mapped(r) => r.map_len() / std::mem::size_of::<T>().max(1),
        }
    }

    /// The contents, loaded for reading.
    pub fn as_slice(&self) -> &[T] {
        match &self.storage {
            Storage::Heap(h) => h,
            Storage::Mapped(r) => {
                r.ensure_loaded(false);
                // SAFETY: the mapping is at least `len * size_of::<T>()` bytes, page-aligned
                // (so aligned for any Pod type up to 4096), zero-initialised or written through
                // typed slices, and every bit pattern is a valid `T: Pod`. The borrow of `self`
                // keeps the mapping alive and unmoved (it moves only in `reserve`, which takes
                // `&mut self`).
                unsafe { std::slice::from_raw_parts(r.ptr().cast::<T>(), self.len) }
            }
        }
    }

    /// The contents, loaded for writing.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.storage {
            Storage::Heap(h) => h,
            Storage::Mapped(r) => {
                r.ensure_loaded(true);
                // SAFETY: as in `as_slice`; `&mut self` makes this the only live slice of the
                // mapping (eviction by another rank changes residency only, never contents).
                unsafe { std::slice::from_raw_parts_mut(r.ptr().cast::<T>(), self.len) }
            }
        }
    }

    /// Elements `range` for reading, loading only their pages (not the whole allocation, as
    /// [`as_slice`](Self::as_slice) does under the aggressive policies): for code that walks a
    /// large array in pieces, one piece per blocking call.
    ///
    /// # Panics
    /// If `range` is out of bounds.
    pub fn range(&self, range: std::ops::Range<usize>) -> &[T] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "range {range:?} out of bounds of {} elements",
            self.len
        );
        match &self.storage {
            Storage::Heap(h) => &h[range],
            Storage::Mapped(r) => {
                let size = std::mem::size_of::<T>();
                r.ensure_range_loaded(range.start * size, range.len() * size, false);
                // SAFETY: as in `as_slice`, for a part of the elements.
                unsafe {
                    std::slice::from_raw_parts(r.ptr().cast::<T>().add(range.start), range.len())
                }
            }
        }
    }

    /// Elements `range` for writing, loading only their pages (see [`range`](Self::range)).
    ///
    /// # Panics
    /// If `range` is out of bounds.
    pub fn range_mut(&mut self, range: std::ops::Range<usize>) -> &mut [T] {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "range {range:?} out of bounds of {} elements",
            self.len
        );
        match &mut self.storage {
            Storage::Heap(h) => &mut h[range],
            Storage::Mapped(r) => {
                let size = std::mem::size_of::<T>();
                r.ensure_range_loaded(range.start * size, range.len() * size, true);
                // SAFETY: as in `as_mut_slice`, for a part of the elements.
                unsafe {
                    std::slice::from_raw_parts_mut(
                        r.ptr().cast::<T>().add(range.start),
                        range.len(),
                    )
                }
            }
        }
    }

    /// Makes room for at least `additional` more elements (growing geometrically).
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the larger allocation.
    pub fn reserve(&mut self, additional: usize) -> Result<(), crate::Error> {
        let needed = self
            .len
            .checked_add(additional)
            .ok_or(crate::Error::InvalidArgument(
                "storage-backed array too large",
            ))?;
        if needed <= self.capacity() {
            return Ok(());
        }
        let target = needed.max(self.capacity().saturating_mul(2)).max(8);
        let bytes = bytes_of::<T>(target)?;
        match &mut self.storage {
            Storage::Heap(h) if bytes < PAGE => {
                h.reserve(target - h.len());
            }
            Storage::Heap(h) => {
                let region = Region::new(&self.node, Owner::Rank(self.owner), bytes)?;
                region.ensure_loaded(true);
                // SAFETY: the new mapping holds at least `bytes >= len * size_of::<T>()` bytes.
                let dst =
                    unsafe { std::slice::from_raw_parts_mut(region.ptr().cast::<T>(), h.len()) };
                dst.copy_from_slice(h);
                self.storage = Storage::Mapped(region);
            }
            Storage::Mapped(r) => r.grow(bytes)?,
        }
        Ok(())
    }

    /// Appends `data`.
    ///
    /// # Errors
    /// An I/O error when the spill directory cannot hold the larger allocation.
    pub fn extend_from_slice(&mut self, data: &[T]) -> Result<(), crate::Error> {
        self.reserve(data.len())?;
        let start = self.len;
        self.len = start + data.len();
        if let Storage::Heap(h) = &mut self.storage {
            h.extend_from_slice(data);
        } else {
            self.range_mut(start..start + data.len())
                .copy_from_slice(data);
        }
        Ok(())
    }

    /// Appends one element.
    ///
    /// # Errors
    /// As [`extend_from_slice`](Self::extend_from_slice).
    pub fn push(&mut self, value: T) -> Result<(), crate::Error> {
        self.extend_from_slice(std::slice::from_ref(&value))
    }

    /// Sets the length to `len`: shortens, or appends zeros.
    ///
    /// # Errors
    /// As [`extend_from_slice`](Self::extend_from_slice).
    pub fn resize(&mut self, len: usize) -> Result<(), crate::Error> {
        if len <= self.len {
            self.len = len;
            if let Storage::Heap(h) = &mut self.storage {
                h.truncate(len);
            }
            return Ok(());
        }
        self.reserve(len - self.len)?;
        let start = self.len;
        match &mut self.storage {
            Storage::Heap(h) => h.resize(len, T::zeroed()),
            Storage::Mapped(_) => {}
        }
        self.len = len;
        if let Storage::Mapped(_) = self.storage {
            // Contents beyond the old length may hold earlier data (after a shrink).
            self.range_mut(start..len).fill(T::zeroed());
        }
        Ok(())
    }

    /// Writes back and releases this allocation now, whatever the policy.
    pub fn unload(&self) {
        if let Storage::Mapped(r) = &self.storage {
            r.unload();
        }
    }

    /// Forgets the contents without writing them back (a buffer about to be overwritten);
    /// afterwards the array reads as zeros.
    pub fn discard(&mut self) {
        match &mut self.storage {
            Storage::Heap(h) => h.fill(T::zeroed()),
            Storage::Mapped(r) => r.discard(),
        }
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
