//! `dyngraph --mode query`: the thesis's query benchmark (section 4.3) on every structure
//! while edges arrive, against a CSR rebuilt for each snapshot, petgraph and networkx.
//!
//! # What is measured
//! * Streams: R-MAT (Graph500 parameters, seed 1, `2^scale` vertices, `edge_factor` edges a
//!   vertex; repeats and self-loops kept) and a random geometric graph with locality-ordered
//!   ids ([`geometric::rgg`](super::geometric::rgg), same size, seed 1). Both are inserted
//!   undirected (both arcs).
//! * Snapshots: every `|V| / 200` stream edges, as the thesis; the kernels run after at most
//!   `--snapshots` of them, evenly spread and the last at the end of the stream. A
//!   snapshot's update time is the time to insert its `|V| / 200` edges (one at a time with
//!   `--insert single`, the thesis's way; in one batch with `--insert batch`); the edges
//!   between queried snapshots are inserted the same way, untimed.
//! * Kernels on each queried snapshot, the same queries for every structure: BFT of the whole
//!   graph from one source (a random endpoint of an inserted edge; restarts at the smallest
//!   unvisited id), `--queries` intersections `|N(u) ∩ N(v)|` of the endpoints of random
//!   inserted edges (the triangles through those edges), and `--queries` lookups (half random
//!   inserted edges, half random pairs). Each kernel is timed `--reps` times, minimum kept;
//!   every structure's answers must equal the CSR's or the run fails.
//! * Memory per edge: `bytes_used()` over the distinct undirected edges held.
//! * BCSR folds after every `|V| / alpha` new edges, for each alpha of `--alphas` (the
//!   thesis's fold interval); its fold time is part of the update time.
//! * Peers on the same snapshot: a CSR rebuilt from scratch from all the edges so far (its
//!   "update" is the rebuild), petgraph's `UnGraph` (the distinct edges) and `UnGraphMap`
//!   (the stream's edges) traversed whole by `Bfs`; on the final graph, networkx through
//!   `scripts/bench_dyngraph_queries.py` (with `--python` or `SPILLWAY_PYTHON`).
//!
//! # Size
//! Inserting one edge at a time costs O(degree) in every structure, and R-MAT's hub lists
//! make LL and DCAA slow to load: `--scale 16` runs each stream in one to two minutes;
//! `--scale 18` needs LL left out on R-MAT (`--structures bcsr,daa,diaa,dcaa`). The default
//! scale (20, shared with the other modes) takes far longer.

use std::path::{Path, PathBuf};
use std::time::Instant;

use petgraph::graph::{NodeIndex, UnGraph};
use petgraph::graphmap::UnGraphMap;
use petgraph::visit::{Bfs, IntoNeighbors, VisitMap, Visitable};
use serde_json::{json, Value};
use spillway::algorithms::generate::RmatSpec;
use spillway_structures::dyngraph::{
    Bcsr, Csr, DynGraph, FoldPolicy, QueryScratch, Structure, Traversal,
};

use super::{edges_held, geometric, parse_structures, splitmix, symmetric, Args};
use crate::harness::BoxError;

/// A stream of undirected edges on `n` vertices.
struct Stream {
    name: &'static str,
    n: usize,
    edges: Vec<(u32, u32)>,
}

/// The queries of one snapshot, the same for every structure.
struct Queries {
    source: u32,
    pairs: Vec<(u32, u32)>,
    lookups: Vec<(u32, u32)>,
}

/// What the kernels answered, which must agree across structures.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Answers {
    bft: Traversal,
    common: u64,
    hits: u64,
}

/// Seconds per kernel on one snapshot.
#[derive(Debug, Clone, Copy, Default)]
struct Times {
    bft: f64,
    intersect: f64,
    lookup: f64,
}

impl Times {
    fn total(&self) -> f64 {
        self.bft + self.intersect + self.lookup
    }
}

