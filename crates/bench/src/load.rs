//! `load`: how long loading an R-MAT graph takes in memory, next to generating its edges alone.
//!
//! # What is timed (best of `reps`)
//! * generation alone, one thread: `RmatSpec::edges(0..m)` into a vector;
//! * generation alone, `ranks` ranks: each rank generates its `m / ranks` edges (the slowest
//!   rank's time);
//! * the load: [`load_graph`] on `ranks` ranks (generation, the histogram of sources, the
//!   exchange of edges to their owners and the construction of each rank's rows), from a
//!   barrier to a barrier.

use std::time::{Duration, Instant};

use spillway::algorithms::generate::RmatSpec;
use spillway::algorithms::graph::{load_graph, GraphSource};
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
    Ok(())
}
