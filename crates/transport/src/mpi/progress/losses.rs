//! What a round of progress does when processes are lost: watching the engine's collectives,
//! shrinking them (ULFM), and dropping the traffic of the lost processes.

use super::*;

/// The least time a shrink may take before the process gives up (see
/// [`Progress::shrink_collectives`]); twice the peer timeout when that is longer.
const SHRINK_LIMIT: Duration = Duration::from_secs(30);

impl Progress {
    /// Whether the collective communicator was revoked (another process found a failed
    /// one): then this process joins the shrink. While the job runs here, a failed process
    /// the probe reports starts a shrink too. Returns whether this process shrank.
    pub(in crate::mpi) fn watch_collectives(&mut self) -> Result<bool, String> {
        let code = self.probe_collectives();
        if code == 0 {
            return Ok(false);
        }
        if !ulfm::is_process_failure(code) {
            return Err(mpi_error("MPI_Iprobe (collectives)", code));
        }
        if matches!(self.end, End::Agree(..)) {
            return Ok(self.join_shrink_if_revoked(code));
        }
        self.net
            .note_peer_failed("MPI_Iprobe on the collective communicator");
        Ok(self.on_peer_failed())
    }

    /// A call reported a failed process (or the collective communicator was revoked). With
    /// processes newly failed, or when another process revoked the collective communicator,
    /// the survivors revoke it, shrink it (which makes them agree on who failed) and go on
    /// without the lost processes; the job is told ([`Host::lost`]).
    ///
    /// Only while the job runs here: once this process entered the end agreement, it starts
    /// no shrink (other survivors may have completed the agreement and left), it only joins
    /// one that another process started (see [`join_shrink_if_revoked`]); the agreement
    /// itself settles what else happened (see [`finish_round`](Self::finish_round)).
    ///
    /// [`join_shrink_if_revoked`]: Self::join_shrink_if_revoked
    ///
    /// Reports that bring nothing new (late errors of operations with processes already
    /// lost) acknowledge the failures at most every [`ACK_EVERY`] (each acknowledgement
    /// costs MPI a group; a failure not acknowledged yet is reported again, by the probe
    /// of the collective communicator at the latest). If MPI goes on reporting failures
    /// for longer than the peer timeout without any new one and without a shrink, the job
    /// ends with a transport failure that names the call and what the ranks here wait for.
    /// Returns whether the collectives were shrunk.
    pub(in crate::mpi) fn on_peer_failed(&mut self) -> bool {
        self.net.take_peer_failed();
        match self.end {
            End::Running => {}
            End::Agree(..) => {
                let code = self.probe_collectives();
                return self.join_shrink_if_revoked(code);
            }
            End::Done { .. } => {
                self.abandon_sends_to_failed();
                return false;
            }
            End::Barrier(_) => return false,
        }
        let now = Instant::now();
        let ack_due = self
            .stale
            .last_ack
            .is_none_or(|t| now.duration_since(t) >= ACK_EVERY);
        let mut new = false;
        if ack_due {
            self.stale.last_ack = Some(now);
            let mut known: Vec<c_int> = Vec::new();
            for comm in [self.net.comm, self.net.data] {
                let Some(failed) = self.acknowledged(comm) else {
                    return false;
                };
                known.extend(failed);
            }
            new = known.iter().any(|&p| self.peers.alive(p));
        }
        if !new && !self.collectives_revoked() {
            // A late error from a process already known lost (or one acknowledged at the
            // next report).
            self.stale_failure_report(now);
            return false;
        }
        self.stale.since = None;
        self.shrink_collectives();
        true
    }

    /// A report of a failed process that changed nothing: if such reports go on for longer
    /// than the peer timeout, the job ends saying who waits for what.
    fn stale_failure_report(&mut self, now: Instant) {
        let since = *self.stale.since.get_or_insert(now);
        self.stale.reports += 1;
        let limit = self.live.peer_timeout();
        if now.duration_since(since) <= limit || self.stale.reports < STALE_REPORTS {
            return;
        }
        let waiting = self.direct.describe_waiting();
        let lost = self.peers.lost_nodes();
        self.transport_failure(format!(
            "MPI has reported a failed process {} times in {:.0?} without any new failure              or revoked communicator (last by {}; processes lost so far: {lost:?});              direct exchanges waiting here: {}",
            self.stale.reports,
            now.duration_since(since),
            self.net.last_failed_call(),
            if waiting.is_empty() {
                "none".to_string()
            } else {
                waiting
            }
        ));
        self.stale = StaleFailures::default();
    }

    /// Whether the collective communicator was revoked by another process (or reports a
    /// failed process).
    pub(in crate::mpi) fn collectives_revoked(&self) -> bool {
        ulfm::is_process_failure(self.probe_collectives())
    }

    /// While this process is in the end agreement: if another process revoked the collective
    /// communicator (it found a failed process while its ranks still ran, or after the end
    /// agreement failed), this process joins the shrink, which the others cannot complete
    /// without it; the agreement stays pending meanwhile (it is on a communicator of its
    /// own). `code` is what a probe of the collective communicator returned. Returns whether
    /// this process shrank.
    fn join_shrink_if_revoked(&mut self, code: c_int) -> bool {
        if !ulfm::is_revoked(code) {
            return false;
        }
        self.shrink_collectives();
        true
    }

