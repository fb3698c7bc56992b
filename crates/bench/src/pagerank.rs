//! `pagerank`: edges per second of spillway's PageRank on an R-MAT graph against a sequential
//! CSR push PageRank over the same graph, measured in the same run.
//!
//! # What is timed
//! * spillway: every rank loads its rows with [`load_graph`] (not timed for the rate), then each
//!   repetition is `barrier`, start, [`pagerank`], `barrier`, stop on rank 0: the whole call,
//!   including its one-off setup (sorting the distinct targets, the index exchange). The
//!   iterations alone are reported too: the largest over ranks of the sum of the per-iteration
//!   times that [`pagerank`] records.
//! * baseline: the same number of iterations of [`sequential_pagerank`] on one thread, over a
//!   CSR built from `RmatSpec::edges(0..m)` (building it is not timed for the rate).
//!
//! Edges per second = `edges * iterations / time`. The two results must agree to an L1
//! distance below `1e-9`, or the subcommand fails: a fast wrong answer is not a measurement.

use std::time::{Duration, Instant};

use spillway::algorithms::generate::RmatSpec;
use spillway::algorithms::graph::pagerank::{pagerank, PageRankOptions};
use spillway::algorithms::graph::{load_graph, GraphSource};
use spillway::{run, Collectives, Comm, Config};

use crate::harness::{format_duration, BoxError, Stats};

/// Damping factor of both implementations.
const DAMPING: f64 = 0.85;

/// Largest accepted L1 distance between the spillway and sequential ranks.
const TOLERANCE: f64 = 1e-9;

/// Arguments of `spillway-bench pagerank`: an R-MAT graph (Graph500 parameters, seed 1);
/// spillway runs at running = 1 and running = 2.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// log2 of the number of vertices (1..=31).
    #[arg(long, default_value_t = 18)]
    scale: u32,
    /// Edges per vertex.
    #[arg(long, default_value_t = 16)]
    edge_factor: u32,
    /// Ranks of the spillway job.
    #[arg(long, default_value_t = 8)]
    ranks: u32,
    /// Virtual nodes of the spillway job.
    #[arg(long, default_value_t = 1)]
    nodes: u32,
    /// PageRank iterations per repetition.
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Repetitions.
    #[arg(long, default_value_t = 7)]
    reps: usize,
}

/// A whole graph in compressed sparse row form (rows are sources).
#[derive(Debug, Clone)]
pub struct Csr {
    /// Row offsets into `targets` (`n + 1` entries).
    pub offsets: Vec<usize>,
    /// Edge targets, row by row, each row in edge-index order.
    pub targets: Vec<u32>,
}

