//! The manifest of a complete checkpoint: what it holds, in a text form that carries its
//! own checksum, so a torn or damaged manifest is never taken for a valid one.

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

pub(crate) const MAGIC: &str = "spillway checkpoint v1";

/// Length and checksum of one rank's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    /// Bytes.
    pub len: u64,
    /// XXH3-64 of the bytes.
    pub checksum: u64,
}

/// The manifest of a complete checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Sequence number (the callers here use the iteration count).
    pub seq: u64,
    /// The fingerprint of the job that wrote it.
    pub fingerprint: String,
    /// One entry per rank.
    pub parts: Vec<PartInfo>,
}

impl Manifest {
    pub(crate) fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "{MAGIC}");
        let _ = writeln!(s, "seq {}", self.seq);
        let _ = writeln!(s, "ranks {}", self.parts.len());
        let _ = writeln!(s, "fingerprint {}", escape(&self.fingerprint));
        for (r, p) in self.parts.iter().enumerate() {
            let _ = writeln!(s, "part {r} {} {:016x}", p.len, p.checksum);
        }
        let sum = xxh3_64(s.as_bytes());
        let _ = writeln!(s, "end {sum:016x}");
        s
    }

    /// Parses a manifest; `None` if it is torn, damaged or not a manifest.
    pub(crate) fn parse(text: &str) -> Option<Manifest> {
        let body_end = text.strip_suffix('\n')?.rfind('\n')? + 1;
        let (body, last) = text.split_at(body_end);
        let sum =
            u64::from_str_radix(last.strip_prefix("end ")?.trim_end_matches('\n'), 16).ok()?;
        if xxh3_64(body.as_bytes()) != sum {
            return None;
        }
        let mut lines = body.lines();
        if lines.next()? != MAGIC {
            return None;
        }
        let seq = lines.next()?.strip_prefix("seq ")?.parse().ok()?;
        let ranks: usize = lines.next()?.strip_prefix("ranks ")?.parse().ok()?;
        let fingerprint = unescape(lines.next()?.strip_prefix("fingerprint ")?)?;
        let mut parts = Vec::with_capacity(ranks);
        for r in 0..ranks {
            let mut f = lines.next()?.strip_prefix("part ")?.split(' ');
            if f.next()?.parse::<usize>().ok()? != r {
                return None;
            }
            let len = f.next()?.parse().ok()?;
            let checksum = u64::from_str_radix(f.next()?, 16).ok()?;
            parts.push(PartInfo { len, checksum });
        }
        if lines.next().is_some() {
            return None;
        }
        Some(Manifest {
            seq,
            fingerprint,
            parts,
        })
    }
}

/// Keeps the manifest one line per field: backslashes and line breaks are escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next()? {
                '\\' => out.push('\\'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}
