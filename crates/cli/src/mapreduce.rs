//! The MapReduce commands: `run wordcount` and `run cc`.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use spillway::algorithms::generate::RmatSpec;
use spillway::algorithms::graph::cc::{connected_components, load_edges, Variant};
use spillway::algorithms::graph::pagerank_mr::{load_edge_dataset, pagerank_mapreduce};
use spillway::algorithms::graph::rmat::rmat_dedup;
use spillway::algorithms::io::write_ordered;
use spillway::algorithms::text::wordcount::{
    check_files, word_count, write_counts, WordCountOptions,
};
use spillway::algorithms::AlgoError;
use spillway::mapreduce::{FaultTolerance, Injection, NodeAggregation};
use spillway::{run_with_stats, Collectives, Comm, Config, Max};

use crate::report::{OpReport, Report};
use crate::{
    check_output, checkpoint_facts, config_of, file_identity, pagerank_fingerprint, pagerank_job,
    restore, Failure, PageRankArgs, RuntimeArgs,
};

/// When the ranks of a node combine their map output together.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeAggregationArg {
    /// With a combiner and more than one node.
    Auto,
    /// Whenever a node runs more than one rank.
    On,
    /// Never.
    Off,
}

impl From<NodeAggregationArg> for NodeAggregation {
    fn from(a: NodeAggregationArg) -> NodeAggregation {
        match a {
            NodeAggregationArg::Auto => NodeAggregation::Auto,
            NodeAggregationArg::On => NodeAggregation::On,
            NodeAggregationArg::Off => NodeAggregation::Off,
        }
    }
}

/// Fault tolerance of the MapReduce commands.
#[derive(Args, Debug, Default)]
pub(crate) struct FtArgs {
    /// Survive lost ranks and nodes without restarting: every operation keeps its send
    /// buffer and copies the part sent within a node to the next node; a lost rank's data
    /// is rebuilt by the survivors, which go on with fewer ranks.
    #[arg(long)]
    fault_tolerance: bool,
    /// Inject a failure (implies --fault-tolerance): `node:N@op:K` loses every rank of
    /// virtual node N, `rank:R@op:K` loses rank R, just before the shuffle of operation K
    /// (operations count from 1 in the order they run). Repeatable.
    #[arg(long, value_name = "SPEC")]
    inject_failure: Vec<String>,
}

impl FtArgs {
    /// Whether fault tolerance was asked for.
    pub(crate) fn is_set(&self) -> bool {
        self.fault_tolerance || !self.inject_failure.is_empty()
    }

    /// The settings, checked against the layout.
    pub(crate) fn settings(&self, config: &Config) -> Result<Option<FaultTolerance>, Failure> {
        if !self.fault_tolerance && self.inject_failure.is_empty() {
            return Ok(None);
        }
        let mut ft = FaultTolerance::new();
        for spec in &self.inject_failure {
            let i: Injection = spec
                .parse()
                .map_err(|e: String| Failure::usage(format!("--inject-failure {e}")))?;
            // With MPI the node count is the process count, known once launched.
            let mpi = config.backend_kind() == spillway::Backend::Mpi;
            match i {
                Injection::Node { node, .. } if !mpi && node >= config.nodes_total() => {
                    return Err(Failure::usage(format!(
                        "--inject-failure {spec}: there are {} node(s)",
                        config.nodes_total()
                    )))
                }
                Injection::Rank { rank, .. } if rank >= config.ranks_total() => {
                    return Err(Failure::usage(format!(
                        "--inject-failure {spec}: there are {} rank(s)",
                        config.ranks_total()
                    )))
                }
                _ => {}
            }
            ft = ft.inject(i);
        }
        Ok(Some(ft))
    }
}

/// Warns about injected failures set for operations the job never reached.
fn warn_unreached(ft: &FtArgs, ops: usize, nodes: u32, lead: bool) {
    if !lead {
        return;
    }
    for spec in &ft.inject_failure {
        match spec.parse::<Injection>() {
            Ok(i) if i.op() > ops as u64 => eprintln!(
                "warning: --inject-failure {spec}: the job ran {ops} operation(s); this failure \
                 did not happen"
            ),
            Ok(Injection::Node { node, .. }) if node >= nodes => eprintln!(
                "warning: --inject-failure {spec}: the job ran on {nodes} node(s); this failure \
                 did not happen"
            ),
            _ => {}
        }
    }
}

