//! The report of a command: one typed struct per command (its facts), the run's counters for
//! commands that run a job, written for people or as one JSON object, from the same values.

use std::cell::Cell;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use spillway::{ByteSize, Config, JobStats};

use crate::iostat::IterationIo;

/// What the ranks of a job measured (given by the rank that reports).
#[derive(Debug, Default)]
pub(crate) struct Timing {
    /// Iterations (or rounds, operations) the algorithm performed.
    pub(crate) iterations: usize,
    /// Wall time of each iteration this run performed.
    pub(crate) iteration_times: Vec<Duration>,
    /// Loading (reading or generating) the input.
    pub(crate) load: Duration,
    /// The algorithm.
    pub(crate) compute: Duration,
    /// I/O per iteration of the process holding rank 0, if sampled.
    pub(crate) io: Vec<IterationIo>,
    /// Per-operation statistics of MapReduce jobs.
    pub(crate) operations: Vec<OpReport>,
    /// Fault-tolerance costs and recoveries (MapReduce with `--fault-tolerance`).
    pub(crate) fault_tolerance: Option<spillway::mapreduce::FtStats>,
    /// Recoveries of a direct engine from processes lost for real (MPI with ULFM).
    pub(crate) recoveries: Vec<Recovery>,
}

/// A direct engine's recovery from lost processes: the survivors went on in the same job.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Recovery {
    /// The iteration the survivors went on from (0: they started over).
    pub(crate) from_iteration: usize,
    /// The ranks lost.
    pub(crate) lost_ranks: Vec<u32>,
    /// The exchange among the survivors, reading the input again and moving the state.
    pub(crate) seconds: f64,
}

impl Recovery {
    /// The recoveries an engine returns: (iteration gone on from, ranks lost, time).
    pub(crate) fn list(r: &[(usize, Vec<u32>, Duration)]) -> Vec<Recovery> {
        r.iter()
            .map(|(from, lost, t)| Recovery {
                from_iteration: *from,
                lost_ranks: lost.clone(),
                seconds: t.as_secs_f64(),
            })
            .collect()
    }
}

/// Tells the user on stderr that the survivors of lost processes went on (a direct engine
/// under MPI with ULFM): noted when the input is loaded again over fewer ranks, said by the
/// survivors' first rank once they completed an iteration after that (the recovery is then
/// over).
#[derive(Debug, Default)]
pub(crate) struct LossNotice {
    /// Ranks of the last load (0 before the first).
    ranks: Cell<usize>,
    /// A recovery not said yet, and whether this rank says it.
    pending: Cell<Option<bool>>,
}

impl LossNotice {
    /// The input was loaded over `comm` (the first time or again after a loss).
    pub(crate) fn loaded(&self, comm: &spillway::Comm) {
        if self.ranks.get() > comm.size() {
            self.pending.set(Some(comm.rank() == 0));
        }
        self.ranks.set(comm.size());
    }

    /// Iteration `iteration` ended: says a recovery before it, once.
    pub(crate) fn iterated(&self, rank: &spillway::Rank, iteration: usize) {
        if self.pending.take() != Some(true) {
            return;
        }
        if let Some(lost) = rank.lost_processes() {
            let survivors = rank.nodes() as usize - lost.nodes.len();
            eprintln!(
                "spillway: {lost}; the {survivors} surviving processes went on (iteration \
                 {iteration} done)"
            );
        }
    }
}

impl Timing {
    /// The timing of `iterations` iterations that took `iteration_times`, `compute` in all,
    /// after a `load`.
    pub(crate) fn new(
        iterations: usize,
        iteration_times: Vec<Duration>,
        load: Duration,
        compute: Duration,
    ) -> Timing {
        Timing {
            iterations,
            iteration_times,
            load,
            compute,
            ..Timing::default()
        }
    }