impl Csr {
    /// Builds the CSR of `n` vertices from `(src, dst)` edges by a counting sort on the source,
    /// keeping the edges of a row in their input order.
    ///
    /// # Panics
    /// If an edge names a vertex `>= n`.
    pub fn from_edges(n: usize, edges: &[(u32, u32)]) -> Csr {
        let mut offsets = vec![0usize; n + 1];
        for &(s, _) in edges {
            offsets[s as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; edges.len()];
        for &(s, d) in edges {
            assert!((d as usize) < n, "edge target {d} is not below {n}");
            targets[fill[s as usize]] = d;
            fill[s as usize] += 1;
        }
        Csr { offsets, targets }
    }

    /// Number of vertices.
    pub fn n(&self) -> usize {
        self.offsets.len() - 1
    }
}

/// Sequential push PageRank with the semantics of spillway's `pagerank`: start at `1/N`; each
/// iteration pushes `x(u) / deg(u)` along every out-edge, spreads the mass of vertices without
/// out-edges uniformly, and sets `x'(v) = (1 - d) / N + d * (pushed(v) + D / N)`.
pub fn sequential_pagerank(csr: &Csr, iterations: usize, damping: f64) -> Vec<f64> {
    let n = csr.n();
    let nf = n as f64;
    let mut x = vec![1.0 / nf; n];
    let mut next = vec![0.0f64; n];
    for _ in 0..iterations {
        next.fill(0.0);
        let mut dangling = 0.0;
        for (row, &xu) in csr.offsets.windows(2).zip(&x) {
            let (a, b) = (row[0], row[1]);
            if a == b {
                dangling += xu;
                continue;
            }
            let c = xu / (b - a) as f64;
            for &t in &csr.targets[a..b] {
                next[t as usize] += c;
            }
        }
        let base = (1.0 - damping) / nf + damping * dangling / nf;
        for (xv, &pushed) in x.iter_mut().zip(&next) {
            *xv = base + damping * pushed;
        }
    }
    x
}

/// One rank's outcome of the spillway runs.
struct RankOut {
    /// First vertex of this rank.
    lo: u64,
    /// This rank's ranks from the last repetition.
    x: Vec<f64>,
    /// Iterations performed per call.
    iterations: usize,
    /// Wall time of each whole `pagerank` call (meaningful on rank 0).
    call: Vec<Duration>,
    /// Sum of this rank's per-iteration times, per repetition.
    iter_sum: Vec<Duration>,
    /// Time of `load_graph` (meaningful on rank 0).
    load: Duration,
}

/// One line of the result table.
struct Row {
    what: String,
    running: String,
    timed: &'static str,
    stats: Stats,
}

/// Runs the subcommand.
pub fn main(args: Args) -> Result<(), BoxError> {
    let spec = RmatSpec {
        scale: args.scale,
        edge_factor: args.edge_factor,
        seed: 1,
    };
    if !(1..=31).contains(&spec.scale) || spec.edge_factor == 0 {
        return Err("--scale must be 1..=31 and --edge-factor at least 1".into());
    }
    let (ranks, nodes, iterations, reps) = (args.ranks, args.nodes, args.iterations, args.reps);
    if iterations == 0 || reps == 0 {
        return Err("--iterations and --reps must be at least 1".into());
    }
    let (n, m) = (spec.num_vertices(), spec.num_edges());
    println!(
        "## PageRank (R-MAT scale {}, edge factor {}: {n} vertices, {m} edges, {iterations} \
         iterations, damping {DAMPING})\n",
        spec.scale, spec.edge_factor
    );

    eprintln!("pagerank: sequential baseline ...");
    let start = Instant::now();
    let mut edges = Vec::new();
    spec.edges(0..m, &mut edges);
    let csr = Csr::from_edges(n as usize, &edges);
    drop(edges);
    let seq_build = start.elapsed();
    let mut seq_times = Vec::with_capacity(reps);
    let mut reference = Vec::new();
    for _ in 0..reps {
        let start = Instant::now();
        reference = sequential_pagerank(&csr, iterations, DAMPING);
        seq_times.push(start.elapsed());
    }
    drop(csr);

    let mut rows = vec![Row {
        what: "sequential CSR push".into(),
        running: "1 thread".into(),
        timed: "iterations",
        stats: Stats::of(&seq_times),
    }];
    let mut notes = vec![format!(
        "sequential: generate + build CSR {} (not in the rate)",
        format_duration(seq_build)
    )];
    let mut worst = 0.0f64;
    for running in [1u32, 2] {
        eprintln!("pagerank: spillway, {ranks} ranks, running = {running} ...");
        let config = Config::new(ranks).nodes(nodes).running(running);
        let outs = run(&config, |rank| spmd(rank, &spec, iterations, reps))?;
        let done = outs[0].iterations;
        if done != iterations {
            return Err(format!("spillway ran {done} iterations, not {iterations}").into());
        }
        let mut x = Vec::with_capacity(n as usize);
        for out in &outs {
            if out.lo != x.len() as u64 {
                return Err("rank results do not tile the vertex range".into());
            }
            x.extend_from_slice(&out.x);
        }
        if x.len() != reference.len() {
            return Err("spillway returned a different number of vertices".into());
        }
        let l1: f64 = x.iter().zip(&reference).map(|(a, b)| (a - b).abs()).sum();
        worst = worst.max(l1);
        let iter_max: Vec<Duration> = (0..reps)
            .map(|r| outs.iter().map(|o| o.iter_sum[r]).max().unwrap_or_default())
            .collect();
        let what = format!("spillway, {ranks} ranks, {nodes} node(s)");
        rows.push(Row {
            what: what.clone(),
            running: format!("running = {running}"),
            timed: "whole call",
            stats: Stats::of(&outs[0].call),
        });
        rows.push(Row {
            what,
            running: format!("running = {running}"),
            timed: "iterations",
            stats: Stats::of(&iter_max),
        });
        notes.push(format!(
            "running = {running}: load_graph {} (not in the rate); L1(spillway - sequential) = \
             {l1:.3e} ({})",
            format_duration(outs[0].load),
            if l1 < TOLERANCE { "agree" } else { "DISAGREE" }
        ));
    }

    let work = m as f64 * iterations as f64;
    let seq_rate = work / rows[0].stats.median.as_secs_f64();
    println!(
        "Edges/s = edges * iterations / median time. \"iterations\": the iteration loop only \
         (spillway: the largest over ranks of the summed per-iteration times); \"whole call\": \
         the `pagerank` call with its setup, between barriers.\n"
    );
    println!(
        "| implementation | running | timed | reps | median | min | edges/s | vs sequential |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for row in &rows {
        let rate = work / row.stats.median.as_secs_f64();
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.3e} | {:.2} |",
            row.what,
            row.running,
            row.timed,
            row.stats.reps,
            format_duration(row.stats.median),
            format_duration(row.stats.min),
            rate,
            rate / seq_rate
        );
    }
    println!();
    for note in &notes {
        println!("- {note}");
    }
    println!();
    if worst < TOLERANCE {
        Ok(())
    } else {
        Err(format!("spillway and the sequential baseline disagree: L1 = {worst:.3e}").into())
    }
}

