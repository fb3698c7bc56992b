//! Decoding of the predictive method: the version 2 header and the blocks, in parallel.

use rayon::prelude::*;

use super::super::encodings::IdPredictor;
use super::super::float::{self, Sample};
use super::super::types::{Decoded, Dtype, Header, HeaderGrid, Method};
use super::super::{CompressError, SetRule};
use super::coder::{activity, Code, CodeReader, OUTLIER};
use super::format::{self, Fields};
use super::quant::{self, Bound, Quantizer};
use super::traverse::{self, Coder, InterpSettings, Line, Shape, StridedMut};
use super::{blocks, Settings};

/// The decoder's work: read the codes, rebuild the values.
struct Decode<'a, T> {
    codes: CodeReader<'a>,
    raw: &'a [u8],
    raw_at: usize,
    short: bool,
    non_finite: Vec<(usize, T)>,
    /// Per line: symbols, codes, predictions.
    syms: Vec<u8>,
    qs: Vec<i32>,
    preds: Vec<f64>,
}

impl<T: Sample> Decode<'_, T> {
    /// The value of an outlier at `p` predicted as `pred`.
    #[inline(never)]
    fn outlier(&mut self, out: &mut [T], p: usize, pred: f64) {
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

impl<T: Sample> Coder<T> for Decode<'_, T> {
    #[inline(always)]
    fn point(&mut self, out: &mut [T], p: usize, pred: f64, q: &Quantizer, t: usize) -> u8 {
        let code = self.codes.get(t);
        match code {
            Code::Q(v) => out[p] = q.rebuild(pred, v),
            Code::Outlier => self.outlier(out, p, pred),
        }
        activity(code)
    }

    fn line(&mut self, out: &mut [T], line: &Line, q: &Quantizer, lc: usize, up: &mut [u8]) {
        let len = line.len;
        self.syms.resize(len, 0);
        self.qs.resize(len, 0);
        self.preds.resize(len, 0.0);
        let outliers = self.codes.symbols(lc, up, &mut self.syms[..len]);
        self.codes.codes(&self.syms[..len], &mut self.qs[..len]);
        line.predict(out, &mut self.preds[..len]);
        {
            let mut dst = StridedMut::new(out, line.first, line.step, len);
            q.rebuild_line(&self.preds[..len], &self.qs[..len], &mut dst);
        }
        if outliers > 0 {
            for j in 0..len {
                if self.syms[j] == OUTLIER {
                    self.outlier(out, line.first + j * line.step, self.preds[j]);
                }
            }
        }
    }
}

/// Decodes one block into `out`.
pub(crate) fn decode_block<T: Sample>(
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
        syms: Vec::new(),
        qs: Vec::new(),
        preds: Vec::new(),
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
        // Every block clears its own part of the output before decoding it, so that the
        // pages are touched in parallel rather than by one thread up front.
        let mut slices = Vec::with_capacity(shapes.len());
        let mut rest = &mut out.spare_capacity_mut()[..n];
        for s in shapes {
            let (head, tail) = rest.split_at_mut(s.points());
            slices.push(head);
            rest = tail;
        }
        assert!(rest.is_empty(), "the blocks cover the grid");
        slices
            .into_par_iter()
            .zip(shapes.par_iter().zip(streams.par_iter()))
            .try_for_each(|(o, (s, &st))| {
                for x in o.iter_mut() {
                    x.write(T::round_from(0.0));
                }
                // SAFETY: every element of `o` was just initialised, and `MaybeUninit<T>`
                // has the layout of `T`.
                let o = unsafe { &mut *(o as *mut [std::mem::MaybeUninit<T>] as *mut [T]) };
                decode_block(o, s, set, bound, st)
            })
            .map_err(CompressError::Corrupt)?;
        // SAFETY: the capacity is at least `n`, and the blocks, which cover the first `n`
        // elements (asserted above), initialised all of them.
        unsafe { out.set_len(n) };
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
