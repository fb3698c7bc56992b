//! The C programs of `tests/c`, compiled with the system C compiler against this crate's
//! header and linked with `libspillway_lpf.so`, run at several process counts and node
//! layouts. Each program checks its own results against values it computes independently
//! (formulas, a direct DFT) and exits non-zero on a failed check.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory of the shared library built with this test: target/<profile>/deps (where
/// cargo writes it for a test build; the copy in target/<profile> is only refreshed by
/// `cargo build` and may be stale).
fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable");
        let deps = exe.parent().expect("deps directory");
        for dir in [deps, deps.parent().expect("profile directory")] {
            if dir.join("libspillway_lpf.so").exists() {
                return dir.to_path_buf();
            }
        }
        panic!(
            "libspillway_lpf.so not found next to {} (build the crate first: cargo build -p spillway-lpf)",
            exe.display()
        );
    })
}

/// Compiles `tests/c/<name>.c` (once per test process).
fn program(name: &str) -> PathBuf {
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lpf-c");
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join(name);
    let src = crate_dir().join("tests/c").join(format!("{name}.c"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir().join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(lib_dir())
        .arg("-lspillway_lpf")
        .arg(format!("-Wl,-rpath,{}", lib_dir().display()))
        .arg("-lm")
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler '{cc}': {e}"));
    assert!(status.success(), "compiling {} failed", src.display());
    exe
}

/// Runs `exe` with `LPF_MAX_PROCS=procs` and `env`, killing it after `limit`.
fn run(exe: &Path, procs: u32, env: &[(&str, &str)], limit: Duration) -> Output {
    let spill = tempfile::tempdir().unwrap();
    let mut child = Command::new(exe)
        // The program finds the library through its run path; cargo's LD_LIBRARY_PATH would
        // take precedence and may name a stale copy.
        .env_remove("LD_LIBRARY_PATH")
        .env("LPF_MAX_PROCS", procs.to_string())
        .env("SPILLWAY_SPILL_DIR", spill.path())
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            child.kill().ok();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{} at P={procs} {env:?} did not finish in {limit:?}; output:\n{}{}",
                exe.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn expect(out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: exit status {:?}, expected {code}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a program at P = 1..=5 on one node, and at P = 2..=5 on two nodes.
fn everywhere(name: &str) {
    let exe = program(name);
    for nodes in ["1", "2"] {
        for p in 1..=5 {
            if nodes == "2" && p < 2 {
                continue;
            }
            let env = [("SPILLWAY_NODES", nodes)];
            let out = run(&exe, p, &env, Duration::from_secs(120));
            expect(&out, 0, &format!("{name} at P={p}, {nodes} node(s)"));
        }
    }
}

#[test]
fn hello() {
    everywhere("hello");
}

#[test]
fn ring_of_puts_and_gets() {
    everywhere("ring");
}

#[test]
fn all_to_all_with_get() {
    everywhere("alltoall_get");
}

#[test]
fn impossible_reservations_are_out_of_memory_without_effect() {
    everywhere("resize_oom");
}

#[test]
fn nested_exec_on_the_free_processors() {
    everywhere("nested");
}

#[test]
fn probe() {
    everywhere("probe");
}

#[test]
fn early_exit_makes_sync_fatal() {
    everywhere("early_exit");
}

#[test]
fn bsp_fft_matches_a_direct_dft() {
    everywhere("fft");
}

#[test]
fn misuse_is_reported_and_fatal() {
    let exe = program("misuse");
    for p in [1, 3] {
        let out = run(&exe, p, &[], Duration::from_secs(60));
        // 3: the program saw LPF_ERR_FATAL where it expected it.
        expect(&out, 3, "misuse");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("out of bounds") && err.contains("16 bytes at byte 8"),
            "the report names the bad put: {err}"
        );
    }
}

#[test]
fn abort_exits_with_code_6() {
    let exe = program("abort");
    for p in [1, 4] {
        let out = run(&exe, p, &[], Duration::from_secs(60));
        expect(&out, 6, "lpf_abort");
    }
}

/// 64 processes on this machine's cores, each with 4 MiB of registered storage-backed memory
/// (256 MiB in all) under a budget of 64 MiB: the peak RSS stays within the budget plus the
/// runtime's own memory.
#[test]
fn registered_memory_beyond_the_budget() {
    let exe = program("budget");
    let env = [
        ("SPILLWAY_MEM_BUDGET", "64M"),
        ("MIB_PER_PROC", "4"),
        ("SPILLWAY_STACK_SIZE", "256K"),
    ];
    let out = run(&exe, 64, &env, Duration::from_secs(300));
    expect(&out, 0, "budget");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let peak: u64 = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("peak_rss_kib "))
        .next_back()
        .and_then(|v| v.trim().parse().ok())
        .expect("the program prints its peak RSS");
    let registered_kib = 64 * 4 * 1024;
    let limit_kib = (64 + 64) * 1024;
    assert!(
        peak < limit_kib,
        "peak RSS {peak} KiB with {registered_kib} KiB registered, budget 64 MiB (limit {limit_kib} KiB)"
    );
}

/// One message of more than `INT_MAX` bytes, within a node and between two nodes.
#[test]
fn message_larger_than_int_max() {
    let exe = program("huge");
    for nodes in ["1", "2"] {
        let out = run(
            &exe,
            2,
            &[("SPILLWAY_NODES", nodes)],
            Duration::from_secs(300),
        );
        expect(&out, 0, &format!("huge message, {nodes} node(s)"));
    }
}
