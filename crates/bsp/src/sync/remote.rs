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
//! A message is a header (superstep, number of segments) followed by segments, each with a
//! header (source rank, destination rank, bytes).

use std::sync::Arc;

use spillway_comm::{Collectives, Source};
use spillway_transport::AlignedBuf;

use super::{Published, Touch};
use crate::context::Bsp;
use crate::error::{Error, Misuse, Result};

fn tag(superstep: u64, round: u64) -> i32 {
    (((superstep & 0x3fff_ffff) << 1) | round) as i32
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

fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Whether a round A segment asks for data (its third word, the number of gets, is not 0).
fn asks(segment: &[u8]) -> bool {
    segment
        .get(16..24)
        .is_some_and(|w| w.iter().any(|&b| b != 0))
}

/// One segment of a node-pair message: (source rank, destination rank, start, bytes).
type Segment = (usize, usize, usize, usize);

/// A put or get reply from another node, checked against this rank's areas.
pub(super) struct Remote {
    pub(super) from: usize,
    /// (destination address, offset of the data in `payload`, len)
    pub(super) puts: Vec<(usize, usize, usize)>,
    /// The node-pair message holding the data.
    pub(super) payload: Arc<AlignedBuf>,
}

/// What the remote rounds leave for the rest of the sync.
#[derive(Default)]
pub(super) struct Rounds {
    /// Data to copy into this rank's memory.
    pub(super) remotes: Vec<Remote>,
}

impl Bsp<'_> {
    /// The rank of node `at` that receives node `from`'s messages (both rounds).
    pub(super) fn pair_receiver(&self, at: usize, from: usize) -> usize {
        let members = &self.node_ranks[at];
        members[from % members.len()]
    }

    /// This rank's round A segments: one per rank of another node that it puts to or gets
    /// from, as (destination rank, bytes).
    pub(super) fn segments(
        &self,
        remote_puts: &[Vec<usize>],
        remote_gets: &[Vec<usize>],
    ) -> Vec<(usize, Vec<u8>)> {
        let checked = self.options.checked;
        let mut out = Vec::new();
        for q in 0..self.nprocs() {
            let puts = &remote_puts[q];
            let gets = &remote_gets[q];
            if puts.is_empty() && gets.is_empty() {
                continue;
            }
            let data: usize = puts.iter().map(|&i| self.puts[i].len).sum();
            let mut seg = Vec::with_capacity(24 + 24 * (puts.len() + gets.len()) + data);
            push_u64(&mut seg, self.superstep);
            push_u64(&mut seg, puts.len() as u64);
            push_u64(&mut seg, gets.len() as u64);
            for &i in puts {
                let p = &self.puts[i];
                push_u64(&mut seg, u64::from(p.dst_slot));
                push_u64(&mut seg, p.dst_off as u64);
                push_u64(&mut seg, p.len as u64);
            }
            for &i in gets {
                let g = &self.gets[i];
                push_u64(&mut seg, u64::from(g.src_slot));
                push_u64(&mut seg, g.src_off as u64);
                push_u64(&mut seg, g.len as u64);
            }
            for &i in puts {
                let p = &self.puts[i];
                let (src, _) = self.put_source(p.src);
                // SAFETY: `src..src+len` lies in this rank's registered area (bounds checked
                // at the put) or put buffer; only this thread writes them, and not now.
                seg.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(src as *const u8, p.len)
                });
            }
            if checked {
                for &i in puts {
                    seg.extend_from_slice(self.puts[i].loc.to_string().as_bytes());
                    seg.push(0);
                }
                for &i in gets {
                    seg.extend_from_slice(self.gets[i].loc.to_string().as_bytes());
                    seg.push(0);
                }
            }
            out.push((q, seg));
        }
        out
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
            if src >= self.nprocs() || dst >= self.nprocs() {
                return Err(bad());
            }
            let start = rd.at;
            rd.take(len).ok_or_else(bad)?;
            out.push((src, dst, start, len));
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
    /// requests, 1: get replies), as (source rank, destination rank, bytes).
    fn outgoing(&self, round: u64, m: usize, mut f: impl FnMut(usize, usize, &[u8])) {
        for l in 0..self.node_members.len() {
            let member = self.node_members[l];
            if round == 0 {
                for (dst, seg) in self.node.get(l).remote_out.iter() {
                    if self.node_of[*dst] == m {
                        f(member, *dst, seg);
                    }
                }
            } else {
                self.node.exchange(l, |x| {
                    for (dst, bytes) in &x.replies {
                        if self.node_of[*dst] == m {
                            f(member, *dst, bytes);
                        }
                    }
                });
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
                self.outgoing(round, m, |_, _, b| total += 24 + b.len());
                let mut buf = AlignedBuf::for_overwrite(total);
                let out = buf.as_bytes_mut();
                let mut at = 16;
                let mut n = 0u64;
                self.outgoing(round, m, |src, dst, b| {
                    out[at..at + 8].copy_from_slice(&(src as u64).to_le_bytes());
                    out[at + 8..at + 16].copy_from_slice(&(dst as u64).to_le_bytes());
                    out[at + 16..at + 24].copy_from_slice(&(b.len() as u64).to_le_bytes());
                    out[at + 24..at + 24 + b.len()].copy_from_slice(b);
                    at += 24 + b.len();
                    n += 1;
                });
                out[..8].copy_from_slice(&self.superstep.to_le_bytes());
                out[8..16].copy_from_slice(&n.to_le_bytes());
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
            if round == 0 {
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
        self.send_and_receive(0, &others, &others)
    }

    /// The rest of the rounds with the other nodes, after the node barrier that follows the
    /// publication: this rank takes the requests addressed to it from round A's messages,
    /// and the get replies travel back (round B) along the node pairs whose requests held
    /// gets. `all` holds what every rank of this node published. The reads of this rank's
    /// memory by other nodes' gets are added to `reads`.
    pub(super) fn remote_rounds(
        &self,
        all: &[Arc<Published>],
        remote_gets: &[Vec<usize>],
        reads: &mut Vec<Touch>,
    ) -> Result<Rounds> {
        let me = self.pid();
        let me_local = self.local_index[me].expect("this rank is on its node");
        let nodes = self.node_ranks.len();
        let mut rounds = Rounds::default();

        // The requests addressed to this rank; the node pairs that carry gets each way.
        let mut replies: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut answer_to = vec![false; nodes];
        let mut replies_from = vec![false; nodes];
        for p in all {
            for (dst, seg) in &p.remote_out {
                replies_from[self.node_of[*dst]] |= asks(seg);
            }
        }
        for l in 0..all.len() {
            for (sender, msg) in self.node.exchange(l, |x| x.inbox_a.clone()) {
                for (src, dst, start, len) in self.walk(msg.as_bytes(), sender)? {
                    answer_to[self.node_of[src]] |= asks(&msg.as_bytes()[start..start + len]);
                    if dst == me {
                        self.take_segment(&msg, start, len, src, &mut rounds, &mut replies, reads)?;
                    }
                }
            }
        }
        if !answer_to.iter().chain(&replies_from).any(|&b| b) {
            return Ok(rounds);
        }

        // Round B: the replies go back along the pairs that carried gets.
        self.node.exchange(me_local, |x| x.replies = replies);
        self.send_and_receive(1, &answer_to, &replies_from)?;
        self.node_comm.barrier()?;
        let expected = remote_gets.iter().filter(|g| !g.is_empty()).count();
        let mut got = 0;
        for l in 0..all.len() {
            for (sender, msg) in self.node.exchange(l, |x| x.inbox_b.clone()) {
                for (from, dst, start, len) in self.walk(msg.as_bytes(), sender)? {
                    if dst != me {
                        continue;
                    }
                    got += 1;
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
                    rounds.remotes.push(Remote {
                        from,
                        puts,
                        payload: msg.clone(),
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
        Ok(rounds)
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
        rounds: &mut Rounds,
        replies: &mut Vec<(usize, Vec<u8>)>,
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
            let mut reply = Vec::new();
            for (i, &(slot, off, len)) in heads[np..].iter().enumerate() {
                let src = self
                    .dest_range(slot, off, len, from, "get", None)
                    .map_err(|e| with_loc(e, np + i))?;
                reads.push(Touch {
                    start: src,
                    end: src + len,
                    what: "get reads",
                    by: from,
                    loc: None,
                });
                // SAFETY: checked against this rank's area just above; only this thread
                // writes it, and not now.
                reply.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(src as *const u8, len)
                });
            }
            replies.push((from, reply));
        }
        if np > 0 {
            rounds.remotes.push(Remote {
                from,
                puts,
                payload: msg.clone(),
            });
        }
        Ok(())
    }
}
