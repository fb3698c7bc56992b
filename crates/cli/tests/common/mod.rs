//! The harness of the CLI tests: running a command with a time limit (its exit code, output,
//! and peak RSS from the kernel's accounting of the child), the Python references, temporary
//! files and the checks every test of bad input makes.
#![allow(dead_code)] // every test file uses a part of it

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The `spillway` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_spillway");

/// Limit for any one spawned command (the inputs are small).
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// What a command's standard input is.
#[derive(Clone)]
enum Input {
    Null,
    Bytes(Vec<u8>),
    File(PathBuf),
}

/// Where a command's standard output goes.
#[derive(Clone)]
enum Output {
    Pipe,
    File(PathBuf),
    /// A pipe whose reading end is closed before the command writes.
    Closed,
    /// No standard output at all: descriptor 1 closed (`>&-`).
    NoDescriptor,
}

/// A command to run with a time limit.
#[derive(Clone)]
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    stdin: Input,
    stdout: Output,
    timeout: Duration,
}

/// What a finished command left.
pub struct Ran {
    pub line: String,
    /// The exit code (`None` if a signal ended it).
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stdout_bytes: Vec<u8>,
    pub stderr: String,
    /// Peak resident set size of the child in bytes (wait4's ru_maxrss).
    pub peak_rss: u64,
}

impl Cmd {
    pub fn new(program: impl AsRef<OsStr>) -> Cmd {
        Cmd {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            stdin: Input::Null,
            stdout: Output::Pipe,
            timeout: TIMEOUT,
        }
    }

