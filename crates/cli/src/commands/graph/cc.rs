//! `run cc`: connected components as MapReduce (small-star / large-star).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use spillway::algorithms::graph::cc::{connected_components, load_edges, Variant};
use spillway::{ByteSize, Collectives, Comm, Sum};

use crate::commands::checkpoint::{checkpoint_facts, file_identity, restore, CheckpointFacts};
use crate::commands::ft::{unless_lost, FtArgs};
use crate::driver::{
    CheckpointArgs, Command, CommonArgs, Declared, Failure, Job, OpReport, RankOut, RuntimeArgs,
    Timing,
};
use crate::options::{named, nonzero_size};

/// `run cc`.
#[derive(Args, Debug)]
pub(crate) struct Cc {
    /// SNAP edge list ("src dst" per line, '#' comments); edges are undirected; `-` reads
    /// standard input.
    #[arg(long)]
    input: PathBuf,
    /// Order of the star operations: alternating (large-star and small-star in turn) or
    /// two-phase (large-star until it converges, then small-star, repeated).
    #[arg(long, default_value = "alternating", value_parser = named::<Variant>())]
    variant: Variant,
    /// Output: "vertex label" per vertex of an edge (label: the smallest vertex id of its
    /// component); each rank's vertices in increasing order, ranks one after the other.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Heap allowance of each rank for MapReduce buffers (see `run wordcount`).
    #[arg(long, value_name = "SIZE", value_parser = nonzero_size)]
    mr_memory: Option<ByteSize>,
    #[command(flatten)]
    ft: FtArgs,
    /// Checkpoints of the edges after every K rounds of star operations.
    #[command(flatten)]
    checkpoint: CheckpointArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `run cc` reports.
#[derive(Debug, Serialize)]
pub(crate) struct CcFacts {
    edges: u64,
    vertices: u64,
    components: u64,
    star_operations: usize,
    #[serde(flatten)]
    checkpoint: Option<CheckpointFacts>,
}

impl Command for Cc {
    const NAME: &'static str = "cc";
    type Facts = CcFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::new(&self.common)
            .runtime(&self.runtime)
            .input("--input", Some(&self.input))
            .output("--out", self.out.as_deref())
            .dir(
                "--checkpoint-dir",
                self.checkpoint.checkpoint_dir.as_deref(),
                true,
            )
    }

    fn check(&self) -> Result<(), Failure> {
        self.ft.check(&self.runtime)
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<CcFacts>, Failure> {
        let input = job.input(&self.input);
        let memory = self.mr_memory.and_then(|m| m.to_usize());
        let ft = self.ft.settings();
        let config = job.config();
        let fingerprint = format!(
            "cc input={} variant={} ranks={} nodes={}",
            file_identity(&input),
            // The name the checkpoints of earlier versions were written with.
            match self.variant {
                Variant::Alternating => "Alternating",
                Variant::TwoPhase => "TwoPhase",
            },
            config.ranks_total(),
            config.nodes_total(),
        );
        let facts = job.spmd(0, "cc", |rank, _| {
            let world = Comm::world(rank);
            let mut ck = self.checkpoint.checkpointer(&fingerprint);
            let t0 = Instant::now();
            let (edges, loops) = load_edges(&world, &input)?;
            let m = edges.count(&world)? + loops.count(&world)?;
            world.barrier()?;
            restore(&world, ck.as_mut())?;
            let load = t0.elapsed();
            let t1 = Instant::now();
            let Some(result) = unless_lost(connected_components(
                &world,
                edges,
                loops,
                self.variant,
                memory,
                ft.clone(),
                ck.as_mut(),
            ))?
            else {
                return Ok(None);
            };
            let comm = &result.comm;
            let compute = t1.elapsed();
            let checkpoint = checkpoint_facts(comm, ck.as_ref())?;
            let mut labels = result.labels.to_local_vec();
            labels.sort_unstable();
            let vertices = result.labels.count(comm)?;
            let roots = labels.iter().filter(|(v, l)| v == l).count() as u64;
            let components = comm.allreduce(&[roots], Sum)?[0];
            drop(result.labels);
            if let Some(path) = &self.out {
                job.write_ordered(comm, path, |w| {
                    for (v, l) in &labels {
                        writeln!(w, "{v} {l}")?;
                    }
                    Ok(())
                })?;
            }
            Ok(Some(RankOut {
                facts: CcFacts {
                    edges: m,
                    vertices,
                    components,
                    star_operations: result.star_operations,
                    checkpoint,
                },
                timing: Timing {
                    iterations: result.star_operations,
                    iteration_times: result
                        .stats
                        .iter()
                        .map(|s| s.map + s.combine + s.shuffle + s.reduce)
                        .collect(),
                    load,
                    compute,
                    operations: result.stats.iter().map(OpReport::from).collect(),
                    fault_tolerance: result.ft,
                    ..Timing::default()
                },
                lead: comm.rank() == 0,
            }))
        })?;
        if facts.is_some() {
            self.ft.warn_unreached(job.operations(), job.nodes(), true);
        }
        Ok(facts)
    }
}
