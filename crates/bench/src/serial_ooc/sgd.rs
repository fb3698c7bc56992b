//! `serial-ooc ratings` and `serial-ooc sgd`: the hand-written serial out-of-core SGD matrix
//! factorisation a competent user writes when the ratings do not fit in memory but the factors
//! do. The ratings are shuffled once, when the file is written; every iteration streams the
//! file in large sequential reads on a reader thread (the disk and the updates overlap) and
//! makes the updates in file order, `U` and `V` held in memory.
//!
//! # File layout (little-endian)
//! | bytes | what |
//! |---|---|
//! | `0..8` | magic `SPWYRAT1` |
//! | `8..16`, `16..24`, `24..32` | users, items, ratings (u64 each) |
//! | `32..4096` | zeros |
//! | `4096..` | the ratings, 16 bytes each: user (u32), item (u32), rating (f64) |
//!
//! zero-padded to a multiple of 4096 bytes, so that direct reads can read whole blocks.
//!
//! The update of a rating `(u, i, r)` is spillway's (`e = r - U[u] . V[i]`, then
//! `U[u][f] += lr (e V[i][f] - reg U[u][f])`, `V[i][f] += lr (e U[u][f] - reg V[i][f])` from
//! the values before), from spillway's initial factors; the dot product is summed in order of
//! `f`, as such a program would. The order of the updates differs from spillway's (one global
//! shuffle against a grid of blocks), so the RMSEs agree in size, not in bits.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;
use spillway::algorithms::factor::sgd::initial_factor;
use spillway::algorithms::generate::RatingsSpec;
use spillway::algorithms::io::AtomicFile;
use spillway::ByteSize;

use super::csr_file::{align_up, read_words, ALIGN};
use super::stream::{stream, Consumer, Io, Shape, Source};
use crate::harness::{format_duration, BoxError};

/// First bytes of a ratings file.
const MAGIC: [u8; 8] = *b"SPWYRAT1";

/// Bytes of a rating in the file.
const RECORD: usize = 16;

/// Arguments of `serial-ooc ratings`.
#[derive(clap::Args, Debug)]
pub struct RatingsArgs {
    /// Ratings as `spillway run sgd --generate`: ratings:USERS:ITEMS:AVG[:SEED].
    #[arg(long)]
    generate: String,
    /// Seed of the one shuffle of the ratings.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The file to write (atomically).
    #[arg(long)]
    out: PathBuf,
}

/// Arguments of `serial-ooc sgd`.
#[derive(clap::Args, Debug)]
pub struct SgdArgs {
    /// The file of `serial-ooc ratings`.
    #[arg(long)]
    ratings: PathBuf,
    /// Iterations (passes over the ratings).
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Columns of the factors.
    #[arg(long, default_value_t = 10)]
    factors: usize,
    /// Learning rate.
    #[arg(long, default_value_t = 0.01)]
    learning_rate: f64,
    /// Regularisation.
    #[arg(long, default_value_t = 0.05)]
    regularisation: f64,
    /// Seed of the initial factors (spillway's `--seed`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How the ratings are read: direct (`O_DIRECT`) or buffered.
    #[arg(long, value_enum, default_value = "direct")]
    io: Io,
    /// Bytes per read (a multiple of 4 KiB).
    #[arg(long, default_value = "16M")]
    chunk: ByteSize,
    /// Prints one JSON object on standard output.
    #[arg(long)]
    json: bool,
}

/// The header of a ratings file.
#[derive(Debug, Clone, Copy)]
struct Header {
    users: u64,
    items: u64,
    count: u64,
}

impl Header {
    fn data(&self) -> std::ops::Range<u64> {
        ALIGN..ALIGN + self.count * RECORD as u64
    }

    fn read(path: &std::path::Path) -> Result<Header, BoxError> {
        let ([users, items, count], len) = read_words(path, &MAGIC, "ratings")?;
        let h = Header {
            users,
            items,
            count,
        };
        let want = align_up(h.data().end);
        if len < want || h.users > u64::from(u32::MAX) || h.items > u64::from(u32::MAX) {
            return Err(format!("{}: {len} bytes, the header says {want}", path.display()).into());
        }
        Ok(h)
    }
}

