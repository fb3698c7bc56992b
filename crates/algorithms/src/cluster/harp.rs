//! Lloyd's K-means for a large `k` (Harp's "regroup + allgather"): the centroids and the
//! partial sums, not the points, dominate memory.
//!
//! # Semantics
//! The same iterations as [`kmeans()`](crate::cluster::kmeans::kmeans) (nearest centroid by squared
//! Euclidean distance, ties to the lower index; a cluster that lost all its points keeps its
//! centroid; stop when no point moves or at the iteration limit, then assign once more), so
//! the assignments equal those of the allreduce version (the sums may be added in another
//! order, which changes centroids in the last bits only).
//!
//! # How data moves (per iteration)
//! 1. *Compute*: every rank assigns its points against its node's single copy of the
//!    centroids (a read-only [`Aggregate`] shared by the node's ranks), prepared for the
//!    blocked kernel once per node and iteration.
//! 2. *Reduce* (local aggregation, then regroup): every rank adds its points to its node's one
//!    buffer of sums and counts; between nodes the node buffers are combined by a ring
//!    reduce-scatter ([`Collectives::aggregate_scatter`]) so that rank `r` gets the sums and
//!    counts of the centroids it owns, `k r / p .. k (r + 1) / p`, and computes only those.
//! 3. *Allgather*: each rank writes its range into its node's new copy of the centroids (one
//!    buffer per node again), and the node copies are completed by a ring allgather
//!    ([`Collectives::aggregate_gather`]). The number of points moved travels as one more
//!    element of the last rank's block in both steps, so an iteration has two collectives.
//!
//! # Memory
//! Per node, however many ranks it runs: one buffer of sums (`k (d + 1)` values), the
//! centroids (`k d`) and the kernel's two prepared copies of them (`2 k d`); the sums and the
//! prepared copies are freed before the new centroids are gathered, so old and new centroids
//! (`2 k d`) never coexist with them.
//! Compare [`kmeans()`](crate::cluster::kmeans::kmeans), where every rank holds the centroids and a
//! `k (d + 1)` partial sum across its allreduce.
//!
//! # Cost per iteration (n local points, l nodes)
//! O(n k d) local work; between nodes, a ring reduce-scatter of `k (d + 1)` values and a ring
//! allgather of `k d` values: each node sends and receives `(l - 1) / l` of each (an allreduce
//! of the sums followed by one of the centroids would move at least twice that).

use std::time::{Duration, Instant};

use spillway_comm::{Aggregate, Collectives, Comm, Sum};
use spillway_runtime::SbVec;

use crate::cluster::assign::Centres;
use crate::cluster::kmeans::{initial_indices, Chosen, Init, KMeansOptions};
use crate::cluster::points::DistPoints;
use crate::error::AlgoError;
use crate::Progress;

/// Centroid values (`k * d`) above which [`prefer_regroup`] chooses this version: 2^20 (8 MiB
/// of centroids per copy).
pub const REGROUP_THRESHOLD: usize = 1 << 20;

/// Whether `k` clusters of `d` dimensions are large enough for the regroup version.
pub fn prefer_regroup(k: usize, d: usize) -> bool {
    k.saturating_mul(d) >= REGROUP_THRESHOLD
}

/// Time of one iteration's phases on this rank.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseTimes {
    /// Spreading the new centroids (the allgather into the node copies), including waiting.
    pub bcast: Duration,
    /// Assigning the local points.
    pub compute: Duration,
    /// Combining the sums (local aggregation and between nodes) and the regroup.
    pub reduce: Duration,
}

/// The result of [`kmeans_regroup`].
#[derive(Debug)]
pub struct RegroupResult {
    /// The node's copy of the final centroids (`k` rows, row-major), shared read-only.
    pub centroids: Aggregate<f64>,
    /// Cluster of each local point.
    pub assignment: SbVec<u32>,
    /// Iterations performed (assignment passes).
    pub iterations: usize,
    /// Whether the last iteration moved no point.
    pub converged: bool,
    /// Wall time of each iteration on this rank.
    pub iteration_times: Vec<Duration>,
    /// The phases of each iteration on this rank.
    pub phases: Vec<PhaseTimes>,
}

/// The initial centroids, as one copy per node: each rank writes the chosen points it owns.
fn initial(
    comm: &Comm,
    points: &DistPoints,
    k: usize,
    init: &Init,
) -> Result<Aggregate<f64>, AlgoError> {
    let dim = points.dim;
    let wanted: Vec<u64> = match initial_indices(points, k, init)? {
        Chosen::Points(w) => w,
        Chosen::File(_) => {
            // Read on every rank (as the allreduce version does); rank 0 writes it.
            let c = crate::cluster::kmeans::initial_centroids(comm, points, k, init)?;
            let first = comm.rank() == 0;
            return Ok(comm.aggregate(0.0, k * dim, Sum, &mut |buf| {
                if first {
                    buf.copy_from_slice(&c);
                }
            })?);
        }
    };
    let mine: Vec<(usize, usize)> = wanted
        .iter()
        .enumerate()
        .filter_map(|(pos, &i)| Some((pos, points.local_index(i)?)))
        .collect();
    Ok(comm.aggregate(0.0, k * dim, Sum, &mut |buf| {
        for &(pos, i) in &mine {
            let x = points.point(i);
            buf[pos * dim..(pos + 1) * dim].copy_from_slice(x);
        }
    })?)
}

/// Points assigned per call of the blocked kernel.
const ASSIGN_CHUNK: usize = 4096;

