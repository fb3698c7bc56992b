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
mod decode;
pub(crate) mod format;
pub(crate) mod quant;
mod strided;
pub(crate) mod traverse;

use rayon::prelude::*;

use super::encodings::IdPredictor;
use super::float::Sample;
use super::grid::Grid;
use super::types::{Compressed, Options, SectionSize};
use super::{check_input, CompressError, Values};
use coder::{activity, Code, CodeWriter, OUTLIER_Q};
use format::{BlockBytes, Fields};
use quant::{Bound, Quantizer};
use traverse::{Coder, InterpSettings, Line, Shape, Strided, StridedMut};

pub(crate) use decode::{decompress, read_header};

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

/// The encoder's work: quantise, record the codes, keep the decoded values.
struct Encode<'a, T> {
    data: &'a [T],
    codes: CodeWriter,
    outliers: Vec<u8>,
    /// Per line: predictions and codes.
    preds: Vec<f64>,
    qs: Vec<i32>,
}

impl<T: Sample> Encode<'_, T> {
    /// The slow path of a point: the full quantiser, outliers stored. Returns the code (or
    /// `OUTLIER_Q`) and writes the decoded value.
    #[inline(never)]
    fn quantize_slow(&mut self, out: &mut [T], p: usize, pred: f64, q: &Quantizer) -> i32 {
        let x = self.data[p];
        match q.quantize(x, pred) {
            (Code::Q(c), y) => {
                out[p] = y;
                c
            }
            (Code::Outlier, _) => {
                x.put_le(&mut self.outliers);
                out[p] = if x.is_finite_value() {
                    x
                } else {
                    quant::stand_in(pred)
                };
                OUTLIER_Q
            }
        }
    }
}

impl<T: Sample> Coder<T> for Encode<'_, T> {
    #[inline(always)]
    fn point(&mut self, out: &mut [T], p: usize, pred: f64, q: &Quantizer, t: usize) -> u8 {
        let code = match self.quantize_slow(out, p, pred, q) {
            OUTLIER_Q => Code::Outlier,
            c => Code::Q(c),
        };
        self.codes.put(t, code);
        activity(code)
    }

    fn line(&mut self, out: &mut [T], line: &Line, q: &Quantizer, lc: usize, up: &mut [u8]) {
        let len = line.len;
        self.preds.resize(len, 0.0);
        self.qs.resize(len, 0);
        line.predict(out, &mut self.preds[..len]);
        let data = Strided::new(self.data, line.first, line.step, len, 0);
        let mut slow = Vec::new();
        {
            let mut dst = StridedMut::new(out, line.first, line.step, len);
            for (j, (&pred, c)) in self.preds.iter().zip(self.qs.iter_mut()).enumerate() {
                // SAFETY: j < len, offset 0.
                let x = unsafe { data.at(j, 0) };
                match q.quantize_fast(x, pred) {
                    Some((code, y)) => {
                        *c = code;
                        // SAFETY: j < len.
                        unsafe { dst.set(j, y) };
                    }
                    None => slow.push(j),
                }
            }
        }
        // Outliers and values at the edge of their bin, in order (outliers are stored in
        // coding order).
        for j in slow {
            let p = line.first + j * line.step;
            self.qs[j] = self.quantize_slow(out, p, self.preds[j], q);
        }
        self.codes.put_line(lc, &self.qs[..len], up);
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
        preds: Vec::new(),
        qs: Vec::new(),
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
    let eps = check_input(data.len(), grid, options)?;
    let n = data.len();
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

mod search;

#[cfg(test)]
mod tests {
    use super::decode::decode_block;
    use super::*;
    use crate::compress::float;
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
