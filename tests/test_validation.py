"""The input checks shared by every entry point (streamproj/validation.py)."""

import numpy as np
import pytest

from streamproj.errors import IncompatibleStatsError, InputError
from streamproj.validation import check_n_features, check_not_sparse, plain_labels


def test_feature_count_message_names_rows_model_and_both_counts():
    check_n_features(5, 5)
    with pytest.raises(InputError, match=r"^X has 4 features but the model was fitted on 3$"):
        check_n_features(4, 3)
    with pytest.raises(IncompatibleStatsError,
                       match=r"^b\.zarr/X has 2 features but model m was fitted on 6$"):
        check_n_features(np.int64(2), 6, name="b.zarr/X", fitted="model m",
                         error=IncompatibleStatsError)


def test_sparse_rows_are_one_clear_error():
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(InputError, match="X is sparse .*TruncatedSVD"):
        check_not_sparse(sparse.csr_matrix(np.eye(3)))
    check_not_sparse(np.eye(3))


def test_plain_labels_keep_ints_and_name_the_first_missing_row():
    assert plain_labels(np.array([3, 1, 2])).dtype.kind == "i"
    with pytest.raises(InputError, match="row 12"):
        plain_labels(np.array(["a", None, "b"], dtype=object), row_offset=11)


def test_integer_labels_beyond_int64_keep_every_class():
    # numpy typed the ints [5, 2**63, 2**63 + 1] (an object array, or a list) float64: the
    # estimator's labels merged 2**63 + 1 into 2**63, silently (three classes fitted as two)
    from streamproj.validation import as_labels

    values = [5, 2**63, 2**63 + 1]
    for labels in (np.array(values * 2, dtype=object), values * 2):
        out = as_labels(labels)
        assert out.dtype == np.uint64
        assert out.tolist() == values * 2
    with pytest.raises(InputError, match="no 64-bit integer type holds together"):
        as_labels(np.array([-1, 2**63], dtype=object))
    assert as_labels([1.0, 2.0]).tolist() == [1.0, 2.0]
