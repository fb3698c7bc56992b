//! `mapreduce`: word count on spillway's MapReduce against a sequential `HashMap` count of
//! the same file, measured in the same run, with and without the combiner.
//!
//! # What is timed
//! * baseline: one thread reads the file in 4 MiB chunks (whole words per chunk, as the
//!   MapReduce input does) and counts into a `std::collections::HashMap<Vec<u8>, u64>`
//!   with the standard hasher; the key is allocated only for a new word.
//! * spillway: `run` of a job whose ranks call [`word_count`] (launch and the gather of
//!   the counts are outside the timed part): from a barrier before the operation to a
//!   barrier after it, on rank 0.
//!
//! The counts of every spillway configuration are compared with the baseline's before
//! anything is reported: a fast wrong answer is not a measurement.

use std::collections::HashMap;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spillway::algorithms::text::wordcount::{for_each_word, word_count, WordCountOptions};
use spillway::mapreduce::{NodeAggregation, OpStats};
use spillway::{run, ByteSize, Collectives, Comm, Config};

use crate::harness::{format_duration, format_size, BoxError, Stats};

/// Arguments of `spillway-bench mapreduce`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Text file to count; generated (`--generate` bytes) if it does not exist. Default: a
    /// generated file in a temporary directory.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Only generate the text (at `--input`), then exit.
    #[arg(long)]
    generate_only: bool,
    /// Size of the generated text (Zipf-like words "w<id>" over a 1M-word vocabulary).
    #[arg(long, default_value = "256M")]
    generate: ByteSize,
    /// Rank counts of the spillway runs (one node; running = min(ranks, cores)).
    #[arg(long, default_value = "1,2", value_delimiter = ',')]
    ranks: Vec<u32>,
    /// Virtual nodes of the spillway runs.
    #[arg(long, default_value_t = 1)]
    nodes: u32,
    /// Repetitions of every measurement.
    #[arg(long, default_value_t = 3)]
    reps: usize,
}

/// Writes a text of about `bytes` bytes: words `w<id>` with `id = floor(1e6 * u^4)` for a
/// uniform `u` (a few frequent words, a long tail), separated by spaces and newlines.
fn generate(path: &Path, bytes: usize) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut written = 0;
    let mut line = Vec::with_capacity(128);
    while written < bytes {
        line.clear();
        for i in 0..12 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            let id = (1e6 * u * u * u * u) as u64;
            if i > 0 {
                line.push(b' ');
            }
            write!(line, "w{id}")?;
        }
        line.push(b'\n');
        w.write_all(&line)?;
        written += line.len();
    }
    w.flush()
}

/// The sequential count: 4 MiB chunks, whole words per chunk.
fn sequential_count(path: &Path) -> std::io::Result<HashMap<Vec<u8>, u64>> {
    let mut f = std::fs::File::open(path)?;
    let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut buf = vec![0u8; 4 << 20];
    let mut carry = 0;
    loop {
        let n = f.read(&mut buf[carry..])?;
        let end = carry + n;
        let cut = if n == 0 {
            end
        } else {
            buf[..end]
                .iter()
                .rposition(spillway::mapreduce::is_space)
                .map_or(0, |k| k + 1)
        };
        for_each_word(&buf[..cut], |w| match counts.get_mut(w) {
            Some(c) => *c += 1,
            None => {
                counts.insert(w.to_vec(), 1);
            }
        });
        if n == 0 {
            break;
        }
        buf.copy_within(cut..end, 0);
        carry = end - cut;
        if carry == buf.len() {
            buf.resize(2 * buf.len(), 0);
        }
    }
    Ok(counts)
}

/// Words and their counts.
type Counts = Vec<(Vec<u8>, u64)>;

/// One spillway word count: (time of the operation, its statistics, the counts).
fn spillway_count(
    path: &Path,
    ranks: u32,
    nodes: u32,
    options: &WordCountOptions,
) -> Result<(Duration, OpStats, Counts), BoxError> {
    let config = Config::new(ranks).nodes(nodes);
    let files = vec![path.to_path_buf()];
    let out = run(&config, |rank| {
        let world = Comm::world(rank);
        world.barrier()?;
        let t = Instant::now();
        let wc = word_count(&world, &files, options)?;
        let (counts, stats) = (wc.counts, wc.stats);
        world.barrier()?;
        let time = t.elapsed();
        let all = counts.gather(&world, 0)?;
        Ok::<_, spillway::algorithms::AlgoError>((time, stats, all))
    })
    .map_err(|e| format!("spillway word count failed: {e}"))?;
    let (time, stats, all) = out.into_iter().next().expect("rank 0");
    Ok((time, stats, all.expect("rank 0 gathers")))
}

/// Runs the benchmark and prints a Markdown table.
///
/// # Errors
/// Unreadable input, a failed job, or counts that differ from the baseline's.
pub fn main(args: Args) -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let path = args
        .input
        .clone()
        .unwrap_or_else(|| dir.path().join("text.txt"));
    if !path.exists() {
        let bytes = args.generate.to_usize().ok_or("--generate too large")?;
        eprintln!("generating {} of text", format_size(bytes));
        generate(&path, bytes)?;
    }
    if args.generate_only {
        return Ok(());
    }
    let size = std::fs::metadata(&path)?.len() as usize;
    eprintln!("sequential HashMap count");
    let mut times = Vec::new();
    let mut reference = HashMap::new();
    for _ in 0..args.reps {
        let t = Instant::now();
        reference = sequential_count(&path)?;
        times.push(t.elapsed());
    }
    let base = Stats::of(&times);
    let words: u64 = reference.values().sum();
    println!(
        "word count of {} ({} words, {} distinct), {} repetitions, medians\n",
        format_size(size),
        words,
        reference.len(),
        args.reps
    );
    println!(
        "| system | ranks | time | MB/s | vs HashMap | shuffled bytes | combine s | shuffle s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| sequential HashMap | 1 | {} | {:.0} | 1.00 | - | - | - |",
        format_duration(base.median),
        size as f64 / base.median.as_secs_f64() / 1e6,
    );
    for &ranks in &args.ranks {
        for combine in [true, false] {
            let options = WordCountOptions {
                combine,
                node_aggregation: NodeAggregation::Auto,
                ..WordCountOptions::default()
            };
            eprintln!("spillway: {ranks} ranks, combine {combine}");
            let mut times = Vec::new();
            let mut last = None;
            for _ in 0..args.reps {
                let (t, stats, counts) = spillway_count(&path, ranks, args.nodes, &options)?;
                if counts.len() != reference.len()
                    || counts.iter().any(|(w, c)| reference.get(w) != Some(c))
                {
                    return Err(format!(
                        "spillway's counts ({ranks} ranks, combine {combine}) differ from the \
                         sequential count"
                    )
                    .into());
                }
                times.push(t);
                last = Some(stats);
            }
            let s = Stats::of(&times);
            let stats = last.expect("at least one repetition");
            println!(
                "| spillway{} | {ranks} | {} | {:.0} | {:.2} | {} | {:.3} | {:.3} |",
                if combine { "" } else { " (no combiner)" },
                format_duration(s.median),
                size as f64 / s.median.as_secs_f64() / 1e6,
                base.median.as_secs_f64() / s.median.as_secs_f64(),
                stats.bytes_shuffled,
                stats.combine.as_secs_f64(),
                stats.shuffle.as_secs_f64(),
            );
        }
    }
    Ok(())
}