/// One structure on one queried snapshot.
#[derive(Debug, Clone, Copy)]
struct Point {
    bytes_per_edge: f64,
    update: f64,
    times: Times,
}

/// The peers on one queried snapshot.
struct Baseline {
    edges: usize,
    distinct: u64,
    csr: Point,
    answers: Answers,
    petgraph: [f64; 2],
}

/// The three kernels behind one interface, so that the CSR and the structures are called
/// the same way (one dynamic call per query).
trait Kernels {
    fn bft(&self, source: u32, s: &mut QueryScratch) -> Traversal;
    fn common(&self, u: u32, v: u32, s: &mut QueryScratch) -> u64;
    fn has(&self, u: u32, v: u32) -> bool;
}

impl Kernels for Csr {
    fn bft(&self, source: u32, s: &mut QueryScratch) -> Traversal {
        Csr::bft(self, source, true, s)
    }
    fn common(&self, u: u32, v: u32, _: &mut QueryScratch) -> u64 {
        self.common_neighbours(u, v)
    }
    fn has(&self, u: u32, v: u32) -> bool {
        self.contains(u, v)
    }
}

impl<G: DynGraph + ?Sized> Kernels for &G {
    fn bft(&self, source: u32, s: &mut QueryScratch) -> Traversal {
        DynGraph::bft(*self, source, true, s)
    }
    fn common(&self, u: u32, v: u32, s: &mut QueryScratch) -> u64 {
        self.common_neighbours(u, v, s)
    }
    fn has(&self, u: u32, v: u32) -> bool {
        self.contains(u, v)
    }
}

/// The minimum of `reps` timings of `f`, and its last result.
fn best_of<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (best, out.expect("at least one repetition"))
}

/// Runs the three kernels `reps` times each.
fn run_kernels(
    g: &dyn Kernels,
    q: &Queries,
    s: &mut QueryScratch,
    reps: usize,
) -> (Answers, Times) {
    let (bft_s, bft) = best_of(reps, || g.bft(q.source, s));
    let (intersect, common) = best_of(reps, || {
        q.pairs.iter().map(|&(u, v)| g.common(u, v, s)).sum::<u64>()
    });
    let (lookup, hits) = best_of(reps, || {
        q.lookups.iter().filter(|&&(u, v)| g.has(u, v)).count() as u64
    });
    let times = Times {
        bft: bft_s,
        intersect,
        lookup,
    };
    (Answers { bft, common, hits }, times)
}

/// The queries of the snapshot holding `edges` (seeded by the snapshot's index).
fn queries(edges: &[(u32, u32)], n: usize, count: usize, seed: u64) -> Queries {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5;
    let mut pick = |k: usize| (splitmix(&mut state) % k.max(1) as u64) as usize;
    let source = edges.get(pick(edges.len())).map_or(0, |e| e.0);
    let pairs = (0..count).map(|_| edges[pick(edges.len())]).collect();
    let lookups = (0..count)
        .map(|i| {
            let (u, v) = edges[pick(edges.len())];
            if i % 2 == 0 {
                (v, u)
            } else {
                (u, pick(n) as u32)
            }
        })
        .collect();
    Queries {
        source,
        pairs,
        lookups,
    }
}

/// The snapshots: `step` edges each, the queried ones (1-based indices, increasing).
struct Plan {
    step: usize,
    count: usize,
    queried: Vec<usize>,
}

impl Plan {
    fn new(n: usize, m: usize, max_queried: usize) -> Plan {
        let step = (n / 200).max(1);
        let count = m.div_ceil(step);
        let k = max_queried.clamp(1, count.max(1));
        let mut queried: Vec<usize> = (1..=k).map(|j| (count * j).div_ceil(k)).collect();
        queried.dedup();
        Plan {
            step,
            count,
            queried,
        }
    }

    /// Stream edges up to the end of snapshot `k`.
    fn end(&self, k: usize, m: usize) -> usize {
        (k * self.step).min(m)
    }
}

