//! `run dyngraph`: replays an edge stream into a dynamic graph structure.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use spillway::algorithms::state::{check_state_in, Origin};
use spillway_structures::dyngraph::{Bcsr, DynGraph, FoldPolicy, Structure};

use super::read_edges;
use crate::driver::{Command, CommonArgs, Declared, Estimate, Failure, Inputs, Job};
use crate::options::{fraction, named};

/// Bytes a structure keeps per vertex id it reserves (list heads, lengths, capacities).
const VERTEX_BYTES: u64 = 32;

/// `run dyngraph`.
#[derive(Args, Debug)]
pub(crate) struct Dyngraph {
    /// SNAP edge list to insert, in file order (`-`: standard input).
    #[arg(long)]
    input: PathBuf,
    /// Structure.
    #[arg(long, value_parser = named::<Structure>())]
    structure: Structure,
    /// SNAP edge list to delete after the inserts, in file order.
    #[arg(long, conflicts_with = "delete_fraction")]
    deletes: Option<PathBuf>,
    /// Delete this fraction (0 to 1) of the input edges, chosen at random by --seed, after
    /// the inserts.
    #[arg(long, value_parser = fraction)]
    delete_fraction: Option<f64>,
    /// Seed of --delete-fraction.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Store every edge as both arcs (the thesis's undirected graphs).
    #[arg(long)]
    undirected: bool,
    /// BCSR fold policy: fraction:F (overflow above F of the CSR), every:N (updates) or manual.
    #[arg(long, default_value = "fraction:0.25")]
    fold: FoldPolicy,
    /// Replay the same stream into a BTreeSet per vertex and compare every list.
    #[arg(long)]
    verify: bool,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `run dyngraph` reports.
#[derive(Debug, Serialize)]
pub(crate) struct DyngraphFacts {
    structure: &'static str,
    undirected: bool,
    vertices: u64,
    edges_in_input: u64,
    edges_inserted: u64,
    insert_seconds: f64,
    inserts_per_second: f64,
    deletes_requested: u64,
    edges_deleted: u64,
    delete_seconds: f64,
    deletes_per_second: f64,
    arcs: u64,
    edges: u64,
    bytes: u64,
    bytes_per_arc: f64,
    bytes_per_edge: f64,
    bytes_empty: u64,
    arcs_after_inserts: u64,
    bytes_after_inserts: u64,
    bcsr_folds: Option<u64>,
    bcsr_peak_bytes: Option<u64>,
    verified: Option<bool>,
}

/// SplitMix64, for choosing deletes reproducibly.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 1-based line of the `k`-th edge of a SNAP file (comments and blank lines skipped).
fn line_of_edge(path: &std::path::Path, k: usize) -> Option<u64> {
    let text = std::fs::read(path).ok()?;
    let mut seen = 0;
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        if seen == k {
            return Some(i as u64 + 1);
        }
        seen += 1;
    }
    None
}

/// An insertion or deletion of an edge; whether it changed the graph.
type EdgeOp = fn(&mut dyn DynGraph, u32, u32) -> bool;

/// Applies `op` to `g` for every edge: how many changed the graph, and the seconds it took.
fn replay(g: &mut dyn DynGraph, edges: &[(u32, u32)], op: EdgeOp) -> (u64, f64) {
    let t = Instant::now();
    let changed = edges.iter().filter(|&&(u, v)| op(g, u, v)).count() as u64;
    (changed, t.elapsed().as_secs_f64())
}

fn human_bytes(b: u64) -> String {
    spillway::ByteSize(b).human()
}

