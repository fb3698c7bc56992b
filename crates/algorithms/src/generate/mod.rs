//! Deterministic synthetic inputs that do not depend on how work is split.
//!
//! Every edge and every point is a pure function of the generator's seed and
//! its global index: its random stream comes from a
//! [`Xoshiro256PlusPlus`] seeded with a SplitMix64 mix of `(seed, index)`.
//! Any partition of the index range over any number of ranks therefore
//! produces exactly the same data as generating it all in one place.

use std::ops::Range;

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use spillway_comm::splitmix::{mix64, splitmix64, GOLDEN_GAMMA};

mod ratings;
mod zipf;

pub use ratings::{RatingsSpec, RATINGS_RANK};
pub use zipf::ZipfDocsSpec;

/// Separates the streams of different uses of the same seed.
const DOMAIN_RMAT_EDGE: u64 = 0x524D_4154_4544_4745; // "RMATEDGE"
const DOMAIN_BLOB_CENTRE: u64 = 0x424C_4F42_4345_4E54; // "BLOBCENT"
const DOMAIN_BLOB_POINT: u64 = 0x424C_4F42_504F_494E; // "BLOBPOIN"

/// The random stream of item `index` of a `domain` under `seed`.
///
/// `index -> seed` is the SplitMix64 sequence started from a state derived
/// from `(seed, domain)`, so distinct indices get distinct seeds.
fn item_rng(seed: u64, domain: u64, index: u64) -> Xoshiro256PlusPlus {
    let base = splitmix64(seed ^ domain);
    let state = base.wrapping_add(index.wrapping_mul(GOLDEN_GAMMA));
    Xoshiro256PlusPlus::seed_from_u64(splitmix64(state))
}

/// Uniform `f64` in `[0, 1)` with 53 random bits.
fn unit_f64(rng: &mut Xoshiro256PlusPlus) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Uniform `f64` in `(0, 1]` (safe for `ln`).
fn unit_f64_open0(rng: &mut Xoshiro256PlusPlus) -> f64 {
    ((rng.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Uniform integer in `0..n` for `n >= 1` (multiply-high; the bias is at
/// most `n / 2^64`).
fn below(rng: &mut Xoshiro256PlusPlus, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// Splits `s` on `:` after checking the `name:` prefix.
fn spec_fields<'a>(s: &'a str, name: &str, usage: &str) -> Result<Vec<&'a str>, String> {
    let mut parts = s.split(':');
    if parts.next() != Some(name) {
        return Err(format!("expected {usage}"));
    }
    Ok(parts.collect())
}

/// Parses a decimal number field of a spec, naming it in the error.
fn parse_field<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("invalid {what} '{text}'"))
}

/// Clamps `range` to `0..len`.
fn clamp(range: Range<u64>, len: u64) -> Range<u64> {
    let end = range.end.min(len);
    range.start.min(end)..end
}

// ---------------------------------------------------------------------------
// R-MAT
// ---------------------------------------------------------------------------

/// The Graph500 R-MAT quadrant probabilities `[a, b, c, d]`.
pub const GRAPH500_ABCD: [f64; 4] = [0.57, 0.19, 0.19, 0.05];

/// An R-MAT graph with the Graph500 parameters ([`GRAPH500_ABCD`]):
/// `2^scale` vertices and `edge_factor * 2^scale` directed edges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmatSpec {
    /// log2 of the number of vertices (1..=31 when parsed).
    pub scale: u32,
    /// Edges per vertex (>= 1 when parsed).
    pub edge_factor: u32,
    /// Seed of all random choices.
    pub seed: u64,
}

/// Largest R-MAT scale: vertex ids must fit in `u32` below `u32::MAX`.
const MAX_RMAT_SCALE: u32 = 31;

