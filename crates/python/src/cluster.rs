//! K-means (dense points) and spherical K-means (sparse rows), and the nearest-centre
//! assignment of `predict`.
//!
//! # Semantics
//! The points are split over the ranks in contiguous blocks of rows and copied into
//! storage-backed memory; the initial centres come from Python (scikit-learn's `init`
//! choices are made there) and reach the kernel in memory ([`KMeansExtra::centroids`]), so
//! the kernel starts from exactly these centres.

use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use spillway::algorithms::cluster::kmeans::{
    kmeans_with, nearest, Init, KMeansExtra, KMeansOptions,
};
use spillway::algorithms::cluster::points::DistPoints;
use spillway::algorithms::cluster::spkmeans::{normalize_rows, spkmeans, SpKMeansOptions};
use spillway::algorithms::io::DistRows;
use spillway::{Comm, SbVec};

use crate::job::{self, request_error, PyConfig};

/// A C-contiguous float64 matrix as a slice and its shape.
fn matrix<'a>(a: &'a PyReadonlyArray2<'_, f64>, name: &str) -> PyResult<(&'a [f64], usize, usize)> {
    let shape = a.shape();
    let values = a
        .as_slice()
        .map_err(|_| request_error(format!("{name} must be a C-contiguous float64 array")))?;
    Ok((values, shape[0], shape[1]))
}

/// `kmeans(X, init, max_iter, tol, config, progress)`: Lloyd's K-means from the centres
/// `init` (k x d), stopping when an iteration moves no point or (with `tol`) moves the centres
/// by at most `tol` (sum of squared movements, already scaled as scikit-learn scales it);
/// returns the centres, each point's cluster, the iterations, whether it converged, the
/// inertia and the report.
#[pyfunction]
#[pyo3(signature = (x, init, max_iter, tol, config, progress=None))]
#[allow(clippy::type_complexity)]
pub(crate) fn kmeans_run<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    init: PyReadonlyArray2<'py, f64>,
    max_iter: usize,
    tol: Option<f64>,
    config: PyConfig,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<(
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<i32>>,
    usize,
    bool,
    f64,
    Bound<'py, PyDict>,
)> {
    let config = config.config()?;
    let (values, n, dim) = matrix(&x, "X")?;
    let (centres, k, cdim) = matrix(&init, "init")?;
    if cdim != dim {
        return Err(request_error(format!(
            "init has {cdim} features per centre, X has {dim}"
        )));
    }
    let options = KMeansOptions {
        k,
        max_iterations: max_iter,
        // Not used: the centres given replace it.
        init: Init::First,
    };
    let extra = KMeansExtra {
        centroids: Some(centres.to_vec()),
        tolerance: tol,
    };
    let labels = Gathered::new(n);
    let (results, stats) = job::run(py, &config, progress.as_ref(), |rank, reporter| {
        let world = Comm::world(rank);
        let (p, r) = (world.size() as u64, world.rank() as u64);
        let (first, end) = (n as u64 * r / p, n as u64 * (r + 1) / p);
        let points = DistPoints {
            dim,
            total: n as u64,
            first,
            values: SbVec::from_slice(rank, &values[first as usize * dim..end as usize * dim])?,
            more: Vec::new(),
        };
        let result = kmeans_with(&world, &points, &options, &extra, &mut |p| {
            reporter.report(rank, p)
        })?;
        labels.put(first as usize, result.assignment.as_slice());
        Ok((
            result.centroids,
            result.iterations,
            result.converged,
            result.iteration_times,
        ))
    })?;
    let labels = labels.take();
    let (centroids, iterations, converged) = results
        .first()
        .map(|r| (r.0.clone(), r.1, r.2))
        .unwrap_or_default();
    let inertia = job::detached(py, || inertia(values, &labels, &centroids, dim));
    let times: Vec<_> = results.iter().map(|r| r.3.clone()).collect();
    let report = job::stats(py, &stats, iterations, &job::slowest(&times))?;
    let centres = PyArray1::from_vec(py, centroids).reshape([k, dim])?;
    let labels: Vec<i32> = labels.iter().map(|&l| l as i32).collect();
    Ok((
        centres,
        PyArray1::from_vec(py, labels),
        iterations,
        converged,
        inertia,
        report,
    ))
}

/// The sum of squared distances of the points to their centres.
fn inertia(values: &[f64], labels: &[u32], centres: &[f64], dim: usize) -> f64 {
    values
        .chunks_exact(dim.max(1))
        .zip(labels)
        .map(|(x, &l)| {
            let c = &centres[l as usize * dim..(l as usize + 1) * dim];
            x.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum::<f64>()
        })
        .sum()
}

/// `nearest_centres(X, centres)`: the index of each point's nearest centre (squared Euclidean
/// distance, ties to the lower index; the kernel's rule) and the inertia.
#[pyfunction]
pub(crate) fn nearest_centres<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    centres: PyReadonlyArray2<'py, f64>,
) -> PyResult<(Bound<'py, PyArray1<i32>>, f64)> {
    let (values, _, dim) = matrix(&x, "X")?;
    let (c, _, cdim) = matrix(&centres, "cluster_centers_")?;
    if cdim != dim {
        return Err(request_error(format!(
            "X has {dim} features, the model was fitted on {cdim}"
        )));
    }
    let (labels, inertia) = job::detached(py, || {
        let labels: Vec<u32> = values
            .chunks_exact(dim.max(1))
            .map(|x| nearest(x, c, dim) as u32)
            .collect();
        let inertia = inertia(values, &labels, c, dim);
        (labels, inertia)
    });
    let labels: Vec<i32> = labels.iter().map(|&l| l as i32).collect();
    Ok((PyArray1::from_vec(py, labels), inertia))
}

