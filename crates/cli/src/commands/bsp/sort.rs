//! `run sort`: BSP sample sort of raw little-endian u64 values.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use spillway::algorithms::bsp::sort::{random_u64, sample_sort};
use spillway::algorithms::io::InputError;
use spillway::algorithms::AlgoError;
use spillway::bsp;
use spillway::{Collectives, Comm, Max, Sum};

use super::BspArgs;
use crate::driver::{
    Command, CommonArgs, Declared, Estimate, Failure, Inputs, Job, RankOut, RuntimeArgs, Timing,
};
use crate::options::{random_spec, GenSpec};

/// `run sort`.
#[derive(Args, Debug)]
pub(crate) struct Sort {
    /// Input: raw little-endian u64 values; `-` reads standard input.
    #[arg(
        long,
        conflicts_with = "generate",
        required_unless_present = "generate"
    )]
    input: Option<PathBuf>,
    /// Generated input: random:LOG2N[:SEED].
    #[arg(long, value_parser = random_spec)]
    generate: Option<(u32, u64)>,
    /// Output: the values in ascending order, raw little-endian u64.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    bsp: BspArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `run sort` reports.
#[derive(Debug, Serialize)]
pub(crate) struct SortFacts {
    elements: u64,
    largest_part: u64,
    elements_per_second: f64,
}

/// Elements `lo..hi` of a raw u64 file.
fn read_u64s(path: &Path, lo: usize, hi: usize) -> Result<Vec<u64>, AlgoError> {
    let file = std::fs::File::open(path).map_err(|e| AlgoError::Input(InputError::io(path, &e)))?;
    let mut bytes = vec![0u8; (hi - lo) * 8];
    file.read_exact_at(&mut bytes, lo as u64 * 8)
        .map_err(|e| AlgoError::Input(InputError::io(path, &e)))?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

impl Sort {
    fn generated_name(&self) -> Option<String> {
        self.generate
            .map(|(log2n, seed)| GenSpec::Random { log2n, seed }.to_string())
    }
}

impl Command for Sort {
    const NAME: &'static str = "sort";
    type Facts = SortFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::new(&self.common)
            .runtime(&self.runtime)
            .input("--input", self.input.as_deref())
            .output("--out", self.out.as_deref())
            .generated(self.generated_name())
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        let (values, because) = match (&self.input, self.generate) {
            (Some(path), _) => (
                inputs.bytes(path) / 8,
                format!("--input {}", path.display()),
            ),
            (None, Some((log2n, _))) => (
                1u64 << log2n,
                format!("--generate {}", self.generated_name().unwrap_or_default()),
            ),
            (None, None) => (0, String::new()),
        };
        Ok(Estimate {
            // Each rank's values, the exchanged and the merged copies.
            data: values.saturating_mul(8 * 3),
            because,
            items: values,
            outputs: vec![("--out", values.saturating_mul(8))],
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<SortFacts>, Failure> {
        let p = job.config().ranks_total() as usize;
        let input = self.input.as_ref().map(|given| job.input(given));
        let n = match (&input, self.generate) {
            (Some(path), _) => {
                let len = std::fs::metadata(path)
                    .map_err(|e| Failure::usage(InputError::io(path, &e).to_string()))?
                    .len();
                if len % 8 != 0 {
                    return Err(Failure::usage(
                        InputError::new(
                            path,
                            None,
                            format!(
                                "{len} bytes is not a whole number of little-endian u64 values"
                            ),
                        )
                        .to_string(),
                    ));
                }
                (len / 8) as usize
            }
            (None, Some((log2n, _))) => 1usize << log2n,
            (None, None) => unreachable!("clap requires --input or --generate"),
        };
        let options = self.bsp.options();
        job.spmd(1, "sort", |rank, _| {
            let world = Comm::world(rank);
            let s = world.rank();
            let t0 = Instant::now();
            let (lo, hi) = (s * n / p, (s + 1) * n / p);
            let local = match (&input, self.generate) {
                (Some(path), _) => read_u64s(path, lo, hi)?,
                (None, Some((_, seed))) => (lo..hi).map(|i| random_u64(seed, i as u64)).collect(),
                (None, None) => unreachable!("checked above"),
            };
            world.barrier()?;
            let load = t0.elapsed();
            let t1 = Instant::now();
            let sorted = bsp::hook(&world, options, |ctx| sample_sort(ctx, local))?;
            let compute = world.allreduce(&[t1.elapsed().as_secs_f64()], Max)?[0];
            let compute = Duration::from_secs_f64(compute);
            let largest = world.allreduce(&[sorted.len() as u64], Max)?[0];
            let total = world.allreduce(&[sorted.len() as u64], Sum)?[0];
            if let Some(path) = &self.out {
                job.write_ordered(&world, path, |w| {
                    for v in &sorted {
                        w.write_all(&v.to_le_bytes())?;
                    }
                    Ok(())
                })?;
            }
            Ok(Some(RankOut {
                facts: SortFacts {
                    elements: total,
                    largest_part: largest,
                    elements_per_second: total as f64 / compute.as_secs_f64().max(1e-12),
                },
                timing: Timing {
                    iterations: 1,
                    iteration_times: vec![compute],
                    load,
                    compute,
                    ..Timing::default()
                },
                lead: world.rank() == 0,
            }))
        })
    }
}
