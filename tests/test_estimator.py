import json
import re
import warnings

import dask.array as da
import numpy as np
import pytest
from conftest import make_classes, one_error_line, write_zarr
from scipy.linalg import subspace_angles
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression

import streamproj as sp
from streamproj.cli import main
from streamproj.errors import (
    BadValuesError,
    IncompatibleStatsError,
    InputError,
    NotFittedError,
    SingularScatterError,
)


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b))


# ------------------------------------------------------- agreement with sklearn
@pytest.mark.parametrize("shrinkage", [None, 0.3, "auto"])
def test_two_classes_agree_with_sklearn_lda(shrinkage):
    X, y = make_classes(n=1500, p=8, seed=11)
    m = sp.BoundaryProjector(shrinkage=shrinkage, chunk_rows=211).fit(X, y)
    ref = LinearDiscriminantAnalysis(solver="eigen", shrinkage=shrinkage).fit(X, y)
    assert m.coef_.shape == (1, 8)
    assert m.intercept_.shape == (1,)
    assert rel(m.coef_, ref.coef_) <= 1e-8
    assert rel(m.intercept_, ref.intercept_) <= 1e-8
    assert rel(m.decision_function(X), ref.decision_function(X)) <= 1e-8
    np.testing.assert_array_equal(m.predict(X), ref.predict(X))


@pytest.mark.parametrize("k", range(3, 11))
def test_many_classes_span_the_top_fisher_directions(k):
    X, y = make_classes(n=200 * k, p=12, k=k, seed=k, spread=2.0)
    m = sp.BoundaryProjector(n_components=k - 1, chunk_rows=333).fit(X, y)
    ref = LinearDiscriminantAnalysis(solver="eigen").fit(X, y)
    angles = subspace_angles(m.components_.T, ref.scalings_[:, : k - 1])
    assert np.max(angles) <= 1e-6
    np.testing.assert_array_equal(m.predict(X), ref.predict(X))
    # the leading axes are the Fisher directions in order
    for j in range(k - 1):
        assert np.max(subspace_angles(m.components_[: j + 1].T, ref.scalings_[:, : j + 1])) <= 1e-6


def test_many_classes_with_shrinkage_follow_sklearn_too():
    X, y = make_classes(n=800, p=10, k=4, seed=5)
    m = sp.BoundaryProjector(n_components=3, shrinkage=0.2).fit(X, y)
    ref = LinearDiscriminantAnalysis(solver="eigen", shrinkage=0.2).fit(X, y)
    # scikit-learn's attribute, as it solves it: (shrunk total - shrunk within) v = λ within v
    assert np.max(subspace_angles(m.scalings_[:, :3], ref.scalings_[:, :3])) <= 1e-6
    assert rel(m.decision_function(X), ref.decision_function(X)) <= 1e-8
    # the axes span the classifier's boundaries instead (whose normals those do not span)
    normals = (ref.coef_[1:] - ref.coef_[0]).T
    assert np.max(subspace_angles(m.components_.T, normals)) <= 1e-6
    assert np.max(subspace_angles(ref.scalings_[:, :3], normals)) > 1e-3


def test_qda_through_the_estimator():
    from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis
    from test_solvers import sklearn_qda_ddof

    X, y = make_classes(n=900, p=5, k=3, seed=12)
    m = sp.BoundaryProjector(keep_class_scatter=True, chunk_rows=100).fit(X, y)
    for reg in (0.0, 0.1):
        q = m.qda(reg, ddof=sklearn_qda_ddof())
        ref = QuadraticDiscriminantAnalysis(reg_param=reg).fit(X, y)
        np.testing.assert_allclose(sp.solvers.qda_predict_proba(q, X), ref.predict_proba(X),
                                   atol=1e-8)


def test_p_greater_than_n_needs_and_accepts_shrinkage():
    X, y = make_classes(n=40, p=60, seed=13)
    with pytest.raises(SingularScatterError, match="use shrinkage"):
        sp.BoundaryProjector().fit(X, y)
    for shrinkage in ("auto", 0.5, "oas"):
        m = sp.BoundaryProjector(shrinkage=shrinkage, chunk_rows=7).fit(X, y)
        from sklearn.covariance import OAS

        kw = {"covariance_estimator": OAS()} if shrinkage == "oas" else {"shrinkage": shrinkage}
        ref = LinearDiscriminantAnalysis(solver="eigen", **kw).fit(X, y)
        assert rel(m.decision_function(X), ref.decision_function(X)) <= 1e-8


def test_a_covariance_that_shrinkage_leaves_singular_does_not_advise_shrinkage():
    # with shrinkage given, the error still said "use shrinkage (e.g. shrinkage='auto' or 0.1)":
    # one row per class (no scatter at all), or 'auto' on three rows, which 0.5 solves
    two = np.array([[0.0, 1, 2], [1, 3, 2]])
    with pytest.raises(SingularScatterError, match=r"covariance with shrinkage=0\.5 is singular: "
                                                   r".*give more rows of each class, a larger "
                                                   r"shrinkage") as info:
        sp.BoundaryProjector(shrinkage=0.5).fit(two, [0, 1])
    assert "use shrinkage" not in str(info.value)
    three, y = np.array([[0.0, 1, 2], [1, 3, 2], [0.5, 1, 3]]), [0, 1, 1]
    with pytest.raises(SingularScatterError, match=r"covariance with shrinkage='auto' is singular "
                                                   r".*try a fixed shrinkage \(e\.g\. "
                                                   r"shrinkage=0\.1") as info:
        sp.BoundaryProjector(shrinkage="auto").fit(three, y)
    assert "use shrinkage" not in str(info.value)
    sp.BoundaryProjector(shrinkage=0.5).fit(three, y)


def test_near_singular_scatter_still_agrees():
    X, y = make_classes(n=2000, p=6, seed=14)
    rng = np.random.default_rng(0)
    X[:, 5] = X[:, :5].sum(axis=1) + 1e-4 * rng.normal(size=len(X))  # condition ~1e9
    m = sp.BoundaryProjector(chunk_rows=301).fit(X, y)
    ref = LinearDiscriminantAnalysis(solver="eigen").fit(X, y)
    assert rel(m.decision_function(X), ref.decision_function(X)) <= 1e-5
    assert np.mean(m.predict(X) == ref.predict(X)) > 0.999


