//! Readers for input files that are split across ranks.
//!
//! Every rank reads a disjoint, line-aligned byte range of a file
//! ([`line_aligned_range`], [`read_range`]) and parses it with one of the
//! chunk parsers ([`parse_snap_chunk`], [`parse_mtx_chunk`],
//! [`parse_csv_chunk`]). Chunk parsers never panic on malformed input: they
//! return what parsed before the first bad line together with that line's
//! 0-based index *within the chunk* and a reason. The caller turns the index
//! into a global 1-based line number by adding the number of lines in earlier
//! chunks (see [`count_lines`]) and builds an [`InputError`].
//!
//! [`AtomicFile`] is the matching writer: output appears under its final name
//! only once it is complete.

use std::ffi::OsString;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A rejected input: the file, the 1-based line (`None` for a problem with
/// the file as a whole) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The file that was rejected.
    pub path: PathBuf,
    /// 1-based line number of the offending line, or `None` for a
    /// file-level problem (cannot open, empty, missing header, ...).
    pub line: Option<u64>,
    /// Human-readable reason.
    pub reason: String,
}

impl InputError {
    /// Creates an error for `path`, at `line` (1-based) if given.
    pub fn new(path: impl Into<PathBuf>, line: Option<u64>, reason: impl Into<String>) -> Self {
        InputError {
            path: path.into(),
            line,
            reason: reason.into(),
        }
    }

    /// A file-level error from an I/O failure.
    ///
    /// Failures to find or access the file read
    /// `"cannot open: <io error>"`; any other failure reads
    /// `"I/O error: <io error>"`.
    pub fn io(path: impl Into<PathBuf>, err: &io::Error) -> Self {
        let reason = match err.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => {
                format!("cannot open: {err}")
            }
            _ => format!("I/O error: {err}"),
        };
        InputError::new(path, None, reason)
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.path.display(), line, self.reason),
            None => write!(f, "{}: {}", self.path.display(), self.reason),
        }
    }
}

impl std::error::Error for InputError {}

// ---------------------------------------------------------------------------
// Splitting a file into line-aligned parts
// ---------------------------------------------------------------------------

/// Size of the blocks read while looking for the end of a line.
const SCAN_BLOCK: usize = 64 * 1024;

fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The byte range `[start, end)` of `part` of `parts` for data occupying
/// `[data_start, file_len)` of a file.
///
/// The nominal cut points `data_start + i * (file_len - data_start) / parts`
/// are moved forward to just after the next `b'\n'` (a cut that already sits
/// at the start of a line, including `data_start` itself, stays; a cut with
/// no newline after it moves to `file_len`; the last end is always
/// `file_len`). Hence every line belongs to exactly one part — the one in
/// which it starts — and parts may be empty. Only the bytes between each
/// nominal cut and the next newline are read.
///
/// Errors with [`io::ErrorKind::InvalidInput`] if `parts == 0`,
/// `part >= parts` or `data_start > file_len`, and passes on read errors.
pub fn line_aligned_range(
    file: &File,
    data_start: u64,
    file_len: u64,
    part: usize,
    parts: usize,
) -> io::Result<(u64, u64)> {
    if parts == 0 {
        return Err(invalid_input("cannot split data into 0 parts".into()));
    }
    if part >= parts {
        return Err(invalid_input(format!(
            "part {part} out of range for {parts} parts"
        )));
    }
    if data_start > file_len {
        return Err(invalid_input(format!(
            "data start {data_start} beyond end of file ({file_len} bytes)"
        )));
    }
    let start = cut_point(file, data_start, file_len, part, parts)?;
    let end = cut_point(file, data_start, file_len, part + 1, parts)?;
    Ok((start, end))
}

/// Cut point `i` of `parts` (0 ..= parts), aligned to a line start.
fn cut_point(
    file: &File,
    data_start: u64,
    file_len: u64,
    i: usize,
    parts: usize,
) -> io::Result<u64> {
    if i == 0 {
        return Ok(data_start);
    }
    if i >= parts {
        return Ok(file_len);
    }
    let len = u128::from(file_len - data_start);
    // i < parts, so the offset is < len and fits in u64.
    let offset = (len * i as u128 / parts as u128) as u64;
    next_line_start(file, data_start + offset, data_start, file_len)
}

/// The smallest line start `>= pos`: `pos` itself if the byte before it is a
/// newline (or `pos == data_start`), otherwise one past the next newline, or
/// `file_len` if there is none.
fn next_line_start(file: &File, pos: u64, data_start: u64, file_len: u64) -> io::Result<u64> {
    if pos <= data_start {
        return Ok(data_start);
    }
    if pos >= file_len {
        return Ok(file_len);
    }
    let mut buf = vec![0u8; SCAN_BLOCK];
    // Start at the byte before `pos`: if it is a newline, `pos` is a line start.
    let mut at = pos - 1;
    while at < file_len {
        let n = usize::try_from(file_len - at).map_or(SCAN_BLOCK, |r| r.min(SCAN_BLOCK));
        let block = &mut buf[..n];
        file.read_exact_at(block, at)?;
        if let Some(i) = memchr::memchr(b'\n', block) {
            return Ok(at + i as u64 + 1);
        }
        at += n as u64;
    }
    Ok(file_len)
}

/// Reads bytes `[start, end)` of `file` with positioned reads (the file's
/// cursor is not used or moved).
///
/// Errors with [`io::ErrorKind::InvalidInput`] if `start > end` or the range
/// does not fit in memory, and with [`io::ErrorKind::UnexpectedEof`] if the
/// file ends before `end`.
pub fn read_range(file: &File, start: u64, end: u64) -> io::Result<Vec<u8>> {
    if start > end {
        return Err(invalid_input(format!("invalid byte range {start}..{end}")));
    }
    let len = usize::try_from(end - start)
        .map_err(|_| invalid_input(format!("byte range {start}..{end} too large")))?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, start)?;
    Ok(buf)
}

