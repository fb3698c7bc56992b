//! Collective operations.
//!
//! # Algorithms
//!
//! The members of a communicator are grouped by node; each group's lowest rank is its
//! *leader*. Collectives run in two phases as in BDMPI: inside a node, members hand their data
//! to the leader (a pointer move with the local backend) and the leader hands results back as
//! one shared buffer; between nodes, leaders exchange once per node along binomial trees.
//!
//! | operation | between nodes (L leaders, n bytes) | inside a node |
//! |---|---|---|
//! | `bcast` | binomial tree: ceil(log2 L) (alpha + n beta); large, L >= 3: pipelined chain in node order, chunk from alpha/beta | one shared buffer for all members |
//! | `reduce` | binomial tree to the first leader | leader combines in rank order |
//! | `allreduce` | tree reduce + bcast; large and commutative: ring reduce-scatter + allgather | leader combines in rank order, shares the result |
//! | `gather(v)`, `scatter(v)` | one bundle per node to / from the root | via the leader |
//! | `allgather(v)` | gather to rank 0, then bcast of the bundle | shared bundle |
//! | `alltoall(v)` | pairwise exchange, p - 1 rounds | direct |
//! | `scan`, `exscan` | recursive doubling, ceil(log2 p) rounds | — |
//! | `barrier` | reduce of nothing + bcast of nothing | via the leader |
//!
//! "Large" is decided by the job's link model ([`Rank::link_model`](spillway_runtime::Rank::link_model)):
//! measured at start-up by the MPI backend, absent on the local backend (whose virtual nodes
//! pass pointers), where the trees are always used. The choice depends only on the model, the
//! layout and the size, so every member takes the same one; a leader learns from the first
//! message of a broadcast which algorithm the root's leader chose.
//!
//! Results are deterministic: operands are always combined in the same order for a given
//! communicator and link model, whatever the timing. The ring allreduce associates
//! differently from the tree when there are more than two nodes.

use bytemuck::Pod;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Arc;

use spillway_runtime::{Pattern, Payload, WaitKind};
use spillway_transport::AlignedBuf;

use crate::codec::{bundle, check_type, decode_obj, encode, encode_obj, unbundle, view, Piece};
use crate::comm::{Comm, ALT_TAG};
use crate::ops::Operation;
use crate::pipeline;
use crate::{Error, Result};

fn length_mismatch() -> Error {
    Error::InvalidArgument("reduction operands differ in length")
}

