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
from numbers import Integral, Real
from typing import Any

import numpy as np

from .errors import (
    BadValuesError,
    IncompatibleStatsError,
    InputError,
    ModelError,
    SummaryMemoryError,
)

__all__ = [
    "DETAILS",
    "PASS1_KERNEL",
    "PASS1_KERNELS",
    "ClassStats",
    "as_labels",
    "bfloat16_to_float32",
    "centred_blocks",
    "check_bfloat16_rows",
    "check_finite",
    "check_matrix",
    "check_summary_memory",
    "chunk_nbytes",
    "format_bytes",
    "hash_c_order",
    "parse_memory",
    "subtract_rows",
    "summary_nbytes",
]

DETAILS = ("pooled", "per_class", "fourth")

# Which blocking pass 1 sums a chunk's rows in. The blocks set the order of the
# additions, so the same rows summed under another kernel differ in the last bits:
# a model's ledger records each batch's kernel, and ``update --verify`` re-reads a
# batch with the kernel that summed it. 1: blocks of _MIN_BLOCK_ROWS rows at least
# at every width (every batch recorded without a kernel); 2: _MIN_PRODUCT_ROWS below
# _PANEL_MIN_WIDTH; 3: on a GPU through CuPy (:mod:`streamproj.gpu`, cuBLAS's order).
PASS1_KERNEL = 2
PASS1_KERNELS = (1, 2, 3)
_GPU_KERNEL = 3

_FORMAT = "streamproj-classstats"
_FORMAT_VERSION = 1


def check_finite(X: np.ndarray, row_offset: int = 0, what: str = "X") -> None:
    """Raise :class:`BadValuesError` naming the first row of ``X`` holding NaN or inf.

    Parameters
    ----------
    X : ndarray of shape (n, p) or (n,)
    row_offset : int
        Index of ``X[0]`` in the whole array, so the message names the global row.
    what : str
        Name of the array in the message. One with a ``locate(row)`` method
        (rows of several inputs, one after another) gives the input holding
        the row and the row within it.
    """
    bad = ~np.isfinite(X)
    if bad.ndim == 2:
        bad = bad.any(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        value = X[row]
        where = ""
        if np.ndim(value):
            column = int(np.flatnonzero(~np.isfinite(value))[0])
            shown, where = value[column], f" (column {column})"
        else:
            shown = value
        at = row_offset + row
        locate = getattr(what, "locate", None)
        if callable(locate):
            what, at = locate(at)
        msg = (
            f"{what} has a non-finite value ({shown}) in row {at}{where}; "
            "drop those rows or impute their NaN/inf values"
        )
        error = BadValuesError(msg)
        error.row = row_offset + row  # (the row of the whole array: an earlier one is looked for)
        raise error


def check_matrix(X: Any, name: str = "X") -> None:
    """Raise :class:`InputError` unless ``X`` (anything with shape and dtype) is a 2-D real array."""
    if len(X.shape) != 2:
        msg = f"{name} must be 2-D (rows x features); got shape {tuple(X.shape)}"
        raise InputError(msg)
    if np.dtype(X.dtype).kind not in "biuf":
        msg = f"{name} must hold real numbers; got dtype {X.dtype}"
        raise InputError(msg)


def _stored_fault(arrays):
    """What makes stored summary arrays no summary (naming the array); None when nothing does.

    Shapes as ``within``'s p and the K classes say, real numbers, finite
    values, whole non-negative counts, sorted distinct classes: a summary
    edited by hand otherwise merged silently (reversed classes turned the
    boundary round) or failed with a traceback at the next update.
    """
    for name in ("classes", "counts", "means", "within"):
        if name not in arrays:
            return f"it lacks {name!r}"
    shaped = {name: np.asarray(arrays[name]) for name in (
        "classes", "counts", "means", "within", "mean_residuals", "class_scatter",
        "comoment21", "comoment22") if name in arrays}
    classes, counts, within = shaped["classes"], shaped["counts"], shaped["within"]
    if within.ndim != 2 or within.shape[0] != within.shape[1]:
        return f"its 'within' has shape {within.shape}; it must be square (p, p)"
    if classes.ndim != 1 or classes.dtype.kind not in "biufUS":
        return (f"its 'classes' (shape {classes.shape}, dtype {classes.dtype}) must be a list of "
                "labels")
    k, p = classes.shape[0], within.shape[0]
    if counts.shape != (k,) or counts.dtype.kind not in "iu":
        return (f"its 'counts' (shape {counts.shape}, dtype {counts.dtype}) must be {k} whole "
                f"numbers, one per class")
    for name, arr in shaped.items():
        if name in ("classes", "counts", "within"):
            continue
        want = (k, p) if name in ("means", "mean_residuals") else (k, p, p)
        if arr.shape != want:
            return (f"its {name!r} has shape {arr.shape}; {k} classes of {p} features "
                    f"need {want}")
    for name, arr in shaped.items():
        if name == "classes":
            continue
        if arr.dtype.kind not in "iuf":
            return f"its {name!r} is not numbers (dtype {arr.dtype})"
        if not np.isfinite(arr).all():
            return f"its {name!r} holds NaN or infinity"
    if (counts < 0).any():
        return f"its 'counts' hold a negative count ({counts.min()})"
    if not np.array_equal(np.unique(classes), classes):
        return f"its 'classes' ({classes[:6].tolist()}) are not sorted distinct labels"
    return None


def _is_missing(value):
    """True for None, NaN, pandas' NA/NaT and anything else that is not equal to itself."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):  # pandas.NA: its comparisons are NA, and bool(NA) raises
        return True


def _label_kind(value):
    """The kind of one Python label, for deciding an object array's dtype."""
    if isinstance(value, bool | np.bool_):
        return "bool"
    if isinstance(value, Integral):
        return "int"
    if isinstance(value, Real):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, bytes):
        return "bytes"
    return type(value).__name__


def _float_holds(integer):
    """True when float64 holds the Python int ``integer`` exactly (compared as Python ints)."""
    try:
        return int(float(integer)) == integer
    except OverflowError:
        return False


def _object_labels(y, row_offset, yname):
    """An object (or missing-aware string) label array as a plain numpy array of one dtype."""
    values = y.tolist()
    for row, value in enumerate(values):
        if _is_missing(value):
            msg = (
                f"{yname} has a missing label ({value!r}) in row {row_offset + row}; "
                "drop those rows or give them a label"
            )
            raise BadValuesError(msg)
    kinds = {_label_kind(v) for v in values}
    if kinds == {"int", "float"}:  # numbers: as floats, unless that would merge two integers
        for row, value in enumerate(values):
            if _label_kind(value) == "int" and not _float_holds(int(value)):
                digits = str(int(value))
                shown = digits if len(digits) <= 30 else f"{digits[:12]}… ({len(digits)} digits)"
                msg = (f"{yname} (dtype {y.dtype}) mixes float labels with the integer label "
                       f"{shown} in row {row_offset + row}, which float64 cannot hold exactly; "
                       "convert the labels to one type, e.g. y.astype(str)")
                raise InputError(msg)
        kinds = {"float"}
    if len(kinds) > 1 or not kinds <= {"bool", "int", "float", "str", "bytes"}:
        msg = (
            f"{yname} (dtype {y.dtype}) holds labels of mixed or unsupported types "
            f"({', '.join(sorted(kinds))}); convert it to one type, e.g. y.astype(str)"
        )
        raise InputError(msg)
    kind = kinds.pop() if kinds else "str"
    dtype = {"bool": bool, "float": np.float64, "str": str, "bytes": bytes}.get(kind)
    if kind != "int":
        return np.array(values, dtype=dtype).reshape(y.shape)
    try:
        out = np.array(values)
    except OverflowError:
        out = None
    if out is None or out.dtype.kind not in "iu":
        # beyond 64 bits (object), or int64 with uint64 labels (float64: 2**63 + 1 was 2**63)
        out = np.array(values, dtype=_integer_dtype([int(v) for v in values], y.dtype, yname))
    return out.reshape(y.shape)


def _integer_dtype(values, dtype, yname):
    """int64, or uint64 for labels above its range: the one that holds every label exactly.

    (numpy makes the Python ints ``[5, 2**63]`` float64, where ``2**63 + 1`` is ``2**63``:
    two classes became one.) Labels that no 64-bit integer holds are refused.
    """
    low, high = min(values, default=0), max(values, default=0)
    if np.iinfo(np.int64).min <= low and high <= np.iinfo(np.int64).max:
        return np.int64
    if low >= 0 and high <= np.iinfo(np.uint64).max:
        return np.uint64
    if low < np.iinfo(np.int64).min or high > np.iinfo(np.uint64).max:
        msg = f"{yname} (dtype {dtype}) holds integer labels that do not fit in 64 bits"
    else:
        msg = (f"{yname} (dtype {dtype}) holds negative integer labels and labels above "
               f"{np.iinfo(np.int64).max}, which no 64-bit integer type holds together; "
               "convert the labels to strings")
    raise InputError(msg)


def _label_array(y):
    """``np.asarray(y)``, but a list of numbers typed one by one, as an object array's are.

    (numpy makes the Python ints ``[5, 2**63]`` float64, merging ``2**63 + 1`` with ``2**63``.)
    """
    array = np.asarray(y)
    if not hasattr(y, "dtype") and array.dtype.kind == "f" and array.size:
        return np.array(y, dtype=object)
    return array


