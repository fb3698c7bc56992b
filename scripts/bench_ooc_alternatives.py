#!/usr/bin/env python3
"""PageRank out of core: spillway against what a user would do instead, on the same graph, in
the same memory cgroup, with the caches dropped before every run (issue 46).

For every R-MAT scale (edge factor 16, seed 1: the graph of `spillway run pagerank --generate
rmat:S:16`), with data / budget = 4 bytes an edge / --budget (at the default 256 MiB, scales
20..24 are 0.25x..4x; --ratios 1,2,4,8,16 picks scales 22..26 instead, or keep the scales with
--budget 64M; serial-ooc keeps 20 bytes a vertex in memory, more than a 384 MiB cgroup from
scale 25 on), it runs:

  spillway, out of core   `spillway run pagerank --generate rmat:S:16 --ranks 32 --mem-budget B`
  serial-ooc              `spillway-bench serial-ooc pagerank`: the hand-written serial program
                          (vertex arrays in memory, the targets of a binary CSR file streamed once
                          per iteration with O_DIRECT, a reader thread double-buffering)
  scipy on np.memmap      scipy.sparse over the CSR file's arrays mapped with np.memmap (no copy):
                          `A.T @ (x * inv_deg)` plus the dangling term. scipy.sparse has no
                          pattern-only matrix and converts any other dtype to float64 for a
                          product (a temporary of 8 bytes an edge), so the values are a float64
                          file of ones beside the CSR file, mapped too: 12 bytes an edge per
                          iteration, where the others need 4
  spillway, swap          the same spillway job without --mem-budget, paging through a swap file
                          made for the run (the cgroup's memory.memsw.limit_in_bytes unlimited),
                          stopped at 10x the time of spillway out of core (reported "> 10x");
                          and the same for serial-ooc --io memory (the graph read into memory):
                          the serial program relying on the kernel's paging, the BDMPI paper's
                          "MPI -np 1"
  bdmprun                 our BDMPI PageRank crates/bdmpi/bench/pagerank.c reading the same CSR
                          file (--graph), under bdmprun -sbma araw -nr 1 with -rm the budget
                          (its time per iteration includes the first; it writes no ranks)
  in memory               spillway without a budget and serial-ooc with --io memory, without a
                          cgroup: for reference

Every run but the in-memory ones is inside a fresh memory cgroup v1 of budget + 128 MiB, which
counts the page cache; the process is moved in before it starts (`sh -c 'echo $$ >
cgroup.procs; exec ...'`). Before each run: sync and `echo 3 > /proc/sys/vm/drop_caches`.
The disk's direct read bandwidth is measured in the same run (dd with O_DIRECT in the work
directory); the streaming bound of an iteration is 4 bytes an edge at that bandwidth.

Per alternative: seconds per iteration (the mean of the iterations after the first; the load
reported separately), ratio to the streaming bound, ratio to serial-ooc, peak RSS (getrusage,
from /usr/bin/time), the cgroup's peak usage (memory.max_usage_in_bytes, page cache included),
bytes read by the process tree (getrusage's block inputs) and by the device that holds the work
directory (/proc/diskstats: machine-wide, so run it on a quiet machine; swap-ins count here),
and the L1 distance of its ranks to those of serial-ooc in memory (must be <= 1e-9).

Needs root (cgroups, drop_caches, swap), the cgroup v1 memory controller, /usr/bin/time, dd,
the release binaries (cargo build --release -p spillway-cli -p spillway-bench) and a Python with
numpy and scipy for the scipy alternative (--python; default .venv/bin/python when it exists).
Cleans up (cgroups, swap file, work directory) on exit, on errors and on Ctrl-C.

Usage: sudo python3 scripts/bench_ooc_alternatives.py [--bin target/release/spillway]
           [--bench target/release/spillway-bench] [--scales 20,21,22,23,24] [--budget 256M]
           [--ratios 1,2,4,8,16] [--iterations 5] [--ranks 32]
           [--only spillway,serial,scipy,swap,bdmpi,memory]
           [--work-dir DIR] [--quick] [--json OUT]
Then: .venv/bin/python scripts/plot_ooc.py OUT   (docs/figures/ooc-pagerank.svg)
Exit status: 0 when every completed run agrees with the reference, 1 otherwise, 2 for a wrong
request (not root, no cgroup v1, missing binaries).
"""
import argparse
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20
GIB = 1 << 30
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CGROUP_V1 = "/sys/fs/cgroup/memory"
EDGE_FACTOR = 16
TOLERANCE = 1e-9
SWAP_LIMIT = 10.0  # the swap run is stopped at this many times spillway's out-of-core time


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMGT]?)i?B?", text.strip(), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 256M)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2).upper()]


