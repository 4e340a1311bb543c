import numpy as np
import pytest
from conftest import make_classes, make_coin
from scipy.linalg import subspace_angles
from sklearn.covariance import OAS, ledoit_wolf
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis
from sklearn.preprocessing import StandardScaler

from streamproj import solvers
from streamproj.errors import BadValuesError, InputError, SingularScatterError
from streamproj.stats import ClassStats


def stats_of(X, y, detail="fourth", size=97):
    parts = [ClassStats.from_rows(X[i : i + size], y[i : i + size], detail)
             for i in range(0, len(X), size)]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def sklearn_qda_ddof():
    """scikit-learn ≥ 1.9 uses ML class covariances (ddof 0); older releases ddof 1."""
    q = QuadraticDiscriminantAnalysis().fit([[0.0], [2.0], [10.0], [14.0]], [0, 0, 1, 1])
    return 0 if np.isclose(q.scalings_[0][0], 1.0) else 1


def test_ledoit_wolf_matches_sklearn_standardised():
    X, y = make_classes(n=80, p=7, seed=1, scale=3.0, offset=10.0)
    s = stats_of(X, y)
    Xk = X[y == 1]
    sc = StandardScaler().fit(Xk)
    expected = ledoit_wolf(sc.transform(Xk))[0] * np.outer(sc.scale_, sc.scale_)
    got = solvers.ledoit_wolf_covariance(s.counts[1], s.class_scatter[1], s.comoment22[1], s.means[1])
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("scale", "message"), [
    (1e76, None), (1e-76, None),
    (1e77, "feature 0 overflow float64 .a spread above about 1e77"),
    (1e-80, "feature 0 underflow float64 .a spread below about 1e-77"),
])
def test_ledoit_wolf_refuses_fourth_powers_beyond_float64(scale, message):
    """Σd⁴ overflowed past 1e77 (coef_ 65 % off, or "no variance") and lost digits below 1e-77."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 400)
    X = rng.normal(size=(400, 3)) @ np.array([[1, 0.9, 0.5], [0, 0.3, 0.2], [0, 0, 0.4]]) + y[:, None]
    X[:, 0] *= scale
    if message is None:
        ref = LinearDiscriminantAnalysis(solver="eigen", shrinkage="auto").fit(X, y)
        res = solvers.lda(stats_of(X, y), "auto")
        np.testing.assert_allclose(res.coef, ref.coef_, rtol=1e-9, atol=1e-9 * np.abs(ref.coef_).max())
    else:
        with pytest.raises(BadValuesError, match=f"shrinkage='auto' needs the fourth powers.*{message}"):
            solvers.lda(stats_of(X, y), "auto")


def test_oas_matches_sklearn():
    X, _ = make_classes(n=40, p=9, seed=2)
    d = X - X.mean(0)
    np.testing.assert_allclose(solvers.oas_covariance(40, d.T @ d), OAS().fit(X).covariance_,
                               rtol=1e-12)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("scale", [1e78, 1e150])
def test_oas_of_a_feature_past_1e77_is_sklearns_at_a_smaller_scale(scale, k):
    """emp**2 overflowed: "feature 0 has no variance (3 of 3)", or a bare ValueError (K = 3)."""
    X, y = make_classes(n=300, p=3, k=k, seed=2)
    X[:, 0] *= scale
    exponent = int(np.frexp(scale)[1])
    smaller = np.ldexp(X, -exponent)  # OAS's intensity is the same at any common scale
    ref = LinearDiscriminantAnalysis(solver="eigen", covariance_estimator=OAS()).fit(smaller, y)
    res = solvers.lda(stats_of(X, y, "per_class"), "oas")
    np.testing.assert_allclose(np.ldexp(res.coef, exponent), ref.coef_, rtol=1e-9,
                               atol=1e-9 * np.abs(ref.coef_).max())


@pytest.mark.parametrize("shrinkage", [None, 0.2, "auto"])
def test_lda_coef_and_intercept_match_sklearn(shrinkage):
    X, y = make_classes(n=500, p=6, k=4, seed=3)
    res = solvers.lda(stats_of(X, y), shrinkage)
    ref = LinearDiscriminantAnalysis(solver="eigen", shrinkage=shrinkage).fit(X, y)
    np.testing.assert_allclose(res.coef, ref.coef_, rtol=1e-9, atol=1e-9 * np.abs(ref.coef_).max())
    np.testing.assert_allclose(res.intercept, ref.intercept_, rtol=1e-9)
    np.testing.assert_allclose(res.covariance, ref.covariance_, rtol=1e-10)


def test_lda_with_priors_weights_class_covariances_like_sklearn():
    X, y = make_classes(n=400, p=4, k=3, seed=4)
    priors = [0.5, 0.3, 0.2]
    res = solvers.lda(stats_of(X, y, "per_class"), None, priors)
    ref = LinearDiscriminantAnalysis(solver="eigen", priors=priors).fit(X, y)
    np.testing.assert_allclose(res.covariance, ref.covariance_, rtol=1e-10)
    np.testing.assert_allclose(res.intercept, ref.intercept_, rtol=1e-9)


def test_lda_oas_matches_sklearn_covariance_estimator():
    X, y = make_classes(n=120, p=8, k=3, seed=5)
    res = solvers.lda(stats_of(X, y, "per_class"), "oas")
    ref = LinearDiscriminantAnalysis(solver="eigen", covariance_estimator=OAS()).fit(X, y)
    np.testing.assert_allclose(res.covariance, ref.covariance_, rtol=1e-10)
    np.testing.assert_allclose(res.coef, ref.coef_, rtol=1e-8, atol=1e-9 * np.abs(ref.coef_).max())


def test_pooled_summary_cannot_serve_per_class_options():
    X, y = make_classes(n=100, p=3, seed=6)
    with pytest.raises(Exception, match="detail 'fourth'"):
        solvers.lda(stats_of(X, y, "pooled"), "auto")


@pytest.mark.parametrize("reg_param", [0.0, 0.1])
def test_qda_probabilities_match_sklearn(reg_param):
    X, y = make_classes(n=600, p=4, k=3, seed=7)
    q = solvers.qda(stats_of(X, y, "per_class"), reg_param, ddof=sklearn_qda_ddof())
    ref = QuadraticDiscriminantAnalysis(reg_param=reg_param).fit(X, y)
    np.testing.assert_allclose(solvers.qda_predict_proba(q, X), ref.predict_proba(X), atol=1e-8)
    np.testing.assert_allclose(solvers.qda_log_posterior(q, X), ref._decision_function(X),
                               rtol=1e-9)


@pytest.mark.parametrize("ddof", [2, -1, 0.5, True])
def test_qda_refuses_a_ddof_other_than_0_or_1(ddof):
    """ddof=-1 gave covariances M2/(n+1), 0.5 M2/(n-0.5), silently (StreamingQDA refuses them)."""
    X, y = make_classes(n=60, p=2, seed=7)
    with pytest.raises(InputError, match=r"ddof must be 0 .* or 1"):
        solvers.qda(stats_of(X, y, "per_class"), ddof=ddof)


def test_qda_errors_name_the_class():
    X = np.array([[0.0, 1.0], [1.0, 0.0], [5.0, 5.0]])
    with pytest.raises(InputError, match="class 1 has only 1 row"):
        solvers.qda(ClassStats.from_rows(X, [0, 0, 1], "per_class"))
    X = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [5.0, 5.0], [6.0, 7.0], [7.0, 9.0]])
    with pytest.raises(SingularScatterError, match="class 0 is singular.*reg_param"):
        solvers.qda(ClassStats.from_rows(X, [0, 0, 0, 1, 1, 1], "per_class"))


def test_boundary_axes_are_orthonormal_and_start_with_w():
    X, y = make_coin()
    s = stats_of(X, y, "pooled")
    res = solvers.lda(s)
    W = solvers.boundary_basis(res.coef)
    V = solvers.boundary_axes(W, s.total, 4)
    np.testing.assert_allclose(V.T @ V, np.eye(4), atol=1e-13)
    np.testing.assert_allclose(V[:, 0], res.coef[0] / np.linalg.norm(res.coef[0]), atol=1e-15)


def test_second_axis_is_the_in_memory_constrained_pca_and_beats_random_directions():
    X, y = make_coin(n=3000, p=8, seed=2)
    s = stats_of(X, y, "pooled")
    w, b = solvers.unit_boundary(solvers.lda(s).coef, solvers.lda(s).intercept)
    c, scatter, spike = solvers.projection_center(s, w, b, "mean")
    assert spike is None
    u = solvers.boundary_axes(w[:, None], scatter, 2)[:, 1]
    assert abs(u @ w) < 1e-14
    # in-memory reference: top eigenvector of P S P on the rows themselves
    P = np.eye(8) - np.outer(w, w)
    Xc = X - c
    _evals, evecs = np.linalg.eigh(P @ (Xc.T @ Xc) @ P)
    assert abs(abs(evecs[:, -1] @ u) - 1) < 1e-10

    def error(v):
        R = Xc - np.outer(Xc @ w, w) - np.outer(Xc @ v, v)
        return np.sum(R**2)

    best = error(u)
    rng = np.random.default_rng(0)
    for _ in range(1000):
        r = rng.normal(size=8)
        r -= (r @ w) * w
        r /= np.linalg.norm(r)
        assert best <= error(r) * (1 + 1e-12)


def test_mean_centring_never_loses_to_hyperplane_centring():
    for seed in range(5):
        X, y = make_coin(n=1500, p=5, seed=seed, offset=4.0 * seed)
        s = stats_of(X, y, "pooled")
        res = solvers.lda(s)
        w, b = solvers.unit_boundary(res.coef, res.intercept)
        errors = {}
        for center in ("mean", "hyperplane"):
            c, scatter, spike = solvers.projection_center(s, w, b, center)
            V = solvers.boundary_axes(w[:, None], scatter, 2, spike)
            R = (X - c) - (X - c) @ V @ V.T
            errors[center] = np.sum(R**2)
            np.testing.assert_allclose(
                solvers.reconstruction_error(s, V.T, c), errors[center], rtol=1e-9)
        assert errors["mean"] <= errors["hyperplane"] * (1 + 1e-12)


@pytest.mark.parametrize("seed", [5, 7])
def test_reconstruction_error_with_every_direction_kept_is_not_negative(seed):
    """n_components = p: the two traces' difference was -3.6e-12, a negative sum of squares."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 300)
    X = rng.normal(size=(300, 5)) @ rng.normal(size=(5, 5)) + y[:, None]
    s = stats_of(X, y, "pooled")
    res = solvers.lda(s)
    w, b = solvers.unit_boundary(res.coef, res.intercept)
    c, S, spike = solvers.projection_center(s, w, b, "mean")
    V = solvers.boundary_axes(w[:, None], S.copy(), 5, spike)
    assert 0.0 <= solvers.reconstruction_error(s, V.T, c) <= 1e-9


