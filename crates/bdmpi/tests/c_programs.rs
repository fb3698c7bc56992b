//! The C programs of `tests/c`, compiled with the system C compiler against this crate's
//! header (`-Wall -Wextra -Werror`) and linked with `libbdmpi.so`, run under `bdmprun` at
//! `-ns` 1..8 and `-nr` 1..3. Each program checks its results against values it computes
//! itself from formulas and exits non-zero on a failed check; the harness checks exit
//! statuses, the messages of failures and that `-wd` is left empty.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Compiles `tests/c/<name>.c` once per test process; `static_lib` links `libbdmpi.a`.
fn program(name: &str, static_lib: bool) -> PathBuf {
    let src = crate_dir().join("tests/c").join(format!("{name}.c"));
    let exe = format!("{name}{}", if static_lib { "-static" } else { "" });
    build_with_libbdmpi(&src, &exe, static_lib)
}

/// Runs `name` at every layout with `extra` options and checks that it succeeds.
fn everywhere(name: &str, extra: &[&str], env: &[(&str, String)]) {
    let exe = program(name, false);
    for (ns, nr) in layouts() {
        let (ns_s, nr_s) = (ns.to_string(), nr.to_string());
        let mut opts = vec!["-ns", &ns_s, "-nr", &nr_s];
        opts.extend_from_slice(extra);
        let mut env = env.to_vec();
        env.push(("BDMPI_TEST_NS", ns_s.clone()));
        let run = bdmprun_run(&opts, &exe, &[], &env, Duration::from_secs(120));
        expect(&run, 0, &format!("{name} {opts:?}"));
    }
}

#[test]
fn init_and_communicators() {
    everywhere("comm", &[], &[]);
}

#[test]
fn point_to_point() {
    everywhere("p2p", &[], &[]);
}

#[test]
fn point_to_point_with_messages_in_files() {
    // -im 1 page and a 2 MiB memory limit: the large messages go through files in -wd.
    let exe = program("p2p", false);
    for (ns, nr) in [(2, 1), (5, 2), (8, 3)] {
        let (ns_s, nr_s) = (ns.to_string(), nr.to_string());
        let opts = [
            "-ns", &ns_s, "-nr", &nr_s, "-im", "1", "-rm", "512", "-dl", "1",
        ];
        let run = bdmprun_run(
            &opts,
            &exe,
            &[],
            &[("BDMPI_TEST_NS", ns_s.clone())],
            Duration::from_secs(120),
        );
        expect(&run, 0, &format!("p2p {opts:?}"));
        let err = String::from_utf8_lossy(&run.out.stderr);
        let spilled = err.lines().find_map(|l| {
            l.split(" messages spilled")
                .next()?
                .rsplit(", ")
                .next()?
                .parse::<u64>()
                .ok()
        });
        assert!(
            spilled.is_some_and(|n| n > 0),
            "no message went to a file with -rm 512: {err}"
        );
    }
}

#[test]
fn collectives() {
    everywhere("coll", &[], &[]);
}

#[test]
fn reductions() {
    everywhere("reduce", &[], &[]);
}

#[test]
fn storage_backed_memory() {
    let exe = program("sb", false);
    for policy in ["araw", "arlw", "lraw", "lrlw", "none"] {
        let layouts: Vec<(u32, u32)> = if policy == "araw" {
            layouts()
        } else {
            vec![(1, 1), (3, 2), (8, 3)]
        };
        for (ns, nr) in layouts {
            let (ns_s, nr_s) = (ns.to_string(), nr.to_string());
            let opts = ["-ns", &ns_s, "-nr", &nr_s, "-sbma", policy];
            let env = [
                ("BDMPI_TEST_NS", ns_s.clone()),
                ("BDMPI_TEST_SBMA", policy.to_string()),
            ];
            let run = bdmprun_run(&opts, &exe, &[], &env, Duration::from_secs(120));
            expect(&run, 0, &format!("sb {opts:?}"));
        }
    }
}

