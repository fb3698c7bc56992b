//! Output files that appear under their final name only once complete.
//!
//! [`AtomicFile`] writes a temporary file beside the target and renames it over the target
//! on commit; [`remove_temporary_outputs`] removes what is left when a signal ends the
//! process without unwinding.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::split::invalid_input;

/// Bytes an output is written in: a text output of many short lines makes one system call
/// per 256 KiB rather than per 8 KiB.
const WRITE_BUFFER: usize = 256 << 10;

/// Distinguishes temporary files created by one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Temporary output files that exist now (removed by [`remove_temporary_outputs`]).
static TEMPORARIES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn temporaries() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes every temporary output file that an [`AtomicFile`] of this process has not
/// committed yet: for a signal handler that ends the process without unwinding.
pub fn remove_temporary_outputs() {
    for path in temporaries().drain(..) {
        let _ = std::fs::remove_file(path);
    }
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// `path` with symbolic links followed to what they name (the link itself is never replaced):
/// the final target, which need not exist.
pub fn resolve_output(path: &Path) -> io::Result<PathBuf> {
    // Something other than a regular file or a directory (a pipe named by `/dev/fd/N`, as a
    // shell's process substitution gives, a device) is written through its own name: the
    // links of `/proc/self/fd` name no path ("pipe:[N]"), the kernel follows them itself.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return Ok(path.to_path_buf());
    }
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)?;
                p = if target.is_absolute() {
                    target
                } else {
                    parent_dir(&p).join(target)
                };
            }
            _ => return Ok(p),
        }
    }
    Err(invalid_input(format!(
        "'{}': too many levels of symbolic links",
        path.display()
    )))
}

/// How an output is written.
#[derive(Debug)]
enum Target {
    /// A regular file (or a new one): through a temporary file renamed over it when complete.
    Replace { temp: PathBuf, committed: bool },
    /// Anything else that can be written (a character device such as `/dev/null`, a FIFO):
    /// directly; it is never replaced.
    Direct,
}

/// An output file that appears under its final name only when complete.
///
/// # Semantics
/// For a regular file or a path that does not exist yet, data goes to a hidden temporary file
/// `.NAME.tmp-HOST-PID-N` in the same directory; [`AtomicFile::commit`] flushes it, syncs it to
/// disk and renames it over the final path. Dropping an `AtomicFile` without committing it (or
/// after a failed commit) removes the temporary file, so a failed run leaves no partial output
/// behind. A process killed while it wrote cannot remove its own: a commit removes the
/// temporary files of the same output left by processes of this host that no longer run
/// (on Linux, where `/proc` tells; files of other hosts are left alone). A symbolic link is
/// followed and its target written (the link stays). Anything else that can be written — a
/// character device such as `/dev/null`, a FIFO — is written directly and never replaced.
#[derive(Debug)]
pub struct AtomicFile {
    /// Final path (symbolic links followed).
    path: PathBuf,
    target: Target,
    /// Writer to the temporary file or the target.
    writer: BufWriter<File>,
}

impl AtomicFile {
    /// Opens the output `path` (which must name a file, not end in `..` or `/`). A regular
    /// file there is not touched until [`commit`](Self::commit).
    ///
    /// # Errors
    /// `path` is a directory, its directory does not exist or cannot be written, or it names
    /// something that cannot be opened for writing.
    pub fn create(path: &Path) -> io::Result<Self> {
        let path = resolve_output(path)?;
        let name = path
            .file_name()
            .ok_or_else(|| invalid_input(format!("'{}' does not name a file", path.display())))?
            .to_os_string();
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => {
                return Err(invalid_input(format!(
                    "'{}' is a directory",
                    path.display()
                )))
            }
            Ok(m) if !m.is_file() => {
                let file = OpenOptions::new().write(true).open(&path)?;
                return Ok(AtomicFile {
                    path,
                    target: Target::Direct,
                    writer: BufWriter::with_capacity(WRITE_BUFFER, file),
                });
            }
            _ => {}
        }
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut temp_name = OsString::from(".");
        temp_name.push(&name);
        temp_name.push(format!(".tmp-{}-{}-{n}", host_tag(), std::process::id()));
        let temp = parent_dir(&path).join(temp_name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        temporaries().push(temp.clone());
        Ok(AtomicFile {
            path,
            target: Target::Replace {
                temp,
                committed: false,
            },
            writer: BufWriter::with_capacity(WRITE_BUFFER, file),
        })
    }

