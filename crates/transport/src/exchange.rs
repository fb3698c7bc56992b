//! Direct exchanges: a small message to a rank of another process and one from a rank of
//! another process, both keyed by a context and a tag, which the engine moves with a receive
//! posted before the message arrives instead of through headers, probes and the receiver's
//! mailbox (see [`Outbox::start_exchange`](crate::Outbox::start_exchange)). Collectives among
//! processes use them for their latency-bound steps.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;

use crate::AlignedBuf;

/// Largest payload of a direct exchange (bytes); larger messages go through the outbox.
pub const EXCHANGE_MAX: usize = 8 << 10;

/// Bytes of the key (context, tag) in front of the payload of a direct message.
pub(crate) const EXCHANGE_KEY: usize = 16;

const PENDING: u8 = 0;
const DONE: u8 = 1;
const FAILED: u8 = 2;

/// One direct exchange: what goes to node `to`, and the message expected from node `from`.
pub struct Exchange {
    /// Node (MPI process) the message goes to.
    pub(crate) to: u32,
    /// Node (MPI process) the expected message comes from.
    pub(crate) from: u32,
    /// Context of both messages.
    pub(crate) context: u64,
    /// Tag of both messages.
    pub(crate) tag: i32,
    /// The outgoing message (the key, then the payload), until the engine sends it.
    out: Mutex<Option<AlignedBuf>>,
    state: AtomicU8,
    /// The payload received.
    received: Mutex<Vec<u8>>,
    /// Set by the waiting side when it gives up (the job failed or lost a process).
    abandoned: AtomicBool,
    wake: Box<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("to", &self.to)
            .field("from", &self.from)
            .field("context", &self.context)
            .field("tag", &self.tag)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Exchange {
    /// An exchange that sends `out` (at most [`EXCHANGE_MAX`] bytes) to node `to` and expects
    /// a message with the same context and tag from node `from`, of about `expect` bytes;
    /// `wake` is called (on the engine's thread) when it has arrived or the exchange failed.
    ///
    /// # Panics
    /// If `out` is longer than [`EXCHANGE_MAX`].
    pub fn new(
        to: u32,
        from: u32,
        context: u64,
        tag: i32,
        out: &[u8],
        expect: usize,
        wake: Box<dyn Fn() + Send + Sync>,
    ) -> Exchange {
        assert!(
            out.len() <= EXCHANGE_MAX,
            "direct exchange of {} bytes",
            out.len()
        );
        let mut framed = AlignedBuf::for_overwrite(EXCHANGE_KEY + out.len());
        let bytes = framed.as_bytes_mut();
        bytes[..8].copy_from_slice(&context.to_le_bytes());
        bytes[8..16].copy_from_slice(&(tag as u32 as u64).to_le_bytes());
        bytes[EXCHANGE_KEY..].copy_from_slice(out);
        Exchange {
            to,
            from,
            context,
            tag,
            out: Mutex::new(Some(framed)),
            state: AtomicU8::new(PENDING),
            received: Mutex::new(Vec::with_capacity(expect.min(EXCHANGE_MAX))),
            abandoned: AtomicBool::new(false),
            wake,
        }
    }

    /// Whether the expected message has arrived.
    pub fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }

    /// Whether the exchange failed (its peer was lost, or the engine stopped): the message
    /// will not come.
    pub fn failed(&self) -> bool {
        self.state.load(Ordering::Acquire) == FAILED
    }

    /// The payload received, once [`is_done`](Self::is_done).
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *crate::sync::lock(&self.received))
    }

    /// The waiting side gives up on the exchange: the engine forgets it.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
    }

    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    /// The message to send (once): the key (context and tag, [`EXCHANGE_KEY`] bytes), then
    /// the payload.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn take_out(&self) -> Option<AlignedBuf> {
        crate::sync::lock(&self.out).take()
    }

    /// The expected message arrived with `payload`.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn complete(&self, payload: &[u8]) {
        {
            let mut received = crate::sync::lock(&self.received);
            received.clear();
            received.extend_from_slice(payload);
        }
        self.state.store(DONE, Ordering::Release);
        (self.wake)();
    }

    /// The expected message will not come.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn fail(&self) {
        if self
            .state
            .compare_exchange(PENDING, FAILED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            (self.wake)();
        }
    }
}
