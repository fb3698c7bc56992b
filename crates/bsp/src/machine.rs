//! The BSP machine parameters `g` and `l` of a layout ([`Machine`]) and the per-machine cache
//! that [`measure`](crate::measure) writes and [`Bsp::probe`](crate::Bsp::probe) reads.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use spillway_runtime::Rank;

/// The BSP machine parameters of a context (LPF's `lpf_machine_t`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Number of ranks.
    pub p: usize,
    /// Seconds per byte of an h-relation (the inverse of the bandwidth per rank).
    pub g: f64,
    /// Seconds per sync (latency and synchronisation).
    pub l: f64,
    /// Whether `g` and `l` were measured on this machine and layout (`false`: an estimate).
    pub measured: bool,
}

impl Machine {
    /// The modelled time of a superstep whose largest rank sends or receives `h` bytes.
    pub fn cost(&self, h: usize) -> f64 {
        self.g * h as f64 + self.l
    }
}

/// Communication patterns timed by [`measure`](crate::measure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pattern {
    /// Every rank sends `h / p` bytes to every rank.
    TotalExchange,
    /// Every rank sends `h` bytes and receives `h` bytes, in pieces of random size to and
    /// from random ranks at random offsets (a full h-relation).
    Random,
}

/// One timed superstep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    /// The pattern.
    pub pattern: Pattern,
    /// The h-relation: largest number of bytes a rank sent or received.
    pub h: usize,
    /// Seconds of the sync (the slowest rank, best of the repetitions).
    pub seconds: f64,
}

/// What [`measure`](crate::measure) found: the fitted machine, the samples and the quality of the fit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The fitted parameters.
    pub machine: Machine,
    /// Every timed superstep.
    pub samples: Vec<Sample>,
    /// Coefficient of determination of the least-squares fit `t = g*h + l` over all samples.
    pub r2: f64,
    /// Largest measured/model ratio among total-exchange samples.
    pub worst_total_exchange: f64,
    /// Largest measured/model ratio among random samples.
    pub worst_random: f64,
    /// Nodes of the layout.
    pub nodes: usize,
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A name for this machine: host name and processor model.
fn machine_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(str::to_owned)
        })
        .unwrap_or_default();
    format!("{}-{:016x}", host.trim(), fnv(cpu.as_bytes()))
}

/// The cache directory: `$SPILLWAY_PROBE_CACHE`, else `$XDG_CACHE_HOME/spillway`, else
/// `~/.cache/spillway`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SPILLWAY_PROBE_CACHE") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("spillway"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("spillway"))
}

/// The cache file of a machine and layout.
pub fn cache_file(p: usize, nodes: usize, backend: &str) -> Option<PathBuf> {
    cache_dir().map(|d| {
        d.join(format!(
            "probe-{}-p{p}-n{nodes}-{backend}.json",
            machine_id()
        ))
    })
}

/// The backend as far as the cache key is concerned: processes started by an MPI launcher, or
/// one process.
pub(crate) fn backend_name(_rank: &Rank) -> String {
    let mpi = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if mpi { "mpi" } else { "local" }.to_owned()
}

/// The cached machine of this layout, or an estimate (`measured: false`).
pub(crate) fn cached(rank: &Rank, p: usize) -> Machine {
    machine(p, rank.nodes() as usize, &backend_name(rank))
}

/// The machine parameters for `p` ranks on `nodes` nodes of `backend` (`"local"` or
/// `"mpi"`): as measured by [`measure`](crate::measure) (`spillway probe`) when the cache holds that layout,
/// otherwise a conservative estimate (`measured: false`, 2 GB/s per rank and 20 us per sync).
pub fn machine(p: usize, nodes: usize, backend: &str) -> Machine {
    let found = cache_file(p, nodes, backend)
        .and_then(|f| std::fs::read(f).ok())
        .and_then(|b| serde_json::from_slice::<ProbeReport>(&b).ok());
    match found {
        Some(r) => r.machine,
        None => Machine {
            p,
            g: 0.5e-9,
            l: 20e-6,
            measured: false,
        },
    }
}
