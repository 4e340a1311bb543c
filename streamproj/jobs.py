"""Whole jobs on stored data: project to Zarr (and, in the CLI, fit and update).

Each job glues the pure pieces together — :mod:`streamproj.store` for files,
:mod:`streamproj.passes` for the Dask passes, the estimator for the math — so
the command line stays a thin parser around these functions.
"""

import datetime as _dt

import numpy as np

from . import store
from .passes import as_dask_labels, as_dask_rows, project_blocks, store_projection

__all__ = ["project", "projection_arrays"]


def _uniform_rows(X):
    """Row chunks all of one size (but the last), as a Zarr chunk grid needs."""
    first = X.chunks[0][0]
    if all(c == first for c in X.chunks[0][:-1]) and X.chunks[0][-1] <= first:
        return X
    return X.rechunk((first, -1))


def projection_arrays(model, X, y=None):
    """Lazy output arrays of pass 2: coords, decision, predicted (and y).

    Returns
    -------
    dict of name to (dask array, dimension names)
    """
    X = _uniform_rows(as_dask_rows(X, model.chunk_rows))
    coords = project_blocks(X, model.center_, model.components_)
    coef, intercept = model.coef_, model.intercept_
    if coef.shape[0] == 1:
        # coords[:, 0] is w·(x - c) with c on the boundary, so the decision value is ‖coef‖·z0.
        decision = coords[:, 0] * np.linalg.norm(coef)
        index = (decision > 0).astype(np.intp)
        decision_dims = ("row",)
    else:
        decision = X.astype(np.float64) @ coef.T + intercept
        index = decision.argmax(axis=1)
        decision_dims = ("row", "class")
    classes = np.asarray(model.classes_)
    predicted = index.map_blocks(classes.take, dtype=classes.dtype)
    arrays = {
        "coords": (coords, ("row", "component")),
        "decision": (decision, decision_dims),
        "predicted": (predicted, ("row",)),
    }
    if y is not None:
        arrays["y"] = (as_dask_labels(y, X.chunks[0], X.shape[0]), ("row",))
    return arrays


def project(model, X, out, y=None, overwrite=False, progress=False, source=None):
    """Pass 2: write ``coords`` (n×d), ``decision``, ``predicted`` and ``y`` to a Zarr group.

    The group is chunked like the input rows and carries the axes, centre,
    classes and the model's identity in its attributes; its arrays have named
    dimensions so ``xarray.open_zarr(out)`` gives a labelled dataset. Nothing
    appears at ``out`` unless the whole pass succeeds.
    """
    model._check_fitted()
    arrays = projection_arrays(model, X, y)
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
            "written": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
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

