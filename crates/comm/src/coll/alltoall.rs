//! All-to-all exchanges.
//!
//! Every exchange is sparse inside: a member lists the non-empty blocks it sends, and the
//! work is proportional to the blocks that exist, never to the square of the number of ranks
//! (the dense `alltoallv` drops its empty blocks first).
//!
//! Inside a node a sender pushes each block it sends to a member of its node into that
//! member's inbox at the rendezvous, and every receiver copies its blocks straight from the
//! senders' buffers (one pass); a sender stays in the call until every reader of its buffer is
//! done. Senders with little to send (at most [`BUFFERED_MAX`] bytes in all) instead copy
//! their blocks once into a buffer owned by the node and need not wait for their readers: with
//! thousands of ranks per node and small messages this halves the number of times each rank
//! blocks.
//!
//! Between nodes the leader of each node packs one bundle per other node, holding every block
//! from its members to that node's members, sorted by receiver, so the blocks travel as one
//! message per pair of nodes.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytemuck::Pod;

use spillway_runtime::{NodeBuf, WaitKind};
use spillway_transport::{AlignedBuf, Payload};

use super::node::{lock, Entered};
use crate::codec::view;
use crate::comm::Comm;
use crate::{Error, Result};

/// Senders with at most this many bytes in all copy them into a node buffer.
const BUFFERED_MAX: usize = 16 << 10;

fn align16(x: usize) -> usize {
    x.next_multiple_of(16)
}

/// One block a member sends: destination rank, address and length.
type Block = (usize, usize, usize);

/// The blocks copied into one buffer owned by the node (counted against its memory budget,
/// written to a spill file when the budget has no room), each 16-byte aligned; returns the
/// buffer and the copied blocks.
fn buffered_copy(
    rank: &spillway_runtime::Rank,
    blocks: &[(usize, &[u8])],
) -> Result<(NodeBuf, Vec<Block>)> {
    let total = blocks.iter().fold(0, |acc, (_, b)| align16(acc) + b.len());
    let mut buf = rank.node_buffer(total)?;
    let bytes = buf.as_bytes_mut();
    let base = bytes.as_ptr() as usize;
    let mut out = Vec::with_capacity(blocks.len());
    let mut at = 0;
    for &(j, b) in blocks {
        let start = align16(at);
        bytes[at..start].fill(0);
        bytes[start..start + b.len()].copy_from_slice(b);
        out.push((j, base + start, b.len()));
        at = start + b.len();
    }
    // Out of memory until the receivers read it.
    buf.unload();
    Ok((buf, out))
}

/// The slice a block points at.
///
/// # Safety
/// The block was published by a member that keeps its bytes valid and unchanged while the
/// slice is used.
unsafe fn bytes_of<'a>(addr: usize, len: usize) -> &'a [u8] {
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(addr as *const u8, len) }
}

