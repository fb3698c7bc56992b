//! Memory that a size read from the input implies, checked before anything that large is
//! allocated.
//!
//! A vertex id, a Matrix Market size line or a column index fixes how much state an algorithm
//! keeps (per vertex, per row, per column). One number in a tiny file can ask for gigabytes, so
//! a loader calls [`check_state`] with the bytes the number implies before allocating them:
//!
//! * the state must fit: with a memory budget it is storage-backed and must fit the spill
//!   directory's free space; without one it must fit the memory available to this process
//!   (the control group's limit counts);
//! * and, for sizes read from a file, it must be in proportion with the file: state larger
//!   than [`FREE_STATE_BYTES`] and more than [`STATE_PER_INPUT_BYTE`] times the file's size
//!   means sparse or corrupt ids (a file naming vertex 4294967294 among three edges), refused
//!   with the file and line instead of allocated.

use std::path::Path;

use spillway_comm::Comm;

use crate::error::AlgoError;
use crate::io::InputError;

/// State that any input may imply (within the memory available).
pub const FREE_STATE_BYTES: u64 = 256 << 20;

/// Beyond [`FREE_STATE_BYTES`], the most state one byte of input may imply.
pub const STATE_PER_INPUT_BYTE: u64 = 64;

/// Where the size that implies the state came from.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// A line of an input file: the size is out of proportion if the state exceeds
    /// [`STATE_PER_INPUT_BYTE`] times the file's size (and [`FREE_STATE_BYTES`]).
    Line {
        /// The file.
        path: &'a Path,
        /// Its 1-based line, if known.
        line: Option<u64>,
        /// What the line holds, e.g. "vertex id 4294967294".
        what: &'a str,
    },
    /// A parameter the user chose (a generator's size, `k`): only whether it fits counts.
    Parameter {
        /// The parameter's name.
        name: &'static str,
        /// What it asks for, e.g. "8 centroids of 2^32 columns".
        what: &'a str,
    },
}

/// A size in binary units for messages (`1.5 GiB`).
pub fn human_bytes(bytes: u64) -> String {
    spillway_runtime::ByteSize(bytes).human()
}

/// Free bytes of the file system holding `dir`.
pub fn free_space(dir: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(dir).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Refuses `bytes` of state (for `units` of something, e.g. "4294967295 vertices") that the
/// job cannot or should not hold; see the [module documentation](self).
///
/// # Errors
/// [`AlgoError::Input`] with the file and line for an [`Origin::Line`], or
/// [`AlgoError::BadParameter`] for an [`Origin::Parameter`], saying how much memory the state
/// would need and what limits it.
pub fn check_state(
    comm: &Comm,
    bytes: u64,
    units: &str,
    origin: Origin<'_>,
) -> Result<(), AlgoError> {
    let rt = comm.runtime();
    let spill = rt.mem_budget().map(|_| rt.spill_dir());
    check_state_in(bytes, units, origin, spill)
}

/// [`check_state`] outside a job: `spill` is the spill directory of storage-backed state
/// (a memory budget), `None` for state on the heap.
///
/// # Errors
/// As [`check_state`].
pub fn check_state_in(
    bytes: u64,
    units: &str,
    origin: Origin<'_>,
    spill: Option<&Path>,
) -> Result<(), AlgoError> {
    let need = human_bytes(bytes);
    let mut problem = match spill {
        Some(dir) => match free_space(dir) {
            Some(free) if bytes > free => Some(format!(
                "{units} need {need} of storage-backed memory, more than the {} free in the \
                 spill directory {}",
                human_bytes(free),
                dir.display()
            )),
            _ => None,
        },
        // Swap counts: a job the plan let page through swap is not refused here.
        None => match spillway_runtime::available_memory() {
            Some(avail) if bytes > avail + spillway_runtime::available_swap().unwrap_or(0) => {
                Some(format!(
                    "{units} need {need}, more than the {} of memory available (give a \
                     --mem-budget to keep them in storage-backed memory)",
                    human_bytes(avail)
                ))
            }
            _ => None,
        },
    };
    if let (None, Origin::Line { path, .. }) = (&problem, origin) {
        let input = std::fs::metadata(path).map_or(0, |m| m.len());
        if bytes > FREE_STATE_BYTES && bytes / STATE_PER_INPUT_BYTE > input {
            problem = Some(format!(
                "{units} need {need}, out of proportion with the {} of {} (more than \
                 {STATE_PER_INPUT_BYTE} times its size and more than {}): are the ids sparse? \
                 Number them densely from 0",
                human_bytes(input),
                path.display(),
                human_bytes(FREE_STATE_BYTES)
            ));
        }
    }
    let Some(problem) = problem else {
        return Ok(());
    };
    Err(match origin {
        Origin::Line { path, line, what } => {
            InputError::new(path, line, format!("{what} is too large: {problem}")).into()
        }
        Origin::Parameter { name, what } => AlgoError::BadParameter {
            name,
            reason: format!("{what}: {problem}"),
        },
    })
}
