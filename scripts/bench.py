"""Benchmark streamproj against its floors and its peers, in one run.

    python scripts/bench.py                      # 1M, 2M, 4M, 8M x 100 float32 + 500k x 1000
    python scripts/bench.py --sizes 2M --no-wide # quicker
    python scripts/bench.py --baseline ../old    # also time another checkout's fit/project
    python scripts/bench.py --memory-limit-gb 2  # also the out-of-core run (8M rows = 3.2 GB)
    python scripts/bench.py --wide               # embeddings: 300k x 1000, 150k x 2048 float32,
                                                 # 100k x 4096 float16 (10,000-row chunks)

Datasets are Zarr groups of the seed's "coin" (float32 X, int8 y, zstd, 100,000-row
chunks) made once under --data and reused. Every measurement runs in a fresh
Python process, so its peak RSS is its own, and times one call after an untimed
set-up (data loading for in-memory peers is not timed). The machine is noisy, so
repetitions are interleaved: round r runs every task once before round r+1
starts, and each figure is the median over --repeats rounds (>= 5). Ratios are
the median of the per-round ratios (both sides measured back to back).
Peers: scikit-learn LDA ("eigen", "svd") and IncrementalPCA fed chunk by chunk,
dask-ml PCA. Floors: dask reading and summing the Zarr, reading it and writing
an (n x 2) float64 array to Zarr, and numpy's X.T @ X in memory. ``--baseline DIR``
times ``fit`` and ``project`` of the streamproj source tree in DIR too (as
``fit@base``), in the same rounds, so a change is compared with the code before it; each
baseline task runs beside its own, the two swapping order every round.
``--wide`` runs the embedding-sized cases instead of the n x 100 matrix: there the
Gram floor is numpy's float64 ``X.T @ X`` of the same rows in memory on both cores
(2 BLAS threads), the fit's floor is read + Gram (target ratio <= 1.05), and for
float16 at p = 4,096 the fit's peak RSS is set against the pooled summary plus two
chunks (target <= 2x) and against an idle worker that made the fit's set-up and no fit.
Needs the extras: pip install -e ".[all,bench]".
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHUNK_BYTES = 40 * 10**6  # 100,000 rows x 100 float32 columns


def parse_rows(text):
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * scale)


WIDE_CASES = [(300_000, 1000, "float32"), (150_000, 2048, "float32"), (100_000, 4096, "float16")]
WIDE_CHUNK_ROWS = 10_000


def dataset(data_dir, n, p, dtype="float32", chunk=None):
    from streamproj.demo import write_coin

    if dtype == "float32" and chunk is None:
        path = Path(data_dir) / f"coin_n{n}_p{p}.zarr"
    else:
        path = Path(data_dir) / f"coin_n{n}_p{p}_{dtype}_c{chunk}.zarr"
    if not (path / "zarr.json").exists() or not (path / "y").exists():
        chunk = chunk or max(1000, CHUNK_BYTES // (4 * p))
        t = time.perf_counter()
        if dtype == "float32":
            write_coin(path, n, p, chunk_rows=chunk, progress=False)
        else:
            write_coin_as(path, n, p, chunk, dtype)
        print(f"  made {path.name} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return path


def write_coin_as(path, n, p, chunk, dtype):
    """The coin's rows stored in another dtype (e.g. float16 embeddings)."""
    import zarr

    from streamproj.demo import coin_chunk

    group = zarr.open_group(str(path), mode="w")
    X = group.create_array("X", shape=(n, p), chunks=(chunk, p), dtype=dtype)
    y = group.create_array("y", shape=(n,), chunks=(chunk,), dtype="int8")
    for start in range(0, n, chunk):
        xb, yb = coin_chunk(start, min(chunk, n - start), p, 0)
        X[start : start + len(yb)] = xb.astype(dtype)
        y[start : start + len(yb)] = yb


# --------------------------------------------------------------- tasks
# Each returns a function to time; setup (e.g. loading into memory) is not timed.
def _open(path):
    import zarr

    g = zarr.open_group(str(path), mode="r")
    return g["X"], g["y"]


