"""Time BoundaryProjector.fit on a pandas DataFrame against the same data as a numpy array.

Usage: python scripts/measure_dataframe.py [--rows 1000000] [--cols 50] [--repeats 5]

Each repeat times the numpy fit and the DataFrame fit back to back (the order
alternating), so drifts in machine load hit both; prints the medians and the
ratio DataFrame / numpy (target: at most 1.2).
"""

import argparse
import statistics
import time

import numpy as np
import pandas as pd

import streamproj as sp


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, args.rows)
    X = rng.normal(size=(args.rows, args.cols)) + 0.5 * y[:, None]
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(args.cols)])
    labels = pd.Series(y, name="label")

    runs = {
        "numpy": lambda: sp.BoundaryProjector().fit(X, y),
        "pandas": lambda: sp.BoundaryProjector().fit(df, labels),
    }
    a, b = sp.BoundaryProjector().fit(X, y), sp.BoundaryProjector().fit(df, labels)
    assert np.allclose(a.components_, b.components_, rtol=1e-12, atol=1e-14)  # same work, same answer
    times = {name: [] for name in runs}
    for i in range(args.repeats):
        order = list(runs) if i % 2 == 0 else list(runs)[::-1]
        for name in order:
            times[name].append(timed(runs[name]))
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:>6}: median {medians[name]:.3f} s  ({', '.join(f'{x:.3f}' for x in t)})")
    print(f"ratio pandas / numpy: {medians['pandas'] / medians['numpy']:.3f} "
          f"({args.rows:,} x {args.cols}, median of {args.repeats}, interleaved)")


if __name__ == "__main__":
    main()
