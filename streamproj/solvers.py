"""Pure solvers on class summaries: LDA/Fisher, QDA, shrinkage, boundary-preserving axes.

Arrays (or a :class:`~streamproj.stats.ClassStats`) in, arrays out; nothing here
touches rows or files. Covariance conventions follow scikit-learn's
``LinearDiscriminantAnalysis(solver="eigen")`` and
``QuadraticDiscriminantAnalysis`` so the results can be compared to the last
digit: maximum-likelihood class covariances ``M2_k / n_k``, weighted by the
priors, shrunk per class.
"""

import warnings
from dataclasses import dataclass
from numbers import Real

import numpy as np
from scipy import linalg

from .errors import InputError, SingularScatterError, StreamprojWarning

__all__ = [
    "LDA",
    "QDA",
    "boundary_axes",
    "boundary_basis",
    "class_priors",
    "covariance",
    "lda",
    "ledoit_wolf_covariance",
    "linear_decision",
    "needed_detail",
    "oas_covariance",
    "pca_axes",
    "projection_center",
    "qda",
    "qda_log_posterior",
    "qda_predict_proba",
    "reconstruction_error",
    "shrunk_covariance",
    "total_covariance",
    "unit_boundary",
    "validate_shrinkage",
    "within_covariance",
]

_EPS = np.finfo(np.float64).eps


# ------------------------------------------------------------------ options
def validate_shrinkage(shrinkage):
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


def class_priors(counts, priors=None):
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
    priors = np.asarray(priors, dtype=np.float64).reshape(-1)
    if priors.shape != counts.shape:
        msg = f"priors has {priors.shape[0]} entries but there are {counts.shape[0]} classes"
        raise InputError(msg)
    if (priors < 0).any() or not np.isfinite(priors).all():
        msg = f"priors must be finite and non-negative; got {priors.tolist()}"
        raise InputError(msg)
    if abs(priors.sum() - 1.0) > 1e-5:
        warnings.warn("The priors do not sum to 1. Renormalizing", StreamprojWarning, stacklevel=2)
        priors = priors / priors.sum()
    return priors


def needed_detail(shrinkage=None, priors=None, qda=False):
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
def shrunk_covariance(cov, shrinkage):
    """``(1-α)·cov + α·(tr(cov)/p)·I``, as :func:`sklearn.covariance.shrunk_covariance`."""
    p = cov.shape[-1]
    out = (1.0 - shrinkage) * cov
    out[np.diag_indices(p)] += shrinkage * np.trace(cov) / p
    return out


def oas_covariance(n, scatter):
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
    alpha = np.mean(emp**2)
    mu = np.trace(emp) / p
    num = alpha + mu**2
    den = (n + 1) * (alpha - mu**2 / p)
    shrinkage = 1.0 if den == 0 else min(num / den, 1.0)
    return shrunk_covariance(emp, shrinkage)


def ledoit_wolf_covariance(n, scatter, comoment22, mean):
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


def covariance(n, scatter, shrinkage=None, comoment22=None, mean=None):
    """Covariance of ``n`` rows with scatter ``scatter``, shrunk as asked (sklearn's ``_cov``)."""
    if shrinkage is None:
        return scatter / n
    if shrinkage == "auto":
        return ledoit_wolf_covariance(n, scatter, comoment22, mean)
    if shrinkage == "oas":
        return oas_covariance(n, scatter)
    return shrunk_covariance(scatter / n, shrinkage)


def _priors_are_empirical(counts, priors):
    return np.allclose(priors, counts / counts.sum(), rtol=1e-12, atol=0)


def within_covariance(stats, shrinkage=None, priors=None):
    """Prior-weighted within-class covariance ``Σ_k π_k Σ_k`` (scikit-learn's ``_class_cov``).

    With empirical priors and no or fixed shrinkage this is the pooled
    ``S_W / n`` shrunk once (shrinkage is linear), so pooled summaries suffice.
    """
    shrinkage = validate_shrinkage(shrinkage)
    weights = class_priors(stats.counts, priors)
    if shrinkage not in ("auto", "oas") and _priors_are_empirical(stats.counts, weights):
        cov = stats.within / stats.n_samples
        return cov if shrinkage is None else shrunk_covariance(cov, shrinkage)
    stats.require(needed_detail(shrinkage, priors), f"shrinkage={shrinkage!r} with these priors")
    cov = np.zeros((stats.n_features, stats.n_features))
    for k in range(stats.n_classes):
        m22 = None if stats.comoment22 is None else stats.comoment22[k]
        cov += weights[k] * covariance(
            stats.counts[k], stats.class_scatter[k], shrinkage, m22, stats.means[k]
        )
    return cov


def total_covariance(stats, shrinkage=None):
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