/// petgraph's BFT of a whole graph: from `start`, then from every vertex not yet discovered.
fn petgraph_bft<G>(g: G, start: G::NodeId, all: impl Iterator<Item = G::NodeId>) -> u64
where
    G: IntoNeighbors + Visitable,
{
    let mut bfs = Bfs::new(g, start);
    let mut reached = 0u64;
    while bfs.next(g).is_some() {
        reached += 1;
    }
    for v in all {
        if bfs.discovered.visit(v) {
            bfs.stack.push_back(v);
            while bfs.next(g).is_some() {
                reached += 1;
            }
        }
    }
    reached
}

/// petgraph `UnGraph` (distinct edges, from the CSR) and `UnGraphMap` (the stream's edges)
/// BFT times; both must reach every vertex.
fn petgraph_times(csr: &Csr, edges: &[(u32, u32)], source: u32, reps: usize) -> [f64; 2] {
    let n = csr.num_vertices();
    let mut g = UnGraph::<(), (), u32>::with_capacity(n, csr.num_arcs() as usize / 2);
    for _ in 0..n {
        g.add_node(());
    }
    for u in 0..n as u32 {
        for &v in csr.neighbours(u).iter().filter(|&&v| v >= u) {
            g.add_edge(NodeIndex::new(u as usize), NodeIndex::new(v as usize), ());
        }
    }
    let start = NodeIndex::new(source as usize);
    let (graph_s, r1) = best_of(reps, || petgraph_bft(&g, start, g.node_indices()));
    drop(g);
    let mut gm = UnGraphMap::<u32, ()>::with_capacity(n, edges.len());
    for v in 0..n as u32 {
        gm.add_node(v);
    }
    for &(u, v) in edges {
        gm.add_edge(u, v, ());
    }
    let (map_s, r2) = best_of(reps, || petgraph_bft(&gm, source, 0..n as u32));
    assert!(
        r1 == n as u64 && r2 == n as u64,
        "petgraph reached {r1} and {r2} of {n}"
    );
    [graph_s, map_s]
}

/// The rebuilt CSR, its kernels and petgraph's BFT on every queried snapshot.
fn baselines(st: &Stream, plan: &Plan, qs: &[Queries], a: &Args) -> Vec<Baseline> {
    let mut s = QueryScratch::new();
    let m = st.edges.len();
    plan.queried
        .iter()
        .zip(qs)
        .map(|(&k, q)| {
            let end = plan.end(k, m);
            let (rebuild, csr) = best_of(a.reps, || {
                Csr::from_arcs(st.n, &symmetric(&st.edges[..end]))
            });
            let (answers, times) = run_kernels(&csr, q, &mut s, a.reps);
            let distinct = edges_held(&csr, st.n);
            let petgraph = petgraph_times(&csr, &st.edges[..end], q.source, a.reps);
            eprintln!(
                "dyngraph query: {} snapshot {k}/{}: {end} edges, rebuild {rebuild:.4} s",
                st.name, plan.count
            );
            Baseline {
                edges: end,
                distinct,
                csr: Point {
                    bytes_per_edge: csr.bytes_used() as f64 / distinct.max(1) as f64,
                    update: rebuild,
                    times,
                },
                answers,
                petgraph,
            }
        })
        .collect()
}

/// One structure to measure: the structure, and BCSR's alpha.
#[derive(Debug, Clone, Copy)]
struct Config {
    structure: Structure,
    alpha: Option<u32>,
}

impl Config {
    fn label(&self) -> String {
        match self.alpha {
            Some(al) => format!("BCSR alpha {al}"),
            None => self.structure.name().to_uppercase(),
        }
    }

    fn create(&self, n: usize) -> Box<dyn DynGraph + Send> {
        match self.alpha {
            // Every counts new arcs: two per new edge.
            Some(al) => Box::new(Bcsr::with_vertices(
                n,
                FoldPolicy::Every((2 * n as u64 / u64::from(al)).max(1)),
            )),
            None => self.structure.create(n, FoldPolicy::Manual),
        }
    }
}

