//! Loading dense points, split over the ranks in contiguous blocks of rows.

use std::borrow::Cow;
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

/// This rank's block of a distributed point set, and after a loss the parts of the lost
/// ranks' blocks it took over (see [`reload_lost_points`]).
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

/// After ranks were lost: this rank's block of the points over `comm`, the survivors of
/// `base`, on which `held` was this rank's block as [`load_points`] read it (a collective
/// over `comm`). The blocks the
/// survivors hold stay in memory; only the lost ranks' parts of `source` are read again
/// (the lines `load_points` gave them over `base`, each part split over the survivors), and
/// each survivor keeps its block and appends its parts (see [`DistPoints::more`]): nothing
/// moves, and the survivors' shares stay even. `held` is split as `load_points` splits.
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
    debug_assert!(
        held.more.is_empty(),
        "points split as load_points splits them"
    );
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
    // Nothing moves: each survivor keeps its block and appends the parts it read. The
    // survivors' shares stay even (equal blocks plus equal parts of each gap), and what a
    // recovery costs is reading the lost points, not moving every point to new blocks.
    let mut values = held.values;
    let mut more = Vec::with_capacity(pieces.len());
    for ((_, v), &first) in pieces.iter().zip(&starts) {
        values.extend_from_slice(v)?;
        more.push((first, (v.len() / dim.max(1)) as u64));
    }
    Ok(DistPoints {
        dim,
        total,
        first: held.first,
        values,
        more,
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

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_runtime::{run, Config};

    /// Point `i` of the test CSV: exact in decimal, so the file's text is known.
    fn point(i: u64) -> [f64; 3] {
        [i as f64, i as f64 * 0.5, -(i as f64) - 0.25]
    }

    /// After a loss (a communicator without the lost ranks, as after a real one), each
    /// survivor keeps its block as loaded and holds an even share of the lost ranks' points,
    /// every point once and as written (the CSV's points as written here, the generated ones
    /// as the generator gives them in one piece); `in_point_order` puts per-point values in
    /// point order, in even contiguous blocks in rank order.
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
            let total = (want.len() / dim) as u64;
            for &(ranks, nodes, lost) in cases {
                let config = Config::new(ranks).nodes(nodes);
                let parts = run(&config, |rank| -> Result<_, AlgoError> {
                    let world = Comm::world(rank);
                    let held = load_points(&world, source)?;
                    let block = (held.first, held.values.as_slice().to_vec());
                    let Some(survivors) = world.without(lost) else {
                        return Ok(None);
                    };
                    let got = reload_lost_points(&survivors, &world, held, source)?;
                    // Each point's global index, put in point order.
                    let index: Vec<u64> = got.runs().flat_map(|(f, n)| f..f + n).collect();
                    // Every held point is found where it is, no other point at all.
                    let mut found = 0;
                    for g in 0..got.total {
                        if let Some(i) = got.local_index(g) {
                            assert_eq!(index[i], g);
                            found += 1;
                        }
                    }
                    assert_eq!(found, index.len());
                    let ordered = in_point_order(&survivors, &got, &index)?.into_owned();
                    Ok(Some((
                        survivors.size(),
                        block,
                        got.first,
                        got.total,
                        got.more.clone(),
                        got.values.as_slice().to_vec(),
                        ordered,
                    )))
                })
                .unwrap();
                let parts: Vec<_> = parts.into_iter().flatten().collect();
                let case = format!("{source:?} {ranks}/{lost:?}");
                let gaps = parts[0].4.len();
                let mut seen = vec![false; total as usize];
                let mut in_order = Vec::new();
                for (i, (p, block, first, t, more, values, ordered)) in parts.iter().enumerate() {
                    assert_eq!((*t, more.len()), (total, gaps), "{case}");
                    // The block as loaded stays, first.
                    assert_eq!(*first, block.0, "{case}");
                    assert_eq!(values[..block.1.len()], block.1[..], "{case}");
                    // Every point held is the point of its index, held once.
                    let runs = std::iter::once((*first, (block.1.len() / dim) as u64))
                        .chain(more.iter().copied());
                    let mut at = 0usize;
                    for (f, n) in runs {
                        for g in f..f + n {
                            assert!(!seen[g as usize], "{case}: point {g} held twice");
                            seen[g as usize] = true;
                            let (x, y) = (at * dim, g as usize * dim);
                            assert_eq!(values[x..x + dim], want[y..y + dim], "{case}: point {g}");
                            at += 1;
                        }
                    }
                    assert_eq!(at * dim, values.len(), "{case}");
                    // Even shares: a block of the load plus a share of each gap (the
                    // CSV's split by bytes, its lines of 9 to 17 bytes).
                    let even = total as f64 / *p as f64;
                    let slack = match source {
                        PointSource::Csv(_) => 0.25 * even,
                        PointSource::Blobs(_) => 2.0 + gaps as f64,
                    };
                    assert!(
                        (at as f64 - even).abs() <= slack,
                        "{case}: rank {i} holds {at} points of {total}"
                    );
                    assert_eq!(
                        ordered.len() as u64,
                        total * (i as u64 + 1) / *p as u64 - total * i as u64 / *p as u64,
                        "{case}"
                    );
                    in_order.extend_from_slice(ordered);
                }
                assert!(seen.iter().all(|&s| s), "{case}: points missing");
                assert!(in_order == (0..total).collect::<Vec<_>>(), "{case}: order");
            }
        }
    }
}
