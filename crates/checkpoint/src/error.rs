//! Why saving or loading a checkpoint failed.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why saving or loading a checkpoint failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Reading or writing a file or directory failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// Another rank failed (its own error says why); this rank stopped with it.
    PeerFailed {
        /// The rank that failed.
        rank: usize,
    },
    /// The newest complete checkpoint was written by a job with another fingerprint.
    Mismatch {
        /// The checkpoint directory.
        dir: PathBuf,
        /// The fingerprint of the job that wrote the checkpoint.
        written: String,
        /// The fingerprint of this job.
        this: String,
    },
    /// The newest complete checkpoint was written by a job with another number of ranks.
    RankCount {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Ranks of the job that wrote it.
        written: usize,
        /// Ranks of this job.
        this: usize,
    },
    /// A job that does not resume found complete checkpoints in its directory (continuing
    /// would mix two jobs' checkpoints).
    Exists {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Sequence number of the newest complete checkpoint there.
        seq: u64,
    },
    /// Communication failed (usually: the job is being aborted).
    Runtime(spillway_comm::Error),
}

impl CheckpointError {
    /// Whether the user's arguments are at fault (another job's checkpoints), as opposed to a
    /// failure of storage or of the job.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            CheckpointError::Mismatch { .. }
                | CheckpointError::RankCount { .. }
                | CheckpointError::Exists { .. }
        )
    }

    pub(crate) fn io(path: &Path, source: io::Error) -> CheckpointError {
        CheckpointError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Io { path, source } => {
                write!(f, "checkpoint {}: {source}", path.display())
            }
            CheckpointError::PeerFailed { rank } => {
                write!(f, "checkpoint: rank {rank} failed")
            }
            CheckpointError::Mismatch { dir, written, this } => write!(
                f,
                "checkpoint in {} was written by `{written}`; this run is `{this}` \
                 (resume with the same arguments, or use another --checkpoint-dir)",
                dir.display()
            ),
            CheckpointError::RankCount { dir, written, this } => write!(
                f,
                "checkpoint in {} was written by {written} ranks; this run has {this}",
                dir.display()
            ),
            CheckpointError::Exists { dir, seq } => write!(
                f,
                "{} already holds checkpoint {seq}: pass --resume to continue that job, \
                 or remove the directory",
                dir.display()
            ),
            CheckpointError::Runtime(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CheckpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckpointError::Io { source, .. } => Some(source),
            CheckpointError::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

impl From<spillway_comm::Error> for CheckpointError {
    fn from(e: spillway_comm::Error) -> CheckpointError {
        CheckpointError::Runtime(e)
    }
}
