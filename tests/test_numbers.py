"""Issue 8: every number against an exact in-memory float64 reference and scikit-learn.

Tolerances: summaries 1e-10 relative to the two-pass reference, coef_ and axes
1e-8 (subspaces by the sine of the largest principal angle), predictions equal.
"""

import itertools
import json
import tracemalloc
import warnings

import dask.array as da
import numpy as np
import pytest
from conftest import (
    make_classes,
    offset_classes,
    reference_lda,
    rel_err,
    sin_angle,
    two_pass,
    write_zarr,
)
from sklearn.covariance import OAS
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis

import streamproj as sp
from streamproj import solvers
from streamproj.cli import main
from streamproj.errors import (
    BadValuesError,
    IncompatibleStatsError,
    InputError,
    SingularScatterError,
)
from streamproj.passes import accumulate
from streamproj.stats import ClassStats


def assert_summaries_exact(stats, ref, tol=1e-10):
    np.testing.assert_array_equal(stats.classes, ref["classes"])
    np.testing.assert_array_equal(stats.counts, ref["counts"])
    assert rel_err(stats.within, ref["within"]) <= tol
    assert rel_err(stats.total, ref["total"]) <= tol
    # the means far from zero: compare their deviations from the shift, with the residuals
    assert rel_err(stats.deviations(ref["shift"]), ref["centred_means"]) <= tol
    assert rel_err(stats.means, ref["means"]) <= 1e-15


def pairwise(coef):
    """Differences of class coefficient rows: what every pairwise boundary depends on."""
    coef = np.atleast_2d(coef)
    return coef if coef.shape[0] == 1 else coef[1:] - coef[0]


# ------------------------------------------------- 1. far from the origin, any K
@pytest.mark.parametrize("k", [2, 3, 10])
@pytest.mark.parametrize("offset", [1e4, 1e5, 1e6, 1e7, 1e8])
def test_far_from_the_origin_every_k(offset, k):
    X, y = offset_classes(n=3000, p=5, k=k, offset=offset, seed=k)
    m = sp.BoundaryProjector(n_components=min(k - 1, 5) if k > 2 else 2, chunk_rows=701).fit(X, y)
    assert_summaries_exact(m.stats_, two_pass(X, y))
    ref, shift = reference_lda(X, y)
    if k == 2:
        assert rel_err(m.coef_, ref.coef_) <= 1e-8
    else:
        # coef_k = Σ⁻¹μ_k is ~1e8 here: as an attribute it equals the reference's to its
        # own magnitude; the centred coefficients Σ⁻¹(μ_k - m) keep every pairwise digit.
        assert rel_err(m.coef_, ref.coef_ + np.linalg.solve(ref.covariance_, shift)) <= 1e-8
        assert rel_err(pairwise(m._score_coef_), pairwise(ref.coef_)) <= 1e-8
    # 100 % the reference's predictions
    np.testing.assert_array_equal(m.predict(X), ref.predict(X - shift))
    ref_scores = ref.decision_function(X - shift)
    if k == 2:
        assert rel_err(m.decision_function(X), ref_scores) <= 1e-7
        assert rel_err(m.transform(X)[:, 0] * np.linalg.norm(m.coef_), ref_scores) <= 1e-7
    else:
        # centred scores differ from the raw decision by a per-row constant only
        got = m._scores(X)
        assert rel_err(got - got[:, :1], ref_scores - ref_scores[:, :1]) <= 1e-7
        assert sin_angle(m.components_[: k - 1].T, ref.scalings_[:, : k - 1]) <= 1e-8
    # the lazy path gives the same predictions
    Xd = da.from_array(X, chunks=(999, -1))
    np.testing.assert_array_equal(m.predict(Xd).compute(), m.predict(X))


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("offset", [1e4, 1e6, 1e8])
def test_decisions_and_probabilities_far_from_the_origin_to_the_last_digits(offset, k):
    # a small spread far out: the float64 mean is ~ulp(offset) from the true one, and a
    # decision centred on it without that correction is off by coef·(rounding) (2e-9
    # relative at 1e8 before); the reference is sklearn on the same rounded rows, recentred
    X, y = make_classes(n=2000, p=6, k=k, seed=31)
    X = X * 0.1 + offset
    m = sp.BoundaryProjector(n_components=2).fit(X, y)
    ref = LinearDiscriminantAnalysis(solver="eigen").fit(X - offset, y)
    Xr = X - offset  # exact: the rows are within a factor 2 of the offset
    np.testing.assert_array_equal(m.predict(X), ref.predict(Xr))
    assert np.max(np.abs(m.predict_proba(X) - ref.predict_proba(Xr))) <= 1e-11
    want = ref.decision_function(Xr)
    if k == 2:
        assert rel_err(m.decision_function(X), want) <= 1e-11
    else:
        # the raw decisions are ~½mᵀΣ⁻¹m ≈ 1e18 here (their ulp ~1e2): the centred scores
        # carry the differences between classes, which are what decides
        got = m._scores(X)
        assert rel_err(got - got[:, :1], want - want[:, :1]) <= 1e-11
    # the saved and reloaded model decides the same way (its centred form is recomputed)
    again = sp.BoundaryProjector.from_state(m.to_state())
    np.testing.assert_allclose(again.predict_proba(X), m.predict_proba(X), rtol=0, atol=1e-15)


