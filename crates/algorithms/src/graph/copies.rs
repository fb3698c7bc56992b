//! Copies of a distributed graph's parts on their buddies, so that the survivors of lost
//! processes (MPI with ULFM) rebuild the graph on the new layout from memory instead of
//! reading and parsing its source again.
//!
//! After a load every rank sends its part (its rows' out-edges) to its buddy (see
//! [`crate::survive::buddy`]) and keeps its wards' parts. After a loss each survivor gives
//! its own part and its lost wards' parts to [`rebuild`], which distributes them over the
//! survivors as a load does (the same row boundaries, the same rows; a row's targets in the
//! order of the part it came from). The cost: the graph's memory a second time (held
//! in storage-backed memory, like the graph) and one message of its part per rank after each
//! load.

use spillway_comm::Comm;
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::graph::load::{balance, Balanced};
use crate::graph::DistGraph;
use crate::survive::{buddy, wards};

/// A rank's part of a graph (its rows' out-edges), as the rank holding its copy keeps it.
pub(crate) struct Part {
    /// Its first row.
    lo: u64,
    /// Row offsets into `targets` (rows + 1 entries, from 0).
    offsets: SbVec<u64>,
    /// Edge targets, row by row.
    targets: SbVec<u32>,
}

/// The copies this rank holds of its wards' parts of a graph loaded on `base`.
pub(crate) struct Copies<'r> {
    /// The communicator the graph was loaded on (its members are the wards' numbers).
    base: Comm<'r>,
    /// (member of `base`, its part).
    wards: Vec<(usize, Part)>,
}

