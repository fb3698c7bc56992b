//! Checkpoint and resume of the direct PageRank and K-means engines: jobs killed with SIGKILL
//! at several moments (after a checkpoint, in the middle of writing one, between two) resume
//! from the newest complete checkpoint and write exactly the output of an uninterrupted run;
//! resuming with other arguments is refused.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

mod common;
use common::{sorted_lines, Cmd, Ran};

/// How long one run of the CLI may take before the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// How long to wait for a checkpoint to appear before the test fails.
const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts the CLI, with checkpoints slowed down by `pause_ms` if given.
fn spawn(args: &[String], pause_ms: Option<u64>) -> Child {
    let cmd = Cmd::spillway().args(args);
    match pause_ms {
        Some(ms) => cmd.env("SPILLWAY_CHECKPOINT_PAUSE_MS", ms.to_string()),
        None => cmd.env_remove("SPILLWAY_CHECKPOINT_PAUSE_MS"),
    }
    .spawn()
    .expect("start spillway")
}

/// Waits for `child` with a time limit.
fn finish(child: Child, what: &str) -> Ran {
    common::finish(child, RUN_TIMEOUT, what)
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

/// Runs the CLI to its end and requires success; returns stdout.
fn run_ok(args: &[String], what: &str) -> String {
    let out = finish(spawn(args, None), what);
    assert!(out.code == Some(0), "{what}: {out}");
    out.stdout
}

/// Checkpoint directories in `dir`: (complete sequence numbers, torn `.tmp` directories that
/// hold at least one rank's part).
fn checkpoints(dir: &Path) -> (Vec<u64>, Vec<u64>) {
    let (mut complete, mut torn) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (complete, torn);
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("ckpt-") else {
            continue;
        };
        if let Some(seq) = rest.strip_suffix(".tmp") {
            let has_part = std::fs::read_dir(e.path())
                .map(|d| {
                    d.flatten()
                        .any(|f| f.file_name().to_string_lossy().starts_with("rank-"))
                })
                .unwrap_or(false);
            if has_part {
                torn.push(seq.parse().unwrap());
            }
        } else if let Ok(seq) = rest.parse() {
            complete.push(seq);
        }
    }
    complete.sort_unstable();
    torn.sort_unstable();
    (complete, torn)
}

/// When to kill a checkpointing job.
#[derive(Debug, Clone, Copy)]
enum Moment {
    /// As soon as the complete checkpoint numbered at least this appears.
    AfterCheckpoint(u64),
    /// While a checkpoint numbered at least this is being written: its `.tmp` directory holds
    /// a part but it is not yet complete.
    DuringWrite(u64),
    /// After this long.
    After(Duration),
}

/// Starts the job, kills it with SIGKILL at `moment`, and checks that it was killed (not
/// finished) and, for a kill during a write, that a torn checkpoint was left behind.
fn kill_at(args: &[String], ck: &Path, moment: Moment, pause_ms: u64, what: &str) {
    let mut child = spawn(args, Some(pause_ms));
    let deadline = Instant::now() + WAIT_TIMEOUT;
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: the job ended ({status:?}) before {moment:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (complete, torn) = checkpoints(ck);
        let now = match moment {
            Moment::AfterCheckpoint(n) => complete.last().is_some_and(|&s| s >= n),
            Moment::DuringWrite(n) => torn.iter().any(|&t| t >= n && !complete.contains(&t)),
            Moment::After(d) => start.elapsed() >= d,
        };
        if now {
            break;
        }
        assert!(Instant::now() < deadline, "{what}: {moment:?} never came");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("SIGKILL");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGKILL),
        "{what}: not killed: {:?}",
        out.status
    );
    if let Moment::DuringWrite(_) = moment {
        let (complete, torn) = checkpoints(ck);
        assert!(
            torn.iter().any(|t| !complete.contains(t)),
            "{what}: killed during a write but no torn checkpoint is left: {complete:?} {torn:?}"
        );
    }
}

