//! The programs of `tests/c-vs-mpi` against plain MPI. Each is built twice from one source:
//! against this crate's header, linked with `libbdmpi` and run under `bdmprun` at `-ns` 1..8
//! and `-nr` 1..3; and against our shim `tests/mpi-shim/bdmpi.h` with `mpicc`, run under
//! `mpirun -np NS`. A program checks its own results (formulas, a sequential computation) and
//! exits non-zero when a check fails; it also prints result lines, and the sorted lines of
//! every `bdmprun` run must equal those of the `mpirun` run with as many ranks.
//!
//! The `bdmprun` runs take turns through the storage-backed memory policies and, with a
//! 4 MiB memory limit and `-im 1`, messages in files, so that every program meets each.
//!
//! Without `mpicc` and `mpirun` on the PATH the comparison is skipped with a message (the
//! programs still run under `bdmprun` and check themselves), unless `SPILLWAY_REQUIRE_MPI=1`,
//! which makes that a failure.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The options of the bdmprun runs, in turn (run k of a program uses `VARIANTS[k % 5]`).
const VARIANTS: [&[&str]; 5] = [
    &[],
    &["-sbma", "araw"],
    &["-sbma", "lraw", "-im", "1", "-rm", "1024"],
    &["-sbma", "arlw", "-nc", "2"],
    &["-sbma", "lrlw", "-im", "1", "-rm", "1024"],
];

/// Open MPI refuses to run as root without these; the ranks outnumber the cores.
const MPIRUN_ENV: [(&str, &str); 3] = [
    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
    ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
];

fn programs_dir() -> PathBuf {
    crate_dir().join("tests/c-vs-mpi")
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(tool)).is_ok_and(|m| {
                m.is_file() && {
                    use std::os::unix::fs::PermissionsExt;
                    m.permissions().mode() & 0o111 != 0
                }
            })
        })
    })
}

/// Whether the comparison with MPI runs: `mpicc` and `mpirun` on the PATH. Without them it
/// is skipped with a message, or fails under `SPILLWAY_REQUIRE_MPI=1`.
fn have_mpi() -> bool {
    static HAVE: OnceLock<bool> = OnceLock::new();
    let have = *HAVE.get_or_init(|| on_path("mpicc") && on_path("mpirun"));
    if !have {
        let required = std::env::var("SPILLWAY_REQUIRE_MPI").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "SPILLWAY_REQUIRE_MPI=1, but mpicc and mpirun are not both on the PATH"
        );
        eprintln!(
            "SKIPPED: the comparison with plain MPI (mpicc and mpirun are not both on the \
             PATH); the programs run under bdmprun only"
        );
    }
    have
}

/// The lines a run printed that are compared: all but Print_vm_info's (`[...`), sorted.
fn result_lines(stdout: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.starts_with('['))
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// What differs between two sorted sets of lines (at most 20 of each side).
fn difference(mpi: &[String], ours: &[String]) -> String {
    let (a, b): (BTreeSet<_>, BTreeSet<_>) = (mpi.iter().collect(), ours.iter().collect());
    let only_mpi: Vec<_> = a.difference(&b).take(20).collect();
    let only_ours: Vec<_> = b.difference(&a).take(20).collect();
    format!(
        "{} lines under mpirun, {} under bdmprun\nonly under mpirun: {only_mpi:#?}\nonly under bdmprun: {only_ours:#?}",
        mpi.len(),
        ours.len()
    )
}

