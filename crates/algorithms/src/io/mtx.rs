//! Matrix Market coordinate files: the header, and one parser for the entry lines.
//!
//! [`parse_mtx_header`] reads the banner and the size line; [`parse_mtx_entries`] parses a
//! chunk of entry lines into `(row, col, value)` for every consumer: graphs take the entries
//! as edges ([`parse_mtx_chunk`], values ignored), sparse matrices keep the values (finite
//! ones only).

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use spillway_comm::{Collectives, Comm, Sum};

use super::chunks::{agree_on_error, heap_allowance, read_chunks};
use super::error::InputError;
use super::lex::{
    capacity_hint, field_count, parse_index, parse_u64, parse_value, quote, ChunkLines, Fields,
    UintError,
};
use super::snap::MAX_VERTEX_ID;
use crate::error::AlgoError;

/// Header of a Matrix Market coordinate file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MtxHeader {
    /// Number of rows.
    pub rows: u64,
    /// Number of columns.
    pub cols: u64,
    /// Number of entry lines announced by the size line.
    pub nnz: u64,
    /// `true` for `symmetric` (each off-diagonal entry stands for two).
    pub symmetric: bool,
    /// `true` for `pattern` (entries carry no value).
    pub pattern: bool,
    /// Byte offset of the first line after the size line.
    pub data_start: u64,
    /// Number of lines before `data_start` (banner, comments, size line).
    pub header_lines: u64,
}

/// How many bytes of each header line are kept; the rest of a longer line is
/// skipped (comment lines may be arbitrarily long).
const HEADER_LINE_KEEP: usize = 4096;

/// Reads lines from the start of a file, tracking the byte offset.
struct HeaderReader<R> {
    reader: R,
    offset: u64,
}

