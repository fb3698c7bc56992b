//! `dyngraph`: inserts per second and bytes per edge of the dynamic graph structures of
//! `spillway-structures` on an R-MAT edge stream, against a CSR rebuilt from scratch.
//!
//! # What is measured
//! * The stream: `RmatSpec::edges(0..m)` (Graph500 parameters, seed 1), in index order (the
//!   edges are independent draws, so the order is random), stored undirected as in the
//!   thesis: every edge goes into both endpoints' lists. Duplicates and self-loops are kept
//!   in the stream; inserting a present edge is a (timed) no-op.
//! * Per structure: the time to insert the whole stream into an empty structure with the
//!   vertex range reserved; `bytes_used()` afterwards (the heap bytes it holds, checked
//!   against the allocator by the crate's tests) and the growth of the process's resident
//!   set (which adds the allocator's per-allocation overhead); then the time to delete a
//!   random tenth of the stream's edges. After the inserts every list is compared with the
//!   CSR below, or the subcommand fails.
//! * Baselines: a CSR built from scratch from the whole stream (both arcs of every edge,
//!   counting sort by source, sort and deduplicate each list), and the same CSR rebuilt from
//!   scratch after every batch of `m / 16` edges, which is how a static structure absorbs a
//!   stream.
//!
//! Rates count stream edges (not arcs) per second of wall time on one thread.
//!
//! # Batches (`--mode batch`, the default)
//! * Load: each structure takes the whole stream in batches of `--load-batch` of its edges
//!   (`insert_batch_undirected`), timed; then `bytes_used()`, bytes per distinct edge against
//!   a static CSR's, the resident-set growth, and every list compared with the CSR.
//! * Updates: then `--update-reps` batches of each fraction in `--batches` of new edges (the
//!   R-MAT edges that follow the stream, same generator), each timed; the median is compared
//!   with rebuilding the CSR from scratch from all the graph's edges (the stream plus one such
//!   batch; median of 3 rebuilds).
//! * Crossover: the batch fraction at which a structure's update time equals the rebuild's,
//!   interpolated (log-log) between the measured fractions; "above F" when the structure is
//!   still faster at the largest fraction F, "below F" when it is slower at the smallest.

use std::time::Instant;

use spillway::algorithms::generate::RmatSpec;
use spillway::current_rss;
use spillway_structures::dyngraph::{Bcsr, Csr, DynGraph, FoldPolicy, Structure};

use crate::harness::BoxError;

mod geometric;
mod query;

/// Options of `spillway-bench dyngraph`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// log2 of the number of vertices of the R-MAT stream (Graph500 parameters, seed 1).
    #[arg(long, default_value_t = 20)]
    scale: u32,
    /// Edges per vertex.
    #[arg(long, default_value_t = 16)]
    edge_factor: u32,
    /// Structures to measure, comma-separated (ll, bcsr, daa, diaa, dcaa).
    #[arg(long, default_value = "ll,bcsr,daa,diaa,dcaa")]
    structures: String,
    /// Fold policy: `fraction:F`, `every:K` or `manual`.
    #[arg(long, default_value = "fraction:0.25")]
    fold: String,
    /// Seconds allowed per phase (insert, delete) of one structure.
    #[arg(long, default_value_t = 600.0)]
    time_limit: f64,
    /// `batch`: the stream in batches, then update batches against a CSR rebuild (see the
    /// module documentation); `single`: one edge at a time, then deletes; `query`: the
    /// thesis's query kernels on snapshots of a stream (see the `query` module).
    #[arg(long, default_value = "batch")]
    mode: String,
    /// Batch mode: fraction of the stream's edges per load batch.
    #[arg(long, default_value_t = 0.01)]
    load_batch: f64,
    /// Batch mode: fractions of the stream's edges per update batch, comma-separated.
    #[arg(long, default_value = "0.001,0.01,0.1", value_delimiter = ',')]
    batches: Vec<f64>,
    /// Batch mode: update batches timed per fraction (the median is reported).
    #[arg(long, default_value_t = 5)]
    update_reps: usize,
    /// Query mode: the streams, comma-separated (`rmat`, `rgg`: a random geometric graph with
    /// locality-ordered ids, `2^scale` vertices, about `edge_factor` edges a vertex).
    #[arg(long, default_value = "rmat,rgg")]
    graphs: String,
    /// Query mode: the most snapshots (of |V|/200 edges each) the kernels run on.
    #[arg(long, default_value_t = 8)]
    snapshots: usize,
    /// Query mode: BCSR's fold intervals alpha (it folds after every |V|/alpha new edges).
    #[arg(long, default_value = "10,50,200", value_delimiter = ',')]
    alphas: Vec<u32>,
    /// Query mode: intersections and lookups per snapshot.
    #[arg(long, default_value_t = 10000)]
    queries: usize,
    /// Query mode: runs of each kernel (the minimum is kept).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Query mode: how a snapshot's edges go in, `single` (one at a time) or `batch`.
    #[arg(long, default_value = "single")]
    insert: String,
    /// Query mode: also write the results to this JSON file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Query mode: a Python with networkx, for the networkx peer on the final graph
    /// (default: the environment variable SPILLWAY_PYTHON, if set).
    #[arg(long)]
    python: Option<std::path::PathBuf>,
    /// Internal: measure one structure in this process and print one line.
    #[arg(long, hide = true)]
    child: Option<String>,
}

