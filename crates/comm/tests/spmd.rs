//! SPMD tests of point-to-point and collective communication, each at several rank counts,
//! node layouts and slot counts, checked against sequential computations.

use std::sync::atomic::{AtomicUsize, Ordering};

use spillway_comm::{
    wait_all, BitXor, Collectives, Comm, LogicalAnd, Max, Min, Prod, Source, Sum, Tag, UserOp,
};
use spillway_runtime::{run, Config, JobError};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Every (ranks, nodes, running) layout the suite runs on.
fn layouts() -> Vec<(u32, u32, u32)> {
    let mut out = Vec::new();
    for ranks in [1, 2, 3, 5, 8] {
        for nodes in [1, 2, 3] {
            if nodes <= ranks {
                for running in [1, 2] {
                    out.push((ranks, nodes, running));
                }
            }
        }
    }
    out
}

/// Runs `f` on every layout; a failure names the layout.
fn on_layouts<F>(f: F)
where
    F: Fn(&Comm) -> TestResult + Sync,
{
    for (ranks, nodes, running) in layouts() {
        let config = Config::new(ranks).nodes(nodes).running(running);
        if let Err(e) = run(&config, |rank| f(&Comm::world(rank))) {
            panic!("ranks={ranks} nodes={nodes} running={running}: {e}");
        }
    }
}

/// Bulk-style check: every rank contributes its verdict; all ranks fail naming the bad ones.
fn check_all(comm: &Comm, ok: bool, what: &str) -> TestResult {
    let verdicts = comm.allgather(&[u8::from(ok)])?;
    let bad: Vec<usize> = (0..comm.size()).filter(|&r| verdicts[r] == 0).collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{what} failed on ranks {bad:?}").into())
    }
}

/// Deterministic test data of rank `r`: `len(r)` values.
fn data_of(r: usize, len: usize) -> Vec<i64> {
    (0..len)
        .map(|i| (r as i64 + 1) * 1000 + i as i64 * 7 - 50)
        .collect()
}

fn varlen(r: usize) -> usize {
    (r * 5 + 3) % 7
}

#[test]
fn point_to_point_never_overtakes_and_respects_tags() {
    on_layouts(|world| {
        let p = world.size();
        let me = world.rank();
        for dest in 0..p {
            for i in 0..20u64 {
                let tag = (i % 2) as i32;
                world.send(dest, tag, &[me as u64, i])?;
            }
        }
        // Take odd-tag messages first, then even: order within (source, tag) must hold.
        let mut ok = true;
        for src in 0..p {
            for tag in [1, 0] {
                let mut last = None;
                for _ in 0..10 {
                    let (v, st) = world.recv::<u64>(src, tag)?;
                    ok &= st.source == src && st.tag == tag && v[0] == src as u64;
                    ok &= v[1] % 2 == tag as u64 && last.is_none_or(|l| v[1] > l);
                    last = Some(v[1]);
                }
            }
        }
        check_all(world, ok, "ordering")
    });
}

#[test]
fn any_source_receives_every_sender_once() {
    on_layouts(|world| {
        let p = world.size();
        let me = world.rank();
        world.send(0, 3, &[me as u32 * 10])?;
        let mut ok = true;
        if me == 0 {
            let mut seen = vec![false; p];
            for _ in 0..p {
                let (v, st) = world.recv::<u32>(Source::Any, Tag::Any)?;
                ok &= v == [st.source as u32 * 10] && !seen[st.source] && st.tag == 3;
                seen[st.source] = true;
            }
            ok &= seen.iter().all(|&s| s);
        }
        check_all(world, ok, "any-source")
    });
}

#[test]
fn nonblocking_probe_and_truncation() {
    on_layouts(|world| {
        let p = world.size();
        let me = world.rank();
        let right = (me + 1) % p;
        let left = (me + p - 1) % p;
        let r1 = world.irecv::<f64>(left, 1)?;
        let mut r2 = world.irecv::<f64>(left, 2)?;
        world.isend(right, 2, &[me as f64; 3])?.wait();
        world.send(right, 1, &[me as f64; 5])?;
        let done = wait_all(vec![r1])?;
        let mut ok = done[0].0 == vec![left as f64; 5] && done[0].1.count::<f64>() == 5;
        let mut got = None;
        while got.is_none() {
            got = r2.test()?;
            if got.is_none() {
                world.probe(left, Tag::Any).ok();
            }
        }
        ok &= got.expect("completed").0 == vec![left as f64; 3];
        world.send(right, 9, &[1u16, 2, 3, 4])?;
        let st = world.probe(left, 9)?;
        ok &= st.count::<u16>() == 4 && st.bytes == 8;
        ok &= world.iprobe(left, 9)?.is_some();
        let mut small = [0u16; 2];
        ok &= matches!(
            world.recv_into(left, 9, &mut small),
            Err(spillway_comm::Error::Truncated { .. })
        );
        ok &= world.iprobe(Source::Any, 9)?.is_none();
        let (v, _) = world.sendrecv::<u32, u32>(&[me as u32], right, 4, left, 4)?;
        ok &= v == [left as u32];
        world.send_obj(right, 5, &format!("hello from {me}"))?;
        let (s, _) = world.recv_obj::<String>(left, 5)?;
        ok &= s == format!("hello from {left}");
        check_all(world, ok, "non-blocking")
    });
}