/// Runs K-means with node-level aggregation, regroup and allgather; `progress` is called on
/// every rank after each iteration with the number of points that changed cluster.
///
/// # Errors
/// As [`crate::cluster::kmeans::initial_centroids`]; communication errors.
pub fn kmeans_regroup(
    comm: &Comm,
    points: &DistPoints,
    options: &KMeansOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RegroupResult, AlgoError> {
    let k = options.k;
    let dim = points.dim;
    let (p, r) = (comm.size(), comm.rank());
    // Rank `q` owns centroids `k q / p .. k (q + 1) / p`: their sums and count (`d + 1`
    // values each) after the regroup, their `d` coordinates in the allgather; the last rank
    // also carries the number of points moved.
    let owned = |q: usize| k * q / p..k * (q + 1) / p;
    let own = owned(r);
    let extra = |q: usize| usize::from(q + 1 == p);
    let sum_counts: Vec<usize> = (0..p)
        .map(|q| owned(q).len() * (dim + 1) + extra(q))
        .collect();
    let gather_counts: Vec<usize> = (0..p).map(|q| owned(q).len() * dim + extra(q)).collect();
    let mut centroids = initial(comm, points, k, &options.init)?;
    let mut assignment: SbVec<u32> = SbVec::zeroed(comm.runtime(), points.len())?;
    assignment
        .as_mut_slice()
        .iter_mut()
        .for_each(|a| *a = u32::MAX);
    let mut times = Vec::new();
    let mut phases = Vec::new();
    let mut converged = false;
    let mut iterations = 0;
    let mut fresh = vec![0u32; ASSIGN_CHUNK];
    // Keys of the node's prepared centroids: fresh for this call, one per iteration.
    let base_key = comm.dup().context_id();
    while iterations < options.max_iterations {
        let start = Instant::now();
        // Compute, against one prepared copy of the centroids per node: the first rank of the
        // node to get here builds it, the others share it (every rank holds it until the sums
        // are combined, after all of them have assigned).
        let key = base_key ^ (iterations as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let centres = comm
            .runtime()
            .node_table()
            .cached(key, || Centres::new(&centroids, dim));
        let mut changed = 0u64;
        {
            let pts = points.values.as_slice();
            for (block, old) in pts
                .chunks(ASSIGN_CHUNK * dim)
                .zip(assignment.as_mut_slice().chunks_mut(ASSIGN_CHUNK))
            {
                let fresh = &mut fresh[..old.len()];
                centres.assign(block, fresh);
                for (a, &c) in old.iter_mut().zip(fresh.iter()) {
                    if *a != c {
                        changed += 1;
                        *a = c;
                    }
                }
            }
        }
        let computed = Instant::now();
        // Reduce: local aggregation into the node's buffer, then a reduce-scatter between
        // nodes (regroup) so that this rank gets the sums and counts of its centroids; the
        // last rank's block also holds the number of points moved.
        let assign = assignment.as_slice();
        let sums = comm.aggregate_scatter(0.0, &sum_counts, Sum, &mut |buf| {
            for (x, &c) in points.values.as_slice().chunks_exact(dim).zip(assign) {
                let row = &mut buf[c as usize * (dim + 1)..(c as usize + 1) * (dim + 1)];
                row[..dim].iter_mut().zip(x).for_each(|(s, v)| *s += v);
                row[dim] += 1.0;
            }
            buf[k * (dim + 1)] += changed as f64;
        })?;
        drop(centres);
        iterations += 1;
        // This rank's new centroids (a cluster without points keeps its centroid), and, on
        // the last rank, the points moved.
        let mut mine = Vec::with_capacity(own.len() * dim + 1);
        for (c, row) in own.clone().zip(sums.chunks_exact(dim + 1)) {
            let count = row[dim];
            if count > 0.0 {
                mine.extend(row[..dim].iter().map(|s| s / count));
            } else {
                mine.extend_from_slice(&centroids[c * dim..(c + 1) * dim]);
            }
        }
        if r + 1 == p {
            mine.push(sums[sums.len() - 1]);
        }
        drop(sums);
        let reduced = Instant::now();
        // Allgather into the node's new copy; the last element carries the points moved.
        let gathered = comm.aggregate_gather(&gather_counts, &mut |buf| {
            buf.copy_from_slice(&mine);
        })?;
        let moved = gathered[k * dim];
        // Every rank gathered the same centroids: all stop together.
        if let Some(bad) = gathered[..k * dim].iter().position(|v| !v.is_finite()) {
            return Err(AlgoError::Diverged {
                iteration: iterations,
                what: format!(
                    "centroid {} has the non-finite coordinate {} (the sums of its points \
                     overflow)",
                    bad / dim.max(1),
                    gathered[bad]
                ),
                hint: "scale the input values down",
            });
        }
        let end = Instant::now();
        phases.push(PhaseTimes {
            bcast: end - reduced,
            compute: computed - start,
            reduce: reduced - computed,
        });
        times.push(end - start);
        progress(&Progress {
            iteration: iterations,
            max_iterations: options.max_iterations,
            delta: moved,
        });
        if moved == 0.0 {
            // No point moved: the centroids that gave this assignment are the result.
            converged = true;
            break;
        }
        centroids = gathered.truncated(k * dim);
    }
    if !converged && iterations > 0 {
        // The last update moved the centroids: assign once more so that the assignment
        // belongs to the centroids returned.
        Centres::new(&centroids, dim).assign(points.values.as_slice(), assignment.as_mut_slice());
    }
    Ok(RegroupResult {
        centroids,
        assignment,
        iterations,
        converged,
        iteration_times: times,
        phases,
    })
}
