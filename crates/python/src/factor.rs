//! Matrix factorisation by SGD (the CLI's `run sgd`) on ratings held by Python.
//!
//! # Semantics
//! The ratings `(users[j], items[j], values[j])` are checked (ids in range, values finite) and
//! bucketed by the rank whose block of the sqrt(p) x sqrt(p) grid holds them (a stable
//! counting sort, so every bucket keeps the input's order); every rank copies its bucket into
//! storage-backed memory, each rating with its position `j`, and
//! [`RatingBlock::from_entries`] puts them in the kernel's canonical order. The run is that of
//! `spillway run sgd` on a Matrix Market file holding the same ratings in the same order.
//! The diagonal ranks hold `U` and `V` at the end; their blocks are gathered into two arrays.

use std::borrow::Cow;
use std::sync::Mutex;

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use spillway::algorithms::factor::sgd::{block_of, grid_side, sgd, RatingBlock, SgdOptions};
use spillway::algorithms::io::{entry, Entry};
use spillway::algorithms::AlgoError;
use spillway::{Comm, Rank, SbVec};

use crate::graph::Ints;
use crate::job::{self, request_error, PyConfig};

/// The ratings, checked, and which of them each rank's block holds.
struct Buckets<'a> {
    users: Cow<'a, [u32]>,
    items: Cow<'a, [u32]>,
    values: &'a [f64],
    /// Rank `r`'s ratings are `order[starts[r]..starts[r + 1]]`, in input order.
    starts: Vec<usize>,
    order: Vec<usize>,
}

impl<'a> Buckets<'a> {
    /// Checks the ratings of a `n_users` x `n_items` matrix and buckets them over a `q` x `q`
    /// grid.
    fn new(
        users: Cow<'a, [u32]>,
        items: Cow<'a, [u32]>,
        values: &'a [f64],
        (n_users, n_items): (u64, u64),
        q: usize,
    ) -> Result<Buckets<'a>, String> {
        if users.len() != items.len() || users.len() != values.len() {
            return Err(format!(
                "{} users, {} items and {} values: one of each per rating",
                users.len(),
                items.len(),
                values.len()
            ));
        }
        if let Some(j) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!("values[{j}] = {} is not finite", values[j]));
        }
        // The block of every user and every item, looked up per rating.
        let row_block: Vec<u32> = (0..n_users)
            .map(|u| block_of(n_users, q, u) as u32)
            .collect();
        let col_block: Vec<u32> = (0..n_items)
            .map(|i| block_of(n_items, q, i) as u32)
            .collect();
        let owner = |j: usize| {
            row_block[users[j] as usize] as usize * q + col_block[items[j] as usize] as usize
        };
        let mut starts = vec![0usize; q * q + 1];
        for j in 0..users.len() {
            starts[owner(j) + 1] += 1;
        }
        for r in 0..q * q {
            starts[r + 1] += starts[r];
        }
        let mut fill = starts[..q * q].to_vec();
        let mut order = vec![0usize; users.len()];
        for j in 0..users.len() {
            let at = &mut fill[owner(j)];
            order[*at] = j;
            *at += 1;
        }
        Ok(Buckets {
            users,
            items,
            values,
            starts,
            order,
        })
    }

    /// Rank `me`'s ratings as entries, in storage-backed memory.
    fn entries(&self, rank: &Rank, me: usize) -> Result<SbVec<Entry>, AlgoError> {
        let mine = &self.order[self.starts[me]..self.starts[me + 1]];
        let mut out: SbVec<Entry> = SbVec::zeroed(rank, mine.len())?;
        for (e, &j) in out.as_mut_slice().iter_mut().zip(mine) {
            *e = entry(self.users[j], self.items[j], self.values[j], j as u64);
        }
        Ok(out)
    }
}

/// `U` and `V`, filled block by block by the diagonal ranks.
struct Factors {
    u: Mutex<Vec<f64>>,
    v: Mutex<Vec<f64>>,
}

