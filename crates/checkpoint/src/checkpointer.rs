//! Checkpointing of an iterative algorithm on one rank: when to save, what to resume from,
//! and counters.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spillway_comm::{Collectives, Comm};

use crate::error::CheckpointError;
use crate::load::{load, Restored};
use crate::save::save;
use crate::store::scan;

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
