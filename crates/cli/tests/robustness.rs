//! The CLI at its edges: outputs that are devices, FIFOs or symbolic links, signals, a closed
//! stdout, absurd arguments, and input that would need more memory than there is.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::{mem_budget_args, names as listing, spillway as run, Cmd};

/// A 3-cycle: every vertex ends with rank 1/3.
fn write_cycle(dir: &Path) -> std::path::PathBuf {
    let g = dir.join("cycle.txt");
    std::fs::write(&g, "0 1\n1 2\n2 0\n").unwrap();
    g
}

#[test]
fn outputs_to_a_device_a_fifo_and_a_symlink_write_through_and_stay_what_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let g = write_cycle(dir.path());
    let g = g.to_str().unwrap();

    // PageRank of the cycle, written to `out`.
    let pagerank_to = |out: &str| run(&["run", "pagerank", "--input", g, "--out", out]);
    let out = pagerank_to("/dev/null");
    assert!(out.code == Some(0), "{out}");
    let meta = std::fs::metadata("/dev/null").unwrap();
    assert!(meta.file_type().is_char_device(), "/dev/null was replaced");

    // A FIFO with a reader: the ranks are written through it, the FIFO stays.
    let fifo = dir.path().join("ranks.fifo");
    mkfifo(&fifo);
    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::fs::File::open(&reader_path)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    });
    let out = pagerank_to(fifo.to_str().unwrap());
    assert!(out.code == Some(0), "{out}");
    let text = reader.join().unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (v, line) in lines.iter().enumerate() {
        let mut parts = line.split_whitespace();
        assert_eq!(parts.next(), Some(v.to_string().as_str()));
        let r: f64 = parts.next().unwrap().parse().unwrap();
        assert!((r - 1.0 / 3.0).abs() < 1e-12, "{line}");
    }
    let meta = std::fs::symlink_metadata(&fifo).unwrap();
    assert!(meta.file_type().is_fifo(), "the FIFO was replaced");

    // A symbolic link: its target gets the output, the link stays a link.
    let target = dir.path().join("real.txt");
    let link = dir.path().join("link.txt");
    std::os::unix::fs::symlink("real.txt", &link).unwrap();
    let out = pagerank_to(link.to_str().unwrap());
    assert!(out.code == Some(0), "{out}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap().lines().count(), 3);
    // No temporary file is left next to the outputs.
    assert_eq!(
        listing(dir.path()),
        ["cycle.txt", "link.txt", "ranks.fifo", "real.txt"]
    );
}

/// Sends `signal` (called `name`) to `child` and checks that it ends within 30 s with status
/// 128 + signal and one line on stderr naming the signal.
fn signal_and_expect_one_line(child: &mut std::process::Child, signal: i32, name: &str) {
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("the job did not end after {name}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(128 + signal), "{name}: {err}");
    assert!(err.contains(name), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line on stderr: {err}");
}

/// Starts `cmd` (its standard output closed) and gives it `time` to get going.
fn started(cmd: Cmd, time: Duration) -> std::process::Child {
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    std::thread::sleep(time);
    child
}

/// Starts an out-of-core job, sends `signal` once it runs, and checks the exit code and that
/// neither its spill directory nor its output directory holds anything afterwards.
fn interrupt_with(signal: i32, name: &str) {
    let spill = tempfile::tempdir().unwrap();
    let outdir = tempfile::tempdir().unwrap();
    let out = outdir.path().join("ranks.txt");
    let pagerank = ["run", "pagerank", "--generate", "rmat:18:16"];
    let budget = ["--ranks", "16", "--mem-budget", "16M"];
    let long = ["--iterations", "100000", "--spill-dir"];
    let cmd = Cmd::spillway()
        .args(pagerank)
        .args(budget)
        .args(long)
        .arg(spill.path());
    let mut child = started(cmd.arg("--out").arg(&out), Duration::from_millis(2500));
    signal_and_expect_one_line(&mut child, signal, name);
    assert!(listing(spill.path()).is_empty(), "spill files left");
    assert!(listing(outdir.path()).is_empty(), "output files left");
}

#[test]
fn sigint_and_sigterm_end_a_job_cleanly_with_130_and_143() {
    interrupt_with(libc::SIGINT, "SIGINT");
    interrupt_with(libc::SIGTERM, "SIGTERM");
}

#[test]
fn a_closed_stdout_ends_the_program_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let g = write_cycle(dir.path());
    // Close the reading end before the report is written.
    let out = Cmd::spillway()
        .args(["run", "pagerank", "--input", g.to_str().unwrap()])
        .stdout_closed()
        .run();
    assert!(!out.stderr.contains("panicked"), "{out}");
    assert_eq!(out.code, Some(1), "{out}");
    // A full device is an error with a message, not a panic.
    let full = Cmd::spillway()
        .args(["run", "pagerank", "--input", g.to_str().unwrap()])
        .stdout_file("/dev/full")
        .run();
    assert_eq!(full.code, Some(1), "{full}");
    assert!(full.stderr.contains("No space left"), "{full}");
    assert!(!full.stderr.contains("panicked"), "{full}");
}

#[test]
fn a_huge_vertex_id_is_refused_before_anything_that_large_is_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("huge.txt");
    // Line 3 holds the id again: the refusal names the first line that holds it.
    std::fs::write(&g, "0 1\n1 4000000000\n4000000000 0\n2 0\n").unwrap();
    // Every engine whose state grows with the largest id (PageRank's direct and MapReduce
    // engines, the union-find forests of direct CC), with and without a memory budget.
    let jobs: [&[&str]; 3] = [
        &["pagerank"],
        &["pagerank", "--engine", "mapreduce"],
        &["cc", "--engine", "direct"],
    ];
    // Three ranks: the line is counted across the ranks' parts of the file.
    for (job, budget) in jobs.iter().flat_map(|j| [(j, None), (j, Some("64M"))]) {
        let mut args = vec!["run"];
        args.extend_from_slice(job);
        args.extend(["--input", g.to_str().unwrap(), "--ranks", "3"]);
        args.extend(mem_budget_args(budget));
        let ran = run(&args);
        let (err, rss) = (&ran.stderr, ran.peak_rss);
        assert_eq!(ran.code, Some(2), "{ran}");
        let at = format!("{}:2:", g.display());
        assert!(err.contains(&at), "{err}");
        assert!(err.contains("vertex id 4000000000"), "{err}");
        assert!(
            err.contains("GiB"),
            "says how much memory it would need: {err}"
        );
        assert!(rss < 512 << 20, "peak RSS {} MiB", rss >> 20);
    }
    assert_eq!(listing(dir.path()), ["huge.txt"]);
}