def as_labels(y, row_offset=0, name="y"):
    """A label vector as a numpy array that sorts and compares exactly, or a clear error.

    bool, integers of any width and sign, floats and fixed-width strings pass
    through unchanged (so the classes keep the labels' dtype); an object
    array of strings (or of numbers, or of bools) and numpy's variable-width
    ``StringDType`` become fixed-width arrays of that type. Missing labels
    (NaN, None, NA) raise :class:`BadValuesError` naming the first such row;
    object arrays mixing types and other dtypes raise :class:`InputError`
    naming the dtype.

    Parameters
    ----------
    y : ndarray of shape (n,)
    row_offset : int
        Global index of ``y[0]``, for error messages.
    name : str
        What to call ``y`` in error messages.
    """
    y = _label_array(y)
    kind = y.dtype.kind
    if kind == "O" or (kind == "T" and hasattr(y.dtype, "na_object")):
        y = _object_labels(y.astype(object), row_offset, name)
    elif kind == "T":
        width = int(np.strings.str_len(y).max()) if y.size else 1
        y = y.astype(f"U{max(width, 1)}")
    if y.dtype.kind == "f":
        bad = np.isnan(y)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            msg = (
                f"{name} has a missing label (nan) in row {row_offset + row}; "
                "drop those rows or give them a label"
            )
            raise BadValuesError(msg)
    if y.dtype.kind not in "biufUS":
        msg = f"{name} must hold integers, floats, booleans or strings; got dtype {y.dtype}"
        raise InputError(msg)
    return y


def _as_labels(y, n_rows, row_offset=0, names=("X", "y")):
    """Validate a label vector against the row count and return it via :func:`as_labels`."""
    y = _label_array(y)
    xname, yname = names
    if y.ndim != 1:
        msg = f"{yname} must be 1-D with one label per row; got shape {y.shape}"
        raise InputError(msg)
    if y.shape[0] != n_rows:
        msg = f"{yname} has {y.shape[0]} labels but {xname} has {n_rows} rows; they must match"
        raise InputError(msg)
    return as_labels(y, row_offset, yname)


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
    # (copies re-centred in place: the one formula, whose order of additions the ledgers'
    # fingerprints of merged summaries depend on)
    new_m2, new_m21, new_m22 = (None if m is None else np.array(m, dtype=np.float64)
                                for m in (m2, m21, m22))
    _shift_moments_in_place(counts, new_m2, new_m21, new_m22, e)
    return new_m2, new_m21, new_m22


def _shift_moments_in_place(counts, m2, m21, m22, e):
    """:func:`_shift_moments` in the moments' own memory (``m2``, ``m21``, ``m22`` are rewritten).

    Each term is formed in one (K, p, p) scratch array and added in the order
    the closed form is written (``m22`` first: it reads the old ``m21`` and
    ``m2``, then ``m21``, then ``m2``), so the sums are bit for bit those of
    the closed form evaluated as written, which summaries in existing ledgers
    were merged with (evaluated as written it made 13 (K, p, p) temporaries a
    merge: 208 MB at K = 2, p = 1,000).
    """
    n = counts.astype(np.float64)[:, None, None]
    ea, eb = e[:, :, None], e[:, None, :]
    tmp = np.empty_like(m2)
    if m21 is not None:
        diag = np.diagonal(m2, axis1=1, axis2=2).copy()
        da, db = diag[:, :, None], diag[:, None, :]
        # fourth powers overflow where squares do not (spreads past 1e77): the solver that
        # reads them refuses them in one line (solvers.ledoit_wolf_covariance), no warnings
        with np.errstate(over="ignore", invalid="ignore"):
            # m22 + 2 eb m21 + 2 ea m21ᵀ + eb² da + ea² db + 4 ea eb m2 + n ea² eb²
            m22 += np.multiply(2.0 * eb, m21, out=tmp)
            m22 += np.multiply(2.0 * ea, np.swapaxes(m21, 1, 2), out=tmp)
            m22 += np.multiply(eb**2, da, out=tmp)
            m22 += np.multiply(ea**2, db, out=tmp)
            np.multiply(4.0 * ea, eb, out=tmp)
            m22 += np.multiply(tmp, m2, out=tmp)
            m22 += np.multiply(n * ea**2, eb**2, out=tmp)
            # m21 + da eb + 2 ea m2 + n ea² eb
            m21 += np.multiply(da, eb, out=tmp)
            m21 += np.multiply(2.0 * ea, m2, out=tmp)
            m21 += np.multiply(n * ea**2, eb, out=tmp)
    m2 += np.multiply(n * ea, eb, out=tmp)


def _class_moments_over(stats, index, K, fourth):
    """A partial's per-class moments over K classes (its own at ``index``), to be written in place.

    Its own memory where it holds every class (made writable); else zeros
    with its classes placed.
    """
    arrays = [stats.class_scatter, stats.comoment21 if fourth else None,
              stats.comoment22 if fourth else None]
    if np.array_equal(index, np.arange(K)):
        return [None if m is None else _writable(m) for m in arrays]
    out: list[Any] = []
    for m in arrays:
        if m is None:
            out.append(None)
            continue
        full = np.zeros((K, *m.shape[1:]))
        full[index] = m
        out.append(full)
    return out


