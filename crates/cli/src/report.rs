//! The final report of a run: human-readable or one JSON object.

use std::time::Duration;

use std::io::Write as _;

use serde::Serialize;
use spillway::{Config, JobStats};

/// What a run reports.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) algorithm: String,
    pub(crate) input: String,
    pub(crate) backend: String,
    pub(crate) ranks: u32,
    pub(crate) nodes: u32,
    pub(crate) running: u32,
    pub(crate) dynamic_running: bool,
    pub(crate) iterations: usize,
    pub(crate) load_seconds: f64,
    pub(crate) compute_seconds: f64,
    pub(crate) total_seconds: f64,
    pub(crate) iteration_seconds: Vec<f64>,
    /// Per iteration, the I/O of the process holding rank 0 and of the spill device
    /// (PageRank and K-means).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) iteration_io: Vec<crate::iostat::IterationIo>,
    pub(crate) messages_sent: u64,
    pub(crate) bytes_sent: u64,
    pub(crate) mem_budget: Option<u64>,
    pub(crate) policy: String,
    pub(crate) spill_bytes_written: u64,
    pub(crate) spill_bytes_read: u64,
    pub(crate) loads: u64,
    pub(crate) unloads: u64,
    pub(crate) overcommits: u64,
    pub(crate) messages_spilled: u64,
    pub(crate) message_bytes_spilled: u64,
    pub(crate) peak_resident_bytes: u64,
    pub(crate) peak_storage_backed_bytes: u64,
    pub(crate) prefetched_bytes: u64,
    pub(crate) peak_rss: Option<u64>,
    pub(crate) output: Option<String>,
    /// Per-operation statistics of MapReduce algorithms.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) operations: Vec<OpReport>,
    /// Fault-tolerance costs and recoveries (MapReduce with `--fault-tolerance`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fault_tolerance: Option<spillway::mapreduce::FtStats>,
    #[serde(skip)]
    pub(crate) facts: Vec<(String, f64)>,
    /// Whether this process prints the report (with the MPI backend, the one holding rank 0).
    #[serde(skip)]
    pub(crate) primary: bool,
}

impl Report {
    pub(crate) fn new(algorithm: &str, input: &str, config: &Config) -> Report {
        Report {
            algorithm: algorithm.into(),
            input: input.into(),
            backend: config.backend_kind().name().into(),
            ranks: config.ranks_total(),
            nodes: config.nodes_total(),
            running: config.running_per_node(),
            dynamic_running: config.is_dynamic_running(),
            iterations: 0,
            load_seconds: 0.0,
            compute_seconds: 0.0,
            total_seconds: 0.0,
            iteration_seconds: Vec::new(),
            iteration_io: Vec::new(),
            messages_sent: 0,
            bytes_sent: 0,
            mem_budget: config.mem_budget_bytes(),
            policy: config.memory_policy().name().into(),
            spill_bytes_written: 0,
            spill_bytes_read: 0,
            loads: 0,
            unloads: 0,
            overcommits: 0,
            messages_spilled: 0,
            message_bytes_spilled: 0,
            peak_resident_bytes: 0,
            peak_storage_backed_bytes: 0,
            prefetched_bytes: 0,
            peak_rss: None,
            output: None,
            operations: Vec::new(),
            fault_tolerance: None,
            facts: Vec::new(),
            primary: true,
        }
    }

    /// The report of a process none of whose ranks survived (prints nothing).
    pub(crate) fn silent(algorithm: &str, config: &Config) -> Report {
        let mut r = Report::new(algorithm, "", config);
        r.primary = false;
        r
    }

    /// Iterations, timings and the job's counters.
    pub(crate) fn set_run(
        &mut self,
        iterations: usize,
        times: &[Duration],
        load: Duration,
        compute: Duration,
        total: Duration,
        stats: &JobStats,
    ) {
        self.nodes = stats.nodes;
        self.primary = stats.local_ranks.contains(&stats.lead_rank);
        self.iterations = iterations;
        self.iteration_seconds = times.iter().map(Duration::as_secs_f64).collect();
        self.load_seconds = load.as_secs_f64();
        self.compute_seconds = compute.as_secs_f64();
        self.total_seconds = total.as_secs_f64();
        self.set_stats(stats);
    }

