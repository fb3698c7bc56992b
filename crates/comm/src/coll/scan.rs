//! Prefix reductions (`scan`, `exscan`).

use bytemuck::Pod;

use super::node::Entered;
use crate::codec::check_type;
use crate::comm::Comm;
use crate::ops::Operation;
use crate::Result;

impl Comm<'_> {
    /// Prefix reduction in rank order: inclusive (`scan`) or exclusive (`exscan`, `None` on
    /// rank 0).
    ///
    /// Inside a node the leader folds the published inputs into the members' outputs in rank
    /// order; between nodes the leaders exchange node totals by recursive doubling (ceil(log2
    /// l) rounds). On a communicator whose nodes interleave in rank order, recursive doubling
    /// runs over all ranks instead.
    pub(crate) fn scan_core<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        data: &[T],
        op: &O,
        inclusive: bool,
    ) -> Result<Option<Vec<T>>> {
        check_type::<T>()?;
        let name = if inclusive { "scan" } else { "exscan" };
        if !self.shape().contiguous() {
            return self.scan_flat(data, op, inclusive, name);
        }
        let n = data.len();
        let tag = self.next_coll_tag();
        let mut out = vec![T::zeroed(); n];
        let e = Entered::join(self, name, true)?;
        e.arrive(data.as_ptr() as usize, n, out.as_mut_ptr() as usize, 0);
        if self.is_leader() {
            e.wait(|| e.all_arrived())?;
            let slots = e.rv.slots();
            if slots.iter().any(|s| s.len() != n) {
                return Err(self.misuse(name, "operands differ in length"));
            }
            // SAFETY: every member published `n` input elements and an output of `n`
            // elements, and waits for stage 1 without touching them (or, leaving early,
            // waits for the reads under way: both phases below run under `reading`).
            let input = |i: usize| unsafe { std::slice::from_raw_parts(slots[i].ptr::<T>(), n) };
            // SAFETY: member `i`'s output holds `n` elements (checked above) that only the
            // leader writes until stage 1 (as above); each slice made here is used and dropped
            // before the next one for the same member is made, so no two live `&mut` alias.
            let output = |i: usize| unsafe {
                std::slice::from_raw_parts_mut(
                    slots[i].out.load(std::sync::atomic::Ordering::Relaxed) as *mut T,
                    n,
                )
            };
            let len = slots.len();
            // Inclusive prefixes inside the node.
            let run = e.reading(|| {
                let mut run = input(0).to_vec();
                output(0).copy_from_slice(&run);
                for i in 1..len {
                    op.combine(&mut run, input(i));
                    output(i).copy_from_slice(&run);
                }
                run
            })?;
            let before = if self.shape().groups() > 1 {
                self.leaders_exscan(&run, op, tag, name)?
            } else {
                None
            };
            e.reading(|| {
                if let Some(p) = &before {
                    let mut tmp = Vec::with_capacity(n);
                    for i in 0..len {
                        tmp.clear();
                        tmp.extend_from_slice(p);
                        op.combine(&mut tmp, output(i));
                        output(i).copy_from_slice(&tmp);
                    }
                }
                if !inclusive {
                    for i in (1..len).rev() {
                        let (lower, upper) = (output(i - 1).to_vec(), output(i));
                        upper.copy_from_slice(&lower);
                    }
                    if let Some(p) = &before {
                        output(0).copy_from_slice(p);
                    }
                }
            })?;
            e.set_stage(1);
        }
        e.wait(|| e.stage() >= 1)?;
        drop(e);
        if !inclusive && self.rank() == 0 {
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// Exclusive scan of `total` over the leaders in group order (recursive doubling);
    /// `None` at the first group.
    fn leaders_exscan<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        total: &[T],
        op: &O,
        tag: i32,
        name: &'static str,
    ) -> Result<Option<Vec<T>>> {
        let shape = self.shape();
        let (l, g) = (shape.groups(), self.inner.my_group);
        self.doubling_scan(total, None, op, g, l, |o| shape.leader(o), tag, name)
    }
}
