//! SNAP edge lists: `src dst` per line, `#` comments.
//!
//! A well-formed line (`DIGITS (SPACE|TAB)+ DIGITS`) is parsed in one pass without looking
//! for the line's end first; anything else goes to the general parser, which also writes the
//! reasons.

use super::lex::{capacity_hint, field_count, parse_u64, quote, Fields, UintError};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::split::{count_lines, line_aligned_range, read_range};
    use crate::io::test_support::{err, temp_file};

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
}
