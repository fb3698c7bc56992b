//! `run cc`: connected components, by a union-find per rank with the forests merged between
//! ranks (the default), or as MapReduce (small-star / large-star, `--engine mapreduce`).

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use serde::Serialize;
use spillway::algorithms::graph::cc::{connected_components, load_edges, CcResult, Variant};
use spillway::algorithms::graph::cc_direct::{components, load_edge_list};
use spillway::algorithms::AlgoError;
use spillway::{ByteSize, Collectives, Comm, Sum};

use crate::commands::checkpoint::{checkpoint_facts, file_identity, CheckpointFacts};
use crate::commands::ft::{run_job, Done, FtArgs};
use crate::driver::{
    CheckpointArgs, Command, Declared, Estimate, Failure, Inputs, Job, RankOut, RuntimeArgs,
    Timing, MAPREDUCE_RANK,
};
use crate::options::{named, nonzero_size};

/// Connected-components engines.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CcEngine {
    /// A union-find per rank over its edges, the forests merged between ranks.
    Direct,
    /// Iterative MapReduce: small-star and large-star (fault tolerance, checkpoints).
    Mapreduce,
}

/// `run cc`.
#[derive(Args, Debug)]
pub(crate) struct Cc {
    /// SNAP edge list ("src dst" per line, '#' comments); edges are undirected; `-` reads
    /// standard input.
    #[arg(long)]
    input: PathBuf,
    /// Engine: a union-find per rank with its forests merged (each edge touched once), or
    /// MapReduce star operations (fault tolerance and checkpoints).
    #[arg(long, value_enum, default_value = "direct")]
    engine: CcEngine,
    /// Order of the star operations (with `--engine mapreduce`): alternating (large-star and
    /// small-star in turn, the default) or two-phase (large-star until it converges, then
    /// small-star, repeated).
    #[arg(long, value_parser = named::<Variant>())]
    variant: Option<Variant>,
    /// Output: "vertex label" per vertex of an edge (label: the smallest vertex id of its
    /// component); the direct engine writes the vertices in increasing order, the MapReduce
    /// engine each rank's vertices in increasing order, ranks one after the other.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Heap allowance of each rank for MapReduce buffers (with `--engine mapreduce`; see
    /// `run wordcount`).
    #[arg(long, value_name = "SIZE", value_parser = nonzero_size)]
    mr_memory: Option<ByteSize>,
    /// Fault tolerance (with `--engine mapreduce`).
    #[command(flatten)]
    ft: FtArgs,
    /// Checkpoints of the edges after every K rounds of star operations (with `--engine
    /// mapreduce`).
    #[command(flatten)]
    checkpoint: CheckpointArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// What `run cc` reports.
#[derive(Debug, Serialize)]
pub(crate) struct CcFacts {
    engine: &'static str,
    edges: u64,
    vertices: u64,
    components: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    star_operations: Option<usize>,
    /// Direct engine: the union-find over each rank's edges, the merge of the forests and the
    /// labelling, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    local_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    merge_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    label_seconds: Option<f64>,
    #[serde(flatten)]
    checkpoint: Option<CheckpointFacts>,
}

impl Command for Cc {
    const NAME: &'static str = "cc";
    type Facts = CcFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime)
            .input("--input", Some(&self.input))
            .output("--out", self.out.as_deref())
            .checkpoints(&self.checkpoint)
    }

    fn check(&self) -> Result<(), Failure> {
        if self.engine == CcEngine::Direct {
            let mapreduce_only = [
                (self.variant.is_some(), "--variant"),
                (self.mr_memory.is_some(), "--mr-memory"),
                (self.ft.is_set(), "--fault-tolerance and --inject-failure"),
                (self.checkpoint.checkpoint_dir.is_some(), "--checkpoint-dir"),
            ];
            if let Some((_, name)) = mapreduce_only.iter().find(|(set, _)| *set) {
                return Err(Failure::usage(format!("{name} need(s) --engine mapreduce")));
            }
        }
        self.ft.check(&self.runtime)
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        let bytes = inputs.bytes(&self.input);
        Ok(match self.engine {
            // The edges (8 bytes each, about half an edge's text) and a forest per rank
            // (checked against the largest id when it is known).
            CcEngine::Direct => Estimate::of_input(&self.input, bytes, 2),
            // The records as emitted, sorted, sent and received.
            CcEngine::Mapreduce => {
                Estimate::of_input(&self.input, bytes, 12).ranks(MAPREDUCE_RANK.0, MAPREDUCE_RANK.1)
            }
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<CcFacts>, Failure> {
        if self.engine == CcEngine::Direct {
            return self.run_direct(job);
        }
        let variant = self.variant.unwrap_or(Variant::Alternating);
        let input = job.input(&self.input);
        let memory = self.mr_memory.and_then(|m| m.to_usize());
        let ft = self.ft.settings();
        let config = job.config();
        let fingerprint = format!(
            "cc input={} variant={} ranks={} nodes={}",
            file_identity(&input),
            // The name the checkpoints of earlier versions were written with.
            match variant {
                Variant::Alternating => "Alternating",
                Variant::TwoPhase => "TwoPhase",
            },
            config.ranks_total(),
            config.nodes_total(),
        );
        self.ft.spmd(job, 0, "cc", |rank, _| {
            let world = Comm::world(rank);
            // A loss after the last star operation (while the labels are counted and
            // written) makes the survivors run the job again from the input.
            run_job(
                &world,
                rank.survives_lost_processes() && ft.is_some(),
                self.checkpoint.checkpointer(&fingerprint),
                &|comm| {
                    let (edges, loops) = load_edges(comm, &input)?;
                    let m = edges.count(comm)? + loops.count(comm)?;
                    Ok(((edges, loops), m))
                },
                &|comm, (edges, loops), ck| {
                    connected_components(comm, edges, loops, variant, memory, ft.clone(), ck)
                },
                |result| &result.comm,
                &mut |done| self.finish_mapreduce(job, done),
            )
        })
    }
}

impl Cc {
    /// The output and the report of the MapReduce engine's labels.
    fn finish_mapreduce<'r>(
        &self,
        job: &Job<'_>,
        done: Done<'_, CcResult<'r>, u64>,
    ) -> Result<RankOut<CcFacts>, AlgoError> {
        let result = done.result;
        let comm = &result.comm;
        let checkpoint = checkpoint_facts(comm, done.ck)?;
        let mut labels = result.labels.to_local_vec();
        labels.sort_unstable();
        let vertices = result.labels.count(comm)?;
        let roots = labels.iter().filter(|(v, l)| v == l).count() as u64;
        let components = comm.allreduce(&[roots], Sum)?[0];
        if let Some(path) = &self.out {
            job.write_ordered(comm, path, |w| {
                for (v, l) in &labels {
                    writeln!(w, "{v} {l}")?;
                }
                Ok(())
            })?;
        }
        let facts = CcFacts {
            engine: "mapreduce",
            edges: *done.kept,
            vertices,
            components,
            star_operations: Some(result.star_operations),
            local_seconds: None,
            merge_seconds: None,
            label_seconds: None,
            checkpoint,
        };
        let times = result
            .stats
            .iter()
            .map(|s| s.map + s.combine + s.shuffle + s.reduce)
            .collect();
        let timing = done.timing(
            result.star_operations,
            times,
            &result.stats,
            result.ft.as_ref(),
        );
        Ok(RankOut::of(comm, facts, timing))
    }

    /// `run cc --engine direct`: a union-find per rank, the forests merged between ranks.
    fn run_direct(&self, job: &Job<'_>) -> Result<Option<CcFacts>, Failure> {
        let input = job.input(&self.input);
        job.spmd(0, "cc", |rank, _| {
            let world = Comm::world(rank);
            let t0 = Instant::now();
            let part = load_edge_list(&world, &input)?;
            let m = world.allreduce(&[part.edges.len() as u64], Sum)?[0];
            world.barrier()?;
            let load = t0.elapsed();
            let t1 = Instant::now();
            let cc = components(&world, &part)?;
            drop(part);
            world.barrier()?;
            let compute = t1.elapsed();
            if let Some(path) = &self.out {
                job.write_ordered(&world, path, |w| {
                    let mut result = Ok(());
                    cc.for_each(|v, l| {
                        if result.is_ok() {
                            result = writeln!(w, "{v} {l}");
                        }
                    });
                    result
                })?;
            }
            let t = cc.timing;
            let facts = CcFacts {
                engine: "direct",
                edges: m,
                vertices: cc.vertices,
                components: cc.components,
                star_operations: None,
                local_seconds: Some(t.local.as_secs_f64()),
                merge_seconds: Some(t.merge.as_secs_f64()),
                label_seconds: Some(t.labels.as_secs_f64()),
                checkpoint: None,
            };
            Ok(Some(RankOut::of(
                &world,
                facts,
                Timing::once(load, compute),
            )))
        })
    }
}
