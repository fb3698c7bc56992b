//! The processes of a job as this engine knows them: which are alive, the ring of the
//! survivors (heartbeats and termination tokens go to the successor), the leader (the lowest
//! survivor runs the termination waves), and the traffic with each process, so that messages
//! to and from lost processes can be left out of the termination counts.

use std::ffi::c_int;

use crate::host::Lost;

pub(super) struct Peers {
    me: c_int,
    alive: Vec<bool>,
    /// Losses so far (the epoch of the last [`Lost`] event).
    epoch: u32,
    /// Messages handed to MPI for each process, and delivered from each.
    sent_to: Vec<u64>,
    received_from: Vec<u64>,
    /// Messages to and from lost processes (including messages dropped because their
    /// destination was lost).
    lost_sent: u64,
    lost_received: u64,
}

impl Peers {
    pub(super) fn new(me: c_int, size: c_int) -> Peers {
        let n = size as usize;
        Peers {
            me,
            alive: vec![true; n],
            epoch: 0,
            sent_to: vec![0; n],
            received_from: vec![0; n],
            lost_sent: 0,
            lost_received: 0,
        }
    }

    pub(super) fn alive(&self, p: c_int) -> bool {
        self.alive[p as usize]
    }

    /// The other live processes.
    pub(super) fn others(&self) -> impl Iterator<Item = c_int> + '_ {
        let me = self.me;
        (0..self.alive.len() as c_int).filter(move |&p| p != me && self.alive[p as usize])
    }

    /// The next live process after this one in the ring.
    pub(super) fn successor(&self) -> c_int {
        let n = self.alive.len() as c_int;
        (1..n)
            .map(|d| (self.me + d) % n)
            .find(|&p| self.alive[p as usize])
            .unwrap_or(self.me)
    }

    /// The live process before this one in the ring.
    pub(super) fn predecessor(&self) -> c_int {
        let n = self.alive.len() as c_int;
        (1..n)
            .map(|d| (self.me + n - d) % n)
            .find(|&p| self.alive[p as usize])
            .unwrap_or(self.me)
    }

    /// Whether this process leads the termination waves (the lowest live process).
    pub(super) fn is_leader(&self) -> bool {
        self.alive.iter().position(|&a| a) == Some(self.me as usize)
    }

    pub(super) fn count_sent(&mut self, p: c_int) {
        self.sent_to[p as usize] += 1;
    }

    pub(super) fn count_received(&mut self, p: c_int) {
        self.received_from[p as usize] += 1;
    }

    /// A message for a lost process was dropped.
    pub(super) fn count_dropped(&mut self) {
        self.lost_sent += 1;
    }

    /// Messages to and from lost processes (sent, received): to be taken out of this
    /// process's counts in the termination waves.
    pub(super) fn lost_traffic(&self) -> (u64, u64) {
        (self.lost_sent, self.lost_received)
    }

    /// Marks `nodes` lost (those not lost already); returns the event, or `None` if none is
    /// new.
    pub(super) fn mark_lost(&mut self, nodes: &[c_int]) -> Option<Lost> {
        let mut new: Vec<u32> = Vec::new();
        for &p in nodes {
            if p != self.me && self.alive[p as usize] {
                self.alive[p as usize] = false;
                self.lost_sent += self.sent_to[p as usize];
                self.lost_received += self.received_from[p as usize];
                new.push(p as u32);
            }
        }
        if new.is_empty() {
            return None;
        }
        new.sort_unstable();
        self.epoch += 1;
        Some(Lost {
            epoch: self.epoch,
            nodes: new,
            all: self.lost_nodes(),
        })
    }

    /// Every lost process.
    pub(super) fn lost_nodes(&self) -> Vec<u32> {
        (0..self.alive.len() as u32)
            .filter(|&p| !self.alive[p as usize])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_skips_lost_processes() {
        let mut p = Peers::new(2, 5);
        assert_eq!((p.predecessor(), p.successor()), (1, 3));
        assert!(!p.is_leader());
        let lost = p.mark_lost(&[1, 3]).unwrap();
        assert_eq!((lost.epoch, lost.nodes.clone()), (1, vec![1, 3]));
        assert_eq!((p.predecessor(), p.successor()), (0, 4));
        assert!(p.mark_lost(&[3]).is_none());
        let lost = p.mark_lost(&[0, 4]).unwrap();
        assert_eq!(
            (lost.epoch, lost.nodes, lost.all),
            (2, vec![0, 4], vec![0, 1, 3, 4])
        );
        assert!(p.is_leader());
        assert_eq!((p.predecessor(), p.successor()), (2, 2));
        assert_eq!(p.others().count(), 0);
    }

    #[test]
    fn traffic_with_lost_processes_leaves_the_counts() {
        let mut p = Peers::new(0, 3);
        p.count_sent(1);
        p.count_sent(1);
        p.count_sent(2);
        p.count_received(1);
        p.mark_lost(&[1]);
        p.count_dropped();
        assert_eq!(p.lost_traffic(), (3, 1));
    }
}
