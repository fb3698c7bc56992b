//! Job configuration.

use std::path::PathBuf;

use spillway_transport::{Backend, Layout};

use crate::error::JobError;

/// Which runnable rank of a node gets a free slot first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ResumePolicy {
    /// The rank that became runnable first.
    #[default]
    Fifo,
}

impl ResumePolicy {
    /// Parses a policy name (`fifo`).
    pub fn from_name(name: &str) -> Option<ResumePolicy> {
        match name {
            "fifo" => Some(ResumePolicy::Fifo),
            _ => None,
        }
    }
}

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
    pub(crate) spill_dir: Option<PathBuf>,
    pub(crate) backend: Backend,
    pub(crate) resume: ResumePolicy,
    pub(crate) stack_size: usize,
}

impl Config {
    /// `ranks` ranks on one node, `running` = the cores available, local backend.
    pub fn new(ranks: u32) -> Config {
        Config {
            ranks,
            nodes: 1,
            running: None,
            spill_dir: None,
            backend: Backend::Local,
            resume: ResumePolicy::Fifo,
            stack_size: 8 << 20,
        }
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

    /// Which runnable rank is resumed first.
    pub fn resume_policy(mut self, policy: ResumePolicy) -> Config {
        self.resume = policy;
        self
    }

    /// Stack size of each rank's thread in bytes (default 8 MiB).
    pub fn stack_size(mut self, bytes: usize) -> Config {
        self.stack_size = bytes;
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
    pub fn layout(&self) -> Result<Layout, JobError> {
        if self.running == Some(0) {
            return Err(JobError::Config(
                "running must be at least 1 (the ranks of a node that execute at once)".into(),
            ));
        }
        Layout::new(self.ranks, self.nodes).map_err(|e| JobError::Config(e.to_string()))
    }
}
