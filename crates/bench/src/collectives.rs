//! `collectives`: bandwidth of `allreduce`, `bcast` and `alltoall` on the local backend against
//! a single-threaded `memcpy` of the same number of bytes, measured in the same run.
//!
//! # What is timed
//! Every rank runs the same sequence. For each operation and message size, one untimed call
//! warms up and checks the result (so a wrong collective cannot pass as a fast one); then each
//! repetition is `barrier`, start the clock, the operation, `barrier`, stop the clock, timed on
//! rank 0. The closing barrier is included on purpose: sends are buffered, so the root of a
//! broadcast could return before anyone has received anything; with it, a repetition lasts
//! until every rank has finished its part. The latency of the barrier alone is reported
//! separately and matters only for small messages.
//!
//! # Effective bandwidth
//! `bytes / median time`, in GB/s (10^9 bytes/s), where `bytes` is the message size for
//! `bcast` (`u8`) and `allreduce` (`f64`, `Sum`), and the size of each rank's send buffer for
//! `alltoall` (`u8`, equal blocks of `size / ranks` bytes).

use std::hint::black_box;
use std::time::{Duration, Instant};

use spillway::{run, Collectives, Comm, Config, Error, Sum};

use crate::harness::{
    format_duration, format_size, gb_per_s, memcpy_stats, parse_size, BoxError, Options, Stats,
};

/// The (ranks, nodes) configurations measured when neither `--ranks` nor `--nodes` is given.
const DEFAULT_CONFIGS: [(u32, u32); 4] = [(2, 1), (4, 1), (4, 2), (8, 2)];

/// Message sizes measured when `--sizes` is not given.
const DEFAULT_SIZES: &str = "1K,64K,1M,16M";

/// Sizes from this one on get fewer repetitions (each takes milliseconds).
const LARGE: usize = 4 << 20;

/// Usage text of the subcommand.
pub const USAGE: &str =
    "collectives [--ranks R] [--nodes K] [--running X] [--sizes 1K,64K,1M,16M] [--reps N]
    --ranks/--nodes  measure only this configuration (default: (2,1) (4,1) (4,2) (8,2))
    --running        ranks of a node executing at once (default 2)
    --sizes          comma-separated message sizes, suffixes K/M/G are binary
    --reps           repetitions below 4 MiB (default 45); larger sizes get max(3, N/3)";

/// A collective operation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Allreduce,
    Bcast,
    Alltoall,
}

impl Op {
    const ALL: [Op; 3] = [Op::Allreduce, Op::Bcast, Op::Alltoall];

    fn name(self) -> &'static str {
        match self {
            Op::Allreduce => "allreduce",
            Op::Bcast => "bcast",
            Op::Alltoall => "alltoall",
        }
    }
}

/// Rank 0's timings of one operation at one size.
struct Measured {
    op: Op,
    /// The requested size.
    size: usize,
    /// Bytes counted for the bandwidth (the size rounded to whole elements or blocks).
    bytes: usize,
    stats: Stats,
}

/// Rank 0's results of one configuration.
struct ConfigResult {
    ranks: u32,
    nodes: u32,
    barrier: Stats,
    measured: Vec<Measured>,
}

/// Runs the subcommand with its arguments.
pub fn main(args: &[String]) -> Result<(), BoxError> {
    let opts = Options::parse(args, &["ranks", "nodes", "running", "sizes", "reps"])?;
    let running: u32 = opts.get("running")?.unwrap_or(2);
    let reps: usize = opts.get("reps")?.unwrap_or(45);
    let sizes = opts
        .raw("sizes")
        .unwrap_or(DEFAULT_SIZES)
        .split(',')
        .map(parse_size)
        .collect::<Result<Vec<_>, _>>()?;
    let ranks: Option<u32> = opts.get("ranks")?;
    let nodes: Option<u32> = opts.get("nodes")?;
    let configs = if ranks.is_none() && nodes.is_none() {
        DEFAULT_CONFIGS.to_vec()
    } else {
        vec![(ranks.unwrap_or(4), nodes.unwrap_or(1))]
    };
    if running == 0 || reps == 0 {
        return Err("--running and --reps must be at least 1".into());
    }
    let reps_for = |size: usize| {
        if size < LARGE {
            reps
        } else {
            (reps / 3).max(3)
        }
    };

    println!("## Collectives (local backend, running = {running} per node)\n");
    println!("memcpy baseline: one thread, `copy_from_slice` between pre-touched buffers.\n");
    println!("| size | reps | median | min | GB/s (median) |");
    println!("|---:|---:|---:|---:|---:|");
    let memcpy: Vec<Stats> = sizes
        .iter()
        .map(|&size| {
            let s = memcpy_stats(size, reps_for(size));
            println!(
                "| {} | {} | {} | {} | {:.2} |",
                format_size(size),
                s.reps,
                format_duration(s.median),
                format_duration(s.min),
                gb_per_s(size, s.median)
            );
            s
        })
        .collect();

    let mut results = Vec::new();
    for &(ranks, nodes) in &configs {
        eprintln!("collectives: ranks = {ranks}, nodes = {nodes}, running = {running} ...");
        let config = Config::new(ranks).nodes(nodes).running(running);
        let mut out = run(&config, |rank| measure_rank(rank, &sizes, &reps_for))?;
        let (barrier, measured) = out.swap_remove(0).ok_or("rank 0 returned no timings")?;
        results.push(ConfigResult {
            ranks,
            nodes,
            barrier,
            measured,
        });
    }

    println!("\nBarrier latency (one `barrier`, included once in every repetition below):\n");
    println!("| ranks | nodes | reps | median | min |");
    println!("|---:|---:|---:|---:|---:|");
    for r in &results {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.ranks,
            r.nodes,
            r.barrier.reps,
            format_duration(r.barrier.median),
            format_duration(r.barrier.min)
        );
    }

    println!(
        "\nEffective bandwidth = bytes / median time; bytes = message size for bcast and \
         allreduce, each rank's send buffer for alltoall. ratio = spillway GB/s / memcpy GB/s.\n"
    );
    println!("| op | ranks | nodes | size | reps | median | min | GB/s | memcpy GB/s | ratio |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for op in Op::ALL {
        for r in &results {
            for m in r.measured.iter().filter(|m| m.op == op) {
                let index = sizes.iter().position(|&s| s == m.size).unwrap_or(0);
                let bw = gb_per_s(m.bytes, m.stats.median);
                let base = gb_per_s(m.size, memcpy[index].median);
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} | {:.3} | {:.2} | {} |",
                    op.name(),
                    r.ranks,
                    r.nodes,
                    format_size(m.bytes),
                    m.stats.reps,
                    format_duration(m.stats.median),
                    format_duration(m.stats.min),
                    bw,
                    base,
                    format_ratio(bw / base)
                );
            }
        }
    }
    println!();
    Ok(())
}

