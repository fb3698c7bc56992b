//! `serial-ooc`: a hand-written serial out-of-core PageRank, the "Serial-ooc" baseline of the
//! BDMPI paper: the program a competent user writes by hand when the graph does not fit in
//! memory but its vertices do.
//!
//! ```text
//! spillway-bench serial-ooc build (--generate rmat:S:E[:SEED] | --edge-list FILE) --out FILE
//! spillway-bench serial-ooc pagerank --graph FILE [--iterations 10] [--damping 0.85]
//!                                    [--io direct|buffered|memory] [--chunk 16M] [--buffers 2]
//!                                    [--out RANKS] [--json]
//! spillway-bench serial-ooc compare A B [--tolerance 1e-9]
//! spillway-bench serial-ooc ratings --generate ratings:U:I:AVG[:SEED] [--seed 1] --out FILE
//! spillway-bench serial-ooc sgd --ratings FILE [--iterations 10] [--factors 10]
//!                               [--learning-rate 0.01] [--regularisation 0.05] [--seed 1]
//!                               [--io direct|buffered] [--chunk 16M] [--json]
//! spillway-bench serial-ooc docs --generate zipf:DOCS:TERMS:AVG[:SEED] --out FILE
//! spillway-bench serial-ooc spkmeans --docs FILE --k K [--iterations 10] [--io direct|buffered]
//!                                    [--chunk 16M] [--json]
//! ```
//!
//! `ratings` and `sgd`, `docs` and `spkmeans`: the same for SGD matrix factorisation and
//! spherical K-means (their modules say how).
//!
//! # `build`
//! Writes the graph as a binary CSR file ([`csr_file`]: row offsets as u64, targets as u32,
//! sorted by source, each row in input order). `--generate` takes the R-MAT generator of
//! `spillway run pagerank --generate` (`RmatSpec`, seed 1 unless given), so the graph is the
//! one spillway builds; `--edge-list` a SNAP edge list ("src dst" per line, `#` comments) with
//! N = 1 + the largest id, as spillway reads it. The edges are produced twice (a pass to count
//! the degrees, a pass to place the targets): memory is the targets (4 bytes an edge) and two
//! words a vertex.
//!
//! # `pagerank`
//! Memory holds the vertex arrays: the ranks `x` and the sums `next` (f64 each) and the
//! out-degrees (u32), read once from the row offsets at the start: 20 bytes a vertex, plus the
//! read buffers. Every iteration streams the targets from the file once, in large sequential
//! reads (`--chunk`, 16 MiB) on a reader thread that stays `--buffers` chunks ahead (double
//! buffering: the disk and the computation overlap), and pushes `x(u) / deg(u)` along each
//! edge into `next`; then `x(v) = (1 - d) / N + d * (next(v) + D / N)`, with `D` the rank of
//! the vertices without out-edges. These are the semantics of spillway's `pagerank`
//! (column-stochastic, dangling mass spread uniformly, start `1/N`): the results agree to
//! rounding. `--io memory` reads the targets into memory once instead (the in-memory
//! reference); `direct` (the default) uses `O_DIRECT`, `buffered` the page cache with
//! sequential read-ahead and each range dropped behind the reads.
//!
//! Prints the time of every iteration and the ranks' sum and checksum (`sum v * x(v)` over
//! the vertices); `--json` prints them as one JSON object instead; `--out` writes
//! "vertex rank" per line, as `spillway run pagerank --out` does.
//!
//! # `compare`
//! The L1 distance between two rank files ("vertex rank" per line, or raw little-endian f64
//! values in vertex order for a name ending in `.f64`); fails when it exceeds `--tolerance`.

mod csr_file;
mod sgd;
mod spkmeans;
mod stream;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;
use spillway::algorithms::generate::RmatSpec;
use spillway::algorithms::io::{parse_snap_chunk, AtomicFile};
use spillway::ByteSize;

use crate::harness::{format_duration, BoxError};
use csr_file::Header;
use stream::{stream, Consumer, Io, Shape, Source};

