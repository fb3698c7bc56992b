//! The graph calls: PageRank, connected components and greedy colouring, on a graph held by
//! Python (CSR arrays or `(src, dst)` pairs) or on an edge-list file read out of core.
//!
//! # Semantics
//! An in-memory graph is checked (offsets non-decreasing from 0 to the edge count, every id
//! in `0..n`), then every rank copies its block of rows into storage-backed memory: blocks
//! of consecutive rows balanced by edges plus [`ROW_WEIGHT`] per row, as `load_graph` balances
//! a file. A file goes through the algorithms' own readers (`load_graph`, `load_edge_list`),
//! in bounded chunks under the memory budget.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use spillway::algorithms::graph::cc_direct::{components, load_edge_list, EdgeList};
use spillway::algorithms::graph::colour::{colour, Order};
use spillway::algorithms::graph::pagerank::{pagerank, PageRankOptions};
use spillway::algorithms::graph::{load_graph, DistGraph, GraphSource, ROW_WEIGHT};
use spillway::algorithms::AlgoError;
use spillway::{Collectives, Comm, Rank, SbVec};

use crate::job::{self, request_error, PyConfig};

/// Integer arrays as numpy hands them over: `int32` or `int64`.
#[derive(FromPyObject)]
pub(crate) enum Ints<'py> {
    /// 32-bit ids.
    I32(PyReadonlyArray1<'py, i32>),
    /// 64-bit ids.
    I64(PyReadonlyArray1<'py, i64>),
}

impl Ints<'_> {
    /// The values, borrowed (a contiguous array) or copied.
    pub(crate) fn values(&self) -> IntSlice<'_> {
        match self {
            Ints::I32(a) => IntSlice::I32(a.as_slice().map_or_else(
                |_| Cow::Owned(a.as_array().iter().copied().collect()),
                Cow::Borrowed,
            )),
            Ints::I64(a) => IntSlice::I64(a.as_slice().map_or_else(
                |_| Cow::Owned(a.as_array().iter().copied().collect()),
                Cow::Borrowed,
            )),
        }
    }
}

/// A slice of `int32` or `int64` values.
pub(crate) enum IntSlice<'a> {
    I32(Cow<'a, [i32]>),
    I64(Cow<'a, [i64]>),
}

impl IntSlice<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            IntSlice::I32(v) => v.len(),
            IntSlice::I64(v) => v.len(),
        }
    }

    /// The ids as `u32`, each checked to be in `0..n`; `name` names the argument in the
    /// message. An `int32` array of valid ids is borrowed as it is.
    ///
    /// The check is one pass without an early exit (a negative id, as `u64`, is above any
    /// `n`), so that it vectorises, and for `int64` ids the same pass converts them; only a
    /// failed check looks for the first bad id. (On 3.9M ids this took the check of `int32`
    /// ids from 2.5 to 0.4 ms and the conversion of `int64` ids from 4.4 to 2.1 ms, in cache.)
    pub(crate) fn ids(&self, n: u64, name: &str) -> Result<Cow<'_, [u32]>, String> {
        let bad = |i: usize, v: i64| format!("{name}[{i}] = {v} is not a vertex id in 0..{n}");
        let out_of_range = |x: i64| x as u64 >= n;
        match self {
            IntSlice::I32(v) => {
                let any = v.iter().fold(false, |b, &x| b | out_of_range(i64::from(x)));
                if any {
                    let i = v.iter().position(|&x| out_of_range(i64::from(x)));
                    let i = i.unwrap_or_default();
                    return Err(bad(i, i64::from(v[i])));
                }
                Ok(Cow::Borrowed(bytemuck::cast_slice(v.as_ref())))
            }
            IntSlice::I64(v) => {
                let mut any = false;
                let ids: Vec<u32> = v
                    .iter()
                    .map(|&x| {
                        any |= out_of_range(x);
                        x as u32
                    })
                    .collect();
                if any {
                    let i = v.iter().position(|&x| out_of_range(x)).unwrap_or_default();
                    return Err(bad(i, v[i]));
                }
                Ok(Cow::Owned(ids))
            }
        }
    }

    fn get(&self, i: usize) -> i64 {
        match self {
            IntSlice::I32(v) => i64::from(v[i]),
            IntSlice::I64(v) => v[i],
        }
    }
}

