//! PageRank by pushing contributions along out-edges (BDMPI's benchmark).
//!
//! # Semantics
//! The column-stochastic formulation: with damping `d`, `N` vertices and out-degree `deg(u)`
//! counting parallel edges,
//!
//! `x'(v) = (1 - d) / N + d * (sum over edges u->v of x(u) / deg(u) + D / N)`
//!
//! where `D` is the rank mass of vertices without out-edges (spread uniformly). Start:
//! `x = 1/N`. Iteration stops after `iterations` or when the L1 change `sum |x' - x|` drops
//! below `tolerance` (0 disables). This equals networkx's and scipy's definition.
//!
//! # Algorithm
//! Each rank owns a block of rows (sources). Set-up relabels its rows by out-degree class
//! (a counting sort; the most-read contributions end up in a short prefix that stays in
//! cache), within a class by the length of their local in-list, and transposes its edges once
//! into pull form, with compact indices: the edges into its own vertices as a CSC over local
//! ids (a counting sort), and the edges into other ranks' vertices grouped by distinct target
//! (placed in buckets by the target's top bits as they are produced, each bucket then
//! radix-sorted: no comparison sort, no per-edge search and no second array as long as the
//! edges), so that the distinct remote targets are grouped by owner, and by in-list length
//! within an owner (lists of equal length in a row keep the gathers' branches predicted: a
//! third off an iteration at 2 ranks). An iteration computes `x(u) / deg(u)` once per row, pulls one sum
//! per distinct remote target (sequential writes, gathered reads of the rows' values) and
//! sends each owner one message of sums, and pulls the local sums plus what arrived.
//!
//! An iteration is one stretch of computation between blocking calls: it takes the sums
//! sent to it in the last iteration (the all-reduce that ended that iteration came after
//! every rank had sent them), computes the new values and their contributions, sends the sums
//! for other ranks' rows, and ends in the all-reduce of the L1 change and the dangling mass.
//! Out of core this brings a rank's data in once per iteration, and a blocked rank's sums
//! wait in its mailbox (on disk when the budget is full) rather than in its arrays: with
//! the exchange and the all-reduce as two blocking steps, the values, the contributions and
//! the inverse degrees were loaded twice per iteration, and device reads were about 1.3x
//! what they are now. What an iteration reads is also kept small: sources of three bytes (when
//! a rank has at most 2^24 rows; else four), list lengths of one byte each, and for each rank
//! that sends values a bitmap of the rows receiving them where that beats a list of
//! positions.
//!
//! # Cost per iteration (p ranks, m local edges, r local rows, u distinct remote targets)
//! O(m + r + u) local work, u values sent (one message per owner that any local edge points
//! into), one allreduce of 2 values. The communication pattern is set up
//! once: indices travel only in the first exchange. Set-up costs O(m) plus one exchange.
//!
//! # Checkpoints
//! [`pagerank_checkpointed`] saves the iteration state after every K iterations: each rank's
//! part of the rank vector (8 r bytes, by row), the iteration count, the dangling mass and the
//! last L1 change, and a format word (parts of the older format, by the set-up's order of
//! their day, are refused).
//! A resumed run repeats the set-up and continues from there; its result is bitwise that of an
//! uninterrupted run.

mod keep;
mod packed;
mod setup;

pub(crate) use keep::{Keep, Resume};

use setup::set_up;

use std::time::{Duration, Instant};

use spillway_checkpoint::{header, split_header, Checkpointer};
use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::{SbVec, Scratch};

use crate::error::AlgoError;
use crate::graph::DistGraph;
use crate::Progress;

/// PageRank parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageRankOptions {
    /// Iteration limit (default 20).
    pub iterations: usize,
    /// Stop when the L1 change falls below this; 0 disables early stopping (default 0).
    pub tolerance: f64,
    /// Damping factor (default 0.85).
    pub damping: f64,
}

