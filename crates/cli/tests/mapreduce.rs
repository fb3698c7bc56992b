//! End-to-end tests of `run wordcount` and `run cc`: results against independent references
//! (`collections.Counter` and `scipy.sparse.csgraph.connected_components` through the scripts
//! in `tests/reference/`) on inputs generated here, at several rank counts and node layouts;
//! the out-of-core path against the in-memory one; bad input.
//!
//! The Python checks run `$SPILLWAY_PYTHON` (default `python3`); they fail if it cannot run
//! them, unless `SPILLWAY_SKIP_PYTHON=1`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

mod common;
use common::{check_reference, check_with_python, l1, python, write, Cmd, Lcg, Ran};

/// `(ranks, nodes, running per node)`.
const LAYOUTS: [(u32, u32, u32); 4] = [(1, 1, 1), (3, 1, 2), (3, 2, 1), (7, 2, 2)];

/// Uniform in `0..n`, from the generator's bits above the lowest 16.
fn below(rng: &mut Lcg, n: u64) -> u64 {
    rng.bits(16) % n
}

/// `spillway ARGS --input INPUT`, followed by `--out OUT` if given: a command to complete and run.
fn on(args: &[&str], input: &Path, out: Option<&Path>) -> Cmd {
    let cmd = Cmd::spillway().args(args).arg("--input").arg(input);
    match out {
        Some(out) => cmd.arg("--out").arg(out),
        None => cmd,
    }
}