    /// The timing of a job done in one step of `compute` after a `load`.
    pub(crate) fn once(load: Duration, compute: Duration) -> Timing {
        Timing::new(1, vec![compute], load, compute)
    }

    /// The timing of a MapReduce job: its operations' statistics and fault-tolerance costs.
    pub(crate) fn mapreduce(
        iterations: usize,
        iteration_times: Vec<Duration>,
        load: Duration,
        compute: Duration,
        operations: &[spillway::mapreduce::OpStats],
        fault_tolerance: Option<spillway::mapreduce::FtStats>,
    ) -> Timing {
        Timing {
            operations: operations.iter().map(OpReport::from).collect(),
            fault_tolerance,
            ..Timing::new(iterations, iteration_times, load, compute)
        }
    }
}

/// The layout and counters of a job.
#[derive(Debug, Serialize)]
pub(crate) struct RunSection {
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
    /// Per iteration, the I/O of the process holding rank 0 and of the spill device.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) iteration_io: Vec<IterationIo>,
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
    /// Per-operation statistics of MapReduce algorithms.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) operations: Vec<OpReport>,
    /// Fault-tolerance costs and recoveries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fault_tolerance: Option<spillway::mapreduce::FtStats>,
    /// Recoveries of a direct engine from processes lost for real.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) recoveries: Vec<Recovery>,
}

impl RunSection {
    /// The section of a job run with `config` that took `total`.
    pub(crate) fn new(config: &Config, timing: Timing, stats: &JobStats, total: Duration) -> Self {
        let m = &stats.memory;
        RunSection {
            backend: config.backend_kind().name().into(),
            ranks: config.ranks_total(),
            nodes: stats.nodes,
            running: config.running_per_node(),
            dynamic_running: config.is_dynamic_running(),
            iterations: timing.iterations,
            load_seconds: timing.load.as_secs_f64(),
            compute_seconds: timing.compute.as_secs_f64(),
            total_seconds: total.as_secs_f64(),
            iteration_seconds: timing
                .iteration_times
                .iter()
                .map(Duration::as_secs_f64)
                .collect(),
            iteration_io: timing.io,
            messages_sent: stats.messages_sent(),
            bytes_sent: stats.bytes_sent(),
            mem_budget: config.mem_budget_bytes(),
            policy: config.memory_policy().name().into(),
            spill_bytes_written: m.bytes_written + m.message_bytes_spilled,
            spill_bytes_read: m.bytes_read + m.message_bytes_spilled,
            loads: m.loads,
            unloads: m.unloads,
            overcommits: m.overcommits,
            messages_spilled: m.messages_spilled,
            message_bytes_spilled: m.message_bytes_spilled,
            peak_resident_bytes: m.peak_resident,
            peak_storage_backed_bytes: m.peak_allocated,
            prefetched_bytes: m.prefetched_bytes,
            peak_rss: stats.peak_rss,
            operations: timing.operations,
            fault_tolerance: timing.fault_tolerance,
            recoveries: timing.recoveries,
        }
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

/// The report of a command: its name, input, facts, the run's counters and its output.
#[derive(Serialize)]
pub(crate) struct Report<'a, F: Serialize> {
    /// The command (`pagerank`, `compress`, ...).
    pub(crate) algorithm: &'static str,
    /// The input(s), as given.
    pub(crate) input: String,
    /// The command's own facts.
    #[serde(flatten)]
    pub(crate) facts: &'a F,
    /// The plan's estimate of this process's peak resident memory (checked before the job
    /// against the memory available).
    pub(crate) memory_estimate_bytes: u64,
    /// The job's layout and counters (commands that run a job).
    #[serde(flatten)]
    pub(crate) run: Option<RunSection>,
    /// The first output, as given.
    pub(crate) output: Option<String>,
    /// Every output, as given.
    pub(crate) outputs: Vec<String>,
}

impl<F: Serialize> Report<'_, F> {
    /// The report as text: one JSON object, or lines for people.
    pub(crate) fn render(&self, json: bool) -> String {
        if json {
            let text = serde_json::to_string(self).unwrap_or_else(|e| {
                format!("{{\"algorithm\":\"{}\",\"error\":\"{e}\"}}", self.algorithm)
            });
            return text + "\n";
        }
        let mut o = String::new();
        let _ = writeln!(o, "spillway {}: {}", self.algorithm, self.input);
        if let Some(run) = &self.run {
            let _ = writeln!(
                o,
                "  layout      {} ranks on {} node(s), {} running per node, {} backend",
                run.ranks, run.nodes, run.running, run.backend
            );
        }
        let facts = serde_json::to_string(self.facts)
            .ok()
            .and_then(|text| serde_json::from_str::<Ordered>(&text).ok());
        for (key, value) in facts.map(|f| f.0).unwrap_or_default() {
            fact_lines(&mut o, &key, &value);
        }
        if let Some(run) = &self.run {
            run_lines(&mut o, run);
        }
        let _ = writeln!(
            o,
            "  planned     {} of memory at peak",
            ByteSize(self.memory_estimate_bytes).human()
        );
        for path in &self.outputs {
            let _ = writeln!(o, "  output      {path}");
        }
        o
    }
}

