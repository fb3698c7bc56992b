//! Text files read in bounded chunks, split across the ranks at whitespace.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use spillway_comm::Comm;

use crate::error::Error;
use crate::share::{input_error, Shares};
use crate::Input;

/// The text of several files as one input: every rank gets a contiguous share of the
/// concatenated bytes, its cut points moved forward to just after a whitespace byte ([`is_space`])
/// (or to the start of a file), so no run of non-whitespace bytes is split between ranks or
/// chunks. A record is `(offset, chunk)`: the chunk's global byte offset and at most about
/// `chunk` bytes of text (longer only by a word that crosses the chunk's end).
pub struct TextFiles<'c, 'r> {
    comm: &'c Comm<'r>,
    files: Files,
}

/// The files and the chunk size: what any rank needs to read any rank's share.
#[derive(Clone)]
struct Files {
    files: Vec<(PathBuf, u64)>,
    chunk: usize,
}

/// The ASCII whitespace bytes that separate words: space, tab, newline, vertical tab, form
/// feed, carriage return (C's `isspace`, Python's `bytes.split()`).
#[inline]
pub fn is_space(b: &u8) -> bool {
    matches!(*b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

impl<'c, 'r> TextFiles<'c, 'r> {
    /// Opens the files on every rank (each checks that it can read every file), to be read
    /// in chunks of about `chunk` bytes.
    ///
    /// # Errors
    /// [`Error::Input`] for the first file this rank cannot open or stat (the same on every
    /// rank when they share a file system).
    pub fn open(
        comm: &'c Comm<'r>,
        paths: &[PathBuf],
        chunk: usize,
    ) -> Result<TextFiles<'c, 'r>, Error> {
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            let f = File::open(p).map_err(|e| input_error(p, e))?;
            let meta = f.metadata().map_err(|e| input_error(p, e))?;
            if meta.is_dir() {
                return Err(input_error(
                    p,
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "is a directory"),
                ));
            }
            files.push((p.clone(), meta.len()));
        }
        Ok(TextFiles {
            comm,
            files: Files {
                files,
                chunk: chunk.max(1),
            },
        })
    }

    /// Total bytes of all files.
    pub fn total_bytes(&self) -> u64 {
        self.files.total_bytes()
    }
}

impl Files {
    fn total_bytes(&self) -> u64 {
        self.files.iter().map(|(_, n)| n).sum()
    }

    /// (file index, offset in file) of global position `g`; `g == total` maps past the end.
    fn locate(&self, mut g: u64) -> (usize, u64) {
        for (i, (_, n)) in self.files.iter().enumerate() {
            if g < *n {
                return (i, g);
            }
            g -= n;
        }
        (self.files.len(), 0)
    }

    /// The first global position `>= g` at which a word may start: `g` itself if it is the
    /// start of a file or follows whitespace, else just after the next whitespace byte (or
    /// the start of the next file).
    fn cut(&self, g: u64) -> Result<u64, Error> {
        let (i, off) = self.locate(g);
        if i == self.files.len() || off == 0 {
            return Ok(g);
        }
        let (path, len) = &self.files[i];
        let f = File::open(path).map_err(|e| input_error(path, e))?;
        let mut at = off - 1;
        let mut buf = vec![0u8; 64 << 10];
        while at < *len {
            let n = ((len - at) as usize).min(buf.len());
            f.read_exact_at(&mut buf[..n], at)
                .map_err(|e| input_error(path, e))?;
            if let Some(k) = buf[..n].iter().position(is_space) {
                return Ok(g - off + at + k as u64 + 1);
            }
            at += n as u64;
        }
        Ok(g - off + len)
    }
}

impl Shares for Files {
    /// The bytes between the cuts at `total r / p` and `total (r + 1) / p`, in whole words.
    fn read_share(
        &self,
        r: usize,
        p: usize,
        rank: Option<&spillway_runtime::Rank>,
        f: &mut dyn FnMut(u64, Vec<u8>),
    ) -> Result<(), Error> {
        let critical = || -> Result<Option<spillway_runtime::CriticalGuard<'_>>, Error> {
            match rank {
                Some(rank) => Ok(Some(rank.enter_critical()?)),
                None => Ok(None),
            }
        };
        let total = self.total_bytes();
        let (p, r) = (p as u128, r as u128);
        let nominal = |i: u128| (u128::from(total) * i / p) as u64;
        let (start, end) = {
            let _io = critical()?;
            (self.cut(nominal(r))?, self.cut(nominal(r + 1))?)
        };
        let mut base = 0u64; // global offset of the current file
        for (path, len) in &self.files {
            let (a, b) = (start.max(base), end.min(base + len));
            if a < b {
                let file = File::open(path).map_err(|e| input_error(path, e))?;
                let mut at = a - base;
                let stop = b - base;
                let mut carry: Vec<u8> = Vec::new();
                let mut g = a;
                while at < stop {
                    let n = ((stop - at) as usize).min(self.chunk);
                    let mut buf = std::mem::take(&mut carry);
                    let keep = buf.len();
                    buf.resize(keep + n, 0);
                    {
                        let _io = critical()?;
                        file.read_exact_at(&mut buf[keep..], at)
                            .map_err(|e| input_error(path, e))?;
                    }
                    at += n as u64;
                    if at < stop {
                        // Hand over whole words only: the tail after the last whitespace
                        // byte waits for the next chunk.
                        let cut = buf.iter().rposition(is_space).map_or(0, |k| k + 1);
                        carry = buf.split_off(cut);
                    }
                    let offset = g;
                    g += buf.len() as u64;
                    if !buf.is_empty() {
                        f(offset, buf);
                    }
                }
                if !carry.is_empty() {
                    f(g, carry);
                }
            }
            base += len;
        }
        Ok(())
    }
}

impl Input for TextFiles<'_, '_> {
    type Key = u64;
    type Value = Vec<u8>;

    fn for_each(self, f: &mut dyn FnMut(u64, Vec<u8>)) -> Result<(), Error> {
        self.files.read_mine(self.comm, f)
    }

    fn recovery(&self) -> crate::Recovery<u64, Vec<u8>> {
        self.files.reread()
    }
}
