import re
import warnings

import numpy as np
import pytest
from conftest import make_classes, rel_err, wide_integer_rows

import streamproj as sp
from streamproj.errors import (
    BadValuesError,
    IncompatibleStatsError,
    InputError,
    ModelError,
)
from streamproj.stats import ClassStats


def exact_moments(X, y):
    """Two-pass float64 reference: per-class counts, means, M2, M21, M22."""
    X = np.asarray(X, dtype=np.float64)
    classes = np.unique(y)
    out = {"classes": classes, "counts": [], "means": [], "m2": [], "m21": [], "m22": []}
    for k in classes:
        rows = X[y == k]
        mu = rows.mean(axis=0)
        d = rows - mu
        d -= d.mean(axis=0)  # second pass removes the rounding of the first
        out["counts"].append(len(rows))
        out["means"].append(mu)
        out["m2"].append(d.T @ d)
        out["m21"].append((d**2).T @ d)
        out["m22"].append((d**2).T @ (d**2))
    return {k: np.asarray(v) for k, v in out.items()}


def merged(parts):
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def chunked(X, y, size, detail):
    return merged([ClassStats.from_rows(X[i : i + size], y[i : i + size], detail)
                   for i in range(0, len(X), size)])


def rel(a, b):
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


@pytest.mark.parametrize("detail", ["pooled", "per_class", "fourth"])
@pytest.mark.parametrize("size", [1, 7, 64, 1000])
def test_chunked_summary_equals_two_pass(detail, size):
    X, y = make_classes(n=400, p=4, k=3, seed=1, offset=50.0)
    ref = exact_moments(X, y)
    s = chunked(X, y, size, detail)
    assert s.detail == detail
    np.testing.assert_array_equal(s.classes, ref["classes"])
    np.testing.assert_array_equal(s.counts, ref["counts"])
    assert rel(s.means, ref["means"]) < 1e-13
    assert rel(s.within, ref["m2"].sum(0)) < 1e-11
    if detail != "pooled":
        assert rel(s.class_scatter, ref["m2"]) < 1e-11
    if detail == "fourth":
        assert rel(s.comoment22, ref["m22"]) < 1e-11
        # third moments are near zero for Gaussians: compare on the scale of the data
        scale = np.max(np.abs(ref["m2"])) ** 1.5 / np.sqrt(len(X))
        assert np.max(np.abs(s.comoment21 - ref["m21"])) / scale < 1e-10


@pytest.mark.parametrize("size", [7, 1000])
def test_fourth_moments_far_from_zero_are_about_the_exact_mean(size):
    # a float64 class mean near 1e8 is rounded by up to 7e-9: co-moments about it were off
    X, y = make_classes(n=400, p=4, k=3, seed=5)
    X = X + 1e8
    ref = exact_moments(X - 1e8, y)  # exact rows (Sterbenz), so an exact reference
    s = chunked(X, y, size, "fourth")
    assert rel(s.comoment22, ref["m22"]) < 1e-11
    scale = np.max(np.abs(ref["m2"])) ** 1.5 / np.sqrt(len(X))
    assert np.max(np.abs(s.comoment21 - ref["m21"])) / scale < 1e-10


def test_a_plus_b_equals_one_pass_and_is_commutative():
    X, y = make_classes(n=500, p=5, k=4, seed=2)
    a = ClassStats.from_rows(X[:180], y[:180], "fourth")
    b = ClassStats.from_rows(X[180:], y[180:], "fourth")
    whole = ClassStats.from_rows(X, y, "fourth")
    for s in (a + b, b + a):
        assert rel(s.within, whole.within) < 1e-12
        assert rel(s.class_scatter, whole.class_scatter) < 1e-12
        assert rel(s.comoment22, whole.comoment22) < 1e-12
        assert rel(s.means, whole.means) < 1e-14


def test_merge_brings_in_a_new_class_and_keeps_disjoint_ones():
    X, y = make_classes(n=300, p=3, k=3, seed=4)
    a = ClassStats.from_rows(X[y < 2], y[y < 2], "per_class")
    b = ClassStats.from_rows(X[y == 2], y[y == 2], "per_class")
    s = a + b
    whole = ClassStats.from_rows(X, y, "per_class")
    np.testing.assert_array_equal(s.classes, [0, 1, 2])
    assert rel(s.class_scatter, whole.class_scatter) < 1e-12
    assert rel(s.total, whole.total) < 1e-12


