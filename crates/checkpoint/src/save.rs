//! Writing a checkpoint collectively: every rank's part into a temporary directory, then
//! rank 0's manifest and the rename that makes it visible all at once.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use spillway_comm::{Collectives, Comm};

use crate::error::CheckpointError;
use crate::manifest::{Manifest, PartInfo};
use crate::store::{complete_dir, part_name, scan, sync_dir, tmp_dir, write_part};

/// Complete checkpoints kept after a save: the newest and the one before it, so that a
/// checkpoint damaged later on storage still leaves one to resume from.
const KEEP: usize = 2;

/// Environment variable read by [`save`]: if set to a number of milliseconds, every rank
/// sleeps that long after writing its part, while the checkpoint is still a `.tmp` directory.
/// Only for tests that kill a job in the middle of a checkpoint write.
pub const PAUSE_ENV: &str = "SPILLWAY_CHECKPOINT_PAUSE_MS";

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
