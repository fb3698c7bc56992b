//! Sending: a message for a rank of another process goes as a header (context, source,
//! destination, tag, length) with the payload inside when it is small, and otherwise with the
//! payload sent straight from its buffer as separate chunks of at most 1 GiB, without
//! copying; control messages are headers too.

use std::ffi::c_int;

use mpi::ffi;

use super::frame::{framed, header, CHUNK, INLINE, TAG_CONTROL, TAG_DATA, TAG_HEADER};
use super::net::Net;
use crate::outbox::Outgoing;
use crate::{AlignedBuf, Payload};

/// Sends up to this size are tested once as soon as they are started.
const EAGER: usize = 256;

struct PendingSend {
    /// The process the requests send to.
    dest: c_int,
    requests: Vec<ffi::MPI_Request>,
    /// The bytes the requests read, alive until they complete.
    keep: Payload,
}

/// The sends in flight.
#[derive(Default)]
pub(super) struct Sends {
    pending: Vec<PendingSend>,
}

impl Sends {
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Sends `out` to process `dest`. Returns false if `dest` failed meanwhile (noted on
    /// `net`; the message is dropped).
    pub(super) fn message(
        &mut self,
        net: &Net,
        dest: c_int,
        out: Outgoing,
    ) -> Result<bool, String> {
        let head = header(&out);
        let len = out.payload.len();
        if len <= INLINE {
            return self.framed(net, dest, TAG_HEADER, framed(head, out.payload.as_bytes()));
        }
        if !self.framed(net, dest, TAG_HEADER, framed(head, &[]))? {
            return Ok(false);
        }
        let payload = out.payload;
        let mut requests = Vec::with_capacity(len.div_ceil(CHUNK));
        for chunk in payload.as_bytes().chunks(CHUNK) {
            // SAFETY: the payload (owned or shared, never mutated while shared) is kept with
            // the requests until they complete.
            match unsafe { net.isend(net.data, chunk.as_ptr(), chunk.len(), dest, TAG_DATA)? } {
                Some(r) => requests.push(r),
                None => break,
            }
        }
        self.pending.push(PendingSend {
            dest,
            requests,
            keep: payload,
        });
        Ok(true)
    }

    /// Sends a control message (`kind`, four words and a text) to process `dest`.
    pub(super) fn control(
        &mut self,
        net: &Net,
        dest: c_int,
        kind: u64,
        words: [u64; 4],
        text: &[u8],
    ) -> Result<bool, String> {
        let head = [kind, words[0], words[1], words[2], words[3]];
        self.framed(net, dest, TAG_CONTROL, framed(head, text))
    }

    /// Sends one framed buffer on the header communicator, kept with its request until it
    /// completes.
    fn framed(
        &mut self,
        net: &Net,
        dest: c_int,
        tag: c_int,
        buf: AlignedBuf,
    ) -> Result<bool, String> {
        self.raw(net, net.comm, dest, tag, buf)
    }

    /// Sends `buf` on `comm` with `tag`, kept with its request until it completes. Returns
    /// false if `dest` failed meanwhile (noted on `net`; nothing is sent).
    pub(super) fn raw(
        &mut self,
        net: &Net,
        comm: ffi::MPI_Comm,
        dest: c_int,
        tag: c_int,
        buf: AlignedBuf,
    ) -> Result<bool, String> {
        // SAFETY: `buf` moves into the pending send (its heap storage does not move) and is
        // dropped only after the request completes.
        let request = unsafe { net.isend(comm, buf.as_bytes().as_ptr(), buf.len(), dest, tag)? };
        let Some(mut request) = request else {
            return Ok(false);
        };
        if buf.len() <= EAGER && net.test(&mut request, "MPI_Test (send)")? {
            // Small sends usually complete at once (copied into the shared-memory queue):
            // nothing to keep.
            return Ok(true);
        }
        self.pending.push(PendingSend {
            dest,
            requests: vec![request],
            keep: Payload::Owned(buf),
        });
        Ok(true)
    }

    /// Tests the sends in flight and drops those that completed; returns whether any did.
    pub(super) fn test(&mut self, net: &Net) -> Result<bool, String> {
        let mut done_any = false;
        let mut i = 0;
        while i < self.pending.len() {
            let mut all = true;
            for r in self.pending[i].requests.iter_mut() {
                if !net.test(r, "MPI_Test (send)")? {
                    all = false;
                }
            }
            if all {
                self.pending.swap_remove(i);
                done_any = true;
            } else {
                i += 1;
            }
        }
        Ok(done_any)
    }

    /// Whether a send still reads a rank's own memory.
    pub(super) fn reads_rank_memory(&self) -> bool {
        self.pending
            .iter()
            .any(|s| matches!(s.keep, Payload::Borrowed(_)))
    }

    /// Ends the sends to processes that were lost: each is cancelled and tested until MPI
    /// lets go of its buffer (a send to a failed process completes with an error).
    pub(super) fn abandon(&mut self, net: &Net, lost: impl Fn(c_int) -> bool) {
        for s in self.pending.iter_mut().filter(|s| lost(s.dest)) {
            for r in s.requests.iter_mut() {
                if *r != super::empty_request() {
                    // SAFETY: an active send request of this process.
                    unsafe { ffi::MPI_Cancel(r) };
                }
            }
        }
        let _ = self.test(net);
    }
}