def test_iadd_and_update_merge_in_place():
    X, y = make_classes(n=200, p=3, seed=5)
    s = ClassStats.from_rows(X[:50], y[:50])
    s += ClassStats.from_rows(X[50:120], y[50:120])
    s.update(X[120:], y[120:])
    assert rel(s.within, ClassStats.from_rows(X, y).within) < 1e-12


def test_total_and_between_scatter():
    X, y = make_classes(n=300, p=4, k=3, seed=6)
    s = ClassStats.from_rows(X, y)
    d = X - X.mean(0)
    assert rel(s.total, d.T @ d) < 1e-12
    np.testing.assert_allclose(s.mean, X.mean(0), rtol=1e-14)
    # between = Σ_k n_k (μ_k - μ)(μ_k - μ)ᵀ of the rows themselves, and total = within + between
    between = sum(np.sum(y == k) * np.outer(X[y == k].mean(0) - X.mean(0), X[y == k].mean(0) - X.mean(0))
                  for k in np.unique(y))
    assert rel(s.between, between) < 1e-12
    assert rel(s.within + s.between, d.T @ d) < 1e-12


def test_total_moments_from_class_moments():
    X, y = make_classes(n=300, p=3, k=3, seed=7)
    n, m2, _, m22 = ClassStats.from_rows(X, y, "fourth").total_moments()
    d = X - X.mean(0)
    assert n == 300
    assert rel(m2, d.T @ d) < 1e-12
    assert rel(m22, (d**2).T @ (d**2)) < 1e-12


def test_float32_input_is_summarised_in_float64():
    X, y = make_classes(n=300, p=3, seed=8, dtype=np.float32, offset=1e4)
    s = ClassStats.from_rows(X, y)
    assert s.means.dtype == np.float64
    assert s.within.dtype == np.float64
    ref = exact_moments(X.astype(np.float64), y)
    assert rel(s.within, ref["m2"].sum(0)) < 1e-10


def test_string_labels_and_save_load_roundtrip(tmp_path):
    X, y = make_classes(n=120, p=3, k=3, seed=9)
    labels = np.array(["cat", "dog", "eel"])[y]
    s = ClassStats.from_rows(X, labels, "fourth")
    s.save(tmp_path / "s.npz")
    t = ClassStats.load(tmp_path / "s.npz")
    np.testing.assert_array_equal(t.classes, ["cat", "dog", "eel"])
    for name in ("counts", "means", "mean_residuals", "within", "class_scatter", "comoment21",
                 "comoment22"):
        np.testing.assert_array_equal(getattr(t, name), getattr(s, name))
    assert t.detail == "fourth"


def test_load_rejects_missing_and_foreign_files(tmp_path):
    with pytest.raises(ModelError, match="no ClassStats file"):
        ClassStats.load(tmp_path / "missing.npz")
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(ModelError, match="not a streamproj ClassStats"):
        ClassStats.load(tmp_path / "other.npz")


def test_load_refuses_a_damaged_summary_naming_the_file_and_array(tmp_path):
    # a NaN scatter, reversed classes or mis-shaped means were loaded and merged silently
    s = ClassStats.from_rows(np.array([[0.0, 1.0], [2.0, 3.0], [1.0, 1.0]]), [0, 1, 1])
    for name, value, message in (("within", np.full((2, 2), np.nan), "its 'within' holds NaN"),
                                 ("classes", np.array([1, 0]),
                                  "its 'classes' ([1, 0]) are not sorted distinct labels"),
                                 ("means", np.zeros((2, 3)), "its 'means' has shape (2, 3)")):
        arrays = {**s.to_arrays(), name: value}
        np.savez(tmp_path / "s.npz", **arrays)
        with pytest.raises(ModelError, match=re.escape(f"{tmp_path / 's.npz'}: {message}")):
            ClassStats.load(tmp_path / "s.npz")


def test_merging_is_plain_arithmetic_every_row_counts():
    X, y = make_classes(n=100, p=3, seed=10)
    a = ClassStats.from_rows(X[:60], y[:60])
    b = ClassStats.from_rows(X[60:], y[60:])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: a repeated batch is just more rows
        twice = (a + b) + b
    ref = ClassStats.from_rows(np.vstack([X, X[60:]]), np.concatenate([y, y[60:]]))
    np.testing.assert_array_equal(twice.counts, ref.counts)
    assert rel(twice.within, ref.within) < 1e-13
    assert rel(twice.means, ref.means) < 1e-14


