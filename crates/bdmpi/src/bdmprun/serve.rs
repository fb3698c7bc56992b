//! One rank: the fiber that starts the rank's process and carries out its calls through
//! spillway's communication layer.
//!
//! The fiber holds its node slot while the process computes (it waits for the next call,
//! blocking its worker thread); a call that has to wait (a receive, a collective, a critical
//! section) waits in spillway's runtime, which gives the slot to another rank meanwhile. Under
//! `-sbma araw`/`lraw` the runtime's block hook asks the process to release its
//! storage-backed memory before the slot moves on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spillway_comm::{Collectives, Comm, Source, Tag};
use spillway_runtime::{Envelope, MessageInfo, Rank, RecvId, WaitKind, WaitQueue};
use spillway_transport::AlignedBuf;

use crate::chan::{Chan, Memory};
use crate::opts::Opts;
use crate::procs::{Exit, Procs};
use crate::proto::{self, op, types, CommInfo, Msg};
use crate::reduce::Fail;

/// What every rank of the node shares.
pub(crate) struct Node {
    pub(crate) opts: Opts,
    pub(crate) procs: Arc<Procs>,
    /// The job's private directory under `-wd`.
    pub(crate) workdir: std::path::PathBuf,
    /// Bytes of storage-backed memory the ranks released when they blocked.
    pub(crate) released: AtomicU64,
    /// Unloads asked of the ranks.
    pub(crate) unloads: AtomicU64,
}

/// A posted receive (`BDMPI_Irecv`) waiting for `Wait` or `Test`.
struct Pending<'r> {
    comm: Comm<'r>,
    id: RecvId,
    buf: u64,
    cap: usize,
}

/// The contribution of a `BDMPI_Reduce_init`, reduced at `BDMPI_Reduce_fine`.
struct Contribution {
    comm: i32,
    bytes: Vec<u8>,
}

/// The node's critical sections (`-nc` ranks inside at once).
struct Critical {
    inside: Mutex<u32>,
    queue: WaitQueue,
}

const CRITICAL_KEY: u64 = 0x4244_4d50_4943_5249; // "BDMPICRI"

pub(crate) type Out = Result<Msg, Fail>;

/// A rank's server.
pub(crate) struct Server<'r> {
    pub(crate) rank: &'r Rank,
    pub(crate) node: &'r Node,
    chan: Arc<Chan>,
    pub(crate) mem: Memory,
    pub(crate) comms: Vec<Option<Comm<'r>>>,
    recvs: HashMap<u32, Pending<'r>>,
    contributions: HashMap<u32, Contribution>,
    next_id: u32,
    critical: u32,
    /// The buffer for collectives' inputs (see `coll.rs`); a cell because a collective
    /// holds the communicator, borrowed from the server, while it uses the buffer.
    pub(crate) staging: std::cell::Cell<Option<spillway_runtime::SbVec<u8>>>,
}

/// Serves rank `rank` until its process calls `BDMPI_Finalize`.
pub(crate) fn serve(rank: &Rank, node: &Arc<Node>) -> Result<(), String> {
    let me = rank.rank();
    let env = vec![
        (proto::ENV_RANK.to_string(), me.to_string()),
        (
            proto::ENV_WORKDIR.to_string(),
            node.workdir.display().to_string(),
        ),
        (
            proto::ENV_SBMA.to_string(),
            node.opts.sbma.name().to_string(),
        ),
        (proto::ENV_DEBUG.to_string(), node.opts.dl.to_string()),
    ];
    let (pid, fd) = node
        .procs
        .spawn(me, env)
        .map_err(|e| format!("cannot start the process of rank {me}: {e}"))?;
    let chan = Arc::new(Chan::new(fd));
    if node.opts.sbma.aggressive_write() {
        let (c, n) = (Arc::clone(&chan), Arc::clone(node));
        rank.on_block(move || unload(&c, &n));
    }
    let mut s = Server {
        rank,
        node,
        chan,
        mem: Memory { pid },
        comms: Vec::new(),
        recvs: HashMap::new(),
        contributions: HashMap::new(),
        next_id: 1,
        critical: 0,
        staging: std::cell::Cell::new(None),
    };
    s.run()
}

