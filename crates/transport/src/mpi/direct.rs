//! Direct exchanges ([`Exchange`]): the engine sends a small message framed with its context
//! and tag on the data communicator, and receives the expected one with a receive posted
//! before it arrives: once a process has exchanged with a peer, a receive for the next direct
//! message from that peer is always posted (into a buffer of the engine's), so a
//! latency-bound step of a collective costs one send, one matched receive and the tests that
//! complete them: no header probe, no receive of unknown size, no mailbox, no unexpected
//! message for MPI to buffer. A message is handed to the exchange that expects it (by source,
//! context and tag), or kept until that exchange starts.
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

use crate::exchange::EXCHANGE_KEY as KEY;

/// Tag of direct messages on the data communicator (payload chunks use another).
const TAG: c_int = 16;

/// The receive posted for the next direct message from `peer`.
struct Posted {
    peer: c_int,
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

/// Messages kept for exchanges not started yet (beyond this, the oldest go: they belong to
/// exchanges given up on).
const EARLY: usize = 1024;

impl Direct {
    /// Whether an exchange awaits its message.
    pub(super) fn waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

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
        if let Some(framed) = ex.take_out() {
            sends.raw(net, net.data, ex.to as c_int, TAG, framed)?;
        }
        if let Some(i) = self
            .early
            .iter()
            .position(|(s, c, t, _)| *s == ex.from && *c == ex.context && *t == ex.tag)
        {
            let (_, _, _, payload) = self.early.swap_remove(i);
            finish(outbox, &ex, payload.as_bytes());
            return Ok(());
        }
        let peer = ex.from as c_int;
        self.waiting.push(ex);
        if !self.posted.iter().any(|p| p.peer == peer) {
            self.post(net, peer, AlignedBuf::for_overwrite(KEY + EXCHANGE_MAX))?;
        }
        Ok(())
    }

    fn post(&mut self, net: &Net, peer: c_int, mut buf: AlignedBuf) -> Result<(), String> {
        let mut request = empty_request();
        // SAFETY: `buf` moves into the posted receive (its heap storage does not move) and is
        // dropped only after the request completed (or, cancelled, as a zombie).
        let code = unsafe {
            ffi::MPI_Irecv(
                buf.as_bytes_mut().as_mut_ptr().cast::<c_void>(),
                buf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                peer,
                TAG,
                net.data,
                &mut request,
            )
        };
        if net.check("MPI_Irecv (exchange)", code)? {
            self.posted.push(Posted { peer, request, buf });
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
                // The peer failed: MPI completed the receive in error and freed the request
                // (it let go of the buffer); the loss handling fails its exchanges.
                let gone = self.posted.swap_remove(i);
                net.note_peer_failed(&format!(
                    "MPI_Test of the direct-exchange receive from process {}",
                    gone.peer
                ));
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
            let Posted { peer, buf, .. } = self.posted.swap_remove(i);
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
            let from = peer as u32;
            match self
                .waiting
                .iter()
                .position(|e| e.from == from && e.context == context && e.tag == key_tag)
            {
                Some(w) => {
                    let ex = self.waiting.swap_remove(w);
                    finish(outbox, &ex, &bytes[KEY..]);
                }
                None => {
                    if self.early.len() >= EARLY {
                        self.early.remove(0);
                    }
                    let payload = AlignedBuf::from_bytes(&bytes[KEY..]);
                    self.early.push((from, context, key_tag, payload));
                }
            }
            // The next message from this peer finds its receive posted.
            self.post(net, peer, buf)?;
            // (The receive just posted goes to the end and is tested next round.)
        }
        if self.waiting.iter().any(|e| e.is_abandoned()) {
            self.forget_abandoned();
        }
        Ok(busy)
    }

    /// Drops the exchanges their ranks gave up on (a message for one that still comes is
    /// kept with the early ones).
    fn forget_abandoned(&mut self) {
        self.waiting.retain(|e| !e.is_abandoned());
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
    /// Buffers of receives that MPI has not let go of after a second are leaked, not freed
    /// (MPI could still write into them).
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
        for z in self.zombies.drain(..) {
            std::mem::forget(z.buf);
        }
    }

    /// What the exchanges waiting here wait for, e.g. "2 from process 3 (tags 5, 6)", for
    /// reports; empty when none waits.
    pub(super) fn describe_waiting(&self) -> String {
        let mut from: Vec<(u32, Vec<i32>)> = Vec::new();
        for e in self.waiting.iter().filter(|e| !e.is_abandoned()) {
            match from.iter_mut().find(|(p, _)| *p == e.from) {
                Some((_, tags)) => tags.push(e.tag),
                None => from.push((e.from, vec![e.tag])),
            }
        }
        from.sort_unstable_by_key(|(p, _)| *p);
        from.iter()
            .map(|(p, tags)| {
                let tags: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
                format!(
                    "{} from process {p} (tag{} {})",
                    tags.len(),
                    if tags.len() == 1 { "" } else { "s" },
                    tags.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Completes `ex` with `payload`, counting one message sent and one received (sent first: a
/// wave reads `received` before `sent`).
fn finish(outbox: &Outbox, ex: &Exchange, payload: &[u8]) {
    outbox.sent.fetch_add(1, Ordering::AcqRel);
    outbox.received.fetch_add(1, Ordering::AcqRel);
    ex.complete(payload);
}
