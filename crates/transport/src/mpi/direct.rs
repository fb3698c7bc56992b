//! Direct exchanges ([`Exchange`]): the engine sends a small message framed with its context
//! and tag on the data communicator, under a tag derived from both, and receives the expected
//! one with a receive posted before it arrives (one per source and derived tag, into a buffer
//! of the engine's), so a latency-bound step of a collective costs one send, one matched
//! receive and the tests that complete them: no header probe, no receive of unknown size, no
//! mailbox. A message that arrives for a receive posted for another key (two keys with the
//! same derived tag) is handed to the exchange that expects it, or kept until one does.
//!
//! Counting for the deadlock detection: an exchange counts one message sent and one received
//! when its expected message has arrived (both at once, so the totals stay balanced). A rank
//! that waits for a message its peer never sends leaves the counts balanced and its process
//! passive, so a deadlock is still found; one whose message is on its way completes at the
//! next test of any round of the engine, long before two waves agree.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mpi::ffi;

use super::net::Net;
use super::sends::Sends;
use super::{empty_request, empty_status};
use crate::exchange::{Exchange, EXCHANGE_MAX};
use crate::outbox::Outbox;
use crate::AlignedBuf;

/// Bytes of the key (context, tag) in front of the payload.
const KEY: usize = 16;

/// Tags of direct exchanges on the data communicator are `FIRST_TAG..FIRST_TAG + TAGS` (payload
/// chunks use a tag below; every MPI allows tags up to 32767).
const FIRST_TAG: c_int = 16;
const TAGS: u64 = 32_000;

/// The MPI tag of the exchanges with `context` and `tag`.
fn mpi_tag(context: u64, tag: i32) -> c_int {
    let mixed = context
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(17)
        .wrapping_add(tag as u32 as u64);
    FIRST_TAG + (mixed % TAGS) as c_int
}

/// A receive posted for messages from `peer` under `tag`.
struct Posted {
    peer: c_int,
    tag: c_int,
    request: ffi::MPI_Request,
    buf: AlignedBuf,
}

/// The direct exchanges of one process.
#[derive(Default)]
pub(super) struct Direct {
    /// Exchanges whose expected message has not arrived.
    waiting: Vec<Arc<Exchange>>,
    posted: Vec<Posted>,
    /// Receives cancelled (their exchange given up or their peer lost), kept until MPI lets go
    /// of their buffers.
    zombies: Vec<Posted>,
    /// Messages that arrived before their exchange started: (source, context, tag, payload).
    early: Vec<(u32, u64, i32, AlignedBuf)>,
}

impl Direct {
    /// Whether anything needs testing.
    pub(super) fn active(&self) -> bool {
        !self.posted.is_empty() || !self.zombies.is_empty()
    }

    /// Starts `ex`: sends its message and makes sure a receive is posted for the one it
    /// expects (unless that one arrived already). Returns false when the peer it sends to
    /// failed (noted on `net`).
    pub(super) fn start(
        &mut self,
        net: &Net,
        sends: &mut Sends,
        outbox: &Outbox,
        ex: Arc<Exchange>,
    ) -> Result<(), String> {
        if let Some(payload) = ex.take_out() {
            let mut framed = AlignedBuf::for_overwrite(KEY + payload.len());
            let bytes = framed.as_bytes_mut();
            bytes[..8].copy_from_slice(&ex.context.to_le_bytes());
            bytes[8..16].copy_from_slice(&(ex.tag as u32 as u64).to_le_bytes());
            bytes[KEY..].copy_from_slice(payload.as_bytes());
            let tag = mpi_tag(ex.context, ex.tag);
            sends.raw(net, net.data, ex.to as c_int, tag, framed)?;
        }
        if let Some(i) = self
            .early
            .iter()
            .position(|(s, c, t, _)| *s == ex.from && *c == ex.context && *t == ex.tag)
        {
            let (_, _, _, payload) = self.early.swap_remove(i);
            finish(outbox, &ex, payload);
            return Ok(());
        }
        let (peer, tag) = (ex.from as c_int, mpi_tag(ex.context, ex.tag));
        self.waiting.push(ex);
        if !self.posted.iter().any(|p| p.peer == peer && p.tag == tag) {
            self.post(
                net,
                peer,
                tag,
                AlignedBuf::for_overwrite(KEY + EXCHANGE_MAX),
            )?;
        }
        Ok(())
    }

    fn post(
        &mut self,
        net: &Net,
        peer: c_int,
        tag: c_int,
        mut buf: AlignedBuf,
    ) -> Result<(), String> {
        let mut request = empty_request();
        // SAFETY: `buf` moves into the posted receive (its heap storage does not move) and is
        // dropped only after the request completed (or, cancelled, as a zombie).
        let code = unsafe {
            ffi::MPI_Irecv(
                buf.as_bytes_mut().as_mut_ptr().cast::<c_void>(),
                buf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                peer,
                tag,
                net.data,
                &mut request,
            )
        };
        if net.check("MPI_Irecv (exchange)", code)? {
            self.posted.push(Posted {
                peer,
                tag,
                request,
                buf,
            });
        }
        Ok(())
    }

