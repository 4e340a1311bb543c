"""Where pass 1's core-seconds go on a Zarr dataset: decompression, cast/shift, BLAS, the rest, merges.

    python scripts/profile_pass1.py DATA.zarr                  # this tree
    PYTHONPATH=../old python scripts/profile_pass1.py DATA.zarr # another tree (before a change)

Each part is timed (CPU seconds of the process, so that other work on
the machine does not count) on one thread over every chunk (BLAS limited to one thread,
as pass 1 runs under dask): reading and decompressing a chunk from Zarr; the
fused shift-and-cast into float64 blocks alone; the Gram accumulation alone
on those blocks, the way this tree does it (``_add_gram`` where it exists,
else numpy's ``block.T @ block`` added into the product); the rest of a
chunk's summary (shift sampling, labels, finishing: the whole
``ClassStats.from_rows`` minus the two parts before); and the merges. Then
one real ``fit`` with dask's threads: its wall time, its process CPU time
and the core-seconds left idle (cores x wall - CPU); and the wall time of the
solve alone (``fit_stats`` on that fit's summary), which is part of the fit.
"""

import argparse
import os
import time

import numpy as np
import zarr
from threadpoolctl import threadpool_limits


def clock():
    """CPU seconds of this process (zarr decompresses on its own threads).

    The parts stay right when other work shares the cores; nothing else runs here meanwhile.
    """
    return time.process_time()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="Zarr group with X and y")
    args = ap.parse_args()

    import streamproj as sp
    from streamproj import stats

    group = zarr.open_group(args.data, mode="r")
    X, y = group["X"], group["y"]
    step = X.chunks[0]
    parts = {"decompress": 0.0, "cast/shift": 0.0, "BLAS (Gram)": 0.0, "rest of chunk": 0.0,
             "merge": 0.0}
    add_gram = getattr(stats, "_add_gram", None)
    gram_buffer = getattr(stats, "gram_buffer", None)  # trees since the column panels
    summaries = []
    with threadpool_limits(limits=1, user_api="blas"):
        for start in range(0, X.shape[0], step):
            t = clock()
            rows, labels = X[start : start + step], y[start : start + step]
            parts["decompress"] += clock() - t
            p = rows.shape[1]
            shift = rows[:: max(1, len(rows) // 1024)].mean(axis=0, dtype=np.float64)
            t = clock()
            for _ in stats.centred_blocks(rows, shift, 2):
                pass
            cast = clock() - t
            parts["cast/shift"] += cast
            product = np.zeros((p + 2, p + 2), order="F" if add_gram else "C")
            extra = (gram_buffer(p + 2),) if gram_buffer else ()
            t = clock()
            blas_time = 0.0
            for _, _, block in stats.centred_blocks(rows, shift, 2):
                t0 = clock()
                if add_gram:
                    add_gram(product, block, *extra)
                else:
                    product += block.T @ block
                blas_time += clock() - t0
            parts["BLAS (Gram)"] += blas_time
            t = clock()
            summaries.append(stats.ClassStats.from_rows(rows, labels))
            parts["rest of chunk"] += max(0.0, clock() - t - cast - blas_time)
        t = clock()
        total = summaries[0]
        for s in summaries[1:]:
            total = total + s
        parts["merge"] = clock() - t
    cores = os.cpu_count()
    c0, t0 = time.process_time(), time.perf_counter()
    model = sp.BoundaryProjector().fit(X, y)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    sp.BoundaryProjector().fit_stats(model.stats_)  # the solve alone, from the summary
    solve = time.perf_counter() - t0
    print(f"{args.data}: {X.shape[0]} x {X.shape[1]} {X.dtype}, {step}-row chunks, "
          f"streamproj from {os.path.dirname(sp.__file__)}")
    print("| part (one thread) | core-seconds |")
    print("|---|---:|")
    for name, seconds in parts.items():
        print(f"| {name} | {seconds:.2f} |")
    print(f"| sum of parts | {sum(parts.values()):.2f} |")
    print(f"| fit on {cores} threads: wall | {wall:.2f} |")
    print(f"| fit: process CPU | {cpu:.2f} |")
    print(f"| fit: idle core-seconds ({cores} x wall - CPU) | {cores * wall - cpu:.2f} |")
    print(f"| of the fit's wall: the solve from the summary (wall) | {solve:.2f} |")


if __name__ == "__main__":
    main()
