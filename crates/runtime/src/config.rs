//! Job configuration.

use std::path::PathBuf;

use spillway_transport::{Backend, Layout, LinkModel};

use crate::error::JobError;
use crate::memory::Policy;

/// Which runnable rank of a node gets a free slot first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ResumePolicy {
    /// The rank that became runnable first.
    #[default]
    Fifo,
    /// The runnable rank with the most resident storage-backed memory (BDMPI), so resuming it
    /// costs the least I/O; ties go to the rank that became runnable first.
    MostResident,
}

spillway_transport::named_enum!(
    ResumePolicy,
    "resume policy",
    [MostResident => "most-resident", Fifo => "fifo"]
);

/// How to run a job: a builder.
///
/// ```
/// use spillway_runtime::Config;
/// let config = Config::new(8).nodes(2).running(1);
/// assert_eq!(config.ranks_total(), 8);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) ranks: u32,
    pub(crate) nodes: u32,
    pub(crate) running: Option<u32>,
    pub(crate) dynamic_running: bool,
    pub(crate) spill_dir: Option<PathBuf>,
    pub(crate) backend: Backend,
    pub(crate) resume: ResumePolicy,
    pub(crate) stack_size: usize,
    pub(crate) mem_budget: Option<u64>,
    pub(crate) policy: Policy,
    pub(crate) message_spill_threshold: usize,
    pub(crate) link_model: Option<LinkModel>,
    pub(crate) peer_timeout: std::time::Duration,
    pub(crate) spin: std::time::Duration,
    pub(crate) trace: Option<PathBuf>,
}

impl Config {
    /// `ranks` ranks on one node, `running` = the cores available, local backend.
    pub fn new(ranks: u32) -> Config {
        Config {
            ranks,
            nodes: 1,
            running: None,
            dynamic_running: false,
            spill_dir: None,
            backend: Backend::Local,
            resume: ResumePolicy::Fifo,
            stack_size: 1 << 20,
            mem_budget: None,
            policy: Policy::Araw,
            message_spill_threshold: 64 << 10,
            link_model: None,
            peer_timeout: std::time::Duration::from_secs(30),
            spin: std::time::Duration::from_micros(50),
            trace: None,
        }
    }

    /// Writes a Chrome trace of the job to `path` when it ends (each rank's running and blocked
    /// intervals, loads and unloads of storage-backed memory; see the `trace` module). With
    /// the MPI backend each process writes its own nodes' part to `path` with `.node<N>`
    /// appended.
    pub fn trace(mut self, path: impl Into<PathBuf>) -> Config {
        self.trace = Some(path.into());
        self
    }

    /// Memory budget of each node in bytes: storage-backed memory and buffered messages are
    /// kept within it (default: none).
    pub fn mem_budget(mut self, bytes: u64) -> Config {
        self.mem_budget = Some(bytes);
        self
    }

    /// When storage-backed memory is released (default ARAW).
    pub fn policy(mut self, policy: Policy) -> Config {
        self.policy = policy;
        self
    }

    /// Messages at least this long go to spill files when the node's message memory is full
    /// (default 64 KiB).
    pub fn message_spill_threshold(mut self, bytes: usize) -> Config {
        self.message_spill_threshold = bytes;
        self
    }

    /// The memory budget per node, if any.
    pub fn mem_budget_bytes(&self) -> Option<u64> {
        self.mem_budget
    }

    /// The storage-backed memory policy.
    pub fn memory_policy(&self) -> Policy {
        self.policy
    }

    /// Number of (virtual) nodes; ranks are split over them in contiguous blocks.
    pub fn nodes(mut self, nodes: u32) -> Config {
        self.nodes = nodes;
        self
    }

    /// The most ranks of one node executing at once (default: the cores available, at most the
    /// ranks of the node).
    pub fn running(mut self, running: u32) -> Config {
        self.running = Some(running);
        self
    }

    /// Dynamic number of running ranks (Iverson 6.x): a node always runs one rank and starts
    /// more, up to `running` (default: the cores), only while its memory budget has room for
    /// all of the next rank's storage-backed data. Without a budget this is `running`.
    pub fn dynamic_running(mut self, dynamic: bool) -> Config {
        self.dynamic_running = dynamic;
        self
    }

    /// Whether the number of running ranks adapts to memory.
    pub fn is_dynamic_running(&self) -> bool {
        self.dynamic_running
    }

    /// Directory under which the job creates its private spill directory (default: the system
    /// temporary directory).
    pub fn spill_dir(mut self, dir: impl Into<PathBuf>) -> Config {
        self.spill_dir = Some(dir.into());
        self
    }

    /// The engine that carries traffic between nodes.
    pub fn backend(mut self, backend: Backend) -> Config {
        self.backend = backend;
        self
    }

