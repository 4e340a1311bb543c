"""Mergeable per-class summaries of labelled rows (numpy only).

A :class:`ClassStats` holds, for every class ``k``, the row count ``n_k``, the
mean ``μ_k`` and scatter about that mean, always in float64. Two summaries of
disjoint rows merge exactly with the pairwise update of Chan, Golub & LeVeque,
so one pass over the data, in any chunking and any merge order, gives the same
summary as a two-pass in-memory computation up to rounding.

How much scatter is kept is the summary's ``detail``:

``"pooled"``
    one p×p within-class scatter ``S_W = Σ_k M2_k`` plus the K means. Enough
    for Fisher/LDA (no or fixed shrinkage) and the boundary-preserving axes.
``"per_class"``
    every class's own ``M2_k`` (K×p×p). Needed by QDA, OAS shrinkage and
    non-empirical priors (scikit-learn weights class covariances by priors).
``"fourth"``
    ``M2_k`` plus the centred co-moments ``Σ d_a² d_b`` and ``Σ d_a² d_b²``
    (``d = x - μ_k``) that Ledoit–Wolf ("auto") shrinkage needs; they merge
    like ``M2`` does, so "auto" stays exact under incremental updates.
"""

import hashlib
import warnings

import numpy as np

from .errors import (
    BadValuesError,
    DuplicateBatchWarning,
    IncompatibleStatsError,
    InputError,
    ModelError,
)

__all__ = ["DETAILS", "ClassStats", "centred_blocks", "check_finite", "check_matrix"]

DETAILS = ("pooled", "per_class", "fourth")
_FORMAT = "streamproj-classstats"
_FORMAT_VERSION = 1


