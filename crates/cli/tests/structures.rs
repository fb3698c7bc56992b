//! End-to-end tests of `spillway compress`, `spillway decompress` and `spillway run dyngraph`:
//! round trips through the binary with the bound checked here, bad input (exit 2 and a
//! message naming the file), and no partial output on failure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod common;
use common::{json_field, read_f64s, spillway, write_f64s, Lcg, Ran};

use tempfile::TempDir;

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

/// A smooth 2-D field with some noise, `nx` fastest.
fn field(nx: usize, ny: usize) -> Vec<f64> {
    let mut state = 7u64;
    (0..nx * ny)
        .map(|i| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            let noise = (state >> 40) as f64 / (1u64 << 24) as f64 - 0.5;
            let (x, y) = ((i % nx) as f64, (i / nx) as f64);
            100.0 * (x / 9.0).sin() * (y / 7.0).cos() + 0.3 * noise
        })
        .collect()
}

#[test]
fn round_trip_through_the_binary_keeps_the_bound() {
    let dir = TempDir::new().unwrap();
    let (nx, ny) = (60, 40);
    let data = field(nx, ny);
    let input = dir.path().join("field.f64");
    write_f64s(&input, &data);
    let grid = format!("{nx}x{ny}");
    let (lo, hi) = data
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    for method in ["predict", "sbd1", "sbd2", "rbd1", "rbd2", "rbd3"] {
        for rel in [1e-1, 1e-3] {
            let packed = dir.path().join(format!("{method}-{rel}.spz"));
            let out = dir.path().join(format!("{method}-{rel}.f64"));
            let o = spillway(&compress_args(
                &rel.to_string(),
                ["--grid", &grid],
                &["--relative", "--method", method, "--json"],
                &input,
                &packed,
            ));
            assert!(o.code == Some(0), "{method}: {}", o.stderr);
            let eps = json_field(&o.stdout, "epsilon");
            assert!(
                (eps - rel * (hi - lo)).abs() <= 1e-12 * eps,
                "relative epsilon"
            );
            let ratio = json_field(&o.stdout, "ratio");
            let size = std::fs::metadata(&packed).unwrap().len() as f64;
            assert!((ratio - size / (8 * nx * ny) as f64).abs() < 1e-12);
            let o = spillway(&["decompress", p(&packed), p(&out)]);
            assert!(o.code == Some(0), "{method}: {}", o.stderr);
            assert!(o.stdout.contains("ratio"));
            let back = read_f64s(&out);
            assert_eq!(back.len(), data.len());
            for (i, (&x, &y)) in data.iter().zip(&back).enumerate() {
                assert!(
                    (x - y).abs() <= eps,
                    "{method} {rel}: point {i}: {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn f32_files_stay_f32() {
    let dir = TempDir::new().unwrap();
    let data: Vec<f32> = field(30, 20).iter().map(|&x| x as f32).collect();
    let input = dir.path().join("field.f32");
    std::fs::write(
        &input,
        data.iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let packed = dir.path().join("f.spz");
    let out = dir.path().join("f.out");
    let o = spillway(&compress_args(
        "0.05",
        ["--grid", "30x20"],
        &[
            "--dtype",
            "f32",
            "--predictor",
            "interp",
            "--relaxed",
            "--set-radius",
            "0.5",
        ],
        &input,
        &packed,
    ));
    assert!(o.code == Some(0), "{}", o.stderr);
    let o = spillway(&["decompress", p(&packed), p(&out)]);
    assert!(o.code == Some(0), "{}", o.stderr);
    let back: Vec<f32> = std::fs::read(&out)
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(back.len(), data.len());
    for (&x, &y) in data.iter().zip(&back) {
        assert!((f64::from(x) - f64::from(y)).abs() <= 0.05);
    }
}

#[test]
fn unstructured_grid_through_the_binary() {
    let dir = TempDir::new().unwrap();
    // A path graph 0-1-2-...-99 with the values of a ramp.
    let data: Vec<f64> = (0..100).map(|i| i as f64 * 0.1).collect();
    let input = dir.path().join("v.f64");
    write_f64s(&input, &data);
    let edges = dir.path().join("mesh.txt");
    let text: String = (0..99).map(|i| format!("{i} {}\n", i + 1)).collect();
    std::fs::write(&edges, format!("# path\n{text}")).unwrap();
    let packed = dir.path().join("v.spz");
    let out = dir.path().join("v.out");
    let o = spillway(&compress_args(
        "0.25",
        ["--graph", p(&edges)],
        &["--method", "rbd2"],
        &input,
        &packed,
    ));
    assert!(o.code == Some(0), "{}", o.stderr);
    let o = spillway(&["decompress", p(&packed), p(&out)]);
    assert_eq!(o.code, Some(2), "the graph is required");
    assert!(o.stderr.contains("graph"), "{}", o.stderr);
    assert!(!out.exists());
    let o = spillway(&["decompress", "--graph", p(&edges), p(&packed), p(&out)]);
    assert!(o.code == Some(0), "{}", o.stderr);
    for (&x, &y) in data.iter().zip(&read_f64s(&out)) {
        assert!((x - y).abs() <= 0.25);
    }
}

/// Runs a failing command and checks the exit code, that stderr names `names`, and that
/// `output` was not created.
fn fails_cleanly(args: &[&str], names: &str, output: &Path, what: &str) {
    let o = spillway(args);
    assert_eq!(o.code, Some(2), "{what}: {}", o.stderr);
    let err = o.stderr;
    assert!(
        err.contains(names),
        "{what}: message {err:?} does not name {names}"
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(!output.exists(), "{what}: left output behind");
    let dir = output.parent().unwrap();
    let leftovers: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "{what}: temporary files {leftovers:?}"
    );
}

/// `compress --epsilon EPSILON SHAPE EXTRA INPUT OUTPUT`; `shape` is `--grid DIMS` or
/// `--graph FILE`.
fn compress_args(
    epsilon: &str,
    shape: [&str; 2],
    extra: &[&str],
    input: &Path,
    out: &Path,
) -> Vec<String> {
    let mut args = vec!["compress", "--epsilon", epsilon];
    args.extend(shape);
    args.extend(extra);
    args.extend([p(input), p(out)]);
    args.into_iter().map(String::from).collect()
}

#[test]
fn bad_input_exits_2_and_leaves_no_output() {
    let dir = TempDir::new().unwrap();
    let good = dir.path().join("good.f64");
    write_f64s(&good, &field(10, 10));
    let out = dir.path().join("out.spz");
    let missing = dir.path().join("missing.f64");
    let grid = ["--grid", "10x10"];
    let c = |extra: &[&str], input: &Path| compress_args("0.1", grid, extra, input, &out);
    let run = |args: Vec<String>, names: &str, what: &str| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_cleanly(&refs, names, &out, what);
    };
    run(c(&[], &missing), "missing.f64", "missing input");
    let short = dir.path().join("short.f64");
    std::fs::write(&short, [0u8; 13]).unwrap();
    run(c(&[], &short), "short.f64", "not whole values");
    let wrong = dir.path().join("wrong.f64");
    write_f64s(&wrong, &field(10, 9));
    run(c(&[], &wrong), "wrong.f64", "wrong point count");
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut v = field(10, 10);
        v[37] = bad;
        let f = dir.path().join("nonfinite.f64");
        write_f64s(&f, &v);
        // The set methods refuse non-finite values (predict keeps them bit for bit).
        run(c(&["--method", "sbd1"], &f), "value 37", "non-finite value");
    }
    for eps in ["0", "-1", "nan", "inf"] {
        let args = compress_args(eps, grid, &[], &good, &out);
        run(args, "epsilon", "bad epsilon");
    }
    run(c(&["--method", "sbd9"], &good), "sbd9", "unknown method");
    run(c(&["--dtype", "f16"], &good), "f16", "unknown dtype");
    let args = compress_args("0.1", ["--grid", "10x0"], &[], &good, &out);
    run(args, "10x0", "bad grid");
    let nowhere = dir.path().join("no/such/dir/out.spz");
    let o = spillway(&compress_args("0.1", grid, &[], &good, &nowhere));
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("out.spz"));

    // Decompression of damaged files.
    let packed = dir.path().join("packed.spz");
    let o = spillway(&compress_args("0.1", grid, &[], &good, &packed));
    assert!(o.code == Some(0), "{}", o.stderr);
    let bytes = std::fs::read(&packed).unwrap();
    let dout = dir.path().join("restored.f64");
    let damaged = dir.path().join("damaged.spz");
    for (what, content) in [
        ("truncated", bytes[..bytes.len() / 2].to_vec()),
        ("flipped", {
            let mut b = bytes.clone();
            b[bytes.len() / 2] ^= 0x10;
            b
        }),
        ("foreign", b"not a compressed file at all".to_vec()),
        ("empty", Vec::new()),
    ] {
        std::fs::write(&damaged, &content).unwrap();
        fails_cleanly(
            &["decompress", p(&damaged), p(&dout)],
            "damaged.spz",
            &dout,
            what,
        );
    }
    fails_cleanly(
        &["decompress", p(&missing), p(&dout)],
        "missing.f64",
        &dout,
        "missing",
    );

    // A failure leaves an existing output file as it was.
    std::fs::write(&dout, b"keep me").unwrap();
    std::fs::write(&damaged, &bytes[..10]).unwrap();
    let o = spillway(&["decompress", p(&damaged), p(&dout)]);
    assert_eq!(o.code, Some(2));
    assert_eq!(std::fs::read(&dout).unwrap(), b"keep me");
}

/// `run dyngraph --input INPUT --structure STRUCTURE MORE`.
fn dyngraph(input: &Path, structure: &str, more: &[&str]) -> Ran {
    let args = [
        "run",
        "dyngraph",
        "--input",
        p(input),
        "--structure",
        structure,
    ];
    spillway(&[&args[..], more].concat())
}

#[test]
fn dyngraph_replays_and_verifies() {
    let dir = TempDir::new().unwrap();
    let mut rng = Lcg(99);
    let mut edges = Vec::new();
    for _ in 0..3000 {
        let state = rng.next_u64();
        let u = (state >> 40) as u32 % 200;
        let v = if state & 8 == 0 {
            u + (state >> 20) as u32 % 5
        } else {
            (state >> 24) as u32 % 300
        };
        edges.push((u, v));
    }
    let input = dir.path().join("edges.txt");
    let text: String = edges.iter().map(|(u, v)| format!("{u}\t{v}\n")).collect();
    std::fs::write(&input, format!("# test stream\n{text}")).unwrap();
    let deletes: Vec<(u32, u32)> = edges
        .iter()
        .step_by(3)
        .copied()
        .chain([(5000, 1)])
        .collect();
    let del = dir.path().join("deletes.txt");
    let text: String = deletes.iter().map(|(u, v)| format!("{u} {v}\n")).collect();
    std::fs::write(&del, text).unwrap();
    // The expected graph, computed here.
    for undirected in [false, true] {
        let mut lists: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); 5001];
        for &(u, v) in &edges {
            lists[u as usize].insert(v);
            if undirected {
                lists[v as usize].insert(u);
            }
        }
        for &(u, v) in &deletes {
            lists[u as usize].remove(&v);
            if undirected {
                lists[v as usize].remove(&u);
            }
        }
        let arcs: usize = lists.iter().map(BTreeSet::len).sum();
        for s in ["ll", "bcsr", "daa", "diaa", "dcaa"] {
            let mut more = vec!["--deletes", p(&del), "--verify", "--json"];
            more.extend(["--fold", "every:100"]);
            if undirected {
                more.push("--undirected");
            }
            let o = dyngraph(&input, s, &more);
            assert!(o.code == Some(0), "{s}: {}", o.stderr);
            let out = o.stdout;
            assert_eq!(json_field(&out, "arcs") as usize, arcs, "{s}");
            // The inserted edges' vertices: deleting (5000, 1) names a vertex the graph
            // does not have, an edge that is not there.
            let vertices = edges.iter().map(|&(u, v)| u.max(v) + 1).max().unwrap();
            assert_eq!(json_field(&out, "vertices") as u32, vertices, "{s}");
            assert!(json_field(&out, "inserts_per_second") > 0.0);
            assert!(json_field(&out, "bytes_per_arc") > 0.0);
            let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
            assert_eq!(v["verified"], serde_json::Value::Bool(true));
        }
    }
    // Random deletes by fraction, text output.
    let fraction = ["--delete-fraction", "0.5", "--seed", "3", "--verify"];
    let o = dyngraph(&input, "dcaa", &fraction);
    assert!(o.code == Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("deletes/s"));
    assert!(o.stdout.contains("bytes/edge"));
}

