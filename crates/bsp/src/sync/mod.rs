//! `sync`: the end of a superstep, where every queued put and get happens.
//!
//! # Protocol
//! The ranks of one node are threads of one process and publish their requests in a node
//! object ([`NodeState`]); ranks on other nodes get theirs in messages, one per node pair and
//! direction (see the `remote` module). A sync runs:
//!
//! 1. (checked mode) an allgather of every rank's superstep number, count of global
//!    (de)registrations and call site: ranks that disagree are reported;
//! 2. publication of the node-local requests, the area tables and the requests to other
//!    nodes' ranks; round A with other nodes: the last rank of the node to publish sends the
//!    requests of all its node's ranks to each other node in one message, and the messages
//!    from the other nodes are received; then the first node barrier. On one node, a rank
//!    that queued nothing publishes nothing: the barrier sums how many ranks published, and
//!    when none did the superstep ends there (an empty sync is one barrier); when only some
//!    did, the others publish and meet once more. The same sum carries LPF's count of
//!    processes that left the SPMD function ([`Bsp::sync_or_leave`]);
//! 3. every rank takes the requests of other nodes addressed to it, checks bounds, keeps the
//!    put data and reads the data asked for;
//! 4. round B (only where gets cross nodes): the get replies go back the same way, one message
//!    per node pair, and a node barrier shares them;
//! 5. checks: every rank verifies the requests that write its memory (bounds, slots) and that
//!    no byte of its memory is both read and written in the superstep; a violation fails the
//!    job. The check is what makes the copies below free of data races, so it runs in every
//!    mode: a rank copies only into its own memory, after its own check, and a rank whose
//!    check fails copies nothing, so nobody writes a byte that another rank reads;
//! 6. in checked mode a node barrier, so that a violation fails the job before any byte
//!    moves (in unchecked mode, as in LPF, the contents of the memory are undefined after a
//!    fatal error: other ranks may have made their copies); data phase: each rank performs
//!    every copy *into its own memory* — puts
//!    from node ranks, its own gets from node ranks, then the data of rounds A and B — as
//!    `memcpy`s between the registered areas (LPF's rule: destinations copy). All writes to a
//!    rank's memory are done by its thread, one after the other: concurrent writes to one
//!    place resolve in that sequential order and no element is ever torn;
//! 7. node barrier (nobody reads an area after its owner has left the sync).
//!
//! # Cost
//! With `h` the largest number of bytes a rank sends or receives: `g*h + l`, where `l` covers
//! the node barriers (two, one more in checked mode, when gets cross nodes or when only some
//! ranks of a node queued requests; one for an empty superstep) and, across nodes, one message per node pair
//! in each direction and round. The node barrier (`barrier` module) is a counter over shared
//! atomics with a short spin: nothing is allocated and nothing locked when ranks arrive
//! together.
//!
//! # Storage-backed areas
//! Other ranks read a rank's storage-backed area in place (a shared file mapping: correct
//! whether loaded or not) and hand the pages back with `Rank::release_read`. The owner loads
//! its storage-backed destinations (counted against the budget) after the last blocking call
//! before its copies, so no unload comes between the load and the writes.
//!
//! # Not yet
//! Message headers carry the superstep number (in the tag and in the node-pair messages) but
//! the runtime itself does not use it.

use std::panic::Location;
use std::sync::Arc;

use spillway_comm::Collectives;

use crate::context::{Bsp, PutSource};
use crate::error::{Error, Misuse, Result};

mod barrier;
mod conflict;
pub(crate) mod published;
mod remote;
pub(crate) mod scratch;

use conflict::{check_conflicts, Touch};
use published::{Exchange, NodeGet, NodePut, Published};
use remote::Remote;
use scratch::{Copy, Scratch};

/// The unit of the leaving ranks in the sum of a sync's first node barrier (the ranks that
/// published count in units of one).
const LEAVING: u64 = 1 << 32;

/// What a rank keeps of its published requests for the rest of the sync.
struct Pending {
    remote_gets: Vec<Vec<usize>>,
    reads: Vec<Touch>,
    writes: Vec<Touch>,
}