/// Number of lines in a chunk: the number of `b'\n'` bytes, plus one if the
/// chunk is non-empty and does not end with `b'\n'`.
///
/// This is exactly the number of line indices the chunk parsers use.
pub fn count_lines(bytes: &[u8]) -> u64 {
    let newlines = memchr::memchr_iter(b'\n', bytes).count() as u64;
    match bytes.last() {
        Some(&b) if b != b'\n' => newlines + 1,
        _ => newlines,
    }
}

// ---------------------------------------------------------------------------
// Byte-level helpers shared by the parsers
// ---------------------------------------------------------------------------

/// Lines of a chunk with their 0-based index; the `\n` is removed (a `\r`
/// before it is left for the callers' trimming).
struct ChunkLines<'a> {
    rest: &'a [u8],
    index: u64,
}

impl<'a> ChunkLines<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        ChunkLines {
            rest: bytes,
            index: 0,
        }
    }
}

impl<'a> Iterator for ChunkLines<'a> {
    type Item = (u64, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let line = match memchr::memchr(b'\n', self.rest) {
            Some(p) => {
                let line = &self.rest[..p];
                self.rest = &self.rest[p + 1..];
                line
            }
            None => std::mem::take(&mut self.rest),
        };
        let index = self.index;
        self.index += 1;
        Some((index, line))
    }
}

/// Fields of a line separated by runs of ASCII whitespace.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(line: &'a [u8]) -> Self {
        Fields { rest: line }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|b| !b.is_ascii_whitespace())?;
        let rest = &self.rest[start..];
        let len = rest
            .iter()
            .position(|b| b.is_ascii_whitespace())
            .unwrap_or(rest.len());
        self.rest = &rest[len..];
        Some(&rest[..len])
    }
}

/// Why a field is not an acceptable unsigned integer.
enum UintError {
    /// Not a non-empty string of ASCII digits.
    Invalid,
    /// Digits only, but larger than `u64::MAX`.
    Overflow,
}

/// Parses a non-empty string of ASCII decimal digits (no sign).
fn parse_u64(field: &[u8]) -> Result<u64, UintError> {
    if field.is_empty() {
        return Err(UintError::Invalid);
    }
    let mut value: u64 = 0;
    let mut overflow = false;
    for &b in field {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return Err(UintError::Invalid);
        }
        if !overflow {
            match value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit)))
            {
                Some(v) => value = v,
                None => overflow = true,
            }
        }
    }
    if overflow {
        Err(UintError::Overflow)
    } else {
        Ok(value)
    }
}

/// Longest excerpt of a field quoted in an error message.
const MAX_QUOTED: usize = 40;

/// A field quoted in an error message: lossily decoded, cut short if long.
fn quote(field: &[u8]) -> String {
    let text = String::from_utf8_lossy(field);
    if text.chars().count() <= MAX_QUOTED {
        text.into_owned()
    } else {
        let mut short: String = text.chars().take(MAX_QUOTED).collect();
        short.push_str("...");
        short
    }
}

/// Counts all fields of a line (for error messages).
fn field_count(line: &[u8]) -> usize {
    Fields::new(line).count()
}

/// Initial capacity for the output of a chunk whose lines are typically
/// `line_len` bytes long (the vector grows if they are shorter).
fn capacity_hint(bytes: &[u8], line_len: usize) -> usize {
    bytes.len() / line_len.max(1)
}

// ---------------------------------------------------------------------------
// SNAP edge lists
// ---------------------------------------------------------------------------

/// Result of parsing a chunk of an edge list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EdgeChunk {
    /// The edges `(src, dst)` of the lines before the first error, in order.
    pub edges: Vec<(u32, u32)>,
    /// The first error: 0-based line index within the chunk and reason.
    pub error: Option<(u64, String)>,
}

/// Largest accepted vertex id (ids are `u32`; `u32::MAX` is reserved).
pub const MAX_VERTEX_ID: u64 = u32::MAX as u64 - 1;

/// Parses a vertex id field of a SNAP edge list.
fn parse_vertex_id(field: &[u8]) -> Result<u32, String> {
    match parse_u64(field) {
        Ok(v) if v <= MAX_VERTEX_ID => Ok(v as u32),
        Ok(_) | Err(UintError::Overflow) => Err(format!(
            "vertex id {} out of range (max {MAX_VERTEX_ID})",
            quote(field)
        )),
        Err(UintError::Invalid) => Err(format!("invalid vertex id '{}'", quote(field))),
    }
}

/// Reads a run of at most 10 ASCII digits at `*pos` of `bytes` (enough for any id up to
/// [`MAX_VERTEX_ID`] without overflow). `None` if there is no digit or more than 10.
#[inline(always)]
fn id_digits(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let start = *pos;
    let mut value = 0u64;
    while let Some(&b) = bytes.get(*pos) {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        value = value * 10 + u64::from(digit);
        *pos += 1;
    }
    (*pos > start && *pos - start <= 10).then_some(value)
}

/// Fast path for the common well-formed line `DIGITS (SPACE|TAB)+ DIGITS` starting at `pos`
/// and ending with `\n`, `\r\n` or the end of `bytes`: the edge and where the next line starts.
/// `None` sends the line to the general parser (which also produces the error messages), e.g.
/// for leading or trailing blanks, comments, a third field or an id above [`MAX_VERTEX_ID`].
/// One pass over the bytes: no search for the line's end first.
#[inline(always)]
fn fast_snap_at(bytes: &[u8], pos: usize) -> Option<((u32, u32), usize)> {
    let mut p = pos;
    let src = id_digits(bytes, &mut p)?;
    let gap = p;
    while matches!(bytes.get(p), Some(b' ' | b'\t')) {
        p += 1;
    }
    if p == gap {
        return None;
    }
    let dst = id_digits(bytes, &mut p)?;
    let next = match bytes.get(p) {
        None => p,
        Some(b'\n') => p + 1,
        Some(b'\r') if bytes.get(p + 1) == Some(&b'\n') => p + 2,
        Some(_) => return None,
    };
    if src > MAX_VERTEX_ID || dst > MAX_VERTEX_ID {
        return None;
    }
    Some(((src as u32, dst as u32), next))
}

