//! Ending a job across processes: deadlock detection by counting waves on a token ring
//! (Mattern), and the agreement on failure after the final barrier.
//!
//! Each process counts the messages it sent to and received from other processes. Process 0
//! starts a wave when it is passive (no local rank running or runnable); the token collects
//! every process's counts and passivity around the ring. When two consecutive waves find every
//! process passive with equal totals and as many messages received as sent, nothing was in
//! flight and nothing changed in between: every process reports a deadlock with what its own
//! ranks wait for.

use std::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use mpi::ffi;

use super::frame::{CONTROL_DEADLOCK, CONTROL_TOKEN};
use super::mpi_error;
use super::progress::Progress;
use crate::host::Failure;

/// The token of a deadlock-detection wave.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Token {
    pub(super) wave: u64,
    pub(super) sent: u64,
    pub(super) received: u64,
    pub(super) all_passive: bool,
}

/// Process 0's state of the waves.
pub(super) struct Termination {
    /// Whether a wave is under way.
    wave_out: bool,
    waves: u64,
    /// The totals of the last complete quiet wave.
    last_quiet: Option<(u64, u64)>,
    /// When to start the next wave.
    next_wave: Instant,
}

impl Termination {
    pub(super) fn new() -> Termination {
        Termination {
            wave_out: false,
            waves: 0,
            last_quiet: None,
            next_wave: Instant::now() + Duration::from_millis(50),
        }
    }
}

impl Progress {
    fn counts(&self) -> (u64, u64, bool) {
        use std::sync::atomic::Ordering::Acquire;
        // Read `received` before `sent`: a message counted as received was sent earlier.
        let received = self.outbox.received.load(Acquire);
        let sent = self.outbox.sent.load(Acquire);
        (sent, received, self.host.passive())
    }

    fn send_token(&mut self, token: Token) -> Result<(), String> {
        let next = (self.me + 1) % self.size;
        self.send_control(
            next,
            CONTROL_TOKEN,
            [
                token.wave,
                token.sent,
                token.received,
                token.all_passive as u64,
            ],
            &[],
        )
    }

    /// Process 0: starts a wave when due and passive. Returns whether it sent a token.
    pub(super) fn detect_deadlock(&mut self) -> Result<bool, String> {
        if self.me != 0
            || self.term.wave_out
            || self.host.aborted()
            || Instant::now() < self.term.next_wave
        {
            return Ok(false);
        }
        let (sent, received, passive) = self.counts();
        if !passive {
            self.term.last_quiet = None;
            self.term.next_wave = Instant::now() + Duration::from_millis(50);
            return Ok(false);
        }
        self.term.waves += 1;
        self.term.wave_out = true;
        self.send_token(Token {
            wave: self.term.waves,
            sent,
            received,
            all_passive: true,
        })?;
        Ok(true)
    }

    pub(super) fn on_token(&mut self, token: Token) -> Result<(), String> {
        if self.me != 0 {
            let (sent, received, passive) = self.counts();
            return self.send_token(Token {
                wave: token.wave,
                sent: token.sent + sent,
                received: token.received + received,
                all_passive: token.all_passive && passive,
            });
        }
        self.term.wave_out = false;
        let quiet = token.all_passive && token.sent == token.received;
        if !quiet {
            self.term.last_quiet = None;
            self.term.next_wave = Instant::now() + Duration::from_millis(50);
            return Ok(());
        }
        if self.term.last_quiet == Some((token.sent, token.received)) {
            for p in 1..self.size {
                self.send_control(p, CONTROL_DEADLOCK, [0; 4], &[])?;
            }
            self.declare_deadlock();
            return Ok(());
        }
        // Confirm with a second wave soon.
        self.term.last_quiet = Some((token.sent, token.received));
        self.term.next_wave = Instant::now() + Duration::from_millis(5);
        Ok(())
    }

    pub(super) fn declare_deadlock(&self) {
        self.host.report_deadlock(format!(
            "ranks of node {} only; every MPI process reports its own ranks",
            self.me
        ));
    }

    /// After the barrier: all processes learn whether any of them failed, so that they all
    /// end with an error (or all combine their counters).
    pub(super) fn agree(&mut self) {
        let failed_here = self.host.failed();
        let mine: c_int = if failed_here { self.me } else { self.size };
        let mut first: c_int = self.size;
        // SAFETY: valid communicator; one int in and out.
        let code = unsafe {
            ffi::MPI_Allreduce(
                (&mine as *const c_int).cast::<c_void>(),
                (&mut first as *mut c_int).cast::<c_void>(),
                1,
                ffi::RSMPI_INT32_T,
                ffi::RSMPI_MIN,
                self.comm,
            )
        };
        if code != 0 {
            self.host
                .fail(Failure::Transport(mpi_error("MPI_Allreduce", code)), false);
            return;
        }
        if first < self.size && !failed_here {
            let message = match &self.remote_failure {
                Some((_, m)) => m.clone(),
                None => "failed (see that process's error output)".to_string(),
            };
            self.host.fail(
                Failure::Remote {
                    node: first as u32,
                    message,
                },
                false,
            );
        }
    }
}
