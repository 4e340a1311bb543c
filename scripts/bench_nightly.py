"""A nightly job over data that arrives as new stores: does its cost follow the new data.

    python scripts/bench_nightly.py                              # 30 nights of 200,000 x 100 float32
    python scripts/bench_nightly.py --nights 10 --rows 50000      # quicker
    python scripts/bench_nightly.py --fit-rows 2000000 --repeats 5  # Parquet vs Zarr fit only: --nights 0

Night i writes ``days/day-i.zarr`` (float32 X in zstd chunks of --chunk-rows rows, int8
y; two Gaussian classes) and runs ``streamproj run nightly.toml``: the model is
fitted on night 1 and updated with only the new store afterwards (the others are
skipped by the ledger, without being read), and the output is appended to in its
own frame (``[output] mode = "append"``; ``--mode auto`` rewrites it past
--reproject-above degrees). Reported: the wall time of each night's job (not the data generation),
night N / night 2, the cost of one forced rewrite of the whole output, and the
largest difference between the final output and a projection of every row in
the frame the output records (must be <= 1e-12, relative to the coordinates' scale).

Then the fit of the same --fit-rows x --features rows from Zarr and from Parquet
(row groups of --chunk-rows), interleaved over --repeats rounds, median ratio.
Prints one JSON object (also written to --json-out).
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _rows(text):
    text = str(text).strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * scale)


def make_batch(seed, n, p):
    """Two Gaussian classes with a shared correlated covariance, float32 rows and int8 labels."""
    import numpy as np

    rng = np.random.default_rng(seed)
    base = np.random.default_rng(0)
    mix = (base.normal(size=(p, p)) / np.sqrt(p) + np.eye(p)).astype(np.float32)
    shift = base.normal(size=p).astype(np.float32)
    y = rng.integers(0, 2, size=n).astype(np.int8)
    X = rng.standard_normal((n, p), dtype=np.float32) @ mix
    X += y[:, None] * shift
    return X, y


def write_store(path, X, y, chunk_rows):
    import zarr

    group = zarr.open_group(str(path), mode="w")
    group.create_array("X", data=X, chunks=(chunk_rows, X.shape[1]))
    group.create_array("y", data=y, chunks=(chunk_rows,))


def night_floor(path, work):
    """The least any update+append of this store's rows can cost, timed just before the job.

    ``read_s``: read and decompress every chunk of X (Dask, as the job reads it);
    ``read_write_s``: the same and write two float64 columns per row to Zarr;
    ``gram_s``: numpy's float64 ``X.T @ X`` of the rows already in memory.
    """
    import dask
    import dask.array as da
    import dask.threaded
    import numpy as np
    import zarr

    X = zarr.open_group(str(path), mode="r")["X"]
    # the threaded scheduler named, as the job names it: given none, dask imports distributed
    # to look for a client (0.12-0.20 s, once a process: the first night's floor)
    with dask.config.set(scheduler=dask.threaded.get):
        t = time.perf_counter()
        da.from_zarr(X).sum().compute()
        read = time.perf_counter() - t
        rows = da.from_zarr(X)
        cols = rows.map_blocks(lambda b: b[:, :2].astype(np.float64), dtype=np.float64,
                               chunks=(rows.chunks[0], (2,)))
        t = time.perf_counter()
        da.to_zarr(cols, str(work / "floor.zarr"), overwrite=True)
        read_write = time.perf_counter() - t
    A = np.asarray(X[:], dtype=np.float64)
    t = time.perf_counter()
    A.T @ A
    gram = time.perf_counter() - t
    return {"read_s": round(read, 4), "read_write_s": round(read_write, 4),
            "gram_s": round(gram, 4)}


def nightly(args, work):
    from streamproj import jobs, store
    from streamproj.config import load_config
    from streamproj.estimator import BoundaryProjector

    days = work / "days"
    days.mkdir()
    config = work / "nightly.toml"
    config.write_text(f"""
