//! The members of a fault-tolerant communicator: their original ranks and nodes, who is whose
//! buddy, and whether a loss leaves every lost member's replicas on a survivor.

use spillway_comm::{Collectives, Comm};

use crate::error::Error;

/// The members of a communicator: original rank and node of each.
#[derive(Debug, Clone)]
pub(crate) struct Members {
    pub(crate) global: Vec<u32>,
    pub(crate) node: Vec<u32>,
}

impl Members {
    /// Learns every member's rank and node (a collective).
    pub(crate) fn of(comm: &Comm) -> Result<Members, Error> {
        let rank = comm.runtime();
        let all = comm.allgather(&[rank.rank(), rank.node()])?;
        Ok(Members {
            global: all.iter().step_by(2).copied().collect(),
            node: all.iter().skip(1).step_by(2).copied().collect(),
        })
    }

    /// Without the members in `lost` (sorted indices).
    pub(crate) fn without(&self, lost: &[usize]) -> Members {
        let keep = |i: &usize| lost.binary_search(i).is_err();
        Members {
            global: (0..self.global.len())
                .filter(keep)
                .map(|i| self.global[i])
                .collect(),
            node: (0..self.node.len())
                .filter(keep)
                .map(|i| self.node[i])
                .collect(),
        }
    }

    /// The member holding member `i`'s replicas: the one with the same local index (modulo
    /// the next node's size) on the next node that has members; with one node, the next
    /// member on it; none if `i` is alone.
    pub(crate) fn buddy(&self, i: usize) -> Option<usize> {
        let mut nodes: Vec<u32> = self.node.clone();
        nodes.sort_unstable();
        nodes.dedup();
        let mine = self.node[i];
        let on = |n: u32| -> Vec<usize> {
            (0..self.node.len())
                .filter(|&j| self.node[j] == n)
                .collect()
        };
        let here = on(mine);
        let local = here
            .iter()
            .position(|&j| j == i)
            .expect("a member of its node");
        if nodes.len() == 1 {
            return (here.len() > 1).then(|| here[(local + 1) % here.len()]);
        }
        let k = nodes.binary_search(&mine).expect("its node");
        let next = on(nodes[(k + 1) % nodes.len()]);
        Some(next[local % next.len()])
    }

    /// Whether members `a` and `b` are on the same node.
    pub(crate) fn same_node(&self, a: usize, b: usize) -> bool {
        self.node[a] == self.node[b]
    }
}

/// The original ranks of the members `lost` of `members`.
pub(crate) fn globals(members: &Members, lost: &[usize]) -> Vec<u32> {
    lost.iter().map(|&i| members.global[i]).collect()
}

/// Checks that every lost member's replicas are on a survivor.
pub(crate) fn coverage(members: &Members, lost: &[usize]) -> Option<String> {
    for &l in lost {
        match members.buddy(l) {
            None => {
                return Some(format!(
                    "rank {} had nobody to hold its replicas (one rank left)",
                    members.global[l]
                ))
            }
            Some(b) if lost.binary_search(&b).is_ok() => {
                return Some(format!(
                    "rank {} (node {}) and the holder of its replicas, rank {} (node {}), were \
                     lost in the same operation",
                    members.global[l], members.node[l], members.global[b], members.node[b]
                ))
            }
            Some(_) => {}
        }
    }
    None
}
