//! Round trips of every method and both dtypes, with the bound checked at every point by an
//! oracle independent of the library: the exact difference of two floats computed with
//! big integers, plus the plain floating-point check users run (`|x - y| <= eps` in f64).

use std::sync::Arc;

use proptest::prelude::*;

use spillway_structures::compress::{
    compress, decompress, read_header, CompressError, Decoded, Encoding, Grid, HeaderGrid,
    IdPredictor, Method, Options, PointGraph, SetRule, Values,
};

// ------------------------------------------------------------------------------------------
// The oracle: exact |x - y| <= eps on finite doubles, by big-integer arithmetic.
// ------------------------------------------------------------------------------------------

/// `(negative, mantissa, exponent)` with value `(-1)^neg * m * 2^e`, `m < 2^53`.
fn parts(x: f64) -> (bool, u64, i32) {
    let bits = x.to_bits();
    let neg = bits >> 63 == 1;
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    if exp == 0 {
        (neg, frac, -1074)
    } else {
        (neg, frac | (1u64 << 52), exp - 1075)
    }
}

/// A non-negative big integer, little-endian 32-bit limbs.
#[derive(Clone, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    /// `m * 2^shift`.
    fn shifted(m: u64, shift: u32) -> Big {
        let mut limbs = vec![0u32; (shift / 32) as usize];
        let bit = shift % 32;
        let wide = u128::from(m) << bit;
        for k in 0..4 {
            limbs.push((wide >> (32 * k)) as u32);
        }
        let mut b = Big(limbs);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn cmp(&self, o: &Big) -> std::cmp::Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len()) + 1;
        let mut out = Vec::with_capacity(n);
        let mut carry = 0u64;
        for i in 0..n {
            let s = u64::from(*self.0.get(i).unwrap_or(&0))
                + u64::from(*o.0.get(i).unwrap_or(&0))
                + carry;
            out.push(s as u32);
            carry = s >> 32;
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self - o` for `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut d = i64::from(self.0[i]) - i64::from(*o.0.get(i).unwrap_or(&0)) - borrow;
            borrow = 0;
            if d < 0 {
                d += 1 << 32;
                borrow = 1;
            }
            out.push(d as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }
}

/// Exactly `|x - y| <= eps` for finite `x`, `y` and `eps > 0`.
fn exact_within(x: f64, y: f64, eps: f64) -> bool {
    let (nx, mx, ex) = parts(x);
    let (ny, my, ey) = parts(y);
    let (_, me, ee) = parts(eps);
    let base = ex.min(ey).min(ee);
    let bx = Big::shifted(mx, (ex - base) as u32);
    let by = Big::shifted(my, (ey - base) as u32);
    let be = Big::shifted(me, (ee - base) as u32);
    // |x - y| as a magnitude.
    let diff = if nx != ny {
        bx.add(&by)
    } else if bx.cmp(&by).is_ge() {
        bx.sub(&by)
    } else {
        by.sub(&bx)
    };
    diff.cmp(&be).is_le()
}

/// Checks the bound at every point with both oracles.
fn assert_bound(original: Values<'_>, decoded: &Decoded, eps: f64, what: &str) {
    let pairs: Vec<(f64, f64)> = match (original, decoded) {
        (Values::F32(a), Decoded::F32(b)) => a
            .iter()
            .zip(b)
            .map(|(&x, &y)| (f64::from(x), f64::from(y)))
            .collect(),
        (Values::F64(a), Decoded::F64(b)) => a.iter().copied().zip(b.iter().copied()).collect(),
        _ => panic!("{what}: dtype changed"),
    };
    assert_eq!(pairs.len(), original.len(), "{what}: length");
    for (i, &(x, y)) in pairs.iter().enumerate() {
        assert!(y.is_finite(), "{what}: point {i} decoded to {y}");
        assert!(
            exact_within(x, y, eps),
            "{what}: point {i}: |{x:e} - {y:e}| > {eps:e} exactly"
        );
        assert!((x - y).abs() <= eps, "{what}: point {i}: float check");
    }
}

