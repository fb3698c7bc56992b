//! The BSP commands: `run fft`, `run sort` and `probe`.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use spillway::algorithms::bsp::fft::{
    check_length, fft, input_index, parse_complex, parse_generate, random_value,
};
use spillway::algorithms::bsp::sort::{random_u64, sample_sort};
use spillway::algorithms::io::write_ordered;
use spillway::algorithms::io::InputError;
use spillway::algorithms::AlgoError;
use spillway::bsp::{self, Memory, Options, ProbeOptions, ProbeReport};
use spillway::{run_with_stats, Collectives, Comm, Max, SbVec, Sum};

use crate::report::Report;
use crate::{check_output, config_of, Failure, RuntimeArgs};

/// Options of the BSP layer shared by its commands.
#[derive(Args, Debug, Clone)]
pub(crate) struct BspArgs {
    /// Checked mode of the BSP primitives (always on in debug builds): every sync verifies that
    /// all ranks agree on the superstep and registrations.
    #[arg(long)]
    checked: bool,
}

impl BspArgs {
    fn options(&self) -> Options {
        Options::checked(self.checked || Options::default().checked)
    }
}

#[derive(Args, Debug)]
pub(crate) struct FftArgs {
    /// Input: one complex value "re im" per line; the length is a power of two.
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generated input: random:LOG2N[:SEED] (parts uniform in [-1, 1)).
    #[arg(long)]
    generate: Option<String>,
    /// Output: the forward transform (numpy's sign, no scaling), "re im" per line.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    bsp: BspArgs,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

#[derive(Args, Debug)]
pub(crate) struct SortArgs {
    /// Input: raw little-endian u64 values.
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generated input: random:LOG2N[:SEED].
    #[arg(long)]
    generate: Option<String>,
    /// Output: the values in ascending order, raw little-endian u64.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    bsp: BspArgs,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

#[derive(Args, Debug)]
pub(crate) struct ProbeArgs {
    /// Smallest h-relation per rank (bytes, e.g. 1K).
    #[arg(long, default_value = "1K")]
    min_bytes: String,
    /// Largest h-relation per rank (bytes, e.g. 256M; default 4x the last-level cache).
    #[arg(long)]
    max_bytes: Option<String>,
    /// Repetitions per size, at least (the fastest counts); small sizes repeat until 20 ms of
    /// supersteps were timed, up to 1000 times.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Measure even when a result for this machine and layout is cached.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// Where the input of `fft` comes from.
enum FftSource {
    File(Arc<Vec<num_complex::Complex64>>),
    Random(u64),
}

fn bad_input(e: InputError) -> Failure {
    Failure::usage(e.to_string())
}

fn read_input(path: &PathBuf) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| bad_input(InputError::io(path, &e)))
}

pub(crate) fn run_fft(args: FftArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    if let Some(out) = &args.out {
        check_output(out)?;
    }
    let p = config.ranks_total() as usize;
    let (source, n, name) = match (&args.input, &args.generate) {
        (Some(path), _) => {
            let values = parse_complex(path, &read_input(path)?).map_err(bad_input)?;
            let n = values.len();
            if let Err(AlgoError::BadParameter { reason, .. }) = check_length(n, p) {
                return Err(bad_input(InputError::new(path, Some(n as u64), reason)));
            }
            (
                FftSource::File(Arc::new(values)),
                n,
                path.display().to_string(),
            )
        }
        (None, Some(spec)) => {
            let (log, seed) = parse_generate(spec).map_err(Failure::usage)?;
            let n = 1usize << log;
            check_length(n, p).map_err(|e| Failure::usage(e.to_string()))?;
            (FftSource::Random(seed), n, spec.clone())
        }
        (None, None) => {
            return Err(Failure::usage(
                "give --input FILE or --generate random:LOG2N",
            ))
        }
    };
    let options = args.bsp.options();
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let s = world.rank();
        let t0 = Instant::now();
        let local: Vec<num_complex::Complex64> = (0..n / p)
            .map(|j| {
                let i = input_index(p, s, j);
                match &source {
                    FftSource::File(v) => v[i],
                    FftSource::Random(seed) => random_value(*seed, i),
                }
            })
            .collect();
        let local = if rank.mem_budget().is_some() {
            Memory::Storage(SbVec::from_slice(rank, &local)?)
        } else {
            Memory::Heap(local)
        };
        world.barrier()?;
        let load = t0.elapsed();
        let t1 = Instant::now();
        let out = bsp::hook(&world, options, |ctx| fft(ctx, n, local))?;
        let compute = world.allreduce(&[t1.elapsed().as_secs_f64()], Max)?[0];
        if let Some(path) = &args.out {
            // Block-cyclic to block: local block k2 belongs to rank k2, at our position.
            let block = world.alltoall(out.as_slice())?;
            write_ordered(&world, path, |w| {
                for v in &block {
                    writeln!(w, "{} {}", v.re, v.im)?;
                }
                Ok(())
            })?;
        }
        Ok((load, compute))
    })?;
    let (load, compute) = results.into_iter().next().expect("rank 0");
    let compute = Duration::from_secs_f64(compute);
    let mut report = Report::new("fft", &name, &config);
    report.set_run(1, &[compute], load, compute, start.elapsed(), &stats);
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("points".into(), n as f64),
        (
            "gflops".into(),
            5.0 * n as f64 * (n as f64).log2() / compute.as_secs_f64().max(1e-12) / 1e9,
        ),
    ];
    Ok(report)
}

