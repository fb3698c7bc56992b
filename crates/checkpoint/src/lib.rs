//! Consistent, atomic checkpoints of a job's state: one part per rank, written collectively.
//!
//! # Layout on disk
//! A checkpoint directory `DIR` holds complete checkpoints `DIR/ckpt-<seq>/` (at most two after
//! a [`save`]) and possibly a torn one `DIR/ckpt-<seq>.tmp/` left by a job that was killed while
//! writing it. A complete checkpoint holds `rank-<r>` (the part of rank `r`) and `manifest`, a
//! text file with the job's fingerprint, the sequence number, the rank count, the length and the
//! XXH3-64 checksum of every part, and a final line with the checksum of the manifest itself.
//!
//! # Semantics
//! [`save`] writes every part into `ckpt-<seq>.tmp/` and syncs it; after all parts are on
//! storage rank 0 writes and syncs the manifest, renames the directory to `ckpt-<seq>` (atomic
//! on POSIX file systems), syncs `DIR`, and deletes older checkpoints. So a checkpoint becomes
//! visible all at once or not at all: a job killed at any moment leaves the previous complete
//! checkpoint usable. [`load`] takes the newest checkpoint whose manifest is intact and whose
//! parts all match their checksums, and falls back to an older one otherwise; a torn `.tmp`
//! directory is never read.
//!
//! A checkpoint belongs to one job: its *fingerprint* is a canonical string of everything that
//! determines the result (input, parameters, rank count, node count). [`load`] refuses a
//! directory whose newest complete checkpoint was written by another job
//! ([`CheckpointError::Mismatch`]) or with another rank count.
//!
//! The directory must be visible to every rank under the same path (with the MPI backend: a
//! file system shared by the nodes).
//!
//! # Cost
//! [`save`]: every rank writes and syncs its part (its bytes to storage, in parallel); one
//! broadcast of one word, one gather of three words per rank, one broadcast of two words; rank 0
//! writes `O(p)` bytes of manifest and syncs two directories. [`load`]: rank 0 reads the
//! manifests; one broadcast of `O(p)` words per manifest; every rank reads its part; one
//! allreduce of one word per candidate checkpoint.
//!
//! ```
//! use spillway_checkpoint as checkpoint;
//! use spillway_comm::Comm;
//! use spillway_runtime::{run, Config};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path();
//! run(&Config::new(2), |rank| {
//!     let world = Comm::world(rank);
//!     let mine = vec![world.rank() as u8; 10];
//!     checkpoint::save(&world, path, 3, "demo v1", &[&mine]).unwrap();
//!     let back = checkpoint::load(&world, path, "demo v1").unwrap().unwrap();
//!     assert_eq!((back.seq, back.part), (3, mine));
//!     Ok::<_, checkpoint::CheckpointError>(())
//! })
//! .unwrap();
//! ```
#![deny(missing_docs, unreachable_pub)]

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use spillway_comm::{Collectives, Comm, Min};
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// Complete checkpoints kept after a save: the newest and the one before it, so that a
/// checkpoint damaged later on storage still leaves one to resume from.
const KEEP: usize = 2;

/// Environment variable read by [`save`]: if set to a number of milliseconds, every rank
/// sleeps that long after writing its part, while the checkpoint is still a `.tmp` directory.
/// Only for tests that kill a job in the middle of a checkpoint write.
pub const PAUSE_ENV: &str = "SPILLWAY_CHECKPOINT_PAUSE_MS";

const MAGIC: &str = "spillway checkpoint v1";

/// Why saving or loading a checkpoint failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Reading or writing a file or directory failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// Another rank failed (its own error says why); this rank stopped with it.
    PeerFailed {
        /// The rank that failed.
        rank: usize,
    },
    /// The newest complete checkpoint was written by a job with another fingerprint.
    Mismatch {
        /// The checkpoint directory.
        dir: PathBuf,
        /// The fingerprint of the job that wrote the checkpoint.
        written: String,
        /// The fingerprint of this job.
        this: String,
    },
    /// The newest complete checkpoint was written by a job with another number of ranks.
    RankCount {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Ranks of the job that wrote it.
        written: usize,
        /// Ranks of this job.
        this: usize,
    },
    /// A job that does not resume found complete checkpoints in its directory (continuing
    /// would mix two jobs' checkpoints).
    Exists {
        /// The checkpoint directory.
        dir: PathBuf,
        /// Sequence number of the newest complete checkpoint there.
        seq: u64,
    },
    /// Communication failed (usually: the job is being aborted).
    Runtime(spillway_comm::Error),
}

