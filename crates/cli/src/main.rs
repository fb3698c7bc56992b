//! The `spillway` command-line tool: runs the shipped algorithms on files or generated data.

mod report;
mod structures;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use spillway::algorithms::generate::{BlobsSpec, RmatSpec};
use spillway::algorithms::graph::{load_graph, GraphSource};
use spillway::algorithms::input::{AtomicFile, InputError};
use spillway::algorithms::kmeans::{kmeans, Init, KMeansOptions};
use spillway::algorithms::output::write_ordered;
use spillway::algorithms::pagerank::{pagerank, PageRankOptions};
use spillway::algorithms::points::{load_points, PointSource};
use spillway::algorithms::{AlgoError, Progress};
use spillway::{
    run_with_stats, Backend, Collectives, Comm, Config, JobError, Max, Policy, ResumePolicy, Sum,
};

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
}

#[derive(Subcommand, Debug)]
enum Algorithm {
    /// PageRank (push, 1-D rows balanced by non-zeros).
    Pagerank(PageRankArgs),
    /// Lloyd K-means (Harp style: local aggregation + allreduce).
    Kmeans(KMeansArgs),
    /// Replay an edge stream into a dynamic graph structure.
    Dyngraph(structures::DyngraphArgs),
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
    },
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
    /// cores while the memory budget has room for them). Default: the cores available.
    #[arg(long)]
    running: Option<String>,
    /// Directory for spill files.
    #[arg(long)]
    spill_dir: Option<PathBuf>,
    /// Memory budget per node (e.g. 256M, 2G): storage-backed data and buffered messages
    /// beyond it go to the spill directory.
    #[arg(long)]
    mem_budget: Option<String>,
    /// When storage-backed memory is released: araw, arlw or lrlw.
    #[arg(long, default_value = "araw")]
    policy: String,
    /// Which runnable rank resumes first: most-resident (BDMPI) or fifo.
    #[arg(long, default_value = "most-resident")]
    resume: String,
    /// Engine between nodes: local (threads of this process) or mpi (one process per node,
    /// started with `mpirun -np NODES`; needs a build with `--features mpi`).
    #[arg(long, default_value = "local")]
    backend: String,
    /// Print the final report as one JSON object on stdout, and nothing else.
    #[arg(long)]
    json: bool,
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
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// A failure of the command, with its exit code.
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
        let code = if matches!(e, JobError::Config(_)) {
            2
        } else {
            1
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

fn config_of(rt: &RuntimeArgs) -> Result<Config, Failure> {
    let backend = Backend::from_name(&rt.backend).ok_or_else(|| {
        Failure::usage(format!(
            "unknown backend '{}' (available: local, mpi)",
            rt.backend
        ))
    })?;
    let policy = Policy::from_name(&rt.policy).ok_or_else(|| {
        Failure::usage(format!(
            "unknown policy '{}' (available: araw, arlw, lrlw)",
            rt.policy
        ))
    })?;
    let resume = ResumePolicy::from_name(&rt.resume).ok_or_else(|| {
        Failure::usage(format!(
            "unknown resume policy '{}' (available: most-resident, fifo)",
            rt.resume
        ))
    })?;
    let mut config = Config::new(rt.ranks)
        .nodes(rt.nodes)
        .backend(backend)
        .policy(policy)
        .resume_policy(resume);
    if let Some(text) = &rt.mem_budget {
        let bytes = Config::parse_size(text).filter(|&b| b > 0).ok_or_else(|| {
            Failure::usage(format!(
                "invalid --mem-budget '{text}' (expected e.g. 256M or 2G)"
            ))
        })?;
        config = config.mem_budget(bytes);
    }
    match rt.running.as_deref() {
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

fn run_pagerank(args: PageRankArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
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
    let bar = progress_bar(&args.runtime, args.iterations, "pagerank");
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let t0 = Instant::now();
        let graph = load_graph(&world, &source)?;
        world.barrier()?;
        let load = t0.elapsed();
        let mut on_progress = |p: &Progress| {
            if world.rank() == 0 {
                if let Some(b) = &bar {
                    b.set_position(p.iteration as u64);
                    b.set_message(format!("L1 change {:.3e}", p.delta));
                }
            }
        };
        let io_before = node_io(rank);
        let t1 = Instant::now();
        let result = pagerank(&world, &graph, &options, &mut on_progress)?;
        let compute = t1.elapsed();
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
        ))
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (n, m, max_edges, iterations, delta, sum, load, compute, times, io) =
        results.into_iter().next().expect("rank 0");
    let mut report = Report::new("pagerank", &input_name, &config, &args.runtime.backend);
    report.set_run(iterations, &times, load, compute, start.elapsed(), &stats);
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("vertices".into(), n as f64),
        ("edges".into(), m as f64),
        ("max_edges_per_rank".into(), max_edges as f64),
        ("final_l1_change".into(), delta),
        (
            "spill_io_per_iteration_bytes".into(),
            io as f64 / iterations.max(1) as f64,
        ),
        ("rank_sum".into(), sum),
        (
            "edges_per_second".into(),
            m as f64 * iterations as f64 / compute.as_secs_f64().max(1e-12),
        ),
    ];
    Ok(report)
}

