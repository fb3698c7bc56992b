#!/usr/bin/env python3
"""Checks spillway's SGD factors against a sequential run of the same schedule.

Usage: sgd_ref.py TRAIN P FACTORS LR REG ITERATIONS SEED U_OUT V_OUT

TRAIN is a Matrix Market coordinate file "user item rating" (1-based, general). The reference
follows the schedule documented in spillway's sgd module, written here from that description:
q = sqrt(P); users and items cut into q ranges (n * b // q); an iteration is q steps, step s
updates the blocks (bi, (bi + s) % q); inside a block the ratings are put in canonical order
(user, item, position in the file) and shuffled once by Fisher-Yates with a splitmix64 stream
(iteration 2^64 - 1); every iteration visits the shuffled block's pieces of 1024 ratings in an
order shuffled the same way, each piece in order; dot products in four lanes (f mod 4) added as
(s0 + s2) + (s1 + s3); initial factors from splitmix64 hashes. Plain Python floats (IEEE doubles, no fused operations), so
the factors must equal spillway's `--out-u` / `--out-v` bit for bit.
Exit 1: mismatch; 2: unreadable input.
"""

import math
import sys

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def fail(msg, code=1):
    print(f"sgd_ref.py: {msg}", file=sys.stderr)
    sys.exit(code)


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fin(x):
    return mix64((x + GOLDEN) & MASK)


def initial_factor(seed, which, index, f, factors):
    h = fin(fin(fin(seed ^ ((which * GOLDEN) & MASK)) ^ index) ^ f)
    return float(h >> 11) * (1.0 / float(1 << 53)) * (1.0 / math.sqrt(factors))


PIECE = 1024
SHUFFLE = MASK


def shuffled(items, seed, iteration, block):
    state = fin(fin(fin(seed) ^ iteration) ^ block)
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        state = (state + GOLDEN) & MASK
        j = mix64(state) % (i + 1)
        items[i], items[j] = items[j], items[i]
    return items


def update_order(seed, iteration, block, n):
    """The ratings of a block of n (already shuffled once) in the order of one iteration."""
    pieces = (n + PIECE - 1) // PIECE
    out = []
    for p in shuffled(range(pieces), seed, iteration, block):
        out.extend(range(p * PIECE, min(n, (p + 1) * PIECE)))
    return out


def read_mtx(path):
    try:
        with open(path) as f:
            lines = [l for l in f.read().splitlines() if l.strip() and not l.startswith("%")]
    except OSError as e:
        fail(f"{path}: {e}", 2)
    users, items, _ = (int(x) for x in lines[0].split())
    ratings = []
    for seq, l in enumerate(lines[1:]):
        u, i, r = l.split()
        ratings.append((int(u) - 1, int(i) - 1, seq, float(r)))
    return users, items, ratings


def block_of(n, q, x):
    b = 0
    while b + 1 < q and n * (b + 1) // q <= x:
        b += 1
    return b


def main():
    if len(sys.argv) != 10:
        fail("usage: sgd_ref.py TRAIN P FACTORS LR REG ITERATIONS SEED U_OUT V_OUT", 2)
    path = sys.argv[1]
    p, k = int(sys.argv[2]), int(sys.argv[3])
    lr, reg = float(sys.argv[4]), float(sys.argv[5])
    iterations, seed = int(sys.argv[6]), int(sys.argv[7])
    q = math.isqrt(p)
    users, items, ratings = read_mtx(path)
    U = [[initial_factor(seed, 1, u, f, k) for f in range(k)] for u in range(users)]
    V = [[initial_factor(seed, 2, i, f, k) for f in range(k)] for i in range(items)]
    blocks = {}
    for u, i, s, r in ratings:
        blocks.setdefault((block_of(users, q, u), block_of(items, q, i)), []).append((u, i, s, r))
    for (bi, bj), b in blocks.items():
        b.sort()
        blocks[(bi, bj)] = shuffled(b, seed, SHUFFLE, bi * q + bj)
    for it in range(iterations):
        for step in range(q):
            for bi in range(q):
                bj = (bi + step) % q
                block = blocks.get((bi, bj), [])
                for o in update_order(seed, it, bi * q + bj, len(block)):
                    u, i, _, r = block[o]
                    uu, vv = U[u], V[i]
                    s = [0.0, 0.0, 0.0, 0.0]
                    for f in range(k):
                        s[f % 4] += uu[f] * vv[f]
                    e = r - ((s[0] + s[2]) + (s[1] + s[3]))
                    for f in range(k):
                        uf, vf = uu[f], vv[f]
                        uu[f] = uf + lr * (e * vf - reg * uf)
                        vv[f] = vf + lr * (e * uf - reg * vf)
    for name, want, out in (("U", U, sys.argv[8]), ("V", V, sys.argv[9])):
        try:
            with open(out) as f:
                got = [[float(x) for x in l.split(",")] for l in f.read().splitlines()]
        except (OSError, ValueError) as e:
            fail(f"{out}: {e}", 2)
        if len(got) != len(want):
            fail(f"{name} has {len(got)} rows, expected {len(want)}")
        diff = [(r, f) for r in range(len(want)) for f in range(k) if got[r][f] != want[r][f]]
        if diff:
            r, f = diff[0]
            fail(
                f"{name}: {len(diff)} values differ, first [{r}][{f}]: "
                f"{got[r][f]!r} vs {want[r][f]!r}"
            )
    sse = sum((r - sum(a * b for a, b in zip(U[u], V[i]))) ** 2 for u, i, _, r in ratings)
    print(
        f"{users} users, {items} items, {len(ratings)} ratings, p = {p}: U and V identical "
        f"bit for bit; training RMSE {math.sqrt(sse / max(1, len(ratings))):.6f}"
    )


if __name__ == "__main__":
    main()
