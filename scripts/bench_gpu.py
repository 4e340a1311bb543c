"""The GPU path beside the CPU's and the floors, in one process, interleaved.

    python scripts/bench_gpu.py [--columns 1000,2048] [--repeats 5] [--data /tmp/streamproj-bench]

On a machine with an NVIDIA GPU and CuPy. For each width, the data set is
``scripts/bench.py``'s wide one (300k x 1,000 or 150k x 2,048 float32 in Zarr,
10,000-row zstd chunks, made once under --data and reused), and every task is
set up by ``bench.py``'s own task functions (the GPU tasks warm CuPy up on the
first rows in their set-up): the read floor (``read``), the read+write floor
(``read_write``), ``fit`` and ``project`` on the CPU and on the GPU
(``fit_cuda``, ``project_cuda``), and pass 1 alone (``accumulate``) on each,
so what the fit spends after its pass (the solve, on the host) shows. Round r
runs every task once before round r+1 starts; figures are medians, ratios
the median of the per-round ratios.

``bench.py --device cuda`` times the same tasks in a fresh process each (its
peak RSS too); each set-up then costs seconds of CuPy start-up and fitting, so
five rounds at two widths did not fit into a lent GPU's minutes (2026-11-27).
This script sets each task up once and runs the rounds in one process.

Needs: pip install -e ".[cuda13]" (or ".[cuda12]").
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench

ROWS = {n_cols: n_rows for n_rows, n_cols, dtype in bench.WIDE_CASES if dtype == "float32"}
TASKS = ("read", "read_write", "fit", "fit_cuda", "project", "project_cuda")
RATIOS = [("fit_cuda", "read"), ("fit", "read"), ("fit_cuda", "fit"), ("pass1_cuda", "read"),
          ("pass1", "read"), ("project_cuda", "read_write"), ("project", "read_write"),
          ("project_cuda", "project")]


def rounds(path, repeats):
    """Seconds per task per round, the tasks set up once and run interleaved."""
    from streamproj import gpu
    from streamproj.passes import accumulate

    tmp = Path(tempfile.mkdtemp(prefix="streamproj-bench-gpu-"))
    X, y = bench._open(path)
    tasks = {name: bench.TASKS[name](path, tmp) for name in TASKS}
    tasks["pass1"] = lambda: accumulate(X, y)

    def pass1_cuda():
        with gpu.using("cuda"):
            return accumulate(X, y)

    tasks["pass1_cuda"] = pass1_cuda
    times = {name: [] for name in tasks}
    for _ in range(repeats):
        for name, run in tasks.items():
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
    return times


def report(label, times):
    for name, seconds in times.items():
        print(f"{label} {name:<12} median {statistics.median(seconds):.3f} s  "
              + " ".join(f"{s:.3f}" for s in seconds))
    for a, b in RATIOS:
        ratio = statistics.median(x / z for x, z in zip(times[a], times[b], strict=True))
        print(f"{label} {a}/{b} median of per-round ratios {ratio:.2f}")


def main(argv=None):
    from streamproj._launch import tune_allocator

    tune_allocator()  # malloc as the streamproj command sets it, for the tasks and floors alike
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--columns", default="1000,2048", help="widths to run (of 1000, 2048)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", default="/tmp/streamproj-bench")
    args = ap.parse_args(argv)
    for p in (int(c) for c in args.columns.split(",")):
        if p not in ROWS:
            ap.error(f"--columns: {p} is not one of {', '.join(map(str, ROWS))}")
        path = bench.dataset(args.data, ROWS[p], p, "float32", bench.WIDE_CHUNK_ROWS)
        report(path.name, rounds(path, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