/// The fields of a JSON object in the order they were written (the order of the facts'
/// struct), which `serde_json::Value` does not keep.
struct Ordered(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ordered, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    fields.push(entry);
                }
                Ok(Ordered(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// One fact for people: integers as integers, flags as yes/no, lists on one line, nested
/// objects as `key.field`; figures with the unit their key names (see [`figure`]).
fn fact_lines(o: &mut String, key: &str, value: &serde_json::Value) {
    use serde_json::Value;
    let unit = |v: &Value| match v {
        Value::Number(n) => n
            .as_f64()
            .map_or_else(|| n.to_string(), |f| figure(key, n, f)),
        other => other.to_string(),
    };
    let text = match value {
        Value::Null => return,
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_string(),
        Value::Number(_) => unit(value),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(|v| !v.is_object()) => {
            items.iter().map(unit).collect::<Vec<_>>().join(" ")
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                fact_lines(o, &format!("{key}[{i}]"), item);
            }
            return;
        }
        Value::Object(map) => {
            for (k, v) in map {
                fact_lines(o, &format!("{key}.{k}"), v);
            }
            return;
        }
    };
    let _ = writeln!(o, "  {key:<19} {text}");
}

/// A figure with the unit its key names: `*_bytes` as bytes (KiB, MiB, ...), `*_seconds` as
/// time, `X_per_second` as a rate of X with an SI prefix, `*_mb_per_s` as MB/s, `gflops` as
/// GFLOP/s; other integers as they are, other numbers with six significant digits.
fn figure(key: &str, n: &serde_json::Number, f: f64) -> String {
    let last = key.rsplit('.').next().unwrap_or(key);
    if let Some(what) = last.strip_suffix("_per_second") {
        return match what.strip_suffix("bytes") {
            Some(_) => format!("{}/s", ByteSize(f as u64).human()),
            None => format!("{} {}/s", si(f), what.replace('_', " ")),
        };
    }
    if last.ends_with("_mb_per_s") {
        return format!("{f:.1} MB/s");
    }
    if last == "gflops" {
        return format!("{f:.2} GFLOP/s");
    }
    if last.contains("seconds") {
        return seconds(f);
    }
    if last.starts_with("bytes_per_") {
        return format!("{f:.2} B");
    }
    if last == "bytes" || last.ends_with("_bytes") || last.starts_with("bytes_") {
        return ByteSize(f.max(0.0).round() as u64).human();
    }
    match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => u.to_string(),
        (_, Some(i)) => i.to_string(),
        _ => significant(f),
    }
}

