//! `spillway-bench`: benchmarks of spillway against baselines measured in the same run.
//!
//! ```text
//! spillway-bench collectives [--backend local|mpi] [--ranks R] [--nodes K] [--running X]
//!                             [--sizes 1K,64K,1M,16M] [--reps N] [--ops allreduce,bcast,alltoall]
//!                             [--json FILE]
//! spillway-bench pagerank [--scale 18] [--edge-factor 16] [--ranks 8] [--nodes 1] [--iterations 10] [--reps 7]
//! spillway-bench dyngraph [--scale 20] [--edge-factor 16] [--structures ll,bcsr,daa,diaa,dcaa] [--fold fraction:0.25] [--time-limit 600]
//! ```
//!
//! Every measurement is repeated and summarised by its median and minimum ([`harness::Stats`]);
//! every figure comes with a baseline timed in the same process on the same machine (a
//! single-threaded `memcpy` for the collectives, a sequential CSR PageRank for PageRank), and
//! results are checked before they are timed. Tables are printed as Markdown on stdout,
//! progress on stderr. `scripts/bench.sh` builds and runs both subcommands;
//! `scripts/bench_mpi.sh` runs `collectives --backend mpi` (feature `mpi`) under `mpirun` against
//! the MPI library's own `MPI_Bcast` and `MPI_Allreduce`.
#![forbid(unsafe_code)]

mod collectives;
mod dyngraph;
mod harness;
mod pagerank;

use std::process::ExitCode;

fn usage() -> String {
    format!(
        "usage: spillway-bench <subcommand> [options]\n\n  {}\n\n  {}\n\n  {}",
        collectives::USAGE,
        pagerank::USAGE,
        dyngraph::USAGE
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("collectives") => collectives::main(&args[1..]),
        Some("pagerank") => pagerank::main(&args[1..]),
        Some("dyngraph") => dyngraph::main(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{}", usage());
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{}", usage());
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("spillway-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
