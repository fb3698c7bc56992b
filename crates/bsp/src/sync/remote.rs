//! Rounds A and B of a sync: the requests between ranks of different nodes, one message per
//! node pair in each direction.
//!
//! Every rank encodes its requests to each rank of another node that it puts to or gets from
//! as a *segment* (the headers of its puts and gets, the put data, and in checked mode the
//! call sites) and publishes its segments to its node. The rank of node `N` that enters the
//! sync last (so nobody waits to gather) sends, for every other node `M`, the segments of all
//! of `N`'s ranks for ranks of `M` in one message to `receiver(M, N)` (`Bsp::pair_receiver`),
//! which shares it with its node; after the node barrier that follows the publication each
//! rank of `M` takes the segments addressed to it, checks them and answers its gets (round A).
//! The get replies travel back the same way, one message per node pair, only between pairs
//! whose requests held gets, and a node barrier shares them (round B). The receiving of the
//! pairs is spread over the ranks of a node.
//!
//! A segment of [`DIRECT_MIN`] bytes or more (a large put or get reply) travels on its own,
//! straight from its source rank to its destination rank as soon as it is made, and only its
//! header goes in the node-pair message (as MPI libraries send small messages eagerly and
//! large ones apart): gathering it would add a serial copy of the node's data to the sync.
//!
//! A message is a header (superstep, number of segments) followed by segments, each with a
//! header (source rank, destination rank, bytes, flags: on its own, holds gets).

use std::sync::Arc;

use spillway_comm::Source;
use spillway_transport::AlignedBuf;

use super::conflict::Touch;
use super::published::{Out, Published};
use crate::context::Bsp;
use crate::error::{Error, Misuse, Result};

/// Rounds of the tags: the node-pair messages of rounds A and B, and the segments that travel
/// on their own in each.
const ROUND_A: u64 = 0;
const ROUND_B: u64 = 1;
const DIRECT_A: u64 = 2;
const DIRECT_B: u64 = 3;

fn tag(superstep: u64, round: u64) -> i32 {
    (((superstep & 0x1fff_ffff) << 2) | round) as i32
}

/// Segments of this many bytes and more travel on their own, from their source rank straight
/// to their destination rank, and only their header goes in the node-pair message: copying
/// them into the message would put a serial copy on the critical path, while one more message
/// costs less than copying this much (a few microseconds against 10 us and more).
pub(super) const DIRECT_MIN: usize = 64 << 10;

/// Flags of a segment header.
const DIRECT: u64 = 1;
const ASKS: u64 = 2;

impl Out {
    fn flags(&self) -> u64 {
        (if self.direct { DIRECT } else { 0 }) | (if self.asks { ASKS } else { 0 })
    }
}

