import re
import warnings

import dask.array as da
import matplotlib.image as mpimg
import matplotlib.text
import numpy as np
import pandas as pd
import pytest
import zarr
from conftest import coin_with_rows_at_centre, make_classes, make_coin, one_error_line, write_zarr

import streamproj as sp
from streamproj import jobs, solvers
from streamproj.cli import main
from streamproj.errors import InputError
from streamproj.plot import coordinates, draw_output, plot_output, plot_projection
from streamproj.plot.figure import PALETTE, shade
from streamproj.plot.picture import _far_rows, _tie_segments
from streamproj.plot.reading import (
    READ_BYTES,
    Blocks,
    ClassMap,
    class_spread_limits,
    class_spread_limits_each,
    robust_limits,
    robust_limits_each,
    spread_limits,
    stream,
)
from streamproj.plot.summary import PictureSummary


class CountingArray:
    """An array-like that records the largest block of rows anyone reads from it."""

    def __init__(self, data, chunk_rows):
        self.data = data
        self.shape, self.dtype, self.ndim = data.shape, data.dtype, data.ndim
        self.chunks = (chunk_rows, *data.shape[1:])
        self.largest_read = 0
        self.reads = 0

    def __getitem__(self, key):
        out = self.data[key]
        self.reads += 1
        self.largest_read = max(self.largest_read, out.shape[0])
        return out