#[test]
fn oracle_sanity() {
    assert!(exact_within(1.0, 0.0, 1.0));
    assert!(!exact_within(1.0, -f64::from_bits(1), 1.0));
    assert!(exact_within(1.0, 2f64.powi(-60), 1.0));
    assert!(!exact_within(1e300, -1e300, 1e300));
    assert!(exact_within(-0.0, 0.0, f64::from_bits(1)));
    assert!(exact_within(f64::MAX, f64::MAX, 1e-300));
}

// ------------------------------------------------------------------------------------------
// Round trips
// ------------------------------------------------------------------------------------------

/// Every combination worth checking for a grid (structured predictors only on structured
/// grids are still accepted elsewhere: they fall back to delta).
fn configurations(eps: f64) -> Vec<Options> {
    let mut out = Vec::new();
    for method in Method::ALL {
        if method == Method::Predict {
            // The default (predictor chosen on a sample), each predictor alone, and without
            // lattice mode.
            let o = Options::new(eps, method);
            out.push(o.clone());
            for predictor in [IdPredictor::Interpolation, IdPredictor::Lorenzo] {
                let mut p = o.clone();
                p.search = false;
                p.predictor = predictor;
                out.push(p.clone());
                p.lattice = false;
                out.push(p);
            }
            continue;
        }
        for rule in [SetRule::Ball, SetRule::Range] {
            let mut o = Options::new(eps, method);
            o.set_rule = rule;
            o.level = 1;
            out.push(o.clone());
            let mut raw_values = o.clone();
            raw_values.lattice = false;
            out.push(raw_values);
            if !method.is_region_based() {
                for predictor in [
                    IdPredictor::Raw,
                    IdPredictor::Delta,
                    IdPredictor::Interpolation,
                ] {
                    let mut p = o.clone();
                    p.predictor = predictor;
                    out.push(p.clone());
                    p.relaxed = true;
                    p.set_radius = 0.25;
                    out.push(p);
                }
                let mut r = o.clone();
                r.relaxed = true;
                out.push(r);
                let mut d = o.clone();
                d.encoding = Encoding::De;
                out.push(d);
            }
        }
    }
    out
}

fn round_trip(values: Values<'_>, grid: &Grid, eps: f64, what: &str) {
    let graph = match grid {
        Grid::Unstructured(g) => Some(g.as_ref()),
        Grid::Structured(_) => None,
    };
    for o in configurations(eps) {
        let label = format!(
            "{what} {} {:?} {:?} relaxed={} r={} lattice={}",
            o.method.name(),
            o.set_rule,
            o.predictor,
            o.relaxed,
            o.set_radius,
            o.lattice
        );
        let packed = compress(values, grid, &o).unwrap_or_else(|e| panic!("{label}: {e}"));
        let (header, decoded) =
            decompress(&packed.bytes, graph).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(header.epsilon, eps);
        assert_eq!(header.points as usize, values.len());
        assert_eq!(header.dtype, values.dtype());
        assert_bound(values, &decoded, eps, &label);
    }
}

fn both_dtypes(data: &[f64], grid: &Grid, eps: f64, what: &str) {
    round_trip(Values::F64(data), grid, eps, &format!("{what} f64"));
    let f: Vec<f32> = data.iter().map(|&x| x as f32).collect();
    if f.iter().all(|x| x.is_finite()) {
        round_trip(Values::F32(&f), grid, eps, &format!("{what} f32"));
    }
}

