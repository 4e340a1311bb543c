"""StreamingQDA: quadratic discriminant analysis from streaming class summaries."""

from numbers import Integral, Real
from typing import Any, ClassVar, Self

import dask.array as da
import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval

from . import solvers
from .errors import SingularScatterError
from .estimator import _label, _SummaryClassifier
from .validation import block_start, refuse_too_large

__all__ = ["StreamingQDA"]


class StreamingQDA(_SummaryClassifier, ClassifierMixin, BaseEstimator):
    """Quadratic discriminant analysis fitted in one streaming pass over the rows.

    Each class keeps its count, mean and scatter (a
    :class:`~streamproj.stats.ClassStats` with detail ``"per_class"``), merged
    exactly chunk by chunk, so the rows may be far larger than memory and new
    batches merge in with :meth:`partial_fit`. Predictions and probabilities
    agree with :class:`sklearn.discriminant_analysis.QuadraticDiscriminantAnalysis`.
    Inputs are those of :class:`~streamproj.BoundaryProjector`; lazy inputs
    give lazy dask outputs.

    Parameters
    ----------
    priors : array-like of shape (K,), optional
        Class priors; default the class frequencies.
    reg_param : float in [0, 1], default=0.0
        Regularises each class covariance to ``(1-reg_param)·Σ_k + reg_param·I``.
    ddof : {0, 1}, default=0
        Class covariances ``M2_k / (n_k - ddof)``: 0 as scikit-learn ≥ 1.9, 1
        as earlier releases.
    chunk_rows : int, optional
        Rows per chunk for in-memory input.
    progress : bool, default=False
        Progress bars over chunks.
    bfloat16 : bool, default=False
        X holds bfloat16 values stored as uint16 bit patterns, decoded exactly
        (as :class:`~streamproj.BoundaryProjector`'s ``bfloat16``).

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
    priors_ : ndarray of shape (K,)
    means_ : ndarray of shape (K, p)
    rotations_ : ndarray of shape (K, p, p)
        Eigenvectors of each class covariance (columns), as scikit-learn's.
    scalings_ : ndarray of shape (K, p)
        Their regularised eigenvalues.
    stats_ : ClassStats
    n_features_in_ : int
    feature_names_in_ : ndarray of str, when fitted on a DataFrame
    """

    _parameter_constraints: ClassVar[dict] = {
        "priors": ["array-like", None],
        "reg_param": [Interval(Real, 0, 1, closed="both")],
        "ddof": [Interval(Integral, 0, 1, closed="both")],
        "chunk_rows": [Interval(Integral, 1, None, closed="left"), None],
        "progress": ["boolean"],
        "bfloat16": ["boolean"],
    }
    _needs = "QDA"
    _solution_attributes = ("rotations_", "scalings_", "means_", "priors_", "_labels_", "_qda_")
    _solve_parameters = ("priors", "reg_param", "ddof")

    def __init__(self, priors: Any = None, reg_param: float = 0.0, *, ddof: int = 0,
                 chunk_rows: int | None = None, progress: bool = False,
                 bfloat16: bool = False) -> None:
        self.priors = priors
        self.reg_param = reg_param
        self.ddof = ddof
        self.chunk_rows = chunk_rows
        self.progress = progress
        self.bfloat16 = bfloat16

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        tags.target_tags.required = True
        return tags

    def summary_detail(self) -> str:
        """QDA needs each class's own scatter."""
        return "per_class"

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> Self:
        """Summarise all rows (one pass) and solve; forgets any earlier fit."""
        self._reset()
        return self._partial_fit(X, y, None, strict=True)

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> Self:
        """Merge more rows into the summaries and solve again.

        See :meth:`BoundaryProjector.partial_fit <streamproj.BoundaryProjector.partial_fit>`.
        """
        return self._partial_fit(X, y, classes, strict=False)

    def _solve(self, stats):
        if (stats.counts <= max(self.ddof, 1)).any():
            # as scikit-learn: a class needs two rows for a covariance (a stream may bring more)
            k = int(np.flatnonzero(stats.counts <= max(self.ddof, 1))[0])
            msg = (f"y has only {stats.counts[k]} sample(s) in class "
                   f"{_label(stats.classes[k])}; its covariance is ill defined (QDA needs at least "
                   f"{max(self.ddof, 1) + 1} rows per class)")
            raise SingularScatterError(msg)
        model = solvers.qda(stats, self.reg_param, self._solved_priors(stats), self.ddof)
        self._qda_ = model
        self._labels_ = self._solved_labels(stats)
        self.priors_ = model.priors
        self.means_ = model.means
        self.rotations_ = model.rotations
        self.scalings_ = model.scalings

    # ------------------------------------------------------------- applying
    def _log_posterior(self, X):
        """Unnormalised log posteriors (n, K) of the solved classes; lazy for dask input."""
        if isinstance(X, da.Array):
            K = self._labels_.shape[0]
            return da.map_blocks(_log_posterior_block, X, self._qda_, dtype=np.float64,
                                 chunks=(X.chunks[0], (K,)), meta=np.empty((0, K)))
        return _log_posterior_block(X, self._qda_)

    def decision_function(self, X: Any) -> Any:
        """Log posteriors (n, K), or their difference ``log p(1|x) - log p(0|x)`` for two classes.

        Columns follow ``classes_``; a class declared in ``partial_fit(classes=...)``
        that has no rows yet gets -inf.
        """
        scores = self._log_posterior(self._apply_rows(X))
        if scores.shape[1] == 2:
            scores = scores[:, 1] - scores[:, 0]
        return self._full_decisions(scores)

    def predict(self, X: Any) -> Any:
        """Predicted class labels (a lazy dask array for lazy input)."""
        return self._take_classes(solvers.scores_to_index(self._log_posterior(self._apply_rows(X))))

    def predict_log_proba(self, X: Any) -> Any:
        """Log class probabilities; columns follow ``classes_``."""
        scores = self._log_posterior(self._apply_rows(X))
        if isinstance(scores, da.Array):
            logp = da.map_blocks(_log_softmax, scores, dtype=np.float64)
        else:
            logp = _log_softmax(scores)
        return self._full_columns(logp, -np.inf)

    def predict_proba(self, X: Any) -> Any:
        """Class probabilities; columns follow ``classes_``."""
        logp = self.predict_log_proba(X)
        return da.exp(logp) if isinstance(logp, da.Array) else np.exp(logp)


def _log_posterior_block(block, model, block_info=None):
    """:func:`~streamproj.solvers.qda_log_posterior` of finite rows, rows named globally.

    A finite row so far out that its squared distance to every class overflows
    has no score (NaN probabilities, ``classes_[0]`` by argmax): it is refused,
    named. A class of prior 0 scores -inf on every row, which is no reason.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scores = solvers.qda_log_posterior(model, np.asarray(block))
        bad = ~np.isfinite(scores.max(axis=1, initial=-np.inf))
    refuse_too_large(bad, block_start(block_info), "X",
                     "for QDA in float64 (its squared distance to every class mean overflows)")
    return scores


def _log_softmax(scores):
    return scores - logsumexp(scores, axis=1, keepdims=True)