impl CheckpointError {
    /// Whether the user's arguments are at fault (another job's checkpoints), as opposed to a
    /// failure of storage or of the job.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            CheckpointError::Mismatch { .. }
                | CheckpointError::RankCount { .. }
                | CheckpointError::Exists { .. }
        )
    }

    fn io(path: &Path, source: io::Error) -> CheckpointError {
        CheckpointError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Io { path, source } => {
                write!(f, "checkpoint {}: {source}", path.display())
            }
            CheckpointError::PeerFailed { rank } => {
                write!(f, "checkpoint: rank {rank} failed")
            }
            CheckpointError::Mismatch { dir, written, this } => write!(
                f,
                "checkpoint in {} was written by `{written}`; this run is `{this}` \
                 (resume with the same arguments, or use another --checkpoint-dir)",
                dir.display()
            ),
            CheckpointError::RankCount { dir, written, this } => write!(
                f,
                "checkpoint in {} was written by {written} ranks; this run has {this}",
                dir.display()
            ),
            CheckpointError::Exists { dir, seq } => write!(
                f,
                "{} already holds checkpoint {seq}: pass --resume to continue that job, \
                 or remove the directory",
                dir.display()
            ),
            CheckpointError::Runtime(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CheckpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckpointError::Io { source, .. } => Some(source),
            CheckpointError::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

impl From<spillway_comm::Error> for CheckpointError {
    fn from(e: spillway_comm::Error) -> CheckpointError {
        CheckpointError::Runtime(e)
    }
}

/// Length and checksum of one rank's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    /// Bytes.
    pub len: u64,
    /// XXH3-64 of the bytes.
    pub checksum: u64,
}

/// The manifest of a complete checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Sequence number (the callers here use the iteration count).
    pub seq: u64,
    /// The fingerprint of the job that wrote it.
    pub fingerprint: String,
    /// One entry per rank.
    pub parts: Vec<PartInfo>,
}

impl Manifest {
    fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "{MAGIC}");
        let _ = writeln!(s, "seq {}", self.seq);
        let _ = writeln!(s, "ranks {}", self.parts.len());
        let _ = writeln!(s, "fingerprint {}", escape(&self.fingerprint));
        for (r, p) in self.parts.iter().enumerate() {
            let _ = writeln!(s, "part {r} {} {:016x}", p.len, p.checksum);
        }
        let sum = xxh3_64(s.as_bytes());
        let _ = writeln!(s, "end {sum:016x}");
        s
    }

    /// Parses a manifest; `None` if it is torn, damaged or not a manifest.
    fn parse(text: &str) -> Option<Manifest> {
        let body_end = text.strip_suffix('\n')?.rfind('\n')? + 1;
        let (body, last) = text.split_at(body_end);
        let sum =
            u64::from_str_radix(last.strip_prefix("end ")?.trim_end_matches('\n'), 16).ok()?;
        if xxh3_64(body.as_bytes()) != sum {
            return None;
        }
        let mut lines = body.lines();
        if lines.next()? != MAGIC {
            return None;
        }
        let seq = lines.next()?.strip_prefix("seq ")?.parse().ok()?;
        let ranks: usize = lines.next()?.strip_prefix("ranks ")?.parse().ok()?;
        let fingerprint = unescape(lines.next()?.strip_prefix("fingerprint ")?)?;
        let mut parts = Vec::with_capacity(ranks);
        for r in 0..ranks {
            let mut f = lines.next()?.strip_prefix("part ")?.split(' ');
            if f.next()?.parse::<usize>().ok()? != r {
                return None;
            }
            let len = f.next()?.parse().ok()?;
            let checksum = u64::from_str_radix(f.next()?, 16).ok()?;
            parts.push(PartInfo { len, checksum });
        }
        if lines.next().is_some() {
            return None;
        }
        Some(Manifest {
            seq,
            fingerprint,
            parts,
        })
    }
}