impl RmatSpec {
    /// Parses `rmat:SCALE:EDGEFACTOR[:SEED]` (seed defaults to 1), with
    /// `SCALE` in `1..=31` and `EDGEFACTOR >= 1`.
    pub fn parse(s: &str) -> Result<Self, String> {
        const USAGE: &str = "rmat:SCALE:EDGEFACTOR[:SEED]";
        let fields = spec_fields(s, "rmat", USAGE)?;
        let (scale, edge_factor, seed) = match fields.as_slice() {
            [scale, ef] => (*scale, *ef, None),
            [scale, ef, seed] => (*scale, *ef, Some(*seed)),
            _ => return Err(format!("expected {USAGE}")),
        };
        let scale: u32 = parse_field(scale, "scale")?;
        if !(1..=MAX_RMAT_SCALE).contains(&scale) {
            return Err(format!("scale must be 1..={MAX_RMAT_SCALE}, got {scale}"));
        }
        let edge_factor: u32 = parse_field(edge_factor, "edge factor")?;
        if edge_factor == 0 {
            return Err("edge factor must be >= 1, got 0".into());
        }
        let seed = match seed {
            Some(seed) => parse_field(seed, "seed")?,
            None => 1,
        };
        Ok(RmatSpec {
            scale,
            edge_factor,
            seed,
        })
    }

    /// Number of vertices, `2^scale` (0 if `scale` is 64 or more).
    pub fn num_vertices(&self) -> u64 {
        1u64.checked_shl(self.scale).unwrap_or(0)
    }

    /// Number of edges, `edge_factor * 2^scale` (0 if `scale` is 64 or
    /// more).
    pub fn num_edges(&self) -> u64 {
        u64::from(self.edge_factor)
            .checked_shl(self.scale)
            .unwrap_or(0)
    }

    /// Appends the edges `(src, dst)` with global indices in `range`
    /// (clamped to `0..num_edges()`) to `out`, in index order.
    ///
    /// Each edge descends `scale` levels of the adjacency matrix from the
    /// most significant bit down, choosing at each level a quadrant with
    /// probabilities `a` (neither bit set), `b` (dst bit set), `c` (src bit
    /// set) and `d` (both set): plain R-MAT, without noise or vertex
    /// permutation. A spec with `scale > 31` (never produced by
    /// [`parse`](Self::parse)) generates nothing.
    pub fn edges(&self, range: Range<u64>, out: &mut Vec<(u32, u32)>) {
        if self.scale > MAX_RMAT_SCALE {
            return;
        }
        let range = clamp(range, self.num_edges());
        let Ok(count) = usize::try_from(range.end - range.start) else {
            return;
        };
        out.reserve(count);
        let [t_a, t_b, t_c] = quadrant_thresholds(GRAPH500_ABCD);
        // Edge `i` uses the counter values `key + (i * draws + j + 1) * GOLDEN_GAMMA` for
        // j < draws, each mixed into 64 random bits (SplitMix64 indexed by the counter): no
        // generator state is seeded per edge, and the draws of an edge are independent of
        // each other, so they overlap in the pipeline.
        let draws = u64::from(self.scale.div_ceil(LEVELS_PER_DRAW));
        let key = splitmix64(self.seed ^ DOMAIN_RMAT_EDGE);
        for index in range {
            let mut counter =
                key.wrapping_add(index.wrapping_mul(draws).wrapping_mul(GOLDEN_GAMMA));
            let (mut src, mut dst) = (0u32, 0u32);
            // Four levels per draw (16 bits each), high levels first, appended to the ids bit
            // by bit. The quadrant is chosen without branches (they are unpredictable): src
            // bit when r >= a + b, dst bit when a <= r < a + b or r >= a + b + c.
            let mut step = |bits: u64, levels: u32| {
                for q in 0..levels {
                    let r = ((bits >> (16 * q)) & 0xFFFF) as u32;
                    let s = u32::from(r >= t_b);
                    let d = (u32::from(r >= t_a) & u32::from(r < t_b)) | u32::from(r >= t_c);
                    src = (src << 1) | s;
                    dst = (dst << 1) | d;
                }
            };
            let mut left = self.scale;
            while left >= LEVELS_PER_DRAW {
                counter = counter.wrapping_add(GOLDEN_GAMMA);
                step(mix64(counter), LEVELS_PER_DRAW);
                left -= LEVELS_PER_DRAW;
            }
            if left > 0 {
                counter = counter.wrapping_add(GOLDEN_GAMMA);
                step(mix64(counter), left);
            }
            out.push((src, dst));
        }
    }
}

/// R-MAT levels decided by one 64-bit draw (16 bits each: probabilities to 1.5e-5).
const LEVELS_PER_DRAW: u32 = 4;

