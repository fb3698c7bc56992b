//! `bsp`: the BSP layer against baselines measured in the same run.
//!
//! * `exchange`: a total exchange of `--exchange-bytes` per rank (every rank puts
//!   `bytes/p` to every rank, itself included) timed as one `sync` (from the last rank entering
//!   it to the last leaving it, LPF's measure), against a single-threaded `memcpy` of the same
//!   bytes. Within a node the sync is a `memcpy` per block done by the
//!   destination rank, so with one core per rank the ratio approaches 1.
//! * `fft`: the BSP FFT of `2^--fft-log` points on `--ranks` ranks (the whole library call,
//!   planning and the three syncs included) against rustfft single-threaded on the same input
//!   (planning excluded), after checking that both agree to 1e-9. With `--python PY`, also
//!   scipy.fft.fft with 2 workers on the same input (`scripts/bench_fft_scipy.py`).
//! * `sort`: BSP sample sort of `2^--sort-log` random u64 values on `--ranks` ranks (local sorts,
//!   sampling, exchange and merge) against `slice::sort_unstable` of all values on one thread
//!   and rayon's `par_sort_unstable` on `--ranks` threads, after checking that all give the same
//!   sequence.
//! * `model`: the h-relations of `spillway probe` from 1 KiB to `--model-max` per rank (total
//!   exchange and random), the least-squares fit `g*h + l`, its R², and the worst
//!   measured/model ratio per pattern.
//!
//! Every figure is a median of `--reps` repetitions (the minimum is shown too). Tables are
//! Markdown on stdout.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use num_complex::Complex64;
use rustfft::FftPlanner;
use spillway::algorithms::bsp::fft::{fft, input_index, output_index, random_value};
use spillway::algorithms::bsp::sort::{random_u64, sample_sort};
use spillway::bsp::{self, Memory, Options, ProbeOptions};
use spillway::{run, ByteSize, Collectives, Comm, Config, Max};

use crate::harness::{format_duration, format_size, gb_per_s, memcpy_stats, BoxError, Stats};

/// Arguments of `spillway-bench bsp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which measurements: any of exchange, fft, sort, model.
    #[arg(long, default_value = "exchange,fft,sort")]
    what: String,
    /// Ranks (all on one node unless --nodes).
    #[arg(long, default_value_t = 2)]
    ranks: u32,
    /// Nodes.
    #[arg(long, default_value_t = 1)]
    nodes: u32,
    /// Bytes per rank of the total exchange.
    #[arg(long, default_value = "64M")]
    exchange_bytes: ByteSize,
    /// log2 of the FFT length.
    #[arg(long, default_value_t = 24)]
    fft_log: u32,
    /// log2 of the number of values sorted.
    #[arg(long, default_value_t = 27)]
    sort_log: u32,
    /// Largest h-relation per rank of `model`.
    #[arg(long, default_value = "256M")]
    model_max: ByteSize,
    /// Repetitions per figure.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// A Python with numpy and scipy, for the scipy.fft baseline.
    #[arg(long)]
    python: Option<PathBuf>,
}

/// Seconds since the Unix epoch (one clock for every rank of the machine).
fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn config(a: &Args) -> Config {
    Config::new(a.ranks).nodes(a.nodes)
}

/// The total exchange: one sync per repetition, timed on the slowest rank.
fn exchange(a: &Args) -> Result<(), BoxError> {
    let bytes = a
        .exchange_bytes
        .to_usize()
        .ok_or("--exchange-bytes too large")?;
    let reps = a.reps;
    let times = bsp::exec(&config(a), Options::checked(false), |ctx| {
        let p = ctx.nprocs();
        let me = ctx.pid();
        let block = bytes / p;
        ctx.resize_memory_register(2)?;
        ctx.resize_message_queue(p)?;
        ctx.sync()?;
        let src: Vec<u8> = (0..block * p).map(|i| (i + me) as u8).collect();
        let src = ctx.register_local(src)?;
        let dst = ctx.register_global(vec![0u8; block * p])?;
        ctx.sync()?;
        let mut times = Vec::new();
        for rep in 0..=reps {
            for q in 0..p {
                ctx.put(src, q * block, q, dst, me * block, block)?;
            }
            ctx.comm().barrier()?;
            // From the last rank entering the sync to the last leaving it (as `probe`).
            let entered = now();
            ctx.sync()?;
            let left = now();
            let w = ctx
                .comm()
                .allreduce(&[entered.to_bits(), left.to_bits()], Max)?;
            let el = f64::from_bits(w[1]) - f64::from_bits(w[0]);
            if rep > 0 {
                // The first is a warm-up (page faults of the destination).
                times.push(Duration::from_secs_f64(el));
            }
        }
        // Check: block s of dst came from rank s's block `me`.
        let d = ctx.slice(dst);
        let ok = (0..p).all(|s| (0..block).all(|i| d[s * block + i] == (me * block + i + s) as u8));
        if !ok {
            return Err(bsp::Error::Runtime(spillway::Error::InvalidArgument(
                "total exchange moved wrong data",
            )));
        }
        Ok(times)
    })?;
    let ours = Stats::of(&times[0]);
    let base = memcpy_stats(bytes, reps);
    println!(
        "\n### Total exchange, {} per rank, {} ranks on {} node(s)\n",
        format_size(bytes),
        a.ranks,
        a.nodes
    );
    println!("| what | median | min | GB/s per rank (median) | vs memcpy |");
    println!("|---|---|---|---|---|");
    println!(
        "| sync of the total exchange | {} | {} | {:.2} | {:.2}x |",
        format_duration(ours.median),
        format_duration(ours.min),
        gb_per_s(bytes, ours.median),
        base.median.as_secs_f64() / ours.median.as_secs_f64()
    );
    println!(
        "| memcpy, one thread | {} | {} | {:.2} | 1.00x |",
        format_duration(base.median),
        format_duration(base.min),
        gb_per_s(bytes, base.median)
    );
    Ok(())
}