    /// The `spillway` binary under test.
    pub fn spillway() -> Cmd {
        Cmd::new(BIN)
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cmd {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Cmd {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// `--ranks R --nodes K --running X`.
    pub fn layout(self, layout: (u32, u32, u32)) -> Cmd {
        self.args(layout_args(layout))
    }

    /// `--mem-budget SIZE`, if a size is given.
    pub fn mem_budget(self, budget: Option<&str>) -> Cmd {
        self.args(mem_budget_args(budget))
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cmd {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Cmd {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// Standard input from these bytes (written by a thread, so a large input cannot block).
    pub fn stdin_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Cmd {
        self.stdin = Input::Bytes(bytes.into());
        self
    }

    /// Standard input from a file.
    pub fn stdin_file(mut self, path: impl Into<PathBuf>) -> Cmd {
        self.stdin = Input::File(path.into());
        self
    }

    /// Standard output into a file (opened for writing, e.g. /dev/full).
    pub fn stdout_file(mut self, path: impl Into<PathBuf>) -> Cmd {
        self.stdout = Output::File(path.into());
        self
    }

    /// Standard output into a pipe that nobody reads (its read end closed before the command
    /// starts, so that even a first write fails).
    pub fn stdout_closed(mut self) -> Cmd {
        self.stdout = Output::Closed;
        self
    }

    /// Standard output closed (`>&-`): the command starts without descriptor 1.
    pub fn stdout_descriptor_closed(mut self) -> Cmd {
        self.stdout = Output::NoDescriptor;
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Cmd {
        self.timeout = timeout;
        self
    }

    pub fn line(&self) -> String {
        let mut line = self.program.to_string_lossy().into_owned();
        for a in &self.args {
            line.push(' ');
            line.push_str(&a.to_string_lossy());
        }
        line
    }

    /// Starts the command (its stdin, stdout and stderr as configured; stdout and stderr
    /// piped unless redirected).
    pub fn spawn(&self) -> std::io::Result<Child> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).stderr(Stdio::piped());
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.stdin(match &self.stdin {
            Input::Null => Stdio::null(),
            Input::Bytes(_) => Stdio::piped(),
            Input::File(p) => Stdio::from(std::fs::File::open(p)?),
        });
        let stdout = match &self.stdout {
            Output::Pipe => Stdio::piped(),
            Output::Closed => {
                // Closing the read end after the spawn raced with a fast command, whose whole
                // output could fit the pipe before the read end went.
                let (reader, writer) = std::io::pipe()?;
                drop(reader);
                Stdio::from(writer)
            }
            Output::File(p) => Stdio::from(std::fs::OpenOptions::new().write(true).open(p)?),
            Output::NoDescriptor => {
                use std::os::unix::process::CommandExt;
                // SAFETY: close(2) is async-signal-safe and touches no memory of the parent.
                unsafe {
                    cmd.pre_exec(|| {
                        libc::close(1);
                        Ok(())
                    })
                };
                Stdio::null()
            }
        };
        cmd.stdout(stdout);
        let mut child = cmd.spawn()?;
        if let (Input::Bytes(bytes), Some(mut w)) = (&self.stdin, child.stdin.take()) {
            let bytes = bytes.clone();
            thread::spawn(move || {
                let _ = w.write_all(&bytes);
            });
        }
        Ok(child)
    }

    /// Runs the command; `Err` only if it cannot be started. Panics if it runs past its time
    /// limit.
    pub fn try_run(self) -> std::io::Result<Ran> {
        let child = self.spawn()?;
        Ok(finish(child, self.timeout, &self.line()))
    }

    pub fn run(self) -> Ran {
        let line = self.line();
        self.try_run()
            .unwrap_or_else(|e| panic!("cannot start `{line}`: {e}"))
    }

    /// Runs the command and asserts that it succeeded without a panic.
    pub fn ok(self) -> Ran {
        ok(self.run())
    }
}

/// Waits for a started command (reading its piped output meanwhile) and returns what it left;
/// kills it and panics after `timeout`.
pub fn finish(mut child: Child, timeout: Duration, line: &str) -> Ran {
    let drain = |r: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let (status, peak_rss) = wait_measured(&mut child, timeout, line);
    let stdout_bytes = out.join().expect("stdout reader");
    Ran {
        line: line.to_string(),
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        stdout: String::from_utf8_lossy(&stdout_bytes).into_owned(),
        stdout_bytes,
        stderr: String::from_utf8_lossy(&err.join().expect("stderr reader")).into_owned(),
        peak_rss,
    }
}

/// Waits for `child` (polling, so that the time limit holds), returning its wait status and
/// its peak RSS in bytes; kills it and panics after `timeout`.
pub fn wait_measured(child: &mut Child, timeout: Duration, what: &str) -> (i32, u64) {
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + timeout;
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waiting for our own child with valid pointers to locals.
        let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if rc == pid {
            return (status, usage.ru_maxrss as u64 * 1024);
        }
        assert!(rc == 0, "wait4 failed for `{what}`");
        if Instant::now() > deadline {
            let _ = child.kill();
            // SAFETY: reaping our own killed child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            panic!("`{what}` ran longer than {timeout:?} and was killed");
        }
        thread::sleep(Duration::from_millis(5));
    }
}

impl Ran {
    /// A numeric field of the JSON object on stdout.
    pub fn number(&self, key: &str) -> f64 {
        self.json()[key]
            .as_f64()
            .unwrap_or_else(|| panic!("no number {key}\n{self}"))
    }

    /// The one JSON object on stdout.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not exactly one JSON value: {e}\n{self}"))
    }
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "command: {}\nexit code: {:?} (signal {:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.line, self.code, self.signal, self.stdout, self.stderr
        )
    }
}

/// Runs the CLI with `args`.
pub fn spillway<S: AsRef<OsStr>>(args: &[S]) -> Ran {
    Cmd::spillway().args(args).run()
}

/// Asserts that `ran` succeeded without a panic.
pub fn ok(ran: Ran) -> Ran {
    assert_eq!(ran.code, Some(0), "command failed\n{ran}");
    assert!(!ran.stderr.contains("panicked"), "panic\n{ran}");
    ran
}

/// `--ranks R --nodes K --running X`.
pub fn layout_args((ranks, nodes, running): (u32, u32, u32)) -> Vec<String> {
    vec![
        "--ranks".into(),
        ranks.to_string(),
        "--nodes".into(),
        nodes.to_string(),
        "--running".into(),
        running.to_string(),
    ]
}

/// `--mem-budget SIZE`, or nothing without a size.
pub fn mem_budget_args(budget: Option<&str>) -> Vec<&str> {
    budget.map_or_else(Vec::new, |b| vec!["--mem-budget", b])
}

/// Runs the CLI with `args` and returns (exit code, stdout, stderr, peak RSS in bytes).
pub fn run_measured_in(args: &[&str], _dir: &Path) -> (i32, String, String, u64) {
    let ran = Cmd::spillway().args(args).run();
    (ran.code.unwrap_or(-1), ran.stdout, ran.stderr, ran.peak_rss)
}

/// A flag of the one JSON object on `stdout`.
pub fn json_bool(stdout: &str, key: &str) -> bool {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    v[key]
        .as_bool()
        .unwrap_or_else(|| panic!("no flag {key} in {stdout}"))
}

/// The sorted names in a directory, as strings.
pub fn names(dir: &Path) -> Vec<String> {
    listing(dir)
        .into_iter()
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

/// A numeric field of the one JSON object on `stdout`.
pub fn json_field(stdout: &str, key: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no numeric field {key} in {stdout}"))
}

// ---------------------------------------------------------------------------------------------
// Python references
// ---------------------------------------------------------------------------------------------

/// The Python interpreter for the reference scripts, or `None` (after saying so on the real
/// stderr, past the test harness's capture) when `SPILLWAY_SKIP_PYTHON=1`.
pub fn python() -> Option<String> {
    if std::env::var_os("SPILLWAY_SKIP_PYTHON").is_some_and(|v| v == "1") {
        let test = thread::current().name().unwrap_or("test").to_string();
        let note = format!("{test}: SKIPPED (SPILLWAY_SKIP_PYTHON=1: Python reference not run)\n");
        let _ = std::io::stderr().write_all(note.as_bytes());
        return None;
    }
    Some(std::env::var("SPILLWAY_PYTHON").unwrap_or_else(|_| "python3".into()))
}

/// A script of `tests/reference/`.
pub fn reference_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/reference")
        .join(name)
}

/// Runs a reference script on `args` and asserts that it accepted the result, unless the
/// Python checks are skipped ([`python`]).
pub fn check_reference<S: AsRef<OsStr>>(script: &str, args: &[S]) {
    if let Some(py) = python() {
        check_with_python(&py, script, args);
    }
}

/// Runs a reference script and asserts that it accepted the result; returns its stdout.
pub fn check_with_python<S: AsRef<OsStr>>(python: &str, script: &str, args: &[S]) -> String {
    let script = reference_script(script);
    assert!(script.is_file(), "missing {}", script.display());
    let cmd = Cmd::new(python).arg(&script).args(args);
    let line = cmd.line();
    let ran = cmd.try_run().unwrap_or_else(|e| {
        panic!(
            "cannot run the Python interpreter '{python}' for `{line}`: {e}\n\
             Set SPILLWAY_PYTHON to a Python with numpy, scipy, networkx and scikit-learn, \
             or SPILLWAY_SKIP_PYTHON=1 to skip these checks."
        )
    });
    let hint = if ran.code == Some(3) {
        "\n(a Python module is missing: set SPILLWAY_PYTHON to a Python with numpy, scipy, \
         networkx and scikit-learn, or SPILLWAY_SKIP_PYTHON=1 to skip these checks)"
    } else {
        ""
    };
    assert_eq!(ran.code, Some(0), "reference check failed\n{ran}{hint}");
    println!("{}", ran.stdout);
    ran.stdout
}

// ---------------------------------------------------------------------------------------------
// Test data
// ---------------------------------------------------------------------------------------------

/// A 64-bit linear congruential generator (Knuth's MMIX constants), independent of spillway's
/// generators.
pub struct Lcg(pub u64);

impl Lcg {
    /// The next state.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0
    }