def human(n):
    if n is None:
        return "-"
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.{0 if n >= 100 * size else 1}f} {unit}"
    return f"{n} B"


# --------------------------------------------------------------------------------------------
# Clean-up: every resource is registered when made and released in reverse order, on a normal
# exit, an error, Ctrl-C or SIGTERM.

class Cleanup:
    def __init__(self):
        self.actions = []
        self.child = None  # the process group running now

    def push(self, what, fn):
        self.actions.append((what, fn))
        return len(self.actions) - 1

    def release(self, token):
        what, fn = self.actions[token]
        self.actions[token] = (what, None)
        if fn:
            fn()

    def run_all(self):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        self.kill_child()
        while self.actions:
            what, fn = self.actions.pop()
            if fn:
                try:
                    fn()
                except Exception as e:  # keep releasing the rest
                    print(f"cleanup: {what}: {e}", file=sys.stderr)

    def kill_child(self):
        p, self.child = self.child, None
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


CLEANUP = Cleanup()


def on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


# --------------------------------------------------------------------------------------------
# The machine

def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def block_device(path):
    """The name of the block device holding `path` (as /proc/diskstats names it), or None."""
    st = os.stat(path)
    link = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    try:
        return os.path.basename(os.readlink(link))
    except OSError:
        return None


def device_read_bytes(dev):
    if dev is None:
        return None
    with open("/proc/diskstats") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 5 and parts[2] == dev:
                return int(parts[5]) * 512
    return None


def disk_bandwidth(directory, size):
    """Sequential direct write then read of `size` bytes (bytes/s each)."""
    path = os.path.join(directory, "bandwidth.tmp")
    token = CLEANUP.push(f"remove {path}", lambda: os.path.exists(path) and os.remove(path))
    bs = 16 * MIB
    drop_caches()
    t = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", f"bs={bs}", f"count={size // bs}",
                    "oflag=direct", "conv=fsync"], check=True, capture_output=True)
    write = size / (time.perf_counter() - t)
    drop_caches()
    t = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", f"bs={bs}", "iflag=direct"],
                   check=True, capture_output=True)
    read = size / (time.perf_counter() - t)
    CLEANUP.release(token)
    return read, write


class Cgroup:
    """A fresh memory cgroup v1 whose limit counts the page cache; swap allowed or not."""

    def __init__(self, name, limit, swap):
        self.path = os.path.join(CGROUP_V1, name)
        if os.path.isdir(self.path):
            self.remove()
        os.mkdir(self.path)
        self.token = CLEANUP.push(f"remove the cgroup {self.path}", self.remove)
        self._write("memory.limit_in_bytes", str(limit))
        memsw = os.path.join(self.path, "memory.memsw.limit_in_bytes")
        if os.path.exists(memsw):
            # Unlimited: the job swaps rather than being killed; else no swap at all.
            self._write("memory.memsw.limit_in_bytes", "-1" if swap else str(limit))
        self.swap_accounting = os.path.exists(memsw)

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def read(self, name):
        try:
            with open(os.path.join(self.path, name)) as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_kills(self):
        try:
            with open(os.path.join(self.path, "memory.oom_control")) as f:
                for line in f:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def wrap(self, cmd):
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *cmd]

    def remove(self):
        if not os.path.isdir(self.path):
            return
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)
        print(f"cleanup: could not remove the cgroup {self.path}", file=sys.stderr)

    def close(self):
        CLEANUP.release(self.token)


class SwapFile:
    """A swap file made for the swap runs: on only while one runs, removed at the end."""

    def __init__(self, path, size):
        self.path, self.on = path, False
        CLEANUP.push(f"remove the swap file {path}", self.remove)
        subprocess.run(["fallocate", "-l", str(size), path], check=True)
        os.chmod(path, 0o600)
        subprocess.run(["mkswap", path], check=True, capture_output=True)

    def swapon(self):
        subprocess.run(["swapon", self.path], check=True)
        self.on = True

    def swapoff(self):
        if self.on:
            subprocess.run(["swapoff", self.path], check=True)
            self.on = False

    def remove(self):
        self.swapoff()
        if os.path.exists(self.path):
            os.remove(self.path)


# --------------------------------------------------------------------------------------------
# One measured run

