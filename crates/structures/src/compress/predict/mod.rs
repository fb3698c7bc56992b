//! The predictive method ([`Method::Predict`](super::Method::Predict)): prediction from
//! already decoded neighbours, quantisation of the residual, rANS coding.
//!
//! Every value is predicted from values the decoder already has (multilevel cubic
//! interpolation, or Lorenzo: [`traverse`]), the difference is quantised in bins of about
//! `2 e` (`e <= epsilon`: [`quant`]), and the bin number is coded with static rANS under a
//! small context model ([`coder`]). The decoder repeats the predictions on the values it rebuilt, so only
//! the bin numbers are stored. A smooth field at a loose bound costs a fraction of a bit per
//! point: the decoded field follows the interpolant, and the interpolant of a smooth field
//! rarely misses by more than a bin.
//!
//! The grid is cut into slabs along its slowest axis ([`format`]), coded independently and in
//! parallel (rayon); grids below a million points are one slab.
//!
//! # Semantics
//! - The bound `|x - x'| <= epsilon` holds exactly at every finite point ([`quant`]).
//! - Non-finite values (NaN, infinities) are stored verbatim and come back bit for bit; their
//!   neighbours are predicted as if the point held its prediction.
//! - Values that quantisation cannot serve (a residual beyond `2^30` bins, or an `epsilon`
//!   below the spacing of the floats around the value) are stored verbatim too.
//! - Integer-valued data with `2 epsilon < 1` is coded losslessly in lattice mode.
//!
//! # Cost
//! One pass over the grid to compress or decompress, O(1) work per point (a few tens of
//! operations); memory: the output plus one decoded slab per thread while compressing.

pub(crate) mod coder;
pub(crate) mod format;
pub(crate) mod quant;
pub(crate) mod traverse;

use rayon::prelude::*;

use super::encodings::IdPredictor;
use super::float::{self, Sample};
use super::grid::Grid;
use super::types::{Compressed, Decoded, Dtype, Header, HeaderGrid, Method, Options, SectionSize};
use super::{CompressError, SetRule, Values};
use coder::{Code, CodeReader, CodeWriter};
use format::{BlockBytes, Fields};
use quant::{Bound, Quantizer};
use traverse::{InterpSettings, Shape, Visitor};

/// Grids with fewer points than this are one block.
const BLOCK_POINTS: usize = 1 << 20;
/// Blocks are at least this many points thick along the slowest axis.
const MIN_BLOCK_EXTENT: usize = 16;

/// How a file is predicted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Settings {
    /// `Lorenzo` or `Interpolation`.
    pub(crate) predictor: IdPredictor,
    /// The interpolation's settings (also recorded for Lorenzo, unused).
    pub(crate) interp: InterpSettings,
    /// Lattice mode.
    pub(crate) lattice: bool,
}

/// The default anchor step (log2) for a grid of `axes` axes: 1-D 4096, 2-D 128, 3-D 32.
fn default_anchor(axes: usize) -> u8 {
    match axes {
        0 | 1 => 12,
        2 => 7,
        _ => 5,
    }
}

/// The interpolation settings used unless a search picks others: cubic, slowest axis first,
/// one bound for all levels.
pub(crate) fn default_interp(axes: usize) -> InterpSettings {
    InterpSettings {
        cubic: true,
        order: [2, 1, 0],
        anchor_log2: default_anchor(axes),
        alpha: 1.0,
        beta: 1.0,
    }
}

/// The extents of the grid as the predictor sees it: the structured extents, or the points
/// in order for an unstructured grid.
fn dims_of(grid: &Grid, n: usize) -> Vec<usize> {
    match grid {
        Grid::Structured(d) => d.clone(),
        Grid::Unstructured(_) => vec![n],
    }
}

/// Points per block along the slowest axis.
fn block_extent(dims: &[usize]) -> usize {
    let last = *dims.last().expect("at least one axis");
    let plane: usize = dims[..dims.len() - 1].iter().product();
    BLOCK_POINTS
        .div_ceil(plane.max(1))
        .max(MIN_BLOCK_EXTENT)
        .min(last)
        .max(1)
}

/// The shapes of the blocks (in memory order) of a grid of `dims` cut every `extent` along
/// the slowest axis.
fn blocks(dims: &[usize], extent: usize) -> Vec<Shape> {
    let last = *dims.last().expect("at least one axis");
    let mut out = Vec::with_capacity(last.div_ceil(extent));
    let mut at = 0;
    while at < last {
        let mut d = dims.to_vec();
        *d.last_mut().expect("at least one axis") = extent.min(last - at);
        out.push(Shape::new(&d));
        at += extent;
    }
    out
}

