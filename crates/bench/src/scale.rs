//! `scale`: what the runtime costs as the number of ranks per node grows (many more ranks than
//! cores, BDMPI's setting), on one node with two running ranks.
//!
//! # Jobs
//! * `empty`: every round is a `barrier`, an `allreduce` of one value and an all-to-all of
//!   empty blocks in its sparse form (`exchange` with nothing to send): nothing but the
//!   runtime's own cost per collective.
//! * `dense`: the same with the dense `alltoallv` of empty blocks, whose counts alone are `R`
//!   per rank (`R^2` in all): it cannot grow less than quadratically.
//! * `pagerank`: PageRank on a graph of two vertices (`0 -> 1`, `1 -> 0`), so that almost every
//!   rank owns nothing and each iteration is the algorithm's exchange and reduction.
//! * `barrier`: `barrier` only, at a larger rank count: memory per idle rank.
//!
//! Each point runs in a child process of its own (`spillway-bench scale-run`), so that its peak
//! resident set size (VmHWM) is its own. Times are medians over the rounds (or iterations),
//! timed on rank 0 between barriers; messages are all messages sent by the job per round.

use std::io::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use spillway::algorithms::graph::pagerank::{pagerank, PageRankOptions};
use spillway::algorithms::graph::{load_graph, GraphSource};
use spillway::{run_with_stats, ByteSize, Collectives, Comm, Config, Sum};

use crate::harness::{format_duration, BoxError, Stats};

/// Arguments of `spillway-bench scale`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Comma-separated rank counts for the `empty` and `pagerank` jobs.
    #[arg(long, default_value = "64,256,1024,4096")]
    ranks: String,
    /// Ranks executing at once.
    #[arg(long, default_value_t = 2)]
    running: u32,
    /// Rounds of the `empty` job and iterations of PageRank.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Ranks of the barrier-only job (0 skips it).
    #[arg(long, default_value_t = 10_000)]
    barrier_ranks: u32,
    /// Stack size of each rank's thread (e.g. 256K; default: the runtime's).
    #[arg(long)]
    stack_size: Option<ByteSize>,
}

/// Which job `scale-run` runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// Barrier, allreduce of one value, sparse all-to-all of empty blocks per round.
    Empty,
    /// Barrier, allreduce of one value, dense alltoallv of empty blocks per round.
    Dense,
    /// PageRank on a two-vertex graph.
    Pagerank,
    /// Barriers only.
    Barrier,
}

/// Arguments of `spillway-bench scale-run` (one point, run in a child process).
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The job.
    #[arg(long, value_enum)]
    job: Job,
    /// Ranks.
    #[arg(long)]
    ranks: u32,
    /// Ranks executing at once.
    #[arg(long, default_value_t = 2)]
    running: u32,
    /// Rounds (or iterations).
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Stack size of each rank's thread.
    #[arg(long)]
    stack_size: Option<ByteSize>,
}

/// One point's results, as `scale-run` prints them.
#[derive(serde::Serialize, serde::Deserialize, Debug)]
struct Point {
    job: String,
    ranks: u32,
    running: u32,
    rounds: usize,
    median_seconds: f64,
    min_seconds: f64,
    messages_per_round: f64,
    peak_rss: u64,
    rss_before: u64,
    total_seconds: f64,
}

fn config_for(args: &RunArgs) -> Result<Config, BoxError> {
    let mut config = Config::new(args.ranks).running(args.running);
    if let Some(s) = &args.stack_size {
        let bytes = s.to_usize().ok_or("--stack-size too large")?;
        config = config.stack_size(bytes);
    }
    Ok(config)
}

