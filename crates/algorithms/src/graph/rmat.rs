//! R-MAT with duplicate removal as MapReduce (thesis algorithms 10-11): every rank
//! generates its share of the edges in the map, and the reduce keeps one edge per key.

use spillway_comm::Comm;
use spillway_mapreduce::{Dataset, Emitter, MapReduce, OpStats, Output};

use crate::error::AlgoError;
use crate::generate::RmatSpec;
use crate::io::chunks::heap_allowance;

/// Distinct directed edges as keys (no values).
pub type EdgeSet = Dataset<(u32, u32), ()>;

/// The distinct edges of the R-MAT graph `spec` (directed: `(u, v)` and `(v, u)` are
/// different), each on the rank that owns its hash, and the operation's statistics (totals
/// over ranks).
///
/// # Errors
/// Communication and spill errors.
pub fn rmat_dedup(comm: &Comm, spec: &RmatSpec) -> Result<(EdgeSet, OpStats), AlgoError> {
    let e = spec.num_edges();
    let (p, r) = (comm.size() as u64, comm.rank() as u64);
    // The map's input: this rank's slices of edge indices, generated in bounded batches.
    let step = (heap_allowance(comm) / 8).max(1) as u64;
    let (lo, hi) = (e * r / p, e * (r + 1) / p);
    let batches = Dataset::from_local(
        comm.runtime(),
        (lo..hi)
            .step_by(step as usize)
            .map(|a| (a, (a + step).min(hi))),
    )?;
    let mut mr = MapReduce::new(comm);
    let mut buf = Vec::new();
    let edges = mr.map_combine_reduce(
        batches,
        |a: u64, b: u64, emit: &mut Emitter<'_, (u32, u32), ()>| {
            buf.clear();
            spec.edges(a..b, &mut buf);
            for edge in &buf {
                emit.emit(edge, ());
            }
        },
        |_, _| {},
        |edge: (u32, u32), _, out: &mut Output<(u32, u32), ()>| out.emit(&edge, &()),
    )?;
    let stats = mr.stats()[0].total(comm)?;
    Ok((edges, stats))
}
