//! PageRank as iterative MapReduce (thesis algorithms 4-5): the adjacency list of a vertex
//! travels as a value keyed by the vertex itself, next to the contributions it receives.
//!
//! Same definition as [`pagerank()`](crate::graph::pagerank::pagerank): column-stochastic, damping
//! `d`, dangling mass spread uniformly, start `1/N`, duplicate edges add up; `N` is the
//! number of vertices of the source (largest id + 1 for an edge list). Sums are taken in a
//! different order, so the ranks agree with the direct engine to rounding (L1 ~ 1e-15).

use std::time::{Duration, Instant};

use spillway_checkpoint::{header, split_header, Checkpointer};
use spillway_comm::Comm;
use spillway_mapreduce::{
    Chain, Dataset, DatasetBuilder, Emitter, FaultTolerance, FtStats, Input, MapReduce, OpStats,
    Output,
};

use crate::error::AlgoError;
use crate::graph::load::LargestId;
use crate::graph::pagerank::PageRankOptions;
use crate::graph::GraphSource;
use crate::io::chunks::{agree_on_error, heap_allowance, read_chunks};
use crate::io::mtx::read_mtx_edges;
use crate::io::{parse_mtx_header, parse_snap_chunk, InputError};
use crate::state::{check_state, Origin};
use crate::Progress;

/// A vertex's state between operations: its rank and its out-edges.
type State = (f64, Vec<u32>);

/// What a message to a vertex carries: a contribution, and (from the vertex itself) its old
/// rank (NaN otherwise) and its out-edges.
type Message = (f64, f64, Vec<u32>);

/// The result on one rank.
#[derive(Debug)]
pub struct MrPageRank<'r> {
    /// `(vertex, rank)` for the vertices whose hash this rank owns.
    pub ranks: Dataset<u32, f64>,
    /// Number of vertices.
    pub n: u64,
    /// Iterations performed.
    pub iterations: usize,
    /// L1 change of the last iteration.
    pub delta: f64,
    /// Wall time of each iteration.
    pub iteration_times: Vec<Duration>,
    /// Statistics of every operation (totals over ranks); the first builds the adjacency.
    pub stats: Vec<OpStats>,
    /// Fault-tolerance costs over all ranks (with fault tolerance).
    pub ft: Option<FtStats>,
    /// The ranks still in the job (all of them unless ranks were lost).
    pub comm: Comm<'r>,
}

/// Words before the state in a checkpoint part: iterations done, dangling mass, L1 change
/// of the last iteration, records of the state.
const HEADER_WORDS: usize = 4;

/// The operations' totals: the L1 change of the ranks, and the new rank of the dangling
/// vertices (the first operation: the start rank of the dangling vertices).
const DELTA: usize = 0;
const DANGLING: usize = 1;

/// One PageRank iteration as a MapReduce operation: the new state, the L1 change and the sum
/// of the dangling vertices' new ranks (the operation's totals, over all ranks).
fn iteration(
    mr: &mut MapReduce,
    input: impl Input<Key = u32, Value = State>,
    base: f64,
    d: f64,
) -> Result<(Dataset<u32, State>, f64, f64), AlgoError> {
    let next = mr.map_combine_reduce(
        input,
        |v: u32, (rank, adj): State, emit: &mut Emitter<'_, u32, Message>| {
            if !adj.is_empty() {
                let c = rank / adj.len() as f64;
                for &w in &adj {
                    emit.emit(&w, (c, f64::NAN, Vec::new()));
                }
            }
            emit.emit(&v, (0.0, rank, adj));
        },
        |a: &mut Message, b: Message| {
            a.0 += b.0;
            if !b.1.is_nan() {
                a.1 = b.1;
                a.2 = b.2;
            }
        },
        move |v: u32, messages, out: &mut Output<u32, State>| {
            let (mut sum, mut old, mut adj) = (0.0, f64::NAN, Vec::new());
            for (c, o, a) in messages {
                sum += c;
                if !f64::is_nan(o) {
                    old = o;
                    adj = a;
                }
            }
            let new = base + d * sum;
            out.add(DELTA, (new - old).abs());
            if adj.is_empty() {
                out.add(DANGLING, new);
            }
            out.emit(&v, &(new, adj));
        },
    )?;
    let totals = mr.totals();
    Ok((next, totals[DELTA], totals[DANGLING]))
}

/// Bytes a vertex's record takes in the iterations (its rank, its adjacency list's header,
/// buffering), for the memory check before the vertices exist.
const VERTEX_RECORD_BYTES: u64 = 48;