/// The bytes the shuffles of a `--json` report's operations spilled.
fn spilled(report: &serde_json::Value) -> u64 {
    report["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["bytes_spilled"].as_u64().unwrap())
        .sum()
}

/// A text of `words` words: a skewed vocabulary, words with non-UTF-8 bytes, and every
/// ASCII whitespace byte as separator (runs of them too).
fn text(seed: u64, words: usize) -> Vec<u8> {
    let mut rng = Lcg(seed);
    let mut out = Vec::new();
    for _ in 0..words {
        let r = rng.bits(16);
        let spread = 1 + below(&mut rng, 3000);
        let id = below(&mut rng, spread);
        match r % 9 {
            0 => out.extend_from_slice(&[0xff, b'x', 0xc3, (id % 256) as u8 | 0x80]),
            1 => out.extend_from_slice(format!("W{id}").as_bytes()),
            _ => out.extend_from_slice(format!("w{id}").as_bytes()),
        }
        let seps: &[&[u8]] = &[
            b" ", b" ", b" ", b"\n", b"\t", b"\r\n", b"\x0b", b"\x0c", b"  \n ",
        ];
        out.extend_from_slice(seps[(r >> 8) as usize % seps.len()]);
    }
    out
}

#[test]
fn wordcount_equals_python_counter_at_several_layouts() {
    let Some(py) = python() else { return };
    let dir = TempDir::new().unwrap();
    let a = write(dir.path(), "a.txt", text(11, 40_000));
    let b = write(dir.path(), "b.txt", text(12, 7_000));
    let empty = write(dir.path(), "empty.txt", b"");
    // A file that ends inside a word, and one word that starts the next file.
    let c = write(dir.path(), "c.txt", b"tail");
    let d = write(dir.path(), "d.txt", b"tail tail\xff");
    for (i, layout) in LAYOUTS.into_iter().enumerate() {
        let out = dir.path().join(format!("wc{i}.txt"));
        let inputs = [&a, &b, &empty, &c, &d];
        let cmd = Cmd::spillway()
            .args(["run", "wordcount", "--input"])
            .args(inputs);
        let cmd = cmd
            .arg("--out")
            .arg(&out)
            .args(["--chunk", "8K"])
            .layout(layout);
        let no_combine: &[&str] = if i == 2 { &["--no-combine"] } else { &[] };
        cmd.args(no_combine).ok();
        let mut check: Vec<OsString> = vec![out.into()];
        for f in [&a, &b, &empty, &c, &d] {
            check.push(f.into());
        }
        check_with_python(&py, "wordcount_ref.py", &check);
    }
}

#[test]
fn wordcount_out_of_core_equals_the_in_memory_run() {
    let dir = TempDir::new().unwrap();
    let a = write(dir.path(), "a.txt", text(21, 150_000));
    let mem = dir.path().join("mem.txt");
    let small = dir.path().join("small.txt");
    for (out, extra) in [
        (&mem, vec![]),
        (&small, vec!["--mem-budget", "4M", "--mr-memory", "32K"]),
    ] {
        for combine in [true, false] {
            let wc = ["run", "wordcount", "--json", "--chunk", "16K"];
            let cmd = on(&wc, &a, Some(out)).layout((4, 2, 2)).args(&extra);
            let ran = if combine {
                cmd
            } else {
                cmd.arg("--no-combine")
            }
            .ok();
            let op = &ran.json()["operations"][0];
            let spilled = op["bytes_spilled"].as_u64().unwrap();
            let rounds = op["rounds"].as_u64().unwrap();
            if extra.is_empty() {
                assert_eq!((spilled, rounds), (0, 1), "{ran}");
            } else {
                assert!(
                    spilled > 0 && rounds > 1,
                    "the spill path did not run\n{ran}"
                );
                assert_eq!(
                    std::fs::read(&mem).unwrap(),
                    std::fs::read(&small).unwrap(),
                    "combine {combine}"
                );
            }
        }
    }
}

/// A graph with many components: paths with shuffled ids (many star rounds), small random
/// clusters, duplicate and reversed edges, self loops, and isolated self loops.
fn graph(seed: u64, n: u64) -> Vec<(u64, u64)> {
    let mut rng = Lcg(seed);
    let mut perm: Vec<u64> = (0..n).collect();
    for i in (1..n as usize).rev() {
        perm.swap(i, below(&mut rng, i as u64 + 1) as usize);
    }
    let mut edges = Vec::new();
    // A long path over the first fifth of the (permuted) ids.
    for i in 0..n / 5 - 1 {
        edges.push((perm[i as usize], perm[i as usize + 1]));
    }
    // Random edges among clusters of 20 ids.
    for _ in 0..n {
        let c = n / 5 + below(&mut rng, n * 3 / 5 / 20) * 20;
        let (u, v) = (c + below(&mut rng, 20), c + below(&mut rng, 20));
        edges.push((perm[u as usize], perm[v as usize]));
        if below(&mut rng, 10) == 0 {
            edges.push((perm[v as usize], perm[u as usize]));
        }
    }
    // Isolated self loops.
    for v in (n * 4 / 5..n).step_by(7) {
        edges.push((perm[v as usize], perm[v as usize]));
    }
    edges
}

fn write_graph(dir: &Path, name: &str, edges: &[(u64, u64)]) -> PathBuf {
    let mut s = String::from("# generated\n");
    for (u, v) in edges {
        s.push_str(&format!("{u}\t{v}\n"));
    }
    write(dir, name, s.as_bytes())
}

#[test]
fn cc_equals_scipy_at_several_layouts_and_both_variants() {
    let Some(py) = python() else { return };
    let dir = TempDir::new().unwrap();
    let g = write_graph(dir.path(), "g.txt", &graph(5, 3000));
    for (i, layout) in LAYOUTS.into_iter().enumerate() {
        for variant in ["alternating", "two-phase"] {
            let out = dir.path().join(format!("cc{i}{variant}.txt"));
            let cc = ["run", "cc", "--engine", "mapreduce", "--variant", variant];
            on(&cc, &g, Some(&out)).layout(layout).ok();
            check_with_python(&py, "cc_ref.py", &[g.as_os_str(), out.as_os_str()]);
        }
        // The direct engine (the default), also under a budget that unloads its edges.
        for budget in [None, Some("1M")] {
            let out = dir.path().join(format!("cc{i}direct.txt"));
            let cmd = on(&["run", "cc"], &g, Some(&out)).layout(layout);
            cmd.mem_budget(budget).ok();
            check_with_python(&py, "cc_ref.py", &[g.as_os_str(), out.as_os_str()]);
        }
    }
}

#[test]
fn cc_direct_refuses_the_options_of_the_mapreduce_engine() {
    let dir = TempDir::new().unwrap();
    let g = write_graph(dir.path(), "g.txt", &graph(5, 300));
    for extra in [
        &["--variant", "two-phase"][..],
        &["--mr-memory", "1M"],
        &["--fault-tolerance"],
        &["--checkpoint-dir", "ck"],
    ] {
        let ran = on(&["run", "cc"], &g, None).args(extra).run();
        assert_eq!(ran.code, Some(2), "{extra:?}: {ran}");
        assert!(ran.stderr.contains("--engine mapreduce"), "{ran}");
    }
}

#[test]
fn cc_out_of_core_equals_the_in_memory_run() {
    let dir = TempDir::new().unwrap();
    let g = write_graph(dir.path(), "g.txt", &graph(9, 20_000));
    let mut outputs = Vec::new();
    for extra in [vec![], vec!["--mem-budget", "4M", "--mr-memory", "16K"]] {
        let out = dir.path().join(format!("cc{}.txt", outputs.len()));
        let cc = ["run", "cc", "--engine", "mapreduce", "--json"];
        let ran = on(&cc, &g, Some(&out)).layout((3, 2, 1)).args(&extra).ok();
        assert_eq!(spilled(&ran.json()) > 0, !extra.is_empty(), "{ran}");
        outputs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn malformed_edge_lines_and_unreadable_text_exit_2_without_output() {
    let dir = TempDir::new().unwrap();
    let mut body = String::new();
    for i in 0..5000 {
        body.push_str(&format!("{i} {}\n", i + 1));
    }
    body.push_str("17 x9\n");
    let g = write(dir.path(), "bad.txt", body.as_bytes());
    let out = dir.path().join("out.txt");
    for layout in [(1, 1, 1), (3, 2, 1)] {
        let ran = on(&["run", "cc"], &g, Some(&out)).layout(layout).run();
        assert_eq!(ran.code, Some(2), "{ran}");
        assert!(
            ran.stderr
                .contains(&format!("{}:5001: invalid vertex id 'x9'", g.display())),
            "{ran}"
        );
        assert!(!out.exists(), "partial output left behind");
    }
    let missing = dir.path().join("missing.txt");
    let ran = on(&["run", "wordcount"], &missing, Some(&out)).run();
    assert_eq!(ran.code, Some(2), "{ran}");
    assert!(ran.stderr.contains("missing.txt"), "{ran}");
    assert!(!out.exists());
    let ran = on(&["run", "wordcount"], dir.path(), None).run();
    assert_eq!(ran.code, Some(2), "{ran}");
    assert!(ran.stderr.contains("is a directory"), "{ran}");
}

/// "vertex rank" lines as a vector in vertex order (asserting that order).
fn read_ranks(path: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let (v, r) = l.split_once(' ').unwrap();
            assert_eq!(v.parse::<usize>().unwrap(), i, "{}", path.display());
            r.parse().unwrap()
        })
        .collect()
}

#[test]
fn mapreduce_pagerank_equals_the_direct_engine_and_the_references() {
    let dir = TempDir::new().unwrap();
    // Dangling vertices, duplicate edges, self loops, and isolated ids (no edges at all).
    let mut edges = graph(17, 2000);
    edges.extend([(3, 5), (3, 5), (1999, 0)]);
    let g = write_graph(dir.path(), "g.txt", &edges);
    // The direct engine's ranks, written to `out`.
    let run_direct = |out: &Path, more: &[&str]| {
        on(&["run", "pagerank"], &g, Some(out)).args(more).ok();
        read_ranks(out)
    };
    let direct = dir.path().join("direct.txt");
    let expected = run_direct(&direct, &["--iterations", "500", "--tolerance", "1e-13"]);
    let run_mr = |out: &Path, layout, iterations: &str, tolerance: &str, extra: &[&str]| {
        let limits = ["--iterations", iterations, "--tolerance", tolerance];
        let mr = [&["run", "pagerank", "--engine", "mapreduce"][..], &limits].concat();
        on(&mr, &g, Some(out)).layout(layout).args(extra).ok();
        read_ranks(out)
    };
    for (i, layout) in LAYOUTS.into_iter().take(3).enumerate() {
        let out = dir.path().join(format!("mr{i}.txt"));
        let got = run_mr(&out, layout, "500", "1e-13", &[]);
        let d = l1(&got, &expected);
        assert!(
            d <= 1e-12,
            "layout {layout:?}: L1 {d:e} from the direct engine"
        );
        check_reference("pagerank_ref.py", &[g.as_os_str(), out.as_os_str()]);
    }
    // Spilling (a 16 KiB allowance) on 7 ranks and 2 nodes: 15 iterations against the
    // direct engine's 15.
    let direct15 = run_direct(&dir.path().join("direct15.txt"), &["--iterations", "15"]);
    let out = dir.path().join("mr-spill.txt");
    let got = run_mr(&out, LAYOUTS[3], "15", "0", &["--mr-memory", "16K"]);
    let d = l1(&got, &direct15);
    assert!(d <= 1e-12, "spilling: L1 {d:e} from the direct engine");
}

/// Peak RSS (bytes) and the first operation's spilled bytes from a `--json` report.
fn rss_and_spill(ran: &Ran) -> (u64, u64) {
    let v = ran.json();
    (
        v["peak_rss"].as_u64().expect("peak RSS is measured"),
        spilled(&v),
    )
}

#[test]
fn out_of_core_word_count_and_cc_stay_within_the_budget_plus_64_mib() {
    let dir = TempDir::new().unwrap();
    let budget: u64 = 8 << 20;
    // A text of 8 times the budget with a vocabulary of about a million words, so that the
    // combining tables and the shuffle exceed the allowance.
    let mut big = Vec::with_capacity(9 << 23);
    let mut rng = Lcg(5);
    while big.len() < 8 * budget as usize {
        let id = below(&mut rng, 1 << 20);
        big.extend_from_slice(format!("v{id}").as_bytes());
        big.push(if below(&mut rng, 10) == 0 {
            b'\n'
        } else {
            b' '
        });
    }
    let t = write(dir.path(), "big.txt", &big);
    drop(big);
    let mem = dir.path().join("mem.txt");
    let ooc = dir.path().join("ooc.txt");
    for (out, mem_budget) in [(&mem, None), (&ooc, Some("8M"))] {
        let wc = ["run", "wordcount", "--json", "--ranks", "4"];
        let ran = on(&wc, &t, Some(out)).mem_budget(mem_budget).ok();
        if mem_budget.is_some() {
            let (rss, spilled) = rss_and_spill(&ran);
            assert!(spilled > 0, "{ran}");
            assert!(
                rss <= budget + (64 << 20),
                "peak RSS {} MiB\n{ran}",
                rss >> 20
            );
        }
    }
    assert_eq!(std::fs::read(&mem).unwrap(), std::fs::read(&ooc).unwrap());

    // A graph whose edges take 4 times the budget as u32 pairs (2M edges, 16 MiB; 4 MiB budget).
    let budget: u64 = 4 << 20;
    let g = dir.path().join("g.txt");
    let rmat = ["gen", "rmat", "--scale", "17", "--edge-factor", "16"];
    Cmd::spillway().args(rmat).arg("--out").arg(&g).ok();
    for engine in ["direct", "mapreduce"] {
        let mut outputs = Vec::new();
        for mem_budget in [None, Some("4M")] {
            let with_budget = mem_budget.is_some();
            let out = dir.path().join(format!("cc{engine}{with_budget}.txt"));
            let cmd = on(&["run", "cc", "--json", "--ranks", "2"], &g, Some(&out));
            let ran = cmd.args(["--engine", engine]).mem_budget(mem_budget).ok();
            if with_budget {
                // The direct engine has no shuffle: its edges are unloaded to spill files.
                let (rss, spilled) = match engine {
                    "direct" => {
                        let v = ran.json();
                        (
                            v["peak_rss"].as_u64().unwrap(),
                            v["spill_bytes_written"].as_u64().unwrap(),
                        )
                    }
                    _ => rss_and_spill(&ran),
                };
                assert!(spilled > 0, "{ran}");
                assert!(
                    rss <= budget + (64 << 20),
                    "peak RSS {} MiB\n{ran}",
                    rss >> 20
                );
            }
            outputs.push(std::fs::read(&out).unwrap());
        }
        assert_eq!(outputs[0], outputs[1], "{engine}");
    }
}

/// `--inject-failure` specs for the first, a middle and the last of `ops` operations,
/// alternating node and rank losses (rank losses only with one node).
fn injections((ranks, nodes, _): (u32, u32, u32), ops: u64) -> Vec<String> {
    let mut specs = Vec::new();
    for (i, op) in [1, ops.div_ceil(2), ops].into_iter().enumerate() {
        let i = i as u32;
        specs.push(if nodes > 1 && i != 1 {
            format!("node:{}@op:{op}", (i + 1) % nodes)
        } else {
            format!("rank:{}@op:{op}", (i * 2 + 1) % ranks)
        });
    }
    specs
}

/// Runs `base` (arguments without the layout and output) with `--json` and the given
/// extra arguments; returns the report and the output file's text.
fn run_ft(
    base: &Cmd,
    layout: (u32, u32, u32),
    out: &Path,
    extra: &[String],
) -> (serde_json::Value, Vec<u8>) {
    let cmd = base.clone().args(["--json", "--out"]).arg(out);
    let ran = cmd.layout(layout).args(extra).ok();
    (ran.json(), std::fs::read(out).unwrap())
}

fn sorted_lines(text: &[u8]) -> Vec<&[u8]> {
    let mut l: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    l.sort_unstable();
    l
}

#[test]
fn lost_nodes_and_ranks_leave_the_mapreduce_outputs_unchanged() {
    let dir = TempDir::new().unwrap();
    let text_file = write(dir.path(), "a.txt", text(31, 60_000));
    let g = write_graph(dir.path(), "g.txt", &graph(5, 4000));
    let out = dir.path().join("out.txt");
    let wc = on(&["run", "wordcount", "--chunk", "16K"], &text_file, None);
    let cc = on(&["run", "cc", "--engine", "mapreduce"], &g, None);
    let pr = [
        "run",
        "pagerank",
        "--engine",
        "mapreduce",
        "--iterations",
        "8",
    ];
    let pr = on(&pr, &g, None);
    let spill: Vec<String> = ["--mem-budget", "8M", "--mr-memory", "16K"]
        .map(String::from)
        .to_vec();
    for layout in [(6, 3, 2), (4, 2, 1), (5, 1, 2)] {
        for (name, base) in [("wordcount", &wc), ("cc", &cc), ("pagerank", &pr)] {
            let (report, expected) = run_ft(base, layout, &out, &[]);
            let ops = report["operations"].as_array().unwrap().len() as u64;
            let mut cases: Vec<Vec<String>> = injections(layout, ops)
                .into_iter()
                .map(|s| vec!["--inject-failure".into(), s])
                .collect();
            // The same under a memory budget with the shuffle spilling (one case each).
            let mut spilling = cases[1].clone();
            spilling.extend(spill.iter().cloned());
            cases.push(spilling);
            for extra in cases {
                let (report, got) = run_ft(base, layout, &out, &extra);
                let what = format!("{name} {layout:?} {extra:?}");
                let ft = &report["fault_tolerance"];
                let recoveries = ft["recoveries"].as_array().unwrap();
                assert_eq!(recoveries.len(), 1, "{what}: {report}");
                let lost = recoveries[0]["lost_ranks"].as_array().unwrap().len() as u32;
                let nodes_lost = extra[1].starts_with("node:");
                let per_node = layout.0.div_ceil(layout.1);
                assert!(
                    if nodes_lost {
                        lost >= per_node - 1
                    } else {
                        lost == 1
                    },
                    "{what}: lost {lost}"
                );
                if extra.len() > 2 {
                    assert!(spilled(&report) > 0, "{what}: nothing spilled");
                }
                match name {
                    // Counts by count, then word: the same bytes whatever the rank count.
                    "wordcount" => assert_eq!(got, expected, "{what}"),
                    // Each rank's vertices: the same lines in another order.
                    "cc" => assert_eq!(sorted_lines(&got), sorted_lines(&expected), "{what}"),
                    // Sums in another order (fewer ranks combine differently): equal to
                    // rounding.
                    _ => {
                        let (a, b) = (read_ranks(&out), {
                            let p = dir.path().join("expected.txt");
                            std::fs::write(&p, &expected).unwrap();
                            read_ranks(&p)
                        });
                        let l1: f64 = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).sum();
                        assert!(a.len() == b.len() && l1 < 1e-13, "{what}: L1 {l1:e}");
                    }
                }
            }
        }
    }
}

