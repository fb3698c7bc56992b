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

use spillway_comm::Comm;

use spillway_checkpoint::{header, split_header, Checkpointer};
use spillway_mapreduce::{
    Chain, Dataset, DatasetBuilder, Emitter, FaultTolerance, FtStats, Input, MapReduce, OpStats,
    Output, Values,
};

use crate::error::AlgoError;
use crate::io::chunks::{agree_on_error, heap_allowance, read_chunks};
use crate::io::parse_snap_chunk;

/// The order of the star operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Large-star, small-star, repeated until neither changes the graph.
    Alternating,
    /// Large-star until it changes nothing, then one small-star; repeated until the
    /// small-star changes nothing either.
    TwoPhase,
}

impl Variant {
    /// Both variants.
    pub const ALL: [Variant; 2] = [Variant::Alternating, Variant::TwoPhase];

    /// The variant's name on a command line: `alternating` or `two-phase`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Alternating => "alternating",
            Variant::TwoPhase => "two-phase",
        }
    }
}

/// What a run did.
#[derive(Debug)]
pub struct CcResult<'r> {
    /// `(vertex, label)` for every vertex of an edge whose hash this rank owns.
    pub labels: Dataset<u32, u32>,
    /// Star operations run (large and small).
    pub star_operations: usize,
    /// Statistics of every operation (the last one is the labelling), totals over ranks.
    pub stats: Vec<OpStats>,
    /// Fault-tolerance costs over all ranks (with fault tolerance).
    pub ft: Option<FtStats>,
    /// The ranks still in the job (all of them unless ranks were lost).
    pub comm: Comm<'r>,
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

/// The operations' total that counts the changed edges (exact in an f64 below 2^53 edges).
const CHANGED: usize = 0;

/// One large-star operation; returns the new edges and how many of them changed.
fn large_star(
    mr: &mut MapReduce,
    edges: impl Input<Key = u32, Value = u32>,
) -> Result<(Dataset<u32, u32>, u64), AlgoError> {
    let out = mr.map_reduce(
        edges,
        |u: u32, v: u32, emit: &mut Emitter<'_, u32, u32>| {
            emit.emit(&u, v);
            emit.emit(&v, u);
        },
        move |u: u32, values, out: &mut Output<u32, u32>| {
            let n = neighbours(values);
            let m = n[0].min(u);
            for &v in n.iter().filter(|&&v| v > u) {
                out.emit(&v, &m);
                if m != u {
                    out.add(CHANGED, 1.0);
                }
            }
        },
    )?;
    Ok((out, mr.totals()[CHANGED] as u64))
}

/// One small-star operation; returns the new edges and how many edges changed.
fn small_star(
    mr: &mut MapReduce,
    edges: Dataset<u32, u32>,
) -> Result<(Dataset<u32, u32>, u64), AlgoError> {
    let out = mr.map_reduce(
        edges,
        |u: u32, v: u32, emit: &mut Emitter<'_, u32, u32>| {
            emit.emit(&u.max(v), u.min(v));
        },
        move |u: u32, values, out: &mut Output<u32, u32>| {
            let n = neighbours(values);
            let m = n[0].min(u);
            for &v in n.iter().chain(std::iter::once(&u)) {
                if v != m {
                    out.emit(&v, &m);
                }
            }
            // The edges (u, v) became (v, m): all but the one to m moved.
            out.add(CHANGED, (n.len() - 1) as f64);
        },
    )?;
    Ok((out, mr.totals()[CHANGED] as u64))
}

/// The star operations done, the edges and the loops of a checkpoint part.
fn decode_checkpoint(
    comm: &Comm,
    seq: u64,
    part: &[u8],
) -> Result<(usize, Edges, Edges), AlgoError> {
    let bad = |reason: String| AlgoError::BadParameter {
        name: "checkpoint",
        reason: format!("checkpoint {seq}: {reason}"),
    };
    let (word, rest) = split_header(part, 4).ok_or_else(|| bad("too short".into()))?;
    let split = word[3] as usize;
    let (e, l) = (
        rest.get(..split).ok_or_else(|| bad("too short".into()))?,
        &rest[split.min(rest.len())..],
    );
    let rank = comm.runtime();
    let edges = Dataset::from_encoded(rank, e, word[1]).map_err(|x| bad(x.to_string()))?;
    let loops = Dataset::from_encoded(rank, l, word[2]).map_err(|x| bad(x.to_string()))?;
    Ok((word[0] as usize, edges, loops))
}