/// A graph held in memory, as compressed sparse rows: row `u`'s targets are
/// `targets[offsets[u]..offsets[u + 1]]`.
pub(crate) struct Csr<'a> {
    pub(crate) n: u64,
    pub(crate) offsets: Vec<u64>,
    pub(crate) targets: Cow<'a, [u32]>,
}

/// The most vertices the kernels' 32-bit ids hold.
const MAX_VERTICES: u64 = 1 << 32;

fn check_n(n: u64) -> Result<(), String> {
    if n == 0 {
        return Err("the graph has no vertices (n = 0)".into());
    }
    if n > MAX_VERTICES {
        return Err(format!(
            "n = {n}: at most {MAX_VERTICES} vertices (32-bit ids)"
        ));
    }
    Ok(())
}

impl<'a> Csr<'a> {
    /// A CSR graph from scipy's `indptr` and `indices`, checked.
    fn from_arrays(
        n: u64,
        indptr: &IntSlice<'_>,
        indices: &'a IntSlice<'a>,
    ) -> Result<Self, String> {
        check_n(n)?;
        if indptr.len() as u64 != n + 1 {
            return Err(format!(
                "indptr has {} entries; a graph of {n} vertices needs {}",
                indptr.len(),
                n + 1
            ));
        }
        let m = indices.len() as u64;
        let mut offsets = Vec::with_capacity(indptr.len());
        let mut last = 0i64;
        for i in 0..indptr.len() {
            let v = indptr.get(i);
            if v < last || (i == 0 && v != 0) || v as u64 > m {
                return Err(format!(
                    "indptr[{i}] = {v}: offsets must rise from 0 to the number of edges ({m})"
                ));
            }
            last = v;
            offsets.push(v as u64);
        }
        if last as u64 != m {
            return Err(format!("indptr ends at {last}, but there are {m} indices"));
        }
        let targets = indices.ids(n, "indices")?;
        Ok(Csr {
            n,
            offsets,
            targets,
        })
    }

    /// A CSR graph from edges `src[i] -> dst[i]` (a counting sort by source, stable).
    fn from_pairs(n: u64, src: &IntSlice<'_>, dst: &IntSlice<'_>) -> Result<Csr<'static>, String> {
        check_n(n)?;
        if src.len() != dst.len() {
            return Err(format!(
                "src has {} ids and dst {}: they must have the same length",
                src.len(),
                dst.len()
            ));
        }
        let s = src.ids(n, "src")?;
        let d = dst.ids(n, "dst")?;
        let mut offsets = vec![0u64; n as usize + 1];
        for &u in s.iter() {
            offsets[u as usize + 1] += 1;
        }
        for i in 0..n as usize {
            offsets[i + 1] += offsets[i];
        }
        let mut fill: Vec<u64> = offsets[..n as usize].to_vec();
        let mut targets = vec![0u32; s.len()];
        for (&u, &v) in s.iter().zip(d.iter()) {
            let at = &mut fill[u as usize];
            targets[*at as usize] = v;
            *at += 1;
        }
        Ok(Csr {
            n,
            offsets,
            targets: Cow::Owned(targets),
        })
    }

    /// Row boundaries over `p` ranks, balanced by edges plus [`ROW_WEIGHT`] per row.
    fn bounds(&self, p: usize) -> Vec<u64> {
        let n = self.n;
        let cost = |r: u64| self.offsets[r as usize] + ROW_WEIGHT * r;
        let total = cost(n);
        let mut bounds = vec![0u64; p + 1];
        bounds[p] = n;
        for (q, b) in bounds.iter_mut().enumerate().take(p).skip(1) {
            let target = (u128::from(total) * q as u128 / p as u128) as u64;
            // The first row whose prefix cost reaches the target.
            let (mut lo, mut hi) = (0u64, n);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if cost(mid) < target {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            *b = lo;
        }
        bounds
    }

    /// Rank `me`'s rows (`bounds`) in storage-backed memory.
    fn part(&self, rank: &Rank, bounds: &Arc<Vec<u64>>, me: usize) -> Result<DistGraph, AlgoError> {
        let (lo, hi) = (bounds[me], bounds[me + 1]);
        let rows = &self.offsets[lo as usize..=hi as usize];
        let first = rows[0];
        let mut offsets: SbVec<u64> = SbVec::zeroed(rank, rows.len())?;
        for (o, &r) in offsets.as_mut_slice().iter_mut().zip(rows) {
            *o = r - first;
        }
        let targets = SbVec::from_slice(
            rank,
            &self.targets[first as usize..rows[rows.len() - 1] as usize],
        )?;
        Ok(DistGraph {
            n: self.n,
            total_edges: self.targets.len() as u64,
            bounds: bounds.clone(),
            lo,
            hi,
            offsets,
            targets,
        })
    }
}

