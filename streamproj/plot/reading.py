"""Reading projected rows for pictures: aligned blocks, one streaming pass.

A picture needs the coordinates, the labels (``y``, else ``predicted``) and
sometimes ``predicted``, block by block and never all at once. :class:`Blocks`
lines those arrays up by rows whatever they are (numpy, Zarr or dask);
:func:`stream` reads the blocks in a few threads (Zarr decompression releases
the GIL) with a bounded number in flight, so peak memory is a few blocks plus
the accumulators, whatever the number of rows.
"""

import collections
import itertools
import os
import threading
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dask
import dask.array as da
import dask.local
import numpy as np

from ..errors import InputError

__all__ = [
    "COORDINATE_NAMES",
    "Blocks",
    "ClassMap",
    "class_spread_limits",
    "class_spread_limits_each",
    "coordinates",
    "count_classes",
    "robust_limits",
    "robust_limits_each",
    "sample_columns",
    "sample_rows",
    "spread_limits",
    "stream",
    "with_zero",
]

# The contract's name first; 0.1 wrote ``coords`` and those outputs stay readable.
COORDINATE_NAMES = ("projection", "coords")
DEFAULT_BLOCK_ROWS = 100_000
READ_BYTES = 8 * 2**20  # rows read in one call per run of blocks (see Blocks.groups)


def coordinates(group, where="OUT"):
    """The projected coordinates (n, d) of an output group, under either name."""
    for name in COORDINATE_NAMES:
        if name in group:
            return group[name]
    msg = f"{where} has no 'projection' array (nor 0.1's 'coords'): is it a streamproj projection?"
    raise InputError(msg)


class Blocks:
    """Row blocks of several arrays of equal length, read together.

    Parameters
    ----------
    arrays : dict of name to array-like
        numpy, Zarr (anything sliceable with ``.shape``) or dask arrays, all
        with the same number of rows. Dask arrays are computed block by
        block; the others are sliced.
    block_rows : int, optional
        Rows per block when no array is dask: default the first array's own
        chunk length (Zarr), else 100,000.
    """

    def __init__(self, arrays, block_rows=None):
        self.arrays = {k: v for k, v in arrays.items() if v is not None}
        first_name, first = next(iter(self.arrays.items()))
        self.n = int(first.shape[0])
        for name, arr in self.arrays.items():
            if int(arr.shape[0]) != self.n:
                msg = f"{name} has {arr.shape[0]} rows but {first_name} has {self.n}; they must match"
                raise InputError(msg)
        lazy = [a for a in self.arrays.values() if isinstance(a, da.Array)]
        if lazy:
            sizes = lazy[0].chunks[0]
            made = {}  # one dask array per distinct input, so that a shared one is read once

            def aligned(v):
                if id(v) not in made:
                    made[id(v)] = (v.rechunk({0: sizes}) if isinstance(v, da.Array)
                                   else da.from_array(v, chunks=(sizes, *v.shape[1:]),
                                                      asarray=True, lock=False))
                return made[id(v)]

            self.arrays = {k: aligned(v) for k, v in self.arrays.items()}
            edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        else:
            native = getattr(first, "chunks", None)
            rows = block_rows or (native[0] if isinstance(native, tuple) and native
                                  and isinstance(native[0], int) else DEFAULT_BLOCK_ROWS)
            edges = np.append(np.arange(0, self.n, max(1, int(rows))), self.n)
        self.bounds = [(int(a), int(b)) for a, b in itertools.pairwise(edges) if b > a]
        self.lazy = bool(lazy)

    def __len__(self):
        return len(self.bounds)

    def read(self, i, names=None):
        """Block ``i`` of the named arrays (all by default) as numpy arrays."""
        return self.read_span([i], names)[0]

    def read_span(self, indices, names=None):
        """Consecutive blocks ``indices`` of the named arrays, read in one slice per array.

        One Zarr read of several chunks decodes them concurrently and pays
        Zarr's per-call overhead once (a 10-chunk read costs about 6 single
        ones here); the blocks returned are views of it.
        """
        names = list(names or self.arrays)
        # one read per distinct array: ``label`` is usually ``y`` itself
        first: dict[int, Any] = {}
        for k in names:
            first.setdefault(id(self.arrays[k]), k)
        distinct = list(first.values())
        if self.lazy:
            out = []
            for i in indices:
                parts = dask.compute(*[self.arrays[k].blocks[i] for k in distinct],
                                     scheduler=dask.local.get_sync)  # (named, dask imports distributed)
                got = {k: np.asarray(v) for k, v in zip(distinct, parts, strict=True)}
                out.append({k: got[first[id(self.arrays[k])]] for k in names})
            return out
        lo, hi = self.bounds[indices[0]][0], self.bounds[indices[-1]][1]
        # a key for every axis: streamproj's reader takes a whole chunk only so spelled
        got = {k: np.asarray(self.arrays[k][(slice(lo, hi),) + (slice(None),)
                                            * (len(self.arrays[k].shape) - 1)])
               for k in distinct}
        out = []
        for a, b in (self.bounds[i] for i in indices):
            views = {k: v[a - lo : b - lo] for k, v in got.items()}
            out.append({k: views[first[id(self.arrays[k])]] for k in names})
        return out

    def _chunk_aligned(self, array):
        """True when ``array`` reads whole chunks fast and each block is one of its chunks."""
        chunks = getattr(array, "chunks", None)
        return (bool(getattr(array, "whole_chunks", False)) and isinstance(chunks, tuple)
                and bool(chunks) and all(a % chunks[0] == 0 and (b - a == chunks[0] or b == self.n)
                                         for a, b in self.bounds))

    def groups(self, indices, names=None, target_bytes=READ_BYTES):
        """``indices`` cut into runs of consecutive blocks read together (:meth:`read_span`).

        A run holds up to ``target_bytes`` of the named arrays' rows; dask
        blocks are read one at a time (each is its own computation).
        """
        if self.lazy:
            return [[i] for i in indices]
        names = list(names or self.arrays)
        if all(self._chunk_aligned(self.arrays[k]) for k in names):
            # streamproj's reader decodes a whole chunk into the array it returns; a read of
            # several is zarr's, with its copy (10M rows: 0.155 core-s against 0.26)
            return [[i] for i in indices]
        row_bytes = sum(int(np.prod(self.arrays[k].shape[1:], dtype=np.int64))
                        * np.dtype(self.arrays[k].dtype).itemsize
                        for k in {id(self.arrays[k]): k for k in names}.values())
        runs: list[list[int]] = []
        for i in indices:
            b = self.bounds[i][1]
            if (runs and runs[-1][-1] == i - 1
                    and (b - self.bounds[runs[-1][0]][0]) * row_bytes <= target_bytes):
                runs[-1].append(i)
            else:
                runs.append([i])
        return runs