/// [`fast_snap_at`] for one line without its line end (already trimmed).
fn fast_snap_line(line: &[u8]) -> Option<(u32, u32)> {
    fast_snap_at(line, 0)
        .filter(|&(_, next)| next == line.len())
        .map(|(edge, _)| edge)
}

/// Parses one SNAP line that is known not to be blank or a comment.
fn parse_snap_line(line: &[u8]) -> Result<(u32, u32), String> {
    if let Some(edge) = fast_snap_line(line) {
        return Ok(edge);
    }
    let mut fields = Fields::new(line);
    let (src, dst) = match (fields.next(), fields.next(), fields.next()) {
        (Some(src), Some(dst), None) => (src, dst),
        _ => {
            return Err(format!(
                "expected 2 fields 'src dst', found {}",
                field_count(line)
            ))
        }
    };
    Ok((parse_vertex_id(src)?, parse_vertex_id(dst)?))
}

/// Parses a chunk of a SNAP edge list.
///
/// Each line is `src dst`, two non-negative decimal integers separated by
/// ASCII whitespace (spaces or tabs); a trailing `\r` is ignored. Lines that
/// are empty, whitespace-only, or whose first non-blank character is `#` are
/// skipped. Parsing stops at the first bad line, which is reported with one
/// of these reasons:
///
/// - `expected 2 fields 'src dst', found N` (fewer or more than two fields),
/// - `invalid vertex id 'abc'` (not a string of decimal digits),
/// - `vertex id 99999999999 out of range (max 4294967294)` (above
///   [`MAX_VERTEX_ID`]).
pub fn parse_snap_chunk(bytes: &[u8]) -> EdgeChunk {
    let mut edges = Vec::with_capacity(capacity_hint(bytes, 16));
    let error = parse_snap_chunk_into(bytes, &mut edges);
    EdgeChunk { edges, error }
}

/// [`parse_snap_chunk`] appending to `edges` (a buffer reused across chunks saves allocating
/// and faulting in fresh memory for each): the first error, if any, after the edges of the
/// lines before it.
pub fn parse_snap_chunk_into(bytes: &[u8], edges: &mut Vec<(u32, u32)>) -> Option<(u64, String)> {
    let mut pos = 0;
    let mut index = 0u64;
    while pos < bytes.len() {
        if let Some((edge, next)) = fast_snap_at(bytes, pos) {
            edges.push(edge);
            pos = next;
            index += 1;
            continue;
        }
        let end = memchr::memchr(b'\n', &bytes[pos..]).map_or(bytes.len(), |p| pos + p);
        let line = bytes[pos..end].trim_ascii();
        pos = (end + 1).min(bytes.len());
        if !line.is_empty() && line[0] != b'#' {
            match parse_snap_line(line) {
                Ok(edge) => edges.push(edge),
                Err(reason) => return Some((index, reason)),
            }
        }
        index += 1;
    }
    None
}

// ---------------------------------------------------------------------------
// Matrix Market
// ---------------------------------------------------------------------------

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

/// Result of parsing a chunk of Matrix Market entries.
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

/// Parses a 1-based matrix index and checks it against `1..=limit`.
fn parse_mtx_index(field: &[u8], what: &str, limit: u64) -> Result<u32, String> {
    match parse_u64(field) {
        // limit <= MAX_VERTEX_ID + 1, so v - 1 fits in u32.
        Ok(v) if v >= 1 && v <= limit => Ok((v - 1) as u32),
        Ok(_) | Err(UintError::Overflow) => Err(format!(
            "{what} index {} out of range 1..={limit}",
            quote(field)
        )),
        Err(UintError::Invalid) => Err(format!("invalid {what} index '{}'", quote(field))),
    }
}

/// Checks a value field: it must parse as an `f64` (which covers integer
/// matrices too); the value itself is ignored.
fn check_mtx_value(field: &[u8]) -> Result<(), String> {
    match std::str::from_utf8(field).map(str::parse::<f64>) {
        Ok(Ok(_)) => Ok(()),
        _ => Err(format!("invalid value '{}'", quote(field))),
    }
}

/// Parses one entry line (not blank, not a comment).
fn parse_mtx_line(line: &[u8], header: &MtxHeader) -> Result<(u32, u32), String> {
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
    let i = parse_mtx_index(row, "row", header.rows)?;
    let j = parse_mtx_index(col, "column", header.cols)?;
    if let Some(v) = value {
        // The header does not record real vs integer, so any number is
        // accepted for either value type.
        check_mtx_value(v)?;
    }
    Ok((i, j))
}

