//! End-to-end tests of the `spillway` binary: results against independent references (a
//! sequential loop in this file, and networkx / scipy / scikit-learn through the scripts in
//! `tests/reference/`), consistency across runtime layouts, `gen rmat`, `--json`, and the
//! handling of bad input.
//!
//! The Python checks run `$SPILLWAY_PYTHON` (default `python3`), which needs numpy, scipy,
//! networkx and scikit-learn; they fail if it cannot run them, unless `SPILLWAY_SKIP_PYTHON=1`.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

mod common;
use common::{assert_rejected, check_with_python, l1, python, tempdir, write, Cmd, Lcg};

/// `(ranks, nodes, running per node)` layouts for PageRank.
const LAYOUTS: [(u32, u32, u32); 4] = [(1, 1, 1), (3, 1, 2), (5, 2, 1), (8, 3, 2)];

/// Layouts for K-means against scikit-learn.
const KMEANS_LAYOUTS: [(u32, u32, u32); 3] = [(1, 1, 1), (4, 2, 1), (7, 3, 2)];

// ---------------------------------------------------------------------------------------------
// Test data
// ---------------------------------------------------------------------------------------------

/// A directed graph on vertices `0..n` (vertex `n - 1` has an edge, so files give `N = n`).
struct Graph {
    n: usize,
    edges: Vec<(u32, u32)>,
}

impl Graph {
    /// A random graph with isolated ids (`v % 17 == 5`), dangling vertices (`v % 7 == 3`), self
    /// loops (`v % 13 == 0`), a directed cycle through all other vertices (slow mixing) and
    /// `m` random edges; with `duplicates`, some edges appear two or three times.
    fn random(seed: u64, n: usize, m: usize, duplicates: bool) -> Graph {
        let mut rng = Lcg(seed);
        let isolated = |v: usize| v % 17 == 5 && v != n - 1;
        let dangling = |v: usize| v % 7 == 3 && v != n - 1;
        let present: Vec<usize> = (0..n).filter(|&v| !isolated(v)).collect();
        let sources: Vec<usize> = present.iter().copied().filter(|&v| !dangling(v)).collect();
        let mut edges = Vec::new();
        for (i, &u) in sources.iter().enumerate() {
            edges.push((u, sources[(i + 1) % sources.len()]));
            if u % 13 == 0 {
                edges.push((u, u));
            }
        }
        for _ in 0..m {
            let u = sources[rng.below(sources.len())];
            let v = present[rng.below(present.len())];
            edges.push((u, v));
        }
        let mut seen = HashSet::new();
        let mut edges: Vec<(u32, u32)> = edges
            .into_iter()
            .map(|(u, v)| (u as u32, v as u32))
            .filter(|e| seen.insert(*e))
            .collect();
        if duplicates {
            for i in (0..edges.len()).step_by(9) {
                edges.push(edges[i]);
            }
            let (e0, e1) = (edges[1], edges[2]);
            edges.extend([e0, e0, e1]);
        }
        // Shuffle (Fisher-Yates) so that duplicates are not adjacent.
        for i in (1..edges.len()).rev() {
            let j = rng.below(i + 1);
            edges.swap(i, j);
        }
        Graph { n, edges }
    }

    /// Writes a SNAP edge list with comments, a blank line, tabs and spaces.
    fn write_snap(&self, path: &Path) {
        let mut text = String::from("# Directed test graph\n# FromNodeId\tToNodeId\n");
        for (i, (u, v)) in self.edges.iter().enumerate() {
            let sep = if i % 2 == 0 { "\t" } else { " " };
            writeln!(text, "{u}{sep}{v}").unwrap();
            if i == self.edges.len() / 2 {
                text.push_str("# a comment in the middle\n\n");
            }
        }
        std::fs::write(path, text).unwrap();
    }

    fn has_duplicates(&self) -> bool {
        self.edges.iter().collect::<HashSet<_>>().len() != self.edges.len()
    }
}