#[test]
fn adversarial_inputs() {
    let grid = Grid::structured(&[16, 12]);
    let n = 16 * 12;
    let cases: Vec<(&str, Vec<f64>, f64)> = vec![
        ("constant", vec![3.25; n], 1e-3),
        ("zeros", vec![0.0; n], 1e-300),
        ("ramp", (0..n).map(|i| i as f64).collect(), 0.5),
        ("ramp tight", (0..n).map(|i| i as f64 * 0.1).collect(), 1e-9),
        (
            "alternating",
            (0..n)
                .map(|i| if i % 2 == 0 { -1.0 } else { 1.0 })
                .collect(),
            0.999,
        ),
        (
            "alternating exact 2eps",
            (0..n)
                .map(|i| if i % 2 == 0 { -1.0 } else { 1.0 })
                .collect(),
            1.0,
        ),
        (
            "huge dynamic range",
            (0..n)
                .map(|i| {
                    let s = if i % 3 == 0 { -1.0 } else { 1.0 };
                    s * 10f64.powi(i as i32 % 601 - 300)
                })
                .collect(),
            1e-5,
        ),
        (
            "huge range huge eps",
            (0..n)
                .map(|i| if i % 2 == 0 { 1e300 } else { -1e300 } * (i as f64 + 1.0))
                .collect(),
            1e299,
        ),
        (
            "extremes",
            (0..n)
                .map(|i| match i % 4 {
                    0 => f64::MAX,
                    1 => -f64::MAX,
                    2 => f64::MIN_POSITIVE,
                    _ => 0.0,
                })
                .collect(),
            f64::MAX,
        ),
        (
            "eps tiny relative to values",
            (0..n).map(|i| 1e6 + i as f64 * 1e-7).collect(),
            1e-12,
        ),
        (
            "subnormals",
            (0..n).map(|i| f64::from_bits(i as u64 * 3)).collect(),
            f64::from_bits(2),
        ),
        (
            "signed zeros",
            (0..n)
                .map(|i| if i % 2 == 0 { -0.0 } else { 0.0 })
                .collect(),
            1e-10,
        ),
        (
            "smooth",
            (0..n)
                .map(|i| ((i % 16) as f64 * 0.4).sin() + ((i / 16) as f64 * 0.3).cos())
                .collect(),
            1e-2,
        ),
    ];
    for (what, data, eps) in cases {
        both_dtypes(&data, &grid, eps, what);
    }
}

#[test]
fn grids_of_every_shape() {
    for dims in [
        vec![1],
        vec![37],
        vec![1, 9],
        vec![9, 1],
        vec![7, 5, 3],
        vec![2, 1, 8],
    ] {
        let n: usize = dims.iter().product();
        let data: Vec<f64> = (0..n).map(|i| ((i * 7919) % 101) as f64 / 7.0).collect();
        both_dtypes(&data, &Grid::structured(&dims), 0.3, &format!("{dims:?}"));
    }
}

/// A triangulated mesh of a w x h patch (each square split by a diagonal), points in a
/// scrambled order so that the vertex order carries no grid structure.
fn mesh(w: u32, h: u32) -> (PointGraph, Vec<u32>) {
    let n = w * h;
    let perm: Vec<u32> = (0..n).map(|i| (i * 7 + 3) % n).collect();
    let id = |x: u32, y: u32| perm[(x + w * y) as usize];
    let mut edges = Vec::new();
    for y in 0..h {
        for x in 0..w {
            if x + 1 < w {
                edges.push((id(x, y), id(x + 1, y)));
            }
            if y + 1 < h {
                edges.push((id(x, y), id(x, y + 1)));
            }
            if x + 1 < w && y + 1 < h {
                edges.push((id(x, y), id(x + 1, y + 1)));
            }
        }
    }
    (PointGraph::from_edges(n as usize, &edges).unwrap(), perm)
}

#[test]
fn unstructured_grids() {
    let (graph, perm) = mesh(13, 11);
    let mut data = vec![0.0; 13 * 11];
    for y in 0..11u32 {
        for x in 0..13u32 {
            data[perm[(x + 13 * y) as usize] as usize] =
                (x as f64 * 0.5).sin() * 4.0 + y as f64 * 0.3;
        }
    }
    let grid = Grid::Unstructured(Arc::new(graph.clone()));
    both_dtypes(&data, &grid, 0.2, "mesh");
    // Region methods need the graph back, and the same one.
    let packed = compress(Values::F64(&data), &grid, &Options::new(0.2, Method::Rbd2)).unwrap();
    assert_eq!(
        decompress(&packed.bytes, None).unwrap_err(),
        CompressError::GraphRequired
    );
    let (other, _) = mesh(11, 13);
    assert!(matches!(
        decompress(&packed.bytes, Some(&other)),
        Err(CompressError::GraphMismatch(_))
    ));
    // Set methods do not.
    let packed = compress(Values::F64(&data), &grid, &Options::new(0.2, Method::Sbd1)).unwrap();
    let (_, d) = decompress(&packed.bytes, None).unwrap();
    assert_bound(Values::F64(&data), &d, 0.2, "mesh sbd1 without graph");
}

// ------------------------------------------------------------------------------------------
// Rejected input
// ------------------------------------------------------------------------------------------

