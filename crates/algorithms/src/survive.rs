//! Surviving processes lost for real (MPI with ULFM). Public: [`again_after_loss`], which
//! runs a MapReduce job again from its input on the survivors when a process is lost after
//! its last operation (the operations recover themselves, their results' parts are not
//! replicated). Within the crate, what the direct engines share: the survivors'
//! communicator, the replica buddy of a rank, and the exchange after a loss.
//!
//! An iteration of a direct engine ends in an all-reduce; a process lost in it leaves some
//! survivors past the iteration and others not (its last messages were on their way through
//! the lost process). Every survivor reports the iterations it completed; they differ by
//! one at most (an all-reduce completes only once every rank has entered it), and every
//! engine keeps what it needs of the two last iterations to go on from either.

use std::time::Instant;

use spillway_comm::{Collectives, Comm};

use crate::error::AlgoError;

/// A job run again after processes were lost once its last operation had ended (see
/// [`again_after_loss`]).
#[derive(Debug, Clone)]
pub struct Restart {
    /// The ranks lost (original numbering), all so far.
    pub lost_ranks: Vec<u32>,
    /// Ranks left.
    pub ranks_after: usize,
    /// From the survivors' regrouping to the end of the work again.
    pub seconds: f64,
}

/// What [`again_after_loss`] does with a job's result `W`: its output and report, given the
/// runs again so far.
pub type AfterWork<'a, W, T> = dyn FnMut(&W, &[Restart]) -> Result<T, AlgoError> + 'a;

/// Runs `work` (a fault-tolerant MapReduce job: its operations recover from lost processes
/// themselves) and then `finish` on its result (the output and the report, with the
/// restarts so far), and ends with a barrier of the ranks the work ended on (`end` of its
/// result; `None` for a rank that left the job): the run is over once every rank got
/// there. Under MPI with ULFM (`survivable`), a process lost after the work's last
/// operation, while `finish` runs or in the barrier, makes the survivors regroup, say so on
/// the first survivor's stderr (`what`: what they do again, e.g. "counting the words
/// again"), and run `work` and `finish` again on themselves: the results' parts are not
/// replicated once an operation has ended, so the work starts again from its input (the
/// job's time again). A loss within `work` is not run again here: its operations recover
/// from it or end with their error. `finish` runs on the ranks still in the job and may
/// communicate; it must be safe to run again from its start (an output staged again
/// replaces the first).
/// The barrier makes a loss that one rank saw in `finish`'s last collective, after others
/// had completed it, fail on all of them (instead of those having returned while the first
/// waits for them).
///
/// # Errors
/// As `work` and `finish`; a loss during the regrouping that leaves no survivor
/// communicator ends the job.
pub fn again_after_loss<'r, W, T>(
    comm: &Comm<'r>,
    survivable: bool,
    what: &str,
    work: &mut dyn FnMut(&Comm<'r>) -> Result<W, AlgoError>,
    end: &dyn Fn(&W) -> Option<&Comm<'r>>,
    finish: &mut AfterWork<'_, W, T>,
) -> Result<T, AlgoError> {
    let mut comm = comm.clone();
    let mut restarts: Vec<Restart> = Vec::new();
    let mut since: Option<(Instant, Vec<u32>)> = None;
    loop {
        // A loss in the work itself is the work's to recover (its operations) or report:
        // only one after it (in `finish` or the barrier) is run again here.
        let w = work(&comm)?;
        let outcome = (|| -> Result<T, AlgoError> {
            if let Some((t, lost_ranks)) = since.take() {
                restarts.push(Restart {
                    lost_ranks,
                    ranks_after: comm.size(),
                    seconds: t.elapsed().as_secs_f64(),
                });
            }
            let done = finish(&w, &restarts)?;
            if let Some(end) = end(&w) {
                end.barrier()?;
            }
            Ok(done)
        })();
        match outcome {
            Err(e) if survivable && e.is_process_lost() => {
                let t = since.take().map_or_else(Instant::now, |(t, _)| t);
                let (new, _, lost) = regroup(&comm, &[0.0])?;
                if new.rank() == 0 {
                    eprintln!(
                        "spillway: {lost}; the {} surviving processes went on ({what}: the loss \
                         came after the last operation)",
                        new.runtime().nodes() as usize - lost.nodes.len()
                    );
                }
                comm = new;
                since = Some((t, lost.ranks.clone()));
            }
            other => return other,
        }
    }
}

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