#[test]
fn critical_sections() {
    let exe = program("critical", false);
    for (ns, nr) in layouts() {
        for nc in [1u32, 2] {
            let (ns_s, nr_s, nc_s) = (ns.to_string(), nr.to_string(), nc.to_string());
            let opts = ["-ns", &ns_s, "-nr", &nr_s, "-nc", &nc_s];
            let env = [
                ("BDMPI_TEST_NS", ns_s.clone()),
                ("BDMPI_TEST_NC", nc_s.clone()),
            ];
            let run = bdmprun_run(&opts, &exe, &[], &env, Duration::from_secs(120));
            expect(&run, 0, &format!("critical {opts:?}"));
        }
    }
}

#[test]
fn time_memory_locks_and_counts() {
    let exe = program("misc", false);
    for (ns, nr) in [(1, 1), (4, 2), (8, 3)] {
        let (ns_s, nr_s) = (ns.to_string(), nr.to_string());
        let opts = ["-ns", &ns_s, "-nr", &nr_s];
        let run = bdmprun_run(
            &opts,
            &exe,
            &[],
            &[("BDMPI_TEST_NS", ns_s.clone())],
            Duration::from_secs(60),
        );
        expect(&run, 0, &format!("misc {opts:?}"));
        let out = String::from_utf8_lossy(&run.out.stdout);
        let lines = out
            .lines()
            .filter(|l| l.starts_with("[vm:") && l.contains("VmRSS:"))
            .count();
        assert_eq!(lines, 2 * ns as usize, "Print_vm_info lines:\n{out}");
    }
}

#[test]
fn bad_use_gets_error_codes_and_messages_naming_rank_and_call() {
    let exe = program("errors", false);
    for (ns, nr) in [(1, 1), (3, 2), (8, 3)] {
        let (ns_s, nr_s) = (ns.to_string(), nr.to_string());
        let opts = ["-ns", &ns_s, "-nr", &nr_s];
        let run = bdmprun_run(
            &opts,
            &exe,
            &[],
            &[("BDMPI_TEST_NS", ns_s.clone())],
            Duration::from_secs(60),
        );
        expect(&run, 0, &format!("errors {opts:?}"));
        let err = String::from_utf8_lossy(&run.out.stderr);
        for r in 0..ns {
            for call in [
                "BDMPI_Send",
                "MPI_Send",
                "BDMPI_Recv",
                "BDMPI_Bcast",
                "BDMPI_Reduce",
                "BDMPI_Allreduce",
                "MPI_Gather",
                "BDMPI_Irecv",
                "BDMPI_Init",
                "BDMPI_Barrier",
            ] {
                assert!(
                    err.contains(&format!("rank {r}: {call}:")),
                    "no message of rank {r} for {call}:\n{err}"
                );
            }
        }
    }
}

#[test]
fn the_static_library_works_too() {
    let exe = program("p2p", true);
    let run = bdmprun_run(
        &["-ns", "4", "-nr", "2"],
        &exe,
        &[],
        &[("BDMPI_TEST_NS", "4".into())],
        Duration::from_secs(60),
    );
    expect(&run, 0, "p2p linked with libbdmpi.a");
}

#[test]
fn the_header_compiles_as_cpp() {
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bdmpi-c");
    std::fs::create_dir_all(&out_dir).unwrap();
    let src = out_dir.join("header.cpp");
    std::fs::write(
        &src,
        "#include <bdmpi.h>\nint main(int argc, char **argv) {\n  MPI_Init(&argc, &argv);\n  \
         int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);\n  return MPI_Finalize() == MPI_SUCCESS ? 0 : 1;\n}\n",
    )
    .unwrap();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let Ok(status) = Command::new(&cxx)
        .args([
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-c",
            "-I",
        ])
        .arg(crate_dir().join("include"))
        .arg(&src)
        .arg("-o")
        .arg(out_dir.join("header.o"))
        .status()
    else {
        eprintln!("skipped: no C++ compiler '{cxx}'");
        return;
    };
    assert!(status.success(), "bdmpi.h does not compile as C++");
}

#[test]
fn a_crashing_rank_ends_the_job_with_its_name() {
    let exe = program("fail", false);
    for (ns, nr, who) in [(3, 1, 1), (6, 3, 5), (2, 2, 0)] {
        let (ns_s, nr_s, who_s) = (ns.to_string(), nr.to_string(), who.to_string());
        let run = bdmprun_run(
            &["-ns", &ns_s, "-nr", &nr_s],
            &exe,
            &["crash", &who_s],
            &[],
            Duration::from_secs(60),
        );
        expect(&run, 1, "crash");
        let err = String::from_utf8_lossy(&run.out.stderr);
        assert!(
            err.contains(&format!("rank {who} (pid")) && err.contains("signal 11"),
            "{err}"
        );
        assert!(run.took < Duration::from_secs(20), "took {:?}", run.took);
    }
}

