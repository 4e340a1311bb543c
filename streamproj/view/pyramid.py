"""A per-class density pyramid and a bounded sample of rows, in one streaming pass.

The finest level is a grid of square cells over a fixed extent, counted per
class block by block; every coarser level sums 2 x 2 cells of the one below.
Beside it, a hashed sample keeps, in each of ``tiles x tiles`` tiles, the
``per_tile`` rows whose row-index hash is smallest: deterministic, the same
whatever the order of the blocks, dense regions thinned and sparse ones kept
whole, and bounded (``tiles² · per_tile`` rows) whatever the number of rows.
Memory is the finest grid plus the sample, flat in n.
"""

import threading

import numpy as np

from ..plot.summary import add_keys, cell_keys

__all__ = ["Pyramid", "row_hash"]

_MAX_U64 = np.iinfo(np.uint64).max


def row_hash(rows):
    """splitmix64 of the row indices: a bijection on uint64 that scatters neighbours."""
    z = np.asarray(rows).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _pow2_at_least(v):
    return 1 << max(0, int(np.ceil(np.log2(max(v, 1)))))


class Pyramid:
    """Counts per class on a pyramid of square-celled grids over ``extent``.

    Parameters
    ----------
    classmap : ClassMap
    extent : ndarray (2, 2)
        ((x0, x1), (y0, y1)) wanted; widened so that cells are square and the
        finest grid is a power of two on each side.
    axes : (i, j)
        Columns of ``z`` drawn as x and y.
    finest : int
        Cells along the longer side at the finest level (a power of two).
    coarsest : int
        Cells along the longer side at the coarsest level.
    tiles, per_tile : int
        The sample's tiling of the extent and rows kept per tile.
    n_rows : int
        Total rows (chooses the count dtype).
    """

    def __init__(self, classmap, extent, axes=(0, 1), finest=2048, coarsest=8, tiles=64,
                 per_tile=48, n_rows=0):
        self.classmap, self.axes = classmap, tuple(axes)
        extent = np.asarray(extent, dtype=np.float64)
        spans = extent[:, 1] - extent[:, 0]
        cell = spans.max() / finest
        shape = [_pow2_at_least(s / cell) for s in spans]
        centre = extent.mean(axis=1)
        self.extent = np.column_stack([centre - np.array(shape) * cell / 2,
                                       centre + np.array(shape) * cell / 2])
        self.shape = tuple(shape)  # finest (gx, gy)
        self.cell = cell
        self.n_levels = int(np.log2(finest // coarsest)) + 1
        dtype = np.uint32 if n_rows < 2**32 else np.uint64
        self.counts = np.zeros((classmap.n_buckets, *self.shape), dtype=dtype)
        self.outside = 0
        self.tiles, self.per_tile = tiles, per_tile
        self._thresh = np.full(tiles * tiles, _MAX_U64, dtype=np.uint64)
        self.sample = {"tile": np.empty(0, np.intp), "hash": np.empty(0, np.uint64),
                       "x": np.empty(0), "y": np.empty(0), "bucket": np.empty(0, np.intp),
                       "row": np.empty(0, np.int64)}
        self._lock = threading.Lock()

    def add(self, block, start=0):
        """Add one block (``z``, ``label``) whose first row is row ``start``."""
        z = np.asarray(block["z"], dtype=np.float64)
        i, j = self.axes
        x, y = z[:, i], z[:, j]
        bucket = self.classmap.index(block["label"])
        keys, inside = cell_keys(x, y, bucket, self.extent, self.shape)
        add_keys(self.counts.reshape(-1), keys, self._lock)
        gx, gy = self.shape
        cells = keys % (gx * gy)
        tile = (cells // gy) * self.tiles // gx * self.tiles + (cells % gy) * self.tiles // gy
        rows = start + np.flatnonzero(inside)
        h = row_hash(rows)
        keep = h < self._thresh[tile]  # a stale threshold only lets extra candidates through
        with self._lock:
            self.outside += int(inside.size - keys.size)
            if keep.any():
                self._merge(tile[keep], h[keep], x[inside][keep], y[inside][keep],
                            bucket[inside][keep], rows[keep])

    def _merge(self, tile, h, x, y, bucket, row):
        # only the tiles the candidates fall in are re-ranked; the rest stay as they are
        s = self.sample
        touched = np.zeros(self.tiles * self.tiles, dtype=bool)
        touched[tile] = True
        mine = touched[s["tile"]]
        cand = {"tile": tile, "hash": h, "x": x, "y": y, "bucket": bucket, "row": row}
        new = {k: np.concatenate([s[k][mine], cand[k]]) for k in s}
        order = np.lexsort((new["hash"], new["tile"]))
        t = new["tile"][order]
        first = np.searchsorted(t, t, side="left")
        rank = np.arange(t.size) - first
        kept = order[rank < self.per_tile]
        self.sample = {k: np.concatenate([s[k][~mine], new[k][kept]]) for k in s}
        # tiles now full admit only hashes below their largest kept one
        full_last = order[rank == self.per_tile - 1]
        self._thresh[new["tile"][full_last]] = new["hash"][full_last]

    @property
    def n(self):
        return int(self.counts.sum()) + self.outside

    def levels(self):
        """Count grids (B, gx, gy) from the coarsest level to the finest."""
        out = [self.counts]
        for _ in range(self.n_levels - 1):
            c = out[-1]
            b, gx, gy = c.shape
            if gx >= 2 and gy >= 2:
                c = c.reshape(b, gx // 2, 2, gy // 2, 2).sum(axis=(2, 4), dtype=c.dtype)
            elif gx >= 2:
                c = c.reshape(b, gx // 2, 2, gy).sum(axis=2, dtype=c.dtype)
            elif gy >= 2:
                c = c.reshape(b, gx, gy // 2, 2).sum(axis=3, dtype=c.dtype)
            out.append(c)
        return out[::-1]