/// Runs a rank's part of a fault-tolerant job: `None` if the rank was lost (it leaves; the
/// survivors go on).
fn unless_lost<T>(r: Result<T, AlgoError>) -> Result<Option<T>, AlgoError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_lost() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The result of the first surviving rank of this process, and whether this process
/// prints the report (it holds the survivors' first rank).
fn first_survivor<T>(results: Vec<Option<(T, bool)>>) -> Option<(T, bool)> {
    let mut lead = false;
    let mut first = None;
    for (v, leader) in results.into_iter().flatten() {
        lead |= leader;
        if first.is_none() {
            first = Some(v);
        }
    }
    first.map(|v| (v, lead))
}

#[derive(Args, Debug)]
pub(crate) struct WordCountArgs {
    /// Text files (any bytes; words are maximal runs of non-whitespace bytes).
    #[arg(long, required = true, num_args = 1..)]
    input: Vec<PathBuf>,
    /// Output: "word count" lines, by count descending, then by the word's bytes.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Send every word occurrence through the shuffle (no combiner).
    #[arg(long)]
    no_combine: bool,
    /// Local aggregation across the ranks of a node.
    #[arg(long, value_enum, default_value = "auto")]
    node_aggregation: NodeAggregationArg,
    /// Heap allowance of each rank for MapReduce buffers (e.g. 4M; default: from the memory
    /// budget, unbounded without one); beyond it, sorted runs spill.
    #[arg(long)]
    mr_memory: Option<String>,
    /// Bytes of text read at a time.
    #[arg(long, default_value = "4M")]
    chunk: String,
    #[command(flatten)]
    ft: FtArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl WordCountArgs {
    pub(crate) fn json(&self) -> bool {
        self.runtime.json
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VariantArg {
    /// Large-star and small-star in turn.
    Alternating,
    /// Large-star until it converges, then small-star, repeated.
    TwoPhase,
}

#[derive(Args, Debug)]
pub(crate) struct CcArgs {
    /// SNAP edge list ("src dst" per line, '#' comments); edges are undirected.
    #[arg(long)]
    input: PathBuf,
    /// Order of the star operations.
    #[arg(long, value_enum, default_value = "alternating")]
    variant: VariantArg,
    /// Output: "vertex label" per vertex of an edge (label: the smallest vertex id of its
    /// component); each rank's vertices in increasing order, ranks one after the other.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Heap allowance of each rank for MapReduce buffers (see `run wordcount`).
    #[arg(long)]
    mr_memory: Option<String>,
    #[command(flatten)]
    ft: FtArgs,
    /// Checkpoints of the edges after every K rounds of star operations.
    #[command(flatten)]
    checkpoint: crate::CheckpointArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl CcArgs {
    pub(crate) fn json(&self) -> bool {
        self.runtime.json
    }
}

fn size_arg(name: &str, text: &str) -> Result<usize, Failure> {
    text.parse::<spillway::ByteSize>()
        .ok()
        .map(spillway::ByteSize::bytes)
        .and_then(|b| usize::try_from(b).ok())
        .filter(|&b| b > 0)
        .ok_or_else(|| Failure::usage(format!("invalid {name} '{text}' (expected e.g. 4M)")))
}

fn bad_input(e: AlgoError) -> Failure {
    Failure {
        code: if e.is_bad_input() { 2 } else { 1 },
        message: e.to_string(),
    }
}

pub(crate) fn run_wordcount(args: WordCountArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    if let Some(out) = &args.out {
        check_output(out)?;
    }
    check_files(&args.input).map_err(bad_input)?;
    let options = WordCountOptions {
        combine: !args.no_combine,
        node_aggregation: args.node_aggregation.into(),
        memory: args
            .mr_memory
            .as_deref()
            .map(|m| size_arg("--mr-memory", m))
            .transpose()?,
        chunk: size_arg("--chunk", &args.chunk)?,
        fault_tolerance: args.ft.settings(&config)?,
    };
    let bytes: u64 = args
        .input
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let t = Instant::now();
        let Some(wc) = unless_lost(word_count(&world, &args.input, &options))? else {
            return Ok(None);
        };
        let comm = &wc.comm;
        let compute = comm.allreduce(&[t.elapsed().as_secs_f64()], Max)?[0];
        let distinct = wc.counts.count(comm)?;
        if let Some(path) = &args.out {
            write_counts(comm, &wc.counts, path)?;
        }
        Ok(Some((
            (wc.stats, wc.ft, distinct, compute),
            comm.rank() == 0,
        )))
    })?;
    let ((op, ft, distinct, compute), lead) = match first_survivor(results) {
        Some(r) => r,
        None => return Ok(Report::silent("wordcount", &config)),
    };
    let compute = std::time::Duration::from_secs_f64(compute);
    let names: Vec<String> = args.input.iter().map(|p| p.display().to_string()).collect();
    let mut report = Report::new("wordcount", &names.join(" "), &config);
    report.set_run(
        1,
        &[compute],
        std::time::Duration::ZERO,
        compute,
        start.elapsed(),
        &stats,
    );
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("input_bytes".into(), bytes as f64),
        ("words".into(), op.records_emitted as f64),
        ("distinct_words".into(), distinct as f64),
        (
            "input_bytes_per_second".into(),
            bytes as f64 / compute.as_secs_f64().max(1e-12),
        ),
    ];
    report.operations = vec![OpReport::from(&op)];
    warn_unreached(&args.ft, 1, report.nodes, lead);
    report.fault_tolerance = ft;
    report.primary = lead;
    Ok(report)
}

pub(crate) fn run_cc(args: CcArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    if let Some(out) = &args.out {
        check_output(out)?;
    }
    let memory = args
        .mr_memory
        .as_deref()
        .map(|m| size_arg("--mr-memory", m))
        .transpose()?;
    let variant = match args.variant {
        VariantArg::Alternating => Variant::Alternating,
        VariantArg::TwoPhase => Variant::TwoPhase,
    };
    let ft = args.ft.settings(&config)?;
    args.checkpoint.check()?;
    let fingerprint = format!(
        "cc input={} variant={:?} ranks={} nodes={}",
        file_identity(&args.input),
        args.variant,
        config.ranks_total(),
        config.nodes_total(),
    );
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let mut ck = args.checkpoint.checkpointer(&fingerprint);
        let t0 = Instant::now();
        let (edges, loops) = load_edges(&world, &args.input)?;
        let m = edges.count(&world)? + loops.count(&world)?;
        world.barrier()?;
        restore(&world, ck.as_mut())?;
        let load = t0.elapsed();
        let t1 = Instant::now();
        let Some(result) = unless_lost(connected_components(
            &world,
            edges,
            loops,
            variant,
            memory,
            ft.clone(),
            ck.as_mut(),
        ))?
        else {
            return Ok(None);
        };
        let comm = &result.comm;
        let compute = t1.elapsed();
        let ck_facts = checkpoint_facts(comm, ck.as_ref())?;
        let mut labels = result.labels.to_local_vec();
        labels.sort_unstable();
        let vertices = result.labels.count(comm)?;
        let components = labels.iter().filter(|(v, l)| v == l).count() as u64;
        let components = comm.allreduce(&[components], spillway::Sum)?[0];
        drop(result.labels);
        if let Some(path) = &args.out {
            write_ordered(comm, path, |w| {
                for (v, l) in &labels {
                    writeln!(w, "{v} {l}")?;
                }
                Ok(())
            })?;
        }
        Ok(Some((
            (
                m,
                vertices,
                components,
                result.star_operations,
                result.stats,
                result.ft,
                load,
                compute,
                ck_facts,
            ),
            comm.rank() == 0,
        )))
    })?;
    let ((m, vertices, components, ops, op_stats, ft_stats, load, compute, ck_facts), lead) =
        match first_survivor(results) {
            Some(r) => r,
            None => return Ok(Report::silent("cc", &config)),
        };
    let mut report = Report::new("cc", &args.input.display().to_string(), &config);
    let times: Vec<std::time::Duration> = op_stats
        .iter()
        .map(|s| s.map + s.combine + s.shuffle + s.reduce)
        .collect();
    report.set_run(ops, &times, load, compute, start.elapsed(), &stats);
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("edges".into(), m as f64),
        ("vertices".into(), vertices as f64),
        ("components".into(), components as f64),
        ("star_operations".into(), ops as f64),
    ];
    report.facts.extend(ck_facts);
    report.operations = op_stats.iter().map(OpReport::from).collect();
    warn_unreached(&args.ft, op_stats.len(), report.nodes, lead);
    report.fault_tolerance = ft_stats;
    report.primary = lead;
    Ok(report)
}