impl<R: BufRead> HeaderReader<R> {
    /// Reads the next line into `buf` (without the `\n`), keeping at most
    /// [`HEADER_LINE_KEEP`] bytes. Returns `None` at end of file and
    /// otherwise whether the line was cut short.
    fn next_line(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<bool>> {
        buf.clear();
        let mut read_any = false;
        let mut truncated = false;
        loop {
            let avail = match self.reader.fill_buf() {
                Ok(avail) => avail,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                break;
            }
            read_any = true;
            let (content, used, done) = match avail.iter().position(|&b| b == b'\n') {
                Some(p) => (&avail[..p], p + 1, true),
                None => (avail, avail.len(), false),
            };
            let room = HEADER_LINE_KEEP - buf.len();
            if content.len() > room {
                truncated = true;
            }
            buf.extend_from_slice(&content[..content.len().min(room)]);
            self.reader.consume(used);
            self.offset += used as u64;
            if done {
                break;
            }
        }
        Ok(read_any.then_some(truncated))
    }
}

/// Parses a size-line field.
fn parse_size_field(field: &[u8], what: &str) -> Result<u64, String> {
    match parse_u64(field) {
        Ok(v) => Ok(v),
        Err(UintError::Overflow) => Err(format!("{what} {} out of range", quote(field))),
        Err(UintError::Invalid) => Err(format!("invalid {what} '{}' in size line", quote(field))),
    }
}

/// Checks the banner; returns `(symmetric, pattern)`.
fn parse_banner(line: &[u8]) -> Result<(bool, bool), String> {
    let tokens: Vec<&[u8]> = Fields::new(line).collect();
    let is_banner = tokens
        .first()
        .is_some_and(|t| t.eq_ignore_ascii_case(b"%%MatrixMarket"));
    if !is_banner {
        return Err("missing '%%MatrixMarket' banner".into());
    }
    if tokens.len() != 5 {
        return Err(
            "malformed banner: expected '%%MatrixMarket matrix coordinate FIELD SYMMETRY'".into(),
        );
    }
    let lower = |t: &[u8]| String::from_utf8_lossy(t).to_ascii_lowercase();
    let object = lower(tokens[1]);
    if object != "matrix" {
        return Err(format!(
            "unsupported object '{}' (only 'matrix')",
            quote(tokens[1])
        ));
    }
    let format = lower(tokens[2]);
    if format != "coordinate" {
        return Err(format!(
            "unsupported format '{}' (only 'coordinate')",
            quote(tokens[2])
        ));
    }
    let pattern = match lower(tokens[3]).as_str() {
        "pattern" => true,
        "real" | "integer" => false,
        _ => {
            return Err(format!(
                "unsupported field '{}' (supported: real, integer, pattern)",
                quote(tokens[3])
            ))
        }
    };
    let symmetric = match lower(tokens[4]).as_str() {
        "symmetric" => true,
        "general" => false,
        _ => {
            return Err(format!(
                "unsupported symmetry '{}' (supported: general, symmetric)",
                quote(tokens[4])
            ))
        }
    };
    Ok((symmetric, pattern))
}

/// Parses the size line `rows cols nnz`.
fn parse_size_line(line: &[u8], symmetric: bool) -> Result<(u64, u64, u64), String> {
    let fields: Vec<&[u8]> = Fields::new(line).take(4).collect();
    if fields.len() != 3 {
        return Err(format!(
            "expected size line 'rows cols nnz', found {} fields",
            field_count(line)
        ));
    }
    let rows = parse_size_field(fields[0], "rows")?;
    let cols = parse_size_field(fields[1], "cols")?;
    let nnz = parse_size_field(fields[2], "nnz")?;
    let max = MAX_VERTEX_ID + 1;
    if rows > max {
        return Err(format!("rows {rows} out of range (max {max})"));
    }
    if cols > max {
        return Err(format!("cols {cols} out of range (max {max})"));
    }
    if symmetric && rows != cols {
        return Err(format!(
            "symmetric matrix must be square, found {rows} x {cols}"
        ));
    }
    Ok((rows, cols, nnz))
}

/// Reads the header of a Matrix Market coordinate file.
///
/// The first line must be the banner
/// `%%MatrixMarket matrix coordinate FIELD SYMMETRY` (case-insensitive) with
/// `FIELD` one of `real`, `integer`, `pattern` and `SYMMETRY` one of
/// `general`, `symmetric`. Comment lines (first non-blank character `%`) and
/// blank lines are skipped up to the size line `rows cols nnz`.
///
/// Rejected with an [`InputError`] naming the line: a missing or malformed
/// banner, `array` format, `complex` values, `hermitian` or
/// `skew-symmetric` symmetry (all "unsupported ..."), a malformed size line,
/// `rows` or `cols` above `MAX_VERTEX_ID + 1`, and a symmetric matrix that
/// is not square. An empty file, a file without a size line and read
/// failures are file-level errors (`line: None`).
pub fn parse_mtx_header(path: &Path) -> Result<MtxHeader, InputError> {
    let file = File::open(path).map_err(|e| InputError::io(path, &e))?;
    let mut reader = HeaderReader {
        reader: BufReader::new(file),
        offset: 0,
    };
    let mut buf = Vec::with_capacity(HEADER_LINE_KEEP);
    let io_err = |e: io::Error| InputError::io(path, &e);

    if reader.next_line(&mut buf).map_err(io_err)?.is_none() {
        return Err(InputError::new(
            path,
            None,
            "empty file: expected '%%MatrixMarket' banner",
        ));
    }
    let (symmetric, pattern) =
        parse_banner(buf.trim_ascii()).map_err(|r| InputError::new(path, Some(1), r))?;

    let mut line_no: u64 = 1;
    while let Some(truncated) = reader.next_line(&mut buf).map_err(io_err)? {
        line_no += 1;
        let line = buf.trim_ascii();
        if line.is_empty() || line[0] == b'%' {
            continue;
        }
        if truncated {
            return Err(InputError::new(path, Some(line_no), "size line too long"));
        }
        let (rows, cols, nnz) = parse_size_line(line, symmetric)
            .map_err(|r| InputError::new(path, Some(line_no), r))?;
        return Ok(MtxHeader {
            rows,
            cols,
            nnz,
            symmetric,
            pattern,
            data_start: reader.offset,
            header_lines: line_no,
        });
    }
    Err(InputError::new(
        path,
        None,
        "missing size line 'rows cols nnz'",
    ))
}

/// Parses one entry line (not blank, not a comment): 0-based row and column, and the value
/// (1 in a pattern file).
fn parse_mtx_line(
    line: &[u8],
    header: &MtxHeader,
    finite: bool,
) -> Result<(u32, u32, f64), String> {
    let mut fields = Fields::new(line);
    let expected = if header.pattern { 2 } else { 3 };
    let row = fields.next();
    let col = fields.next();
    let value = if header.pattern { None } else { fields.next() };
    let extra = fields.next();
    let (row, col) = match (row, col, header.pattern, value, extra) {
        (Some(r), Some(c), true, None, None) => (r, c),
        (Some(r), Some(c), false, Some(_), None) => (r, c),
        _ => {
            let shape = if header.pattern {
                "'row col'"
            } else {
                "'row col value'"
            };
            return Err(format!(
                "expected {expected} fields {shape}, found {}",
                field_count(line)
            ));
        }
    };
    let i = parse_index(row, "row", header.rows)?;
    let j = parse_index(col, "column", header.cols)?;
    // The header does not record real vs integer, so any number is accepted for either.
    let v = match value {
        Some(v) => parse_value(v, finite)?,
        None => 1.0,
    };
    Ok((i, j, v))
}

/// Parses a chunk of Matrix Market coordinate entries: the one entry parser, behind the
/// graph readers ([`parse_mtx_chunk`]) and the sparse-matrix reader (values).
///
/// Each entry line is `i j` for pattern matrices and `i j value` otherwise, with 1-based
/// indices `1 <= i <= rows`, `1 <= j <= cols`. Every entry is handed to `entry` as 0-based
/// `(i - 1, j - 1, value)` (the value is 1 in a pattern file); for symmetric matrices an
/// off-diagonal entry is handed over twice, the second time as `(j - 1, i - 1, value)`. The
/// value must parse as a number; with `finite`, NaN and infinities are rejected too. Blank
/// lines and lines whose first non-blank character is `%` are skipped. Parsing stops at the
/// first bad line, reported with one of these reasons:
///
/// - `expected 3 fields 'row col value', found 2` (or `expected 2 fields
///   'row col', ...` for pattern matrices),
/// - `invalid row index 'x'`, `invalid column index 'x'`,
/// - `row index 7 out of range 1..=5` (also for 0), likewise `column index`,
/// - `invalid value 'x'`.
///
/// Returns the number of entry lines parsed and the first error: its 0-based line index
/// within the chunk and the reason.
pub fn parse_mtx_entries(
    bytes: &[u8],
    header: &MtxHeader,
    finite: bool,
    mut entry: impl FnMut(u32, u32, f64),
) -> (u64, Option<(u64, String)>) {
    let mut entries = 0u64;
    for (index, line) in ChunkLines::new(bytes) {
        let line = line.trim_ascii();
        if line.is_empty() || line[0] == b'%' {
            continue;
        }
        match parse_mtx_line(line, header, finite) {
            Ok((i, j, v)) => {
                entry(i, j, v);
                if header.symmetric && i != j {
                    entry(j, i, v);
                }
                entries += 1;
            }
            Err(reason) => return (entries, Some((index, reason))),
        }
    }
    (entries, None)
}

/// Result of parsing a chunk of Matrix Market entries as edges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MtxChunk {
    /// 0-based edges `(row, col)` of the entries before the first error;
    /// for symmetric matrices off-diagonal entries also add `(col, row)`.
    pub edges: Vec<(u32, u32)>,
    /// Number of entry lines parsed (for checking against `nnz`).
    pub entries: u64,
    /// The first error: 0-based line index within the chunk and reason.
    pub error: Option<(u64, String)>,
}

