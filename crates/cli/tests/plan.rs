//! The plan's memory estimate against what every command holds at its peak (the child's peak
//! RSS from the kernel), at 1, 64 and 10,000 ranks on small inputs; memory per rank that
//! follows the rank's data (a ring of 70,000 vertices on 10,000 ranks); the report for
//! people, every figure with its unit.

use std::io::Write;
use std::path::{Path, PathBuf};

mod common;
use common::{Cmd, Lcg, Ran};

/// The inputs of every command, about 1 MB each (10,000 ranks need 640 KB of input).
struct Inputs {
    dir: tempfile::TempDir,
}

impl Inputs {
    fn new() -> Inputs {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Written as they are made: the test process stays small, and a child's peak RSS
        // (which counts the pages it was forked with) is its own.
        let mut rng = Lcg(7);
        lines(&d.join("ring.txt"), 70_000, &mut |v, w| {
            writeln!(w, "{v} {}", (v + 1) % 70_000)
        });
        lines(&d.join("g.txt"), 80_000, &mut |_, w| {
            writeln!(w, "{} {}", rng.below(20_000), rng.below(20_000))
        });
        lines(&d.join("p.csv"), 40_000, &mut |_, w| {
            writeln!(w, "{:.6},{:.6}", rng.normal(), rng.normal())
        });
        lines(&d.join("r.svm"), 20_000, &mut |_, w| {
            let mut cols: Vec<usize> = (0..5).map(|_| 1 + rng.below(4999)).collect();
            cols.sort_unstable();
            cols.dedup();
            write!(w, "1")?;
            for c in cols {
                write!(w, " {c}:{:.4}", rng.unit())?;
            }
            writeln!(w)
        });
        lines(&d.join("m.mtx"), 100_002, &mut |i, w| match i {
            0 => writeln!(w, "%%MatrixMarket matrix coordinate real general"),
            1 => writeln!(w, "2000 1000 100000"),
            _ => {
                let (u, i, r) = (1 + rng.below(2000), 1 + rng.below(1000), 1 + rng.below(5));
                writeln!(w, "{u} {i} {r}")
            }
        });
        lines(&d.join("t.txt"), 40_000, &mut |_, w| {
            let words: Vec<String> = (0..5).map(|_| format!("w{}", rng.below(5000))).collect();
            writeln!(w, "{}", words.join(" "))
        });
        let values: Vec<u8> = (0..200_000)
            .flat_map(|_| rng.next_u64().to_le_bytes())
            .collect();
        std::fs::write(d.join("v.u64"), values).unwrap();
        let grid: Vec<u8> = (0..512 * 512)
            .flat_map(|i| (f64::from(i) * 1e-3).sin().to_le_bytes())
            .collect();
        std::fs::write(d.join("x.f64"), grid).unwrap();
        let inputs = Inputs { dir };
        let ran = Cmd::spillway()
            .args(["compress", "--epsilon", "1e-4", "--grid", "512x512"])
            .arg(inputs.path("x.f64"))
            .arg(inputs.path("x.spz"))
            .run();
        assert_eq!(ran.code, Some(0), "{ran}");
        inputs
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A line writer of [`lines`]: line `i` into `w`.
type Line<'a> = dyn FnMut(u64, &mut dyn Write) -> std::io::Result<()> + 'a;

/// Writes `n` lines to `path`.
fn lines(path: &Path, n: u64, line: &mut Line<'_>) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..n {
        line(i, &mut w).unwrap();
    }
    w.flush().unwrap();
}

/// A command: its arguments (`@name` is the input file `name`), and whether it runs ranks.
struct Case {
    name: &'static str,
    args: &'static [&'static str],
    ranks: bool,
}