def test_multiclass_basis_from_external_coef_spans_pairwise_normals():
    rng = np.random.default_rng(3)
    coef = rng.normal(size=(4, 7))
    W = solvers.boundary_basis(coef)
    assert W.shape == (7, 3)
    diffs = (coef[1:] - coef[0]).T
    assert np.max(subspace_angles(W, diffs)) < 1e-10


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shrinkage": 1.5}, r"'auto', 'oas' or a float in \[0, 1\]"),
        ({"shrinkage": "ledoit"}, r"'auto', 'oas' or a float in \[0, 1\]"),
        ({"priors": [0.5, 0.25, 0.25]}, "3 entries but there are 2 classes"),
        ({"priors": [-0.5, 1.5]}, "non-negative"),
        ({"priors": [0, 0]}, r"positive, finite sum; got \[0.0, 0.0\] \(sum 0.0\)"),
        ({"priors": [1e308, 1e308]}, r"positive, finite sum; got \[1e\+308, 1e\+308\] \(sum inf\)"),
        ({"priors": {"a": 1}}, r"priors must be numbers, one per class; got \{'a': 1\}"),
    ],
)
def test_bad_options(kwargs, message):
    X, y = make_classes(n=50, p=2, seed=8)
    with pytest.raises(InputError, match=message):
        solvers.lda(stats_of(X, y, "per_class"), **kwargs)


