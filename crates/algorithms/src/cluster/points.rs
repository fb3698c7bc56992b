//! Loading dense points, split over the ranks in contiguous blocks of rows.

use std::fs::File;
use std::path::{Path, PathBuf};

use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::generate::BlobsSpec;
use crate::io::chunks::{agree_on_error, heap_allowance, read_chunks, read_part};
use crate::io::line_aligned_range;
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

/// After ranks were lost: this rank's block of the points over `comm`, the survivors of
/// `base`, on which `held` was this rank's block as [`load_points`] read it (a collective
/// over `comm`). The blocks the
/// survivors hold stay in memory; only the lost ranks' parts of `source` are read again
/// (the lines `load_points` gave them over `base`, each part split over the survivors), and
/// everything moves so that the survivors hold even contiguous blocks in point order.
///
/// # Errors
/// As [`load_points`]; [`AlgoError::Input`] if the lost parts no longer hold the points
/// they held (the input changed while the job ran).
pub(crate) fn reload_lost_points(
    comm: &Comm,
    base: &Comm,
    held: DistPoints,
    source: &PointSource,
) -> Result<DistPoints, AlgoError> {
    let (p, me) = (comm.size(), comm.rank());
    let dim = held.dim;
    let total = held.total;
    // (member of `base`, first point, points) of every survivor, in `base` order (the
    // survivors keep their order).
    let mine = [base.rank() as u64, held.first, held.len() as u64];
    let blocks: Vec<[u64; 3]> = comm
        .allgather(&mine)?
        .chunks_exact(3)
        .map(|b| [b[0], b[1], b[2]])
        .collect();
    let mut blocks = blocks;
    blocks.sort_unstable();
    // The runs of consecutive lost members: (first member, last member + 1, first point,
    // end point).
    let mut gaps: Vec<(usize, usize, u64, u64)> = Vec::new();
    let (mut member, mut point) = (0usize, 0u64);
    for b in blocks
        .iter()
        .chain(std::iter::once(&[base.size() as u64, total, 0]))
    {
        if b[0] as usize > member {
            gaps.push((member, b[0] as usize, point, b[1]));
        }
        member = b[0] as usize + 1;
        point = b[1] + b[2];
    }
    // This rank's share of each gap, read again: (gap, values).
    let mut pieces: Vec<(usize, Vec<f64>)> = Vec::new();
    let mut error: Option<AlgoError> = None;
    for (g, &(m0, m1, p0, p1)) in gaps.iter().enumerate() {
        let mut values = Vec::new();
        match source {
            PointSource::Blobs(spec) => {
                let (a, b) = (
                    p0 + (p1 - p0) * me as u64 / p as u64,
                    p0 + (p1 - p0) * (me as u64 + 1) / p as u64,
                );
                spec.points(a..b, &mut values);
            }
            PointSource::Csv(path) => {
                let read = (|| -> Result<(), AlgoError> {
                    let range = {
                        let _io = comm.runtime().enter_critical()?;
                        let file = File::open(path).map_err(|e| InputError::io(path, &e))?;
                        let len = file.metadata().map_err(|e| InputError::io(path, &e))?.len();
                        let io = |e: std::io::Error| InputError::io(path, &e);
                        // The lost members' lines, as `load_points` split the file over
                        // `base`, and this rank's part of them.
                        let start = line_aligned_range(&file, 0, len, m0, base.size())
                            .map_err(io)?
                            .0;
                        let end = line_aligned_range(&file, 0, len, m1 - 1, base.size())
                            .map_err(io)?
                            .1;
                        line_aligned_range(&file, start, end, me, p).map_err(io)?
                    };
                    let chunk = heap_allowance(comm) / 2;
                    let got = read_part(comm, path, range, chunk, &mut |bytes| {
                        let parsed = parse_csv_chunk(bytes, dim);
                        values.extend_from_slice(&parsed.values);
                        Ok(parsed.error)
                    })?;
                    if let Some((line, reason)) = got.error {
                        return Err(InputError::new(
                            path,
                            None,
                            format!(
                                "{reason} (line {} of a part read again after a loss)",
                                line + 1
                            ),
                        )
                        .into());
                    }
                    Ok(())
                })();
                if let Err(e) = read {
                    error.get_or_insert(e);
                }
            }
        }
        pieces.push((g, values));
    }
    // Every survivor learns how many points each read (and whether one failed).
    let mut counts: Vec<u64> = pieces
        .iter()
        .map(|(_, v)| (v.len() / dim.max(1)) as u64)
        .collect();
    counts.push(u64::from(error.is_some()));
    let all = comm.allgather(&counts)?;
    let row = gaps.len() + 1;
    if let Some(e) = error {
        return Err(e);
    }
    if all.chunks_exact(row).any(|r| r[gaps.len()] != 0) {
        return Err(AlgoError::BadParameter {
            name: "input",
            reason: "another rank could not read the input again after a loss".into(),
        });
    }
    // Where each piece starts, and the check that the gaps hold what they held.
    let mut starts = Vec::with_capacity(pieces.len());
    for (g, &(_, _, p0, p1)) in gaps.iter().enumerate() {
        let before: u64 = (0..me).map(|r| all[r * row + g]).sum();
        let sum: u64 = (0..p).map(|r| all[r * row + g]).sum();
        if sum != p1 - p0 {
            let what = match source {
                PointSource::Csv(path) => path.display().to_string(),
                PointSource::Blobs(_) => "the generated points".into(),
            };
            return Err(AlgoError::BadParameter {
                name: "input",
                reason: format!(
                    "{what} changed while the job ran: the lost ranks' lines hold {sum} points, \
                     not the {} they held",
                    p1 - p0
                ),
            });
        }
        starts.push(p0 + before);
    }
    // The new blocks, even, and what goes where: (first point, points, values) blocks.
    let bound = |r: usize| total * r as u64 / p as u64;
    let bounds: Vec<u64> = (0..=p).map(bound).collect();
    let owner = |x: u64| bounds.partition_point(|&b| b <= x) - 1;
    // What stays on this rank is copied into its block at once; the rest goes in one
    // all-to-all, each part sized before it is filled.
    let (lo, hi) = (bound(me), bound(me + 1));
    let mut values: SbVec<f64> = SbVec::zeroed(comm.runtime(), (hi - lo) as usize * dim)?;
    let mut filled = 0u64;
    let sources: Vec<(u64, &[f64])> = std::iter::once((held.first, held.values.as_slice()))
        .chain(
            pieces
                .iter()
                .zip(&starts)
                .map(|((_, v), &first)| (first, &v[..])),
        )
        .collect();
    // Calls `f(owner, first point, values)` for each run of `values` (from point `first`)
    // with one owner.
    let runs = |first: u64, v: &[f64], f: &mut dyn FnMut(usize, u64, &[f64])| {
        let n = (v.len() / dim.max(1)) as u64;
        let mut at = first;
        while at < first + n {
            let o = owner(at);
            let stop = bound(o + 1).min(first + n);
            f(
                o,
                at,
                &v[(at - first) as usize * dim..(stop - first) as usize * dim],
            );
            at = stop;
        }
    };
    let mut sizes = vec![0usize; p];
    for &(first, v) in &sources {
        runs(first, v, &mut |o, _, r| sizes[o] += 2 + r.len());
    }
    let mut parts: Vec<Vec<f64>> = sizes
        .iter()
        .enumerate()
        .map(|(o, &n)| Vec::with_capacity(if o == me { 0 } else { n }))
        .collect();
    {
        let out = values.as_mut_slice();
        for &(first, v) in &sources {
            runs(first, v, &mut |o, at, r| {
                if o == me {
                    let a = (at - lo) as usize * dim;
                    out[a..a + r.len()].copy_from_slice(r);
                    filled += (r.len() / dim.max(1)) as u64;
                } else {
                    parts[o].push(at as f64);
                    parts[o].push((r.len() / dim.max(1)) as f64);
                    parts[o].extend_from_slice(r);
                }
            });
        }
    }
    drop(sources);
    drop(held);
    drop(pieces);
    let got = comm.alltoallv_vecs(parts)?;
    let out = values.as_mut_slice();
    for part in got {
        let mut i = 0;
        while i + 2 <= part.len() {
            let (first, n) = (part[i] as u64, part[i + 1] as usize);
            let at = (first - lo) as usize * dim;
            out[at..at + n * dim].copy_from_slice(&part[i + 2..i + 2 + n * dim]);
            filled += n as u64;
            i += 2 + n * dim;
        }
    }
    if filled != hi - lo {
        return Err(AlgoError::Unrecoverable(format!(
            "after a loss {filled} of this rank's {} points were found",
            hi - lo
        )));
    }
    Ok(DistPoints {
        dim,
        total,
        first: lo,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_runtime::{run, Config};

    /// Point `i` of the test CSV: exact in decimal, so the file's text is known.
    fn point(i: u64) -> [f64; 3] {
        [i as f64, i as f64 * 0.5, -(i as f64) - 0.25]
    }

    /// After a loss (a communicator without the lost ranks, as after a real one), the
    /// survivors hold every point in order, in even blocks: the CSV's points as written here,
    /// and the generated ones as the generator gives them in one piece.
    #[test]
    fn survivors_take_the_lost_ranks_points_over_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("points.csv");
        let n = 1000u64;
        let mut text = String::new();
        for i in 0..n {
            let p = point(i);
            text.push_str(&format!("{},{},{}\n", p[0], p[1], p[2]));
        }
        std::fs::write(&csv, text).unwrap();
        let csv_points: Vec<f64> = (0..n).flat_map(point).collect();
        let spec = BlobsSpec::parse("blobs:777:2:3:5").unwrap();
        let mut blob_points = Vec::new();
        spec.points(0..spec.n, &mut blob_points);
        let sources = [
            (PointSource::Csv(csv), csv_points, 3usize),
            (PointSource::Blobs(spec), blob_points, 2),
        ];
        // (ranks, nodes, lost global ranks)
        let cases: &[(u32, u32, &[u32])] = &[
            (8, 4, &[2, 3]),
            (8, 4, &[0, 1, 6, 7]),
            (6, 3, &[5]),
            (5, 1, &[0, 4]),
            (3, 3, &[1]),
        ];
        for (source, want, dim) in &sources {
            for &(ranks, nodes, lost) in cases {
                let config = Config::new(ranks).nodes(nodes);
                let parts = run(&config, |rank| -> Result<_, AlgoError> {
                    let world = Comm::world(rank);
                    let held = load_points(&world, source)?;
                    let Some(survivors) = world.without(lost) else {
                        return Ok(None);
                    };
                    let got = reload_lost_points(&survivors, &world, held, source)?;
                    Ok(Some((
                        survivors.rank(),
                        survivors.size(),
                        got.first,
                        got.total,
                        got.values.as_slice().to_vec(),
                    )))
                })
                .unwrap();
                let parts: Vec<_> = parts.into_iter().flatten().collect();
                let total = (want.len() / dim) as u64;
                let mut all = Vec::new();
                for (i, (r, p, first, t, values)) in parts.iter().enumerate() {
                    assert_eq!((*r, *t), (i, total), "{source:?} {ranks}/{lost:?}");
                    assert_eq!(*first, total * i as u64 / *p as u64);
                    assert_eq!(
                        (values.len() / dim) as u64,
                        total * (i as u64 + 1) / *p as u64 - first
                    );
                    all.extend_from_slice(values);
                }
                assert!(all == *want, "{source:?} {ranks}/{lost:?}: points differ");
            }
        }
    }
}