/// Arguments of `spillway-bench serial-ooc`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Writes a graph as a binary CSR file (R-MAT as spillway generates it, or an edge list).
    Build(BuildArgs),
    /// PageRank streaming the CSR file's targets from the disk once per iteration.
    Pagerank(RunArgs),
    /// The L1 distance between two rank files.
    Compare(CompareArgs),
    /// Writes generated ratings, shuffled once, as a binary file for `sgd`.
    Ratings(sgd::RatingsArgs),
    /// SGD matrix factorisation streaming the ratings file from the disk every iteration.
    Sgd(sgd::SgdArgs),
    /// Writes generated documents (Zipf rows), normalised, as a binary file for `spkmeans`.
    Docs(spkmeans::DocsArgs),
    /// Spherical K-means streaming the documents file from the disk every iteration.
    Spkmeans(spkmeans::SpkmeansArgs),
}

/// Arguments of `serial-ooc build`.
#[derive(clap::Args, Debug)]
struct BuildArgs {
    /// R-MAT graph: rmat:SCALE:EDGEFACTOR[:SEED], as `spillway run pagerank --generate`.
    #[arg(
        long,
        conflicts_with = "edge_list",
        required_unless_present = "edge_list"
    )]
    generate: Option<String>,
    /// SNAP edge list ("src dst" per line, '#' comments).
    #[arg(long)]
    edge_list: Option<PathBuf>,
    /// The CSR file to write (atomically).
    #[arg(long)]
    out: PathBuf,
}

/// How `serial-ooc pagerank` reads the targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// `O_DIRECT` reads every iteration.
    Direct,
    /// Buffered reads every iteration, dropped from the page cache behind.
    Buffered,
    /// Read once into memory (the in-memory reference).
    Memory,
}

/// Arguments of `serial-ooc pagerank`.
#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The CSR file of `serial-ooc build`.
    #[arg(long)]
    graph: PathBuf,
    /// Iterations.
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Damping factor, in [0, 1).
    #[arg(long, default_value_t = 0.85)]
    damping: f64,
    /// How the targets are read.
    #[arg(long, value_enum, default_value = "direct")]
    io: Mode,
    /// Bytes per read (a multiple of 4 KiB).
    #[arg(long, default_value = "16M")]
    chunk: ByteSize,
    /// Read buffers (the reader thread fills all but the one being consumed).
    #[arg(long, default_value_t = 2)]
    buffers: usize,
    /// Writes "vertex rank" per line (atomically).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Prints one JSON object on standard output (the progress goes to standard error).
    #[arg(long)]
    json: bool,
}

/// Arguments of `serial-ooc compare`.
#[derive(clap::Args, Debug)]
struct CompareArgs {
    /// Rank file ("vertex rank" per line, or raw f64 for a name ending in `.f64`).
    a: PathBuf,
    /// The other rank file.
    b: PathBuf,
    /// Largest accepted L1 distance.
    #[arg(long, default_value_t = 1e-9)]
    tolerance: f64,
}

/// Runs the subcommand.
pub fn main(args: Args) -> Result<(), BoxError> {
    match args.command {
        Command::Build(a) => build(a),
        Command::Pagerank(a) => pagerank(a),
        Command::Compare(a) => compare(a),
        Command::Ratings(a) => sgd::ratings(a),
        Command::Sgd(a) => sgd::sgd(a),
        Command::Docs(a) => spkmeans::docs(a),
        Command::Spkmeans(a) => spkmeans::spkmeans(a),
    }
}

// ---------------------------------------------------------------------------------------------
// build

/// What receives the edges `(src, dst)`, a batch per call, in their order.
type Sink<'a> = dyn FnMut(&[(u32, u32)]) + 'a;

/// Delivers all the edges to a [`Sink`] (every call delivers them again).
type Replay<'a> = dyn FnMut(&mut Sink<'_>) -> Result<(), BoxError> + 'a;

/// Edges per piece generated by one thread.
const PIECE: u64 = 1 << 22;

