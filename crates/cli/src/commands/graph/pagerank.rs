//! `run pagerank`: push PageRank on a 1-D row decomposition, or iterative MapReduce
//! (`--engine mapreduce`, in the module `mapreduce` below).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;
use spillway::algorithms::generate::RmatSpec;
use spillway::algorithms::graph::pagerank::{PageRankOptions, PageRankResult};
use spillway::algorithms::graph::pagerank_survive::pagerank_surviving;
use spillway::algorithms::graph::{DistGraph, GraphSource, VERTEX_STATE_BYTES};
use spillway::algorithms::Progress;
use spillway::checkpoint::Checkpointer;
use spillway::{ByteSize, Collectives, Comm, Max, Sum};

use crate::commands::checkpoint::{checkpoint_facts, file_identity, CheckpointFacts, Loading};
use crate::commands::ft::FtArgs;
use crate::driver::{
    CheckpointArgs, Command, Declared, Estimate, Failure, Inputs, Job, RankOut, Recovery,
    RuntimeArgs, MAPREDUCE_RANK,
};
use crate::options::{is_matrix_market, non_negative, nonzero_size, rmat_spec};

/// The R-MAT graph when neither `--input` nor `--generate` is given.
pub(crate) const DEFAULT_GRAPH: &str = "rmat:18:16";

/// PageRank engines.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    /// Push PageRank on a 1-D row decomposition.
    Direct,
    /// Iterative MapReduce: adjacency lists travel with their vertex.
    Mapreduce,
}

/// A damping factor: in [0, 1).
fn damping(text: &str) -> Result<f64, String> {
    let d = non_negative(text)?;
    if d < 1.0 {
        Ok(d)
    } else {
        Err(format!(
            "{d} is not below 1 (a damping of 1 has no teleport)"
        ))
    }
}

/// `run pagerank`.
#[derive(Args, Debug)]
pub(crate) struct PageRank {
    /// SNAP edge list ("src dst" per line), or Matrix Market (.mtx, or standard input that
    /// starts with %%MatrixMarket); `-` reads standard input.
    #[arg(long, conflicts_with = "generate")]
    pub(crate) input: Option<PathBuf>,
    /// Generated input: rmat:SCALE:EDGEFACTOR[:SEED] (default rmat:18:16).
    #[arg(long, value_parser = rmat_spec)]
    pub(crate) generate: Option<RmatSpec>,
    /// Iteration limit (at least 1).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) iterations: u64,
    /// Stop when the L1 change falls below this (0: run all iterations).
    #[arg(long, default_value_t = 0.0, value_parser = non_negative)]
    pub(crate) tolerance: f64,
    /// Damping factor, in [0, 1).
    #[arg(long, default_value_t = 0.85, value_parser = damping)]
    pub(crate) damping: f64,
    /// Output: "vertex rank" per line for every vertex (`-`: standard output).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Engine: the direct push PageRank, or iterative MapReduce (thesis algorithms 4-5).
    #[arg(long, value_enum, default_value = "direct")]
    pub(crate) engine: Engine,
    /// Heap allowance of each rank for MapReduce buffers (with `--engine mapreduce`).
    #[arg(long, value_name = "SIZE", value_parser = nonzero_size)]
    pub(crate) mr_memory: Option<ByteSize>,
    /// Fault tolerance (with `--engine mapreduce`).
    #[command(flatten)]
    pub(crate) ft: FtArgs,
    #[command(flatten)]
    pub(crate) checkpoint: CheckpointArgs,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

/// What `run pagerank` reports.
#[derive(Debug, Serialize)]
pub(crate) struct PageRankFacts {
    pub(crate) engine: &'static str,
    pub(crate) vertices: u64,
    pub(crate) edges: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_edges_per_rank: Option<u64>,
    /// Bytes of graph and vectors one iteration touches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) iteration_bytes: Option<u64>,
    pub(crate) final_l1_change: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) spill_io_per_iteration_bytes: Option<f64>,
    pub(crate) rank_sum: f64,
    pub(crate) edges_per_second: f64,
    #[serde(flatten)]
    pub(crate) checkpoint: Option<CheckpointFacts>,
}

