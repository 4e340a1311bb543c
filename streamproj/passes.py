"""The two streaming passes, as Dask graphs.

Pass 1, :func:`accumulate`: one :class:`~streamproj.stats.ClassStats` per row
chunk, merged pairwise up a tree, one ``compute``. Pass 2, :func:`project_blocks`
and :func:`store_projection`: ``(X - c) @ Vᵀ`` and the decision function per chunk,
stored chunk by chunk into array targets (Zarr arrays from :mod:`streamproj.store`).

Inputs may be numpy arrays, dask arrays or any chunked array-like (Zarr): the
rows are read chunk by chunk by the scheduler in charge — the local threaded
scheduler, or a ``dask.distributed`` cluster when a client is active — so no
step holds more than one chunk of rows per worker thread.
"""

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize

from .errors import BadValuesError, InputError, StreamprojError
from .progress import compute_with_progress
from .stats import ClassStats, centred_blocks
from .validation import as_dask_labels, as_dask_rows, check_finite

__all__ = [
    "accumulate",
    "project_blocks",
    "store_projection",
]

_MERGE_FAN_IN = 4


def _chunk_stats(X, y, detail, offset, names):
    """One chunk's summary, or the user error it raised (reported after the merge).

    Errors travel up the merge tree in row order, so the one raised names the
    first bad row of the whole array, whichever chunk failed first in time.
    """
    try:
        return ClassStats.from_rows(X, y, detail, row_offset=offset, names=names)
    except StreamprojError as exc:
        return exc


def _merge_all(*parts):
    for part in parts:  # parts are in row order: the first error is the earliest row's
        if isinstance(part, StreamprojError):
            return part
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _offsets(chunks):
    return np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(int).tolist()


def accumulate(X, y, detail="pooled", chunk_rows=None, progress=False, row_offset=0,
               names=("X", "y")):
    """Pass 1: per-class summaries of all rows, in one streaming Dask computation.

    Parameters
    ----------
    X : array-like of shape (n, p)
        numpy, dask or chunked (Zarr) array.
    y : array-like of shape (n,)
        Labels, same kinds as X.
    detail : {"pooled", "per_class", "fourth"}
        How much scatter to keep (see :class:`~streamproj.stats.ClassStats`).
    chunk_rows : int, optional
        Rows per chunk (default: the input's own chunking, or ~64 MiB).
    progress : bool
        Show a progress bar over chunks on stderr.
    row_offset : int
        Global index of the first row (when X is a slice), for error messages.
    names : (str, str)
        What to call X and y in error messages.

    Returns
    -------
    ClassStats
        Of every row given: merging it into a summary counts its rows again
        each time (duplicate protection is the model directory's ledger).
    """
    X = as_dask_rows(X, chunk_rows, names[0])
    y = as_dask_labels(y, X.chunks[0], names)
    if X.shape[0] == 0:
        msg = f"{names[0]} has no rows"
        raise InputError(msg)
    token = tokenize(X, y, detail, row_offset, names)
    xs = X.to_delayed().ravel()
    ys = y.to_delayed().ravel()
    parts = [
        dask.delayed(_chunk_stats, pure=True)(
            xb, yb, detail, row_offset + off, names, dask_key_name=f"streamproj-summary-{token}-{i}"
        )
        for i, (xb, yb, off) in enumerate(zip(xs, ys, _offsets(X.chunks[0]), strict=True))
    ]
    level = 0
    while len(parts) > 1:
        parts = [
            dask.delayed(_merge_all, pure=True)(
                *parts[i : i + _MERGE_FAN_IN],
                dask_key_name=f"streamproj-merge-{token}-{level}-{i}",
            )
            for i in range(0, len(parts), _MERGE_FAN_IN)
        ]
        level += 1
    (stats,) = compute_with_progress(parts[0], progress=progress, prefix="streamproj-summary-",
                                     total=len(xs), desc="pass 1: summaries")
    if isinstance(stats, StreamprojError):
        raise stats
    return stats


def _project_block(block, center, components, name, row_offset, block_info=None):
    block = np.asarray(block)
    out = np.empty((block.shape[0], components.shape[0]))
    with np.errstate(invalid="ignore", over="ignore"):
        for start, stop, rows in centred_blocks(block, center):
            np.matmul(rows, components.T, out=out[start:stop])
    # Any NaN or inf in a row makes its coordinates non-finite: check the small output.
    if not np.isfinite(out).all():
        first = block_info[0]["array-location"][0][0] if block_info else 0
        check_finite(block, row_offset + first, name)
        msg = f"{name} rows from {row_offset + first} are too large to project in float64"
        raise BadValuesError(msg)
    return out


def project_blocks(X, center, components, name="X", row_offset=0):
    """Lazy ``(X - center) @ componentsᵀ`` in float64, chunk by chunk.

    NaN/inf rows raise :class:`~streamproj.errors.BadValuesError` naming the row.
    """
    center = np.asarray(center, dtype=np.float64)
    components = np.asarray(components, dtype=np.float64)
    if X.shape[1] != components.shape[1]:
        msg = f"{name} has {X.shape[1]} features but the model was fitted on {components.shape[1]}"
        raise InputError(msg)
    return X.map_blocks(
        _project_block,
        center,
        components,
        name,
        row_offset,
        dtype=np.float64,
        chunks=(X.chunks[0], (components.shape[0],)),
        name=f"streamproj-project-{tokenize(X, center, components)}",
        meta=np.empty((0, components.shape[0])),
    )


def store_projection(sources, targets, progress=False, total=None):
    """Pass 2: compute lazy arrays chunk by chunk into array targets (one ``compute``)."""
    stored = da.store(sources, targets, lock=False, compute=False)
    compute_with_progress(stored, progress=progress, prefix="streamproj-project-", total=total,
                          desc="pass 2: projection")