#[test]
fn broadcast_from_every_root() {
    on_layouts(|world| {
        let mut ok = true;
        for root in 0..world.size() {
            let mut v = if world.rank() == root {
                data_of(root, 1000 + root)
            } else {
                vec![7; 3]
            };
            world.bcast(root, &mut v)?;
            ok &= v == data_of(root, 1000 + root);
            let mut fixed = vec![0i64; 4];
            if world.rank() == root {
                fixed = vec![root as i64; 4];
            }
            world.bcast_into(root, &mut fixed)?;
            ok &= fixed == vec![root as i64; 4];
            // Large: between nodes the direct path (no intermediate buffers); odd members
            // broadcast into a fresh vector instead, which must interoperate with it.
            let big = data_of(root + 7, 40_000);
            if world.rank() == root || world.rank() % 2 == 0 {
                let mut into = if world.rank() == root {
                    big.clone()
                } else {
                    vec![0i64; big.len()]
                };
                world.bcast_into(root, &mut into)?;
                ok &= into == big;
            } else {
                let mut fresh: Vec<i64> = Vec::new();
                world.bcast(root, &mut fresh)?;
                ok &= fresh == big;
            }
            let mut all_into = if world.rank() == root {
                big.clone()
            } else {
                vec![0i64; big.len()]
            };
            world.bcast_into(root, &mut all_into)?;
            ok &= all_into == big;
            let s = world.bcast_obj(
                root,
                (world.rank() == root).then(|| vec![format!("r{root}")]),
            )?;
            ok &= s == vec![format!("r{root}")];
        }
        check_all(world, ok, "bcast")
    });
}

#[test]
fn reductions_match_sequential() {
    on_layouts(|world| {
        let p = world.size();
        let me = world.rank();
        let all: Vec<Vec<i64>> = (0..p).map(|r| data_of(r, 64)).collect();
        let fold = |f: &dyn Fn(i64, i64) -> i64| -> Vec<i64> {
            (0..64)
                .map(|i| all.iter().skip(1).fold(all[0][i], |a, v| f(a, v[i])))
                .collect()
        };
        let mut ok = true;
        for root in 0..p {
            let r = world.reduce(root, &all[me], Sum)?;
            ok &= if me == root {
                r == Some(fold(&|a, b| a + b))
            } else {
                r.is_none()
            };
        }
        ok &= world.allreduce(&all[me], Min)? == fold(&|a, b| a.min(b));
        ok &= world.allreduce(&all[me], Max)? == fold(&|a, b| a.max(b));
        ok &= world.allreduce(&all[me], BitXor)? == fold(&|a, b| a ^ b);
        let small: Vec<i64> = all[me].iter().map(|x| x % 3 + 1).collect();
        let prod: Vec<i64> = (0..64)
            .map(|i| (0..p).map(|r| all[r][i] % 3 + 1).product())
            .collect();
        ok &= world.allreduce(&small, Prod)? == prod;
        let flags = [i32::from(me != 1), 1];
        ok &= world.allreduce(&flags, LogicalAnd)? == [i32::from(p == 1), 1];
        let mut inplace = [me as f64 + 0.5];
        world.allreduce_into(&mut inplace, Sum)?;
        ok &= inplace[0] == (0..p).map(|r| r as f64 + 0.5).sum::<f64>();
        let obj = world.allreduce_obj(&format!("{me}"), |a, b| format!("{a},{b}"))?;
        ok &= obj == (0..p).map(|r| r.to_string()).collect::<Vec<_>>().join(",");
        check_all(world, ok, "reductions")
    });
}

