//! Attacks on the driver, one class at a time, each against a command of every family it
//! applies to (graph, clustering, MapReduce, BSP, compression, structures, probe): outputs that
//! are inputs (same name, symbolic link, hard link), two outputs that are one file, sizes that
//! imply more memory than there is, far too many ranks, endless inputs, directories that
//! cannot be written, failed writes, and several outputs that appear together or not at all.
//! Every refusal is exit 2 before work with a message naming the argument; inputs stay
//! byte-identical and nothing is left behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;
use common::{listing, Cmd, Ran};

/// The input files of every family, in one directory.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("g.txt"), "0 1\n1 2\n2 0\n2 3\n").unwrap();
        std::fs::write(d.join("p.csv"), "0,0\n0,1\n5,5\n5,6\n9,0\n9,1\n").unwrap();
        std::fs::write(d.join("r.svm"), "1 1:1.0 2:0.5\n2 2:1.0\n1 1:0.3 3:1\n").unwrap();
        std::fs::write(
            d.join("m.mtx"),
            "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 5\n2 2 3\n3 1 1\n1 3 2\n",
        )
        .unwrap();
        std::fs::write(d.join("t.txt"), "a b a\nc b\n").unwrap();
        let u64s: Vec<u8> = (0..512u64)
            .flat_map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes())
            .collect();
        std::fs::write(d.join("v.u64"), u64s).unwrap();
        let fft: String = (0..8).map(|i| format!("{i} 0\n")).collect();
        std::fs::write(d.join("f.txt"), fft).unwrap();
        let f64s: Vec<u8> = (0..64)
            .flat_map(|i| (f64::from(i) * 0.25).sin().to_le_bytes())
            .collect();
        std::fs::write(d.join("x.f64"), f64s).unwrap();
        let files = Files { dir };
        let packed = files.path("x.spz");
        let ran = Cmd::spillway()
            .args(["compress", "--epsilon", "1e-3", "--grid", "64"])
            .arg(files.path("x.f64"))
            .arg(&packed)
            .run();
        assert_eq!(ran.code, Some(0), "{ran}");
        files
    }

    /// `command` of `family` on its input file of this directory, followed by `more`.
    fn case(&self, family: &'static str, command: &str, more: &[&str]) -> Case {
        Case::on(family, command, s(&self.path(base(command).1)), more)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The bytes of every file in the directory.
    fn contents(&self) -> BTreeMap<String, Vec<u8>> {
        listing(self.dir.path())
            .into_iter()
            .filter_map(|name| {
                let path = self.dir.path().join(&name);
                let meta = std::fs::symlink_metadata(&path).ok()?;
                meta.is_file().then(|| {
                    (
                        name.to_string_lossy().into_owned(),
                        std::fs::read(&path).unwrap(),
                    )
                })
            })
            .collect()
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A command's arguments before its input file, and the name of that file in [`Files`].
fn base(command: &str) -> (&'static [&'static str], &'static str) {
    match command {
        "pagerank" => (&["run", "pagerank", "--input"], "g.txt"),
        "colour" => (&["run", "colour", "--input"], "g.txt"),
        "cc" => (&["run", "cc", "--input"], "g.txt"),
        "dyngraph" => (
            &["run", "dyngraph", "--structure", "ll", "--input"],
            "g.txt",
        ),
        "wordcount" => (&["run", "wordcount", "--input"], "t.txt"),
        "kmeans" => (&["run", "kmeans", "--k", "2", "--input"], "p.csv"),
        "spkmeans" => (&["run", "spkmeans", "--k", "2", "--input"], "r.svm"),
        "sgd" => (&["run", "sgd", "--input"], "m.mtx"),
        "sort" => (&["run", "sort", "--input"], "v.u64"),
        "fft" => (&["run", "fft", "--input"], "f.txt"),
        "compress" => (&["compress", "--epsilon", "1e-3", "--grid", "64"], "x.f64"),
        "decompress" => (&["decompress"], "x.spz"),
        other => panic!("no command {other}"),
    }
}

/// A command of one family.
#[derive(Clone)]
struct Case {
    family: &'static str,
    args: Vec<String>,
}

impl Case {
    fn new(family: &'static str, args: &[&str]) -> Case {
        Case {
            family,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// The case with `more` arguments.
    fn and(mut self, more: &[&str]) -> Case {
        self.args.extend(more.iter().map(|a| a.to_string()));
        self
    }

    /// `command` of `family` (see [`base`]) on `input`, followed by `more`.
    fn on(family: &'static str, command: &str, input: &str, more: &[&str]) -> Case {
        let mut args = base(command).0.to_vec();
        args.push(input);
        args.extend(more);
        Case::new(family, &args)
    }

    fn cmd(&self) -> Cmd {
        Cmd::spillway().args(&self.args)
    }
}

/// Runs `case` and checks a refusal before work: exit 2, no panic, stderr containing every
/// one of `says`, and every file of `files` as it was (and no file added).
fn refused(files: &Files, case: &Case, says: &[&str]) -> Ran {
    let before = files.contents();
    let ran = case.cmd().run();
    assert_eq!(
        ran.code,
        Some(2),
        "[{}] expected exit 2\n{ran}",
        case.family
    );
    assert!(!ran.stderr.contains("panicked"), "{ran}");
    for say in says {
        assert!(
            ran.stderr.contains(say),
            "[{}] stderr does not say {say:?}\n{ran}",
            case.family
        );
    }
    assert!(
        files.contents() == before,
        "[{}] the files changed\n{ran}",
        case.family
    );
    ran
}

/// One command per family that reads `input` (a file of that family) and writes `out`.
fn writers(f: &Files, out: &dyn Fn(&str) -> PathBuf) -> Vec<(Case, PathBuf)> {
    let cases = [
        ("graph", "pagerank", "--out"),
        ("graph", "colour", "--out"),
        ("MapReduce", "cc", "--out"),
        ("MapReduce", "wordcount", "--out"),
        ("clustering", "kmeans", "--assign"),
        ("clustering", "spkmeans", "--out"),
        ("factorisation", "sgd", "--out-v"),
        ("BSP", "sort", "--out"),
        ("BSP", "fft", "--out"),
        ("compression", "compress", ""),
        ("compression", "decompress", ""),
    ];
    cases
        .into_iter()
        .map(|(family, command, out_arg)| {
            let target = out(base(command).1);
            let more = [out_arg, s(&target)];
            let more = if out_arg.is_empty() {
                &more[1..]
            } else {
                &more
            };
            (f.case(family, command, more), target)
        })
        .collect()
}

#[test]
fn an_output_that_is_an_input_by_name_symlink_or_hard_link_is_refused() {
    let f = Files::new();
    // The same name.
    for (case, _) in writers(&f, &|input| f.path(input)) {
        refused(
            &f,
            &case,
            &["is the same file as", "an output never replaces an input"],
        );
    }
    // A symbolic link and a hard link to the input.
    let links = tempfile::tempdir().unwrap();
    for (kind, link) in [("symlink", true), ("hard link", false)] {
        let make = |input: &str| {
            let at = links.path().join(format!("{kind}-{input}"));
            if !at.exists() {
                if link {
                    std::os::unix::fs::symlink(f.path(input), &at).unwrap();
                } else {
                    std::fs::hard_link(f.path(input), &at).unwrap();
                }
            }
            at
        };
        for (case, at) in writers(&f, &make) {
            let ran = refused(&f, &case, &["is the same file as"]);
            assert!(
                ran.stderr.contains(s(&at)),
                "{kind}: names the output\n{ran}"
            );
        }
    }
    // An input given twice to a MapReduce job is not an output: word count reads it twice.
    let out = f.path("counts.txt");
    let t = f.path("t.txt");
    let twice = ["--input", s(&t), "--out", s(&out)];
    let ran = f.case("MapReduce", "wordcount", &twice).cmd().run();
    assert_eq!(ran.code, Some(0), "{ran}");
    let counts = std::fs::read_to_string(&out).unwrap();
    assert!(
        counts.lines().any(|l| l == "a 4" || l == "a\t4"),
        "{counts}"
    );
}

#[test]
fn two_outputs_that_are_one_file_are_refused() {
    let f = Files::new();
    let same = f.path("same.txt");
    let link = f.path("same-link.txt");
    let dotted = format!("{}/./same.txt", f.dir.path().display());
    let cases = [
        ("clustering", "kmeans", "--out", "--assign", s(&same)),
        (
            "clustering",
            "spkmeans",
            "--out",
            "--assign",
            dotted.as_str(),
        ),
        ("factorisation", "sgd", "--out-u", "--out-v", s(&same)),
        ("graph", "pagerank", "--out", "--trace", s(&same)),
        ("BSP", "sort", "--out", "--trace", s(&same)),
    ];
    for (family, command, first, second, again) in cases {
        let case = f.case(family, command, &[first, s(&same), second, again]);
        refused(&f, &case, &["are the same file"]);
    }
    // The second name is a symbolic link to an existing first output.
    std::fs::write(&same, "old\n").unwrap();
    std::os::unix::fs::symlink(&same, &link).unwrap();
    let case = f.case("MapReduce", "cc", &["--out", s(&same), "--trace", s(&link)]);
    refused(&f, &case, &["are the same file"]);
    assert_eq!(std::fs::read_to_string(&same).unwrap(), "old\n");
}

#[test]
fn sizes_that_imply_more_memory_than_there_is_are_refused_with_the_memory_needed() {
    let f = Files::new();
    let huge = f.path("huge.txt");
    std::fs::write(&huge, "0 1\n1 4294967294\n").unwrap();
    let wide = f.path("wide.svm");
    std::fs::write(&wide, "1 1:1 4294967295:2\n2 2:1\n").unwrap();
    let out_path = f.path("out.txt");
    // A header announcing 2^40 points: the point count and the grid's first dimension
    // patched, the checksum (xxh3-64 of every byte before it) made right again.
    let packed = std::fs::read(f.path("x.spz")).unwrap();
    let dims = 64u64.to_le_bytes();
    let at = packed
        .windows(16)
        .position(|w| w[..8] == dims && w[8..] == dims)
        .expect("the point count and the grid's size are in the header");
    let mut forged = packed.clone();
    let big = (1u64 << 40).to_le_bytes();
    forged[at..at + 8].copy_from_slice(&big);
    forged[at + 8..at + 16].copy_from_slice(&big);
    let end = forged.len() - 8;
    let sum = xxhash_rust::xxh3::xxh3_64(&forged[..end]).to_le_bytes();
    forged[end..].copy_from_slice(&sum);
    let forged_path = f.path("forged.spz");
    std::fs::write(&forged_path, &forged).unwrap();
    let (huge, wide, forged, out) = (s(&huge), s(&wide), s(&forged_path), s(&out_path));
    let gib = "GiB";
    let mut cases: Vec<(Case, Vec<&str>)> = vec![
        (
            Case::new("graph", &["run", "pagerank", "--input", huge, "--out", out]),
            vec![":2:", "4294967294", gib],
        ),
        (
            Case::new("graph", &["run", "colour", "--input", huge, "--out", out]),
            vec![":2:", gib],
        ),
        (
            Case::new("graph", &["run", "cc", "--input", huge, "--out", out]),
            vec!["huge.txt", "4294967294", gib],
        ),
        (
            Case::new(
                "MapReduce",
                &["run", "pagerank", "--engine", "mapreduce", "--input", huge],
            ),
            vec!["4294967294", gib],
        ),
        (
            Case::new(
                "clustering",
                &["run", "spkmeans", "--k", "1", "--input", wide],
            ),
            vec!["wide.svm", "4294967295", gib],
        ),
        (
            Case::new(
                "structures",
                &["run", "dyngraph", "--structure", "bcsr", "--input", huge],
            ),
            vec!["4294967294", gib],
        ),
        (
            Case::new("compression", &["decompress", forged, out]),
            vec![
                "the header announces 1099511627776 f64 values",
                "needs about 16.0 TiB",
            ],
        ),
    ];
    // Generated inputs whose size is more than there is memory for.
    let generated = [
        ("graph", "pagerank", "rmat:31:64", "--generate rmat:31:64"),
        (
            "clustering",
            "kmeans",
            "blobs:4000000000000:64:4",
            "--generate",
        ),
        ("BSP", "sort", "random:40", "--generate"),
        ("BSP", "fft", "random:40", "--generate"),
    ];
    for (family, command, spec, says) in generated {
        let case = Case::new(family, &["run", command, "--generate", spec]);
        cases.push((case, vec![says, "memory available"]));
    }
    // MapReduce connected components keys its records by id: sparse ids cost nothing.
    let cc = [
        "run",
        "cc",
        "--engine",
        "mapreduce",
        "--input",
        huge,
        "--out",
        out,
    ];
    let ran = Cmd::spillway().args(cc).run();
    assert_eq!(ran.code, Some(0), "{ran}");
    let labels = std::fs::read_to_string(&out_path).unwrap();
    let mut lines: Vec<&str> = labels.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["0 0", "1 0", "4294967294 0"], "{ran}");
    assert!(ran.peak_rss < 512 << 20, "{ran}");
    std::fs::remove_file(&out_path).unwrap();
    for (case, says) in &cases {
        let ran = refused(&f, case, says);
        assert!(
            ran.peak_rss < 512 << 20,
            "[{}] peak RSS {} MiB\n{ran}",
            case.family,
            ran.peak_rss >> 20
        );
    }
}

#[test]
fn ranks_far_above_the_data_are_refused() {
    let f = Files::new();
    let many = ["--ranks", "100000"];
    let cases = [
        f.case("graph", "pagerank", &many),
        f.case("MapReduce", "wordcount", &many),
        f.case("clustering", "kmeans", &many),
        f.case("BSP", "sort", &many),
        Case::new(
            "probe",
            &["probe", "--max-bytes", "1K", "--ranks", "100000"],
        ),
    ];
    for case in cases {
        // The probe has no data: its ranks are refused by what the system can map.
        let says = if case.family == "probe" {
            "memory mappings"
        } else {
            "far more ranks than the data can use"
        };
        let ran = refused(&f, &case, &["--ranks 100000", says]);
        assert!(ran.peak_rss < 512 << 20, "{ran}");
    }
}

#[test]
fn an_endless_input_stops_at_the_input_limit() {
    let f = Files::new();
    let (zero, limit) = ("/dev/zero", ["--input-limit", "4M"]);
    let cases = [
        Case::on("graph", "pagerank", zero, &limit),
        Case::on("MapReduce", "wordcount", zero, &limit),
        Case::on("clustering", "kmeans", zero, &limit),
        Case::on("BSP", "sort", zero, &limit),
        Case::on("structures", "dyngraph", zero, &limit),
        Case::new(
            "compression",
            &["compress", "--epsilon", "1", "--grid", "8", zero, "-"],
        )
        .and(&limit),
        Case::on(
            "compression",
            "decompress",
            zero,
            &["-", "--input-limit", "4M"],
        ),
    ];
    for case in cases {
        let start = Instant::now();
        let ran = refused(
            &f,
            &case,
            &["/dev/zero", "more than 4.0 MiB", "--input-limit 4M"],
        );
        assert!(start.elapsed() < Duration::from_secs(20), "{ran}");
        assert!(ran.peak_rss < 512 << 20, "{ran}");
    }
}

#[test]
fn directories_that_cannot_be_written_are_refused_before_work() {
    let f = Files::new();
    // A pseudo file system: no file can be created there, whoever runs the test.
    let unwritable = "/proc/sys";
    let file_parent = f.path("g.txt");
    // A long job: were it started, the test would notice the time.
    let long = Case::new(
        "graph",
        &[
            "run",
            "pagerank",
            "--generate",
            "rmat:18:16",
            "--iterations",
            "1000",
        ],
    );
    let with = |extra: &[&str]| long.clone().and(extra);
    let trace_in_file = format!("{}/trace.json", s(&file_parent));
    let kmeans = ["run", "kmeans", "--generate", "blobs:200000:8:4"];
    let sort = ["run", "sort", "--generate", "random:24"];
    let cases = [
        (with(&["--spill-dir", unwritable]), "--spill-dir"),
        (with(&["--checkpoint-dir", unwritable]), "--checkpoint-dir"),
        (with(&["--trace", "/proc/sys/trace.json"]), "--trace"),
        (with(&["--trace", &trace_in_file]), "--trace"),
        (with(&["--out", "/proc/sys/ranks.txt"]), "--out"),
        (
            f.case("MapReduce", "wordcount", &["--spill-dir", unwritable]),
            "--spill-dir",
        ),
        (
            Case::new("clustering", &kmeans).and(&["--checkpoint-dir", unwritable]),
            "--checkpoint-dir",
        ),
        (
            Case::new("BSP", &sort).and(&["--trace", "/proc/sys/t.json"]),
            "--trace",
        ),
        (
            f.case("compression", "compress", &["/proc/sys/x.spz"]),
            "OUTPUT",
        ),
    ];
    for (case, arg) in &cases {
        let start = Instant::now();
        refused(&f, case, &[arg]);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "[{}] {arg}: refused only after {:?}",
            case.family,
            start.elapsed()
        );
    }
    // The probe's cache.
    let probe = Case::new("probe", &["probe", "--max-bytes", "1K"]);
    let before = f.contents();
    let ran = probe
        .cmd()
        .env("SPILLWAY_PROBE_CACHE", "/proc/sys/spillway-probe")
        .run();
    assert_eq!(ran.code, Some(2), "{ran}");
    assert!(ran.stderr.contains("probe cache"), "{ran}");
    assert!(f.contents() == before);
}

#[test]
fn failed_writes_are_a_non_zero_exit_with_a_message() {
    let f = Files::new();
    let full = "/dev/full";
    let cases = [
        f.case("graph", "pagerank", &["--out", full]),
        f.case("MapReduce", "wordcount", &["--out", full]),
        f.case("clustering", "kmeans", &["--assign", full]),
        f.case("BSP", "sort", &["--out", full]),
        f.case("compression", "compress", &[full]),
        f.case("compression", "decompress", &[full]),
        f.case("structures", "dyngraph", &[]),
        Case::new("probe", &["probe", "--max-bytes", "1K", "--ranks", "2"]),
    ];
    let cache = tempfile::tempdir().unwrap();
    for case in &cases {
        let before = f.contents();
        // Written to /dev/full, then (standard output) to a pipe closed before the write.
        let writes_to_full = case.args.iter().any(|a| a == "/dev/full");
        let ran = if writes_to_full {
            case.cmd().env("SPILLWAY_PROBE_CACHE", cache.path()).run()
        } else {
            case.cmd()
                .env("SPILLWAY_PROBE_CACHE", cache.path())
                .stdout_file("/dev/full")
                .run()
        };
        assert_eq!(ran.code, Some(1), "[{}]\n{ran}", case.family);
        assert!(
            ran.stderr.contains("No space left"),
            "[{}]\n{ran}",
            case.family
        );
        assert!(!ran.stderr.contains("panicked"), "{ran}");
        // Standard output a pipe whose reader is gone.
        let mut to_stdout = case.args.clone();
        if let Some(at) = to_stdout.iter().position(|a| a == "/dev/full") {
            to_stdout[at] = "-".into();
        }
        let ran = Cmd::spillway()
            .args(&to_stdout)
            .env("SPILLWAY_PROBE_CACHE", cache.path())
            .stdout_closed()
            .run();
        assert_eq!(ran.code, Some(1), "[{}] closed pipe\n{ran}", case.family);
        assert!(!ran.stderr.contains("panicked"), "{ran}");
        assert!(
            f.contents() == before,
            "[{}] the files changed",
            case.family
        );
    }
}

#[test]
fn several_outputs_are_committed_all_together_or_not_at_all() {
    let f = Files::new();
    let a = f.path("a.txt");
    let full = "/dev/full";
    let cases = [
        ("clustering", "kmeans", "--out", "--assign"),
        ("clustering", "spkmeans", "--assign", "--out"),
        ("factorisation", "sgd", "--out-u", "--out-v"),
        ("graph", "pagerank", "--out", "--trace"),
        ("BSP", "sort", "--out", "--trace"),
    ]
    .map(|(family, command, first, second)| f.case(family, command, &[first, s(&a), second, full]));
    for case in &cases {
        let before = f.contents();
        let ran = case.cmd().run();
        assert_eq!(ran.code, Some(1), "[{}]\n{ran}", case.family);
        assert!(
            !a.exists(),
            "[{}] one output of two was written\n{ran}",
            case.family
        );
        assert!(
            f.contents() == before,
            "[{}] files left or changed\n{ran}",
            case.family
        );
    }
    // An existing output keeps its old contents when the job fails.
    std::fs::write(&a, "old\n").unwrap();
    let ran = cases[0].cmd().run();
    assert_eq!(ran.code, Some(1), "{ran}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "old\n");
    // Both outputs appear when the job succeeds.
    let b = f.path("b.txt");
    let both = ["--out", s(&a), "--assign", s(&b)];
    let ran = f.case("clustering", "kmeans", &both).cmd().run();
    assert_eq!(ran.code, Some(0), "{ran}");
    assert_eq!(std::fs::read_to_string(&a).unwrap().lines().count(), 2);
    assert_eq!(std::fs::read_to_string(&b).unwrap().lines().count(), 6);
}

/// Standard output that cannot take what goes there, for every family: closed (`>&-`) is
/// found before any work (exit 1, naming it; the standard library gives such a program
/// `/dev/null`, where the report would vanish after an exit 0), and a full device is named
/// as standard output.
#[test]
fn a_closed_or_full_standard_output_is_named_and_a_closed_one_found_before_work() {
    let f = Files::new();
    let cache = tempfile::tempdir().unwrap();
    // The report goes to standard output, or an output does (`-`).
    let cases = [
        f.case("graph", "pagerank", &["--json"]),
        f.case("graph", "pagerank", &["--out", "-"]),
        f.case("graph", "cc", &["--out", "-"]),
        f.case("MapReduce", "wordcount", &["--out", "-"]),
        f.case("clustering", "kmeans", &["--json"]),
        f.case("factorisation", "sgd", &["--out-u", "-"]),
        f.case("BSP", "sort", &["--out", "-"]),
        f.case("BSP", "fft", &["--ranks", "2"]),
        f.case("compression", "compress", &["-"]),
        f.case("compression", "decompress", &["-"]),
        f.case("structures", "dyngraph", &["--json"]),
        Case::new(
            "generator",
            &[
                "gen",
                "rmat",
                "--scale",
                "4",
                "--edge-factor",
                "2",
                "--out",
                "-",
            ],
        ),
        Case::new(
            "generator",
            &[
                "gen", "blobs", "--points", "10", "--dim", "2", "--k", "2", "--out", "-",
            ],
        ),
        Case::new("probe", &["probe", "--max-bytes", "1K", "--ranks", "2"]),
    ];
    for case in &cases {
        let before = f.contents();
        let ran = case
            .cmd()
            .env("SPILLWAY_PROBE_CACHE", cache.path())
            .stdout_descriptor_closed()
            .run();
        assert_eq!(ran.code, Some(1), "[{}] >&-\n{ran}", case.family);
        assert!(
            ran.stderr.contains("standard output is closed"),
            "[{}] >&-\n{ran}",
            case.family
        );
        assert!(
            f.contents() == before,
            "[{}] the files changed",
            case.family
        );
        let ran = case
            .cmd()
            .env("SPILLWAY_PROBE_CACHE", cache.path())
            .stdout_file("/dev/full")
            .run();
        assert_eq!(ran.code, Some(1), "[{}] > /dev/full\n{ran}", case.family);
        assert!(
            ran.stderr.contains("standard output") && ran.stderr.contains("No space left"),
            "[{}] > /dev/full\n{ran}",
            case.family
        );
        assert!(!ran.stderr.contains("panicked"), "{ran}");
    }
}

/// Runs `args` with the write end of a pipe as descriptor 5 and `/dev/fd/5` in place of
/// `@`, as a shell's process substitution (`--out >(cat)`) gives it; returns the exit code,
/// stderr and what came through the pipe.
fn through_dev_fd(args: &[String]) -> (Option<i32>, String, Vec<u8>) {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (mut reader, writer) = std::io::pipe().unwrap();
    let fd = writer.as_raw_fd();
    let args: Vec<&str> = args
        .iter()
        .map(|a| if a == "@" { "/dev/fd/5" } else { a.as_str() })
        .collect();
    let mut cmd = std::process::Command::new(common::BIN);
    cmd.args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: dup2(2) and fcntl(2) are async-signal-safe; descriptor 5 becomes the pipe's
    // write end, without close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself would keep close-on-exec: clear it then.
            let done = if fd == 5 {
                libc::fcntl(5, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 5)
            };
            if done < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let child = cmd.spawn().unwrap();
    drop(writer);
    let mut got = Vec::new();
    reader.read_to_end(&mut got).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        got,
    )
}

/// An output named `/dev/fd/N` (a pipe, as `--out >(cat)` gives) is written through, for
/// every family's writer, with what the same command writes to a regular file.
#[test]
fn an_output_that_is_a_process_substitution_is_written_through() {
    let f = Files::new();
    for (case, target) in writers(&f, &|name| f.path(&format!("out-{name}"))) {
        // Eight points of FFT split over at most two ranks (a multiple of ranks squared).
        let case = match case.args.iter().any(|a| a == "fft") {
            true => case.and(&["--ranks", "2"]),
            false => case,
        };
        let ran = case.cmd().run();
        assert_eq!(ran.code, Some(0), "[{}]\n{ran}", case.family);
        let want = std::fs::read(&target).unwrap();
        std::fs::remove_file(&target).unwrap();
        let args: Vec<String> = case
            .args
            .iter()
            .map(|a| {
                if Path::new(a) == target {
                    "@".into()
                } else {
                    a.clone()
                }
            })
            .collect();
        let (code, stderr, got) = through_dev_fd(&args);
        assert_eq!(code, Some(0), "[{}] {args:?}\n{stderr}", case.family);
        // Sort's and FFT's outputs are binary or text of the same values in the same order.
        assert!(
            got == want,
            "[{}] {} bytes through the pipe, {} to the file",
            case.family,
            got.len(),
            want.len()
        );
    }
}

/// A trace that cannot be completed (here the file-size limit) fails the job and leaves no
/// part of itself behind, nor any other output.
#[test]
fn a_trace_that_cannot_be_completed_leaves_nothing_behind() {
    let f = Files::new();
    let trace = f.path("t.json");
    let out = f.path("o.txt");
    for case in [
        f.case(
            "graph",
            "pagerank",
            &[
                "--iterations",
                "200",
                "--out",
                s(&out),
                "--trace",
                s(&trace),
            ],
        ),
        f.case("BSP", "sort", &["--out", s(&out), "--trace", s(&trace)]),
    ] {
        let before = f.contents();
        // One KiB of file (bash's `ulimit -f` counts 1024-byte blocks).
        let ran = Cmd::new("bash")
            .args(["-c", "ulimit -f 1 && exec \"$@\"", "bash", common::BIN])
            .args(&case.args)
            .run();
        assert_eq!(ran.code, Some(1), "[{}]\n{ran}", case.family);
        assert!(
            ran.stderr.contains("trace") && ran.stderr.contains(s(&trace)),
            "[{}]\n{ran}",
            case.family
        );
        assert!(
            f.contents() == before,
            "[{}] files left\n{ran}",
            case.family
        );
    }
}

/// A stack larger than the memory there is is refused with the other memory checks, before
/// any rank starts, naming the option.
#[test]
fn a_stack_larger_than_memory_is_refused_before_work() {
    let f = Files::new();
    for case in [
        f.case("graph", "pagerank", &["--stack-size", "1P"]),
        f.case("MapReduce", "wordcount", &["--stack-size", "1P"]),
        f.case("BSP", "sort", &["--stack-size", "1P"]),
    ] {
        refused(&f, &case, &["--stack-size", "memory available"]);
    }
}
