//! Processes lost for real (feature `mpi`, built against an MPI with ULFM such as Open MPI 5):
//! one MPI process of a running job is killed (SIGKILL), from outside or by itself at a chosen
//! point (`--inject-failure process:N@op:K:stage`); the survivors must end with exit 0 and the
//! output of a failure-free run (PageRank ranks within 1e-9 relative), or, when the loss
//! cannot be recovered, with exit 1 and a message naming what was lost, within seconds.
//!
//! The launcher is `$SPILLWAY_ULFM_MPIRUN` (an Open MPI 5 `mpirun` that runs with
//! `--with-ft ulfm` and may oversubscribe the cores: scripts/test.sh makes such a wrapper).
//! Without it, or without ULFM in this build, the tests say so and pass, unless
//! `SPILLWAY_REQUIRE_ULFM=1` (set by CI) makes that a failure. Every `mpirun` runs under
//! `timeout`, so a hang fails the test instead of stalling it. Open MPI 5.0.11's `mpirun`
//! itself sometimes goes on after every process of a job that lost some has exited (see
//! [`wait_launcher`]): it is then killed and the job judged by what its processes printed.
#![cfg(feature = "mpi")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{relaunching, sorted_lines, write_points, Lcg};

const SPILLWAY: &str = env!("CARGO_BIN_EXE_spillway");

/// The ULFM launcher, or `None` (with a message) when these tests cannot run here.
fn launcher() -> Option<String> {
    let require = std::env::var_os("SPILLWAY_REQUIRE_ULFM").is_some_and(|v| v == "1");
    let why = if !spillway::mpi::built_with_ulfm() {
        "this build has no ULFM (build the mpi feature against Open MPI 5)"
    } else if let Ok(l) = std::env::var("SPILLWAY_ULFM_MPIRUN") {
        return Some(l);
    } else {
        "SPILLWAY_ULFM_MPIRUN is not set"
    };
    assert!(!require, "SPILLWAY_REQUIRE_ULFM=1 but {why}");
    eprintln!("SKIPPED: lost-process tests ({why})");
    None
}

struct Ran {
    line: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// Seconds from the kill (or the start) to the end (of the job's last process, when the
    /// launcher hung).
    seconds: f64,
    /// The launcher went on after every process of the job had exited and was killed (see
    /// [`wait_launcher`]): `code` is then the kill's.
    launcher_hung: bool,
}

impl Ran {
    /// Whether the job ended with exit `code` (0 or 1): the launcher's status, or, when the
    /// launcher hung after its processes had all exited, what they printed (exit 1: an error
    /// message; exit 0: none; the callers check the output of a successful job).
    fn ended_with(&self, code: i32) -> bool {
        if !self.launcher_hung {
            return self.code == Some(code);
        }
        self.stderr.contains("spillway: error") == (code != 0)
    }
}

/// When a job still running is taken for hung (`start` gives it 300 s) and the stacks of its
/// processes are printed.
const DUMP_AFTER: Duration = Duration::from_secs(270);

/// The threads' stacks of process `pid` (`gdb -batch`; what went wrong, if it cannot).
fn stacks(pid: u32) -> String {
    let out = Command::new("timeout")
        .args(["20", "gdb", "-p", &pid.to_string(), "-batch", "-nx"])
        .args(["-ex", "thread apply all bt 16"])
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(e) => format!("(gdb could not run: {e})"),
    }
}

/// How long the launcher may go on after the last process of its job exited.
const LAUNCHER_GRACE: Duration = Duration::from_secs(15);

/// Whether `pid` is a live spillway process (a zombie has no executable; the link names the
/// resolved path).
fn is_job_process(pid: u32) -> bool {
    static BINARY: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let binary = BINARY.get_or_init(|| Path::new(SPILLWAY).canonicalize().ok());
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| Some(exe) == *binary)
}

