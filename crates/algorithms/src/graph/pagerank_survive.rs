//! Direct PageRank that survives processes lost for real (MPI with ULFM).
//!
//! # Replicas
//! The state of an iteration is the rank vector (each rank its rows), the dangling mass and
//! the L1 change. Every rank sends its values, in row order, to its *buddy* (the rank with the
//! same index on the next node) after computing them and before the all-reduce that ends the
//! iteration, and receives its wards' values first: a rank that completed an iteration holds
//! its wards' values of it. Each rank keeps its own values and its wards' of the last two
//! replicated iterations. Sending 8 bytes per row to one other rank is what a replication
//! costs (about what the PageRank sums themselves move on sparse graphs); where that is more
//! than 2% of an iteration's time, the values are replicated every few iterations (at most 16
//! apart, and always after the last), planned alike on every rank from the times summed in
//! the all-reduce that ends an iteration. The graph is copied too, once after each load: every
//! rank holds its wards' parts of it (see `graph/copies.rs`; the graph's memory twice).
//!
//! # Recovery
//! The survivors report the last replicated iteration they completed (they differ by one
//! replication at most) and go on from the lowest (the iterations after it are done again):
//! they rebuild the graph over the survivors from their parts and the lost ranks' copies (as
//! a load would split it; read again from its source if a loss came before the copies were
//! made or took a rank with the rank holding its copy), and move the values
//! of that iteration to the new owners of the rows (the lost ranks' values from their
//! buddies). The result equals an uninterrupted run's up to the order of the sums (a row's
//! sums come from other ranks).

use std::time::{Duration, Instant};

use spillway_checkpoint::Checkpointer;
use spillway_comm::{Collectives, Comm};

use crate::error::AlgoError;
use crate::graph::copies::{rebuild, Copies, Part};
use crate::graph::pagerank::{run_pagerank, Keep, PageRankOptions, PageRankResult, Resume};
use crate::graph::{load_graph, DistGraph, GraphSource};
use crate::survive::{buddy, regroup, unrecoverable};
use crate::Progress;

/// What a run that survived lost processes returns (see [`pagerank_surviving`]).
#[derive(Debug)]
pub struct Survived<'r> {
    /// The result, as an uninterrupted run gives it (the ranks of this rank's rows).
    pub result: PageRankResult,
    /// The graph this rank holds at the end (after a loss, split over the survivors).
    pub graph: DistGraph,
    /// The ranks still in the job.
    pub comm: Comm<'r>,
    /// The recoveries: the iteration the survivors went on from, the ranks lost, and the
    /// time taken (the exchange, rebuilding the graph, moving the values).
    pub recoveries: Vec<(usize, Vec<u32>, Duration)>,
}

/// What a caller of [`pagerank_surviving`] does once the graph is loaded, before the first
/// iteration: a barrier, restoring a checkpoint. It is called after every load (the first one
/// and each after a recovery, then without the checkpointer) and may communicate: a loss in
/// it is recovered like one in an iteration.
pub type Ready<'a> =
    dyn FnMut(&Comm, &DistGraph, Option<&mut Checkpointer>) -> Result<(), AlgoError> + 'a;

/// What a caller of [`pagerank_surviving`] does with the result before the run counts as
/// done: writing the output, the collectives of its report. It runs on the ranks still in
/// the job and may communicate: a loss in it is recovered like one after the last iteration
/// (the survivors rebuild the graph, take the values of the last iteration over from the
/// replicas and call it again on the new layout), so it must be safe to run again from its
/// start (an output staged again replaces the first).
pub type Finish<'a> = dyn FnMut(&Comm, &PageRankResult, &DistGraph) -> Result<(), AlgoError> + 'a;