/// Sequential PageRank as documented: column-stochastic, parallel edges add up, dangling mass
/// spread uniformly, start `1/N`, exactly `iterations` iterations.
fn sequential_pagerank(g: &Graph, damping: f64, iterations: usize) -> Vec<f64> {
    let n = g.n;
    let mut degree = vec![0u32; n];
    for &(u, _) in &g.edges {
        degree[u as usize] += 1;
    }
    let mut x = vec![1.0 / n as f64; n];
    for _ in 0..iterations {
        let dangling: f64 = (0..n).filter(|&u| degree[u] == 0).map(|u| x[u]).sum();
        let mut pushed = vec![0.0; n];
        for &(u, v) in &g.edges {
            pushed[v as usize] += x[u as usize] / f64::from(degree[u as usize]);
        }
        for (xv, p) in x.iter_mut().zip(&pushed) {
            *xv = (1.0 - damping) / n as f64 + damping * (p + dangling / n as f64);
        }
    }
    x
}

/// Reads a rank file, checking that it lists vertices `0..` in order.
fn read_ranks(path: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let (v, r) = line
                .split_once(' ')
                .unwrap_or_else(|| panic!("{}:{}: bad line {line:?}", path.display(), i + 1));
            assert_eq!(
                v,
                i.to_string(),
                "{}: vertices out of order",
                path.display()
            );
            r.parse()
                .unwrap_or_else(|e| panic!("{}:{}: bad rank: {e}", path.display(), i + 1))
        })
        .collect()
}

/// `n` points in `dim` dimensions around `k` random centres in `[-10, 10)^dim`, standard
/// deviation `sigma`, each point's cluster chosen at random.
fn blobs(seed: u64, n: usize, dim: usize, k: usize, sigma: f64) -> Vec<Vec<f64>> {
    let mut rng = Lcg(seed);
    let centres: Vec<Vec<f64>> = (0..k)
        .map(|_| (0..dim).map(|_| -10.0 + 20.0 * rng.unit()).collect())
        .collect();
    (0..n)
        .map(|_| {
            let c = &centres[rng.below(k)];
            c.iter().map(|x| x + sigma * rng.normal()).collect()
        })
        .collect()
}