/// Parses a chunk of Matrix Market coordinate entries.
///
/// Each entry line is `i j` for pattern matrices and `i j value` otherwise,
/// with 1-based indices `1 <= i <= rows`, `1 <= j <= cols`; the value must
/// parse as a number but is otherwise ignored. The output edges are 0-based
/// `(i - 1, j - 1)`; for symmetric matrices an off-diagonal entry also adds
/// `(j - 1, i - 1)`. Blank lines and lines whose first non-blank character
/// is `%` are skipped. Parsing stops at the first bad line, reported with
/// one of these reasons:
///
/// - `expected 3 fields 'row col value', found 2` (or `expected 2 fields
///   'row col', ...` for pattern matrices),
/// - `invalid row index 'x'`, `invalid column index 'x'`,
/// - `row index 7 out of range 1..=5` (also for 0), likewise `column index`,
/// - `invalid value 'x'`.
pub fn parse_mtx_chunk(bytes: &[u8], header: &MtxHeader) -> MtxChunk {
    let per_entry = if header.symmetric { 2 } else { 1 };
    let mut edges = Vec::with_capacity(capacity_hint(bytes, 16) * per_entry);
    let mut entries = 0u64;
    for (index, line) in ChunkLines::new(bytes) {
        let line = line.trim_ascii();
        if line.is_empty() || line[0] == b'%' {
            continue;
        }
        match parse_mtx_line(line, header) {
            Ok((i, j)) => {
                edges.push((i, j));
                if header.symmetric && i != j {
                    edges.push((j, i));
                }
                entries += 1;
            }
            Err(reason) => {
                return MtxChunk {
                    edges,
                    entries,
                    error: Some((index, reason)),
                }
            }
        }
    }
    MtxChunk {
        edges,
        entries,
        error: None,
    }
}

// ---------------------------------------------------------------------------
// CSV points
// ---------------------------------------------------------------------------

/// Dimension of a CSV point file: the number of comma-separated fields of
/// its first non-blank line, with that line's 1-based number.
///
/// Reads only up to the end of that line. A file with no non-blank line is
/// rejected with the file-level error `no data rows`.
pub fn csv_dimension(path: &Path) -> Result<(usize, u64), InputError> {
    let file = File::open(path).map_err(|e| InputError::io(path, &e))?;
    let mut reader = BufReader::new(file);
    let mut line: u64 = 1;
    let mut commas: usize = 0;
    let mut non_blank = false;
    loop {
        let avail = match reader.fill_buf() {
            Ok(avail) => avail,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(InputError::io(path, &e)),
        };
        if avail.is_empty() {
            break;
        }
        let len = avail.len();
        for &b in avail {
            match b {
                b'\n' if non_blank => return Ok((commas + 1, line)),
                b'\n' => {
                    line += 1;
                    commas = 0;
                }
                b',' => {
                    commas += 1;
                    non_blank = true;
                }
                b if !b.is_ascii_whitespace() => non_blank = true,
                _ => {}
            }
        }
        reader.consume(len);
    }
    if non_blank {
        Ok((commas + 1, line))
    } else {
        Err(InputError::new(path, None, "no data rows"))
    }
}

/// Result of parsing a chunk of a CSV point file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PointChunk {
    /// Coordinates of the rows before the first error, row-major
    /// (`rows * dim` values).
    pub values: Vec<f64>,
    /// Number of rows parsed.
    pub rows: u64,
    /// The first error: 0-based line index within the chunk and reason.
    pub error: Option<(u64, String)>,
}

/// Parses one CSV row (not blank) into `out`.
fn parse_csv_line(line: &[u8], dim: usize, out: &mut Vec<f64>) -> Result<(), String> {
    let found = line.iter().filter(|&&b| b == b',').count() + 1;
    if found != dim {
        return Err(format!("expected {dim} values, found {found}"));
    }
    for (col, field) in line.split(|&b| b == b',').enumerate() {
        let field = field.trim_ascii();
        let value = std::str::from_utf8(field)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(|| format!("invalid number '{}' in column {}", quote(field), col + 1))?;
        if !value.is_finite() {
            return Err(format!(
                "non-finite value '{}' in column {}",
                quote(field),
                col + 1
            ));
        }
        out.push(value);
    }
    Ok(())
}

/// Parses a chunk of a CSV point file: one point per line, `dim`
/// comma-separated numbers (spaces around them allowed), no header line.
/// Blank lines are skipped. Parsing stops at the first bad line, reported
/// with one of these reasons (columns are 1-based):
///
/// - `expected D values, found E`,
/// - `invalid number 'x' in column 3`,
/// - `non-finite value 'nan' in column 2` (NaN and infinities are rejected).
pub fn parse_csv_chunk(bytes: &[u8], dim: usize) -> PointChunk {
    let mut values = Vec::new();
    let mut rows = 0u64;
    for (index, line) in ChunkLines::new(bytes) {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let before = values.len();
        if let Err(reason) = parse_csv_line(line, dim, &mut values) {
            values.truncate(before);
            return PointChunk {
                values,
                rows,
                error: Some((index, reason)),
            };
        }
        rows += 1;
    }
    PointChunk {
        values,
        rows,
        error: None,
    }
}

// ---------------------------------------------------------------------------
// Atomic output
// ---------------------------------------------------------------------------

/// Distinguishes temporary files created by one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Temporary output files that exist now (removed by [`remove_temporary_outputs`]).
static TEMPORARIES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn temporaries() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes every temporary output file that an [`AtomicFile`] of this process has not
/// committed yet: for a signal handler that ends the process without unwinding.
pub fn remove_temporary_outputs() {
    for path in temporaries().drain(..) {
        let _ = std::fs::remove_file(path);
    }
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// `path` with symbolic links followed to what they name (the link itself is never replaced):
/// the final target, which need not exist.
pub fn resolve_output(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)?;
                p = if target.is_absolute() {
                    target
                } else {
                    parent_dir(&p).join(target)
                };
            }
            _ => return Ok(p),
        }
    }
    Err(invalid_input(format!(
        "'{}': too many levels of symbolic links",
        path.display()
    )))
}

/// How an output is written.
#[derive(Debug)]
enum Target {
    /// A regular file (or a new one): through a temporary file renamed over it when complete.
    Replace { temp: PathBuf, committed: bool },
    /// Anything else that can be written (a character device such as `/dev/null`, a FIFO):
    /// directly; it is never replaced.
    Direct,
}