impl<'r> Copies<'r> {
    /// Sends this rank's part of `graph` (loaded on `comm`) to its buddy and receives its
    /// wards' parts (collective over `comm`: every rank calls it after the load).
    ///
    /// # Errors
    /// A communication error (a lost process among them), a message of the wrong length, or
    /// no memory for the copies.
    pub(crate) fn make(comm: &Comm<'r>, graph: &DistGraph) -> Result<Copies<'r>, AlgoError> {
        let copies = comm.dup();
        let me = comm.rank();
        if let Some(b) = buddy(comm, me) {
            copies.send(b, 0, graph.offsets.as_slice())?;
            copies.send(b, 1, graph.targets.as_slice())?;
        }
        let mut got = Vec::new();
        for w in wards(comm, me) {
            let rows = (graph.bounds[w + 1] - graph.bounds[w]) as usize;
            let mut offsets: SbVec<u64> = SbVec::zeroed(comm.runtime(), rows + 1)?;
            let status = copies.recv_into(w, 0, offsets.as_mut_slice())?;
            let edges = offsets.as_slice()[rows];
            let ordered = offsets.as_slice().windows(2).all(|o| o[0] <= o[1]);
            if status.bytes != 8 * (rows + 1) || offsets.as_slice()[0] != 0 || !ordered {
                return Err(bad_copy(w, "row offsets"));
            }
            let edges = usize::try_from(edges).map_err(|_| bad_copy(w, "row offsets"))?;
            let mut targets: SbVec<u32> = SbVec::zeroed(comm.runtime(), edges)?;
            let status = copies.recv_into(w, 1, targets.as_mut_slice())?;
            if status.bytes != 4 * edges {
                return Err(bad_copy(w, "edge targets"));
            }
            got.push((
                w,
                Part {
                    lo: graph.bounds[w],
                    offsets,
                    targets,
                },
            ));
        }
        Ok(Copies {
            base: comm.clone(),
            wards: got,
        })
    }

    /// After the loss of the processes `lost` (global ranks, sorted): the parts of the lost
    /// wards, taken out, or `None` if a lost member of `base` lost its copy too (its buddy is
    /// lost). The same answer on every survivor.
    pub(crate) fn lost_parts(&mut self, lost: &[u32]) -> Option<Vec<Part>> {
        let base = &self.base;
        let gone = |m: usize| {
            base.global_rank(m)
                .is_ok_and(|g| lost.binary_search(&g).is_ok())
        };
        let covered = (0..base.size())
            .filter(|&m| gone(m))
            .all(|m| buddy(base, m).is_some_and(|b| !gone(b)));
        if !covered {
            return None;
        }
        let (out, kept) = std::mem::take(&mut self.wards)
            .into_iter()
            .partition(|(w, _)| gone(*w));
        self.wards = kept;
        Some(out.into_iter().map(|(_, part)| part).collect())
    }
}

fn bad_copy(ward: usize, what: &str) -> AlgoError {
    AlgoError::Unrecoverable(format!(
        "the copy of rank {ward}'s part of the graph arrived with {what} of the wrong size"
    ))
}

/// The graph of `own` and `parts` (together every row of an `n`-vertex graph once, over the
/// members of `comm`) distributed over `comm` as [`load_graph`](crate::graph::load_graph)
/// distributes a graph read from its source: the same row boundaries (see [`balance`]),
/// each row's targets in the order of its part (collective over `comm`).
///
/// The parts are in row order already, so nothing is sorted: each member sends every other
/// the blocks of rows it holds of the other's new rows, first their degrees (a header of
/// first row and row count per block, then a degree per row), then their targets, which
/// the receiver copies straight into place.
///
/// # Errors
/// A communication error, no memory, or a row of 2^32 edges or more.
pub(crate) fn rebuild(
    comm: &Comm,
    own: DistGraph,
    parts: Vec<Part>,
) -> Result<DistGraph, AlgoError> {
    let n = own.n;
    let Balanced {
        bounds,
        total,
        mine,
    } = {
        let pieces = pieces(&own, &parts);
        balance(comm, n, None, &mut |h, width| {
            for &(lo, offsets, _) in &pieces {
                for (r, o) in offsets.windows(2).enumerate() {
                    h[((lo + r as u64) / width) as usize] += o[1] - o[0];
                }
            }
        })?
    };
    let p = comm.size();
    let me = comm.rank();
    let (lo, hi) = (bounds[me], bounds[me + 1]);
    let rows = (hi - lo) as usize;
    let too_long = || {
        AlgoError::Unrecoverable("a row of 2^32 edges or more cannot be moved after a loss".into())
    };
    // What goes to each member: degree records and targets, in the same block order.
    let mut records: Vec<Vec<u32>> = vec![Vec::new(); p];
    let mut sending: SbVec<u32> = SbVec::zeroed(
        comm.runtime(),
        own.targets.len() + parts.iter().map(|p| p.targets.len()).sum::<usize>(),
    )?;
    let mut spans = vec![0..0; p];
    {
        let pieces = pieces(&own, &parts);
        let out = sending.as_mut_slice();
        let mut at = 0usize;
        for (q, span) in spans.iter_mut().enumerate() {
            let start = at;
            for &(first, offsets, targets) in &pieces {
                let last = first + (offsets.len() - 1) as u64;
                let (a, z) = (first.max(bounds[q]), last.min(bounds[q + 1]));
                if a >= z {
                    continue;
                }
                let (ra, rz) = ((a - first) as usize, (z - first) as usize);
                let rec = &mut records[q];
                rec.push(u32::try_from(a).map_err(|_| too_long())?);
                rec.push((rz - ra) as u32);
                for o in offsets[ra..=rz].windows(2) {
                    rec.push(u32::try_from(o[1] - o[0]).map_err(|_| too_long())?);
                }
                let block = &targets[offsets[ra] as usize..offsets[rz] as usize];
                out[at..at + block.len()].copy_from_slice(block);
                at += block.len();
            }
            *span = start..at;
        }
    }
    drop(own);
    drop(parts);
    // Degrees first: the receiver's row offsets.
    let mut offsets: SbVec<u64> = SbVec::zeroed(comm.runtime(), rows + 1)?;
    // Each sender's blocks (first row, edges), in its order.
    let mut from: Vec<Vec<(u64, usize)>> = vec![Vec::new(); p];
    {
        let off = offsets.as_mut_slice();
        let blocks: Vec<(usize, &[u8])> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.is_empty())
            .map(|(q, r)| (q, bytemuck::cast_slice(r.as_slice())))
            .collect();
        let mut bad = false;
        comm.alltoallv_stream(&blocks, &mut |src, bytes| {
            let words: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
                .collect();
            let mut i = 0;
            while i + 2 <= words.len() {
                let (first, count) = (u64::from(words[i]), words[i + 1] as usize);
                let degrees = words.get(i + 2..i + 2 + count);
                match degrees {
                    Some(d) if first >= lo && first + count as u64 <= hi => {
                        let at = (first - lo) as usize;
                        let mut edges = 0usize;
                        for (k, &deg) in d.iter().enumerate() {
                            off[at + k + 1] = u64::from(deg);
                            edges += deg as usize;
                        }
                        from[src].push((first, edges));
                    }
                    _ => bad = true,
                }
                i += 2 + count;
            }
            Ok(())
        })?;
        if bad {
            return Err(AlgoError::Unrecoverable(
                "after a loss a block of rows arrived at a rank that does not own them".into(),
            ));
        }
        for i in 0..rows {
            off[i + 1] += off[i];
        }
        if off[rows] != mine {
            return Err(AlgoError::Unrecoverable(format!(
                "after a loss {} of this rank's {mine} edges were announced",
                off[rows]
            )));
        }
    }
    // Then the targets, each block copied to its rows' place.
    let mut targets: SbVec<u32> = SbVec::zeroed(comm.runtime(), mine as usize)?;
    {
        let off = offsets.as_slice();
        let t: &mut [u8] = bytemuck::cast_slice_mut(targets.as_mut_slice());
        let sent = sending.as_slice();
        let blocks: Vec<(usize, &[u8])> = spans
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .map(|(q, s)| (q, bytemuck::cast_slice(&sent[s.clone()])))
            .collect();
        let mut placed = 0usize;
        comm.alltoallv_stream(&blocks, &mut |src, bytes| {
            let mut at = 0usize;
            for &(first, edges) in &from[src] {
                let start = off[(first - lo) as usize] as usize;
                let len = 4 * edges;
                if let Some(b) = bytes.get(at..at + len) {
                    t[4 * start..4 * start + len].copy_from_slice(b);
                    placed += edges;
                }
                at += len;
            }
            Ok(())
        })?;
        if placed as u64 != mine {
            return Err(AlgoError::Unrecoverable(format!(
                "after a loss {placed} of this rank's {mine} edges arrived"
            )));
        }
    }
    Ok(DistGraph::of_member(n, total, bounds, me, offsets, targets))
}

