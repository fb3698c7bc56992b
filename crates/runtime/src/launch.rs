//! Launching a job: [`run`] and [`run_with_stats`], on this process's threads (the local
//! backend, [`execute`]) or on the processes of an MPI job ([`crate::mpi`]).

use crate::config::Config;
use crate::error::JobError;
use crate::execute::execute;
use crate::job::{JobStats, Part};
use crate::rank::Rank;

/// Runs `f` on every rank and returns each rank's result in rank order.
///
/// # Semantics
/// `f` runs once per rank, on the rank's own thread, with at most `running` ranks of a node
/// executing at once. The job ends when every rank has returned.
///
/// # Errors
/// The first rank to return an error or to panic ends the job: the other ranks' blocking calls
/// return [`Error::Aborted`](crate::Error::Aborted) and the job returns
/// [`JobError::RankFailed`] or [`JobError::RankPanicked`] with that rank's id. A deadlock
/// returns [`JobError::Deadlock`]; [`interrupt`](crate::interrupt) returns
/// [`JobError::Interrupted`]. A rank that computes forever without calling the runtime cannot
/// be interrupted. A rank that overflows its stack ([`Config::stack_size`]) aborts the process
/// with a message naming its thread (`rank-N`).
pub fn run<R, E, F>(config: &Config, f: F) -> Result<Vec<R>, JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    run_with_stats(config, f).map(|(r, _)| r)
}

/// [`run`], also returning the job's counters.
///
/// With [`Backend::Mpi`](crate::Backend::Mpi) this process runs only the ranks of its node
/// (the node is its MPI rank) and returns their results, in rank order; see
/// [`JobStats::local_ranks`].
pub fn run_with_stats<R, E, F>(config: &Config, f: F) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match config.backend {
        spillway_transport::Backend::Local => {
            let layout = config.layout()?;
            let part = Part {
                local_nodes: 0..layout.nodes(),
                remote: None,
                link_model: None,
            };
            execute(config, layout, part, f, |_| {})
        }
        spillway_transport::Backend::Mpi => run_mpi(config, f),
        #[allow(unreachable_patterns)]
        other => Err(JobError::Config(format!(
            "backend '{}' is not supported",
            other.name()
        ))),
    }
}

#[cfg(feature = "mpi")]
fn run_mpi<R, E, F>(config: &Config, f: F) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    crate::mpi::run_world(config, f)
}

#[cfg(not(feature = "mpi"))]
fn run_mpi<R, E, F>(_config: &Config, _f: F) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Err(JobError::Config(
        "the mpi backend is not in this build: rebuild with `--features mpi` \
         (needs a system MPI such as libopenmpi-dev, and libclang-dev)"
            .into(),
    ))
}