    fn set_stats(&mut self, stats: &JobStats) {
        self.messages_sent = stats.messages_sent();
        self.bytes_sent = stats.bytes_sent();
        let m = &stats.memory;
        self.spill_bytes_written = m.bytes_written + m.message_bytes_spilled;
        self.spill_bytes_read = m.bytes_read + m.message_bytes_spilled;
        self.loads = m.loads;
        self.unloads = m.unloads;
        self.overcommits = m.overcommits;
        self.messages_spilled = m.messages_spilled;
        self.message_bytes_spilled = m.message_bytes_spilled;
        self.peak_resident_bytes = m.peak_resident;
        self.peak_storage_backed_bytes = m.peak_allocated;
        self.prefetched_bytes = m.prefetched_bytes;
        self.peak_rss = stats.peak_rss;
    }

    /// Writes the report to stdout (nothing on processes other than the one holding rank 0).
    ///
    /// # Errors
    /// Writing stdout failed (a closed pipe, a full disk).
    pub(crate) fn print(&self, json: bool) -> std::io::Result<()> {
        if !self.primary {
            return Ok(());
        }
        let text = self.render(json);
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    }

    fn render(&self, json: bool) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        if json {
            let mut value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
            if let serde_json::Value::Object(map) = &mut value {
                for (k, v) in &self.facts {
                    let num = serde_json::Number::from_f64(*v)
                        .map(serde_json::Value::Number)
                        .unwrap_or(serde_json::Value::Null);
                    map.insert(k.clone(), num);
                }
            }
            let _ = writeln!(o, "{value}");
            return o;
        }
        let _ = writeln!(o, "spillway {}: {}", self.algorithm, self.input);
        let _ = writeln!(
            o,
            "  layout      {} ranks on {} node(s), {} running per node, {} backend",
            self.ranks, self.nodes, self.running, self.backend
        );
        for (k, v) in &self.facts {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                let _ = writeln!(o, "  {k:<19} {}", *v as i64);
            } else {
                let _ = writeln!(o, "  {k:<19} {v:.6e}");
            }
        }
        let n = self.iteration_seconds.len().max(1) as f64;
        let mean = self.iteration_seconds.iter().sum::<f64>() / n;
        let max = self.iteration_seconds.iter().cloned().fold(0.0, f64::max);
        let _ = writeln!(o, "  iterations  {}", self.iterations);
        let _ = writeln!(
            o,
            "  time        load {:.3} s, compute {:.3} s, total {:.3} s",
            self.load_seconds, self.compute_seconds, self.total_seconds
        );
        let _ = writeln!(o, "  per iter    mean {:.4} s, max {:.4} s", mean, max);
        for (i, t) in self.iteration_seconds.iter().enumerate() {
            let _ = writeln!(o, "    iteration {:>3}  {:.4} s", i + 1, t);
        }
        let _ = writeln!(
            o,
            "  messages    {} sent, {} bytes",
            self.messages_sent, self.bytes_sent
        );
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        match self.mem_budget {
            Some(b) => {
                let _ = writeln!(
                    o,
                    "  memory      budget {:.1} MiB per node, policy {}",
                    mib(b),
                    self.policy
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    "  memory      no budget (storage-backed data stays resident)"
                );
            }
        }
        let _ = writeln!(
            o,
            "  spill       {:.1} MiB written, {:.1} MiB read back, {} loads, {} unloads, {} overcommits",
            mib(self.spill_bytes_written),
            mib(self.spill_bytes_read),
            self.loads,
            self.unloads,
            self.overcommits
        );
        let _ = writeln!(
            o,
            "  spilled     {} messages ({:.1} MiB)",
            self.messages_spilled,
            mib(self.message_bytes_spilled),
        );
        let _ = writeln!(
            o,
            "  rank data   {:.1} MiB storage-backed at peak, {:.1} MiB of it resident at peak",
            mib(self.peak_storage_backed_bytes),
            mib(self.peak_resident_bytes)
        );
        if let Some(rss) = self.peak_rss {
            let _ = writeln!(o, "  peak RSS    {:.1} MiB", mib(rss));
        }
        if let Some(ft) = &self.fault_tolerance {
            let _ = writeln!(
                o,
                "  fault tol.  saving {:.3} s, {:.1} MiB kept, {:.1} MiB replicated, {} recoveries",
                ft.save.as_secs_f64(),
                mib(ft.bytes_kept),
                mib(ft.bytes_replicated),
                ft.recoveries.len()
            );
            for r in &ft.recoveries {
                let _ = writeln!(
                    o,
                    "    op {:>3} {}: lost ranks {:?}, {} left; {:.3} s (redistribute {:.3}, \
                     shuffle {:.3}, reduce {:.3}, map {:.3}, merge {:.3}), {:.1} MiB moved",
                    r.op,
                    r.detected,
                    r.lost_ranks,
                    r.ranks_after,
                    r.total.as_secs_f64(),
                    r.redistribute.as_secs_f64(),
                    r.shuffle.as_secs_f64(),
                    r.reduce.as_secs_f64(),
                    r.map.as_secs_f64(),
                    r.merge.as_secs_f64(),
                    mib(r.bytes_moved)
                );
            }
        }
        if !self.operations.is_empty() {
            let _ =
                writeln!(
                o,
                "  operations  {:>3} {:>8} {:>8} {:>8} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12}",
                "#", "map s", "comb s", "shuf s", "red s", "emitted B", "combined B",
                "shuffled B", "spilled B", "records out"
            );
            for (i, op) in self.operations.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "              {:>3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>12} {:>12} {:>12} {:>12} {:>12}",
                    i + 1,
                    op.map_seconds,
                    op.combine_seconds,
                    op.shuffle_seconds,
                    op.reduce_seconds,
                    op.bytes_emitted,
                    op.bytes_combined,
                    op.bytes_shuffled,
                    op.bytes_spilled,
                    op.records_out
                );
            }
        }
        if let Some(path) = &self.output {
            let _ = writeln!(o, "  output      {path}");
        }
        o
    }
}