impl Default for PageRankOptions {
    fn default() -> Self {
        PageRankOptions {
            iterations: 20,
            tolerance: 0.0,
            damping: 0.85,
        }
    }
}

/// This rank's part of the result.
#[derive(Debug)]
pub struct PageRankResult {
    /// First vertex of this rank.
    pub lo: u64,
    /// Ranks of vertices `lo ..` (storage-backed).
    pub ranks: SbVec<f64>,
    /// Iterations performed.
    pub iterations: usize,
    /// L1 change of the last iteration.
    pub delta: f64,
    /// Wall time of each iteration on this rank.
    pub iteration_times: Vec<Duration>,
    /// Bytes an iteration of this rank reads or writes: its arrays (the in-lists, the
    /// per-row and per-slot values) and the values it receives. Out of core, what an
    /// iteration must bring back beyond the budget is at most this.
    pub iteration_bytes: u64,
}

/// `c[i] = x[i] * inv_deg[i]`: what each row gives each of its out-edges (the same product
/// as the one [`update`] forms with the new values).
fn contributions(c: &mut [f64], x: &[f64], inv_deg: &[f64]) {
    for ((c, &xu), &w) in c.iter_mut().zip(x).zip(inv_deg) {
        *c = xu * w;
    }
}

/// `x[i] = base + d * next[i]` for every row, and when `contrib` is given the next
/// iteration's contributions `contrib[i] = x[i] * inv_deg[i]` with it; returns the L1 change of
/// `x` and the sum of the new values of the dangling rows (`inv_deg == 0`). Four independent
/// partial sums of each, so that the additions do not wait on each other and the loop
/// vectorises (the order differs from a left-to-right sum by a few units in the last place).
fn update(
    x: &mut [f64],
    next: &[f64],
    inv_deg: &[f64],
    contrib: Option<&mut [f64]>,
    base: f64,
    d: f64,
) -> (f64, f64) {
    match contrib {
        Some(c) => update_with(x, next, inv_deg, base, d, |i, v, w| c[i] = v * w),
        None => update_with(x, next, inv_deg, base, d, |_, _, _| {}),
    }
}

#[inline(always)]
fn update_with(
    x: &mut [f64],
    next: &[f64],
    inv_deg: &[f64],
    base: f64,
    d: f64,
    mut each: impl FnMut(usize, f64, f64),
) -> (f64, f64) {
    assert!(next.len() == x.len() && inv_deg.len() == x.len());
    let mut delta = [0.0f64; 4];
    let mut dangling = [0.0f64; 4];
    let quads = x.len() / 4 * 4;
    for i in (0..quads).step_by(4) {
        for j in 0..4 {
            let (xi, w) = (&mut x[i + j], inv_deg[i + j]);
            let v = base + d * next[i + j];
            delta[j] += (v - *xi).abs();
            dangling[j] += if w == 0.0 { v } else { 0.0 };
            *xi = v;
            each(i + j, v, w);
        }
    }
    let mut delta = (delta[0] + delta[1]) + (delta[2] + delta[3]);
    let mut dangling = (dangling[0] + dangling[1]) + (dangling[2] + dangling[3]);
    for i in quads..x.len() {
        let (xi, w) = (&mut x[i], inv_deg[i]);
        let v = base + d * next[i];
        delta += (v - *xi).abs();
        if w == 0.0 {
            dangling += v;
        }
        *xi = v;
        each(i, v, w);
    }
    (delta, dangling)
}

