//! Messages that went to storage: each rank's are appended to one nameless file of the spill
//! directory, its [`MessageLog`], and read back when received.
//!
//! One file per receiving rank rather than one per message: messages of a few KiB (PageRank's
//! sums for another rank, a MapReduce block) spill as cheaply as large ones (a write at the
//! end of an open file, no file made and closed each time), and the receiver, which mostly
//! takes its messages in the order they came, reads its file forward. A message's bytes leave
//! the disk when it is taken (a hole punched into the file), and the file is emptied when it
//! holds no message any more.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

use super::{lock, SpillStore};

/// The spilled messages of one rank.
#[derive(Debug, Default)]
pub(crate) struct MessageLog {
    state: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    /// The file, made at the first message spilled.
    file: Option<Arc<File>>,
    /// Where the next message goes.
    end: u64,
    /// Messages in the file not taken yet, and their bytes.
    live: usize,
    live_bytes: u64,
}

/// A message in a [`MessageLog`]: read it with [`read_into`](Self::read_into); dropping it
/// frees its bytes on the disk.
#[derive(Debug)]
pub(crate) struct Spilled {
    log: Arc<MessageLog>,
    file: Arc<File>,
    offset: u64,
    len: usize,
}

impl MessageLog {
    /// Appends `bytes` as a message.
    ///
    /// # Errors
    /// The spill directory cannot hold them (named in the error).
    pub(crate) fn append(
        self: &Arc<Self>,
        spill: &SpillStore,
        bytes: &[u8],
    ) -> io::Result<Spilled> {
        let mut st = lock(&self.state);
        let file = match &st.file {
            Some(f) => Arc::clone(f),
            None => {
                let f = Arc::new(spill.file()?);
                st.file = Some(Arc::clone(&f));
                f
            }
        };
        let offset = st.end;
        file.write_all_at(bytes, offset)
            .map_err(|e| spill.error(e))?;
        st.end += bytes.len() as u64;
        st.live += 1;
        st.live_bytes += bytes.len() as u64;
        Ok(Spilled {
            log: Arc::clone(self),
            file,
            offset,
            len: bytes.len(),
        })
    }

    /// Starts reading the messages not taken yet into the page cache (the rank resumes
    /// soon); returns their bytes.
    pub(crate) fn prefetch(&self) -> u64 {
        let st = lock(&self.state);
        let Some(file) = &st.file else { return 0 };
        if st.live == 0 {
            return 0;
        }
        // SAFETY: a valid open descriptor (held by the log); the advice only starts readahead
        // into the page cache and changes no data.
        unsafe {
            libc::posix_fadvise(
                file.as_raw_fd(),
                0,
                st.end as i64,
                libc::POSIX_FADV_WILLNEED,
            )
        };
        st.live_bytes
    }

    /// A message of `len` bytes at `offset` was taken.
    fn taken(&self, offset: u64, len: usize) {
        let mut st = lock(&self.state);
        st.live -= 1;
        st.live_bytes -= len as u64;
        let Some(file) = &st.file else { return };
        if st.live == 0 {
            // Nothing left: the file starts again from its beginning.
            let _ = file.set_len(0);
            st.end = 0;
            return;
        }
        // The range holds only this message, which nobody reads any more; a failure keeps
        // the blocks until the file is emptied.
        super::pages::punch_hole(file, offset as usize, len);
    }
}

impl Spilled {
    /// Its bytes.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    /// Reads the message into `dst` (its length).
    pub(crate) fn read_into(&self, dst: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(&mut dst[..self.len], self.offset)
    }
}

impl Drop for Spilled {
    fn drop(&mut self) {
        self.log.taken(self.offset, self.len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages come back as they went in, in any order; the file is emptied when the last
    /// one is taken and reused afterwards.
    #[test]
    fn messages_come_back_in_any_order_and_the_file_empties() {
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillStore::open(Some(dir.path())).unwrap();
        let log = Arc::new(MessageLog::default());
        let bodies: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 1000 * (i as usize + 1)]).collect();
        let mut held: Vec<Spilled> = bodies
            .iter()
            .map(|b| log.append(&spill, b).unwrap())
            .collect();
        assert_eq!(log.prefetch(), 15_000);
        for i in [3usize, 0, 4, 1, 2] {
            let m = &held[i];
            let mut got = vec![0xffu8; m.len()];
            m.read_into(&mut got).unwrap();
            assert_eq!(got, bodies[i]);
        }
        held.truncate(1);
        assert_eq!(lock(&log.state).live, 1);
        drop(held);
        let st = lock(&log.state);
        assert_eq!((st.live, st.live_bytes, st.end), (0, 0, 0));
        let file = st.file.clone().unwrap();
        drop(st);
        assert_eq!(file.metadata().unwrap().len(), 0);
        let again = log.append(&spill, b"again").unwrap();
        let mut got = [0u8; 5];
        again.read_into(&mut got).unwrap();
        assert_eq!(&got, b"again");
    }
}
