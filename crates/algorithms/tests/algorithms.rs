//! Algorithms at several layouts against sequential references written here, independently of
//! the library.

use std::path::Path;

use spillway_algorithms::cluster::kmeans::{kmeans, Init, KMeansOptions};
use spillway_algorithms::cluster::points::{load_points, PointSource};
use spillway_algorithms::generate::{BlobsSpec, RmatSpec};
use spillway_algorithms::graph::pagerank::{pagerank, PageRankOptions};
use spillway_algorithms::graph::{load_graph, GraphSource};
use spillway_algorithms::io::write_ordered;
use spillway_algorithms::AlgoError;
use spillway_comm::{Collectives, Comm};
use spillway_runtime::{run, Config};

fn layouts() -> Vec<(u32, u32, u32)> {
    vec![
        (1, 1, 1),
        (2, 1, 2),
        (3, 3, 1),
        (5, 2, 2),
        (8, 3, 1),
        (8, 1, 2),
    ]
}

/// Sequential PageRank, same definition: push along edges, dangling mass uniform.
fn sequential_pagerank(n: usize, edges: &[(u32, u32)], iterations: usize, d: f64) -> Vec<f64> {
    let mut deg = vec![0usize; n];
    for &(s, _) in edges {
        deg[s as usize] += 1;
    }
    let mut x = vec![1.0 / n as f64; n];
    for _ in 0..iterations {
        let dangling: f64 = (0..n).filter(|&u| deg[u] == 0).map(|u| x[u]).sum();
        let mut next = vec![(1.0 - d) / n as f64 + d * dangling / n as f64; n];
        for &(s, t) in edges {
            next[t as usize] += d * x[s as usize] / deg[s as usize] as f64;
        }
        x = next;
    }
    x
}

#[test]
fn graph_rows_are_complete_and_balanced() {
    let spec = RmatSpec::parse("rmat:9:8:3").unwrap();
    let mut all = Vec::new();
    spec.edges(0..spec.num_edges(), &mut all);
    all.sort_unstable();
    for (ranks, nodes, running) in layouts() {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let parts = run(&config, |rank| -> Result<_, AlgoError> {
            let world = Comm::world(rank);
            let g = load_graph(&world, &GraphSource::Rmat(spec))?;
            let mut edges = Vec::new();
            for u in 0..g.local_rows() {
                for &t in g.row(u) {
                    edges.push(((g.lo + u as u64) as u32, t));
                }
            }
            Ok((g.lo, g.hi, g.bounds.clone(), edges))
        })
        .unwrap();
        let mut got: Vec<(u32, u32)> = parts.iter().flat_map(|p| p.3.clone()).collect();
        got.sort_unstable();
        assert_eq!(got, all, "layout {ranks}/{nodes}");
        // Work per rank: its edges plus ROW_WEIGHT per row.
        let w = spillway_algorithms::graph::ROW_WEIGHT as usize;
        let cost = |p: &(u64, u64, _, Vec<(u32, u32)>)| p.3.len() + w * (p.1 - p.0) as usize;
        let per_rank_max = parts.iter().map(cost).max().unwrap();
        let total = all.len() + w * 512;
        let mut degree = vec![0usize; 512];
        all.iter().for_each(|&(s, _)| degree[s as usize] += 1);
        let max_degree = *degree.iter().max().unwrap();
        // Balanced up to one bucket of rows (one vertex here) and the heaviest row.
        assert!(
            per_rank_max <= total / ranks as usize + 2 * (max_degree + w) + 16,
            "layout {ranks}/{nodes}: work {per_rank_max} on one rank of {total}"
        );
        for (q, p) in parts.iter().enumerate() {
            assert_eq!((p.0, p.1), (p.2[q], p.2[q + 1]));
        }
    }
}

#[test]
fn pagerank_matches_a_sequential_loop_at_every_layout() {
    let spec = RmatSpec::parse("rmat:12:6:11").unwrap();
    let mut edges = Vec::new();
    spec.edges(0..spec.num_edges(), &mut edges);
    let n = spec.num_vertices() as usize;
    for iterations in [1, 9] {
        let expect = sequential_pagerank(n, &edges, iterations, 0.85);
        // Without a budget; with one so small that the vertex values are storage-backed;
        // with one that keeps them resident (out of core, an eighth of the budget).
        let budgets = [None, Some(64u64 << 10), Some(4u64 << 20)];
        for ((ranks, nodes, running), budget) in
            layouts().into_iter().flat_map(|l| budgets.map(|b| (l, b)))
        {
            let mut config = Config::new(ranks).nodes(nodes).running(running);
            if let Some(b) = budget {
                config = config.mem_budget(b);
            }
            let parts = run(&config, |rank| -> Result<_, AlgoError> {
                let world = Comm::world(rank);
                let g = load_graph(&world, &GraphSource::Rmat(spec))?;
                let opts = PageRankOptions {
                    iterations,
                    ..Default::default()
                };
                let r = pagerank(&world, &g, &opts, &mut |_| {})?;
                Ok((r.lo, r.ranks.to_vec(), r.iterations))
            })
            .unwrap();
            let mut got = vec![f64::NAN; n];
            for (lo, ranks, its) in parts {
                assert_eq!(its, iterations);
                got[lo as usize..lo as usize + ranks.len()].copy_from_slice(&ranks);
            }
            let l1: f64 = got.iter().zip(&expect).map(|(a, b)| (a - b).abs()).sum();
            assert!(
                l1 < 1e-12,
                "layout {ranks}/{nodes}/{running} budget {budget:?}, {iterations} \
                 iterations: L1 {l1}"
            );
        }
    }
}