/// A graph argument from Python: `("csr", indptr, indices, n)`, `("pairs", src, dst, n)` or
/// `("file", path)`.
pub(crate) enum GraphArg<'py> {
    Csr(Ints<'py>, Ints<'py>, u64),
    Pairs(Ints<'py>, Ints<'py>, u64),
    File(PathBuf),
}

impl<'py> FromPyObject<'_, 'py> for GraphArg<'py> {
    type Error = PyErr;

    fn extract(ob: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let kind: String = ob.get_item(0)?.extract()?;
        match kind.as_str() {
            "csr" => Ok(GraphArg::Csr(
                ob.get_item(1)?.extract()?,
                ob.get_item(2)?.extract()?,
                ob.get_item(3)?.extract()?,
            )),
            "pairs" => Ok(GraphArg::Pairs(
                ob.get_item(1)?.extract()?,
                ob.get_item(2)?.extract()?,
                ob.get_item(3)?.extract()?,
            )),
            "file" => Ok(GraphArg::File(ob.get_item(1)?.extract()?)),
            other => Err(request_error(format!("unknown graph kind '{other}'"))),
        }
    }
}

/// Where a job's graph comes from.
enum Source<'a> {
    Memory(Csr<'a>),
    File(PathBuf),
}

/// Runs `f` with the graph of `arg` made ready (checked, or named), with the GIL released.
fn with_source<'py, T: Send>(
    py: Python<'py>,
    arg: &GraphArg<'py>,
    f: impl FnOnce(Source<'_>) -> PyResult<T>,
) -> PyResult<T> {
    match arg {
        GraphArg::Csr(indptr, indices, n) => {
            let (indptr, indices) = (indptr.values(), indices.values());
            let csr = job::detached(py, || Csr::from_arrays(*n, &indptr, &indices))
                .map_err(request_error)?;
            f(Source::Memory(csr))
        }
        GraphArg::Pairs(src, dst, n) => {
            let (src, dst) = (src.values(), dst.values());
            let csr =
                job::detached(py, || Csr::from_pairs(*n, &src, &dst)).map_err(request_error)?;
            f(Source::Memory(csr))
        }
        GraphArg::File(path) => f(Source::File(path.clone())),
    }
}

/// This rank's rows of the job's graph.
fn rows_of(
    source: &Source<'_>,
    bounds: Option<&Arc<Vec<u64>>>,
    rank: &Rank,
    world: &Comm,
) -> Result<DistGraph, AlgoError> {
    match (source, bounds) {
        (Source::Memory(csr), Some(b)) => csr.part(rank, b, world.rank()),
        (Source::File(path), _) => load_graph(world, &GraphSource::from_path(path)),
        (Source::Memory(_), None) => unreachable!("bounds are made for a graph in memory"),
    }
}

/// Values of every rank's block of vertices, gathered into one vector of `n` as the ranks
/// finish.
struct Gathered<T> {
    out: Mutex<Vec<T>>,
}

