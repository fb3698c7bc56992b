//! `run sort`: BSP sample sort of raw little-endian u64 values.

use std::os::unix::fs::FileExt;
use std::path::Path;

use clap::Args;
use serde::Serialize;
use spillway::algorithms::bsp::sort::{random_u64, sample_sort};
use spillway::algorithms::io::InputError;
use spillway::algorithms::AlgoError;
use spillway::{Collectives, Comm, Max, Sum};

use super::{timed, BspArgs};
use crate::driver::{Command, Declared, Estimate, Failure, Inputs, Job, RankOut};

/// `run sort`.
#[derive(Args, Debug)]
#[command(
    mut_arg("input", |a| a.help("Input: raw little-endian u64 values; `-` reads standard input")),
    mut_arg("out", |a| a.help("Output: the values in ascending order, raw little-endian u64")),
)]
pub(crate) struct Sort {
    #[command(flatten)]
    args: BspArgs,
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

impl Command for Sort {
    const NAME: &'static str = "sort";
    type Facts = SortFacts;

    fn declare(&self) -> Declared<'_> {
        self.args.declare()
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        // Each rank's values, the exchanged and the merged copies; per rank of the job the
        // descriptors of its pieces, their puts and gets queued, and their messages (about
        // 600 bytes a pair measured at 1,000 ranks).
        Ok(self.args.estimate(inputs, 8, 8 * 3, 8).ranks(32 << 10, 640))
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<SortFacts>, Failure> {
        let p = job.config().ranks_total() as usize;
        let input = self.args.input.as_ref().map(|given| job.input(given));
        let n = match (&input, self.args.generate) {
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
        let options = self.args.options();
        job.spmd(1, "sort", |rank, _| {
            let world = Comm::world(rank);
            let s = world.rank();
            let (lo, hi) = (s * n / p, (s + 1) * n / p);
            let load = || match (&input, self.args.generate) {
                (Some(path), _) => read_u64s(path, lo, hi),
                (None, Some((_, seed))) => {
                    Ok((lo..hi).map(|i| random_u64(seed, i as u64)).collect())
                }
                (None, None) => unreachable!("checked above"),
            };
            let (sorted, timing) =
                timed(&world, options, load, |ctx, local| sample_sort(ctx, local))?;
            let largest = world.allreduce(&[sorted.len() as u64], Max)?[0];
            let total = world.allreduce(&[sorted.len() as u64], Sum)?[0];
            if let Some(path) = &self.args.out {
                job.write_ordered(&world, path, |w| {
                    for v in &sorted {
                        w.write_all(&v.to_le_bytes())?;
                    }
                    Ok(())
                })?;
            }
            let facts = SortFacts {
                elements: total,
                largest_part: largest,
                elements_per_second: total as f64 / timing.compute.as_secs_f64().max(1e-12),
            };
            Ok(Some(RankOut::of(&world, facts, timing)))
        })
    }
}
