//! Storage-backed memory, memory policies and spilled messages, at several layouts and under
//! budgets small enough that the spill paths run.

use std::path::PathBuf;
use std::sync::Mutex;

use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::{run, run_with_stats, Config, JobError, Policy, ResumePolicy, SbVec};

type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const POLICIES: [Policy; 3] = [Policy::Araw, Policy::Arlw, Policy::Lrlw];

fn layouts() -> Vec<(u32, u32, u32)> {
    vec![(1, 1, 1), (3, 1, 1), (5, 2, 2), (8, 3, 1)]
}

fn pattern(rank: usize, i: usize) -> u64 {
    (rank as u64) << 40 | i as u64
}

#[test]
fn storage_backed_data_survives_blocking_under_every_policy() {
    for policy in POLICIES {
        for (ranks, nodes, running) in layouts() {
            // Each rank holds 1 MiB; the budget holds about two ranks' data per node.
            let config = Config::new(ranks)
                .nodes(nodes)
                .running(running)
                .mem_budget(2 << 20)
                .policy(policy)
                .resume_policy(ResumePolicy::MostResident);
            let (out, stats) = run_with_stats(&config, |rank| -> TestResult<bool> {
                let world = Comm::world(rank);
                let me = world.rank();
                let n = (1 << 20) / 8;
                let mut v: SbVec<u64> = SbVec::zeroed(rank, n)?;
                for (i, x) in v.as_mut_slice().iter_mut().enumerate() {
                    *x = pattern(me, i);
                }
                let mut ok = true;
                for round in 0..3 {
                    world.barrier()?;
                    let s = v.as_slice();
                    ok &= s
                        .iter()
                        .enumerate()
                        .all(|(i, &x)| x == pattern(me, i) + round);
                    for x in v.as_mut_slice() {
                        *x += 1;
                    }
                }
                Ok(ok)
            })
            .unwrap_or_else(|e| panic!("{policy:?} {ranks}/{nodes}/{running}: {e}"));
            assert!(
                out.iter().all(|&ok| ok),
                "{policy:?} {ranks}/{nodes}/{running}: data changed"
            );
            let m = stats.memory;
            assert!(m.loads >= u64::from(ranks), "{m:?}");
            if policy == Policy::Araw && ranks > 1 {
                assert!(m.unloads > 0 && m.bytes_written > 0, "{policy:?}: {m:?}");
            }
            if ranks as usize > 2 * nodes as usize && running == 1 {
                // More data than budget: something must have been written out.
                assert!(m.unloads > 0, "{policy:?} {ranks}/{nodes}: {m:?}");
                assert!(
                    m.peak_resident <= u64::from(nodes) * (2 << 20) + u64::from(nodes) * 4096,
                    "{policy:?} {ranks}/{nodes}: peak resident {} over budget",
                    m.peak_resident
                );
            }
        }
    }
}

#[test]
fn all_to_all_larger_than_the_budget_reads_storage_backed_buffers_in_place() {
    for (ranks, nodes, running) in layouts().into_iter().filter(|l| l.0 > 1) {
        let config = Config::new(ranks)
            .nodes(nodes)
            .running(running)
            .mem_budget(1 << 20)
            .message_spill_threshold(4096);
        let (out, stats) = run_with_stats(&config, |rank| -> TestResult<bool> {
            let world = Comm::world(rank);
            let (me, p) = (world.rank(), world.size());
            // 512 KiB to every other rank, p * (p - 1) * 512 KiB in all, far over 1 MiB: the
            // send buffers are storage-backed, so blocked ranks hold them on disk, and the
            // receivers read them in place.
            let block = 64 * 1024;
            let mut send: SbVec<u64> = SbVec::zeroed(rank, p * block)?;
            for (k, x) in send.as_mut_slice().iter_mut().enumerate() {
                *x = pattern(me, k);
            }
            let got = world.alltoall(send.as_slice())?;
            let ok = (0..p).all(|i| {
                got[i * block..(i + 1) * block]
                    .iter()
                    .enumerate()
                    .all(|(t, &x)| x == pattern(i, me * block + t))
            });
            world.barrier()?;
            Ok(ok)
        })
        .unwrap();
        assert!(out.iter().all(|&ok| ok), "{ranks}/{nodes}: wrong data");
        if nodes == 1 {
            // Inside a node nothing travels as a message.
            assert_eq!(stats.messages_sent(), 0, "{ranks}/{nodes}");
        } else {
            // Between nodes one bundle per pair of nodes, spilled when over the budget.
            assert!(
                stats.memory.messages_spilled > 0,
                "{ranks}/{nodes}: {:?}",
                stats.memory
            );
        }
        assert!(
            stats.memory.bytes_read > 0,
            "{ranks}/{nodes}: {:?}",
            stats.memory
        );
    }
}

