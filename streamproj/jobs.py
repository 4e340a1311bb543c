"""Whole jobs on stored data: project to Zarr (and, in the CLI, fit and update).

Each job glues the pure pieces together — :mod:`streamproj.store` for files,
:mod:`streamproj.passes` for the Dask passes, the estimator for the math — so
the command line stays a thin parser around these functions.
"""

import contextlib
import hashlib
from pathlib import Path

import numpy as np
from scipy.linalg import subspace_angles

from . import store
from .cluster import dask_cluster, require_sbatch
from .errors import (
    ClusterError,
    IncompatibleStatsError,
    InputError,
    OutputExistsError,
    SourceChangedError,
    StorageError,
    StreamprojError,
)
from .estimator import BoundaryProjector, load
from .passes import accumulate, as_dask_labels, as_dask_rows, project_blocks, store_projection
from .solvers import scores_to_index, validate_shrinkage

__all__ = [
    "dask_cluster",
    "fit_model",
    "model_info",
    "project",
    "project_model",
    "projection_arrays",
    "run_job",
    "update_model",
]

# Rows read from each end of the merged range to notice a rewritten source.
_EDGE_ROWS = 256


@contextlib.contextmanager
def _context(prefix):
    """Prefix user errors with where they happened (the file and array)."""
    try:
        yield
    except StreamprojError as exc:
        text = str(exc)
        # Errors about the output, the disk or the cluster already say where they happened.
        if text.startswith(prefix) or isinstance(exc, StorageError | OutputExistsError | ClusterError):
            raise
        raise type(exc)(f"{prefix}: {text}") from None


def _uniform_rows(X):
    """Row chunks all of one size (but the last), as a Zarr chunk grid needs."""
    first = X.chunks[0][0]
    if all(c == first for c in X.chunks[0][:-1]) and X.chunks[0][-1] <= first:
        return X
    return X.rechunk((first, -1))


def projection_arrays(model, X, y=None, names=("X", "y")):
    """Lazy output arrays of pass 2: coords, decision, predicted (and y).

    Returns
    -------
    dict of name to (dask array, dimension names)
    """
    X = _uniform_rows(as_dask_rows(X, model.chunk_rows, names[0]))
    coords = project_blocks(X, model.center_, model.components_, names[0],
                            bfloat16=getattr(model, "bfloat16", False))
    coef = model.coef_
    if coef.shape[0] == 1:
        # coords[:, 0] is w·(x - c) with c on the boundary, so the decision value is ‖coef‖·z0.
        decision = coords[:, 0] * np.linalg.norm(coef)
        index = (decision > 0).astype(np.intp)
        decision_dims = ("row",)
    else:
        # Centred forms: X @ coef.T + intercept itself cancels digits far from the origin.
        decision = model.decision_function(X)
        index = scores_to_index(model._scores(X))
        decision_dims = ("row", "class")
    classes = np.asarray(model.classes_)
    predicted = index.map_blocks(classes.take, dtype=classes.dtype)
    arrays = {
        "coords": (coords, ("row", "component")),
        "decision": (decision, decision_dims),
        "predicted": (predicted, ("row",)),
    }
    if y is not None:
        arrays["y"] = (as_dask_labels(y, X.chunks[0], names), ("row",))
    return arrays