#[test]
fn non_finite_values_and_bad_epsilon_are_rejected() {
    let grid = Grid::structured(&[4]);
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let data = [1.0, 2.0, bad, 4.0];
        let e = compress(Values::F64(&data), &grid, &Options::new(0.1, Method::Sbd1)).unwrap_err();
        assert!(
            matches!(e, CompressError::NonFinite { index: 2, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("value 2"));
        let f = [1.0f32, bad as f32, 0.0, 0.0];
        let e = compress(Values::F32(&f), &grid, &Options::new(0.1, Method::Rbd2)).unwrap_err();
        assert!(
            matches!(e, CompressError::NonFinite { index: 1, .. }),
            "{e}"
        );
    }
    for eps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = compress(
            Values::F64(&[1.0; 4]),
            &grid,
            &Options::new(eps, Method::Sbd2),
        )
        .unwrap_err();
        assert!(matches!(e, CompressError::InvalidEpsilon(_)), "{e}");
    }
    let e = compress(
        Values::F64(&[1.0; 5]),
        &grid,
        &Options::new(1.0, Method::Sbd1),
    )
    .unwrap_err();
    assert!(matches!(e, CompressError::ShapeMismatch { .. }), "{e}");
}

#[test]
fn corrupt_and_truncated_files_are_rejected_without_panicking() {
    let grid = Grid::structured(&[20, 10]);
    let data: Vec<f64> = (0..200).map(|i| (i as f64 * 0.37).sin()).collect();
    for method in Method::ALL {
        let packed = compress(Values::F64(&data), &grid, &Options::new(0.05, method)).unwrap();
        let bytes = &packed.bytes;
        assert!(read_header(bytes).is_ok());
        for len in 0..bytes.len() {
            assert!(
                decompress(&bytes[..len], None).is_err(),
                "truncated to {len}"
            );
        }
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[at] ^= flip;
                assert!(decompress(&b, None).is_err(), "byte {at} ^ {flip:#x}");
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decompress(&longer, None).is_err());
    }
    assert_eq!(
        decompress(b"hello world, not compressed", None).unwrap_err(),
        CompressError::NotCompressed
    );
    let packed = compress(Values::F64(&data), &grid, &Options::new(0.05, Method::Sbd1)).unwrap();
    let mut v3 = packed.bytes.clone();
    v3[4] = 3;
    let e = decompress(&v3, None).unwrap_err();
    assert_eq!(e, CompressError::UnsupportedVersion(3));
    assert!(e.to_string().contains("version 3 is not supported"), "{e}");
}

// ------------------------------------------------------------------------------------------
// Format versions
// ------------------------------------------------------------------------------------------

/// The field the version 1 files in `tests/data` were written from (by the format 1 code,
/// before the predictive method existed): 24 x 17 points, `((i * 37) % 101) / 8 + (i / 24) / 4`,
/// epsilon 0.3; `v1_sbd1_f64.spz` with the CLI defaults of then (SBD1, ids predictor chosen by
/// search), `v1_rbd2_f32.spz` with RBD2 on the f32 values.
fn v1_field() -> Vec<f64> {
    (0..24 * 17usize)
        .map(|i| ((i * 37) % 101) as f64 / 8.0 + (i / 24) as f64 * 0.25)
        .collect()
}

#[test]
fn version_1_files_still_decode() {
    let data = v1_field();
    let f32s: Vec<f32> = data.iter().map(|&x| x as f32).collect();
    for (bytes, method, values) in [
        (
            &include_bytes!("data/v1_sbd1_f64.spz")[..],
            Method::Sbd1,
            Values::F64(&data),
        ),
        (
            &include_bytes!("data/v1_rbd2_f32.spz")[..],
            Method::Rbd2,
            Values::F32(&f32s),
        ),
    ] {
        assert_eq!(bytes[4], 1, "a version 1 file");
        let header = read_header(bytes).unwrap();
        assert_eq!(header.method, method);
        assert_eq!(header.grid, HeaderGrid::Structured(vec![24, 17]));
        assert_eq!(header.epsilon, 0.3);
        let (_, decoded) = decompress(bytes, None).unwrap();
        assert_bound(values, &decoded, 0.3, method.name());
    }
}

