"""Benchmark the pictures: PNG and HTML view against reading OUT's arrays once.

Writes a synthetic projection (two overlapping classes, ``coords`` float64
n x 2, ``y`` and ``predicted`` int8, 100,000-row chunks) and times, interleaved,
(a) the floors: reading once, one chunk at a time with the same reader the
pictures use (``streamproj.plot.reading.stream`` over the arrays opened as the
pictures open them: local chunks decoded whole by ``streamproj.direct``),
exactly the arrays each picture needs -- the view colours rows by ``y``, so
its floor reads the coordinates and ``y``; the PNG also reports the
classifier's accuracy and agreement, so its floor reads the coordinates, ``y``
and ``predicted`` (the coordinates alone are shown for reference, and the
PNG's arrays read by zarr in runs of chunks, as the pictures read them before
stop 38); (b) the static PNG, as
``streamproj plot OUT --output FIG.png`` makes it; (c) the HTML view; (d) the
peer, datashader's categorical count of the same rows from a dask DataFrame
(when datashader is installed); then the peak RSS of the PNG and of the view in fresh processes at two sizes.

    python scripts/bench_plot.py [--rows 10000000] [--repeats 5] [--dir /tmp/bench-plot]

Last, the time to find the K-class boundaries of one panel at K = 10, 100 and 1,000.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zarr


def write_output(path, n, chunk=100_000, seed=0):
    """A synthetic two-class projection in streamproj's output layout."""
    group = zarr.open_group(str(path), mode="w")
    z = group.create_array("coords", shape=(n, 2), chunks=(chunk, 2), dtype="float64")
    y = group.create_array("y", shape=(n,), chunks=(chunk,), dtype="int8")
    pred = group.create_array("predicted", shape=(n,), chunks=(chunk,), dtype="int8")
    for start in range(0, n, chunk):
        rng = np.random.default_rng([seed, start])
        m = min(chunk, n - start)
        label = (rng.random(m) < 0.5).astype(np.int8)
        block = np.column_stack([rng.normal(size=m) * 0.3 + (label - 0.5) * 0.5,
                                 rng.normal(size=m) * 3.0])
        z[start : start + m] = block
        y[start : start + m] = label
        pred[start : start + m] = (block[:, 0] > 0).astype(np.int8)
    group.attrs.update({
        "streamproj": {"model_id": "bench", "components": np.eye(2).tolist(),
                       "center": [0.0, 0.0], "coef": [[1.0, 0.0]], "intercept": [0.0],
                       "classes": [0, 1], "center_mode": "mean", "shrinkage": None,
                       "source": "synthetic"},
        "axis_names": ["signed distance to boundary", "boundary-parallel PC 1"],
        "complete": True,
    })
    return path


FLOORS = {"coords": ("z",), "view": ("z", "y"), "png": ("z", "y", "predicted"),
          "png zarr": ("z", "y", "predicted")}


def read_once(out, names=("z",), reader="picture"):
    """Read the named arrays of ``out`` once, block by block, as the pictures read them.

    ``reader="picture"``: opened as the pictures open them (``store.CheckedArray``,
    whose local chunks streamproj's reader decodes whole, one chunk a read);
    ``"zarr"``: the bare Zarr arrays, read by zarr in runs of chunks (the pictures'
    reads before stop 38).
    """
    from streamproj import store
    from streamproj.plot.reading import Blocks, coordinates, stream

    group = zarr.open_group(str(out), mode="r")
    arrays = {"z": coordinates(group), "y": group["y"], "predicted": group["predicted"]}
    if reader == "picture":
        arrays = {k: store.CheckedArray(v, k) for k, v in arrays.items()}
    total = [0.0]

    def touch(block, _start):
        total[0] += sum(float(block[k][0].sum()) for k in names)

    stream(Blocks({k: arrays[k] for k in names}), touch)


def png(out, dest):
    from streamproj.plot import plot_output

    plot_output(out, dest)


def html(out, dest):
    from streamproj.plot import view_output

    view_output(out).save(dest)


