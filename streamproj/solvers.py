"""Pure solvers on class summaries: LDA/Fisher, QDA, shrinkage, boundary-preserving axes.

Arrays (or a :class:`~streamproj.stats.ClassStats`) in, arrays out; nothing here
touches rows or files. Covariance conventions follow scikit-learn's
``LinearDiscriminantAnalysis(solver="eigen")`` and
``QuadraticDiscriminantAnalysis`` so the results can be compared to the last
digit: maximum-likelihood class covariances ``M2_k / n_k``, weighted by the
priors, shrunk per class.
"""

import math
import warnings
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg
from scipy.linalg import blas

from .errors import BadValuesError, InputError, SingularScatterError, StreamprojWarning
from .stats import subtract_rows

if TYPE_CHECKING:  # annotations only: the solvers take any object with ClassStats' fields
    from .stats import ClassStats

__all__ = [
    "LDA",
    "QDA",
    "SINGULARITY_TEST",
    "boundary_axes",
    "boundary_basis",
    "centred_scores",
    "check_priors",
    "class_priors",
    "covariance",
    "lda",
    "ledoit_wolf_covariance",
    "linear_decision",
    "needed_detail",
    "oas_covariance",
    "pca_axes",
    "plane_holds_rule",
    "projection_center",
    "qda",
    "qda_log_posterior",
    "qda_predict_proba",
    "reconstruction_error",
    "scores_to_index",
    "shrunk_covariance",
    "total_covariance",
    "unit_boundary",
    "validate_shrinkage",
    "within_covariance",
]

_EPS = np.finfo(np.float64).eps

#: a shrinkage option as given by a user: None/"none", "auto", "oas" or a number in [0, 1]
Shrinkage = str | float | None
#: the summary detail levels of :class:`~streamproj.stats.ClassStats`, least first
Detail = Literal["pooled", "per_class", "fourth"]


# ------------------------------------------------------------------ options
def validate_shrinkage(shrinkage: Shrinkage) -> str | float | None:
    """Return ``shrinkage`` normalised (None, a float in [0, 1], "auto" or "oas")."""
    if shrinkage is None or (isinstance(shrinkage, str) and shrinkage.lower() == "none"):
        return None
    if isinstance(shrinkage, str):
        if shrinkage in ("auto", "oas"):
            return shrinkage
        try:
            shrinkage = float(shrinkage)
        except ValueError:
            msg = f"shrinkage must be None, 'auto', 'oas' or a float in [0, 1]; got {shrinkage!r}"
            raise InputError(msg) from None
    if isinstance(shrinkage, Real) and not isinstance(shrinkage, bool) and 0 <= shrinkage <= 1:
        return float(shrinkage)
    msg = f"shrinkage must be None, 'auto', 'oas' or a float in [0, 1]; got {shrinkage!r}"
    raise InputError(msg)


