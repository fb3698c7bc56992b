//! Message routing: where a sent message goes (a mailbox of this process, a spill file, or the
//! outbox to another process) and the blocking receive operations on mailboxes.

use std::sync::atomic::Ordering;

use spillway_transport::Envelope;

use crate::error::Error;
use crate::job::Job;
use crate::mailbox::{Body, MailWait, MessageInfo, Msg, Pattern, RecvId};
use crate::sched::{WaitInfo, WaitKind, WaitOn};
use spillway_transport::lock;
use spillway_transport::Outgoing;

impl Job {
    /// Sends `env` to rank `dest`: into its mailbox if it is held here, else through the
    /// outbox (from this thread when ranks may drive the engine, see [`Outbox::push`]).
    ///
    /// [`Outbox::push`]: spillway_transport::Outbox::push
    pub(crate) fn send(&self, dest: u32, env: Envelope) -> Result<(), Error> {
        if self.is_local(dest) {
            let msg = self.to_msg(dest, env)?;
            self.deliver(dest, msg);
            return Ok(());
        }
        let remote = self.remote.as_ref().expect("a job without remote nodes");
        remote.push(Outgoing {
            dest,
            context: env.context,
            source: env.source,
            tag: env.tag,
            payload: env.payload,
        });
        Ok(())
    }

    /// A message for local rank `dest`: in memory, or in a spill file of `dest`'s node when it
    /// is large and the node's memory budget is full (BDMPI: large buffered messages live on
    /// the destination node's disk).
    pub(crate) fn to_msg(&self, dest: u32, env: Envelope) -> Result<Msg, Error> {
        let (mem, local) = self.node_mem(dest);
        if !mem.should_spill(env.payload.len()) {
            return Ok(Msg::in_memory(env));
        }
        let spilled = mem
            .spill_message(local, env.payload.as_bytes())
            .map_err(Error::Io)?;
        Ok(Msg {
            context: env.context,
            source: env.source,
            tag: env.tag,
            len: env.payload.len(),
            body: Body::Disk(spilled),
        })
    }

    /// Delivers a message to its destination's mailbox and wakes the destination if it waits
    /// for it.
    pub(crate) fn deliver(&self, dest: u32, msg: Msg) {
        let (node, local) = self.node_of(dest);
        if let Body::Mem(_) = msg.body {
            node.mem
                .message_bytes
                .fetch_add(msg.len as u64, Ordering::Relaxed);
        }
        let wake = lock(&node.mailboxes[local]).deliver(msg);
        node.mail_seq[local].0.fetch_add(1, Ordering::Release);
        if wake {
            node.sched.wake(local);
        }
    }

    /// Takes a completed message out of the node's accounting.
    pub(crate) fn received(&self, rank: u32, msg: &Msg) {
        if let Body::Mem(_) = msg.body {
            let (node, _) = self.node_of(rank);
            node.mem
                .message_bytes
                .fetch_sub(msg.len as u64, Ordering::Relaxed);
        }
    }

    /// Posts a receive with the owner's buffer (see [`Mailbox::post_into`]).
    pub(crate) fn post_recv_into(&self, rank: u32, pattern: Pattern, buf: &mut [u8]) -> RecvId {
        let (node, local) = self.node_of(rank);
        lock(&node.mailboxes[local]).post_into(pattern, buf.as_mut_ptr() as usize, buf.len())
    }

    /// After a failed wait on a receive posted with a buffer: waits until the engine no
    /// longer writes into that buffer (it completes or abandons its transfers when the job
    /// fails), then withdraws the receive. The caller may then return.
    pub(crate) fn settle_recv(&self, rank: u32, id: RecvId) {
        let (node, local) = self.node_of(rank);
        loop {
            {
                let mut mb = lock(&node.mailboxes[local]);
                if !mb.is_claimed(id) {
                    mb.cancel(id);
                    return;
                }
            }
            if let Some(remote) = self.remote.as_deref() {
                remote.drive();
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    /// Reserves a receive posted with a buffer for a large message from another process
    /// (see [`Mailbox::claim`]); returns the receive and where its bytes go.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn claim(
        &self,
        dest: u32,
        key: (u64, u32, i32),
        len: usize,
    ) -> Option<(u64, usize)> {
        let (node, local) = self.node_of(dest);
        let (id, addr) = lock(&node.mailboxes[local]).claim(key, len)?;
        Some((id.0, addr))
    }

    /// Whether local rank `dest` is ready for a message with `key` and `len` bytes (see
    /// [`Mailbox::expects`]).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn expects(
        &self,
        dest: u32,
        key: (u64, u32, i32),
        len: usize,
    ) -> spillway_transport::Expect {
        let (node, local) = self.node_of(dest);
        lock(&node.mailboxes[local]).expects(key, len)
    }

    /// Ends a claim (see [`Mailbox::complete_claim`]) and wakes the receiver if it waits.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn complete_claim(&self, dest: u32, id: u64, addr: usize, ok: bool) {
        let (node, local) = self.node_of(dest);
        let wake = lock(&node.mailboxes[local]).complete_claim(RecvId(id), addr, ok);
        node.mail_seq[local].0.fetch_add(1, Ordering::Release);
        if wake {
            node.sched.wake(local);
        }
    }