def _check_positive_definite(cov, what, advice):
    """Raise :class:`SingularScatterError` if ``cov`` is numerically singular."""
    evals = linalg.eigvalsh(cov)
    top = max(abs(evals[-1]), np.finfo(float).tiny)
    if evals[0] <= top * cov.shape[0] * _EPS:
        msg = (
            f"{what} is singular (smallest eigenvalue {evals[0]:.3g}, largest {evals[-1]:.3g}, "
            f"{cov.shape[0]} features); {advice}"
        )
        raise SingularScatterError(msg)


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
    """

    classes: np.ndarray
    priors: np.ndarray
    means: np.ndarray
    covariance: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    scalings: np.ndarray
    eigenvalues: np.ndarray


def lda(stats, shrinkage=None, priors=None):
    """Linear discriminant analysis (scikit-learn's "eigen" solver) from summaries.

    For two classes ``coef = Σ⁻¹(μ_1-μ_0)`` by a Cholesky solve and the offset
    is written as ``-coef·(μ_0+μ_1)/2 + log(π_1/π_0)``, equal to
    scikit-learn's but without the cancellation of two huge quadratic terms
    when the data sit far from the origin.
    """
    _check_classes(stats, "LDA")
    shrinkage = validate_shrinkage(shrinkage)
    pri = class_priors(stats.counts, priors)
    cov = within_covariance(stats, shrinkage, priors)
    _check_positive_definite(
        cov,
        "the within-class covariance",
        "use shrinkage (e.g. shrinkage='auto' or 0.1), or drop collinear or constant features"
        + (" — there are fewer rows than features" if stats.n_samples <= stats.n_features else ""),
    )
    factor = linalg.cho_factor(cov)
    means = stats.means
    if stats.n_classes == 2:
        diff = means[1] - means[0]
        coef = linalg.cho_solve(factor, diff)[None, :]
        intercept = np.array(
            [-coef[0] @ (0.5 * (means[0] + means[1])) + np.log(pri[1]) - np.log(pri[0])]
        )
    else:
        coef = linalg.cho_solve(factor, means.T).T
        intercept = -0.5 * np.einsum("kp,kp->k", means, coef) + np.log(pri)
    between = total_covariance(stats, shrinkage) - cov
    if stats.n_classes == 2:
        # The one Fisher direction is coef itself, scaled so that vᵀ Σ v = 1.
        v = coef[0] / np.sqrt(coef[0] @ cov @ coef[0])
        return LDA(stats.classes, pri, means, cov, coef, intercept, v[:, None],
                   np.array([v @ between @ v]))
    evals, evecs = linalg.eigh(between, cov)
    order = np.argsort(evals)[::-1]
    return LDA(stats.classes, pri, means, cov, coef, intercept, evecs[:, order], evals[order])


def linear_decision(coef, intercept, X):
    """``X @ coefᵀ + intercept``; a vector for one boundary, else (n, K)."""
    scores = X @ coef.T + intercept
    return scores[:, 0] if scores.shape[1] == 1 else scores


# ---------------------------------------------------------------------- QDA
@dataclass(frozen=True)
class QDA:
    """Quadratic discriminant analysis from class summaries.

    ``rotations[k]`` (p, p) and ``scalings[k]`` (p,) are the eigenvectors and
    regularised eigenvalues of class k's covariance, as scikit-learn's.
    """

    classes: np.ndarray
    priors: np.ndarray
    means: np.ndarray
    rotations: np.ndarray
    scalings: np.ndarray


def qda(stats, reg_param=0.0, priors=None, ddof=0):
    """QDA with covariances ``(1-r)·M2_k/(n_k-ddof) + r·I``.

    ``ddof=0`` (maximum likelihood) matches scikit-learn ≥ 1.9's
    ``QuadraticDiscriminantAnalysis``; ``ddof=1`` the unbiased estimate that
    earlier releases used.
    """
    _check_classes(stats, "QDA")
    stats.require("per_class", "QDA")
    if not 0 <= reg_param <= 1:
        msg = f"reg_param must be in [0, 1]; got {reg_param!r}"
        raise InputError(msg)
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
    for k in range(stats.n_classes):
        s = scalings[k]
        if s[-1] <= max(s[0], np.finfo(float).tiny) * s.shape[0] * _EPS:
            msg = (
                f"the covariance of class {_label(stats.classes[k])} is singular "
                f"({stats.counts[k]} rows, {stats.n_features} features); increase reg_param"
            )
            raise SingularScatterError(msg)
    return QDA(stats.classes, pri, stats.means, rotations, scalings)


def qda_log_posterior(model, X):
    """Unnormalised log posteriors (n, K), scikit-learn's ``_decision_function``."""
    X = np.asarray(X, dtype=np.float64)
    out = np.empty((X.shape[0], model.classes.shape[0]))
    for k in range(model.classes.shape[0]):
        z = (X - model.means[k]) @ (model.rotations[k] / np.sqrt(model.scalings[k]))
        out[:, k] = -0.5 * (np.sum(z**2, axis=1) + np.sum(np.log(model.scalings[k])))
    return out + np.log(model.priors)


def qda_predict_proba(model, X):
    """Class probabilities (n, K) under the QDA model."""
    scores = qda_log_posterior(model, X)
    scores -= scores.max(axis=1, keepdims=True)
    prob = np.exp(scores)
    return prob / prob.sum(axis=1, keepdims=True)


# ---------------------------------------------------------- projection axes
def unit_boundary(coef, intercept):
    """A single boundary ``coef·x + intercept = 0`` as a unit normal ``w`` and offset ``b``."""
    coef = np.asarray(coef, dtype=np.float64).reshape(-1)
    norm = np.linalg.norm(coef)
    if not np.isfinite(norm) or norm == 0:
        msg = "the boundary's coefficient vector is zero or not finite"
        raise InputError(msg)
    return coef / norm, float(np.asarray(intercept, dtype=np.float64).reshape(-1)[0]) / norm


def _orthonormal_columns(A):
    """Orthonormal basis of the columns of ``A``, in order, each on the side of its column."""
    Q, R = np.linalg.qr(A)
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def boundary_basis(coef, scalings=None):
    """Orthonormal directions ``W`` (p, r) that every decision boundary is a function of.

    One boundary (coef of shape (1, p)): ``W = coef/‖coef‖``. Several classes:
    the boundaries between classes i and j have normals ``coef_i - coef_j``;
    with LDA's ``scalings`` the basis is the Gram–Schmidt orthonormalisation of
    the top K-1 Fisher directions (in order), otherwise the principal
    directions of the centred coefficient rows.
    """
    coef = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    if coef.shape[0] == 1:
        w, _ = unit_boundary(coef, 0.0)
        return w[:, None]
    rank_max = min(coef.shape[0] - 1, coef.shape[1])
    if scalings is not None:
        return _orthonormal_columns(scalings[:, :rank_max])
    centred = coef - coef.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    rank = int(np.sum(s > s[0] * max(coef.shape) * _EPS)) if s[0] > 0 else 0
    return _flip_signs(vt[:rank].T)


def _flip_signs(V):
    """Make each column's largest-magnitude entry positive (a deterministic sign)."""
    idx = np.argmax(np.abs(V), axis=0)
    return V * np.sign(V[idx, np.arange(V.shape[1])])


def boundary_axes(basis, scatter, n_components):
    """Projection axes ``V`` (p, d): the boundary directions, then the best PCA
    directions orthogonal to them.

    The extra axes are the top eigenvectors of ``P S P`` with ``P = I - WWᵀ``,
    computed in an explicit orthonormal complement of ``W`` so they are
    orthogonal to ``W`` to rounding, whatever the spectrum.

    Parameters
    ----------
    basis : ndarray of shape (p, r)
        Orthonormal boundary directions ``W``.
    scatter : ndarray of shape (p, p)
        Scatter about the chosen centre.
    n_components : int
    """
    p, r = basis.shape
    if not 1 <= n_components <= p:
        msg = f"n_components must be between 1 and the number of features ({p}); got {n_components}"
        raise InputError(msg)
    if n_components <= r:
        return basis[:, :n_components].copy()
    full, _ = np.linalg.qr(basis, mode="complete")
    complement = full[:, r:]
    reduced = complement.T @ scatter @ complement
    _, evecs = linalg.eigh(0.5 * (reduced + reduced.T))
    top = evecs[:, ::-1][:, : n_components - r]
    return np.hstack([basis, _flip_signs(complement @ top)])


def projection_center(stats, w, b, center):
    """Centre ``c`` and the scatter about the centring used for the axes.

    For one boundary ``w·x + b = 0`` the centre lies on the hyperplane, so the
    first coordinate is the signed distance. ``"mean"``: the data mean moved
    along w onto the hyperplane, axes from the total scatter. ``"hyperplane"``:
    the hyperplane point nearest the origin, ``x0 = -b·w``, axes from the
    scatter about ``x0``. With several boundaries only ``"mean"`` applies.

    Returns
    -------
    center : ndarray of shape (p,)
    scatter : ndarray of shape (p, p)
    """
    mu = stats.mean
    if center == "mean":
        c = mu if w is None else mu - (w @ mu + b) * w
        return c, stats.total
    if center == "hyperplane":
        if w is None:
            msg = "center='hyperplane' needs a single boundary (two classes); use center='mean'"
            raise InputError(msg)
        x0 = -b * w
        dev = mu - x0
        return x0, stats.total + stats.n_samples * np.outer(dev, dev)
    msg = f"center must be 'mean' or 'hyperplane'; got {center!r}"
    raise InputError(msg)


def pca_axes(scatter, n_components=2):
    """Ordinary PCA: the top eigenvectors of a scatter matrix, as rows (n_components, p)."""
    _, evecs = linalg.eigh(scatter)
    return _flip_signs(evecs[:, ::-1][:, :n_components]).T


def reconstruction_error(stats, components, center):
    """``Σ_i ‖(x_i-c) - VVᵀ(x_i-c)‖²`` from summaries alone (V = componentsᵀ)."""
    dev = stats.mean - center
    scatter = stats.total + stats.n_samples * np.outer(dev, dev)
    kept = np.trace(components @ scatter @ components.T)
    return float(np.trace(scatter) - kept)
