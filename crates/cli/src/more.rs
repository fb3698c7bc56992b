//! The commands of the sparse and graph algorithms: `run spkmeans`, `run sgd`, `run colour`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use spillway::algorithms::cluster::kmeans::Init;
use spillway::algorithms::cluster::spkmeans::{normalize_rows, spkmeans, SpKMeansOptions};
use spillway::algorithms::factor::sgd::{grid_side, load_ratings, sgd, SgdOptions};
use spillway::algorithms::graph::colour::colour;
use spillway::algorithms::graph::{load_graph, GraphSource};
use spillway::algorithms::io::write_ordered;
use spillway::algorithms::io::AtomicFile;
use spillway::algorithms::io::{load_rows, SparseSource};
use spillway::algorithms::{AlgoError, Progress};
use spillway::{run_with_stats, Collectives, Comm, Max};

use crate::report::Report;
use crate::{check_output, config_of, progress_bar, Failure, RuntimeArgs};

#[derive(Args, Debug)]
pub(crate) struct SpKMeansArgs {
    /// Sparse rows: Matrix Market coordinate (.mtx, "row col value") or SVMlight/libsvm
    /// ("label idx:val ...", 1-based indices; any other extension).
    #[arg(long)]
    input: PathBuf,
    /// Number of clusters.
    #[arg(long)]
    k: usize,
    /// Initial centroids: first (the first k rows) or random[:SEED] (k distinct rows).
    #[arg(long, default_value = "first")]
    init: String,
    /// Iteration limit.
    #[arg(long, default_value_t = 100)]
    iterations: usize,
    /// Output: the final centroids, CSV, one per line in cluster order.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Output: the cluster of each row, one per line in row order.
    #[arg(long)]
    assign: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

#[derive(Args, Debug)]
pub(crate) struct SgdArgs {
    /// Training ratings: Matrix Market coordinate "user item rating".
    #[arg(long)]
    input: PathBuf,
    /// Held-out ratings (same format): their RMSE is reported after every iteration.
    #[arg(long)]
    test: Option<PathBuf>,
    /// Columns of the factors.
    #[arg(long, default_value_t = 10)]
    factors: usize,
    /// Learning rate.
    #[arg(long, default_value_t = 0.01)]
    learning_rate: f64,
    /// Regularisation.
    #[arg(long, default_value_t = 0.05)]
    regularisation: f64,
    /// Iterations (passes over the ratings).
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Seed of the initial factors and of the update order inside each block.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output: U, CSV, one row per user.
    #[arg(long)]
    out_u: Option<PathBuf>,
    /// Output: V, CSV, one row per item.
    #[arg(long)]
    out_v: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

#[derive(Args, Debug)]
pub(crate) struct ColourArgs {
    /// Graph: SNAP edge list ("src dst" per line) or Matrix Market (.mtx); edges are undirected.
    #[arg(long)]
    input: PathBuf,
    /// Seed of the vertex priorities.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output: "vertex colour" per vertex, colours from 0.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

fn csv_line(w: &mut dyn Write, row: &[f64]) -> std::io::Result<()> {
    let mut line = String::with_capacity(row.len() * 20);
    for (j, v) in row.iter().enumerate() {
        if j > 0 {
            line.push(',');
        }
        // `Display` of f64 is the shortest text that reads back to the same value.
        line.push_str(&v.to_string());
    }
    line.push('\n');
    w.write_all(line.as_bytes())
}

pub(crate) fn run_spkmeans(args: SpKMeansArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    for out in args.out.iter().chain(&args.assign) {
        check_output(out)?;
    }
    let init = match Init::parse(&args.init) {
        Ok(Init::File(_)) => Err("file: is not available for sparse rows".to_string()),
        other => other,
    }
    .map_err(|e| Failure::usage(format!("invalid --init: {e}")))?;
    let source = SparseSource::from_path(&args.input);
    let options = SpKMeansOptions {
        k: args.k,
        max_iterations: args.iterations,
        init,
    };
    let bar = progress_bar(&args.runtime, args.iterations, "spkmeans");
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let t0 = Instant::now();
        let mut rows = load_rows(&world, &source)?;
        normalize_rows(&mut rows);
        world.barrier()?;
        let load = t0.elapsed();
        let mut on_progress = |p: &Progress| {
            if let (Some(b), 0) = (&bar, world.rank()) {
                b.set_position(p.iteration as u64);
                b.set_message(format!("{} rows moved", p.delta));
            }
        };
        let t1 = Instant::now();
        let result = spkmeans(&world, &rows, &options, &mut on_progress)?;
        let compute = t1.elapsed();
        let d = rows.cols as usize;
        // Both outputs appear only if both are complete.
        let mut centroids_file = None;
        if let (Some(path), 0) = (&args.out, world.rank()) {
            let out_err = |e| AlgoError::Output {
                path: path.clone(),
                source: e,
            };
            let mut file = AtomicFile::create(path).map_err(out_err)?;
            for row in result.centroids.chunks(d.max(1)) {
                csv_line(file.writer(), row).map_err(out_err)?;
            }
            centroids_file = Some(file);
        }
        if let Some(path) = &args.assign {
            write_ordered(&world, path, |w| {
                for a in result.assignment.as_slice() {
                    writeln!(w, "{a}")?;
                }
                Ok(())
            })?;
        }
        if let (Some(file), Some(path)) = (centroids_file, &args.out) {
            file.commit().map_err(|e| AlgoError::Output {
                path: path.clone(),
                source: e,
            })?;
        }
        let max_nnz = world.allreduce(&[rows.values.len() as u64], Max)?[0];
        world.barrier()?;
        Ok((
            rows.rows,
            rows.cols,
            rows.total_nnz,
            max_nnz,
            result.iterations,
            result.converged,
            load,
            compute,
            result.iteration_times,
        ))
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (n, d, nnz, max_nnz, iterations, converged, load, compute, times) =
        results.into_iter().next().expect("rank 0");
    let mut report = Report::new("spkmeans", &args.input.display().to_string(), &config);
    report.set_run(iterations, &times, load, compute, start.elapsed(), &stats);
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("rows".into(), n as f64),
        ("columns".into(), d as f64),
        ("nonzeros".into(), nnz as f64),
        ("max_nonzeros_per_rank".into(), max_nnz as f64),
        ("k".into(), args.k as f64),
        ("converged".into(), f64::from(u8::from(converged))),
    ];
    Ok(report)
}

pub(crate) fn run_sgd(args: SgdArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    for out in args.out_u.iter().chain(&args.out_v) {
        check_output(out)?;
    }
    grid_side(args.runtime.ranks as usize).map_err(|e| Failure::usage(e.to_string()))?;
    if !(args.learning_rate.is_finite() && args.learning_rate > 0.0) {
        return Err(Failure::usage("invalid --learning-rate: must be positive"));
    }
    if !(args.regularisation.is_finite() && args.regularisation >= 0.0) {
        return Err(Failure::usage("invalid --regularisation: must be >= 0"));
    }
    if args.factors == 0 {
        return Err(Failure::usage("invalid --factors: at least 1"));
    }
    let options = SgdOptions {
        factors: args.factors,
        learning_rate: args.learning_rate,
        regularisation: args.regularisation,
        iterations: args.iterations,
        seed: args.seed,
    };
    let bar = progress_bar(&args.runtime, args.iterations, "sgd");
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let t0 = Instant::now();
        let block = load_ratings(&world, &args.input, args.test.as_deref())?;
        world.barrier()?;
        let load = t0.elapsed();
        let mut on_progress = |p: &Progress| {
            if let (Some(b), 0) = (&bar, world.rank()) {
                b.set_position(p.iteration as u64);
                b.set_message(format!("training RMSE {:.5}", p.delta));
            }
        };
        let t1 = Instant::now();
        let result = sgd(&world, &block, &options, &mut on_progress)?;
        let compute = t1.elapsed();
        // The diagonal ranks hold the blocks of U and V, in rank order.
        let k = options.factors;
        for (path, part) in [(&args.out_u, &result.u), (&args.out_v, &result.v)] {
            if let Some(path) = path {
                write_ordered(&world, path, |w| {
                    for row in part.chunks(k) {
                        csv_line(w, row)?;
                    }
                    Ok(())
                })?;
            }
        }
        Ok((
            block.users,
            block.items,
            block.train_total,
            block.test_total,
            result.train_rmse,
            result.test_rmse,
            load,
            compute,
            result.iteration_times,
        ))
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (users, items, train, test, train_rmse, test_rmse, load, compute, times) =
        results.into_iter().next().expect("rank 0");
    let mut report = Report::new("sgd", &args.input.display().to_string(), &config);
    report.set_run(
        args.iterations,
        &times,
        load,
        compute,
        start.elapsed(),
        &stats,
    );
    report.output = args.out_u.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("users".into(), users as f64),
        ("items".into(), items as f64),
        ("training_ratings".into(), train as f64),
        ("test_ratings".into(), test as f64),
    ];
    for (i, r) in train_rmse.iter().enumerate() {
        report.facts.push((format!("train_rmse_{}", i + 1), *r));
    }
    for (i, r) in test_rmse.iter().enumerate() {
        report.facts.push((format!("test_rmse_{}", i + 1), *r));
    }
    Ok(report)
}

pub(crate) fn run_colour(args: ColourArgs) -> Result<Report, Failure> {
    let config = config_of(&args.runtime)?;
    if let Some(out) = &args.out {
        check_output(out)?;
    }
    let source = GraphSource::from_path(&args.input);
    let start = Instant::now();
    let (results, stats) = run_with_stats(&config, |rank| -> Result<_, AlgoError> {
        let world = Comm::world(rank);
        let t0 = Instant::now();
        let graph = load_graph(&world, &source)?;
        world.barrier()?;
        let load = t0.elapsed();
        let t1 = Instant::now();
        let result = colour(&world, &graph, args.seed, &mut |_| {})?;
        let compute = t1.elapsed();
        if let Some(path) = &args.out {
            write_ordered(&world, path, |w| {
                for (i, c) in result.colours.as_slice().iter().enumerate() {
                    writeln!(w, "{} {c}", result.lo + i as u64)?;
                }
                Ok(())
            })?;
        }
        Ok((
            graph.n,
            result.max_degree,
            result.colours_used,
            result.rounds,
            load,
            compute,
            result.round_times,
        ))
    })?;
    let (n, max_degree, colours, rounds, load, compute, times) =
        results.into_iter().next().expect("rank 0");
    let mut report = Report::new("colour", &args.input.display().to_string(), &config);
    report.set_run(rounds, &times, load, compute, start.elapsed(), &stats);
    report.output = args.out.as_ref().map(|p| p.display().to_string());
    report.facts = vec![
        ("vertices".into(), n as f64),
        ("max_degree".into(), max_degree as f64),
        ("colours".into(), f64::from(colours)),
    ];
    Ok(report)
}
