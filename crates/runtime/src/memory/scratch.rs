//! Working memory for one stretch of computation between blocking calls ([`Scratch`]): the
//! arrays an iteration writes before it reads them and no longer needs once it blocks (sums,
//! contributions, next values).
//!
//! Out of core such arrays cost the most when they are storage-backed: every iteration
//! discards them and faults them in again, page by page, in a shared file mapping (a page of
//! the page cache and of the file system per 4 KiB; PageRank spent most of its system time
//! there). A scratch buffer is private anonymous memory instead, taken from a pool of the
//! node and given back when dropped, so that the rank the worker runs next reuses the same
//! pages: after the first iteration nothing is faulted in. While it exists (in use or
//! pooled) it counts against the node's budget, as memory of the node.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytemuck::Pod;

use super::{lock, NodeMem, Owner};

/// Transparent huge pages are requested for buffers of at least this many bytes.
const HUGE: usize = 2 << 20;

/// One anonymous mapping of the pool.
pub(crate) struct Block {
    ptr: *mut u8,
    cap: usize,
}

// SAFETY: the mapping is process memory owned by the block; whoever holds the block is the
// only user of its pages.
unsafe impl Send for Block {}

impl Block {
    fn map(cap: usize) -> std::io::Result<Block> {
        let ptr = super::pages::map_anonymous(cap)?;
        if cap >= HUGE {
            // SAFETY: advice on the whole mapping just made; it changes no contents.
            unsafe { libc::madvise(ptr.cast(), cap, libc::MADV_HUGEPAGE) };
        }
        Ok(Block { ptr, cap })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once, with no slice of it alive (a
        // block in use belongs to a `Scratch`, whose borrows end before it drops it).
        unsafe { libc::munmap(self.ptr.cast(), self.cap) };
    }
}

/// The node's free scratch blocks.
#[derive(Default)]
pub(crate) struct Pool {
    free: std::sync::Mutex<Vec<Block>>,
    /// Bytes of blocks in use, and the most ever in use at once: the pool keeps that much
    /// (the scratch of the ranks that run at once), within a quarter of the budget.
    in_use: AtomicUsize,
    peak: AtomicUsize,
}

/// The capacity a buffer of `bytes` gets: whole pages, rounded up to an eighth of the next
/// power of two, so that the arrays of ranks of slightly different sizes share blocks.
fn capacity_for(bytes: usize) -> usize {
    let page = super::region::PAGE;
    let bytes = bytes.max(1).next_multiple_of(page);
    let step = (bytes.next_power_of_two() / 8).max(page);
    bytes.next_multiple_of(step)
}

impl NodeMem {
    /// Takes a block of at least `bytes` from the pool, or maps one (counted against the
    /// budget); says whether its contents are zero (freshly mapped).
    fn take_scratch(&self, bytes: usize) -> std::io::Result<(Block, bool)> {
        let cap = capacity_for(bytes);
        {
            let mut free = lock(&self.scratch.free);
            // The smallest block that fits.
            let best = (0..free.len())
                .filter(|&i| free[i].cap >= cap)
                .min_by_key(|&i| free[i].cap);
            if let Some(i) = best {
                let b = free.swap_remove(i);
                self.count_scratch_in(b.cap);
                return Ok((b, false));
            }
        }
        self.reserve(Owner::Node, cap as u64);
        match Block::map(cap) {
            Ok(b) => {
                self.count_scratch_in(b.cap);
                Ok((b, true))
            }
            Err(e) => {
                self.release(Owner::Node, cap as u64);
                Err(e)
            }
        }
    }

