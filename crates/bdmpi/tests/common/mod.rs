//! What the tests of C programs share: building a program against this crate's header and
//! `libbdmpi`, running a command with a time limit, running `bdmprun` in a fresh `-wd`, and the
//! layouts every program runs at.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn bdmprun() -> &'static str {
    env!("CARGO_BIN_EXE_bdmprun")
}

/// The directory of the `libbdmpi.so` built with this test (target/<profile>/deps, or the
/// profile directory).
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable");
        let deps = exe.parent().expect("deps directory");
        for dir in [deps, deps.parent().expect("profile directory")] {
            if dir.join("libbdmpi.so").exists() {
                return dir.to_path_buf();
            }
        }
        panic!(
            "libbdmpi.so not found next to {} (cargo build -p spillway-bdmpi)",
            exe.display()
        );
    })
}

/// A directory of this test process for the programs it builds: tests run in parallel
/// processes and must not write one executable while another runs it.
pub fn out_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("bdmpi-c")
        .join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds once per test process the executable `exe` (in [`out_dir`]) with `make`, which
/// returns the command doing it.
pub fn build_once(exe: &str, make: impl FnOnce(&Path) -> Command) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(k, _)| k == exe) {
        return p.clone();
    }
    let path = out_dir().join(exe);
    let mut cmd = make(&path);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(status.success(), "building {exe} failed: {cmd:?}");
    built.push((exe.to_string(), path.clone()));
    path
}

/// Compiles the C program `src` with the system C compiler against this crate's header
/// (`-Wall -Wextra -Werror`) into `exe`, linked with `libbdmpi.so`, or `libbdmpi.a` when
/// `static_lib`.
pub fn build_with_libbdmpi(src: &Path, exe: &str, static_lib: bool) -> PathBuf {
    build_once(exe, |out| {
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let mut cmd = Command::new(cc);
        cmd.args(["-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
            .arg(crate_dir().join("include"))
            .arg(src)
            .arg("-o")
            .arg(out);
        if static_lib {
            cmd.arg(lib_dir().join("libbdmpi.a")).args([
                "-lgcc_s",
                "-lutil",
                "-lrt",
                "-lpthread",
                "-lm",
                "-ldl",
                "-lc",
            ]);
        } else {
            cmd.arg("-L")
                .arg(lib_dir())
                .arg("-lbdmpi")
                .arg(format!("-Wl,-rpath,{}", lib_dir().display()))
                .args(["-lrt", "-lm"]);
        }
        cmd
    })
}

/// Runs `cmd` with its output captured, stopping it after `limit` (SIGTERM, so that a
/// launcher takes its ranks down with it, then SIGKILL) and failing the test then.
pub fn run_limited(cmd: &mut Command, limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    // Drain the pipes while waiting (a chatty program must not block on a full pipe).
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let te = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            // SAFETY: a signal to our own child process.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let grace = Instant::now();
            while child.try_wait().unwrap().is_none() && grace.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(20));
            }
            child.kill().ok();
            let s = child.wait().unwrap();
            let (o, e) = (to.join().unwrap(), te.join().unwrap());
            panic!(
                "{cmd:?} did not finish in {limit:?} ({s:?}); output:\n{}{}",
                String::from_utf8_lossy(&o),
                String::from_utf8_lossy(&e)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = start.elapsed();
    let out = Output {
        status,
        stdout: to.join().unwrap(),
        stderr: te.join().unwrap(),
    };
    (out, took)
}

/// A run of bdmprun: its output, and whether it left its working directory empty.
pub struct Run {
    pub out: Output,
    pub wd_left: Vec<String>,
    pub took: Duration,
}

/// Runs `bdmprun <opts> -wd <fresh dir> <exe> <args>` with `env`, stopping it after `limit`.
pub fn bdmprun_run(
    opts: &[&str],
    exe: &Path,
    args: &[&str],
    env: &[(&str, String)],
    limit: Duration,
) -> Run {
    let wd = tempfile::tempdir().unwrap();
    let (out, took) = run_limited(
        Command::new(bdmprun())
            .args(opts)
            .arg("-wd")
            .arg(wd.path())
            .arg(exe)
            .args(args)
            .env_remove("LD_LIBRARY_PATH")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str()))),
        limit,
    );
    let wd_left = std::fs::read_dir(wd.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    Run { out, wd_left, took }
}

pub fn text(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Checks a run's exit status and that it left `-wd` empty.
pub fn expect(run: &Run, code: i32, what: &str) {
    assert_eq!(
        run.out.status.code(),
        Some(code),
        "{what}: exit status {:?}, expected {code}\n{}",
        run.out.status,
        text(&run.out)
    );
    assert!(
        run.wd_left.is_empty(),
        "{what}: bdmprun left {:?} in its working directory",
        run.wd_left
    );
}

/// Every (-ns, -nr) of the test matrix: -ns 1..8, -nr 1..min(3, ns).
pub fn layouts() -> Vec<(u32, u32)> {
    (1..=8u32)
        .flat_map(|ns| (1..=ns.min(3)).map(move |nr| (ns, nr)))
        .collect()
}
