//! CSV point files: one point per line, comma-separated numbers, no header.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use super::error::InputError;
use super::lex::{quote, ChunkLines};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::test_support::{err, temp_file};

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
}