/// Inserts `chunk` undirected, one edge at a time or as one batch.
fn insert(g: &mut dyn DynGraph, chunk: &[(u32, u32)], single: bool) {
    if single {
        for &(u, v) in chunk {
            g.insert_undirected(u, v);
        }
    } else {
        g.insert_batch_undirected(chunk);
    }
}

/// Streams every snapshot into one structure and runs the kernels on the queried ones;
/// stops early (fewer points) past the time limit.
fn measure(
    c: Config,
    st: &Stream,
    plan: &Plan,
    qs: &[Queries],
    base: &[Baseline],
    a: &Args,
) -> Result<Vec<Point>, BoxError> {
    let mut g = c.create(st.n);
    let single = a.insert == "single";
    let (m, mut s, mut points) = (st.edges.len(), QueryScratch::new(), Vec::new());
    let started = Instant::now();
    for k in 1..=plan.count {
        let chunk = &st.edges[plan.end(k - 1, m)..plan.end(k, m)];
        let t = Instant::now();
        insert(g.as_mut(), chunk, single);
        let update = t.elapsed().as_secs_f64();
        let Some(j) = plan.queried.iter().position(|&x| x == k) else {
            continue;
        };
        let (answers, times) = run_kernels(&g.as_ref(), &qs[j], &mut s, a.reps);
        if answers != base[j].answers {
            return Err(format!(
                "{}: snapshot {k}: {answers:?}, the CSR says {:?}",
                c.label(),
                base[j].answers
            )
            .into());
        }
        let bytes = g.bytes_used() as f64 / base[j].distinct.max(1) as f64;
        points.push(Point {
            bytes_per_edge: bytes,
            update,
            times,
        });
        if started.elapsed().as_secs_f64() > a.time_limit {
            eprintln!(
                "dyngraph query: {} stopped by the time limit at snapshot {k}",
                c.label()
            );
            break;
        }
    }
    Ok(points)
}

/// The configurations: every structure, BCSR once per alpha.
fn configs(a: &Args) -> Result<Vec<Config>, BoxError> {
    let mut out = Vec::new();
    for s in parse_structures(&a.structures)? {
        if s == Structure::Bcsr {
            out.extend(a.alphas.iter().map(|&al| Config {
                structure: s,
                alpha: Some(al),
            }));
        } else {
            out.push(Config {
                structure: s,
                alpha: None,
            });
        }
    }
    Ok(out)
}

/// The stream named `kind` (`rmat` or `rgg`).
fn stream(kind: &str, a: &Args) -> Result<Stream, BoxError> {
    let n = 1usize << a.scale;
    let edges = match kind {
        "rmat" => {
            let spec = RmatSpec::parse(&format!("rmat:{}:{}:1", a.scale, a.edge_factor))?;
            super::stream(&spec)
        }
        "rgg" => geometric::rgg(n, a.edge_factor, 1),
        _ => return Err(format!("unknown graph '{kind}' (rmat or rgg)").into()),
    };
    let name = if kind == "rmat" {
        "R-MAT"
    } else {
        "random geometric"
    };
    Ok(Stream { name, n, edges })
}

/// Everything measured on one stream.
struct Results {
    configs: Vec<(Config, Vec<Point>)>,
    base: Vec<Baseline>,
    networkx: Option<Value>,
    intervalised: f64,
}