def rgb(hex_color):
    return np.array([int(hex_color[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


def test_one_pass_counts_every_row_reading_whole_chunks_in_bounded_runs():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50_000, 3))
    labels = rng.integers(0, 3, size=50_000)
    zc, yc = CountingArray(z, 1000), CountingArray(labels, 1000)
    limits = np.array([[-3.0, 3.0], [-2.0, 2.5], [-4.0, 4.0]])
    cm = ClassMap(np.array([0, 1, 2]))
    s = PictureSummary(cm, limits, [(0, 1), (0, 2)], {(0, 1): (30, 20), (0, 2): (30, 40)},
                       margin_bins=50, binary=None)
    stream(Blocks({"z": zc, "label": yc}), s.add)
    row_bytes = 3 * 8 + 8
    # runs of whole chunks, at most READ_BYTES of rows per run: memory flat in n
    assert zc.largest_read % 1000 == 0
    assert zc.largest_read * row_bytes <= READ_BYTES
    assert zc.reads == yc.reads < 50  # several chunks per Zarr call, not one call per chunk
    small = CountingArray(z, 1000)
    stream(Blocks({"z": small, "label": yc}), lambda b, s: None, workers=2)
    assert small.largest_read * row_bytes <= READ_BYTES
    runs = Blocks({"z": z, "label": labels}, block_rows=1000).groups(range(50), target_bytes=4000 * 32)
    assert runs == [list(range(k, k + 4)) for k in range(0, 48, 4)] + [[48, 49]]
    for (i, j), bins in [((0, 1), (30, 20)), ((0, 2), (30, 40))]:
        xe = np.linspace(*limits[i], bins[0] + 1)
        ye = np.linspace(*limits[j], bins[1] + 1)
        inside = ((z[:, i] >= limits[i, 0]) & (z[:, i] < limits[i, 1])
                  & (z[:, j] >= limits[j, 0]) & (z[:, j] < limits[j, 1]))
        for k in range(3):
            sel = (labels == k) & inside
            ref = np.histogram2d(z[sel, i], z[sel, j], bins=(xe, ye))[0]
            np.testing.assert_array_equal(s.grids[(i, j)][k], ref)
        assert s.outside[(i, j)] == np.count_nonzero(~inside)
    np.testing.assert_array_equal(s.rows[:3], np.bincount(labels))


def test_a_local_output_is_read_one_whole_chunk_a_read_by_streamprojs_reader(tmp_path,
                                                                              monkeypatch):
    # zarr's default layout, opened as the pictures open it: each block is one chunk,
    # decoded by streamproj.direct (zarr's read of a run of chunks copies each one), and
    # the rows are the same; a ragged last chunk too
    from streamproj import direct, store

    rng = np.random.default_rng(3)
    z, labels = rng.normal(size=(10_500, 2)), rng.integers(0, 3, size=10_500).astype(np.int8)
    group = zarr.open_group(str(tmp_path / "o.zarr"), mode="w")
    group.create_array("projection", data=z, chunks=(1000, 2))
    group.create_array("y", data=labels, chunks=(1000,))
    arrays = {"z": store.CheckedArray(group["projection"], "projection"),
              "label": store.CheckedArray(group["y"], "y")}
    zarr_reads, direct_reads = [], []
    real_zarr, real_direct = zarr.Array.__getitem__, direct._Layout.read
    monkeypatch.setattr(zarr.Array, "__getitem__",
                        lambda self, key: zarr_reads.append(key) or real_zarr(self, key))
    monkeypatch.setattr(direct._Layout, "read",
                        lambda self, key: direct_reads.append(key) or real_direct(self, key))
    blocks = Blocks(arrays)
    assert blocks.groups(range(len(blocks))) == [[i] for i in range(11)]
    got = {}
    stream(blocks, lambda b, s: got.__setitem__(s, (b["z"].copy(), b["label"].copy())))
    assert zarr_reads == []
    assert len(direct_reads) == 22
    np.testing.assert_array_equal(np.concatenate([got[s][0] for s in sorted(got)]), z)
    np.testing.assert_array_equal(np.concatenate([got[s][1] for s in sorted(got)]), labels)
    # blocks that are not the arrays' chunks are read in runs, by zarr, as before
    assert Blocks(arrays, block_rows=500).groups(range(21))[0] != [0]


def test_summary_counts_non_finite_and_far_rows_outside_and_each_side_of_the_boundary():
    rng = np.random.default_rng(7)
    z = rng.normal(size=(6000, 2))
    z[:40, 0] = [np.nan, np.inf, -np.inf, 1e300, -1e300, 0.0, -0.0, 3.0] * 5  # 3.0: the top edge
    z[40:60, 1] = np.nan
    labels = rng.integers(0, 2, size=6000).astype(np.int8)
    limits = np.array([[-3.0, 3.0], [-2.0, 2.5]])
    s = PictureSummary(ClassMap(np.array([0, 1])), limits, [(0, 1)], {(0, 1): (12, 9)},
                       margin_bins=24, binary=(0, 1))
    for start in range(0, 6000, 1000):
        s.add({"z": z[start : start + 1000], "label": labels[start : start + 1000]})
    x, y = z[:, 0], z[:, 1]
    inside = (x >= -3) & (x < 3) & (y >= -2) & (y < 2.5)
    # histograms' cells, but z[0] = 0 (and -0) in the cell left of the boundary: the
    # classifier's "z[0] <= 0" side
    xs = np.where(x == 0, -1e-9, x)
    for k in range(2):
        sel = labels == k
        ref = np.histogram2d(xs[sel & inside], y[sel & inside],
                             bins=(np.linspace(-3, 3, 13), np.linspace(-2, 2.5, 10)))[0]
        np.testing.assert_array_equal(s.grids[(0, 1)][k], ref)
        in_margin = sel & (x >= -3) & (x < 3)
        np.testing.assert_array_equal(s.margin[k], np.histogram(xs[in_margin], np.linspace(-3, 3, 25))[0])
    assert s.outside[(0, 1)] == np.count_nonzero(~inside)
    np.testing.assert_array_equal(s.rows[:2], np.bincount(labels))
    # the wrong side: class 0 with z[0] > 0, class 1 with z[0] <= 0; a NaN z[0] is on neither
    # side (it was counted on class 0's, so class 1's NaN rows were "on the wrong side")
    assert s.wrong[0] == np.count_nonzero((labels == 0) & (x > 0))
    assert s.wrong[1] == np.count_nonzero((labels == 1) & (x <= 0))
    np.testing.assert_array_equal(s.extremes, [[-np.inf, np.inf], [np.nanmin(y), np.nanmax(y)]])
    # blocks wholly inside the limits (their cells found without clipping), edges included:
    # a row at the upper limit is outside, as histogram2d's half-open cells have it
    inner = np.clip(rng.normal(size=(3000, 2)), [-3.0, -2.0], [3.0, 2.5])
    inner[:3] = [[-3.0, -2.0], [3.0, 0.0], [0.0, 2.5]]
    s = PictureSummary(ClassMap(np.array([0, 1])), limits, [(0, 1)], {(0, 1): (12, 9)},
                       margin_bins=24)
    s.add({"z": inner, "label": np.zeros(3000, dtype=np.int8)})
    inside = (inner[:, 0] < 3) & (inner[:, 1] < 2.5)
    ref = np.histogram2d(inner[inside, 0], inner[inside, 1],
                         bins=(np.linspace(-3, 3, 13), np.linspace(-2, 2.5, 10)))[0]
    np.testing.assert_array_equal(s.grids[(0, 1)][0], ref)
    assert s.outside[(0, 1)] == np.count_nonzero(~inside)


@pytest.mark.parametrize(("limits", "x"), [
    # a subnormal span: bins / span is infinite
    ([[0.0, 2e-323], [-1.0, 1.0]], [0.0, 5e-324, 1e-323, 1e-323, 1.5e-323, 2e-323, 0.0]),
    # a span past the largest float: bins / span is 0
    ([[-1e308, 1e308], [-1.0, 1.0]], [-1e308, -1e307, 0.0, 1.0, 5e307, 1e308, 9e307]),
])
def test_a_block_inside_degenerate_limits_is_counted_as_cell_keys_counts_it(limits, x):
    # the inside fast path skipped the clipping that sends NaN (0 * inf, inf * 0) to the
    # border: its keys were -2**63 + ... (an IndexError, or a wrong cell once wrapped)
    from streamproj.plot.summary import cell_keys

    limits, x = np.array(limits), np.array(x)
    y = np.linspace(-1.0, 1.0, 7)
    z, labels = np.column_stack([x, y]), np.array([0, 1, 0, 1, 0, 1, 0], dtype=np.int8)
    s = PictureSummary(ClassMap(np.array([0, 1])), limits, [(0, 1)], {(0, 1): (4, 6)},
                       margin_bins=8)
    with np.errstate(over="ignore", invalid="ignore"):
        s.add({"z": z, "label": labels})
        keys = cell_keys(x, y, labels, limits, (4, 6))
    want = np.bincount(keys, minlength=s._padded[(0, 1)].size).reshape(s._padded[(0, 1)].shape)
    inner = want[:, 1:-1, 1:-1]  # (the border's side of a NaN cell aside)
    np.testing.assert_array_equal(s.grids[(0, 1)], inner)
    assert s.outside[(0, 1)] == 7 - inner.sum()


def test_an_array_shared_by_two_names_is_read_once_per_block():
    labels = CountingArray(np.arange(5000) % 3, 1000)
    z = np.zeros((5000, 2))
    blocks = Blocks({"z": z, "y": labels, "label": labels}, block_rows=1000)
    got = blocks.read(2)
    assert labels.reads == 1
    np.testing.assert_array_equal(got["y"], np.arange(2000, 3000) % 3)
    assert got["label"] is got["y"]
    lazy = Blocks({"z": da.from_array(z, chunks=1000), "y": labels, "label": labels})
    assert lazy.arrays["y"] is lazy.arrays["label"]


def test_class_map_byte_labels_match_the_general_lookup():
    rng = np.random.default_rng(4)
    cm = ClassMap(np.array([-3, 0, 2, 9, 40]), counts=[1, 9, 8, 7, 2], top=3)
    for dtype in (np.int8, np.uint8, np.int16, np.uint16):
        info = np.iinfo(dtype)
        labels = rng.integers(info.min, info.max, size=3000, endpoint=True).astype(dtype)
        labels[:1000] = rng.choice(np.array([0, 2, 9, 40]), 1000).astype(dtype)
        np.testing.assert_array_equal(cm.index(labels), cm.index(labels.astype(np.int64)))
    assert cm.index(np.array([-3, 0, 2, 9, 40, 41], np.int8)).tolist() == [3, 0, 1, 2, 3, 3]


def test_class_map_top_classes_and_other():
    classes = np.array(["a", "b", "c", "d"])
    cm = ClassMap(classes, counts=[5, 50, 1, 20], top=2)
    assert cm.names == ["b", "d", "other"]
    np.testing.assert_array_equal(cm.index(np.array(["a", "b", "c", "d", "zz"])), [2, 0, 2, 1, 2])
    assert ClassMap(np.array([0, 1])).index(np.array([1, 0, 7])).tolist() == [1, 0, 2]


def test_robust_limits_ignore_outliers():
    rng = np.random.default_rng(1)
    v = rng.normal(size=(100_000, 2))
    v[:20] = 1e6  # 0.02 % wild rows
    lim = robust_limits(v, tail=0.001, pad=0.05)
    assert np.all(lim[:, 0] > -4)
    assert np.all(lim[:, 1] < 4)
    assert np.all(lim[:, 0] < -3)
    assert np.all(lim[:, 1] > 3)
    v[20:40, 1] = np.nan  # rows with a NaN are left out of the sample
    both = robust_limits_each(v, [(1e-4, 0.2), (0.001, 0.05)])
    np.testing.assert_array_equal(both[0], robust_limits(v, tail=1e-4, pad=0.2))
    np.testing.assert_array_equal(both[1], robust_limits(v))
    assert np.isfinite(both[1]).all()


def test_spread_limits_keep_a_gaussians_tails_and_ignore_a_few_far_rows():
    rng = np.random.default_rng(2)
    v = rng.normal(size=(100_000, 2))
    lim = spread_limits(v)
    # the whole sample (0.1-99.9 % quantiles padded 5 % cut it flat at about ±3.4σ)
    assert np.all(lim[:, 0] < v.min(axis=0))
    assert np.all(lim[:, 1] > v.max(axis=0))
    far = v.copy()
    far[:500, 0] = 1e3 * rng.normal(size=500)  # 0.5 % gross outliers on both sides
    far[500:900, 1] = 200.0  # 0.4 % on one side
    lim = spread_limits(far)
    assert np.all(np.abs(lim) < 6), lim  # about ±4.3σ: the bulk fills the panel
    assert np.all(lim[:, 0] < -3.5)
    assert np.all(lim[:, 1] > 3.5)
    u = rng.random((10_000, 1))  # a uniform column fills the panel, padded 5 %
    np.testing.assert_allclose(spread_limits(u)[0], [-0.05, 1.05], atol=2e-3)
    assert np.isfinite(spread_limits(np.vstack([v, [[np.nan, np.inf]]]))).all()


def test_data_in_tiny_units_fill_the_picture_not_one_cell_of_it():
    # a spread of 2e-13 was "flat" against 1 (limits ±0.05: one cell, magnified 5e10x)
    X, y = make_coin(n=3000)
    m = sp.BoundaryProjector().fit(X * 1e-13, y)
    z = m.transform(X * 1e-13)
    fig = plot_projection(m, X * 1e-13, y)
    lim = fig.streamproj_summary.limits
    spans = lim[:, 1] - lim[:, 0]
    assert np.all(spans < 2 * np.ptp(z, axis=0)), spans
    assert fig.streamproj_summary.outside[(0, 1)] < 10
    assert max(k for _, k in fig.streamproj_magnify.values()) < 100
    view = sp.plot.view_projection(m, X * 1e-13, y)
    assert np.all(np.diff(view.pyramid.extent, axis=1)[:, 0] < 10 * np.ptp(z, axis=0))
    # flat columns still get a span: their size, or 1 at 0
    np.testing.assert_allclose(spread_limits(np.array([[3e-13, 0.0]] * 5)),
                               [[2.85e-13, 3.15e-13], [-0.05, 0.05]])


@pytest.mark.parametrize("scale", [1e-306, 1e-315])
def test_data_spread_past_a_cells_reach_are_drawn_like_a_flat_column(scale):
    # a spread of 1e-306 (or subnormal) is not flat against the values' size, but its cells
    # (span / bins) and densities (1 / width) overflow: the picture raised (infinite axis
    # limits) or indexed a cell at -2**63, where limits of ±0.05 had drawn it
    from streamproj.plot.picture import Source, draw_source

    rng = np.random.default_rng(3)
    label = rng.integers(0, 2, size=4000)
    z = (rng.normal(size=(4000, 2)) + np.array([[-2.0, 0.0], [2.0, 0.0]])[label]) * scale
    source = Source(Blocks({"z": z, "label": label}, block_rows=1000), np.arange(2), np.eye(2),
                    np.zeros(2), np.eye(2), np.zeros(2), ["z0", "z1"], "tiny", "model", "y")
    s = draw_source(source).streamproj_summary
    assert np.isfinite(s.limits).all()
    assert s.outside[(0, 1)] == 0
    np.testing.assert_array_equal(s.rows[:2], np.bincount(label))


def _class_spread_alone(values, labels, reach, pad, min_rows=20):
    """class_spread_limits as it was written first, one spec at a time."""
    lim = spread_limits(values, reach=reach, pad=pad)
    columns = values.T
    out = ((columns < lim[:, :1]) | (columns > lim[:, 1:])).any(axis=0)
    for cls in np.unique(labels[out]):
        rows = values[labels == cls]
        if rows.shape[0] >= min_rows:
            own = spread_limits(rows, reach=reach, pad=pad)
            lim[:, 0] = np.minimum(lim[:, 0], own[:, 0])
            lim[:, 1] = np.maximum(lim[:, 1], own[:, 1])
    return lim


@pytest.mark.parametrize("labels_as", [int, str])
def test_class_spread_limits_for_several_specs_at_once_are_each_as_if_alone(labels_as):
    # the view asks for its wide extent and its first view from one look at the sample
    rng = np.random.default_rng(5)
    v = rng.normal(size=(60_000, 2))
    y = rng.integers(0, 3, size=60_000)
    v[y == 2] += [9.0, 0.0]  # a class at one end: beyond the narrow limits, not the wide ones
    y[:300], v[:300] = 3, rng.normal(size=(300, 2)) * 0.3 + [0.0, -40.0]  # beyond both
    y[300:310], v[300:310] = 4, [60.0, 60.0]  # too few rows to widen anything
    v[310:330, 1] = np.nan
    labels = y.astype(labels_as)
    specs = [(2.0, 0.2), (0.5, 0.05), (0.1, 0.0)]
    got = class_spread_limits_each(v, labels, specs)
    for lim, (reach, pad) in zip(got, specs, strict=True):
        np.testing.assert_array_equal(lim, _class_spread_alone(v, labels, reach, pad))
    np.testing.assert_array_equal(class_spread_limits(v, labels), got[1])
    assert all(lim[1, 0] < -40 for lim in got)  # (the far class of 300 rows widened them all)
    assert all(lim[0, 1] < 60 for lim in got)  # (the one of 10 rows did not)
    empty = class_spread_limits_each(np.empty((0, 2)), np.empty(0), specs)
    np.testing.assert_array_equal(empty[0], [[-1.0, 1.0], [-1.0, 1.0]])


def test_shading_mixes_colours_by_count():
    colors = np.array([[1.0, 0, 0], [0, 0, 1.0]])
    grid = np.zeros((2, 2, 1))
    grid[:, 0, 0] = [10, 10]  # equal counts: the average
    grid[:, 1, 0] = [30, 10]  # 3:1
    rgba = shade(grid, colors)
    np.testing.assert_allclose(rgba[0, 0, :3], [0.5, 0, 0.5])
    np.testing.assert_allclose(rgba[0, 1, :3], [0.75, 0, 0.25])
    assert rgba[0, 1, 3] > rgba[0, 0, 3]  # more rows, more opaque


def test_coordinates_read_either_name(tmp_path):
    for name in ("projection", "coords"):
        g = zarr.open_group(str(tmp_path / f"{name}.zarr"), mode="w")
        g.create_array(name, data=np.ones((5, 2)))
        assert coordinates(g).shape == (5, 2)
    g = zarr.open_group(str(tmp_path / "neither.zarr"), mode="w")
    with pytest.raises(InputError, match="no 'projection' array"):
        coordinates(g)


@pytest.fixture
def projected(tmp_path):
    X, y = make_coin(n=20_000)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=2500)
    main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m"), "--keep-class-scatter"])
    main(["project", str(tmp_path / "m"), str(tmp_path / "d.zarr"), "--output", str(tmp_path / "o.zarr")])
    return tmp_path


def _pixels(fig):
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(float)


def _pixel_box(fig, ax):
    """Axes box in image pixels: (x0, x1, top, bottom), image row 0 at the top."""
    bb = ax.get_window_extent()
    h = fig.canvas.get_width_height()[1]
    return int(bb.x0), int(bb.x1), int(h - bb.y1), int(h - bb.y0)


def test_boundary_is_the_pixel_column_of_z0_equal_0_with_the_classes_on_its_sides(projected):
    fig = draw_output(projected / "o.zarr", stretch=True)  # wide enough to read columns
    ax = fig.streamproj_axes[0]
    img = _pixels(fig)
    x0, x1, top, bottom = _pixel_box(fig, ax)
    col = round(float(ax.transData.transform((0.0, 0.0))[0]))
    rows = slice(top + 3, bottom - 3)
    dark = img[rows, col - 1 : col + 2].min(axis=1).max(axis=1)  # darkest of 3 columns
    assert np.mean(dark < 60) > 0.95  # the boundary line runs the full height
    mid = (top + bottom) // 2
    left = img[mid - 20 : mid + 20, max(x0 + 2, col - 25) : col - 4].reshape(-1, 3)
    right = img[mid - 20 : mid + 20, col + 4 : col + 25].reshape(-1, 3)
    # class 0 (blue) on the left, class 1 (orange) on the right
    assert np.mean(left[:, 2] - left[:, 0]) > 20
    assert np.mean(right[:, 0] - right[:, 2]) > 20


def test_equal_aspect_by_default_and_stretch_says_so(projected):
    fig = draw_output(projected / "o.zarr")
    ax = fig.streamproj_axes[0]
    fig.canvas.draw()
    assert ax.get_aspect() == 1.0
    bb = ax.get_window_extent()
    (xa, xb), (ya, yb) = ax.get_xlim(), ax.get_ylim()
    assert abs((bb.width / bb.height) / ((xb - xa) / (yb - ya)) - 1) < 0.03
    texts = " ".join(t.get_text() for t in fig.texts)
    assert "STRETCHED" not in texts
    fig = draw_output(projected / "o.zarr", stretch=True)
    ax = fig.streamproj_axes[0]
    fig.canvas.draw()
    assert ax.get_aspect() != 1.0
    assert "STRETCHED" in " ".join(t.get_text() for t in fig.texts)
    assert ax.get_window_extent().width == pytest.approx(ax.get_window_extent().height, rel=0.02)


def test_ticks_are_made_only_where_they_are_drawn(projected):
    from matplotlib.ticker import MaxNLocator

    fig = draw_output(projected / "o.zarr")
    fig.canvas.draw()
    data_axes = [*fig.streamproj_axes, *fig.streamproj_magnified]
    margin = next(ax for ax in fig.axes if ax.get_title().startswith("margin"))
    for axis in [a for ax in [*data_axes, margin] for a in (ax.xaxis, ax.yaxis)]:
        lo, hi = sorted(axis.get_view_interval())
        locs = axis.get_majorticklocs()
        # each location a tick of its own: none made beyond the limits and then dropped
        assert all(lo - 1e-9 * (hi - lo) <= v <= hi + 1e-9 * (hi - lo) for v in locs)
        assert len(axis.majorTicks) <= max(len(locs), 1)
        # the same locations as the plain locator's that fall inside
        if isinstance(getattr(axis.get_major_locator(), "base", None), MaxNLocator):
            full = axis.get_major_locator().base()
            assert list(locs) == [v for v in full if lo - 1e-9 <= v <= hi + 1e-9]


def test_a_sliver_gets_a_magnified_twin_of_the_same_counts_and_says_so(projected):
    # the coin is ~10x taller than thick: equal aspect alone left the main panel 48 px wide
    fig = draw_output(projected / "o.zarr")
    (ax,) = fig.streamproj_axes
    (twin,) = fig.streamproj_magnified
    summary = fig.streamproj_summary
    pair = (0, 1)
    side, k = fig.streamproj_magnify[pair]
    lim = summary.limits
    assert side == 0
    assert k == int(np.floor((lim[1, 1] - lim[1, 0]) / (lim[0, 1] - lim[0, 0])))
    assert k >= 3
    fine = summary.grids[pair]
    f = summary.finer[pair][1]
    # the twin's cells look square as drawn (the true shape's short side has at least 8 cells,
    # so they may be counted less than k times finer)
    cell_x = np.ptp(lim[0]) / fine.shape[1] * k
    cell_y = np.ptp(lim[1]) / fine.shape[2]
    assert abs(cell_x / cell_y - 1) < 0.6 / f
    assert fine.shape[1] == f * summary.grid(pair).shape[1]
    # the true shape is the same rows in cells f fine cells wide: nothing counted twice or lost
    np.testing.assert_array_equal(fine.reshape(fine.shape[0], -1, f, fine.shape[2]).sum(axis=2),
                                  summary.grid(pair))
    assert summary.grid(pair).sum() + summary.outside[pair] == summary.n
    fig.canvas.draw()
    assert ax.get_aspect() == 1.0
    assert twin.get_xlim() == ax.get_xlim()
    assert twin.get_ylim() == ax.get_ylim()
    assert f"magnified {k}x" in twin.get_title()
    assert f"magnified {k}x" in twin.get_xlabel()
    assert twin.get_window_extent().width > 4 * ax.get_window_extent().width
    # equally tall and top-aligned, so the shared y axis reads across (also at a large size)
    for f in (fig, draw_output(projected / "o.zarr", size=(3000, 1600))):
        f.canvas.draw()
        a, b = f.streamproj_axes[0].get_window_extent(), f.streamproj_magnified[0].get_window_extent()
        assert abs(a.y0 - b.y0) < 1.5
        assert abs(a.y1 - b.y1) < 1.5
    # drawn exactly k times magnified, as labelled (auto aspect drew what the slot allowed)
    tb, mb = twin.get_window_extent(), ax.get_window_extent()
    drawn = (tb.width / np.ptp(twin.get_xlim())) / (tb.height / np.ptp(twin.get_ylim()))
    assert abs(drawn / k - 1) < 0.01
    assert abs((mb.width / np.ptp(ax.get_xlim())) / (mb.height / np.ptp(ax.get_ylim())) - 1) < 0.03
    assert [line.get_xdata()[0] for line in twin.get_lines()] == [0.0]  # the boundary, at 0
    # asked to stretch: no twin
    assert draw_output(projected / "o.zarr", stretch=True).streamproj_magnified == []


def test_a_flat_strip_gets_its_magnified_twin_under_it_in_square_cells():
    # z[1] ~50x narrower than z[0]: the true shape is a strip, and the twin under it
    rng = np.random.default_rng(1)
    X = rng.normal(size=(10_000, 2)) * [10, 0.2]
    X = np.vstack([X, X * [1, -1]])  # no class mean or tilt along x1: z[1] is x1
    y = (X[:, 0] + np.tile(rng.normal(size=10_000) * 3, 2) > 0).astype(int)
    fig = plot_projection(sp.BoundaryProjector().fit(X, y), X, y)
    summary = fig.streamproj_summary
    ((pair, (side, k)),) = fig.streamproj_magnify.items()
    lim = summary.limits
    assert (pair, side) == ((0, 1), 1)
    assert k == min(int(np.floor(np.ptp(lim[0]) / np.ptp(lim[1]))), 64)
    (ax,), (twin,) = fig.streamproj_axes[:1], fig.streamproj_magnified
    fig.canvas.draw()
    a, b = ax.get_window_extent(), twin.get_window_extent()
    assert b.y1 < a.y0  # under it, as wide, on the same x axis
    assert abs(a.x0 - b.x0) < 1.5
    assert abs(a.x1 - b.x1) < 1.5
    assert twin.get_xlim() == ax.get_xlim()
    drawn = (b.height / np.ptp(twin.get_ylim())) / (b.width / np.ptp(twin.get_xlim()))
    assert abs(drawn / k - 1) < 0.01
    assert twin.get_ylabel() == f"z[1] magnified {k}x"
    assert f"under it z[1] magnified {k}x" in ax.get_title()
    # its cells look square as drawn: counted f times finer, f < k (the strip has 8 cells)
    f = summary.finer[pair][1]
    fine = summary.grids[pair]
    assert 1 < f < k
    cell_x = np.ptp(lim[0]) / fine.shape[1]
    cell_y = np.ptp(lim[1]) / fine.shape[2] * k
    assert abs(cell_x / cell_y - 1) < 0.6 / f
    np.testing.assert_array_equal(
        fine.reshape(fine.shape[0], fine.shape[1], -1, f).sum(axis=3), summary.grid(pair))
    _assert_text_inside(fig)


def test_a_sliver_a_few_pixels_wide_leaves_its_boundaries_to_its_twin():
    # five classes, z[0] 50x narrower than the others: their boundaries crossed the 4-px true
    # shape steeply and made it a solid black bar
    X, y = make_classes(n=20_000, p=8, k=5, seed=2)
    X[:, 0] *= 0.05
    fig = plot_projection(sp.BoundaryProjector(n_components=3).fit(X, y), X, y)
    fig.canvas.draw()
    slivers = [ax for ax in fig.streamproj_axes if ax.get_window_extent().width < 15]
    assert slivers
    assert all(not ax.get_lines() for ax in slivers)
    assert all(ax.get_lines() for ax in fig.streamproj_magnified)


def test_features_in_units_a_million_apart_still_draw_a_picture():
    # z[0] ~ 1e-6 of z[1]: the twin stopped at 64x, so both panels were blank slivers, and the
    # axes' shared "1e6" overprinted the title
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20_000, 6))
    y = rng.integers(0, 2, 20_000)
    X[:, 0] += 2 * y
    X *= np.logspace(-3, 3, 6)
    fig = plot_projection(sp.BoundaryProjector().fit(X, y), X, y)
    ((pair, (side, k)),) = fig.streamproj_magnify.items()
    lim = fig.streamproj_summary.limits
    assert side == 0
    assert k == int(np.floor(np.ptp(lim[1]) / np.ptp(lim[0]))) > 10**5
    (twin,) = fig.streamproj_magnified
    fig.canvas.draw()
    b = twin.get_window_extent()
    assert b.width > 0.8 * b.height  # a panel, not a sliver
    fine = fig.streamproj_summary.grids[pair]
    assert np.count_nonzero(fine.sum(axis=(0, 2))) > 20  # the rows spread over its columns
    assert f"magnified {k:,}x" in twin.get_xlabel()
    for ax in [*fig.streamproj_axes, twin]:
        assert ax.xaxis.get_offset_text().get_text() == ""
        assert ax.yaxis.get_offset_text().get_text() == ""
    _assert_text_inside(fig)


