//! `spillway compress`, `spillway decompress` and `spillway run dyngraph`: the
//! memory-constrained data structures of `spillway-structures` on files.
//!
//! Raw grid files are little-endian `f32` or `f64` values, the fastest axis first (a C-order
//! NumPy array of shape `(NZ, NY, NX)` written with `tofile`). Edge lists are SNAP text
//! ("src dst" per line, `#` comments). Outputs are written atomically; bad input or arguments
//! exit with 2, runtime failures with 1.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use serde_json::json;
use spillway::algorithms::io::{parse_snap_chunk, AtomicFile, InputError};
use spillway_structures::compress::{
    self, CompressError, Decoded, Dtype, Encoding, Grid, HeaderGrid, IdPredictor, Method, Options,
    PointGraph, SetRule, Values,
};
use spillway_structures::dyngraph::{Bcsr, DynGraph, FoldPolicy, Structure};

use crate::Failure;

/// Arguments of `spillway compress`.
#[derive(Args, Debug)]
pub(crate) struct CompressArgs {
    /// Absolute error bound: every value is restored within this distance (see --relative).
    #[arg(long)]
    epsilon: f64,
    /// Read --epsilon as a fraction of the value range (max - min) of the input.
    #[arg(long)]
    relative: bool,
    /// Structured grid NX, NXxNY or NXxNYxNZ (NX varies fastest in the file).
    #[arg(long, required_unless_present = "graph", conflicts_with = "graph")]
    grid: Option<String>,
    /// Unstructured grid: a SNAP edge list of point pairs (points are 0..values).
    #[arg(long)]
    graph: Option<PathBuf>,
    /// Method: predict (prediction + quantisation, the default), or a decomposition: sbd1,
    /// sbd2, rbd1, rbd2 or rbd3.
    #[arg(long, default_value = "predict")]
    method: String,
    /// Value type of the input file: f32 or f64.
    #[arg(long, default_value = "f64")]
    dtype: String,
    /// Set id storage for sbd1/sbd2: sqe or de.
    #[arg(long, default_value = "sqe")]
    encoding: String,
    /// predict: lorenzo, interp, or auto (chosen on a sample of the grid). sbd1/sbd2: SQE id
    /// prediction: raw, delta, lorenzo, interp (structured grids only for the last two), or
    /// auto: try several predictors (with and without --relaxed) at a fast zstd level and keep
    /// the smallest.
    #[arg(long, default_value = "auto")]
    predictor: String,
    /// Which values may share a set: ball (within epsilon of one value) or range (the
    /// thesis: range at most epsilon).
    #[arg(long, default_value = "ball")]
    set_rule: String,
    /// SQE: let points take any set within epsilon, following the predictor.
    #[arg(long)]
    relaxed: bool,
    /// Build the sets for this fraction of epsilon (0 < R <= 1; with --relaxed).
    #[arg(long, default_value_t = 1.0)]
    set_radius: f64,
    /// zstd level (1-22).
    #[arg(long, default_value_t = compress::DEFAULT_LEVEL)]
    level: i32,
    /// Store the set values as raw floats instead of on a lattice of step <= epsilon/16.
    #[arg(long)]
    raw_values: bool,
    /// Skip decompressing the result and checking the bound at every point.
    #[arg(long)]
    no_verify: bool,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// Input file of raw values.
    input: PathBuf,
    /// Output file.
    output: PathBuf,
}

/// Arguments of `spillway decompress`.
#[derive(Args, Debug)]
pub(crate) struct DecompressArgs {
    /// The SNAP edge list of the unstructured grid (region methods on unstructured grids).
    #[arg(long)]
    graph: Option<PathBuf>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// Compressed file.
    input: PathBuf,
    /// Output file of raw values (the dtype recorded in the input).
    output: PathBuf,
}

