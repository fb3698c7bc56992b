//! Lloyd's K-means in the map-collective style of Harp.
//!
//! # Semantics
//! Every rank holds a block of points and the same `k` centroids. Each iteration assigns every
//! point to its nearest centroid (squared Euclidean distance, ties to the lower index),
//! computes per-cluster partial sums and counts locally (local aggregation), and combines them
//! with one allreduce; every rank then derives the same new centroids (the mean of each
//! cluster; a cluster that lost all its points keeps its centroid). Iteration stops when no
//! point changes cluster, or after `max_iterations`. With the same initial centroids this is
//! scikit-learn's `lloyd` (which, unlike this, relocates empty clusters).
//!
//! [`kmeans_with`] adds, through [`KMeansExtra`], initial centroids held in memory and
//! scikit-learn's tolerance: it also stops after an iteration that moved some point but whose
//! update moved the centroids by at most `tolerance` (the sum over centroids of the squared
//! distance between old and new: `center_shift_tot <= tol`), and then assigns the points
//! once more to the centroids it returns. The iteration count is then scikit-learn's
//! `n_iter_`.
//!
//! # Cost per iteration (n local points, d dimensions, k clusters)
//! O(n k d) local work (the blocked kernel of [`crate::cluster::assign`]); one allreduce of k (d + 1) + 1 values.
//!
//! # Checkpoints
//! [`kmeans_checkpointed`] saves, after every K iterations, the iteration count, whether the
//! run converged, the centroids and the centroids of the iteration before (2 k d values, the
//! same on every rank). The assignment is not saved: a resumed run recomputes it from the
//! previous centroids (one assignment pass, exactly the one the iteration made), so that the
//! count of points that change cluster, and with it convergence, is that of an uninterrupted
//! run, and so is the result, bitwise.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use spillway_checkpoint::Checkpointer;
use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::SbVec;

use crate::cluster::assign::{nearest_exact, Centres};
use crate::cluster::points::DistPoints;
use crate::error::AlgoError;
use crate::io::{csv_dimension, parse_csv_chunk, read_range, InputError};
use crate::Progress;

mod survive;

pub use survive::{kmeans_surviving, Finish, Ready, Survived};

/// How the initial centroids are chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Init {
    /// The first `k` points.
    First,
    /// `k` distinct points chosen uniformly with this seed.
    Random(u64),
    /// Centroids read from a CSV file with `k` rows.
    File(PathBuf),
}

impl Init {
    /// Parses `first`, `random`, `random:SEED` or `file:PATH`.
    pub fn parse(s: &str) -> Result<Init, String> {
        match s {
            "first" => Ok(Init::First),
            "random" => Ok(Init::Random(1)),
            _ => {
                if let Some(seed) = s.strip_prefix("random:") {
                    seed.parse()
                        .map(Init::Random)
                        .map_err(|_| format!("invalid seed '{seed}'"))
                } else if let Some(path) = s.strip_prefix("file:") {
                    Ok(Init::File(PathBuf::from(path)))
                } else {
                    Err(format!(
                        "expected first, random[:SEED] or file:PATH, found '{s}'"
                    ))
                }
            }
        }
    }
}

impl std::str::FromStr for Init {
    type Err = String;
    fn from_str(s: &str) -> Result<Init, String> {
        Init::parse(s)
    }
}

impl std::fmt::Display for Init {
    /// The text [`Init::parse`] reads back: `first`, `random:SEED` or `file:PATH`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Init::First => f.write_str("first"),
            Init::Random(seed) => write!(f, "random:{seed}"),
            Init::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

/// K-means parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KMeansOptions {
    /// Number of clusters.
    pub k: usize,
    /// Iteration limit (default 100).
    pub max_iterations: usize,
    /// Initial centroids.
    pub init: Init,
}

