//! The reduction cores: a fold of the members' operands, to a root or to every member,
//! inside a node through shared memory (in slots when small) and between nodes along the
//! leaders' tree or ring.

use bytemuck::Pod;
use spillway_transport::EXCHANGE_MAX;

use super::node::{Entered, IN_PLACE_MIN};
use crate::codec::check_type;
use crate::comm::Comm;
use crate::ops::Operation;
use crate::rendezvous::INLINE_BYTES;
use crate::Result;

impl Comm<'_> {
    /// Reduction of the `n` elements at `src` (readable, and unchanged by anybody but the fold,
    /// until this call returns) with `op`: to the root (`Some`), or to every member (`None`);
    /// `sink` gets the result where it is due.
    ///
    /// `out`, for an all-reduce, is where this member wants the result (`n` elements, writable
    /// until this call returns; it may be `src` itself). Large all-reduces fold straight into
    /// the output of the node's first member when it is ordinary memory, so that member's
    /// `sink` gets its own `out` back (the result is already there) and the others copy from
    /// it; otherwise the fold goes to a node buffer.
    ///
    /// # Safety
    /// `src` points to `n` readable elements; `out` is null or points to `n` writable elements
    /// that nobody else touches during the call.
    pub(crate) unsafe fn reduce_core<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        root: Option<usize>,
        operands: Operands<T>,
        op: &O,
        name: &'static str,
        sink: &mut dyn FnMut(&[T]) -> Result<()>,
    ) -> Result<()> {
        let Operands { src, n, out } = operands;
        check_type::<T>()?;
        if let Some(r) = root {
            self.check_root(r)?;
        }
        let shape = self.shape();
        if !op.commutative() && !shape.contiguous() {
            // SAFETY: guaranteed by the caller; the flat path copies its input first.
            let data = unsafe { std::slice::from_raw_parts(src, n) };
            return self.reduce_flat(root, data, op, name, sink);
        }
        let tag = self.next_coll_tag();
        let multi = shape.groups() > 1;
        let bytes = n * std::mem::size_of::<T>();
        if multi && root.is_none() && self.local_size() == 1 && bytes <= EXCHANGE_MAX {
            // The only member on its node: no node phase (nobody else here takes part), the
            // leaders' all-reduce straight on a copy of the operand.
            // SAFETY: `src` holds `n` readable elements (caller).
            let mut acc = unsafe { std::slice::from_raw_parts(src, n) }.to_vec();
            self.leaders_allreduce(&mut acc, op, tag, name)?;
            return sink(&acc);
        }
        let e = Entered::join(self, name, true)?;
        if !multi && bytes <= INLINE_BYTES && std::mem::align_of::<T>() <= 16 {
            // SAFETY: `src` holds `n` readable elements (caller).
            let data = unsafe { std::slice::from_raw_parts(src, n) };
            return self.reduce_small(&e, root, data, op, name, sink);
        }
        let in_place = root.is_none()
            && !out.is_null()
            && bytes >= IN_PLACE_MIN
            && self.local_rank() == 0
            // SAFETY: `out` points to `n` elements (caller); only its address is looked at.
            && !self.rank.is_storage_backed(unsafe { std::slice::from_raw_parts(out as *const u8, bytes.min(1)) });
        let out_addr = if in_place { out as usize } else { 0 };
        if e.arrive(src as usize, n, out_addr, 0) {
            if e.rv.slots().iter().any(|s| s.len() != n) {
                return Err(self.misuse(name, "reduction operands differ in length"));
            }
            if let Err(err) = e.open_fold::<T>(n) {
                self.rank.fail_job(format!("{name}: {err}"));
                return Err(err);
            }
            e.set_stage(1);
        }
        // Take blocks of the node's fold while waiting for it to complete.
        e.wait(|| {
            let stage = e.stage();
            // SAFETY: every member published `n` elements (checked by the last to arrive
            // before stage 1) and stays in this call until at least stage 2, or closes the
            // reads before it leaves early.
            if stage == 1 && unsafe { e.fold(n, op) } {
                e.set_stage(2);
                return true;
            }
            stage >= 2
        })?;
        let my_g = self.inner.my_group;
        let root_g = root.map(|r| shape.group_of(r));
        if multi && self.is_leader() {
            // SAFETY: the fold is complete and only the leader touches the accumulator until
            // it raises the stage to 3.
            let acc = unsafe { e.acc::<T>(n) };
            match root_g {
                None => self.leaders_allreduce(acc, op, tag, name)?,
                Some(rg) => {
                    let top = self.leaders_reduce(acc, op, tag, name)?;
                    if rg != 0 && top {
                        self.csend(shape.leader(rg), tag, crate::codec::encode(acc))?;
                    } else if rg != 0 && my_g == rg {
                        self.crecv_exact(
                            shape.leader(0),
                            tag,
                            name,
                            bytemuck::cast_slice_mut(acc),
                        )?;
                    }
                }
            }
            e.set_stage(3);
        }
        let wanted = root.is_none_or(|r| r == self.rank());
        if wanted {
            let ready = if multi { 3 } else { 2 };
            e.wait(|| e.stage() >= ready)?;
            let outcome = e
                .reading(|| {
                    // SAFETY: the result is complete (stage `ready`) and nobody writes it any
                    // more; it may be the first member's output, which stays while reads are
                    // open (`reading`).
                    let result = unsafe { e.acc_ref::<T>(n) };
                    sink(result)
                })
                .and_then(|r| r);
            if e.folds_in_place() {
                // The result lives in the first member's output: it stays until the others
                // have copied it.
                if in_place {
                    e.wait(|| e.done() + 1 == e.rv.size)?;
                } else {
                    e.mark_done();
                }
            }
            outcome?;
        }
        Ok(())
    }

    /// A reduction of at most [`INLINE_BYTES`] on one node: every member copies its operand
    /// into its slot and arrives; once all have arrived, each member that wants the result
    /// combines the operands itself, in rank order. One synchronisation, no allocation.
    fn reduce_small<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        e: &Entered<'_, '_>,
        root: Option<usize>,
        data: &[T],
        op: &O,
        name: &'static str,
        sink: &mut dyn FnMut(&[T]) -> Result<()>,
    ) -> Result<()> {
        let n = data.len();
        let bytes = std::mem::size_of_val(data);
        let slots = e.rv.slots();
        // SAFETY: this member's own slot, before its arrival.
        unsafe {
            slots[self.local_rank()]
                .inline
                .write(bytemuck::cast_slice(data))
        };
        let last = e.arrive(0, n, 0, 0);
        let mut acc = [0u128; INLINE_BYTES / 16];
        let acc: &mut [T] =
            bytemuck::cast_slice_mut(&mut bytemuck::cast_slice_mut::<u128, u8>(&mut acc)[..bytes]);
        // Folds every member's operand into `acc`, in rank order; false when the lengths
        // differ.
        let fold = |acc: &mut [T]| {
            if slots.iter().any(|s| s.len() != n) {
                return false;
            }
            // SAFETY: every member has arrived (the callers wait for it).
            acc.copy_from_slice(bytemuck::cast_slice(unsafe {
                slots[0].inline.bytes(bytes)
            }));
            for slot in &slots[1..] {
                // SAFETY: as above.
                op.combine(
                    acc,
                    bytemuck::cast_slice(unsafe { slot.inline.bytes(bytes) }),
                );
            }
            true
        };
        let wanted = root.is_none_or(|r| r == self.rank());
        if slots.len() <= SMALL_FOLD_ALL {
            // Few members: each folds the operands itself (no second phase).
            e.wait(|| e.all_arrived())?;
            if !fold(acc) {
                return Err(self.misuse(name, "reduction operands differ in length"));
            }
            return if wanted { sink(acc) } else { Ok(()) };
        }
        // Many members: the last to arrive folds once for all (every member folding the
        // others' operands costs the node a time quadratic in its members), then raises the
        // stage: 1 when the result is in `small_acc`, 2 when the lengths differ.
        if last {
            let ok = fold(acc);
            if ok {
                // SAFETY: only the last member to arrive writes `small_acc`, before it raises
                // the stage.
                unsafe { e.rv.small_acc.write(bytemuck::cast_slice(acc)) };
            }
            e.set_stage(if ok { 1 } else { 2 });
        }
        e.wait(|| e.stage() >= 1)?;
        if e.stage() == 2 {
            return Err(self.misuse(name, "reduction operands differ in length"));
        }
        if !wanted {
            return Ok(());
        }
        // SAFETY: the stage was raised after `small_acc` was written.
        acc.copy_from_slice(bytemuck::cast_slice(unsafe { e.rv.small_acc.bytes(bytes) }));
        sink(acc)
    }
}

/// Up to this many members of a node, each folds the small operands itself.
const SMALL_FOLD_ALL: usize = 8;

/// The operands of [`Comm::reduce_core`]: `n` elements at `src`, and where this member wants
/// the result of an all-reduce (`out`, or null).
pub(crate) struct Operands<T> {
    pub(crate) src: *const T,
    pub(crate) n: usize,
    pub(crate) out: *mut T,
}
