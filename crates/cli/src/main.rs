//! The `spillway` command-line tool: runs the shipped algorithms on files or generated data.

mod bsp;
mod iostat;
mod mapreduce;
mod more;
mod report;
mod structures;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use spillway::algorithms::cluster::harp::{kmeans_regroup, prefer_regroup};
use spillway::algorithms::cluster::kmeans::{kmeans_surviving, Init, KMeansOptions, KMeansResult};
use spillway::algorithms::cluster::points::{load_points, PointSource};
use spillway::algorithms::generate::{BlobsSpec, RmatSpec};
use spillway::algorithms::graph::pagerank::PageRankOptions;
use spillway::algorithms::graph::pagerank_survive::pagerank_surviving;
use spillway::algorithms::graph::{load_graph, GraphSource};
use spillway::algorithms::io::write_ordered;
use spillway::algorithms::io::{remove_temporary_outputs, resolve_output, AtomicFile, InputError};
use spillway::algorithms::{AlgoError, Progress};
use spillway::checkpoint::Checkpointer;
use spillway::{
    run_with_stats, Backend, Collectives, Comm, Config, JobError, Max, Policy, ResumePolicy, Sum,
};

use iostat::IoProbe;
use report::Report;

#[derive(Parser, Debug)]
#[command(
    name = "spillway",
    version,
    about = "Bulk-synchronous parallel computing for data larger than memory"
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
    Compress(structures::CompressArgs),
    /// Restore values from a file written by `compress`.
    Decompress(structures::DecompressArgs),
    /// Measure the BSP machine parameters g and l for a layout (cached per machine and layout).
    Probe(bsp::ProbeArgs),
}

#[derive(Subcommand, Debug)]
enum Algorithm {
    /// PageRank (push, 1-D rows balanced by non-zeros and rows).
    Pagerank(PageRankArgs),
    /// Lloyd K-means (Harp style: local aggregation + allreduce).
    Kmeans(KMeansArgs),
    /// Replay an edge stream into a dynamic graph structure.
    Dyngraph(structures::DyngraphArgs),
    /// The BSP FFT (Inda-Bisseling) of a complex vector.
    Fft(bsp::FftArgs),
    /// BSP sample sort of raw little-endian u64 values.
    Sort(bsp::SortArgs),
    /// Word count as MapReduce (with a combiner and local aggregation).
    Wordcount(mapreduce::WordCountArgs),
    /// Connected components as MapReduce (small-star / large-star).
    Cc(mapreduce::CcArgs),
    /// Spherical K-means on sparse rows (BDMPI: bcast, assign, reduce).
    Spkmeans(more::SpKMeansArgs),
    /// SGD matrix factorisation on a sqrt(p) x sqrt(p) grid of blocks, one diagonal per step.
    Sgd(more::SgdArgs),
    /// Jones-Plassmann graph colouring.
    #[command(alias = "color")]
    Colour(more::ColourArgs),
}

#[derive(Subcommand, Debug)]
enum Generator {
    /// An R-MAT edge list with the Graph500 parameters (0.57, 0.19, 0.19, 0.05).
    Rmat {
        /// log2 of the number of vertices.
        #[arg(long)]
        scale: u32,
        /// Edges per vertex.
        #[arg(long)]
        edge_factor: u32,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file ("src dst" per line).
        #[arg(long)]
        out: PathBuf,
        /// Remove duplicate edges with a MapReduce job (the edges of each rank in
        /// increasing order, ranks one after the other).
        #[arg(long)]
        dedup: bool,
        /// Ranks of the `--dedup` job.
        #[arg(long, default_value_t = 4)]
        ranks: u32,
    },
    /// Points around Gaussian blobs, as `run kmeans --generate blobs:N:D:K[:SEED]` makes them.
    Blobs {
        /// Number of points.
        #[arg(long)]
        points: u64,
        /// Dimension.
        #[arg(long)]
        dim: usize,
        /// Number of blobs.
        #[arg(long)]
        k: usize,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file (CSV, one point per line; each value printed so that it reads back
        /// exactly).
        #[arg(long)]
        out: PathBuf,
    },
}

/// Engines between nodes.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum BackendArg {
    /// Threads of this process (virtual nodes).
    Local,
    /// One process per node, started with `mpirun -np NODES` (needs `--features mpi`).
    Mpi,
}

/// Storage-backed memory policies.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum PolicyArg {
    /// Aggressive read, aggressive write: unload whenever a rank blocks.
    Araw,
    /// Aggressive read, lazy write: unload when the budget needs room.
    Arlw,
    /// Lazy read, lazy write: as arlw, reading pages as they are touched.
    Lrlw,
}

