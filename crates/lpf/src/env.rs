//! spillway's settings for C programs, read from the environment (see `include/lpf/core.h`).

use std::path::PathBuf;

use spillway_runtime::{ByteSize, Config, Policy};

/// The settings of a top-level `lpf_exec`.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// What `LPF_MAX_P` stands for.
    pub(crate) max_procs: u32,
    pub(crate) nodes: u32,
    pub(crate) running: Option<u32>,
    pub(crate) budget: Option<u64>,
    pub(crate) policy: Option<Policy>,
    pub(crate) spill_dir: Option<PathBuf>,
    pub(crate) stack: usize,
    pub(crate) checked: bool,
}

/// Default stack of a process: C code (and test frameworks) expect more than a Rust rank.
const DEFAULT_STACK: usize = 4 << 20;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn count(name: &str) -> Result<Option<u32>, String> {
    match var(name) {
        None => Ok(None),
        Some(v) => match v.trim().parse::<u32>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => Err(format!("{name}={v}: expected a whole number of at least 1")),
        },
    }
}

fn size(name: &str) -> Result<Option<u64>, String> {
    match var(name) {
        None => Ok(None),
        Some(v) => v
            .parse::<ByteSize>()
            .map(|b| Some(b.bytes()))
            .map_err(|e| format!("{name}={v}: {e}")),
    }
}

/// The cores this process may use.
pub(crate) fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// What `LPF_MAX_P` stands for: `LPF_MAX_PROCS`, or the cores (also when the variable is
/// malformed; `lpf_exec` reports that).
pub(crate) fn max_procs() -> u32 {
    count("LPF_MAX_PROCS").ok().flatten().unwrap_or_else(cores)
}

/// Reads the settings.
pub(crate) fn settings() -> Result<Settings, String> {
    let policy = match var("SPILLWAY_POLICY") {
        None => None,
        Some(v) => Some(v.trim().parse::<Policy>()?),
    };
    Ok(Settings {
        max_procs: count("LPF_MAX_PROCS")?.unwrap_or_else(cores),
        nodes: count("SPILLWAY_NODES")?.unwrap_or(1),
        running: count("SPILLWAY_RUNNING")?,
        budget: size("SPILLWAY_MEM_BUDGET")?,
        policy,
        spill_dir: var("SPILLWAY_SPILL_DIR").map(PathBuf::from),
        stack: size("SPILLWAY_STACK_SIZE")?.map_or(DEFAULT_STACK, |s| s as usize),
        checked: matches!(
            var("SPILLWAY_LPF_CHECKED").as_deref(),
            Some("1" | "yes" | "true")
        ),
    })
}

impl Settings {
    /// The job configuration for `ranks` processes; `nested` sections run on one node.
    pub(crate) fn config(&self, ranks: u32, nested: bool) -> Config {
        let nodes = if nested { 1 } else { self.nodes.min(ranks) };
        let mut c = Config::new(ranks).nodes(nodes).stack_size(self.stack);
        if let Some(r) = self.running {
            c = c.running(r);
        }
        if let Some(b) = self.budget {
            c = c.mem_budget(b);
        }
        if let Some(p) = self.policy {
            c = c.policy(p);
        }
        if let Some(d) = &self.spill_dir {
            c = c.spill_dir(d);
        }
        c
    }
}
