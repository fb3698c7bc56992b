//! Tests of the MPI backend, run with `mpirun` at 2 and 3 processes (feature `mpi`).
//!
//! Every `mpirun` runs under `timeout`, so a hang fails the test instead of stalling it. The
//! launcher is `$SPILLWAY_MPIRUN` (default `mpirun`); with Open MPI as root it needs
//! `OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1` and, with more processes than
//! cores, `OMPI_MCA_rmaps_base_oversubscribe=1` (scripts/test.sh sets them).
//!
//! The PageRank and K-means inputs are written by the tests themselves (not by spillway), the
//! outputs are compared with the local backend and checked by the Python references
//! (`$SPILLWAY_PYTHON`, see tests/cli.rs; `SPILLWAY_SKIP_PYTHON=1` skips only those checks).
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{
    check_reference, l1, max_abs_diff, read_u64s, relaunching, sorted_lines, write_points,
    write_u64s, Cmd, Lcg, Ran,
};

/// Runs `program` with `args`.
fn run_cmd(program: &str, args: &[String]) -> Ran {
    Cmd::new(program).args(args).run()
}

/// `timeout -k 10 SECONDS mpirun [extra] -np N program args...` (the launcher is killed 10 s
/// after the time is up: Open MPI 5's ignores the first signal when it hangs, see
/// tests/ulfm.rs).
fn mpirun(np: u32, seconds: u32, extra: &[&str], program: &str, args: &[&str]) -> Ran {
    let launcher = std::env::var("SPILLWAY_MPIRUN").unwrap_or_else(|_| "mpirun".into());
    let mut all: Vec<String> = vec!["-k".into(), "10".into(), seconds.to_string(), launcher];
    all.extend(extra.iter().map(|s| s.to_string()));
    all.extend(["-np".to_string(), np.to_string(), program.to_string()]);
    all.extend(args.iter().map(|s| s.to_string()));
    relaunching(|| run_cmd("timeout", &all), |ran| &ran.stderr)
}

const SPILLWAY: &str = env!("CARGO_BIN_EXE_spillway");
const CHECK: &str = env!("CARGO_BIN_EXE_spillway-mpi-check");

fn local(args: &[&str]) -> Ran {
    let ran = run_cmd(
        SPILLWAY,
        &args.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    );
    assert_eq!(ran.code, Some(0), "{ran}");
    ran
}

/// `spillway ARGS --backend mpi` on `np` MPI processes, within `seconds`.
fn over_mpi(np: u32, seconds: u32, args: &[&str]) -> Ran {
    mpirun(
        np,
        seconds,
        &[],
        SPILLWAY,
        &[args, &["--backend", "mpi"]].concat(),
    )
}

/// The `--json` report of a successful run over MPI on `np` processes (its node count).
fn report_of(ran: &Ran, np: u32) -> serde_json::Value {
    assert_eq!(ran.code, Some(0), "{ran}");
    let report: serde_json::Value = serde_json::from_str(ran.stdout.trim()).unwrap();
    assert_eq!(report["nodes"], np);
    report
}

/// `run ALGORITHM --input INPUT --out OUT MORE`.
fn run_args<'a>(
    algorithm: &'a str,
    input: &'a Path,
    out: &'a Path,
    more: &[&'a str],
) -> Vec<&'a str> {
    [
        &["run", algorithm, "--input", s(input), "--out", s(out)][..],
        more,
    ]
    .concat()
}

/// Uniform in `[0, 1)`, from 31 bits.
fn unit31(rng: &mut Lcg) -> f64 {
    rng.bits(33) as f64 / (1u64 << 31) as f64
}