impl<'r> Bsp<'r> {
    /// Ends the superstep (LPF's `lpf_sync`): every put and get queued by any rank since the
    /// last sync has happened when it returns, and capacities requested since take effect.
    ///
    /// # Semantics
    /// Collective over the context. Writes of several requests to one place land in some
    /// sequential order, each element whole; a superstep that reads and writes the same
    /// bytes is illegal and fails the job (so does a put or get out of bounds of its remote
    /// area). Within a node the copies are `memcpy`s between the registered areas, each done
    /// by the destination rank; between nodes one message goes each way per node pair.
    ///
    /// # Cost
    /// `g*h + l`, with `h` the largest number of bytes any rank sends or receives in the
    /// superstep (see [`probe`](Self::probe) for `g` and `l`).
    ///
    /// # Errors
    /// Fatal: [`Misuse`] (out of bounds, unknown slot, read-write conflict, mismatched syncs)
    /// or [`Error::Runtime`]; the job ends on every rank.
    #[track_caller]
    pub fn sync(&mut self) -> Result<()> {
        let location = Location::caller();
        match self.sync_inner(location, false).map(|_| ()) {
            Ok(()) => Ok(()),
            Err(e) => {
                if !matches!(e, Error::Runtime(spillway_runtime::Error::Aborted)) {
                    self.comm.runtime().fail_job(e.to_string());
                }
                Err(e)
            }
        }
    }

    /// The checked-mode agreement at the end of an SPMD function: every rank must have done
    /// the same number of syncs.
    pub(crate) fn finish(&mut self, location: &'static Location<'static>) -> Result<()> {
        if self.options.checked {
            let r = self.check_agreement(location, true);
            if let Err(e) = &r {
                if !matches!(e, Error::Runtime(spillway_runtime::Error::Aborted)) {
                    self.comm.runtime().fail_job(e.to_string());
                }
            }
            r?;
        }
        if !self.puts.is_empty() || !self.gets.is_empty() {
            return Err(Error::misuse(
                Misuse::MismatchedSync,
                format!(
                    "{} puts and {} gets were queued after the last sync",
                    self.puts.len(),
                    self.gets.len()
                ),
                Some(
                    self.puts
                        .first()
                        .map_or_else(|| self.gets[0].loc, |p| p.loc),
                ),
            ));
        }
        Ok(())
    }

    fn check_agreement(&self, location: &'static Location<'static>, end: bool) -> Result<()> {
        let mine = (self.superstep, self.global_ops, end, location.to_string());
        let all: Vec<(u64, u64, bool, String)> = self.comm.allgather_obj(&mine)?;
        let first = &all[0];
        if all
            .iter()
            .all(|a| (a.0, a.1, a.2) == (first.0, first.1, first.2))
        {
            return Ok(());
        }
        let describe = |(pid, a): (usize, &(u64, u64, bool, String))| {
            let at = if a.2 {
                format!("the end of its SPMD function after {} syncs", a.0)
            } else {
                format!("sync #{} ({})", a.0 + 1, a.3)
            };
            format!("rank {pid} at {at} with {} global (de)registrations", a.1)
        };
        let me = self.pid();
        let other = all
            .iter()
            .enumerate()
            .find(|(_, a)| (a.0, a.1, a.2) != (mine.0, mine.1, mine.2))
            .unwrap_or((0, first));
        Err(Error::misuse(
            Misuse::MismatchedSync,
            format!("{}, but {}", describe((me, &all[me])), describe(other)),
            Some(location),
        ))
    }

    /// LPF's sync, which also tells whether a process has left: every rank calls either this
    /// (with `leaving` false) or [`sync`](Self::sync) for each superstep, and a rank that
    /// returns from its SPMD function while others may still sync calls it once with
    /// `leaving` true, meeting their pending sync. Returns the number of ranks that left: 0
    /// when the superstep ended normally; otherwise no request of the superstep was performed
    /// and the sync can never end (the context is unusable).
    ///
    /// # Cost
    /// As [`sync`](Self::sync): on one node the count travels in the sync's first node
    /// barrier; with ranks on several nodes, or in checked mode, it takes one all-reduce more.
    ///
    /// # Errors
    /// As [`sync`](Self::sync).
    #[track_caller]
    pub fn sync_or_leave(&mut self, leaving: bool) -> Result<u64> {
        let location = Location::caller();
        let r = if self.fused() {
            self.sync_inner(location, leaving)
        } else {
            self.counted_sync(location, leaving)
        };
        r.inspect_err(|e| {
            if !matches!(e, Error::Runtime(spillway_runtime::Error::Aborted)) {
                self.comm.runtime().fail_job(e.to_string());
            }
        })
    }

