//! What a direct PageRank run keeps to recover from lost processes: the state of its last two
//! iterations, its own values and its wards' (see [`crate::graph::pagerank_survive`]).

use std::sync::Arc;
use std::time::Duration;

use spillway_comm::Comm;
use spillway_runtime::AlignedBuf;

use crate::error::AlgoError;
use crate::graph::DistGraph;
use crate::survive::{buddy, wards};

/// The state of one iteration on one rank.
#[derive(Clone, Default)]
pub(crate) struct Gen {
    /// The iteration (0: the start).
    pub(crate) iteration: usize,
    pub(crate) dangling: f64,
    pub(crate) delta: f64,
    /// This rank's values, in row order.
    pub(crate) own: Values,
    /// Each ward's values, in row order.
    pub(crate) wards: Vec<Values>,
}

/// One rank's values of an iteration in row order, in the buffer of the message that
/// replicated them: shared with it by the sender and taken from it by the receiver, never
/// copied. Unset before the first replication.
#[derive(Clone, Default)]
pub(crate) struct Values(Option<Arc<AlignedBuf>>);

impl Values {
    /// The values (none while unset).
    pub(crate) fn as_slice(&self) -> &[f64] {
        // A buffer holds a whole number of f64 (checked when it is received) and is 16-byte
        // aligned.
        self.0
            .as_deref()
            .map_or(&[], |b| bytemuck::cast_slice(b.as_bytes()))
    }

    /// Whether the values were replicated (a rank may hold no rows).
    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
    }
}

/// The share of an iteration's time that replicating values may take on average: the
/// values are replicated every few iterations when one replication costs more.
const REPLICATION_SHARE: f64 = 0.02;
/// The most iterations between two replications (what a recovery may have to do again).
const MAX_PERIOD: usize = 16;

/// What a run keeps to recover from a loss: the state of its last two replicated iterations.
pub(crate) struct Keep {
    pub(crate) me: usize,
    pub(crate) buddy: Option<usize>,
    pub(crate) wards: Vec<usize>,
    pub(crate) bounds: Arc<Vec<u64>>,
    pub(crate) cur: Gen,
    pub(crate) prev: Option<Gen>,
    pub(crate) pending: Gen,
    pub(crate) times: Vec<Duration>,
    /// The next iteration whose values are replicated.
    next: usize,
    /// The time this rank's last replication took.
    spent: Duration,
}

/// Where a run picks up after a recovery.
pub(crate) struct Resume {
    pub(crate) done: usize,
    pub(crate) dangling: f64,
    pub(crate) delta: f64,
    /// This rank's values, in row order.
    pub(crate) x_rows: Vec<f64>,
}

impl Keep {
    pub(crate) fn new(comm: &Comm, graph: &DistGraph) -> Keep {
        let me = comm.rank();
        Keep {
            me,
            buddy: buddy(comm, me),
            wards: wards(comm, me),
            bounds: Arc::clone(&graph.bounds),
            cur: Gen::default(),
            prev: None,
            pending: Gen::default(),
            times: Vec::new(),
            next: 0,
            spent: Duration::ZERO,
        }
    }

    /// Whether the values of `iteration` are to be replicated: every iteration until one
    /// replication has been timed, then every few iterations so that replicating takes about
    /// [`REPLICATION_SHARE`] of the time (see [`plan`](Self::plan)), and always the `last`.
    pub(crate) fn due(&self, iteration: usize, last: usize) -> bool {
        iteration >= self.next || iteration == last
    }

    /// The seconds this rank's last replication took, if the values of `iteration` were
    /// replicated (for the all-reduce that ends the iteration), else 0.
    pub(crate) fn spent(&self, iteration: usize) -> f64 {
        if self.pending.iteration == iteration && self.pending.own.is_set() {
            self.spent.as_secs_f64()
        } else {
            0.0
        }
    }

    /// The run starts from iteration `done` with values `x` (in the positions of `row_of`):
    /// the wards' values are exchanged once.
    pub(crate) fn start(
        &mut self,
        replicas: &Comm,
        done: usize,
        x: &[f64],
        row_of: &[u32],
        delta: f64,
    ) -> Result<(), AlgoError> {
        self.replicate(replicas, done, x, row_of)?;
        self.pending.delta = delta;
        self.cur = std::mem::take(&mut self.pending);
        self.prev = None;
        Ok(())
    }