/// 2x2 matrix product with wrapping arithmetic: associative, not commutative.
fn matmul(a: &[u64; 4], b: &[u64; 4]) -> [u64; 4] {
    let m = |x: u64, y: u64| x.wrapping_mul(y);
    [
        m(a[0], b[0]).wrapping_add(m(a[1], b[2])),
        m(a[0], b[1]).wrapping_add(m(a[1], b[3])),
        m(a[2], b[0]).wrapping_add(m(a[3], b[2])),
        m(a[2], b[1]).wrapping_add(m(a[3], b[3])),
    ]
}

fn mat_of(r: usize) -> [u64; 4] {
    [r as u64 + 1, 2, 3 * r as u64, 1]
}

#[test]
fn non_commutative_ops_follow_rank_order_on_every_communicator() {
    on_layouts(|world| {
        let mut ok = true;
        for comm in [world.clone(), Comm::cyclic_world(world.runtime())] {
            let p = comm.size();
            let me = comm.rank();
            let op = UserOp::non_commutative(matmul);
            let mats: Vec<[u64; 4]> = (0..p).map(mat_of).collect();
            let prefix: Vec<[u64; 4]> = mats
                .iter()
                .scan(None, |acc: &mut Option<[u64; 4]>, m| {
                    let next = acc.map_or(*m, |a| matmul(&a, m));
                    *acc = Some(next);
                    Some(next)
                })
                .collect();
            ok &= comm.allreduce(&[mats[me]], op)? == [prefix[p - 1]];
            ok &= comm.scan(&[mats[me]], op)? == [prefix[me]];
            let ex = comm.exscan(&[mats[me]], op)?;
            ok &= if me == 0 {
                ex.is_none()
            } else {
                ex == Some(vec![prefix[me - 1]])
            };
            ok &= comm.scan(&[me as u64 + 1], Sum)? == [((me + 1) * (me + 2) / 2) as u64];
        }
        check_all(world, ok, "non-commutative")
    });
}

/// Local aggregation with a reduce-scatter, and the allgather back, on the world (nodes
/// contiguous: the ring) and on the cyclic world (nodes interleaved: the fallbacks), with
/// empty blocks, repeated calls and two operations.
#[test]
fn aggregate_scatter_and_gather_match_sequential() {
    on_layouts(|world| {
        let mut ok = true;
        for comm in [world.clone(), Comm::cyclic_world(world.runtime())] {
            let p = comm.size();
            let me = comm.rank();
            for round in 0..3usize {
                let counts: Vec<usize> = (0..p).map(|q| varlen(q + round) * 3).collect();
                let len: usize = counts.iter().sum();
                let start: usize = counts[..me].iter().sum();
                let value = |q: usize, i: usize| ((q * 31 + i * 7 + round) % 97) as i64 - 40;
                let sums = comm.aggregate_scatter(0i64, &counts, Sum, &mut |buf| {
                    for (i, b) in buf.iter_mut().enumerate() {
                        *b += value(me, i);
                    }
                })?;
                let want: Vec<i64> = (start..start + counts[me])
                    .map(|i| (0..p).map(|q| value(q, i)).sum())
                    .collect();
                ok &= sums.range() == (start..start + counts[me]) && *sums == want[..];
                drop(sums);
                let maxima = comm.aggregate_scatter(i64::MIN, &counts, Max, &mut |buf| {
                    for (i, b) in buf.iter_mut().enumerate() {
                        *b = (*b).max(value(me, i));
                    }
                })?;
                let want: Vec<i64> = (start..start + counts[me])
                    .map(|i| (0..p).map(|q| value(q, i)).max().unwrap())
                    .collect();
                ok &= *maxima == want[..];
                drop(maxima);
                let all = comm.aggregate_gather(&counts, &mut |block: &mut [i64]| {
                    for (j, b) in block.iter_mut().enumerate() {
                        *b = data_of(me, counts[me])[j];
                    }
                })?;
                let want: Vec<i64> = (0..p).flat_map(|q| data_of(q, counts[q])).collect();
                ok &= all.len() == len && *all == want[..];
            }
        }
        check_all(world, ok, "aggregate_scatter / aggregate_gather")
    });
}