def _projector(sp):
    """``sp.BoundaryProjector``, looked up in the set-up, outside the timing.

    ``import streamproj`` is lazy (PEP 562): the first lookup imports the estimator,
    scikit-learn and dask (1.9 s here), which a timed ``sp.BoundaryProjector()`` charged to
    the fit while the floors import dask in their set-up (found 2026-11-25: fits timed after
    commit 492cda2 carry it; a baseline tree from before that commit imports eagerly).
    """
    return sp.BoundaryProjector


def task_read(path, tmp):
    import dask.array as da
    import dask.threaded

    X, _ = _open(path)
    # the threaded scheduler named, as streamproj names it: given none, dask imports
    # distributed to look for a client (0.12-0.20 s in a fresh process, charged to the floor)
    return lambda: da.from_zarr(X).sum().compute(scheduler=dask.threaded.get)


def task_read_direct(path, tmp):
    """The read floor through streamproj's own chunk reader (``streamproj.direct``).

    Each whole chunk decoded straight into the array dask gets, as every pass
    reads local Zarr (zarr's read copies each decoded chunk once more): the
    least a pass that reads this way can take, beside dask + zarr's ``read``.
    """
    import dask.array as da
    import dask.threaded

    from streamproj.direct import direct_reader

    X, _ = _open(path)
    rows = da.from_array(direct_reader(X), chunks=(X.chunks[0], -1), lock=False, asarray=True,
                         fancy=False)
    return lambda: rows.sum().compute(scheduler=dask.threaded.get)


def task_read_write(path, tmp):
    import dask
    import dask.array as da
    import dask.threaded
    import numpy as np

    X, _ = _open(path)

    def run():
        # map_blocks sees whole chunks: slicing first (X[:, :2]) would let dask push the
        # slice into the reader and copy out two columns, which no projection can do.
        rows = da.from_zarr(X)
        Z = rows.map_blocks(lambda b: b[:, :2].astype(np.float64), dtype=np.float64,
                            chunks=(rows.chunks[0], (2,)))
        with dask.config.set(scheduler=dask.threaded.get):  # (see task_read)
            da.to_zarr(Z, str(tmp / "floor.zarr"), overwrite=True)

    return run