/// Writes points as CSV with round-trip formatting (Python reads the same doubles).
fn write_csv(path: &Path, points: &[Vec<f64>]) {
    let mut text = String::new();
    for p in points {
        let row: Vec<String> = p.iter().map(|v| format!("{v:?}")).collect();
        text.push_str(&row.join(","));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn read_csv(path: &Path) -> Vec<Vec<f64>> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        .lines()
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect()
}

fn layout_name((r, k, x): (u32, u32, u32)) -> String {
    format!("r{r}n{k}x{x}")
}

fn pagerank_to(input: &Path, out: &Path, layout: (u32, u32, u32)) -> Cmd {
    Cmd::spillway()
        .args(["run", "pagerank", "--input"])
        .arg(input)
        .arg("--out")
        .arg(out)
        .layout(layout)
}

/// Runs PageRank to convergence (500 iterations, tolerance 1e-13) and returns the output path.
fn converged_pagerank(dir: &Path, input: &Path, layout: (u32, u32, u32)) -> PathBuf {
    let out = dir.join(format!("ranks-{}.txt", layout_name(layout)));
    pagerank_to(input, &out, layout)
        .args(["--iterations", "500", "--tolerance", "1e-13"])
        .ok();
    out
}

/// Runs PageRank of `input` to convergence at each of `layouts` and checks every output against
/// the references (`pagerank_ref.py`), whose report must say each of `says`. Returns the
/// outputs.
fn converged_pagerank_matches(
    py: &str,
    dir: &Path,
    input: &Path,
    layouts: &[(u32, u32, u32)],
    says: &[&str],
) -> Vec<PathBuf> {
    let mut outs = Vec::new();
    for &layout in layouts {
        let out = converged_pagerank(dir, input, layout);
        let report =
            check_with_python(py, "pagerank_ref.py", &[input.as_os_str(), out.as_os_str()]);
        for say in says {
            assert!(
                report.contains(say),
                "the report does not say {say:?}: {report}"
            );
        }
        outs.push(out);
    }
    outs
}

// ---------------------------------------------------------------------------------------------
// PageRank
// ---------------------------------------------------------------------------------------------

#[test]
fn pagerank_converged_matches_networkx_and_scipy_at_all_layouts() {
    let Some(py) = python() else {
        return;
    };
    let dir = tempdir();
    let g = Graph::random(11, 300, 1200, false);
    assert!(!g.has_duplicates());
    let input = dir.path().join("graph.txt");
    g.write_snap(&input);
    // Both references are checked.
    let says = ["networkx.pagerank: L1", "scipy"];
    converged_pagerank_matches(&py, dir.path(), &input, &LAYOUTS, &says);
}

#[test]
fn pagerank_with_duplicate_edges_matches_scipy() {
    let Some(py) = python() else {
        return;
    };
    let dir = tempdir();
    let g = Graph::random(12, 250, 900, true);
    assert!(g.has_duplicates());
    let input = dir.path().join("multigraph.txt");
    g.write_snap(&input);
    let says = ["scipy power iteration", "networkx: skipped"];
    converged_pagerank_matches(&py, dir.path(), &input, &[(1, 1, 1), (5, 2, 1)], &says);
}

#[test]
fn pagerank_symmetric_mtx_matches_references() {
    let Some(py) = python() else {
        return;
    };
    let dir = tempdir();
    // 12 x 12 symmetric, real values (ignored), diagonal entries, header comments; vertex 7 (8 in
    // the file) has no entries, vertex 11 only a diagonal one.
    let input = write(
        dir.path(),
        "sym.mtx",
        "%%MatrixMarket matrix coordinate real symmetric\n\
         % a comment\n\
         %\n\
         12 12 14\n\
         2 1 1.5\n3 1 -2\n3 2 0.25\n4 4 1e3\n5 3 7\n6 5 1\n7 6 1\n\
         7 1 2\n10 9 3\n11 10 4\n9 3 5\n12 12 6\n1 1 1\n11 4 -1\n",
    );
    let layouts = [(1, 1, 1), (3, 1, 2), (5, 2, 1)];
    let says = ["networkx.pagerank: L1"];
    for out in converged_pagerank_matches(&py, dir.path(), &input, &layouts, &says) {
        assert_eq!(read_ranks(&out).len(), 12);
    }
}

#[test]
fn pagerank_general_nonsquare_mtx_with_other_damping_matches_references() {
    let Some(py) = python() else {
        return;
    };
    let dir = tempdir();
    // 5 x 9 integer matrix: N = 9; columns 6..9 are only targets (dangling).
    let input = write(
        dir.path(),
        "rect.mtx",
        "%%MatrixMarket matrix coordinate integer general\n\
         5 9 9\n1 2 1\n2 3 4\n3 1 -2\n1 9 1\n4 6 2\n5 5 3\n5 1 1\n2 7 1\n3 3 1\n",
    );
    let out = dir.path().join("ranks.txt");
    pagerank_to(&input, &out, (3, 1, 2))
        .args([
            "--iterations",
            "1000",
            "--tolerance",
            "1e-14",
            "--damping",
            "0.7",
        ])
        .ok();
    assert_eq!(read_ranks(&out).len(), 9);
    check_with_python(
        &py,
        "pagerank_ref.py",
        &[
            input.as_os_str(),
            out.as_os_str(),
            "--damping".as_ref(),
            "0.7".as_ref(),
        ],
    );
}

#[test]
fn pagerank_fixed_iterations_match_sequential_loop() {
    let dir = tempdir();
    let g = Graph::random(13, 280, 1000, true);
    let input = dir.path().join("graph.txt");
    g.write_snap(&input);
    let expected = sequential_pagerank(&g, 0.85, 7);
    for layout in [(1, 1, 1), (5, 2, 1)] {
        let out = dir
            .path()
            .join(format!("ranks-{}.txt", layout_name(layout)));
        pagerank_to(&input, &out, layout)
            .args(["--iterations", "7", "--tolerance", "0"])
            .ok();
        let got = read_ranks(&out);
        assert_eq!(got.len(), g.n);
        let d = l1(&got, &expected);
        assert!(
            d <= 1e-12,
            "layout {layout:?}: L1 distance {d:e} to the sequential loop"
        );
    }
    // Not converged yet: a further iteration changes the result noticeably.
    let d = l1(&expected, &sequential_pagerank(&g, 0.85, 8));
    assert!(
        d > 1e-6,
        "7 iterations are (nearly) converged ({d:e}): a weak test"
    );
}

#[test]
fn pagerank_same_ranks_for_all_layouts() {
    let dir = tempdir();
    let g = Graph::random(14, 300, 1100, true);
    let input = dir.path().join("graph.txt");
    g.write_snap(&input);
    let results: Vec<Vec<f64>> = LAYOUTS
        .iter()
        .map(|&layout| read_ranks(&converged_pagerank(dir.path(), &input, layout)))
        .collect();
    assert_eq!(results[0].len(), g.n);
    let sum: f64 = results[0].iter().sum();
    assert!((sum - 1.0).abs() < 1e-9, "ranks sum to {sum}");
    for (layout, r) in LAYOUTS.iter().zip(&results).skip(1) {
        let d = l1(r, &results[0]);
        assert!(
            d <= 1e-12,
            "layout {layout:?} differs from {:?} by {d:e}",
            LAYOUTS[0]
        );
    }
}

#[test]
fn pagerank_json_report_is_one_object() {
    let dir = tempdir();
    let g = Graph::random(15, 200, 600, false);
    let input = dir.path().join("graph.txt");
    g.write_snap(&input);
    let out = dir.path().join("ranks.txt");
    let ran = pagerank_to(&input, &out, (3, 1, 2))
        .args(["--iterations", "6", "--json"])
        .ok();
    let v: serde_json::Value = serde_json::from_str(&ran.stdout)
        .unwrap_or_else(|e| panic!("stdout is not exactly one JSON value: {e}\n{ran}"));
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object\n{ran}"));
    assert_eq!(obj["algorithm"], "pagerank");
    assert_eq!(obj["iterations"].as_u64(), Some(6));
    assert_eq!(obj["vertices"].as_f64(), Some(g.n as f64));
    assert_eq!(obj["edges"].as_f64(), Some(g.edges.len() as f64));
    assert!(
        obj["messages_sent"].as_u64().is_some_and(|m| m > 0),
        "{ran}"
    );
    assert!(obj["bytes_sent"].as_u64().is_some_and(|b| b > 0), "{ran}");
    assert_eq!(obj["iteration_seconds"].as_array().map(Vec::len), Some(6));
    assert_eq!(read_ranks(&out).len(), g.n);
}

// ---------------------------------------------------------------------------------------------
// gen rmat
// ---------------------------------------------------------------------------------------------

fn gen_rmat(out: &Path, scale: u32, edge_factor: u32, seed: u64) {
    Cmd::spillway()
        .args(["gen", "rmat", "--scale"])
        .arg(scale.to_string())
        .arg("--edge-factor")
        .arg(edge_factor.to_string())
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--out")
        .arg(out)
        .ok();
}

/// The edges of a SNAP file; asserts that it has a `#` header.
fn read_snap(path: &Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.starts_with('#'), "no '#' header in {}", path.display());
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split_whitespace().map(|x| x.parse::<u64>().unwrap());
            let e = (f.next().unwrap(), f.next().unwrap());
            assert!(f.next().is_none(), "bad line {l:?}");
            e
        })
        .collect()
}

