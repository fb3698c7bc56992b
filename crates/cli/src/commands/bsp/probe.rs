//! `probe`: measures the BSP machine parameters g and l for a layout, cached per machine and
//! layout.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;
use spillway::bsp::{self, Options, ProbeOptions, ProbeReport};
use spillway::{ByteSize, Collectives};

use crate::driver::{Command, Declared, Estimate, Failure, Inputs, Job, RuntimeArgs};
use crate::options::nonzero_size;

/// `probe`.
#[derive(Args, Debug)]
pub(crate) struct Probe {
    /// Smallest h-relation per rank (bytes, e.g. 1K).
    #[arg(long, default_value = "1K", value_parser = nonzero_size)]
    min_bytes: ByteSize,
    /// Largest h-relation per rank (bytes, e.g. 256M; default 4x the last-level cache); at
    /// least --min-bytes.
    #[arg(long, value_parser = nonzero_size)]
    max_bytes: Option<ByteSize>,
    /// Repetitions per size, at least (the fastest counts); small sizes repeat until 20 ms of
    /// supersteps were timed, up to 1000 times.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    reps: u64,
    /// Measure even when a result for this machine and layout is cached.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// The cache's directory (from SPILLWAY_PROBE_CACHE, XDG_CACHE_HOME or HOME).
    #[arg(skip = bsp::cache_file(1, 1, "local").and_then(|f| f.parent().map(Path::to_path_buf)))]
    cache_dir: Option<PathBuf>,
}

/// What `probe` reports: the measurement (or the cached one) and where it is cached.
#[derive(Debug, Serialize)]
pub(crate) struct ProbeFacts {
    #[serde(flatten)]
    report: ProbeReport,
    cached: bool,
    cache: Option<String>,
}

impl Probe {
    fn options(&self) -> ProbeOptions {
        let mut options = ProbeOptions {
            min_bytes: self.min_bytes.to_usize().unwrap_or(usize::MAX),
            reps: self.reps as usize,
            ..ProbeOptions::default()
        };
        if let Some(max) = self.max_bytes {
            options.max_bytes = max.to_usize().unwrap_or(usize::MAX);
        }
        options
    }
}

/// The backend the probe runs on: `mpi` when started by an MPI launcher.
fn backend() -> &'static str {
    if ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
    {
        "mpi"
    } else {
        "local"
    }
}

impl Probe {
    /// Whether this process finds the layout in the cache (it then measures nothing); with
    /// the MPI backend the nodes are known only once it runs.
    fn cached(&self) -> bool {
        let (ranks, nodes) = (self.runtime.ranks as usize, self.runtime.nodes as usize);
        !self.force
            && backend() == "local"
            && bsp::cache_file(ranks, nodes, "local").is_some_and(|c| c.is_file())
    }
}

impl Command for Probe {
    const NAME: &'static str = "probe";
    type Facts = ProbeFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime).dir(
            "the probe cache (SPILLWAY_PROBE_CACHE)",
            self.cache_dir.as_deref(),
            true,
        )
    }

    fn check(&self) -> Result<(), Failure> {
        let options = self.options();
        if options.min_bytes > options.max_bytes {
            return Err(Failure::usage(format!(
                "--min-bytes {} is more than --max-bytes {}",
                self.min_bytes,
                ByteSize(options.max_bytes as u64)
            )));
        }
        Ok(())
    }

    fn estimate(&self, _: Inputs<'_>) -> Result<Estimate, Failure> {
        let max = self.options().max_bytes as u64;
        let ranks = u64::from(self.runtime.ranks);
        Ok(Estimate {
            // Every rank sends and receives up to --max-bytes.
            data: max.saturating_mul(2).saturating_mul(ranks),
            because: format!("--max-bytes {} on {ranks} ranks", ByteSize(max)),
            items: max.saturating_mul(ranks) / 8,
            outputs: Vec::new(),
            ..Default::default()
        }
        // Per rank of the job, the puts of the exchanges and their messages when it measures
        // (about 510 bytes a pair at 1,000 ranks); a layout in the cache is only read.
        .ranks(0, if self.cached() { 64 } else { 512 }))
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<ProbeFacts>, Failure> {
        let backend = backend();
        let options = self.options();
        let force = self.force;
        let reports = bsp::exec(job.config(), Options::default(), |ctx| {
            // Rank 0 looks the layout up (with the MPI backend every process is a node, known
            // only now) and shares the answer, so that all processes measure or none does,
            // even where they would find different cache files (other hosts).
            let nodes = ctx.comm().runtime().nodes() as usize;
            let file = bsp::cache_file(ctx.nprocs(), nodes, backend);
            let found: Option<ProbeReport> = if ctx.pid() == 0 && !force {
                file.as_ref()
                    .and_then(|c| std::fs::read(c).ok())
                    .and_then(|b| serde_json::from_slice(&b).ok())
            } else {
                None
            };
            let found = ctx.comm().allgather_obj(&found)?.swap_remove(0);
            Ok(match found {
                Some(report) => (ctx.pid(), report, true, file),
                None => (ctx.pid(), bsp::measure(ctx, &options)?, false, file),
            })
        })?;
        // Reported once: by the process that holds rank 0 (each MPI process returns its
        // ranks).
        Ok(reports
            .into_iter()
            .find(|r| r.0 == 0)
            .map(|(_, report, cached, file)| ProbeFacts {
                report,
                cached,
                cache: file.map(|c| c.display().to_string()),
            }))
    }

    fn human(facts: &ProbeFacts) -> Option<String> {
        let report = &facts.report;
        let m = &report.machine;
        let mut t = format!(
            "p = {}  nodes = {}\ng = {:.4e} s/byte ({:.2} GB/s per rank)\nl = {:.4e} s\nfit: \
             R^2 = {:.4}, worst measured/model: total exchange {:.3}, random {:.3}\n",
            m.p,
            report.nodes,
            m.g,
            1e-9 / m.g.max(1e-30),
            m.l,
            report.r2,
            report.worst_total_exchange,
            report.worst_random
        );
        t.push_str("pattern         h (bytes)     measured (s)  model (s)     ratio\n");
        for s in &report.samples {
            let model = m.cost(s.h);
            t.push_str(&format!(
                "{:<15} {:>12}  {:>12.4e}  {:>12.4e}  {:.3}\n",
                format!("{:?}", s.pattern),
                s.h,
                s.seconds,
                model,
                s.seconds / model
            ));
        }
        match &facts.cache {
            Some(c) if facts.cached => t.push_str(&format!("(cached: {c})\n")),
            Some(c) => t.push_str(&format!("(saved to {c})\n")),
            None => {}
        }
        Some(t)
    }
}