    /// The cost of a message between nodes, from which collectives choose their algorithm
    /// (pipelined chain or tree broadcast, reduce-scatter + allgather or tree allreduce).
    /// Default: measured by a ping-pong at start-up with the MPI backend; none with the local
    /// backend, whose virtual nodes pass pointers, so collectives use trees there.
    pub fn link_model(mut self, model: LinkModel) -> Config {
        self.link_model = Some(model);
        self
    }

    /// MPI backend: each process hears from its predecessor in the ring of processes every
    /// second; after this long without a sign of life the predecessor is taken to be lost and
    /// the job ends on every survivor with an error naming it (default 30 s).
    pub fn peer_timeout(mut self, timeout: std::time::Duration) -> Config {
        self.peer_timeout = timeout;
        self
    }

    /// Which runnable rank is resumed first.
    pub fn resume_policy(mut self, policy: ResumePolicy) -> Config {
        self.resume = policy;
        self
    }

    /// Stack size of each rank in bytes (default 1 MiB, at least 64 KiB). Ranks are fibers
    /// with stacks of their own; only the pages a rank touches are resident, so a large stack
    /// costs address space, not memory. A rank that overflows its stack aborts the process
    /// with "spillway: rank N overflowed its stack of S KiB": give it more.
    pub fn stack_size(mut self, bytes: usize) -> Config {
        self.stack_size = bytes;
        self
    }

    /// The stack size of each rank.
    pub fn stack_size_bytes(&self) -> usize {
        self.stack_size
    }

    /// How long a rank that waits for another *running* rank of its node spins before it
    /// gives up its slot (default 50 us; zero never spins). A rank never spins while another
    /// rank of its node waits for a slot.
    pub fn spin(mut self, duration: std::time::Duration) -> Config {
        self.spin = duration;
        self
    }

    /// Total number of ranks.
    pub fn ranks_total(&self) -> u32 {
        self.ranks
    }

    /// Number of nodes.
    pub fn nodes_total(&self) -> u32 {
        self.nodes
    }

    /// The slot count each node will use.
    pub fn running_per_node(&self) -> u32 {
        match self.running {
            Some(r) => r,
            None => std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
        }
    }

    /// The chosen backend.
    pub fn backend_kind(&self) -> Backend {
        self.backend
    }

    /// The configured spill directory parent, if any.
    pub fn spill_dir_path(&self) -> Option<&std::path::Path> {
        self.spill_dir.as_deref()
    }

    /// Checks the configuration and returns the rank layout.
    ///
    /// # Errors
    /// [`JobError::Config`] for an impossible layout, `running` of 0, a stack smaller than
    /// 64 KiB, or an absurd memory budget: less than one page per rank of a node, or more than
    /// this machine's memory and swap together.
    pub fn layout(&self) -> Result<Layout, JobError> {
        if self.running == Some(0) {
            return Err(JobError::Config(
                "running must be at least 1 (the ranks of a node that execute at once)".into(),
            ));
        }
        if self.stack_size < 64 << 10 {
            return Err(JobError::Config(format!(
                "a stack size of {} bytes is too small (at least 64 KiB)",
                self.stack_size
            )));
        }
        let layout =
            Layout::new(self.ranks, self.nodes).map_err(|e| JobError::Config(e.to_string()))?;
        if let Some(budget) = self.mem_budget {
            let per_node = layout.local_size(0) as u64;
            let minimum = per_node * 4096;
            if budget < minimum {
                return Err(JobError::Config(format!(
                    "a memory budget of {budget} bytes is less than one page per rank \
                     ({per_node} ranks per node need at least {minimum} bytes)"
                )));
            }
            if let Some(machine) = machine_memory() {
                if budget > machine {
                    return Err(JobError::Config(format!(
                        "a memory budget of {} MiB is more than this machine's memory and swap \
                         ({} MiB)",
                        budget >> 20,
                        machine >> 20
                    )));
                }
            }
        }
        Ok(layout)
    }
}

/// Physical memory plus swap of this machine, from /proc/meminfo.
pub(crate) fn machine_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = info.lines().find(|l| l.starts_with(name))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    };
    Some(field("MemTotal:")? + field("SwapTotal:").unwrap_or(0))
}

/// Swap available to this process: `SwapFree` of /proc/meminfo, at most what its control
/// group may swap (its memsw or swap.max bound). `None`: unknown.
pub fn available_swap() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("SwapFree:"))?;
    let free = line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024;
    Some(crate::cgroup::cgroup_swap_limit().map_or(free, |b| b.min(free)))
}

/// Memory available for new allocations without swapping: `MemAvailable` of /proc/meminfo,
/// or less when this process's control group has a memory limit (a container, a batch job):
/// then at most that limit less what the group uses.
pub fn available_memory() -> Option<u64> {
    let cgroup = crate::cgroup::cgroup_memory().map(|m| m.limit.saturating_sub(m.usage));
    let info = std::fs::read_to_string("/proc/meminfo").ok();
    let machine = info.as_deref().and_then(|info| {
        let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    });
    match (machine, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}