#[test]
fn a_rank_that_exits_without_finalize_ends_the_job_with_its_name() {
    let exe = program("fail", false);
    for (ns, nr, who) in [(4, 1, 2), (4, 2, 0)] {
        let (ns_s, nr_s, who_s) = (ns.to_string(), nr.to_string(), who.to_string());
        let run = bdmprun_run(
            &["-ns", &ns_s, "-nr", &nr_s],
            &exe,
            &["noexit", &who_s],
            &[],
            Duration::from_secs(60),
        );
        expect(&run, 1, "noexit");
        let err = String::from_utf8_lossy(&run.out.stderr);
        assert!(
            err.contains(&format!("rank {who} (pid"))
                && err.contains("without calling BDMPI_Finalize"),
            "{err}"
        );
    }
    // before BDMPI_Init
    let run = bdmprun_run(
        &["-ns", "3"],
        &exe,
        &["abort", "1"],
        &[],
        Duration::from_secs(60),
    );
    expect(&run, 1, "abort before init");
    let err = String::from_utf8_lossy(&run.out.stderr);
    assert!(
        err.contains("rank 1 (pid") && err.contains("signal 6"),
        "{err}"
    );
}

#[test]
fn a_rank_exit_status_after_finalize_is_the_job_status() {
    let exe = program("fail", false);
    let run = bdmprun_run(
        &["-ns", "3", "-nr", "2"],
        &exe,
        &["status", "1"],
        &[],
        Duration::from_secs(60),
    );
    expect(&run, 3, "status");
    let err = String::from_utf8_lossy(&run.out.stderr);
    assert!(
        err.contains("rank 1 (pid") && err.contains("status 3"),
        "{err}"
    );
}

#[test]
fn a_deadlock_is_reported_not_a_hang() {
    let exe = program("fail", false);
    for (ns, nr) in [(1, 1), (4, 2)] {
        let (ns_s, nr_s) = (ns.to_string(), nr.to_string());
        let run = bdmprun_run(
            &["-ns", &ns_s, "-nr", &nr_s],
            &exe,
            &["deadlock", "0"],
            &[],
            Duration::from_secs(60),
        );
        expect(&run, 1, "deadlock");
        let err = String::from_utf8_lossy(&run.out.stderr);
        assert!(err.contains("deadlock") && err.contains("rank 0"), "{err}");
    }
}

#[test]
fn a_signal_stops_the_ranks_and_cleans_up() {
    let exe = program("fail", false);
    let wd = tempfile::tempdir().unwrap();
    let mut child = Command::new(bdmprun())
        .args(["-ns", "4", "-nr", "2", "-wd"])
        .arg(wd.path())
        .arg(&exe)
        .args(["hang", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "bdmprun ignored SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(143));
    assert_eq!(
        std::fs::read_dir(wd.path()).unwrap().count(),
        0,
        "files left in -wd"
    );
    // No process of the program is left.
    let exe_name = exe.canonicalize().unwrap();
    let left = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path().join("exe")).ok())
        .filter(|p| *p == exe_name)
        .count();
    assert_eq!(left, 0, "rank processes survived bdmprun");
}

#[test]
fn wrong_requests_exit_with_status_2() {
    let exe = program("comm", false);
    for opts in [
        vec!["-ns", "0"],
        vec!["-ns", "2", "-nr", "3"],
        vec!["-sbma", "fast"],
    ] {
        let run = bdmprun_run(&opts, &exe, &[], &[], Duration::from_secs(30));
        expect(&run, 2, &format!("{opts:?}"));
    }
    let out = Command::new(bdmprun())
        .args(["-ns", "2", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/program"));
}

#[test]
fn a_program_not_started_by_bdmprun_says_so() {
    let exe = program("comm", false);
    let out = Command::new(&exe)
        .env_remove("BDMPI_SOCKET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not started by bdmprun"));
}