def test_issue_reproduction_three_classes_at_1e8():
    rng = np.random.default_rng(9)
    y = rng.integers(0, 3, 30000)
    X = 1e8 + rng.normal(size=(30000, 5)) + rng.normal(size=(3, 5))[y]
    m = sp.BoundaryProjector().fit(X, y)
    ref, shift = reference_lda(X, y)
    np.testing.assert_array_equal(m.predict(X), ref.predict(X - shift))


def test_decision_function_is_sklearns_value_near_the_origin():
    X, y = make_classes(n=900, p=5, k=4, seed=3)
    m = sp.BoundaryProjector(n_components=3).fit(X, y)
    ref = LinearDiscriminantAnalysis(solver="eigen").fit(X, y)
    assert rel_err(m.decision_function(X), ref.decision_function(X)) <= 1e-9
    assert rel_err(m.decision_function(X), X @ m.coef_.T + m.intercept_) <= 1e-12


def test_external_multiclass_boundary_decides_in_centred_form():
    X, y = offset_classes(n=2000, p=4, k=3, offset=1e7, seed=5)
    ref, shift = reference_lda(X, y)
    # the same boundaries written about the origin, as any external classifier would
    coef = ref.coef_
    intercept = ref.intercept_ - coef @ shift
    m = sp.BoundaryProjector(boundary=(coef, intercept)).fit(X, y)
    np.testing.assert_array_equal(m.predict(X[:200]), ref.predict(X[:200] - shift))


def test_a_boundary_beyond_float64_from_the_origin_is_refused():
    """intercept/‖coef‖ overflowed: the centre was infinite, every coordinate NaN, every row class 0."""
    X, y = make_classes(n=50, p=3, seed=8)
    with pytest.raises(InputError, match="too far from the origin for float64"):
        solvers.unit_boundary([0.1, 0.0, 0.0], [1e308])
    m = sp.BoundaryProjector(n_components=2, boundary=(np.array([[0.1, 0.0, 0.0]]), np.array([1e308])))
    with pytest.raises(InputError, match="too far from the origin for float64"):
        m.fit(X, y)


def test_saved_model_keeps_its_centred_decisions(tmp_path):
    X, y = offset_classes(n=1500, p=4, k=3, offset=1e8, seed=6)
    m = sp.BoundaryProjector().fit(X, y)
    m.save(tmp_path / "m")
    back = sp.load(tmp_path / "m")
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    np.testing.assert_array_equal(back._scores(X), m._scores(X))


def test_projection_output_predicts_in_centred_form(tmp_path):
    from streamproj.jobs import project

    X, y = offset_classes(n=1200, p=4, k=3, offset=1e8, seed=7)
    m = sp.BoundaryProjector().fit(X, y)
    ref, shift = reference_lda(X, y)
    project(m, X, tmp_path / "out.zarr", y=y)
    import zarr

    out = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    np.testing.assert_array_equal(out["predicted"][:], ref.predict(X - shift))


# ------------------------------------------------ 2. well-separated classes
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("separation", [1e0, 1e2, 1e3, 1e4, 1e5, 1e6])
def test_well_separated_classes_keep_their_scatter(separation, k):
    rng = np.random.default_rng(int(np.log10(separation)) + k)
    y = rng.integers(0, k, 6000)
    X = rng.normal(size=(6000, 5))
    X[:, 0] += separation * y
    X[:, 2] -= 0.5 * separation * y
    ref = two_pass(X, y)
    for chunk in (6000, 613):
        s = accumulate(X, y, chunk_rows=chunk)
        assert_summaries_exact(s, ref)
    m = sp.BoundaryProjector(chunk_rows=613).fit(X, y)
    lda, shift = reference_lda(X, y)
    assert rel_err(pairwise(m.coef_), pairwise(lda.coef_)) <= 1e-8


def outside_the_axes(m, k):
    """How far each unit pairwise boundary normal is from the span of the first K-1 axes."""
    V = m.components_[: k - 1].T
    worst = 0.0
    for i, j in itertools.combinations(range(k), 2):
        normal = m._score_coef_[j] - m._score_coef_[i]
        normal = normal / np.linalg.norm(normal)
        worst = max(worst, np.linalg.norm(normal - V @ (V.T @ normal)))
    return worst


@pytest.mark.parametrize("separation", [1e-4, 1e-6, 1e-8])
def test_nearly_coincident_class_means_keep_every_boundary_in_the_axes(separation):
    # S_B tiny beside S_W: formed as (total - within) it lost its digits (2.9e-4 off at 1e-6)
    rng = np.random.default_rng(26)
    base = rng.normal(size=(3000, 5)) @ rng.normal(size=(5, 5))
    base -= base.mean(axis=0)
    X = np.vstack([base + separation * rng.normal(size=5) for _ in range(3)])
    y = np.repeat(np.arange(3), 3000)
    m = sp.BoundaryProjector(n_components=2).fit(X, y)
    assert outside_the_axes(m, 3) <= 1e-10
    # scikit-learn's scalings_ span them too (S_B from the class means' deviations)
    assert sin_angle(m.scalings_[:, :2], m.components_.T) <= 1e-8


