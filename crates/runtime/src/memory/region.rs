//! A storage-backed allocation's mapping, [`Region`]: made, grown and unmapped here, its
//! residency (load, unload, prefetch) in [`super::residency`]; [`SbVec`](super::SbVec) is the
//! typed array on top.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{lock, pages, NodeMem};

pub(crate) const PAGE: usize = 4096;

/// Who an allocation belongs to: a rank of the node (its data follows the rank's scheduling)
/// or the node itself (a collective buffer, loaded while it exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Rank(usize),
    Node,
}

pub(super) struct RegionState {
    pub(super) loaded: bool,
    /// Bytes reserved for parts loaded by range accesses while not wholly loaded.
    pub(super) partial: u64,
    pub(super) dirty: bool,
    /// Some contents live only in the file (the region was unloaded after being written).
    pub(super) on_disk: bool,
    /// The owner had the region (or part of it) loaded when it last blocked: it belongs to
    /// the rank's working set, and is worth prefetching before the rank resumes. A region
    /// the rank did not touch between two blocking calls (a graph kept for later while the
    /// iterations run) is left on disk until it is touched again.
    pub(super) warm: bool,
    /// The waits (by [`wait_key`](super::node::wait_key) bit) after which the owner's turn
    /// was seen, and those after which it touched the region: a rank whose turns alternate
    /// (compute after a broadcast, only a buffer after a reduce's receive) is read ahead
    /// for what it touched the last time it resumed from the same wait.
    pub(super) seen_after: u64,
    pub(super) touched_after: u64,
    /// Counts loads and prefetches: a drop of the page cache deferred at an unload (see
    /// [`NodeMem::drop_written`]) is skipped if the region was loaded or prefetched since.
    pub(super) gen: u64,
}

/// A transparent huge page: anonymous mappings ask for them on the part their owner uses.
const HUGE_PAGE: usize = 2 << 20;

/// One storage-backed allocation: a shared mapping of an unnamed spill file, or, on a node
/// without a memory budget (where nothing is ever written out), a private anonymous mapping
/// that may use transparent huge pages: random access then costs no page-table walks per
/// 4 KiB and no file-system page faults.
pub(crate) struct Region {
    /// The spill file; `None` for an anonymous mapping.
    pub(super) file: Option<File>,
    /// Start of the mapping; changes only when the region grows (under `state`).
    pub(super) ptr: AtomicPtr<u8>,
    /// Mapped length (whole pages, at least one); changes only when the region grows.
    pub(super) map_len: AtomicUsize,
    pub(super) node: Arc<NodeMem>,
    pub(super) owner: Owner,
    /// Mirrors of `state.loaded` / `state.dirty`, so that the owner's accesses while it runs
    /// cost an atomic load instead of a lock.
    pub(super) loaded_fast: AtomicBool,
    pub(super) dirty_fast: AtomicBool,
    /// Whether an anonymous mapping is advised for huge pages (see [`Region::in_use`]).
    huge: AtomicBool,
    pub(super) state: Mutex<RegionState>,
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

/// Tells the kernel whether the anonymous mapping of `len` bytes at `ptr` should be backed by
/// transparent huge pages (a hint: failure, e.g. THP disabled, changes nothing). Always the
/// whole mapping: advice on a part would split it in two, and `mremap` cannot grow a range
/// of two mappings (EFAULT).
fn advise_huge(ptr: *mut u8, len: usize, huge: bool) {
    let advice = if huge {
        libc::MADV_HUGEPAGE
    } else {
        libc::MADV_NOHUGEPAGE
    };
    // SAFETY: exactly one page-aligned mapping of ours; the advice changes only how the
    // kernel backs it, never its contents.
    unsafe { libc::madvise(ptr.cast(), len, advice) };
}

impl Region {
    pub(crate) fn new(node: &Arc<NodeMem>, owner: Owner, bytes: usize) -> io::Result<Arc<Region>> {
        let map_len = map_len_for(bytes);
        let file = match node.budget() {
            Some(_) => Some(
                pages::spill_file(node.spill().dir(), map_len)
                    .map_err(|e| node.spill().error(e))?,
            ),
            None => None,
        };
        let ptr = match &file {
            Some(f) => pages::map_shared(f, map_len)?,
            None => pages::map_anonymous(map_len)?,
        };
        if file.is_none() && map_len >= HUGE_PAGE {
            // Nothing is in use yet: a huge page faulted in by the first write to a large
            // reservation would hold 2 MiB for a few bytes (a rank's buffer sized for a
            // round of a big input, holding a small one), also where THP is "always".
            advise_huge(ptr.cast(), map_len, false);
        }
        let region = Arc::new(Region {
            file,
            ptr: AtomicPtr::new(ptr.cast()),
            map_len: AtomicUsize::new(map_len),
            node: Arc::clone(node),
            owner,
            loaded_fast: AtomicBool::new(false),
            dirty_fast: AtomicBool::new(false),
            huge: AtomicBool::new(false),
            state: Mutex::new(RegionState {
                loaded: false,
                partial: 0,
                dirty: false,
                on_disk: false,
                warm: true,
                seen_after: 0,
                touched_after: 0,
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

    /// The owner uses the first `bytes` of the mapping: an anonymous mapping asks for huge
    /// pages (random access then costs no page-table walks per 4 KiB) once that part holds a
    /// huge page and half the mapping. A huge page is made only where a page is touched, and
    /// the owner touches only the part in use: at most the huge page at its end is partly
    /// unused. Only the owner calls this.
    pub(crate) fn in_use(&self, bytes: usize) {
        if self.file.is_some() || self.huge.load(Ordering::Relaxed) {
            return;
        }
        let map_len = self.map_len();
        if bytes >= HUGE_PAGE.max(map_len / 2) {
            advise_huge(self.ptr(), map_len, true);
            self.huge.store(true, Ordering::Relaxed);
        }
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
        pages::drop_cache(file, start, end - start);
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

    /// Grows the mapping to hold at least `bytes` bytes (the new part reads as zeros).
    /// Only the owner calls this, while it holds the only reference to the contents.
    pub(super) fn grow(self: &Arc<Self>, bytes: usize) -> io::Result<()> {
        let st = lock(&self.state);
        let old = self.map_len();
        let new = map_len_for(bytes);
        if new <= old {
            return Ok(());
        }
        if let Some(file) = &self.file {
            file.set_len(new as u64)
                .and_then(|()| pages::reserve(file, old, new))
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
        // The new part shares the mapping's advice: huge pages only where pages are touched,
        // within the part in use.
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
