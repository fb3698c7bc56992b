//! The BSP commands end to end: `run fft` against numpy.fft.fft (Python reference, see
//! tests/reference/fft_ref.py) on fresh random inputs at several layouts and under a memory
//! budget, `run sort` against the standard library's sort, bad inputs (exit 2 with file, line
//! and reason) and `probe` (its cache).
//!
//! The Python check runs `$SPILLWAY_PYTHON` (default `python3`) with numpy;
//! `SPILLWAY_SKIP_PYTHON=1` skips it.

use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

mod common;
use common::{
    max_abs_diff, mem_budget_args, python, read_u64s, reference_script as reference, spillway,
    write_u64s, Cmd, Ran,
};

/// Runs `program` with `args` and the environment variables `env`.
fn run(program: &str, args: &[&str], env: &[(&str, &Path)]) -> Ran {
    env.iter()
        .fold(Cmd::new(program).args(args), |cmd, (k, v)| cmd.env(k, v))
        .run()
}

/// `spillway run COMMAND SOURCE --out OUT MORE`: `source` names the input (`--input FILE` or
/// `--generate SPEC`).
fn run_to(command: &str, source: [&str; 2], out: &Path, more: &[&str]) -> Ran {
    let out = ["--out", out.to_str().unwrap()];
    spillway(&[&["run", command][..], &source, &out, more].concat())
}

/// A seed no earlier run has used (printed with every failure, to reproduce it).
fn fresh_seed() -> u64 {
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64;
    t ^ (u64::from(std::process::id()) << 32)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    /// Uniform in [-scale, scale).
    fn float(&mut self, scale: f64) -> f64 {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
    }
}

fn write_complex(path: &Path, n: usize, rng: &mut Rng) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for _ in 0..n {
        // Values of several magnitudes, in plain and exponent notation.
        let s = [1.0, 1e3, 1e-3][(rng.next() % 3) as usize];
        writeln!(f, "{:e} {}", rng.float(s), rng.float(s)).unwrap();
    }
}

#[test]
fn fft_matches_numpy_on_fresh_inputs_at_every_layout() {
    let Some(py) = python() else { return };
    let seed = fresh_seed();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(seed);
    let input = dir.path().join("x.txt");
    write_complex(&input, 1 << 12, &mut rng);
    let layouts: [(&str, &str, Option<&str>); 7] = [
        ("1", "1", None),
        ("2", "1", None),
        ("4", "1", None),
        ("8", "1", None),
        ("2", "2", None),
        ("8", "2", None),
        ("4", "2", Some("1M")),
    ];
    for (ranks, nodes, budget) in layouts {
        let out = dir.path().join(format!("X-{ranks}-{nodes}.txt"));
        let more = [
            &["--ranks", ranks, "--nodes", nodes][..],
            &mem_budget_args(budget),
        ]
        .concat();
        let ran = run_to("fft", ["--input", input.to_str().unwrap()], &out, &more);
        assert!(ran.code == Some(0), "seed {seed}: {ran}");
        let check = run(
            &py,
            &[
                reference("fft_ref.py").to_str().unwrap(),
                input.to_str().unwrap(),
                out.to_str().unwrap(),
            ],
            &[],
        );
        assert!(
            check.code == Some(0),
            "seed {seed}, {ranks} ranks on {nodes} nodes (budget {budget:?}): numpy disagrees\n{}",
            check
        );
    }
}

#[test]
fn fft_of_a_generated_input_is_the_same_on_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    let mut first: Option<Vec<u8>> = None;
    for (ranks, nodes, checked) in [("1", "1", false), ("4", "2", true), ("8", "2", false)] {
        let out = dir.path().join(format!("g-{ranks}-{nodes}.txt"));
        let flag = if checked { "--checked" } else { "--json" };
        // `--checked` turns on the BSP layer's checked mode in a release build.
        let more = ["--ranks", ranks, "--nodes", nodes, flag];
        let ran = run_to("fft", ["--generate", "random:10:7"], &out, &more);
        assert!(ran.code == Some(0), "{}", ran);
        let got = std::fs::read(&out).unwrap();
        assert_eq!(got.iter().filter(|&&b| b == b'\n').count(), 1024);
        // Bit-identical output is not promised across layouts; equal to 1e-12 is.
        let parse = |b: &[u8]| -> Vec<f64> {
            String::from_utf8_lossy(b)
                .split_ascii_whitespace()
                .map(|t| t.parse().unwrap())
                .collect()
        };
        match &first {
            None => first = Some(got),
            Some(f) => {
                let (a, b) = (parse(f), parse(&got));
                let worst = max_abs_diff(&a, &b);
                assert!(
                    worst < 1e-9,
                    "{ranks} ranks, {nodes} nodes: differs by {worst}"
                );
            }
        }
    }
}

/// Runs `fft` on a file with `content` and returns stderr, asserting exit code 2.
fn rejected_fft(content: &str, ranks: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.txt");
    std::fs::write(&input, content).unwrap();
    let out = dir.path().join("out.txt");
    let ran = run_to(
        "fft",
        ["--input", input.to_str().unwrap()],
        &out,
        &["--ranks", ranks],
    );
    assert_eq!(ran.code, Some(2), "{}", ran);
    assert!(!out.exists(), "no output on bad input");
    let err = ran.stderr.clone();
    assert!(err.contains("bad.txt"), "{err}");
    err
}