/// Arguments of `spillway run dyngraph`.
#[derive(Args, Debug)]
pub(crate) struct DyngraphArgs {
    /// SNAP edge list to insert, in file order.
    #[arg(long)]
    input: PathBuf,
    /// Structure: ll, bcsr, daa, diaa or dcaa.
    #[arg(long)]
    structure: String,
    /// SNAP edge list to delete after the inserts, in file order.
    #[arg(long, conflicts_with = "delete_fraction")]
    deletes: Option<PathBuf>,
    /// Delete this fraction of the input edges (chosen at random by --seed) after the inserts.
    #[arg(long)]
    delete_fraction: Option<f64>,
    /// Seed of --delete-fraction.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Store every edge as both arcs (the thesis's undirected graphs).
    #[arg(long)]
    undirected: bool,
    /// BCSR fold policy: fraction:F (overflow above F of the CSR), every:N (updates) or manual.
    #[arg(long, default_value = "fraction:0.25")]
    fold: String,
    /// Replay the same stream into a BTreeSet per vertex and compare every list.
    #[arg(long)]
    verify: bool,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
}

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: 2,
        message: message.into(),
    }
}

fn runtime(message: impl Into<String>) -> Failure {
    Failure {
        code: 1,
        message: message.into(),
    }
}

fn from_compress(path: &Path, e: CompressError) -> Failure {
    Failure {
        code: if e.is_bad_input() { 2 } else { 1 },
        message: format!("{}: {e}", path.display()),
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| usage(InputError::io(path, &e).to_string()))
}

/// Writes `bytes` to `path` atomically: nothing appears there unless all of it does.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let mut file = AtomicFile::create(path)
        .map_err(|e| usage(format!("{}: cannot create output: {e}", path.display())))?;
    file.writer()
        .write_all(bytes)
        .map_err(|e| runtime(format!("{}: cannot write: {e}", path.display())))?;
    file.commit()
        .map_err(|e| runtime(format!("{}: cannot write: {e}", path.display())))
}

/// Reads a SNAP edge list, rejecting malformed lines with the file and line.
fn read_edges(path: &Path) -> Result<Vec<(u32, u32)>, Failure> {
    let bytes = read_file(path)?;
    let chunk = parse_snap_chunk(&bytes);
    if let Some((line, reason)) = chunk.error {
        return Err(usage(
            InputError::new(path, Some(line + 1), reason).to_string(),
        ));
    }
    Ok(chunk.edges)
}

fn read_graph(path: &Path, points: usize) -> Result<PointGraph, Failure> {
    let edges = read_edges(path)?;
    PointGraph::from_edges(points, &edges).map_err(|e| usage(format!("{}: {e}", path.display())))
}

fn human_bytes(b: usize) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b} B")
    }
}

