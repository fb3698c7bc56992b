//! `bytes_used()` against the allocator: a counting global allocator measures the heap bytes
//! a structure really holds, which must equal what the structure reports (minus its own
//! inline size, which lives on the stack here). Only the calling thread's allocations count:
//! the test harness's own threads allocate at times of their choosing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use spillway_structures::dyngraph::{Bcsr, Daa, Dcaa, Diaa, DynGraph, FoldPolicy, LinkedLists};

/// The system allocator, counting live requested bytes per thread.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

/// Adds `delta` to this thread's count (nothing while the thread is being torn down).
fn count(delta: isize) {
    let _ = LIVE.try_with(|l| l.set(l.get() + delta));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract is the system allocator's; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract, which we pass on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator (hence `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `realloc`'s contract, which we pass on unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.with(Cell::get)
}

/// A stream of inserts and deletes with locality (so that DIAA/DCAA form intervals).
fn stream() -> Vec<(bool, u32, u32)> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = Vec::with_capacity(60_000);
    for i in 0..60_000u32 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let u = (state % 2000) as u32;
        let v = if state & 1 == 0 {
            u + (state >> 20) as u32 % 16
        } else {
            (state >> 24) as u32 % 50_000
        };
        out.push((i % 5 != 4, u, v));
    }
    out
}

fn measure<G: DynGraph>(make: impl FnOnce() -> G, ops: &[(bool, u32, u32)]) {
    let before = live();
    let mut g = make();
    for &(ins, u, v) in ops {
        if ins {
            g.insert(u, v);
        } else {
            g.delete(u, v);
        }
    }
    let held = live() - before;
    let reported = g.bytes_used() - std::mem::size_of::<G>();
    assert_eq!(
        held as usize,
        reported,
        "{}: allocator sees {held} heap bytes, bytes_used reports {reported}",
        g.name()
    );
    drop(g);
    assert_eq!(live(), before, "everything is freed");
}

#[test]
fn bytes_used_is_what_the_allocator_holds() {
    let ops = stream();
    // Warm-up outside any measurement: whatever the process allocates once and keeps (lazily
    // initialised runtime state of the test thread) must not count against a structure.
    for _ in 0..2 {
        let mut g = LinkedLists::new();
        for &(_, u, v) in &ops[..1000] {
            g.insert(u, v);
        }
        assert!(g.bytes_used() > 0);
    }
    measure(LinkedLists::new, &ops);
    measure(|| LinkedLists::with_vertices(3000), &ops);
    measure(|| Bcsr::with_vertices(10, FoldPolicy::Fraction(0.25)), &ops);
    measure(|| Bcsr::with_vertices(0, FoldPolicy::Every(999)), &ops);
    measure(|| Bcsr::with_vertices(0, FoldPolicy::Manual), &ops);
    measure(Daa::new, &ops);
    measure(Diaa::new, &ops);
    measure(Dcaa::new, &ops);
}
