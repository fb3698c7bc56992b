//! Several nodes: `mpirun -np N bdmprun -ns K program`, one bdmprun per MPI process, the job's
//! N x K ranks talking through spillway's MPI backend. The C programs of `tests/c` check every
//! call against their own expectations, with the node layout (node count and index, local size
//! and rank, the lowest rank of a node, the cyclic world) taken from the environment the test
//! sets.
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::Command;

fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let found = [deps, deps.parent().unwrap()]
        .into_iter()
        .find(|d| d.join("libbdmpi.so").exists())
        .expect("libbdmpi.so next to the test")
        .to_path_buf();
    found
}

fn program(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("bdmpi-mpi")
        .join(std::process::id().to_string());
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join(name);
    let lib = lib_dir();
    let ok = Command::new("cc")
        .args(["-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(dir.join("include"))
        .arg(dir.join("tests/c").join(format!("{name}.c")))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg("-lbdmpi")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lrt", "-lm"])
        .status()
        .expect("cc");
    assert!(ok.success(), "compiling {name}.c failed");
    exe
}

fn run(exe: &Path, nodes: u32, ns: u32, nr: u32, extra: &[&str]) {
    let wd = tempfile::tempdir().unwrap();
    let r = Command::new("timeout")
        .args([
            "180",
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
        ])
        .arg(nodes.to_string())
        .args([
            "-x",
            "BDMPI_TEST_NS",
            "-x",
            "BDMPI_TEST_NODES",
            "-x",
            "BDMPI_TEST_SBMA",
        ])
        .arg(env!("CARGO_BIN_EXE_bdmprun"))
        .args(["-ns", &ns.to_string(), "-nr", &nr.to_string(), "-wd"])
        .arg(wd.path())
        .args(extra)
        .arg(exe)
        .env("BDMPI_TEST_NS", ns.to_string())
        .env("BDMPI_TEST_NODES", nodes.to_string())
        .env("BDMPI_TEST_SBMA", "araw")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("mpirun");
    assert!(
        r.status.success(),
        "mpirun -np {nodes} bdmprun -ns {ns} -nr {nr} {extra:?} {}: {:?}\n{}{}",
        exe.display(),
        r.status,
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(wd.path()).unwrap().collect();
    assert!(left.is_empty(), "files left in -wd: {left:?}");
}

#[test]
fn every_call_on_several_nodes() {
    for name in ["comm", "p2p", "coll", "reduce"] {
        let exe = program(name);
        for (nodes, ns, nr) in [(2, 4, 2), (3, 2, 1), (2, 1, 1)] {
            run(&exe, nodes, ns, nr, &[]);
        }
    }
    let exe = program("sb");
    run(&exe, 2, 3, 2, &["-sbma", "araw"]);
}
