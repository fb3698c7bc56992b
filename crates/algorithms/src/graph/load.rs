//! Loading a directed graph as a 1-D row decomposition balanced by non-zeros.
//!
//! Rank `q` owns the consecutive source vertices `bounds[q] .. bounds[q + 1]` and all their
//! out-edges (the rows of the adjacency matrix), with the boundaries chosen so that every rank
//! holds about the same number of edges (BDMPI's PageRank decomposition) plus a fixed weight
//! per row, since the per-row passes of an iteration cost as much as the edges on the rank
//! that holds a power-law graph's many low-degree rows.
//!
//! Loading is parallel: every rank parses a line-aligned byte range of the file in bounded
//! chunks (or generates a range of R-MAT edges) into storage-backed memory; the nodes build one
//! histogram of sources each (local aggregation), which fixes the row boundaries; then edges
//! move to their owners in sparse exchanges of bounded rounds.

use std::path::{Path, PathBuf};

use spillway_comm::{Collectives, Comm, Max, Sum};
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::generate::RmatSpec;
use crate::io::chunks::{agree_on_error, heap_allowance, read_chunks};
use crate::io::mtx::read_mtx_edges;
use crate::io::{count_lines, parse_mtx_header, parse_snap_chunk_into, InputError};
use crate::state::{check_state, Origin};

/// Where a graph comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum GraphSource {
    /// A SNAP edge list: "src dst" per line, `#` comments; N = 1 + the largest id.
    EdgeList(PathBuf),
    /// A Matrix Market coordinate file, 1-based; entry (i, j) is the edge i -> j and
    /// N = max(rows, cols). Values are ignored; duplicate entries are parallel edges.
    MatrixMarket(PathBuf),
    /// A generated R-MAT graph.
    Rmat(RmatSpec),
}

impl GraphSource {
    /// A file source, chosen by extension: `.mtx` is Matrix Market, anything else an edge list.
    pub fn from_path(path: impl Into<PathBuf>) -> GraphSource {
        let path = path.into();
        let is_mtx = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("mtx"));
        if is_mtx {
            GraphSource::MatrixMarket(path)
        } else {
            GraphSource::EdgeList(path)
        }
    }
}

/// One rank's rows of a distributed directed graph, in compressed sparse row form, held in
/// storage-backed memory.
#[derive(Debug)]
pub struct DistGraph {
    /// Number of vertices of the whole graph.
    pub n: u64,
    /// Number of edges of the whole graph.
    pub total_edges: u64,
    /// Row boundaries of every rank (`size + 1` entries; one copy per node).
    pub bounds: std::sync::Arc<Vec<u64>>,
    /// First vertex of this rank.
    pub lo: u64,
    /// One past the last vertex of this rank.
    pub hi: u64,
    /// Row offsets into `targets` (`hi - lo + 1` entries).
    pub offsets: SbVec<u64>,
    /// Edge targets, row by row.
    pub targets: SbVec<u32>,
}

impl DistGraph {
    /// Member `me`'s part of a graph of `n` vertices and `total_edges` edges whose rows are
    /// split at `bounds`: its rows' `offsets` and `targets` (its first and last row from
    /// `bounds`).
    pub(crate) fn of_member(
        n: u64,
        total_edges: u64,
        bounds: std::sync::Arc<Vec<u64>>,
        me: usize,
        offsets: SbVec<u64>,
        targets: SbVec<u32>,
    ) -> DistGraph {
        let (lo, hi) = (bounds[me], bounds[me + 1]);
        DistGraph {
            n,
            total_edges,
            bounds,
            lo,
            hi,
            offsets,
            targets,
        }
    }

    /// The rank owning vertex `v`.
    pub fn owner(&self, v: u64) -> usize {
        self.bounds.partition_point(|&b| b <= v) - 1
    }

    /// Out-edges of local row `u` (0-based within this rank).
    pub fn row(&self, u: usize) -> &[u32] {
        let offsets = self.offsets.as_slice();
        &self.targets.as_slice()[offsets[u] as usize..offsets[u + 1] as usize]
    }

    /// Number of local rows.
    pub fn local_rows(&self) -> usize {
        (self.hi - self.lo) as usize
    }
}

/// Bytes of per-vertex state that a graph algorithm keeps (PageRank: row offsets, inverse
/// degree, ranks, contributions, next ranks, local in-edge offsets): what the loader checks
/// against the memory before allocating anything proportional to the vertex count.
pub const VERTEX_STATE_BYTES: u64 = 48;

