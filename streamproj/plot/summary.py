"""What a static picture needs from the rows, accumulated block by block.

Per-class count grids (one per pair of axes drawn), per-class histograms of
``z[0]`` for the margin panel, the rows on the wrong side of the boundary,
the rows outside the drawn limits, and the accuracy / agreement counts. Every
piece is a sum over rows, so blocks are added in any order from any thread
and memory does not grow with the number of rows.
"""

import threading

import numpy as np

__all__ = ["PictureSummary", "add_keys", "cell_index", "cell_keys"]


def cell_index(v, lo, hi, n):
    """Each value's cell along one axis, counted from 1; 0 below ``lo`` (and NaN), ``n + 1`` above.

    ``floor((v - lo) * n / (hi - lo)) + 1``, clipped to ``[0, n + 1]``: cell
    ``c`` holds ``c - 1 <= (v - lo) * n / (hi - lo) < c`` (the cells of a
    histogram of ``n`` bins over ``[lo, hi)``), and the rows outside land in
    a border cell on either side instead of being masked out, which took
    three compacting copies a block.
    """
    f = np.subtract(v, lo, dtype=np.float64)
    f *= n / (hi - lo)
    np.floor(f, out=f)
    with np.errstate(invalid="ignore"):  # NaN or ±inf: some integer, clipped to a border
        i = f.astype(np.intp)
    i += 1
    np.clip(i, 0, n + 1, out=i)
    return i


def cell_keys(x, y, bucket, limits, bins):
    """Flat keys ``(bucket * (bx + 2) + ix) * (by + 2) + iy`` of every row, in a padded grid.

    Parameters
    ----------
    x, y : ndarray (m,)
    bucket : ndarray (m,) of int
    limits : ((x0, x1), (y0, y1))
    bins : (bx, by)

    Returns
    -------
    keys : ndarray (m,) of intp
        Cells of a ``(B, bx + 2, by + 2)`` grid: :func:`cell_index` on each
        axis, so the ``(bx, by)`` cells inside the limits are
        ``[:, 1:-1, 1:-1]`` and rows outside them fall in the border.
    """
    (x0, x1), (y0, y1) = limits
    bx, by = bins
    keys = bucket.astype(np.intp)  # a copy: worked on in place below
    keys *= bx + 2
    keys += cell_index(x, x0, x1, bx)
    keys *= by + 2
    keys += cell_index(y, y0, y1, by)
    return keys


def add_keys(flat, keys, lock):
    """``flat[k] += 1`` for every key, under ``lock``.

    One unbuffered ``np.add.at`` with a scalar of ``flat``'s own dtype: numpy's
    fast path, cheaper than a dense ``bincount`` of a big grid and than
    sorting the keys.
    """
    if keys.size == 0:
        return
    one = flat.dtype.type(1)
    with lock:
        np.add.at(flat, keys, one)


def _extremes(columns):
    """The least and greatest value of each column (contiguous ``(m,)`` arrays), NaN ignored.

    Returns ``(low, high, nan)``: ``nan[a]`` tells whether column ``a`` holds a
    NaN. ``fmin`` (which skips NaN) only for such a column: it is several
    times slower than ``min``.
    """
    d = len(columns)
    low, high, nan = np.empty(d), np.empty(d), np.zeros(d, dtype=bool)
    for a, col in enumerate(columns):
        low[a], high[a] = col.min(initial=np.inf), col.max(initial=-np.inf)
        if np.isnan(low[a]) or np.isnan(high[a]):
            nan[a] = True
            low[a], high[a] = np.fmin.reduce(col, initial=np.inf), np.fmax.reduce(
                col, initial=-np.inf)
    return low, high, nan


def _cells(v, limits, n, inside=False):
    """:func:`cell_index` minus 1: ``-1`` below ``limits`` (and NaN), ``n`` above (intp).

    The same ``floor((v - lo) * n / (hi - lo))``, clipped in floating point
    (``fmax`` sends NaN to -1). ``inside``: every value is finite and within
    the limits (the usual block), so each is already ``0 <= f < n + 1`` and
    the conversion's truncation is the floor: three passes instead of six.
    """
    lo, hi = limits
    f = np.subtract(v, lo, dtype=np.float64)
    scale = n / (hi - lo)
    f *= scale
    # (only where the scale is a finite, positive number: a subnormal span's is infinite and a
    # span past the largest float's 0, and 0 * inf or inf * 0 is a NaN the clipping must meet)
    if not (inside and 0.0 < scale < np.inf):
        np.floor(f, out=f)
        np.fmax(f, -1.0, out=f)
        np.fmin(f, float(n), out=f)
    return f.astype(np.intp)


def _left_of_zero(limits, n):
    """The cell whose right edge is 0: one of the ``n`` cells' edges over ``limits``, by construction.

    (Rounded, not floored: ``-lo * n / (hi - lo)`` may come out a hair under its integer.)
    """
    lo, hi = limits
    return round(float(-lo * n / (hi - lo))) - 1