def run_measured(cmd, work, cgroup=None, timeout=None, dev=None):
    """Runs `cmd` (in `cgroup`) after dropping the caches; what happened."""
    drop_caches()
    time_file = os.path.join(work, "time.txt")
    if os.path.exists(time_file):
        os.remove(time_file)
    full = ["/usr/bin/time", "-o", time_file, "-f", "%e %M %I %O %F"] + cmd
    if cgroup:
        full = cgroup.wrap(full)
    dev_before = device_read_bytes(dev)
    t0 = time.perf_counter()
    p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    CLEANUP.child = p
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
    finally:
        CLEANUP.kill_child()
    wall = time.perf_counter() - t0
    dev_after = device_read_bytes(dev)
    r = {"rc": p.returncode, "stdout": out, "stderr": err, "wall_seconds": wall,
         "timed_out": timed_out, "peak_rss": None, "process_read_bytes": None,
         "major_faults": None,
         "device_read_bytes": None if dev_before is None or dev_after is None
         else dev_after - dev_before}
    try:
        with open(time_file) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        e, maxrss, inblock, _, faults = lines[-1].split()
        r.update(peak_rss=int(maxrss) * 1024, process_read_bytes=int(inblock) * 512,
                 major_faults=int(faults))
        m = re.search(r"exited with non-zero status (\d+)|terminated by signal (\d+)",
                      "\n".join(lines[:-1]))
        if m and m.group(1):
            r["rc"] = int(m.group(1))
        elif m and m.group(2):
            r["rc"] = -int(m.group(2))
    except (OSError, ValueError, IndexError):
        pass  # killed with /usr/bin/time (the timeout)
    if cgroup:
        r["cgroup_peak"] = cgroup.read("memory.max_usage_in_bytes")
        r["cgroup_memsw_peak"] = cgroup.read("memory.memsw.max_usage_in_bytes")
        r["oom_kills"] = cgroup.oom_kills()
    return r


def last_json(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    try:
        return json.loads(text)
    except ValueError:
        return None


def per_iteration(seconds):
    later = seconds[1:] or seconds
    return sum(later) / len(later) if later else None


# --------------------------------------------------------------------------------------------
# The scipy alternative (run as `PY this-script --scipy-worker ...` inside the cgroup)

def scipy_worker(csr, ones, iterations, out, damping):
    import numpy as np
    import scipy
    import scipy.sparse as sp

    t0 = time.perf_counter()
    head = np.fromfile(csr, dtype="<u8", count=5)
    if head[0].tobytes() != b"SPWYCSR1":
        sys.exit(f"{csr}: not a CSR file of spillway-bench serial-ooc build")
    n, m, offsets_at, targets_at = (int(v) for v in head[1:5])
    indptr = np.memmap(csr, dtype="<i8", mode="r", offset=offsets_at, shape=(n + 1,))
    indices = np.memmap(csr, dtype="<i4", mode="r", offset=targets_at, shape=(m,))
    data = np.memmap(ones, dtype="<f8", mode="r", shape=(m,))
    # csr_matrix keeps the mapped targets and values as they are (indptr, n + 1 entries, is
    # narrowed to int32 in memory); its transpose is a CSC matrix over the same arrays.
    a = sp.csr_matrix((data, indices, indptr), shape=(n, n), copy=False)
    if not (np.shares_memory(a.indices, indices) and np.shares_memory(a.data, data)):
        sys.exit("scipy copied the mapped arrays")
    at = a.T
    deg = np.diff(indptr)
    dangling = np.flatnonzero(deg == 0)
    inv_deg = np.zeros(n)
    np.divide(1.0, deg, out=inv_deg, where=deg > 0)
    del deg
    x = np.full(n, 1.0 / n)
    z = np.empty(n)
    load = time.perf_counter() - t0
    times, delta = [], 0.0
    for _ in range(iterations):
        t = time.perf_counter()
        np.multiply(x, inv_deg, out=z)
        y = at @ z
        base = (1.0 - damping) / n + damping * x[dangling].sum() / n
        y *= damping
        y += base
        delta = float(np.abs(y - x).sum())
        x = y
        times.append(time.perf_counter() - t)
        print(f"iteration {len(times) - 1}: {times[-1]:.3f} s, L1 change {delta:.6e}",
              file=sys.stderr, flush=True)
    x.astype("<f8").tofile(out)
    print(json.dumps({"vertices": n, "edges": m, "load_seconds": load, "iteration_seconds": times,
                      "final_l1_change": delta, "rank_sum": float(x.sum()),
                      "numpy": np.__version__, "scipy": scipy.__version__}))


def write_ones(path, m):
    """m float64 ones: the values scipy.sparse needs beside the pattern."""
    one = struct.pack("<d", 1.0) * (1 << 17)  # 1 MiB
    with open(path, "wb") as f:
        left = m * 8
        while left > 0:
            k = min(left, len(one))
            f.write(one[:k])
            left -= k


# --------------------------------------------------------------------------------------------
# The benchmark

ALTERNATIVES = [
    # key, label, in a cgroup
    ("spillway", "spillway, out of core", True),
    ("serial", "serial-ooc (O_DIRECT, hand-written)", True),
    ("scipy", "scipy.sparse on np.memmap", True),
    ("swap", "spillway, no budget, swap", True),
    ("serial_swap", "serial-ooc --io memory, swap", True),
    ("bdmpi", "bdmprun pagerank.c", True),
    ("spillway_mem", "spillway, in memory (no cgroup)", False),
    ("serial_mem", "serial-ooc --io memory (no cgroup)", False),
]
LABEL = {k: l for k, l, _ in ALTERNATIVES}

BDMPI_NOTE = ("crates/bdmpi/bench/pagerank.c (ours, BDMPI's API) reading the same CSR file "
              "(--graph), under bdmprun -sbma araw with -rm the budget; its seconds per "
              "iteration include the first; its ranks are not written (no L1 check)")


def portable(command, work):
    """`command` as recorded in the results: paths in the repository relative to it, the work
    directory as WORK (the results name no path of the machine that ran them)."""
    return command.replace(work, "WORK").replace(ROOT + os.sep, "")


def build_bdmpi_pagerank(work):
    """Compiles crates/bdmpi/bench/pagerank.c against libbdmpi (target/release)."""
    lib = os.path.join(ROOT, "target", "release")
    exe = os.path.join(work, "bdmpi-pagerank")
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-I", os.path.join(ROOT, "crates/bdmpi/include"),
                    os.path.join(ROOT, "crates/bdmpi/bench/pagerank.c"), "-o", exe, "-L", lib,
                    "-lbdmpi", f"-Wl,-rpath,{lib}"], check=True)
    return exe


