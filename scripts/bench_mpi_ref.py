#!/usr/bin/env python3
"""Reference for `spillway-bench collectives --backend mpi`: MPI_Bcast and MPI_Allreduce of the
MPI library itself (through mpi4py), timed exactly as spillway-bench times its collectives.

Run under mpirun, e.g.

    mpirun -np 2 .venv/bin/python scripts/bench_mpi_ref.py --sizes 1K,1M --json ref.jsonl

Method (the same as crates/bench/src/collectives.rs):
- MPI_Bcast of a uint8 buffer of `size` bytes from rank 0; MPI_Allreduce (MPI_SUM) of
  max(size / 8, 1) float64 values: the checked warm-up into a separate receive buffer, the
  timed repetitions in place (MPI_IN_PLACE), as spillway times `allreduce_into`.
- Per operation and size: one untimed warm-up call whose result is checked (rank i contributes
  i + 1, so every sum is p (p + 1) / 2; the broadcast carries the bytes i mod 251), then N
  repetitions of Barrier; start; operation; Barrier; stop, timed on rank 0.
- N = --reps below 4 MiB, max(3, reps // 3) from 4 MiB, max(3, reps // 9) from 64 MiB.
- Reported: median (the mean of the two middle values for an even count) and minimum;
  GB/s = bytes / median / 1e9. The latency of one Barrier is measured first (50 repetitions).

Rank 0 prints a Markdown table on stdout and, with --json, writes one JSON object per line
(times in seconds), with the same keys as spillway-bench's --json output.
"""

import argparse
import json
import sys
import time

import numpy as np

LARGE = 4 << 20
HUGE = 64 << 20


def parse_size(text):
    text = text.strip()
    shift = {"K": 10, "M": 20, "G": 30}.get(text[-1:].upper(), 0)
    digits = text[:-1] if shift else text
    value = int(digits) << shift
    if value <= 0:
        raise ValueError(f"size '{text}' must be positive")
    return value


def format_size(n):
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)


def format_duration(s):
    if s >= 1.0:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.1f} ns"


