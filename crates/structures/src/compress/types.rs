//! The public types of the compression API: settings, values, headers, results.

use super::encodings::IdPredictor;
use super::float::Sample;

/// The zstd level used unless [`Options::level`] says otherwise.
pub const DEFAULT_LEVEL: i32 = 19;

/// Value tables shorter than this stay raw even with [`Options::lattice`].
pub const LATTICE_MIN_VALUES: usize = 64;

/// Element type of the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// 32-bit IEEE floats.
    F32,
    /// 64-bit IEEE floats.
    F64,
}

impl Dtype {
    /// Both types.
    pub const ALL: [Dtype; 2] = [Dtype::F32, Dtype::F64];

    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F64 => 8,
        }
    }

    /// `f32` or `f64`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
        }
    }

    /// Parses `f32` or `f64`.
    pub fn from_name(s: &str) -> Option<Dtype> {
        match s {
            "f32" => Some(Dtype::F32),
            "f64" => Some(Dtype::F64),
            _ => None,
        }
    }
}

/// How the points are decomposed into sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Greedy runs of the sorted values, fewest sets.
    Sbd1,
    /// Largest runs first.
    Sbd2,
    /// Regions grown from the lowest unassigned value.
    Rbd1,
    /// Connected components of the SBD1 sets.
    Rbd2,
    /// Core regions with interior points, then expansion, then RBD1.
    Rbd3,
    /// Prediction from decoded neighbours, quantisation of the residual, range coding (not a
    /// decomposition: every value is predicted, as SZ does).
    Predict,
}

impl Method {
    /// All methods, in order.
    pub const ALL: [Method; 6] = [
        Method::Sbd1,
        Method::Sbd2,
        Method::Rbd1,
        Method::Rbd2,
        Method::Rbd3,
        Method::Predict,
    ];

    /// The method to use unless there is a reason for another one.
    pub const DEFAULT: Method = Method::Predict;

    /// The lower-case name (`sbd1` ...).
    pub fn name(self) -> &'static str {
        match self {
            Method::Sbd1 => "sbd1",
            Method::Sbd2 => "sbd2",
            Method::Rbd1 => "rbd1",
            Method::Rbd2 => "rbd2",
            Method::Rbd3 => "rbd3",
            Method::Predict => "predict",
        }
    }

    /// Parses a name of [`name`](Self::name).
    pub fn from_name(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == s)
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            Method::Sbd1 => 1,
            Method::Sbd2 => 2,
            Method::Rbd1 => 3,
            Method::Rbd2 => 4,
            Method::Rbd3 => 5,
            Method::Predict => 6,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.code() == c)
    }

    /// Whether the method stores regions (boundaries and seeds).
    pub fn is_region_based(self) -> bool {
        matches!(self, Method::Rbd1 | Method::Rbd2 | Method::Rbd3)
    }
}

/// How the set of every point is stored by the set-based methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Scalar quantisation encoding: a set id per point.
    Sqe,
    /// Differential encoding: each set's points as gaps.
    De,
}

impl Encoding {
    /// Both encodings.
    pub const ALL: [Encoding; 2] = [Encoding::Sqe, Encoding::De];

    /// `sqe` or `de`.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Sqe => "sqe",
            Encoding::De => "de",
        }
    }

    /// Parses `sqe` or `de`.
    pub fn from_name(s: &str) -> Option<Encoding> {
        match s {
            "sqe" => Some(Encoding::Sqe),
            "de" => Some(Encoding::De),
            _ => None,
        }
    }
}

/// Which values may share a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetRule {
    /// Values within `epsilon` of one common value of the output type (a range up to
    /// `2 epsilon`); the stored value is the one nearest the midpoint of the set.
    Ball,
    /// The thesis's epsilon-bounded sets: range at most `epsilon`; the stored value is the
    /// one nearest the mean.
    Range,
}

impl SetRule {
    /// Both rules.
    pub const ALL: [SetRule; 2] = [SetRule::Ball, SetRule::Range];

