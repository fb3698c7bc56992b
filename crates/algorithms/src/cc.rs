//! Connected components as MapReduce: small-star and large-star (Kiveris et al.; thesis
//! algorithms 6-9), alternating or two-phase. Edges are undirected; the label of a vertex is
//! the smallest vertex id of its component.
//!
//! * Large-star: every edge goes to both endpoints; vertex `u` with neighbours `N` and
//!   `m = min(N + u)` links every neighbour `v > u` to `m`.
//! * Small-star: every edge goes to its larger endpoint; vertex `u` with the smaller
//!   neighbours `N` and `m = min(N + u)` links `N + u` (except `m`) to `m`.
//!
//! Both keep the connectivity and end in stars centred at each component's smallest
//! vertex. Self loops only make a vertex exist: they are kept aside and join the labelling.

use std::path::Path;

use spillway_comm::{Collectives, Comm, Sum};
use spillway_mapreduce::{
    Chain, Dataset, DatasetBuilder, Emitter, MapReduce, OpStats, Output, Values,
};

use crate::error::AlgoError;
use crate::graph::{agree_on_error, heap_allowance, read_chunks};
use crate::input::parse_snap_chunk;

/// The order of the star operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Large-star, small-star, repeated until neither changes the graph.
    Alternating,
    /// Large-star until it changes nothing, then one small-star; repeated until the
    /// small-star changes nothing either.
    TwoPhase,
}

/// What a run did.
#[derive(Debug)]
pub struct CcResult {
    /// `(vertex, label)` for every vertex of an edge whose hash this rank owns.
    pub labels: Dataset<u32, u32>,
    /// Star operations run (large and small).
    pub star_operations: usize,
    /// Statistics of every operation (the last one is the labelling), totals over ranks.
    pub stats: Vec<OpStats>,
}

/// Edges `(u, v)` of an undirected graph (each edge once, in either direction).
pub type Edges = Dataset<u32, u32>;

/// Reads a SNAP edge list ("src dst" per line, `#` comments) into a dataset of edges, each
/// rank reading its line-aligned part in chunks; returns the edges without self loops and
/// the vertices that have self loops (as `(v, v)`).
///
/// # Errors
/// [`AlgoError::Input`] with the file, line and reason of the first malformed line (the
/// same on every rank), or an unreadable file.
pub fn load_edges(comm: &Comm, path: &Path) -> Result<(Edges, Edges), AlgoError> {
    let rank = comm.runtime();
    let mut edges = DatasetBuilder::new(rank)?;
    let mut loops = DatasetBuilder::new(rank)?;
    let chunk = heap_allowance(comm) / 2;
    let (read, before) = read_chunks(comm, path, 0, chunk, |bytes| {
        let parsed = parse_snap_chunk(bytes);
        for &(u, v) in &parsed.edges {
            if u == v {
                loops.push(&u, &v)?;
            } else {
                edges.push(&u, &v)?;
            }
        }
        Ok(parsed.error)
    })?;
    agree_on_error(comm, path, read.error, before)?;
    Ok((edges.finish()?, loops.finish()?))
}

/// The distinct values of a key, sorted.
fn neighbours(values: Values<'_, u32>) -> Vec<u32> {
    let mut n: Vec<u32> = values.collect();
    n.sort_unstable();
    n.dedup();
    n
}

/// One large-star operation; returns the new edges and how many of them changed.
fn large_star(
    mr: &mut MapReduce,
    comm: &Comm,
    edges: Dataset<u32, u32>,
) -> Result<(Dataset<u32, u32>, u64), AlgoError> {
    let mut changed = 0u64;
    let out = mr.map_reduce(
        edges,
        |u: u32, v: u32, emit: &mut Emitter<'_, u32, u32>| {
            emit.emit(&u, v);
            emit.emit(&v, u);
        },
        |u: u32, values, out: &mut Output<u32, u32>| {
            let n = neighbours(values);
            let m = n[0].min(u);
            for &v in n.iter().filter(|&&v| v > u) {
                out.emit(&v, &m);
                changed += u64::from(m != u);
            }
        },
    )?;
    Ok((out, comm.allreduce(&[changed], Sum)?[0]))
}

/// One small-star operation; returns the new edges and how many edges changed.
fn small_star(
    mr: &mut MapReduce,
    comm: &Comm,
    edges: Dataset<u32, u32>,
) -> Result<(Dataset<u32, u32>, u64), AlgoError> {
    let mut changed = 0u64;
    let out = mr.map_reduce(
        edges,
        |u: u32, v: u32, emit: &mut Emitter<'_, u32, u32>| {
            emit.emit(&u.max(v), u.min(v));
        },
        |u: u32, values, out: &mut Output<u32, u32>| {
            let n = neighbours(values);
            let m = n[0].min(u);
            for &v in n.iter().chain(std::iter::once(&u)) {
                if v != m {
                    out.emit(&v, &m);
                }
            }
            // The edges (u, v) became (v, m): all but the one to m moved.
            changed += (n.len() - 1) as u64;
        },
    )?;
    Ok((out, comm.allreduce(&[changed], Sum)?[0]))
}

/// Connected components of the undirected graph `edges` plus the vertices of `loops`.
///
/// # Errors
/// Communication and spill errors.
pub fn connected_components(
    comm: &Comm,
    edges: Dataset<u32, u32>,
    loops: Dataset<u32, u32>,
    variant: Variant,
    memory: Option<usize>,
) -> Result<CcResult, AlgoError> {
    let mut mr = MapReduce::new(comm);
    if let Some(m) = memory {
        mr = mr.memory(m);
    }
    let mut edges = edges;
    let mut ops = 0;
    match variant {
        Variant::Alternating => loop {
            let (e, large) = large_star(&mut mr, comm, edges)?;
            let (e, small) = small_star(&mut mr, comm, e)?;
            edges = e;
            ops += 2;
            if large == 0 && small == 0 {
                break;
            }
        },
        Variant::TwoPhase => loop {
            loop {
                let (e, large) = large_star(&mut mr, comm, edges)?;
                edges = e;
                ops += 1;
                if large == 0 {
                    break;
                }
            }
            let (e, small) = small_star(&mut mr, comm, edges)?;
            edges = e;
            ops += 1;
            if small == 0 {
                break;
            }
        },
    }
    // The graph is now stars centred at each component's smallest vertex: every vertex's
    // label is the smallest id among itself and its neighbours.
    let labels = mr.map_combine_reduce(
        Chain(edges, loops),
        |u: u32, v: u32, emit: &mut Emitter<'_, u32, u32>| {
            let m = u.min(v);
            emit.emit(&u, m);
            emit.emit(&v, m);
        },
        |a, b| *a = (*a).min(b),
        |v: u32, labels: Values<'_, u32>, out: &mut Output<u32, u32>| {
            out.emit(&v, &labels.min().expect("a vertex has a label"))
        },
    )?;
    let stats = mr
        .stats()
        .iter()
        .map(|s| s.total(comm))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CcResult {
        labels,
        star_operations: ops,
        stats,
    })
}