def test_singular_scatter_advises_shrinkage():
    X, y = make_classes(n=20, p=30, seed=9)
    with pytest.raises(SingularScatterError, match="use shrinkage.*fewer rows than features"):
        solvers.lda(stats_of(X, y, "pooled"))


@pytest.mark.parametrize("k", [2, 4])
def test_skipping_the_singularity_test_gives_the_same_solution(k):
    # a model loaded from its record is solved again without the O(p³) eigenvalue test
    X, y = make_classes(n=400, p=9, k=k, seed=10)
    stats = stats_of(X, y, "pooled")
    checked, trusted = solvers.lda(stats), solvers.lda(stats, check_singular=False)
    for name in ("coef", "intercept", "scalings", "eigenvalues", "centred_coef", "centred_offset",
                 "mean_decision"):
        np.testing.assert_array_equal(getattr(trusted, name), getattr(checked, name), err_msg=name)


def test_single_class_is_refused():
    with pytest.raises(InputError, match=r"at least two classes; the data hold only \[7\]"):
        solvers.lda(ClassStats.from_rows(np.random.default_rng(0).normal(size=(9, 2)), [7] * 9))


def test_n_components_bounds():
    with pytest.raises(InputError, match="between 1 and the number of features"):
        solvers.boundary_axes(np.eye(3)[:, :1], np.eye(3), 4)


