//! Running a job from Python: the configuration, the GIL released while it runs, Ctrl-C and
//! progress polled from the calling thread, the report, and errors as Python exceptions.
//!
//! # Semantics
//! [`run`] starts the job on a thread of its own and keeps the calling thread (the one that
//! holds the interpreter's attention, usually Python's main thread) waiting without the GIL.
//! Every [`POLL`] that thread attaches to the interpreter for a moment: it runs Python's
//! signal handlers ([`Python::check_signals`]) and hands the newest progress to the
//! callback. When a handler raises (Ctrl-C raises `KeyboardInterrupt`) or the callback
//! raises, the job is ended with [`spillway::interrupt`]: its blocking calls return, its
//! ranks stop at their next runtime call, its spill files (which have no names) go with it,
//! and the call raises that exception.
//!
//! `interrupt` ends every job of the process: two jobs started at once from two Python
//! threads are both ended by a Ctrl-C.

use std::path::PathBuf;
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use spillway::algorithms::{AlgoError, Progress};
use spillway::{ByteSize, Config, JobError, JobStats, Policy, Rank, ResumePolicy};

/// How often the waiting thread looks at signals and progress.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// The runtime settings a Python `spillway.Config` holds (read by attribute).
#[derive(Debug, Clone, FromPyObject)]
pub(crate) struct PyConfig {
    ranks: u32,
    nodes: u32,
    running: Option<u32>,
    mem_budget: Option<u64>,
    spill_dir: Option<PathBuf>,
    policy: String,
}

impl PyConfig {
    /// The runtime's configuration, as the CLI makes it from the same options: under a memory
    /// budget without `running`, the number of running ranks follows memory.
    pub(crate) fn config(&self) -> PyResult<Config> {
        let policy: Policy = self
            .policy
            .parse()
            .map_err(|e: String| request_error(format!("config.policy: {e}")))?;
        let mut config = Config::new(self.ranks)
            .nodes(self.nodes)
            .policy(policy)
            .resume_policy(ResumePolicy::MostResident);
        config = match self.running {
            Some(n) => config.running(n),
            None => config.dynamic_running(self.mem_budget.is_some()),
        };
        if let Some(bytes) = self.mem_budget {
            config = config.mem_budget(bytes);
        }
        if let Some(dir) = &self.spill_dir {
            config = config.spill_dir(dir);
        }
        config.layout().map_err(job_error)?;
        Ok(config)
    }
}

/// The newest progress of a job (rank 0's), for the waiting thread.
#[derive(Debug, Default)]
pub(crate) struct Reporter {
    latest: Mutex<Option<Progress>>,
}

impl Reporter {
    /// Records `p` if `rank` is the job's first rank (every rank reports the same iterations).
    pub(crate) fn report(&self, rank: &Rank, p: &Progress) {
        if rank.rank() == 0 {
            *self.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(*p);
        }
    }

    fn take(&self) -> Option<Progress> {
        self.latest.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Runs `f` on every rank of a job under `config` with the GIL released, polling signals and
/// handing progress to `progress` (a callable taking `(iteration, max_iterations, delta)`).
///
/// # Errors
/// The exception a signal handler or the callback raised (the job is then interrupted), or
/// the job's error as a `spillway` exception ([`job_error`]).
pub(crate) fn run<R, F>(
    py: Python<'_>,
    config: &Config,
    progress: Option<&Bound<'_, PyAny>>,
    f: F,
) -> PyResult<(Vec<R>, JobStats)>
where
    R: Send,
    F: Fn(&Rank, &Reporter) -> Result<R, AlgoError> + Sync,
{
    let reporter = Reporter::default();
    let progress: Option<Py<PyAny>> = progress.map(|p| p.clone().unbind());
    let (outcome, raised) = py.detach(|| {
        std::thread::scope(|s| {
            let (done_tx, done_rx) = mpsc::channel::<()>();
            let (f, reporter) = (&f, &reporter);
            let job = s.spawn(move || {
                let out = spillway::run_with_stats(config, |rank| f(rank, reporter));
                let _ = done_tx.send(());
                out
            });
            let mut raised: Option<PyErr> = None;
            loop {
                let finished = !matches!(
                    done_rx.recv_timeout(POLL),
                    Err(mpsc::RecvTimeoutError::Timeout)
                );
                if raised.is_none() {
                    raised = Python::attach(|py| poll(py, reporter, progress.as_ref()).err());
                    if raised.is_some() {
                        spillway::interrupt(libc::SIGINT);
                    }
                }
                if finished {
                    break;
                }
            }
            let outcome = job
                .join()
                .unwrap_or_else(|_| Err(JobError::Config("the job's thread panicked".into())));
            (outcome, raised)
        })
    });
    if let Some(e) = raised {
        return Err(e);
    }
    outcome.map_err(job_error)
}

/// Runs the signal handlers and hands the newest progress to the callback.
fn poll(py: Python<'_>, reporter: &Reporter, progress: Option<&Py<PyAny>>) -> PyResult<()> {
    py.check_signals()?;
    if let (Some(cb), Some(p)) = (progress, reporter.take()) {
        cb.call1(py, (p.iteration, p.max_iterations, p.delta))?;
    }
    Ok(())
}

/// Runs `f` with the GIL released, for calls that need no job (compression, prediction).
pub(crate) fn detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    py.detach(f)
}

/// An instance of `spillway.errors.<class>` with `message`.
fn raise(class: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let made = py
            .import("spillway.errors")
            .and_then(|m| m.getattr(class))
            .and_then(|c| c.call1((message.clone(),)));
        match made {
            Ok(value) => PyErr::from_value(value),
            Err(e) => e,
        }
    })
}

