//! What the direct engines share to survive processes lost for real (MPI with ULFM): the
//! survivors' communicator, the replica buddy of a rank, and the exchange after a loss.
//!
//! An iteration of a direct engine ends in an all-reduce; a process lost in it leaves some
//! survivors past the iteration and others not (its last messages were on their way through
//! the lost process). Every survivor reports the iterations it completed; they differ by
//! one at most (an all-reduce completes only once every rank has entered it), and every
//! engine keeps what it needs of the two last iterations to go on from either.

use spillway_comm::{Collectives, Comm};

use crate::error::AlgoError;

impl AlgoError {
    /// Whether a process of the job was lost for real (MPI with ULFM): see
    /// [`spillway_runtime::Error::ProcessLost`].
    pub fn is_process_lost(&self) -> bool {
        match self {
            AlgoError::Comm(spillway_comm::Error::ProcessLost(_)) => true,
            AlgoError::MapReduce(e) => e.is_process_lost(),
            _ => false,
        }
    }
}

/// After a loss: acknowledges it (blocking calls work again) and exchanges `report` (the
/// same length on every survivor) with the other survivors on a communicator without the
/// lost ranks (made without communication); another loss during the exchange is included
/// and the exchange repeated. Returns the survivors' communicator, every survivor's report
/// in its rank order (one after the other), and the lost processes so far.
pub(crate) fn regroup<'r>(
    comm: &Comm<'r>,
    report: &[f64],
) -> Result<(Comm<'r>, Vec<f64>, spillway_runtime::LostProcesses), AlgoError> {
    let rank = comm.runtime();
    loop {
        let Some(lost) = rank.acknowledge_loss() else {
            return Err(AlgoError::Comm(spillway_comm::Error::Aborted));
        };
        let new = comm
            .without(&lost.ranks)
            .ok_or(AlgoError::Comm(spillway_comm::Error::Aborted))?;
        match new.allgather(report) {
            Ok(all) => return Ok((new, all, lost)),
            Err(spillway_comm::Error::ProcessLost(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// The error of a loss the engine cannot recover from.
pub(crate) fn unrecoverable(lost: &spillway_runtime::LostProcesses, why: &str) -> AlgoError {
    AlgoError::Unrecoverable(format!(
        "cannot recover from lost processes: {why} ({lost}; with the spillway CLI, a job saved \
         with --checkpoint-dir resumes with --resume)"
    ))
}

/// The member of `comm` that holds member `r`'s replicas: the one with the same index among
/// its node's members on the next node that has members; with one node, the next member on
/// it; `None` if `r` is alone.
pub(crate) fn buddy(comm: &Comm, r: usize) -> Option<usize> {
    let layout = comm.runtime().layout();
    let node = |m: usize| layout.node_of(comm.global_rank(m).expect("a member"));
    let mut nodes: Vec<u32> = (0..comm.size()).map(node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let on = |n: u32| -> Vec<usize> { (0..comm.size()).filter(|&m| node(m) == n).collect() };
    let mine = node(r);
    let here = on(mine);
    let local = here
        .iter()
        .position(|&m| m == r)
        .expect("a member of its node");
    if nodes.len() == 1 {
        return (here.len() > 1).then(|| here[(local + 1) % here.len()]);
    }
    let k = nodes.iter().position(|&n| n == mine).expect("its node");
    let next = on(nodes[(k + 1) % nodes.len()]);
    Some(next[local % next.len()])
}

/// The members whose replicas member `r` holds.
pub(crate) fn wards(comm: &Comm, r: usize) -> Vec<usize> {
    (0..comm.size())
        .filter(|&m| m != r && buddy(comm, m) == Some(r))
        .collect()
}