/// Asks the rank's process to release its storage-backed memory and waits until it has.
fn unload(chan: &Chan, node: &Node) {
    let ask = Msg {
        kind: proto::KIND_UNLOAD,
        ..Msg::default()
    };
    if !chan.send(&ask) {
        return;
    }
    node.unloads.fetch_add(1, Ordering::Relaxed);
    while let Some(m) = chan.recv_now() {
        if m.kind == proto::KIND_UNLOADED {
            node.released.fetch_add(m.a[0], Ordering::Relaxed);
            return;
        }
    }
}

impl<'r> Server<'r> {
    fn me(&self) -> u32 {
        self.rank.rank()
    }

    fn run(&mut self) -> Result<(), String> {
        loop {
            let rank = self.rank;
            let m = match self.chan.recv(&|| rank.aborted()) {
                Err(()) => return Err(self.aborted()),
                Ok(None) => return Err(self.lost()),
                Ok(Some(m)) => m,
            };
            if m.kind != proto::KIND_CALL {
                return Err(format!(
                    "rank {}: unexpected message of kind {} from its process",
                    self.me(),
                    m.kind
                ));
            }
            if self.node.opts.dl > 0 {
                crate::say(format_args!("rank {}: {}", self.me(), op::name(m.op)));
            }
            let reply = match self.handle(&m) {
                Ok(r) => r,
                Err(Fail::Code(code, what)) => self.refuse(&m, code, &what),
                Err(Fail::Aborted) => return Err(self.aborted()),
            };
            if m.op == op::FINALIZE {
                // Before the answer: the process may exit as soon as it has it.
                self.release_critical();
                self.node.procs.finalized(self.me());
            }
            if !self.chan.send(&reply) {
                if m.op == op::FINALIZE {
                    return Ok(());
                }
                return Err(self.lost());
            }
            if m.op == op::FINALIZE {
                return Ok(());
            }
        }
    }

    /// The job is ending because of a failure elsewhere: the rank's process will see its
    /// socket close and exit, which is no failure of its own.
    fn aborted(&self) -> String {
        self.node.procs.set_ending();
        "the job was aborted".into()
    }

    /// The process closed its socket: how it ended.
    fn lost(&self) -> String {
        let me = self.me();
        match self.node.procs.exit_of(me, Duration::from_secs(10)) {
            Some((pid, e @ Exit::Code(_))) => {
                format!("rank {me} (pid {pid}) {e} without calling BDMPI_Finalize")
            }
            Some((pid, e @ Exit::Signal(_))) => {
                format!("rank {me} (pid {pid}) {e} before BDMPI_Finalize")
            }
            None => format!(
                "rank {me} (pid {}) closed its connection to bdmprun without calling \
                 BDMPI_Finalize",
                self.mem.pid
            ),
        }
    }

    /// An answer with `code`, after reporting what was wrong.
    pub(crate) fn refuse(&self, m: &Msg, code: i32, what: &str) -> Msg {
        crate::say(format_args!(
            "rank {}: {}: {what}",
            self.me(),
            op::name(m.op)
        ));
        reply_to(m, code)
    }