/// Writes into a buffer sized in advance.
struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) {
        self.out[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// One segment of a node-pair message: (source rank, destination rank, start, bytes, flags).
type Segment = (usize, usize, usize, usize, u64);

/// A put or get reply from another node, checked against this rank's areas.
pub(super) struct Remote {
    pub(super) from: usize,
    /// (destination address, offset of the data in `payload`, len)
    pub(super) puts: Vec<(usize, usize, usize)>,
    /// The node-pair message holding the data.
    pub(super) payload: Arc<AlignedBuf>,
}

impl Bsp<'_> {
    /// The rank of node `at` that receives node `from`'s messages (both rounds).
    pub(super) fn pair_receiver(&self, at: usize, from: usize) -> usize {
        let members = &self.node_ranks[at];
        members[from % members.len()]
    }

    /// This rank's round A segments: one per rank of another node that it puts to or gets
    /// from. Those of [`DIRECT_MIN`] bytes and more are sent here, straight to their
    /// destination rank.
    pub(super) fn segments(
        &self,
        remote_puts: &[Vec<usize>],
        remote_gets: &[Vec<usize>],
    ) -> Result<Vec<Out>> {
        let checked = self.options.checked;
        let mut out = Vec::new();
        for q in 0..self.nprocs() {
            let puts = &remote_puts[q];
            let gets = &remote_gets[q];
            if puts.is_empty() && gets.is_empty() {
                continue;
            }
            let locs: Vec<String> = if checked {
                let puts = puts.iter().map(|&i| self.puts[i].loc.to_string());
                puts.chain(gets.iter().map(|&i| self.gets[i].loc.to_string()))
                    .collect()
            } else {
                Vec::new()
            };
            let data: usize = puts.iter().map(|&i| self.puts[i].len).sum();
            let len = 24
                + 24 * (puts.len() + gets.len())
                + data
                + locs.iter().map(|l| l.len() + 1).sum::<usize>();
            let mut seg = AlignedBuf::for_overwrite(len);
            let mut w = Writer {
                out: seg.as_bytes_mut(),
                at: 0,
            };
            w.u64(self.superstep);
            w.u64(puts.len() as u64);
            w.u64(gets.len() as u64);
            for &i in puts {
                let p = &self.puts[i];
                w.u64(u64::from(p.dst_slot));
                w.u64(p.dst_off as u64);
                w.u64(p.len as u64);
            }
            for &i in gets {
                let g = &self.gets[i];
                w.u64(u64::from(g.src_slot));
                w.u64(g.src_off as u64);
                w.u64(g.len as u64);
            }
            for &i in puts {
                let p = &self.puts[i];
                let (src, _) = self.put_source(p.src);
                // SAFETY: `src..src+len` lies in this rank's registered area (bounds checked
                // at the put) or put buffer; only this thread writes them, and not now.
                w.bytes(unsafe { std::slice::from_raw_parts(src as *const u8, p.len) });
            }
            for l in &locs {
                w.bytes(l.as_bytes());
                w.bytes(&[0]);
            }
            out.push(self.dispatch(q, seg, !gets.is_empty(), DIRECT_A)?);
        }
        Ok(out)
    }

    /// A segment for rank `q`: sent now on its own (tag round `round`) when it is large.
    fn dispatch(&self, q: usize, seg: AlignedBuf, asks: bool, round: u64) -> Result<Out> {
        if seg.len() < DIRECT_MIN {
            return Ok(Out {
                dst: q,
                bytes: seg,
                direct: false,
                asks,
            });
        }
        self.comm.send_buf(q, tag(self.superstep, round), seg)?;
        Ok(Out {
            dst: q,
            bytes: AlignedBuf::default(),
            direct: true,
            asks,
        })
    }

    /// The segments of a node-pair message from `sender`, checked for this superstep.
    fn walk(&self, msg: &[u8], sender: usize) -> Result<Vec<Segment>> {
        let bad = || {
            Error::misuse(
                Misuse::MismatchedSync,
                format!("malformed sync message from rank {sender}"),
                None,
            )
        };
        let mut rd = Reader { bytes: msg, at: 0 };
        let step = rd.u64().ok_or_else(bad)?;
        if step != self.superstep {
            return Err(self.mismatch(sender, step));
        }
        let n = rd.u64().ok_or_else(bad)?;
        let mut out = Vec::new();
        for _ in 0..n {
            let src = rd.u64().ok_or_else(bad)? as usize;
            let dst = rd.u64().ok_or_else(bad)? as usize;
            let len = rd.u64().ok_or_else(bad)? as usize;
            let flags = rd.u64().ok_or_else(bad)?;
            if src >= self.nprocs() || dst >= self.nprocs() {
                return Err(bad());
            }
            let start = rd.at;
            if flags & DIRECT == 0 {
                rd.take(len).ok_or_else(bad)?;
            }
            out.push((src, dst, start, len, flags));
        }
        if rd.at != msg.len() {
            return Err(bad());
        }
        Ok(out)
    }

    fn mismatch(&self, from: usize, step: u64) -> Error {
        Error::misuse(
            Misuse::MismatchedSync,
            format!(
                "rank {from} is at sync #{}, rank {} at sync #{}",
                step + 1,
                self.pid(),
                self.superstep + 1
            ),
            None,
        )
    }

    /// Calls `f` on every segment this node sends to node `m` in remote round `round` (0:
    /// requests, 1: get replies), with its source rank.
    fn outgoing(&self, round: u64, m: usize, mut f: impl FnMut(usize, &Out)) {
        for l in 0..self.node_members.len() {
            let member = self.node_members[l];
            let mut each = |outs: &[Out]| {
                for o in outs.iter().filter(|o| self.node_of[o.dst] == m) {
                    f(member, o);
                }
            };
            if round == ROUND_A {
                // SAFETY: round A runs after every member of the node published and before
                // the sync's first node barrier, and no member takes its publication back
                // before the last one.
                each(&unsafe { self.node.get(l) }.remote_out);
            } else {
                self.node.exchange(l, |x| each(&x.replies));
            }
        }
    }

    /// This node's messages to the other nodes in round `round` (0: requests, 1: get
    /// replies), sent by whichever rank of the node arrives last, so that nobody waits for
    /// the others to gather them; then the messages for this rank to receive, shared with
    /// the node. Every rank of the node calls it, after depositing what it sends.
    fn send_and_receive(&self, round: u64, to: &[bool], from: &[bool]) -> Result<()> {
        let me = self.pid();
        let me_local = self.local_index[me].expect("this rank is on its node");
        let my_node = self.node_of[me];
        let t = tag(self.superstep, round);
        if self.node.arrive(round as usize) {
            for m in (0..self.node_ranks.len()).filter(|&m| to[m]) {
                // Sized first, then written once into the buffer that becomes the message.
                let mut total = 16;
                let mut n = 0u64;
                self.outgoing(round, m, |_, o| {
                    total += 32 + o.bytes.len();
                    n += 1;
                });
                let mut buf = AlignedBuf::for_overwrite(total);
                let mut w = Writer {
                    out: buf.as_bytes_mut(),
                    at: 0,
                };
                w.u64(self.superstep);
                w.u64(n);
                self.outgoing(round, m, |src, o| {
                    w.u64(src as u64);
                    w.u64(o.dst as u64);
                    w.u64(o.bytes.len() as u64);
                    w.u64(o.flags());
                    w.bytes(o.bytes.as_bytes());
                });
                self.comm.send_buf(self.pair_receiver(m, my_node), t, buf)?;
            }
        }
        let expected = (0..self.node_ranks.len())
            .filter(|&n| from[n] && self.pair_receiver(my_node, n) == me)
            .count();
        let mut inbox = Vec::with_capacity(expected);
        for _ in 0..expected {
            let (msg, status) = self.comm.recv_shared(Source::Any, t)?;
            inbox.push((status.source, msg));
        }
        self.node.exchange(me_local, |x| {
            if round == ROUND_A {
                x.inbox_a = inbox;
            } else {
                x.inbox_b = inbox;
            }
        });
        Ok(())
    }

    /// Round A's messages: sent to and received from every other node. Called after this
    /// rank published its requests, before the node barrier that follows the publication.
    pub(super) fn round_a(&self) -> Result<()> {
        let my_node = self.node_of[self.pid()];
        let others: Vec<bool> = (0..self.node_ranks.len()).map(|n| n != my_node).collect();
        self.send_and_receive(ROUND_A, &others, &others)
    }

    /// The rest of the rounds with the other nodes, after the node barrier that follows the
    /// publication: this rank takes the requests addressed to it from round A's messages,
    /// and the get replies travel back (round B) along the node pairs whose requests held
    /// gets. `all` holds what every rank of this node published. The reads of this rank's
    /// memory by other nodes' gets are added to `reads`.
    pub(super) fn remote_rounds(
        &self,
        all: &[&Published],
        remote_gets: &[Vec<usize>],
        reads: &mut Vec<Touch>,
    ) -> Result<Vec<Remote>> {
        let me = self.pid();
        let me_local = self.local_index[me].expect("this rank is on its node");
        let nodes = self.node_ranks.len();
        let mut remotes = Vec::new();

        // The requests addressed to this rank; the node pairs that carry gets each way.
        let mut replies: Vec<Out> = Vec::new();
        let mut answer_to = vec![false; nodes];
        let mut replies_from = vec![false; nodes];
        for p in all {
            for o in &p.remote_out {
                replies_from[self.node_of[o.dst]] |= o.asks;
            }
        }
        for l in 0..all.len() {
            for (sender, msg) in self.node.exchange(l, |x| x.inbox_a.clone()) {
                for (src, dst, start, len, flags) in self.walk(msg.as_bytes(), sender)? {
                    answer_to[self.node_of[src]] |= flags & ASKS != 0;
                    if dst != me {
                        continue;
                    }
                    let (seg, start, len) = self.segment(&msg, start, len, flags, src, DIRECT_A)?;
                    self.take_segment(&seg, start, len, src, &mut remotes, &mut replies, reads)?;
                }
            }
        }
        if !answer_to.iter().chain(&replies_from).any(|&b| b) {
            return Ok(remotes);
        }

        // Round B: the replies go back along the pairs that carried gets.
        self.node.exchange(me_local, |x| x.replies = replies);
        self.send_and_receive(ROUND_B, &answer_to, &replies_from)?;
        self.node_barrier(0)?;
        let expected = remote_gets.iter().filter(|g| !g.is_empty()).count();
        let mut got = 0;
        for l in 0..all.len() {
            for (sender, msg) in self.node.exchange(l, |x| x.inbox_b.clone()) {
                for (from, dst, start, len, flags) in self.walk(msg.as_bytes(), sender)? {
                    if dst != me {
                        continue;
                    }
                    got += 1;
                    let (msg, start, len) =
                        self.segment(&msg, start, len, flags, from, DIRECT_B)?;
                    let mut puts = Vec::new();
                    let mut at = start;
                    for &i in &remote_gets[from] {
                        let g = &self.gets[i];
                        let dst = self.area(g.dst_index, g.dst_global).addr() + g.dst_off;
                        puts.push((dst, at, g.len));
                        at += g.len;
                    }
                    if remote_gets[from].is_empty() || at != start + len {
                        return Err(Error::misuse(
                            Misuse::MismatchedSync,
                            format!(
                                "get reply of {len} bytes from rank {from}, {} expected",
                                at - start
                            ),
                            None,
                        ));
                    }
                    remotes.push(Remote {
                        from,
                        puts,
                        payload: msg,
                    });
                }
            }
        }
        if got != expected {
            return Err(Error::misuse(
                Misuse::MismatchedSync,
                format!("{got} get replies reached rank {me}, {expected} expected"),
                None,
            ));
        }
        Ok(remotes)
    }

    /// The bytes of a segment from rank `src` listed in a node-pair message at `start..+len`:
    /// there, or, when it travelled on its own, received now (tag round `direct`). Returns the
    /// buffer holding it and where.
    fn segment(
        &self,
        msg: &Arc<AlignedBuf>,
        start: usize,
        len: usize,
        flags: u64,
        src: usize,
        direct: u64,
    ) -> Result<(Arc<AlignedBuf>, usize, usize)> {
        if flags & DIRECT == 0 {
            return Ok((msg.clone(), start, len));
        }
        let t = tag(self.superstep, direct);
        let (seg, _) = self.comm.recv_shared(Source::Rank(src), t)?;
        let len = seg.len();
        Ok((seg, 0, len))
    }

    /// Checks one round A segment from rank `from` addressed to this rank, keeps its puts and
    /// answers its gets.
    #[allow(clippy::too_many_arguments)]
    fn take_segment(
        &self,
        msg: &Arc<AlignedBuf>,
        start: usize,
        len: usize,
        from: usize,
        remotes: &mut Vec<Remote>,
        replies: &mut Vec<Out>,
        reads: &mut Vec<Touch>,
    ) -> Result<()> {
        let bad = || {
            Error::misuse(
                Misuse::MismatchedSync,
                format!("malformed sync request from rank {from}"),
                None,
            )
        };
        let seg = &msg.as_bytes()[start..start + len];
        let mut rd = Reader { bytes: seg, at: 0 };
        let step = rd.u64().ok_or_else(bad)?;
        if step != self.superstep {
            return Err(self.mismatch(from, step));
        }
        let np = rd.u64().ok_or_else(bad)? as usize;
        let ng = rd.u64().ok_or_else(bad)? as usize;
        let mut heads = Vec::with_capacity(np.saturating_add(ng).min(seg.len() / 24));
        for _ in 0..np.checked_add(ng).ok_or_else(bad)? {
            let slot = rd.u64().ok_or_else(bad)? as u32;
            let off = rd.u64().ok_or_else(bad)? as usize;
            let len = rd.u64().ok_or_else(bad)? as usize;
            heads.push((slot, off, len));
        }
        let data_at = rd.at;
        let data_len = heads[..np]
            .iter()
            .try_fold(0usize, |s, h| s.checked_add(h.2))
            .ok_or_else(bad)?;
        rd.take(data_len).ok_or_else(bad)?;
        let mut loc_text: Vec<String> = Vec::new();
        if self.options.checked {
            for _ in 0..np + ng {
                let rest = &seg[rd.at..];
                let end = rest.iter().position(|&b| b == 0).ok_or_else(bad)?;
                loc_text.push(String::from_utf8_lossy(&rest[..end]).into_owned());
                rd.at += end + 1;
            }
        }
        let with_loc = |e: Error, i: usize| match (e, loc_text.get(i)) {
            (
                Error::Misuse {
                    kind,
                    detail,
                    location,
                },
                Some(at),
            ) => Error::Misuse {
                kind,
                detail: format!("{detail} (called at {at})"),
                location,
            },
            (e, _) => e,
        };
        let mut puts = Vec::with_capacity(np);
        let mut at = start + data_at;
        for (i, &(slot, off, len)) in heads[..np].iter().enumerate() {
            let dst = self
                .dest_range(slot, off, len, from, "put", None)
                .map_err(|e| with_loc(e, i))?;
            puts.push((dst, at, len));
            at += len;
        }
        if ng > 0 {
            let mut sources = Vec::with_capacity(ng);
            for (i, &(slot, off, len)) in heads[np..].iter().enumerate() {
                let read = self
                    .touch(slot, off, len, from, false, None)
                    .map_err(|e| with_loc(e, np + i))?;
                sources.push((read.start, len));
                reads.push(read);
            }
            let mut reply = AlignedBuf::for_overwrite(sources.iter().map(|s| s.1).sum());
            let mut w = Writer {
                out: reply.as_bytes_mut(),
                at: 0,
            };
            for (src, len) in sources {
                // SAFETY: checked against this rank's area just above; only this thread
                // writes it, and not now.
                w.bytes(unsafe { std::slice::from_raw_parts(src as *const u8, len) });
            }
            replies.push(self.dispatch(from, reply, false, DIRECT_B)?);
        }
        if np > 0 {
            remotes.push(Remote {
                from,
                puts,
                payload: msg.clone(),
            });
        }
        Ok(())
    }
}
