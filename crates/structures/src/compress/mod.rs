//! Epsilon-bounded lossy compression of values on grids.
//!
//! # Summary
//! [`compress`] stores a grid of values so that [`decompress`] restores every value within
//! `epsilon` of the original. Two families of methods ([`Method`]):
//! - [`Method::Predict`] (the default): every value is predicted from values already decoded
//!   (multilevel cubic interpolation as in SZ3, or Lorenzo), the residual is quantised in bins
//!   of `2 epsilon` and the bin numbers are entropy coded (static rANS under a context model).
//!   Grids are cut into slabs coded in parallel. Smallest and fastest on smooth fields.
//! - The decompositions of thesis chapter 3: the values are replaced by a few representative
//!   values, each standing for a set of points whose values lie within `epsilon` of it, and
//!   the file stores which set each point belongs to. SBD1 and SBD2 cut the points sorted by
//!   value into runs; RBD1, RBD2 and RBD3 grow connected regions of the grid and store only
//!   their boundaries and seeds.
//!
//! The result is a self-describing file ([`read_header`]) that needs no other input to
//! decompress, except the graph of an unstructured grid for the region methods.
//!
//! # Semantics
//! - The bound: every decompressed value `x'` and its original `x` satisfy
//!   `|x - x'| <= epsilon` in exact arithmetic, with `x'` in the output type (the input's
//!   type) and `epsilon` the `f64` given. Decoded values are checked as the encoder produces
//!   them, after rounding to the output type, so the bound also holds for any floating-point
//!   check of it. [`check_bound`] verifies it exactly.
//! - Non-finite values: [`Method::Predict`] keeps NaN and infinities bit for bit (stored
//!   verbatim, like any value quantisation cannot serve); the decompositions reject them.
//! - Set rule ([`SetRule`], decompositions): `Ball` (default) lets a set hold values up to
//!   `2 epsilon` apart and stores a value within `epsilon` of all of them (near the midpoint);
//!   `Range` is the thesis's definition, sets of range at most `epsilon` stored as their mean.
//!   Both meet the same bound; `Ball` needs about half as many sets.
//! - Sets are numbered in value order, so neighbouring points of a smooth field get equal or
//!   adjacent ids; SQE ([`Encoding::Sqe`]) stores the ids, optionally as residuals of a
//!   prediction from coded neighbours ([`IdPredictor`]), DE ([`Encoding::De`]) stores the
//!   point lists of the sets as gaps. A zstd stage compresses every stream.
//! - Rejected input: `epsilon` not finite or not above zero, a value count that differs from
//!   the grid's point count; for the decompositions also NaN or infinite values.
//! - Format versions: the decompositions write version 1, [`Method::Predict`] version 2; this
//!   build reads both and refuses any other with [`CompressError::UnsupportedVersion`].
//!
//! # Cost
//! [`Method::Predict`]: one pass over the grid each way, O(1) work per point, in parallel over
//! slabs of about a million points. Decompositions: sorting is an LSD radix sort (O(n) per key
//! byte that varies); SBD1 is then O(n); SBD2 O(n + k log n) for k sets; the region methods
//! O(n + m) for m grid edges; the zstd stage dominates at high levels.
//!
//! # Errors
//! [`CompressError`], which tells bad input (non-finite values, bad epsilon, a corrupt,
//! truncated or foreign file, a missing or different graph) from internal failures.

mod container;
mod encodings;
mod error;
mod float;
mod grid;
mod predict;
mod rbd;
mod sbd;
mod sort;
mod types;
mod values;

pub use encodings::IdPredictor;
pub use error::CompressError;
pub use grid::{Grid, PointGraph};
pub use types::{
    Compressed, Decoded, Dtype, Encoding, Header, HeaderGrid, Method, Options, SectionSize,
    SetRule, Values, DEFAULT_LEVEL, LATTICE_MIN_VALUES, SEARCH_CANDIDATES,
};

use types::SEARCH_LEVEL;

use float::Sample;

