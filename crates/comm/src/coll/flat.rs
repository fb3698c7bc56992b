//! Collectives along binomial trees over all ranks of a communicator, by messages: for
//! non-commutative operations on communicators whose nodes interleave in rank order, where
//! combining inside a node first would break rank order.

use bytemuck::Pod;

use crate::codec::{check_type, encode, view};
use crate::comm::Comm;
use crate::ops::Operation;
use crate::Result;

use super::leaders::length_mismatch;

impl Comm<'_> {
    pub(crate) fn reduce_flat<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        root: Option<usize>,
        data: &[T],
        op: &O,
        name: &'static str,
        sink: &mut dyn FnMut(&[T]) -> Result<()>,
    ) -> Result<()> {
        check_type::<T>()?;
        let tag = self.next_coll_tag();
        let p = self.size();
        let me = self.rank();
        let mut acc = data.to_vec();
        let mut mask = 1;
        let mut sent = false;
        while mask < p {
            if me & mask != 0 {
                self.csend(me - mask, tag, encode(&acc))?;
                sent = true;
                break;
            }
            if me + mask < p {
                let other = self.crecv(me + mask, tag, name)?;
                let other = view::<T>(other.as_bytes())?;
                if other.len() != acc.len() {
                    return Err(length_mismatch());
                }
                op.combine(&mut acc, other);
            }
            mask <<= 1;
        }
        match root {
            Some(0) => {
                if me == 0 {
                    sink(&acc)?;
                }
            }
            Some(r) => {
                if me == 0 {
                    self.csend(r, tag, encode(&acc))?;
                }
                if me == r {
                    let got = self.crecv(0, tag, name)?;
                    sink(view::<T>(got.as_bytes())?)?;
                }
            }
            None => {
                let src = (!sent).then(|| bytemuck::cast_slice::<T, u8>(&acc));
                if me == 0 {
                    sink(&acc)?;
                }
                self.bcast_core(0, src, name, &mut |bytes| sink(view::<T>(bytes)?))?;
            }
        }
        Ok(())
    }

    pub(crate) fn scan_flat<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        data: &[T],
        op: &O,
        inclusive: bool,
        name: &'static str,
    ) -> Result<Option<Vec<T>>> {
        let tag = self.next_coll_tag();
        let start = inclusive.then(|| data.to_vec());
        self.doubling_scan(data, start, op, self.rank(), self.size(), |r| r, tag, name)
    }

    /// Scan by recursive doubling among `count` participants, this rank being participant
    /// `me` and participant `i` being rank `rank_of(i)`: returns `start` combined with the
    /// `data` of every lower participant (`None` when `start` is `None` and there are none).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn doubling_scan<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        data: &[T],
        start: Option<Vec<T>>,
        op: &O,
        me: usize,
        count: usize,
        rank_of: impl Fn(usize) -> usize,
        tag: i32,
        name: &'static str,
    ) -> Result<Option<Vec<T>>> {
        let mut partial = data.to_vec();
        let mut result = start;
        let mut mask = 1;
        while mask < count {
            let other = me ^ mask;
            if other < count {
                let peer = rank_of(other);
                self.csend(peer, tag, encode(&partial))?;
                let incoming = self.crecv(peer, tag, name)?;
                let tmp = view::<T>(incoming.as_bytes())?;
                if tmp.len() != partial.len() {
                    return Err(length_mismatch());
                }
                if other < me {
                    // tmp covers lower participants: result = tmp op result,
                    // partial = tmp op partial.
                    result = Some(match result {
                        Some(r) => {
                            let mut t = tmp.to_vec();
                            op.combine(&mut t, &r);
                            t
                        }
                        None => tmp.to_vec(),
                    });
                    let mut t = tmp.to_vec();
                    op.combine(&mut t, &partial);
                    partial = t;
                } else {
                    op.combine(&mut partial, tmp);
                }
            }
            mask <<= 1;
        }
        Ok(result)
    }
}
