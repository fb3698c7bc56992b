//! BSP commands: the FFT, sample sort, and `probe` (the machine parameters g and l).

pub(crate) mod fft;
pub(crate) mod probe;
pub(crate) mod sort;

use clap::Args;
use spillway::bsp::Options;

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
