//! The narrow interface between an engine (which carries messages between processes) and the
//! job it serves (which the runtime implements).

use crate::Envelope;

/// Why an engine ends a job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The job failed in another process: a rank there failed, or that process reported a
    /// transport error.
    Remote {
        /// The node (process) where the failure began.
        node: u32,
        /// That process's description of it.
        message: String,
    },
    /// The transport between nodes failed (an MPI call returned an error, a process was lost).
    Transport(String),
}

/// Processes lost from a job while it ran, as every survivor agreed on them (MPI with ULFM):
/// the survivors go on without them, and the job decides whether it can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// Counts the losses of the job: 1 for the first event, 2 for the next...
    pub epoch: u32,
    /// The nodes lost in this event, in increasing order (one MPI process is one node).
    pub nodes: Vec<u32>,
    /// Every node lost so far (this event's included), in increasing order.
    pub all: Vec<u32>,
}

/// A receive that a rank posted with its own buffer, reserved for a message whose header has
/// arrived: the engine writes the bytes straight into `ptr` and then reports the claim
/// complete ([`Host::complete_claim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// Global rank of the receiver.
    pub dest: u32,
    /// The host's name for the receive.
    pub id: u64,
    /// Where the bytes go (at least the message's length is writable there until the claim
    /// is completed).
    pub ptr: usize,
}

/// A message from another process whose header has arrived: where it goes and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announced {
    /// Global rank of the receiver (a rank of this process).
    pub dest: u32,
    /// Communication context.
    pub context: u64,
    /// Global rank of the sender.
    pub source: u32,
    /// Tag.
    pub tag: i32,
    /// Length in bytes.
    pub len: usize,
}

/// Whether the receiver of a large message whose header has arrived is ready for it (see
/// [`Host::expects`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A receive posted with a buffer of at least the message's length matches it: it can be
    /// claimed once nothing earlier of its source is pending.
    Buffer,
    /// The message must be received now into a buffer of the engine's: a receive without a
    /// fitting buffer matches it, or its receiver is blocked without a receive it matches (it
    /// waits for something else, or probes).
    Mailbox,
    /// Nothing matches it yet and its receiver is not blocked: a receive with a buffer may
    /// still come.
    Unknown,
}

/// What an engine needs from the job of this process.
pub trait Host: Send + Sync {
    /// Whether global rank `rank` runs in this process.
    fn is_local(&self, rank: u32) -> bool;

    /// Delivers a message from another process to local rank `dest` (in memory, or spilled
    /// under the node's memory budget); `Err` says why it could not be stored.
    fn deliver(&self, dest: u32, env: Envelope) -> Result<(), String>;

    /// For a message whose header has arrived (and no earlier message of its source is still
    /// pending): if the receive it matches now was posted with a buffer of at least its length,
    /// reserves that receive for it and says where the bytes go. The engine must then
    /// complete the claim, whatever happens.
    fn claim(&self, msg: Announced) -> Option<Claim>;

    /// Whether the receiver of a message whose header has arrived is ready for it (see
    /// [`Expect`]). The engine uses it to delay receiving a large message until its receiver
    /// posts a buffer, as MPI's rendezvous does, instead of receiving it into a buffer of its
    /// own and copying it again.
    fn expects(&self, msg: Announced) -> Expect;

    /// The bytes of a claimed message are in place (`ok`), or the transfer was abandoned (the
    /// job is failing and the receive ends without data).
    fn complete_claim(&self, claim: Claim, ok: bool);

    /// Ends the job with `failure`; `announce` says whether the other processes must be told
    /// (not when the failure came from one of them).
    fn fail(&self, failure: Failure, announce: bool);

    /// Processes were lost and the survivors go on without them: messages from them will not
    /// come, and messages to them are dropped. The job's ranks learn of it (a job that cannot
    /// go on without those processes fails, through [`fail`](Self::fail) or its ranks).
    fn lost(&self, lost: Lost);

    /// Whether the job is being aborted.
    fn aborted(&self) -> bool;

    /// Whether no rank of this process is running or runnable.
    fn passive(&self) -> bool;

    /// Whether every rank of this process has finished.
    fn local_done(&self) -> bool;

    /// The first local failure not yet announced to the other processes.
    fn take_announcement(&self) -> Option<String>;

    /// Whether this process recorded a failure (including spill storage failures).
    fn failed(&self) -> bool;

    /// Ends the job with a deadlock report of this process's ranks; `note` says that the
    /// other processes report their own.
    fn report_deadlock(&self, note: String);
}
