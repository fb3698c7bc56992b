//! Processes lost for real (MPI with ULFM): an injected kill, the survivors' agreement on
//! where to go on from ([`crate::lost`]), and going back to just before the shuffle.

use spillway_comm::{Collectives, Comm};

use super::MapReduce;
use crate::data::Data;
use crate::emit::{CombineFn, Emitter};
use crate::error::Error;
use crate::ft::{self, KillAt};
use crate::lost::{self, Plan, Report};
use crate::run::{Run, Spill};
use crate::Recovery;

impl<'c, 'r> MapReduce<'c, 'r> {
    /// An injected process kill at `at` of operation `op` on this rank's node: the process
    /// dies here (SIGKILL), as when its machine is lost.
    pub(super) fn maybe_kill(&self, op: u64, at: KillAt) {
        let Some(f) = &self.ft else {
            return;
        };
        let node = self.comm.runtime().node();
        if f.inject.iter().any(|i| i.kills(node, op, at)) {
            // SAFETY: sends SIGKILL to this process (no memory is touched).
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }

    /// A real loss found at `stage` of operation `op` after the detection before the
    /// shuffle: the survivors agree on the recovery, which here can only be to go back
    /// before the shuffle. Returns the send buffer for the shuffle on the survivors.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn back_before_shuffle<IK: Data, IV: Data, K: Data, V: Data, M>(
        &mut self,
        op: u64,
        stage: u64,
        send: Run,
        rec: &Recovery<IK, IV>,
        map: &mut M,
        combine: Option<CombineFn<'_, V>>,
        spill: &Spill,
        flush_at: usize,
    ) -> Result<Run, Error>
    where
        M: FnMut(IK, IV, &mut Emitter<'_, K, V>),
    {
        let (plan, lost, new) = self.real_loss(op, stage, false)?;
        if plan != Plan::BeforeShuffle {
            send.release(spill);
            return Err(Error::Unrecoverable {
                op,
                lost: Vec::new(),
                reason: format!("the survivors chose {plan:?} in the middle of the shuffle"),
            });
        }
        let send = self.recover_before_shuffle(
            op,
            &lost,
            Some(send),
            rec,
            map,
            combine,
            spill,
            flush_at,
            Some(new),
        )?;
        self.ft.as_mut().expect("fault tolerance").pos = lost::at(op, lost::DETECTED);
        Ok(send)
    }

    /// Back to before the shuffle after the send buffer was kept: it is the send buffer
    /// again, and the generation before it the current one.
    pub(super) fn roll_back(&mut self) -> Run {
        let f = self.ft.as_mut().expect("fault tolerance");
        let send = f.kept.pop().expect("the kept send buffer");
        debug_assert!(f.kept.is_empty());
        for (_, r) in f.held.drain(..) {
            r.release(&f.spill);
        }
        let g = f.prior.take().expect("the generation before");
        f.kept = g.kept;
        f.held = g.held;
        f.table = g.table;
        send
    }

    /// A process was lost for real (MPI with ULFM) while this rank stood at `stage` of
    /// operation `op`: the survivors tell each other where they stood, on a communicator
    /// without the lost ranks, and all choose the same recovery (see [`crate::lost`]).
    /// Returns it, the lost members (indices of the current communicator) and the survivors'
    /// communicator.
    pub(super) fn real_loss(
        &mut self,
        op: u64,
        stage: u64,
        failed: bool,
    ) -> Result<(Plan, Vec<usize>, Comm<'r>), Error> {
        let rank = self.comm.runtime();
        let position = lost::at(op, stage);
        loop {
            let Some(lostp) = rank.acknowledge_loss() else {
                return Err(Error::Unrecoverable {
                    op,
                    lost: Vec::new(),
                    reason: "a blocking call reported a lost process that the runtime does not \
                             know"
                        .into(),
                });
            };
            let f = self.ft.as_ref().expect("fault tolerance");
            let lost: Vec<usize> = (0..f.members.global.len())
                .filter(|&i| lostp.ranks.binary_search(&f.members.global[i]).is_ok())
                .collect();
            let lost_global = ft::globals(&f.members, &lost);
            let unrecoverable = |reason: String| Error::Unrecoverable {
                op,
                lost: lost_global.clone(),
                reason: format!(
                    "{reason} ({lostp}; with the spillway CLI, a job saved with \
                                 --checkpoint-dir resumes with --resume)"
                ),
            };
            if !f.survivable {
                return Err(unrecoverable(
                    "processes were lost but this job does not keep what a recovery needs".into(),
                ));
            }
            if f.recovering {
                return Err(unrecoverable(
                    "a process was lost during the recovery from an earlier loss".into(),
                ));
            }
            if let Some(before) = &f.kept_partial {
                return Err(unrecoverable(format!(
                    "a process was lost before the shuffle after the loss of rank(s) {before:?} \
                     had completed: the kept buffers miss what those ranks sent"
                )));
            }
            if lost.is_empty() {
                return Err(unrecoverable(
                    "the lost processes held none of this operation's ranks".into(),
                ));
            }
            if lost.len() == f.members.global.len() {
                return Err(unrecoverable("every rank was lost".into()));
            }
            let mut nodes: Vec<u32> = lost.iter().map(|&i| f.members.node[i]).collect();
            nodes.dedup();
            if nodes.len() > 1 {
                return Err(unrecoverable(format!(
                    "ranks of nodes {nodes:?} were lost in the same operation: what one of them \
                     sent another in the last shuffle is in neither's replicas"
                )));
            }
            if let Some(reason) = ft::coverage(&f.members, &lost) {
                return Err(unrecoverable(reason));
            }
            let new = self
                .comm
                .without(&lostp.ranks)
                .expect("a survivor is in the survivors' communicator");
            let report = Report {
                position,
                totals: f.last_totals.clone(),
                failed,
            };
            match new.allgather_obj(&report) {
                Ok(all) => {
                    let plan = lost::plan(position, &all).map_err(unrecoverable)?;
                    self.ft.as_mut().expect("fault tolerance").recovering = true;
                    return Ok((plan, lost, new));
                }
                // Another process was lost meanwhile: tell each other again, without it too.
                Err(spillway_comm::Error::ProcessLost(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
