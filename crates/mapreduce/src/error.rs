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
    /// Writing or reading a spill file failed.
    Spill {
        /// The spill directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl Error {
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
            Error::Input { source, .. } | Error::Spill { source, .. } => Some(source),
        }
    }
}

impl From<spillway_comm::Error> for Error {
    fn from(e: spillway_comm::Error) -> Error {
        Error::Runtime(e)
    }
}
