//! Checkpoints of the iterative commands (PageRank, K-means, connected components): the
//! checkpointer of a rank, resuming, and the report's checkpoint facts.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use spillway::algorithms::AlgoError;
use spillway::checkpoint::Checkpointer;
use spillway::{Collectives, Comm, Max, Sum};

use crate::driver::{CheckpointArgs, LossNotice, Recovery, Timing};
use crate::iostat::{lead_probe, IoProbe};

impl CheckpointArgs {
    /// The rank-local checkpointer for a job with this fingerprint, if checkpoints are on.
    pub(crate) fn checkpointer(&self, fingerprint: &str) -> Option<Checkpointer> {
        self.checkpoint_dir.as_ref().map(|dir| {
            Checkpointer::new(
                dir,
                fingerprint,
                self.checkpoint_every.unwrap_or(1),
                self.resume,
            )
        })
    }
}

/// The steps of a direct engine after each load of its input (the first one and each after a
/// recovery from lost processes): a barrier and the restore of a checkpoint; the time to the
/// first is the job's load time, the rest its compute time. It also tells the user that the
/// survivors of lost processes went on (see [`LossNotice`]). Shared by the closures of a run
/// (the load's and the progress's), hence `&self` throughout.
pub(crate) struct Loading {
    t0: Instant,
    load: Cell<Option<Duration>>,
    notice: LossNotice,
    /// The I/O probe of the rank that reports (see [`lead_probe`]).
    probe: RefCell<Option<IoProbe>>,
}

impl Loading {
    /// Starts the clock (and the I/O probe of `world`'s first rank) as the input starts
    /// loading.
    pub(crate) fn start(rank: &spillway::Rank, world: &Comm) -> Loading {
        Loading {
            t0: Instant::now(),
            load: Cell::new(None),
            notice: LossNotice::default(),
            probe: RefCell::new(lead_probe(rank, world)),
        }
    }

    /// After a load over `world`: the barrier and the restore (collectives); records the
    /// first's time.
    pub(crate) fn ready(
        &self,
        world: &Comm,
        ck: Option<&mut Checkpointer>,
    ) -> Result<(), AlgoError> {
        self.notice.loaded(world);
        world.barrier()?;
        restore(world, ck)?;
        if self.load.get().is_none() {
            self.load.set(Some(self.t0.elapsed()));
        }
        Ok(())
    }

    /// Iteration `iteration` ended on `rank`: samples the I/O probe and says a recovery from
    /// lost processes before it, once.
    pub(crate) fn iterated(&self, rank: &spillway::Rank, iteration: usize) {
        if let Some(probe) = self.probe.borrow_mut().as_mut() {
            probe.sample();
        }
        self.notice.iterated(rank, iteration);
    }

    /// The load time and the time since (compute), once the job is done.
    pub(crate) fn times(&self) -> (Duration, Duration) {
        let load = self.load.get().unwrap_or_default();
        (load, self.t0.elapsed().saturating_sub(load))
    }

    /// The report's timing of a run that performed `iterations` iterations taking
    /// `iteration_times`, recovering from `recoveries`.
    pub(crate) fn timing(
        self,
        iterations: usize,
        iteration_times: Vec<Duration>,
        recoveries: Vec<Recovery>,
    ) -> Timing {
        let (load, compute) = self.times();
        Timing {
            iterations,
            iteration_times,
            load,
            compute,
            io: self
                .probe
                .into_inner()
                .map(|p| p.per_iteration())
                .unwrap_or_default(),
            recoveries,
            ..Timing::default()
        }
    }
}

/// Looks for the state to resume from (a collective), telling the user on rank 0's stderr
/// what it found.
pub(crate) fn restore(world: &Comm, ck: Option<&mut Checkpointer>) -> Result<(), AlgoError> {
    let Some(ck) = ck else { return Ok(()) };
    let from = ck.restore(world)?;
    if world.rank() == 0 {
        for seq in ck.skipped() {
            eprintln!(
                "spillway: checkpoint {seq} in {} is damaged; skipped",
                ck.dir().display()
            );
        }
        match from {
            Some(it) => eprintln!(
                "spillway: resuming after iteration {it} from {}",
                ck.dir().display()
            ),
            None if ck.resumes() => eprintln!(
                "spillway: no complete checkpoint in {}: starting from the beginning",
                ck.dir().display()
            ),
            None => {}
        }
    }
    Ok(())
}

/// The canonical description of an input file for a fingerprint: absolute path, size and
/// modification time, so that a changed file does not resume another file's checkpoint.
pub(crate) fn file_identity(path: &Path) -> String {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    match std::fs::metadata(&abs) {
        Ok(m) => {
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{} ({} bytes, mtime {mtime})", abs.display(), m.len())
        }
        Err(_) => abs.display().to_string(),
    }
}

/// The report's checkpoint facts.
#[derive(Debug, Serialize)]
pub(crate) struct CheckpointFacts {
    /// Checkpoints this run wrote.
    pub(crate) checkpoints_written: u64,
    /// Bytes they took, summed over ranks.
    pub(crate) checkpoint_bytes: u64,
    /// Time spent writing them (the slowest rank).
    pub(crate) checkpoint_seconds: f64,
    /// The iteration this run resumed after, if it resumed.
    pub(crate) resumed_from_iteration: Option<u64>,
}

/// The checkpoint facts of a job (a collective), if checkpoints are on.
pub(crate) fn checkpoint_facts(
    world: &Comm,
    ck: Option<&Checkpointer>,
) -> Result<Option<CheckpointFacts>, AlgoError> {
    let Some(ck) = ck else {
        return Ok(None);
    };
    let s = ck.stats();
    let bytes = world.allreduce(&[s.bytes], Sum)?[0];
    let secs = world.allreduce(&[s.time.as_secs_f64()], Max)?[0];
    Ok(Some(CheckpointFacts {
        checkpoints_written: s.written,
        checkpoint_bytes: bytes,
        checkpoint_seconds: secs,
        resumed_from_iteration: s.resumed_from,
    }))
}