fn fft_bench(a: &Args) -> Result<(), BoxError> {
    let n = 1usize << a.fft_log;
    let seed = 11;
    let x: Vec<Complex64> = (0..n).map(|i| random_value(seed, i)).collect();
    // Baseline: rustfft on one thread, planned once.
    let plan = FftPlanner::<f64>::new().plan_fft_forward(n);
    let mut scratch = vec![Complex64::default(); plan.get_inplace_scratch_len()];
    let mut reference = x.clone();
    plan.process_with_scratch(&mut reference, &mut scratch);
    let mut base_times = Vec::new();
    for _ in 0..a.reps {
        let mut y = x.clone();
        let t = Instant::now();
        plan.process_with_scratch(&mut y, &mut scratch);
        base_times.push(t.elapsed());
    }
    let base = Stats::of(&base_times);
    drop(scratch);

    let reps = a.reps;
    let cfg = config(a);
    let results = run(&cfg, |rank| -> Result<_, BoxError> {
        let world = Comm::world(rank);
        let p = world.size();
        let s = world.rank();
        let mut times = Vec::new();
        let mut err = 0.0f64;
        for rep in 0..=reps {
            let local: Vec<Complex64> = (0..n / p).map(|j| x[input_index(p, s, j)]).collect();
            world.barrier()?;
            let t = Instant::now();
            let out = bsp::hook(&world, Options::checked(false), |ctx| {
                fft(ctx, n, Memory::Heap(local))
            })?;
            let el = world.allreduce(&[t.elapsed().as_secs_f64()], Max)?[0];
            if rep == 0 {
                for (i, v) in out.as_slice().iter().enumerate() {
                    let k = output_index(n, p, s, i);
                    err = err.max((v - reference[k]).norm());
                }
            } else {
                times.push(Duration::from_secs_f64(el));
            }
        }
        let err = world.allreduce(&[err], Max)?[0];
        Ok((times, err))
    })?;
    let (times, err) = &results[0];
    let scale = reference.iter().map(|v| v.norm()).fold(0.0, f64::max);
    if err / scale > 1e-9 {
        return Err(format!(
            "BSP FFT differs from rustfft by {:.3e} (relative)",
            err / scale
        )
        .into());
    }
    let ours = Stats::of(times);
    println!(
        "\n### FFT of 2^{} points, {} ranks on {} node(s)\n",
        a.fft_log, a.ranks, a.nodes
    );
    println!(
        "Largest difference from rustfft: {:.2e} of the largest magnitude.\n",
        err / scale
    );
    println!("| what | median | min | vs BSP FFT (median) |");
    println!("|---|---|---|---|");
    let row = |name: &str, s: Stats| {
        println!(
            "| {name} | {} | {} | {:.2}x |",
            format_duration(s.median),
            format_duration(s.min),
            s.median.as_secs_f64() / ours.median.as_secs_f64()
        )
    };
    row(&format!("BSP FFT, {} ranks", a.ranks), ours);
    row("rustfft, one thread", base);
    if let Some(py) = &a.python {
        let dir = tempfile::tempdir()?;
        let input = dir.path().join("x.bin");
        std::fs::write(&input, bytemuck::cast_slice::<Complex64, u8>(&x))?;
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scripts/bench_fft_scipy.py");
        let out = std::process::Command::new(py)
            .arg(&script)
            .arg(&input)
            .arg(a.reps.to_string())
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "{}: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let secs: Vec<Duration> = text
            .split_ascii_whitespace()
            .filter_map(|t| t.parse::<f64>().ok())
            .map(Duration::from_secs_f64)
            .collect();
        if !secs.is_empty() {
            row("scipy.fft, 2 workers", Stats::of(&secs));
        }
    }
    Ok(())
}

