//! Error-bounded compression of float arrays: the CLI's `compress` and `decompress`, on
//! arrays instead of files. The bytes are the same self-describing file the CLI writes.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use spillway_structures::compress::{
    compress, decompress, read_header, CompressError, Decoded, Grid, HeaderGrid, Method, Options,
    Values,
};

use crate::job::{self, request_error};

/// Float arrays as numpy hands them over.
#[derive(FromPyObject)]
pub(crate) enum Floats<'py> {
    /// `float32`.
    F32(PyReadonlyArray1<'py, f32>),
    /// `float64`.
    F64(PyReadonlyArray1<'py, f64>),
}

fn compress_error(e: CompressError) -> PyErr {
    if e.is_bad_input() {
        request_error(e.to_string())
    } else {
        Python::attach(|py| {
            py.import("spillway.errors")
                .and_then(|m| m.getattr("JobFailed"))
                .and_then(|c| c.call1((e.to_string(),)))
                .map_or_else(|err| err, PyErr::from_value)
        })
    }
}

/// An error reading the compressed buffer given as the argument `name`: the message starts
/// with the argument's name (`buf: not a spillway compressed file (bad magic bytes)`).
fn buffer_error(name: &str, e: CompressError) -> PyErr {
    if e.is_bad_input() {
        request_error(format!("{name}: {e}"))
    } else {
        compress_error(e)
    }
}

/// `compress_values(values, dims, epsilon, method)`: the values (1-D, C order) of a grid with
/// extents `dims` (fastest axis first), every value restored within `epsilon`.
#[pyfunction]
pub(crate) fn compress_values<'py>(
    py: Python<'py>,
    values: Floats<'py>,
    dims: Vec<usize>,
    epsilon: f64,
    method: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let method = Method::from_name(method)
        .ok_or_else(|| request_error(format!("method: unknown method '{method}'")))?;
    let options = Options::new(epsilon, method);
    let grid = Grid::structured(&dims);
    let not_contiguous = || request_error("values must be contiguous");
    let packed = match &values {
        Floats::F32(a) => {
            let v = a.as_slice().map_err(|_| not_contiguous())?;
            job::detached(py, || compress(Values::F32(v), &grid, &options))
        }
        Floats::F64(a) => {
            let v = a.as_slice().map_err(|_| not_contiguous())?;
            job::detached(py, || compress(Values::F64(v), &grid, &options))
        }
    }
    .map_err(compress_error)?;
    Ok(PyBytes::new(py, &packed.bytes))
}

/// `decompress_values(buf)`: `(values, dims, epsilon)` with the values 1-D (float32 or float64
/// as compressed) and `dims` the grid's extents, fastest axis first. Errors name `buf`.
#[pyfunction]
pub(crate) fn decompress_values<'py>(
    py: Python<'py>,
    buf: &[u8],
) -> PyResult<(Bound<'py, PyAny>, Vec<usize>, f64)> {
    let (header, decoded) =
        job::detached(py, || decompress(buf, None)).map_err(|e| buffer_error("buf", e))?;
    let dims = match header.grid {
        HeaderGrid::Structured(d) => d,
        HeaderGrid::Unstructured { .. } => {
            return Err(request_error(
                "buf: holds values of an unstructured grid; only arrays are supported",
            ))
        }
    };
    let values = match decoded {
        Decoded::F32(v) => PyArray1::from_vec(py, v).into_any(),
        Decoded::F64(v) => PyArray1::from_vec(py, v).into_any(),
    };
    Ok((values, dims, header.epsilon))
}

/// `header_of(buf)`: `(dtype, dims, epsilon, method)` from a compressed buffer's header.
/// Errors name `buf`.
#[pyfunction]
pub(crate) fn header_of(buf: &[u8]) -> PyResult<(String, Vec<usize>, f64, String)> {
    let h = read_header(buf).map_err(|e| buffer_error("buf", e))?;
    let dims = match h.grid {
        HeaderGrid::Structured(d) => d,
        HeaderGrid::Unstructured { .. } => Vec::new(),
    };
    Ok((
        h.dtype.name().to_string(),
        dims,
        h.epsilon,
        h.method.name().to_string(),
    ))
}