/// SplitMix64.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn parse_fold(text: &str) -> Result<FoldPolicy, String> {
    if text == "manual" {
        return Ok(FoldPolicy::Manual);
    }
    if let Some(f) = text.strip_prefix("fraction:").and_then(|f| f.parse().ok()) {
        return Ok(FoldPolicy::Fraction(f));
    }
    if let Some(k) = text.strip_prefix("every:").and_then(|k| k.parse().ok()) {
        return Ok(FoldPolicy::Every(k));
    }
    Err(format!("invalid --fold '{text}'"))
}

/// Both arcs of every edge.
fn symmetric(edges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut arcs = Vec::with_capacity(2 * edges.len());
    for &(u, v) in edges {
        arcs.push((u, v));
        if u != v {
            arcs.push((v, u));
        }
    }
    arcs
}

fn mib(b: usize) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// One row of the results.
struct Row {
    name: String,
    /// Stream edges inserted (all of them unless the time limit stopped the run).
    inserted: usize,
    insert_s: f64,
    bytes: usize,
    /// Distinct undirected edges held after the inserts.
    edges_held: u64,
    rss_growth: Option<usize>,
    deletes: usize,
    delete_s: Option<f64>,
    note: String,
}

/// Measures one structure (in a process of its own, so that the resident-set growth is its
/// own) and prints one line `inserted insert_s bytes edges_held rss_growth deletes delete_s
/// note...` for the parent.
fn child(s: Structure, spec: &RmatSpec, fold: FoldPolicy, time_limit: f64) -> Result<(), BoxError> {
    let n = spec.num_vertices() as usize;
    let m = spec.num_edges() as usize;
    let edges = stream(spec);
    let mut state = 7u64;
    let deletes_all: Vec<usize> = (0..m / 10)
        .map(|_| (splitmix(&mut state) % m as u64) as usize)
        .collect();
    let rss0 = current_rss();
    let mut bcsr = None;
    let mut boxed = None;
    if s == Structure::Bcsr {
        bcsr = Some(Bcsr::with_vertices(n, fold));
    } else {
        boxed = Some(s.create(n, fold));
    }
    let g: &mut dyn DynGraph = match (&mut bcsr, &mut boxed) {
        (Some(b), _) => b,
        (None, Some(x)) => x.as_mut(),
        (None, None) => unreachable!("one of the two is set above"),
    };
    let t = Instant::now();
    let mut inserted = 0;
    for chunk in edges.chunks(1 << 16) {
        for &(u, v) in chunk {
            g.insert_undirected(u, v);
        }
        inserted += chunk.len();
        if t.elapsed().as_secs_f64() > time_limit {
            break;
        }
    }
    let insert_s = t.elapsed().as_secs_f64();
    let bytes = g.bytes_used();
    let rss_growth = growth_since(rss0);
    let edges_held = check_against_csr(s, g, n, &edges[..inserted])?;
    // Deletes of stream edges that were inserted, within the time limit too.
    let deletes: Vec<(u32, u32)> = deletes_all
        .iter()
        .filter(|&&i| i < inserted)
        .map(|&i| edges[i])
        .collect();
    let t = Instant::now();
    let mut done = 0;
    for chunk in deletes.chunks(1 << 14) {
        for &(u, v) in chunk {
            g.delete_undirected(u, v);
        }
        done += chunk.len();
        if t.elapsed().as_secs_f64() > time_limit {
            break;
        }
    }
    let delete_s = t.elapsed().as_secs_f64();
    let note = match &bcsr {
        Some(b) => format!(
            "{} folds ({fold:?}), peak {:.0} MiB during folds",
            b.folds(),
            mib(b.peak_bytes())
        ),
        None => String::new(),
    };
    println!("{inserted} {insert_s} {bytes} {edges_held} {rss_growth} {done} {delete_s} {note}");
    Ok(())
}

