//! The C programs of `tests/c`, compiled with the system C compiler against this crate's
//! headers and linked with `libspillway_lpf.so`, run at several process counts and node
//! layouts ([`LAYOUTS`]: 1 to 5 processes and, on the machine's few cores, 16 and 64, on one
//! and on two virtual nodes). They were written from the documentation of LPF's core API
//! (the comments of LPF's `include/lpf/core.h` and `include/lpf/abort.h`) and this crate's
//! README. Each program checks its own results against values it computes independently
//! (formulas, a direct DFT) and exits non-zero on a failed check; the tests check the exit
//! status and the library's reports on standard error.

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

/// Checks that standard error holds every one of `messages` (the library's reports).
fn expect_messages(out: &Output, messages: &[&str], what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    for m in messages {
        assert!(
            err.contains(m),
            "{what}: standard error lacks {m:?}:\n{err}"
        );
    }
}

/// (processes, virtual nodes) every program runs at: 1 to 5 processes, and 16 and 64 on this
/// machine's few cores, on one node and, from 2 processes on, on two.
const LAYOUTS: &[(u32, u32)] = &[
    (1, 1),
    (2, 1),
    (3, 1),
    (4, 1),
    (5, 1),
    (16, 1),
    (64, 1),
    (2, 2),
    (3, 2),
    (4, 2),
    (5, 2),
    (16, 2),
    (64, 2),
];

/// Runs a program at every one of `layouts` with `env`, expecting exit status `code` and
/// `messages` on standard error.
fn at_layouts(
    name: &str,
    layouts: &[(u32, u32)],
    env: &[(&str, &str)],
    code: i32,
    messages: &[&str],
) {
    let exe = program(name);
    for &(p, nodes) in layouts {
        let nodes = nodes.to_string();
        let mut all = vec![("SPILLWAY_NODES", nodes.as_str())];
        all.extend_from_slice(env);
        let out = run(&exe, p, &all, Duration::from_secs(60));
        let what = format!("{name} at P={p} on {nodes} node(s) {env:?}");
        expect(&out, code, &what);
        expect_messages(&out, messages, &what);
    }
}

/// Runs a program at every layout, expecting success and `messages` on standard error.
fn everywhere(name: &str, messages: &[&str]) {
    at_layouts(name, LAYOUTS, &[], 0, messages);
}

#[test]
fn hello() {
    everywhere("hello", &[]);
}

#[test]
fn exec_processes_arguments_and_symbols() {
    everywhere(
        "exec",
        &[
            "lpf_exec: P must be at least 1",
            "lpf_exec: the SPMD function is NULL",
            "lpf_hook: init is LPF_INIT_NONE",
            "lpf_rehook: the SPMD function is NULL",
            "lpf_register_global: capacity exceeded: the memory register holds 0",
        ],
    );
}

#[test]
fn rehook_inside_a_section() {
    everywhere("rehook", &["memory register"]);
}

#[test]
fn nested_exec_on_the_free_processors() {
    everywhere("nested", &[]);
}

#[test]
fn register_and_deregister_within_the_capacity() {
    everywhere(
        "registers",
        &["memory register", "(the call had no effect)"],
    );
}

#[test]
fn put_and_get_at_every_offset_and_size() {
    everywhere("putget", &[]);
}

#[test]
fn concurrent_writes_land_whole() {
    everywhere("crcw", &[]);
}

#[test]
fn message_queue_capacity_and_sync() {
    everywhere("queue", &["message queue", "(the call had no effect)"]);
}

#[test]
fn impossible_reservations_are_out_of_memory_without_effect() {
    everywhere("resize_oom", &["(the call had no effect)"]);
}

#[test]
fn probe() {
    everywhere("probe", &[]);
}

#[test]
fn ring_of_puts_and_gets() {
    everywhere("ring", &[]);
}

#[test]
fn all_to_all_with_get() {
    everywhere("alltoall_get", &[]);
}

#[test]
fn early_exit_makes_sync_fatal() {
    everywhere("early_exit", &[]);
}

/// The FFT checks itself against a direct DFT, whose cost grows with p^4: 1 to 5 processes.
#[test]
fn bsp_fft_matches_a_direct_dft() {
    let small: Vec<(u32, u32)> = LAYOUTS.iter().copied().filter(|&(p, _)| p <= 5).collect();
    at_layouts("fft", &small, &[], 0, &[]);
}

