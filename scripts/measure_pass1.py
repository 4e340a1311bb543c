"""Time pass 1's per-chunk summary (ClassStats.from_rows) against an earlier revision.

    python scripts/measure_pass1.py                      # 500k x 100 float32, 100k-row chunks
    python scripts/measure_pass1.py --baseline 5dcc36c --rows 500000 --features 100

Both versions run in this process, one BLAS thread (as pass 1 runs under
dask), interleaved chunk set by chunk set, and the medians of --repeats are
compared, so machine noise hits both alike. The baseline's stats.py is taken
from git (``git show REV:streamproj/stats.py``) and imported as a module of
its own.
"""

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]


def load_revision(rev):
    """Import streamproj/stats.py as it was at ``rev`` (inside the current package)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:streamproj/stats.py"],
                            check=True, capture_output=True, text=True).stdout
    folder = Path(tempfile.mkdtemp())
    path = folder / "stats_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("streamproj.stats_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="5dcc36c", help="git revision to compare with")
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--classes", type=int, default=2)
    parser.add_argument("--separation", type=float, default=3.0,
                        help="distance between consecutive class means, in within-class spreads")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    from streamproj import stats as current

    baseline = load_revision(args.baseline)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, args.features)).astype(np.float32)
    y = rng.integers(0, args.classes, size=args.rows)
    X += (args.separation * y[:, None]).astype(np.float32)
    times = {"baseline": [], "current": []}
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(args.repeats):
            for name, module in (("baseline", baseline), ("current", current)):
                t = time.perf_counter()
                for start in range(0, args.rows, args.chunk):
                    module.ClassStats.from_rows(X[start:start + args.chunk], y[start:start + args.chunk])
                times[name].append(time.perf_counter() - t)
    chunks = -(-args.rows // args.chunk)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.rows} x {args.features} float32, {args.classes} classes "
          f"{args.separation:g} spreads apart, "
          f"{chunks} chunks of {args.chunk} rows, {args.repeats} interleaved repeats, 1 BLAS thread")
    for name in ("baseline", "current"):
        print(f"  {name:8s}: {1e3 * med[name] / chunks:7.2f} ms per chunk "
              f"(median; min {1e3 * min(times[name]) / chunks:.2f})")
    print(f"  current / baseline = {med['current'] / med['baseline']:.3f}")


if __name__ == "__main__":
    main()
