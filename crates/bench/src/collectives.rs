//! `collectives`: bandwidth of `allreduce`, `bcast` and `alltoall` on the local backend (or,
//! with `--backend mpi`, across MPI processes) against a single-threaded `memcpy` of the same
//! number of bytes, measured in the same run.
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
//! The forms timed write into the caller's buffers, as MPI's do: `bcast_into`,
//! `allreduce_into` (in place) and `alltoall_into`. The forms that return a new `Vec` cost in
//! addition a fresh allocation of the result, whose first touch page-faults.
//!
//! # Effective bandwidth
//! `bytes / median time`, in GB/s (10^9 bytes/s), where `bytes` is the message size for
//! `bcast` (`u8`) and `allreduce` (`f64`, `Sum`), and the size of each rank's send buffer for
//! `alltoall` (`u8`, equal blocks of `size / ranks` bytes).
//!
//! # MPI backend
//! With `--backend mpi` (binary built with the feature `mpi`, started by `mpirun -np K`) every
//! MPI process is one node, so the job has K nodes; `--ranks` defaults to K (one rank per
//! process, comparable with a plain MPI program) and may list several rank counts, each run as
//! one job. Only process 0, which holds rank 0, measures the `memcpy` baseline and prints;
//! `scripts/bench_mpi.sh` compares the results with Open MPI's `MPI_Bcast` and `MPI_Allreduce`
//! timed the same way (`scripts/bench_mpi_ref.py`).
//!
//! `--json FILE` also writes every figure as one JSON object per line (times in seconds).

use std::time::{Duration, Instant};

use spillway::{run_with_stats, Backend, ByteSize, Collectives, Comm, Config, Error, Sum};

use crate::harness::{
    filled, format_duration, format_size, gb_per_s, memcpy_stats, BoxError, Stats,
};

/// The (ranks, nodes) configurations measured when neither `--ranks` nor `--nodes` is given.
const DEFAULT_CONFIGS: [(u32, u32); 4] = [(2, 1), (4, 1), (4, 2), (8, 2)];

/// Message sizes measured when `--sizes` is not given.
const DEFAULT_SIZES: &str = "1K,64K,1M,16M";

/// Sizes from this one on get fewer repetitions (each takes milliseconds).
const LARGE: usize = 4 << 20;

/// Sizes from this one on get fewer repetitions still (each takes tens of milliseconds or more).
const HUGE: usize = 64 << 20;

/// Arguments of `spillway-bench collectives`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// local (default): threads of this process; mpi: one node per MPI process (run under
    /// `mpirun -np K`, build with `--features mpi`).
    #[arg(long, default_value = "local")]
    backend: spillway::Backend,
    /// Measure only this rank count (default: (2,1) (4,1) (4,2) (8,2)); with --backend mpi a
    /// comma-separated list, one job each, default the number of processes.
    #[arg(long)]
    ranks: Option<String>,
    /// Measure only this node count (with --backend mpi: the processes; leave it out).
    #[arg(long)]
    nodes: Option<u32>,
    /// Ranks of a node executing at once.
    #[arg(long, default_value_t = 2)]
    running: u32,
    /// Comma-separated message sizes; suffixes K/M/G are binary.
    #[arg(long, default_value = DEFAULT_SIZES)]
    sizes: String,
    /// Repetitions below 4 MiB; sizes from 4 MiB get max(3, N/3), from 64 MiB max(3, N/9).
    #[arg(long, default_value_t = 45)]
    reps: usize,
    /// Comma-separated operations to measure (default: all).
    #[arg(long)]
    ops: Option<String>,
    /// Also write every figure to FILE, one JSON object per line.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// A collective operation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Allreduce,
    Bcast,
    Alltoall,
    Pingpong,
}

impl Op {
    const ALL: [Op; 4] = [Op::Allreduce, Op::Bcast, Op::Alltoall, Op::Pingpong];
    /// What runs without `--ops`.
    const DEFAULT: [Op; 3] = [Op::Allreduce, Op::Bcast, Op::Alltoall];