/// Collectives that go by messages only (rank-ordered reductions on a communicator whose
/// nodes interleave) mixed with many that meet on the node, and handles of the world made
/// anew for each call next to a long-lived one: every handle and path must stay in step.
#[test]
fn message_only_collectives_and_repeated_handles_keep_collectives_in_step() {
    on_layouts(|world| {
        let rank = world.runtime();
        let cyclic = Comm::cyclic_world(rank);
        let p = world.size();
        let me = world.rank();
        let op = UserOp::non_commutative(matmul);
        let mut ok = true;
        for round in 0..12usize {
            if round % 3 == 0 {
                let got = cyclic.allreduce(&[mat_of(cyclic.rank())], op)?;
                let want = (1..p).fold(mat_of(0), |a, r| matmul(&a, &mat_of(r)));
                ok &= got == [want];
            }
            cyclic.barrier()?;
            let sum = cyclic.allreduce(&[round as u64 + me as u64], Sum)?;
            ok &= sum == [(round * p + p * (p - 1) / 2) as u64];
            // A fresh handle of the world per call, and the long-lived one, alternately.
            let fresh = Comm::world(rank).allreduce(&[1u32], Sum)?;
            ok &= fresh == [p as u32];
            let mut v = if me == round % p {
                vec![round as u8; 3]
            } else {
                Vec::new()
            };
            world.bcast(round % p, &mut v)?;
            ok &= v == vec![round as u8; 3];
            ok &= Comm::node(rank).allreduce(&[1u8], Sum)? == [world.local_size() as u8];
        }
        check_all(world, ok, "collectives in step")
    });
}

#[test]
fn gathers_scatters_and_all_to_all_match_sequential() {
    on_layouts(|world| {
        let p = world.size();
        let me = world.rank();
        let mut ok = true;
        let expect_v: Vec<i64> = (0..p).flat_map(|r| data_of(r, varlen(r))).collect();
        let counts: Vec<usize> = (0..p).map(varlen).collect();
        for root in 0..p {
            let g = world.gather(root, &data_of(me, 4))?;
            let expect: Vec<i64> = (0..p).flat_map(|r| data_of(r, 4)).collect();
            ok &= if me == root {
                g == Some(expect.clone())
            } else {
                g.is_none()
            };
            let gv = world.gatherv(root, &data_of(me, varlen(me)))?;
            ok &= if me == root {
                gv == Some((expect_v.clone(), counts.clone()))
            } else {
                gv.is_none()
            };
            let go = world.gather_obj(root, &me)?;
            ok &= if me == root {
                go == Some((0..p).collect())
            } else {
                go.is_none()
            };
            let src = (me == root).then_some(&expect[..]);
            ok &= world.scatter(root, src)? == data_of(me, 4);
            let srcv = (me == root).then_some((&expect_v[..], &counts[..]));
            ok &= world.scatterv(root, srcv)? == data_of(me, varlen(me));
        }
        ok &= world.allgather(&data_of(me, 3))?
            == (0..p).flat_map(|r| data_of(r, 3)).collect::<Vec<_>>();
        ok &= world.allgatherv(&data_of(me, varlen(me)))? == (expect_v.clone(), counts.clone());
        ok &= world.allgather_obj(&vec![me; me])? == (0..p).map(|r| vec![r; r]).collect::<Vec<_>>();
        // All-to-all: block j of rank i is [i, j, ...].
        let send: Vec<u32> = (0..p).flat_map(|j| [me as u32, j as u32]).collect();
        let expect: Vec<u32> = (0..p).flat_map(|i| [i as u32, me as u32]).collect();
        ok &= world.alltoall(&send)? == expect;
        let lens = |i: usize, j: usize| (i + 2 * j) % 4;
        let sendv: Vec<u64> = (0..p)
            .flat_map(|j| vec![(me * 100 + j) as u64; lens(me, j)])
            .collect();
        let sc: Vec<usize> = (0..p).map(|j| lens(me, j)).collect();
        let (rv, rc) = world.alltoallv(&sendv, &sc)?;
        let expect: Vec<u64> = (0..p)
            .flat_map(|i| vec![(i * 100 + me) as u64; lens(i, me)])
            .collect();
        ok &= rv == expect && rc == (0..p).map(|i| lens(i, me)).collect::<Vec<_>>();
        let parts: Vec<Vec<u8>> = (0..p).map(|j| vec![j as u8; me]).collect();
        ok &= world.alltoallv_vecs(parts)? == (0..p).map(|i| vec![me as u8; i]).collect::<Vec<_>>();
        let objs: Vec<String> = (0..p).map(|j| format!("{me}->{j}")).collect();
        ok &= world.alltoall_obj(objs)? == (0..p).map(|i| format!("{i}->{me}")).collect::<Vec<_>>();
        world.barrier()?;
        check_all(world, ok, "gather/scatter/alltoall")
    });
}