def project(model, X, out, y=None, overwrite=False, progress=False, source=None,
            names=("X", "y")):
    """Pass 2: write ``coords`` (n×d), ``decision``, ``predicted`` and ``y`` to a Zarr group.

    The group is chunked like the input rows and carries the axes, centre,
    classes and the model's identity in its attributes; its arrays have named
    dimensions so ``xarray.open_zarr(out)`` gives a labelled dataset. Nothing
    appears at ``out`` unless the whole pass succeeds.
    """
    model._check_fitted()
    arrays = projection_arrays(model, X, y, names)
    rows = arrays["coords"][0].chunks[0][0]
    attrs = {
        "streamproj": {
            "model_id": model.model_id_,
            "components": model.components_.tolist(),
            "center": model.center_.tolist(),
            "coef": model.coef_.tolist(),
            "intercept": model.intercept_.tolist(),
            "classes": np.asarray(model.classes_).tolist(),
            "center_mode": model.center,
            "shrinkage": model.shrinkage,
            "source": source,
            "written": store.timestamp(),
        },
        "axis_names": _axis_names(model),
    }
    with store.output_group(out, overwrite=overwrite, attrs=attrs) as group:
        sources, targets = [], []
        for name, (arr, dims) in arrays.items():
            chunks = (rows, *tuple(arr.shape[1:]))
            targets.append(store.create_output_array(group, name, arr.shape, chunks, arr.dtype, dims))
            sources.append(arr.rechunk(chunks) if arr.chunks[0][0] != rows else arr)
        store_projection(sources, targets, progress=progress, total=len(arrays["coords"][0].chunks[0]))
    return out


def _axis_names(model):
    d = model.components_.shape[0]
    if model.coef_.shape[0] == 1:
        first = ["signed distance to boundary"]
    else:
        first = [f"Fisher direction {i + 1}" for i in range(min(d, len(model.classes_) - 1))]
    rest = [f"boundary-parallel PC {i + 1}" for i in range(d - len(first))]
    return first + rest



# ------------------------------------------------------------ stored jobs
def _source_key(url, x, y):
    return {"url": store.normalise(url), "x": x, "y": y}


def _edge_fingerprint(X, y, rows):
    """Digest of shape, dtype and the first and last merged rows of a source.

    Reading two small slices (not the data) notices a source that was
    rewritten or truncated; ``verify=True`` re-reads all merged rows instead.
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{X.shape[1]}|{X.dtype}|{y.dtype}|{rows}".encode())
    k = min(_EDGE_ROWS, rows)
    for part in (X[:k], X[rows - k : rows], y[:k], y[rows - k : rows]):
        h.update(np.ascontiguousarray(np.asarray(part)).tobytes())
    return h.hexdigest()


def _open(url, x, y, require_y=True, allow_missing_chunks=False):
    with _context(str(url)):
        return store.open_input(url, x, y, require_y=require_y,
                                allow_missing_chunks=allow_missing_chunks)


def _names(url, x, y):
    return (f"{url}/{x}", f"{url}/{y}")


def _boundary_file(params):
    """The boundary file named in ``params``, if the boundary is one."""
    boundary = (params or {}).get("boundary")
    return str(boundary) if isinstance(boundary, str | Path) else None


def _check_boundary_file(path, X, names):
    """A boundary file's coefficients must match the data; the error names the file."""
    coef = store.read_boundary(path)["coef"]
    p = coef.shape[-1]
    if p != X.shape[1]:
        msg = (f"{path}: the boundary has {p} coefficients per row but {names[0]} has "
               f"{X.shape[1]} features; give a boundary fitted on these features")
        raise InputError(msg)


def fit_model(input_url, model_path, x="X", y="y", params=None, overwrite=False,
              progress=False, allow_missing_chunks=False):
    """Fit a new model from a Zarr input and save it; returns a report dict."""
    store.check_disjoint(("input", input_url), ("boundary file", _boundary_file(params)),
                         ("model", model_path))
    with store.model_lock(model_path):
        existing = _existing_model(model_path)
        if existing is not False and not overwrite:
            msg = (f"model {model_path} exists; use 'streamproj update' to merge new rows, "
                   "or --overwrite to refit from scratch")
            raise OutputExistsError(msg)
        X, Y = _open(input_url, x, y, allow_missing_chunks=allow_missing_chunks)
        names = _names(input_url, x, y)
        if _boundary_file(params):
            _check_boundary_file(_boundary_file(params), X, names)
        model = BoundaryProjector(**(params or {}), progress=progress)
        with _context(str(input_url)):
            model.fit_stats(accumulate(X, Y, model.summary_detail(), progress=progress,
                                       names=names, max_summary_memory=model.max_summary_memory,
                                       bfloat16=model.bfloat16))
        source = {**_source_key(input_url, x, y), "rows": int(X.shape[0]),
                  "edges": _edge_fingerprint(X, Y, X.shape[0]), "merged": store.timestamp(),
                  "batches": [_batch_record(model.stats_, 0, X.shape[0])]}
        history = [{"event": "fit", "time": store.timestamp(), "rows_added": int(X.shape[0]),
                    "n_samples": model.stats_.n_samples, "source": source["url"]}]
        # Refitting over an existing model writes a new version of it (atomic, like an update).
        version = store.write_model(model_path, model.to_meta({"sources": [source], "history": history}),
                                    model.stats_, model._solution(),
                                    base=existing or None)
    return {"status": "fitted", "model": str(model_path), "version": version,
            "rows": int(X.shape[0]), "classes": model.classes_.tolist(),
            "counts": model.stats_.counts.tolist(), "model_id": model.model_id_}


