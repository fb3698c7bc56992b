//! Where spilled bytes live: anonymous files in the spill directory.
//!
//! Every spill file (the pages of a storage-backed allocation, a spilled message, a spilled
//! collective buffer) is created without a name (`O_TMPFILE`, or created and unlinked at once
//! where the file system lacks it), so it exists only as long as the process holds it open:
//! nothing is left in the spill directory after the job ends, however it ends — an error, a
//! panic, a signal or an abort.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// The spill directory of a job.
#[derive(Debug)]
pub(crate) struct SpillStore {
    dir: PathBuf,
}

impl SpillStore {
    /// Checks that `dir` (default: the system temporary directory) is a directory where files
    /// can be created.
    pub(crate) fn open(dir: Option<&Path>) -> Result<SpillStore, (PathBuf, io::Error)> {
        let dir = dir
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let meta = std::fs::metadata(&dir).map_err(|e| (dir.clone(), e))?;
        if !meta.is_dir() {
            return Err((
                dir,
                io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        let store = SpillStore { dir };
        // A job that cannot spill fails at once, not in the middle of a run.
        store.file().map_err(|e| (store.dir.clone(), e))?;
        Ok(store)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new, empty, nameless file in the spill directory.
    pub(crate) fn file(&self) -> io::Result<File> {
        tempfile::tempfile_in(&self.dir).map_err(|e| self.error(e))
    }

    /// `e`, with the spill directory named in its message.
    pub(crate) fn error(&self, e: io::Error) -> io::Error {
        io::Error::new(
            e.kind(),
            format!("spill directory {}: {e}", self.dir.display()),
        )
    }
}