/// Whether every finite value is an integer of magnitude below 2^51.
fn integral<T: Sample>(data: &[T]) -> bool {
    data.par_chunks(1 << 16).all(|c| {
        c.iter().all(|v| {
            let x = v.to_f64();
            !x.is_finite() || (x.abs() < 2f64.powi(51) && quant::round_int(x) == x)
        })
    })
}

/// The encoder's work at a point: quantise, record the code, keep the decoded value.
struct Encode<'a, T> {
    data: &'a [T],
    codes: CodeWriter,
    outliers: Vec<u8>,
    non_finite: Vec<usize>,
}

impl<T: Sample> Visitor<T> for Encode<'_, T> {
    #[inline(always)]
    fn visit(&mut self, out: &mut [T], p: usize, pred: f64, q: &Quantizer, t: usize) -> Code {
        let x = self.data[p];
        let (code, y) = q.quantize(x, pred);
        self.codes.put(t, code);
        if code == Code::Outlier {
            x.put_le(&mut self.outliers);
            out[p] = if x.is_finite_value() {
                x
            } else {
                self.non_finite.push(p);
                quant::stand_in(pred)
            };
        } else {
            out[p] = y;
        }
        code
    }
}

/// Encodes one block.
pub(crate) fn encode_block<T: Sample>(
    data: &[T],
    shape: &Shape,
    set: &Settings,
    bound: &Bound,
) -> BlockBytes {
    let n = data.len();
    let mut out = vec![T::round_from(0.0); n];
    let mut e = Encode {
        data,
        codes: CodeWriter::new(n),
        outliers: Vec::new(),
        non_finite: Vec::new(),
    };
    match set.predictor {
        IdPredictor::Lorenzo => traverse::lorenzo_order(&mut out, shape, bound, &mut e),
        _ => traverse::interpolation(&mut out, shape, &set.interp, bound, &mut e),
    }
    let (coded, bits) = e.codes.finish();
    BlockBytes {
        coded,
        bits,
        outliers: e.outliers,
    }
}

/// The decoder's work at a point: read the code, rebuild the value.
struct Decode<'a, T> {
    codes: CodeReader<'a>,
    raw: &'a [u8],
    raw_at: usize,
    short: bool,
    non_finite: Vec<(usize, T)>,
}

impl<T: Sample> Visitor<T> for Decode<'_, T> {
    #[inline(always)]
    fn visit(&mut self, out: &mut [T], p: usize, pred: f64, q: &Quantizer, t: usize) -> Code {
        let code = self.codes.get(t);
        match code {
            Code::Q(v) => out[p] = q.rebuild(pred, v),
            Code::Outlier => {
                let x = match self.raw.get(self.raw_at..self.raw_at + T::BYTES) {
                    Some(b) => T::from_le(b),
                    None => {
                        self.short = true;
                        T::round_from(0.0)
                    }
                };
                self.raw_at += T::BYTES;
                out[p] = if x.is_finite_value() {
                    x
                } else {
                    self.non_finite.push((p, x));
                    quant::stand_in(pred)
                };
            }
        }
        code
    }
}

/// Decodes one block into `out`.
fn decode_block<T: Sample>(
    out: &mut [T],
    shape: &Shape,
    set: &Settings,
    bound: &Bound,
    (coded, low, raw): format::Streams<'_>,
) -> Result<(), String> {
    let mut d = Decode {
        codes: CodeReader::new(coded, low)?,
        raw,
        raw_at: 0,
        short: false,
        non_finite: Vec::new(),
    };
    match set.predictor {
        IdPredictor::Lorenzo => traverse::lorenzo_order(out, shape, bound, &mut d),
        _ => traverse::interpolation(out, shape, &set.interp, bound, &mut d),
    }
    if d.short || d.raw_at != raw.len() {
        return Err("the outlier values do not match the codes".into());
    }
    d.codes.finish()?;
    for (p, x) in d.non_finite {
        out[p] = x;
    }
    Ok(())
}

/// Compresses with the predictive method.
pub(crate) fn compress(
    values: Values<'_>,
    grid: &Grid,
    options: &Options,
) -> Result<Compressed, CompressError> {
    match values {
        Values::F32(v) => compress_typed(v, grid, options, 4),
        Values::F64(v) => compress_typed(v, grid, options, 8),
    }
}

