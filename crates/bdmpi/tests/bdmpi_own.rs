//! BDMPI's own programs against this crate: the twelve test programs of BDMPI's `test/` and
//! its applications pr1d (both modes), sphkmeans and samplesort, compiled against BDMPI's own
//! header and linked with `libbdmpi.so`, run under `bdmprun` at `-ns` 1..8 and `-nr` 1..2
//! and compared with the same sources built as plain MPI programs under `mpirun`
//! (`scripts/bdmpi_suite.sh` does the work; it also checks that BDMPI's header compiles
//! without warnings and that everything it declares links).
//!
//! BDMPI and GKlib are not part of this repository: the test runs when
//! `SPILLWAY_BDMPI_SRC` and `SPILLWAY_GKLIB_SRC` name checkouts of
//! <https://github.com/jiverson002/bdmpi> and <https://github.com/jiverson002/GKlib>, and
//! is skipped with a message otherwise. `BDMPI_SUITE_NS`, `BDMPI_SUITE_NR` and
//! `BDMPI_SUITE_REPEAT` narrow or widen the layouts (see the script).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory of the `libbdmpi.so` built with this test.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let deps = exe.parent().expect("deps directory");
    let dir = [deps, deps.parent().expect("profile directory")]
        .into_iter()
        .find(|d| d.join("libbdmpi.so").exists())
        .unwrap_or_else(|| panic!("libbdmpi.so not found next to {}", exe.display()))
        .to_path_buf();
    dir
}

/// The checkout named by `var`, if it is set and holds `marker`.
fn checkout(var: &str, marker: &str) -> Result<PathBuf, String> {
    let dir = std::env::var_os(var).ok_or_else(|| format!("{var} is not set"))?;
    let dir = PathBuf::from(dir);
    if dir.join(marker).is_file() {
        Ok(dir)
    } else {
        Err(format!("{var}={} holds no {marker}", dir.display()))
    }
}

#[test]
fn bdmpi_own_programs() {
    let (bdmpi, gklib) = match (
        checkout("SPILLWAY_BDMPI_SRC", "include/bdmpi.h"),
        checkout("SPILLWAY_GKLIB_SRC", "GKlib.h"),
    ) {
        (Ok(b), Ok(g)) => (b, g),
        (b, g) => {
            let why: Vec<String> = [b.err(), g.err()].into_iter().flatten().collect();
            eprintln!(
                "SKIPPED: BDMPI's own programs need checkouts of BDMPI and GKlib ({})",
                why.join("; ")
            );
            return;
        }
    };
    // The script's bdmprun and library: this test's build, side by side in one directory.
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_bdmprun"), bin.path().join("bdmprun")).unwrap();
    std::os::unix::fs::symlink(
        lib_dir().join("libbdmpi.so"),
        bin.path().join("libbdmpi.so"),
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bdmpi_suite.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(&bdmpi)
        .arg(&gklib)
        .env("BDMPI_SUITE_BIN", bin.path())
        .env_remove("BDMPI_SUITE_NODES")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "scripts/bdmpi_suite.sh failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let header = stdout
        .lines()
        .find(|l| l.starts_with("header: "))
        .unwrap_or("");
    assert!(
        header.contains("compiles without warnings"),
        "no header check in the output:\n{stdout}"
    );
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("passed "))
        .unwrap_or_else(|| panic!("no summary line in the output:\n{stdout}"));
    assert!(
        summary.ends_with("failed 0") && !summary.starts_with("passed 0,"),
        "{summary}"
    );
}