@pytest.mark.parametrize("separation", [1e-4, 1e-6, 1e-8])
def test_two_nearly_coincident_classes_beside_a_far_one_keep_their_boundary(separation):
    # The pair's Fisher λ is at the eigensolver's rounding of the far class's: the axes
    # taken from the eigenvectors of S_B v = λ S_W v left their boundary 5.6e-7 (1e-4),
    # 6.7e-4 (1e-6) and 0.13 (1e-8) off the plane
    rng = np.random.default_rng(26)
    base = rng.normal(size=(3000, 5)) @ rng.normal(size=(5, 5))
    base -= base.mean(axis=0)
    X = np.vstack([base + 10 * rng.normal(size=5), base, base + separation * rng.normal(size=5)])
    y = np.repeat(np.arange(3), 3000)
    m = sp.BoundaryProjector(n_components=2).fit(X, y)
    # (the pair's normal itself keeps only about eps·10/separation of its digits)
    assert outside_the_axes(m, 3) <= 1e-14 / separation


def test_collinear_class_means_leave_the_other_axes_to_the_principal_directions():
    # Means on one line: S_B has rank 1, and the second eigenvector of S_B v = λ S_W v
    # (λ = 2e-17, rounding) was taken as an axis: 8 times the reconstruction error of the
    # best principal direction, which shrinkage=1e-12 gave
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    X = rng.normal(size=(600, 5)) * [1, 1, 5, 1, 1]
    for k in range(3):
        X[y == k] -= X[y == k].mean(axis=0)
    X[:, 0] += 3.0 * y
    m = sp.BoundaryProjector(n_components=2).fit(X, y)
    w = m.components_[0]
    P = np.eye(5) - np.outer(w, w)
    S = (X - X.mean(axis=0)).T @ (X - X.mean(axis=0))
    best = np.linalg.eigh(P @ S @ P)[1][:, -1]
    assert sin_angle(m.components_[1:].T, best[:, None]) <= 1e-8
    assert m.reconstruction_error() == pytest.approx(
        sp.BoundaryProjector(n_components=2, shrinkage=1e-12).fit(X, y).reconstruction_error(),
        rel=1e-9)


@pytest.mark.parametrize("shrinkage", [None, 0.1, "auto", "oas"])
@pytest.mark.parametrize("priors", [None, [0.5, 0.3, 0.1, 0.1]])
def test_every_pairwise_boundary_is_in_the_axes_with_shrinkage_and_priors(shrinkage, priors):
    # scikit-learn's scalings_ solve (shrunk total - shrunk within) v = λ within v: their top
    # K-1 do not span the normals; the axes come from the classifier's own Fisher problem
    X, y = offset_classes(n=2000, p=6, k=4, offset=10.0, seed=31, separation=2.0)
    m = sp.BoundaryProjector(n_components=4, shrinkage=shrinkage, priors=priors).fit(X, y)
    assert outside_the_axes(m, 4) <= 1e-10
    how = {"covariance_estimator": OAS()} if shrinkage == "oas" else {"shrinkage": shrinkage}
    ref = LinearDiscriminantAnalysis(solver="eigen", priors=priors, **how).fit(X, y)
    np.testing.assert_array_equal(m.predict(X), ref.predict(X))


def test_issue_reproduction_separation_1e6():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 20000)
    X = rng.normal(size=(20000, 5))
    X[:, 0] += 1e6 * y
    s = ClassStats.from_rows(X, y)
    assert rel_err(s.within, two_pass(X, y)["within"]) <= 1e-12


@pytest.mark.parametrize("k", [2, 80])  # one-hot gather and the sorted path for many classes
def test_shared_and_per_class_shifts_agree_with_the_reference(k):
    X, y = offset_classes(n=4000, p=4, k=k, offset=3e5, seed=8, separation=50.0)
    assert_summaries_exact(ClassStats.from_rows(X, y), two_pass(X, y))
    X, y = offset_classes(n=4000, p=4, k=k, offset=3e5, seed=8, separation=0.5)
    assert_summaries_exact(ClassStats.from_rows(X, y), two_pass(X, y))


def test_a_class_missing_from_the_shift_sample_still_gets_its_own_shift():
    # period-2 labels and an even sampling stride: the strided sample sees one class only
    n = 2048 * 4
    rng = np.random.default_rng(9)
    y = np.arange(n) % 2
    X = rng.normal(size=(n, 3))
    X[:, 0] += 1e7 * y
    y[5] = 2  # and a class of one row
    X[5] += 3e6
    assert_summaries_exact(ClassStats.from_rows(X, y), two_pass(X, y))


# --------------------------------------------------------- 3. units and singularity
SCALES = np.array([1e-4, 1e4, 1.0, 3.0])


