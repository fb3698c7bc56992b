#!/usr/bin/env python3
"""Error-bounded compression: spillway's SBD/RBD against zfp (fixed accuracy) and SZ3
(absolute bound) on real grid data, all at the same absolute bound, in one run.

Data sets (shipped inside PyPI packages, nothing is downloaded at run time):
  * dem: matplotlib's sample data `jacksboro_fault_dem.npz`, a 344 x 403 digital elevation
    model (metres, integer valued), as float64.
  * hgt: eofs's example data `hgt_djf.nc`, 65 winters x 29 latitudes x 49 longitudes of
    500 hPa geopotential height (metres), as a 3-D float64 grid.

For every data set and epsilon = rel x (max - min), rel in {1e-1, 1e-2, 1e-3, 1e-4}, every
compressor's output is decompressed and checked here with numpy: max |x - x'| <= epsilon at
every point, or the run fails. Ratio = compressed bytes / original bytes. Throughput =
original bytes / median time of the compression call (spillway: the in-process time it
reports, without file I/O and without its own verification; zfp and SZ3: the Python call).

Then the comparison with SZ3 of the default method (`spillway compress` without options but
the bound: the predictive method) on both data sets in float64 and float32 at 1e-2, 1e-3,
1e-4, and the same on grids of about 80 MB made from the two fields by mirrored tiling (the
field, its mirror image, the field, ... along each spatial axis, so that no seam breaks the
field's smoothness; the hgt winters axis is left as it is), where the throughputs count.

Usage: bench_structures.py SPILLWAY_BINARY [--reps N] [--predict-only]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def load_datasets():
    import matplotlib.cbook as cbook

    dem = cbook.get_sample_data("jacksboro_fault_dem.npz")["elevation"].astype(np.float64)
    import eofs
    from scipy.io import netcdf_file

    path = os.path.join(os.path.dirname(eofs.__file__), "examples", "example_data", "hgt_djf.nc")
    with netcdf_file(path, mmap=False) as f:
        z = np.array(f.variables["z"][:], dtype=np.float64)
    hgt = np.ascontiguousarray(z[:, 0, :, :])
    return [
        ("dem", "matplotlib sample_data/jacksboro_fault_dem.npz (elevation, m)", dem),
        ("hgt", "eofs examples/example_data/hgt_djf.nc (z at 500 hPa, m)", hgt),
    ]


def grid_arg(shape):
    # spillway wants the fastest axis first: a C-order (NZ, NY, NX) array is NXxNYxNZ.
    return "x".join(str(d) for d in reversed(shape))


def check(name, a, b, eps):
    b = np.asarray(b, dtype=np.float64).reshape(a.shape)
    err = np.abs(a - b)
    worst = float(err.max())
    if not np.all(err <= eps):
        raise SystemExit(f"{name}: bound violated: max error {worst} > {eps}")
    return worst


def median_time(fn, reps):
    times = []
    out = None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), out


SPILLWAY_CONFIGS = [
    # (label, extra arguments)
    ("spillway predict (default: predictor chosen on a sample)", ["--method", "predict"]),
    (
        "spillway SBD1 thesis (range <= eps, SQE raw ids, raw values)",
        ["--method", "sbd1", "--set-rule", "range", "--predictor", "raw", "--raw-values"],
    ),
    ("spillway SBD1 (SQE raw ids)", ["--method", "sbd1", "--predictor", "raw"]),
    ("spillway SBD1 (SQE + Lorenzo)", ["--method", "sbd1", "--predictor", "lorenzo"]),
    (
        "spillway SBD1 (SQE + Lorenzo, zstd -3)",
        ["--method", "sbd1", "--predictor", "lorenzo", "--level", "3"],
    ),
    ("spillway SBD1 (default: auto)", ["--method", "sbd1"]),
    ("spillway SBD2 (auto)", ["--method", "sbd2"]),
    ("spillway RBD1", ["--method", "rbd1"]),
    ("spillway RBD2", ["--method", "rbd2"]),
    ("spillway RBD3", ["--method", "rbd3"]),
]


def run_spillway(binary, raw, shape, eps, extra, out_dir, reps, dtype="f64"):
    packed = os.path.join(out_dir, "x.spz")
    restored = os.path.join(out_dir, "x.out")
    times = []
    info = None
    for _ in range(reps):
        cmd = [
            binary, "compress", "--epsilon", repr(eps), "--grid", grid_arg(shape),
            "--dtype", dtype, "--no-verify", "--json", *extra, raw, packed,
        ]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: {r.stderr}")
        info = json.loads(r.stdout)
        times.append(info["compress_seconds"])
    dtimes = []
    for _ in range(reps):
        d = subprocess.run(
            [binary, "decompress", "--json", packed, restored], capture_output=True, text=True
        )
        if d.returncode != 0:
            raise SystemExit(f"decompress: {d.stderr}")
        dtimes.append(json.loads(d.stdout)["decompress_seconds"])
    back = np.fromfile(restored, dtype=np.float64 if dtype == "f64" else np.float32)
    return info, float(np.median(times)), float(np.median(dtimes)), back


def mirror_tile(a, reps):
    """`a` tiled reps[i] times along axis i, every other copy mirrored (no seams)."""
    out = a
    for ax, r in enumerate(reps):
        parts = [out if i % 2 == 0 else np.flip(out, axis=ax) for i in range(r)]
        out = np.concatenate(parts, axis=ax)
    return np.ascontiguousarray(out)


def big_grid(a, dtype, target=80e6):
    """`a` as `dtype`, mirror-tiled along its last two axes to about `target` bytes."""
    n = target / np.dtype(dtype).itemsize
    f = (n / a.size) ** 0.5
    r0 = max(1, round(f))
    r1 = max(1, round(n / a.size / r0))
    reps = (r0, r1) if a.ndim == 2 else (1, r0, r1)
    return mirror_tile(a, reps).astype(dtype), reps


def sz3_run(a, eps, reps):
    from pysz import sz, szConfig, szErrorBoundMode

    cfg = szConfig(a.shape)
    cfg.errorBoundMode = szErrorBoundMode.ABS
    cfg.absErrorBound = eps
    ct, (buf, _) = median_time(lambda: sz().compress(a, cfg), reps)
    dt, (back, _) = median_time(lambda: sz().decompress(buf, a.dtype.type, a.shape), reps)
    return len(buf), ct, dt, check("SZ3", a, back, eps)


def zfp_run(a, eps, reps):
    import zfpy

    ct, buf = median_time(lambda: zfpy.compress_numpy(a, tolerance=eps), reps)
    dt, back = median_time(lambda: zfpy.decompress_numpy(buf), reps)
    return len(buf), ct, dt, check("zfp", a, back, eps)


def default_rows(binary, datasets, out_dir, reps, big):
    """The issue-33 table: spillway's default against SZ3 and zfp, one row per case."""
    dtype_name = {np.float64: "f64", np.float32: "f32"}
    print("| grid | shape | dtype | rel. eps | spillway bytes | SZ3 bytes | zfp bytes | "
          "spillway / SZ3 | ratio | spillway MB/s comp / decomp | SZ3 MB/s comp / decomp | "
          "zfp MB/s comp / decomp | max error / eps | predictor |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for key, _, a0 in datasets:
        for dt in (np.float64, np.float32):
            if big:
                a, tiles = big_grid(a0, dt)
                name = f"{key} x{'x'.join(str(t) for t in tiles)} mirrored"
            else:
                a = a0.astype(dt)
                name = key
            raw = os.path.join(out_dir, f"{key}-default.{dtype_name[dt]}")
            a.tofile(raw)
            lo, hi = float(a.min()), float(a.max())
            for rel in [1e-2, 1e-3, 1e-4]:
                eps = rel * (hi - lo)
                info, ct, dtime, back = run_spillway(
                    binary, raw, a.shape, eps, [], out_dir, reps, dtype_name[dt]
                )
                worst = check("spillway", a, back, eps)
                ours = info["compressed_bytes"]
                s_size, s_ct, s_dt, _ = sz3_run(a, eps, reps)
                z_size, z_ct, z_dt, _ = zfp_run(a, eps, reps)
                mb = a.nbytes / 1e6
                print(
                    f"| {name} | {'x'.join(map(str, a.shape))} | {dtype_name[dt]} | {rel:g} | "
                    f"{ours} | {s_size} | {z_size} | {ours / s_size:.3f} | {ours / a.nbytes:.5f} | "
                    f"{mb / ct:.0f} / {mb / dtime:.0f} | {mb / s_ct:.0f} / {mb / s_dt:.0f} | "
                    f"{mb / z_ct:.0f} / {mb / z_dt:.0f} | {worst / eps:.6f} | {info['predictor']} |"
                )
                sys.stdout.flush()
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spillway")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--predict-only", action="store_true",
                    help="only the default method against SZ3 and zfp (the issue-33 tables)")
    args = ap.parse_args()

    import zfpy
    from pysz import sz, szConfig, szErrorBoundMode

    with tempfile.TemporaryDirectory(prefix="bench-structures-") as out_dir:
        tables(args, out_dir, zfpy, sz, szConfig, szErrorBoundMode)


