//! Fault tolerance of the MapReduce commands (`run wordcount`, `run cc`, `run pagerank
//! --engine mapreduce`).

use std::time::{Duration, Instant};

use clap::Args;
use spillway::algorithms::survive::{again_after_loss, Restart};
use spillway::algorithms::AlgoError;
use spillway::checkpoint::Checkpointer;
use spillway::mapreduce::{FaultTolerance, FtStats, Injection, OpStats, RecoveryStats};
use spillway::{Collectives, Comm, Rank};

use crate::commands::checkpoint::restore;
use crate::driver::{Bar, Failure, Job, RankOut, RuntimeArgs, Timing};

/// Fault tolerance of the MapReduce commands.
#[derive(Args, Debug, Default, Clone)]
pub(crate) struct FtArgs {
    /// Survive lost ranks and nodes without restarting: every operation keeps its send
    /// buffer and copies the part sent within a node to the next node; a lost rank's data
    /// is rebuilt by the survivors, which go on with fewer ranks.
    #[arg(long)]
    pub(crate) fault_tolerance: bool,
    /// Inject a failure (implies --fault-tolerance): `node:N@op:K` loses every rank of
    /// virtual node N, `rank:R@op:K` loses rank R, just before the shuffle of operation K
    /// (operations count from 1 in the order they run). Repeatable.
    #[arg(long, value_name = "SPEC")]
    pub(crate) inject_failure: Vec<Injection>,
}

impl FtArgs {
    /// Whether fault tolerance was asked for.
    pub(crate) fn is_set(&self) -> bool {
        self.fault_tolerance || !self.inject_failure.is_empty()
    }