def test_a_grids_sliver_column_gets_a_magnified_twin_column_row_by_row():
    # the coin in three axes: z[0] is ~10x narrower than the PCs, so the grid's z[0] column was a
    # sliver (only a lone panel had a twin)
    X, y = make_coin(n=3000)
    fig = plot_projection(sp.BoundaryProjector(n_components=3).fit(X, y), X, y)
    summary = fig.streamproj_summary
    lim = summary.limits
    k = int(np.floor(max(np.ptp(lim[1]), np.ptp(lim[2])) / np.ptp(lim[0])))
    assert k >= 3
    assert fig.streamproj_magnify == {(0, 1): (0, k), (0, 2): (0, k)}
    twins = fig.streamproj_magnified
    assert len(twins) == 2
    assert len(fig.streamproj_axes) == 3
    fig.canvas.draw()
    true = {ax.get_ylim(): ax for ax in fig.streamproj_axes if ax.get_xlim() == twins[0].get_xlim()}
    for twin in twins:
        ax = true[twin.get_ylim()]  # its true shape: the same limits, in the same grid row
        a, b = ax.get_window_extent(), twin.get_window_extent()
        assert abs(a.y0 - b.y0) < 1.5
        assert abs(a.y1 - b.y1) < 1.5
        assert a.x1 < b.x0  # right of it
        assert b.width > 4 * a.width
        drawn = (b.width / np.ptp(twin.get_xlim())) / (b.height / np.ptp(twin.get_ylim()))
        assert abs(drawn / k - 1) < 0.01
        assert [line.get_xdata()[0] for line in twin.get_lines()] == [0.0]
    assert twins[-1].get_xlabel() == f"z[0] magnified {k}x"
    for pair, (_, f) in summary.finer.items():  # the same rows, counted once: fine cells sum back
        fine = summary.grids[pair]
        np.testing.assert_array_equal(
            fine.reshape(fine.shape[0], -1, f, fine.shape[2]).sum(axis=2), summary.grid(pair))
    # the other column sits right of the twins, and the notes say what the twin column is
    other = next(ax for ax in fig.streamproj_axes if ax.get_xlim() != twins[0].get_xlim())
    assert other.get_window_extent().x0 > twins[-1].get_window_extent().x1
    assert f"second column is its first (z[0]) magnified {k}x" in " ".join(
        t.get_text() for t in fig.texts)
    # with z[0] as wide as the others there is no twin
    X = np.random.default_rng(5).normal(size=(6000, 3))
    y = (X[:, 0] > 0).astype(int)
    fig = plot_projection(sp.BoundaryProjector(n_components=3).fit(X, y), X, y)
    assert fig.streamproj_magnify == {}
    assert fig.streamproj_magnified == []


def test_classes_mostly_outside_are_named_and_a_few_rows_are_ticks_not_spikes():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(20_000, 4)) * [3.0, 1.0, 1.0, 1.0]
    y = (X[:, 0] > 0).astype(int)
    X[:5, 1] += 40.0  # class 2: five rows, far off the bulk in z[1]
    X[5:40, 1] -= 0.5  # class 3: 35 rows inside it
    y[:5], y[5:40] = 2, 3
    m = sp.BoundaryProjector().fit(X, y)
    fig = plot_projection(m, X, y)
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert "class 2: 5 of its 5 rows (100%) fall outside the limits" in text
    assert "class 3:" not in text
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "2 (5)" in labels  # the legend counts every row of a class, drawn or not
    margin = next(ax for ax in fig.axes if ax.get_ylabel().startswith("density"))
    ticks = [line for line in margin.get_lines() if line.get_marker() == "|"]
    assert len(ticks) == 2  # classes 2 and 3
    assert sum(len(line.get_xdata()) for line in ticks) <= 5 + 35
    # the densities' scale is the big classes': a 35-row class no longer sets it
    summary = fig.streamproj_summary
    width = np.diff(summary.limits[0])[0] / summary.margin_bins
    big = [k for k in range(len(summary.rows)) if summary.rows[k] >= 200]
    top = max((summary.margin[k] / (summary.rows[k] * width)).max() for k in big)
    assert margin.get_ylim()[1] < 1.2 * top


def test_a_pair_grid_counts_the_rows_missing_from_some_panel_not_the_worst_panels():
    # rows far on z[1], z[2] and z[3] alone: the note said the worst panel's 10, while 15 rows
    # were missing from some panel
    rng = np.random.default_rng(9)
    X = rng.normal(size=(20_000, 5)) * [3.0, 2.0, 1.5, 1.0, 0.5]
    y = (X[:, 0] > 0).astype(int)
    m = sp.BoundaryProjector(n_components=4).fit(X, y)
    far = np.vstack([m.center_ + 60.0 * np.abs(m.components_[a]).max() ** -1 * m.components_[a]
                     for a in (1, 2, 3) for _ in range(5)])
    X2, y2 = np.vstack([X, far]), np.concatenate([y, np.zeros(15, dtype=int)])
    z = m.transform(X2)
    fig = plot_projection(m, X2, y2)
    summary = fig.streamproj_summary
    lim = summary.limits
    axes = sorted({a for pair in summary.pairs for a in pair})
    missing = ((z[:, axes] < lim[axes, 0]) | (z[:, axes] >= lim[axes, 1])).any(axis=1)
    assert missing.sum() == 15
    assert max(summary.outside.values()) < 15
    assert summary.outside_any == 15
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert f"15 of {len(X2):,} rows (0.07%) fall outside some panel and are not drawn there" in text


def test_tick_labels_far_from_zero_tell_their_ticks_apart():
    # center="hyperplane" puts z[1] about 2.3e7 with a spread of 3: the ticks of every panel's
    # y axis read "2.332e7", six times (4 significant digits whatever the step)
    X, y = make_coin(n=3000, offset=1e7)
    m = sp.BoundaryProjector(center="hyperplane").fit(X, y)
    fig = plot_projection(m, X, y)
    fig.canvas.draw()
    checked = 0
    margin = [ax for ax in fig.axes if ax.get_ylabel().startswith("density")]
    for ax in [*fig.streamproj_axes, *margin]:  # (not the density key: labels of its own)
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
            assert len(set(labels)) == len(labels), labels
            # each label is its tick's value, to a tenth of the step between ticks
            locs = axis.get_ticklocs()
            lo, hi = sorted(axis.get_view_interval())
            locs = [v for v in locs if lo - 1e-10 * (hi - lo) <= v <= hi + 1e-10 * (hi - lo)]
            if len(labels) == len(locs) > 1 and labels[0][-1].isdigit():
                step = np.diff(locs).min()
                values = [float(t.replace("\u2212", "-")) for t in labels]
                assert np.allclose(values, locs, rtol=0, atol=0.1 * step), (labels, locs)
                checked += 1
    assert checked >= 3
    z1 = m.transform(X)[:, 1]
    assert np.ptp(z1) < 30 < z1.min()  # (the case: far from 0, narrow)


def test_far_outliers_are_said_to_be_far_not_only_counted():
    # 5 rows a million units out were "5 of 200,000 rows (0.00%) fall outside" and no more
    rng = np.random.default_rng(6)
    X = rng.normal(size=(20_000, 4))
    y = (X[:, 0] > 0).astype(int)
    X[:5, 1] = 1e6
    m = sp.BoundaryProjector().fit(X, y)
    fig = plot_projection(m, X, y)
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    z = m.transform(X)
    lim = fig.streamproj_summary.limits
    axis = int(np.argmax(np.abs(z[:5]).max(axis=0)))
    at = z[:, axis][np.argmax(np.abs(z[:, axis]))]
    assert f"far outliers: rows reach z[{axis}] = {at:.3g}" in text
    # rows merely outside, not far: no such note
    X = rng.normal(size=(20_000, 4))
    y = (X[:, 0] > 0).astype(int)
    X[:5, 1] = 8.0
    fig = plot_projection(sp.BoundaryProjector().fit(X, y), X, y)
    assert "far outliers" not in " ".join(t.get_text() for t in fig.texts)
    assert lim.shape[0] == 2


def test_an_infinite_coordinate_is_said_to_be_infinitely_far_not_inf_times_the_range():
    # a projection that overflowed: the note read "inf x the drawn range"
    s = PictureSummary(ClassMap(np.array([0, 1])), np.array([[-3.0, 3.0], [-2.0, 2.0]]),
                       [(0, 1)], {(0, 1): (12, 8)})
    s.add({"z": np.array([[0.0, 0.0], [1.0, np.inf], [-1.0, 50.0]]),
           "label": np.array([0, 1, 1], dtype=np.int8)})
    (line,) = _far_rows(s, [0, 1])
    assert line.startswith("far outliers: rows reach z[1] = inf, infinitely far")
    assert "infx" not in line
    assert "inf x" not in line


def test_rows_with_a_nan_coordinate_are_said_to_be_nan_not_only_counted_outside():
    # 300 NaN rows of a hand-built Source were "310 of 4,000 rows (7.75%) fall outside" and no
    # more (the 10 infinite ones were named: "infinitely far")
    from streamproj.plot.picture import Source, draw_source
    from streamproj.plot.reading import Blocks

    rng = np.random.default_rng(3)
    label = rng.integers(0, 2, 4000)
    z = rng.normal(size=(4000, 3)) + np.array([[-2, 0, 0], [2, 0, 0]])[label]
    z[:300, 0] = np.nan
    z[300:310, 1] = np.inf
    z[310:330, 2] = np.nan  # an axis not drawn: these rows are drawn
    source = Source(Blocks({"z": z, "label": label}, block_rows=1000), np.arange(2), np.eye(3),
                    np.zeros(3), np.array([[1.0, 0.0, 0.0]]), np.zeros(1), ["a", "b", "c"],
                    "d", "m", "y")
    fig = draw_source(source, axes=(0, 1))
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert "310 of 4,000 rows (7.75%) fall outside" in text
    assert "300 rows (7.50%) have a NaN coordinate and are not drawn" in text
    assert fig.streamproj_summary.nan_rows == 300
    fig = draw_source(source, axes=(1, 2))  # z[0] not drawn: its NaN rows are
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert "20 rows (0.50%) have a NaN coordinate and are not drawn" in text


def test_the_margin_of_coordinates_near_1e300_is_drawn_not_a_flat_line():
    # each class's density along z[0] is about 1e-301 per unit: matplotlib took a y range that
    # small for none and drew every histogram flat on 0 in a panel from -0.04 to 0.04
    from matplotlib.patches import StepPatch

    from streamproj.plot.picture import Source, draw_source
    from streamproj.plot.reading import Blocks

    rng = np.random.default_rng(1)
    label = rng.integers(0, 2, 4000)
    z = rng.normal(size=(4000, 2)) * 1e300 + np.array([[-2e300, 0], [2e300, 0]])[label]
    source = Source(Blocks({"z": z, "label": label}), np.arange(2), np.eye(2), np.zeros(2),
                    np.array([[1.0, 0.0]]), np.zeros(1), ["a", "b"], "d", "m", "y")
    fig = draw_source(source)
    margin = next(ax for ax in fig.axes if ax.get_ylabel().startswith("density"))
    outlines = [p for p in margin.patches if isinstance(p, StepPatch) and not p.get_fill()]
    assert len(outlines) == 2
    scale = re.search(r"x1e-(\d+)", margin.get_ylabel())
    assert scale, margin.get_ylabel()
    lo, top = margin.get_ylim()
    for patch in outlines:
        dens, edges, _ = patch.get_data()
        # each class integrates to 1 in the units the axis says
        assert np.sum(dens * np.diff(edges)) * 10.0 ** -int(scale[1]) == pytest.approx(1.0)
        assert 0.3 * top < dens.max() <= top
    assert lo == 0


def test_rows_exactly_on_the_boundary_are_drawn_on_its_side_the_classifier_gives_them():
    # a row at z[0] = 0 is the classifier's "z[0] <= 0" class, and was counted in the cell
    # from 0 to the right: 300 rows at the centre drawn on the other class's side of the line
    m, X, y = coin_with_rows_at_centre(300)
    z0 = m.transform(X)[:, 0]
    assert np.all(m.predict(X[z0 == 0]) == 0)
    s = plot_projection(m, X, y).streamproj_summary
    lo, hi = s.limits[0]
    for counts in (s.grid((0, 1)), s.margin[:, :, None]):
        n = counts.shape[1]
        at = round(-lo / (hi - lo) * n)
        assert abs(lo + at * (hi - lo) / n) < 1e-9 * (hi - lo)  # (a cell edge at the boundary)
        right = np.arange(n) >= at
        assert counts[:, right].sum() == np.count_nonzero(z0 > 0)
        assert counts[0, ~right].sum() == np.count_nonzero((z0 <= 0) & (y == 0))


