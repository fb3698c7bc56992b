//! `serial-ooc docs` and `serial-ooc spkmeans`: the hand-written serial out-of-core spherical
//! K-means a competent user writes when the documents do not fit in memory but the centroids
//! do. Every iteration streams the file in large sequential reads on a reader thread (the disk
//! and the computation overlap), assigns each row to the centroid of largest dot product and
//! adds it to that cluster's sum; the new centroids are the normalised sums (a cluster whose
//! sum is zero keeps its centroid), as spillway's `spkmeans` defines them, from the first `k`
//! rows.
//!
//! # File layout (little-endian)
//! | bytes | what |
//! |---|---|
//! | `0..8` | magic `SPWYDOC1` |
//! | `8..16`, `16..24`, `24..32` | rows, columns, non-zeros (u64 each) |
//! | `32..40` | bytes of the rows section (u64) |
//! | `40..4096` | zeros |
//! | `4096..` | the rows: the count of non-zeros (u32), their columns (u32 each, increasing), their values (f64 each, the row L2-normalised) |
//!
//! zero-padded to a multiple of 4096 bytes. 12 bytes a non-zero and 4 a row, as spillway
//! keeps them.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use spillway::algorithms::generate::ZipfDocsSpec;
use spillway::algorithms::io::AtomicFile;
use spillway::ByteSize;

use super::csr_file::{align_up, read_words, ALIGN};
use super::stream::{stream, Consumer, Io, Shape, Source};
use crate::harness::{format_duration, BoxError};

/// First bytes of a documents file.
const MAGIC: [u8; 8] = *b"SPWYDOC1";

/// Arguments of `serial-ooc docs`.
#[derive(clap::Args, Debug)]
pub struct DocsArgs {
    /// Documents as `spillway run spkmeans --generate`: zipf:DOCS:TERMS:AVG[:SEED].
    #[arg(long)]
    generate: String,
    /// The file to write (atomically).
    #[arg(long)]
    out: PathBuf,
}

/// Arguments of `serial-ooc spkmeans`.
#[derive(clap::Args, Debug)]
pub struct SpkmeansArgs {
    /// The file of `serial-ooc docs`.
    #[arg(long)]
    docs: PathBuf,
    /// Clusters (the first k rows start them).
    #[arg(long)]
    k: usize,
    /// Iterations.
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// How the rows are read: direct (`O_DIRECT`) or buffered.
    #[arg(long, value_enum, default_value = "direct")]
    io: Io,
    /// Bytes per read (a multiple of 4 KiB).
    #[arg(long, default_value = "16M")]
    chunk: ByteSize,
    /// Prints one JSON object on standard output.
    #[arg(long)]
    json: bool,
}

/// The header of a documents file.
#[derive(Debug, Clone, Copy)]
struct Header {
    rows: u64,
    cols: u64,
    nnz: u64,
    bytes: u64,
}

impl Header {
    fn data(&self) -> std::ops::Range<u64> {
        ALIGN..ALIGN + self.bytes
    }

    fn read(path: &std::path::Path) -> Result<Header, BoxError> {
        let ([rows, cols, nnz, bytes], len) = read_words(path, &MAGIC, "documents")?;
        let h = Header {
            rows,
            cols,
            nnz,
            bytes,
        };
        if h.bytes != 4 * h.rows + 12 * h.nnz || len < align_up(h.data().end) {
            return Err(format!("{}: a header that does not add up", path.display()).into());
        }
        Ok(h)
    }
}

