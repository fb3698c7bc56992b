//! Collectives among the node leaders (one rank per node), by messages.
//!
//! With `l` leaders, `n` bytes, start-up `alpha` and `beta` seconds per byte:
//!
//! | algorithm | cost |
//! |---|---|
//! | dissemination barrier | ceil(log2 l) alpha |
//! | binomial-tree broadcast / reduce | ceil(log2 l) (alpha + n beta) |
//! | pipelined chain broadcast, k chunks (Twister) | (l - 1 + k - 1) (alpha + n beta / k) |
//! | ring reduce-scatter + allgather | 2 (l - 1) (alpha + n beta / l) |
//!
//! Which one runs is decided in [`choose`](super::choose) from the job's link model.

use std::sync::Arc;

use bytemuck::Pod;
use spillway_runtime::{Pattern, Payload, WaitKind};
use spillway_transport::AlignedBuf;

use crate::codec::{encode, view};
use crate::comm::{Comm, ALT_TAG};
use crate::ops::Operation;
use crate::{Error, Result};

pub(crate) fn length_mismatch() -> Error {
    Error::InvalidArgument("reduction operands differ in length")
}

impl Comm<'_> {
    pub(crate) fn csend(&self, dest: usize, tag: i32, payload: Payload) -> Result<()> {
        self.rank
            .post(self.shape().global(dest), self.coll_context(), tag, payload)
    }

    /// Sends `bytes` to `dest` (read in place when large and on another process) while
    /// `meanwhile` runs; see [`Rank::send_while`](spillway_runtime::Rank::send_while).
    pub(crate) fn csend_while<R>(
        &self,
        dest: usize,
        tag: i32,
        bytes: &[u8],
        meanwhile: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.rank.send_while(
            self.shape().global(dest),
            self.coll_context(),
            tag,
            bytes,
            meanwhile,
        )?
    }

    pub(crate) fn coll_pattern(&self, source: usize, tag: i32) -> Pattern {
        Pattern {
            context: self.coll_context(),
            source: Some(self.shape().global(source)),
            tag: Some(tag),
        }
    }

    pub(crate) fn crecv(&self, source: usize, tag: i32, name: &'static str) -> Result<Payload> {
        let pattern = self.coll_pattern(source, tag);
        Ok(self.rank.recv(pattern, WaitKind::Collective(name))?.payload)
    }

    /// Receives a message of exactly `buf.len()` bytes into `buf` (one copy).
    pub(crate) fn crecv_exact(
        &self,
        source: usize,
        tag: i32,
        name: &'static str,
        buf: &mut [u8],
    ) -> Result<()> {
        let pattern = self.coll_pattern(source, tag);
        let info = self
            .rank
            .recv_into(pattern, WaitKind::Collective(name), buf)?;
        if info.bytes != buf.len() {
            return Err(length_mismatch());
        }
        Ok(())
    }

    /// Whether this rank leads its node's members.
    pub(crate) fn is_leader(&self) -> bool {
        self.inner.my_index == 0
    }

    pub(crate) fn leader_of(&self, g: usize) -> usize {
        self.shape().leader(g)
    }

    /// Sends `out` to member `to` and receives a message of exactly `into.len()` bytes with
    /// the same tag from member `from`: a direct exchange of the engine when both are on
    /// other processes and the messages small (see [`Rank::exchange`]), else a message and a
    /// receive. Every member of one step decides alike (the same sizes, the same layout).
    ///
    /// [`Rank::exchange`]: spillway_runtime::Rank::exchange
    pub(crate) fn cexchange(
        &self,
        to: usize,
        from: usize,
        tag: i32,
        out: &[u8],
        into: &mut [u8],
        name: &'static str,
    ) -> Result<()> {
        let (gto, gfrom) = (self.shape().global(to), self.shape().global(from));
        if self
            .rank
            .can_exchange(gto, gfrom, out.len().max(into.len()))
        {
            let got = self.rank.exchange(
                gto,
                gfrom,
                self.coll_context(),
                tag,
                out,
                into,
                WaitKind::Collective(name),
            )?;
            if got != into.len() {
                return Err(length_mismatch());
            }
            return Ok(());
        }
        self.csend_while(to, tag, out, || self.crecv_exact(from, tag, name, into))
    }

    /// Dissemination barrier among the leaders.
    pub(crate) fn leaders_barrier(&self, tag: i32) -> Result<()> {
        let l = self.shape().groups();
        let g = self.inner.my_group;
        let mut dist = 1;
        while dist < l {
            let (to, from) = (
                self.leader_of((g + dist) % l),
                self.leader_of((g + l - dist) % l),
            );
            self.cexchange(to, from, tag, &[], &mut [], "barrier")?;
            dist <<= 1;
        }
        Ok(())
    }

    /// Binomial-tree reduction of `acc` among the leaders toward group 0, combining in group
    /// order (so non-commutative operations over contiguous groups stay in rank order).
    /// Returns whether this leader (group 0's) holds the result.
    pub(crate) fn leaders_reduce<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        acc: &mut [T],
        op: &O,
        tag: i32,
        name: &'static str,
    ) -> Result<bool> {
        let l = self.shape().groups();
        let g = self.inner.my_group;
        let mut mask = 1;
        let mut other = Vec::new();
        while mask < l {
            if g & mask != 0 {
                self.csend(self.leader_of(g - mask), tag, encode(acc))?;
                return Ok(false);
            }
            if g + mask < l {
                other.clear();
                other.resize(acc.len(), T::zeroed());
                self.crecv_exact(
                    self.leader_of(g + mask),
                    tag,
                    name,
                    bytemuck::cast_slice_mut(&mut other),
                )?;
                op.combine(acc, &other);
            }
            mask <<= 1;
        }
        Ok(true)
    }

    /// Sends `buf` to this leader's children in the binomial tree rooted at group `root_g`.
    fn tree_forward(&self, buf: &Arc<AlignedBuf>, root_g: usize, tag: i32) -> Result<()> {
        let l = self.shape().groups();
        let rel = (self.inner.my_group + l - root_g) % l;
        let mut mask = 1;
        while mask < l && rel & mask == 0 {
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if rel + mask < l {
                let child = (rel + mask + root_g) % l;
                self.csend(self.leader_of(child), tag, Payload::Shared(buf.clone()))?;
            }
            mask >>= 1;
        }
        Ok(())
    }

    /// Broadcast among the leaders from group `root_g`, whose leader passes `data`: a
    /// binomial tree, or for large payloads a pipelined chain in node order when the link
    /// model predicts it faster. Every leader returns the payload.
    pub(crate) fn leaders_bcast(
        &self,
        root_g: usize,
        data: Option<Arc<AlignedBuf>>,
        tag: i32,
        name: &'static str,
    ) -> Result<Arc<AlignedBuf>> {
        let l = self.shape().groups();
        let g = self.inner.my_group;
        if g == root_g {
            let buf = data.ok_or(Error::InvalidArgument(
                "the root of a broadcast must supply data",
            ))?;
            match super::choose::chain_chunk(self.rank.link_model(), l, buf.len()) {
                Some(chunk) => self.chain_send(&buf, chunk, (g + 1) % l, tag)?,
                None => self.tree_forward(&buf, root_g, tag)?,
            }
            return Ok(buf);
        }
        // The first message tells which algorithm the root's leader chose.
        let rel = (g + l - root_g) % l;
        let parent = ((rel & (rel - 1)) + root_g) % l;
        let prev = (g + l - 1) % l;
        let from_tree = self
            .rank
            .post_recv(self.coll_pattern(self.leader_of(parent), tag));
        let from_chain = self
            .rank
            .post_recv(self.coll_pattern(self.leader_of(prev), tag | ALT_TAG));
        let which = self
            .rank
            .wait_recv_any(&[from_tree, from_chain], WaitKind::Collective(name));
        let which = match which {
            Ok(w) => w,
            Err(e) => {
                self.rank.cancel_recv(from_tree);
                self.rank.cancel_recv(from_chain);
                return Err(e);
            }
        };
        if which == 0 {
            self.rank.cancel_recv(from_chain);
            let buf = self
                .rank
                .wait_recv(from_tree, WaitKind::Collective(name))?
                .payload
                .into_shared();
            self.tree_forward(&buf, root_g, tag)?;
            Ok(buf)
        } else {
            self.rank.cancel_recv(from_tree);
            let head = self
                .rank
                .wait_recv(from_chain, WaitKind::Collective(name))?
                .payload;
            let next = (rel + 1 < l).then(|| (g + 1) % l);
            self.chain_relay(head, prev, next, tag, name)
        }
    }

    /// Head of a pipelined chain: the length and chunk size, then the chunks, to the leader of
    /// group `next`, all on the alternative tag.
    fn chain_send(&self, buf: &Arc<AlignedBuf>, chunk: usize, next: usize, tag: i32) -> Result<()> {
        let to = self.leader_of(next);
        let head = [buf.len() as u64, chunk as u64];
        self.csend(to, tag | ALT_TAG, encode(&head))?;
        let mut start = 0;
        while start < buf.len() {
            let len = chunk.min(buf.len() - start);
            self.csend(to, tag | ALT_TAG, Payload::slice(buf, start, len))?;
            start += len;
        }
        Ok(())
    }

    /// A link of the chain: given the header, receives the chunks from the leader of group `prev`, passes each
    /// on to the leader of group `next` (if any) as soon as it arrives, and assembles them.
    fn chain_relay(
        &self,
        head: Payload,
        prev: usize,
        next: Option<usize>,
        tag: i32,
        name: &'static str,
    ) -> Result<Arc<AlignedBuf>> {
        let from = self.leader_of(prev);
        let head = view::<u64>(head.as_bytes())?;
        let (Some(&n), Some(&chunk)) = (head.first(), head.get(1)) else {
            return Err(Error::InvalidArgument("malformed chain broadcast header"));
        };
        let (n, chunk) = (n as usize, chunk as usize);
        if let Some(next) = next {
            self.csend(
                self.leader_of(next),
                tag | ALT_TAG,
                encode(&[n as u64, chunk as u64]),
            )?;
        }
        let mut buf = AlignedBuf::for_overwrite(n);
        let mut start = 0;
        while start < n {
            let part = self.crecv(from, tag | ALT_TAG, name)?;
            let len = part.len();
            if len == 0 || start + len > n {
                return Err(Error::InvalidArgument(
                    "chain broadcast chunk of the wrong size",
                ));
            }
            buf.as_bytes_mut()[start..start + len].copy_from_slice(part.as_bytes());
            if let Some(next) = next {
                self.csend(self.leader_of(next), tag | ALT_TAG, part)?;
            }
            start += len;
        }
        Ok(Arc::new(buf))
    }

    /// Allreduce of `acc` in place among the leaders: recursive doubling for small vectors
    /// on a power-of-two number of nodes, tree reduce to group 0 and broadcast otherwise, or, for large vectors of a commutative operation where the link model predicts it
    /// faster, ring reduce-scatter + allgather (each leader sends and receives `2 (l - 1) / l`
    /// of the vector instead of `2 log2 l` whole vectors). Deterministic for a given layout;
    /// with two nodes the ring is bitwise the tree.
    pub(crate) fn leaders_allreduce<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        acc: &mut [T],
        op: &O,
        tag: i32,
        name: &'static str,
    ) -> Result<()> {
        let l = self.shape().groups();
        let bytes = std::mem::size_of_val(acc);
        if op.commutative() && super::choose::ring_allreduce(self.rank.link_model(), l, bytes) {
            return self.ring_allreduce(acc, op, tag, name);
        }
        if l.is_power_of_two() && bytes <= DOUBLING_MAX {
            return self.doubling_allreduce(acc, op, tag, name);
        }
        let top = self.leaders_reduce(acc, op, tag, name)?;
        let data = top.then(|| encode(acc).into_shared());
        let buf = self.leaders_bcast(0, data, tag, name)?;
        if !top {
            let got = view::<T>(buf.as_bytes())?;
            if got.len() != acc.len() {
                return Err(length_mismatch());
            }
            acc.copy_from_slice(got);
        }
        Ok(())
    }

    /// Recursive doubling among a power-of-two number of leaders: in round `k` each leader
    /// exchanges its partial result with the leader whose group differs in bit `k`, and both
    /// combine lower groups first. `log2 l` message latencies instead of the `2 log2 l` of
    /// reduce + broadcast; each leader combines exactly as the binomial tree does at group 0
    /// (the same association), so the result is bitwise the tree's, on every leader.
    fn doubling_allreduce<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        acc: &mut [T],
        op: &O,
        tag: i32,
        name: &'static str,
    ) -> Result<()> {
        let l = self.shape().groups();
        let g = self.inner.my_group;
        let mut other: Vec<T> = vec![T::zeroed(); acc.len()];
        let mut mask = 1;
        while mask < l {
            let partner = self.leader_of(g ^ mask);
            let other_bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut other);
            self.cexchange(
                partner,
                partner,
                tag,
                bytemuck::cast_slice(acc),
                other_bytes,
                name,
            )?;
            let partner = g ^ mask;
            if partner < g {
                op.combine(&mut other, acc);
                acc.copy_from_slice(&other);
            } else {
                op.combine(acc, &other);
            }
            mask <<= 1;
        }
        Ok(())
    }

    fn ring_allreduce<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        acc: &mut [T],
        op: &O,
        tag: i32,
        name: &'static str,
    ) -> Result<()> {
        let l = self.shape().groups();
        let g = self.inner.my_group;
        let n = acc.len();
        let block = |b: usize| b * n / l..(b + 1) * n / l;
        let next = self.leader_of((g + 1) % l);
        let prev = self.leader_of((g + l - 1) % l);
        // The incoming block, in a pooled buffer (no zero-fill); blocks differ by at most one
        // element.
        let most = n.div_ceil(l) * std::mem::size_of::<T>();
        let mut other = AlignedBuf::for_overwrite(most);
        // Reduce-scatter: block b travels from leader b around the ring, ending complete at
        // leader b - 1. The block sent and the block received differ, so the send reads
        // `acc` in place while the receive lands in `other`.
        for s in 0..l - 1 {
            let out = block((g + l - s) % l);
            let range = block((g + 2 * l - s - 1) % l);
            let bytes = range.len() * std::mem::size_of::<T>();
            let incoming = &mut other.as_bytes_mut()[..bytes];
            self.csend_while(next, tag, bytemuck::cast_slice(&acc[out]), || {
                self.crecv_exact(prev, tag, name, incoming)
            })?;
            op.combine(
                &mut acc[range],
                bytemuck::cast_slice(&other.as_bytes()[..bytes]),
            );
        }
        // Allgather: pass the complete blocks on around the ring; each arrives straight in
        // its place in `acc`, disjoint from the block being sent.
        for s in 0..l - 1 {
            let out = block((g + 1 + l - s) % l);
            let range = block((g + l - s) % l);
            let (send, recv) = disjoint(acc, out, range);
            self.csend_while(next, tag, bytemuck::cast_slice(send), || {
                self.crecv_exact(prev, tag, name, bytemuck::cast_slice_mut(recv))
            })?;
        }
        Ok(())
    }
}

/// Largest vector (bytes) that a power-of-two number of leaders all-reduces by recursive
/// doubling: every round moves the whole vector, so beyond latency-bound sizes the tree or the
/// ring is better.
const DOUBLING_MAX: usize = 64 << 10;

/// Two disjoint ranges of `v` (either may be empty), the first to read and the second to
/// write.
pub(crate) fn disjoint<T>(
    v: &mut [T],
    read: std::ops::Range<usize>,
    write: std::ops::Range<usize>,
) -> (&[T], &mut [T]) {
    if read.is_empty() {
        return (&[], &mut v[write]);
    }
    if write.is_empty() {
        return (&v[read], &mut []);
    }
    assert!(
        read.end <= write.start || write.end <= read.start,
        "ranges overlap"
    );
    if read.start < write.start {
        let (lo, hi) = v.split_at_mut(write.start);
        (&lo[read], &mut hi[..write.end - write.start])
    } else {
        let (lo, hi) = v.split_at_mut(read.start);
        (&hi[..read.end - read.start], &mut lo[write])
    }
}