/// Which runnable rank resumes first.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum ResumeArg {
    /// The one with the most memory resident (BDMPI).
    MostResident,
    /// The one that became runnable first.
    Fifo,
}

#[derive(Args, Debug, Clone)]
struct RuntimeArgs {
    /// Total number of ranks.
    #[arg(long, default_value_t = 4)]
    ranks: u32,
    /// Number of (virtual) nodes; ranks are split over them in contiguous blocks. With
    /// `--backend mpi` every MPI process is one node and this may be left out.
    #[arg(long, default_value_t = 1)]
    nodes: u32,
    /// Ranks of one node executing at once: a number, or `dynamic` (one, plus more up to the
    /// cores while the memory budget has room for them). Default: the cores available, or
    /// `dynamic` with a memory budget.
    #[arg(long)]
    running: Option<String>,
    /// Directory for spill files (default: the system's temporary directory).
    #[arg(long)]
    spill_dir: Option<PathBuf>,
    /// Memory budget per node (e.g. 256M, 2G): storage-backed data and buffered messages
    /// beyond it go to the spill directory.
    #[arg(long)]
    mem_budget: Option<String>,
    /// When storage-backed memory is released.
    #[arg(long, value_enum, default_value = "araw")]
    policy: PolicyArg,
    /// Which runnable rank the scheduler resumes first.
    #[arg(long, value_enum, default_value = "most-resident")]
    resume_policy: ResumeArg,
    /// Engine between nodes.
    #[arg(long, value_enum, default_value = "local")]
    backend: BackendArg,
    /// Stack size of each rank (e.g. 256K, 4M; default 1M).
    #[arg(long)]
    stack_size: Option<String>,
    /// Write a Chrome trace of the run to FILE (opens in Perfetto or chrome://tracing): each
    /// rank's running and blocked intervals, loads and unloads of storage-backed memory.
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
    /// Print the final report as one JSON object on stdout, and nothing else.
    #[arg(long)]
    json: bool,
}

/// Checkpoint and resume of an iterative algorithm's state.
#[derive(Args, Debug, Clone)]
pub(crate) struct CheckpointArgs {
    /// Write checkpoints of the iteration state to DIR (shared by every rank; complete
    /// checkpoints appear atomically, torn ones are never used).
    #[arg(long, value_name = "DIR")]
    checkpoint_dir: Option<PathBuf>,
    /// Checkpoint after every K iterations (default 1 with --checkpoint-dir).
    #[arg(long, value_name = "K", requires = "checkpoint_dir",
          value_parser = clap::value_parser!(u64).range(1..))]
    checkpoint_every: Option<u64>,
    /// Continue from the newest complete checkpoint in --checkpoint-dir (from the beginning
    /// if there is none); refused if it was written with other arguments.
    #[arg(long, requires = "checkpoint_dir")]
    resume: bool,
}

impl CheckpointArgs {
    /// Makes the checkpoint directory if needed and checks that it is a writable directory,
    /// so that an unusable one is a usage error before the job starts.
    pub(crate) fn check(&self) -> Result<(), Failure> {
        let Some(dir) = &self.checkpoint_dir else {
            return Ok(());
        };
        let bad = |why: String| {
            Failure::usage(format!("invalid --checkpoint-dir {}: {why}", dir.display()))
        };
        std::fs::create_dir_all(dir).map_err(|e| bad(e.to_string()))?;
        if !std::fs::metadata(dir)
            .map_err(|e| bad(e.to_string()))?
            .is_dir()
        {
            return Err(bad("not a directory".into()));
        }
        rustix::fs::access(dir, rustix::fs::Access::WRITE_OK)
            .map_err(|e| bad(std::io::Error::from(e).to_string()))
    }

    /// The rank-local checkpointer for a job with this fingerprint, if checkpoints are on.
    pub(crate) fn checkpointer(&self, fingerprint: &str) -> Option<Checkpointer> {
        self.checkpoint_dir.as_ref().map(|dir| {
            Checkpointer::new(
                dir,
                fingerprint,
                self.checkpoint_every.unwrap_or(1),
                self.resume,
            )
        })
    }
}

