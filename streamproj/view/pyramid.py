"""A per-class density pyramid and a bounded sample of rows, in one streaming pass.

The finest level is a grid of square cells over a fixed extent, counted per
class block by block; every coarser level sums 2 x 2 cells of the one below.
Beside it, a hashed sample keeps, in each of ``tiles x tiles`` tiles, the
``per_tile`` rows whose row-index hash is smallest: deterministic, the same
whatever the order of the blocks, dense regions thinned and sparse ones kept
whole, and bounded (``tiles² · per_tile`` rows) whatever the number of rows.
Per block, a row is a candidate only if its hash is below its tile's current
threshold; candidates are ranked in batches (at least as many as the rows
kept), so each is sorted O(1) times and a block costs O(rows) vector work.
Where a few far rows set the extent, an overview grid of its own counts every
row and the finest grid covers the bulk of them (each half the memory); rows
beyond the finest grid are sampled in tiles of their own. Memory is the
finest grid (and the overview) plus the sample and a bounded batch, flat in n.
"""

import threading
from typing import Any

import numpy as np

from ..plot.summary import add_keys

__all__ = ["Pyramid", "finest_within", "grid", "row_hash"]

_MAX_U64 = np.iinfo(np.uint64).max
MIN_MERGE = 50_000
_FIELDS = {"tile": np.intp, "hash": np.uint64, "x": np.float64, "y": np.float64,
           "bucket": np.intp, "cls": np.intp, "row": np.int64}


def row_hash(rows):
    """splitmix64 of the row indices: a bijection on uint64 that scatters neighbours."""
    return _mix(np.asarray(rows).astype(np.uint64))  # a copy: worked on in place


def _range_hash(start, m):
    """:func:`row_hash` of rows ``start .. start + m - 1``."""
    return _mix(np.arange(start, start + m, dtype=np.uint64))


def _mix(z):
    z += np.uint64(0x9E3779B97F4A7C15)
    t = np.empty_like(z)
    for shift, mul in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        np.right_shift(z, np.uint64(shift), out=t)
        z ^= t
        z *= np.uint64(mul)
    np.right_shift(z, np.uint64(31), out=t)
    z ^= t
    return z


def _by_tile_then_hash(tile, h, n_tiles):
    """``np.lexsort((h, tile))``, faster.

    Argsort the hashes, then a stable (radix, for 16-bit keys) argsort of the
    tiles in that order.
    """
    if n_tiles > 2**16:
        return np.lexsort((h, tile))
    by_hash = np.argsort(h)
    return by_hash[np.argsort(tile[by_hash].astype(np.uint16), kind="stable")]


def _first_in_tile(t, k):
    """Masks of the sorted ``t``: entries among the first ``k`` of their run, and each run's ``k``-th.

    An entry is among the first ``k`` unless the one ``k`` places before it is of its run:
    two comparisons, not a rank per entry (a running maximum, several passes).
    """
    if k <= 0:
        return np.zeros(t.size, dtype=bool), np.zeros(t.size, dtype=bool)
    keep = np.ones(t.size, dtype=bool)
    np.not_equal(t[k:], t[:-k], out=keep[k:])
    last = np.zeros(t.size, dtype=bool)
    if t.size >= k:  # the k-th: k - 1 before it in its run, and not k
        np.equal(t[k - 1 :], t[: t.size - k + 1], out=last[k - 1 :])
        last[k:] &= keep[k:]
    return keep, last


def _pow2_at_least(v):
    return 1 << max(0, int(np.ceil(np.log2(max(v, 1)))))