/// Parses a chunk of Matrix Market coordinate entries as the edges `(i - 1, j - 1)` of a
/// graph: [`parse_mtx_entries`] with any number accepted as a value, values dropped.
pub fn parse_mtx_chunk(bytes: &[u8], header: &MtxHeader) -> MtxChunk {
    let per_entry = if header.symmetric { 2 } else { 1 };
    let mut edges = Vec::with_capacity(capacity_hint(bytes, 16) * per_entry);
    let (entries, error) = parse_mtx_entries(bytes, header, false, |i, j, _| edges.push((i, j)));
    MtxChunk {
        edges,
        entries,
        error,
    }
}

/// Reads this rank's part of the entries of the Matrix Market file `path`, whose header is
/// `header` (a collective): `parse` gets every chunk and returns the entries it parsed and its
/// first bad line, as [`parse_mtx_entries`] does. Then every rank agrees on the first bad line
/// of the file, and on the number of entries, which must be the size line's.
///
/// # Errors
/// [`AlgoError::Input`] with file, line and reason (the same on every rank); communication
/// errors.
pub(crate) fn read_mtx(
    comm: &Comm,
    path: &Path,
    header: &MtxHeader,
    mut parse: impl FnMut(&[u8]) -> Result<(u64, Option<(u64, String)>), AlgoError>,
) -> Result<(), AlgoError> {
    let mut entries = 0u64;
    let chunk = heap_allowance(comm) / 2;
    let (read, before) = read_chunks(comm, path, header.data_start, chunk, |bytes| {
        let (parsed, error) = parse(bytes)?;
        entries += parsed;
        Ok(error)
    })?;
    agree_on_error(comm, path, read.error, header.header_lines + before)?;
    let entries = comm.allreduce(&[entries], Sum)?[0];
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
    Ok(())
}