/// splitmix64's output function.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Writes the ratings of `--generate`, shuffled once.
pub fn ratings(a: RatingsArgs) -> Result<(), BoxError> {
    let spec = RatingsSpec::parse(&a.generate).map_err(|e| format!("--generate: {e}"))?;
    let start = Instant::now();
    let items: Vec<_> = (0..spec.items).map(|i| spec.item_factors(i)).collect();
    let keep = |_: u64| true;
    let factors = |i: u64| items[i as usize];
    let per_user: Vec<Vec<[u8; RECORD]>> = (0..spec.users)
        .into_par_iter()
        .map(|u| {
            let mut out = Vec::new();
            spec.user_ratings(u, &keep, &factors, &mut |i, _, r| {
                let mut rec = [0u8; RECORD];
                rec[..4].copy_from_slice(&(u as u32).to_le_bytes());
                rec[4..8].copy_from_slice(&(i as u32).to_le_bytes());
                rec[8..].copy_from_slice(&r.to_le_bytes());
                out.push(rec);
            });
            out
        })
        .collect();
    let mut all: Vec<[u8; RECORD]> = per_user.into_iter().flatten().collect();
    let mut state = a.seed;
    for i in (1..all.len()).rev() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        all.swap(i, (mix64(state) % (i as u64 + 1)) as usize);
    }
    let built = start.elapsed();
    let mut file = AtomicFile::create(&a.out)
        .map_err(|e| format!("cannot create {}: {e}", a.out.display()))?;
    let mut head = vec![0u8; ALIGN as usize];
    head[..8].copy_from_slice(&MAGIC);
    for (at, x) in [spec.users, spec.items, all.len() as u64]
        .iter()
        .enumerate()
    {
        head[8 + 8 * at..16 + 8 * at].copy_from_slice(&x.to_le_bytes());
    }
    let w = file.writer();
    w.write_all(&head)?;
    w.write_all(all.as_flattened())?;
    let end = ALIGN + (all.len() * RECORD) as u64;
    w.write_all(&vec![0u8; (align_up(end) - end) as usize])?;
    w.flush()?;
    w.get_ref().sync_all()?;
    file.commit()
        .map_err(|e| format!("cannot write {}: {e}", a.out.display()))?;
    println!(
        "{}: {} ratings of {} users and {} items, {} (built and shuffled in {}, written in {})",
        a.out.display(),
        all.len(),
        spec.users,
        spec.items,
        ByteSize(align_up(end)),
        format_duration(built),
        format_duration(start.elapsed() - built)
    );
    Ok(())
}

/// The factors and what an iteration does to them.
struct Model {
    u: Vec<f64>,
    v: Vec<f64>,
    k: usize,
    lr: f64,
    reg: f64,
    /// Training SSE of the pass (an error pass only).
    sse: f64,
    /// Whether this pass updates (or only measures the error).
    train: bool,
}

impl Consumer for Model {
    fn chunk(&mut self, bytes: &[u8]) -> Result<(), BoxError> {
        let k = self.k;
        for rec in bytes.chunks_exact(RECORD) {
            let user = u32::from_le_bytes(rec[..4].try_into().expect("4")) as usize;
            let item = u32::from_le_bytes(rec[4..8].try_into().expect("4")) as usize;
            let r = f64::from_le_bytes(rec[8..].try_into().expect("8"));
            let (ur, vr) = (
                &mut self.u[user * k..user * k + k],
                &mut self.v[item * k..item * k + k],
            );
            let mut dot = 0.0;
            for (x, y) in ur.iter().zip(vr.iter()) {
                dot += x * y;
            }
            let e = r - dot;
            if !self.train {
                self.sse += e * e;
                continue;
            }
            for (uf, vf) in ur.iter_mut().zip(vr.iter_mut()) {
                let (a, b) = (*uf, *vf);
                *uf = a + self.lr * (e * b - self.reg * a);
                *vf = b + self.lr * (e * a - self.reg * b);
            }
        }
        Ok(())
    }

    fn pass_done(&mut self, _: usize) -> Result<(), BoxError> {
        Ok(())
    }
}

/// What `serial-ooc sgd --json` prints.
#[derive(Serialize)]
struct Report {
    users: u64,
    items: u64,
    ratings: u64,
    io: Io,
    load_seconds: f64,
    iteration_seconds: Vec<f64>,
    /// The error pass after the last iteration.
    rmse_seconds: f64,
    train_rmse: f64,
    file_bytes_read: u64,
    memory_bytes: u64,
}

/// Runs SGD over the file.
pub fn sgd(a: SgdArgs) -> Result<(), BoxError> {
    let chunk = usize::try_from(a.chunk.0)?;
    if chunk == 0 || !(chunk as u64).is_multiple_of(ALIGN) {
        return Err("--chunk must be a positive multiple of 4K".into());
    }
    if a.factors == 0 || a.iterations == 0 {
        return Err("--factors and --iterations must be at least 1".into());
    }
    let start = Instant::now();
    let h = Header::read(&a.ratings)?;
    let source = Source::open(&a.ratings, a.io)?;
    let load = start.elapsed();
    let (model, times, rmse_seconds, read) = train(&a, h, &source, chunk)?;
    let report = Report {
        users: h.users,
        items: h.items,
        ratings: h.count,
        io: source.io(),
        load_seconds: load.as_secs_f64(),
        iteration_seconds: times,
        rmse_seconds,
        train_rmse: (model.sse / h.count.max(1) as f64).sqrt(),
        file_bytes_read: read,
        memory_bytes: 8 * (model.u.len() + model.v.len()) as u64 + 2 * chunk as u64,
    };
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} iterations: {:?} s; training RMSE {:.6}; {} read",
            a.iterations,
            report.iteration_seconds,
            report.train_rmse,
            ByteSize(read)
        );
    }
    Ok(())
}