/// Looks for the state to resume from (a collective), telling the user on rank 0's stderr
/// what it found.
pub(crate) fn restore(world: &Comm, ck: Option<&mut Checkpointer>) -> Result<(), AlgoError> {
    let Some(ck) = ck else { return Ok(()) };
    let from = ck.restore(world)?;
    if world.rank() == 0 {
        for seq in ck.skipped() {
            eprintln!(
                "spillway: checkpoint {seq} in {} is damaged; skipped",
                ck.dir().display()
            );
        }
        match from {
            Some(it) => eprintln!(
                "spillway: resuming after iteration {it} from {}",
                ck.dir().display()
            ),
            None if ck.resumes() => eprintln!(
                "spillway: no complete checkpoint in {}: starting from the beginning",
                ck.dir().display()
            ),
            None => {}
        }
    }
    Ok(())
}

/// The canonical description of an input file for a fingerprint: absolute path, size and
/// modification time, so that a changed file does not resume another file's checkpoint.
pub(crate) fn file_identity(path: &std::path::Path) -> String {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    match std::fs::metadata(&abs) {
        Ok(m) => {
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{} ({} bytes, mtime {mtime})", abs.display(), m.len())
        }
        Err(_) => abs.display().to_string(),
    }
}

/// The report's checkpoint counters: bytes summed over ranks, time the maximum over ranks.
pub(crate) fn checkpoint_facts(
    world: &Comm,
    ck: Option<&Checkpointer>,
) -> Result<Vec<(String, f64)>, AlgoError> {
    let Some(ck) = ck else {
        return Ok(Vec::new());
    };
    let s = ck.stats();
    let bytes = world.allreduce(&[s.bytes], Sum)?[0];
    let secs = world.allreduce(&[s.time.as_secs_f64()], Max)?[0];
    Ok(vec![
        ("checkpoints_written".into(), s.written as f64),
        ("checkpoint_bytes".into(), bytes as f64),
        ("checkpoint_seconds".into(), secs),
        (
            "resumed_from_iteration".into(),
            s.resumed_from.map_or(-1.0, |i| i as f64),
        ),
    ])
}

#[derive(Args, Debug)]
struct PageRankArgs {
    /// SNAP edge list ("src dst" per line) or Matrix Market (.mtx) file.
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generated input: rmat:SCALE:EDGEFACTOR[:SEED] (default rmat:18:16).
    #[arg(long)]
    generate: Option<String>,
    /// Iteration limit.
    #[arg(long, default_value_t = 20)]
    iterations: usize,
    /// Stop when the L1 change falls below this (0: run all iterations).
    #[arg(long, default_value_t = 0.0)]
    tolerance: f64,
    /// Damping factor.
    #[arg(long, default_value_t = 0.85)]
    damping: f64,
    /// Output: "vertex rank" per line for every vertex.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Engine: the direct push PageRank, or iterative MapReduce (thesis algorithms 4-5).
    #[arg(long, value_enum, default_value = "direct")]
    engine: mapreduce::EngineArg,
    /// Heap allowance of each rank for MapReduce buffers (with `--engine mapreduce`).
    #[arg(long)]
    mr_memory: Option<String>,
    /// Fault tolerance (with `--engine mapreduce`).
    #[command(flatten)]
    ft: mapreduce::FtArgs,
    #[command(flatten)]
    checkpoint: CheckpointArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

#[derive(Args, Debug)]
struct KMeansArgs {
    /// CSV file: one point per line, comma-separated numbers, no header.
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generated input: blobs:N:D:K[:SEED] (default blobs:100000:8:8).
    #[arg(long)]
    generate: Option<String>,
    /// Number of clusters.
    #[arg(long, default_value_t = 8)]
    k: usize,
    /// Iteration limit.
    #[arg(long, default_value_t = 100)]
    iterations: usize,
    /// Initial centroids: first, random[:SEED] or file:PATH.
    #[arg(long, default_value = "first")]
    init: String,
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
    collective: KMeansCollective,
    #[command(flatten)]
    checkpoint: CheckpointArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// How K-means combines its partial sums.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum KMeansCollective {
    /// Regroup when the centroids are large (k x d >= 2^20).
    Auto,
    /// Partial sums per rank, one allreduce.
    Allreduce,
    /// Node aggregation, a range of centroids per rank, allgather.
    Regroup,
}

/// A failure of the command, with its exit code: 2 for bad input or arguments (including
/// unusable paths), 1 for a failure while running, 128 + the signal when interrupted.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
}