/// Each case of `tests/c/misuse.c` with what its report says: in a section, and in a
/// one-process context (`LPF_ROOT`, or a nested section of one process).
const MISUSES: &[(&str, &[&str], &[&str])] = &[
    (
        "put_dst_bounds",
        &["out of bounds", "put", "16 bytes at byte 8"],
        &["lpf_put: destination: 16 bytes at offset 8 of a slot of 16 bytes"],
    ),
    (
        "put_src_bounds",
        &["lpf_put: out of bounds: 16 elements at offset 8"],
        &["lpf_put: source: 16 bytes at offset 8 of a slot of 16 bytes"],
    ),
    (
        "get_src_bounds",
        &["out of bounds", "get", "16 bytes at byte 8"],
        &["lpf_get: source: 16 bytes at offset 8 of a slot of 16 bytes"],
    ),
    (
        "get_dst_bounds",
        &["lpf_get: out of bounds: 16 elements at offset 8"],
        &["lpf_get: destination: 16 bytes at offset 8 of a slot of 16 bytes"],
    ),
    (
        "offset_overflow",
        &["out of bounds", "8 bytes at byte 18446744073709551612"],
        &["lpf_put: destination: 8 bytes at offset 18446744073709551612"],
    ),
    (
        "local_slot_remotely",
        &["lpf_put: unknown slot", "(it is local)"],
        &[
            "lpf_put: memory slot",
            "cannot be named remotely (it is local)",
        ],
    ),
    (
        "before_registration_sync",
        &[
            "lpf_put: unknown slot",
            "before the sync after its registration",
        ],
        &[
            "lpf_put: memory slot",
            "before the lpf_sync after its registration",
        ],
    ),
    (
        "deregistered_slot",
        &["lpf_put: unknown slot", "is not registered"],
        &["lpf_put: memory slot", "is not registered"],
    ),
    (
        "invalid_memslot",
        &["lpf_put: unknown slot", "is not registered"],
        &["lpf_put: memory slot 0xffffffffffffffff is not registered"],
    ),
    (
        "invalid_pid",
        &["lpf_put: invalid pid", "outside 0.."],
        &["lpf_put: pid 1 outside 0..1"],
    ),
    (
        "read_write_conflict",
        &["read-write conflict"],
        &["lpf_sync: read-write conflict"],
    ),
    (
        "deregister_pending",
        &["lpf_deregister: slot in use"],
        &["lpf_deregister: the slot is used by a put or get of this superstep"],
    ),
    (
        "null_memslot",
        &["lpf_register_global: memslot is NULL"],
        &["lpf_register_global: memslot is NULL"],
    ),
    (
        "null_area",
        &["lpf_register_local: NULL pointer with 8 bytes"],
        &["lpf_register_local: NULL pointer with 8 bytes"],
    ),
    (
        "null_machine",
        &["lpf_probe: params is NULL"],
        &["lpf_probe: params is NULL"],
    ),
];

/// Every misuse is reported, fails the call or the next sync with `LPF_ERR_FATAL`, and puts
/// the context in LPF's failure state (the program exits with 3 when it saw all of that).
#[test]
fn misuse_is_reported_and_fatal() {
    let places: &[(&str, u32, u32)] = &[
        ("section", 1, 1),
        ("section", 3, 1),
        ("section", 4, 2),
        ("section", 16, 2),
        ("root", 1, 1),
        ("nested", 2, 1),
    ];
    for &(case, in_section, in_solo) in MISUSES {
        for &(place, p, nodes) in places {
            let messages = if place == "section" {
                in_section
            } else {
                in_solo
            };
            at_layouts(
                "misuse",
                &[(p, nodes)],
                &[("MISUSE", case), ("MISUSE_IN", place)],
                3,
                messages,
            );
        }
    }
}

/// `lpf_abort` from a process of a section (the first, or one on the second node), from a
/// nested section and from `LPF_ROOT` ends the program with exit code 6.
#[test]
fn abort_exits_with_code_6() {
    let runs: &[(&str, &str, u32, u32)] = &[
        ("section", "0", 1, 1),
        ("section", "0", 4, 1),
        ("section", "3", 4, 2),
        ("section", "15", 16, 2),
        ("nested", "0", 1, 1),
        ("nested", "0", 4, 2),
        ("root", "0", 1, 1),
    ];
    for &(place, pid, p, nodes) in runs {
        at_layouts(
            "abort",
            &[(p, nodes)],
            &[("ABORT_IN", place), ("ABORT_PID", pid)],
            6,
            &["lpf_abort was called"],
        );
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