#[test]
fn gen_rmat_is_deterministic_and_well_formed() {
    let dir = tempdir();
    let (a, b, c) = (
        dir.path().join("a.txt"),
        dir.path().join("b.txt"),
        dir.path().join("c.txt"),
    );
    gen_rmat(&a, 6, 8, 2);
    gen_rmat(&b, 6, 8, 2);
    gen_rmat(&c, 6, 8, 3);
    let edges = read_snap(&a);
    assert_eq!(edges.len(), 64 * 8);
    assert!(edges.iter().all(|&(s, d)| s < 64 && d < 64));
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let other = read_snap(&c);
    assert_eq!(other.len(), 64 * 8);
    assert_ne!(edges, other, "seeds 2 and 3 gave the same graph");
    let names: BTreeSet<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "leftover files: {names:?}");
}

#[test]
fn pagerank_on_gen_rmat_file_equals_generate() {
    let dir = tempdir();
    let file = dir.path().join("rmat.txt");
    gen_rmat(&file, 6, 8, 2);
    // An edge list has N = 1 + max id, --generate has N = 2^scale: they agree only if the
    // last vertex has an edge, which holds for this seed.
    let max = read_snap(&file).iter().map(|&(s, d)| s.max(d)).max();
    assert_eq!(
        max,
        Some(63),
        "test precondition: vertex 63 must occur in rmat:6:8:2"
    );
    let (from_file, generated) = (dir.path().join("f.txt"), dir.path().join("g.txt"));
    pagerank_to(&file, &from_file, (3, 1, 2))
        .args(["--iterations", "30"])
        .ok();
    Cmd::spillway()
        .args([
            "run",
            "pagerank",
            "--generate",
            "rmat:6:8:2",
            "--iterations",
            "30",
            "--out",
        ])
        .arg(&generated)
        .layout((3, 1, 2))
        .ok();
    let (x, y) = (read_ranks(&from_file), read_ranks(&generated));
    assert_eq!(x.len(), 64);
    let d = l1(&x, &y);
    assert!(
        d <= 1e-12,
        "--input of the generated file differs from --generate by {d:e}"
    );
}

