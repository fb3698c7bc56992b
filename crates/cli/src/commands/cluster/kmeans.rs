//! `run kmeans`: Lloyd's K-means, Harp style (local aggregation and allreduce, or regroup and
//! allgather for large centroids).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Serialize;
use spillway::algorithms::cluster::harp::{kmeans_regroup, prefer_regroup};
use spillway::algorithms::cluster::kmeans::{kmeans_surviving, Init, KMeansOptions, KMeansResult};
use spillway::algorithms::cluster::points::{in_point_order, load_points, DistPoints, PointSource};
use spillway::algorithms::generate::BlobsSpec;
use spillway::algorithms::io::InputError;
use spillway::algorithms::{AlgoError, Progress};
use spillway::checkpoint::Checkpointer;
use spillway::{Collectives, Comm, Sum};

use super::write_clustering;
use crate::commands::checkpoint::{checkpoint_facts, file_identity, CheckpointFacts, Loading};
use crate::driver::{
    CheckpointArgs, Command, Declared, Estimate, Failure, Inputs, Job, RankOut, Recovery,
    RuntimeArgs,
};
use crate::options::{blobs_spec, GenSpec};

/// The points when neither `--input` nor `--generate` is given.
const DEFAULT_POINTS: &str = "blobs:100000:8:8";

/// How K-means combines its partial sums.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Collective {
    /// Regroup when the centroids are large (k x d >= 2^20).
    Auto,
    /// Partial sums per rank, one allreduce.
    Allreduce,
    /// Node aggregation, a range of centroids per rank, allgather.
    Regroup,
}

/// `run kmeans`.
#[derive(Args, Debug)]
pub(crate) struct KMeans {
    /// CSV file: one point per line, comma-separated numbers, no header; `-` reads standard
    /// input.
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generated input: blobs:N:D:K[:SEED] (default blobs:100000:8:8).
    #[arg(long, value_parser = blobs_spec)]
    generate: Option<BlobsSpec>,
    /// Number of clusters (at least 1, at most the number of points).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    k: u64,
    /// Iteration limit (at least 1).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    iterations: u64,
    /// Initial centroids: first, random[:SEED] or file:PATH.
    #[arg(long, default_value = "first")]
    init: Init,
    /// Output: the final centroids, CSV, one per line in cluster order.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Output: the cluster of each point, one per line.
    #[arg(long)]
    assign: Option<PathBuf>,
    /// How partial sums are combined: allreduce (every rank holds the centroids and its
    /// partial sums), regroup (Harp: one copy per node, each rank owns a range of centroids,
    /// then allgather), or auto (regroup from k x d >= 2^20; allreduce with
    /// --checkpoint-dir, since regroup's sums depend on the order ranks arrive).
    #[arg(long, value_enum, default_value = "auto")]
    collective: Collective,
    #[command(flatten)]
    checkpoint: CheckpointArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// What `run kmeans` reports.
#[derive(Debug, Serialize)]
pub(crate) struct KMeansFacts {
    points: u64,
    dimensions: usize,
    k: u64,
    converged: bool,
    regroup: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    bcast_seconds_per_iteration: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compute_seconds_per_iteration: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reduce_seconds_per_iteration: Option<f64>,
    #[serde(flatten)]
    checkpoint: Option<CheckpointFacts>,
}

impl KMeans {
    fn spec(&self) -> BlobsSpec {
        self.generate
            .unwrap_or_else(|| blobs_spec(DEFAULT_POINTS).expect("the default spec parses"))
    }

    fn generated_name(&self) -> String {
        GenSpec::Blobs(self.spec()).to_string()
    }