    fn count_scratch_in(&self, cap: usize) {
        let now = self.scratch.in_use.fetch_add(cap, Ordering::Relaxed) + cap;
        self.scratch.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Gives a block back to the pool, which holds, in use and free, no more than was ever in
    /// use at once (within a quarter of the budget), and unmaps the smallest free blocks
    /// beyond: it converges on blocks that fit the largest requests of the ranks that run at
    /// once.
    fn give_scratch(&self, block: Block) {
        let in_use = self.scratch.in_use.fetch_sub(block.cap, Ordering::Relaxed) - block.cap;
        let peak = self.scratch.peak.load(Ordering::Relaxed);
        let most = self.budget().map_or(peak, |b| peak.min((b / 4) as usize));
        let keep = most.saturating_sub(in_use);
        let mut free = lock(&self.scratch.free);
        free.push(block);
        let mut total: usize = free.iter().map(|b| b.cap).sum();
        while total > keep {
            let smallest = (0..free.len())
                .min_by_key(|&i| free[i].cap)
                .expect("the pool is not empty");
            let b = free.swap_remove(smallest);
            total -= b.cap;
            self.release(Owner::Node, b.cap as u64);
            drop(b);
        }
    }
}

/// Zero-filled working memory of `len` elements for one stretch of computation between
/// blocking calls, from [`Rank::scratch`](crate::Rank::scratch): private anonymous memory
/// (transparent huge pages from 2 MiB), never written to storage. Dropping it gives its pages
/// back to the node for the next rank to use.
///
/// # Semantics
/// Counted against the node's memory budget while it exists, but never unloaded: a buffer
/// kept across a blocking call stays in memory while its rank waits. That is the way to keep
/// small, hot data resident out of core (PageRank's vertex values when they take a small part
/// of the budget); anything else should be given back before the rank blocks.
pub struct Scratch<T: Pod> {
    block: Option<Block>,
    len: usize,
    node: Arc<NodeMem>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Pod> Scratch<T> {
    pub(crate) fn new(node: &Arc<NodeMem>, len: usize) -> Result<Scratch<T>, crate::Error> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or(crate::Error::InvalidArgument("scratch length overflows"))?;
        let (block, zero) = node.take_scratch(bytes)?;
        let mut s = Scratch {
            block: Some(block),
            len,
            node: Arc::clone(node),
            _t: std::marker::PhantomData,
        };
        if !zero {
            s.fill(T::zeroed());
        }
        Ok(s)
    }
}

impl<T: Pod> std::ops::Deref for Scratch<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let b = self
            .block
            .as_ref()
            .expect("a live scratch buffer has its block");
        // SAFETY: the block maps at least `len * size_of::<T>()` bytes (checked in `new`),
        // page-aligned (so aligned for any `Pod` type), initialised (zero-filled), owned by
        // this value while it lives.
        unsafe { std::slice::from_raw_parts(b.ptr.cast(), self.len) }
    }
}

impl<T: Pod> std::ops::DerefMut for Scratch<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let b = self
            .block
            .as_ref()
            .expect("a live scratch buffer has its block");
        // SAFETY: as in `deref`; `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(b.ptr.cast(), self.len) }
    }
}

impl<T: Pod> Drop for Scratch<T> {
    fn drop(&mut self) {
        if let Some(b) = self.block.take() {
            self.node.give_scratch(b);
        }
    }
}

impl<T: Pod> std::fmt::Debug for Scratch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Scratch<{}>({} elements)",
            std::any::type_name::<T>(),
            self.len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::capacity_for;

    #[test]
    fn capacities_are_whole_pages_within_an_eighth_of_a_power_of_two() {
        assert_eq!(capacity_for(0), 4096);
        assert_eq!(capacity_for(4097), 8192);
        assert_eq!(capacity_for(1 << 20), 1 << 20);
        assert_eq!(capacity_for((1 << 20) + 1), (1 << 20) + (256 << 10));
        for bytes in [5000, 70_000, 1_234_567, 9_999_999] {
            let c = capacity_for(bytes);
            assert!(c >= bytes && c.is_multiple_of(4096), "{bytes} -> {c}");
            assert!(c < bytes + bytes / 4 + 8192, "{bytes} -> {c}");
        }
    }
}