/// Growth of the resident set since `rss0` (0 where either reading is missing).
fn growth_since(rss0: Option<u64>) -> u64 {
    match (rss0, current_rss()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    }
}

/// Checks every list of `g` (on `n` vertices) against a CSR of `inserted`, built from
/// scratch; returns the number of undirected edges `g` holds (a self-loop counts once).
fn check_against_csr(
    s: Structure,
    g: &dyn DynGraph,
    n: usize,
    inserted: &[(u32, u32)],
) -> Result<u64, BoxError> {
    let csr = Csr::from_arcs(n, &symmetric(inserted));
    if g.num_arcs() != csr.num_arcs() {
        return Err(format!("{s}: {} arcs, the CSR has {}", g.num_arcs(), csr.num_arcs()).into());
    }
    let mut got = Vec::new();
    for v in 0..n as u32 {
        g.neighbours_into(v, &mut got);
        if got != csr.neighbours(v) {
            return Err(format!("{s}: neighbours of {v} differ from the CSR").into());
        }
    }
    Ok(edges_held(&csr, n))
}

/// The undirected edges `csr` (on `n` vertices) holds, a self-loop counting once.
fn edges_held(csr: &Csr, n: usize) -> u64 {
    let loops = (0..n as u32)
        .filter(|&v| csr.neighbours(v).binary_search(&v).is_ok())
        .count() as u64;
    (csr.num_arcs() + loops) / 2
}

/// The structures named in `list` (comma-separated short names).
fn parse_structures(list: &str) -> Result<Vec<Structure>, String> {
    list.split(',')
        .map(|s| Structure::from_name(s).ok_or_else(|| format!("unknown structure '{s}'")))
        .collect()
}

/// The whole R-MAT stream of `spec`.
fn stream(spec: &RmatSpec) -> Vec<(u32, u32)> {
    let m = spec.num_edges();
    let mut edges = Vec::with_capacity(m as usize);
    spec.edges(0..m, &mut edges);
    edges
}

/// Seed of the R-MAT generator of the update batches (the stream's is 1).
const UPDATE_SEED: u64 = 2;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// For each fraction `f` of the stream's edges, `reps` consecutive batches of `f m` new edges:
/// R-MAT edges of the same shape and another seed, the batches of one fraction following
/// those of the fraction before it.
fn update_batches(spec: &RmatSpec, fractions: &[f64], reps: usize) -> Vec<Vec<Vec<(u32, u32)>>> {
    let m = spec.num_edges();
    let spec = &RmatSpec {
        seed: UPDATE_SEED,
        ..*spec
    };
    let mut at = 0;
    fractions
        .iter()
        .map(|&f| {
            let b = ((f * m as f64) as u64).max(1);
            (0..reps)
                .map(|_| {
                    let mut e = Vec::with_capacity(b as usize);
                    spec.edges(at..at + b, &mut e);
                    at += b;
                    e
                })
                .collect()
        })
        .collect()
}