def test_integer_rows_one_per_merge_are_all_counted():
    rng = np.random.default_rng(4)
    X = rng.integers(0, 3, size=(300, 2))  # many repeated rows
    y = rng.integers(0, 2, size=300)
    s = merged([ClassStats.from_rows(X[i : i + 1], y[i : i + 1]) for i in range(300)])
    assert s.n_samples == 300
    np.testing.assert_array_equal(s.counts, np.bincount(y))


def test_stats_files_of_0_1_with_batch_records_still_load(tmp_path):
    X, y = make_classes(n=90, p=3, seed=11)
    s = ClassStats.from_rows(X, y)
    arrays = s.to_arrays()
    arrays.pop("mean_residuals")
    arrays["batch_ids"] = np.array(["0123456789abcdef0123456789abcdef"], dtype="U32")
    arrays["batch_rows"] = np.array([90], dtype=np.int64)
    np.savez(tmp_path / "old.npz", **arrays)
    t = ClassStats.load(tmp_path / "old.npz")
    np.testing.assert_array_equal(t.within, s.within)
    assert (t + t).n_samples == 180


def test_feature_count_mismatch_on_merge():
    a = ClassStats.from_rows(np.ones((4, 3)), [0, 0, 1, 1])
    b = ClassStats.from_rows(np.ones((4, 2)), [0, 0, 1, 1])
    with pytest.raises(IncompatibleStatsError, match="3 and 2 features"):
        a + b


def test_string_and_numeric_labels_do_not_merge():
    a = ClassStats.from_rows(np.ones((2, 2)), ["a", "b"])
    b = ClassStats.from_rows(np.ones((2, 2)), [0, 1])
    with pytest.raises(IncompatibleStatsError, match="string labels with numeric"):
        a + b


def test_bytes_labels_merge_with_text_labels_as_utf8_text():
    # numpy decoded the bytes as ASCII: b"caf\xc3\xa9" with "café" was a UnicodeDecodeError traceback
    a = ClassStats.from_rows(np.ones((2, 2)), np.array(["café".encode(), b"dog"]))
    b = ClassStats.from_rows(np.zeros((2, 2)), np.array(["café", "dog"]))
    for s in (a + b, b + a):
        assert s.classes.tolist() == ["café", "dog"]
        assert s.counts.tolist() == [2, 2]
        np.testing.assert_array_equal(s.means, 0.5)
    c = ClassStats.from_rows(np.ones((1, 2)), np.array([b"\xff"]))
    with pytest.raises(IncompatibleStatsError, match=r"the label b'\\xff' is not UTF-8 text"):
        b + c


def test_merge_of_different_details_keeps_the_lesser():
    X, y = make_classes(n=100, p=3, seed=12)
    s = ClassStats.from_rows(X[:50], y[:50], "fourth") + ClassStats.from_rows(X[50:], y[50:])
    assert s.detail == "pooled"
    with pytest.raises(IncompatibleStatsError, match="detail 'per_class'"):
        s.covariances()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_name_the_first_bad_row(bad):
    X = np.ones((10, 3))
    X[7, 1] = bad
    X[9, 0] = np.nan
    with pytest.raises(BadValuesError, match="row 107"):
        ClassStats.from_rows(X, np.arange(10) % 2, row_offset=100)


def test_overflow_is_reported_as_such():
    for X, y in ((np.full((4, 2), 1e308), [0, 1, 0, 1]),
                 (np.array([[1e308, 1.0], [-1e308, 2.0], [1e308, 3.0], [-1e308, 5.0]]), [0, 0, 1, 1])):
        with pytest.raises(BadValuesError, match="overflow"):
            ClassStats.from_rows(X, y)


