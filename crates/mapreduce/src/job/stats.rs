//! What an operation did: counts and times per rank, and their totals over the ranks.

use std::time::Duration;

use serde::Serialize;
use spillway_comm::{Collectives, Comm, Max, Sum};

use crate::error::Error;

/// What one operation did on one rank (or, after [`OpStats::total`], on all ranks: counts
/// added up, times the slowest rank's).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OpStats {
    /// Time in the map function and emitting.
    pub map: Duration,
    /// Time sorting, combining and merging map output into the send buffer (including the
    /// merge after node aggregation).
    pub combine: Duration,
    /// Time in the exchanges (node aggregation and the all-to-all).
    pub shuffle: Duration,
    /// Time merging received data and in the reduce function.
    pub reduce: Duration,
    /// Pairs the map function emitted.
    pub records_emitted: u64,
    /// Bytes of those pairs as entries (before combining).
    pub bytes_emitted: u64,
    /// Entries in the send buffer after combining (within the rank and, with node
    /// aggregation, within the node).
    pub records_combined: u64,
    /// Bytes of the send buffer after combining.
    pub bytes_combined: u64,
    /// Bytes moved between ranks of a node for node aggregation.
    pub bytes_node_shuffled: u64,
    /// Bytes sent to other ranks in the all-to-all.
    pub bytes_shuffled: u64,
    /// Bytes written to spill files (sorted runs and received data).
    pub bytes_spilled: u64,
    /// All-to-all rounds (1 unless the data exceeded the memory allowance).
    pub rounds: u64,
    /// Records the reduce function emitted.
    pub records_out: u64,
}

impl OpStats {
    /// The operation over all ranks: counts summed, times of the slowest rank (a
    /// collective).
    ///
    /// # Errors
    /// A communication error.
    pub fn total(&self, comm: &Comm) -> Result<OpStats, Error> {
        let c = comm.allreduce(
            &[
                self.records_emitted,
                self.bytes_emitted,
                self.records_combined,
                self.bytes_combined,
                self.bytes_node_shuffled,
                self.bytes_shuffled,
                self.bytes_spilled,
                self.records_out,
            ],
            Sum,
        )?;
        let ns = |d: Duration| d.as_nanos() as u64;
        let t = comm.allreduce(
            &[
                ns(self.map),
                ns(self.combine),
                ns(self.shuffle),
                ns(self.reduce),
                self.rounds,
            ],
            Max,
        )?;
        Ok(OpStats {
            map: Duration::from_nanos(t[0]),
            combine: Duration::from_nanos(t[1]),
            shuffle: Duration::from_nanos(t[2]),
            reduce: Duration::from_nanos(t[3]),
            rounds: t[4],
            records_emitted: c[0],
            bytes_emitted: c[1],
            records_combined: c[2],
            bytes_combined: c[3],
            bytes_node_shuffled: c[4],
            bytes_shuffled: c[5],
            bytes_spilled: c[6],
            records_out: c[7],
        })
    }
}