    /// The end agreement reported a failed process (the same error in every survivor): the
    /// failures are acknowledged on its communicator, so that the next agreement can
    /// complete. A survivor that knows of a failed process still counted in the job starts
    /// a shrink of the collectives (the others join it: see [`join_shrink_if_revoked`]).
    /// Everybody then agrees again.
    ///
    /// [`join_shrink_if_revoked`]: Self::join_shrink_if_revoked
    pub(in crate::mpi) fn after_failed_agreement(&mut self) {
        self.end = End::Running;
        let Some(failed) = self.acknowledged(self.end_comm) else {
            return;
        };
        if failed.iter().any(|&p| self.peers.alive(p)) {
            self.shrink_collectives();
        }
    }

    /// After the end was agreed: sends to processes that failed since will never complete,
    /// and would keep this process from leaving; they are cancelled. MPI is then not
    /// finalised (it would wait for the failed processes).
    fn abandon_sends_to_failed(&mut self) {
        let Some(failed) = self.acknowledged(self.net.comm) else {
            return;
        };
        if failed.is_empty() {
            return;
        }
        super::super::PEER_LOST.store(true, std::sync::atomic::Ordering::Release);
        self.sends.abandon(&self.net, |p| failed.contains(&p));
        self.net.take_peer_failed();
    }

    /// Acknowledges the failures known on `comm` ([`ulfm::acknowledge`]) and returns the
    /// failed processes; `None` after a transport failure (recorded) if that fails.
    fn acknowledged(&mut self, comm: ffi::MPI_Comm) -> Option<Vec<c_int>> {
        match ulfm::acknowledge(comm) {
            Ok(failed) => Some(failed),
            Err(e) => {
                self.transport_failure(e);
                None
            }
        }
    }

    /// The error code of a probe of the collective communicator (0: nothing to report).
    fn probe_collectives(&self) -> c_int {
        let mut flag: c_int = 0;
        let mut status = super::super::empty_status();
        // SAFETY: valid communicator; nothing is ever sent on it point to point, so the probe
        // only reports errors (a revoked communicator, a failed process).
        unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                self.coll.comm,
                &mut flag,
                &mut status,
            )
        }
    }

    /// Revokes and shrinks the collective communicator with the other survivors, and goes on
    /// without the processes that left it: their traffic is dropped, the ring and the
    /// termination waves skip them, and the job learns of them. The end of the job is left
    /// as it was (an agreement pending stays so).
    pub(in crate::mpi) fn shrink_collectives(&mut self) {
        ulfm::revoke(self.coll.comm);
        // Open MPI 5.0.11 sometimes never completes the shrink when another process fails
        // while the survivors recover from a first (seen twice in the test suite's runs):
        // the process then ends rather than wait forever.
        let limit = (2 * self.live.peer_timeout()).max(SHRINK_LIMIT);
        let lost = self.peers.lost_nodes();
        let shrunk_in_time = super::super::watchdog("mpi-shrink-watchdog", limit, move || {
            format!(
                "spillway: transport between nodes failed: MPIX_Comm_shrink did not return \
                 within {limit:?} while the survivors recovered from a lost process (nodes \
                 lost before: {lost:?}; Open MPI can wait there forever when another process \
                 fails during the recovery): the job ends (with the spillway CLI, a job saved \
                 with --checkpoint-dir resumes with --resume)"
            )
        });
        let shrunk = ulfm::shrink(self.coll.comm);
        shrunk_in_time.store(true, std::sync::atomic::Ordering::Release);
        let shrunk = match shrunk {
            Ok(c) => c,
            Err(e) => {
                self.transport_failure(e);
                return;
            }
        };
        let survivors = ulfm::members_in(shrunk, self.net.comm);
        if self.coll.shrunk {
            // SAFETY: a communicator this engine made by a shrink; revoked, not used again.
            unsafe { ffi::MPI_Comm_free(&mut self.coll.comm) };
        }
        // (The first collective communicator belongs to the caller, who drops it.)
        self.coll = Coll {
            comm: shrunk,
            shrunk: true,
        };
        let lost: Vec<c_int> = (0..self.net.size)
            .filter(|p| !survivors.contains(p))
            .collect();
        super::super::PEER_LOST.store(true, std::sync::atomic::Ordering::Release);
        // Acknowledge what the shrink found on the point-to-point communicators too, so that
        // probes from any source go on.
        for comm in [self.net.comm, self.net.data] {
            let _ = ulfm::acknowledge(comm);
        }
        self.net.take_peer_failed();
        let Some(event) = self.peers.mark_lost(&lost) else {
            return;
        };
        self.drop_traffic_of(&event.nodes);
        self.live.restart();
        self.term.restart();
        self.host.lost(event);
    }

    /// Drops what was on its way to or from the lost processes `nodes`.
    pub(in crate::mpi) fn drop_traffic_of(&mut self, nodes: &[u32]) {
        let deadline = Instant::now() + Duration::from_secs(5);
        for &n in nodes {
            while self.receives.abandon(&self.net, n as usize) {
                if Instant::now() > deadline {
                    eprintln!(
                        "spillway: MPI still writes into a rank's memory for a message from \
                         lost node {n}; aborting"
                    );
                    std::process::abort();
                }
                std::thread::yield_now();
            }
        }
        let peers = &self.peers;
        self.direct.abandon(&|p| !peers.alive(p));
        self.sends.abandon(&self.net, |p| !peers.alive(p));
        self.net.take_peer_failed();
    }

    /// Whether the collective communicator is one the engine made by a shrink.
    pub(in crate::mpi) fn coll_is_shrunk(&self) -> bool {
        self.coll.shrunk
    }

    /// Hands the collective communicator made by a shrink over to the caller.
    pub(in crate::mpi) fn take_shrunk_coll(&mut self) -> ffi::MPI_Comm {
        self.coll.shrunk = false;
        self.coll.comm
    }
}
