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
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

use crate::exchange::Exchange;
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
    /// Direct exchanges not yet started by the engine.
    exchanges: Mutex<Vec<Arc<Exchange>>>,
    /// Whether `exchanges` may hold any (read without its lock).
    exchanges_queued: AtomicBool,
    /// Whether ranks may use direct exchanges (set before the job starts).
    exchanges_allowed: AtomicBool,
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

    /// Starts the direct exchange `ex` on the calling thread and, for up to `spin`, tests
    /// for its message and nothing else, unless another thread is making progress right now
    /// (`None`: the caller queues it). `Some(true)` when the message arrived.
    fn exchange_now(&self, ex: &Arc<Exchange>, spin: Duration) -> Option<bool>;
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
        self.hand_over(sleeping);
    }

    /// Lets ranks use direct exchanges ([`start_exchange`](Self::start_exchange)). Called
    /// before the job's ranks start, and on every process alike (when the engine will let
    /// waiting ranks drive it), since the ranks of both ends of an exchange must decide
    /// alike whether to use one.
    pub fn allow_exchanges(&self) {
        self.exchanges_allowed.store(true, Ordering::Release);
    }

    /// Whether ranks may use direct exchanges (see [`allow_exchanges`](Self::allow_exchanges)).
    pub fn exchanges(&self) -> bool {
        self.exchanges_allowed.load(Ordering::Acquire)
    }

    /// Starts a direct exchange (see [`Exchange`]): the engine sends its message and posts
    /// the receive of the one it expects, on this thread when no other thread is making
    /// progress right now. The caller then waits for [`Exchange::is_done`] (driving the engine
    /// meanwhile), or gives up with [`Exchange::abandon`].
    pub fn start_exchange(&self, ex: Arc<Exchange>) {
        let sleeping = {
            let _q = crate::sync::lock(&self.queue);
            crate::sync::lock(&self.exchanges).push(ex);
            self.exchanges_queued.store(true, Ordering::Release);
            self.sleeping.load(Ordering::Relaxed)
        };
        self.hand_over(sleeping);
    }

    /// Starts a direct exchange as [`start_exchange`](Self::start_exchange) does, but on
    /// this thread when no other thread is making progress right now, and then waits for its
    /// message for up to `spin` testing nothing else: the shortest path for a step of a
    /// collective whose peers are there. Returns whether the message arrived; if not, the
    /// engine goes on with the exchange and the caller waits for it as after
    /// [`start_exchange`](Self::start_exchange).
    pub fn exchange_now(&self, ex: &Arc<Exchange>, spin: Duration) -> bool {
        let engine = self.driver.get().and_then(Weak::upgrade);
        if let Some(done) = engine.and_then(|e| e.exchange_now(ex, spin)) {
            return done;
        }
        self.start_exchange(Arc::clone(ex));
        false
    }

    /// The direct exchanges to start.
    pub fn take_exchanges(&self) -> Vec<Arc<Exchange>> {
        if !self.exchanges_queued.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *crate::sync::lock(&self.exchanges))
    }

    /// After something was queued: one round of the engine on this thread when possible,
    /// else the progress thread is woken if it sleeps.
    fn hand_over(&self, sleeping: bool) {
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
        if q.is_empty()
            && !self.exchanges_queued.load(Ordering::Acquire)
            && !self.poke.swap(false, Ordering::AcqRel)
        {
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
