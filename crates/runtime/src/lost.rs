//! Processes lost while a job runs (MPI with ULFM), as the ranks see them.
//!
//! When the engine reports lost processes ([`Host::lost`](spillway_transport::Host)), the
//! loss is *armed* as soon as no rank of this process runs (at once if none does, otherwise
//! when the last running rank blocks): every blocked rank is woken, and from then on every
//! blocking call of a rank ([`Error::ProcessLost`]) fails until the rank acknowledges the
//! loss ([`Rank::acknowledge_loss`](crate::Rank::acknowledge_loss)), much as ULFM revokes a
//! communicator: a rank waiting for a survivor that itself waits for a lost rank does not
//! wait forever. Waiting until no rank runs means that no rank is in the middle of reading
//! another rank's buffer (node-level collectives read each other's memory) when the ranks
//! learn of the loss.
//!
//! A layer that can go on without the lost ranks (the fault-tolerant MapReduce) acknowledges
//! the loss and continues on communicators without them; anything else fails with the error,
//! which names the lost nodes and ranks.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::error::Error;
use crate::job::Job;
use crate::node::lock;

/// The processes (nodes) lost from a job so far, as every survivor agreed on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostProcesses {
    /// Counts the losses: 1 after the first, 2 after the second...
    pub epoch: u32,
    /// Every node lost so far, in increasing order (one MPI process is one node).
    pub nodes: Vec<u32>,
    /// Every rank of those nodes, in increasing order.
    pub ranks: Vec<u32>,
}

impl fmt::Display for LostProcesses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[u32]| -> String {
            let mut parts: Vec<String> = Vec::new();
            let mut i = 0;
            while i < v.len() {
                let mut j = i;
                while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
                    j += 1;
                }
                parts.push(if j > i {
                    format!("{}-{}", v[i], v[j])
                } else {
                    v[i].to_string()
                });
                i = j + 1;
            }
            parts.join(", ")
        };
        let many = self.nodes.len() > 1;
        write!(
            f,
            "node{s} {n} (MPI process{es} {n}: rank{rs} {r}) {was} lost",
            s = if many { "s" } else { "" },
            es = if many { "es" } else { "" },
            rs = if self.ranks.len() > 1 { "s" } else { "" },
            n = list(&self.nodes),
            r = list(&self.ranks),
            was = if many { "were" } else { "was" },
        )
    }
}

/// The loss state of a job in this process.
pub(crate) struct Losses {
    state: Mutex<State>,
    /// The epoch of the armed loss (0: none).
    armed: AtomicU32,
    /// Per local rank: the epoch it acknowledged.
    acked: Box<[AtomicU32]>,
}

#[derive(Default)]
struct State {
    /// The latest loss reported by the engine.
    latest: Option<LostProcesses>,
}

impl Losses {
    pub(crate) fn new(local_ranks: usize) -> Losses {
        Losses {
            state: Mutex::new(State::default()),
            armed: AtomicU32::new(0),
            acked: (0..local_ranks).map(|_| AtomicU32::new(0)).collect(),
        }
    }
}

impl Job {
    /// The engine reports lost processes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn on_lost(&self, epoch: u32, all_nodes: Vec<u32>) {
        let mut ranks = Vec::new();
        for &n in &all_nodes {
            let first = self.layout.first_rank(n);
            ranks.extend(first..first + self.layout.local_size(n));
        }
        lock(&self.losses.state).latest = Some(LostProcesses {
            epoch,
            nodes: all_nodes,
            ranks,
        });
        self.arm_loss();
    }

    /// Arms the latest loss if no rank of this process runs: wakes every rank, whose
    /// blocking calls then fail until it acknowledges.
    pub(crate) fn arm_loss(&self) {
        let Some(epoch) = lock(&self.losses.state).latest.as_ref().map(|l| l.epoch) else {
            return;
        };
        if self.losses.armed.load(Ordering::Acquire) >= epoch {
            return;
        }
        for node in &self.nodes {
            // Under the scheduler's lock: no rank can start running in between.
            node.sched.wake_all_if(|| {
                if self.activity.active() != 0 {
                    return false;
                }
                self.losses.armed.fetch_max(epoch, Ordering::AcqRel);
                true
            });
        }
    }

    /// The error for a blocking call of `rank`, if a loss it has not acknowledged is armed.
    pub(crate) fn loss_unacknowledged(&self, rank: u32) -> Option<Error> {
        let armed = self.losses.armed.load(Ordering::Acquire);
        if armed == 0 {
            return None;
        }
        let local = (rank - self.local_ranks().start) as usize;
        if self.losses.acked[local].load(Ordering::Acquire) >= armed {
            return None;
        }
        self.lost_processes().map(Error::ProcessLost)
    }

    /// `rank` acknowledges the armed loss: its blocking calls work again. Returns the lost
    /// processes so far.
    pub(crate) fn acknowledge_loss(&self, rank: u32) -> Option<LostProcesses> {
        let armed = self.losses.armed.load(Ordering::Acquire);
        let local = (rank - self.local_ranks().start) as usize;
        self.losses.acked[local].fetch_max(armed, Ordering::AcqRel);
        self.lost_processes()
    }

    /// The lost processes the ranks were told of (the armed loss).
    pub(crate) fn lost_processes(&self) -> Option<LostProcesses> {
        let armed = self.losses.armed.load(Ordering::Acquire);
        if armed == 0 {
            return None;
        }
        lock(&self.losses.state)
            .latest
            .clone()
            .filter(|l| l.epoch >= armed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_processes_name_their_nodes_and_ranks() {
        let l = LostProcesses {
            epoch: 1,
            nodes: vec![1],
            ranks: vec![2, 3],
        };
        assert_eq!(l.to_string(), "node 1 (MPI process 1: ranks 2-3) was lost");
        let l = LostProcesses {
            epoch: 2,
            nodes: vec![0, 2],
            ranks: vec![0, 1, 4, 5],
        };
        assert_eq!(
            l.to_string(),
            "nodes 0, 2 (MPI processes 0, 2: ranks 0-1, 4-5) were lost"
        );
    }
}