def test_a_narrow_class_gets_a_histogram_of_many_bins_that_integrates_to_one():
    # a class in 2 % of the z[0] range was drawn in 2-3 bins of the panel's 200
    rng = np.random.default_rng(4)
    y = np.repeat([0, 1], [30_000, 3_000])
    x0 = np.where(y == 0, rng.normal(-3.0, 2.0, y.size), rng.normal(1.0, 0.05, y.size))
    X = np.column_stack([x0, rng.normal(size=y.size)])
    fig = plot_projection(sp.BoundaryProjector().fit(X, y), X, y)
    from matplotlib.patches import StepPatch

    margin = next(ax for ax in fig.axes if ax.get_ylabel().startswith("density"))
    outlines = [p for p in margin.patches if isinstance(p, StepPatch) and not p.get_fill()]
    assert len(outlines) == 2
    z0 = sp.BoundaryProjector().fit(X, y).transform(X)[:, 0]
    for k, patch in enumerate(outlines):
        dens, edges, _ = patch.get_data()
        assert np.sum(dens * np.diff(edges)) == pytest.approx(1.0, abs=1e-9)  # all rows inside
        lo, hi = np.quantile(z0[y == k], [0.01, 0.99])
        across = np.count_nonzero((edges > lo) & (edges < hi))
        assert across >= 12, (k, across)
    # the wide class keeps the panel's usual 200-bin steps
    dens, edges, _ = outlines[0].get_data()
    assert np.ptp(margin.get_xlim()) / np.diff(edges).max() == pytest.approx(200, rel=0.3)


@pytest.mark.parametrize(("k", "filled"), [(3, True), (12, False)])
def test_many_classes_along_z0_are_outlines_not_piled_fills(k, filled):
    # twelve filled histograms piled into mud over each other's outlines (issue 12's review)
    from matplotlib.patches import StepPatch

    X, y = make_classes(n=6_000, p=4, k=k, seed=3)
    fig = plot_projection(sp.BoundaryProjector().fit(X, y), X, y, top=12)
    margin = next(ax for ax in fig.axes if ax.get_ylabel().startswith("density"))
    steps = [p for p in margin.patches if isinstance(p, StepPatch)]
    assert len([p for p in steps if not p.get_fill()]) == k  # every class's outline
    assert len([p for p in steps if p.get_fill()]) == (k if filled else 0)


def test_a_small_class_at_one_end_and_the_boundary_stay_in_the_picture():
    # 0.1 % of the rows, all beyond the 1-99 % quantiles of all rows: the limits left them
    # out whole, and the boundary with them
    rng = np.random.default_rng(11)
    n, few = 200_000, 200
    z = np.column_stack([rng.normal(2.0, 0.3, n), rng.normal(0.0, 3.0, n)])
    z[:few, 0] = rng.normal(-1.5, 0.2, few)
    labels = np.where(np.arange(n) < few, 0, 1)
    from streamproj.plot.picture import Source, draw_source
    from streamproj.plot.reading import Blocks

    source = Source(Blocks({"z": z, "label": labels, "y": labels}), np.array([0, 1]),
                    np.eye(2), np.zeros(2), np.array([[1.0, 0.0]]), np.array([0.0]),
                    ["signed distance to boundary", "boundary-parallel PC 1"], "data", "m", "y")
    summary = draw_source(source).streamproj_summary
    assert summary.limits[0, 0] < z[:few, 0].min()
    assert summary.limits[0, 0] < 0 < summary.limits[0, 1]
    assert summary.outside[(0, 1)] < 50


def test_two_fully_overlapping_classes_render_as_a_mixed_colour():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40_000, 4))
    y = rng.integers(0, 2, size=40_000)  # labels independent of X: complete overlap
    m = sp.BoundaryProjector().fit(X, y)
    fig = plot_projection(m, X, y, stretch=True)
    ax = fig.streamproj_axes[0]
    img = _pixels(fig)
    x0, x1, top, bottom = _pixel_box(fig, ax)
    cx, cy = (x0 + x1) // 2, (top + bottom) // 2
    core = img[cy - 30 : cy + 30, cx - 30 : cx + 30].reshape(-1, 3)
    core = core[(core < 250).any(axis=1)]  # drawn cells, not gaps
    ink = 255 - core.mean(axis=0)  # alpha-blended on white: ink is proportional to 255 - colour
    ink /= ink.sum()
    a, b = 255 - rgb(PALETTE[0]), 255 - rgb(PALETTE[1])
    mix = (a / a.sum() + b / b.sum()) / 2
    d = {name: np.linalg.norm(ink - v / v.sum()) for name, v in
         [("class 0", a), ("class 1", b), ("mix", mix * mix.sum())]}
    assert min(d, key=d.get) == "mix", d


def test_legend_and_notes_lie_inside_the_figure_and_outside_the_data(projected):
    m = sp.load(projected / "m")
    fig = draw_output(projected / "o.zarr", m, compare_pca="both", qda=True)
    fig.canvas.draw()
    fbox = fig.bbox
    legend = fig.legends[0].get_window_extent()
    assert fbox.x0 <= legend.x0
    assert legend.x1 <= fbox.x1
    assert fbox.y0 <= legend.y0
    assert legend.y1 <= fbox.y1
    data = fig.streamproj_axes + fig.streamproj_magnified
    for ax in fig.axes:
        if ax.images and ax in data:
            assert not legend.overlaps(ax.get_window_extent())
    for text in fig.texts:
        tb = text.get_window_extent()
        assert fbox.x0 <= tb.x0
        assert tb.x1 <= fbox.x1 + 1
        for ax in data:
            assert not tb.overlaps(ax.get_window_extent())
    notes = " ".join(t.get_text() for t in fig.texts)
    assert "standardised" in notes or any(
        "standardised" in t.get_text() for ax in fig.axes for t in ax.texts)


def _assert_text_inside(fig):
    fig.canvas.draw()
    fbox = fig.bbox
    boxes = [t.get_window_extent() for t in fig.texts] + [lg.get_window_extent() for lg in fig.legends]
    for ax in fig.axes:
        boxes += [ax.title.get_window_extent(), ax.xaxis.label.get_window_extent()]
    for box in boxes:
        assert fbox.x0 - 1 <= box.x0, box
        assert box.x1 <= fbox.x1 + 1, box
        assert fbox.y0 - 1 <= box.y0, box
        assert box.y1 <= fbox.y1 + 1, box


@pytest.mark.parametrize("size", [None, (640, 480)])
@pytest.mark.parametrize("k", [2, 3, 24])
def test_no_text_leaves_a_narrow_or_small_figure(tmp_path, k, size):
    # a flat coin without PCA panels is the narrowest default figure; 640x480 the smallest
    X, y = (make_coin(n=6000) if k == 2 else make_classes(n=6000, p=6, k=k, seed=3))
    # the default size must fit a long name; a small fixed size an ordinary one
    name = "d.zarr" if size else "a-rather-long-dataset-name-from-a-nightly-export-2026-11-24.zarr"
    write_zarr(tmp_path / name, X, y, chunk_rows=1500)
    main(["fit", str(tmp_path / name), "--model", str(tmp_path / "m")])
    main(["project", str(tmp_path / "m"), str(tmp_path / name), "--output", str(tmp_path / "o.zarr")])
    if k == 24 and size:  # too small even with the text at 72 %: the error gives a size that fits
        with pytest.raises(InputError, match=r"640x260 is too small .* give --size 640x\d+") as e:
            draw_output(tmp_path / "o.zarr", top=20, size=(640, 260))
        need = int(re.search(r"640x(\d+) or taller", str(e.value)).group(1))
        assert tuple(draw_output(tmp_path / "o.zarr", top=20, size=(640, need)
                                 ).canvas.get_width_height()) == (640, need)
    fig = draw_output(tmp_path / "o.zarr", top=20, size=size)
    if size:
        assert tuple(fig.canvas.get_width_height()) == size
    _assert_text_inside(fig)
    if size and k == 2:  # the text drawn smaller (a lower dpi), the panels get the room: it
        # left them a quarter of the height
        assert fig.dpi < 100
        assert fig.streamproj_axes[0].get_window_extent().height >= 0.4 * size[1]


def test_margin_panel_reports_the_exact_wrong_side_fractions(projected):
    fig = draw_output(projected / "o.zarr")
    s = fig.streamproj_summary
    g = zarr.open_group(str(projected / "o.zarr"), mode="r")
    z0, y = coordinates(g)[:, 0], g["y"][:]
    for k, (label, wrong_side) in enumerate([(0, z0 > 0), (1, ~(z0 > 0))]):
        assert s.wrong[k] == np.count_nonzero((y == label) & wrong_side)
    text = " ".join(t.get_text() for t in fig.texts)
    frac = np.count_nonzero((y == 0) & (z0 > 0)) / np.count_nonzero(y == 0)
    assert f"{frac:.2%} of its" in text
    assert "agrees with the classifier on 100.00% of rows" in text


def test_two_classes_keep_their_wrong_side_lines_with_top_1_and_unknown_labels():
    # --top 1 put class 0 in "other" with the rows of labels the model does not know, and
    # said "class other: 11.13% of its 1,483 rows on the wrong side" (class 0: 9.70% of 1,433)
    X, y = make_coin(n=3000)
    m = sp.BoundaryProjector().fit(X, y)
    shown = y.copy()
    shown[:50] = 7
    fig = plot_projection(m, X, shown, top=1)
    z0 = m.transform(X)[:, 0]
    text = " ".join(t.get_text() for t in fig.texts)
    zero = shown == 0
    assert (f"class 0: {np.mean(z0[zero] > 0):.2%} of its {zero.sum():,} rows on the wrong "
            "side") in text
    assert "class other:" not in text


def test_wrong_side_lines_say_a_class_without_rows_and_a_few_rows_that_round_to_zero():
    # a class of no rows here was "0.00% of its 0 rows on the wrong side", and 2 of 50,000 rows
    # were "0.00%": none, to the reader
    X, y = make_coin(n=100_000)
    m = sp.BoundaryProjector().fit(X, y)
    z0 = m.transform(X)[:, 0]
    ones = np.flatnonzero(y == 1)
    text = " ".join(t.get_text() for t in plot_projection(m, X[ones], y[ones]).texts)
    assert "class 0: no rows here" in text
    assert "of its 0 rows" not in text
    few = np.concatenate([np.flatnonzero(z0 <= 0), np.flatnonzero(z0 > 0)[:2]])  # 2 in 50,000
    shown = np.zeros(few.size, dtype=int)
    text = " ".join(t.get_text() for t in plot_projection(m, X[few], shown).texts)
    assert f"class 0: < 0.01% of its {few.size:,} rows on the wrong side" in text


def test_pair_grid_for_three_axes_and_a_chosen_pair(tmp_path):
    X, y = make_classes(n=6000, p=6, k=3, seed=4)
    m = sp.BoundaryProjector(n_components=3).fit(X, y)
    fig = plot_projection(m, X, y)
    assert len(fig.streamproj_axes) == 3  # (0,1), (0,2), (1,2)
    labels = {(ax.get_xlabel()[:4], ax.get_ylabel()[:4]) for ax in fig.streamproj_axes}
    assert ("z[0]", "z[2]") in labels or ("", "z[2]") in labels
    fig = plot_projection(m, X, y, axes=(0, 2))
    (ax,) = fig.streamproj_axes  # (and fig.streamproj_magnified when its spans differ 3x)
    assert ax.get_xlabel().startswith("z[0]")
    assert ax.get_ylabel().startswith("z[2]")
    with pytest.raises(InputError, match=r"axes \(--axes on the command line\) must be two different axes"):
        plot_projection(m, X, y, axes=(0, 5))


def test_the_density_key_states_each_panels_cell_when_they_differ():
    # one key under a pair grid gave the first panel's cell alone ("cell 0.0712 x 0.0712")
    # while the others' cells were of other sizes
    X, y = make_classes(n=6000, p=6, k=3, seed=4)
    X[:, 2] *= 30.0
    m = sp.BoundaryProjector(n_components=3).fit(X, y)
    fig = plot_projection(m, X, y)
    texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    assert any("rows per cell (each panel's cell in the notes)" in t for t in texts)
    note = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    summary = fig.streamproj_summary
    for i, j in summary.pairs:
        (x0, x1), (y0, y1) = summary.limits[i], summary.limits[j]
        _, bx, by = summary.grid((i, j)).shape
        assert f"z[{i}] x z[{j}]" in note
        assert f"{(x1 - x0) / bx:.3g} x {(y1 - y0) / by:.3g}" in note
    one = plot_projection(m, X, y, axes=(0, 1))
    texts = [t.get_text() for t in one.findobj(matplotlib.text.Text)]
    assert any(re.search(r"rows per cell \(cell [0-9.e+-]+ x [0-9.e+-]+\)", t) for t in texts)
    assert "cells of the density key" not in " ".join(t.get_text() for t in one.texts)


def _tie_points(ax):
    """The (x, y) points of the lines drawn in ``ax``, past the panel's own artists."""
    pts = [np.column_stack(line.get_data()) for line in ax.get_lines()]
    pts = np.vstack(pts) if pts else np.empty((0, 2))
    return pts[np.isfinite(pts).all(axis=1)]


def _crosses(p, q, starts, ends):
    """Whether the segment p-q crosses any of the segments ``starts[i]-ends[i]`` (or touches)."""
    def orient(a, b, c):
        return np.sign((b[..., 0] - a[..., 0]) * (c[..., 1] - a[..., 1])
                       - (b[..., 1] - a[..., 1]) * (c[..., 0] - a[..., 0]))
    return bool(np.any((orient(p, q, starts) * orient(p, q, ends) <= 0)
                       & (orient(starts, ends, p) * orient(starts, ends, q) <= 0)))