fn run_kmeans(args: KMeansArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    let init =
        Init::parse(&args.init).map_err(|e| Failure::usage(format!("invalid --init: {e}")))?;
    let (source, input_name) = match (&args.input, &args.generate) {
        (Some(path), _) => (PointSource::Csv(path.clone()), path.display().to_string()),
        (None, g) => {
            let spec_text = g.clone().unwrap_or_else(|| "blobs:100000:8:8".to_string());
            let spec = BlobsSpec::parse(&spec_text).map_err(Failure::usage)?;
            (PointSource::Blobs(spec), spec_text)
        }
    };
    let options = KMeansOptions {
        k: args.k,
        max_iterations: args.iterations,
        init,
    };
    let bar = progress_bar(&args.runtime, args.iterations, "kmeans");
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
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
        let mut on_progress = |p: &Progress| {
            if world.rank() == 0 {
                if let Some(b) = &bar {
                    b.set_position(p.iteration as u64);
                    b.set_message(format!("{} points moved", p.delta));
                }
            }
        };
        let t1 = Instant::now();
        let result = kmeans(&world, &points, &options, &mut on_progress)?;
        let compute = t1.elapsed();
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
        ))
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (n, dim, iterations, converged, load, compute, times) =
        results.into_iter().next().expect("rank 0");
    let mut report = Report::new("kmeans", &input_name, &config, &args.runtime.backend);
    report.set_run(iterations, &times, load, compute, start.elapsed(), &stats);
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("points".into(), n as f64),
        ("dimensions".into(), dim as f64),
        ("k".into(), args.k as f64),
        ("converged".into(), f64::from(u8::from(converged))),
    ];
    Ok(report)
}

fn gen_rmat(scale: u32, edge_factor: u32, seed: u64, out: PathBuf) -> Result<(), Failure> {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Compress(a) => structures::compress_cmd(a),
        Command::Decompress(a) => structures::decompress_cmd(a),
        Command::Run {
            algorithm: Algorithm::Dyngraph(a),
        } => structures::dyngraph_cmd(a),
        Command::Run { algorithm } => {
            let json = match &algorithm {
                Algorithm::Pagerank(a) => a.runtime.json,
                Algorithm::Kmeans(a) => a.runtime.json,
                Algorithm::Dyngraph(_) => unreachable!("handled above"),
            };
            let report = match algorithm {
                Algorithm::Pagerank(a) => run_pagerank(a),
                Algorithm::Kmeans(a) => run_kmeans(a),
                Algorithm::Dyngraph(_) => unreachable!("handled above"),
            };
            report.map(|r| r.print(json))
        }
        Command::Gen {
            what:
                Generator::Rmat {
                    scale,
                    edge_factor,
                    seed,
                    out,
                },
        } => gen_rmat(scale, edge_factor, seed, out),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // One write, so that the messages of several MPI processes do not interleave.
            let line = format!("spillway: error: {}\n", f.message);
            let _ = std::io::stderr().write_all(line.as_bytes());
            ExitCode::from(f.code)
        }
    }
}
