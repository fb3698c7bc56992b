//! Loading dense points, split over the ranks in contiguous blocks of rows.

use std::path::{Path, PathBuf};

use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::generate::BlobsSpec;
use crate::io::chunks::{agree_on_error, heap_allowance, read_chunks};
use crate::io::{csv_dimension, parse_csv_chunk, InputError};

/// Where points come from.
#[derive(Debug, Clone, PartialEq)]
pub enum PointSource {
    /// CSV: one point per line, comma-separated numbers, no header.
    Csv(PathBuf),
    /// Generated Gaussian blobs.
    Blobs(BlobsSpec),
}

impl PointSource {
    /// The coordinates per point, known before the points are read (a CSV file's first row).
    ///
    /// # Errors
    /// [`AlgoError::Input`] if the file cannot be read or its first row holds no number.
    pub fn dimension(&self) -> Result<usize, AlgoError> {
        match self {
            PointSource::Csv(path) => Ok(csv_dimension(path)?.0),
            PointSource::Blobs(spec) => Ok(spec.d),
        }
    }
}

/// This rank's block of a distributed point set.
#[derive(Debug)]
pub struct DistPoints {
    /// Coordinates per point.
    pub dim: usize,
    /// Points in the whole set.
    pub total: u64,
    /// Global index of this rank's first point.
    pub first: u64,
    /// This rank's points, row-major, in storage-backed memory.
    pub values: SbVec<f64>,
}

impl DistPoints {
    /// Number of local points.
    pub fn len(&self) -> usize {
        self.values.len() / self.dim.max(1)
    }

    /// Whether this rank holds no points.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Local point `i`.
    pub fn point(&self, i: usize) -> &[f64] {
        &self.values.as_slice()[i * self.dim..(i + 1) * self.dim]
    }
}

/// Reads or generates this rank's points.
///
/// # Errors
/// [`AlgoError::Input`] with file, line and reason (rows of unequal length, non-numeric or
/// non-finite values, an empty file); every rank returns the same error.
pub fn load_points(comm: &Comm, source: &PointSource) -> Result<DistPoints, AlgoError> {
    match source {
        PointSource::Csv(path) => load_csv(comm, path),
        PointSource::Blobs(spec) => {
            let (p, r) = (comm.size() as u64, comm.rank() as u64);
            let range = spec.n * r / p..spec.n * (r + 1) / p;
            let count = (range.end - range.start) as usize;
            let mut values: SbVec<f64> = SbVec::zeroed(comm.runtime(), count * spec.d)?;
            // Generate in pieces straight into storage-backed memory.
            let out = values.as_mut_slice();
            let mut buf = Vec::new();
            let piece = (1usize << 20) / spec.d.max(1) + 1;
            let mut at = range.start;
            while at < range.end {
                let end = (at + piece as u64).min(range.end);
                buf.clear();
                spec.points(at..end, &mut buf);
                let base = (at - range.start) as usize * spec.d;
                out[base..base + buf.len()].copy_from_slice(&buf);
                at = end;
            }
            Ok(DistPoints {
                dim: spec.d,
                total: spec.n,
                first: range.start,
                values,
            })
        }
    }
}

fn load_csv(comm: &Comm, path: &Path) -> Result<DistPoints, AlgoError> {
    let (dim, _) = csv_dimension(path)?;
    let mut values: SbVec<f64> = SbVec::with_capacity(comm.runtime(), 0)?;
    let mut rows = 0u64;
    let chunk = heap_allowance(comm) / 2;
    let (read, before) = read_chunks(comm, path, 0, chunk, |bytes| {
        let parsed = parse_csv_chunk(bytes, dim);
        values.extend_from_slice(&parsed.values)?;
        rows += parsed.rows;
        Ok(parsed.error)
    })?;
    agree_on_error(comm, path, read.error, before)?;
    let first = comm.exscan(&[rows], Sum)?.map_or(0, |v| v[0]);
    let total = comm.allreduce(&[rows], Sum)?[0];
    if total == 0 {
        return Err(InputError::new(path, None, "no data rows").into());
    }
    Ok(DistPoints {
        dim,
        total,
        first,
        values,
    })
}