# ---------------------------------------------------------------- projection
def test_first_coordinate_is_the_signed_distance_and_gives_the_class(coin):
    X, y = coin
    for center in ("mean", "hyperplane"):
        m = sp.BoundaryProjector(n_components=3, center=center).fit(X, y)
        Z = m.transform(X)
        distance = m.decision_function(X) / np.linalg.norm(m.coef_)
        assert rel(Z[:, 0], distance) <= 1e-10
        side = m.classes_[(Z[:, 0] > 0).astype(int)]
        assert np.mean(side == m.predict(X)) == 1.0
        np.testing.assert_allclose(m.components_ @ m.components_.T, np.eye(3), atol=1e-13)
        np.testing.assert_allclose(Z, (X - m.center_) @ m.components_.T, rtol=1e-12, atol=1e-12)


def test_mean_centring_reconstructs_at_least_as_well(coin):
    X, y = coin
    err = {c: sp.BoundaryProjector(center=c).fit(X, y).reconstruction_error()
           for c in ("mean", "hyperplane")}
    assert err["mean"] <= err["hyperplane"]


def test_boundary_from_a_fitted_classifier_or_arrays(coin):
    X, y = coin
    clf = LogisticRegression().fit(X, y)
    for boundary in (clf, (clf.coef_, clf.intercept_), {"coef": clf.coef_, "intercept": clf.intercept_}):
        m = sp.BoundaryProjector(boundary=boundary).fit(X, y)
        np.testing.assert_array_equal(m.predict(X), clf.predict(X))
        Z = m.transform(X)
        assert np.mean(m.classes_[(Z[:, 0] > 0).astype(int)] == clf.predict(X)) == 1.0
        np.testing.assert_allclose(Z[:, 0], clf.decision_function(X) / np.linalg.norm(clf.coef_),
                                   rtol=1e-9, atol=1e-12)


def test_a_classifier_fitted_on_other_columns_is_refused():
    # its coefficients are applied by position: columns in another order weigh the wrong features
    pd = pytest.importorskip("pandas")
    X, y = make_classes(n=600, p=4, seed=16)
    frame = pd.DataFrame(X, columns=list("abcd"))
    clf = LogisticRegression().fit(frame[list("dcba")], y)
    with pytest.raises(InputError, match=r"fitted on the columns \['d', 'c', 'b', 'a'\] but X has"):
        sp.BoundaryProjector(boundary=clf).fit(frame, y)
    renamed = LogisticRegression().fit(frame.rename(columns={"a": "z"}), y)
    with pytest.raises(InputError, match="weigh the wrong features"):
        sp.BoundaryProjector(boundary=renamed).fit(frame, y)
    m = sp.BoundaryProjector(boundary=clf).fit(frame[list("dcba")], y)
    np.testing.assert_array_equal(m.predict(frame[list("dcba")]), clf.predict(frame[list("dcba")]))
    with pytest.warns(UserWarning, match="applied to X's columns by position"):
        sp.BoundaryProjector(boundary=clf).fit(X[:, ::-1], y)


def test_data_with_a_class_the_boundary_does_not_know_are_refused(tmp_path, capsys):
    X, y = make_classes(n=600, p=4, seed=17)
    named = LogisticRegression().fit(X, np.where(y == 1, "b", "a"))
    with pytest.raises(InputError, match=r"the data hold the class 0, which the boundary's classes"):
        sp.BoundaryProjector(boundary=named).fit(X, y)
    m = sp.BoundaryProjector(boundary=named).fit(X, np.where(y == 1, "b", "a"))
    assert m.classes_.tolist() == ["a", "b"]
    # bytes labels, as HDF5 and fixed-width Zarr give them, are the classifier's strings
    m = sp.BoundaryProjector(boundary=named).fit(X, np.where(y == 1, "b", "a").astype("S1"))
    np.testing.assert_array_equal(m.predict(X), named.predict(X))
    # on the command line: one line, exit 2, no model written
    write_zarr(tmp_path / "d.zarr", X, y)
    (tmp_path / "b.json").write_text(json.dumps({"coef": [[1.0, 0, 0, 0]], "intercept": [-0.5],
                                                 "classes": ["x", "y"]}))
    code = main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m"),
                 "--boundary", str(tmp_path / "b.json")])
    assert code == 2
    assert "the data hold the class 0" in one_error_line(capsys)
    assert not (tmp_path / "m").exists()


def test_bytes_labels_fitted_to_a_boundary_of_text_classes_score_as_they_fit():
    # fit matched the bytes labels to the classifier's strings, but score refused those same
    # labels as "of another type" (rows in memory: scikit-learn's "bytes ... not supported")
    X, y = make_classes(n=200, p=4, seed=17)
    text = np.where(y == 1, "b", "a")
    named = LogisticRegression().fit(X, text)
    m = sp.BoundaryProjector(boundary=named).fit(X, text.astype("S1"))
    want = named.score(X, text)
    assert m.score(X, text.astype("S1")) == want
    assert m.score(da.from_array(X, chunks=(64, 4)), text.astype("S1")) == want
    assert m.score(X, text) == want


def test_multiclass_external_boundary_preserves_every_decision():
    X, y = make_classes(n=900, p=6, k=3, seed=15)
    clf = LogisticRegression().fit(X, y)
    m = sp.BoundaryProjector(boundary=clf).fit(X, y)
    np.testing.assert_array_equal(m.predict(X), clf.predict(X))
    # the decisions depend on x only through the first K-1 coordinates
    Z = m.transform(X)
    rebuilt = Z[:, :2] @ m.components_[:2] + m.center_
    np.testing.assert_array_equal(clf.predict(rebuilt), clf.predict(X))


# ------------------------------------------------- merging and chunk invariance
def assert_same_model(a, b, tol=1e-10):
    for name in ("coef_", "intercept_", "components_", "center_"):
        assert rel(getattr(a, name), getattr(b, name)) <= tol, name


@pytest.mark.parametrize("shrinkage", [None, "auto"])
def test_partial_fit_equals_fit_on_the_union(shrinkage):
    X, y = make_classes(n=1200, p=5, k=3, seed=16)
    a = sp.BoundaryProjector(shrinkage=shrinkage, chunk_rows=97).fit(X[:500], y[:500])
    a.partial_fit(X[500:], y[500:])
    b = sp.BoundaryProjector(shrinkage=shrinkage).fit(X, y)
    assert_same_model(a, b)


