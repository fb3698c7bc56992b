//! [`Collectives`] for [`Comm`]: the typed operations check their arguments, view typed
//! operands as bytes and call the cores ([`super::bcast`], [`super::reduce`], the node and
//! leader phases).

use bytemuck::Pod;
use serde::de::DeserializeOwned;
use serde::Serialize;
use spillway_transport::copy::copy;

use super::bcast::sink_exact;
use super::gather;
use super::leaders::length_mismatch;
use super::node::{Aggregate, Entered};
use super::reduce::Operands;
use super::regroup::Regrouped;
use super::{Collectives, Exchanged};
use crate::codec::{check_type, decode_obj, encode_obj, view};
use crate::comm::Comm;
use crate::ops::Operation;
use crate::{Error, Result};

impl Collectives for Comm<'_> {
    fn barrier(&self) -> Result<()> {
        let tag = self.next_coll_tag();
        let multi = self.shape().groups() > 1;
        if multi && self.local_size() == 1 {
            // The only member on its node: no node phase.
            return self.leaders_barrier(tag);
        }
        let e = Entered::join(self, "barrier", false)?;
        let last = e.arrive(0, 0, 0, 0);
        if !multi {
            if last {
                e.set_stage(1);
            }
        } else if self.is_leader() {
            e.wait(|| e.all_arrived())?;
            self.leaders_barrier(tag)?;
            e.set_stage(1);
        }
        e.wait(|| e.stage() >= 1)
    }

    fn bcast<T: Pod>(&self, root: usize, data: &mut Vec<T>) -> Result<()> {
        check_type::<T>()?;
        if self.rank() == root {
            return self.bcast_core(root, Some(bytemuck::cast_slice(data)), "bcast", &mut |_| {
                Ok(())
            });
        }
        self.bcast_core(root, None, "bcast", &mut |bytes| {
            let v = view::<T>(bytes)?;
            data.clear();
            data.extend_from_slice(v);
            Ok(())
        })
    }

    fn bcast_into<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()> {
        check_type::<T>()?;
        self.check_root(root)?;
        if self.bcast_direct(std::mem::size_of_val(data)) {
            return self.bcast_into_direct(root, bytemuck::cast_slice_mut(data), "bcast");
        }
        if self.rank() == root {
            return self.bcast_core(root, Some(bytemuck::cast_slice(data)), "bcast", &mut |_| {
                Ok(())
            });
        }
        self.bcast_core(root, None, "bcast", &mut sink_exact(data))
    }

    fn bcast_obj<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: Option<T>,
    ) -> Result<T> {
        if self.rank() == root {
            let value = value.ok_or(Error::InvalidArgument(
                "the root of a broadcast must supply data",
            ))?;
            let bytes = encode_obj(&value)?;
            self.bcast_core(root, Some(bytes.as_bytes()), "bcast", &mut |_| Ok(()))?;
            Ok(value)
        } else {
            let mut out = None;
            self.bcast_core(root, None, "bcast", &mut |bytes| {
                out = Some(decode_obj(bytes)?);
                Ok(())
            })?;
            Ok(out.expect("the broadcast delivered"))
        }
    }

    fn reduce<T: Pod, O: Operation<T>>(
        &self,
        root: usize,
        data: &[T],
        op: O,
    ) -> Result<Option<Vec<T>>> {
        let mut out = None;
        // SAFETY: `data` is borrowed for the whole call; no output buffer.
        unsafe {
            self.reduce_core(
                Some(root),
                Operands {
                    src: data.as_ptr(),
                    n: data.len(),
                    out: std::ptr::null_mut(),
                },
                &op,
                "reduce",
                &mut |r| {
                    out = Some(r.to_vec());
                    Ok(())
                },
            )
        }?;
        Ok(out)
    }

    fn allreduce<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>> {
        let n = data.len();
        let mut out: Vec<T> = Vec::with_capacity(n);
        let dst = out.as_mut_ptr();
        let mut filled = false;
        // SAFETY: `data` is borrowed for the whole call; `dst` is the spare capacity of `out`
        // (n elements), which nothing else touches until the call returns.
        unsafe {
            let operands = Operands {
                src: data.as_ptr(),
                n,
                out: dst,
            };
            self.reduce_core(None, operands, &op, "allreduce", &mut |r| {
                if r.len() != n {
                    return Err(length_mismatch());
                }
                if !std::ptr::eq(r.as_ptr(), dst) {
                    std::ptr::copy_nonoverlapping(r.as_ptr(), dst, n);
                }
                filled = true;
                Ok(())
            })
        }?;
        if filled {
            // SAFETY: the sink wrote all `n` elements (copied, or folded in place).
            unsafe { out.set_len(n) };
        }
        Ok(out)
    }

    fn allreduce_into<T: Pod, O: Operation<T>>(&self, data: &mut [T], op: O) -> Result<()> {
        if !op.commutative() && !self.shape().contiguous() {
            // Rank-ordered messages: the input is copied anyway.
            let r = self.allreduce(data, op)?;
            data.copy_from_slice(&r);
            return Ok(());
        }
        let n = data.len();
        let ptr = data.as_mut_ptr();
        // SAFETY: `data` is borrowed mutably for the whole call and only accessed through
        // `ptr`: other members read it during the fold; the fold may write the result into it
        // (then the sink gets it back and copies nothing), otherwise the sink copies the
        // result from the node's accumulator, which does not alias it.
        unsafe {
            let operands = Operands {
                src: ptr,
                n,
                out: ptr,
            };
            self.reduce_core(None, operands, &op, "allreduce", &mut |r| {
                if r.len() != n {
                    return Err(length_mismatch());
                }
                if !std::ptr::eq(r.as_ptr(), ptr) {
                    std::ptr::copy_nonoverlapping(r.as_ptr(), ptr, n);
                }
                Ok(())
            })
        }
    }

    fn scan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>> {
        Ok(self
            .scan_core(data, &op, true)?
            .expect("inclusive scan has a result"))
    }

    fn exscan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Option<Vec<T>>> {
        self.scan_core(data, &op, false)
    }

    fn gather<T: Pod>(&self, root: usize, data: &[T]) -> Result<Option<Vec<T>>> {
        match self.gatherv(root, data)? {
            None => Ok(None),
            Some((v, counts)) => {
                if counts.iter().any(|&c| c != counts[0]) {
                    return Err(Error::InvalidArgument(
                        "gather contributions differ in length; use gatherv",
                    ));
                }
                Ok(Some(v))
            }
        }
    }

    fn gatherv<T: Pod>(&self, root: usize, data: &[T]) -> Result<Option<(Vec<T>, Vec<usize>)>> {
        check_type::<T>()?;
        let got = self.gather_core(root, bytemuck::cast_slice(data), "gather")?;
        got.map(|pieces| gather::concat::<T>(&pieces)).transpose()
    }

    fn gather_obj<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: &T,
    ) -> Result<Option<Vec<T>>> {
        let bytes = encode_obj(value)?;
        match self.gather_core(root, bytes.as_bytes(), "gather")? {
            None => Ok(None),
            Some(pieces) => pieces
                .iter()
                .map(decode_obj)
                .collect::<Result<Vec<T>>>()
                .map(Some),
        }
    }

    fn scatter<T: Pod>(&self, root: usize, data: Option<&[T]>) -> Result<Vec<T>> {
        let p = self.size();
        let counts = match data {
            Some(d) if self.rank() == root => {
                if d.len() % p != 0 {
                    return Err(Error::InvalidArgument(
                        "scatter data is not a multiple of the communicator size",
                    ));
                }
                vec![d.len() / p; p]
            }
            _ => Vec::new(),
        };
        self.scatterv(root, data.map(|d| (d, &counts[..])))
    }

    fn scatterv<T: Pod>(&self, root: usize, data: Option<(&[T], &[usize])>) -> Result<Vec<T>> {
        check_type::<T>()?;
        let parts = match (self.rank() == root, data) {
            (true, Some((d, counts))) => {
                let parts = gather::split_by_counts(d, counts, self.size())?;
                Some(parts.into_iter().map(bytemuck::cast_slice).collect())
            }
            (true, None) => {
                return Err(Error::InvalidArgument(
                    "the root of a scatter must supply data",
                ))
            }
            (false, _) => None,
        };
        let mut out = Vec::new();
        self.scatter_core(root, parts, "scatterv", &mut |bytes| {
            out.extend_from_slice(view::<T>(bytes)?);
            Ok(())
        })?;
        Ok(out)
    }

    fn allgather<T: Pod>(&self, data: &[T]) -> Result<Vec<T>> {
        let (v, counts) = self.allgatherv(data)?;
        if counts.iter().any(|&c| c != counts[0]) {
            return Err(Error::InvalidArgument(
                "allgather contributions differ in length; use allgatherv",
            ));
        }
        Ok(v)
    }

    fn allgatherv<T: Pod>(&self, data: &[T]) -> Result<(Vec<T>, Vec<usize>)> {
        check_type::<T>()?;
        let pieces = self.allgather_core(bytemuck::cast_slice(data), "allgather")?;
        gather::concat::<T>(&pieces)
    }

    fn allgather_obj<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Vec<T>> {
        let bytes = encode_obj(value)?;
        let pieces = self.allgather_core(bytes.as_bytes(), "allgather")?;
        pieces.iter().map(decode_obj).collect()
    }

    fn allreduce_obj<T: Serialize + DeserializeOwned, F: Fn(T, T) -> T>(
        &self,
        value: &T,
        f: F,
    ) -> Result<T> {
        let all = self.allgather_obj(value)?;
        let mut it = all.into_iter();
        let first = it
            .next()
            .ok_or(Error::InvalidArgument("empty communicator"))?;
        Ok(it.fold(first, f))
    }

    fn alltoall<T: Pod>(&self, data: &[T]) -> Result<Vec<T>> {
        let p = self.size();
        if !data.len().is_multiple_of(p) {
            return Err(Error::InvalidArgument(
                "all-to-all data is not a multiple of the communicator size",
            ));
        }
        let counts = vec![data.len() / p; p];
        Ok(self.alltoallv(data, &counts)?.0)
    }

    fn alltoall_into<T: Pod>(&self, data: &[T], recv: &mut [T]) -> Result<()> {
        check_type::<T>()?;
        let p = self.size();
        if !data.len().is_multiple_of(p) || recv.len() != data.len() {
            return Err(Error::InvalidArgument(
                "all-to-all data must be a multiple of the communicator size and as long as the \
                 receive buffer",
            ));
        }
        let block = data.len() / p;
        if block == 0 {
            return self.barrier();
        }
        let blocks: Vec<(usize, &[u8])> = data
            .chunks_exact(block)
            .enumerate()
            .map(|(j, b)| (j, bytemuck::cast_slice(b)))
            .collect();
        let mut arrived = 0usize;
        let mut short = false;
        self.alltoall_core(&blocks, "alltoall", &mut |_| {}, &mut |src, bytes| {
            let v = view::<T>(bytes)?;
            if v.len() != block {
                short = true;
                return Ok(());
            }
            copy(
                bytemuck::cast_slice_mut(&mut recv[src * block..(src + 1) * block]),
                bytemuck::cast_slice(v),
            );
            arrived += 1;
            Ok(())
        })?;
        if short || arrived != p {
            return Err(self.misuse("alltoall", "members passed blocks of different lengths"));
        }
        Ok(())
    }

    fn alltoallv<T: Pod>(&self, data: &[T], counts: &[usize]) -> Result<(Vec<T>, Vec<usize>)> {
        check_type::<T>()?;
        if counts.len() != self.size() || counts.iter().sum::<usize>() != data.len() {
            return Err(Error::InvalidArgument(
                "counts must have one entry per member and add up to the data length",
            ));
        }
        let mut blocks: Vec<(usize, &[u8])> = Vec::new();
        let mut at = 0;
        for (j, &c) in counts.iter().enumerate() {
            if c > 0 {
                blocks.push((j, bytemuck::cast_slice(&data[at..at + c])));
                at += c;
            }
        }
        let mut got = vec![0usize; self.size()];
        let out = self.exchange_into(&blocks, "alltoallv", &mut |src, n| got[src] = n)?;
        Ok((out, got))
    }

    fn alltoallv_vecs<T: Pod>(&self, parts: Vec<Vec<T>>) -> Result<Vec<Vec<T>>> {
        check_type::<T>()?;
        if parts.len() != self.size() {
            return Err(Error::InvalidArgument(
                "all-to-all needs one part per member",
            ));
        }
        let blocks: Vec<(usize, &[u8])> = parts
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(j, b)| (j, bytemuck::cast_slice(b)))
            .collect();
        let mut out: Vec<Vec<T>> = (0..self.size()).map(|_| Vec::new()).collect();
        self.alltoall_core(&blocks, "alltoallv", &mut |_| {}, &mut |src, bytes| {
            out[src] = view::<T>(bytes)?.to_vec();
            Ok(())
        })?;
        Ok(out)
    }

    fn aggregate<T: Pod, O: Operation<T>>(
        &self,
        identity: T,
        len: usize,
        op: O,
        add: &mut dyn FnMut(&mut [T]),
    ) -> Result<Aggregate<T>> {
        self.aggregate_with(
            "aggregate",
            identity,
            len,
            add,
            "ranks passed different lengths",
            |acc, tag| self.leaders_allreduce(acc, &op, tag, "aggregate"),
        )
    }

    fn aggregate_scatter<T: Pod, O: Operation<T>>(
        &self,
        identity: T,
        counts: &[usize],
        op: O,
        add: &mut dyn FnMut(&mut [T]),
    ) -> Result<Regrouped<T>> {
        self.aggregate_scatter_core(identity, counts, op, add)
    }

    fn aggregate_gather<T: Pod>(
        &self,
        counts: &[usize],
        fill: &mut dyn FnMut(&mut [T]),
    ) -> Result<Aggregate<T>> {
        self.aggregate_gather_core(counts, fill)
    }

    fn exchange<T: Pod>(&self, blocks: &[(usize, &[T])]) -> Result<Exchanged<T>> {
        check_type::<T>()?;
        let mut seen = std::collections::HashSet::with_capacity(blocks.len());
        if !blocks.iter().all(|(j, _)| seen.insert(*j)) {
            return Err(Error::InvalidArgument(
                "exchange: at most one block per destination",
            ));
        }
        let bytes: Vec<(usize, &[u8])> = blocks
            .iter()
            .filter(|(_, b)| !b.is_empty())
            .map(|&(j, b)| (j, bytemuck::cast_slice(b)))
            .collect();
        let mut sources = Vec::new();
        let out = self.exchange_into(&bytes, "exchange", &mut |src, n| sources.push((src, n)))?;
        Ok((out, sources))
    }

    fn alltoall_obj<T: Serialize + DeserializeOwned>(&self, parts: Vec<T>) -> Result<Vec<T>> {
        if parts.len() != self.size() {
            return Err(Error::InvalidArgument(
                "all-to-all needs one part per member",
            ));
        }
        let encoded = parts.iter().map(encode_obj).collect::<Result<Vec<_>>>()?;
        drop(parts);
        let blocks: Vec<(usize, &[u8])> = encoded
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .map(|(j, p)| (j, p.as_bytes()))
            .collect();
        let mut out: Vec<Option<T>> = (0..self.size()).map(|_| None).collect();
        self.alltoall_core(&blocks, "alltoall", &mut |_| {}, &mut |src, bytes| {
            out[src] = Some(decode_obj::<T>(bytes)?);
            Ok(())
        })?;
        // Empty blocks are not delivered: they decode from no bytes.
        out.into_iter()
            .map(|v| v.map_or_else(|| decode_obj::<T>(&[]), Ok))
            .collect()
    }
}