    fn name(self) -> &'static str {
        match self {
            Op::Allreduce => "allreduce",
            Op::Bcast => "bcast",
            Op::Alltoall => "alltoall",
            Op::Pingpong => "pingpong",
        }
    }

    /// Parses a comma-separated list of operation names; the result keeps the order of
    /// [`Op::ALL`].
    fn parse_list(list: &str) -> Result<Vec<Op>, String> {
        let mut wanted = Vec::new();
        for name in list.split(',').map(str::trim) {
            let op = Op::ALL
                .into_iter()
                .find(|op| op.name() == name)
                .ok_or_else(|| {
                    format!("unknown operation '{name}' (allreduce, bcast, alltoall, pingpong)")
                })?;
            wanted.push(op);
        }
        Ok(Op::ALL
            .into_iter()
            .filter(|op| wanted.contains(op))
            .collect())
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

/// Where the ranks run: threads of this process, or one node per MPI process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    Local,
    /// `process` of `processes` MPI processes.
    Mpi {
        process: u32,
        processes: u32,
    },
}

/// Keeps MPI initialised while the jobs run (finalised when dropped).
#[cfg(feature = "mpi")]
type MpiSession = spillway::mpi::rsmpi::environment::Universe;
#[cfg(not(feature = "mpi"))]
type MpiSession = ();

/// Initialises MPI (serialized, so that waiting ranks can drive the MPI engine themselves) and returns this process's index and
/// the number of processes.
#[cfg(feature = "mpi")]
fn start_mpi() -> Result<(MpiSession, u32, u32), BoxError> {
    use spillway::mpi::rsmpi::{self, topology::Communicator};
    let (universe, _level) = rsmpi::initialize_with_threading(rsmpi::Threading::Serialized)
        .ok_or("MPI could not be initialised")?;
    let world = universe.world();
    let (process, processes) = (world.rank() as u32, world.size() as u32);
    Ok((universe, process, processes))
}

#[cfg(not(feature = "mpi"))]
fn start_mpi() -> Result<(MpiSession, u32, u32), BoxError> {
    Err("--backend mpi needs a build with the `mpi` feature: \
         cargo build --release -p spillway-bench --features mpi"
        .into())
}

/// Leaves MPI without `MPI_Finalize` after a failed job: if a process was lost, finalising
/// would wait for it forever (the runtime does the same when it initialised MPI itself).
#[cfg(feature = "mpi")]
fn abandon_mpi(session: Option<MpiSession>) {
    std::mem::forget(session);
}

#[cfg(not(feature = "mpi"))]
fn abandon_mpi(_session: Option<MpiSession>) {}

