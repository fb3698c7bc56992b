//! `compress`: raw f32/f64 grid values with an absolute error bound.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use serde::Serialize;
use spillway_structures::compress::{
    self, Dtype, Encoding, Grid, IdPredictor, Method, Options, SetRule, Values,
};

use super::{from_compress, read_file, read_graph};
use crate::driver::{Command, CommonArgs, Declared, Estimate, Failure, Inputs, Job};
use crate::options::{named, positive};

/// The SQE predictor: one of the library's, or none for `auto` (a search).
#[derive(Debug, Clone, Copy)]
struct Predictor(Option<IdPredictor>);

/// The value parser of [`Predictor`]: `auto` and the library's names.
fn predictor() -> impl TypedValueParser<Value = Predictor> {
    let names = std::iter::once("auto").chain(IdPredictor::ALL.iter().map(|p| p.name()));
    PossibleValuesParser::new(names.collect::<Vec<_>>())
        .map(|name| Predictor(IdPredictor::ALL.into_iter().find(|p| p.name() == name)))
}

/// A set radius: in (0, 1].
fn set_radius(text: &str) -> Result<f64, String> {
    let r = positive(text)?;
    if r <= 1.0 {
        Ok(r)
    } else {
        Err(format!("{r} is above 1"))
    }
}

/// `compress`.
#[derive(Args, Debug)]
pub(crate) struct Compress {
    /// Absolute error bound (finite, above 0): every value is restored within this distance
    /// (see --relative).
    #[arg(long, value_parser = positive)]
    epsilon: f64,
    /// Read --epsilon as a fraction of the value range (max - min) of the input.
    #[arg(long)]
    relative: bool,
    /// Structured grid NX, NXxNY or NXxNYxNZ (NX varies fastest in the file).
    #[arg(long, required_unless_present = "graph", conflicts_with = "graph", value_parser = Grid::parse)]
    grid: Option<Grid>,
    /// Unstructured grid: a SNAP edge list of point pairs (points are 0..values).
    #[arg(long)]
    graph: Option<PathBuf>,
    /// Method: predict (prediction + quantisation, the default; keeps NaN and infinities bit
    /// for bit), or a decomposition: sbd1, sbd2, rbd1, rbd2 or rbd3 (finite values only).
    #[arg(long, default_value = "predict", value_parser = named::<Method>())]
    method: Method,
    /// Value type of the input file.
    #[arg(long, default_value = "f64", value_parser = named::<Dtype>())]
    dtype: Dtype,
    /// Set id storage for sbd1/sbd2.
    #[arg(long, default_value = "sqe", value_parser = named::<Encoding>())]
    encoding: Encoding,
    /// predict: interp or lorenzo, or auto (chosen on a sample of the grid). sbd1/sbd2: SQE
    /// id prediction, raw, delta, interp or lorenzo (structured grids only for the last two),
    /// or auto: try several predictors (with and without --relaxed) at a fast zstd level and
    /// keep the smallest.
    #[arg(long, default_value = "auto", value_parser = predictor())]
    predictor: Predictor,
    /// Which values may share a set: ball (within epsilon of one value) or range (the
    /// thesis: range at most epsilon).
    #[arg(long, default_value = "ball", value_parser = named::<SetRule>())]
    set_rule: SetRule,
    /// SQE: let points take any set within epsilon, following the predictor.
    #[arg(long)]
    relaxed: bool,
    /// Build the sets for this fraction of epsilon (0 < R <= 1; with --relaxed).
    #[arg(long, default_value_t = 1.0, value_parser = set_radius)]
    set_radius: f64,
    /// zstd level (1-22).
    #[arg(long, default_value_t = compress::DEFAULT_LEVEL,
          value_parser = clap::value_parser!(i32).range(1..=22))]
    level: i32,
    /// Store the set values as raw floats instead of on a lattice of step <= epsilon/16.
    #[arg(long)]
    raw_values: bool,
    /// Decompress the result and check the bound at every point again (the encoder already
    /// checks every value exactly as it codes it).
    #[arg(long)]
    verify: bool,
    /// Accepted for old scripts: verification is off unless --verify is given.
    #[arg(long, hide = true, conflicts_with = "verify")]
    no_verify: bool,
    /// Input file of raw values (`-`: standard input).
    input: PathBuf,
    /// Output file (`-`: standard output).
    output: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `compress` reports.
#[derive(Debug, Serialize)]
pub(crate) struct CompressFacts {
    method: &'static str,
    dtype: &'static str,
    points: u64,
    epsilon: f64,
    original_bytes: u64,
    compressed_bytes: u64,
    ratio: f64,
    sets: u64,
    predictor: &'static str,
    relaxed: bool,
    set_radius: f64,
    values: u64,
    boundary_points: u64,
    seeds: u64,
    compress_seconds: f64,
    compress_mb_per_s: f64,
    verify_seconds: Option<f64>,
    max_error: Option<f64>,
    sections: Vec<Section>,
}

/// One section of the compressed file.
#[derive(Debug, Serialize)]
struct Section {
    name: String,
    raw_bytes: u64,
    stored_bytes: u64,
}

