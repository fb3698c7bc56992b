//! Out-of-core runs of the CLI: a peak-RSS bound read from the child process, identical
//! results with and without a memory budget under every policy, spill-directory errors.

use std::path::{Path, PathBuf};

mod common;
use common::{json_field, ok, run_measured_in, spillway, Cmd};

/// Runs the CLI (output in a fresh directory) and returns (exit code, stdout, stderr, peak RSS
/// of the child in bytes).
fn run_measured(args: &[&str]) -> (i32, String, String, u64) {
    let dir = tempfile::tempdir().unwrap();
    run_measured_in(args, dir.path())
}

#[test]
fn peak_rss_stays_within_the_budget_plus_a_fixed_overhead() {
    const MIB: u64 = 1 << 20;
    let budget = 32 * MIB;
    // 8.4M edges: about 128 MiB of storage-backed rank data, four times the budget.
    let job = [
        &[
            "run",
            "pagerank",
            "--generate",
            "rmat:19:16",
            "--ranks",
            "16",
        ][..],
        &["--running", "1", "--iterations", "2", "--json"],
    ]
    .concat();
    let (code, stdout, stderr, rss) = run_measured(&[&job[..], &["--mem-budget", "32M"]].concat());
    assert_eq!(code, 0, "{stderr}");
    let data = json_field(&stdout, "peak_storage_backed_bytes") as u64;
    assert!(
        data >= 4 * budget,
        "rank data {} MiB is not 4x the budget",
        data / MIB
    );
    let overhead = 64 * MIB;
    assert!(
        rss <= budget + overhead,
        "peak RSS {} MiB exceeds budget {} MiB + {} MiB",
        rss / MIB,
        budget / MIB,
        overhead / MIB
    );
    // The same job without a budget keeps its data resident: the bound is not trivially met.
    let (code, _, stderr, rss_free) = run_measured(&job);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        rss_free > budget + overhead,
        "without a budget RSS was only {} MiB",
        rss_free / MIB
    );
}

/// The bound at small budgets, for a generated graph and for the same graph read from an
/// edge-list file: peak RSS within the budget plus 64 MiB, with at least four times the budget
/// of rank data (32 ranks, the default dynamic number of running ranks).
#[test]
fn peak_rss_stays_within_the_budget_plus_64_mib_at_16m_and_64m_generated_and_from_a_file() {
    const MIB: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    for (budget, scale) in [(16u64, 19u32), (64, 20)] {
        let file = dir.path().join(format!("rmat{scale}.txt"));
        Cmd::spillway()
            .args([
                "gen",
                "rmat",
                "--scale",
                &scale.to_string(),
                "--edge-factor",
                "16",
            ])
            .arg("--out")
            .arg(&file)
            .ok();
        let spec = format!("rmat:{scale}:16");
        let b = format!("{budget}M");
        let sources: [(&str, &str); 2] = [
            ("--generate", spec.as_str()),
            ("--input", file.to_str().unwrap()),
        ];
        for (flag, value) in sources {
            let (code, stdout, stderr, rss) = run_measured(&[
                "run",
                "pagerank",
                flag,
                value,
                "--ranks",
                "32",
                "--iterations",
                "2",
                "--mem-budget",
                &b,
                "--json",
            ]);
            assert_eq!(code, 0, "{stderr}");
            let data = json_field(&stdout, "peak_storage_backed_bytes") as u64;
            assert!(
                data >= 4 * budget * MIB,
                "{flag} {value}: rank data {} MiB is not 4x the budget of {budget} MiB",
                data / MIB
            );
            assert!(
                rss <= (budget + 64) * MIB,
                "{flag} {value}: peak RSS {} MiB exceeds the budget of {budget} MiB + 64 MiB",
                rss / MIB
            );
        }
    }
}

fn run_ok(args: &[&str]) -> String {
    ok(spillway(args)).stdout
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn results_are_identical_with_and_without_a_budget_under_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| -> PathBuf { dir.path().join(name) };
    let base = ["--ranks", "8", "--nodes", "2", "--running", "1"];
    let pr = |out: &Path, extra: &[&str]| {
        let mut a = vec![
            "run",
            "pagerank",
            "--generate",
            "rmat:14:8:3",
            "--iterations",
            "6",
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(&base);
        a.extend_from_slice(extra);
        run_ok(&a)
    };
    let km = |out: &Path, assign: &Path, extra: &[&str]| {
        let mut a = vec![
            "run",
            "kmeans",
            "--generate",
            "blobs:40000:8:6:2",
            "--k",
            "6",
            "--init",
            "random:5",
            "--out",
            out.to_str().unwrap(),
            "--assign",
            assign.to_str().unwrap(),
        ];
        a.extend_from_slice(&base);
        a.extend_from_slice(extra);
        run_ok(&a)
    };
    pr(&d("pr-free"), &[]);
    km(&d("km-free"), &d("as-free"), &[]);
    for policy in ["araw", "arlw", "lrlw"] {
        let json = pr(
            &d(policy),
            &["--mem-budget", "512K", "--policy", policy, "--json"],
        );
        assert_eq!(
            read(&d(policy)),
            read(&d("pr-free")),
            "pagerank under {policy}"
        );
        assert!(
            json_field(&json, "unloads") > 0.0,
            "{policy}: nothing was unloaded: {json}"
        );
        let json = km(
            &d("c"),
            &d("a"),
            &["--mem-budget", "512K", "--policy", policy, "--json"],
        );
        assert_eq!(
            read(&d("c")),
            read(&d("km-free")),
            "kmeans centroids under {policy}"
        );
        assert_eq!(
            read(&d("a")),
            read(&d("as-free")),
            "kmeans assignment under {policy}"
        );
        assert!(
            json_field(&json, "spill_bytes_written") > 0.0,
            "{policy}: nothing spilled: {json}"
        );
    }
}

#[test]
fn a_bad_spill_directory_is_reported_with_path_and_cause_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ranks.txt");
    let missing = dir.path().join("no/such/dir");
    let result = Cmd::spillway()
        .args([
            "run",
            "pagerank",
            "--generate",
            "rmat:8:4",
            "--out",
            out.to_str().unwrap(),
        ])
        .args([
            "--mem-budget",
            "1M",
            "--spill-dir",
            missing.to_str().unwrap(),
        ])
        .run();
    let stderr = &result.stderr;
    assert_eq!(result.code, Some(2), "{stderr}");
    assert!(
        stderr.contains(missing.to_str().unwrap()) && stderr.contains("No such file"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.exists());
    let listing: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(listing.is_empty(), "left behind: {listing:?}");
}

#[test]
fn bad_memory_options_are_usage_errors() {
    for args in [
        ["--mem-budget", "lots"],
        ["--policy", "never"],
        ["--resume-policy", "random"],
    ] {
        let result = Cmd::spillway()
            .args(["run", "pagerank", "--generate", "rmat:6:4"])
            .args(args)
            .run();
        assert_eq!(result.code, Some(2), "{args:?}");
        assert!(result.stderr.contains(args[1]), "{args:?}");
    }
}
