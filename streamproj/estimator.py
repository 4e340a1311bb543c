"""BoundaryProjector: a scikit-learn estimator over streaming class summaries."""

import contextlib
import hashlib
import re
import threading
import warnings
from collections.abc import Callable, Mapping
from numbers import Integral, Real
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import dask
import dask.array as da
import numpy as np
from scipy.special import expit, log_expit, logsumexp, softmax
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    TransformerMixin,
    _clone_parametrized,
    _fit_context,
)
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.metrics import accuracy_score
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils._param_validation import InvalidParameterError as _SklearnParamError
from sklearn.utils._set_output import _get_output_config, _wrap_data_with_container
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted, validate_data

from . import gpu, solvers, store
from ._version import __version__
from .errors import (
    IncompatibleStatsError,
    InputError,
    InvalidParameterError,
    ModelError,
    NotFittedError,
    SingularScatterError,
    StreamprojError,
)
from .passes import accumulate, first_bad_row, in_any_order, project_blocks
from .progress import local_scheduler
from .record import ModelRecord
from .stats import (
    DETAILS,
    ClassStats,
    bfloat16_to_float32,
    check_bfloat16_rows,
    hash_c_order,
    parse_memory,
    subtract_rows,
)

if TYPE_CHECKING:
    from .qda import StreamingQDA

from .validation import (
    as_dask_labels,
    as_dask_rows,
    as_labels,
    as_lazy_rows,
    block_start,
    check_discrete_classes,
    check_finite,
    check_not_lazy_frame,
    check_not_sparse,
    is_dask_frame,
    is_lazy,
    refuse_too_large,
)

__all__ = ["BoundaryProjector", "load"]

# What a model loaded by BoundaryProjector.from_state solves on first use (its LDA); the
# rest of its solution is stored.
_DEFERRED_ATTRIBUTES = ("priors_", "means_", "covariance_", "scalings_", "_score_center_",
                        "_score_coef_", "_score_offset_", "_decision_offset_")
_DEFERRED_LOCK = threading.Lock()


def _external_boundary(boundary):
    """``(coef (m, p), intercept (m,), classes or None, description)`` of a given boundary."""
    if isinstance(boundary, str | Path):
        content = store.read_boundary(boundary)
        coef, intercept, classes = content["coef"], content["intercept"], content["classes"]
        source = f"file {boundary}"
    elif isinstance(boundary, dict):
        coef, intercept = boundary["coef"], boundary["intercept"]
        classes, source = boundary.get("classes"), boundary.get("source", "coef/intercept")
    elif hasattr(boundary, "coef_") and hasattr(boundary, "intercept_"):
        coef, intercept = boundary.coef_, boundary.intercept_
        classes = getattr(boundary, "classes_", None)
        source = type(boundary).__name__
    elif isinstance(boundary, tuple | list) and len(boundary) == 2:
        coef, intercept = boundary
        classes, source = None, "coef/intercept"
    elif hasattr(boundary, "get_params") and not _may_be_linear(boundary):
        # asked before whether it is fitted: fitting would not give it a coef_
        msg = (f"boundary is a {_described(boundary)}, which is not a linear classifier: only "
               "linear boundaries are supported; give a linear classifier (coef_ and "
               "intercept_ once fitted: LogisticRegression, LinearSVC, SVC(kernel='linear'), "
               "...) or a (coef, intercept) pair")
        raise InputError(msg)
    elif hasattr(boundary, "get_params") and not _is_fitted(boundary):
        # often by a grid search, which clones (unfits) the estimators in its param grid
        msg = (f"boundary is an unfitted {type(boundary).__name__} (no coef_ and intercept_): "
               "fit it first; a param grid's estimators are cloned, which unfits them, so "
               "give a grid (coef, intercept) pairs, or dicts, instead")
        raise InputError(msg)
    else:
        msg = (
            "boundary must be None (fit LDA), a (coef, intercept) pair, a fitted linear "
            f"classifier with coef_ and intercept_, or a JSON/NPZ file; got {type(boundary).__name__}"
        )
        raise InputError(msg)
    coef = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    intercept = np.asarray(intercept, dtype=np.float64).reshape(-1)
    if coef.ndim != 2 or intercept.shape[0] != coef.shape[0]:
        msg = f"boundary coef {coef.shape} and intercept {intercept.shape} do not match"
        raise InputError(msg)
    if not (np.isfinite(coef).all() and np.isfinite(intercept).all()):
        msg = "boundary coef/intercept hold NaN or inf"
        raise InputError(msg)
    return coef, intercept, None if classes is None else np.asarray(classes), source


def _snapshot(value):
    """``value`` as kept to compare later: numbers in a list or array copied as floats."""
    if value is None or isinstance(value, str | Real):
        return value
    try:
        return np.array(value, dtype=np.float64)
    except (TypeError, ValueError):  # (a classifier, a dict, a path): the object itself
        return value


def _same_value(solved, now):
    """Whether a parameter is what it was when solved (:func:`_snapshot`): any doubt is "no"."""
    if solved is now:
        return True
    if solved is None or now is None:
        return False
    if isinstance(solved, str) or isinstance(now, str):
        return isinstance(solved, str) and isinstance(now, str) and solved == now
    if isinstance(solved, Real) and isinstance(now, Real):
        return bool(solved == now)
    if isinstance(solved, np.ndarray):
        try:
            return bool(np.array_equal(solved, np.asarray(now, dtype=np.float64)))
        except (TypeError, ValueError):
            return False
    return False


def _may_be_linear(estimator):
    """Whether a classifier without ``coef_`` (yet) may be linear once fitted.

    A kernel other than "linear", or a scikit-learn estimator outside its
    linear classifiers, is not; another library's is given the benefit of the
    doubt (told to fit it first).
    """
    # (here: sklearn.linear_model takes 0.1 s to import, for a boundary refused)
    from sklearn.linear_model._base import LinearClassifierMixin

    try:
        params = estimator.get_params(deep=False)
    except Exception:  # (no estimator after all: the caller's other checks say so)
        return True
    if "kernel" in params:
        return params["kernel"] == "linear"
    if isinstance(estimator, LinearClassifierMixin):
        return True
    return not (type(estimator).__module__ or "").startswith("sklearn.")


def _described(estimator):
    """``SVC(kernel='rbf')``, or a class name where no kernel says more."""
    kernel = estimator.get_params(deep=False).get("kernel", None)
    name = type(estimator).__name__
    return f"{name}(kernel={kernel!r})" if isinstance(kernel, str) else name


def _is_fitted(estimator):
    try:
        check_is_fitted(estimator)
    except (SklearnNotFittedError, TypeError):  # (TypeError: not an estimator after all)
        return False
    return True


def _boundary_source(boundary):
    """How ``model.json`` names a given boundary (as :func:`_external_boundary`, not reading it)."""
    if isinstance(boundary, str | Path):
        return f"file {boundary}"
    if isinstance(boundary, dict):
        return boundary.get("source", "coef/intercept")
    if hasattr(boundary, "coef_") and hasattr(boundary, "intercept_"):
        return type(boundary).__name__
    return "coef/intercept"


def _check_boundary_columns(boundary, names):
    """Refuse a fitted classifier whose columns (``feature_names_in_``) are not X's, in order.

    Its coefficients are applied by position, so a classifier fitted on the
    same columns in another order would silently weigh the wrong features.
    """
    theirs = getattr(boundary, "feature_names_in_", None)
    if theirs is None:
        return
    if names is None:  # as scikit-learn does for a classifier's own predict
        warnings.warn(f"X has no column names, but the boundary ({type(boundary).__name__}) was "
                      "fitted with them: its coefficients are applied to X's columns by position",
                      UserWarning, stacklevel=4)
        return
    theirs, names = [str(n) for n in theirs], [str(n) for n in names]
    if theirs != names:
        msg = (f"the boundary ({type(boundary).__name__}) was fitted on the columns "
               f"{_short_list(theirs)} but X has {_short_list(names)}: its coefficients would "
               "weigh the wrong features; give X the classifier's columns, in its order")
        raise InputError(msg)


def _short_list(names, most=6):
    return str(names) if len(names) <= most else f"[{', '.join(names[:most])}, … ({len(names)})]"


def _check_boundary_classes(given, classes):
    """Refuse data holding a class the boundary does not know (its classes name its rows)."""
    def text(label):  # bytes labels (HDF5, fixed-width Zarr) against a classifier's str classes
        return label.decode("utf-8", "replace") if isinstance(label, bytes) else label

    known = {text(c) for c in np.asarray(given).tolist()}
    unknown = [c for c in classes.tolist() if text(c) not in known]
    if unknown:
        msg = (f"the data hold the class {unknown[0]!r}, which the boundary's classes "
               f"{sorted(known, key=str)[:6]} do not include; give the boundary of a classifier "
               "fitted on these labels (or labels it knows)")
        raise InputError(msg)


