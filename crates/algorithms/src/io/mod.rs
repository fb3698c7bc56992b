//! Reading inputs split across ranks, and writing outputs from all ranks.
//!
//! # Reading
//! Every rank reads a disjoint, line-aligned byte range of a file ([`line_aligned_range`],
//! [`read_range`]) in chunks bounded by its share of the memory budget, and parses each chunk
//! with the reader of the file's format:
//!
//! * SNAP edge lists ([`parse_snap_chunk`]),
//! * Matrix Market coordinate files ([`parse_mtx_header`], and one entry parser,
//!   [`parse_mtx_entries`], that graphs use through [`parse_mtx_chunk`] and sparse matrices
//!   with their values),
//! * CSV point files ([`csv_dimension`], [`parse_csv_chunk`]),
//! * SVMlight / libsvm rows (through [`read_entries`]).
//!
//! Chunk parsers never panic on malformed input: they return what parsed before the first bad
//! line together with that line's 0-based index *within the chunk* and a reason. The index
//! becomes a global 1-based line number by adding the lines of earlier chunks
//! ([`count_lines`]); every rank then reports the same [`InputError`].
//!
//! [`read_entries`] and [`load_rows`] read a sparse matrix with values (Matrix Market or
//! SVMlight) and move its entries to their owners ([`distribute_entries`]).
//!
//! # Writing
//! [`AtomicFile`]: output appears under its final name only once it is complete.
//! [`write_ordered`]: one file written by all ranks in rank order.

mod atomic;
pub(crate) mod chunks;
mod csv;
mod error;
mod lex;
pub(crate) mod mtx;
mod ordered;
mod snap;
mod sparse;
mod split;
mod svmlight;

pub use atomic::{remove_temporary_outputs, resolve_output, AtomicFile};
pub use csv::{csv_dimension, parse_csv_chunk, PointChunk};
pub use error::InputError;
pub use mtx::{parse_mtx_chunk, parse_mtx_entries, parse_mtx_header, MtxChunk, MtxHeader};
pub use ordered::{in_rank_order, write_ordered};
pub use snap::{parse_snap_chunk, parse_snap_chunk_into, EdgeChunk, MAX_VERTEX_ID};
pub use sparse::{
    distribute_entries, entry, entry_col, entry_row, entry_value, generate_rows, load_rows,
    read_entries, DistRows, Entry, ReadEntries, SparseSource,
};
pub use split::{count_lines, line_aligned_range, read_range};

/// Files and expected errors for the readers' tests.
#[cfg(test)]
mod test_support {
    use std::io::Write;

    /// A temporary file holding `content`.
    pub(super) fn temp_file(content: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("create temp file");
        f.write_all(content).expect("write temp file");
        f.flush().expect("flush temp file");
        f
    }

    /// A parser's first error: 0-based line index within the chunk and reason.
    pub(super) fn err(index: u64, reason: &str) -> Option<(u64, String)> {
        Some((index, reason.to_string()))
    }
}