/// An output file that appears under its final name only when complete.
///
/// # Semantics
/// For a regular file or a path that does not exist yet, data goes to a hidden temporary file
/// `.NAME.tmp-PID-N` in the same directory; [`AtomicFile::commit`] flushes it, syncs it to
/// disk and renames it over the final path. Dropping an `AtomicFile` without committing it (or
/// after a failed commit) removes the temporary file, so a failed run leaves no partial output
/// behind. A symbolic link is followed and its target written (the link stays). Anything else
/// that can be written — a character device such as `/dev/null`, a FIFO — is written directly
/// and never replaced.
#[derive(Debug)]
pub struct AtomicFile {
    /// Final path (symbolic links followed).
    path: PathBuf,
    target: Target,
    /// Writer to the temporary file or the target.
    writer: BufWriter<File>,
}

impl AtomicFile {
    /// Opens the output `path` (which must name a file, not end in `..` or `/`). A regular
    /// file there is not touched until [`commit`](Self::commit).
    ///
    /// # Errors
    /// `path` is a directory, its directory does not exist or cannot be written, or it names
    /// something that cannot be opened for writing.
    pub fn create(path: &Path) -> io::Result<Self> {
        let path = resolve_output(path)?;
        let name = path
            .file_name()
            .ok_or_else(|| invalid_input(format!("'{}' does not name a file", path.display())))?
            .to_os_string();
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => {
                return Err(invalid_input(format!(
                    "'{}' is a directory",
                    path.display()
                )))
            }
            Ok(m) if !m.is_file() => {
                let file = OpenOptions::new().write(true).open(&path)?;
                return Ok(AtomicFile {
                    path,
                    target: Target::Direct,
                    writer: BufWriter::new(file),
                });
            }
            _ => {}
        }
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut temp_name = OsString::from(".");
        temp_name.push(&name);
        temp_name.push(format!(".tmp-{}-{n}", std::process::id()));
        let temp = parent_dir(&path).join(temp_name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        temporaries().push(temp.clone());
        Ok(AtomicFile {
            path,
            target: Target::Replace {
                temp,
                committed: false,
            },
            writer: BufWriter::new(file),
        })
    }

