//! Finds out, for the `mpi` feature, whether the MPI library implements ULFM (User-Level
//! Failure Mitigation: `mpi-ext.h` declaring `MPIX_Comm_revoke`, `MPIX_Comm_shrink`,
//! `MPIX_Comm_iagree`, `MPIX_Comm_failure_ack`, `MPIX_Comm_failure_get_acked` and the
//! `MPIX_ERR_*` classes, as Open MPI 5 does).
//!
//! It compiles and links a small C program with the MPI compiler wrapper the `mpi` crate uses
//! (`$MPICC`, else `mpicc`) and runs it (it does not initialise MPI) to read the error
//! classes. With ULFM it sets the `spillway_ulfm` cfg and writes the constants to
//! `$OUT_DIR/ulfm.rs`; without (Open MPI 4, MPICH) the engine ends a job when a process is
//! lost. `SPILLWAY_ULFM=0` turns the probe off.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROBE: &str = r#"
#include <stdio.h>
#include <mpi.h>
#include <mpi-ext.h>
#if !defined(MPIX_ERR_PROC_FAILED) || !defined(MPIX_ERR_PROC_FAILED_PENDING) || !defined(MPIX_ERR_REVOKED)
#error "no ULFM error classes"
#endif
int main(int argc, char **argv) {
    if (argc > 5) {
        /* Never run: makes the linker resolve the ULFM functions. */
        MPI_Comm comm = MPI_COMM_WORLD, shrunk;
        MPI_Group group;
        MPI_Request request;
        int flag = 0;
        MPIX_Comm_revoke(comm);
        MPIX_Comm_shrink(comm, &shrunk);
        MPIX_Comm_iagree(comm, &flag, &request);
        MPIX_Comm_failure_ack(comm);
        MPIX_Comm_failure_get_acked(comm, &group);
    }
    printf("%d %d %d\n", (int)MPIX_ERR_PROC_FAILED, (int)MPIX_ERR_PROC_FAILED_PENDING,
           (int)MPIX_ERR_REVOKED);
#if defined(OMPI_MAJOR_VERSION)
    printf("Open MPI v%d.%d.%d\n", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
    printf("MPICH Version: %s\n", MPICH_VERSION);
#else
    printf("\n");
#endif
    return 0;
}
"#;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(spillway_ulfm)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=MPICC");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=SPILLWAY_ULFM");
    if std::env::var_os("CARGO_FEATURE_MPI").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let constants = out.join("ulfm.rs");
    let found = if std::env::var("SPILLWAY_ULFM").is_ok_and(|v| v == "0") {
        None
    } else {
        probe(&out)
    };
    let text = match &found {
        Some((classes, version)) => {
            println!("cargo::rustc-cfg=spillway_ulfm");
            format!(
                "/// `MPIX_ERR_PROC_FAILED`.\npub(super) const ERR_PROC_FAILED: std::ffi::c_int = {};\n\
                 /// `MPIX_ERR_PROC_FAILED_PENDING`.\npub(super) const ERR_PROC_FAILED_PENDING: std::ffi::c_int = {};\n\
                 /// `MPIX_ERR_REVOKED`.\npub(super) const ERR_REVOKED: std::ffi::c_int = {};\n\
                 /// The MPI library the engine was built against.\npub(super) const BUILT_WITH: &str = {:?};\n",
                classes[0], classes[1], classes[2], version
            )
        }
        None => String::new(),
    };
    std::fs::write(&constants, text).expect("cannot write the ULFM constants");
}

/// Compiles, links and runs the probe; returns the three error classes and the version line.
fn probe(out: &Path) -> Option<([i32; 3], String)> {
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let source = out.join("ulfm_probe.c");
    let binary = out.join("ulfm_probe");
    std::fs::write(&source, PROBE).ok()?;
    let compiled = Command::new(&mpicc)
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .output()
        .ok()?;
    if !compiled.status.success() {
        return None;
    }
    let ran = Command::new(&binary).output().ok()?;
    if !ran.status.success() {
        println!(
            "cargo::warning=the ULFM probe built but did not run ({}): building without ULFM",
            String::from_utf8_lossy(&ran.stderr).trim()
        );
        return None;
    }
    let text = String::from_utf8_lossy(&ran.stdout).into_owned();
    let mut lines = text.lines();
    let numbers: Vec<i32> = lines
        .next()?
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let classes: [i32; 3] = numbers.try_into().ok()?;
    Some((classes, lines.next().unwrap_or("").trim().to_string()))
}