/// Batch mode in a child process: prints `inserted load_s bytes edges_held rss_growth` and
/// one update median per fraction, then the note.
fn batch_child(s: Structure, spec: &RmatSpec, args: &Args) -> Result<(), BoxError> {
    let n = spec.num_vertices() as usize;
    let m = spec.num_edges() as usize;
    let edges = stream(spec);
    let updates = update_batches(spec, &args.batches, args.update_reps);
    let fold = parse_fold(&args.fold)?;
    let rss0 = current_rss();
    let mut g = s.create(n, fold);
    let step = ((args.load_batch * m as f64) as usize).max(1);
    let t = Instant::now();
    let mut inserted = 0;
    for chunk in edges.chunks(step) {
        g.insert_batch_undirected(chunk);
        inserted += chunk.len();
        if t.elapsed().as_secs_f64() > args.time_limit {
            break;
        }
    }
    let load_s = t.elapsed().as_secs_f64();
    let bytes = g.bytes_used();
    let rss_growth = growth_since(rss0);
    let edges_held = check_against_csr(s, &*g, n, &edges[..inserted])?;
    let mut medians = Vec::new();
    if inserted == m {
        for batches in &updates {
            let times: Vec<f64> = batches
                .iter()
                .map(|b| {
                    let t = Instant::now();
                    g.insert_batch_undirected(b);
                    t.elapsed().as_secs_f64()
                })
                .collect();
            medians.push(median(times));
        }
    }
    let medians: Vec<String> = medians.iter().map(|x| x.to_string()).collect();
    println!(
        "{inserted} {load_s} {bytes} {edges_held} {rss_growth} {} {}",
        medians.len(),
        medians.join(" ")
    );
    Ok(())
}

/// The fraction where `time(f) = rebuild(f)`, interpolated log-log between measured points.
fn crossover(fractions: &[f64], update: &[f64], rebuild: &[f64]) -> String {
    let ratio: Vec<f64> = update.iter().zip(rebuild).map(|(u, r)| u / r).collect();
    if ratio.is_empty() {
        return "-".into();
    }
    if ratio.iter().all(|&r| r < 1.0) {
        return format!("above {}%", fractions[fractions.len() - 1] * 100.0);
    }
    if ratio[0] >= 1.0 {
        return format!("below {}%", fractions[0] * 100.0);
    }
    for i in 1..ratio.len() {
        if ratio[i - 1] < 1.0 && ratio[i] >= 1.0 {
            let (x0, x1) = (fractions[i - 1].ln(), fractions[i].ln());
            let (y0, y1) = (ratio[i - 1].ln(), ratio[i].ln());
            let x = x0 + (0.0 - y0) * (x1 - x0) / (y1 - y0);
            return format!("about {:.2}%", x.exp() * 100.0);
        }
    }
    "-".into()
}

