//! What fault tolerance cost: the time and bytes of keeping and replicating, and each recovery.

use std::time::Duration;

use serde::Serialize;
use spillway_comm::{Collectives, Comm};

use crate::error::Error;

/// Serialises a duration as seconds.
fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// What fault tolerance cost on one rank (after [`FtStats::total`]: counts summed over the
/// ranks, times of the slowest).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FtStats {
    /// Time keeping send buffers and sending the node-local segments to the buddy.
    #[serde(serialize_with = "secs", rename = "save_seconds")]
    pub save: Duration,
    /// Bytes of send buffers kept (summed over operations).
    pub bytes_kept: u64,
    /// Bytes sent to buddies as replicas (send-buffer segments and replicated datasets).
    pub bytes_replicated: u64,
    /// Every recovery, in order.
    pub recoveries: Vec<RecoveryStats>,
}

/// One recovery.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecoveryStats {
    /// The operation during which the failure was detected.
    pub op: u64,
    /// Where: "before shuffle" or "after reduce".
    pub detected: &'static str,
    /// The lost ranks (original numbering).
    pub lost_ranks: Vec<u32>,
    /// Ranks left.
    pub ranks_after: u64,
    /// Shrinking, collecting what was sent to the lost ranks and splitting it.
    #[serde(serialize_with = "secs", rename = "redistribute_seconds")]
    pub redistribute: Duration,
    /// The recovery shuffle.
    #[serde(serialize_with = "secs", rename = "shuffle_seconds")]
    pub shuffle: Duration,
    /// Re-running the reduce on the recovered data.
    #[serde(serialize_with = "secs", rename = "reduce_seconds")]
    pub reduce: Duration,
    /// Re-running the map on the recovered input (before the shuffle only).
    #[serde(serialize_with = "secs", rename = "map_seconds")]
    pub map: Duration,
    /// Merging with the survivors' map output, re-partitioned (and re-establishing
    /// replicas).
    #[serde(serialize_with = "secs", rename = "merge_seconds")]
    pub merge: Duration,
    /// All of it.
    #[serde(serialize_with = "secs", rename = "total_seconds")]
    pub total: Duration,
    /// Bytes moved in the recovery shuffle.
    pub bytes_moved: u64,
}

impl FtStats {
    /// Over all ranks of `comm` (a collective): counts summed, times of the slowest rank.
    ///
    /// # Errors
    /// A communication error.
    pub fn total(&self, comm: &Comm) -> Result<FtStats, Error> {
        use spillway_comm::{Max, Sum};
        let ns = |d: Duration| d.as_nanos() as u64;
        let c = comm.allreduce(&[self.bytes_kept, self.bytes_replicated], Sum)?;
        let mut times = vec![ns(self.save)];
        let mut moved = Vec::new();
        for r in &self.recoveries {
            times.extend([r.redistribute, r.shuffle, r.reduce, r.map, r.merge, r.total].map(ns));
            moved.push(r.bytes_moved);
        }
        let t = comm.allreduce(&times, Max)?;
        let moved = comm.allreduce(&moved, Sum)?;
        let d = Duration::from_nanos;
        let recoveries = self
            .recoveries
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let b = 1 + 6 * i;
                RecoveryStats {
                    redistribute: d(t[b]),
                    shuffle: d(t[b + 1]),
                    reduce: d(t[b + 2]),
                    map: d(t[b + 3]),
                    merge: d(t[b + 4]),
                    total: d(t[b + 5]),
                    bytes_moved: moved[i],
                    ..r.clone()
                }
            })
            .collect();
        Ok(FtStats {
            save: d(t[0]),
            bytes_kept: c[0],
            bytes_replicated: c[1],
            recoveries,
        })
    }
}
