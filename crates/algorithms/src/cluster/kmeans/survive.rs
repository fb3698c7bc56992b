//! K-means that survives processes lost for real (MPI with ULFM): see [`kmeans_surviving`].

use std::time::{Duration, Instant};

use spillway_checkpoint::Checkpointer;
use spillway_comm::{Collectives, Comm};
use spillway_runtime::SbVec;

use super::{run_kmeans, KMeansExtra, KMeansOptions, KMeansResult, State};
use crate::cluster::points::{
    load_points, reload_lost_points, DistPoints, PointCopies, PointSource,
};
use crate::error::AlgoError;
use crate::Progress;

/// A survivor's pieces of the lost ranks' points (first point, values), from its copies.
type Pieces = Vec<(u64, SbVec<f64>)>;

/// What a run that survived lost processes returns (see [`kmeans_surviving`]).
#[derive(Debug)]
pub struct Survived<'r> {
    /// The result, as an uninterrupted run gives it (the assignment of this rank's points).
    pub result: KMeansResult,
    /// The points this rank holds at the end (after a loss, its block and its share of the
    /// lost ranks' points, see [`DistPoints::more`]).
    pub points: DistPoints,
    /// The ranks still in the job.
    pub comm: Comm<'r>,
    /// The recoveries: the iteration the survivors went on from, the ranks lost, and the
    /// time taken (the exchange, reading the points again and the caller's `ready`).
    pub recoveries: Vec<(usize, Vec<u32>, Duration)>,
}

/// What a caller of [`kmeans_surviving`] does once the points are loaded, before the first
/// iteration: checks of the input, a barrier, restoring a checkpoint. It is called after
/// every load (the first one and each after a recovery, then without the checkpointer) and
/// may communicate: a loss in it is recovered like one in an iteration.
pub type Ready<'a> =
    dyn FnMut(&Comm, &DistPoints, Option<&mut Checkpointer>) -> Result<(), AlgoError> + 'a;

/// What a caller of [`kmeans_surviving`] does with the result before the run counts as done:
/// writing the outputs, a barrier. It runs on the ranks still in the job and may
/// communicate: a loss in it is recovered like one after the last iteration (the survivors
/// take the lost ranks' points over, assign them, and call it again on the new layout), so it
/// must be safe to run again from its start (an output staged again replaces the first).
pub type Finish<'a> = dyn FnMut(&Comm, &KMeansResult, &DistPoints) -> Result<(), AlgoError> + 'a;

