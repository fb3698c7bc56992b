//! The MPI backend: one MPI process per node, the node's ranks as fibers on its worker
//! threads, one progress thread per process (the engine is `spillway_transport::mpi`; see its
//! documentation for the design).
//!
//! This module launches jobs on MPI processes ([`hook`], and `run` with
//! [`Backend::Mpi`](crate::Backend::Mpi)) and combines their counters.

pub use ::mpi as rsmpi;

/// Whether jobs of this process survive lost processes: built against an MPI with ULFM (Open
/// MPI 5) and started with it on (`mpirun --with-ft ulfm`). Without, a lost process ends the
/// job.
pub fn survives_lost_processes() -> bool {
    spillway_transport::mpi::survives_lost_processes()
}

/// Whether this build has ULFM (see [`survives_lost_processes`]).
pub fn built_with_ulfm() -> bool {
    spillway_transport::mpi::built_with_ulfm()
}

use std::sync::Arc;
use std::time::Duration;

use mpi::topology::{Communicator, SimpleCommunicator};

use spillway_transport::mpi as engine;
use spillway_transport::{Layout, Outbox};

use crate::config::Config;
use crate::error::JobError;
use crate::execute::execute;
use crate::job::{JobStats, Part, RankStats};
use crate::rank::Rank;
use crate::MemoryStats;

/// Runs `f` as a job on every process of `MPI_COMM_WORLD`, initialising MPI first if needed
/// (it is then finalised when the process exits).
pub(crate) fn run_world<R, E, F>(config: &Config, f: F) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    engine::ensure_initialized().map_err(|e| JobError::Startup(std::io::Error::other(e)))?;
    hook_with_stats(&SimpleCommunicator::world(), config, f)
}

/// Runs the SPMD function `f` as a spillway job on the processes of `comm`, an existing MPI
/// program's communicator: the interoperability hook of LPF (`lpf_hook`).
///
/// Every process of `comm` must call `hook` collectively with the same configuration. Each
/// process becomes one node (node `i` is the process of rank `i` in `comm`) and runs its block
/// of the job's ranks as threads; the calling thread makes all MPI calls for the job, on a
/// duplicate of `comm`, so the caller's own traffic on `comm` is never disturbed. MPI must
/// have been initialised with at least `MPI_THREAD_FUNNELED`, and with exactly that level
/// `hook` must be called from the main thread; with `MPI_THREAD_SERIALIZED` or more, ranks
/// that wait also make progress themselves (lower latency), and the program must not call MPI
/// from other threads during the hook.
///
/// Returns the results of this process's ranks in rank order.
///
/// ```no_run
/// use mpi::traits::*;
/// use spillway_runtime::{mpi::hook, Backend, Config};
///
/// let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled).unwrap();
/// let world = universe.world();
/// let config = Config::new(8).backend(Backend::Mpi);
/// let ranks = hook(&world, &config, |rank| Ok::<_, spillway_runtime::Error>(rank.rank())).unwrap();
/// println!("process {} ran ranks {ranks:?}", world.rank());
/// ```
///
/// # Errors
/// As [`run`](crate::run); [`JobError::Config`] when MPI is not initialised or its thread
/// level is too low, or `config` asks for a node count other than the size of `comm`.
pub fn hook<C, R, E, F>(comm: &C, config: &Config, f: F) -> Result<Vec<R>, JobError>
where
    C: Communicator,
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    hook_with_stats(comm, config, f).map(|(r, _)| r)
}

