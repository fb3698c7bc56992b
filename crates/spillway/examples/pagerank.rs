//! PageRank on a generated R-MAT graph with 8 ranks on 2 virtual nodes, checked against a
//! sequential loop. `cargo run --release --example pagerank`.

use spillway::algorithms::generate::RmatSpec;
use spillway::algorithms::graph::pagerank::{pagerank, PageRankOptions};
use spillway::algorithms::graph::{load_graph, GraphSource};
use spillway::algorithms::AlgoError;
use spillway::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = RmatSpec::parse("rmat:12:8:1")?;
    let options = PageRankOptions {
        iterations: 30,
        ..Default::default()
    };
    let parts = run(
        &Config::new(8).nodes(2).running(2),
        |rank| -> Result<_, AlgoError> {
            let world = Comm::world(rank);
            let graph = load_graph(&world, &GraphSource::Rmat(spec))?;
            let result = pagerank(&world, &graph, &options, &mut |_| {})?;
            Ok((result.lo, result.ranks.to_vec()))
        },
    )?;
    let n = spec.num_vertices() as usize;
    let mut ranks = vec![0.0; n];
    for (lo, part) in parts {
        ranks[lo as usize..lo as usize + part.len()].copy_from_slice(&part);
    }
    // Sequential reference.
    let mut edges = Vec::new();
    spec.edges(0..spec.num_edges(), &mut edges);
    let mut deg = vec![0usize; n];
    edges.iter().for_each(|&(s, _)| deg[s as usize] += 1);
    let mut x = vec![1.0 / n as f64; n];
    for _ in 0..options.iterations {
        let dangling: f64 = (0..n).filter(|&u| deg[u] == 0).map(|u| x[u]).sum();
        let mut next = vec![0.15 / n as f64 + 0.85 * dangling / n as f64; n];
        for &(s, t) in &edges {
            next[t as usize] += 0.85 * x[s as usize] / deg[s as usize] as f64;
        }
        x = next;
    }
    let l1: f64 = x.iter().zip(&ranks).map(|(a, b)| (a - b).abs()).sum();
    assert!(l1 < 1e-12, "L1 distance to the sequential loop: {l1}");
    let top = (0..n)
        .max_by(|&a, &b| ranks[a].total_cmp(&ranks[b]))
        .unwrap_or(0);
    println!(
        "pagerank: {n} vertices, top vertex {top} ({:.5}), L1 to sequential {l1:.2e}",
        ranks[top]
    );
    Ok(())
}
