//! Loading a directed graph as a 1-D row decomposition balanced by non-zeros.
//!
//! Rank `q` owns the consecutive source vertices `bounds[q] .. bounds[q + 1]` and all their
//! out-edges (the rows of the adjacency matrix), with the boundaries chosen so that every rank
//! holds about the same number of edges (BDMPI's PageRank decomposition).
//!
//! Loading is parallel: every rank parses a line-aligned byte range of the file (or generates a
//! range of R-MAT edges), then edges move to their owners in one all-to-all.

use std::fs::File;
use std::path::{Path, PathBuf};

use spillway_comm::{Collectives, Comm, Max, Sum};
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::generate::RmatSpec;
use crate::input::{
    count_lines, line_aligned_range, parse_mtx_chunk, parse_mtx_header, parse_snap_chunk,
    read_range, InputError,
};

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
    /// Row boundaries of every rank (`size + 1` entries).
    pub bounds: Vec<u64>,
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

/// Fails on every rank if any rank could not read its part (the lowest rank's error wins).
fn agree_on_read_error(comm: &Comm, local: Option<AlgoError>) -> Result<(), AlgoError> {
    let mine = local.as_ref().map(|e| e.to_string());
    let all = comm.allgather_obj(&mine)?;
    match (local, all.into_iter().flatten().next()) {
        (Some(e), _) => Err(e),
        (None, Some(first)) => Err(AlgoError::BadParameter {
            name: "input",
            reason: first,
        }),
        (None, None) => Ok(()),
    }
}

/// Agrees on the first input error of all ranks (by line), so every rank fails the same way.
pub(crate) fn agree_on_error(
    comm: &Comm,
    path: &Path,
    local: Option<(u64, String)>,
    line_base: u64,
) -> Result<(), AlgoError> {
    let mine = local.map(|(i, reason)| (line_base + i + 1, reason));
    let all = comm.allgather_obj(&mine)?;
    match all.into_iter().flatten().min_by_key(|(line, _)| *line) {
        Some((line, reason)) => Err(InputError::new(path, Some(line), reason).into()),
        None => Ok(()),
    }
}

/// Reads this rank's line-aligned part of `[data_start, len)` of the file. Only file I/O: call
/// it inside the node's critical section (see [`read_and_parse`]).
fn read_my_bytes(comm: &Comm, path: &Path, data_start: u64) -> Result<Vec<u8>, AlgoError> {
    let file = File::open(path).map_err(|e| InputError::io(path, &e))?;
    let len = file.metadata().map_err(|e| InputError::io(path, &e))?.len();
    let (start, end) =
        line_aligned_range(&file, data_start.min(len), len, comm.rank(), comm.size())
            .map_err(|e| InputError::io(path, &e))?;
    Ok(read_range(&file, start, end).map_err(|e| InputError::io(path, &e))?)
}

/// Number of lines in the chunks of lower ranks (a collective).
fn lines_before(comm: &Comm, lines: u64) -> Result<u64, AlgoError> {
    Ok(comm.exscan(&[lines], Sum)?.map_or(0, |v| v[0]))
}

/// Reads this rank's part of `[data_start, len)` inside the node's critical section (one reader
/// per node at a time) and parses it outside; then every rank agrees on read errors. Returns
/// the parsed chunk and the number of lines of lower ranks' chunks. A rank whose read failed
/// still takes part in the collectives, with `empty` as its chunk.
pub(crate) fn read_and_parse<C>(
    comm: &Comm,
    path: &Path,
    data_start: u64,
    empty: C,
    parse: impl FnOnce(&[u8]) -> C,
) -> Result<(C, u64), AlgoError> {
    let bytes = {
        let _io = comm.runtime().enter_critical()?;
        read_my_bytes(comm, path, data_start)
    };
    let (chunk, lines, read_error) = match bytes {
        Ok(b) => (parse(&b), count_lines(&b), None),
        Err(e) => (empty, 0, Some(e)),
    };
    let before = lines_before(comm, lines)?;
    agree_on_read_error(comm, read_error)?;
    Ok((chunk, before))
}

/// Edges moved per all-to-all round while distributing (bounds heap use per rank).
const ROUND_EDGES: usize = 1 << 20;

/// Copies parsed edges into storage-backed memory.
fn store_edges(comm: &Comm, edges: &[(u32, u32)]) -> Result<SbVec<[u32; 2]>, AlgoError> {
    let mut out = SbVec::zeroed(comm.runtime(), edges.len())?;
    for (o, &(s, d)) in out.as_mut_slice().iter_mut().zip(edges) {
        *o = [s, d];
    }
    Ok(out)
}

