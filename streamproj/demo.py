"""``streamproj demo``: the seed's "coin" data, end to end.

The coin is a flattened Gaussian disk: wide in every direction but one, thin
along the boundary normal, with the two classes on its two faces (labels by
side, noisy near the boundary) and the whole disk offset from the origin.
Standard PCA looks at the wide directions and squashes the faces together;
the boundary-preserving projection keeps the normal as its first axis.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import zarr

from . import jobs, solvers, store
from .errors import OutputExistsError, StreamprojError
from .estimator import load
from .plot import is_ours

__all__ = ["check_demo_folder", "coin_chunk", "describe", "run_demo", "write_coin"]


def _coin_geometry(p, seed):
    rng = np.random.default_rng([seed, 0])
    rotation, _ = np.linalg.qr(rng.normal(size=(p, p)))
    scales = np.concatenate([[0.35], np.linspace(3.0, 1.0, p - 1)])
    offset = 4.0 + rng.normal(scale=2.0, size=p)
    return rotation, scales, offset


def coin_chunk(start, rows, p, seed=0, noise=0.25):
    """Rows ``start .. start+rows`` of the coin: float32 X and int labels (reproducible by chunk)."""
    rotation, scales, offset = _coin_geometry(p, seed)
    rng = np.random.default_rng([seed, 1, start])
    latent = rng.normal(size=(rows, p)) * scales
    y = (latent[:, 0] + noise * scales[0] * rng.normal(size=rows) > 0).astype(np.int8)
    X = latent @ rotation.T + offset
    return X.astype(np.float32), y


def write_coin(path, n_rows, p, chunk_rows=50_000, seed=0, progress=False):
    """Write the coin to a Zarr group (X float32, y int8), one chunk at a time."""
    from tqdm.auto import tqdm

    group = zarr.open_group(str(path), mode="w")
    # described first: a demo stopped while writing leaves data the next demo may replace
    group.attrs["description"] = f"{_DESCRIPTION}: {n_rows} x {p}, seed {seed}"
    X = group.create_array("X", shape=(n_rows, p), chunks=(chunk_rows, p), dtype="float32",
                           dimension_names=("row", "feature"))
    y = group.create_array("y", shape=(n_rows,), chunks=(chunk_rows,), dtype="int8",
                           dimension_names=("row",))
    for start in tqdm(range(0, n_rows, chunk_rows), desc="demo: writing data", unit="chunk",
                      disable=not progress, file=sys.stderr):
        rows = min(chunk_rows, n_rows - start)
        xb, yb = coin_chunk(start, rows, p, seed)
        X[start : start + rows] = xb
        y[start : start + rows] = yb
    return group


_DESCRIPTION = "streamproj demo coin"


def _is_demo_data(path):
    """True for a Zarr group :func:`write_coin` wrote (its description says so)."""
    try:
        meta = json.loads((path / "zarr.json").read_bytes())
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    description = (meta.get("attributes") or {}).get("description") if isinstance(meta, dict) else None
    return isinstance(description, str) and description.startswith(_DESCRIPTION)


def check_demo_folder(directory):
    """Refuse, before anything is written, a DIR where the demo would replace what it did not write.

    The demo writes five things into DIR; each may already be there only as
    an earlier demo left it (so the demo can run again in the same folder).
    Anything else in DIR is left alone; DIR itself must not be a Zarr store.
    """
    store.check_writable_location(directory, "demo folder")
    directory = Path(store.expand_user(directory))
    if directory.exists() and not directory.is_dir():
        msg = f"demo {directory} is a file; give the demo a folder"
        raise OutputExistsError(msg)
    if any((directory / name).exists() for name in ("zarr.json", ".zgroup", ".zarray")):
        msg = f"demo {directory} is a Zarr store; give the demo a folder of its own"
        raise OutputExistsError(msg)
    data, model_dir, coords, figure, view_file = _targets(directory)
    left = "it was left untouched: choose another folder for the demo"
    if data.is_symlink() or (data.exists() and not _is_demo_data(data)):
        msg = f"demo {data} exists and is not data an earlier demo wrote; {left}"
        raise OutputExistsError(msg)
    inside = store.foreign_inside(data, {"": {"X", "y"}}) if data.is_dir() else None
    if inside is not None:
        msg = f"demo {data} also holds {inside.as_posix()}, which the demo did not write; {left}"
        raise OutputExistsError(msg)
    if model_dir.is_symlink() or (model_dir.exists() and not (
            model_dir.is_dir() and (_is_demo_model(model_dir, data)
                                    or not any(model_dir.iterdir())))):
        msg = f"demo {model_dir} exists and is not a model an earlier demo fitted there; {left}"
        raise OutputExistsError(msg)
    kind = "foreign" if coords.is_symlink() else store.local_kind(coords)
    if kind == "foreign" or (kind == "streamproj" and not _is_demo_output(coords, data, model_dir)):
        msg = f"demo {coords} exists and is not a projection an earlier demo wrote there; {left}"
        raise OutputExistsError(msg)
    inside = store.foreign_inside(coords, store.OUTPUT_NODES) if kind == "streamproj" else None
    if inside is not None:
        msg = f"demo {coords} also holds {inside.as_posix()}, which streamproj did not write; {left}"
        raise OutputExistsError(msg)
    for path, what in ((figure, "a figure"), (view_file, "a view")):
        if path.is_symlink() or path.is_dir() or (path.exists() and not is_ours(path)):
            msg = f"demo {path} exists and is not {what} streamproj wrote; {left}"
            raise OutputExistsError(msg)


def _is_demo_model(model_dir, data):
    """True for a model fitted on exactly this folder's demo data (what an earlier demo left)."""
    try:
        meta = store.read_record(model_dir).meta
    except (StreamprojError, OSError):
        return False
    return _only_source(meta.get("sources"), data)