#[test]
fn pagerank_resumes_its_checkpoints_bitwise_and_refuses_the_older_format() {
    use spillway_algorithms::graph::pagerank::pagerank_checkpointed;
    use spillway_checkpoint::{header, save, Checkpointer};
    let spec = RmatSpec::parse("rmat:9:8:3").unwrap();
    let fp = "pagerank test rmat:9:8:3";
    let dir = tempfile::tempdir().unwrap();
    let old_dir = tempfile::tempdir().unwrap();
    let opts = |iterations| PageRankOptions {
        iterations,
        ..Default::default()
    };
    // (ranks of this rank as bits, iterations done, iterations this run performed) of one run.
    let go = |dir: Option<&Path>, every: u64, resume: bool, iterations: usize| {
        run(&Config::new(3).nodes(1), |rank| -> Result<_, AlgoError> {
            let world = Comm::world(rank);
            let g = load_graph(&world, &GraphSource::Rmat(spec))?;
            let mut ck = dir.map(|d| Checkpointer::new(d, fp, every, resume));
            let mut performed = 0;
            let r = pagerank_checkpointed(
                &world,
                &g,
                &opts(iterations),
                &mut |_| performed += 1,
                ck.as_mut(),
            )?;
            let bits: Vec<u64> = r.ranks.as_slice().iter().map(|v| v.to_bits()).collect();
            Ok((bits, r.iterations, performed))
        })
    };
    let whole = go(None, 1, false, 9).unwrap();
    // Checkpoints after 3 and 6 of 7 iterations, then a resumed run to 9 from the one of 6.
    go(Some(dir.path()), 3, false, 7).unwrap();
    let resumed = go(Some(dir.path()), 3, true, 9).unwrap();
    for ((bits, done, performed), (want, ..)) in resumed.iter().zip(&whole) {
        assert_eq!(
            (*done, *performed),
            (9, 3),
            "not resumed from the 6th iteration"
        );
        assert!(
            bits == want,
            "a resumed run differs from an uninterrupted one"
        );
    }
    // A checkpoint in the format before the row order (4 header words, the values in the
    // set-up's order) is refused, not read in the wrong order.
    let err = run(&Config::new(3).nodes(1), |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let g = load_graph(&world, &GraphSource::Rmat(spec))?;
        let rows = g.local_rows();
        let head = header(&[3, 0.01f64.to_bits(), 0.5f64.to_bits(), rows as u64]);
        let values: Vec<u8> = (0..rows)
            .flat_map(|_| (1.0f64 / 512.0).to_le_bytes())
            .collect();
        save(&world, old_dir.path(), 3, fp, &[&head, &values])?;
        let mut ck = Checkpointer::new(old_dir.path(), fp, 3, true);
        pagerank_checkpointed(&world, &g, &opts(9), &mut |_| {}, Some(&mut ck))?;
        Ok(())
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("format of an older spillway"),
        "unexpected error: {err}"
    );
}

#[test]
fn pagerank_stops_at_the_tolerance() {
    let spec = RmatSpec::parse("rmat:7:4:5").unwrap();
    let out = run(&Config::new(3), |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let g = load_graph(&world, &GraphSource::Rmat(spec))?;
        let opts = PageRankOptions {
            iterations: 1000,
            tolerance: 1e-6,
            damping: 0.85,
        };
        let r = pagerank(&world, &g, &opts, &mut |_| {})?;
        Ok((r.iterations, r.delta))
    })
    .unwrap();
    let (its, delta) = out[0];
    assert!(
        its < 1000 && delta < 1e-6,
        "{its} iterations, delta {delta}"
    );
    assert!(out.iter().all(|&o| o == out[0]));
}

/// Sequential Lloyd with the same conventions (ties to the lower index, empty clusters keep
/// their centroid).
fn sequential_kmeans(
    points: &[f64],
    dim: usize,
    mut c: Vec<f64>,
    max_it: usize,
) -> (Vec<f64>, Vec<u32>, usize) {
    let n = points.len() / dim;
    let k = c.len() / dim;
    let mut assign = vec![u32::MAX; n];
    let mut it = 0;
    while it < max_it {
        it += 1;
        let mut moved = false;
        for i in 0..n {
            let x = &points[i * dim..(i + 1) * dim];
            let mut best = (f64::INFINITY, 0);
            for j in 0..k {
                let d: f64 = (0..dim).map(|t| (x[t] - c[j * dim + t]).powi(2)).sum();
                if d < best.0 {
                    best = (d, j);
                }
            }
            if assign[i] != best.1 as u32 {
                moved = true;
                assign[i] = best.1 as u32;
            }
        }
        if !moved {
            break;
        }
        let mut sums = vec![0.0; k * dim];
        let mut counts = vec![0usize; k];
        for i in 0..n {
            let a = assign[i] as usize;
            counts[a] += 1;
            for t in 0..dim {
                sums[a * dim + t] += points[i * dim + t];
            }
        }
        for j in 0..k {
            if counts[j] > 0 {
                for t in 0..dim {
                    c[j * dim + t] = sums[j * dim + t] / counts[j] as f64;
                }
            }
        }
    }
    (c, assign, it)
}