    /// Checks the injections against the layout.
    pub(crate) fn check(&self, rt: &RuntimeArgs) -> Result<(), Failure> {
        // With MPI the node count is the process count, known once launched.
        let mpi = rt.backend == spillway::Backend::Mpi;
        for i in &self.inject_failure {
            match *i {
                Injection::Node { node, .. } if !mpi && node >= rt.nodes => {
                    return Err(Failure::option(
                        "--inject-failure",
                        i,
                        format!("there are {} node(s)", rt.nodes),
                    ))
                }
                Injection::Rank { rank, .. } if rank >= rt.ranks => {
                    return Err(Failure::option(
                        "--inject-failure",
                        i,
                        format!("there are {} rank(s)", rt.ranks),
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The settings, if fault tolerance was asked for.
    pub(crate) fn settings(&self) -> Option<FaultTolerance> {
        self.is_set().then(|| {
            self.inject_failure
                .iter()
                .fold(FaultTolerance::new(), |ft, &i| ft.inject(i))
        })
    }

    /// Runs the ranks of a MapReduce job ([`Job::spmd`]); the process that reports warns about
    /// injected failures set for operations or nodes the job never reached.
    pub(crate) fn spmd<T: Send>(
        &self,
        job: &Job<'_>,
        iterations: usize,
        label: &str,
        f: impl Fn(&Rank, &Bar) -> Result<Option<RankOut<T>>, AlgoError> + Sync,
    ) -> Result<Option<T>, Failure> {
        let facts = job.spmd(iterations, label, f)?;
        if facts.is_some() {
            self.warn_unreached(job.operations(), job.nodes());
        }
        Ok(facts)
    }

    fn warn_unreached(&self, ops: usize, nodes: u32) {
        for i in &self.inject_failure {
            match *i {
                _ if i.op() > ops as u64 => eprintln!(
                    "warning: --inject-failure {i}: the job ran {ops} operation(s); this failure \
                     did not happen"
                ),
                Injection::Node { node, .. } if node >= nodes => eprintln!(
                    "warning: --inject-failure {i}: the job ran on {nodes} node(s); this failure \
                     did not happen"
                ),
                _ => {}
            }
        }
    }
}

/// A rank's part of a fault-tolerant job: `None` if the rank was lost (it leaves; the
/// survivors go on).
pub(crate) fn unless_lost<T>(r: Result<T, AlgoError>) -> Result<Option<T>, AlgoError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_lost() => Ok(None),
        Err(e) => Err(e),
    }
}

/// What [`run_job`] hands the job's `finish`: the result, the part of the load kept
/// aside, the load time (to the end of the restore), the compute time, the checkpointer
/// (none after a run again) and the runs again after a loss that came after the last
/// operation.
pub(crate) struct Done<'a, R, K> {
    pub(crate) result: &'a R,
    pub(crate) kept: &'a K,
    pub(crate) load: Duration,
    pub(crate) compute: Duration,
    pub(crate) ck: Option<&'a Checkpointer>,
    pub(crate) restarts: &'a [Restart],
}

impl<R, K> Done<'_, R, K> {
    /// The report's timing of the job: `iterations` taking `iteration_times`, its
    /// operations' `stats`, its fault tolerance `ft` with the runs again among the
    /// recoveries (found after the last operation).
    pub(crate) fn timing(
        &self,
        iterations: usize,
        iteration_times: Vec<Duration>,
        stats: &[OpStats],
        ft: Option<&FtStats>,
    ) -> Timing {
        let ft = with_restarts(
            ft,
            self.restarts,
            stats.len() as u64,
            "after the last operation: run again",
        );
        Timing::mapreduce(
            iterations,
            iteration_times,
            self.load,
            self.compute,
            stats,
            ft,
        )
    }
}

/// How [`run_job`] reads a job's input over a communicator: the input and what is kept aside.
pub(crate) type LoadStep<'a, 'r, L, K> = dyn Fn(&Comm<'r>) -> Result<(L, K), AlgoError> + 'a;
/// How [`run_job`] computes a job's result from its input, with the checkpointer.
pub(crate) type ComputeStep<'a, 'r, L, R> =
    dyn Fn(&Comm<'r>, L, Option<&mut Checkpointer>) -> Result<R, AlgoError> + 'a;
/// What [`run_job`] does with the result: the output and the report.
pub(crate) type FinishStep<'a, R, K, T> = dyn FnMut(Done<'_, R, K>) -> Result<T, AlgoError> + 'a;

/// A rank's steps of an iterative MapReduce job (see [`load_and_compute`]) and then
/// `finish` (the output and the report), ended by a barrier of the ranks the job ended on
/// (`comm_of` its result); under MPI with ULFM and fault tolerance (`survivable`), a process
/// lost after the job's last operation makes the survivors run the job again from its
/// input (see [`again_after_loss`]), without checkpoints. `None` if the rank was lost.
pub(crate) fn run_job<'r, L, K, R, T>(
    world: &Comm<'r>,
    survivable: bool,
    ck: Option<Checkpointer>,
    load: &LoadStep<'_, 'r, L, K>,
    compute: &ComputeStep<'_, 'r, L, R>,
    comm_of: fn(&R) -> &Comm<'r>,
    finish: &mut FinishStep<'_, R, K, T>,
) -> Result<Option<T>, AlgoError> {
    // Used by the first run only (checkpoints stop after a loss: the survivors are another
    // layout); the work and `finish` take turns with it.
    let ck = std::cell::RefCell::new(ck);
    let mut first = true;
    again_after_loss(
        world,
        survivable,
        "running the job again",
        &mut |comm| {
            let mut none = None;
            let mut mine = ck.borrow_mut();
            let ck = if std::mem::take(&mut first) {
                &mut *mine
            } else {
                &mut none
            };
            load_and_compute(
                comm,
                ck,
                || load(comm),
                |input, ck| compute(comm, input, ck),
            )
        },
        &|w| w.as_ref().map(|(result, ..)| comm_of(result)),
        &mut |w, restarts| match w {
            None => Ok(None),
            Some((result, kept, load, compute)) => finish(Done {
                result,
                kept,
                load: *load,
                compute: *compute,
                ck: ck.borrow().as_ref(),
                restarts,
            })
            .map(Some),
        },
    )
}

/// The report's fault tolerance with the runs again after a loss (`restarts`) among its
/// recoveries: found after operation `after_op` (the job's last), said as `detected`.
pub(crate) fn with_restarts(
    ft: Option<&FtStats>,
    restarts: &[Restart],
    after_op: u64,
    detected: &'static str,
) -> Option<FtStats> {
    let mut ft = ft.cloned();
    if let Some(ft) = &mut ft {
        ft.recoveries.extend(restarts.iter().map(|r| RecoveryStats {
            op: after_op,
            detected,
            lost_ranks: r.lost_ranks.clone(),
            ranks_after: r.ranks_after as u64,
            total: Duration::from_secs_f64(r.seconds),
            ..Default::default()
        }));
    }
    ft
}

/// A rank's steps of an iterative MapReduce job: `load` reads the input (its result's second
/// part is kept aside), the ranks wait for each other and resume from the newest checkpoint,
/// then `compute` runs the algorithm. Returns its result, the kept part, the load time (to the
/// end of the restore) and the compute time; `None` if the rank was lost.
#[allow(clippy::type_complexity)]
pub(crate) fn load_and_compute<L, K, R>(
    world: &Comm,
    ck: &mut Option<Checkpointer>,
    load: impl FnOnce() -> Result<(L, K), AlgoError>,
    compute: impl FnOnce(L, Option<&mut Checkpointer>) -> Result<R, AlgoError>,
) -> Result<Option<(R, K, Duration, Duration)>, AlgoError> {
    let t0 = Instant::now();
    let (input, kept) = load()?;
    world.barrier()?;
    restore(world, ck.as_mut())?;
    let load = t0.elapsed();
    let t1 = Instant::now();
    let Some(result) = unless_lost(compute(input, ck.as_mut()))? else {
        return Ok(None);
    };
    Ok(Some((result, kept, load, t1.elapsed())))
}