fn run_stream(kind: &str, a: &Args) -> Result<(Stream, Plan, Results), BoxError> {
    let st = stream(kind, a)?;
    let m = st.edges.len();
    let plan = Plan::new(st.n, m, a.snapshots);
    eprintln!(
        "dyngraph query: {} stream, {} vertices, {m} edges, {} snapshots of {} edges, {} queried",
        st.name,
        st.n,
        plan.count,
        plan.step,
        plan.queried.len()
    );
    let qs: Vec<Queries> = plan
        .queried
        .iter()
        .map(|&k| queries(&st.edges[..plan.end(k, m)], st.n, a.queries, k as u64))
        .collect();
    let base = baselines(&st, &plan, &qs, a);
    let mut measured = Vec::new();
    for c in configs(a)? {
        eprintln!("dyngraph query: {} on {}", c.label(), st.name);
        let points = measure(c, &st, &plan, &qs, &base, a)?;
        measured.push((c, points));
    }
    let networkx = networkx(
        &st,
        qs.last().expect("one queried snapshot"),
        base.last().expect("one baseline"),
        a,
    )?;
    let intervalised = intervalised(&st);
    Ok((
        st,
        plan,
        Results {
            configs: measured,
            base,
            networkx,
            intervalised,
        },
    ))
}

/// The fraction of the final graph's arcs that lie in intervals (runs of 2 or more
/// consecutive ids), the thesis's table 4.3.
fn intervalised(st: &Stream) -> f64 {
    let csr = Csr::from_arcs(st.n, &symmetric(&st.edges));
    let mut inside = 0u64;
    for v in 0..st.n as u32 {
        let l = csr.neighbours(v);
        for (i, &x) in l.iter().enumerate() {
            let prev = i > 0 && l[i - 1] + 1 == x;
            let next = i + 1 < l.len() && l[i + 1] == x + 1;
            inside += u64::from(prev || next);
        }
    }
    inside as f64 / csr.num_arcs().max(1) as f64
}

/// Runs networkx on the final graph through the script, if a Python is given.
fn networkx(
    st: &Stream,
    q: &Queries,
    base: &Baseline,
    a: &Args,
) -> Result<Option<Value>, BoxError> {
    let Some(py) = a
        .python
        .clone()
        .or_else(|| std::env::var_os("SPILLWAY_PYTHON").map(PathBuf::from))
    else {
        return Ok(None);
    };
    let dir = tempfile::tempdir()?;
    let write = |name: &str, pairs: &[(u32, u32)]| -> Result<PathBuf, BoxError> {
        let p = dir.path().join(name);
        let flat: Vec<u32> = pairs.iter().flat_map(|&(u, v)| [u, v]).collect();
        std::fs::write(&p, bytemuck::cast_slice::<u32, u8>(&flat))?;
        Ok(p)
    };
    let files = [
        write("edges.bin", &st.edges)?,
        write("pairs.bin", &q.pairs)?,
        write("lookups.bin", &q.lookups)?,
    ];
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench_dyngraph_queries.py");
    eprintln!("dyngraph query: networkx on the final {} graph", st.name);
    let out = std::process::Command::new(py)
        .arg(&script)
        .arg(st.n.to_string())
        .arg(q.source.to_string())
        .args(&files)
        .arg(a.reps.to_string())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    let want = &base.answers;
    if v["reached"] != json!(want.bft.reached)
        || v["common"] != json!(want.common)
        || v["hits"] != json!(want.hits)
    {
        return Err(format!("networkx answered {v}, the CSR {want:?}").into());
    }
    Ok(Some(v))
}

/// A duration in milliseconds, three significant digits or so.
fn ms(s: f64) -> String {
    let x = s * 1e3;
    if x >= 100.0 {
        format!("{x:.0} ms")
    } else if x >= 10.0 {
        format!("{x:.1} ms")
    } else {
        format!("{x:.3} ms")
    }
}

/// The largest of `f` over the snapshots a structure reached.
fn worst(points: &[Point], base: &[Baseline], f: impl Fn(&Point, &Baseline) -> f64) -> f64 {
    points
        .iter()
        .zip(base)
        .map(|(p, b)| f(p, b))
        .fold(0.0, f64::max)
}

/// (update + queries) over (rebuild + queries on the rebuilt CSR).
fn total_ratio(p: &Point, b: &Baseline) -> f64 {
    (p.update + p.times.total()) / (b.csr.update + b.csr.times.total())
}

