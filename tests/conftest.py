"""Shared test data: small, seeded, and shaped to stress the numerics."""

import numpy as np
import pytest
import zarr


def make_classes(n=600, p=5, k=2, seed=0, offset=0.0, scale=1.0, dtype=np.float64, spread=1.5):
    """Gaussian classes with distinct means and a shared, correlated covariance."""
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(p, p)) / np.sqrt(p) + np.eye(p)
    centres = rng.normal(scale=spread, size=(k, p))
    y = rng.integers(0, k, size=n)
    y[:k] = np.arange(k)  # every class present
    X = (rng.normal(size=(n, p)) @ mix + centres[y]) * scale + offset
    return X.astype(dtype), y


def coin_with_rows_at_centre(rows=300):
    """A model of the coin, and its rows plus ``rows`` of class 0 exactly at the centre (z[0] = 0).

    Returns ``(model, X, y)``; the rows at the centre are the classifier's class 0.
    """
    import streamproj as sp

    X, y = make_coin(n=3000)
    m = sp.BoundaryProjector().fit(X, y)
    X = np.vstack([X, np.repeat(m.center_[None], rows, axis=0)])
    y = np.concatenate([y, np.zeros(rows, int)])
    z0 = m.transform(X)[:, 0]
    assert np.count_nonzero(z0 == 0) == rows
    return m, X, y


def make_coin(n=2000, p=6, seed=0, offset=3.0):
    """The seed's coin: a flat Gaussian disk, classes on either face, thin axis = normal."""
    rng = np.random.default_rng(seed)
    scales = np.full(p, 3.0)
    scales[0] = 0.3
    Z = rng.normal(size=(n, p)) * scales
    y = (Z[:, 0] + rng.normal(scale=0.1, size=n) > 0).astype(int)
    rot, _ = np.linalg.qr(rng.normal(size=(p, p)))
    return Z @ rot.T + offset, y


def write_zarr(path, X, y=None, chunk_rows=100, x_name="X", y_name="y"):
    group = zarr.open_group(str(path), mode="w")
    group.create_array(x_name, data=np.asarray(X), chunks=(chunk_rows, X.shape[1]))
    if y is not None:
        group.create_array(y_name, data=np.asarray(y), chunks=(chunk_rows,))
    return group


def write_days(folder, X, y, days, chunk_rows, rows=300):
    """``day-0.zarr`` … in ``folder``: consecutive blocks of ``rows`` rows of X and y."""
    for i in range(days):
        write_zarr(folder / f"day-{i}.zarr", X[i * rows:(i + 1) * rows], y[i * rows:(i + 1) * rows],
                   chunk_rows=chunk_rows)
    return folder, X, y


@pytest.fixture
def two_class():
    return make_classes(n=900, p=6, k=2, seed=3)


@pytest.fixture
def coin():
    return make_coin()


# ------------------------------------------------------- exact references
def two_pass(X, y):
    """Exact float64 two-pass summaries of rows in memory, the reference for every summary test.

    Rows are first shifted by one data row (exact for float32/int input, and
    it keeps the means' digits far from zero); each class is centred on its
    mean and then again on the mean of the residuals (the second pass).

    Returns a dict: classes, counts, means (K, p), within (p, p), scatter
    (K, p, p), mean (p,), total (p, p), shift (p,) and centred (X - shift).
    """
    X = np.asarray(X)
    shift = X[0].astype(np.float64)
    D = X.astype(np.float64) - shift
    classes = np.unique(y)
    means, scatter, counts = [], [], []
    for k in classes:
        rows = D[y == k]
        mu = rows.mean(axis=0)
        d = rows - mu
        correction = d.mean(axis=0)
        d -= correction
        means.append(mu + correction)
        scatter.append(d.T @ d)
        counts.append(rows.shape[0])
    means = np.asarray(means)
    counts = np.asarray(counts)
    mean = counts @ means / counts.sum()
    dev = means - mean
    within = np.sum(scatter, axis=0)
    return {
        "classes": classes,
        "counts": counts,
        "means": means + shift,
        "centred_means": means,
        "within": within,
        "scatter": np.asarray(scatter),
        "mean": mean + shift,
        "total": within + (dev * counts[:, None]).T @ dev,
        "shift": shift,
        "centred": D,
    }


