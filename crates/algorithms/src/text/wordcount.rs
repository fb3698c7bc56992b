//! Word count as MapReduce (thesis algorithms 2-3): words are maximal runs of bytes that
//! are not ASCII whitespace ([`is_space`](spillway_mapreduce::is_space)); they need not be
//! UTF-8.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use spillway_comm::Comm;
use spillway_mapreduce::{
    Dataset, FaultTolerance, FtStats, MapReduce, NodeAggregation, OpStats, TextFiles,
};
use spillway_runtime::SbVec;

use crate::error::AlgoError;
use crate::io::{AtomicFile, InputError};
pub use crate::text::count::for_each_word;
use crate::text::count::WordCounter;

/// The most distinct words of each kind (up to 8 bytes, 9 to 16) the map's counting tables
/// grow to hold without a memory budget: 8 Mi, at most 288 MiB for short words and 544 MiB
/// for longer ones.
const COUNTER_LIMIT: usize = 1 << 23;

/// How to count.
#[derive(Debug, Clone)]
pub struct WordCountOptions {
    /// Combine counts before the shuffle (within a rank, and within a node across nodes).
    pub combine: bool,
    /// Local aggregation across the ranks of a node.
    pub node_aggregation: NodeAggregation,
    /// The heap allowance of each rank (default: derived from the memory budget).
    pub memory: Option<usize>,
    /// Bytes of text read at a time (under a memory budget, at most an eighth of a rank's
    /// share of it).
    pub chunk: usize,
    /// Survive lost ranks (and inject failures).
    pub fault_tolerance: Option<FaultTolerance>,
}

/// A word count on one rank.
#[derive(Debug)]
pub struct WordCount<'r> {
    /// The counts of the words whose hash this rank owns.
    pub counts: Dataset<Vec<u8>, u64>,
    /// The operation's statistics over all ranks.
    pub stats: OpStats,
    /// Fault-tolerance costs over all ranks (with fault tolerance).
    pub ft: Option<FtStats>,
    /// The ranks still in the job (all of them unless ranks were lost).
    pub comm: Comm<'r>,
}

impl Default for WordCountOptions {
    fn default() -> Self {
        WordCountOptions {
            combine: true,
            node_aggregation: NodeAggregation::Auto,
            memory: None,
            chunk: 4 << 20,
            fault_tolerance: None,
        }
    }
}

/// Counts the words of `files` (one MapReduce operation); every rank returns its part of
/// the counts (the words whose hash it owns) and the operation's statistics over all ranks.
///
/// # Errors
/// [`AlgoError::Input`] naming a file that cannot be read (the same on every rank);
/// communication and spill errors; with fault tolerance, a lost rank gets an error for
/// which [`AlgoError::is_lost`] holds.
pub fn word_count<'r>(
    comm: &Comm<'r>,
    files: &[PathBuf],
    options: &WordCountOptions,
) -> Result<WordCount<'r>, AlgoError> {
    let mut mr = MapReduce::new(comm).node_aggregation(options.node_aggregation);
    if let Some(m) = options.memory {
        mr = mr.memory(m);
    }
    if let Some(ft) = &options.fault_tolerance {
        mr = mr.fault_tolerance(ft.clone())?;
    }
    // Under a budget a chunk is at most an eighth of a rank's share of it: every rank of a
    // node may hold one while others run.
    let rt = comm.runtime();
    let chunk = match rt.mem_budget() {
        Some(b) => options
            .chunk
            .min((b / (8 * u64::from(rt.local_size().max(1)))).max(64 << 10) as usize),
        None => options.chunk,
    };
    // Every rank opens every file, so all of them report the same unreadable file.
    let input = TextFiles::open(comm, files, chunk)?;
    // With the combiner, short words are first counted in tables of the map's own (no
    // allocation or partitioning hash per word), kept across chunks, and each distinct word is
    // emitted with its count when the tables are full and when the map's input ends: the
    // MapReduce combiner then sees the vocabulary, not the words. The tables start with room
    // for 65,536 distinct words of each kind (6.5 MiB; with chunks under 4 MiB, under a
    // memory budget, about 1.6 bytes per byte of a chunk) and double while they fill up, to
    // [`COUNTER_LIMIT`] words of each kind, or half the rank's allowance under a budget.
    // A rank's tables also start no larger than its share of the text asks for (a word
    // every 8 bytes, a sixty-fourth of them distinct): 64 ranks counting a 1 MB file held
    // 6.5 MiB of tables each.
    let share = (input.total_bytes() / comm.size() as u64) as usize;
    let initial = (chunk / 64).min(share / 512).clamp(1 << 6, 1 << 16);
    let limit = match mr.allowance() {
        Some(a) => (a / 2 / 104).min(COUNTER_LIMIT),
        None => COUNTER_LIMIT,
    };
    let counter = options
        .combine
        .then(|| Rc::new(RefCell::new(WordCounter::growing(initial, limit))));
    let map = |_: u64, text: Vec<u8>, emit: &mut spillway_mapreduce::Emitter<'_, Vec<u8>, u64>| {
        match &counter {
            Some(c) => {
                c.borrow_mut().count(&text, |w, n| emit.emit_raw_key(w, n));
                if !emit.has_at_end() {
                    let c = Rc::clone(c);
                    emit.at_end(move |emit| {
                        c.borrow_mut()
                            .drain(|w, n| emit.emit_distinct_raw_key(w, n))
                    });
                }
            }
            None => for_each_word(&text, |w| emit.emit_raw_key(w, 1)),
        }
    };
    let reduce = |word: Vec<u8>,
                  counts: spillway_mapreduce::Values<'_, u64>,
                  out: &mut spillway_mapreduce::Output<Vec<u8>, u64>| {
        out.emit(&word, &counts.sum())
    };
    let counts = if options.combine {
        mr.map_combine_reduce(input, map, |a, b| *a += b, reduce)?
    } else {
        mr.map_reduce(input, map, reduce)?
    };
    let comm = mr.comm().clone();
    let stats = mr.stats()[0].total(&comm)?;
    let ft = mr.ft_stats().map(|f| f.total(&comm)).transpose()?;
    Ok(WordCount {
        counts,
        stats,
        ft,
        comm,
    })
}

