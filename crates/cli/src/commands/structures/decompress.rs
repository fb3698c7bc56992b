//! `decompress`: restores the values of a file written by `compress`.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use spillway_structures::compress::{self, HeaderGrid};

use super::{from_compress, read_file, read_graph};
use crate::driver::plan::check_memory;
use crate::driver::{Command, CommonArgs, Declared, Estimate, Failure, Inputs, Job};

/// `decompress`.
#[derive(Args, Debug)]
pub(crate) struct Decompress {
    /// The SNAP edge list of the unstructured grid (region methods on unstructured grids).
    #[arg(long)]
    graph: Option<PathBuf>,
    /// Compressed file (`-`: standard input).
    input: PathBuf,
    /// Output file of raw values, the dtype recorded in the input (`-`: standard output).
    output: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `decompress` reports.
#[derive(Debug, Serialize)]
pub(crate) struct DecompressFacts {
    method: &'static str,
    dtype: &'static str,
    grid: String,
    points: u64,
    epsilon: f64,
    compressed_bytes: u64,
    original_bytes: u64,
    ratio: f64,
    decompress_seconds: f64,
    decompress_mb_per_s: f64,
}

impl Command for Decompress {
    const NAME: &'static str = "decompress";
    type Facts = DecompressFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::new(&self.common)
            .input("INPUT", Some(&self.input))
            .input("--graph", self.graph.as_deref())
            .output("OUTPUT", Some(&self.output))
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        // The file, the decoded values and their bytes for the output: the header tells how
        // many (a file of up to 256 MiB is read for it here; a larger one is checked against
        // its header when it is read).
        let bytes = inputs.bytes(&self.input);
        let header = (bytes <= 256 << 20)
            .then(|| std::fs::read(inputs.path(&self.input)).ok())
            .flatten()
            .and_then(|file| compress::read_header(&file).ok());
        let (data, because) = match header {
            Some(h) => (
                h.points
                    .saturating_mul(h.dtype.size() as u64)
                    .saturating_mul(2),
                format!(
                    "INPUT {}: the header announces {} {} values",
                    self.input.display(),
                    h.points,
                    h.dtype.name()
                ),
            ),
            None => (
                bytes.saturating_mul(8),
                format!("INPUT {}", self.input.display()),
            ),
        };
        Ok(Estimate {
            data: data.saturating_add(bytes),
            because,
            ..Estimate::default()
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<DecompressFacts>, Failure> {
        let path = job.input(&self.input);
        let bytes = read_file(&path)?;
        let header = compress::read_header(&bytes).map_err(|e| from_compress(&path, e))?;
        // The header fixes the size of what comes out: check it before anything that large
        // (the decoded values and their bytes for the output, beside the file read).
        let size = header.dtype.size() as u64;
        let points = header.points;
        check_memory(
            points
                .saturating_mul(size)
                .saturating_mul(2)
                .saturating_add(bytes.len() as u64),
            &format!(
                "INPUT {}: the header announces {points} {} values",
                self.input.display(),
                header.dtype.name()
            ),
        )?;
        job.ensure_space(&self.output, points.saturating_mul(size))?;
        let graph = match (&self.graph, &header.grid) {
            (Some(g), HeaderGrid::Unstructured { .. }) => {
                Some(read_graph(&job.input(g), points as usize)?)
            }
            (Some(g), HeaderGrid::Structured(_)) => {
                return Err(Failure::usage(format!(
                    "--graph {}: {} was compressed on a structured grid",
                    g.display(),
                    path.display()
                )))
            }
            (None, _) => None,
        };
        let t0 = Instant::now();
        let (header, decoded) =
            compress::decompress(&bytes, graph.as_ref()).map_err(|e| from_compress(&path, e))?;
        let seconds = t0.elapsed().as_secs_f64();
        let raw = decoded.to_le_bytes();
        job.write(&self.output, |w| w.write_all(&raw))?;
        let grid = match &header.grid {
            HeaderGrid::Structured(d) => d
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("x"),
            HeaderGrid::Unstructured { edges, .. } => format!("unstructured ({edges} edges)"),
        };
        Ok(Some(DecompressFacts {
            method: header.method.name(),
            dtype: header.dtype.name(),
            grid,
            points: header.points,
            epsilon: header.epsilon,
            compressed_bytes: bytes.len() as u64,
            original_bytes: raw.len() as u64,
            ratio: bytes.len() as f64 / raw.len().max(1) as f64,
            decompress_seconds: seconds,
            decompress_mb_per_s: raw.len() as f64 / seconds.max(1e-12) / 1e6,
        }))
    }
}