/// `f` with six significant digits (trailing zeros dropped), in scientific notation when
/// it is below 1e-3 or from 1e9 on.
fn significant(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return f.to_string();
    }
    if f.abs() < 1e-3 || f.abs() >= 1e9 {
        return format!("{f:.5e}");
    }
    let decimals = (5 - f.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{f:.decimals$}");
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

/// A time in s, ms or us, three significant digits or more.
fn seconds(f: f64) -> String {
    match f.abs() {
        t if t == 0.0 || t >= 1.0 => format!("{f:.3} s"),
        t if t >= 1e-3 => format!("{:.3} ms", f * 1e3),
        _ => format!("{:.3} us", f * 1e6),
    }
}

/// A count with an SI prefix (k, M, G), three significant digits or more.
fn si(f: f64) -> String {
    match f.abs() {
        t if t >= 1e9 => format!("{:.2} G", f / 1e9),
        t if t >= 1e6 => format!("{:.2} M", f / 1e6),
        t if t >= 1e3 => format!("{:.2} k", f / 1e3),
        _ => format!("{f:.2}"),
    }
}

/// The job's counters for people.
fn run_lines(o: &mut String, run: &RunSection) {
    let n = run.iteration_seconds.len().max(1) as f64;
    let mean = run.iteration_seconds.iter().sum::<f64>() / n;
    let max = run.iteration_seconds.iter().cloned().fold(0.0, f64::max);
    let _ = writeln!(o, "  iterations  {}", run.iterations);
    let _ = writeln!(
        o,
        "  time        load {:.3} s, compute {:.3} s, total {:.3} s",
        run.load_seconds, run.compute_seconds, run.total_seconds
    );
    let _ = writeln!(
        o,
        "  per iter    mean {}, max {}",
        seconds(mean),
        seconds(max)
    );
    for (i, t) in run.iteration_seconds.iter().enumerate() {
        let _ = writeln!(o, "    iteration {:>3}  {}", i + 1, seconds(*t));
    }
    let _ = writeln!(
        o,
        "  messages    {} sent, {}",
        run.messages_sent,
        ByteSize(run.bytes_sent).human()
    );
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let _ = match run.mem_budget {
        Some(b) => writeln!(
            o,
            "  memory      budget {:.1} MiB per node, policy {}",
            mib(b),
            run.policy
        ),
        None => writeln!(
            o,
            "  memory      no budget (storage-backed data stays resident)"
        ),
    };
    let _ = writeln!(
        o,
        "  spill       {:.1} MiB written, {:.1} MiB read back, {} loads, {} unloads, {} overcommits",
        mib(run.spill_bytes_written),
        mib(run.spill_bytes_read),
        run.loads,
        run.unloads,
        run.overcommits
    );
    let _ = writeln!(
        o,
        "  spilled     {} messages ({:.1} MiB)",
        run.messages_spilled,
        mib(run.message_bytes_spilled),
    );
    let _ = writeln!(
        o,
        "  rank data   {:.1} MiB storage-backed at peak, {:.1} MiB of it resident at peak",
        mib(run.peak_storage_backed_bytes),
        mib(run.peak_resident_bytes)
    );
    if let Some(rss) = run.peak_rss {
        let _ = writeln!(o, "  peak RSS    {:.1} MiB", mib(rss));
    }
    for r in &run.recoveries {
        let _ = writeln!(
            o,
            "  recovered   lost ranks {:?}; went on from iteration {} after {:.3} s",
            r.lost_ranks, r.from_iteration, r.seconds
        );
    }
    if let Some(ft) = &run.fault_tolerance {
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
    if !run.operations.is_empty() {
        let _ = writeln!(
            o,
            "  operations  {:>3} {:>8} {:>8} {:>8} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12}",
            "#",
            "map s",
            "comb s",
            "shuf s",
            "red s",
            "emitted B",
            "combined B",
            "shuffled B",
            "spilled B",
            "records out"
        );
        for (i, op) in run.operations.iter().enumerate() {
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
}