/// A skewed random graph as a SNAP edge list: n vertices, m edges, some dangling vertices.
fn write_graph(path: &Path, n: u64, m: usize) {
    let mut rng = Lcg(7);
    let mut text = String::from("# test graph\n");
    for _ in 0..m {
        let u = rng.bits(33) % n;
        let skew = unit31(&mut rng);
        let v = ((skew * skew * n as f64) as u64).min(n - 1);
        if u % 17 != 3 {
            text.push_str(&format!("{u}\t{v}\n"));
        }
    }
    // Make sure the highest id appears, so N is n.
    text.push_str(&format!("0\t{}\n", n - 1));
    std::fs::write(path, text).unwrap();
}

/// The numbers of a CSV file, row after row.
fn csv_values(path: &Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap()
        .split([',', '\n'])
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().unwrap())
        .collect()
}

fn read_ranks(path: &Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temporary path")
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

#[test]
fn point_to_point_and_collectives_at_2_and_3_processes() {
    for np in [2, 3] {
        for ranks in [np, 7] {
            let ran = mpirun(np, 120, &[], CHECK, &["comm", &ranks.to_string()]);
            assert_eq!(ran.code, Some(0), "{ran}");
            assert!(
                ran.stdout
                    .contains(&format!("ok: {ranks} ranks on {np} nodes")),
                "{ran}"
            );
        }
    }
}

#[test]
fn deadlocks_across_processes_are_reported_by_every_process() {
    let ran = mpirun(3, 60, &[], CHECK, &["deadlock", "5"]);
    assert_ne!(ran.code, Some(0), "{ran}");
    for node in 0..3 {
        assert!(
            ran.stderr.contains(&format!("(ranks of node {node} only")),
            "node {node} gave no report\n{ran}"
        );
    }
    for rank in 0..5 {
        let right = (rank + 1) % 5;
        assert!(
            ran.stderr.contains(&format!(
                "rank {rank} (node {}): blocked in receive, waiting for a message from rank {right}",
                [0, 0, 1, 1, 2][rank]
            )),
            "rank {rank}\n{ran}"
        );
    }
}

#[test]
fn a_deadlock_in_a_collective_between_processes_is_reported() {
    // One rank per process: the barrier's steps go as direct exchanges between processes.
    for np in [2, 3] {
        let ran = mpirun(
            np,
            60,
            &[],
            CHECK,
            &["deadlock-collective", &np.to_string()],
        );
        assert_ne!(ran.code, Some(0), "{ran}");
        assert!(
            ran.stderr
                .contains("rank 0 (node 0): blocked in collective barrier, waiting for"),
            "np {np}: rank 0\n{ran}"
        );
        for rank in 1..np {
            assert!(
                ran.stderr.contains(&format!(
                    "rank {rank} (node {rank}): blocked in receive, waiting for a message from rank 0"
                )),
                "np {np}: rank {rank}\n{ran}"
            );
        }
    }
}

#[test]
fn a_failing_rank_ends_the_job_on_every_process_with_its_id() {
    let ran = mpirun(3, 60, &[], CHECK, &["fail", "5"]);
    assert_ne!(ran.code, Some(0), "{ran}");
    assert_eq!(
        ran.stderr
            .matches("rank 4 failed: deliberate failure")
            .count(),
        3,
        "{ran}"
    );
    assert_eq!(
        ran.stderr.matches("node 2: rank 4 failed").count(),
        2,
        "{ran}"
    );
}

#[test]
fn hook_runs_a_job_on_an_existing_communicator() {
    for np in [2, 3] {
        let ran = mpirun(np, 60, &[], CHECK, &["hook", "7"]);
        assert_eq!(ran.code, Some(0), "{ran}");
        assert!(
            ran.stdout.contains(&format!("ok: hook on {np} processes")),
            "{ran}"
        );
    }
}

#[test]
fn survivors_of_a_lost_process_end_with_an_error_naming_it() {
    // With its default settings mpirun itself kills the others when one dies; here it is told
    // not to, so the survivors must notice on their own. mpirun may then wait for the lost
    // process's bookkeeping until the timeout: only the survivors' reports are checked.
    // Built against an MPI with ULFM, the launcher runs with it on (see tests/ulfm.rs) and
    // MPI itself reports the lost process; Open MPI 5's mpirun would still end the other
    // survivor as soon as the first one exits with a non-zero status, before it reports.
    let ulfm = spillway::mpi::built_with_ulfm();
    let extra: &[&str] = if ulfm {
        &["--prtemca", "state_base_error_non_zero_exit", "0"]
    } else {
        &["--mca", "orte_abort_on_non_zero_status", "0"]
    };
    let ran = mpirun(3, 25, extra, CHECK, &["lost", "5"]);
    let all = format!("{}{}", ran.stdout, ran.stderr);
    let named = if ulfm {
        "node 2 (MPI process 2: rank 4) was lost"
    } else {
        "node 2 (MPI process 2) was not heard from"
    };
    assert_eq!(all.matches(named).count(), 2, "{ran}");
}

#[test]
fn a_loss_while_a_process_is_in_the_end_agreement_ends_every_survivor() {
    // Node 0's ranks end at once, so its process enters the end agreement; then the last
    // process dies while the others' ranks wait for a message from it. They find the loss
    // and shrink their collectives: node 0 must join the shrink from the end agreement, and
    // every survivor must end, with the error that names the lost node, not hang.
    if !spillway::mpi::built_with_ulfm() {
        eprintln!("SKIPPED: needs an MPI with ULFM");
        return;
    }
    let extra = &["--prtemca", "state_base_error_non_zero_exit", "0"];
    for (np, ranks) in [(3, 6), (4, 8), (5, 5), (4, 8), (3, 6)] {
        let ran = mpirun(
            np,
            60,
            extra,
            CHECK,
            &["lost-after-end", &ranks.to_string()],
        );
        assert_ne!(ran.code, Some(124), "np {np}: a survivor hung\n{ran}");
        let last = np - 1;
        for p in 0..last {
            let line = ran
                .stderr
                .lines()
                .find(|l| l.starts_with(&format!("process {p} ended: ")))
                .unwrap_or_else(|| panic!("np {np}: process {p} did not end\n{ran}"));
            assert!(
                line.contains(&format!("node {last} (MPI process {last}"))
                    && line.contains("was lost"),
                "np {np}: process {p} ended without naming the lost node\n{ran}"
            );
        }
    }
}

#[test]
fn a_loss_while_the_job_starts_ends_every_survivor_the_same_way() {
    // The last process dies a few microseconds after it starts a second job: with the
    // shortest delays while the others still duplicate communicators or measure the link,
    // with longer ones in the job itself. Either every survivor ends with the start-up's
    // error or none does (then the running job names the lost node): no survivor may end
    // at the start while another runs on and waits for it in a shrink.
    if !spillway::mpi::built_with_ulfm() {
        eprintln!("SKIPPED: needs an MPI with ULFM");
        return;
    }
    let cases = [
        (4, 8, 0),
        (4, 8, 60),
        (4, 8, 120),
        (5, 10, 150),
        (6, 12, 180),
        (4, 8, 250),
        (6, 12, 100),
        (5, 10, 400),
    ];
    let mut at_start = 0;
    let mut complete = 0;
    for (np, ranks, delay_us) in cases {
        // Open MPI 5.0's ULFM sometimes takes every survivor down with the lost process (the
        // launcher reports them "aborted by signal" within milliseconds of it) or crashes one
        // (SIGSEGV in `ompi_comm_revoke_local`, called from `MPI_Comm_dup`'s activation): such a
        // survivor says nothing, and nothing of ours ran. A case is tried again until every
        // survivor ended by itself, at most 4 times; what every run's survivors said is checked.
        for _attempt in 0..4 {
            let started = lost_at_start_once(np, ranks, delay_us);
            if let Some(&first) = started.first() {
                at_start += usize::from(first);
            }
            if started.len() == np as usize - 1 {
                complete += 1;
                break;
            }
        }
    }
    assert!(
        complete * 4 >= cases.len() * 3,
        "every survivor ended by itself in only {complete} of {} cases (4 tries each)",
        cases.len()
    );
    // The shortest delays die in the start-up calls at least once (else the test does not
    // test the start).
    assert!(at_start > 0, "no loss landed in the job's start");
}

/// One run of `lost-at-start` (see the test above): for each survivor that ended by itself,
/// whether it ended with the start-up's error; every one of them names the loss, and all in
/// the same way.
fn lost_at_start_once(np: u32, ranks: u32, delay_us: u32) -> Vec<bool> {
    let extra = &["--prtemca", "state_base_error_non_zero_exit", "0"];
    let ran = mpirun(
        np,
        60,
        extra,
        CHECK,
        &["lost-at-start", &ranks.to_string(), &delay_us.to_string()],
    );
    assert_ne!(
        ran.code,
        Some(124),
        "np {np}, {delay_us} us: a survivor hung\n{ran}"
    );
    let last = np - 1;
    let mut started = Vec::new();
    for p in 0..last {
        let head = format!("process {p} ended: ");
        let Some(line) = ran.stderr.lines().find(|l| l.starts_with(&head)) else {
            continue;
        };
        let failed_at_start = line.contains("while the job started");
        assert!(
            failed_at_start || line.contains(&format!("node {last} (MPI process {last}")),
            "np {np}, {delay_us} us: process {p} ended without naming the loss\n{ran}"
        );
        started.push(failed_at_start);
    }
    assert!(
        started.iter().all(|&s| s) || started.iter().all(|&s| !s),
        "np {np}, {delay_us} us: some survivors ended at the start, others ran\n{ran}"
    );
    started
}

#[test]
fn pagerank_over_mpi_gives_the_local_backends_ranks() {
    let dir = tempdir();
    let graph = dir.path().join("graph.txt");
    write_graph(&graph, 5000, 60_000);
    let want = dir.path().join("local.txt");
    local(&run_args("pagerank", &graph, &want, &["--ranks", "6"]));
    let want_ranks = read_ranks(&want);
    for np in [2, 3] {
        let out = dir.path().join(format!("mpi{np}.txt"));
        let ran = over_mpi(
            np,
            120,
            &run_args("pagerank", &graph, &out, &["--ranks", "6", "--json"]),
        );
        let report = report_of(&ran, np);
        // Only the process holding rank 0 reports.
        assert_eq!(ran.stdout.lines().count(), 1, "{ran}");
        assert_eq!(report["backend"], "mpi");
        let got = read_ranks(&out);
        assert_eq!(got.len(), want_ranks.len());
        let l1 = l1(&got, &want_ranks);
        assert!(
            l1 <= 1e-12,
            "np={np}: L1 distance to the local backend {l1:e}"
        );
        check_reference("pagerank_ref.py", &[&graph, &out]);
    }
}

#[test]
fn kmeans_over_mpi_gives_the_local_backends_assignments() {
    let dir = tempdir();
    let points = dir.path().join("points.csv");
    write_points(&points, (6000, 4, 5), unit31);
    let km = ["--k", "5", "--iterations", "1000", "--ranks", "6"];
    let run_local = |nodes: &str, tag: &str| -> (PathBuf, PathBuf) {
        let (c, a) = (
            dir.path().join(format!("c-{tag}.csv")),
            dir.path().join(format!("a-{tag}.txt")),
        );
        let more = [&km[..], &["--nodes", nodes, "--assign", s(&a)]].concat();
        local(&run_args("kmeans", &points, &c, &more));
        (c, a)
    };
    let (c1, a1) = run_local("1", "local1");
    let read = |p: &Path| std::fs::read(p).unwrap();
    for np in [2u32, 3] {
        let (c, a) = (
            dir.path().join(format!("c-mpi{np}.csv")),
            dir.path().join(format!("a-mpi{np}.txt")),
        );
        let more = [&km[..], &["--assign", s(&a)]].concat();
        let ran = over_mpi(np, 120, &run_args("kmeans", &points, &c, &more));
        assert_eq!(ran.code, Some(0), "{ran}");
        assert_eq!(
            read(&a),
            read(&a1),
            "np={np}: assignments differ from the local backend"
        );
        // The same node layout on the local backend combines partial sums in the same order.
        let (cl, _) = run_local(&np.to_string(), &format!("local{np}"));
        assert_eq!(
            read(&c),
            read(&cl),
            "np={np}: centroids differ from the local backend"
        );
        let max_diff = max_abs_diff(&csv_values(&c), &csv_values(&c1));
        assert!(
            max_diff <= 1e-9,
            "np={np}: centroids differ by {max_diff:e}"
        );
    }
}

#[test]
fn memory_budget_and_message_spilling_work_per_node_over_mpi() {
    let dir = tempdir();
    let graph = dir.path().join("graph.txt");
    write_graph(&graph, 100_000, 1_000_000);
    let want = dir.path().join("local.txt");
    let pr = ["--ranks", "8", "--iterations", "5"];
    local(&run_args("pagerank", &graph, &want, &pr));
    let out = dir.path().join("mpi.txt");
    let more = [
        &pr[..],
        &["--running", "1", "--mem-budget", "256K", "--json"],
    ]
    .concat();
    let ran = over_mpi(2, 120, &run_args("pagerank", &graph, &out, &more));
    assert_eq!(ran.code, Some(0), "{ran}");
    let report: serde_json::Value = serde_json::from_str(ran.stdout.trim()).unwrap();
    assert!(report["spill_bytes_written"].as_u64().unwrap() > 0, "{ran}");
    assert!(report["messages_spilled"].as_u64().unwrap() > 0, "{ran}");
    let (got, want) = (read_ranks(&out), read_ranks(&want));
    assert_eq!(got.len(), want.len());
    let l1 = l1(&got, &want);
    assert!(
        l1 <= 1e-12,
        "L1 distance to the local backend {l1:e} under a memory budget"
    );
}

/// Complex values "re im" per line, from the test's own generator.
fn write_complex(path: &Path, n: usize) {
    let mut rng = Lcg(23);
    let text: String = (0..n)
        .map(|_| {
            format!(
                "{:?} {:?}\n",
                unit31(&mut rng) - 0.5,
                unit31(&mut rng) - 0.5
            )
        })
        .collect();
    std::fs::write(path, text).unwrap();
}

fn read_floats(path: &Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap()
        .split_ascii_whitespace()
        .map(|t| t.parse().unwrap())
        .collect()
}

#[test]
fn fft_over_mpi_gives_the_local_backends_output() {
    let dir = tempdir();
    let input = dir.path().join("x.txt");
    write_complex(&input, 1 << 12);
    let want = dir.path().join("local.txt");
    local(&run_args(
        "fft",
        &input,
        &want,
        &["--ranks", "4", "--nodes", "2"],
    ));
    let want_values = read_floats(&want);
    for np in [2, 3] {
        let out = dir.path().join(format!("mpi{np}.txt"));
        let ran = over_mpi(
            np,
            120,
            &run_args("fft", &input, &out, &["--ranks", "4", "--json"]),
        );
        report_of(&ran, np);
        let got = read_floats(&out);
        assert_eq!(got.len(), want_values.len());
        let worst = max_abs_diff(&got, &want_values);
        assert!(
            worst <= 1e-12,
            "np={np}: differs from the local backend by {worst:e}"
        );
        check_reference("fft_ref.py", &[&input, &out]);
    }
}

#[test]
fn sample_sort_over_mpi_gives_the_sorted_values() {
    let dir = tempdir();
    let input = dir.path().join("v.bin");
    let mut rng = Lcg(31);
    let values: Vec<u64> = (0..50_001).map(|_| rng.bits(33) % 10_000).collect();
    write_u64s(&input, &values);
    let mut want = values.clone();
    want.sort();
    for np in [2, 3] {
        let out = dir.path().join(format!("sorted{np}.bin"));
        let ran = over_mpi(np, 120, &run_args("sort", &input, &out, &["--ranks", "5"]));
        assert_eq!(ran.code, Some(0), "{ran}");
        let got = read_u64s(&out);
        assert!(got == want, "np={np}: not the sorted input");
    }
}

/// A sparse matrix in Matrix Market coordinate form with `rows` rows of 3..12 entries.
fn write_sparse(path: &Path, rows: usize, cols: usize, seed: u64) {
    let mut rng = Lcg(seed);
    let mut entries = Vec::new();
    for i in 0..rows {
        for _ in 0..3 + rng.bits(33) % 10 {
            let j = rng.bits(33) as usize % cols;
            entries.push(format!(
                "{} {} {:.6}\n",
                i + 1,
                j + 1,
                0.1 + unit31(&mut rng)
            ));
        }
    }
    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n{rows} {cols} {}\n",
        entries.len()
    );
    text.extend(entries);
    std::fs::write(path, text).unwrap();
}

