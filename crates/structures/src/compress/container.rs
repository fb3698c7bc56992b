//! The compressed file format: a fixed header, zstd-compressed sections, a checksum.
//!
//! ```text
//! offset  size  field
//!      0     4  magic "SPWZ"
//!      4     1  format version (1; version 2 is the predictive method's layout)
//!      5     1  dtype: 4 = f32, 8 = f64
//!      6     1  method: 1 sbd1, 2 sbd2, 3 rbd1, 4 rbd2, 5 rbd3 (6, predict, is version 2)
//!      7     1  encoding: 1 SQE, 2 DE, 3 regions (boundaries + seeds)
//!      8     1  id predictor (SQE): 0 raw, 1 delta, 2 lorenzo, 3 interpolation
//!      9     1  set rule: 1 ball (|x - q| <= eps, range <= 2 eps), 2 range (range <= eps)
//!     10     1  axes: 1-3 for a structured grid, 0 for an unstructured one
//!     11     1  number of sections S
//!     12     8  epsilon (f64)
//!     20     8  points n
//!     28    24  structured: extents of the three axes (1 for missing axes);
//!               unstructured: edges, graph fingerprint (xxh3-64), 0
//!     52     8  sets or regions k
//!     60     8  values t in the value table
//!     68        S sections: raw length (u64), stored length (u64), stored bytes (zstd)
//!    end-8     8  xxh3-64 of every byte before it
//! ```
//!
//! All integers are little-endian. A reader checks the magic, the version, the checksum and
//! then every length against the bytes present and sane limits before it allocates.

use xxhash_rust::xxh3::xxh3_64;

use super::CompressError;

/// The magic bytes at the start of every compressed file.
pub(crate) const MAGIC: &[u8; 4] = b"SPWZ";
/// The format version of this layout (the set and region methods).
pub(crate) const VERSION: u8 = 1;
/// Every format version this build reads: this layout and the predictive method's
/// (`predict::format`).
pub(crate) const READABLE: [u8; 2] = [1, 2];
/// Bytes before the first section.
pub(crate) const HEADER_LEN: usize = 68;

/// The fixed header fields.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawHeader {
    pub(crate) dtype: u8,
    pub(crate) method: u8,
    pub(crate) encoding: u8,
    pub(crate) predictor: u8,
    pub(crate) rule: u8,
    pub(crate) axes: u8,
    pub(crate) epsilon: f64,
    pub(crate) n: u64,
    pub(crate) shape: [u64; 3],
    pub(crate) k: u64,
    pub(crate) t: u64,
}

