//! Processes lost while a job runs (MPI with ULFM), as the ranks see them.
//!
//! When the engine reports lost processes ([`Host::lost`](spillway_transport::Host)), the
//! loss is *armed* as soon as no rank of this process runs (at once if none does, otherwise
//! when the last running rank blocks): every blocked rank is woken, and from then on every
//! blocking call of a rank ([`Error::ProcessLost`](crate::Error::ProcessLost)) fails until the rank acknowledges the
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
use std::sync::atomic::AtomicU32;
use std::sync::Mutex;

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
    pub(crate) state: Mutex<State>,
    /// The epoch of the armed loss (0: none).
    pub(crate) armed: AtomicU32,
    /// Per local rank: the epoch it acknowledged.
    pub(crate) acked: Box<[AtomicU32]>,
}

/// What the engine reported.
#[derive(Default)]
pub(crate) struct State {
    /// The latest loss reported by the engine.
    pub(crate) latest: Option<LostProcesses>,
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
