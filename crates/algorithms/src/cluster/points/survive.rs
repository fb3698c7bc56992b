//! After processes were lost (MPI with ULFM): the survivors take the lost ranks' points over,
//! from copies made after the load ([`PointCopies`]) or by reading their part of the input
//! again ([`reload_lost_points`]), each appending its share to its block (see
//! [`DistPoints::more`]).

use std::fs::File;

use spillway_comm::{Collectives, Comm};
use spillway_runtime::SbVec;

use super::{DistPoints, PointSource};
use crate::error::AlgoError;
use crate::io::chunks::{heap_allowance, read_part};
use crate::io::line_aligned_range;
use crate::io::{parse_csv_chunk, InputError};

/// After ranks were lost: this rank's block of the points over `comm`, the survivors of
/// `base`, on which `held` was this rank's block as [`load_points`](super::load_points) read it (a collective
/// over `comm`). The blocks the
/// survivors hold stay in memory; only the lost ranks' parts of `source` are read again
/// (the lines `load_points` gave them over `base`, each part split over the survivors), and
/// each survivor keeps its block and appends its parts (see [`DistPoints::more`]): nothing
/// moves, and the survivors' shares stay even. `held` is split as `load_points` splits.
///
/// # Errors
/// As [`load_points`](super::load_points); [`AlgoError::Input`] if the lost parts no longer hold the points
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
    /// Sends the pieces of this rank's block (of `points`, split as [`load_points`](super::load_points) splits
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::points::{in_point_order, load_points};
    use crate::generate::BlobsSpec;
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