/// Runs PageRank on a distributed graph; `progress` is called on every rank after each
/// iteration.
///
/// # Errors
/// [`AlgoError::BadParameter`] for a damping outside [0, 1] or a negative tolerance;
/// communication errors.
pub fn pagerank(
    comm: &Comm,
    graph: &DistGraph,
    options: &PageRankOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<PageRankResult, AlgoError> {
    pagerank_checkpointed(comm, graph, options, progress, None)
}

/// Words before the rank vector in a checkpoint part: iterations done, dangling mass, L1
/// change, rows, [`FORMAT`].
const STATE_WORDS: usize = 5;

/// The last header word of a checkpoint part: its values are in row order. Parts written
/// before it held them in the set-up's order of the day (4 header words), which a later
/// set-up may order otherwise: such a part is refused, never read in the wrong order.
const FORMAT: u64 = 0x5052_0002;

/// [`pagerank`] with checkpoints: with `checkpoint`, starts from the state it restores (if
/// any) and saves the state whenever one is due (see the module notes). `progress` is called
/// only for the iterations this call performs.
///
/// # Errors
/// As [`pagerank`]; [`AlgoError::Checkpoint`] if a checkpoint cannot be written or read or
/// belongs to another job; [`AlgoError::BadParameter`] if a restored state does not fit the
/// graph.
pub fn pagerank_checkpointed(
    comm: &Comm,
    graph: &DistGraph,
    options: &PageRankOptions,
    progress: &mut dyn FnMut(&Progress),
    checkpoint: Option<&mut Checkpointer>,
) -> Result<PageRankResult, AlgoError> {
    run_pagerank(comm, graph, options, progress, checkpoint, None, None)
}

/// [`pagerank_checkpointed`], from `resume` if given (the state of an iteration, after a
/// recovery from lost processes), keeping the state of the last two iterations in `keep` if
/// given (see [`crate::graph::pagerank_survive`]).
pub(crate) fn run_pagerank(
    comm: &Comm,
    graph: &DistGraph,
    options: &PageRankOptions,
    progress: &mut dyn FnMut(&Progress),
    mut checkpoint: Option<&mut Checkpointer>,
    resume: Option<Resume>,
    mut keep: Option<&mut Keep>,
) -> Result<PageRankResult, AlgoError> {
    if !(0.0..=1.0).contains(&options.damping) {
        return Err(AlgoError::BadParameter {
            name: "damping",
            reason: format!("{} is not in [0, 1]", options.damping),
        });
    }
    if options.tolerance.is_nan() || options.tolerance < 0.0 {
        return Err(AlgoError::BadParameter {
            name: "tolerance",
            reason: format!("{} is negative", options.tolerance),
        });
    }
    let rt = comm.runtime();
    let rows = graph.local_rows();
    let pull = set_up(comm, graph)?;
    let n = graph.n as f64;
    let d = options.damping;
    let mut x = Array::values(rt, rows, graph.n)?;
    x.as_mut_slice().iter_mut().for_each(|v| *v = 1.0 / n);
    let mut dangling_local: f64 = pull
        .inv_deg
        .as_slice()
        .iter()
        .filter(|&&w| w == 0.0)
        .map(|_| 1.0 / n)
        .sum();
    let slots = pull.remote_off.lists();
    let iteration_bytes = pull.local_off.bytes()
        + pull.remote_off.bytes()
        + pull.local_src.bytes()
        + pull.remote_src.bytes()
        + pull.incoming.bytes()
        + 8 * (pull.inv_deg.len() + x.len() + 3 * rows + slots) as u64;
    let mut times = Vec::new();
    let mut delta = f64::INFINITY;
    let mut done = 0;
    let mut restored_dangling = None;
    if let Some(ck) = checkpoint.as_deref_mut() {
        if let Some((seq, part)) = ck.take_restored(comm)? {
            let bad = |reason: String| AlgoError::BadParameter {
                name: "checkpoint",
                reason,
            };
            let (word, values) = split_header(&part, STATE_WORDS)
                .ok_or_else(|| bad(format!("checkpoint {seq} is too short")))?;
            if word[4] != FORMAT {
                return Err(bad(format!(
                    "checkpoint {seq} was written in the format of an older spillway (the \
                     rank vector in an order this version does not use): resume it with the \
                     version that wrote it, or start again without resuming"
                )));
            }
            if word[3] != rows as u64 || values.len() != rows * 8 || word[0] != seq {
                return Err(bad(format!(
                    "checkpoint {seq} holds {} rows for rank {}, which has {rows}",
                    word[3],
                    comm.rank()
                )));
            }
            done = seq as usize;
            restored_dangling = Some(f64::from_bits(word[1]));
            delta = f64::from_bits(word[2]);
            for (v, &row) in x.as_mut_slice().iter_mut().zip(pull.row_of.as_slice()) {
                let at = 8 * row as usize;
                *v = f64::from_le_bytes(values[at..at + 8].try_into().expect("8 bytes"));
            }
        }
    }
    if let Some(r) = resume {
        if r.x_rows.len() != rows {
            return Err(AlgoError::BadParameter {
                name: "recovery",
                reason: format!("{} values for {rows} rows", r.x_rows.len()),
            });
        }
        done = r.done;
        restored_dangling = Some(r.dangling);
        delta = r.delta;
        for (v, &row) in x.as_mut_slice().iter_mut().zip(pull.row_of.as_slice()) {
            *v = r.x_rows[row as usize];
        }
    }
    // With `keep`: replicas of every rank's values go to its buddy, on a communicator of
    // their own.
    let replicas = keep.as_ref().map(|_| comm.dup());
    if let (Some(k), Some(replicas)) = (keep.as_deref_mut(), &replicas) {
        k.start(replicas, done, x.as_slice(), pull.row_of.as_slice(), delta)?;
    }
    let stopped = |delta: f64| options.tolerance > 0.0 && delta < options.tolerance;
    let first = if stopped(delta) {
        options.iterations
    } else {
        done
    };
    // The sums for other ranks' rows travel as point-to-point messages in a message space of
    // their own; round `k` (the sums of iteration k's contributions) has tag `k % 2`: a rank
    // sends round k + 1 only after the all-reduce that ends iteration k, which its receivers
    // enter after taking round k, so at most two rounds are ever in flight.
    let values = comm.dup();
    let tag = |round: usize| (round % 2) as i32;
    let send_sums = |c: &[f64], out: &mut [f64], round: usize| -> Result<(), AlgoError> {
        pull.remote_off.pull(c, rows, &pull.remote_src, out);
        for &(q, start, len) in &pull.blocks {
            values.send(q, tag(round), &out[start..start + len])?;
        }
        Ok(())
    };
    // The per-iteration buffers, overwritten before they are read again (the contributions,
    // the sums sent, the next values): out of core they are scratch memory, taken for one
    // iteration and given back before it blocks, so that they are never written out or read
    // back, and the ranks of a node pass the same pages on to each other (no page faults).
    let per_iteration = rt.mem_budget().is_some();
    let scratch = || -> Result<Work, AlgoError> {
        Ok(Work {
            contrib: Array::new(rt, rows, per_iteration)?,
            next: Array::new(rt, rows, per_iteration)?,
            outgoing: Array::new(rt, slots, per_iteration)?,
        })
    };
    // In memory the buffers stay, and the contributions of an iteration are written by the
    // update of the one before (a pass over `x` and the inverse degrees saved); out of core
    // they are made again from `x` where they are needed, since `x` and the inverse degrees
    // are read there anyway.
    let keep_contrib = !per_iteration;
    let mut kept: Option<Work> = None;
    let mut contrib_ready = false;
    if first < options.iterations {
        let mut w = scratch()?;
        contributions(
            w.contrib.as_mut_slice(),
            x.as_slice(),
            pull.inv_deg.as_slice(),
        );
        send_sums(w.contrib.as_slice(), w.outgoing.as_mut_slice(), first)?;
        contrib_ready = keep_contrib;
        if !per_iteration {
            kept = Some(w);
        }
    }
    // After the sends of the first round, so that its receives rarely wait.
    let mut dangling = comm.allreduce(&[dangling_local], Sum)?[0];
    if let Some(restored) = restored_dangling {
        dangling = restored;
    }
    if let Some(k) = keep.as_deref_mut() {
        k.set_dangling(dangling);
    }
    // One iteration is one stretch of computation between blocking calls, so that out of core
    // a rank's data is brought in once per iteration: with `x` = x_k, the sums of round k
    // sent, and `dangling` the dangling mass of x_k, it pulls the local sums of x_k's
    // contributions, adds the sums received, computes x_{k+1} and its contributions, sends
    // their sums for other ranks' rows (round k + 1), and ends in the all-reduce of the L1
    // change and the dangling mass.
    for it in first..options.iterations {
        let start = Instant::now();
        let more = it + 1 < options.iterations;
        // Round `it` was sent before the all-reduce that ended the last iteration: these
        // receives wait only in the first iteration. They come before the scratch buffers are
        // taken, so that no rank holds scratch memory while it waits.
        let mut received = Vec::with_capacity(pull.incoming.blocks.len());
        for &(sender, count, _) in &pull.incoming.blocks {
            let (buf, _) = values.recv_shared(sender, tag(it))?;
            if buf.len() != 8 * count {
                return Err(AlgoError::Comm(spillway_comm::Error::Truncated {
                    message_bytes: buf.len(),
                    buffer_bytes: 8 * count,
                }));
            }
            received.push(buf);
        }
        let mut w = match kept.take() {
            Some(w) => w,
            None => scratch()?,
        };
        // Slices of storage-backed arrays are taken after every blocking call so that loads
        // are accounted.
        if !contrib_ready {
            contributions(
                w.contrib.as_mut_slice(),
                x.as_slice(),
                pull.inv_deg.as_slice(),
            );
        }
        pull.local_off.pull(
            w.contrib.as_slice(),
            rows,
            &pull.local_src,
            w.next.as_mut_slice(),
        );
        for (b, buf) in received.iter().enumerate() {
            let sums: &[f64] = bytemuck::try_cast_slice(buf.as_bytes()).map_err(|_| {
                AlgoError::Comm(spillway_comm::Error::TypeMismatch {
                    expected: "f64 sums",
                    message_bytes: buf.len(),
                })
            })?;
            pull.incoming.add_from(b, sums, w.next.as_mut_slice());
        }
        drop(received);
        let base = (1.0 - d) / n + d * dangling / n;
        let local_delta;
        {
            let Work {
                contrib,
                next,
                outgoing,
            } = &mut w;
            (local_delta, dangling_local) = update(
                x.as_mut_slice(),
                next.as_slice(),
                pull.inv_deg.as_slice(),
                more.then_some(contrib.as_mut_slice()),
                base,
                d,
            );
            if more {
                send_sums(contrib.as_slice(), outgoing.as_mut_slice(), it + 1)?;
            }
            contrib_ready = more && keep_contrib;
        }
        if let (Some(k), Some(replicas)) = (keep.as_deref_mut(), &replicas) {
            // Before the all-reduce: a rank that completes it holds its wards' new values.
            if k.due(it + 1, options.iterations) {
                k.replicate(replicas, it + 1, x.as_slice(), pull.row_of.as_slice())?;
            }
        }
        if !per_iteration {
            kept = Some(w);
        } else {
            drop(w);
        }
        // With `keep`: the replication's time and the iteration's, summed over the ranks to
        // plan the next replication alike on every rank.
        let (spent, took) = match keep.as_deref() {
            Some(k) => (k.spent(it + 1), start.elapsed().as_secs_f64()),
            None => (0.0, 0.0),
        };
        let sums = if keep.is_some() {
            comm.allreduce(&[local_delta, dangling_local, spent, took], Sum)?
        } else {
            comm.allreduce(&[local_delta, dangling_local], Sum)?
        };
        delta = sums[0];
        dangling = sums[1];
        done = it + 1;
        times.push(start.elapsed());
        if let Some(k) = keep.as_deref_mut() {
            k.commit(done, (dangling, delta), (sums[2], sums[3]), start.elapsed());
        }
        progress(&Progress {
            iteration: done,
            max_iterations: options.iterations,
            delta,
        });
        if let Some(ck) = checkpoint.as_deref_mut() {
            if ck.due(done as u64) {
                let header = header(&[
                    done as u64,
                    dangling.to_bits(),
                    delta.to_bits(),
                    rows as u64,
                    FORMAT,
                ]);
                let by_row = by_row(rt, x.as_slice(), pull.row_of.as_slice())?;
                ck.save(
                    comm,
                    done as u64,
                    &[&header, as_le_bytes(by_row.as_slice())],
                )?;
            }
        }
        if stopped(delta) {
            if more {
                // Round `done` was sent and is not needed: take it out of the mailboxes.
                for &(sender, ..) in &pull.incoming.blocks {
                    values.recv_shared(sender, tag(done))?;
                }
            }
            break;
        }
    }
    let ranks = by_row(rt, x.as_slice(), pull.row_of.as_slice())?;
    Ok(PageRankResult {
        lo: graph.lo,
        ranks,
        iterations: done,
        delta,
        iteration_times: times,
        iteration_bytes,
    })
}

/// An array of the iterations: scratch memory (never written out, counted against the
/// budget while it exists) or storage-backed (in memory, an ordinary allocation).
enum Array {
    Scratch(Scratch<f64>),
    Backed(SbVec<f64>),
}

impl Array {
    /// `len` zeros, in scratch memory or storage-backed.
    fn new(rt: &spillway_runtime::Rank, len: usize, scratch: bool) -> Result<Array, AlgoError> {
        Ok(match scratch {
            true => Array::Scratch(rt.scratch(len)?),
            false => Array::Backed(SbVec::zeroed(rt, len)?),
        })
    }

    /// This rank's vertex values. Out of core they stay in memory (scratch memory kept for the
    /// whole run) when the values of the node's ranks take at most an eighth of the budget: an
    /// iteration then neither writes them back nor reads them again, nor faults on their pages
    /// to write them. Otherwise, and in memory, they are storage-backed.
    fn values(rt: &spillway_runtime::Rank, rows: usize, n: u64) -> Result<Array, AlgoError> {
        let node_bytes = 8 * n as u128 * u128::from(rt.local_size()) / u128::from(rt.size());
        let resident = rt
            .mem_budget()
            .is_some_and(|b| node_bytes <= u128::from(b / 8));
        Array::new(rt, rows, resident)
    }

    fn as_slice(&self) -> &[f64] {
        match self {
            Array::Scratch(s) => s,
            Array::Backed(v) => v.as_slice(),
        }
    }

    fn as_mut_slice(&mut self) -> &mut [f64] {
        match self {
            Array::Scratch(s) => s,
            Array::Backed(v) => v.as_mut_slice(),
        }
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }
}

/// The buffers one iteration writes before it reads them (see [`run_pagerank`]).
struct Work {
    /// `x(u) / deg(u)` per row.
    contrib: Array,
    /// The new sums per row.
    next: Array,
    /// The sums for other ranks' rows, by slot.
    outgoing: Array,
}

/// `x` (by position) back in row order: `row_of` is the row of each position.
fn by_row(rt: &spillway_runtime::Rank, x: &[f64], row_of: &[u32]) -> Result<SbVec<f64>, AlgoError> {
    let mut out: SbVec<f64> = SbVec::zeroed(rt, x.len())?;
    let o = out.as_mut_slice();
    for (&u, &v) in row_of.iter().zip(x) {
        o[u as usize] = v;
    }
    Ok(out)
}

/// The bytes of `values` in little-endian order (the checkpoint format).
fn as_le_bytes(values: &[f64]) -> &[u8] {
    // The format is little-endian; on big-endian targets this would need a converted copy.
    const _: () = assert!(
        cfg!(target_endian = "little"),
        "checkpoints assume little-endian"
    );
    bytemuck::cast_slice(values)
}
