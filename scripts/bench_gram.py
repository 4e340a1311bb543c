"""The pass-1 Gram kernel against BLAS syrk and numpy's product, on one and on two threads.

    python scripts/bench_gram.py                 # p = 1,000, 2,048 and 4,096
    python scripts/bench_gram.py --widths 4096 --repeats 7

Each thread accumulates ``blockᵀ block`` of 1,024-row float64 blocks (pass 1's
block size at these widths) into its own p×p product, as dask's threads do
with their chunks, BLAS limited to one thread. Two threads should take half
the time of one: a kernel that holds the GIL (scipy's ``dsyrk`` wrapper) takes
the same. Prints the median wall time and the useful GFlop/s (``n·p²`` per
product: only one triangle is needed).
"""

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.linalg import blas
from threadpoolctl import threadpool_limits

from streamproj import stats

ROWS = 1024


def syrk(product, block, buffer):
    blas.dsyrk(1.0, block.T, trans=0, beta=1.0, c=product, lower=0, overwrite_c=1)


def numpy_product(product, block, buffer):
    product += block.T @ block


def panels(product, block, buffer):
    stats._add_gram(product, block, buffer)


KERNELS = {"streamproj _add_gram": panels, "scipy dsyrk": syrk, "numpy X.T @ X": numpy_product}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="1000,2048,4096")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--flops", type=float, default=6e9, help="useful flops per thread and run")
    args = parser.parse_args()
    for p in (int(w) for w in args.widths.split(",")):
        nblocks = max(2, int(args.flops / (ROWS * p * p)))
        blocks = [np.random.default_rng(i).standard_normal((ROWS, p)) for i in range(2)]

        def task(kernel, i, p=p, nblocks=nblocks, blocks=blocks):
            product = np.zeros((p, p), order="F")
            buffer = stats.gram_buffer(p)
            for b in range(nblocks):
                kernel(product, blocks[(b + i) % 2], buffer)
            return product

        times = {}
        with threadpool_limits(limits=1, user_api="blas"):
            reference = np.triu(task(numpy_product, 0))
            for kernel in KERNELS.values():  # every kernel gives the same upper triangle
                np.testing.assert_allclose(np.triu(task(kernel, 0)), reference, rtol=1e-12,
                                           atol=1e-9 * np.abs(reference).max())
            for _ in range(args.repeats):  # interleaved
                for name, kernel in KERNELS.items():
                    for threads in (1, 2):
                        t = time.perf_counter()
                        with ThreadPoolExecutor(threads) as pool:
                            list(pool.map(lambda i, k=kernel: task(k, i), range(2)))
                        times.setdefault((name, threads), []).append(time.perf_counter() - t)
        useful = 2 * ROWS * p * p / 2 * nblocks * 2  # two tasks
        print(f"p = {p}: two tasks of {nblocks} blocks of {ROWS} rows, median of {args.repeats}")
        for (name, threads), values in times.items():
            t = statistics.median(values)
            print(f"  {name:18s} {threads} thread{'s' if threads > 1 else ' '} {t:7.3f} s "
                  f"{useful / t / 1e9:6.1f} GFlop/s")


if __name__ == "__main__":
    main()
