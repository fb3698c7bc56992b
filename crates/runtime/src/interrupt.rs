//! Interrupting running jobs (SIGINT, SIGTERM): the process-wide registry of live jobs.
//!
//! The runtime installs no signal handler itself; an application that wants Ctrl-C to end its
//! jobs cleanly calls [`interrupt`] from its handler (the `spillway` CLI does). Every job then
//! ends as if a rank had failed: blocking calls return [`Error::Aborted`](crate::Error), the
//! job returns [`JobError::Interrupted`](crate::JobError::Interrupted), and the job's spill
//! files, which have no names, disappear with it.

use std::sync::{Arc, Mutex, Weak};

use crate::error::JobError;
use crate::job::Job;

static LIVE: Mutex<Vec<Weak<Job>>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<Weak<Job>>> {
    spillway_transport::lock(&LIVE)
}

/// Keeps a job in the registry while it runs.
pub(crate) struct Registered(Weak<Job>);

pub(crate) fn register(job: &Arc<Job>) -> Registered {
    let weak = Arc::downgrade(job);
    let mut jobs = live();
    jobs.retain(|j| j.strong_count() > 0);
    jobs.push(weak.clone());
    Registered(weak)
}

impl Drop for Registered {
    fn drop(&mut self) {
        live().retain(|j| !j.ptr_eq(&self.0) && j.strong_count() > 0);
    }
}

/// Ends every job running in this process with [`JobError::Interrupted`] for `signal`;
/// returns how many jobs were running. Safe to call from any thread (not from inside a
/// signal handler: call it from a thread that the handler wakes).
pub fn interrupt(signal: i32) -> usize {
    let jobs: Vec<Arc<Job>> = live().iter().filter_map(Weak::upgrade).collect();
    for job in &jobs {
        job.fail(JobError::Interrupted { signal });
    }
    jobs.len()
}
