//! A rejected input: the file, the line and the reason.

use std::fmt;
use std::io;
use std::path::PathBuf;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
