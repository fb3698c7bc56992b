//! Loading dense points, split over the ranks in contiguous blocks of rows.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::generate::BlobsSpec;
use crate::io::chunks::{agree_on_error, heap_allowance, read_chunks};
use crate::io::{csv_dimension, parse_csv_chunk, InputError};

mod survive;

pub(crate) use survive::{reload_lost_points, PointCopies};

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

/// This rank's block of a distributed point set, and after a loss the parts of the lost
/// ranks' blocks it took over (see `more`).
#[derive(Debug)]
pub struct DistPoints {
    /// Coordinates per point.
    pub dim: usize,
    /// Points in the whole set.
    pub total: u64,
    /// Global index of this rank's first point.
    pub first: u64,
    /// This rank's points, row-major, in storage-backed memory: its block (from `first`),
    /// then the points of `more` in order.
    pub values: SbVec<f64>,
    /// Points held after the block: (global index of the first, points) per part taken over
    /// from lost ranks, in the order their values follow the block's. Empty on every rank
    /// when the points are split in contiguous blocks in rank order (as [`load_points`]
    /// splits them); after a loss, the same number of parts on every survivor, some
    /// possibly empty.
    pub more: Vec<(u64, u64)>,
}

impl DistPoints {
    /// Number of local points.
    pub fn len(&self) -> usize {
        self.values.len() / self.dim.max(1)
    }

    /// Points of this rank's block (from `first`), before those of `more`.
    pub fn block_len(&self) -> u64 {
        self.len() as u64 - self.more.iter().map(|m| m.1).sum::<u64>()
    }

    /// The runs of consecutive points this rank holds, in the order of `values`: (global
    /// index of the first, points).
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        std::iter::once((self.first, self.block_len())).chain(self.more.iter().copied())
    }

    /// Where point `global` is among this rank's points, if it holds it.
    pub fn local_index(&self, global: u64) -> Option<usize> {
        let mut at = 0u64;
        for (first, n) in self.runs() {
            if global >= first && global < first + n {
                return Some((at + global - first) as usize);
            }
            at += n;
        }
        None
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
                more: Vec::new(),
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
        more: Vec::new(),
    })
}

/// The per-point values `mine` (one per point of `points`, in the order of its `values`) in
/// point order: this rank's part of even contiguous blocks over `comm`, in rank order (what
/// an output written in rank order needs). Points split as [`load_points`] splits them are
/// already in that order: their values come back as they are, without communication (the
/// same on every rank: `more` is empty on all or none). A collective otherwise.
///
/// # Errors
/// [`AlgoError::BadParameter`] if `mine` does not hold one value per point; communication
/// errors; [`AlgoError::Unrecoverable`] if the ranks' points do not cover the set.
pub fn in_point_order<'a, T: bytemuck::Pod + Default>(
    comm: &Comm,
    points: &DistPoints,
    mine: &'a [T],
) -> Result<Cow<'a, [T]>, AlgoError> {
    if mine.len() != points.len() {
        return Err(AlgoError::BadParameter {
            name: "values",
            reason: format!("{} values for {} points", mine.len(), points.len()),
        });
    }
    if points.more.is_empty() {
        return Ok(Cow::Borrowed(mine));
    }
    let (p, me, total) = (comm.size(), comm.rank(), points.total);
    let bound = |r: usize| total * r as u64 / p as u64;
    let owner = |x: u64| (0..p).rfind(|&r| bound(r) <= x).unwrap_or(0);
    // Blocks to each owner: (first point, points) as two u64, then the values.
    let mut heads: Vec<Vec<u64>> = vec![Vec::new(); p];
    let mut parts: Vec<Vec<T>> = vec![Vec::new(); p];
    let mut at_local = 0usize;
    for (first, n) in points.runs() {
        let mut at = first;
        while at < first + n {
            let o = owner(at);
            let stop = bound(o + 1).min(first + n);
            let len = (stop - at) as usize;
            let from = at_local + (at - first) as usize;
            heads[o].extend_from_slice(&[at, len as u64]);
            parts[o].extend_from_slice(&mine[from..from + len]);
            at = stop;
        }
        at_local += n as usize;
    }
    let heads = comm.alltoallv_vecs(heads)?;
    let parts = comm.alltoallv_vecs(parts)?;
    let (lo, hi) = (bound(me), bound(me + 1));
    let mut out = vec![T::default(); (hi - lo) as usize];
    let mut filled = 0u64;
    for (head, part) in heads.iter().zip(&parts) {
        let mut taken = 0usize;
        for block in head.chunks_exact(2) {
            let (first, len) = (block[0], block[1] as usize);
            let at = (first - lo) as usize;
            out[at..at + len].copy_from_slice(&part[taken..taken + len]);
            taken += len;
            filled += len as u64;
        }
    }
    if filled != hi - lo {
        return Err(AlgoError::Unrecoverable(format!(
            "{filled} of the {} values of points {lo}..{hi} were found after a loss",
            hi - lo
        )));
    }
    Ok(Cow::Owned(out))
}
