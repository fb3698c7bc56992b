//! The BSP algorithms: sample sort and the FFT of Inda and Bisseling, each rank holding a
//! block (sort) or the cyclic part (FFT) of an array held by Python.

use std::sync::Mutex;

use num_complex::Complex64;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use spillway::algorithms::bsp::fft::{check_length, fft, input_index, output_index};
use spillway::algorithms::bsp::sort::sample_sort;
use spillway::bsp::{self, Memory, Options};
use spillway::{Comm, SbVec};

use crate::job::{self, algo_error, request_error, PyConfig};

/// `sort_keys(keys, config)`: the keys sorted (sample sort by regular sampling over the
/// ranks), and the report. Keys are unsigned; Python maps signed and float values onto them
/// in an order-preserving way.
#[pyfunction]
pub(crate) fn sort_keys<'py>(
    py: Python<'py>,
    keys: PyReadonlyArray1<'py, u64>,
    config: PyConfig,
) -> PyResult<(Bound<'py, PyArray1<u64>>, Bound<'py, PyDict>)> {
    let config = config.config()?;
    let keys = keys
        .as_slice()
        .map_err(|_| request_error("keys must be contiguous"))?;
    let n = keys.len();
    let (parts, stats) = job::run(py, &config, None, |rank, _| {
        let world = Comm::world(rank);
        let (p, s) = (world.size(), world.rank());
        let local = keys[s * n / p..(s + 1) * n / p].to_vec();
        bsp::hook(&world, Options::default(), |ctx| sample_sort(ctx, local))
    })?;
    let sorted: Vec<u64> = job::detached(py, || parts.concat());
    let report = job::stats(py, &stats, 1, &[])?;
    Ok((PyArray1::from_vec(py, sorted), report))
}

/// `fft_run(x, config)`: the discrete Fourier transform `X[k] = sum_j x[j] e^(-2 pi i jk/n)`
/// of a complex vector whose length is a power of two and a multiple of ranks squared.
#[pyfunction]
pub(crate) fn fft_run<'py>(
    py: Python<'py>,
    x: PyReadonlyArray1<'py, Complex64>,
    config: PyConfig,
) -> PyResult<(Bound<'py, PyArray1<Complex64>>, Bound<'py, PyDict>)> {
    let config = config.config()?;
    let x = x
        .as_slice()
        .map_err(|_| request_error("x must be contiguous"))?;
    let n = x.len();
    let p = config.ranks_total() as usize;
    check_length(n, p).map_err(|e| algo_error(&e))?;
    let out = Mutex::new(vec![Complex64::new(0.0, 0.0); n]);
    let (_, stats) = job::run(py, &config, None, |rank, _| {
        let world = Comm::world(rank);
        let s = world.rank();
        let local: Vec<Complex64> = (0..n / p).map(|j| x[input_index(p, s, j)]).collect();
        let local = if rank.mem_budget().is_some() {
            Memory::Storage(SbVec::from_slice(rank, &local)?)
        } else {
            Memory::Heap(local)
        };
        let result = bsp::hook(&world, Options::default(), |ctx| fft(ctx, n, local))?;
        let mut all = out.lock().unwrap_or_else(|e| e.into_inner());
        for (i, v) in result.as_slice().iter().enumerate() {
            all[output_index(n, p, s, i)] = *v;
        }
        Ok(())
    })?;
    let out = out.into_inner().unwrap_or_else(|e| e.into_inner());
    let report = job::stats(py, &stats, 1, &[])?;
    Ok((PyArray1::from_vec(py, out), report))
}
