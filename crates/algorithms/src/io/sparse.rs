//! Loading sparse matrices with values: Matrix Market coordinate files and SVMlight/libsvm
//! lines, read in parallel into `(row, column, value)` entries, then distributed either as
//! rows balanced by non-zeros ([`load_rows`], for spherical K-means) or by any owner function
//! ([`distribute_entries`], for the 2-D blocks of SGD).
//!
//! # Formats
//! * Matrix Market (`.mtx`): `%%MatrixMarket matrix coordinate real|integer general`, 1-based
//!   `row col value` lines; `symmetric` adds the mirrored entry of each off-diagonal one.
//!   Pattern files are rejected (they carry no values).
//! * SVMlight (any other extension): one row per non-blank line, `label idx:val idx:val ...`,
//!   indices 1-based; the label is ignored, `#` starts a comment to the end of the line. The
//!   number of columns is the largest index.
//!
//! Entries keep their position in the file (`seq`: 0-based, counting entries, not lines), so a
//! consumer can order them the way a sequential reader of the file would.

use std::path::{Path, PathBuf};

use spillway_comm::{Collectives, Comm, Max, Sum};
use spillway_runtime::SbVec;

use super::chunks::{agree_on_error, heap_allowance, read_chunks};
use super::error::InputError;
use super::mtx::{parse_mtx_entries, parse_mtx_header, read_mtx};
use super::svmlight::parse_svmlight_chunk;
use crate::error::AlgoError;
use crate::generate::ZipfDocsSpec;
use crate::state::{check_state, Origin};

/// A sparse-matrix file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SparseSource {
    /// Matrix Market coordinate file with values.
    MatrixMarket(PathBuf),
    /// SVMlight / libsvm: `label idx:val ...` per line, 1-based indices.
    Svmlight(PathBuf),
}

impl SparseSource {
    /// Chooses the format by extension: `.mtx` is Matrix Market, anything else SVMlight.
    pub fn from_path(path: impl Into<PathBuf>) -> SparseSource {
        let path = path.into();
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("mtx"))
        {
            SparseSource::MatrixMarket(path)
        } else {
            SparseSource::Svmlight(path)
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        match self {
            SparseSource::MatrixMarket(p) | SparseSource::Svmlight(p) => p,
        }
    }
}

/// One entry as it travels between ranks: `[row << 32 | col, value bits, seq]`.
pub type Entry = [u64; 3];

/// Packs an entry.
pub fn entry(row: u32, col: u32, value: f64, seq: u64) -> Entry {
    [
        (u64::from(row) << 32) | u64::from(col),
        value.to_bits(),
        seq,
    ]
}

/// Row of an entry.
pub fn entry_row(e: &Entry) -> u32 {
    (e[0] >> 32) as u32
}

/// Column of an entry.
pub fn entry_col(e: &Entry) -> u32 {
    e[0] as u32
}

/// Value of an entry.
pub fn entry_value(e: &Entry) -> f64 {
    f64::from_bits(e[1])
}

/// This rank's entries as read from the file (any rows), and the matrix shape.
#[derive(Debug)]
pub struct ReadEntries {
    /// Rows of the matrix.
    pub rows: u64,
    /// Columns of the matrix.
    pub cols: u64,
    /// Entries of the whole matrix.
    pub total: u64,
    /// This rank's entries, in file order, in storage-backed memory.
    pub entries: SbVec<Entry>,
}

