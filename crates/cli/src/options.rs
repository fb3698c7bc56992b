//! Option value types of the command line, each parsed by clap through `FromStr` or a value
//! parser: the generator spec, the running-ranks count, finite numbers, and the library's
//! named enums (listed as clap's possible values straight from the library's `ALL`).

use std::fmt;
use std::str::FromStr;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use spillway::algorithms::generate::{BlobsSpec, RatingsSpec, RmatSpec, ZipfDocsSpec};

/// Generated input: `rmat:SCALE:EDGEFACTOR[:SEED]`, `blobs:N:D:K[:SEED]` or
/// `random:LOG2N[:SEED]`; one type for every `--generate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum GenSpec {
    /// An R-MAT graph (Graph500 parameters).
    Rmat(RmatSpec),
    /// Points around Gaussian blobs.
    Blobs(BlobsSpec),
    /// A Zipf document-term matrix.
    Zipf(ZipfDocsSpec),
    /// Ratings of a low-rank model.
    Ratings(RatingsSpec),
    /// `2^log2n` random values (FFT: complex, sort: u64).
    Random {
        /// log2 of the number of values.
        log2n: u32,
        /// Seed.
        seed: u64,
    },
}

/// The largest `random:LOG2N`.
pub(crate) const MAX_RANDOM_LOG2N: u32 = 40;

impl GenSpec {
    /// The kind, as written before the first `:`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            GenSpec::Rmat(_) => "rmat",
            GenSpec::Blobs(_) => "blobs",
            GenSpec::Zipf(_) => "zipf",
            GenSpec::Ratings(_) => "ratings",
            GenSpec::Random { .. } => "random",
        }
    }

    /// The R-MAT spec, or why this is not one (for a command that needs a graph).
    pub(crate) fn rmat(self) -> Result<RmatSpec, String> {
        match self {
            GenSpec::Rmat(r) => Ok(r),
            other => Err(format!(
                "a {} generator; this command needs rmat:SCALE:EDGEFACTOR[:SEED]",
                other.kind()
            )),
        }
    }

    /// The blobs spec, or why this is not one.
    pub(crate) fn blobs(self) -> Result<BlobsSpec, String> {
        match self {
            GenSpec::Blobs(b) => Ok(b),
            other => Err(format!(
                "a {} generator; this command needs blobs:N:D:K[:SEED]",
                other.kind()
            )),
        }
    }

    /// The document-term spec, or why this is not one.
    pub(crate) fn zipf(self) -> Result<ZipfDocsSpec, String> {
        match self {
            GenSpec::Zipf(z) => Ok(z),
            other => Err(format!(
                "a {} generator; this command needs zipf:DOCS:TERMS:AVG[:SEED]",
                other.kind()
            )),
        }
    }

    /// The ratings spec, or why this is not one.
    pub(crate) fn ratings(self) -> Result<RatingsSpec, String> {
        match self {
            GenSpec::Ratings(r) => Ok(r),
            other => Err(format!(
                "a {} generator; this command needs ratings:USERS:ITEMS:AVG[:SEED]",
                other.kind()
            )),
        }
    }

    /// `(log2n, seed)` of a random spec, or why this is not one.
    pub(crate) fn random(self) -> Result<(u32, u64), String> {
        match self {
            GenSpec::Random { log2n, seed } => Ok((log2n, seed)),
            other => Err(format!(
                "a {} generator; this command needs random:LOG2N[:SEED]",
                other.kind()
            )),
        }
    }
}

impl FromStr for GenSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<GenSpec, String> {
        match s.split(':').next() {
            Some("rmat") => RmatSpec::parse(s).map(GenSpec::Rmat),
            Some("blobs") => BlobsSpec::parse(s).map(GenSpec::Blobs),
            Some("zipf") => ZipfDocsSpec::parse(s).map(GenSpec::Zipf),
            Some("ratings") => RatingsSpec::parse(s).map(GenSpec::Ratings),
            Some("random") => {
                const USAGE: &str = "expected random:LOG2N[:SEED]";
                let fields: Vec<&str> = s.split(':').skip(1).collect();
                let (log, seed) = match fields.as_slice() {
                    [log] => (*log, None),
                    [log, seed] => (*log, Some(*seed)),
                    _ => return Err(USAGE.into()),
                };
                let log2n: u32 = log
                    .parse()
                    .map_err(|_| format!("invalid LOG2N '{log}' ({USAGE})"))?;
                if log2n > MAX_RANDOM_LOG2N {
                    return Err(format!(
                        "LOG2N must be at most {MAX_RANDOM_LOG2N}, got {log2n}"
                    ));
                }
                let seed = match seed {
                    Some(t) => t.parse().map_err(|_| format!("invalid seed '{t}'"))?,
                    None => 1,
                };
                Ok(GenSpec::Random { log2n, seed })
            }
            _ => Err(format!(
                "unknown generator '{s}' (expected rmat:SCALE:EDGEFACTOR[:SEED], \
                 blobs:N:D:K[:SEED], zipf:DOCS:TERMS:AVG[:SEED], \
                 ratings:USERS:ITEMS:AVG[:SEED] or random:LOG2N[:SEED])"
            )),
        }
    }
}