    /// The buffered writer.
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        &mut self.writer
    }

    /// Flushes the data; for a regular file, syncs it, renames the temporary file to the final
    /// path (replacing any file there), then syncs the directory so the rename is durable. On
    /// error the temporary file is removed and the final path is left as it was.
    pub fn commit(mut self) -> io::Result<()> {
        self.writer.flush()?;
        let Target::Replace { temp, committed } = &mut self.target else {
            return Ok(());
        };
        self.writer.get_ref().sync_all()?;
        std::fs::rename(&*temp, &self.path)?;
        *committed = true;
        temporaries().retain(|t| t != temp);
        // Best effort: the data is already in place under its final name.
        if let Ok(dir) = File::open(parent_dir(&self.path)) {
            let _ = dir.sync_all();
        }
        Ok(())
    }

    /// The final path of the file (symbolic links followed).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file that receives the data until [`commit`](Self::commit) (the temporary file, or
    /// the target itself when it is written directly); other writers (ranks writing their
    /// parts in turn) may append to it.
    pub fn temp_path(&self) -> &Path {
        match &self.target {
            Target::Replace { temp, .. } => temp,
            Target::Direct => &self.path,
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Target::Replace {
            temp,
            committed: false,
        } = &self.target
        {
            // Nothing useful can be done about a failure here.
            let _ = std::fs::remove_file(temp);
            temporaries().retain(|t| t != temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(content: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("create temp file");
        f.write_all(content).expect("write temp file");
        f.flush().expect("flush temp file");
        f
    }

    fn err(index: u64, reason: &str) -> Option<(u64, String)> {
        Some((index, reason.to_string()))
    }

    // --- InputError ------------------------------------------------------

    #[test]
    fn input_error_display() {
        let e = InputError::new("g.txt", Some(12), "bad line");
        assert_eq!(e.to_string(), "g.txt:12: bad line");
        let e = InputError::new("g.txt", None, "no data rows");
        assert_eq!(e.to_string(), "g.txt: no data rows");
    }

    #[test]
    fn input_error_io_reason() {
        let missing = std::io::Error::from_raw_os_error(2);
        let e = InputError::io("/nope", &missing);
        assert_eq!(e.line, None);
        assert_eq!(
            e.reason,
            "cannot open: No such file or directory (os error 2)"
        );
        let other = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "short read");
        assert_eq!(InputError::io("x", &other).reason, "I/O error: short read");
    }

    // --- splitting -------------------------------------------------------

    #[test]
    fn count_lines_edges() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a"), 1);
        assert_eq!(count_lines(b"a\n"), 1);
        assert_eq!(count_lines(b"a\nb"), 2);
        assert_eq!(count_lines(b"\n\n"), 2);
        assert_eq!(count_lines(b"a\r\nb\r\n"), 2);
        // Agrees with the parsers' line indices.
        assert_eq!(
            ChunkLines::new(b"a\n\nb").count() as u64,
            count_lines(b"a\n\nb")
        );
    }

    /// Checks that the parts tile `[data_start, len)` on line boundaries.
    fn check_partition(content: &[u8], data_start: u64, parts: usize) {
        let f = temp_file(content);
        let file = f.as_file();
        let len = content.len() as u64;
        let mut expected_start = data_start;
        let mut joined = Vec::new();
        for part in 0..parts {
            let (start, end) =
                line_aligned_range(file, data_start, len, part, parts).expect("range");
            assert_eq!(start, expected_start, "parts={parts} part={part}");
            assert!(start <= end && end <= len);
            assert!(
                start == data_start || start == len || content[start as usize - 1] == b'\n',
                "part {part} of {parts} starts mid-line at {start}"
            );
            joined.extend(read_range(file, start, end).expect("read"));
            expected_start = end;
        }
        assert_eq!(expected_start, len);
        assert_eq!(joined, &content[data_start as usize..]);
    }

    #[test]
    fn line_aligned_ranges_tile_the_data() {
        let content = b"header\n1 2\n3 4\n\n55 66\n7 8\nlast line no newline";
        for parts in 1..=12 {
            check_partition(content, 0, parts);
            check_partition(content, 7, parts);
            check_partition(content, content.len() as u64, parts);
        }
        check_partition(b"", 0, 3);
        check_partition(b"\n\n\n\n", 0, 4);
    }

    #[test]
    fn line_aligned_range_exact_cuts() {
        // 4 lines of 4 bytes: cuts at 4, 8, 12 are already line starts.
        let content = b"aaa\nbbb\nccc\nddd\n";
        let f = temp_file(content);
        let ranges: Vec<_> = (0..4)
            .map(|p| line_aligned_range(f.as_file(), 0, 16, p, 4).expect("range"))
            .collect();
        assert_eq!(ranges, vec![(0, 4), (4, 8), (8, 12), (12, 16)]);
        // A nominal cut one byte into a line moves past that line.
        let ranges: Vec<_> = (0..3)
            .map(|p| line_aligned_range(f.as_file(), 0, 16, p, 3).expect("range"))
            .collect();
        // Nominal cuts 5 and 10 -> 8 and 12.
        assert_eq!(ranges, vec![(0, 8), (8, 12), (12, 16)]);
    }

    #[test]
    fn line_aligned_range_long_line_and_empty_parts() {
        // One line much longer than a scan block, then a short one.
        let mut content = vec![b'x'; 3 * SCAN_BLOCK + 17];
        content.extend_from_slice(b"\nshort\n");
        let f = temp_file(&content);
        let len = content.len() as u64;
        let first_end = 3 * SCAN_BLOCK as u64 + 18;
        let ranges: Vec<_> = (0..4)
            .map(|p| line_aligned_range(f.as_file(), 0, len, p, 4).expect("range"))
            .collect();
        assert_eq!(ranges[0], (0, first_end));
        assert_eq!(ranges[1], (first_end, first_end));
        assert_eq!(ranges[2], (first_end, first_end));
        assert_eq!(ranges[3], (first_end, len));
        check_partition(&content, 0, 7);
    }

    #[test]
    fn line_aligned_range_rejects_bad_arguments() {
        let f = temp_file(b"a\nb\n");
        let kind = |r: std::io::Result<(u64, u64)>| r.map_err(|e| e.kind());
        let invalid = Err(std::io::ErrorKind::InvalidInput);
        assert_eq!(kind(line_aligned_range(f.as_file(), 0, 4, 0, 0)), invalid);
        assert_eq!(kind(line_aligned_range(f.as_file(), 0, 4, 2, 2)), invalid);
        assert_eq!(kind(line_aligned_range(f.as_file(), 5, 4, 0, 1)), invalid);
    }

    #[test]
    fn read_range_reads_and_rejects() {
        let f = temp_file(b"0123456789");
        assert_eq!(read_range(f.as_file(), 2, 5).expect("read"), b"234");
        assert_eq!(read_range(f.as_file(), 7, 7).expect("read"), b"");
        let e = read_range(f.as_file(), 5, 2).expect_err("reversed range");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        let e = read_range(f.as_file(), 8, 20).expect_err("past end");
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    }

    // --- SNAP --------------------------------------------------------------

    #[test]
    fn snap_parses_edges_skipping_comments_and_blanks() {
        let input = b"# Directed graph\n# Nodes: 4\n0\t1\r\n  2   3  \n\n   \n\t# indented\n4294967294 0\n7 7";
        let chunk = parse_snap_chunk(input);
        assert_eq!(chunk.error, None);
        assert_eq!(
            chunk.edges,
            vec![(0, 1), (2, 3), (4_294_967_294, 0), (7, 7)]
        );
    }

    #[test]
    fn snap_fast_and_general_paths_agree() {
        // Leading zeros beyond 10 digits go through the general parser.
        let chunk = parse_snap_chunk(b"000000000007 0000000000008\n9999999999 1\n");
        assert_eq!(chunk.edges, vec![(7, 8)]);
        assert_eq!(
            chunk.error,
            err(1, "vertex id 9999999999 out of range (max 4294967294)")
        );
        assert_eq!(fast_snap_line(b"12 34"), Some((12, 34)));
        assert_eq!(fast_snap_line(b"12 \t 34"), Some((12, 34)));
        assert_eq!(fast_snap_line(b"1234"), None);
        assert_eq!(fast_snap_line(b"12 34 5"), None);
        assert_eq!(fast_snap_line(b"12 3x"), None);
        assert_eq!(fast_snap_line(b"4294967295 1"), None);
    }

    /// A line-by-line parse with the standard library's splitting and integer parsing: the
    /// edges, or the 0-based line of the first bad line.
    fn snap_reference(bytes: &[u8]) -> Result<Vec<(u32, u32)>, u64> {
        let text = std::str::from_utf8(bytes).expect("ASCII test input");
        let mut edges = Vec::new();
        for (i, line) in text.split_terminator('\n').enumerate() {
            let line = line.trim_ascii();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let id = |f: &str| {
                f.bytes()
                    .all(|b| b.is_ascii_digit())
                    .then(|| f.parse::<u64>().ok())
                    .flatten()
                    .filter(|&v| v <= MAX_VERTEX_ID)
            };
            match fields[..] {
                [a, b] => match (id(a), id(b)) {
                    (Some(a), Some(b)) => edges.push((a as u32, b as u32)),
                    _ => return Err(i as u64),
                },
                _ => return Err(i as u64),
            }
        }
        Ok(edges)
    }

    #[test]
    fn snap_chunks_agree_with_a_line_by_line_reference() {
        // Random chunks of well-formed lines and every irregularity the fast path hands to the
        // general parser: blanks around and between fields, CR LF, form feeds, comments, long
        // and leading-zero ids, ids out of range, a third field, a missing last newline.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for case in 0..400 {
            let mut text = String::new();
            let lines = 1 + next(40);
            for _ in 0..lines {
                let id = |r: u64| match r {
                    0 => "0".to_string(),
                    1 => "4294967294".to_string(),
                    2 => "4294967295".to_string(),
                    3 => "0000000000042".to_string(),
                    _ => (r * 7919 % 100_000).to_string(),
                };
                let (a, b) = (id(next(40)), id(next(40)));
                let sep = [" ", "\t", "  ", " \t ", "\x0c"][next(5) as usize];
                let line = match next(24) {
                    0 => String::new(),
                    1 => "# a comment 1 2".to_string(),
                    2 => format!("  {a}{sep}{b}"),
                    3 => format!("{a}{sep}{b} \t"),
                    4 => format!("{a}{sep}{b}\r"),
                    5 if case % 4 == 0 => format!("{a}{sep}{b}{sep}9"),
                    6 if case % 4 == 1 => format!("{a}x{sep}{b}"),
                    7 if case % 4 == 2 => a.to_string(),
                    _ => format!("{a}{sep}{b}"),
                };
                text.push_str(&line);
                text.push('\n');
            }
            if next(2) == 0 {
                text.pop();
            }
            let chunk = parse_snap_chunk(text.as_bytes());
            match snap_reference(text.as_bytes()) {
                Ok(edges) => {
                    assert_eq!(chunk.error, None, "{text:?}");
                    assert_eq!(chunk.edges, edges, "{text:?}");
                }
                Err(line) => {
                    assert_eq!(chunk.error.map(|(l, _)| l), Some(line), "{text:?}");
                    // The edges of the lines before the bad one.
                    let prefix = match line {
                        0 => 0,
                        l => {
                            text.match_indices('\n')
                                .nth(l as usize - 1)
                                .expect("line end")
                                .0
                                + 1
                        }
                    };
                    let before = snap_reference(&text.as_bytes()[..prefix]);
                    assert_eq!(Ok(chunk.edges), before, "{text:?}");
                }
            }
        }
    }

    #[test]
    fn snap_empty_chunk() {
        assert_eq!(parse_snap_chunk(b""), EdgeChunk::default());
        assert_eq!(parse_snap_chunk(b"\n\n# c\n").edges, vec![]);
    }

    #[test]
    fn snap_errors_name_line_and_reason() {
        let chunk = parse_snap_chunk(b"1 2\n# c\n3\n4 5\n");
        assert_eq!(chunk.edges, vec![(1, 2)]);
        assert_eq!(chunk.error, err(2, "expected 2 fields 'src dst', found 1"));

        let chunk = parse_snap_chunk(b"1 2\n3 4 5\n");
        assert_eq!(chunk.error, err(1, "expected 2 fields 'src dst', found 3"));
        let chunk = parse_snap_chunk(b"1 2 3 4 5\n");
        assert_eq!(chunk.error, err(0, "expected 2 fields 'src dst', found 5"));

        let chunk = parse_snap_chunk(b"1 2\n\nabc 4\n");
        assert_eq!(chunk.error, err(2, "invalid vertex id 'abc'"));
        assert_eq!(
            parse_snap_chunk(b"1 -1").error,
            err(0, "invalid vertex id '-1'")
        );
        assert_eq!(
            parse_snap_chunk(b"1 +1").error,
            err(0, "invalid vertex id '+1'")
        );
        assert_eq!(
            parse_snap_chunk(b"1 2.0").error,
            err(0, "invalid vertex id '2.0'")
        );
        assert_eq!(
            parse_snap_chunk(b"1 99999999999").error,
            err(0, "vertex id 99999999999 out of range (max 4294967294)")
        );
        assert_eq!(
            parse_snap_chunk(b"4294967295 1").error,
            err(0, "vertex id 4294967295 out of range (max 4294967294)")
        );
        // Beyond u64 is still "out of range", not "invalid".
        assert_eq!(
            parse_snap_chunk(b"1 123456789012345678901234567890").error,
            err(
                0,
                "vertex id 123456789012345678901234567890 out of range (max 4294967294)"
            )
        );
        // Invalid UTF-8 does not panic.
        assert_eq!(
            parse_snap_chunk(b"1 \xff\n").error,
            err(0, "invalid vertex id '\u{fffd}'")
        );
    }

    #[test]
    fn snap_long_field_is_quoted_short() {
        let mut line = b"1 ".to_vec();
        line.extend(std::iter::repeat_n(b'z', 1000));
        let (_, reason) = parse_snap_chunk(&line).error.expect("error");
        assert_eq!(reason, format!("invalid vertex id '{}...'", "z".repeat(40)));
    }

    #[test]
    fn snap_global_line_numbers_across_parts() {
        let mut content = Vec::new();
        for i in 0..200u32 {
            if i % 7 == 0 {
                content.extend_from_slice(b"# comment\n");
            }
            content.extend_from_slice(format!("{i} {}\n", i + 1).as_bytes());
        }
        // Line 150 (1-based) is bad.
        let mut lines: Vec<&[u8]> = content.split(|&b| b == b'\n').collect();
        lines[149] = b"oops 1";
        let edges_before_error = lines[..149].iter().filter(|l| l[0] != b'#').count();
        let content = lines.join(&b'\n');
        let f = temp_file(&content);
        let len = content.len() as u64;
        for parts in [1, 2, 3, 5, 16] {
            let mut lines_before = 0;
            let mut edges = Vec::new();
            let mut first_error = None;
            for part in 0..parts {
                let (s, e) = line_aligned_range(f.as_file(), 0, len, part, parts).expect("range");
                let bytes = read_range(f.as_file(), s, e).expect("read");
                let chunk = parse_snap_chunk(&bytes);
                edges.extend(chunk.edges);
                if let (None, Some((idx, reason))) = (&first_error, chunk.error) {
                    first_error = Some((lines_before + idx + 1, reason));
                }
                lines_before += count_lines(&bytes);
            }
            assert_eq!(
                first_error,
                Some((150, "invalid vertex id 'oops'".to_string())),
                "parts={parts}"
            );
            assert_eq!(lines_before, count_lines(&content));
            // Every edge before the bad line is parsed, whatever the split.
            assert!(edges.len() >= edges_before_error);
            for (j, &edge) in edges[..edges_before_error].iter().enumerate() {
                assert_eq!(edge, (j as u32, j as u32 + 1));
            }
            if parts == 1 {
                assert_eq!(edges.len(), edges_before_error);
            }
        }
    }

    // --- Matrix Market -------------------------------------------------------

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

    // --- CSV -----------------------------------------------------------------

    fn dimension_of(content: &[u8]) -> Result<(usize, u64), InputError> {
        let f = temp_file(content);
        csv_dimension(f.path())
    }

    #[test]
    fn csv_dimension_finds_first_row() {
        assert_eq!(dimension_of(b"1,2,3\n4,5,6\n").expect("dim"), (3, 1));
        assert_eq!(dimension_of(b"\n  \r\n 1.5 , 2\n").expect("dim"), (2, 3));
        assert_eq!(dimension_of(b"\n\n7").expect("dim"), (1, 3));
        for empty in [&b""[..], b"\n", b"  \n\t\r\n"] {
            let e = dimension_of(empty).expect_err("no rows");
            assert_eq!((e.line, e.reason.as_str()), (None, "no data rows"));
        }
    }

    #[test]
    fn csv_chunk_parses_rows() {
        let c = parse_csv_chunk(b"1,2\n\n 3.5 , -4e2 \r\n  \n0.25,\t6\n", 2);
        assert_eq!(c.error, None);
        assert_eq!(c.rows, 3);
        assert_eq!(c.values, vec![1.0, 2.0, 3.5, -400.0, 0.25, 6.0]);
        assert_eq!(parse_csv_chunk(b"", 3), PointChunk::default());
    }

    #[test]
    fn csv_chunk_errors() {
        let cases: &[(&[u8], usize, u64, &str)] = &[
            (b"1,2,3\n4,5\n", 3, 1, "expected 3 values, found 2"),
            (b"1,2,3,4\n", 3, 0, "expected 3 values, found 4"),
            (b"1,2,x\n", 3, 0, "invalid number 'x' in column 3"),
            (b"1,,3\n", 3, 0, "invalid number '' in column 2"),
            (b"\n1,nan,3\n", 3, 1, "non-finite value 'nan' in column 2"),
            (b"inf,1,1\n", 3, 0, "non-finite value 'inf' in column 1"),
            (
                b"1,2,-Infinity\n",
                3,
                0,
                "non-finite value '-Infinity' in column 3",
            ),
            (b"1,2,\xff\n", 3, 0, "invalid number '\u{fffd}' in column 3"),
        ];
        for (body, dim, index, reason) in cases {
            let c = parse_csv_chunk(body, *dim);
            assert_eq!(
                c.error,
                err(*index, reason),
                "input {:?}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(c.values.len() as u64, c.rows * *dim as u64);
        }
        let c = parse_csv_chunk(b"1,2\n3,4\n5,oops\n", 2);
        assert_eq!(c.rows, 2);
        assert_eq!(c.values, vec![1.0, 2.0, 3.0, 4.0]);
    }

    // --- AtomicFile ------------------------------------------------------------

    fn dir_entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn atomic_file_appears_only_on_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        let mut f = AtomicFile::create(&path).expect("create");
        assert_eq!(f.path(), path);
        f.writer().write_all(b"hello\n").expect("write");
        assert!(!path.exists());
        let names = dir_entries(dir.path());
        assert_eq!(names.len(), 1);
        let prefix = format!(".out.txt.tmp-{}-", std::process::id());
        assert!(names[0].starts_with(&prefix), "{names:?}");
        f.commit().expect("commit");
        assert_eq!(std::fs::read(&path).expect("read"), b"hello\n");
        assert_eq!(dir_entries(dir.path()), vec!["out.txt".to_string()]);
    }

    #[test]
    fn atomic_file_drop_removes_temp_and_keeps_old() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        std::fs::write(&path, b"old").expect("write old");
        {
            let mut f = AtomicFile::create(&path).expect("create");
            f.writer().write_all(b"partial").expect("write");
        }
        assert_eq!(std::fs::read(&path).expect("read"), b"old");
        assert_eq!(dir_entries(dir.path()), vec!["out.txt".to_string()]);

        // Two writers for one path do not collide; the last commit wins.
        let mut a = AtomicFile::create(&path).expect("create a");
        let mut b = AtomicFile::create(&path).expect("create b");
        a.writer().write_all(b"a").expect("write a");
        b.writer().write_all(b"b").expect("write b");
        a.commit().expect("commit a");
        b.commit().expect("commit b");
        assert_eq!(std::fs::read(&path).expect("read"), b"b");
        assert_eq!(dir_entries(dir.path()), vec!["out.txt".to_string()]);
    }

    #[test]
    fn atomic_file_rejects_non_file_paths() {
        let e = AtomicFile::create(Path::new("/")).expect_err("root");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        let dir = tempfile::tempdir().expect("tempdir");
        let e = AtomicFile::create(&dir.path().join("missing/out.txt")).expect_err("no dir");
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