/// Writes a file: header, sections compressed with zstd at `level`, checksum. Returns the
/// bytes and the stored size of every section.
pub(crate) fn write(
    header: &RawHeader,
    sections: &[&[u8]],
    level: i32,
) -> Result<(Vec<u8>, Vec<usize>), CompressError> {
    let mut stored_sizes = Vec::with_capacity(sections.len());
    let mut out = Vec::with_capacity(HEADER_LEN + 64);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(header.dtype);
    out.push(header.method);
    out.push(header.encoding);
    out.push(header.predictor);
    out.push(header.rule);
    out.push(header.axes);
    out.push(sections.len() as u8);
    out.extend_from_slice(&header.epsilon.to_le_bytes());
    out.extend_from_slice(&header.n.to_le_bytes());
    for s in header.shape {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out.extend_from_slice(&header.k.to_le_bytes());
    out.extend_from_slice(&header.t.to_le_bytes());
    debug_assert_eq!(out.len(), HEADER_LEN);
    let mut compressor = zstd::bulk::Compressor::new(level)
        .map_err(|e| CompressError::Internal(format!("zstd: {e}")))?;
    for s in sections {
        let packed = if s.is_empty() {
            Vec::new()
        } else {
            compressor
                .compress(s)
                .map_err(|e| CompressError::Internal(format!("zstd: {e}")))?
        };
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(&(packed.len() as u64).to_le_bytes());
        out.extend_from_slice(&packed);
        stored_sizes.push(packed.len());
    }
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    Ok((out, stored_sizes))
}

fn corrupt(reason: impl Into<String>) -> CompressError {
    CompressError::Corrupt(reason.into())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Checks the magic, that the version is one this build reads, and the checksum (which
/// every version ends with); returns the version.
pub(crate) fn check(bytes: &[u8]) -> Result<u8, CompressError> {
    if bytes.len() < 4 || &bytes[..4] != MAGIC {
        return Err(CompressError::NotCompressed);
    }
    if bytes.len() < 5 {
        return Err(CompressError::Truncated);
    }
    if !READABLE.contains(&bytes[4]) {
        return Err(CompressError::UnsupportedVersion(bytes[4]));
    }
    if bytes.len() < HEADER_LEN + 8 {
        return Err(CompressError::Truncated);
    }
    let body = &bytes[..bytes.len() - 8];
    let stored = u64_at(bytes, bytes.len() - 8);
    if xxh3_64(body) != stored {
        return Err(CompressError::ChecksumMismatch);
    }
    Ok(bytes[4])
}

/// Checks magic, version (this layout's), length and checksum, and parses the header.
pub(crate) fn read_header(bytes: &[u8]) -> Result<RawHeader, CompressError> {
    if check(bytes)? != VERSION {
        return Err(CompressError::Corrupt(format!(
            "version {} where version {VERSION} was expected",
            bytes[4]
        )));
    }
    let mut shape = [0u64; 3];
    for (i, s) in shape.iter_mut().enumerate() {
        *s = u64_at(bytes, 28 + 8 * i);
    }
    Ok(RawHeader {
        dtype: bytes[5],
        method: bytes[6],
        encoding: bytes[7],
        predictor: bytes[8],
        rule: bytes[9],
        axes: bytes[10],
        epsilon: f64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes")),
        n: u64_at(bytes, 20),
        shape,
        k: u64_at(bytes, 52),
        t: u64_at(bytes, 60),
    })
}

/// The sections of a file whose header [`read_header`] accepted, decompressed. `limits[i]`
/// bounds the raw length of section `i`; the number of sections must equal `limits.len()`.
pub(crate) fn read_sections(bytes: &[u8], limits: &[u64]) -> Result<Vec<Vec<u8>>, CompressError> {
    let count = bytes[11] as usize;
    if count != limits.len() {
        return Err(corrupt(format!(
            "{count} sections where this method has {}",
            limits.len()
        )));
    }
    let end = bytes.len() - 8;
    let mut at = HEADER_LEN;
    let mut out = Vec::with_capacity(count);
    let mut decompressor = zstd::bulk::Decompressor::new()
        .map_err(|e| CompressError::Internal(format!("zstd: {e}")))?;
    for (i, &limit) in limits.iter().enumerate() {
        if end - at < 16 {
            return Err(CompressError::Truncated);
        }
        let raw = u64_at(bytes, at);
        let stored = u64_at(bytes, at + 8);
        at += 16;
        if raw > limit {
            return Err(corrupt(format!(
                "section {i} claims {raw} bytes, more than the {limit} its content can need"
            )));
        }
        if stored > (end - at) as u64 {
            return Err(CompressError::Truncated);
        }
        let src = &bytes[at..at + stored as usize];
        at += stored as usize;
        let mut buf: Vec<u8> = Vec::new();
        buf.try_reserve_exact(raw as usize)
            .map_err(|_| corrupt(format!("section {i} is too large to hold in memory")))?;
        if raw > 0 {
            let got = decompressor
                .decompress_to_buffer(src, &mut buf)
                .map_err(|e| corrupt(format!("section {i} does not decompress: {e}")))?;
            if got as u64 != raw {
                return Err(corrupt(format!(
                    "section {i} holds {got} bytes where the header says {raw}"
                )));
            }
        } else if stored != 0 {
            return Err(corrupt(format!("section {i} is empty but stores bytes")));
        }
        out.push(buf);
    }
    if at != end {
        return Err(corrupt("bytes after the last section"));
    }
    Ok(out)
}