#[test]
fn communicators_split_dup_node_and_cyclic() {
    on_layouts(|world| {
        let rt = world.runtime();
        let p = world.size();
        let me = world.rank();
        let mut ok = true;
        let half = world
            .split(Some((me % 2) as u32), -(me as i64))?
            .expect("member");
        let mine: Vec<usize> = (0..p).filter(|r| r % 2 == me % 2).rev().collect();
        ok &=
            half.size() == mine.len() && half.rank() == mine.iter().position(|&r| r == me).unwrap();
        ok &= half.allreduce(&[me as u64], Sum)? == [mine.iter().sum::<usize>() as u64];
        let none = world.split((me != 0).then_some(0), 0)?;
        ok &= (me == 0) == none.is_none();
        let dup = world.dup();
        dup.send((me + 1) % p, 0, &[me as u8])?;
        ok &= world.iprobe(Source::Any, Tag::Any)?.is_none();
        ok &= dup.recv::<u8>((me + p - 1) % p, 0)?.0 == [((me + p - 1) % p) as u8];
        let node = Comm::node(rt);
        ok &= node.size() == rt.local_size() as usize && node.rank() == rt.local_rank() as usize;
        ok &= node.allreduce(&[1u32], Sum)? == [rt.local_size()];
        ok &= world.node_count() == rt.nodes() as usize
            && world.node_leader() == rt.node_first_rank() as usize;
        let cyc = Comm::cyclic_world(rt);
        let gathered = cyc.allgather(&[rt.rank()])?;
        let layout = rt.layout();
        ok &= gathered.windows(2).all(|w| {
            (layout.local_rank(w[0]), layout.node_of(w[0]))
                < (layout.local_rank(w[1]), layout.node_of(w[1]))
        });
        check_all(world, ok, "communicators")
    });
}

#[test]
fn survivors_agree_on_the_communicator_without_the_lost_whatever_they_duplicated_before() {
    // After a loss some survivors may be past a `dup` that others never reached: the
    // communicator without the lost ranks must be the same message space on all of them.
    on_layouts(|world| {
        let p = world.size();
        let me = world.rank();
        let lost = [world.global_rank(p - 1)?];
        for _ in 0..me % 3 {
            let _ = world.dup();
        }
        let Some(survivors) = world.without(&lost) else {
            return check_all(world, me == p - 1, "the lost rank is left out");
        };
        let mut ok = me != p - 1 && survivors.size() == p - 1 && survivors.rank() == me;
        let sum = survivors.allreduce(&[me as u64], Sum)?;
        ok &= sum == [((p - 1) * p.saturating_sub(2) / 2) as u64];
        survivors.barrier()?;
        // Every rank, the lost one included, still answers on the old communicator here
        // (nothing was really lost): a last check there.
        check_all(world, ok, "survivors' communicator")
    });
}

#[test]
fn a_panicking_rank_ends_the_job_with_its_id() {
    for (ranks, nodes, running) in layouts().into_iter().filter(|l| l.0 >= 3) {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let err = run(&config, |rank| {
            let world = Comm::world(rank);
            if world.rank() == 2 {
                panic!("boom on purpose");
            }
            world.recv::<u8>(2, 0)?;
            Ok::<_, spillway_comm::Error>(())
        })
        .unwrap_err();
        match err {
            JobError::RankPanicked { rank, message } => {
                assert_eq!(rank, 2);
                assert!(message.contains("boom on purpose"));
            }
            other => panic!("unexpected: {other}"),
        }
    }
}

#[derive(Debug)]
struct Custom;
impl std::fmt::Display for Custom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "custom failure")
    }
}
impl std::error::Error for Custom {}

#[test]
fn a_failing_rank_ends_the_job_with_its_error() {
    for (ranks, nodes, running) in layouts().into_iter().filter(|l| l.0 >= 2) {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let err = run(&config, |rank| -> TestResult {
            let world = Comm::world(rank);
            if world.rank() == 1 {
                return Err(Box::new(Custom));
            }
            world.barrier()?;
            Ok(())
        })
        .unwrap_err();
        assert!(matches!(err, JobError::RankFailed { rank: 1, .. }), "{err}");
        assert!(err.to_string().contains("custom failure"));
    }
}

/// An anonymous mapping of `len` f64 values (filled with 1.0) that is unmapped when dropped,
/// so that a read of it after it is gone faults instead of reading freed heap memory.
struct Mapped {
    ptr: *mut f64,
    len: usize,
}

impl Mapped {
    fn new(len: usize) -> Mapped {
        let bytes = len * std::mem::size_of::<f64>();
        let ptr = spillway_runtime::sbpages::map_anonymous(bytes)
            .unwrap_or_else(|e| panic!("mmap of {bytes} bytes: {e}"));
        let mut m = Mapped {
            ptr: ptr.cast(),
            len,
        };
        m.as_mut().fill(1.0);
        m
    }