def datashader_png(out, dest, width=420, height=420):
    """The peer: datashader's categorical count of the same rows, shaded and saved as a PNG.

    Its streaming path: a dask DataFrame over OUT's arrays (chunk by
    chunk), ``Canvas.points(..., count_cat)``, ``shade``; limits as the
    PNG's (0.1-99.9 % quantiles of a sample) so that both count the same
    cells. Datashader's import (about 1 s) is outside the timing.
    """
    import dask.array as da
    import dask.dataframe as dd
    import datashader as ds
    import datashader.transfer_functions as tf

    from streamproj.plot.reading import Blocks, coordinates, robust_limits, sample_rows

    group = zarr.open_group(str(out), mode="r")
    z, y = coordinates(group), group["y"]
    limits = robust_limits(sample_rows(Blocks({"z": z}), "z"))
    zd = da.from_zarr(z)
    frame = dd.from_dask_array(da.concatenate([zd, da.from_zarr(y)[:, None].astype("f8")], axis=1),
                               columns=["x", "y", "c"])
    frame["c"] = frame["c"].astype("int8").astype("category").cat.as_known()
    canvas = ds.Canvas(plot_width=width, plot_height=height, x_range=tuple(limits[0]),
                       y_range=tuple(limits[1]))
    tf.shade(canvas.points(frame, "x", "y", ds.count_cat("c"))).to_pil().save(dest)


def _child(kind, out, dest):
    {"png": png, "html": html, "read": lambda o, _d: read_once(o, FLOORS["png"])}[kind](out, dest)
    from bench import peak_rss_mb  # VmHWM: ru_maxrss would carry the parent's peak over exec

    print(json.dumps({"peak_rss_mib": peak_rss_mb()}))


def peak_rss(kind, out, dest):
    res = subprocess.run([sys.executable, __file__, "--child", kind, str(out), str(dest)],
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])["peak_rss_mib"]


def main(argv=None):
    from streamproj._launch import tune_allocator

    # malloc as the streamproj command sets it, for the job and the floors alike
    # (STREAMPROJ_MALLOC=system: glibc's defaults for both)
    tune_allocator()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--small", type=int, default=1_000_000, help="rows of the smaller RSS run")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/streamproj-bench-plot")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    big, small = d / f"out-{args.rows}.zarr", d / f"out-{args.small}.zarr"
    for path, n in ((big, args.rows), (small, args.small)):
        if not path.exists():
            write_output(path, n)
    html(big, d / "warm.html")  # imports and first-touch costs (fonts too) out of the timings
    png(big, d / "warm.png")
    jobs = {f"read {k}": (lambda names=names, k=k: read_once(
        big, names, "zarr" if k.endswith("zarr") else "picture")) for k, names in FLOORS.items()}
    jobs.update({"png": lambda: png(big, d / "b.png"), "html": lambda: html(big, d / "b.html")})
    try:  # the peer, where it is installed (pip install datashader)
        import datashader  # noqa: F401

        datashader_png(big, d / "warm-ds.png")
        jobs["datashader"] = lambda: datashader_png(big, d / "ds.png")
    except ImportError:
        print("datashader not installed: the peer's line is skipped (pip install datashader)")
    times = {name: [] for name in jobs}
    for _ in range(args.repeats):
        for name, fn in jobs.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    rss = {f"{kind} {n:,}": peak_rss(kind, path, d / f"rss.{kind}.{'png' if kind == 'png' else 'html'}")
           for kind in ("png", "html") for path, n in ((small, args.small), (big, args.rows))}
    size = (d / "b.html").stat().st_size

    def line(label, name, floor=None):
        ratio = f"  = {med[name] / med[floor]:.2f} x {floor}" if floor else ""
        print(f"  {label:47s} {med[name]:.2f} s{ratio}  (all: {', '.join(f'{t:.2f}' for t in times[name])})")

    print(f"rows {args.rows:,}, {args.repeats} interleaved repeats, medians:")
    line("read coordinates once (reference)", "read coords")
    line("read coordinates + y once (view's floor)", "read view")
    line("read coordinates + y + predicted (PNG floor)", "read png")
    line("the same read by zarr in runs of chunks (reference)", "read png zarr")
    line("PNG", "png", "read png")
    line("PNG against zarr's read", "png", "read png zarr")
    line("HTML view", "html", "read view")
    if "datashader" in med:
        line("peer: datashader count_cat over dask (PNG)", "datashader", "read view")
    print(f"  HTML file {size / 2**20:.1f} MiB")
    print("  peak RSS (fresh process): " + ", ".join(f"{k} rows {v:.0f} MiB" for k, v in rss.items()))
    print("  K-class boundaries in one panel (winning polygons), median of 5: " + ", ".join(
        f"K = {k:,} {boundaries(k) * 1e3:.0f} ms" for k in (10, 100, 1_000)))
    return 0


def boundaries(k, repeats=5):
    """Median seconds to find the tie segments of ``k`` random linear scores in one panel."""
    import numpy as np

    from streamproj.plot.picture import _tie_segments

    rng = np.random.default_rng(k)
    A, b = rng.normal(size=(2, k)), rng.normal(size=k)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        _tie_segments(((-3.0, 3.0), (-2.0, 2.0)), A, b)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
