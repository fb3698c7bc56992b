//! Choosing the algorithm between nodes from the link model (alpha-beta).
//!
//! With `l` node leaders, `n` bytes, start-up `alpha` and `beta` seconds per byte:
//!
//! * binomial-tree broadcast: `ceil(log2 l) (alpha + n beta)`;
//! * pipelined chain in node order with `k` chunks (Twister, section 4):
//!   `(l - 1 + k - 1) (alpha + n beta / k)`, smallest at `k = sqrt((l - 2) n beta / alpha)`;
//! * tree allreduce (reduce to the first leader, then broadcast):
//!   `2 ceil(log2 l) (alpha + n beta)`;
//! * ring reduce-scatter + allgather: `2 (l - 1) (alpha + n beta / l)`.
//!
//! Without a model (the local backend, whose virtual nodes pass pointers) the trees are used.

use spillway_transport::LinkModel;

/// Chunks are at least this long: shorter ones cost more in per-message overhead of the
/// runtime than the model's alpha accounts for.
const MIN_CHUNK: usize = 64 << 10;

fn log2_ceil(l: usize) -> f64 {
    (usize::BITS - (l.max(1) - 1).leading_zeros()) as f64
}

/// The chunk size of a pipelined chain broadcast of `n` bytes over `l` leaders, when the
/// chain is predicted to beat the binomial tree; a multiple of 16 bytes.
pub(crate) fn chain_chunk(model: Option<LinkModel>, l: usize, n: usize) -> Option<usize> {
    let m = model?;
    if l < 3 || n < 2 * MIN_CHUNK {
        return None;
    }
    let nf = n as f64;
    let k_best = ((l - 2) as f64 * nf * m.beta / m.alpha).sqrt();
    let k = k_best.round().clamp(1.0, (n / MIN_CHUNK) as f64) as usize;
    if k < 2 {
        return None;
    }
    let chunk = n.div_ceil(k).next_multiple_of(16);
    let k = n.div_ceil(chunk);
    let chain = (l - 1 + k - 1) as f64 * m.time(chunk as f64);
    let tree = log2_ceil(l) * m.time(nf);
    (chain < tree).then_some(chunk)
}

/// Whether an allreduce of `n` bytes over `l` leaders should use ring reduce-scatter +
/// allgather rather than the tree.
pub(crate) fn ring_allreduce(model: Option<LinkModel>, l: usize, n: usize) -> bool {
    let Some(m) = model else {
        return false;
    };
    if l < 2 || n < l * 16 {
        return false;
    }
    let ring = 2.0 * (l - 1) as f64 * m.time(n as f64 / l as f64);
    let tree = 2.0 * log2_ceil(l) * m.time(n as f64);
    ring < tree
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST_START: LinkModel = LinkModel {
        alpha: 2e-6,
        beta: 1e-10,
    };

    #[test]
    fn no_model_means_trees() {
        assert_eq!(chain_chunk(None, 8, 1 << 30), None);
        assert!(!ring_allreduce(None, 8, 1 << 30));
    }

    #[test]
    fn chain_for_large_broadcasts_over_three_or_more_nodes() {
        assert_eq!(chain_chunk(Some(FAST_START), 2, 1 << 28), None);
        assert_eq!(chain_chunk(Some(FAST_START), 8, 1 << 10), None);
        let chunk = chain_chunk(Some(FAST_START), 8, 1 << 28).expect("chain");
        assert_eq!(chunk % 16, 0);
        // k = sqrt(6 * 2^28 * 1e-10 / 2e-6) ~ 283 chunks of ~0.9 MiB
        let k = (1usize << 28).div_ceil(chunk);
        assert!((250..=320).contains(&k), "{k} chunks");
    }

    #[test]
    fn ring_allreduce_only_when_bandwidth_dominates() {
        assert!(!ring_allreduce(Some(FAST_START), 4, 64));
        assert!(ring_allreduce(Some(FAST_START), 2, 1 << 24));
        assert!(ring_allreduce(Some(FAST_START), 5, 1 << 24));
    }

    #[test]
    fn ceil_log2() {
        assert_eq!(log2_ceil(1), 0.0);
        assert_eq!(log2_ceil(2), 1.0);
        assert_eq!(log2_ceil(3), 2.0);
        assert_eq!(log2_ceil(8), 3.0);
        assert_eq!(log2_ceil(9), 4.0);
    }
}