    /// Tests the posted receives and completes the exchanges whose message arrived; returns
    /// whether any did.
    pub(super) fn test(&mut self, net: &Net, outbox: &Outbox) -> Result<bool, String> {
        if !self.zombies.is_empty() {
            self.bury();
        }
        let mut busy = false;
        let mut i = 0;
        while i < self.posted.len() {
            let mut flag: c_int = 0;
            let mut status = empty_status();
            // SAFETY: an active receive request of this process into `posted[i].buf`.
            let code =
                unsafe { ffi::MPI_Test(&mut self.posted[i].request, &mut flag, &mut status) };
            if !net.check("MPI_Test (exchange)", code)? {
                // The peer failed: MPI freed the request; the loss handling fails its
                // exchanges.
                self.posted.swap_remove(i);
                continue;
            }
            if flag == 0 {
                i += 1;
                continue;
            }
            busy = true;
            let mut count: c_int = 0;
            // SAFETY: `status` was filled by the completed receive.
            unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
            let Posted { peer, tag, buf, .. } = self.posted.swap_remove(i);
            let bytes = &buf.as_bytes()[..(count.max(0) as usize).min(buf.len())];
            if bytes.len() < KEY {
                return Err(format!(
                    "a direct message of {} bytes from process {peer}",
                    bytes.len()
                ));
            }
            let context = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
            let key_tag =
                u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")) as u32 as i32;
            let payload = AlignedBuf::from_bytes(&bytes[KEY..]);
            let from = peer as u32;
            match self
                .waiting
                .iter()
                .position(|e| e.from == from && e.context == context && e.tag == key_tag)
            {
                Some(w) => {
                    let ex = self.waiting.swap_remove(w);
                    finish(outbox, &ex, payload);
                }
                None => self.early.push((from, context, key_tag, payload)),
            }
            if self
                .waiting
                .iter()
                .any(|e| e.from == from && mpi_tag(e.context, e.tag) == tag)
            {
                self.post(net, peer, tag, buf)?;
            }
            // (The receive just re-posted, if any, goes to the end and is tested next round.)
        }
        if self.waiting.iter().any(|e| e.is_abandoned()) {
            self.forget_abandoned();
        }
        Ok(busy)
    }

    /// Drops the exchanges their ranks gave up on, and cancels the receives nobody waits on.
    fn forget_abandoned(&mut self) {
        self.waiting.retain(|e| !e.is_abandoned());
        let waiting = &self.waiting;
        let (keep, cancel): (Vec<Posted>, Vec<Posted>) =
            std::mem::take(&mut self.posted).into_iter().partition(|p| {
                waiting
                    .iter()
                    .any(|e| e.from as c_int == p.peer && mpi_tag(e.context, e.tag) == p.tag)
            });
        self.posted = keep;
        self.cancel(cancel);
    }

    fn cancel(&mut self, posted: Vec<Posted>) {
        for mut p in posted {
            // SAFETY: an active receive request of this process; its buffer stays (as a
            // zombie) until the request completes.
            unsafe { ffi::MPI_Cancel(&mut p.request) };
            self.zombies.push(p);
        }
        self.bury();
    }

    /// Drops the cancelled receives that MPI let go of.
    fn bury(&mut self) {
        self.zombies.retain_mut(|z| {
            let mut flag: c_int = 0;
            // SAFETY: a cancelled receive request of this process (or null once complete).
            let code =
                unsafe { ffi::MPI_Test(&mut z.request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            code == 0 && flag == 0
        });
    }

    /// The processes `lost` were lost: the exchanges with them fail, the receives from them
    /// are cancelled.
    pub(super) fn abandon(&mut self, lost: &dyn Fn(c_int) -> bool) {
        for e in self
            .waiting
            .iter()
            .filter(|e| lost(e.from as c_int) || lost(e.to as c_int))
        {
            e.fail();
        }
        self.waiting
            .retain(|e| !(lost(e.from as c_int) || lost(e.to as c_int)));
        self.early.retain(|(s, ..)| !lost(*s as c_int));
        let (gone, keep): (Vec<Posted>, Vec<Posted>) = std::mem::take(&mut self.posted)
            .into_iter()
            .partition(|p| lost(p.peer));
        self.posted = keep;
        self.cancel(gone);
    }

    /// The engine stops: every exchange still waiting fails and every receive is cancelled.
    pub(super) fn close(&mut self) {
        for e in self.waiting.drain(..) {
            e.fail();
        }
        let posted = std::mem::take(&mut self.posted);
        self.cancel(posted);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while !self.zombies.is_empty() && std::time::Instant::now() < deadline {
            self.bury();
            std::thread::yield_now();
        }
    }
}

/// Completes `ex` with `payload`, counting one message sent and one received (sent first: a
/// wave reads `received` before `sent`).
fn finish(outbox: &Outbox, ex: &Exchange, payload: AlignedBuf) {
    outbox.sent.fetch_add(1, Ordering::AcqRel);
    outbox.received.fetch_add(1, Ordering::AcqRel);
    ex.complete(payload);
}