/// Reads this rank's part of a sparse-matrix file.
///
/// # Errors
/// [`AlgoError::Input`] with file, line and reason (every rank returns the same error): a
/// malformed line, an index out of range, a non-finite value, a pattern Matrix Market file, an
/// entry count that differs from the size line, a file without rows.
pub fn read_entries(comm: &Comm, source: &SparseSource) -> Result<ReadEntries, AlgoError> {
    let chunk = heap_allowance(comm) / 2;
    let mut stored: SbVec<Entry> = SbVec::with_capacity(comm.runtime(), 0)?;
    let mut buf: Vec<(u32, u32, f64)> = Vec::new();
    let push = |stored: &mut SbVec<Entry>, buf: &mut Vec<(u32, u32, f64)>| {
        let packed: Vec<Entry> = buf.iter().map(|&(i, j, v)| entry(i, j, v, 0)).collect();
        buf.clear();
        stored.extend_from_slice(&packed)
    };
    let (rows, cols, row_base) = match source {
        SparseSource::MatrixMarket(path) => {
            let header = parse_mtx_header(path)?;
            if header.pattern {
                return Err(InputError::new(
                    path,
                    Some(1),
                    "pattern matrices carry no values (expected real or integer)",
                )
                .into());
            }
            let what = format!("the size line's {} x {} matrix", header.rows, header.cols);
            check_dimensions(
                comm,
                path,
                Some(header.header_lines),
                &what,
                header.rows,
                header.cols,
            )?;
            read_mtx(comm, path, &header, |bytes| {
                let parsed = parse_mtx_entries(bytes, &header, true, |i, j, v| buf.push((i, j, v)));
                push(&mut stored, &mut buf)?;
                Ok(parsed)
            })?;
            if header.rows == 0 || header.cols == 0 {
                return Err(InputError::new(path, None, "the matrix has no rows").into());
            }
            (header.rows, header.cols, 0u32)
        }
        SparseSource::Svmlight(path) => {
            let mut local_rows = 0u32;
            let (read, before) = read_chunks(comm, path, 0, chunk, |bytes| {
                let error = parse_svmlight_chunk(bytes, &mut local_rows, &mut buf);
                push(&mut stored, &mut buf)?;
                Ok(error)
            })?;
            agree_on_error(comm, path, read.error, before)?;
            let base = comm
                .exscan(&[u64::from(local_rows)], Sum)?
                .map_or(0, |v| v[0]);
            let rows = comm.allreduce(&[u64::from(local_rows)], Sum)?[0];
            let max_col = stored
                .as_slice()
                .iter()
                .map(|e| u64::from(entry_col(e)) + 1)
                .max()
                .unwrap_or(0);
            let cols = comm.allreduce(&[max_col], Max)?[0];
            if rows == 0 {
                return Err(InputError::new(path, None, "no data rows").into());
            }
            if rows > u64::from(u32::MAX) {
                return Err(InputError::new(path, None, "more than 2^32 - 1 rows").into());
            }
            let what = format!("the largest column index, {cols},");
            check_dimensions(comm, path, None, &what, rows, cols)?;
            (rows, cols.max(1), base as u32)
        }
    };
    let first_seq = comm
        .exscan(&[stored.len() as u64], Sum)?
        .map_or(0, |v| v[0]);
    let total = comm.allreduce(&[stored.len() as u64], Sum)?[0];
    for (k, e) in stored.as_mut_slice().iter_mut().enumerate() {
        let row = entry_row(e) + row_base;
        *e = entry(row, entry_col(e), entry_value(e), first_seq + k as u64);
    }
    Ok(ReadEntries {
        rows,
        cols,
        total,
        entries: stored,
    })
}

/// Bytes of state per row (row offsets, an assignment) and per column (a dense column of
/// every centroid or factor, at least two copies) that the consumers of a sparse matrix keep.
pub(crate) const ROW_STATE_BYTES: u64 = 12;
/// See [`ROW_STATE_BYTES`].
pub(crate) const COLUMN_STATE_BYTES: u64 = 16;

/// Refuses a matrix whose dimensions imply state that does not fit or is out of proportion
/// with the file, before anything that large is allocated.
fn check_dimensions(
    comm: &Comm,
    path: &Path,
    line: Option<u64>,
    what: &str,
    rows: u64,
    cols: u64,
) -> Result<(), AlgoError> {
    let bytes = rows
        .saturating_mul(ROW_STATE_BYTES)
        .saturating_add(cols.saturating_mul(COLUMN_STATE_BYTES));
    let units = format!("{rows} rows and {cols} columns");
    check_state(comm, bytes, &units, Origin::Line { path, line, what })
}