impl Factors {
    fn put(&self, at: &Mutex<Vec<f64>>, first: usize, rows: &[f64]) {
        let mut out = at.lock().unwrap_or_else(|e| e.into_inner());
        out[first..first + rows.len()].copy_from_slice(rows);
    }
}

/// `rows` x `factors` zeros, or an error naming the matrix `name` when they do not fit.
fn zeros(rows: u64, factors: usize, name: &str) -> PyResult<Vec<f64>> {
    let too_large = || {
        request_error(format!(
            "n_factors: {name} of {rows} x {factors} values does not fit in memory"
        ))
    };
    let n = usize::try_from(rows)
        .ok()
        .and_then(|r| r.checked_mul(factors))
        .ok_or_else(too_large)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| too_large())?;
    v.resize(n, 0.0);
    Ok(v)
}

/// `sgd_run(users, items, values, n_users, n_items, factors, learning_rate, regularisation,
/// max_iter, seed, config, progress)`: `U` (n_users x factors), `V` (n_items x factors) and
/// the report, which also holds `train_rmse` (the training RMSE after each iteration). The
/// ranks of `config` must be a square number.
#[pyfunction]
#[pyo3(signature = (
    users, items, values, n_users, n_items, factors, learning_rate, regularisation, max_iter,
    seed, config, progress=None
))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(crate) fn sgd_run<'py>(
    py: Python<'py>,
    users: Ints<'py>,
    items: Ints<'py>,
    values: PyReadonlyArray1<'py, f64>,
    n_users: u64,
    n_items: u64,
    factors: usize,
    learning_rate: f64,
    regularisation: f64,
    max_iter: usize,
    seed: u64,
    config: PyConfig,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<(
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyDict>,
)> {
    let config = config.config()?;
    let q = grid_side(config.ranks_total() as usize)
        .map_err(|e| request_error(format!("config.ranks: {e}")))?;
    for (n, name) in [(n_users, "users"), (n_items, "items")] {
        if n == 0 || n > 1 << 32 {
            return Err(request_error(format!(
                "shape: {n} {name}; between 1 and 2^32 are supported"
            )));
        }
    }
    let (users, items) = (users.values(), items.values());
    let values = values
        .as_slice()
        .map_err(|_| request_error("values must be contiguous"))?;
    let buckets = job::detached(py, || {
        let u = users.ids(n_users, "users")?;
        let i = items.ids(n_items, "items")?;
        Buckets::new(u, i, values, (n_users, n_items), q)
    })
    .map_err(request_error)?;
    let options = SgdOptions {
        factors,
        learning_rate,
        regularisation,
        iterations: max_iter,
        seed,
        error_every: 1,
    };
    let out = Factors {
        u: Mutex::new(zeros(n_users, factors, "U")?),
        v: Mutex::new(zeros(n_items, factors, "V")?),
    };
    let total = values.len() as u64;
    let (results, stats) = job::run(py, &config, progress.as_ref(), |rank, reporter| {
        let world = Comm::world(rank);
        let mine = buckets.entries(rank, world.rank())?;
        let block = RatingBlock::from_entries(&world, n_users, n_items, mine, total)?;
        let diagonal = block.bi == block.bj;
        let result = sgd(&world, block, &options, &mut |p| reporter.report(rank, p))?;
        if diagonal {
            out.put(&out.u, result.u_lo as usize * factors, &result.u);
            out.put(&out.v, result.v_lo as usize * factors, &result.v);
        }
        Ok((result.train_rmse, result.iteration_times))
    })?;
    drop(buckets);
    let rmse = results.first().map(|r| r.0.clone()).unwrap_or_default();
    let times: Vec<_> = results.iter().map(|r| r.1.clone()).collect();
    let report = job::stats(py, &stats, rmse.len(), &job::slowest(&times))?;
    report.set_item("train_rmse", rmse)?;
    let into = |m: Mutex<Vec<f64>>| m.into_inner().unwrap_or_else(|e| e.into_inner());
    let u = PyArray1::from_vec(py, into(out.u)).reshape([n_users as usize, factors])?;
    let v = PyArray1::from_vec(py, into(out.v)).reshape([n_items as usize, factors])?;
    Ok((u, v, report))
}
