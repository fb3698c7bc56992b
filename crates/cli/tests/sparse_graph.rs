//! End-to-end tests of `run spkmeans`, `run sgd` and `run colour` against independent
//! references (the scripts `spkmeans_ref.py`, `sgd_ref.py` and `colour_ref.py` in
//! `tests/reference/`), at several rank counts and node layouts, and their handling of bad input.
//!
//! The inputs are generated here from seeds that no other test uses; `SPILLWAY_TEST_SEED`
//! replaces the base seed, to check the commands on inputs never seen before.
//! The Python checks run `$SPILLWAY_PYTHON` (default `python3`) with numpy, scipy, networkx and
//! scikit-learn; `SPILLWAY_SKIP_PYTHON=1` skips them.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

mod common;
use common::{
    assert_rejected, check_reference, check_with_python, python, tempdir, write, Cmd, Lcg,
};

// ---------------------------------------------------------------------------------------------
// Test data
// ---------------------------------------------------------------------------------------------

/// The base seed of the generated inputs (`SPILLWAY_TEST_SEED` or a fixed one), printed so that
/// a failure can be reproduced.
fn base_seed() -> u64 {
    let seed = std::env::var("SPILLWAY_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x005e_ed15);
    println!("base seed {seed} (SPILLWAY_TEST_SEED)");
    seed
}

fn layout_name((r, k, x): (u32, u32, u32)) -> String {
    format!("r{r}n{k}x{x}")
}

// ---------------------------------------------------------------------------------------------
// Colouring
// ---------------------------------------------------------------------------------------------

/// A random graph on `n` vertices as a SNAP edge list: `m` random edges (some repeated, some
/// in both directions), self loops, a clique of 12 (so that some degree is high) and isolated
/// ids (vertex `n - 1` has an edge, so the file has `n` vertices).
fn colour_graph(seed: u64, n: usize, m: usize) -> String {
    let mut rng = Lcg(seed);
    let mut text = String::from("# colouring test graph\n");
    for _ in 0..m {
        let (u, v) = (rng.below(n), rng.below(n));
        if u % 19 == 7 || v % 19 == 7 {
            continue; // isolated ids
        }
        writeln!(text, "{u} {v}").unwrap();
        if rng.below(10) == 0 {
            writeln!(text, "{v} {u}").unwrap();
        }
        if rng.below(20) == 0 {
            writeln!(text, "{u} {v}").unwrap();
        }
    }
    for a in 0..12 {
        for b in a + 1..12 {
            writeln!(text, "{} {}", 100 + a, 100 + b).unwrap();
        }
    }
    writeln!(text, "3 3\n{} 0", n - 1).unwrap();
    text
}

/// Each order and pass count, at several layouts: valid, within max degree + 1, the same at
/// every layout; with `--passes 0` the largest-first colouring is networkx's, vertex by
/// vertex, and with recolouring passes it never needs more colours than networkx's.
#[test]
fn colour_is_valid_within_max_degree_plus_one_and_independent_of_the_layout() {
    let dir = tempdir();
    let seed = base_seed();
    let input = write(dir.path(), "graph.txt", colour_graph(seed, 3000, 12_000));
    let configs: [(&[&str], Option<&str>); 3] = [
        (&["--passes", "0"], Some("--largest-first")),
        (&[], Some("--at-most-largest-first")),
        (&["--order", "random", "--seed", "11"], None),
    ];
    for (c, (args, mode)) in configs.iter().enumerate() {
        let mut first: Option<String> = None;
        for (layout, budget) in [
            ((1, 1, 1), None),
            ((3, 1, 2), None),
            ((7, 2, 2), None),
            ((6, 2, 1), Some("1M")),
        ] {
            let out = dir
                .path()
                .join(format!("colours-{c}-{}.txt", layout_name(layout)));
            let cmd = Cmd::spillway()
                .args(["run", "colour", "--input"])
                .arg(&input)
                .args(*args)
                .args(["--json", "--out"])
                .arg(&out)
                .layout(layout)
                .mem_budget(budget);
            let ran = cmd.ok();
            let colours = ran.number("colours");
            let max_degree = ran.number("max_degree");
            assert!(colours <= max_degree + 1.0, "{ran}");
            if let Some(py) = python() {
                let mut check = vec![input.as_os_str(), out.as_os_str()];
                if let Some(m) = mode {
                    check.push(std::ffi::OsStr::new(m));
                }
                let said = check_with_python(&py, "colour_ref.py", &check);
                assert!(
                    said.contains(&format!("spillway {colours} colours")),
                    "{said}"
                );
            }
            let text = std::fs::read_to_string(&out).unwrap();
            match &first {
                None => first = Some(text),
                Some(f) => assert!(*f == text, "colours differ between layouts ({args:?})"),
            }
        }
    }
}

#[test]
fn colour_of_a_symmetric_mtx_graph_is_valid() {
    let dir = tempdir();
    let mut rng = Lcg(base_seed() ^ 0xc01);
    let n = 400;
    let mut entries = BTreeSet::new();
    while entries.len() < 2500 {
        let (a, b) = (1 + rng.below(n), 1 + rng.below(n));
        entries.insert((a.max(b), a.min(b)));
    }
    let mut text = format!(
        "%%MatrixMarket matrix coordinate pattern symmetric\n{n} {n} {}\n",
        entries.len()
    );
    for (a, b) in &entries {
        writeln!(text, "{a} {b}").unwrap();
    }
    let input = write(dir.path(), "graph.mtx", &text);
    let out = dir.path().join("colours.txt");
    Cmd::spillway()
        .args(["run", "colour", "--input"])
        .arg(&input)
        .args(["--passes", "0", "--out"])
        .arg(&out)
        .layout((4, 2, 1))
        .ok();
    check_reference(
        "colour_ref.py",
        &[
            input.as_os_str(),
            out.as_os_str(),
            std::ffi::OsStr::new("--largest-first"),
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Spherical K-means
// ---------------------------------------------------------------------------------------------

/// Sparse rows around `topics` groups of columns, rows in random order; `(row, col, value)`
/// 1-based, with a few repeated positions (Matrix Market adds them up).
fn sparse_rows(seed: u64, n: usize, d: usize, topics: usize) -> Vec<Vec<(usize, f64)>> {
    let mut rng = Lcg(seed);
    let width = d / topics;
    (0..n)
        .map(|_| {
            let t = rng.below(topics);
            let mut cols = BTreeSet::new();
            for _ in 0..4 + rng.below(8) {
                cols.insert(1 + t * width + rng.below(width));
            }
            for _ in 0..rng.below(5) {
                cols.insert(1 + rng.below(d));
            }
            cols.into_iter()
                .map(|c| (c, 0.05 + rng.unit() * 2.0))
                .collect()
        })
        .collect()
}

fn write_mtx_rows(path: &Path, rows: &[Vec<(usize, f64)>], d: usize, seed: u64) {
    let mut rng = Lcg(seed);
    let mut lines = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        for &(c, v) in row {
            if rng.below(15) == 0 {
                // The same position twice: the parts add up to v.
                lines.push(format!("{} {c} {:?}", i + 1, v * 0.25));
                lines.push(format!("{} {c} {:?}", i + 1, v * 0.75));
            } else {
                lines.push(format!("{} {c} {v:?}", i + 1));
            }
        }
    }
    // Entries in random order: the loader must not rely on sorted files.
    for i in (1..lines.len()).rev() {
        lines.swap(i, rng.below(i + 1));
    }
    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n% generated\n{} {d} {}\n",
        rows.len(),
        lines.len()
    );
    for l in lines {
        text.push_str(&l);
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn write_svmlight_rows(path: &Path, rows: &[Vec<(usize, f64)>]) {
    let mut text = String::from("# label idx:val ...\n");
    for (i, row) in rows.iter().enumerate() {
        write!(text, "{}", i % 3).unwrap();
        for &(c, v) in row {
            write!(text, " {c}:{v:?}").unwrap();
        }
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// Runs `run spkmeans` on `input` (or on `--generate generate`, whose matrix `input` holds)
/// at each layout and checks it against the reference on `input`.
fn spkmeans_check(
    (input, generate): (&Path, Option<&str>),
    k: usize,
    iterations: usize,
    dir: &Path,
    layouts: &[(u32, u32, u32)],
    budget: Option<&str>,
) {
    let mut first: Option<(String, String)> = None;
    for &layout in layouts {
        let tag = layout_name(layout);
        let out = dir.join(format!("centroids-{tag}.csv"));
        let assign = dir.join(format!("assign-{tag}.txt"));
        let (k, iterations) = (k.to_string(), iterations.to_string());
        let source = match generate {
            Some(spec) => ["--generate", spec].map(OsStr::new),
            None => [OsStr::new("--input"), input.as_os_str()],
        };
        let cmd = Cmd::spillway()
            .args(["run", "spkmeans"])
            .args(source)
            .args(["--k", &k, "--iterations", &iterations, "--out"])
            .arg(&out)
            .arg("--assign")
            .arg(&assign)
            .layout(layout)
            .mem_budget(budget);
        cmd.ok();
        check_reference(
            "spkmeans_ref.py",
            &[
                input.as_os_str(),
                OsStr::new(&k),
                OsStr::new(&iterations),
                out.as_os_str(),
                assign.as_os_str(),
            ],
        );
        let got = (
            std::fs::read_to_string(&out).unwrap(),
            std::fs::read_to_string(&assign).unwrap(),
        );
        let rows = got.1.lines().count();
        assert!(rows > 0);
        match &first {
            None => first = Some(got),
            // Assignments are identical; centroids agree to the reference's tolerance (the
            // reduction order differs between layouts), checked above.
            Some(f) => assert!(f.1 == got.1, "assignments differ between layouts"),
        }
    }
}

/// `n` sparse rows of `d` columns around `topics` topics ([`sparse_rows`]) written to `dir` as
/// Matrix Market (`rows.mtx`, with `mtx`) or SVMlight (`rows.svm`).
fn rows_file(dir: &Path, seed: u64, (n, d, topics): (usize, usize, usize), mtx: bool) -> PathBuf {
    let rows = sparse_rows(seed, n, d, topics);
    if mtx {
        let input = dir.join("rows.mtx");
        write_mtx_rows(&input, &rows, d, seed + 1);
        input
    } else {
        let input = dir.join("rows.svm");
        write_svmlight_rows(&input, &rows);
        input
    }
}

const SPK_LAYOUTS: [(u32, u32, u32); 4] = [(1, 1, 1), (3, 1, 2), (3, 2, 1), (7, 2, 2)];

#[test]
fn spkmeans_mtx_matches_numpy_at_several_layouts() {
    let dir = tempdir();
    let input = rows_file(dir.path(), base_seed() ^ 0x5b, (1500, 400, 8), true);
    spkmeans_check((&input, None), 8, 100, dir.path(), &SPK_LAYOUTS, None);
}

#[test]
fn spkmeans_svmlight_matches_numpy_at_several_layouts() {
    let dir = tempdir();
    let input = rows_file(dir.path(), base_seed() ^ 0x5c, (1200, 300, 5), false);
    spkmeans_check((&input, None), 7, 100, dir.path(), &SPK_LAYOUTS, None);
}

#[test]
fn spkmeans_iteration_limit_and_memory_budget_match_numpy() {
    let dir = tempdir();
    let input = rows_file(dir.path(), base_seed() ^ 0x5d, (2000, 500, 10), true);
    // Three iterations do not converge: the final assignment follows the last centroids.
    spkmeans_check(
        (&input, None),
        12,
        3,
        dir.path(),
        &[(1, 1, 1), (7, 2, 2)],
        Some("4M"),
    );
}

#[test]
fn spkmeans_of_a_generated_matrix_matches_numpy_on_the_written_one() {
    let dir = tempdir();
    let input = dir.path().join("zipf.mtx");
    Cmd::spillway()
        .args([
            "gen", "zipf", "--docs", "1500", "--terms", "600", "--avg", "20",
        ])
        .args(["--seed", "7", "--out"])
        .arg(&input)
        .ok();
    spkmeans_check(
        (&input, Some("zipf:1500:600:20:7")),
        6,
        5,
        dir.path(),
        &[(1, 1, 1), (4, 1, 2), (7, 2, 2)],
        Some("1M"),
    );
}

#[test]
fn spkmeans_rejects_bad_input() {
    let dir = tempdir();
    let spkmeans = |k: &str, input: &Path| {
        Cmd::spillway()
            .args(["run", "spkmeans", "--k", k, "--input"])
            .arg(input)
            .arg("--out")
            .arg(dir.path().join("c.csv"))
    };
    let svm = write(dir.path(), "bad.svm", "1 1:0.5 3:1\n0 2:1\n1 4:x\n0 1:1\n");
    for ranks in [1, 3] {
        let cmd = spkmeans("2", &svm)
            .arg("--assign")
            .arg(dir.path().join("a.txt"))
            .layout((ranks, 1, 1));
        assert_rejected(dir.path(), cmd, Some(&svm), Some(3), "invalid value 'x'");
    }
    // (file, contents, k, the line named, the reason).
    let cases = [
        ("unsorted.svm", "1 3:0.5 1:1\n", "1", Some(1), "not larger"),
        (
            "pattern.mtx",
            "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1\n",
            "1",
            Some(1),
            "no values",
        ),
        (
            "small.mtx",
            "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n2 2 1.0\n",
            "3",
            None,
            "larger than the number of rows",
        ),
    ];
    for (name, contents, k, line, reason) in cases {
        let file = write(dir.path(), name, contents);
        let named = line.map(|_| file.as_path());
        assert_rejected(dir.path(), spkmeans(k, &file), named, line, reason);
    }
}

// ---------------------------------------------------------------------------------------------
// SGD
// ---------------------------------------------------------------------------------------------

/// A rank-`r` rating matrix `users x items` plus noise, a `density` share of it observed, split
/// into training and held-out ratings (about 80/20), as Matrix Market text.
fn low_rank_ratings(
    seed: u64,
    users: usize,
    items: usize,
    r: usize,
    density: f64,
) -> (String, String) {
    let mut rng = Lcg(seed);
    let a: Vec<f64> = (0..users * r).map(|_| rng.normal()).collect();
    let b: Vec<f64> = (0..items * r).map(|_| rng.normal()).collect();
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for u in 0..users {
        for i in 0..items {
            if rng.unit() >= density {
                continue;
            }
            let mut x = 3.0 + 0.1 * rng.normal();
            for f in 0..r {
                x += a[u * r + f] * b[i * r + f];
            }
            let line = format!("{} {} {x:?}", u + 1, i + 1);
            if rng.below(5) == 0 {
                test.push(line);
            } else {
                train.push(line);
            }
        }
    }
    let shuffle = |v: &mut Vec<String>, rng: &mut Lcg| {
        for i in (1..v.len()).rev() {
            v.swap(i, rng.below(i + 1));
        }
    };
    shuffle(&mut train, &mut rng);
    shuffle(&mut test, &mut rng);
    let text = |v: &[String]| {
        let mut t = format!(
            "%%MatrixMarket matrix coordinate real general\n{users} {items} {}\n",
            v.len()
        );
        for l in v {
            t.push_str(l);
            t.push('\n');
        }
        t
    };
    (text(&train), text(&test))
}

fn ratings_values(text: &str) -> Vec<f64> {
    text.lines()
        .skip(2)
        .map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn sgd_factors_equal_the_sequential_schedule_bit_for_bit() {
    let dir = tempdir();
    let (train, _) = low_rank_ratings(base_seed() ^ 0x59d, 130, 70, 3, 0.25);
    let input = write(dir.path(), "train.mtx", &train);
    for (p, nodes, running, budget) in [
        (1, 1, 1, None),
        (4, 2, 2, None),
        (9, 3, 2, None),
        (9, 1, 2, Some("1M")),
    ] {
        let tag = format!("p{p}n{nodes}");
        let (u, v) = (
            dir.path().join(format!("u-{tag}.csv")),
            dir.path().join(format!("v-{tag}.csv")),
        );
        Cmd::spillway()
            .args(["run", "sgd", "--input"])
            .arg(&input)
            .args([
                "--factors",
                "4",
                "--learning-rate",
                "0.02",
                "--regularisation",
                "0.03",
            ])
            .args(["--iterations", "4", "--seed", "17", "--out-u"])
            .arg(&u)
            .arg("--out-v")
            .arg(&v)
            .layout((p, nodes, running))
            .mem_budget(budget)
            .ok();
        check_reference(
            "sgd_ref.py",
            &[
                input.as_os_str(),
                OsStr::new(&p.to_string()),
                OsStr::new("4"),
                OsStr::new("0.02"),
                OsStr::new("0.03"),
                OsStr::new("4"),
                OsStr::new("17"),
                u.as_os_str(),
                v.as_os_str(),
            ],
        );
    }
}

#[test]
fn sgd_of_generated_ratings_equals_the_sequential_schedule_on_the_written_ones() {
    let dir = tempdir();
    let input = dir.path().join("ratings.mtx");
    Cmd::spillway()
        .args([
            "gen", "ratings", "--users", "150", "--items", "90", "--avg", "12",
        ])
        .args(["--seed", "5", "--out"])
        .arg(&input)
        .ok();
    for (p, nodes, running, budget) in [(1, 1, 1, None), (4, 2, 2, Some("1M")), (9, 1, 2, None)] {
        let tag = format!("p{p}n{nodes}");
        let (u, v) = (
            dir.path().join(format!("u-{tag}.csv")),
            dir.path().join(format!("v-{tag}.csv")),
        );
        Cmd::spillway()
            .args(["run", "sgd", "--generate", "ratings:150:90:12:5"])
            .args([
                "--factors",
                "3",
                "--iterations",
                "3",
                "--seed",
                "4",
                "--out-u",
            ])
            .arg(&u)
            .arg("--out-v")
            .arg(&v)
            .layout((p, nodes, running))
            .mem_budget(budget)
            .ok();
        check_reference(
            "sgd_ref.py",
            &[
                input.as_os_str(),
                OsStr::new(&p.to_string()),
                OsStr::new("3"),
                OsStr::new("0.01"),
                OsStr::new("0.05"),
                OsStr::new("3"),
                OsStr::new("4"),
                u.as_os_str(),
                v.as_os_str(),
            ],
        );
    }
}

#[test]
fn sgd_test_rmse_decreases_below_the_global_mean() {
    let dir = tempdir();
    let (train, test) = low_rank_ratings(base_seed() ^ 0x59e, 200, 150, 3, 0.3);
    let mean = {
        let v = ratings_values(&train);
        v.iter().sum::<f64>() / v.len() as f64
    };
    let baseline = {
        let v = ratings_values(&test);
        (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64).sqrt()
    };
    let train = write(dir.path(), "train.mtx", &train);
    let test = write(dir.path(), "test.mtx", &test);
    let iterations = 30;
    let ran = Cmd::spillway()
        .args(["run", "sgd", "--input"])
        .arg(&train)
        .arg("--test")
        .arg(&test)
        .args([
            "--factors",
            "4",
            "--learning-rate",
            "0.03",
            "--regularisation",
            "0.02",
        ])
        .args(["--iterations", &iterations.to_string(), "--json"])
        .layout((4, 2, 2))
        .ok();
    let rmse: Vec<f64> = ran.json()["test_rmse"]
        .as_array()
        .unwrap_or_else(|| panic!("no test_rmse list\n{ran}"))
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect();
    assert_eq!(rmse.len(), iterations, "{ran}");
    println!("global mean RMSE {baseline:.4}; test RMSE {rmse:.4?}");
    // Decreasing while it learns (iterations 1, 5, 10), then settled near its minimum (the
    // noise of the data is the floor), and well below the baseline.
    assert!(
        rmse[4] < rmse[0] && rmse[9] < rmse[4],
        "test RMSE did not decrease: {rmse:?}"
    );
    let last = *rmse.last().unwrap();
    let min = rmse.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(last <= 1.05 * min, "test RMSE rose again: {rmse:?}");
    assert!(
        last < 0.5 * baseline,
        "test RMSE {last} not below half the global mean's {baseline}"
    );
}

#[test]
fn sgd_rejects_a_non_square_rank_count_and_bad_ratings() {
    let dir = tempdir();
    let input = write(
        dir.path(),
        "r.mtx",
        "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 4\n2 2 x\n",
    );
    let sgd = Cmd::spillway()
        .args(["run", "sgd", "--input"])
        .arg(&input)
        .arg("--out-u")
        .arg(dir.path().join("u.csv"));
    let cmd = sgd.clone().layout((3, 1, 1));
    assert_rejected(dir.path(), cmd, None, None, "square number of ranks");
    let cmd = sgd.layout((4, 2, 1));
    assert_rejected(dir.path(), cmd, Some(&input), Some(4), "invalid value 'x'");
}
