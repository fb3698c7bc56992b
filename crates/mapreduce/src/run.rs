//! Sorted runs of entries, in memory or in the spill directory, and their k-way merge.
//!
//! An *entry* is `[hash: u64][body length: u32][body]` (little-endian), the body being the
//! encoded key followed by one or more encoded values. The length prefix lets a reader skip
//! an entry without decoding it. A *run* is a sequence of entries sorted by hash; since every
//! rank owns a contiguous hash range, a run is also sorted by destination, and it records
//! where each destination's segment starts.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::hash::HashRanges;

/// Bytes of an entry header.
pub(crate) const HEADER: usize = 12;

/// Appends the entry `[hash][body length][body]` to `buf`.
pub(crate) fn push_entry(buf: &mut Vec<u8>, hash: u64, body: &[u8]) {
    buf.extend_from_slice(&hash.to_le_bytes());
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
    buf.extend_from_slice(body);
}

/// Where a job's sorted runs and received data go once memory is used up: one budget of
/// heap bytes for all in-memory runs and received blocks of a rank, the spill directory,
/// and the count of bytes written there.
pub(crate) struct Spill {
    dir: PathBuf,
    limit: usize,
    in_memory: Cell<usize>,
    spilled: Cell<u64>,
}

impl Spill {
    pub(crate) fn new(dir: &Path, limit: usize) -> Spill {
        Spill {
            dir: dir.to_path_buf(),
            limit,
            in_memory: Cell::new(0),
            spilled: Cell::new(0),
        }
    }

    /// Bytes written to spill files so far.
    pub(crate) fn spilled(&self) -> u64 {
        self.spilled.get()
    }

    /// Takes `n` bytes of the memory allowance if they fit.
    pub(crate) fn try_take(&self, n: usize) -> bool {
        let now = self.in_memory.get();
        if now.saturating_add(n) <= self.limit {
            self.in_memory.set(now + n);
            true
        } else {
            false
        }
    }

    /// Takes `n` bytes of the memory allowance even if that passes it.
    pub(crate) fn force_take(&self, n: usize) {
        self.in_memory.set(self.in_memory.get().saturating_add(n));
    }

    /// Returns `n` bytes of the memory allowance.
    pub(crate) fn give_back(&self, n: usize) {
        self.in_memory.set(self.in_memory.get().saturating_sub(n));
    }

    /// A new unnamed file in the spill directory (nothing is left behind if the job dies).
    pub(crate) fn file(&self) -> Result<File, Error> {
        tempfile::tempfile_in(&self.dir).map_err(|e| Error::spill(&self.dir, e))
    }