/// The SPMD part: load the graph, then `reps` timed PageRank calls.
fn spmd(
    rank: &spillway::Rank,
    spec: &RmatSpec,
    iterations: usize,
    reps: usize,
) -> Result<RankOut, BoxError> {
    let world = Comm::world(rank);
    world.barrier()?;
    let start = Instant::now();
    let graph = load_graph(&world, &GraphSource::Rmat(*spec))?;
    world.barrier()?;
    let load = start.elapsed();
    let options = PageRankOptions {
        iterations,
        tolerance: 0.0,
        damping: DAMPING,
    };
    let mut out = RankOut {
        lo: graph.lo,
        x: Vec::new(),
        iterations: 0,
        call: Vec::with_capacity(reps),
        iter_sum: Vec::with_capacity(reps),
        load,
    };
    for _ in 0..reps {
        world.barrier()?;
        let start = Instant::now();
        let result = pagerank(&world, &graph, &options, &mut |_| {})?;
        world.barrier()?;
        out.call.push(start.elapsed());
        out.iter_sum.push(result.iteration_times.iter().sum());
        out.iterations = result.iterations;
        out.x = result.ranks.as_slice().to_vec();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_pagerank_matches_a_hand_computed_graph() {
        // 0 -> 1, 0 -> 2, 1 -> 2, 2 -> 0, 3 dangling.
        let csr = Csr::from_edges(4, &[(0, 1), (0, 2), (1, 2), (2, 0)]);
        let x = sequential_pagerank(&csr, 1, 0.85);
        let (n, d) = (4.0, 0.85);
        let base = (1.0 - d) / n + d * 0.25 / n;
        let expect = [
            base + d * 0.25,
            base + d * 0.125,
            base + d * (0.125 + 0.25),
            base,
        ];
        for (a, b) in x.iter().zip(expect) {
            assert!((a - b).abs() < 1e-15);
        }
        let total: f64 = sequential_pagerank(&csr, 20, 0.85).iter().sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn spillway_agrees_with_the_sequential_baseline() {
        let spec = RmatSpec {
            scale: 8,
            edge_factor: 4,
            seed: 3,
        };
        let mut edges = Vec::new();
        spec.edges(0..spec.num_edges(), &mut edges);
        let csr = Csr::from_edges(spec.num_vertices() as usize, &edges);
        let reference = sequential_pagerank(&csr, 5, DAMPING);
        let config = Config::new(3).nodes(1).running(1);
        let outs = run(&config, |rank| spmd(rank, &spec, 5, 1)).unwrap();
        let x: Vec<f64> = outs.into_iter().flat_map(|o| o.x).collect();
        let l1: f64 = x.iter().zip(&reference).map(|(a, b)| (a - b).abs()).sum();
        assert_eq!(x.len(), reference.len());
        assert!(l1 < TOLERANCE, "L1 = {l1}");
    }
}
