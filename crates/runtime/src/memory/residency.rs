//! When a [`Region`]'s pages are in memory: loading it (whole or by range) under the node
//! budget, unloading it (write-back, then dropping the pages and, a little later, the page
//! cache), prefetching it before its owner resumes, and discarding its contents.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::pages::{self, WriteBack};
use super::region::{Owner, Region, PAGE};
use super::{lock, Policy};

impl Region {
    /// Pages of the mapping resident in memory (mincore).
    pub(super) fn resident_pages(&self) -> usize {
        // SAFETY: the whole mapping, page-aligned.
        unsafe { pages::resident_pages(self.ptr(), self.map_len()) }
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
            // SAFETY: the whole mapping, page-aligned. A failed read leaves the pages to be
            // read when touched (and then fails there the same way).
            let _ = unsafe { pages::populate(self.ptr(), map_len) };
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
            // SAFETY: a page-aligned range inside the mapping (failure only costs the page
            // faults later).
            let _ = unsafe { pages::populate(self.ptr().add(start), end - start) };
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
        // The pages leave the process first, then the modified ones are written back (see
        // `pages`: writing back mapped pages write-protected them one by one, each with a TLB
        // shootdown: a quarter of an out-of-core PageRank's time went there). The write-back
        // proceeds while the rank is blocked and others run (the file's blocks were allocated
        // when it was made, so it cannot fail for lack of space later);
        // SPILLWAY_SYNC_UNLOAD=1 waits for it instead.
        let write = match (st.dirty, sync) {
            (false, _) => WriteBack::None,
            (true, false) => WriteBack::Start,
            (true, true) => WriteBack::Wait,
        };
        // SAFETY: the whole mapping of `file`, page-aligned; later accesses fault the pages
        // back in.
        if let Err(e) = unsafe { pages::unload(ptr, map_len, file, 0, write) } {
            self.node.record_error(e);
            return;
        }
        if st.dirty {
            self.node
                .counters
                .bytes_written
                .fetch_add((resident * PAGE) as u64, Ordering::Relaxed);
            written = (resident * PAGE) as u64;
            st.on_disk = true;
        }
        let drop_cache = sync || !keep_page_cache();
        if drop_cache {
            // The page cache is not left to the kernel's reclaim: under memory pressure it
            // evicts the least recently used pages, which in a rank rotation are the ones
            // needed soonest, and it counts against the same memory as the budget. Pages under
            // write-back are skipped here and dropped later (below).
            pages::drop_cache(file, 0, map_len);
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
        pages::drop_cache(file, 0, self.map_len());
    }

    /// The owner blocks: records whether the region is in its working set (loaded now, or at
    /// least half of it). A region the owner touches a small range at a time (a loader's
    /// rounds over its edges) is not: read ahead whole for every range, it made loading R-MAT
    /// scale 24 at 64 ranks under a 256 MiB budget read 39 GB from the device in 54 s (29 GB
    /// in 42.5 s without).
    ///
    /// `after` is the bit of the wait the turn that ends began after (0: not known).
    pub(crate) fn note_block(&self, after: u64) {
        if self.file.is_none() {
            return;
        }
        let mut st = lock(&self.state);
        st.warm = st.loaded || st.partial >= self.map_len() as u64 / 2;
        st.seen_after |= after;
        if st.warm {
            st.touched_after |= after;
        } else {
            st.touched_after &= !after;
        }
    }

    /// Asks the kernel to read the unloaded allocation into the page cache in the background,
    /// if the owner is expected to touch it: it did the last time it resumed from the wait of
    /// bit `after`, or, with no such turn seen, in its last turn.
    pub(crate) fn prefetch(&self, after: u64) {
        if self.file.is_none() || self.loaded_fast.load(Ordering::Acquire) {
            return;
        }
        let mut st = lock(&self.state);
        let expected = match st.seen_after & after {
            0 => st.warm,
            _ => st.touched_after & after != 0,
        };
        if st.loaded || !st.on_disk || !expected {
            return;
        }
        st.gen += 1;
        // SAFETY: the whole mapping, page-aligned.
        unsafe { pages::prefetch(self.ptr(), self.map_len()) };
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
        // SAFETY: the whole mapping of `file`; its contents are not needed any more. The
        // blocks must be there again when the pages are written back.
        if let Err(e) = unsafe { pages::discard(ptr, map_len, file, 0) } {
            self.node.record_error(self.node.spill().error(e));
        }
        st.dirty = false;
        st.on_disk = false;
        self.dirty_fast.store(false, Ordering::Relaxed);
    }
}

/// `SPILLWAY_KEEP_PAGE_CACHE=1`: unloads leave the page cache to the kernel's reclaim (for
/// measuring what dropping it gains).
fn keep_page_cache() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SPILLWAY_KEEP_PAGE_CACHE").is_some_and(|v| v == "1"))
}

/// Whether unloads write back synchronously and drop the page cache (`SPILLWAY_SYNC_UNLOAD=1`).
fn sync_unload() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SPILLWAY_SYNC_UNLOAD").is_some_and(|v| v == "1"))
}