#[test]
fn losses_fault_tolerance_cannot_cover_end_the_job_with_a_clear_error() {
    let dir = TempDir::new().unwrap();
    let g = write_graph(dir.path(), "g.txt", &graph(3, 2000));
    let cc = on(&["run", "cc", "--engine", "mapreduce"], &g, None).layout((6, 3, 2));
    let base = |extra: &[&str]| -> Ran { cc.clone().args(extra).run() };
    // Node 1 and the holder of its replicas, node 2, in the same operation.
    let ran = base(&[
        "--inject-failure",
        "node:1@op:2",
        "--inject-failure",
        "node:2@op:2",
    ]);
    assert_eq!(ran.code, Some(1), "{ran}");
    assert!(
        ran.stderr.contains("cannot recover") && ran.stderr.contains("same operation"),
        "{ran}"
    );
    // Malformed and out-of-range specs are usage errors.
    for bad in ["node:1", "node:3@op:1", "rank:6@op:1", "rank:1@op:0"] {
        let ran = base(&["--inject-failure", bad]);
        assert_eq!(ran.code, Some(2), "{bad}: {ran}");
        assert!(ran.stderr.contains("--inject-failure"), "{ran}");
    }
    // A failure the job never reaches is reported, and changes nothing.
    let ran = cc.clone().args(["--inject-failure", "rank:1@op:999"]).ok();
    assert!(ran.stderr.contains("did not happen"), "{ran}");
}
