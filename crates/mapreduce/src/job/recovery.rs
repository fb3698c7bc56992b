//! Failure detection and recovery of a fault-tolerant [`MapReduce`] (the thesis's section
//! 5.2.2): the detection collectives before the shuffle and after the reduce, and the two
//! recoveries that let the survivors go on without restarting (after injected losses, or
//! processes lost for real).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use spillway_comm::{Collectives, Comm, Max, Sum};

use super::group::{merge_runs, reduce_hash, OnHash, Output};
use super::inbox::exchange;
use super::MapReduce;
use crate::data::{Data, Values};
use crate::dataset::decode_records;
use crate::emit::{CombineFn, EmitState, Emitter, Sink};
use crate::error::Error;
use crate::ft::{self, RecoveryStats};
use crate::hash::HashRanges;
use crate::run::{merge, push_entry, Cursor, Run, RunWriter, Spill};
use crate::Recovery;

/// What detection decided.
pub(super) enum Verdict<'r> {
    /// Nobody was lost.
    Fine,
    /// These members (sorted indices) were lost; this rank survives.
    Recover(Vec<usize>),
    /// These members were lost for real (their processes died): the survivors go on with
    /// this communicator.
    Real(Vec<usize>, Comm<'r>),
}

impl<'c, 'r> MapReduce<'c, 'r> {
    /// The failure detection collective: every rank says whether it is lost (`cause`),
    /// and adds its share of the `sums` (returned summed over all ranks).
    /// Lost ranks leave (a split without them) and get [`Error::Lost`]; if the loss cannot
    /// be recovered every rank gets [`Error::Unrecoverable`].
    pub(super) fn detect(
        &mut self,
        op: u64,
        cause: Option<&str>,
        sums: &[f64],
    ) -> Result<(Verdict<'r>, Vec<f64>), Error> {
        let p = self.comm.size();
        let mut flags = vec![0f64; p + sums.len()];
        flags[self.comm.rank()] = f64::from(u8::from(cause.is_some()));
        flags[p..].copy_from_slice(sums);
        let all = self.comm.allreduce(&flags, Sum)?;
        let totals = all[p..].to_vec();
        let lost: Vec<usize> = (0..p).filter(|&i| all[i] != 0.0).collect();
        if lost.is_empty() {
            return Ok((Verdict::Fine, totals));
        }
        let f = self.ft.as_ref().expect("fault tolerance");
        let lost_global = ft::globals(&f.members, &lost);
        if lost.len() == p {
            return Err(Error::Unrecoverable {
                op,
                lost: lost_global,
                reason: "every rank was lost".into(),
            });
        }
        if let Some(reason) = ft::coverage(&f.members, &lost) {
            return Err(Error::Unrecoverable {
                op,
                lost: lost_global,
                reason,
            });
        }
        Ok((Verdict::Recover(lost), totals))
    }

    /// As [`detect`](Self::detect), after the reduce: a lost rank first hands its kept
    /// send buffer to its buddy (its own messages are then not lost with it).
    pub(super) fn detect_after_reduce(
        &mut self,
        op: u64,
        cause: Option<&str>,
        sums: &[f64],
    ) -> Result<(Verdict<'r>, Vec<f64>), Error> {
        let (verdict, totals) = self.detect(op, cause, sums)?;
        if let Verdict::Recover(lost) = &verdict {
            let f = self.ft.as_mut().expect("fault tolerance");
            let me = self.comm.rank();
            let leaving = lost.binary_search(&me).is_ok();
            let mut bytes = Vec::new();
            if leaving {
                for run in &f.kept {
                    let (b, _) = run.read_block(0, run.len, usize::MAX, &f.spill)?;
                    bytes.extend_from_slice(&b);
                }
            }
            let to = if leaving { f.members.buddy(me) } else { None };
            let got = ft::to_buddy(&self.comm, to, &bytes)?;
            let bounded = self.memory != usize::MAX;
            for (_, b) in got {
                if !b.is_empty() {
                    let run = f.stash(ft::bytes_run(b), &f.spill, bounded)?;
                    f.kept.push(run);
                }
            }
            if leaving {
                return self.leave(op, cause.unwrap_or("lost"));
            }
        }
        Ok((verdict, totals))
    }

