//! The MapReduce algorithms as library calls against sequential references: connected
//! components against a union-find, PageRank against the direct engine, at several layouts
//! and with an allowance small enough to spill.

use std::collections::BTreeMap;

use spillway_algorithms::graph::cc::{connected_components, Variant};
use spillway_algorithms::graph::pagerank::{pagerank, PageRankOptions};
use spillway_algorithms::graph::pagerank_mr::{load_edge_dataset, pagerank_mapreduce};
use spillway_algorithms::graph::{load_graph, GraphSource};
use spillway_algorithms::AlgoError;
use spillway_comm::Comm;
use spillway_mapreduce::Dataset;
use spillway_runtime::{run, Config};

const LAYOUTS: [(u32, u32, u32); 4] = [(1, 1, 1), (2, 1, 2), (5, 2, 1), (6, 3, 2)];

fn edges(seed: u64, n: u32, m: usize) -> Vec<(u32, u32)> {
    let mut x = seed | 1;
    let mut next = move |k: u32| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % u64::from(k)) as u32
    };
    let mut e: Vec<(u32, u32)> = (0..m).map(|_| (next(n), next(n))).collect();
    // A path through every 97th vertex joins distant ids (many star rounds).
    e.extend((0..n / 97).map(|i| (i * 97, (i + 1) * 97 % n)));
    e
}

fn find(parent: &mut [u32], mut v: u32) -> u32 {
    while parent[v as usize] != v {
        parent[v as usize] = parent[parent[v as usize] as usize];
        v = parent[v as usize];
    }
    v
}

/// Label = smallest vertex of the component, for vertices of edges.
fn union_find(n: u32, edges: &[(u32, u32)]) -> BTreeMap<u32, u32> {
    let mut parent: Vec<u32> = (0..n).collect();
    for &(u, v) in edges {
        let (a, b) = (find(&mut parent, u), find(&mut parent, v));
        // Keep the smaller root, so every root is its component's smallest vertex.
        if a < b {
            parent[b as usize] = a;
        } else {
            parent[a as usize] = b;
        }
    }
    edges
        .iter()
        .flat_map(|&(u, v)| [u, v])
        .map(|v| (v, find(&mut parent, v)))
        .collect()
}

#[test]
fn connected_components_equal_a_union_find() {
    let n = 3000;
    let all = edges(7, n, 1500);
    let expected = union_find(n, &all);
    for layout in LAYOUTS {
        for variant in [Variant::Alternating, Variant::TwoPhase] {
            for memory in [None, Some(8 << 10)] {
                let (ranks, nodes, running) = layout;
                let config = Config::new(ranks).nodes(nodes).running(running);
                let all = &all;
                let out = run(&config, |rank| -> Result<_, AlgoError> {
                    let world = Comm::world(rank);
                    let (p, r) = (world.size(), world.rank());
                    let mine = all[all.len() * r / p..all.len() * (r + 1) / p].iter();
                    let (loops, plain): (Vec<_>, Vec<_>) = mine.partition(|(u, v)| u == v);
                    let e = Dataset::from_local(rank, plain.into_iter().copied())?;
                    let l = Dataset::from_local(rank, loops.into_iter().copied())?;
                    let res = connected_components(&world, e, l, variant, memory, None, None)?;
                    let spilled: u64 = res.stats.iter().map(|s| s.bytes_spilled).sum();
                    Ok((res.labels.gather(&world, 0)?, spilled))
                })
                .unwrap();
                let (labels, spilled) = &out[0];
                let got: BTreeMap<u32, u32> = labels.clone().unwrap().into_iter().collect();
                assert_eq!(got, expected, "{layout:?} {variant:?} memory {memory:?}");
                // The small allowance takes the out-of-core path; the default never spills.
                assert_eq!(*spilled > 0, memory.is_some(), "{layout:?} {variant:?}");
            }
        }
    }
}

#[test]
fn mapreduce_pagerank_equals_the_direct_engine() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.txt");
    let mut text = String::new();
    for (u, v) in edges(3, 500, 3000) {
        text.push_str(&format!("{u} {v}\n"));
    }
    std::fs::write(&path, text).unwrap();
    let source = GraphSource::from_path(&path);
    let options = PageRankOptions {
        iterations: 10,
        tolerance: 0.0,
        damping: 0.85,
    };
    for (ranks, nodes, running) in LAYOUTS {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let out = run(&config, |rank| -> Result<_, AlgoError> {
            let world = Comm::world(rank);
            let graph = load_graph(&world, &source)?;
            let direct = pagerank(&world, &graph, &options, &mut |_| {})?;
            let direct: Vec<(u32, f64)> = direct
                .ranks
                .as_slice()
                .iter()
                .enumerate()
                .map(|(i, &r)| ((direct.lo + i as u64) as u32, r))
                .collect();
            let (edges, n) = load_edge_dataset(&world, &source)?;
            let mr = pagerank_mapreduce(
                &world,
                edges,
                n,
                &options,
                Some(16 << 10),
                None,
                &mut |_| {},
                None,
            )?;
            assert_eq!(mr.iterations, 10);
            let all_direct = spillway_comm::Collectives::allgather_obj(&world, &direct)?;
            Ok((all_direct.concat(), mr.ranks.gather(&world, 0)?, n))
        })
        .unwrap();
        let (direct, mr, n) = &out[0];
        let mut mr = mr.clone().unwrap();
        mr.sort_by_key(|&(v, _)| v);
        assert_eq!(mr.len() as u64, *n);
        let l1: f64 = direct
            .iter()
            .zip(&mr)
            .map(|(a, b)| {
                assert_eq!(a.0, b.0);
                (a.1 - b.1).abs()
            })
            .sum();
        assert!(l1 < 1e-12, "L1 {l1:e}");
    }
}