impl From<JobError> for Failure {
    fn from(e: JobError) -> Failure {
        if let Some(algo) = e.rank_error::<AlgoError>() {
            return Failure {
                code: if algo.is_bad_input() { 2 } else { 1 },
                message: algo.to_string(),
            };
        }
        let code = match &e {
            JobError::Config(_) => 2,
            JobError::Interrupted { signal } => (128 + signal).clamp(0, 255) as u8,
            _ => 1,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

/// Checks an output path before the job starts, so that an unusable one is a usage error
/// (exit 2) and not a failure after the work is done.
fn check_output(path: &std::path::Path) -> Result<(), Failure> {
    let bad = |why: String| Failure::usage(format!("cannot write {}: {why}", path.display()));
    let target = resolve_output(path).map_err(|e| bad(e.to_string()))?;
    match std::fs::metadata(&target) {
        Ok(m) if m.is_dir() => return Err(bad("is a directory".into())),
        Ok(m) if !m.is_file() => {
            // A device or FIFO is written directly: it must be writable.
            return rustix::fs::access(&target, rustix::fs::Access::WRITE_OK)
                .map_err(|e| bad(std::io::Error::from(e).to_string()));
        }
        _ => {}
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {
            rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK).map_err(|e| {
                bad(format!(
                    "directory {}: {}",
                    dir.display(),
                    std::io::Error::from(e)
                ))
            })
        }
        Ok(_) => Err(bad(format!("{} is not a directory", dir.display()))),
        Err(e) => Err(bad(format!("directory {}: {e}", dir.display()))),
    }
}

fn config_of(rt: &RuntimeArgs) -> Result<Config, Failure> {
    let backend = match rt.backend {
        BackendArg::Local => Backend::Local,
        BackendArg::Mpi => Backend::Mpi,
    };
    let policy = match rt.policy {
        PolicyArg::Araw => Policy::Araw,
        PolicyArg::Arlw => Policy::Arlw,
        PolicyArg::Lrlw => Policy::Lrlw,
    };
    let resume = match rt.resume_policy {
        ResumeArg::MostResident => ResumePolicy::MostResident,
        ResumeArg::Fifo => ResumePolicy::Fifo,
    };
    let mut config = Config::new(rt.ranks)
        .nodes(rt.nodes)
        .backend(backend)
        .policy(policy)
        .resume_policy(resume);
    if let Some(text) = &rt.mem_budget {
        let bytes = text
            .parse::<spillway::ByteSize>()
            .ok()
            .map(spillway::ByteSize::bytes)
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                Failure::usage(format!(
                    "invalid --mem-budget '{text}' (expected e.g. 256M or 2G)"
                ))
            })?;
        config = config.mem_budget(bytes);
    }
    if let Some(path) = &rt.trace {
        config = config.trace(path);
    }
    if let Some(text) = &rt.stack_size {
        let bytes = text
            .parse::<spillway::ByteSize>()
            .ok()
            .map(spillway::ByteSize::bytes)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| {
                Failure::usage(format!(
                    "invalid --stack-size '{text}' (expected e.g. 256K or 4M)"
                ))
            })?;
        config = config.stack_size(bytes);
    }
    match rt.running.as_deref() {
        // Under a budget, by default the number of running ranks adapts to memory (SBMA).
        None if rt.mem_budget.is_some() => config = config.dynamic_running(true),
        None => {}
        Some("dynamic") => config = config.dynamic_running(true),
        Some(text) => {
            let r: u32 = text.parse().map_err(|_| {
                Failure::usage(format!("invalid --running '{text}' (a number or dynamic)"))
            })?;
            config = config.running(r);
        }
    }
    if let Some(dir) = &rt.spill_dir {
        let meta = std::fs::metadata(dir)
            .map_err(|e| Failure::usage(format!("invalid --spill-dir {}: {e}", dir.display())))?;
        if !meta.is_dir() {
            return Err(Failure::usage(format!(
                "invalid --spill-dir {}: not a directory",
                dir.display()
            )));
        }
        rustix::fs::access(dir, rustix::fs::Access::WRITE_OK).map_err(|e| {
            Failure::usage(format!(
                "invalid --spill-dir {}: {}",
                dir.display(),
                std::io::Error::from(e)
            ))
        })?;
        config = config.spill_dir(dir);
    }
    config.layout().map_err(Failure::from)?;
    Ok(config)
}

