//! `spillway._native`: the extension module behind the Python package `spillway`.
//!
//! Thin by design: arrays in, arrays out. Every function checks what it is given, copies its
//! part of the data into each rank's storage-backed memory, runs the same kernels as the
//! `spillway` CLI (`spillway::algorithms`, `spillway_structures::compress`) with the GIL
//! released, and returns numpy arrays and the run's report. Ctrl-C is polled while a job runs
//! (see [`job`]). The Python layer (`python/spillway`) holds the conventions of scipy,
//! scikit-learn and networkx, the argument checks and the exception classes; it is the API,
//! these functions are its private back end.
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(missing_docs, unreachable_pub)]

use pyo3::prelude::*;

mod bsp;
mod cluster;
mod compress;
mod factor;
mod graph;
mod job;
mod text;

/// The module: one function per kernel.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(graph::pagerank_run, m)?)?;
    m.add_function(wrap_pyfunction!(graph::components_run, m)?)?;
    m.add_function(wrap_pyfunction!(graph::colour_run, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::kmeans_run, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::nearest_centres, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::spkmeans_run, m)?)?;
    m.add_function(wrap_pyfunction!(factor::sgd_run, m)?)?;
    m.add_function(wrap_pyfunction!(text::word_count_run, m)?)?;
    m.add_function(wrap_pyfunction!(compress::compress_values, m)?)?;
    m.add_function(wrap_pyfunction!(compress::decompress_values, m)?)?;
    m.add_function(wrap_pyfunction!(compress::header_of, m)?)?;
    m.add_function(wrap_pyfunction!(bsp::sort_keys, m)?)?;
    m.add_function(wrap_pyfunction!(bsp::fft_run, m)?)?;
    Ok(())
}