@pytest.mark.parametrize("k", [2, 3])
def test_units_of_1e_minus_4_and_1e4_are_not_singular(k):
    X, y = make_classes(n=2000, p=4, k=k, seed=10)
    base = sp.BoundaryProjector(n_components=2).fit(X, y)
    m = sp.BoundaryProjector(n_components=2).fit(X * SCALES, y)
    # the right coef_ is the unscaled one divided by the scale
    assert rel_err(m.coef_ * SCALES, base.coef_) <= 1e-8
    ref = LinearDiscriminantAnalysis(solver="eigen").fit(X * SCALES, y)
    assert rel_err(pairwise(m.coef_) * SCALES, pairwise(ref.coef_) * SCALES) <= 1e-8
    np.testing.assert_array_equal(m.predict(X * SCALES), ref.predict(X * SCALES))
    np.testing.assert_array_equal(m.predict(X * SCALES), base.predict(X))


def test_qda_in_extreme_units_equals_qda_in_plain_units():
    X, y = make_classes(n=1500, p=4, k=3, seed=11)
    plain = solvers.qda(ClassStats.from_rows(X, y, "per_class"))
    scaled = solvers.qda(ClassStats.from_rows(X * SCALES, y, "per_class"))
    p_plain = solvers.qda_predict_proba(plain, X)
    assert np.max(np.abs(solvers.qda_predict_proba(scaled, X * SCALES) - p_plain)) <= 1e-10
    # log posteriors shift by -Σ log(scale) for every class alike
    shift = solvers.qda_log_posterior(scaled, X * SCALES) - solvers.qda_log_posterior(plain, X)
    assert np.max(np.abs(shift + np.log(SCALES).sum())) <= 1e-8
    ref = QuadraticDiscriminantAnalysis().fit(X, y)
    assert np.max(np.abs(p_plain - ref.predict_proba(X))) <= 1e-10


def test_truly_singular_data_is_refused_in_any_units():
    X, y = make_classes(n=500, p=4, seed=12)
    X[:, 3] = 2.0 * X[:, 1] - X[:, 0]  # exactly collinear
    for scales in (np.ones(4), SCALES):
        with pytest.raises(SingularScatterError, match="singular"):
            sp.BoundaryProjector().fit(X * scales, y)
    X[:, 3] = 7.0
    with pytest.raises(SingularScatterError, match="feature 3 has no variance"):
        sp.BoundaryProjector().fit(X, y)
    with pytest.raises(SingularScatterError, match="class 0 is singular: feature 3"):
        solvers.qda(ClassStats.from_rows(X, y, "per_class"))


def test_p_greater_than_n_with_shrinkage_matches_sklearn():
    X, y = make_classes(n=40, p=60, k=3, seed=13)
    X = X + 1e5
    with pytest.raises(SingularScatterError, match="fewer rows than features"):
        sp.BoundaryProjector().fit(X, y)
    for shrinkage in (0.3, "auto"):
        m = sp.BoundaryProjector(shrinkage=shrinkage, chunk_rows=7).fit(X, y)
        ref, shift = reference_lda(X, y, shrinkage=shrinkage)
        assert rel_err(pairwise(m.coef_), pairwise(ref.coef_)) <= 1e-8
        np.testing.assert_array_equal(m.predict(X), ref.predict(X - shift))


# ------------------------------------------------------------- 4. every row counts
def test_integer_rows_one_per_partial_fit_are_all_counted():
    rng = np.random.default_rng(14)
    X = rng.integers(0, 3, size=(300, 3))
    y = rng.integers(0, 2, size=300)
    m = sp.BoundaryProjector(shrinkage=0.1).fit(X[:20], y[:20])
    for i in range(20, 300):
        m.partial_fit(X[i : i + 1], y[i : i + 1])
    assert m.stats_.n_samples == 300
    assert_summaries_exact(m.stats_, two_pass(X, y))
    whole = sp.BoundaryProjector(shrinkage=0.1).fit(X, y)
    assert rel_err(m.coef_, whole.coef_) <= 1e-10


@pytest.mark.parametrize("chunk_rows", [1, 7, 333, 1000])
def test_chunks_that_do_not_divide_n(chunk_rows):
    X, y = offset_classes(n=1000 - 3, p=3, k=3, offset=1e6, seed=15)
    assert_summaries_exact(accumulate(X, y, chunk_rows=chunk_rows), two_pass(X, y))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int16, np.int64, np.uint8])
def test_narrow_and_integer_inputs_are_summarised_in_float64(dtype):
    rng = np.random.default_rng(16)
    y = rng.integers(0, 3, 2000)
    Z = rng.normal(scale=20, size=(2000, 4)) + 40 * y[:, None] + 60
    X = Z.astype(dtype)
    s = accumulate(X, y, chunk_rows=311)
    assert s.within.dtype == np.float64
    assert_summaries_exact(s, two_pass(X, y))
    m = sp.BoundaryProjector().fit(X, y)
    ref, shift = reference_lda(X, y)
    np.testing.assert_array_equal(m.predict(X), ref.predict(X - shift))


