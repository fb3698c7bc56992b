//! The binary CSR file that `serial-ooc build` writes and `serial-ooc pagerank` and the scipy
//! baseline of `scripts/bench_ooc_alternatives.py` read.
//!
//! # Layout (little-endian; every section starts at a multiple of [`ALIGN`])
//! | bytes | what |
//! |---|---|
//! | `0..8` | magic `SPWYCSR1` |
//! | `8..16` | `n`, the number of vertices (u64) |
//! | `16..24` | `m`, the number of edges (u64) |
//! | `24..32` | `offsets_at`, where the row offsets start (u64, = 4096) |
//! | `32..40` | `targets_at`, where the targets start (u64) |
//! | `40..4096` | zeros |
//! | `offsets_at ..` | `n + 1` row offsets (u64): the edges of row `u` are `offsets[u] .. offsets[u + 1]` |
//! | `targets_at ..` | `m` edge targets (u32), row by row |
//!
//! The file is zero-padded to a multiple of [`ALIGN`], so that every section can be read with
//! `O_DIRECT` in aligned blocks up to its end. Rows are sources: `offsets[u + 1] -
//! offsets[u]` is the out-degree of `u`, and numpy maps the two arrays as they are (the
//! offsets as `int64`, the targets as `int32`).

use std::io::{Read, Write};
use std::path::Path;

use spillway::algorithms::io::AtomicFile;

use crate::harness::BoxError;

// The sections are written and read as the machine's own integers.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "the CSR file is little-endian"
);

/// First bytes of the file.
pub const MAGIC: [u8; 8] = *b"SPWYCSR1";

/// Alignment of the sections and of the file's length (the block size of direct I/O).
pub const ALIGN: u64 = 4096;

/// The header of a CSR file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Vertices.
    pub n: u64,
    /// Edges.
    pub m: u64,
    /// Byte position of the row offsets.
    pub offsets_at: u64,
    /// Byte position of the targets.
    pub targets_at: u64,
}

/// `x` rounded up to a multiple of [`ALIGN`].
pub fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

impl Header {
    /// The header of a graph of `n` vertices and `m` edges.
    pub fn new(n: u64, m: u64) -> Header {
        let offsets_at = ALIGN;
        Header {
            n,
            m,
            offsets_at,
            targets_at: align_up(offsets_at + 8 * (n + 1)),
        }
    }

    /// Length of the file, padding included.
    pub fn file_len(&self) -> u64 {
        align_up(self.targets_at + 4 * self.m)
    }

    /// Byte range of the row offsets.
    pub fn offsets(&self) -> std::ops::Range<u64> {
        self.offsets_at..self.offsets_at + 8 * (self.n + 1)
    }

    /// Byte range of the targets.
    pub fn targets(&self) -> std::ops::Range<u64> {
        self.targets_at..self.targets_at + 4 * self.m
    }

    fn encode(&self) -> Vec<u8> {
        let mut block = vec![0u8; ALIGN as usize];
        block[..8].copy_from_slice(&MAGIC);
        for (i, v) in [self.n, self.m, self.offsets_at, self.targets_at]
            .into_iter()
            .enumerate()
        {
            block[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        block
    }

    /// Reads and checks the header of the file at `path` (its magic, that the sections are
    /// where this layout puts them, and that the file is long enough).
    pub fn read(path: &Path) -> Result<Header, BoxError> {
        let mut file = std::fs::File::open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let mut block = [0u8; 40];
        file.read_exact(&mut block)
            .map_err(|e| format!("{}: cannot read a CSR header: {e}", path.display()))?;
        if block[..8] != MAGIC {
            return Err(format!(
                "{}: not a CSR file of `spillway-bench serial-ooc build` (no magic {:?})",
                path.display(),
                std::str::from_utf8(&MAGIC).unwrap_or_default()
            )
            .into());
        }
        let word = |i: usize| {
            u64::from_le_bytes(block[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"))
        };
        let header = Header {
            n: word(0),
            m: word(1),
            offsets_at: word(2),
            targets_at: word(3),
        };
        if header.n > u64::from(u32::MAX) || header != Header::new(header.n, header.m) {
            return Err(format!("{}: a CSR header that does not add up", path.display()).into());
        }
        let len = file.metadata()?.len();
        if len < header.file_len() {
            return Err(format!(
                "{}: {len} bytes, but the header announces {} ({} vertices, {} edges)",
                path.display(),
                header.file_len(),
                header.n,
                header.m
            )
            .into());
        }
        Ok(header)
    }
}

/// Writes the CSR file at `path` atomically (a temporary file renamed over it when complete).
///
/// # Panics
/// If `offsets` is empty or its last entry is not `targets.len()`.
pub fn write(path: &Path, offsets: &[u64], targets: &[u32]) -> Result<(), BoxError> {
    assert_eq!(offsets.last().copied(), Some(targets.len() as u64));
    let n = offsets.len() as u64 - 1;
    let header = Header::new(n, targets.len() as u64);
    let mut file =
        AtomicFile::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let w = file.writer();
    let pad = |w: &mut dyn Write, at: u64| -> std::io::Result<()> {
        w.write_all(&vec![0u8; (align_up(at) - at) as usize])
    };
    w.write_all(&header.encode())?;
    w.write_all(bytemuck::cast_slice(offsets))?;
    pad(w, header.offsets().end)?;
    w.write_all(bytemuck::cast_slice(targets))?;
    pad(w, header.targets().end)?;
    w.flush()?;
    w.get_ref().sync_all()?;
    file.commit()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

/// The `N` little-endian u64 words after the 8-byte `magic` that starts the file at `path`
/// (a file of `serial-ooc`'s kind `what`), and the file's length.
pub fn read_words<const N: usize>(
    path: &Path,
    magic: &[u8; 8],
    what: &str,
) -> Result<([u64; N], u64), BoxError> {
    let mut file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut raw = vec![0u8; 8 + 8 * N];
    file.read_exact(&mut raw)
        .map_err(|e| format!("{}: no header ({e})", path.display()))?;
    if raw[..8] != magic[..] {
        return Err(format!("{}: not a {what} file of serial-ooc", path.display()).into());
    }
    let words = std::array::from_fn(|i| {
        u64::from_le_bytes(raw[8 + 8 * i..16 + 8 * i].try_into().expect("8 bytes"))
    });
    Ok((words, file.metadata()?.len()))
}
