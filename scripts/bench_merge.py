"""Time and memory of one merge of two pass-1 partials with per-class detail.

    python scripts/bench_merge.py                         # K = 2 and 10, p = 1,000
    python scripts/bench_merge.py --classes 2 --features 2000 --repeats 9
    PYTHONPATH=../old python scripts/bench_merge.py       # another tree (before a change)

Pass 1 merges one partial summary per chunk into the next (``merge_partials``):
with ``shrinkage="auto"`` ("fourth" detail) each holds 3·K·p² co-moments, which
a merge re-centres on the merged class means. Reported per detail: the median
wall time of a merge (fresh copies of the two partials each time, BLAS on one
thread as under dask), the extra memory it allocates at its peak beyond its two
inputs (``tracemalloc``), in units of one (K, p, p) float64 array, and a
digest of the merged moments, so two trees can be compared bit for bit.
"""

import argparse
import copy
import hashlib
import os
import statistics
import time
import tracemalloc

import numpy as np
from threadpoolctl import threadpool_limits


def partials(k, p, rows, detail, seed=0):
    from streamproj.stats import partial_summary

    rng = np.random.default_rng(seed)
    out = []
    for side in range(2):
        X = (rng.normal(size=(rows, p)) + side + 3.0 * rng.normal(size=(k, p))[
            np.arange(rows) % k]).astype(np.float32)
        y = np.arange(rows) % k
        out.append(partial_summary(X, y, detail, row_offset=side * rows))
    return out


def digest(stats):
    h = hashlib.blake2b(digest_size=8)
    for name in ("means", "class_scatter", "comoment21", "comoment22"):
        value = getattr(stats, name)
        if value is not None:
            h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()


def main(argv=None):
    from streamproj.stats import merge_partials

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", default="2,10", help="K values, comma-separated")
    ap.add_argument("--features", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=4000, help="rows of each partial")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    import streamproj

    p = args.features
    print(f"streamproj from {os.path.dirname(streamproj.__file__)}; p = {p}, median of "
          f"{args.repeats}")
    print("| K | detail | merge (s) | peak extra / one (K, p, p) array | digest |")
    print("|---:|---|---:|---:|---|")
    with threadpool_limits(limits=1, user_api="blas"):
        for k in (int(v) for v in args.classes.split(",")):
            for detail in ("per_class", "fourth"):
                parts = partials(k, p, args.rows, detail)
                times = []
                for _ in range(args.repeats):
                    a, b = copy.deepcopy(parts)
                    t = time.perf_counter()
                    merged = merge_partials(a, b)
                    times.append(time.perf_counter() - t)
                    del a, b, merged
                a, b = copy.deepcopy(parts)
                tracemalloc.start()
                base = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                merged = merge_partials(a, b)
                extra = tracemalloc.get_traced_memory()[1] - base
                tracemalloc.stop()
                print(f"| {k} | {detail} | {statistics.median(times):.3f} | "
                      f"{extra / (8 * k * p * p):.1f} | {digest(merged)} |")


if __name__ == "__main__":
    main()
