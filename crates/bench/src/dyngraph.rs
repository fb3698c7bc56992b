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

use std::time::Instant;

use spillway::algorithms::generate::RmatSpec;
use spillway::current_rss;
use spillway_structures::dyngraph::{Bcsr, Csr, DynGraph, FoldPolicy, Structure};

use crate::harness::BoxError;

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
    let mut edges = Vec::with_capacity(m);
    spec.edges(0..m as u64, &mut edges);
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
    let rss_growth = match (rss0, current_rss()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };
    // Check every list against a CSR of the edges inserted, built from scratch.
    let csr = Csr::from_arcs(n, &symmetric(&edges[..inserted]));
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
    let edges_held = (csr.num_arcs()
        + (0..n as u32)
            .filter(|&v| csr.neighbours(v).binary_search(&v).is_ok())
            .count() as u64)
        / 2;
    drop(csr);
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

/// Runs the subcommand.
pub fn main(args: Args) -> Result<(), BoxError> {
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
    let structures: Vec<Structure> = args
        .structures
        .split(',')
        .map(|s| Structure::from_name(s).ok_or_else(|| format!("unknown structure '{s}'")))
        .collect::<Result<_, _>>()?;
    let n = spec.num_vertices() as usize;
    let m = spec.num_edges() as usize;
    eprintln!("dyngraph: generating R-MAT scale {scale}, {m} edges");
    let mut edges = Vec::with_capacity(m);
    spec.edges(0..m as u64, &mut edges);

    // Baseline 1: the CSR built once from the whole stream.
    let t = Instant::now();
    let csr = Csr::from_arcs(n, &symmetric(&edges));
    let csr_s = t.elapsed().as_secs_f64();
    let distinct = csr.num_arcs();
    let loops = (0..n as u32)
        .filter(|&v| csr.neighbours(v).binary_search(&v).is_ok())
        .count() as u64;
    let edges_held = (distinct + loops) / 2;
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
