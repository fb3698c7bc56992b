//! Splitting a file into line-aligned parts, one per rank, and reading a part.
//!
//! Every rank reads a disjoint, line-aligned byte range of a file ([`line_aligned_range`],
//! [`read_range`]); [`count_lines`] counts the lines of a chunk the way the chunk parsers
//! number them, so a parser's 0-based index within a chunk becomes a global line number.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Size of the blocks read while looking for the end of a line.
const SCAN_BLOCK: usize = 64 * 1024;

pub(super) fn invalid_input(msg: String) -> io::Error {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::lex::ChunkLines;
    use crate::io::test_support::temp_file;

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
}
