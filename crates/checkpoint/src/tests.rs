//! Round trips, torn and damaged checkpoints, other jobs' checkpoints and the
//! [`Checkpointer`](crate::Checkpointer), at several rank counts.

use std::fs::{self, File};
use std::path::Path;

use spillway_comm::Comm;

use crate::store::part_name;
use crate::*;
use spillway_runtime::{run, Config};

/// The part of rank `r` in checkpoint `seq`: distinct per rank and checkpoint.
fn part(r: usize, seq: u64) -> Vec<u8> {
    (0..100 + 37 * r)
        .map(|i| (i as u64 * 7 + seq * 13 + r as u64) as u8)
        .collect()
}

/// Saves checkpoints `seqs` in order at `ranks` ranks.
fn save_all(dir: &Path, ranks: u32, seqs: &[u64], fingerprint: &str) {
    run(&Config::new(ranks), |rank| {
        let world = Comm::world(rank);
        for &s in seqs {
            let mine = part(world.rank(), s);
            let (a, b) = mine.split_at(mine.len() / 3);
            save(&world, dir, s, fingerprint, &[a, b])?;
        }
        Ok::<_, CheckpointError>(())
    })
    .unwrap();
}

/// (seq, whether every rank got its own part) of what `load` finds at `ranks` ranks.
fn load_all(dir: &Path, ranks: u32, fingerprint: &str) -> Result<Option<(u64, bool)>, String> {
    let out = run(
        &Config::new(ranks).nodes(if ranks > 2 { 2 } else { 1 }),
        |rank| {
            let world = Comm::world(rank);
            let got = load(&world, dir, fingerprint)?;
            Ok::<_, CheckpointError>(got.map(|g| (g.seq, g.part == part(world.rank(), g.seq))))
        },
    )
    .map_err(|e| e.to_string())?;
    assert!(out
        .windows(2)
        .all(|w| w[0].map(|x| x.0) == w[1].map(|x| x.0)));
    Ok(out[0].map(|(s, _)| (s, out.iter().all(|o| o.unwrap().1))))
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn round_trip_keeps_the_newest_two() {
    for ranks in [1, 2, 5] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ck");
        assert_eq!(load_all(&dir, ranks, "job").unwrap(), None);
        save_all(&dir, ranks, &[1, 2, 3, 4], "job");
        assert_eq!(names(&dir), ["ckpt-3", "ckpt-4"]);
        assert_eq!(load_all(&dir, ranks, "job").unwrap(), Some((4, true)));
        let m = latest(&dir, "job", ranks as usize).unwrap().unwrap();
        assert_eq!(m.seq, 4);
        assert_eq!(m.parts.len(), ranks as usize);
        assert_eq!(m.parts[0].len, part(0, 4).len() as u64);
    }
}

#[test]
fn torn_checkpoints_are_never_used() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    save_all(dir, 3, &[1, 2], "job");
    // A leftover .tmp directory of a later checkpoint, even one that looks complete.
    fs::create_dir(dir.join("ckpt-3.tmp")).unwrap();
    for r in 0..3 {
        fs::write(dir.join("ckpt-3.tmp").join(part_name(r)), part(r, 3)).unwrap();
    }
    fs::copy(dir.join("ckpt-2/manifest"), dir.join("ckpt-3.tmp/manifest")).unwrap();
    assert_eq!(load_all(dir, 3, "job").unwrap(), Some((2, true)));

    // A truncated part in the newest: the one before is used.
    let f = dir.join("ckpt-2").join(part_name(1));
    let len = fs::metadata(&f).unwrap().len();
    File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    assert_eq!(load_all(dir, 3, "job").unwrap(), Some((1, true)));
    assert_eq!(latest(dir, "job", 3).unwrap().unwrap().seq, 1);

    // A flipped byte in a part of the older one too: nothing usable.
    let f = dir.join("ckpt-1").join(part_name(2));
    let mut bytes = fs::read(&f).unwrap();
    bytes[10] ^= 1;
    fs::write(&f, bytes).unwrap();
    assert_eq!(load_all(dir, 3, "job").unwrap(), None);

    // Saving again replaces the damaged ones.
    save_all(dir, 3, &[2], "job");
    assert_eq!(load_all(dir, 3, "job").unwrap(), Some((2, true)));
}

#[test]
fn a_manifest_with_a_wrong_checksum_or_torn_manifest_does_not_count() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    save_all(dir, 2, &[5, 6], "job");
    let m = dir.join("ckpt-6/manifest");
    let text = fs::read_to_string(&m).unwrap();
    // A part checksum changed without updating the manifest's own checksum.
    let line = text.lines().find(|l| l.starts_with("part 1 ")).unwrap();
    let mut bad = line.to_string();
    let last = bad.pop().unwrap();
    bad.push(if last == '0' { '1' } else { '0' });
    fs::write(&m, text.replace(line, &bad)).unwrap();
    assert_eq!(load_all(dir, 2, "job").unwrap(), Some((5, true)));
    // A manifest cut short.
    fs::write(&m, &text[..text.len() / 2]).unwrap();
    assert_eq!(load_all(dir, 2, "job").unwrap(), Some((5, true)));
    // No manifest at all.
    fs::remove_file(&m).unwrap();
    assert_eq!(load_all(dir, 2, "job").unwrap(), Some((5, true)));
    fs::write(&m, text).unwrap();
    assert_eq!(load_all(dir, 2, "job").unwrap(), Some((6, true)));
}

#[test]
fn another_jobs_checkpoint_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fp = "pagerank input=a.txt\niterations=20 \\ damping=0.85";
    save_all(dir, 2, &[1], fp);
    assert_eq!(load_all(dir, 2, fp).unwrap(), Some((1, true)));
    let err = load_all(dir, 2, "pagerank input=b.txt").unwrap_err();
    assert!(
        err.contains("was written by `pagerank input=a.txt\niterations=20 \\ damping=0.85`"),
        "{err}"
    );
    assert!(err.contains("this run is `pagerank input=b.txt`"), "{err}");
    let err = load_all(dir, 3, fp).unwrap_err();
    assert!(err.contains("written by 2 ranks; this run has 3"), "{err}");
    assert!(matches!(
        latest(dir, "other", 2),
        Err(CheckpointError::Mismatch { .. })
    ));
}

#[test]
fn checkpointer_saves_when_due_and_refuses_to_overwrite_without_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let stats = run(&Config::new(2), |rank| {
        let world = Comm::world(rank);
        let mut c = Checkpointer::new(&dir, "job", 2, false);
        assert_eq!(c.restore(&world)?, None);
        for it in 1..=5u64 {
            if c.due(it) {
                c.save(&world, it, &[&it.to_le_bytes()])?;
            }
        }
        Ok::<_, CheckpointError>(c.stats())
    })
    .unwrap();
    assert_eq!(stats[0].written, 2);
    assert_eq!(stats[0].bytes, 16);
    assert_eq!(names(&dir), ["ckpt-2", "ckpt-4"]);
    let err = run(&Config::new(2), |rank| {
        let world = Comm::world(rank);
        Checkpointer::new(&dir, "job", 2, false).restore(&world)
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("already holds checkpoint 4"), "{err}");
    let back = run(&Config::new(2), |rank| {
        let world = Comm::world(rank);
        let mut c = Checkpointer::new(&dir, "job", 2, true);
        let got = c.take_restored(&world)?;
        Ok::<_, CheckpointError>((got, c.stats().resumed_from))
    })
    .unwrap();
    assert_eq!(back[1], (Some((4, 4u64.to_le_bytes().to_vec())), Some(4)));
}