def _finer(bins, side, k):
    return tuple(n * k if a == side else n for a, n in enumerate(bins))


class PictureSummary:
    """Sums over rows for the static picture (thread-safe :meth:`add`).

    Parameters
    ----------
    classmap : ClassMap
    limits : ndarray (d, 2)
        Drawn limits of every axis.
    pairs : list of (i, j)
        Axis pairs drawn as panels (x = axis i, y = axis j).
    bins : dict of pair to (bx, by)
    margin_bins : int
        Bins of the ``z[0]`` histograms.
    binary : (bucket of classes[0], bucket of classes[1]) or None
        For two classes, where the boundary ``z[0] = 0`` separates them.
    choice : callable or None
        ``choice(z)`` is ``(class, placed)``: the class the picture shows at
        each row's point, and whether it shows one there (not for a NaN), for
        the agreement with ``predicted``; None skips the agreement.
    own_choice : callable or None
        ``own_choice(z)``: as ``choice``, the class of each row by the best rule of the
        plane's own (an LDA solved in it), counted in ``agree_own``: the
        measure the PCA panels are judged by, for K > 2 classes.
    finer : dict of pair to (side, f), optional
        Pairs whose grid is counted ``f`` times finer along side 0 (x) or 1
        (y) than ``bins``: :meth:`grid` sums the fine cells back, and the fine
        grid draws a magnified panel of the same rows.
    """

    def __init__(self, classmap, limits, pairs, bins, margin_bins=200, binary=None,
                 choice=None, finer=None, own_choice=None):
        self.classmap = classmap
        self.limits = np.asarray(limits, dtype=np.float64)
        self.pairs = list(pairs)
        self.finer = dict(finer or {})
        self.bins = {p: _finer(b, *self.finer[p]) if p in self.finer else tuple(b)
                     for p, b in dict(bins).items()}
        nb = classmap.n_buckets
        # counted with a border of cells around them, where the rows outside the limits fall
        # (:func:`cell_keys`); the grids and the margin are views of the inside
        self._padded = {p: np.zeros((nb, self.bins[p][0] + 2, self.bins[p][1] + 2),
                                    dtype=np.int64) for p in self.pairs}
        self.grids = {p: g[:, 1:-1, 1:-1] for p, g in self._padded.items()}
        self.margin_bins = margin_bins
        self.binary = binary
        # per class, cell and (for one boundary) side of z[0] = 0, or neither (NaN): every row
        # falls in one, so the rows per class and on the wrong side are sums of it
        self._margin_padded = np.zeros((nb, margin_bins + 2, 1 if binary is None else 3),
                                       dtype=np.int64)
        self.choice, self.own_choice = choice, own_choice
        # each axis's least and greatest finite value: how far the rows outside lie
        self.extremes = np.tile([np.inf, -np.inf], (len(self.limits), 1))
        self.labelled = self.correct = self.predicted = self.agree = self.agree_own = 0
        self._outside_any = np.zeros(nb, dtype=np.int64)  # (several panels: see outside_any)
        # rows with a NaN on an axis some panel draws: outside every limit, and said as such
        self._drawn = sorted({a for p in self.pairs for a in p})
        self.nan_rows = 0
        self._lock = threading.Lock()

    def grid(self, pair):
        """The counts of ``pair`` in its square cells (fine cells of a magnified pair summed)."""
        grid = self.grids[pair]
        if pair not in self.finer:
            return grid
        side, k = self.finer[pair]
        nb, bx, by = grid.shape
        if side == 0:
            return grid.reshape(nb, bx // k, k, by).sum(axis=2)
        return grid.reshape(nb, bx, by // k, k).sum(axis=3)

    @property
    def outside_rows(self):
        """Rows outside each pair's limits, per class: ``{pair: (B,) counts}``.

        Per class, as a small class can lie wholly outside, which a total hides.
        """
        return {p: g.sum(axis=(1, 2)) - self.grids[p].sum(axis=(1, 2))
                for p, g in self._padded.items()}

    @property
    def outside(self):
        """Rows outside each pair's limits: ``{pair: count}``."""
        return {p: int(v.sum()) for p, v in self.outside_rows.items()}

    @property
    def outside_any_rows(self):
        """Rows outside the limits of some panel, per class (B,): one panel's, or missing from any.

        Each panel's own count leaves out the rows the others miss: rows far on z[1], z[2]
        and z[3] alone were 10 in the worst panel and 15 missing from some panel.
        """
        if len(self.pairs) == 1:
            return self.outside_rows[self.pairs[0]]
        return self._outside_any.copy()

    @property
    def outside_any(self):
        """Rows outside the limits of some panel (:attr:`outside_any_rows`, all classes)."""
        return int(self.outside_any_rows.sum())

    @property
    def n(self):
        """Rows summed so far."""
        return int(self.rows.sum())

    @property
    def margin(self):
        """Per-class counts of ``z[0]`` in ``margin_bins`` cells over its limits: (B, bins)."""
        return self._margin_padded[:, 1:-1].sum(axis=2)

    @property
    def rows(self):
        """Rows per class (B,)."""
        return self._margin_padded.sum(axis=(1, 2))

    @property
    def wrong(self):
        """Rows of each of the two classes on the other's side of ``z[0] = 0`` (else 0): (B,)."""
        wrong = np.zeros(self.classmap.n_buckets, dtype=np.int64)
        if self.binary is not None:
            b0, b1 = self.binary
            wrong[b0] = self._margin_padded[b0, :, 1].sum()  # z[0] > 0
            wrong[b1] = self._margin_padded[b1, :, 0].sum()  # z[0] <= 0 (NaN is on neither)
        return wrong

    def add(self, block, _start=0):
        """Add one block: ``z`` (m, d), ``label`` (m,), optional ``y`` and ``predicted``."""
        # column-major (one copy): a column of the row-major (m, d) block is strided, and every
        # reduction and cell index below, and the choices' z[:, 0], took 2 to 7 times as long
        z = np.asfortranarray(block["z"], dtype=np.float64)
        bucket = self.classmap.index(block["label"])
        columns = [z[:, a] for a in range(len(self.extremes))]
        low, high, nan = _extremes(columns)
        inside = ~nan & (low >= self.limits[:, 0]) & (high <= self.limits[:, 1])
        # a row exactly at z[0] = 0 is on the classifier's "z[0] <= 0" side: in the cell left of
        # the boundary (a cell edge), not floor's cell from 0 on (300 rows at the centre were
        # drawn on the other class's side)
        zero = None
        if self.binary is not None and self.limits[0, 0] < 0.0 and low[0] <= 0.0 <= high[0]:
            zero = np.flatnonzero(columns[0] == 0.0)
        gone = None  # rows outside some panel (several panels: each panel's own are not all)
        for pair in self.pairs:
            i, j = pair
            bx, by = self.bins[pair]
            # (bucket * (bx + 2) + ix + 1) * (by + 2) + iy + 1: the cell in the padded grid
            keys = _cells(columns[i], self.limits[i], bx, inside[i])
            cy = _cells(columns[j], self.limits[j], by, inside[j])
            if zero is not None and zero.size and 0 in pair:
                on, n = (keys, bx) if i == 0 else (cy, by)
                on[zero] = _left_of_zero(self.limits[0], n)
            if len(self.pairs) > 1 and not (inside[i] and inside[j]):
                out = (keys < 0) | (keys >= bx) | (cy < 0) | (cy >= by)
                gone = out if gone is None else gone | out
            keys *= by + 2
            keys += cy
            offset = bucket * ((bx + 2) * (by + 2))
            offset += by + 2 + 1
            keys += offset
            add_keys(self._padded[pair].reshape(-1), keys, self._lock)
        if gone is not None:
            missed = np.bincount(bucket[gone], minlength=len(self._outside_any))
            with self._lock:
                self._outside_any += missed
        keys = _cells(columns[0], self.limits[0], self.margin_bins, inside[0])
        if zero is not None and zero.size:
            keys[zero] = _left_of_zero(self.limits[0], self.margin_bins)
        sides = self._margin_padded.shape[2]
        if sides == 3:  # the side of the boundary: cell * 3 + (z[0] > 0), + 2 where NaN
            keys *= 3
            keys += columns[0] > 0
            if nan[0]:  # (a NaN z[0] was counted on class 0's side, so class 1's wrong)
                keys += 2 * np.isnan(columns[0])
        offset = bucket * ((self.margin_bins + 2) * sides)
        offset += sides
        keys += offset
        add_keys(self._margin_padded.reshape(-1), keys, self._lock)
        nan_rows = 0
        if nan[self._drawn].any():  # (only a block holding one pays for the count)
            nan_rows = int(np.count_nonzero(np.logical_or.reduce(
                [np.isnan(columns[a]) for a in self._drawn if nan[a]])))
        correct = labelled = agree = predicted = agree_own = 0
        if "predicted" in block:
            pred = np.asarray(block["predicted"]).ravel()
            if "y" in block:
                correct = int(np.count_nonzero(np.asarray(block["y"]).ravel() == pred))
                labelled = pred.size
            if self.choice is not None:
                shown, placed = self.choice(z)
                agree = int(np.count_nonzero((shown == pred) & placed))
                predicted = pred.size
            if self.own_choice is not None:
                shown, placed = self.own_choice(z)
                agree_own = int(np.count_nonzero((shown == pred) & placed))
        with self._lock:
            np.fmin(self.extremes[:, 0], low, out=self.extremes[:, 0])
            np.fmax(self.extremes[:, 1], high, out=self.extremes[:, 1])
            self.nan_rows += nan_rows
            self.correct += correct
            self.labelled += labelled
            self.agree += agree
            self.agree_own += agree_own
            self.predicted += predicted
