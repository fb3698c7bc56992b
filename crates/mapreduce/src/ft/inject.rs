//! What fault tolerance is asked for: the settings, and the failures injected to test it
//! (a rank or node lost at an operation, a process killed at a stage of one).

use std::fmt;
use std::str::FromStr;

/// Fault-tolerance settings of a [`MapReduce`](crate::MapReduce) object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultTolerance {
    pub(crate) inject: Vec<Injection>,
}

impl FaultTolerance {
    /// Fault tolerance with no injected failures.
    pub fn new() -> FaultTolerance {
        FaultTolerance::default()
    }

    /// Adds an injected failure.
    pub fn inject(mut self, failure: Injection) -> FaultTolerance {
        self.inject.push(failure);
        self
    }

    /// The injected failures.
    pub fn injections(&self) -> &[Injection] {
        &self.inject
    }
}

/// A failure to inject (for tests and demonstrations): the ranks are lost just before the
/// shuffle of operation `op` (operations count from 1 in the order they run on a
/// [`MapReduce`](crate::MapReduce) object; nodes and ranks from 0, in the job's original
/// numbering). A lost rank never comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injection {
    /// Every rank of virtual node `node`.
    Node {
        /// The node.
        node: u32,
        /// The operation.
        op: u64,
    },
    /// One rank.
    Rank {
        /// The rank.
        rank: u32,
        /// The operation.
        op: u64,
    },
    /// The MPI process of node `node` kills itself (SIGKILL) at `at` of operation `op`: a
    /// real loss, which the survivors recover from only with an MPI that has ULFM (see
    /// [`Rank::survives_lost_processes`](spillway_runtime::Rank::survives_lost_processes)).
    Process {
        /// The node (MPI process).
        node: u32,
        /// The operation.
        op: u64,
        /// Where in the operation.
        at: KillAt,
    },
}

/// Where in an operation an injected process kill happens ([`Injection::Process`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillAt {
    /// After the map, before the failure detection that precedes the shuffle.
    Map,
    /// After that detection, before the shuffle.
    Shuffle,
    /// After the shuffle, before the send buffer's replicas go to the buddy.
    Keep,
    /// After the replicas, before the reduce (the others find out after theirs).
    Reduce,
}

impl KillAt {
    fn name(self) -> &'static str {
        match self {
            KillAt::Map => "map",
            KillAt::Shuffle => "shuffle",
            KillAt::Keep => "keep",
            KillAt::Reduce => "reduce",
        }
    }
}

impl Injection {
    /// Whether the failure hits the rank `rank` of node `node` at operation `op` (a loss
    /// detected before the shuffle; process kills are not: see [`kills`](Self::kills)).
    pub fn hits(&self, rank: u32, node: u32, op: u64) -> bool {
        match *self {
            Injection::Node { node: n, op: k } => n == node && k == op,
            Injection::Rank { rank: r, op: k } => r == rank && k == op,
            Injection::Process { .. } => false,
        }
    }

    /// Whether the process of node `node` is to kill itself at `at` of operation `op`.
    pub fn kills(&self, node: u32, op: u64, at: KillAt) -> bool {
        matches!(*self, Injection::Process { node: n, op: k, at: a } if n == node && k == op && a == at)
    }

    /// The operation it happens at.
    pub fn op(&self) -> u64 {
        match *self {
            Injection::Node { op, .. }
            | Injection::Rank { op, .. }
            | Injection::Process { op, .. } => op,
        }
    }
}

impl fmt::Display for Injection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Injection::Node { node, op } => write!(f, "node:{node}@op:{op}"),
            Injection::Rank { rank, op } => write!(f, "rank:{rank}@op:{op}"),
            Injection::Process {
                node,
                op,
                at: KillAt::Map,
            } => write!(f, "process:{node}@op:{op}"),
            Injection::Process { node, op, at } => {
                write!(f, "process:{node}@op:{op}:{}", at.name())
            }
        }
    }
}

impl FromStr for Injection {
    type Err = String;

    /// Parses `node:N@op:K`, `rank:R@op:K` or `process:N@op:K[:map|shuffle|keep|reduce]`
    /// (`K >= 1`).
    fn from_str(s: &str) -> Result<Injection, String> {
        let bad = || {
            format!(
                "`{s}`: expected node:N@op:K, rank:R@op:K or \
                 process:N@op:K[:map|shuffle|keep|reduce] (K from 1)"
            )
        };
        let (what, op) = s.split_once('@').ok_or_else(bad)?;
        let rest = op.strip_prefix("op:").ok_or_else(bad)?;
        let (op, at) = match rest.split_once(':') {
            Some((k, at)) => (k, Some(at)),
            None => (rest, None),
        };
        let op: u64 = op.parse().ok().filter(|&k| k >= 1).ok_or_else(bad)?;
        let at = match at {
            None => None,
            Some(name) => Some(
                [KillAt::Map, KillAt::Shuffle, KillAt::Keep, KillAt::Reduce]
                    .into_iter()
                    .find(|a| a.name() == name)
                    .ok_or_else(bad)?,
            ),
        };
        if let Some(n) = what.strip_prefix("process:") {
            return Ok(Injection::Process {
                node: n.parse().map_err(|_| bad())?,
                op,
                at: at.unwrap_or(KillAt::Map),
            });
        }
        if at.is_some() {
            return Err(bad());
        }
        if let Some(n) = what.strip_prefix("node:") {
            Ok(Injection::Node {
                node: n.parse().map_err(|_| bad())?,
                op,
            })
        } else if let Some(r) = what.strip_prefix("rank:") {
            Ok(Injection::Rank {
                rank: r.parse().map_err(|_| bad())?,
                op,
            })
        } else {
            Err(bad())
        }
    }
}
