//! Every path a command names, checked before any work: inputs exist and can be read, outputs
//! can be written, directories exist (or are made) and can be written, and no output is the
//! same file as an input or as another output.

use std::io::IsTerminal;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::Access;
use spillway::algorithms::io::resolve_output;

use super::failure::Failure;

/// How an input is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A regular file, read in place (in parallel, by byte ranges).
    File { bytes: u64 },
    /// Standard input (`-`): copied to the spill directory first.
    Stdin,
    /// A FIFO, a character device or anything else that can only be read once, in order:
    /// copied to the spill directory first.
    Stream,
}

/// How an output is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sink {
    /// A regular file or a new one: written to a temporary file in its directory, renamed
    /// over it when the whole job succeeded (all outputs together).
    Replace,
    /// Standard output (`-`, `/dev/stdout`, or the file stdout is): written through.
    Stdout,
    /// A FIFO, a device or anything else that is not a regular file: written through, never
    /// replaced.
    Through,
}

/// A checked input.
#[derive(Debug, Clone)]
pub(crate) struct CheckedInput {
    /// The option that named it.
    pub(crate) arg: &'static str,
    /// The path as given.
    pub(crate) path: PathBuf,
    /// How it is read.
    pub(crate) source: Source,
}

/// A checked output.
#[derive(Debug, Clone)]
pub(crate) struct CheckedOutput {
    /// The option that named it.
    pub(crate) arg: &'static str,
    /// The path as given.
    pub(crate) path: PathBuf,
    /// How it is written.
    pub(crate) sink: Sink,
    /// The directory that receives it (for its free space), for [`Sink::Replace`].
    pub(crate) dir: Option<PathBuf>,
}

/// The identity of a file: device and inode.
type Identity = (u64, u64);

fn identity(meta: &std::fs::Metadata) -> Identity {
    (meta.dev(), meta.ino())
}

/// The identity of standard input (0) or output (1).
fn fd_identity(fd: i32) -> Option<Identity> {
    let st = match fd {
        0 => rustix::fs::fstat(std::io::stdin()),
        _ => rustix::fs::fstat(std::io::stdout()),
    }
    .ok()?;
    Some((st.st_dev as u64, st.st_ino as u64))
}

/// Whether `path` names standard input or output by name (`-` is handled by the caller).
fn names_std_stream(path: &Path, fd: i32) -> bool {
    let text = path.to_string_lossy();
    let names: &[&str] = if fd == 0 {
        &["/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"]
    } else {
        &["/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"]
    };
    names.contains(&text.as_ref())
}

/// Checks an input: it exists and can be read.
pub(crate) fn check_input(arg: &'static str, path: &Path) -> Result<CheckedInput, Failure> {
    let bad = |why: String| Failure::path(arg, path, why);
    let source = if path.as_os_str() == "-" || names_std_stream(path, 0) {
        if std::io::stdin().is_terminal() {
            return Err(bad(
                "standard input is a terminal: pipe the data in or give a file".into(),
            ));
        }
        Source::Stdin
    } else {
        let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot open: {e}")))?;
        let ft = meta.file_type();
        if meta.is_dir() {
            return Err(bad("is a directory, not a file".into()));
        }
        rustix::fs::access(path, Access::READ_OK)
            .map_err(|e| bad(format!("cannot open: {}", std::io::Error::from(e))))?;
        if meta.is_file() {
            Source::File { bytes: meta.len() }
        } else if ft.is_fifo() || ft.is_char_device() || ft.is_socket() || ft.is_block_device() {
            Source::Stream
        } else {
            return Err(bad("cannot be read as a file".into()));
        }
    };
    Ok(CheckedInput {
        arg,
        path: path.to_path_buf(),
        source,
    })
}

/// The directory holding `path` (`.` for a bare name).
fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Checks an output: its directory exists and can be written; an existing target is not a
/// directory, and something other than a regular file there can be written.
pub(crate) fn check_output(arg: &'static str, path: &Path) -> Result<CheckedOutput, Failure> {
    let bad = |why: String| Failure::path(arg, path, why);
    if path.as_os_str() == "-" || names_std_stream(path, 1) {
        return Ok(CheckedOutput {
            arg,
            path: path.to_path_buf(),
            sink: Sink::Stdout,
            dir: None,
        });
    }
    let target = resolve_output(path).map_err(|e| bad(e.to_string()))?;
    if let Ok(meta) = std::fs::metadata(&target) {
        if meta.is_dir() {
            return Err(bad("is a directory".into()));
        }
        if Some(identity(&meta)) == fd_identity(1) {
            return Ok(CheckedOutput {
                arg,
                path: path.to_path_buf(),
                sink: Sink::Stdout,
                dir: None,
            });
        }
        if !meta.is_file() {
            rustix::fs::access(&target, Access::WRITE_OK)
                .map_err(|e| bad(std::io::Error::from(e).to_string()))?;
            return Ok(CheckedOutput {
                arg,
                path: path.to_path_buf(),
                sink: Sink::Through,
                dir: None,
            });
        }
    }
    if target.file_name().is_none() || target.ends_with("..") {
        return Err(bad("does not name a file".into()));
    }
    let dir = parent(&target);
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => rustix::fs::access(&dir, Access::WRITE_OK)
            .map_err(std::io::Error::from)
            .and_then(|()| try_create_in(&dir))
            .map_err(|e| bad(format!("directory {}: {e}", dir.display())))?,
        Ok(_) => return Err(bad(format!("{} is not a directory", dir.display()))),
        Err(e) => return Err(bad(format!("directory {}: {e}", dir.display()))),
    }
    Ok(CheckedOutput {
        arg,
        path: path.to_path_buf(),
        sink: Sink::Replace,
        dir: Some(dir),
    })
}

