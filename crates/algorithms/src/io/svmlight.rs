//! SVMlight / libsvm files: one sparse row per line, `label idx:val idx:val ...`.

use super::lex::{parse_index, parse_value, quote, ChunkLines, Fields};

/// Parses a chunk of SVMlight lines, appending every entry as 0-based `(row, column, value)`
/// to `out`; `rows` counts the rows (the row of a chunk's first line is `rows` on entry).
///
/// Every line that is not blank is a row: a numeric label (ignored) and `index:value` pairs
/// with 1-based column indices in increasing order and finite values; `#` starts a comment
/// that runs to the end of the line. Parsing stops at the first bad line, reported as its
/// 0-based index within the chunk with one of these reasons:
///
/// - `invalid label 'x'`,
/// - `expected 'index:value', found 'x'`,
/// - `invalid column index 'x'`, `column index 0 out of range 1..=4294967295`,
/// - `column index 3 is not larger than the previous one`,
/// - `invalid value 'x'` (also for NaN and infinities).
pub(crate) fn parse_svmlight_chunk(
    bytes: &[u8],
    rows: &mut u32,
    out: &mut Vec<(u32, u32, f64)>,
) -> Option<(u64, String)> {
    for (index, line) in ChunkLines::new(bytes) {
        let line = match memchr::memchr(b'#', line) {
            Some(p) => &line[..p],
            None => line,
        }
        .trim_ascii();
        let mut fields = Fields::new(line);
        let Some(label) = fields.next() else {
            continue;
        };
        if label.contains(&b':') || parse_value(label, false).is_err() {
            return Some((index, format!("invalid label '{}'", quote(label))));
        }
        let mut last = 0u64;
        for field in fields {
            let Some(colon) = memchr::memchr(b':', field) else {
                return Some((
                    index,
                    format!("expected 'index:value', found '{}'", quote(field)),
                ));
            };
            let (idx, val) = (&field[..colon], &field[colon + 1..]);
            let j = match parse_index(idx, "column", u64::from(u32::MAX)) {
                Ok(j) => j,
                Err(reason) => return Some((index, reason)),
            };
            if u64::from(j) < last {
                return Some((
                    index,
                    format!(
                        "column index {} is not larger than the previous one",
                        quote(idx)
                    ),
                ));
            }
            last = u64::from(j) + 1;
            match parse_value(val, true) {
                Ok(v) => out.push((*rows, j, v)),
                Err(reason) => return Some((index, reason)),
            }
        }
        *rows += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::test_support::err;

    /// Rows, entries and the first error of a chunk.
    type Parsed = (u32, Vec<(u32, u32, f64)>, Option<(u64, String)>);

    fn parse(bytes: &[u8]) -> Parsed {
        let (mut rows, mut out) = (0, Vec::new());
        let error = parse_svmlight_chunk(bytes, &mut rows, &mut out);
        (rows, out, error)
    }

    #[test]
    fn rows_entries_comments_and_blank_lines() {
        let (rows, out, error) = parse(b"1 1:0.5 3:-2\n\n# comment\n-1 2:4e1 # tail\n0\n");
        assert_eq!(error, None);
        assert_eq!(rows, 3);
        assert_eq!(out, vec![(0, 0, 0.5), (0, 2, -2.0), (1, 1, 40.0)]);
    }

    #[test]
    fn bad_lines_name_their_index_and_reason() {
        let cases: &[(&[u8], u64, &str)] = &[
            (b"1 1:1\nx 1:1\n", 1, "invalid label 'x'"),
            (b"1:1 2:2\n", 0, "invalid label '1:1'"),
            (b"1 2\n", 0, "expected 'index:value', found '2'"),
            (b"1 a:2\n", 0, "invalid column index 'a'"),
            (b"1 0:2\n", 0, "column index 0 out of range 1..=4294967295"),
            (
                b"1 3:1 3:2\n",
                0,
                "column index 3 is not larger than the previous one",
            ),
            (b"\n1 1:nan\n", 1, "invalid value 'nan'"),
            (b"1 1:\n", 0, "invalid value ''"),
        ];
        for (body, index, reason) in cases {
            assert_eq!(
                parse(body).2,
                err(*index, reason),
                "input {:?}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