/// What [`kmeans_with`] adds to [`KMeansOptions`] (a struct of its own, so that the options
/// keep their fields). The default changes nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KMeansExtra {
    /// Initial centroids held in memory, used instead of [`KMeansOptions::init`]: `k` rows of
    /// the points' dimension, row-major, the same on every rank.
    pub centroids: Option<Vec<f64>>,
    /// Also stop when an iteration's update moves the centroids by at most this: the sum
    /// over centroids of the squared Euclidean distance between their old and new positions
    /// (scikit-learn's `tol` after its scaling). `None`: stop only when no point moves.
    pub tolerance: Option<f64>,
}

/// The result; centroids are the same on every rank.
#[derive(Debug)]
pub struct KMeansResult {
    /// `k` centroids, row-major.
    pub centroids: Vec<f64>,
    /// Cluster of each local point (storage-backed).
    pub assignment: SbVec<u32>,
    /// Iterations performed (assignment passes).
    pub iterations: usize,
    /// Whether the last iteration moved no point, or (with [`KMeansExtra::tolerance`]) moved
    /// the centroids by at most the tolerance.
    pub converged: bool,
    /// Wall time of each iteration on this rank.
    pub iteration_times: Vec<Duration>,
}

fn bad_k(reason: String) -> AlgoError {
    AlgoError::BadParameter { name: "k", reason }
}

/// Where the initial centroids come from: points of the input (global indices, in centroid
/// order) or a file.
pub(crate) enum Chosen<'a> {
    Points(Vec<u64>),
    File(&'a Path),
}

/// Checks `k` against the points and says which points `init` takes as initial centroids.
///
/// # Errors
/// `k` of 0 or larger than the number of points.
pub(crate) fn initial_indices<'a>(
    points: &DistPoints,
    k: usize,
    init: &'a Init,
) -> Result<Chosen<'a>, AlgoError> {
    if k == 0 {
        return Err(bad_k("k must be at least 1".into()));
    }
    if k as u64 > points.total {
        return Err(bad_k(format!(
            "k = {k} is larger than the number of points ({})",
            points.total
        )));
    }
    Ok(match init {
        Init::First => Chosen::Points((0..k as u64).collect()),
        Init::Random(seed) => Chosen::Points(sample_distinct(points.total, k, *seed)),
        Init::File(path) => Chosen::File(path),
    })
}

/// Chooses the initial centroids (identical on every rank).
///
/// # Errors
/// `k` of 0 or larger than the number of points; an init file that does not hold `k` rows of
/// the points' dimension.
pub fn initial_centroids(
    comm: &Comm,
    points: &DistPoints,
    k: usize,
    init: &Init,
) -> Result<Vec<f64>, AlgoError> {
    let dim = points.dim;
    let wanted = match initial_indices(points, k, init)? {
        Chosen::Points(w) => w,
        Chosen::File(path) => return read_centroids(path, k, dim),
    };
    // Each rank contributes (position in `wanted`, point) for the points it owns.
    let mut mine: Vec<f64> = Vec::new();
    for (pos, &idx) in wanted.iter().enumerate() {
        if let Some(i) = points.local_index(idx) {
            mine.push(pos as f64);
            mine.extend_from_slice(points.point(i));
        }
    }
    let (all, _) = comm.allgatherv(&mine)?;
    let mut centroids = vec![0.0; k * dim];
    for rec in all.chunks_exact(dim + 1) {
        let pos = rec[0] as usize;
        centroids[pos * dim..(pos + 1) * dim].copy_from_slice(&rec[1..]);
    }
    Ok(centroids)
}

/// `k` distinct indices of `0..n` (Floyd's algorithm), in selection order.
pub(crate) fn sample_distinct(n: u64, k: usize, seed: u64) -> Vec<u64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut chosen = std::collections::HashSet::with_capacity(k);
    let mut order = Vec::with_capacity(k);
    for j in n - k as u64..n {
        let t = rng.next_u64() % (j + 1);
        let pick = if chosen.contains(&t) { j } else { t };
        chosen.insert(pick);
        order.push(pick);
    }
    order
}