fn batch_main(args: &Args) -> Result<(), BoxError> {
    let (scale, edge_factor) = (args.scale, args.edge_factor);
    let spec = RmatSpec::parse(&format!("rmat:{scale}:{edge_factor}:1"))?;
    let structures = parse_structures(&args.structures)?;
    let n = spec.num_vertices() as usize;
    let m = spec.num_edges() as usize;
    eprintln!("dyngraph: generating R-MAT scale {scale}, {m} edges");
    let edges = stream(&spec);
    let t = Instant::now();
    let csr = Csr::from_arcs(n, &symmetric(&edges));
    let csr_s = t.elapsed().as_secs_f64();
    let csr_edges = edges_held(&csr, n);
    let csr_bytes = csr.bytes_used();
    drop(csr);
    // The rebuild after one batch of each fraction: all edges so far, from scratch.
    let updates = update_batches(&spec, &args.batches, 1);
    let rebuild: Vec<f64> = updates
        .iter()
        .map(|b| {
            let mut all = edges.clone();
            all.extend_from_slice(&b[0]);
            let times: Vec<f64> = (0..3)
                .map(|_| {
                    let t = Instant::now();
                    let c = Csr::from_arcs(n, &symmetric(&all));
                    std::hint::black_box(c.num_arcs());
                    t.elapsed().as_secs_f64()
                })
                .collect();
            median(times)
        })
        .collect();
    drop(edges);
    let exe = std::env::current_exe()?;
    let mut lines = Vec::new();
    for s in structures {
        eprintln!(
            "dyngraph: {s} in batches (time limit {} s for the load)",
            args.time_limit
        );
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["dyngraph", "--child", s.name(), "--mode", "batch"]);
        cmd.args([
            "--scale",
            &scale.to_string(),
            "--edge-factor",
            &edge_factor.to_string(),
        ]);
        cmd.args([
            "--fold",
            &args.fold,
            "--time-limit",
            &args.time_limit.to_string(),
        ]);
        cmd.args(["--load-batch", &args.load_batch.to_string()]);
        let fr: Vec<String> = args.batches.iter().map(|f| f.to_string()).collect();
        cmd.args([
            "--batches",
            &fr.join(","),
            "--update-reps",
            &args.update_reps.to_string(),
        ]);
        let out = cmd.output()?;
        if !out.status.success() {
            return Err(format!("{s}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        lines.push((s, String::from_utf8_lossy(&out.stdout).trim().to_string()));
    }
    let pct = |f: f64| format!("{}%", f * 100.0);
    println!(
        "### Dynamic graphs in batches: R-MAT scale {scale}, edge factor {edge_factor} ({n} vertices, {m} stream edges, {csr_edges} distinct undirected edges)"
    );
    println!();
    println!(
        concat!(
            "Load: the stream inserted undirected in batches of {} of its edges. Updates: ",
            "batches of new edges (R-MAT edges of another seed), {} timed per size, median; ",
            "rebuild: a CSR built from scratch from all the graph's edges, median of 3. One ",
            "thread; each structure in a process of its own. Static CSR of the stream: built in ",
            "{:.2} s, {:.2} bytes per edge."
        ),
        pct(args.load_batch),
        args.update_reps,
        csr_s,
        csr_bytes as f64 / csr_edges as f64
    );
    println!();
    let mut head = String::from(
        "| structure | load time | loaded edges/s | bytes/edge | vs CSR | RSS growth (MiB) |",
    );
    let mut rule = String::from("|---|---:|---:|---:|---:|---:|");
    for (&f, r) in args.batches.iter().zip(&rebuild) {
        head.push_str(&format!(
            " {} batch ({} edges) | vs rebuild ({:.3} s) |",
            pct(f),
            ((f * m as f64) as u64).max(1),
            r
        ));
        rule.push_str("---:|---:|");
    }
    head.push_str(" crossover |");
    rule.push_str("---|");
    println!("{head}");
    println!("{rule}");
    for (s, line) in lines {
        let f: Vec<f64> = line
            .split_whitespace()
            .map(|x| x.parse::<f64>())
            .collect::<Result<_, _>>()?;
        let (inserted, load_s, bytes, held, rss) = (f[0] as usize, f[1], f[2], f[3], f[4] as usize);
        let k = f[5] as usize;
        let upd = &f[6..6 + k];
        let mut row = format!(
            "| {}{} | {:.2} s | {:.3}M | {:.2} | {:.2}x | {:.1} |",
            s.name().to_uppercase(),
            if inserted < m {
                format!(" (stopped after {inserted} edges)")
            } else {
                String::new()
            },
            load_s,
            inserted as f64 / load_s / 1e6,
            bytes / held,
            (bytes / held) / (csr_bytes as f64 / csr_edges as f64),
            mib(rss)
        );
        for (i, r) in rebuild.iter().enumerate() {
            match upd.get(i) {
                Some(u) => row.push_str(&format!(" {:.4} s | {:.1}x |", u, r / u)),
                None => row.push_str(" - | - |"),
            }
        }
        row.push_str(&format!(" {} |", crossover(&args.batches, upd, &rebuild)));
        println!("{row}");
    }
    println!();
    Ok(())
}

/// Runs the subcommand.
pub fn main(args: Args) -> Result<(), BoxError> {
    if args.mode == "query" {
        return query::main(&args);
    }
    if args.mode == "batch" {
        if let Some(name) = args.child.as_deref() {
            let s =
                Structure::from_name(name).ok_or_else(|| format!("unknown structure '{name}'"))?;
            let spec = RmatSpec::parse(&format!("rmat:{}:{}:1", args.scale, args.edge_factor))?;
            return batch_child(s, &spec, &args);
        }
        return batch_main(&args);
    }
    if args.mode != "single" {
        return Err(format!("invalid --mode '{}' (batch, single or query)", args.mode).into());
    }
    let scale = args.scale;
    let edge_factor = args.edge_factor;
    let fold_text = args.fold.clone();
    let fold = parse_fold(&fold_text)?;
    let time_limit = args.time_limit;
    let spec = RmatSpec::parse(&format!("rmat:{scale}:{edge_factor}:1"))?;
    if let Some(name) = args.child.as_deref() {
        let s = Structure::from_name(name).ok_or_else(|| format!("unknown structure '{name}'"))?;
        return child(s, &spec, fold, time_limit);
    }
    let structures = parse_structures(&args.structures)?;
    let n = spec.num_vertices() as usize;
    let m = spec.num_edges() as usize;
    eprintln!("dyngraph: generating R-MAT scale {scale}, {m} edges");
    let edges = stream(&spec);

    // Baseline 1: the CSR built once from the whole stream.
    let t = Instant::now();
    let csr = Csr::from_arcs(n, &symmetric(&edges));
    let csr_s = t.elapsed().as_secs_f64();
    let distinct = csr.num_arcs();
    let edges_held = edges_held(&csr, n);
    // Baseline 2: rebuilt from scratch after every sixteenth of the stream.
    let batches = 16usize;
    let t = Instant::now();
    let mut last = 0;
    for b in 1..=batches {
        let end = m * b / batches;
        let c = Csr::from_arcs(n, &symmetric(&edges[..end]));
        last = c.num_arcs();
    }
    let rebuild_s = t.elapsed().as_secs_f64();
    assert_eq!(last, distinct, "the last rebuild holds the whole graph");
    let csr_bytes = csr.bytes_used();
    drop(csr);
    drop(edges);

    let mut rows = vec![
        Row {
            name: "CSR, built once from the whole stream".into(),
            inserted: m,
            insert_s: csr_s,
            bytes: csr_bytes,
            edges_held,
            rss_growth: None,
            deletes: 0,
            delete_s: None,
            note: "static: no updates".into(),
        },
        Row {
            name: format!("CSR, rebuilt from scratch every {} edges", m / batches),
            inserted: m,
            insert_s: rebuild_s,
            bytes: csr_bytes,
            edges_held,
            rss_growth: None,
            deletes: 0,
            delete_s: None,
            note: format!("{batches} rebuilds"),
        },
    ];

    let exe = std::env::current_exe()?;
    for s in structures {
        eprintln!("dyngraph: {s} (time limit {time_limit} s per phase)");
        let out = std::process::Command::new(&exe)
            .args([
                "dyngraph",
                "--mode",
                "single",
                "--child",
                s.name(),
                "--scale",
                &scale.to_string(),
                "--edge-factor",
                &edge_factor.to_string(),
                "--fold",
                &fold_text,
                "--time-limit",
                &time_limit.to_string(),
            ])
            .output()?;
        if !out.status.success() {
            return Err(format!("{s}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let f: Vec<&str> = line.splitn(8, ' ').collect();
        let num = |i: usize| -> Result<f64, BoxError> {
            Ok(f.get(i).ok_or("short child output")?.parse::<f64>()?)
        };
        let inserted = num(0)? as usize;
        let mut note = f.get(7).unwrap_or(&"").to_string();
        if inserted < m {
            note = format!("stopped by the time limit after {inserted} edges; {note}");
        }
        rows.push(Row {
            name: s.name().to_uppercase(),
            inserted,
            insert_s: num(1)?,
            bytes: num(2)? as usize,
            edges_held: num(3)? as u64,
            rss_growth: Some(num(4)? as usize),
            deletes: num(5)? as usize,
            delete_s: Some(num(6)?),
            note,
        });
    }

    println!(
        "### Dynamic graphs: R-MAT scale {scale}, edge factor {edge_factor} ({n} vertices, {m} stream edges, {edges_held} distinct undirected edges, {distinct} arcs)"
    );
    println!();
    println!(
        "Every edge inserted undirected (both arcs), one thread, each structure in a process of \
         its own; then deletes of a random tenth of the stream's edges. bytes/edge = bytes held \
         / distinct undirected edges held. RSS growth: resident set after the inserts minus \
         before (allocator overhead included)."
    );
    println!();
    println!("| structure | edges inserted | insert time | inserts/s | vs CSR rebuilt | bytes (MiB) | bytes/edge | RSS growth (MiB) | deletes/s | notes |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let rebuild_rate = m as f64 / rebuild_s;
    for r in &rows {
        let rate = r.inserted as f64 / r.insert_s;
        println!(
            "| {} | {} | {:.2} s | {:.3}M | {:.2}x | {:.1} | {:.2} | {} | {} | {} |",
            r.name,
            r.inserted,
            r.insert_s,
            rate / 1e6,
            rate / rebuild_rate,
            mib(r.bytes),
            r.bytes as f64 / r.edges_held.max(1) as f64,
            r.rss_growth
                .map_or("-".to_string(), |b| format!("{:.1}", mib(b))),
            r.delete_s.map_or("-".to_string(), |d| format!(
                "{:.3}M",
                r.deletes as f64 / d / 1e6
            )),
            r.note
        );
    }
    println!();
    Ok(())
}
