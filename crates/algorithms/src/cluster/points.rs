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

/// Copies of the ranks' blocks of points, each block spread in even pieces over the other
/// nodes (MPI processes): the piece for a node goes to its rank with the same index among its
/// node's ranks (modulo that node's ranks), so that after the loss of one node's ranks the
/// survivors take its points over from memory: with as many ranks on every node, each
/// survivor takes one piece of the same size, the shares stay even, and nothing is read or
/// moved. The cost: the points' memory a second time (storage-backed, like the points) and
/// one message per rank and other node after each load.
pub(crate) struct PointCopies<'r> {
    /// The communicator the points were loaded on.
    base: Comm<'r>,
    /// (member of `base` whose block, first point of the piece, its values).
    held: Vec<(usize, u64, SbVec<f64>)>,
}

/// The members of `base` on each node, nodes in order.
fn by_node(base: &Comm) -> Vec<(u32, Vec<usize>)> {
    let layout = base.runtime().layout();
    let mut nodes: Vec<(u32, Vec<usize>)> = Vec::new();
    for m in 0..base.size() {
        let node = layout.node_of(base.global_rank(m).expect("a member"));
        match nodes.iter_mut().find(|(n, _)| *n == node) {
            Some((_, members)) => members.push(m),
            None => nodes.push((node, vec![m])),
        }
    }
    nodes.sort_unstable_by_key(|(n, _)| *n);
    nodes
}

/// The members that hold pieces of member `r`'s block (`nodes` from [`by_node`]): on every
/// other node, in node order, the member with `r`'s index among its node's members, modulo
/// that node's members.
fn holders(nodes: &[(u32, Vec<usize>)], r: usize) -> Vec<usize> {
    let Some((home, j)) = nodes
        .iter()
        .enumerate()
        .find_map(|(k, (_, ms))| ms.iter().position(|&m| m == r).map(|j| (k, j)))
    else {
        return Vec::new();
    };
    nodes
        .iter()
        .enumerate()
        .filter(|&(k, _)| k != home)
        .map(|(_, (_, ms))| ms[j % ms.len()])
        .collect()
}

/// Piece `i` of `of` pieces of a block of `len` points from `first`: (first point, points).
fn piece(first: u64, len: u64, i: usize, of: usize) -> (u64, u64) {
    let at = |j: usize| first + len * j as u64 / of as u64;
    (at(i), at(i + 1) - at(i))
}

impl<'r> PointCopies<'r> {
    /// Sends the pieces of this rank's block (of `points`, split as [`load_points`] splits
    /// them over `comm`) to the ranks of the other nodes and receives its pieces of theirs
    /// (collective over `comm`).
    ///
    /// # Errors
    /// A communication error (a lost process among them), a piece of the wrong length, or no
    /// memory for the copies.
    pub(crate) fn make(comm: &Comm<'r>, points: &DistPoints) -> Result<PointCopies<'r>, AlgoError> {
        debug_assert!(
            points.more.is_empty(),
            "points split as load_points splits them"
        );
        let copies = comm.dup();
        let (me, dim) = (comm.rank(), points.dim);
        let blocks: Vec<u64> = comm.allgather(&[points.first, points.len() as u64])?;
        let block = |m: usize| (blocks[2 * m], blocks[2 * m + 1]);
        let nodes = by_node(comm);
        let mine = holders(&nodes, me);
        let values = points.values.as_slice();
        for (i, &h) in mine.iter().enumerate() {
            let (first, n) = piece(points.first, points.len() as u64, i, mine.len());
            let a = (first - points.first) as usize * dim;
            copies.send(h, 0, &values[a..a + n as usize * dim])?;
        }
        let mut held = Vec::new();
        for r in (0..comm.size()).filter(|&r| r != me) {
            let theirs = holders(&nodes, r);
            let Some(i) = theirs.iter().position(|&h| h == me) else {
                continue;
            };
            let (f, len) = block(r);
            let (first, n) = piece(f, len, i, theirs.len());
            let mut got: SbVec<f64> = SbVec::zeroed(comm.runtime(), n as usize * dim)?;
            let status = copies.recv_into(r, 0, got.as_mut_slice())?;
            if status.bytes != 8 * n as usize * dim {
                return Err(AlgoError::Unrecoverable(format!(
                    "the copy of a piece of rank {r}'s points arrived with {} bytes, not {}",
                    status.bytes,
                    8 * n as usize * dim
                )));
            }
            held.push((r, first, got));
        }
        Ok(PointCopies {
            base: comm.clone(),
            held,
        })
    }

    /// After the loss of the processes `lost` (global ranks, sorted): this rank's pieces of
    /// the lost members' blocks, taken out, in member order (first point, values), or `None`
    /// unless the survivors hold every piece of every lost block (the lost ranks were whole
    /// nodes' ranks, and no lost rank held a piece of another). The same answer on every
    /// survivor.
    pub(crate) fn lost_pieces(&mut self, lost: &[u32]) -> Option<Vec<(u64, SbVec<f64>)>> {
        let base = &self.base;
        let gone = |m: usize| {
            base.global_rank(m)
                .is_ok_and(|g| lost.binary_search(&g).is_ok())
        };
        let nodes = by_node(base);
        // Every node all lost or all kept, and no lost rank's piece on a lost rank.
        let whole = nodes
            .iter()
            .all(|(_, ms)| ms.iter().all(|&m| gone(m)) || ms.iter().all(|&m| !gone(m)));
        let covered = whole
            && (0..base.size())
                .filter(|&r| gone(r))
                .all(|r| holders(&nodes, r).iter().all(|&h| !gone(h)));
        if !covered {
            return None;
        }
        let (out, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(r, ..)| gone(*r));
        self.held = kept;
        Some(out.into_iter().map(|(_, first, v)| (first, v)).collect())
    }
}

impl DistPoints {
    /// This rank's points with `pieces` (first point, values) appended as parts taken over
    /// (see [`DistPoints::more`]; an empty part if there are none, so that `more` is empty
    /// on no survivor).
    ///
    /// # Errors
    /// No memory for the longer values.
    pub(crate) fn take_over(
        mut self,
        pieces: Vec<(u64, SbVec<f64>)>,
    ) -> Result<DistPoints, AlgoError> {
        if pieces.is_empty() {
            self.more.push((0, 0));
        }
        for (first, v) in pieces {
            self.values.extend_from_slice(v.as_slice())?;
            self.more.push((first, (v.len() / self.dim.max(1)) as u64));
        }
        Ok(self)
    }
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