impl fmt::Display for GenSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenSpec::Rmat(r) => write!(f, "rmat:{}:{}:{}", r.scale, r.edge_factor, r.seed),
            GenSpec::Blobs(b) => write!(f, "blobs:{}:{}:{}:{}", b.n, b.d, b.k, b.seed),
            GenSpec::Zipf(z) => write!(f, "zipf:{}:{}:{}:{}", z.docs, z.terms, z.avg, z.seed),
            GenSpec::Ratings(r) => {
                write!(f, "ratings:{}:{}:{}:{}", r.users, r.items, r.avg, r.seed)
            }
            GenSpec::Random { log2n, seed } => write!(f, "random:{log2n}:{seed}"),
        }
    }
}

/// `--generate` of a command that needs an R-MAT graph.
pub(crate) fn rmat_spec(text: &str) -> Result<RmatSpec, String> {
    text.parse::<GenSpec>()?.rmat()
}

/// `--generate` of a command that needs points.
pub(crate) fn blobs_spec(text: &str) -> Result<BlobsSpec, String> {
    text.parse::<GenSpec>()?.blobs()
}

/// `--generate` of a command that needs a document-term matrix.
pub(crate) fn zipf_spec(text: &str) -> Result<ZipfDocsSpec, String> {
    text.parse::<GenSpec>()?.zipf()
}

/// `--generate` of a command that needs ratings.
pub(crate) fn ratings_spec(text: &str) -> Result<RatingsSpec, String> {
    text.parse::<GenSpec>()?.ratings()
}

/// `--generate` of a command that needs random values: `(log2n, seed)`.
pub(crate) fn random_spec(text: &str) -> Result<(u32, u64), String> {
    text.parse::<GenSpec>()?.random()
}

/// Whether an input is Matrix Market: by the name it was given (`.mtx`), or, for a name
/// without that extension (standard input), by its first bytes.
pub(crate) fn is_matrix_market(given: &std::path::Path, actual: &std::path::Path) -> bool {
    if given
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("mtx"))
    {
        return true;
    }
    if given != actual {
        let mut head = [0u8; 14];
        if let Ok(mut f) = std::fs::File::open(actual) {
            use std::io::Read;
            if f.read_exact(&mut head).is_ok() {
                return &head == b"%%MatrixMarket";
            }
        }
    }
    false
}

/// Ranks of a node that execute at once: a number, or `dynamic`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Running {
    /// At most this many (at least 1).
    Count(u32),
    /// One, plus more up to the cores while the memory budget has room.
    Dynamic,
}

impl FromStr for Running {
    type Err = String;

    fn from_str(s: &str) -> Result<Running, String> {
        if s == "dynamic" {
            return Ok(Running::Dynamic);
        }
        match s.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(Running::Count(n)),
            Ok(_) => Err("at least 1 rank must run".into()),
            Err(_) => Err(format!("'{s}' is neither a number nor dynamic")),
        }
    }
}

impl fmt::Display for Running {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Running::Count(n) => write!(f, "{n}"),
            Running::Dynamic => f.write_str("dynamic"),
        }
    }
}

/// A library enum that the command line chooses by name; its possible values are the
/// library's own list.
pub(crate) trait Named: Copy + Send + Sync + 'static {
    /// Every value.
    fn all() -> &'static [Self];
    /// The name on the command line.
    fn name(self) -> &'static str;
}

macro_rules! named {
    ($($t:ty),* $(,)?) => {$(
        impl Named for $t {
            fn all() -> &'static [Self] {
                &<$t>::ALL
            }
            fn name(self) -> &'static str {
                <$t>::name(self)
            }
        }
    )*};
}

named!(
    spillway::Policy,
    spillway::ResumePolicy,
    spillway::Backend,
    spillway::mapreduce::NodeAggregation,
    spillway::algorithms::graph::cc::Variant,
    spillway_structures::compress::Dtype,
    spillway_structures::compress::Method,
    spillway_structures::compress::Encoding,
    spillway_structures::compress::SetRule,
    spillway_structures::dyngraph::Structure,
);

/// The value parser of a [`Named`] type: its names, listed in `--help` and error messages.
pub(crate) fn named<T: Named>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::all().iter().map(|v| v.name())).map(|name| {
        *T::all()
            .iter()
            .find(|v| v.name() == name)
            .expect("clap accepted one of the possible values")
    })
}

/// A finite `f64` (no NaN, no infinity).
pub(crate) fn finite(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("'{text}' is not a finite number"))
    }
}

/// A finite `f64` above 0.
pub(crate) fn positive(text: &str) -> Result<f64, String> {
    let v = finite(text)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} is not above 0"))
    }
}

/// A finite `f64` of at least 0.
pub(crate) fn non_negative(text: &str) -> Result<f64, String> {
    let v = finite(text)?;
    if v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} is below 0"))
    }
}