@pytest.mark.parametrize("chunk_rows", [1, 13, 250, 999, 5000])
def test_results_do_not_depend_on_chunking(chunk_rows):
    X, y = make_classes(n=999, p=4, seed=17)
    ref = sp.BoundaryProjector(chunk_rows=999).fit(X, y)
    m = sp.BoundaryProjector(chunk_rows=chunk_rows).fit(X, y)
    assert_same_model(m, ref)


def test_partial_fit_counts_every_row_it_is_given():
    # as scikit-learn: the same rows given twice weigh twice (the model directory's
    # ledger of sources, not the estimator, guards against merging a source twice)
    X, y = make_classes(n=300, p=3, seed=18)
    m = sp.BoundaryProjector().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.partial_fit(X, y)
    assert m.stats_.n_samples == 600
    np.testing.assert_array_equal(m.stats_.counts, 2 * np.bincount(y))
    twice = sp.BoundaryProjector().fit(np.vstack([X, X]), np.concatenate([y, y]))
    assert_same_model(m, twice)


def test_inputs_numpy_dask_zarr_agree(tmp_path):
    X, y = make_classes(n=700, p=4, seed=19, dtype=np.float32)
    group = write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=64)
    ref = sp.BoundaryProjector(chunk_rows=64).fit(X, y)
    for Xin, yin in (
        (da.from_array(X, chunks=(64, 4)), da.from_array(y, chunks=64)),
        (group["X"], group["y"]),
    ):
        m = sp.BoundaryProjector().fit(Xin, yin)
        assert_same_model(m, ref, 1e-12)


def test_transform_of_dask_stays_lazy(coin):
    X, y = coin
    m = sp.BoundaryProjector().fit(X, y)
    Xd = da.from_array(X, chunks=(333, -1))
    Z = m.transform(Xd)
    assert isinstance(Z, da.Array)
    assert Z.chunks[0] == Xd.chunks[0]
    np.testing.assert_allclose(Z.compute(), m.transform(X), rtol=1e-13, atol=1e-13)
    assert isinstance(m.decision_function(Xd), da.Array)
    np.testing.assert_array_equal(m.predict(Xd).compute(), m.predict(X))
    assert m.score(Xd, y) == m.score(X, y)


# ---------------------------------------------------------- numerical stability
def two_pass_direction(X, y):
    """In-memory float64 reference: shift by a data row, then class means and centred scatter.

    (Differencing class means taken of the raw values near 1e8 would itself lose
    ~1e-8: each mean is rounded at that magnitude.)
    """
    D = np.asarray(X, dtype=np.float64) - np.asarray(X[0], dtype=np.float64)
    means = [D[y == k].mean(0) for k in (0, 1)]
    Sw = sum((D[y == k] - means[k]).T @ (D[y == k] - means[k]) for k in (0, 1))
    w = np.linalg.solve(Sw, means[1] - means[0])
    return w / np.linalg.norm(w)


def naive_direction(X, y):
    """Raw ``XᵀX - nμμᵀ`` per class, in the data's own dtype, as a naive streamer would."""
    X = np.asarray(X)
    Sw = np.zeros((X.shape[1],) * 2)
    means = []
    for k in (0, 1):
        rows = X[y == k]
        mu = rows.sum(0) / len(rows)
        Sw += rows.T @ rows - len(rows) * np.outer(mu, mu)
        means.append(mu)
    w = np.linalg.solve(Sw.astype(np.float64), (means[1] - means[0]).astype(np.float64))
    return w / np.linalg.norm(w)


@pytest.mark.parametrize(
    ("offset", "dtype"), [(1e8, np.float64), (1e4, np.float32)], ids=["f64-mean-1e8", "f32-mean-1e4"]
)
def test_huge_mean_tiny_spread(offset, dtype):
    X, y = make_classes(n=4000, p=4, seed=20, offset=offset, dtype=dtype)
    ref = two_pass_direction(X, y)
    m = sp.BoundaryProjector(chunk_rows=333).fit(X, y)
    w = m.components_[0]
    assert np.max(np.abs(w - ref)) <= 1e-8
    naive = naive_direction(X, y)
    assert np.max(np.abs(naive - ref)) > 1e-3  # what XᵀX - nμμᵀ would have given


# ----------------------------------------------------------------- bad input
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("bad_value", [np.nan, np.inf])
def test_lazy_predictions_name_a_non_finite_row_as_in_memory_ones_do(k, bad_value, tmp_path):
    # a NaN row of a dask or Zarr input was predicted class 0 (probabilities NaN), silently
    import zarr

    X, y = make_classes(n=60, p=3, k=k, seed=22)
    bad = X.copy()
    bad[37, 1] = bad_value
    lazy = {"dask": da.from_array(bad, chunks=(16, 3))}
    group = zarr.open_group(str(tmp_path / "x.zarr"), mode="w")
    lazy["zarr"] = group.create_array("X", data=bad, chunks=(16, 3))
    models = [sp.BoundaryProjector().fit(X, y), sp.StreamingQDA().fit(X, y)]
    for model in models:
        for name in ("predict", "predict_proba", "predict_log_proba", "decision_function"):
            if not hasattr(model, name):
                continue
            with pytest.raises(BadValuesError, match="row 37 "):  # in memory, as before
                getattr(model, name)(bad)
            for rows in lazy.values():
                with pytest.raises(BadValuesError, match="row 37 "):
                    np.asarray(da.asarray(getattr(model, name)(rows)).compute())
        for rows in lazy.values():
            with pytest.raises(BadValuesError, match="row 37 "):
                model.score(rows, y)
        # finite lazy rows are predicted as before
        np.testing.assert_array_equal(
            np.asarray(da.asarray(model.predict(da.from_array(X, chunks=(16, 3)))).compute()),
            model.predict(X))


def test_a_table_column_that_is_no_number_is_named():
    # a datetime column raised numpy's DTypePromotionError, a text one "could not convert
    # string to float: 'x'": neither named the column
    pd = pytest.importorskip("pandas")
    X, y = make_classes(n=40, p=2, seed=23)
    for column, shown in ((pd.date_range("2020-01-01", periods=40), "Timestamp('2020-01-01"),
                          (["1.5"] * 39 + ["n/a"], "'n/a'")):
        df = pd.DataFrame({"a": X[:, 0], "when": column, "b": X[:, 1]})
        with pytest.raises(InputError, match=re.escape("X column 'when' (dtype ")) as info:
            sp.BoundaryProjector().fit(df, y)
        assert f"holds {shown}" in str(info.value)
    sp.BoundaryProjector().fit(pd.DataFrame({"a": X[:, 0], "b": X[:, 1]}), y)  # numbers: fine