/// Elements `lo..hi` of a raw u64 file.
fn read_u64s(path: &PathBuf, lo: usize, hi: usize) -> Result<Vec<u64>, AlgoError> {
    let file = std::fs::File::open(path).map_err(|e| AlgoError::Input(InputError::io(path, &e)))?;
    let mut bytes = vec![0u8; (hi - lo) * 8];
    file.read_exact_at(&mut bytes, lo as u64 * 8)
        .map_err(|e| AlgoError::Input(InputError::io(path, &e)))?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

pub(crate) fn run_sort(args: SortArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    if let Some(out) = &args.out {
        check_output(out)?;
    }
    let p = config.ranks_total() as usize;
    let (n, seed, name) = match (&args.input, &args.generate) {
        (Some(path), _) => {
            let len = std::fs::metadata(path)
                .map_err(|e| bad_input(InputError::io(path, &e)))?
                .len();
            if len % 8 != 0 {
                return Err(bad_input(InputError::new(
                    path,
                    None,
                    format!("{len} bytes is not a whole number of little-endian u64 values"),
                )));
            }
            ((len / 8) as usize, None, path.display().to_string())
        }
        (None, Some(spec)) => {
            let (log, seed) = parse_generate(spec).map_err(Failure::usage)?;
            (1usize << log, Some(seed), spec.clone())
        }
        (None, None) => {
            return Err(Failure::usage(
                "give --input FILE or --generate random:LOG2N",
            ))
        }
    };
    let options = args.bsp.options();
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let s = world.rank();
        let t0 = Instant::now();
        let (lo, hi) = (s * n / p, (s + 1) * n / p);
        let local = match (&args.input, seed) {
            (Some(path), _) => read_u64s(path, lo, hi)?,
            (None, Some(seed)) => (lo..hi).map(|i| random_u64(seed, i as u64)).collect(),
            (None, None) => unreachable!("checked above"),
        };
        world.barrier()?;
        let load = t0.elapsed();
        let t1 = Instant::now();
        let sorted = bsp::hook(&world, options, |ctx| sample_sort(ctx, local))?;
        let compute = world.allreduce(&[t1.elapsed().as_secs_f64()], Max)?[0];
        let largest = world.allreduce(&[sorted.len() as u64], Max)?[0];
        let total = world.allreduce(&[sorted.len() as u64], Sum)?[0];
        if let Some(path) = &args.out {
            write_ordered(&world, path, |w| {
                for v in &sorted {
                    w.write_all(&v.to_le_bytes())?;
                }
                Ok(())
            })?;
        }
        Ok((load, compute, largest, total))
    })?;
    let (load, compute, largest, total) = results.into_iter().next().expect("rank 0");
    let compute = Duration::from_secs_f64(compute);
    let mut report = Report::new("sort", &name, &config);
    report.set_run(1, &[compute], load, compute, start.elapsed(), &stats);
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("elements".into(), total as f64),
        ("largest_part".into(), largest as f64),
        (
            "elements_per_second".into(),
            total as f64 / compute.as_secs_f64().max(1e-12),
        ),
    ];
    Ok(report)
}