/// A command's name, its arguments, and its output flags with their files.
type Case<'a> = (&'a str, Vec<String>, Vec<(&'a str, std::path::PathBuf)>);

/// Connected components (direct engine), colouring, spherical K-means, SGD and the large-k
/// K-means over MPI at 2 and 3 processes give what the local backend gives with as many
/// virtual nodes (outputs byte for byte; the large-k K-means: the same assignments).
#[test]
fn sparse_and_large_k_algorithms_over_mpi_give_the_local_backends_output() {
    let dir = tempdir();
    let graph = dir.path().join("g.txt");
    write_graph(&graph, 600, 5000);
    let sparse = dir.path().join("a.mtx");
    write_sparse(&sparse, 800, 150, 41);
    let ratings = dir.path().join("r.mtx");
    write_sparse(&ratings, 300, 200, 43);
    for np in [2u32, 3] {
        let nodes = np.to_string();
        let d = dir.path();
        let o = |name: &str, how: &str| d.join(format!("{name}-{how}-{np}"));
        let cases: Vec<Case> = vec![
            (
                "cc",
                vec![
                    "run".into(),
                    "cc".into(),
                    "--input".into(),
                    s(&graph).into(),
                ],
                vec![("--out", o("cc", ""))],
            ),
            (
                "colour",
                vec![
                    "run".into(),
                    "colour".into(),
                    "--input".into(),
                    s(&graph).into(),
                ],
                vec![("--out", o("colour", ""))],
            ),
            (
                "spkmeans",
                vec![
                    "run".into(),
                    "spkmeans".into(),
                    "--input".into(),
                    s(&sparse).into(),
                    "--k".into(),
                    "6".into(),
                ],
                vec![("--out", o("spk-c", "")), ("--assign", o("spk-a", ""))],
            ),
            (
                "sgd",
                vec![
                    "run".into(),
                    "sgd".into(),
                    "--input".into(),
                    s(&ratings).into(),
                ],
                vec![("--out-u", o("sgd-u", "")), ("--out-v", o("sgd-v", ""))],
            ),
            (
                "kmeans-regroup",
                vec![
                    "run".into(),
                    "kmeans".into(),
                    "--generate".into(),
                    "blobs:6000:8:16:1".into(),
                    "--k".into(),
                    "400".into(),
                    "--collective".into(),
                    "regroup".into(),
                    "--iterations".into(),
                    "3".into(),
                ],
                vec![("--assign", o("km-a", ""))],
            ),
        ];
        for (name, args, outputs) in cases {
            let with = |how: &str| -> Vec<String> {
                let mut a = args.clone();
                a.extend(["--ranks".into(), "4".into()]);
                for (flag, path) in &outputs {
                    a.push((*flag).into());
                    a.push(format!("{}{how}", path.display()));
                }
                a
            };
            let mut loc = with(".local");
            loc.extend(["--nodes".into(), nodes.clone()]);
            local(&loc.iter().map(String::as_str).collect::<Vec<_>>());
            let mut mpi = with(".mpi");
            mpi.extend(["--backend".into(), "mpi".into()]);
            let ran = mpirun(
                np,
                180,
                &[],
                SPILLWAY,
                &mpi.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            assert_eq!(ran.code, Some(0), "{name}: {ran}");
            for (flag, path) in &outputs {
                let a = std::fs::read(format!("{}.local", path.display())).unwrap();
                let b = std::fs::read(format!("{}.mpi", path.display())).unwrap();
                assert!(!a.is_empty(), "{name} {flag}: empty output");
                assert!(
                    a == b,
                    "{name} {flag} at np={np}: MPI output differs from the local backend's"
                );
            }
        }
    }
}

#[test]
fn fault_tolerant_mapreduce_over_mpi_survives_a_lost_process() {
    // A lost node here is one MPI process whose ranks all leave the job (the process stays
    // up: MPI without ULFM cannot let the others go on after a process dies, see
    // `survivors_of_a_lost_process_end_with_an_error_naming_it`).
    let dir = tempdir();
    let graph = dir.path().join("graph.txt");
    write_graph(&graph, 3000, 8000);
    let want = dir.path().join("local.txt");
    local(&run_args("cc", &graph, &want, &["--ranks", "6"]));
    let want = sorted_lines(&want);
    for (np, spec) in [(2, "node:1@op:1"), (3, "node:0@op:3"), (3, "rank:4@op:2")] {
        let out = dir.path().join(format!("mpi{np}.txt"));
        let more = [
            "--engine",
            "mapreduce",
            "--ranks",
            "6",
            "--inject-failure",
            spec,
            "--json",
        ];
        let ran = over_mpi(np, 120, &run_args("cc", &graph, &out, &more));
        assert_eq!(ran.code, Some(0), "{ran}");
        // One report, from the process holding the first surviving rank.
        assert_eq!(ran.stdout.lines().count(), 1, "{ran}");
        let report: serde_json::Value = serde_json::from_str(ran.stdout.trim()).unwrap();
        let recoveries = report["fault_tolerance"]["recoveries"].as_array().unwrap();
        assert_eq!(recoveries.len(), 1, "{ran}");
        assert_eq!(sorted_lines(&out), want, "np={np} {spec}");
    }
}

/// `spillway probe` over MPI: every process is a node, so the cache is kept per process count;
/// the second run of a layout reads it and names the file the first one wrote.
#[test]
fn probe_over_mpi_caches_each_process_count() {
    let dir = tempdir();
    let launcher = std::env::var("SPILLWAY_MPIRUN").unwrap_or_else(|_| "mpirun".into());
    let probe = |np: u32| -> serde_json::Value {
        let np = np.to_string();
        let args = [
            "120",
            &launcher,
            "-np",
            &np,
            SPILLWAY,
            "probe",
            "--backend",
            "mpi",
            "--ranks",
            "4",
            "--min-bytes",
            "1K",
            "--max-bytes",
            "8K",
            "--reps",
            "1",
            "--json",
        ];
        let out = Command::new("timeout")
            .args(args)
            .env("SPILLWAY_PROBE_CACHE", dir.path())
            .output()
            .expect("timeout and mpirun run");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "np={np}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("np={np}: {e}: {text}"))
    };
    let first = probe(2);
    assert_eq!(first["cached"], false);
    assert_eq!(first["nodes"], 2);
    let file = first["cache"].as_str().expect("a cache file").to_owned();
    assert!(Path::new(&file).exists(), "{file} was not written");
    let again = probe(2);
    assert_eq!(again["cached"], true, "the second run measured again");
    assert_eq!(again["cache"].as_str(), Some(file.as_str()));
    let other = probe(3);
    assert_eq!(other["cached"], false, "3 processes read the layout of 2");
    assert_eq!(other["nodes"], 3);
}