#[test]
fn kmeans_matches_sequential_lloyd_at_every_layout() {
    let spec = BlobsSpec::parse("blobs:3000:4:6:9").unwrap();
    let mut points = Vec::new();
    spec.points(0..spec.n, &mut points);
    let k = 6;
    let init: Vec<f64> = points[..k * 4].to_vec();
    let (c_ref, a_ref, it_ref) = sequential_kmeans(&points, 4, init, 200);
    for (ranks, nodes, running) in layouts() {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let parts = run(&config, |rank| -> Result<_, AlgoError> {
            let world = Comm::world(rank);
            let pts = load_points(&world, &PointSource::Blobs(spec))?;
            let opts = KMeansOptions {
                k,
                max_iterations: 200,
                init: Init::First,
            };
            let r = kmeans(&world, &pts, &opts, &mut |_| {})?;
            Ok((
                r.centroids,
                r.assignment.to_vec(),
                r.iterations,
                r.converged,
            ))
        })
        .unwrap();
        let assign: Vec<u32> = parts.iter().flat_map(|p| p.1.clone()).collect();
        assert_eq!(assign, a_ref, "layout {ranks}/{nodes}");
        for p in &parts {
            assert!(p.3 && p.2 == it_ref);
            let diff =
                p.0.iter()
                    .zip(&c_ref)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
            assert!(diff < 1e-9, "layout {ranks}/{nodes}: centroid diff {diff}");
        }
    }
}

#[test]
fn kmeans_rejects_more_clusters_than_points_on_every_rank() {
    let spec = BlobsSpec::parse("blobs:5:2:2").unwrap();
    let err = run(&Config::new(3), |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let pts = load_points(&world, &PointSource::Blobs(spec))?;
        let opts = KMeansOptions {
            k: 6,
            max_iterations: 10,
            init: Init::Random(4),
        };
        kmeans(&world, &pts, &opts, &mut |_| {}).map(drop)
    })
    .unwrap_err();
    let algo = err.rank_error::<AlgoError>().expect("an algorithm error");
    assert!(
        algo.is_bad_input()
            && algo
                .to_string()
                .contains("larger than the number of points"),
        "{algo}"
    );
}

#[test]
fn random_init_picks_distinct_points_deterministically() {
    let spec = BlobsSpec::parse("blobs:50:3:4:2").unwrap();
    let mut all = Vec::new();
    spec.points(0..50, &mut all);
    let mut seen = Vec::new();
    for ranks in [1, 4] {
        let c = run(&Config::new(ranks), |rank| -> Result<_, AlgoError> {
            let world = Comm::world(rank);
            let pts = load_points(&world, &PointSource::Blobs(spec))?;
            spillway_algorithms::cluster::kmeans::initial_centroids(
                &world,
                &pts,
                10,
                &Init::Random(7),
            )
        })
        .unwrap();
        assert!(c.iter().all(|x| *x == c[0]));
        let rows: Vec<&[f64]> = c[0].chunks(3).collect();
        for (i, r) in rows.iter().enumerate() {
            assert!(
                all.chunks(3).any(|p| p == *r),
                "centroid {i} is not a data point"
            );
            assert!(rows[..i].iter().all(|o| o != r), "centroid {i} repeats");
        }
        seen.push(c[0].clone());
    }
    assert_eq!(seen[0], seen[1]);
}

#[test]
fn ordered_writes_appear_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.txt");
    run(
        &Config::new(5).nodes(2).running(1),
        |rank| -> Result<_, AlgoError> {
            let world = Comm::world(rank);
            let me = world.rank();
            write_ordered(&world, &path, |w| writeln!(w, "rank {me}"))?;
            world.barrier()?;
            Ok(())
        },
    )
    .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text,
        (0..5).map(|r| format!("rank {r}\n")).collect::<String>()
    );
    let failed = dir.path().join("failed.txt");
    let err = run(&Config::new(4), |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let me = world.rank();
        write_ordered(&world, &failed, |w| {
            if me == 2 {
                return Err(std::io::Error::other("disk full on purpose"));
            }
            writeln!(w, "rank {me}")
        })
    });
    assert!(err.is_err());
    assert!(!failed.exists());
    assert_only(dir.path(), &["out.txt"]);
}

fn assert_only(dir: &Path, names: &[&str]) {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(found, names, "leftover files");
}
