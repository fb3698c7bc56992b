//! The progress engine of one process: its state behind a mutex, so that besides the progress
//! thread a rank that waits can make progress itself (when MPI allows calls from any thread,
//! one at a time), without handing messages over between threads; and the progress thread's
//! loop.

use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Communicator, SimpleCommunicator};

use super::net::Net;
use super::progress::{Pause, Progress};
use crate::exchange::Exchange;
use crate::host::Host;
use crate::outbox::{Drive, Outbox};
use crate::{Layout, LinkModel};

pub(super) struct Engine {
    state: Mutex<Progress>,
}

impl Drive for Engine {
    fn try_send(&self) -> bool {
        let Ok(mut p) = self.state.try_lock() else {
            return false;
        };
        if p.closed || p.transport_failed {
            return false;
        }
        if let Err(e) = p.fast_step() {
            p.transport_failure(e);
        }
        true
    }

    fn exchange_now(&self, ex: &Arc<Exchange>, spin: Duration) -> Option<bool> {
        let mut guard = self.state.try_lock().ok()?;
        let p = &mut *guard;
        if p.closed || p.transport_failed {
            return None;
        }
        if let Err(e) = p.start_exchange(Arc::clone(ex)) {
            p.transport_failure(e);
            return Some(false);
        }
        let start = Instant::now();
        while !ex.is_done() && !ex.failed() && start.elapsed() < spin {
            if let Err(e) = p.direct.test(&p.net, &p.outbox) {
                p.transport_failure(e);
                return Some(false);
            }
        }
        Some(ex.is_done())
    }

    fn drive(&self) -> bool {
        let Ok(mut p) = self.state.try_lock() else {
            // Another thread is making progress right now. It may be the progress thread,
            // preempted on this core while it holds the engine: let it finish.
            std::thread::yield_now();
            return false;
        };
        if p.closed || p.transport_failed {
            return false;
        }
        match p.fast_step() {
            Ok(busy) => busy,
            Err(e) => {
                p.transport_failure(e);
                true
            }
        }
    }
}

/// The processes still in a job when it ended here, and a communicator of theirs (for the
/// caller's last collectives, such as combining counters).
pub struct Survivors {
    comm: ManuallyDrop<SimpleCommunicator>,
    nodes: Vec<u32>,
}

impl Survivors {
    /// The communicator of the surviving processes, in node order.
    pub fn comm(&self) -> &SimpleCommunicator {
        &self.comm
    }

    /// The node of each process of [`comm`](Self::comm).
    pub fn nodes(&self) -> &[u32] {
        &self.nodes
    }
}

impl Drop for Survivors {
    fn drop(&mut self) {
        if !super::peer_lost() {
            // SAFETY: dropped once, here.
            unsafe { ManuallyDrop::drop(&mut self.comm) };
        }
        // After a loss the communicator is left alone: MPI is not finalised then either.
    }
}

impl std::fmt::Debug for Survivors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Survivors")
            .field("nodes", &self.nodes)
            .finish()
    }
}

/// The communicators of the engine, made before the job starts ([`Comms::start`]).
pub struct Comms {
    comm: SimpleCommunicator,
    data: SimpleCommunicator,
    coll: SimpleCommunicator,
    end: SimpleCommunicator,
}

impl Comms {
    /// Starts a job on the processes of `comm` (a collective): makes the engine's
    /// communicators, duplicates of `comm` (one for message headers and control messages,
    /// one for message data, so that probing for headers never sees data whose receive is not
    /// posted yet, one for the collectives of the engine, with ULFM shrunk to agree on lost
    /// processes, and one for the agreement that ends the job; the last two are apart because
    /// a shrink agrees on the communicator it shrinks, and an end agreement pending on the
    /// same one would be taken for a step of the shrink), and measures the link between
    /// processes ([`measure_link`](super::measure_link)) when `measure` is set. Failing calls
    /// return their error code on all four.
    ///
    /// With lost processes survived (ULFM on), the processes then agree on whether every one
    /// of them got this far ([`agree_on_start`](super::agree_on_start)): a process lost during
    /// the start ends the job in every survivor, none of which has run a rank, instead of
    /// ending some (whose start-up call failed) while the others, already running, wait for
    /// them in a shrink.
    ///
    /// # Errors
    /// A message when a step failed here or in another process (e.g. a process lost while
    /// the job starts).
    pub fn start<C: Communicator>(
        comm: &C,
        measure: bool,
    ) -> Result<(Comms, Option<LinkModel>), String> {
        let mut made = Vec::with_capacity(4);
        let mut outcome = Ok(None);
        for _ in 0..4 {
            match super::duplicate(comm) {
                Ok(c) => made.push(c),
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        if outcome.is_ok() && measure {
            outcome = super::measure_link(&made[0]).map(Some);
        }
        let link = super::agree_on_start(comm, &made, outcome)?;
        let [comm, data, coll, end]: [SimpleCommunicator; 4] = made
            .try_into()
            .map_err(|_| "the engine's communicators were not all made".to_string())?;
        Ok((
            Comms {
                comm,
                data,
                coll,
                end,
            },
            link,
        ))
    }

    /// The communicator of message headers (process `i` is node `i`).
    pub fn comm(&self) -> &SimpleCommunicator {
        &self.comm
    }
}

impl std::fmt::Debug for Comms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comms").finish_non_exhaustive()
    }
}

