//! The checkpoint directory on disk: names of complete and torn checkpoints, finding them,
//! and reading and writing one rank's part with its checksum.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::error::CheckpointError;
use crate::manifest::{Manifest, PartInfo};

pub(crate) fn complete_dir(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("ckpt-{seq}"))
}

pub(crate) fn tmp_dir(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("ckpt-{seq}.tmp"))
}

pub(crate) fn part_name(rank: usize) -> String {
    format!("rank-{rank}")
}

/// What a directory entry is: a complete checkpoint's directory (by name) or a torn one.
pub(crate) enum Entry {
    Complete(u64),
    Torn(u64),
}

pub(crate) fn classify(name: &str) -> Option<Entry> {
    let rest = name.strip_prefix("ckpt-")?;
    let digits_only = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(seq) = rest.strip_suffix(".tmp") {
        return digits_only(seq)
            .then(|| seq.parse().ok().map(Entry::Torn))
            .flatten();
    }
    digits_only(rest)
        .then(|| rest.parse().ok().map(Entry::Complete))
        .flatten()
}

/// Checkpoint directories in `dir`, as (complete sequence numbers newest first, torn ones).
/// A missing `dir` has none.
pub(crate) fn scan(dir: &Path) -> Result<(Vec<u64>, Vec<u64>), CheckpointError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(CheckpointError::io(dir, e)),
    };
    let (mut complete, mut torn) = (Vec::new(), Vec::new());
    for entry in entries {
        let entry = entry.map_err(|e| CheckpointError::io(dir, e))?;
        match entry.file_name().to_str().and_then(classify) {
            Some(Entry::Complete(s)) => complete.push(s),
            Some(Entry::Torn(s)) => torn.push(s),
            None => {}
        }
    }
    complete.sort_unstable_by(|a, b| b.cmp(a));
    Ok((complete, torn))
}

/// The intact manifests in `dir`, newest first (a directory without an intact manifest does
/// not count).
pub(crate) fn manifests(dir: &Path) -> Result<Vec<Manifest>, CheckpointError> {
    let mut out = Vec::new();
    for seq in scan(dir)?.0 {
        let path = complete_dir(dir, seq).join("manifest");
        match fs::read_to_string(&path) {
            Ok(text) => {
                if let Some(m) = Manifest::parse(&text).filter(|m| m.seq == seq) {
                    out.push(m);
                }
            }
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.kind() == io::ErrorKind::InvalidData => {}
            Err(e) => return Err(CheckpointError::io(&path, e)),
        }
    }
    Ok(out)
}

/// Whether the part file holds exactly `info`'s bytes; returns them if so.
pub(crate) fn read_part(path: &Path, info: PartInfo) -> Result<Option<Vec<u8>>, CheckpointError> {
    match fs::read(path) {
        Ok(bytes) => Ok(
            (bytes.len() as u64 == info.len && xxh3_64(&bytes) == info.checksum).then_some(bytes),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CheckpointError::io(path, e)),
    }
}

pub(crate) fn sync_dir(path: &Path) -> Result<(), CheckpointError> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(|e| CheckpointError::io(path, e))
}

/// Writes `parts` one after the other to `path` and syncs the file; returns the part info.
pub(crate) fn write_part(path: &Path, parts: &[&[u8]]) -> Result<PartInfo, CheckpointError> {
    let io_err = |e| CheckpointError::io(path, e);
    let mut file = File::create(path).map_err(io_err)?;
    let mut hasher = Xxh3::new();
    let mut len = 0u64;
    for p in parts {
        file.write_all(p).map_err(io_err)?;
        hasher.update(p);
        len += p.len() as u64;
    }
    file.sync_all().map_err(io_err)?;
    Ok(PartInfo {
        len,
        checksum: hasher.digest(),
    })
}
