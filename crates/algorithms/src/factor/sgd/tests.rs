//! Tests of SGD: the grid against the documented schedule run sequentially.

use super::*;
use crate::io::{entry, Entry};
use spillway_runtime::{run, Config, SbVec};

/// Ratings `(user, item, rating)` of a `users` x `items` matrix, some repeated.
fn ratings(users: u32, items: u32, n: usize) -> Vec<(u32, u32, f64)> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out: Vec<(u32, u32, f64)> = (0..n)
        .map(|_| {
            let (u, i) = (
                (next() % users as u64) as u32,
                (next() % items as u64) as u32,
            );
            (u, i, (next() % 5 + 1) as f64)
        })
        .collect();
    out.extend_from_within(..n / 10);
    out
}

/// The documented schedule run sequentially: in step `s` of an iteration, the blocks
/// `(bi, (bi + s) mod q)`, each applying its ratings (sorted by user, item, position, then
/// shuffled once) a piece at a time in [`update_order`]. Returns `U`, `V` and the training RMSE after each iteration.
fn sequential(
    r: &[(u32, u32, f64)],
    (users, items): (u64, u64),
    q: usize,
    o: &SgdOptions,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let k = o.factors;
    let init = |which, n: u64| -> Vec<f64> {
        (0..n)
            .flat_map(|x| (0..k).map(move |f| initial_factor(o.seed, which, x, f as u64, k)))
            .collect()
    };
    let (mut u, mut v) = (init(1, users), init(2, items));
    let mut blocks = vec![Vec::new(); q * q];
    for (j, &(a, b, _)) in r.iter().enumerate() {
        blocks[block_owner(users, items, q, a.into(), b.into())].push(j);
    }
    for (at, b) in blocks.iter_mut().enumerate() {
        b.sort_by_key(|&j| (r[j].0, r[j].1, j));
        shuffle(b, &mut BlockStream::new(o.seed, SHUFFLE, at as u64));
    }
    let mut rmse = Vec::new();
    for it in 0..o.iterations {
        for s in 0..q {
            for bi in 0..q {
                let block = bi * q + (bi + s) % q;
                let mine = &blocks[block];
                let pieces = mine.len().div_ceil(PIECE);
                let order = update_order(o.seed, it as u64, block as u64, pieces);
                let visit = order
                    .iter()
                    .flat_map(|&p| mine.chunks(PIECE).nth(p as usize));
                for &x in visit.flatten() {
                    let (a, b, rating) = r[x];
                    let (a, b) = (a as usize * k, b as usize * k);
                    let mut lanes = [0.0; 4];
                    for f in 0..k {
                        lanes[f % 4] += u[a + f] * v[b + f];
                    }
                    let e = rating - ((lanes[0] + lanes[2]) + (lanes[1] + lanes[3]));
                    for f in 0..k {
                        let (uf, vf) = (u[a + f], v[b + f]);
                        u[a + f] = uf + o.learning_rate * (e * vf - o.regularisation * uf);
                        v[b + f] = vf + o.learning_rate * (e * uf - o.regularisation * vf);
                    }
                }
            }
        }
        let sse: f64 = r
            .iter()
            .map(|&(a, b, rating)| {
                let (a, b) = (a as usize * k, b as usize * k);
                rating - (0..k).map(|f| u[a + f] * v[b + f]).sum::<f64>()
            })
            .map(|e| e * e)
            .sum();
        rmse.push((sse / r.len() as f64).sqrt());
    }
    (u, v, rmse)
}

#[test]
fn ratings_in_memory_follow_the_sequential_schedule() {
    let (users, items) = (37u64, 23u64);
    // 3300 ratings: several pieces a block at one rank.
    let r = ratings(users as u32, items as u32, 3000);
    let mut options = SgdOptions {
        factors: 4,
        learning_rate: 0.02,
        regularisation: 0.05,
        iterations: 3,
        seed: 7,
        error_every: 1,
    };
    // Factor counts with a loop of known length (4, 10) and without (5).
    for (ranks, nodes, every, factors) in [(1, 1, 1, 4), (1, 1, 2, 10), (4, 2, 0, 5), (9, 3, 1, 4)]
    {
        options.error_every = every;
        options.factors = factors;
        let q = grid_side(ranks).expect("a square");
        let (u_ref, v_ref, rmse_ref) = sequential(&r, (users, items), q, &options);
        let parts = run(&Config::new(ranks as u32).nodes(nodes), |rank| {
            let world = Comm::world(rank);
            let mine: Vec<Entry> = r
                .iter()
                .enumerate()
                .filter(|(_, &(a, b, _))| {
                    block_owner(users, items, q, a.into(), b.into()) == world.rank()
                })
                .map(|(j, &(a, b, x))| entry(a, b, x, j as u64))
                .rev()
                .collect();
            let mine = SbVec::from_slice(rank, &mine)?;
            let block = RatingBlock::from_entries(&world, users, items, mine, r.len() as u64)?;
            let out = sgd(&world, block, &options, &mut |_| {})?;
            Ok::<_, AlgoError>((out.u_lo, out.u, out.v_lo, out.v, out.train_rmse))
        })
        .expect("the job runs");
        let k = options.factors;
        for (u_lo, u, v_lo, v, rmse) in &parts {
            let (a, b) = (*u_lo as usize * k, *v_lo as usize * k);
            assert_eq!(u[..], u_ref[a..a + u.len()], "U at {ranks} ranks");
            assert_eq!(v[..], v_ref[b..b + v.len()], "V at {ranks} ranks");
            // Measured after iterations `every`, 2 `every`, ... and the last (the third).
            let measured: Vec<f64> = (1..=3)
                .filter(|i| *i == 3 || (every > 0 && i % every == 0))
                .map(|i| rmse_ref[i - 1])
                .collect();
            assert_eq!(rmse.len(), measured.len(), "RMSEs measured, every {every}");
            for (x, y) in rmse.iter().zip(&measured) {
                assert!((x - y).abs() <= 1e-12 * y, "RMSE {x} against {y}");
            }
        }
        let held: usize = parts.iter().map(|p| p.1.len()).sum();
        assert_eq!(held, users as usize * k, "the diagonal holds all of U");
    }
}

#[test]
fn ratings_of_another_block_are_refused() {
    let err = run(&Config::new(4), |rank| {
        let world = Comm::world(rank);
        // Rating (0, 0) is block (0, 0)'s: every other rank is given it too.
        let mine = SbVec::from_slice(rank, &[entry(0, 0, 1.0, 0)])?;
        RatingBlock::from_entries(&world, 10, 10, mine, 1).map(drop)
    })
    .unwrap_err();
    let algo = err.rank_error::<AlgoError>().expect("an algorithm error");
    assert!(
        algo.is_bad_input() && algo.to_string().contains("not of its block"),
        "{algo}"
    );
}