@pytest.mark.parametrize("detail", ["pooled", "per_class"])
def test_squares_that_overflow_only_when_summed_are_reported(detail):
    """Each chunk's squares were finite; their sum was inf and fit raised scipy's bare ValueError."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 400)
    X = rng.normal(size=(400, 3)) + y[:, None]
    X[:, 1] *= 1e153
    parts = [ClassStats.from_rows(X[i : i + 50], y[i : i + 50], detail) for i in range(0, 400, 50)]
    with pytest.raises(BadValuesError, match="feature 1 varies too much for float64: its squares"):
        merged(parts)
    with pytest.raises(BadValuesError, match="feature 1 varies too much for float64: its squares"):
        sp.BoundaryProjector(chunk_rows=50, keep_class_scatter=detail == "per_class").fit(X, y)


@pytest.mark.parametrize("scale", [1e-154, 1e-160, 1e-162])
def test_squares_that_underflow_are_reported_not_summed(scale):
    """A column spread 1e-160 moved probabilities by 1e-4 silently; at 1e-162 it had "no variance"."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    fine = X.copy()
    fine[:, 1] *= 1e-150  # squares 1e-300: normal numbers, every digit kept
    got = sp.BoundaryProjector().fit(fine, y)
    want = sp.BoundaryProjector().fit(X, y)
    np.testing.assert_allclose(got.predict_proba(fine), want.predict_proba(X), rtol=0, atol=1e-12)
    X[:, 1] *= scale
    with pytest.raises(BadValuesError, match="feature 1 varies so little within its classes"):
        sp.BoundaryProjector().fit(X, y)
    with pytest.raises(BadValuesError, match="feature 1 .* rescale the features"):
        sp.StreamingQDA().fit(X, y)


@pytest.mark.parametrize("detail", ["pooled", "per_class", "fourth"])
def test_squares_that_overflow_name_the_row_that_is_too_large(detail):
    # one value 1e200 in row 6,543 of 10,000 (one chunk) was said as "X rows 0..9999 are too
    # large": every row of the chunk (0..999999 for a million rows in memory), not the one
    X, y = make_classes(n=10_000, p=3, k=3, seed=24)
    X[6543, 1] = 1e200
    with pytest.raises(BadValuesError, match=r"^X row 6543 is too large: its squares overflow"):
        sp.accumulate(X, y, detail=detail)
    with pytest.raises(BadValuesError, match=r"^X row 6543 is too large"):
        sp.accumulate(X, y, detail=detail, chunk_rows=1000)  # (numbered across chunks)
    # rows each of whose squares is finite but whose sum is not: the chunk's rows, as before
    X[:, 1] = 1e153 * np.random.default_rng(0).normal(size=X.shape[0])
    with pytest.raises(BadValuesError, match=r"^X rows 0\.\.9999 are too large"):
        sp.accumulate(X, y, detail=detail)


def test_a_chunk_where_a_column_is_tiny_is_judged_with_the_others():
    # Refused chunk by chunk, the same rows fitted in one piece and failed in 100-row chunks
    # (the found review case: a column near 1e-161 in one chunk, normal elsewhere)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] > 0).astype(int)
    X[100:200, 2] = 1e-161 * rng.normal(size=100)
    whole = sp.BoundaryProjector().fit(X, y)
    chunked = sp.BoundaryProjector(chunk_rows=100).fit(X, y)
    np.testing.assert_allclose(chunked.coef_, whole.coef_, rtol=1e-12)
    ClassStats.from_rows(X[100:200], y[100:200])  # (a part alone is summarised as it is)


@pytest.mark.parametrize(
    ("X", "y", "message"),
    [
        (np.ones(5), np.zeros(5), "must be 2-D"),
        (np.ones((5, 2)), np.zeros(4), "4 labels but X has 5 rows"),
        (np.ones((5, 2)), np.zeros((5, 1)), "y must be 1-D"),
        (np.array([["a", "b"]]), np.zeros(1), "real numbers"),
        (np.ones((3, 2)), np.array([0.0, np.nan, 1.0]), r"y has a missing label \(nan\) in row 1"),
    ],
)
def test_bad_shapes_and_types(X, y, message):
    with pytest.raises(InputError, match=message):
        ClassStats.from_rows(X, y)


def test_unknown_detail_lists_the_choices():
    with pytest.raises(InputError, match="'pooled', 'per_class', 'fourth'"):
        ClassStats.from_rows(np.ones((2, 2)), [0, 1], detail="full")


