//! `gen rmat` and `gen blobs`: generated inputs written to a file, streamed in pieces (or,
//! with `--dedup`, from a MapReduce job that removes duplicate edges).

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use spillway::algorithms::generate::{BlobsSpec, RatingsSpec, RmatSpec, ZipfDocsSpec};
use spillway::algorithms::graph::rmat::rmat_dedup;
use spillway::Comm;

use crate::driver::{
    Command, CommonArgs, Declared, Estimate, Failure, Inputs, Job, RankOut, RuntimeArgs, Timing,
    MAPREDUCE_RANK,
};
use crate::options::GenSpec;

/// `gen rmat`: an R-MAT edge list with the Graph500 parameters (0.57, 0.19, 0.19, 0.05).
#[derive(Args, Debug)]
pub(crate) struct GenRmat {
    /// log2 of the number of vertices (1-31).
    #[arg(long)]
    scale: u32,
    /// Edges per vertex (at least 1).
    #[arg(long)]
    edge_factor: u32,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file ("src dst" per line; `-`: standard output).
    #[arg(long)]
    out: PathBuf,
    /// Remove duplicate edges with a MapReduce job (the edges of each rank in increasing
    /// order, ranks one after the other) on --ranks ranks.
    #[arg(long)]
    dedup: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// What `gen rmat` reports.
#[derive(Debug, Serialize)]
pub(crate) struct GenRmatFacts {
    vertices: u64,
    edges: u64,
    dedup: bool,
}

impl GenRmat {
    fn spec(&self) -> Result<RmatSpec, String> {
        RmatSpec::parse(&format!(
            "rmat:{}:{}:{}",
            self.scale, self.edge_factor, self.seed
        ))
    }

    fn header(&self, dedup: &str) -> String {
        format!(
            "# R-MAT scale={} edge_factor={} seed={} a=0.57 b=0.19 c=0.19 d=0.05{dedup}",
            self.scale, self.edge_factor, self.seed
        )
    }
}

impl Command for GenRmat {
    const NAME: &'static str = "gen rmat";
    type Facts = GenRmatFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::job(&self.runtime)
            .output("--out", Some(&self.out))
            .generated(self.spec().ok().map(|s| GenSpec::Rmat(s).to_string()))
    }

    fn check(&self) -> Result<(), Failure> {
        self.spec().map(drop).map_err(|e| {
            Failure::usage(format!(
                "--scale {} --edge-factor {}: {e}",
                self.scale, self.edge_factor
            ))
        })
    }