@pytest.mark.parametrize("seed", range(40))
def test_tie_segments_are_exactly_where_the_winner_changes(seed):
    # against brute force: every drawn point is a tie of the two best classes, and wherever two
    # neighbouring points of a fine grid have different winners a drawn segment lies between
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 14))
    A, b = rng.normal(size=(2, k)), rng.normal(size=k) * rng.choice([0.1, 1.0, 5.0])
    if seed % 5 == 0:  # parallel ties and a class twice: degenerate on purpose
        A[:, 1] = A[:, 0] * 2
        A[:, -1], b[-1] = A[:, 0], b[0]
    limits = ((-2.0, 3.0), (-1.5, 1.0))
    segs = _tie_segments(limits, A, b)
    if segs:
        pts = np.vstack([s + t * (e - s) for s, e in segs for t in np.linspace(0, 1, 7)])
        top2 = np.sort(pts @ A + b, axis=1)[:, -2:]
        assert np.max(top2[:, 1] - top2[:, 0]) < 1e-9 * (1 + np.abs(top2).max())
        assert np.all((pts >= [-2.0 - 1e-12, -1.5 - 1e-12]) & (pts <= [3.0 + 1e-12, 1.0 + 1e-12]))
    starts = np.array([s for s, _ in segs]).reshape(-1, 2)
    ends = np.array([e for _, e in segs]).reshape(-1, 2)
    gx, gy = np.meshgrid(np.linspace(-2, 3, 61), np.linspace(-1.5, 1, 43), indexing="ij")
    grid = np.stack([gx, gy], axis=-1)
    s = grid @ A + b
    winner = np.argmax(s, axis=-1)
    margin = np.sort(s, axis=-1)
    clear = margin[..., -1] - margin[..., -2] > 1e-9  # a point on a tie has no one winner
    for a, c in [((slice(None, -1), slice(None)), (slice(1, None), slice(None))),
                 ((slice(None), slice(None, -1)), (slice(None), slice(1, None)))]:
        changed = (winner[a] != winner[c]) & clear[a] & clear[c]
        for p, q in zip(grid[a][changed], grid[c][changed], strict=True):
            assert _crosses(p, q, starts, ends), (k, p, q)


def test_a_thousand_classes_tie_exactly():
    # testing every pair of K classes along sampled lines was O(K^3): K = 250 took minutes
    rng = np.random.default_rng(3)
    A, b = rng.normal(size=(2, 1000)), rng.normal(size=1000)
    segs = _tie_segments(((-3.0, 3.0), (-2.0, 2.0)), A, b)
    assert len(segs) > 10
    pts = np.vstack([s + t * (e - s) for s, e in segs for t in (0.0, 0.5, 1.0)])
    top2 = np.sort(pts @ A + b, axis=1)[:, -2:]
    assert np.max(top2[:, 1] - top2[:, 0]) < 1e-9 * np.abs(top2).max()


def test_lda_boundaries_are_exact_straight_ties_and_slices_are_dashed_and_said():
    X, y = make_classes(n=6000, p=6, k=3, seed=4)
    m = sp.BoundaryProjector(n_components=3).fit(X, y)
    fig = plot_projection(m, X, y)
    by_axes = {(ax.get_xlabel()[:4], ax.get_ylabel()[:4]): ax for ax in fig.streamproj_axes}
    main = by_axes[("", "z[1]")] if ("", "z[1]") in by_axes else by_axes[("z[0]", "z[1]")]
    pts = _tie_points(main)
    assert len(pts) >= 4  # three classes: two or three segments from where all three tie
    # every point drawn is a tie of the two best classes of the rule (no staircase of cells)
    z = np.column_stack([pts, np.zeros(len(pts))])
    scores = np.sort(m.decision_function(m.center_ + z @ m.components_), axis=1)
    assert np.max(np.abs(scores[:, -1] - scores[:, -2])) < 1e-9 * np.max(np.abs(scores))
    assert all(line.get_linestyle() == "-" for line in main.get_lines())
    # (z[0], z[2]) is a slice of the regions at z[1] = 0: dashed, and the legend says so
    sliced = [ax for key, ax in by_axes.items() if key != ("", "z[1]") and ax.get_lines()]
    assert sliced
    assert all(line.get_linestyle() == "--" for ax in sliced for line in ax.get_lines())
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "LDA boundaries" in labels
    assert "LDA boundaries (slice)" in labels
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert "where the panel's plane through the centre" in text
    # twelve classes in two axes: the rule needs eleven, so the one panel is a slice too
    X, y = make_classes(n=6000, p=14, k=12, seed=5)
    m = sp.BoundaryProjector().fit(X, y)
    labels = [t.get_text() for t in plot_projection(m, X, y).legends[0].get_texts()]
    assert "LDA boundaries (slice)" in labels
    assert "LDA boundaries" not in labels


def test_many_classes_judge_the_fisher_plane_as_the_pca_panels_are_judged():
    # the main plane's agreement was the cut of the full rule (19.9 % for 40 classes), the PCA
    # panels' their own best line (61.8 %): a reader concluded PCA was three times better
    X, y = make_classes(n=8000, p=10, k=12, seed=3)
    m = sp.BoundaryProjector().fit(X, y)
    fig = plot_projection(m, X, y, compare_pca="raw")
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    got = re.search(r"judged as the PCA panels are: the best line of its own in the plane of "
                    r"z\[0\], z\[1\] disagrees with the classifier on ([\d.]+)% of rows", text)
    assert got
    # the same measure by hand: an LDA of the rows' plane coordinates, against the classifier
    z = m.transform(X)[:, :2]
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    own = LinearDiscriminantAnalysis(solver="eigen", priors=m.priors_).fit(z, y).predict(z)
    assert float(got[1]) == pytest.approx(100 * np.mean(own != m.predict(X)), abs=0.051)
    pca = next(t.get_text() for ax in fig.axes for t in ax.texts if "best line" in t.get_text())
    assert "disagrees" in pca  # both say how much they disagree, by the same rule
    # two classes: the plane holds the rule, so there is nothing to add
    X, y = make_coin(n=3000)
    m = sp.BoundaryProjector().fit(X, y)
    fig = plot_projection(m, X, y, compare_pca="raw")
    assert "best line of its own" not in " ".join(t.get_text() for t in fig.texts)


def test_the_legend_names_only_the_boundaries_a_panel_draws():
    # three classes in a row along x0: in the plane of z[1], z[2] (a slice at z[0] = 0) the middle
    # class wins everywhere, so nothing is drawn and the legend had "LDA boundaries (slice)"
    rng = np.random.default_rng(2)
    y = np.repeat([0, 1, 2], 2000)
    X = rng.normal(size=(6000, 4)) + np.outer(y - 1, [6.0, 0, 0, 0])
    m = sp.BoundaryProjector(n_components=3).fit(X, y)
    fig = plot_projection(m, X, y, axes=(1, 2))
    assert _tie_points(fig.streamproj_axes[0]).size == 0
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert not [t for t in labels if t.startswith("LDA boundaries")]
    assert "no LDA boundary crosses the drawn limits" in labels
    assert "(slice):" not in " ".join(t.get_text() for t in fig.texts)
    fig = plot_projection(m, X, y, axes=(0, 1))  # and where one does, it is named
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert _tie_points(fig.streamproj_axes[0]).size > 0
    assert "LDA boundaries" in labels


def test_two_classes_name_their_boundary_only_in_a_plane_that_draws_it():
    # the plane of z[1], z[2] draws no line z[0] = 0, and its legend named one
    X, y = make_classes(n=4000, p=5, k=2, seed=3)
    m = sp.BoundaryProjector(n_components=3).fit(X, y)
    fig = plot_projection(m, X, y, axes=(1, 2))
    assert _tie_points(fig.streamproj_axes[0]).size == 0
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "decision boundary z[0] = 0" not in labels
    assert "the boundary z[0] = 0 is not a line in this plane" in labels
    fig = plot_projection(m, X, y, axes=(0, 2))
    assert "decision boundary z[0] = 0" in [t.get_text() for t in fig.legends[0].get_texts()]
    assert _tie_points(fig.streamproj_axes[0]).size > 0


def test_two_class_qda_is_drawn_only_where_z0_is_and_the_notes_say_which_plane():
    # a plane without z[0] lies in LDA's boundary; QDA's boundary a hair from it crossed that
    # plane as a large ellipse of no meaning; and the agreement note named a line not drawn
    X, y = make_coin(n=6000)
    m = sp.BoundaryProjector(n_components=3, keep_class_scatter=True).fit(X, y)
    fig = plot_projection(m, X, y, qda=True)

    def dotted(ax):
        return [c for c in ax.collections if c.get_linestyle() and c.get_linestyle()[0][1]]

    by_x = {}
    for ax in fig.streamproj_axes:
        by_x.setdefault(ax.get_xlim(), []).append(ax)
    (z1_column,) = [axes for axes in by_x.values() if len(axes) == 1]  # the (1, 2) panel
    assert dotted(z1_column[0]) == []
    assert all(dotted(ax) for axes in by_x.values() if len(axes) == 2 for ax in axes)
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert "QDA's boundary is drawn only in panels with z[0]" in text
    fig = plot_projection(m, X, y, qda=True, axes=(1, 2))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert not [t for t in labels if t.startswith("QDA")]
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert "this plane does not show z[0]" in text
    assert "boundary: the line z[0] = 0" not in text


def test_a_large_figure_gets_finer_cells():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1_500_000, 2)) * [1.0, 1.2]
    y = (X[:, 0] > 0).astype(int)
    m = sp.BoundaryProjector().fit(X, y)
    cells = {}
    for size in (None, (3000, 1600)):
        fig = plot_projection(m, X, y, size=size)
        cells[size] = max(fig.streamproj_summary.bins[(0, 1)])
        assert fig.streamproj_magnified == []
    assert 420 <= cells[None] <= 421  # the resolution (one more may put z[0] = 0 on an edge)
    # no longer capped at 420: as fine as the rows allow (about eight rows a cell on average)
    assert cells[(3000, 1600)] >= int(np.sqrt(len(X) / 8)) > 421


def test_qda_of_a_constant_feature_is_refused_with_advice_plot_can_follow():
    # the solver's "increase reg_param" named an option plot does not have
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4))
    X[:, 2] = 1.0
    y = (X[:, 0] > 0).astype(int)
    m = sp.BoundaryProjector(keep_class_scatter=True, shrinkage=0.1).fit(X, y)
    with pytest.raises(sp.SingularScatterError) as err:
        plot_projection(m, X, y, qda=True)
    text = str(err.value)
    assert text.startswith("--qda draws QDA without regularisation")
    assert "feature 2 has no variance" in text
    assert "increase reg_param" not in text
    assert "draw without --qda" in text


def test_the_qda_boundary_is_no_class_colour():
    X, y = make_classes(n=3000, p=4, k=7, seed=6)
    m = sp.BoundaryProjector(keep_class_scatter=True).fit(X, y)
    fig = plot_projection(m, X, y, qda=True)
    handles = {t.get_text(): h for t, h in zip(fig.legends[0].get_texts(),
                                               fig.legends[0].legend_handles, strict=True)}
    qda = handles["QDA boundary (slice)"]
    assert qda.get_linestyle() == ":"
    from matplotlib.colors import to_hex

    assert to_hex(qda.get_color()).upper() not in [c.upper() for c in PALETTE]


def test_qda_along_lda_leaves_both_visible(projected):
    # the coin's classes share one covariance: QDA's boundary runs along LDA's line z[0] = 0, and
    # a dotted line as thin as the solid one vanished under it
    m = sp.load(projected / "m")
    fig = draw_output(projected / "o.zarr", m, qda=True)
    ax = fig.streamproj_axes[0]
    (lda,) = [line for line in ax.get_lines() if list(line.get_xdata()) == [0.0, 0.0]]
    qda = [c for c in ax.collections if c.get_linestyle() and c.get_linestyle()[0][1] is not None]
    assert qda, "no dotted QDA contour drawn"
    for c in qda:
        assert min(c.get_linewidths()) >= 1.8 * lda.get_linewidth()  # dots stick out both sides
        assert c.get_zorder() < lda.get_zorder()  # under the solid line, not over it
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    bb = ax.get_window_extent()
    h = img.shape[0]
    col = round(float(ax.transData.transform((0.0, 0.0))[0]))
    rows = slice(int(h - bb.y1) + 5, int(h - bb.y0) - 5)
    dark = (img[rows, col - 3 : col + 4].sum(axis=2) < 150)
    # the solid line: dark at the centre all along; the dots: dark beside it only here and there
    assert dark[:, 3].mean() > 0.9
    beside = dark[:, [0, 1, 2, 4, 5, 6]].mean(axis=0)
    assert np.any((beside > 0.1) & (beside < 0.9)), beside


def test_many_classes_show_the_largest_and_other():
    X, y = make_classes(n=6000, p=5, k=12, seed=5)
    y[y == 3] = 0  # class 0 is the largest
    m = sp.BoundaryProjector().fit(X, y)
    fig = plot_projection(m, X, y, top=4)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sum(lab.startswith("other") for lab in labels) == 1
    assert labels[0].startswith("0 (")  # the largest class keeps its colour
    assert len([lab for lab in labels if re.search(r"\(\d", lab)]) == 5  # 4 classes + other
    assert "the 4 largest are shown" in " ".join(t.get_text() for t in fig.texts)


def test_a_class_named_other_is_not_confused_with_the_rest():
    # a class literally named "other" was one legend entry and the hidden classes another,
    # both "other (…)", and the note called the grey ones 'other' too
    X, y = make_classes(n=6000, p=5, k=12, seed=5)
    names = np.array(["other" if v == 0 else f"c{v}" for v in y])
    names[y == 3] = "other"  # the largest class: shown under its own name
    m = sp.BoundaryProjector().fit(X, names)
    fig = plot_projection(m, X, names, top=4)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sum(lab.startswith("other (") for lab in labels) == 1
    assert sum(lab.startswith("other classes (") for lab in labels) == 1
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert "are grey ('other classes')" in text
    assert ClassMap(np.array(["other", "other classes", "x"])).names[-1] == "(other classes)"
    assert ClassMap(np.array(["a", "b"])).names[-1] == "other"


