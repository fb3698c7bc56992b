//! Errors of rank operations and of whole jobs.

use std::fmt;

/// An error of one rank's operation.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The job is ending because another rank failed or a deadlock was found; the original
    /// cause is reported by [`run`](crate::run).
    Aborted,
    /// A rank number outside the communicator.
    InvalidRank {
        /// The offending rank.
        rank: usize,
        /// Size of the communicator.
        size: usize,
    },
    /// A message longer than the receive buffer.
    Truncated {
        /// Bytes in the message.
        message_bytes: usize,
        /// Bytes the buffer holds.
        buffer_bytes: usize,
    },
    /// A message whose length is not a whole number of elements, or a payload that does not
    /// decode as the requested type.
    TypeMismatch {
        /// What was expected.
        expected: &'static str,
        /// Bytes in the message.
        message_bytes: usize,
    },
    /// Arguments that violate the operation's contract (e.g. counts that do not add up).
    InvalidArgument(&'static str),
    /// An I/O error of the runtime (spill files and the like).
    Io(std::io::Error),
    /// Processes of the job were lost (MPI with ULFM): blocking calls fail with this until
    /// the rank acknowledges the loss ([`Rank::acknowledge_loss`](crate::Rank::acknowledge_loss))
    /// and goes on without the lost ranks.
    ProcessLost(crate::LostProcesses),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Aborted => write!(f, "the job was aborted by a failure elsewhere"),
            Error::InvalidRank { rank, size } => {
                write!(f, "rank {rank} is outside the communicator of size {size}")
            }
            Error::Truncated {
                message_bytes,
                buffer_bytes,
            } => write!(
                f,
                "message of {message_bytes} bytes does not fit the receive buffer of {buffer_bytes} bytes"
            ),
            Error::TypeMismatch {
                expected,
                message_bytes,
            } => write!(f, "message of {message_bytes} bytes is not {expected}"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::ProcessLost(lost) => write!(
                f,
                "{lost}: the job cannot go on without it, unless it recovers from lost \
                 processes (MapReduce with fault tolerance does); with the spillway CLI, a job \
                 saved with --checkpoint-dir resumes with --resume"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

/// What one rank was doing when a deadlock was detected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitState {
    /// Global rank.
    pub rank: u32,
    /// Node of the rank.
    pub node: u32,
    /// What the rank waits for, or "finished".
    pub waiting_for: String,
}

/// Every rank blocked with nothing in flight: who waits on what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadlockReport {
    /// One entry per rank, in rank order (with the MPI backend: the ranks of this process).
    pub ranks: Vec<WaitState>,
    /// Set when the report covers only some ranks (each MPI process reports its own).
    pub note: Option<String>,
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadlock: every rank is blocked and no message is in flight"
        )?;
        if let Some(note) = &self.note {
            writeln!(f, "  ({note})")?;
        }
        for w in &self.ranks {
            writeln!(f, "  rank {} (node {}): {}", w.rank, w.node, w.waiting_for)?;
        }
        Ok(())
    }
}

/// Why a whole job failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum JobError {
    /// The configuration is invalid.
    Config(String),
    /// A rank returned an error.
    RankFailed {
        /// The failing rank.
        rank: u32,
        /// Its error.
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A rank panicked.
    RankPanicked {
        /// The panicking rank.
        rank: u32,
        /// The panic message.
        message: String,
    },
    /// Every rank was blocked.
    Deadlock(DeadlockReport),
    /// The runtime could not start (threads, spill directory).
    Startup(std::io::Error),
    /// Spill storage failed while the job ran (e.g. the disk is full).
    Storage(std::io::Error),
    /// The trace file ([`Config::trace`](crate::Config::trace)) could not be written; nothing
    /// of it is left.
    Trace(std::io::Error),
    /// The job failed in another process (MPI backend): a rank there failed, or that process
    /// reported a transport error.
    Remote {
        /// The node (MPI process) where the failure happened.
        node: u32,
        /// That process's description of the failure.
        message: String,
    },
    /// The transport between nodes failed (an MPI call returned an error, e.g. because a
    /// process was lost; Debian's MPI has no fault tolerance, so the job cannot continue).
    Transport(String),
    /// The job was interrupted by a signal (see [`interrupt`](crate::interrupt)).
    Interrupted {
        /// The signal number (2 for SIGINT, 15 for SIGTERM).
        signal: i32,
    },
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Config(why) => write!(f, "invalid configuration: {why}"),
            JobError::RankFailed { rank, error } => write!(f, "rank {rank} failed: {error}"),
            JobError::RankPanicked { rank, message } => {
                write!(f, "rank {rank} panicked: {message}")
            }
            JobError::Deadlock(report) => write!(f, "{report}"),
            JobError::Startup(e) => write!(f, "cannot start the job: {e}"),
            JobError::Storage(e) => write!(f, "spill storage failed: {e}"),
            JobError::Trace(e) => write!(f, "{e}"),
            JobError::Remote { node, message } => write!(f, "node {node}: {message}"),
            JobError::Transport(why) => write!(f, "transport between nodes failed: {why}"),
            JobError::Interrupted { signal } => {
                let name = match signal {
                    2 => "SIGINT",
                    15 => "SIGTERM",
                    _ => "a signal",
                };
                write!(
                    f,
                    "interrupted by {name} ({signal}): the job was stopped and its spill and \
                     temporary files removed"
                )
            }
        }
    }
}

impl std::error::Error for JobError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JobError::RankFailed { error, .. } => Some(error.as_ref()),
            JobError::Startup(e) | JobError::Storage(e) => Some(e),
            _ => None,
        }
    }
}

impl JobError {
    /// The failing rank's error, if it returned one of type `E`.
    pub fn rank_error<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            JobError::RankFailed { error, .. } => error.downcast_ref::<E>(),
            _ => None,
        }
    }
}
