#!/usr/bin/env python3
"""Seconds per PageRank iteration against data / budget for each alternative, from the JSON of
scripts/bench_ooc_alternatives.py (log-log), with the disk's streaming bound (4 bytes an edge at
the measured direct read bandwidth) as a dashed line. A run stopped at its time limit is drawn
at the limit with an upward triangle; one killed for lack of memory or refused, as a cross at
the top of the plot.

Usage: .venv/bin/python scripts/plot_ooc.py RESULTS.json [--out docs/figures/ooc-pagerank.svg]
(needs matplotlib: .venv/bin/pip install matplotlib)
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STYLE = {
    "spillway": ("C0", "o", "-"),
    "serial": ("C1", "s", "-"),
    "scipy": ("C2", "^", "-"),
    "swap": ("C3", "v", "-"),
    "serial_swap": ("C5", "v", "--"),
    "bdmpi": ("C4", "D", "-"),
    "spillway_mem": ("C0", "o", ":"),
    "serial_mem": ("C1", "s", ":"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/figures/ooc-pagerank.svg"))
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("needs matplotlib: .venv/bin/pip install matplotlib")
    with open(a.results) as f:
        d = json.load(f)
    runs = sorted(d["runs"], key=lambda r: r["ratio"])
    if not runs:
        sys.exit(f"{a.results}: no runs")

    fig, ax = plt.subplots(figsize=(10, 5))
    ratios = [r["ratio"] for r in runs]
    ax.plot(ratios, [r["bound_seconds"] for r in runs], "k--", lw=1,
            label="streaming bound (4 B an edge at the disk's read bandwidth)")
    finished = [s for r in runs for x in r["alternatives"] for s in [x.get("seconds_per_iteration")]
                if s]
    limits = [(x.get("time_limit_seconds") or 0) / d["iterations"] for r in runs
              for x in r["alternatives"] if x["status"] == "timeout"]
    top = max(finished + limits or [1.0]) * 3
    labels = {}
    for r in runs:
        for x in r["alternatives"]:
            labels.setdefault(x["key"], x["label"])
    # Out of core first, then the in-memory references.
    order = sorted(labels, key=lambda k: list(STYLE).index(k) if k in STYLE else len(STYLE))
    for key in order:
        label = labels[key]
        colour, marker, line = STYLE.get(key, ("grey", ".", "-"))
        xs, ys = [], []
        for r in runs:
            x = next((x for x in r["alternatives"] if x["key"] == key), None)
            if x is None:
                continue
            s = x.get("seconds_per_iteration")
            if s:
                xs.append(r["ratio"])
                ys.append(s)
            elif x["status"] == "timeout":
                # The iterations it did not finish: at least the limit over the iterations.
                limit = x.get("time_limit_seconds") or x.get("wall_seconds")
                ax.plot([r["ratio"]], [limit / d["iterations"]], marker="^", color=colour, ms=9,
                        ls="none")
                ax.annotate(f"> {limit / d['iterations']:.0f} s", (r["ratio"], limit / d["iterations"]),
                            textcoords="offset points", xytext=(-12, 8), fontsize=7, color=colour)
            elif x["status"] in ("oom-killed", "refused", "failed"):
                ax.plot([r["ratio"]], [top], marker="x", color=colour, ms=9, ls="none")
                ax.annotate(x["status"], (r["ratio"], top), textcoords="offset points",
                            xytext=(-20, 8), fontsize=7, color=colour)
        if xs:
            ax.plot(xs, ys, marker=marker, color=colour, ls=line, label=label)
        elif key != "bdmpi":
            ax.plot([], [], marker=marker, color=colour, ls=line, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ratios)
    ax.set_xticklabels([f"{x:g}\n(scale {r['scale']})" for x, r in zip(ratios, runs)])
    ax.set_xlabel("data / budget (4 bytes an edge of R-MAT, edge factor 16)")
    ax.set_ylabel("seconds per iteration")
    m = d["machine"]
    bw = d["disk"]["read_bytes_per_second"] / 1e9
    ax.set_title(f"PageRank out of core: budget {d['budget'] >> 20} MiB, cgroup "
                 f"{d['cgroup_limit'] >> 20} MiB, disk {bw:.2f} GB/s\n"
                 f"{m.get('date')}, {m.get('cores')} cores, commit {m.get('commit')}"
                 + (" (--quick: a check of the script, not a benchmark)" if d.get("quick") else ""),
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    fig.savefig(a.out)
    print(a.out)


if __name__ == "__main__":
    main()
