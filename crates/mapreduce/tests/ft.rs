//! Fault-tolerant MapReduce: an iterative job loses nodes and ranks (injected, or through a
//! panicking map or reduce function) at its first, middle and last operations, at several
//! node layouts, in memory and with an allowance that makes every phase spill; the
//! survivors' output must equal a sequential reference. Losses that cannot be repaired
//! must end the job with an error on every rank, never with a wrong answer.

use std::collections::BTreeMap;

use spillway_comm::Comm;
use spillway_mapreduce::{
    Dataset, Emitter, Error, FaultTolerance, Injection, MapReduce, Output, Values,
};
use spillway_runtime::{run, Config};

/// Operations of the job.
const OPS: u64 = 5;
/// Keys stay below this.
const KEYS: u64 = 700;

/// The input of rank `r` of `p`: a slice of a fixed record sequence.
fn input(r: u64, p: u64) -> Vec<(u32, u64)> {
    let n = 6000u64;
    (n * r / p..n * (r + 1) / p)
        .map(|i| ((i * 2_654_435_761 % 10_007) as u32, i * i % 1_000_003))
        .collect()
}

/// Where operation `op` sends a record: the key itself and a second key.
fn step(op: u64, k: u32, v: u64) -> [(u32, u64); 2] {
    let k = u64::from(k);
    [
        ((k % KEYS) as u32, v),
        (((k * (op + 3) + 11) % KEYS) as u32, v / 3 + op),
    ]
}

/// The job, sequentially.
fn reference() -> BTreeMap<u32, u64> {
    let mut data: Vec<(u32, u64)> = input(0, 1);
    for op in 1..=OPS {
        let mut m: BTreeMap<u32, u64> = BTreeMap::new();
        for &(k, v) in &data {
            for (k2, v2) in step(op, k, v) {
                let e = m.entry(k2).or_insert(0);
                *e = e.wrapping_add(v2);
            }
        }
        data = m.into_iter().collect();
    }
    data.into_iter().collect()
}

/// What to do to the job.
#[derive(Clone, Debug, Default)]
struct Faults {
    inject: Vec<Injection>,
    /// (original rank, op): the map panics there.
    map_panic: Option<(u32, u64)>,
    /// (original rank, op): the reduce panics there.
    reduce_panic: Option<(u32, u64)>,
    /// The map panics on every rank but `.0` when it sees key `.1` in operation `.2` (a
    /// failure while re-running a lost rank's map).
    remap_panic: Option<(u32, u32, u64)>,
    /// Do not replicate the first input.
    no_replica: bool,
}