def _symmetrize_in_place(a):
    """``0.5 * (a + aᵀ)`` of each (p, p) matrix of ``a`` into ``a``, bit for bit :func:`_symmetric`.

    Block by block over the upper triangle (both halves of a pair are one sum,
    as addition commutes), so no (K, p, p) temporary.
    """
    p = a.shape[-1]
    for k in range(a.shape[0]):
        m = a[k]
        for i0 in range(0, p, _FINISH_COLUMNS):
            i1 = min(i0 + _FINISH_COLUMNS, p)
            for j0 in range(i0, p, _FINISH_COLUMNS):
                j1 = min(j0 + _FINISH_COLUMNS, p)
                block = m[i0:i1, j0:j1] + m[j0:j1, i0:i1].T
                block *= 0.5
                m[i0:i1, j0:j1] = block
                m[j0:j1, i0:i1] = block.T


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
    mean_residuals : ndarray of shape (K, p), optional
        The part of each exact class mean that ``means`` (float64) cannot hold:
        mean = ``means + mean_residuals``. With it, differences of class means
        keep their digits when the data sit far from zero (at a mean of 1e8 a
        float64 mean is rounded by 1.5e-8, which a merge would otherwise put
        into the scatter). Default zeros.

    ``a + b`` is plain arithmetic: it counts every row of both, as
    scikit-learn's ``partial_fit`` does. Protection against merging the same
    rows twice lives where a batch has an identity (the model directory's
    ledger of sources), not here.

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
        classes: Any,
        counts: Any,
        means: Any,
        within: Any,
        class_scatter: Any = None,
        comoment21: Any = None,
        comoment22: Any = None,
        mean_residuals: Any = None,
    ) -> None:
        self.classes = np.asarray(classes)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.means = np.asarray(means, dtype=np.float64)
        self.mean_residuals = (np.zeros_like(self.means) if mean_residuals is None
                               else np.asarray(mean_residuals, dtype=np.float64))
        # (an array; only pass 1's wide partials keep _UpperPanels, until finish_partial)
        self.within: Any = (within if isinstance(within, _UpperPanels)
                            else np.asarray(within, dtype=np.float64))
        self.class_scatter = None if class_scatter is None else np.asarray(class_scatter, float)
        self.comoment21 = None if comoment21 is None else np.asarray(comoment21, float)
        self.comoment22 = None if comoment22 is None else np.asarray(comoment22, float)
        if (self.comoment21 is None) != (self.comoment22 is None) or (
            self.comoment21 is not None and self.class_scatter is None
        ):
            msg = "fourth-moment summaries need class_scatter, comoment21 and comoment22 together"
            raise IncompatibleStatsError(msg)

    # ----------------------------------------------------------------- shape
    @property
    def detail(self) -> str:
        """``"pooled"``, ``"per_class"`` or ``"fourth"``: how much scatter is kept."""
        if self.comoment22 is not None:
            return "fourth"
        return "pooled" if self.class_scatter is None else "per_class"

    @property
    def n_features(self) -> int:
        """Number of features p."""
        return self.within.shape[0]

    @property
    def n_classes(self) -> int:
        """Number of classes K."""
        return self.classes.shape[0]

    @property
    def n_samples(self) -> int:
        """Rows summarised, all classes together."""
        return int(self.counts.sum())

    # ------------------------------------------------------- derived moments
    def deviations(self, point: Any) -> np.ndarray:
        """Class means minus ``point``, (K, p), with the digits the rounded means lack."""
        return (self.means - point) + self.mean_residuals

    def _anchored_mean(self):
        """The overall mean as ``anchor + offset``: a class mean and a small correction."""
        if self.n_samples == 0:
            return np.zeros(self.n_features), np.zeros(self.n_features)
        anchor = self.means[int(np.argmax(self.counts))]
        return anchor, (self.counts / self.n_samples) @ self.deviations(anchor)

    @property
    def mean(self) -> np.ndarray:
        """Overall mean of all rows, shape (p,)."""
        anchor, offset = self._anchored_mean()
        return anchor + offset

    def mean_rounding(self) -> np.ndarray:
        """``mean - (true mean)``, (p,): what rounding :attr:`mean` to float64 changed.

        Far from the origin this is ~1e-8 per unit of offset and matters to
        anything centred on :attr:`mean` (a decision at the mean, a boundary
        point); ``mean - anchor`` is exact, the anchor being near the mean.
        """
        anchor, offset = self._anchored_mean()
        return ((anchor + offset) - anchor) - offset

    def mean_deviations(self) -> np.ndarray:
        """Class means minus the overall mean, (K, p), without cancellation far from zero."""
        anchor, offset = self._anchored_mean()
        return self.deviations(anchor) - offset

    @property
    def between(self) -> np.ndarray:
        """Between-class scatter ``Σ_k n_k (μ_k-μ)(μ_k-μ)ᵀ``, shape (p, p)."""
        dev = self.mean_deviations()
        return _symmetric((dev * self.counts[:, None]).T @ dev)

    @property
    def total(self) -> np.ndarray:
        """Total scatter about the overall mean ``S_T = S_W + S_B``, shape (p, p).

        ``S_B`` (rank K) is added into a copy of ``S_W`` in place, a block of
        columns at a time: one p×p array, where ``S_W + between`` made four
        at once (512 MB at p = 4,096).
        """
        dev = self.mean_deviations()
        out = np.array(self.within, dtype=np.float64, order="F")
        return _symmetric_update(out, self.n_features, (dev * self.counts[:, None]).T, dev)

    def covariances(self, ddof: int = 0) -> np.ndarray:
        """Per-class covariances ``M2_k / (n_k - ddof)``, shape (K, p, p)."""
        self.require("per_class", "per-class covariances")
        assert self.class_scatter is not None  # require() said so (for the type checker)
        return self.class_scatter / (self.counts - ddof)[:, None, None]

    def total_moments(self) -> tuple[Any, ...]:
        """Total ``(n, M2, M21, M22)`` of all rows about the overall mean.

        Each class's moments are re-centred on the overall mean and summed; only
        summaries with detail "fourth" hold enough for this.
        """
        self.require("fourth", "total fourth moments")
        e = self.mean_deviations()
        m2, m21, m22 = _shift_moments(
            self.counts, self.class_scatter, self.comoment21, self.comoment22, e
        )
        with np.errstate(over="ignore", invalid="ignore"):  # (fourth powers: _shift_moments_in_place)
            return self.n_samples, m2.sum(0), m21.sum(0), m22.sum(0)

    def require(self, detail: str, needed_for: str) -> None:
        """Raise unless this summary keeps at least ``detail``."""
        if DETAILS.index(self.detail) < DETAILS.index(detail):
            how = (" (the command line: fit --keep-class-scatter; BoundaryProjector("
                   "keep_class_scatter=True))" if detail == "per_class" else "")
            msg = (
                f"{needed_for} needs a summary with detail {detail!r}, but this one keeps "
                f"only {self.detail!r}; accumulate again with detail={detail!r}{how}"
            )
            raise IncompatibleStatsError(msg)

    # -------------------------------------------------------------- building
    @classmethod
    def empty(cls, n_features: int, detail: str = "pooled", label_dtype: Any = np.int64) -> "ClassStats":
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
    def from_rows(cls, X: Any, y: Any, detail: str = "pooled", row_offset: int = 0,
                  names: tuple[str, str] = ("X", "y"), bfloat16: bool = False,
                  max_bytes: int | None = None) -> "ClassStats":
        """Summarise rows held in memory (one chunk of the streaming pass).

        Parameters
        ----------
        X : ndarray of shape (n, p)
            Rows, any real float or integer dtype; arithmetic is float64 (64-bit
            integers beyond 2^53 are shifted before their cast, exactly).
        y : ndarray of shape (n,)
            Labels.
        detail : {"pooled", "per_class", "fourth"}
        row_offset : int
            Global index of ``X[0]``, used in error messages only.
        names : (str, str)
            What to call X and y in error messages (e.g. ``"data.zarr/X"``).
        bfloat16 : bool
            X holds bfloat16 values stored as uint16 (their bit patterns); they
            are converted exactly, block by block, while being cast to float64.
        max_bytes : int, optional
            Refuse (:class:`~streamproj.errors.SummaryMemoryError`) before
            allocating when this chunk's summary and working set would exceed it.
        """
        return finish_partial(partial_summary(X, y, detail, row_offset, names, bfloat16, max_bytes))

    def update(self, X: Any, y: Any) -> "ClassStats":
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

    def copy(self) -> "ClassStats":
        """An independent copy (arrays not shared)."""
        return ClassStats._of_arrays(self.to_arrays())  # (its own arrays: nothing to check)

    # ----------------------------------------------------------- identity
    def fingerprint(self) -> str:
        """A hex digest of the summarised content (labels, counts, means, scatter)."""
        h = hashlib.blake2b(digest_size=16)
        h.update(str(self.classes.dtype.str).encode())
        for arr in (self.classes, self.counts, self.means, self.within):
            hash_c_order(h, arr)
        return h.hexdigest()

    # ------------------------------------------------------------ storage
    def to_arrays(self) -> dict[str, Any]:
        """A dict of plain numpy arrays (no pickling needed) describing the summary."""
        arrays = {
            "format": np.array(_FORMAT),
            "format_version": np.array(_FORMAT_VERSION),
            "classes": self.classes,
            "counts": self.counts,
            "means": self.means,
            "within": self.within,
            "mean_residuals": self.mean_residuals,
        }
        for name in ("class_scatter", "comoment21", "comoment22"):
            if getattr(self, name) is not None:
                arrays[name] = getattr(self, name)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Any) -> "ClassStats":
        """The summary :meth:`to_arrays` gave (as stored in ``stats.npz``)."""
        fmt = str(arrays.get("format", ""))
        if fmt != _FORMAT:
            msg = f"not a streamproj ClassStats (format {fmt!r}, expected {_FORMAT!r})"
            raise ModelError(msg)
        version = int(arrays["format_version"])
        if version > _FORMAT_VERSION:
            msg = f"ClassStats format version {version} is newer than this streamproj reads ({_FORMAT_VERSION}); upgrade streamproj"
            raise ModelError(msg)
        # Files written by 0.1 also hold batch_ids/batch_rows (content fingerprints
        # used to drop repeated batches); every row now counts, so they are ignored.
        fault = _stored_fault(arrays)
        if fault is not None:  # edited or damaged: merged into a model, it gave a wrong one
            raise ModelError(fault)
        return cls._of_arrays(arrays)

    @classmethod
    def _of_arrays(cls, arrays: Any) -> "ClassStats":
        return cls(
            np.array(arrays["classes"]),
            np.array(arrays["counts"]),
            np.array(arrays["means"]),
            np.array(arrays["within"]),
            *(np.array(arrays[k]) if k in arrays else None
              for k in ("class_scatter", "comoment21", "comoment22", "mean_residuals")),
        )

    def save(self, path: Any) -> None:
        """Write the summary losslessly to an ``.npz`` file."""
        with open(path, "wb") as f:
            np.savez(f, **self.to_arrays())

    @classmethod
    def load(cls, path: Any) -> "ClassStats":
        """Read a summary written by :meth:`save`."""
        try:
            with np.load(path, allow_pickle=False) as data:
                return cls.from_arrays({k: data[k] for k in data.files})
        except FileNotFoundError:
            msg = f"no ClassStats file at {path}"
            raise ModelError(msg) from None
        except (OSError, ValueError, KeyError) as exc:
            if isinstance(exc, ModelError):  # (its message names the array, not the file)
                msg = f"{path}: {exc}"
                raise ModelError(msg) from None
            msg = f"{path} is not a readable ClassStats file: {exc}"
            raise ModelError(msg) from None

    def __repr__(self):
        return (
            f"ClassStats(n_samples={self.n_samples}, n_features={self.n_features}, "
            f"classes={self.classes.tolist()}, detail={self.detail!r})"
        )


# ------------------------------------------------------------ pass 1's partials
# Pass 1's chunk summaries and their merges keep only the upper triangle of ``within``
# (from _PANEL_MIN_WIDTH columns in _UpperPanels, half the memory); finish_partial makes
# the symmetric matrix once, at the end, instead of after every chunk and every merge.


