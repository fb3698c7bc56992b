//! Fault tolerance of the MapReduce commands (`run wordcount`, `run cc`, `run pagerank
//! --engine mapreduce`).

use clap::Args;
use spillway::algorithms::AlgoError;
use spillway::mapreduce::{FaultTolerance, Injection};

use crate::driver::{Failure, RuntimeArgs};

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

    /// Warns (on the reporting process) about injected failures set for operations or nodes
    /// the job never reached.
    pub(crate) fn warn_unreached(&self, ops: usize, nodes: u32, lead: bool) {
        if !lead {
            return;
        }
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