/// Writes the rows of `--generate`, normalised.
pub fn docs(a: DocsArgs) -> Result<(), BoxError> {
    let spec = ZipfDocsSpec::parse(&a.generate).map_err(|e| format!("--generate: {e}"))?;
    let start = Instant::now();
    let mut file = AtomicFile::create(&a.out)
        .map_err(|e| format!("cannot create {}: {e}", a.out.display()))?;
    let w = file.writer();
    w.write_all(&[0u8; ALIGN as usize])?;
    let (mut words, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
    let (mut nnz, mut bytes) = (0u64, 0u64);
    for doc in 0..spec.docs {
        cols.clear();
        vals.clear();
        spec.document(doc, &mut words, &mut cols, &mut vals);
        let norm = vals.iter().map(|x| x * x).sum::<f64>().sqrt();
        w.write_all(&(cols.len() as u32).to_le_bytes())?;
        w.write_all(bytemuck::cast_slice(&cols))?;
        for x in &vals {
            let x = if norm > 0.0 { x / norm } else { *x };
            w.write_all(&x.to_le_bytes())?;
        }
        nnz += cols.len() as u64;
        bytes += 4 + 12 * cols.len() as u64;
    }
    let end = ALIGN + bytes;
    w.write_all(&vec![0u8; (align_up(end) - end) as usize])?;
    w.flush()?;
    let f = w.get_mut();
    let mut head = vec![0u8; 40];
    head[..8].copy_from_slice(&MAGIC);
    for (at, x) in [spec.docs, spec.terms, nnz, bytes].iter().enumerate() {
        head[8 + 8 * at..16 + 8 * at].copy_from_slice(&x.to_le_bytes());
    }
    std::os::unix::fs::FileExt::write_all_at(f, &head, 0)?;
    f.sync_all()?;
    file.commit()
        .map_err(|e| format!("cannot write {}: {e}", a.out.display()))?;
    println!(
        "{}: {} rows, {} non-zeros, {} (in {})",
        a.out.display(),
        spec.docs,
        nnz,
        ByteSize(align_up(end)),
        format_duration(start.elapsed())
    );
    Ok(())
}

/// One pass over the rows: the centroids (column-major, `k` values a column), the sums, the
/// assignments, and the bytes of a row cut by the end of a chunk.
struct Pass {
    k: usize,
    centroids: Vec<f64>,
    sums: Vec<f64>,
    assign: Vec<u32>,
    row: usize,
    changed: u64,
    carry: Vec<u8>,
    dots: Vec<f64>,
    /// Take the first `k` rows as the centroids instead of assigning (the set-up pass).
    seed_rows: bool,
}

impl Pass {
    /// Handles the row at the start of `bytes`; its length in bytes, or None if incomplete.
    fn row(&mut self, bytes: &[u8]) -> Option<usize> {
        let len = u32::from_le_bytes(bytes.get(..4)?.try_into().expect("4")) as usize;
        let size = 4 + 12 * len;
        let body = bytes.get(4..size)?;
        let (cols, vals) = body.split_at(4 * len);
        let col =
            |i: usize| u32::from_le_bytes(cols[4 * i..4 * i + 4].try_into().expect("4")) as usize;
        let val = |i: usize| f64::from_le_bytes(vals[8 * i..8 * i + 8].try_into().expect("8"));
        let k = self.k;
        if self.seed_rows {
            if self.row < k {
                for i in 0..len {
                    self.centroids[col(i) * k + self.row] = val(i);
                }
            }
        } else {
            let mut dots = std::mem::take(&mut self.dots);
            dots.clear();
            dots.resize(k, 0.0);
            for i in 0..len {
                let (c, x) = (col(i), val(i));
                for (d, w) in dots.iter_mut().zip(&self.centroids[c * k..c * k + k]) {
                    *d += x * w;
                }
            }
            let mut best = 0;
            for (j, d) in dots.iter().enumerate() {
                if *d > dots[best] {
                    best = j;
                }
            }
            for i in 0..len {
                self.sums[col(i) * k + best] += val(i);
            }
            if self.assign[self.row] != best as u32 {
                self.assign[self.row] = best as u32;
                self.changed += 1;
            }
            self.dots = dots;
        }
        self.row += 1;
        Some(size)
    }
}

impl Consumer for Pass {
    fn chunk(&mut self, bytes: &[u8]) -> Result<(), BoxError> {
        let mut at = 0;
        if !self.carry.is_empty() {
            // The row cut by the previous chunk's end (rows are far smaller than a chunk).
            let mut joined = std::mem::take(&mut self.carry);
            let take = bytes.len().min(1 << 20);
            joined.extend_from_slice(&bytes[..take]);
            let size = self.row(&joined).ok_or("a row longer than 1 MiB")?;
            at = size - (joined.len() - take);
        }
        while at < bytes.len() {
            match self.row(&bytes[at..]) {
                Some(size) => at += size,
                None => {
                    self.carry = bytes[at..].to_vec();
                    break;
                }
            }
        }
        Ok(())
    }

    fn pass_done(&mut self, _: usize) -> Result<(), BoxError> {
        if !self.carry.is_empty() {
            return Err("the rows end inside a row".into());
        }
        Ok(())
    }
}

/// What `serial-ooc spkmeans --json` prints.
#[derive(Serialize)]
struct Report {
    rows: u64,
    nnz: u64,
    k: usize,
    io: Io,
    load_seconds: f64,
    iteration_seconds: Vec<f64>,
    changed: Vec<u64>,
    file_bytes_read: u64,
}

/// Runs spherical K-means over the file.
pub fn spkmeans(a: SpkmeansArgs) -> Result<(), BoxError> {
    let chunk = usize::try_from(a.chunk.0)?;
    if chunk == 0 || !(chunk as u64).is_multiple_of(ALIGN) {
        return Err("--chunk must be a positive multiple of 4K".into());
    }
    let h = Header::read(&a.docs)?;
    if a.k == 0 || a.k as u64 > h.rows {
        return Err(format!("--k must be in 1..={}", h.rows).into());
    }
    let source = Source::open(&a.docs, a.io)?;
    let (_, load, times, changed, read) = run(&source, h, a.k, a.iterations, chunk)?;
    let report = Report {
        rows: h.rows,
        nnz: h.nnz,
        k: a.k,
        io: source.io(),
        load_seconds: load.as_secs_f64(),
        iteration_seconds: times,
        changed,
        file_bytes_read: read,
    };
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{:?} s an iteration; {} read",
            report.iteration_seconds,
            ByteSize(read)
        );
    }
    Ok(())
}