/// One job to checkpoint: its arguments without outputs, and how to name its outputs.
struct Job {
    name: &'static str,
    args: Vec<String>,
    /// (flag, file name) of each output file.
    outputs: Vec<(&'static str, &'static str)>,
}

impl Job {
    fn with_outputs(&self, dir: &Path, tag: &str) -> (Vec<String>, Vec<PathBuf>) {
        let mut args = self.args.clone();
        let mut files = Vec::new();
        for (flag, file) in &self.outputs {
            let path = dir.join(format!("{tag}-{file}"));
            args.push(flag.to_string());
            args.push(path.to_str().unwrap().to_string());
            files.push(path);
        }
        args.push("--json".into());
        (args, files)
    }
}

/// A job's uninterrupted run, and a run of it with checkpoints to be started.
struct Runs {
    /// The report of the uninterrupted run.
    reference: serde_json::Value,
    /// The outputs of the uninterrupted run.
    ref_files: Vec<PathBuf>,
    /// The arguments of the run with checkpoints.
    args: Vec<String>,
    /// The outputs of the run with checkpoints.
    files: Vec<PathBuf>,
}

impl Job {
    /// Runs the job uninterrupted (its outputs named with `ref_tag`) and makes the arguments
    /// of a run with checkpoints in `ck` and `more` arguments (its outputs named with `tag`).
    fn runs(&self, dir: &Path, (ref_tag, tag): (&str, &str), ck: &Path, more: &[&str]) -> Runs {
        let (ref_args, ref_files) = self.with_outputs(dir, ref_tag);
        let reference = json(&run_ok(&ref_args, "uninterrupted run"));
        let (mut args, files) = self.with_outputs(dir, tag);
        args.extend(strings(&["--checkpoint-dir", ck.to_str().unwrap()]));
        args.extend(strings(more));
        Runs {
            reference,
            ref_files,
            args,
            files,
        }
    }
}