    /// The next state's bits above the lowest `shift`.
    pub fn bits(&mut self, shift: u32) -> u64 {
        self.next_u64() >> shift
    }

    /// Uniform in `0..n` (the high bits; `n` is small).
    pub fn below(&mut self, n: usize) -> usize {
        (self.bits(32) % n as u64) as usize
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.bits(11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit(); // (0, 1]
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

pub fn tempdir() -> TempDir {
    tempfile::tempdir().expect("temporary directory")
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Writes `n` points of `dim` values as CSV with round-trip formatting: the centres `k` draws
/// each in `[-20, 20)^dim`, point `i` within 1.5 of centre `i % k` in every value; `unit`
/// draws a number in `[0, 1)` from the generator (seed 11).
pub fn write_points(path: &Path, (n, dim, k): (usize, usize, usize), unit: fn(&mut Lcg) -> f64) {
    let mut rng = Lcg(11);
    let centres: Vec<Vec<f64>> = (0..k)
        .map(|_| (0..dim).map(|_| -20.0 + 40.0 * unit(&mut rng)).collect())
        .collect();
    let mut text = String::new();
    for i in 0..n {
        let row: Vec<String> = centres[i % k]
            .iter()
            .map(|x| format!("{:?}", x + 3.0 * (unit(&mut rng) - 0.5)))
            .collect();
        text.push_str(&row.join(","));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// Writes `values` as raw little-endian `u64`.
pub fn write_u64s(path: &Path, values: &[u64]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

/// The raw little-endian `u64` values of a file.
pub fn read_u64s(path: &Path) -> Vec<u64> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Writes `values` as raw little-endian `f64`.
pub fn write_f64s(path: &Path, values: &[f64]) {
    let bits: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
    write_u64s(path, &bits);
}

/// The raw little-endian `f64` values of a file.
pub fn read_f64s(path: &Path) -> Vec<f64> {
    read_u64s(path).into_iter().map(f64::from_bits).collect()
}

/// The L1 distance between two vectors of the same length.
pub fn l1(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "different lengths");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

/// The largest absolute difference between the values of `a` and `b`, pair by pair.
pub fn max_abs_diff<'a>(
    a: impl IntoIterator<Item = &'a f64>,
    b: impl IntoIterator<Item = &'a f64>,
) -> f64 {
    a.into_iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// The lines of a text file, sorted.
pub fn sorted_lines(path: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// The names in a directory.
pub fn listing(dir: &Path) -> BTreeSet<OsString> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect()
}

/// Runs `cmd` (whose outputs go to `dir`) and asserts a clean rejection: exit code 2, no
/// panic, stderr naming `file` (and `file:LINE:` when `line` is given) and containing
/// `reason`, and no new file in `dir` (neither the output nor a temporary file).
pub fn assert_rejected(
    dir: &Path,
    cmd: Cmd,
    file: Option<&Path>,
    line: Option<u64>,
    reason: &str,
) -> Ran {
    let before = listing(dir);
    let ran = cmd.run();
    assert_eq!(ran.code, Some(2), "expected exit code 2\n{ran}");
    assert!(!ran.stderr.contains("panicked"), "panic\n{ran}");
    assert!(ran.stderr.contains("error"), "no error message\n{ran}");
    if let Some(file) = file {
        let name = file.display().to_string();
        assert!(
            ran.stderr.contains(&name),
            "stderr does not name {name}\n{ran}"
        );
        if let Some(line) = line {
            let at = format!("{name}:{line}:");
            assert!(ran.stderr.contains(&at), "stderr does not say {at}\n{ran}");
        }
    }
    assert!(
        ran.stderr.to_lowercase().contains(&reason.to_lowercase()),
        "stderr does not give the reason {reason:?}\n{ran}"
    );
    let after = listing(dir);
    let new: Vec<_> = after.difference(&before).collect();
    assert!(new.is_empty(), "files left behind: {new:?}\n{ran}");
    ran
}

/// What Open MPI 5's launcher prints when it fails before it starts any process (now and then
/// on a loaded machine; seen in a fresh-clone test run): nothing of ours ran.
pub const LAUNCH_FAILED: &str = "The PMIx server's listener thread failed to start";

/// Runs `launch` once more (at most three times in all) while the launcher failed to start
/// (`stderr` of its result says [`LAUNCH_FAILED`]); the last result either way.
pub fn relaunching<R>(mut launch: impl FnMut() -> R, stderr: impl Fn(&R) -> &str) -> R {
    for _ in 1..3 {
        let ran = launch();
        if !stderr(&ran).contains(LAUNCH_FAILED) {
            return ran;
        }
        eprintln!("the MPI launcher failed to start (\"{LAUNCH_FAILED}\"): launching again");
    }
    launch()
}