fn compress_typed<T: Sample>(
    data: &[T],
    grid: &Grid,
    options: &Options,
    dtype: u8,
) -> Result<Compressed, CompressError> {
    let eps = options.epsilon;
    float::check_epsilon(eps).map_err(|_| CompressError::InvalidEpsilon(eps))?;
    let n = data.len();
    let points = grid.checked_points().unwrap_or(usize::MAX);
    if points != n {
        return Err(CompressError::ShapeMismatch {
            grid_points: points,
            values: n,
        });
    }
    if n == 0 && matches!(grid, Grid::Structured(_)) {
        return Err(CompressError::InvalidOption(
            "the grid has no points".into(),
        ));
    }
    let dims = dims_of(grid, n);
    let axes = dims.len();
    let lattice = options.lattice && 2.0 * eps < 1.0 && integral(data);
    let bound = Bound {
        eps,
        slack: quant::slack(data, eps),
        lattice,
    };
    let set = if options.search {
        search::choose(data, &dims, &bound)
    } else {
        let predictor = match options.predictor {
            IdPredictor::Interpolation | IdPredictor::Lorenzo => options.predictor,
            p => {
                return Err(CompressError::InvalidOption(format!(
                    "the predict method predicts with lorenzo or interp, not {}",
                    p.name()
                )))
            }
        };
        Settings {
            predictor,
            interp: default_interp(axes),
            lattice,
        }
    };
    let extent = if n == 0 { 1 } else { block_extent(&dims) };
    let shapes = if n == 0 {
        Vec::new()
    } else {
        blocks(&dims, extent)
    };
    let plane: usize = dims[..axes - 1].iter().product();
    let block_bytes: Vec<BlockBytes> = shapes
        .par_iter()
        .enumerate()
        .map(|(b, shape)| {
            let start = b * extent * plane;
            encode_block(&data[start..start + shape.points()], shape, &set, &bound)
        })
        .collect();
    let mut shape = [1u64; 3];
    let header_axes = match grid {
        Grid::Structured(d) => {
            for (i, &e) in d.iter().enumerate() {
                shape[i] = e as u64;
            }
            d.len() as u8
        }
        Grid::Unstructured(g) => {
            shape = [g.num_edges() as u64, g.fingerprint(), 0];
            0
        }
    };
    let it = set.interp;
    let fields = Fields {
        dtype,
        predictor: set.predictor.code(),
        flags: u8::from(set.lattice) | (u8::from(it.cubic) << 1),
        order: it.order[0] | (it.order[1] << 2) | (it.order[2] << 4),
        axes: header_axes,
        anchor_log2: it.anchor_log2,
        epsilon: eps,
        n: n as u64,
        shape,
        alpha: it.alpha,
        beta: it.beta,
        slack: bound.slack,
        block_extent: extent as u64,
    };
    let sizes = |f: fn(&BlockBytes) -> usize| block_bytes.iter().map(f).sum::<usize>();
    let sections = [
        ("codes", sizes(|b| b.coded.len())),
        ("low bits", sizes(|b| b.bits.len())),
        ("outliers", sizes(|b| b.outliers.len())),
    ]
    .into_iter()
    .map(|(name, len)| SectionSize {
        name,
        raw: len,
        stored: len,
    })
    .collect();
    let outliers = sizes(|b| b.outliers.len()) / T::BYTES;
    let bytes = format::write(&fields, &block_bytes);
    Ok(Compressed {
        bytes,
        original_bytes: n * T::BYTES,
        sets: block_bytes.len(),
        values: outliers,
        boundary_points: 0,
        seeds: 0,
        sections,
        predictor: set.predictor,
        relaxed: false,
        set_radius: 1.0,
    })
}

fn corrupt(reason: impl Into<String>) -> CompressError {
    CompressError::Corrupt(reason.into())
}