/// (update + BFT) over (rebuild + BFT on the rebuilt CSR): a traversal-only workload.
fn bft_total_ratio(p: &Point, b: &Baseline) -> f64 {
    (p.update + p.times.bft) / (b.csr.update + b.csr.times.bft)
}

/// BFT time over the faster of petgraph's two.
fn petgraph_ratio(p: &Point, b: &Baseline) -> f64 {
    p.times.bft / b.petgraph[0].min(b.petgraph[1])
}

/// The summary table of one stream: the final snapshot, and the worst ratios over all.
fn print_summary(st: &Stream, plan: &Plan, r: &Results, a: &Args) {
    let last = r.base.last().expect("one baseline");
    println!(
        "### Dynamic graphs, queries: {} stream ({} vertices, {} stream edges, {} distinct at the end, {:.1}% of arcs in intervals)",
        st.name, st.n, st.edges.len(), last.distinct, 100.0 * r.intervalised
    );
    println!();
    println!(
        "Snapshots of |V|/200 = {} edges inserted {}, {} of {} queried; kernels: BFT of the whole graph, \
         {} intersections, {} lookups; minimum of {} runs. Times at the last snapshot; ratios: time over \
         the peer's on the same snapshot, the worst over the queried snapshots (targets: BFT/CSR <= 2, \
         BFT/petgraph < 1, (update + queries)/(rebuild + queries) < 1).",
        plan.step, if a.insert == "single" { "one at a time" } else { "as one batch" },
        plan.queried.len(), plan.count, a.queries, a.queries, a.reps
    );
    println!();
    println!("| structure | bytes/edge | update (snapshot) | BFT | intersections | lookups | BFT / CSR | BFT / petgraph | intersections / CSR | lookups / CSR | (update + queries) / (rebuild + queries) | (update + BFT) / (rebuild + BFT) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (c, points) in &r.configs {
        print_row(c, points, &r.base);
    }
    let t = &last.csr.times;
    println!(
        "| CSR rebuilt | {:.2} | {} (rebuild) | {} | {} | {} | 1 | {:.2}x | 1 | 1 | 1 | 1 |",
        last.csr.bytes_per_edge,
        ms(last.csr.update),
        ms(t.bft),
        ms(t.intersect),
        ms(t.lookup),
        petgraph_ratio(&last.csr, last)
    );
    let [g, gm] = last.petgraph;
    println!(
        "| petgraph UnGraph | - | - | {} | - | - | {:.2}x | - | - | - | - | - |",
        ms(g),
        g / t.bft
    );
    println!(
        "| petgraph UnGraphMap | - | - | {} | - | - | {:.2}x | - | - | - | - | - |",
        ms(gm),
        gm / t.bft
    );
    if let Some(v) = &r.networkx {
        let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "| networkx {} (final graph) | - | - | {} | {} | {} | {:.1}x | - | {:.1}x | {:.1}x | - | - |",
            v["version"].as_str().unwrap_or("?"), ms(f("bft_s")), ms(f("intersect_s")), ms(f("lookup_s")),
            f("bft_s") / t.bft, f("intersect_s") / t.intersect, f("lookup_s") / t.lookup
        );
    }
    println!();
}

/// One structure's row of the summary.
fn print_row(c: &Config, points: &[Point], base: &[Baseline]) {
    let Some(p) = points.last() else {
        println!("| {} | no snapshot within the time limit |", c.label());
        return;
    };
    let stopped = if points.len() < base.len() {
        format!(" (stopped after {} snapshots)", points.len())
    } else {
        String::new()
    };
    println!(
        "| {}{stopped} | {:.2} | {} | {} | {} | {} | {:.2}x | {:.2}x | {:.2}x | {:.2}x | {:.3}x | {:.3}x |",
        c.label(),
        p.bytes_per_edge,
        ms(p.update),
        ms(p.times.bft),
        ms(p.times.intersect),
        ms(p.times.lookup),
        worst(points, base, |p, b| p.times.bft / b.csr.times.bft),
        worst(points, base, petgraph_ratio),
        worst(points, base, |p, b| p.times.intersect
            / b.csr.times.intersect),
        worst(points, base, |p, b| p.times.lookup / b.csr.times.lookup),
        worst(points, base, total_ratio),
        worst(points, base, bft_total_ratio),
    );
}