def stream(blocks, work, names=None, indices=None, workers=None):
    """Call ``work(block_dict, start)`` on each block, read in runs, worked in threads.

    The calling thread reads runs of consecutive blocks (:meth:`Blocks.groups`:
    one Zarr call decodes several chunks at once) and hands each block to a
    pool of worker threads, so reading and counting overlap. ``work`` must do
    its own locking when it merges into shared state. At most ``workers + 1``
    runs are in flight, so memory is bounded by a few runs (8 MiB each by
    default), whatever the number of rows.
    """
    indices = list(range(len(blocks)) if indices is None else indices)
    workers = workers or min(4, os.cpu_count() or 1)
    runs = blocks.groups(indices, names)
    if workers == 1 or len(indices) <= 1:
        for run in runs:
            for i, block in zip(run, blocks.read_span(run, names), strict=True):
                work(block, blocks.bounds[i][0])
        return
    with ThreadPoolExecutor(workers) as pool:
        pending: collections.deque[Any] = collections.deque()  # of the runs in flight, oldest first
        try:
            for run in runs:
                got = blocks.read_span(run, names)
                pending.extend(pool.submit(work, block, blocks.bounds[i][0])
                               for i, block in zip(run, got, strict=True))
                while len(pending) > workers * len(run):
                    pending[0].result()
                    pending.popleft()
            while pending:
                pending[0].result()
                pending.popleft()
        finally:
            for f in pending:  # an error: drop the work not started
                f.cancel()


def sample_rows(blocks, name, max_blocks=8, max_rows=400_000):
    """A bounded sample of one array's rows: up to ``max_blocks`` blocks spread evenly.

    Cheap (a few blocks of the pass), and spread over the whole array so
    that a class- or time-sorted output is still represented.
    """
    return sample_columns(blocks, [name], max_blocks, max_rows)[name]


