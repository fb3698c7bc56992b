//! Errors of compression and decompression.

use std::fmt;

use super::container;

/// Why compression or decompression failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CompressError {
    /// A value is NaN or infinite.
    NonFinite {
        /// Index of the first such value.
        index: usize,
        /// The value.
        value: f64,
    },
    /// Epsilon is not a finite number above zero.
    InvalidEpsilon(f64),
    /// The number of values differs from the grid's number of points.
    ShapeMismatch {
        /// Points of the grid.
        grid_points: usize,
        /// Values given.
        values: usize,
    },
    /// More points than set ids can number (`u32`).
    TooManyPoints(usize),
    /// An option out of its range (the message says which).
    InvalidOption(String),
    /// The bytes do not start with the magic of a compressed file.
    NotCompressed,
    /// A format version this build does not read.
    UnsupportedVersion(u8),
    /// The file ends early.
    Truncated,
    /// The checksum does not match: the file was changed or cut short.
    ChecksumMismatch,
    /// The file is inconsistent (the reason says where).
    Corrupt(String),
    /// An unstructured grid's region data needs the grid graph to decompress.
    GraphRequired,
    /// The graph given is not the one the file was compressed on.
    GraphMismatch(String),
    /// A failure that is not the input's fault.
    Internal(String),
}

impl CompressError {
    /// Whether the input (values, settings or file) is at fault, as opposed to an internal
    /// failure.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, CompressError::Internal(_))
    }
}

impl fmt::Display for CompressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompressError::NonFinite { index, value } => write!(
                f,
                "value {index} is {value}: only finite values can be compressed"
            ),
            CompressError::InvalidEpsilon(e) => {
                write!(f, "epsilon must be a finite number greater than 0, got {e}")
            }
            CompressError::ShapeMismatch {
                grid_points,
                values,
            } => write!(
                f,
                "the grid has {grid_points} points but there are {values} values"
            ),
            CompressError::TooManyPoints(n) => {
                write!(f, "{n} points: at most {} are supported", u32::MAX - 1)
            }
            CompressError::InvalidOption(r) => write!(f, "invalid option: {r}"),
            CompressError::NotCompressed => {
                write!(f, "not a spillway compressed file (bad magic bytes)")
            }
            CompressError::UnsupportedVersion(v) => write!(
                f,
                "compressed format version {v} is not supported (this build reads versions {:?}); \
                 a newer spillway wrote it",
                container::READABLE
            ),
            CompressError::Truncated => write!(f, "the compressed file is truncated"),
            CompressError::ChecksumMismatch => write!(
                f,
                "checksum mismatch: the compressed file is corrupt or truncated"
            ),
            CompressError::Corrupt(r) => write!(f, "corrupt compressed file: {r}"),
            CompressError::GraphRequired => write!(
                f,
                "this file was compressed on an unstructured grid with a region method: \
                 decompressing it needs the same grid graph"
            ),
            CompressError::GraphMismatch(r) => {
                write!(f, "the grid graph is not the one used to compress: {r}")
            }
            CompressError::Internal(r) => write!(f, "internal error: {r}"),
        }
    }
}

impl std::error::Error for CompressError {}