#[test]
fn fft_rejects_bad_input_with_file_line_and_reason() {
    let cases: [(&str, &str, &[&str]); 6] = [
        ("1 2\n3\n", "1", &["bad.txt:2: missing imaginary part"]),
        (
            "1 2\n3 x\n",
            "1",
            &["bad.txt:2: imaginary part 'x' is not a number"],
        ),
        (
            "1 2\n3 4\n5 6 7\n8 9\n",
            "1",
            &["bad.txt:3: more than two numbers"],
        ),
        (
            "1 2\n3 4\n5 6\n",
            "1",
            &["bad.txt:3: 3 values: the length must be a power of two"],
        ),
        (
            "1 2\n3 4\n5 6\n7 8\n",
            "4",
            &["bad.txt:4:", "cannot be split over 4 ranks"],
        ),
        ("", "1", &["bad.txt: no values"]),
    ];
    for (content, ranks, says) in cases {
        let e = rejected_fft(content, ranks);
        for say in says {
            assert!(
                e.contains(say),
                "{content:?} on {ranks} ranks: no {say:?}\n{e}"
            );
        }
    }
}

#[test]
fn sort_matches_the_standard_sort() {
    let seed = fresh_seed();
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("v.bin");
    // Random values with runs of duplicates.
    let values: Vec<u64> = (0..100_003)
        .map(|i| if i % 7 == 0 { 42 } else { rng.next() })
        .collect();
    write_u64s(&input, &values);
    let mut want = values.clone();
    want.sort();
    for (ranks, nodes) in [("1", "1"), ("2", "1"), ("3", "1"), ("4", "2"), ("6", "3")] {
        let out = dir.path().join(format!("s-{ranks}-{nodes}.bin"));
        let more = ["--ranks", ranks, "--nodes", nodes];
        let ran = run_to("sort", ["--input", input.to_str().unwrap()], &out, &more);
        assert!(ran.code == Some(0), "seed {seed}: {}", ran);
        assert!(
            read_u64s(&out) == want,
            "seed {seed}: {ranks} ranks on {nodes} nodes"
        );
    }
}

#[test]
fn sort_of_a_generated_input_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.bin");
    let ran = run_to(
        "sort",
        ["--generate", "random:14:5"],
        &out,
        &["--ranks", "3"],
    );
    assert!(ran.code == Some(0), "{}", ran);
    let got = read_u64s(&out);
    assert_eq!(got.len(), 1 << 14);
    assert!(got.windows(2).all(|w| w[0] <= w[1]));

    let bad = dir.path().join("bad.bin");
    std::fs::write(&bad, [0u8; 12]).unwrap();
    let ran = spillway(&[
        "run",
        "sort",
        "--input",
        bad.to_str().unwrap(),
        "--ranks",
        "2",
    ]);
    assert_eq!(ran.code, Some(2), "{}", ran);
    let err = ran.stderr.clone();
    assert!(
        err.contains("bad.bin: 12 bytes is not a whole number"),
        "{err}"
    );
}

#[test]
fn probe_measures_once_then_reads_its_cache() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("SPILLWAY_PROBE_CACHE", dir.path())];
    let args = [
        "probe",
        "--ranks",
        "2",
        "--min-bytes",
        "1K",
        "--max-bytes",
        "64K",
        "--reps",
        "1",
        "--json",
    ];
    let first = run(env!("CARGO_BIN_EXE_spillway"), &args, &env);
    assert!(first.code == Some(0), "{}", first);
    let a: serde_json::Value = serde_json::from_str(&first.stdout).expect("JSON");
    assert_eq!(a["cached"], false);
    assert_eq!(a["machine"]["p"], 2);
    assert!(a["machine"]["g"].as_f64().unwrap() >= 0.0);
    assert!(a["machine"]["l"].as_f64().unwrap() > 0.0);
    // 1K..64K doubling: 7 sizes, two patterns.
    assert_eq!(a["samples"].as_array().unwrap().len(), 14);
    let second = run(env!("CARGO_BIN_EXE_spillway"), &args, &env);
    assert!(second.code == Some(0), "{}", second);
    let b: serde_json::Value = serde_json::from_str(&second.stdout).expect("JSON");
    assert_eq!(b["cached"], true);
    // Equal up to the JSON round trip of the cache.
    for key in ["g", "l"] {
        let (x, y) = (
            a["machine"][key].as_f64().unwrap(),
            b["machine"][key].as_f64().unwrap(),
        );
        assert!(
            (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
            "{key}: {x} {y}"
        );
    }
    assert_eq!(a["machine"]["p"], b["machine"]["p"]);
    // A program's probe finds the cached values.
    let text_out = run(
        env!("CARGO_BIN_EXE_spillway"),
        &args[..args.len() - 1],
        &env,
    );
    assert!(text_out.stdout.clone().contains("(cached:"));
}
