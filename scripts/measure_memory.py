"""Peak extra memory of pass 1 on an in-memory numpy array, at two or more sizes (tracemalloc).

    python scripts/measure_memory.py                         # 200k and 800k x 50 float32
    python scripts/measure_memory.py --rows 250000 1000000 --features 100 --chunk 20000

Each size runs in a fresh process; the peak counts every allocation numpy
and Python make during ``streamproj.passes.accumulate`` beyond the data
itself. In-memory input is read chunk by chunk without a copy, so the peak
is O(chunk·p + K·p²) and stays flat as the rows grow (0.1's dask
``from_array`` copied the whole array first: 1.57x the data at 200k rows).
"""

import argparse
import json
import subprocess
import sys

CHILD = """
import json, sys, tracemalloc
import numpy as np
from streamproj.passes import accumulate
n, p, chunk = map(int, sys.argv[1:4])
rng = np.random.default_rng(0)
X = rng.normal(size=(n, p)).astype(np.float32)
y = rng.integers(0, 3, n).astype(np.int8)
tracemalloc.start()
accumulate(X, y, chunk_rows=chunk)
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"rows": n, "data_mb": X.nbytes / 1e6, "peak_mb": peak / 1e6}))
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 800_000])
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--chunk", type=int, default=20_000)
    args = parser.parse_args(argv)
    print(f"pass 1 on in-memory float32 ({args.features} features, {args.chunk}-row chunks)")
    for n in args.rows:
        out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(args.features),
                              str(args.chunk)], check=True, capture_output=True, text=True)
        r = json.loads(out.stdout)
        print(f"  {r['rows']:>10,} rows: data {r['data_mb']:8.1f} MB, peak extra "
              f"{r['peak_mb']:6.1f} MB ({r['peak_mb'] / r['data_mb']:.3f} x the data)")


if __name__ == "__main__":
    main()