fn progress_bar(rt: &RuntimeArgs, total: usize, what: &str) -> Option<ProgressBar> {
    if rt.json || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(total as u64);
    let style = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} iterations  {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    Some(bar)
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

/// The graph, its name in reports and the options of `run pagerank`, for either engine.
pub(crate) fn pagerank_job(
    args: &PageRankArgs,
) -> Result<(GraphSource, String, PageRankOptions), Failure> {
    let (source, input_name) = match (&args.input, &args.generate) {
        (Some(path), _) => (GraphSource::from_path(path), path.display().to_string()),
        (None, g) => {
            let spec_text = g.clone().unwrap_or_else(|| "rmat:18:16".to_string());
            let spec = RmatSpec::parse(&spec_text).map_err(Failure::usage)?;
            (GraphSource::Rmat(spec), spec_text)
        }
    };
    let options = PageRankOptions {
        iterations: args.iterations,
        tolerance: args.tolerance,
        damping: args.damping,
    };
    Ok((source, input_name, options))
}

/// Everything that determines a PageRank run's output, for its checkpoints (the sums depend
/// on the layout too); `engine` names an engine other than the direct one.
pub(crate) fn pagerank_fingerprint(
    args: &PageRankArgs,
    config: &Config,
    input_name: &str,
    engine: Option<&str>,
) -> String {
    let engine = engine.map_or_else(String::new, |e| format!(" engine={e}"));
    format!(
        "pagerank{engine} input={} iterations={} tolerance={:e} damping={:e} ranks={} nodes={}",
        match &args.input {
            Some(path) => file_identity(path),
            None => input_name.to_string(),
        },
        args.iterations,
        args.tolerance,
        args.damping,
        config.ranks_total(),
        config.nodes_total(),
    )
}

fn run_pagerank(args: PageRankArgs) -> Result<Report, Failure> {
    if args.engine == mapreduce::EngineArg::Mapreduce {
        return mapreduce::run_pagerank_mr(args);
    }
    if args.ft.is_set() {
        return Err(Failure::usage(
            "--fault-tolerance and --inject-failure need --engine mapreduce",
        ));
    }
    let config = config_of(&args.runtime)?;
    if let Some(out) = &args.out {
        check_output(out)?;
    }
    args.checkpoint.check()?;
    let (source, input_name, options) = pagerank_job(&args)?;
    // Everything that determines the output (the f64 sums depend on the layout too).
    let fingerprint = pagerank_fingerprint(&args, &config, &input_name, None);
    let bar = progress_bar(&args.runtime, args.iterations, "pagerank");
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let mut ck = args.checkpoint.checkpointer(&fingerprint);
        let t0 = Instant::now();
        let graph = load_graph(&world, &source)?;
        world.barrier()?;
        restore(&world, ck.as_mut())?;
        let load = t0.elapsed();
        let mut probe = (world.rank() == 0).then(|| IoProbe::start(rank.spill_dir()));
        let mut on_progress = |p: &Progress| {
            if let Some(probe) = &mut probe {
                probe.sample();
                if let Some(b) = &bar {
                    b.set_position(p.iteration as u64);
                    b.set_message(format!("L1 change {:.3e}", p.delta));
                }
            }
        };
        let io_before = node_io(rank);
        let t1 = Instant::now();
        // Survives lost processes under MPI with ULFM: the survivors go on (with the graph
        // read again over them) and write the output.
        let survived = pagerank_surviving(
            &world,
            &source,
            graph,
            &options,
            &mut on_progress,
            ck.as_mut(),
        )?;
        let (result, graph, world) = (survived.result, survived.graph, survived.comm);
        let compute = t1.elapsed();
        let ck_facts = checkpoint_facts(&world, ck.as_ref())?;
        let io = world.allreduce(&[node_io(rank) - io_before], Sum)?[0];
        if let Some(path) = &args.out {
            write_ordered(&world, path, |w| {
                for (i, r) in result.ranks.iter().enumerate() {
                    writeln!(w, "{} {}", result.lo + i as u64, r)?;
                }
                Ok(())
            })?;
        }
        let sum = world.allreduce(&[result.ranks.iter().sum::<f64>()], Sum)?[0];
        let max_edges = world.allreduce(&[graph.targets.len() as u64], Max)?[0];
        let iteration_bytes = world.allreduce(&[result.iteration_bytes], Sum)?[0];
        Ok((
            graph.n,
            graph.total_edges,
            max_edges,
            result.iterations,
            result.delta,
            sum,
            load,
            compute,
            result.iteration_times,
            io,
            ck_facts,
            iteration_bytes,
            probe.map(|p| p.per_iteration()).unwrap_or_default(),
        ))
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (
        n,
        m,
        max_edges,
        iterations,
        delta,
        sum,
        load,
        compute,
        times,
        io,
        ck_facts,
        touched,
        iteration_io,
    ) = results.into_iter().next().expect("rank 0");
    // Iterations this run performed (fewer than `iterations` after a resume).
    let ran = times.len();
    let mut report = Report::new("pagerank", &input_name, &config);
    report.set_run(iterations, &times, load, compute, start.elapsed(), &stats);
    report.iteration_io = iteration_io;
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("vertices".into(), n as f64),
        ("edges".into(), m as f64),
        ("max_edges_per_rank".into(), max_edges as f64),
        ("iteration_bytes".into(), touched as f64),
        ("final_l1_change".into(), delta),
        (
            "spill_io_per_iteration_bytes".into(),
            io as f64 / ran.max(1) as f64,
        ),
        ("rank_sum".into(), sum),
        (
            "edges_per_second".into(),
            m as f64 * ran as f64 / compute.as_secs_f64().max(1e-12),
        ),
    ];
    report.facts.extend(ck_facts);
    Ok(report)
}