    /// Whether the counts of a sync travel in its node barrier: on one node, unchecked.
    fn fused(&self) -> bool {
        !self.options.checked && self.local_index.iter().all(Option::is_some)
    }

    /// [`sync_or_leave`](Self::sync_or_leave) with the count in an all-reduce of its own.
    fn counted_sync(&mut self, location: &'static Location<'static>, leaving: bool) -> Result<u64> {
        let left = self
            .comm
            .allreduce(&[u64::from(leaving)], spillway_comm::Sum)?[0];
        if left > 0 {
            return Ok(left);
        }
        self.sync_inner(location, false)
    }

    /// The node barrier of the syncs; returns the sum of the members' `value`s.
    fn node_barrier(&self, value: u64) -> Result<u64> {
        Ok(self
            .node
            .barrier
            .wait(self.comm.runtime(), value, &self.node.waiting_for)?)
    }

    /// Splits this rank's requests into node-local ones and the rest and publishes them (with
    /// the area table and, across nodes, the segments for other nodes).
    fn publish(&mut self, multi: bool) -> Result<Pending> {
        let me_local = self.local_index[self.pid()].expect("this rank is on its node");
        let local = self.node_members.len();
        // Last sync's publication and lists, emptied: nothing is allocated once their
        // capacities suffice.
        let mut published = self.spare.take().unwrap_or_default();
        published.puts_to.resize_with(local, Vec::new);
        published.gets_from.resize_with(local, Vec::new);
        published.puts_to.iter_mut().for_each(Vec::clear);
        published.gets_from.iter_mut().for_each(Vec::clear);
        published.remote_out.clear();
        let Published {
            puts_to, gets_from, ..
        } = &mut *published;
        let mut remote_puts: Vec<Vec<usize>> = Vec::new();
        let mut remote_gets: Vec<Vec<usize>> = Vec::new();
        if multi {
            remote_puts = vec![Vec::new(); self.nprocs()];
            remote_gets = vec![Vec::new(); self.nprocs()];
        }
        let mut reads = std::mem::take(&mut self.scratch.reads);
        let mut writes = std::mem::take(&mut self.scratch.writes);
        reads.clear();
        writes.clear();
        let me = self.pid();
        for (i, p) in self.puts.iter().enumerate() {
            let (src, src_is_area) = self.put_source(p.src);
            if src_is_area {
                reads.push(Touch {
                    start: src,
                    end: src + p.len,
                    what: "put reads",
                    by: me,
                    loc: Some(p.loc),
                });
            }
            match self.local_index[p.dst_pid] {
                Some(l) => puts_to[l].push(NodePut {
                    src,
                    src_is_area,
                    dst_slot: p.dst_slot,
                    dst_off: p.dst_off,
                    len: p.len,
                    loc: p.loc,
                }),
                None => remote_puts[p.dst_pid].push(i),
            }
        }
        for (i, g) in self.gets.iter().enumerate() {
            let area = self.area(g.dst_index, g.dst_global);
            let dst = area.addr() + g.dst_off;
            writes.push(Touch {
                start: dst,
                end: dst + g.len,
                what: "get writes",
                by: me,
                loc: Some(g.loc),
            });
            match self.local_index[g.src_pid] {
                Some(l) => gets_from[l].push(NodeGet {
                    src_slot: g.src_slot,
                    src_off: g.src_off,
                    dst,
                    len: g.len,
                    loc: g.loc,
                }),
                None => remote_gets[g.src_pid].push(i),
            }
        }
        if multi {
            published.remote_out = self.segments(&remote_puts, &remote_gets)?;
        }
        published.superstep = self.superstep;
        self.global_table(&mut published.globals);
        self.node.publish(me_local, published);
        Ok(Pending {
            remote_gets,
            reads,
            writes,
        })
    }

    /// Ends the superstep: the queues empty and new capacities take effect.
    fn end_superstep(&mut self) {
        self.puts.clear();
        self.gets.clear();
        self.buffer.clear();
        if let Some(n) = self.reg_pending.take() {
            self.reg_capacity = n;
        }
        if let Some(n) = self.queue_pending.take() {
            self.queue_capacity = n;
        }
        self.superstep += 1;
    }

