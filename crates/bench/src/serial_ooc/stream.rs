//! Large sequential reads of a byte range of a file, on a reader thread that stays a few
//! buffers ahead of the computation (double buffering by default), so that the disk and the
//! computation overlap.
//!
//! Two kinds of reads:
//! * [`Io::Direct`]: `O_DIRECT`, into buffers aligned to [`ALIGN`]: the data goes from the
//!   device to the buffer without the page cache (which a memory cgroup would count);
//! * [`Io::Buffered`]: ordinary reads with `POSIX_FADV_SEQUENTIAL` (a larger read-ahead), each
//!   range dropped from the page cache (`POSIX_FADV_DONTNEED`) once copied into the buffer.

use std::fs::File;
use std::num::NonZeroU64;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::mpsc::{channel, sync_channel};

use rustix::fs::{Advice, Mode, OFlags};

use super::csr_file::{align_up, ALIGN};
use crate::harness::BoxError;

/// How a file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Io {
    /// `O_DIRECT` reads into aligned buffers (no page cache).
    Direct,
    /// Buffered reads, sequential read-ahead, each range dropped from the page cache after it.
    Buffered,
}

/// An open file and how it is read.
#[derive(Debug)]
pub struct Source {
    file: File,
    io: Io,
}

impl Source {
    /// Opens `path` for reads of kind `io`. A file system that refuses `O_DIRECT` (tmpfs)
    /// gets buffered reads, with a note on standard error.
    pub fn open(path: &Path, io: Io) -> Result<Source, BoxError> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC;
        let direct = match io {
            Io::Direct => rustix::fs::open(path, flags | OFlags::DIRECT, Mode::empty()),
            Io::Buffered => Err(rustix::io::Errno::INVAL),
        };
        let (fd, io) = match direct {
            Ok(fd) => (fd, Io::Direct),
            Err(e) => {
                if io == Io::Direct {
                    eprintln!(
                        "serial-ooc: {}: no O_DIRECT here ({e}); buffered reads",
                        path.display()
                    );
                }
                let fd = rustix::fs::open(path, flags, Mode::empty())
                    .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
                // Only a hint: a file system without it reads the same data.
                let _ = rustix::fs::fadvise(&fd, 0, None, Advice::Sequential);
                (fd, Io::Buffered)
            }
        };
        Ok(Source {
            file: File::from(fd),
            io,
        })
    }

    /// How this file is read (buffered when `O_DIRECT` was refused).
    pub fn io(&self) -> Io {
        self.io
    }

    /// Fills `buf` from `at` on; the bytes read (fewer only at the end of the file).
    fn read_full(&self, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], at + done as u64) {
                Ok(0) => break,
                Ok(k) => done += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.io == Io::Buffered {
            // The bytes are in `buf` now: the page cache need not keep them.
            if let Some(len) = NonZeroU64::new(done as u64) {
                let _ = rustix::fs::fadvise(&self.file, at, Some(len), Advice::DontNeed);
            }
        }
        Ok(done)
    }
}

/// A byte buffer whose start is aligned to [`ALIGN`] (as direct I/O wants it, and so also for
/// any integer type).
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes.
    pub fn new(len: usize) -> AlignedBuf {
        let raw = vec![0u8; len + ALIGN as usize];
        let start = raw.as_ptr().align_offset(ALIGN as usize);
        assert!(start < ALIGN as usize, "cannot align a byte buffer");
        AlignedBuf { raw, start, len }
    }

    /// The buffer's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// What reads a stream: its chunks in file order, and the end of every pass over the range.
pub trait Consumer {
    /// The next chunk of the range (a whole multiple of [`ALIGN`] bytes except at the range's
    /// end, and aligned to it in memory).
    fn chunk(&mut self, bytes: &[u8]) -> Result<(), BoxError>;
    /// The pass `pass` over the range is complete.
    fn pass_done(&mut self, pass: usize) -> Result<(), BoxError>;
}

/// What the reader thread hands over.
enum Filled {
    Chunk(AlignedBuf, usize),
    PassDone(usize),
}

/// Shape of a stream: the chunk size (a multiple of [`ALIGN`]) and how many buffers of it.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Bytes per read.
    pub chunk: usize,
    /// Buffers (2: one filled while the other is consumed).
    pub buffers: usize,
}