/// [`pagerank_checkpointed`](crate::graph::pagerank::pagerank_checkpointed) on the graph of
/// `source`, read by this call, that survives processes lost for real (MPI with ULFM, see
/// [`Rank::survives_lost_processes`](spillway_runtime::Rank::survives_lost_processes)): the
/// survivors go on in the same job (see the module notes); a loss before the first
/// iteration's values are replicated (while the graph is read, in `ready`) starts the run
/// over on the survivors. `ready` runs after each load (see [`Ready`]), `finish` on the
/// result (see [`Finish`]). Without ULFM it is
/// `pagerank_checkpointed`. Checkpoints stop after a recovery (the survivors are another
/// layout).
///
/// # Errors
/// As `pagerank_checkpointed` and [`load_graph`]; a loss the replicas do not cover (a rank and
/// the rank holding its replicas) ends the job with [`AlgoError::Unrecoverable`].
pub fn pagerank_surviving<'r>(
    comm: &Comm<'r>,
    source: &GraphSource,
    options: &PageRankOptions,
    progress: &mut dyn FnMut(&Progress),
    mut checkpoint: Option<&mut Checkpointer>,
    ready: &mut Ready<'_>,
    finish: &mut Finish<'_>,
) -> Result<Survived<'r>, AlgoError> {
    let survivable = comm.runtime().survives_lost_processes();
    let mut comm = comm.clone();
    // What a recovery moves to the new owners once the graph is rebuilt (kept until the
    // next recovery: a loss before the survivors replicated their values again goes back to
    // it).
    let mut moving: Option<Moving<'r>> = None;
    let mut recoveries = Vec::new();
    // The recovery under way (iteration, ranks lost, start) until the values have moved.
    let mut recovering: Option<(usize, Vec<u32>, Instant)> = None;
    let mut times: Vec<Duration> = Vec::new();
    // What the next load rebuilds the graph from after a loss (this rank's part and its
    // lost wards'), if every survivor holds its share.
    let mut rebuilding: Option<(DistGraph, Vec<Part>)> = None;
    loop {
        let mut keep: Option<Keep> = None;
        // The graph of this attempt (loaded on `comm`) and the copies of the wards' parts of
        // it this rank holds, once made.
        let mut held: Option<DistGraph> = None;
        let mut copies: Option<Copies<'r>> = None;
        let outcome = (|| -> Result<PageRankResult, AlgoError> {
            let graph = match rebuilding.take() {
                Some((own, parts)) => rebuild(&comm, own, parts)?,
                None => load_graph(&comm, source)?,
            };
            let graph = held.insert(graph);
            if survivable {
                copies = Some(Copies::make(&comm, graph)?);
            }
            ready(&comm, graph, checkpoint.as_deref_mut())?;
            let resume = match &moving {
                Some(m) => {
                    // This rank's values and those of the members lost since they were
                    // replicated that it holds.
                    let me = m.base.rank();
                    let gone = |member: usize| {
                        m.base.global_rank(member).is_ok_and(|g| {
                            !(0..comm.size()).any(|r| comm.global_rank(r).ok() == Some(g))
                        })
                    };
                    let pieces: Vec<(u64, &[f64])> = m
                        .pieces
                        .iter()
                        .filter(|(member, ..)| *member == me || gone(*member))
                        .map(|(_, at, v)| (*at, &v[..]))
                        .collect();
                    let x_rows = move_values(&comm, &pieces, graph)?;
                    Some(Resume {
                        done: m.done,
                        dangling: m.dangling,
                        delta: m.delta,
                        x_rows,
                    })
                }
                None => None,
            };
            if let Some((from, lost, t)) = recovering.take() {
                recoveries.push((from, lost, t.elapsed()));
            }
            keep = survivable.then(|| Keep::new(&comm, graph));
            let result = run_pagerank(
                &comm,
                graph,
                options,
                progress,
                checkpoint.as_deref_mut(),
                resume,
                keep.as_mut(),
            )?;
            // A loss here goes back to the last iteration, whose values `keep` replicated.
            finish(&comm, &result, graph)?;
            // The run is over once every rank got here: a loss that some rank saw in
            // `finish`'s last collective after others had completed it fails this barrier
            // on all of them, so all recover together instead of some having returned.
            comm.barrier()?;
            Ok(result)
        })();
        match outcome {
            Ok(mut result) => {
                let graph = held.take().expect("the graph of a run that ended");
                times.append(&mut result.iteration_times);
                result.iteration_times = times;
                return Ok(Survived {
                    result,
                    graph,
                    comm,
                    recoveries,
                });
            }
            Err(e) if survivable && e.is_process_lost() => {
                let t = Instant::now();
                // The iteration whose values this rank holds complete: of its run, or, before
                // it replicated its values again after a recovery, of that recovery; -1
                // before it held any (a loss while the graph was read or the values were
                // first replicated).
                let kept = match (&keep, &moving) {
                    (Some(k), _) if k.of(k.cur.iteration).is_some() => k.cur.iteration as f64,
                    (_, Some(m)) => m.done as f64,
                    _ => -1.0,
                };
                // Whether this rank can give its part of the graph and its wards' to a
                // rebuild (it holds the graph and made the copies of this attempt).
                let whole = f64::from(u8::from(held.is_some() && copies.is_some()));
                let (new, all, lost) = regroup(&comm, &[kept, whole])?;
                let from = all.iter().step_by(2).fold(f64::INFINITY, |a, &b| a.min(b));
                // The graph is rebuilt from memory if every survivor holds its part and
                // every lost rank's copy survived, else read again.
                let all_whole = all.iter().skip(1).step_by(2).all(|&w| w == 1.0);
                rebuilding = match (held.take(), copies.take()) {
                    (Some(own), Some(mut c)) if all_whole => {
                        c.lost_parts(&lost.ranks).map(|parts| (own, parts))
                    }
                    _ => None,
                };
                let gone_from = |base: &Comm, member: usize| {
                    base.global_rank(member)
                        .is_ok_and(|g| lost.ranks.binary_search(&g).is_ok())
                };
                if let Some(k) = &keep {
                    times.extend_from_slice(&k.times);
                }
                let since = recovering.take().map_or(t, |(_, _, since)| since);
                checkpoint = None;
                if from < 0.0 {
                    // Some survivor kept nothing: start over.
                    comm = new;
                    times.clear();
                    moving = None;
                    recovering = Some((0, lost.ranks.clone(), since));
                    continue;
                }
                let from = from as usize;
                times.truncate(from);
                // Every survivor holds the values of `from` of the same replication: the
                // last recovery's if that is where they go back to (some survivor had not
                // replicated its values again), else the run's.
                let m = match (moving.take(), &keep) {
                    (Some(m), _) if m.done == from => m,
                    (_, Some(keep)) => {
                        let Some(gen) = keep.of(from) else {
                            return Err(unrecoverable(
                                &lost,
                                &format!("no rank kept the values of iteration {from}"),
                            ));
                        };
                        // Its own rows and its wards'.
                        let mut pieces =
                            vec![(keep.me, keep.bounds[keep.me], gen.own.as_slice().to_vec())];
                        for (i, &w) in keep.wards.iter().enumerate() {
                            pieces.push((w, keep.bounds[w], gen.wards[i].as_slice().to_vec()));
                        }
                        Moving {
                            done: from,
                            dangling: gen.dangling,
                            delta: gen.delta,
                            base: comm.clone(),
                            pieces,
                        }
                    }
                    (_, None) => {
                        return Err(unrecoverable(
                            &lost,
                            &format!("no rank kept the values of iteration {from}"),
                        ))
                    }
                };
                // Each member lost since the values were replicated needs its buddy there.
                let gone = |member: usize| gone_from(&m.base, member);
                for l in (0..m.base.size()).filter(|&l| gone(l)) {
                    match buddy(&m.base, l) {
                        Some(b) if !gone(b) => {}
                        _ => {
                            return Err(unrecoverable(
                                &lost,
                                &format!(
                                    "rank {} and the rank holding its replicas were lost \
                                     together",
                                    m.base.global_rank(l).unwrap_or(0)
                                ),
                            ))
                        }
                    }
                }
                moving = Some(m);
                comm = new;
                recovering = Some((from, lost.ranks.clone(), since));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The values of one iteration a rank holds for a recovery, as they were replicated.
struct Moving<'r> {
    /// The iteration, its dangling mass and its L1 change.
    done: usize,
    dangling: f64,
    delta: f64,
    /// The communicator the values were replicated on.
    base: Comm<'r>,
    /// (member of `base`, its first row, its values): this rank's own and its wards'.
    pieces: Vec<(usize, u64, Vec<f64>)>,
}

/// Moves the values of `pieces` (first row, values) to the ranks of `comm` that own their
/// rows in `graph`; returns this rank's values in row order.
fn move_values(
    comm: &Comm,
    pieces: &[(u64, &[f64])],
    graph: &DistGraph,
) -> Result<Vec<f64>, AlgoError> {
    let p = comm.size();
    let mut parts: Vec<Vec<f64>> = vec![Vec::new(); p];
    for &(start, values) in pieces {
        let end = start + values.len() as u64;
        let mut at = start;
        while at < end {
            let owner = graph.owner(at);
            let stop = graph.bounds[owner + 1].min(end);
            // A block: its first row (exact in an f64 below 2^53), its length, its values.
            parts[owner].push(at as f64);
            parts[owner].push((stop - at) as f64);
            parts[owner].extend_from_slice(&values[(at - start) as usize..(stop - start) as usize]);
            at = stop;
        }
    }
    let got = comm.alltoallv_vecs(parts)?;
    let rows = (graph.hi - graph.lo) as usize;
    let mut x = vec![f64::NAN; rows];
    let mut filled = 0usize;
    for part in got {
        let mut i = 0;
        while i + 2 <= part.len() {
            let (first, len) = (part[i] as u64, part[i + 1] as usize);
            let at = (first - graph.lo) as usize;
            x[at..at + len].copy_from_slice(&part[i + 2..i + 2 + len]);
            filled += len;
            i += 2 + len;
        }
    }
    if filled != rows {
        return Err(AlgoError::Unrecoverable(format!(
            "after a loss {filled} of this rank's {rows} values were found"
        )));
    }
    Ok(x)
}
