//! The hand-over between ranks and the engine's progress thread of a job that spans processes.
//!
//! A rank never calls the network itself: a message for a rank of another process goes into
//! this process's outbox, and the progress thread (the only thread that calls MPI) sends it.
//! Messages that arrive are delivered by the progress thread into the destination's mailbox.
//!
//! Two monotone counters support distributed deadlock detection: `sent` counts messages put
//! into the outbox, `received` messages from other processes delivered here. Summed over all
//! processes, `sent - received` is the number of messages in flight anywhere.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::Payload;

/// A message for a rank of another process.
#[derive(Debug)]
pub struct Outgoing {
    /// Global rank of the destination.
    pub dest: u32,
    /// Communication context.
    pub context: u64,
    /// Global rank of the sender.
    pub source: u32,
    /// Tag.
    pub tag: i32,
    /// The bytes.
    pub payload: Payload,
}

/// The outbox and the counters shared by a process's ranks and its progress thread.
#[derive(Default, Debug)]
pub struct Outbox {
    queue: Mutex<VecDeque<Outgoing>>,
    signal: Condvar,
    /// Set by anything the progress thread should look at soon (a failure, a finished rank).
    poke: AtomicBool,
    /// Messages put into the outbox.
    pub sent: AtomicU64,
    /// Messages from other processes delivered here.
    pub received: AtomicU64,
}

impl Outbox {
    /// Queues a message for the progress thread.
    pub fn push(&self, msg: Outgoing) {
        self.sent.fetch_add(1, Ordering::AcqRel);
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(msg);
        self.signal.notify_one();
    }

    /// Wakes the progress thread if it is waiting for work.
    pub fn notify(&self) {
        self.poke.store(true, Ordering::Release);
        let _q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.signal.notify_one();
    }

    /// Takes every queued message.
    pub fn take(&self) -> VecDeque<Outgoing> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Waits up to `wait` for a queued message or a poke.
    pub fn wait(&self, wait: Duration) {
        let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.is_empty() && !self.poke.swap(false, Ordering::AcqRel) {
            drop(
                self.signal
                    .wait_timeout(q, wait)
                    .unwrap_or_else(|e| e.into_inner()),
            );
        }
    }
}