/// [`hook`], also returning the job's counters, combined over all processes.
pub fn hook_with_stats<C, R, E, F>(
    comm: &C,
    config: &Config,
    f: F,
) -> Result<(Vec<R>, JobStats), JobError>
where
    C: Communicator,
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let shared = engine::check_threading().map_err(JobError::Config)?;
    let size = comm.size() as u32;
    let me = comm.rank() as u32;
    if config.nodes != 1 && config.nodes != size {
        return Err(JobError::Config(format!(
            "with the mpi backend every MPI process is one node: {size} processes, \
             but {} nodes were asked for",
            config.nodes
        )));
    }
    let config = config.clone().nodes(size);
    let layout = config.layout()?;
    let measure = size > 1 && config.link_model.is_none();
    let (comms, measured) = engine::Comms::start(comm, measure).map_err(JobError::Transport)?;
    if size == 1 {
        let part = Part {
            local_nodes: 0..1,
            remote: None,
            link_model: None,
        };
        return execute(&config, layout, part, f, |_| {});
    }
    let Some(link_model) = config.link_model.or(measured) else {
        return Err(JobError::Transport(
            "the link between processes was not measured".into(),
        ));
    };
    let remote = Arc::new(Outbox::default());
    if shared {
        // Known on every process before any rank runs (the progress thread sets up the
        // engine's driving later).
        remote.allow_exchanges();
    }
    let remote_handle = Arc::clone(&remote);
    let part = Part {
        local_nodes: me..me + 1,
        remote: Some(remote),
        link_model: Some(link_model),
    };
    let outbox = Arc::clone(&remote_handle);
    let mut survivors = None;
    let outcome = execute(&config, layout.clone(), part, f, |job| {
        survivors = Some(engine::run_progress(
            job.clone(),
            outbox,
            comms,
            &layout,
            config.peer_timeout,
            shared,
        ))
    });
    // Every process agreed on success or failure at the end of the progress loop, so either
    // all or none of the survivors take part in combining the counters.
    let (results, mut stats) = outcome?;
    if let Some(survivors) = survivors {
        combine_stats(&survivors, &layout, &mut stats);
    }
    Ok((results, stats))
}

/// Sums the memory counters and gathers the ranks' counters of the surviving processes (the
/// ranks of lost processes keep zero counters). A process lost meanwhile leaves the counters
/// of this process alone.
fn combine_stats(survivors: &engine::Survivors, layout: &Layout, stats: &mut JobStats) {
    let comm = survivors.comm();
    let m = &stats.memory;
    let mine = [
        m.bytes_written,
        m.bytes_read,
        m.loads,
        m.unloads,
        m.overcommits,
        m.messages_spilled,
        m.message_bytes_spilled,
        m.peak_resident,
        m.peak_allocated,
        m.prefetched_bytes,
    ];
    let rss = stats.peak_rss.unwrap_or(0);
    let width = (0..layout.nodes())
        .map(|n| layout.local_size(n))
        .max()
        .unwrap_or(0) as usize;
    let mut rows = vec![0u64; width * 4];
    for (i, r) in stats.ranks.iter().enumerate() {
        rows[i * 4..i * 4 + 4].copy_from_slice(&[
            r.messages_sent,
            r.bytes_sent,
            r.blocks,
            r.blocked.as_nanos() as u64,
        ]);
    }
    let mut sum = [0u64; 10];
    let mut max_rss = 0u64;
    let mut all = vec![0u64; width * 4 * survivors.nodes().len()];
    let ok = engine::all_reduce_sum(comm, &mine, &mut sum)
        && engine::all_reduce_max(comm, &[rss], std::slice::from_mut(&mut max_rss))
        && engine::all_gather(comm, &rows, &mut all);
    if !ok {
        return;
    }
    stats.memory = MemoryStats {
        bytes_written: sum[0],
        bytes_read: sum[1],
        loads: sum[2],
        unloads: sum[3],
        overcommits: sum[4],
        messages_spilled: sum[5],
        message_bytes_spilled: sum[6],
        peak_resident: sum[7],
        peak_allocated: sum[8],
        prefetched_bytes: sum[9],
    };
    stats.peak_rss = (max_rss > 0).then_some(max_rss);
    let mut ranks = vec![RankStats::default(); layout.ranks() as usize];
    for (i, &n) in survivors.nodes().iter().enumerate() {
        let first = layout.first_rank(n) as usize;
        for l in 0..layout.local_size(n) as usize {
            let row = &all[(i * width + l) * 4..][..4];
            ranks[first + l] = RankStats {
                messages_sent: row[0],
                bytes_sent: row[1],
                blocks: row[2],
                blocked: Duration::from_nanos(row[3]),
            };
        }
    }
    stats.ranks = ranks;
}
