//! Reading or generating the ratings and giving every rank its block of the grid.

use std::path::Path;

use spillway_comm::{Collectives, Comm, Sum};
use spillway_runtime::SbVec;

use super::super::block::BlockRatings;
use crate::error::AlgoError;
use crate::generate::{RatingsSpec, RATINGS_RANK};
use crate::io::InputError;
use crate::io::{distribute_entries, entry_col, entry_row, read_entries, Entry, SparseSource};
use crate::state::{check_state, Origin};

/// A rating with the matrix's ids: `user << 32 | item` and the rating's bits, 16 bytes: the
/// form between reading (once the canonical order is set, the position that fixed it is
/// dropped) and [`BlockRatings`], which keeps 12 bytes a rating where the block allows.
pub type Rating = [u64; 2];

/// Packs a rating.
pub fn rating(user: u32, item: u32, value: f64) -> Rating {
    [(u64::from(user) << 32) | u64::from(item), value.to_bits()]
}

/// Sorts `entries` into canonical order and keeps them as [`Rating`]s.
fn canonical(comm: &Comm, mut entries: SbVec<Entry>) -> Result<SbVec<Rating>, AlgoError> {
    entries
        .as_mut_slice()
        .sort_unstable_by_key(|e| (e[0], e[2]));
    let mut out = SbVec::with_capacity(comm.runtime(), entries.len())?;
    let mut chunk: Vec<Rating> = Vec::with_capacity(CHUNK);
    for at in (0..entries.len()).step_by(CHUNK) {
        let part = &entries.as_slice()[at..(at + CHUNK).min(entries.len())];
        chunk.clear();
        chunk.extend(part.iter().map(|e| [e[0], e[1]]));
        out.extend_from_slice(&chunk)?;
    }
    Ok(out)
}

/// Ratings moved into storage-backed memory at a time.
const CHUNK: usize = 1 << 14;

/// `q` with `q * q = p`, or an error.
///
/// # Errors
/// `p` not a perfect square.
pub fn grid_side(p: usize) -> Result<usize, AlgoError> {
    let q = (p as f64).sqrt().round() as usize;
    if q * q != p {
        return Err(AlgoError::BadParameter {
            name: "ranks",
            reason: format!("SGD needs a square number of ranks (1, 4, 9, ...), found {p}"),
        });
    }
    Ok(q)
}

/// Range of block `b` of `n` rows cut into `q` blocks.
pub fn block_range(n: u64, q: usize, b: usize) -> (u64, u64) {
    (n * b as u64 / q as u64, n * (b as u64 + 1) / q as u64)
}

/// This rank's block of the ratings.
#[derive(Debug)]
pub struct RatingBlock {
    /// Users (rows of `R`).
    pub users: u64,
    /// Items (columns of `R`).
    pub items: u64,
    /// Grid side `q`.
    pub q: usize,
    /// Block row.
    pub bi: usize,
    /// Block column.
    pub bj: usize,
    /// Training ratings of the block, in canonical order (user, item, position in the file).
    pub train: BlockRatings,
    /// Training ratings of the whole matrix.
    pub train_total: u64,
    /// Held-out ratings of the block.
    pub test: BlockRatings,
    /// Held-out ratings of the whole matrix.
    pub test_total: u64,
}

/// Reads the training ratings (and optionally held-out ones) as Matrix Market coordinate files
/// `user item rating` and gives every rank its block.
///
/// # Errors
/// Malformed files as [`read_entries`]; a number of ranks that is not a square; a test file
/// larger than the training matrix.
pub fn load_ratings(
    comm: &Comm,
    train: &Path,
    test: Option<&Path>,
) -> Result<RatingBlock, AlgoError> {
    let q = grid_side(comm.size())?;
    let read = read_entries(comm, &SparseSource::MatrixMarket(train.to_path_buf()))?;
    let (users, items) = (read.rows, read.cols);
    let owner = |e: &Entry| {
        block_owner(
            users,
            items,
            q,
            u64::from(entry_row(e)),
            u64::from(entry_col(e)),
        )
    };
    let mine = distribute_entries(comm, &read.entries, &owner)?;
    drop(read.entries);
    let mine = canonical(comm, mine)?;
    let (test, test_total) = match test {
        Some(path) => {
            let t = read_entries(comm, &SparseSource::MatrixMarket(path.to_path_buf()))?;
            if t.rows > users || t.cols > items {
                return Err(InputError::new(
                    path,
                    None,
                    format!(
                        "the test matrix is {} x {}, larger than the training matrix ({users} x \
                         {items})",
                        t.rows, t.cols
                    ),
                )
                .into());
            }
            let got = distribute_entries(comm, &t.entries, &owner)?;
            (canonical(comm, got)?, t.total)
        }
        None => (SbVec::with_capacity(comm.runtime(), 0)?, 0),
    };
    RatingBlock::pack(comm, (users, items), (mine, read.total), (test, test_total))
}