def test_many_classes_use_the_sorted_path_and_stay_exact():
    X, y = make_classes(n=3000, p=3, k=150, seed=13)
    ref = exact_moments(X, y)
    s = chunked(X, y, 701, "pooled")
    np.testing.assert_array_equal(s.counts, ref["counts"])
    assert rel(s.means, ref["means"]) < 1e-13
    assert rel(s.within, ref["m2"].sum(0)) < 1e-11


def test_labels_that_are_not_small_integers():
    X, y = make_classes(n=300, p=3, k=3, seed=14)
    for labels in (y - 5, y * 10_000_000, y.astype(float) + 0.5, np.array(["a", "b", "c"])[y]):
        s = ClassStats.from_rows(X, labels)
        np.testing.assert_array_equal(s.classes, np.unique(labels))
        assert rel(s.within, ClassStats.from_rows(X, y).within) < 1e-13


def test_integer_labels_beyond_int64_keep_every_class():
    # numpy makes the Python ints [5, 2**63] float64 (neither int64 nor uint64 holds both
    # by its rules), where 2**63 + 1 is 2**63: two classes were merged into one, silently
    X, y = make_classes(n=300, p=3, k=3, seed=15)
    values = [5, 2**63, 2**63 + 1]
    for labels in (np.array(values, dtype=object)[y], [values[i] for i in y]):
        s = ClassStats.from_rows(X, labels)
        assert s.classes.dtype == np.uint64
        assert s.classes.tolist() == values
        np.testing.assert_array_equal(s.counts, np.bincount(y))
    for labels in (np.array([-1, 2**63, 0], dtype=object)[y], [[-1, 2**63, 0][i] for i in y]):
        with pytest.raises(InputError, match=r"negative integer labels and labels above "
                                             r"9223372036854775807"):
            ClassStats.from_rows(X, labels)
    s = ClassStats.from_rows(X, [[-1, 2, 0.5][i] for i in y])  # numbers: floats, as before
    assert s.classes.tolist() == [-1.0, 0.5, 2.0]


