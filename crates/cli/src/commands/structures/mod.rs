//! The memory-constrained data structures of `spillway-structures` on files: `compress`,
//! `decompress` and `run dyngraph`.
//!
//! Raw grid files are little-endian `f32` or `f64` values, the fastest axis first (a C-order
//! NumPy array of shape `(NZ, NY, NX)` written with `tofile`). Edge lists are SNAP text
//! ("src dst" per line, `#` comments).

pub(crate) mod compress;
pub(crate) mod decompress;
pub(crate) mod dyngraph;

use std::path::Path;

use spillway::algorithms::io::{parse_snap_chunk, InputError};
use spillway_structures::compress::{CompressError, PointGraph};

use crate::driver::Failure;

/// A failure of the compression library on `path`: bad input (exit 2) or not (exit 1).
fn from_compress(path: &Path, e: CompressError) -> Failure {
    Failure {
        code: if e.is_bad_input() { 2 } else { 1 },
        message: format!("{}: {e}", path.display()),
    }
}

/// The whole of a file.
fn read_file(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::usage(InputError::io(path, &e).to_string()))
}

/// The edges of a SNAP edge list, refusing a malformed line with the file and line.
fn read_edges(path: &Path) -> Result<Vec<(u32, u32)>, Failure> {
    let bytes = read_file(path)?;
    let chunk = parse_snap_chunk(&bytes);
    if let Some((line, reason)) = chunk.error {
        return Err(Failure::usage(
            InputError::new(path, Some(line + 1), reason).to_string(),
        ));
    }
    Ok(chunk.edges)
}

/// The graph of an unstructured grid of `points` points.
fn read_graph(path: &Path, points: usize) -> Result<PointGraph, Failure> {
    let edges = read_edges(path)?;
    PointGraph::from_edges(points, &edges)
        .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
}