/// Runs the job; returns the output gathered at the first survivor and the number of
/// recoveries, or the error the job ended with.
fn job(
    layout: (u32, u32, u32),
    memory: Option<usize>,
    faults: &Faults,
) -> Result<(BTreeMap<u32, u64>, usize), String> {
    let (ranks, nodes, running) = layout;
    let config = Config::new(ranks).nodes(nodes).running(running);
    let out = run(&config, |rank| -> Result<_, Error> {
        let world = Comm::world(rank);
        let me = rank.rank();
        let mut ft = FaultTolerance::new();
        for i in &faults.inject {
            ft = ft.inject(*i);
        }
        let mut mr = MapReduce::new(&world);
        if let Some(m) = memory {
            mr = mr.memory(m);
        }
        let mut mr = mr.fault_tolerance(ft)?;
        let part = Dataset::from_local(rank, input(u64::from(me), u64::from(ranks)))?;
        let mut data: Option<Dataset<u32, u64>> = None;
        let mut first = if faults.no_replica {
            None
        } else {
            Some(mr.replicate(part)?)
        };
        let mut local = if faults.no_replica {
            Some(Dataset::from_local(
                rank,
                input(u64::from(me), u64::from(ranks)),
            )?)
        } else {
            None
        };
        for op in 1..=OPS {
            let f = faults.clone();
            let map = move |k: u32, v: u64, emit: &mut Emitter<'_, u32, u64>| {
                if f.map_panic == Some((me, op)) {
                    panic!("injected map panic");
                }
                if let Some((owner, key, at)) = f.remap_panic {
                    if at == op && k == key && me != owner {
                        panic!("injected panic while re-running a lost rank's map");
                    }
                }
                for (k2, v2) in step(op, k, v) {
                    emit.emit(&k2, v2);
                }
            };
            let rp = faults.reduce_panic;
            let reduce = move |k: u32, vs: Values<'_, u64>, out: &mut Output<u32, u64>| {
                if rp == Some((me, op)) {
                    panic!("injected reduce panic");
                }
                out.emit(&k, &vs.fold(0u64, u64::wrapping_add));
            };
            // Odd operations combine on the map side, even ones do not.
            let combine = |a: &mut u64, b: u64| *a = a.wrapping_add(b);
            let next = match (first.take(), local.take(), data.take()) {
                (Some(r), _, _) if op % 2 == 1 => mr.map_combine_reduce(r, map, combine, reduce),
                (Some(r), _, _) => mr.map_reduce(r, map, reduce),
                (_, Some(l), _) => mr.map_reduce(l, map, reduce),
                (_, _, Some(d)) if op % 2 == 1 => mr.map_combine_reduce(d, map, combine, reduce),
                (_, _, Some(d)) => mr.map_reduce(d, map, reduce),
                _ => unreachable!("an input"),
            };
            match next {
                Ok(d) => data = Some(d),
                Err(Error::Lost { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let comm = mr.comm().clone();
        let all = data.expect("output").gather(&comm, 0)?;
        let recoveries = mr.ft_stats().expect("fault tolerance").recoveries.len();
        Ok(Some((all, recoveries)))
    })
    .map_err(|e| e.to_string())?;
    let (all, recoveries) = out
        .into_iter()
        .flatten()
        .find_map(|(a, r)| a.map(|a| (a, r)))
        .expect("a survivor with the gathered output");
    let mut m = BTreeMap::new();
    for (k, v) in all {
        assert!(m.insert(k, v).is_none(), "key {k} twice in the output");
    }
    Ok((m, recoveries))
}

fn node(node: u32, op: u64) -> Injection {
    Injection::Node { node, op }
}

fn rank(rank: u32, op: u64) -> Injection {
    Injection::Rank { rank, op }
}

#[test]
fn injected_losses_at_first_middle_and_last_operations_give_the_reference() {
    let want = reference();
    // (ranks, nodes, running per node)
    for layout in [(4, 2, 2), (6, 3, 1), (5, 1, 2), (8, 4, 2)] {
        let (ranks, nodes, _) = layout;
        let mut cases: Vec<Vec<Injection>> = vec![
            vec![],
            vec![rank(0, 1)],
            vec![rank(ranks - 1, 3)],
            vec![rank(1, OPS)],
        ];
        if nodes > 1 {
            cases.extend([
                vec![node(0, 1)],
                vec![node(nodes - 1, 3)],
                vec![node(1, OPS)],
                // Two losses in different operations.
                vec![node(0, 2), rank(ranks - 1, 4)],
            ]);
        }
        for inject in cases {
            for memory in [None, Some(8 << 10)] {
                let faults = Faults {
                    inject: inject.clone(),
                    ..Faults::default()
                };
                let (got, recoveries) = job(layout, memory, &faults)
                    .unwrap_or_else(|e| panic!("{layout:?} {inject:?}: {e}"));
                assert_eq!(
                    got, want,
                    "layout {layout:?}, memory {memory:?}, {inject:?}"
                );
                assert_eq!(recoveries, inject.len(), "{layout:?} {inject:?}");
            }
        }
    }
}

#[test]
fn panicking_map_and_reduce_functions_lose_their_rank_only() {
    let want = reference();
    for layout in [(4, 2, 2), (6, 3, 2), (3, 1, 3)] {
        for memory in [None, Some(8 << 10)] {
            let cases = [
                Faults {
                    map_panic: Some((1, 2)),
                    ..Faults::default()
                },
                Faults {
                    reduce_panic: Some((2, 3)),
                    ..Faults::default()
                },
                // In the last operation: nothing comes after it to detect the loss.
                Faults {
                    reduce_panic: Some((0, OPS)),
                    ..Faults::default()
                },
                // A reduce loss, then a node loss in the next operation: the replicas made
                // again after the first recovery must cover the second.
                Faults {
                    reduce_panic: Some((1, 2)),
                    inject: vec![rank(layout.0 - 1, 3)],
                    ..Faults::default()
                },
            ];
            for faults in cases {
                let (got, recoveries) = job(layout, memory, &faults)
                    .unwrap_or_else(|e| panic!("{layout:?} {faults:?}: {e}"));
                assert_eq!(
                    got, want,
                    "layout {layout:?}, memory {memory:?}, {faults:?}"
                );
                assert!(recoveries >= 1, "{faults:?}");
            }
        }
    }
}

#[test]
fn losses_beyond_the_replicas_end_the_job_with_an_error() {
    // Node 1 and node 2 (which holds node 1's replicas) in the same operation.
    let e = job(
        (6, 3, 2),
        None,
        &Faults {
            inject: vec![node(1, 2), node(2, 2)],
            ..Faults::default()
        },
    )
    .expect_err("two adjacent nodes cannot be recovered");
    assert!(
        e.contains("cannot recover") && e.contains("same operation"),
        "{e}"
    );

    // A whole single-node job.
    let e = job(
        (3, 1, 3),
        None,
        &Faults {
            inject: vec![node(0, 2)],
            ..Faults::default()
        },
    )
    .expect_err("nothing survives");
    assert!(e.contains("cannot recover"), "{e}");

    // The first input was not replicated.
    let e = job(
        (4, 2, 2),
        None,
        &Faults {
            inject: vec![rank(1, 1)],
            no_replica: true,
            ..Faults::default()
        },
    )
    .expect_err("the lost input cannot be rebuilt");
    assert!(e.contains("neither the previous operation's output"), "{e}");

    // A failure while re-running the lost rank's map. Find a key of rank 1's output of
    // operation 1 (an input of operation 2): with 4 ranks, rank 1 owns it; when rank 1 is
    // lost, a survivor re-runs the map on it and panics.
    let faults = Faults {
        inject: vec![rank(1, 2)],
        remap_panic: Some((1, owned_key(4, 1), 2)),
        ..Faults::default()
    };
    let e = job((4, 2, 2), None, &faults).expect_err("a failure during recovery");
    assert!(e.contains("failed during the recovery"), "{e}");
}

/// A key that rank `r` of `p` owns after operation 1 (found by running without faults and
/// asking who reduced what).
fn owned_key(p: u32, r: u32) -> u32 {
    let config = Config::new(p);
    let keys = run(&config, |rank| -> Result<_, Error> {
        let world = Comm::world(rank);
        let mut mr = MapReduce::new(&world);
        let part = Dataset::from_local(rank, input(u64::from(rank.rank()), u64::from(p)))?;
        let out = mr.map_reduce(
            part,
            |k: u32, v: u64, emit: &mut Emitter<'_, u32, u64>| {
                for (k2, v2) in step(1, k, v) {
                    emit.emit(&k2, v2);
                }
            },
            |k: u32, vs: Values<'_, u64>, out: &mut Output<u32, u64>| {
                out.emit(&k, &vs.fold(0u64, u64::wrapping_add))
            },
        )?;
        Ok(out.to_local_vec())
    })
    .unwrap();
    keys[r as usize][0].0
}

#[test]
fn losses_on_two_nodes_before_one_shuffle_end_the_job_with_an_error() {
    // Nodes 0 and 2 of 4 hold each other's replicas neither way, but what node 0 sent node 2
    // in the last shuffle is in neither's replicas: the output would miss it.
    for inject in [vec![node(0, 2), node(2, 2)], vec![rank(1, 3), rank(6, 3)]] {
        let e = job(
            (8, 4, 2),
            None,
            &Faults {
                inject: inject.clone(),
                ..Faults::default()
            },
        )
        .expect_err("two nodes' losses before one shuffle cannot be recovered");
        assert!(
            e.contains("cannot recover") && e.contains("neither's replicas"),
            "{inject:?}: {e}"
        );
    }
}
