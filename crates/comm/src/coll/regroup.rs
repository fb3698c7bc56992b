//! Local aggregation with a reduce-scatter between nodes, and its inverse, an allgather into
//! one buffer per node: Harp's "regroup + allgather" for vectors too large to all-reduce.
//!
//! A vector of `n` elements is cut into one block per member (`counts`, in rank order). The
//! members of a node add their contributions into one node buffer, as in
//! [`Collectives::aggregate`](crate::Collectives::aggregate); between nodes the leaders then run
//! a ring *reduce-scatter* over the node blocks (a node's block is the union of its members'
//! blocks), so each node ends with only its own block complete. The way back, after each
//! member computed its block, is a ring *allgather* of the node blocks into one buffer per
//! node.
//!
//! # Cost between nodes (l leaders, n bytes in all)
//! Each phase: `l - 1` steps in which every leader sends one node block to the next leader
//! and receives one from the previous: `(l - 1) (alpha + n beta / l)` with balanced blocks, so
//! each leader sends `(l - 1) / l` of the vector per phase. An allreduce of the node buffers
//! (ring: reduce-scatter + allgather; tree: `2 log2 l` whole vectors) followed by an
//! allreduce of the results moves twice that or more.
//!
//! # Fallbacks
//! When the nodes' members are not contiguous in rank order (no node block is a range) or the
//! operation is not commutative (the ring associates in ring order), the reduce-scatter is an
//! allreduce of the node buffers (every node then holds the whole result: a superset), and the
//! allgather is an allreduce, by bitwise OR, of node buffers that are zero outside the node's
//! blocks (exact for every type).

use std::ops::Range;

use bytemuck::Pod;
use spillway_transport::AlignedBuf;

use super::leaders::disjoint;
use super::node::Aggregate;
use crate::comm::Comm;
use crate::ops::Operation;
use crate::Result;

/// The result of [`Collectives::aggregate_scatter`](crate::Collectives::aggregate_scatter):
/// this member's block of the combined vector, in its node's shared buffer (read-only).
pub struct Regrouped<T: Pod> {
    all: Aggregate<T>,
    range: Range<usize>,
}

impl<T: Pod> Regrouped<T> {
    /// Where this member's block lies in the whole vector.
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }
}

impl<T: Pod> std::ops::Deref for Regrouped<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.all[self.range.clone()]
    }
}

impl<T: Pod> std::fmt::Debug for Regrouped<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Regrouped<{}>({:?} of {})",
            std::any::type_name::<T>(),
            self.range,
            self.all.len()
        )
    }
}

/// Element offsets of the members' blocks: `offsets[r] .. offsets[r + 1]` is member `r`'s.
fn offsets(counts: &[usize]) -> Vec<usize> {
    let mut at = Vec::with_capacity(counts.len() + 1);
    let mut sum = 0usize;
    at.push(0);
    for &c in counts {
        sum += c;
        at.push(sum);
    }
    at
}

/// Bitwise OR of disjoint contributions (the others are zero): exact for every type.
struct Or;

impl<T: Pod> Operation<T> for Or {
    fn combine(&self, acc: &mut [T], other: &[T]) {
        let acc: &mut [u8] = bytemuck::cast_slice_mut(acc);
        let other: &[u8] = bytemuck::cast_slice(other);
        acc.iter_mut().zip(other).for_each(|(a, b)| *a |= b);
    }
    fn commutative(&self) -> bool {
        true
    }
}