def _existing_model(model_path):
    """The live version of the model at ``model_path``; False when nothing is there.

    Something that is there but is no readable model raises (so --overwrite
    never replaces it).
    """
    if store.is_local(model_path):
        local = Path(str(model_path)).expanduser()
        if not local.exists() or (local.is_dir() and not any(local.iterdir())):
            return False
    try:
        meta, _stats, _solution = store.read_model(model_path)
    except StreamprojError:
        if not store.is_local(model_path) and not store.model_exists(model_path):
            return False
        raise
    return meta["version"]


def _drift(old, new):
    """How far an update moved the model: normal angle and principal angles, in degrees."""
    out = {}
    if old.coef_.shape[0] == 1 and new.coef_.shape[0] == 1:
        # atan2(sine, cosine): arccos of a cosine near 1 loses half the digits of a small angle.
        u, v = old.components_[0], new.components_[0]
        cos = float(u @ v)
        out["normal_angle_deg"] = float(np.degrees(np.arctan2(np.linalg.norm(u - cos * v), cos)))
    elif old.coef_.shape[0] == new.coef_.shape[0]:
        r = min(old.coef_.shape[0] - 1, old.components_.shape[0])
        angles = subspace_angles(old.components_[:r].T, new.components_[:r].T)
        out["boundary_angles_deg"] = sorted(np.degrees(angles).tolist())
    if old.components_.shape == new.components_.shape:
        angles = subspace_angles(old.components_.T, new.components_.T)
        out["axes_angles_deg"] = sorted(np.degrees(angles).tolist())
    return out