/// Formats a ratio with three decimals, or in scientific notation when that would show zero.
fn format_ratio(r: f64) -> String {
    if r >= 0.01 {
        format!("{r:.3}")
    } else {
        format!("{r:.1e}")
    }
}

/// Times `reps` repetitions of `barrier; op; barrier` (the clock starts after the first
/// barrier). Every rank returns its own timings.
fn time_op(
    world: &Comm,
    reps: usize,
    mut op: impl FnMut() -> Result<(), Error>,
) -> Result<Vec<Duration>, Error> {
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        world.barrier()?;
        let start = Instant::now();
        op()?;
        world.barrier()?;
        times.push(start.elapsed());
    }
    Ok(times)
}

/// The SPMD part: every rank measures everything; rank 0 returns the barrier latency and the
/// timings, the others `None`.
fn measure_rank(
    rank: &spillway::Rank,
    sizes: &[usize],
    reps_for: &dyn Fn(usize) -> usize,
) -> Result<Option<(Stats, Vec<Measured>)>, BoxError> {
    let world = Comm::world(rank);
    let (me, p) = (world.rank(), world.size());
    let barrier = Stats::of(&time_op(&world, 50, || Ok(()))?);
    let mut measured = Vec::new();
    for &size in sizes {
        let reps = reps_for(size);
        for op in Op::ALL {
            let (bytes, times) = match op {
                Op::Allreduce => {
                    let n = (size / 8).max(1);
                    let data = vec![me as f64 + 1.0; n];
                    let expected = (p * (p + 1) / 2) as f64;
                    let check = world.allreduce(&data, Sum)?;
                    if check.len() != n || check.iter().any(|&v| v != expected) {
                        return Err(format!("allreduce of {size} bytes returned wrong sums").into());
                    }
                    let times = time_op(&world, reps, || {
                        black_box(world.allreduce(&data, Sum)?);
                        Ok(())
                    })?;
                    (n * 8, times)
                }
                Op::Bcast => {
                    let pattern = |i: usize| (i % 251) as u8;
                    let mut buf: Vec<u8> = if me == 0 {
                        (0..size).map(pattern).collect()
                    } else {
                        vec![0; size]
                    };
                    world.bcast_into(0, &mut buf)?;
                    if buf.iter().enumerate().any(|(i, &b)| b != pattern(i)) {
                        return Err(format!("bcast of {size} bytes delivered wrong data").into());
                    }
                    let times = time_op(&world, reps, || world.bcast_into(0, &mut buf))?;
                    (size, times)
                }
                Op::Alltoall => {
                    let block = (size / p).max(1);
                    // Block j of rank i holds the byte (i * p + j) mod 256.
                    let send: Vec<u8> = (0..p * block)
                        .map(|k| ((me * p + k / block) % 256) as u8)
                        .collect();
                    let got = world.alltoall(&send)?;
                    let ok = got.len() == p * block
                        && got
                            .iter()
                            .enumerate()
                            .all(|(k, &b)| b == (((k / block) * p + me) % 256) as u8);
                    if !ok {
                        return Err(format!("alltoall of {size} bytes delivered wrong data").into());
                    }
                    let times = time_op(&world, reps, || {
                        black_box(world.alltoall(&send)?);
                        Ok(())
                    })?;
                    (p * block, times)
                }
            };
            measured.push(Measured {
                op,
                size,
                bytes,
                stats: Stats::of(&times),
            });
        }
    }
    Ok((me == 0).then_some((barrier, measured)))
}