/// Reads this rank's part of a Matrix Market file as the edges of a graph on
/// `max(rows, cols)` vertices (a collective): `take` gets the edges of every chunk, as
/// [`parse_mtx_chunk`] makes them. Returns the number of vertices.
///
/// # Errors
/// As [`read_mtx`]; a header that does not parse; a matrix without rows.
pub(crate) fn read_mtx_edges(
    comm: &Comm,
    path: &Path,
    mut take: impl FnMut(&[(u32, u32)]) -> Result<(), AlgoError>,
) -> Result<u64, AlgoError> {
    let header = parse_mtx_header(path)?;
    read_mtx(comm, path, &header, |bytes| {
        let parsed = parse_mtx_chunk(bytes, &header);
        take(&parsed.edges)?;
        Ok((parsed.entries, parsed.error))
    })?;
    let n = header.rows.max(header.cols);
    if n == 0 {
        return Err(InputError::new(path, None, "the matrix has no rows").into());
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::test_support::{err, temp_file};

    fn header_of(content: &[u8]) -> Result<MtxHeader, InputError> {
        let f = temp_file(content);
        parse_mtx_header(f.path())
    }

    fn header_error(content: &[u8]) -> (Option<u64>, String) {
        let e = header_of(content).expect_err("header should be rejected");
        (e.line, e.reason)
    }

    #[test]
    fn mtx_header_parses() {
        let content = b"%%MatrixMarket matrix coordinate real general\n% comment\n\n%another\n5 4 3\n1 1 1.5\n";
        let h = header_of(content).expect("header");
        assert_eq!(
            h,
            MtxHeader {
                rows: 5,
                cols: 4,
                nnz: 3,
                symmetric: false,
                pattern: false,
                data_start: 72,
                header_lines: 5,
            }
        );
        assert_eq!(&content[h.data_start as usize..], b"1 1 1.5\n");

        let h = header_of(b"%%matrixmarket MATRIX Coordinate PATTERN Symmetric\r\n3 3 0")
            .expect("header");
        assert!(h.symmetric && h.pattern);
        assert_eq!((h.rows, h.cols, h.nnz), (3, 3, 0));
        assert_eq!(h.header_lines, 2);
        assert_eq!(h.data_start, 57);

        let h = header_of(b"%%MatrixMarket matrix coordinate integer general\n4294967295 1 0\n")
            .expect("max rows");
        assert_eq!(h.rows, 4_294_967_295);
    }

    #[test]
    fn mtx_header_long_comment_is_skipped() {
        let mut content = b"%%MatrixMarket matrix coordinate real general\n%".to_vec();
        content.extend(std::iter::repeat_n(b'c', 3 * HEADER_LINE_KEEP));
        content.extend_from_slice(b"\n2 2 1\n1 2 3\n");
        let h = header_of(&content).expect("header");
        assert_eq!(h.header_lines, 3);
        assert_eq!(&content[h.data_start as usize..], b"1 2 3\n");
    }

    #[test]
    fn mtx_header_rejections() {
        let cases: &[(&[u8], Option<u64>, &str)] = &[
            (b"", None, "empty file: expected '%%MatrixMarket' banner"),
            (b"3 3 1\n", Some(1), "missing '%%MatrixMarket' banner"),
            (
                b"%%MatrixMarket matrix coordinate real\n3 3 1\n",
                Some(1),
                "malformed banner: expected '%%MatrixMarket matrix coordinate FIELD SYMMETRY'",
            ),
            (
                b"%%MatrixMarket matrix array real general\n3 3\n",
                Some(1),
                "unsupported format 'array' (only 'coordinate')",
            ),
            (
                b"%%MatrixMarket vector coordinate real general\n",
                Some(1),
                "unsupported object 'vector' (only 'matrix')",
            ),
            (
                b"%%MatrixMarket matrix coordinate complex general\n",
                Some(1),
                "unsupported field 'complex' (supported: real, integer, pattern)",
            ),
            (
                b"%%MatrixMarket matrix coordinate real hermitian\n",
                Some(1),
                "unsupported symmetry 'hermitian' (supported: general, symmetric)",
            ),
            (
                b"%%MatrixMarket matrix coordinate real skew-symmetric\n",
                Some(1),
                "unsupported symmetry 'skew-symmetric' (supported: general, symmetric)",
            ),
            (
                b"%%MatrixMarket matrix coordinate real general\n% c\n",
                None,
                "missing size line 'rows cols nnz'",
            ),
            (
                b"%%MatrixMarket matrix coordinate real general\n% c\n\n3 3\n",
                Some(4),
                "expected size line 'rows cols nnz', found 2 fields",
            ),
            (
                b"%%MatrixMarket matrix coordinate real general\n3 3 1 1 1\n",
                Some(2),
                "expected size line 'rows cols nnz', found 5 fields",
            ),
            (
                b"%%MatrixMarket matrix coordinate real general\n3 x 1\n",
                Some(2),
                "invalid cols 'x' in size line",
            ),
            (
                b"%%MatrixMarket matrix coordinate real general\n4294967296 3 1\n",
                Some(2),
                "rows 4294967296 out of range (max 4294967295)",
            ),
            (
                b"%%MatrixMarket matrix coordinate real general\n3 99999999999 1\n",
                Some(2),
                "cols 99999999999 out of range (max 4294967295)",
            ),
            (
                b"%%MatrixMarket matrix coordinate real general\n3 3 99999999999999999999\n",
                Some(2),
                "nnz 99999999999999999999 out of range",
            ),
            (
                b"%%MatrixMarket matrix coordinate real symmetric\n3 4 1\n",
                Some(2),
                "symmetric matrix must be square, found 3 x 4",
            ),
        ];
        for (content, line, reason) in cases {
            assert_eq!(
                header_error(content),
                (*line, reason.to_string()),
                "input {:?}",
                String::from_utf8_lossy(content)
            );
        }
    }

    #[test]
    fn mtx_header_missing_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("absent.mtx");
        let e = parse_mtx_header(&path).expect_err("missing file");
        assert_eq!(e.path, path);
        assert_eq!(e.line, None);
        assert!(e.reason.starts_with("cannot open: "), "{}", e.reason);
    }

    fn mtx(rows: u64, cols: u64, symmetric: bool, pattern: bool) -> MtxHeader {
        MtxHeader {
            rows,
            cols,
            nnz: 0,
            symmetric,
            pattern,
            data_start: 0,
            header_lines: 0,
        }
    }

    #[test]
    fn mtx_chunk_general_and_symmetric() {
        let body = b"1 1 2.5\n% comment\n\n5 4 -1e3\r\n  3\t2   7\n2 4 0";
        let c = parse_mtx_chunk(body, &mtx(5, 4, false, false));
        assert_eq!(c.error, None);
        assert_eq!(c.entries, 4);
        assert_eq!(c.edges, vec![(0, 0), (4, 3), (2, 1), (1, 3)]);

        let c = parse_mtx_chunk(b"1 1\n3 1\n2 3\n", &mtx(3, 3, true, true));
        assert_eq!(c.error, None);
        assert_eq!(c.entries, 3);
        assert_eq!(c.edges, vec![(0, 0), (2, 0), (0, 2), (1, 2), (2, 1)]);
    }

    #[test]
    fn mtx_chunk_errors() {
        let general = mtx(5, 5, false, false);
        let pattern = mtx(5, 5, false, true);
        let cases: &[(&[u8], &MtxHeader, u64, &str)] = &[
            (
                b"1 1 1\n7 1 1\n",
                &general,
                1,
                "row index 7 out of range 1..=5",
            ),
            (b"0 1 1\n", &general, 0, "row index 0 out of range 1..=5"),
            (b"1 6 1\n", &general, 0, "column index 6 out of range 1..=5"),
            (
                b"1 1 1\n1 2\n",
                &general,
                1,
                "expected 3 fields 'row col value', found 2",
            ),
            (
                b"1 2 3 4\n",
                &general,
                0,
                "expected 3 fields 'row col value', found 4",
            ),
            (
                b"1 2 3\n",
                &pattern,
                0,
                "expected 2 fields 'row col', found 3",
            ),
            (
                b"\n% c\n1\n",
                &pattern,
                2,
                "expected 2 fields 'row col', found 1",
            ),
            (b"a 2 3\n", &general, 0, "invalid row index 'a'"),
            (b"1 -2 3\n", &general, 0, "invalid column index '-2'"),
            (b"1 2 x\n", &general, 0, "invalid value 'x'"),
            (
                b"99999999999999999999999 1 1\n",
                &general,
                0,
                "row index 99999999999999999999999 out of range 1..=5",
            ),
        ];
        for (body, header, index, reason) in cases {
            let c = parse_mtx_chunk(body, header);
            assert_eq!(
                c.error,
                err(*index, reason),
                "input {:?}",
                String::from_utf8_lossy(body)
            );
        }
        let c = parse_mtx_chunk(b"1 1 1\n2 2 2\n9 9 9\n", &general);
        assert_eq!(c.entries, 2);
        assert_eq!(c.edges, vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn mtx_entries_carry_values_and_reject_non_finite_ones_when_asked() {
        let entries = |body: &[u8], header: &MtxHeader, finite: bool| {
            let mut out = Vec::new();
            let (n, error) = parse_mtx_entries(body, header, finite, |i, j, v| out.push((i, j, v)));
            (out, n, error)
        };
        let (out, n, error) = entries(b"1 1 2.5\n3 1 -4\n", &mtx(3, 3, true, false), true);
        assert_eq!(error, None);
        assert_eq!(n, 2);
        assert_eq!(out, vec![(0, 0, 2.5), (2, 0, -4.0), (0, 2, -4.0)]);
        let (out, _, _) = entries(b"2 3\n", &mtx(3, 3, false, true), true);
        assert_eq!(out, vec![(1, 2, 1.0)]);
        for bad in [&b"1 1 nan\n"[..], b"1 1 inf\n", b"1 1 -Infinity\n"] {
            let (out, n, error) = entries(bad, &mtx(3, 3, false, false), true);
            assert!(out.is_empty() && n == 0);
            let value = String::from_utf8_lossy(&bad[4..bad.len() - 1]).into_owned();
            assert_eq!(error, err(0, &format!("invalid value '{value}'")));
            // A graph's edges do not use the value: any number will do.
            assert_eq!(entries(bad, &mtx(3, 3, false, false), false).1, 1);
        }
    }
}