// ---------------------------------------------------------------------------------------------
// K-means
// ---------------------------------------------------------------------------------------------

/// Points for K-means (3000 in 5 dimensions, 6 overlapping clusters) and the path of their CSV.
fn kmeans_points(dir: &Path) -> (Vec<Vec<f64>>, PathBuf) {
    let points = blobs(21, 3000, 5, 6, 2.5);
    let path = dir.join("points.csv");
    write_csv(&path, &points);
    (points, path)
}

fn kmeans_to(input: &Path, k: usize, init: &str, dir: &Path, tag: &str) -> (Cmd, PathBuf, PathBuf) {
    let (out, assign) = (
        dir.join(format!("centroids-{tag}.csv")),
        dir.join(format!("assign-{tag}.txt")),
    );
    let k = k.to_string();
    let cmd = Cmd::spillway()
        .args(["run", "kmeans", "--input"])
        .arg(input)
        .args(["--k", &k, "--iterations", "1000", "--init", init, "--out"])
        .arg(&out)
        .arg("--assign")
        .arg(&assign);
    (cmd, out, assign)
}

#[test]
fn kmeans_matches_scikit_learn_at_several_layouts() {
    let Some(py) = python() else {
        return;
    };
    let dir = tempdir();
    let (points, input) = kmeans_points(dir.path());
    // Initial centroids: points 0, 10, 20, ... (not one per cluster: Lloyd has work to do).
    let init = dir.path().join("init.csv");
    let k = 6;
    write_csv(
        &init,
        &(0..k).map(|i| points[10 * i].clone()).collect::<Vec<_>>(),
    );
    let init_arg = format!("file:{}", init.display());
    for layout in KMEANS_LAYOUTS {
        let (cmd, out, assign) = kmeans_to(&input, k, &init_arg, dir.path(), &layout_name(layout));
        let ran = cmd.layout(layout).arg("--json").ok();
        let report: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
        assert!(
            report["iterations"].as_u64().unwrap() > 2,
            "too easy: {ran}"
        );
        assert_eq!(report["converged"].as_bool(), Some(true), "{ran}");
        check_with_python(
            &py,
            "kmeans_ref.py",
            &[
                input.as_os_str(),
                init.as_os_str(),
                out.as_os_str(),
                assign.as_os_str(),
            ],
        );
    }
}

#[test]
fn kmeans_same_assignment_for_all_layouts() {
    let dir = tempdir();
    let (points, input) = kmeans_points(dir.path());
    let mut first: Option<(Vec<Vec<f64>>, String)> = None;
    for layout in LAYOUTS {
        let (cmd, out, assign) = kmeans_to(&input, 6, "random:7", dir.path(), &layout_name(layout));
        cmd.layout(layout).ok();
        let (centroids, labels) = (read_csv(&out), std::fs::read_to_string(&assign).unwrap());
        assert_eq!(labels.lines().count(), points.len());
        assert_eq!(centroids.len(), 6);
        match &first {
            None => first = Some((centroids, labels)),
            Some((c0, l0)) => {
                assert!(
                    labels == *l0,
                    "layout {layout:?}: --assign differs from 1 rank"
                );
                for (a, b) in centroids.iter().flatten().zip(c0.iter().flatten()) {
                    assert!(
                        (a - b).abs() <= 1e-9,
                        "layout {layout:?}: centroid {a} vs {b}"
                    );
                }
            }
        }
    }
}

#[test]
fn kmeans_init_first_equals_file_of_first_points() {
    let dir = tempdir();
    let (points, input) = kmeans_points(dir.path());
    let k = 5;
    let init = dir.path().join("init.csv");
    write_csv(&init, &points[..k]);
    let (cmd, out_first, assign_first) = kmeans_to(&input, k, "first", dir.path(), "first");
    cmd.layout((4, 2, 1)).ok();
    let init_arg = format!("file:{}", init.display());
    let (cmd, out_file, assign_file) = kmeans_to(&input, k, &init_arg, dir.path(), "file");
    cmd.layout((4, 2, 1)).ok();
    assert_eq!(
        std::fs::read_to_string(&out_first).unwrap(),
        std::fs::read_to_string(&out_file).unwrap()
    );
    let labels = std::fs::read_to_string(&assign_first).unwrap();
    assert_eq!(labels.lines().count(), points.len());
    assert_eq!(labels, std::fs::read_to_string(&assign_file).unwrap());
}

