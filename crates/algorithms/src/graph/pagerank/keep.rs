//! What a direct PageRank run keeps to recover from lost processes: the state of its last two
//! iterations, its own values and its wards' (see [`crate::graph::pagerank_survive`]).

use std::sync::Arc;
use std::time::Duration;

use spillway_comm::Comm;

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
    pub(crate) own: Vec<f64>,
    /// Each ward's values, in row order.
    pub(crate) wards: Vec<Vec<f64>>,
}

/// What a run keeps to recover from a loss: the state of its last two iterations.
pub(crate) struct Keep {
    pub(crate) me: usize,
    pub(crate) buddy: Option<usize>,
    pub(crate) wards: Vec<usize>,
    pub(crate) bounds: Arc<Vec<u64>>,
    pub(crate) cur: Gen,
    pub(crate) prev: Option<Gen>,
    pub(crate) pending: Gen,
    pub(crate) times: Vec<Duration>,
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

    /// Sends this rank's values of `iteration` to its buddy and receives its wards'.
    pub(crate) fn replicate(
        &mut self,
        replicas: &Comm,
        iteration: usize,
        x: &[f64],
        row_of: &[u32],
    ) -> Result<(), AlgoError> {
        let mut own = std::mem::take(&mut self.pending.own);
        own.clear();
        own.resize(x.len(), 0.0);
        for (&v, &row) in x.iter().zip(row_of) {
            own[row as usize] = v;
        }
        let tag = (iteration % 2) as i32;
        if let Some(b) = self.buddy {
            replicas.send(b, tag, &own[..])?;
        }
        let mut got = Vec::with_capacity(self.wards.len());
        for &w in &self.wards {
            got.push(replicas.recv::<f64>(w, tag)?.0);
        }
        self.pending.iteration = iteration;
        self.pending.own = own;
        self.pending.wards = got;
        Ok(())
    }

    /// Iteration `done` ended everywhere this rank knows of (its all-reduce completed).
    pub(crate) fn commit(&mut self, done: usize, dangling: f64, delta: f64, took: Duration) {
        self.pending.dangling = dangling;
        self.pending.delta = delta;
        debug_assert_eq!(self.pending.iteration, done);
        let old = std::mem::replace(&mut self.cur, std::mem::take(&mut self.pending));
        if let Some(recycled) = self.prev.replace(old) {
            // Its buffers take the next iteration's values.
            self.pending = Gen {
                own: recycled.own,
                ..Gen::default()
            };
        }
        self.times.push(took);
    }

    /// The kept state of iteration `it`, if this rank holds it complete (not before the
    /// first replication has ended, e.g. when a process is lost while the run starts).
    pub(crate) fn of(&self, it: usize) -> Option<&Gen> {
        [Some(&self.cur), self.prev.as_ref()]
            .into_iter()
            .flatten()
            .find(|g| g.iteration == it && g.wards.len() == self.wards.len() && !g.own.is_empty())
    }
}