impl PageRank {
    /// The graph: the input file (Matrix Market or edge list) or the generated one.
    pub(crate) fn source(&self, job: &Job<'_>) -> GraphSource {
        match &self.input {
            Some(given) => {
                let path = job.input(given);
                if is_matrix_market(given, &path) {
                    GraphSource::MatrixMarket(path)
                } else {
                    GraphSource::EdgeList(path)
                }
            }
            None => GraphSource::Rmat(self.spec()),
        }
    }

    fn spec(&self) -> RmatSpec {
        self.generate
            .unwrap_or_else(|| rmat_spec(DEFAULT_GRAPH).expect("the default spec parses"))
    }

    /// The algorithm's options.
    pub(crate) fn options(&self) -> PageRankOptions {
        PageRankOptions {
            iterations: self.iterations as usize,
            tolerance: self.tolerance,
            damping: self.damping,
        }
    }

    /// Everything that determines a run's output, for its checkpoints (the sums depend on
    /// the layout too); `engine` names an engine other than the direct one.
    pub(crate) fn fingerprint(&self, job: &Job<'_>, engine: Option<&str>) -> String {
        let engine = engine.map_or_else(String::new, |e| format!(" engine={e}"));
        let config = job.config();
        format!(
            "pagerank{engine} input={} iterations={} tolerance={:e} damping={:e} ranks={} nodes={}",
            match &self.input {
                Some(path) => file_identity(&job.input(path)),
                None => self.generated_name(),
            },
            self.iterations,
            self.tolerance,
            self.damping,
            config.ranks_total(),
            config.nodes_total(),
        )
    }

    fn generated_name(&self) -> String {
        match self.generate {
            Some(_) => crate::options::GenSpec::Rmat(self.spec()).to_string(),
            None => DEFAULT_GRAPH.to_string(),
        }
    }
}