pub use crate::survive::Restart;

/// What a caller of [`word_count_surviving`] does with the counts (see there): it gets the
/// restarts so far.
pub type Finish<'a, 'r, T> = dyn FnMut(&WordCount<'r>, &[Restart]) -> Result<T, AlgoError> + 'a;

/// [`word_count`] with fault tolerance that also survives processes lost for real (MPI with
/// ULFM) after its operation, while `finish` counts and writes the result: the operation's
/// own recovery covers losses during it, but once it has ended the result's parts are not
/// replicated, so the survivors regroup and count again from the input (an operation's time)
/// and call `finish` again, with the restarts so far (see
/// [`again_after_loss`](crate::survive::again_after_loss)). Without ULFM or without fault
/// tolerance it is `word_count`, `finish` and a barrier.
///
/// # Errors
/// As [`word_count`] and `finish`; a loss during the regrouping that leaves no survivor
/// communicator ends the job.
pub fn word_count_surviving<'r, T>(
    comm: &Comm<'r>,
    files: &[PathBuf],
    options: &WordCountOptions,
    finish: &mut Finish<'_, 'r, T>,
) -> Result<T, AlgoError> {
    let survivable = comm.runtime().survives_lost_processes() && options.fault_tolerance.is_some();
    crate::survive::again_after_loss(
        comm,
        survivable,
        "counting the words again",
        &mut |comm| word_count(comm, files, options),
        &|wc| Some(&wc.comm),
        finish,
    )
}

/// Writes `counts` to `path` at rank 0 as "word count" lines, by count descending, then by
/// the word's bytes (the words are written as they are, bytes and all); a collective.
///
/// # Semantics
/// Every rank sorts its part into storage-backed memory; rank 0 merges the sorted parts,
/// pulling them from the other ranks in chunks of 256 KiB, so no rank holds more than its
/// own part's sort index and one chunk per rank on its heap. The file appears only when
/// complete.
///
/// # Errors
/// [`AlgoError::Output`] naming the path; communication errors.
pub fn write_counts(
    comm: &Comm,
    counts: &Dataset<Vec<u8>, u64>,
    path: &Path,
) -> Result<(), AlgoError> {
    let out = |e| AlgoError::Output {
        path: path.to_path_buf(),
        source: e,
    };
    let mut file = match comm.rank() {
        0 => Some(AtomicFile::create(path).map_err(out)?),
        _ => None,
    };
    merge_counts(
        comm,
        counts,
        path,
        file.as_mut().map(|f| f.writer() as &mut dyn Write),
    )?;
    if let Some(file) = file {
        file.commit().map_err(out)?;
    }
    // The others wait for rank 0, so nobody reports success before the file exists.
    spillway_comm::Collectives::barrier(comm)?;
    Ok(())
}

