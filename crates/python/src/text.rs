//! Word count over files, as the CLI's `run wordcount` counts (MapReduce with a combiner).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use spillway::algorithms::text::wordcount::{word_count, WordCountOptions};
use spillway::Comm;

use crate::job::{self, PyConfig};

/// `word_count(paths, config)`: `(words, counts, report)` with `words` a list of `bytes` (a
/// word is a maximal run of bytes that are not ASCII whitespace) and `counts` the number of
/// times each occurs in all the files together.
#[pyfunction]
#[pyo3(signature = (paths, config))]
#[allow(clippy::type_complexity)]
pub(crate) fn word_count_run<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    config: PyConfig,
) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<u64>, Bound<'py, PyDict>)> {
    let config = config.config()?;
    let options = WordCountOptions::default();
    let (results, stats) = job::run(py, &config, None, |rank, _| {
        let world = Comm::world(rank);
        let wc = word_count(&world, &paths, &options)?;
        Ok(wc.counts.gather(&wc.comm, 0)?)
    })?;
    let all = results.into_iter().flatten().next().unwrap_or_default();
    let report = job::stats(py, &stats, 1, &[])?;
    let mut words = Vec::with_capacity(all.len());
    let mut counts = Vec::with_capacity(all.len());
    for (w, c) in all {
        words.push(PyBytes::new(py, &w));
        counts.push(c);
    }
    Ok((words, counts, report))
}
