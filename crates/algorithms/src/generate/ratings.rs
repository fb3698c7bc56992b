//! Ratings of a low-rank model, for SGD matrix factorisation.

use rand_xoshiro::Xoshiro256PlusPlus;

use super::{below, item_rng, parse_field, spec_fields, unit_f64};

const DOMAIN_RATINGS_USER: u64 = 0x5241_5449_4E47_5553; // "RATINGUS"
const DOMAIN_RATINGS_ITEM: u64 = 0x5241_5449_4E47_4954; // "RATINGIT"

/// Hidden factors of the ratings model.
pub const RATINGS_RANK: usize = 4;

/// Ratings of `users` users on `items` items from a model of rank [`RATINGS_RANK`]: user `u`
/// and item `i` have hidden factors `a_u`, `b_i` uniform in `[-1, 1)^4` (drawn from the
/// seed and their index), and a rating is `3 + a_u . b_i + e` with `e` uniform in
/// `[-0.25, 0.25)`.
///
/// User `u` rates `n_u` items, `n_u` uniform in `[avg / 2, avg * 3 / 2]` (`avg =
/// ratings / users`), each item uniform (a user may rate an item twice: both count). User
/// `u`'s ratings depend on `u` only, so the ratings of any range of users can be made
/// without the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RatingsSpec {
    /// Users (rows, >= 1 when parsed, below 2^32).
    pub users: u64,
    /// Items (columns, >= 1 when parsed, below 2^32).
    pub items: u64,
    /// Average ratings a user (>= 1, below 2^20, when parsed).
    pub avg: u64,
    /// Seed of all random choices.
    pub seed: u64,
}

impl RatingsSpec {
    /// Parses `ratings:USERS:ITEMS:AVG[:SEED]` (seed defaults to 1).
    pub fn parse(s: &str) -> Result<Self, String> {
        const USAGE: &str = "ratings:USERS:ITEMS:AVG[:SEED]";
        let fields = spec_fields(s, "ratings", USAGE)?;
        let (users, items, avg, seed) = match fields.as_slice() {
            [u, i, a] => (*u, *i, *a, None),
            [u, i, a, seed] => (*u, *i, *a, Some(*seed)),
            _ => return Err(format!("expected {USAGE}")),
        };
        let limit = u64::from(u32::MAX);
        let users: u64 = parse_field(users, "number of users")?;
        if !(1..=limit).contains(&users) {
            return Err(format!("number of users must be 1..={limit}, got {users}"));
        }
        let items: u64 = parse_field(items, "number of items")?;
        if !(1..=limit).contains(&items) {
            return Err(format!("number of items must be 1..={limit}, got {items}"));
        }
        let avg: u64 = parse_field(avg, "average ratings a user")?;
        if !(1..1 << 20).contains(&avg) {
            return Err(format!(
                "average ratings a user must be 1..={}, got {avg}",
                (1 << 20) - 1
            ));
        }
        let seed = match seed {
            Some(seed) => parse_field(seed, "seed")?,
            None => 1,
        };
        Ok(RatingsSpec {
            users,
            items,
            avg,
            seed,
        })
    }

    /// The ratings of user `u`: `n_u`, the first draw of its stream.
    pub fn user_len(&self, u: u64) -> u64 {
        self.draw_len(&mut item_rng(self.seed, DOMAIN_RATINGS_USER, u))
    }

    fn draw_len(&self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        self.avg / 2 + below(rng, self.avg + 1)
    }

    /// The hidden factors of item `i`.
    pub fn item_factors(&self, i: u64) -> [f64; RATINGS_RANK] {
        let mut rng = item_rng(self.seed, DOMAIN_RATINGS_ITEM, i);
        std::array::from_fn(|_| 2.0 * unit_f64(&mut rng) - 1.0)
    }

    /// Calls `each(item, j, rating)` for the `j`-th rating of user `u` when `keep(item)`, in
    /// order of `j`; `item_factors` gives the hidden factors of a kept item (a cache of
    /// [`Self::item_factors`]).
    pub fn user_ratings(
        &self,
        u: u64,
        keep: &dyn Fn(u64) -> bool,
        item_factors: &dyn Fn(u64) -> [f64; RATINGS_RANK],
        each: &mut dyn FnMut(u64, u64, f64),
    ) {
        let mut rng = item_rng(self.seed, DOMAIN_RATINGS_USER, u);
        let len = self.draw_len(&mut rng);
        let a: [f64; RATINGS_RANK] = std::array::from_fn(|_| 2.0 * unit_f64(&mut rng) - 1.0);
        for j in 0..len {
            let item = below(&mut rng, self.items);
            let noise = 0.5 * unit_f64(&mut rng) - 0.25;
            if keep(item) {
                let b = item_factors(item);
                let dot: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
                each(item, j, 3.0 + dot + noise);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratings_parse() {
        assert_eq!(
            RatingsSpec::parse("ratings:100:50:7:3"),
            Ok(RatingsSpec {
                users: 100,
                items: 50,
                avg: 7,
                seed: 3
            })
        );
        for bad in [
            "ratings:0:50:7",
            "ratings:100:0:7",
            "ratings:100:50:0",
            "ratings:100:50:1048576",
            "ratings:4294967296:50:7",
            "ratings:100:50",
            "zipf:100:50:7",
        ] {
            assert!(RatingsSpec::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn ratings_follow_the_rank_4_model() {
        let spec = RatingsSpec::parse("ratings:3000:400:20:5").expect("parse");
        let (mut count, mut per_item) = (0u64, vec![0u64; 400]);
        let mut residuals = Vec::new();
        for u in 0..spec.users {
            let mut seen = 0;
            let mut user = Vec::new();
            spec.user_ratings(u, &|_| true, &|i| spec.item_factors(i), &mut |i, j, r| {
                assert_eq!(j, seen);
                seen += 1;
                user.push((i, r));
            });
            assert_eq!(seen, spec.user_len(u));
            assert!((10..=30).contains(&seen), "user {u}: {seen} ratings");
            // Keeping some items gives the same ratings of those items.
            let mut odd = Vec::new();
            spec.user_ratings(
                u,
                &|i| i % 2 == 1,
                &|i| spec.item_factors(i),
                &mut |i, _, r| odd.push((i, r)),
            );
            let expected: Vec<_> = user.iter().copied().filter(|(i, _)| i % 2 == 1).collect();
            assert_eq!(odd, expected);
            for &(i, r) in &user {
                per_item[i as usize] += 1;
                residuals.push(r);
            }
            count += seen;
        }
        let mean = count as f64 / spec.users as f64;
        assert!((mean - 20.0).abs() < 0.5, "{mean} ratings a user");
        // Items are uniform: every item has close to its share of 150 ratings.
        assert!(
            per_item.iter().all(|&c| (90..=220).contains(&c)),
            "{per_item:?}"
        );
        // Ratings are 3 plus a dot product of 4 factors in [-1, 1) plus noise: within
        // [-1.25, 7.25], centred on 3.
        assert!(residuals.iter().all(|r| (-1.25..7.25).contains(r)));
        let centre = residuals.iter().sum::<f64>() / residuals.len() as f64;
        assert!((centre - 3.0).abs() < 0.05, "mean rating {centre}");
    }
}