/// Writes the `word count` lines of [`write_counts`] to `out` on rank 0 (`None` on the other
/// ranks), in the same order; a collective that leaves committing the output to the caller.
///
/// # Errors
/// [`AlgoError::Output`] naming `path` when writing `out` fails; communication errors.
pub fn merge_counts(
    comm: &Comm,
    counts: &Dataset<Vec<u8>, u64>,
    path: &Path,
    out: Option<&mut dyn Write>,
) -> Result<(), AlgoError> {
    let comm = comm.dup();
    let part = sorted_part(&comm, counts)?;
    let write_error = |e| AlgoError::Output {
        path: path.to_path_buf(),
        source: e,
    };
    let (p, me) = (comm.size(), comm.rank());
    if me == 0 {
        let w = out.expect("rank 0 writes the counts");
        let mut own_pos = 0;
        let mut fetch = |r: usize| -> Result<Vec<u8>, AlgoError> {
            if r == 0 {
                Ok(next_chunk(&part, &mut own_pos))
            } else {
                comm.send(r, REQUEST, &[1u8])?;
                Ok(comm.recv::<u8>(r, CHUNK_TAG)?.0)
            }
        };
        // (chunk, position) per rank; a rank is done when it hands back an empty chunk. The
        // heap holds each rank's next record; a popped word's buffer takes the rank's next.
        let mut cursors: Vec<(Vec<u8>, usize)> = Vec::with_capacity(p);
        let mut heap = BinaryHeap::new();
        for r in 0..p {
            let chunk = fetch(r)?;
            if let Some((count, word, _)) = record(&chunk, 0) {
                heap.push((count, Reverse(word.to_vec()), Reverse(r)));
            }
            cursors.push((chunk, 0));
        }
        let mut line = Vec::with_capacity(64);
        // The top record is written and replaced in place by its rank's next (one sift down
        // per line, no allocation).
        while let Some(mut top) = heap.peek_mut() {
            let (count, Reverse(word), Reverse(r)) = &mut *top;
            line.clear();
            line.extend_from_slice(word);
            line.push(b' ');
            push_decimal(&mut line, *count);
            line.push(b'\n');
            w.write_all(&line).map_err(write_error)?;
            let r = *r;
            let (chunk, pos) = &mut cursors[r];
            let (_, _, next) = record(chunk, *pos).expect("the record just taken");
            *pos = next;
            if *pos == chunk.len() {
                *chunk = fetch(r)?;
                *pos = 0;
            }
            match record(&cursors[r].0, cursors[r].1) {
                Some((c, next, _)) => {
                    *count = c;
                    word.clear();
                    word.extend_from_slice(next);
                }
                None => {
                    PeekMut::pop(top);
                }
            }
        }
        w.flush().map_err(write_error)?;
    } else {
        let mut pos = 0;
        loop {
            comm.recv::<u8>(0, REQUEST)?;
            let chunk = next_chunk(&part, &mut pos);
            comm.send(0, CHUNK_TAG, &chunk)?;
            if chunk.is_empty() {
                break;
            }
        }
    }
    Ok(())
}

const REQUEST: i32 = 1;
const CHUNK_TAG: i32 = 2;
/// Records fetched ahead while a part's records are gathered in sorted order.
const GATHER_AHEAD: usize = 16;

/// Bytes of sorted records handed over at a time.
const CHUNK: usize = 256 << 10;

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The record `[count u64][length u32][word]` at `at`: count, word and the next position.
fn record(bytes: &[u8], at: usize) -> Option<(u64, &[u8], usize)> {
    let head = bytes.get(at..at + 12)?;
    let count = u64::from_le_bytes(head[..8].try_into().expect("8"));
    let len = u32::from_le_bytes(head[8..].try_into().expect("4")) as usize;
    let word = bytes.get(at + 12..at + 12 + len)?;
    Some((count, word, at + 12 + len))
}