const fn case(name: &'static str, args: &'static [&'static str], ranks: bool) -> Case {
    Case { name, args, ranks }
}

/// Every command, and each engine of the commands that have two.
const CASES: &[Case] = &[
    case(
        "pagerank",
        &[
            "run",
            "pagerank",
            "--input",
            "@ring.txt",
            "--iterations",
            "5",
        ],
        true,
    ),
    case(
        "pagerank mapreduce",
        &[
            "run",
            "pagerank",
            "--input",
            "@g.txt",
            "--iterations",
            "3",
            "--engine",
            "mapreduce",
        ],
        true,
    ),
    case(
        "pagerank rmat",
        &[
            "run",
            "pagerank",
            "--generate",
            "rmat:16:8",
            "--iterations",
            "3",
        ],
        true,
    ),
    case("cc", &["run", "cc", "--input", "@g.txt"], true),
    case(
        "cc mapreduce",
        &["run", "cc", "--input", "@g.txt", "--engine", "mapreduce"],
        true,
    ),
    case("colour", &["run", "colour", "--input", "@g.txt"], true),
    case(
        "kmeans",
        &[
            "run",
            "kmeans",
            "--input",
            "@p.csv",
            "--k",
            "4",
            "--iterations",
            "5",
        ],
        true,
    ),
    case(
        "kmeans blobs",
        &[
            "run",
            "kmeans",
            "--generate",
            "blobs:100000:4:4",
            "--k",
            "4",
            "--iterations",
            "3",
        ],
        true,
    ),
    case(
        "spkmeans",
        &[
            "run",
            "spkmeans",
            "--input",
            "@r.svm",
            "--k",
            "4",
            "--iterations",
            "3",
        ],
        true,
    ),
    case(
        "sgd",
        &["run", "sgd", "--input", "@m.mtx", "--iterations", "2"],
        true,
    ),
    case(
        "wordcount",
        &["run", "wordcount", "--input", "@t.txt"],
        true,
    ),
    case("sort", &["run", "sort", "--input", "@v.u64"], true),
    case("fft", &["run", "fft", "--generate", "random:18"], true),
    case(
        "gen rmat --dedup",
        &[
            "gen",
            "rmat",
            "--scale",
            "16",
            "--edge-factor",
            "8",
            "--dedup",
            "--out",
            "/dev/null",
        ],
        true,
    ),
    case(
        "gen rmat",
        &[
            "gen",
            "rmat",
            "--scale",
            "16",
            "--edge-factor",
            "8",
            "--out",
            "/dev/null",
        ],
        true,
    ),
    case(
        "gen blobs",
        &[
            "gen",
            "blobs",
            "--points",
            "100000",
            "--dim",
            "4",
            "--k",
            "4",
            "--out",
            "/dev/null",
        ],
        false,
    ),
    case(
        "compress",
        &[
            "compress",
            "--epsilon",
            "1e-4",
            "--grid",
            "512x512",
            "@x.f64",
            "/dev/null",
        ],
        false,
    ),
    case("decompress", &["decompress", "@x.spz", "/dev/null"], false),
    case(
        "dyngraph",
        &["run", "dyngraph", "--input", "@g.txt", "--structure", "daa"],
        false,
    ),
    case("probe", &["probe", "--max-bytes", "4K"], true),
];

impl Case {
    /// The command at `ranks` ranks, with its JSON report if `json`.
    fn cmd(&self, inputs: &Inputs, ranks: u32, cache: &Path, json: bool) -> Cmd {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| match a.strip_prefix('@') {
                Some(name) => inputs.path(name).display().to_string(),
                None => a.to_string(),
            })
            .collect();
        let cmd = Cmd::spillway()
            .args(args)
            .args(json.then_some("--json"))
            .env("SPILLWAY_PROBE_CACHE", cache);
        match self.ranks {
            true => cmd.args(["--ranks", &ranks.to_string()]),
            false => cmd,
        }
    }
}

/// The rank counts a command is measured at: 1, 64 and 10,000, or the nearest its data or
/// its time allow (the FFT: p^2 must divide 2^18; the probe's total exchange at 10,000 ranks
/// is 10^8 puts a superstep, minutes of work).
fn rank_counts(case: &Case) -> Vec<u32> {
    match case.name {
        _ if !case.ranks => vec![1],
        "fft" => vec![1, 64, 512],
        "probe" => vec![1, 64, 1000],
        _ => vec![1, 64, 10_000],
    }
}

/// The estimate and the peak of one run, or the plan's refusal.
fn measured(ran: &Ran) -> Result<(f64, f64), String> {
    match ran.code {
        Some(0) => Ok((ran.number("memory_estimate_bytes"), ran.peak_rss as f64)),
        _ => Err(ran.stderr.clone()),
    }
}