def test_a_legend_of_hundreds_of_colours_lists_the_largest_and_counts_the_rest():
    # --top 200 gave a legend of 200 swatches that filled the figure
    X, y = make_classes(n=9000, p=8, k=60, seed=3)
    y[y == 7] = 5  # class 5 is the largest
    m = sp.BoundaryProjector().fit(X, y)
    fig = plot_projection(m, X, y, top=200)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    swatches = [lab for lab in labels if re.search(r"\(\d", lab)]
    assert len(swatches) == 24
    assert any(lab.startswith("5 (") for lab in swatches)
    rows = {int(lab.split(" (")[0]): int(lab.split("(")[1].rstrip(")").replace(",", ""))
            for lab in swatches}
    counts = np.bincount(y)
    assert min(rows.values()) >= np.sort(counts)[-24]  # the largest ones
    rest = int(counts.sum() - sum(rows.values()))
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert f"the 24 largest of the 59 colours drawn; the other 35 ({rest:,} rows)" in text
    _assert_text_inside(fig)


def test_past_the_views_199_colours_a_class_has_the_same_colour_in_the_png_and_the_view():
    # --top 300 coloured 300 classes in the PNG and 199 in the view: the shown classes' places
    # differed, and so did their colours (23 of the 24 in the legend), while the PNG's legend
    # sends the reader to the view's hover to name its colours
    import json

    from matplotlib.colors import to_hex

    from streamproj.plot import view_projection
    from streamproj.view import MAX_VIEW_CLASSES

    X, y = make_classes(n=12_000, p=4, k=400, seed=5)
    m = sp.BoundaryProjector(shrinkage="auto").fit(X, y)
    fig = plot_projection(m, X, y, top=300)
    cm = fig.streamproj_summary.classmap
    assert cm.n_buckets - 1 == MAX_VIEW_CLASSES - 1
    png = {t.get_text().split(" (")[0]: to_hex(h.get_facecolor())
           for t, h in zip(fig.legends[0].get_texts(), fig.legends[0].legend_handles, strict=True)
           if re.search(r"\(\d", t.get_text())}
    page = view_projection(m, X, y, top=300).html
    data = re.search(r'<script type="application/json" id="sp-data">(.*?)</script>', page, re.S)
    meta = json.loads(data.group(1))
    view = dict(zip(meta["names"], meta["colors"], strict=True))
    assert len(png) == 24
    assert {name: view[name] for name in png} == png
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert f"the {MAX_VIEW_CLASSES - 1} largest are shown" in text
    assert "--top N colours more" not in text


def test_plot_projection_streams_dask_and_takes_pandas_labels():
    X, y = make_classes(n=8000, p=5, k=2, seed=6)
    m = sp.BoundaryProjector().fit(X, y)
    counting = CountingArray(X, 1000)
    Xd = da.from_array(counting, chunks=(1000, 5), asarray=True)
    fig = plot_projection(m, Xd, pd.Series(y), data_name="my rows")
    assert counting.largest_read <= 1000
    s = fig.streamproj_summary
    assert s.n == 8000
    assert s.labelled == 8000
    assert abs(s.correct / s.labelled - m.score(X, y)) < 1e-12
    assert "my rows" in fig.texts[0].get_text() or "my rows" in fig._suptitle.get_text()


def test_pca_panel_from_the_summaries(projected):
    X, y = make_coin(n=3000, p=7)
    stats = sp.accumulate(X, y)
    axes = solvers.pca_axes(stats.total)
    _, _, vt = np.linalg.svd(X - X.mean(0), full_matrices=False)
    for i in range(2):
        assert abs(abs(axes[i] @ vt[i]) - 1) < 1e-10


@pytest.mark.parametrize("extra", [[], ["--compare-pca", "standardized", "--qda"]])
def test_plot_command_writes_png_of_the_requested_size(projected, extra, capsys):
    d = projected
    fig = d / "fig.png"
    assert main(["plot", str(d / "o.zarr"), "--output", str(fig), "--model", str(d / "m"),
                 "--size", "900x600", *extra]) == 0
    assert mpimg.imread(fig).shape[:2] == (600, 900)
    _assert_text_inside(draw_output(d / "o.zarr", sp.load(d / "m"), size=(900, 600),
                                    compare_pca="standardized" if extra else None,
                                    qda=bool(extra)))


@pytest.mark.parametrize("array", ["y", "predicted"])
def test_an_output_whose_arrays_disagree_on_rows_is_named_as_damaged(tmp_path, capsys, array):
    # "y has 5000 rows but z has 6000; they must match": no file, and "z" is no array of OUT
    X, y = make_coin(n=3000)
    d = tmp_path
    write_zarr(d / "d.zarr", X, y, chunk_rows=500)
    main(["fit", str(d / "d.zarr"), "--model", str(d / "m")])
    main(["project", str(d / "m"), str(d / "d.zarr"), "--output", str(d / "o.zarr")])
    group = zarr.open_group(str(d / "o.zarr"), mode="r+", use_consolidated=False)
    values = group[array][:]
    del group[array]
    with warnings.catch_warnings():  # (zarr: consolidated metadata is not in Zarr v3's spec)
        warnings.simplefilter("ignore")
        group.create_array(array, data=values[:2500], chunks=(500,))
        zarr.consolidate_metadata(str(d / "o.zarr"))
    for name in ("f.png", "v.html"):
        capsys.readouterr()
        assert main(["plot", str(d / "o.zarr"), "--output", str(d / name)]) == 2
        line = one_error_line(capsys)
        assert (f"{d / 'o.zarr'}/{array} has 2,500 rows but {d / 'o.zarr'}/projection has 3,000"
                in line)
        assert "damaged" in line
        assert not (d / name).exists()


def test_a_size_too_small_for_the_text_is_one_line_and_writes_nothing(tmp_path, capsys):
    # 40 classes (24 in the legend) and two PCA panels do not fit 640x480 even with the text at
    # 72 % of its size
    X, y = make_classes(n=6000, p=8, k=40, seed=3)
    d = tmp_path
    write_zarr(d / "d.zarr", X, y, chunk_rows=1500)
    main(["fit", str(d / "d.zarr"), "--model", str(d / "m")])
    main(["project", str(d / "m"), str(d / "d.zarr"), "--output", str(d / "o.zarr")])
    capsys.readouterr()
    fig = d / "small.png"
    args = ["plot", str(d / "o.zarr"), "--output", str(fig), "--model", str(d / "m"),
            "--compare-pca", "both", "--top", "24"]
    assert main([*args, "--size", "640x480"]) == 2
    err = one_error_line(capsys)
    need = re.search(r"640x480 is too small .* give --size 640x(\d+) or taller", err)
    assert need
    assert not fig.exists()
    # the height it names is enough (it was refused by rounding once)
    assert main([*args, "--size", f"640x{need[1]}"]) == 0


def test_plot_command_html_and_errors(projected, tmp_path, capsys):
    d = projected
    assert main(["plot", str(d / "o.zarr"), "--output", str(d / "v.html")]) == 0
    page = (d / "v.html").read_text()
    assert "<script src" not in page
    assert "http://" not in page
    assert "https://" not in page
    code = main(["plot", str(d / "o.zarr"), "--output", str(d / "g.png"), "--compare-pca"])
    assert code == 2
    assert "--compare-pca needs the model: pass --model MODEL" in capsys.readouterr().err
    code = main(["plot", str(d / "o.zarr"), "--output", str(d / "g.png"), "--qda"])
    assert code == 2
    assert "error: --qda needs the model: pass --model MODEL" in capsys.readouterr().err
    code = main(["plot", str(d / "o.zarr"), "--output", str(d / "g.png"), "--axes", "0"])
    assert code == 2
    assert "--axes must be two numbers" in capsys.readouterr().err
    code = main(["plot", str(d / "o.zarr"), "--output", str(d / "g.png"), "--axes", "-1,0"])
    assert code == 2  # named as a bad pair, not argparse's "expected one argument"
    assert ("axes (--axes on the command line) must be two different axes in 0..1; got (-1, 0)"
            in one_error_line(capsys))
    code = main(["plot", str(d / "o.zarr"), "--output", str(d / "g.png"), "--size", "-5x100"])
    assert code == 2  # the same for a size
    assert "--size must be between 640x480 and 8000x8000 pixels; got -5x100" in one_error_line(capsys)
    code = main(["plot", str(d / "o.zarr"), "--output", str(d / "g.png"), "--axes", "0,2"])
    assert code == 2  # a newcomer asking for a third axis is told where axes come from
    assert "(the projection has 2; more need a model fitted with a larger --n-components)" in \
        one_error_line(capsys)
    code = main(["plot", str(tmp_path / "nothing.zarr"), "--output", str(d / "g.png")])
    assert code == 2
    assert "no such input" in capsys.readouterr().err
    assert not (d / "g.png").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--output", "{d}/x.txt"], "the name must end in one of .png"),
        (["--output", "{d}/report"], "the name must end in one of .png"),
        (["--output", "{d}/v.html", "--stretch"], "--stretch applies to static figures only"),
        (["--output", "{d}/v.html", "--model", "{d}/m", "--qda"],
         "--model, --qda apply to static figures only"),
        (["--output", "{d}/a.png", "--size", "400x300"], "between 640x480 and 8000x8000"),
        (["--output", "{d}/a.png", "--size", "100000x100000"], "between 640x480 and 8000x8000"),
    ],
)
def test_plot_refuses_what_it_cannot_draw_before_reading(projected, capsys, args, message):
    d = projected
    (d / "report.png").write_bytes(b"not mine")
    before = sorted(p.name for p in d.iterdir())
    code = main(["plot", str(d / "o.zarr"), *[a.format(d=d) for a in args]])
    err = one_error_line(capsys)
    assert code == 2
    assert message in err
    assert sorted(p.name for p in d.iterdir()) == before
    assert (d / "report.png").read_bytes() == b"not mine"


@pytest.mark.parametrize(("given", "said", "held"), [
    ("m2", "m2 is a streamproj model directory, not a projection", "a streamproj model directory"),
    ("d2.zarr", "d2.zarr is not a streamproj projection (no streamproj attributes;",
     "no streamproj attributes in its zarr.json"),
    ("rows.parquet", "rows.parquet is a file, not a streamproj projection", "it is a file, not a folder"),
])
def test_plot_of_a_model_or_an_input_says_what_it_draws(projected, capsys, given, said, held):
    """A newcomer's `plot MODEL` (or plot of the input rows) is told what plot reads, and
    `project --append` to one what it appends to."""
    import shutil

    d = projected
    shutil.copytree(d / "m", d / "m2")
    shutil.copytree(d / "d.zarr", d / "d2.zarr")
    (d / "rows.parquet").write_bytes(b"PAR1")
    before = {str(p.relative_to(d)): p.stat().st_mtime_ns for p in d.rglob("*")}
    capsys.readouterr()
    # (was: "no Zarr group at m2")
    assert main([str(a) for a in ["plot", d / given, "--output", d / "p.png"]]) == 2
    err = one_error_line(capsys)
    assert said in err
    assert "'streamproj project MODEL INPUT --output OUT' writes" in err
    assert main([str(a) for a in ["project", d / "m", d / "d.zarr", "--output", d / given,
                                  "--append"]]) == 2
    err = one_error_line(capsys)
    assert f"{given} exists and is not a streamproj output ({held})" in err
    assert "adds rows to an output written by 'streamproj project', so it was left untouched" in err
    assert not (d / "p.png").exists()
    assert {str(p.relative_to(d)): p.stat().st_mtime_ns for p in d.rglob("*")} == before


def test_plot_of_a_folder_of_the_users_says_what_it_holds(projected, capsys):
    """It said "no Zarr group at F", as if the user had mistyped a Zarr path."""
    d = projected
    (d / "mine").mkdir()
    (d / "mine" / "notes.txt").write_text("mine")
    code = main(["plot", str(d / "mine"), "--output", str(d / "p.png")])
    err = one_error_line(capsys)
    assert code == 2
    assert (f"{d / 'mine'} is not a streamproj projection (a folder with no zarr.json, holding "
            "notes.txt; a projection is the Zarr group 'streamproj project MODEL INPUT --output "
            "OUT' writes)") in err
    assert not (d / "p.png").exists()
    assert [p.name for p in (d / "mine").iterdir()] == ["notes.txt"]


def test_plot_refuses_a_model_that_did_not_write_the_output(projected, capsys):
    d = projected
    assert main(["fit", str(d / "d.zarr"), "--model", str(d / "other"), "--shrinkage", "0.5"]) == 0
    capsys.readouterr()
    code = main(["plot", str(d / "o.zarr"), "--output", str(d / "c.png"), "--model",
                 str(d / "other"), "--compare-pca"])
    assert code == 2
    assert "not of the model given" in one_error_line(capsys)
    assert not (d / "c.png").exists()


def test_plot_of_an_appended_output_with_its_updated_model_says_so(projected, capsys):
    """An update gives the model a new id and an append keeps OUT's frame: the refusal said
    "the model did not write OUT", false of the model's own directory, with no way out."""
    d = projected
    X, y = make_coin(n=5_000, seed=7)
    write_zarr(d / "new.zarr", X, y, chunk_rows=2500)
    assert main(["update", str(d / "m"), str(d / "new.zarr")]) == 0
    assert main(["project", str(d / "m"), str(d / "d.zarr"), str(d / "new.zarr"), "--output",
                 str(d / "o.zarr"), "--append"]) == 0
    capsys.readouterr()
    code = main(["plot", str(d / "o.zarr"), "--output", str(d / "q.png"), "--model",
                 str(d / "m"), "--qda"])
    err = one_error_line(capsys)
    assert code == 2
    assert "did not write" not in err
    assert "is in the frame of model id" in err
    assert f"({d / 'm'} v000001), not of the model given" in err
    assert "version v000002" in err
    assert "--output OUT --overwrite), or draw it without --model" in err
    assert not (d / "q.png").exists()


def test_plot_replaces_only_what_it_wrote_in_every_format(projected, capsys, tmp_path):
    """A figure of any type plot writes carries its mark; images of the user's are refused."""
    import matplotlib.pyplot as plt

    d = projected
    for suffix in ("html", "png", "pdf", "svg", "eps", "jpg", "tiff", "webp"):
        assert main(["plot", str(d / "o.zarr"), "--output", str(d / f"f.{suffix}")]) == 0
        assert main(["plot", str(d / "o.zarr"), "--output", str(d / f"f.{suffix}")]) == 0
    (d / "mine.html").write_text("<!DOCTYPE html><html>my notes</html>")
    fig = plt.figure()
    fig.savefig(d / "mine.png")  # matplotlib's own, not streamproj's
    plt.close(fig)
    for name in ("mine.html", "mine.png"):
        before = (d / name).read_bytes()
        capsys.readouterr()
        assert main(["plot", str(d / "o.zarr"), "--output", str(d / name)]) == 2
        assert "exists and is not a figure streamproj wrote" in one_error_line(capsys)
        assert (d / name).read_bytes() == before