/// Compresses `values` on `grid` under `options`.
///
/// # Errors
/// [`CompressError::InvalidEpsilon`], [`CompressError::NonFinite`] (the first bad value),
/// [`CompressError::ShapeMismatch`], [`CompressError::TooManyPoints`].
///
/// # Example
/// ```
/// use spillway_structures::compress::{compress, decompress, check_bound, Grid, Method, Options, Values};
///
/// let field: Vec<f64> = (0..64 * 64).map(|p| ((p % 64) as f64 * 0.1).sin()).collect();
/// let grid = Grid::structured(&[64, 64]);
/// let packed = compress(Values::F64(&field), &grid, &Options::new(1e-3, Method::Sbd1))?;
/// assert!(packed.ratio() < 0.2);
/// let (_, restored) = decompress(&packed.bytes, None)?;
/// assert!(check_bound(Values::F64(&field), &restored, 1e-3).is_ok());
/// # Ok::<(), spillway_structures::compress::CompressError>(())
/// ```
pub fn compress(
    values: Values<'_>,
    grid: &Grid,
    options: &Options,
) -> Result<Compressed, CompressError> {
    if options.method == Method::Predict {
        return predict::compress(values, grid, options);
    }
    if options.search && !options.method.is_region_based() && options.encoding == Encoding::Sqe {
        let mut best: Option<(usize, Options)> = None;
        for (predictor, relaxed, set_radius) in SEARCH_CANDIDATES {
            let mut trial = options.clone();
            trial.search = false;
            trial.predictor = predictor;
            trial.relaxed = relaxed;
            trial.set_radius = set_radius;
            trial.level = options.level.min(SEARCH_LEVEL);
            let size = compress(values, grid, &trial)?.bytes.len();
            if best.as_ref().is_none_or(|(b, _)| size < *b) {
                trial.level = options.level;
                best = Some((size, trial));
            }
        }
        let (_, chosen) = best.expect("at least one candidate");
        return compress(values, grid, &chosen);
    }
    match values {
        Values::F32(v) => compress_typed(v, grid, options, 4),
        Values::F64(v) => compress_typed(v, grid, options, 8),
    }
}

/// Checks what every method needs of its input: a valid epsilon (returned) and as many
/// values (`n`) as the grid has points.
pub(crate) fn check_input(n: usize, grid: &Grid, options: &Options) -> Result<f64, CompressError> {
    let eps = options.epsilon;
    float::check_epsilon(eps).map_err(|_| CompressError::InvalidEpsilon(eps))?;
    let points = grid.checked_points().unwrap_or(usize::MAX);
    if points != n {
        return Err(CompressError::ShapeMismatch {
            grid_points: points,
            values: n,
        });
    }
    Ok(eps)
}

