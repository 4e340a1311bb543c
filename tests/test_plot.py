import re

import matplotlib.image as mpimg
import numpy as np
import pytest
from conftest import make_classes, make_coin, write_zarr

import streamproj as sp
from streamproj import jobs, solvers
from streamproj.cli import main
from streamproj.plot import class_histograms, plot_output


class CountingArray:
    """An array-like that records the largest block of rows anyone reads from it."""

    def __init__(self, data, chunk_rows):
        self.data = data
        self.shape, self.dtype, self.ndim = data.shape, data.dtype, data.ndim
        self.chunks = (chunk_rows, *data.shape[1:])
        self.largest_read = 0

    def __getitem__(self, key):
        out = self.data[key]
        self.largest_read = max(self.largest_read, out.shape[0])
        return out


def test_histograms_read_one_chunk_at_a_time_and_count_every_row():
    rng = np.random.default_rng(0)
    coords = rng.normal(size=(50_000, 3))
    labels = rng.integers(0, 3, size=50_000)
    c, y = CountingArray(coords, 1000), CountingArray(labels, 1000)
    limits = ((-5.0, 5.0), (-5.0, 5.0))
    hist, xe, ye = class_histograms(c, y, np.array([0, 1, 2]), bins=40, limits=limits)
    assert c.largest_read <= 1000 and y.largest_read <= 1000
    for k in range(3):
        ref = np.histogram2d(coords[labels == k, 0], coords[labels == k, 1], bins=(xe, ye))[0]
        np.testing.assert_array_equal(hist[k], ref)


def test_pca_axes_are_the_top_eigenvectors_of_the_total_scatter():
    X, y = make_coin(n=3000, p=7)
    stats = sp.accumulate(X, y)
    axes = solvers.pca_axes(stats.total)
    _, _, vt = np.linalg.svd(X - X.mean(0), full_matrices=False)
    for i in range(2):
        assert abs(abs(axes[i] @ vt[i]) - 1) < 1e-10


@pytest.fixture
def projected(tmp_path):
    X, y = make_coin(n=4000)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=500)
    main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m"), "--keep-class-scatter"])
    main(["project", str(tmp_path / "m"), str(tmp_path / "d.zarr"), "--output", str(tmp_path / "o.zarr")])
    return tmp_path


@pytest.mark.parametrize("points", [100_000, 100])  # points, then the density path
def test_plot_writes_a_png_of_the_requested_size(projected, points, capsys):
    d = projected
    fig = d / f"fig-{points}.png"
    assert main(["plot", str(d / "o.zarr"), "--output", str(fig), "--model", str(d / "m"),
                 "--compare-pca", "--qda", "--size", "900x500", "--points", str(points)]) == 0
    assert mpimg.imread(fig).shape[:2] == (500, 900)
    assert main(["plot", str(d / "o.zarr"), "--output", str(d / "single.png")]) == 0
    assert mpimg.imread(d / "single.png").shape[:2] == (650, 800)


def test_plot_many_classes_and_errors(tmp_path, capsys):
    X, y = make_classes(n=3000, p=5, k=4, seed=3)
    m = sp.BoundaryProjector().fit(X, y)
    jobs.project(m, X, tmp_path / "o.zarr", y=y)
    plot_output(tmp_path / "o.zarr", tmp_path / "f.png", point_limit=10)
    assert mpimg.imread(tmp_path / "f.png").shape[:2] == (650, 800)
    code = main(["plot", str(tmp_path / "o.zarr"), "--output", str(tmp_path / "g.png"), "--compare-pca"])
    err = capsys.readouterr().err
    assert code == 2 and "need the model: pass --model" in err
    code = main(["plot", str(tmp_path / "nothing.zarr"), "--output", str(tmp_path / "g.png")])
    assert code == 2 and "no such input" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_end_to_end(tmp_path, capsys):
    assert main(["demo", str(tmp_path / "demo"), "--rows", "30000", "--chunk-rows", "7000"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"agrees with classifier 100\.00% of rows", out), out
    for name in ("data.zarr", "model", "coords.zarr", "demo.png"):
        assert (tmp_path / "demo" / name).exists()
    assert mpimg.imread(tmp_path / "demo" / "demo.png").shape[:2] == (650, 1400)
    assert main(["demo", str(tmp_path / "demo"), "--rows", "30000"]) == 0  # reruns in place
