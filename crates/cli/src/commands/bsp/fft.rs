//! `run fft`: the BSP FFT (Inda-Bisseling) of a complex vector.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use num_complex::Complex64;
use serde::Serialize;
use spillway::algorithms::bsp::fft::{check_length, fft, input_index, parse_complex, random_value};
use spillway::algorithms::io::InputError;
use spillway::algorithms::AlgoError;
use spillway::bsp::{self, Memory};
use spillway::{Collectives, Comm, Max, SbVec};

use super::BspArgs;
use crate::driver::{
    Command, CommonArgs, Declared, Estimate, Failure, Inputs, Job, RankOut, RuntimeArgs, Timing,
};
use crate::options::{random_spec, GenSpec};

/// `run fft`.
#[derive(Args, Debug)]
pub(crate) struct Fft {
    /// Input: one complex value "re im" per line; the length is a power of two; `-` reads
    /// standard input.
    #[arg(
        long,
        conflicts_with = "generate",
        required_unless_present = "generate"
    )]
    input: Option<PathBuf>,
    /// Generated input: random:LOG2N[:SEED] (parts uniform in [-1, 1)).
    #[arg(long, value_parser = random_spec)]
    generate: Option<(u32, u64)>,
    /// Output: the forward transform (numpy's sign, no scaling), "re im" per line.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    bsp: BspArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `run fft` reports.
#[derive(Debug, Serialize)]
pub(crate) struct FftFacts {
    points: u64,
    gflops: f64,
}

/// Where the values come from.
enum Values {
    File(Arc<Vec<Complex64>>),
    Random(u64),
}

impl Fft {
    fn generated_name(&self) -> Option<String> {
        self.generate
            .map(|(log2n, seed)| GenSpec::Random { log2n, seed }.to_string())
    }
}

impl Command for Fft {
    const NAME: &'static str = "fft";
    type Facts = FftFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::new(&self.common)
            .runtime(&self.runtime)
            .input("--input", self.input.as_deref())
            .output("--out", self.out.as_deref())
            .generated(self.generated_name())
    }

    fn check(&self) -> Result<(), Failure> {
        if let Some((log2n, _)) = self.generate {
            let n = 1usize << log2n;
            check_length(n, self.runtime.ranks as usize).map_err(|e| {
                Failure::option("--generate", self.generated_name().unwrap_or_default(), e)
            })?;
        }
        Ok(())
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        let (values, because) = match (&self.input, self.generate) {
            // A value takes at least 4 bytes of text ("0 0\n").
            (Some(path), _) => (
                inputs.bytes(path) / 4,
                format!("--input {}", path.display()),
            ),
            (None, Some((log2n, _))) => (
                1u64 << log2n,
                format!("--generate {}", self.generated_name().unwrap_or_default()),
            ),
            (None, None) => (0, String::new()),
        };
        Ok(Estimate {
            // The values, each rank's part and its transform, and the exchange buffers.
            data: values.saturating_mul(16 * 4),
            because,
            items: values,
            outputs: vec![("--out", values.saturating_mul(48))],
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<FftFacts>, Failure> {
        let p = job.config().ranks_total() as usize;
        let (values, n) = match (&self.input, self.generate) {
            (Some(given), _) => {
                let path = job.input(given);
                let bytes = std::fs::read(&path)
                    .map_err(|e| Failure::from(AlgoError::from(InputError::io(&path, &e))))?;
                let values =
                    parse_complex(&path, &bytes).map_err(|e| Failure::usage(e.to_string()))?;
                let n = values.len();
                if let Err(AlgoError::BadParameter { reason, .. }) = check_length(n, p) {
                    return Err(Failure::usage(
                        InputError::new(&path, Some(n as u64), reason).to_string(),
                    ));
                }
                (Values::File(Arc::new(values)), n)
            }
            (None, Some((log2n, seed))) => (Values::Random(seed), 1usize << log2n),
            (None, None) => unreachable!("clap requires --input or --generate"),
        };
        let options = self.bsp.options();
        job.spmd(1, "fft", |rank, _| {
            let world = Comm::world(rank);
            let s = world.rank();
            let t0 = Instant::now();
            let local: Vec<Complex64> = (0..n / p)
                .map(|j| {
                    let i = input_index(p, s, j);
                    match &values {
                        Values::File(v) => v[i],
                        Values::Random(seed) => random_value(*seed, i),
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
            let compute = Duration::from_secs_f64(compute);
            if let Some(path) = &self.out {
                // Block-cyclic to block: local block k2 belongs to rank k2, at our position.
                let block = world.alltoall(out.as_slice())?;
                job.write_ordered(&world, path, |w| {
                    for v in &block {
                        writeln!(w, "{} {}", v.re, v.im)?;
                    }
                    Ok(())
                })?;
            }
            let flops = 5.0 * n as f64 * (n as f64).log2();
            Ok(Some(RankOut {
                facts: FftFacts {
                    points: n as u64,
                    gflops: flops / compute.as_secs_f64().max(1e-12) / 1e9,
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
