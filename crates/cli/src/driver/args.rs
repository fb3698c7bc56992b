//! Options shared by the commands: every command's ([`CommonArgs`]), those of a command that
//! runs a job ([`RuntimeArgs`], which include the former) and checkpointing
//! ([`CheckpointArgs`]).

use std::path::PathBuf;

use clap::Args;
use spillway::{Backend, ByteSize, Policy, ResumePolicy};

use crate::options::{named, nonzero_size, Running};

/// Options every command has.
#[derive(Args, Debug, Clone)]
pub(crate) struct CommonArgs {
    /// Print the report as one JSON object (on stdout, or on stderr when an output is stdout),
    /// and nothing else there.
    #[arg(long)]
    pub(crate) json: bool,
    /// Directory for spill files and for standard input or FIFO inputs, which are copied there
    /// before the job starts (default: the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) spill_dir: Option<PathBuf>,
    /// The most bytes read from standard input, a FIFO or a device before giving up (exit 2);
    /// default: the free space of the spill directory, at most 64G.
    #[arg(long, value_name = "SIZE", value_parser = nonzero_size)]
    pub(crate) input_limit: Option<ByteSize>,
}

/// The runtime: layout, memory, scheduling; with the options every command has.
#[derive(Args, Debug, Clone)]
pub(crate) struct RuntimeArgs {
    /// Total number of ranks.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) ranks: u32,
    /// Number of (virtual) nodes; ranks are split over them in contiguous blocks. With
    /// `--backend mpi` every MPI process is one node and this may be left out.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) nodes: u32,
    /// Ranks of one node executing at once: a number, or `dynamic` (one, plus more up to the
    /// cores while the memory budget has room for them). Default: the cores available, or
    /// `dynamic` with a memory budget.
    #[arg(long, value_name = "N|dynamic")]
    pub(crate) running: Option<Running>,
    /// Memory budget per node (e.g. 256M, 2G): storage-backed data and buffered messages
    /// beyond it go to the spill directory.
    #[arg(long, value_name = "SIZE", value_parser = nonzero_size)]
    pub(crate) mem_budget: Option<ByteSize>,
    /// When storage-backed memory is released: araw (unload whenever a rank blocks), arlw
    /// (when the budget needs room), lrlw (as arlw, reading pages as they are touched).
    #[arg(long, default_value = "araw", value_parser = named::<Policy>())]
    pub(crate) policy: Policy,
    /// Which runnable rank the scheduler resumes first: the one with the most memory resident
    /// (BDMPI), or the one that became runnable first.
    #[arg(long, default_value = "most-resident", value_parser = named::<ResumePolicy>())]
    pub(crate) resume_policy: ResumePolicy,
    /// Engine between nodes: threads of this process (virtual nodes), or one MPI process per
    /// node started with `mpirun -np NODES` (needs `--features mpi`).
    #[arg(long, default_value = "local", value_parser = named::<Backend>())]
    pub(crate) backend: Backend,
    /// Stack size of each rank (e.g. 256K, 4M; default 1M).
    #[arg(long, value_name = "SIZE", value_parser = nonzero_size)]
    pub(crate) stack_size: Option<ByteSize>,
    /// Write a Chrome trace of the run to FILE (opens in Perfetto or chrome://tracing): each
    /// rank's running and blocked intervals, loads and unloads of storage-backed memory.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) common: CommonArgs,
}

/// Checkpoint and resume of an iterative algorithm's state.
#[derive(Args, Debug, Clone)]
pub(crate) struct CheckpointArgs {
    /// Write checkpoints of the iteration state to DIR (shared by every rank; complete
    /// checkpoints appear atomically, torn ones are never used).
    #[arg(long, value_name = "DIR")]
    pub(crate) checkpoint_dir: Option<PathBuf>,
    /// Checkpoint after every K iterations (default 1 with --checkpoint-dir).
    #[arg(long, value_name = "K", requires = "checkpoint_dir",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) checkpoint_every: Option<u64>,
    /// Continue from the newest complete checkpoint in --checkpoint-dir (from the beginning
    /// if there is none); refused if it was written with other arguments.
    #[arg(long, requires = "checkpoint_dir")]
    pub(crate) resume: bool,
}