impl Command for PageRank {
    const NAME: &'static str = "pagerank";
    type Facts = PageRankFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime)
            .input("--input", self.input.as_deref())
            .output("--out", self.out.as_deref())
            .checkpoints(&self.checkpoint)
            .generated(self.input.is_none().then(|| self.generated_name()))
    }

    fn check(&self) -> Result<(), Failure> {
        if self.engine == Engine::Direct {
            if self.ft.is_set() {
                return Err(Failure::usage(
                    "--fault-tolerance and --inject-failure need --engine mapreduce",
                ));
            }
            if let Some(m) = self.mr_memory {
                return Err(Failure::option(
                    "--mr-memory",
                    m,
                    "needs --engine mapreduce",
                ));
            }
        }
        self.ft.check(&self.runtime)
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        let ranks = u64::from(self.runtime.ranks);
        let estimate = match &self.input {
            // An edge list of 12 to 20 bytes an edge: the edges as read and as rows, the pull
            // lists, and the vertex state; with MapReduce the records as emitted, sorted, sent
            // and received.
            Some(given) => {
                let bytes = inputs.bytes(given);
                let per_byte = match self.engine {
                    Engine::Direct => 4,
                    Engine::Mapreduce => 12,
                };
                (Estimate::of_input(given, bytes, per_byte), bytes / 12)
            }
            None => {
                let spec = self.spec();
                let (n, m) = (spec.num_vertices(), spec.num_edges());
                let estimate = Estimate {
                    // Vertex state, the edges as read (8 bytes) and as rows (4 bytes),
                    // buffers.
                    data: n
                        .saturating_mul(VERTEX_STATE_BYTES)
                        .saturating_add(m.saturating_mul(16)),
                    because: format!("--generate {}", self.generated_name()),
                    items: m,
                    outputs: vec![("--out", n.saturating_mul(24))],
                    // The direct engine's copies of the graph's rows on the buddies (row
                    // offsets and targets).
                    copies: match self.engine {
                        Engine::Direct => n.saturating_mul(8).saturating_add(m.saturating_mul(4)),
                        Engine::Mapreduce => 0,
                    },
                    ..Estimate::default()
                };
                (estimate, m)
            }
        };
        Ok(match (self.engine, estimate) {
            // Each iteration a message to the owner of every remote target, queued until it
            // is taken (about 190 bytes each, R-MAT at 1,000 ranks).
            (Engine::Direct, (e, edges)) => e.sparse_exchange(edges, ranks, 192),
            (Engine::Mapreduce, (e, _)) => e.ranks(MAPREDUCE_RANK.0, MAPREDUCE_RANK.1),
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<PageRankFacts>, Failure> {
        match self.engine {
            Engine::Direct => direct(self, job),
            Engine::Mapreduce => mapreduce::run(self, job),
        }
    }
}

/// Spill bytes written plus read back on this rank's node so far; counted once per node (by
/// its first rank) so that a sum over ranks is a sum over nodes.
fn node_io(rank: &spillway::Rank) -> u64 {
    if rank.local_rank() != 0 {
        return 0;
    }
    let m = rank.node_memory_stats();
    m.bytes_written + m.bytes_read + 2 * m.message_bytes_spilled
}

fn direct(args: &PageRank, job: &Job<'_>) -> Result<Option<PageRankFacts>, Failure> {
    let source = args.source(job);
    let options = args.options();
    let fingerprint = args.fingerprint(job, None);
    job.spmd(options.iterations, "pagerank", |rank, bar| {
        let world = Comm::world(rank);
        let mut ck = args.checkpoint.checkpointer(&fingerprint);
        let loading = Loading::start(rank, &world);
        let mut ready =
            |world: &Comm, _: &DistGraph, ck: Option<&mut Checkpointer>| loading.ready(world, ck);
        let mut on_progress = |p: &Progress| {
            loading.iterated(rank, p.iteration);
            bar.tick(&world, p.iteration, format!("L1 change {:.3e}", p.delta));
        };
        let io_before = node_io(rank);
        // The output and the sums of the report: [spill I/O, rank sum, bytes per
        // iteration], the most edges on a rank.
        let mut sums = ([0.0f64; 3], 0u64);
        let mut finish = |world: &Comm, result: &PageRankResult, graph: &DistGraph| {
            if let Some(path) = &args.out {
                job.write_ordered(world, path, |w| {
                    for (i, r) in result.ranks.iter().enumerate() {
                        writeln!(w, "{} {}", result.lo + i as u64, r)?;
                    }
                    Ok(())
                })?;
            }
            let mine = [
                (node_io(rank) - io_before) as f64,
                result.ranks.iter().sum::<f64>(),
                result.iteration_bytes as f64,
            ];
            let total = world.allreduce(&mine, Sum)?;
            let max_edges = world.allreduce(&[graph.targets.len() as u64], Max)?[0];
            sums = ([total[0], total[1], total[2]], max_edges);
            Ok(())
        };
        // Survives lost processes under MPI with ULFM: the survivors go on (with the graph
        // rebuilt over them from its parts and their copies), write the output and report. A loss while the output is
        // written is recovered too: it is written again on the survivors (only a staged
        // file: what went to a pipe cannot be taken back).
        let survived = pagerank_surviving(
            &world,
            &source,
            &options,
            &mut on_progress,
            ck.as_mut(),
            &mut ready,
            &mut |world, result, graph| {
                finish(world, result, graph).map_err(|e| job.unrewritable_if_lost(e))
            },
        )?;
        let ([io, rank_sum, iteration_bytes], max_edges) = sums;
        let (io, iteration_bytes) = (io as u64, iteration_bytes as u64);
        let (_, compute) = loading.times();
        let recoveries = Recovery::list(&survived.recoveries);
        let (result, graph, world) = (survived.result, survived.graph, survived.comm);
        let checkpoint = checkpoint_facts(&world, ck.as_ref())?;
        // Iterations this run performed (fewer than `iterations` after a resume).
        let performed = result.iteration_times.len().max(1) as f64;
        let facts = PageRankFacts {
            engine: "direct",
            vertices: graph.n,
            edges: graph.total_edges,
            max_edges_per_rank: Some(max_edges),
            iteration_bytes: Some(iteration_bytes),
            final_l1_change: result.delta,
            spill_io_per_iteration_bytes: Some(io as f64 / performed),
            rank_sum,
            edges_per_second: graph.total_edges as f64 * result.iteration_times.len() as f64
                / compute.as_secs_f64().max(1e-12),
            checkpoint,
        };
        Ok(Some(RankOut {
            facts,
            timing: loading.timing(result.iterations, result.iteration_times, recoveries),
            lead: world.rank() == 0,
        }))
    })
}

/// `run pagerank --engine mapreduce`: PageRank as iterative MapReduce (adjacency lists
/// travel with their vertex), with fault tolerance and checkpoints.
mod mapreduce {
    use spillway::algorithms::graph::pagerank_mr::{
        load_edge_dataset, pagerank_mapreduce, MrPageRank,
    };
    use spillway::algorithms::AlgoError;
    use spillway::Comm;

    use super::{PageRank, PageRankFacts};
    use crate::commands::checkpoint::checkpoint_facts;
    use crate::commands::ft::{run_job, Done};
    use crate::driver::{Failure, Job, RankOut};

    /// Runs the MapReduce engine.
    pub(crate) fn run(args: &PageRank, job: &Job<'_>) -> Result<Option<PageRankFacts>, Failure> {
        let source = args.source(job);
        let options = args.options();
        let memory = args.mr_memory.and_then(|m| m.to_usize());
        let ft = args.ft.settings();
        let fingerprint = args.fingerprint(job, Some("mapreduce"));
        args.ft
            .spmd(job, options.iterations, "pagerank", |rank, _| {
                let world = Comm::world(rank);
                // A loss after the last iteration (while the ranks are gathered and written)
                // makes the survivors run the job again from the input.
                run_job(
                    &world,
                    rank.survives_lost_processes() && ft.is_some(),
                    args.checkpoint.checkpointer(&fingerprint),
                    &|comm| {
                        let (edges, n) = load_edge_dataset(comm, &source)?;
                        let m = edges.count(comm)?;
                        Ok(((edges, n), (n, m)))
                    },
                    &|comm, (edges, n), ck| {
                        let ft = ft.clone();
                        pagerank_mapreduce(comm, edges, n, &options, memory, ft, &mut |_| {}, ck)
                    },
                    |result| &result.comm,
                    &mut |done| finish(args, job, done),
                )
            })
    }

    /// The output and the report of the MapReduce engine's ranks.
    fn finish(
        args: &PageRank,
        job: &Job<'_>,
        done: Done<'_, MrPageRank<'_>, (u64, u64)>,
    ) -> Result<RankOut<PageRankFacts>, AlgoError> {
        let (result, &(n, m)) = (done.result, done.kept);
        let comm = &result.comm;
        let checkpoint = checkpoint_facts(comm, done.ck)?;
        // The ranks in vertex order, written by the first rank.
        let all = result.ranks.gather(comm, 0)?;
        let rank_sum = all.as_ref().map_or(0.0, |a| a.iter().map(|(_, r)| r).sum());
        if let Some(path) = &args.out {
            let mut all = all.unwrap_or_default();
            all.sort_unstable_by_key(|&(v, _)| v);
            job.write_ordered(comm, path, |w| {
                for (v, r) in &all {
                    writeln!(w, "{v} {r}")?;
                }
                Ok(())
            })?;
        }
        let performed = result.iteration_times.len() as f64;
        let facts = PageRankFacts {
            engine: "mapreduce",
            vertices: n,
            edges: m,
            max_edges_per_rank: None,
            iteration_bytes: None,
            final_l1_change: result.delta,
            spill_io_per_iteration_bytes: None,
            rank_sum,
            edges_per_second: m as f64 * performed / done.compute.as_secs_f64().max(1e-12),
            checkpoint,
        };
        let timing = done.timing(
            result.iterations,
            result.iteration_times.clone(),
            &result.stats,
            result.ft.as_ref(),
        );
        Ok(RankOut::of(comm, facts, timing))
    }
}
