//! The node barrier of a sync: a counter barrier over shared atomics that also sums one
//! `u64` per member, so that the facts every member must agree on (whether anybody queued a
//! request, whether a process is leaving) travel with the barrier instead of in a collective
//! of their own.
//!
//! A member adds its value, then counts its arrival; the last to arrive takes the sum, resets
//! the counters for the next round and only then advances the generation, which releases the
//! others. Nothing is allocated. A waiting member first spins on the generation for a short
//! while (the other members usually run on the other cores and arrive within a microsecond),
//! then waits through the runtime ([`Rank::wait_until`]), which gives its slot to another
//! rank when one is waiting for it and reports who waits on what if the job deadlocks.
//!
//! Rounds cannot mix: a member arrives at round `g + 1` only after it saw round `g` end, and
//! the last member of round `g` reset the counters before it ended the round. The sum of
//! round `g` is kept in `sums[g % 2]` until round `g + 2` ends, which needs every member to
//! have left round `g` first.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use spillway_runtime::{Describe, Rank, WaitKind, WaitQueue};

/// How many times a member looks at the generation before it waits through the runtime.
const SPIN: u32 = 64;

/// Keeps what one member writes on its own cache line (two lines: adjacent lines are fetched
/// together).
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Line<T>(pub(super) T);

/// See the module notes.
pub(crate) struct NodeBarrier {
    size: u32,
    arrived: Line<AtomicU32>,
    sum: Line<AtomicU64>,
    generation: Line<AtomicU32>,
    sums: [AtomicU64; 2],
    queue: WaitQueue,
}

impl NodeBarrier {
    pub(crate) fn new(size: usize) -> Arc<NodeBarrier> {
        Arc::new(NodeBarrier {
            size: u32::try_from(size).expect("a node holds fewer than 2^32 ranks"),
            arrived: Line::default(),
            sum: Line::default(),
            generation: Line::default(),
            sums: [AtomicU64::new(0), AtomicU64::new(0)],
            queue: WaitQueue::new(),
        })
    }

    /// Waits until every member of the node has arrived with its `value`; returns the sum of
    /// the values (wrapping).
    ///
    /// # Errors
    /// [`spillway_runtime::Error::Aborted`] when the job ends while waiting (and the loss of a
    /// process the rank was not told of yet, as every blocking call of the runtime).
    pub(crate) fn wait(
        self: &Arc<Self>,
        rank: &Rank,
        value: u64,
        describe: &Arc<dyn Describe>,
    ) -> Result<u64, spillway_runtime::Error> {
        let generation = self.generation.0.load(Ordering::Acquire);
        if value != 0 {
            self.sum.0.fetch_add(value, Ordering::Relaxed);
        }
        // The arrivals form one release sequence: the last member sees every addition above.
        if self.arrived.0.fetch_add(1, Ordering::AcqRel) + 1 == self.size {
            let total = self.sum.0.swap(0, Ordering::Relaxed);
            self.arrived.0.store(0, Ordering::Relaxed);
            self.sums[generation as usize % 2].store(total, Ordering::Relaxed);
            self.generation
                .0
                .store(generation.wrapping_add(1), Ordering::Release);
            rank.wake_all(&self.queue);
            return Ok(total);
        }
        let ended = || self.generation.0.load(Ordering::Acquire) != generation;
        let mut spun = 0;
        while !ended() {
            if spun == SPIN {
                rank.wait_until(
                    &self.queue,
                    WaitKind::Collective("sync"),
                    Some(describe),
                    ended,
                )?;
                break;
            }
            spun += 1;
            std::hint::spin_loop();
        }
        Ok(self.sums[generation as usize % 2].load(Ordering::Relaxed))
    }
}

impl Describe for NodeBarrier {
    fn describe(&self) -> String {
        format!(
            "the other ranks of its node in a sync ({} of {} arrived)",
            self.arrived.0.load(Ordering::Relaxed),
            self.size
        )
    }
}