/// Serves the job of `host` on the processes of `comms` until it has ended on every one of
/// them: the progress thread's whole life. Every process must call it. Returns the
/// processes still in the job at its end (all of them unless processes were lost, which only
/// an MPI with ULFM survives).
///
/// With `shared`, the job's ranks may make progress themselves while they wait (through
/// [`Outbox::drive`]); this needs MPI initialised with `MPI_THREAD_SERIALIZED` or more.
pub fn run_progress(
    host: Arc<dyn Host>,
    outbox: Arc<Outbox>,
    comms: Comms,
    layout: &Layout,
    peer_timeout: Duration,
    shared: bool,
) -> Survivors {
    let Comms {
        comm,
        data,
        coll,
        end,
    } = comms;
    let net = Net::new(comm.as_raw(), data.as_raw(), comm.rank(), comm.size());
    let engine = Arc::new(Engine {
        state: Mutex::new(Progress::new(
            host,
            Arc::clone(&outbox),
            net,
            coll.as_raw(),
            end.as_raw(),
            layout,
            peer_timeout,
        )),
    });
    if shared {
        let driver: Arc<dyn Drive> = engine.clone();
        outbox.set_driver(Arc::downgrade(&driver));
    }
    engine.run();
    let mut p = engine.lock();
    let nodes = (0..comm.size())
        .filter(|&n| p.peers.alive(n))
        .map(|n| n as u32)
        .collect();
    let survivors = if p.coll_is_shrunk() {
        let raw = p.take_shrunk_coll();
        // The first collective communicator is not freed: it was revoked.
        std::mem::forget(coll);
        // SAFETY: `raw` is a live intra-communicator made by MPIX_Comm_shrink, owned by
        // nobody else from now on.
        unsafe { SimpleCommunicator::from_raw(raw) }
    } else {
        coll
    };
    drop(p);
    if super::peer_lost() {
        // Operations that failed may still refer to them; MPI is not finalised either.
        std::mem::forget(data);
        std::mem::forget(comm);
        std::mem::forget(end);
    }
    Survivors {
        comm: ManuallyDrop::new(survivors),
        nodes,
    }
}

impl Engine {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self) {
        let mut idle = 0u32;
        let mut idle_since = Instant::now();
        loop {
            let mut p = self.lock();
            if p.transport_failed {
                break;
            }
            let busy = match p.step() {
                Ok(busy) => busy,
                Err(e) => {
                    p.transport_failure(e);
                    break;
                }
            };
            if p.finish_round() {
                break;
            }
            if busy {
                idle = 0;
                idle_since = Instant::now();
            } else {
                idle = idle.saturating_add(1);
            }
            let wait = p.pause(idle, idle_since.elapsed());
            let outbox = Arc::clone(&p.outbox);
            drop(p);
            match wait {
                Pause::None => {}
                Pause::Yield => std::thread::yield_now(),
                Pause::Sleep(d) => outbox.wait(d),
            }
        }
        let mut p = self.lock();
        p.closed = true;
        p.direct.close();
        for ex in p.outbox.take_exchanges() {
            ex.fail();
        }
        if p.transport_failed || p.live.silent.is_some() {
            p.release_rank_memory();
        }
        if p.transport_failed {
            // The network cannot be trusted any more: let the local ranks end and leave.
            while !p.host.local_done() {
                std::thread::sleep(Duration::from_millis(1));
            }
            return;
        }
        if p.live.silent.is_some() {
            return;
        }
        // Late messages (e.g. an announcement sent just before the end) are read so that
        // nothing is left in the communicator.
        let _ = p.step();
        p.agree();
    }
}
