//! Spherical K-means on sparse rows, as in BDMPI's benchmark (section VI).
//!
//! # Semantics
//! Rows are L2-normalised (an all-zero row stays zero). Every iteration rank 0 broadcasts the
//! `k` centroids; every rank assigns each of its rows to the centroid of largest dot product
//! (ties to the lower index; the dot product of a row sums its non-zeros in increasing column
//! order), and adds the row to its cluster's partial sum; the partial sums are reduced to rank
//! 0, whose new centroids are the normalised sums (a cluster whose sum is zero keeps its
//! centroid). Iteration stops when no row changes cluster, or after `max_iterations`, in which
//! case the rows are assigned once more to the centroids returned. The initial centroids are
//! `k` rows: the first `k` of the matrix, or `k` distinct rows chosen with a seed (the same
//! choice as dense K-means makes).
//!
//! # Data
//! The matrix is a 1-D row decomposition balanced by non-zeros ([`load_rows`]); centroids are
//! dense (`k` x columns) and, like the partial sums, storage-backed.
//!
//! # Cost per iteration (z local non-zeros, d columns)
//! O(z k) local work; a broadcast and a reduce of `k d + 2` values.
//!
//! [`load_rows`]: crate::io::load_rows

use std::time::{Duration, Instant};

use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::SbVec;

use crate::cluster::kmeans::{sample_distinct, Init};
use crate::error::AlgoError;
use crate::io::DistRows;
use crate::state::{check_state, Origin};
use crate::Progress;

/// Spherical K-means parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpKMeansOptions {
    /// Number of clusters.
    pub k: usize,
    /// Iteration limit.
    pub max_iterations: usize,
    /// Initial centroids: [`Init::First`] or [`Init::Random`] (rows of the matrix).
    pub init: Init,
}

/// The result; centroids are the same on every rank.
#[derive(Debug)]
pub struct SpKMeansResult {
    /// `k` unit-length (or zero) centroids of `cols` values, row-major.
    pub centroids: Vec<f64>,
    /// Cluster of each local row.
    pub assignment: SbVec<u32>,
    /// Assignment passes performed (not counting the final one after the limit).
    pub iterations: usize,
    /// Whether the last iteration moved no row.
    pub converged: bool,
    /// Wall time of each iteration on this rank.
    pub iteration_times: Vec<Duration>,
}

/// Scales every local row to unit L2 norm (rows of zeros stay zero).
pub fn normalize_rows(rows: &mut DistRows) {
    let offsets = rows.offsets.as_slice().to_vec();
    let values = rows.values.as_mut_slice();
    for w in offsets.windows(2) {
        let row = &mut values[w[0] as usize..w[1] as usize];
        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm > 0.0 {
            row.iter_mut().for_each(|v| *v /= norm);
        }
    }
}

fn bad(reason: String) -> AlgoError {
    AlgoError::BadParameter { name: "k", reason }
}

/// The initial centroids, transposed (`ct[col * k + c]`), on rank 0; empty elsewhere.
fn initial(comm: &Comm, rows: &DistRows, options: &SpKMeansOptions) -> Result<Vec<f64>, AlgoError> {
    let k = options.k;
    if k == 0 {
        return Err(bad("k must be at least 1".into()));
    }
    if k as u64 > rows.rows {
        return Err(bad(format!(
            "k = {k} is larger than the number of rows ({})",
            rows.rows
        )));
    }
    let wanted: Vec<u64> = match &options.init {
        Init::First => (0..k as u64).collect(),
        Init::Random(seed) => sample_distinct(rows.rows, k, *seed),
        Init::File(_) => {
            return Err(AlgoError::BadParameter {
                name: "init",
                reason: "spherical K-means starts from rows: first or random[:SEED]".into(),
            })
        }
    };
    // Records [position, nnz, cols..., values...] of the wanted rows this rank owns.
    let mut mine: Vec<f64> = Vec::new();
    for (pos, &r) in wanted.iter().enumerate() {
        if r >= rows.lo && r < rows.hi {
            let (cols, vals) = rows.row((r - rows.lo) as usize);
            mine.push(pos as f64);
            mine.push(cols.len() as f64);
            mine.extend(cols.iter().map(|&c| f64::from(c)));
            mine.extend_from_slice(vals);
        }
    }
    let gathered = comm.gatherv(0, &mine)?;
    let d = rows.cols as usize;
    let Some((all, _)) = gathered else {
        return Ok(Vec::new());
    };
    let mut ct = vec![0.0; d * k];
    let mut at = 0;
    while at < all.len() {
        let pos = all[at] as usize;
        let nnz = all[at + 1] as usize;
        let cols = &all[at + 2..at + 2 + nnz];
        let vals = &all[at + 2 + nnz..at + 2 + 2 * nnz];
        for (&c, &v) in cols.iter().zip(vals) {
            ct[c as usize * k + pos] = v;
        }
        at += 2 + 2 * nnz;
    }
    Ok(ct)
}

/// Index of the largest value (ties to the lower index).
fn argmax(sims: &[f64]) -> usize {
    let mut best = 0;
    for (c, &s) in sims.iter().enumerate().skip(1) {
        if s > sims[best] {
            best = c;
        }
    }
    best
}