def update_model(model_path, input_url, x="X", y="y", progress=False, verify=False,
                 allow_missing_chunks=False, max_summary_memory=None):
    """Merge the rows of a source that the model has not seen; returns a report dict.

    Rows merged before (same resolved URL and arrays, per the model's ledger of
    sources) are skipped, so the same update twice changes nothing and an
    appended array merges only its new rows. A source whose merged rows
    changed is refused with the model untouched.
    """
    store.check_disjoint(("input", input_url), ("model", model_path))
    with store.model_lock(model_path):
        with _context(str(model_path)):
            meta, stats, solution = store.read_model(model_path)
        old = BoundaryProjector.from_saved(meta, stats, solution)
        X, Y = _open(input_url, x, y, allow_missing_chunks=allow_missing_chunks)
        names = _names(input_url, x, y)
        if X.shape[1] != old.n_features_in_:
            msg = (f"{names[0]} has {X.shape[1]} features but model {model_path} was fitted on "
                   f"{old.n_features_in_}")
            raise IncompatibleStatsError(msg)
        rows = as_dask_rows(X, name=names[0])
        labels = as_dask_labels(Y, rows.chunks[0], names)
        key = _source_key(input_url, x, y)
        sources = list(meta.get("sources", []))
        record = next((s for s in sources if all(s[k] == key[k] for k in key)), None)
        start = record["rows"] if record else 0
        if record:
            if X.shape[0] < start:
                msg = (f"{names[0]} has {X.shape[0]} rows but {start} were merged before: rows were "
                       "removed; refit the model from its sources")
                raise SourceChangedError(msg)
            if _edge_fingerprint(X, Y, start) != record["edges"]:
                msg = (f"the first {start} rows of {names[0]} (merged on {record['merged']}) have "
                       "changed since; refit the model, or write new rows to a new array")
                raise SourceChangedError(msg)
            if verify:
                _verify_rows(old, rows, labels, record, names, progress)
        n_new = int(X.shape[0]) - start
        if n_new == 0:
            return {"status": "unchanged", "model": str(model_path), "version": meta["version"],
                    "rows_added": 0,
                    "message": f"{input_url}: all {start} rows were merged before; model unchanged"}
        with _context(str(input_url)):
            batch = accumulate(rows[start:], labels[start:], old.summary_detail(), progress=progress,
                               row_offset=start, names=names, max_summary_memory=max_summary_memory,
                               bfloat16=old.bfloat16, n_classes=old.stats_.n_classes)
        new = BoundaryProjector.from_saved(meta, stats, solution)
        with _context(str(input_url)):
            new.partial_fit_stats(batch)
        added_classes = sorted(set(new.classes_.tolist()) - set(old.classes_.tolist()))
        drift = _drift(old, new)
        entry = {**key, "rows": int(X.shape[0]), "edges": _edge_fingerprint(X, Y, X.shape[0]),
                 "merged": store.timestamp(),
                 "batches": [*(record or {}).get("batches", []), _batch_record(batch, start, X.shape[0])]}
        sources = [s for s in sources if s is not record] + [entry]
        history = [*meta.get("history", []), {
            "event": "update", "time": store.timestamp(), "source": key["url"], "rows_added": n_new,
            "n_samples": new.stats_.n_samples, "new_classes": added_classes, **drift}]
        version = store.write_model(model_path, new.to_meta({"sources": sources, "history": history}),
                                    new.stats_, new._solution(), base=meta["version"])
    return {"status": "updated", "model": str(model_path), "version": version,
            "rows_added": n_new, "n_samples": new.stats_.n_samples,
            "new_classes": added_classes, **drift}


def _batch_record(stats, start, stop):
    """The row range of a merged batch and the fingerprint of its summary."""
    return {"start": int(start), "stop": int(stop), "fingerprint": stats.fingerprint()}


def _verify_rows(model, rows, labels, record, names, progress):
    """Re-read every merged row range and check it summarises exactly as when it was merged.

    Pass 1 is deterministic for a given chunking (a fixed merge tree, one BLAS
    thread per task), so an unchanged range gives the same fingerprint bit for bit.
    """
    for batch in record.get("batches", []):
        a, b = batch["start"], batch["stop"]
        with _context(names[0]):
            again = accumulate(rows[a:b], labels[a:b], model.summary_detail(), progress=progress,
                               row_offset=a, names=names)
        if again.fingerprint() != batch["fingerprint"]:
            msg = (f"rows {a}..{b - 1} of {names[0]} (merged on {record['merged']}) have changed "
                   "since; refit the model from its sources")
            raise SourceChangedError(msg)


def _verify_rows(model, rows, labels, record, names, progress):
    """Re-read every merged row range and check it summarises exactly as when it was merged.

    Pass 1 is deterministic for a given chunking (a fixed merge tree, one BLAS
    thread per task), so an unchanged range gives the same fingerprint bit for bit.
    """
    for batch in record.get("batches", []):
        a, b = batch["start"], batch["stop"]
        with _context(names[0]):
            again = accumulate(rows[a:b], labels[a:b], model.summary_detail(), progress=progress,
                               row_offset=a, names=names)
        if again.fingerprint() != batch["fingerprint"]:
            msg = (f"rows {a}..{b - 1} of {names[0]} (merged on {record['merged']}) have changed "
                   "since; refit the model from its sources")
            raise SourceChangedError(msg)