impl<T: Copy + Default> Gathered<T> {
    fn new() -> Self {
        Gathered {
            out: Mutex::new(Vec::new()),
        }
    }

    fn put(&self, n: u64, lo: u64, values: &[T]) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if out.len() as u64 != n {
            out.resize(n as usize, T::default());
        }
        out[lo as usize..lo as usize + values.len()].copy_from_slice(values);
    }

    fn take(self) -> Vec<T> {
        self.out.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// `pagerank(graph, alpha, tol, max_iter, config, progress)`: the ranks (float64, one per
/// vertex), the iterations performed, the last L1 change and the run's report. `tol` is
/// networkx's: stop when the L1 change falls below `N * tol` (0: run `max_iter` iterations).
#[pyfunction]
#[pyo3(signature = (graph, alpha, tol, max_iter, config, progress=None))]
#[allow(clippy::type_complexity)]
pub(crate) fn pagerank_run<'py>(
    py: Python<'py>,
    graph: GraphArg<'py>,
    alpha: f64,
    tol: f64,
    max_iter: usize,
    config: PyConfig,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyArray1<f64>>, usize, f64, Bound<'py, PyDict>)> {
    let config = config.config()?;
    let p = config.ranks_total() as usize;
    let (ranks, results, stats) = with_source(py, &graph, |source| {
        let bounds = match &source {
            Source::Memory(csr) => Some(Arc::new(csr.bounds(p))),
            Source::File(_) => None,
        };
        let gathered = Gathered::new();
        let (results, stats) = job::run(py, &config, progress.as_ref(), |rank, reporter| {
            let world = Comm::world(rank);
            let graph = rows_of(&source, bounds.as_ref(), rank, &world)?;
            let options = PageRankOptions {
                iterations: max_iter,
                tolerance: tol * graph.n as f64,
                damping: alpha,
            };
            let result = pagerank(&world, &graph, &options, &mut |p| reporter.report(rank, p))?;
            gathered.put(graph.n, result.lo, result.ranks.as_slice());
            Ok((result.iterations, result.delta, result.iteration_times))
        })?;
        Ok((gathered.take(), results, stats))
    })?;
    let times: Vec<_> = results.iter().map(|r| r.2.clone()).collect();
    let (iterations, delta) = results.first().map_or((0, 0.0), |r| (r.0, r.1));
    let report = job::stats(py, &stats, iterations, &job::slowest(&times))?;
    Ok((PyArray1::from_vec(py, ranks), iterations, delta, report))
}

/// `connected_components(graph, config)`: the number of components and each vertex's
/// component, numbered by smallest vertex (scipy's numbering); vertices in no edge are
/// components of their own.
#[pyfunction]
#[pyo3(signature = (graph, config))]
pub(crate) fn components_run<'py>(
    py: Python<'py>,
    graph: GraphArg<'py>,
    config: PyConfig,
) -> PyResult<(u64, Bound<'py, PyArray1<i32>>, Bound<'py, PyDict>)> {
    let config = config.config()?;
    let (labels, n, stats) = with_source(py, &graph, |source| {
        let gathered = Gathered::new();
        let n_given = match &source {
            Source::Memory(csr) => Some(csr.n),
            Source::File(_) => None,
        };
        let (ns, stats) = job::run(py, &config, None, |rank, _| {
            let world = Comm::world(rank);
            let edges = match &source {
                Source::Memory(csr) => edges_of(csr, rank, &world)?,
                Source::File(path) => load_edge_list(&world, path)?,
            };
            let cc = components(&world, &edges)?;
            gathered.put(edges.n, cc.lo, cc.labels.as_slice());
            Ok(edges.n)
        })?;
        let n = n_given.unwrap_or_else(|| ns.first().copied().unwrap_or(0));
        Ok((gathered.take(), n, stats))
    })?;
    let (count, numbered) = job::detached(py, || number_components(&labels, n));
    let report = job::stats(py, &stats, 1, &[])?;
    Ok((count, PyArray1::from_vec(py, numbered), report))
}

