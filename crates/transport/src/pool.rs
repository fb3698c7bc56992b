//! A process-wide pool of large message buffers.
//!
//! Large buffers (at least [`POOLED_MIN`] bytes) are allocated in power-of-two size classes and
//! returned to the pool when dropped, up to a limit of cached bytes. A fresh large allocation
//! costs one page fault per page it touches (plus the kernel's zeroing); a recycled one costs
//! nothing. Cached buffers count in the process's resident set, so the limit is small and a job
//! with a memory budget lowers it ([`set_pool_limit`]).
//!
//! Every byte of a pooled allocation is initialised when it is made (it is allocated zeroed),
//! so buffers handed out again expose old, initialised contents; callers that need zeros ask
//! for them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Buffers of at least this many bytes are pooled; smaller ones come from the allocator.
pub const POOLED_MIN: usize = 64 << 10;
const POOLED_MIN_WORDS: usize = POOLED_MIN / 16;
/// Fresh buffers of this size and more are advised to use transparent huge pages.
const HUGE_PAGE_MIN: usize = 4 << 20;
const CLASSES: usize = 48;

static LIMIT: AtomicUsize = AtomicUsize::new(64 << 20);

struct Pool {
    classes: Vec<Vec<Vec<u128>>>,
    cached: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    classes: Vec::new(),
    cached: 0,
});

fn lock() -> std::sync::MutexGuard<'static, Pool> {
    crate::sync::lock(&POOL)
}

/// Sets the most bytes the pool keeps cached (default 64 MiB); cached buffers beyond it are
/// freed at once.
pub fn set_pool_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
    let mut pool = lock();
    while pool.cached > bytes {
        let Some(class) = pool.classes.iter_mut().rev().find(|c| !c.is_empty()) else {
            break;
        };
        let v = class.pop().expect("non-empty class");
        pool.cached -= v.capacity() * 16;
    }
}

/// Bytes currently cached by the pool.
pub fn pool_cached_bytes() -> usize {
    lock().cached
}

fn class_of_capacity(words: usize) -> usize {
    (usize::BITS - 1 - words.leading_zeros()) as usize
}

/// A vector of `words` initialised words: recycled from the pool when possible.
pub(crate) fn take(words: usize) -> Vec<u128> {
    if words < POOLED_MIN_WORDS {
        return vec![0u128; words];
    }
    let cap = words.next_power_of_two();
    let class = class_of_capacity(cap);
    let recycled = {
        let mut pool = lock();
        let v = pool.classes.get_mut(class).and_then(Vec::pop);
        if let Some(v) = &v {
            pool.cached -= v.capacity() * 16;
        }
        v
    };
    let mut v = match recycled {
        Some(v) => v,
        None => {
            // Allocated zeroed, so every word of the capacity is initialised from now on.
            let v = vec![0u128; cap];
            if cap * 16 >= HUGE_PAGE_MIN {
                advise_huge_pages(&v);
            }
            v
        }
    };
    if v.len() < words {
        // SAFETY: the whole capacity was initialised when the vector was allocated zeroed
        // (`vec![0; cap]`) and u128 is `Copy`, so shortening it never de-initialised anything;
        // `words <= cap == capacity`.
        unsafe { v.set_len(words) };
    } else {
        v.truncate(words);
    }
    v
}

/// Returns a vector's storage to the pool (or frees it).
pub(crate) fn give(v: Vec<u128>) {
    let cap = v.capacity();
    if cap < POOLED_MIN_WORDS || !cap.is_power_of_two() {
        return;
    }
    let class = class_of_capacity(cap);
    let limit = LIMIT.load(Ordering::Relaxed);
    let mut pool = lock();
    if pool.cached + cap * 16 > limit {
        return;
    }
    if pool.classes.len() < CLASSES {
        pool.classes.resize_with(CLASSES, Vec::new);
    }
    pool.cached += cap * 16;
    pool.classes[class].push(v);
}

fn advise_huge_pages(words: &[u128]) {
    advise_huge(words.as_ptr() as *const u8, std::mem::size_of_val(words));
}

/// Asks the kernel to back the whole 2 MiB pages inside `[ptr, ptr + len)` with transparent
/// huge pages (`MADV_HUGEPAGE`; effective for pages not yet touched). Large structures read
/// at random (hash tables) then miss the TLB far less. A hint: failure is ignored.
#[cfg(target_os = "linux")]
pub fn advise_huge(ptr: *const u8, len: usize) {
    const HUGE: usize = 2 << 20;
    let start = ptr as usize;
    let end = start + len;
    let first = start.next_multiple_of(HUGE);
    let last = end / HUGE * HUGE;
    if last > first {
        // SAFETY: madvise only changes how the kernel backs [first, last), never the contents
        // of those pages, and an address range that is not mapped makes it fail (ignored), not
        // misbehave.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

/// Asks for huge pages (not available here: does nothing).
#[cfg(not(target_os = "linux"))]
pub fn advise_huge(_ptr: *const u8, _len: usize) {}

/// Asks the CPU to bring the cache line at `p` into the first-level cache: for hash tables
/// that look up a slot a few steps after computing where it is. A hint: it never faults,
/// whatever the address.
#[inline]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_requests_bypass_the_pool() {
        let v = take(3);
        assert_eq!(v.len(), 3);
        assert!(v.iter().all(|&w| w == 0));
    }

    #[test]
    fn classes_round_up_to_powers_of_two() {
        let v = take(POOLED_MIN_WORDS + 1);
        assert_eq!(v.len(), POOLED_MIN_WORDS + 1);
        assert_eq!(v.capacity(), 2 * POOLED_MIN_WORDS);
        give(v);
        let w = take(2 * POOLED_MIN_WORDS);
        assert_eq!(w.capacity(), 2 * POOLED_MIN_WORDS);
    }
}