/// The rows `own` and `parts` hold: (first row, row offsets, targets) each.
fn pieces<'a>(own: &'a DistGraph, parts: &'a [Part]) -> Vec<(u64, &'a [u64], &'a [u32])> {
    std::iter::once((own.lo, own.offsets.as_slice(), own.targets.as_slice()))
        .chain(
            parts
                .iter()
                .map(|p| (p.lo, p.offsets.as_slice(), p.targets.as_slice())),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use spillway_runtime::{run, Config};

    use super::*;
    use crate::generate::RmatSpec;
    use crate::graph::{load_graph, GraphSource};

    /// The rows of a graph part as (row, its targets sorted).
    fn rows(g: &DistGraph) -> Vec<(u64, Vec<u32>)> {
        (0..g.local_rows())
            .map(|u| {
                let mut t = g.row(u).to_vec();
                t.sort_unstable();
                (g.lo + u as u64, t)
            })
            .collect()
    }

    /// After a loss (a communicator without the lost ranks, as after a real one), the graph
    /// rebuilt from the survivors' parts and the copies equals the one the survivors read
    /// from the source again: the same boundaries and edge count, each row the same targets.
    /// Several layouts, one and two ranks lost.
    #[test]
    fn a_rebuilt_graph_equals_the_graph_read_again_over_the_survivors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        let spec = RmatSpec::parse("rmat:10:6:3").unwrap();
        let mut edges = Vec::new();
        spec.edges(0..spec.num_edges(), &mut edges);
        let text: String = edges.iter().map(|(s, d)| format!("{s}\t{d}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let source = GraphSource::EdgeList(path);
        // (ranks, nodes, lost global ranks)
        let cases: &[(u32, u32, &[u32])] =
            &[(4, 4, &[2]), (6, 3, &[1, 4]), (5, 1, &[0]), (8, 4, &[6, 7])];
        for &(ranks, nodes, lost) in cases {
            let config = Config::new(ranks).nodes(nodes);
            let out = run(&config, |rank| -> Result<_, AlgoError> {
                let comm = Comm::world(rank);
                let graph = load_graph(&comm, &source)?;
                let mut copies = Copies::make(&comm, &graph)?;
                let Some(survivors) = comm.without(lost) else {
                    return Ok(None);
                };
                let parts = copies
                    .lost_parts(lost)
                    .expect("the lost ranks' copies survive");
                let rebuilt = rebuild(&survivors, graph, parts)?;
                let again = load_graph(&survivors, &source)?;
                Ok(Some((
                    rebuilt.bounds.to_vec() == again.bounds.to_vec(),
                    rebuilt.total_edges == again.total_edges,
                    rows(&rebuilt) == rows(&again),
                    rebuilt.targets.len(),
                )))
            })
            .unwrap();
            let survivors: Vec<_> = out.into_iter().flatten().collect();
            assert_eq!(survivors.len(), (ranks as usize) - lost.len());
            for &(bounds, total, same_rows, _) in &survivors {
                assert!(
                    bounds && total && same_rows,
                    "{ranks} ranks on {nodes} nodes, lost {lost:?}"
                );
            }
            // The survivors hold every edge between them, once.
            let held: usize = survivors.iter().map(|s| s.3).sum();
            assert_eq!(held as u64, spec.num_edges());
        }
    }

    /// A rank lost together with the rank holding its copy leaves nothing to rebuild from:
    /// every survivor says so (and reads the graph again).
    #[test]
    fn a_rank_lost_with_its_buddy_leaves_no_copy() {
        let spec = RmatSpec::parse("rmat:8:4:1").unwrap();
        let source = GraphSource::Rmat(spec);
        // 4 ranks on 4 nodes: rank 2's copy is on rank 3; 3 ranks on one node: 0's on 1.
        for (ranks, nodes, lost) in [(4u32, 4u32, &[2u32, 3][..]), (3, 1, &[0, 1][..])] {
            let out = run(
                &Config::new(ranks).nodes(nodes),
                |rank| -> Result<_, AlgoError> {
                    let comm = Comm::world(rank);
                    let graph = load_graph(&comm, &source)?;
                    let mut copies = Copies::make(&comm, &graph)?;
                    Ok(comm
                        .without(lost)
                        .map(|_| copies.lost_parts(lost).is_none()))
                },
            )
            .unwrap();
            let said: Vec<bool> = out.into_iter().flatten().collect();
            assert_eq!(said.len(), (ranks as usize) - lost.len());
            assert!(
                said.iter().all(|&none| none),
                "{ranks} ranks, lost {lost:?}"
            );
        }
    }
}