/// Every command's plan estimates its peak memory within a factor of 2 of the peak RSS, at
/// 1, 64 and 10,000 ranks; where the estimate is beyond the machine, the plan refuses the job
/// before it starts (exit 2, naming `--ranks`), or the command refuses what its input's
/// contents imply before allocating it (exit 2, saying what it would need: connected
/// components' forests over every vertex id on each of 10,000 ranks).
#[test]
fn the_plan_estimates_every_commands_peak_memory_within_a_factor_of_two() {
    let inputs = Inputs::new();
    let cache = tempfile::tempdir().unwrap();
    let mut report = String::new();
    let mut wrong = Vec::new();
    for case in CASES {
        for ranks in rank_counts(case) {
            let ran = case.cmd(&inputs, ranks, cache.path(), true).run();
            match measured(&ran) {
                Ok((estimate, peak)) => {
                    let ratio = estimate / peak;
                    report += &format!(
                        "{:<20} {ranks:>6} ranks: estimate {:7.1} MiB, peak {:7.1} MiB, {ratio:.2}\n",
                        case.name,
                        estimate / 1048576.0,
                        peak / 1048576.0
                    );
                    if !(0.5..=2.0).contains(&ratio) {
                        wrong.push(format!("{} at {ranks} ranks: {ratio:.2}", case.name));
                    }
                }
                Err(stderr) => {
                    report += &format!("{:<20} {ranks:>6} ranks: refused\n", case.name);
                    let refused_by_plan = ran.code == Some(2)
                        && stderr.contains(&format!("--ranks {ranks}"))
                        && stderr.contains("memory available");
                    let refused_by_contents = ran.code == Some(2) && stderr.contains(" need ");
                    if !refused_by_plan && !refused_by_contents {
                        wrong.push(format!("{} at {ranks} ranks failed: {ran}", case.name));
                    }
                }
            }
        }
    }
    eprintln!("{report}");
    assert!(wrong.is_empty(), "{}\n{report}", wrong.join("\n"));
}

/// PageRank of a ring of 70,000 vertices (0.8 MB) on 10,000 ranks without a budget: each
/// rank holds its own part only (2 MB a rank, 20 GB, before the huge pages of unused
/// reservations went).
#[test]
fn ten_thousand_ranks_of_pagerank_on_a_small_ring_stay_within_one_gib() {
    let inputs = Inputs::new();
    let cache = tempfile::tempdir().unwrap();
    let ran = CASES[0].cmd(&inputs, 10_000, cache.path(), true).run();
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(
        ran.peak_rss < 1 << 30,
        "peak RSS {} MiB",
        ran.peak_rss >> 20
    );
}

/// Whether `token` shows a number as a raw float would: more than four decimals with
/// trailing zeros (`0.000000`, `1.000000`) or more than six significant digits
/// (`550901790.025223`).
fn raw_float(token: &str) -> bool {
    let t = token.trim_matches(|c: char| !c.is_ascii_digit() && c != '.');
    let Some((int, frac)) = t.split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) || frac.len() <= 4 {
        return false;
    }
    let significant = format!("{int}{frac}").trim_start_matches('0').len();
    frac.ends_with('0') || significant > 6
}

/// The report for people gives figures with their units and a sensible precision: no raw
/// float (`edges_per_second 550901790.025223`), bytes in B/KiB/MiB, times in s/ms/us.
#[test]
fn the_report_for_people_gives_every_figure_with_its_unit() {
    let inputs = Inputs::new();
    let cache = tempfile::tempdir().unwrap();
    for case in CASES.iter().filter(|c| c.name != "probe") {
        let ran = case.cmd(&inputs, 4, cache.path(), false).run();
        assert_eq!(ran.code, Some(0), "{ran}");
        for line in ran.stdout.lines() {
            assert!(
                !line.split_whitespace().any(raw_float),
                "[{}] a raw figure: {line}\n{}",
                case.name,
                ran.stdout
            );
            let mut words = line.split_whitespace();
            if let (Some(key), Some(value)) = (words.next(), words.next()) {
                if key.ends_with("_bytes") && value.parse::<f64>().is_ok() {
                    let unit = words.next().unwrap_or("");
                    assert!(
                        ["B", "KiB", "MiB", "GiB", "TiB"].contains(&unit),
                        "[{}] bytes without a unit: {line}",
                        case.name
                    );
                }
                if key.ends_with("_seconds") && value.parse::<f64>().is_ok() {
                    let unit = words.next().unwrap_or("");
                    assert!(
                        ["s", "ms", "us"].contains(&unit),
                        "[{}] time without a unit: {line}",
                        case.name
                    );
                }
            }
        }
    }
}