/// Keeps the manifest one line per field: backslashes and line breaks are escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next()? {
                '\\' => out.push('\\'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn complete_dir(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("ckpt-{seq}"))
}

fn tmp_dir(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("ckpt-{seq}.tmp"))
}

fn part_name(rank: usize) -> String {
    format!("rank-{rank}")
}

/// What a directory entry is: a complete checkpoint's directory (by name) or a torn one.
enum Entry {
    Complete(u64),
    Torn(u64),
}

fn classify(name: &str) -> Option<Entry> {
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
fn scan(dir: &Path) -> Result<(Vec<u64>, Vec<u64>), CheckpointError> {
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
fn manifests(dir: &Path) -> Result<Vec<Manifest>, CheckpointError> {
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
fn read_part(path: &Path, info: PartInfo) -> Result<Option<Vec<u8>>, CheckpointError> {
    match fs::read(path) {
        Ok(bytes) => Ok(
            (bytes.len() as u64 == info.len && xxh3_64(&bytes) == info.checksum).then_some(bytes),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CheckpointError::io(path, e)),
    }
}

fn sync_dir(path: &Path) -> Result<(), CheckpointError> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(|e| CheckpointError::io(path, e))
}

/// Writes `parts` one after the other to `path` and syncs the file; returns the part info.
fn write_part(path: &Path, parts: &[&[u8]]) -> Result<PartInfo, CheckpointError> {
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

/// What rank 0 tells the others after a step of [`save`]: 0 for success, else 1 + the rank
/// that failed.
fn status_of(r: Result<(), usize>) -> u64 {
    match r {
        Ok(()) => 0,
        Err(rank) => rank as u64 + 1,
    }
}

/// Turns a broadcast status into this rank's result: its own error if it failed itself.
fn settle(status: u64, own: Option<CheckpointError>, me: usize) -> Result<(), CheckpointError> {
    match (status, own) {
        (0, _) => Ok(()),
        (s, Some(e)) if s as usize - 1 == me => Err(e),
        (s, _) => Err(CheckpointError::PeerFailed {
            rank: s as usize - 1,
        }),
    }
}

/// Writes a checkpoint with sequence number `seq`: every rank's part is the concatenation of
/// its `parts` (a collective: every rank of `comm` calls it with the same `dir`, `seq` and
/// `fingerprint`). Returns the bytes this rank wrote.
///
/// The new checkpoint replaces any complete checkpoint numbered `seq` or higher (those belong
/// to a run that was abandoned), and older ones beyond the newest two are deleted, as are torn
/// ones.
///
/// # Errors
/// [`CheckpointError::Io`] on the rank whose file system operation failed and
/// [`CheckpointError::PeerFailed`] on the others; the previous checkpoint stays usable.
pub fn save(
    comm: &Comm,
    dir: &Path,
    seq: u64,
    fingerprint: &str,
    parts: &[&[u8]],
) -> Result<u64, CheckpointError> {
    let me = comm.rank();
    let tmp = tmp_dir(dir, seq);
    // Step 1: rank 0 makes a fresh .tmp directory.
    let mut own = None;
    let mut status = [0u64];
    if me == 0 {
        let made = (|| {
            fs::create_dir_all(dir).map_err(|e| CheckpointError::io(dir, e))?;
            match fs::remove_dir_all(&tmp) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(CheckpointError::io(&tmp, e)),
            }
            fs::create_dir(&tmp).map_err(|e| CheckpointError::io(&tmp, e))
        })();
        if let Err(e) = made {
            own = Some(e);
            status[0] = status_of(Err(0));
        }
    }
    comm.bcast_into(0, &mut status)?;
    settle(status[0], own, me)?;

    // Step 2: every rank writes its part; rank 0 collects lengths and checksums.
    let written = write_part(&tmp.join(part_name(me)), parts);
    if let Some(ms) = std::env::var(PAUSE_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let word = match &written {
        Ok(info) => [1, info.len, info.checksum],
        Err(_) => [0, 0, 0],
    };
    let gathered = comm.gather(0, &word)?;
    let info = match written {
        Ok(info) => info,
        // Take part in the final broadcast, then report this rank's own error.
        Err(e) => return finish_failed_write(comm, me, e),
    };
    let mut own = None;
    let mut status = [0u64];
    if let Some(all) = gathered {
        let failed = all.chunks_exact(3).position(|w| w[0] == 0);
        status[0] = match failed {
            Some(r) => status_of(Err(r)),
            None => {
                let manifest = Manifest {
                    seq,
                    fingerprint: fingerprint.to_string(),
                    parts: all
                        .chunks_exact(3)
                        .map(|w| PartInfo {
                            len: w[1],
                            checksum: w[2],
                        })
                        .collect(),
                };
                match commit(dir, &tmp, &manifest) {
                    Ok(()) => 0,
                    Err(e) => {
                        own = Some(e);
                        status_of(Err(0))
                    }
                }
            }
        };
    }
    comm.bcast_into(0, &mut status)?;
    settle(status[0], own, me)?;
    Ok(info.len)
}

/// The end of [`save`] on a rank whose write failed: it takes part in the final broadcast and
/// returns its own error.
fn finish_failed_write(comm: &Comm, me: usize, e: CheckpointError) -> Result<u64, CheckpointError> {
    let mut status = [0u64];
    // Rank 0 saw this rank's (or an earlier rank's) failure in the gather.
    if me == 0 {
        status[0] = status_of(Err(0));
    }
    comm.bcast_into(0, &mut status)?;
    Err(e)
}

/// Rank 0's part of [`save`] once every part is on storage: manifest, rename, clean-up.
fn commit(dir: &Path, tmp: &Path, manifest: &Manifest) -> Result<(), CheckpointError> {
    let path = tmp.join("manifest");
    let io_err = |e| CheckpointError::io(&path, e);
    let mut file = File::create(&path).map_err(io_err)?;
    file.write_all(manifest.render().as_bytes())
        .map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    drop(file);
    sync_dir(tmp)?;
    let (complete, torn) = scan(dir)?;
    let seq = manifest.seq;
    let target = complete_dir(dir, seq);
    // A checkpoint with this number or a later one is left from a run that resumed from an
    // older checkpoint: it must not shadow this one.
    for &s in complete.iter().filter(|&&s| s >= seq) {
        let p = complete_dir(dir, s);
        fs::remove_dir_all(&p).map_err(|e| CheckpointError::io(&p, e))?;
    }
    fs::rename(tmp, &target).map_err(|e| CheckpointError::io(&target, e))?;
    sync_dir(dir)?;
    // The new one is durable: drop all but the newest KEEP complete ones, and torn ones.
    let older: Vec<u64> = complete.into_iter().filter(|&s| s < seq).collect();
    for s in older.into_iter().skip(KEEP - 1) {
        let p = complete_dir(dir, s);
        fs::remove_dir_all(&p).map_err(|e| CheckpointError::io(&p, e))?;
    }
    for s in torn.into_iter().filter(|&s| s != seq) {
        let p = tmp_dir(dir, s);
        fs::remove_dir_all(&p).map_err(|e| CheckpointError::io(&p, e))?;
    }
    Ok(())
}

/// A checkpoint read back by [`load`].
#[derive(Debug)]
pub struct Restored {
    /// Its sequence number.
    pub seq: u64,
    /// This rank's part.
    pub part: Vec<u8>,
    /// Newer checkpoints that were passed over because a part was missing or damaged.
    pub skipped: Vec<u64>,
}

/// What rank 0 found in the directory.
#[derive(Serialize, Deserialize)]
enum Found {
    Candidates(Vec<Manifest>),
    Mismatch(Manifest),
    Unreadable(usize),
}

/// Loads this rank's part of the newest usable checkpoint in `dir` (a collective). `None` if
/// there is none: no directory, only torn checkpoints, or only damaged ones.
///
/// # Errors
/// [`CheckpointError::Mismatch`] or [`CheckpointError::RankCount`] if the newest complete
/// checkpoint belongs to another job; [`CheckpointError::Io`] if the directory or a file
/// cannot be read.
pub fn load(
    comm: &Comm,
    dir: &Path,
    fingerprint: &str,
) -> Result<Option<Restored>, CheckpointError> {
    let me = comm.rank();
    let mut own = None;
    let found = if me == 0 {
        let f = match manifests(dir) {
            Ok(list) => match list.first() {
                Some(m) if m.fingerprint != fingerprint || m.parts.len() != comm.size() => {
                    Found::Mismatch(m.clone())
                }
                _ => Found::Candidates(
                    list.into_iter()
                        .filter(|m| m.fingerprint == fingerprint && m.parts.len() == comm.size())
                        .collect(),
                ),
            },
            Err(e) => {
                own = Some(e);
                Found::Unreadable(0)
            }
        };
        comm.bcast_obj(0, Some(f))?
    } else {
        comm.bcast_obj::<Found>(0, None)?
    };
    // The root of a broadcast returns before the others have read it; keep every rank in
    // the collective until all have (a communicator's node rendezvous lives only while a
    // member holds it, so a root that returned from a job's first collective and ended could
    // otherwise take it away).
    comm.barrier()?;
    let candidates = match found {
        Found::Candidates(c) => c,
        Found::Unreadable(r) => {
            return Err(own.unwrap_or(CheckpointError::PeerFailed { rank: r }));
        }
        Found::Mismatch(m) if m.fingerprint != fingerprint => {
            return Err(CheckpointError::Mismatch {
                dir: dir.to_path_buf(),
                written: m.fingerprint,
                this: fingerprint.to_string(),
            })
        }
        Found::Mismatch(m) => {
            return Err(CheckpointError::RankCount {
                dir: dir.to_path_buf(),
                written: m.parts.len(),
                this: comm.size(),
            })
        }
    };
    let mut skipped = Vec::new();
    for m in candidates {
        let path = complete_dir(dir, m.seq).join(part_name(me));
        let (ok, part, err) = match read_part(&path, m.parts[me]) {
            Ok(Some(bytes)) => (2u64, Some(bytes), None),
            Ok(None) => (1, None, None),
            Err(e) => (0, None, Some(e)),
        };
        // Every rank's verdict, worst first: 0 = cannot read, 1 = damaged (try an older one),
        // 2 = intact.
        let worst = comm.allreduce(&[ok], Min)?[0];
        match worst {
            2 => {
                return Ok(Some(Restored {
                    seq: m.seq,
                    part: part.expect("an intact part"),
                    skipped,
                }))
            }
            0 => {
                let failed =
                    comm.allreduce(&[if err.is_some() { me as u64 } else { u64::MAX }], Min)?[0];
                return Err(err.unwrap_or(CheckpointError::PeerFailed {
                    rank: failed as usize,
                }));
            }
            _ => skipped.push(m.seq),
        }
    }
    Ok(None)
}

/// The newest checkpoint in `dir` that is complete and intact (every part matches its
/// checksum), read by this process alone (not a collective).
///
/// # Errors
/// As [`load`]; `ranks` is the rank count of the job asking.
pub fn latest(
    dir: &Path,
    fingerprint: &str,
    ranks: usize,
) -> Result<Option<Manifest>, CheckpointError> {
    let list = manifests(dir)?;
    if let Some(m) = list.first() {
        if m.fingerprint != fingerprint {
            return Err(CheckpointError::Mismatch {
                dir: dir.to_path_buf(),
                written: m.fingerprint.clone(),
                this: fingerprint.to_string(),
            });
        }
        if m.parts.len() != ranks {
            return Err(CheckpointError::RankCount {
                dir: dir.to_path_buf(),
                written: m.parts.len(),
                this: ranks,
            });
        }
    }
    for m in list {
        if m.fingerprint != fingerprint || m.parts.len() != ranks {
            continue;
        }
        let base = complete_dir(dir, m.seq);
        let mut intact = true;
        for (r, &info) in m.parts.iter().enumerate() {
            if read_part(&base.join(part_name(r)), info)?.is_none() {
                intact = false;
                break;
            }
        }
        if intact {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// The header of a checkpoint part: `words` as little-endian bytes (see [`split_header`]).
pub fn header(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The first `n` words of a part written with [`header`] and the bytes after them; `None`
/// if the part is shorter than the header.
pub fn split_header(part: &[u8], n: usize) -> Option<(Vec<u64>, &[u8])> {
    let (head, rest) = (part.get(..n * 8)?, &part[n * 8..]);
    let words = head
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
        .collect();
    Some((words, rest))
}

/// Counters of one rank's checkpointing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    /// Checkpoints written.
    pub written: u64,
    /// Bytes this rank wrote (its parts; not the manifest).
    pub bytes: u64,
    /// Wall time this rank spent in [`save`] (including waiting for the others).
    pub time: Duration,
    /// The iteration the job resumed from, if it did.
    pub resumed_from: Option<u64>,
}

/// Checkpointing of an iterative algorithm on one rank: when to save, what to resume from,
/// and counters.
///
/// Sequence numbers are iteration counts: the checkpoint after iteration `i` is numbered `i`.
/// Call [`restore`](Self::restore) (collective) before the first iteration, then
/// [`due`](Self::due) and [`save`](Self::save) after each one.
#[derive(Debug)]
pub struct Checkpointer {
    dir: PathBuf,
    fingerprint: String,
    every: u64,
    resume: bool,
    checked: bool,
    restored: Option<Restored>,
    stats: CheckpointStats,
}

impl Checkpointer {
    /// Checkpoints in `dir` after every `every` iterations (at least 1) for the job
    /// identified by `fingerprint`; with `resume`, [`restore`](Self::restore) continues from
    /// the newest usable checkpoint there.
    pub fn new(dir: &Path, fingerprint: &str, every: u64, resume: bool) -> Checkpointer {
        Checkpointer {
            dir: dir.to_path_buf(),
            fingerprint: fingerprint.to_string(),
            every: every.max(1),
            resume,
            checked: false,
            restored: None,
            stats: CheckpointStats::default(),
        }
    }

    /// The checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether this job resumes from a checkpoint if there is one.
    pub fn resumes(&self) -> bool {
        self.resume
    }

    /// Looks for the state to start from (a collective; only the first call does work): with
    /// resume, loads the newest usable checkpoint and returns its iteration (`None`: there is
    /// none, start from the beginning); without, checks that the directory holds no complete
    /// checkpoint of an earlier job and returns `None`.
    ///
    /// # Errors
    /// As [`load`]; [`CheckpointError::Exists`] without resume if the directory holds
    /// complete checkpoints.
    pub fn restore(&mut self, comm: &Comm) -> Result<Option<u64>, CheckpointError> {
        if !self.checked {
            self.checked = true;
            if self.resume {
                self.restored = load(comm, &self.dir, &self.fingerprint)?;
                self.stats.resumed_from = self.restored.as_ref().map(|r| r.seq);
            } else {
                let mut newest = [u64::MAX];
                let mut own = None;
                if comm.rank() == 0 {
                    match scan(&self.dir) {
                        Ok((complete, _)) => {
                            if let Some(&s) = complete.first() {
                                newest[0] = s;
                            }
                        }
                        Err(e) => {
                            own = Some(e);
                            newest[0] = u64::MAX - 1;
                        }
                    }
                }
                comm.bcast_into(0, &mut newest)?;
                // As in `load`: nobody leaves before everyone has the verdict.
                comm.barrier()?;
                match newest[0] {
                    u64::MAX => {}
                    s if s == u64::MAX - 1 => {
                        return Err(own.unwrap_or(CheckpointError::PeerFailed { rank: 0 }))
                    }
                    seq => {
                        return Err(CheckpointError::Exists {
                            dir: self.dir.clone(),
                            seq,
                        })
                    }
                }
            }
        }
        Ok(self.stats.resumed_from)
    }

    /// Hands over the restored (iteration, this rank's part), once; calls
    /// [`restore`](Self::restore) first if it has not run.
    ///
    /// # Errors
    /// As [`restore`](Self::restore).
    pub fn take_restored(
        &mut self,
        comm: &Comm,
    ) -> Result<Option<(u64, Vec<u8>)>, CheckpointError> {
        self.restore(comm)?;
        Ok(self.restored.take().map(|r| (r.seq, r.part)))
    }

    /// Newer checkpoints passed over by [`restore`](Self::restore) because they were damaged.
    pub fn skipped(&self) -> &[u64] {
        self.restored.as_ref().map_or(&[], |r| &r.skipped)
    }

    /// Whether a checkpoint is due after `iteration` iterations.
    pub fn due(&self, iteration: u64) -> bool {
        iteration > 0 && iteration.is_multiple_of(self.every)
    }

    /// Saves this rank's `parts` as the checkpoint after `iteration` iterations (a
    /// collective, see [`save`]), counting bytes and time.
    ///
    /// # Errors
    /// As [`save`].
    pub fn save(
        &mut self,
        comm: &Comm,
        iteration: u64,
        parts: &[&[u8]],
    ) -> Result<(), CheckpointError> {
        let start = Instant::now();
        let bytes = save(comm, &self.dir, iteration, &self.fingerprint, parts)?;
        self.stats.time += start.elapsed();
        self.stats.bytes += bytes;
        self.stats.written += 1;
        Ok(())
    }

    /// This rank's counters.
    pub fn stats(&self) -> CheckpointStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_runtime::{run, Config};

    /// The part of rank `r` in checkpoint `seq`: distinct per rank and checkpoint.
    fn part(r: usize, seq: u64) -> Vec<u8> {
        (0..100 + 37 * r)
            .map(|i| (i as u64 * 7 + seq * 13 + r as u64) as u8)
            .collect()
    }

    /// Saves checkpoints `seqs` in order at `ranks` ranks.
    fn save_all(dir: &Path, ranks: u32, seqs: &[u64], fingerprint: &str) {
        run(&Config::new(ranks), |rank| {
            let world = Comm::world(rank);
            for &s in seqs {
                let mine = part(world.rank(), s);
                let (a, b) = mine.split_at(mine.len() / 3);
                save(&world, dir, s, fingerprint, &[a, b])?;
            }
            Ok::<_, CheckpointError>(())
        })
        .unwrap();
    }

    /// (seq, whether every rank got its own part) of what `load` finds at `ranks` ranks.
    fn load_all(dir: &Path, ranks: u32, fingerprint: &str) -> Result<Option<(u64, bool)>, String> {
        let out = run(
            &Config::new(ranks).nodes(if ranks > 2 { 2 } else { 1 }),
            |rank| {
                let world = Comm::world(rank);
                let got = load(&world, dir, fingerprint)?;
                Ok::<_, CheckpointError>(got.map(|g| (g.seq, g.part == part(world.rank(), g.seq))))
            },
        )
        .map_err(|e| e.to_string())?;
        assert!(out
            .windows(2)
            .all(|w| w[0].map(|x| x.0) == w[1].map(|x| x.0)));
        Ok(out[0].map(|(s, _)| (s, out.iter().all(|o| o.unwrap().1))))
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn round_trip_keeps_the_newest_two() {
        for ranks in [1, 2, 5] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("ck");
            assert_eq!(load_all(&dir, ranks, "job").unwrap(), None);
            save_all(&dir, ranks, &[1, 2, 3, 4], "job");
            assert_eq!(names(&dir), ["ckpt-3", "ckpt-4"]);
            assert_eq!(load_all(&dir, ranks, "job").unwrap(), Some((4, true)));
            let m = latest(&dir, "job", ranks as usize).unwrap().unwrap();
            assert_eq!(m.seq, 4);
            assert_eq!(m.parts.len(), ranks as usize);
            assert_eq!(m.parts[0].len, part(0, 4).len() as u64);
        }
    }

    #[test]
    fn torn_checkpoints_are_never_used() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        save_all(dir, 3, &[1, 2], "job");
        // A leftover .tmp directory of a later checkpoint, even one that looks complete.
        fs::create_dir(dir.join("ckpt-3.tmp")).unwrap();
        for r in 0..3 {
            fs::write(dir.join("ckpt-3.tmp").join(part_name(r)), part(r, 3)).unwrap();
        }
        fs::copy(dir.join("ckpt-2/manifest"), dir.join("ckpt-3.tmp/manifest")).unwrap();
        assert_eq!(load_all(dir, 3, "job").unwrap(), Some((2, true)));

        // A truncated part in the newest: the one before is used.
        let f = dir.join("ckpt-2").join(part_name(1));
        let len = fs::metadata(&f).unwrap().len();
        File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_len(len - 1)
            .unwrap();
        assert_eq!(load_all(dir, 3, "job").unwrap(), Some((1, true)));
        assert_eq!(latest(dir, "job", 3).unwrap().unwrap().seq, 1);

        // A flipped byte in a part of the older one too: nothing usable.
        let f = dir.join("ckpt-1").join(part_name(2));
        let mut bytes = fs::read(&f).unwrap();
        bytes[10] ^= 1;
        fs::write(&f, bytes).unwrap();
        assert_eq!(load_all(dir, 3, "job").unwrap(), None);

        // Saving again replaces the damaged ones.
        save_all(dir, 3, &[2], "job");
        assert_eq!(load_all(dir, 3, "job").unwrap(), Some((2, true)));
    }

    #[test]
    fn a_manifest_with_a_wrong_checksum_or_torn_manifest_does_not_count() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        save_all(dir, 2, &[5, 6], "job");
        let m = dir.join("ckpt-6/manifest");
        let text = fs::read_to_string(&m).unwrap();
        // A part checksum changed without updating the manifest's own checksum.
        let line = text.lines().find(|l| l.starts_with("part 1 ")).unwrap();
        let mut bad = line.to_string();
        let last = bad.pop().unwrap();
        bad.push(if last == '0' { '1' } else { '0' });
        fs::write(&m, text.replace(line, &bad)).unwrap();
        assert_eq!(load_all(dir, 2, "job").unwrap(), Some((5, true)));
        // A manifest cut short.
        fs::write(&m, &text[..text.len() / 2]).unwrap();
        assert_eq!(load_all(dir, 2, "job").unwrap(), Some((5, true)));
        // No manifest at all.
        fs::remove_file(&m).unwrap();
        assert_eq!(load_all(dir, 2, "job").unwrap(), Some((5, true)));
        fs::write(&m, text).unwrap();
        assert_eq!(load_all(dir, 2, "job").unwrap(), Some((6, true)));
    }

    #[test]
    fn another_jobs_checkpoint_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let fp = "pagerank input=a.txt\niterations=20 \\ damping=0.85";
        save_all(dir, 2, &[1], fp);
        assert_eq!(load_all(dir, 2, fp).unwrap(), Some((1, true)));
        let err = load_all(dir, 2, "pagerank input=b.txt").unwrap_err();
        assert!(
            err.contains("was written by `pagerank input=a.txt\niterations=20 \\ damping=0.85`"),
            "{err}"
        );
        assert!(err.contains("this run is `pagerank input=b.txt`"), "{err}");
        let err = load_all(dir, 3, fp).unwrap_err();
        assert!(err.contains("written by 2 ranks; this run has 3"), "{err}");
        assert!(matches!(
            latest(dir, "other", 2),
            Err(CheckpointError::Mismatch { .. })
        ));
    }

    #[test]
    fn checkpointer_saves_when_due_and_refuses_to_overwrite_without_resume() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ck");
        let stats = run(&Config::new(2), |rank| {
            let world = Comm::world(rank);
            let mut c = Checkpointer::new(&dir, "job", 2, false);
            assert_eq!(c.restore(&world)?, None);
            for it in 1..=5u64 {
                if c.due(it) {
                    c.save(&world, it, &[&it.to_le_bytes()])?;
                }
            }
            Ok::<_, CheckpointError>(c.stats())
        })
        .unwrap();
        assert_eq!(stats[0].written, 2);
        assert_eq!(stats[0].bytes, 16);
        assert_eq!(names(&dir), ["ckpt-2", "ckpt-4"]);
        let err = run(&Config::new(2), |rank| {
            let world = Comm::world(rank);
            Checkpointer::new(&dir, "job", 2, false).restore(&world)
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("already holds checkpoint 4"), "{err}");
        let back = run(&Config::new(2), |rank| {
            let world = Comm::world(rank);
            let mut c = Checkpointer::new(&dir, "job", 2, true);
            let got = c.take_restored(&world)?;
            Ok::<_, CheckpointError>((got, c.stats().resumed_from))
        })
        .unwrap();
        assert_eq!(back[1], (Some((4, 4u64.to_le_bytes().to_vec())), Some(4)));
    }
}