    fn as_mut(&mut self) -> &mut [f64] {
        // SAFETY: the mapping holds `len` f64 values and lives as long as `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no slice of it outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len * std::mem::size_of::<f64>()) };
    }
}

#[test]
fn members_leaving_a_failing_collective_wait_until_nobody_reads_their_buffers() {
    // Node 0 folds large operands while a rank of node 1 fails the job at a varying moment:
    // node 0's members leave the all-reduce early and unmap their operands at once, so a
    // member still folding them would crash the test. Then the same for the in-place
    // all-reduce, the zero-copy broadcast and the all-to-all.
    const N: usize = 6 << 16;
    for round in 0..240u64 {
        let config = Config::new(6).nodes(2).running(3);
        let err = run(&config, |rank| -> TestResult {
            let world = Comm::world(rank);
            if world.rank() >= 3 {
                if world.rank() == 3 {
                    std::thread::sleep(std::time::Duration::from_micros(round * 37 % 1500));
                    return Err(Box::new(Custom));
                }
                world.barrier()?;
                return Ok(());
            }
            let mut buf = Mapped::new(N);
            let outcome = match round % 4 {
                0 => world.allreduce(buf.as_mut(), Sum).map(drop),
                1 => world.allreduce_into(buf.as_mut(), Sum),
                2 => world.bcast_into(0, buf.as_mut()),
                _ => world.alltoall(buf.as_mut()).map(drop),
            };
            drop(buf);
            // A broadcast may complete on the root's node before the failure reaches it.
            Ok(outcome?)
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("custom failure"),
            "round {round}: {err}"
        );
    }
}

#[test]
fn deadlocks_are_reported_with_what_each_rank_waits_for() {
    for (ranks, nodes, running) in layouts() {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let err = run(&config, |rank| {
            let world = Comm::world(rank);
            if world.rank() == 0 && world.size() > 1 {
                return Ok(());
            }
            world.recv::<u8>(Source::Any, 7)?;
            Ok::<_, spillway_comm::Error>(())
        })
        .unwrap_err();
        let JobError::Deadlock(report) = err else {
            panic!("expected a deadlock, got {err}");
        };
        assert_eq!(report.ranks.len(), ranks as usize);
        for w in &report.ranks {
            if w.rank == 0 && ranks > 1 {
                assert_eq!(w.waiting_for, "finished");
            } else {
                assert!(
                    w.waiting_for.contains("receive") && w.waiting_for.contains("tag 7"),
                    "{}",
                    w.waiting_for
                );
            }
        }
        // A collective that some ranks never enter is a deadlock too.
        let err = run(&config, |rank| {
            let world = Comm::world(rank);
            if world.rank() != world.size() - 1 {
                world.barrier()?;
            } else {
                world.recv::<u8>(0, 0)?;
            }
            Ok::<_, spillway_comm::Error>(())
        })
        .unwrap_err();
        if ranks > 1 {
            assert!(
                err.to_string().contains("collective barrier")
                    || err.to_string().contains("receive"),
                "{err}"
            );
        }
        assert!(matches!(err, JobError::Deadlock(_)), "{err}");
    }
}

#[test]
fn at_most_running_ranks_of_a_node_execute_and_critical_sections_exclude() {
    for (ranks, nodes, running) in layouts() {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let executing: Vec<AtomicUsize> = (0..nodes).map(|_| AtomicUsize::new(0)).collect();
        let peak: Vec<AtomicUsize> = (0..nodes).map(|_| AtomicUsize::new(0)).collect();
        let in_critical: Vec<AtomicUsize> = (0..nodes).map(|_| AtomicUsize::new(0)).collect();
        let critical_violations = AtomicUsize::new(0);
        run(&config, |rank| {
            let world = Comm::world(rank);
            let n = rank.node() as usize;
            for round in 0..5 {
                let now = executing[n].fetch_add(1, Ordering::SeqCst) + 1;
                peak[n].fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros(200));
                executing[n].fetch_sub(1, Ordering::SeqCst);
                if round % 2 == 0 {
                    let p = world.size();
                    world.send((world.rank() + p - 1) % p, 11, &[round as u8])?;
                    let _guard = rank.enter_critical()?;
                    if in_critical[n].fetch_add(1, Ordering::SeqCst) != 0 {
                        critical_violations.fetch_add(1, Ordering::SeqCst);
                    }
                    // Blocking inside a critical section is allowed: the right neighbour sent
                    // before entering its own.
                    world.recv::<u8>((world.rank() + 1) % world.size(), 11)?;
                    std::thread::sleep(std::time::Duration::from_micros(100));
                    in_critical[n].fetch_sub(1, Ordering::SeqCst);
                }
                world.barrier()?;
            }
            Ok::<_, spillway_comm::Error>(())
        })
        .unwrap();
        for (n, pk) in peak.iter().enumerate() {
            let pk = pk.load(Ordering::SeqCst);
            assert!(
                pk <= running as usize,
                "node {n}: {pk} ranks executed at once, running={running}"
            );
        }
        assert_eq!(critical_violations.load(Ordering::SeqCst), 0);
    }
}