    /// `ball` or `range`.
    pub fn name(self) -> &'static str {
        match self {
            SetRule::Ball => "ball",
            SetRule::Range => "range",
        }
    }

    /// Parses `ball` or `range`.
    pub fn from_name(s: &str) -> Option<SetRule> {
        match s {
            "ball" => Some(SetRule::Ball),
            "range" => Some(SetRule::Range),
            _ => None,
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            SetRule::Ball => 1,
            SetRule::Range => 2,
        }
    }
}

/// Settings of [`compress`](super::compress).
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The absolute error bound (finite, > 0).
    pub epsilon: f64,
    /// The decomposition.
    pub method: Method,
    /// Storage of the set ids for SBD1/SBD2 (the region methods always store regions).
    pub encoding: Encoding,
    /// Prediction of SQE ids; for [`Method::Predict`], the value predictor (`Interpolation`
    /// or `Lorenzo`; the others are refused).
    pub predictor: IdPredictor,
    /// Which values may share a set.
    pub set_rule: SetRule,
    /// zstd level (1-22) of the decompositions' streams (unused by [`Method::Predict`]).
    pub level: i32,
    /// SQE only: let every point take any set whose value is within `epsilon` of it,
    /// preferring the id its predictor expects; `false` keeps the decomposition's own
    /// partition (the thesis's).
    pub relaxed: bool,
    /// The decomposition is computed for the bound `set_radius * epsilon` (a fraction in
    /// `(0, 1]`), giving more, narrower sets. With `relaxed`, points then have several
    /// admissible sets to choose from, which lets the ids follow the predictor more often.
    pub set_radius: f64,
    /// Store the representatives on a lattice of step `2^k <= epsilon / 16` (a few bytes
    /// each instead of a full float); the sets are then built for `epsilon - 2^k` so that a
    /// lattice point fits every set. Applies to tables of at least [`LATTICE_MIN_VALUES`]
    /// values, and falls back to raw values where the lattice cannot be exact (epsilon tiny
    /// relative to the values). For [`Method::Predict`]: code integer-valued grids losslessly
    /// when `2 epsilon < 1` (lattice mode).
    pub lattice: bool,
    /// SBD with SQE only: try the id encodings of [`SEARCH_CANDIDATES`] (with a fast zstd
    /// level) in place of `predictor`, `relaxed` and `set_radius`, and keep the smallest.
    /// For [`Method::Predict`]: choose the predictor (interpolation variants or Lorenzo) by
    /// coding a sample of the grid (about 2.5% of a large grid) with each.
    pub search: bool,
}

/// The SQE variants [`Options::search`] tries: `(predictor, relaxed, set radius)`.
pub const SEARCH_CANDIDATES: [(IdPredictor, bool, f64); 8] = [
    (IdPredictor::Raw, false, 1.0),
    (IdPredictor::Delta, false, 1.0),
    (IdPredictor::Lorenzo, false, 1.0),
    (IdPredictor::Interpolation, false, 1.0),
    (IdPredictor::Delta, true, 0.5),
    (IdPredictor::Lorenzo, true, 0.5),
    (IdPredictor::Interpolation, true, 0.5),
    (IdPredictor::Interpolation, true, 0.25),
];

/// zstd level of the trial runs of [`Options::search`].
pub(crate) const SEARCH_LEVEL: i32 = 3;

impl Options {
    /// SQE with Lorenzo prediction, the ball rule and [`DEFAULT_LEVEL`]; for
    /// [`Method::Predict`], interpolation with the predictor chosen on a sample
    /// ([`search`](Self::search) on).
    pub fn new(epsilon: f64, method: Method) -> Options {
        let predict = method == Method::Predict;
        Options {
            epsilon,
            method,
            encoding: Encoding::Sqe,
            predictor: if predict {
                IdPredictor::Interpolation
            } else {
                IdPredictor::Lorenzo
            },
            set_rule: SetRule::Ball,
            level: DEFAULT_LEVEL,
            relaxed: false,
            set_radius: 1.0,
            lattice: true,
            search: predict,
        }
    }
}