fn read_centroids(path: &Path, k: usize, dim: usize) -> Result<Vec<f64>, AlgoError> {
    let (file_dim, first_line) = csv_dimension(path)?;
    if file_dim != dim {
        return Err(InputError::new(
            path,
            Some(first_line),
            format!("centroids have {file_dim} values, the points have {dim}"),
        )
        .into());
    }
    let file = std::fs::File::open(path).map_err(|e| InputError::io(path, &e))?;
    let len = file.metadata().map_err(|e| InputError::io(path, &e))?.len();
    let bytes = read_range(&file, 0, len).map_err(|e| InputError::io(path, &e))?;
    let chunk = parse_csv_chunk(&bytes, dim);
    if let Some((line, reason)) = chunk.error {
        return Err(InputError::new(path, Some(line + 1), reason).into());
    }
    if chunk.rows as usize != k {
        return Err(InputError::new(
            path,
            None,
            format!("expected {k} centroids, found {}", chunk.rows),
        )
        .into());
    }
    Ok(chunk.values)
}

/// Initial centroids given in memory, checked: `k` (valid for the points) rows of the
/// points' dimension, finite.
fn given_centroids(
    points: &DistPoints,
    k: usize,
    given: Option<&[f64]>,
) -> Result<Vec<f64>, AlgoError> {
    initial_indices(points, k, &Init::First)?;
    let given = given.unwrap_or_default();
    if given.len() != k * points.dim {
        return Err(AlgoError::BadParameter {
            name: "centroids",
            reason: format!(
                "{} values given; {k} centroids of {} values need {}",
                given.len(),
                points.dim,
                k * points.dim
            ),
        });
    }
    if let Some(i) = given.iter().position(|v| !v.is_finite()) {
        return Err(AlgoError::BadParameter {
            name: "centroids",
            reason: format!(
                "centroid {} has the non-finite value {}",
                i / points.dim.max(1),
                given[i]
            ),
        });
    }
    Ok(given.to_vec())
}

/// Index of the centroid nearest to `x` (squared Euclidean distance summed in index order,
/// ties to the lower index): the reference that the blocked kernel of every iteration matches.
pub fn nearest(x: &[f64], centroids: &[f64], dim: usize) -> usize {
    nearest_exact(x, centroids, dim)
}

/// Points assigned per call of the blocked kernel.
const ASSIGN_CHUNK: usize = 4096;

/// Assigns every local point to its nearest centroid (as [`nearest`]) and adds it to its
/// cluster's sum and count in `partial` (`[sums (k*dim), counts (k), ...]`); returns the
/// number of points whose assignment changed.
fn assign_and_aggregate(
    pts: &[f64],
    assignment: &mut [u32],
    centres: &Centres,
    dim: usize,
    partial: &mut [f64],
) -> u64 {
    let k = centres.len();
    let mut changed = 0u64;
    let mut fresh = vec![0u32; ASSIGN_CHUNK];
    for (block, old) in pts
        .chunks(ASSIGN_CHUNK * dim)
        .zip(assignment.chunks_mut(ASSIGN_CHUNK))
    {
        let fresh = &mut fresh[..old.len()];
        centres.assign(block, fresh);
        for ((x, &c), a) in block
            .chunks_exact(dim)
            .zip(fresh.iter())
            .zip(old.iter_mut())
        {
            if *a != c {
                changed += 1;
                *a = c;
            }
            let c = c as usize;
            let sum = &mut partial[c * dim..(c + 1) * dim];
            sum.iter_mut().zip(x).for_each(|(s, v)| *s += v);
            partial[k * dim + c] += 1.0;
        }
    }
    changed
}

/// Assigns every point to its nearest centroid in the blocks of [`assign_and_aggregate`].
fn assign_chunked(pts: &[f64], assignment: &mut [u32], centres: &Centres, dim: usize) {
    for (block, out) in pts
        .chunks(ASSIGN_CHUNK * dim)
        .zip(assignment.chunks_mut(ASSIGN_CHUNK))
    {
        centres.assign(block, out);
    }
}

