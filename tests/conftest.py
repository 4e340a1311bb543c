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


@pytest.fixture
def two_class():
    return make_classes(n=900, p=6, k=2, seed=3)


@pytest.fixture
def coin():
    return make_coin()
