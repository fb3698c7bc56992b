//! The BSP algorithms against sequential references: the FFT against a direct O(n²) DFT, the
//! sample sort against the standard library's sort, at several rank counts and node layouts.

use num_complex::Complex64;
use spillway_algorithms::bsp::fft::{fft, input_index, output_index, random_value};
use spillway_algorithms::bsp::sort::{random_u64, sample_sort};
use spillway_bsp::{hook, Memory, Options};
use spillway_comm::Comm;
use spillway_runtime::{run, Config, SbVec};

fn dft(x: &[Complex64]) -> Vec<Complex64> {
    let n = x.len();
    (0..n)
        .map(|k| {
            x.iter()
                .enumerate()
                .map(|(j, v)| {
                    let a = -2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                    v * Complex64::new(a.cos(), a.sin())
                })
                .sum()
        })
        .collect()
}

/// Runs the distributed FFT of `x` and returns the result in global order.
fn distributed_fft(config: &Config, x: &[Complex64], storage: bool) -> Vec<Complex64> {
    let n = x.len();
    let parts = run(config, |rank| {
        let world = Comm::world(rank);
        let p = world.size();
        let s = world.rank();
        let local: Vec<Complex64> = (0..n / p).map(|j| x[input_index(p, s, j)]).collect();
        let local = if storage {
            Memory::Storage(SbVec::from_slice(rank, &local)?)
        } else {
            Memory::Heap(local)
        };
        let out = hook(&world, Options::checked(true), |bsp| fft(bsp, n, local))?;
        Ok::<_, spillway_algorithms::AlgoError>((s, p, out.into_vec()))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let mut global = vec![Complex64::default(); n];
    for (t, p, part) in parts {
        for (i, v) in part.into_iter().enumerate() {
            global[output_index(n, p, t, i)] = v;
        }
    }
    global
}

fn rel_error(a: &[Complex64], b: &[Complex64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let den: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    (num / den).sqrt()
}

#[test]
fn fft_matches_a_direct_dft_on_every_layout() {
    for (ranks, nodes) in [(1, 1), (2, 1), (4, 1), (4, 2), (8, 2), (8, 3)] {
        for log in [6, 8] {
            let n = 1usize << log;
            let x: Vec<Complex64> = (0..n).map(|i| random_value(17 + log, i)).collect();
            let want = dft(&x);
            let got = distributed_fft(&Config::new(ranks).nodes(nodes), &x, false);
            let err = rel_error(&got, &want);
            assert!(
                err < 1e-12,
                "{ranks} ranks, {nodes} nodes, n={n}: error {err}"
            );
        }
    }
}

#[test]
fn fft_on_storage_backed_memory_under_a_budget() {
    let n = 1 << 12;
    let x: Vec<Complex64> = (0..n).map(|i| random_value(5, i)).collect();
    let want = dft(&x);
    let config = Config::new(4).nodes(2).running(1).mem_budget(64 << 10);
    let got = distributed_fft(&config, &x, true);
    let err = rel_error(&got, &want);
    assert!(err < 1e-12, "error {err}");
}

#[test]
fn fft_rejects_lengths_the_ranks_cannot_split() {
    let out = run(&Config::new(4), |rank| {
        let world = Comm::world(rank);
        let r = hook(&world, Options::checked(true), |bsp| {
            fft(bsp, 8, vec![Complex64::default(); 2])
        });
        Ok::<_, spillway_bsp::Error>(r.err().map(|e| e.to_string()))
    })
    .unwrap();
    for e in out {
        let e = e.expect("rejected");
        assert!(e.contains("ranks squared"), "{e}");
    }
}

/// Runs the sample sort of `parts[s]` on rank `s` and returns every rank's result.
fn distributed_sort(config: &Config, parts: &[Vec<u64>]) -> Vec<Vec<u64>> {
    run(config, |rank| {
        let world = Comm::world(rank);
        let mine = parts[world.rank()].clone();
        hook(&world, Options::checked(true), |bsp| sample_sort(bsp, mine))
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn sample_sort_matches_the_standard_sort() {
    for (ranks, nodes) in [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (8, 3)] {
        for (case, gen) in [
            (
                "random",
                &(|i: u64| random_u64(3, i)) as &dyn Fn(u64) -> u64,
            ),
            ("few keys", &|i: u64| random_u64(4, i) % 5),
            ("sorted", &|i: u64| i),
            ("reversed", &|i: u64| u64::MAX - i),
        ] {
            let p = ranks as usize;
            // Uneven parts, one of them empty when p > 1.
            let mut parts = Vec::new();
            let mut at = 0;
            for s in 0..p {
                let len = if s == 1 { 0 } else { 1000 + 37 * s };
                parts.push((at..at + len as u64).map(gen).collect::<Vec<u64>>());
                at += len as u64;
            }
            let mut want: Vec<u64> = parts.concat();
            want.sort();
            let got = distributed_sort(&Config::new(ranks).nodes(nodes), &parts);
            assert_eq!(got.concat(), want, "{case}: {ranks} ranks, {nodes} nodes");
            if case == "random" {
                // Regular sampling bounds every part by 2n/p (distinct keys).
                let n = want.len();
                for part in &got {
                    assert!(
                        part.len() <= 2 * n / p + p,
                        "{case}: part of {} of {n}",
                        part.len()
                    );
                }
            }
        }
    }
}

#[test]
fn sample_sort_of_nothing_and_of_one_value() {
    for parts in [vec![vec![]; 3], vec![vec![], vec![7u64], vec![]]] {
        let got = distributed_sort(&Config::new(3).nodes(2), &parts);
        assert_eq!(got.concat(), parts.concat());
    }
}

#[test]
fn sample_sort_of_another_ord_pod_type() {
    // Any Ord + Pod type: here signed integers, whose order differs from their bytes.
    let parts: Vec<Vec<i32>> = (0..4)
        .map(|s| {
            (0..500)
                .map(|i| (random_u64(9, s * 500 + i) as i32) >> 3)
                .collect()
        })
        .collect();
    let mut want = parts.concat();
    want.sort();
    let got = run(&Config::new(4).nodes(2), |rank| {
        let world = Comm::world(rank);
        let mine = parts[world.rank()].clone();
        hook(&world, Options::checked(true), |bsp| sample_sort(bsp, mine))
    })
    .unwrap();
    assert_eq!(got.concat(), want);
}