@pytest.mark.parametrize("block_bytes", [8, 2**22])
def test_hash_c_order_sees_the_bytes_tobytes_gives(monkeypatch, block_bytes):
    # Fingerprints and model ids are recorded in ledgers and models: the fast hash of a
    # Fortran-ordered scatter must digest exactly what the whole C-order copy did.
    import hashlib

    from streamproj import stats

    monkeypatch.setattr(stats, "_HASH_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(3)
    cases = [np.asfortranarray(rng.standard_normal((37, 11))), rng.standard_normal((6, 5))[:, ::2],
             rng.standard_normal((4, 3, 5)).transpose(2, 0, 1), np.array(["a", "bcd"]),
             np.array([1, 2], dtype=">i4"), np.array(3.5), np.zeros((0, 4)), np.array([True, False]),
             np.arange(6.0).reshape(2, 3)]
    for arr in cases:
        want, got = hashlib.blake2b(digest_size=16), hashlib.blake2b(digest_size=16)
        want.update(np.ascontiguousarray(arr).tobytes())
        stats.hash_c_order(got, arr)
        assert got.hexdigest() == want.hexdigest(), arr


def test_fingerprint_does_not_depend_on_memory_order():
    X, y = make_classes(n=200, p=6, seed=4)
    s = ClassStats.from_rows(X, y)
    c = s.copy()
    c.within = np.ascontiguousarray(c.within)
    f = s.copy()
    f.within = np.asfortranarray(f.within)
    assert s.fingerprint() == c.fingerprint() == f.fingerprint()


# ------------------------------------------------- 64-bit integers beyond 2^53
def exact_offsets(stats, base):
    """``means + mean_residuals - base`` per class, each sum exact (as Fractions), as float64."""
    from fractions import Fraction

    return np.array([[float(Fraction(float(m)) + Fraction(float(r)) - int(b))
                      for m, r, b in zip(mk, rk, base, strict=True)]
                     for mk, rk in zip(stats.means, stats.mean_residuals, strict=True)])


WIDE = [(np.int64, 2**53), (np.int64, 2**60), (np.int64, 2**62), (np.int64, -(2**62)),
        (np.uint64, 2**64 - 2**20)]


@pytest.mark.parametrize("detail", ["pooled", "per_class", "fourth"])
@pytest.mark.parametrize(("dtype", "offset"), WIDE)
def test_wide_integers_are_summarised_exactly(dtype, offset, detail):
    # Rows were cast to float64 before the shift came off: at 2^60 every value was
    # rounded to 256 and a spread of 1,000 gave a within-class scatter 8.8e-3 off
    # (7.9e-2 at 2^62, 3.8e-5 at 2^53), silently.
    from conftest import two_pass

    X, y, exact = wide_integer_rows(offset, dtype)
    ref = two_pass(exact, y)
    for chunk_rows in (None, 377):  # (377 does not divide the 2,000 rows)
        got = sp.accumulate(X, y, detail=detail, chunk_rows=chunk_rows)
        assert rel_err(got.within, ref["within"]) < 1e-14
        if detail != "pooled":
            assert rel_err(got.class_scatter, ref["scatter"]) < 1e-14
        # the means, with their residuals, to a rounding of the spread
        np.testing.assert_allclose(exact_offsets(got, X[0]), ref["centred_means"],
                                   rtol=0, atol=1e-12 * 1000)
        # the same rows as small float64 give the same summary
        small = sp.accumulate(exact, y, detail=detail, chunk_rows=chunk_rows)
        assert rel_err(got.within, small.within) < 1e-14


def test_wide_integers_far_apart_and_narrow_are_summarised_exactly():
    # classes 10^15 apart (one shift per class), one class spread 1 wide beside 10^6
    from conftest import two_pass

    X, y, exact = wide_integer_rows(2**62, spread=1)
    X[y == 1] -= 10**15
    X[y == 2, 0] += (np.arange((y == 2).sum()) % 7) * 10**6
    exact = np.array((X.astype(object) - X[0].astype(object)).tolist(), dtype=np.float64)
    ref = two_pass(exact, y)
    for detail in ("pooled", "per_class"):
        got = sp.accumulate(X, y, detail=detail, chunk_rows=333)
        assert rel_err(got.within, ref["within"]) < 1e-14


def test_wide_integer_differences_are_rounded_once():
    from fractions import Fraction

    from streamproj.stats import subtract_rows

    rng = np.random.default_rng(5)
    for dtype, offset in WIDE:
        X = np.array((rng.integers(-10**6, 10**6, size=(50, 3)).astype(object) + offset).tolist(),
                     dtype=dtype)
        shift = X[7].astype(np.float64) + rng.normal(size=3) * 100
        want = np.array([[float(int(x) - Fraction(float(s)))
                          for x, s in zip(row, shift, strict=True)] for row in X])
        assert np.array_equal(subtract_rows(X, shift), want)
        out = np.empty((50, 3))
        assert np.array_equal(subtract_rows(X, np.broadcast_to(shift, (50, 3)).copy(), out=out), want)
        # a row shift held in ``out`` itself (pass 1's per-class shifts)
        out[:] = shift
        subtract_rows(X, out, out=out)
        assert np.array_equal(out, want)


@pytest.mark.parametrize("detail", ["pooled", "per_class", "fourth"])
def test_float_bool_and_narrow_integer_rows_keep_their_bits(monkeypatch, detail):
    # The exact integer path is taken for 64-bit integers beyond 2^53 only: every other
    # dtype's summary is bit for bit what the plain subtraction gave (update --verify
    # compares recorded summaries' bits).
    from streamproj import stats

    X, y = make_classes(n=1500, p=5, k=3, seed=8, offset=1e6, scale=10)
    bf16 = (X.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    cases = [(X, False), (X.astype(np.float32), False), ((X - 1e6).astype(np.float16), False),
             (X > 1e6, False), ((X * 100).astype(np.int32), False),
             ((X * 1000).astype(np.int64), False), ((X * 1000).astype(np.uint64), False),
             (bf16, True)]
    new = [sp.accumulate(A, y, detail=detail, chunk_rows=700, bfloat16=bf) for A, bf in cases]
    monkeypatch.setattr(stats, "_exact_integers", lambda dtype, shift: False)
    old = [sp.accumulate(A, y, detail=detail, chunk_rows=700, bfloat16=bf) for A, bf in cases]
    for a, b in zip(new, old, strict=True):
        assert a.fingerprint() == b.fingerprint()
        assert np.array_equal(a.mean_residuals, b.mean_residuals)
        if detail != "pooled":
            assert np.array_equal(a.class_scatter, b.class_scatter)
