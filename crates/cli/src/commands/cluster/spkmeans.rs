//! `run spkmeans`: spherical K-means on sparse rows (BDMPI: bcast, assign, reduce).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use spillway::algorithms::cluster::kmeans::Init;
use spillway::algorithms::cluster::spkmeans::{normalize_rows, spkmeans, SpKMeansOptions};
use spillway::algorithms::generate::ZipfDocsSpec;
use spillway::algorithms::io::{generate_rows, load_rows, SparseSource};
use spillway::algorithms::Progress;
use spillway::{Collectives, Comm, Max};

use super::write_clustering;
use crate::driver::{
    Command, Declared, Estimate, Failure, Inputs, Job, RankOut, RuntimeArgs, Timing,
};
use crate::iostat::lead_probe;
use crate::options::{is_matrix_market, zipf_spec, GenSpec};

/// The rows when neither `--input` nor `--generate` is given.
const DEFAULT_ROWS: &str = "zipf:100000:20000:50";

/// `run spkmeans`.
#[derive(Args, Debug)]
pub(crate) struct SpKMeans {
    /// Sparse rows: Matrix Market coordinate (.mtx, "row col value") or SVMlight/libsvm
    /// ("label idx:val ...", 1-based indices; any other extension); `-` reads standard input
    /// (Matrix Market if it starts with %%MatrixMarket).
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generated input: zipf:DOCS:TERMS:AVG[:SEED], a document-term matrix of term counts
    /// whose terms follow Zipf's law (default zipf:100000:20000:50).
    #[arg(long, value_parser = zipf_spec)]
    generate: Option<ZipfDocsSpec>,
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

impl SpKMeans {
    fn spec(&self) -> ZipfDocsSpec {
        self.generate
            .unwrap_or_else(|| zipf_spec(DEFAULT_ROWS).expect("the default spec parses"))
    }

    fn generated_name(&self) -> String {
        GenSpec::Zipf(self.spec()).to_string()
    }
}

impl Command for SpKMeans {
    const NAME: &'static str = "spkmeans";
    type Facts = SpKMeansFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime)
            .input("--input", self.input.as_deref())
            .output("--out", self.out.as_deref())
            .output("--assign", self.assign.as_deref())
            .generated(self.input.is_none().then(|| self.generated_name()))
    }

    fn check(&self) -> Result<(), Failure> {
        if let Init::File(_) = self.init {
            return Err(Failure::option(
                "--init",
                &self.init,
                "file: is not available for sparse rows",
            ));
        }
        if self.input.is_none() && self.k > self.spec().docs {
            return Err(Failure::option(
                "--k",
                self.k,
                format!(
                    "more clusters than the {} rows of --generate {}",
                    self.spec().docs,
                    self.generated_name()
                ),
            ));
        }
        Ok(())
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        let (base, columns) = match &self.input {
            // 12 bytes a non-zero (column and value), 8 a row's offset, 4 its assignment.
            None => {
                let s = self.spec();
                let base = Estimate {
                    data: s.docs.saturating_mul(s.avg * 12 + 12),
                    because: format!("--generate {} --k {}", self.generated_name(), self.k),
                    items: s.docs.saturating_mul(s.avg),
                    outputs: vec![
                        ("--out", self.k.saturating_mul(s.terms).saturating_mul(24)),
                        ("--assign", s.docs.saturating_mul(8)),
                    ],
                    ..Estimate::default()
                };
                (base, s.terms)
            }
            // The rows as read, moved and kept (12 bytes a nonzero from 8 to 20 of text).
            Some(given) => {
                let path = inputs.path(given);
                let columns = sparse_columns(&path, is_matrix_market(given, &path));
                let e = Estimate::of_input(given, inputs.bytes(given), 5);
                let because = format!("{} ({columns} columns)", e.because);
                (Estimate { because, ..e }, columns)
            }
        };
        // Every rank keeps the k dense centroids and their partial sums, storage-backed:
        // data under a budget, resident beside each rank without. Per rank of the job, the
        // counts of its exchanges (measured at 1,000 and 10,000 ranks).
        let centroids = self.k.saturating_mul(columns).saturating_mul(16);
        let (data, per_rank) = match self.runtime.mem_budget {
            Some(_) => (
                base.data
                    .saturating_add(centroids.saturating_mul(u64::from(self.runtime.ranks))),
                0,
            ),
            None => (base.data, centroids),
        };
        Ok(Estimate { data, ..base }.ranks((32 << 10) + per_rank, 32))
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<SpKMeansFacts>, Failure> {
        let source = self.input.as_ref().map(|given| {
            let path = job.input(given);
            if is_matrix_market(given, &path) {
                SparseSource::MatrixMarket(path)
            } else {
                SparseSource::Svmlight(path)
            }
        });
        let spec = self.spec();
        let options = SpKMeansOptions {
            k: self.k as usize,
            max_iterations: self.iterations as usize,
            init: self.init.clone(),
        };
        job.spmd(options.max_iterations, "spkmeans", |rank, bar| {
            let world = Comm::world(rank);
            let t0 = Instant::now();
            let mut rows = match &source {
                Some(source) => load_rows(&world, source)?,
                None => generate_rows(&world, &spec)?,
            };
            normalize_rows(&mut rows);
            world.barrier()?;
            let load = t0.elapsed();
            let mut probe = lead_probe(rank, &world);
            let mut on_progress = |p: &Progress| {
                if let Some(probe) = probe.as_mut() {
                    probe.sample();
                }
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
                Timing {
                    io: probe.map(|p| p.per_iteration()).unwrap_or_default(),
                    ..Timing::new(result.iterations, result.iteration_times, load, compute)
                },
            )))
        })
    }
}

/// The columns of a sparse matrix file, as far as its first MiB tells: the size line of
/// Matrix Market, or the largest index seen in SVMlight's rows (0 when the file cannot be
/// read: the reader reports that).
fn sparse_columns(path: &Path, matrix_market: bool) -> u64 {
    let mut head = Vec::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(1 << 20).read_to_end(&mut head);
    }
    let text = String::from_utf8_lossy(&head);
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('%') && !l.trim().is_empty());
    if matrix_market {
        return lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
    }
    lines
        .flat_map(|l| l.split_whitespace().skip(1))
        .filter_map(|field| field.split(':').next()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}