[input]
paths = ["days/day-*.zarr"]
[model]
path = "model"
mode = "auto"
n_components = 2
shrinkage = "{args.shrinkage}"
[output]
path = "projection.zarr"
mode = "{args.mode}"
{f"reproject_above_degrees = {args.reproject_above}" if args.mode == "auto" else ""}
[run]
progress = false
""")
    nights = []
    for night in range(1, args.nights + 1):
        X, y = make_batch(night, args.rows, args.features)
        write_store(days / f"day-{night:03d}.zarr", X, y, args.chunk_rows)
        del X, y
        floor = night_floor(days / f"day-{night:03d}.zarr", work) if night >= 2 else {}
        t = time.perf_counter()
        report = jobs.run_job(load_config(config), progress=False)
        wall = time.perf_counter() - t
        steps = report["steps"]
        nights.append({"night": night, "wall_s": round(wall, 3),
                       "model": steps[0]["status"], "output": steps[1]["output_action"],
                       "rows_merged": sum(s["rows_merged"] for s in steps[0]["sources"]),
                       "rows_written": steps[1]["rows_written"],
                       "drift_deg": steps[1].get("drift_deg"),
                       "one_read": bool(steps[1].get("one_read")), **floor,
                       "timings": steps[-1].get("timings")})
        print(json.dumps(nights[-1]), file=sys.stderr)
    out = {"nights": nights}
    if args.nights >= 2:
        walls = [n["wall_s"] for n in nights]
        out["night2_s"], out["last_night_s"] = walls[1], walls[-1]
        out["last_over_night2"] = round(walls[-1] / walls[1], 3)
        # the last few nights against nights 2-4, medians (one night is noisy on a shared machine)
        k = min(3, max(1, (len(walls) - 1) // 2))
        out["median_last_over_early"] = round(statistics.median(walls[-k:])
                                              / statistics.median(walls[1:1 + k]), 3)
        later = nights[1:]  # each night's job right after its own floor: interleaved
        out["job_over_read_gram"] = round(statistics.median(
            n["wall_s"] / (n["read_s"] + n["gram_s"]) for n in later), 3)
        out["job_over_read_write_gram"] = round(statistics.median(
            n["wall_s"] / (n["read_write_s"] + n["gram_s"]) for n in later), 3)
        out["nights_one_read"] = sum(n["one_read"] for n in later)
    # one forced rewrite of everything, into a separate output (as auto does past the threshold)
    t = time.perf_counter()
    jobs.project_model(work / "model", str(days / "day-*.zarr"), work / "rewrite.zarr")
    out["forced_rewrite_s"] = round(time.perf_counter() - t, 3)
    out["total_rows"] = args.nights * args.rows
    # the final output against a projection of all rows in its recorded frame
    group = store.open_output(work / "projection.zarr")
    frame = BoundaryProjector.from_saved(*store.read_output_frame(group))
    proj = group["projection"]
    worst, scale, covered = 0.0, 0.0, 0
    import zarr

    for src in group.attrs["streamproj"]["sources"]:
        data = zarr.open_group(src["url"], mode="r")
        for a, b, at in src["ranges"]:
            want = frame.transform(data["X"][a:b])
            got = proj[at:at + b - a]
            worst = max(worst, float(abs(got - want).max()))
            scale = max(scale, float(abs(want).max()))
            covered += b - a
    out["final_rows"] = int(proj.shape[0])
    out["rows_covered_once"] = covered == proj.shape[0] == args.nights * args.rows
    out["final_max_abs_diff"] = worst
    out["final_max_rel_diff"] = worst / scale if scale else 0.0
    out["frame_model_version"] = group.attrs["streamproj"]["model_version"]
    out["history"] = [h["action"] for h in group.attrs["streamproj"]["history"]]
    return out


def parquet_vs_zarr(args, work):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamproj import jobs

    n, p = args.fit_rows, args.features
    zarr_path, parquet_path = work / "fit.zarr", work / "fit.parquet"
    cols = [f"f{i}" for i in range(p)]
    writer = None
    import zarr

    group = zarr.open_group(str(zarr_path), mode="w")
    gx = group.create_array("X", shape=(n, p), chunks=(args.chunk_rows, p), dtype="float32")
    gy = group.create_array("y", shape=(n,), chunks=(args.chunk_rows,), dtype="int8")
    for i, start in enumerate(range(0, n, args.chunk_rows)):
        stop = min(n, start + args.chunk_rows)
        X, y = make_batch(1000 + i, stop - start, p)
        gx[start:stop], gy[start:stop] = X, y
        table = pa.Table.from_pandas(pd.DataFrame(X, columns=cols).assign(label=y), preserve_index=False)
        if writer is None:
            writer = pq.ParquetWriter(parquet_path, table.schema, compression="zstd")
        writer.write_table(table, row_group_size=args.chunk_rows)
    writer.close()
    times = {"zarr": [], "parquet": []}
    for r in range(args.repeats):
        for kind in ("zarr", "parquet") if r % 2 == 0 else ("parquet", "zarr"):
            model = work / f"m-{kind}-{r}"
            t = time.perf_counter()
            if kind == "zarr":
                jobs.fit_model(zarr_path, model)
            else:
                jobs.fit_model(parquet_path, model, label="label", features=",".join(cols))
            times[kind].append(time.perf_counter() - t)
            shutil.rmtree(model)
    ratios = [pq_ / z for pq_, z in zip(times["parquet"], times["zarr"], strict=True)]
    return {"fit_rows": n, "zarr_fit_s": round(statistics.median(times["zarr"]), 3),
            "parquet_fit_s": round(statistics.median(times["parquet"]), 3),
            "parquet_over_zarr": round(statistics.median(ratios), 3),
            "repeats": args.repeats}


def main(argv=None):
    from streamproj._launch import tune_allocator

    # malloc as the streamproj command sets it, for the job and the floors alike
    # (STREAMPROJ_MALLOC=system: glibc's defaults for both)
    tune_allocator()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--rows", type=_rows, default=200_000, help="rows per night")
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--chunk-rows", type=_rows, default=100_000)
    parser.add_argument("--fit-rows", type=_rows, default=2_000_000,
                        help="rows of the Parquet vs Zarr fit (0: skip it)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shrinkage", default="none",
                        help="[model] shrinkage (default: the estimator's, pooled scatter)")
    parser.add_argument("--mode", choices=["append", "auto", "rewrite"], default="append",
                        help="[output] mode of the nightly job (default append: never rewrites)")
    parser.add_argument("--reproject-above", type=float, default=1.0, help="degrees, for --mode auto")
    parser.add_argument("--dir", help="working folder, kept afterwards (default: a temporary one, removed)")
    parser.add_argument("--json-out", help="also write the results here")
    args = parser.parse_args(argv)
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-nightly-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = {"args": vars(args)}
        if args.nights:
            night_dir = work / "nightly"
            night_dir.mkdir()
            result["nightly"] = nightly(args, night_dir)
            if not args.dir:
                shutil.rmtree(night_dir)
        if args.fit_rows:
            fit_dir = work / "fit"
            fit_dir.mkdir()
            result["fit"] = parquet_vs_zarr(args, fit_dir)
            if not args.dir:
                shutil.rmtree(fit_dir)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return result


if __name__ == "__main__":
    main()
