#!/usr/bin/env python3
"""Word count with PySpark local[2], checked against a spillway word count output.

Usage: bench_pyspark_wordcount.py TEXT SPILLWAY_OUT [--reps N]

Times the Spark session start-up separately from the job (textFile -> flatMap(split) ->
map((w, 1)) -> reduceByKey(add) -> collect). The collected counts must equal the "word count"
lines of SPILLWAY_OUT (a `spillway run wordcount --out` file of the same text), or the script
exits 1 before printing any time. The text must be ASCII (Python's str.split() splits on
Unicode whitespace too). Prints one JSON object: startup_seconds, job_seconds (each repetition),
words, distinct.
"""

import json
import os
import sys
import time
from operator import add


def main():
    args = sys.argv[1:]
    reps = 1
    if "--reps" in args:
        i = args.index("--reps")
        reps = int(args[i + 1])
        del args[i : i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    text, expected_path = args
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    t0 = time.time()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    startup = time.time() - t0
    times = []
    counts = None
    for _ in range(reps):
        t = time.time()
        counts = (
            sc.textFile(text)
            .flatMap(lambda line: line.split())
            .map(lambda w: (w, 1))
            .reduceByKey(add)
            .collect()
        )
        times.append(time.time() - t)
    spark.stop()
    expected = {}
    with open(expected_path, "rb") as f:
        for line in f:
            w, n = line.rsplit(b" ", 1)
            expected[w.decode()] = int(n)
    got = dict(counts)
    if got != expected:
        print(
            f"PySpark's counts differ from spillway's: {len(got)} vs {len(expected)} words",
            file=sys.stderr,
        )
        sys.exit(1)
    print(
        json.dumps(
            {
                "startup_seconds": startup,
                "job_seconds": times,
                "words": sum(got.values()),
                "distinct": len(got),
            }
        )
    )


main()
