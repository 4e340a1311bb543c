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

import uuid

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize

from .errors import BadValuesError, InputError, StreamprojError
from .progress import compute_with_progress
from .stats import ClassStats, as_labels, centred_blocks, check_finite, check_matrix

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "accumulate",
    "as_dask_labels",
    "as_dask_rows",
    "project_blocks",
    "store_projection",
]

# Rows per chunk for in-memory input: about 64 MiB of float64 work per chunk.
DEFAULT_CHUNK_BYTES = 64 * 2**20
_MERGE_FAN_IN = 4


def _default_rows(n_features):
    return max(1, DEFAULT_CHUNK_BYTES // (8 * max(1, n_features)))


def _row_slices(n_rows, chunk_rows):
    """Row chunks of ``chunk_rows`` (the last one shorter), as a dask chunks tuple."""
    chunk_rows = max(1, int(chunk_rows))
    sizes = (chunk_rows,) * (n_rows // chunk_rows)
    return sizes + ((n_rows % chunk_rows,) if n_rows % chunk_rows else ()) or (0,)


def _in_memory_dask(X, row_chunks, kind):
    """A dask array whose chunks are views of an in-memory numpy array (no copy).

    ``da.from_array`` copies the whole array first (``x.copy()``, to guard
    against later mutation; measured 1.48x the data at peak for a fit), and a
    ``np.memmap`` would be read into memory by that copy. Views of the rows
    keep the peak to what each chunk task allocates.
    """
    name = f"streamproj-{kind}-{uuid.uuid4().hex}"
    starts = np.concatenate([[0], np.cumsum(row_chunks)]).astype(int)
    tail = (0,) * (X.ndim - 1)
    dsk = {(name, i, *tail): X[starts[i] : starts[i + 1]] for i in range(len(row_chunks))}
    chunks = (tuple(row_chunks), *((s,) for s in X.shape[1:]))
    return da.Array(dsk, name, chunks, meta=X[:0])


def as_dask_rows(X, chunk_rows=None, name="X"):
    """X as a 2-D dask array chunked by rows only (all columns in one chunk).

    Parameters
    ----------
    X : numpy array, dask array or chunked array-like (e.g. ``zarr.Array``)
    chunk_rows : int, optional
        Rows per chunk. By default dask and chunked inputs keep their own row
        chunks and in-memory arrays get about 64 MiB chunks. In-memory arrays
        are not copied: each chunk is a view of their rows.
    """
    if isinstance(X, da.Array):
        arr = X
    else:
        native = getattr(X, "chunks", None)
        if not hasattr(X, "shape") or not hasattr(X, "dtype"):
            X = np.asarray(X)
            native = None
        check_matrix(X, name)
        if isinstance(X, np.ndarray):
            rows = chunk_rows or _default_rows(X.shape[1])
            return _in_memory_dask(X, _row_slices(X.shape[0], rows), "rows")
        if isinstance(native, tuple) and all(isinstance(c, int) for c in native):
            chunks = (native[0], -1)
        else:
            chunks = (chunk_rows or _default_rows(X.shape[1]), -1)
        arr = da.from_array(X, chunks=chunks, lock=False, asarray=True, fancy=False)
    check_matrix(arr, name)
    if np.isnan(arr.shape[0]):
        arr = arr.compute_chunk_sizes()
    target = (chunk_rows or arr.chunks[0], -1)
    if chunk_rows or len(arr.chunks[1]) > 1:
        arr = arr.rechunk(target)
    return arr


def as_dask_labels(y, row_chunks, names=("X", "y")):
    """y as a 1-D dask array whose chunks line up with the rows of X (``row_chunks``).

    In-memory labels are checked whole first (:func:`~streamproj.stats.as_labels`:
    missing labels name their row, object arrays become one plain dtype) and
    then cut into views, without a copy when they are plain numpy labels.
    """
    xname, yname = names
    n_rows = int(sum(row_chunks))
    if not isinstance(y, da.Array):
        if not hasattr(y, "shape") or not hasattr(y, "dtype"):
            y = np.asarray(y)
        if y.ndim == 1 and y.shape[0] != n_rows:
            msg = f"{yname} has {y.shape[0]} labels but {xname} has {n_rows} rows; they must match"
            raise InputError(msg)
        if y.ndim != 1:
            msg = f"{yname} must be 1-D with one label per row; got shape {tuple(y.shape)}"
            raise InputError(msg)
        if isinstance(y, np.ndarray):
            return _in_memory_dask(as_labels(y, 0, yname), tuple(row_chunks), "labels")
        y = da.from_array(y, chunks=(row_chunks,), lock=False, asarray=True, fancy=False)
    if y.ndim != 1:
        msg = f"{yname} must be 1-D with one label per row; got shape {tuple(y.shape)}"
        raise InputError(msg)
    if np.isnan(y.shape[0]):
        y = y.compute_chunk_sizes()
    if y.shape[0] != n_rows:
        msg = f"{yname} has {y.shape[0]} labels but {xname} has {n_rows} rows; they must match"
        raise InputError(msg)
    if y.chunks[0] != tuple(row_chunks):
        y = y.rechunk((row_chunks,))
    return y


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