#[test]
fn versions_are_told_apart() {
    let data = v1_field();
    let grid = Grid::structured(&[24, 17]);
    let packed = compress(
        Values::F64(&data),
        &grid,
        &Options::new(0.3, Method::Predict),
    )
    .unwrap();
    assert_eq!(packed.bytes[4], 2, "the predictive method writes version 2");
    let header = read_header(&packed.bytes).unwrap();
    assert_eq!(header.method, Method::Predict);
    assert_eq!(header.points, 24 * 17);
    // A version 1 header naming the predictive method is refused, not misread.
    let mut v1 = include_bytes!("data/v1_sbd1_f64.spz").to_vec();
    v1[6] = 6;
    let body = v1.len() - 8;
    let sum = xxhash_rust::xxh3::xxh3_64(&v1[..body]);
    v1[body..].copy_from_slice(&sum.to_le_bytes());
    assert!(matches!(read_header(&v1), Err(CompressError::Corrupt(_))));
    // So is a version 2 file whose version byte says 1 (the checksum made consistent).
    let mut w = packed.bytes.clone();
    w[4] = 1;
    let body = w.len() - 8;
    let sum = xxhash_rust::xxh3::xxh3_64(&w[..body]);
    w[body..].copy_from_slice(&sum.to_le_bytes());
    assert!(decompress(&w, None).is_err());
}

// ------------------------------------------------------------------------------------------
// The predictive method
// ------------------------------------------------------------------------------------------

#[test]
fn predict_keeps_non_finite_values_bit_for_bit() {
    let (nx, ny) = (40, 30);
    let mut data: Vec<f64> = (0..nx * ny)
        .map(|p| ((p % nx) as f64 * 0.2).sin() * 10.0 + (p / nx) as f64 * 0.1)
        .collect();
    let nan = f64::from_bits(0x7ff8_0000_dead_beef);
    for (i, v) in [
        (0, nan),
        (5, f64::INFINITY),
        (41, f64::NEG_INFINITY),
        (1199, f64::NAN),
    ] {
        data[i] = v;
    }
    // A land mask: a block of NaN.
    for y in 10..15 {
        for x in 10..25 {
            data[x + nx * y] = f64::NAN;
        }
    }
    let grid = Grid::structured(&[nx, ny]);
    for predictor in [IdPredictor::Interpolation, IdPredictor::Lorenzo] {
        let mut o = Options::new(0.01, Method::Predict);
        o.search = false;
        o.predictor = predictor;
        let packed = compress(Values::F64(&data), &grid, &o).unwrap();
        let (_, d) = decompress(&packed.bytes, None).unwrap();
        let Decoded::F64(d) = d else { panic!("dtype") };
        let f32s: Vec<f32> = data.iter().map(|&x| x as f32).collect();
        let p32 = compress(Values::F32(&f32s), &grid, &o).unwrap();
        let (_, d32) = decompress(&p32.bytes, None).unwrap();
        let Decoded::F32(d32) = d32 else {
            panic!("dtype")
        };
        for i in 0..data.len() {
            if data[i].is_finite() {
                assert!(exact_within(data[i], d[i], 0.01), "point {i}");
                assert!(exact_within(f64::from(f32s[i]), f64::from(d32[i]), 0.01));
            } else {
                assert_eq!(d[i].to_bits(), data[i].to_bits(), "point {i}");
                assert_eq!(d32[i].to_bits(), f32s[i].to_bits(), "point {i}");
            }
        }
        // The mask costs its 75 values, not the field around it.
        assert!(packed.values <= 80, "{} outliers", packed.values);
    }
}

#[test]
fn predict_is_lossless_on_integers_below_half_a_unit() {
    let (nx, ny) = (50, 40);
    let data: Vec<f64> = (0..nx * ny)
        .map(|p| (((p % nx) as f64 * 0.3).sin() * 100.0 + (p / nx) as f64).round())
        .collect();
    let grid = Grid::structured(&[nx, ny]);
    let packed = compress(
        Values::F64(&data),
        &grid,
        &Options::new(0.2, Method::Predict),
    )
    .unwrap();
    let (_, d) = decompress(&packed.bytes, None).unwrap();
    assert_eq!(d, Decoded::F64(data.clone()));
    assert!(packed.ratio() < 0.2, "ratio {}", packed.ratio());
}

