//! Reading inputs split across ranks, and writing outputs from all ranks.

mod input;
mod ordered;
mod sparse;

pub use input::{
    count_lines, csv_dimension, line_aligned_range, parse_csv_chunk, parse_mtx_chunk,
    parse_mtx_header, parse_snap_chunk, parse_snap_chunk_into, read_range,
    remove_temporary_outputs, resolve_output, AtomicFile, EdgeChunk, InputError, MtxChunk,
    MtxHeader, PointChunk, MAX_VERTEX_ID,
};
pub use ordered::{in_rank_order, write_ordered};
pub use sparse::{
    distribute_entries, entry, entry_col, entry_row, entry_value, load_rows, read_entries,
    DistRows, Entry, ReadEntries, SparseSource,
};