/// `spillway compress`.
pub(crate) fn compress_cmd(args: CompressArgs) -> Result<(), Failure> {
    let method = Method::from_name(&args.method).ok_or_else(|| {
        usage(format!(
            "unknown --method '{}' (available: predict, sbd1, sbd2, rbd1, rbd2, rbd3)",
            args.method
        ))
    })?;
    let dtype = Dtype::from_name(&args.dtype).ok_or_else(|| {
        usage(format!(
            "unknown --dtype '{}' (available: f32, f64)",
            args.dtype
        ))
    })?;
    let encoding = Encoding::from_name(&args.encoding).ok_or_else(|| {
        usage(format!(
            "unknown --encoding '{}' (available: sqe, de)",
            args.encoding
        ))
    })?;
    let search = args.predictor == "auto";
    let predictor = if search {
        IdPredictor::Lorenzo
    } else {
        IdPredictor::from_name(&args.predictor).ok_or_else(|| {
            usage(format!(
                "unknown --predictor '{}' (available: auto, raw, delta, lorenzo, interp)",
                args.predictor
            ))
        })?
    };
    let set_rule = SetRule::from_name(&args.set_rule).ok_or_else(|| {
        usage(format!(
            "unknown --set-rule '{}' (available: ball, range)",
            args.set_rule
        ))
    })?;
    if !(1..=22).contains(&args.level) {
        return Err(usage(format!("--level must be 1-22, got {}", args.level)));
    }
    if !(args.epsilon.is_finite() && args.epsilon > 0.0) {
        return Err(usage(format!(
            "--epsilon must be a finite number greater than 0, got {}",
            args.epsilon
        )));
    }
    let grid_arg = match &args.grid {
        Some(text) => Some(Grid::parse(text).map_err(usage)?),
        None => None,
    };
    let bytes = read_file(&args.input)?;
    let size = dtype.size();
    if bytes.len() % size != 0 {
        return Err(usage(format!(
            "{}: {} bytes is not a whole number of {} values",
            args.input.display(),
            bytes.len(),
            dtype.name()
        )));
    }
    let n = bytes.len() / size;
    let grid = match grid_arg {
        Some(g) => {
            if g.num_points() != n {
                return Err(usage(format!(
                    "{}: holds {n} {} values but --grid {} has {} points",
                    args.input.display(),
                    dtype.name(),
                    args.grid.as_deref().unwrap_or_default(),
                    g.num_points()
                )));
            }
            g
        }
        None => {
            let path = args
                .graph
                .as_ref()
                .expect("clap requires --grid or --graph");
            Grid::Unstructured(Arc::new(read_graph(path, n)?))
        }
    };
    let f32s: Vec<f32>;
    let f64s: Vec<f64>;
    let values = match dtype {
        Dtype::F32 => {
            f32s = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Values::F32(&f32s)
        }
        Dtype::F64 => {
            f64s = bytes
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            Values::F64(&f64s)
        }
    };
    drop(bytes);
    let epsilon = if args.relative {
        let (lo, hi) = values.min_max().unwrap_or((0.0, 0.0));
        let range = hi - lo;
        let eps = args.epsilon * range;
        if !(eps.is_finite() && eps > 0.0) {
            return Err(usage(format!(
                "{}: --relative --epsilon {} gives the absolute bound {eps} (value range {range}); \
                 it must be finite and above 0",
                args.input.display(),
                args.epsilon
            )));
        }
        eps
    } else {
        args.epsilon
    };
    let options = Options {
        epsilon,
        method,
        encoding,
        predictor,
        set_rule,
        level: args.level,
        relaxed: args.relaxed,
        set_radius: args.set_radius,
        lattice: !args.raw_values,
        search,
    };
    let t0 = Instant::now();
    let packed =
        compress::compress(values, &grid, &options).map_err(|e| from_compress(&args.input, e))?;
    let compress_seconds = t0.elapsed().as_secs_f64();
    let mut verify_seconds = None;
    let mut max_error = None;
    if !args.no_verify {
        let t1 = Instant::now();
        let graph = match &grid {
            Grid::Unstructured(g) => Some(g.as_ref()),
            Grid::Structured(_) => None,
        };
        let (_, decoded) = compress::decompress(&packed.bytes, graph)
            .map_err(|e| runtime(format!("verification could not decompress the result: {e}")))?;
        let err = compress::check_bound(values, &decoded, epsilon).map_err(|v| {
            runtime(format!(
                "verification failed: point {} was {} and decompresses to {} (epsilon {epsilon})",
                v.index, v.original, v.decoded
            ))
        })?;
        max_error = Some(err);
        verify_seconds = Some(t1.elapsed().as_secs_f64());
    }
    write_atomic(&args.output, &packed.bytes)?;
    let original = packed.original_bytes;
    let mb_per_s = original as f64 / compress_seconds.max(1e-12) / 1e6;
    if args.json {
        let sections: Vec<_> = packed
            .sections
            .iter()
            .map(|s| json!({"name": s.name, "raw_bytes": s.raw, "stored_bytes": s.stored}))
            .collect();
        println!(
            "{}",
            json!({
                "input": args.input.display().to_string(),
                "output": args.output.display().to_string(),
                "method": method.name(),
                "dtype": dtype.name(),
                "points": n,
                "epsilon": epsilon,
                "original_bytes": original,
                "compressed_bytes": packed.bytes.len(),
                "ratio": packed.ratio(),
                "sets": packed.sets,
                "predictor": packed.predictor.name(),
                "relaxed": packed.relaxed,
                "set_radius": packed.set_radius,
                "values": packed.values,
                "boundary_points": packed.boundary_points,
                "seeds": packed.seeds,
                "compress_seconds": compress_seconds,
                "compress_mb_per_s": mb_per_s,
                "verify_seconds": verify_seconds,
                "max_error": max_error,
                "sections": sections,
            })
        );
    } else {
        println!(
            "compressed {} ({n} {} values, {}) to {}",
            args.input.display(),
            dtype.name(),
            method.name(),
            args.output.display()
        );
        println!(
            "  size        {} -> {} (ratio {:.5}, 1/{:.1})",
            human_bytes(original),
            human_bytes(packed.bytes.len()),
            packed.ratio(),
            1.0 / packed.ratio()
        );
        println!(
            "  epsilon     {epsilon:e}; {} sets/regions, {} stored values",
            packed.sets, packed.values
        );
        if !method.is_region_based() {
            println!(
                "  ids         predictor {}{}",
                packed.predictor.name(),
                if packed.relaxed {
                    format!(", relaxed, set radius {}", packed.set_radius)
                } else {
                    String::new()
                }
            );
        }
        println!("  time        {compress_seconds:.3} s ({mb_per_s:.1} MB/s)");
        match max_error {
            Some(e) => println!("  verified    max |x - x'| = {e:e} <= {epsilon:e} at every point"),
            None => println!("  verified    no (--no-verify)"),
        }
    }
    Ok(())
}