fn sort_bench(a: &Args) -> Result<(), BoxError> {
    let n = 1usize << a.sort_log;
    let seed = 13;
    let reps = a.reps.clamp(1, 3);
    let mut want: Vec<u64> = (0..n as u64).map(|i| random_u64(seed, i)).collect();
    let mut base_times = Vec::new();
    for rep in 0..reps {
        let mut v: Vec<u64> = if rep == 0 {
            std::mem::take(&mut want)
        } else {
            (0..n as u64).map(|i| random_u64(seed, i)).collect()
        };
        let t = Instant::now();
        v.sort_unstable();
        base_times.push(t.elapsed());
        if rep == 0 {
            want = v;
        }
    }
    let base = Stats::of(&base_times);
    // rayon's parallel sort with as many threads as ranks.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(a.ranks as usize)
        .build()?;
    let mut par_times = Vec::new();
    for _ in 0..reps {
        let mut v: Vec<u64> = (0..n as u64).map(|i| random_u64(seed, i)).collect();
        let t = Instant::now();
        pool.install(|| {
            use rayon::slice::ParallelSliceMut;
            v.par_sort_unstable()
        });
        par_times.push(t.elapsed());
        if v != want {
            return Err("par_sort_unstable differs from sort_unstable".into());
        }
    }
    let par = Stats::of(&par_times);
    drop(pool);
    let cfg = config(a);
    let results = run(&cfg, |rank| -> Result<_, BoxError> {
        let world = Comm::world(rank);
        let p = world.size();
        let s = world.rank();
        let (lo, hi) = (s * n / p, (s + 1) * n / p);
        let mut times = Vec::new();
        let mut ok = true;
        for rep in 0..reps {
            let local: Vec<u64> = (lo..hi).map(|i| random_u64(seed, i as u64)).collect();
            world.barrier()?;
            let t = Instant::now();
            let sorted = bsp::hook(&world, Options::checked(false), |ctx| {
                sample_sort(ctx, local)
            })?;
            let el = world.allreduce(&[t.elapsed().as_secs_f64()], Max)?[0];
            times.push(Duration::from_secs_f64(el));
            if rep == 0 {
                // Compare with the sorted sequence: this rank's part starts where the earlier
                // parts end.
                let before = world.exscan(&[sorted.len() as u64], spillway::Sum)?;
                let at = before.map_or(0, |b| b[0] as usize);
                ok = sorted[..] == want[at..at + sorted.len()];
            }
        }
        Ok((times, ok))
    })?;
    if results.iter().any(|(_, ok)| !ok) {
        return Err("sample sort differs from sort_unstable".into());
    }
    let ours = Stats::of(&results[0].0);
    println!(
        "\n### Sample sort of 2^{} u64, {} ranks on {} node(s)\n",
        a.sort_log, a.ranks, a.nodes
    );
    println!("| what | median | min | M elements/s | vs sample sort (median) |");
    println!("|---|---|---|---|---|");
    for (name, s) in [
        (format!("BSP sample sort, {} ranks", a.ranks), ours),
        ("sort_unstable, one thread".into(), base),
        (format!("rayon par_sort_unstable, {} threads", a.ranks), par),
    ] {
        println!(
            "| {name} | {} | {} | {:.1} | {:.2}x |",
            format_duration(s.median),
            format_duration(s.min),
            n as f64 / s.median.as_secs_f64() / 1e6,
            s.median.as_secs_f64() / ours.median.as_secs_f64()
        );
    }
    Ok(())
}

fn model(a: &Args) -> Result<(), BoxError> {
    let options = ProbeOptions {
        min_bytes: 1 << 10,
        max_bytes: a.model_max.to_usize().ok_or("--model-max too large")?,
        reps: a.reps,
        seed: 3,
        ..ProbeOptions::default()
    };
    let reports = bsp::exec(&config(a), Options::checked(false), |ctx| {
        bsp::measure(ctx, &options)
    })?;
    let r = &reports[0];
    let m = &r.machine;
    println!(
        "\n### Model compliance, {} ranks on {} node(s)\n",
        a.ranks, a.nodes
    );
    println!(
        "g = {:.3e} s/byte ({:.2} GB/s per rank), l = {:.3e} s; fit R^2 = {:.4}; worst measured/model: total exchange {:.2}, random {:.2}\n",
        m.g,
        1e-9 / m.g.max(1e-30),
        m.l,
        r.r2,
        r.worst_total_exchange,
        r.worst_random
    );
    println!("| pattern | h per rank | measured | g*h + l | ratio |");
    println!("|---|---|---|---|---|");
    for s in &r.samples {
        println!(
            "| {:?} | {} | {} | {} | {:.2} |",
            s.pattern,
            s.h,
            format_duration(Duration::from_secs_f64(s.seconds)),
            format_duration(Duration::from_secs_f64(m.cost(s.h))),
            s.seconds / m.cost(s.h)
        );
    }
    Ok(())
}

/// Runs the measurements of `spillway-bsp bench bsp`.
pub fn main(a: Args) -> Result<(), BoxError> {
    for what in a.what.split(',') {
        match what.trim() {
            "exchange" => exchange(&a)?,
            "fft" => fft_bench(&a)?,
            "sort" => sort_bench(&a)?,
            "model" => model(&a)?,
            other => {
                return Err(
                    format!("unknown measurement '{other}' (exchange, fft, sort, model)").into(),
                )
            }
        }
    }
    Ok(())
}
