//! Running the ranks of a job that this process holds: each node's ranks are fibers on its
//! worker threads, while the calling thread serves the transport (the MPI engine's progress
//! loop) or just waits.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use spillway_transport::Layout;

use crate::config::Config;
use crate::error::JobError;
use crate::job::{Job, JobStats, Part, RankStats};
use crate::memory::{MemoryStats, SpillStore};
use crate::rank::Rank;
use crate::sched::{Fiber, FiberYielder};

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Memory mappings a rank's fiber stack needs (the stack and its guard page).
const MAPS_PER_FIBER: u64 = 2;

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Refuses, with an error that says what to change, a job whose rank stacks the system would
/// not map (`vm.max_map_count`).
fn check_map_limit(ranks: u64) -> Result<(), JobError> {
    if let Some(max_maps) = read_number("/proc/sys/vm/max_map_count") {
        let current = std::fs::read_to_string("/proc/self/maps")
            .map(|m| m.lines().count() as u64)
            .unwrap_or(0);
        let needed = current + ranks * MAPS_PER_FIBER + 256;
        if needed > max_maps {
            return Err(JobError::Startup(std::io::Error::other(format!(
                "{ranks} ranks need about {needed} memory mappings for their stacks but the \
                 system allows {max_maps} (vm.max_map_count): use fewer ranks per node (more \
                 --nodes with the MPI backend) or raise the limit (sysctl -w \
                 vm.max_map_count={})",
                needed.next_power_of_two()
            ))));
        }
    }
    Ok(())
}

/// Runs the ranks of `part` in this process: each node's ranks are fibers run by `running`
/// worker threads. `progress` runs on the calling thread meanwhile and must return only when
/// the job has ended everywhere (for the local backend it has nothing to do).
pub(crate) fn execute<R, E, F>(
    config: &Config,
    layout: Layout,
    part: Part,
    f: F,
    progress: impl FnOnce(&Arc<Job>),
) -> Result<(Vec<R>, JobStats), JobError>
where
    F: Fn(&Rank) -> Result<R, E> + Sync,
    R: Send,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let spill = SpillStore::open(config.spill_dir.as_deref()).map_err(|(path, e)| {
        JobError::Startup(std::io::Error::new(
            e.kind(),
            format!("spill directory {}: {e}", path.display()),
        ))
    })?;
    if let Some(budget) = config.mem_budget {
        crate::memory::configure_allocator_for_budget();
        // Cached message buffers count in the resident set: keep few under a budget.
        spillway_transport::set_pool_limit((budget / 16).min(64 << 20) as usize);
    }
    let job = Arc::new(Job::new(config, layout.clone(), Arc::new(spill), part));
    let local = job.local_ranks();
    check_map_limit(local.len() as u64)?;
    let _live = crate::interrupt::register(&job);
    let start = Instant::now();
    let trace_start = config.trace.as_ref().map(|_| crate::trace::begin());
    let slots: Vec<Mutex<Option<(R, RankStats)>>> =
        local.clone().map(|_| Mutex::new(None)).collect();
    let stack_size = config.stack_size;
    std::thread::scope(|s| {
        for (n, node) in job.nodes.iter().enumerate() {
            for w in 0..node.sched.workers() {
                let (job, f, slots) = (&job, &f, &slots);
                let first = local.start;
                let spawned = std::thread::Builder::new()
                    .name(format!(
                        "node-{}-worker-{w}",
                        job.layout.node_of(node.first)
                    ))
                    .spawn_scoped(s, move || {
                        let mut make = |l: usize| -> Result<Fiber, crate::Error> {
                            let r = node.first + l as u32;
                            let slot = &slots[(r - first) as usize];
                            let body = move |y: &FiberYielder| {
                                node.sched.set_yielder(l, y);
                                let rank = Rank::new(Arc::clone(job), r);
                                match catch_unwind(AssertUnwindSafe(|| f(&rank))) {
                                    Ok(Ok(value)) => {
                                        *slot.lock().unwrap_or_else(|e| e.into_inner()) =
                                            Some((value, rank.stats()));
                                    }
                                    Ok(Err(e)) => job.fail(JobError::RankFailed {
                                        rank: r,
                                        error: e.into(),
                                    }),
                                    Err(p) => job.fail(JobError::RankPanicked {
                                        rank: r,
                                        message: panic_message(p.as_ref()),
                                    }),
                                }
                                drop(rank);
                                job.finish(r);
                            };
                            // SAFETY: the fiber borrows the job, the function and the result
                            // slots, all of which outlive this thread scope; the worker runs
                            // every fiber it makes to completion (or drops it) before the
                            // scope ends.
                            unsafe { Fiber::new(r, stack_size, body) }.map_err(|e| {
                                crate::Error::Io(std::io::Error::new(
                                    e.kind(),
                                    format!("cannot make the stack of rank {r}: {e}"),
                                ))
                            })
                        };
                        let on_error = |l: usize, e: crate::Error| {
                            let crate::Error::Io(io) = e else {
                                unreachable!("stacks fail with I/O errors")
                            };
                            job.fail(JobError::Startup(io));
                            job.finish(node.first + l as u32);
                        };
                        node.sched.run_worker(w, &mut make, &on_error);
                    });
                if let Err(e) = spawned {
                    job.fail(JobError::Startup(std::io::Error::new(
                        e.kind(),
                        format!("cannot start worker {w} of node {n}: {e}"),
                    )));
                }
            }
        }
        progress(&job);
    });
    if let (Some(path), Some(t0)) = (&config.trace, trace_start) {
        let ranks: Vec<(u32, u32)> = local.clone().map(|r| (job.layout.node_of(r), r)).collect();
        let path = if config.backend == spillway_transport::Backend::Mpi {
            let mut p = path.clone().into_os_string();
            p.push(format!(".node{}", job.layout.node_of(local.start)));
            std::path::PathBuf::from(p)
        } else {
            path.clone()
        };
        crate::trace::finish(&path, t0, &ranks).map_err(|e| {
            JobError::Trace(std::io::Error::new(
                e.kind(),
                format!("cannot write the trace {}: {e}", path.display()),
            ))
        })?;
    }
    if let Some(failure) = job.take_failure() {
        return Err(failure);
    }
    let mut memory = MemoryStats::default();
    for node in &job.nodes {
        if let Some(e) = node.mem.take_error() {
            return Err(JobError::Storage(e));
        }
        memory.add(&node.mem.stats());
    }
    let mut results = Vec::with_capacity(local.len());
    let lost = job.lost_processes();
    let mut stats = JobStats {
        ranks: Vec::with_capacity(local.len()),
        elapsed: start.elapsed(),
        memory,
        budget: config.mem_budget,
        peak_rss: crate::memory::peak_rss(),
        local_ranks: local,
        nodes: layout.nodes(),
        lost_nodes: lost.as_ref().map(|l| l.nodes.clone()).unwrap_or_default(),
        lead_rank: (0..layout.ranks())
            .find(|r| {
                lost.as_ref()
                    .is_none_or(|l| l.ranks.binary_search(r).is_err())
            })
            .unwrap_or(0),
    };
    for slot in slots {
        let (value, st) = slot
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or_else(|| JobError::Config("a rank produced no result".into()))?;
        results.push(value);
        stats.ranks.push(st);
    }
    Ok((results, stats))
}