    pub(crate) fn post_recv(&self, rank: u32, pattern: Pattern) -> RecvId {
        let (node, local) = self.node_of(rank);
        lock(&node.mailboxes[local]).post(pattern)
    }

    pub(crate) fn test_recv(&self, rank: u32, id: RecvId) -> Option<Msg> {
        let (node, local) = self.node_of(rank);
        lock(&node.mailboxes[local]).take(id)
    }

    pub(crate) fn cancel_recv(&self, rank: u32, id: RecvId) {
        let (node, local) = self.node_of(rank);
        lock(&node.mailboxes[local]).cancel(id)
    }

    pub(crate) fn iprobe(&self, rank: u32, pattern: &Pattern) -> Option<MessageInfo> {
        let (node, local) = self.node_of(rank);
        lock(&node.mailboxes[local]).probe(pattern)
    }

    /// The waiting protocol on a mailbox: `check` runs under the mailbox lock and either
    /// succeeds or says what to register; the rank spins briefly, then blocks until a delivery
    /// satisfies the registration.
    fn wait_mailbox<T>(
        &self,
        rank: u32,
        kind: WaitKind,
        mut check: impl FnMut(&mut crate::mailbox::Mailbox) -> Result<T, MailWait>,
    ) -> Result<T, Error> {
        let (node, local) = self.node_of(rank);
        let mailbox = &node.mailboxes[local];
        let seq = &node.mail_seq[local].0;
        let mut found = None;
        loop {
            if let Some(e) = self.loss_unacknowledged(rank) {
                return Err(e);
            }
            // Read before looking: a delivery after the look changes it.
            let mut seen = seq.load(Ordering::Acquire);
            let wait = {
                let mut mb = lock(mailbox);
                match check(&mut mb) {
                    Ok(v) => {
                        mb.clear_waiting();
                        return Ok(v);
                    }
                    Err(w) => w,
                }
            };
            if self.aborted() {
                return Err(Error::Aborted);
            }
            let spun = self.spin(node, local, &mut || {
                let now = seq.load(Ordering::Acquire);
                if now == seen {
                    return false;
                }
                seen = now;
                let mut mb = lock(mailbox);
                match check(&mut mb) {
                    Ok(v) => {
                        found = Some(v);
                        true
                    }
                    Err(_) => false,
                }
            });
            if spun {
                return Ok(found.take().expect("spin found a value"));
            }
            {
                let mut mb = lock(mailbox);
                match check(&mut mb) {
                    Ok(v) => {
                        mb.clear_waiting();
                        return Ok(v);
                    }
                    Err(_) => mb.set_waiting(wait),
                }
            }
            let info = WaitInfo {
                kind,
                on: WaitOn::Mailbox,
            };
            self.block(node, local, info)?;
        }
    }

    pub(crate) fn wait_recv(&self, rank: u32, id: RecvId, kind: WaitKind) -> Result<Msg, Error> {
        self.wait_mailbox(rank, kind, |mb| mb.take(id).ok_or(MailWait::Recv(id)))
    }

    pub(crate) fn probe(
        &self,
        rank: u32,
        pattern: Pattern,
        kind: WaitKind,
    ) -> Result<MessageInfo, Error> {
        self.wait_mailbox(rank, kind, |mb| {
            mb.probe(&pattern).ok_or(MailWait::Probe(pattern))
        })
    }

    /// Waits until all (or, with `any`, one) of the posted receives `ids` have their
    /// message; returns the index of one that has.
    pub(crate) fn wait_group(
        &self,
        rank: u32,
        ids: &[RecvId],
        any: bool,
        kind: WaitKind,
    ) -> Result<usize, Error> {
        self.wait_mailbox(rank, kind, |mb| {
            let first = ids.iter().position(|&i| mb.is_complete(i));
            let done = if any {
                first
            } else if ids.iter().all(|&i| mb.is_complete(i)) {
                Some(0)
            } else {
                None
            };
            done.ok_or_else(|| MailWait::Group {
                ids: ids.to_vec(),
                any,
            })
        })
    }
}