/// Reads `range` of `source` `passes` times, in chunks of `shape.chunk` bytes, on a reader
/// thread that fills up to `shape.buffers` buffers ahead, and hands the chunks in order to
/// `consumer` on this thread. Returns the bytes read from the file (aligned reads included).
///
/// `range.start` must be a multiple of [`ALIGN`], and the file must extend to `range.end`
/// rounded up to it (direct reads read whole blocks).
pub fn stream(
    source: &Source,
    range: Range<u64>,
    shape: Shape,
    passes: usize,
    consumer: &mut dyn Consumer,
) -> Result<u64, BoxError> {
    assert!(
        range.start.is_multiple_of(ALIGN)
            && (shape.chunk as u64).is_multiple_of(ALIGN)
            && shape.chunk > 0
    );
    let buffers = shape.buffers.max(1);
    let (full_tx, full_rx) = sync_channel::<Result<Filled, std::io::Error>>(buffers);
    let (empty_tx, empty_rx) = channel::<AlignedBuf>();
    let first = (range.end - range.start).min(shape.chunk as u64) as usize;
    for _ in 0..buffers {
        // A range shorter than a chunk needs no more than its own (aligned) length.
        let _ = empty_tx.send(AlignedBuf::new(align_up(first as u64) as usize));
    }
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || -> u64 {
            let mut read = 0u64;
            for pass in 0..passes {
                let mut at = range.start;
                while at < range.end {
                    let want = (range.end - at).min(shape.chunk as u64) as usize;
                    let Ok(mut buf) = empty_rx.recv() else {
                        return read;
                    };
                    let aligned = align_up(want as u64) as usize;
                    let got = source.read_full(&mut buf.bytes_mut()[..aligned], at);
                    let message = match got {
                        Ok(got) if got >= want => {
                            read += got as u64;
                            Ok(Filled::Chunk(buf, want))
                        }
                        Ok(got) => Err(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            format!("{got} of {want} bytes at byte {at}: the file is too short"),
                        )),
                        Err(e) => Err(e),
                    };
                    let failed = message.is_err();
                    if full_tx.send(message).is_err() || failed {
                        return read;
                    }
                    at += want as u64;
                }
                if full_tx.send(Ok(Filled::PassDone(pass))).is_err() {
                    return read;
                }
            }
            read
        });
        let consumed = (|| -> Result<(), BoxError> {
            for message in full_rx.iter() {
                match message? {
                    Filled::Chunk(buf, len) => {
                        consumer.chunk(&buf.bytes()[..len])?;
                        // The reader may have finished: a buffer it does not need.
                        let _ = empty_tx.send(buf);
                    }
                    Filled::PassDone(pass) => consumer.pass_done(pass)?,
                }
            }
            Ok(())
        })();
        // Unblocks the reader if the consumer stopped early.
        drop(full_rx);
        drop(empty_tx);
        let read = reader.join().expect("the reader thread panicked");
        consumed.map(|()| read)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect {
        bytes: Vec<u8>,
        passes: Vec<usize>,
        chunks: usize,
    }

    impl Consumer for Collect {
        fn chunk(&mut self, bytes: &[u8]) -> Result<(), BoxError> {
            assert_eq!(bytes.as_ptr().align_offset(ALIGN as usize), 0);
            self.bytes.extend_from_slice(bytes);
            self.chunks += 1;
            Ok(())
        }
        fn pass_done(&mut self, pass: usize) -> Result<(), BoxError> {
            self.passes.push(pass);
            Ok(())
        }
    }

    #[test]
    fn streams_a_range_in_order_with_both_kinds_of_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let data: Vec<u8> = (0..5 * ALIGN as usize)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        for io in [Io::Direct, Io::Buffered] {
            let source = Source::open(&path, io).unwrap();
            let mut c = Collect {
                bytes: Vec::new(),
                passes: Vec::new(),
                chunks: 0,
            };
            let range = ALIGN..4 * ALIGN + 100;
            let shape = Shape {
                chunk: 2 * ALIGN as usize,
                buffers: 2,
            };
            let read = stream(&source, range.clone(), shape, 3, &mut c).unwrap();
            let one = &data[range.start as usize..range.end as usize];
            assert_eq!(c.bytes, [one, one, one].concat());
            assert_eq!(c.passes, [0, 1, 2]);
            assert_eq!(c.chunks, 6);
            assert!(read >= 3 * one.len() as u64);
        }
    }

    #[test]
    fn a_short_file_and_a_failing_consumer_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, vec![1u8; ALIGN as usize]).unwrap();
        let source = Source::open(&path, Io::Buffered).unwrap();
        let shape = Shape {
            chunk: ALIGN as usize,
            buffers: 2,
        };
        let mut c = Collect {
            bytes: Vec::new(),
            passes: Vec::new(),
            chunks: 0,
        };
        assert!(stream(&source, 0..3 * ALIGN, shape, 1, &mut c).is_err());

        struct Fail;
        impl Consumer for Fail {
            fn chunk(&mut self, _: &[u8]) -> Result<(), BoxError> {
                Err("stop".into())
            }
            fn pass_done(&mut self, _: usize) -> Result<(), BoxError> {
                Ok(())
            }
        }
        let err = stream(&source, 0..ALIGN, shape, 100, &mut Fail).unwrap_err();
        assert_eq!(err.to_string(), "stop");
    }
}
