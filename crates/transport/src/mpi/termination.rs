//! Deadlock detection across processes by counting waves on a token ring (Mattern).
//!
//! Each process counts the messages it sent to and received from other processes. The leader
//! (the lowest live process) starts a wave when it is passive (no local rank running or
//! runnable); the token collects every live process's counts and passivity around the ring
//! of live processes. When two consecutive waves find every process passive with equal totals
//! and as many messages received as sent, nothing was in flight and nothing changed in
//! between: every process reports a deadlock with what its own ranks wait for. Messages to and
//! from lost processes are left out of the counts; a loss restarts the waves (a token may
//! have been lost with its holder). A token that has not come back after [`WAVE_LOST`]
//! (doubled after each wave given up, up to a minute, so that a slow ring still completes
//! waves) is taken for lost too (e.g. forwarded to a process that died by another process that did not
//! know yet) and a new wave starts: without that one lost token would end the detection for
//! good, and a later deadlock would hang instead of being reported.
//!
//! This module is the waves' logic only; the engine sends the tokens.

use std::time::{Duration, Instant};

/// The token of a deadlock-detection wave.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Token {
    pub(super) wave: u64,
    pub(super) sent: u64,
    pub(super) received: u64,
    pub(super) all_passive: bool,
    /// Every process's ranks have all ended (the job ends: no deadlock).
    pub(super) all_done: bool,
}

/// What a process contributes to a wave: its message counts and whether it is passive.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Counts {
    pub(super) sent: u64,
    pub(super) received: u64,
    pub(super) passive: bool,
    /// Every rank of this process has ended.
    pub(super) done: bool,
}

/// What to do with an arriving token.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum TokenStep {
    /// Pass this token on to the successor.
    Forward(Token),
    /// Declare a deadlock (and tell every other process).
    Deadlock,
    /// Nothing (a wave ended without a verdict, or a stale token).
    Nothing,
}

/// How long the leader waits for a wave's token before it takes it for lost.
pub(super) const WAVE_LOST: Duration = Duration::from_secs(2);