/// This rank's counts as records sorted by count descending, then word, in storage.
fn sorted_part(comm: &Comm, counts: &Dataset<Vec<u8>, u64>) -> Result<SbVec<u8>, AlgoError> {
    // Under a memory budget one rank of a node sorts at a time, so the node's heap holds one
    // part's sort buffers; without one the ranks sort at once.
    let rt = comm.runtime();
    let _one_at_a_time = match rt.mem_budget() {
        Some(_) => Some(rt.enter_critical()?),
        None => None,
    };
    let mut buf: Vec<u8> = Vec::new();
    // (count, the word's first 8 bytes big-endian, zero-padded, offset of its record): most
    // comparisons are settled without reading the records.
    let mut keys: Vec<(u64, u64, u64)> = Vec::with_capacity(counts.local_len() as usize);
    counts.for_each(|w, c| {
        let mut head = [0u8; 8];
        let n = w.len().min(8);
        head[..n].copy_from_slice(&w[..n]);
        keys.push((c, u64::from_be_bytes(head), buf.len() as u64));
        buf.extend_from_slice(&c.to_le_bytes());
        buf.extend_from_slice(&(w.len() as u32).to_le_bytes());
        buf.extend_from_slice(&w);
    });
    keys.sort_unstable_by(|a, b| {
        b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then_with(|| {
            let (_, wa, _) = record(&buf, a.2 as usize).expect("a record");
            let (_, wb, _) = record(&buf, b.2 as usize).expect("a record");
            wa.cmp(wb)
        })
    });
    let mut part = SbVec::with_capacity(comm.runtime(), buf.len())?;
    let mut block = Vec::with_capacity(64 << 10);
    // The records are gathered in a random order: each is fetched a few records ahead.
    for (i, k) in keys.iter().enumerate() {
        if let Some(ahead) = keys.get(i + GATHER_AHEAD) {
            spillway_runtime::prefetch(buf.as_ptr().wrapping_add(ahead.2 as usize));
        }
        let o = k.2 as usize;
        let (_, _, end) = record(&buf, o).expect("a record");
        block.extend_from_slice(&buf[o..end]);
        if block.len() >= 64 << 10 {
            part.extend_from_slice(&block)?;
            block.clear();
        }
    }
    part.extend_from_slice(&block)?;
    part.unload();
    Ok(part)
}

/// The next whole records of `part` from `*pos`, about [`CHUNK`] bytes (empty at the end).
fn next_chunk(part: &SbVec<u8>, pos: &mut usize) -> Vec<u8> {
    let len = part.len();
    if *pos >= len {
        return Vec::new();
    }
    let mut want = CHUNK.min(len - *pos);
    loop {
        let window = part.range(*pos..*pos + want);
        let mut at = 0;
        while let Some((_, _, next)) = record(window, at) {
            at = next;
        }
        if at > 0 {
            let chunk = window[..at].to_vec();
            *pos += at;
            return chunk;
        }
        // One record longer than the window.
        want = (2 * want).min(len - *pos);
    }
}

/// Checks that every file can be opened, for a usage error before any work.
///
/// # Errors
/// [`AlgoError::Input`] for the first file that cannot be opened or is a directory.
pub fn check_files(files: &[PathBuf]) -> Result<(), AlgoError> {
    if files.is_empty() {
        return Err(AlgoError::BadParameter {
            name: "--input",
            reason: "no input files".into(),
        });
    }
    for f in files {
        match std::fs::metadata(f) {
            Ok(m) if m.is_dir() => {
                return Err(InputError::new(f, None, "is a directory").into());
            }
            Ok(_) => {
                std::fs::File::open(f).map_err(|e| InputError::io(f, &e))?;
            }
            Err(e) => return Err(InputError::io(f, &e).into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_written_in_decimal() {
        for n in [0, 7, 10, 99, 1234567890, u64::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
        }
    }

    #[test]
    fn words_are_runs_of_non_whitespace_bytes() {
        let mut words = Vec::new();
        for_each_word(b"  a\tbb\x0b\xff\xfe\r\n\x0cc  ", |w| {
            words.push(w.to_vec())
        });
        assert_eq!(
            words,
            [
                b"a".to_vec(),
                b"bb".to_vec(),
                vec![0xff, 0xfe],
                b"c".to_vec()
            ]
        );
        let mut none = 0;
        for_each_word(b" \n\t ", |_| none += 1);
        assert_eq!(none, 0);
    }
}
