//! Every kernel this CPU runs against the direct formula.

use super::*;

/// A small deterministic generator (tests only).
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Every kernel this CPU can run, applied to `points`.
fn every_kernel(prepared: &Centres, points: &[f64], n: usize) -> Vec<(&'static str, Vec<u32>)> {
    let mut runs = Vec::new();
    let mut out = vec![u32::MAX; n];
    prepared.assign_with::<Plain>(points, &mut out);
    runs.push(("portable", out));
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            let mut out = vec![u32::MAX; n];
            // SAFETY: AVX2 and FMA detected just above.
            unsafe { prepared.assign_avx2(points, &mut out) };
            runs.push(("avx2", out));
        }
        if has!("avx512f") && has!("avx2") && has!("fma") {
            let mut out = vec![u32::MAX; n];
            // SAFETY: AVX-512F, AVX2 and FMA detected just above.
            unsafe { prepared.assign_avx512(points, &mut out) };
            runs.push(("avx512", out));
        }
    }
    let mut out = vec![u32::MAX; n];
    prepared.assign(points, &mut out);
    runs.push(("dispatched", out));
    runs
}

fn check(n: usize, dim: usize, k: usize, seed: u64, scale: f64) {
    let mut g = Lcg(seed);
    let points: Vec<f64> = (0..n * dim).map(|_| scale * (g.unit() - 0.5)).collect();
    let centres: Vec<f64> = (0..k * dim).map(|_| scale * (g.unit() - 0.5)).collect();
    let prepared = Centres::new(&centres, dim);
    for (kernel, got) in every_kernel(&prepared, &points, n) {
        for i in 0..n {
            let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim) as u32;
            assert_eq!(got[i], want, "{kernel}: point {i} (n={n} dim={dim} k={k})");
        }
    }
}

#[test]
fn matches_the_direct_formula_for_every_shape() {
    for (n, dim, k) in [
        (1, 1, 1),
        (3, 1, 2),
        (17, 3, 5),
        (64, 32, 100),
        (7, 5, 9),
        (33, 2, 8),
        (9, 7, 17),
        (21, 40, 33),
    ] {
        check(n, dim, k, n as u64 * 31 + k as u64, 10.0);
    }
}

#[test]
fn groups_of_centres_and_blocks_of_points_agree_with_the_direct_formula() {
    // Several cache groups (forced small) and point blocks with a partial last block.
    let (n, dim, k) = (2 * POINT_BLOCK + 7, 24, 150);
    let mut g = Lcg(5);
    let points: Vec<f64> = (0..n * dim).map(|_| g.unit() - 0.5).collect();
    let centres: Vec<f64> = (0..k * dim).map(|_| g.unit() - 0.5).collect();
    for group in [WIDE, 3 * WIDE, 1 << 20] {
        let prepared = Centres::with_group(&centres, dim, group);
        for (kernel, got) in every_kernel(&prepared, &points, n) {
            for i in 0..n {
                let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim);
                assert_eq!(got[i] as usize, want, "{kernel}: point {i}, group {group}");
            }
        }
    }
}

#[test]
fn nan_centres_are_never_chosen_and_duplicates_go_to_the_lower_index() {
    let dim = 2;
    let mut centres = vec![f64::NAN, 0.0, 3.0, 3.0, -1.0, -1.0, 3.0, 3.0];
    centres.extend((0..40).flat_map(|c| [10.0 + c as f64, 10.0]));
    let points = [2.5, 2.5, -0.5, -1.5, 0.0, 0.0, 11.2, 10.0, 3.0, 3.0];
    for group in [WIDE, 1 << 20] {
        let prepared = Centres::with_group(&centres, dim, group);
        for (kernel, got) in every_kernel(&prepared, &points, 5) {
            for i in 0..5 {
                let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim);
                assert_eq!(got[i] as usize, want, "{kernel}: point {i}, group {group}");
            }
            assert_eq!(got[0], 1, "{kernel}: the duplicate with the lower index");
        }
    }
}

#[test]
fn far_from_the_origin_cancellation_is_caught_by_the_re_check() {
    // Coordinates near 1e6 with centres 1e-3 apart: the expanded form cancels away most
    // digits, so only the re-check can order the centres.
    let dim = 4;
    let base = 1.0e6;
    let centres: Vec<f64> = (0..12)
        .flat_map(|c| (0..dim).map(move |j| base + 1e-3 * (c as f64) + j as f64))
        .collect();
    let points: Vec<f64> = (0..40)
        .flat_map(|i| (0..dim).map(move |j| base + 3e-4 * (i as f64) + j as f64))
        .collect();
    let prepared = Centres::new(&centres, dim);
    for (kernel, got) in every_kernel(&prepared, &points, 40) {
        for i in 0..40 {
            let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim) as u32;
            assert_eq!(got[i], want, "{kernel}: point {i}");
        }
    }
}

#[test]
fn non_finite_and_overflowing_points_follow_the_direct_formula() {
    let dim = 3;
    let centres = [0.0, 0.0, 0.0, 1e200, 0.0, 0.0, -5.0, 1.0, 2.0];
    let points = [
        f64::NAN,
        0.0,
        0.0, //
        1e200,
        1.0,
        0.0, //
        f64::INFINITY,
        0.0,
        0.0, //
        -4.0,
        1.0,
        2.0, //
        1e160,
        -1e160,
        0.0,
    ];
    let prepared = Centres::new(&centres, dim);
    for (kernel, got) in every_kernel(&prepared, &points, 5) {
        for i in 0..5 {
            let want = nearest_exact(&points[i * dim..(i + 1) * dim], &centres, dim) as u32;
            assert_eq!(got[i], want, "{kernel}: point {i}");
        }
    }
}

#[test]
fn exact_ties_go_to_the_lower_index() {
    // Two identical centres and a point equidistant from two distinct ones.
    let centres = [1.0, 0.0, -1.0, 0.0, 1.0, 0.0];
    let prepared = Centres::new(&centres, 2);
    for (kernel, got) in every_kernel(&prepared, &[0.0, 0.0, 2.0, 0.0], 2) {
        assert_eq!(got, [0, 0], "{kernel}");
    }
}
