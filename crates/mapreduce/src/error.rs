//! Errors of MapReduce operations.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a MapReduce operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Communication or the runtime failed (usually: the job is being aborted).
    Runtime(spillway_comm::Error),
    /// An input file could not be read.
    Input {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// This rank was lost in a fault-tolerant operation (injected, or a user function
    /// panicked); it must leave the job: the others go on without it.
    Lost {
        /// The rank (original numbering).
        rank: u32,
        /// The operation (from 1).
        op: u64,
        /// Why.
        cause: String,
    },
    /// Ranks were lost in a way fault tolerance cannot repair (more than the replicas
    /// cover, a failure during a recovery, an input that cannot be rebuilt); the job ends.
    Unrecoverable {
        /// The operation (from 1).
        op: u64,
        /// The lost ranks (original numbering).
        lost: Vec<u32>,
        /// What could not be recovered.
        reason: String,
    },
    /// Encoded records that do not decode (e.g. read back from a damaged file).
    Corrupt(String),
    /// A request this job cannot carry out (e.g. killing a process of a job that runs in
    /// one process).
    Invalid(String),
    /// An output file could not be written (nothing was left at its path).
    Output {
        /// The file.
        path: PathBuf,
        /// The cause (on the first rank that failed).
        source: std::io::Error,
    },
    /// Writing or reading a spill file failed.
    Spill {
        /// The spill directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
    /// Whether the error is a process lost for real (MPI with ULFM; see
    /// [`spillway_runtime::Error::ProcessLost`]).
    pub fn is_process_lost(&self) -> bool {
        matches!(self, Error::Runtime(spillway_comm::Error::ProcessLost(_)))
    }

    pub(crate) fn spill(dir: &Path, source: std::io::Error) -> Error {
        Error::Spill {
            dir: dir.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Runtime(e) => write!(f, "{e}"),
            Error::Input { path, source } => write!(f, "{}: cannot read: {source}", path.display()),
            Error::Lost { rank, op, cause } => {
                write!(f, "rank {rank} was lost in operation {op} ({cause})")
            }
            Error::Unrecoverable { op, lost, reason } => write!(
                f,
                "cannot recover from the loss of rank(s) {lost:?} in operation {op}: {reason}"
            ),
            Error::Corrupt(why) => write!(f, "corrupt records: {why}"),
            Error::Invalid(why) => write!(f, "{why}"),
            Error::Output { path, source } => {
                write!(f, "{}: cannot write: {source}", path.display())
            }
            Error::Spill { dir, source } => {
                write!(f, "spill directory {}: {source}", dir.display())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Runtime(e) => Some(e),
            Error::Input { source, .. }
            | Error::Spill { source, .. }
            | Error::Output { source, .. } => Some(source),
            Error::Lost { .. }
            | Error::Unrecoverable { .. }
            | Error::Corrupt(_)
            | Error::Invalid(_) => None,
        }
    }
}

impl From<spillway_comm::Error> for Error {
    fn from(e: spillway_comm::Error) -> Error {
        Error::Runtime(e)
    }
}