/// Values to compress.
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    /// `f32` values.
    F32(&'a [f32]),
    /// `f64` values.
    F64(&'a [f64]),
}

impl Values<'_> {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            Values::F32(_) => Dtype::F32,
            Values::F64(_) => Dtype::F64,
        }
    }

    /// Smallest and largest value, ignoring NaN; `None` if there is none.
    pub fn min_max(&self) -> Option<(f64, f64)> {
        fn mm<T: Sample>(v: &[T]) -> Option<(f64, f64)> {
            let mut it = v.iter().map(|x| x.to_f64()).filter(|x| !x.is_nan());
            let first = it.next()?;
            Some(it.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x))))
        }
        match self {
            Values::F32(v) => mm(v),
            Values::F64(v) => mm(v),
        }
    }
}

/// Decompressed values, in the type they were compressed from.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// `f32` values.
    F32(Vec<f32>),
    /// `f64` values.
    F64(Vec<f64>),
}

impl Decoded {
    /// Borrows the values.
    pub fn as_values(&self) -> Values<'_> {
        match self {
            Decoded::F32(v) => Values::F32(v),
            Decoded::F64(v) => Values::F64(v),
        }
    }

    /// The values as little-endian bytes (the raw file format).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            Decoded::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Decoded::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }
}

/// The grid a file was compressed on, as its header records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderGrid {
    /// Extents, fastest axis first.
    Structured(Vec<usize>),
    /// An unstructured grid: its edge count and [`PointGraph::fingerprint`](super::grid::PointGraph::fingerprint).
    Unstructured {
        /// Undirected edges of the graph.
        edges: u64,
        /// Fingerprint of the graph.
        fingerprint: u64,
    },
}

/// What a compressed file says about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// Element type of the values.
    pub dtype: Dtype,
    /// Decomposition.
    pub method: Method,
    /// Set id storage (`None` for the region methods).
    pub encoding: Option<Encoding>,
    /// Prediction of SQE ids (as applied).
    pub predictor: IdPredictor,
    /// Set rule (decompositions; `Ball` for [`Method::Predict`], which has no sets).
    pub set_rule: SetRule,
    /// The error bound.
    pub epsilon: f64,
    /// Number of points.
    pub points: u64,
    /// The grid.
    pub grid: HeaderGrid,
    /// Number of sets (set methods), regions (region methods) or blocks ([`Method::Predict`]).
    pub sets: u64,
    /// Number of stored values (0 for [`Method::Predict`]).
    pub values: u64,
}

/// Sizes of one stored stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionSize {
    /// What the stream holds.
    pub name: &'static str,
    /// Bytes before zstd.
    pub raw: usize,
    /// Bytes after zstd.
    pub stored: usize,
}

/// A compressed file and facts about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Compressed {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// Size of the uncompressed values in bytes.
    pub original_bytes: usize,
    /// Sets (set methods), regions (region methods) or blocks ([`Method::Predict`]).
    pub sets: usize,
    /// Distinct stored values; for [`Method::Predict`], the values stored verbatim.
    pub values: usize,
    /// Boundary points stored (region methods).
    pub boundary_points: usize,
    /// Seeds stored (region methods).
    pub seeds: usize,
    /// Size of every stream.
    pub sections: Vec<SectionSize>,
    /// The id predictor used (the one [`Options::search`] chose, if it searched).
    pub predictor: IdPredictor,
    /// Whether the relaxed assignment was used.
    pub relaxed: bool,
    /// The set radius used.
    pub set_radius: f64,
}

impl Compressed {
    /// Compressed size / original size.
    pub fn ratio(&self) -> f64 {
        self.bytes.len() as f64 / self.original_bytes.max(1) as f64
    }
}