#[test]
fn absurd_arguments_and_unusable_paths_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let g = write_cycle(dir.path());
    let g = g.to_str().unwrap();
    let missing = dir.path().join("no/such/dir");
    let missing = missing.to_str().unwrap();
    let file_not_dir = g;
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--mem-budget", "1K"], "less than one page per rank"),
        (
            vec!["--mem-budget", "5T"],
            "more than this machine's memory",
        ),
        (vec!["--mem-budget", "lots"], "--mem-budget"),
        (vec!["--stack-size", "4K"], "stack size"),
        (vec!["--spill-dir", missing], "--spill-dir"),
        (vec!["--spill-dir", file_not_dir], "not a directory"),
        (
            vec!["--out", dir.path().to_str().unwrap()],
            "is a directory",
        ),
        (vec!["--policy", "sometimes"], "invalid value"),
    ];
    for (extra, reason) in cases {
        let mut args = vec!["run", "pagerank", "--input", g];
        args.extend(extra.iter().copied());
        let out = run(&args);
        let err = &out.stderr;
        assert_eq!(out.code, Some(2), "{extra:?}: {err}");
        assert!(err.contains(reason), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = run(&[
        "run",
        "pagerank",
        "--input",
        g,
        "--out",
        &format!("{missing}/ranks.txt"),
    ]);
    assert_eq!(out.code, Some(2));
}

fn mkfifo(path: &Path) {
    let rc = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(rc.success(), "mkfifo {}", path.display());
}

/// Standard input and a FIFO give the same output as the file itself, for PageRank and
/// connected components at two layouts.
#[test]
fn standard_input_and_a_fifo_give_the_output_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("graph.txt");
    let ok = run(&[
        "gen",
        "rmat",
        "--scale",
        "10",
        "--edge-factor",
        "4",
        "--out",
        g.to_str().unwrap(),
    ]);
    assert_eq!(ok.code, Some(0), "{ok}");
    let text = std::fs::read(&g).unwrap();
    for job in ["pagerank", "cc"] {
        for ranks in ["1", "3"] {
            let out = |name: &str| dir.path().join(format!("{job}-{ranks}-{name}.txt"));
            let base = ["run", job, "--ranks", ranks];
            let from_file = Cmd::spillway()
                .args(base)
                .args(["--input", g.to_str().unwrap(), "--out"])
                .arg(out("file"))
                .run();
            assert_eq!(from_file.code, Some(0), "{from_file}");
            let from_stdin = Cmd::spillway()
                .args(base)
                .args(["--input", "-", "--out"])
                .arg(out("stdin"))
                .stdin_file(&g)
                .run();
            assert_eq!(from_stdin.code, Some(0), "{from_stdin}");
            let fifo = dir.path().join(format!("{job}-{ranks}.fifo"));
            mkfifo(&fifo);
            let (writer_path, bytes) = (fifo.clone(), text.clone());
            let writer = std::thread::spawn(move || std::fs::write(&writer_path, bytes));
            let from_fifo = Cmd::spillway()
                .args(base)
                .args(["--input", fifo.to_str().unwrap(), "--out"])
                .arg(out("fifo"))
                .timeout(Duration::from_secs(60))
                .run();
            assert_eq!(from_fifo.code, Some(0), "{from_fifo}");
            writer.join().unwrap().unwrap();
            let expected = std::fs::read(out("file")).unwrap();
            assert!(!expected.is_empty());
            assert!(
                std::fs::read(out("stdin")).unwrap() == expected,
                "{job} at {ranks} ranks: standard input gave another output"
            );
            assert!(
                std::fs::read(out("fifo")).unwrap() == expected,
                "{job} at {ranks} ranks: the FIFO gave another output"
            );
        }
    }
}

/// SIGINT while the job waits for a writer on its input FIFO ends it with 130 and one line,
/// leaving no output behind.
#[test]
fn sigint_while_waiting_on_an_input_fifo_ends_with_130() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("in.fifo");
    mkfifo(&fifo);
    let out = dir.path().join("ranks.txt");
    let cmd = Cmd::spillway()
        .args(["run", "pagerank", "--input"])
        .arg(&fifo);
    let mut child = started(cmd.arg("--out").arg(&out), Duration::from_millis(1000));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the job should wait for a writer"
    );
    signal_and_expect_one_line(&mut child, libc::SIGINT, "SIGINT");
    assert_eq!(listing(dir.path()), ["in.fifo"]);
}