    pub(crate) fn comm(&self, id: i32) -> Result<&Comm<'r>, Fail> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.comms.get(i))
            .and_then(Option::as_ref)
            .ok_or_else(|| {
                Fail::Code(
                    proto::ERR_COMM,
                    format!("communicator {id} does not exist (freed?)"),
                )
            })
    }

    fn info(id: usize, c: &Comm<'_>) -> CommInfo {
        CommInfo {
            id: id as i32,
            size: c.size() as i32,
            rank: c.rank() as i32,
            lsize: c.local_size() as i32,
            lrank: c.local_rank() as i32,
            nsize: c.node_count() as i32,
            nrank: c.node_index() as i32,
            rrank: c.node_leader() as i32,
        }
    }

    fn add_comm(&mut self, c: Comm<'r>) -> CommInfo {
        let id = self.comms.len();
        let info = Self::info(id, &c);
        self.comms.push(Some(c));
        info
    }

    /// Writes `value`'s bytes at `addr` in the rank's memory.
    pub(crate) fn put<T: bytemuck::Pod>(&self, addr: u64, value: &[T]) -> Result<(), Fail> {
        let bytes: &[u8] = bytemuck::cast_slice(value);
        self.write(&[(addr, bytes.len())], bytes)
    }

    pub(crate) fn write(&self, pieces: &[(u64, usize)], data: &[u8]) -> Result<(), Fail> {
        self.mem.write(pieces, data).map_err(|e| {
            Fail::Code(
                proto::ERR_BUFFER,
                format!(
                    "cannot write {} bytes into the rank's buffers: {e}",
                    data.len()
                ),
            )
        })
    }

    pub(crate) fn read(&self, pieces: &[(u64, usize)], buf: &mut [u8]) -> Result<(), Fail> {
        self.mem.read(pieces, buf).map_err(|e| {
            Fail::Code(
                proto::ERR_BUFFER,
                format!("cannot read {} bytes of the rank's buffers: {e}", buf.len()),
            )
        })
    }

    fn handle(&mut self, m: &Msg) -> Out {
        match m.op {
            op::INIT => self.init(m),
            op::FINALIZE => Ok(reply_to(m, proto::SUCCESS)),
            op::COMM_DUP => {
                let c = self.comm(m.comm)?.dup();
                let info = self.add_comm(c);
                self.put(m.a[0], &[info])?;
                Ok(reply_to(m, proto::SUCCESS))
            }
            op::COMM_SPLIT => {
                let color = m.a[0] as i64;
                let key = m.a[1] as i64;
                let color = (color != i64::from(proto::UNDEFINED)).then_some(color as u32);
                let c = self.comm(m.comm)?.split(color, key)?;
                let info = match c {
                    Some(c) => self.add_comm(c),
                    None => CommInfo {
                        id: -1,
                        ..CommInfo::default()
                    },
                };
                self.put(m.a[2], &[info])?;
                Ok(reply_to(m, proto::SUCCESS))
            }
            op::COMM_FREE => {
                self.comm(m.comm)?;
                self.comms[m.comm as usize] = None;
                Ok(reply_to(m, proto::SUCCESS))
            }
            op::SEND => self.send(m),
            op::RECV => self.recv(m),
            op::IRECV => self.irecv(m),
            op::WAIT | op::TEST => self.complete(m),
            op::CANCEL => {
                if let Some(p) = self.recvs.remove(&(m.a[0] as u32)) {
                    self.rank.cancel_recv(p.id);
                }
                Ok(reply_to(m, proto::SUCCESS))
            }
            op::PROBE | op::IPROBE => self.probe(m),
            op::BARRIER => {
                self.comm(m.comm)?.barrier()?;
                Ok(reply_to(m, proto::SUCCESS))
            }
            op::BCAST => self.bcast(m),
            op::REDUCE | op::ALLREDUCE | op::SCAN | op::EXSCAN => self.reduction(m),
            op::GATHERV | op::ALLGATHERV => self.gatherv(m),
            op::SCATTERV => self.scatterv(m),
            op::ALLTOALLV => self.alltoallv(m),
            op::REDUCE_INIT => {
                let count = m.a[2] as usize;
                let size = types::size(m.a[3] as i32)
                    .ok_or_else(|| Fail::Code(proto::ERR_TYPE, "unknown datatype".into()))?;
                let mut bytes = vec![0u8; count * size];
                self.read(&[(m.a[0], bytes.len())], &mut bytes)?;
                let id = self.next_id;
                self.next_id = self.next_id.wrapping_add(1);
                self.contributions.insert(
                    id,
                    Contribution {
                        comm: m.comm,
                        bytes,
                    },
                );
                let mut r = reply_to(m, proto::SUCCESS);
                r.a[0] = u64::from(id);
                Ok(r)
            }
            op::REDUCE_FINE => self.reduce_fine(m),
            op::MERGE => self.merge(m),
            op::ENTER_CRITICAL => {
                let limit = self.node.opts.nc;
                let crit = self
                    .rank
                    .node_table()
                    .get_or_insert_with(CRITICAL_KEY, || Critical {
                        inside: Mutex::new(0),
                        queue: WaitQueue::new(),
                    });
                self.rank
                    .wait_until(&crit.queue, WaitKind::Critical, None, || {
                        let mut n = crit.inside.lock().unwrap_or_else(|e| e.into_inner());
                        if *n < limit {
                            *n += 1;
                            true
                        } else {
                            false
                        }
                    })
                    .map_err(Fail::from)?;
                self.critical += 1;
                Ok(reply_to(m, proto::SUCCESS))
            }
            op::EXIT_CRITICAL => {
                if self.critical == 0 {
                    return Err(Fail::Code(
                        proto::ERR_ARG,
                        "the rank is not inside a critical section".into(),
                    ));
                }
                self.critical -= 1;
                self.leave_critical();
                Ok(reply_to(m, proto::SUCCESS))
            }
            other => Err(Fail::Code(
                proto::ERR_ARG,
                format!("unknown call {other} (a libbdmpi of another version?)"),
            )),
        }
    }

    fn leave_critical(&self) {
        let crit = self
            .rank
            .node_table()
            .get_or_insert_with(CRITICAL_KEY, || Critical {
                inside: Mutex::new(0),
                queue: WaitQueue::new(),
            });
        {
            let mut n = crit.inside.lock().unwrap_or_else(|e| e.into_inner());
            *n = n.saturating_sub(1);
        }
        self.rank.wake_all(&crit.queue);
    }

    /// A rank that finalizes inside critical sections leaves them.
    fn release_critical(&mut self) {
        while self.critical > 0 {
            self.critical -= 1;
            self.leave_critical();
        }
    }

    fn init(&mut self, m: &Msg) -> Out {
        if !self.comms.is_empty() {
            return Err(Fail::Code(
                proto::ERR_UNKNOWN,
                "called a second time".into(),
            ));
        }
        let rank = self.rank;
        let world = Comm::world(rank);
        let node = Comm::node(rank);
        let cworld = Comm::cyclic_world(rank);
        let me = world
            .split(Some(world.rank() as u32), 0)?
            .expect("every rank has a color");
        let infos = [
            self.add_comm(world),
            self.add_comm(node),
            self.add_comm(me),
            self.add_comm(cworld),
        ];
        self.put(m.a[0], &infos)?;
        Ok(reply_to(m, proto::SUCCESS))
    }

    /// Communicator rank, or any, of a call's source argument.
    fn source(raw: u64) -> Source {
        let s = raw as i64 as i32;
        if s == proto::ANY_SOURCE {
            Source::Any
        } else {
            Source::Rank(s as usize)
        }
    }

    fn tag(raw: u64) -> Tag {
        let t = raw as i64 as i32;
        if t == proto::ANY_TAG {
            Tag::Any
        } else {
            Tag::Value(t)
        }
    }

    fn send(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?;
        let size = types::size(m.a[2] as i32)
            .ok_or_else(|| Fail::Code(proto::ERR_TYPE, "unknown datatype".into()))?;
        let bytes = (m.a[1] as usize)
            .checked_mul(size)
            .ok_or_else(|| Fail::Code(proto::ERR_COUNT, "the count overflows".into()))?;
        let mut buf = AlignedBuf::for_overwrite(bytes);
        self.read(&[(m.a[0], bytes)], buf.as_bytes_mut())?;
        comm.send_buf(m.a[3] as usize, m.a[4] as i32, buf)?;
        Ok(reply_to(m, proto::SUCCESS))
    }

    /// Copies a received message into the rank's buffer and answers as `RECV` does.
    fn deliver(&self, m: &Msg, comm: &Comm<'_>, env: &Envelope, buf: u64, cap: usize) -> Out {
        let data = env.payload.as_bytes();
        let status = comm.status_of_message(MessageInfo {
            source: env.source,
            tag: env.tag,
            bytes: data.len(),
        });
        let n = data.len().min(cap);
        self.write(&[(buf, n)], &data[..n])?;
        let mut r = reply_to(m, proto::SUCCESS);
        r.a[0] = status.source as u64;
        r.a[1] = status.tag as i64 as u64;
        r.a[2] = n as u64;
        r.a[3] = data.len() as u64;
        if data.len() > cap {
            let what = format!(
                "a message of {} bytes from rank {} (tag {}) does not fit the receive buffer of \
                 {cap} bytes; it was truncated",
                data.len(),
                status.source,
                status.tag
            );
            let mut refused = self.refuse(m, proto::ERR_TRUNCATE, &what);
            refused.a = r.a;
            return Ok(refused);
        }
        Ok(r)
    }

    fn capacity(m: &Msg) -> Result<usize, Fail> {
        let size = types::size(m.a[2] as i32)
            .ok_or_else(|| Fail::Code(proto::ERR_TYPE, "unknown datatype".into()))?;
        (m.a[1] as usize)
            .checked_mul(size)
            .ok_or_else(|| Fail::Code(proto::ERR_COUNT, "the count overflows".into()))
    }

    fn recv(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?.clone();
        let cap = Self::capacity(m)?;
        let pattern = comm.p2p_pattern(Self::source(m.a[3]), Self::tag(m.a[4]))?;
        let env = self.rank.recv(pattern, WaitKind::Recv)?;
        self.deliver(m, &comm, &env, m.a[0], cap)
    }

    fn irecv(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?.clone();
        let cap = Self::capacity(m)?;
        let pattern = comm.p2p_pattern(Self::source(m.a[3]), Self::tag(m.a[4]))?;
        let id = self.rank.post_recv(pattern);
        let handle = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.recvs.insert(
            handle,
            Pending {
                comm,
                id,
                buf: m.a[0],
                cap,
            },
        );
        let mut r = reply_to(m, proto::SUCCESS);
        r.a[0] = u64::from(handle);
        Ok(r)
    }

    fn complete(&mut self, m: &Msg) -> Out {
        let handle = m.a[0] as u32;
        let Some(p) = self.recvs.get(&handle) else {
            return Err(Fail::Code(
                proto::ERR_ARG,
                format!("request {handle} is not a pending receive"),
            ));
        };
        let env = if m.op == op::WAIT {
            Some(self.rank.wait_recv(p.id, WaitKind::Wait)?)
        } else {
            self.rank.test_recv(p.id)?
        };
        let Some(env) = env else {
            let mut r = reply_to(m, proto::SUCCESS);
            r.a[4] = 0;
            return Ok(r);
        };
        let p = self.recvs.remove(&handle).expect("looked up above");
        let mut r = self.deliver(m, &p.comm, &env, p.buf, p.cap)?;
        r.a[4] = 1;
        Ok(r)
    }

    fn probe(&mut self, m: &Msg) -> Out {
        let comm = self.comm(m.comm)?;
        let (source, tag) = (Self::source(m.a[0]), Self::tag(m.a[1]));
        let status = if m.op == op::PROBE {
            Some(comm.probe(source, tag)?)
        } else {
            comm.iprobe(source, tag)?
        };
        let mut r = reply_to(m, proto::SUCCESS);
        if let Some(s) = status {
            r.a[0] = s.source as u64;
            r.a[1] = s.tag as i64 as u64;
            r.a[2] = s.bytes as u64;
            r.a[3] = types::BYTE as u64;
            r.a[4] = 1;
        }
        Ok(r)
    }

    fn reduce_fine(&mut self, m: &Msg) -> Out {
        let id = m.a[5] as u32;
        let Some(contribution) = self.contributions.remove(&id) else {
            return Err(Fail::Code(
                proto::ERR_ARG,
                format!("request {id} is not a pending BDMPI_Reduce_init"),
            ));
        };
        if contribution.comm != m.comm {
            return Err(Fail::Code(
                proto::ERR_COMM,
                "BDMPI_Reduce_fine on another communicator than its BDMPI_Reduce_init".into(),
            ));
        }
        let comm = self.comm(m.comm)?.clone();
        let (count, datatype, opn, root) = (
            m.a[1] as usize,
            m.a[2] as i32,
            m.a[3] as i32,
            m.a[4] as usize,
        );
        let size = types::size(datatype)
            .ok_or_else(|| Fail::Code(proto::ERR_TYPE, "unknown datatype".into()))?;
        if contribution.bytes.len() != count * size {
            return Err(Fail::Code(
                proto::ERR_COUNT,
                format!(
                    "BDMPI_Reduce_fine for {} bytes, BDMPI_Reduce_init gave {}",
                    count * size,
                    contribution.bytes.len()
                ),
            ));
        }
        let recvbuf = m.a[0];
        let mut input = |dst: &mut [u8]| -> Result<(), Fail> {
            dst.copy_from_slice(&contribution.bytes);
            Ok(())
        };
        let mut output = |src: &[u8]| self.write(&[(recvbuf, src.len())], src);
        crate::reduce::reduction(
            crate::reduce::Kind::Reduce(root),
            &comm,
            count,
            datatype,
            opn,
            &mut crate::reduce::Io {
                input: &mut input,
                output: &mut output,
            },
        )?;
        Ok(reply_to(m, proto::SUCCESS))
    }
}

/// An answer to `m` with `code`.
pub(crate) fn reply_to(m: &Msg, code: i32) -> Msg {
    Msg {
        kind: proto::KIND_REPLY,
        op: m.op,
        code,
        comm: m.comm,
        a: [0; 12],
    }
}
