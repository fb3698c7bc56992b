//! `probe`: the BSP machine parameters `g` and `l`, measured by timing h-relations and cached
//! per machine and layout (as LPF's `lpfprobe` does).

use std::time::{SystemTime, UNIX_EPOCH};

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use spillway_comm::{Collectives, Max};

use crate::context::Bsp;
use crate::error::Result;
use crate::machine::{backend_name, cache_file, cached, Machine, Pattern, ProbeReport, Sample};

/// Sizes and repetitions for [`measure`].
#[derive(Debug, Clone, Copy)]
pub struct ProbeOptions {
    /// Smallest h per rank in bytes.
    pub min_bytes: usize,
    /// Largest h per rank in bytes.
    pub max_bytes: usize,
    /// Repetitions per size and pattern, at least (the fastest counts).
    pub reps: usize,
    /// More repetitions, up to [`MAX_REPS`], until this many seconds of supersteps were timed
    /// per size and pattern: a superstep of a few microseconds is easily disturbed (a timer
    /// interrupt, the other thread descheduled), so the fastest of three is not yet its cost.
    /// Large sizes pass the time in `reps` repetitions and cost nothing more.
    pub min_seconds: f64,
    /// Seed of the random pattern.
    pub seed: u64,
}

/// The most repetitions [`ProbeOptions::min_seconds`] adds per size and pattern.
pub const MAX_REPS: usize = 1000;

/// Interleaved passes over the sizes in [`measure`].
const PASSES: usize = 3;

impl Default for ProbeOptions {
    fn default() -> ProbeOptions {
        ProbeOptions {
            min_bytes: 1 << 10,
            max_bytes: (4 * last_level_cache().unwrap_or(32 << 20)).next_power_of_two(),
            reps: 3,
            min_seconds: 0.02,
            seed: 1,
        }
    }
}

/// Size of the last-level cache in bytes, from sysfs.
pub fn last_level_cache() -> Option<usize> {
    let mut best = None;
    for i in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let Ok(size) = std::fs::read_to_string(format!("{dir}/size")) else {
            continue;
        };
        let size = size.trim();
        let bytes = if let Some(k) = size.strip_suffix('K') {
            k.parse::<usize>().ok().map(|k| k << 10)
        } else if let Some(m) = size.strip_suffix('M') {
            m.parse::<usize>().ok().map(|m| m << 20)
        } else {
            size.parse().ok()
        };
        best = best.max(bytes);
    }
    best
}

/// Measures `g` and `l` on `bsp`'s ranks (collective): times total-exchange and random
/// h-relations of `min_bytes` to `max_bytes` per rank (doubling), fits `t = g*h + l` by least
/// squares, and writes the result to the cache so that [`Bsp::probe`] finds it.
///
/// # Cost
/// Two registered areas of `max_bytes` per rank, and `2 * reps` syncs per size.
///
/// # Errors
/// As [`Bsp::sync`]; a cache that cannot be written is ignored.
pub fn measure(bsp: &mut Bsp<'_>, options: &ProbeOptions) -> Result<ProbeReport> {
    let p = bsp.nprocs();
    let max = options.max_bytes.max(options.min_bytes).max(p);
    // Eight random pieces per rank, at most 1,024: the pattern stays a full h-relation in
    // random pieces without 8 p^2 messages a superstep at thousands of ranks.
    let chunks = (8 * p).min(1024);
    bsp.resize_memory_register(bsp.registered + 2)?;
    bsp.resize_message_queue(chunks.max(p))?;
    bsp.sync()?;
    let src = bsp.register_local(vec![0u8; max])?;
    let dst = bsp.register_global(vec![0u8; max])?;
    bsp.slice_mut(src)
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8);
    bsp.sync()?;
    // The random pattern's cuts and destinations (the same on every rank) and offsets (this
    // rank's own).
    let mut shared = Xoshiro256PlusPlus::seed_from_u64(options.seed);
    let mut own = Xoshiro256PlusPlus::seed_from_u64(options.seed ^ ((bsp.pid() as u64 + 1) << 32));
    let mut perm: Vec<usize> = (0..p).collect();
    let mut sizes = Vec::new();
    let mut h = options.min_bytes.max(p);
    while h <= max {
        sizes.push(h);
        h *= 2;
    }
    let patterns = [Pattern::TotalExchange, Pattern::Random];
    // Best time and largest h per (size, pattern) over all passes.
    let mut table = vec![(f64::INFINITY, 0usize); sizes.len() * patterns.len()];
    // The sizes are swept in PASSES interleaved passes, each with a share of the repetitions:
    // a burst of interference on a virtual machine (a stolen core) lasts longer than all the
    // repetitions of one size, and would otherwise set that size's minimum.
    for pass in 0..PASSES {
        let reps = options.reps.max(1).div_ceil(PASSES) + usize::from(pass == 0);
        for (cell, (h, pattern)) in table.iter_mut().zip(
            sizes
                .iter()
                .flat_map(|&h| patterns.iter().map(move |&pt| (h, pt))),
        ) {
            let (mut best, mut hmax) = *cell;
            // The count of repetitions depends only on `t`, the same on every rank.
            let mut spent = 0.0;
            let mut rep = 0;
            while rep < reps || (spent < options.min_seconds / PASSES as f64 && rep < MAX_REPS) {
                rep += 1;
                let mut received = vec![0u64; p];
                match pattern {
                    Pattern::TotalExchange => {
                        let block = h / p;
                        let me = bsp.pid();
                        for (q, got) in received.iter_mut().enumerate() {
                            bsp.put(src, q * block, q, dst, me * block, block)?;
                            *got += block as u64;
                        }
                    }
                    Pattern::Random => {
                        // A full h-relation in random pieces: the cut points and, per
                        // piece, a permutation of the ranks come from `shared`, the same on
                        // every rank, so every rank sends h bytes and receives h bytes (the
                        // piece of each cut from exactly one rank), of random sizes, from
                        // random ranks, at random offsets (from `own`).
                        let mut cuts: Vec<usize> = (0..chunks - 1)
                            .map(|_| (shared.next_u64() % h as u64) as usize)
                            .collect();
                        cuts.push(0);
                        cuts.push(h);
                        cuts.sort_unstable();
                        let me = bsp.pid();
                        for w in cuts.windows(2) {
                            let len = w[1] - w[0];
                            for i in (1..p).rev() {
                                let j = (shared.next_u64() % (i as u64 + 1)) as usize;
                                perm.swap(i, j);
                            }
                            let q = perm[me];
                            let off = (own.next_u64() % (h - len + 1) as u64) as usize;
                            bsp.put(src, w[0], q, dst, off, len)?;
                            received[q] += len as u64;
                        }
                    }
                }
                // The h-relation: the largest of what any rank sends or receives.
                let totals = bsp.comm().allreduce(&received, spillway_comm::Sum)?;
                let mine_in = totals[bsp.pid()];
                let sent: u64 = received.iter().sum();
                bsp.comm().barrier()?;
                // LPF's measure: from the last rank entering the sync to the last leaving it
                // (a rank late out of the barrier does not count against the sync).
                let entered = now();
                bsp.sync()?;
                let left = now();
                let worst = bsp
                    .comm()
                    .allreduce(&[entered.to_bits(), left.to_bits(), mine_in.max(sent)], Max)?;
                let t = f64::from_bits(worst[1]) - f64::from_bits(worst[0]);
                best = best.min(t.max(0.0));
                spent += t.max(0.0);
                hmax = hmax.max(worst[2] as usize);
            }
            *cell = (best, hmax);
        }
    }
    let samples: Vec<Sample> = table
        .chunks_exact(patterns.len())
        .flat_map(|cells| {
            cells
                .iter()
                .zip(patterns)
                .map(|(&(seconds, h), pattern)| Sample {
                    pattern,
                    h,
                    seconds,
                })
        })
        .collect();
    bsp.deregister(src)?;
    bsp.deregister(dst)?;
    bsp.sync()?;
    let report = fit(p, bsp.comm().node_count(), samples);
    if bsp.pid() == 0 {
        let rank = bsp.comm().runtime();
        if let Some(file) = cache_file(p, rank.nodes() as usize, &backend_name(rank)) {
            if let Some(dir) = file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Ok(json) = serde_json::to_vec_pretty(&report) {
                let tmp = file.with_extension("tmp");
                if std::fs::write(&tmp, json).is_ok() {
                    let _ = std::fs::rename(tmp, file);
                }
            }
        }
    }
    bsp.machine = std::cell::OnceCell::from(report.machine.clone());
    Ok(report)
}

