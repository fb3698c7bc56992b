//! Rounds A and B of a sync: the requests between ranks of different nodes, one message per
//! rank pair in each direction.

use spillway_comm::Source;

use super::Touch;
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

/// A put or get from another node, checked against this rank's areas.
pub(super) struct Remote {
    pub(super) from: usize,
    pub(super) puts: Vec<(usize, usize, usize)>, // (destination address, payload offset, len)
    pub(super) payload: Vec<u8>,
}

impl Bsp<'_> {
    /// Round A: one message to every rank of another node with this rank's puts to it and
    /// gets from it; the requests received are checked and the gets answered.
    pub(super) fn round_a(
        &self,
        remote_puts: &[Vec<usize>],
        remote_gets: &[Vec<usize>],
        remotes: &mut Vec<Remote>,
        replies: &mut Vec<(usize, Vec<u8>)>,
        reads: &mut Vec<Touch>,
    ) -> Result<()> {
        let t = tag(self.superstep, 0);
        let checked = self.options.checked;
        let mut peers = 0;
        for q in 0..self.nprocs() {
            if self.local_index[q].is_some() {
                continue;
            }
            peers += 1;
            let puts = &remote_puts[q];
            let gets = &remote_gets[q];
            let data: usize = puts.iter().map(|&i| self.puts[i].len).sum();
            let mut msg = Vec::with_capacity(24 + 24 * (puts.len() + gets.len()) + data);
            push_u64(&mut msg, self.superstep);
            push_u64(&mut msg, puts.len() as u64);
            push_u64(&mut msg, gets.len() as u64);
            for &i in puts {
                let p = &self.puts[i];
                push_u64(&mut msg, u64::from(p.dst_slot));
                push_u64(&mut msg, p.dst_off as u64);
                push_u64(&mut msg, p.len as u64);
            }
            for &i in gets {
                let g = &self.gets[i];
                push_u64(&mut msg, u64::from(g.src_slot));
                push_u64(&mut msg, g.src_off as u64);
                push_u64(&mut msg, g.len as u64);
            }
            for &i in puts {
                let p = &self.puts[i];
                let (src, _) = self.put_source(p.src);
                // SAFETY: `src..src+len` lies in this rank's registered area (bounds checked
                // at the put) or put buffer; only this thread writes them, and not now.
                msg.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(src as *const u8, p.len)
                });
            }
            if checked {
                for &i in puts {
                    msg.extend_from_slice(self.puts[i].loc.to_string().as_bytes());
                    msg.push(0);
                }
                for &i in gets {
                    msg.extend_from_slice(self.gets[i].loc.to_string().as_bytes());
                    msg.push(0);
                }
            }
            self.comm.send(q, t, &msg)?;
        }
        for _ in 0..peers {
            let (msg, status) = self.comm.recv::<u8>(Source::Any, t)?;
            let from = status.source;
            let bad = || {
                Error::misuse(
                    Misuse::MismatchedSync,
                    format!("malformed sync message from rank {from}"),
                    None,
                )
            };
            let mut rd = Reader { bytes: &msg, at: 0 };
            let step = rd.u64().ok_or_else(bad)?;
            if step != self.superstep {
                return Err(Error::misuse(
                    Misuse::MismatchedSync,
                    format!(
                        "rank {from} is at sync #{}, rank {} at sync #{}",
                        step + 1,
                        self.pid(),
                        self.superstep + 1
                    ),
                    None,
                ));
            }
            let np = rd.u64().ok_or_else(bad)? as usize;
            let ng = rd.u64().ok_or_else(bad)? as usize;
            let mut heads = Vec::with_capacity(np + ng);
            for _ in 0..np + ng {
                let slot = rd.u64().ok_or_else(bad)? as u32;
                let off = rd.u64().ok_or_else(bad)? as usize;
                let len = rd.u64().ok_or_else(bad)? as usize;
                heads.push((slot, off, len));
            }
            let data_at = rd.at;
            let data_len: usize = heads[..np].iter().map(|h| h.2).sum();
            rd.take(data_len).ok_or_else(bad)?;
            let mut loc_text: Vec<String> = Vec::new();
            if checked {
                for _ in 0..np + ng {
                    let rest = &msg[rd.at..];
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
            let mut at = 0;
            for (i, &(slot, off, len)) in heads[..np].iter().enumerate() {
                let dst = self
                    .dest_range(slot, off, len, from, "put", None)
                    .map_err(|e| with_loc(e, i))?;
                puts.push((dst, at, len));
                at += len;
            }
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
            if ng > 0 {
                replies.push((from, reply));
            }
            let payload = msg[data_at..data_at + data_len].to_vec();
            remotes.push(Remote {
                from,
                puts,
                payload,
            });
        }
        Ok(())
    }

    /// Round B: get replies go back; each becomes a set of copies into this rank's memory.
    pub(super) fn round_b(
        &self,
        remote_gets: &[Vec<usize>],
        replies: Vec<(usize, Vec<u8>)>,
        remotes: &mut Vec<Remote>,
    ) -> Result<()> {
        let t = tag(self.superstep, 1);
        for (to, data) in &replies {
            self.comm.send(*to, t, data)?;
        }
        let expected = remote_gets.iter().filter(|g| !g.is_empty()).count();
        for _ in 0..expected {
            let (data, status) = self.comm.recv::<u8>(Source::Any, t)?;
            let from = status.source;
            let mut puts = Vec::new();
            let mut at = 0;
            for &i in &remote_gets[from] {
                let g = &self.gets[i];
                let dst = self.area(g.dst_index, g.dst_global).addr() + g.dst_off;
                puts.push((dst, at, g.len));
                at += g.len;
            }
            if at != data.len() {
                return Err(Error::misuse(
                    Misuse::MismatchedSync,
                    format!(
                        "get reply of {} bytes from rank {from}, {at} expected",
                        data.len()
                    ),
                    None,
                ));
            }
            remotes.push(Remote {
                from,
                puts,
                payload: data,
            });
        }
        Ok(())
    }
}
