//! Collectives built only on the BSP primitives (put, sync), in the style of LPF's collectives
//! library and Bulk's algorithms: they work in place on registered global slots, so a program
//! registers its buffers once and calls them in any superstep.
//!
//! Each function is collective (every rank calls it with the same root and lengths) and ends
//! with a sync. With `n` elements of `b` bytes each:
//!
//! | function | h-relation (bytes) | syncs | cost |
//! |---|---|---|---|
//! | [`broadcast`] (one phase) | `(p-1) n b` at the root | 1 | `(p-1) n b g + l` |
//! | [`broadcast_two_phase`] | `< 2 n b` | 2 | `2 n b g + 2l` |
//! | [`gather`] | `(p-1) n b` at the root | 1 | `(p-1) n b g + l` |
//! | [`scatter`] | `(p-1) n b` at the root | 1 | `(p-1) n b g + l` |
//! | [`allgather`] | `(p-1) n b` | 1 | `(p-1) n b g + l` |
//! | [`alltoall`] | `(p-1) n b` | 1 | `(p-1) n b g + l` |
//! | [`reduce`] | `(p-1) n b` at the root | 1 | `(p-1) n b g + l` + `(p-1) n` operations |
//! | [`allreduce`] | `< 2 n b` | 2 | `2 n b g + 2l` + `n` operations (reduce-scatter, then allgather) |
//!
//! The two-phase algorithms move `n/p` elements per rank and phase: they pay one more `l`
//! for a factor `p/2` less traffic, so they win when `n b g (p-1)/2 > l`.
//!
//! Each needs a message queue of at least `p` requests (each phase of a two-phase algorithm is
//! a superstep of its own).

use bytemuck::Pod;

use crate::context::Bsp;
use crate::error::{Error, Misuse, Result};
use crate::memory::Slot;

/// Block `i` of `p` nearly equal blocks of `n` elements: `(start, len)`.
pub fn block(n: usize, p: usize, i: usize) -> (usize, usize) {
    let base = n / p;
    let extra = n % p;
    let start = i * base + i.min(extra);
    (start, base + usize::from(i < extra))
}

fn check_len<T: Pod>(bsp: &Bsp<'_>, slot: Slot<T>, need: usize) -> Result<()> {
    let have = bsp.slice(slot).len();
    if have < need {
        return Err(Error::misuse(
            Misuse::OutOfBounds,
            format!("the collective needs {need} elements of {slot:?}, which holds {have}"),
            None,
        ));
    }
    Ok(())
}

/// Copies elements `off..off+n` of `slot` on `root` to the same place on every rank, in one
/// superstep: the root puts to everyone.
///
/// # Cost
/// `(p-1) n b g + l`: best for small `n` (see the module table).
///
/// # Errors
/// As [`Bsp::put`] and [`Bsp::sync`].
#[track_caller]
pub fn broadcast<T: Pod>(
    bsp: &mut Bsp<'_>,
    root: usize,
    slot: Slot<T>,
    off: usize,
    n: usize,
) -> Result<()> {
    if bsp.pid() == root {
        for q in (0..bsp.nprocs()).filter(|&q| q != root) {
            bsp.put(slot, off, q, slot, off, n)?;
        }
    }
    bsp.sync()
}

/// [`broadcast`] in two phases: the root scatters `p` blocks, then every rank sends its
/// block to everyone.
///
/// # Cost
/// `2 n b g + 2l` (each rank sends and receives under `n` elements per phase).
///
/// # Errors
/// As [`broadcast`].
#[track_caller]
pub fn broadcast_two_phase<T: Pod>(
    bsp: &mut Bsp<'_>,
    root: usize,
    slot: Slot<T>,
    off: usize,
    n: usize,
) -> Result<()> {
    let p = bsp.nprocs();
    let me = bsp.pid();
    if me == root {
        for q in (0..p).filter(|&q| q != root) {
            let (s, len) = block(n, p, q);
            if len > 0 {
                bsp.put(slot, off + s, q, slot, off + s, len)?;
            }
        }
    }
    bsp.sync()?;
    let (s, len) = block(n, p, me);
    if len > 0 {
        for q in (0..p).filter(|&q| q != me && q != root) {
            bsp.put(slot, off + s, q, slot, off + s, len)?;
        }
    }
    bsp.sync()
}

/// Every rank's elements `pid*n .. (pid+1)*n` of `slot` go to the same place on `root`.
///
/// # Cost
/// `(p-1) n b g + l`.
///
/// # Errors
/// As [`broadcast`]; [`Misuse::OutOfBounds`] when `slot` holds fewer than `p*n` elements.
#[track_caller]
pub fn gather<T: Pod>(bsp: &mut Bsp<'_>, root: usize, slot: Slot<T>, n: usize) -> Result<()> {
    check_len(bsp, slot, bsp.nprocs() * n)?;
    let me = bsp.pid();
    if me != root {
        bsp.put(slot, me * n, root, slot, me * n, n)?;
    }
    bsp.sync()
}