/// Compiles `tests/c-vs-mpi/<name>.c` as a plain MPI program with the shim header.
fn build_for_mpi(name: &str) -> PathBuf {
    build_once(&format!("mpi_{name}"), |out| {
        let mut cmd = Command::new("mpicc");
        cmd.args(["-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
            .arg(crate_dir().join("tests/mpi-shim"))
            .arg(programs_dir().join(format!("{name}.c")))
            .arg("-o")
            .arg(out)
            .arg("-lm");
        cmd
    })
}

/// Runs `exe args` under `mpirun -np ns`, each rank's output to a file of its own (mpirun
/// forwards output in the pieces the ranks write it in, so lines of different ranks could
/// mix), and returns every rank's compared lines.
fn mpirun(exe: &Path, ns: u32, args: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("out");
    let (out, _) = run_limited(
        Command::new("mpirun")
            .arg("-np")
            .arg(ns.to_string())
            .arg("--output-filename")
            .arg(&files)
            .arg(exe)
            .args(args)
            .current_dir(dir.path())
            .envs(MPIRUN_ENV),
        Duration::from_secs(120),
    );
    let mut stdout = Vec::new();
    let mut todo = vec![files];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten() {
            let path = e.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.file_name().is_some_and(|n| n == "stdout") {
                stdout.extend(std::fs::read(&path).unwrap());
                if stdout.last().is_some_and(|&b| b != b'\n') {
                    stdout.push(b'\n');
                }
            }
        }
    }
    assert!(
        out.status.success(),
        "mpirun -np {ns} {} {args:?}: {:?}\n{}\nranks' output:\n{}",
        exe.display(),
        out.status,
        text(&out),
        String::from_utf8_lossy(&stdout)
    );
    result_lines(&stdout)
}

/// Runs the program `name` with `args` at every layout under bdmprun and, when MPI is there,
/// under mpirun at every -ns, and compares the outputs.
fn compare(name: &str, args: &[&str]) {
    let src = programs_dir().join(format!("{name}.c"));
    let ours = build_with_libbdmpi(&src, &format!("bd_{name}"), false);
    let theirs = have_mpi().then(|| build_for_mpi(name));
    let mut compared = 0;
    let mut reference: Option<(u32, Vec<String>)> = None;
    for (k, (ns, nr)) in layouts().into_iter().enumerate() {
        if let Some(exe) = &theirs {
            if reference.as_ref().is_none_or(|(n, _)| *n != ns) {
                reference = Some((ns, mpirun(exe, ns, args)));
            }
        }
        let (ns_s, nr_s) = (ns.to_string(), nr.to_string());
        let mut opts = vec!["-ns", &ns_s, "-nr", &nr_s];
        opts.extend_from_slice(VARIANTS[k % VARIANTS.len()]);
        let run = bdmprun_run(&opts, &ours, args, &[], Duration::from_secs(120));
        let what = format!("{name} {args:?} under bdmprun {opts:?}");
        expect(&run, 0, &what);
        let lines = result_lines(&run.out.stdout);
        assert!(!lines.is_empty(), "{what} printed nothing");
        if let Some((_, want)) = &reference {
            assert!(
                lines == *want,
                "{what} differs from mpirun -np {ns}:\n{}",
                difference(want, &lines)
            );
            compared += 1;
        }
    }
    eprintln!(
        "{name}: {} bdmprun runs, {compared} compared with mpirun",
        layouts().len()
    );
}

/// The functions our header declares (`BDMPI_*` and the `MPI_*` names it provides).
fn declared_functions() -> BTreeSet<String> {
    let header = std::fs::read_to_string(crate_dir().join("include/bdmpi.h")).unwrap();
    let mut names = BTreeSet::new();
    for line in header.lines() {
        let decl = line.trim_start();
        if !(decl.starts_with("int ") || decl.starts_with("void ") || decl.starts_with("double ")) {
            continue;
        }
        let Some(open) = decl.find('(') else { continue };
        let name = decl[..open].rsplit([' ', '*']).next().unwrap();
        if name.starts_with("BDMPI_") || name.starts_with("MPI_") {
            names.insert(name.to_string());
        }
    }
    names
}

/// Whether `text` has `name(`, not as the end of a longer name.
fn names_call(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && text[at + name.len()..].starts_with('(')
    })
}

#[test]
fn every_declared_function_is_called_by_a_program_and_in_the_shim() {
    let declared = declared_functions();
    // 56 BDMPI_* and 42 MPI_* functions when this test was written: the parse works.
    assert!(declared.len() >= 98, "{declared:?}");
    // Each program with the headers it includes by a quoted path.
    let mut sources = String::new();
    for e in std::fs::read_dir(programs_dir()).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "c") {
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text.lines() {
                if let Some(name) = line
                    .strip_prefix("#include \"")
                    .and_then(|l| l.strip_suffix('"'))
                {
                    sources += &std::fs::read_to_string(programs_dir().join(name)).unwrap();
                }
            }
            sources += &text;
        }
    }
    let shim = std::fs::read_to_string(crate_dir().join("tests/mpi-shim/bdmpi.h")).unwrap();
    let uncalled: Vec<_> = declared
        .iter()
        .filter(|n| !names_call(&sources, n))
        .collect();
    assert!(
        uncalled.is_empty(),
        "declared in bdmpi.h but called by no program of tests/c-vs-mpi: {uncalled:?}"
    );
    // The MPI_* names of MPI itself come from mpi.h; BDMPI's own must be in the shim.
    let missing: Vec<_> = declared
        .iter()
        .filter(|n| n.starts_with("BDMPI_"))
        .filter(|n| !names_call(&shim, n) && !shim.contains(&format!("#define {n} ")))
        .collect();
    assert!(
        missing.is_empty(),
        "not provided by tests/mpi-shim/bdmpi.h: {missing:?}"
    );
}

#[test]
fn point_to_point_as_under_mpi() {
    compare("pt2pt", &[]);
}

#[test]
fn collectives_as_under_mpi() {
    compare("colls", &[]);
}

#[test]
fn reductions_as_under_mpi() {
    compare("reductions", &[]);
}

#[test]
fn communicators_as_under_mpi() {
    compare("comms", &[]);
}

#[test]
fn storage_backed_memory_critical_sections_and_locks_as_under_mpi() {
    compare("extras", &[]);
}

#[test]
fn pagerank_as_under_mpi() {
    compare("pagerank", &["3000", "8", "15"]);
}

#[test]
fn sample_sort_as_under_mpi() {
    compare("samplesort", &["20000"]);
}

#[test]
fn spherical_kmeans_as_under_mpi() {
    compare("sphkmeans", &["4000", "300", "10", "25"]);
}