def test_a_category_or_polars_text_column_is_named_on_fit_and_predict():
    # such columns pass scikit-learn's check as objects: fit said "X must hold real numbers;
    # got dtype object" (no column), predict numpy's "ufunc 'isfinite' not supported"
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    X, y = make_classes(n=40, p=3, seed=23)
    model = sp.BoundaryProjector().fit(pd.DataFrame(X, columns=["a", "b", "when"]), y)
    text = np.where(X[:, 0] > 0, "x", "y")
    frames = (pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "when": pd.Categorical(text)}),
              pl.DataFrame({"a": X[:, 0], "b": X[:, 1], "when": text}))
    for df in frames:
        for call in (sp.BoundaryProjector().fit, model.predict, model.transform):
            with pytest.raises(InputError, match=r"X column 'when' \(dtype \w+\) holds '[xy]', "
                                                 r"not a number"):
                call(df, y) if call.__name__ == "fit" else call(df)


def test_rows_of_python_objects_name_the_value_that_is_no_number():
    # a list of rows with a None (JSON's null) or a word in it said "X must hold real numbers;
    # got dtype object" (no row, column or value), and one with 1+2j printed the whole array
    X, y = make_classes(n=3000, p=3, seed=25)
    model = sp.BoundaryProjector().fit(X, y)
    for value, said in ((None, r"^X holds None in row 2345 \(column 1\), not a number"),
                        ("n/a", r"^X holds 'n/a' in row 2345 \(column 1\), not a number"),
                        (1 + 2j, r"^Complex data not supported: X holds \(1\+2j\) in row 2345 "
                                 r"\(column 1\); features must be real numbers$")):
        rows = X.tolist()
        rows[2345][1] = value
        for call in (sp.BoundaryProjector().fit, sp.StreamingQDA().fit, model.predict,
                     model.transform):
            with pytest.raises(InputError, match=said):
                call(rows, y) if call.__name__ == "fit" else call(rows)
    rows = X.astype(object)  # numbers as Python objects: fine
    np.testing.assert_array_equal(model.predict(rows), model.predict(X))


def test_score_of_a_model_of_bytes_labels_is_its_accuracy():
    # bytes labels (HDF5, fixed-width Zarr) fit and predict, but score raised scikit-learn's
    # "labels represented as bytes is not supported" on rows in memory (the lazy path scored)
    X, y = make_classes(n=60, p=3, seed=24)
    labels = np.array(["é".encode(), b"b", b"c"])[y % 3]  # (not ASCII: compared as stored)
    model = sp.BoundaryProjector().fit(X, labels)
    want = float(np.mean(model.predict(X) == labels))
    assert 0.3 < want < 1.0
    assert model.score(X, labels) == want
    assert model.score(da.from_array(X, chunks=(16, 3)), labels) == want
    w = np.linspace(0.5, 2.0, 60)
    assert model.score(X, labels, sample_weight=w) == pytest.approx(
        np.average(model.predict(X) == labels, weights=w), rel=1e-15)
    # string labels for a model of bytes labels (or the reverse) are labels of another type,
    # on rows in memory as on lazy rows; they said "labels represented as bytes" are unsupported
    decoded = np.char.decode(labels, "utf-8")
    text = sp.BoundaryProjector().fit(X, decoded)
    for fitted, given in ((model, decoded), (text, labels)):
        for rows in (X, da.from_array(X, chunks=(16, 3))):
            with pytest.raises(InputError, match=r"Mix of label input types \((string and bytes|"
                                                 r"bytes and string)\)"):
                fitted.score(rows, given)


@pytest.mark.parametrize("labels", ["str", "lazy str", "lazy object"])
def test_lazy_score_refuses_labels_of_another_type(labels):
    # string labels for an int model scored 0.0 on lazy rows; numpy rows refuse them
    X, y = make_classes(n=60, p=3, seed=23)
    model = sp.BoundaryProjector().fit(X, y)
    text = {"str": y.astype(str), "lazy str": da.from_array(y.astype(str), chunks=16),
            "lazy object": da.from_array(y.astype(str).astype(object), chunks=16)}[labels]
    with pytest.raises(ValueError, match="Mix of label input types"):
        model.score(X, y.astype(str))
    with pytest.raises(InputError, match=r"Mix of label input types \(string and number\)"):
        model.score(da.from_array(X, chunks=(16, 3)), text)
    assert model.score(da.from_array(X, chunks=(16, 3)), y.astype(float)) == model.score(X, y)


def test_lazy_score_of_labels_or_weights_not_one_per_row_says_so():
    # lazy rows with too few or too many labels raised dask's "Chunks do not add up to shape"
    X, y = make_classes(n=60, p=3, seed=23)
    model = sp.BoundaryProjector().fit(X, y)
    rows = da.from_array(X, chunks=(16, 3))
    for labels in (y[:50], np.r_[y, y], da.from_array(y[:50], chunks=16)):
        with pytest.raises(InputError, match=rf"y has {len(labels)} labels but X has 60 rows"):
            model.score(rows, labels)
    with pytest.raises(InputError, match=r"sample_weight has shape \(50,\) but X has 60 rows"):
        model.score(rows, y, sample_weight=np.ones(50))
    assert model.score(rows, da.from_array(y, chunks=25)) == model.score(X, y)
    # weights of unknown chunk sizes (a boolean mask's) were said to have "shape (nan,)"
    w = da.from_array(np.ones(60), chunks=30)
    with pytest.raises(InputError, match=r"sample_weight has unknown chunk sizes .*"
                                         r"sample_weight\.compute_chunk_sizes\(\)"):
        model.score(rows, y, sample_weight=w[w > 0])
    with pytest.raises(InputError, match=r"sample_weight has unknown chunk sizes"):
        model.score(X, y, sample_weight=w[w > 0])  # (rows in memory: dask's "Cannot call len()")
    assert model.score(rows, y, sample_weight=w[w > 0].compute_chunk_sizes()) == model.score(X, y)