def test_webp_is_lossless_and_jpeg_keeps_the_colours_of_the_png(projected):
    # WebP and JPEG were written at Pillow's defaults (lossy, quality 75, chroma halved): the
    # colours of neighbouring cells, each a mix of classes by count, bled into each other
    from PIL import Image

    d = projected
    for suffix in ("png", "webp", "jpg"):
        assert main(["plot", str(d / "o.zarr"), "--output", str(d / f"g.{suffix}")]) == 0
    png = np.asarray(Image.open(d / "g.png").convert("RGB"), dtype=np.int16)
    webp = np.asarray(Image.open(d / "g.webp").convert("RGB"), dtype=np.int16)
    jpg = np.asarray(Image.open(d / "g.jpg").convert("RGB"), dtype=np.int16)
    assert np.array_equal(webp, png)
    error = np.abs(jpg - png)
    assert error.mean() < 1.0, error.mean()
    assert np.percentile(error, 99) <= 12, np.percentile(error, 99)


def test_a_failed_plot_leaves_the_old_figure_whole_and_keeps_link_and_mode(projected, capsys,
                                                                          monkeypatch):
    import os
    import stat

    from streamproj import store

    d = projected
    assert main(["plot", str(d / "o.zarr"), "--output", str(d / "f.png")]) == 0
    before = (d / "f.png").read_bytes()
    os.chmod(d / "f.png", 0o600)
    real_replace = os.replace

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.os, "replace", full_disk)
    capsys.readouterr()
    assert main(["plot", str(d / "o.zarr"), "--output", str(d / "f.png"), "--size", "900x700"]) == 2
    assert "No space left on device" in one_error_line(capsys)
    assert (d / "f.png").read_bytes() == before
    assert sorted(p.name for p in d.iterdir() if p.name.startswith(".f.png")) == []
    monkeypatch.setattr(store.os, "replace", real_replace)
    # through a symlink: the target is replaced, the link and the file's mode stay
    (d / "link.png").symlink_to(d / "f.png")
    assert main(["plot", str(d / "o.zarr"), "--output", str(d / "link.png"), "--size",
                 "900x700"]) == 0
    assert (d / "link.png").is_symlink()
    assert (d / "f.png").read_bytes() != before
    assert stat.S_IMODE((d / "f.png").stat().st_mode) == 0o600


