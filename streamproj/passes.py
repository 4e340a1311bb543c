"""The two streaming passes, as Dask graphs.

Pass 1, :func:`accumulate`: one :class:`~streamproj.stats.ClassStats` per row
chunk, merged up a fixed tree (wide summaries: folded in row order), one
``compute``; the merge order depends on the chunking and the width alone, so
the result is the same bit for bit on any number of threads and whatever
classes are expected. Pass 2, :func:`project_blocks`
and :func:`store_projection`: ``(X - c) @ Vᵀ`` and the decision function per chunk,
stored chunk by chunk into array targets (Zarr arrays from :mod:`streamproj.store`).

Inputs may be numpy arrays, dask arrays or any chunked array-like (Zarr): the
rows are read chunk by chunk by the scheduler in charge — the local threaded
scheduler, or a ``dask.distributed`` cluster when a client is active — so no
step holds more than one chunk of rows per worker thread.
"""

import contextlib
import os
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize

from . import gpu
from .errors import BadValuesError, InputError, InvalidParameterError, StreamprojError
from .progress import compute_with_progress
from .stats import (
    DETAILS,
    PASS1_KERNEL,
    PASS1_KERNELS,
    ClassStats,
    bfloat16_to_float32,
    centred_blocks,
    check_bfloat16_rows,
    check_summary_memory,
    finish_partial,
    merge_partials,
    parse_memory,
    partial_summary,
    summary_nbytes,
)
from .validation import as_dask_labels, as_dask_rows, block_start, check_finite, refuse_too_large

__all__ = [
    "accumulate",
    "default_kernel",
    "default_memory_budget",
    "finish_summary",
    "first_bad_row",
    "in_any_order",
    "project_blocks",
    "score_blocks",
    "store_projection",
    "summary_graph",
]

_MERGE_FAN_IN = 4
# Summaries larger than this are folded in row order instead of merged up a tree: fewer of
# them wait in memory for their merge (each is p x p float64: 134 MB at p = 4,096).
_WIDE_SUMMARY_BYTES = 32 * 2**20


def _chunk_stats(X, y, detail, offset, names, bfloat16=False, budget=None, kernel=PASS1_KERNEL):
    """One chunk's summary, or the user error it raised (reported after the merge).

    Errors travel up the merge tree in row order, so the one raised names the
    first bad row of the whole array, whichever chunk failed first in time.
    """
    try:
        return partial_summary(X, y, detail, row_offset=offset, names=names,
                               bfloat16=bfloat16, max_bytes=budget, kernel=kernel)
    except StreamprojError as exc:
        return exc


def _merge_all(*parts, budget=None):
    for part in parts:  # parts are in row order: the first error is the earliest row's
        if isinstance(part, StreamprojError):
            return part
    detail = DETAILS[min(DETAILS.index(part.detail) for part in parts)]
    if budget is not None and detail != "pooled":
        # per-class arrays grow with the union of the classes: check before allocating them
        classes = set().union(*(part.classes.tolist() for part in parts))
        try:
            check_summary_memory(parts[0].n_features, len(classes), detail, budget,
                                 where="merging chunk summaries: ", summaries=3)
        except StreamprojError as exc:
            return exc
    # every part is an intermediate of pass 1's tree with this merge as its only consumer
    # (dask frees it afterwards), so the first part's scatter takes the sum in place
    total = parts[0]
    for part in parts[1:]:
        total = merge_partials(total, part)
    return total


def _offsets(chunks):
    return np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(int).tolist()


def _concurrent_chunks():
    """How many chunks the scheduler in charge summarises at once (per process)."""
    workers = dask.config.get("num_workers", None)
    return int(workers) if workers else (os.cpu_count() or 1)


# Without a budget, a summary may take this fraction of the machine's memory.
_DEFAULT_MEMORY_FRACTION = 0.5