def check_finite(X, row_offset=0, what="X"):
    """Raise :class:`BadValuesError` naming the first row of ``X`` holding NaN or inf.

    Parameters
    ----------
    X : ndarray of shape (n, p) or (n,)
    row_offset : int
        Index of ``X[0]`` in the whole array, so the message names the global row.
    what : str
        Name of the array in the message.
    """
    bad = ~np.isfinite(X)
    if bad.ndim == 2:
        bad = bad.any(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        value = X[row]
        shown = value[~np.isfinite(value)][0] if np.ndim(value) else value
        msg = (
            f"{what} has a non-finite value ({shown}) in row {row_offset + row}; "
            "drop or impute NaN/inf rows before fitting"
        )
        raise BadValuesError(msg)


def check_matrix(X, name="X"):
    """Raise :class:`InputError` unless ``X`` (anything with shape and dtype) is a 2-D real array."""
    if len(X.shape) != 2:
        msg = f"{name} must be 2-D (rows x features); got shape {tuple(X.shape)}"
        raise InputError(msg)
    if np.dtype(X.dtype).kind not in "biuf":
        msg = f"{name} must hold real numbers; got dtype {X.dtype}"
        raise InputError(msg)


def _as_labels(y, n_rows, row_offset=0, names=("X", "y")):
    """Validate a label vector and return it as a plain (non-object) numpy array."""
    y = np.asarray(y)
    xname, yname = names
    if y.ndim != 1:
        msg = f"{yname} must be 1-D with one label per row; got shape {y.shape}"
        raise InputError(msg)
    if y.shape[0] != n_rows:
        msg = f"{yname} has {y.shape[0]} labels but {xname} has {n_rows} rows; they must match"
        raise InputError(msg)
    if y.dtype == object:
        y = y.astype(str)
    if y.dtype.kind == "f":
        check_finite(y, row_offset, what=yname)
    if y.dtype.kind not in "biufUS":
        msg = f"{yname} must hold integers, floats, booleans or strings; got dtype {y.dtype}"
        raise InputError(msg)
    return y


def _shift_moments(counts, m2, m21, m22, e):
    """Re-centre per-class co-moments on a new centre.

    The moments are about the class means (so first moments vanish); ``e`` is
    ``old_mean - new_mean``, shape (K, p). Returns the moments about the new
    centre, computed in closed form from the old ones.

    Parameters
    ----------
    counts : ndarray of shape (K,)
    m2 : ndarray of shape (K, p, p)
        ``Σ d dᵀ``.
    m21 : ndarray of shape (K, p, p) or None
        ``M21[a, b] = Σ d_a² d_b``.
    m22 : ndarray of shape (K, p, p) or None
        ``M22[a, b] = Σ d_a² d_b²``.
    e : ndarray of shape (K, p)

    Returns
    -------
    m2, m21, m22 : shifted arrays (m21, m22 None when given None)
    """
    n = counts.astype(np.float64)[:, None, None]
    ea, eb = e[:, :, None], e[:, None, :]
    new_m2 = m2 + n * ea * eb
    if m21 is None:
        return new_m2, None, None
    diag = np.diagonal(m2, axis1=1, axis2=2)
    da, db = diag[:, :, None], diag[:, None, :]
    new_m21 = m21 + da * eb + 2.0 * ea * m2 + n * ea**2 * eb
    new_m22 = (
        m22
        + 2.0 * eb * m21
        + 2.0 * ea * np.swapaxes(m21, 1, 2)
        + eb**2 * da
        + ea**2 * db
        + 4.0 * ea * eb * m2
        + n * ea**2 * eb**2
    )
    return new_m2, new_m21, new_m22


def _symmetric(a):
    return 0.5 * (a + np.swapaxes(a, -1, -2))


class ClassStats:
    """Per-class count, mean and scatter of labelled rows; merges exactly with ``+``.

    Parameters
    ----------
    classes : ndarray of shape (K,)
        Sorted, unique class labels.
    counts : ndarray of shape (K,)
        Rows per class.
    means : ndarray of shape (K, p)
        Class means.
    within : ndarray of shape (p, p)
        Pooled within-class scatter ``Σ_k Σ_{i∈k} (x_i-μ_k)(x_i-μ_k)ᵀ``.
    class_scatter : ndarray of shape (K, p, p), optional
        Each class's own scatter ``M2_k`` (detail "per_class" or "fourth").
    comoment21, comoment22 : ndarray of shape (K, p, p), optional
        ``Σ d_a² d_b`` and ``Σ d_a² d_b²`` about the class means (detail "fourth").
    batches : dict of str to int, optional
        Fingerprints of the batches merged into this summary, with their row
        counts. Merging a batch that is already here is a no-op with a
        :class:`~streamproj.errors.DuplicateBatchWarning`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 1.0], [1.0, 1.0], [4.0, 0.0], [5.0, 2.0]])
    >>> y = np.array([0, 0, 1, 1])
    >>> s = ClassStats.from_rows(X[:3], y[:3]) + ClassStats.from_rows(X[3:], y[3:])
    >>> s.counts.tolist(), s.means.tolist()
    ([2, 2], [[0.5, 1.0], [4.5, 1.0]])
    """

    def __init__(
        self,
        classes,
        counts,
        means,
        within,
        class_scatter=None,
        comoment21=None,
        comoment22=None,
        batches=None,
    ):
        self.classes = np.asarray(classes)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.means = np.asarray(means, dtype=np.float64)
        self.within = np.asarray(within, dtype=np.float64)
        self.class_scatter = None if class_scatter is None else np.asarray(class_scatter, float)
        self.comoment21 = None if comoment21 is None else np.asarray(comoment21, float)
        self.comoment22 = None if comoment22 is None else np.asarray(comoment22, float)
        self.batches = dict(batches or {})
        if (self.comoment21 is None) != (self.comoment22 is None) or (
            self.comoment21 is not None and self.class_scatter is None
        ):
            msg = "fourth-moment summaries need class_scatter, comoment21 and comoment22 together"
            raise IncompatibleStatsError(msg)

    # ----------------------------------------------------------------- shape
    @property
    def detail(self):
        """``"pooled"``, ``"per_class"`` or ``"fourth"``: how much scatter is kept."""
        if self.comoment22 is not None:
            return "fourth"
        return "pooled" if self.class_scatter is None else "per_class"

    @property
    def n_features(self):
        return self.within.shape[0]

    @property
    def n_classes(self):
        return self.classes.shape[0]

    @property
    def n_samples(self):
        return int(self.counts.sum())

    # ------------------------------------------------------- derived moments
    @property
    def mean(self):
        """Overall mean of all rows, shape (p,)."""
        if self.n_samples == 0:
            return np.zeros(self.n_features)
        weights = self.counts / self.n_samples
        return weights @ self.means

    @property
    def between(self):
        """Between-class scatter ``Σ_k n_k (μ_k-μ)(μ_k-μ)ᵀ``, shape (p, p)."""
        dev = self.means - self.mean
        return _symmetric((dev * self.counts[:, None]).T @ dev)

    @property
    def total(self):
        """Total scatter about the overall mean ``S_T = S_W + S_B``, shape (p, p)."""
        return self.within + self.between

    def covariances(self, ddof=0):
        """Per-class covariances ``M2_k / (n_k - ddof)``, shape (K, p, p)."""
        self.require("per_class", "per-class covariances")
        return self.class_scatter / (self.counts - ddof)[:, None, None]

    def total_moments(self):
        """Total ``(n, M2, M21, M22)`` of all rows about the overall mean.

        Each class's moments are re-centred on the overall mean and summed; only
        summaries with detail "fourth" hold enough for this.
        """
        self.require("fourth", "total fourth moments")
        e = self.means - self.mean
        m2, m21, m22 = _shift_moments(
            self.counts, self.class_scatter, self.comoment21, self.comoment22, e
        )
        return self.n_samples, m2.sum(0), m21.sum(0), m22.sum(0)

    def require(self, detail, needed_for):
        """Raise unless this summary keeps at least ``detail``."""
        if DETAILS.index(self.detail) < DETAILS.index(detail):
            msg = (
                f"{needed_for} needs a summary with detail {detail!r}, but this one keeps "
                f"only {self.detail!r}; accumulate again with detail={detail!r}"
            )
            raise IncompatibleStatsError(msg)

    # -------------------------------------------------------------- building
    @classmethod
    def empty(cls, n_features, detail="pooled", label_dtype=np.int64):
        """A summary of no rows (the identity of ``+``)."""
        _check_detail(detail)
        p = int(n_features)
        per_class = None if detail == "pooled" else np.zeros((0, p, p))
        fourth = np.zeros((0, p, p)) if detail == "fourth" else None
        return cls(
            np.zeros(0, dtype=label_dtype),
            np.zeros(0, dtype=np.int64),
            np.zeros((0, p)),
            np.zeros((p, p)),
            per_class,
            fourth,
            None if fourth is None else fourth.copy(),
        )

    @classmethod
    def from_rows(cls, X, y, detail="pooled", row_offset=0, names=("X", "y")):
        """Summarise rows held in memory (one chunk of the streaming pass).

        Parameters
        ----------
        X : ndarray of shape (n, p)
            Rows, any real float or integer dtype; arithmetic is float64.
        y : ndarray of shape (n,)
            Labels.
        detail : {"pooled", "per_class", "fourth"}
        row_offset : int
            Global index of ``X[0]``, used in error messages only.
        names : (str, str)
            What to call X and y in error messages (e.g. ``"data.zarr/X"``).
        """
        _check_detail(detail)
        X = np.asarray(X)
        check_matrix(X, names[0])
        y = _as_labels(y, X.shape[0], row_offset, names)
        if X.shape[0] == 0:
            return cls.empty(X.shape[1], detail, y.dtype)
        classes, inverse, counts = _encode_labels(y)
        with np.errstate(over="ignore", invalid="ignore"):  # reported below as clear errors
            if detail == "pooled":
                moments = _pooled_moments(X, inverse, counts)
            else:
                moments = _class_moments(X, inverse, counts, detail == "fourth")
        # Every value of X reaches the diagonal of the scatter (as a square), so
        # one look there catches NaN, inf and overflow anywhere in the chunk.
        if not (np.isfinite(np.diagonal(moments[1])).all() and np.isfinite(moments[0]).all()):
            check_finite(X, row_offset, names[0])
            msg = (f"{names[0]} rows {row_offset}..{row_offset + X.shape[0] - 1} are too large: "
                   "their squares overflow float64; rescale the features")
            raise BadValuesError(msg)
        return cls(classes, counts, *moments)

    def update(self, X, y):
        """Merge rows held in memory into this summary, in place; returns self."""
        self += ClassStats.from_rows(X, y, self.detail)
        return self

    # --------------------------------------------------------------- merging
    def __add__(self, other):
        if not isinstance(other, ClassStats):
            return NotImplemented
        return _merge(self, other)

    def __iadd__(self, other):
        if not isinstance(other, ClassStats):
            return NotImplemented
        merged = _merge(self, other)
        self.__dict__.update(merged.__dict__)
        return self

    def copy(self):
        return ClassStats.from_arrays(self.to_arrays())

    # ----------------------------------------------------------- identity
    def fingerprint(self):
        """A hex digest of the summarised content (labels, counts, means, scatter)."""
        h = hashlib.blake2b(digest_size=16)
        h.update(str(self.classes.dtype.str).encode())
        for arr in (self.classes, self.counts, self.means, self.within):
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()

    def stamped(self):
        """A copy that records itself as one batch, so merging it twice is detected."""
        out = self.copy()
        out.batches = {self.fingerprint(): self.n_samples}
        return out

    # ------------------------------------------------------------ storage
    def to_arrays(self):
        """A dict of plain numpy arrays (no pickling needed) describing the summary."""
        arrays = {
            "format": np.array(_FORMAT),
            "format_version": np.array(_FORMAT_VERSION),
            "classes": self.classes,
            "counts": self.counts,
            "means": self.means,
            "within": self.within,
            "batch_ids": np.array(sorted(self.batches), dtype="U32"),
            "batch_rows": np.array(
                [self.batches[k] for k in sorted(self.batches)], dtype=np.int64
            ),
        }
        for name in ("class_scatter", "comoment21", "comoment22"):
            if getattr(self, name) is not None:
                arrays[name] = getattr(self, name)
        return arrays

    @classmethod
    def from_arrays(cls, arrays):
        fmt = str(arrays.get("format", ""))
        if fmt != _FORMAT:
            msg = f"not a streamproj ClassStats (format {fmt!r}, expected {_FORMAT!r})"
            raise ModelError(msg)
        version = int(arrays["format_version"])
        if version > _FORMAT_VERSION:
            msg = f"ClassStats format version {version} is newer than this streamproj reads ({_FORMAT_VERSION}); upgrade streamproj"
            raise ModelError(msg)
        batches = dict(
            zip(
                (str(b) for b in arrays["batch_ids"]),
                (int(r) for r in arrays["batch_rows"]),
                strict=True,
            )
        )
        return cls(
            np.array(arrays["classes"]),
            np.array(arrays["counts"]),
            np.array(arrays["means"]),
            np.array(arrays["within"]),
            *(np.array(arrays[k]) if k in arrays else None for k in ("class_scatter", "comoment21", "comoment22")),
            batches=batches,
        )

    def save(self, path):
        """Write the summary losslessly to an ``.npz`` file."""
        with open(path, "wb") as f:
            np.savez(f, **self.to_arrays())

    @classmethod
    def load(cls, path):
        """Read a summary written by :meth:`save`."""
        try:
            with np.load(path, allow_pickle=False) as data:
                return cls.from_arrays({k: data[k] for k in data.files})
        except FileNotFoundError:
            msg = f"no ClassStats file at {path}"
            raise ModelError(msg) from None
        except (OSError, ValueError, KeyError) as exc:
            if isinstance(exc, ModelError):
                raise
            msg = f"{path} is not a readable ClassStats file: {exc}"
            raise ModelError(msg) from None

    def __repr__(self):
        return (
            f"ClassStats(n_samples={self.n_samples}, n_features={self.n_features}, "
            f"classes={self.classes.tolist()}, detail={self.detail!r})"
        )


def _check_detail(detail):
    if detail not in DETAILS:
        msg = f"detail must be one of {', '.join(map(repr, DETAILS))}; got {detail!r}"
        raise InputError(msg)


# Rows averaged for the shift: a strided sample puts it within a few percent
# of a standard deviation of the chunk mean, at almost no cost.
_SHIFT_SAMPLE = 1024
# Above this many classes in a chunk, class sums come from a sort instead of a one-hot product.
_ONEHOT_MAX_CLASSES = 64


def _encode_labels(y):
    """Sorted classes, each row's class index, and the class counts."""
    if y.dtype.kind in "iu" and y.size:  # (bool labels take np.unique: lookup[y] would mask)
        low, high = int(y.min()), int(y.max())
        if low >= 0 and high < 1 << 20:  # small non-negative integers: no sort needed
            counts = np.bincount(y.astype(np.intp, copy=False), minlength=high + 1)
            classes = np.flatnonzero(counts)
            lookup = np.zeros(counts.shape[0], dtype=np.intp)
            lookup[classes] = np.arange(classes.shape[0])
            return classes.astype(y.dtype), lookup[y], counts[classes]
    classes, inverse = np.unique(y, return_inverse=True)
    inverse = inverse.reshape(-1)
    return classes, inverse, np.bincount(inverse, minlength=classes.shape[0])


# Rows are cast to float64 in blocks of about 4 MiB, which stay in cache between
# the cast and the product (measured 16 % faster than casting the whole chunk)
# and keep a float64 copy of the whole chunk out of memory.
_BLOCK_BYTES = 4 * 2**20


def centred_blocks(X, shift, extra_columns=0):
    """Yield ``(start, stop, block)``: rows of X minus ``shift`` in float64, block by block.

    The blocks share one cache-sized buffer (so no float64 copy of the whole
    chunk is made); ``block`` has ``extra_columns`` spare columns on the right
    for the caller, after the p shifted ones.
    """
    n, p = X.shape
    rows = min(n, max(256, _BLOCK_BYTES // (8 * (p + extra_columns))))
    # Column-major rows (a pandas DataFrame's values) get a column-major buffer:
    # the shift is then a contiguous copy instead of a transpose (20 % of pass 1).
    column_major = X.ndim == 2 and p > 1 and X.strides[0] < X.strides[1]
    buffer = np.empty((rows, p + extra_columns), order="F" if column_major else "C")
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        block = buffer[: stop - start]
        np.subtract(X[start:stop], shift, out=block[:, :p])
        yield start, stop, block


def _pooled_moments(X, inverse, counts):
    """Means and pooled within-class scatter of one chunk: one Gram product.

    The rows are shifted to near their mean while being cast to float64 (one
    fused pass per cache-sized block). With up to 64 classes, the block also
    carries one one-hot column per class, so a single symmetric product gives
    the scatter about the shift (``DᵀD``), the class sums (``Hᵀ D``) and the
    counts; the rank-K correction ``Σ_k t_k t_kᵀ / n_k`` then moves each class
    onto its own mean. The shift keeps the product free of cancellation when
    the data sit far from zero.
    """
    n, p = X.shape
    K = counts.shape[0]
    stride = max(1, n // _SHIFT_SAMPLE)
    shift = X[::stride].mean(axis=0, dtype=np.float64)
    extra = K if K <= _ONEHOT_MAX_CLASSES else 0
    product = np.zeros((p + extra, p + extra))
    sums = np.zeros((K, p))
    for start, stop, block in centred_blocks(X, shift, extra):
        if extra:
            block[:, p:] = 0.0
            block[np.arange(stop - start), p + inverse[start:stop]] = 1.0
        else:
            _add_sorted_class_sums(sums, block, inverse[start:stop])
        product += block.T @ block
    gram = product[:p, :p]
    if extra:
        sums = product[p:, :p]
    within = gram - (sums.T / counts) @ sums
    means = shift + sums / counts[:, None]
    return means, _symmetric(within)


def _add_sorted_class_sums(sums, block, inverse):
    """Add the per-class column sums of ``block`` into ``sums`` (K, p), for many classes."""
    order = np.argsort(inverse, kind="stable")
    present, starts = np.unique(inverse[order], return_index=True)
    sums[present] += np.add.reduceat(block[order], starts, axis=0)


def _class_moments(X, inverse, counts, fourth):
    """Means and per-class scatter (and co-moments) of one chunk, each class centred exactly."""
    order = np.argsort(inverse, kind="stable")
    stops = np.cumsum(counts)
    p = X.shape[1]
    K = counts.shape[0]
    means = np.empty((K, p))
    m2 = np.empty((K, p, p))
    m21 = np.empty((K, p, p)) if fourth else None
    m22 = np.empty((K, p, p)) if fourth else None
    for k in range(K):
        rows = X[order[stops[k] - counts[k] : stops[k]]]
        means[k] = rows.mean(axis=0, dtype=np.float64)
        d = np.subtract(rows, means[k], dtype=np.float64)
        residual = d.sum(axis=0)  # rounding left in the mean; removed exactly below
        m2[k] = d.T @ d - np.outer(residual, residual) / counts[k]
        if fourth:
            d2 = d * d
            m21[k] = d2.T @ d
            m22[k] = d2.T @ d2
    m2 = _symmetric(m2)
    return means, m2.sum(axis=0), m2, m21, None if m22 is None else _symmetric(m22)


def _batch_union(a, b):
    """Merged batch record; None when ``b`` (or ``a``) is already wholly inside the other."""
    ka, kb = set(a.batches), set(b.batches)
    if kb and kb <= ka:
        return None
    if ka and ka <= kb:
        return None
    common = ka & kb
    if common:
        msg = (
            f"the summaries share {len(common)} batch(es) but each also holds others; "
            "merging them would count the shared rows twice"
        )
        raise IncompatibleStatsError(msg)
    return {**a.batches, **b.batches}


def _merge(a, b):
    """Chan–Golub–LeVeque merge of two summaries of disjoint rows."""
    if a.n_features != b.n_features:
        msg = (
            f"cannot merge summaries with {a.n_features} and {b.n_features} features; "
            "both must come from arrays with the same columns"
        )
        raise IncompatibleStatsError(msg)
    if b.n_samples == 0 and not b.batches:
        return a.copy()
    if a.n_samples == 0 and not a.batches:
        return b.copy()
    batches = _batch_union(a, b)
    if batches is None:
        dup, keep = (b, a) if set(b.batches) <= set(a.batches) else (a, b)
        warnings.warn(
            f"batch of {dup.n_samples} rows (fingerprint {sorted(dup.batches)[0][:12]}…) "
            "was merged before; not counted again",
            DuplicateBatchWarning,
            stacklevel=3,
        )
        return keep.copy()
    kinds = {a.classes.dtype.kind in "US", b.classes.dtype.kind in "US"}
    if len(kinds) == 2 and a.n_classes and b.n_classes:
        msg = (
            f"cannot merge string labels with numeric labels "
            f"({a.classes[:3].tolist()} vs {b.classes[:3].tolist()})"
        )
        raise IncompatibleStatsError(msg)

    detail = DETAILS[min(DETAILS.index(a.detail), DETAILS.index(b.detail))]
    classes = np.union1d(a.classes, b.classes)
    ia = np.searchsorted(classes, a.classes)
    ib = np.searchsorted(classes, b.classes)
    K, p = classes.shape[0], a.n_features

    def spread(stats, index):
        n = np.zeros(K, dtype=np.int64)
        mu = np.zeros((K, p))
        n[index] = stats.counts
        mu[index] = stats.means
        return n, mu

    na, mua = spread(a, ia)
    nb, mub = spread(b, ib)
    n = na + nb
    safe_n = np.where(n > 0, n, 1).astype(np.float64)
    delta = mub - mua
    means = np.where((nb > 0)[:, None], mua + delta * (nb / safe_n)[:, None], mua)
    means = np.where((na > 0)[:, None], means, mub)
    weight = np.where((na > 0) & (nb > 0), na * (nb / safe_n), 0.0)
    within = a.within + b.within + (delta * weight[:, None]).T @ delta

    scatter = m21 = m22 = None
    if detail != "pooled":
        fourth = detail == "fourth"
        parts = []
        for stats, index, n_side, mu_side in ((a, ia, na, mua), (b, ib, nb, mub)):
            sel = n_side[index] > 0
            idx = index[sel]
            e = mu_side[idx] - means[idx]
            shifted = _shift_moments(
                stats.counts[sel],
                stats.class_scatter[sel],
                stats.comoment21[sel] if fourth else None,
                stats.comoment22[sel] if fourth else None,
                e,
            )
            full = [np.zeros((K, p, p)) if s is not None else None for s in shifted]
            for dst, src in zip(full, shifted, strict=True):
                if dst is not None:
                    dst[idx] = src
            parts.append(full)
        scatter = _symmetric(parts[0][0] + parts[1][0])
        if fourth:
            m21 = parts[0][1] + parts[1][1]
            m22 = _symmetric(parts[0][2] + parts[1][2])
    return ClassStats(classes, n, means, _symmetric(within), scatter, m21, m22, batches)