/// Refuses `n` vertex records that do not fit or are out of proportion with the file.
fn check_vertex_records(
    comm: &Comm,
    n: u64,
    path: &std::path::Path,
    line: Option<u64>,
    what: &str,
) -> Result<(), AlgoError> {
    let units = format!("{n} vertices at {VERTEX_RECORD_BYTES} bytes each");
    let bytes = n.saturating_mul(VERTEX_RECORD_BYTES);
    check_state(comm, bytes, &units, Origin::Line { path, line, what })
}

/// Reads or generates the edges of `source` as a dataset (each rank its part) and the
/// number of vertices.
///
/// # Errors
/// [`AlgoError::Input`] with file, line and reason for malformed input, or a file without
/// edges; communication errors.
pub fn load_edge_dataset(
    comm: &Comm,
    source: &GraphSource,
) -> Result<(Dataset<u32, u32>, u64), AlgoError> {
    let rank = comm.runtime();
    let mut edges = DatasetBuilder::new(rank)?;
    let chunk = heap_allowance(comm) / 2;
    let n = match source {
        GraphSource::EdgeList(path) => {
            let mut largest = LargestId::default();
            let (read, before) = read_chunks(comm, path, 0, chunk, |bytes| {
                let parsed = parse_snap_chunk(bytes);
                largest.observe(bytes, &parsed.edges);
                for &(u, v) in &parsed.edges {
                    edges.push(&u, &v)?;
                }
                Ok(parsed.error)
            })?;
            agree_on_error(comm, path, read.error, before)?;
            let Some((id, line)) = largest.agree(comm, before)? else {
                return Err(InputError::new(path, None, "no edges").into());
            };
            let m = id + 1;
            let what = format!("vertex id {id}");
            check_vertex_records(comm, m, path, Some(line), &what)?;
            m
        }
        GraphSource::MatrixMarket(path) => {
            let n = read_mtx_edges(comm, path, |parsed| {
                for &(u, v) in parsed {
                    edges.push(&u, &v)?;
                }
                Ok(())
            })?;
            let header = parse_mtx_header(path)?;
            let what = format!("the size line's {} x {} matrix", header.rows, header.cols);
            check_vertex_records(comm, n, path, Some(header.header_lines), &what)?;
            n
        }
        GraphSource::Rmat(spec) => {
            let e = spec.num_edges();
            let (p, r) = (comm.size() as u64, comm.rank() as u64);
            let (lo, hi) = (e * r / p, e * (r + 1) / p);
            let step = (chunk / 8).max(1) as u64;
            let mut buf = Vec::new();
            let mut at = lo;
            while at < hi {
                let end = (at + step).min(hi);
                buf.clear();
                spec.edges(at..end, &mut buf);
                for (u, v) in &buf {
                    edges.push(u, v)?;
                }
                at = end;
            }
            spec.num_vertices()
        }
    };
    Ok((edges.finish()?, n))
}

/// Marks "this vertex exists" in the adjacency operation (ids are at most `u32::MAX - 1`).
const EXISTS: u32 = u32::MAX;