    fn sync_inner(&mut self, location: &'static Location<'static>, leaving: bool) -> Result<u64> {
        if self.options.checked {
            self.check_agreement(location, false)?;
        }
        let me_local = self.local_index[self.pid()].expect("this rank is on its node");
        let local = self.node_members.len();
        let multi = self.local_index.iter().any(Option::is_none);

        // Publish the requests and meet. On one node a rank with nothing queued publishes
        // nothing, and when no rank of the node queued anything the first barrier ends the
        // superstep; its sum tells (ranks that published in the low half, ranks leaving in
        // the high half).
        let requests = !self.puts.is_empty() || !self.gets.is_empty();
        let mut pending = None;
        if multi || (requests && !leaving) {
            pending = Some(self.publish(multi)?);
        }
        if multi {
            self.round_a()?;
        }
        let mine = u64::from(pending.is_some()) + if leaving { LEAVING } else { 0 };
        let sum = self.node_barrier(mine)?;
        let left = sum / LEAVING;
        if left > 0 {
            self.spare = self.node.take(me_local);
            return Ok(left);
        }
        let publishers = (sum % LEAVING) as usize;
        if publishers == 0 {
            self.end_superstep();
            return Ok(0);
        }
        if publishers < local {
            if pending.is_none() {
                pending = Some(self.publish(multi)?);
            }
            self.node_barrier(0)?;
        }
        let Pending {
            remote_gets,
            mut reads,
            mut writes,
        } = pending.expect("every rank published");
        let node = Arc::clone(&self.node);
        // SAFETY: every member published before the barrier above and takes its publication
        // back only after the last barrier of this sync; `all` is dropped before that.
        let all: Vec<&Published> = (0..local).map(|i| unsafe { node.get(i) }).collect();

        // Rounds A and B with the other nodes.
        let remotes: Vec<Remote> = if multi {
            self.remote_rounds(&all, &remote_gets, &mut reads)?
        } else {
            Vec::new()
        };

        // Checks: everything that writes this rank's memory, everything that reads it.
        let mut copies = std::mem::take(&mut self.scratch.copies);
        copies.clear();
        for (m, p) in all.iter().enumerate() {
            if p.superstep != self.superstep {
                return Err(Error::misuse(
                    Misuse::MismatchedSync,
                    format!(
                        "rank {} is at sync #{}, rank {} at sync #{}",
                        self.pid(),
                        self.superstep + 1,
                        self.node_members[m],
                        p.superstep + 1
                    ),
                    Some(location),
                ));
            }
            let from = self.node_members[m];
            for put in &p.puts_to[me_local] {
                let w = self.touch(
                    put.dst_slot,
                    put.dst_off,
                    put.len,
                    from,
                    true,
                    Some(put.loc),
                )?;
                copies.push(Copy {
                    src: put.src,
                    dst: w.start,
                    len: put.len,
                    foreign: put.src_is_area && m != me_local,
                });
                writes.push(w);
            }
            for get in &p.gets_from[me_local] {
                // `from` reads this rank's memory.
                reads.push(self.touch(
                    get.src_slot,
                    get.src_off,
                    get.len,
                    from,
                    false,
                    Some(get.loc),
                )?);
            }
        }
        // This rank's gets from node ranks read their areas (their owners checked the reads).
        for (t, p) in all.iter().enumerate() {
            for get in &all[me_local].gets_from[t] {
                let (addr, bytes) = p
                    .globals
                    .get(get.src_slot as usize)
                    .copied()
                    .unwrap_or((0, 0));
                if addr == 0 || get.src_off.checked_add(get.len).is_none_or(|e| e > bytes) {
                    // Reported by the owner of the source, which checks it too; stop here
                    // so that no copy is made from outside the area.
                    return Err(Error::misuse(
                        if addr == 0 { Misuse::UnknownSlot } else { Misuse::OutOfBounds },
                        format!(
                            "get of {} bytes at byte {} of global slot {} on rank {}, whose area holds {bytes}",
                            get.len, get.src_off, get.src_slot, self.node_members[t]
                        ),
                        Some(get.loc),
                    ));
                }
                copies.push(Copy {
                    src: addr + get.src_off,
                    dst: get.dst,
                    len: get.len,
                    foreign: t != me_local,
                });
            }
        }
        for r in &remotes {
            for &(dst, at, len) in &r.puts {
                writes.push(Touch {
                    start: dst,
                    end: dst + len,
                    what: "put writes",
                    by: r.from,
                    loc: None,
                });
                copies.push(Copy {
                    src: r.payload.as_bytes().as_ptr() as usize + at,
                    dst,
                    len,
                    foreign: false,
                });
            }
        }
        check_conflicts(&mut reads, &mut writes)?;
        if self.options.checked {
            self.node_barrier(0)?;
        }

        // Load storage-backed destinations for writing: after the last blocking call of the
        // sync, so that no unload (ARAW unloads a rank's memory when it blocks) can come
        // between the load, which the budget counts, and the copies below. Other ranks may
        // read other parts of these areas meanwhile: loading changes residency, not contents.
        for area in self
            .globals
            .iter_mut()
            .chain(self.locals.iter_mut())
            .flatten()
        {
            if area.storage
                && copies
                    .iter()
                    .any(|c| c.dst >= area.addr() && c.dst < area.addr() + area.bytes)
            {
                area.touch();
            }
        }

        // Data phase: this rank copies into its own memory.
        let rank = self.comm.runtime();
        for c in &copies {
            if c.len == 0 {
                continue;
            }
            // SAFETY: `dst..dst+len` lies inside a registered area of this rank (bounds checked
            // above against the area's size) and `src..src+len` inside a live buffer: a
            // registered area or the put buffer of a node rank (checked by the get or against
            // the published table), or a received payload owned by `remotes`. Node ranks keep
            // their areas and buffers alive and unmodified until the final barrier below (they
            // are inside this sync, and only a rank itself writes its memory). Only this thread
            // writes `dst`, and the conflict checks guarantee that no thread reads `dst` in this
            // phase (this rank's check, done above) and that `src` is not written in it (the
            // check of the owner of `src`, which writes its memory only after its own check
            // passed and writes nothing when it failed), so no access races with this copy.
            unsafe {
                spillway_transport::copy::copy_raw(c.dst as *mut u8, c.src as *const u8, c.len);
            }
            if c.foreign {
                // SAFETY: as above, `src..src+len` is live, initialised and not written now.
                let bytes = unsafe { std::slice::from_raw_parts(c.src as *const u8, c.len) };
                rank.release_read(bytes);
            }
        }
        self.scratch = Scratch {
            reads,
            writes,
            copies,
        };
        drop(remotes);
        drop(all);
        self.node_barrier(0)?;
        self.spare = self.node.take(me_local);
        if multi {
            self.node.exchange(me_local, |x| *x = Exchange::default());
        }
        self.end_superstep();
        Ok(0)
    }

