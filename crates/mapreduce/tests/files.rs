//! Binary record files as input and datasets written back to one file, at several rank
//! counts and node layouts, checked against sequential constructions of the same bytes.

use std::path::{Path, PathBuf};

use spillway_comm::{Collectives, Comm, Sum};
use spillway_mapreduce::{BinaryFiles, Dataset, Error, Input, MapReduce};
use spillway_runtime::{run, Config};

/// (ranks, nodes, running per node).
const LAYOUTS: [(u32, u32, u32); 5] = [(1, 1, 1), (2, 1, 2), (3, 1, 2), (5, 2, 2), (7, 3, 1)];

/// Record `i` of the test files: 12 bytes, `(i as u32, 3 i as u32, i % 7 as u32)` little-endian.
fn record(i: u64) -> [u8; 12] {
    let mut r = [0u8; 12];
    r[..4].copy_from_slice(&(i as u32).to_le_bytes());
    r[4..8].copy_from_slice(&((3 * i) as u32).to_le_bytes());
    r[8..].copy_from_slice(&((i % 7) as u32).to_le_bytes());
    r
}

fn field(rec: &[u8], k: usize) -> u32 {
    u32::from_le_bytes(rec[4 * k..4 * k + 4].try_into().unwrap())
}

/// Files of 0, 1001, 37 and 250 records, numbered across the files.
fn record_files(dir: &Path) -> (Vec<PathBuf>, u64) {
    let mut paths = Vec::new();
    let mut next = 0u64;
    for (f, n) in [0u64, 1001, 37, 250].into_iter().enumerate() {
        let bytes: Vec<u8> = (next..next + n).flat_map(record).collect();
        let p = dir.join(format!("part-{f}.bin"));
        std::fs::write(&p, bytes).unwrap();
        paths.push(p);
        next += n;
    }
    (paths, next)
}

#[test]
fn binary_records_are_read_once_each_and_map_reduce_over_them() {
    let dir = tempfile::tempdir().unwrap();
    let (paths, total) = record_files(dir.path());
    // Sum of the second field per third field, sequentially.
    let mut want = [0u64; 7];
    for i in 0..total {
        want[(i % 7) as usize] += 3 * i;
    }
    for (ranks, nodes, running) in LAYOUTS {
        let config = Config::new(ranks).nodes(nodes).running(running);
        let paths = &paths;
        let out = run(&config, |rank| {
            let world = Comm::world(rank);
            // Every record once, in order within the rank, whole, in chunks of at most 5.
            let input = BinaryFiles::open(&world, paths, 12, 64)?;
            assert_eq!(input.total_records(), total);
            let mut seen = Vec::new();
            input.for_each(&mut |first, chunk| {
                assert!(!chunk.is_empty() && chunk.len() <= 60 && chunk.len() % 12 == 0);
                for (j, rec) in chunk.chunks_exact(12).enumerate() {
                    assert_eq!(rec, record(first + j as u64), "record {}", first + j as u64);
                    seen.push(first + j as u64);
                }
            })?;
            assert!(
                seen.windows(2).all(|w| w[1] == w[0] + 1),
                "a contiguous share"
            );
            let counts = world.allgather(&[seen.len() as u64])?;
            assert_eq!(counts.iter().sum::<u64>(), total);
            let firsts = world.allgather(&[seen.first().copied().unwrap_or(u64::MAX)])?;
            let mut expect_next = 0;
            for (r, (&c, &f)) in counts.iter().zip(&firsts).enumerate() {
                if c > 0 {
                    assert_eq!(f, expect_next, "rank {r} starts where rank {} ended", r - 1);
                    expect_next += c;
                }
            }
            // A MapReduce operation over the same files.
            let mut mr = MapReduce::new(&world);
            let sums = mr.map_reduce(
                BinaryFiles::open(&world, paths, 12, 100)?,
                |_, chunk: Vec<u8>, emit: &mut spillway_mapreduce::Emitter<'_, u32, u64>| {
                    for rec in chunk.chunks_exact(12) {
                        emit.emit(&field(rec, 2), u64::from(field(rec, 1)));
                    }
                },
                |key: u32,
                 values: spillway_mapreduce::Values<'_, u64>,
                 out: &mut spillway_mapreduce::Output<u32, u64>| {
                    out.emit(&key, &values.sum())
                },
            )?;
            sums.gather(&world, 0)
        })
        .unwrap_or_else(|e| panic!("{ranks}/{nodes}/{running}: {e}"));
        let mut got = out[0].clone().expect("rank 0 gathers");
        got.sort();
        let want: Vec<(u32, u64)> = (0..7).map(|k| (k as u32, want[k])).collect();
        assert_eq!(got, want, "{ranks}/{nodes}/{running}");
    }
}