/// Elements `q*n .. (q+1)*n` of `slot` on `root` go to the same place on rank `q`.
///
/// # Cost
/// `(p-1) n b g + l`.
///
/// # Errors
/// As [`gather`].
#[track_caller]
pub fn scatter<T: Pod>(bsp: &mut Bsp<'_>, root: usize, slot: Slot<T>, n: usize) -> Result<()> {
    check_len(bsp, slot, bsp.nprocs() * n)?;
    if bsp.pid() == root {
        for q in (0..bsp.nprocs()).filter(|&q| q != root) {
            bsp.put(slot, q * n, q, slot, q * n, n)?;
        }
    }
    bsp.sync()
}

/// Every rank's elements `pid*n .. (pid+1)*n` of `slot` go to the same place on every rank.
///
/// # Cost
/// `(p-1) n b g + l`.
///
/// # Errors
/// As [`gather`].
#[track_caller]
pub fn allgather<T: Pod>(bsp: &mut Bsp<'_>, slot: Slot<T>, n: usize) -> Result<()> {
    check_len(bsp, slot, bsp.nprocs() * n)?;
    let me = bsp.pid();
    for q in (0..bsp.nprocs()).filter(|&q| q != me) {
        bsp.put(slot, me * n, q, slot, me * n, n)?;
    }
    bsp.sync()
}

/// Block `q` (`n` elements) of `src` goes to rank `q`'s `dst` at block `pid`.
///
/// # Cost
/// `(p-1) n b g + l`.
///
/// # Errors
/// As [`gather`], for both slots.
#[track_caller]
pub fn alltoall<T: Pod>(bsp: &mut Bsp<'_>, src: Slot<T>, dst: Slot<T>, n: usize) -> Result<()> {
    let p = bsp.nprocs();
    check_len(bsp, src, p * n)?;
    check_len(bsp, dst, p * n)?;
    let me = bsp.pid();
    for q in 0..p {
        bsp.put(src, q * n, q, dst, me * n, n)?;
    }
    bsp.sync()
}

/// Combines the `n` elements at the start of every rank's `slot` with `op` (in rank order)
/// into the start of `root`'s `slot`. `scratch` is a global slot of at least `p*n` elements.
///
/// # Cost
/// `(p-1) n b g + l`, and `(p-1) n` applications of `op` at the root.
///
/// # Errors
/// As [`gather`].
#[track_caller]
pub fn reduce<T: Pod>(
    bsp: &mut Bsp<'_>,
    root: usize,
    slot: Slot<T>,
    scratch: Slot<T>,
    n: usize,
    op: impl Fn(&mut T, &T),
) -> Result<()> {
    check_len(bsp, scratch, bsp.nprocs() * n)?;
    check_len(bsp, slot, n)?;
    let me = bsp.pid();
    if me != root {
        bsp.put(slot, 0, root, scratch, me * n, n)?;
    }
    bsp.sync()?;
    if me == root {
        let p = bsp.nprocs();
        let parts: Vec<T> = bsp.slice(scratch)[..p * n].to_vec();
        let mine: Vec<T> = bsp.slice(slot)[..n].to_vec();
        let out = &mut bsp.slice_mut(slot)[..n];
        for (i, o) in out.iter_mut().enumerate() {
            let mut acc = if root == 0 { mine[i] } else { parts[i] };
            for q in 1..p {
                let v = if q == root {
                    &mine[i]
                } else {
                    &parts[q * n + i]
                };
                op(&mut acc, v);
            }
            *o = acc;
        }
    }
    Ok(())
}

/// Combines the `n` elements at the start of every rank's `slot` with `op` (in rank order);
/// every rank receives the result there. Two supersteps: each rank combines one block of
/// the `p` contributions (reduce-scatter), then every rank sends its block to everyone.
/// `scratch` is a global slot of at least `p*n` elements.
///
/// # Cost
/// `2 n b g + 2l` (each rank sends and receives under `n` elements per superstep), and
/// `(p-1) n / p` applications of `op` per rank.
///
/// # Errors
/// As [`gather`].
#[track_caller]
pub fn allreduce<T: Pod>(
    bsp: &mut Bsp<'_>,
    slot: Slot<T>,
    scratch: Slot<T>,
    n: usize,
    op: impl Fn(&mut T, &T),
) -> Result<()> {
    let p = bsp.nprocs();
    check_len(bsp, scratch, p * n)?;
    check_len(bsp, slot, n)?;
    let me = bsp.pid();
    // Block q of every rank's data goes to rank q, at row `me` of its scratch.
    for q in 0..p {
        let (s, len) = block(n, p, q);
        if len > 0 {
            bsp.put(slot, s, q, scratch, me * n + s, len)?;
        }
    }
    bsp.sync()?;
    let (s, len) = block(n, p, me);
    {
        let rows: Vec<T> = bsp.slice(scratch)[..p * n].to_vec();
        let out = &mut bsp.slice_mut(slot)[s..s + len];
        for (i, o) in out.iter_mut().enumerate() {
            let mut acc = rows[s + i];
            for q in 1..p {
                op(&mut acc, &rows[q * n + s + i]);
            }
            *o = acc;
        }
    }
    if len > 0 {
        for q in (0..p).filter(|&q| q != me) {
            bsp.put(slot, s, q, slot, s, len)?;
        }
    }
    bsp.sync()
}