def grid(extent, finest, coarsest=8, edges=(None, None), widen="double"):
    """The finest grid of a :class:`Pyramid` over ``extent``: ``(lower (2,), (gx, gy), cell (2,))``.

    ``finest`` cells along the longer side, a power of two on each side, at
    least two coarsest cells a side, each of ``edges`` a cell edge at every
    level (see :class:`Pyramid`). Cells are square unless one side is so
    much shorter than the other that its least cells would hold it many
    times over: its cells are then finer by a power of two, until it spans
    them (the same memory; a cloud 10^4 times thinner than long has cells
    across it, which the page's stretch shows). Nothing is allocated: the
    pass's memory can be sized from it first.

    Where an edge moves the grid's start down so far that its end falls short
    of the extent's, ``widen="double"`` doubles the cells on that side (twice
    the memory); ``widen="cell"`` takes cells large enough that the side
    holds the extent and a coarsest cell more (at most twice as large, more
    often 8/7 as large), so the cells fit whatever the edge's place.
    """
    extent = np.asarray(extent, dtype=np.float64)
    spans = extent[:, 1] - extent[:, 0]
    square = spans.max() / finest
    # at least two cells a side at the coarsest level (a side is never less)
    least = 2 * max(1, finest // coarsest)
    per_coarse = finest // coarsest  # finest cells in a coarsest one
    cell = np.full(2, square)
    for a in range(2):
        # an edge moves the side's start down by less than a coarsest cell: its finer cells
        # leave that room, so the side keeps its least cells rather than doubling them
        room = least - (per_coarse if edges[a] is not None else 0)
        finer = min(room * square / spans[a], 2.0**52) if spans[a] > 0 else 1.0
        if finer >= 2:  # the short side's cells would hold it twice over or more
            cell[a] = square / 2.0 ** np.floor(np.log2(finer))
    shape = [max(_pow2_at_least(s / c), least) for s, c in zip(spans, cell, strict=True)]
    if widen == "cell":
        for a, edge in enumerate(edges):
            if edge is not None:  # (shape >= least >= 2 per_coarse: the divisor is positive)
                cell[a] = max(cell[a], spans[a] / (shape[a] - per_coarse))
    centre = extent.mean(axis=1)
    lower = centre - np.array(shape) * cell / 2
    for a, edge in enumerate(edges):
        if edge is None:
            continue
        coarse = cell[a] * per_coarse  # the coarsest level's cell along this axis
        # a whole number of coarsest cells from ``edge``: it is a cell edge at every level.
        # The highest such start at or below the extent's (not the centred grid's, which can
        # sit a coarsest cell lower and push the end out: twice the cells, twice the memory)
        lower[a] = edge + np.floor((extent[a, 0] - edge) / coarse) * coarse
        if lower[a] + shape[a] * cell[a] < extent[a, 1]:  # the end left out: twice the cells
            shape[a] *= 2
    return lower, (shape[0], shape[1]), cell


def finest_within(extent, n_buckets, max_counts, edges=(None, None), coarsest_of=None):
    """The finest grid whose ``n_buckets`` counts over ``extent`` fit in ``max_counts``.

    Tried from the finest cells down: each ``finest`` (a power of two) with
    its sides doubled where an edge needs it, then with its cells widened
    instead (see :func:`grid`). The grid follows the extent's aspect, so a
    long thin cloud gets finer cells than a square grid of the same memory
    would give it. ``coarsest_of(finest)`` gives the coarsest level's cells
    (default 8).

    Returns
    -------
    (finest, coarsest, widen)
    """
    coarsest_of = coarsest_of or (lambda _f: 8)
    finest = 1 << 16
    while True:
        coarsest = coarsest_of(finest)
        for widen in ("double", "cell"):
            _, (gx, gy), _ = grid(extent, finest, coarsest, edges, widen)
            if n_buckets * gx * gy <= max_counts or finest <= 2:
                return finest, coarsest, widen
        finest //= 2


class Pyramid:
    """Counts per class on a pyramid of grids over ``extent`` (cells as :func:`grid` lays them).

    Parameters
    ----------
    classmap : ClassMap
    extent : ndarray (2, 2)
        ((x0, x1), (y0, y1)) wanted; widened about its centre so that the
        finest grid is a power of two on each side, and the coarsest level
        has at least two cells a side.
    edges : (float or None, float or None)
        A value per axis that must be a cell edge at every level (the
        boundary ``z[0] = 0``): on that axis the grid starts a whole number
        of coarsest cells from it, at or less than one below the extent
        (``widen``: how the grid still reaches the extent's end, see
        :func:`grid`).
    axes : (i, j)
        Columns of ``z`` drawn as x and y.
    finest : int
        Cells along the longer side at the finest level (a power of two).
    coarsest : int
        Cells along the longer side at the coarsest level.
    tiles, per_tile : int
        The sample's tiling of ``window`` and rows kept per tile.
    window : ndarray (2, 2), optional
        Where the sample's tiles lie (default the extent): rows beyond it
        join the tiles at its edges.
    n_rows : int
        Total rows (chooses the count dtype).
    overview : tuple, optional
        ``(extent, finest, coarsest, widen)`` of an overview grid (laid as
        :func:`grid` lays this one, with the same ``edges``) over the whole
        extent: every row inside it is counted there as well
        (:meth:`overview_levels`), and those beyond this grid are marked
        (:meth:`overview_only`). This grid then need only cover where nearly
        all rows lie, and a few far rows no longer coarsen every cell.
    """

    def __init__(self, classmap, extent, axes=(0, 1), finest=2048, coarsest=8, tiles=64,
                 per_tile=48, n_rows=0, edges=(None, None), widen="double", window=None,
                 overview=None):
        self.classmap, self.axes, self.edges = classmap, tuple(axes), tuple(edges)
        lower, shape, cell = grid(extent, finest, coarsest, edges, widen)
        self.extent = np.column_stack([lower, lower + np.array(shape) * cell])
        self.shape = shape  # finest (gx, gy)
        self.cell = cell  # finest (width, height)
        self.n_levels = int(np.log2(finest // coarsest)) + 1
        dtype = np.uint32 if n_rows < 2**32 else np.uint64
        self.counts = np.zeros((classmap.n_buckets, *self.shape), dtype=dtype)
        self._bucket_offset = np.arange(classmap.n_buckets, dtype=np.intp) * (shape[0] * shape[1])
        self._offset_tables: dict[str, np.ndarray] = {}
        # the overview: its own grid and levels, the counts of every row inside it, and which
        # of its cells hold rows beyond this grid
        self.overview: dict[str, Any] | None = None
        if overview is not None:
            o_extent, o_finest, o_coarsest, o_widen = overview
            o_lower, o_shape, o_cell = grid(o_extent, o_finest, o_coarsest, edges, o_widen)
            self.overview = {"lower": o_lower, "shape": o_shape, "cell": o_cell,
                             "n_levels": int(np.log2(o_finest // o_coarsest)) + 1,
                             "counts": np.zeros((classmap.n_buckets, *o_shape), dtype=dtype),
                             "only": np.zeros(o_shape, dtype=np.uint8)}
        # rows outside the extent (and the overview's, where there is one) per bucket, and those
        # of them with a non-finite coordinate: with the counts, every class's rows (a small
        # class may lie wholly outside)
        self.outside_by_bucket = np.zeros(classmap.n_buckets, dtype=np.int64)
        self.non_finite = 0
        self.tiles, self.per_tile = tiles, per_tile
        # the sample's tiles cover ``window`` (where the data are: the extent is wider, for
        # zooming out, and tiles over it were mostly empty): per axis its first cell and
        # ``tiles / cells`` in 32-bit fixed point (a tile is (ix - first) * scale >> 32);
        # rows beyond it join the edge tiles
        window = self.extent if window is None else np.asarray(window, dtype=np.float64)
        # each cell's tile, per axis (the x table holds the tile's row of tiles): two small
        # gathers a row instead of the fixed-point arithmetic
        (fx0, sx), (fy0, sy) = _fixed_window(window, lower, cell, shape, tiles)
        self._tile_of_x = _tile_table(shape[0], fx0, sx, tiles) * tiles
        self._tile_of_y = _tile_table(shape[1], fy0, sy, tiles)
        # rows beyond this grid, on the overview alone, have far_tiles² tiles of their own,
        # numbered after this grid's (see _tiles): in this grid's edge tiles, a far group of
        # 500 rows kept 50
        self.far_tiles = 0 if self.overview is None else _pow2_at_least(max(2, tiles // 2))
        n_tiles = tiles * tiles + self.far_tiles**2
        self._thresh = np.full(n_tiles, _MAX_U64, dtype=np.uint64)
        self._kept = {k: np.empty(0, t) for k, t in _FIELDS.items()}
        # candidates waiting to be ranked, merged in batches (see _merge_at), so each
        # candidate is sorted O(1) times rather than the whole sample once per block
        self._pending, self._pending_rows, self._merging = [], 0, False
        self._capacity = n_tiles * per_tile
        self._lock = threading.Lock()

    def _cells(self, x, y):
        """Rows inside the extent, their finest cells (ix, iy) and sample tiles.

        Returns ``(inside, ix, iy, tile)``; ``inside`` is None where every row
        is inside (the usual case: the extent is wide), else their indices.
        """
        (x0, x1), (y0, y1) = self.extent
        gx, gy = self.shape
        # the same cell arithmetic as cell_keys (exactly histogram2d's bins)
        fx = x - x0
        fx *= gx / (x1 - x0)
        fy = y - y0
        fy *= gy / (y1 - y0)
        # Four reductions instead of four comparisons and their masks (the cells took
        # 0.15 core-seconds per 10M rows in the pass instead of 0.18); min and max give
        # NaN for a NaN row, so it fails them and is left out below.
        if fx.min() >= 0 and fy.min() >= 0 and fx.max() < gx and fy.max() < gy:
            inside = None
            ix, iy = fx.astype(np.intp), fy.astype(np.intp)
        else:
            inside = np.flatnonzero((fx >= 0) & (fx < gx) & (fy >= 0) & (fy < gy))
            ix, iy = fx[inside].astype(np.intp), fy[inside].astype(np.intp)
        tile = self._tile_of_x.take(ix)
        tile += self._tile_of_y.take(iy)
        return inside, ix, iy, tile

    def _key_offsets(self, labels):
        """Each label's bucket times a bucket's cells: where its grid starts in the flat counts.

        Byte labels (the usual ``y``) take it from a table over the 256 values: one gather
        instead of the bucket's two and the offset's.
        """
        if labels.dtype.kind not in "iu" or labels.dtype.itemsize != 1:
            return self._bucket_offset.take(self.classmap.index(labels))
        table = self._offset_tables.get(labels.dtype.str)
        if table is None:
            values = np.arange(256, dtype=np.uint8).view(labels.dtype)
            table = self._offset_tables[labels.dtype.str] = self._bucket_offset.take(
                self.classmap.index(values))
        return table.take(labels.view(np.uint8))

    def add(self, block, start=0):
        """Add one block (``z``, ``label``) whose first row is row ``start``."""
        z = np.asarray(block["z"], dtype=np.float64)
        i, j = self.axes
        x, y = z[:, i], z[:, j]
        labels = np.asarray(block["label"]).ravel()
        offset = self._key_offsets(labels)
        inside, ix, iy, tile = self._cells(x, y)
        zero = self._on_the_boundary(x, y, inside, ix, iy, tile)
        gy = self.shape[1]
        out_b, non_finite, far = None, 0, None
        # every row's bucket only where rows leave this grid; else the candidates' alone
        bucket = None
        if inside is None:
            rows, n_inside = None, x.size
        else:
            rows, n_inside = inside + start, inside.size
            offset = offset[inside]
        if self.overview is not None or n_inside < x.size:
            bucket = self.classmap.index(labels)
        if self.overview is not None:  # every row counted there; those beyond this grid marked
            beyond = None
            if n_inside < x.size:
                beyond = np.ones(x.size, dtype=bool)
                beyond[inside] = False
                beyond = np.flatnonzero(beyond)
            far, gone = self._to_overview(x, y, bucket, beyond, zero)
        elif n_inside < x.size:  # only blocks with rows outside pay for these
            gone = np.ones(x.size, dtype=bool)
            gone[inside] = False
        if n_inside < x.size:
            assert bucket is not None  # (found above for such a block)
            out_b = np.bincount(bucket[gone], minlength=self.classmap.n_buckets)
            non_finite = int(np.count_nonzero(~(np.isfinite(x[gone]) & np.isfinite(y[gone]))))
        keys = ix  # (ix and iy are not needed after this: worked on in place)
        keys *= gy
        keys += iy
        keys += offset
        add_keys(self.counts.reshape(-1), keys, self._lock)
        if far is not None and far.size:  # rows on the overview alone are sampled too
            at = np.concatenate([inside if inside is not None else np.arange(x.size), far])
            tile = np.concatenate([tile, self._tiles(x[far], y[far])])
            rows, inside = at + start, at
        # every row inside (the usual case): the rows are start, start + 1, ..., hashed in place
        h = row_hash(rows) if inside is not None else _range_hash(start, x.size)
        keep = np.flatnonzero(h < self._thresh.take(tile))  # a stale threshold only lets more through
        at = keep if inside is None else inside[keep]
        cand = {"tile": tile[keep], "hash": h[keep], "x": x[at], "y": y[at],
                "bucket": self.classmap.index(labels[at]) if bucket is None else bucket[at],
                "cls": self.classmap.position(labels[at]), "row": at + start}
        batch = None
        with self._lock:
            if out_b is not None:
                self.outside_by_bucket += out_b
                self.non_finite += non_finite
            if keep.size:
                self._pending.append(cand)
                self._pending_rows += keep.size
                if self._pending_rows > self._merge_at() and not self._merging:
                    self._merging = True
                    batch, self._pending, self._pending_rows = self._pending, [], 0
        if batch is not None:  # ranked outside the lock: one merger, the other threads go on
            self._merge(batch)

    def _on_the_boundary(self, x, y, inside, ix, iy, tile):
        """Rows exactly at z[0] = 0 (a cell edge) moved to the cell left of it, in place.

        Such a row is on the classifier's "z[0] <= 0" side; the cells from 0 on are the other
        class's (300 rows at the model's centre were counted there). Returns their indices in
        the block, or None.
        """
        if 0.0 not in self.edges:
            return None
        a = self.edges.index(0.0)
        zero = np.flatnonzero((x if a == 0 else y) == 0.0)
        if not zero.size:
            return None
        pos = zero
        if inside is not None:  # (their places among the rows inside)
            pos = np.searchsorted(inside, zero)
            pos = pos[pos < inside.size]
            pos = pos[inside[pos] == zero[: pos.size]]
        left = round(float(-self.extent[a, 0] / self.cell[a])) - 1
        if left >= 0:
            (ix if a == 0 else iy)[pos] = left
            tile[pos] = self._tile_of_x.take(ix[pos]) + self._tile_of_y.take(iy[pos])
        return zero

    def _to_overview(self, x, y, bucket, beyond, zero=None):
        """Count every row in the overview, mark the cells of rows ``beyond`` this grid.

        Returns ``(far, gone)``: the rows beyond this grid that the overview
        holds, and those it does not (outside every grid, non-finite ones
        included), as indices.
        """
        o = self.overview
        assert o is not None  # (called only with an overview)
        (gx, gy), (x0, y0), (cx, cy) = o["shape"], o["lower"], o["cell"]
        fx = x - x0
        fx /= cx
        fy = y - y0
        fy /= cy
        ok = (fx >= 0) & (fx < gx) & (fy >= 0) & (fy < gy)  # (NaN fails)
        # every row on this grid is held, in the overview's edge cell if rounding put it a few
        # ulps beyond (the overview is laid over this grid, but centred by its own arithmetic)
        if beyond is None:
            ok[:] = True
        else:
            on_grid = np.ones(x.size, dtype=bool)
            on_grid[beyond] = False
            ok |= on_grid
        ix = np.clip(fx[ok], 0, gx - 1).astype(np.intp)
        iy = np.clip(fy[ok], 0, gy - 1).astype(np.intp)
        if zero is not None:  # rows at z[0] = 0: left of the boundary here too
            a = self.edges.index(0.0)
            left = round(float(-(x0, y0)[a] / (cx, cy)[a])) - 1
            on = zero[ok[zero]]
            if left >= 0 and on.size:
                (ix if a == 0 else iy)[np.cumsum(ok)[on] - 1] = left
        keys = bucket[ok].astype(np.intp) * gx
        keys += ix
        keys *= gy
        keys += iy
        add_keys(o["counts"].reshape(-1), keys, self._lock)
        if beyond is None:
            return None, None
        held = ok[beyond]
        far = beyond[held]
        cells = (fx[far].astype(np.intp), fy[far].astype(np.intp))
        with self._lock:
            o["only"][cells] = 1
        return far, beyond[~held]

    def _tiles(self, x, y):
        """Sample tiles of rows beyond this grid that the overview holds (see ``far_tiles``).

        Each overview cell's rows go to one of ``far_tiles²`` tiles, chosen by
        a multiplicative hash of the cell: far rows are few and scattered, so
        a tile mostly holds one or two cells, and a small far group keeps
        all its rows (over the window's tiles, it kept one tile's worth).
        """
        o = self.overview
        assert o is not None  # (called only with an overview)
        (gx, gy), (x0, y0), (cx, cy) = o["shape"], o["lower"], o["cell"]
        cells = np.clip((x - x0) / cx, 0, gx - 1).astype(np.uint64) * np.uint64(gy)
        cells += np.clip((y - y0) / cy, 0, gy - 1).astype(np.uint64)
        cells *= np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits mix all
        cells >>= np.uint64(64 - 2 * int(np.log2(self.far_tiles)))
        return cells.astype(np.intp) + self.tiles * self.tiles

    def _merge_at(self):
        # as many candidates as rows kept (at least a block's worth): a merge costs at
        # most twice the candidates it ranks, and early merges set thresholds early
        return min(self._capacity, max(self._kept["row"].size, MIN_MERGE))

    @property
    def sample(self):
        """The sampled rows: dict of ``tile``, ``hash``, ``x``, ``y``, ``bucket``, ``row``.

        And ``cls``: the row's class, its position in the classes (their number
        for a label the model lacks), which "other" does not say.
        """
        with self._lock:
            if self._pending and not self._merging:
                self._merging = True
                batch, self._pending, self._pending_rows = self._pending, [], 0
            else:
                batch = None
        if batch is not None:
            self._merge(batch)
        return self._kept

    @sample.setter
    def sample(self, rows):
        with self._lock:
            self._kept, self._pending, self._pending_rows = dict(rows), [], 0

    def _merge(self, batch):
        """Rank the kept rows and ``batch`` together; keep the per_tile smallest hashes per tile.

        Only the thread that set ``_merging`` calls this, so ``_kept`` is not
        replaced under it.
        """
        try:
            parts = [self._kept, *batch]
            new = {k: np.concatenate([p[k] for p in parts]) for k in _FIELDS}
            order = _by_tile_then_hash(new["tile"], new["hash"], self.tiles * self.tiles)
            keep, last = _first_in_tile(new["tile"][order], self.per_tile)
            at = order[keep]  # (one index for every field)
            kept = {k: v.take(at) for k, v in new.items()}
            # tiles now full admit only hashes below their largest kept one
            full_last = order[last]
            tiles, bound = new["tile"][full_last], new["hash"][full_last]
            with self._lock:
                self._kept = kept
                self._thresh[tiles] = np.minimum(self._thresh[tiles], bound)
        finally:
            with self._lock:
                self._merging = False

    @property
    def outside(self):
        """Rows outside the extent, or the overview's where there is one (non-finite ones included)."""
        return int(self.outside_by_bucket.sum())

    @property
    def drawn(self):
        """Rows per bucket (B,) on a grid: this one's, or the overview's (which holds them all)."""
        counts = self.counts if self.overview is None else self.overview["counts"]
        return counts.sum(axis=(1, 2), dtype=np.int64)

    @property
    def totals(self):
        """Rows per bucket (B,), those outside every grid included."""
        return self.drawn + self.outside_by_bucket

    @property
    def n(self):
        """Rows counted, those outside the picture included."""
        return int(self.drawn.sum()) + self.outside

    def levels(self):
        """Count grids (B, gx, gy) from the coarsest level to the finest."""
        return _halvings(self.counts, self.n_levels)

    def overview_levels(self):
        """The overview's count grids (B, gx, gy), coarsest first (every row inside it), or []."""
        o = self.overview
        return [] if o is None else _halvings(o["counts"], o["n_levels"])

    def overview_only(self):
        """(gx, gy) uint8 of the overview's finest grid: 1 where it holds rows beyond this grid."""
        return None if self.overview is None else self.overview["only"]


def _fixed_window(window, lower, cell, shape, tiles):
    """Per axis, ``window``'s first cell of a grid and ``tiles / cells`` in 32-bit fixed point.

    A row's tile is ``(cell - first) * scale >> 32``, clipped to the tiles:
    integer arithmetic on the cells the counting computes anyway. The window
    is clipped to the grid.
    """
    out = []
    for a in range(2):
        first = int(np.clip(np.floor((window[a, 0] - lower[a]) / cell[a]), 0, shape[a] - 1))
        last = int(np.clip(np.ceil((window[a, 1] - lower[a]) / cell[a]), first + 1, shape[a]))
        out.append((first, (tiles << 32) // (last - first)))
    return out


def _tile_table(cells, first, scale, tiles):
    """The tile of each of ``cells`` cells along one axis: ``(cell - first) * scale >> 32``, clipped."""
    tile = np.arange(cells, dtype=np.intp) - first
    tile *= scale
    tile >>= 32
    return np.clip(tile, 0, tiles - 1)


def _halvings(counts, n_levels):
    """``counts`` (B, gx, gy) and ``n_levels - 1`` coarser grids, each of 2 x 2 cells, coarsest first.

    Each level adds the 2 x 2 cells below it as two strided additions (rows,
    then columns): about ten times faster than summing the axes of a
    (B, gx/2, 2, gy/2, 2) view. The counts' dtype holds every sum (it holds
    the total number of rows).
    """
    out = [counts]
    for _ in range(n_levels - 1):
        c = out[-1]
        if c.shape[1] >= 2:
            c = c[:, 0::2, :] + c[:, 1::2, :]
        if c.shape[2] >= 2:
            c = c[:, :, 0::2] + c[:, :, 1::2]
        out.append(c)
    return out[::-1]
