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

use crate::driver::{Declared, Estimate, Inputs, RuntimeArgs, Timing};
use crate::options::{random_spec, GenSpec};

/// The options of the BSP commands on values (`run fft`, `run sort`): the values from a file
/// or generated, the output, the BSP layer's checked mode and the runtime. Each command gives
/// `--input`, `--generate` and `--out` help of its own (`mut_arg`).
#[derive(Args, Debug, Clone)]
pub(crate) struct BspArgs {
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
    /// Output file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Checked mode of the BSP primitives (always on in debug builds): every sync verifies that
    /// all ranks agree on the superstep and registrations.
    #[arg(long)]
    checked: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl BspArgs {
    /// The options of the BSP layer.
    fn options(&self) -> Options {
        Options::checked(self.checked || Options::default().checked)
    }

    /// The generator spec, with `--generate`.
    fn generated_name(&self) -> Option<String> {
        self.generate
            .map(|(log2n, seed)| GenSpec::Random { log2n, seed }.to_string())
    }

    /// What the command reads and writes.
    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime)
            .input("--input", self.input.as_deref())
            .output("--out", self.out.as_deref())
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
            ..Default::default()
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
