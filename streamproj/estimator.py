"""BoundaryProjector: a scikit-learn style estimator over streaming class summaries."""

import hashlib
from numbers import Integral
from pathlib import Path

import dask.array as da
import numpy as np

from . import solvers, store
from .errors import IncompatibleStatsError, InputError, NotFittedError
from .passes import accumulate, as_dask_rows, project_blocks
from .stats import ClassStats, check_finite, check_matrix

__all__ = ["BoundaryProjector", "load"]

_CENTERS = ("mean", "hyperplane")


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


class BoundaryProjector:
    """Project labelled data onto a few axes that keep a linear decision boundary exact.

    Axis 0 is the unit normal of the boundary (Fisher/LDA's, or one given), so
    ``transform(X)[:, 0]`` is the signed distance to the boundary and the
    boundary is the line ``z[0] = 0``. With K > 2 classes the first
    ``min(K-1, d)`` axes span the top Fisher directions. The remaining axes are
    the best principal directions parallel to the boundary. Everything is
    solved from per-class summaries made in one streaming pass, so the data
    may be far larger than memory and new batches merge in with
    :meth:`partial_fit`.

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
    """

    def __init__(
        self,
        n_components=2,
        shrinkage=None,
        center="mean",
        priors=None,
        boundary=None,
        *,
        chunk_rows=None,
        keep_class_scatter=False,
        progress=False,
    ):
        self.n_components = n_components
        self.shrinkage = shrinkage
        self.center = center
        self.priors = priors
        self.boundary = boundary
        self.chunk_rows = chunk_rows
        self.keep_class_scatter = keep_class_scatter
        self.progress = progress

    # ------------------------------------------------------------ fitting
    def summary_detail(self):
        """The ClassStats detail these parameters need ("pooled", "per_class" or "fourth")."""
        shrinkage = solvers.validate_shrinkage(self.shrinkage)
        if self.boundary is not None:
            return "per_class" if self.keep_class_scatter else "pooled"
        return solvers.needed_detail(shrinkage, self.priors, qda=self.keep_class_scatter)

    def _validate_params(self):
        if not isinstance(self.n_components, Integral) or self.n_components < 1:
            msg = f"n_components must be a positive integer; got {self.n_components!r}"
            raise InputError(msg)
        if self.center not in _CENTERS:
            msg = f"center must be one of {', '.join(map(repr, _CENTERS))}; got {self.center!r}"
            raise InputError(msg)
        solvers.validate_shrinkage(self.shrinkage)

    def _reset(self):
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)

    def fit(self, X, y):
        """Summarise all rows (one pass) and solve; forgets any earlier fit."""
        self._reset()
        return self.partial_fit(X, y)

    def partial_fit(self, X, y):
        """Merge more rows into the summaries (one pass over them only) and solve again.

        Every row given is counted, as in scikit-learn: the same rows given
        twice count twice (the model directory's ledger guards stored sources).
        """
        self._validate_params()
        if hasattr(self, "stats_") and hasattr(X, "shape") and len(X.shape) == 2:
            if X.shape[1] != self.stats_.n_features:
                msg = f"X has {X.shape[1]} features but the model was fitted on {self.stats_.n_features}"
                raise InputError(msg)
        batch = accumulate(X, y, self.summary_detail(), self.chunk_rows, self.progress)
        return self.partial_fit_stats(batch)

    def partial_fit_stats(self, stats):
        """Merge an already accumulated :class:`ClassStats` and solve again."""
        if not isinstance(stats, ClassStats):
            msg = f"expected a ClassStats; got {type(stats).__name__}"
            raise InputError(msg)
        self._validate_params()
        if hasattr(self, "stats_"):
            if stats.n_features != self.stats_.n_features:
                msg = f"the new rows have {stats.n_features} features but the model was fitted on {self.stats_.n_features}"
                raise IncompatibleStatsError(msg)
            merged = self.stats_ + stats
        else:
            merged = stats
        self._solve(merged)
        self.stats_ = merged
        return self

    def fit_stats(self, stats):
        """Solve from a :class:`ClassStats` alone (no rows needed); forgets any earlier fit."""
        self._reset()
        return self.partial_fit_stats(stats)

    def _solve(self, stats):
        p = stats.n_features
        if self.boundary is None:
            result = solvers.lda(stats, self.shrinkage, self.priors)
            coef, intercept = result.coef, result.intercept
            basis = solvers.boundary_basis(coef, result.scalings if stats.n_classes > 2 else None)
            fitted = {
                "priors_": result.priors,
                "means_": result.means,
                "covariance_": result.covariance,
                "scalings_": result.scalings,
            }
            classes = stats.classes
            mean_distance = result.mean_decision[0] / np.linalg.norm(coef)
            lda_result = result if stats.n_classes > 2 else None
        else:
            coef, intercept, given, _ = _external_boundary(self.boundary)
            if coef.shape[1] != p:
                msg = f"the boundary has {coef.shape[1]} coefficients but the data have {p} features"
                raise InputError(msg)
            classes = stats.classes if given is None else given
            if stats.n_classes < 2 and given is None:
                msg = (f"a boundary needs at least two classes; the data hold only "
                       f"{stats.classes.tolist()} ({stats.n_samples} rows)")
                raise InputError(msg)
            expected = 1 if len(classes) <= 2 else len(classes)
            if coef.shape[0] != expected:
                msg = f"the boundary has {coef.shape[0]} rows of coefficients; {len(classes)} classes need {expected}"
                raise InputError(msg)
            basis = solvers.boundary_basis(coef)
            fitted = {}
            mean_distance = lda_result = None
        if coef.shape[0] == 1:
            w, b = solvers.unit_boundary(coef, intercept)
        else:
            w = b = None
        center, scatter = solvers.projection_center(stats, w, b, self.center,
                                                    mean_distance if w is not None else None)
        V = solvers.boundary_axes(basis, scatter, self.n_components)
        for name in ("priors_", "means_", "covariance_", "scalings_"):
            if hasattr(self, name):
                delattr(self, name)
        for name, value in fitted.items():
            setattr(self, name, value)
        self.classes_ = np.asarray(classes)
        self.coef_ = coef
        self.intercept_ = intercept
        self.components_ = V.T
        self.center_ = center
        self.n_features_in_ = p
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
    def _check_fitted(self):
        if not hasattr(self, "components_"):
            msg = "this BoundaryProjector is not fitted yet; call fit(X, y) first"
            raise NotFittedError(msg)

    def _rows(self, X):
        """numpy rows (validated) or a lazy dask array."""
        if isinstance(X, da.Array) or (hasattr(X, "chunks") and not isinstance(X, np.ndarray)):
            X = as_dask_rows(X, self.chunk_rows)
        else:
            X = np.asarray(X)
            check_matrix(X)
            check_finite(X)
        if X.shape[1] != self.n_features_in_:
            msg = f"X has {X.shape[1]} features but the model was fitted on {self.n_features_in_}"
            raise InputError(msg)
        return X

    def transform(self, X):
        """Coordinates ``(X - center_) @ components_.T`` (float64); lazy for dask/Zarr input."""
        self._check_fitted()
        X = self._rows(X)
        if isinstance(X, da.Array):
            return project_blocks(X, self.center_, self.components_)
        return np.subtract(X, self.center_, dtype=np.float64) @ self.components_.T

    def _centred(self, X):
        """``X - _score_center_`` in float64 (lazy for dask)."""
        if isinstance(X, da.Array):
            return X - self._score_center_
        return np.subtract(X, self._score_center_, dtype=np.float64)

    def _scores(self, X):
        """Scores fit for argmax/softmax, in centred form: (n,) for one boundary, else (n, K).

        ``X`` is validated rows (numpy, or dask for a lazy result). For K > 2
        the scores differ from :meth:`decision_function` by a per-row constant
        only, which keeps their differences exact far from the origin.
        """
        scores = self._centred(X) @ self._score_coef_.T + self._score_offset_
        return scores[:, 0] if self._score_coef_.shape[0] == 1 else scores

    def decision_function(self, X):
        """``X @ coef_.T + intercept_`` (computed in centred form): (n,) for two classes, else (n, K)."""
        self._check_fitted()
        X = self._rows(X)
        scores = self._centred(X) @ self.coef_.T + self._decision_offset_
        return scores[:, 0] if self.coef_.shape[0] == 1 else scores

    def predict(self, X):
        """Predicted class labels."""
        self._check_fitted()
        index = solvers.scores_to_index(self._scores(self._rows(X)))
        if isinstance(index, da.Array):
            return index.map_blocks(self.classes_.take, dtype=self.classes_.dtype)
        return self.classes_.take(index)

    def score(self, X, y):
        """Mean accuracy of :meth:`predict` on (X, y)."""
        predicted = self.predict(X)
        if isinstance(predicted, da.Array):
            y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y), chunks=predicted.chunks)
            return float((predicted == y.rechunk(predicted.chunks)).mean().compute())
        return float(np.mean(predicted == np.asarray(y)))

    def qda(self, reg_param=0.0, ddof=0):
        """QDA on the same summaries (needs ``keep_class_scatter=True`` or per-class shrinkage)."""
        self._check_fitted()
        return solvers.qda(self.stats_, reg_param, self.priors, ddof)

    def reconstruction_error(self):
        """``Σ‖(x-c) - VVᵀ(x-c)‖²`` over the fitted rows, from the summaries."""
        self._check_fitted()
        return solvers.reconstruction_error(self.stats_, self.components_, self.center_)

    # -------------------------------------------------------------- storage
    @property
    def model_id_(self):
        """A short digest identifying the fitted axes, centre, boundary and data summary."""
        self._check_fitted()
        h = hashlib.blake2b(digest_size=8)
        for arr in (self.components_, self.center_, self.coef_, self.intercept_):
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update(self.stats_.fingerprint().encode())
        return h.hexdigest()

    def get_params(self, deep=True):
        return {
            "n_components": self.n_components,
            "shrinkage": self.shrinkage,
            "center": self.center,
            "priors": self.priors,
            "boundary": self.boundary,
            "chunk_rows": self.chunk_rows,
            "keep_class_scatter": self.keep_class_scatter,
            "progress": self.progress,
        }

    def set_params(self, **params):
        for key, value in params.items():
            if key not in self.get_params():
                msg = f"unknown parameter {key!r}; valid: {', '.join(self.get_params())}"
                raise InputError(msg)
            setattr(self, key, value)
        return self

    def _stored_params(self):
        params = self.get_params()
        params.pop("progress")
        if params["priors"] is not None:
            params["priors"] = np.asarray(params["priors"], dtype=float).tolist()
        if self.boundary is not None:
            _, _, classes, source = _external_boundary(self.boundary)
            params["boundary"] = {
                "source": source,
                "classes": None if classes is None else classes.tolist(),
            }
        return params

    def to_meta(self, extra=None):
        """The JSON-ready description written to ``model.json``."""
        self._check_fitted()
        import streamproj

        meta = {
            "streamproj_version": streamproj.__version__,
            "model_id": self.model_id_,
            "saved": store.timestamp(),
            "params": self._stored_params(),
            "classes": self.classes_.tolist(),
            "counts": self.stats_.counts.tolist(),
            "n_features": int(self.n_features_in_),
            "n_components": int(self.components_.shape[0]),
            "summary_detail": self.stats_.detail,
        }
        meta.update(extra or {})
        return meta

    def _solution(self):
        return {
            "components": self.components_,
            "center": self.center_,
            "coef": self.coef_,
            "intercept": self.intercept_,
            "classes": self.classes_,
        }

    def save(self, path, extra=None):
        """Write the model directory ``path`` (crash-safe; see :mod:`streamproj.store`)."""
        with store.model_lock(path):
            store.write_model(path, self.to_meta(extra), self.stats_, self._solution())
        return path

    @classmethod
    def from_saved(cls, meta, stats, solution):
        params = dict(meta["params"])
        if isinstance(params.get("boundary"), dict):
            given = params["boundary"]
            params["boundary"] = {
                "coef": solution["coef"],
                "intercept": solution["intercept"],
                "classes": None if given.get("classes") is None else np.asarray(given["classes"]),
                "source": given.get("source", "coef/intercept"),
            }
        model = cls(**params)
        model.stats_ = stats
        model.classes_ = solution["classes"]
        model.coef_ = solution["coef"]
        model.intercept_ = solution["intercept"]
        model.components_ = solution["components"]
        model.center_ = solution["center"]
        model.n_features_in_ = stats.n_features
        result = None
        if params.get("boundary") is None:
            result = solvers.lda(stats, model.shrinkage, model.priors)
            model.priors_, model.means_ = result.priors, result.means
            model.covariance_, model.scalings_ = result.covariance, result.scalings
        model._set_centred_scores(stats, result if stats.n_classes > 2 else None)
        model.meta_ = meta
        return model

    def __repr__(self):
        args = [f"n_components={self.n_components!r}", f"shrinkage={self.shrinkage!r}",
                f"center={self.center!r}"]
        if self.priors is not None:
            args.append(f"priors={np.asarray(self.priors).tolist()!r}")
        if self.boundary is not None:
            args.append(f"boundary=<{type(self.boundary).__name__}>")
        return f"BoundaryProjector({', '.join(args)})"


def load(path):
    """Load a model directory written by :meth:`BoundaryProjector.save`."""
    return BoundaryProjector.from_saved(*store.read_model(path))
