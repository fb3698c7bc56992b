//! Helpers shared by the CLI tests that measure the child process.

use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_spillway");

/// Runs the CLI with its output in `dir` and returns (exit code, stdout, stderr, peak RSS of
/// the child in bytes), the RSS read with wait4 from the kernel's accounting of that child.
pub fn run_measured_in(args: &[&str], dir: &Path) -> (i32, String, String, u64) {
    let out_path = dir.join("stdout.txt");
    let err_path = dir.join("stderr.txt");
    let child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("start spillway");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid pointers to locals.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid, "wait4 failed");
    std::mem::forget(child);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    (code, stdout, stderr, usage.ru_maxrss as u64 * 1024)
}

/// A numeric field of the one JSON object on `stdout`.
pub fn json_field(stdout: &str, key: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no numeric field {key} in {stdout}"))
}