/// A link model under which large messages are bandwidth-bound, so collectives between nodes
/// take their pipelined chain (broadcast) and ring (allreduce) algorithms.
const BANDWIDTH_BOUND: spillway_runtime::LinkModel = spillway_runtime::LinkModel {
    alpha: 1e-6,
    beta: 1e-9,
};

#[test]
fn chain_broadcast_and_ring_allreduce_match_sequential() {
    for (ranks, nodes) in [(2, 2), (3, 3), (5, 3), (4, 4), (8, 5), (7, 2)] {
        for running in [1, 2] {
            let config = Config::new(ranks)
                .nodes(nodes)
                .running(running)
                .link_model(BANDWIDTH_BOUND);
            let outcome = run(&config, |rank| -> TestResult {
                let comm = Comm::world(rank);
                let p = comm.size();
                // 300_017 u64: 2.3 MiB, several chunks, a length no chunk size divides.
                let len = 300_017;
                for root in [0, p - 1, p / 2] {
                    let mut data = if comm.rank() == root {
                        data_of(root, len)
                    } else {
                        Vec::new()
                    };
                    comm.bcast(root, &mut data)?;
                    check_all(&comm, data == data_of(root, len), "chain bcast")?;
                }
                let mine = data_of(comm.rank(), len);
                let got = comm.allreduce(&mine, Sum)?;
                let mut want = vec![0i64; len];
                for r in 0..p {
                    for (w, x) in want.iter_mut().zip(data_of(r, len)) {
                        *w += x;
                    }
                }
                check_all(&comm, got == want, "ring allreduce")?;
                let got = comm.allreduce(&mine, Max)?;
                check_all(&comm, got == data_of(p - 1, len), "ring allreduce max")?;
                Ok(())
            });
            if let Err(e) = outcome {
                panic!("ranks={ranks} nodes={nodes} running={running}: {e}");
            }
        }
    }
}

