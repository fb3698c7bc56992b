//! Files of fixed-size binary records, read in bounded chunks, split across the ranks at
//! record boundaries.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use spillway_comm::Comm;

use crate::error::Error;
use crate::share::{input_error, Shares};
use crate::{Input, Recovery};

/// The records of several files as one input: every file is a sequence of records of
/// `record` bytes each (any layout: e.g. little-endian `(u32, u32)` edges, or a `#[repr(C)]`
/// `Pod` struct to view with `bytemuck::cast_slice`), and the concatenated records are split
/// into contiguous shares of (nearly) equal record counts, one per rank. A record of the
/// input is `(first, chunk)`: the global index of the chunk's first record and the bytes of
/// whole records, at most about `chunk` bytes (never fewer than one record).
pub struct BinaryFiles<'c, 'r> {
    comm: &'c Comm<'r>,
    files: Files,
}

#[derive(Clone)]
struct Files {
    /// Each file and its number of records.
    files: Vec<(PathBuf, u64)>,
    record: usize,
    chunk: usize,
}

impl<'c, 'r> BinaryFiles<'c, 'r> {
    /// Opens the files on every rank (each checks that it can read every file and that each
    /// holds whole records), to be read in chunks of about `chunk` bytes.
    ///
    /// # Errors
    /// [`Error::Input`] for the first file this rank cannot open or stat, that is a directory,
    /// or whose length is not a multiple of `record` (naming both); also when `record` is 0.
    pub fn open(
        comm: &'c Comm<'r>,
        paths: &[PathBuf],
        record: usize,
        chunk: usize,
    ) -> Result<BinaryFiles<'c, 'r>, Error> {
        let invalid = |p: &Path, why: String| {
            input_error(p, std::io::Error::new(std::io::ErrorKind::InvalidData, why))
        };
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            if record == 0 {
                return Err(invalid(p, "records of 0 bytes".into()));
            }
            let f = File::open(p).map_err(|e| input_error(p, e))?;
            let meta = f.metadata().map_err(|e| input_error(p, e))?;
            if meta.is_dir() {
                return Err(invalid(p, "is a directory".into()));
            }
            if meta.len() % record as u64 != 0 {
                return Err(invalid(
                    p,
                    format!(
                        "{} bytes is not a whole number of {record}-byte records ({} bytes left over)",
                        meta.len(),
                        meta.len() % record as u64
                    ),
                ));
            }
            files.push((p.clone(), meta.len() / record as u64));
        }
        Ok(BinaryFiles {
            comm,
            files: Files {
                files,
                record,
                chunk: chunk.max(record),
            },
        })
    }

    /// Records in all files.
    pub fn total_records(&self) -> u64 {
        self.files.total()
    }
}

impl Files {
    fn total(&self) -> u64 {
        self.files.iter().map(|(_, n)| n).sum()
    }
}

impl Shares for Files {
    /// The records `n r / p .. n (r + 1) / p` of the `n` in all files.
    fn read_share(
        &self,
        r: usize,
        p: usize,
        rank: Option<&spillway_runtime::Rank>,
        f: &mut dyn FnMut(u64, Vec<u8>),
    ) -> Result<(), Error> {
        let total = self.total();
        let share = |i: usize| (u128::from(total) * i as u128 / p as u128) as u64;
        let (start, end) = (share(r), share(r + 1));
        let per_chunk = (self.chunk / self.record).max(1) as u64;
        let mut base = 0u64; // global index of the current file's first record
        for (path, n) in &self.files {
            let (a, b) = (start.max(base), end.min(base + n));
            if a < b {
                let file = File::open(path).map_err(|e| input_error(path, e))?;
                let mut at = a;
                while at < b {
                    let count = per_chunk.min(b - at);
                    let mut buf = vec![0u8; count as usize * self.record];
                    {
                        let _io = match rank {
                            Some(rank) => Some(rank.enter_critical()?),
                            None => None,
                        };
                        file.read_exact_at(&mut buf, (at - base) * self.record as u64)
                            .map_err(|e| input_error(path, e))?;
                    }
                    f(at, buf);
                    at += count;
                }
            }
            base += n;
        }
        Ok(())
    }
}

impl Input for BinaryFiles<'_, '_> {
    type Key = u64;
    type Value = Vec<u8>;

    fn for_each(self, f: &mut dyn FnMut(u64, Vec<u8>)) -> Result<(), Error> {
        self.files.read_mine(self.comm, f)
    }

    fn recovery(&self) -> Recovery<u64, Vec<u8>> {
        self.files.reread()
    }
}