# --------------------------------------------------------------------- 5. labels
def _labels_cases():
    base = np.array([0, 1, 1, 0, 2, 2, 1, 0] * 50)
    S = np.dtypes.StringDType()
    return {
        "int8": (base.astype(np.int8), np.int8),
        "uint16": (base.astype(np.uint16), np.uint16),
        "negative": (base.astype(np.int32) - 7, np.int32),
        "uint64-big": (base.astype(np.uint64) + np.uint64(2**63 + 5), np.uint64),
        "float16": (base.astype(np.float16) * 2, np.float16),
        "float64": (base * 4.0 - 1.0, np.float64),
        "fixed-str": (np.array(["a", "bb", "c"])[base], np.dtype("<U2")),
        "bytes": (np.array([b"a", b"bb", b"c"])[base], np.dtype("S2")),
        "object-str": (np.array(["a", "bb", "c"], dtype=object)[base], np.dtype("<U2")),
        "string-dtype": (np.array(["a", "bb", "c"], dtype=S)[base], np.dtype("<U2")),
        "object-int": (np.array([3, 1, 2], dtype=object)[base], np.int64),
    }


# object and StringDType labels are converted to plain numpy before dask sees them
_LAZY = [c for c in _labels_cases() if _labels_cases()[c][0].dtype.kind not in "OT"]


@pytest.mark.parametrize(("case", "lazy"),
                         [(c, False) for c in _labels_cases()] + [(c, True) for c in _LAZY])
def test_every_label_dtype(case, lazy):
    labels, dtype = _labels_cases()[case]
    X, _ = make_classes(n=labels.shape[0], p=3, k=3, seed=17)
    y_in = da.from_array(labels, chunks=97) if lazy else labels
    m = sp.BoundaryProjector(chunk_rows=97).fit(X, y_in)
    assert m.classes_.dtype == dtype
    assert m.classes_.tolist() == sorted(set(labels.tolist()))
    assert m.stats_.n_samples == labels.shape[0]
    # the same model as for the labels' positions among the classes
    codes = np.searchsorted(m.classes_, np.asarray(labels.tolist(), dtype=m.classes_.dtype))
    ref = sp.BoundaryProjector(chunk_rows=97).fit(X, codes)
    assert rel_err(m.coef_, ref.coef_) == 0
    predicted = m.predict(X)
    assert predicted.dtype == dtype
    np.testing.assert_array_equal(np.searchsorted(m.classes_, predicted), ref.predict(X))


@pytest.mark.parametrize("kind", ["string", "category", "Int64", "string[pyarrow]", "polars",
                                  "arrow-bool", "dask-series"])
def test_accumulate_takes_the_labels_fit_takes(kind):
    # the summary function is public: it converts table labels as fit does, not dask
    pd = pytest.importorskip("pandas")
    base = np.array([0, 1, 1, 0, 2, 2, 1, 0] * 25)
    X, _ = make_classes(n=base.shape[0], p=3, k=3, seed=18)
    words = np.array(["a", "bb", "c"])[base]
    if kind == "Int64":
        y = pd.Series(base, dtype="Int64")
    elif kind == "polars":
        y = pytest.importorskip("polars").Series(words)
    elif kind == "arrow-bool":
        y = pytest.importorskip("pyarrow").array(base == 1)
    elif kind == "dask-series":
        dd = pytest.importorskip("dask.dataframe")
        y = dd.from_pandas(pd.Series(words, dtype="string"), npartitions=3)
    else:
        y = pd.Series(words, dtype=kind)
    got = sp.accumulate(X, y, chunk_rows=37)
    want = sp.BoundaryProjector().fit(X, y).stats_
    np.testing.assert_array_equal(got.classes, want.classes)
    np.testing.assert_array_equal(got.counts, want.counts)
    assert rel_err(got.within, want.within) <= 1e-12


@pytest.mark.parametrize("dtype", ["string", "Int64"])
def test_accumulate_names_the_first_missing_table_label(dtype):
    pd = pytest.importorskip("pandas")
    y = pd.Series([0, 1, 1, None, 0, 1], dtype=dtype)
    with pytest.raises(BadValuesError, match="missing label .* in row 3"):
        sp.accumulate(np.ones((6, 2)), y)


def test_fractional_float_labels_are_refused_as_scikit_learn_does():
    X, _ = make_classes(n=60, p=3, k=2, seed=17)
    y = np.array([0.5, 1.5] * 30)
    with pytest.raises(InputError, match=r"continuous \(y has dtype float64 and y\[0\] = 0.5\)"):
        sp.BoundaryProjector().fit(X, y)
    with pytest.raises(ValueError, match="Unknown label type"):
        LinearDiscriminantAnalysis().fit(X, y)
    with pytest.raises(InputError, match=r"continuous \(y has dtype float64 and holds the label 0.5\)"):
        sp.BoundaryProjector().fit(da.from_array(X, chunks=(20, 3)), da.from_array(y, chunks=20))
    # the summaries themselves take any finite float labels
    assert sp.accumulate(X, y).classes.tolist() == [0.5, 1.5]


