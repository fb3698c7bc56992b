//! Shared by the runtime's integration tests: a deadline for jobs, a small deterministic
//! generator, and the node-level barrier built on the runtime's wait queues.

#![allow(dead_code)] // Each test binary uses its own part of this module.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use spillway_runtime::{Error, Rank, WaitKind, WaitQueue};

/// Runs `job` on a thread of its own and returns its result, or, if it has not finished after
/// `limit`, interrupts every job of this process and panics with `what` and `report()` (which
/// says who waits on what).
pub fn with_deadline<T: Send + 'static>(
    what: &str,
    limit: Duration,
    report: impl Fn() -> String,
    job: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("deadline: {what}"))
        .spawn(move || {
            let _ = tx.send(job());
        })
        .expect("a thread for the job");
    match rx.recv_timeout(limit) {
        Ok(out) => {
            handle.join().expect("the job thread ends after sending");
            out
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!("the job thread sends before it ends"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let state = report();
            // Blocked ranks return Error::Aborted; the job then ends with JobError::Interrupted.
            spillway_runtime::interrupt(15);
            let ended = rx.recv_timeout(Duration::from_secs(10)).is_ok();
            panic!(
                "{what}: no result after {limit:?} (the job {} after an interrupt)\n{state}",
                if ended { "ended" } else { "did not end" }
            );
        }
    }
}

/// SplitMix64: a deterministic stream of test decisions from a seed.
#[derive(Clone, Debug)]
pub struct Mix(pub u64);

impl Mix {
    /// The stream of `seed` mixed with `salt` (one independent stream per purpose).
    pub fn new(seed: u64, salt: u64) -> Mix {
        let mut m = Mix(seed ^ salt.wrapping_mul(0xa076_1d64_78bd_642f));
        m.next();
        m
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `1 / n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// A barrier of the ranks of one node, through the runtime's node table and wait queues
/// (the protocol node-level collectives use): the last rank to arrive wakes the others.
#[derive(Default)]
pub struct NodeBarrier {
    arrived: AtomicUsize,
    queue: WaitQueue,
}

/// Waits until every rank of the caller's node has called `node_barrier` with `key` (each
/// key used once per node). Checks on the way out that all of them had arrived.
pub fn node_barrier(rank: &Rank, key: u64) -> Result<(), Error> {
    let b = rank
        .node_table()
        .get_or_insert_with(key, NodeBarrier::default);
    let all = rank.local_size() as usize;
    let now = b.arrived.fetch_add(1, Ordering::AcqRel) + 1;
    if now == all {
        rank.wake_all(&b.queue);
    } else {
        rank.wait_until(&b.queue, WaitKind::Collective("node barrier"), None, || {
            b.arrived.load(Ordering::Acquire) == all
        })?;
    }
    let seen = b.arrived.load(Ordering::Acquire);
    assert_eq!(
        seen,
        all,
        "rank {} left node barrier {key:#x} with {seen} of {all} arrived",
        rank.rank()
    );
    Ok(())
}