/// Loads or generates a graph and distributes its rows balanced by non-zeros.
///
/// # Semantics
/// Ranks read (inside the node's critical section, one reader per node at a time) or generate
/// their part straight into storage-backed memory; edges then move to their owners in rounds of
/// at most 2^20 edges per rank, so no rank materialises more than a round on its heap.
///
/// # Errors
/// [`AlgoError::Input`] with file, line and reason for unreadable or malformed input (every
/// rank returns the same error), or a communication error.
pub fn load_graph(comm: &Comm, source: &GraphSource) -> Result<DistGraph, AlgoError> {
    let (edges, n) = match source {
        GraphSource::EdgeList(path) => {
            let (chunk, before) =
                read_and_parse(comm, path, 0, Default::default(), parse_snap_chunk)?;
            agree_on_error(comm, path, chunk.error, before)?;
            let local_max = chunk
                .edges
                .iter()
                .map(|&(s, d)| u64::from(s.max(d)) + 1)
                .max()
                .unwrap_or(0);
            let stored = store_edges(comm, &chunk.edges)?;
            drop(chunk.edges);
            let n = comm.allreduce(&[local_max], Max)?[0];
            if n == 0 {
                return Err(InputError::new(path, None, "no edges").into());
            }
            (stored, n)
        }
        GraphSource::MatrixMarket(path) => {
            let header = parse_mtx_header(path)?;
            let (chunk, before) =
                read_and_parse(comm, path, header.data_start, Default::default(), |b| {
                    parse_mtx_chunk(b, &header)
                })?;
            agree_on_error(comm, path, chunk.error, header.header_lines + before)?;
            let stored = store_edges(comm, &chunk.edges)?;
            let entries = comm.allreduce(&[chunk.entries], Sum)?[0];
            drop(chunk.edges);
            if entries != header.nnz {
                return Err(InputError::new(
                    path,
                    None,
                    format!(
                        "the size line announces {} entries, found {entries}",
                        header.nnz
                    ),
                )
                .into());
            }
            let n = header.rows.max(header.cols);
            if n == 0 {
                return Err(InputError::new(path, None, "the matrix has no rows").into());
            }
            (stored, n)
        }
        GraphSource::Rmat(spec) => {
            let e = spec.num_edges();
            let (p, r) = (comm.size() as u64, comm.rank() as u64);
            let range = e * r / p..e * (r + 1) / p;
            let mut stored: SbVec<[u32; 2]> =
                SbVec::zeroed(comm.runtime(), (range.end - range.start) as usize)?;
            let mut buf = Vec::with_capacity(ROUND_EDGES);
            let out = stored.as_mut_slice();
            let mut at = range.start;
            while at < range.end {
                let end = (at + ROUND_EDGES as u64).min(range.end);
                buf.clear();
                spec.edges(at..end, &mut buf);
                let base = (at - range.start) as usize;
                for (o, &(s, d)) in out[base..].iter_mut().zip(&buf) {
                    *o = [s, d];
                }
                at = end;
            }
            (stored, spec.num_vertices())
        }
    };
    distribute(comm, edges, n)
}

/// Chooses row boundaries balanced by edge count and moves edges to their owners.
fn distribute(comm: &Comm, edges: SbVec<[u32; 2]>, n: u64) -> Result<DistGraph, AlgoError> {
    let p = comm.size();
    let buckets = n.min((256 * p as u64).max(4096)).min(1 << 20);
    let width = n.div_ceil(buckets);
    let mut hist = vec![0u64; buckets as usize];
    for &[s, _] in edges.as_slice() {
        hist[(u64::from(s) / width) as usize] += 1;
    }
    let hist = comm.allreduce(&hist, Sum)?;
    let total: u64 = hist.iter().sum();
    let mut bounds = vec![0u64; p + 1];
    bounds[p] = n;
    let mut cum = 0u64;
    let mut b = 0usize;
    for (q, bound) in bounds.iter_mut().enumerate().take(p).skip(1) {
        let target = total * q as u64 / p as u64;
        while cum < target && b < hist.len() {
            cum += hist[b];
            b += 1;
        }
        *bound = (b as u64 * width).min(n);
    }
    let me = comm.rank();
    let (lo, hi) = (bounds[me], bounds[me + 1]);
    // Edges this rank will own: the histogram buckets of its rows.
    let mine: u64 = (lo / width..hi.div_ceil(width).min(buckets))
        .map(|bk| hist[bk as usize])
        .sum();
    drop(hist);
    let owner = |v: u64| bounds.partition_point(|&x| x <= v) - 1;
    let rounds = comm.allreduce(&[edges.len().div_ceil(ROUND_EDGES) as u64], Max)?[0] as usize;
    let mut staging: SbVec<[u32; 2]> = SbVec::zeroed(comm.runtime(), mine as usize)?;
    let mut filled = 0usize;
    for round in 0..rounds {
        let mut parts: Vec<Vec<[u32; 2]>> = vec![Vec::new(); p];
        {
            let local = edges.as_slice();
            let a = (round * ROUND_EDGES).min(local.len());
            let z = ((round + 1) * ROUND_EDGES).min(local.len());
            for &e in &local[a..z] {
                parts[owner(u64::from(e[0]))].push(e);
            }
        }
        let received = comm.alltoallv_vecs(parts)?;
        let out = staging.as_mut_slice();
        for part in received {
            if filled + part.len() > out.len() {
                return Err(AlgoError::Comm(spillway_comm::Error::InvalidArgument(
                    "more edges arrived than the histogram announced",
                )));
            }
            out[filled..filled + part.len()].copy_from_slice(&part);
            filled += part.len();
        }
    }
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
        let off = offsets.as_slice();
        let mut fill: Vec<u64> = off[..rows].to_vec();
        let t = targets.as_mut_slice();
        for &[s, d] in &staging.as_slice()[..filled] {
            let row = (u64::from(s) - lo) as usize;
            t[fill[row] as usize] = d;
            fill[row] += 1;
        }
    }
    Ok(DistGraph {
        n,
        total_edges: total,
        bounds,
        lo,
        hi,
        offsets,
        targets,
    })
}