/// Dot products of one row with every centroid (transposed centroids `ct`, `k` per column).
fn similarities(cols: &[u32], vals: &[f64], ct: &[f64], sims: &mut [f64]) {
    let k = sims.len();
    sims.iter_mut().for_each(|s| *s = 0.0);
    for (&j, &v) in cols.iter().zip(vals) {
        let col = &ct[j as usize * k..(j as usize + 1) * k];
        for (s, &c) in sims.iter_mut().zip(col) {
            *s += v * c;
        }
    }
}

/// Runs spherical K-means on rows already normalised with [`normalize_rows`]; `progress` is
/// called on every rank after each iteration with the number of rows that changed cluster.
///
/// # Errors
/// `k` of 0 or above the number of rows, `file:` initialisation; communication errors.
pub fn spkmeans(
    comm: &Comm,
    rows: &DistRows,
    options: &SpKMeansOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<SpKMeansResult, AlgoError> {
    let k = options.k;
    let d = rows.cols as usize;
    let root = comm.rank() == 0;
    // Every rank keeps the transposed centroids and its partial sums, dense.
    let dense = (d as u64).saturating_mul(k as u64).saturating_mul(8);
    check_state(
        comm,
        dense.saturating_mul(2 * comm.size() as u64 + 1),
        &format!(
            "{k} dense centroids of {d} columns on {} ranks",
            comm.size()
        ),
        Origin::Parameter {
            name: "k",
            what: "the centroids",
        },
    )?;
    let ct0 = initial(comm, rows, options)?;
    // [stop (0 go, 1 converged, 2 limit), rows moved in the last iteration, centroids^T...]
    let mut msg: SbVec<f64> = SbVec::zeroed(comm.runtime(), 2 + d * k)?;
    if root {
        msg.as_mut_slice()[2..].copy_from_slice(&ct0);
    }
    drop(ct0);
    let n = rows.local_rows();
    let mut assignment: SbVec<u32> = SbVec::zeroed(comm.runtime(), n)?;
    assignment
        .as_mut_slice()
        .iter_mut()
        .for_each(|a| *a = u32::MAX);
    let mut partial: SbVec<f64> = SbVec::zeroed(comm.runtime(), d * k + 1)?;
    let mut sims = vec![0.0; k];
    let mut times = Vec::new();
    let mut iterations = 0;
    let mut start = Instant::now();
    loop {
        comm.bcast_into(0, msg.as_mut_slice())?;
        let m = msg.as_slice();
        if iterations > 0 {
            times.push(start.elapsed());
            progress(&Progress {
                iteration: iterations,
                max_iterations: options.max_iterations,
                delta: m[1],
            });
        }
        if m[0] != 0.0 || options.max_iterations == 0 {
            break;
        }
        start = Instant::now();
        let ct = &m[2..];
        let part = partial.as_mut_slice();
        part.iter_mut().for_each(|v| *v = 0.0);
        let mut changed = 0u64;
        for (i, a) in assignment.as_mut_slice().iter_mut().enumerate() {
            let (cols, vals) = rows.row(i);
            similarities(cols, vals, ct, &mut sims);
            let best = argmax(&sims);
            if *a != best as u32 {
                changed += 1;
                *a = best as u32;
            }
            for (&j, &v) in cols.iter().zip(vals) {
                part[j as usize * k + best] += v;
            }
        }
        part[d * k] = changed as f64;
        if !root {
            // The centroids are read for this iteration only (the next broadcast overwrites
            // them): forgotten, they are neither written back while this rank waits nor read
            // back (2 x 2.5 MB a rank at 20,000 terms and k = 16).
            msg.discard();
        }
        let total = comm.reduce(0, partial.as_slice(), Sum)?;
        // Likewise the partial sums, zeroed again before their next use.
        partial.discard();
        iterations += 1;
        if let Some(total) = total {
            let m = msg.as_mut_slice();
            let moved = total[d * k];
            m[1] = moved;
            if moved == 0.0 {
                m[0] = 1.0;
            } else {
                let mut norms = vec![0.0; k];
                for j in 0..d {
                    for (c, nrm) in norms.iter_mut().enumerate() {
                        let v = total[j * k + c];
                        *nrm += v * v;
                    }
                }
                let norms: Vec<f64> = norms.iter().map(|v| v.sqrt()).collect();
                for j in 0..d {
                    for c in 0..k {
                        if norms[c] > 0.0 {
                            m[2 + j * k + c] = total[j * k + c] / norms[c];
                        }
                    }
                }
                if iterations >= options.max_iterations {
                    m[0] = 2.0;
                }
            }
        }
    }
    let m = msg.as_slice();
    let converged = m[0] == 1.0;
    if !converged {
        // The last update moved the centroids: assign once more so that the assignment
        // belongs to the centroids returned.
        let ct = &m[2..];
        for (i, a) in assignment.as_mut_slice().iter_mut().enumerate() {
            let (cols, vals) = rows.row(i);
            similarities(cols, vals, ct, &mut sims);
            *a = argmax(&sims) as u32;
        }
    }
    let mut centroids = vec![0.0; k * d];
    for j in 0..d {
        for c in 0..k {
            centroids[c * d + j] = m[2 + j * k + c];
        }
    }
    Ok(SpKMeansResult {
        centroids,
        assignment,
        iterations,
        converged,
        iteration_times: times,
    })
}