#[test]
fn ring_allreduce_on_two_nodes_is_bitwise_the_tree() {
    let values = |r: usize| -> Vec<f64> {
        (0..100_003)
            .map(|i| ((r * 7919 + i * 104_729) % 1_000_003) as f64 / 3.7 + 1e-9 * i as f64)
            .collect()
    };
    let sums = |config: Config| -> Vec<Vec<u64>> {
        run(&config, |rank| {
            let comm = Comm::world(rank);
            let got = comm.allreduce(&values(comm.rank()), Sum)?;
            Ok::<_, spillway_comm::Error>(got.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        })
        .expect("allreduce")
    };
    let tree = sums(Config::new(6).nodes(2));
    let ring = sums(Config::new(6).nodes(2).link_model(BANDWIDTH_BOUND));
    assert_eq!(tree, ring);
    assert!(tree.iter().all(|v| v == &tree[0]));
}

#[test]
fn the_link_model_switches_large_broadcasts_to_the_chain() {
    let messages = |config: Config| -> u64 {
        let (_, stats) = spillway_runtime::run_with_stats(&config, |rank| {
            let comm = Comm::world(rank);
            let mut data = vec![7u8; if comm.rank() == 0 { 4 << 20 } else { 0 }];
            comm.bcast(0, &mut data)?;
            Ok::<_, spillway_comm::Error>(data.len())
        })
        .expect("bcast");
        stats.messages_sent()
    };
    // Tree over 3 single-rank nodes: 2 messages. Chain: a header and the chunks per link.
    assert_eq!(messages(Config::new(3).nodes(3)), 2);
    let chain = messages(Config::new(3).nodes(3).link_model(BANDWIDTH_BOUND));
    assert!(chain > 2 * 16, "{chain} messages");
}

/// Ten thousand ranks on one node (many more than cores: BDMPI's setting) run barriers,
/// reductions and sparse exchanges correctly, in little memory per rank.
#[test]
fn ten_thousand_ranks_on_one_node_run_collectives_in_little_memory() {
    let ranks = 10_000u32;
    let before = spillway_runtime::current_rss().unwrap_or(0);
    let out = run(&Config::new(ranks).running(2), |rank| -> TestResult<u64> {
        let world = Comm::world(rank);
        let (me, p) = (world.rank(), world.size());
        world.barrier()?;
        let total = world.allreduce(&[me as u64], Sum)?[0];
        // Each rank sends its number to the next one.
        let next = (me + 1) % p;
        let (got, from) = world.exchange(&[(next, &[me as u64][..])])?;
        if got != [((me + p - 1) % p) as u64] || from != [((me + p - 1) % p, 1)] {
            return Err("exchange delivered the wrong data".into());
        }
        world.barrier()?;
        Ok(total)
    })
    .unwrap();
    let want = (ranks as u64) * (ranks as u64 - 1) / 2;
    assert!(out.iter().all(|&t| t == want));
    let peak = spillway_runtime::peak_rss().unwrap_or(0);
    let per_rank = peak.saturating_sub(before) / u64::from(ranks);
    assert!(
        peak < 1 << 30 && per_rank < 64 << 10,
        "peak RSS {} MiB, {} KiB per rank",
        peak >> 20,
        per_rank >> 10
    );
}

#[test]
fn a_broadcast_root_that_leaves_the_job_at_once_still_reaches_late_receivers() {
    // The root of a small broadcast does not wait for its receivers; here it also ends its
    // rank (dropping every handle of the communicator) before any receiver has joined the
    // node's rendezvous: the receivers must still get its value.
    for (ranks, nodes) in [(3, 1), (4, 2)] {
        let got = run(&Config::new(ranks).nodes(nodes), |rank| {
            let world = Comm::world(rank);
            let mut v = [0u64; 2];
            if world.rank() == 0 {
                v = [42, 7];
                world.bcast_into(0, &mut v)?;
            } else {
                std::thread::sleep(std::time::Duration::from_millis(100));
                world.bcast_into(0, &mut v)?;
            }
            Ok::<_, spillway_comm::Error>(v)
        })
        .unwrap();
        assert!(got.iter().all(|v| *v == [42, 7]), "{ranks} ranks: {got:?}");
    }
}

/// Small reductions (operands of at most 64 bytes) among more ranks of one node than fold
/// each other's operands (beyond eight, the last to arrive folds once for all), repeated so
/// that ring entries are reused, against sequential folds; and operands of different lengths
/// fail the job.
#[test]
fn small_reductions_among_many_ranks_of_a_node() {
    for (ranks, nodes, running) in [(9, 1, 1), (40, 1, 2), (130, 1, 2), (40, 2, 2)] {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let out = run(&config, |rank| -> TestResult {
            let world = Comm::world(rank);
            let p = world.size();
            let me = world.rank();
            let mut ok = true;
            for round in 0..5u64 {
                let mine = [me as u64 * 3 + round, (me as u64) ^ round];
                let sums = [
                    (0..p as u64).map(|r| r * 3 + round).sum::<u64>(),
                    (0..p as u64).map(|r| r ^ round).sum::<u64>(),
                ];
                ok &= world.allreduce(&mine, Sum)? == sums;
                ok &= world.allreduce(&[me as i64 - round as i64], Max)?
                    == [p as i64 - 1 - round as i64];
                let root = (round as usize * 7) % p;
                let r = world.reduce(root, &[me as f64 + 0.25], Sum)?;
                let total = (0..p).map(|x| x as f64 + 0.25).sum::<f64>();
                ok &= if me == root {
                    r == Some(vec![total])
                } else {
                    r.is_none()
                };
            }
            // A node communicator (many members even with two nodes).
            let node = Comm::node(rank);
            ok &= node.allreduce(&[1u32], Sum)? == [node.size() as u32];
            check_all(&world, ok, "small reductions")
        });
        if let Err(e) = out {
            panic!("ranks={ranks} nodes={nodes} running={running}: {e}");
        }
    }
    // Different lengths: the job fails naming the misuse (no rank gets a wrong answer).
    for ranks in [4, 12] {
        let out = run(&Config::new(ranks).running(2), |rank| -> TestResult {
            let world = Comm::world(rank);
            let len = if world.rank() == 1 { 2 } else { 1 };
            world.allreduce(&vec![1u64; len], Sum)?;
            Err("a reduction of operands of different lengths returned".into())
        });
        let e = out.expect_err("the job must fail");
        assert!(
            e.to_string().contains("differ in length"),
            "{ranks} ranks: {e}"
        );
    }
}