impl Comm<'_> {
    fn check_counts(&self, name: &str, counts: &[usize]) -> Result<Vec<usize>> {
        if counts.len() != self.size() {
            return Err(self.misuse(name, "counts must have one entry per member"));
        }
        Ok(offsets(counts))
    }

    /// The element range of each node's block, when nodes are contiguous in rank order.
    fn node_blocks(&self, at: &[usize]) -> Option<Vec<Range<usize>>> {
        let starts = self.shape().group_starts()?;
        Some(starts.windows(2).map(|w| at[w[0]]..at[w[1]]).collect())
    }

    pub(crate) fn aggregate_scatter_core<T: Pod, O: Operation<T>>(
        &self,
        identity: T,
        counts: &[usize],
        op: O,
        add: &mut dyn FnMut(&mut [T]),
    ) -> Result<Regrouped<T>> {
        let at = self.check_counts("aggregate_scatter", counts)?;
        let all = self.aggregate_with(
            "aggregate_scatter",
            identity,
            at[self.size()],
            add,
            "ranks passed different counts",
            |acc, tag| match self.node_blocks(&at) {
                Some(blocks) if op.commutative() => {
                    self.ring_reduce_scatter(acc, &blocks, &op, tag)
                }
                _ => self.leaders_allreduce(acc, &op, tag, "aggregate_scatter"),
            },
        )?;
        let me = self.rank();
        Ok(Regrouped {
            all,
            range: at[me]..at[me + 1],
        })
    }

    pub(crate) fn aggregate_gather_core<T: Pod>(
        &self,
        counts: &[usize],
        fill: &mut dyn FnMut(&mut [T]),
    ) -> Result<Aggregate<T>> {
        let at = self.check_counts("aggregate_gather", counts)?;
        let me = self.rank();
        let mine = at[me]..at[me + 1];
        self.aggregate_with(
            "aggregate_gather",
            T::zeroed(),
            at[self.size()],
            &mut |buf: &mut [T]| fill(&mut buf[mine.clone()]),
            "ranks passed different counts",
            |acc, tag| match self.node_blocks(&at) {
                Some(blocks) => self.ring_allgather(acc, &blocks, tag),
                None => self.leaders_allreduce(acc, &Or, tag, "aggregate_gather"),
            },
        )
    }

    /// Ring reduce-scatter among the leaders: in step `s`, leader `g` sends its partial block
    /// `g - s - 1` to leader `g + 1` and adds the partial block `g - s - 2` from leader `g - 1`
    /// into its own, so that after `l - 1` steps block `g` holds every leader's contribution.
    fn ring_reduce_scatter<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        acc: &mut [T],
        blocks: &[Range<usize>],
        op: &O,
        tag: i32,
    ) -> Result<()> {
        let l = blocks.len();
        let g = self.inner.my_group;
        let next = self.leader_of((g + 1) % l);
        let prev = self.leader_of((g + l - 1) % l);
        let size = std::mem::size_of::<T>();
        let most = blocks.iter().map(|b| b.len()).max().unwrap_or(0) * size;
        let mut other = AlignedBuf::for_overwrite(most);
        for s in 0..l - 1 {
            let out = blocks[(g + 2 * l - s - 1) % l].clone();
            let into = blocks[(g + 2 * l - s - 2) % l].clone();
            let bytes = into.len() * size;
            let incoming = &mut other.as_bytes_mut()[..bytes];
            self.csend_while(next, tag, bytemuck::cast_slice(&acc[out]), || {
                self.crecv_exact(prev, tag, "aggregate_scatter", incoming)
            })?;
            op.combine(
                &mut acc[into],
                bytemuck::cast_slice(&other.as_bytes()[..bytes]),
            );
        }
        Ok(())
    }

    /// Ring allgather among the leaders: block `g` starts complete at leader `g`; in step `s`
    /// leader `g` passes block `g - s` on and receives block `g - s - 1` straight into place.
    fn ring_allgather<T: Pod>(
        &self,
        acc: &mut [T],
        blocks: &[Range<usize>],
        tag: i32,
    ) -> Result<()> {
        let l = blocks.len();
        let g = self.inner.my_group;
        let next = self.leader_of((g + 1) % l);
        let prev = self.leader_of((g + l - 1) % l);
        for s in 0..l - 1 {
            let out = blocks[(g + l - s) % l].clone();
            let into = blocks[(g + 2 * l - s - 1) % l].clone();
            let (send, recv) = disjoint(acc, out, into);
            self.csend_while(next, tag, bytemuck::cast_slice(send), || {
                self.crecv_exact(
                    prev,
                    tag,
                    "aggregate_gather",
                    bytemuck::cast_slice_mut(recv),
                )
            })?;
        }
        Ok(())
    }
}