/// Refuses a graph of `n` vertices whose state would not fit or is out of proportion with the
/// file (see [`check_state`]). `origin` names the file, the id and the line that made `n`.
fn check_vertex_memory(
    comm: &Comm,
    n: u64,
    origin: Option<(&Path, Option<u64>, String)>,
) -> Result<(), AlgoError> {
    let bytes = n.saturating_mul(VERTEX_STATE_BYTES);
    let units = format!("{n} vertices at {VERTEX_STATE_BYTES} bytes each");
    match &origin {
        Some((path, line, what)) => check_state(
            comm,
            bytes,
            &units,
            Origin::Line {
                path,
                line: *line,
                what,
            },
        ),
        None => check_state(
            comm,
            bytes,
            &units,
            Origin::Parameter {
                name: "graph",
                what: "the generated graph",
            },
        ),
    }
}

/// The largest vertex id in a rank's part of an edge list and the first line holding it,
/// followed chunk by chunk as [`read_chunks`] hands them over; [`LargestId::agree`] finds the
/// job's largest id and its line in the file, so a refusal of that id names its line.
#[derive(Debug, Default)]
pub(crate) struct LargestId {
    /// The largest id so far and its 0-based line within this rank's part.
    max: Option<(u64, u64)>,
    /// Lines of the chunks seen so far.
    lines: u64,
}

impl LargestId {
    /// Notes the edges `parsed` from `bytes` (the chunk just parsed).
    pub(crate) fn observe(&mut self, bytes: &[u8], parsed: &[(u32, u32)]) {
        let mut chunk_max: Option<(u64, usize)> = None;
        for (k, &(s, d)) in parsed.iter().enumerate() {
            let id = u64::from(s.max(d));
            if chunk_max.is_none_or(|(m, _)| id > m) {
                chunk_max = Some((id, k));
            }
        }
        if let Some((id, k)) = chunk_max {
            if self.max.is_none_or(|(m, _)| id > m) {
                self.max = Some((id, self.lines + line_of_edge(bytes, k)));
            }
        }
        self.lines += count_lines(bytes);
    }

    /// The largest id of all ranks and the 1-based line of the file that first holds it
    /// (`before`: lines of the lower ranks' parts, from [`read_chunks`]); `None` without edges.
    /// A collective.
    pub(crate) fn agree(&self, comm: &Comm, before: u64) -> Result<Option<(u64, u64)>, AlgoError> {
        let mine = self.max.map(|(id, line)| (id, before + line + 1));
        let all = comm.allgather_obj(&mine)?;
        Ok(all
            .into_iter()
            .flatten()
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1))))
    }
}

/// Loads or generates a graph and distributes its rows balanced by non-zeros plus a weight per
/// row.
///
/// # Semantics
/// Ranks read their part of the file in bounded chunks (inside the node's critical section,
/// one reader per node at a time) or generate their edges, straight into storage-backed
/// memory; edges then move to their owners in rounds whose size follows the memory budget,
/// so no rank holds more than a round on its heap.
///
/// # Errors
/// [`AlgoError::Input`] with file, line and reason for unreadable or malformed input (every
/// rank returns the same error), including a vertex id so large that the graph's vertex state
/// would not fit (checked before anything that large is allocated); a communication error.
pub fn load_graph(comm: &Comm, source: &GraphSource) -> Result<DistGraph, AlgoError> {
    let chunk = heap_allowance(comm) / 2;
    let (edges, n, origin) = match source {
        GraphSource::EdgeList(path) => {
            let mut stored: SbVec<[u32; 2]> = SbVec::with_capacity(comm.runtime(), 0)?;
            let mut largest = LargestId::default();
            let mut parsed = Vec::new();
            let (read, before) = read_chunks(comm, path, 0, chunk, |bytes| {
                parsed.clear();
                let error = parse_snap_chunk_into(bytes, &mut parsed);
                largest.observe(bytes, &parsed);
                append_pairs(&mut stored, &parsed)?;
                Ok(error)
            })?;
            agree_on_error(comm, path, read.error, before)?;
            let max = largest.agree(comm, before)?;
            let Some((id, line)) = max else {
                return Err(InputError::new(path, None, "no edges").into());
            };
            let what = format!("vertex id {id}");
            (stored, id + 1, Some((path.as_path(), Some(line), what)))
        }
        GraphSource::MatrixMarket(path) => {
            let mut stored: SbVec<[u32; 2]> = SbVec::with_capacity(comm.runtime(), 0)?;
            let n = read_mtx_edges(comm, path, |edges| append_pairs(&mut stored, edges))?;
            let header = parse_mtx_header(path)?;
            let what = format!("the size line's {} x {} matrix", header.rows, header.cols);
            (
                stored,
                n,
                Some((path.as_path(), Some(header.header_lines), what)),
            )
        }
        GraphSource::Rmat(spec) => {
            let e = spec.num_edges();
            let (p, r) = (comm.size() as u64, comm.rank() as u64);
            let range = e * r / p..e * (r + 1) / p;
            let mut stored: SbVec<[u32; 2]> =
                SbVec::zeroed(comm.runtime(), (range.end - range.start) as usize)?;
            // A piece of at most `chunk` bytes, and no more than this rank's edges.
            let piece = ((chunk / 8).max(1) as u64).min(range.end - range.start);
            let mut buf = Vec::with_capacity(piece as usize);
            let mut at = range.start;
            while at < range.end {
                let end = (at + piece).min(range.end);
                buf.clear();
                spec.edges(at..end, &mut buf);
                let base = (at - range.start) as usize;
                for (o, &(s, d)) in stored
                    .range_mut(base..base + buf.len())
                    .iter_mut()
                    .zip(&buf)
                {
                    *o = [s, d];
                }
                at = end;
            }
            (stored, spec.num_vertices(), None)
        }
    };
    distribute(comm, edges, n, origin)
}

