//! Why a command ended early, with its exit code.
//!
//! | code | meaning |
//! | ---- | ------- |
//! | 0    | done |
//! | 1    | the job failed while running (I/O, resources, divergence, lost ranks) |
//! | 2    | the request was wrong (arguments, input contents, paths) |
//! | 130  | interrupted by SIGINT |
//! | 143  | interrupted by SIGTERM |

use std::path::Path;

use spillway::algorithms::AlgoError;
use spillway::JobError;

/// Exit code: the request was wrong.
pub(crate) const USAGE: u8 = 2;
/// Exit code: the job failed while running.
pub(crate) const FAILED: u8 = 1;

/// `--help`'s closing section: exit codes, pipes, and what is checked before a job starts.
pub(crate) const HELP: &str = "\
Exit codes:
  0    done
  1    the job failed while running (I/O, resources, divergence, lost ranks)
  2    the request was wrong (arguments, input contents, paths); nothing was written
  130  interrupted by SIGINT (143: SIGTERM); no output or temporary file is left

Inputs may be `-` (standard input), a FIFO or a device: they are copied to the spill
directory before the job starts (at most --input-limit bytes). Outputs may be `-` (standard
output; the report then goes to stderr), a FIFO or a device: they are written through.
Regular-file outputs appear only when the whole job succeeded, all of them together.

Checked before any work: every option value, every input (exists, readable), every output
(its directory exists and is writable; never the same file as an input or another output),
--spill-dir, --checkpoint-dir, --trace, the probe cache, and the memory, storage and ranks
the job needs against what there is (a control group's memory limit counts).";

/// A failure of a command: its exit code and a message that names the argument or file:line.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    /// The request was wrong (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: USAGE,
            message: message.into(),
        }
    }

    /// The job failed while running (exit 1).
    pub(crate) fn failed(message: impl Into<String>) -> Failure {
        Failure {
            code: FAILED,
            message: message.into(),
        }
    }

    /// An option's value was wrong: `--name VALUE: why`.
    pub(crate) fn option(
        name: &str,
        value: impl std::fmt::Display,
        why: impl std::fmt::Display,
    ) -> Failure {
        Failure::usage(format!("{name} {value}: {why}"))
    }

    /// Something about a path given as `arg` was wrong.
    pub(crate) fn path(arg: &str, path: &Path, why: impl std::fmt::Display) -> Failure {
        Failure::usage(format!("{arg} {}: {why}", path.display()))
    }

    /// Writing an output failed while running (exit 1).
    pub(crate) fn write(path: &Path, e: &std::io::Error) -> Failure {
        Failure::failed(format!("cannot write {}: {e}", output_name(path)))
    }
}

/// An output's name in messages: `-` is standard output.
fn output_name(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "standard output (-)".into()
    } else {
        path.display().to_string()
    }
}

impl From<AlgoError> for Failure {
    fn from(e: AlgoError) -> Failure {
        Failure {
            code: if e.is_bad_input() { USAGE } else { FAILED },
            message: e.to_string(),
        }
    }
}

impl From<JobError> for Failure {
    fn from(e: JobError) -> Failure {
        if let Some(algo) = e.rank_error::<AlgoError>() {
            return Failure {
                code: if algo.is_bad_input() { USAGE } else { FAILED },
                message: algo.to_string(),
            };
        }
        if let Some(f) = e.rank_error::<RankFailure>() {
            return Failure {
                code: f.0.code,
                message: f.0.message.clone(),
            };
        }
        let code = match &e {
            JobError::Config(_) => USAGE,
            JobError::Interrupted { signal } => (128 + signal).clamp(0, 255) as u8,
            _ => FAILED,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

/// A [`Failure`] raised inside a rank, carried through the runtime as a rank's error.
#[derive(Debug)]
pub(crate) struct RankFailure(pub(crate) Failure);

impl std::fmt::Display for RankFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for RankFailure {}