#[test]
fn predict_beats_the_set_methods_on_a_smooth_field_at_a_loose_bound() {
    // The reason the predictive method is the default: on smooth data at a loose bound its
    // reconstruction follows the field, while a set decomposition is a staircase.
    let (nx, ny) = (128, 96);
    let data: Vec<f64> = (0..nx * ny)
        .map(|p| {
            let (x, y) = ((p % nx) as f64, (p / nx) as f64);
            (x * 0.05).sin() * 50.0 + (y * 0.07).cos() * 30.0 + x * 0.1
        })
        .collect();
    let grid = Grid::structured(&[nx, ny]);
    let eps = 1.0;
    let predict = compress(
        Values::F64(&data),
        &grid,
        &Options::new(eps, Method::Predict),
    )
    .unwrap();
    let mut sbd = Options::new(eps, Method::Sbd1);
    sbd.search = true;
    let sets = compress(Values::F64(&data), &grid, &sbd).unwrap();
    assert!(
        predict.bytes.len() < sets.bytes.len(),
        "predict {} bytes, sbd1 {}",
        predict.bytes.len(),
        sets.bytes.len()
    );
    let (_, d) = decompress(&predict.bytes, None).unwrap();
    assert_bound(Values::F64(&data), &d, eps, "smooth");
}

#[test]
fn predict_cuts_large_grids_into_blocks_that_decode_alike() {
    // 2^21 points: two blocks or more, coded in parallel.
    let (nx, ny) = (1024, 2048);
    let data: Vec<f32> = (0..nx * ny)
        .map(|p| {
            let (x, y) = ((p % nx) as f32, (p / nx) as f32);
            (x * 0.01).sin() * 20.0 + (y * 0.013).cos() * 10.0
        })
        .collect();
    let grid = Grid::structured(&[nx, ny]);
    let packed = compress(
        Values::F32(&data),
        &grid,
        &Options::new(0.05, Method::Predict),
    )
    .unwrap();
    assert!(packed.sets >= 2, "{} blocks", packed.sets);
    let (_, d) = decompress(&packed.bytes, None).unwrap();
    assert_bound(Values::F32(&data), &d, 0.05, "blocks");
}

// ------------------------------------------------------------------------------------------
// Random fields
// ------------------------------------------------------------------------------------------

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -100.0..100.0f64,
        2 => (-50i32..50).prop_map(f64::from),
        1 => Just(0.0),
        1 => Just(-0.0),
        1 => any::<f64>().prop_filter("finite", |x| x.is_finite()),
        1 => (0u64..1000).prop_map(f64::from_bits),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_fields_keep_the_bound(
        nx in 1usize..12,
        ny in 1usize..9,
        seed_values in proptest::collection::vec(value(), 108),
        eps_exp in -12i32..3,
        eps_mant in 1.0f64..10.0,
    ) {
        let data: Vec<f64> = seed_values.into_iter().take(nx * ny).collect();
        let eps = eps_mant * 10f64.powi(eps_exp);
        both_dtypes(&data, &Grid::structured(&[nx, ny]), eps, "random");
    }
}

#[test]
fn search_keeps_the_smallest_candidate() {
    use spillway_structures::compress::SEARCH_CANDIDATES;
    let (nx, ny) = (40, 30);
    let data: Vec<f64> = (0..nx * ny)
        .map(|p| ((p % nx) as f64 * 0.2).sin() * 10.0 + (p / nx) as f64 * 0.1)
        .collect();
    let grid = Grid::structured(&[nx, ny]);
    for eps in [1.0, 0.01] {
        let mut o = Options::new(eps, Method::Sbd1);
        o.level = 3;
        let mut smallest = usize::MAX;
        for (predictor, relaxed, radius) in SEARCH_CANDIDATES {
            let mut c = o.clone();
            c.predictor = predictor;
            c.relaxed = relaxed;
            c.set_radius = radius;
            smallest = smallest.min(compress(Values::F64(&data), &grid, &c).unwrap().bytes.len());
        }
        o.search = true;
        let packed = compress(Values::F64(&data), &grid, &o).unwrap();
        assert_eq!(packed.bytes.len(), smallest);
        let (_, d) = decompress(&packed.bytes, None).unwrap();
        assert_bound(Values::F64(&data), &d, eps, "search");
    }
}
