//! Noticing a lost process: every process sends a heartbeat to its successor in the ring of
//! processes every second; a process that hears nothing from its predecessor for the peer
//! timeout announces it as lost (the survivors then end without waiting for it, and MPI is
//! not finalised, since that would wait for the lost process forever).

use std::ffi::c_int;
use std::time::{Duration, Instant};

use super::frame::CONTROL_HEARTBEAT;
use super::progress::Progress;
use crate::host::Failure;

const HEARTBEAT: Duration = Duration::from_secs(1);

pub(super) struct Liveness {
    /// When the predecessor was last heard from.
    last_heard: Instant,
    /// When to send the next heartbeat.
    next_heartbeat: Instant,
    peer_timeout: Duration,
    /// A process known to be lost.
    pub(super) lost: Option<u32>,
}

impl Liveness {
    pub(super) fn new(peer_timeout: Duration) -> Liveness {
        Liveness {
            last_heard: Instant::now(),
            next_heartbeat: Instant::now(),
            peer_timeout,
            lost: None,
        }
    }

    /// Records a message from process `source` (`me` of `size`).
    pub(super) fn heard_from(&mut self, source: c_int, me: c_int, size: c_int) {
        if source == (me + size - 1) % size {
            self.last_heard = Instant::now();
        }
    }
}

impl Progress {
    /// Sends the heartbeat when due and checks the predecessor; returns whether anything was
    /// done.
    pub(super) fn check_liveness(&mut self) -> Result<bool, String> {
        let now = Instant::now();
        let mut busy = false;
        if now >= self.live.next_heartbeat {
            let next = (self.me + 1) % self.size;
            self.send_control(next, CONTROL_HEARTBEAT, [0; 4], &[])?;
            self.live.next_heartbeat = now + HEARTBEAT;
            busy = true;
        }
        if self.live.lost.is_none()
            && now.duration_since(self.live.last_heard) > self.live.peer_timeout
        {
            let pred = ((self.me + self.size - 1) % self.size) as u32;
            self.live.lost = Some(pred);
            self.host.fail(
                Failure::Transport(format!(
                    "node {pred} (MPI process {pred}) was not heard from for {:.0?}: it was \
                     probably lost (this MPI has no fault tolerance, so the job ends)",
                    self.live.peer_timeout
                )),
                true,
            );
            busy = true;
        }
        Ok(busy)
    }
}