/// `spkmeans(indptr, indices, data, n_cols, k, init_rows, max_iter, config, progress)`:
/// spherical K-means on sparse rows (CSR, float64) from the rows `init_rows` as initial
/// centroids; returns the centroids (k x n_cols, unit length), each row's cluster, the
/// iterations, whether it converged, and the report.
#[pyfunction]
#[pyo3(signature = (indptr, indices, data, n_cols, k, seed, max_iter, config, progress=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(crate) fn spkmeans_run<'py>(
    py: Python<'py>,
    indptr: PyReadonlyArray1<'py, i64>,
    indices: PyReadonlyArray1<'py, i32>,
    data: PyReadonlyArray1<'py, f64>,
    n_cols: u64,
    k: usize,
    seed: Option<u64>,
    max_iter: usize,
    config: PyConfig,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<(
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<i32>>,
    usize,
    bool,
    Bound<'py, PyDict>,
)> {
    let config = config.config()?;
    let contiguous = |name: &str| request_error(format!("{name} must be contiguous"));
    let indptr = indptr.as_slice().map_err(|_| contiguous("indptr"))?;
    let indices = indices.as_slice().map_err(|_| contiguous("indices"))?;
    let data = data.as_slice().map_err(|_| contiguous("data"))?;
    let rows = indptr.len().saturating_sub(1);
    job::detached(py, || check_rows(indptr, indices, data, n_cols)).map_err(request_error)?;
    let options = SpKMeansOptions {
        k,
        max_iterations: max_iter,
        init: match seed {
            Some(s) => Init::Random(s),
            None => Init::First,
        },
    };
    let labels = Gathered::new(rows);
    let (results, stats) = job::run(py, &config, progress.as_ref(), |rank, reporter| {
        let world = Comm::world(rank);
        let (p, r) = (world.size() as u64, world.rank() as u64);
        let (lo, hi) = (rows as u64 * r / p, rows as u64 * (r + 1) / p);
        let (a, z) = (indptr[lo as usize] as usize, indptr[hi as usize] as usize);
        let mut offsets: SbVec<u64> = SbVec::zeroed(rank, (hi - lo) as usize + 1)?;
        for (o, &v) in offsets
            .as_mut_slice()
            .iter_mut()
            .zip(&indptr[lo as usize..=hi as usize])
        {
            *o = (v as usize - a) as u64;
        }
        let mut part = DistRows {
            rows: rows as u64,
            cols: n_cols,
            total_nnz: data.len() as u64,
            lo,
            hi,
            offsets,
            colidx: SbVec::from_slice(rank, bytemuck::cast_slice(&indices[a..z]))?,
            values: SbVec::from_slice(rank, &data[a..z])?,
        };
        normalize_rows(&mut part);
        let result = spkmeans(&world, &part, &options, &mut |p| reporter.report(rank, p))?;
        labels.put(lo as usize, result.assignment.as_slice());
        Ok((
            result.centroids,
            result.iterations,
            result.converged,
            result.iteration_times,
        ))
    })?;
    let (centroids, iterations, converged) = results
        .first()
        .map(|r| (r.0.clone(), r.1, r.2))
        .unwrap_or_default();
    let times: Vec<_> = results.iter().map(|r| r.3.clone()).collect();
    let report = job::stats(py, &stats, iterations, &job::slowest(&times))?;
    let centres = PyArray1::from_vec(py, centroids).reshape([k, n_cols as usize])?;
    let labels: Vec<i32> = labels.take().iter().map(|&l| l as i32).collect();
    Ok((
        centres,
        PyArray1::from_vec(py, labels),
        iterations,
        converged,
        report,
    ))
}

/// Checks CSR rows: offsets rising from 0 to the non-zeros, columns in `0..cols` and
/// increasing within a row, finite values.
fn check_rows(indptr: &[i64], indices: &[i32], data: &[f64], cols: u64) -> Result<(), String> {
    if indptr.is_empty() || indptr[0] != 0 {
        return Err("indptr must start at 0".into());
    }
    if indices.len() != data.len() || *indptr.last().unwrap_or(&0) as usize != data.len() {
        return Err(format!(
            "indptr ends at {}, with {} indices and {} values",
            indptr.last().unwrap_or(&0),
            indices.len(),
            data.len()
        ));
    }
    for (r, w) in indptr.windows(2).enumerate() {
        if w[1] < w[0] {
            return Err(format!("indptr[{}] = {} is below indptr[{r}]", r + 1, w[1]));
        }
        let row = &indices[w[0] as usize..w[1] as usize];
        for (i, &c) in row.iter().enumerate() {
            if c < 0 || c as u64 >= cols {
                return Err(format!("row {r}: column {c} is not in 0..{cols}"));
            }
            if i > 0 && c <= row[i - 1] {
                return Err(format!(
                    "row {r}: columns must increase (sorted, no duplicates)"
                ));
            }
        }
    }
    if let Some(i) = data.iter().position(|v| !v.is_finite()) {
        return Err(format!("data[{i}] = {} is not finite", data[i]));
    }
    Ok(())
}

/// Each point's value, filled block by block as the ranks finish.
struct Gathered {
    out: std::sync::Mutex<Vec<u32>>,
}

impl Gathered {
    fn new(n: usize) -> Gathered {
        Gathered {
            out: std::sync::Mutex::new(vec![0; n]),
        }
    }

    fn put(&self, first: usize, values: &[u32]) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out[first..first + values.len()].copy_from_slice(values);
    }

    fn take(self) -> Vec<u32> {
        self.out.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}