/// SIGKILLs `pids`.
fn kill_all(pids: impl IntoIterator<Item = u32>) {
    for p in pids {
        // SAFETY: sends SIGKILL to a process this test started (its launcher or a descendant),
        // found by its pid.
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
}

/// Waits for the launcher `child`: its exit status, or `None` after killing it when it went
/// on for [`LAUNCHER_GRACE`] after the last process of its job had exited (Open MPI 5.0.11's
/// `mpirun --with-ft ulfm` did in 2 of about 60 runs of a job that lost two processes the
/// replicas did not cover: every survivor had printed its error and exited, whether they
/// ended with `MPI_Abort` or without `MPI_Finalize`), with the time that process was last
/// seen.
fn wait_launcher(child: &mut Child) -> (Option<std::process::ExitStatus>, Instant) {
    let root = child.id();
    let started = Instant::now();
    let mut seen: Option<Instant> = None;
    let mut dumped = false;
    loop {
        if let Some(status) = child.try_wait().expect("poll mpirun") {
            return (Some(status), Instant::now());
        }
        let tree = descendants(root);
        if !dumped && started.elapsed() > DUMP_AFTER {
            // The job is about to be ended by `timeout`: say where its processes wait.
            dumped = true;
            for &p in tree.iter().filter(|&&p| is_job_process(p)) {
                eprintln!(
                    "--- threads of job process {p}, {:?} in:\n{}",
                    started.elapsed(),
                    stacks(p)
                );
            }
        }
        if tree.iter().any(|&p| is_job_process(p)) {
            seen = Some(Instant::now());
        } else if let Some(last) = seen.filter(|t| t.elapsed() > LAUNCHER_GRACE) {
            kill_all(tree.into_iter().chain([root]));
            child.wait().expect("wait for mpirun");
            return (None, last);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "$ {}\nexit: {:?}{} after {:.1} s\n--- stdout\n{}\n--- stderr\n{}",
            self.line,
            self.code,
            if self.launcher_hung {
                " (the launcher went on after its processes had exited: killed)"
            } else {
                ""
            },
            self.seconds,
            self.stdout,
            self.stderr
        )
    }
}

/// Starts `timeout -k 10 300 LAUNCHER -np NP spillway ARGS`.
fn start(launcher: &str, np: u32, args: &[String]) -> (Child, String) {
    let line = format!(
        "timeout -k 10 300 {launcher} -np {np} {SPILLWAY} {}",
        args.join(" ")
    );
    let child = Command::new("timeout")
        .args(["-k", "10", "300"])
        .arg(launcher)
        .args(["-np", &np.to_string(), SPILLWAY])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{line}`: {e}"));
    (child, line)
}

fn finish(mut child: Child, line: String, since: Instant) -> Ran {
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = pipe.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = read(Box::new(child.stderr.take().expect("piped stderr")));
    let (status, end) = wait_launcher(&mut child);
    Ran {
        line,
        code: status.and_then(|s| s.code()),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
        seconds: (end - since).as_secs_f64(),
        launcher_hung: status.is_none(),
    }
}

fn run(launcher: &str, np: u32, args: &[String]) -> Ran {
    relaunching(
        || {
            let t = Instant::now();
            let (child, line) = start(launcher, np, args);
            finish(child, line, t)
        },
        |ran| &ran.stderr,
    )
}

/// Every process below `root`, with its parent.
fn descendants(root: u32) -> Vec<u32> {
    let mut parent: HashMap<u32, u32> = HashMap::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: the command may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parent.insert(pid, ppid);
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (&c, &pp) in &parent {
            if pp == p {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

/// The process of MPI rank `rank` among the descendants of `root`.
fn process_of(root: u32, rank: u32) -> Option<u32> {
    descendants(root).into_iter().find(|&p| {
        std::fs::read(format!("/proc/{p}/environ")).is_ok_and(|env| {
            env.split(|&b| b == 0)
                .any(|kv| kv == format!("OMPI_COMM_WORLD_RANK={rank}").as_bytes())
        })
    })
}

/// Whether the spillway job in process `pid` runs its ranks (its worker threads exist).
fn ranks_run(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks.flatten().any(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("node-"))
            })
        })
        .unwrap_or(false)
}

/// Runs the job, and once its ranks run SIGKILLs the processes of MPI ranks `victims` from
/// outside, `at` (a fraction) into `reference` seconds (the failure-free run's time in its
/// ranks: loading and computing). Returns the run (its seconds counted from the kill) and
/// whether the kill happened before the job ended.
fn run_killing(
    launcher: &str,
    np: u32,
    args: &[String],
    victims: &[u32],
    at: f64,
    reference: f64,
) -> (Ran, bool) {
    run_killing_waves(launcher, np, args, &[victims], When::Into(at), reference)
}

/// When the first wave of kills of [`run_killing_waves`] lands.
#[derive(Clone, Copy)]
enum When<'a> {
    /// A fraction into the failure-free run's time in its ranks, once the ranks run.
    Into(f64),
    /// As soon as the job stages the output file at this path (its temporary file appears
    /// beside it): while the outputs are written, after the last iteration.
    Writing(&'a Path),
}

/// Whether the output `path` is being staged: its temporary file (`.NAME.tmp-*` beside it)
/// exists.
fn staging(path: &Path) -> bool {
    let prefix = format!(
        ".{}.tmp-",
        path.file_name().expect("a file name").to_string_lossy()
    );
    std::fs::read_dir(path.parent().expect("a directory"))
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        })
        .unwrap_or(false)
}

/// What a recovered direct engine says on stderr once the survivors went on.
const WENT_ON: &str = "surviving processes went on";

/// As [`run_killing`] with kills in waves: `waves[0]` `when` says, and each later wave once the
/// job said (on stderr) that the survivors went on after the wave before, so that every
/// wave after the first lands after a completed recovery. Whether every wave was killed
/// before the job ended is the second value.
fn run_killing_waves(
    launcher: &str,
    np: u32,
    args: &[String],
    waves: &[&[u32]],
    when: When,
    reference: f64,
) -> (Ran, bool) {
    relaunching(
        || run_killing_waves_once(launcher, np, args, waves, when, reference),
        |(ran, _)| &ran.stderr,
    )
}

/// One launch of [`run_killing_waves`].
fn run_killing_waves_once(
    launcher: &str,
    np: u32,
    args: &[String],
    waves: &[&[u32]],
    when: When,
    reference: f64,
) -> (Ran, bool) {
    let t0 = Instant::now();
    let (mut child, line) = start(launcher, np, args);
    let root = child.id();
    // Both pipes are drained while the job runs (stderr is watched for the recoveries).
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let err_reader = {
        let mut pipe = child.stderr.take().expect("piped stderr");
        let sink = std::sync::Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut pipe, &mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let out_reader = {
        let mut pipe = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut pipe, &mut s);
            s
        })
    };
    let mut since = Instant::now();
    let mut landed = 0;
    'waves: for (i, victims) in waves.iter().enumerate() {
        loop {
            if t0.elapsed() > Duration::from_secs(120)
                || child.try_wait().expect("poll mpirun").is_some()
            {
                break 'waves;
            }
            let due = if i == 0 {
                // Every process past the job's start: a loss during the start ends the job
                // on every survivor (tested in tests/mpi.rs), not what these tests look at.
                (0..np).all(|p| process_of(root, p).is_some_and(ranks_run))
            } else {
                stderr.lock().unwrap().matches(WENT_ON).count() >= i
            };
            if due {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        match when {
            When::Into(at) if i == 0 => {
                std::thread::sleep(Duration::from_secs_f64(at * reference));
            }
            When::Writing(out) if i == 0 => {
                // Polled often: the outputs of these jobs are written in milliseconds.
                while !staging(out) {
                    if t0.elapsed() > Duration::from_secs(120)
                        || child.try_wait().expect("poll mpirun").is_some()
                    {
                        break 'waves;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            _ => {}
        }
        let pids: Vec<u32> = victims
            .iter()
            .filter_map(|&v| process_of(root, v))
            .collect();
        if i == 0 {
            since = Instant::now();
        }
        kill_all(pids.iter().copied());
        if pids.len() != victims.len() || child.try_wait().ok().flatten().is_some() {
            break;
        }
        landed += 1;
    }
    let (status, end) = wait_launcher(&mut child);
    err_reader.join().expect("stderr reader");
    let stdout = out_reader.join().expect("stdout reader");
    let stderr = stderr.lock().unwrap().clone();
    let ran = Ran {
        line,
        code: status.and_then(|s| s.code()),
        stdout,
        stderr,
        seconds: end.saturating_duration_since(since).as_secs_f64(),
        launcher_hung: status.is_none(),
    };
    (ran, landed == waves.len())
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temporary path")
}

/// A skewed random graph as a SNAP edge list: n vertices, m edges, some dangling vertices.
fn write_graph(path: &Path, n: u64, m: usize) {
    let mut rng = Lcg(7);
    let mut text = String::from("# test graph\n");
    for _ in 0..m {
        let u = rng.bits(33) % n;
        let skew = (rng.bits(33) % 1000) as f64 / 1000.0;
        let v = ((skew * skew * n as f64) as u64).min(n - 1);
        if u % 17 != 3 {
            text.push_str(&format!("{u}\t{v}\n"));
        }
    }
    text.push_str(&format!("0\t{}\n", n - 1));
    std::fs::write(path, text).unwrap();
}

/// Lines of words drawn from a vocabulary of `vocabulary` words.
fn write_text(path: &Path, lines: usize, vocabulary: u64) {
    let mut rng = Lcg(3);
    let mut text = String::new();
    for _ in 0..lines {
        for w in 0..10 {
            if w > 0 {
                text.push(' ');
            }
            let word = rng.bits(33) % vocabulary;
            text.push_str(&format!("w{word:x}"));
        }
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// `vertex rank` lines as a map.
fn ranks(p: &Path) -> HashMap<u64, f64> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            (
                w.next().unwrap().parse().unwrap(),
                w.next().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// Checks `got` against the failure-free `want` for `what`.
fn same_output(what: &str, want: &Path, got: &Path, ran: &Ran) {
    if what.starts_with("pagerank") {
        let (a, b) = (ranks(want), ranks(got));
        assert_eq!(a.len(), b.len(), "{ran}");
        for (v, x) in &a {
            let y = b
                .get(v)
                .unwrap_or_else(|| panic!("vertex {v} missing\n{ran}"));
            assert!(
                (x - y).abs() <= 1e-9 * x.abs(),
                "vertex {v}: {x} vs {y}\n{ran}"
            );
        }
    } else {
        assert!(
            sorted_lines(want) == sorted_lines(got),
            "outputs differ\n{ran}"
        );
    }
}

/// The inputs and the commands of the jobs.
struct Jobs {
    dir: tempfile::TempDir,
}

impl Jobs {
    fn new() -> Jobs {
        let dir = tempfile::tempdir().expect("temporary directory");
        write_graph(&dir.path().join("graph.txt"), 100_000, 800_000);
        write_text(&dir.path().join("text.txt"), 400_000, 50_000);
        write_points(&dir.path().join("points.csv"), (300_000, 8, 6), |r| {
            (r.bits(33) % 1_000_000) as f64 / 1_000_000.0
        });
        Jobs { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The arguments of job `what` writing to `out`, over `ranks` ranks.
    fn args(&self, what: &str, ranks: u32, out: &Path, extra: &[&str]) -> Vec<String> {
        let g = self.path("graph.txt");
        let mut a = match what {
            "cc" => strings(&[
                "run",
                "cc",
                "--engine",
                "mapreduce",
                "--input",
                s(&g),
                "--out",
                s(out),
            ]),
            "wordcount" => strings(&[
                "run",
                "wordcount",
                "--input",
                s(&self.path("text.txt")),
                "--out",
                s(out),
                "--chunk",
                "256K",
            ]),
            "pagerank-mr" => strings(&[
                "run",
                "pagerank",
                "--engine",
                "mapreduce",
                "--input",
                s(&g),
                "--iterations",
                "8",
                "--out",
                s(out),
            ]),
            "pagerank" | "pagerank-long" => strings(&[
                "run",
                "pagerank",
                "--input",
                s(&g),
                "--iterations",
                // The long one for a kill that must land amid the iterations even when the
                // ranks are seen running late (the watcher starved of the 2 cores).
                if what == "pagerank" { "1000" } else { "5000" },
                "--out",
                s(out),
            ]),
            "kmeans" => strings(&[
                "run",
                "kmeans",
                "--input",
                s(&self.path("points.csv")),
                "--k",
                "24",
                // Long enough for two kills one after the other with a recovery between
                // (0.4 s of 60 iterations on a fast machine was not).
                "--iterations",
                "200",
                "--init",
                "random:3",
                "--assign",
                s(out),
            ]),
            other => panic!("no job {other}"),
        };
        a.extend(strings(&[
            "--backend",
            "mpi",
            "--ranks",
            &ranks.to_string(),
        ]));
        a.extend(strings(extra));
        a
    }

    /// The failure-free output of `what` at `np` processes, and the run's time in its ranks
    /// (loading and computing, from its report: the kills are timed against that, which does
    /// not include MPI's start and end, a second or more whatever the job).
    fn reference(&self, launcher: &str, what: &str, np: u32, ft: bool) -> (PathBuf, f64) {
        let out = self.path(&format!("{what}-{np}-reference.txt"));
        let extra: &[&str] = if ft {
            &["--fault-tolerance", "--json"]
        } else {
            &["--json"]
        };
        let ran = run(launcher, np, &self.args(what, 2 * np, &out, extra));
        assert!(ran.ended_with(0), "{ran}");
        let report: serde_json::Value = serde_json::from_str(ran.stdout.trim())
            .unwrap_or_else(|e| panic!("one JSON report expected ({e})\n{ran}"));
        let seconds = |key: &str| {
            report[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key} in the report\n{ran}"))
        };
        (out, seconds("load_seconds") + seconds("compute_seconds"))
    }
}

#[test]
fn mapreduce_jobs_recover_from_a_process_killed_at_each_step_of_an_operation() {
    let Some(l) = launcher() else { return };
    let jobs = Jobs::new();
    // (job, np, process kills): early, middle and late operations and every step where a
    // loss can be found; node 0 (the first ranks, whose process reports) too.
    let cases: &[(&str, u32, &[&str])] = &[
        ("wordcount", 4, &["process:1@op:1"]),
        ("wordcount", 4, &["process:2@op:1:keep"]),
        ("wordcount", 6, &["process:0@op:1:reduce"]),
        ("cc", 4, &["process:1@op:1"]),
        ("cc", 4, &["process:2@op:2:shuffle"]),
        ("cc", 6, &["process:4@op:4:reduce"]),
        ("pagerank-mr", 4, &["process:3@op:1:shuffle"]),
        ("pagerank-mr", 4, &["process:0@op:5:keep"]),
        ("pagerank-mr", 6, &["process:2@op:9:reduce"]),
    ];
    for &(what, np, kills) in cases {
        let (want, _) = jobs.reference(&l, what, np, true);
        let got = jobs.path(&format!("{what}-{np}-{}.txt", kills.join("-")));
        let mut extra = Vec::new();
        for k in kills {
            extra.extend(["--inject-failure", k]);
        }
        extra.push("--json");
        let ran = run(&l, np, &jobs.args(what, 2 * np, &got, &extra));
        assert!(ran.ended_with(0), "{ran}");
        // One report, from the process of the first surviving rank, with one recovery.
        let report: serde_json::Value = serde_json::from_str(ran.stdout.trim())
            .unwrap_or_else(|e| panic!("one JSON report expected ({e})\n{ran}"));
        let recoveries = report["fault_tolerance"]["recoveries"]
            .as_array()
            .expect("recoveries");
        assert_eq!(recoveries.len(), 1, "{ran}");
        same_output(what, &want, &got, &ran);
    }
}

#[test]
fn jobs_survive_a_process_killed_from_outside() {
    let Some(l) = launcher() else { return };
    let jobs = Jobs::new();
    // (job, np, victim, when: a fraction of the failure-free run after the ranks started, or
    // None: while the outputs are written after the last iteration): the direct engines
    // recover without asking for it, the MapReduce ones with --fault-tolerance. At 0 the
    // kill lands while the ranks read the input, before the first iteration: the survivors
    // start over. While the outputs are written the victim is the last process, whose ranks
    // write last: the survivors write them again (the MapReduce jobs, whose last operation
    // has ended by then, run again from the input).
    let cases: &[(&str, u32, u32, Option<f64>)] = &[
        ("pagerank", 4, 2, Some(0.5)),
        ("pagerank", 6, 0, Some(0.3)),
        ("pagerank", 4, 1, Some(0.0)),
        ("pagerank", 4, 3, None),
        ("kmeans", 4, 1, Some(0.5)),
        ("kmeans", 6, 5, Some(0.3)),
        ("kmeans", 4, 2, Some(0.0)),
        ("kmeans", 4, 3, None),
        ("cc", 4, 3, Some(0.4)),
        ("cc", 4, 3, None),
        ("pagerank-mr", 4, 3, None),
        ("wordcount", 4, 3, None),
    ];
    for &(what, np, victim, at) in cases {
        let ft = !matches!(what, "pagerank" | "kmeans");
        let (want, seconds) = jobs.reference(&l, what, np, ft);
        let got = jobs.path(&format!("{what}-{np}-killed-{victim}.txt"));
        let extra: &[&str] = if ft {
            &["--fault-tolerance", "--json"]
        } else {
            &["--json"]
        };
        let args = jobs.args(what, 2 * np, &got, extra);
        let when = |late: f64| at.map_or(When::Writing(&got), |at| When::Into(at * late));
        let (mut ran, mut killed) =
            run_killing_waves(&l, np, &args, &[&[victim]], when(1.0), seconds);
        let recovered = |ran: &Ran| recoveries_of(ran, ft).is_some_and(|(n, _)| n > 0);
        if killed && ran.ended_with(0) && at.is_some() && !recovered(&ran) {
            // The kill landed after the survivors' last collective (the failure-free run was
            // timed on a busier machine): the output must then be the whole answer. Again,
            // earlier.
            same_output(what, &want, &got, &ran);
            std::fs::remove_file(&got).expect("remove the output");
            killed = false;
        }
        if !killed {
            // The failure-free run was timed on a busier machine than this one: kill earlier.
            (ran, killed) = run_killing_waves(&l, np, &args, &[&[victim]], when(0.25), seconds);
        }
        assert!(
            killed,
            "the job ended before the kill, twice: make it longer\n{ran}"
        );
        assert!(ran.ended_with(0), "{ran}");
        // The report names the recovery and the victim's ranks (two per process).
        let (_, lost) = recoveries_in(&ran, ft);
        let victim_ranks = [2 * u64::from(victim), 2 * u64::from(victim) + 1];
        assert!(
            victim_ranks.iter().all(|r| lost.contains(r)),
            "ranks {victim_ranks:?} reported lost expected, got {lost:?}\n{ran}"
        );
        same_output(what, &want, &got, &ran);
    }
}

#[test]
fn losses_that_cannot_be_recovered_end_the_job_with_an_error_within_seconds() {
    let Some(l) = launcher() else { return };
    let jobs = Jobs::new();
    let out = jobs.path("unrecoverable.txt");
    // Two nodes at once (what one sent the other in the last shuffle is in neither's
    // replicas); a loss during the recovery from another; a loss in a job without fault
    // tolerance.
    // The second loss may also be noticed together with the first (process 2 holds process
    // 1's replicas): then the job ends naming both as lost, which is as correct.
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "cc",
            &[
                "--inject-failure",
                "process:1@op:2",
                "--inject-failure",
                "process:3@op:2",
            ],
            &["in neither's replicas"],
        ),
        (
            "cc",
            &[
                "--inject-failure",
                "process:1@op:2",
                "--inject-failure",
                "process:2@op:2:shuffle",
            ],
            &[
                "during the recovery",
                "nodes 1-2 (MPI processes 1-2: ranks 2-5) were lost",
                // Open MPI may never complete the shrink of that recovery (see
                // `shrink_collectives`): the survivors end after their limit.
                "MPIX_Comm_shrink did not return",
            ],
        ),
    ];
    for &(what, extra, says) in cases {
        let ran = run(&l, 4, &jobs.args(what, 8, &out, extra));
        assert!(ran.ended_with(1), "{ran}");
        assert!(
            says.iter().any(|s| ran.stderr.contains(s)) && ran.stderr.contains("--resume"),
            "{ran}"
        );
        assert!(!out.exists(), "no output after a failed job\n{ran}");
    }
    // From outside: two processes of the direct PageRank, one holding the other's replicas
    // (node 1's are on node 2); one of a word count without fault tolerance; two processes
    // of a fault-tolerant MapReduce job at once, on different nodes at 6 processes: what
    // one sent the other in the last shuffle is in neither's replicas (found together, or
    // the second during or just after the recovery from the first: the kept buffers miss
    // what it sent).
    // The word count (0.2 s of work) is killed as soon as its ranks run. The PageRank is
    // killed amid its iterations only: both processes lost before the graph's copies are made
    // is recovered (the graph read again, the values not yet moved).
    let cases: &[(&str, u32, &[u32], bool, f64)] = &[
        ("pagerank-long", 4, &[1, 2], false, 0.3),
        ("wordcount", 4, &[2], false, 0.0),
        ("cc", 6, &[1, 3], true, 0.3),
    ];
    for &(what, np, victims, ft, at) in cases {
        let (want, seconds) = jobs.reference(&l, what, np, ft);
        let extra: &[&str] = if ft { &["--fault-tolerance"] } else { &[] };
        let args = jobs.args(what, 2 * np, &out, extra);
        let (mut ran, mut killed) = run_killing(&l, np, &args, victims, at, seconds);
        if killed && ran.ended_with(0) && at > 0.0 {
            // The kill landed once the work was done (in MPI_Finalize, on a machine faster
            // than when the reference was timed, or the ranks seen running late): the output
            // must then be the whole answer. Again, killing sooner (the PageRank not before
            // its copies are made: see above).
            same_output(what, &want, &out, &ran);
            std::fs::remove_file(&out).expect("remove the output");
            let sooner = if what.starts_with("pagerank") {
                at / 3.0
            } else {
                0.0
            };
            (ran, killed) = run_killing(&l, np, &args, victims, sooner, seconds);
        }
        assert!(killed, "{ran}");
        assert!(ran.ended_with(1), "{ran}");
        assert!(
            ran.stderr.contains("lost") && ran.stderr.contains("--resume"),
            "{ran}"
        );
        assert!(
            ran.seconds < 10.0,
            "took {:.1} s after the kill\n{ran}",
            ran.seconds
        );
        assert!(!out.exists(), "no output after a failed job\n{ran}");
    }
}

/// The recoveries of a report (a direct engine's, or the fault-tolerant MapReduce's) and
/// every rank they name as lost.
fn recoveries_in(ran: &Ran, ft: bool) -> (usize, Vec<u64>) {
    recoveries_of(ran, ft).unwrap_or_else(|| panic!("recoveries in the report\n{ran}"))
}

/// [`recoveries_in`], or `None` if the report has no recoveries (a run that lost nothing).
fn recoveries_of(ran: &Ran, ft: bool) -> Option<(usize, Vec<u64>)> {
    let report: serde_json::Value = serde_json::from_str(ran.stdout.trim())
        .unwrap_or_else(|e| panic!("one JSON report expected ({e})\n{ran}"));
    let recoveries = if ft {
        &report["fault_tolerance"]["recoveries"]
    } else {
        &report["recoveries"]
    };
    let list = recoveries.as_array()?;
    let lost = list
        .iter()
        .flat_map(|r| r["lost_ranks"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_u64())
        .collect();
    Some((list.len(), lost))
}

/// The ranks of MPI processes `victims` (two ranks per process).
fn ranks_of(victims: &[u32]) -> Vec<u64> {
    victims
        .iter()
        .flat_map(|&v| [2 * u64::from(v), 2 * u64::from(v) + 1])
        .collect()
}

#[test]
fn jobs_survive_two_processes_killed_that_the_replicas_cover() {
    let Some(l) = launcher() else { return };
    let jobs = Jobs::new();
    let np = 6;
    // Direct engines, killed from outside: (job, waves of victims). Two processes at once
    // that do not hold each other's replicas (process p's are on p + 1), and two one after
    // the other, the second once the survivors went on from the first: PageRank loses
    // process 4 and then 3, whose replicas were on 4 until the survivors replicated their
    // values again. K-means keeps no replicas (the centroids are on every rank; the points
    // are read again): any two processes.
    let cases: &[(&str, &[&[u32]])] = &[
        ("pagerank", &[&[1, 3]]),
        ("pagerank", &[&[4], &[3]]),
        ("kmeans", &[&[2, 5]]),
        ("kmeans", &[&[0], &[3]]),
    ];
    let mut references: HashMap<&str, (PathBuf, f64)> = HashMap::new();
    for &(what, waves) in cases {
        let (want, seconds) = references
            .entry(what)
            .or_insert_with(|| jobs.reference(&l, what, np, false))
            .clone();
        let victims: Vec<u32> = waves.iter().flat_map(|w| w.iter().copied()).collect();
        let got = jobs.path(&format!("{what}-{np}-killed-{victims:?}.txt"));
        let args = jobs.args(what, 2 * np, &got, &["--json"]);
        let (mut ran, mut killed) =
            run_killing_waves(&l, np, &args, waves, When::Into(0.2), seconds);
        if !killed {
            // The failure-free run was timed on a busier machine than this one: kill earlier.
            (ran, killed) = run_killing_waves(&l, np, &args, waves, When::Into(0.05), seconds);
        }
        assert!(
            killed,
            "the job ended before every kill, twice: make it longer\n{ran}"
        );
        assert!(ran.ended_with(0), "{ran}");
        let (recoveries, lost) = recoveries_in(&ran, false);
        let want_ranks = ranks_of(&victims);
        assert!(
            want_ranks.iter().all(|r| lost.contains(r)),
            "ranks {want_ranks:?} reported lost expected, got {lost:?}\n{ran}"
        );
        // Killed at once: found together or one after the other; in waves: one recovery each.
        let expected = if waves.len() > 1 {
            waves.len()..=waves.len()
        } else {
            1..=2
        };
        assert!(
            expected.contains(&recoveries),
            "{recoveries} recoveries, {expected:?} expected\n{ran}"
        );
        same_output(what, &want, &got, &ran);
    }
    // The fault-tolerant MapReduce: two processes killed in operations 2 and 7, each loss
    // recovered from the replicas kept after the last shuffle (re-replicated on the
    // survivors after the first recovery).
    let what = "pagerank-mr";
    let (want, _) = jobs.reference(&l, what, np, true);
    let got = jobs.path("pagerank-mr-two-losses.txt");
    let extra = [
        "--fault-tolerance",
        "--inject-failure",
        "process:1@op:2",
        "--inject-failure",
        "process:3@op:7:shuffle",
        "--json",
    ];
    let ran = run(&l, np, &jobs.args(what, 2 * np, &got, &extra));
    assert!(ran.ended_with(0), "{ran}");
    let (recoveries, lost) = recoveries_in(&ran, true);
    assert_eq!(recoveries, 2, "{ran}");
    let want_ranks = ranks_of(&[1, 3]);
    assert!(
        want_ranks.iter().all(|r| lost.contains(r)),
        "ranks {want_ranks:?} reported lost expected, got {lost:?}\n{ran}"
    );
    same_output(what, &want, &got, &ran);
}