def test_lazy_score_takes_weights_of_every_kind():
    # a pandas Series of weights raised dask's "'index' must be an instance of
    # dask.dataframe.Index" on lazy rows (rows in memory took it)
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y = make_classes(n=60, p=3, seed=23)
    model = sp.BoundaryProjector().fit(X, y)
    w = np.linspace(0.1, 3.0, 60)
    want = model.score(X, y, sample_weight=w)
    for weights in (pd.Series(w), dd.from_pandas(pd.Series(w), npartitions=4), w.tolist(),
                    da.from_array(w, chunks=7)):
        got = model.score(da.from_array(X, chunks=(16, 3)), y, sample_weight=weights)
        assert got == pytest.approx(want, rel=1e-14)



def test_score_refuses_nan_or_all_zero_weights_on_every_path():
    # rows in memory refused them (scikit-learn's checks); lazy rows, and a model of bytes
    # labels, scored NaN, silently
    X, y = make_classes(n=60, p=3, seed=23)
    labels = np.array([b"a", b"b"])[y]
    nan = np.where(np.arange(60) == 7, np.nan, 1.0)
    for model, target in ((sp.BoundaryProjector().fit(X, y), y),
                          (sp.BoundaryProjector().fit(X, labels), labels)):
        for rows in (X, da.from_array(X, chunks=(16, 3))):
            with pytest.raises(ValueError, match="NaN"):
                model.score(rows, target, sample_weight=nan)
            with pytest.raises(ValueError, match="non-zero"):
                model.score(rows, target, sample_weight=np.zeros(60))


@pytest.mark.parametrize(("priors", "message"), [
    ([0, 0], r"priors must have a positive, finite sum; got \[0.0, 0.0\]"),
    ([1e308, 1e308], r"priors must have a positive, finite sum; got \[1e\+308, 1e\+308\] \(sum inf\)"),
    ({"a": 1}, r"priors must be numbers, one per class; got \{'a': 1\}"),
])
def test_priors_that_weigh_nothing_or_are_not_numbers_are_refused_as_priors(priors, message):
    # [0, 0] and [1e308, 1e308] ended in "the within-class covariance is singular" (blaming
    # the data; QDA fitted NaN priors), and a dict in a bare TypeError
    X, y = make_classes(n=60, p=3, seed=24)
    for estimator in (sp.BoundaryProjector, sp.StreamingQDA):
        with pytest.raises(InputError, match=message):
            estimator(priors=priors).fit(X, y)
    with pytest.raises(InputError, match=message):  # a declared class's priors, too
        sp.BoundaryProjector(priors=priors).partial_fit(X, y, classes=[0, 1])


def test_priors_that_weigh_nothing_on_the_classes_seen_so_far_say_so():
    # classes=[0, 1, 2] with rows of 0 and 1 only and priors [0, 0, 1]: the priors of the
    # classes with rows were renormalised to NaN ("got [nan, nan]")
    X, y = make_classes(n=60, p=3, seed=24)
    model = sp.BoundaryProjector(priors=[0, 0, 1])
    with pytest.raises(InputError, match=re.escape(
            "priors weigh nothing on the classes with rows so far (0, 1: priors [0.0, 0.0])")):
        model.partial_fit(X, y, classes=[0, 1, 2])
    model = sp.BoundaryProjector(priors=[1, 1, 2]).partial_fit(X, y, classes=[0, 1, 2])
    np.testing.assert_allclose(model.priors_, [0.5, 0.5])  # renormalised over those with rows


def _never_read(block):
    msg = "a row was read"
    raise AssertionError(msg)


def test_a_zero_prior_of_two_classes_is_refused_not_projected_to_nan():
    # priors [0, 1]: the boundary lies at infinity; center_ was ±inf and transform gave
    # [inf, nan, nan] for every row (reconstruction_error nan), with no error
    X, y = make_classes(n=60, p=3, seed=24)
    unread = da.from_array(X, chunks=20).map_blocks(_never_read, dtype=X.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (np.log(0) warned on the way)
        for priors, center in (([0, 1], "mean"), ([1, 0], "hyperplane")):
            # refused before the pass reads a row: two classes or too few priors, either way
            with pytest.raises(InputError, match=r"give one of two classes no weight.*positive prior"):
                sp.BoundaryProjector(priors=priors, center=center).fit(unread, y)
        with pytest.raises(InputError, match=r"give class 0 no weight"):  # declared, solved two
            sp.BoundaryProjector(priors=[0, 1, 1]).partial_fit(X, y, classes=[0, 1, 2])
        for priors in ([-1, 2], [np.nan, 1], [0, 0], ["a", "b"]):  # and the rest of what priors alone say
            with pytest.raises(InputError, match=r"^priors must"):
                sp.BoundaryProjector(priors=priors).fit(unread, y)
    Z = sp.BoundaryProjector(priors=[1e-300, 1], n_components=3).fit(X, y).transform(X)
    assert np.isfinite(Z).all()  # a tiny prior keeps a finite boundary


def test_bad_input_errors():
    X, y = make_classes(n=50, p=3, seed=21)
    bad = X.copy()
    bad[31, 2] = np.nan
    with pytest.raises(BadValuesError, match="row 31"):
        sp.BoundaryProjector(chunk_rows=8).fit(bad, y)
    with pytest.raises(InputError, match="49 labels but X has 50 rows"):
        sp.BoundaryProjector().fit(X, y[:-1])
    with pytest.raises(InputError, match="at least two classes"):
        sp.BoundaryProjector().fit(X, np.zeros(50, int))
    with pytest.raises(InputError, match="Expected 2D array, got 1D array"):
        sp.BoundaryProjector().fit(X[:, 0], y)
    m = sp.BoundaryProjector().fit(X, y)
    with pytest.raises(InputError, match="X has 2 features, but BoundaryProjector is expecting 3"):
        m.partial_fit(X[:, :2], y)
    with pytest.raises(InputError, match="X has 2 features, but BoundaryProjector is expecting 3"):
        m.transform(X[:, :2])
    with pytest.raises(InputError, match="X has 2 features, but BoundaryProjector is expecting 3"):
        m.transform(da.from_array(X[:, :2], chunks=(10, 2)))
    with pytest.raises(BadValuesError, match="row 31"):
        m.transform(bad)
    with pytest.raises(BadValuesError, match="row 31"):
        m.transform(da.from_array(bad, chunks=(10, 3))).compute()
    with pytest.raises(IncompatibleStatsError, match="4 features but the model was fitted on 3"):
        m.partial_fit_stats(sp.ClassStats.from_rows(np.ones((4, 4)), [0, 1, 0, 1]))
    with pytest.raises(NotFittedError, match="call fit"):
        sp.BoundaryProjector().transform(X)
    with pytest.raises(InputError, match="The 'center' parameter of BoundaryProjector must be"):
        sp.BoundaryProjector(center="median").fit(X, y)
    with pytest.raises(InputError, match="QDA needs at least 2 rows"):
        sp.BoundaryProjector(shrinkage=0.5, keep_class_scatter=True).fit(X[:4], [0, 0, 0, 1]).qda()


def test_errors_are_value_errors():
    assert issubclass(sp.StreamprojError, ValueError)


# ------------------------------------------------------------------- storage
def test_save_load_roundtrip(tmp_path, coin):
    X, y = coin
    m = sp.BoundaryProjector(n_components=3, shrinkage="auto").fit(X, y)
    m.save(tmp_path / "model")
    back = sp.load(tmp_path / "model")
    assert_same_model(back, m, 0)
    np.testing.assert_array_equal(back.transform(X), m.transform(X))
    assert back.model_id_ == m.model_id_
    back.partial_fit(X[:10] + 1, y[:10])  # the loaded summaries still merge
    assert back.stats_.n_samples == len(X) + 10
    back.save(tmp_path / "model")
    assert sp.load(tmp_path / "model").stats_.n_samples == len(X) + 10


def test_save_load_with_external_boundary(tmp_path, coin):
    X, y = coin
    clf = LogisticRegression().fit(X, y)
    m = sp.BoundaryProjector(boundary=clf).fit(X, y)
    m.save(tmp_path / "m")
    back = sp.load(tmp_path / "m")
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    assert back.meta_["params"]["boundary"]["source"] == "LogisticRegression"


def test_save_describes_the_boundary_as_fitted_not_as_it_is_now(tmp_path, coin):
    # save read the boundary file (or classifier) again: once it had changed, the model
    # written was "damaged" on load (its classes not the solution's), and once the file was
    # gone, save refused a fitted model ("no boundary file")
    X, y = coin
    labels = np.array(["neg", "pos"])[y]
    clf = LogisticRegression().fit(X, labels)
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"coef": clf.coef_.tolist(), "intercept": clf.intercept_.tolist(),
                                "classes": ["neg", "pos"]}))
    from_file = sp.BoundaryProjector(boundary=path).fit(X, labels)
    from_clf = sp.BoundaryProjector(boundary=clf).fit(X, labels)
    path.unlink()
    clf.fit(X, np.array(["N", "P"])[y])
    for name, model in (("file", from_file), ("clf", from_clf)):
        model.save(tmp_path / name)
        back = sp.load(tmp_path / name)
        np.testing.assert_array_equal(back.predict(X), model.predict(X))
        np.testing.assert_array_equal(back.classes_, ["neg", "pos"])
    assert sp.load(tmp_path / "file").meta_["params"]["boundary"]["source"] == f"file {path}"