/// Runs the subcommand.
pub fn main(args: Args) -> Result<(), BoxError> {
    let running = args.running;
    let reps = args.reps;
    let sizes = args
        .sizes
        .split(',')
        .map(|s| {
            s.parse::<ByteSize>()
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    b.to_usize()
                        .ok_or_else(|| format!("--sizes {b}: too large"))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let ops = match &args.ops {
        Some(list) => Op::parse_list(list)?,
        None => Op::DEFAULT.to_vec(),
    };
    let nodes = args.nodes;
    // MPI stays initialised until `session` is dropped at the end of this function.
    let (mut session, place) = match args.backend {
        spillway::Backend::Mpi => {
            let (session, process, processes) = start_mpi()?;
            (Some(session), Where::Mpi { process, processes })
        }
        _ => (None, Where::Local),
    };
    let configs = match place {
        Where::Local => {
            let ranks: Option<u32> = args
                .ranks
                .as_deref()
                .map(|r| {
                    r.parse()
                        .map_err(|_| format!("invalid value '{r}' for --ranks"))
                })
                .transpose()?;
            if ranks.is_none() && nodes.is_none() {
                DEFAULT_CONFIGS.to_vec()
            } else {
                vec![(ranks.unwrap_or(4), nodes.unwrap_or(1))]
            }
        }
        Where::Mpi { processes, .. } => {
            if nodes.is_some_and(|n| n != processes) {
                return Err(format!(
                    "with --backend mpi every process is one node: {processes} processes, \
                     leave out --nodes"
                )
                .into());
            }
            let ranks = match args.ranks.as_deref() {
                Some(list) => list
                    .split(',')
                    .map(|r| {
                        r.trim()
                            .parse::<u32>()
                            .map_err(|_| format!("invalid value '{r}' for --ranks"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                None => vec![processes],
            };
            if let Some(r) = ranks.iter().find(|&&r| r < processes) {
                return Err(format!("--ranks {r}: at least one rank per process").into());
            }
            ranks.into_iter().map(|r| (r, processes)).collect()
        }
    };
    if running == 0 || reps == 0 || sizes.is_empty() || ops.is_empty() {
        return Err("--running and --reps must be at least 1, --sizes and --ops not empty".into());
    }
    let reps_for = |size: usize| {
        if size < LARGE {
            reps
        } else if size < HUGE {
            (reps / 3).max(3)
        } else {
            (reps / 9).max(3)
        }
    };
    // Only the process holding rank 0 (all of them with the local backend) reports.
    let reporter = match place {
        Where::Local => true,
        Where::Mpi { process, .. } => process == 0,
    };
    let mut json = String::new();

    let memcpy: Vec<Stats> = if reporter {
        match place {
            Where::Local => {
                println!("## Collectives (local backend, running = {running} per node)\n")
            }
            Where::Mpi { processes, .. } => println!(
                "## Collectives (mpi backend, {processes} processes = nodes, \
                 running = {running} per node)\n"
            ),
        }
        println!("memcpy baseline: one thread, `copy_from_slice` between pre-touched buffers.\n");
        println!("| size | reps | median | min | GB/s (median) |");
        println!("|---:|---:|---:|---:|---:|");
        sizes
            .iter()
            .map(|&size| {
                let s = memcpy_stats(size, reps_for(size).min(50));
                println!(
                    "| {} | {} | {} | {} | {:.2} |",
                    format_size(size),
                    s.reps,
                    format_duration(s.median),
                    format_duration(s.min),
                    gb_per_s(size, s.median)
                );
                json_line(&mut json, "memcpy", None, size, size, &s);
                s
            })
            .collect()
    } else {
        Vec::new()
    };

    let mut results = Vec::new();
    for &(ranks, nodes) in &configs {
        if reporter {
            eprintln!("collectives: ranks = {ranks}, nodes = {nodes}, running = {running} ...");
        }
        let config = match place {
            Where::Local => Config::new(ranks).nodes(nodes).running(running),
            Where::Mpi { .. } => Config::new(ranks).backend(Backend::Mpi).running(running),
        };
        // Against Open MPI the buffers are backed by huge pages as numpy's arrays are (the
        // reference's buffers); against memcpy they are the memcpy baseline's plain memory.
        let huge = matches!(place, Where::Mpi { .. });
        let (out, stats) = match run_with_stats(&config, |rank| {
            measure_rank(rank, &sizes, &ops, &reps_for, huge)
        }) {
            Ok(done) => done,
            Err(e) => {
                abandon_mpi(session.take());
                return Err(e.into());
            }
        };
        if stats.local_ranks.start != 0 {
            continue;
        }
        let (barrier, measured) = out
            .into_iter()
            .next()
            .flatten()
            .ok_or("rank 0 returned no timings")?;
        if stats.memory.messages_spilled > 0 {
            eprintln!(
                "collectives: ranks = {ranks}, nodes = {nodes}: {} messages ({} bytes) went \
                 to spill files",
                stats.memory.messages_spilled, stats.memory.message_bytes_spilled
            );
        }
        results.push(ConfigResult {
            ranks,
            nodes,
            barrier,
            measured,
        });
    }
    if !reporter {
        return Ok(());
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
        json_line(
            &mut json,
            "barrier",
            Some((r.ranks, r.nodes)),
            0,
            0,
            &r.barrier,
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
                json_line(
                    &mut json,
                    op.name(),
                    Some((r.ranks, r.nodes)),
                    m.size,
                    m.bytes,
                    &m.stats,
                );
            }
        }
    }
    println!();
    if let Some(path) = &args.json {
        std::fs::write(path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Appends one figure as a JSON object on its own line: `op` (an operation, `memcpy` or
/// `barrier`), the configuration if any, the requested size, the bytes counted and the timings
/// in seconds, with the bandwidth in GB/s (absent for the barrier).
fn json_line(
    out: &mut String,
    op: &str,
    config: Option<(u32, u32)>,
    size: usize,
    bytes: usize,
    stats: &Stats,
) {
    let mut value = serde_json::json!({
        "impl": "spillway",
        "op": op,
        "size": size,
        "bytes": bytes,
        "reps": stats.reps,
        "median_s": stats.median.as_secs_f64(),
        "min_s": stats.min.as_secs_f64(),
    });
    if let Some((ranks, nodes)) = config {
        value["ranks"] = ranks.into();
        value["nodes"] = nodes.into();
    }
    if bytes > 0 {
        value["gbps"] = gb_per_s(bytes, stats.median).into();
    }
    out.push_str(&value.to_string());
    out.push('\n');
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
    ops: &[Op],
    reps_for: &dyn Fn(usize) -> usize,
    huge: bool,
) -> Result<Option<(Stats, Vec<Measured>)>, BoxError> {
    let world = Comm::world(rank);
    let (me, p) = (world.rank(), world.size());
    let barrier = Stats::of(&time_op(&world, 50, || Ok(()))?);
    let mut measured = Vec::new();
    for &size in sizes {
        let reps = reps_for(size);
        for &op in ops {
            let (bytes, times) = match op {
                Op::Allreduce => {
                    let n = (size / 8).max(1);
                    let data = filled(n, huge, |_| me as f64 + 1.0);
                    let expected = (p * (p + 1) / 2) as f64;
                    let check = world.allreduce(&data, Sum)?;
                    if check.len() != n || check.iter().any(|&v| v != expected) {
                        return Err(format!("allreduce of {size} bytes returned wrong sums").into());
                    }
                    // Timed in place (`allreduce_into`, MPI_Allreduce into the caller's
                    // buffer): the sums grow by a factor p per call, exactly representable.
                    let mut inout = filled(n, huge, |i| data[i]);
                    let times = time_op(&world, reps, || world.allreduce_into(&mut inout, Sum))?;
                    (n * 8, times)
                }
                Op::Bcast => {
                    let pattern = |i: usize| (i % 251) as u8;
                    let mut buf: Vec<u8> = if me == 0 {
                        filled(size, huge, pattern)
                    } else {
                        filled(size, huge, |_| 0)
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
                    let send: Vec<u8> =
                        filled(p * block, huge, |k| ((me * p + k / block) % 256) as u8);
                    let got = world.alltoall(&send)?;
                    let ok = got.len() == p * block
                        && got
                            .iter()
                            .enumerate()
                            .all(|(k, &b)| b == (((k / block) * p + me) % 256) as u8);
                    if !ok {
                        return Err(format!("alltoall of {size} bytes delivered wrong data").into());
                    }
                    let mut recv = filled(p * block, huge, |_| 0u8);
                    world.alltoall_into(&send, &mut recv)?;
                    if recv != got {
                        return Err(format!("alltoall_into of {size} bytes differs").into());
                    }
                    let times = time_op(&world, reps, || world.alltoall_into(&send, &mut recv))?;
                    (p * block, times)
                }
                Op::Pingpong => {
                    // Rank 0 and the last rank send `size` bytes there and back; one
                    // repetition is one round trip (bytes counted: both directions).
                    let last = p - 1;
                    let mut buf = vec![me as u8; size];
                    let mut round = || -> Result<(), Error> {
                        if me == 0 && last > 0 {
                            world.send(last, 77, &buf)?;
                            world.recv_into(last, 77, &mut buf)?;
                        } else if me == last && last > 0 {
                            world.recv_into(0, 77, &mut buf)?;
                            world.send(0, 77, &buf)?;
                        }
                        Ok(())
                    };
                    round()?;
                    let times = time_op(&world, reps, round)?;
                    (2 * size, times)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_parse_in_canonical_order() {
        assert_eq!(
            Op::parse_list("bcast,allreduce").unwrap(),
            vec![Op::Allreduce, Op::Bcast]
        );
        assert_eq!(Op::parse_list(" alltoall ").unwrap(), vec![Op::Alltoall]);
        assert!(Op::parse_list("bcast,gather").is_err());
    }

    #[test]
    fn json_lines_carry_config_and_bandwidth() {
        let stats = Stats::of(&[Duration::from_millis(2)]);
        let mut out = String::new();
        json_line(&mut out, "bcast", Some((2, 2)), 1 << 20, 1 << 20, &stats);
        json_line(&mut out, "barrier", Some((2, 2)), 0, 0, &stats);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["impl"], "spillway");
        assert_eq!(first["op"], "bcast");
        assert_eq!(
            (first["ranks"].as_u64(), first["nodes"].as_u64()),
            (Some(2), Some(2))
        );
        assert_eq!(first["median_s"].as_f64(), Some(2e-3));
        assert!(first["gbps"].as_f64().unwrap() > 0.0);
        let second: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert!(second.get("gbps").is_none());
    }
}