def bdmpi_report(stdout, iterations):
    """pagerank.c's 'seconds per iteration X' as a report like the others' JSON."""
    for line in stdout.splitlines():
        if line.startswith("seconds per iteration"):
            per = float(line.split()[-1])
            return {"iteration_seconds": [per] * int(iterations)}
    return None


def check_setup(a):
    problems = []
    if os.geteuid() != 0:
        problems.append("run as root (memory cgroups, drop_caches and a swap file need it): "
                        "sudo python3 scripts/bench_ooc_alternatives.py ...")
    if not os.path.isdir(CGROUP_V1):
        problems.append(f"needs the cgroup v1 memory controller at {CGROUP_V1}")
    for path, build in ((a.bin, "cargo build --release -p spillway-cli"),
                        (a.bench, "cargo build --release -p spillway-bench")):
        if not os.access(path, os.X_OK):
            problems.append(f"{path}: not found; build it first: {build}")
    for tool in ("/usr/bin/time", shutil.which("dd"), shutil.which("fallocate"),
                 shutil.which("mkswap"), shutil.which("swapon")):
        if not tool or not os.access(tool, os.X_OK):
            problems.append("needs /usr/bin/time, dd, fallocate, mkswap and swapon")
            break
    if "scipy" in a.only:
        p = subprocess.run([a.python, "-c", "import numpy, scipy.sparse"], capture_output=True)
        if p.returncode != 0:
            problems.append(f"{a.python} has no numpy/scipy (for the scipy alternative): "
                            "python3 -m venv .venv && .venv/bin/pip install numpy scipy, "
                            "or --python PY, or leave scipy out of --only")
    return problems