/// [`kmeans_checkpointed`](super::kmeans_checkpointed) on the points of `source`, read by
/// this call, that survives processes lost for real (MPI with ULFM, see
/// [`Rank::survives_lost_processes`](spillway_runtime::Rank::survives_lost_processes)): the
/// survivors go on in the same job. `ready` runs after each load (see [`Ready`]), `finish`
/// on the result (see [`Finish`]).
///
/// # Recovery
/// The state of an iteration is the centroids, the same on every rank: every rank keeps
/// those after its last completed iteration and those before. After a loss the survivors
/// exchange them, and go on from the survivor that got furthest (a survivor that completed
/// the last all-reduce holds its result, to which the lost ranks contributed); they take the
/// lost ranks' points over (see below) and assign them against the centroids the last
/// iteration started from, as a resumed checkpoint does. A loss before the first iteration
/// (while the points are read, in `ready`, while the initial centroids are chosen) starts the
/// run over on the survivors (a loss while the points are read reads them all again). The
/// result equals an uninterrupted run's up to the order of the sums (the partial sums come
/// from other ranks). When the runtime survives lost processes, the points are copied after
/// each load: every rank's block in even pieces to the ranks of the other nodes (the points'
/// memory twice). After the loss of one
/// node's ranks each survivor appends its pieces of their blocks to its own (see
/// [`DistPoints::more`]): nothing is read or moved, the shares stay even, and a recovery
/// costs one assignment pass. When the copies do not cover the loss (ranks of two nodes lost
/// at once, a loss before the copies were made), the survivors read the lost ranks' part of
/// `source` again, split over them, and append their shares the same way. A second recovery
/// reads all points again (and copies them again).
/// The assignment is of the points in the order of each rank's `values`
/// ([`in_point_order`](crate::cluster::points::in_point_order) puts it in point order).
/// Checkpoints stop after a recovery (the survivors are another layout).
///
/// # Errors
/// As [`kmeans_checkpointed`](super::kmeans_checkpointed) and [`load_points`]; a loss
/// during the recovery is recovered like the first one.
pub fn kmeans_surviving<'r>(
    comm: &Comm<'r>,
    source: &PointSource,
    options: &KMeansOptions,
    progress: &mut dyn FnMut(&Progress),
    mut checkpoint: Option<&mut Checkpointer>,
    ready: &mut Ready<'_>,
    finish: &mut Finish<'_>,
) -> Result<Survived<'r>, AlgoError> {
    let survivable = comm.runtime().survives_lost_processes();
    let dim = source.dimension()?;
    let kd = options.k * dim;
    let mut comm = comm.clone();
    let mut resume: Option<State> = None;
    let mut recoveries = Vec::new();
    // The recovery under way (iteration, ranks lost, start) until the points are read again.
    let mut recovering: Option<(usize, Vec<u32>, Instant)> = None;
    let mut times: Vec<Duration> = Vec::new();
    // After a loss in an iteration: the points this rank held, the ranks they were split
    // over, and this rank's pieces of the lost ranks' points if every survivor holds its
    // copies (else only the lost ranks' points are read again).
    let mut held: Option<(DistPoints, Comm<'r>, Option<Pieces>)> = None;
    // Whether the points were split by reading (not moved after a loss): only then are the
    // lost ranks' points their parts of the input.
    let mut as_read;
    loop {
        // What a loss before the next iteration reports: the state this load goes on from
        // (nothing done on the first).
        let mut keep = resume.clone().unwrap_or_default();
        // The copies of other ranks' points this rank holds, once made (after a load).
        let mut copies: Option<PointCopies<'r>> = None;
        let loaded = match held.take() {
            Some((points, _, Some(pieces))) => {
                as_read = false;
                points.take_over(pieces)
            }
            Some((points, base, None)) => {
                as_read = false;
                reload_lost_points(&comm, &base, points, source)
            }
            None => {
                as_read = true;
                load_points(&comm, source)
            }
        };
        // A loss while the points were loaded leaves none to keep; one after (while they
        // are copied, in `ready`, in the run or in `finish`) keeps them.
        let outcome = match loaded {
            Err(e) => Err((e, None)),
            Ok(points) => {
                let prepared = (|| {
                    if survivable && as_read {
                        copies = Some(PointCopies::make(&comm, &points)?);
                    }
                    ready(&comm, &points, checkpoint.as_deref_mut())
                })();
                if let (Ok(()), Some((from, lost, t))) = (&prepared, recovering.take()) {
                    recoveries.push((from, lost, t.elapsed()));
                }
                let keeping = survivable.then_some(&mut keep);
                match prepared.and_then(|()| {
                    let r = run_kmeans(
                        &comm,
                        &points,
                        options,
                        progress,
                        checkpoint.as_deref_mut(),
                        resume.clone(),
                        keeping,
                        &KMeansExtra::default(),
                    )?;
                    finish(&comm, &r, &points)?;
                    // Over once every rank got here: a loss some rank saw in `finish`'s
                    // last collective after others had completed it fails this barrier on
                    // all of them, so all recover together.
                    comm.barrier()?;
                    Ok(r)
                }) {
                    Ok(r) => Ok((r, points)),
                    // A loss in `finish` goes back to the state of the last iteration,
                    // which `keep` holds; one before the first iteration starts over.
                    Err(e) => Err((e, Some(points))),
                }
            }
        };
        match outcome {
            Ok((mut result, points)) => {
                times.append(&mut result.iteration_times);
                result.iteration_times = times;
                return Ok(Survived {
                    result,
                    points,
                    comm,
                    recoveries,
                });
            }
            Err((e, points)) if survivable && e.is_process_lost() => {
                let t = Instant::now();
                // The state, whether this rank kept its points and whether it holds copies.
                let mut report = keep.encode(kd);
                report.push(f64::from(u8::from(points.is_some())));
                report.push(f64::from(u8::from(copies.is_some())));
                let (new, all, lost) = crate::survive::regroup(&comm, &report)?;
                let reports = || all.chunks_exact(4 + 2 * kd);
                // The survivor that got furthest (its centroids are what every rank would
                // have next); before the first iteration, the start again.
                let best = reports()
                    .map(|r| State::decode(r, kd))
                    .max_by_key(|s| s.done)
                    .expect("a survivor");
                times.append(&mut keep.times);
                times.truncate(best.done);
                // Unless every survivor kept its points as read, all read them again (the
                // same on every survivor: all loaded them the same way). If every survivor
                // also holds its copies and they cover the lost ranks, the lost points are
                // taken from them, else read again.
                let all_kept = reports().all(|r| r[2 + 2 * kd] != 0.0);
                let all_copied = reports().all(|r| r[3 + 2 * kd] != 0.0);
                let pieces = copies
                    .as_mut()
                    .filter(|_| all_copied)
                    .and_then(|c| c.lost_pieces(&lost.ranks));
                held = points
                    .filter(|_| all_kept && as_read)
                    .map(|p| (p, comm.clone(), pieces));
                comm = new;
                // A loss during a recovery adds its ranks to the same recovery.
                let since = recovering.take().map_or(t, |(_, _, since)| since);
                recovering = Some((best.done, lost.ranks.clone(), since));
                resume = Some(best);
                checkpoint = None;
            }
            Err((e, _)) => return Err(e),
        }
    }
}
