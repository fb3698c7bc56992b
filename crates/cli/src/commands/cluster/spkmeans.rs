//! `run spkmeans`: spherical K-means on sparse rows (BDMPI: bcast, assign, reduce).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use spillway::algorithms::cluster::kmeans::Init;
use spillway::algorithms::cluster::spkmeans::{normalize_rows, spkmeans, SpKMeansOptions};
use spillway::algorithms::io::{load_rows, SparseSource};
use spillway::algorithms::Progress;
use spillway::{Collectives, Comm, Max};

use super::write_clustering;
use crate::driver::{Command, Declared, Failure, Job, RankOut, RuntimeArgs, Timing};
use crate::options::is_matrix_market;

/// `run spkmeans`.
#[derive(Args, Debug)]
pub(crate) struct SpKMeans {
    /// Sparse rows: Matrix Market coordinate (.mtx, "row col value") or SVMlight/libsvm
    /// ("label idx:val ...", 1-based indices; any other extension); `-` reads standard input
    /// (Matrix Market if it starts with %%MatrixMarket).
    #[arg(long)]
    input: PathBuf,
    /// Number of clusters (at least 1, at most the number of rows).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    k: u64,
    /// Initial centroids: first (the first k rows) or random[:SEED] (k distinct rows).
    #[arg(long, default_value = "first")]
    init: Init,
    /// Iteration limit (at least 1).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    iterations: u64,
    /// Output: the final centroids, CSV, one per line in cluster order.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Output: the cluster of each row, one per line in row order.
    #[arg(long)]
    assign: Option<PathBuf>,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// What `run spkmeans` reports.
#[derive(Debug, Serialize)]
pub(crate) struct SpKMeansFacts {
    rows: u64,
    columns: u64,
    nonzeros: u64,
    max_nonzeros_per_rank: u64,
    k: u64,
    converged: bool,
}

impl Command for SpKMeans {
    const NAME: &'static str = "spkmeans";
    type Facts = SpKMeansFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime)
            .input("--input", Some(&self.input))
            .output("--out", self.out.as_deref())
            .output("--assign", self.assign.as_deref())
    }

    fn check(&self) -> Result<(), Failure> {
        if let Init::File(_) = self.init {
            return Err(Failure::option(
                "--init",
                &self.init,
                "file: is not available for sparse rows",
            ));
        }
        Ok(())
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<SpKMeansFacts>, Failure> {
        let path = job.input(&self.input);
        let source = if is_matrix_market(&self.input, &path) {
            SparseSource::MatrixMarket(path)
        } else {
            SparseSource::Svmlight(path)
        };
        let options = SpKMeansOptions {
            k: self.k as usize,
            max_iterations: self.iterations as usize,
            init: self.init.clone(),
        };
        job.spmd(options.max_iterations, "spkmeans", |rank, bar| {
            let world = Comm::world(rank);
            let t0 = Instant::now();
            let mut rows = load_rows(&world, &source)?;
            normalize_rows(&mut rows);
            world.barrier()?;
            let load = t0.elapsed();
            let mut on_progress = |p: &Progress| {
                bar.tick(&world, p.iteration, format!("{} rows moved", p.delta));
            };
            let t1 = Instant::now();
            let result = spkmeans(&world, &rows, &options, &mut on_progress)?;
            let compute = t1.elapsed();
            let d = rows.cols as usize;
            write_clustering(
                job,
                &world,
                (self.out.as_deref(), &result.centroids, d),
                (self.assign.as_deref(), result.assignment.as_slice()),
            )?;
            let max_nnz = world.allreduce(&[rows.values.len() as u64], Max)?[0];
            world.barrier()?;
            let facts = SpKMeansFacts {
                rows: rows.rows,
                columns: rows.cols,
                nonzeros: rows.total_nnz,
                max_nonzeros_per_rank: max_nnz,
                k: self.k,
                converged: result.converged,
            };
            Ok(Some(RankOut::of(
                &world,
                facts,
                Timing::new(result.iterations, result.iteration_times, load, compute),
            )))
        })
    }
}