def summarise(times):
    t = sorted(times)
    n = len(t)
    median = t[n // 2] if n % 2 == 1 else (t[n // 2 - 1] + t[n // 2]) / 2
    return median, t[0], n


def time_op(comm, reps, op):
    times = []
    for _ in range(reps):
        comm.Barrier()
        start = time.perf_counter()
        op()
        comm.Barrier()
        times.append(time.perf_counter() - start)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1K,16K,256K,1M,4M,16M,64M,256M")
    ap.add_argument("--reps", type=int, default=45)
    ap.add_argument("--ops", default="allreduce,bcast")
    ap.add_argument("--json", help="write one JSON object per figure to this file (rank 0)")
    args = ap.parse_args()

    from mpi4py import MPI  # here, so that --compare runs without MPI

    comm = MPI.COMM_WORLD
    me, p = comm.Get_rank(), comm.Get_size()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    ops = [o.strip() for o in args.ops.split(",")]
    for o in ops:
        if o not in ("allreduce", "bcast"):
            sys.exit(f"unknown operation '{o}' (allreduce, bcast)")
    ops = [o for o in ("allreduce", "bcast") if o in ops]

    def reps_for(size):
        if size < LARGE:
            return args.reps
        if size < HUGE:
            return max(3, args.reps // 3)
        return max(3, args.reps // 9)

    records = []

    def record(op, size, nbytes, times):
        median, minimum, n = summarise(times)
        rec = {
            "impl": "mpi",
            "op": op,
            "ranks": p,
            "nodes": p,
            "size": size,
            "bytes": nbytes,
            "reps": n,
            "median_s": median,
            "min_s": minimum,
        }
        if nbytes > 0:
            rec["gbps"] = nbytes / median / 1e9
        records.append(rec)

    record("barrier", 0, 0, time_op(comm, 50, lambda: None))
    expected = p * (p + 1) / 2
    for size in sizes:
        reps = reps_for(size)
        for op in ops:
            if op == "allreduce":
                n = max(size // 8, 1)
                send = np.full(n, me + 1.0, dtype=np.float64)
                recv = np.empty(n, dtype=np.float64)
                comm.Allreduce(send, recv, op=MPI.SUM)
                if not np.all(recv == expected):
                    sys.exit(f"allreduce of {size} bytes returned wrong sums")
                # Timed in place (MPI_IN_PLACE), as spillway times `allreduce_into`.
                inout = send.copy()

                def run_op(inout=inout):
                    comm.Allreduce(MPI.IN_PLACE, inout, op=MPI.SUM)

                nbytes = n * 8
            else:
                pattern = (np.arange(size, dtype=np.int64) % 251).astype(np.uint8)
                buf = pattern.copy() if me == 0 else np.zeros(size, dtype=np.uint8)
                comm.Bcast([buf, MPI.BYTE], root=0)
                if not np.array_equal(buf, pattern):
                    sys.exit(f"bcast of {size} bytes delivered wrong data")
                del pattern

                def run_op(buf=buf):
                    comm.Bcast([buf, MPI.BYTE], root=0)

                nbytes = size
            record(op, size, nbytes, time_op(comm, reps, run_op))

    if me != 0:
        return
    library = MPI.Get_library_version().replace(chr(0), "").splitlines()[0].strip()
    print(f"## {library} ({p} processes), mpi4py\n")
    print("| op | ranks | size | reps | median | min | GB/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in records:
        size = format_size(r["bytes"]) if r["bytes"] else "-"
        gbps = f"{r['gbps']:.3f}" if "gbps" in r else "-"
        print(
            f"| {r['op']} | {r['ranks']} | {size} | {r['reps']} | "
            f"{format_duration(r['median_s'])} | {format_duration(r['min_s'])} | {gbps} |"
        )
    print()
    if args.json:
        with open(args.json, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")



def compare(np_, spill_path, mpi_path):
    """Joins the spillway and MPI result files into one comparison table per operation."""
    def load(path):
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    spill, ref = load(spill_path), load(mpi_path)
    extra = sorted({r["ranks"] for r in spill if "ranks" in r} - {np_})
    by = {(r["op"], r.get("ranks"), r["size"]): r for r in spill}
    ref_by = {(r["op"], r["size"]): r for r in ref}

    print("## spillway (MPI backend) vs Open MPI\n")
    print(
        f"{np_} MPI processes. spillway: {np_} ranks, one per process (one spillway node per "
        "process); Open MPI: MPI_Bcast / MPI_Allreduce through mpi4py. Median of the repetitions "
        "(barrier, start, operation, barrier, stop; both implementations use their own barrier); "
        "GB/s = bytes / median / 1e9; ratio = spillway GB/s / Open MPI GB/s."
    )
    if extra:
        print(
            "Extra columns: spillway with more ranks than processes ("
            + ", ".join(f"{r} ranks = {r // np_} per process" for r in extra)
            + "), ratio again against Open MPI with one rank per process."
        )
    b_s, b_m = by.get(("barrier", np_, 0)), ref_by.get(("barrier", 0))
    if b_s and b_m:
        print(
            f"\nBarrier latency (median): spillway {format_duration(b_s['median_s'])}, "
            f"Open MPI {format_duration(b_m['median_s'])}."
        )
    for op, what in (("bcast", "bcast (`u8`, from rank 0)"), ("allreduce", "allreduce (`f64`, sum)")):
        sizes = sorted({r["size"] for r in spill if r["op"] == op})
        if not sizes:
            continue
        print(f"\n### {what}\n")
        head = "| size | spillway median | spillway GB/s | Open MPI median | Open MPI GB/s | ratio |"
        rule = "|---:|---:|---:|---:|---:|---:|"
        for r in extra:
            head += f" spillway {r} ranks median | GB/s | ratio |"
            rule += "---:|---:|---:|"
        print(head)
        print(rule)
        for size in sizes:
            s, m = by.get((op, np_, size)), ref_by.get((op, size))
            if s is None or m is None:
                continue
            row = (
                f"| {format_size(s['bytes'])} | {format_duration(s['median_s'])} | {s['gbps']:.3f} "
                f"| {format_duration(m['median_s'])} | {m['gbps']:.3f} | {s['gbps'] / m['gbps']:.3f} |"
            )
            for r in extra:
                x = by.get((op, r, size))
                row += (
                    f" {format_duration(x['median_s'])} | {x['gbps']:.3f} | {x['gbps'] / m['gbps']:.3f} |"
                    if x
                    else " - | - | - |"
                )
            print(row)
    print()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--compare":
        compare(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        main()