    pub(crate) fn note_written(&self, n: usize) {
        self.spilled.set(self.spilled.get() + n as u64);
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Where a run's bytes are.
pub(crate) enum Store {
    Mem(Vec<u8>),
    File(File),
}

/// A sequence of entries sorted by hash, with the offset where each destination's segment
/// starts (`offsets.len() == ranks + 1`).
pub(crate) struct Run {
    pub(crate) store: Store,
    pub(crate) len: u64,
    pub(crate) offsets: Vec<u64>,
    pub(crate) entries: u64,
}

impl Run {
    /// Gives the run's memory back to the allowance.
    pub(crate) fn release(self, spill: &Spill) {
        if let Store::Mem(v) = &self.store {
            spill.give_back(v.len());
        }
    }

    /// The bytes `[a, b)` of the run.
    pub(crate) fn piece(&self, a: u64, b: u64) -> Piece<'_> {
        match &self.store {
            Store::Mem(v) => Piece::Mem(&v[a as usize..b as usize]),
            Store::File(f) => Piece::File(f, a, b),
        }
    }

    /// Reads entries from `[a, end)` up to about `quota` bytes (whole entries, at least one);
    /// returns the bytes and the new position.
    pub(crate) fn read_block(
        &self,
        a: u64,
        end: u64,
        quota: usize,
        spill: &Spill,
    ) -> Result<(std::borrow::Cow<'_, [u8]>, u64), Error> {
        let want = end - a;
        if want <= quota as u64 {
            // All of it (the in-memory case: one round, no scan).
            return match &self.store {
                Store::Mem(v) => Ok((
                    std::borrow::Cow::Borrowed(&v[a as usize..end as usize]),
                    end,
                )),
                Store::File(f) => {
                    let mut buf = vec![0u8; want as usize];
                    f.read_exact_at(&mut buf, a)
                        .map_err(|e| Error::spill(spill.dir(), e))?;
                    Ok((std::borrow::Cow::Owned(buf), end))
                }
            };
        }
        match &self.store {
            Store::Mem(v) => {
                let s = &v[a as usize..end as usize];
                let cut = entry_cut(s, quota).unwrap_or(s.len());
                Ok((std::borrow::Cow::Borrowed(&s[..cut]), a + cut as u64))
            }
            Store::File(f) => {
                let mut n = (want as usize).min(quota.max(HEADER));
                let mut buf = vec![0u8; n];
                f.read_exact_at(&mut buf, a)
                    .map_err(|e| Error::spill(spill.dir(), e))?;
                let cut = match entry_cut(&buf, quota) {
                    Some(c) => c,
                    None => {
                        // The first entry alone is larger than the quota: read all of it.
                        let body = u32::from_le_bytes(buf[8..12].try_into().expect("4")) as usize;
                        n = HEADER + body;
                        buf.resize(n, 0);
                        f.read_exact_at(&mut buf, a)
                            .map_err(|e| Error::spill(spill.dir(), e))?;
                        n
                    }
                };
                buf.truncate(cut);
                Ok((std::borrow::Cow::Owned(buf), a + cut as u64))
            }
        }
    }
}

/// The length of the longest prefix of whole entries of `s` that has at most `quota` bytes,
/// or `None` if even the first entry is longer than `quota` or cut off in `s`.
fn entry_cut(s: &[u8], quota: usize) -> Option<usize> {
    let mut at = 0;
    while at + HEADER <= s.len() {
        let body = u32::from_le_bytes(s[at + 8..at + 12].try_into().expect("4")) as usize;
        let next = at + HEADER + body;
        if next > s.len() || next > quota {
            break;
        }
        at = next;
    }
    (at > 0).then_some(at)
}

/// Writes a run: entries must come in hash order.
pub(crate) struct RunWriter<'s> {
    spill: &'s Spill,
    ranges: &'s HashRanges,
    buf: Vec<u8>,
    file: Option<File>,
    /// Bytes already in the file.
    flushed: u64,
    /// Bytes of the allowance held by `buf` while in memory.
    held: usize,
    offsets: Vec<u64>,
    entries: u64,
    last: u64,
}

/// In file mode, the write buffer is flushed at this size.
const WRITE_BUF: usize = 1 << 20;