/// Every queried snapshot: the rebuilt CSR, then each structure.
fn print_snapshots(r: &Results) {
    println!("| edges | structure | bytes/edge | update | BFT | intersections | lookups | BFT / CSR | BFT / petgraph | total / rebuild total |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (j, b) in r.base.iter().enumerate() {
        let t = &b.csr.times;
        println!(
            "| {} | CSR rebuilt (petgraph {} / {}) | {:.2} | {} | {} | {} | {} | 1 | {:.2}x | 1 |",
            b.edges,
            ms(b.petgraph[0]),
            ms(b.petgraph[1]),
            b.csr.bytes_per_edge,
            ms(b.csr.update),
            ms(t.bft),
            ms(t.intersect),
            ms(t.lookup),
            petgraph_ratio(&b.csr, b)
        );
        for (c, points) in &r.configs {
            if let Some(p) = points.get(j) {
                println!(
                    "| | {} | {:.2} | {} | {} | {} | {} | {:.2}x | {:.2}x | {:.3}x |",
                    c.label(),
                    p.bytes_per_edge,
                    ms(p.update),
                    ms(p.times.bft),
                    ms(p.times.intersect),
                    ms(p.times.lookup),
                    p.times.bft / t.bft,
                    petgraph_ratio(p, b),
                    total_ratio(p, b)
                );
            }
        }
    }
    println!();
}

fn point_json(p: &Point) -> Value {
    json!({
        "bytes_per_edge": p.bytes_per_edge,
        "update_s": p.update,
        "bft_s": p.times.bft,
        "intersect_s": p.times.intersect,
        "lookup_s": p.times.lookup,
    })
}

/// One stream's results as JSON.
fn stream_json(st: &Stream, plan: &Plan, r: &Results) -> Value {
    let snapshots: Vec<Value> = r
        .base
        .iter()
        .map(|b| {
            json!({
                "edges": b.edges,
                "distinct_edges": b.distinct,
                "csr_rebuilt": point_json(&b.csr),
                "petgraph_ungraph_bft_s": b.petgraph[0],
                "petgraph_ungraphmap_bft_s": b.petgraph[1],
                "bft_reached": b.answers.bft.reached,
                "bft_components": b.answers.bft.components,
                "common_neighbours": b.answers.common,
                "lookup_hits": b.answers.hits,
            })
        })
        .collect();
    let structures: Vec<Value> = r
        .configs
        .iter()
        .map(|(c, points)| {
            json!({
                "structure": c.structure.name(),
                "alpha": c.alpha,
                "snapshots": points.iter().map(point_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "graph": st.name,
        "vertices": st.n,
        "stream_edges": st.edges.len(),
        "snapshot_edges": plan.step,
        "snapshots": plan.count,
        "queried": plan.queried,
        "intervalised_arcs": r.intervalised,
        "baseline": snapshots,
        "structures": structures,
        "networkx_final": r.networkx,
    })
}

/// `dyngraph --mode query`.
pub(super) fn main(a: &Args) -> Result<(), BoxError> {
    if a.insert != "single" && a.insert != "batch" {
        return Err(format!("invalid --insert '{}' (single or batch)", a.insert).into());
    }
    let mut all = Vec::new();
    for kind in a.graphs.split(',') {
        let (st, plan, r) = run_stream(kind, a)?;
        print_summary(&st, &plan, &r, a);
        print_snapshots(&r);
        all.push(stream_json(&st, &plan, &r));
    }
    if let Some(path) = &a.json {
        let doc = json!({ "bench": "dyngraph-queries", "scale": a.scale, "edge_factor": a.edge_factor, "streams": all });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
    }
    Ok(())
}
