//! Choosing the predictor of a grid by trying the candidates on a sample of it.
//!
//! Small grids are tried whole; larger ones on sample boxes spread over the grid (about
//! 2.5% of the points). Each candidate codes the same boxes and the smallest total wins. The
//! candidates: cubic interpolation with the slowest or the fastest axis refined first, with
//! one bound for all levels or tighter coarse levels, linear interpolation, and Lorenzo.

use rayon::prelude::*;

use super::super::encodings::IdPredictor;
use super::super::float::Sample;
use super::quant::Bound;
use super::traverse::{InterpSettings, Shape};
use super::{default_interp, encode_block, Settings};

/// Grids up to this many points are tried whole.
const WHOLE: usize = 1 << 18;
/// Edge of the sample boxes per number of axes: large enough that the coarse levels of the
/// interpolation (anchors every 128 points in 2-D, 32 in 3-D) cost what they cost on the
/// whole grid, not more.
const BOX_EDGE: [usize; 4] = [0, 1 << 18, 512, 64];
/// Fraction of the points sampled (at least one box).
const SAMPLE: f64 = 0.025;

/// The sample: boxes copied out of the grid, with their shapes. The boxes sit at
/// low-discrepancy positions (the fractional parts of multiples of irrational steps), so a few
/// of them cover the grid evenly along every axis.
fn sample<T: Sample>(data: &[T], dims: &[usize]) -> Vec<(Vec<T>, Shape)> {
    let n = data.len();
    if n <= WHOLE {
        return vec![(data.to_vec(), Shape::new(dims))];
    }
    let axes = dims.len();
    let edge = BOX_EDGE[axes];
    let bdims: Vec<usize> = dims.iter().map(|&d| d.min(edge)).collect();
    let shape = Shape::new(&bdims);
    let box_points = shape.points();
    let count = ((n as f64 * SAMPLE) / box_points as f64).round().max(1.0) as usize;
    let full = Shape::new(dims);
    // Steps: the golden ratio and two roots, as in additive recurrence sequences.
    const STEP: [f64; 3] = [
        0.618_033_988_749_895,
        0.414_213_562_373_095,
        0.732_050_807_568_877,
    ];
    (0..count)
        .map(|i| {
            let mut o = [0usize; 3];
            for a in 0..axes {
                let room = dims[a] - bdims[a];
                let f = ((i as f64 + 0.5) * STEP[a]).fract();
                o[a] = (f * room as f64) as usize;
            }
            let e = shape.ext;
            let mut buf = Vec::with_capacity(box_points);
            for z in 0..e[2] {
                for y in 0..e[1] {
                    let row = (o[1] + y) * full.stride[1] + (o[2] + z) * full.stride[2] + o[0];
                    buf.extend_from_slice(&data[row..row + e[0]]);
                }
            }
            (buf, shape)
        })
        .collect()
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
    let sets = candidates(dims.len(), bound.lattice);
    // Every (candidate, box) pair is one task; the smallest total wins, the first on ties.
    let sizes: Vec<usize> = (0..sets.len() * boxes.len())
        .into_par_iter()
        .map(|i| {
            let (set, (d, s)) = (&sets[i / boxes.len()], &boxes[i % boxes.len()]);
            let b = encode_block(d, s, set, bound);
            b.coded.len() + b.bits.len() + b.outliers.len()
        })
        .collect();
    let total = |c: usize| -> usize { sizes[c * boxes.len()..(c + 1) * boxes.len()].iter().sum() };
    let best = (0..sets.len())
        .min_by_key(|&c| (total(c), c))
        .expect("at least one candidate");
    sets[best]
}
