//! `run sgd`: SGD matrix factorisation on a sqrt(p) x sqrt(p) grid of blocks, one diagonal
//! per step.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use spillway::algorithms::factor::sgd::{
    generate_ratings, grid_side, load_ratings, sgd, SgdOptions,
};
use spillway::algorithms::generate::RatingsSpec;
use spillway::algorithms::Progress;
use spillway::{Collectives, Comm};

use crate::commands::cluster::csv_line;
use crate::driver::{
    Command, Declared, Estimate, Failure, Inputs, Job, RankOut, RuntimeArgs, Timing,
};
use crate::iostat::lead_probe;
use crate::options::{non_negative, positive, ratings_spec, GenSpec};

/// The ratings when neither `--input` nor `--generate` is given.
const DEFAULT_RATINGS: &str = "ratings:100000:20000:50";

/// `run sgd`.
#[derive(Args, Debug)]
pub(crate) struct Sgd {
    /// Training ratings: Matrix Market coordinate "user item rating"; `-` reads standard
    /// input.
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generated ratings: ratings:USERS:ITEMS:AVG[:SEED], a rank-4 model with noise, AVG
    /// ratings a user on average (default ratings:100000:20000:50).
    #[arg(long, value_parser = ratings_spec, conflicts_with = "test")]
    generate: Option<RatingsSpec>,
    /// Held-out ratings (same format): their RMSE is reported after every iteration.
    #[arg(long)]
    test: Option<PathBuf>,
    /// Columns of the factors (at least 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    factors: u64,
    /// Learning rate (above 0).
    #[arg(long, default_value_t = 0.01, value_parser = positive)]
    learning_rate: f64,
    /// Regularisation (at least 0).
    #[arg(long, default_value_t = 0.05, value_parser = non_negative)]
    regularisation: f64,
    /// Iterations: passes over the ratings (at least 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    iterations: u64,
    /// Seed of the initial factors and of the update order inside each block.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Measure the RMSE after every this many iterations and after the last; 0: after the
    /// last only. Each measure reads all the ratings once more.
    #[arg(long, default_value_t = 1)]
    rmse_every: u64,
    /// Output: U, CSV, one row per user.
    #[arg(long)]
    out_u: Option<PathBuf>,
    /// Output: V, CSV, one row per item.
    #[arg(long)]
    out_v: Option<PathBuf>,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// What `run sgd` reports.
#[derive(Debug, Serialize)]
pub(crate) struct SgdFacts {
    users: u64,
    items: u64,
    training_ratings: u64,
    test_ratings: u64,
    /// Training RMSE after each iteration.
    train_rmse: Vec<f64>,
    /// Test RMSE after each iteration (with `--test`).
    test_rmse: Vec<f64>,
}

impl Sgd {
    fn spec(&self) -> RatingsSpec {
        self.generate
            .unwrap_or_else(|| ratings_spec(DEFAULT_RATINGS).expect("the default spec parses"))
    }

    fn generated_name(&self) -> String {
        GenSpec::Ratings(self.spec()).to_string()
    }
}

impl Command for Sgd {
    const NAME: &'static str = "sgd";
    type Facts = SgdFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime)
            .input("--input", self.input.as_deref())
            .input("--test", self.test.as_deref())
            .output("--out-u", self.out_u.as_deref())
            .output("--out-v", self.out_v.as_deref())
            .generated(self.input.is_none().then(|| self.generated_name()))
    }

    fn check(&self) -> Result<(), Failure> {
        grid_side(self.runtime.ranks as usize)
            .map(drop)
            .map_err(|e| Failure::option("--ranks", self.runtime.ranks, e))
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        // Per rank of the job, the counts of its exchanges (measured at 10,000 ranks).
        let Some(input) = &self.input else {
            // 24 bytes a rating kept; the item factors of a block column while generating.
            let s = self.spec();
            let ratings = s.users.saturating_mul(s.avg);
            return Ok(Estimate {
                data: ratings.saturating_mul(24),
                because: format!("--generate {}", self.generated_name()),
                items: ratings,
                outputs: vec![
                    ("--out-u", s.users.saturating_mul(self.factors * 24)),
                    ("--out-v", s.items.saturating_mul(self.factors * 24)),
                ],
                ..Estimate::default()
            }
            .ranks(32 << 10, 24));
        };
        // The ratings as read, moved and kept (16 bytes each from 8 to 20 of text) and the
        // test ones, the factor rows of this rank's block.
        let bytes = inputs.bytes(input) + self.test.as_ref().map_or(0, |t| inputs.bytes(t));
        Ok(Estimate::of_input(input, bytes, 6).ranks(32 << 10, 24))
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<SgdFacts>, Failure> {
        let (input, test) = (
            self.input.as_ref().map(|i| job.input(i)),
            self.test.as_ref().map(|t| job.input(t)),
        );
        let spec = self.spec();
        let options = SgdOptions {
            factors: self.factors as usize,
            learning_rate: self.learning_rate,
            regularisation: self.regularisation,
            iterations: self.iterations as usize,
            seed: self.seed,
            error_every: usize::try_from(self.rmse_every).unwrap_or(usize::MAX),
        };
        job.spmd(options.iterations, "sgd", |rank, bar| {
            let world = Comm::world(rank);
            let t0 = Instant::now();
            let block = match &input {
                Some(input) => load_ratings(&world, input, test.as_deref())?,
                None => generate_ratings(&world, &spec)?,
            };
            world.barrier()?;
            let load = t0.elapsed();
            let mut probe = lead_probe(rank, &world);
            let mut on_progress = |p: &Progress| {
                if let Some(probe) = probe.as_mut() {
                    probe.sample();
                }
                bar.tick(&world, p.iteration, format!("training RMSE {:.5}", p.delta));
            };
            let t1 = Instant::now();
            let (users, items) = (block.users, block.items);
            let (training_ratings, test_ratings) = (block.train_total, block.test_total);
            let result = sgd(&world, block, &options, &mut on_progress)?;
            let compute = t1.elapsed();
            // The diagonal ranks hold the blocks of U and V, in rank order.
            let k = options.factors;
            for (path, part) in [(&self.out_u, &result.u), (&self.out_v, &result.v)] {
                if let Some(path) = path {
                    job.write_ordered(&world, path, |w| {
                        for row in part.chunks(k) {
                            csv_line(w, row)?;
                        }
                        Ok(())
                    })?;
                }
            }
            let facts = SgdFacts {
                users,
                items,
                training_ratings,
                test_ratings,
                train_rmse: result.train_rmse,
                test_rmse: result.test_rmse,
            };
            Ok(Some(RankOut::of(
                &world,
                facts,
                Timing {
                    io: probe.map(|p| p.per_iteration()).unwrap_or_default(),
                    ..Timing::new(options.iterations, result.iteration_times, load, compute)
                },
            )))
        })
    }
}