def test_boolean_labels_give_boolean_classes():
    rng = np.random.default_rng(18)
    X = rng.normal(size=(500, 3))
    y = X[:, 0] + 0.3 * rng.normal(size=500) > 0
    m = sp.BoundaryProjector().fit(X, y)
    ref = LinearDiscriminantAnalysis(solver="eigen").fit(X, y)
    assert m.classes_.dtype == bool
    assert m.classes_.tolist() == [False, True]
    assert m.predict(X).dtype == bool
    np.testing.assert_array_equal(m.predict(X), ref.predict(X))
    assert rel_err(m.coef_, ref.coef_) <= 1e-8
    assert rel_err(m.coef_, sp.BoundaryProjector().fit(X, y.astype(int)).coef_) == 0


def test_labels_beyond_int64_stay_distinct():
    X, y = make_classes(n=300, p=3, k=3, seed=19)
    big = np.array([2**64 - 1, 2**63, 2**63 + 1], dtype=np.uint64)[y]
    m = sp.BoundaryProjector().fit(X, big)
    assert m.classes_.dtype == np.uint64
    assert m.classes_.tolist() == [2**63, 2**63 + 1, 2**64 - 1]
    np.testing.assert_array_equal(m.stats_.counts, np.bincount(y)[[1, 2, 0]])


@pytest.mark.parametrize(
    ("labels", "row"),
    [
        (np.array([0.0, 1.0] * 150), None),
        (np.array(["a", "b"] * 150, dtype=object), None),
        (np.array(["a", "b"] * 150, dtype=np.dtypes.StringDType(na_object=None)), None),
    ],
)
def test_missing_labels_name_the_first_row(labels, row):
    X = np.random.default_rng(20).normal(size=(300, 2))
    labels = labels.copy()
    labels[211] = None if labels.dtype.kind in "OT" else np.nan
    labels[250] = None if labels.dtype.kind in "OT" else np.nan
    with pytest.raises(BadValuesError, match="missing label .* in row 211"):
        sp.BoundaryProjector(chunk_rows=50).fit(X, labels)


def test_missing_labels_in_lazy_input_name_the_first_row_of_all_chunks():
    X = np.random.default_rng(21).normal(size=(400, 2))
    y = np.array([0.0, 1.0] * 200)
    y[[130, 390]] = np.nan  # two chunks fail; the earlier row is reported, every time
    for _ in range(3):
        with pytest.raises(BadValuesError, match="row 130"):
            sp.BoundaryProjector().fit(da.from_array(X, chunks=(50, 2)),
                                       da.from_array(y, chunks=50))
    X[[120, 395], 1] = np.inf
    with pytest.raises(BadValuesError, match="row 120"):
        accumulate(da.from_array(X, chunks=(50, 2)), np.arange(400) % 2)


def test_mixed_object_labels_name_the_dtype():
    X = np.zeros((4, 2))
    with pytest.raises(InputError, match=r"dtype object.*mixed.*int, str"):
        accumulate(X, np.array([1, "a", 2, "b"], dtype=object))
    with pytest.raises(InputError, match="got dtype complex128"):
        accumulate(X, np.array([1j, 2j, 1j, 2j]))