fn compress_typed<T: Sample>(
    data: &[T],
    grid: &Grid,
    options: &Options,
    dtype_code: u8,
) -> Result<Compressed, CompressError> {
    let eps = check_input(data.len(), grid, options)?;
    let n = data.len();
    if n >= u32::MAX as usize {
        return Err(CompressError::TooManyPoints(n));
    }
    if let Some(index) = data.iter().position(|v| !v.is_finite_value()) {
        return Err(CompressError::NonFinite {
            index,
            value: data[index].to_f64(),
        });
    }
    if !(options.set_radius > 0.0 && options.set_radius <= 1.0) {
        return Err(CompressError::InvalidOption(format!(
            "set radius must be in (0, 1], got {}",
            options.set_radius
        )));
    }
    // The bound the decomposition is built for: never above eps, never zero (a product that
    // underflows becomes the smallest subnormal).
    let set_eps = (eps * options.set_radius).max(f64::from_bits(1)).min(eps);
    // For a lattice table the sets leave room between their extent and the bound for a
    // lattice point. That costs a few per cent more sets, which only pays off when the table
    // is large: below LATTICE_MIN_VALUES values it stays raw.
    let lattice_eps = values::lattice_step(eps)
        .filter(|_| options.lattice)
        .map(|h| set_eps.min(eps - h).max(f64::from_bits(1)));
    let sorted = sort::sort_by_value(data);
    let rule = options.set_rule;
    let predictor = encodings::effective_predictor(grid, options.predictor);
    let mut header = container::RawHeader {
        dtype: dtype_code,
        method: options.method.code(),
        encoding: 0,
        predictor: predictor.code(),
        rule: rule.code(),
        axes: 0,
        epsilon: eps,
        n: n as u64,
        shape: [1; 3],
        k: 0,
        t: 0,
    };
    match grid {
        Grid::Structured(d) => {
            header.axes = d.len() as u8;
            for (i, &e) in d.iter().enumerate() {
                header.shape[i] = e as u64;
            }
        }
        Grid::Unstructured(g) => {
            header.shape = [g.num_edges() as u64, g.fingerprint(), 0];
        }
    }
    let mut names: Vec<&'static str> = vec!["values"];
    let mut streams: Vec<Vec<u8>> = Vec::new();
    let (mut boundary_points, mut seeds) = (0, 0);
    let value_bytes: Vec<u8>;
    let (k, table): (usize, Vec<T>) = match options.method {
        Method::Sbd1 | Method::Sbd2 => {
            let decompose = |e: f64| {
                if options.method == Method::Sbd1 {
                    sbd::sbd1::<T>(&sorted, e, rule)
                } else {
                    sbd::sbd2::<T>(&sorted, e, rule)
                }
            };
            let mut sets = decompose(set_eps);
            let mut lattice = None;
            if let Some(le) = lattice_eps.filter(|_| sets.reps.len() >= LATTICE_MIN_VALUES) {
                let mut narrower = decompose(le);
                let ids = &narrower.ids;
                lattice = values::snap(data, |p| ids[p] as usize, &mut narrower.reps, eps);
                if lattice.is_some() {
                    sets = narrower;
                }
            }
            drop(sorted);
            let k = sets.reps.len();
            value_bytes = values::encode(&sets.reps, lattice.as_ref());
            match options.encoding {
                Encoding::Sqe => {
                    header.encoding = 1;
                    names.push("ids");
                    streams.push(if options.relaxed {
                        encodings::encode_sqe_relaxed(
                            data,
                            &mut sets.ids,
                            &sets.reps,
                            eps,
                            grid,
                            predictor,
                        )
                    } else {
                        encodings::encode_sqe(&sets.ids, grid, predictor)
                    });
                }
                Encoding::De => {
                    header.encoding = 2;
                    let (sizes, gaps) = encodings::encode_de(&sets.ids, k);
                    names.extend(["set sizes", "point gaps"]);
                    streams.push(sizes);
                    streams.push(gaps);
                }
            }
            (k, sets.reps)
        }
        Method::Rbd1 | Method::Rbd2 | Method::Rbd3 => {
            header.encoding = 3;
            let decompose = |e: f64| match options.method {
                Method::Rbd1 => rbd::rbd1::<T>(data, grid, &sorted, e, rule),
                Method::Rbd2 => {
                    let sets = sbd::sbd1::<T>(&sorted, e, rule);
                    rbd::rbd2::<T>(grid, &sets)
                }
                _ => rbd::rbd3::<T>(data, grid, &sorted, e, rule),
            };
            let mut regions = decompose(set_eps);
            let mut lattice = None;
            if let Some(le) = lattice_eps.filter(|_| regions.values.len() >= LATTICE_MIN_VALUES) {
                let mut narrower = decompose(le);
                let (region, value_of) = (&narrower.region, &narrower.value_of);
                lattice = values::snap(
                    data,
                    |p| value_of[region[p] as usize] as usize,
                    &mut narrower.values,
                    eps,
                );
                if lattice.is_some() {
                    regions = narrower;
                }
            }
            drop(sorted);
            value_bytes = values::encode(&regions.values, lattice.as_ref());
            let s = rbd::encode_regions(grid, &regions.region, &regions.value_of);
            boundary_points = s.stored_boundary;
            seeds = s.stored_seeds;
            names.extend([
                "region values",
                "seeds per region",
                "boundary per region",
                "seeds",
                "boundary points",
            ]);
            streams.extend([s.value_of, s.n_seeds, s.n_boundary, s.seeds, s.boundary]);
            (regions.value_of.len(), regions.values)
        }
        Method::Predict => unreachable!("compress hands the predictive method over"),
    };
    header.k = k as u64;
    header.t = table.len() as u64;
    let mut all: Vec<&[u8]> = vec![&value_bytes];
    all.extend(streams.iter().map(Vec::as_slice));
    let (bytes, stored) = container::write(&header, &all, options.level)?;
    let sections = names
        .iter()
        .zip(all.iter())
        .zip(stored)
        .map(|((&name, raw), stored)| SectionSize {
            name,
            raw: raw.len(),
            stored,
        })
        .collect();
    Ok(Compressed {
        bytes,
        original_bytes: n * T::BYTES,
        sets: k,
        values: table.len(),
        boundary_points,
        seeds,
        sections,
        predictor,
        relaxed: options.relaxed,
        set_radius: options.set_radius,
    })
}

fn corrupt(reason: impl Into<String>) -> CompressError {
    CompressError::Corrupt(reason.into())
}