impl Runs {
    /// Asserts that the outputs of the run with checkpoints are those of the uninterrupted
    /// run, byte for byte.
    fn assert_same_outputs(&self, what: &str) {
        for (a, b) in self.ref_files.iter().zip(&self.files) {
            let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
            assert!(!x.is_empty(), "{what}: {a:?} is empty");
            assert!(
                x == y,
                "{what}: {b:?} differs from the uninterrupted run's {a:?}"
            );
        }
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn pagerank(layout: &[&str]) -> Job {
    let mut args = strings(&[
        "run",
        "pagerank",
        "--generate",
        "rmat:13:8",
        "--iterations",
        "30",
    ]);
    args.extend(strings(layout));
    Job {
        name: "pagerank",
        args,
        outputs: vec![("--out", "ranks.txt")],
    }
}

fn kmeans(layout: &[&str]) -> Job {
    let mut args = strings(&["run", "kmeans", "--generate", "blobs:20000:4:6", "--k", "6"]);
    args.extend(strings(layout));
    Job {
        name: "kmeans",
        args,
        outputs: vec![("--out", "centroids.csv"), ("--assign", "assign.txt")],
    }
}

/// Runs `job` uninterrupted, then kills a checkpointing run of it at each of `moments` in
/// turn (each kill resumes the previous one), resumes to the end, and compares the outputs
/// bitwise. Also checks that every resumed run continued from a checkpoint (not from the
/// start) where one was complete.
fn kill_and_resume(job: &Job, moments: &[Moment], every: u64, pause_ms: u64) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let every = every.to_string();
    let more = ["--checkpoint-every", &every, "--resume"];
    let runs = job.runs(dir.path(), ("ref", "resumed"), &ck, &more);
    let (args, files) = (&runs.args, &runs.files);
    for (i, &m) in moments.iter().enumerate() {
        let what = format!("{} kill {i} {m:?} ({:?})", job.name, job.args);
        kill_at(args, &ck, m, pause_ms, &what);
        for f in files {
            assert!(!f.exists(), "{what}: a killed job left output {f:?}");
        }
    }
    let before = checkpoints(&ck).0;
    let out = finish(spawn(args, None), "resume");
    let stderr = &out.stderr;
    assert!(out.code == Some(0), "resume failed: {stderr}");
    let report = json(&out.stdout);
    let newest = before.last().copied();
    assert_eq!(
        report["resumed_from_iteration"].as_f64(),
        newest.map(|s| s as f64),
        "{}: resumed from the wrong checkpoint (complete before: {before:?}); {stderr}",
        job.name
    );
    if let Some(s) = newest {
        assert!(
            stderr.contains(&format!("resuming after iteration {s}")),
            "{stderr}"
        );
    }
    assert_eq!(report["iterations"], runs.reference["iterations"]);
    runs.assert_same_outputs(job.name);
    report
}

/// [`kill_and_resume`] with the kills every configuration goes through ([`moments`]).
fn resumes(job: &Job, every: u64, pause_ms: u64) -> serde_json::Value {
    kill_and_resume(job, &moments(), every, pause_ms)
}

/// The kills every configuration goes through: after the first checkpoint, in the middle of
/// a later checkpoint's write, and twice at fixed delays.
fn moments() -> Vec<Moment> {
    vec![
        Moment::AfterCheckpoint(1),
        Moment::DuringWrite(3),
        Moment::After(Duration::from_millis(150)),
        Moment::After(Duration::from_millis(400)),
    ]
}

#[test]
fn pagerank_resumes_after_sigkill_at_two_ranks() {
    let report = resumes(&pagerank(&["--ranks", "2"]), 1, 100);
    assert!(report["checkpoints_written"].as_f64().unwrap() >= 1.0);
    // At least one checkpoint of the rank vector (8 bytes per vertex) since the resume.
    assert!(report["checkpoint_bytes"].as_f64().unwrap() >= 8.0 * 8192.0);
}

#[test]
fn pagerank_resumes_after_sigkill_with_more_ranks_than_cores_on_two_nodes() {
    resumes(&pagerank(&["--ranks", "5", "--nodes", "2"]), 2, 60);
}

#[test]
fn pagerank_resumes_after_sigkill_under_a_memory_budget() {
    resumes_under_a_budget(pagerank, &["--ranks", "4", "--nodes", "2"], "1M");
}

/// Kills and resumes `job` on `layout` with a memory budget that makes it spill.
fn resumes_under_a_budget(job: fn(&[&str]) -> Job, layout: &[&str], budget: &str) {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().to_str().unwrap();
    let job = job(&[layout, &["--mem-budget", budget, "--spill-dir", spill]].concat());
    let report = resumes(&job, 1, 60);
    assert!(
        report["spill_bytes_written"].as_f64().unwrap() > 0.0,
        "the budget did not make the job spill: {report}"
    );
}

#[test]
fn kmeans_resumes_after_sigkill_at_two_ranks() {
    let report = resumes(&kmeans(&["--ranks", "2"]), 1, 100);
    assert!(report["checkpoint_bytes"].as_f64().unwrap() > 0.0);
}

#[test]
fn kmeans_resumes_after_sigkill_with_more_ranks_than_cores_on_two_nodes() {
    resumes(&kmeans(&["--ranks", "5", "--nodes", "2"]), 3, 60);
}

#[test]
fn kmeans_resumes_after_sigkill_under_a_memory_budget() {
    resumes_under_a_budget(kmeans, &["--ranks", "3", "--nodes", "2"], "256K");
}

#[test]
fn kmeans_that_converges_resumes_from_its_last_checkpoint() {
    // Converges well before the iteration limit: the final checkpoint is of a converged run,
    // and resuming from it must not run another iteration.
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let mut job = kmeans(&["--ranks", "3"]);
    job.args = strings(&[
        "run",
        "kmeans",
        "--generate",
        "blobs:5000:3:4",
        "--k",
        "4",
        "--ranks",
        "3",
    ]);
    let mut runs = job.runs(dir.path(), ("ref", "ck"), &ck, &[]);
    let reference = runs.reference.clone();
    assert_eq!(reference["converged"].as_bool(), Some(true));
    let args = &mut runs.args;
    run_ok(args, "checkpointing run");
    args.push("--resume".into());
    let report = json(&run_ok(args, "resume of a finished run"));
    assert_eq!(
        report["resumed_from_iteration"].as_f64(),
        reference["iterations"].as_f64(),
        "{report}"
    );
    assert_eq!(report["iteration_seconds"].as_array().unwrap().len(), 0);
    assert_eq!(report["converged"].as_bool(), Some(true));
    runs.assert_same_outputs("resume of a finished run");
    // From the checkpoint before the last (the newest two are kept): the resumed iteration
    // must find that no point moves, as the uninterrupted one did.
    let last = reference["iterations"].as_f64().unwrap() as u64;
    assert_eq!(checkpoints(&ck).0, [last - 1, last]);
    std::fs::remove_dir_all(ck.join(format!("ckpt-{last}"))).unwrap();
    for f in &runs.files {
        std::fs::remove_file(f).unwrap();
    }
    let report = json(&run_ok(&runs.args, "resume before convergence"));
    assert_eq!(
        report["resumed_from_iteration"].as_f64(),
        Some((last - 1) as f64)
    );
    assert_eq!(report["iterations"], reference["iterations"], "{report}");
    assert_eq!(report["iteration_seconds"].as_array().unwrap().len(), 1);
    runs.assert_same_outputs("resume before convergence");
}

#[test]
fn pagerank_that_stops_at_its_tolerance_resumes_without_another_iteration() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let job = Job {
        name: "pagerank",
        args: strings(&[
            "run",
            "pagerank",
            "--generate",
            "rmat:10:4",
            "--iterations",
            "100",
            "--tolerance",
            "1e-6",
            "--ranks",
            "3",
        ]),
        outputs: vec![("--out", "ranks.txt")],
    };
    let mut runs = job.runs(dir.path(), ("ref", "ck"), &ck, &[]);
    let reference = &runs.reference;
    let stopped = reference["iterations"].as_f64().unwrap();
    assert!(stopped > 2.0 && stopped < 100.0, "{reference}");
    run_ok(&runs.args, "checkpointing run");
    runs.args.push("--resume".into());
    let report = json(&run_ok(&runs.args, "resume of a finished run"));
    assert_eq!(report["resumed_from_iteration"].as_f64(), Some(stopped));
    assert_eq!(report["iterations"].as_f64(), Some(stopped), "{report}");
    assert_eq!(report["final_l1_change"], runs.reference["final_l1_change"]);
    runs.assert_same_outputs("resume of a finished run");
}