def test_plot_leaves_a_device_a_fifo_and_a_linked_empty_file_alone(projected, capsys):
    # fig.png -> a device node (as /dev/null), fig.svg -> a FIFO, fig.pdf -> someone's empty
    # lock file: each became a regular image file, exit 0 (the mark check skipped empty files)
    import os
    import stat

    from streamproj import store
    from streamproj.errors import OutputExistsError
    from streamproj.plot import plot_output

    d = projected
    devs = d / "devs"
    devs.mkdir()
    os.mkfifo(devs / "fifo")
    (devs / "precious.lock").touch()
    targets = {"fig.svg": devs / "fifo", "fig.pdf": devs / "precious.lock"}
    if os.geteuid() == 0:  # (a device node needs root)
        os.mknod(devs / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        targets["fig.png"] = devs / "null"
    for name, target in targets.items():
        (d / name).symlink_to(target)
        capsys.readouterr()
        assert main(["plot", str(d / "o.zarr"), "--output", str(d / name)]) == 2
        line = one_error_line(capsys)
        assert f"plot --output {d / name} is " in line
        assert "left untouched" in line
    assert stat.S_ISFIFO((devs / "fifo").stat().st_mode)
    assert (devs / "precious.lock").stat().st_size == 0
    if "fig.png" in targets:
        assert stat.S_ISCHR((devs / "null").stat().st_mode)
    # the Python API's writer refuses a FIFO too (it writes through links)
    with pytest.raises(OutputExistsError, match="is not a regular file"):
        plot_output(d / "o.zarr", d / "fig.svg")
    with pytest.raises(OutputExistsError, match="is not a regular file"):
        store.write_bytes(devs / "fifo", b"x")
    assert stat.S_ISFIFO((devs / "fifo").stat().st_mode)
    # a figure made read-only is kept as such (a rename would have passed over its mode)
    assert main(["plot", str(d / "o.zarr"), "--output", str(d / "kept.png")]) == 0
    kept = (d / "kept.png").read_bytes()
    os.chmod(d / "kept.png", 0o444)
    capsys.readouterr()
    assert main(["plot", str(d / "o.zarr"), "--output", str(d / "kept.png"), "--size",
                 "900x700"]) == 2
    assert "kept.png is read-only (mode -r--r--r--); it was left untouched" in one_error_line(capsys)
    assert (d / "kept.png").read_bytes() == kept
    # an empty file of its own (say tempfile's) is still a place for a figure
    (d / "empty.png").touch()
    assert main(["plot", str(d / "o.zarr"), "--output", str(d / "empty.png")]) == 0
    assert (d / "empty.png").stat().st_size > 0


def test_many_classes_from_a_stored_output(tmp_path):
    X, y = make_classes(n=3000, p=5, k=4, seed=3)
    m = sp.BoundaryProjector().fit(X, y)
    jobs.project(m, X, tmp_path / "o.zarr", y=y)
    plot_output(tmp_path / "o.zarr", tmp_path / "f.png")
    assert mpimg.imread(tmp_path / "f.png").shape[2] in (3, 4)


@pytest.mark.slow
def test_demo_end_to_end(tmp_path, capsys):
    assert main(["demo", str(tmp_path / "demo"), "--rows", "30000", "--chunk-rows", "7000"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"agrees with classifier 100\.00% of rows", out), out
    for name in ("data.zarr", "model", "projection.zarr", "demo.png", "view.html"):
        assert (tmp_path / "demo" / name).exists()
    assert mpimg.imread(tmp_path / "demo" / "demo.png").shape[1] > 800
    assert main(["demo", str(tmp_path / "demo"), "--rows", "30000"]) == 0  # reruns in place


def test_demo_refuses_a_negative_seed_in_one_line_before_touching_its_folder(tmp_path, capsys):
    # --seed -1 was numpy's traceback from inside the data's writing, which had already
    # replaced DIR/data.zarr with zeros beside the model and projection of the run before
    assert main(["demo", str(tmp_path / "demo"), "--rows", "200", "--chunk-rows", "100"]) == 0
    before = _tree(tmp_path / "demo")
    capsys.readouterr()
    assert main(["demo", str(tmp_path / "demo"), "--rows", "200", "--seed", "-1"]) == 2
    assert "--seed must be 0 or more; got -1" in one_error_line(capsys)
    assert _tree(tmp_path / "demo") == before


def _tree(folder):
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def _matplotlib_png(path):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    fig.savefig(path)
    plt.close(fig)


def test_demo_never_replaces_what_it_did_not_write(tmp_path, capsys):
    # each of the five names the demo writes, taken by something of the user's: one line,
    # exit 2, and the folder byte for byte as it was (the checks come before any write)
    X, y = make_classes(n=200, p=4, seed=3)
    cases = [  # (what takes the name, how, what the line names)
        ("a user's Zarr data", lambda d: write_zarr(d / "data.zarr", X, y), "data.zarr exists"),
        ("notes inside the demo's data",
         lambda d: (main(["demo", str(d), "--rows", "200"]),
                    (d / "data.zarr" / "notes.txt").write_text("mine")),
         "data.zarr also holds notes.txt"),
        ("a folder of notes", lambda d: ((d / "model").mkdir(),
                                         (d / "model" / "notes.txt").write_text("mine")),
         "model exists and is not a model an earlier demo fitted there"),
        ("the user's own model", lambda d: (write_zarr(d.parent / f"{d.name}-x.zarr", X, y),
                                            jobs.fit_model(d.parent / f"{d.name}-x.zarr",
                                                           d / "model")),
         "model exists and is not a model an earlier demo fitted there"),
        ("the user's own projection",
         lambda d: (write_zarr(d.parent / f"{d.name}-x.zarr", X, y),
                    jobs.fit_model(d.parent / f"{d.name}-x.zarr", d.parent / f"{d.name}-m"),
                    jobs.project_model(d.parent / f"{d.name}-m", d.parent / f"{d.name}-x.zarr",
                                       d / "projection.zarr")),
         "projection.zarr exists and is not a projection an earlier demo wrote there"),
        ("a matplotlib PNG", lambda d: _matplotlib_png(d / "demo.png"),
         "demo.png exists and is not a figure streamproj wrote"),
        ("a folder", lambda d: ((d / "projection.zarr").mkdir(),
                                (d / "projection.zarr" / "a").write_text("mine")),
         "projection.zarr exists and is not a projection an earlier demo wrote there"),
        ("a text file", lambda d: (d / "demo.png").write_text("my own notes"),
         "demo.png exists and is not a figure streamproj wrote"),
        ("a web page", lambda d: (d / "view.html").write_text("<html>my page</html>"),
         "view.html exists and is not a view streamproj wrote"),
        ("a Zarr store", lambda d: write_zarr(d, X, y), "is a Zarr store"),
        ("notes inside the demo's projection",
         lambda d: (main(["demo", str(d), "--rows", "200"]),
                    (d / "projection.zarr" / "notes.txt").write_text("mine")),
         "projection.zarr also holds notes.txt"),
    ]
    for i, (taken, make, named) in enumerate(cases):
        folder = tmp_path / f"case{i}"
        folder.mkdir(exist_ok=True)
        make(folder)
        capsys.readouterr()
        before = _tree(folder)
        assert main(["demo", str(folder), "--rows", "200"]) == 2, taken
        assert named in one_error_line(capsys), taken
        assert _tree(folder) == before, taken
    # a view written before the generator mark (its title says what it is) is the demo's too
    old_view = tmp_path / "old-view"
    old_view.mkdir()
    (old_view / "view.html").write_text("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
                                        "<meta charset=\"utf-8\">\n<title>Boundary-preserving "
                                        "projection of data.zarr</title>")
    from streamproj.demo import check_demo_folder

    check_demo_folder(old_view)
    # a demo stopped while writing its data: its folder is still the demo's
    stopped = tmp_path / "stopped"
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return coin_chunk(*args, **kwargs)

    from streamproj import demo as demo_module
    from streamproj.demo import coin_chunk

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(demo_module, "coin_chunk", interrupted)
        with pytest.raises(KeyboardInterrupt):
            demo_module.run_demo(stopped, 400, 4, 100)
    demo_module.check_demo_folder(stopped)
    link = tmp_path / "linked"
    link.mkdir()
    (link / "data.zarr").symlink_to(tmp_path / "case0" / "data.zarr")
    assert main(["demo", str(link), "--rows", "200"]) == 2
    assert "data.zarr exists and is not data an earlier demo wrote" in one_error_line(capsys)


def test_two_class_cells_have_an_edge_exactly_on_the_boundary(projected):
    # a column of cells straddling z0 = 0 mixed the two sides of the classifier
    from streamproj.plot.picture import output_source, summarize

    summary, _, _ = summarize(output_source(projected / "o.zarr"))
    lo, hi = summary.limits[0]
    z0 = zarr.open_group(str(projected / "o.zarr"))["projection"][:, 0]
    for pair, cells in summary.bins.items():
        if 0 not in pair:
            continue
        n = cells[pair.index(0)]
        column = np.floor((z0 - lo) * (n / (hi - lo)))
        edge = round((0 - lo) * (n / (hi - lo)))
        assert abs((0 - lo) * (n / (hi - lo)) - edge) < 1e-9
        assert not np.any((column >= edge) & (z0 < 0))
        assert not np.any((column < edge) & (z0 > 0))
    margin_edge = (0 - lo) * (summary.margin_bins / (hi - lo))
    assert abs(margin_edge - round(margin_edge)) < 1e-9


@pytest.mark.parametrize(("k", "least"), [(8, 25), (14, 26), (24, 26), (50, 24), (199, 13)])
def test_every_class_colour_is_distinct_from_the_others_and_from_other_grey(k, least):
    from streamproj.plot.figure import OTHER_COLOR, _lab, bucket_colors

    colors = bucket_colors(ClassMap(np.arange(k), top=k))
    assert colors.shape == (k + 1, 3)
    assert np.allclose(colors[-1], [int(OTHER_COLOR[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    lab = _lab(colors)
    gap = np.linalg.norm(lab[:, None] - lab[None], axis=-1)
    np.fill_diagonal(gap, np.inf)
    assert gap.min() >= least  # CIE76 distance; 2.3 is "just noticeable"; tab20 reuse gave 0
    # the first eight past the palette are muted (the gamut's farthest were pure blue, lime...)
    assert np.all(np.hypot(lab[8:min(k, 16), 1], lab[8:min(k, 16), 2]) <= 80)
    np.testing.assert_allclose(_lab([[1.0, 1.0, 1.0]]), [[100.0, 0.0, 0.0]], atol=0.01)


def test_compare_pca_refuses_another_input_of_the_same_length(projected, capsys):
    d = projected
    X, y = make_coin(n=20_000, seed=5)  # as many rows as the projected input, other rows
    write_zarr(d / "other.zarr", X, y, chunk_rows=2500)
    code = main(["plot", str(d / "o.zarr"), "--output", str(d / "p.png"), "--model", str(d / "m"),
                 "--compare-pca", "--input", str(d / "other.zarr")])
    assert code == 2
    err = one_error_line(capsys)
    assert "other.zarr is not the input" in err
    assert "d.zarr" in err
    assert not (d / "p.png").exists()
    # the input itself, given explicitly, is accepted
    assert main(["plot", str(d / "o.zarr"), "--output", str(d / "p.png"), "--model", str(d / "m"),
                 "--compare-pca", "--input", str(d / "d.zarr")]) == 0
    assert (d / "p.png").exists()


@pytest.mark.parametrize("dpi", [100, 200])
def test_long_class_names_stay_inside_the_figure_at_any_dpi(dpi):
    X, y = make_coin(n=4000)
    names = np.array(["a" * 60, "b" * 60])[y]  # the wrong-side notes carry the whole name
    m = sp.BoundaryProjector().fit(X, names)
    fig = plot_projection(m, X, names, dpi=dpi)
    _assert_text_inside(fig)
    assert any(("a" * 60) in t.get_text().replace("\n", "").replace("  ", "")
               for t in fig.texts)


def test_class_names_with_dollar_signs_are_drawn_as_written():
    # two "$" in a name were mathtext: "$\\x$" failed the plot, "$10-$20" was drawn in italics
    from matplotlib.text import Text

    X, y = make_coin(n=4000)
    names = np.array(["$\\x$", "price $10-$20"])[y]
    m = sp.BoundaryProjector().fit(X, names)
    fig = plot_projection(m, X, names)
    fig.canvas.draw()  # (where mathtext is parsed)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0].startswith("$\\x$ (")
    assert legend[1].startswith("price $10-$20 (")
    assert all(not t.get_parse_math() for t in fig.findobj(Text) if "$" in t.get_text())


def test_class_names_with_line_breaks_are_drawn_on_one_line():
    # a label "a\nb\nc\nd" was four lines in the legend (over the title and subtitle) and in
    # the notes (over the density key): the layout counts one line per entry and note
    X, y = make_coin(n=4000)
    names = np.array(["line1\nline2\nline3\nline4", "tab\there\r\u2028x"])[y]
    m = sp.BoundaryProjector().fit(X, names)
    fig = plot_projection(m, X, names)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0].startswith("line1\\nline2\\nline3\\nline4 (")
    assert legend[1].startswith("tab\\there\\r\\u2028x (")
    notes = fig.texts[-1].get_text().splitlines()
    assert any(line.startswith("class line1\\nline2\\nline3\\nline4: ") for line in notes)
    _assert_text_inside(fig)


def test_a_class_name_the_font_cannot_draw_is_said_once_by_name(tmp_path):
    # "parrot 🦜" warned "Glyph 129436 (\\N{PARROT}) missing from font(s) DejaVu Sans." twice
    # (measuring the text, then saving it) and named neither the class nor what was drawn
    import warnings

    from streamproj.errors import StreamprojWarning
    from streamproj.plot import save_figure

    X, y = make_coin(n=4000)
    names = np.array(["parrot \U0001F99C", "dog"])[y]
    m = sp.BoundaryProjector().fit(X, names)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # (as a user sees them: once per place and text)
        fig = plot_projection(m, X, names)
        save_figure(fig, tmp_path / "f.png")
    assert [w.category for w in caught] == [StreamprojWarning]
    message = str(caught[0].message)
    assert "\U0001F99C (U+1F99C)" in message
    assert "DejaVu Sans" in message
    assert (tmp_path / "f.png").stat().st_size > 0
    with warnings.catch_warnings():  # a name the font draws: no word
        warnings.simplefilter("error")
        names = np.array(["cat \U0001F431", "dog"])[y]
        save_figure(plot_projection(sp.BoundaryProjector().fit(X, names), X, names),
                    tmp_path / "g.png")


def test_compare_pca_reopens_an_hdf5_input_as_recorded(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    X, y = make_coin(n=3000)
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f.create_dataset("grp/X", data=X, chunks=(500, X.shape[1]))
        f.create_dataset("grp/lab", data=y, chunks=(500,))
    spec = f"{tmp_path / 'in.h5'}:/grp/X"
    assert main(["fit", spec, "--y", "/grp/lab", "--model", str(tmp_path / "m")]) == 0
    assert main(["project", str(tmp_path / "m"), spec, "--y", "/grp/lab",
                 "--output", str(tmp_path / "o.zarr")]) == 0
    for extra in ([], ["--input", spec]):
        assert main(["plot", str(tmp_path / "o.zarr"), "--output", str(tmp_path / "p.png"),
                     "--model", str(tmp_path / "m"), "--compare-pca", *extra]) == 0, capsys.readouterr()


def test_compare_pca_without_a_record_takes_the_models_columns_or_says_why_not(tmp_path):
    X, y = make_coin(n=3000)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(cls=y)
    frame.to_parquet(tmp_path / "in.parquet")
    named = sp.BoundaryProjector().fit(frame.drop(columns="cls"), y)
    jobs.project(named, frame.drop(columns="cls").to_numpy(), tmp_path / "o.zarr", y=y)
    fig = draw_output(tmp_path / "o.zarr", named, compare_pca="raw",
                      input_url=str(tmp_path / "in.parquet"))
    assert len(fig.streamproj_axes) == 2
    bare = sp.BoundaryProjector().fit(X, y)  # no column names: every column but 'y' is read
    jobs.project(bare, X, tmp_path / "o2.zarr", y=y)
    with pytest.raises(InputError, match="has 7 features but the model was fitted on 6"):
        draw_output(tmp_path / "o2.zarr", bare, compare_pca="raw",
                    input_url=str(tmp_path / "in.parquet"))


def test_an_error_in_one_block_stops_the_pass_and_drops_the_work_not_started():
    import time

    z = np.zeros((20_000, 2))
    done = []

    def work(block, start):
        time.sleep(0.002)
        if start == 1000:
            msg = "bad block"
            raise ValueError(msg)
        done.append(start)

    with pytest.raises(ValueError, match="bad block"):
        stream(Blocks({"z": z}, block_rows=100), work, workers=2)
    assert len(done) < 100  # blocks queued behind the failure were cancelled, not all run


def test_zero_rows_draw_an_empty_picture_and_view():
    from streamproj.plot.picture import Source, draw_source
    from streamproj.view import build_view

    def source():
        z, label = np.zeros((0, 2)), np.zeros(0, dtype=int)
        return Source(Blocks({"z": z, "label": label}), np.array([0, 1]), np.eye(2),
                      np.zeros(2), np.array([[1.0, 0.0]]), np.zeros(1), ["a", "b"], "d", "m", "y")

    assert draw_source(source()).streamproj_summary.n == 0
    assert build_view(source()).pyramid.n == 0


def test_plot_command_draws_an_output_written_from_memory(tmp_path):
    X, y = make_coin(n=2000)
    m = sp.BoundaryProjector().fit(X, y)
    jobs.project(m, X, tmp_path / "o.zarr", y=y)  # records no input
    assert main(["plot", str(tmp_path / "o.zarr"), "--output", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").exists()


def test_the_title_names_every_source_an_output_holds(tmp_path):
    from streamproj.plot.picture import output_source

    X, y = make_classes(n=600, p=3, k=2, seed=17)
    for i in range(3):
        write_zarr(tmp_path / f"day-{i}.zarr", X[i * 200:(i + 1) * 200], y[i * 200:(i + 1) * 200])
    jobs.fit_model(str(tmp_path / "day-0.zarr"), tmp_path / "m")
    jobs.project_model(tmp_path / "m", [str(tmp_path / "day-0.zarr")], tmp_path / "o.zarr")
    assert output_source(tmp_path / "o.zarr").data_name == "day-0.zarr"
    jobs.project_model(tmp_path / "m", [str(tmp_path / f"day-{i}.zarr") for i in range(3)],
                       tmp_path / "o.zarr", mode="append")
    assert output_source(tmp_path / "o.zarr").data_name == "day-0.zarr and 2 more sources"


def test_compare_pca_with_an_input_lacking_a_column_points_to_input_not_features(tmp_path, capsys):
    # "name the features with --features": plot has no such option (the model's are read)
    X, y = make_classes(n=2000, p=4, seed=9)
    frame = pd.DataFrame(X, columns=["f0", "f1", "f2", "f3"]).assign(label=y)
    frame.to_parquet(tmp_path / "d.parquet", index=False)
    frame.drop(columns="f2").to_parquet(tmp_path / "nof2.parquet", index=False)
    assert main(["fit", str(tmp_path / "d.parquet"), "--label", "label", "--model",
                 str(tmp_path / "m")]) == 0
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "d.parquet"), "--label", "label",
                 "--output", str(tmp_path / "o.zarr")]) == 0
    capsys.readouterr()
    code = main(["plot", str(tmp_path / "o.zarr"), "--output", str(tmp_path / "p.png"), "--model",
                 str(tmp_path / "m"), "--compare-pca", "--input", str(tmp_path / "nof2.parquet")])
    assert code == 2
    err = one_error_line(capsys)
    assert "'f2'" in err
    assert "pass the input that was projected (--input)" in err
    assert "--features" not in err
    assert not (tmp_path / "p.png").exists()


def test_a_postscript_figure_keeps_the_density_postscript_cannot_make_transparent(projected,
                                                                                  caplog):
    """PostScript has no transparency, and the density is opacity: an EPS drew every filled
    cell at full strength, the empty cells and the density key black. Flattened onto the
    background first, the figure looks as the PNG does and nothing is left for PS to drop."""
    import logging

    from matplotlib.colors import to_rgba
    from matplotlib.image import AxesImage
    from matplotlib.patches import Patch

    from streamproj.plot import _opaque

    d = projected
    fig = draw_output(d / "o.zarr")
    before = _pixels(fig)
    with _opaque(fig):
        after = _pixels(fig)
        flattened = [np.asarray(image.get_array()).shape[-1] for image in fig.findobj(AxesImage)]
        opacities = [(to_rgba(p.get_facecolor())[3], to_rgba(p.get_edgecolor())[3])
                     for p in fig.findobj(Patch)]
    assert np.array_equal(_pixels(fig), before)  # put back as it was: a PNG of it after is its own
    # the density panels and key drawn the same, to within a rounding of the blend (Agg
    # blends onto white as we do); the margin's fills overlap, and PostScript paints the
    # later one over the earlier (every outline drawn above every fill)
    images = fig.findobj(AxesImage)
    assert len(images) >= 2
    height = before.shape[0]
    for image in images:
        (x0, y0), (x1, y1) = image.axes.get_window_extent().get_points()
        rows = slice(int(height - y1) + 2, int(height - y0) - 2)
        cols = slice(int(x0) + 2, int(x1) - 2)
        assert np.abs(after[rows, cols] - before[rows, cols]).max() <= 2
    assert flattened
    assert set(flattened) == {3}  # no alpha channel left
    assert {a for pair in opacities for a in pair} <= {0.0, 1.0}
    with caplog.at_level(logging.WARNING, logger="matplotlib"):
        assert main(["plot", str(d / "o.zarr"), "--output", str(d / "f.eps")]) == 0
    assert "transparency" not in caplog.text
    text = (d / "f.eps").read_bytes()
    assert text.startswith(b"%!PS-Adobe")
    assert b"EPSF" in text.splitlines()[0]


@pytest.mark.parametrize("k", [3, 12])
def test_labels_the_model_does_not_know_are_said_to_be_other_not_counted_as_its_classes(k):
    # rows labelled with a class the model lacks (new data projected by an older model) were
    # grey 'other' with no word of why, and with hidden classes the note counted them as
    # those classes' rows ("the other 4 are grey ('other', 1,593 rows)": 500 were neither)
    X, y = make_classes(n=4000, p=5, k=k, seed=1)
    m = sp.BoundaryProjector().fit(X, y)
    labels = y.copy()
    labels[:500] = 99
    fig = plot_projection(m, X, labels)
    cm = fig.streamproj_summary.classmap
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert "500 rows (12.50%) have labels the model does not know" in text
    assert fig.streamproj_summary.rows[-1] == 500 + np.isin(labels, np.delete(m.classes_, cm.shown)).sum()
    if k > 8:
        hidden = np.delete(m.classes_, cm.shown)
        rows = int(np.isin(labels, hidden).sum())
        assert f"the other {len(hidden)} classes ({rows:,} rows) are grey" in text
    known = plot_projection(m, X, y)  # every label the model's: no such note
    assert "does not know" not in " ".join(t.get_text() for t in known.texts)
    by_prediction = plot_projection(m, X)
    assert "does not know" not in " ".join(t.get_text() for t in by_prediction.texts)


def _drawn_stretch(ax):
    """How many times longer a unit of x is drawn than a unit of y, measured on the canvas."""
    bb = ax.get_window_extent()
    (xa, xb), (ya, yb) = ax.get_xlim(), ax.get_ylim()
    return (bb.width / (xb - xa)) / (bb.height / (yb - ya))


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("size", [None, (1600, 700), (700, 1000)])
def test_a_stretched_figure_is_drawn_at_the_magnification_it_states(d, size):
    # the note gave the ratio of the spans (11.5x) whatever the panel's shape: 13.7x was drawn,
    # 24.4x at 1600x700, 6.0x at 700x1000, and 2.1x in a pair grid
    X, y = make_coin(n=5000)
    m = sp.BoundaryProjector(n_components=d).fit(X, y)
    fig = plot_projection(m, X, y, stretch=True, size=size, compare_pca="raw")
    fig.canvas.draw()
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    said = re.search(r"STRETCHED: .*?x is magnified ([\d.e+]+)x against y; in the PCA panel "
                     r"([\d.e+]+)x\)", text)
    assert said, text
    *projection, pca = fig.streamproj_axes
    assert len(projection) == (1 if d == 2 else 3)
    for ax in projection:  # (a pair grid: one scale for every panel)
        assert _drawn_stretch(ax) == pytest.approx(float(said.group(1)), rel=0.01)
    assert _drawn_stretch(pca) == pytest.approx(float(said.group(2)), rel=0.01)
    _assert_text_inside(fig)


@pytest.mark.parametrize("k", [2, 3])
def test_a_row_the_picture_cannot_place_does_not_agree_with_the_classifier(tmp_path, k):
    # a NaN coordinate (an overflowed projection) wins no side and no region, yet it "agreed"
    # wherever the classifier said the first class: 50.30 % agreement for no row drawn at all
    from streamproj.plot import projection_scores

    X, y = make_classes(n=3000, p=4, k=k, seed=4, spread=3.0)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=500)
    main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m")])
    main(["project", str(tmp_path / "m"), str(tmp_path / "d.zarr"), "--output",
          str(tmp_path / "o.zarr")])
    g = zarr.open_group(str(tmp_path / "o.zarr"), mode="r+")
    z = g["projection"][:]
    z[:400, 0] = np.nan
    g["projection"][:] = z
    fig = draw_output(tmp_path / "o.zarr")
    s = fig.streamproj_summary
    assert s.predicted == 3000
    assert s.agree == 2600  # every placed row agrees (the picture never lies), no other
    text = re.sub(r"\s+", " ", " ".join(t.get_text() for t in fig.texts))
    assert "the picture agrees with the classifier on 86.67% of rows" in text
    assert projection_scores(str(tmp_path / "o.zarr"))[1] == pytest.approx(2600 / 3000)
    z[:] = np.nan
    g["projection"][:] = z
    assert draw_output(tmp_path / "o.zarr").streamproj_summary.agree == 0