/// Reads and checks the header of a compressed file (magic, version, checksum, fields).
///
/// # Errors
/// [`CompressError::NotCompressed`], [`CompressError::UnsupportedVersion`],
/// [`CompressError::Truncated`], [`CompressError::ChecksumMismatch`],
/// [`CompressError::Corrupt`].
pub fn read_header(bytes: &[u8]) -> Result<Header, CompressError> {
    if container::check(bytes)? == predict::format::VERSION {
        return predict::read_header(bytes);
    }
    let raw = container::read_header(bytes)?;
    header_of(&raw)
}

fn header_of(raw: &container::RawHeader) -> Result<Header, CompressError> {
    let dtype = match raw.dtype {
        4 => Dtype::F32,
        8 => Dtype::F64,
        d => return Err(corrupt(format!("unknown dtype code {d}"))),
    };
    let method = Method::from_code(raw.method)
        .filter(|&m| m != Method::Predict)
        .ok_or_else(|| corrupt(format!("unknown method {}", raw.method)))?;
    let encoding = match (raw.encoding, method.is_region_based()) {
        (1, false) => Some(Encoding::Sqe),
        (2, false) => Some(Encoding::De),
        (3, true) => None,
        (e, _) => {
            return Err(corrupt(format!(
                "encoding {e} does not go with method {}",
                method.name()
            )))
        }
    };
    let predictor = IdPredictor::from_code(raw.predictor)
        .ok_or_else(|| corrupt(format!("unknown id predictor {}", raw.predictor)))?;
    let set_rule = match raw.rule {
        1 => SetRule::Ball,
        2 => SetRule::Range,
        r => return Err(corrupt(format!("unknown set rule {r}"))),
    };
    if float::check_epsilon(raw.epsilon).is_err() {
        return Err(corrupt(format!("epsilon {} is not valid", raw.epsilon)));
    }
    let grid = match raw.axes {
        0 => {
            if matches!(predictor, IdPredictor::Lorenzo | IdPredictor::Interpolation) {
                return Err(corrupt(
                    "a structured-grid predictor on an unstructured grid",
                ));
            }
            HeaderGrid::Unstructured {
                edges: raw.shape[0],
                fingerprint: raw.shape[1],
            }
        }
        a @ 1..=3 => {
            let dims: Vec<u64> = raw.shape[..a as usize].to_vec();
            if raw.shape[a as usize..].iter().any(|&e| e != 1) {
                return Err(corrupt("extents beyond the grid's axes"));
            }
            let total = dims
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| corrupt("grid extents overflow"))?;
            if dims.contains(&0) || total != raw.n {
                return Err(corrupt(format!(
                    "grid extents {dims:?} do not hold {} points",
                    raw.n
                )));
            }
            HeaderGrid::Structured(dims.iter().map(|&d| d as usize).collect())
        }
        a => return Err(corrupt(format!("{a} grid axes"))),
    };
    if raw.n >= u64::from(u32::MAX) {
        return Err(corrupt(format!("{} points", raw.n)));
    }
    if raw.k > raw.n || raw.t > raw.n || (raw.n > 0 && raw.k == 0) {
        return Err(corrupt(format!(
            "{} sets and {} values for {} points",
            raw.k, raw.t, raw.n
        )));
    }
    if encoding.is_some() && raw.k != raw.t {
        return Err(corrupt("set count differs from value count"));
    }
    Ok(Header {
        dtype,
        method,
        encoding,
        predictor,
        set_rule,
        epsilon: raw.epsilon,
        points: raw.n,
        grid,
        sets: raw.k,
        values: raw.t,
    })
}

