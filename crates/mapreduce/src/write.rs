//! Writing a dataset to one file, every rank writing its part in place.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use spillway_comm::{Collectives, Comm, Min};
use spillway_runtime::SbVec;

use crate::data::Data;
use crate::dataset::Dataset;
use crate::error::Error;

/// Bytes formatted before they are appended to the rank's storage-backed buffer, and written
/// per call.
const STEP: usize = 1 << 20;

/// The temporary name of `path` while it is being written: `.NAME.tmp-spillway-ID` beside it.
fn temporary(path: &Path, id: u64) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.tmp-spillway-{id:x}"))
}

impl<K: Data, V: Data> Dataset<K, V> {
    /// Writes every rank's records to the file `path`, in rank order and each rank's records in
    /// stored order, each record as `format` puts it into the buffer it is given (e.g. a text
    /// line, or fixed-size binary for [`BinaryFiles`](crate::BinaryFiles) to read back); a
    /// collective.
    ///
    /// # Semantics
    /// Every rank formats its part into storage-backed memory (so under a memory budget a part
    /// larger than memory goes through the spill directory), the ranks' offsets come from an
    /// allgather of their byte counts, and each rank writes its bytes at its offset
    /// into a temporary file beside `path`, which becomes `path` (a rename) only when every
    /// rank has written all of its part and the data is synced. On any failure no file is
    /// left at `path` (an existing one is untouched) and every rank returns an error. The
    /// directory of `path` must be visible to every process of the job (one file system).
    ///
    /// # Errors
    /// [`Error::Output`] on every rank when any rank could not write (the cause is the failing
    /// rank's own on that rank); a runtime error if storage cannot be allocated;
    /// communication errors.
    pub fn write(
        &self,
        comm: &Comm,
        path: &Path,
        mut format: impl FnMut(K, V, &mut Vec<u8>),
    ) -> Result<u64, Error> {
        let mut bytes: SbVec<u8> = SbVec::with_capacity(comm.runtime(), 0)?;
        let mut pending: Vec<u8> = Vec::with_capacity(STEP + 4096);
        let mut failed: Option<spillway_runtime::Error> = None;
        Dataset::for_each(self, |k, v| {
            format(k, v, &mut pending);
            if pending.len() >= STEP && failed.is_none() {
                if let Err(e) = bytes.extend_from_slice(&pending) {
                    failed = Some(e);
                }
                pending.clear();
            }
        });
        if let Some(e) = failed {
            return Err(Error::Runtime(e));
        }
        bytes.extend_from_slice(&pending)?;
        drop(pending);
        let len = bytes.len() as u64;
        let lens = comm.allgather(&[len])?;
        let offset: u64 = lens[..comm.rank()].iter().sum();
        let total: u64 = lens.iter().sum();
        let mut id = vec![rand_id(comm)];
        comm.bcast(0, &mut id)?;
        let id = id[0];
        let tmp = temporary(path, id);
        // Rank 0 makes the file at its full length, then everyone writes its part.
        let made = if comm.rank() == 0 {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .and_then(|f| f.set_len(total))
                .err()
        } else {
            None
        };
        let ok = comm.allreduce(&[u8::from(made.is_none())], Min)?[0] == 1;
        let mut mine = made;
        if ok {
            mine = write_part(&tmp, &bytes, offset).err();
        }
        drop(bytes);
        let all = comm.allreduce(&[u8::from(mine.is_none())], Min)?[0] == 1;
        let mut done = None;
        if comm.rank() == 0 {
            done = if all {
                File::open(&tmp)
                    .and_then(|f| f.sync_all())
                    .and_then(|()| std::fs::rename(&tmp, path))
                    .err()
            } else {
                None
            };
            if !all || done.is_some() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        let renamed = comm.allreduce(&[u8::from(done.is_none())], Min)?[0] == 1;
        if all && renamed {
            return Ok(total);
        }
        let source = mine
            .or(done)
            .unwrap_or_else(|| std::io::Error::other("another rank could not write its part"));
        Err(Error::Output {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// A name for the temporary file that no other writer of the same path uses at once.
fn rand_id(comm: &Comm) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ u64::from(std::process::id()).rotate_left(32) ^ comm.context_id()
}

fn write_part(tmp: &Path, bytes: &SbVec<u8>, offset: u64) -> std::io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    let f = OpenOptions::new().write(true).open(tmp)?;
    let mut at = 0;
    while at < bytes.len() {
        let n = STEP.min(bytes.len() - at);
        f.write_all_at(bytes.range(at..at + n), offset + at as u64)?;
        at += n;
    }
    Ok(())
}