def test_qda_ddof_one_uses_the_unbiased_class_covariances():
    X, y = make_classes(n=300, p=3, k=2, seed=10)
    s = stats_of(X, y, "per_class")
    for k in (0, 1):
        np.testing.assert_allclose(s.covariances(ddof=1)[k], np.cov(X[y == k].T), rtol=1e-12)
        np.testing.assert_allclose(s.covariances()[k], np.cov(X[y == k].T, ddof=0), rtol=1e-12)


@pytest.mark.parametrize("detail", ["pooled", "per_class", "fourth"])
@pytest.mark.parametrize("offset", [1e8, 1e12])
def test_summaries_far_from_zero_merge_exactly(detail, offset):
    # at 1e12 a float64 mean is rounded by ~6e-5 of a unit spread: the scatter about it
    # must remove that rounding (-r rᵀ/n) to stay within 1e-10
    from conftest import offset_classes, two_pass

    X, y = offset_classes(n=2000, p=3, k=3, offset=offset, seed=11)
    ref = two_pass(X, y)
    for size in (2000, 67):
        s = stats_of(X, y, detail, size=size)
        scale = np.max(np.abs(ref["scatter"]))
        assert np.max(np.abs(s.within - ref["within"])) <= 1e-10 * scale
        if detail != "pooled":
            assert np.max(np.abs(s.class_scatter - ref["scatter"])) <= 1e-10 * scale
        assert np.max(np.abs(s.deviations(ref["shift"]) - ref["centred_means"])) <= 1e-12


@pytest.mark.parametrize("p", [2, 3, 7, 60])
@pytest.mark.parametrize("order", ["F", "C"])
def test_boundary_axes_in_the_scatters_own_memory_are_the_same_bit_for_bit(p, order):
    # overwrite_scatter moves S[1:, 1:] to the front of S's memory column by column:
    # the axes must not change by a bit, and a C-ordered scatter is copied, never misread
    X, y = make_classes(n=400, p=p, k=2, seed=59)
    s = ClassStats.from_rows(X + 1e3, y)
    w = np.linalg.solve(s.within, s.means[1] - s.means[0])
    w /= np.linalg.norm(w)
    d = min(p, 3)
    expected = solvers.boundary_axes(w[:, None], np.array(s.total, order=order), d)
    scatter = np.array(s.total, order=order)
    got = solvers.boundary_axes(w[:, None], scatter, d, overwrite_scatter=True)
    np.testing.assert_array_equal(got, expected)
    if order == "C":
        np.testing.assert_array_equal(scatter, s.total)  # not written to


def test_several_boundaries_extra_axes_are_the_in_memory_constrained_pca():
    # three classes: two boundary directions, then the top eigenvectors of P S P (P = I - WWᵀ)
    # of the rows themselves; the QR complement's path (one boundary takes a reflector)
    from conftest import sin_angle

    X, y = make_classes(n=2000, p=7, k=3, seed=61)
    X[:, 2] *= 4.0  # a dominant direction for the PCA part, not along the boundaries
    s = ClassStats.from_rows(X, y)
    W = solvers.boundary_basis(solvers.lda(s).coef)
    assert W.shape[1] == 2
    V = solvers.boundary_axes(W, s.total, 4)
    np.testing.assert_allclose(V.T @ V, np.eye(4), atol=1e-13)
    assert sin_angle(V[:, :2], W) < 1e-13
    P = np.eye(7) - W @ W.T
    Xc = X - X.mean(axis=0)
    _, evecs = np.linalg.eigh(P @ (Xc.T @ Xc) @ P)
    assert sin_angle(V[:, 2:], evecs[:, -2:]) < 1e-9


def _spd_with_condition(p, condition, rng, c_order=False):
    q, _ = np.linalg.qr(rng.standard_normal((p, p)))
    evals = np.geomspace(1.0, 1.0 / condition, p)
    cov = (q * evals) @ q.T
    cov = 0.5 * (cov + cov.T)
    scale = np.geomspace(1e-4, 1e4, p)  # wildly different units
    cov = cov * scale[:, None] * scale[None, :]
    return np.ascontiguousarray(cov) if c_order else np.asfortranarray(cov)