    /// The buffered writer.
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        &mut self.writer
    }

    /// Flushes the data; for a regular file, syncs it, renames the temporary file to the final
    /// path (replacing any file there), then syncs the directory so the rename is durable. On
    /// error the temporary file is removed and the final path is left as it was.
    pub fn commit(mut self) -> io::Result<()> {
        self.writer.flush()?;
        let Target::Replace { temp, committed } = &mut self.target else {
            return Ok(());
        };
        self.writer.get_ref().sync_all()?;
        std::fs::rename(&*temp, &self.path)?;
        *committed = true;
        temporaries().retain(|t| t != temp);
        remove_orphans(&self.path);
        // Best effort: the data is already in place under its final name.
        if let Ok(dir) = File::open(parent_dir(&self.path)) {
            let _ = dir.sync_all();
        }
        Ok(())
    }

    /// The final path of the file (symbolic links followed).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file that receives the data until [`commit`](Self::commit) (the temporary file, or
    /// the target itself when it is written directly); other writers (ranks writing their
    /// parts in turn) may append to it.
    pub fn temp_path(&self) -> &Path {
        match &self.target {
            Target::Replace { temp, .. } => temp,
            Target::Direct => &self.path,
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Target::Replace {
            temp,
            committed: false,
        } = &self.target
        {
            // Nothing useful can be done about a failure here.
            let _ = std::fs::remove_file(temp);
            temporaries().retain(|t| t != temp);
        }
    }
}

/// This host's name as temporary file names hold it: letters, digits, `-` and `.`, anything
/// else as `_` ("host" when it cannot be read).
fn host_tag() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_default();
        let tag: String = name
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if tag.is_empty() {
            "host".into()
        } else {
            tag
        }
    })
}

/// Removes the temporary files of `path` (`.NAME.tmp-HOST-PID-N`) that processes of this host
/// left behind when they were killed while writing: those whose process no longer runs. Best
/// effort; only where `/proc` tells which processes run.
fn remove_orphans(path: &Path) {
    if !cfg!(target_os = "linux") || !Path::new("/proc/self").exists() {
        return;
    }
    let Some(name) = path.file_name() else {
        return;
    };
    let prefix = format!(".{}.tmp-{}-", name.to_string_lossy(), host_tag());
    let Ok(entries) = std::fs::read_dir(parent_dir(path)) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let Some((pid, n)) = rest.split_once('-') else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u64>()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn atomic_file_appears_only_on_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        let mut f = AtomicFile::create(&path).expect("create");
        assert_eq!(f.path(), path);
        f.writer().write_all(b"hello\n").expect("write");
        assert!(!path.exists());
        let names = dir_entries(dir.path());
        assert_eq!(names.len(), 1);
        let prefix = format!(".out.txt.tmp-{}-{}-", host_tag(), std::process::id());
        assert!(names[0].starts_with(&prefix), "{names:?}");
        f.commit().expect("commit");
        assert_eq!(std::fs::read(&path).expect("read"), b"hello\n");
        assert_eq!(dir_entries(dir.path()), vec!["out.txt".to_string()]);
    }

    #[test]
    fn atomic_file_drop_removes_temp_and_keeps_old() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        std::fs::write(&path, b"old").expect("write old");
        {
            let mut f = AtomicFile::create(&path).expect("create");
            f.writer().write_all(b"partial").expect("write");
        }
        assert_eq!(std::fs::read(&path).expect("read"), b"old");
        assert_eq!(dir_entries(dir.path()), vec!["out.txt".to_string()]);

        // Two writers for one path do not collide; the last commit wins.
        let mut a = AtomicFile::create(&path).expect("create a");
        let mut b = AtomicFile::create(&path).expect("create b");
        a.writer().write_all(b"a").expect("write a");
        b.writer().write_all(b"b").expect("write b");
        a.commit().expect("commit a");
        b.commit().expect("commit b");
        assert_eq!(std::fs::read(&path).expect("read"), b"b");
        assert_eq!(dir_entries(dir.path()), vec!["out.txt".to_string()]);
    }

    /// A temporary file of the same output left by a process of this host that no longer
    /// runs goes at the next commit; one of a running process, another host's and another
    /// output's stay.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_commit_removes_what_dead_writers_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        // A process that ran and ended: its pid no longer runs.
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let dead = child.id();
        child.wait().expect("wait");
        let host = host_tag();
        let live = std::process::id();
        let left = [
            format!(".out.txt.tmp-{host}-{dead}-0"),
            format!(".out.txt.tmp-{host}-{live}-999"),
            format!(".out.txt.tmp-other-host-{dead}-0"),
            format!(".other.txt.tmp-{host}-{dead}-0"),
        ];
        for f in &left {
            std::fs::write(dir.path().join(f), b"partial").expect("write");
        }
        let mut f = AtomicFile::create(&path).expect("create");
        f.writer().write_all(b"done\n").expect("write");
        f.commit().expect("commit");
        let mut want: Vec<String> = left[1..].to_vec();
        want.push("out.txt".into());
        want.sort();
        assert_eq!(dir_entries(dir.path()), want);
    }

    #[test]
    fn atomic_file_rejects_non_file_paths() {
        let e = AtomicFile::create(Path::new("/")).expect_err("root");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        let dir = tempfile::tempdir().expect("tempdir");
        let e = AtomicFile::create(&dir.path().join("missing/out.txt")).expect_err("no dir");
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