impl Command for Dyngraph {
    const NAME: &'static str = "dyngraph";
    type Facts = DyngraphFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::new(&self.common)
            .input("--input", Some(&self.input))
            .input("--deletes", self.deletes.as_deref())
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        // The edges as read (8 bytes from 8 to 20 of text), the structure's lists and the
        // deletions.
        let bytes =
            inputs.bytes(&self.input) + self.deletes.as_ref().map_or(0, |d| inputs.bytes(d));
        Ok(Estimate::of_input(&self.input, bytes, 2))
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<DyngraphFacts>, Failure> {
        let input = job.input(&self.input);
        let edges = read_edges(&input)?;
        let deletes: Vec<(u32, u32)> = match (&self.deletes, self.delete_fraction) {
            (Some(path), _) => read_edges(&job.input(path))?,
            (None, Some(f)) => {
                let mut idx: Vec<usize> = (0..edges.len()).collect();
                let mut state = self.seed;
                let take = ((edges.len() as f64) * f).round() as usize;
                for i in 0..take.min(idx.len()) {
                    let j = i + (splitmix(&mut state) % (idx.len() - i) as u64) as usize;
                    idx.swap(i, j);
                }
                idx[..take].iter().map(|&i| edges[i]).collect()
            }
            (None, None) => Vec::new(),
        };
        // The largest id fixes the vertices every structure reserves: check it first.
        let largest = edges
            .iter()
            .enumerate()
            .map(|(k, &(u, v))| (u.max(v), k))
            .max_by_key(|&(id, k)| (id, std::cmp::Reverse(k)));
        // The graph's vertices are those of its inserted edges: a deletion that names any
        // other vertex cannot find its edge (it is requested, not present).
        let vertices = largest.map_or(0, |(id, _)| id as usize + 1);
        let requested = deletes.len() as u64;
        let deletes: Vec<(u32, u32)> = deletes
            .into_iter()
            .filter(|&(u, v)| (u.max(v) as usize) < vertices)
            .collect();
        if let Some((id, k)) = largest {
            let what = format!("vertex id {id}");
            check_state_in(
                (vertices as u64).saturating_mul(VERTEX_BYTES),
                &format!("{vertices} vertices at {VERTEX_BYTES} bytes each"),
                Origin::Line {
                    path: &input,
                    line: line_of_edge(&input, k),
                    what: &what,
                },
                None,
            )
            .map_err(Failure::from)?;
        }
        // BCSR is kept as its concrete type for its fold statistics.
        let mut bcsr: Option<Bcsr> = None;
        let mut other: Option<Box<dyn DynGraph + Send>> = None;
        if self.structure == Structure::Bcsr {
            bcsr = Some(Bcsr::with_vertices(vertices, self.fold));
        } else {
            other = Some(self.structure.create(vertices, self.fold));
        }
        let g: &mut dyn DynGraph = match (&mut bcsr, &mut other) {
            (Some(b), _) => b,
            (None, Some(x)) => x.as_mut(),
            (None, None) => unreachable!("one of the two is set above"),
        };
        let base_bytes = g.bytes_used();
        let (insert, delete): (EdgeOp, EdgeOp) = if self.undirected {
            (
                |g, u, v| g.insert_undirected(u, v),
                |g, u, v| g.delete_undirected(u, v),
            )
        } else {
            (|g, u, v| g.insert(u, v), |g, u, v| g.delete(u, v))
        };
        let (inserted, insert_seconds) = replay(g, &edges, insert);
        let arcs_after_inserts = g.num_arcs();
        let bytes_after_inserts = g.bytes_used();
        let (deleted, delete_seconds) = replay(g, &deletes, delete);
        let arcs = g.num_arcs();
        let bytes = g.bytes_used();
        let mut verified = None;
        if self.verify {
            let mut reference: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); vertices];
            for &(u, v) in &edges {
                reference[u as usize].insert(v);
                if self.undirected {
                    reference[v as usize].insert(u);
                }
            }
            for &(u, v) in &deletes {
                reference[u as usize].remove(&v);
                if self.undirected {
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
                    return Err(Failure::failed(format!(
                        "verification failed: {} lists {} neighbours of vertex {v}, the \
                         reference {}",
                        self.structure.name(),
                        got.len(),
                        want.len()
                    )));
                }
            }
            verified = Some(true);
        }
        let per = |b: usize, a: u64| b as f64 / (a.max(1)) as f64;
        let (folds, peak) = match &bcsr {
            Some(b) => (Some(b.folds()), Some(b.peak_bytes() as u64)),
            None => (None, None),
        };
        // Edges as given: arcs, or pairs of arcs when undirected (self-loops are one arc).
        let edges_stored = if self.undirected {
            inserted - deleted
        } else {
            arcs
        };
        Ok(Some(DyngraphFacts {
            structure: self.structure.name(),
            undirected: self.undirected,
            vertices: vertices as u64,
            edges_in_input: edges.len() as u64,
            edges_inserted: inserted,
            insert_seconds,
            inserts_per_second: edges.len() as f64 / insert_seconds.max(1e-12),
            deletes_requested: requested,
            edges_deleted: deleted,
            delete_seconds,
            deletes_per_second: requested as f64 / delete_seconds.max(1e-12),
            arcs,
            edges: edges_stored,
            bytes: bytes as u64,
            bytes_per_arc: per(bytes, arcs),
            bytes_per_edge: per(bytes, edges_stored),
            bytes_empty: base_bytes as u64,
            arcs_after_inserts,
            bytes_after_inserts: bytes_after_inserts as u64,
            bcsr_folds: folds,
            bcsr_peak_bytes: peak,
            verified,
        }))
    }

    fn human(f: &DyngraphFacts) -> Option<String> {
        let mut t = format!(
            "spillway dyngraph: {} ({} vertices{})\n",
            f.structure,
            f.vertices,
            if f.undirected { ", undirected" } else { "" }
        );
        t += &format!(
            "  inserts     {} edges ({} new) in {:.3} s: {:.0} inserts/s\n",
            f.edges_in_input, f.edges_inserted, f.insert_seconds, f.inserts_per_second
        );
        if f.deletes_requested > 0 {
            t += &format!(
                "  deletes     {} edges ({} present) in {:.3} s: {:.0} deletes/s\n",
                f.deletes_requested, f.edges_deleted, f.delete_seconds, f.deletes_per_second
            );
        }
        t += &format!(
            "  memory      {} for {} arcs: {:.2} bytes/arc, {:.2} bytes/edge\n",
            human_bytes(f.bytes),
            f.arcs,
            f.bytes_per_arc,
            f.bytes_per_edge
        );
        if let (Some(folds), Some(peak)) = (f.bcsr_folds, f.bcsr_peak_bytes) {
            t += &format!("  bcsr        {folds} folds, peak {}\n", human_bytes(peak));
        }
        t += match f.verified {
            Some(_) => "  verified    every list equals a BTreeSet reference\n",
            None => "  verified    no (--verify to check)\n",
        };
        Some(t)
    }
}