    /// Address of a put's source and whether it is registered memory.
    fn put_source(&self, src: PutSource) -> (usize, bool) {
        match src {
            PutSource::Slot { index, global, off } => (self.area(index, global).addr() + off, true),
            PutSource::Buffer(at) => (self.buffer.as_ptr() as usize + at, false),
        }
    }

    /// The bytes of this rank's memory that a put by rank `from` writes (`write`) or a get by
    /// it reads: `len` bytes at `off` of global slot `slot`, checked as in `dest_range`.
    fn touch(
        &self,
        slot: u32,
        off: usize,
        len: usize,
        from: usize,
        write: bool,
        loc: Option<&'static Location<'static>>,
    ) -> Result<Touch> {
        let (call, what) = if write {
            ("put", "put writes")
        } else {
            ("get", "get reads")
        };
        let start = self.dest_range(slot, off, len, from, call, loc)?;
        Ok(Touch {
            start,
            end: start + len,
            what,
            by: from,
            loc,
        })
    }

    /// Checks `len` bytes at `off` of this rank's global slot `slot`, named by rank `from`;
    /// returns their address.
    fn dest_range(
        &self,
        slot: u32,
        off: usize,
        len: usize,
        from: usize,
        what: &str,
        loc: Option<&'static Location<'static>>,
    ) -> Result<usize> {
        let area = self
            .globals
            .get(slot as usize)
            .and_then(Option::as_ref)
            .filter(|a| a.active_from <= self.superstep);
        let Some(area) = area else {
            return Err(Error::misuse(
                Misuse::UnknownSlot,
                format!(
                    "{what} by rank {from} names global slot {slot}, not registered on rank {}",
                    self.pid()
                ),
                loc,
            ));
        };
        if off.checked_add(len).is_none_or(|e| e > area.bytes) {
            return Err(Error::misuse(
                Misuse::OutOfBounds,
                format!(
                    "{what} by rank {from} of {len} bytes at byte {off} of global slot {slot} on rank {}, whose area holds {} bytes",
                    self.pid(),
                    area.bytes
                ),
                loc,
            ));
        }
        Ok(area.addr() + off)
    }
}