    fn init_file(&self) -> Option<&Path> {
        match &self.init {
            Init::File(path) => Some(path),
            _ => None,
        }
    }
}

impl Command for KMeans {
    const NAME: &'static str = "kmeans";
    type Facts = KMeansFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime)
            .input("--input", self.input.as_deref())
            .input("--init", self.init_file())
            .output("--out", self.out.as_deref())
            .output("--assign", self.assign.as_deref())
            .checkpoints(&self.checkpoint)
            .generated(self.input.is_none().then(|| self.generated_name()))
    }

    fn check(&self) -> Result<(), Failure> {
        if self.checkpoint.checkpoint_dir.is_some() && self.collective == Collective::Regroup {
            return Err(Failure::usage(
                "--checkpoint-dir is not supported with --collective regroup yet",
            ));
        }
        if self.input.is_none() && self.k > self.spec().n {
            return Err(Failure::option(
                "--k",
                self.k,
                format!(
                    "more clusters than the {} points of --generate {}",
                    self.spec().n,
                    self.generated_name()
                ),
            ));
        }
        Ok(())
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        let centroids = self.k.saturating_mul(8);
        // Every rank keeps the centres and their partial sums (and, reading a file, its
        // buffers: about 40 KiB a rank measured from 64 to 10,000 ranks).
        let per_rank = |d: u64, read: u64| read + centroids.saturating_mul(d + 1).saturating_mul(2);
        if let Some(given) = &self.input {
            // About 10 to 20 bytes of text a value, held as 8.
            let d = csv_columns(&inputs.path(given));
            return Ok(
                Estimate::of_input(given, inputs.bytes(given), 1).ranks(per_rank(d, 40 << 10), 0)
            );
        }
        let s = self.spec();
        let d = s.d as u64;
        Ok(Estimate {
            // Points and assignment (the centroids with partial sums: per rank).
            data: s.n.saturating_mul(d * 8 + 4),
            because: format!("--generate {} --k {}", self.generated_name(), self.k),
            items: s.n.saturating_mul(d),
            outputs: vec![
                ("--out", centroids.saturating_mul(d).saturating_mul(3)),
                ("--assign", s.n.saturating_mul(8)),
            ],
            // The points again, on the ranks of other nodes (kmeans_surviving's copies).
            copies: s.n.saturating_mul(d * 8),
            ..Estimate::default()
        }
        .ranks(per_rank(d, 8 << 10), 0))
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<KMeansFacts>, Failure> {
        let source = match &self.input {
            Some(given) => PointSource::Csv(job.input(given)),
            None => PointSource::Blobs(self.spec()),
        };
        let init = match &self.init {
            Init::File(path) => Init::File(job.input(path)),
            other => other.clone(),
        };
        let config = job.config();
        let fingerprint = format!(
            "kmeans input={} k={} iterations={} init={} ranks={} nodes={}",
            match &self.input {
                Some(path) => file_identity(&job.input(path)),
                None => self.generated_name(),
            },
            self.k,
            self.iterations,
            match &init {
                Init::File(path) => format!("file:{}", file_identity(path)),
                other => other.to_string(),
            },
            config.ranks_total(),
            config.nodes_total(),
        );
        let options = KMeansOptions {
            k: self.k as usize,
            max_iterations: self.iterations as usize,
            init,
        };
        job.spmd(options.max_iterations, "kmeans", |rank, bar| {
            let world = Comm::world(rank);
            let mut ck = self.checkpoint.checkpointer(&fingerprint);
            // What follows each load of the points (after a loss, K-means takes the lost ranks'
            // points over from copies or reads them again):
            // the check of k, then the barrier and the restore.
            let loading = Loading::start(rank, &world);
            let mut ready = |world: &Comm, points: &DistPoints, ck: Option<&mut Checkpointer>| {
                if let PointSource::Csv(path) = &source {
                    if self.k > points.total {
                        return Err(AlgoError::Input(InputError::new(
                            path,
                            None,
                            format!(
                                "k = {} is larger than the number of points ({})",
                                self.k, points.total
                            ),
                        )));
                    }
                }
                loading.ready(world, ck)
            };
            let mut on_progress = |p: &Progress| {
                loading.iterated(rank, p.iteration);
                bar.tick(&world, p.iteration, format!("{} points moved", p.delta));
            };
            let regroup = match self.collective {
                // Checkpoints are implemented for the allreduce engine only.
                // The allreduce engine survives lost processes (MPI with ULFM).
                Collective::Auto => {
                    ck.is_none()
                        && !rank.survives_lost_processes()
                        && prefer_regroup(options.k, source.dimension()?)
                }
                Collective::Allreduce => false,
                Collective::Regroup => true,
            };
            // The outputs, then a barrier (all written before the job commits them).
            // The assignment goes in point order (after a loss a survivor holds its block and
            // a share of the lost ranks' points).
            let write_outputs =
                |world: &Comm, centroids: &[f64], assignment: &[u32], points: &DistPoints| {
                    let ordered = match &self.assign {
                        Some(_) => in_point_order(world, points, assignment)?,
                        None => assignment.into(),
                    };
                    write_clustering(
                        job,
                        world,
                        (self.out.as_deref(), centroids, points.dim),
                        (self.assign.as_deref(), &ordered),
                    )?;
                    world.barrier().map_err(AlgoError::from)
                };
            let mut recoveries = Vec::new();
            let (iterations, converged, times, phases, world, points) = if regroup {
                let points = load_points(&world, &source)?;
                ready(&world, &points, ck.as_mut())?;
                let r = kmeans_regroup(&world, &points, &options, &mut on_progress)?;
                // Each phase's time averaged over the ranks (a rank's reduce includes waiting
                // for the slowest rank's compute).
                let mut totals = [0.0f64; 3];
                for t in &r.phases {
                    totals[0] += t.bcast.as_secs_f64();
                    totals[1] += t.compute.as_secs_f64();
                    totals[2] += t.reduce.as_secs_f64();
                }
                let sums = world.allreduce(&totals, Sum)?;
                let per = (world.size() * r.phases.len().max(1)) as f64;
                let phases: Vec<f64> = sums.iter().map(|s| s / per).collect();
                write_outputs(&world, &r.centroids[..], &r.assignment, &points)?;
                let (i, c, t) = (r.iterations, r.converged, r.iteration_times);
                (i, c, t, phases, world.clone(), points)
            } else {
                // Survives lost processes under MPI with ULFM: the survivors go on (with the
                // points read again over them), write the outputs and report. A loss while
                // the outputs are written is recovered too: they are written again on
                // the survivors (only staged files: what went to a pipe cannot be taken
                // back).
                let mut finish = |world: &Comm, r: &KMeansResult, points: &DistPoints| {
                    write_outputs(world, &r.centroids, &r.assignment, points)
                        .map_err(|e| job.unrewritable_if_lost(e))
                };
                let s = kmeans_surviving(
                    &world,
                    &source,
                    &options,
                    &mut on_progress,
                    ck.as_mut(),
                    &mut ready,
                    &mut finish,
                )?;
                recoveries = Recovery::list(&s.recoveries);
                let r = s.result;
                let (i, c, t) = (r.iterations, r.converged, r.iteration_times);
                (i, c, t, Vec::new(), s.comm, s.points)
            };
            let checkpoint = checkpoint_facts(&world, ck.as_ref())?;
            Ok(Some(RankOut {
                facts: KMeansFacts {
                    points: points.total,
                    dimensions: points.dim,
                    k: self.k,
                    converged,
                    regroup,
                    bcast_seconds_per_iteration: phases.first().copied(),
                    compute_seconds_per_iteration: phases.get(1).copied(),
                    reduce_seconds_per_iteration: phases.get(2).copied(),
                    checkpoint,
                },
                timing: loading.timing(iterations, times, recoveries),
                lead: world.rank() == 0,
            }))
        })
    }
}

/// The values on the first line of a CSV file (1 when it cannot be read: the reader reports
/// that).
fn csv_columns(path: &Path) -> u64 {
    use std::io::BufRead;
    let Ok(file) = std::fs::File::open(path) else {
        return 1;
    };
    let mut line = Vec::new();
    let _ =
        std::io::BufReader::new(std::io::Read::take(file, 1 << 20)).read_until(b'\n', &mut line);
    line.iter().filter(|&&b| b == b',').count() as u64 + 1
}
