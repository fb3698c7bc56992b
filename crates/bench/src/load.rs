//! `load`: how long loading an R-MAT graph takes in memory, next to generating its edges alone.
//!
//! # What is timed (best of `reps`)
//! * generation alone, one thread: `RmatSpec::edges(0..m)` into a vector;
//! * generation alone, `ranks` ranks: each rank generates its `m / ranks` edges (the slowest
//!   rank's time);
//! * the load: [`load_graph`] on `ranks` ranks (generation, the histogram of sources, the
//!   exchange of edges to their owners and the construction of each rank's rows), from a
//!   barrier to a barrier.
//!
//! With `--edge-list FILE` (a SNAP edge list, e.g. from `spillway gen rmat`), also:
//! * the parse alone, one thread: [`parse_snap_chunk`] over the file's bytes in memory, in
//!   chunks of 64 MiB (MB/s of text per core);
//! * the load of the file: [`load_graph`] on `ranks` ranks (reading in chunks, parsing, the
//!   exchange and the rows; the file is in the page cache after the first repetition).

use std::time::{Duration, Instant};

use spillway::algorithms::generate::RmatSpec;
use std::path::PathBuf;

use spillway::algorithms::graph::{load_graph, GraphSource};
use spillway::algorithms::io::parse_snap_chunk;
use spillway::{run, Collectives, Comm, Config, Max};

use crate::harness::{format_duration, BoxError, Stats};

/// Arguments of `spillway-bench load`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// log2 of the number of vertices.
    #[arg(long, default_value_t = 22)]
    scale: u32,
    /// Edges per vertex.
    #[arg(long, default_value_t = 16)]
    edge_factor: u32,
    /// Ranks of the job.
    #[arg(long, default_value_t = 2)]
    ranks: u32,
    /// Repetitions.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Also time parsing and loading this SNAP edge list.
    #[arg(long)]
    edge_list: Option<PathBuf>,
}

/// Runs the benchmark.
pub fn main(a: Args) -> Result<(), BoxError> {
    let spec = RmatSpec::parse(&format!("rmat:{}:{}", a.scale, a.edge_factor))?;
    let m = spec.num_edges();
    println!(
        "load: rmat:{}:{} ({} vertices, {m} edges), {} ranks, best of {}",
        a.scale,
        a.edge_factor,
        spec.num_vertices(),
        a.ranks,
        a.reps
    );
    let mut seq = Vec::new();
    for _ in 0..a.reps {
        let t = Instant::now();
        let mut v = Vec::new();
        spec.edges(0..m, &mut v);
        seq.push(t.elapsed());
        std::hint::black_box(&v);
    }
    let seq = Stats::of(&seq);
    let config = Config::new(a.ranks);
    let per_rank = run(&config, |rank| {
        let comm = Comm::world(rank);
        let (p, r) = (comm.size() as u64, comm.rank() as u64);
        let mut gen = Vec::new();
        let mut load = Vec::new();
        for _ in 0..a.reps {
            comm.barrier()?;
            let t = Instant::now();
            let mut v = Vec::new();
            spec.edges(m * r / p..m * (r + 1) / p, &mut v);
            let mine = t.elapsed().as_secs_f64();
            std::hint::black_box(&v);
            drop(v);
            gen.push(comm.allreduce(&[mine], Max)?[0]);
            comm.barrier()?;
            let t = Instant::now();
            let g = load_graph(&comm, &GraphSource::Rmat(spec))?;
            comm.barrier()?;
            load.push(t.elapsed().as_secs_f64());
            drop(g);
        }
        Ok::<_, BoxError>((gen, load))
    })?;
    let (gen, load) = &per_rank[0];
    let secs = |v: &[f64]| {
        Stats::of(
            &v.iter()
                .map(|&s| Duration::from_secs_f64(s))
                .collect::<Vec<_>>(),
        )
    };
    let (gen, load) = (secs(gen), secs(load));
    println!("  generation, 1 thread     {}", format_duration(seq.min));
    println!(
        "  generation, {} ranks      {}",
        a.ranks,
        format_duration(gen.min)
    );
    println!(
        "  load_graph, {} ranks      {}  ({:.2}x the parallel generation)",
        a.ranks,
        format_duration(load.min),
        load.min.as_secs_f64() / gen.min.as_secs_f64()
    );
    if let Some(path) = &a.edge_list {
        edge_list(&a, path)?;
    }
    Ok(())
}

/// Times the parse of an edge list alone and its load on `a.ranks` ranks.
fn edge_list(a: &Args, path: &PathBuf) -> Result<(), BoxError> {
    let text = std::fs::read(path)?;
    let mb = text.len() as f64 / 1e6;
    println!(
        "edge list {} ({:.0} MB), best of {}",
        path.display(),
        mb,
        a.reps
    );
    const CHUNK: usize = 64 << 20;
    let mut parse = Vec::new();
    let mut edges = 0usize;
    for _ in 0..a.reps {
        let t = Instant::now();
        edges = 0;
        let mut at = 0;
        while at < text.len() {
            // Chunks end at a line end, as the loader's do.
            let end = if at + CHUNK >= text.len() {
                text.len()
            } else {
                at + last_newline(&text[at..at + CHUNK]).ok_or("a line longer than 64 MiB")? + 1
            };
            let chunk = parse_snap_chunk(&text[at..end]);
            if let Some((line, reason)) = chunk.error {
                return Err(format!("line {line} of a chunk: {reason}").into());
            }
            edges += chunk.edges.len();
            std::hint::black_box(&chunk.edges);
            at = end;
        }
        parse.push(t.elapsed());
    }
    drop(text);
    let parse = Stats::of(&parse);
    let config = Config::new(a.ranks);
    let source = GraphSource::EdgeList(path.clone());
    let per_rank = run(&config, |rank| {
        let comm = Comm::world(rank);
        let mut load = Vec::new();
        for _ in 0..a.reps {
            comm.barrier()?;
            let t = Instant::now();
            let g = load_graph(&comm, &source)?;
            comm.barrier()?;
            load.push(t.elapsed());
            drop(g);
        }
        Ok::<_, BoxError>(load)
    })?;
    let load = Stats::of(&per_rank[0]);
    let rate = |d: Duration| mb / d.as_secs_f64();
    println!(
        "  parse, 1 thread         {}  ({:.0} MB/s, {edges} edges)",
        format_duration(parse.min),
        rate(parse.min)
    );
    println!(
        "  load_graph, {} ranks     {}  ({:.0} MB/s, {:.0} MB/s per rank)",
        a.ranks,
        format_duration(load.min),
        rate(load.min),
        rate(load.min) / f64::from(a.ranks)
    );
    Ok(())
}

/// Position of the last `\n` in `bytes`.
fn last_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b == b'\n')
}