def test_scikit_learn_clone_and_set_params(coin):
    from sklearn.base import clone

    X, y = coin
    m = sp.BoundaryProjector(n_components=3, shrinkage=0.1).fit(X, y)
    copy = clone(m)
    assert copy.get_params() == m.get_params()
    assert not hasattr(copy, "components_")
    assert copy.set_params(center="hyperplane").center == "hyperplane"
    with pytest.raises(InputError, match="unknown parameter 'centre'; valid: bfloat16, boundary, center"):
        copy.set_params(centre="mean")
    # a nested name under a parameter that is no estimator: was AttributeError on None
    with pytest.raises(InputError, match=r"unknown parameter 'boundary__C': boundary \(None\) is data"):
        copy.set_params(boundary__C=3)


@pytest.mark.parametrize("estimator", [lambda: sp.BoundaryProjector(n_components=2), sp.StreamingQDA])
@pytest.mark.parametrize("with_rows", [[1, 3, 5], [1, 3]])
def test_decision_columns_follow_classes_when_a_declared_class_has_no_rows(estimator, with_rows):
    # classes_ lists every declared class; decision_function's columns must follow it
    # (argmax over them read through classes_ gave another class's label)
    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(size=(30, 3)) + 2 * k for k in range(len(with_rows))])
    y = np.repeat(with_rows, 30)
    m = estimator().partial_fit(X, y, classes=[0, 1, 3, 5, 9])
    for rows in (X, da.from_array(X, chunks=25)):
        scores = np.asarray(m.decision_function(rows))
        assert scores.shape == (len(X), 5)
        np.testing.assert_array_equal(m.classes_[scores.argmax(axis=1)], m.predict(X))
        empty = ~np.isin(m.classes_, with_rows)
        assert np.all(scores[:, empty] == -np.inf)
        top = scores.max(axis=1, keepdims=True)
        soft = np.exp(scores - top) / np.exp(scores - top).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(soft, m.predict_proba(X), atol=1e-12)


def test_score_of_lazy_rows_names_the_first_bad_row(monkeypatch):
    # every row of column 2 inf: "row 1500", the chunk that failed first in time
    import time

    from streamproj import estimator

    X, y = make_classes(n=2000, p=4, seed=31)
    m = sp.BoundaryProjector().fit(X, y)
    bad = X.copy()
    bad[:, 2] = np.inf
    real = estimator._finite_block

    def late(block, block_info=None):
        if block_info[0]["chunk-location"][0] < 3:  # the first chunks finish last
            time.sleep(0.3)
        return real(block, block_info)

    monkeypatch.setattr(estimator, "_finite_block", late)
    with pytest.raises(BadValuesError, match=r"non-finite value \(inf\) in row 0 \(column 2\)"):
        m.score(da.from_array(bad, chunks=(100, -1)), y)
    with pytest.raises(BadValuesError, match=r"in row 0 \(column 2\)"):
        m.score(da.from_array(bad, chunks=(100, -1)), y, sample_weight=np.ones(2000))


