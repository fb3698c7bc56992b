//! Errors of the algorithms.

use std::fmt;
use std::path::PathBuf;

use crate::io::InputError;

/// Why an algorithm or loader failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum AlgoError {
    /// Malformed or unreadable input: file, line, reason.
    Input(InputError),
    /// A parameter that the data cannot satisfy (e.g. more clusters than points).
    BadParameter {
        /// The parameter.
        name: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// An output file could not be written.
    Output {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Communication failed (usually: the job is being aborted).
    Comm(spillway_comm::Error),
    /// A BSP primitive failed (see [`spillway_bsp::Error`]).
    Bsp(spillway_bsp::Error),
    /// A MapReduce operation failed in its spill files (see [`spillway_mapreduce::Error`]).
    MapReduce(spillway_mapreduce::Error),
    /// Saving or resuming a checkpoint failed, or the checkpoint belongs to another job (see
    /// [`spillway_checkpoint::CheckpointError`]).
    Checkpoint(spillway_checkpoint::CheckpointError),
    /// Processes were lost for real (MPI with ULFM) in a way the engine cannot recover from:
    /// what was lost and how to resume.
    Unrecoverable(String),
    /// An iterative method's model became non-finite (NaN or infinite): it diverged.
    Diverged {
        /// The iteration (from 1) after which the model was non-finite.
        iteration: usize,
        /// What became non-finite.
        what: String,
        /// Which parameter to change.
        hint: &'static str,
    },
}

impl AlgoError {
    /// Whether this rank was lost in a fault-tolerant MapReduce operation (it must leave
    /// the job; the others go on).
    pub fn is_lost(&self) -> bool {
        matches!(
            self,
            AlgoError::MapReduce(spillway_mapreduce::Error::Lost { .. })
        )
    }

    /// Whether the user's input or parameters are at fault (the CLI exits with code 2).
    pub fn is_bad_input(&self) -> bool {
        match self {
            AlgoError::Input(_) | AlgoError::BadParameter { .. } => true,
            AlgoError::Checkpoint(e) => e.is_usage(),
            _ => false,
        }
    }
}

impl fmt::Display for AlgoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlgoError::Input(e) => write!(f, "{e}"),
            AlgoError::BadParameter { name, reason } => write!(f, "invalid {name}: {reason}"),
            AlgoError::Output { path, source } if path.as_os_str() == "-" => {
                write!(f, "cannot write standard output (-): {source}")
            }
            AlgoError::Output { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
            AlgoError::Comm(e) => write!(f, "{e}"),
            AlgoError::Bsp(e) => write!(f, "{e}"),
            AlgoError::MapReduce(e) => write!(f, "{e}"),
            AlgoError::Checkpoint(e) => write!(f, "{e}"),
            AlgoError::Unrecoverable(why) => write!(f, "{why}"),
            AlgoError::Diverged {
                iteration,
                what,
                hint,
            } => write!(f, "diverged at iteration {iteration}: {what}; {hint}"),
        }
    }
}

impl std::error::Error for AlgoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AlgoError::Input(e) => Some(e),
            AlgoError::Output { source, .. } => Some(source),
            AlgoError::Comm(e) => Some(e),
            AlgoError::Bsp(e) => Some(e),
            AlgoError::MapReduce(e) => Some(e),
            AlgoError::Checkpoint(e) => Some(e),
            AlgoError::BadParameter { .. }
            | AlgoError::Unrecoverable(_)
            | AlgoError::Diverged { .. } => None,
        }
    }
}

impl From<InputError> for AlgoError {
    fn from(e: InputError) -> AlgoError {
        AlgoError::Input(e)
    }
}

impl From<spillway_comm::Error> for AlgoError {
    fn from(e: spillway_comm::Error) -> AlgoError {
        AlgoError::Comm(e)
    }
}

impl From<spillway_bsp::Error> for AlgoError {
    fn from(e: spillway_bsp::Error) -> AlgoError {
        match e {
            spillway_bsp::Error::Runtime(e) => AlgoError::Comm(e),
            e => AlgoError::Bsp(e),
        }
    }
}

impl From<spillway_mapreduce::Error> for AlgoError {
    fn from(e: spillway_mapreduce::Error) -> AlgoError {
        match e {
            spillway_mapreduce::Error::Runtime(e) => AlgoError::Comm(e),
            spillway_mapreduce::Error::Input { path, source } => {
                AlgoError::Input(InputError::io(path, &source))
            }
            e => AlgoError::MapReduce(e),
        }
    }
}

impl From<spillway_checkpoint::CheckpointError> for AlgoError {
    fn from(e: spillway_checkpoint::CheckpointError) -> AlgoError {
        match e {
            spillway_checkpoint::CheckpointError::Runtime(e) => AlgoError::Comm(e),
            e => AlgoError::Checkpoint(e),
        }
    }
}
