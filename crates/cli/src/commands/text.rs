//! `run wordcount`: word count as MapReduce (with a combiner and local aggregation).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use spillway::algorithms::text::wordcount::{merge_counts, word_count_surviving, WordCountOptions};
use spillway::mapreduce::NodeAggregation;
use spillway::{ByteSize, Collectives, Comm, Max};

use crate::commands::ft::{unless_lost, with_restarts, FtArgs};
use crate::driver::{
    Command, Declared, Estimate, Failure, Inputs, Job, RankOut, RuntimeArgs, Timing, MAPREDUCE_RANK,
};
use crate::options::{named, nonzero_size};

/// `run wordcount`.
#[derive(Args, Debug)]
pub(crate) struct WordCount {
    /// Text files (any bytes; words are maximal runs of non-whitespace bytes); `-` reads
    /// standard input.
    #[arg(long, required = true, num_args = 1..)]
    input: Vec<PathBuf>,
    /// Output: "word count" lines, by count descending, then by the word's bytes.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Send every word occurrence through the shuffle (no combiner).
    #[arg(long)]
    no_combine: bool,
    /// Local aggregation across the ranks of a node: auto (with a combiner and more than one
    /// node), on (whenever a node runs more than one rank), off.
    #[arg(long, default_value = "auto", value_parser = named::<NodeAggregation>())]
    node_aggregation: NodeAggregation,
    /// Heap allowance of each rank for MapReduce buffers (e.g. 4M; default: from the memory
    /// budget, unbounded without one); beyond it, sorted runs spill.
    #[arg(long, value_name = "SIZE", value_parser = nonzero_size)]
    mr_memory: Option<ByteSize>,
    /// Bytes of text read at a time (under a memory budget, at most an eighth of a rank's
    /// share of it).
    #[arg(long, default_value = "4M", value_parser = nonzero_size)]
    chunk: ByteSize,
    #[command(flatten)]
    ft: FtArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// What `run wordcount` reports.
#[derive(Debug, Serialize)]
pub(crate) struct WordCountFacts {
    input_bytes: u64,
    words: u64,
    distinct_words: u64,
    input_bytes_per_second: f64,
}

impl Command for WordCount {
    const NAME: &'static str = "wordcount";
    type Facts = WordCountFacts;

    fn declare(&self) -> Declared<'_> {
        self.input
            .iter()
            .fold(Declared::job(&self.runtime), |d, path| {
                d.input("--input", Some(path))
            })
            .output("--out", self.out.as_deref())
    }

    fn check(&self) -> Result<(), Failure> {
        self.ft.check(&self.runtime)
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        // The text is read in chunks; every rank counts the words of its share in tables of
        // its own (about 16 bytes a byte of its share while the words are new, assumed to
        // level off at 1 MiB: a vocabulary of natural text), whose records then go through
        // MapReduce.
        let bytes: u64 = self.input.iter().map(|f| inputs.bytes(f)).sum();
        let first = self.input.first().map_or(Path::new("-"), PathBuf::as_path);
        let share = bytes / u64::from(self.runtime.ranks.max(1));
        let tables = share.saturating_mul(16).min(1 << 20);
        Ok(Estimate::of_input(first, bytes, 1).ranks(MAPREDUCE_RANK.0 + tables, MAPREDUCE_RANK.1))
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<WordCountFacts>, Failure> {
        let files: Vec<PathBuf> = self.input.iter().map(|f| job.input(f)).collect();
        let bytes: u64 = self.input.iter().map(|f| job.input_bytes(f)).sum();
        let options = WordCountOptions {
            combine: !self.no_combine,
            node_aggregation: self.node_aggregation,
            memory: self.mr_memory.and_then(|m| m.to_usize()),
            chunk: self.chunk.to_usize().unwrap_or(usize::MAX),
            fault_tolerance: self.ft.settings(),
        };
        let out: Option<&Path> = self.out.as_deref();
        self.ft.spmd(job, 1, "wordcount", |rank, _| {
            let world = Comm::world(rank);
            let t = Instant::now();
            // A loss after the operation (while the result is counted and written) makes the
            // survivors count again and call this again: the times and the report are of the
            // last count, the restarts join the recoveries.
            unless_lost(word_count_surviving(
                &world,
                &files,
                &options,
                &mut |wc, restarts| {
                    let comm = &wc.comm;
                    let compute = comm.allreduce(&[t.elapsed().as_secs_f64()], Max)?[0];
                    let compute = Duration::from_secs_f64(compute);
                    let distinct = wc.counts.count(comm)?;
                    if let Some(path) = out {
                        job.write_root(comm, path, |w| merge_counts(comm, &wc.counts, path, w))?;
                    }
                    let facts = WordCountFacts {
                        input_bytes: bytes,
                        words: wc.stats.records_emitted,
                        distinct_words: distinct,
                        input_bytes_per_second: bytes as f64 / compute.as_secs_f64().max(1e-12),
                    };
                    let ft = with_restarts(
                        wc.ft.as_ref(),
                        restarts,
                        1,
                        "after the operation: counted again",
                    );
                    Ok(RankOut::of(
                        comm,
                        facts,
                        Timing::mapreduce(
                            1,
                            vec![compute],
                            Duration::ZERO,
                            compute,
                            std::slice::from_ref(&wc.stats),
                            ft,
                        ),
                    ))
                },
            ))
        })
    }
}