def _decode_bfloat16(X):
    """Rows of bfloat16 bit patterns (uint16) as float32, lazily for dask input."""
    check_bfloat16_rows(X.dtype)
    if isinstance(X, da.Array):
        return X.map_blocks(bfloat16_to_float32, dtype=np.float32)  # type: ignore[call-arg, arg-type]  # dask's wrapped signature
    return bfloat16_to_float32(X)


def _label(value):
    return repr(np.asarray(value).item())


def _non_numeric_column(X):
    """``(name, dtype, first value)`` of a DataFrame's first column that is not numbers, or None."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "iloc"):  # (pandas: the tables sklearn names)
        return None
    for i, name in enumerate(columns):
        col = X.iloc[:, i]
        if getattr(col.dtype, "kind", "O") in "mM":  # times cast to numbers, but are none
            return name, col.dtype, col.iloc[0] if len(col) else None
        try:
            np.asarray(col, dtype=np.float64)
        except (TypeError, ValueError):
            for value in col:  # the first value that is no number
                try:
                    float(value)
                except (TypeError, ValueError):
                    return name, col.dtype, value
            return name, col.dtype, col.iloc[0] if len(col) else None
    return None


def _refuse_non_numeric_column(X):
    """Raise InputError naming a table's first column that is not numbers (if there is one)."""
    if not hasattr(X, "iloc") and (type(X).__module__ or "").startswith("polars"):
        X = X.to_pandas()  # (only to find the column: the rows are refused)
    column = _non_numeric_column(X)
    if column is not None:  # a table: name its column (numpy's message names none)
        name, dtype, value = column
        msg = (f"X column {name!r} (dtype {dtype}) holds {value!r}, not a number; "
               "features must be numbers: drop or encode that column")
        raise InputError(msg) from None


def _is_real_number(value):
    """True for a real number, or text numpy reads as one ('1.5'), as rows may hold them."""
    if isinstance(value, Real):
        return True
    if isinstance(value, (str, bytes)):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return False


def _non_number(X):
    """The message naming the first entry of in-memory rows that is no real number, or None.

    For a list of rows, or rows numpy holds as Python objects or complex
    numbers (a None, a word, 1+2j), which scikit-learn's messages named no row
    of (or printed the whole array).
    """
    if hasattr(X, "columns") or (hasattr(X, "dtype") and X.dtype.kind not in "OcUS"):
        return None  # (tables are named by their columns; numbers are numbers)
    try:
        rows = np.asarray(X) if getattr(X, "dtype", None) is not None else np.asarray(X, dtype=object)
    except (TypeError, ValueError):  # (ragged rows: numpy's message says so)
        return None
    if rows.ndim != 2:
        return None
    if rows.dtype.kind == "c":  # (the first with an imaginary part, else the first)
        bad = rows.imag != 0
        bad.flat[0] |= not bad.any()
    else:
        bad = ~np.frompyfunc(_is_real_number, 1, 1)(rows).astype(bool)
    hits = np.argwhere(bad)
    if not hits.size:
        return None
    i, j = (int(v) for v in hits[0])
    value = rows[i, j]
    shown = value.item() if isinstance(value, np.generic) else value
    if isinstance(shown, complex):  # (scikit-learn's words first: its checks look for them)
        return (f"Complex data not supported: X holds {shown!r} in row {i} (column {j}); "
                "features must be real numbers")
    return (f"X holds {shown!r} in row {i} (column {j}), not a number; features must be real "
            "numbers: drop that row or fill it in")


def _not_among(labels, declared):
    """The labels (as Python values) that are not among ``declared``, compared exactly.

    (numpy compares int64 labels with float64 classes, or int64 with uint64, as
    float64, where 2**53 + 1 == 2**53: a label that was not declared was taken as
    the class next to it.) Python compares ints with floats exactly, and keeps
    True == 1 and -0.0 == 0.0 as numpy does.
    """
    among = set(np.asarray(declared).tolist())
    return [label for label in np.asarray(labels).tolist() if label not in among]


def _declared_index(declared, labels):
    """Where each of ``labels`` (all declared: :func:`_not_among`) sits in ``declared``.

    Searched in the declared dtype, which holds every declared label exactly
    (searched in a dtype common to both, two declared classes could be one).
    """
    return np.searchsorted(declared, np.asarray(labels).astype(declared.dtype))


def _refuse_overflowed_rows(Z):
    """Coordinates of finite rows (checked before) that are not finite overflowed: name the first.

    As :func:`~streamproj.passes.project_blocks` does for lazy rows (it was -inf in memory).
    """
    if not np.isfinite(Z).all():
        refuse_too_large(~np.isfinite(Z).all(axis=1), 0, "X",
                         "to project in float64 (its coordinates overflow)")


def _finite_block(block, block_info=None):
    """``block`` itself, once :func:`check_finite` passes it (rows named globally)."""
    with in_any_order():
        check_finite(block, block_start(block_info))
    return block


_LABEL_TYPES = {"b": "number", "i": "number", "u": "number", "f": "number", "U": "string",
                "S": "bytes"}


def _check_label_type(classes, y):
    """Refuse labels ``y`` of another type than the model's ``classes`` (as accuracy_score does).

    Numbers never equal strings: a lazy score would otherwise be 0.0, silently.
    """
    ours, theirs = (_LABEL_TYPES.get(a.dtype.kind) for a in (classes, y))
    if ours and theirs and ours != theirs:
        msg = (f"Mix of label input types ({theirs} and {ours}): y holds {theirs} labels "
               f"(dtype {y.dtype}) but the model's classes are {ours} labels "
               f"(dtype {classes.dtype}); give y the labels the model was fitted on")
        raise InputError(msg)


def _matches_block(predicted, y):
    """``predicted == y`` for one block (labels decided per chunk are checked here)."""
    _check_label_type(predicted, y)
    return predicted == y