def partial_summary(X: Any, y: Any, detail: str = "pooled", row_offset: int = 0,
                    names: tuple[str, str] = ("X", "y"), bfloat16: bool = False,
                    max_bytes: int | None = None, kernel: int = PASS1_KERNEL) -> ClassStats:
    """:meth:`ClassStats.from_rows`, but only the upper triangle of ``within`` is right.

    For pass 1: merge such partials with :func:`merge_partials` and finish the
    total with :func:`finish_partial`. ``kernel``: the blocking the rows are
    summed in (``PASS1_KERNEL``; an older one to reproduce a recorded summary
    bit for bit).
    """
    _check_detail(detail)
    X = np.asarray(X)
    check_matrix(X, names[0])
    decode = _bfloat16_decoder(X, bfloat16, names[0])
    y = _as_labels(y, X.shape[0], row_offset, names)
    if X.shape[0] == 0:
        return ClassStats.empty(X.shape[1], detail, y.dtype)
    classes, inverse, counts = _encode_labels(y)
    if max_bytes is not None:
        check_summary_memory(X.shape[1], classes.shape[0], detail, max_bytes,
                             chunk_rows=X.shape[0], itemsize=X.dtype.itemsize)
    with np.errstate(over="ignore", invalid="ignore"):  # reported below as clear errors
        if detail == "pooled":
            moments = _pooled_moments(X, inverse, counts, decode, kernel)
        else:
            moments = _class_moments(X, inverse, counts, detail == "fourth", decode, kernel)
    # Every value of X reaches the diagonal of the scatter (as a square), so
    # one look there catches NaN, inf and overflow anywhere in the chunk.
    (means, residuals), within, *per_class = moments
    class_scatter, m21, m22 = per_class if per_class else (None, None, None)
    if not (np.isfinite(_upper_diagonal(within, X.shape[1])).all() and np.isfinite(means).all()):
        check_finite(_cast_rows(X, decode), row_offset, names[0])
        row = _first_row_too_large(X, decode, inverse)
        if row is not None:
            msg = (f"{names[0]} row {row_offset + row} is too large: its squares overflow "
                   "float64; rescale the features")
        else:  # each row's squares are finite, their sum is not
            msg = (f"{names[0]} rows {row_offset}..{row_offset + X.shape[0] - 1} are too large: "
                   "their squares overflow float64; rescale the features")
        raise BadValuesError(msg)
    return ClassStats(classes, counts, means, within, class_scatter, m21, m22, residuals)


def _first_row_too_large(X, decode, inverse):
    """The first row (finite) whose deviation from its class's median squares to inf, or None.

    The median, since the chunk's class means are themselves spoilt by the
    row to be found. None where no one row is to blame (each row's squares
    finite, their sum not). Only on the way to an error (a float64 copy of the chunk).
    """
    rows = np.asarray(_cast_rows(X, decode), dtype=np.float64)
    middle = np.empty((int(inverse.max()) + 1, rows.shape[1]))
    for k in range(middle.shape[0]):
        middle[k] = np.quantile(rows[inverse == k], 0.5, axis=0, method="lower")  # (a row's value)
    with np.errstate(over="ignore", invalid="ignore"):
        dev = rows - middle[inverse]
        big = np.flatnonzero(~np.isfinite(dev * dev).all(axis=1))
    return int(big[0]) if big.size else None


def merge_partials(a: ClassStats, b: ClassStats) -> ClassStats:
    """``a + b`` of two pass-1 partials, in ``a``'s memory: neither may be used afterwards.

    Only the upper triangle of the result's ``within`` is right, as in its parts.
    Per-class moments ("per_class", "fourth") are re-centred in each part's own
    memory, ``b``'s too (pass 1's partials have this merge as their one consumer).
    """
    return _merge(a, b, partial=True)


def finish_partial(stats: ClassStats) -> ClassStats:
    """The summary a pass-1 partial stands for: its ``within`` mirrored, in place where writable."""
    within, p = stats.within, stats.n_features
    if isinstance(within, _UpperPanels):
        full = np.empty((p, p), order="F")
        for j0, j1, view in _upper_blocks(within, p):
            full[:j1, j0:j1] = view
        within = full
    stats.within = _symmetric_update(_writable(within), p)
    return stats


def _writable(within):
    """A partial's scatter, or a copy of it where its memory is read-only.

    A partial received from a dask.distributed worker may be; pass 1 otherwise
    writes its sums into the memory it has.
    """
    if isinstance(within, _UpperPanels):
        if within.buffer.flags.writeable:
            return within
        copy = within.restricted(within.n)
        copy.buffer = within.buffer.copy()
        return copy
    return within if within.flags.writeable else np.array(within, order="F")