/// Appends `(src, dst)` pairs to storage-backed edges.
fn append_pairs(stored: &mut SbVec<[u32; 2]>, pairs: &[(u32, u32)]) -> Result<(), AlgoError> {
    let start = stored.len();
    stored.resize(start + pairs.len())?;
    for (o, &(s, d)) in stored
        .range_mut(start..start + pairs.len())
        .iter_mut()
        .zip(pairs)
    {
        *o = [s, d];
    }
    Ok(())
}

/// The 0-based line (within `bytes`) of the `k`-th edge that `parse_snap_chunk` returned.
fn line_of_edge(bytes: &[u8], k: usize) -> u64 {
    let mut seen = 0usize;
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        if seen == k {
            return index as u64;
        }
        seen += 1;
    }
    0
}

/// The weight of a row against an edge when rows are balanced: an iteration over the graph
/// (PageRank's) streams about eight per-row arrays of 4-8 bytes for every row, where an edge
/// costs one index and one gathered value. Balancing edges alone left the rank holding the
/// many low-degree rows of a power-law graph 1.5x busier than the others (R-MAT scale 20 at 2
/// ranks); with this weight PageRank's iteration time at 2 ranks fell by about a fifth.
pub const ROW_WEIGHT: u64 = 8;

/// Row boundaries of a graph over the members of a communicator (see [`balance`]).
pub(crate) struct Balanced {
    /// Every member's first row, then `n` (one copy per node).
    pub(crate) bounds: std::sync::Arc<Vec<u64>>,
    /// Edges of the whole graph.
    pub(crate) total: u64,
    /// Edges of this member's rows.
    pub(crate) mine: u64,
}

/// Row boundaries of an `n`-vertex graph balanced by edges plus [`ROW_WEIGHT`] per row
/// (collective): `count(h, width)` adds this member's edges to `h`, the edge count of each
/// bucket of `width` rows by source. The boundaries depend only on the whole graph's counts,
/// not on which member holds which edges.
pub(crate) fn balance(
    comm: &Comm,
    n: u64,
    origin: Option<(&Path, Option<u64>, String)>,
    count: &mut dyn FnMut(&mut [u64], u64),
) -> Result<Balanced, AlgoError> {
    let p = comm.size();
    // At most 2^18 buckets (2 MiB per node, 64 per rank even at 4096 ranks): the same with
    // and without a memory budget, so that the partition (and the results) do not depend on it.
    let buckets = n.clamp(1, 1 << 18);
    let width = n.div_ceil(buckets);
    let buckets = n.div_ceil(width);
    // One histogram per node, whatever the number of ranks.
    let hist = comm.aggregate(0u64, buckets as usize, Sum, &mut |h| count(h, width))?;
    let total: u64 = hist.iter().sum();
    // A bucket's work: its edges plus ROW_WEIGHT per vertex (its rows, edges or not).
    let cost = |b: usize| hist[b] + ROW_WEIGHT * width.min(n - b as u64 * width);
    let total_cost: u64 = (0..hist.len()).map(cost).sum();
    let mut bounds = vec![0u64; p + 1];
    bounds[p] = n;
    let mut cum = 0u64;
    let mut b = 0usize;
    for (q, bound) in bounds.iter_mut().enumerate().take(p).skip(1) {
        let target = total_cost * q as u64 / p as u64;
        while cum < target && b < hist.len() {
            cum += cost(b);
            b += 1;
        }
        *bound = (b as u64 * width).min(n);
    }
    let me = comm.rank();
    let (lo, hi) = (bounds[me], bounds[me + 1]);
    check_vertex_memory(comm, n, origin)?;
    // Edges this rank will own: the histogram buckets of its rows.
    let mine: u64 = (lo / width..hi.div_ceil(width).min(buckets))
        .map(|bk| hist[bk as usize])
        .sum();
    drop(hist);
    // Every rank computed the same boundaries: the node keeps one copy (a fresh key per load).
    let key = comm.dup().context_id();
    let bounds = comm.runtime().node_table().cached(key, || bounds);
    Ok(Balanced {
        bounds,
        total,
        mine,
    })
}