impl Command for Compress {
    const NAME: &'static str = "compress";
    type Facts = CompressFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::new(&self.common)
            .input("INPUT", Some(&self.input))
            .input("--graph", self.graph.as_deref())
            .output("OUTPUT", Some(&self.output))
    }

    fn check(&self) -> Result<(), Failure> {
        if let (Method::Predict, Some(p)) = (self.method, self.predictor.0) {
            if !matches!(p, IdPredictor::Lorenzo | IdPredictor::Interpolation) {
                return Err(Failure::option(
                    "--predictor",
                    p.name(),
                    "is not a predictor of --method predict (interp, lorenzo or auto)",
                ));
            }
        }
        Ok(())
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        let bytes = inputs.bytes(&self.input);
        let points = bytes / self.dtype.size() as u64;
        Ok(Estimate {
            // The file, its values as f64, their order, sets and ids, the packed result and
            // the decoded check.
            data: points.saturating_mul(32),
            because: format!("{} ({} values)", self.input.display(), points),
            items: 0,
            outputs: vec![("OUTPUT", bytes)],
            ..Default::default()
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<CompressFacts>, Failure> {
        let path = job.input(&self.input);
        let bytes = read_file(&path)?;
        let dtype = self.dtype;
        let size = dtype.size();
        if bytes.len() % size != 0 {
            return Err(Failure::usage(format!(
                "{}: {} bytes is not a whole number of {} values",
                path.display(),
                bytes.len(),
                dtype.name()
            )));
        }
        let n = bytes.len() / size;
        let grid = match &self.grid {
            Some(g) => {
                if g.num_points() != n {
                    return Err(Failure::usage(format!(
                        "{}: holds {n} {} values but --grid has {} points",
                        path.display(),
                        dtype.name(),
                        g.num_points()
                    )));
                }
                g.clone()
            }
            None => {
                let graph = self
                    .graph
                    .as_ref()
                    .expect("clap requires --grid or --graph");
                Grid::Unstructured(Arc::new(read_graph(&job.input(graph), n)?))
            }
        };
        let f32s: Vec<f32>;
        let f64s: Vec<f64>;
        let values = match dtype {
            Dtype::F32 => {
                f32s = bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                Values::F32(&f32s)
            }
            Dtype::F64 => {
                f64s = bytes
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect();
                Values::F64(&f64s)
            }
        };
        drop(bytes);
        let epsilon = if self.relative {
            let (lo, hi) = values.min_max().unwrap_or((0.0, 0.0));
            let range = hi - lo;
            let eps = self.epsilon * range;
            if !(eps.is_finite() && eps > 0.0) {
                return Err(Failure::usage(format!(
                    "{}: --relative --epsilon {} gives the absolute bound {eps} (value range \
                     {range}); it must be finite and above 0",
                    path.display(),
                    self.epsilon
                )));
            }
            eps
        } else {
            self.epsilon
        };
        let options = Options {
            epsilon,
            method: self.method,
            encoding: self.encoding,
            predictor: self.predictor.0.unwrap_or(IdPredictor::Lorenzo),
            set_rule: self.set_rule,
            level: self.level,
            relaxed: self.relaxed,
            set_radius: self.set_radius,
            lattice: !self.raw_values,
            search: self.predictor.0.is_none(),
        };
        let t0 = Instant::now();
        let packed =
            compress::compress(values, &grid, &options).map_err(|e| from_compress(&path, e))?;
        let compress_seconds = t0.elapsed().as_secs_f64();
        let mut verify_seconds = None;
        let mut max_error = None;
        if self.verify {
            let t1 = Instant::now();
            let graph = match &grid {
                Grid::Unstructured(g) => Some(g.as_ref()),
                Grid::Structured(_) => None,
            };
            let (_, decoded) = compress::decompress(&packed.bytes, graph).map_err(|e| {
                Failure::failed(format!("verification could not decompress the result: {e}"))
            })?;
            let err = compress::check_bound(values, &decoded, epsilon).map_err(|v| {
                Failure::failed(format!(
                    "verification failed: point {} was {} and decompresses to {} (epsilon \
                     {epsilon})",
                    v.index, v.original, v.decoded
                ))
            })?;
            max_error = Some(err);
            verify_seconds = Some(t1.elapsed().as_secs_f64());
        }
        job.write(&self.output, |w| w.write_all(&packed.bytes))?;
        let original = packed.original_bytes as u64;
        Ok(Some(CompressFacts {
            method: self.method.name(),
            dtype: dtype.name(),
            points: n as u64,
            epsilon,
            original_bytes: original,
            compressed_bytes: packed.bytes.len() as u64,
            ratio: packed.ratio(),
            sets: packed.sets as u64,
            predictor: packed.predictor.name(),
            relaxed: packed.relaxed,
            set_radius: packed.set_radius,
            values: packed.values as u64,
            boundary_points: packed.boundary_points as u64,
            seeds: packed.seeds as u64,
            compress_seconds,
            compress_mb_per_s: original as f64 / compress_seconds.max(1e-12) / 1e6,
            verify_seconds,
            max_error,
            sections: packed
                .sections
                .iter()
                .map(|s| Section {
                    name: s.name.to_string(),
                    raw_bytes: s.raw as u64,
                    stored_bytes: s.stored as u64,
                })
                .collect(),
        }))
    }
}