#[test]
fn dyngraph_bad_input_exits_2() {
    let dir = TempDir::new().unwrap();
    let input = dir.path().join("bad.txt");
    std::fs::write(&input, "1 2\n3 4 5\n").unwrap();
    let o = dyngraph(&input, "daa", &[]);
    assert_eq!(o.code, Some(2));
    assert!(o.stderr.contains("bad.txt:2"), "{}", o.stderr);
    std::fs::write(&input, "1 2\n").unwrap();
    for (structure, more, names) in [
        ("tree", &[][..], "tree"),
        ("bcsr", &["--fold", "often"], "often"),
        ("daa", &["--delete-fraction", "2"], "delete-fraction"),
    ] {
        let o = dyngraph(&input, structure, more);
        assert_eq!(o.code, Some(2), "{}", o.stderr);
        assert!(o.stderr.contains(names), "{}", o.stderr);
    }
    let missing = dir.path().join("nope.txt");
    let o = dyngraph(&missing, "ll", &[]);
    assert_eq!(o.code, Some(2));
    assert!(o.stderr.contains("nope.txt"));
}

/// The deletions file is a second input: its bad lines are reported against it, with its
/// own line, and a deletion that names a vertex the inserted edges do not have is a
/// deletion of an edge that is not there (it sizes nothing).
#[test]
fn dyngraph_deletions_are_checked_as_their_own_file() {
    let dir = TempDir::new().unwrap();
    let input = dir.path().join("edges.txt");
    std::fs::write(&input, "0 1\n1 2\n2 3\n3 0\n").unwrap();
    let deletes = dir.path().join("deletes.txt");
    for (text, says) in [
        ("0 1\n# note\n1 x\n", "deletes.txt:3: invalid vertex id 'x'"),
        (
            "0 1\n\n1 99999999999\n",
            "deletes.txt:3: vertex id 99999999999",
        ),
        ("0 1 2\n", "deletes.txt:1"),
    ] {
        std::fs::write(&deletes, text).unwrap();
        let o = dyngraph(&input, "daa", &["--deletes", p(&deletes)]);
        assert_eq!(o.code, Some(2), "{text:?}\n{}", o.stderr);
        assert!(o.stderr.contains(says), "{text:?}\n{}", o.stderr);
        assert!(!o.stderr.contains("edges.txt"), "{text:?}\n{}", o.stderr);
    }
    // Ids far beyond the graph's (4 vertices): requested, not present, nothing allocated.
    std::fs::write(&deletes, "0 1\n1 4000000000\n3000000000 2\n").unwrap();
    for structure in ["ll", "bcsr", "daa", "diaa", "dcaa"] {
        let o = dyngraph(
            &input,
            structure,
            &["--deletes", p(&deletes), "--verify", "--json"],
        );
        assert_eq!(o.code, Some(0), "{structure}\n{}", o.stderr);
        assert_eq!(json_field(&o.stdout, "vertices"), 4.0, "{structure}");
        assert_eq!(
            json_field(&o.stdout, "deletes_requested"),
            3.0,
            "{structure}"
        );
        assert_eq!(json_field(&o.stdout, "edges_deleted"), 1.0, "{structure}");
        assert_eq!(json_field(&o.stdout, "arcs"), 3.0, "{structure}");
    }
}