def _is_demo_output(coords, data, model_dir):
    """True for a projection of this folder's demo data by its demo model."""
    try:
        meta = store.open_output(coords).attrs.get("streamproj", {})
    except (StreamprojError, OSError):
        return False
    made_by = meta.get("model_path")
    if not (_only_source(meta.get("sources"), data) and isinstance(made_by, str)):
        return False
    try:
        return Path(store.expand_user(made_by)).resolve() == model_dir.resolve()
    except StreamprojError:  # a recorded ~user that is no user here: not this folder's model
        return False


def _only_source(entries, data):
    urls = [e.get("url") for e in entries or [] if isinstance(e, dict)]
    return len(urls) == 1 and isinstance(urls[0], str) and urls[0] == str(data.resolve())


def _targets(directory):
    return (directory / "data.zarr", directory / "model", directory / "projection.zarr",
            directory / "demo.png", directory / "view.html")


def run_demo(directory, n_rows=200_000, p=10, chunk_rows=50_000, seed=0, progress=False):
    """Make the data, fit, project, draw the picture (PNG) and the view (HTML); returns a summary.

    DIR is checked first (:func:`check_demo_folder`): nothing of the user's is replaced.
    """
    store.check_writable_location(directory, "demo folder")  # '' is no folder, not "here"
    directory = Path(store.expand_user(directory))
    with store.storage_errors(f"demo {directory}"):
        check_demo_folder(directory)
        directory.mkdir(parents=True, exist_ok=True)
    data, model_dir, coords, figure, view_file = _targets(directory)
    t0 = time.perf_counter()
    write_coin(data, n_rows, p, chunk_rows, seed, progress)
    t1 = time.perf_counter()
    jobs.fit_model(data, model_dir, overwrite=True, progress=progress)
    t2 = time.perf_counter()
    jobs.project_model(model_dir, data, coords, overwrite=True, progress=progress)
    t3 = time.perf_counter()
    model = load(model_dir)
    from .plot import draw_output, save_figure, view_output

    fig = draw_output(coords, model, compare_pca="raw")
    save_figure(fig, figure)
    t4 = time.perf_counter()
    view_output(coords).save(view_file)
    t5 = time.perf_counter()
    done = fig.streamproj_summary  # the picture's own pass counted these
    accuracy, agreement = done.correct / done.labelled, done.agree / done.predicted
    n = model.stats_.n_samples
    summary = {
        "rows": n,
        "features": p,
        "classes": {str(c): int(k) for c, k in zip(model.classes_, model.stats_.counts, strict=True)},
        "accuracy": float(accuracy),
        "picture_agreement": float(agreement),
        "reconstruction_mse_boundary_preserving": model.reconstruction_error() / n,
        "reconstruction_mse_standard_pca": solvers.reconstruction_error(
            model.stats_, solvers.pca_axes(model.stats_.total), model.stats_.mean) / n,
        "seconds": {"write data": t1 - t0, "fit": t2 - t1, "project": t3 - t2, "picture": t4 - t3,
                    "view": t5 - t4},
        "files": {"data": str(data), "model": str(model_dir), "projection": str(coords),
                  "figure": str(figure), "view": str(view_file)},
    }
    return summary


def describe(summary):
    """The lines ``streamproj demo`` prints for a :func:`run_demo` summary."""
    s = summary
    classes = ", ".join(f"{c}: {k:,}" for c, k in s["classes"].items())
    secs = ", ".join(f"{k} {v:.1f} s" for k, v in s["seconds"].items())
    lines = [
        f"streamproj demo: the 'coin' — {s['rows']:,} rows x {s['features']} features, classes {classes}",
        f"  classifier (LDA) accuracy          {s['accuracy']:.2%}",
        f"  2-D picture agrees with classifier {s['picture_agreement']:.2%} of rows "
        "(boundary = the line z[0] = 0)",
        f"  reconstruction error per row       standard PCA plane "
        f"{s['reconstruction_mse_standard_pca']:.4g} (the least of any plane), "
        f"boundary-preserving plane {s['reconstruction_mse_boundary_preserving']:.4g} "
        "(the least of any plane that keeps the boundary)",
        f"  time                               {secs}",
    ]
    lines += [f"  {name:<34} {path}" for name, path in s["files"].items()]
    return "\n".join(lines)