/// Moves every entry to the rank `owner(entry)` in rounds whose size follows the memory
/// budget; returns the entries that arrived (in no particular order).
///
/// # Errors
/// Communication errors.
pub fn distribute_entries(
    comm: &Comm,
    entries: &SbVec<Entry>,
    owner: &dyn Fn(&Entry) -> usize,
) -> Result<SbVec<Entry>, AlgoError> {
    let p = comm.size();
    let round = (heap_allowance(comm) / 64).max(1024);
    let rounds = comm.allreduce(&[entries.len().div_ceil(round) as u64], Max)?[0] as usize;
    let mut received: SbVec<Entry> = SbVec::with_capacity(comm.runtime(), 0)?;
    for r in 0..rounds {
        let a = (r * round).min(entries.len());
        let z = ((r + 1) * round).min(entries.len());
        let mut by_dest: Vec<Vec<Entry>> = vec![Vec::new(); p];
        for e in entries.range(a..z) {
            by_dest[owner(e)].push(*e);
        }
        let blocks: Vec<(usize, &[Entry])> = by_dest
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(q, b)| (q, b.as_slice()))
            .collect();
        let (got, _) = comm.exchange(&blocks)?;
        received.extend_from_slice(&got)?;
    }
    Ok(received)
}

/// This rank's consecutive rows of a sparse matrix in compressed sparse row form.
#[derive(Debug)]
pub struct DistRows {
    /// Rows of the whole matrix.
    pub rows: u64,
    /// Columns of the whole matrix.
    pub cols: u64,
    /// Non-zeros of the whole matrix (after summing duplicates).
    pub total_nnz: u64,
    /// First row of this rank.
    pub lo: u64,
    /// One past the last row of this rank.
    pub hi: u64,
    /// Row offsets (`hi - lo + 1` entries).
    pub offsets: SbVec<u64>,
    /// Column of each non-zero, increasing within a row.
    pub colidx: SbVec<u32>,
    /// Value of each non-zero.
    pub values: SbVec<f64>,
}

impl DistRows {
    /// Number of local rows.
    pub fn local_rows(&self) -> usize {
        (self.hi - self.lo) as usize
    }

    /// Columns and values of local row `i`.
    pub fn row(&self, i: usize) -> (&[u32], &[f64]) {
        let off = self.offsets.as_slice();
        let (a, b) = (off[i] as usize, off[i + 1] as usize);
        (&self.colidx.as_slice()[a..b], &self.values.as_slice()[a..b])
    }
}