impl Comm<'_> {
    fn csend(&self, dest: usize, tag: i32, payload: Payload) -> Result<()> {
        self.rank
            .post(self.inner.members[dest], self.coll_context(), tag, payload)
    }

    fn crecv(&self, source: usize, tag: i32, name: &'static str) -> Result<Payload> {
        let pattern = Pattern {
            context: self.coll_context(),
            source: Some(self.inner.members[source]),
            tag: Some(tag),
        };
        Ok(self.rank.recv(pattern, WaitKind::Collective(name))?.payload)
    }

    fn check_root(&self, root: usize) -> Result<()> {
        if root >= self.size() {
            return Err(Error::InvalidRank {
                rank: root,
                size: self.size(),
            });
        }
        Ok(())
    }

    pub(crate) fn bcast_payload(
        &self,
        root: usize,
        data: Option<Payload>,
        name: &'static str,
    ) -> Result<Payload> {
        self.check_root(root)?;
        let tag = self.next_coll_tag();
        let g = &self.inner.groups;
        let me = self.inner.me;
        let my_g = g.of[me];
        let root_g = g.of[root];
        let leader = g.leader(my_g);
        let mut shared = match (me == root, data) {
            (true, Some(p)) => Some(p.into_shared()),
            (true, None) => {
                return Err(Error::InvalidArgument(
                    "the root of a broadcast must supply data",
                ))
            }
            (false, _) => None,
        };
        if me == root && leader != root {
            let buf = shared.clone().expect("root data");
            self.csend(leader, tag, Payload::Shared(buf))?;
        }
        if me == leader {
            if my_g == root_g && me != root {
                shared = Some(self.crecv(root, tag, name)?.into_shared());
            }
            let l = g.members.len();
            let rel = (my_g + l - root_g) % l;
            let buf = if rel == 0 {
                let buf = shared.clone().expect("the root's leader has the data");
                match pipeline::chain_chunk(self.rank.link_model(), l, buf.len()) {
                    Some(chunk) => self.chain_send(&buf, chunk, (my_g + 1) % l, tag)?,
                    None => self.tree_forward(&buf, rel, root_g, tag)?,
                }
                buf
            } else {
                // The first message tells which algorithm the root's leader chose.
                let parent = (rel & (rel - 1)) + root_g;
                let from_tree = self.coll_pattern(g.leader(parent % l), tag);
                let from_chain = self.coll_pattern(g.leader((my_g + l - 1) % l), tag | ALT_TAG);
                let which = self
                    .rank
                    .wait_any(&[from_tree, from_chain], WaitKind::Collective(name))?;
                let buf = if which == 0 {
                    let buf = self.crecv(g.leader(parent % l), tag, name)?.into_shared();
                    self.tree_forward(&buf, rel, root_g, tag)?;
                    buf
                } else {
                    let next = (rel + 1 < l).then(|| (my_g + 1) % l);
                    self.chain_relay((my_g + l - 1) % l, next, tag, name)?
                };
                shared = Some(Arc::clone(&buf));
                buf
            };
            for &m in &g.members[my_g][1..] {
                if m != root {
                    self.csend(m, tag, Payload::Shared(buf.clone()))?;
                }
            }
        } else if me != root {
            shared = Some(self.crecv(leader, tag, name)?.into_shared());
        }
        Ok(Payload::Shared(shared.expect("every rank has the data")))
    }

    fn coll_pattern(&self, source: usize, tag: i32) -> Pattern {
        Pattern {
            context: self.coll_context(),
            source: Some(self.inner.members[source]),
            tag: Some(tag),
        }
    }

    /// Sends `buf` to this leader's children in the binomial tree rooted at group `root_g`
    /// (`rel` is this leader's position relative to the root).
    fn tree_forward(
        &self,
        buf: &Arc<AlignedBuf>,
        rel: usize,
        root_g: usize,
        tag: i32,
    ) -> Result<()> {
        let g = &self.inner.groups;
        let l = g.members.len();
        let mut mask = 1;
        while mask < l && rel & mask == 0 {
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if rel + mask < l {
                let child = (rel + mask + root_g) % l;
                self.csend(g.leader(child), tag, Payload::Shared(buf.clone()))?;
            }
            mask >>= 1;
        }
        Ok(())
    }

    /// Head of a pipelined chain: the length and chunk size, then the chunks, to the leader of
    /// group `next`, all on the alternative tag.
    fn chain_send(&self, buf: &Arc<AlignedBuf>, chunk: usize, next: usize, tag: i32) -> Result<()> {
        let to = self.inner.groups.leader(next);
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

    /// A link of the chain: receives the chunks from the leader of group `prev`, passes each
    /// on to the leader of group `next` (if any) as soon as it arrives, and assembles them.
    fn chain_relay(
        &self,
        prev: usize,
        next: Option<usize>,
        tag: i32,
        name: &'static str,
    ) -> Result<Arc<AlignedBuf>> {
        let g = &self.inner.groups;
        let from = g.leader(prev);
        let head = self.crecv(from, tag | ALT_TAG, name)?;
        let head = view::<u64>(head.as_bytes())?;
        let (Some(&n), Some(&chunk)) = (head.first(), head.get(1)) else {
            return Err(Error::InvalidArgument("malformed chain broadcast header"));
        };
        let (n, chunk) = (n as usize, chunk as usize);
        if let Some(next) = next {
            self.csend(
                g.leader(next),
                tag | ALT_TAG,
                encode(&[n as u64, chunk as u64]),
            )?;
        }
        let mut buf = AlignedBuf::zeroed(n);
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
                self.csend(g.leader(next), tag | ALT_TAG, part)?;
            }
            start += len;
        }
        Ok(Arc::new(buf))
    }

    /// At a group's leader: its own `data` combined, in rank order, with the data of the
    /// other `members` (the leader is `members[0]`).
    fn combine_members<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        members: &[usize],
        data: &[T],
        op: &O,
        tag: i32,
        name: &'static str,
    ) -> Result<Vec<T>> {
        let mut acc = data.to_vec();
        for &m in &members[1..] {
            let p = self.crecv(m, tag, name)?;
            let other = view::<T>(p.as_bytes())?;
            if other.len() != acc.len() {
                return Err(length_mismatch());
            }
            op.combine(&mut acc, other);
        }
        Ok(acc)
    }

    pub(crate) fn reduce_vec<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        root: usize,
        data: &[T],
        op: &O,
        name: &'static str,
    ) -> Result<Option<Vec<T>>> {
        check_type::<T>()?;
        self.check_root(root)?;
        let tag = self.next_coll_tag();
        let g = if op.commutative() || self.inner.groups.contiguous {
            &self.inner.groups
        } else {
            &self.inner.flat
        };
        let me = self.inner.me;
        let my_g = g.of[me];
        let leader = g.leader(my_g);
        let mut result = None;
        if me != leader {
            self.csend(leader, tag, encode(data))?;
        } else {
            let mut acc = self.combine_members(&g.members[my_g], data, op, tag, name)?;
            let l = g.members.len();
            let mut mask = 1;
            let mut sent = false;
            while mask < l {
                if my_g & mask != 0 {
                    self.csend(g.leader(my_g - mask), tag, encode(&acc))?;
                    sent = true;
                    break;
                }
                if my_g + mask < l {
                    let p = self.crecv(g.leader(my_g + mask), tag, name)?;
                    let other = view::<T>(p.as_bytes())?;
                    if other.len() != acc.len() {
                        return Err(length_mismatch());
                    }
                    op.combine(&mut acc, other);
                }
                mask <<= 1;
            }
            if !sent {
                result = Some(acc);
            }
        }
        let top = g.leader(0);
        if top == root {
            return Ok(result);
        }
        if me == top {
            self.csend(
                root,
                tag,
                encode(&result.expect("top leader holds the result")),
            )?;
            return Ok(None);
        }
        if me == root {
            let p = self.crecv(top, tag, name)?;
            return Ok(Some(view::<T>(p.as_bytes())?.to_vec()));
        }
        Ok(None)
    }

    /// Allreduce for large vectors of a commutative operation: members hand their data to the
    /// node leader, leaders run a ring reduce-scatter and a ring allgather (each leader sends
    /// and receives `2 (l - 1) / l` of the vector instead of `2 log2 l` whole vectors), and
    /// each leader hands the result to its members as one shared buffer.
    ///
    /// The result is deterministic for a given layout; with two nodes it is bitwise the tree's
    /// (one commutative combination per element), with more the association differs.
    fn ring_allreduce<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        data: &[T],
        op: &O,
        name: &'static str,
    ) -> Result<Vec<T>> {
        check_type::<T>()?;
        let tag = self.next_coll_tag();
        let g = &self.inner.groups;
        let me = self.inner.me;
        let my_g = g.of[me];
        let leader = g.leader(my_g);
        if me != leader {
            self.csend(leader, tag, encode(data))?;
            let p = self.crecv(leader, tag, name)?;
            let result = view::<T>(p.as_bytes())?;
            if result.len() != data.len() {
                return Err(length_mismatch());
            }
            return Ok(result.to_vec());
        }
        let mut acc = self.combine_members(&g.members[my_g], data, op, tag, name)?;
        let l = g.members.len();
        let n = acc.len();
        let block = |b: usize| b * n / l..(b + 1) * n / l;
        let next = g.leader((my_g + 1) % l);
        let prev = g.leader((my_g + l - 1) % l);
        // Reduce-scatter: block b travels from leader b around the ring, ending complete at
        // leader b - 1.
        for s in 0..l - 1 {
            self.csend(next, tag, encode(&acc[block((my_g + l - s) % l)]))?;
            let p = self.crecv(prev, tag, name)?;
            let other = view::<T>(p.as_bytes())?;
            let range = block((my_g + 2 * l - s - 1) % l);
            if other.len() != range.len() {
                return Err(length_mismatch());
            }
            op.combine(&mut acc[range], other);
        }
        // Allgather: pass the complete blocks on around the ring.
        for s in 0..l - 1 {
            self.csend(next, tag, encode(&acc[block((my_g + 1 + l - s) % l)]))?;
            let p = self.crecv(prev, tag, name)?;
            let other = view::<T>(p.as_bytes())?;
            let range = block((my_g + l - s) % l);
            if other.len() != range.len() {
                return Err(length_mismatch());
            }
            acc[range].copy_from_slice(other);
        }
        if g.members[my_g].len() > 1 {
            let shared = encode(&acc).into_shared();
            for &m in &g.members[my_g][1..] {
                self.csend(m, tag, Payload::Shared(Arc::clone(&shared)))?;
            }
        }
        Ok(acc)
    }

    /// Pieces of every member, indexed by communicator rank, at the root.
    pub(crate) fn gather_pieces(
        &self,
        root: usize,
        data: Payload,
        name: &'static str,
    ) -> Result<Option<Vec<Piece>>> {
        self.check_root(root)?;
        let tag = self.next_coll_tag();
        let g = &self.inner.groups;
        let me = self.inner.me;
        let my_g = g.of[me];
        let leader = g.leader(my_g);
        let mut pieces: Vec<Option<Piece>> = Vec::new();
        if me == root {
            pieces = vec![None; self.size()];
        }
        if me == leader {
            let mut items = vec![(me, Piece::whole(data))];
            for &m in &g.members[my_g][1..] {
                if m != root {
                    items.push((m, Piece::whole(self.crecv(m, tag, name)?)));
                }
            }
            if me != root {
                let b = bundle(items.iter().map(|(r, p)| (*r, p.as_bytes())));
                self.csend(root, tag, b)?;
                return Ok(None);
            }
            for (r, p) in items {
                pieces[r] = Some(p);
            }
        } else if me == root {
            pieces[me] = Some(Piece::whole(data));
        } else {
            self.csend(leader, tag, data)?;
            return Ok(None);
        }
        for (gi, members) in g.members.iter().enumerate() {
            if members[0] == me {
                continue;
            }
            if members.len() == 1 && members[0] == root {
                continue;
            }
            for (r, p) in unbundle(self.crecv(members[0], tag, name)?)? {
                pieces[r] = Some(p);
            }
            debug_assert!(gi < g.members.len());
        }
        pieces
            .into_iter()
            .map(|p| p.ok_or(Error::InvalidArgument("gather lost a contribution")))
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// Each member's part of the root's `parts`.
    pub(crate) fn scatter_pieces(
        &self,
        root: usize,
        parts: Option<Vec<&[u8]>>,
        name: &'static str,
    ) -> Result<Piece> {
        self.check_root(root)?;
        let tag = self.next_coll_tag();
        let g = &self.inner.groups;
        let me = self.inner.me;
        let my_g = g.of[me];
        let leader = g.leader(my_g);
        if me == root {
            let parts = parts.ok_or(Error::InvalidArgument(
                "the root of a scatter must supply data",
            ))?;
            if parts.len() != self.size() {
                return Err(Error::InvalidArgument("scatter needs one part per member"));
            }
            for members in &g.members {
                if members[0] == root {
                    for &m in &members[1..] {
                        self.csend(m, tag, encode(parts[m]))?;
                    }
                } else {
                    let items = members
                        .iter()
                        .filter(|&&m| m != root)
                        .map(|&m| (m, parts[m]));
                    if items.clone().next().is_some() {
                        self.csend(members[0], tag, bundle(items))?;
                    }
                }
            }
            return Ok(Piece::whole(encode(parts[me])));
        }
        if me == leader {
            let mut mine = None;
            for (r, p) in unbundle(self.crecv(root, tag, name)?)? {
                if r == me {
                    mine = Some(p);
                } else {
                    self.csend(r, tag, p.into_payload())?;
                }
            }
            return mine.ok_or(Error::InvalidArgument("scatter bundle without my part"));
        }
        Ok(Piece::whole(self.crecv(leader, tag, name)?))
    }

    pub(crate) fn allgather_pieces(&self, data: Payload, name: &'static str) -> Result<Vec<Piece>> {
        let gathered = self.gather_pieces(0, data, name)?;
        let all = match gathered {
            Some(pieces) => {
                let b = bundle(pieces.iter().enumerate().map(|(r, p)| (r, p.as_bytes())));
                self.bcast_payload(0, Some(b), name)?
            }
            None => self.bcast_payload(0, None, name)?,
        };
        Ok(unbundle(all)?.into_iter().map(|(_, p)| p).collect())
    }

    pub(crate) fn alltoall_payloads(
        &self,
        parts: Vec<Payload>,
        name: &'static str,
    ) -> Result<Vec<Payload>> {
        let p = self.size();
        if parts.len() != p {
            return Err(Error::InvalidArgument(
                "all-to-all needs one part per member",
            ));
        }
        let tag = self.next_coll_tag();
        let me = self.inner.me;
        let mut parts: Vec<Option<Payload>> = parts.into_iter().map(Some).collect();
        for k in 1..p {
            let dest = (me + k) % p;
            self.csend(dest, tag, parts[dest].take().expect("each part sent once"))?;
        }
        // Take the incoming data only when all of it has arrived (see `Rank::wait_present`).
        let sources: Vec<Pattern> = (0..p)
            .filter(|&s| s != me)
            .map(|s| Pattern {
                context: self.coll_context(),
                source: Some(self.inner.members[s]),
                tag: Some(tag),
            })
            .collect();
        self.rank
            .wait_present(&sources, WaitKind::Collective(name))?;
        let mut out: Vec<Option<Payload>> = (0..p).map(|_| None).collect();
        out[me] = parts[me].take();
        for k in 1..p {
            let src = (me + p - k) % p;
            out[src] = Some(self.crecv(src, tag, name)?);
        }
        Ok(out
            .into_iter()
            .map(|x| x.expect("every part received"))
            .collect())
    }

    fn scan_impl<T: Pod, O: Operation<T> + ?Sized>(
        &self,
        data: &[T],
        op: &O,
        inclusive: bool,
    ) -> Result<Option<Vec<T>>> {
        check_type::<T>()?;
        let tag = self.next_coll_tag();
        let name = if inclusive { "scan" } else { "exscan" };
        let p = self.size();
        let me = self.inner.me;
        let mut partial = data.to_vec();
        let mut result: Option<Vec<T>> = inclusive.then(|| data.to_vec());
        let mut mask = 1;
        while mask < p {
            let dst = me ^ mask;
            if dst < p {
                self.csend(dst, tag, encode(&partial))?;
                let incoming = self.crecv(dst, tag, name)?;
                let tmp = view::<T>(incoming.as_bytes())?;
                if tmp.len() != partial.len() {
                    return Err(length_mismatch());
                }
                if dst < me {
                    // tmp covers lower ranks: result = tmp op result, partial = tmp op partial.
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

/// Collective operations on a communicator (an extension trait, like rsmpi's).
///
/// Every member must call the same collectives in the same order. Each call blocks (giving up
/// the node slot) until this rank's part is complete. See the module table for costs.
///
/// # Errors
/// [`Error::Aborted`] when the job ends during the call; [`Error::InvalidRank`] for a root
/// outside the communicator; [`Error::InvalidArgument`] for arguments that violate the
/// operation's contract (detected where the data meets: a root may fail while others return).
pub trait Collectives {
    /// Blocks until every member has entered the barrier.
    fn barrier(&self) -> Result<()>;

    /// Replaces `data` on every member with the root's `data`.
    fn bcast<T: Pod>(&self, root: usize, data: &mut Vec<T>) -> Result<()>;

    /// Like [`bcast`](Self::bcast) into a buffer of the same length on every member.
    fn bcast_into<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()>;

    /// Broadcasts a serialisable value; the root passes `Some`.
    fn bcast_obj<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: Option<T>,
    ) -> Result<T>;

    /// Combines every member's `data` element-wise; the result arrives at the root only.
    fn reduce<T: Pod, O: Operation<T>>(
        &self,
        root: usize,
        data: &[T],
        op: O,
    ) -> Result<Option<Vec<T>>>;

    /// Combines every member's `data`; every member receives the same result.
    fn allreduce<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>>;

    /// [`allreduce`](Self::allreduce) in place.
    fn allreduce_into<T: Pod, O: Operation<T>>(&self, data: &mut [T], op: O) -> Result<()>;

    /// Inclusive prefix reduction in rank order.
    fn scan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>>;

    /// Exclusive prefix reduction in rank order; `None` on rank 0.
    fn exscan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Option<Vec<T>>>;

    /// Concatenates equally long contributions in rank order at the root.
    fn gather<T: Pod>(&self, root: usize, data: &[T]) -> Result<Option<Vec<T>>>;

    /// Concatenates contributions of any length at the root, with each member's count.
    fn gatherv<T: Pod>(&self, root: usize, data: &[T]) -> Result<Option<(Vec<T>, Vec<usize>)>>;

    /// Gathers serialisable values at the root.
    fn gather_obj<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: &T,
    ) -> Result<Option<Vec<T>>>;

    /// Splits the root's data into `size` equal parts, part `i` to member `i`.
    fn scatter<T: Pod>(&self, root: usize, data: Option<&[T]>) -> Result<Vec<T>>;

    /// Sends `counts[i]` consecutive elements of the root's data to member `i`.
    fn scatterv<T: Pod>(&self, root: usize, data: Option<(&[T], &[usize])>) -> Result<Vec<T>>;

    /// Every member receives all equally long contributions in rank order.
    fn allgather<T: Pod>(&self, data: &[T]) -> Result<Vec<T>>;

    /// Every member receives all contributions and their counts.
    fn allgatherv<T: Pod>(&self, data: &[T]) -> Result<(Vec<T>, Vec<usize>)>;

    /// Every member receives every member's value.
    fn allgather_obj<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Vec<T>>;

    /// Combines serialisable values with `f` in rank order; every member gets the result.
    /// Cost: an allgather of the values.
    fn allreduce_obj<T: Serialize + DeserializeOwned, F: Fn(T, T) -> T>(
        &self,
        value: &T,
        f: F,
    ) -> Result<T>;

    /// Block `j` of `data` (of `size` equal blocks) goes to member `j`; the result holds the
    /// blocks received, in rank order.
    fn alltoall<T: Pod>(&self, data: &[T]) -> Result<Vec<T>>;

    /// `counts[j]` consecutive elements go to member `j`; returns what arrived and the count
    /// from each member.
    fn alltoallv<T: Pod>(&self, data: &[T], counts: &[usize]) -> Result<(Vec<T>, Vec<usize>)>;

    /// `parts[j]` goes to member `j`; returns the part from each member.
    fn alltoallv_vecs<T: Pod>(&self, parts: Vec<Vec<T>>) -> Result<Vec<Vec<T>>>;

    /// `parts[j]` goes to member `j`, for serialisable values.
    fn alltoall_obj<T: Serialize + DeserializeOwned>(&self, parts: Vec<T>) -> Result<Vec<T>>;
}

/// Splits `data` into consecutive parts of `counts[i]` elements, one per member.
fn split_by_counts<'a, T>(data: &'a [T], counts: &[usize], members: usize) -> Result<Vec<&'a [T]>> {
    if counts.len() != members || counts.iter().sum::<usize>() != data.len() {
        return Err(Error::InvalidArgument(
            "counts must have one entry per member and add up to the data length",
        ));
    }
    let mut at = 0;
    Ok(counts
        .iter()
        .map(|&c| {
            at += c;
            &data[at - c..at]
        })
        .collect())
}

fn concat<T: Pod>(pieces: &[Piece]) -> Result<(Vec<T>, Vec<usize>)> {
    let mut counts = Vec::with_capacity(pieces.len());
    let mut total = 0;
    for p in pieces {
        let n = view::<T>(p.as_bytes())?.len();
        counts.push(n);
        total += n;
    }
    let mut out = Vec::with_capacity(total);
    for p in pieces {
        out.extend_from_slice(view::<T>(p.as_bytes())?);
    }
    Ok((out, counts))
}

impl Collectives for Comm<'_> {
    fn barrier(&self) -> Result<()> {
        self.reduce_vec::<u8, _>(0, &[], &crate::ops::Sum, "barrier")?;
        let token = (self.rank() == 0).then(Payload::empty);
        self.bcast_payload(0, token, "barrier").map(drop)
    }

    fn bcast<T: Pod>(&self, root: usize, data: &mut Vec<T>) -> Result<()> {
        check_type::<T>()?;
        let mine = (self.rank() == root).then(|| encode(data));
        let p = self.bcast_payload(root, mine, "bcast")?;
        if self.rank() != root {
            data.clear();
            data.extend_from_slice(view::<T>(p.as_bytes())?);
        }
        Ok(())
    }

    fn bcast_into<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()> {
        check_type::<T>()?;
        let mine = (self.rank() == root).then(|| encode(data));
        let p = self.bcast_payload(root, mine, "bcast")?;
        if self.rank() != root {
            let v = view::<T>(p.as_bytes())?;
            if v.len() != data.len() {
                return Err(Error::Truncated {
                    message_bytes: p.len(),
                    buffer_bytes: std::mem::size_of_val(data),
                });
            }
            data.copy_from_slice(v);
        }
        Ok(())
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
            self.bcast_payload(root, Some(encode_obj(&value)?), "bcast")?;
            Ok(value)
        } else {
            decode_obj(self.bcast_payload(root, None, "bcast")?.as_bytes())
        }
    }

    fn reduce<T: Pod, O: Operation<T>>(
        &self,
        root: usize,
        data: &[T],
        op: O,
    ) -> Result<Option<Vec<T>>> {
        self.reduce_vec(root, data, &op, "reduce")
    }

    fn allreduce<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>> {
        let leaders = self.inner.groups.members.len();
        let bytes = std::mem::size_of_val(data);
        if op.commutative() && pipeline::ring_allreduce(self.rank.link_model(), leaders, bytes) {
            return self.ring_allreduce(data, &op, "allreduce");
        }
        let reduced = self.reduce_vec(0, data, &op, "allreduce")?;
        match reduced {
            Some(v) => {
                self.bcast_payload(0, Some(encode(&v)), "allreduce")?;
                Ok(v)
            }
            None => {
                let p = self.bcast_payload(0, None, "allreduce")?;
                Ok(view::<T>(p.as_bytes())?.to_vec())
            }
        }
    }

    fn allreduce_into<T: Pod, O: Operation<T>>(&self, data: &mut [T], op: O) -> Result<()> {
        let v = self.allreduce(data, op)?;
        if v.len() != data.len() {
            return Err(length_mismatch());
        }
        data.copy_from_slice(&v);
        Ok(())
    }

    fn scan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Vec<T>> {
        Ok(self
            .scan_impl(data, &op, true)?
            .expect("inclusive scan has a result"))
    }

    fn exscan<T: Pod, O: Operation<T>>(&self, data: &[T], op: O) -> Result<Option<Vec<T>>> {
        self.scan_impl(data, &op, false)
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
        match self.gather_pieces(root, encode(data), "gather")? {
            None => Ok(None),
            Some(pieces) => concat(&pieces).map(Some),
        }
    }

    fn gather_obj<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        value: &T,
    ) -> Result<Option<Vec<T>>> {
        match self.gather_pieces(root, encode_obj(value)?, "gather")? {
            None => Ok(None),
            Some(pieces) => pieces
                .iter()
                .map(|p| decode_obj(p.as_bytes()))
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
                let parts = split_by_counts(d, counts, self.size())?;
                Some(parts.into_iter().map(bytemuck::cast_slice).collect())
            }
            (true, None) => {
                return Err(Error::InvalidArgument(
                    "the root of a scatter must supply data",
                ))
            }
            (false, _) => None,
        };
        let piece = self.scatter_pieces(root, parts, "scatterv")?;
        Ok(view::<T>(piece.as_bytes())?.to_vec())
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
        let pieces = self.allgather_pieces(encode(data), "allgather")?;
        concat(&pieces)
    }

    fn allgather_obj<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Vec<T>> {
        let pieces = self.allgather_pieces(encode_obj(value)?, "allgather")?;
        pieces.iter().map(|p| decode_obj(p.as_bytes())).collect()
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
        if data.len() % p != 0 {
            return Err(Error::InvalidArgument(
                "all-to-all data is not a multiple of the communicator size",
            ));
        }
        let counts = vec![data.len() / p; p];
        Ok(self.alltoallv(data, &counts)?.0)
    }

    fn alltoallv<T: Pod>(&self, data: &[T], counts: &[usize]) -> Result<(Vec<T>, Vec<usize>)> {
        check_type::<T>()?;
        let parts = split_by_counts(data, counts, self.size())?
            .into_iter()
            .map(encode)
            .collect();
        let got = self.alltoall_payloads(parts, "alltoallv")?;
        let pieces: Vec<Piece> = got.into_iter().map(Piece::whole).collect();
        concat(&pieces)
    }

    fn alltoallv_vecs<T: Pod>(&self, parts: Vec<Vec<T>>) -> Result<Vec<Vec<T>>> {
        check_type::<T>()?;
        // Each part is freed as soon as it is encoded: a blocked rank must not keep a second
        // copy of data that already sits in the mailboxes (where it can spill).
        let parts = parts.into_iter().map(|v| encode(&v)).collect();
        let got = self.alltoall_payloads(parts, "alltoallv")?;
        got.into_iter()
            .map(|p| Ok(view::<T>(p.as_bytes())?.to_vec()))
            .collect()
    }

    fn alltoall_obj<T: Serialize + DeserializeOwned>(&self, parts: Vec<T>) -> Result<Vec<T>> {
        let parts = parts.iter().map(encode_obj).collect::<Result<Vec<_>>>()?;
        let got = self.alltoall_payloads(parts, "alltoall")?;
        got.iter().map(|p| decode_obj(p.as_bytes())).collect()
    }
}
