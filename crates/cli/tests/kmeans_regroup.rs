//! Harp-scale K-means (`run kmeans --collective regroup`): k = 20,000 centroids of 64
//! dimensions on 100,000 points over 32 ranks under a 64 MiB budget, where the partial sums of
//! all ranks together (32 x 20,000 x 65 doubles, 317 MiB) are five times the budget. The peak
//! RSS of the child process (wait4) must stay within the budget plus 64 MiB, and the assignment
//! must equal that of the allreduce version without a budget. A smaller case checks that the
//! automatic choice and both collectives agree across layouts.

use std::path::Path;

mod common;
use common::{json_bool, mem_budget_args, run_measured_in as run_measured};

const MIB: u64 = 1 << 20;

fn run_ok(args: &[&str], dir: &Path) -> (String, u64) {
    let (code, stdout, stderr, rss) = run_measured(args, dir);
    assert_eq!(code, 0, "spillway {args:?} failed\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    (stdout, rss)
}

#[test]
fn regroup_and_allreduce_agree_at_several_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut first: Option<String> = None;
    // k x d = 96 x 32: auto picks allreduce; regroup is forced.
    for (collective, ranks, nodes, budget) in [
        ("allreduce", "1", "1", None),
        ("auto", "5", "2", None),
        ("regroup", "1", "1", None),
        ("regroup", "5", "2", Some("2M")),
        ("regroup", "8", "3", None),
    ] {
        let assign = d.join(format!("a-{collective}-{ranks}.txt"));
        let assign_s = assign.to_str().unwrap();
        let mut args = vec![
            "run",
            "kmeans",
            "--generate",
            "blobs:6000:32:40:9",
            "--k",
            "96",
            "--init",
            "random:4",
            "--collective",
            collective,
            "--ranks",
            ranks,
            "--nodes",
            nodes,
            "--assign",
            assign_s,
            "--json",
        ];
        args.extend(mem_budget_args(budget));
        let (stdout, _) = run_ok(&args, d);
        let regroup = json_bool(&stdout, "regroup");
        assert_eq!(regroup, collective == "regroup", "{stdout}");
        let text = std::fs::read_to_string(&assign).unwrap();
        assert_eq!(text.lines().count(), 6000);
        match &first {
            None => first = Some(text),
            Some(f) => assert!(*f == text, "{collective} at {ranks} ranks differs"),
        }
    }
}

/// Takes minutes on two cores: 100,000 x 20,000 x 64 multiply-adds per assignment pass, three
/// passes per run (two iterations and the final assignment), two runs.
#[test]
fn harp_scale_kmeans_stays_within_the_budget_and_matches_the_in_memory_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (points, dim, k, ranks) = (100_000u64, 64u64, 20_000u64, 32u64);
    let budget = 64 * MIB;
    let partial_sums = ranks * k * (dim + 1) * 8;
    assert!(partial_sums > budget);
    let a_budget = d.join("a-budget.txt");
    let a_memory = d.join("a-memory.txt");
    let generate = format!("blobs:{points}:{dim}:{k}:7");
    let common = [
        "run",
        "kmeans",
        "--generate",
        generate.as_str(),
        "--k",
        "20000",
        "--init",
        "random:3",
        "--iterations",
        "2",
        "--ranks",
        "32",
        "--json",
    ];
    let with = |more: &[&str]| run_ok(&[&common[..], more].concat(), d);
    let (stdout, rss) = with(&[
        "--mem-budget",
        "64M",
        "--assign",
        a_budget.to_str().unwrap(),
    ]);
    println!("regroup under 64 MiB: peak RSS {} MiB; {stdout}", rss / MIB);
    assert!(json_bool(&stdout, "regroup"), "auto chose regroup");
    assert!(
        rss <= budget + 64 * MIB,
        "peak RSS {} MiB exceeds the budget of 64 MiB + 64 MiB",
        rss / MIB
    );
    let allreduce = ["--collective", "allreduce", "--running", "2"];
    let (stdout, rss_memory) =
        with(&[&allreduce[..], &["--assign", a_memory.to_str().unwrap()]].concat());
    println!("allreduce in memory: peak RSS {} MiB", rss_memory / MIB);
    assert!(!json_bool(&stdout, "regroup"));
    let (a, b) = (
        std::fs::read_to_string(&a_budget).unwrap(),
        std::fs::read_to_string(&a_memory).unwrap(),
    );
    assert_eq!(a.lines().count() as u64, points);
    let differ = a.lines().zip(b.lines()).filter(|(x, y)| x != y).count();
    assert_eq!(
        differ, 0,
        "{differ} assignments differ from the in-memory run"
    );
}