/// `spillway decompress`.
pub(crate) fn decompress_cmd(args: DecompressArgs) -> Result<(), Failure> {
    let bytes = read_file(&args.input)?;
    let header = compress::read_header(&bytes).map_err(|e| from_compress(&args.input, e))?;
    let graph = match (&args.graph, &header.grid) {
        (Some(path), HeaderGrid::Unstructured { .. }) => {
            Some(read_graph(path, header.points as usize)?)
        }
        (Some(path), HeaderGrid::Structured(_)) => {
            return Err(usage(format!(
                "--graph {}: {} was compressed on a structured grid",
                path.display(),
                args.input.display()
            )))
        }
        (None, _) => None,
    };
    let t0 = Instant::now();
    let (header, decoded) =
        compress::decompress(&bytes, graph.as_ref()).map_err(|e| from_compress(&args.input, e))?;
    let seconds = t0.elapsed().as_secs_f64();
    let raw = decoded.to_le_bytes();
    write_atomic(&args.output, &raw)?;
    let grid = match &header.grid {
        HeaderGrid::Structured(d) => d
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("x"),
        HeaderGrid::Unstructured { edges, .. } => format!("unstructured ({edges} edges)"),
    };
    let ratio = bytes.len() as f64 / raw.len().max(1) as f64;
    let mb_per_s = raw.len() as f64 / seconds.max(1e-12) / 1e6;
    if args.json {
        println!(
            "{}",
            json!({
                "input": args.input.display().to_string(),
                "output": args.output.display().to_string(),
                "method": header.method.name(),
                "dtype": header.dtype.name(),
                "grid": grid,
                "points": header.points,
                "epsilon": header.epsilon,
                "compressed_bytes": bytes.len(),
                "original_bytes": raw.len(),
                "ratio": ratio,
                "decompress_seconds": seconds,
                "decompress_mb_per_s": mb_per_s,
            })
        );
    } else {
        let count = match &decoded {
            Decoded::F32(v) => v.len(),
            Decoded::F64(v) => v.len(),
        };
        println!(
            "decompressed {} ({}, {}, grid {grid}) to {}: {count} {} values",
            args.input.display(),
            header.method.name(),
            header.dtype.name(),
            args.output.display(),
            header.dtype.name()
        );
        println!(
            "  size        {} -> {} (ratio {ratio:.5}); every value within {:e} of the original",
            human_bytes(bytes.len()),
            human_bytes(raw.len()),
            header.epsilon
        );
        println!("  time        {seconds:.3} s ({mb_per_s:.1} MB/s)");
    }
    Ok(())
}