/// The settings and header of a version 2 file whose magic, version and checksum were checked.
fn parse(bytes: &[u8]) -> Result<(Header, Settings, Fields), CompressError> {
    let f = format::read_fields(bytes)?;
    let dtype = match f.dtype {
        4 => Dtype::F32,
        8 => Dtype::F64,
        d => return Err(corrupt(format!("unknown dtype code {d}"))),
    };
    let predictor = match IdPredictor::from_code(f.predictor) {
        Some(p @ (IdPredictor::Lorenzo | IdPredictor::Interpolation)) => p,
        _ => return Err(corrupt(format!("unknown predictor {}", f.predictor))),
    };
    if f.flags > 3 {
        return Err(corrupt(format!("unknown flags {:#x}", f.flags)));
    }
    let order = [f.order & 3, (f.order >> 2) & 3, (f.order >> 4) & 3];
    let mut sorted = order;
    sorted.sort_unstable();
    if sorted != [0, 1, 2] || f.order >> 6 != 0 {
        return Err(corrupt(format!(
            "axis order {:#x} is not a permutation",
            f.order
        )));
    }
    if f.anchor_log2 > 30 {
        return Err(corrupt(format!("anchor step 2^{}", f.anchor_log2)));
    }
    if float::check_epsilon(f.epsilon).is_err() {
        return Err(corrupt(format!("epsilon {} is not valid", f.epsilon)));
    }
    if f.slack.is_nan() || f.slack < 0.0 {
        return Err(corrupt(format!("slack {}", f.slack)));
    }
    if !(f.alpha >= 1.0 && f.alpha <= 16.0 && f.beta >= 1.0 && f.beta <= 1e6) {
        return Err(corrupt(format!(
            "level bounds alpha {} beta {}",
            f.alpha, f.beta
        )));
    }
    let n = f.n;
    let grid = match f.axes {
        0 => HeaderGrid::Unstructured {
            edges: f.shape[0],
            fingerprint: f.shape[1],
        },
        a @ 1..=3 => {
            let dims = &f.shape[..a as usize];
            if f.shape[a as usize..].iter().any(|&e| e != 1) {
                return Err(corrupt("extents beyond the grid's axes"));
            }
            let total = dims
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| corrupt("grid extents overflow"))?;
            if dims.contains(&0) || total != n {
                return Err(corrupt(format!(
                    "grid extents {dims:?} do not hold {n} points"
                )));
            }
            HeaderGrid::Structured(dims.iter().map(|&d| d as usize).collect())
        }
        a => return Err(corrupt(format!("{a} grid axes"))),
    };
    if usize::try_from(n).is_err() {
        return Err(corrupt(format!("{n} points")));
    }
    let header = Header {
        dtype,
        method: Method::Predict,
        encoding: None,
        predictor,
        set_rule: SetRule::Ball,
        epsilon: f.epsilon,
        points: n,
        grid,
        sets: u64::from(u32::from_le_bytes(
            bytes[84..88].try_into().expect("4 bytes"),
        )),
        values: 0,
    };
    let set = Settings {
        predictor,
        interp: InterpSettings {
            cubic: f.flags & 2 != 0,
            order,
            anchor_log2: f.anchor_log2,
            alpha: f.alpha,
            beta: f.beta,
        },
        lattice: f.flags & 1 != 0,
    };
    Ok((header, set, f))
}

/// The header of a version 2 file (magic, version and checksum checked by the caller).
pub(crate) fn read_header(bytes: &[u8]) -> Result<Header, CompressError> {
    parse(bytes).map(|(h, _, _)| h)
}

/// Decompresses a version 2 file (magic, version and checksum checked by the caller).
pub(crate) fn decompress(bytes: &[u8]) -> Result<(Header, Decoded), CompressError> {
    let (header, set, f) = parse(bytes)?;
    let n = header.points as usize;
    let dims: Vec<usize> = match &header.grid {
        HeaderGrid::Structured(d) => d.clone(),
        HeaderGrid::Unstructured { .. } => vec![n],
    };
    let streams = format::read_blocks(bytes)?;
    let extent = usize::try_from(f.block_extent).unwrap_or(usize::MAX);
    let last = *dims.last().expect("at least one axis");
    let shapes = if n == 0 {
        Vec::new()
    } else {
        if extent == 0 || extent > last {
            return Err(corrupt(format!("block extent {extent}")));
        }
        blocks(&dims, extent)
    };
    if shapes.len() != streams.len() {
        return Err(corrupt(format!(
            "{} blocks where the grid has {}",
            streams.len(),
            shapes.len()
        )));
    }
    // A grid of one value costs no bits per point (its only symbol has probability 1), so a
    // small file may stand for a huge grid, as with any compressor; the output is reserved
    // with `try_reserve` before it is written. Callers that must bound memory check
    // `Header::points` first.
    if let Some(b) = streams.iter().position(|(coded, _, _)| coded.len() < 4) {
        return Err(corrupt(format!("block {b} has no coded stream")));
    }
    fn run<T: Sample>(
        n: usize,
        shapes: &[Shape],
        streams: &[format::Streams<'_>],
        set: &Settings,
        bound: &Bound,
    ) -> Result<Vec<T>, CompressError> {
        let mut out: Vec<T> = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|_| corrupt(format!("{n} points do not fit in memory")))?;
        out.resize(n, T::round_from(0.0));
        let mut slices = Vec::with_capacity(shapes.len());
        let mut rest = out.as_mut_slice();
        for s in shapes {
            let (head, tail) = rest.split_at_mut(s.points());
            slices.push(head);
            rest = tail;
        }
        slices
            .into_par_iter()
            .zip(shapes.par_iter().zip(streams.par_iter()))
            .try_for_each(|(o, (s, &st))| decode_block(o, s, set, bound, st))
            .map_err(CompressError::Corrupt)?;
        Ok(out)
    }
    let bound = Bound {
        eps: header.epsilon,
        slack: f.slack,
        lattice: set.lattice,
    };
    let decoded = match header.dtype {
        Dtype::F32 => Decoded::F32(run::<f32>(n, &shapes, &streams, &set, &bound)?),
        Dtype::F64 => Decoded::F64(run::<f64>(n, &shapes, &streams, &set, &bound)?),
    };
    Ok((header, decoded))
}