    /// The dangling mass of the values the run started from.
    pub(crate) fn set_dangling(&mut self, dangling: f64) {
        self.cur.dangling = dangling;
    }

    /// Sends this rank's values of `iteration` to its buddy and receives its wards'. The
    /// values are put in row order once, into the buffer that is both the message and what
    /// this rank keeps; the wards' are kept in the buffers their messages came in.
    pub(crate) fn replicate(
        &mut self,
        replicas: &Comm,
        iteration: usize,
        x: &[f64],
        row_of: &[u32],
    ) -> Result<(), AlgoError> {
        let t = std::time::Instant::now();
        // Every byte is written: `row_of` is a permutation of the rows.
        let mut buf = AlignedBuf::for_overwrite(8 * x.len());
        let own: &mut [f64] = bytemuck::cast_slice_mut(buf.as_bytes_mut());
        for (&v, &row) in x.iter().zip(row_of) {
            own[row as usize] = v;
        }
        let own = Arc::new(buf);
        let tag = (iteration % 2) as i32;
        if let Some(b) = self.buddy {
            replicas.send_shared(b, tag, Arc::clone(&own))?;
        }
        let mut got = Vec::with_capacity(self.wards.len());
        for &w in &self.wards {
            let (buf, _) = replicas.recv_shared(w, tag)?;
            let rows = (self.bounds[w + 1] - self.bounds[w]) as usize;
            if buf.len() != 8 * rows {
                return Err(AlgoError::Comm(spillway_comm::Error::Truncated {
                    message_bytes: buf.len(),
                    buffer_bytes: 8 * rows,
                }));
            }
            got.push(Values(Some(buf)));
        }
        self.pending.iteration = iteration;
        self.pending.own = Values(Some(own));
        self.pending.wards = got;
        self.spent = t.elapsed();
        Ok(())
    }

    /// Iteration `done` ended everywhere this rank knows of (its all-reduce completed); if
    /// its values were replicated, they become the current generation, and the next
    /// replication is planned from `spent` and `took`: the sums over the ranks of the last
    /// replication's time and of the iteration's (the same on every rank, so all plan alike).
    pub(crate) fn commit(
        &mut self,
        done: usize,
        (dangling, delta): (f64, f64),
        (spent, took): (f64, f64),
        elapsed: Duration,
    ) {
        self.times.push(elapsed);
        if self.pending.iteration != done || !self.pending.own.is_set() {
            return;
        }
        self.pending.dangling = dangling;
        self.pending.delta = delta;
        let old = std::mem::replace(&mut self.cur, std::mem::take(&mut self.pending));
        // The buffers of the generation before go back to the pool when dropped here.
        self.prev = Some(old);
        self.next = done + period(spent, took);
    }

    /// The kept state of iteration `it`, if this rank holds it complete (not before the
    /// first replication has ended, e.g. when a process is lost while the run starts).
    pub(crate) fn of(&self, it: usize) -> Option<&Gen> {
        [Some(&self.cur), self.prev.as_ref()]
            .into_iter()
            .flatten()
            .find(|g| g.iteration == it && g.wards.len() == self.wards.len() && g.own.is_set())
    }
}

/// Iterations between replications that cost `spent` of iterations taking `took` (both summed
/// over the ranks): replicating then takes about [`REPLICATION_SHARE`] of the time, at most
/// [`MAX_PERIOD`] iterations apart.
fn period(spent: f64, took: f64) -> usize {
    let compute = (took - spent).max(f64::MIN_POSITIVE);
    let p = (spent / (REPLICATION_SHARE * compute)).ceil();
    if p.is_finite() {
        (p as usize).clamp(1, MAX_PERIOD)
    } else {
        MAX_PERIOD
    }
}

#[cfg(test)]
mod tests {
    use super::period;

    #[test]
    fn replications_take_about_their_share_of_the_time() {
        // Free, cheap and costly replications.
        assert_eq!(period(0.0, 1.0), 1);
        assert_eq!(period(0.001, 1.0), 1);
        assert_eq!(period(0.05, 1.05), 3);
        assert_eq!(period(0.15, 1.15), 8);
        assert_eq!(period(1.0, 1.5), 16);
        // Nothing but replication, or times that make no sense: the longest period.
        assert_eq!(period(1.0, 1.0), 16);
        assert_eq!(period(f64::NAN, 1.0), 16);
    }
}