def default_memory_budget():
    """Half of this machine's physical memory, in bytes (``os.sysconf``; None where unknown)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return int(total * _DEFAULT_MEMORY_FRACTION) if total > 0 else None


def _plan_memory(n_features, n_classes, detail, budget, chunk_rows, itemsize, name="X"):
    """Refuse before reading when a summary of this shape would not fit ``budget`` bytes.

    ``n_classes`` is None where no class is known before the labels are read:
    the plan then counts 2 (and says "at least"), and the chunks and merges
    check again with the classes they hold.
    """
    check_summary_memory(n_features, max(2, n_classes or 0), detail, budget, chunk_rows, itemsize,
                         _concurrent_chunks(), where=f"{name}: ",
                         classes_known=(n_classes or 0) >= 2)


def accumulate(X: Any, y: Any, detail: str = "pooled", chunk_rows: int | None = None,
               progress: bool = False, row_offset: int = 0, names: tuple[str, str] = ("X", "y"),
               max_summary_memory: int | str | None = None, bfloat16: bool = False,
               n_classes: int | None = None, kernel: int | None = None) -> ClassStats:
    """Pass 1: per-class summaries of all rows, in one streaming Dask computation.

    :func:`summary_graph` and :func:`finish_summary` are the same pass in two
    steps, for a caller that computes it together with other graphs over the
    same rows (each chunk is then read once for all of them).

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
    max_summary_memory : int or str, optional
        Budget for the summary and the chunks in flight (bytes, or "2GB"; default
        half the machine's memory): a summary that would exceed it is refused
        with :class:`~streamproj.errors.SummaryMemoryError` before any row is
        read (with ``n_classes`` as the class count), and again by a chunk or a
        merge that finds more classes, before allocating.
    bfloat16 : bool
        X holds bfloat16 values stored as uint16 (converted exactly in pass 1).
    n_classes : int, optional
        Classes known before reading (e.g. ``classes=``), for the memory plan
        (None: none known; the plan counts at least 2).
    kernel : int, optional
        The blocking the rows are summed in (:data:`streamproj.stats.PASS1_KERNEL`,
        the current one; an older one reproduces a summary it made, bit for bit),
        or ``streamproj.gpu.KERNEL`` (3): the products on a GPU through CuPy
        (:class:`~streamproj.errors.DeviceError` before any row is read where
        there is none). Default: :func:`default_kernel`, that of the device
        chosen with :func:`streamproj.gpu.using`.

    Returns
    -------
    ClassStats
        Of every row given: merging it into a summary counts its rows again
        each time (duplicate protection is the model directory's ledger).
    """
    lazy, n_chunks = summary_graph(X, y, detail, chunk_rows, row_offset, names,
                                   max_summary_memory, bfloat16, n_classes, kernel)
    (stats,) = compute_with_progress(lazy, progress=progress, prefix="streamproj-summary-",
                                     total=n_chunks, desc="pass 1: summaries")
    return finish_summary(stats)


def default_kernel():
    """The pass-1 kernel of the current device (:func:`streamproj.gpu.using`): 2 on the CPU, 3 on a GPU."""
    return gpu.KERNEL if gpu.current_device() == "cuda" else PASS1_KERNEL


def finish_summary(result):
    """The :class:`ClassStats` a computed :func:`summary_graph` gave, or the first bad row's error.

    The graph's result is a pass-1 partial (see :func:`~streamproj.stats.partial_summary`):
    this mirrors its scatter, in place (doing it again changes nothing).
    """
    if isinstance(result, StreamprojError):
        raise result
    return finish_partial(result)


def summary_graph(X, y, detail="pooled", chunk_rows=None, row_offset=0, names=("X", "y"),
                  max_summary_memory=None, bfloat16=False, n_classes=None, kernel=None):
    """Pass 1 as a lazy graph: ``(delayed result, number of chunks)``.

    The parameters are :func:`accumulate`'s. Its chunk tasks are named
    ``streamproj-summary-…``; the result is a partial :class:`ClassStats`
    (its scatter's upper triangle), which :func:`finish_summary` completes, or
    the :class:`~streamproj.errors.StreamprojError` of the first bad row, which
    :func:`finish_summary` raises. Shapes, dtypes and the memory plan are
    checked here, before anything is read.
    """
    kernel = default_kernel() if kernel is None else kernel
    if kernel not in PASS1_KERNELS:
        msg = f"kernel={kernel!r}: this streamproj sums pass 1 with kernel {list(PASS1_KERNELS)}"
        raise InvalidParameterError(msg)
    if kernel == gpu.KERNEL:
        gpu.check_device("cuda", what=f"kernel={kernel} (pass 1 on a GPU)")
    X = as_dask_rows(X, chunk_rows, names[0])
    if kernel == gpu.KERNEL:
        gpu.check_rows(X.dtype, names[0])
    y = as_dask_labels(y, X.chunks[0], names)
    if X.shape[0] == 0:
        msg = f"{names[0]} has no rows"
        raise InputError(msg)
    budget = (default_memory_budget() if max_summary_memory is None
              else parse_memory(max_summary_memory))
    _plan_memory(X.shape[1], n_classes, detail, budget, max(X.chunks[0]), X.dtype.itemsize, names[0])
    if bfloat16:
        check_bfloat16_rows(X.dtype, names[0])
    token = tokenize(X, y, detail, row_offset, names, budget, bfloat16, kernel)
    xs = X.to_delayed(optimize_graph=False).ravel()
    ys = y.to_delayed(optimize_graph=False).ravel()
    parts = [
        dask.delayed(_chunk_stats, pure=True)(
            xb, yb, detail, row_offset + off, names, bfloat16, budget, kernel,
            dask_key_name=f"streamproj-summary-{token}-{i}"
        )
        for i, (xb, yb, off) in enumerate(zip(xs, ys, _offsets(X.chunks[0]), strict=True))
    ]
    # (from p and the detail alone, never the classes expected: those differ between a fit, an
    # update and --verify of the same rows, which must all merge them in the same order)
    if summary_nbytes(X.shape[1], 2, detail) > _WIDE_SUMMARY_BYTES:
        # Wide: a fold in row order. Each chunk's summary is merged into the running total
        # (in its memory) as soon as the chunks before it are, so only the summaries of the
        # chunks in flight wait; a tree kept one partial per level besides (at 100k x 4,096
        # float16 pass 1 peaked at 1,156 MB with a fan-in-2 tree, 914 MB folded).
        total = parts[0]
        for i, part in enumerate(parts[1:], start=1):
            total = dask.delayed(_merge_all, pure=True)(
                total, part, budget=budget, dask_key_name=f"streamproj-merge-{token}-fold-{i}")
        return total, len(xs)
    level = 0
    while len(parts) > 1:
        parts = [
            dask.delayed(_merge_all, pure=True)(
                *parts[i : i + _MERGE_FAN_IN], budget=budget,
                dask_key_name=f"streamproj-merge-{token}-{level}-{i}",
            )
            for i in range(0, len(parts), _MERGE_FAN_IN)
        ]
        level += 1
    return parts[0], len(xs)


# The projection's float64 blocks: a product with d ≤ 3 columns needs no tall block, and
# one that stays in a core's cache between the cast and the product. In isolation (the
# kernel alone in dask's map_blocks to Zarr, two threads, medians of 5, 2026-11-24) 256
# KiB-1 MiB blocks beat 4 MiB ones at every width: 2M x 100 float32 0.96-1.01 s vs 1.46;
# 300k x 1000 1.41-1.43 vs 2.13; 100k x 4096 float16 1.00-1.02 vs 1.48. In bench.py's
# whole `project` only the 4,096-wide case moved clearly (2.34 -> 1.75 s).
_PROJECT_BLOCK_BYTES = 2**19


def _centred_product(block, center, matrix, bfloat16, device="cpu"):
    """``(block - center) @ matrixᵀ`` in float64, one cache-sized block of rows at a time.

    64-bit integer rows beyond 2^53 come off the centre before their cast
    (:func:`~streamproj.stats.subtract_rows`): each coordinate is exact about
    the model's float64 centre, which, the mean of such rows, is itself
    rounded at their scale (to 256 at 2^60).
    """
    if device == "cuda":
        return gpu.centred_product(block, center, matrix, bfloat16)
    decode = bfloat16_to_float32 if bfloat16 else None
    out = np.empty((block.shape[0], matrix.shape[0]))
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite rows: checked by the caller
        for start, stop, rows in centred_blocks(block, center, decode=decode,
                                                block_bytes=_PROJECT_BLOCK_BYTES):
            np.matmul(rows, matrix.T, out=out[start:stop])
    return out


def _project_block(block, center, components, name, row_offset, bfloat16=False, device="cpu",
                   block_info=None):
    block = np.asarray(block)
    out = _centred_product(block, center, components, bfloat16, device)
    # Any NaN or inf in a row makes its coordinates non-finite: check the small output.
    if not np.isfinite(out).all():
        first = block_start(block_info)
        with in_any_order():
            check_finite(bfloat16_to_float32(block) if bfloat16 else block, row_offset + first,
                         name)
        # finite rows whose coordinates overflow: the first such row, not the block's first
        refuse_too_large(~np.isfinite(out).all(axis=1), row_offset + first, name,
                         "to project in float64 (its coordinates overflow)")
    return out


def _score_block(block, center, coefs, offsets, bfloat16=False, device="cpu"):
    out = _centred_product(np.asarray(block), center, coefs, bfloat16, device)
    out += offsets
    return out


def _by_rows(X, kernel, args, width, prefix):
    """``kernel(chunk, *args)`` over X's row chunks: a lazy (n, width) float64 array."""
    return X.map_blocks(
        kernel,
        *args,
        dtype=np.float64,
        chunks=(X.chunks[0], (width,)),
        name=f"{prefix}-{tokenize(X, *args)}",
        meta=np.empty((0, width)),
    )


def score_blocks(X, center, coefs, offsets, bfloat16=False, device=None):
    """Lazy ``(X - center) @ coefsᵀ + offsets`` in float64, chunk by chunk.

    Several linear scores of the same rows (e.g. the decisions and the
    centred scores of K > 2 classes, stacked) from one cast of each block.
    Non-finite rows give non-finite scores (:func:`project_blocks` names
    them). ``bfloat16``: X holds bfloat16 bit patterns as uint16 (decoded
    exactly). ``device``: "cpu", or "cuda" for the products on a GPU
    (:mod:`streamproj.gpu`; default: the one chosen with :func:`streamproj.gpu.using`).
    """
    device = gpu.current_device() if device is None else device
    gpu.check_device(device)
    if bfloat16:
        check_bfloat16_rows(X.dtype)
    if device == "cuda":
        gpu.check_rows(X.dtype)
    coefs = np.asarray(coefs, dtype=np.float64)
    args = (np.asarray(center, dtype=np.float64), coefs, np.asarray(offsets, dtype=np.float64),
            bfloat16, device)
    return _by_rows(X, _score_block, args, coefs.shape[0], "streamproj-scores")


def project_blocks(X, center, components, name="X", row_offset=0, bfloat16=False, device=None):
    """Lazy ``(X - center) @ componentsᵀ`` in float64, chunk by chunk.

    NaN/inf rows raise :class:`~streamproj.errors.BadValuesError` naming the row.
    ``bfloat16``: X holds bfloat16 bit patterns as uint16 (decoded exactly).
    ``device``: "cpu", or "cuda" for the products on a GPU (:mod:`streamproj.gpu`;
    default: the one chosen with :func:`streamproj.gpu.using`).
    """
    device = gpu.current_device() if device is None else device
    gpu.check_device(device)
    center = np.asarray(center, dtype=np.float64)
    components = np.asarray(components, dtype=np.float64)
    if X.shape[1] != components.shape[1]:
        msg = f"{name} has {X.shape[1]} features but the model was fitted on {components.shape[1]}"
        raise InputError(msg)
    if bfloat16:
        check_bfloat16_rows(X.dtype, name)
    if device == "cuda":
        gpu.check_rows(X.dtype, name)
    return _by_rows(X, _project_block, (center, components, name, row_offset, bfloat16, device),
                    components.shape[0], "streamproj-project")


@contextlib.contextmanager
def first_bad_row(X, name="X", bfloat16=False):
    """Pass 2's :class:`~streamproj.errors.BadValuesError` said of the first bad row of ``X``.

    Pass 1 passes chunks' errors up its merge tree in row order; pass 2 stores
    chunks, so the first chunk to fail in time stops the compute and names its
    row (row 950 where row 120 was bad too, in chunks of 100 rows). On that
    error, and only then, the rows before the one it names are read again for
    an earlier one. ``X``: the rows, numbered as :func:`project_blocks` numbered
    them (``row_offset`` 0); ``name`` and ``bfloat16`` as given to it.
    """
    try:
        yield
    except BadValuesError as exc:
        row = getattr(exc, "row", None)
        # (only a chunk kernel's error: pass 1's come in row order, numbered in the source)
        if not getattr(exc, "in_any_order", False) or not row or row > X.shape[0]:
            raise
        try:
            earlier = _first_bad(X[:row], name, bfloat16)
        except Exception:  # the rows cannot be read again: what was found stands
            earlier = None
        if earlier is None:
            raise
        raise earlier from None


@contextlib.contextmanager
def in_any_order():
    """Mark the :class:`BadValuesError` of a pass-2 chunk kernel for :func:`first_bad_row`.

    Its ``row`` counts the rows the kernel was given; a chunk failing first in
    time need not hold the first bad row.
    """
    try:
        yield
    except BadValuesError as exc:
        exc.in_any_order = True
        raise


def _bad_in_block(block, start, name, bfloat16):
    """The BadValuesError of ``block``'s first non-finite row (numbered from ``start``), or None."""
    block = np.asarray(block)
    try:
        check_finite(bfloat16_to_float32(block) if bfloat16 else block, start, name)
    except BadValuesError as exc:
        return exc
    return None


def _first_bad(head, name, bfloat16):
    """The BadValuesError of the first row of ``head`` holding NaN or inf, or None.

    Each chunk is checked once, by :func:`~streamproj.stats.check_finite` (the
    message pass 1 gives), and the first chunk's error in row order is kept.
    """
    parts = head.rechunk({1: -1}).to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(head.chunks[0][:-1])]).astype(int)
    found = compute_with_progress(*(dask.delayed(_bad_in_block)(part, int(start), name, bfloat16)
                                    for part, start in zip(parts, starts, strict=True)))
    return next((exc for exc in found if exc is not None), None)


def store_projection(sources, targets, progress=False, total=None, compute=True):
    """Pass 2: compute lazy arrays chunk by chunk into array targets (one ``compute``).

    ``compute=False`` returns the lazy store instead, to be computed with other
    graphs over the same rows.
    """
    stored = da.store(sources, targets, lock=False, compute=False)
    if not compute:
        return stored
    compute_with_progress(stored, progress=progress, prefix="streamproj-project-", total=total,
                          desc="pass 2: projection")
    return None

