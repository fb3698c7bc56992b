//! Deadlock detection and reports.
//!
//! When the last running or queued rank of the process blocks (`active` drops to zero), every
//! rank waits for another one. With the local backend nothing can wake any of them any more:
//! that is a deadlock, reported with what each rank waits for. With the MPI backend a message
//! still in flight from another process may wake a rank, so the progress threads decide
//! together (the MPI engine's termination detection) and then call
//! [`Job::report_deadlock`].

use crate::error::{DeadlockReport, JobError, WaitState};
use crate::job::Job;
use crate::sched::{Status, WaitOn};
use spillway_transport::lock;

impl Job {
    pub(crate) fn check_deadlock(&self) {
        if let Some(remote) = &self.remote {
            // Other processes may still send a message that wakes a rank: the progress
            // threads decide together.
            remote.notify();
            return;
        }
        self.report_deadlock(None);
    }

    /// Ends the job with a deadlock report of this process's ranks, if every rank here is
    /// blocked or finished (and at least one is blocked, or `note` says that other processes
    /// report their own ranks).
    pub(crate) fn report_deadlock(&self, note: Option<String>) {
        if self.aborted() || self.activity.active() != 0 {
            return;
        }
        let wakes = self.activity.wakes();
        let mut snapshots = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            match node.sched.snapshot() {
                Some(s) => snapshots.push(s),
                None => return,
            }
        }
        let mut ranks = Vec::new();
        let mut blocked = 0;
        for (node, snap) in self.nodes.iter().zip(snapshots) {
            let n = self.layout.node_of(node.first);
            for (local, (status, wait)) in snap.into_iter().enumerate() {
                let waiting_for = match (status, wait) {
                    (Status::Blocked | Status::Blocking { .. }, Some(info)) => {
                        blocked += 1;
                        let what = match &info.on {
                            WaitOn::Mailbox => lock(&node.mailboxes[local]).describe_wait(),
                            WaitOn::Node(Some(d)) => d.describe(),
                            WaitOn::Node(None) => "other ranks of its node".to_string(),
                            WaitOn::Critical => "the node's critical section".to_string(),
                        };
                        format!("blocked in {}, waiting for {what}", label(info.kind))
                    }
                    _ => "finished".to_string(),
                };
                ranks.push(WaitState {
                    rank: node.first + local as u32,
                    node: n,
                    waiting_for,
                });
            }
        }
        if blocked == 0 && note.is_none() {
            return;
        }
        // Nothing may have changed while the report was written.
        if self.activity.wakes() != wakes || self.activity.active() != 0 {
            return;
        }
        if self.set_failure(JobError::Deadlock(DeadlockReport { ranks, note })) {
            self.abort_all();
        }
    }
}

fn label(kind: crate::WaitKind) -> String {
    match kind {
        crate::WaitKind::Recv => "receive".to_string(),
        crate::WaitKind::Probe => "probe".to_string(),
        crate::WaitKind::Wait => "wait".to_string(),
        crate::WaitKind::Collective(name) => format!("collective {name}"),
        crate::WaitKind::Critical => "enter_critical".to_string(),
    }
}
