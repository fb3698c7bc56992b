//! Fault tolerance of the MapReduce commands (`run wordcount`, `run cc`, `run pagerank
//! --engine mapreduce`).

use std::time::{Duration, Instant};

use clap::Args;
use spillway::algorithms::AlgoError;
use spillway::checkpoint::Checkpointer;
use spillway::mapreduce::{FaultTolerance, Injection};
use spillway::{Collectives, Comm, Rank};

use crate::commands::checkpoint::restore;
use crate::driver::{Bar, Failure, Job, RankOut, RuntimeArgs};

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