class _SummaryClassifier:
    """Shared machinery of the estimators fitted from :class:`ClassStats`.

    A mixin, placed before scikit-learn's ``ClassifierMixin`` and ``BaseEstimator``.

    Rows are validated once per call (``validate_data`` for in-memory input,
    shape and feature-name checks only for lazy input, which is never read
    whole), summarised in one streaming pass, merged into ``stats_``, and the
    model is solved from the summaries by the subclass's ``_solve``. A stream
    may bring the classes one at a time: until the summaries allow a solve
    (two classes with rows, a non-singular scatter), :meth:`partial_fit`
    keeps them and the model reports why it is not fitted yet.
    """

    # names of the fitted attributes that describe the solution (dropped on reset)
    _solution_attributes: ClassVar[tuple[str, ...]] = ()
    # the parameters the solution depends on (set_params changes them without a solve)
    _solve_parameters: ClassVar[tuple[str, ...]] = ()

    # what the estimators using this mixin provide: parameters, the solve, fitted labels
    chunk_rows: int | None
    progress: bool
    priors: Any
    _declared: np.ndarray | None
    _labels_: np.ndarray
    _solve: Callable[[ClassStats], None]
    summary_detail: Callable[[], str]
    predict: Callable[[Any], Any]

    # what the solve is called in messages ("LDA needs at least two classes")
    @property
    def _needs(self) -> str:
        return "the model"

    # ----------------------------------------------------------- validation
    # what each parameter may be, in words (for the error said of a flag or config key)
    _parameter_words: ClassVar[dict[str, str]] = {}

    def _validate_params(self):
        try:
            super()._validate_params()  # type: ignore[misc]  # scikit-learn's, after this mixin
        except _SklearnParamError as exc:
            found = re.match(r"The '(\w+)' parameter", str(exc))
            name = found.group(1) if found else None
            raise InvalidParameterError(str(exc), name, getattr(self, name, None) if name else None,
                                        self._parameter_words.get(name or "")) from None

    def _check_in_memory(self, X, reset):
        """validate_data, with its ValueErrors as InputError (naming the entry that is no number)."""
        try:
            rows = validate_data(self, X, reset=reset, dtype="numeric", ensure_all_finite=False)
        except InputError:
            raise
        except (TypeError, ValueError) as exc:
            _refuse_non_numeric_column(X)
            named = _non_number(X)
            if isinstance(exc, TypeError):  # (kept a TypeError, as scikit-learn's checks expect)
                if named is None:
                    raise
                msg = f"{named} ({exc})"
                raise TypeError(msg) from None
            raise InputError(named or str(exc)) from None
        if rows.dtype.kind not in "biuf":
            # category and polars string columns pass validate_data as objects, which
            # predict's finite check met with numpy's "ufunc 'isfinite' not supported"
            _refuse_non_numeric_column(X)
            msg = _non_number(X) or f"X must hold real numbers; got dtype {rows.dtype}"
            raise InputError(msg)
        return rows

    def _check_lazy(self, X, meta, reset):
        try:
            validate_data(self, meta if meta is not None else X, reset=reset, skip_check_array=True)
        except ValueError as exc:
            raise InputError(str(exc)) from None

    def _check_lazy_size(self, X):
        """Refuse lazy rows of no rows or no features, as ``validate_data`` refuses them in memory."""
        for axis, what in ((0, "sample"), (1, "feature")):
            if X.shape[axis] == 0:
                msg = (f"Found array with 0 {what}(s) (shape={X.shape}) while a minimum of 1 is "
                       f"required by {type(self).__name__}.")
                raise InputError(msg)

    def _rows(self, X, y=None, reset=False):
        """Validated rows (numpy, or lazy dask) and labels, setting or checking feature names.

        Returns
        -------
        X : ndarray or dask array of shape (n, p)
        y : labels as :func:`~streamproj.validation.as_labels` gives them (None if not given)
        """
        check_not_sparse(X)
        check_not_lazy_frame(X)
        if is_lazy(X) or (y is not None and is_dask_frame(y)):
            X, y, meta = as_lazy_rows(X, y)
            if is_lazy(X):
                X = as_dask_rows(X, self.chunk_rows)
                self._check_lazy_size(X)
                self._check_lazy(X, meta, reset)
            else:
                X = self._check_in_memory(X, reset)
        else:
            X = self._check_in_memory(X, reset)
        if y is not None:
            y = as_labels(y)
        return X, y

    # -------------------------------------------------------------- fitting
    def _reset(self):
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)
        for name in ("_unsolved", "_declared", "_given_classes", "_deferred_lda", "_solved_with"):
            self.__dict__.pop(name, None)

    def _declare_classes(self, classes, first):
        """``classes=`` of partial_fit: fixes the label set on the first call."""
        if classes is None:
            return
        declared = np.unique(as_labels(classes, name="classes"))
        before = getattr(self, "_declared", None)
        if not first and before is not None:
            if not np.array_equal(declared, before):
                msg = (f"classes={declared.tolist()} is not the same as on the first call to "
                       f"partial_fit, was: {before.tolist()}")
                raise InputError(msg)
            return
        if not first:
            left_out = _not_among(self.stats_.classes, declared)
            if left_out:
                msg = (f"classes={declared.tolist()} leaves out labels already seen "
                       f"({left_out})")
                raise InputError(msg)
        self._declared = declared

    def _check_labels_declared(self, batch):
        declared = getattr(self, "_declared", None)
        if declared is None or batch.n_classes == 0:
            return
        unknown = _not_among(batch.classes, declared)
        if unknown:
            msg = (f"y holds label {_label(unknown[0])}, which is not among the classes "
                   f"{declared.tolist()} given to the first partial_fit; pass every label "
                   "in classes=")
            raise InputError(msg)

    def _accumulate(self, X, y, reset):
        if y is None:
            as_labels(y)  # raises scikit-learn's "requires y to be passed" error
        X, y = self._rows(X, y, reset=reset)
        detail = self.summary_detail()
        batch = accumulate(X, y, detail, self.chunk_rows, self.progress,
                           max_summary_memory=getattr(self, "max_summary_memory", None),
                           bfloat16=getattr(self, "bfloat16", False),
                           n_classes=self._known_classes(y, detail))
        check_discrete_classes(batch.classes)
        return batch

    def _known_classes(self, y, detail):
        """Classes known before pass 1, for its memory plan (labels in memory are cheap to count)."""
        known = [getattr(self, "_declared", None)]
        if hasattr(self, "stats_"):
            known.append(self.stats_.classes)
        if detail != "pooled" and isinstance(y, np.ndarray):
            known.append(np.unique(y))
        return max((len(k) for k in known if k is not None), default=None)

    def _partial_fit(self, X, y, classes, strict):
        first = not hasattr(self, "stats_")
        if first:
            self._reset()
        else:  # before the pass: set_params may have asked for more than the summaries keep
            self._check_detail_kept()
        with self._as_before_on_failure():
            self._declare_classes(classes, first)
            self._check_before_pass()
            batch = self._accumulate(X, y, reset=first)
            self._check_labels_declared(batch)
            merged = batch if first else self.stats_ + batch
            self._update(merged, strict)
        return self

    @contextlib.contextmanager
    def _as_before_on_failure(self):
        """A call that fails leaves the model as it was.

        Its classes= too, which would otherwise refuse the labels of the calls
        that follow, and a boundary's classes, which the solve drops before its
        checks (saved without them, the model no longer refused labels they lack).
        """
        kept = {name: self.__dict__.get(name) for name in ("_declared", "_given_classes")}
        try:
            yield
        except BaseException:
            for name, value in kept.items():
                self.__dict__.pop(name, None)
                if value is not None:
                    setattr(self, name, value)
            raise

    # what a summary detail keeps beyond the pooled scatter, in messages
    _DETAIL_WORDS: ClassVar[dict[str, str]] = {"per_class": "each class's own scatter",
                                               "fourth": "each class's fourth co-moments"}

    def _detail_needed_by(self, detail):
        """The parameter that makes the summaries need ``detail`` (named in messages)."""
        return type(self).__name__

    def _check_detail_kept(self, stats=None):
        """Refuse parameters that need more of each class than the summaries keep.

        A summary merged with one of less detail keeps the lesser (see
        :class:`ClassStats`), so a parameter set since the first rows were
        summarised (``keep_class_scatter=True``, ``shrinkage='auto'``) would be
        solved without what it needs, or drop it silently. ``stats``: a summary
        given to be merged (the model's own when None).
        """
        need = self.summary_detail()
        have = (self.stats_ if stats is None else stats).detail
        if DETAILS.index(have) >= DETAILS.index(need):
            return
        what = f"{self._detail_needed_by(need)} needs {self._DETAIL_WORDS[need]} (detail {need!r})"
        if stats is None:
            msg = (f"{what}, but the {self.stats_.n_samples} rows fitted so far were summarised "
                   f"without it (detail {have!r}) and are not kept to summarise again: "
                   "call fit to start over with these parameters, or set them back")
        else:
            msg = (f"{what}, but the ClassStats given keep only {have!r}; accumulate them "
                   f"with detail={need!r}")
        raise IncompatibleStatsError(msg)

    def _update(self, stats, strict):
        """Solve from ``stats``; keep them.

        Unless ``strict``, an unsolvable summary is kept (the model is then not
        fitted, with the reason) instead of raising.
        """
        declared = getattr(self, "_declared", None)
        classes = stats.classes if declared is None else declared
        if stats.n_classes < 2:
            only = ", ".join(map(_label, stats.classes.tolist()))
            reason = (f"{self._needs} needs at least two classes; y holds only one class "
                      f"({only}, {stats.n_samples} rows)") if only else "no rows yet"
            if strict:
                raise InputError(reason)
            self._drop_solution(reason + " so far")
        else:
            try:
                self._solve(stats)
            except SingularScatterError as exc:
                if strict:
                    raise
                self._drop_solution(str(exc))
            else:
                self.__dict__.pop("_unsolved", None)
                self._solved_with = self._solve_values()
        given = getattr(self, "_given_classes", None)
        self.classes_ = np.asarray(classes if given is None else given)
        self.stats_ = stats
        self.n_features_in_ = stats.n_features
        # A loaded model's meta_ describes its saved version, which this model no longer is
        # (an output projected now would have claimed that version and its model_id).
        self.__dict__.pop("meta_", None)

    def _solve_values(self):
        """The parameters the solution depends on, as they are now (copied: a list may change)."""
        return {name: _snapshot(getattr(self, name)) for name in self._solve_parameters}

    def _changed_since_solve(self):
        """Names of the parameters set (``set_params``) since the solution was solved."""
        solved = self.__dict__.get("_solved_with")
        if solved is None:  # (unknown: pickled by an older version) taken as it was saved before
            return []
        return [name for name in self._solve_parameters
                if not _same_value(solved[name], getattr(self, name))]

    def _solve_as_set(self, doing="save"):
        """Solve again from the summaries where parameters were set since the solution was.

        A saved model's parameters must be its solution's: the next ``update``
        solves them again, against summaries that may not suit them. The
        model is left as it was when they cannot be solved. ``doing``: what
        could not be done, in the message.
        """
        changed = self._changed_since_solve()
        self._validate_params()  # (set_params does not check them)
        self._check_detail_kept()
        if not changed:
            return
        kept = dict(self.__dict__)
        try:
            self._update(self.stats_, strict=True)
        except BaseException as exc:
            self.__dict__.clear()
            self.__dict__.update(kept)
            if not isinstance(exc, StreamprojError):
                raise
            msg = (f"cannot {doing}: the parameters set since the fit ({', '.join(changed)}) "
                   f"cannot be solved from its summaries: {exc}")
            raise type(exc)(msg) from None

    def _drop_solution(self, reason):
        for name in (*self._solution_attributes, "_deferred_lda"):
            self.__dict__.pop(name, None)
        self._unsolved = reason

    def _check_before_pass(self):
        """Refuse what the parameters alone make unsolvable, before a pass reads every row."""
        if self.priors is not None:
            solvers.check_priors(self.priors)

    def _solved_labels(self, stats):
        """The labels of ``stats``' classes as ``classes_`` holds them.

        As scikit-learn's ``partial_fit`` (``classes_ = unique_labels(classes)``):
        declared classes give the dtype of the labels ``predict`` returns, not y.
        """
        declared = getattr(self, "_declared", None)
        if declared is None:
            return np.asarray(stats.classes)
        return declared[_declared_index(declared, stats.classes)]

    def _solved_priors(self, stats):
        """The priors for the classes with rows (a subset while some declared class has none)."""
        priors = self.priors
        declared = getattr(self, "_declared", None)
        if priors is None or declared is None:
            return priors
        try:
            priors = np.asarray(priors, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            return priors  # not numbers: solvers.class_priors says so
        if priors.shape[0] == declared.shape[0] != stats.n_classes:
            priors = priors[_declared_index(declared, stats.classes)]
            with np.errstate(over="ignore"):
                total = priors.sum()
            if not 0 < total < np.inf:  # (not renormalised to NaN: say which classes)
                msg = (f"priors weigh nothing on the classes with rows so far "
                       f"({', '.join(map(_label, stats.classes))}: priors {priors.tolist()}); "
                       "give them a positive weight, or fit rows of the other classes first")
                raise InputError(msg)
            priors = priors / total
        return priors

    def fit_stats(self, stats):
        """Solve from a :class:`ClassStats` alone (no rows needed); forgets any earlier fit."""
        self._reset()
        return self.partial_fit_stats(stats)

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit_stats(self, stats):
        """Merge an already accumulated :class:`ClassStats` and solve again."""
        if not isinstance(stats, ClassStats):
            msg = f"expected a ClassStats; got {type(stats).__name__}"
            raise InputError(msg)
        self._check_labels_declared(stats)  # as partial_fit: classes=... fixed the label set
        self._check_detail_kept(stats)
        if hasattr(self, "stats_"):
            self._check_detail_kept()
            if stats.n_features != self.stats_.n_features:
                msg = (f"the new rows have {stats.n_features} features but the model was "
                       f"fitted on {self.stats_.n_features}")
                raise IncompatibleStatsError(msg)
            merged = self.stats_ + stats
        else:
            merged = stats
        with self._as_before_on_failure():
            self._update(merged, strict=True)
        return self

    # ------------------------------------------------------------- applying
    def __sklearn_is_fitted__(self):
        return bool(self._solution_attributes) and hasattr(self, self._solution_attributes[0])

    def _check_fitted(self):
        if self.__sklearn_is_fitted__():
            return
        name = type(self).__name__
        if hasattr(self, "_unsolved"):
            msg = (f"this {name} is not fitted yet: it holds {self.stats_.n_samples} rows but "
                   f"cannot solve: {self._unsolved}; call partial_fit with more rows")
        else:
            msg = f"this {name} is not fitted yet; call fit(X, y) first"
        raise NotFittedError(msg)

    def _apply_rows(self, X, checked_lazily=False):
        """Rows for predict/transform: validated numpy (finite) or lazy dask (checked as computed).

        ``checked_lazily``: the caller's own lazy kernel names non-finite rows
        (:func:`~streamproj.passes.project_blocks` does), so no check is added.
        """
        self._check_fitted()
        X, _ = self._rows(X, reset=False)
        if getattr(self, "bfloat16", False):
            X = _decode_bfloat16(X)
        if not isinstance(X, da.Array):
            check_finite(X)
        elif not checked_lazily:  # a NaN row would be scored as class 0, silently
            X = X.map_blocks(_finite_block, dtype=X.dtype, meta=X._meta)  # type: ignore[call-arg, arg-type]  # dask's wrapped signature
        return X

    def _take_classes(self, index):
        """Labels of the solved classes (``_labels_``) at ``index`` (numpy or lazy)."""
        labels = self._labels_
        if isinstance(index, da.Array):
            return index.map_blocks(labels.take, dtype=labels.dtype)  # type: ignore[call-arg, arg-type]  # dask's wrapped signature
        return labels.take(index)

    def _full_columns(self, proba, fill):
        """Probabilities over ``classes_`` (a declared class without rows gets ``fill``)."""
        if self._labels_.shape[0] == self.classes_.shape[0]:
            return proba
        columns = np.searchsorted(self.classes_, self._labels_)

        def spread(block):
            out = np.full((block.shape[0], self.classes_.shape[0]), fill)
            out[:, columns] = block
            return out

        if isinstance(proba, da.Array):
            return proba.map_blocks(spread, chunks=(proba.chunks[0], (self.classes_.shape[0],)),  # type: ignore[call-arg, arg-type]  # dask's wrapped signature
                                    dtype=np.float64)
        return spread(proba)

    def _full_decisions(self, scores):
        """Decision scores over ``classes_``: a declared class without rows gets -inf.

        Two solved classes among more declared give their log-odds ``d`` as the
        columns ``(0, d)`` (whose softmax is ``expit(d)``).
        """
        if self._labels_.shape[0] == self.classes_.shape[0]:
            return scores
        lazy = isinstance(scores, da.Array)
        xp = da if lazy else np
        if scores.ndim == 1:
            scores = xp.stack([xp.zeros_like(scores), scores], axis=1)
        if lazy:
            scores = scores.rechunk({1: -1})
        return self._full_columns(scores, -np.inf)

    def _boundary_text(self, y):
        """Bytes labels ``y`` as text where fit matched them to a boundary's text classes.

        (as :func:`_check_boundary_classes` does: scored as they were, they were "labels of
        another type" than the model's classes)
        """
        given = self.__dict__.get("_given_classes")
        if given is None or given.dtype.kind != "U" or y.dtype.kind != "S":
            return y
        dtype = np.dtype(f"U{max(y.dtype.itemsize, 1)}")
        if isinstance(y, da.Array):
            return y.map_blocks(np.char.decode, "utf-8", "replace", dtype=dtype)  # type: ignore[arg-type]  # dask's wrapped signature
        return np.char.decode(y, "utf-8", "replace")

    @staticmethod
    def _lazy_score(right, predicted, sample_weight):
        """The (weighted) mean of lazy ``right`` (per-row hits), in one compute."""
        if sample_weight is None:
            return float(right.mean().compute(**local_scheduler()))
        w = sample_weight
        if is_dask_frame(w):  # (its chunk lengths: dask arrays need them to line up)
            w = w.to_dask_array(lengths=True)
        elif not isinstance(w, da.Array):  # da.asarray of a pandas Series raised
            w = np.asarray(w)              # "'index' must be an instance of ... Index"
        w = da.asarray(w)
        if w.shape != predicted.shape:
            msg = (f"sample_weight has shape {w.shape} but X has {predicted.shape[0]} rows; "
                   "give one weight per row")
            raise InputError(msg)
        w = w.rechunk(predicted.chunks)
        # checked as scikit-learn checks them in memory: the mean was NaN, silently
        hits, total, bad = dask.compute((right * w).sum(), w.sum(), (~da.isfinite(w)).sum(),
                                        **local_scheduler())
        if bad:
            msg = f"sample_weight holds {int(bad)} NaN or inf value(s); give finite weights"
            raise InputError(msg)
        if total == 0:
            msg = "sample_weight sums to zero; give at least one row a non-zero weight"
            raise InputError(msg)
        return float(hits / total)

    def score(self, X, y, sample_weight=None):
        """Mean accuracy of :meth:`predict` on (X, y); lazy inputs are read once, chunk by chunk."""
        if isinstance(sample_weight, da.Array) and np.isnan(sample_weight.shape).any():
            # (a boolean mask's: its rows cannot be lined up; was "shape (nan,)")
            msg = ("sample_weight has unknown chunk sizes (a dask array cut by a mask or a "
                   "filter); give sample_weight.compute_chunk_sizes(), or a dask DataFrame's "
                   "to_dask_array(lengths=True)")
            raise InputError(msg)
        predicted = self.predict(X)
        if isinstance(predicted, da.Array):
            # (as_dask_labels says so of labels that are not one per row; rechunking
            # them raised dask's "Chunks do not add up to shape")
            y = self._boundary_text(as_dask_labels(as_labels(y), predicted.chunks[0]))
            _check_label_type(predicted, y)
            right = da.map_blocks(_matches_block, predicted, y, dtype=bool)
            # (each chunk checks its own rows: the one that failed first in time was named)
            with first_bad_row(self._rows(X, reset=False)[0], "X", getattr(self, "bfloat16", False)):
                return self._lazy_score(right, predicted, sample_weight)
        y = self._boundary_text(as_labels(y))
        # (scikit-learn's metric said "labels represented as bytes" are not supported
        # of string labels for a model of bytes labels, or the reverse)
        _check_label_type(predicted, y)
        if predicted.dtype.kind == "S" and y.dtype.kind == "S" and y.shape == predicted.shape:
            # bytes labels (HDF5, fixed-width Zarr) are classes here, but scikit-learn's
            # metric refuses bytes: the same mean, of the labels as stored (its checks of
            # the weights kept: np.average gave NaN for a NaN weight)
            right = np.asarray(predicted == y)
            return float(accuracy_score(np.ones_like(right), right, sample_weight=sample_weight))
        return float(accuracy_score(y, predicted, sample_weight=sample_weight))


class BoundaryProjector(_SummaryClassifier, ClassifierMixin, TransformerMixin, BaseEstimator,  # type: ignore[call-arg]
                        auto_wrap_output_keys=None):
    """Project labelled data onto a few axes that keep a linear decision boundary exact.

    Axis 0 is the unit normal of the boundary (Fisher/LDA's, or one given), so
    ``transform(X)[:, 0]`` is the signed distance to the boundary and the
    boundary is the line ``z[0] = 0``. With K > 2 classes the first
    ``min(K-1, d)`` axes span the top Fisher directions. The remaining axes are
    the best principal directions parallel to the boundary. Everything is
    solved from per-class summaries made in one streaming pass, so the data
    may be far larger than memory and new batches merge in with
    :meth:`partial_fit`.

    A scikit-learn classifier and transformer: it works in pipelines,
    cross-validation and grid searches, keeps ``feature_names_in_`` from
    DataFrames, and supports ``set_output(transform=…)``. Inputs may be numpy arrays,
    pandas, polars or dask DataFrames, pyarrow tables, dask or Zarr arrays;
    dask and Zarr inputs stay lazy (``transform``, ``predict``,
    ``predict_proba`` return dask arrays; with ``set_output(transform="pandas")``
    ``transform`` of a lazy input returns a lazy dask DataFrame, and with
    ``"polars"`` the lazy dask array unchanged — ``.compute()`` it first).

    Parameters
    ----------
    n_components : int, default=2
        Number of projection axes d.
    shrinkage : None, float in [0, 1], "auto" or "oas", default=None
        Shrinkage of the within-class covariance, as scikit-learn's LDA
        ("auto" is Ledoit–Wolf on standardised data; "oas" per class).
    center : {"mean", "hyperplane"}, default="mean"
        Centring of the boundary-parallel PCA: the data mean moved onto the
        hyperplane (least-squares optimal), or the hyperplane point nearest
        the origin (the seed blog post's version).
    priors : array-like of shape (K,), optional
        Class priors; default the class frequencies.
    boundary : None, (coef, intercept), fitted linear classifier, dict or path
        None fits LDA; anything else fixes the boundary.
    chunk_rows : int, optional
        Rows per chunk for in-memory input (chunked input keeps its chunks).
    keep_class_scatter : bool, default=False
        Keep each class's scatter matrix (O(K·p²)) so :meth:`qda` works.
    progress : bool, default=False
        Progress bars over chunks.
    max_summary_memory : int or str, optional
        Memory budget of pass 1 (bytes, or a size such as "2GB"): a summary
        (pooled p² + K·p, per-class K·p², "auto" shrinkage 3·K·p², times 8
        bytes) plus the chunks in flight that would exceed it is refused before
        it is allocated. Default half of the machine's memory. Not saved with
        the model.
    bfloat16 : bool, default=False
        X holds bfloat16 values stored as uint16 bit patterns (as embeddings
        often are); they are converted exactly to float32, then float64. Off,
        uint16 input is read as integers.

    Attributes
    ----------
    components_ : ndarray of shape (d, p)
        Orthonormal rows; row 0 is the unit boundary normal (two classes).
    center_ : ndarray of shape (p,)
        ``transform(X) == (X - center_) @ components_.T``.
    coef_, intercept_ : ndarray of shape (1, p), (1,) (two classes) or (K, p), (K,)
    classes_ : ndarray of shape (K,)
    stats_ : ClassStats
    priors_, means_, covariance_ : LDA's, when the boundary is fitted
    scalings_ : ndarray, the generalised eigenvectors (LDA only)
    n_features_in_ : int
    feature_names_in_ : ndarray of str, when fitted on a DataFrame
    """

    _parameter_constraints: ClassVar[dict] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "shrinkage": [None, StrOptions({"auto", "oas"}), Interval(Real, 0, 1, closed="both")],
        "center": [StrOptions({"mean", "hyperplane"})],
        "priors": ["array-like", None],
        "boundary": "no_validation",  # many forms; checked by _external_boundary
        "chunk_rows": [Interval(Integral, 1, None, closed="left"), None],
        "keep_class_scatter": ["boolean"],
        "progress": ["boolean"],
        "max_summary_memory": [Interval(Integral, 1, None, closed="left"), str, None],
        "bfloat16": ["boolean"],
    }
    _parameter_words: ClassVar[dict[str, str]] = {
        "n_components": "a whole number of at least 1",
        # said of a flag or config key, which spell None as none
        "shrinkage": "'none', 'auto', 'oas' or a float in [0, 1]",
        "center": "one of 'mean', 'hyperplane'",
        "chunk_rows": "a whole number of at least 1, or None",
        "keep_class_scatter": "true or false",
        "progress": "true or false",
        "max_summary_memory": "a number of bytes or a size such as '2GB' or '512MiB'",
        "bfloat16": "true or false",
    }
    _solution_attributes = ("components_", "center_", "coef_", "intercept_", "_labels_",
                            *_DEFERRED_ATTRIBUTES)
    _solve_parameters = ("n_components", "shrinkage", "center", "priors", "boundary")

    def __init__(
        self,
        n_components: int = 2,
        shrinkage: str | float | None = None,
        center: str = "mean",
        priors: Any = None,
        boundary: Any = None,
        *,
        chunk_rows: int | None = None,
        keep_class_scatter: bool = False,
        progress: bool = False,
        max_summary_memory: int | str | None = None,
        bfloat16: bool = False,
    ) -> None:
        self.n_components = n_components
        self.shrinkage = shrinkage
        self.center = center
        self.priors = priors
        self.boundary = boundary
        self.chunk_rows = chunk_rows
        self.keep_class_scatter = keep_class_scatter
        self.progress = progress
        self.max_summary_memory = max_summary_memory
        self.bfloat16 = bfloat16

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        tags.target_tags.required = True
        # transform always computes in float64 (the summaries are float64 whatever X is)
        tags.transformer_tags.preserves_dtype = ["float64"]
        # the hyperplane's point exists for one boundary only (see solvers.projection_center)
        tags.classifier_tags.multi_class = self.center != "hyperplane"
        return tags

    @property
    def _needs(self):
        return "LDA" if self.boundary is None else "a boundary"

    # ------------------------------------------------------------ fitting
    def summary_detail(self) -> str:
        """The ClassStats detail these parameters need ("pooled", "per_class" or "fourth")."""
        if self.boundary is not None:
            return "per_class" if self.keep_class_scatter else "pooled"
        return solvers.needed_detail(self.shrinkage, self.priors, qda=self.keep_class_scatter)

    def _detail_needed_by(self, detail):
        if detail == "fourth":
            return "shrinkage='auto'"
        if self.keep_class_scatter:
            return "keep_class_scatter=True"
        if self.shrinkage == "oas":
            return "shrinkage='oas'"
        try:  # given priors weigh each class's covariance
            priors = np.asarray(self.priors, dtype=np.float64).tolist()
        except (TypeError, ValueError):
            priors = self.priors
        return f"priors={priors!r}"

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> "BoundaryProjector":
        """Summarise all rows (one pass) and solve; forgets any earlier fit."""
        self._reset()
        return self._partial_fit(X, y, None, strict=True)

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> "BoundaryProjector":
        """Merge more rows into the summaries (one pass over them only) and solve again.

        Every row given is counted, as in scikit-learn. ``classes`` on the first
        call fixes the label set. Chunks holding one class (or none of some
        classes) are summarised and merged; the model is solved as soon as two
        classes have rows, and ``transform``/``predict`` raise
        :class:`~streamproj.errors.NotFittedError` (saying why) until then. A
        class-sorted stream gives the same model as ``fit`` on all its rows.
        """
        return self._partial_fit(X, y, classes, strict=False)

    def _check_before_pass(self):
        super()._check_before_pass()
        if self.priors is not None and self.boundary is None:
            given = solvers.check_priors(self.priors)
            if given.shape[0] == 2 and not given.all():
                # two classes: the refusal in _solve, after the pass; more: too few priors
                msg = (f"priors {given.tolist()} give one of two classes no weight, so the "
                       "two-class LDA boundary would lie at infinity (every row the other "
                       "class); give both classes a positive prior")
                raise InputError(msg)

    def _check_components(self, p):
        """Refuse more axes than the ``p`` features (jobs: before pass 1, which tells them)."""
        if self.n_components > p:
            msg = (f"n_components={self.n_components} is more than the {p} feature(s) of X; "
                   f"ask for at most {p}")
            raise InputError(msg)

    def _solve(self, stats):
        p = stats.n_features
        self._check_components(p)
        self.__dict__.pop("_given_classes", None)
        if self.boundary is None and self.center == "hyperplane" and stats.n_classes > 2:
            # said before the LDA solve, whose own errors (a singular scatter) would hide it
            msg = (f"Only binary classification is supported with center='hyperplane': y holds "
                   f"{stats.n_classes} classes, and the hyperplane's point needs a single "
                   "boundary (two classes); use center='mean'")
            raise InputError(msg)
        if self.boundary is None:
            result = solvers.lda(stats, self.shrinkage, self._solved_priors(stats))
            if stats.n_classes == 2 and not np.isfinite(result.mean_decision).all():
                # a prior of 0 moves the one boundary to infinity: its centre was infinite
                # and every coordinate after the first NaN, silently
                lost = _label(stats.classes[int(np.argmin(result.priors))])
                msg = (f"priors {result.priors.tolist()} give class {lost} no weight, so the "
                       "two-class LDA boundary lies at infinity (every row is the other class) "
                       "and there is no boundary to project onto; give both classes a "
                       "positive prior")
                raise InputError(msg)
            coef, intercept = result.coef, result.intercept
            basis = solvers.boundary_basis(coef, result.directions)
            fitted = {
                "priors_": result.priors,
                "means_": result.means,
                "covariance_": result.covariance,
                "scalings_": result.scalings,
            }
            labels = self._solved_labels(stats)
            mean_distance = result.mean_decision[0] / np.linalg.norm(coef)
            lda_result = result
        else:
            coef, intercept, given, _ = _external_boundary(self.boundary)
            if coef.shape[1] != p:
                msg = f"the boundary has {coef.shape[1]} coefficients but the data have {p} features"
                raise InputError(msg)
            _check_boundary_columns(self.boundary, getattr(self, "feature_names_in_", None))
            if given is not None:
                _check_boundary_classes(given, stats.classes)
            labels = self._solved_labels(stats) if given is None else given
            expected = 1 if len(labels) <= 2 else len(labels)
            if coef.shape[0] != expected:
                msg = f"the boundary has {coef.shape[0]} rows of coefficients; {len(labels)} classes need {expected}"
                raise InputError(msg)
            basis = solvers.boundary_basis(coef)
            fitted = {}
            if given is not None:
                self._given_classes = np.asarray(given)
            mean_distance = lda_result = None
        w: np.ndarray | None = None
        b = 0.0  # with several boundaries there is no w, and b is not used
        if coef.shape[0] == 1:
            w, b = solvers.unit_boundary(coef, intercept)
        center, scatter, spike = solvers.projection_center(
            stats, w, b, self.center, mean_distance if w is not None else None)
        V = solvers.boundary_axes(basis, scatter, self.n_components, spike, overwrite_scatter=True)
        for name in ("priors_", "means_", "covariance_", "scalings_", "_deferred_lda"):
            self.__dict__.pop(name, None)
        for name, value in fitted.items():
            setattr(self, name, value)
        self._labels_ = np.asarray(labels)
        self.coef_ = coef
        self.intercept_ = intercept
        self.components_ = V.T
        self.center_ = center
        self._set_centred_scores(stats, lda_result)

    def _set_centred_scores(self, stats, lda_result=None):
        """The fitted centred form of the decisions (see :func:`solvers.centred_scores`).

        ``_score_center_``, ``_score_coef_``, ``_score_offset_`` give
        :meth:`_scores`; ``_decision_offset_`` gives :meth:`decision_function`.
        All derive from ``coef_``, ``intercept_``, ``center_`` and the LDA
        solution of ``stats_``, so they are recomputed on load, not stored.
        """
        one = self.coef_.shape[0] == 1
        (self._score_center_, self._score_coef_, self._score_offset_,
         self._decision_offset_) = solvers.centred_scores(
            self.coef_, self.intercept_, self.center_ if one else stats.mean, lda_result)

    # ------------------------------------------------------------ applying
    def transform(self, X: Any) -> Any:
        """Coordinates ``(X - center_) @ components_.T`` (float64); lazy for dask/Zarr input.

        A lazy result names a non-finite row when computed: the first bad row of
        the first chunk to fail, which, computed in parallel, need not be the
        first bad row of X (``streamproj project`` and :meth:`score` name that one).
        """
        rows = self._apply_rows(X, checked_lazily=True)
        if isinstance(rows, da.Array):
            Z = project_blocks(rows, self.center_, self.components_)
        elif gpu.current_device() == "cuda":  # in memory too: the device chosen with gpu.using
            gpu.check_device("cuda")
            gpu.check_rows(rows.dtype)
            Z = gpu.centred_product(rows, self.center_, self.components_)
        else:
            with np.errstate(over="ignore"):  # a row whose coordinates overflow: named below
                Z = subtract_rows(rows, self.center_) @ self.components_.T
        if not isinstance(Z, da.Array):
            _refuse_overflowed_rows(Z)
        return self._wrap_output(Z, X)

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """``fit(X, y).transform(X)``."""
        return self.fit(X, y, **fit_params).transform(X)

    def _wrap_output(self, Z, X):
        """``set_output``: in-memory results as scikit-learn wraps them; lazy ones stay lazy."""
        if not isinstance(Z, da.Array):
            return _wrap_data_with_container("transform", Z, X, self)
        if _get_output_config("transform", self)["dense"] != "pandas":
            return Z
        try:
            import dask.dataframe as dd
        except ImportError:  # dask[dataframe] not installed: the lazy array is the output
            return Z
        # the rows were cut at the optimised frame's partitions (validation._frame_arrays),
        # which may be fewer than X's (a filtered Parquet read): its index is cut the same way
        index = X.optimize().index if is_dask_frame(X) else None
        return dd.from_dask_array(Z, columns=list(self.get_feature_names_out()), index=index)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the output axes: ``boundary`` (or ``lda1``, … for K > 2), then ``pc1``, … ."""
        self._check_fitted()
        _check_feature_names_in(self, input_features, generate_names=False)
        d = self.components_.shape[0]
        if self.coef_.shape[0] == 1:
            lead = ["boundary"]
        elif "scalings_" in self.__dict__ or "_deferred_lda" in self.__dict__:
            # an LDA's axes, without solving a loaded model's deferred LDA for their names
            lead = [f"lda{i + 1}" for i in range(min(self.coef_.shape[0] - 1, self.coef_.shape[1]))]
        else:
            rank = solvers.boundary_basis(self.coef_).shape[1]
            lead = [f"boundary{i + 1}" for i in range(rank)]
        lead = lead[:d]
        names = lead + [f"pc{i + 1}" for i in range(d - len(lead))]
        return np.asarray(names, dtype=object)

    def _centred(self, X):
        """``X - _score_center_`` in float64 (lazy for dask)."""
        if isinstance(X, da.Array):
            if X.dtype.kind in "iu" and X.dtype.itemsize == 8:  # (beyond 2^53: see subtract_rows)
                return X.map_blocks(subtract_rows, self._score_center_, dtype=np.float64)  # type: ignore[arg-type]  # dask's wrapped signature
            return X - self._score_center_
        return subtract_rows(X, self._score_center_)

    def _scores(self, X):
        """Scores fit for argmax/softmax, in centred form: (n,) for one boundary, else (n, K).

        ``X`` is validated rows (numpy, or dask for a lazy result). For K > 2
        the scores differ from :meth:`decision_function` by a per-row constant
        only, which keeps their differences exact far from the origin.
        """
        scores = self._centred(X) @ self._score_coef_.T + self._score_offset_
        return scores[:, 0] if self._score_coef_.shape[0] == 1 else scores

    def decision_function(self, X: Any) -> np.ndarray | da.Array:
        """``X @ coef_.T + intercept_`` (computed in centred form): (n,) for two classes, else (n, K).

        Columns follow ``classes_``; a class declared in ``partial_fit(classes=...)``
        that has no rows yet gets -inf.
        """
        return self._full_decisions(self._decisions(self._apply_rows(X)))

    def _decisions(self, X):
        """:meth:`decision_function` of validated rows (numpy, or dask for a lazy result)."""
        scores = self._centred(X) @ self.coef_.T + self._decision_offset_
        return scores[:, 0] if self.coef_.shape[0] == 1 else scores

    def predict(self, X: Any) -> np.ndarray | da.Array:
        """Predicted class labels (a lazy dask array for lazy input)."""
        return self._take_classes(solvers.scores_to_index(self._scores(self._apply_rows(X))))

    def predict_proba(self, X: Any) -> np.ndarray | da.Array:
        """Class probabilities, as :class:`~sklearn.discriminant_analysis.LinearDiscriminantAnalysis`.

        Two classes: ``expit(decision)``; more: the softmax of the decisions.
        Columns follow ``classes_``.
        """
        scores = self._scores(self._apply_rows(X))
        if isinstance(scores, da.Array):
            proba = scores.map_blocks(_proba_block, dtype=np.float64, new_axis=1 if scores.ndim == 1 else None,  # type: ignore[call-arg, arg-type]  # dask's wrapped signature
                                      chunks=(scores.chunks[0], (max(2, self.coef_.shape[0]),)))
        else:
            proba = _proba_block(scores)
        return self._full_columns(proba, 0.0)

    def predict_log_proba(self, X: Any) -> np.ndarray | da.Array:
        """Log class probabilities, computed without rounding ``predict_proba`` to 0 or 1 first."""
        scores = self._scores(self._apply_rows(X))
        if isinstance(scores, da.Array):
            logp = scores.map_blocks(_log_proba_block, dtype=np.float64,  # type: ignore[call-arg, arg-type]  # dask's wrapped signature
                                     new_axis=1 if scores.ndim == 1 else None,
                                     chunks=(scores.chunks[0], (max(2, self.coef_.shape[0]),)))
        else:
            logp = _log_proba_block(scores)
        return self._full_columns(logp, -np.inf)

    def qda(self, reg_param: float = 0.0, ddof: int = 0) -> solvers.QDA:
        """QDA solution on the same summaries.

        Needs ``keep_class_scatter=True`` or per-class shrinkage; :meth:`to_qda`
        gives it as a fitted estimator.
        """
        self._check_fitted()
        return solvers.qda(self.stats_, reg_param, self._solved_priors(self.stats_), ddof)

    def to_qda(self, reg_param: float = 0.0, ddof: int = 0) -> "StreamingQDA":
        """A fitted :class:`~streamproj.qda.StreamingQDA` on the same summaries (no pass over rows)."""
        from .qda import StreamingQDA

        self._check_fitted()
        model = StreamingQDA(priors=self.priors, reg_param=reg_param, ddof=ddof,
                             chunk_rows=self.chunk_rows, progress=self.progress,
                             bfloat16=self.bfloat16)
        model._declared = getattr(self, "_declared", None)
        model.partial_fit_stats(self.stats_)
        if hasattr(self, "feature_names_in_"):
            model.feature_names_in_ = self.feature_names_in_
        return model

    def reconstruction_error(self) -> float:
        """``Σ‖(x-c) - VVᵀ(x-c)‖²`` over the fitted rows, from the summaries."""
        self._check_fitted()
        return solvers.reconstruction_error(self.stats_, self.components_, self.center_)

    # -------------------------------------------------------------- storage
    @property
    def model_id_(self) -> str:
        """A short digest identifying the fitted axes, centre, boundary and data summary."""
        self._check_fitted()
        h = hashlib.blake2b(digest_size=8)
        for arr in (self.components_, self.center_, self.coef_, self.intercept_):
            hash_c_order(h, arr)
        h.update(self.stats_.fingerprint().encode())
        return h.hexdigest()

    def __sklearn_clone__(self):
        # A fitted classifier given as the boundary is data (its coef_/intercept_), not a
        # sub-estimator to refit: clones (cross-validation, grid search) keep it fitted.
        boundary = self.boundary
        if not hasattr(boundary, "get_params"):
            return _clone_parametrized(self)
        self.boundary = None
        try:
            new = _clone_parametrized(self)
        finally:
            self.boundary = boundary
        new.boundary = boundary
        return new

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters (scikit-learn's ``get_params``); a classifier given as ``boundary`` is data.

        Its own parameters (``boundary__C``) are not listed: setting them would not refit
        it, and would change the caller's classifier, which clones share.
        """
        return super().get_params(deep=False)

    def set_params(self, **params: Any) -> "BoundaryProjector":
        """Set parameters (scikit-learn's ``set_params``); an unknown name is an InputError."""
        valid = self.get_params(deep=False)
        for key in params:
            head, nested, _ = key.partition("__")
            if head not in valid:
                msg = f"unknown parameter {key!r}; valid: {', '.join(valid)}"
                raise InputError(msg)
            if nested:  # boundary__C: was AttributeError on None, and on a classifier set its C
                # (unfitted again, the search's grid had no effect) in the caller's object
                what = "None" if valid[head] is None else f"a {type(valid[head]).__name__}"
                msg = (f"unknown parameter {key!r}: {head} ({what}) is data, not a sub-estimator: "
                       "its parameters are not set here; fit a classifier as wanted and give "
                       "it as boundary")
                raise InputError(msg)
        return super().set_params(**params)

    def _stored_params(self):
        params = self.get_params(deep=False)
        params.pop("progress")
        params.pop("max_summary_memory")  # a property of the machine, not of the model
        if params["priors"] is not None:
            params["priors"] = np.asarray(params["priors"], dtype=float).tolist()
        if self.boundary is not None:
            # the classes it was fitted with, not read again: the file (or classifier) may
            # have changed or gone since, and the stored classes must be the solution's
            classes = self.__dict__.get("_given_classes")
            params["boundary"] = {
                "source": _boundary_source(self.boundary),
                "classes": None if classes is None else classes.tolist(),
            }
        return params

    def to_state(self, extra: Mapping[str, Any] | None = None) -> ModelRecord:
        """The fitted model as a :class:`~streamproj.record.ModelRecord` (no file, no clock).

        ``extra``: more ``model.json`` fields (e.g. ``sources``, ``history``).
        Parameters set since the fit (``set_params(shrinkage=…)``) are solved
        first, from the summaries, so the record's parameters are its solution's;
        :class:`~streamproj.errors.StreamprojError` where they cannot be (the
        summaries lack what they need: fit again), the model left as it was.
        """
        self._check_fitted()
        self._solve_as_set()
        meta = {
            "streamproj_version": __version__,
            "model_id": self.model_id_,
            "params": self._stored_params(),
            "classes": self.classes_.tolist(),
            "counts": self.stats_.counts.tolist(),
            "n_features": int(self.n_features_in_),
            "n_components": int(self.components_.shape[0]),
            "summary_detail": self.stats_.detail,
        }
        if self.boundary is None and self._lda_tested(meta["model_id"]):
            meta["singularity_test"] = solvers.SINGULARITY_TEST  # the LDA of stats_ passed it
        if hasattr(self, "feature_names_in_"):
            meta["feature_names"] = [str(n) for n in self.feature_names_in_]
        meta.update(extra or {})
        solution = {
            "components": self.components_,
            "center": self.center_,
            "coef": self.coef_,
            "intercept": self.intercept_,
            "classes": self.classes_,
        }
        declared = getattr(self, "_declared", None)
        if declared is not None:  # partial_fit's classes=: the label set stays fixed once loaded
            solution["declared_classes"] = declared
        return ModelRecord(meta, self.stats_, solution)

    def to_meta(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The JSON-ready description written to ``model.json`` (:meth:`to_state`, stamped now)."""
        return {**self.to_state(extra).meta, "saved": store.timestamp()}

    def save(self, path: str | Path, extra: Mapping[str, Any] | None = None) -> str | Path:
        """Write the model directory ``path`` (crash-safe; see :mod:`streamproj.store`).

        A model there whose ledger records sources (the command line's ``fit``,
        ``update``) is not replaced by one without them: the next ``update``
        would merge those sources again, and ``forget`` could not drop them.
        """
        _check_model_path(path)
        with store.model_lock(path):
            there = store.read_model_meta(path) or {}
            held = [e.get("url") if isinstance(e, dict) else e for e in there.get("sources") or []]
            if held and not (extra or {}).get("sources"):
                msg = (f"{path} is a model whose ledger records {len(held)} source"
                       f"{'s' if len(held) != 1 else ''} ({held[0]}…); saving this "
                       "estimator over it would drop that ledger, and the next update would merge "
                       "them again: save it to a new path, or add rows with streamproj update")
                raise InputError(msg)
            store.write_record(path, self.to_state(extra))
        return path

    @classmethod
    def from_saved(cls, meta: Mapping[str, Any], stats: ClassStats,
                   solution: Mapping[str, Any]) -> "BoundaryProjector":
        """The model stored as ``meta``, ``stats`` and ``solution`` (see :meth:`from_state`)."""
        return cls.from_state(ModelRecord(meta, stats, solution))

    @classmethod
    def from_state(cls, record: ModelRecord) -> "BoundaryProjector":
        """The fitted model a :class:`~streamproj.record.ModelRecord` describes (no pass over rows).

        The LDA solution is solved again from the record's summaries (tiny p×p
        problems); the axes, centre and boundary are taken as stored.
        """
        meta, stats, solution = record
        params = dict(meta["params"])
        if isinstance(params.get("shrinkage"), str) and params["shrinkage"] not in ("auto", "oas"):
            # the first models (before the estimator checked its parameters) stored the string
            # given, which the solver normalised where it was used: "none", "None", "0.5"
            # (another string is refused below, as the parameter it is)
            with contextlib.suppress(InputError):
                params["shrinkage"] = solvers.validate_shrinkage(params["shrinkage"])
        if isinstance(params.get("boundary"), dict):
            given = params["boundary"]
            params["boundary"] = {
                "coef": solution["coef"],
                "intercept": solution["intercept"],
                "classes": None if given.get("classes") is None else np.asarray(given["classes"]),
                "source": given.get("source", "coef/intercept"),
            }
        model = cls(**params)
        try:  # edited by hand ("center": 5): refused on reading, not believed until an update
            model._validate_params()
        except InvalidParameterError as exc:
            name = "the model" if record.where is None else f"model {record.where}"
            version = f" (version {record.version})" if record.version else ""
            msg = f"{name}{version} is damaged: its stored parameters are not valid: {exc}"
            raise ModelError(msg) from None
        model.stats_ = stats
        model.classes_ = np.asarray(solution["classes"])
        model.coef_ = solution["coef"]
        model.intercept_ = solution["intercept"]
        model.components_ = solution["components"]
        model.center_ = solution["center"]
        model.n_features_in_ = stats.n_features
        if meta.get("feature_names"):
            model.feature_names_in_ = np.asarray(meta["feature_names"], dtype=object)
        model.meta_ = meta
        model._solved_with = model._solve_values()
        if "declared_classes" in solution:
            model._declared = np.asarray(solution["declared_classes"])
        if params.get("boundary") is None:
            if "declared_classes" not in solution and model.classes_.shape[0] != stats.n_classes:
                # classes declared by partial_fit(classes=...), some with no rows yet, in a
                # record written before declared_classes was stored: the priors given for all
                # of them are solved for those with rows, as when fitted
                model._declared = model.classes_
            model._labels_ = model._solved_labels(stats)
            # the record's own parameters: set_params before first use must not change them
            solve = (model.shrinkage, model._solved_priors(stats))
            if meta.get("singularity_test") == solvers.SINGULARITY_TEST:
                # Solved on first use (see __getattr__): projecting two classes needs only the
                # stored axes and boundary, and the solve (Cholesky, 0.22 s at p = 4,096) and
                # the model id that vouches for it (0.19 s) would be idle work.
                model._deferred_lda = (meta.get("model_id"), *solve)
            else:  # 0.1's records tested the raw covariance; hand-built ones nothing: test now
                model._solve_lda(False, *solve)
        else:
            model._labels_ = model.classes_
            if params["boundary"].get("classes") is not None:
                model._given_classes = model.classes_
            model._set_centred_scores(stats)
        return model

    def _solve_lda(self, trusted, shrinkage, priors):
        """The LDA solution of ``stats_`` for a model built by :meth:`from_state`.

        ``trusted``: the record says its summaries passed the singularity test,
        so its O(p³) eigenvalues (2.2 s at p = 4,096) are skipped.
        ``shrinkage``, ``priors``: the record's (solved priors).
        """
        stats = self.stats_
        result = solvers.lda(stats, shrinkage, priors, check_singular=not trusted)
        self.priors_, self.means_ = result.priors, result.means
        self.covariance_, self.scalings_ = result.covariance, result.scalings
        self._set_centred_scores(stats, result)

    def _lda_tested(self, model_id):
        """Whether the LDA of this fitted model passed the singularity test (``model_id``: its id now)."""
        deferred = self.__dict__.get("_deferred_lda")
        return deferred is None or deferred[0] == model_id

    def __getattr__(self, name: str) -> Any:
        # Reached only when the attribute is missing: a model loaded by from_state solves its
        # LDA the first time one of its attributes is asked for.
        if name in _DEFERRED_ATTRIBUTES and "_deferred_lda" in self.__dict__:
            with _DEFERRED_LOCK:  # one solve, even when two threads ask at once
                if "_deferred_lda" in self.__dict__:
                    # A record written after the singularity test passed, for exactly these
                    # summaries, skips it; an edited one (its id no longer matches) is tested.
                    model_id, shrinkage, priors = self.__dict__["_deferred_lda"]
                    try:
                        self._solve_lda(model_id == self.model_id_, shrinkage, priors)
                    except SingularScatterError as exc:
                        msg = (f"this model's LDA (asked for {name}) cannot be solved: its record "
                               f"was changed after it was saved (its summaries no longer match model_id "
                               f"{model_id}), and {exc}")
                        raise SingularScatterError(msg) from None
                    del self.__dict__["_deferred_lda"]
            return self.__dict__[name]
        msg = f"{type(self).__name__!r} object has no attribute {name!r}"
        raise AttributeError(msg)


# set_output is available, but transform wraps its own output so lazy results stay lazy.
BoundaryProjector._sklearn_auto_wrap_output_keys = {"transform"}


def _proba_block(scores):
    if scores.ndim == 1:
        p = expit(scores)
        return np.column_stack([1.0 - p, p])
    return softmax(scores, axis=1)


def _log_proba_block(scores):
    if scores.ndim == 1:
        return np.column_stack([log_expit(-scores), log_expit(scores)])
    return scores - logsumexp(scores, axis=1, keepdims=True)


def check_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` checked as :class:`BoundaryProjector` checks them (its ``_parameter_constraints``).

    The one place parameters are validated: jobs call this before reading any
    row, and the command line and job configs re-label its
    :class:`~streamproj.errors.InvalidParameterError` with the flag or key.

    Returns
    -------
    dict
        Every parameter of the estimator, the defaults filled in.
    """
    model = BoundaryProjector(**params)
    model._validate_params()
    try:  # its form is a size ("2GB"): read it now, before any row is
        parse_memory(model.max_summary_memory)
    except StreamprojError as exc:
        expected = model._parameter_words["max_summary_memory"]
        raise InvalidParameterError(str(exc), "max_summary_memory", model.max_summary_memory,
                                    expected) from None
    return model.get_params(deep=False)


def _check_model_path(path):
    """Refuse an empty path (``load(os.environ.get("MODEL", ""))``): it is the current folder."""
    if isinstance(path, str) and not path.strip():
        msg = "the model path is empty; give the model directory's path"
        raise InputError(msg)


def load(path: str | Path) -> "BoundaryProjector":
    """Load a model directory written by :meth:`BoundaryProjector.save`."""
    _check_model_path(path)
    return BoundaryProjector.from_state(store.read_record(path))