    /// Lost ranks take part in the split that removes them, then leave.
    fn leave<T>(&mut self, op: u64, cause: &str) -> Result<T, Error> {
        let _ = self.comm.split(None, 0)?;
        let rank = self.comm.runtime().rank();
        Err(Error::Lost {
            rank,
            op,
            cause: cause.to_string(),
        })
    }

    /// The survivors' side of the shrink: the communicator without `lost` (`real`, when
    /// the survivors made it after a real loss; otherwise a split the lost ranks join).
    fn shrink(&mut self, lost: &[usize], real: Option<Comm<'r>>) -> Result<Comm<'r>, Error> {
        if let Some(new) = real {
            return Ok(new);
        }
        let me = self.comm.rank();
        debug_assert!(lost.binary_search(&me).is_err());
        let new = self
            .comm
            .split(Some(0), me as i64)?
            .expect("a survivor is in the new communicator");
        Ok(new)
    }

    /// Sends every kept message addressed to a lost rank to the survivors (the lost
    /// hashes split evenly over them) and calls `on_hash` for every hash received, in
    /// order. `held` adds the replicas of lost wards' node-local messages.
    #[allow(clippy::too_many_arguments)]
    fn recover_messages(
        &mut self,
        new: &Comm<'r>,
        lost: &[usize],
        held: bool,
        spill: &Spill,
        rs: &mut RecoveryStats,
        on_hash: &mut OnHash<'_>,
    ) -> Result<(), Error> {
        let t = Instant::now();
        let f = self.ft.as_ref().expect("fault tolerance");
        let split = f.table.split_lost(lost);
        let run = {
            let mut w = RunWriter::new(spill, &split);
            let mut cursors = Vec::new();
            for r in &f.kept {
                cursors.push(Cursor::new(vec![r.piece(0, r.len)], &f.spill)?);
            }
            if held {
                for (ward, r) in &f.held {
                    if lost.binary_search(ward).is_ok() {
                        cursors.push(Cursor::new(vec![r.piece(0, r.len)], &f.spill)?);
                    }
                }
            }
            let table = &f.table;
            merge(&mut cursors, spill, |h, bodies| {
                if lost.binary_search(&table.owner(h)).is_ok() {
                    for b in bodies {
                        w.entry(h, |x| x.extend_from_slice(b))?;
                    }
                }
                Ok(())
            })?;
            drop(cursors);
            w.finish()?
        };
        rs.redistribute += t.elapsed();
        let t = Instant::now();
        let (inbox, moved, _) = exchange(new, &run, &run.offsets, spill, self.memory)?;
        run.release(spill);
        rs.bytes_moved += moved;
        rs.shuffle += t.elapsed();
        let t = Instant::now();
        {
            let mut cursors = inbox.cursors(spill)?;
            merge(&mut cursors, spill, on_hash)?;
        }
        inbox.release(spill);
        rs.reduce += t.elapsed();
        Ok(())
    }

    /// Recovery before the shuffle of operation `op` (thesis algorithms 19-20): rebuilds
    /// the lost ranks' input, maps it, and returns this rank's send buffer merged with
    /// that map output, partitioned for the survivors.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn recover_before_shuffle<IK: Data, IV: Data, K: Data, V: Data, M>(
        &mut self,
        op: u64,
        lost: &[usize],
        send: Option<Run>,
        rec: &Recovery<IK, IV>,
        map: &mut M,
        combine: Option<CombineFn<'_, V>>,
        spill: &Spill,
        flush_at: usize,
        real: Option<Comm<'r>>,
    ) -> Result<Run, Error>
    where
        M: FnMut(IK, IV, &mut Emitter<'_, K, V>),
    {
        let t0 = Instant::now();
        let f = self.ft.as_ref().expect("fault tolerance");
        let lost_global = ft::globals(&f.members, lost);
        let kept_op = f.prev.as_ref().map(|(k, _)| *k);
        let release = |send: Option<Run>| {
            if let Some(s) = send {
                s.release(spill);
            }
        };
        if let Some(reason) = ft::unrecoverable(rec, f.id, kept_op) {
            release(send);
            return Err(Error::Unrecoverable {
                op,
                lost: lost_global,
                reason,
            });
        }
        let mut nodes: Vec<u32> = lost.iter().map(|&i| f.members.node[i]).collect();
        nodes.sort_unstable();
        nodes.dedup();
        if nodes.len() > 1 {
            release(send);
            return Err(Error::Unrecoverable {
                op,
                lost: lost_global,
                reason: format!(
                    "ranks of nodes {nodes:?} were lost before the same shuffle: what one of \
                     them sent another in the last shuffle is in neither's replicas"
                ),
            });
        }
        if lost.binary_search(&self.comm.rank()).is_ok() {
            release(send);
            return self.leave(op, "lost before the shuffle");
        }
        let send = send.expect("a survivor has its send buffer");
        let mut rs = RecoveryStats {
            op,
            detected: "before shuffle",
            lost_ranks: lost_global.clone(),
            ..RecoveryStats::default()
        };
        let old_size = self.comm.size();
        let new = self.shrink(lost, real)?;
        let new_ranges = HashRanges::even(new.size());
        let mut runs = vec![send];
        let failed = {
            let mut sink: Sink<'_, '_, K, V> =
                Sink::new(EmitState::new(spill, &new_ranges, flush_at), combine);
            let mut map_time = Duration::ZERO;
            let mut remap_time = Duration::ZERO;
            let (_, mut prev) = self
                .ft
                .as_mut()
                .expect("fault tolerance")
                .prev
                .take()
                .unwrap_or((0, Box::new(|_: &[&[u8]], _: &mut Vec<u8>| Ok(()))));
            let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), Error> {
                if ft::uses_output(rec) {
                    let mut raw = Vec::new();
                    self.recover_messages(&new, lost, true, spill, &mut rs, &mut |_, bodies| {
                        raw.clear();
                        prev(bodies, &mut raw)?;
                        let t = Instant::now();
                        decode_records::<IK, IV>(&raw, &mut |k, v| map(k, v, &mut sink.emitter));
                        sink.maybe_flush();
                        remap_time += t.elapsed();
                        Ok(())
                    })?;
                }
                let t = Instant::now();
                ft::rebuild_input(
                    rec,
                    &lost_global,
                    lost,
                    old_size,
                    new.rank(),
                    new.size(),
                    &mut |k, v| {
                        map(k, v, &mut sink.emitter);
                        sink.maybe_flush();
                    },
                )?;
                map_time += t.elapsed();
                Ok(())
            }));
            rs.reduce = rs.reduce.saturating_sub(remap_time);
            rs.map = map_time + remap_time;
            match outcome {
                Ok(r) => {
                    r?;
                    runs.extend(sink.finish()?.runs);
                    false
                }
                Err(_) => true,
            }
        };
        recovered_everywhere(&new, failed, op, &lost_global)?;
        let t = Instant::now();
        let send = merge_runs::<K, V>(runs, spill, &new_ranges, combine, true)?;
        self.take_over(new, lost);
        let f = self.ft.as_mut().expect("fault tolerance");
        // The kept buffers are replaced after this operation's shuffle.
        f.release_kept();
        f.table = self.ranges.clone();
        self.end_recovery(rs, &lost_global, t, t0)?;
        Ok(send)
    }

    /// The survivors go on with `new` (the communicator without the members `lost`): even
    /// hash ranges over it, node communicators to be made again.
    fn take_over(&mut self, new: Comm<'r>, lost: &[usize]) {
        self.comm = new;
        self.ranges = HashRanges::even(self.comm.size());
        self.node = None;
        let f = self.ft.as_mut().expect("fault tolerance");
        f.members = f.members.without(lost);
    }

    /// Ends a recovery: replicated datasets adopt the lost parts and are replicated again;
    /// the recovery's statistics (its merge phase started at `merge`) are recorded.
    fn end_recovery(
        &mut self,
        mut rs: RecoveryStats,
        lost_global: &[u32],
        merge: Instant,
        start: Instant,
    ) -> Result<(), Error> {
        let f = self.ft.as_mut().expect("fault tolerance");
        let sent = ft::adopt_and_replicate(&self.comm, &f.members, &mut f.stores, lost_global)?;
        f.stats.bytes_replicated += sent;
        rs.merge = merge.elapsed();
        rs.ranks_after = self.comm.size() as u64;
        rs.total = start.elapsed();
        f.stats.recoveries.push(rs);
        Ok(())
    }

    /// Recovery after the reduce of operation `op`: the survivors reduce what was sent to
    /// the lost ranks (whose kept buffers their buddies now hold) into their outputs, then
    /// replicate their kept buffers again for the new owners.
    pub(super) fn recover_after_reduce<K: Data, V: Data, K2: Data, V2: Data, R>(
        &mut self,
        op: u64,
        lost: &[usize],
        reduce: &mut R,
        output: &mut Output<K2, V2>,
        spill: &Spill,
        real: Option<Comm<'r>>,
    ) -> Result<(), Error>
    where
        R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>),
    {
        let t0 = Instant::now();
        let f = self.ft.as_ref().expect("fault tolerance");
        let lost_global = ft::globals(&f.members, lost);
        let mut rs = RecoveryStats {
            op,
            detected: "after reduce",
            lost_ranks: lost_global.clone(),
            ..RecoveryStats::default()
        };
        // A rank lost for real did not hand its kept buffer over: the replicas of its node's
        // messages to itself stand in for it.
        let held = real.is_some();
        let new = self.shrink(lost, real)?;
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), Error> {
            self.recover_messages(&new, lost, held, spill, &mut rs, &mut |_, bodies| {
                reduce_hash(bodies, reduce, output)
            })
        }));
        let failed = match outcome {
            Ok(r) => {
                r?;
                false
            }
            Err(_) => true,
        };
        recovered_everywhere(&new, failed, op, &lost_global)?;
        let t = Instant::now();
        self.take_over(new, lost);
        let f = self.ft.as_mut().expect("fault tolerance");
        if held {
            // What the lost ranks sent in this shuffle is gone with them.
            f.kept_partial = Some(lost_global.clone());
        }
        f.table = f.table.after_loss(lost);
        // Replicas again: the owners and the buddies changed.
        for (_, r) in f.held.drain(..) {
            r.release(&f.spill);
        }
        let me = self.comm.rank();
        let members = &f.members;
        let table = &f.table;
        let mut local = Vec::new();
        {
            let mut cursors = f
                .kept
                .iter()
                .map(|r| Cursor::new(vec![r.piece(0, r.len)], &f.spill))
                .collect::<Result<Vec<_>, _>>()?;
            merge(&mut cursors, &f.spill, |h, bodies| {
                if members.same_node(me, table.owner(h)) {
                    for b in bodies {
                        push_entry(&mut local, h, b);
                    }
                }
                Ok(())
            })?;
        }
        let to = members.buddy(me);
        let got = ft::to_buddy(&self.comm, to, &local)?;
        if to.is_some() {
            f.stats.bytes_replicated += local.len() as u64;
        }
        let bounded = self.memory != usize::MAX;
        f.held = got
            .into_iter()
            .map(|(src, b)| Ok((src, f.stash(ft::bytes_run(b), &f.spill, bounded)?)))
            .collect::<Result<_, Error>>()?;
        self.end_recovery(rs, &lost_global, t, t0)
    }
}

/// Whether every survivor got through the recovery (a collective over `new`): a failure
/// during a recovery cannot be recovered, and ends the job on every rank.
fn recovered_everywhere(new: &Comm, failed: bool, op: u64, lost: &[u32]) -> Result<(), Error> {
    if new.allreduce(&[u8::from(failed)], Max)?[0] != 0 {
        return Err(Error::Unrecoverable {
            op,
            lost: lost.to_vec(),
            reason: "a rank failed during the recovery".into(),
        });
    }
    Ok(())
}