mod search;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Encodes and decodes one block under `set` and checks every point: finite values within
    /// `eps` (exactly, and as the plain floating-point check), non-finite ones bit for bit.
    fn round_trip<T: Sample>(data: &[T], dims: &[usize], eps: f64, set: &Settings) {
        let shape = Shape::new(dims);
        let bound = Bound {
            eps,
            slack: quant::slack(data, eps),
            lattice: set.lattice,
        };
        let b = encode_block(data, &shape, set, &bound);
        let mut out = vec![T::round_from(0.0); data.len()];
        decode_block(
            &mut out,
            &shape,
            set,
            &bound,
            (&b.coded, &b.bits, &b.outliers),
        )
        .unwrap_or_else(|e| panic!("{set:?}: {e}"));
        for (i, (&x, &y)) in data.iter().zip(&out).enumerate() {
            let (x, y) = (x.to_f64(), y.to_f64());
            if x.is_finite() {
                assert!(
                    float::within(x, y, eps) && (x - y).abs() <= eps,
                    "{set:?} {dims:?} point {i}: {x:e} -> {y:e}, eps {eps:e}"
                );
            } else {
                assert!(
                    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                    "point {i}"
                );
            }
        }
    }

    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            6 => -100.0..100.0f64,
            3 => (-50i32..50).prop_map(f64::from),
            1 => Just(0.0),
            1 => Just(f64::NAN),
            1 => Just(f64::INFINITY),
            1 => any::<f64>().prop_filter("finite", |x| x.is_finite()),
            1 => (0u64..1000).prop_map(f64::from_bits),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Every predictor the search can pick, with any anchor step and axis order, on random
        /// fields (smooth plus random spikes) of 1 to 3 axes, f32 and f64.
        #[test]
        fn every_predictor_path_keeps_the_bound(
            dims in proptest::collection::vec(1usize..9, 1..4),
            spikes in proptest::collection::vec(value(), 64),
            smooth in 0.0f64..50.0,
            eps_exp in -9i32..2,
            anchor_log2 in 1u8..8,
            order in Just([0u8, 1, 2]).prop_shuffle(),
            integers in any::<bool>(),
        ) {
            let n: usize = dims.iter().product();
            let mut data: Vec<f64> = (0..n)
                .map(|p| (p as f64 * 0.37).sin() * smooth + (p / 7) as f64)
                .collect();
            for (i, s) in spikes.iter().enumerate() {
                if i * 7 % 5 == 0 {
                    data[(i * 13) % n] = *s;
                }
            }
            if integers {
                for x in &mut data {
                    *x = x.round();
                }
            }
            let eps = 10f64.powi(eps_exp) * 3.0;
            let lattice = integers && 2.0 * eps < 1.0;
            let f32s: Vec<f32> = data.iter().map(|&x| x as f32).collect();
            for mut set in search::candidates(dims.len(), lattice) {
                set.interp.anchor_log2 = anchor_log2;
                set.interp.order = order;
                round_trip(&data, &dims, eps, &set);
                round_trip(&f32s, &dims, eps, &set);
            }
        }
    }
}