def reference_lda(X, y, **kwargs):
    """scikit-learn's LDA (solver="eigen") on the rows shifted by one data row (exact in float64).

    Returns the fitted model and the shift; predict with ``ref.predict(X - shift)``.
    """
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    shift = np.asarray(X[0], dtype=np.float64)
    ref = LinearDiscriminantAnalysis(solver="eigen", **kwargs)
    return ref.fit(np.asarray(X, dtype=np.float64) - shift, y), shift


def rel_err(a, b):
    """Largest absolute difference relative to the largest entry of the reference."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def sin_angle(A, B):
    """Sine of the largest principal angle between the column spans of A and B."""
    from scipy.linalg import subspace_angles

    return float(np.sin(np.max(subspace_angles(np.atleast_2d(A), np.atleast_2d(B)))))


def offset_classes(n, p, k, offset, seed=0, separation=1.0, dtype=np.float64):
    """Classes a few spreads apart, all far from zero (at ``offset``), with a correlated spread."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    y[:k] = np.arange(k)
    mix = np.eye(p) + 0.3 * rng.normal(size=(p, p)) / np.sqrt(p)
    centres = separation * rng.normal(size=(k, p))
    Z = rng.normal(size=(n, p)) @ mix + centres[y]
    return (offset + Z).astype(dtype), y


def wide_integer_rows(offset, dtype=np.int64, n=2000, p=4, k=3, seed=0, spread=1000):
    """Integer rows a ``spread`` wide around ``offset`` (nanosecond timestamps, ids), classes apart.

    Returns X, y and the exact rows less X[0], as float64 (small integers: exact).
    """
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    mix = np.eye(p) + 0.3 * rng.normal(size=(p, p))
    Z = (rng.normal(size=(n, p)) @ mix * spread + y[:, None] * spread / 2).astype(np.int64)
    X = np.array((Z.astype(object) + offset).tolist(), dtype=dtype)
    exact = np.array((X.astype(object) - X[0].astype(object)).tolist(), dtype=np.float64)
    return X, y, exact


def exact_minus(X, center):
    """``X - center`` for integer rows and a float64 centre, each difference rounded once."""
    from fractions import Fraction

    c = [Fraction(float(v)) for v in center]
    return np.array([[float(int(x) - v) for x, v in zip(row, c, strict=True)] for row in X.tolist()])


def run_cli(*argv):
    """``streamproj ARGV`` in this process; returns the exit status (argparse's too)."""
    from streamproj.cli import main

    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's usage errors
        return exc.code


def one_error_line(capsys):
    """The single ``streamproj: error: …`` line on stderr (fails on a traceback or two lines)."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("streamproj: error: ")
    return err[0]


def on_row_reads(monkeypatch, n_features, record):
    """Call ``record(where, rows)`` for each read of a 2-D array of ``n_features`` columns.

    Reads by zarr and by :mod:`streamproj.direct` alike (the commands read through
    both), in any thread; ``where`` is the array's ``file://`` location and ``rows``
    the selection's row slice (dask's empty probes for its meta are left out).
    """
    from streamproj import direct

    original, original_direct = zarr.Array.__getitem__, direct._Layout.read

    def seen(where, shape, selection):
        rows = selection[0] if isinstance(selection, tuple) else selection
        if len(shape) == 2 and shape[1] == n_features and not (
                isinstance(rows, slice) and rows.start == rows.stop):
            record(where, rows)

    def by_zarr(self, selection):
        seen(str(self.store_path), self.shape, selection)
        return original(self, selection)

    def by_direct(self, key):
        got = original_direct(self, key)
        if got is not None:  # (else zarr reads it, and it is seen there)
            seen("file://" + self.root, self.shape, key)
        return got

    monkeypatch.setattr(zarr.Array, "__getitem__", by_zarr)
    monkeypatch.setattr(direct._Layout, "read", by_direct)