def task_gram(path, tmp):
    """Time numpy's float64 X.T @ X of the rows in memory, on both cores (syrk, 2 BLAS threads)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    X, _ = _open(path)
    A = np.asarray(X[:], dtype=np.float64)

    def run():
        with threadpool_limits(limits=os.cpu_count(), user_api="blas"):
            return A.T @ A

    return run


def task_idle(path, tmp):
    """The fit's set-up and no fit: the resident memory a worker holds before its first row.

    The fit's own set-up, estimator looked up: ``import streamproj`` alone is lazy
    (PEP 562) and imports neither scikit-learn nor scipy, which every fit does (an
    idle worker of 153 MB against 270 MB with them, 2026-11-28), so the fit's memory
    above it counted the libraries as the fit's.
    """
    import dask.array  # noqa: F401

    import streamproj as sp

    _open(path)
    _projector(sp)
    return lambda: None


def task_fit(path, tmp):
    import streamproj as sp

    X, y = _open(path)
    projector = _projector(sp)
    return lambda: projector().fit(X, y)


def task_project(path, tmp):
    import streamproj as sp
    from streamproj import jobs

    X, y = _open(path)
    model = sp.BoundaryProjector().fit(X, y)
    return lambda: jobs.project(model, X, tmp / "coords.zarr", y=y, overwrite=True)


def _on_gpu(make):
    """A task run with ``streamproj.gpu.using("cuda")``, warmed up in its set-up.

    CuPy builds its kernels and cuBLAS its handles on first use (seconds on a fresh
    machine): one untimed run over the first rows, on every dask thread, keeps that out
    of the timing.
    """

    def task(path, tmp):
        from streamproj import gpu

        with gpu.using("cuda"):
            make(path, tmp, warm=True)()
            run = make(path, tmp)

        def timed():
            with gpu.using("cuda"):
                return run()

        return timed

    return task


def _fit_gpu(path, tmp, warm=False):
    import streamproj as sp

    X, y = _open(path)
    if warm:
        X, y = X[: 8 * WIDE_CHUNK_ROWS], y[: 8 * WIDE_CHUNK_ROWS]
    projector = _projector(sp)
    return lambda: projector().fit(X, y)


def _project_gpu(path, tmp, warm=False):
    import streamproj as sp
    from streamproj import jobs

    X, y = _open(path)
    if warm:
        X, y = X[: 8 * WIDE_CHUNK_ROWS], y[: 8 * WIDE_CHUNK_ROWS]
    model = sp.BoundaryProjector().fit(X, y)
    return lambda: jobs.project(model, X, tmp / "coords.zarr", y=y, overwrite=True)


def task_fit_cli(path, tmp):
    """What ``streamproj fit INPUT --model MODEL`` runs: the input opened by the store, the model saved."""
    from streamproj import jobs

    def run():
        shutil.rmtree(tmp / "cli-model", ignore_errors=True)
        jobs.fit_model([str(path)], tmp / "cli-model")

    return run


def task_project_cli(path, tmp):
    """What ``streamproj project MODEL INPUT --output OUT`` runs, from a model saved in the set-up."""
    import streamproj as sp
    from streamproj import jobs

    model = path.parent / "models" / path.name  # fitted once per dataset, kept beside it
    if not model.exists():
        X, y = _open(path)
        sp.BoundaryProjector().fit(X, y).save(model)

    def run():
        jobs.project_model(model, [str(path)], tmp / "cli.zarr", overwrite=True)

    return run


def task_run(path, tmp):
    from streamproj import jobs
    from streamproj.config import load_config

    config = tmp / "job.toml"
    config.write_text(
        f'[input]\npath = "{path}"\n[model]\npath = "{tmp / "model"}"\nmode = "fit"\n'
        f'[output]\npath = "{tmp / "run.zarr"}"\noverwrite = true\n'
    )
    return lambda: jobs.run_job(load_config(config), progress=False)


def _in_memory(path):
    import numpy as np

    X, y = _open(path)
    return np.asarray(X[:]), np.asarray(y[:])


def task_lda_eigen(path, tmp):
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    X, y = _in_memory(path)
    return lambda: LinearDiscriminantAnalysis(solver="eigen").fit(X, y)


def task_lda_svd(path, tmp):
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    X, y = _in_memory(path)
    return lambda: LinearDiscriminantAnalysis(solver="svd").fit(X, y)


def task_ipca(path, tmp):
    from sklearn.decomposition import IncrementalPCA

    X, _ = _open(path)
    step = X.chunks[0]

    def run():
        ipca = IncrementalPCA(n_components=2)
        for start in range(0, X.shape[0], step):
            ipca.partial_fit(X[start : start + step])

    return run


def task_daskml_pca(path, tmp):
    import dask.array as da
    from dask_ml.decomposition import PCA

    X, _ = _open(path)
    return lambda: PCA(n_components=2).fit(da.from_zarr(X))


def _frame_data():
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1_000_000, 50))
    y = (X[:, 0] + rng.normal(size=X.shape[0]) > 0).astype(np.int64)
    return X, y


def task_fit_numpy(path, tmp):
    """1M x 50 float64 in memory as a numpy array (the DataFrame case's reference)."""
    import streamproj as sp

    X, y = _frame_data()
    projector = _projector(sp)
    return lambda: projector().fit(X, y)


def task_fit_pandas(path, tmp):
    """The same rows as a pandas DataFrame and Series."""
    import pandas as pd

    import streamproj as sp

    X, y = _frame_data()
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    labels = pd.Series(y, name="label")
    projector = _projector(sp)
    return lambda: projector().fit(frame, labels)


# The out-of-core run keeps its model and coordinates here, for the correctness check.
KEEP = None


def task_fit_save(path, tmp):
    import streamproj as sp

    X, y = _open(path)
    projector = _projector(sp)

    def run():
        shutil.rmtree(KEEP / "model", ignore_errors=True)
        projector().fit(X, y).save(KEEP / "model")

    return run


def task_project_saved(path, tmp):
    import streamproj as sp
    from streamproj import jobs

    X, y = _open(path)
    model = sp.load(KEEP / "model")
    return lambda: jobs.project(model, X, KEEP / "coords.zarr", y=y, overwrite=True)


def task_check(path, tmp):
    """Compare the out-of-core results with in-memory computations on the same rows."""
    import numpy as np
    import zarr
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    import streamproj as sp

    def two_pass_lda(X, y):
        """Independent in-memory float64 reference: exact class means, then centred scatter."""
        classes = np.unique(y)
        means = np.array([X[y == k].mean(axis=0, dtype=np.float64) for k in classes])
        counts = np.array([np.sum(y == k) for k in classes])
        scatter = np.zeros((X.shape[1],) * 2)
        for start in range(0, len(X), 250_000):
            block, labels = X[start : start + 250_000], y[start : start + 250_000]
            d = block.astype(np.float64) - means[np.searchsorted(classes, labels)]
            scatter += d.T @ d
        coef = np.linalg.solve(scatter / len(X), means[1] - means[0])
        intercept = -coef @ (means[0] + means[1]) / 2 + np.log(counts[1] / counts[0])
        return coef, intercept

    def run():
        X, y = _in_memory(path)
        model = sp.load(KEEP / "model")
        coef, intercept = two_pass_lda(X, y)
        rows = np.sort(np.random.default_rng(0).choice(len(X), 10_000, replace=False))
        sample = X[rows].astype(np.float64)
        ours, exact = model.decision_function(sample), sample @ coef + intercept
        ref = LinearDiscriminantAnalysis(solver="eigen").fit(X, y)  # float32, as users would run it
        coords = zarr.open_group(str(KEEP / "coords.zarr"), mode="r")["projection"]
        written = coords.get_orthogonal_selection((rows, slice(None)))
        expected = (sample - model.center_) @ model.components_.T
        return {
            "decision_max_rel_err_vs_two_pass": float(np.max(np.abs(ours - exact)) / np.max(np.abs(exact))),
            "predict_agreement_vs_sklearn": float(np.mean(model.predict(sample) == ref.predict(sample))),
            "coords_max_abs_err_vs_in_memory": float(np.max(np.abs(written - expected))),
            "rows_checked": int(rows.size),
        }

    return run


TASKS = {name[5:]: fn for name, fn in globals().items() if name.startswith("task_")}
TASKS.update(fit_cuda=_on_gpu(_fit_gpu), project_cuda=_on_gpu(_project_gpu))
GPU_TASKS = {"fit": "fit_cuda", "project": "project_cuda"}


def worker(task, path, repeats, limit_gb, keep):
    """Runs in its own process: time one task, report JSON on stdout."""
    global KEEP
    KEEP = Path(keep) if keep else None
    if limit_gb:
        limit = int(limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    tmp = Path(tempfile.mkdtemp(prefix="streamproj-bench-"))
    result = {"task": task, "path": str(path), "limit_gb": limit_gb}
    try:
        run = TASKS[task](Path(path), tmp)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            value = run()
            times.append(time.perf_counter() - t)
        result.update(ok=True, seconds=times, median=statistics.median(times))
        if isinstance(value, dict):
            result["check"] = value
    except MemoryError:
        result.update(ok=False, error="MemoryError")
    except ImportError as exc:
        result.update(ok=False, error=f"not installed: {exc.name}")
    except Exception as exc:  # a peer failing is a result to report, not a crash
        result.update(ok=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


def peak_rss_mb():
    """Peak resident memory of this process itself (MB).

    ``getrusage(...).ru_maxrss`` would not do: Linux carries it over fork and exec,
    so a worker would report its parent's peak. ``VmHWM`` belongs to the process image.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(task, path, repeats, limit_gb=None, keep=None, source=None):
    """Run one task in a fresh process; ``source`` is another streamproj tree to import."""
    cmd = [sys.executable, __file__, "--task", task, "--path", str(path), "--repeats", str(repeats)]
    if limit_gb:
        cmd += ["--limit-gb", str(limit_gb)]
    if keep:
        cmd += ["--keep", str(keep)]
    # every task, the floors and a baseline tree's included, with malloc as the streamproj
    # command sets it (STREAMPROJ_MALLOC=system: glibc's defaults for all of them)
    from streamproj._launch import allocator_environ

    env = {**os.environ, **allocator_environ()}
    if source:
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"task": task, "path": str(path), "ok": False, "limit_gb": limit_gb,
                "error": f"exit {proc.returncode}: {tail[:120]}", "peak_rss_mb": None}
    return json.loads(lines[-1])


def _combine(name, runs):
    """One result from the per-round runs of a task: all times, their median, the largest RSS."""
    ok = [r for r in runs if r.get("ok")]
    out = dict(runs[-1])
    out["task"] = name
    if len(ok) == len(runs):
        out["seconds"] = [r["median"] for r in ok]
        out["median"] = statistics.median(out["seconds"])
    else:
        out.update(ok=False, error=next(r.get("error") for r in runs if not r.get("ok")))
    rss = [r["peak_rss_mb"] for r in runs if r.get("peak_rss_mb")]
    out["peak_rss_mb"] = max(rss) if rss else None
    return out


def fmt_rows(n, p):
    return f"{n / 1e6:g}M x {p}" if n >= 1e6 else f"{n / 1e3:g}k x {p}"


def _beside_baselines(tasks, n, p, baseline, device="cpu"):
    """Plan items for ``tasks``; fit and project each followed by the baseline's (if any).

    Side by side, a task and its baseline swap order every round (see main). With
    ``device="cuda"`` fit and project are each followed by their GPU run too.
    """
    plan = []
    for task in tasks:
        plan.append((task, task, n, p, None))
        if baseline and task in ("fit", "fit_cli", "project", "project_cli"):
            plan.append((f"{task}@base", task, n, p, baseline))
        if device == "cuda" and task in GPU_TASKS:
            plan.append((GPU_TASKS[task], GPU_TASKS[task], n, p, None))
    return plan


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / "bench-data"), help="where datasets are made and reused")
    ap.add_argument("--sizes", default="1M,2M,4M,8M", help="row counts of the n x 100 datasets")
    ap.add_argument("--target", default="2M", help="the size the ratio targets refer to")
    ap.add_argument("--no-wide", action="store_true", help="skip the 500k x 1000 case")
    ap.add_argument("--wide", action="store_true",
                    help="run the embedding cases (300k x 1000, 150k x 2048 float32, 100k x 4096 "
                         "float16, 10,000-row chunks) instead of the n x 100 matrix")
    ap.add_argument("--wide-columns", default=None, metavar="P[,P]",
                    help="with --wide, only the cases of these widths (e.g. 2048,4096)")
    ap.add_argument("--peers-up-to", default="2M", help="largest size to run the in-memory peers on")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="another streamproj source tree whose fit/project are timed in the same rounds")
    ap.add_argument("--only", default=None, metavar="TASKS",
                    help="run only these tasks (comma-separated names, e.g. read,fit,fit@base)")
    ap.add_argument("--frames", action="store_true",
                    help="also fit 1M x 50 from a pandas DataFrame vs the same numpy array")
    ap.add_argument("--memory-limit-gb", type=float, default=None,
                    help="also run fit/project (and peers) on the largest size under this address-space limit")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: also time fit and project on the GPU (fit_cuda, project_cuda) "
                         "beside the CPU's, in the same rounds")
    ap.add_argument("--json", default=None, help="write all results here (default DATA/results.json)")
    ap.add_argument("--task", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--only-out-of-core", action="store_true",
                    help="skip the timing matrix; run only the memory-limited run and its check")
    ap.add_argument("--limit-gb", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--keep", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.task:
        worker(args.task, args.path, args.repeats, args.limit_gb, args.keep)
        return

    sizes = [parse_rows(s) for s in args.sizes.split(",")]
    target = parse_rows(args.target)
    peers_max = parse_rows(args.peers_up_to)
    cases = [(n, 100) for n in sizes] + ([] if args.no_wide else [(500_000, 1000)])
    print(f"streamproj benchmark: {os.cpu_count()} cores, {args.repeats} interleaved rounds",
          file=sys.stderr)
    plan = []  # (name, task, n, p, source tree or None)
    paths = {}
    if args.wide:
        cases = []
        widths = None if args.wide_columns is None else {int(w) for w in args.wide_columns.split(",")}
        for n, p, dtype in WIDE_CASES:
            if widths is not None and p not in widths:
                continue
            paths[(n, p)] = dataset(args.data, n, p, dtype, WIDE_CHUNK_ROWS)
            # the fits away from the Gram floor's heavy BLAS run (right after it, a fit was
            # measured 3-8 % slower than the same code later in the round, 2026-11-24), and
            # the baseline's fit right after this tree's (their order swaps every round)
            tasks = ["read", "read_direct", "fit", "read_write", "project", "project_cli", "gram"]
            if dtype != "float32":
                tasks.append("idle")
            plan += _beside_baselines(tasks, n, p, args.baseline, args.device)
    for n, p in [] if args.only_out_of_core else cases:
        tasks = ["read", "read_direct", "read_write", "fit", "project"]
        if n == target or p != 100:
            tasks += ["fit_cli", "gram", "run", "ipca", "daskml_pca"]
        if n <= peers_max or p != 100:
            tasks += ["lda_eigen", "lda_svd"]
        plan += _beside_baselines(tasks, n, p, args.baseline if n == target else None,
                                  args.device)
    if args.frames and not args.only_out_of_core:
        plan += [(task, task, 1_000_000, 50, None) for task in ("fit_numpy", "fit_pandas")]
    paths.update({(n, p): dataset(args.data, n, p) for _, _, n, p, _ in plan
                  if p in (100, 1000) and (n, p) not in paths})
    if args.only:
        keep = set(args.only.split(","))
        plan = [item for item in plan if item[0] in keep]
    runs = {item: [] for item in plan}
    for round_ in range(args.repeats):
        order = list(plan)
        if round_ % 2:  # a task and its baseline run side by side, each first every other round
            for i, item in enumerate(order[:-1]):
                if order[i + 1][0] == f"{item[0]}@base":
                    order[i], order[i + 1] = order[i + 1], order[i]
        for item in order:
            name, task, n, p, source = item
            r = measure(task, paths.get((n, p), ""), 1, source=source)
            runs[item].append(r)
            shown = f"{r['median']:.2f} s" if r.get("ok") else r.get("error")
            print(f"  round {round_ + 1}: {fmt_rows(n, p):>12} {name:<12} {shown}  "
                  f"(peak {r['peak_rss_mb'] or 0:.0f} MB)", file=sys.stderr)
    results = []
    for item, item_runs in runs.items():
        name, _, n, p, _ = item
        results.append({**_combine(name, item_runs), "rows": n, "cols": p})
    if args.memory_limit_gb:
        n, p = max(sizes), 100
        path = dataset(args.data, n, p)
        keep = Path(args.data) / "out-of-core"
        keep.mkdir(exist_ok=True)
        for task in ("fit_save", "project_saved", "lda_eigen", "ipca"):
            r = measure(task, path, 1, args.memory_limit_gb, keep)
            r.update(rows=n, cols=p)
            results.append(r)
            shown = f"{r['median']:.2f} s" if r.get("ok") else r.get("error")
            print(f"  {fmt_rows(n, p):>12} {task:<13} under {args.memory_limit_gb:g} GB: {shown} "
                  f"(peak {r['peak_rss_mb'] or 0:.0f} MB)", file=sys.stderr)
        r = measure("check", path, 1, None, keep)
        r.update(rows=n, cols=p)
        results.append(r)
        print(f"  out-of-core check: {json.dumps(r.get('check', r.get('error')))}", file=sys.stderr)

    out = Path(args.json or Path(args.data) / "results.json")
    out.write_text(json.dumps(results, indent=1))
    report(results, target, sizes, args.memory_limit_gb, args.wide)


def _gpu_rows(get, ratio, n, p, label):
    """The GPU's ratios, where fit_cuda and project_cuda ran."""
    if not get("fit_cuda", n, p):
        return []
    return [
        (f"fit on the GPU / read floor ({label})", ratio(get("fit_cuda", n, p), get("read", n, p)), ""),
        (f"fit on the GPU / fit on the CPU ({label})", ratio(get("fit_cuda", n, p), get("fit", n, p)), ""),
        (f"project on the GPU / read+write floor ({label})",
         ratio(get("project_cuda", n, p), get("read_write", n, p)), ""),
        (f"project on the GPU / on the CPU ({label})",
         ratio(get("project_cuda", n, p), get("project", n, p)), ""),
    ]


def report(results, target, sizes, limit_gb, wide=False):
    def get(task, n, p=100, limited=None):
        for r in results:
            if r["task"] == task and r["rows"] == n and r["cols"] == p and r.get("limit_gb") == limited:
                return r
        return None

    print("\n| data | task | median time | peak RSS |")
    print("|---|---|---:|---:|")
    for r in results:
        t = f"{r['median']:.2f} s" if r.get("ok") else r.get("error", "failed")
        limit = f" (limit {r['limit_gb']:g} GB)" if r.get("limit_gb") else ""
        rss = f"{r['peak_rss_mb']:.0f} MB" if r.get("peak_rss_mb") else "-"
        print(f"| {fmt_rows(r['rows'], r['cols'])} | {r['task']}{limit} | {t} | {rss} |")

    def ratio(a, b, *more):
        """Median of the per-round ratios (each pair measured back to back).

        ``b`` and ``more`` are summed round by round (the read + Gram floor).
        """
        below = [b, *more]
        if a and a.get("ok") and all(r and r.get("ok") for r in below):
            floors = [sum(t) for t in zip(*(r.get("seconds", [r["median"]]) for r in below),
                                          strict=False)]
            return statistics.median(x / y for x, y in zip(a.get("seconds", [a["median"]]), floors,
                                                           strict=False))
        return None

    rows = []
    for n, p, dtype in WIDE_CASES if wide else []:
        label = f"{fmt_rows(n, p)} {dtype}"
        rows += [
            (f"fit / (read + float64 Gram floor) ({label})",
             ratio(get("fit", n, p), get("read", n, p), get("gram", n, p)), "<= 1.05"),
            (f"fit / read floor ({label})", ratio(get("fit", n, p), get("read", n, p)), ""),
            (f"fit / (read through streamproj.direct + Gram floor) ({label})",
             ratio(get("fit", n, p), get("read_direct", n, p), get("gram", n, p)), ""),
            (f"read through streamproj.direct / read floor ({label})",
             ratio(get("read_direct", n, p), get("read", n, p)), ""),
            (f"project / read+write floor ({label})",
             ratio(get("project", n, p), get("read_write", n, p)), "<= 1.2"),
            (f"project from a saved model (the CLI's) / read+write floor ({label})",
             ratio(get("project_cli", n, p), get("read_write", n, p)), ""),
        ]
        # each task beside its run from the baseline tree, where there is one
        for task, said in (("fit", "fit now / fit baseline"),
                           ("project", "project now / project baseline"),
                           ("fit_cli", "streamproj fit (command), now / baseline"),
                           ("project_cli", "project from a saved model, now / baseline")):
            if get(f"{task}@base", n, p):
                rows.append((f"{said} ({label})",
                             ratio(get(task, n, p), get(f"{task}@base", n, p)), ""))
                if task == "fit":
                    rows.append((f"fit baseline / (read + Gram) ({label})",
                                 ratio(get("fit@base", n, p), get("read", n, p),
                                       get("gram", n, p)), ""))
        rows += _gpu_rows(get, ratio, n, p, label)
        fit, idle = get("fit", n, p), get("idle", n, p)
        if dtype != "float32" and fit and fit.get("peak_rss_mb"):
            budget = (8 * p * p + 2 * WIDE_CHUNK_ROWS * p * 2) / 2**20  # pooled summary + 2 chunks
            rows.append((f"fit peak RSS / (pooled summary + 2 chunks = {budget:.0f} MB) ({label})",
                         fit["peak_rss_mb"] / budget, "<= 2"))
            if idle and idle.get("peak_rss_mb"):
                rows.append((f"fit peak RSS above an idle worker ({idle['peak_rss_mb']:.0f} MB) / "
                             f"(pooled summary + 2 chunks) ({label})",
                             (fit["peak_rss_mb"] - idle["peak_rss_mb"]) / budget, ""))
    for p in () if wide else (100, 1000):
        n = target if p == 100 else 500_000
        if not get("fit", n, p):
            continue
        label = fmt_rows(n, p)
        rows += [
            (f"fit / read floor ({label})", ratio(get("fit", n, p), get("read", n, p)), "<= 1.3"),
            (f"fit / read through streamproj.direct ({label})",
             ratio(get("fit", n, p), get("read_direct", n, p)), ""),
            (f"streamproj fit (command: opened, fitted, saved) / read floor ({label})",
             ratio(get("fit_cli", n, p), get("read", n, p)), ""),
            (f"read through streamproj.direct / read floor ({label})",
             ratio(get("read_direct", n, p), get("read", n, p)), ""),
            (f"fit / LDA eigen in memory ({label})", ratio(get("fit", n, p), get("lda_eigen", n, p)), "<= 0.25"),
            (f"fit / LDA svd in memory ({label})", ratio(get("fit", n, p), get("lda_svd", n, p)), "<= 0.1"),
            (f"fit / numpy X.T@X in memory ({label})", ratio(get("fit", n, p), get("gram", n, p)), ""),
            (f"project / read+write floor ({label})", ratio(get("project", n, p), get("read_write", n, p)), "<= 1.2"),
            (f"run (fit+project) / IncrementalPCA ({label})", ratio(get("run", n, p), get("ipca", n, p)), "< 1"),
            (f"run (fit+project) / dask-ml PCA ({label})", ratio(get("run", n, p), get("daskml_pca", n, p)), ""),
        ]
    for n, p in () if wide else [(target, 100), (500_000, 1000)]:
        rows += _gpu_rows(get, ratio, n, p, fmt_rows(n, p))
    if get("fit@base", target):
        label = fmt_rows(target, 100)
        rows += [
            (f"fit / read floor, baseline tree ({label})",
             ratio(get("fit@base", target), get("read", target)), ""),
            (f"fit now / fit baseline ({label})", ratio(get("fit", target), get("fit@base", target)), "<= 1.1"),
            (f"project now / project baseline ({label})",
             ratio(get("project", target), get("project@base", target)), "<= 1.1"),
        ]
    if get("fit_cli@base", target):
        rows.append((f"streamproj fit (command), now / baseline ({fmt_rows(target, 100)})",
                     ratio(get("fit_cli", target), get("fit_cli@base", target)), ""))
    if get("fit_pandas", 1_000_000, 50):
        rows.append(("fit pandas DataFrame / numpy array (1M x 50 float64)",
                     ratio(get("fit_pandas", 1_000_000, 50), get("fit_numpy", 1_000_000, 50)), "<= 1.2"))
    small, large = min(sizes), max(sizes)
    a, b = get("fit", small), get("fit", large)
    if a and b and a.get("peak_rss_mb") and b.get("peak_rss_mb"):
        rows.append((f"fit peak RSS {fmt_rows(large, 100)} / {fmt_rows(small, 100)}",
                     b["peak_rss_mb"] / a["peak_rss_mb"], "<= 1.15"))
    for mid in sizes:
        if small < mid < large and get("fit", mid) and a and a.get("peak_rss_mb"):
            rows.append((f"fit peak RSS {fmt_rows(mid, 100)} / {fmt_rows(small, 100)}",
                         get("fit", mid)["peak_rss_mb"] / a["peak_rss_mb"], "<= 1.15"))
    checks = [r for r in results if r["task"] == "check"]
    if checks and checks[0].get("ok"):
        c = checks[0]["check"]
        print(f"\nOut-of-core ({fmt_rows(checks[0]['rows'], 100)} float32 = "
              f"{checks[0]['rows'] * 400 / 1e9:.1f} GB under a {limit_gb:g} GB address-space limit), "
              f"checked on {c['rows_checked']:,} random rows against in-memory results: decision "
              f"max rel. error vs a two-pass float64 LDA {c['decision_max_rel_err_vs_two_pass']:.1e}, "
              f"prediction agreement with scikit-learn LDA {c['predict_agreement_vs_sklearn']:.2%}, "
              f"written coords max abs. error {c['coords_max_abs_err_vs_in_memory']:.1e}.")
    print("\n| ratio | measured | target |")
    print("|---|---:|---|")
    for name, value, goal in rows:
        shown = f"{value:.2f}" if value is not None else "n/a"
        print(f"| {name} | {shown} | {goal} |")


if __name__ == "__main__":
    main()