/// SplitMix64, for choosing deletes reproducibly.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn parse_fold(text: &str) -> Result<FoldPolicy, Failure> {
    let bad = || {
        usage(format!(
            "invalid --fold '{text}' (expected fraction:F with F > 0, every:N with N >= 1, or manual)"
        ))
    };
    if text == "manual" {
        return Ok(FoldPolicy::Manual);
    }
    if let Some(f) = text.strip_prefix("fraction:") {
        let f: f64 = f.parse().map_err(|_| bad())?;
        return if f.is_finite() && f > 0.0 {
            Ok(FoldPolicy::Fraction(f))
        } else {
            Err(bad())
        };
    }
    if let Some(k) = text.strip_prefix("every:") {
        let k: u64 = k.parse().map_err(|_| bad())?;
        return if k >= 1 {
            Ok(FoldPolicy::Every(k))
        } else {
            Err(bad())
        };
    }
    Err(bad())
}

/// `spillway run dyngraph`.
pub(crate) fn dyngraph_cmd(args: DyngraphArgs) -> Result<(), Failure> {
    let structure = Structure::from_name(&args.structure).ok_or_else(|| {
        usage(format!(
            "unknown --structure '{}' (available: ll, bcsr, daa, diaa, dcaa)",
            args.structure
        ))
    })?;
    let fold = parse_fold(&args.fold)?;
    if let Some(f) = args.delete_fraction {
        if !(0.0..=1.0).contains(&f) {
            return Err(usage(format!(
                "--delete-fraction must be in [0, 1], got {f}"
            )));
        }
    }
    let edges = read_edges(&args.input)?;
    let deletes: Vec<(u32, u32)> = match (&args.deletes, args.delete_fraction) {
        (Some(path), _) => read_edges(path)?,
        (None, Some(f)) => {
            let mut idx: Vec<usize> = (0..edges.len()).collect();
            let mut state = args.seed;
            let take = ((edges.len() as f64) * f).round() as usize;
            for i in 0..take.min(idx.len()) {
                let j = i + (splitmix(&mut state) % (idx.len() - i) as u64) as usize;
                idx.swap(i, j);
            }
            idx[..take].iter().map(|&i| edges[i]).collect()
        }
        (None, None) => Vec::new(),
    };
    let vertices = edges
        .iter()
        .chain(&deletes)
        .map(|&(u, v)| u.max(v) as usize + 1)
        .max()
        .unwrap_or(0);
    // BCSR is kept as its concrete type for its fold statistics.
    let mut bcsr: Option<Bcsr> = None;
    let mut other: Option<Box<dyn DynGraph + Send>> = None;
    if structure == Structure::Bcsr {
        bcsr = Some(Bcsr::with_vertices(vertices, fold));
    } else {
        other = Some(structure.create(vertices, fold));
    }
    let g: &mut dyn DynGraph = match (&mut bcsr, &mut other) {
        (Some(b), _) => b,
        (None, Some(x)) => x.as_mut(),
        (None, None) => unreachable!("one of the two is set above"),
    };
    let base_bytes = g.bytes_used();
    let t0 = Instant::now();
    let mut inserted = 0u64;
    if args.undirected {
        for &(u, v) in &edges {
            inserted += u64::from(g.insert_undirected(u, v));
        }
    } else {
        for &(u, v) in &edges {
            inserted += u64::from(g.insert(u, v));
        }
    }
    let insert_seconds = t0.elapsed().as_secs_f64();
    let arcs_after_inserts = g.num_arcs();
    let bytes_after_inserts = g.bytes_used();
    let t1 = Instant::now();
    let mut deleted = 0u64;
    if args.undirected {
        for &(u, v) in &deletes {
            deleted += u64::from(g.delete_undirected(u, v));
        }
    } else {
        for &(u, v) in &deletes {
            deleted += u64::from(g.delete(u, v));
        }
    }
    let delete_seconds = t1.elapsed().as_secs_f64();
    let arcs = g.num_arcs();
    let bytes = g.bytes_used();
    let mut verified = None;
    if args.verify {
        let mut reference: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); vertices];
        for &(u, v) in &edges {
            reference[u as usize].insert(v);
            if args.undirected {
                reference[v as usize].insert(u);
            }
        }
        for &(u, v) in &deletes {
            reference[u as usize].remove(&v);
            if args.undirected {
                reference[v as usize].remove(&u);
            }
        }
        let mut got = Vec::new();
        for (v, want) in reference.iter().enumerate() {
            g.neighbours_into(v as u32, &mut got);
            if got.len() != want.len()
                || !got.iter().eq(want.iter())
                || g.degree(v as u32) != want.len()
            {
                return Err(runtime(format!(
                    "verification failed: {} lists {} neighbours of vertex {v}, the reference {}",
                    structure.name(),
                    got.len(),
                    want.len()
                )));
            }
        }
        verified = Some(true);
    }
    let per = |b: usize, a: u64| b as f64 / (a.max(1)) as f64;
    let inserts_per_s = edges.len() as f64 / insert_seconds.max(1e-12);
    let deletes_per_s = deletes.len() as f64 / delete_seconds.max(1e-12);
    let (folds, peak) = match &bcsr {
        Some(b) => (Some(b.folds()), Some(b.peak_bytes())),
        None => (None, None),
    };
    // Edges as given: arcs, or pairs of arcs when undirected (self-loops are one arc).
    let edges_stored = if args.undirected {
        inserted - deleted
    } else {
        arcs
    };
    if args.json {
        println!(
            "{}",
            json!({
                "structure": structure.name(),
                "input": args.input.display().to_string(),
                "undirected": args.undirected,
                "vertices": vertices,
                "edges_in_input": edges.len(),
                "edges_inserted": inserted,
                "insert_seconds": insert_seconds,
                "inserts_per_second": inserts_per_s,
                "deletes_requested": deletes.len(),
                "edges_deleted": deleted,
                "delete_seconds": delete_seconds,
                "deletes_per_second": deletes_per_s,
                "arcs": arcs,
                "edges": edges_stored,
                "bytes": bytes,
                "bytes_per_arc": per(bytes, arcs),
                "bytes_per_edge": per(bytes, edges_stored),
                "bytes_empty": base_bytes,
                "arcs_after_inserts": arcs_after_inserts,
                "bytes_after_inserts": bytes_after_inserts,
                "bcsr_folds": folds,
                "bcsr_peak_bytes": peak,
                "verified": verified,
            })
        );
    } else {
        println!(
            "spillway dyngraph: {} into {} ({vertices} vertices{})",
            args.input.display(),
            structure.name(),
            if args.undirected { ", undirected" } else { "" }
        );
        println!(
            "  inserts     {} edges ({inserted} new) in {insert_seconds:.3} s: {inserts_per_s:.0} inserts/s",
            edges.len()
        );
        if !deletes.is_empty() {
            println!(
                "  deletes     {} edges ({deleted} present) in {delete_seconds:.3} s: {deletes_per_s:.0} deletes/s",
                deletes.len()
            );
        }
        println!(
            "  memory      {} for {arcs} arcs: {:.2} bytes/arc, {:.2} bytes/edge",
            human_bytes(bytes),
            per(bytes, arcs),
            per(bytes, edges_stored)
        );
        if let (Some(f), Some(p)) = (folds, peak) {
            println!("  bcsr        {f} folds, peak {}", human_bytes(p));
        }
        match verified {
            Some(_) => println!("  verified    every list equals a BTreeSet reference"),
            None => println!("  verified    no (--verify to check)"),
        }
    }
    Ok(())
}
