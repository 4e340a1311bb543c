"""The two Dask passes (streamproj.passes), tested on their own.

Pass 1 (accumulate) must give the in-memory summary whatever the chunking and
merge tree, and name the first bad row of the whole array; pass 2
(project_blocks, store_projection) must give (X - c) @ Vᵀ chunk by chunk.
"""

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import make_classes

from streamproj import passes
from streamproj.errors import BadValuesError, InputError
from streamproj.passes import accumulate, project_blocks, store_projection
from streamproj.stats import ClassStats


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 1000])
@pytest.mark.parametrize("detail", ["pooled", "per_class", "fourth"])
def test_pass_one_matches_the_in_memory_summary_in_any_chunking(chunk_rows, detail):
    # 1-row chunks make a merge tree of several levels (fan-in 4)
    X, y = make_classes(n=90, p=3, k=3, seed=51)
    whole = ClassStats.from_rows(X, y, detail)
    got = accumulate(X, y, detail, chunk_rows=chunk_rows)
    assert got.detail == detail
    np.testing.assert_array_equal(got.counts, whole.counts)
    np.testing.assert_allclose(got.means, whole.means, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.within, whole.within, rtol=1e-10, atol=1e-10)


def test_pass_one_reads_dask_and_numpy_alike():
    X, y = make_classes(n=200, p=4, seed=52)
    lazy = accumulate(da.from_array(X, chunks=(33, 4)), da.from_array(y, chunks=33))
    eager = accumulate(X, y, chunk_rows=50)
    np.testing.assert_allclose(lazy.within, eager.within, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(lazy.counts, eager.counts)


def test_pass_one_names_the_first_bad_row_of_the_whole_array():
    X, y = make_classes(n=100, p=3, seed=53)
    X[87, 1] = np.inf
    X[23, 0] = np.nan  # an earlier chunk: reported first whichever chunk fails first
    with pytest.raises(BadValuesError, match=r"rows has a non-finite value \(nan\) in row 1023"):
        accumulate(X, y, chunk_rows=10, row_offset=1000, names=("rows", "labels"))


@pytest.fixture(params=["tree", "fold"])
def merge_order(request, monkeypatch):
    """Both of pass 1's merge orders: the tree, and the row-order fold wide summaries take."""
    if request.param == "fold":
        monkeypatch.setattr(passes, "_WIDE_SUMMARY_BYTES", 0)
    return request.param


@pytest.mark.parametrize("chunk_rows", [1, 13, 1000])
def test_pass_one_folded_matches_the_in_memory_summary(chunk_rows, monkeypatch):
    monkeypatch.setattr(passes, "_WIDE_SUMMARY_BYTES", 0)
    X, y = make_classes(n=90, p=3, k=3, seed=58)
    whole = ClassStats.from_rows(X + 1e5, y)
    got = accumulate(X + 1e5, y, chunk_rows=chunk_rows)
    np.testing.assert_array_equal(got.counts, whole.counts)
    np.testing.assert_allclose(got.deviations(whole.mean), whole.deviations(whole.mean), atol=1e-9)
    np.testing.assert_allclose(got.within, whole.within, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_pass_one_names_the_first_bad_row_whichever_thread_fails_first(workers, merge_order):
    # chunks run on several threads: a chunk that fails later in time may hold the earlier row
    X, y = make_classes(n=100, p=3, seed=54)
    X[25, 2] = np.inf  # chunk 2
    X[15, 1] = np.nan  # chunk 1
    X[91, 0] = np.nan  # chunk 9
    with (dask.config.set(num_workers=workers),
          pytest.raises(BadValuesError, match=r"non-finite value \(nan\) in row 15")):
        accumulate(X, y, chunk_rows=10)


@pytest.mark.parametrize("detail", ["pooled", "per_class"])
def test_pass_one_is_bit_for_bit_the_same_on_any_number_of_threads(detail, merge_order):
    # `verify` re-reads merged rows and compares their summary's fingerprint bit for bit:
    # pass 1 may not depend on which thread finished first, nor on how many there are
    X, y = make_classes(n=3000, p=40, k=3, seed=57)
    X += 1e4
    prints = set()
    for workers in (1, 2, 3, 8, 2, 3):
        with dask.config.set(num_workers=workers):
            prints.add(accumulate(X, y, detail, chunk_rows=97).fingerprint())
    assert len(prints) == 1


@pytest.mark.parametrize("detail", ["pooled", "per_class"])
def test_pass_one_merge_order_does_not_depend_on_the_classes_expected(detail, monkeypatch):
    # fit and --verify expect no classes, update the model's: the same rows must give the
    # same bits (a threshold between the 2- and 3-class summary sizes at p = 40 made the
    # choice of tree or fold depend on the expected classes; found in review)
    X, y = make_classes(n=120, p=40, k=3, seed=60)
    two, three = (passes.summary_nbytes(40, k, detail) for k in (2, 3))
    monkeypatch.setattr(passes, "_WIDE_SUMMARY_BYTES", (two + three) // 2)
    prints = {accumulate(X, y, detail, chunk_rows=10, n_classes=k).fingerprint()
              for k in (None, 2, 3, 50)}
    assert len(prints) == 1


def test_pass_one_refuses_no_rows_and_mismatched_labels():
    with pytest.raises(InputError, match="X has no rows"):
        accumulate(np.zeros((0, 3)), np.zeros(0, dtype=int))
    with pytest.raises(InputError, match="y has 4 labels but X has 5 rows"):
        accumulate(np.zeros((5, 3)), np.zeros(4, dtype=int))


def test_pass_two_is_the_centred_product_chunk_by_chunk():
    rng = np.random.default_rng(54)
    X = rng.normal(size=(57, 4)).astype(np.float32)
    center, components = rng.normal(size=4), np.linalg.qr(rng.normal(size=(4, 2)))[0].T
    lazy = project_blocks(da.from_array(X, chunks=(10, 4)), center, components)
    assert lazy.chunks == ((10,) * 5 + (7,), (2,))
    expected = (X.astype(np.float64) - center) @ components.T
    np.testing.assert_allclose(lazy.compute(), expected, rtol=1e-12, atol=1e-12)


def test_pass_two_names_a_bad_row_and_a_feature_mismatch():
    X = np.ones((30, 3))
    X[17, 2] = np.nan
    lazy = project_blocks(da.from_array(X, chunks=(8, 3)), np.zeros(3), np.eye(3)[:2],
                          name="in.zarr/X", row_offset=100)
    with pytest.raises(BadValuesError, match=r"in.zarr/X has a non-finite value \(nan\) in row 117"):
        lazy.compute()
    with pytest.raises(InputError, match="X has 3 features but the model was fitted on 4"):
        project_blocks(da.from_array(X, chunks=(8, 3)), np.zeros(4), np.eye(4)[:2])


def test_store_projection_writes_every_chunk(tmp_path):
    X = np.arange(40.0).reshape(20, 2)
    target = zarr.open_array(str(tmp_path / "p.zarr"), mode="w", shape=(20, 1), chunks=(6, 1),
                             dtype="float64")
    lazy = project_blocks(da.from_array(X, chunks=(6, 2)), np.zeros(2), np.array([[1.0, 1.0]]))
    store_projection([lazy], [target])
    np.testing.assert_array_equal(target[:], X.sum(axis=1, keepdims=True))