/// The leader's state of the waves.
pub(super) struct Termination {
    /// Whether a wave is under way.
    wave_out: bool,
    /// When the wave under way started.
    wave_started: Instant,
    /// How long to wait for its token.
    wave_patience: Duration,
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
            wave_started: Instant::now(),
            wave_patience: WAVE_LOST,
            waves: 0,
            last_quiet: None,
            next_wave: Instant::now() + Duration::from_millis(50),
        }
    }

    /// The leader: a new wave's token, when one is due and this process is passive.
    pub(super) fn start(&mut self, now: Instant, mine: Counts) -> Option<Token> {
        if self.wave_out && now.saturating_duration_since(self.wave_started) > self.wave_patience {
            // The token was lost: its wave gives no verdict (if it still comes back, its
            // number is stale).
            self.wave_out = false;
            self.last_quiet = None;
            self.wave_patience = (self.wave_patience * 2).min(Duration::from_secs(60));
        }
        if self.wave_out || now < self.next_wave {
            return None;
        }
        if !mine.passive {
            self.last_quiet = None;
            self.next_wave = now + Duration::from_millis(50);
            return None;
        }
        self.waves += 1;
        self.wave_out = true;
        self.wave_started = now;
        Some(Token {
            wave: self.waves,
            sent: mine.sent,
            received: mine.received,
            all_passive: true,
            all_done: mine.done,
        })
    }

    /// A token arrived; `leader` says whether this process leads the waves.
    pub(super) fn on_token(&mut self, leader: bool, token: Token, mine: Counts) -> TokenStep {
        if !leader {
            return TokenStep::Forward(Token {
                wave: token.wave,
                sent: token.sent + mine.sent,
                received: token.received + mine.received,
                all_passive: token.all_passive && mine.passive,
                all_done: token.all_done && mine.done,
            });
        }
        if !self.wave_out || token.wave != self.waves {
            // A token of a wave before a loss (or one this leader did not start).
            return TokenStep::Nothing;
        }
        self.wave_out = false;
        self.wave_patience = WAVE_LOST;
        let now = Instant::now();
        // Every live process's ranks ended: that is the job's end, which the end protocol
        // completes (with ULFM also after a process lost in it), not a deadlock.
        let quiet = token.all_passive && token.sent == token.received && !token.all_done;
        if !quiet {
            self.last_quiet = None;
            self.next_wave = now + Duration::from_millis(50);
            return TokenStep::Nothing;
        }
        if self.last_quiet == Some((token.sent, token.received)) {
            return TokenStep::Deadlock;
        }
        // Confirm with a second wave soon.
        self.last_quiet = Some((token.sent, token.received));
        self.next_wave = now + Duration::from_millis(5);
        TokenStep::Nothing
    }

    /// Processes were lost: a wave under way may have lost its token, and the counts of the
    /// last quiet wave included traffic that is now left out.
    pub(super) fn restart(&mut self) {
        self.wave_out = false;
        self.last_quiet = None;
        self.next_wave = Instant::now() + Duration::from_millis(50);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(sent: u64, received: u64, passive: bool) -> Counts {
        Counts {
            sent,
            received,
            passive,
            done: false,
        }
    }

    /// Quiet waves of processes whose ranks have all ended are the job's end, not a deadlock
    /// (a process lost while the others end must not make them report one).
    #[test]
    fn quiet_waves_of_ended_processes_are_no_deadlock() {
        let done = Counts {
            done: true,
            ..counts(0, 0, true)
        };
        let mut t = Termination::new();
        for _ in 0..3 {
            let later = Instant::now() + Duration::from_secs(1);
            let tok = t.start(later, done).unwrap();
            assert!(tok.all_done);
            let mut other = Termination::new();
            let TokenStep::Forward(back) = other.on_token(false, tok, done) else {
                panic!("a non-leader forwards");
            };
            assert_eq!(t.on_token(true, back, done), TokenStep::Nothing);
        }
        // One process whose ranks still wait keeps the detection: a deadlock again.
        let mut t = Termination::new();
        let mut verdict = TokenStep::Nothing;
        for _ in 0..2 {
            let later = Instant::now() + Duration::from_secs(1);
            let tok = t.start(later, done).unwrap();
            let mut other = Termination::new();
            let TokenStep::Forward(back) = other.on_token(false, tok, counts(0, 0, true)) else {
                panic!("a non-leader forwards");
            };
            verdict = t.on_token(true, back, done);
        }
        assert_eq!(verdict, TokenStep::Deadlock);
    }

    #[test]
    fn two_equal_quiet_waves_make_a_deadlock() {
        let mut t = Termination::new();
        let later = Instant::now() + Duration::from_secs(1);
        let tok = t.start(later, counts(1, 0, true)).unwrap();
        // The other process adds its counts.
        let mut other = Termination::new();
        let TokenStep::Forward(back) = other.on_token(false, tok, counts(0, 1, true)) else {
            panic!("a non-leader forwards");
        };
        assert_eq!(
            t.on_token(true, back, counts(0, 0, true)),
            TokenStep::Nothing
        );
        let later = Instant::now() + Duration::from_secs(1);
        let tok = t.start(later, counts(1, 0, true)).unwrap();
        let TokenStep::Forward(back) = other.on_token(false, tok, counts(0, 1, true)) else {
            panic!("a non-leader forwards");
        };
        assert_eq!(
            t.on_token(true, back, counts(0, 0, true)),
            TokenStep::Deadlock
        );
    }

    #[test]
    fn a_stale_token_after_a_loss_is_ignored() {
        let mut t = Termination::new();
        let later = Instant::now() + Duration::from_secs(1);
        let tok = t.start(later, counts(0, 0, true)).unwrap();
        t.restart();
        assert_eq!(
            t.on_token(true, tok, counts(0, 0, true)),
            TokenStep::Nothing
        );
        // Messages in flight: no verdict.
        let later = Instant::now() + Duration::from_secs(1);
        let mut tok = t.start(later, counts(2, 1, true)).unwrap();
        tok.wave = t.waves;
        assert_eq!(
            t.on_token(true, tok, counts(0, 0, true)),
            TokenStep::Nothing
        );
        assert!(t.last_quiet.is_none());
    }

    #[test]
    fn a_lost_token_is_given_up_and_the_waves_go_on() {
        let mut t = Termination::new();
        let t0 = Instant::now() + Duration::from_secs(1);
        let lost = t.start(t0, counts(0, 0, true)).unwrap();
        // The token does not come back: no new wave while it may still come.
        assert!(t.start(t0 + WAVE_LOST / 2, counts(0, 0, true)).is_none());
        // Later it is taken for lost, and a new wave starts.
        let t1 = t0 + WAVE_LOST + Duration::from_millis(1);
        let first = t.start(t1, counts(0, 0, true)).unwrap();
        assert_ne!(first.wave, lost.wave);
        // The lost token, if it shows up after all, changes nothing.
        assert_eq!(
            t.on_token(true, lost, counts(0, 0, true)),
            TokenStep::Nothing
        );
        // Two quiet waves still make a deadlock.
        assert_eq!(
            t.on_token(true, first, counts(0, 0, true)),
            TokenStep::Nothing
        );
        let second = t
            .start(t1 + Duration::from_millis(10), counts(0, 0, true))
            .unwrap();
        assert_eq!(
            t.on_token(true, second, counts(0, 0, true)),
            TokenStep::Deadlock
        );
    }
}