def test_signed_and_unsigned_integer_summaries_merge_exactly():
    X = np.random.default_rng(22).normal(size=(8, 2))
    a = ClassStats.from_rows(X[:4], np.array([0, 1, 0, 1], dtype=np.int64))
    b = ClassStats.from_rows(X[4:], np.array([1, 2**63 + 2, 1, 2**63 + 2], dtype=np.uint64))
    s = a + b
    assert s.classes.dtype == np.uint64
    assert s.classes.tolist() == [0, 1, 2**63 + 2]
    np.testing.assert_array_equal(s.counts, [2, 4, 2])


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_integers_beyond_float64_are_never_merged_with_float_labels(dtype):
    X = np.random.default_rng(24).normal(size=(8, 2))
    big = ClassStats.from_rows(X[:4], np.array([2**53, 2**53 + 1] * 2, dtype=dtype))
    floats = ClassStats.from_rows(X[4:], np.array([0.0, 1.0] * 2))
    for a, b in ((big, floats), (floats, big)):  # as float64, two of the classes would be one
        with pytest.raises(IncompatibleStatsError, match="9007199254740993"):
            a + b
    top = ClassStats.from_rows(X[:4], np.array([np.iinfo(dtype).max, 7] * 2, dtype=dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no "invalid value in cast" on the way)
        with pytest.raises(IncompatibleStatsError, match=str(np.iinfo(dtype).max)):
            top + floats
    exact = ClassStats.from_rows(X[:4], np.array([2**53, 7] * 2, dtype=dtype)) + floats
    assert exact.classes.tolist() == [0.0, 1.0, 7.0, 2.0**53]
    np.testing.assert_array_equal(exact.counts, [2, 2, 2, 2])


def test_boolean_labels_never_merge_with_numbers():
    # numpy's union would make True the class 1 (and False the class 0)
    X = np.random.default_rng(25).normal(size=(8, 2))
    flags = ClassStats.from_rows(X[:4], np.array([True, False] * 2))
    ints = ClassStats.from_rows(X[4:], np.array([1, 2] * 2))
    for a, b in ((flags, ints), (ints, flags)):
        with pytest.raises(IncompatibleStatsError, match="cannot merge boolean labels with labels "
                                                         "of dtype int64"):
            a + b
    assert (flags + flags).classes.tolist() == [False, True]


def test_object_labels_mixing_floats_and_big_integers_are_refused():
    X = np.zeros((4, 2))
    y = np.array([2**53, 2**53 + 1, 1.0, 2**53], dtype=object)
    with pytest.raises(InputError, match=r"integer label 9007199254740993 in row 1"):
        accumulate(X, y)
    ok = accumulate(X, np.array([2**53, 3, 1.5, 3], dtype=object))
    assert ok.classes.tolist() == [1.5, 3.0, 2.0**53]
    # numpy integers compare exactly too, and an integer beyond float64's range is named
    numpy_ints = np.array([np.int64(2**53 + 1), np.int64(2**53), 1.5, 2.5], dtype=object)
    with pytest.raises(InputError, match=r"integer label 9007199254740993 in row 0"):
        accumulate(X, numpy_ints)
    with pytest.raises(InputError, match=r"integer label 100000000000… \(401 digits\) in row 0"):
        accumulate(X, np.array([10**400, 1, 1.5, 2.5], dtype=object))


# ------------------------------------------------------- 6. memory of in-memory input
def _peak_extra(n, p=20, chunk=4000):
    X = np.random.default_rng(23).normal(size=(n, p)).astype(np.float32)
    y = (np.arange(n) % 3).astype(np.int8)
    tracemalloc.start()
    try:
        accumulate(X, y, chunk_rows=chunk)
        return tracemalloc.get_traced_memory()[1], X.nbytes
    finally:
        tracemalloc.stop()


def test_in_memory_fit_reads_chunk_by_chunk_without_a_copy():
    _peak_extra(8_000)  # first use allocates caches (imports, dask internals): not per row
    small, small_bytes = _peak_extra(100_000)
    large, large_bytes = _peak_extra(400_000)
    # O(chunk·p + K·p²) (+ a few kB of task bookkeeping per chunk): far below one copy of
    # the data, and growing with the rows by a small fraction of their bytes (a copy: 1x)
    assert large <= 0.2 * large_bytes, (large, large_bytes)
    assert large - small <= 0.1 * (large_bytes - small_bytes), (small, large)


# ------------------------------------------------------ center="hyperplane" axes
def test_hyperplane_centring_axes_are_the_in_memory_eigenvectors():
    X, y = make_classes(n=3000, p=6, seed=24, offset=5.0)
    X[:, 2] *= 4.0
    m = sp.BoundaryProjector(n_components=4, center="hyperplane").fit(X, y)
    w = m.coef_[0] / np.linalg.norm(m.coef_[0])
    b = m.intercept_[0] / np.linalg.norm(m.coef_[0])
    x0 = -b * w
    np.testing.assert_allclose(m.center_, x0, rtol=1e-13, atol=1e-13)
    P = np.eye(6) - np.outer(w, w)
    D = X - x0
    evals, evecs = np.linalg.eigh(P @ (D.T @ D) @ P)
    top = evecs[:, ::-1][:, :3]
    assert sin_angle(m.components_[1:].T, top) <= 1e-8
    for j in range(1, 4):  # in order, each
        assert sin_angle(m.components_[j][:, None], top[:, j - 1 : j]) <= 1e-8
    # the mean term matters here: the axes about the mean are different
    mean_axes = sp.BoundaryProjector(n_components=4).fit(X, y).components_[1:]
    assert sin_angle(mean_axes.T, top) > 1e-3


def _exact_hyperplane_axes(X, x0, w, k):
    """Top ``k`` eigenvectors of ``P Σ(x−x0)(x−x0)ᵀ P`` in 60-digit arithmetic (mpmath)."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(60):
        p = X.shape[1]
        D = [[mp.mpf(float(v)) - mp.mpf(float(c)) for v, c in zip(row, x0, strict=True)]
             for row in X]
        S = mp.matrix(p, p)
        for a in range(p):
            for b in range(a, p):
                S[a, b] = S[b, a] = mp.fsum(r[a] * r[b] for r in D)
        W = mp.matrix([mp.mpf(float(v)) for v in w])
        W = W / mp.norm(W)
        P = mp.eye(p) - W * W.T
        E, Q = mp.eigsy(P * S * P)
        order = sorted(range(p), key=lambda i: -E[i])[:k]
        return np.array([[float(Q[r, c]) for c in order] for r in range(p)])


@pytest.mark.parametrize("offset", [1e4, 1e6, 1e8])
def test_hyperplane_axes_far_from_the_origin_are_exact(offset):
    # far from the origin the mean term n(μ−x0)(μ−x0)ᵀ is ~offset² times the scatter:
    # summed with it in float64, the scatter's digits (and every axis after the first) go
    X, y = make_classes(n=300, p=5, seed=25)
    X = X * np.array([1.0, 2.0, 3.0, 0.5, 1.0]) + offset
    m = sp.BoundaryProjector(n_components=4, center="hyperplane").fit(X, y)
    ref = _exact_hyperplane_axes(X, m.center_, m.components_[0], 3)
    for j in range(1, 4):
        assert sin_angle(m.components_[j][:, None], ref[:, j - 1 : j]) <= 1e-10, j


# ------------------------------------------------------------- drift angles (CLI)
def _angle_deg(u, v):
    """Angle between two unit vectors, accurate for tiny angles (atan2, not arccos)."""
    return float(np.degrees(np.arctan2(np.linalg.norm(u - (u @ v) * v), u @ v)))


@pytest.mark.parametrize("added", [400, 1])
def test_update_reports_the_drift_angles_of_the_two_models(tmp_path, capsys, added):
    X, y = make_classes(n=1000 + added, p=4, seed=25)
    if added == 1:  # one row next to its class mean: the normal moves by ~1e-6 degrees
        X[1000] = X[:1000][y[:1000] == y[1000]].mean(axis=0) + 1e-4
    else:
        X[1000:] += 0.3
    write_zarr(tmp_path / "a.zarr", X[:1000], y[:1000])
    write_zarr(tmp_path / "b.zarr", X[1000:], y[1000:])
    assert main(["fit", str(tmp_path / "a.zarr"), "--model", str(tmp_path / "m"),
                 "--n-components", "3"]) == 0
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "b.zarr")]) == 0
    out = capsys.readouterr().out
    old = sp.BoundaryProjector(n_components=3).fit(X[:1000], y[:1000])
    new = sp.BoundaryProjector(n_components=3).fit(X, y)
    expected = _angle_deg(old.components_[0], new.components_[0])
    assert f"boundary normal moved {expected:.4g}°" in out
    assert main(["info", str(tmp_path / "m")]) == 0
    history = json.loads(capsys.readouterr().out)["history"]
    assert abs(history[-1]["normal_angle_deg"] - expected) <= 1e-6 * expected
    from scipy.linalg import subspace_angles

    axes = sorted(np.degrees(subspace_angles(old.components_.T, new.components_.T)))
    np.testing.assert_allclose(history[-1]["axes_angles_deg"], axes, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("far", [1e20, 1e25, 1e50, 1e150])
@pytest.mark.parametrize("detail", ["pooled", "per_class", "fourth"])
@pytest.mark.parametrize("chunk_rows", [None, 50, 7])
def test_a_class_constant_far_from_zero_keeps_the_other_classes_scatter_exact(far, detail,
                                                                             chunk_rows):
    # Class 1's first feature is one value 1e25 spreads from zero (its noise rounds away): its
    # float64 mean's rounding (~1e9) dwarfed class 0's spread 1, and the scatter about the
    # exact mean, a difference of two sums of that rounding's squares, came out 0 for 195.9
    # (92.8 in chunks of 50): the summary judged against the exact rational scatter
    from fractions import Fraction

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    X = rng.normal(size=(400, 3))
    X[:, 0] += far * y

    def exact(v):
        values = [Fraction(float(a)) for a in v]
        mean = sum(values) / len(values)
        return sum((a - mean) ** 2 for a in values)

    ref = float(exact(X[y == 0, 0]) + exact(X[y == 1, 0]))
    stats = accumulate(X, y, detail=detail, chunk_rows=chunk_rows)
    assert abs(stats.within[0, 0] - ref) <= 4e-16 * ref * 4
    np.testing.assert_array_equal(stats.means[1, 0], X[y == 1, 0][0])  # the one value, exactly


def test_pass1_keeps_its_shifts_for_constant_columns_near_zero(monkeypatch):
    # update --verify compares a batch's summary bit for bit with the one recorded: shifting
    # a class's constant column by one of its values (as is done 2^40 spreads from zero) moved
    # the bits of summaries with a constant 0.1 column; near zero the shifts are as before
    from streamproj import stats as stats_module

    rng = np.random.default_rng(3)
    X = rng.normal(size=(5000, 4))
    y = rng.integers(0, 2, 5000)
    X[:, 1] = 0.1
    X[y == 1, 2] = 12345.678901
    chunks = [slice(a, a + 1000) for a in range(0, 5000, 1000)] + [slice(None)]
    snapped = [stats_module._class_shifts(X[c], y[c], 2)[0] for c in chunks]
    # (the samples' float64 means, as stop 34 took them: not all exactly the values)
    assert any(s[1, 2] != 12345.678901 or s[0, 1] != 0.1 for s in snapped)
    monkeypatch.setattr(stats_module, "_snap_narrow", lambda *args: None)
    for c, shifts in zip(chunks, snapped, strict=True):
        np.testing.assert_array_equal(shifts, stats_module._class_shifts(X[c], y[c], 2)[0])
    # far out, the same column is shifted by its value
    X[y == 1, 2] = 1e25
    monkeypatch.undo()
    assert stats_module._class_shifts(X, y, 2)[0][1, 2] == 1e25