    /// The copies cover the loss of one node's ranks: the survivors take the lost blocks over,
    /// every point once and as generated, the shares even when the nodes have as many ranks;
    /// ranks of two nodes, or part of a node, lost: no survivor takes anything over (the same
    /// answer on all).
    #[test]
    fn copies_of_the_points_cover_the_loss_of_one_node() {
        let spec = BlobsSpec::parse("blobs:1003:3:4:9").unwrap();
        let mut want = Vec::new();
        spec.points(0..spec.n, &mut want);
        let source = PointSource::Blobs(spec);
        // (ranks, nodes, lost global ranks, covered)
        let cases: &[(u32, u32, &[u32], bool)] = &[
            (8, 4, &[2, 3], true),
            (8, 4, &[0, 1], true),
            (6, 3, &[4, 5], true),
            (6, 6, &[5], true),
            (9, 3, &[3, 4, 5], true),
            (8, 4, &[2, 3, 6, 7], false),
            (8, 4, &[3], false),
            (4, 1, &[2, 3], false),
            // Nodes of 3 and 2 ranks: covered, one survivor takes nothing over.
            (5, 2, &[3, 4], true),
        ];
        for &(ranks, nodes, lost, covered) in cases {
            let case = format!("{ranks} ranks, {nodes} nodes, lost {lost:?}");
            let config = Config::new(ranks).nodes(nodes);
            let parts = run(&config, |rank| -> Result<_, AlgoError> {
                let world = Comm::world(rank);
                let points = load_points(&world, &source)?;
                let mut copies = PointCopies::make(&world, &points)?;
                let Some(survivors) = world.without(lost) else {
                    return Ok(None);
                };
                let Some(pieces) = copies.lost_pieces(lost) else {
                    return Ok(Some((survivors.size(), None)));
                };
                let got = points.take_over(pieces)?;
                let runs: Vec<(u64, u64)> = got.runs().collect();
                Ok(Some((
                    survivors.size(),
                    Some((runs, got.values.as_slice().to_vec())),
                )))
            })
            .unwrap();
            let parts: Vec<_> = parts.into_iter().flatten().collect();
            assert!(
                parts.iter().all(|(_, got)| got.is_some() == covered),
                "{case}: covered on some survivors only, or not as expected"
            );
            if !covered {
                continue;
            }
            let (dim, total) = (spec.d, spec.n);
            let mut seen = vec![false; total as usize];
            for (p, got) in &parts {
                let (runs, values) = got.as_ref().unwrap();
                assert!(runs.len() >= 2, "{case}: parts taken over marked");
                let mut at = 0usize;
                for &(f, n) in runs {
                    for g in f..f + n {
                        assert!(!seen[g as usize], "{case}: point {g} twice");
                        seen[g as usize] = true;
                        let (x, y) = (at * dim, g as usize * dim);
                        assert_eq!(values[x..x + dim], want[y..y + dim], "{case}: point {g}");
                        at += 1;
                    }
                }
                let even = total as f64 / *p as f64;
                assert!(
                    ranks % nodes != 0 || (at as f64 - even).abs() <= 1.0 + lost.len() as f64,
                    "{case}: {at} points on one survivor of {p}"
                );
            }
            assert!(seen.iter().all(|&s| s), "{case}: points missing");
        }
    }
}