/// The iterations and the error pass after them: the model (its `sse` that of the final
/// factors), the seconds of each iteration and of the error pass, the bytes read.
fn train(
    a: &SgdArgs,
    h: Header,
    source: &Source,
    chunk: usize,
) -> Result<(Model, Vec<f64>, f64, u64), BoxError> {
    let k = a.factors;
    let init = |which: u64, n: u64| -> Vec<f64> {
        (0..n)
            .flat_map(|x| (0..k).map(move |f| initial_factor(a.seed, which, x, f as u64, k)))
            .collect()
    };
    let mut model = Model {
        u: init(1, h.users),
        v: init(2, h.items),
        k,
        lr: a.learning_rate,
        reg: a.regularisation,
        sse: 0.0,
        train: true,
    };
    let shape = Shape { chunk, buffers: 2 };
    let mut read = 0;
    let mut times = Vec::new();
    for it in 0..a.iterations {
        let t = Instant::now();
        read += stream(source, h.data(), shape, 1, &mut model)?;
        times.push(t.elapsed().as_secs_f64());
        eprintln!("serial-ooc sgd: iteration {} in {:.3} s", it + 1, times[it]);
    }
    let t = Instant::now();
    model.train = false;
    read += stream(source, h.data(), shape, 1, &mut model)?;
    Ok((model, times, t.elapsed().as_secs_f64(), read))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's ratings are the generator's, each once; an iteration streamed in many small
    /// chunks makes the updates of a plain loop over the file's ratings, bit for bit.
    #[test]
    fn the_file_holds_the_generated_ratings_and_sgd_streams_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.bin");
        let spec = RatingsSpec::parse("ratings:300:80:20:4").unwrap();
        ratings(RatingsArgs {
            generate: "ratings:300:80:20:4".into(),
            seed: 9,
            out: path.clone(),
        })
        .unwrap();
        let raw = std::fs::read(&path).unwrap();
        let h = Header::read(&path).unwrap();
        let got: Vec<(u32, u32, f64)> = raw[ALIGN as usize..h.data().end as usize]
            .chunks_exact(RECORD)
            .map(|r| {
                let w = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().unwrap());
                (w(0), w(4), f64::from_le_bytes(r[8..].try_into().unwrap()))
            })
            .collect();
        let mut want = Vec::new();
        for u in 0..spec.users {
            let f = |i: u64| spec.item_factors(i);
            spec.user_ratings(u, &|_| true, &f, &mut |i, _, r| {
                want.push((u as u32, i as u32, r))
            });
        }
        let key = |x: &(u32, u32, f64)| (x.0, x.1, x.2.to_bits());
        let (mut a, mut b) = (got.clone(), want);
        a.sort_by_key(key);
        b.sort_by_key(key);
        assert_eq!((h.users, h.items, h.count), (300, 80, b.len() as u64));
        assert_eq!(a, b, "the same ratings");
        assert_ne!(got, a, "shuffled");

        let args = SgdArgs {
            ratings: path.clone(),
            iterations: 1,
            factors: 3,
            learning_rate: 0.02,
            regularisation: 0.05,
            seed: 2,
            io: Io::Buffered,
            chunk: ByteSize(ALIGN),
            json: false,
        };
        let source = Source::open(&path, Io::Buffered).unwrap();
        let (model, _, _, _) = train(&args, h, &source, ALIGN as usize).unwrap();
        let k = 3;
        let mut u: Vec<f64> = (0..300 * k)
            .map(|x| initial_factor(2, 1, (x / k) as u64, (x % k) as u64, k))
            .collect();
        let mut v: Vec<f64> = (0..80 * k)
            .map(|x| initial_factor(2, 2, (x / k) as u64, (x % k) as u64, k))
            .collect();
        for &(a, b, r) in &got {
            let (a, b) = (a as usize * k, b as usize * k);
            let e = r - (0..k).fold(0.0, |s, f| s + u[a + f] * v[b + f]);
            for f in 0..k {
                let (x, y) = (u[a + f], v[b + f]);
                u[a + f] = x + 0.02 * (e * y - 0.05 * x);
                v[b + f] = y + 0.02 * (e * x - 0.05 * y);
            }
        }
        assert_eq!((model.u, model.v), (u.clone(), v.clone()));
        let sse: f64 = got
            .iter()
            .map(|&(a, b, r)| {
                r - (0..k).fold(0.0, |s, f| {
                    s + u[a as usize * k + f] * v[b as usize * k + f]
                })
            })
            .map(|e| e * e)
            .sum();
        assert!((model.sse - sse).abs() <= 1e-9 * sse);
    }
}