#[test]
fn files_of_partial_records_are_rejected_with_the_path_and_the_remainder() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.bin");
    let bad = dir.path().join("bad.bin");
    std::fs::write(&good, [0u8; 24]).unwrap();
    std::fs::write(&bad, [0u8; 29]).unwrap();
    let out = run(&Config::new(2), |rank| {
        let world = Comm::world(rank);
        let err = BinaryFiles::open(&world, &[good.clone(), bad.clone()], 12, 1024)
            .err()
            .expect("rejected");
        let zero = BinaryFiles::open(&world, std::slice::from_ref(&good), 0, 1024).err();
        let missing = BinaryFiles::open(&world, &[dir.path().join("none.bin")], 12, 1024).err();
        Ok::<_, Error>((err.to_string(), zero.is_some(), missing.is_some()))
    })
    .unwrap();
    for (msg, zero, missing) in out {
        assert!(msg.contains("bad.bin") && msg.contains("29 bytes"), "{msg}");
        assert!(msg.contains("5 bytes left over"), "{msg}");
        assert!(zero && missing);
    }
}

/// Rank `r`'s records: `3 r + 1` of them, `(r, j^2)`.
fn local_records(r: usize) -> Vec<(u32, u64)> {
    (0..3 * r as u64 + 1).map(|j| (r as u32, j * j)).collect()
}

/// Rank `r`'s records for the round trip: `20,000 (r + 1)`, about 20 bytes each as text,
/// so that a rank's formatted part is larger than the 256 KiB budget of all ranks.
fn many_records(r: usize) -> Vec<(u32, u64)> {
    (0..20_000 * (r as u64 + 1))
        .map(|j| (r as u32, j * j * 7919))
        .collect()
}

fn no_temporaries(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn datasets_are_written_in_rank_order_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    for (ranks, nodes, running) in LAYOUTS {
        let text = dir.path().join(format!("out-{ranks}.txt"));
        let bin = dir.path().join(format!("out-{ranks}.bin"));
        // A budget smaller than one rank's formatted part: parts go through the spill
        // directory.
        let config = Config::new(ranks)
            .nodes(nodes)
            .running(running)
            .mem_budget(256 << 10);
        let (t, b) = (&text, &bin);
        let out = run(&config, |rank| {
            let world = Comm::world(rank);
            let ds = Dataset::from_local(rank, many_records(world.rank()))?;
            let n = ds.write(&world, t, |k, v, buf| {
                buf.extend_from_slice(format!("{k} {v}\n").as_bytes())
            })?;
            ds.write(&world, b, |k, v, buf| {
                buf.extend_from_slice(&k.to_le_bytes());
                buf.extend_from_slice(&v.to_le_bytes());
            })?;
            // Read the binary file back, 12-byte records.
            let mut back = 0u64;
            let mut sum = 0u64;
            BinaryFiles::open(&world, std::slice::from_ref(b), 12, 4096)?.for_each(
                &mut |_, chunk| {
                    for rec in chunk.chunks_exact(12) {
                        back += 1;
                        sum += u64::from_le_bytes(rec[4..].try_into().unwrap());
                    }
                },
            )?;
            let back = world.allreduce(&[back, sum], Sum)?;
            Ok::<_, Error>((n, back))
        })
        .unwrap_or_else(|e| panic!("{ranks}/{nodes}/{running}: {e}"));
        let all: Vec<(u32, u64)> = (0..ranks as usize).flat_map(many_records).collect();
        let want: String = all.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
        assert_eq!(std::fs::read_to_string(&text).unwrap(), want);
        let want_bin: Vec<u8> = all
            .iter()
            .flat_map(|(k, v)| [k.to_le_bytes().to_vec(), v.to_le_bytes().to_vec()].concat())
            .collect();
        assert_eq!(std::fs::read(&bin).unwrap(), want_bin);
        let sum: u64 = all.iter().map(|(_, v)| v).sum();
        for (n, back) in out {
            assert_eq!(n, want.len() as u64);
            assert_eq!(back, vec![all.len() as u64, sum]);
        }
        no_temporaries(dir.path());
    }
}

#[test]
fn a_failed_write_leaves_no_file_and_fails_on_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("missing-dir").join("out.txt");
    let existing = dir.path().join("keep.txt");
    std::fs::write(&existing, "old").unwrap();
    let out = run(&Config::new(3).nodes(2), |rank| {
        let world = Comm::world(rank);
        let ds = Dataset::from_local(rank, local_records(world.rank()))?;
        let a = ds.write(&world, &target, |k, _, buf| buf.push(k as u8));
        // A directory at the path: the rename fails after every rank wrote.
        let b = ds.write(&world, dir.path(), |k, _, buf| buf.push(k as u8));
        Ok::<_, Error>((a.err(), b.err()))
    })
    .unwrap();
    for (a, b) in out {
        assert!(matches!(a, Some(Error::Output { .. })), "{a:?}");
        assert!(matches!(b, Some(Error::Output { .. })), "{b:?}");
    }
    assert!(!target.exists());
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "old");
    no_temporaries(dir.path());
}