#[test]
fn kmeans_json_report_is_one_object() {
    let dir = tempdir();
    let (_, input) = kmeans_points(dir.path());
    let ran = Cmd::spillway()
        .args(["run", "kmeans", "--input"])
        .arg(&input)
        .args(["--k", "4", "--iterations", "3", "--json"])
        .layout((3, 1, 2))
        .ok();
    let v: serde_json::Value = serde_json::from_str(&ran.stdout)
        .unwrap_or_else(|e| panic!("stdout is not exactly one JSON value: {e}\n{ran}"));
    assert_eq!(v["algorithm"], "kmeans", "{ran}");
    assert_eq!(v["iterations"].as_u64(), Some(3), "{ran}");
    assert_eq!(v["points"].as_f64(), Some(3000.0), "{ran}");
    assert_eq!(v["dimensions"].as_f64(), Some(5.0), "{ran}");
    assert_eq!(v["k"].as_f64(), Some(4.0), "{ran}");
}

// ---------------------------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------------------------

/// Asserts that PageRank rejects `text` (as file `name`) at `line` with `reason`, on 1 and 4
/// ranks.
fn assert_pagerank_rejects(name: &str, text: &str, line: Option<u64>, reason: &str) {
    let dir = tempdir();
    let input = write(dir.path(), name, text);
    for layout in [(1, 1, 1), (4, 2, 2)] {
        let cmd = pagerank_to(&input, &dir.path().join("ranks.txt"), layout);
        assert_rejected(dir.path(), cmd, Some(&input), line, reason);
    }
}

/// Asserts that K-means (k = `k`) rejects the CSV `text` at `line` with `reason`.
fn assert_kmeans_rejects(text: &str, k: usize, ranks: u32, line: Option<u64>, reason: &str) {
    let dir = tempdir();
    let input = write(dir.path(), "points.csv", text);
    let (cmd, _, _) = kmeans_to(&input, k, "first", dir.path(), "bad");
    assert_rejected(
        dir.path(),
        cmd.layout((ranks, 1, 1)),
        Some(&input),
        line,
        reason,
    );
}

#[test]
fn rejects_missing_input_file() {
    let dir = tempdir();
    let missing = dir.path().join("no-such-graph.txt");
    let cmd = pagerank_to(&missing, &dir.path().join("ranks.txt"), (2, 1, 1));
    assert_rejected(dir.path(), cmd, Some(&missing), None, "cannot open");
    let missing = dir.path().join("no-such-points.csv");
    let (cmd, _, _) = kmeans_to(&missing, 2, "first", dir.path(), "x");
    assert_rejected(dir.path(), cmd, Some(&missing), None, "cannot open");
}

#[test]
fn rejects_snap_non_numeric_id() {
    assert_pagerank_rejects("g.txt", "# g\n0 1\n1 x\n2 0\n", Some(3), "'x'");
}

#[test]
fn rejects_snap_three_fields() {
    assert_pagerank_rejects("g.txt", "0 1\n1 2 3\n2 0\n", Some(2), "fields");
}

#[test]
fn rejects_snap_negative_id() {
    assert_pagerank_rejects("g.txt", "0 1\n1 2\n\n-1 2\n", Some(4), "-1");
}

#[test]
fn rejects_snap_id_out_of_range() {
    assert_pagerank_rejects("g.txt", "0 1\n99999999999 2\n", Some(2), "99999999999");
}

#[test]
fn rejects_snap_bad_line_deep_in_file_with_the_first_bad_line() {
    let mut text = String::from("# big\n");
    for i in 0..4000u32 {
        match i {
            2500 => text.push_str("7 seven\n"),
            3500 => text.push_str("1 2 3\n"),
            _ => writeln!(text, "{} {}", i % 97, (i * 7) % 101).unwrap(),
        }
    }
    // Line 1 is the header, so edge i is on line i + 2.
    assert_pagerank_rejects("big.txt", &text, Some(2502), "'seven'");
}

