//! BSP commands: the FFT, sample sort, and `probe` (the machine parameters g and l).

pub(crate) mod fft;
pub(crate) mod probe;
pub(crate) mod sort;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use spillway::algorithms::AlgoError;
use spillway::bsp::{self, Bsp, Options};
use spillway::{Collectives, Comm, Max};

use crate::driver::{Declared, Estimate, Inputs, Timing};
use crate::options::{random_spec, GenSpec};

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

/// The input of the BSP commands on values: a file, or random values. Each command gives the
/// help of `--input` and `--generate` its own words (`mut_arg`).
#[derive(Args, Debug, Clone)]
pub(crate) struct ValuesArgs {
    /// Input file; `-` reads standard input.
    #[arg(
        long,
        conflicts_with = "generate",
        required_unless_present = "generate"
    )]
    input: Option<PathBuf>,
    /// Generated input: random:LOG2N[:SEED].
    #[arg(long, value_parser = random_spec)]
    generate: Option<(u32, u64)>,
}

impl ValuesArgs {
    /// The generator spec, with `--generate`.
    fn generated_name(&self) -> Option<String> {
        self.generate
            .map(|(log2n, seed)| GenSpec::Random { log2n, seed }.to_string())
    }

    /// Declares the input file, or the generated input's name.
    fn declare<'a>(&'a self, d: Declared<'a>) -> Declared<'a> {
        d.input("--input", self.input.as_deref())
            .generated(self.generated_name())
    }

    /// The estimate of a job on these values: a file holds at least `text` bytes of each
    /// value, the job keeps `data` bytes and writes `--out` at `out` bytes per value.
    fn estimate(&self, inputs: Inputs<'_>, text: u64, data: u64, out: u64) -> Estimate {
        let (values, because) = match (&self.input, self.generate) {
            (Some(path), _) => (
                inputs.bytes(path) / text,
                format!("--input {}", path.display()),
            ),
            (None, Some((log2n, _))) => (
                1u64 << log2n,
                format!("--generate {}", self.generated_name().unwrap_or_default()),
            ),
            (None, None) => (0, String::new()),
        };
        Estimate {
            data: values.saturating_mul(data),
            because,
            items: values,
            outputs: vec![("--out", values.saturating_mul(out))],
        }
    }
}

/// One BSP computation on the ranks of `world`, timed: `load` makes the rank's part (the load
/// ends at a barrier), then `compute` runs on it under the BSP layer. Returns its result and
/// the timing, whose compute time is the slowest rank's.
#[track_caller]
fn timed<'r, L, R>(
    world: &Comm<'r>,
    options: Options,
    load: impl FnOnce() -> Result<L, AlgoError>,
    compute: impl FnOnce(&mut Bsp<'r>, L) -> Result<R, AlgoError>,
) -> Result<(R, Timing), AlgoError> {
    let t0 = Instant::now();
    let local = load()?;
    world.barrier()?;
    let load = t0.elapsed();
    let t1 = Instant::now();
    let out = bsp::hook(world, options, |ctx| compute(ctx, local))?;
    let compute = world.allreduce(&[t1.elapsed().as_secs_f64()], Max)?[0];
    Ok((out, Timing::once(load, Duration::from_secs_f64(compute))))
}