/// Runs K-means; `progress` is called on every rank after each iteration with the number of
/// points that changed cluster.
///
/// # Errors
/// As [`initial_centroids`]; communication errors.
pub fn kmeans(
    comm: &Comm,
    points: &DistPoints,
    options: &KMeansOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<KMeansResult, AlgoError> {
    kmeans_checkpointed(comm, points, options, progress, None)
}

/// [`kmeans`] with what `extra` adds: initial centroids held in memory, a tolerance on the
/// centroids' movement (see the module notes).
///
/// # Errors
/// As [`kmeans`]; [`AlgoError::BadParameter`] if the given centroids are not `k` rows of the
/// points' dimension, hold a non-finite value, or the tolerance is negative or not finite.
pub fn kmeans_with(
    comm: &Comm,
    points: &DistPoints,
    options: &KMeansOptions,
    extra: &KMeansExtra,
    progress: &mut dyn FnMut(&Progress),
) -> Result<KMeansResult, AlgoError> {
    if let Some(t) = extra.tolerance {
        if !(t.is_finite() && t >= 0.0) {
            return Err(AlgoError::BadParameter {
                name: "tolerance",
                reason: format!("{t} is not a finite number at least 0"),
            });
        }
    }
    run_kmeans(comm, points, options, progress, None, None, None, extra)
}

/// Words before the centroids in a checkpoint part: iterations done, converged, values per
/// set of centroids.
const STATE_WORDS: usize = 3;

/// [`kmeans`] with checkpoints: with `checkpoint`, starts from the state it restores (if any)
/// and saves the state whenever one is due (see the module notes). `progress` is called only
/// for the iterations this call performs.
///
/// # Errors
/// As [`kmeans`]; [`AlgoError::Checkpoint`] if a checkpoint cannot be written or read or
/// belongs to another job; [`AlgoError::BadParameter`] if a restored state does not fit the
/// parameters.
pub fn kmeans_checkpointed(
    comm: &Comm,
    points: &DistPoints,
    options: &KMeansOptions,
    progress: &mut dyn FnMut(&Progress),
    checkpoint: Option<&mut Checkpointer>,
) -> Result<KMeansResult, AlgoError> {
    let extra = KMeansExtra::default();
    run_kmeans(
        comm, points, options, progress, checkpoint, None, None, &extra,
    )
}

/// The state after an iteration, the same on every rank: what a run that survives lost
/// processes keeps ([`kmeans_surviving`]), and where it picks up after a recovery.
#[derive(Debug, Clone, Default)]
struct State {
    /// Iterations done (their all-reduce completed).
    done: usize,
    converged: bool,
    /// The centroids after `done` iterations, and those the last iteration assigned against.
    centroids: Vec<f64>,
    prev: Vec<f64>,
    /// The wall time of each iteration done (on this rank; not exchanged).
    times: Vec<Duration>,
}

impl State {
    /// As values (the same length for every state of a run): done, converged, centroids,
    /// previous centroids.
    fn encode(&self, kd: usize) -> Vec<f64> {
        let mut v = vec![self.done as f64, f64::from(u8::from(self.converged))];
        let pad = |c: &[f64], v: &mut Vec<f64>| {
            v.extend_from_slice(c);
            v.resize(v.len() + kd - c.len().min(kd), f64::NAN);
        };
        pad(&self.centroids, &mut v);
        pad(&self.prev, &mut v);
        v
    }

    fn decode(v: &[f64], kd: usize) -> State {
        State {
            done: v[0] as usize,
            converged: v[1] != 0.0,
            centroids: v[2..2 + kd].to_vec(),
            prev: v[2 + kd..2 + 2 * kd].to_vec(),
            times: Vec::new(),
        }
    }
}

/// [`kmeans_checkpointed`], from `resume` if given, recording its state after every
/// iteration in `keep` if given, with what `extra` adds.
#[allow(clippy::too_many_arguments)]
fn run_kmeans(
    comm: &Comm,
    points: &DistPoints,
    options: &KMeansOptions,
    progress: &mut dyn FnMut(&Progress),
    mut checkpoint: Option<&mut Checkpointer>,
    resume: Option<State>,
    mut keep: Option<&mut State>,
    extra: &KMeansExtra,
) -> Result<KMeansResult, AlgoError> {
    let k = options.k;
    let dim = points.dim;
    let mut assignment: SbVec<u32> = SbVec::zeroed(comm.runtime(), points.len())?;
    assignment
        .as_mut_slice()
        .iter_mut()
        .for_each(|a| *a = u32::MAX);
    let mut times = Vec::new();
    let mut converged = false;
    // Whether the last iteration moved the centroids (a final assignment is then due).
    let mut updated = false;
    let mut iterations = 0;
    let mut centroids = match &resume {
        Some(r) if r.done > 0 => {
            iterations = r.done;
            converged = r.converged;
            updated = !converged && iterations > 0;
            // The assignment the last iteration made: against the centroids it started with.
            assign_chunked(
                points.values.as_slice(),
                assignment.as_mut_slice(),
                &Centres::new(&r.prev, dim),
                dim,
            );
            r.centroids.clone()
        }
        _ if extra.centroids.is_some() => given_centroids(points, k, extra.centroids.as_deref())?,
        _ => {
            let mut centroids = initial_centroids(comm, points, k, &options.init)?;
            // Harp: the driver's centroids are broadcast to every worker.
            comm.bcast(0, &mut centroids)?;
            centroids
        }
    };
    if let Some(keep) = keep.as_deref_mut() {
        *keep = State {
            done: iterations,
            converged,
            centroids: centroids.clone(),
            prev: resume
                .as_ref()
                .map_or_else(|| centroids.clone(), |r| r.prev.clone()),
            times: Vec::new(),
        };
    }
    if let Some(ck) = checkpoint.as_deref_mut() {
        if let Some((seq, part)) = ck.take_restored(comm)? {
            let values: Vec<u64> = part
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect();
            if !part.len().is_multiple_of(8)
                || values.len() != STATE_WORDS + 2 * k * dim
                || values[0] != seq
                || values[2] != (k * dim) as u64
            {
                return Err(AlgoError::BadParameter {
                    name: "checkpoint",
                    reason: format!("checkpoint {seq} does not hold {k} centroids of {dim} values"),
                });
            }
            iterations = seq as usize;
            converged = values[1] != 0;
            updated = !converged && iterations > 0;
            let (prev, now) = values[STATE_WORDS..].split_at(k * dim);
            let prev: Vec<f64> = prev.iter().map(|&w| f64::from_bits(w)).collect();
            centroids = now.iter().map(|&w| f64::from_bits(w)).collect();
            // The assignment the last iteration made: against the centroids it started with.
            assign_chunked(
                points.values.as_slice(),
                assignment.as_mut_slice(),
                &Centres::new(&prev, dim),
                dim,
            );
        }
    }
    // [sums (k*dim), counts (k), changed (1)]
    let mut partial = vec![0.0f64; k * dim + k + 1];
    while !converged && iterations < options.max_iterations {
        let start = Instant::now();
        // The centroids this iteration assigns against, for a checkpoint or a recovery.
        let prev = (checkpoint.is_some() || keep.is_some()).then(|| centroids.clone());
        partial.iter_mut().for_each(|v| *v = 0.0);
        let changed = assign_and_aggregate(
            points.values.as_slice(),
            assignment.as_mut_slice(),
            &Centres::new(&centroids, dim),
            dim,
            &mut partial,
        );
        partial[k * dim + k] = changed as f64;
        let total = comm.allreduce(&partial, Sum)?;
        iterations += 1;
        let moved = total[k * dim + k];
        if moved == 0.0 {
            converged = true;
            updated = false;
        } else {
            // The sum of the centroids' squared movements (the same on every rank).
            let mut shift = 0.0;
            for c in 0..k {
                let count = total[k * dim + c];
                if count > 0.0 {
                    for j in 0..dim {
                        let new = total[c * dim + j] / count;
                        let step = new - centroids[c * dim + j];
                        shift += step * step;
                        centroids[c * dim + j] = new;
                    }
                }
            }
            updated = true;
            converged = extra.tolerance.is_some_and(|t| shift <= t);
            // The sums are the same on every rank: all stop together.
            if let Some(bad) = centroids.iter().position(|v| !v.is_finite()) {
                return Err(AlgoError::Diverged {
                    iteration: iterations,
                    what: format!(
                        "centroid {} has the non-finite coordinate {} (the sums of its \
                         points overflow)",
                        bad / dim.max(1),
                        centroids[bad]
                    ),
                    hint: "scale the input values down",
                });
            }
        }
        times.push(start.elapsed());
        if let (Some(keep), Some(prev)) = (keep.as_deref_mut(), &prev) {
            keep.done = iterations;
            keep.converged = converged;
            keep.centroids.clone_from(&centroids);
            keep.prev.clone_from(prev);
            keep.times.clone_from(&times);
        }
        progress(&Progress {
            iteration: iterations,
            max_iterations: options.max_iterations,
            delta: moved,
        });
        if let (Some(ck), Some(prev)) = (checkpoint.as_deref_mut(), &prev) {
            if ck.due(iterations as u64) {
                let state: Vec<u8> = [iterations as u64, u64::from(converged), (k * dim) as u64]
                    .into_iter()
                    .chain(prev.iter().chain(&centroids).map(|v| v.to_bits()))
                    .flat_map(u64::to_le_bytes)
                    .collect();
                ck.save(comm, iterations as u64, &[&state])?;
            }
        }
        if converged {
            break;
        }
    }
    if updated {
        // The last update moved the centroids: assign once more so that the assignment
        // belongs to the centroids returned.
        Centres::new(&centroids, dim).assign(points.values.as_slice(), assignment.as_mut_slice());
    }
    Ok(KMeansResult {
        centroids,
        assignment,
        iterations,
        converged,
        iteration_times: times,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_runtime::{run, Config};

    /// Points around `k` centres on a line, spread enough that clusters overlap (a
    /// deterministic generator, so that the test needs nothing else).
    fn overlapping(n: usize, dim: usize, k: usize) -> Vec<f64> {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut unit = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n)
            .flat_map(|i| (0..dim).map(move |j| (i % k, j)))
            .map(|(c, j)| if j == 0 { c as f64 } else { 0.0 } + 2.0 * (unit() - 0.5))
            .collect()
    }

    /// Sequential Lloyd as scikit-learn's `lloyd` runs it: stop when no label changes, or
    /// after an update that moved the centroids by at most `tol` (sum of squared movements),
    /// then assign once more. Returns the labels, iterations and centroids.
    fn lloyd(
        x: &[f64],
        dim: usize,
        mut c: Vec<f64>,
        max_iter: usize,
        tol: f64,
    ) -> (Vec<u32>, usize, Vec<f64>) {
        let k = c.len() / dim;
        let label = |c: &[f64]| -> Vec<u32> {
            x.chunks(dim)
                .map(|p| {
                    let d = |j: usize| -> f64 {
                        p.iter()
                            .zip(&c[j * dim..(j + 1) * dim])
                            .map(|(a, b)| (a - b) * (a - b))
                            .sum()
                    };
                    (0..k).fold(0, |best, j| if d(j) < d(best) { j } else { best }) as u32
                })
                .collect()
        };
        let mut labels = vec![u32::MAX; x.len() / dim];
        for it in 1..=max_iter {
            let fresh = label(&c);
            if fresh == labels {
                return (labels, it, c);
            }
            labels = fresh;
            let mut next = c.clone();
            for j in 0..k {
                let members: Vec<&[f64]> = x
                    .chunks(dim)
                    .zip(&labels)
                    .filter(|(_, &l)| l as usize == j)
                    .map(|(p, _)| p)
                    .collect();
                if !members.is_empty() {
                    for t in 0..dim {
                        next[j * dim + t] =
                            members.iter().map(|p| p[t]).sum::<f64>() / members.len() as f64;
                    }
                }
            }
            let shift: f64 = next.iter().zip(&c).map(|(a, b)| (a - b) * (a - b)).sum();
            c = next;
            if shift <= tol {
                return (label(&c), it, c);
            }
        }
        (label(&c), max_iter, c)
    }

    #[test]
    fn given_centroids_and_tolerance_match_sequential_lloyd() {
        let (n, dim, k) = (3000, 3, 4);
        let x = overlapping(n, dim, k);
        let init: Vec<f64> = x[..k * dim].to_vec();
        for tol in [None, Some(0.0), Some(1e-4), Some(1e-2)] {
            let (labels, iters, centres) = lloyd(&x, dim, init.clone(), 300, tol.unwrap_or(-1.0));
            for (ranks, nodes) in [(1, 1), (3, 2)] {
                let parts = run(
                    &Config::new(ranks).nodes(nodes),
                    |rank| -> Result<_, AlgoError> {
                        let world = Comm::world(rank);
                        let (p, r) = (world.size(), world.rank());
                        let (lo, hi) = (n * r / p, n * (r + 1) / p);
                        let points = DistPoints {
                            dim,
                            total: n as u64,
                            first: lo as u64,
                            values: SbVec::from_slice(rank, &x[lo * dim..hi * dim])?,
                            more: Vec::new(),
                        };
                        let options = KMeansOptions {
                            k,
                            max_iterations: 300,
                            init: Init::Random(9),
                        };
                        let extra = KMeansExtra {
                            centroids: Some(init.clone()),
                            tolerance: tol,
                        };
                        let out = kmeans_with(&world, &points, &options, &extra, &mut |_| {})?;
                        Ok((
                            out.assignment.to_vec(),
                            out.iterations,
                            out.centroids,
                            out.converged,
                        ))
                    },
                )
                .expect("the job runs");
                let got: Vec<u32> = parts.iter().flat_map(|p| p.0.clone()).collect();
                assert_eq!(got, labels, "tol {tol:?}, {ranks} ranks");
                for p in &parts {
                    assert_eq!(p.1, iters, "tol {tol:?}, {ranks} ranks");
                    assert!(p.3 && p.1 < 300);
                    let diff =
                        p.2.iter()
                            .zip(&centres)
                            .map(|(a, b)| (a - b).abs())
                            .fold(0.0, f64::max);
                    assert!(diff < 1e-9, "tol {tol:?}: centroids differ by {diff}");
                }
            }
        }
        // A larger tolerance stops earlier than none.
        assert!(lloyd(&x, dim, init.clone(), 300, 1e-2).1 < lloyd(&x, dim, init, 300, -1.0).1);
    }

    #[test]
    fn given_centroids_are_checked() {
        let x = overlapping(10, 2, 2);
        let err = run(&Config::new(2), |rank| -> Result<_, AlgoError> {
            let world = Comm::world(rank);
            let points = DistPoints {
                dim: 2,
                total: 10,
                first: 5 * world.rank() as u64,
                values: SbVec::from_slice(rank, &x[10 * world.rank()..10 * world.rank() + 10])?,
                more: Vec::new(),
            };
            let options = KMeansOptions {
                k: 2,
                max_iterations: 5,
                init: Init::First,
            };
            let extra = KMeansExtra {
                centroids: Some(vec![0.0; 3]),
                tolerance: None,
            };
            kmeans_with(&world, &points, &options, &extra, &mut |_| {}).map(drop)
        })
        .unwrap_err();
        let algo = err.rank_error::<AlgoError>().expect("an algorithm error");
        assert!(
            algo.is_bad_input() && algo.to_string().contains("3 values given"),
            "{algo}"
        );
    }
}