fn run_kmeans(args: KMeansArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    for out in args.out.iter().chain(&args.assign) {
        check_output(out)?;
    }
    let init =
        Init::parse(&args.init).map_err(|e| Failure::usage(format!("invalid --init: {e}")))?;
    if args.checkpoint.checkpoint_dir.is_some() && args.collective == KMeansCollective::Regroup {
        return Err(Failure::usage(
            "--checkpoint-dir is not supported with --collective regroup yet",
        ));
    }
    args.checkpoint.check()?;
    let (source, input_name) = match (&args.input, &args.generate) {
        (Some(path), _) => (PointSource::Csv(path.clone()), path.display().to_string()),
        (None, g) => {
            let spec_text = g.clone().unwrap_or_else(|| "blobs:100000:8:8".to_string());
            let spec = BlobsSpec::parse(&spec_text).map_err(Failure::usage)?;
            (PointSource::Blobs(spec), spec_text)
        }
    };
    let fingerprint = format!(
        "kmeans input={} k={} iterations={} init={} ranks={} nodes={}",
        match &args.input {
            Some(path) => file_identity(path),
            None => input_name.clone(),
        },
        args.k,
        args.iterations,
        match &init {
            Init::File(path) => format!("file:{}", file_identity(path)),
            _ => args.init.clone(),
        },
        config.ranks_total(),
        config.nodes_total(),
    );
    let options = KMeansOptions {
        k: args.k,
        max_iterations: args.iterations,
        init,
    };
    let bar = progress_bar(&args.runtime, args.iterations, "kmeans");
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let mut ck = args.checkpoint.checkpointer(&fingerprint);
        let t0 = Instant::now();
        let points = load_points(&world, &source)?;
        if let PointSource::Csv(path) = &source {
            if options.k as u64 > points.total {
                return Err(AlgoError::Input(InputError::new(
                    path,
                    None,
                    format!(
                        "k = {} is larger than the number of points ({})",
                        options.k, points.total
                    ),
                )));
            }
        }
        world.barrier()?;
        let load = t0.elapsed();
        let mut probe = (world.rank() == 0).then(|| IoProbe::start(rank.spill_dir()));
        let mut on_progress = |p: &Progress| {
            if let Some(probe) = &mut probe {
                probe.sample();
                if let Some(b) = &bar {
                    b.set_position(p.iteration as u64);
                    b.set_message(format!("{} points moved", p.delta));
                }
            }
        };
        let t1 = Instant::now();
        let regroup = match args.collective {
            // Checkpoints are implemented for the allreduce engine only.
            // The allreduce engine survives lost processes (MPI with ULFM).
            KMeansCollective::Auto => {
                ck.is_none()
                    && !rank.survives_lost_processes()
                    && prefer_regroup(options.k, points.dim)
            }
            KMeansCollective::Allreduce => false,
            KMeansCollective::Regroup => true,
        };
        restore(&world, ck.as_mut())?;
        let (result, phases, world, points) = if regroup {
            let r = kmeans_regroup(&world, &points, &options, &mut on_progress)?;
            let result = KMeansResult {
                // Only rank 0 writes the centroids: the others need no copy of their own.
                centroids: if world.rank() == 0 {
                    r.centroids.to_vec()
                } else {
                    Vec::new()
                },
                assignment: r.assignment,
                iterations: r.iterations,
                converged: r.converged,
                iteration_times: r.iteration_times,
            };
            // Each phase's time averaged over the ranks (a rank's reduce includes waiting for
            // the slowest rank's compute).
            let mut totals = [0.0f64; 3];
            for t in &r.phases {
                totals[0] += t.bcast.as_secs_f64();
                totals[1] += t.compute.as_secs_f64();
                totals[2] += t.reduce.as_secs_f64();
            }
            let sums = world.allreduce(&totals, Sum)?;
            let per = (world.size() * r.phases.len().max(1)) as f64;
            let phases = sums.iter().map(|s| s / per).collect::<Vec<f64>>();
            (result, phases, world, points)
        } else {
            // Survives lost processes under MPI with ULFM: the survivors go on (with the points
            // read again over them) and write the output.
            let s = kmeans_surviving(
                &world,
                &source,
                points,
                &options,
                &mut on_progress,
                ck.as_mut(),
            )?;
            (s.result, Vec::new(), s.comm, s.points)
        };
        let compute = t1.elapsed();
        let ck_facts = checkpoint_facts(&world, ck.as_ref())?;
        // Both outputs appear only if both are complete: the centroids are committed after
        // the assignment file.
        let mut centroids_file = None;
        if let (Some(path), 0) = (&args.out, world.rank()) {
            let out_err = |e| AlgoError::Output {
                path: path.clone(),
                source: e,
            };
            let mut file = AtomicFile::create(path).map_err(out_err)?;
            let w = file.writer();
            for row in result.centroids.chunks(points.dim.max(1)) {
                let line: Vec<String> = row.iter().map(|v| v.to_string()).collect();
                writeln!(w, "{}", line.join(",")).map_err(out_err)?;
            }
            centroids_file = Some(file);
        }
        if let Some(path) = &args.assign {
            write_ordered(&world, path, |w| {
                for a in result.assignment.as_slice() {
                    writeln!(w, "{a}")?;
                }
                Ok(())
            })?;
        }
        if let (Some(file), Some(path)) = (centroids_file, &args.out) {
            file.commit().map_err(|e| AlgoError::Output {
                path: path.clone(),
                source: e,
            })?;
        }
        world.barrier()?;
        Ok((
            points.total,
            points.dim,
            result.iterations,
            result.converged,
            load,
            compute,
            result.iteration_times,
            phases,
            regroup,
            ck_facts,
            probe.map(|p| p.per_iteration()).unwrap_or_default(),
        ))
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (n, dim, iterations, converged, load, compute, times, phases, regroup, ck_facts, io) =
        results.into_iter().next().expect("rank 0");
    let mut report = Report::new("kmeans", &input_name, &config);
    report.set_run(iterations, &times, load, compute, start.elapsed(), &stats);
    report.iteration_io = io;
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("points".into(), n as f64),
        ("dimensions".into(), dim as f64),
        ("k".into(), args.k as f64),
        ("converged".into(), f64::from(u8::from(converged))),
        ("regroup".into(), f64::from(u8::from(regroup))),
    ];
    if let [bcast, compute, reduce] = phases[..] {
        report.facts.extend([
            ("bcast_seconds_per_iteration".into(), bcast),
            ("compute_seconds_per_iteration".into(), compute),
            ("reduce_seconds_per_iteration".into(), reduce),
        ]);
    }
    report.facts.extend(ck_facts);
    Ok(report)
}