#[test]
fn spill_files_have_no_names_and_nothing_is_left_even_after_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let listing = |d: &std::path::Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    };
    let during: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let err = run(
        &Config::new(3).mem_budget(1 << 20).spill_dir(dir.path()),
        |rank| -> TestResult {
            let mut v: SbVec<u8> = SbVec::zeroed(rank, 100_000)?;
            v.as_mut_slice().fill(9);
            v.unload();
            Comm::world(rank).barrier()?;
            assert_eq!(rank.spill_dir(), dir.path());
            during.lock().unwrap().extend(listing(rank.spill_dir()));
            if rank.rank() == 1 {
                panic!("on purpose");
            }
            Ok(())
        },
    )
    .unwrap_err();
    assert!(matches!(err, JobError::RankPanicked { rank: 1, .. }));
    assert!(
        during.lock().unwrap().is_empty(),
        "spill files were visible: {:?}",
        during.lock().unwrap()
    );
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn an_unusable_spill_directory_is_a_clear_error() {
    let missing = std::env::temp_dir().join("spillway-test-no-such-dir/deeper");
    let err = run(&Config::new(2).spill_dir(&missing), |_| {
        Ok::<_, spillway_comm::Error>(())
    })
    .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, JobError::Startup(_)) && text.contains(&missing.display().to_string()),
        "{text}"
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    let err = run(&Config::new(1).spill_dir(file.path()), |_| {
        Ok::<_, spillway_comm::Error>(())
    })
    .unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[test]
fn discard_forgets_contents_and_sums_stay_exact() {
    let out = run(
        &Config::new(4).nodes(2).running(1).mem_budget(1 << 20),
        |rank| -> TestResult<u64> {
            let world = Comm::world(rank);
            let mut v: SbVec<u32> = SbVec::from_slice(rank, &[7u32; 5000])?;
            world.barrier()?;
            let s: u64 = v.iter().map(|&x| u64::from(x)).sum();
            v.discard();
            let zero = v.iter().all(|&x| x == 0);
            Ok(world.allreduce(&[s * u64::from(zero)], Sum)?[0])
        },
    )
    .unwrap();
    assert_eq!(out, vec![4 * 35000; 4]);
}