fn size_arg(name: &str, text: &str) -> Result<usize, Failure> {
    text.parse::<spillway::ByteSize>()
        .ok()
        .map(spillway::ByteSize::bytes)
        .and_then(|b| usize::try_from(b).ok())
        .filter(|&b| b > 0)
        .ok_or_else(|| {
            Failure::usage(format!(
                "invalid --{name} '{text}' (expected e.g. 1K or 256M)"
            ))
        })
}

fn print_probe(report: &ProbeReport, cache: Option<&PathBuf>, cached: bool, json: bool) {
    let m = &report.machine;
    let text = if json {
        let mut v = serde_json::to_value(report).unwrap_or(serde_json::Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert("cached".into(), cached.into());
            o.insert(
                "cache".into(),
                cache.map(|c| c.display().to_string()).into(),
            );
        }
        format!("{v}\n")
    } else {
        let mut t = format!(
            "p = {}  nodes = {}\ng = {:.4e} s/byte ({:.2} GB/s per rank)\nl = {:.4e} s\nfit: R^2 = {:.4}, worst measured/model: total exchange {:.3}, random {:.3}\n",
            m.p,
            report.nodes,
            m.g,
            1e-9 / m.g.max(1e-30),
            m.l,
            report.r2,
            report.worst_total_exchange,
            report.worst_random
        );
        t.push_str("pattern         h (bytes)     measured (s)  model (s)     ratio\n");
        for s in &report.samples {
            let model = m.cost(s.h);
            t.push_str(&format!(
                "{:<15} {:>12}  {:>12.4e}  {:>12.4e}  {:.3}\n",
                format!("{:?}", s.pattern),
                s.h,
                s.seconds,
                model,
                s.seconds / model
            ));
        }
        match cache {
            Some(c) if cached => t.push_str(&format!("(cached: {})\n", c.display())),
            Some(c) => t.push_str(&format!("(saved to {})\n", c.display())),
            None => {}
        }
        t
    };
    let _ = std::io::stdout().write_all(text.as_bytes());
}

pub(crate) fn probe_cmd(args: ProbeArgs) -> Result<(), Failure> {
    let config = config_of(&args.runtime)?;
    let backend = if ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
    {
        "mpi"
    } else {
        "local"
    };
    let mut options = ProbeOptions {
        min_bytes: size_arg("min-bytes", &args.min_bytes)?,
        reps: args.reps.max(1),
        ..ProbeOptions::default()
    };
    if let Some(text) = &args.max_bytes {
        options.max_bytes = size_arg("max-bytes", text)?;
    }
    let force = args.force;
    let reports = bsp::exec(&config, Options::default(), |ctx| {
        // Rank 0 looks the layout up (with the MPI backend every process is a node, known
        // only now) and shares the answer, so that all processes measure or none does, even
        // where they would find different cache files (other hosts).
        let nodes = ctx.comm().runtime().nodes() as usize;
        let file = bsp::cache_file(ctx.nprocs(), nodes, backend);
        let found: Option<ProbeReport> = if ctx.pid() == 0 && !force {
            file.as_ref()
                .and_then(|c| std::fs::read(c).ok())
                .and_then(|b| serde_json::from_slice(&b).ok())
        } else {
            None
        };
        let found = ctx.comm().allgather_obj(&found)?.swap_remove(0);
        Ok(match found {
            Some(report) => (ctx.pid(), report, true, file),
            None => (ctx.pid(), bsp::measure(ctx, &options)?, false, file),
        })
    })?;
    // Printed once: by the process that holds rank 0 (each MPI process returns its ranks).
    if let Some((_, report, cached, file)) = reports.into_iter().find(|r| r.0 == 0) {
        print_probe(&report, file.as_ref(), cached, args.runtime.json);
    }
    Ok(())
}