fn gen_rmat(scale: u32, edge_factor: u32, seed: u64, out: PathBuf) -> Result<(), Failure> {
    check_output(&out)?;
    let spec =
        RmatSpec::parse(&format!("rmat:{scale}:{edge_factor}:{seed}")).map_err(Failure::usage)?;
    let fail = |e: std::io::Error| Failure {
        code: 1,
        message: format!("cannot write {}: {e}", out.display()),
    };
    let mut file = AtomicFile::create(&out).map_err(fail)?;
    let w = file.writer();
    writeln!(
        w,
        "# R-MAT scale={scale} edge_factor={edge_factor} seed={seed} a=0.57 b=0.19 c=0.19 d=0.05"
    )
    .map_err(fail)?;
    let total = spec.num_edges();
    let mut buf = Vec::new();
    let mut at = 0;
    while at < total {
        let end = (at + (1 << 20)).min(total);
        buf.clear();
        spec.edges(at..end, &mut buf);
        for (s, d) in &buf {
            writeln!(w, "{s} {d}").map_err(fail)?;
        }
        at = end;
    }
    file.commit().map_err(fail)
}

fn gen_blobs(spec_text: &str, out: PathBuf) -> Result<(), Failure> {
    use std::fmt::Write as _;
    check_output(&out)?;
    let spec = BlobsSpec::parse(spec_text).map_err(Failure::usage)?;
    let fail = |e: std::io::Error| Failure {
        code: 1,
        message: format!("cannot write {}: {e}", out.display()),
    };
    let mut file = AtomicFile::create(&out).map_err(fail)?;
    let w = file.writer();
    let mut values = Vec::new();
    let mut line = String::new();
    let mut at = 0;
    while at < spec.n {
        let end = (at + (1 << 16)).min(spec.n);
        values.clear();
        spec.points(at..end, &mut values);
        for point in values.chunks_exact(spec.d) {
            line.clear();
            for (j, v) in point.iter().enumerate() {
                if j > 0 {
                    line.push(',');
                }
                // `Display` of f64 is the shortest text that parses back to the same value.
                let _ = write!(line, "{v}");
            }
            line.push('\n');
            w.write_all(line.as_bytes()).map_err(fail)?;
        }
        at = end;
    }
    file.commit().map_err(fail)
}

