//! `lpf_hook` over MPI: `tests/c/mpi_hook.c`, compiled with `mpicc`, under `mpirun` at 1 to 3
//! processes, with one and with three LPF processes per MPI process.
#![cfg(feature = "mpi")]

use std::path::PathBuf;
use std::process::Command;

fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    // deps/ first: where a test build writes the library (target/<profile> may hold a stale
    // copy from `cargo build`, possibly without the `mpi` feature).
    let found = [deps, deps.parent().unwrap()]
        .into_iter()
        .find(|d| d.join("libspillway_lpf.so").exists())
        .expect("libspillway_lpf.so next to the test")
        .to_path_buf();
    found
}

#[test]
fn hook_on_mpi_comm_world() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lpf-mpi-hook");
    let lib = lib_dir();
    let ok = Command::new("mpicc")
        .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(dir.join("include"))
        .arg(dir.join("tests/c/mpi_hook.c"))
        .arg("-o")
        .arg(&out)
        .arg("-L")
        .arg(&lib)
        .arg("-lspillway_lpf")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lm")
        .status()
        .expect("mpicc");
    assert!(ok.success(), "mpicc failed");
    for (np, per) in [(1, "1"), (2, "1"), (3, "1"), (2, "3")] {
        let r = Command::new("timeout")
            .args([
                "120",
                "mpirun",
                "--allow-run-as-root",
                "--oversubscribe",
                "-np",
            ])
            .arg(np.to_string())
            .args(["-x", "SPILLWAY_LPF_PROCS_PER_RANK"])
            .arg(&out)
            .env("SPILLWAY_LPF_PROCS_PER_RANK", per)
            // The program finds the library through its run path; cargo's LD_LIBRARY_PATH
            // would take precedence and may name a stale copy without the MPI hook.
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .expect("mpirun");
        assert!(
            r.status.success(),
            "mpirun -np {np} with {per} LPF processes per rank: {:?}\n{}{}",
            r.status,
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr)
        );
    }
}
