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
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, Weak};
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
#[derive(Default)]
pub struct Outbox {
    queue: Mutex<VecDeque<Outgoing>>,
    signal: Condvar,
    /// Set by anything the progress thread should look at soon (a failure, a finished rank).
    poke: AtomicBool,
    /// Messages put into the outbox.
    pub sent: AtomicU64,
    /// Messages from other processes delivered here.
    pub received: AtomicU64,
    /// The engine, when ranks may make progress themselves ([`drive`](Self::drive)).
    driver: OnceLock<Weak<dyn Drive>>,
    /// Ranks currently waiting and driving the engine themselves.
    drivers: AtomicUsize,
    /// Whether the progress thread sleeps in [`wait`](Self::wait) (set under the queue's lock).
    sleeping: AtomicBool,
}

/// A rank's turn at driving the engine while it waits ([`Outbox::start_driving`]).
#[derive(Debug)]
pub struct Driving<'a>(&'a Outbox);

impl Drop for Driving<'_> {
    fn drop(&mut self) {
        self.0.drivers.fetch_sub(1, Ordering::Release);
    }
}

/// An engine that a waiting rank may drive: one round of progress (send what is queued,
/// receive and deliver what arrived) on the rank's own thread.
pub trait Drive: Send + Sync {
    /// Makes one round of progress unless another thread is doing so; returns whether
    /// anything happened.
    fn drive(&self) -> bool;

    /// Makes one round of progress on the calling thread, which thereby sends what is
    /// queued, unless another thread is making progress right now; returns whether it did.
    fn try_send(&self) -> bool;
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("sent", &self.sent)
            .field("received", &self.received)
            .field("drivable", &self.drivable())
            .finish()
    }
}

impl Outbox {
    /// Lets ranks drive `engine` ([`drive`](Self::drive)); set once, by the engine.
    pub fn set_driver(&self, engine: Weak<dyn Drive>) {
        let _ = self.driver.set(engine);
    }

    /// Whether ranks may drive the engine themselves.
    pub fn drivable(&self) -> bool {
        self.driver.get().is_some()
    }

    /// Counts the caller among the ranks that drive the engine while they wait, until the
    /// returned guard is dropped: the progress thread then stays out of their way.
    pub fn start_driving(&self) -> Driving<'_> {
        self.drivers.fetch_add(1, Ordering::Relaxed);
        Driving(self)
    }

    /// Whether some rank is driving the engine while it waits.
    pub fn driven(&self) -> bool {
        self.drivers.load(Ordering::Acquire) > 0
    }

    /// One round of the engine's progress on the calling thread, if ranks may drive it and
    /// no other thread is doing so; returns whether anything happened. Waiting ranks call
    /// this so that messages move without a hand-off to the progress thread.
    pub fn drive(&self) -> bool {
        self.driver
            .get()
            .and_then(Weak::upgrade)
            .is_some_and(|engine| engine.drive())
    }

    /// Queues a message for the engine. When ranks may drive the engine, the caller sends
    /// it itself if no other thread is making progress right now (one round of the engine:
    /// no hand-off to the progress thread, whose wake-up is a system call and a context
    /// switch); otherwise the thread making progress takes it, or the progress thread is
    /// woken.
    pub fn push(&self, msg: Outgoing) {
        self.sent.fetch_add(1, Ordering::AcqRel);
        let sleeping = {
            let mut q = crate::sync::lock(&self.queue);
            q.push_back(msg);
            // Only a sleeping progress thread needs the (system-call) signal; it marks itself
            // under this lock before it looks at the queue.
            self.sleeping.load(Ordering::Relaxed)
        };
        let sent = self
            .driver
            .get()
            .and_then(Weak::upgrade)
            .is_some_and(|engine| engine.try_send());
        if sleeping && !sent {
            let _q = crate::sync::lock(&self.queue);
            self.signal.notify_one();
        }
    }

    /// Wakes the progress thread if it is waiting for work.
    pub fn notify(&self) {
        self.poke.store(true, Ordering::Release);
        let _q = crate::sync::lock(&self.queue);
        self.signal.notify_one();
    }

    /// Takes every queued message.
    pub fn take(&self) -> VecDeque<Outgoing> {
        std::mem::take(&mut *crate::sync::lock(&self.queue))
    }

    /// Waits up to `wait` for a queued message or a poke.
    pub fn wait(&self, wait: Duration) {
        let q = crate::sync::lock(&self.queue);
        self.sleeping.store(true, Ordering::Relaxed);
        if q.is_empty() && !self.poke.swap(false, Ordering::AcqRel) {
            let (q, _) = self
                .signal
                .wait_timeout(q, wait)
                .unwrap_or_else(|e| e.into_inner());
            self.sleeping.store(false, Ordering::Relaxed);
            drop(q);
        } else {
            self.sleeping.store(false, Ordering::Relaxed);
        }
    }
}