impl Comm<'_> {
    /// All-to-all-v of byte blocks handed to the receiver as a stream: `blocks` lists
    /// (destination, bytes) for every non-empty block this member sends, at most one per
    /// destination; `sink` gets each arriving block with its source, in source rank order,
    /// straight from where it arrived (a sender's buffer on this node, or the bundle from
    /// another node), so the receiver decides where the bytes go (memory, a spill file) and
    /// nothing concatenates them.
    ///
    /// # Cost
    /// As `alltoallv`, without the copy into one receive buffer.
    ///
    /// # Errors
    /// [`Error::InvalidRank`] for a destination outside the communicator, a communication
    /// error, or the first error `sink` returns (every member still completes the exchange).
    pub fn alltoallv_stream(
        &self,
        blocks: &[(usize, &[u8])],
        sink: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.alltoall_core(blocks, "alltoallv_stream", &mut |_| {}, sink)
    }

    /// The exchange of `blocks` (bytes of whole `T`s), concatenating what arrives as `T`s in
    /// source order; `count` learns each source's element count.
    pub(crate) fn exchange_into<T: Pod>(
        &self,
        blocks: &[(usize, &[u8])],
        name: &'static str,
        count: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>();
        let out: std::cell::RefCell<Vec<T>> = std::cell::RefCell::new(Vec::new());
        self.alltoall_core(
            blocks,
            name,
            &mut |total| out.borrow_mut().reserve_exact(total / size),
            &mut |src, bytes| {
                let v = view::<T>(bytes)?;
                count(src, v.len());
                out.borrow_mut().extend_from_slice(v);
                Ok(())
            },
        )?;
        Ok(out.into_inner())
    }

    /// The exchange: `blocks` lists (destination, bytes) for every non-empty block this member
    /// sends, at most one per destination; `reserve` learns the total bytes that arrive, then
    /// `sink` gets each arriving block in source rank order.
    pub(crate) fn alltoall_core(
        &self,
        blocks: &[(usize, &[u8])],
        name: &'static str,
        reserve: &mut dyn FnMut(usize),
        sink: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let p = self.size();
        if let Some(&(bad, _)) = blocks.iter().find(|(j, _)| *j >= p) {
            return Err(Error::InvalidRank { rank: bad, size: p });
        }
        let tag = self.next_coll_tag();
        let shape = self.shape();
        let multi = shape.groups() > 1;
        let me = self.rank();
        let my_g = self.inner.my_group;
        let my_i = self.inner.my_index;
        let e = Entered::join(self, name, true)?;
        let total_out: usize = blocks.iter().map(|(_, b)| b.len()).sum();
        // Zero-copy makes a sender wait until its receivers have read, holding what it received
        // meanwhile: fine while all members run at once, not when they take turns.
        let buffered =
            total_out <= BUFFERED_MAX || shape.group_len(my_g) > self.rank.running_slots() as usize;
        let sent: Vec<Block> = if buffered {
            let (copy, sent) = buffered_copy(self.rank, blocks)?;
            *lock(&e.rv.slots()[my_i].copy) = Some(copy);
            sent
        } else {
            blocks
                .iter()
                .map(|&(j, b)| (j, b.as_ptr() as usize, b.len()))
                .collect()
        };
        let mut remote: Vec<Block> = Vec::new();
        for &(j, addr, len) in &sent {
            if len == 0 {
                continue;
            }
            if shape.group_of(j) == my_g {
                lock(&e.rv.inbox()[shape.index_in_group(j)]).push((me as u32, addr, len));
            } else {
                remote.push((j, addr, len));
            }
        }
        drop(sent);
        // The leader packs the blocks for other nodes from every member's list.
        e.arrive(0, remote.len(), 0, remote.as_ptr() as usize);
        e.wait(|| e.all_arrived())?;
        let bundles: Vec<Arc<AlignedBuf>> = if multi {
            if self.is_leader() {
                self.exchange_bundles(&e, tag, name)?;
            }
            e.wait(|| e.stage() >= 1)?;
            lock(&e.rv.bundles)
                .iter()
                .map(|(_, b)| Arc::clone(b))
                .collect()
        } else {
            Vec::new()
        };
        let local_blocks = std::mem::take(&mut *lock(&e.rv.inbox()[my_i]));
        let result = e
            .reading(|| self.deliver(local_blocks, &bundles, my_i, reserve, sink))
            .and_then(|r| r);
        // Others (and the leader's packing) may read this member's buffers until everybody is
        // done; a buffered member's copy belongs to the rendezvous.
        e.mark_done();
        if !buffered {
            e.wait(|| e.done() == e.rv.size)?;
        }
        drop(remote);
        result
    }

    /// Hands this member's blocks to `sink` in source order: `local` as pushed by the senders
    /// of this node (read in place), the rest from the other nodes' `bundles`.
    fn deliver(
        &self,
        local: Vec<(u32, usize, usize)>,
        bundles: &[Arc<AlignedBuf>],
        my_i: usize,
        reserve: &mut dyn FnMut(usize),
        sink: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let local_count = local.len();
        let mut incoming: Vec<(usize, &[u8])> = local
            .into_iter()
            .map(|(src, addr, len)| {
                // SAFETY: the sender pushed a block that stays valid until every member is done
                // (zero-copy senders wait for `done == size`, or for the reads under way if
                // they leave early; buffered copies live as long as the rendezvous).
                (src as usize, unsafe { bytes_of(addr, len) })
            })
            .collect();
        // Blocks read in place from other members' buffers in storage are let go again.
        let local_reads: Vec<&[u8]> = incoming[..local_count].iter().map(|&(_, b)| b).collect();
        let result = bundles
            .iter()
            .try_for_each(|b| read_bundle(b, my_i, &mut incoming))
            .and_then(|()| {
                incoming.sort_unstable_by_key(|&(src, _)| src);
                reserve(incoming.iter().map(|(_, b)| b.len()).sum());
                for &(src, b) in &incoming {
                    sink(src, b)?;
                }
                Ok(())
            });
        for b in local_reads {
            self.rank.release_read(b);
        }
        result
    }

    /// At a leader, once every member arrived: sends one bundle to every other node's leader
    /// and publishes the bundles received (stage 1).
    fn exchange_bundles(&self, e: &Entered<'_, '_>, tag: i32, name: &'static str) -> Result<()> {
        let shape = self.shape();
        let l = shape.groups();
        let my_g = self.inner.my_group;
        let ids: Vec<_> = (0..l)
            .filter(|&h| h != my_g)
            .map(|h| {
                (
                    h,
                    self.rank.post_recv(self.coll_pattern(shape.leader(h), tag)),
                )
            })
            .collect();
        let packed = e.reading(|| self.pack_bundles(e))?;
        for (h, buf) in packed {
            self.csend(shape.leader(h), tag, Payload::Owned(buf))?;
        }
        let just_ids: Vec<_> = ids.iter().map(|&(_, id)| id).collect();
        self.rank
            .wait_recv_all(&just_ids, WaitKind::Collective(name))?;
        let mut bundles = Vec::with_capacity(ids.len());
        for (h, id) in ids {
            let env = self.rank.test_recv(id)?.expect("every bundle has arrived");
            bundles.push((h, env.payload.into_shared()));
        }
        *lock(&e.rv.bundles) = bundles;
        e.set_stage(1);
        Ok(())
    }

    /// At a leader, once every member arrived: the bundle of this node's blocks for each other
    /// node, read from the members' published lists (kept while the members wait for stage
    /// 1, or until the reads under way end if they leave early).
    fn pack_bundles(&self, e: &Entered<'_, '_>) -> Vec<(usize, AlignedBuf)> {
        let shape = self.shape();
        let l = shape.groups();
        let my_g = self.inner.my_group;
        let mut packed = Vec::with_capacity(l.saturating_sub(1));
        // Every block of this node's members for other nodes, by destination node, as
        // (receiver index, sender rank, address, length).
        let mut per_node: Vec<Vec<(u64, u64, usize, usize)>> = vec![Vec::new(); l];
        for i in 0..shape.group_len(my_g) {
            let slot = &e.rv.slots()[i];
            let list = slot.aux.load(Ordering::Relaxed) as *const Block;
            let n = slot.len();
            let sender = shape.group_member(my_g, i) as u64;
            // SAFETY: every member published its list of `n` remote blocks and stays in the
            // call (waiting for stage 1) while the leader packs them.
            let list = unsafe { std::slice::from_raw_parts(list, n) };
            for &(j, addr, len) in list {
                per_node[shape.group_of(j)].push((
                    shape.index_in_group(j) as u64,
                    sender,
                    addr,
                    len,
                ));
            }
        }
        for (h, mut entries) in per_node.into_iter().enumerate() {
            if h == my_g {
                continue;
            }
            entries.sort_unstable_by_key(|&(r, s, _, _)| (r, s));
            // Header: the entry count, then (receiver index, sender rank, offset, length) per
            // entry; then the blocks in entry order, each 16-byte aligned.
            let head = align16(8 + entries.len() * 32);
            let mut words: Vec<u64> = Vec::with_capacity(1 + 4 * entries.len());
            words.push(entries.len() as u64);
            let mut at = head;
            for &(r, s, _, len) in &entries {
                at = align16(at);
                words.extend_from_slice(&[r, s, at as u64, len as u64]);
                at += len;
            }
            let mut buf = AlignedBuf::for_overwrite(at);
            let bytes = buf.as_bytes_mut();
            bytes[..words.len() * 8].copy_from_slice(bytemuck::cast_slice(&words));
            bytes[words.len() * 8..head].fill(0);
            let mut at = head;
            for &(_, _, addr, len) in &entries {
                let start = align16(at);
                bytes[at..start].fill(0);
                // SAFETY: as above.
                let block = unsafe { bytes_of(addr, len) };
                bytes[start..start + len].copy_from_slice(block);
                self.rank.release_read(block);
                at = start + len;
            }
            packed.push((h, buf));
        }
        packed
    }
}

fn malformed() -> Error {
    Error::InvalidArgument("malformed all-to-all bundle")
}

/// Adds the blocks of a bundle addressed to member `my_i` of this node to `incoming`.
fn read_bundle<'b>(
    buf: &'b AlignedBuf,
    my_i: usize,
    incoming: &mut Vec<(usize, &'b [u8])>,
) -> Result<()> {
    let bytes = buf.as_bytes();
    let word = |k: usize| -> Result<usize> {
        let w = bytes.get(k * 8..k * 8 + 8).ok_or_else(malformed)?;
        Ok(u64::from_le_bytes(w.try_into().expect("8 bytes")) as usize)
    };
    let n = word(0)?;
    let entry = |k: usize| -> Result<(usize, usize, usize, usize)> {
        Ok((
            word(1 + 4 * k)?,
            word(2 + 4 * k)?,
            word(3 + 4 * k)?,
            word(4 + 4 * k)?,
        ))
    };
    // Entries are sorted by receiver: find this member's first one.
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if entry(mid)?.0 < my_i {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for k in lo..n {
        let (r, src, at, len) = entry(k)?;
        if r != my_i {
            break;
        }
        incoming.push((src, bytes.get(at..at + len).ok_or_else(malformed)?));
    }
    Ok(())
}