    fn estimate(&self, _: Inputs<'_>) -> Result<Estimate, Failure> {
        let Ok(spec) = self.spec() else {
            return Ok(Estimate::default());
        };
        let m = spec.num_edges();
        // Two ids of at most this many digits, a space and a newline per edge.
        let digits = u64::from(self.scale) * 30103 / 100_000 + 1;
        let estimate = Estimate {
            // With --dedup, the edges as generated, emitted, sorted, sent, received and kept
            // (about 100 bytes an edge measured).
            data: if self.dedup { m.saturating_mul(96) } else { 0 },
            because: format!("--scale {} --edge-factor {}", self.scale, self.edge_factor),
            items: m,
            outputs: vec![("--out", m.saturating_mul(2 * digits + 2))],
            ..Default::default()
        };
        // Only --dedup runs ranks.
        Ok(match self.dedup {
            true => estimate.ranks(MAPREDUCE_RANK.0, MAPREDUCE_RANK.1),
            false => Estimate {
                no_ranks: true,
                ..estimate
            },
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<GenRmatFacts>, Failure> {
        let spec = self.spec().map_err(Failure::usage)?;
        if self.dedup {
            return self.run_dedup(job, &spec);
        }
        job.write(&self.out, |w| {
            writeln!(w, "{}", self.header(""))?;
            let total = spec.num_edges();
            let mut buf = Vec::new();
            let mut at = 0;
            while at < total {
                let end = (at + (1 << 20)).min(total);
                buf.clear();
                spec.edges(at..end, &mut buf);
                for (s, d) in &buf {
                    writeln!(w, "{s} {d}")?;
                }
                at = end;
            }
            Ok(())
        })?;
        Ok(Some(GenRmatFacts {
            vertices: spec.num_vertices(),
            edges: spec.num_edges(),
            dedup: false,
        }))
    }
}

impl GenRmat {
    /// `--dedup`: the edges without duplicates, from a MapReduce job.
    fn run_dedup(&self, job: &Job<'_>, spec: &RmatSpec) -> Result<Option<GenRmatFacts>, Failure> {
        let header = self.header(" dedup");
        job.spmd(1, "gen rmat", |rank, _| {
            let world = Comm::world(rank);
            let (edges, _) = rmat_dedup(&world, spec)?;
            let kept = edges.count(&world)?;
            let mut local: Vec<(u32, u32)> =
                edges.to_local_vec().into_iter().map(|(e, ())| e).collect();
            local.sort_unstable();
            let first = world.rank() == 0;
            job.write_ordered(&world, &self.out, |w| {
                if first {
                    writeln!(w, "{header}")?;
                }
                for (s, d) in &local {
                    writeln!(w, "{s} {d}")?;
                }
                Ok(())
            })?;
            Ok(Some(RankOut {
                facts: GenRmatFacts {
                    vertices: spec.num_vertices(),
                    edges: kept,
                    dedup: true,
                },
                timing: Timing::default(),
                lead: first,
            }))
        })
    }
}

/// `gen blobs`: points around Gaussian blobs, as `run kmeans --generate blobs:N:D:K[:SEED]`
/// makes them.
#[derive(Args, Debug)]
pub(crate) struct GenBlobs {
    /// Number of points (at least 1).
    #[arg(long)]
    points: u64,
    /// Dimension (at least 1).
    #[arg(long)]
    dim: usize,
    /// Number of blobs (at least 1).
    #[arg(long)]
    k: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file (CSV, one point per line; each value printed so that it reads back
    /// exactly; `-`: standard output).
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `gen blobs` reports.
#[derive(Debug, Serialize)]
pub(crate) struct GenBlobsFacts {
    points: u64,
    dimensions: usize,
    blobs: usize,
}

impl GenBlobs {
    fn spec(&self) -> Result<BlobsSpec, String> {
        BlobsSpec::parse(&format!(
            "blobs:{}:{}:{}:{}",
            self.points, self.dim, self.k, self.seed
        ))
    }
}

impl Command for GenBlobs {
    const NAME: &'static str = "gen blobs";
    type Facts = GenBlobsFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::new(&self.common)
            .output("--out", Some(&self.out))
            .generated(self.spec().ok().map(|s| GenSpec::Blobs(s).to_string()))
    }

    fn check(&self) -> Result<(), Failure> {
        self.spec().map(drop).map_err(|e| {
            Failure::usage(format!(
                "--points {} --dim {} --k {}: {e}",
                self.points, self.dim, self.k
            ))
        })
    }

    fn estimate(&self, _: Inputs<'_>) -> Result<Estimate, Failure> {
        let values = self.points.saturating_mul(self.dim as u64);
        Ok(Estimate {
            // The centres, and a piece of 2^16 points at a time.
            data: (self.k as u64)
                .saturating_mul(self.dim as u64)
                .saturating_add((1 << 16) * self.dim as u64)
                .saturating_mul(8),
            because: format!("--k {} --dim {}", self.k, self.dim),
            items: values,
            // About 20 characters per value.
            outputs: vec![("--out", values.saturating_mul(20))],
            ..Default::default()
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<GenBlobsFacts>, Failure> {
        let spec = self.spec().map_err(Failure::usage)?;
        job.write(&self.out, |w| {
            let mut values = Vec::new();
            let mut line = String::new();
            let mut at = 0;
            while at < spec.n {
                let end = (at + (1 << 16)).min(spec.n);
                values.clear();
                spec.points(at..end, &mut values);
                for point in values.chunks_exact(spec.d) {
                    line.clear();
                    for (j, v) in point.iter().enumerate() {
                        if j > 0 {
                            line.push(',');
                        }
                        // `Display` of f64 is the shortest text that parses back to the
                        // same value.
                        let _ = write!(line, "{v}");
                    }
                    line.push('\n');
                    w.write_all(line.as_bytes())?;
                }
                at = end;
            }
            Ok(())
        })?;
        Ok(Some(GenBlobsFacts {
            points: spec.n,
            dimensions: spec.d,
            blobs: spec.k,
        }))
    }
}

/// `gen zipf`: a document-term matrix of term counts, as `run spkmeans --generate
/// zipf:DOCS:TERMS:AVG[:SEED]` makes it, written as Matrix Market.
#[derive(Args, Debug)]
pub(crate) struct GenZipf {
    /// Documents: rows (1 to 2^32 - 1).
    #[arg(long)]
    docs: u64,
    /// Vocabulary: columns (2 to 2^32 - 1).
    #[arg(long)]
    terms: u64,
    /// Average distinct terms a document (at least 1, at most a third of --terms).
    #[arg(long)]
    avg: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file (Matrix Market coordinate, integer values, rows in order; `-`: standard
    /// output).
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `gen zipf` reports.
#[derive(Debug, Serialize)]
pub(crate) struct GenZipfFacts {
    rows: u64,
    columns: u64,
    nonzeros: u64,
}

impl GenZipf {
    fn spec(&self) -> Result<ZipfDocsSpec, String> {
        ZipfDocsSpec::parse(&format!(
            "zipf:{}:{}:{}:{}",
            self.docs, self.terms, self.avg, self.seed
        ))
    }
}

impl Command for GenZipf {
    const NAME: &'static str = "gen zipf";
    type Facts = GenZipfFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::new(&self.common)
            .output("--out", Some(&self.out))
            .generated(self.spec().ok().map(|s| GenSpec::Zipf(s).to_string()))
    }

    fn check(&self) -> Result<(), Failure> {
        self.spec().map(drop).map_err(|e| {
            Failure::usage(format!(
                "--docs {} --terms {} --avg {}: {e}",
                self.docs, self.terms, self.avg
            ))
        })
    }

    fn estimate(&self, _: Inputs<'_>) -> Result<Estimate, Failure> {
        let nonzeros = self.docs.saturating_mul(self.avg);
        // Two ids and a count of at most this many digits, two spaces and a newline each.
        let digits = |n: u64| u64::from(n.max(1).ilog10()) + 1;
        Ok(Estimate {
            // One document at a time.
            data: self.avg.saturating_mul(32),
            because: format!("--docs {} --avg {}", self.docs, self.avg),
            items: nonzeros,
            outputs: vec![(
                "--out",
                nonzeros.saturating_mul(digits(self.docs) + digits(self.terms) + 6),
            )],
            ..Default::default()
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<GenZipfFacts>, Failure> {
        let spec = self.spec().map_err(Failure::usage)?;
        // The size line needs the non-zeros: each document's length is its stream's first draw.
        let nonzeros: u64 = (0..spec.docs).map(|doc| spec.doc_len(doc)).sum();
        job.write(&self.out, |w| {
            writeln!(w, "%%MatrixMarket matrix coordinate integer general")?;
            writeln!(w, "% {}", GenSpec::Zipf(spec))?;
            writeln!(w, "{} {} {nonzeros}", spec.docs, spec.terms)?;
            let (mut words, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
            let mut line = String::new();
            for doc in 0..spec.docs {
                cols.clear();
                vals.clear();
                spec.document(doc, &mut words, &mut cols, &mut vals);
                line.clear();
                for (c, v) in cols.iter().zip(&vals) {
                    let _ = writeln!(line, "{} {} {v}", doc + 1, c + 1);
                }
                w.write_all(line.as_bytes())?;
            }
            Ok(())
        })?;
        Ok(Some(GenZipfFacts {
            rows: spec.docs,
            columns: spec.terms,
            nonzeros,
        }))
    }
}

/// `gen ratings`: ratings of a rank-4 model, as `run sgd --generate
/// ratings:USERS:ITEMS:AVG[:SEED]` makes them, written as Matrix Market.
#[derive(Args, Debug)]
pub(crate) struct GenRatings {
    /// Users: rows (1 to 2^32 - 1).
    #[arg(long)]
    users: u64,
    /// Items: columns (1 to 2^32 - 1).
    #[arg(long)]
    items: u64,
    /// Average ratings a user (1 to 2^20 - 1).
    #[arg(long)]
    avg: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file (Matrix Market coordinate, users in order, each value printed so that it
    /// reads back exactly; `-`: standard output).
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// What `gen ratings` reports.
#[derive(Debug, Serialize)]
pub(crate) struct GenRatingsFacts {
    users: u64,
    items: u64,
    ratings: u64,
}

impl GenRatings {
    fn spec(&self) -> Result<RatingsSpec, String> {
        RatingsSpec::parse(&format!(
            "ratings:{}:{}:{}:{}",
            self.users, self.items, self.avg, self.seed
        ))
    }
}

impl Command for GenRatings {
    const NAME: &'static str = "gen ratings";
    type Facts = GenRatingsFacts;

    fn declare(&self) -> Declared<'_> {
        Declared::new(&self.common)
            .output("--out", Some(&self.out))
            .generated(self.spec().ok().map(|s| GenSpec::Ratings(s).to_string()))
    }

    fn check(&self) -> Result<(), Failure> {
        self.spec().map(drop).map_err(|e| {
            Failure::usage(format!(
                "--users {} --items {} --avg {}: {e}",
                self.users, self.items, self.avg
            ))
        })
    }

    fn estimate(&self, _: Inputs<'_>) -> Result<Estimate, Failure> {
        let ratings = self.users.saturating_mul(self.avg);
        Ok(Estimate {
            // The items' hidden factors.
            data: self.items.saturating_mul(32),
            because: format!("--items {}", self.items),
            items: ratings,
            // Two ids and about 20 characters of value.
            outputs: vec![("--out", ratings.saturating_mul(44))],
            ..Default::default()
        })
    }

    fn run(&self, job: &Job<'_>) -> Result<Option<GenRatingsFacts>, Failure> {
        let spec = self.spec().map_err(Failure::usage)?;
        let ratings: u64 = (0..spec.users).map(|u| spec.user_len(u)).sum();
        let factors: Vec<_> = (0..spec.items).map(|i| spec.item_factors(i)).collect();
        job.write(&self.out, |w| {
            writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
            writeln!(w, "% {}", GenSpec::Ratings(spec))?;
            writeln!(w, "{} {} {ratings}", spec.users, spec.items)?;
            let mut line = String::new();
            for u in 0..spec.users {
                line.clear();
                let item_factors = |i: u64| factors[i as usize];
                spec.user_ratings(u, &|_| true, &item_factors, &mut |i, _, r| {
                    // `Display` of f64 is the shortest text that parses back to the same value.
                    let _ = writeln!(line, "{} {} {r}", u + 1, i + 1);
                });
                w.write_all(line.as_bytes())?;
            }
            Ok(())
        })?;
        Ok(Some(GenRatingsFacts {
            users: spec.users,
            items: spec.items,
            ratings,
        }))
    }
}
