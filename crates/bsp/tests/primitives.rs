//! The BSP primitives at several rank counts and node layouts (and under a memory budget with
//! storage-backed registered memory), checked against contents computed independently.

use spillway_bsp::{coll, exec, hook, Bsp, Capacity, Error, Memory, Options, Slot};
use spillway_comm::{Collectives, Comm};
use spillway_runtime::{run, Config, SbVec};

/// (ranks, nodes, running slots per node).
fn layouts() -> Vec<(u32, u32, u32)> {
    vec![(1, 1, 1), (2, 1, 2), (4, 2, 2), (5, 2, 1), (8, 3, 3)]
}

fn config(ranks: u32, nodes: u32, running: u32) -> Config {
    Config::new(ranks).nodes(nodes).running(running)
}

fn setup(bsp: &mut Bsp<'_>, slots: usize, queue: usize) -> spillway_bsp::Result<()> {
    bsp.resize_memory_register(slots)?;
    bsp.resize_message_queue(queue)?;
    bsp.sync()
}

/// The value rank `r` holds at index `i` of its source in superstep `s`.
fn value(r: usize, s: usize, i: usize) -> u64 {
    ((r as u64) << 48) ^ ((s as u64) << 32) ^ (i as u64).wrapping_mul(0x9e37_79b9)
}

const B: usize = 37;

/// Every rank puts block `r` of its source to rank `(r+k) % p` at block `r`, and gets block
/// `(r+k2) % p` of rank `(r+k2)`'s source slot into its local slot, for several supersteps.
fn shift_program(bsp: &mut Bsp<'_>, storage: bool) -> spillway_bsp::Result<bool> {
    let p = bsp.nprocs();
    let me = bsp.pid();
    setup(bsp, 3, 2)?;
    let rank = bsp.comm().runtime();
    let mem = |n: usize| -> spillway_bsp::Result<Memory<u64>> {
        Ok(if storage {
            Memory::Storage(SbVec::zeroed(rank, n)?)
        } else {
            Memory::Heap(vec![0; n])
        })
    };
    let src = bsp.register_global(mem(p * B)?)?;
    let dst = bsp.register_global(mem(p * B)?)?;
    let got = bsp.register_local(mem(B)?)?;
    bsp.sync()?;
    let mut ok = true;
    for s in 0..4 {
        for (i, x) in bsp.slice_mut(src).iter_mut().enumerate() {
            *x = value(me, s, i);
        }
        let k = s + 1;
        bsp.put(src, me * B, (me + k) % p, dst, me * B, B)?;
        let from = (me + 2 * k) % p;
        bsp.get(from, src, from * B, got, 0, B)?;
        bsp.sync()?;
        let sender = (me + p * 8 - k) % p;
        let d = bsp.slice(dst);
        ok &= (0..B).all(|i| d[sender * B + i] == value(sender, s, sender * B + i));
        let g = bsp.slice(got);
        ok &= (0..B).all(|i| g[i] == value(from, s, from * B + i));
    }
    bsp.deregister(got)?;
    bsp.deregister(dst)?;
    bsp.deregister(src)?;
    Ok(ok)
}

#[test]
fn puts_and_gets_land_at_sync_on_every_layout() {
    for (r, n, k) in layouts() {
        let out = exec(&config(r, n, k), Options::checked(true), |bsp| {
            shift_program(bsp, false)
        })
        .unwrap_or_else(|e| panic!("{r}/{n}/{k}: {e}"));
        assert!(out.iter().all(|&b| b), "{r}/{n}/{k}: wrong contents");
    }
}

#[test]
fn unchecked_mode_moves_the_same_data() {
    let out = exec(&config(5, 2, 2), Options::checked(false), |bsp| {
        shift_program(bsp, false)
    })
    .unwrap();
    assert!(out.iter().all(|&b| b));
}

