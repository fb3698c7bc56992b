//! `spillway-bench`: benchmarks of spillway against baselines measured in the same run.
//!
//! ```text
//! spillway-bench collectives [--backend local|mpi] [--ranks R] [--nodes K] [--running X]
//!                             [--sizes 1K,64K,1M,16M] [--reps N] [--ops allreduce,bcast,alltoall]
//!                             [--json FILE]
//! spillway-bench pagerank [--scale 18] [--edge-factor 16] [--ranks 8] [--nodes 1] [--iterations 10] [--reps 7]
//! spillway-bench scale [--ranks 64,256,1024,4096] [--running 2] [--rounds 20] [--barrier-ranks 10000]
//! spillway-bench bsp [--what exchange,fft,sort,model] [--ranks 2] [--exchange-bytes 64M]
//!                     [--fft-log 24] [--sort-log 27] [--model-max 256M] [--python PY]
//! spillway-bench mapreduce [--input FILE | --generate 256M] [--ranks 1,2] [--nodes 1] [--reps 3]
//! spillway-bench dyngraph [--scale 20] [--edge-factor 16] [--structures ll,bcsr,daa,diaa,dcaa] [--fold fraction:0.25] [--time-limit 600]
//!                         [--mode batch|single] [--load-batch 0.01] [--batches 0.001,0.01,0.1] [--update-reps 5]
//! spillway-bench dyngraph --mode query [--scale 20] [--graphs rmat,rgg] [--snapshots 8] [--alphas 10,50,200]
//!                         [--queries 10000] [--reps 3] [--insert single|batch] [--json FILE] [--python PY]
//! spillway-bench serial-ooc build (--generate rmat:S:E | --edge-list FILE) --out FILE
//! spillway-bench serial-ooc pagerank --graph FILE [--iterations 10] [--io direct|buffered|memory] [--out RANKS] [--json]
//! spillway-bench serial-ooc compare A B [--tolerance 1e-9]
//! ```
//!
//! Every measurement is repeated and summarised by its median and minimum ([`harness::Stats`]);
//! every figure comes with a baseline timed in the same process on the same machine (a
//! single-threaded `memcpy` for the collectives, a sequential CSR PageRank for PageRank), and
//! results are checked before they are timed. Tables are printed as Markdown on stdout,
//! progress on stderr. `scripts/bench.sh` builds and runs the subcommands;
//! `scripts/bench_mpi.sh` runs `collectives --backend mpi` (feature `mpi`) under `mpirun` against
//! the MPI library's own `MPI_Bcast` and `MPI_Allreduce`. `serial-ooc` is a hand-written serial
//! out-of-core PageRank, one of the alternatives that `scripts/bench_ooc_alternatives.py` runs
//! beside spillway out of core.
#![forbid(unsafe_code)]

mod bsp;
mod collectives;
mod dyngraph;
mod harness;
mod load;
mod mapreduce;
mod pagerank;
mod scale;
mod serial_ooc;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "spillway-bench",
    about = "Benchmarks of spillway against baselines measured in the same run"
)]
struct Cli {
    #[command(subcommand)]
    command: Bench,
}

#[derive(Subcommand, Debug)]
enum Bench {
    /// Bandwidth of allreduce, bcast and alltoall against a single-threaded memcpy.
    Collectives(collectives::Args),
    /// PageRank on an R-MAT graph against a sequential CSR push PageRank.
    Pagerank(pagerank::Args),
    /// The runtime's cost per collective and memory per rank as the ranks per node grow.
    Scale(scale::Args),
    /// One point of `scale`, run in a child process (prints one JSON line).
    #[command(hide = true)]
    ScaleRun(scale::RunArgs),
    /// Word count on MapReduce against a sequential HashMap count, with and without the
    /// combiner.
    Mapreduce(mapreduce::Args),
    /// Dynamic graph structures on an R-MAT edge stream against a CSR rebuilt from scratch.
    Dyngraph(dyngraph::Args),
    /// The BSP layer: total exchange vs memcpy, BSP FFT vs rustfft, sample sort vs
    /// sort_unstable, and the g*h + l model's fit.
    Bsp(bsp::Args),
    /// Loading an R-MAT graph in memory, next to generating its edges alone.
    Load(load::Args),
    /// A hand-written serial out-of-core PageRank over a binary CSR file (the papers'
    /// "serial-ooc" baseline): build the file, run, compare rank files.
    SerialOoc(serial_ooc::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Bench::Collectives(a) => collectives::main(a),
        Bench::Pagerank(a) => pagerank::main(a),
        Bench::Scale(a) => scale::main(a),
        Bench::ScaleRun(a) => scale::run_point(a),
        Bench::Mapreduce(a) => mapreduce::main(a),
        Bench::Dyngraph(a) => dyngraph::main(a),
        Bench::Bsp(a) => bsp::main(a),
        Bench::Load(a) => load::main(a),
        Bench::SerialOoc(a) => serial_ooc::main(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("spillway-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