def _two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e == a + b`` exactly (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


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
            # As an index (never a boolean mask: bool labels are classes False/True).
            codes = y.astype(np.intp, copy=False)
            counts = np.bincount(codes, minlength=high + 1)
            classes = np.flatnonzero(counts)
            lookup = np.zeros(counts.shape[0], dtype=np.intp)
            lookup[classes] = np.arange(classes.shape[0])
            return classes.astype(y.dtype), lookup[codes], counts[classes]
    classes, inverse = np.unique(y, return_inverse=True)
    inverse = inverse.reshape(-1)
    return classes, inverse, np.bincount(inverse, minlength=classes.shape[0])


# Rows are cast to float64 in blocks, which stay in cache between the cast and
# the product (measured 16 % faster than casting the whole chunk at p = 100)
# and keep a float64 copy of the whole chunk out of memory. Blocks are about
# 4 MiB, but never fewer than _MIN_BLOCK_ROWS rows: 4 MiB is 523 rows at
# p = 1,000, where numpy's product ran at 41 GFlop/s against 47 with 1,024 rows
# (one core, this machine); the column panels used from _PANEL_MIN_WIDTH columns
# on run at 52-56 GFlop/s a core with 1,024 rows at p = 2,048 and 4,096.
_BLOCK_BYTES = 4 * 2**20
_MIN_BLOCK_ROWS = 1024
# Below _PANEL_MIN_WIDTH each block's p×p product (in the scratch of gram_buffer) is added
# to the chunk's: 1,024 rows at p = 1,000 spent a fifth of the kernel on that addition. With 4,096
# rows, 10,000-row float32 chunks at p = 1,000 on two threads took 1.46 s instead of
# 1.69 s (the float64 Gram of the same rows 1.25 s; p = 500: 0.41 against 0.44 s).
_MIN_PRODUCT_ROWS = 4096


def _block_rows(n_rows, width, block_bytes=_BLOCK_BYTES, min_rows=_MIN_BLOCK_ROWS):
    """Rows per cast block of ``block_bytes`` for ``width`` float64 columns, at least ``min_rows``."""
    return max(1, min(n_rows, max(min_rows, block_bytes // (8 * max(1, width)))))


def _gram_block_rows(n_rows, width, kernel=PASS1_KERNEL):
    """Rows per block of pass 1's Gram product over ``width`` columns, as ``kernel`` blocks them."""
    if kernel not in PASS1_KERNELS:
        msg = f"unknown pass-1 kernel {kernel!r}: this streamproj knows {list(PASS1_KERNELS)}"
        raise ValueError(msg)
    small = kernel >= 2 and width < _PANEL_MIN_WIDTH
    return _block_rows(n_rows, width, min_rows=_MIN_PRODUCT_ROWS if small else _MIN_BLOCK_ROWS)


def bfloat16_to_float32(rows):
    """bfloat16 values stored as uint16, as float32 (exact: bfloat16 is float32's top half).

    Parameters
    ----------
    rows : ndarray of uint16
    """
    return (rows.astype(np.uint32) << 16).view(np.float32)


def _cast_rows(rows, decode):
    return rows if decode is None else decode(rows)


# 64-bit integers beyond ±2^53 lose their low bits when cast to float64 (at 2^60 a
# nanosecond timestamp is rounded to 256): cast before the shift came off, rows a spread
# of 1,000 apart gave a scatter 8.8e-3 off. Taken off a shift beyond 2^52 (rows near it are
# beyond 2^51, and may be beyond 2^53), such rows are split into their top 32 bits and the
# rest, each exact in float64, and the shift comes off the top part, where it cancels
# exactly (Sterbenz) for rows near it: ``x - shift`` is then rounded once, as float rows'
# are. Off a smaller shift the plain cast keeps its bits: a row it rounds, beyond 2^53, is
# then at least as far from the shift as from zero, and rounded by 2^-53 of that distance.
_EXACT_SHIFT = 2.0**52
_LOW_BITS = 0xFFFFFFFF


def _exact_integers(dtype, shift):
    """True when rows of ``dtype`` taken off ``shift`` (float64) need :func:`subtract_rows`' split."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu" or dtype.itemsize < 8 or np.size(shift) == 0:
        return False
    return bool(np.max(np.abs(shift)) > _EXACT_SHIFT)


def subtract_rows(rows: Any, shift: Any, out: Any = None, exact: bool | None = None) -> np.ndarray:
    """``rows - shift`` in float64, rounded once even for 64-bit integers beyond 2^53.

    Parameters
    ----------
    rows : ndarray
        Real rows (bool, integer or float; bfloat16 already decoded).
    shift : float64 array broadcastable to ``rows`` (may be ``out`` itself)
    out : float64 ndarray, optional
        Where to write the difference.
    exact : bool, optional
        Whether 64-bit integer rows need the exact split (default: decided from
        ``shift``; a caller taking many blocks off one shift decides it once).
    """
    if exact is None:
        exact = _exact_integers(rows.dtype, shift)
    if not exact:  # (a longdouble row is subtracted in its own precision)
        return (np.subtract(rows, shift, dtype=np.float64) if out is None
                else np.subtract(rows, shift, out=out))
    low = np.bitwise_and(rows, _LOW_BITS)
    out = np.subtract(rows - low, shift, out=out, dtype=np.float64)
    out += low
    return out


_HASH_BLOCK_BYTES = 2**22


def hash_c_order(h: Any, arr: Any) -> None:
    """Feed ``arr``'s bytes in C order to the hash ``h``, as ``h.update(arr.tobytes())`` would.

    A Fortran-ordered p×p scatter is copied to C order a few rows at a time
    rather than whole: at p = 4,096 the whole transposed copy, ``tobytes`` and
    the hash took 0.25 s alone, the row blocks and the hash 0.18 s (the hash
    itself 0.09 s); inside a projection, a model id went from 0.26 to 0.12 s.
    The digest is the same either way (the hash sees the same bytes in the
    same order).
    """
    arr = np.asarray(arr)
    if arr.ndim == 0 or arr.dtype.hasobject:
        h.update(arr.tobytes())
        return
    if arr.flags.c_contiguous:
        h.update(arr.reshape(-1).view(np.uint8))
        return
    rows = max(1, _HASH_BLOCK_BYTES // max(1, arr[0].nbytes))
    for start in range(0, arr.shape[0], rows):
        h.update(np.ascontiguousarray(arr[start:start + rows]).reshape(-1).view(np.uint8))


def centred_blocks(X, shift, extra_columns=0, decode=None, block_bytes=None,
                   kernel=PASS1_KERNEL):
    """Yield ``(start, stop, block)``: rows of X minus ``shift`` in float64, block by block.

    Each difference is rounded once (:func:`subtract_rows`: 64-bit integers too).

    The blocks share one cache-sized buffer (so no float64 copy of the whole
    chunk is made); ``block`` has ``extra_columns`` spare columns on the right
    for the caller, after the p shifted ones. ``decode`` (e.g.
    :func:`bfloat16_to_float32`) turns stored rows into numbers, block by block.
    ``block_bytes``: the buffer's size, for callers whose product needs no
    minimum number of rows (default: the Gram's blocks of pass-1 ``kernel``,
    see ``PASS1_KERNEL``).
    """
    n, p = X.shape
    if block_bytes is None:
        rows = _gram_block_rows(n, p + extra_columns, kernel)
    else:
        rows = _block_rows(n, p + extra_columns, block_bytes, min_rows=1)
    # Column-major rows (a pandas DataFrame's values) get a column-major buffer:
    # the shift is then a contiguous copy instead of a transpose (20 % of pass 1).
    column_major = X.ndim == 2 and p > 1 and X.strides[0] < X.strides[1]
    buffer = np.empty((rows, p + extra_columns), order="F" if column_major else "C")
    exact = decode is None and _exact_integers(X.dtype, shift)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        block = buffer[: stop - start]
        subtract_rows(_cast_rows(X[start:stop], decode), shift, out=block[:, :p], exact=exact)
        yield start, stop, block


def _class_shifted_blocks(X, shifts, inverse, onehot, decode=None, kernel=PASS1_KERNEL):
    """Like :func:`centred_blocks`, but row i is shifted by its own class's ``shifts[inverse[i]]``.

    With ``onehot`` the block carries K one-hot class columns after the p
    shifted ones, and the shifts are gathered by the product ``H @ shifts``
    (measured 2.5x faster than ``np.take`` for few classes); otherwise by
    ``np.take``. Either way the gathered shifts go into the cache-sized
    buffer and X is subtracted in place: no temporary.
    """
    n, p = X.shape
    K = shifts.shape[0]
    extra = K if onehot else 0
    rows = _gram_block_rows(n, p + extra, kernel)
    buffer = np.empty((rows, p + extra))
    exact = decode is None and _exact_integers(X.dtype, shifts)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        block = buffer[: stop - start]
        shifted = block[:, :p]
        if onehot:
            block[:, p:] = 0.0
            block[np.arange(stop - start), p + inverse[start:stop]] = 1.0
            np.matmul(block[:, p:], shifts, out=shifted)
        else:
            np.take(shifts, inverse[start:stop], axis=0, out=shifted)
        subtract_rows(_cast_rows(X[start:stop], decode), shifted, out=shifted, exact=exact)
        yield start, stop, block


# From this many columns the Gram is accumulated in place by column panels; below
# it numpy's ``block.T @ block`` (syrk into a temporary, then added) measured as fast.
_PANEL_MIN_WIDTH = 1024
# Columns per panel: 128-512 measured within 3 % of each other at p = 1,000-4,096.
_GRAM_PANEL = 256


def gram_buffer(width):
    """Scratch space for :func:`_add_gram` on ``width`` columns (one per concurrent task).

    A column panel from ``_PANEL_MIN_WIDTH`` columns on, else the whole
    width×width product, which every block's product then reuses: a fresh
    temporary per block cost 6 % of pass 1 at p = 1,000 (12 ms of a 10,000-row
    chunk's 250 on one core, in page faults).
    """
    return np.empty(_gram_scratch_size(width))


def _gram_scratch_size(width):
    """Values in :func:`gram_buffer` (also the memory plan's count of it)."""
    return width * _GRAM_PANEL if width >= _PANEL_MIN_WIDTH else width * width


def _panel_bounds(q):
    """``[j0, j1)`` of each ``_GRAM_PANEL``-column panel of q columns."""
    return [(j0, min(j0 + _GRAM_PANEL, q)) for j0 in range(0, q, _GRAM_PANEL)]


def _panel_sizes(q):
    """Values each panel of a q×q upper triangle holds (rows ``[0, j1)`` of its columns)."""
    return [j1 * (j1 - j0) for j0, j1 in _panel_bounds(q)]


def _product_nbytes(p, width):
    """Bytes of a chunk's Gram product of ``width`` columns (p features, see :func:`_pooled_moments`)."""
    if p >= _PANEL_MIN_WIDTH:  # the upper triangle in panels
        return 8 * sum(_panel_sizes(width))
    return 8 * width * width


class _UpperPanels:
    """The upper triangle of a q×q matrix, kept by column panels; its first ``n`` rows and columns count.

    Panel ``[j0, j1)`` (``_GRAM_PANEL`` columns) holds rows ``[0, j1)`` of its
    columns as one contiguous Fortran-ordered block, about half the memory of
    the whole matrix (at q = 4,098, 71 MB instead of 134). Pass 1's wide
    partial summaries keep their scatter so (a full array whose lower triangle
    is never written is no smaller: numpy asks for huge pages, and every one
    of them holds some of the upper triangle).
    """

    def __init__(self, q, n=None):
        self.n = q if n is None else n
        self.bounds = _panel_bounds(q)
        self.starts = np.cumsum([0, *_panel_sizes(q)]).tolist()
        self.buffer = np.zeros(self.starts[-1])

    @property
    def shape(self):
        return (self.n, self.n)

    def restricted(self, n):
        """The same panels (shared memory), of which only the first ``n`` rows and columns count."""
        out = object.__new__(_UpperPanels)
        out.__dict__.update(self.__dict__, n=n)
        return out

    def panel(self, k):
        j0, j1 = self.bounds[k]
        return self.buffer[self.starts[k] : self.starts[k + 1]].reshape((j1, j1 - j0), order="F")

    def columns(self, c0, c1, rows):
        """Rows ``[0, rows)`` of columns ``[c0, c1)`` (all in the upper triangle), as a new array."""
        out = np.empty((rows, c1 - c0))
        for c in range(c0, c1):
            k = c // _GRAM_PANEL
            out[:, c - c0] = self.panel(k)[:rows, c - self.bounds[k][0]]
        return out


def _upper_blocks(matrix, p):
    """``(j0, j1, view)``: rows ``[0, j1)`` of columns ``[j0, j1)`` of the p×p upper triangle.

    ``matrix`` is an array (its ``[:p, :p]``) or :class:`_UpperPanels`; the
    blocks are the same ``_GRAM_PANEL`` columns either way.
    """
    for k, (j0, j1) in enumerate(_panel_bounds(p)):
        if isinstance(matrix, _UpperPanels):
            yield j0, j1, matrix.panel(k)[:j1, : j1 - j0]
        else:
            yield j0, j1, matrix[:j1, j0:j1]


def _upper_diagonal(matrix, p):
    return np.concatenate([np.diagonal(view[j0:j1]) for j0, j1, view in _upper_blocks(matrix, p)])


def _add_gram(product, block, buffer):
    """``product += blockᵀ block`` in place; at least the upper triangle is right.

    ``product`` is an array or, from ``_PANEL_MIN_WIDTH`` columns, may be
    :class:`_UpperPanels` of the block's width.

    Wide blocks are multiplied one column panel at a time: panel ``[j0, j1)``
    of the upper triangle is ``block[:, :j1]ᵀ block[:, j0:j1]``, written into
    the contiguous ``buffer`` (from :func:`gram_buffer`) and added, so there
    is no second p×p temporary per block (at p = 4,096 that allocation took
    40 % of pass 1). BLAS syrk would do the same in place but scipy's wrapper
    holds the GIL, so dask's threads ran one at a time: measured on 1,024-row
    blocks, two threads, at p = 4,096: panels 0.63 s (109 GFlop/s of useful
    work), syrk 1.15 s (60), numpy's product 1.52 s (45); at p = 2,048: 0.17,
    0.31 and 0.32 s (``scripts/bench_gram.py``, docs/bench-results.md).

    Each panel is two products: the rows above its diagonal block
    (``block[:, :j0]ᵀ block[:, j0:j1]``, gemm) and the diagonal block itself
    (``dᵀ d``, which numpy hands to syrk: half of it computed). One product
    of the whole ``[0, j1)`` also computed the diagonal block's lower half,
    1/m more work for m panels (12.5 % at p = 2,048, 25 % at 1,024): the split
    took 0.254 s against 0.284 at p = 2,048 and 0.956 against 1.092 at 4,096
    (two threads, 1,024-row blocks). For full panels both give every upper
    entry the same bits (OpenBLAS runs the same kernel; tested), so summaries
    recorded under kernel 2 still verify; a narrower last panel (the one-hot
    columns, a ragged p) took other paths in BLAS and other bits, so it keeps
    the one product.
    """
    q = block.shape[1]
    if q < _PANEL_MIN_WIDTH:
        # numpy's product of a block with its own transpose is BLAS syrk, with ``out`` too
        out = buffer[: q * q].reshape((q, q), order="F")
        np.matmul(block.T, block, out=out)
        product += out
        return
    for k, (j0, j1) in enumerate(_panel_bounds(q)):
        # Fortran order: the add below then reads and writes whole columns.
        out = buffer[: j1 * (j1 - j0)].reshape((j1, j1 - j0), order="F")
        if j1 - j0 < _GRAM_PANEL:  # a narrow last panel: one product (see above)
            np.matmul(block[:, :j1].T, block[:, j0:j1], out=out)
        else:
            diagonal = block[:, j0:j1]
            if j0:
                np.matmul(block[:, :j0].T, diagonal, out=out[:j0])
            np.matmul(diagonal.T, diagonal, out=out[j0:])
        if isinstance(product, _UpperPanels):
            product.panel(k)[...] += out
        else:
            product[:j1, j0:j1] += out


# Columns per step of the in-place finishing of the Gram product: small temporaries. The
# same as the panels: a pass-1 partial then gets its low-rank terms in the same blocks
# whether kept in panels or whole, and the same bits.
_FINISH_COLUMNS = _GRAM_PANEL


def _symmetric_update(product, p, left=None, right=None):
    """``G + left @ right`` as a full symmetric p×p view, from the upper triangle of ``product``.

    ``G`` is ``product[:p, :p]`` (only its upper triangle is read). In place,
    ``_FINISH_COLUMNS`` columns at a time (no p×p temporary): each column
    block of the upper triangle gets its part of the low-rank term (none
    without ``left``) and is mirrored into the lower triangle, so the result
    is exactly symmetric.
    """
    for j0 in range(0, p, _FINISH_COLUMNS):
        j1 = min(j0 + _FINISH_COLUMNS, p)
        if left is not None:
            upper = product[:j1, j0:j1]
            upper += left[:j1] @ right[:, j0:j1]
        diagonal = product[j0:j1, j0:j1]
        diagonal[:] = np.triu(diagonal) + np.triu(diagonal, 1).T
        product[j0:j1, :j0] = product[:j0, j0:j1].T
    return product[:p, :p]


def _add_low_rank(matrix, p, left, right):
    """``matrix += left @ right`` on the upper triangle only (a pass-1 partial's scatter)."""
    for j0, j1, view in _upper_blocks(matrix, p):
        view += left[:j1] @ right[:, j0:j1]


# A class's shift in a feature more than 2^40 spreads from zero (the other classes' spread
# in it, or every feature's largest where that is 0) may round by more than the spread: its
# float64 mean of a sample of one value repeated 1e25 spreads out was ~1e9 off, and the
# scatter about the exact mean, a difference of two sums of that rounding's squares, lost
# every digit of the other classes' (0 for 195.9). Such a class's column whose values span
# less than 2^-40 of their size is shifted by one of its values instead (exact for one value
# repeated). Below the threshold the rounding costs less than 2^-76 of the scatter, and the
# shift (hence the summary's bits, which ``update --verify`` compares) is left as it was.
_NARROW = 2.0**-40


def _snap_narrow(X, inverse, shifts, spread, decode):
    """The shifts of narrow columns far from zero set to one of their values (see ``_NARROW``)."""
    scale = np.maximum(spread, _NARROW * spread.max())
    far = np.abs(shifts) * _NARROW > scale
    for k in np.flatnonzero(far.any(axis=1)):  # (rare: data this far out)
        cols = np.flatnonzero(far[k])
        values = _cast_rows(X[inverse == k], decode)[:, cols].astype(np.float64)
        low, high = values.min(axis=0), values.max(axis=0)
        narrow = (high - low) <= _NARROW * np.abs(shifts[k, cols])
        shifts[k, cols[narrow]] = low[narrow]


def _class_shifts(X, inverse, K, decode=None):
    """A point close to each class's mean, and a per-feature within-class spread.

    Each class's point is the mean of a strided sample of its rows. Classes
    too rare to appear in the sample are sampled again among the rows of the
    classes still missing (few rows, as those classes are rare), until every
    class has a point. The spread is the root mean square deviation of the
    first sample from those points.

    Returns
    -------
    shifts : ndarray of shape (K, p)
    spread : ndarray of shape (p,)
    """
    n, p = X.shape
    shifts = np.zeros((K, p))
    found = np.zeros(K, dtype=bool)
    candidates = None  # all rows
    first = None
    # 64-bit integers beyond 2^52 are averaged about one of their rows (exactly, see
    # subtract_rows): their float64 casts were up to 2^11 apart at 2^64, the spread lost
    base = None
    if decode is None and X.dtype.kind in "iu" and X.dtype.itemsize == 8:
        sample = X[:: max(1, n // _SHIFT_SAMPLE)].astype(np.float64)
        base = sample[0] if _exact_integers(X.dtype, sample) else None
    while True:
        m = n if candidates is None else candidates.shape[0]
        stride = max(1, m // _SHIFT_SAMPLE)
        pick = slice(None, None, stride) if candidates is None else candidates[::stride]
        labels = inverse[pick]
        rows = (_cast_rows(X[pick], decode).astype(np.float64) if base is None
                else subtract_rows(X[pick], base, exact=True))
        counts = np.bincount(labels, minlength=K)
        order = np.argsort(labels, kind="stable")
        present, starts = np.unique(labels[order], return_index=True)
        sums = np.zeros((K, p))
        sums[present] = np.add.reduceat(rows[order], starts, axis=0)
        new = (counts > 0) & ~found
        shifts[new] = sums[new] / counts[new, None]
        found |= new
        if first is None:
            first = (rows, labels)
        if found.all() or stride == 1:
            break
        if candidates is None:
            candidates = np.flatnonzero(~found[inverse])
        else:
            candidates = candidates[~found[inverse[candidates]]]
    rows, labels = first
    spread = np.sqrt(np.mean((rows - shifts[labels]) ** 2, axis=0))
    if base is not None:  # (each shift is as near its class as float64 holds: none to snap)
        return shifts + base, spread
    _snap_narrow(X, inverse, shifts, spread, decode)
    return shifts, spread


# One shift for all rows is kept when no class's point is further than this many
# within-class spreads from it in any feature: the correction then cancels at most
# log10(1 + 4²) ≈ 1.2 digits (16 eps relative), the same as rounding in the product
# itself, and the per-class gather (about 5 % of pass 1) is skipped.
_SHARED_SHIFT_SPREADS = 4.0


def _pooled_moments(X, inverse, counts, decode=None, kernel=PASS1_KERNEL):
    """Means and pooled within-class scatter of one chunk: one Gram product.

    Each row is shifted to near **its own class's** mean while being cast to
    float64 (one fused pass per cache-sized block). With up to 64 classes,
    the block also carries one one-hot column per class, so a single
    symmetric product gives the scatter about the shifts (``DᵀD``), the class
    sums (``Hᵀ D``) and the counts; the rank-K correction
    ``Σ_k t_k t_kᵀ / n_k`` then moves each class onto its exact mean. As each
    ``t_k / n_k`` is within a few within-class spreads, the correction
    cancels no digits however far apart the classes or the data from zero
    (one shared shift would lose ``(class distance / spread)²``: 2.7e-4
    relative at a separation of 1e6). When every class's point is within
    ``_SHARED_SHIFT_SPREADS`` spreads of their common mean, that one shared
    shift is as exact and is used.
    """
    n = X.shape[0]
    K = counts.shape[0]
    shifts, spread = _class_shifts(X, inverse, K, decode)
    common = (counts / n) @ shifts
    shared = bool(np.all(np.abs(shifts - common) <= _SHARED_SHIFT_SPREADS * spread))
    if kernel == _GPU_KERNEL:
        shifts, sums, within = _scatter_on_device(X, inverse, counts, shifts, common, shared, decode)
    else:
        shifts, sums, within = _scatter_on_cpu(X, inverse, counts, shifts, common, shared, decode,
                                               kernel)
    return _two_sum(shifts, sums / counts[:, None]), within


def _scatter_on_cpu(X, inverse, counts, shifts, common, shared, decode, kernel):
    """:func:`_pooled_moments`' shifts, class sums and scatter (a partial's upper triangle)."""
    p = X.shape[1]
    K = counts.shape[0]
    onehot = K <= _ONEHOT_MAX_CLASSES
    extra = K if onehot else 0
    if shared:
        shifts = np.broadcast_to(common, (K, p))
        blocks = centred_blocks(X, common, extra, decode, kernel=kernel)
    else:
        blocks = _class_shifted_blocks(X, shifts, inverse, onehot, decode, kernel)
    # (chosen by p alone, never by the classes: a chunk's partial must merge with any other's)
    product = (_UpperPanels(p + extra) if p >= _PANEL_MIN_WIDTH
               else np.zeros((p + extra, p + extra), order="F"))
    buffer = gram_buffer(p + extra)
    sums = np.zeros((K, p))
    for start, stop, block in blocks:
        if shared and onehot:
            block[:, p:] = 0.0
            block[np.arange(stop - start), p + inverse[start:stop]] = 1.0
        elif not onehot:
            _add_sorted_class_sums(sums, block, inverse[start:stop])
        _add_gram(product, block, buffer)
    if onehot:  # the upper triangle holds (feature, class) sums
        sums = (product.columns(p, p + K, p) if isinstance(product, _UpperPanels)
                else product[:p, p:]).T.copy()
    within = product.restricted(p) if isinstance(product, _UpperPanels) else product[:p, :p]
    _add_low_rank(within, p, sums.T / -counts, sums)
    return shifts, sums, within


def _scatter_on_device(X, inverse, counts, shifts, common, shared, decode):
    """:func:`_pooled_moments`' shifts, class sums and scatter, the products on the GPU.

    The scatter comes back in the CPU's partial layout (column panels from
    ``_PANEL_MIN_WIDTH`` columns), so it merges as the CPU's does.
    """
    from . import gpu

    p = X.shape[1]
    if shared:
        shifts = np.broadcast_to(common, shifts.shape)
    if p >= _PANEL_MIN_WIDTH:
        within = _UpperPanels(p)
        blocks = [(j0, j1, within.starts[k]) for k, (j0, j1) in enumerate(within.bounds)]
        sums, _ = gpu.class_sums_and_gram(X, inverse, counts, shifts, shared, decode is not None,
                                          blocks, within.buffer)
    else:
        sums, within = gpu.class_sums_and_gram(X, inverse, counts, shifts, shared,
                                               decode is not None)
    return shifts, sums, within


def _add_sorted_class_sums(sums, block, inverse):
    """Add the per-class column sums of ``block`` into ``sums`` (K, p), for many classes."""
    order = np.argsort(inverse, kind="stable")
    present, starts = np.unique(inverse[order], return_index=True)
    sums[present] += np.add.reduceat(block[order], starts, axis=0)


def _class_moments(X, inverse, counts, fourth, decode=None, kernel=PASS1_KERNEL):
    """Means and per-class scatter (and co-moments) of one chunk, each class centred exactly."""
    order = np.argsort(inverse, kind="stable")
    stops = np.cumsum(counts)
    if kernel == _GPU_KERNEL:
        from . import gpu

        means, residuals, m2, m21, m22 = gpu.class_moments(X, order, counts, fourth,
                                                           decode is not None)
        m2 = _symmetric(m2)
        return (_two_sum(means, residuals), m2.sum(axis=0), m2,
                m21 if fourth else None, _symmetric(m22) if fourth else None)
    p = X.shape[1]
    K = counts.shape[0]
    means = np.empty((K, p))
    residuals = np.empty((K, p))
    m2 = np.empty((K, p, p))
    # co-moments only for "fourth"; empty stand-ins keep one code path below
    m21 = np.empty((K, p, p) if fourth else (0, p, p))
    m22 = np.empty((K, p, p) if fourth else (0, p, p))
    for k in range(K):
        rows = _cast_rows(X[order[stops[k] - counts[k] : stops[k]]], decode)
        means[k] = rows.mean(axis=0, dtype=np.float64)
        wide = decode is None and _exact_integers(rows.dtype, means[k])
        if wide:  # about one of its rows (exact) plus the rest of the mean, as float64 can't hold it
            means[k] = rows[0]
            d = subtract_rows(rows, means[k], exact=True)
            rest = d.mean(axis=0)
            d -= rest
        else:
            d = np.subtract(rows, means[k], dtype=np.float64)
        residual = d.sum(axis=0)  # rounding left in the mean; removed exactly below
        residuals[k] = residual / counts[k]
        m2[k] = d.T @ d - np.outer(residual, residual) / counts[k]
        if fourth:
            # the co-moments about the exact mean: no closed-form fix like m2's for the cubes
            d -= residuals[k]
            d2 = d * d
            m21[k] = d2.T @ d
            m22[k] = d2.T @ d2
        if wide:
            residuals[k] += rest
    m2 = _symmetric(m2)
    return (_two_sum(means, residuals), m2.sum(axis=0), m2,
            m21 if fourth else None, _symmetric(m22) if fourth else None)


# ------------------------------------------------------------------ memory plan
_UNITS = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6, "G": 10**9, "GB": 10**9,
          "T": 10**12, "TB": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def summary_nbytes(n_features, n_classes, detail="pooled"):
    """Bytes a :class:`ClassStats` of this shape holds (float64 throughout).

    pooled: ``p² + 2·K·p`` (scatter, means and their residuals); per_class adds
    ``K·p²``; fourth adds ``3·K·p²`` (each class's scatter and two co-moments).
    """
    _check_detail(detail)
    p, k = int(n_features), int(n_classes)
    squares = {"pooled": 0, "per_class": 1, "fourth": 3}[detail]
    return 8 * (p * p + 2 * k * p + k + squares * k * p * p)


def chunk_nbytes(n_features, n_classes, detail, chunk_rows, itemsize=8):
    """Peak bytes one chunk's summary needs besides the running total.

    The chunk's rows as stored, the float64 cast block, and the chunk's own
    summary: for "pooled" the Gram product with its one-hot class columns (its
    upper triangle alone from ``_PANEL_MIN_WIDTH`` features) and the product's
    scratch space; for
    more detail every class's moments plus float64 copies of the class rows
    (two for "fourth": ``d`` and ``d²``).
    """
    _check_detail(detail)
    p, k, n = int(n_features), int(n_classes), int(chunk_rows)
    width = p + (k if k <= _ONEHOT_MAX_CLASSES else 0)
    rows = n * p * int(itemsize)
    if detail == "pooled":
        # the product, and the Gram's scratch (a column panel, or a whole p×p product)
        return (rows + 8 * _gram_block_rows(n, width) * width + _product_nbytes(p, width)
                + 8 * _gram_scratch_size(width))
    copies = 2 if detail == "fourth" else 1
    return rows + summary_nbytes(p, k, detail) + 8 * n * p * copies


def parse_memory(value, name="max_summary_memory"):
    """A memory budget in bytes from an int or a string such as ``"2GB"``, ``"512MiB"``, ``"1e9"``.

    None stays None (the caller's default applies: see
    :func:`streamproj.passes.default_memory_budget`). Decimal (KB, MB,
    GB, TB) and binary (KiB, MiB, GiB, TiB) units; a bare number is bytes.
    """
    if value is None:
        return None
    if isinstance(value, Integral) and not isinstance(value, bool) and int(value) > 0:
        return int(value)
    text = str(value).strip().upper().replace(" ", "")
    number = text.rstrip("KMGTIB")
    unit = text[len(number):]
    try:
        amount = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        amount = -1.0
    if isinstance(value, bool) or not (amount >= 1 and np.isfinite(amount)):
        msg = (f"{name} must be a number of bytes or a size such as '2GB' or '512MiB'; "
               f"got {value!r}")
        raise InputError(msg)
    return int(amount)


def format_bytes(n):
    """``n`` bytes as a short decimal size ("134 MB")."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def check_summary_memory(n_features, n_classes, detail, budget, chunk_rows=0, itemsize=8,
                         concurrent=1, where="", summaries=1, classes_known=True):
    """Raise :class:`SummaryMemoryError` when a summary and its working set exceed ``budget``.

    Needed: ``summaries`` summaries of this shape (one running total; a merge
    holds three: both halves re-centred and the result) plus ``concurrent``
    chunks' working sets (:func:`chunk_nbytes`). The message says what to
    change: the pooled detail or a float shrinkage, fewer features, or the budget.
    ``classes_known=False``: ``n_classes`` is a lower bound (the labels are
    not read yet), and the message says "at least".
    """
    if budget is None:
        return
    summary = int(summaries) * summary_nbytes(n_features, n_classes, detail)
    work = chunk_nbytes(n_features, n_classes, detail, chunk_rows, itemsize) if chunk_rows else 0
    need = summary + int(concurrent) * work
    if need <= budget:
        return
    k = (f"{n_classes} classes" if classes_known and n_classes > 1
         else f"at least {max(2, n_classes)} classes")
    parts = f"{format_bytes(summary)} summar{'y' if summaries == 1 else 'ies'}"
    if work:
        parts += f" + {concurrent} x {format_bytes(work)} per chunk in flight"
    if detail == "pooled":
        fix = ("reduce the number of features (e.g. a random projection) or the rows per chunk, "
               "or raise the budget")
    else:
        pooled = format_bytes(summary_nbytes(n_features, n_classes, "pooled"))
        need_what = ("shrinkage='auto' keeps 3·K·p² co-moments" if detail == "fourth" else
                     "per-class scatter (QDA, shrinkage='oas' or non-empirical priors) keeps K·p²")
        fix = (f"{need_what}; the pooled detail ({pooled}) is enough for a float shrinkage "
               "(e.g. shrinkage=0.1) or none without keep_class_scatter; or raise the budget")
    msg = (f"{where}a {detail!r} summary of {n_features} features and {k} needs about "
           f"{format_bytes(need)} ({parts}), more than max_summary_memory={format_bytes(budget)}: "
           f"{fix} (--max-summary-memory on the command line)")
    raise SummaryMemoryError(msg)


def check_bfloat16_rows(dtype: Any, name: str = "X") -> None:
    """Refuse rows that are not uint16 bit patterns for a bfloat16 reader.

    Floats read as bit patterns would be other numbers, silently (float rows 0-4
    all projected to one point).
    """
    if np.dtype(dtype) != np.uint16:
        msg = (f"{name} has dtype {np.dtype(dtype)}, but bfloat16=True reads bfloat16 values "
               "stored as uint16 bit patterns; store the raw bits as uint16, or drop bfloat16")
        raise InputError(msg)


def _bfloat16_decoder(X, bfloat16, name):
    """The decoder of bfloat16 rows stored as uint16 (None when ``bfloat16`` is off)."""
    if not bfloat16:
        return None
    check_bfloat16_rows(X.dtype, name)
    return bfloat16_to_float32


def _common_integers(a, b):
    """Signed and unsigned integer labels in one dtype that holds both exactly.

    (numpy would promote int64 with uint64 to float64, merging distinct labels.)
    """
    signed, unsigned = (a, b) if a.dtype.kind == "i" else (b, a)
    if not signed.size or signed.min() >= 0:
        return a.astype(np.uint64), b.astype(np.uint64)
    if not unsigned.size or unsigned.max() <= np.iinfo(np.int64).max:
        return a.astype(np.int64), b.astype(np.int64)
    msg = (
        f"cannot merge negative integer labels with labels above {np.iinfo(np.int64).max}: "
        "no integer dtype holds both; convert the labels to strings"
    )
    raise IncompatibleStatsError(msg)


def _utf8_text(labels):
    """Bytes labels as the text they hold in UTF-8 (other labels as they are)."""
    if labels.dtype.kind != "S":
        return labels
    try:
        return np.char.decode(labels, "utf-8")
    except UnicodeDecodeError:
        bad = next(v for v in labels.tolist() if not _is_utf8(v))
        msg = (f"cannot merge bytes labels with text labels: the label {bad!r} is not UTF-8 "
               "text; convert the labels to one type")
        raise IncompatibleStatsError(msg) from None


def _is_utf8(value):
    """Whether ``value`` (bytes) is UTF-8 text."""
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _union_classes(a, b):
    """Sorted union of two class arrays, and where each one's classes sit in it."""
    text = {a.dtype.kind in "US", b.dtype.kind in "US"}
    if len(text) == 2:
        msg = (
            f"cannot merge string labels with numeric labels "
            f"({a[:3].tolist()} vs {b[:3].tolist()})"
        )
        raise IncompatibleStatsError(msg)
    if (a.dtype.kind == "b") != (b.dtype.kind == "b"):  # numpy would make True the class 1
        msg = (f"cannot merge boolean labels with labels of dtype "
               f"{(b if a.dtype.kind == 'b' else a).dtype} ({a[:3].tolist()} vs {b[:3].tolist()}); "
               "convert the labels to one type")
        raise IncompatibleStatsError(msg)
    if {a.dtype.kind, b.dtype.kind} == {"i", "u"}:
        a, b = _common_integers(a, b)
    if {a.dtype.kind, b.dtype.kind} == {"S", "U"}:
        # bytes labels are UTF-8 text, as the sources read them (numpy decodes them as ASCII:
        # a UnicodeDecodeError traceback for b"caf\xc3\xa9")
        a, b = (_utf8_text(side) for side in (a, b))
    try:
        classes = np.union1d(a, b)
    except TypeError as exc:  # e.g. bytes and str labels
        msg = f"cannot merge labels of dtype {a.dtype} with labels of dtype {b.dtype}: {exc}"
        raise IncompatibleStatsError(msg) from None
    for side in (a, b):  # e.g. integers beyond 2**53 with floats: two labels would become one
        if side.dtype.kind in "iuf" and classes.dtype != side.dtype:
            with np.errstate(invalid="ignore"):  # 2**63 - 1 as float64 does not cast back
                inexact = side.astype(classes.dtype).astype(side.dtype) != side
            if inexact.any():
                msg = (f"cannot merge labels of dtype {a.dtype} with labels of dtype {b.dtype}: "
                       f"{classes.dtype} cannot hold the label {side[inexact][0]} exactly, so "
                       "distinct classes would merge; convert the labels to one type (e.g. strings)")
                raise IncompatibleStatsError(msg)
    return classes, np.searchsorted(classes, a), np.searchsorted(classes, b)


def _merge(a, b, partial=False):
    """Chan–Golub–LeVeque merge of two summaries of disjoint rows.

    With ``partial`` both are pass-1 partials (only the upper triangle of
    ``within`` right, see :func:`partial_summary`) and so is the result, whose
    pooled scatter is summed into ``a.within``'s own memory (``a`` must not be
    used afterwards): pass 1, whose every partial summary has one merge as its
    one consumer, then needs no new p×p array per merge (134 MB at p = 4,096).
    """
    if a.n_features != b.n_features:
        msg = (
            f"cannot merge summaries with {a.n_features} and {b.n_features} features; "
            "both must come from arrays with the same columns"
        )
        raise IncompatibleStatsError(msg)
    if b.n_samples == 0:
        return a if partial else a.copy()
    if a.n_samples == 0:
        return b if partial else b.copy()
    detail = DETAILS[min(DETAILS.index(a.detail), DETAILS.index(b.detail))]
    classes, ia, ib = _union_classes(a.classes, b.classes)
    K, p = classes.shape[0], a.n_features

    def spread(stats, index):
        n = np.zeros(K, dtype=np.int64)
        mu = np.zeros((K, p))
        lo = np.zeros((K, p))
        n[index] = stats.counts
        mu[index] = stats.means
        lo[index] = stats.mean_residuals
        return n, mu, lo

    na, mua, loa = spread(a, ia)
    nb, mub, lob = spread(b, ib)
    n = na + nb
    safe_n = np.where(n > 0, n, 1).astype(np.float64)
    # The rounded means differ exactly (they are close), the residuals add what they lack.
    delta = (mub - mua) + (lob - loa)
    both = ((na > 0) & (nb > 0))[:, None]
    hi, lo = _two_sum(mua, loa + delta * (nb / safe_n)[:, None])
    means = np.where(both, hi, np.where((na > 0)[:, None], mua, mub))
    residuals = np.where(both, lo, np.where((na > 0)[:, None], loa, lob))
    weight = np.where((na > 0) & (nb > 0), na * (nb / safe_n), 0.0)
    # a.within + b.within plus the between-halves term, made symmetric in place (no p×p temporary)
    left = (delta * weight[:, None]).T
    with np.errstate(over="ignore", invalid="ignore"):  # reported below in one line
        if partial:  # the upper triangles only, in a's memory where it may be written
            within = _writable(a.within)
            for (_, _, mine), (_, _, theirs) in zip(_upper_blocks(within, p),
                                                    _upper_blocks(b.within, p), strict=True):
                mine += theirs
            _add_low_rank(within, p, left, delta)
        else:
            within = _symmetric_update(a.within + b.within, p, left, delta)
    # Each chunk's squares were checked; their sum may still overflow (a spread of 1e153
    # over 400 rows): the scatter was inf and a solver raised scipy's bare ValueError.
    overflowed = np.flatnonzero(~np.isfinite(_upper_diagonal(within, p)))
    if overflowed.size or not np.isfinite(means).all():
        which = f"feature {int(overflowed[0])}" if overflowed.size else "a feature"
        msg = (f"{which} varies too much for float64: its squares summed over {int(n.sum())} "
               "of the rows overflow; rescale the features")
        raise BadValuesError(msg)

    scatter = m21 = m22 = None
    fourth = detail == "fourth"
    if partial and detail != "pooled":
        # both intermediates of pass 1: each re-centred in its own memory (a class it lacks
        # as zeros, which re-centre to zeros) and b's added into a's, the sums of the general
        # way below without its 13 (K, p, p) temporaries
        moments = []
        for stats, index, n_side, mu_side, lo_side in ((a, ia, na, mua, loa),
                                                       (b, ib, nb, mub, lob)):
            m2, m21, m22 = _class_moments_over(stats, index, K, fourth)
            e = (mu_side - means) + (lo_side - residuals)
            e[n_side == 0] = 0.0
            _shift_moments_in_place(n_side, m2, m21, m22, e)
            moments.append((m2, m21, m22))
        with np.errstate(over="ignore", invalid="ignore"):  # (fourth powers: as above)
            for into, added in zip(*moments, strict=True):
                if into is not None:
                    into += added
        scatter, m21, m22 = moments[0]
        _symmetrize_in_place(scatter)
        if fourth:
            _symmetrize_in_place(m22)
        return ClassStats(classes, n, means, within, scatter, m21, m22, residuals)
    if detail != "pooled":
        parts: list[list[Any]] = []
        for stats, index, n_side, mu_side, lo_side in ((a, ia, na, mua, loa),
                                                       (b, ib, nb, mub, lob)):
            sel = n_side[index] > 0
            idx = index[sel]
            e = (mu_side[idx] - means[idx]) + (lo_side[idx] - residuals[idx])
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
            with np.errstate(over="ignore", invalid="ignore"):  # (fourth powers: as above)
                m21 = parts[0][1] + parts[1][1]
                m22 = _symmetric(parts[0][2] + parts[1][2])
    return ClassStats(classes, n, means, within, scatter, m21, m22, residuals)
