"""Compares a `spillway run fft --out` file with numpy.fft.fft of the input.

Usage: fft_ref.py INPUT OUTPUT [TOLERANCE]

INPUT and OUTPUT hold one complex value "re im" per line. Accepts when the relative error
||X - numpy.fft.fft(x)|| / ||numpy.fft.fft(x)|| and the largest element-wise error relative to
the largest magnitude are both at most TOLERANCE (default 1e-9). Exit 0: accepted, 1: rejected,
3: numpy missing.
"""
import sys

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"missing module: {e}", file=sys.stderr)
    sys.exit(3)


def load(path):
    a = np.loadtxt(path, dtype=np.float64, ndmin=2)
    return a[:, 0] + 1j * a[:, 1]


def main():
    x = load(sys.argv[1])
    got = load(sys.argv[2])
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-9
    want = np.fft.fft(x)
    if got.shape != want.shape:
        print(f"length {got.shape[0]}, numpy has {want.shape[0]}")
        sys.exit(1)
    norm = np.linalg.norm(got - want) / np.linalg.norm(want)
    worst = np.max(np.abs(got - want)) / np.max(np.abs(want))
    print(f"n={x.shape[0]} relative error {norm:.3e}, worst element {worst:.3e}")
    sys.exit(0 if norm <= tol and worst <= tol else 1)


main()