@pytest.mark.parametrize("columns", [256, 7])  # (7: the bounds' panels split even small p)
@pytest.mark.parametrize("p", [2, 7, 60])
def test_the_singularity_bounds_never_contradict_the_eigenvalues(p, columns, monkeypatch):
    # The certificate may only say "regular" where the eigenvalue test passes; anywhere
    # else the eigenvalues decide. Condition numbers from 1 to far past singular.
    monkeypatch.setattr(solvers, "_BOUND_COLUMNS", columns)
    rng = np.random.default_rng(p)
    for condition in np.geomspace(1.0, 1e20, 41):
        cov = _spd_with_condition(p, condition, rng, c_order=bool(rng.integers(2)))
        scale = np.sqrt(np.diag(cov))
        corr = solvers._correlation(cov, scale)
        evals = np.linalg.eigvalsh(corr)
        regular = evals[0] > evals[-1] * p * solvers._EPS
        bound = solvers._largest_eigenvalue_bound(corr)
        factor = solvers._factor_or_none(solvers._correlation(cov, scale))
        if factor is not None and solvers._certainly_regular(factor, bound):
            assert regular, condition
        # the whole test raises exactly where the eigenvalue test alone (and then the
        # Cholesky factor) would have
        try:
            solvers.linalg.cho_factor(solvers._correlation(cov, scale))
            positive = True
        except solvers.linalg.LinAlgError:
            positive = False
        try:
            solvers._scaled_factor(cov.copy(), "the scatter", "advice")
        except SingularScatterError:
            assert not (regular and positive), condition
        else:
            assert regular, condition
            assert positive, condition


def test_a_well_conditioned_scatter_is_settled_without_eigenvalues(monkeypatch):
    cov = _spd_with_condition(50, 1e3, np.random.default_rng(1))
    expected = solvers._scaled_factor(cov.copy(), "the scatter", "advice")

    def refuse(*args, **kwargs):
        msg = "eigvalsh was called"
        raise AssertionError(msg)

    monkeypatch.setattr(solvers.linalg, "eigvalsh", refuse)
    scale, (c, lower) = solvers._scaled_factor(cov.copy(), "the scatter", "advice")
    np.testing.assert_array_equal(scale, expected[0])
    np.testing.assert_array_equal(np.triu(c), np.triu(expected[1][0]))  # the same factor, bit for bit
    # a nearly singular one still goes to the eigenvalues, which name themselves
    near = _spd_with_condition(50, 1e16, np.random.default_rng(2))
    with pytest.raises(AssertionError, match="eigvalsh was called"):
        solvers._scaled_factor(near, "the scatter", "advice")


def test_a_huge_off_diagonal_still_gets_the_eigenvalue_message():
    # |corr_ij| near 1e308 (no covariance of real rows): the bound overflows quietly and the
    # eigenvalues decide, naming themselves, as before the bounds (found by review)
    cov = np.array([[1.0, 1e308, 1e308], [1e308, 1.0, 1e308], [1e308, 1e308, 1.0]])
    with pytest.raises(SingularScatterError, match="smallest eigenvalue of its correlation form"):
        solvers._scaled_factor(cov, "the scatter", "advice")


def test_plane_holds_rule_only_when_the_rules_directions_lie_in_the_plane():
    from streamproj.solvers import plane_holds_rule

    rng = np.random.default_rng(3)
    basis, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    comps = basis.T[:4]  # orthonormal axes
    coef = np.array([[2.0, -1.0, 0.0, 0.0]]) @ comps  # two classes: a normal in axes 0, 1
    assert plane_holds_rule(comps, coef, 0, 1)
    assert not plane_holds_rule(comps, coef, 0, 2)
    three = np.array([[0.0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]]) @ comps + 5.0  # K = 3
    assert plane_holds_rule(comps, three, 1, 0)
    assert not plane_holds_rule(comps, three, 0, 2)
    four = np.vstack([three, comps[2] * 0.5 + 5.0])  # a fourth class needs axis 2
    assert not plane_holds_rule(comps, four, 0, 1)
    near = three.copy()
    near[2] += 1e-6 * basis.T[5]  # off every axis, by a little: still a slice
    assert not plane_holds_rule(comps, near, 0, 1)