/// Loads a sparse matrix as consecutive rows per rank, balanced by non-zeros (BDMPI's 1-D row
/// decomposition). Duplicate entries of one position add up (Matrix Market convention).
///
/// # Errors
/// As [`read_entries`]; communication errors.
pub fn load_rows(comm: &Comm, source: &SparseSource) -> Result<DistRows, AlgoError> {
    let read = read_entries(comm, source)?;
    let n = read.rows;
    let p = comm.size();
    let buckets = n.clamp(1, 1 << 18);
    let width = n.div_ceil(buckets);
    let buckets = n.div_ceil(width);
    let entries = read.entries;
    let hist = comm.aggregate(0u64, buckets as usize, Sum, &mut |h| {
        for e in entries.as_slice() {
            h[(u64::from(entry_row(e)) / width) as usize] += 1;
        }
    })?;
    let total: u64 = hist.iter().sum();
    let mut bounds = vec![0u64; p + 1];
    bounds[p] = n;
    let (mut cum, mut b) = (0u64, 0usize);
    for (q, bound) in bounds.iter_mut().enumerate().take(p).skip(1) {
        let target = total * q as u64 / p as u64;
        while cum < target && b < hist.len() {
            cum += hist[b];
            b += 1;
        }
        *bound = (b as u64 * width).min(n);
    }
    drop(hist);
    let owner = |e: &Entry| bounds.partition_point(|&x| x <= u64::from(entry_row(e))) - 1;
    let mut mine = distribute_entries(comm, &entries, &owner)?;
    drop(entries);
    let (lo, hi) = (bounds[comm.rank()], bounds[comm.rank() + 1]);
    let local = mine.as_mut_slice();
    local.sort_unstable_by_key(|e| (e[0], e[2]));
    // Sum duplicates in file order.
    let rows = (hi - lo) as usize;
    let mut offsets: SbVec<u64> = SbVec::zeroed(comm.runtime(), rows + 1)?;
    let mut colidx: SbVec<u32> = SbVec::with_capacity(comm.runtime(), local.len())?;
    let mut values: SbVec<f64> = SbVec::with_capacity(comm.runtime(), local.len())?;
    {
        let off = offsets.as_mut_slice();
        let mut i = 0;
        let mut cols_buf = Vec::new();
        let mut vals_buf = Vec::new();
        while i < local.len() {
            let key = local[i][0];
            let mut v = 0.0;
            while i < local.len() && local[i][0] == key {
                v += entry_value(&local[i]);
                i += 1;
            }
            let row = (u64::from((key >> 32) as u32) - lo) as usize;
            off[row + 1] += 1;
            cols_buf.push(key as u32);
            vals_buf.push(v);
            if cols_buf.len() >= 1 << 16 {
                colidx.extend_from_slice(&cols_buf)?;
                values.extend_from_slice(&vals_buf)?;
                cols_buf.clear();
                vals_buf.clear();
            }
        }
        colidx.extend_from_slice(&cols_buf)?;
        values.extend_from_slice(&vals_buf)?;
        for r in 0..rows {
            off[r + 1] += off[r];
        }
    }
    drop(mine);
    let total_nnz = comm.allreduce(&[values.len() as u64], Sum)?[0];
    Ok(DistRows {
        rows: n,
        cols: read.cols,
        total_nnz,
        lo,
        hi,
        offsets,
        colidx,
        values,
    })
}

/// Generates a [`ZipfDocsSpec`] document-term matrix as consecutive rows per rank (`docs * r / p`
/// to `docs * (r + 1) / p`: documents have the same length on average, so this balances
/// non-zeros too), each rank writing its own rows straight into storage-backed memory.
///
/// # Errors
/// Matrices larger than the job can hold (checked on every rank before any work);
/// communication or storage errors.
pub fn generate_rows(comm: &Comm, spec: &ZipfDocsSpec) -> Result<DistRows, AlgoError> {
    let (p, r) = (comm.size() as u64, comm.rank() as u64);
    check_state(
        comm,
        spec.docs.saturating_mul(spec.max_len()).saturating_mul(12),
        &format!("{} documents of up to {} terms", spec.docs, spec.max_len()),
        Origin::Parameter {
            name: "generate",
            what: "the matrix",
        },
    )?;
    let (lo, hi) = (spec.docs * r / p, spec.docs * (r + 1) / p);
    let rows = (hi - lo) as usize;
    // Exactly the non-zeros of these rows: growing would double the arrays.
    let expected = (lo..hi).map(|doc| spec.doc_len(doc) as usize).sum();
    let mut colidx: SbVec<u32> = SbVec::with_capacity(comm.runtime(), expected)?;
    let mut values: SbVec<f64> = SbVec::with_capacity(comm.runtime(), expected)?;
    let mut ends = Vec::with_capacity(rows + 1);
    ends.push(0u64);
    let (mut words, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
    for doc in lo..hi {
        spec.document(doc, &mut words, &mut cols, &mut vals);
        ends.push((colidx.len() + cols.len()) as u64);
        if cols.len() >= 1 << 16 || doc + 1 == hi {
            colidx.extend_from_slice(&cols)?;
            values.extend_from_slice(&vals)?;
            cols.clear();
            vals.clear();
        }
    }
    let mut offsets: SbVec<u64> = SbVec::with_capacity(comm.runtime(), rows + 1)?;
    offsets.extend_from_slice(&ends)?;
    drop(ends);
    let total_nnz = comm.allreduce(&[values.len() as u64], Sum)?[0];
    Ok(DistRows {
        rows: spec.docs,
        cols: spec.terms,
        total_nnz,
        lo,
        hi,
        offsets,
        colidx,
        values,
    })
}