/// PageRank engines.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EngineArg {
    /// Push PageRank on a 1-D row decomposition.
    Direct,
    /// Iterative MapReduce: adjacency lists travel with their vertex.
    Mapreduce,
}

pub(crate) fn run_pagerank_mr(args: PageRankArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    if let Some(out) = &args.out {
        check_output(out)?;
    }
    let memory = args
        .mr_memory
        .as_deref()
        .map(|m| size_arg("--mr-memory", m))
        .transpose()?;
    let (source, input_name, options) = pagerank_job(&args)?;
    let ft = args.ft.settings(&config)?;
    args.checkpoint.check()?;
    // Everything that determines the output (the sums depend on the layout too).
    let fingerprint = pagerank_fingerprint(&args, &config, &input_name, Some("mapreduce"));
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let mut ck = args.checkpoint.checkpointer(&fingerprint);
        let t0 = Instant::now();
        let (edges, n) = load_edge_dataset(&world, &source)?;
        let m = edges.count(&world)?;
        world.barrier()?;
        restore(&world, ck.as_mut())?;
        let load = t0.elapsed();
        let t1 = Instant::now();
        let Some(result) = unless_lost(pagerank_mapreduce(
            &world,
            edges,
            n,
            &options,
            memory,
            ft.clone(),
            &mut |_| {},
            ck.as_mut(),
        ))?
        else {
            return Ok(None);
        };
        let comm = &result.comm;
        let compute = t1.elapsed();
        let ck_facts = checkpoint_facts(comm, ck.as_ref())?;
        // The ranks in vertex order, written by the first rank.
        let all = result.ranks.gather(comm, 0)?;
        let sum = all.as_ref().map_or(0.0, |a| a.iter().map(|(_, r)| r).sum());
        if let Some(path) = &args.out {
            let mut all = all.unwrap_or_default();
            all.sort_unstable_by_key(|&(v, _)| v);
            write_ordered(comm, path, |w| {
                for (v, r) in &all {
                    writeln!(w, "{v} {r}")?;
                }
                Ok(())
            })?;
        }
        Ok(Some((
            (
                n,
                m,
                result.iterations,
                result.delta,
                sum,
                load,
                compute,
                result.iteration_times,
                result.stats,
                result.ft,
                ck_facts,
            ),
            comm.rank() == 0,
        )))
    })?;
    let ((n, m, iterations, delta, sum, load, compute, times, op_stats, ft_stats, ck_facts), lead) =
        match first_survivor(results) {
            Some(r) => r,
            None => return Ok(Report::silent("pagerank", &config)),
        };
    let mut report = Report::new("pagerank", &input_name, &config);
    report.set_run(iterations, &times, load, compute, start.elapsed(), &stats);
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("vertices".into(), n as f64),
        ("edges".into(), m as f64),
        ("final_l1_change".into(), delta),
        ("rank_sum".into(), sum),
        (
            "edges_per_second".into(),
            m as f64 * times.len() as f64 / compute.as_secs_f64().max(1e-12),
        ),
    ];
    report.facts.extend(ck_facts);
    report.operations = op_stats.iter().map(OpReport::from).collect();
    warn_unreached(&args.ft, op_stats.len(), report.nodes, lead);
    report.fault_tolerance = ft_stats;
    report.primary = lead;
    Ok(report)
}

/// `gen rmat --dedup`: the R-MAT edges without duplicates, from a MapReduce job.
pub(crate) fn gen_rmat_dedup(
    scale: u32,
    edge_factor: u32,
    seed: u64,
    out: PathBuf,
    ranks: u32,
) -> Result<(), Failure> {
    check_output(&out)?;
    let spec =
        RmatSpec::parse(&format!("rmat:{scale}:{edge_factor}:{seed}")).map_err(Failure::usage)?;
    let config = Config::new(ranks);
    config.layout().map_err(Failure::from)?;
    run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let (edges, _) = rmat_dedup(&world, &spec)?;
        let mut local: Vec<(u32, u32)> =
            edges.to_local_vec().into_iter().map(|(e, ())| e).collect();
        local.sort_unstable();
        let first = world.rank() == 0;
        write_ordered(&world, &out, |w| {
            if first {
                writeln!(
                    w,
                    "# R-MAT scale={scale} edge_factor={edge_factor} seed={seed} \
                     a=0.57 b=0.19 c=0.19 d=0.05 dedup"
                )?;
            }
            for (s, d) in &local {
                writeln!(w, "{s} {d}")?;
            }
            Ok(())
        })?;
        Ok(())
    })?;
    Ok(())
}