def machine_facts(work, dev):
    facts = {"date": time.strftime("%Y-%m-%d %H:%M"), "kernel": platform.release(),
             "cores": os.cpu_count(), "device": dev}
    try:
        with open("/proc/meminfo") as f:
            facts["memory_bytes"] = int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        facts["commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                         capture_output=True, text=True).stdout.strip() or None
    except OSError:
        pass
    return facts


def outcome(alt, r, report, seconds):
    """Status text of a run from its result."""
    if r.get("timed_out"):
        return "timeout"
    if r.get("oom_kills"):
        return "oom-killed"
    if r["rc"] != 0:
        return "refused" if r["rc"] == 2 else "failed"
    if report is None or not seconds:
        return "failed"
    return "ok"


def run_scale(a, scale, work, spill, dev, bound_bw, swap_state, results):
    n, m = 1 << scale, EDGE_FACTOR << scale
    spec = f"rmat:{scale}:{EDGE_FACTOR}"
    ratio = 4 * m / a.budget
    limit = a.budget + a.slack
    bound = 4 * m / bound_bw
    print(f"\n## {spec}: {n} vertices, {m} edges; 4 bytes an edge = {human(4 * m)} = "
          f"{ratio:.2f}x the budget of {human(a.budget)}; cgroup {human(limit)}; streaming bound "
          f"{bound:.3f} s an iteration\n", flush=True)
    entry = {"scale": scale, "spec": spec, "vertices": n, "edges": m, "ratio": ratio,
             "bound_seconds": bound, "alternatives": []}
    results["runs"].append(entry)

    csr = os.path.join(work, f"rmat{scale}.csr")
    ones = os.path.join(work, f"rmat{scale}.ones.f64")
    files = [csr, ones]
    token = CLEANUP.push(f"remove the inputs of scale {scale}",
                         lambda: [os.remove(f) for f in files if os.path.exists(f)])
    t = time.perf_counter()
    subprocess.run([a.bench, "serial-ooc", "build", "--generate", spec, "--out", csr], check=True,
                   capture_output=True)
    entry["csr_bytes"] = os.path.getsize(csr)
    entry["build_seconds"] = time.perf_counter() - t
    if "scipy" in a.only:
        write_ones(ones, m)

    def ranks(key):
        return os.path.join(work, f"ranks-{scale}-{key}" + (".f64" if key == "scipy" else ".txt"))

    files += [ranks(k) for k, _, _ in ALTERNATIVES]
    k = str(a.iterations)
    common = ["--iterations", k, "--tolerance", "0", "--json", "--ranks", str(a.ranks)]
    commands = {
        "serial_mem": [a.bench, "serial-ooc", "pagerank", "--graph", csr, "--iterations", k,
                       "--io", "memory", "--json", "--out", ranks("serial_mem")],
        "spillway_mem": [a.bin, "run", "pagerank", "--generate", spec, *common,
                         "--out", ranks("spillway_mem")],
        "spillway": [a.bin, "run", "pagerank", "--generate", spec, *common,
                     "--mem-budget", str(a.budget), "--spill-dir", spill,
                     "--out", ranks("spillway")],
        "serial": [a.bench, "serial-ooc", "pagerank", "--graph", csr, "--iterations", k, "--json",
                   "--out", ranks("serial")],
        "scipy": [a.python, os.path.abspath(__file__), "--scipy-worker", csr, ones, k,
                  ranks("scipy")],
        "swap": [a.bin, "run", "pagerank", "--generate", spec, *common, "--spill-dir", spill,
                 "--out", ranks("swap")],
        "serial_swap": [a.bench, "serial-ooc", "pagerank", "--graph", csr, "--iterations", k,
                        "--io", "memory", "--json", "--out", ranks("serial_swap")],
    }
    if "bdmpi" in a.only:
        commands["bdmpi"] = [os.path.join(ROOT, "target", "release", "bdmprun"), "-ns",
                             str(a.ranks), "-nr", "1", "-sbma", "araw", "-rm",
                             str(a.budget // 4096), "-wd", spill, build_bdmpi_pagerank(work),
                             "--graph", csr, k]
    order = ["serial_mem", "spillway_mem", "spillway", "serial", "scipy", "swap", "serial_swap",
             "bdmpi"]
    wanted = {"memory": ["serial_mem", "spillway_mem"], "swap": ["swap", "serial_swap"]}
    selected = {x for o in a.only for x in wanted.get(o, [o])} | {"serial_mem"}
    spillway_wall = None
    for key in order:
        if key not in selected:
            continue
        label = LABEL[key]
        row = {"key": key, "label": label}
        if key in commands:
            row["command"] = portable(shlex.join(commands[key]), work)
        entry["alternatives"].append(row)
        if key == "bdmpi":
            row["note"] = BDMPI_NOTE
        in_cgroup = dict((x, c) for x, _, c in ALTERNATIVES)[key]
        timeout = a.timeout
        swapping = key in ("swap", "serial_swap")
        if swapping:
            if spillway_wall is None:
                row.update(status="skipped", note="needs the spillway out-of-core run first")
                continue
            timeout = min(timeout, SWAP_LIMIT * spillway_wall)
            row["time_limit_seconds"] = timeout
            if swap_state.get("file") is None:
                swap_state["file"] = SwapFile(os.path.join(work, "swapfile"), a.swap_size)
            swap_state["file"].swapon()
        cg = Cgroup(f"spillway-ooc-alt-{os.getpid()}", limit, swap=swapping) if in_cgroup else None
        print(f"- {label} ...", end=" ", flush=True)
        try:
            r = run_measured(commands[key], work, cg, timeout, dev)
        finally:
            if cg:
                cg.close()
            if swapping:
                swap_state["file"].swapoff()
        report = (bdmpi_report(r["stdout"] or "", k) if key == "bdmpi"
                  else last_json(r["stdout"]))
        seconds = (report or {}).get("iteration_seconds") or []
        status = outcome(key, r, report, seconds)
        row.update(status=status, rc=r["rc"], wall_seconds=r["wall_seconds"],
                   peak_rss=r["peak_rss"], cgroup_peak=r.get("cgroup_peak"),
                   cgroup_memsw_peak=r.get("cgroup_memsw_peak"), oom_kills=r.get("oom_kills"),
                   process_read_bytes=r["process_read_bytes"], major_faults=r["major_faults"],
                   device_read_bytes=r["device_read_bytes"])
        warnings = [l.strip() for l in (r["stderr"] or "").splitlines() if "warning" in l]
        if warnings:
            row["warning"] = " / ".join(warnings)
        if status == "ok":
            row.update(iteration_seconds=seconds, seconds_per_iteration=per_iteration(seconds),
                       load_seconds=report.get("load_seconds"))
            io = [i.get("device_read_bytes") for i in report.get("iteration_io", [])[1:]]
            if io and None not in io:
                # spillway's own sample of the device's reads in each iteration
                row["device_read_per_iteration"] = sum(io) / len(io)
            if key == "spillway":
                spillway_wall = r["wall_seconds"]
                row["peak_rss"] = report.get("peak_rss") or row["peak_rss"]
        else:
            tail = (r["stderr"] or "").strip().splitlines()
            row["stderr_tail"] = tail[-5:]
            row["note"] = {"timeout": f"stopped at {timeout:.0f} s"
                           + (f" = {SWAP_LIMIT:.0f}x spillway out of core" if swapping else ""),
                           "oom-killed": f"killed for lack of memory ({r.get('oom_kills')} OOM kills "
                                         f"in the cgroup)"}.get(status, tail[-1] if tail else f"exit {r['rc']}")
        print(status + (f": {row['seconds_per_iteration']:.3f} s an iteration" if status == "ok"
                        else f": {row['note']}"), flush=True)
    # The ranks, against serial-ooc in memory.
    ref = ranks("serial_mem")
    for row in entry["alternatives"]:
        if row["status"] != "ok" or row["key"] in ("serial_mem", "bdmpi"):
            continue
        p = subprocess.run([a.bench, "serial-ooc", "compare", ref, ranks(row["key"]),
                            "--tolerance", str(TOLERANCE)], capture_output=True, text=True)
        c = last_json(p.stdout) or {}
        row["l1_vs_reference"] = c.get("l1")
        row["agrees"] = p.returncode == 0
        if p.returncode != 0:
            print(f"  {row['label']}: ranks DIFFER from serial-ooc's: {(p.stdout + p.stderr).strip()}",
                  flush=True)
    CLEANUP.release(token)
    print_table(entry, a)


def print_table(entry, a):
    rows = entry["alternatives"]
    serial = next((r.get("seconds_per_iteration") for r in rows if r["key"] == "serial"), None)
    bound = entry["bound_seconds"]
    print(f"\n| alternative | s / iteration | x bound | x serial-ooc | load s | peak RSS | "
          f"cgroup peak | read by the process | read from the device | L1 vs reference |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes = []
    for r in rows:
        s = r.get("seconds_per_iteration")
        if s is None:
            what = {"timeout": f"> {SWAP_LIMIT:.0f}x" if "swap" in r["key"] else "timeout"}.get(
                r["status"], r["status"])
            notes.append(f"{r['label']}: {r['status']}: {r.get('note', '')}")
            print(f"| {r['label']} | {what} | | | | {human(r.get('peak_rss'))} | "
                  f"{human(r.get('cgroup_peak'))} | {human(r.get('process_read_bytes'))} | "
                  f"{human(r.get('device_read_bytes'))} | |")
            continue
        l1 = r.get("l1_vs_reference")
        print(f"| {r['label']} | {s:.3f} | {s / bound:.2f} | "
              f"{(f'{s / serial:.2f}' if serial else '-')} | {r.get('load_seconds') or 0:.2f} | "
              f"{human(r.get('peak_rss'))} | {human(r.get('cgroup_peak'))} | "
              f"{human(r.get('process_read_bytes'))} | {human(r.get('device_read_bytes'))} | "
              f"{'reference' if r['key'] == 'serial_mem' else (f'{l1:.1e}' if l1 is not None else '-')} |")
        if r.get("warning"):
            notes.append(f"{r['label']}: {r['warning']}")
    print(f"\ns / iteration: the mean of iterations 2..{a.iterations}; x bound: against 4 bytes an "
          "edge at the disk's direct read bandwidth. Reads: the whole run's, load included "
          "(the process tree's block inputs; the device's sectors, machine-wide, swap-ins "
          "included).")
    for note in notes:
        print(f"- {note}")
    sys.stdout.flush()


def summary(results):
    """Seconds per iteration of every alternative at every scale, in one table."""
    runs = results["runs"]
    if len(runs) < 2:
        return
    print("\n## Summary: seconds per iteration (x the streaming bound)\n")
    print("| alternative | " + " | ".join(f"{r['spec']} ({r['ratio']:g}x)" for r in runs) + " |")
    print("|---|" + "---:|" * len(runs))
    keys = []
    for r in runs:
        keys += [x["key"] for x in r["alternatives"] if x["key"] not in keys]
    for key in keys:
        cells = []
        for r in runs:
            x = next((x for x in r["alternatives"] if x["key"] == key), None)
            s = x and x.get("seconds_per_iteration")
            if s:
                cells.append(f"{s:.3f} ({s / r['bound_seconds']:.1f})")
            elif x and x["status"] == "timeout" and "swap" in key:
                cells.append(f"> {SWAP_LIMIT:.0f}x spillway")
            else:
                cells.append(x["status"] if x else "")
        print(f"| {LABEL[key]} | " + " | ".join(cells) + " |")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/spillway"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "target/release/spillway-bench"))
    ap.add_argument("--python", default=None,
                    help="Python with numpy and scipy (default: .venv/bin/python if it exists)")
    ap.add_argument("--scales", default=None, help="R-MAT scales (default 20,21,22,23,24)")
    ap.add_argument("--ratios", default=None,
                    help="instead of --scales: data / budget ratios (4 bytes an edge), e.g. "
                         "1,2,4,8,16; each must make a whole scale")
    ap.add_argument("--budget", type=parse_size, default=None, help="memory budget (default 256M)")
    ap.add_argument("--slack", type=parse_size, default=128 * MIB,
                    help="the cgroup's limit is the budget plus this (default 128M)")
    ap.add_argument("--iterations", type=int, default=None, help="iterations (default 5)")
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--only", default="spillway,serial,scipy,swap,bdmpi,memory",
                    help="alternatives to run: spillway,serial,scipy,swap,bdmpi,memory")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds allowed to any run")
    ap.add_argument("--swap-size", type=parse_size, default=None, help="swap file (default 8G)")
    ap.add_argument("--bandwidth-size", type=parse_size, default=None,
                    help="bytes of the disk bandwidth test (default 2G)")
    ap.add_argument("--work-dir", default=None,
                    help="where the graph files, spill files and swap file go (on the disk to "
                         "measure; default: a new directory in the system's temporary one)")
    ap.add_argument("--quick", action="store_true", help="small scales: a check of the script")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--scipy-worker", nargs=4, metavar=("CSR", "ONES", "ITERATIONS", "OUT"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.scipy_worker:
        csr, ones, k, out = a.scipy_worker
        scipy_worker(csr, ones, int(k), out, 0.85)
        return 0
    a.python = a.python or next((p for p in (os.path.join(ROOT, ".venv/bin/python"),)
                                 if os.access(p, os.X_OK)), sys.executable)
    a.budget = a.budget or (16 * MIB if a.quick else 256 * MIB)
    if a.ratios and a.scales:
        print("error: --scales or --ratios, not both", file=sys.stderr)
        return 2
    if a.ratios:
        a.scales = []
        for r in a.ratios.split(","):
            edges = float(r) * a.budget / 4 / EDGE_FACTOR
            scale = round(math.log2(edges)) if edges >= 1 else 0
            if scale < 1 or (1 << scale) != edges:
                print(f"error: ratio {r} at the budget {human(a.budget)} makes no whole R-MAT scale",
                      file=sys.stderr)
                return 2
            a.scales.append(scale)
    else:
        a.scales = [int(s) for s in (a.scales or ("17,18,19" if a.quick else "20,21,22,23,24")).split(",")]
    a.iterations = a.iterations or (3 if a.quick else 5)
    a.swap_size = a.swap_size or (2 * GIB if a.quick else 8 * GIB)
    a.bandwidth_size = a.bandwidth_size or (256 * MIB if a.quick else 2 * GIB)
    a.only = [o.strip() for o in a.only.split(",") if o.strip()]
    known = {"spillway", "serial", "scipy", "swap", "bdmpi", "memory"}
    if set(a.only) - known or a.iterations < 1 or not all(1 <= s <= 30 for s in a.scales):
        print(f"error: --only takes {','.join(sorted(known))}; --iterations >= 1; scales 1..30",
              file=sys.stderr)
        return 2
    if "swap" in a.only and "spillway" not in a.only:
        a.only.append("spillway")  # the swap run's time limit is 10x spillway's
    problems = check_setup(a)
    if problems:
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        return 2

    # Ctrl-C raises KeyboardInterrupt even when started where SIGINT was ignored (a
    # background job of a script); SIGTERM and SIGHUP end the run the same way.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGHUP, on_sigterm)
    try:
        return bench(a)
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up", file=sys.stderr)
        return 130
    finally:
        CLEANUP.run_all()


def bench(a):
    if a.work_dir:
        os.makedirs(a.work_dir, exist_ok=True)
        work = tempfile.mkdtemp(prefix="spillway-ooc-alt-", dir=a.work_dir)
    else:
        work = tempfile.mkdtemp(prefix="spillway-ooc-alt-")
    CLEANUP.push(f"remove {work}", lambda: shutil.rmtree(work, ignore_errors=True))
    spill = os.path.join(work, "spill")
    os.mkdir(spill)
    dev = block_device(work)
    with open("/proc/swaps") as f:
        other_swap = [l.split()[0] for l in f.read().splitlines()[1:]]
    facts = machine_facts(work, dev)
    print(f"# PageRank out of core against the alternatives ({facts['date']}, {facts['cores']} "
          f"cores, {human(facts.get('memory_bytes'))}, commit {facts.get('commit')})")
    if other_swap:
        print(f"note: swap already on ({', '.join(other_swap)}): every run but the swap one is "
              "kept from it by memory.memsw.limit_in_bytes")
    read_bw, write_bw = disk_bandwidth(work, a.bandwidth_size)
    print(f"disk {dev}: direct sequential read {read_bw / 1e9:.2f} GB/s, write "
          f"{write_bw / 1e9:.2f} GB/s ({human(a.bandwidth_size)}, 16 MiB blocks)")
    print(f"budget {human(a.budget)}, cgroup {human(a.budget + a.slack)}, {a.iterations} iterations "
          f"(seconds per iteration: the mean after the first), spillway --ranks {a.ranks}, "
          f"python {a.python}")
    results = {"machine": facts, "quick": a.quick, "budget": a.budget,
               "cgroup_limit": a.budget + a.slack, "iterations": a.iterations, "ranks": a.ranks,
               "disk": {"device": dev, "read_bytes_per_second": read_bw,
                        "write_bytes_per_second": write_bw},
               "bdmpi": BDMPI_NOTE, "runs": []}
    swap_state = {}
    try:
        for scale in a.scales:
            run_scale(a, scale, work, spill, dev, read_bw, swap_state, results)
            if a.json:
                with open(a.json + ".tmp", "w") as f:
                    json.dump(results, f, indent=1)
                os.replace(a.json + ".tmp", a.json)
    finally:
        if swap_state.get("file"):
            swap_state["file"].remove()
    summary(results)
    bad = [(run["spec"], r["label"]) for run in results["runs"] for r in run["alternatives"]
           if r["status"] == "ok" and r.get("agrees") is False]
    if a.json:
        print(f"\nresults: {a.json}; figure: .venv/bin/python scripts/plot_ooc.py {a.json}")
    if bad:
        print(f"ranks that disagree with the reference: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