/// Runs to the end and returns (exit code, stderr).
fn run_code(args: &[String]) -> (i32, String) {
    let out = finish(spawn(args, None), "run");
    (out.code.unwrap_or(-1), out.stderr)
}

#[test]
fn resuming_with_other_arguments_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck_s = ck.to_str().unwrap().to_string();
    let base = |extra: &[&str]| {
        let mut a = strings(&[
            "run",
            "pagerank",
            "--generate",
            "rmat:10:4",
            "--checkpoint-dir",
            &ck_s,
        ]);
        a.extend(strings(extra));
        if !extra.contains(&"--iterations") {
            a.extend(strings(&["--iterations", "4"]));
        }
        a
    };
    run_ok(&base(&["--ranks", "2"]), "first run");
    assert_eq!(checkpoints(&ck).0, [3, 4]);
    for (extra, expect) in [
        (
            &["--ranks", "2", "--damping", "0.9", "--resume"][..],
            "damping=9e-1",
        ),
        (
            &["--ranks", "2", "--iterations", "5", "--resume"][..],
            "iterations=5",
        ),
        (&["--ranks", "3", "--resume"][..], "ranks=3"),
        (&["--ranks", "2", "--nodes", "2", "--resume"][..], "nodes=2"),
    ] {
        let (code, stderr) = run_code(&base(extra));
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert!(
            stderr.contains("was written by `pagerank input=rmat:10:4:1 iterations=4")
                && stderr.contains("this run is `pagerank")
                && stderr.contains(expect),
            "{extra:?}: {stderr}"
        );
    }
    // Another algorithm in the same directory.
    let (code, stderr) = run_code(&strings(&[
        "run",
        "kmeans",
        "--generate",
        "blobs:1000:2:3",
        "--k",
        "3",
        "--ranks",
        "2",
        "--checkpoint-dir",
        &ck_s,
        "--resume",
    ]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("this run is `kmeans"), "{stderr}");
    // A new job (no --resume) does not overwrite another job's checkpoints.
    let (code, stderr) = run_code(&base(&["--ranks", "2"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("already holds checkpoint 4"), "{stderr}");
    assert_eq!(checkpoints(&ck).0, [3, 4]);
    // The same arguments resume (here: from the last iteration, nothing left to do).
    let report = json(&run_ok(
        &base(&["--ranks", "2", "--resume", "--json"]),
        "resume",
    ));
    assert_eq!(report["resumed_from_iteration"].as_f64(), Some(4.0));
    // Options that need a directory, an unusable directory, or an engine without
    // checkpoints are usage errors.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("ck");
    for args in [
        strings(&[
            "run",
            "pagerank",
            "--generate",
            "rmat:6:4",
            "--checkpoint-dir",
            file.to_str().unwrap(),
        ]),
        strings(&[
            "run",
            "kmeans",
            "--checkpoint-dir",
            under_file.to_str().unwrap(),
        ]),
        strings(&["run", "pagerank", "--generate", "rmat:6:4", "--resume"]),
        strings(&["run", "kmeans", "--checkpoint-every", "2"]),
        strings(&[
            "run",
            "kmeans",
            "--checkpoint-dir",
            &ck_s,
            "--checkpoint-every",
            "0",
        ]),
        strings(&[
            "run",
            "pagerank",
            "--generate",
            "rmat:6:4",
            "--engine",
            "mapreduce",
            "--checkpoint-dir",
            &ck_s,
        ]),
    ] {
        let (code, stderr) = run_code(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
}

#[test]
fn a_resume_with_no_checkpoint_starts_from_the_beginning_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("none");
    let out = finish(
        spawn(
            &strings(&[
                "run",
                "kmeans",
                "--generate",
                "blobs:2000:2:3",
                "--k",
                "3",
                "--ranks",
                "2",
                "--checkpoint-dir",
                ck.to_str().unwrap(),
                "--resume",
                "--json",
            ]),
            None,
        ),
        "resume without checkpoints",
    );
    let stderr = &out.stderr;
    assert!(out.code == Some(0), "{stderr}");
    assert!(
        stderr.contains("no complete checkpoint") && stderr.contains("starting from the beginning"),
        "{stderr}"
    );
    let report = json(&out.stdout);
    assert!(report["resumed_from_iteration"].is_null(), "{report}");
    assert!(report["checkpoints_written"].as_f64().unwrap() >= 1.0);
}

#[test]
fn a_damaged_newest_checkpoint_is_skipped_for_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let job = pagerank(&["--ranks", "3", "--nodes", "2"]);
    let mut runs = job.runs(dir.path(), ("ref", "ck"), &ck, &[]);
    run_ok(&runs.args, "checkpointing run");
    assert_eq!(checkpoints(&ck).0, [29, 30]);
    // One flipped byte in one rank's part of the newest checkpoint.
    let part = ck.join("ckpt-30").join("rank-2");
    let mut bytes = std::fs::read(&part).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&part, bytes).unwrap();
    std::fs::remove_file(&runs.files[0]).unwrap();
    runs.args.push("--resume".into());
    let out = finish(spawn(&runs.args, None), "resume");
    let stderr = &out.stderr;
    assert!(out.code == Some(0), "{stderr}");
    assert!(
        stderr.contains("checkpoint 30 in") && stderr.contains("is damaged; skipped"),
        "{stderr}"
    );
    let report = json(&out.stdout);
    assert_eq!(report["resumed_from_iteration"].as_f64(), Some(29.0));
    assert_eq!(report["iteration_seconds"].as_array().unwrap().len(), 1);
    runs.assert_same_outputs("resume after a damaged checkpoint");
}

fn pagerank_mr(layout: &[&str]) -> Job {
    let mut job = pagerank(layout);
    job.name = "pagerank-mapreduce";
    job.args.extend(strings(&["--engine", "mapreduce"]));
    job
}

/// A path over shuffled ids (many rounds of star operations) plus some random edges and
/// isolated self loops, written to `dir`.
fn cc_graph(dir: &Path) -> PathBuf {
    let n = 6000u64;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut perm: Vec<u64> = (0..n).collect();
    for i in (1..n as usize).rev() {
        perm.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    let mut text = String::new();
    for i in 0..n as usize / 2 {
        text.push_str(&format!("{} {}\n", perm[i], perm[i + 1]));
    }
    for _ in 0..n / 2 {
        let (u, v) = (next() % n, next() % n);
        if u >= n / 2 && v >= n / 2 {
            text.push_str(&format!("{} {}\n", perm[u as usize], perm[v as usize]));
        }
    }
    for v in (n..n + 40).step_by(3) {
        text.push_str(&format!("{v} {v}\n"));
    }
    let path = dir.join("graph.txt");
    std::fs::write(&path, text).unwrap();
    path
}

fn cc(graph: &Path, layout: &[&str]) -> Job {
    let mut args = strings(&[
        "run",
        "cc",
        "--engine",
        "mapreduce",
        "--input",
        graph.to_str().unwrap(),
    ]);
    args.extend(strings(layout));
    Job {
        name: "cc",
        args,
        outputs: vec![("--out", "labels.txt")],
    }
}

#[test]
fn mapreduce_pagerank_resumes_after_sigkill() {
    let report = resumes(&pagerank_mr(&["--ranks", "2"]), 1, 100);
    assert!(report["checkpoints_written"].as_f64().unwrap() >= 1.0);
    // With fault tolerance on, more ranks than cores on two nodes, every 2 iterations.
    resumes(
        &pagerank_mr(&["--ranks", "5", "--nodes", "2", "--fault-tolerance"]),
        2,
        60,
    );
}

#[test]
fn cc_resumes_after_sigkill_and_survives_a_loss_after_the_resume() {
    let dir = tempfile::tempdir().unwrap();
    let graph = cc_graph(dir.path());
    let moments = [
        Moment::AfterCheckpoint(1),
        Moment::DuringWrite(2),
        Moment::After(Duration::from_millis(150)),
    ];
    for layout in [&["--ranks", "3"][..], &["--ranks", "4", "--nodes", "2"]] {
        let report = kill_and_resume(&cc(&graph, layout), &moments, 1, 100);
        assert!(report["checkpoints_written"].as_f64().unwrap() >= 1.0);
    }
    // A resumed job reads its edges from the checkpoint: with fault tolerance they are
    // replicated again, so a node lost in the first operation after the resume is
    // recovered and the labels are those of an uninterrupted run.
    let job = cc(&graph, &["--ranks", "4", "--nodes", "2"]);
    let ck = dir.path().join("ck-ft");
    let mut runs = job.runs(dir.path(), ("ft-ref", "ft"), &ck, &["--resume"]);
    kill_at(
        &runs.args,
        &ck,
        Moment::AfterCheckpoint(2),
        100,
        "cc before the loss",
    );
    runs.args
        .extend(strings(&["--inject-failure", "node:1@op:1"]));
    let report = json(&run_ok(&runs.args, "resume with a loss"));
    assert!(
        report["resumed_from_iteration"].as_f64().unwrap() >= 2.0,
        "{report}"
    );
    assert_eq!(
        report["fault_tolerance"]["recoveries"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(
        sorted_lines(&runs.files[0]),
        sorted_lines(&runs.ref_files[0])
    );
}
