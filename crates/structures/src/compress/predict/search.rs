//! Choosing the predictor of a grid by trying the candidates on a sample of it.
//!
//! Small grids are tried whole; larger ones on sample boxes spread over the grid (about 3%
//! of the points). Each candidate codes the same boxes and the smallest total wins. The
//! candidates: cubic interpolation with the slowest or the fastest axis refined first, with
//! one bound for all levels or tighter coarse levels, linear interpolation, and Lorenzo.

use super::super::encodings::IdPredictor;
use super::super::float::Sample;
use super::quant::Bound;
use super::traverse::{InterpSettings, Shape};
use super::{default_interp, encode_block, Settings};

/// Grids up to this many points are tried whole.
const WHOLE: usize = 1 << 18;
/// Edge of the sample boxes per number of axes.
const BOX_EDGE: [usize; 4] = [0, 1 << 16, 128, 32];
/// Fraction of the points sampled.
const SAMPLE: f64 = 0.03;

/// The sample: boxes copied out of the grid, with their shapes.
fn sample<T: Sample>(data: &[T], dims: &[usize]) -> Vec<(Vec<T>, Shape)> {
    let n = data.len();
    if n <= WHOLE {
        return vec![(data.to_vec(), Shape::new(dims))];
    }
    let axes = dims.len();
    let edge = BOX_EDGE[axes];
    let bdims: Vec<usize> = dims.iter().map(|&d| d.min(edge)).collect();
    let box_points: usize = bdims.iter().product();
    let want = ((n as f64 * SAMPLE) / box_points as f64).ceil().max(1.0) as usize;
    // Box origins on a regular lattice of the grid, `per` along each axis.
    let per = (want as f64).powf(1.0 / axes as f64).ceil().max(1.0) as usize;
    let full = Shape::new(dims);
    let mut out = Vec::new();
    let origin = |i: usize, a: usize| {
        let room = dims[a] - bdims[a];
        if per <= 1 {
            room / 2
        } else {
            room * i / (per - 1)
        }
    };
    let mut idx = vec![0usize; axes];
    'outer: loop {
        let o: Vec<usize> = (0..axes).map(|a| origin(idx[a], a)).collect();
        let mut buf = Vec::with_capacity(box_points);
        let e = Shape::new(&bdims).ext;
        let o3 = [o[0], *o.get(1).unwrap_or(&0), *o.get(2).unwrap_or(&0)];
        for z in 0..e[2] {
            for y in 0..e[1] {
                let row = (o3[1] + y) * full.stride[1] + (o3[2] + z) * full.stride[2] + o3[0];
                buf.extend_from_slice(&data[row..row + e[0]]);
            }
        }
        out.push((buf, Shape::new(&bdims)));
        for i in idx.iter_mut() {
            *i += 1;
            if *i < per {
                continue 'outer;
            }
            *i = 0;
        }
        break;
    }
    out
}

/// The candidates for a grid of `axes` axes.
pub(crate) fn candidates(axes: usize, lattice: bool) -> Vec<Settings> {
    let base = default_interp(axes);
    let interp = |it: InterpSettings| Settings {
        predictor: IdPredictor::Interpolation,
        interp: it,
        lattice,
    };
    let mut out = vec![
        interp(base),
        interp(InterpSettings {
            order: [0, 1, 2],
            ..base
        }),
        interp(InterpSettings {
            cubic: false,
            ..base
        }),
    ];
    if !lattice {
        out.push(interp(InterpSettings {
            alpha: 1.25,
            beta: 2.0,
            ..base
        }));
    }
    out.push(Settings {
        predictor: IdPredictor::Lorenzo,
        interp: base,
        lattice,
    });
    out
}

/// The settings that code the sample of `data` smallest.
pub(crate) fn choose<T: Sample>(data: &[T], dims: &[usize], bound: &Bound) -> Settings {
    let boxes = sample(data, dims);
    let mut best: Option<(usize, Settings)> = None;
    for set in candidates(dims.len(), bound.lattice) {
        let size: usize = boxes
            .iter()
            .map(|(d, s)| {
                let b = encode_block(d, s, &set, bound);
                b.coded.len() + b.bits.len() + b.outliers.len()
            })
            .sum();
        if best.as_ref().is_none_or(|(b, _)| size < *b) {
            best = Some((size, set));
        }
    }
    best.expect("at least one candidate").1
}