/// Decompresses a file written by [`compress`]. `graph` is needed (and checked) only for a
/// region method on an unstructured grid.
///
/// # Errors
/// Everything [`read_header`] reports, [`CompressError::GraphRequired`],
/// [`CompressError::GraphMismatch`], and [`CompressError::Corrupt`] for inconsistent
/// content. Never panics on any input.
pub fn decompress(
    bytes: &[u8],
    graph: Option<&PointGraph>,
) -> Result<(Header, Decoded), CompressError> {
    if container::check(bytes)? == predict::format::VERSION {
        return predict::decompress(bytes);
    }
    let raw = container::read_header(bytes)?;
    let header = header_of(&raw)?;
    let n = header.points as usize;
    let k = header.sets as usize;
    let t = header.values as usize;
    let grid = match &header.grid {
        HeaderGrid::Structured(d) => Grid::Structured(d.clone()),
        HeaderGrid::Unstructured { edges, fingerprint } => match graph {
            Some(g) => {
                if g.num_points() != n || g.num_edges() as u64 != *edges {
                    return Err(CompressError::GraphMismatch(format!(
                        "the file has {n} points and {edges} edges, the graph {} and {}",
                        g.num_points(),
                        g.num_edges()
                    )));
                }
                if g.fingerprint() != *fingerprint {
                    return Err(CompressError::GraphMismatch(
                        "same size, different edges".into(),
                    ));
                }
                Grid::Unstructured(std::sync::Arc::new(g.clone()))
            }
            None if header.method.is_region_based() => return Err(CompressError::GraphRequired),
            // The set methods never look at neighbours off a structured grid.
            None => Grid::Structured(vec![n]),
        },
    };
    let vsize = header.dtype.size() as u64;
    let (nn, kk) = (n as u64, k as u64);
    // The value table: a mode byte, then raw values or a varint exponent and varints.
    let table_limit = 11 + t as u64 * vsize.max(10);
    let limits: Vec<u64> = match header.encoding {
        Some(Encoding::Sqe) => vec![table_limit, nn * 10],
        Some(Encoding::De) => vec![table_limit, kk * 10, nn * 10],
        None => vec![table_limit, kk * 10, kk * 10, kk * 10, nn * 10, nn * 10],
    };
    let sections = container::read_sections(bytes, &limits)?;
    let ids = match header.encoding {
        Some(Encoding::Sqe) => {
            if (sections[1].len() as u64) < nn {
                return Err(corrupt("the id stream is shorter than one byte per point"));
            }
            encodings::decode_sqe(&sections[1], &grid, header.predictor, n, k)
        }
        Some(Encoding::De) => encodings::decode_de(&sections[1], &sections[2], n, k),
        None => rbd::decode_regions(
            &grid,
            n,
            k,
            t,
            &sections[2],
            &sections[3],
            &sections[4],
            &sections[5],
            &sections[1],
        ),
    }
    .map_err(CompressError::Corrupt)?;
    let decoded = match header.dtype {
        Dtype::F32 => Decoded::F32(expand(
            &values::decode::<f32>(&sections[0], t).map_err(CompressError::Corrupt)?,
            &ids,
        )),
        Dtype::F64 => Decoded::F64(expand(
            &values::decode::<f64>(&sections[0], t).map_err(CompressError::Corrupt)?,
            &ids,
        )),
    };
    Ok((header, decoded))
}

/// The value of every point from the table and the value index of every point (each
/// checked below the table's length by the decoders).
fn expand<T: Sample>(table: &[T], ids: &[u32]) -> Vec<T> {
    ids.iter().map(|&i| table[i as usize]).collect()
}

/// A point where the bound does not hold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundViolation {
    /// Index of the point (the first violation, or `usize::MAX` for a length mismatch).
    pub index: usize,
    /// Original value.
    pub original: f64,
    /// Decompressed value.
    pub decoded: f64,
}

/// Checks `|original - decoded| <= epsilon` exactly at every point and returns the largest
/// error (as rounded `f64`). A non-finite original (NaN, an infinity) must come back bit for
/// bit, as [`Method::Predict`] keeps it; it adds nothing to the largest error.
///
/// # Errors
/// The first point that breaks the bound (or a length or type mismatch, reported with index
/// `usize::MAX`).
pub fn check_bound(
    original: Values<'_>,
    decoded: &Decoded,
    epsilon: f64,
) -> Result<f64, BoundViolation> {
    fn run<T: Sample>(a: &[T], b: &[T], eps: f64) -> Result<f64, BoundViolation> {
        if a.len() != b.len() {
            return Err(BoundViolation {
                index: usize::MAX,
                original: a.len() as f64,
                decoded: b.len() as f64,
            });
        }
        let mut max: f64 = 0.0;
        for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
            let (x, y) = (x.to_f64(), y.to_f64());
            if !x.is_finite() && x.to_bits() == y.to_bits() {
                continue;
            }
            if !(x.is_finite() && y.is_finite() && float::within(x, y, eps)) {
                return Err(BoundViolation {
                    index: i,
                    original: x,
                    decoded: y,
                });
            }
            max = max.max((x - y).abs());
        }
        Ok(max)
    }
    match (original, decoded) {
        (Values::F32(a), Decoded::F32(b)) => run(a, b, epsilon),
        (Values::F64(a), Decoded::F64(b)) => run(a, b, epsilon),
        _ => Err(BoundViolation {
            index: usize::MAX,
            original: f64::NAN,
            decoded: f64::NAN,
        }),
    }
}