#[test]
fn the_default_method_keeps_nan_and_infinities_bit_for_bit_and_verify_passes() {
    let dir = TempDir::new().unwrap();
    let mut data = field(20, 10);
    data[3] = f64::NAN;
    data[77] = f64::INFINITY;
    data[150] = f64::NEG_INFINITY;
    let input = dir.path().join("holes.f64");
    write_f64s(&input, &data);
    let packed = dir.path().join("holes.spz");
    let out = dir.path().join("holes.out");
    let eps = 1e-3;
    let o = spillway(&compress_args(
        &eps.to_string(),
        ["--grid", "20x10"],
        &["--verify", "--json"],
        &input,
        &packed,
    ));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(json_field(&o.stdout, "compress_seconds") >= 0.0);
    let o = spillway(&["decompress", "--json", p(&packed), p(&out)]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(json_field(&o.stdout, "decompress_seconds") >= 0.0);
    let back = read_f64s(&out);
    assert_eq!(back.len(), data.len());
    for (i, (x, y)) in data.iter().zip(&back).enumerate() {
        if x.is_finite() {
            assert!((x - y).abs() <= eps, "point {i}: {x} vs {y}");
        } else {
            assert_eq!(x.to_bits(), y.to_bits(), "point {i}: {x} vs {y}");
        }
    }
    // raw and delta predict set ids, not values: refused for the default method.
    let o = spillway(&compress_args(
        "1e-3",
        ["--grid", "20x10"],
        &["--predictor", "delta"],
        &input,
        &packed,
    ));
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("--predictor delta"), "{}", o.stderr);
}
