//! A node of the job as this process holds it: its scheduler, the mailboxes of its ranks, its
//! memory, and the objects its ranks share (the ground of node-level collectives).

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::mailbox::Mailbox;
use crate::memory::NodeMem;
use crate::sched::Sched;

pub(crate) struct Node {
    /// Lowest global rank of the node.
    pub(crate) first: u32,
    pub(crate) sched: Sched,
    pub(crate) mailboxes: Box<[Mutex<Mailbox>]>,
    /// Per rank: deliveries into its mailbox so far, so that a rank spinning on its mailbox
    /// looks into it (under its lock) only when something arrived, instead of competing for
    /// the lock with the sender.
    pub(crate) mail_seq: Box<[MailSeq]>,
    pub(crate) mem: Arc<NodeMem>,
    pub(crate) table: NodeTable,
    /// Per rank: what runs when the rank gives up its slot ([`Rank::on_block`]).
    ///
    /// [`Rank::on_block`]: crate::Rank::on_block
    pub(crate) block_hooks: Box<[Mutex<Option<BlockHook>>]>,
}

/// A rank's hook run each time it blocks (see [`Rank::on_block`](crate::Rank::on_block)).
pub(crate) type BlockHook = Box<dyn FnMut() + Send>;

/// A delivery counter on a cache line of its own (ranks spin on their own counters).
#[derive(Default)]
#[repr(align(64))]
pub(crate) struct MailSeq(pub(crate) std::sync::atomic::AtomicU64);

use spillway_transport::lock;

type Shared = Arc<dyn Any + Send + Sync>;
type WeakShared = Weak<dyn Any + Send + Sync>;

/// Objects shared by the ranks of one node, found by a key that the ranks agree on (typically
/// derived from a communicator and a collective's sequence number).
///
/// Ranks of a node are threads of one process, so a node-level collective can go through such
/// an object — each rank publishes its contribution, the node combines, each rank takes its
/// part — instead of sending messages between its ranks.
#[derive(Default)]
pub struct NodeTable {
    entries: Mutex<HashMap<u64, Shared>>,
    cache: Mutex<(HashMap<u64, WeakShared>, u32)>,
}

fn downcast<T: Any + Send + Sync>(key: u64, value: Shared) -> Arc<T> {
    value.downcast::<T>().unwrap_or_else(|_| {
        panic!(
            "node table key {key:#x} holds an object of another type than {}",
            std::any::type_name::<T>()
        )
    })
}

impl NodeTable {
    /// The object under `key`, made by `init` if there is none. It stays in the table until
    /// [`remove`](Self::remove)d.
    ///
    /// # Panics
    /// If `key` holds an object of another type (keys must be unique per purpose).
    pub fn get_or_insert_with<T: Any + Send + Sync>(
        &self,
        key: u64,
        init: impl FnOnce() -> T,
    ) -> Arc<T> {
        // The lock is held only for the map operations, never while `init` runs: members of
        // a collective join at the same moment, and a holder that allocates would push the
        // others past the mutex's spin into a futex sleep (microseconds per collective).
        let found = lock(&self.entries).get(&key).cloned();
        let value = match found {
            Some(v) => v,
            None => {
                let made = Arc::new(init()) as Shared;
                let mut entries = lock(&self.entries);
                let value = entries.entry(key).or_insert(made).clone();
                drop(entries);
                value
            }
        };
        downcast(key, value)
    }

    /// Removes the object under `key` (those holding it keep it alive).
    pub fn remove(&self, key: u64) {
        let removed = lock(&self.entries).remove(&key);
        // Dropped here, after the lock is released.
        drop(removed);
    }

    /// The object under `key` while anybody holds it, made by `init` otherwise: for values
    /// that any rank can rebuild identically (e.g. the shape of a communicator), shared so that
    /// the node keeps one copy.
    ///
    /// # Panics
    /// If `key` holds an object of another type.
    pub fn cached<T: Any + Send + Sync>(&self, key: u64, init: impl FnOnce() -> T) -> Arc<T> {
        let mut guard = lock(&self.cache);
        let (map, inserts) = &mut *guard;
        if let Some(value) = map.get(&key).and_then(Weak::upgrade) {
            drop(guard);
            return downcast(key, value);
        }
        let value: Arc<T> = Arc::new(init());
        let shared: Shared = value.clone();
        map.insert(key, Arc::downgrade(&shared));
        *inserts += 1;
        if *inserts % 64 == 0 {
            map.retain(|_, w| w.strong_count() > 0);
        }
        value
    }
}

impl std::fmt::Debug for NodeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeTable")
            .field("entries", &lock(&self.entries).len())
            .finish()
    }
}

/// Ranks of one node waiting for a condition that another rank of the node makes true (see
/// [`Rank::wait_until`](crate::Rank::wait_until) and [`Rank::wake_all`](crate::Rank::wake_all)).
///
/// Waking an empty queue costs one fence and one load, no lock: a waiter registers, then
/// re-checks its condition; a waker makes the condition true, then looks for waiters. Both
/// put a sequentially consistent fence between the two steps, so either the waker sees the
/// registration or the waiter sees the condition.
#[derive(Debug, Default)]
pub struct WaitQueue {
    waiters: Mutex<Vec<u32>>,
    /// `waiters.len()`, read without the lock by wakers.
    registered: AtomicUsize,
}

impl WaitQueue {
    /// An empty queue.
    pub fn new() -> WaitQueue {
        WaitQueue::default()
    }

    pub(crate) fn register(&self, local: u32) {
        {
            let mut w = lock(&self.waiters);
            w.push(local);
            self.registered.store(w.len(), Ordering::Relaxed);
        }
        // Pairs with the fence in `take`: the caller re-checks its condition after this.
        fence(Ordering::SeqCst);
    }

    pub(crate) fn take(&self) -> Vec<u32> {
        // Pairs with the fence in `register`: the caller made the condition true before this.
        fence(Ordering::SeqCst);
        if self.registered.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let mut w = lock(&self.waiters);
        self.registered.store(0, Ordering::Relaxed);
        std::mem::take(&mut *w)
    }
}
