//! Word count as MapReduce (thesis algorithms 2-3): words are maximal runs of bytes that
//! are not ASCII whitespace ([`is_space`]); they need not be UTF-8.

use std::io::Write;
use std::path::{Path, PathBuf};

use spillway_comm::Comm;
use spillway_mapreduce::{is_space, Dataset, MapReduce, NodeAggregation, OpStats, TextFiles};

use crate::error::AlgoError;
use crate::input::{AtomicFile, InputError};

/// How to count.
#[derive(Debug, Clone)]
pub struct WordCountOptions {
    /// Combine counts before the shuffle (within a rank, and within a node across nodes).
    pub combine: bool,
    /// Local aggregation across the ranks of a node.
    pub node_aggregation: NodeAggregation,
    /// The heap allowance of each rank (default: derived from the memory budget).
    pub memory: Option<usize>,
    /// Bytes of text read at a time.
    pub chunk: usize,
}

impl Default for WordCountOptions {
    fn default() -> Self {
        WordCountOptions {
            combine: true,
            node_aggregation: NodeAggregation::Auto,
            memory: None,
            chunk: 4 << 20,
        }
    }
}

/// Counts the words of `files` (one MapReduce operation); every rank returns its part of
/// the counts (the words whose hash it owns) and the operation's statistics over all ranks.
///
/// # Errors
/// [`AlgoError::Input`] naming a file that cannot be read (the same on every rank);
/// communication and spill errors.
pub fn word_count(
    comm: &Comm,
    files: &[PathBuf],
    options: &WordCountOptions,
) -> Result<(Dataset<Vec<u8>, u64>, OpStats), AlgoError> {
    let mut mr = MapReduce::new(comm).node_aggregation(options.node_aggregation);
    if let Some(m) = options.memory {
        mr = mr.memory(m);
    }
    // Every rank opens every file, so all of them report the same unreadable file.
    let input = TextFiles::open(comm, files, options.chunk)?;
    let map = |_: u64, text: Vec<u8>, emit: &mut spillway_mapreduce::Emitter<'_, Vec<u8>, u64>| {
        for_each_word(&text, |w| emit.emit_raw_key(w, 1));
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
    let stats = mr.stats()[0].total(comm)?;
    Ok((counts, stats))
}

/// Calls `f` with every word of `text`.
#[inline]
pub fn for_each_word(text: &[u8], mut f: impl FnMut(&[u8])) {
    let mut i = 0;
    let n = text.len();
    while i < n {
        while i < n && is_space(&text[i]) {
            i += 1;
        }
        let start = i;
        while i < n && !is_space(&text[i]) {
            i += 1;
        }
        if i > start {
            f(&text[start..i]);
        }
    }
}

/// Writes `counts` to `path` at rank 0 as "word count" lines, by count descending, then by
/// the word's bytes (the words are written as they are, bytes and all); a collective.
///
/// # Semantics
/// The counts are gathered at rank 0 (the distinct words must fit in its memory); the file
/// appears only when complete.
///
/// # Errors
/// [`AlgoError::Output`] naming the path; communication errors.
pub fn write_counts(
    comm: &Comm,
    counts: &Dataset<Vec<u8>, u64>,
    path: &Path,
) -> Result<(), AlgoError> {
    let all = counts.gather(comm, 0)?;
    if let Some(mut all) = all {
        all.sort_unstable_by(|(wa, ca), (wb, cb)| cb.cmp(ca).then_with(|| wa.cmp(wb)));
        let out = |e| AlgoError::Output {
            path: path.to_path_buf(),
            source: e,
        };
        let mut file = AtomicFile::create(path).map_err(out)?;
        let w = file.writer();
        for (word, count) in &all {
            w.write_all(word).map_err(out)?;
            writeln!(w, " {count}").map_err(out)?;
        }
        file.commit().map_err(out)?;
    }
    // The others wait for rank 0, so nobody reports success before the file exists.
    spillway_comm::Collectives::barrier(comm)?;
    Ok(())
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
