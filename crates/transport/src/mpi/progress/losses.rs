//! What a round of progress does when processes are lost: watching the engine's collectives,
//! shrinking them (ULFM), and dropping the traffic of the lost processes.

use super::*;

impl Progress {
    /// Whether the collective communicator was revoked (another process found a failed
    /// one): then this process joins the shrink. Returns whether it did.
    pub(in crate::mpi) fn watch_collectives(&mut self) -> Result<bool, String> {
        let mut flag: c_int = 0;
        let mut status = super::super::empty_status();
        // SAFETY: valid communicator; nothing is ever sent on it point to point, so the probe
        // only reports errors (a revoked communicator, a failed process).
        let code = unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                self.coll.comm,
                &mut flag,
                &mut status,
            )
        };
        if code == 0 {
            return Ok(false);
        }
        if !ulfm::is_process_failure(code) {
            return Err(mpi_error("MPI_Iprobe (collectives)", code));
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
    /// Only while the job runs here: once this process entered the end agreement, the
    /// agreement itself settles what happened (see [`finish_round`](Self::finish_round)).
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
        if !matches!(self.end, End::Running) {
            return false;
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
                match ulfm::acknowledge(comm) {
                    Ok(failed) => known.extend(failed),
                    Err(e) => {
                        self.transport_failure(e);
                        return false;
                    }
                }
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

    /// Whether the collective communicator was revoked by another process.
    pub(in crate::mpi) fn collectives_revoked(&self) -> bool {
        let mut flag: c_int = 0;
        let mut status = super::super::empty_status();
        // SAFETY: as in `watch_collectives`.
        let code = unsafe {
            ffi::MPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                self.coll.comm,
                &mut flag,
                &mut status,
            )
        };
        ulfm::is_process_failure(code)
    }

    /// Revokes and shrinks the collective communicator with the other survivors, and goes on
    /// without the processes that left it: their traffic is dropped, the ring and the
    /// termination waves skip them, and the job learns of them.
    pub(in crate::mpi) fn shrink_collectives(&mut self) {
        ulfm::revoke(self.coll.comm);
        let shrunk = match ulfm::shrink(self.coll.comm) {
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
        self.end = End::Running;
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