/// Cumulative thresholds for `a`, `a + b`, `a + b + c` on 16-bit draws.
fn quadrant_thresholds(p: [f64; 4]) -> [u32; 3] {
    let scale = (1u32 << 16) as f64;
    let t = |x: f64| (x * scale).round() as u32;
    [t(p[0]), t(p[0] + p[1]), t(p[0] + p[1] + p[2])]
}

// ---------------------------------------------------------------------------
// Gaussian blobs
// ---------------------------------------------------------------------------

/// `n` points in `d` dimensions around `k` Gaussian blobs.
///
/// The `k` centres are uniform in `[-10, 10]^d` (drawn from the seed); each
/// point picks a centre uniformly and adds independent `N(0, 1)` noise to
/// each coordinate (Box–Muller).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlobsSpec {
    /// Number of points (>= 1 when parsed).
    pub n: u64,
    /// Dimension (>= 1 when parsed).
    pub d: usize,
    /// Number of blobs (>= 1 when parsed).
    pub k: usize,
    /// Seed of all random choices.
    pub seed: u64,
}

impl BlobsSpec {
    /// Parses `blobs:N:D:K[:SEED]` (seed defaults to 1) with `N`, `D`,
    /// `K >= 1`; `K` must fit in `u32` and `K * D` in `usize`.
    pub fn parse(s: &str) -> Result<Self, String> {
        const USAGE: &str = "blobs:N:D:K[:SEED]";
        let fields = spec_fields(s, "blobs", USAGE)?;
        let (n, d, k, seed) = match fields.as_slice() {
            [n, d, k] => (*n, *d, *k, None),
            [n, d, k, seed] => (*n, *d, *k, Some(*seed)),
            _ => return Err(format!("expected {USAGE}")),
        };
        let n: u64 = parse_field(n, "number of points")?;
        if n == 0 {
            return Err("number of points must be >= 1, got 0".into());
        }
        let d: usize = parse_field(d, "dimension")?;
        if d == 0 {
            return Err("dimension must be >= 1, got 0".into());
        }
        let k: usize = parse_field(k, "number of blobs")?;
        if k == 0 {
            return Err("number of blobs must be >= 1, got 0".into());
        }
        if u32::try_from(k).is_err() {
            return Err(format!("number of blobs {k} too large (max {})", u32::MAX));
        }
        if k.checked_mul(d).is_none() {
            return Err(format!("{k} blobs of dimension {d} too large"));
        }
        let seed = match seed {
            Some(seed) => parse_field(seed, "seed")?,
            None => 1,
        };
        Ok(BlobsSpec { n, d, k, seed })
    }

    /// The `k` centres, row-major (`k * d` values), each coordinate uniform
    /// in `[-10, 10)`.
    pub fn centres(&self) -> Vec<f64> {
        let len = self.k.saturating_mul(self.d);
        let mut rng = item_rng(self.seed, DOMAIN_BLOB_CENTRE, 0);
        (0..len)
            .map(|_| -10.0 + 20.0 * unit_f64(&mut rng))
            .collect()
    }

    /// Appends the points with global indices in `range` (clamped to
    /// `0..n`) to `out`, row-major, `d` values each. A spec with `k == 0`
    /// (never produced by [`parse`](Self::parse)) generates nothing.
    pub fn points(&self, range: Range<u64>, out: &mut Vec<f64>) {
        if self.k == 0 {
            return;
        }
        let range = clamp(range, self.n);
        let centres = self.centres();
        if let Some(len) = usize::try_from(range.end - range.start)
            .ok()
            .and_then(|c| c.checked_mul(self.d))
        {
            out.reserve(len);
        }
        for index in range {
            let mut rng = item_rng(self.seed, DOMAIN_BLOB_POINT, index);
            let label = self.draw_label(&mut rng);
            let centre = &centres[label * self.d..(label + 1) * self.d];
            let mut coords = centre.iter();
            while let Some(&c0) = coords.next() {
                let (z0, z1) = box_muller(&mut rng);
                out.push(c0 + z0);
                if let Some(&c1) = coords.next() {
                    out.push(c1 + z1);
                }
            }
        }
    }

