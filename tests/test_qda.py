"""StreamingQDA: equal to scikit-learn's QuadraticDiscriminantAnalysis, from class summaries."""

import dask.array as da
import numpy as np
import pytest
from conftest import make_classes
from sklearn.datasets import load_wine
from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler
from test_sklearn import _class_sorted, frame

import streamproj as sp
from streamproj.errors import BadValuesError


@pytest.mark.parametrize(("reg_param", "priors"), [(0.0, None), (0.3, None), (0.0, [0.2, 0.3, 0.5])])
def test_streaming_qda_equals_sklearn(reg_param, priors):
    # standardised: scikit-learn's QDA calls a class covariance with an eigenvalue
    # below tol=1e-4 (absolute) rank deficient, and raw wine has such small ones
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    ref = QuadraticDiscriminantAnalysis(reg_param=reg_param, priors=priors).fit(X, y)
    m = sp.StreamingQDA(reg_param=reg_param, priors=priors, chunk_rows=50).fit(X, y)
    assert np.max(np.abs(m.predict_proba(X) - ref.predict_proba(X))) <= 1e-8
    np.testing.assert_array_equal(m.predict(X), ref.predict(X))
    np.testing.assert_allclose(m.decision_function(X), ref.decision_function(X), rtol=1e-8,
                               atol=1e-8)
    lazy = m.predict_proba(da.from_array(X, chunks=(40, -1)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), m.predict_proba(X), atol=1e-15)
    Xb, yb = make_classes(n=500, p=5, seed=21)
    two = sp.StreamingQDA(reg_param=reg_param).fit(Xb, yb)
    refb = QuadraticDiscriminantAnalysis(reg_param=reg_param).fit(Xb, yb)
    assert np.max(np.abs(two.predict_proba(Xb) - refb.predict_proba(Xb))) <= 1e-8
    np.testing.assert_allclose(two.decision_function(Xb), refb.decision_function(Xb), rtol=1e-7)


@pytest.mark.parametrize("offset", [1e6, 1e8])
def test_qda_far_from_the_origin_keeps_its_digits(offset):
    # x - μ_k with the float64 mean alone was off by its rounding (decisions 1.8e-8 at 1e8)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 2000)
    base = rng.normal(size=(2000, 3)) * [0.5, 1.0, 2.0] + 0.5 * y[:, None]
    X = base + offset  # X - offset is exact (Sterbenz): the reference's rows
    q, ref = sp.StreamingQDA().fit(X, y), sp.StreamingQDA().fit(X - offset, y)
    assert np.abs(q.decision_function(X) - ref.decision_function(X - offset)).max() <= 1e-12
    assert np.abs(q.predict_proba(X) - ref.predict_proba(X - offset)).max() <= 1e-13


def test_streaming_qda_partial_fit_on_class_sorted_chunks():
    X, y = _class_sorted(n=600, p=4, k=3, seed=18)
    ref = QuadraticDiscriminantAnalysis().fit(X, y)
    m = sp.StreamingQDA()
    for rows in np.array_split(np.arange(len(X)), 7):
        m.partial_fit(X[rows], y[rows], classes=[0, 1, 2])
    assert np.max(np.abs(m.predict_proba(X) - ref.predict_proba(X))) <= 1e-8
    with pytest.raises(NotFittedError, match="only one class"):
        sp.StreamingQDA().partial_fit(X[:10], y[:10]).predict(X)


def test_boundary_projector_gives_its_qda():
    X, y = make_classes(n=900, p=5, k=3, seed=19)
    df = frame(X)
    m = sp.BoundaryProjector(keep_class_scatter=True).fit(df, y)
    q = m.to_qda(reg_param=0.1)
    ref = QuadraticDiscriminantAnalysis(reg_param=0.1).fit(X, y)
    assert isinstance(q, sp.StreamingQDA)
    assert np.max(np.abs(q.predict_proba(df) - ref.predict_proba(X))) <= 1e-8
    np.testing.assert_array_equal(q.feature_names_in_, m.feature_names_in_)
    # the solution the picture draws (plot --qda) is the same one
    np.testing.assert_allclose(sp.solvers.qda_log_posterior(m.qda(0.1), X).argmax(1),
                               q.predict_log_proba(df).argmax(1))


def test_a_class_with_one_row_is_named_as_written():
    # the message said "class np.int64(2)" (numpy's repr), not the label 2
    X, y = make_classes(n=60, p=3, k=3, seed=20)
    y[np.flatnonzero(y == 2)[1:]] = 0
    with pytest.raises(sp.StreamprojError, match=r"y has only 1 sample\(s\) in class 2; its"):
        sp.StreamingQDA().fit(X, y)
    with pytest.raises(sp.StreamprojError, match=r"in class 'c'; its"):
        sp.StreamingQDA().fit(X, np.array(["a", "b", "c"])[y])


def test_a_class_whose_squares_underflow_is_refused_unless_regularised():
    """Spread 1e-160 in class 0 alone passed the pooled test and moved its log posteriors by 8e-7."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 200)
    X = rng.normal(size=(200, 2)) + 3 * y[:, None]
    X[y == 0, 0] *= 1e-160
    with pytest.raises(BadValuesError, match="feature 0 varies so little within class 0"):
        sp.StreamingQDA().fit(X, y)
    ref = QuadraticDiscriminantAnalysis(reg_param=0.1).fit(X, y)
    m = sp.StreamingQDA(reg_param=0.1).fit(X, y)
    np.testing.assert_allclose(m.predict_log_proba(X), ref.predict_log_proba(X), rtol=1e-9, atol=1e-12)



def test_a_finite_row_whose_distances_overflow_is_named_not_scored_as_the_first_class():
    """A row 1e160 out: every class's squared distance overflowed, its scores were NaN.

    predict gave classes_[0] (argmax of NaN), predict_proba NaN and score counted it,
    beside numpy's RuntimeWarnings; the row is now refused, named, in memory and lazily.
    """
    X, y = make_classes(n=200, p=3, k=2, seed=22)
    m = sp.StreamingQDA().fit(X, y)
    far = X.copy()
    far[37, 0] = 1e160
    lazy = da.from_array(far, chunks=(30, 3))
    for call in (m.predict, m.predict_proba, m.predict_log_proba, m.decision_function,
                 lambda rows: m.score(rows, y)):
        with pytest.raises(BadValuesError, match="X row 37 is too large"):
            call(far)
        with pytest.raises(BadValuesError, match="X row 37 is too large"):
            da.compute(call(lazy))
    # a class of prior 0 scores -inf on every row, which is no reason
    zero = sp.StreamingQDA(priors=[0.0, 1.0]).fit(X, y)
    np.testing.assert_array_equal(zero.predict_proba(X)[:, 0], 0.0)
    assert (zero.predict(X) == 1).all()