def check_priors(priors: ArrayLike) -> np.ndarray:
    """``priors`` as float64 numbers, refused unless finite, non-negative and of a positive sum.

    What can be said of priors before any row is read (their number is the
    classes', known after pass 1: :func:`class_priors`).
    """
    try:
        given = np.asarray(priors, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        msg = f"priors must be numbers, one per class; got {priors!r}"
        raise InputError(msg) from None
    if (given < 0).any() or not np.isfinite(given).all():
        msg = f"priors must be finite and non-negative; got {given.tolist()}"
        raise InputError(msg)
    with np.errstate(over="ignore"):
        total = given.sum()
    if not 0 < total < np.inf:  # 0 or overflowed: no weights to renormalise to
        msg = f"priors must have a positive, finite sum; got {given.tolist()} (sum {total.item()})"
        raise InputError(msg)
    return given


def class_priors(counts: ArrayLike, priors: ArrayLike | None = None) -> np.ndarray:
    """Class priors: the class frequencies, or ``priors`` validated and normalised.

    Parameters
    ----------
    counts : ndarray of shape (K,)
    priors : array-like of shape (K,), optional

    Returns
    -------
    ndarray of shape (K,)
    """
    counts = np.asarray(counts, dtype=np.float64)
    if priors is None:
        return counts / counts.sum()
    given = check_priors(priors)
    if given.shape != counts.shape:
        msg = f"priors has {given.shape[0]} entries but there are {counts.shape[0]} classes"
        raise InputError(msg)
    total = given.sum()
    if abs(total - 1.0) > 1e-5:
        warnings.warn("The priors do not sum to 1. Renormalizing", StreamprojWarning, stacklevel=2)
        given = given / total
    return given


def needed_detail(shrinkage: Shrinkage = None, priors: ArrayLike | None = None,
                  qda: bool = False) -> Detail:
    """The least summary detail a fit with these options needs.

    Pooled scatter serves no/fixed shrinkage with empirical priors; per-class
    scatter is needed by QDA, "oas" and given priors (which weight the class
    covariances); "auto" (Ledoit–Wolf) also needs fourth moments.
    """
    shrinkage = validate_shrinkage(shrinkage)
    if shrinkage == "auto":
        return "fourth"
    if qda or shrinkage == "oas" or priors is not None:
        return "per_class"
    return "pooled"


# -------------------------------------------------------------- covariances
def shrunk_covariance(cov: np.ndarray, shrinkage: float) -> np.ndarray:
    """``(1-α)·cov + α·(tr(cov)/p)·I``, as :func:`sklearn.covariance.shrunk_covariance`."""
    p = cov.shape[-1]
    out = (1.0 - shrinkage) * cov
    out[np.diag_indices(p)] += shrinkage * np.trace(cov) / p
    return out


def oas_covariance(n: float, scatter: np.ndarray) -> np.ndarray:
    """Oracle Approximating Shrinkage of ``scatter / n``, as scikit-learn's ``OAS``.

    Parameters
    ----------
    n : int
        Rows behind the scatter.
    scatter : ndarray of shape (p, p)
        Scatter about the mean.
    """
    emp = scatter / n
    p = emp.shape[0]
    if p == 1:
        return emp
    # the intensity is a ratio of squares: taken on emp scaled by a power of two (exact, the
    # same bits) since emp**2 itself overflowed for spreads past 1e77 ("no variance")
    unit = np.ldexp(emp, -int(np.frexp(np.max(np.abs(emp)))[1]))
    alpha = np.mean(unit**2)
    mu = np.trace(unit) / p
    num = alpha + mu**2
    den = (n + 1) * (alpha - mu**2 / p)
    shrinkage = 1.0 if den == 0 else min(num / den, 1.0)
    return shrunk_covariance(emp, shrinkage)


def ledoit_wolf_covariance(n: float, scatter: np.ndarray, comoment22: np.ndarray,
                           mean: np.ndarray) -> np.ndarray:
    """Ledoit–Wolf covariance on standardised data, exactly as scikit-learn's LDA "auto".

    scikit-learn standardises the rows (``StandardScaler``), applies
    ``ledoit_wolf`` and scales back. Everything it needs is a function of the
    scatter ``Σ d dᵀ`` and the fourth co-moments ``Σ d_a² d_b²`` about the mean.

    Parameters
    ----------
    n : int
    scatter : ndarray of shape (p, p)
    comoment22 : ndarray of shape (p, p)
    mean : ndarray of shape (p,)
        Only used to detect constant features, as ``StandardScaler`` does.
    """
    p = scatter.shape[0]
    var = np.diag(scatter) / n
    constant = var <= n * _EPS * var + (n * mean * _EPS) ** 2
    scale = np.where(constant, 1.0, np.sqrt(var))
    outer = np.outer(scale, scale)
    cov_z = scatter / (n * outer)
    if p > 1:
        _refuse_fourth_powers_out_of_range(n, comoment22, ~constant)
        trace = np.diag(cov_z)
        mu = trace.sum() / p
        beta_ = np.sum(comoment22 / (outer * outer))
        delta_ = np.sum((scatter / outer) ** 2) / n**2
        beta = (beta_ / n - delta_) / (p * n)
        delta = (delta_ - 2.0 * mu * trace.sum() + p * mu**2) / p
        beta = min(beta, delta)
        shrinkage = 0.0 if beta == 0 else beta / delta
        cov_z = shrunk_covariance(cov_z, shrinkage)
    return outer * cov_z


def _refuse_fourth_powers_out_of_range(n, comoment22, varies):
    """Refuse fourth co-moments that overflowed, or that average below float64's normal range.

    ``Σ d⁴`` leaves float64's range for spreads beyond about 1e±77 (the squares
    only beyond 1e±154): past 1e77 the Ledoit–Wolf intensity came out 1 (coef_
    65 % off) or NaN ("no variance"), below 1e-77 it lost digits, silently.
    A constant feature (``varies`` False) is scaled by 1, so its tiny powers are harmless.
    """
    fourth = np.diag(comoment22)
    large = np.flatnonzero(~np.isfinite(fourth))
    small = np.flatnonzero(varies & (fourth < n * np.finfo(np.float64).tiny))
    if large.size or small.size:
        j, what = (int(large[0]), "overflow") if large.size else (int(small[0]), "underflow")
        spread = "above about 1e77" if large.size else "below about 1e-77"
        msg = (f"shrinkage='auto' needs the fourth powers of each feature's deviations, and "
               f"those of feature {j} {what} float64 (a spread {spread}); rescale the features")
        raise BadValuesError(msg)


def covariance(n: float, scatter: np.ndarray, shrinkage: str | float | None = None,
               comoment22: np.ndarray | None = None, mean: np.ndarray | None = None) -> np.ndarray:
    """Covariance of ``n`` rows with scatter ``scatter``, shrunk as asked (sklearn's ``_cov``)."""
    if shrinkage is None:
        return scatter / n
    if shrinkage == "auto":
        if comoment22 is None or mean is None:
            msg = "shrinkage='auto' needs the fourth co-moments and the mean of the rows"
            raise InputError(msg)
        return ledoit_wolf_covariance(n, scatter, comoment22, mean)
    if shrinkage == "oas":
        return oas_covariance(n, scatter)
    return shrunk_covariance(scatter / n, float(shrinkage))


def _priors_are_empirical(counts, priors):
    return np.allclose(priors, counts / counts.sum(), rtol=1e-12, atol=0)


def within_covariance(stats: "ClassStats", shrinkage: Shrinkage = None,
                      priors: ArrayLike | None = None) -> np.ndarray:
    """Prior-weighted within-class covariance ``Σ_k π_k Σ_k`` (scikit-learn's ``_class_cov``).

    With empirical priors and no or fixed shrinkage this is the pooled
    ``S_W / n`` shrunk once (shrinkage is linear), so pooled summaries suffice.
    """
    shrinkage = validate_shrinkage(shrinkage)
    weights = class_priors(stats.counts, priors)
    if shrinkage not in ("auto", "oas") and _priors_are_empirical(stats.counts, weights):
        cov = stats.within / stats.n_samples
        return cov if shrinkage is None else shrunk_covariance(cov, float(shrinkage))
    stats.require(needed_detail(shrinkage, priors), f"shrinkage={shrinkage!r} with these priors")
    scatter = stats.class_scatter
    assert scatter is not None  # stats.require above has checked it is held
    cov = np.zeros((stats.n_features, stats.n_features))
    for k in range(stats.n_classes):
        m22 = None if stats.comoment22 is None else stats.comoment22[k]
        cov += weights[k] * covariance(stats.counts[k], scatter[k], shrinkage, m22, stats.means[k])
    return cov


def total_covariance(stats: "ClassStats", shrinkage: Shrinkage = None) -> np.ndarray:
    """Covariance of all rows, shrunk the same way (scikit-learn's ``_cov(X)``)."""
    shrinkage = validate_shrinkage(shrinkage)
    if shrinkage == "auto":
        n, m2, _, m22 = stats.total_moments()
        return ledoit_wolf_covariance(n, m2, m22, stats.mean)
    return covariance(stats.n_samples, stats.total, shrinkage)


def _label(value):
    """A class label as users wrote it (``1``, ``'cat'``), not numpy's ``np.int64(1)``."""
    return repr(np.asarray(value).item())


def _check_classes(stats, needed="a boundary"):
    if stats.n_classes < 2:
        only = stats.classes.tolist()
        msg = (
            f"{needed} needs at least two classes; the data hold only "
            f"{only if only else 'no rows'} ({stats.n_samples} rows)"
        )
        raise InputError(msg)


# Names the singularity test of :func:`_scaled_factor` in a saved model's record, so a model
# is loaded without repeating it only where this very test passed (change it with the test).
SINGULARITY_TEST = "correlation form: smallest eigenvalue > p·eps·largest"


def _scaled_factor(cov, what, advice, check=True):
    """Cholesky factor of the correlation form of ``cov``, deciding singularity scale-invariantly.

    With ``D = diag(cov)``, ``C = D^-1/2 cov D^-1/2`` has a unit diagonal
    whatever the units of the features, so "numerically singular" means the
    same for data in units of 1e-4 and of 1e4: the smallest eigenvalue of C
    is below ``p·eps`` times its largest. Solving in this basis,
    ``cov⁻¹ v = D^-1/2 C⁻¹ D^-1/2 v``, keeps the digits that a solve with
    ``cov`` itself would lose to the spread of its diagonal.

    The test is settled by cheap bounds from the Cholesky factor where they
    suffice (:func:`_certainly_regular`), else by the eigenvalues (an O(p³)
    ``eigvalsh``: 2.4 s at p = 4,096). ``check=False`` skips it for a
    covariance that passed it before, e.g. a saved model's; a ``corr`` that is
    not positive definite still raises.

    Returns
    -------
    scale : ndarray of shape (p,)
        ``sqrt(diag(cov))``.
    factor : the ``cho_factor`` of ``corr`` (``_correlation(cov, scale)``)

    Raises
    ------
    SingularScatterError
        When a feature has zero variance or ``corr`` is numerically singular.
    """
    diag = np.diag(cov)
    constant = np.flatnonzero(~(diag > 0))
    if constant.size:
        msg = (
            f"{what} is singular: feature {int(constant[0])} has no variance "
            f"({constant.size} such feature(s) of {cov.shape[0]}); {advice}"
        )
        raise SingularScatterError(msg)
    scale = np.sqrt(diag)
    corr = _correlation(cov, scale)
    if check:
        largest_bound = _largest_eigenvalue_bound(corr)
        factor = _factor_or_none(corr)  # in corr's memory
        certain = factor is not None and _certainly_regular(factor, largest_bound)
        # the bound's triangular inverse spent the factor: corr is made again in its memory
        # and factored below (0.23 s at p = 4,096) rather than kept as a second p×p array
        corr = _correlation(cov, scale, out=corr if factor is None else factor[0])
        if not certain:
            # Not settled by the bounds (or not positive definite): the eigenvalues decide,
            # as they always did, and are named in the message.
            evals = linalg.eigvalsh(corr, overwrite_a=True)
            if evals[0] <= evals[-1] * corr.shape[0] * _EPS:
                msg = (
                    f"{what} is singular (smallest eigenvalue of its correlation form "
                    f"{evals[0]:.3g}, largest {evals[-1]:.3g}, {cov.shape[0]} features); {advice}"
                )
                raise SingularScatterError(msg)
            corr = _correlation(cov, scale, out=corr)
    # the factor takes corr's memory; a caller that needs corr makes it again (_correlation)
    factor = _factor_or_none(corr)
    if factor is None:
        msg = f"{what} is singular (its correlation form is not positive definite); {advice}"
        raise SingularScatterError(msg)
    return scale, factor


def _factor_or_none(corr):
    """``cho_factor(corr)`` in corr's own memory; None when corr is not positive definite."""
    try:
        return linalg.cho_factor(corr, overwrite_a=True)
    except linalg.LinAlgError:
        return None


# Columns per step of the bounds below: small temporaries.
_BOUND_COLUMNS = 256
# How far inside the test's threshold the bounds must be: their own rounding is far smaller.
_CERTAIN_MARGIN = 16.0


def _largest_eigenvalue_bound(corr):
    """``max_i Σ_j |corr_ij|`` (≥ the largest eigenvalue), a few columns at a time."""
    with np.errstate(over="ignore"):  # inf: not settled here, the eigenvalues decide
        return max(float(np.abs(corr[:, j0:j0 + _BOUND_COLUMNS]).sum(axis=0).max())
                   for j0 in range(0, corr.shape[1], _BOUND_COLUMNS))


def _certainly_regular(factor, largest_bound):
    """Whether the singularity test surely passes, from the Cholesky factor of ``corr``.

    The test asks ``λ_min > p·eps·λ_max`` of ``corr``. ``λ_max`` is at most
    ``largest_bound`` and ``1/λ_min = ‖corr⁻¹‖₂ ≤ trace(corr⁻¹) = ‖U⁻¹‖²_F``
    for ``corr = UᵀU``, so a large enough ``1/‖U⁻¹‖²_F`` settles it without
    the eigenvalues: at p = 4,096 the triangular inverse and its norm take
    0.25 s against 2.4 s for ``eigvalsh``. The bounds are loose (up to p-fold
    each), so a nearly singular ``corr`` is left to the eigenvalues, which
    decide exactly as before. ``factor``'s memory is overwritten.
    """
    c, lower = factor
    p = c.shape[0]
    inverse, info = linalg.lapack.dtrtri(c, lower=lower, overwrite_c=1)
    if info != 0:
        return False
    trace = 0.0
    for j0 in range(0, p, _BOUND_COLUMNS):
        j1 = min(j0 + _BOUND_COLUMNS, p)
        # only the triangle holds the inverse (the other holds what cho_factor left)
        part = np.tril(inverse[j0:, j0:j1]) if lower else np.triu(inverse[:j1, j0:j1], -j0)
        trace += float(np.einsum("ij,ij->", part, part))
    if not np.isfinite(trace) or trace <= 0:
        return False
    return 1.0 / trace > _CERTAIN_MARGIN * largest_bound * p * _EPS


def _correlation(cov, scale, out=None):
    """``D^-1/2 cov D^-1/2`` for ``scale = sqrt(diag(cov))``, into ``out`` (no outer product)."""
    corr = np.divide(cov, scale[:, None], out=out)
    corr /= scale[None, :]
    return corr


def _scaled_solve(scale, factor, rhs):
    """``cov⁻¹ rhs`` from :func:`_scaled_factor`'s pieces; ``rhs`` (p,) or (p, m)."""
    d = scale if rhs.ndim == 1 else scale[:, None]
    return linalg.cho_solve(factor, rhs / d) / d


def scores_to_index(scores: Any) -> Any:
    """The index of the winning class: ``scores > 0`` for one boundary, else the argmax.

    Parameters
    ----------
    scores : ndarray or dask array of shape (n,) or (n, K)
        Decision scores of one boundary (positive means the second class), or
        one score per class (any per-row constant may have been dropped).

    Returns
    -------
    ndarray or dask array of shape (n,), dtype intp

    Examples
    --------
    One boundary: a positive score is the second class, zero is the first.

    >>> scores_to_index(np.array([-0.5, 0.0, 2.0]))
    array([0, 0, 1])

    One score per class: the highest wins (ties to the first).

    >>> scores_to_index(np.array([[0.1, 0.7, 0.2], [3.0, 3.0, -1.0]]))
    array([1, 0])

    Turn indices into labels with ``classes.take(index)``.
    """
    if scores.ndim == 1:
        return (scores > 0).astype(np.intp)
    if hasattr(scores, "map_blocks"):
        # dask: row by row, the classes in one block (its argmax reduction raised
        # "'tuple' object has no attribute 'ndim'" where every block is empty)
        return scores.rechunk({1: -1}).map_blocks(np.argmax, axis=1, drop_axis=1, dtype=np.intp)
    return scores.argmax(axis=1).astype(np.intp)


# ---------------------------------------------------------------------- LDA
@dataclass(frozen=True)
class LDA:
    """Solution of linear discriminant analysis from class summaries.

    Attributes
    ----------
    classes, priors, means : class labels, priors (K,), means (K, p)
    covariance : (p, p) within-class covariance used
    coef, intercept : scikit-learn's shapes: (1, p) and (1,) for two classes, else (K, p), (K,)
    scalings : generalised eigenvectors of ``S_B v = λ S_W v`` by decreasing λ,
        (p, p); for two classes only the Fisher direction, (p, 1)
    eigenvalues : the λ, decreasing
    center : (p,) the data mean ``m``, about which decisions are computed
    centred_coef, centred_offset : the decisions in centred form,
        ``(x - m)·centred_coefᵀ + centred_offset``. Two classes: ``coef`` and
        the decision value at ``m``. K > 2: ``Σ⁻¹(μ_k - m)`` and
        ``-½(μ_k - m)ᵀΣ⁻¹(μ_k - m) + log π_k``, which differ from
        ``x·coefᵀ + intercept`` by a per-row constant only (so argmax and
        softmax are the same) and lose no digits however far m is from 0.
    mean_decision : (1,) or (K,) ``m·coefᵀ + intercept`` computed without
        cancellation, so ``(x - m)·coefᵀ + mean_decision`` is scikit-learn's
        decision function in centred form.
    directions : (p, r) for K > 2, r ≤ K-1: the classifier's own Fisher
        directions, ``S_B v = λ Σ v`` with the exact between-class scatter
        ``S_B / n`` and the covariance used, by decreasing λ, solved in the
        span of the normals (as many as its numerical rank). They span every
        pairwise boundary normal ``Σ⁻¹(μ_i - μ_j)``. Without shrinkage and with
        empirical priors they span ``scalings[:, :K-1]`` where its λ are well
        above rounding; otherwise scikit-learn's ``scalings`` solve
        ``(Σ_total - Σ) v = λ Σ v`` with a shrunk total or prior-weighted
        ``Σ``, whose top directions do not span the boundaries' normals. None
        for two classes.
    """

    classes: np.ndarray
    priors: np.ndarray
    means: np.ndarray
    covariance: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    scalings: np.ndarray
    eigenvalues: np.ndarray
    center: np.ndarray
    centred_coef: np.ndarray
    centred_offset: np.ndarray
    mean_decision: np.ndarray
    directions: np.ndarray | None = None


def _refuse_underflow(stats):
    """Refuse a summary whose within-class squares of a feature average below float64's normal range.

    Such squares keep fewer digits the smaller they are (a feature spread 1e-160
    moved probabilities by 1e-4, silently; at 1e-162 it had "no variance").
    Judged on the whole summary: a chunk or a day where a feature is nearly
    constant loses digits that the other rows' larger squares make negligible.
    """
    diag = np.diag(stats.within)
    tiny = np.flatnonzero((diag > 0) & (diag < stats.n_samples * np.finfo(np.float64).tiny))
    if tiny.size:
        msg = (f"feature {int(tiny[0])} varies so little within its classes (by less than about "
               "1e-154) that its squares underflow float64 and lose digits; rescale the features")
        raise BadValuesError(msg)


def _refuse_class_underflow(stats):
    """:func:`_refuse_underflow` for each class's own squares, which QDA uses alone.

    A feature spread 1e-160 in one class (1 in the others) passed the pooled
    test and moved that class's log posteriors by 8e-7, silently.
    """
    tiny = np.finfo(np.float64).tiny
    for k in range(stats.n_classes):
        diag = np.diag(stats.class_scatter[k])
        small = np.flatnonzero((diag > 0) & (diag < stats.counts[k] * tiny))
        if small.size:
            msg = (f"feature {int(small[0])} varies so little within class "
                   f"{_label(stats.classes[k])} (by less than about 1e-154) that its squares "
                   "underflow float64 and lose digits; rescale the features or use reg_param")
            raise BadValuesError(msg)


def lda(stats: "ClassStats", shrinkage: Shrinkage = None, priors: ArrayLike | None = None,
        *, check_singular: bool = True) -> LDA:
    """Linear discriminant analysis (scikit-learn's "eigen" solver) from summaries.

    Every solve is a Cholesky solve in the correlation basis of the
    within-class covariance (see :func:`_scaled_factor`), so neither the
    singularity test nor the digits depend on the features' units. For two
    classes ``coef = Σ⁻¹(μ_1-μ_0)`` and the offset is written as
    ``-coef·(μ_0+μ_1)/2 + log(π_1/π_0)``, equal to scikit-learn's but without
    the cancellation of two huge quadratic terms. Decisions are also given in
    centred form (see :class:`LDA`), which streamproj uses for every
    decision, probability and prediction. ``check_singular=False`` skips the
    singularity test's eigenvalues, for summaries solved before (a model
    loaded from its record): the result is the same.
    """
    _check_classes(stats, "LDA")
    if check_singular:  # (a saved model's summary was solved before: it loads as it did)
        _refuse_underflow(stats)
    shrinkage = validate_shrinkage(shrinkage)
    pri = class_priors(stats.counts, priors)
    # (the renormalised priors: given again, they were said not to sum to 1 twice)
    cov = within_covariance(stats, shrinkage, None if priors is None else pri)
    if shrinkage is None:
        advice = ("use shrinkage (e.g. shrinkage='auto' or 0.1; --shrinkage auto on the command "
                  "line), or drop collinear or constant features")
    elif shrinkage in ("auto", "oas"):  # (it shrinks each class by its own estimate)
        advice = ("try a fixed shrinkage (e.g. shrinkage=0.1; --shrinkage 0.1 on the command "
                  "line), give more rows of each class, or drop collinear or constant features")
    else:  # (singular only where the features barely vary within their classes)
        advice = ("shrinkage mends only features that vary within their classes: give more rows "
                  "of each class, a larger shrinkage, or drop constant features")
    scale, factor = _scaled_factor(
        cov,
        "the within-class covariance" + ("" if shrinkage is None else f" with shrinkage={shrinkage!r}"),
        advice
        + (" — there are fewer rows than features" if stats.n_samples <= stats.n_features else ""),
        check=check_singular,
    )
    means = stats.means
    # The centre is the float64 mean m; the decisions are centred on m itself, not on
    # the true mean m + e (e = its rounding, ~1e-8 per unit of offset), so that
    # (x - m)·coef + offset is exact for rows x near m.
    center = stats.mean
    rounding = stats.mean_rounding()
    dev = stats.mean_deviations()  # μ_k - (m + e), with the digits the rounded means lack
    with np.errstate(divide="ignore"):  # a class of prior 0 is never chosen: log 0 = -inf
        log_pri = np.log(pri)
    if stats.n_classes == 2:
        diff = dev[1] - dev[0]
        coef = _scaled_solve(scale, factor, diff)[None, :]
        log_ratio = log_pri[1] - log_pri[0]
        intercept = np.array([-coef[0] @ (0.5 * (means[0] + means[1])) + log_ratio])
        # m + e - (μ_0+μ_1)/2 = (n_1/n - 1/2)(μ_1 - μ_0): the decision at the true mean,
        # exactly; plus coef·e at the float64 mean.
        at_mean = np.array([(stats.counts[1] / stats.n_samples - 0.5) * (coef[0] @ diff)
                            + log_ratio + coef[0] @ rounding])
        centred_coef, centred_offset = coef, at_mean
    else:
        coef = _scaled_solve(scale, factor, means.T).T
        intercept = -0.5 * np.einsum("kp,kp->k", means, coef) + log_pri
        dev_m = dev - rounding  # μ_k - m
        centred_coef = _scaled_solve(scale, factor, dev_m.T).T
        centred_offset = -0.5 * np.einsum("kp,kp->k", dev_m, centred_coef) + log_pri
        # m·coef_k + intercept_k = ½ mᵀΣ⁻¹m + centred_offset_k (expand μ_k = m + δ_k).
        at_mean = 0.5 * (center @ _scaled_solve(scale, factor, center)) + centred_offset
    common = (stats.classes, pri, means, cov, coef, intercept)
    centred = (center, centred_coef, centred_offset, at_mean)
    if stats.n_classes == 2:
        # The one Fisher direction is coef itself, scaled so that vᵀ Σ v = 1.
        v = coef[0] / np.sqrt(coef[0] @ cov @ coef[0])
        return LDA(*common, v[:, None], np.array([_between_along(stats, shrinkage, cov, v, dev)]),
                   *centred)
    between = _between_covariance(stats, shrinkage, pri, cov)
    # S_B v = λ S_W v in the correlation basis (v = D^-1/2 u keeps vᵀ S_W v = uᵀ C u = 1).
    evals, evecs = linalg.eigh(between / np.outer(scale, scale), _correlation(cov, scale))
    evecs = evecs / scale[:, None]
    order = np.argsort(evals)[::-1]
    # Not evecs[:, order[:K-1]], even where they solve the same problem: a pair of classes
    # nearly coinciding beside a far one has a λ at the eigensolver's rounding of the largest
    # (its boundary left the axes, 7e-4 off at 1e-6 spreads), and collinear class means give
    # a λ = 0 whose vector was an axis of noise in place of the best principal direction.
    directions = _boundary_directions(stats, cov, centred_coef)
    return LDA(*common, evecs[:, order], evals[order], *centred, directions)


def _boundary_directions(stats, cov, centred_coef):
    """The Fisher directions ``S_B v = λ Σ v`` (exact ``S_B/n``, the given Σ), by decreasing λ.

    ``S_B`` has rank ≤ K-1, so they lie in the span of ``Σ⁻¹(μ_k - m)`` (the
    rows of ``centred_coef``), which holds every pairwise boundary normal: the
    problem is solved there, in an orthonormal basis Q of that span (an r×r
    problem; ``Qᵀ S_B Q`` from the K class deviations, so no p×p array).
    """
    u, sv, _ = np.linalg.svd(centred_coef.T, full_matrices=False)
    Q = u[:, :_numerical_rank(sv, centred_coef.shape)]
    along = stats.mean_deviations() @ Q  # (K, r)
    between = (along * (stats.counts / stats.n_samples)[:, None]).T @ along
    inner = Q.T @ cov @ Q
    evals, a = linalg.eigh(0.5 * (between + between.T), 0.5 * (inner + inner.T))
    return Q @ a[:, np.argsort(evals)[::-1]]


def _between_covariance(stats, shrinkage, priors, cov):
    """The total covariance minus ``cov`` (the eigen solver's between-class covariance).

    With empirical priors and no or a fixed shrinkage (which is linear) it is
    ``S_B / n`` from the class means' deviations, shrunk the same way, never
    the difference of two covariances: where S_B is small beside S_W that
    cancelled its digits (class means 1e-6 spreads apart left the Fisher axes
    2.4e-4 off). Other shrinkage sets its own intensity for the total, and
    other priors weight the class covariances, so the difference is taken.
    """
    if shrinkage in ("auto", "oas") or not _priors_are_empirical(stats.counts, priors):
        return total_covariance(stats, shrinkage) - cov
    between = stats.between / stats.n_samples
    return between if shrinkage is None else shrunk_covariance(between, float(shrinkage))


def _between_along(stats, shrinkage, cov, v, dev):
    """``vᵀ (total covariance - cov) v``, the between-class variance along ``v``.

    Without shrinkage or with a fixed one, in O(p²) from the summaries: the
    total scatter is ``S_W + Σ_k n_k d_k d_kᵀ`` (``d_k = μ_k - μ``) and fixed
    shrinkage is linear, so no p×p matrix is formed (at p = 4,096 the two
    it took were 268 MB and a third of the solve's memory). Other shrinkage
    ("auto", "oas") sets its own intensity for the total covariance, which
    is formed then.
    """
    if shrinkage in ("auto", "oas"):
        return float(v @ (total_covariance(stats, shrinkage) - cov) @ v)
    n, p = stats.n_samples, stats.n_features
    along = dev @ v
    spread = stats.counts @ (along * along)  # vᵀ S_B v
    total_along = (v @ (stats.within @ v) + spread) / n
    if shrinkage is not None:
        trace = (np.trace(stats.within) + stats.counts @ np.einsum("kp,kp->k", dev, dev)) / n
        s = float(shrinkage)
        total_along = (1 - s) * total_along + s * trace / p * (v @ v)
    return float(total_along - v @ cov @ v)


def linear_decision(coef: np.ndarray, intercept: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``X @ coefᵀ + intercept``; a vector for one boundary, else (n, K).

    Only for boundaries near the origin: far from it this cancels digits;
    streamproj itself decides with :func:`centred_scores`.
    """
    scores = X @ coef.T + intercept
    return scores[:, 0] if scores.shape[1] == 1 else scores


def centred_scores(
    coef: ArrayLike, intercept: ArrayLike, center: ArrayLike, lda_result: LDA | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pieces of the centred decisions ``(c, A, a, d)`` for a linear classifier.

    ``(X - c) @ Aᵀ + a`` are scores fit for :func:`scores_to_index` and a
    softmax (they may differ from ``X @ coefᵀ + intercept`` by a per-row
    constant), and ``(X - c) @ coefᵀ + d`` is ``X @ coefᵀ + intercept`` itself,
    both without the cancellation of the raw form far from the origin.

    Parameters
    ----------
    coef : ndarray of shape (m, p)
    intercept : ndarray of shape (m,)
    center : ndarray of shape (p,)
        One boundary (m = 1): a point **on** the boundary (the projection
        centre). Several: any point near the data (the data mean).
    lda_result : LDA, optional
        For LDA's own boundaries its exact centred form is used (about the
        data mean, where the decision is known without rounding the centre).

    Returns
    -------
    c : ndarray of shape (p,)
    A : ndarray of shape (m, p)
    a, d : ndarray of shape (m,)
    """
    coef = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    intercept = np.asarray(intercept, dtype=np.float64).reshape(-1)
    center = np.asarray(center, dtype=np.float64)
    if lda_result is not None:
        r = lda_result
        return r.center, r.centred_coef, r.centred_offset, r.mean_decision
    if coef.shape[0] == 1:
        zero = np.zeros(1)
        return center, coef, zero, zero
    offset = intercept + coef @ center
    return center, coef, offset, offset


# ---------------------------------------------------------------------- QDA
@dataclass(frozen=True)
class QDA:
    """Quadratic discriminant analysis from class summaries.

    ``rotations[k]`` (p, p) and ``scalings[k]`` (p,) are the eigenvectors and
    regularised eigenvalues of class k's covariance, as scikit-learn's.
    ``whitening[k]`` (p, p) maps ``x - μ_k`` (as a row) to coordinates whose
    squared norm is the Mahalanobis distance, and ``log_det[k]`` is the log
    determinant of the regularised covariance; both are computed in the
    correlation basis, so they keep their digits whatever the features' units.
    ``mean_residuals[k]`` is what the float64 ``means[k]`` lacks of the exact
    class mean (see :class:`~streamproj.stats.ClassStats`): ``x - μ_k`` is
    taken as ``(x - means[k]) - mean_residuals[k]``, exact for x near μ_k far
    from the origin.
    """

    classes: np.ndarray
    priors: np.ndarray
    means: np.ndarray
    rotations: np.ndarray
    scalings: np.ndarray
    whitening: np.ndarray | None = None
    log_det: np.ndarray | None = None
    mean_residuals: np.ndarray | None = None


def qda(stats: "ClassStats", reg_param: float = 0.0, priors: ArrayLike | None = None,
        ddof: int = 0) -> QDA:
    """QDA with covariances ``(1-r)·M2_k/(n_k-ddof) + r·I``.

    ``ddof=0`` (maximum likelihood) matches scikit-learn ≥ 1.9's
    ``QuadraticDiscriminantAnalysis``; ``ddof=1`` the unbiased estimate that
    earlier releases used.
    """
    _check_classes(stats, "QDA")
    stats.require("per_class", "QDA")
    _refuse_underflow(stats)
    if not 0 <= reg_param <= 1:
        msg = f"reg_param must be in [0, 1]; got {reg_param!r}"
        raise InputError(msg)
    if isinstance(ddof, bool) or ddof not in (0, 1):  # as StreamingQDA's ddof
        msg = f"ddof must be 0 (scikit-learn ≥ 1.9) or 1 (unbiased); got {ddof!r}"
        raise InputError(msg)
    if reg_param == 0:  # (reg_param·I dwarfs what such squares lose)
        _refuse_class_underflow(stats)
    small = stats.counts <= max(ddof, 1)
    if small.any():
        k = int(np.flatnonzero(small)[0])
        msg = (
            f"class {_label(stats.classes[k])} has only {stats.counts[k]} row(s); QDA needs at least "
            f"{max(ddof, 1) + 1} rows per class to estimate its covariance"
        )
        raise InputError(msg)
    pri = class_priors(stats.counts, priors) if priors is not None else class_priors(stats.counts)
    covs = stats.covariances(ddof)
    scalings, rotations = np.linalg.eigh(covs)
    scalings, rotations = scalings[:, ::-1], rotations[:, :, ::-1]
    scalings = (1.0 - reg_param) * scalings + reg_param
    p = stats.n_features
    whitening = np.empty((stats.n_classes, p, p))
    log_det = np.empty(stats.n_classes)
    for k in range(stats.n_classes):
        cov = (1.0 - reg_param) * covs[k] + reg_param * np.eye(p)
        scale, (upper, _) = _scaled_factor(
            cov,
            f"the covariance of class {_label(stats.classes[k])}",
            f"{stats.counts[k]} rows, {p} features; increase reg_param",
        )
        upper = np.triu(upper)
        # corr = UᵀU, so (x-μ)ᵀΣ⁻¹(x-μ) = ‖((x-μ)/d) U⁻¹‖².
        whitening[k] = linalg.solve_triangular(upper, np.eye(p)) / scale[:, None]
        log_det[k] = 2.0 * (np.log(scale).sum() + np.log(np.diag(upper)).sum())
    return QDA(stats.classes, pri, stats.means, rotations, scalings, whitening, log_det,
               stats.mean_residuals)


def qda_log_posterior(model: QDA, X: ArrayLike) -> np.ndarray:
    """Unnormalised log posteriors (n, K), scikit-learn's ``_decision_function``."""
    X = np.asarray(X)
    out = np.empty((X.shape[0], model.classes.shape[0]))
    for k in range(model.classes.shape[0]):
        d = subtract_rows(X, model.means[k])  # (64-bit integers beyond 2^53 cast after it)
        if model.mean_residuals is not None:
            d -= model.mean_residuals[k]
        if model.whitening is not None and model.log_det is not None:
            z = d @ model.whitening[k]
            log_det = model.log_det[k]
        else:
            z = d @ (model.rotations[k] / np.sqrt(model.scalings[k]))
            log_det = np.sum(np.log(model.scalings[k]))
        out[:, k] = -0.5 * (np.sum(z**2, axis=1) + log_det)
    return out + np.log(model.priors)


def qda_predict_proba(model: QDA, X: ArrayLike) -> np.ndarray:
    """Class probabilities (n, K) under the QDA model."""
    scores = qda_log_posterior(model, X)
    scores -= scores.max(axis=1, keepdims=True)
    prob = np.exp(scores)
    return prob / prob.sum(axis=1, keepdims=True)


# ---------------------------------------------------------- projection axes
def unit_boundary(coef: ArrayLike, intercept: ArrayLike) -> tuple[np.ndarray, float]:
    """A single boundary ``coef·x + intercept = 0`` as a unit normal ``w`` and offset ``b``."""
    coef = np.asarray(coef, dtype=np.float64).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):  # said below, in the one error line
        norm = np.linalg.norm(coef)
    if not np.isfinite(norm) or norm == 0:
        msg = ("the boundary's coefficient vector is zero, not finite, or too large for float64 "
               "(its norm overflows; decision values would too): rescale it")
        raise InputError(msg)
    with np.errstate(over="ignore"):  # said below, in the one error line
        offset = float(np.asarray(intercept, dtype=np.float64).reshape(-1)[0] / norm)
    if not np.isfinite(offset):
        # the centre on the boundary would be infinite: every coordinate NaN, every row class 0
        msg = ("the boundary lies too far from the origin for float64 (its offset "
               "intercept/‖coef‖ overflows): rescale it")
        raise InputError(msg)
    return coef / norm, offset


def _orthonormal_columns(A):
    """Orthonormal basis of the columns of ``A``, in order, each on the side of its column."""
    Q, R = np.linalg.qr(A)
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def boundary_basis(coef: ArrayLike, directions: np.ndarray | None = None) -> np.ndarray:
    """Orthonormal directions ``W`` (p, r) that every decision boundary is a function of.

    One boundary (coef of shape (1, p)): ``W = coef/‖coef‖``. Several classes:
    the boundaries between classes i and j have normals ``coef_i - coef_j``;
    with LDA's ``directions`` (:class:`LDA`, which span them) the basis is the
    Gram–Schmidt orthonormalisation of the top K-1 of them (in order, each
    column's largest-magnitude entry positive), otherwise the principal
    directions of the centred coefficient rows.
    """
    coef = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    if coef.shape[0] == 1:
        w, _ = unit_boundary(coef, 0.0)
        return w[:, None]
    rank_max = min(coef.shape[0] - 1, coef.shape[1])
    if directions is not None:
        # each with a sign of its own (as the principal axes): the eigensolver's flipped with
        # rounding-level changes of the summaries (another chunking, an offset of 1e3)
        return _flip_signs(_orthonormal_columns(directions[:, :rank_max]))
    centred = coef - coef.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    return _flip_signs(vt[:_numerical_rank(s, coef.shape)].T)


def _numerical_rank(singular_values, shape):
    """How many singular values (decreasing) of a matrix of ``shape`` are above its rounding."""
    top = singular_values[0]
    return int(np.sum(singular_values > top * max(shape) * _EPS)) if top > 0 else 0


def _flip_signs(V):
    """Make each column's largest-magnitude entry positive (a deterministic sign)."""
    idx = np.argmax(np.abs(V), axis=0)
    return V * np.sign(V[idx, np.arange(V.shape[1])])


def boundary_axes(
    basis: np.ndarray, scatter: np.ndarray, n_components: int,
    spike: tuple[np.ndarray, float] | None = None, *, overwrite_scatter: bool = False,
) -> np.ndarray:
    """Projection axes ``V`` (p, d): the boundary directions, then the best PCA directions.

    The PCA directions are orthogonal to the boundary directions.

    The extra axes are the top eigenvectors of ``P S P`` with ``P = I - WWᵀ``,
    computed in an explicit orthonormal complement of ``W`` so they are
    orthogonal to ``W`` to rounding, whatever the spectrum.

    Parameters
    ----------
    basis : ndarray of shape (p, r)
        Orthonormal boundary directions ``W``.
    scatter : ndarray of shape (p, p)
        Scatter about the data mean (or the chosen centre when ``spike`` is None).
    n_components : int
    spike : (ndarray of shape (p,), float), optional
        ``(d, m)``: the scatter about the centre is ``scatter + m·d dᵀ`` (the
        centre is ``d`` away from the mean). Kept apart because far from the
        origin ``m·d dᵀ`` is many orders larger than ``scatter``: summed, the
        scatter's digits would be lost and every axis after the first with them.
    overwrite_scatter : bool
        ``scatter`` may be overwritten (with one boundary its memory then
        holds the reduced scatter: one p×p array fewer, 134 MB at p = 4,096).
    """
    p, r = basis.shape
    if not 1 <= n_components <= p:
        msg = f"n_components must be between 1 and the number of features ({p}); got {n_components}"
        raise InputError(msg)
    if n_components <= r:
        return basis[:, :n_components].copy()
    k = n_components - r
    if r == 1:
        # one boundary: the complement is a Householder reflector's last p-1 columns, so
        # the reduced scatter is a rank-2 update of S (O(p²)) instead of two p³ products
        reduced, to_full, to_reduced = _reflected_complement(scatter, basis[:, 0],
                                                             overwrite=overwrite_scatter)
    else:
        full, _ = np.linalg.qr(basis, mode="complete")
        complement = full[:, r:]
        reduced = complement.T @ scatter @ complement

        def to_full(rows):
            return complement @ rows

        def to_reduced(vector):
            return complement.T @ vector

    if spike is None:
        top = _top_eigvecs(reduced, k)
    else:
        d, weight = spike
        top = _top_spiked_eigvecs(0.5 * (reduced + reduced.T),
                                  to_reduced(np.asarray(d, dtype=np.float64)), float(weight), k)
    return np.hstack([basis, _flip_signs(to_full(top))])


def _reflected_complement(scatter, w, overwrite=False):
    """``Cᵀ S C`` for an orthonormal basis ``C`` (p, p-1) of the complement of unit ``w``.

    ``C`` is ``H[:, 1:]`` for the Householder reflector ``H = I - 2hhᵀ`` that
    maps ``w`` onto ``±e₁``; ``H S H = S - h uᵀ - u hᵀ`` with ``g = S h`` and
    ``u = 2(g - (hᵀg) h)``, so ``Cᵀ S C`` is ``S[1:, 1:]`` less a rank-2 term:
    O(p²) work and one p×p copy — none with ``overwrite`` and a Fortran-ordered
    ``scatter``, whose memory then holds the result (``scatter`` is spoilt).
    Only its upper triangle is meant to be read (the two rank-1 updates round
    each triangle in a different order).

    Returns
    -------
    reduced : ndarray of shape (p-1, p-1)
    to_full : callable, ``C @ rows`` for rows of shape (p-1, k)
    to_reduced : callable, ``Cᵀ v`` for a vector of shape (p,)
    """
    h = np.array(w, dtype=np.float64)
    h[0] += math.copysign(1.0, h[0])
    h /= np.linalg.norm(h)
    g = scatter @ h
    u = 2.0 * (g - (h @ g) * h)
    p = scatter.shape[0]
    if overwrite and scatter.flags.f_contiguous and p > 1:
        # S[1:, 1:] moved to the front of S's own memory, column by column (each column's
        # new place ends before its old one starts: no overlap), as a (p-1)² Fortran array
        flat = scatter.reshape(-1, order="F")
        for j in range(1, p):
            flat[(j - 1) * (p - 1) : j * (p - 1)] = flat[j * p + 1 : (j + 1) * p]
        reduced = flat[: (p - 1) ** 2].reshape((p - 1, p - 1), order="F")
    else:
        reduced = np.array(scatter[1:, 1:], order="F")
    # in place: reduced -= h uᵀ and reduced -= u hᵀ (BLAS dger, no p×p temporaries)
    reduced = blas.dger(-1.0, h[1:], u[1:], a=reduced, overwrite_a=1)
    reduced = blas.dger(-1.0, u[1:], h[1:], a=reduced, overwrite_a=1)

    def to_full(rows):
        padded = np.vstack([np.zeros((1, rows.shape[1])), rows])
        return padded - 2.0 * np.outer(h, h @ padded)

    def to_reduced(vector):
        return (vector - 2.0 * (h @ vector) * h)[1:]

    return reduced, to_full, to_reduced


def _top_eigvecs(M, k):
    """The top ``k`` eigenvectors of symmetric ``M`` (its upper triangle), by decreasing eigenvalue.

    Only those are computed (LAPACK ``syevr`` on an index range): at p = 2,048
    with k = 1 that took 0.19 s against 0.98 s for the whole decomposition.
    """
    q = M.shape[0]
    # (M is always the caller's own reduced scatter: LAPACK may work in its memory)
    _, vecs = linalg.eigh(M, lower=False, subset_by_index=[q - k, q - 1], check_finite=False,
                          overwrite_a=True)
    return vecs[:, ::-1]


def _top_spiked_eigvecs(M: np.ndarray, d: np.ndarray, weight: float, k: int) -> np.ndarray:
    """The top ``k`` eigenvectors of ``M + weight·d dᵀ`` (M symmetric PSD), without forming it.

    In a basis whose first vector is ``d/‖d‖`` the matrix is
    ``[[a, rᵀ], [r, B]]`` with ``a = M₁₁ + weight·‖d‖²``. When ``a`` dwarfs
    ``‖B‖`` the top eigenvector is ``[1; (λ - B)⁻¹ r]`` with
    ``λ = a + rᵀ(λ - B)⁻¹ r``, and every other one is ``[rᵀw / (μ - a); w]``
    with ``(B - r rᵀ / (a - μ)) w = μ w`` — each equation solved by a
    fixed-point iteration in the eigenvalue that contracts by about
    ``‖B‖ / a`` per step, and none loses ``B``'s digits to ``a``. Otherwise the
    matrix is formed and given to ``eigh`` (accurate when ``a`` is not large).

    Parameters
    ----------
    M : ndarray of shape (q, q)
    d : ndarray of shape (q,)
    weight : float
        Non-negative.
    k : int
        Between 1 and q.

    Returns
    -------
    ndarray of shape (q, k)
        Orthonormal columns, by decreasing eigenvalue.
    """
    q = M.shape[0]
    size = float(np.linalg.norm(d))
    bound = float(np.linalg.norm(M, 2)) if q else 0.0
    alpha = weight * size * size
    if q == 1 or alpha <= 1e3 * bound:
        A = M + weight * np.outer(d, d)
        _, evecs = linalg.eigh(0.5 * (A + A.T))
        return evecs[:, ::-1][:, :k]
    # Householder reflector H (symmetric, orthogonal) with H d̂ = e1
    u = d / size
    h = u.copy()
    h[0] += np.copysign(1.0, u[0])
    h /= np.linalg.norm(h)
    H = np.eye(q) - 2.0 * np.outer(h, h)
    R = H @ M @ H
    R = 0.5 * (R + R.T)
    a, r, B = R[0, 0] + alpha, R[1:, 0], R[1:, 1:]
    lam_B, Q = linalg.eigh(B)
    rq = Q.T @ r
    out = np.empty((q, k))
    # the top one: λ = a + rᵀ(λ - B)⁻¹ r
    lam = a
    for _ in range(100):
        new = a + float(np.sum(rq * rq / (lam - lam_B)))
        done = abs(new - lam) <= 4 * _EPS * abs(new)
        lam = new
        if done:
            break
    v = np.concatenate([[1.0], Q @ (rq / (lam - lam_B))])
    out[:, 0] = H @ (v / np.linalg.norm(v))
    # the others: (B - r rᵀ / (a - μ)) w = μ w, the j-th largest μ
    for j in range(1, k):
        mu = 0.0
        for _ in range(100):
            T = B - np.outer(r, r) / (a - mu)
            vals, vecs = linalg.eigh(0.5 * (T + T.T))
            new, w = float(vals[-j]), vecs[:, -j]
            done = abs(new - mu) <= 4 * _EPS * max(abs(new), float(vals[-1]))
            mu = new
            if done:
                break
        v = np.concatenate([[float(r @ w) / (mu - a)], w])
        out[:, j] = H @ (v / np.linalg.norm(v))
    # orthonormal to rounding (each column is accurate; make the set exactly so)
    Qo, Ro = np.linalg.qr(out)
    return Qo * np.sign(np.diag(Ro))


def projection_center(
    stats: "ClassStats", w: np.ndarray | None, b: float, center: str,
    mean_distance: float | None = None,
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, float] | None]:
    """Centre ``c`` and the scatter about it, as :func:`boundary_axes` takes them.

    For one boundary ``w·x + b = 0`` the centre lies on the hyperplane, so the
    first coordinate is the signed distance. ``"mean"``: the data mean moved
    along w onto the hyperplane, axes from the total scatter. ``"hyperplane"``:
    the hyperplane point nearest the origin, ``x0 = -b·w``, axes from the
    scatter about ``x0``. With several boundaries only ``"mean"`` applies.

    ``mean_distance``, when given, is ``w·μ + b`` computed by the caller
    without cancellation (far from the origin ``w·μ`` and ``b`` are both
    large; LDA knows the difference exactly from the class means).

    Returns
    -------
    center : ndarray of shape (p,)
    scatter : ndarray of shape (p, p)
        The total scatter about the mean.
    spike : (ndarray of shape (p,), float) or None
        ``(d, n)`` when the scatter about ``c`` is ``scatter + n (μ-c)(μ-c)ᵀ``
        with a term that matters to the axes (``"hyperplane"``), else None.
        ``d`` is the part of ``μ - c`` orthogonal to ``w`` (the only part that
        reaches the axes), computed from ``μ`` alone.
    """
    mu = stats.mean
    if center == "mean":
        if w is None:
            return mu, stats.total, None
        distance = w @ mu + b if mean_distance is None else mean_distance
        c = mu - distance * w
        return c, stats.total, None
    if center == "hyperplane":
        if w is None:
            msg = "center='hyperplane' needs a single boundary (two classes); use center='mean'"
            raise InputError(msg)
        x0 = -b * w
        # only the part of μ - x0 orthogonal to w reaches the axes, and x0 ∥ w:
        # that part is μ's own (no cancellation between μ and x0 far from the origin)
        return x0, stats.total, (mu - (w @ mu) * w, float(stats.n_samples))
    msg = f"center must be 'mean' or 'hyperplane'; got {center!r}"
    raise InputError(msg)