/// Calls `f` on the edges of `spec` in index order, generated in parallel pieces.
fn replay_rmat(spec: &RmatSpec, f: &mut Sink<'_>) -> Result<(), BoxError> {
    let m = spec.num_edges();
    let batch = PIECE * rayon::current_num_threads().max(1) as u64;
    let mut at = 0;
    while at < m {
        let end = (at + batch).min(m);
        let pieces: Vec<Vec<(u32, u32)>> = (at..end)
            .step_by(PIECE as usize)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|s| {
                let mut v = Vec::new();
                spec.edges(s..(s + PIECE).min(end), &mut v);
                v
            })
            .collect();
        for piece in &pieces {
            f(piece);
        }
        at = end;
    }
    Ok(())
}

/// Calls `f` on the edges of the SNAP edge list at `path`, read in chunks of 64 MiB that end
/// at a line's end.
fn replay_edge_list(path: &Path, f: &mut Sink<'_>) -> Result<(), BoxError> {
    const CHUNK: usize = 64 << 20;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut reader = std::io::BufReader::with_capacity(CHUNK, file);
    let mut text = Vec::with_capacity(CHUNK + 4096);
    let mut line = 0u64;
    loop {
        text.clear();
        // Whole lines up to about CHUNK bytes.
        while text.len() < CHUNK {
            if reader.read_until(b'\n', &mut text)? == 0 {
                break;
            }
        }
        if text.is_empty() {
            return Ok(());
        }
        let chunk = parse_snap_chunk(&text);
        f(&chunk.edges);
        if let Some((at, reason)) = chunk.error {
            return Err(format!("{}: line {}: {reason}", path.display(), line + at + 1).into());
        }
        line += text.iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

/// Builds the CSR of the edges that `replay` delivers (twice): `n` is at least `n_min` and
/// above every id. Each row keeps its edges in their input order.
fn build_csr(n_min: u64, replay: &mut Replay<'_>) -> Result<(Vec<u64>, Vec<u32>), BoxError> {
    let mut degree = vec![0u64; n_min as usize];
    let mut m = 0u64;
    replay(&mut |edges| {
        for &(s, d) in edges {
            let top = s.max(d) as usize;
            if top >= degree.len() {
                degree.resize(top + 1, 0);
            }
            degree[s as usize] += 1;
        }
        m += edges.len() as u64;
    })?;
    // Row offsets, in place.
    let mut offsets = degree;
    let mut sum = 0u64;
    for o in offsets.iter_mut() {
        let d = *o;
        *o = sum;
        sum += d;
    }
    offsets.push(sum);
    let mut fill = offsets.clone();
    let mut targets = vec![0u32; usize::try_from(m)?];
    let mut placed = 0u64;
    replay(&mut |edges| {
        for &(s, d) in edges {
            let slot = &mut fill[s as usize];
            // A second pass that differs from the first cannot overflow a row.
            if *slot < offsets[s as usize + 1] {
                targets[*slot as usize] = d;
                *slot += 1;
                placed += 1;
            }
        }
    })?;
    if placed != m {
        return Err("the edges changed between the two passes".into());
    }
    Ok((offsets, targets))
}

fn build(a: BuildArgs) -> Result<(), BoxError> {
    let start = Instant::now();
    let (offsets, targets) = match (&a.generate, &a.edge_list) {
        (Some(g), _) => {
            let spec = RmatSpec::parse(g)?;
            eprintln!(
                "serial-ooc build: {g}: {} vertices, {} edges",
                spec.num_vertices(),
                spec.num_edges()
            );
            build_csr(spec.num_vertices(), &mut |f| replay_rmat(&spec, f))?
        }
        (None, Some(path)) => build_csr(0, &mut |f| replay_edge_list(path, f))?,
        (None, None) => return Err("give --generate or --edge-list".into()),
    };
    if offsets.len() < 2 {
        return Err("the graph has no vertices".into());
    }
    let built = start.elapsed();
    csr_file::write(&a.out, &offsets, &targets)?;
    let header = Header::new(offsets.len() as u64 - 1, targets.len() as u64);
    println!(
        "{}: {} vertices, {} edges, {} bytes (built in {}, written in {})",
        a.out.display(),
        header.n,
        header.m,
        header.file_len(),
        format_duration(built),
        format_duration(start.elapsed() - built)
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// pagerank

/// The push of one iteration over the streamed targets: row `row` has `left` edges still to
/// come, each carrying `c`.
struct Push<'a> {
    degree: &'a [u32],
    x: &'a mut [f64],
    next: &'a mut [f64],
    damping: f64,
    row: usize,
    left: u32,
    c: f64,
    dangling: f64,
    /// Per completed iteration: seconds and L1 change.
    done: Vec<(f64, f64)>,
    started: Instant,
    verbose: bool,
}

impl Push<'_> {
    /// Pushes the targets of one chunk (the rows continue from the last chunk's).
    fn push(&mut self, targets: &[u32]) -> Result<(), BoxError> {
        let n = self.degree.len();
        let mut t = targets;
        while !t.is_empty() {
            if self.left == 0 {
                // The next row with out-edges; the rows without any give their rank to all.
                loop {
                    let u = self.row;
                    if u >= n {
                        return Err("the file has more targets than its rows hold".into());
                    }
                    self.row += 1;
                    let d = self.degree[u];
                    if d == 0 {
                        self.dangling += self.x[u];
                    } else {
                        self.left = d;
                        self.c = self.x[u] * (1.0 / f64::from(d));
                        break;
                    }
                }
            }
            let k = (self.left as usize).min(t.len());
            let c = self.c;
            for &v in &t[..k] {
                self.next[v as usize] += c;
            }
            self.left -= k as u32;
            t = &t[k..];
        }
        Ok(())
    }

    /// Ends an iteration: the rows after the last edge, then the new ranks.
    fn finish(&mut self) -> Result<(), BoxError> {
        if self.left != 0 {
            return Err("the file has fewer targets than its rows hold".into());
        }
        for u in self.row..self.degree.len() {
            if self.degree[u] != 0 {
                return Err("the file has fewer targets than its rows hold".into());
            }
            self.dangling += self.x[u];
        }
        let nf = self.x.len() as f64;
        let d = self.damping;
        let base = (1.0 - d) / nf + d * self.dangling / nf;
        let mut delta = 0.0;
        for (xv, s) in self.x.iter_mut().zip(self.next.iter_mut()) {
            let new = base + d * *s;
            delta += (new - *xv).abs();
            *xv = new;
            *s = 0.0;
        }
        self.row = 0;
        self.dangling = 0.0;
        let secs = self.started.elapsed().as_secs_f64();
        if self.verbose {
            eprintln!(
                "iteration {}: {secs:.3} s, L1 change {delta:.6e}",
                self.done.len()
            );
        }
        self.done.push((secs, delta));
        self.started = Instant::now();
        Ok(())
    }
}

impl Consumer for Push<'_> {
    fn chunk(&mut self, bytes: &[u8]) -> Result<(), BoxError> {
        self.push(bytemuck::try_cast_slice(bytes).map_err(|e| format!("targets: {e}"))?)
    }
    fn pass_done(&mut self, _: usize) -> Result<(), BoxError> {
        self.finish()
    }
}

/// Collects the out-degrees from the streamed row offsets.
struct Degrees {
    degree: Vec<u32>,
    last: Option<u64>,
}

impl Consumer for Degrees {
    fn chunk(&mut self, bytes: &[u8]) -> Result<(), BoxError> {
        let offsets: &[u64] =
            bytemuck::try_cast_slice(bytes).map_err(|e| format!("row offsets: {e}"))?;
        for &o in offsets {
            if let Some(prev) = self.last {
                let d = o
                    .checked_sub(prev)
                    .and_then(|d| u32::try_from(d).ok())
                    .ok_or("row offsets that decrease or a row of 2^32 edges or more")?;
                self.degree.push(d);
            }
            self.last = Some(o);
        }
        Ok(())
    }
    fn pass_done(&mut self, _: usize) -> Result<(), BoxError> {
        Ok(())
    }
}

/// What `serial-ooc pagerank --json` prints.
#[derive(Debug, Serialize)]
struct Report {
    vertices: u64,
    edges: u64,
    io: &'static str,
    chunk_bytes: u64,
    buffers: usize,
    iterations: usize,
    /// Opening the file and reading the degrees (and, in memory, the targets).
    load_seconds: f64,
    iteration_seconds: Vec<f64>,
    final_l1_change: f64,
    rank_sum: f64,
    /// `sum over v of v * x(v)`: changes when ranks move between vertices.
    checksum: f64,
    /// Bytes this program read from the file (aligned reads included).
    file_bytes_read: u64,
    /// Bytes the vertex arrays and the read buffers take.
    memory_bytes: u64,
}

fn pagerank(a: RunArgs) -> Result<(), BoxError> {
    if !(0.0..1.0).contains(&a.damping) {
        return Err("--damping must be in [0, 1)".into());
    }
    let chunk = usize::try_from(a.chunk.0)?;
    if chunk == 0 || !(chunk as u64).is_multiple_of(csr_file::ALIGN) {
        return Err("--chunk must be a positive multiple of 4K".into());
    }
    let buffers = a.buffers.max(1);
    let start = Instant::now();
    let header = Header::read(&a.graph)?;
    if header.n == 0 {
        return Err(format!("{}: no vertices", a.graph.display()).into());
    }
    let n = header.n as usize;
    let io = match a.io {
        Mode::Direct => Io::Direct,
        Mode::Buffered | Mode::Memory => Io::Buffered,
    };
    let source = Source::open(&a.graph, io)?;
    let shape = Shape { chunk, buffers };
    let mut degrees = Degrees {
        degree: Vec::with_capacity(n),
        last: None,
    };
    let mut file_bytes_read = stream(&source, header.offsets(), shape, 1, &mut degrees)?;
    let degree = degrees.degree;
    if degrees.last != Some(header.m) || degree.len() != n {
        return Err(format!("{}: the row offsets do not end at m", a.graph.display()).into());
    }
    let in_memory = if a.io == Mode::Memory {
        let mut targets = Vec::with_capacity(header.m as usize);
        struct Keep<'a>(&'a mut Vec<u32>);
        impl Consumer for Keep<'_> {
            fn chunk(&mut self, bytes: &[u8]) -> Result<(), BoxError> {
                let t: &[u32] = bytemuck::try_cast_slice(bytes).map_err(|e| e.to_string())?;
                self.0.extend_from_slice(t);
                Ok(())
            }
            fn pass_done(&mut self, _: usize) -> Result<(), BoxError> {
                Ok(())
            }
        }
        file_bytes_read += stream(&source, header.targets(), shape, 1, &mut Keep(&mut targets))?;
        Some(targets)
    } else {
        None
    };
    let mut x = vec![1.0 / n as f64; n];
    let mut next = vec![0.0f64; n];
    let load = start.elapsed();
    let verbose = !a.json;
    if verbose {
        println!(
            "serial-ooc pagerank: {} vertices, {} edges, {} reads of {}, load {}",
            header.n,
            header.m,
            match (a.io, source.io()) {
                (Mode::Memory, _) => "in-memory",
                (_, Io::Direct) => "direct",
                (_, Io::Buffered) => "buffered",
            },
            ByteSize(chunk as u64),
            format_duration(load)
        );
    }
    let mut push = Push {
        degree: &degree,
        x: &mut x,
        next: &mut next,
        damping: a.damping,
        row: 0,
        left: 0,
        c: 0.0,
        dangling: 0.0,
        done: Vec::with_capacity(a.iterations),
        started: Instant::now(),
        verbose,
    };
    match &in_memory {
        Some(targets) => {
            for _ in 0..a.iterations {
                push.push(targets)?;
                push.finish()?;
            }
        }
        None => {
            file_bytes_read += stream(&source, header.targets(), shape, a.iterations, &mut push)?;
        }
    }
    let done = std::mem::take(&mut push.done);
    drop(push);
    let rank_sum: f64 = x.iter().sum();
    let checksum: f64 = x.iter().enumerate().map(|(v, r)| v as f64 * r).sum();
    let memory_bytes = 20 * header.n
        + match &in_memory {
            Some(t) => 4 * t.len() as u64,
            None => (buffers * chunk) as u64,
        };
    if let Some(path) = &a.out {
        write_ranks(path, &x)?;
    }
    let report = Report {
        vertices: header.n,
        edges: header.m,
        io: match (a.io, source.io()) {
            (Mode::Memory, _) => "memory",
            (_, Io::Direct) => "direct",
            (_, Io::Buffered) => "buffered",
        },
        chunk_bytes: chunk as u64,
        buffers,
        iterations: done.len(),
        load_seconds: load.as_secs_f64(),
        iteration_seconds: done.iter().map(|d| d.0).collect(),
        final_l1_change: done.last().map_or(0.0, |d| d.1),
        rank_sum,
        checksum,
        file_bytes_read,
        memory_bytes,
    };
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let later = &report.iteration_seconds[1.min(done.len())..];
        let mean = later.iter().sum::<f64>() / later.len().max(1) as f64;
        println!(
            "{} iterations: {mean:.3} s each after the first; rank sum {rank_sum:.12}, \
             checksum {checksum:.9e}; {} read from the file",
            done.len(),
            ByteSize(file_bytes_read)
        );
    }
    Ok(())
}