#[test]
fn storage_backed_slots_under_a_memory_budget() {
    for (r, n, k) in [(4, 2, 1), (3, 1, 1)] {
        // Each slot is a few pages; the budget holds less than the ranks' memory together.
        let cfg = config(r, n, k).mem_budget(64 << 10);
        let out = exec(&cfg, Options::checked(true), |bsp| {
            let p = bsp.nprocs();
            let me = bsp.pid();
            setup(bsp, 2, p)?;
            let n = 4096;
            let rank = bsp.comm().runtime();
            let src = bsp.register_global(SbVec::<u64>::zeroed(rank, p * n)?)?;
            let dst = bsp.register_global(SbVec::<u64>::zeroed(rank, p * n)?)?;
            for (i, x) in bsp.slice_mut(src).iter_mut().enumerate() {
                *x = value(me, 0, i);
            }
            bsp.sync()?;
            coll::alltoall(bsp, src, dst, n)?;
            let d = bsp.slice(dst);
            Ok((0..p).all(|q| (0..n).all(|i| d[q * n + i] == value(q, 0, me * n + i))))
        })
        .unwrap_or_else(|e| panic!("{r}/{n}/{k}: {e}"));
        assert!(out.iter().all(|&b| b), "{r}/{n}/{k}");
    }
}

/// An element wider than a cache line's worth of copies, to see tearing if copies raced.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(C)]
struct Wide([u64; 16]);