def sample_columns(blocks, names, max_blocks=8, max_rows=400_000):
    """:func:`sample_rows` of several arrays at once, the same rows of each: ``{name: rows}``."""
    count = len(blocks)
    if count == 0:  # no rows: an empty sample of the right width
        return {n: np.empty((0, *blocks.arrays[n].shape[1:])) for n in names}
    picks = np.unique(np.linspace(0, count - 1, min(count, max_blocks)).round().astype(int))
    parts: dict[int, dict] = {}
    lock = threading.Lock()
    per_block = max(1, max_rows // len(picks))

    def keep(block, start):
        step = max(1, block[names[0]].shape[0] // per_block)
        kept = {n: np.asarray(block[n])[::step] for n in names}
        with lock:
            parts[start] = kept

    stream(blocks, keep, list(dict.fromkeys(names)), picks)
    order = sorted(parts)
    return {n: np.concatenate([parts[k][n] for k in order]) for n in names}


def class_spread_limits(values, labels, min_rows=20, core=0.01, reach=0.5, pad=0.05):
    """:func:`spread_limits` of all rows, widened to each class's own (of ``min_rows`` or more).

    A class of 0.1 % of the rows lying at one end is beyond the 1-99 %
    quantiles of all rows, and was left out of the picture whole.
    """
    return class_spread_limits_each(values, labels, [(reach, pad)], min_rows, core)[0]


def class_spread_limits_each(values, labels, specs, min_rows=20, core=0.01):
    """:func:`class_spread_limits` for several ``(reach, pad)`` at once, each as if alone.

    The quantiles and ranges of all rows, and of each class beyond some
    spec's limits, are taken once; each spec is then widened by the classes
    beyond its own limits only.

    Returns
    -------
    list of ndarray (d, 2), one per spec
    """
    values = np.asarray(values, dtype=np.float64)
    d = values.shape[1]
    bulk = _spread_stats(values, core)
    lims = [_spread_from(bulk, d, reach, pad) for reach, pad in specs]
    if values.shape[0] == 0:
        return lims
    labels = np.asarray(labels).ravel()
    columns = values.T
    # only a class with rows beyond a spec's limits can widen them (a NaN is beyond none)
    beyond = [labels[((columns < lim[:, :1]) | (columns > lim[:, 1:])).any(axis=0)]
              for lim in lims]
    candidates = np.unique(np.concatenate(beyond))
    widens = [np.isin(candidates, out) for out in beyond]
    for c, cls in enumerate(candidates):
        rows = values[labels == cls]
        if rows.shape[0] < min_rows:
            continue
        own = _spread_stats(rows, core)
        for lim, widen, (reach, pad) in zip(lims, widens, specs, strict=True):
            if widen[c]:
                wide = _spread_from(own, d, reach, pad)
                lim[:, 0] = np.minimum(lim[:, 0], wide[:, 0])
                lim[:, 1] = np.maximum(lim[:, 1], wide[:, 1])
    return lims


def robust_limits(values, tail=0.001, pad=0.05):
    """Per-column limits from quantiles ``tail``, ``1 - tail``, padded by ``pad`` of the span.

    Parameters
    ----------
    values : ndarray (m, d)
    tail : float
        Share of the sample allowed beyond each side before padding.
    pad : float

    Returns
    -------
    ndarray (d, 2)
    """
    return robust_limits_each(values, [(tail, pad)])[0]


QUANTILE_ROWS = 50_000
# the narrowest limits drawn: 1e58 of room for the cells, magnification and densities below
# the largest float; data spread less are drawn in this span around them, as a flat column
SMALLEST_SPAN = 1e-250


def spread_limits(values, core=0.01, reach=0.5, pad=0.05):
    """Per-column limits that show the tails of the bulk but not a few far rows.

    The sample's range, cut at ``reach`` times the width of its central
    ``[core, 1 - core]`` quantile range beyond that range on each side, then
    padded by ``pad`` of the span. A Gaussian column keeps its whole sample
    (about ±4.4σ at 100k rows, where 0.1–99.9 % quantiles cut it flat at
    ±3.1σ); up to ``core`` of far rows on either side cannot stretch it.

    Parameters
    ----------
    values : ndarray (m, d)

    Returns
    -------
    ndarray (d, 2)
    """
    values = np.asarray(values)
    return _spread_from(_spread_stats(values, core), values.shape[1], reach, pad)


def _spread_stats(values, core):
    """What :func:`spread_limits` needs of ``values`` whatever its reach and padding.

    ``(q_lo, q_hi, lo, hi)`` per column (the ``core`` quantiles and the
    range of the finite rows), or None where no row is finite.
    """
    values = _finite_rows(values)
    if values.shape[0] == 0:
        return None
    columns = np.ascontiguousarray(values.T)  # reductions along rows of an (m, 2) are strided
    # the quantiles of at most QUANTILE_ROWS rows (a partition of 400,000 took ~10 ms a call,
    # and a picture asks for several): ±0.3 % of a 1 % quantile; the range is the whole sample's
    step = max(1, values.shape[0] // QUANTILE_ROWS)
    q_lo, q_hi = np.quantile(columns[:, ::step], [core, 1 - core], axis=1)
    return q_lo, q_hi, columns.min(axis=1), columns.max(axis=1)


def _spread_from(stats, d, reach, pad):
    """:func:`spread_limits` of ``d`` columns from their :func:`_spread_stats`."""
    if stats is None:
        return np.tile([-1.0, 1.0], (d, 1))
    q_lo, q_hi, lo, hi = stats
    width = q_hi - q_lo
    return _padded(np.maximum(lo, q_lo - reach * width), np.minimum(hi, q_hi + reach * width), pad)


def _finite_rows(values):
    """``values`` as float64 without its rows holding a NaN or an infinity."""
    values = np.asarray(values, dtype=np.float64)
    if not np.isfinite(values).all():  # (one flat test first: a test per row costs 5x more)
        values = values[np.isfinite(values).all(axis=1)]
    return values


def _padded(lo, hi, pad):
    """Limits ``(d, 2)`` from ``lo`` to ``hi`` widened by ``pad`` of the span.

    Flat is judged against the values' own size, not against 1: data in units
    of 1e-13 spread over 1e-13 and were drawn as one cell in limits of ±0.05.
    A flat column's span is its size (1 where it is 0).
    """
    span = hi - lo
    size = np.maximum(np.abs(lo), np.abs(hi))
    flat = span <= 1e-12 * size
    span = np.where(flat, np.where(size > 0, size, 1.0), span)
    # and at least SMALLEST_SPAN: a span of 1e-306 (or a subnormal one) is no flat column, but
    # its cells' scale (bins / span) and the margin's densities (1 / cell width) overflow
    span = np.maximum(span, SMALLEST_SPAN)
    return np.column_stack([lo - pad * span, hi + pad * span])


def with_zero(limits, axis, margin=0.02):
    """``limits`` (d, 2) with 0 inside axis ``axis``, ``margin`` of the span from either edge.

    Where the boundary ``z[0] = 0`` is: a picture always shows it.
    """
    lo, hi = limits[axis]
    edge = margin * (hi - lo)
    limits[axis] = (min(lo, -edge), max(hi, edge))
    return limits


def robust_limits_each(values, specs):
    """:func:`robust_limits` for several ``(tail, pad)`` at once: one partition of the sample.

    Returns
    -------
    list of ndarray (d, 2), one per spec
    """
    values = _finite_rows(values)
    if values.shape[0] == 0:
        return [np.tile([-1.0, 1.0], (values.shape[1], 1)) for _ in specs]
    tails = [t for t, _ in specs]
    q = np.quantile(values, tails + [1 - t for t in tails], axis=0)
    return [_padded(q[k], q[len(specs) + k], pad) for k, (_, pad) in enumerate(specs)]


def one_line(name):
    """``name`` as one line of text: line breaks and other control characters as escapes.

    A label holding a newline was several lines in a legend entry or note, which
    the figure's layout counts as one (they were drawn over the title and the key).
    """
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch
                   for ch in name)


class ClassMap:
    """Labels to display buckets: the top classes by count, then one "other".

    Parameters
    ----------
    classes : ndarray (K,)
        The model's classes.
    counts : ndarray (K,), optional
        Rows per class; the ``top`` largest are shown (default: all, in order).
    top : int
        Most classes shown on their own; the rest (and labels the model
        does not know) go to the last bucket, "other".

    Attributes
    ----------
    hidden_rows : int
        Rows of the model's classes in "other" (by ``counts``); the rest of
        its rows have labels the model does not know.
    other_name : str
        The last bucket's name: "other", or "other classes" where a class
        shown on its own is named "other".
    """

    def __init__(self, classes, counts=None, top=8):
        self.classes = np.asarray(classes)
        k = len(self.classes)
        if counts is None or k <= top:
            shown = np.arange(k)
        else:
            shown = np.sort(np.argsort(-np.asarray(counts), kind="stable")[:top])
        self.shown = shown  # class positions with a bucket of their own
        self.n_buckets = len(shown) + 1  # the last is "other"
        lut = np.full(k, len(shown), dtype=np.intp)
        lut[shown] = np.arange(len(shown))
        # the rows of the classes not shown: the rest of "other" are labels the model lacks
        self.hidden_rows = (0 if counts is None or len(shown) == k
                            else int(np.asarray(counts)[lut == len(shown)].sum()))
        self._order = np.argsort(self.classes, kind="stable")
        self._sorted = self.classes[self._order]
        self._lut = lut
        # small-range integer classes: one table lookup instead of a binary search
        self._dense = None
        if self.classes.dtype.kind in "iu" and k and np.ptp(self.classes) < 1_000_000:
            lo = int(self.classes.min())
            table = np.full(int(np.ptp(self.classes)) + 1, len(shown), dtype=np.intp)
            table[self.classes.astype(np.int64) - lo] = lut
            self._dense = (lo, table)
        self._byte_tables = {}  # labels of 1- or 2-byte integer dtypes: a table over all values
        self._every: ClassMap | None = None  # every class its own bucket (see position)
        names = [one_line(str(c)) for c in self.classes[shown]]
        # a class shown under the name "other" would have two legend entries of that name
        other = "other" if "other" not in names else "other classes"
        while other in names:
            other = f"({other})"
        self.other_name = other
        self.names = [*names, other]

    def position(self, labels):
        """Position of each label in ``classes``; ``len(classes)`` for labels the model lacks."""
        if len(self.shown) == len(self.classes):  # every class its own bucket, in order
            return self.index(labels)
        if self._every is None:
            self._every = ClassMap(self.classes, top=len(self.classes))
        return self._every.index(labels)

    def bucket_of_class(self, position):
        """Bucket of the class at ``position`` in ``classes``."""
        return int(self._lut[position])

    def index(self, labels):
        """Bucket (0 .. n_buckets-1) of each label; unknown labels are "other"."""
        labels = np.asarray(labels).ravel()
        if self._dense is not None and labels.dtype.kind in "iu" and labels.dtype.itemsize <= 2:
            # every value the dtype can hold has an entry: one gather, no bounds checks
            table = self._byte_tables.get(labels.dtype.str)
            if table is None:
                unsigned = np.dtype(f"u{labels.dtype.itemsize}")
                values = np.arange(2 ** (8 * labels.dtype.itemsize)).astype(unsigned)
                # held in the smallest dtype: take() from a byte table, then widening, took
                # half the time of indexing an intp table
                table = self._dense_index(values.view(labels.dtype)).astype(
                    np.min_scalar_type(self.n_buckets - 1))
                self._byte_tables[labels.dtype.str] = table
            return table.take(labels.view(f"u{labels.dtype.itemsize}")).astype(np.intp)
        return self._dense_index(labels)

    def _dense_index(self, labels):
        if self._dense is not None and labels.dtype.kind in "iu":
            lo, table = self._dense
            pos = labels.astype(np.int64) - lo
            ok = (pos >= 0) & (pos < table.size)
            return np.where(ok, table[np.where(ok, pos, 0)], self.n_buckets - 1)
        known = self._sorted
        if known.dtype.kind in "USOT" and labels.dtype.kind not in "USOT":
            labels = labels.astype(str)
        elif known.dtype.kind not in "USOT" and labels.dtype.kind in "USOT":
            return np.full(labels.shape, self.n_buckets - 1, dtype=np.intp)
        elif labels.dtype.kind in "OT" and known.dtype.kind in "US":
            # variable-length strings (outputs store text labels so): the classes meet them
            # there, rather than the labels being cut to the classes' fixed width
            known = known.astype(np.dtypes.StringDType())
            labels = labels.astype(known.dtype)
        pos = np.searchsorted(known, labels)
        np.clip(pos, 0, len(known) - 1, out=pos)
        hit = known[pos] == labels
        return np.where(hit, self._lut[self._order[pos]], self.n_buckets - 1)


def count_classes(blocks, name, classes):
    """Rows per class (K,) and rows with labels the model does not know, in one read of ``name``."""
    everything = ClassMap(classes, top=len(classes))
    total = np.zeros(everything.n_buckets, dtype=np.int64)
    lock = threading.Lock()

    def add(block, _start):
        counts = np.bincount(everything.index(block[name]), minlength=everything.n_buckets)
        with lock:
            total[:] += counts

    stream(blocks, add, [name])
    return total[:-1], int(total[-1])
