"""Times scipy.fft.fft with 2 workers on a raw complex128 file (the input of
`spillway-bench bsp --what fft --python PY`); prints one time in seconds per repetition.

Usage: bench_fft_scipy.py INPUT REPS
"""
import sys
import time

import numpy as np
import scipy.fft

x = np.fromfile(sys.argv[1], dtype=np.complex128)
reps = int(sys.argv[2])
scipy.fft.fft(x, workers=2)  # warm-up (plans and page faults)
for _ in range(reps):
    t = time.perf_counter()
    scipy.fft.fft(x, workers=2)
    print(time.perf_counter() - t)