/// The set-up pass and the iterations: the last pass, the set-up's seconds, each iteration's
/// seconds and rows that changed cluster, the bytes read.
#[allow(clippy::type_complexity)] // A struct for one private caller and its test would be noise.
fn run(
    source: &Source,
    h: Header,
    k: usize,
    iterations: usize,
    chunk: usize,
) -> Result<(Pass, std::time::Duration, Vec<f64>, Vec<u64>, u64), BoxError> {
    let start = Instant::now();
    let cols = usize::try_from(h.cols)?;
    let mut pass = Pass {
        k,
        centroids: vec![0.0; cols * k],
        sums: vec![0.0; cols * k],
        assign: vec![u32::MAX; usize::try_from(h.rows)?],
        row: 0,
        changed: 0,
        carry: Vec::new(),
        dots: Vec::new(),
        seed_rows: true,
    };
    let shape = Shape { chunk, buffers: 2 };
    let mut read = stream(source, h.data(), shape, 1, &mut pass)?;
    pass.seed_rows = false;
    let load = start.elapsed();
    let (mut times, mut changed) = (Vec::new(), Vec::new());
    for it in 0..iterations {
        let t = Instant::now();
        (pass.row, pass.changed) = (0, 0);
        pass.sums.fill(0.0);
        read += stream(source, h.data(), shape, 1, &mut pass)?;
        normalise_into(&pass.sums, &mut pass.centroids, k);
        times.push(t.elapsed().as_secs_f64());
        changed.push(pass.changed);
        eprintln!(
            "serial-ooc spkmeans: iteration {} in {:.3} s, {} changed",
            it + 1,
            times[it],
            pass.changed
        );
    }
    Ok((pass, load, times, changed, read))
}

/// The new centroids: each cluster's sum normalised (a zero sum keeps its centroid).
fn normalise_into(sums: &[f64], centroids: &mut [f64], k: usize) {
    for j in 0..k {
        let norm = sums
            .iter()
            .skip(j)
            .step_by(k)
            .map(|x| x * x)
            .sum::<f64>()
            .sqrt();
        if norm > 0.0 {
            for (c, s) in centroids
                .iter_mut()
                .skip(j)
                .step_by(k)
                .zip(sums.iter().skip(j).step_by(k))
            {
                *c = s / norm;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows cut by the ends of 4 KiB chunks; the assignments and centroids of a plain
    /// in-memory loop over the generator's rows.
    #[test]
    fn streamed_spkmeans_equals_a_plain_loop_over_the_generated_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.bin");
        let gen = "zipf:400:60:12:3";
        docs(DocsArgs {
            generate: gen.into(),
            out: path.clone(),
        })
        .unwrap();
        let h = Header::read(&path).unwrap();
        let source = Source::open(&path, Io::Buffered).unwrap();
        let (k, its) = (5, 4);
        let (pass, _, _, _, _) = run(&source, h, k, its, ALIGN as usize).unwrap();

        let spec = ZipfDocsSpec::parse(gen).unwrap();
        let rows: Vec<Vec<f64>> = (0..spec.docs)
            .map(|d| {
                let (mut w, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
                spec.document(d, &mut w, &mut c, &mut v);
                let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
                let mut dense = vec![0.0; 60];
                for (c, x) in c.iter().zip(&v) {
                    dense[*c as usize] = x / norm;
                }
                dense
            })
            .collect();
        assert_eq!(h.rows, 400);
        let mut cent: Vec<Vec<f64>> = rows[..k].to_vec();
        let mut assign = vec![0u32; rows.len()];
        for _ in 0..its {
            let mut sums = vec![vec![0.0; 60]; k];
            for (r, row) in rows.iter().enumerate() {
                let dot = |c: &Vec<f64>| row.iter().zip(c).map(|(a, b)| a * b).sum::<f64>();
                let best = (0..k).fold(0, |b, j| if dot(&cent[j]) > dot(&cent[b]) { j } else { b });
                assign[r] = best as u32;
                for (s, x) in sums[best].iter_mut().zip(row) {
                    *s += x;
                }
            }
            for (c, s) in cent.iter_mut().zip(&sums) {
                let norm = s.iter().map(|x| x * x).sum::<f64>().sqrt();
                if norm > 0.0 {
                    *c = s.iter().map(|x| x / norm).collect();
                }
            }
        }
        assert_eq!(pass.assign, assign);
        for (j, c) in cent.iter().enumerate() {
            for (col, x) in c.iter().enumerate() {
                assert!((pass.centroids[col * k + j] - x).abs() < 1e-12);
            }
        }
    }
}
