//! One operation from start to end: map (with combine) into a sorted send buffer, failure
//! detection before the shuffle, node aggregation, the all-to-all, the reduce, the
//! operation's totals, and failure detection after it.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

use spillway_comm::{Collectives, Sum};

use super::group::{for_each_key, keep_reduce, merge_runs, reduce_hash, write_group, Output};
use super::inbox::exchange;
use super::recovery::Verdict;
use super::{MapReduce, OpStats, UNBOUNDED_FLUSH};
use crate::data::{Data, Values};
use crate::dataset::{Dataset, DatasetBuilder, Origin};
use crate::emit::{CombineFn, EmitState, Emitter, Sink};
use crate::error::Error;
use crate::ft::{self, KillAt};
use crate::lost::{self, Plan};
use crate::run::{merge, Run, RunWriter, Spill};
use crate::Input;

impl<'c, 'r> MapReduce<'c, 'r> {
    /// Runs one operation of [`map_reduce`](Self::map_reduce) or
    /// [`map_combine_reduce`](Self::map_combine_reduce) (without a combiner when `combine` is
    /// `None`) and records its statistics.
    pub(super) fn operation<I, K, V, K2, V2, M, R>(
        &mut self,
        input: I,
        mut map: M,
        combine: Option<CombineFn<'_, V>>,
        mut reduce: R,
    ) -> Result<Dataset<K2, V2>, Error>
    where
        I: Input,
        I::Key: Data,
        I::Value: Data,
        K: Data,
        V: Data,
        K2: Data,
        V2: Data,
        M: FnMut(I::Key, I::Value, &mut Emitter<'_, K, V>),
        R: FnMut(K, Values<'_, V>, &mut Output<K2, V2>) + 'static,
    {
        let op = self.stats.len() as u64 + 1;
        let node = self.node_comm(combine.is_some());
        let rank = self.comm.runtime();
        let spill = Spill::new(rank.spill_dir(), self.memory);
        let flush_at = if self.memory == usize::MAX {
            UNBOUNDED_FLUSH
        } else {
            self.memory
        };
        let mut st = OpStats::default();
        let recovery = self.ft.as_ref().map(|_| input.recovery());

        // Map (and combine within the rank), then one sorted send buffer. Under fault
        // tolerance a panic here makes this rank a lost one.
        let t = Instant::now();
        let mapped = catch_unwind(AssertUnwindSafe(|| -> Result<(Run, _), Error> {
            let ranges = &self.ranges;
            let mut sink: Sink<'_, '_, K, V> =
                Sink::new(EmitState::new(&spill, ranges, flush_at), combine);
            input.for_each(&mut |k, v| {
                map(k, v, &mut sink.emitter);
                sink.maybe_flush();
            })?;
            let out = sink.finish()?;
            let map_time = t.elapsed().saturating_sub(out.flush_time);
            let t = Instant::now();
            let send = merge_runs::<K, V>(out.runs, &spill, ranges, combine, false)?;
            Ok((
                send,
                (
                    map_time,
                    out.flush_time + t.elapsed(),
                    out.records,
                    out.bytes,
                ),
            ))
        }));
        let mut send = match mapped {
            Ok(Ok((send, (map_time, combine_time, records, bytes)))) => {
                st.map = map_time;
                st.combine = combine_time;
                st.records_emitted = records;
                st.bytes_emitted = bytes;
                Some(send)
            }
            Ok(Err(e)) => return Err(e),
            Err(panic) if self.ft.is_none() => resume_unwind(panic),
            Err(_) => None,
        };

        // Failures before the shuffle: injected losses, a panicking map, a process lost for
        // real (found here, or by survivors at the end of the last operation: the recovery
        // they decided on).
        let mut recovered = false;
        if self.ft.is_some() {
            self.maybe_kill(op, KillAt::Map);
            let injected = {
                let f = self.ft.as_ref().expect("fault tolerance");
                f.inject
                    .iter()
                    .any(|i| i.hits(rank.rank(), rank.node(), op))
            };
            let cause = if send.is_none() {
                Some("a map or combine function panicked")
            } else if injected {
                Some("injected failure")
            } else {
                None
            };
            let verdict = match self.pending_loss.take() {
                Some((lost, new)) => Verdict::Real(lost, new),
                None => match self.detect(op, cause, &[]) {
                    Ok((v, _)) => v,
                    Err(e) if e.is_process_lost() => {
                        let (plan, lost, new) = self.real_loss(op, 0, send.is_none())?;
                        debug_assert_eq!(plan, Plan::BeforeShuffle);
                        Verdict::Real(lost, new)
                    }
                    Err(e) => return Err(e),
                },
            };
            let rec = recovery.as_ref().expect("fault tolerance");
            match verdict {
                Verdict::Fine => {}
                Verdict::Recover(lost) => {
                    recovered = true;
                    send = Some(self.recover_before_shuffle(
                        op,
                        &lost,
                        send.take(),
                        rec,
                        &mut map,
                        combine,
                        &spill,
                        flush_at,
                        None,
                    )?);
                }
                Verdict::Real(lost, new) => {
                    recovered = true;
                    send = Some(self.recover_before_shuffle(
                        op,
                        &lost,
                        send.take(),
                        rec,
                        &mut map,
                        combine,
                        &spill,
                        flush_at,
                        Some(new),
                    )?);
                }
            }
            self.ft.as_mut().expect("fault tolerance").pos = lost::at(op, lost::DETECTED);
        }
        let mut send = send.expect("a send buffer");
        let mut node = if recovered {
            // A recovery changed the ranks: the node communicators too.
            self.node_comm(combine.is_some())
        } else {
            node
        };

        // From here on a real loss may send the survivors back to just before the shuffle,
        // with the send buffer (merged with the lost ranks' share) as it was then.
        self.maybe_kill(op, KillAt::Shuffle);
        // After a real loss at `stage`: the send buffer as it was before the shuffle, the node
        // communicators of the new ranks, and the shuffle again.
        macro_rules! back_before_shuffle {
            ($shuffle:lifetime, $stage:expr) => {{
                send = self.back_before_shuffle(
                    op,
                    $stage,
                    send,
                    recovery.as_ref().expect("fault tolerance"),
                    &mut map,
                    combine,
                    &spill,
                    flush_at,
                )?;
                node = self.node_comm(combine.is_some());
                continue $shuffle;
            }};
        }
        'shuffle: loop {
            st.records_combined = send.entries;
            st.bytes_combined = send.len;

            // Node aggregation.
            if let Some(node_comm) = node.clone() {
                let t = Instant::now();
                let p = self.comm.size();
                let ls = node_comm.size();
                // Node rank j takes world destinations d with d * ls / p == j (contiguous).
                let bounds: Vec<u64> = (0..=ls)
                    .map(|j| send.offsets[(j * p).div_ceil(ls).min(p)])
                    .collect();
                let (inbox, moved, _) =
                    match exchange(&node_comm, &send, &bounds, &spill, self.memory) {
                        Ok(x) => x,
                        Err(e) if e.is_process_lost() && self.ft.is_some() => {
                            back_before_shuffle!('shuffle, lost::DETECTED);
                        }
                        Err(e) => return Err(e),
                    };
                send.release(&spill);
                st.bytes_node_shuffled = moved;
                st.shuffle += t.elapsed();
                let t = Instant::now();
                let ranges = &self.ranges;
                let merged = catch_unwind(AssertUnwindSafe(|| -> Result<Run, Error> {
                    let mut cursors = inbox.cursors(&spill)?;
                    let mut w = RunWriter::new(&spill, ranges);
                    merge(&mut cursors, &spill, |h, bodies| {
                        for_each_key::<K>(bodies, |key, vals| {
                            write_group::<K, V>(&mut w, h, key, vals, combine)
                        })
                    })?;
                    drop(cursors);
                    w.finish()
                }));
                inbox.release(&spill);
                send = match merged {
                    Ok(r) => r?,
                    Err(panic) if self.ft.is_none() => resume_unwind(panic),
                    Err(_) => {
                        return Err(Error::Unrecoverable {
                            op,
                            lost: vec![rank.rank()],
                            reason: "a combine function panicked during node aggregation, \
                                     after the node's data had been exchanged"
                                .into(),
                        })
                    }
                };
                st.combine += t.elapsed();
                st.records_combined = send.entries;
                st.bytes_combined = send.len;
            }

            // The all-to-all.
            let t = Instant::now();
            let (inbox, moved, rounds) =
                match exchange(&self.comm, &send, &send.offsets, &spill, self.memory) {
                    Ok(x) => x,
                    Err(e) if e.is_process_lost() && self.ft.is_some() => {
                        back_before_shuffle!('shuffle, lost::DETECTED);
                    }
                    Err(e) => return Err(e),
                };
            st.bytes_shuffled = moved;
            st.rounds = rounds;
            st.shuffle += t.elapsed();
            if self.ft.is_some() {
                self.ft.as_mut().expect("fault tolerance").pos = lost::at(op, lost::SHUFFLED);
                self.maybe_kill(op, KillAt::Keep);
                match self.keep_replicas(&send, &spill) {
                    Ok(got) => self.keep(send, got, &spill)?,
                    Err(e) if e.is_process_lost() => {
                        inbox.release(&spill);
                        back_before_shuffle!('shuffle, lost::SHUFFLED);
                    }
                    Err(e) => return Err(e),
                }
                self.ft.as_mut().expect("fault tolerance").pos = lost::at(op, lost::KEPT);
                self.maybe_kill(op, KillAt::Reduce);
            } else {
                send.release(&spill);
            }

            // Reduce.
            let t = Instant::now();
            let mut output = Output::new(Some(DatasetBuilder::new(rank)?), Vec::new());
            let reduced = catch_unwind(AssertUnwindSafe(|| -> Result<(), Error> {
                let mut cursors = inbox.cursors(&spill)?;
                merge(&mut cursors, &spill, |_, bodies| {
                    reduce_hash(bodies, &mut reduce, &mut output)
                })
            }));
            inbox.release(&spill);
            let reduce_failed = match reduced {
                Ok(r) => {
                    r?;
                    false
                }
                Err(panic) if self.ft.is_none() => resume_unwind(panic),
                Err(_) => true,
            };

            // Failures in the reduce, and the totals.
            let slots = self.total_slots;
            let totals = if self.ft.is_some() {
                let cause = reduce_failed.then_some("a reduce function panicked");
                loop {
                    match self.detect_after_reduce(op, cause, &output.sums[..slots]) {
                        Ok((Verdict::Recover(lost), totals)) => {
                            self.recover_after_reduce(
                                op,
                                &lost,
                                &mut reduce,
                                &mut output,
                                &spill,
                                None,
                            )?;
                            break totals;
                        }
                        Ok((_, totals)) => break totals,
                        Err(e) if e.is_process_lost() => {
                            let (plan, lost, new) =
                                self.real_loss(op, lost::KEPT, reduce_failed)?;
                            match plan {
                                Plan::AfterReduce => {
                                    // The lost ranks' share joins this output; the totals are
                                    // taken again, over the survivors.
                                    self.recover_after_reduce(
                                        op,
                                        &lost,
                                        &mut reduce,
                                        &mut output,
                                        &spill,
                                        Some(new),
                                    )?;
                                }
                                Plan::Finish(totals) => {
                                    let lost_global = {
                                        let f = self.ft.as_ref().expect("fault tolerance");
                                        ft::globals(&f.members, &lost)
                                    };
                                    self.pending_loss = Some((lost, new));
                                    let f = self.ft.as_mut().expect("fault tolerance");
                                    f.ended(op);
                                    f.recovering = true;
                                    f.kept_partial = Some(lost_global);
                                    break totals;
                                }
                                Plan::BeforeShuffle => {
                                    drop(output);
                                    let send_back = self.roll_back();
                                    send = self.recover_before_shuffle(
                                        op,
                                        &lost,
                                        Some(send_back),
                                        recovery.as_ref().expect("fault tolerance"),
                                        &mut map,
                                        combine,
                                        &spill,
                                        flush_at,
                                        Some(new),
                                    )?;
                                    self.ft.as_mut().expect("fault tolerance").pos =
                                        lost::at(op, lost::DETECTED);
                                    node = self.node_comm(combine.is_some());
                                    continue 'shuffle;
                                }
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
            } else if slots > 0 {
                self.comm.allreduce(&output.sums[..slots], Sum)?
            } else {
                Vec::new()
            };
            st.records_out = output.records;
            let mut result = output.builder.take().expect("a dataset output").finish()?;
            st.reduce = t.elapsed();
            st.bytes_spilled = spill.spilled();
            self.stats.push(st);
            self.totals = totals;
            if let Some(f) = &mut self.ft {
                if self.pending_loss.is_none() {
                    f.ended(op);
                    f.last_totals = Some(self.totals.clone());
                }
                f.prev = Some((op, keep_reduce(reduce)));
                result.origin = Origin::Output { mr: f.id, op };
            }
            return Ok(result);
        }
    }
}