#[test]
fn rejects_mtx_wrong_banner() {
    assert_pagerank_rejects(
        "m.mtx",
        "%%MatrixMarket matrix array real general\n3 3\n1\n2\n3\n4\n5\n6\n7\n8\n9\n",
        Some(1),
        "array",
    );
    assert_pagerank_rejects(
        "n.mtx",
        "% no banner\n3 3 1\n1 2\n",
        Some(1),
        "MatrixMarket",
    );
}

#[test]
fn rejects_mtx_index_out_of_range() {
    assert_pagerank_rejects(
        "m.mtx",
        "%%MatrixMarket matrix coordinate pattern general\n% c\n3 3 3\n1 2\n3 4\n2 1\n",
        Some(5),
        "out of range",
    );
    // Deep in a larger file, found by a rank other than 0: the line counts the header.
    let mut text = String::from("%%MatrixMarket matrix coordinate pattern general\n% c\n");
    text.push_str("100 100 3000\n");
    for i in 0..3000u32 {
        match i {
            2000 => text.push_str("1 200\n"),
            _ => writeln!(text, "{} {}", i % 100 + 1, (i * 7) % 100 + 1).unwrap(),
        }
    }
    assert_pagerank_rejects("deep.mtx", &text, Some(2004), "200");
}

#[test]
fn rejects_mtx_fewer_entries_than_announced() {
    assert_pagerank_rejects(
        "m.mtx",
        "%%MatrixMarket matrix coordinate real general\n4 4 5\n1 2 1\n2 3 1\n3 1 1\n4 4 1\n",
        None,
        "entries",
    );
}

#[test]
fn rejects_csv_rows_of_unequal_length() {
    assert_kmeans_rejects("1,2\n3,4\n5,6\n7\n9,10\n11,12\n", 2, 1, Some(4), "values");
    assert_kmeans_rejects("1,2\n3,4\n5,6\n7\n9,10\n11,12\n", 2, 3, Some(4), "values");
}

#[test]
fn rejects_csv_bad_row_deep_in_file_with_the_first_bad_line() {
    let mut text = String::new();
    for i in 0..3000u32 {
        match i {
            2100 => text.push_str("1.5,2.5\n"),
            2701 => text.push_str("1,2,3,4\n"),
            _ => writeln!(text, "{}.5,{},{}", i % 13, i % 7, -(i as i64)).unwrap(),
        }
    }
    // Row i is on line i + 1; with 4 ranks, rank 2 owns line 2101 and rank 3 line 2702.
    assert_kmeans_rejects(&text, 3, 4, Some(2101), "values");
}

#[test]
fn rejects_csv_non_numeric_value() {
    assert_kmeans_rejects("1,2\n3,4\n5,abc\n7,8\n", 2, 1, Some(3), "abc");
    assert_kmeans_rejects("1,2\n3,4\n5,6\n7,8\n9,1e400x\n", 2, 2, Some(5), "1e400x");
}

#[test]
fn rejects_k_larger_than_number_of_points() {
    assert_kmeans_rejects("1,2\n3,4\n5,6\n", 4, 2, None, "larger than");
}

#[test]
fn rejects_init_file_with_wrong_number_of_rows() {
    let dir = tempdir();
    let input = write(dir.path(), "points.csv", "1,2\n3,4\n5,6\n7,8\n9,10\n");
    let init = write(dir.path(), "init.csv", "1,2\n3,4\n");
    let (cmd, _, _) = kmeans_to(
        &input,
        3,
        &format!("file:{}", init.display()),
        dir.path(),
        "x",
    );
    assert_rejected(
        dir.path(),
        cmd.layout((2, 1, 1)),
        Some(&init),
        None,
        "centroids",
    );
}

#[test]
fn rejects_bad_generate_spec() {
    let dir = tempdir();
    let out = dir.path().join("out.txt");
    for spec in ["rmat:x:4", "rmat:4", "blobs:10:2:2", "rmat:0:4"] {
        let cmd = Cmd::spillway()
            .args(["run", "pagerank", "--generate", spec, "--out"])
            .arg(&out);
        assert_rejected(dir.path(), cmd, None, None, "");
    }
    for spec in ["blobs:10:0:2", "blobs:x:2:2", "rmat:4:4"] {
        let cmd = Cmd::spillway()
            .args(["run", "kmeans", "--generate", spec, "--k", "2", "--out"])
            .arg(&out);
        assert_rejected(dir.path(), cmd, None, None, "");
    }
}
