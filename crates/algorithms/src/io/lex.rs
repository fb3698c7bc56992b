//! Byte-level pieces shared by the format readers: lines of a chunk, whitespace-separated
//! fields, unsigned integers, indices and values, and quoting a field in a reason.
//!
//! Nothing here allocates per line or panics on malformed bytes (invalid UTF-8 included).

/// Lines of a chunk with their 0-based index; the `\n` is removed (a `\r`
/// before it is left for the callers' trimming).
pub(super) struct ChunkLines<'a> {
    rest: &'a [u8],
    index: u64,
}

impl<'a> ChunkLines<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
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
pub(super) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    pub(super) fn new(line: &'a [u8]) -> Self {
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
pub(super) enum UintError {
    /// Not a non-empty string of ASCII digits.
    Invalid,
    /// Digits only, but larger than `u64::MAX`.
    Overflow,
}

/// Parses a non-empty string of ASCII decimal digits (no sign).
pub(super) fn parse_u64(field: &[u8]) -> Result<u64, UintError> {
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
pub(super) fn quote(field: &[u8]) -> String {
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
pub(super) fn field_count(line: &[u8]) -> usize {
    Fields::new(line).count()
}

/// Initial capacity for the output of a chunk whose lines are typically
/// `line_len` bytes long (the vector grows if they are shorter).
pub(super) fn capacity_hint(bytes: &[u8], line_len: usize) -> usize {
    bytes.len() / line_len.max(1)
}

/// Parses a 1-based index and checks it against `1..=limit` (`limit <= 2^32`); returns it
/// 0-based. `what` names the index in the reasons: `invalid row index 'x'`,
/// `row index 7 out of range 1..=5` (also for 0 and for numbers beyond `u64`).
pub(super) fn parse_index(field: &[u8], what: &str, limit: u64) -> Result<u32, String> {
    match parse_u64(field) {
        // limit <= 2^32, so v - 1 fits in u32.
        Ok(v) if v >= 1 && v <= limit => Ok((v - 1) as u32),
        Ok(_) | Err(UintError::Overflow) => Err(format!(
            "{what} index {} out of range 1..={limit}",
            quote(field)
        )),
        Err(UintError::Invalid) => Err(format!("invalid {what} index '{}'", quote(field))),
    }
}

/// Parses a value field as an `f64` (integers too); with `finite`, NaN and infinities are
/// rejected as well. The reason is `invalid value 'x'`.
pub(super) fn parse_value(field: &[u8], finite: bool) -> Result<f64, String> {
    match std::str::from_utf8(field).map(str::parse::<f64>) {
        Ok(Ok(v)) if !finite || v.is_finite() => Ok(v),
        _ => Err(format!("invalid value '{}'", quote(field))),
    }
}