#[test]
fn dynamic_running_admits_ranks_only_while_memory_allows() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Each rank holds 1 MiB; a 64 MiB budget admits two at once, a 1.5 MiB budget only one.
    for (budget, expect_peak) in [(64u64 << 20, 2usize), (3 << 19, 1)] {
        let executing = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let config = Config::new(6)
            .running(2)
            .dynamic_running(true)
            .mem_budget(budget)
            .policy(Policy::Arlw);
        run(&config, |rank| -> TestResult {
            let world = Comm::world(rank);
            let mut v: SbVec<u8> = SbVec::zeroed(rank, 1 << 20)?;
            // Admission judges data that exists: start measuring once every rank has
            // allocated and released its data.
            v.as_mut_slice()[0] = 1;
            world.barrier()?;
            v.unload();
            world.barrier()?;
            for round in 1..5u8 {
                v.as_mut_slice().iter_mut().for_each(|x| *x = round);
                let now = executing.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(2));
                executing.fetch_sub(1, Ordering::SeqCst);
                world.barrier()?;
                assert!(v.iter().all(|&x| x == round));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(peak.load(Ordering::SeqCst), expect_peak, "budget {budget}");
    }
}

#[test]
fn prefetch_reads_back_the_working_set_only() {
    // Four ranks on one worker under ARAW: every barrier unloads a rank, and the rank resumed
    // next has its unloaded allocations read back ahead. `hot` is touched every round; `cold`
    // was written once, unloaded, and is never touched again: it must not be read back at
    // every resumption.
    let (ranks, rounds) = (4usize, 12u64);
    let (hot_bytes, cold_bytes) = (256usize << 10, 4usize << 20);
    let config = Config::new(ranks as u32)
        .running(1)
        .mem_budget(16 << 20)
        .policy(Policy::Araw);
    let (out, stats) = run_with_stats(&config, |rank| -> TestResult<u64> {
        let world = Comm::world(rank);
        let mut hot: SbVec<u64> = SbVec::zeroed(rank, hot_bytes / 8)?;
        let mut cold: SbVec<u64> = SbVec::zeroed(rank, cold_bytes / 8)?;
        cold.as_mut_slice().fill(7);
        cold.unload();
        for _ in 0..rounds {
            world.barrier()?;
            for x in hot.as_mut_slice() {
                *x += 1;
            }
        }
        world.barrier()?;
        Ok(hot.as_slice()[0] + cold.as_slice()[cold.len() - 1])
    })
    .unwrap();
    assert!(out.iter().all(|&v| v == rounds + 7), "{out:?}");
    let m = stats.memory;
    assert!(m.prefetched_bytes > 0, "nothing was prefetched: {m:?}");
    // The hot arrays of every rank once per round and blocking call (two in slack), and the
    // cold ones at most once per rank (before the block that found them untouched).
    let bound = (ranks * hot_bytes) as u64 * 2 * (rounds + 2) + (ranks * cold_bytes) as u64;
    assert!(
        m.prefetched_bytes <= bound,
        "prefetched {} bytes, more than the working set allows ({bound}): {m:?}",
        m.prefetched_bytes
    );
}

#[test]
fn prefetch_reads_ahead_the_messages_spilled_for_the_next_rank() {
    // Four ranks on one worker, a budget too small for any message: every rank sends 2 MiB to
    // the next one, which is blocked, so each message goes to a spill file. When the worker
    // takes up a rank, the messages waiting on disk for the rank it resumes after are read
    // ahead with that rank's memory.
    let ranks = 4usize;
    let words = (2usize << 20) / 8;
    let config = Config::new(ranks as u32)
        .running(1)
        .mem_budget(1 << 20)
        .policy(Policy::Araw);
    let (out, stats) = run_with_stats(&config, |rank| -> TestResult<u64> {
        let world = Comm::world(rank);
        let me = world.rank();
        let data: Vec<u64> = (0..words as u64).map(|i| i * 4 + me as u64).collect();
        world.send((me + 1) % ranks, 3, &data)?;
        drop(data);
        world.barrier()?;
        let from = (me + ranks - 1) % ranks;
        let (got, _) = world.recv::<u64>(from, 3)?;
        let bad = got
            .iter()
            .enumerate()
            .filter(|&(i, &v)| v != i as u64 * 4 + from as u64)
            .count();
        Ok(bad as u64)
    })
    .unwrap();
    assert!(out.iter().all(|&bad| bad == 0), "corrupted values: {out:?}");
    let m = stats.memory;
    let bytes = (words * 8) as u64;
    assert!(
        m.messages_spilled >= ranks as u64,
        "messages were not spilled: {m:?}"
    );
    // No rank owns storage-backed memory, so whatever was read ahead is messages: whole
    // ones, and at least one (how many depends on the order in which the barrier's ranks
    // resume: a rank whose message is not yet sent when it is read ahead gets none).
    assert!(
        m.prefetched_bytes >= bytes && m.prefetched_bytes % bytes == 0,
        "spilled messages were not read ahead: {m:?}"
    );
}

/// Pages of `[ptr, ptr + len)` (a storage-backed allocation's mapping, loaded or not) that are
/// in the page cache: for a shared file mapping, `mincore` reports the page cache whether or
/// not the pages are mapped in this process.
fn cached_pages(ptr: *const u8, len: usize) -> usize {
    let page = 4096;
    let start = ptr as usize / page * page;
    let pages = (ptr as usize + len - start).div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: the range lies inside a live mapping of ours (the allocation is alive and has not
    // grown, so it has not moved); `vec` has one byte per page.
    let rc = unsafe { libc::mincore(start as *mut libc::c_void, pages * page, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 == 1).count()
}

/// Waits until everything written to the file system holding `dir` is on storage.
fn sync_fs(dir: &std::path::Path) {
    use std::os::fd::AsRawFd;
    let d = std::fs::File::open(dir).unwrap();
    // SAFETY: a valid descriptor; syncfs only flushes.
    assert_eq!(unsafe { libc::syncfs(d.as_raw_fd()) }, 0);
}

#[test]
fn unloaded_pages_leave_the_page_cache() {
    if std::env::var_os("SPILLWAY_KEEP_PAGE_CACHE").is_some_and(|v| v == "1") {
        return;
    }
    // Clean pages leave the page cache at the unload; pages that were being written back
    // leave it a few blocking calls later. Either way the data is read back intact.
    let dir = tempfile::tempdir().unwrap();
    let words = (4usize << 20) / 8;
    for policy in POLICIES {
        let config = Config::new(2)
            .running(1)
            .mem_budget(64 << 20)
            .policy(policy)
            .spill_dir(dir.path());
        let out = run(&config, |rank| -> TestResult<(usize, usize, usize)> {
            let world = Comm::world(rank);
            let me = rank.rank() as usize;
            let mut v: SbVec<u64> = SbVec::zeroed(rank, words)?;
            for (i, x) in v.as_mut_slice().iter_mut().enumerate() {
                *x = pattern(me, i);
            }
            let ptr = v.as_slice().as_ptr().cast::<u8>();
            let len = words * 8;
            // Written pages: handed to write-back by the unload, dropped after it.
            v.unload();
            sync_fs(rank.spill_dir());
            for _ in 0..3 {
                world.barrier()?;
            }
            let after_written = cached_pages(ptr, len);
            // Read back (from storage), then unloaded clean: dropped at once.
            let bad = v
                .as_slice()
                .iter()
                .enumerate()
                .filter(|&(i, &x)| x != pattern(me, i))
                .count();
            v.unload();
            let after_clean = cached_pages(ptr, len);
            Ok((after_written, after_clean, bad))
        })
        .unwrap();
        for (r, &(written, clean, bad)) in out.iter().enumerate() {
            assert_eq!(bad, 0, "{policy:?}: rank {r} read back wrong values");
            assert_eq!(
                written, 0,
                "{policy:?}: rank {r}: written pages still cached"
            );
            assert_eq!(clean, 0, "{policy:?}: rank {r}: clean pages still cached");
        }
    }
}

#[test]
fn queued_messages_take_at_most_half_the_budget() {
    // Nothing storage-backed is resident, so the budget alone would let all five 1 MiB
    // messages for rank 0 wait in memory (5 MiB of 8); at most half of it may hold messages
    // (the rest is for the running ranks' data and the copies receivers hold), so at least one
    // goes to a spill file, and rank 0 still receives every byte.
    let (ranks, words) = (6usize, (1usize << 20) / 8);
    let config = Config::new(ranks as u32)
        .running(1)
        .mem_budget(8 << 20)
        .policy(Policy::Araw);
    let (out, stats) = run_with_stats(&config, |rank| -> TestResult<u64> {
        let world = Comm::world(rank);
        let me = world.rank();
        if me != 0 {
            let data: Vec<u64> = (0..words).map(|i| pattern(me, i)).collect();
            world.send(0, 5, &data)?;
        }
        world.barrier()?;
        let mut bad = 0;
        if me == 0 {
            for from in 1..ranks {
                let (got, _) = world.recv::<u64>(from, 5)?;
                bad += (0..words).filter(|&i| got[i] != pattern(from, i)).count() as u64;
            }
        }
        Ok(bad)
    })
    .unwrap();
    assert!(out.iter().all(|&bad| bad == 0), "corrupted values: {out:?}");
    let m = stats.memory;
    let total = ((ranks - 1) * words * 8) as u64;
    assert!(
        total - m.message_bytes_spilled <= 4 << 20,
        "more than half the budget of messages stayed in memory: {m:?}"
    );
}

#[test]
fn ranges_touched_a_round_at_a_time_are_not_read_ahead_whole() {
    // Four ranks on one worker under ARAW: each round, every rank writes the next eighth of a
    // 4 MiB array and blocks. What it touches between blocks is an eighth of the array, so
    // reading all of it ahead at every resumption would read eight times what is used.
    let (ranks, rounds, bytes) = (4usize, 8usize, 4usize << 20);
    let words = bytes / 8;
    let config = Config::new(ranks as u32)
        .running(1)
        .mem_budget(16 << 20)
        .policy(Policy::Araw);
    let (out, stats) = run_with_stats(&config, |rank| -> TestResult<u64> {
        let world = Comm::world(rank);
        let me = world.rank();
        let mut big: SbVec<u64> = SbVec::zeroed(rank, words)?;
        let piece = words / rounds;
        for r in 0..rounds {
            world.barrier()?;
            for (i, x) in big
                .range_mut(r * piece..(r + 1) * piece)
                .iter_mut()
                .enumerate()
            {
                *x = pattern(me, r * piece + i);
            }
        }
        world.barrier()?;
        let bad = (0..words)
            .filter(|&i| big.as_slice()[i] != pattern(me, i))
            .count();
        Ok(bad as u64)
    })
    .unwrap();
    assert!(out.iter().all(|&bad| bad == 0), "corrupted values: {out:?}");
    let m = stats.memory;
    let bound = (ranks * bytes) as u64;
    assert!(
        m.prefetched_bytes <= bound,
        "prefetched {} bytes for ranges of {} each: {m:?}",
        m.prefetched_bytes,
        bytes / rounds
    );
}