/// Connected components of the undirected graph `edges` plus the vertices of `loops`.
///
/// With fault tolerance the edges and loops are replicated first (they are inputs that no
/// earlier operation produced). With `checkpoint`, starts from the state it restores (if
/// any) and saves the edges and loops after every K rounds (a round: the star operations
/// between two convergence checks).
///
/// # Errors
/// Communication and spill errors; with fault tolerance, a lost rank gets an error for
/// which [`AlgoError::is_lost`] holds.
pub fn connected_components<'r>(
    comm: &Comm<'r>,
    edges: Dataset<u32, u32>,
    loops: Dataset<u32, u32>,
    variant: Variant,
    memory: Option<usize>,
    fault_tolerance: Option<FaultTolerance>,
    mut checkpoint: Option<&mut Checkpointer>,
) -> Result<CcResult<'r>, AlgoError> {
    // The changed edges are counted as the operations' totals: summed by the operations'
    // own collectives, and right after a recovery from a lost process.
    let mut mr = MapReduce::new(comm).with_totals(1);
    if let Some(m) = memory {
        mr = mr.memory(m);
    }
    if let Some(ft) = fault_tolerance {
        mr = mr.fault_tolerance(ft)?;
    }
    // Resuming: the edges and loops after `rounds` rounds, read back.
    let mut rounds = 0u64;
    let mut ops = 0;
    let (edges, loops) = match checkpoint.as_deref_mut() {
        Some(ck) => match ck.take_restored(comm)? {
            Some((seq, part)) => {
                let (o, e, l) = decode_checkpoint(comm, seq, &part)?;
                rounds = seq;
                ops = o;
                (e, l)
            }
            None => (edges, loops),
        },
        None => (edges, loops),
    };
    let loops = mr.replicate(loops)?;
    // The first star operation reads the input edges: replicated, so that a lost part can
    // be rebuilt; later ones read the previous output.
    let mut first = Some(mr.replicate(edges)?);
    let mut edges = Dataset::empty(comm.runtime())?;
    let mut large_step = |mr: &mut MapReduce, edges: Dataset<u32, u32>| match first.take() {
        Some(f) => large_star(mr, f),
        None => large_star(mr, edges),
    };
    // A round: large-star and small-star (alternating), or large-star until it changes
    // nothing and one small-star (two-phase); a checkpoint may follow each round.
    loop {
        let converged = match variant {
            Variant::Alternating => {
                let (e, large) = large_step(&mut mr, edges)?;
                let (e, small) = small_star(&mut mr, e)?;
                edges = e;
                ops += 2;
                large == 0 && small == 0
            }
            Variant::TwoPhase => {
                loop {
                    let (e, large) = large_step(&mut mr, edges)?;
                    edges = e;
                    ops += 1;
                    if large == 0 {
                        break;
                    }
                }
                let (e, small) = small_star(&mut mr, edges)?;
                edges = e;
                ops += 1;
                small == 0
            }
        };
        rounds += 1;
        if converged {
            break;
        }
        if let Some(ck) = checkpoint.as_deref_mut() {
            if ck.due(rounds) {
                let (eb, en) = edges.encoded();
                let (lb, ln) = loops.encoded();
                let header = header(&[ops as u64, en, ln, eb.len() as u64]);
                ck.save(mr.comm(), rounds, &[&header, eb, &lb])?;
            }
        }
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
    let comm = mr.comm().clone();
    let stats = mr
        .stats()
        .iter()
        .map(|s| s.total(&comm))
        .collect::<Result<Vec<_>, _>>()?;
    let ft = mr.ft_stats().map(|f| f.total(&comm)).transpose()?;
    Ok(CcResult {
        labels,
        star_operations: ops,
        stats,
        ft,
        comm,
    })
}