# ------------------------------------------------- parameters set between fits
@pytest.mark.parametrize(("start", "change", "named"), [
    ({}, {"keep_class_scatter": True}, "keep_class_scatter=True"),
    ({}, {"shrinkage": "auto"}, "shrinkage='auto'"),
    ({}, {"shrinkage": "oas"}, "shrinkage='oas'"),
    ({}, {"priors": [0.4, 0.6]}, r"priors=\[0.4, 0.6\]"),
    ({"keep_class_scatter": True}, {"shrinkage": "auto"}, "shrinkage='auto'"),
    ({"boundary": ([[1.0, 0.0, 0.0]], [0.0])}, {"boundary": None, "priors": [0.5, 0.5]},
     r"priors=\[0.5, 0.5\]"),
])
def test_a_parameter_that_needs_more_than_the_rows_before_kept_is_refused(start, change, named):
    # set_params(keep_class_scatter=True) between partial_fit calls merged the new rows' class
    # scatter into pooled summaries, which dropped it: qda() then failed, and the others
    # failed only after the pass, blaming the summaries ("accumulate again")
    X, y = make_classes(n=400, p=3, seed=40)
    m = sp.BoundaryProjector(**start).partial_fit(X[:200], y[:200])
    before = m.stats_.fingerprint()
    m.set_params(**change)
    for merge in (lambda: m.partial_fit(X[200:], y[200:]),
                  lambda: m.partial_fit_stats(sp.accumulate(X[200:], y[200:], "fourth"))):
        with pytest.raises(IncompatibleStatsError, match=rf"{named} needs .*200 rows fitted so far .*call fit "
                                             "to start over"):
            merge()
        assert m.stats_.fingerprint() == before  # nothing merged
    m.fit(X, y)  # what the message says: the new parameters from the start
    assert sp.BoundaryProjector(**{**start, **change}).fit(X, y).model_id_ == m.model_id_


def test_a_parameter_that_needs_less_than_the_rows_before_kept_merges():
    X, y = make_classes(n=400, p=3, seed=41)
    m = sp.BoundaryProjector(shrinkage="auto").partial_fit(X[:200], y[:200])
    m.set_params(shrinkage=0.2).partial_fit(X[200:], y[200:])
    assert_same_model(m, sp.BoundaryProjector(shrinkage=0.2).fit(X, y))


def test_summaries_given_without_what_the_parameters_need_are_refused():
    # keep_class_scatter=True solved from pooled summaries silently: qda() failed later
    X, y = make_classes(n=200, p=3, seed=42)
    with pytest.raises(IncompatibleStatsError, match="keep_class_scatter=True needs each class's "
                                                     "own scatter .*ClassStats given keep only "
                                                     "'pooled'; accumulate them with "
                                                     "detail='per_class'"):
        sp.BoundaryProjector(keep_class_scatter=True).fit_stats(sp.accumulate(X, y))


@pytest.mark.parametrize("change", [
    {"shrinkage": 0.5}, {"priors": [0.3, 0.7]}, {"n_components": 1}, {"center": "hyperplane"},
    {"boundary": ([[1.0, -0.5, 0.25]], [0.1])}, {"shrinkage": "auto", "priors": None},
])
def test_parameters_set_after_a_fit_are_solved_before_the_model_is_saved(tmp_path, change):
    # set_params(shrinkage=0.5); save() wrote shrinkage 0.5 beside the solution of the old
    # shrinkage: loaded, it was neither model, and the next update solved a third
    X, y = make_classes(n=300, p=3, seed=43)
    m = sp.BoundaryProjector(shrinkage="auto", priors=[0.5, 0.5]).fit(X, y)
    m.set_params(**change).save(tmp_path / "m")
    back = sp.load(tmp_path / "m")
    fresh = sp.BoundaryProjector(**{"shrinkage": "auto", "priors": [0.5, 0.5], **change}).fit(X, y)
    for model in (m, back):  # the estimator is what it saved
        assert_same_model(model, fresh)
        np.testing.assert_array_equal(model.predict(X), fresh.predict(X))
    assert back.model_id_ == m.model_id_
    for name, value in change.items():
        if name != "boundary":  # (saved as its source and classes)
            assert back.meta_["params"][name] == value


def test_parameters_set_after_loading_are_solved_before_saving(tmp_path):
    X, y = make_classes(n=300, p=3, seed=44)
    sp.BoundaryProjector().fit(X, y).save(tmp_path / "a")
    sp.load(tmp_path / "a").set_params(shrinkage=0.3).save(tmp_path / "b")
    back = sp.load(tmp_path / "b")
    assert back.shrinkage == 0.3
    assert_same_model(back, sp.BoundaryProjector(shrinkage=0.3).fit(X, y))


@pytest.mark.parametrize(("change", "message"), [
    ({"shrinkage": "auto"}, r"shrinkage='auto' needs .*call fit to start over"),
    ({"keep_class_scatter": True}, r"keep_class_scatter=True needs .*call fit to start over"),
    ({"n_components": 7}, r"cannot save: .*n_components=7 is more than the 3 feature"),
    ({"shrinkage": 2.0}, r"The 'shrinkage' parameter"),
])
def test_parameters_set_after_a_fit_that_do_not_solve_are_refused_on_save(tmp_path, change, message):
    X, y = make_classes(n=300, p=3, seed=45)
    m = sp.BoundaryProjector().fit(X, y)
    before = m.model_id_
    m.set_params(**change)
    with pytest.raises(sp.errors.StreamprojError, match=message):
        m.save(tmp_path / "m")
    assert not (tmp_path / "m").exists()
    assert m.model_id_ == before  # the model is as it was
    np.testing.assert_array_equal(m.predict(X), sp.BoundaryProjector().fit(X, y).predict(X))


@pytest.mark.parametrize("estimator", [sp.BoundaryProjector, sp.StreamingQDA])
@pytest.mark.parametrize(("labels", "classes"), [
    (np.array([0, 1]), np.array([0.0, 1.0])),
    (np.array([0, 1]), np.array([0.0, 1.0, 2.0])),  # a declared class without rows
    (np.array(["a", "b"]), np.array(["a", "b", "ccc"])),
])
def test_predictions_are_labels_of_the_declared_classes_dtype(tmp_path, estimator, labels, classes):
    # as scikit-learn's partial_fit (classes_ = unique_labels(classes), predict takes from
    # it): classes_ was float64 but predict gave y's int64 labels
    from sklearn.linear_model import SGDClassifier

    X, y = make_classes(n=200, p=3, seed=46)
    y = labels[y]
    m = estimator().partial_fit(X, y, classes=classes)
    ref = SGDClassifier(random_state=0).partial_fit(X, y, classes=classes)
    assert m.classes_.dtype == ref.classes_.dtype
    assert m.predict(X).dtype == ref.predict(X).dtype
    assert m.predict(da.from_array(X, chunks=50)).compute().dtype == m.classes_.dtype
    assert m.score(X, y) > 0.7
    if estimator is sp.BoundaryProjector:
        m.save(tmp_path / "m")
        assert sp.load(tmp_path / "m").predict(X).dtype == m.classes_.dtype