/// Chooses row boundaries balanced by edges plus [`ROW_WEIGHT`] per row and moves edges to
/// their owners.
fn distribute(
    comm: &Comm,
    edges: SbVec<[u32; 2]>,
    n: u64,
    origin: Option<(&Path, Option<u64>, String)>,
) -> Result<DistGraph, AlgoError> {
    let p = comm.size();
    let Balanced {
        bounds,
        total,
        mine,
    } = balance(comm, n, origin, &mut |h, width| {
        for &[s, _] in edges.as_slice() {
            h[(u64::from(s) / width) as usize] += 1;
        }
    })?;
    let me = comm.rank();
    let (lo, hi) = (bounds[me], bounds[me + 1]);
    let owner = |v: u64| bounds.partition_point(|&x| x <= v) - 1;
    let round = (heap_allowance(comm) / 32).max(1024);
    let rounds = comm.allreduce(&[edges.len().div_ceil(round) as u64], Max)?[0] as usize;
    let mut staging: SbVec<[u32; 2]> = SbVec::zeroed(comm.runtime(), mine as usize)?;
    let mut filled = 0usize;
    // The round's edges sorted by owner, in storage-backed memory: a rank blocked in the
    // exchange holds its outgoing edges there, not on its heap.
    let mut send: SbVec<[u32; 2]> = SbVec::with_capacity(comm.runtime(), round.min(edges.len()))?;
    for r in 0..rounds {
        let mut index: Vec<(usize, usize, usize)> = Vec::new();
        {
            let a = (r * round).min(edges.len());
            let z = ((r + 1) * round).min(edges.len());
            // Group the round's edges by owner: a counting sort (stable, so every owner gets
            // its edges in input order), two passes over the round.
            let round_edges = edges.range(a..z);
            let owners: Vec<u32> = round_edges
                .iter()
                .map(|e| owner(u64::from(e[0])) as u32)
                .collect();
            let mut counts = vec![0usize; p];
            for &o in &owners {
                counts[o as usize] += 1;
            }
            let mut next = vec![0usize; p];
            let mut start = 0;
            for q in 0..p {
                next[q] = start;
                if counts[q] > 0 {
                    index.push((q, start, counts[q]));
                }
                start += counts[q];
            }
            send.resize(round_edges.len())?;
            let out = send.as_mut_slice();
            for (e, &o) in round_edges.iter().zip(&owners) {
                let at = &mut next[o as usize];
                out[*at] = *e;
                *at += 1;
            }
        }
        let received = {
            let out = send.as_slice();
            let blocks: Vec<(usize, &[[u32; 2]])> = index
                .iter()
                .map(|&(q, start, len)| (q, &out[start..start + len]))
                .collect();
            comm.exchange(&blocks)?.0
        };
        if filled + received.len() > staging.len() {
            return Err(AlgoError::Comm(spillway_comm::Error::InvalidArgument(
                "more edges arrived than the histogram announced",
            )));
        }
        staging
            .range_mut(filled..filled + received.len())
            .copy_from_slice(&received);
        filled += received.len();
    }
    drop(send);
    drop(edges);
    let rows = (hi - lo) as usize;
    let mut offsets: SbVec<u64> = SbVec::zeroed(comm.runtime(), rows + 1)?;
    {
        let off = offsets.as_mut_slice();
        for &[s, _] in &staging.as_slice()[..filled] {
            off[(u64::from(s) - lo) as usize + 1] += 1;
        }
        for i in 0..rows {
            off[i + 1] += off[i];
        }
    }
    let mut targets: SbVec<u32> = SbVec::zeroed(comm.runtime(), filled)?;
    {
        let mut fill: SbVec<u64> = SbVec::from_slice(comm.runtime(), &offsets.as_slice()[..rows])?;
        let fill = fill.as_mut_slice();
        let t = targets.as_mut_slice();
        for &[s, d] in &staging.as_slice()[..filled] {
            let row = (u64::from(s) - lo) as usize;
            t[fill[row] as usize] = d;
            fill[row] += 1;
        }
    }
    Ok(DistGraph::of_member(n, total, bounds, me, offsets, targets))
}