/// One MapReduce operation in the report (over all ranks: counts summed, times of the
/// slowest rank).
#[derive(Debug, Serialize)]
pub(crate) struct OpReport {
    pub(crate) map_seconds: f64,
    pub(crate) combine_seconds: f64,
    pub(crate) shuffle_seconds: f64,
    pub(crate) reduce_seconds: f64,
    pub(crate) records_emitted: u64,
    pub(crate) bytes_emitted: u64,
    pub(crate) records_combined: u64,
    pub(crate) bytes_combined: u64,
    pub(crate) bytes_node_shuffled: u64,
    pub(crate) bytes_shuffled: u64,
    pub(crate) bytes_spilled: u64,
    pub(crate) rounds: u64,
    pub(crate) records_out: u64,
}

impl From<&spillway::mapreduce::OpStats> for OpReport {
    fn from(s: &spillway::mapreduce::OpStats) -> OpReport {
        OpReport {
            map_seconds: s.map.as_secs_f64(),
            combine_seconds: s.combine.as_secs_f64(),
            shuffle_seconds: s.shuffle.as_secs_f64(),
            reduce_seconds: s.reduce.as_secs_f64(),
            records_emitted: s.records_emitted,
            bytes_emitted: s.bytes_emitted,
            records_combined: s.records_combined,
            bytes_combined: s.bytes_combined,
            bytes_node_shuffled: s.bytes_node_shuffled,
            bytes_shuffled: s.bytes_shuffled,
            bytes_spilled: s.bytes_spilled,
            rounds: s.rounds,
            records_out: s.records_out,
        }
    }
}