// SAFETY: `Wide` is a `repr(C)` wrapper of `[u64; 16]`: no padding, every bit pattern valid,
// all zeros a valid value.
unsafe impl bytemuck::Zeroable for Wide {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Wide {}

#[test]
fn concurrent_writes_resolve_in_some_order_without_tearing() {
    for (r, n, k) in layouts() {
        let out = exec(&config(r, n, k), Options::checked(true), |bsp| {
            let p = bsp.nprocs();
            let me = bsp.pid();
            setup(bsp, 1, p)?;
            let len = 64;
            let slot = bsp.register_global(vec![Wide([0; 16]); len])?;
            bsp.sync()?;
            // Everyone writes all elements of everyone, each element filled with its pid + 1.
            let mine = vec![Wide([me as u64 + 1; 16]); len];
            for q in 0..p {
                bsp.put_from(&mine, q, slot, 0)?;
            }
            bsp.sync()?;
            let d = bsp.slice(slot);
            Ok(d.iter()
                .all(|w| w.0.iter().all(|&x| x == w.0[0]) && (1..=p as u64).contains(&w.0[0])))
        })
        .unwrap_or_else(|e| panic!("{r}/{n}/{k}: {e}"));
        assert!(
            out.iter().all(|&b| b),
            "{r}/{n}/{k}: torn or foreign element"
        );
    }
}

#[test]
fn capacity_errors_are_mitigable_and_take_effect_after_sync() {
    let out = exec(&config(3, 2, 2), Options::checked(true), |bsp| {
        let p = bsp.nprocs();
        let me = bsp.pid();
        // Capacities start empty.
        let e = bsp.register_global(vec![0u64; 4]).unwrap_err();
        assert!(matches!(
            e,
            Error::CapacityExceeded {
                what: Capacity::MemoryRegister,
                ..
            }
        ));
        assert!(e.is_mitigable());
        bsp.resize_memory_register(1)?;
        bsp.resize_message_queue(1)?;
        // Not before the next sync.
        assert!(bsp.register_global(vec![0u64; 4]).is_err());
        bsp.sync()?;
        let slot = bsp.register_global(vec![0u64; 4])?;
        bsp.sync()?;
        let next = (me + 1) % p;
        bsp.put_from(&[1u64], next, slot, 0)?;
        let e = bsp.put_from(&[2u64], next, slot, 1).unwrap_err();
        assert!(matches!(
            e,
            Error::CapacityExceeded {
                what: Capacity::MessageQueue,
                ..
            }
        ));
        bsp.sync()?;
        // The refused put left no trace.
        Ok(bsp.slice(slot).to_vec())
    })
    .unwrap();
    assert!(out.iter().all(|v| v == &[1, 0, 0, 0]), "{out:?}");
}

fn sum(a: &mut u64, b: &u64) {
    *a += *b;
}

#[test]
fn collectives_match_direct_computation() {
    for (r, n, k) in layouts() {
        let out = exec(&config(r, n, k), Options::checked(true), |bsp| {
            let p = bsp.nprocs();
            let me = bsp.pid() as u64;
            setup(bsp, 3, 2 * p)?;
            let len = 11;
            let a = bsp.register_global(vec![0u64; p * len])?;
            let b = bsp.register_global(vec![0u64; p * len])?;
            let scratch = bsp.register_global(vec![0u64; p * len])?;
            bsp.sync()?;
            let root = p / 2;
            let f = |q: u64, i: usize| q * 1000 + i as u64;
            let mut ok = true;

            for (two, name) in [(false, "one"), (true, "two")] {
                let fill: Vec<u64> = (0..p * len).map(|i| f(me, i)).collect();
                bsp.slice_mut(a).copy_from_slice(&fill);
                if two {
                    coll::broadcast_two_phase(bsp, root, a, 3, p * len - 3)?;
                } else {
                    coll::broadcast(bsp, root, a, 3, p * len - 3)?;
                }
                let d = bsp.slice(a);
                let good = (0..p * len).all(|i| {
                    let from = if i >= 3 { root as u64 } else { me };
                    d[i] == f(from, i)
                });
                assert!(good, "broadcast ({name} phase)");
                ok &= good;
            }

            let fill: Vec<u64> = (0..p * len).map(|i| f(me, i)).collect();
            bsp.slice_mut(a).copy_from_slice(&fill);
            coll::allgather(bsp, a, len)?;
            ok &= (0..p * len).all(|i| bsp.slice(a)[i] == f((i / len) as u64, i));

            bsp.slice_mut(a).copy_from_slice(&fill);
            coll::gather(bsp, root, a, len)?;
            if me as usize == root {
                ok &= (0..p * len).all(|i| bsp.slice(a)[i] == f((i / len) as u64, i));
            }

            bsp.slice_mut(a).copy_from_slice(&fill);
            coll::scatter(bsp, root, a, len)?;
            let mine = me as usize * len..(me as usize + 1) * len;
            ok &= mine.clone().all(|i| bsp.slice(a)[i] == f(root as u64, i));

            bsp.slice_mut(a).copy_from_slice(&fill);
            coll::alltoall(bsp, a, b, len)?;
            ok &= (0..p * len)
                .all(|i| bsp.slice(b)[i] == f((i / len) as u64, me as usize * len + i % len));

            bsp.slice_mut(a).copy_from_slice(&fill);
            coll::reduce(bsp, root, a, scratch, len, sum)?;
            if me as usize == root {
                ok &= (0..len)
                    .all(|i| bsp.slice(a)[i] == (0..p as u64).map(|q| f(q, i)).sum::<u64>());
            }

            bsp.slice_mut(a).copy_from_slice(&fill);
            coll::allreduce(bsp, a, scratch, len, sum)?;
            ok &= (0..len).all(|i| bsp.slice(a)[i] == (0..p as u64).map(|q| f(q, i)).sum::<u64>());
            Ok(ok)
        })
        .unwrap_or_else(|e| panic!("{r}/{n}/{k}: {e}"));
        assert!(out.iter().all(|&b| b), "{r}/{n}/{k}");
    }
}

#[test]
fn hook_on_a_subset_and_rehook_give_pristine_contexts() {
    let out = run(&config(6, 2, 2), |rank| -> Result<Vec<u64>, Error> {
        let world = Comm::world(rank);
        // The odd ranks form a BSP machine of their own.
        let odd = world
            .split(Some((world.rank() % 2) as u32), 0)?
            .expect("coloured");
        let outer = hook(
            &odd,
            Options::checked(true),
            |bsp| -> spillway_bsp::Result<_> {
                setup(bsp, 1, 1)?;
                let slot: Slot<u64> = bsp.register_global(vec![0u64; 1])?;
                bsp.sync()?;
                let inner = bsp.rehook(Options::checked(true), |lib| {
                    // A library's context sees none of the outer slots and starts empty.
                    assert!(lib.register_global(vec![0u8; 1]).is_err());
                    setup(lib, 1, 1)?;
                    let s = lib.register_global(vec![0u64; 1])?;
                    lib.sync()?;
                    let to = (lib.pid() + 1) % lib.nprocs();
                    lib.put_from(&[10 + lib.pid() as u64], to, s, 0)?;
                    lib.sync()?;
                    Ok(lib.slice(s)[0])
                })?;
                let to = (bsp.pid() + 1) % bsp.nprocs();
                bsp.put_from(&[bsp.pid() as u64], to, slot, 0)?;
                bsp.sync()?;
                Ok(vec![bsp.slice(slot)[0], inner, bsp.nprocs() as u64])
            },
        )?;
        world.barrier()?;
        Ok(outer)
    })
    .unwrap();
    for (g, v) in out.iter().enumerate() {
        let sub = g / 2; // rank in its half
        let left = (sub + 2) % 3;
        assert_eq!(v, &vec![left as u64, 10 + left as u64, 3], "rank {g}");
    }
}

#[test]
fn probe_reads_what_measure_cached() {
    let dir = tempfile::tempdir().unwrap();
    // Each test runs in a process of its own (nextest), so the variable is this test's.
    std::env::set_var("SPILLWAY_PROBE_CACHE", dir.path());
    let options = spillway_bsp::ProbeOptions {
        min_bytes: 1 << 10,
        max_bytes: 16 << 10,
        reps: 1,
        min_seconds: 0.0,
        seed: 1,
    };
    let cfg = config(2, 1, 2);
    let before = exec(&cfg, Options::checked(true), |bsp| Ok(bsp.probe())).unwrap();
    assert!(!before[0].measured, "an estimate before any measurement");
    let reports = exec(&cfg, Options::checked(true), |bsp| {
        spillway_bsp::measure(bsp, &options)
    })
    .unwrap();
    // 1K, 2K, ..., 16K for both patterns.
    assert_eq!(reports[0].samples.len(), 10);
    let after = exec(&cfg, Options::checked(true), |bsp| Ok(bsp.probe())).unwrap();
    assert!(after[0].measured);
    // The cache is JSON: equal to the last few bits.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs());
    assert!(close(after[0].g, reports[0].machine.g), "{after:?}");
    assert!(close(after[0].l, reports[0].machine.l), "{after:?}");
    assert_eq!(after[0].p, 2);
    // Another layout has no cached result.
    let other = exec(&config(3, 1, 3), Options::checked(true), |bsp| {
        Ok(bsp.probe())
    })
    .unwrap();
    assert!(!other[0].measured);
}

/// Between nodes a sync sends one message per node pair and direction in round A, and as
/// many again in round B when gets cross nodes, however many ranks each node holds; requests
/// or replies of 64 KiB and more between two ranks travel on their own besides. The data of
/// every rank pair arrives.
#[test]
fn requests_between_nodes_travel_in_one_message_per_node_pair() {
    for (r, n, k) in [(8u32, 2u32, 4u32), (7, 3, 2), (6, 3, 1)] {
        let out = exec(&config(r, n, k), Options::checked(false), |bsp| {
            let p = bsp.nprocs();
            let me = bsp.pid();
            setup(bsp, 6, 2 * p)?;
            let src = bsp.register_global(vec![0u64; p])?;
            let put_dst = bsp.register_global(vec![0u64; p])?;
            let get_dst = bsp.register_local(vec![0u64; p])?;
            bsp.sync()?;
            for (i, x) in bsp.slice_mut(src).iter_mut().enumerate() {
                *x = value(me, 0, i);
            }
            let runtime = bsp.comm().runtime();
            let before = runtime.stats().messages_sent;
            bsp.sync()?;
            let empty = runtime.stats().messages_sent - before;
            let before = runtime.stats().messages_sent;
            for q in 0..p {
                bsp.put(src, q, q, put_dst, me, 1)?;
                bsp.get(q, src, me, get_dst, q, 1)?;
            }
            bsp.sync()?;
            let full = runtime.stats().messages_sent - before;
            let before = runtime.stats().messages_sent;
            for q in 0..p {
                bsp.put(src, q, q, put_dst, me, 1)?;
            }
            bsp.sync()?;
            let puts_only = runtime.stats().messages_sent - before;
            let ok = (0..p).all(|q| bsp.slice(put_dst)[q] == value(q, 0, me))
                && (0..p).all(|q| bsp.slice(get_dst)[q] == value(q, 0, me));
            // Large: 80 KiB puts to the next rank and gets from the previous one.
            const BIG: usize = 10 << 10;
            let big_src = bsp.register_global(vec![0u64; BIG])?;
            let big_put = bsp.register_global(vec![0u64; BIG])?;
            let big_get = bsp.register_local(vec![0u64; BIG])?;
            bsp.sync()?;
            for (i, x) in bsp.slice_mut(big_src).iter_mut().enumerate() {
                *x = value(me, 1, i);
            }
            let (next, prev) = ((me + 1) % p, (me + p - 1) % p);
            let before = runtime.stats().messages_sent;
            bsp.put(big_src, 0, next, big_put, 0, BIG)?;
            bsp.get(prev, big_src, 0, big_get, 0, BIG)?;
            bsp.sync()?;
            let large = runtime.stats().messages_sent - before;
            let ok = ok
                && (0..BIG).all(|i| bsp.slice(big_put)[i] == value(prev, 1, i))
                && (0..BIG).all(|i| bsp.slice(big_get)[i] == value(prev, 1, i));
            Ok((ok, empty, full, puts_only, large))
        })
        .unwrap_or_else(|e| panic!("{r}/{n}/{k}: {e}"));
        assert!(out.iter().all(|o| o.0), "{r}/{n}/{k}: wrong contents");
        let sum = |f: fn(&(bool, u64, u64, u64, u64)) -> u64| out.iter().map(f).sum::<u64>();
        let pairs = u64::from(n * (n - 1));
        // Rank pairs (me, me + 1) on different nodes: each carries a large put and, back, a
        // large get reply.
        let layout = Config::new(r).nodes(n).layout().expect("a valid layout");
        let node = |q: u32| layout.node_of(q);
        let crossing: Vec<(u32, u32)> = (0..r)
            .map(|q| (node(q), node((q + 1) % r)))
            .filter(|(a, b)| a != b)
            .collect();
        // Round B runs between the node pairs whose requests held gets.
        let mut asking = crossing.clone();
        asking.sort_unstable();
        asking.dedup();
        let (crossing, asking) = (crossing.len() as u64, asking.len() as u64);
        assert_eq!(sum(|o| o.1), pairs, "{r}/{n}/{k}: empty sync");
        assert_eq!(sum(|o| o.3), pairs, "{r}/{n}/{k}: puts only");
        assert_eq!(sum(|o| o.2), 2 * pairs, "{r}/{n}/{k}: puts and gets");
        assert_eq!(
            sum(|o| o.4),
            pairs + asking + 2 * crossing,
            "{r}/{n}/{k}: large puts and gets"
        );
    }
}

/// Supersteps where only some ranks queue requests (and some none at all): a rank that queued
/// nothing must still be read by the others' gets and written by their puts. Each superstep,
/// rank `r` is active when `(r + s) % 3 == 0`; an active rank puts its block to rank `r + 1`
/// and gets block `r + 2` of rank `r + 2`. The expected contents are replayed sequentially.
#[test]
fn supersteps_where_only_some_ranks_queue_requests() {
    let steps = 6;
    for (r, n, k) in [
        (2, 1, 2),
        (4, 1, 1),
        (5, 1, 2),
        (6, 1, 3),
        (5, 2, 1),
        (7, 3, 2),
    ] {
        for checked in [false, true] {
            let out = exec(&config(r, n, k), Options::checked(checked), |bsp| {
                let p = bsp.nprocs();
                let me = bsp.pid();
                setup(bsp, 3, 2)?;
                let src = bsp.register_global(Memory::Heap(vec![0u64; B]))?;
                let dst = bsp.register_global(Memory::Heap(vec![0u64; p * B]))?;
                let got = bsp.register_local(Memory::Heap(vec![0u64; B]))?;
                bsp.sync()?;
                let mut seen = Vec::new();
                for s in 0..steps {
                    for (i, x) in bsp.slice_mut(src).iter_mut().enumerate() {
                        *x = value(me, s, i);
                    }
                    bsp.sync()?;
                    if (me + s) % 3 == 0 {
                        bsp.put(src, 0, (me + 1) % p, dst, me * B, B)?;
                        bsp.get((me + 2) % p, src, 0, got, 0, B)?;
                    }
                    bsp.sync()?;
                    seen.push((bsp.slice(dst).to_vec(), bsp.slice(got).to_vec()));
                }
                Ok::<_, Error>(seen)
            })
            .unwrap();
            // Sequential replay of the same supersteps.
            let p = r as usize;
            let mut dst = vec![vec![0u64; p * B]; p];
            let mut got = vec![vec![0u64; B]; p];
            for s in 0..steps {
                for a in (0..p).filter(|a| (a + s) % 3 == 0) {
                    let to = (a + 1) % p;
                    for i in 0..B {
                        dst[to][a * B + i] = value(a, s, i);
                    }
                    let from = (a + 2) % p;
                    for (i, g) in got[a].iter_mut().enumerate() {
                        *g = value(from, s, i);
                    }
                }
                for (q, seen) in out.iter().enumerate() {
                    assert_eq!(
                        seen[s],
                        (dst[q].clone(), got[q].clone()),
                        "rank {q}, superstep {s}, layout {r}/{n}/{k}, checked {checked}"
                    );
                }
            }
        }
    }
}
