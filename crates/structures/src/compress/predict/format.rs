//! The file layout of the predictive method (format version 2).
//!
//! ```text
//! offset  size  field
//!      0     4  magic "SPWZ"
//!      4     1  format version (2)
//!      5     1  dtype: 4 = f32, 8 = f64
//!      6     1  method: 6 (predict)
//!      7     1  predictor: 2 lorenzo, 3 interpolation
//!      8     1  flags: bit 0 lattice mode (integers, step 1), bit 1 cubic interpolation
//!      9     1  interpolation axis order: axis numbers in bits 0-1, 2-3, 4-5
//!     10     1  axes: 1-3 for a structured grid, 0 for an unstructured one
//!     11     1  log2 of the interpolation anchor step
//!     12     8  epsilon (f64)
//!     20     8  points n
//!     28    24  structured: extents of the three axes (1 for missing axes);
//!               unstructured: edges, graph fingerprint (xxh3-64), 0
//!     52     8  alpha (f64)   level-wise bound of the interpolation:
//!     60     8  beta (f64)    level l uses epsilon / min(alpha^(l-1), beta)
//!     68     8  slack (f64): the bins are 2 (e - slack) wide, so that rounding to the
//!               dtype cannot push a rebuilt value out of the bound
//!     76     8  block extent: points per block along the slowest axis
//!     84     4  blocks B
//!     88  24 B  per block: range-coded bytes, low-bit bytes, outliers (u64 each)
//!               then per block: the coded bytes, the low bits, the outliers
//!               (verbatim values of the dtype, little-endian)
//!    end-8     8  xxh3-64 of every byte before it
//! ```
//!
//! Blocks are slabs along the slowest axis (the last extent): each is an independent grid
//! whose points are predicted only from its own points, so blocks are coded and decoded in
//! parallel. All integers are little-endian.

use xxhash_rust::xxh3::xxh3_64;

use super::super::container::MAGIC;
use super::super::CompressError;

/// The format version of this layout.
pub(crate) const VERSION: u8 = 2;
/// Bytes before the block table.
const FIXED: usize = 88;
/// The method code of the predictive method.
pub(crate) const METHOD: u8 = 6;

/// The fixed fields.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fields {
    pub(crate) dtype: u8,
    pub(crate) predictor: u8,
    pub(crate) flags: u8,
    pub(crate) order: u8,
    pub(crate) axes: u8,
    pub(crate) anchor_log2: u8,
    pub(crate) epsilon: f64,
    pub(crate) n: u64,
    pub(crate) shape: [u64; 3],
    pub(crate) alpha: f64,
    pub(crate) beta: f64,
    pub(crate) slack: f64,
    pub(crate) block_extent: u64,
}

/// One block's streams.
pub(crate) struct BlockBytes {
    pub(crate) coded: Vec<u8>,
    pub(crate) bits: Vec<u8>,
    pub(crate) outliers: Vec<u8>,
}

/// Writes a file.
pub(crate) fn write(f: &Fields, blocks: &[BlockBytes]) -> Vec<u8> {
    let payload: usize = blocks
        .iter()
        .map(|b| b.coded.len() + b.bits.len() + b.outliers.len())
        .sum();
    let mut out = Vec::with_capacity(FIXED + 24 * blocks.len() + payload + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[
        VERSION,
        f.dtype,
        METHOD,
        f.predictor,
        f.flags,
        f.order,
        f.axes,
        f.anchor_log2,
    ]);
    out.extend_from_slice(&f.epsilon.to_le_bytes());
    out.extend_from_slice(&f.n.to_le_bytes());
    for s in f.shape {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out.extend_from_slice(&f.alpha.to_le_bytes());
    out.extend_from_slice(&f.beta.to_le_bytes());
    out.extend_from_slice(&f.slack.to_le_bytes());
    out.extend_from_slice(&f.block_extent.to_le_bytes());
    out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
    debug_assert_eq!(out.len(), FIXED);
    for b in blocks {
        for len in [b.coded.len(), b.bits.len(), b.outliers.len()] {
            out.extend_from_slice(&(len as u64).to_le_bytes());
        }
    }
    for b in blocks {
        out.extend_from_slice(&b.coded);
        out.extend_from_slice(&b.bits);
        out.extend_from_slice(&b.outliers);
    }
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn f64_at(bytes: &[u8], at: usize) -> f64 {
    f64::from_bits(u64_at(bytes, at))
}

/// Parses the fixed fields of a file whose magic, version and checksum the caller checked.
pub(crate) fn read_fields(bytes: &[u8]) -> Result<Fields, CompressError> {
    if bytes.len() < FIXED + 8 {
        return Err(CompressError::Truncated);
    }
    if bytes[6] != METHOD {
        return Err(CompressError::Corrupt(format!(
            "method {} in a version {VERSION} file",
            bytes[6]
        )));
    }
    let mut shape = [0u64; 3];
    for (i, s) in shape.iter_mut().enumerate() {
        *s = u64_at(bytes, 28 + 8 * i);
    }
    Ok(Fields {
        dtype: bytes[5],
        predictor: bytes[7],
        flags: bytes[8],
        order: bytes[9],
        axes: bytes[10],
        anchor_log2: bytes[11],
        epsilon: f64_at(bytes, 12),
        n: u64_at(bytes, 20),
        shape,
        alpha: f64_at(bytes, 52),
        beta: f64_at(bytes, 60),
        slack: f64_at(bytes, 68),
        block_extent: u64_at(bytes, 76),
    })
}

/// The streams of one block: range-coded symbols, low bits, outliers.
pub(crate) type Streams<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// The streams of every block, checked to fill the file exactly.
pub(crate) fn read_blocks(bytes: &[u8]) -> Result<Vec<Streams<'_>>, CompressError> {
    let end = bytes.len() - 8;
    let count = u32::from_le_bytes(bytes[84..88].try_into().expect("4 bytes")) as usize;
    if count > (end - FIXED) / 24 {
        return Err(CompressError::Truncated);
    }
    let mut at = FIXED + 24 * count;
    let mut out = Vec::with_capacity(count);
    for b in 0..count {
        let t = FIXED + 24 * b;
        let mut parts = [&bytes[0..0]; 3];
        for (i, part) in parts.iter_mut().enumerate() {
            let len = u64_at(bytes, t + 8 * i);
            if len > (end - at) as u64 {
                return Err(CompressError::Truncated);
            }
            *part = &bytes[at..at + len as usize];
            at += len as usize;
        }
        out.push((parts[0], parts[1], parts[2]));
    }
    if at != end {
        return Err(CompressError::Corrupt("bytes after the last block".into()));
    }
    Ok(out)
}
