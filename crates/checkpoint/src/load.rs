//! Reading a checkpoint back: the newest one that is complete, intact and written by this
//! job, falling back to older ones.

use std::path::Path;

use serde::{Deserialize, Serialize};
use spillway_comm::{Collectives, Comm, Min};

use crate::error::CheckpointError;
use crate::manifest::Manifest;
use crate::store::{complete_dir, manifests, part_name, read_part};

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