@pytest.mark.parametrize("estimator", [
    lambda: sp.BoundaryProjector(priors=[0.3, 0.3]),
    lambda: sp.BoundaryProjector(priors=[0.3, 0.3], shrinkage="auto"),
    lambda: sp.BoundaryProjector(priors=[0.3, 0.3], shrinkage=0.2, keep_class_scatter=True),
    lambda: sp.StreamingQDA(priors=[0.3, 0.3]),
])
def test_priors_that_do_not_sum_to_one_are_warned_once_a_call(estimator):
    # the LDA solve warned twice: once for the priors, once for the covariance they weigh
    X, y = make_classes(n=200, p=3, seed=47)
    with pytest.warns(sp.errors.StreamprojWarning, match="do not sum to 1") as caught:
        estimator().fit(X, y)
    assert len([w for w in caught if "do not sum to 1" in str(w.message)]) == 1


def test_a_failed_merge_of_summaries_keeps_the_boundary_classes(tmp_path):
    # partial_fit_stats that failed dropped the classes of the given boundary: saved, the
    # model no longer named them, and loaded, it no longer refused labels they lack
    X, y = make_classes(n=300, p=3, seed=48)
    labels = np.array(["neg", "pos"])[y]
    m = sp.BoundaryProjector(boundary=LogisticRegression().fit(X, labels)).fit(X, labels)
    unknown = sp.accumulate(X[:10], np.array(["zzz"] * 10))
    with pytest.raises(InputError, match="the data hold the class 'zzz'"):
        m.partial_fit_stats(unknown)
    m.save(tmp_path / "m")
    back = sp.load(tmp_path / "m")
    assert back.meta_["params"]["boundary"]["classes"] == ["neg", "pos"]
    with pytest.raises(InputError, match="the data hold the class 'zzz'"):
        back.partial_fit_stats(unknown)


@pytest.mark.parametrize("path", ["", "  "])
def test_an_empty_model_path_is_refused_by_load_and_save(path, tmp_path, monkeypatch):
    """``sp.load("")`` loaded a model from the current folder (``os.environ.get("MODEL", "")``
    with MODEL unset); ``save("")`` said "model  is the current folder"."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    model = sp.BoundaryProjector().fit(rng.normal(size=(200, 3)) + y[:, None], y)
    monkeypatch.chdir(tmp_path)
    model.save(tmp_path / "m")
    monkeypatch.chdir(tmp_path / "m")  # a model right here: still no path given
    for call in (lambda: sp.load(path), lambda: model.save(path)):
        with pytest.raises(InputError, match="the model path is empty"):
            call()


@pytest.mark.parametrize(("dtype", "offset"), [(np.int64, 2**53), (np.int64, 2**60), (np.int64, 2**62),
                                               (np.uint64, 2**64 - 2**20)])
def test_wide_integer_rows_are_fitted_and_projected_exactly(dtype, offset):
    # 64-bit integers beyond 2^53 (nanosecond timestamps as a feature) were cast to float64
    # before the centre came off: at 2^62 each value was rounded by up to 512 of a spread
    # of 1,000, in the fit and in every coordinate, silently. The model's float64 centre
    # is itself rounded at that scale; coordinates are exact about that centre.
    from conftest import exact_minus, rel_err, sin_angle, wide_integer_rows

    X, y, small_rows = wide_integer_rows(offset, dtype)
    model = sp.BoundaryProjector(n_components=3).fit(X, y)
    small = sp.BoundaryProjector(n_components=3).fit(small_rows, y)
    assert sin_angle(model.components_.T, small.components_.T) < 1e-12
    assert rel_err(model.stats_.within, small.stats_.within) < 1e-14
    ref = exact_minus(X, model.center_) @ model.components_.T
    Z = model.transform(X)
    assert rel_err(Z, ref) < 1e-14
    assert rel_err(model.transform(da.from_array(X, chunks=(377, 4))).compute(), ref) < 1e-14
    # the rows' differences and their probabilities are the small rows'
    Zs = small.transform(small_rows) * np.sign(np.sum(model.components_ * small.components_, axis=1))
    assert rel_err(Z - Z[0], Zs - Zs[0]) < 1e-12
    np.testing.assert_allclose(model.predict_proba(X), small.predict_proba(small_rows), atol=1e-10)
    lazy = model.predict_proba(da.from_array(X, chunks=(377, 4))).compute()
    np.testing.assert_allclose(lazy, small.predict_proba(small_rows), atol=1e-10)
    # two classes: the log-odds themselves
    X2, y2, small2 = wide_integer_rows(offset, dtype, k=2, seed=1)
    two, two_small = sp.BoundaryProjector().fit(X2, y2), sp.BoundaryProjector().fit(small2, y2)
    d, ds = two.decision_function(X2), two_small.decision_function(small2)
    assert rel_err(d, ds) < 1e-12
    assert rel_err(two.decision_function(da.from_array(X2, chunks=(377, 4))).compute(), ds) < 1e-12
    qda, qda_small = sp.StreamingQDA().fit(X, y), sp.StreamingQDA().fit(small_rows, y)
    np.testing.assert_allclose(qda.predict_proba(X), qda_small.predict_proba(small_rows), atol=1e-10)


def test_transform_in_memory_refuses_a_row_whose_coordinates_overflow_as_lazily():
    # a finite row near float64's largest was projected to -inf in memory (beside numpy's
    # RuntimeWarning) where the same rows as a dask array were refused, the row named
    X, y = make_classes(n=200, p=3, k=3, seed=23)
    m = sp.BoundaryProjector(n_components=2).fit(X, y)
    far = X.copy()
    far[37] = 1.7e308 * np.sign(m.components_[0])
    with np.errstate(over="ignore"):
        assert not np.isfinite(far[37] @ m.components_.T).all()  # (the row does overflow)
    with pytest.raises(BadValuesError, match="X row 37 is too large to project"):
        m.transform(da.from_array(far, chunks=(30, 3))).compute()
    with pytest.raises(BadValuesError, match="X row 37 is too large to project"):
        m.transform(far)