/// Component numbers from the kernel's labels (the smallest vertex of each component, or
/// `u32::MAX` for a vertex in no edge): components in the order of their smallest vertex.
fn number_components(labels: &[u32], n: u64) -> (u64, Vec<i32>) {
    let mut numbered = vec![0i32; n as usize];
    let mut count = 0u64;
    for v in 0..n as usize {
        let l = labels.get(v).copied().unwrap_or(u32::MAX);
        if l == u32::MAX || l as usize == v {
            numbered[v] = count as i32;
            count += 1;
        } else {
            numbered[v] = numbered[l as usize];
        }
    }
    (count, numbered)
}

/// Rank `me`'s share of a CSR graph's edges, as pairs in storage-backed memory: blocks of
/// rows with about the same number of edges.
fn edges_of(csr: &Csr<'_>, rank: &Rank, world: &Comm) -> Result<EdgeList, AlgoError> {
    let (p, me) = (world.size() as u64, world.rank() as u64);
    let m = csr.targets.len() as u64;
    let row_at = |e: u64| csr.offsets.partition_point(|&o| o <= e).saturating_sub(1);
    let first_row = |q: u64| {
        if q == p {
            csr.n as usize
        } else {
            row_at(m * q / p)
        }
    };
    let (lo, hi) = (first_row(me), first_row(me + 1));
    let (a, z) = (csr.offsets[lo], csr.offsets[hi]);
    let mut edges: SbVec<[u32; 2]> = SbVec::zeroed(rank, (z - a) as usize)?;
    let out = edges.as_mut_slice();
    let mut at = 0usize;
    for u in lo..hi {
        for &v in &csr.targets[csr.offsets[u] as usize..csr.offsets[u + 1] as usize] {
            out[at] = [u as u32, v];
            at += 1;
        }
    }
    // Every rank's forest covers the whole id range.
    let n = world.allreduce(&[csr.n], spillway::Max)?[0];
    Ok(EdgeList { edges, n })
}

/// `greedy_color(graph, strategy, seed, passes, config)`: each vertex's colour, and the
/// report. `strategy` is `largest_first` or `random_sequential`.
#[pyfunction]
#[pyo3(signature = (graph, strategy, seed, passes, config))]
pub(crate) fn colour_run<'py>(
    py: Python<'py>,
    graph: GraphArg<'py>,
    strategy: &str,
    seed: u64,
    passes: usize,
    config: PyConfig,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyDict>)> {
    let config = config.config()?;
    let p = config.ranks_total() as usize;
    let order = match strategy {
        "largest_first" => Order::LargestFirst,
        "random_sequential" => Order::Random { seed },
        other => {
            return Err(request_error(format!(
                "strategy: '{other}' is not one of 'largest_first', 'random_sequential'"
            )))
        }
    };
    let (colours, rounds, stats) = with_source(py, &graph, |source| {
        let bounds = match &source {
            Source::Memory(csr) => Some(Arc::new(csr.bounds(p))),
            Source::File(_) => None,
        };
        let gathered = Gathered::new();
        let (rounds, stats) = job::run(py, &config, None, |rank, _| {
            let world = Comm::world(rank);
            let graph = rows_of(&source, bounds.as_ref(), rank, &world)?;
            let result = colour(&world, &graph, order, passes, &mut |_| {})?;
            gathered.put(graph.n, result.lo, result.colours.as_slice());
            Ok((result.rounds, result.round_times))
        })?;
        Ok((gathered.take(), rounds, stats))
    })?;
    let times: Vec<_> = rounds.iter().map(|r| r.1.clone()).collect();
    let report = job::stats(
        py,
        &stats,
        rounds.first().map_or(0, |r| r.0),
        &job::slowest(&times),
    )?;
    let colours: Vec<i64> = colours.iter().map(|&c| i64::from(c)).collect();
    Ok((PyArray1::from_vec(py, colours), report))
}