/// Runs one point and prints it as one JSON line.
pub fn run_point(args: RunArgs) -> Result<(), BoxError> {
    let rss_before = spillway::current_rss().unwrap_or(0);
    let config = config_for(&args)?;
    let start = Instant::now();
    let rounds = args.rounds.max(1);
    let graph = if args.job == Job::Pagerank {
        let mut file = tempfile::NamedTempFile::new()?;
        writeln!(file, "0 1\n1 0")?;
        Some(file)
    } else {
        None
    };
    let source = graph
        .as_ref()
        .map(|f| GraphSource::EdgeList(f.path().to_path_buf()));
    let (out, stats) = run_with_stats(&config, |rank| -> Result<Vec<Duration>, BoxError> {
        let world = Comm::world(rank);
        let p = world.size();
        let mut times = Vec::with_capacity(rounds);
        match args.job {
            Job::Empty | Job::Dense => {
                let counts = vec![0usize; if args.job == Job::Dense { p } else { 0 }];
                for _ in 0..rounds {
                    world.barrier()?;
                    let t = Instant::now();
                    world.barrier()?;
                    let s = world.allreduce(&[1u64], Sum)?;
                    if s[0] != p as u64 {
                        return Err("allreduce gave a wrong sum".into());
                    }
                    let got = if args.job == Job::Dense {
                        world.alltoallv::<u64>(&[], &counts)?.0
                    } else {
                        world.exchange::<u64>(&[])?.0
                    };
                    if !got.is_empty() {
                        return Err("an all-to-all of empty blocks delivered data".into());
                    }
                    times.push(t.elapsed());
                }
            }
            Job::Barrier => {
                for _ in 0..rounds {
                    let t = Instant::now();
                    world.barrier()?;
                    times.push(t.elapsed());
                }
            }
            Job::Pagerank => {
                let g = load_graph(&world, source.as_ref().expect("a graph file"))?;
                let options = PageRankOptions {
                    iterations: rounds,
                    tolerance: 0.0,
                    damping: 0.85,
                };
                world.barrier()?;
                let result = pagerank(&world, &g, &options, &mut |_| {})?;
                let sum = world.allreduce(&[result.ranks.iter().sum::<f64>()], Sum)?[0];
                if (sum - 1.0).abs() > 1e-9 {
                    return Err(format!("PageRank mass {sum} is not 1").into());
                }
                times = result.iteration_times;
            }
        }
        Ok(times)
    })?;
    let times = &out[0];
    let s = Stats::of(times);
    let point = Point {
        job: format!("{:?}", args.job).to_lowercase(),
        ranks: args.ranks,
        running: args.running,
        rounds,
        median_seconds: s.median.as_secs_f64(),
        min_seconds: s.min.as_secs_f64(),
        messages_per_round: stats.messages_sent() as f64 / rounds as f64,
        peak_rss: stats.peak_rss.unwrap_or(0),
        rss_before,
        total_seconds: start.elapsed().as_secs_f64(),
    };
    println!("{}", serde_json::to_string(&point)?);
    Ok(())
}

fn run_child(job: Job, ranks: u32, args: &Args) -> Result<Point, BoxError> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "scale-run",
        "--job",
        match job {
            Job::Empty => "empty",
            Job::Dense => "dense",
            Job::Pagerank => "pagerank",
            Job::Barrier => "barrier",
        },
        "--ranks",
        &ranks.to_string(),
        "--running",
        &args.running.to_string(),
        "--rounds",
        &args.rounds.to_string(),
    ]);
    if let Some(s) = &args.stack_size {
        cmd.args(["--stack-size", &s.to_string()]);
    }
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!(
            "{job:?} at {ranks} ranks failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let line = String::from_utf8(out.stdout)?;
    Ok(serde_json::from_str(line.trim())?)
}

/// Runs the subcommand.
pub fn main(args: Args) -> Result<(), BoxError> {
    let ranks: Vec<u32> = args
        .ranks
        .split(',')
        .map(|r| {
            r.trim()
                .parse::<u32>()
                .map_err(|_| format!("invalid rank count '{r}'"))
        })
        .collect::<Result<_, _>>()?;
    println!(
        "## Scale in the number of ranks (one node, running = {}, {} rounds)\n",
        args.running, args.rounds
    );
    println!(
        "| job | ranks | time per round (median) | min | messages per round | peak RSS | \
         RSS per rank |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut points = Vec::new();
    for job in [Job::Empty, Job::Dense, Job::Pagerank] {
        for &r in &ranks {
            eprintln!("scale: {job:?} at {r} ranks ...");
            points.push(run_child(job, r, &args)?);
        }
    }
    if args.barrier_ranks > 0 {
        eprintln!("scale: barrier at {} ranks ...", args.barrier_ranks);
        points.push(run_child(Job::Barrier, args.barrier_ranks, &args)?);
    }
    for p in &points {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        println!(
            "| {} | {} | {} | {} | {:.0} | {:.1} MiB | {:.1} KiB |",
            p.job,
            p.ranks,
            format_duration(Duration::from_secs_f64(p.median_seconds)),
            format_duration(Duration::from_secs_f64(p.min_seconds)),
            p.messages_per_round,
            mib(p.peak_rss),
            p.peak_rss.saturating_sub(p.rss_before) as f64 / 1024.0 / p.ranks as f64
        );
    }
    println!(
        "\nRSS per rank = (peak RSS - RSS before the job) / ranks: the runtime's memory per \
         rank, with the job's own data."
    );
    Ok(())
}
