//! The `spillway` command-line tool: runs the shipped algorithms on files or generated data.
//!
//! Every command goes through one driver ([`driver::drive`]): check everything that can be
//! checked, plan, run, commit the outputs, report.

mod commands;
mod driver;
mod iostat;
mod options;
#[cfg(test)]
mod parse_tests;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use commands::{bsp, cluster, factor, gen, graph, structures, text};
use driver::{drive, HELP};

#[derive(Parser, Debug)]
#[command(
    name = "spillway",
    version,
    about = "Bulk-synchronous parallel computing for data larger than memory",
    after_help = HELP,
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at startup: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run an algorithm.
    Run {
        #[command(subcommand)]
        algorithm: Algorithm,
    },
    /// Generate input data.
    Gen {
        #[command(subcommand)]
        what: Generator,
    },
    /// Compress raw f32/f64 grid values with an absolute error bound.
    Compress(structures::compress::Compress),
    /// Restore values from a file written by `compress`.
    Decompress(structures::decompress::Decompress),
    /// Measure the BSP machine parameters g and l for a layout (cached per machine and layout).
    Probe(bsp::probe::Probe),
}

#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Algorithm {
    /// PageRank (push, 1-D rows balanced by non-zeros and rows).
    Pagerank(graph::pagerank::PageRank),
    /// Lloyd K-means (Harp style: local aggregation + allreduce).
    Kmeans(cluster::kmeans::KMeans),
    /// Replay an edge stream into a dynamic graph structure.
    Dyngraph(structures::dyngraph::Dyngraph),
    /// The BSP FFT (Inda-Bisseling) of a complex vector.
    Fft(bsp::fft::Fft),
    /// BSP sample sort of raw little-endian u64 values.
    Sort(bsp::sort::Sort),
    /// Word count as MapReduce (with a combiner and local aggregation).
    Wordcount(text::WordCount),
    /// Connected components (union-find per rank, or MapReduce star operations).
    Cc(graph::cc::Cc),
    /// Spherical K-means on sparse rows (BDMPI: bcast, assign, reduce).
    Spkmeans(cluster::spkmeans::SpKMeans),
    /// SGD matrix factorisation on a sqrt(p) x sqrt(p) grid of blocks, one diagonal per step.
    Sgd(factor::Sgd),
    /// Jones-Plassmann graph colouring.
    #[command(alias = "color")]
    Colour(graph::colour::Colour),
}

#[derive(Subcommand, Debug)]
enum Generator {
    /// An R-MAT edge list with the Graph500 parameters (0.57, 0.19, 0.19, 0.05).
    Rmat(gen::GenRmat),
    /// Points around Gaussian blobs, as `run kmeans --generate blobs:N:D:K[:SEED]` makes them.
    Blobs(gen::GenBlobs),
    /// A document-term matrix of term counts, as `run spkmeans --generate
    /// zipf:DOCS:TERMS:AVG[:SEED]` makes it (Matrix Market).
    Zipf(gen::GenZipf),
    /// Ratings of a rank-4 model, as `run sgd --generate ratings:USERS:ITEMS:AVG[:SEED]` makes
    /// them (Matrix Market).
    Ratings(gen::GenRatings),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    driver::handle_signals();
    match &cli.command {
        Command::Run { algorithm } => match algorithm {
            Algorithm::Pagerank(c) => drive(c),
            Algorithm::Kmeans(c) => drive(c),
            Algorithm::Dyngraph(c) => drive(c),
            Algorithm::Fft(c) => drive(c),
            Algorithm::Sort(c) => drive(c),
            Algorithm::Wordcount(c) => drive(c),
            Algorithm::Cc(c) => drive(c),
            Algorithm::Spkmeans(c) => drive(c),
            Algorithm::Sgd(c) => drive(c),
            Algorithm::Colour(c) => drive(c),
        },
        Command::Gen { what } => match what {
            Generator::Rmat(c) => drive(c),
            Generator::Blobs(c) => drive(c),
            Generator::Zipf(c) => drive(c),
            Generator::Ratings(c) => drive(c),
        },
        Command::Compress(c) => drive(c),
        Command::Decompress(c) => drive(c),
        Command::Probe(c) => drive(c),
    }
}
