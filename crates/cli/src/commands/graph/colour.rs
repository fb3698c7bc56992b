//! `run colour`: greedy graph colouring in a priority order, distributed as Jones-Plassmann.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use serde::Serialize;
use spillway::algorithms::graph::colour::{colour, Order};
use spillway::algorithms::graph::{load_graph, GraphSource};
use spillway::{Collectives, Comm};

use crate::driver::{
    Command, Declared, Estimate, Failure, Inputs, Job, RankOut, RuntimeArgs, Timing,
};
use crate::options::is_matrix_market;

/// The order in which vertices are coloured.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColourOrder {
    /// Larger degree first, ties to the smaller id (networkx's `largest_first`).
    LargestFirst,
    /// Random priorities from `--seed` (Jones-Plassmann's).
    Random,
}

/// Recolouring passes of `run colour` at most (each is about as costly as the first pass).
const MAX_PASSES: usize = 1000;

/// `run colour`.
#[derive(Args, Debug)]
pub(crate) struct Colour {
    /// Graph: SNAP edge list ("src dst" per line) or Matrix Market (.mtx); edges are
    /// undirected; `-` reads standard input.
    #[arg(long)]
    input: PathBuf,
    /// The order of the greedy colouring.
    #[arg(long, value_enum, default_value_t = ColourOrder::LargestFirst)]
    order: ColourOrder,
    /// Seed of the random priorities (with `--order random`) [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// Recolouring passes after the first colouring (iterated greedy: each takes the colour
    /// classes in reverse order and never needs more colours); 0 keeps the first colouring.
    #[arg(long, default_value_t = 2)]
    passes: usize,
    /// Output: "vertex colour" per vertex, colours from 0.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// What `run colour` reports.
#[derive(Debug, Serialize)]
pub(crate) struct ColourFacts {
    vertices: u64,
    max_degree: u64,
    colours: u32,
}

impl Command for Colour {
    const NAME: &'static str = "colour";
    type Facts = ColourFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime)
            .input("--input", Some(&self.input))
            .output("--out", self.out.as_deref())
    }

    fn check(&self) -> Result<(), Failure> {
        if self.seed.is_some() && self.order != ColourOrder::Random {
            return Err(Failure::usage("--seed needs --order random"));
        }
        if self.passes > MAX_PASSES {
            return Err(Failure::usage(format!(
                "--passes: {} is more than {MAX_PASSES}",
                self.passes
            )));
        }
        Ok(())
    }

    fn estimate(&self, inputs: Inputs<'_>) -> Result<Estimate, Failure> {
        // The edges both ways as read, sent and kept, the colours; an exchange with every
        // rank per round.
        Ok(Estimate::of_input(&self.input, inputs.bytes(&self.input), 8).ranks(40 << 10, 16))
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<ColourFacts>, Failure> {
        let path = job.input(&self.input);
        let source = if is_matrix_market(&self.input, &path) {
            GraphSource::MatrixMarket(path)
        } else {
            GraphSource::EdgeList(path)
        };
        job.spmd(0, "colour", |rank, _| {
            let world = Comm::world(rank);
            let t0 = Instant::now();
            let graph = load_graph(&world, &source)?;
            world.barrier()?;
            let load = t0.elapsed();
            let t1 = Instant::now();
            let order = match self.order {
                ColourOrder::LargestFirst => Order::LargestFirst,
                ColourOrder::Random => Order::Random {
                    seed: self.seed.unwrap_or(1),
                },
            };
            let result = colour(&world, &graph, order, self.passes, &mut |_| {})?;
            let compute = t1.elapsed();
            if let Some(path) = &self.out {
                job.write_ordered(&world, path, |w| {
                    for (i, c) in result.colours.as_slice().iter().enumerate() {
                        writeln!(w, "{} {c}", result.lo + i as u64)?;
                    }
                    Ok(())
                })?;
            }
            let facts = ColourFacts {
                vertices: graph.n,
                max_degree: result.max_degree,
                colours: result.colours_used,
            };
            Ok(Some(RankOut::of(
                &world,
                facts,
                Timing::new(result.rounds, result.round_times, load, compute),
            )))
        })
    }
}
