#!/usr/bin/env python3
"""Checks a spillway word count against collections.Counter.

Usage: wordcount_ref.py RESULT_FILE TEXT_FILE...

Words are maximal runs of bytes that are not ASCII whitespace (bytes.split() with no
argument: space, \\t, \\n, \\v, \\f, \\r), counted over all files (a file's end separates
words). RESULT_FILE must hold exactly "word count" per line, by count descending, then by
the word's bytes.

Exit 0: equal; 1: mismatch; 2: usage; 3: a required Python module is missing (none here).
"""

import sys
from collections import Counter


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    counts = Counter()
    for path in sys.argv[2:]:
        with open(path, "rb") as f:
            counts.update(f.read().split())
    expected = b"".join(
        w + b" " + str(n).encode() + b"\n"
        for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    with open(sys.argv[1], "rb") as f:
        got = f.read()
    if got != expected:
        got_lines = got.split(b"\n")
        exp_lines = expected.split(b"\n")
        for i, (a, b) in enumerate(zip(got_lines, exp_lines)):
            if a != b:
                print(f"line {i + 1}: got {a!r}, expected {b!r}")
                break
        print(f"mismatch: {len(got_lines)} lines, expected {len(exp_lines)}")
        sys.exit(1)
    print(f"word count equal to collections.Counter: {len(counts)} distinct words")


main()