def plane_holds_rule(components: np.ndarray, coef: np.ndarray, i: int, j: int) -> bool:
    """Whether the linear rule ``coef`` decides in the plane of axes ``i`` and ``j`` alone.

    True when every difference of two classes' coefficients lies in the span
    of ``components[i]`` and ``components[j]``: moving off the plane (along
    other axes, or directions no axis keeps) then changes no class's lead, so
    where the winner changes in the plane is exactly the rule's boundary.
    Otherwise the plane through the centre shows a slice of it.

    Parameters
    ----------
    components : ndarray (d, p)
    coef : ndarray (K or 1, p)
    i, j : int

    Returns
    -------
    bool
    """
    coef = np.atleast_2d(coef)
    diffs = (coef[1:] - coef[0]).T if coef.shape[0] > 1 else coef.T  # (p, K - 1)
    plane = components[[i, j]].T  # (p, 2)
    fit, *_ = np.linalg.lstsq(plane, diffs, rcond=None)
    off = np.linalg.norm(diffs - plane @ fit, axis=0)
    return bool(np.all(off <= 1e-9 * np.maximum(np.linalg.norm(diffs, axis=0), 1e-300)))


def pca_axes(scatter: np.ndarray, n_components: int = 2) -> np.ndarray:
    """Ordinary PCA: the top eigenvectors of a scatter matrix, as rows (n_components, p)."""
    _, evecs = linalg.eigh(scatter)
    return _flip_signs(evecs[:, ::-1][:, :n_components]).T


def reconstruction_error(stats: "ClassStats", components: np.ndarray, center: np.ndarray) -> float:
    """``Σ_i ‖(x_i-c) - VVᵀ(x_i-c)‖²`` from summaries alone (V = componentsᵀ)."""
    # about c the scatter is S + n·ddᵀ (d = μ - c); the two parts' residuals are summed
    # separately so a far centre's n‖d‖² does not swamp S's (‖d - VVᵀd‖² directly)
    dev = stats.mean - center
    S = stats.total
    # (S is PSD and the rows orthonormal, so lost ≥ 0: with every direction kept, the
    # difference of the two traces is rounding, which was reported as a negative error)
    lost = max(float(np.trace(S) - np.trace(components @ S @ components.T)), 0.0)
    rest = dev - components.T @ (components @ dev)
    return float(lost + stats.n_samples * (rest @ rest))