/// A wrong request (`spillway.InvalidRequest`, a `ValueError`).
pub(crate) fn request_error(message: impl Into<String>) -> PyErr {
    raise("InvalidRequest", message.into())
}

/// An algorithm's error: bad input is an `InputError` (a `ValueError`), anything else a
/// `JobFailed` (a `RuntimeError`).
pub(crate) fn algo_error(e: &AlgoError) -> PyErr {
    match e {
        AlgoError::Input(_) => raise("InputError", e.to_string()),
        _ if e.is_bad_input() => raise("InvalidRequest", e.to_string()),
        _ => raise("JobFailed", e.to_string()),
    }
}

/// A job's error as the CLI's exit classes: a wrong request (exit 2) is `InvalidRequest` or
/// `InputError`, an interrupted job `KeyboardInterrupt`, anything else `JobFailed`.
pub(crate) fn job_error(e: JobError) -> PyErr {
    if let Some(algo) = e.rank_error::<AlgoError>() {
        return algo_error(algo);
    }
    match &e {
        JobError::Config(_) => raise("InvalidRequest", e.to_string()),
        JobError::Interrupted { .. } => {
            pyo3::exceptions::PyKeyboardInterrupt::new_err(e.to_string())
        }
        _ => raise("JobFailed", e.to_string()),
    }
}

/// The report of a job as a dict: what the CLI prints (time, peak resident, bytes spilled and
/// read back, messages), plus `iteration_times` (seconds, the slowest rank's each).
pub(crate) fn stats<'py>(
    py: Python<'py>,
    stats: &JobStats,
    iterations: usize,
    iteration_times: &[f64],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let m = &stats.memory;
    d.set_item("elapsed", stats.elapsed.as_secs_f64())?;
    d.set_item("ranks", stats.ranks.len())?;
    d.set_item("nodes", stats.nodes)?;
    d.set_item("mem_budget", stats.budget)?;
    d.set_item("peak_rss", stats.peak_rss)?;
    d.set_item("peak_resident", m.peak_resident)?;
    d.set_item("peak_allocated", m.peak_allocated)?;
    d.set_item("bytes_spilled", m.bytes_written)?;
    d.set_item("bytes_read_back", m.bytes_read)?;
    d.set_item("messages_spilled", m.messages_spilled)?;
    d.set_item("message_bytes_spilled", m.message_bytes_spilled)?;
    d.set_item("messages_sent", stats.messages_sent())?;
    d.set_item("bytes_sent", stats.bytes_sent())?;
    d.set_item("iterations", iterations)?;
    d.set_item("iteration_times", iteration_times.to_vec())?;
    if let Some(budget) = stats.budget {
        d.set_item("mem_budget_human", ByteSize(budget).human())?;
    }
    Ok(d)
}

/// The slowest rank's time of each iteration, in seconds.
pub(crate) fn slowest(per_rank: &[Vec<Duration>]) -> Vec<f64> {
    let n = per_rank.iter().map(Vec::len).max().unwrap_or(0);
    (0..n)
        .map(|i| {
            per_rank
                .iter()
                .filter_map(|t| t.get(i))
                .map(Duration::as_secs_f64)
                .fold(0.0, f64::max)
        })
        .collect()
}