    /// Appends the blob (centre index) each point in `range` (clamped to
    /// `0..n`) was drawn from. A spec with `k == 0` generates nothing.
    pub fn labels(&self, range: Range<u64>, out: &mut Vec<u32>) {
        if self.k == 0 {
            return;
        }
        let range = clamp(range, self.n);
        for index in range {
            let mut rng = item_rng(self.seed, DOMAIN_BLOB_POINT, index);
            // k <= u32::MAX when parsed; larger k saturate rather than panic.
            let label = self.draw_label(&mut rng);
            out.push(u32::try_from(label).unwrap_or(u32::MAX));
        }
    }

    /// The first draw of a point's stream: its blob, in `0..k` (`k >= 1`).
    fn draw_label(&self, rng: &mut Xoshiro256PlusPlus) -> usize {
        // usize -> u64 is lossless on supported targets; the result is < k.
        below(rng, self.k as u64) as usize
    }
}

/// Two independent standard normal draws.
fn box_muller(rng: &mut Xoshiro256PlusPlus) -> (f64, f64) {
    let u1 = unit_f64_open0(rng);
    let u2 = unit_f64(rng);
    let radius = (-2.0 * u1.ln()).sqrt();
    let angle = std::f64::consts::TAU * u2;
    (radius * angle.cos(), radius * angle.sin())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rmat_edges(spec: &RmatSpec, range: Range<u64>) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        spec.edges(range, &mut out);
        out
    }

    #[test]
    fn rmat_parse() {
        let spec = RmatSpec::parse("rmat:10:16").expect("parse");
        assert_eq!(
            spec,
            RmatSpec {
                scale: 10,
                edge_factor: 16,
                seed: 1
            }
        );
        assert_eq!(spec.num_vertices(), 1024);
        assert_eq!(spec.num_edges(), 16 * 1024);
        let spec = RmatSpec::parse("rmat:31:4:18446744073709551615").expect("parse");
        assert_eq!(spec.seed, u64::MAX);
        assert_eq!(spec.num_vertices(), 1 << 31);
        assert_eq!(spec.num_edges(), 4 << 31);

        let usage = "expected rmat:SCALE:EDGEFACTOR[:SEED]".to_string();
        for bad in [
            "",
            "rmat",
            "rmat:10",
            "rmat:1:2:3:4",
            "blobs:1:2:3",
            "RMAT:10:16",
        ] {
            assert_eq!(RmatSpec::parse(bad), Err(usage.clone()), "{bad:?}");
        }
        assert_eq!(
            RmatSpec::parse("rmat:0:16"),
            Err("scale must be 1..=31, got 0".into())
        );
        assert_eq!(
            RmatSpec::parse("rmat:32:16"),
            Err("scale must be 1..=31, got 32".into())
        );
        assert_eq!(
            RmatSpec::parse("rmat:x:16"),
            Err("invalid scale 'x'".into())
        );
        assert_eq!(
            RmatSpec::parse("rmat:10:0"),
            Err("edge factor must be >= 1, got 0".into())
        );
        assert_eq!(
            RmatSpec::parse("rmat:10:-1"),
            Err("invalid edge factor '-1'".into())
        );
        assert_eq!(
            RmatSpec::parse("rmat:10:16:s"),
            Err("invalid seed 's'".into())
        );
    }

    #[test]
    fn rmat_is_independent_of_split() {
        let spec = RmatSpec::parse("rmat:12:4:7").expect("parse");
        let whole = rmat_edges(&spec, 0..5000);
        assert_eq!(whole.len(), 5000);
        let cuts = [0u64, 1, 2, 17, 1000, 1001, 3333, 5000];
        let mut pieces = Vec::new();
        for w in cuts.windows(2) {
            spec.edges(w[0]..w[1], &mut pieces);
        }
        assert_eq!(pieces, whole);
        // Same again (pure function), and a single edge on its own.
        assert_eq!(rmat_edges(&spec, 0..5000), whole);
        assert_eq!(rmat_edges(&spec, 4321..4322), vec![whole[4321]]);
        // Another seed gives another graph.
        let other = RmatSpec { seed: 8, ..spec };
        assert_ne!(rmat_edges(&other, 0..5000), whole);
    }

    #[test]
    fn rmat_range_is_clamped() {
        let spec = RmatSpec::parse("rmat:3:2").expect("parse");
        assert_eq!(spec.num_edges(), 16);
        assert_eq!(rmat_edges(&spec, 10..100).len(), 6);
        assert!(rmat_edges(&spec, 16..100).is_empty());
        assert!(rmat_edges(&spec, Range { start: 50, end: 20 }).is_empty());
        let invalid = RmatSpec {
            scale: 40,
            edge_factor: 1,
            seed: 1,
        };
        assert!(rmat_edges(&invalid, 0..10).is_empty());
        let huge = RmatSpec {
            scale: 200,
            edge_factor: 1,
            seed: 1,
        };
        assert_eq!((huge.num_vertices(), huge.num_edges()), (0, 0));
    }

    #[test]
    fn rmat_quadrant_frequencies() {
        let spec = RmatSpec::parse("rmat:10:100:3").expect("parse");
        let edges = rmat_edges(&spec, 0..100_000);
        let n = spec.num_vertices();
        assert!(edges
            .iter()
            .all(|&(s, d)| u64::from(s) < n && u64::from(d) < n));
        let [a, b, c, d] = GRAPH500_ABCD;
        // Every level is an independent quadrant choice; check the top one
        // and the bottom one.
        for bit in [9u32, 0] {
            let mut counts = [0u64; 4];
            for &(s, dst) in &edges {
                let q = (((s >> bit) & 1) << 1 | ((dst >> bit) & 1)) as usize;
                counts[q] += 1;
            }
            let freq = counts.map(|x| x as f64 / edges.len() as f64);
            // Quadrants: 0 = a (neither), 1 = b (dst), 2 = c (src), 3 = d.
            for (got, want) in freq.iter().zip([a, b, c, d]) {
                assert!((got - want).abs() < 0.01, "bit {bit}: {freq:?}");
            }
            let src_set = freq[2] + freq[3];
            assert!((src_set - (c + d)).abs() < 0.01, "bit {bit}: {src_set}");
        }
    }

    /// Levels decided by the same 64-bit draw (9, 8, 7, 6 at scale 10) and by neighbouring
    /// draws (6 and 5) are independent: the joint frequencies of their quadrants are the
    /// products of the marginals.
    #[test]
    fn rmat_levels_are_independent() {
        let spec = RmatSpec::parse("rmat:10:200:5").expect("parse");
        let edges = rmat_edges(&spec, 0..200_000);
        let quadrant =
            |s: u32, d: u32, bit: u32| ((((s >> bit) & 1) << 1) | ((d >> bit) & 1)) as usize;
        let probs = GRAPH500_ABCD;
        for (hi, lo) in [(9u32, 8u32), (9, 6), (6, 5), (1, 0)] {
            let mut joint = [[0u64; 4]; 4];
            for &(s, d) in &edges {
                joint[quadrant(s, d, hi)][quadrant(s, d, lo)] += 1;
            }
            for (x, row) in joint.iter().enumerate() {
                for (y, &c) in row.iter().enumerate() {
                    let got = c as f64 / edges.len() as f64;
                    let want = probs[x] * probs[y];
                    assert!(
                        (got - want).abs() < 0.004,
                        "levels {hi},{lo}: quadrants {x},{y}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn rmat_degree_skew() {
        // R-MAT concentrates edges on low ids: vertex 0 gets far more than
        // the average out-degree.
        let spec = RmatSpec::parse("rmat:10:16").expect("parse");
        let edges = rmat_edges(&spec, 0..spec.num_edges());
        let from_zero = edges.iter().filter(|&&(s, _)| s == 0).count();
        assert!(from_zero > 10 * 16, "{from_zero}");
    }

    #[test]
    fn rmat_thresholds_are_cumulative() {
        let t = quadrant_thresholds(GRAPH500_ABCD);
        assert!(t[0] < t[1] && t[1] < t[2] && t[2] < 1 << 16);
        assert_eq!(quadrant_thresholds([1.0, 0.0, 0.0, 0.0]), [1 << 16; 3]);
    }

    fn blobs(s: &str) -> BlobsSpec {
        BlobsSpec::parse(s).expect("parse")
    }

    #[test]
    fn blobs_parse() {
        assert_eq!(
            blobs("blobs:1000:3:4"),
            BlobsSpec {
                n: 1000,
                d: 3,
                k: 4,
                seed: 1
            }
        );
        assert_eq!(blobs("blobs:1:1:1:99").seed, 99);
        let usage = "expected blobs:N:D:K[:SEED]".to_string();
        for bad in ["blobs", "blobs:1:2", "blobs:1:2:3:4:5", "rmat:1:2:3", ""] {
            assert_eq!(BlobsSpec::parse(bad), Err(usage.clone()), "{bad:?}");
        }
        assert_eq!(
            BlobsSpec::parse("blobs:0:2:3"),
            Err("number of points must be >= 1, got 0".into())
        );
        assert_eq!(
            BlobsSpec::parse("blobs:5:0:3"),
            Err("dimension must be >= 1, got 0".into())
        );
        assert_eq!(
            BlobsSpec::parse("blobs:5:2:0"),
            Err("number of blobs must be >= 1, got 0".into())
        );
        assert_eq!(
            BlobsSpec::parse("blobs:5:2:x"),
            Err("invalid number of blobs 'x'".into())
        );
        assert_eq!(
            BlobsSpec::parse("blobs:5:2:2:-3"),
            Err("invalid seed '-3'".into())
        );
        assert!(BlobsSpec::parse("blobs:5:2:4294967296").is_err_and(|e| e.contains("too large")));
    }

    #[test]
    fn blob_centres_in_box_and_deterministic() {
        let spec = blobs("blobs:10:5:7:42");
        let c = spec.centres();
        assert_eq!(c.len(), 35);
        assert!(c.iter().all(|&x| (-10.0..10.0).contains(&x)));
        assert_eq!(c, spec.centres());
        assert_ne!(c, BlobsSpec { seed: 43, ..spec }.centres());
        // The centres do not depend on n.
        assert_eq!(c, BlobsSpec { n: 99, ..spec }.centres());
    }

    #[test]
    fn blobs_are_independent_of_split() {
        let spec = blobs("blobs:3000:3:5:9");
        let mut whole = Vec::new();
        spec.points(0..3000, &mut whole);
        assert_eq!(whole.len(), 9000);
        let mut whole_labels = Vec::new();
        spec.labels(0..3000, &mut whole_labels);
        assert_eq!(whole_labels.len(), 3000);

        let cuts = [0u64, 1, 500, 501, 1777, 2999, 3000];
        let (mut pieces, mut piece_labels) = (Vec::new(), Vec::new());
        for w in cuts.windows(2) {
            spec.points(w[0]..w[1], &mut pieces);
            spec.labels(w[0]..w[1], &mut piece_labels);
        }
        assert_eq!(pieces, whole);
        assert_eq!(piece_labels, whole_labels);

        // Clamped to 0..n.
        let mut tail = Vec::new();
        spec.points(2990..5000, &mut tail);
        assert_eq!(tail, whole[2990 * 3..]);
    }

    #[test]
    fn blob_points_surround_their_centres() {
        let spec = blobs("blobs:40000:3:4:5");
        let centres = spec.centres();
        let (mut points, mut labels) = (Vec::new(), Vec::new());
        spec.points(0..spec.n, &mut points);
        spec.labels(0..spec.n, &mut labels);

        let mut per_label = [0u64; 4];
        let mut sum = [0.0f64; 3];
        let mut sum_sq = [0.0f64; 3];
        for (point, &label) in points.chunks_exact(3).zip(&labels) {
            let label = label as usize;
            assert!(label < 4);
            per_label[label] += 1;
            let centre = &centres[label * 3..label * 3 + 3];
            for j in 0..3 {
                let off = point[j] - centre[j];
                sum[j] += off;
                sum_sq[j] += off * off;
            }
        }
        let n = spec.n as f64;
        for j in 0..3 {
            let mean = sum[j] / n;
            let var = sum_sq[j] / n - mean * mean;
            assert!(mean.abs() < 0.05, "coordinate {j}: mean offset {mean}");
            assert!((var - 1.0).abs() < 0.05, "coordinate {j}: variance {var}");
        }
        for count in per_label {
            let share = count as f64 / n;
            assert!((share - 0.25).abs() < 0.02, "{per_label:?}");
        }
    }

    #[test]
    fn blobs_invalid_spec_generates_nothing() {
        let spec = BlobsSpec {
            n: 10,
            d: 2,
            k: 0,
            seed: 1,
        };
        let (mut p, mut l) = (Vec::new(), Vec::new());
        spec.points(0..10, &mut p);
        spec.labels(0..10, &mut l);
        assert!(p.is_empty() && l.is_empty());
    }
}
