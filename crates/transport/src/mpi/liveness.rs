//! Noticing a silent process: every process sends a heartbeat to its successor in the ring
//! of live processes every second; a process that hears nothing from its predecessor for the
//! peer timeout reports it. Without ULFM this is how a lost process is noticed (the survivors
//! then end without waiting for it, and MPI is not finalised, since that would wait for the
//! lost process forever); with ULFM, MPI reports a lost process itself and this catches a
//! process that hangs.

use std::ffi::c_int;
use std::time::{Duration, Instant};

const HEARTBEAT: Duration = Duration::from_secs(1);

pub(super) struct Liveness {
    /// When the predecessor was last heard from.
    last_heard: Instant,
    /// When to send the next heartbeat.
    next_heartbeat: Instant,
    peer_timeout: Duration,
    /// A process reported silent.
    pub(super) silent: Option<u32>,
}

impl Liveness {
    pub(super) fn new(peer_timeout: Duration) -> Liveness {
        Liveness {
            last_heard: Instant::now(),
            next_heartbeat: Instant::now(),
            peer_timeout,
            silent: None,
        }
    }

    pub(super) fn peer_timeout(&self) -> Duration {
        self.peer_timeout
    }

    /// Records a message from process `source` (the predecessor is `predecessor`).
    pub(super) fn heard_from(&mut self, source: c_int, predecessor: c_int) {
        if source == predecessor {
            self.last_heard = Instant::now();
        }
    }

    /// The predecessor changed (processes were lost): its silence counts from now.
    pub(super) fn restart(&mut self) {
        self.last_heard = Instant::now();
    }

    /// Whether a heartbeat is due at `now` (then the next one is scheduled).
    pub(super) fn heartbeat_due(&mut self, now: Instant) -> bool {
        if now < self.next_heartbeat {
            return false;
        }
        self.next_heartbeat = now + HEARTBEAT;
        true
    }

    /// The predecessor, if it has been silent for the peer timeout at `now` and was not
    /// reported yet (it is reported once).
    pub(super) fn newly_silent(&mut self, now: Instant, predecessor: c_int) -> Option<u32> {
        if self.silent.is_none() && now.duration_since(self.last_heard) > self.peer_timeout {
            self.silent = Some(predecessor as u32);
            return self.silent;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_predecessor_is_reported_once() {
        let mut l = Liveness::new(Duration::from_millis(10));
        let t0 = Instant::now();
        assert!(l.heartbeat_due(t0));
        assert!(!l.heartbeat_due(t0));
        assert_eq!(l.newly_silent(t0, 3), None);
        let later = t0 + Duration::from_millis(50);
        assert_eq!(l.newly_silent(later, 3), Some(3));
        assert_eq!(l.newly_silent(later, 3), None);
        l.heard_from(3, 3);
        assert!(l.heartbeat_due(t0 + HEARTBEAT));
    }
}