impl RatingBlock {
    /// This rank's block of a `users` x `items` matrix whose ratings are held in memory:
    /// `train` holds the ratings of the block (those [`block_owner`] gives to this rank), each
    /// packed as [`entry`]`(user, item, rating, position)` with its position in the whole
    /// input (standing for its position in a file), in any order; `train_total` counts the
    /// ratings of the whole matrix. The ratings are put in canonical order, as
    /// [`load_ratings`] puts them; there are no held-out ratings.
    ///
    /// # Errors
    /// A number of ranks that is not a square; a rating outside this rank's block.
    pub fn from_entries(
        comm: &Comm,
        users: u64,
        items: u64,
        train: SbVec<Entry>,
        train_total: u64,
    ) -> Result<RatingBlock, AlgoError> {
        let q = grid_side(comm.size())?;
        let r = comm.rank();
        let foreign = train.as_slice().iter().find(|e| {
            let (u, i) = (u64::from(entry_row(e)), u64::from(entry_col(e)));
            u >= users || i >= items || block_owner(users, items, q, u, i) != r
        });
        if let Some(e) = foreign {
            return Err(AlgoError::BadParameter {
                name: "ratings",
                reason: format!(
                    "rank {r} was given the rating ({}, {}), not of its block of the {users} x \
                     {items} matrix",
                    entry_row(e),
                    entry_col(e)
                ),
            });
        }
        let train = canonical(comm, train)?;
        let none = SbVec::with_capacity(comm.runtime(), 0)?;
        RatingBlock::pack(comm, (users, items), (train, train_total), (none, 0))
    }

    /// This rank's block of a `users` x `items` matrix from its ratings in canonical order,
    /// kept as [`BlockRatings`], with the counts of the whole matrix.
    fn pack(
        comm: &Comm,
        (users, items): (u64, u64),
        (train, train_total): (SbVec<Rating>, u64),
        (test, test_total): (SbVec<Rating>, u64),
    ) -> Result<RatingBlock, AlgoError> {
        let q = grid_side(comm.size())?;
        let (bi, bj) = (comm.rank() / q, comm.rank() % q);
        let (u, v) = (block_range(users, q, bi), block_range(items, q, bj));
        Ok(RatingBlock {
            users,
            items,
            q,
            bi,
            bj,
            train: BlockRatings::pack(comm, train, u, v)?,
            train_total,
            test: if test.is_empty() {
                BlockRatings::empty(comm)?
            } else {
                BlockRatings::pack(comm, test, u, v)?
            },
            test_total,
        })
    }
}

/// The rank that holds rating `(user, item)` of a `users` x `items` matrix on a `q` x `q`
/// grid: `bi * q + bj`, with `bi` the block of `user` and `bj` that of `item` (as
/// [`block_range`] cuts them).
pub fn block_owner(users: u64, items: u64, q: usize, user: u64, item: u64) -> usize {
    block_of(users, q, user) * q + block_of(items, q, item)
}

/// Generates the ratings of a [`RatingsSpec`] and gives every rank its block: rank `(bi, bj)`
/// makes the ratings of block row `bi`'s users and keeps those of block column `bj`'s items
/// (each rating is made on `q` ranks, kept on one: no rating moves). A rating's position in
/// the input is its user's, then `j` for the user's `j`-th rating, as `gen ratings` writes them.
///
/// # Errors
/// A number of ranks that is not a square; blocks larger than the job can hold (checked on
/// every rank before any work); storage or communication errors.
pub fn generate_ratings(comm: &Comm, spec: &RatingsSpec) -> Result<RatingBlock, AlgoError> {
    let q = grid_side(comm.size())?;
    let (bi, bj) = (comm.rank() / q, comm.rank() % q);
    let (u_lo, u_hi) = block_range(spec.users, q, bi);
    let (v_lo, v_hi) = block_range(spec.items, q, bj);
    let share = (v_hi - v_lo) as f64 / spec.items as f64;
    let expected = (u_lo..u_hi).map(|u| spec.user_len(u)).sum::<u64>() as f64 * share;
    // The binomial count of this block's ratings, six standard deviations up.
    let capacity = (expected + 6.0 * expected.sqrt() + 16.0) as u64;
    check_state(
        comm,
        (spec.users.saturating_mul(spec.avg) / q as u64 + 1)
            .saturating_mul(24)
            .saturating_add((v_hi - v_lo).saturating_mul(32)),
        &format!(
            "{} ratings a block",
            spec.users.saturating_mul(spec.avg) / (q * q) as u64
        ),
        Origin::Parameter {
            name: "generate",
            what: "the ratings",
        },
    )?;
    let factors: Vec<[f64; RATINGS_RANK]> = (v_lo..v_hi).map(|i| spec.item_factors(i)).collect();
    let mut train: SbVec<Rating> = SbVec::with_capacity(comm.runtime(), capacity as usize)?;
    let mut chunk: Vec<Rating> = Vec::with_capacity(CHUNK);
    let keep = |i: u64| (v_lo..v_hi).contains(&i);
    let item_factors = |i: u64| factors[(i - v_lo) as usize];
    for u in u_lo..u_hi {
        let first = chunk.len();
        spec.user_ratings(u, &keep, &item_factors, &mut |i, _, r| {
            chunk.push(rating(u as u32, i as u32, r));
        });
        // Users come in order; inside one, a stable sort by item keeps a repeated item's
        // ratings in order of j: the canonical order without a sort of the block.
        chunk[first..].sort_by_key(|r| r[0]);
        if chunk.len() >= CHUNK || u + 1 == u_hi {
            train.extend_from_slice(&chunk)?;
            chunk.clear();
        }
    }
    drop(factors);
    let train_total = comm.allreduce(&[train.len() as u64], Sum)?[0];
    let none = SbVec::with_capacity(comm.runtime(), 0)?;
    RatingBlock::pack(
        comm,
        (spec.users, spec.items),
        (train, train_total),
        (none, 0),
    )
}

/// The block of `x` among `n` rows cut into `q` blocks (as [`block_range`]).
pub fn block_of(n: u64, q: usize, x: u64) -> usize {
    // The largest b with n * b / q <= x.
    let mut b = ((x * q as u64) / n.max(1)) as usize;
    while b + 1 < q && block_range(n, q, b + 1).0 <= x {
        b += 1;
    }
    while b > 0 && block_range(n, q, b).0 > x {
        b -= 1;
    }
    b
}