def project_model(model_path, input_url, out, x="X", y="y", overwrite=False, progress=False,
                  allow_missing_chunks=False):
    """Project a Zarr input with a saved model into a Zarr output group."""
    store.check_disjoint(("input", input_url), ("model", model_path), ("output", out))
    with _context(str(model_path)):
        model = load(model_path)
    X, Y = _open(input_url, x, y, require_y=False, allow_missing_chunks=allow_missing_chunks)
    with _context(str(input_url)):
        project(model, X, out, y=Y, overwrite=overwrite, progress=progress,
                source=_source_key(input_url, x, y)["url"], names=_names(input_url, x, y))
    return {"status": "projected", "output": str(out), "rows": int(X.shape[0]),
            "n_components": int(model.components_.shape[0]), "model_id": model.model_id_}


def model_info(model_path):
    """The JSON-ready description of a saved model."""
    meta, stats, solution = store.read_model(model_path)
    info = {k: meta.get(k) for k in ("model_id", "version", "streamproj_version", "saved",
                                     "classes", "counts", "n_features", "n_components",
                                     "summary_detail")}
    info["n_samples"] = stats.n_samples
    params = meta.get("params", {})
    info["shrinkage"] = params.get("shrinkage")
    info["center"] = params.get("center")
    coef = solution["coef"]
    info["boundary"] = {
        "source": "LDA" if params.get("boundary") is None else params["boundary"].get("source"),
        "coef": coef.tolist(),
        "intercept": solution["intercept"].tolist(),
        "unit_normal": (coef[0] / np.linalg.norm(coef[0])).tolist() if coef.shape[0] == 1 else None,
    }
    info["components"] = solution["components"].tolist()
    info["center_point"] = solution["center"].tolist()
    info["sources"] = [{k: v for k, v in s.items() if k != "edges"} for s in meta.get("sources", [])]
    info["history"] = meta.get("history", [])
    return info


def model_exists(model_path):
    """True when ``model_path`` holds a readable model."""
    return store.model_exists(model_path)


def _check_job_paths(config):
    """No location of a job may overlap another it writes (named by config key)."""
    inp, mod, out = config.input, config.model, config.output
    with _context(config.source):
        store.check_disjoint(("[input] path", inp.path), ("[model] boundary", mod.boundary),
                             ("[output] input", out.input), ("[model] path", mod.path),
                             ("[output] path", out.path))


def run_job(config, progress=None, max_summary_memory=None):
    """A whole scheduled job from a :class:`~streamproj.config.JobConfig`: fit or update, then project."""
    show = config.run.progress if progress is None else progress
    inp, mod, out = config.input, config.model, config.output
    _check_job_paths(config)
    if config.dask.slurm is not None and config.dask.scheduler is None:
        require_sbatch(config.source)
    reports = []
    with dask_cluster(config.dask.scheduler, config.dask.slurm, config.dask.timeout):
        mode = mod.mode
        if mode == "auto":
            mode = "update" if model_exists(mod.path) else "fit"
        if mode == "fit":
            params = {"n_components": mod.n_components,
                      "shrinkage": validate_shrinkage(mod.shrinkage),
                      "center": mod.center, "boundary": mod.boundary,
                      "keep_class_scatter": mod.keep_class_scatter,
                      "max_summary_memory": max_summary_memory}
            reports.append(fit_model(inp.path, mod.path, inp.x, inp.y, params,
                                     overwrite=mod.mode == "fit", progress=bool(show),
                                     allow_missing_chunks=inp.allow_missing_chunks))
        else:
            reports.append(update_model(mod.path, inp.path, inp.x, inp.y, progress=bool(show),
                                        allow_missing_chunks=inp.allow_missing_chunks,
                                        max_summary_memory=max_summary_memory))
        if out.path:
            reports.append(project_model(mod.path, out.input or inp.path, out.path, inp.x, inp.y,
                                         overwrite=out.overwrite, progress=bool(show),
                                         allow_missing_chunks=inp.allow_missing_chunks))
    return reports