/// Seconds since the Unix epoch: one clock for all ranks of a machine, threads or processes.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Fit of `t = g*h + l` as LPF's probe does it: `l` from the smallest supersteps (the cost of
/// a sync that moves almost nothing: the mean of the smallest size of each pattern), `g` by
/// least squares of `t - l = g*h` (through the origin, so the large supersteps that determine
/// the bandwidth dominate). R² is the usual coefficient of determination over all samples.
pub fn fit(p: usize, nodes: usize, samples: Vec<Sample>) -> ProbeReport {
    let smallest = |pat: Pattern| {
        samples
            .iter()
            .filter(|s| s.pattern == pat)
            .min_by_key(|s| s.h)
            .map(|s| s.seconds)
    };
    let small: Vec<f64> = [Pattern::TotalExchange, Pattern::Random]
        .into_iter()
        .filter_map(smallest)
        .collect();
    let l = if small.is_empty() {
        0.0
    } else {
        small.iter().sum::<f64>() / small.len() as f64
    };
    let (num, den) = samples.iter().fold((0.0, 0.0), |(n, d), s| {
        let h = s.h as f64;
        (n + h * (s.seconds - l), d + h * h)
    });
    let g = if den > 0.0 { (num / den).max(0.0) } else { 0.0 };
    let machine = Machine {
        p,
        g,
        l,
        measured: true,
    };
    let mean = samples.iter().map(|s| s.seconds).sum::<f64>() / samples.len().max(1) as f64;
    let ss_tot: f64 = samples.iter().map(|s| (s.seconds - mean).powi(2)).sum();
    let ss_res: f64 = samples
        .iter()
        .map(|s| (s.seconds - machine.cost(s.h)).powi(2))
        .sum();
    let r2 = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        1.0
    };
    let worst = |pat: Pattern| {
        samples
            .iter()
            .filter(|s| s.pattern == pat)
            .map(|s| s.seconds / machine.cost(s.h))
            .fold(0.0, f64::max)
    };
    ProbeReport {
        worst_total_exchange: worst(Pattern::TotalExchange),
        worst_random: worst(Pattern::Random),
        machine,
        samples,
        r2,
        nodes,
    }
}

impl Bsp<'_> {
    /// The machine parameters (LPF's `lpf_probe`): `p`, `g` in seconds per byte and `l` in
    /// seconds per sync, as measured by `spillway probe` for this machine and layout (cached),
    /// or an estimate when nothing was measured yet.
    ///
    /// # Cost
    /// Local, no communication: the cache is read at the first call.
    pub fn probe(&self) -> Machine {
        self.machine
            .get_or_init(|| cached(self.comm.runtime(), self.nprocs()))
            .clone()
    }
}