/// Writes "vertex rank" per line, as `spillway run pagerank --out` does.
fn write_ranks(path: &Path, x: &[f64]) -> Result<(), BoxError> {
    let mut file =
        AtomicFile::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let w = file.writer();
    for (v, r) in x.iter().enumerate() {
        writeln!(w, "{v} {r}")?;
    }
    file.commit()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// compare

/// The ranks of a rank file: "vertex rank" lines (any order, every vertex once), or raw f64.
fn read_ranks(path: &Path) -> Result<Vec<f64>, BoxError> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if path.extension().is_some_and(|e| e == "f64") {
        if bytes.len() % 8 != 0 {
            return Err(format!("{}: not a whole number of f64", path.display()).into());
        }
        return Ok(bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect());
    }
    let text = std::str::from_utf8(&bytes)?;
    let mut x: Vec<f64> = Vec::new();
    let mut seen: Vec<bool> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = || format!("{}: line {}: not \"vertex rank\"", path.display(), i + 1);
        let (v, r) = line.trim().split_once(' ').ok_or_else(bad)?;
        let v: usize = v.parse().map_err(|_| bad())?;
        let r: f64 = r.trim().parse().map_err(|_| bad())?;
        if v >= x.len() {
            x.resize(v + 1, 0.0);
            seen.resize(v + 1, false);
        }
        if std::mem::replace(&mut seen[v], true) {
            return Err(format!("{}: vertex {v} twice", path.display()).into());
        }
        x[v] = r;
    }
    if let Some(v) = seen.iter().position(|s| !s) {
        return Err(format!("{}: no rank for vertex {v}", path.display()).into());
    }
    Ok(x)
}

fn compare(a: CompareArgs) -> Result<(), BoxError> {
    let (x, y) = (read_ranks(&a.a)?, read_ranks(&a.b)?);
    if x.len() != y.len() {
        return Err(format!("{} vertices against {}", x.len(), y.len()).into());
    }
    let l1: f64 = x.iter().zip(&y).map(|(p, q)| (p - q).abs()).sum();
    let max = x
        .iter()
        .zip(&y)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max);
    println!(
        "{{\"vertices\": {}, \"l1\": {l1:e}, \"max_abs\": {max:e}, \"agree\": {}}}",
        x.len(),
        l1 <= a.tolerance
    );
    if l1 <= a.tolerance {
        Ok(())
    } else {
        Err(format!("L1 distance {l1:e} is above {:e}", a.tolerance).into())
    }
}

#[cfg(test)]
mod tests;