/// A fraction in `[0, 1]`.
pub(crate) fn fraction(text: &str) -> Result<f64, String> {
    let v = finite(text)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is not in [0, 1]"))
    }
}

/// A byte size above 0.
pub(crate) fn nonzero_size(text: &str) -> Result<spillway::ByteSize, String> {
    let size: spillway::ByteSize = text.parse().map_err(|e| format!("{e}"))?;
    if size.bytes() == 0 {
        return Err("a size of 0 bytes".into());
    }
    if size.to_usize().is_none() {
        return Err(format!("{size} is more than this machine can address"));
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec() -> impl Strategy<Value = GenSpec> {
        prop_oneof![
            (1u32..=31, 1u32.., any::<u64>()).prop_map(|(scale, edge_factor, seed)| {
                GenSpec::Rmat(RmatSpec {
                    scale,
                    edge_factor,
                    seed,
                })
            }),
            (1u64.., 1usize..1 << 16, 1usize..1 << 16, any::<u64>())
                .prop_map(|(n, d, k, seed)| GenSpec::Blobs(BlobsSpec { n, d, k, seed })),
            (0u32..=MAX_RANDOM_LOG2N, any::<u64>())
                .prop_map(|(log2n, seed)| GenSpec::Random { log2n, seed }),
            (
                1u64..=u64::from(u32::MAX),
                3u64..=u64::from(u32::MAX),
                any::<u64>()
            )
                .prop_map(|(docs, terms, seed)| GenSpec::Zipf(ZipfDocsSpec {
                    docs,
                    terms,
                    avg: terms / 3,
                    seed
                })),
        ]
    }

    proptest! {
        #[test]
        fn gen_spec_display_parses_back(s in spec()) {
            prop_assert_eq!(s.to_string().parse::<GenSpec>(), Ok(s));
        }

        #[test]
        fn gen_spec_never_panics(text in "(rmat|blobs|random|x)?(:[-0-9a-z]{0,22}){0,5}") {
            if let Ok(s) = text.parse::<GenSpec>() {
                prop_assert_eq!(s.to_string().parse::<GenSpec>(), Ok(s));
            }
        }

        #[test]
        fn running_round_trips(n in 1u32..) {
            let r = Running::Count(n);
            prop_assert_eq!(r.to_string().parse::<Running>(), Ok(r));
        }

        #[test]
        fn running_never_panics(text in "\\PC{0,12}") {
            if let Ok(Running::Count(n)) = text.parse::<Running>() {
                prop_assert!(n >= 1);
            }
        }

        #[test]
        fn finite_numbers_only(text in "[-+0-9.eEinfINFaN]{0,12}") {
            if let Ok(v) = finite(&text) {
                prop_assert!(v.is_finite());
            }
            if let Ok(v) = positive(&text) {
                prop_assert!(v > 0.0 && v.is_finite());
            }
            if let Ok(v) = fraction(&text) {
                prop_assert!((0.0..=1.0).contains(&v));
            }
        }

        #[test]
        fn finite_round_trips(v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
            prop_assert_eq!(finite(&v.to_string()), Ok(v));
        }
    }

    #[test]
    fn gen_spec_refuses_what_it_must() {
        for text in [
            "",
            "rmat",
            "rmat:0:4",
            "rmat:32:4",
            "rmat:4",
            "rmat:4:0",
            "rmat:x:4",
            "rmat:4:4:1:2",
            "blobs:0:2:2",
            "blobs:10:0:2",
            "blobs:10:2:0",
            "blobs:10:2",
            "random",
            "random:41",
            "random:-1",
            "random:3:x",
            "uniform:3",
            "RMAT:4:4",
        ] {
            assert!(text.parse::<GenSpec>().is_err(), "{text:?} was accepted");
        }
        assert_eq!(
            "rmat:4:8".parse::<GenSpec>().map(|s| s.to_string()),
            Ok("rmat:4:8:1".into())
        );
        assert!("blobs:10:2:2".parse::<GenSpec>().unwrap().rmat().is_err());
    }

    #[test]
    fn degenerate_numbers_are_refused() {
        for text in ["NaN", "inf", "-inf", "x", ""] {
            assert!(finite(text).is_err(), "{text}");
        }
        assert!(positive("0").is_err());
        assert!(non_negative("-1e-300").is_err());
        assert!(fraction("1.0000001").is_err());
        assert!(nonzero_size("0").is_err());
        assert!(nonzero_size("0K").is_err());
        assert_eq!(nonzero_size("4K").map(|s| s.bytes()), Ok(4096));
        assert!("0".parse::<Running>().is_err());
    }

    #[test]
    fn named_values_come_from_the_library() {
        let names: Vec<&str> = spillway::Policy::all().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["araw", "arlw", "lrlw"]);
        for v in spillway::mapreduce::NodeAggregation::all() {
            assert_eq!(
                spillway::mapreduce::NodeAggregation::all()
                    .iter()
                    .filter(|w| w.name() == v.name())
                    .count(),
                1
            );
        }
    }
}