/// Creates and removes a file in `dir`: whether files can be made there is only known by
/// trying (permission bits do not bind a privileged user; a read-only or pseudo file system
/// refuses anyway).
fn try_create_in(dir: &Path) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        ".spillway-check-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let probe = dir.join(name);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}

/// Checks a directory the job writes into; with `create`, makes it (and its parents) first.
pub(crate) fn check_dir(arg: &str, dir: &Path, create: bool) -> Result<(), Failure> {
    let bad = |why: String| Failure::path(arg, dir, why);
    if create {
        std::fs::create_dir_all(dir).map_err(|e| bad(e.to_string()))?;
    }
    let meta = std::fs::metadata(dir).map_err(|e| bad(e.to_string()))?;
    if !meta.is_dir() {
        return Err(bad("not a directory".into()));
    }
    rustix::fs::access(dir, Access::WRITE_OK | Access::EXEC_OK)
        .map_err(|e| bad(std::io::Error::from(e).to_string()))?;
    try_create_in(dir).map_err(|e| bad(format!("cannot create files in it: {e}")))
}

/// Refuses an output that is the same file as an input or as another output (same device and
/// inode, whatever the path: the same name, a symbolic link, a hard link), and two outputs
/// that will be created under the same name.
/// A path in a message, after the option that named it.
fn named(arg: &str, path: &Path) -> String {
    format!("{arg} {}", path.display())
}

pub(crate) fn check_distinct(
    inputs: &[CheckedInput],
    outputs: &[CheckedOutput],
) -> Result<(), Failure> {
    let input_ids: Vec<(Identity, &CheckedInput)> = inputs
        .iter()
        .filter_map(|i| {
            let id = match i.source {
                Source::Stdin => fd_identity(0)?,
                _ => identity(&std::fs::metadata(&i.path).ok()?),
            };
            Some((id, i))
        })
        .collect();
    // Where each output lands: its identity if it exists, else its directory's and its name.
    let mut seen: Vec<((Identity, Option<std::ffi::OsString>), &CheckedOutput)> = Vec::new();
    for o in outputs {
        let key = match o.sink {
            Sink::Stdout => fd_identity(1).map(|id| (id, None)),
            _ => {
                let target = resolve_output(&o.path).unwrap_or_else(|_| o.path.clone());
                match std::fs::metadata(&target) {
                    Ok(m) if m.file_type().is_char_device() => None,
                    Ok(m) => Some((identity(&m), None)),
                    Err(_) => std::fs::metadata(parent(&target))
                        .ok()
                        .map(|d| (identity(&d), target.file_name().map(|n| n.to_owned()))),
                }
            }
        };
        let Some(key) = key else { continue };
        if key.1.is_none() {
            if let Some((_, i)) = input_ids.iter().find(|(id, _)| *id == key.0) {
                return Err(Failure::usage(format!(
                    "{} is the same file as {}: an output never replaces an input",
                    named(o.arg, &o.path),
                    named(i.arg, &i.path),
                )));
            }
        }
        if let Some((_, other)) = seen.iter().find(|(k, _)| *k == key) {
            return Err(Failure::usage(format!(
                "{} and {} are the same file",
                named(other.arg, &other.path),
                named(o.arg, &o.path),
            )));
        }
        seen.push((key, o));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_file_under_another_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.txt");
        std::fs::write(&input, "0 1\n").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let hard = dir.path().join("hard.txt");
        std::fs::hard_link(&input, &hard).unwrap();
        let inputs = [check_input("--input", &input).unwrap()];
        for same in [&input, &link, &hard] {
            let outputs = [check_output("--out", same).unwrap()];
            let e = check_distinct(&inputs, &outputs).unwrap_err();
            assert!(e.message.contains("same file as --input"), "{}", e.message);
        }
        let a = check_output("--out", &dir.path().join("new.txt")).unwrap();
        let b = check_output("--assign", &dir.path().join("./new.txt")).unwrap();
        let e = check_distinct(&inputs, &[a.clone(), b]).unwrap_err();
        assert!(e.message.contains("are the same file"), "{}", e.message);
        let c = check_output("--assign", &dir.path().join("other.txt")).unwrap();
        assert!(check_distinct(&inputs, &[a, c]).is_ok());
    }

    #[test]
    fn inputs_and_outputs_are_classified() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "").unwrap();
        assert_eq!(
            check_input("--input", &empty).unwrap().source,
            Source::File { bytes: 0 }
        );
        assert!(check_input("--input", dir.path())
            .unwrap_err()
            .message
            .contains("directory"));
        assert_eq!(
            check_input("--input", Path::new("/dev/zero"))
                .unwrap()
                .source,
            Source::Stream
        );
        assert_eq!(
            check_output("--out", Path::new("/dev/null")).unwrap().sink,
            Sink::Through
        );
        assert_eq!(
            check_output("--out", Path::new("-")).unwrap().sink,
            Sink::Stdout
        );
        assert!(check_output("--out", &dir.path().join("no/such/x")).is_err());
        assert!(check_output("--out", dir.path()).is_err());
    }
}