/// Ends running jobs on SIGINT and SIGTERM: the job is aborted, its temporary outputs go, and
/// the process exits with 128 + the signal. If the job does not end within a few seconds (a
/// rank computing without calling the runtime), or a second signal comes, the process removes
/// the temporary outputs itself and exits at once (spill files have no names: nothing of them
/// remains).
fn handle_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        let mut first = true;
        for signal in signals.forever() {
            let name = if signal == SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            if !first || spillway::interrupt(signal) == 0 {
                // No job to end cleanly (or asked twice): go now.
                remove_temporary_outputs();
                let line = format!("spillway: interrupted by {name}\n");
                let _ = std::io::stderr().write_all(line.as_bytes());
                std::process::exit(128 + signal);
            }
            first = false;
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(5));
                remove_temporary_outputs();
                let line =
                    format!("spillway: interrupted by {name}; the job did not stop in time\n");
                let _ = std::io::stderr().write_all(line.as_bytes());
                std::process::exit(128 + signal);
            });
        }
    });
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    handle_signals();
    let outcome = match cli.command {
        Command::Compress(a) => structures::compress_cmd(a),
        Command::Decompress(a) => structures::decompress_cmd(a),
        Command::Probe(a) => bsp::probe_cmd(a),
        Command::Run {
            algorithm: Algorithm::Dyngraph(a),
        } => structures::dyngraph_cmd(a),
        Command::Run { algorithm } => {
            let json = match &algorithm {
                Algorithm::Pagerank(a) => a.runtime.json,
                Algorithm::Kmeans(a) => a.runtime.json,
                Algorithm::Fft(a) => a.runtime.json,
                Algorithm::Sort(a) => a.runtime.json,
                Algorithm::Wordcount(a) => a.json(),
                Algorithm::Cc(a) => a.json(),
                Algorithm::Spkmeans(a) => a.runtime.json,
                Algorithm::Sgd(a) => a.runtime.json,
                Algorithm::Colour(a) => a.runtime.json,
                Algorithm::Dyngraph(_) => unreachable!("handled above"),
            };
            let report = match algorithm {
                Algorithm::Pagerank(a) => run_pagerank(a),
                Algorithm::Kmeans(a) => run_kmeans(a),
                Algorithm::Fft(a) => bsp::run_fft(a),
                Algorithm::Sort(a) => bsp::run_sort(a),
                Algorithm::Wordcount(a) => mapreduce::run_wordcount(a),
                Algorithm::Cc(a) => mapreduce::run_cc(a),
                Algorithm::Spkmeans(a) => more::run_spkmeans(a),
                Algorithm::Sgd(a) => more::run_sgd(a),
                Algorithm::Colour(a) => more::run_colour(a),
                Algorithm::Dyngraph(_) => unreachable!("handled above"),
            };
            report.and_then(|r| {
                r.print(json).map_err(|e| Failure {
                    code: 1,
                    message: if e.kind() == std::io::ErrorKind::BrokenPipe {
                        String::new()
                    } else {
                        format!("cannot write the report to stdout: {e}")
                    },
                })
            })
        }
        Command::Gen {
            what:
                Generator::Rmat {
                    scale,
                    edge_factor,
                    seed,
                    out,
                    dedup,
                    ranks,
                },
        } => {
            if dedup {
                mapreduce::gen_rmat_dedup(scale, edge_factor, seed, out, ranks)
            } else {
                gen_rmat(scale, edge_factor, seed, out)
            }
        }
        Command::Gen {
            what:
                Generator::Blobs {
                    points,
                    dim,
                    k,
                    seed,
                    out,
                },
        } => gen_blobs(&format!("blobs:{points}:{dim}:{k}:{seed}"), out),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.message.is_empty() {
                // One write, so that the messages of several MPI processes do not interleave.
                let line = format!("spillway: error: {}\n", f.message);
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
            ExitCode::from(f.code)
        }
    }
}
