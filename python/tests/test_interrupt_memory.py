"""Ctrl-C during a long call, and the memory budget of an out-of-core PageRank, each in a
fresh interpreter."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import spillway
from conftest import rmat_edges

# The child installs Python's own SIGINT handler: a test run started in the background of a
# non-interactive shell inherits SIGINT ignored, and Python then never raises
# KeyboardInterrupt (as it should not, for a process that ignores the signal).
LONG_CALL = r"""
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
import sys, time, numpy as np, spillway
src = np.load(sys.argv[1]); dst = np.load(sys.argv[2])
cfg = spillway.Config(ranks=4, mem_budget="4M", spill_dir=sys.argv[3])
print("started", flush=True)
t = None
try:
    spillway.{call}
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(0)
print("finished", flush=True)
sys.exit(3)
"""


@pytest.mark.parametrize("call", [
    "pagerank((src, dst), tol=0, max_iter=10**6, config=cfg)",
    # Uniform points: Lloyd's iterations go on for hundreds of passes.
    "KMeans(128, init='random', max_iter=10**6, config=cfg).fit(np.random.default_rng(0).random((2000000, 4)))",
])
def test_ctrl_c_raises_keyboard_interrupt_within_a_second(tmp_path, call):
    src, dst, n = rmat_edges(16, 8)
    np.save(tmp_path / "src.npy", src)
    np.save(tmp_path / "dst.npy", dst)
    spill = tmp_path / "spill"
    spill.mkdir()
    code = LONG_CALL.replace("{call}", call)
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "src.npy"), str(tmp_path / "dst.npy"), str(spill)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "started"
        time.sleep(1.5)  # well inside the call (it runs for minutes)
        assert p.poll() is None, p.stderr.read()
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
    print(f"SIGINT to exit: {took:.3f} s")
    assert "interrupted" in out, (out, err)
    assert p.returncode == 0, err
    # The interpreter's exit included: the KeyboardInterrupt itself comes sooner.
    assert took < 1.0, f"{took:.2f} s from SIGINT to exit"
    assert list(spill.iterdir()) == [], "spill files left behind"


MEMORY = r"""
import json, sys, spillway
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
base = hwm()
cfg = spillway.Config(ranks=8, mem_budget=sys.argv[2], spill_dir=sys.argv[3])
r = spillway.pagerank(sys.argv[1], tol=0, max_iter=3, config=cfg)
print(json.dumps({"base": base, "peak": hwm(), "n": len(r), "sum": float(r.sum()), "stats": spillway.run_stats()}))
"""


def test_out_of_core_pagerank_stays_within_the_budget(tmp_path):
    """An edge list 8x larger than mem_budget: the peak RSS grows by at most the budget +
    64 MiB over the interpreter's own (numpy and spillway imported)."""
    budget = 3 << 20
    rng = np.random.default_rng(7)
    m = 2_400_000
    n = m // 16
    path = tmp_path / "edges.txt"
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    with open(path, "w") as f:
        for k in range(0, m, 400_000):
            f.write("\n".join(f"{a} {b}" for a, b in zip(src[k:k + 400_000].tolist(), dst[k:k + 400_000].tolist())))
            f.write("\n")
    size = os.path.getsize(path)
    assert size >= 8 * budget
    spill = tmp_path / "spill"
    spill.mkdir()
    p = subprocess.run(
        [sys.executable, "-c", MEMORY, str(path), str(budget), str(spill)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    extra = got["peak"] - got["base"]
    print(f"file {size / 2**20:.1f} MiB, budget {budget / 2**20:.0f} MiB, interpreter {got['base'] / 2**20:.1f} MiB, "
          f"peak {got['peak'] / 2**20:.1f} MiB, growth {extra / 2**20:.1f} MiB")
    assert extra <= budget + (64 << 20), f"peak RSS grew by {extra / 2**20:.1f} MiB over the interpreter's"
    assert abs(got["sum"] - 1) < 1e-9
    assert got["stats"]["bytes_spilled"] > 0
    assert list(spill.iterdir()) == []


def test_gil_is_released():
    """Another Python thread runs while a call computes."""
    import threading

    src, dst, n = rmat_edges(14, 8)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    t = threading.Thread(target=tick)
    t.start()
    start = time.monotonic()
    spillway.pagerank((src, dst), n=n, tol=0, max_iter=300, config=spillway.Config(ranks=2))
    end = time.monotonic()
    stop.set()
    t.join()
    during = [x for x in ticks if start < x < end]
    assert end - start < 0.05 or len(during) >= (end - start) / 0.005 / 4
