//! `run fft`: the BSP FFT (Inda-Bisseling) of a complex vector.

use std::sync::Arc;

use clap::Args;
use num_complex::Complex64;
use serde::Serialize;
use spillway::algorithms::bsp::fft::{check_length, fft, input_index, parse_complex, random_value};
use spillway::algorithms::io::InputError;
use spillway::algorithms::AlgoError;
use spillway::bsp::Memory;
use spillway::{Collectives, Comm, SbVec};

use super::{timed, BspArgs};
use crate::driver::{Command, Declared, Estimate, Failure, Inputs, Job, RankOut};

/// `run fft`.
#[derive(Args, Debug)]
#[command(
    mut_arg("input", |a| a.help(
        "Input: one complex value \"re im\" per line; the length is a power of two; `-` reads \
         standard input"
    )),
    mut_arg("generate", |a| a.help(
        "Generated input: random:LOG2N[:SEED] (parts uniform in [-1, 1))"
    )),
    mut_arg("out", |a| a.help(
        "Output: the forward transform (numpy's sign, no scaling), \"re im\" per line"
    )),
)]
pub(crate) struct Fft {
    #[command(flatten)]
    args: BspArgs,
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

impl Command for Fft {
    const NAME: &'static str = "fft";
    type Facts = FftFacts;

    fn declare(&self) -> Declared<'_> {
        self.args.declare()
    }

    fn check(&self) -> Result<(), Failure> {
        if let Some((log2n, _)) = self.args.generate {
            let n = 1usize << log2n;
            check_length(n, self.args.runtime.ranks as usize).map_err(|e| {
                Failure::option(
                    "--generate",
                    self.args.generated_name().unwrap_or_default(),
                    e,
                )
            })?;
        }
        Ok(())
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        // A value takes at least 4 bytes of text ("0 0\n"); the job keeps the values, each
        // rank's part and its transform, and the exchange buffers.
        // Per rank of the job, the puts of the all-to-all and their messages.
        Ok(self.args.estimate(inputs, 4, 40, 48).ranks(32 << 10, 640))
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<FftFacts>, Failure> {
        let p = job.config().ranks_total() as usize;
        let (values, n) = match (&self.args.input, self.args.generate) {
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
        let options = self.args.options();
        job.spmd(1, "fft", |rank, _| {
            let world = Comm::world(rank);
            let s = world.rank();
            let load = || {
                let local: Vec<Complex64> = (0..n / p)
                    .map(|j| {
                        let i = input_index(p, s, j);
                        match &values {
                            Values::File(v) => v[i],
                            Values::Random(seed) => random_value(*seed, i),
                        }
                    })
                    .collect();
                Ok(if rank.mem_budget().is_some() {
                    Memory::Storage(SbVec::from_slice(rank, &local)?)
                } else {
                    Memory::Heap(local)
                })
            };
            let (out, timing) = timed(&world, options, load, |ctx, local| fft(ctx, n, local))?;
            if let Some(path) = &self.args.out {
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
            let facts = FftFacts {
                points: n as u64,
                gflops: flops / timing.compute.as_secs_f64().max(1e-12) / 1e9,
            };
            Ok(Some(RankOut::of(&world, facts, timing)))
        })
    }
}
