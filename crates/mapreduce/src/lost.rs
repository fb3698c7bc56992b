//! Processes really lost (MPI with ULFM) during a fault-tolerant operation: where the
//! survivors stood, and which recovery they all run.
//!
//! A lost process takes the ranks of its node with it, at any moment. The survivors learn of
//! it in whatever collective they wait in ([`Error::ProcessLost`](spillway_runtime::Error)),
//! and not all in the same one: a collective can complete on some members and not on others
//! (its last messages were on their way through the lost process). Each fault-tolerant
//! collective of an operation moves a rank's *position* on (`op * 8 + stage`: the failure
//! detection before the shuffle, the shuffle, the copies to the buddy, and the detection
//! after the reduce, which is position 0 of the next operation). A collective completes on a
//! member only once every member has entered it, so the positions of the survivors differ by
//! one collective at most. The survivors exchange their positions on a communicator without
//! the lost ranks (made without communication) and all choose the same recovery from the
//! lowest and highest position ([`plan`]):
//!
//! * somebody had not finished the buddy copies of operation `K`: everybody goes back to
//!   just before the shuffle of `K` (the send buffer, and the kept buffers and replicas of
//!   operation `K - 1`, are kept until the end of `K` for this) and recovers as from an
//!   injected loss there: the survivors rebuild the lost ranks' input of `K` from what they
//!   sent them in the shuffle of `K - 1` and the replicas, map it, and shuffle again;
//! * everybody had finished the copies and nobody the detection after the reduce: the
//!   survivors reduce what the lost ranks had received in the shuffle of `K` (the kept send
//!   buffers and the replicas of the lost node's messages to itself) into their own output,
//!   and detect again;
//! * somebody had finished the detection after the reduce of `K` (and is in operation
//!   `K + 1`): the others take its result (the operation's totals), end `K`, and everybody
//!   recovers before the shuffle of `K + 1`.
//!
//! What one lost node sent another in the last shuffle is in neither's replicas: losing ranks
//! of two nodes at once is not recoverable. Nor is a loss during a recovery, or a loss while
//! the kept buffers miss a node lost before (until the next shuffle has completed).

use serde::{Deserialize, Serialize};

/// The failure detection before the shuffle completed.
pub(crate) const DETECTED: u64 = 1;
/// The shuffle completed.
pub(crate) const SHUFFLED: u64 = 3;
/// The copies to the buddy completed (the reduce runs, then the detection after it).
pub(crate) const KEPT: u64 = 4;

/// The position of `stage` in operation `op` (from 1). The detection after the reduce of
/// `op` completed is `at(op + 1, 0)`.
pub(crate) fn at(op: u64, stage: u64) -> u64 {
    op * 8 + stage
}

/// What a survivor tells the others after a loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Report {
    /// Its position.
    pub(crate) position: u64,
    /// The totals of the last detection after a reduce it completed (what the next position
    /// 0 stands on).
    pub(crate) totals: Option<Vec<f64>>,
    /// Whether a user function failed on it (a lost rank of its own).
    pub(crate) failed: bool,
}

/// The recovery a survivor runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// Back to just before the shuffle of its current operation.
    BeforeShuffle,
    /// Reduce the lost ranks' share of its current operation, then detect again.
    AfterReduce,
    /// End its current operation with these totals (a survivor completed its last
    /// detection); the next operation recovers before its shuffle.
    Finish(Vec<f64>),
}

/// The recovery for the survivor at position `mine`, given every survivor's report (the same
/// on every survivor).
pub(crate) fn plan(mine: u64, all: &[Report]) -> Result<Plan, String> {
    if all.iter().any(|r| r.failed) {
        return Err("a user function failed on a rank while a process was lost".into());
    }
    let low = all.iter().map(|r| r.position).min().unwrap_or(mine);
    let high = all.iter().map(|r| r.position).max().unwrap_or(mine);
    let (op, stage) = (low / 8, low % 8);
    let inconsistent = || {
        format!(
            "the survivors stood more than one step apart (positions {low} to {high}, this rank \
             {mine})"
        )
    };
    if stage == KEPT {
        if high == low {
            return Ok(Plan::AfterReduce);
        }
        if high != at(op + 1, 0) {
            return Err(inconsistent());
        }
        if mine == low {
            let totals = all
                .iter()
                .find(|r| r.position == high)
                .and_then(|r| r.totals.clone())
                .ok_or_else(|| "no survivor reported the totals it agreed on".to_string())?;
            return Ok(Plan::Finish(totals));
        }
        return Ok(Plan::BeforeShuffle);
    }
    if high > at(op, KEPT) || mine > at(op, KEPT) {
        return Err(inconsistent());
    }
    Ok(Plan::BeforeShuffle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(position: u64) -> Report {
        Report {
            position,
            totals: Some(vec![position as f64]),
            failed: false,
        }
    }

    #[test]
    fn the_lowest_position_decides() {
        // Some in the shuffle of op 2, some in the buddy copies: back before the shuffle.
        let all = [r(at(2, DETECTED)), r(at(2, SHUFFLED))];
        assert_eq!(plan(at(2, SHUFFLED), &all), Ok(Plan::BeforeShuffle));
        assert_eq!(plan(at(2, DETECTED), &all), Ok(Plan::BeforeShuffle));
        // Everybody in the detection after the reduce.
        let all = [r(at(3, KEPT)), r(at(3, KEPT))];
        assert_eq!(plan(at(3, KEPT), &all), Ok(Plan::AfterReduce));
        // One survivor got through it: the others end the operation with its totals.
        let all = [r(at(3, KEPT)), r(at(4, 0))];
        assert_eq!(
            plan(at(3, KEPT), &all),
            Ok(Plan::Finish(vec![at(4, 0) as f64]))
        );
        assert_eq!(plan(at(4, 0), &all), Ok(Plan::BeforeShuffle));
        // The detection before a shuffle.
        let all = [r(at(4, 0)), r(at(4, DETECTED))];
        assert_eq!(plan(at(4, 0), &all), Ok(Plan::BeforeShuffle));
    }

    #[test]
    fn impossible_or_mixed_reports_are_refused() {
        let all = [r(at(2, DETECTED)), r(at(3, 0))];
        assert!(plan(at(3, 0), &all).is_err());
        let mut failed = r(at(2, 0));
        failed.failed = true;
        assert!(plan(at(2, 0), &[failed, r(at(2, 0))]).is_err());
        let mut no_totals = r(at(3, 0));
        no_totals.totals = None;
        assert!(plan(at(2, KEPT), &[r(at(2, KEPT)), no_totals]).is_err());
    }
}