impl<'s> RunWriter<'s> {
    pub(crate) fn new(spill: &'s Spill, ranges: &'s HashRanges) -> RunWriter<'s> {
        RunWriter {
            spill,
            ranges,
            buf: Vec::new(),
            file: None,
            flushed: 0,
            held: 0,
            offsets: Vec::with_capacity(ranges.len() + 1),
            entries: 0,
            last: 0,
        }
    }

    fn position(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    /// Appends an entry with hash `hash` whose body `body` appends to the buffer.
    pub(crate) fn entry(
        &mut self,
        hash: u64,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), Error> {
        debug_assert!(
            self.entries == 0 || hash >= self.last,
            "entries out of order"
        );
        self.last = hash;
        let dest = self.ranges.owner(hash);
        while self.offsets.len() <= dest {
            let at = self.position();
            self.offsets.push(at);
        }
        let start = self.buf.len();
        self.buf.extend_from_slice(&hash.to_le_bytes());
        self.buf.extend_from_slice(&[0; 4]);
        body(&mut self.buf);
        let len = (self.buf.len() - start - HEADER) as u32;
        self.buf[start + 8..start + 12].copy_from_slice(&len.to_le_bytes());
        self.entries += 1;
        self.after_write()
    }

    /// Appends an entry with a given body.
    #[cfg(test)]
    pub(crate) fn raw_entry(&mut self, hash: u64, body: &[u8]) -> Result<(), Error> {
        self.entry(hash, |b| b.extend_from_slice(body))
    }

    fn after_write(&mut self) -> Result<(), Error> {
        if self.file.is_none() {
            let grown = self.buf.len() - self.held;
            if grown >= 64 << 10 || self.buf.len() < 64 << 10 {
                if self.spill.try_take(grown) {
                    self.held = self.buf.len();
                } else {
                    // Out of memory allowance: from here on the run lives in a file.
                    self.spill.give_back(self.held);
                    self.held = 0;
                    self.file = Some(self.spill.file()?);
                }
            }
        }
        if self.file.is_some() && self.buf.len() >= WRITE_BUF {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Error> {
        if let Some(f) = &mut self.file {
            f.write_all(&self.buf)
                .map_err(|e| Error::spill(self.spill.dir(), e))?;
            self.spill.note_written(self.buf.len());
            self.flushed += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    /// The finished run.
    pub(crate) fn finish(mut self) -> Result<Run, Error> {
        let end = self.position();
        while self.offsets.len() <= self.ranges.len() {
            self.offsets.push(end);
        }
        let store = if self.file.is_some() {
            self.flush()?;
            Store::File(self.file.take().expect("file mode"))
        } else {
            // The last block (under 64 KiB) is counted even if it passes the allowance.
            self.spill.force_take(self.buf.len() - self.held);
            self.buf.shrink_to_fit();
            Store::Mem(std::mem::take(&mut self.buf))
        };
        Ok(Run {
            store,
            len: end,
            offsets: std::mem::take(&mut self.offsets),
            entries: self.entries,
        })
    }
}

/// A byte range holding whole entries: in memory, or part of a file.
#[derive(Clone, Copy)]
pub(crate) enum Piece<'a> {
    Mem(&'a [u8]),
    File(&'a File, u64, u64),
}

/// Reads the entries of a list of pieces in order, holding one entry at a time.
pub(crate) struct Cursor<'a> {
    pieces: Vec<Piece<'a>>,
    next_piece: usize,
    /// The piece being read: memory slice and position, or file reader.
    mem: &'a [u8],
    mem_at: usize,
    file: Option<FileReader<'a>>,
    hash: u64,
    /// The current entry's body: a range of `mem`, or `own` for file pieces.
    body: (usize, usize),
    own: Vec<u8>,
    from_file: bool,
    valid: bool,
}

struct FileReader<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
}

/// Read-ahead of a cursor over a file.
const READ_BUF: usize = 64 << 10;

impl FileReader<'_> {
    /// Makes `n` bytes available at `buf[lo..lo + n]`.
    fn fill(&mut self, n: usize) -> std::io::Result<bool> {
        if self.hi - self.lo >= n {
            return Ok(true);
        }
        self.buf.copy_within(self.lo..self.hi, 0);
        self.hi -= self.lo;
        self.lo = 0;
        let want = n.max(READ_BUF);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let room = (self.buf.len() - self.hi) as u64;
        let get = room.min(self.end - self.pos) as usize;
        if self.hi + get < n {
            return Ok(false);
        }
        self.file
            .read_exact_at(&mut self.buf[self.hi..self.hi + get], self.pos)?;
        self.pos += get as u64;
        self.hi += get;
        Ok(true)
    }
}

impl<'a> Cursor<'a> {
    /// A cursor positioned on the first entry of `pieces` (if any).
    pub(crate) fn new(pieces: Vec<Piece<'a>>, spill: &Spill) -> Result<Cursor<'a>, Error> {
        let mut c = Cursor {
            pieces,
            next_piece: 0,
            mem: &[],
            mem_at: 0,
            file: None,
            hash: 0,
            body: (0, 0),
            own: Vec::new(),
            from_file: false,
            valid: false,
        };
        c.advance(spill)?;
        Ok(c)
    }

    pub(crate) fn valid(&self) -> bool {
        self.valid
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    pub(crate) fn body(&self) -> &[u8] {
        if self.from_file {
            &self.own
        } else {
            &self.mem[self.body.0..self.body.1]
        }
    }

    /// Moves to the next entry; `valid()` tells whether there is one.
    pub(crate) fn advance(&mut self, spill: &Spill) -> Result<(), Error> {
        loop {
            if self.mem_at + HEADER <= self.mem.len() {
                let m = self.mem;
                let at = self.mem_at;
                self.hash = u64::from_le_bytes(m[at..at + 8].try_into().expect("8"));
                let len = u32::from_le_bytes(m[at + 8..at + 12].try_into().expect("4")) as usize;
                self.body = (at + HEADER, at + HEADER + len);
                self.mem_at = at + HEADER + len;
                self.from_file = false;
                self.valid = true;
                return Ok(());
            }
            if let Some(r) = &mut self.file {
                let io = |e| Error::spill(spill.dir(), e);
                if r.fill(HEADER).map_err(io)? {
                    let h = &r.buf[r.lo..r.lo + HEADER];
                    self.hash = u64::from_le_bytes(h[..8].try_into().expect("8"));
                    let len = u32::from_le_bytes(h[8..12].try_into().expect("4")) as usize;
                    r.lo += HEADER;
                    if !r.fill(len).map_err(io)? {
                        return Err(Error::spill(
                            spill.dir(),
                            std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                "spilled run ends inside an entry",
                            ),
                        ));
                    }
                    self.own.clear();
                    self.own.extend_from_slice(&r.buf[r.lo..r.lo + len]);
                    r.lo += len;
                    self.from_file = true;
                    self.valid = true;
                    return Ok(());
                }
                self.file = None;
            }
            let Some(&piece) = self.pieces.get(self.next_piece) else {
                self.valid = false;
                return Ok(());
            };
            self.next_piece += 1;
            match piece {
                Piece::Mem(s) => {
                    self.mem = s;
                    self.mem_at = 0;
                }
                Piece::File(file, a, b) => {
                    self.mem = &[];
                    self.mem_at = 0;
                    self.file = Some(FileReader {
                        file,
                        pos: a,
                        end: b,
                        buf: Vec::new(),
                        lo: 0,
                        hi: 0,
                    });
                }
            }
        }
    }
}

/// Merges sorted cursors: calls `on_hash(hash, bodies)` once per distinct hash, in increasing
/// order, with the bodies of every entry of that hash (from all cursors).
pub(crate) fn merge(
    cursors: &mut [Cursor<'_>],
    spill: &Spill,
    mut on_hash: impl FnMut(u64, &[&[u8]]) -> Result<(), Error>,
) -> Result<(), Error> {
    if let [only] = cursors {
        // One sorted stream: equal hashes are adjacent; no copies unless they repeat.
        let mut scratch: Vec<u8> = Vec::new();
        while only.valid() {
            let h = only.hash();
            scratch.clear();
            let mut ends = Vec::new();
            scratch.extend_from_slice(only.body());
            ends.push(scratch.len());
            only.advance(spill)?;
            while only.valid() && only.hash() == h {
                scratch.extend_from_slice(only.body());
                ends.push(scratch.len());
                only.advance(spill)?;
            }
            let bodies = split_at_ends(&scratch, &ends);
            on_hash(h, &bodies)?;
        }
        return Ok(());
    }
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = cursors
        .iter()
        .enumerate()
        .filter(|(_, c)| c.valid())
        .map(|(i, c)| Reverse((c.hash(), i)))
        .collect();
    let mut scratch: Vec<u8> = Vec::new();
    let mut ends: Vec<usize> = Vec::new();
    while let Some(&Reverse((h, _))) = heap.peek() {
        scratch.clear();
        ends.clear();
        while let Some(&Reverse((h2, i))) = heap.peek() {
            if h2 != h {
                break;
            }
            heap.pop();
            let c = &mut cursors[i];
            while c.valid() && c.hash() == h {
                scratch.extend_from_slice(c.body());
                ends.push(scratch.len());
                c.advance(spill)?;
            }
            if c.valid() {
                heap.push(Reverse((c.hash(), i)));
            }
        }
        let bodies = split_at_ends(&scratch, &ends);
        on_hash(h, &bodies)?;
    }
    Ok(())
}

fn split_at_ends<'a>(scratch: &'a [u8], ends: &[usize]) -> Vec<&'a [u8]> {
    let mut start = 0;
    ends.iter()
        .map(|&e| {
            let s = &scratch[start..e];
            start = e;
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_run(spill: &Spill, ranges: &HashRanges, items: &[(u64, &[u8])]) -> Run {
        let mut w = RunWriter::new(spill, ranges);
        for &(h, body) in items {
            w.raw_entry(h, body).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn runs_spill_and_merge_in_hash_order() {
        let dir = std::env::temp_dir();
        let ranges = HashRanges::even(3);
        for limit in [usize::MAX, 0] {
            let spill = Spill::new(&dir, limit);
            let a: Vec<(u64, Vec<u8>)> = (0..2000u64)
                .map(|i| (i * (u64::MAX / 4000), vec![i as u8; (i % 7) as usize]))
                .collect();
            let b: Vec<(u64, Vec<u8>)> = (0..1500u64)
                .map(|i| (i * (u64::MAX / 1500), vec![1; 3]))
                .collect();
            let items = |v: &[(u64, Vec<u8>)]| -> Vec<(u64, Vec<u8>)> { v.to_vec() };
            let ra = write_run(
                &spill,
                &ranges,
                &items(&a)
                    .iter()
                    .map(|(h, b)| (*h, &b[..]))
                    .collect::<Vec<_>>(),
            );
            let rb = write_run(
                &spill,
                &ranges,
                &items(&b)
                    .iter()
                    .map(|(h, b)| (*h, &b[..]))
                    .collect::<Vec<_>>(),
            );
            assert_eq!(matches!(ra.store, Store::File(_)), limit == 0);
            // Segments start where the owner changes.
            for l in 0..3 {
                let (first, _) = ranges.range(l);
                let expect = a
                    .iter()
                    .take_while(|(h, _)| *h < first)
                    .fold(0u64, |acc, (_, b)| acc + (HEADER + b.len()) as u64);
                assert_eq!(ra.offsets[l], expect);
            }
            let mut cursors = vec![
                Cursor::new(vec![ra.piece(0, ra.len)], &spill).unwrap(),
                Cursor::new(
                    vec![rb.piece(0, rb.offsets[1]), rb.piece(rb.offsets[1], rb.len)],
                    &spill,
                )
                .unwrap(),
            ];
            let mut seen = Vec::new();
            merge(&mut cursors, &spill, |h, bodies| {
                seen.push((h, bodies.len()));
                Ok(())
            })
            .unwrap();
            let mut expected: Vec<u64> = a.iter().chain(&b).map(|(h, _)| *h).collect();
            expected.sort_unstable();
            let total: usize = seen.iter().map(|&(_, n)| n).sum();
            assert_eq!(total, expected.len());
            expected.dedup();
            assert_eq!(seen.iter().map(|&(h, _)| h).collect::<Vec<_>>(), expected);
            // Blocks are cut at entry boundaries.
            let (block, next) = ra.read_block(0, ra.len, 100, &spill).unwrap();
            assert!(block.len() <= 100 && next == block.len() as u64);
            assert!(entry_cut(&block, usize::MAX) == Some(block.len()));
            if limit == 0 {
                assert!(spill.spilled() > 0);
            }
        }
    }
}