/// PageRank of the graph `edges` on `n` vertices; `progress` is called on every rank after
/// each iteration.
///
/// # Errors
/// [`AlgoError::BadParameter`] for a damping outside [0, 1] or a negative tolerance;
/// communication and spill errors.
#[allow(clippy::too_many_arguments)]
pub fn pagerank_mapreduce<'r>(
    comm: &Comm<'r>,
    edges: Dataset<u32, u32>,
    n: u64,
    options: &PageRankOptions,
    memory: Option<usize>,
    fault_tolerance: Option<FaultTolerance>,
    progress: &mut dyn FnMut(&Progress),
    mut checkpoint: Option<&mut Checkpointer>,
) -> Result<MrPageRank<'r>, AlgoError> {
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
    let mut mr = MapReduce::new(comm).with_totals(2);
    if let Some(m) = memory {
        mr = mr.memory(m);
    }
    if let Some(ft) = fault_tolerance {
        mr = mr.fault_tolerance(ft)?;
    }
    let nf = n as f64;
    let d = options.damping;
    let mut delta = f64::INFINITY;
    let mut iterations = 0;
    let mut dangling = 0.0;
    // Resuming: the state after `iterations` iterations, read back (replicated so that a
    // lost rank's part can be rebuilt in the next operation).
    let mut resumed = None;
    if let Some(ck) = checkpoint.as_deref_mut() {
        if let Some((seq, part)) = ck.take_restored(comm)? {
            let bad = |reason: String| AlgoError::BadParameter {
                name: "checkpoint",
                reason: format!("checkpoint {seq}: {reason}"),
            };
            let (word, rest) =
                split_header(&part, HEADER_WORDS).ok_or_else(|| bad("too short".into()))?;
            if word[0] != seq {
                return Err(bad(format!("holds iteration {}", word[0])));
            }
            iterations = seq as usize;
            dangling = f64::from_bits(word[1]);
            delta = f64::from_bits(word[2]);
            let state = Dataset::<u32, State>::from_encoded(comm.runtime(), rest, word[3])
                .map_err(|e| bad(e.to_string()))?;
            resumed = Some(mr.replicate(state)?);
        }
    }
    let mut state: Dataset<u32, State> = Dataset::empty(comm.runtime())?;
    if resumed.is_none() {
        // Every vertex 0..n exists, with or without edges.
        let (p, r) = (comm.size() as u64, comm.rank() as u64);
        let vertices = Dataset::from_local(
            comm.runtime(),
            (n * r / p..n * (r + 1) / p).map(|v| (v as u32, EXISTS)),
        )?;
        // The first operation's inputs are replicated (with fault tolerance) so that a lost
        // rank's part can be rebuilt; later operations read the previous output. What the
        // reduce functions sum on the side are the operations' totals, which the operations
        // sum themselves (also after a recovery).
        let (edges, vertices) = (mr.replicate(edges)?, mr.replicate(vertices)?);
        state = mr.map_reduce(
            Chain(edges, vertices),
            |u: u32, v: u32, emit: &mut Emitter<'_, u32, u32>| emit.emit(&u, v),
            move |u: u32, targets, out: &mut Output<u32, State>| {
                let mut adj: Vec<u32> = targets.filter(|&v| v != EXISTS).collect();
                adj.sort_unstable();
                if adj.is_empty() {
                    out.add(DANGLING, 1.0 / nf);
                }
                out.emit(&u, &(1.0 / nf, adj));
            },
        )?;
        dangling = mr.totals()[DANGLING];
    } else {
        drop(edges);
    }
    let stopped = |delta: f64| options.tolerance > 0.0 && delta < options.tolerance;
    let mut times = Vec::new();
    while iterations < options.iterations && !stopped(delta) {
        let t = Instant::now();
        let base = (1.0 - d) / nf + d * dangling / nf;
        let (next, delta_next, dangling_next) = match resumed.take() {
            Some(input) => iteration(&mut mr, input, base, d)?,
            None => iteration(&mut mr, state, base, d)?,
        };
        state = next;
        delta = delta_next;
        dangling = dangling_next;
        iterations += 1;
        times.push(t.elapsed());
        progress(&Progress {
            iteration: iterations,
            max_iterations: options.iterations,
            delta,
        });
        if let Some(ck) = checkpoint.as_deref_mut() {
            if ck.due(iterations as u64) {
                let (bytes, records) = state.encoded();
                let header = header(&[
                    iterations as u64,
                    dangling.to_bits(),
                    delta.to_bits(),
                    records,
                ]);
                ck.save(mr.comm(), iterations as u64, &[&header, bytes])?;
            }
        }
    }
    if let Some(r) = resumed.take() {
        // Resumed after the last iteration: the state as read back.
        state = mr.map_reduce(
            r,
            |v: u32, s: State, emit: &mut Emitter<'_, u32, State>| emit.emit(&v, s),
            |v: u32, mut s: spillway_mapreduce::Values<'_, State>, out: &mut Output<u32, State>| {
                out.emit(&v, &s.next().expect("one state per vertex"))
            },
        )?;
    }
    let comm = mr.comm().clone();
    let mut ranks = DatasetBuilder::new(comm.runtime())?;
    let mut failed = None;
    Dataset::for_each(&state, |v, (rank, _)| {
        if failed.is_none() {
            failed = ranks.push(&v, &rank).err();
        }
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    let stats = mr
        .stats()
        .iter()
        .map(|s| s.total(&comm))
        .collect::<Result<Vec<_>, _>>()?;
    let ft = mr.ft_stats().map(|f| f.total(&comm)).transpose()?;
    Ok(MrPageRank {
        ranks: ranks.finish()?,
        n,
        iterations,
        delta,
        iteration_times: times,
        stats,
        ft,
        comm,
    })
}