def tables(args, out_dir, zfpy, sz, szConfig, szErrorBoundMode):
    """Prints the tables, with the grids and outputs in `out_dir` (removed by the caller)."""
    datasets = load_datasets()
    print("### The default method against SZ3 and zfp (real grids)")
    print()
    print("`spillway compress --epsilon E --grid G --dtype D` (nothing else: the default "
          "method), in-process times; SZ3 (pysz, absolute bound) and zfp (zfpy, fixed accuracy) "
          f"through Python; medians of {args.reps}; every output checked in numpy.")
    print()
    default_rows(args.spillway, datasets, out_dir, args.reps, big=False)
    print("### The default method against SZ3 and zfp (grids of about 80 MB)")
    print()
    default_rows(args.spillway, datasets, out_dir, 3, big=True)
    if args.predict_only:
        return
    for key, source, a in datasets:
        raw = os.path.join(out_dir, f"{key}.f64")
        a.tofile(raw)
        lo, hi = float(a.min()), float(a.max())
        nbytes = a.nbytes
        print(f"### {key}: {source}")
        print()
        print(
            f"Shape {a.shape} (C order), {a.size} float64 values, {nbytes} bytes; "
            f"value range [{lo:g}, {hi:g}]."
        )
        print()
        print("| rel. eps | epsilon | compressor | ratio | 1/ratio | compress MB/s | decompress MB/s | max error |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|")
        for rel in [1e-1, 1e-2, 1e-3, 1e-4]:
            eps = rel * (hi - lo)
            rows = []
            for label, extra in SPILLWAY_CONFIGS:
                info, ct, dt, back = run_spillway(
                    args.spillway, raw, a.shape, eps, extra, out_dir, max(1, args.reps // 2)
                )
                back = back.reshape(a.shape)
                worst = check(label, a, back, eps)
                if "auto" in label and "predict" not in label:
                    how = info["predictor"] + (
                        f", relaxed r={info['set_radius']:g}" if info["relaxed"] else ""
                    )
                    label = f"{label} -> {how}"
                rows.append((label, info["compressed_bytes"], ct, dt, worst))
            # zfp, fixed-accuracy mode.
            ct, buf = median_time(lambda: zfpy.compress_numpy(a, tolerance=eps), args.reps)
            dt, back = median_time(lambda: zfpy.decompress_numpy(buf), args.reps)
            rows.append(("zfp (fixed accuracy)", len(buf), ct, dt, check("zfp", a, back, eps)))
            # SZ3, absolute error bound.
            cfg = szConfig(a.shape)
            cfg.errorBoundMode = szErrorBoundMode.ABS
            cfg.absErrorBound = eps
            ct, (sbuf, _) = median_time(lambda: sz().compress(a, cfg), args.reps)
            dt, (back, _) = median_time(
                lambda: sz().decompress(sbuf, np.float64, a.shape), args.reps
            )
            rows.append(("SZ3 (absolute bound)", len(sbuf), ct, dt, check("SZ3", a, back, eps)))
            for label, size, ct, dt, worst in rows:
                ratio = size / nbytes
                print(
                    f"| {rel:g} | {eps:.4g} | {label} | {ratio:.5f} | {1 / ratio:.1f} | "
                    f"{nbytes / ct / 1e6:.1f} | {nbytes / dt / 1e6:.1f} | {worst:.4g} |"
                )
            sys.stdout.flush()
        print()


if __name__ == "__main__":
    main()
