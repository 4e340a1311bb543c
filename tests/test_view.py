"""The interactive HTML view: its pyramid and sample, its size bound, and a real browser."""

import itertools
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import coin_with_rows_at_centre, make_classes, make_coin

import streamproj as sp
from streamproj.plot import view_projection
from streamproj.plot.reading import Blocks, ClassMap, stream
from streamproj.view import MAX_COUNTS, View, build_view
from streamproj.view.html import encode_view, render_page
from streamproj.view.pyramid import Pyramid, finest_within, grid

CHROMIUM = "/usr/bin/chromium"


def _pyramid(z, labels, blocks=None, **kw):
    cm = ClassMap(np.unique(labels))
    p = Pyramid(cm, np.array([[-4.0, 4.0], [-4.0, 4.0]]), **kw)
    b = Blocks({"z": z, "label": labels}, block_rows=blocks or 997)
    stream(b, p.add)
    return p


def test_pyramid_counts_every_cell_exactly_and_levels_sum_up():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(30_000, 2)) * 1.3
    y = rng.integers(0, 3, size=30_000)
    p = _pyramid(z, y, finest=64, coarsest=8)
    (x0, x1), (y0, y1) = p.extent
    gx, gy = p.shape
    inside = (z[:, 0] >= x0) & (z[:, 0] < x1) & (z[:, 1] >= y0) & (z[:, 1] < y1)
    for k in range(3):
        sel = (y == k) & inside
        ref = np.histogram2d(z[sel, 0], z[sel, 1], bins=(np.linspace(x0, x1, gx + 1),
                                                         np.linspace(y0, y1, gy + 1)))[0]
        np.testing.assert_array_equal(p.counts[k], ref)
    levels = p.levels()
    assert len(levels) == 4
    assert levels[0].shape[1:] == (8, 8)
    assert levels[-1].shape[1:] == (64, 64)
    for lv in levels:
        np.testing.assert_array_equal(lv.sum(axis=(1, 2)), p.counts.sum(axis=(1, 2)))
        # every level is the histogram of the rows at its own cell size
        _, lx, ly = lv.shape
        for k in range(3):
            sel = (y == k) & inside
            ref = np.histogram2d(z[sel, 0], z[sel, 1], bins=(np.linspace(x0, x1, lx + 1),
                                                             np.linspace(y0, y1, ly + 1)))[0]
            np.testing.assert_array_equal(lv[k], ref)
    assert p.outside == np.count_nonzero(~inside)


def test_sample_is_bounded_per_tile_and_the_same_in_any_block_order():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(40_000, 2))
    y = rng.integers(0, 2, size=40_000)
    a = _pyramid(z, y, finest=64, tiles=8, per_tile=5)
    b = _pyramid(z, y, blocks=3001, finest=64, tiles=8, per_tile=5)
    assert a.sample["row"].size <= 8 * 8 * 5
    np.testing.assert_array_equal(np.sort(a.sample["row"]), np.sort(b.sample["row"]))
    rows = a.sample["row"]
    np.testing.assert_array_equal(a.sample["x"], z[rows, 0])  # the row index finds the row
    np.testing.assert_array_equal(a.sample["bucket"], y[rows])
    # a sparse tile keeps all its rows: the far outliers are all sampled
    far = np.flatnonzero(np.abs(z).max(axis=1) > 3.3)
    far = far[np.abs(z[far]).max(axis=1) < 4.0]
    assert set(far) <= set(rows.tolist()) or len(far) > 5


@pytest.mark.parametrize("workers", [1, 4])
def test_sample_is_each_tiles_smallest_hashes_whatever_the_merging(workers):
    """Brute force: in every tile, the per_tile rows of smallest hash (merges in flight, threads)."""
    from streamproj.view.pyramid import row_hash

    rng = np.random.default_rng(3)
    n = 60_000
    z = rng.normal(size=(n, 2)) * [1.0, 2.5]
    z[:50] = [30.0, 0.0]  # outside the extent: never sampled
    y = rng.integers(0, 3, size=n)
    p = Pyramid(ClassMap(np.arange(3)), np.array([[-4.0, 4.0], [-8.0, 8.0]]), finest=64,
                tiles=8, per_tile=7)
    stream(Blocks({"z": z, "label": y}, block_rows=1000), p.add, workers=workers)
    (x0, x1), (y0, y1) = p.extent
    gx, gy = p.shape
    ix = np.floor((z[:, 0] - x0) / (x1 - x0) * gx)
    iy = np.floor((z[:, 1] - y0) / (y1 - y0) * gy)
    inside = (ix >= 0) & (ix < gx) & (iy >= 0) & (iy < gy)
    tile = (ix * 8 // gx) * 8 + iy * 8 // gy
    h = row_hash(np.arange(n))
    want = set()
    for t in np.unique(tile[inside]):
        rows = np.flatnonzero(inside & (tile == t))
        want.update(rows[np.argsort(h[rows])[:7]].tolist())
    assert set(p.sample["row"].tolist()) == want
    np.testing.assert_array_equal(p.sample["y"], z[p.sample["row"], 1])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_byte_labels_count_and_sample_as_wide_ones_unknown_values_as_other(dtype):
    """Byte labels take each row's grid from a table over the 256 values: the same as int64's."""
    rng = np.random.default_rng(5)
    z = rng.normal(size=(20_000, 2))
    wide = rng.choice([0, 1, 2, 7, 100], size=20_000)  # 7 and 100: not classes, "other"
    wide[:20] = 300  # the byte dtype wraps it to another value the model does not know
    z[:10] = [500.0, 0.0]  # outside: every row's bucket is counted there too
    pyramids = []
    for labels in (wide, wide.astype(dtype)):
        p = Pyramid(ClassMap(np.arange(3)), np.array([[-4.0, 4.0], [-4.0, 4.0]]), finest=64,
                    tiles=8, per_tile=7)
        stream(Blocks({"z": z, "label": labels}, block_rows=1000), p.add, workers=1)
        pyramids.append(p)
    a, b = pyramids
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.totals, b.totals)
    assert a.counts[3].sum() > 0  # "other" holds the unknown labels
    for k in ("row", "bucket"):
        np.testing.assert_array_equal(a.sample[k], b.sample[k])


@pytest.mark.parametrize("kind", ["gaussian", "incompressible", "incompressible, overview"])
def test_file_size_is_bounded_at_100_million_rows(kind):
    """Synthetic counts of 10^8 rows (no rows needed: the counts are what is stored)."""
    cm = ClassMap(np.array([0, 1, 2]))
    extent = np.array([[-4.0, 4.0], [-4.0, 4.0]])
    overview = None
    if "overview" in kind:  # and an overview of half the counts, every cell full
        overview = (extent * 10, 1024, 8, "double")
    p = Pyramid(cm, extent, finest=1024 if overview else 2048, n_rows=10**8, overview=overview)
    rng = np.random.default_rng(2)
    if overview:
        p.overview["counts"][:] = rng.integers(0, 2**32 - 1, size=p.overview["counts"].shape,
                                               dtype=np.uint32)
    if kind == "gaussian":
        g = np.linspace(-4, 4, 2048)
        dens = np.exp(-(g[:, None] ** 2 + g[None, :] ** 2) / 2)
        for k in range(3):
            lam = dens * (10**8 / 3) / dens.sum() * (1 + 0.3 * k)
            p.counts[k] = rng.poisson(lam).astype(np.uint32)
    else:  # worst case for deflate: every cell of every class a random count
        p.counts[:] = rng.integers(0, 2**32 - 1, size=p.counts.shape, dtype=np.uint32)
    n = (64 * 64 + p.far_tiles**2) * 48  # the sample full (its far rows' tiles too)
    p.sample = {"tile": np.zeros(n, np.intp), "hash": np.zeros(n, np.uint64),
                "x": rng.normal(size=n), "y": rng.normal(size=n),
                "bucket": rng.integers(0, 3, n), "cls": rng.integers(0, 3, n),
                "row": rng.integers(0, 10**8, n)}
    payload, stored = encode_view(p, {"names": cm.names})
    page = render_page(payload, "t")
    assert len(page.encode()) <= 20 * 2**20
    assert stored >= (8 if kind == "gaussian" else 4)


def test_view_from_python_and_jupyter(tmp_path):
    X, y = make_classes(n=5000, p=4, k=3, seed=2)
    m = sp.BoundaryProjector().fit(X, y)
    v = view_projection(m, X, y)
    assert isinstance(v, View)
    assert v.stored_levels >= 8
    frame = v._repr_html_()
    assert frame.startswith("<iframe srcdoc=")
    assert "&lt;canvas" in frame
    assert v.save(tmp_path / "v.html") == tmp_path / "v.html"


def test_the_pages_placeholders_in_names_and_title_stay_text():
    # a class named "{{SCRIPT}}" had the script pasted into the page's data: the page did not load
    import json
    import re

    payload = {"names": ["{{SCRIPT}}", "{{DATA}}", "{{TITLE}}"], "title": "{{SCRIPT}}"}
    page = render_page(payload, "data {{DATA}} {{SCRIPT}}")
    data = re.search(r'<script type="application/json" id="sp-data">(.*?)</script>', page, re.S)
    assert json.loads(data.group(1)) == payload
    assert "<title>data {{DATA}} {{SCRIPT}}</title>" in page
    assert page.count('"use strict"') == 1  # the script once, where it belongs


def test_the_pages_data_cannot_change_how_the_html_parser_reads_its_script():
    # a class named "<!--<script>" put the parser in the script's "double escaped" state: the
    # data's own </script> did not end it, the page's script was swallowed and nothing drew
    import json
    import re

    names = ["<!--<script>", "<!--", "<script>", "</script>", "-->", "a & b \u2028"]
    page = render_page({"names": names}, "t")
    data = re.search(r'<script type="application/json" id="sp-data">(.*?)</script>', page, re.S)
    assert json.loads(data.group(1)) == {"names": names}
    assert "<" not in data.group(1)  # no tag, comment or end tag can start inside the data


def test_a_few_far_rows_do_not_set_the_views_cells():
    # 0.05 % of the rows 10^4 times further out: the extent took them in, and its finest
    # cell held nearly every other row
    rng = np.random.default_rng(12)
    X, y = make_classes(n=40_000, p=4, k=2, seed=12)
    far = rng.random(X.shape[0]) < 0.0005
    m = sp.BoundaryProjector().fit(X[~far], y[~far])
    X = X.copy()
    X[far] = (X[far] - X.mean(axis=0)) * 1e4
    p = view_projection(m, X, y).pyramid
    z = m.transform(X[~far])
    span = p.extent[:, 1] - p.extent[:, 0]  # (square cells: the longer side sets both)
    assert np.all(span < 5 * np.ptp(z, axis=0).max()), span  # far rows: 10^4 times that
    assert p.extent[0, 0] < 0 < p.extent[0, 1]
    assert np.count_nonzero(p.counts.sum(axis=0)) > 2000  # the rows spread over many cells


def _far_source(n=60_000, k=4, seed=21):
    """Classes about the origin, some rows of one heavy-tailed (Cauchy), a small group far out."""
    from streamproj.plot.picture import Source

    rng = np.random.default_rng(seed)
    label = rng.integers(0, k, size=n)
    centres = np.array([[-3.0, 0.0], [3.0, 0.0], [0.0, 3.0], [0.0, -3.0]])[:k]
    z = rng.normal(size=(n, 2)) + centres[label]
    tail = (label == 1) & (rng.random(n) < 0.2)  # a fifth of class 1
    z[tail] += rng.standard_cauchy(size=(tail.sum(), 2)) * 0.5
    far = (label == 0) & (rng.random(n) < 0.016)  # a far group: 0.8 % of the rows (k = 2)
    z[far] += (250.0, 160.0)
    classes = np.arange(k)
    return Source(Blocks({"z": z, "label": label}, block_rows=7_919), classes, np.eye(2),
                  np.zeros(2), np.eye(k, 2), np.zeros(k), ["z0", "z1"], "far", "model", "y")


def _histograms(z, label, classes, lower, shape, cell):
    """Exact per-class counts of ``z`` on a grid (np.histogram2d), rows beyond it left out."""
    bins = [lower[a] + np.arange(shape[a] + 1) * cell[a] for a in range(2)]
    return np.stack([np.histogram2d(z[label == c, 0], z[label == c, 1], bins=bins)[0]
                     for c in classes])


@pytest.mark.parametrize("k", [2, 4])
def test_a_heavy_tail_and_a_far_class_leave_the_core_its_fine_cells(k, monkeypatch):
    # a few far rows set the extent: one grid over it gave the core (97 % of the rows in 1 % of
    # the extent) cells 7 px wide at 4x zoom; now a fine grid covers the bulk, an overview the rest
    import streamproj.view

    source = _far_source(k=k)
    z, label = source.blocks.arrays["z"], source.blocks.arrays["label"]
    p = build_view(source).pyramid
    o = p.overview
    assert o is not None
    with monkeypatch.context() as m:  # one grid over the whole extent, as before
        m.setattr(streamproj.view, "_tiers", lambda *a: None)
        one = build_view(source).pyramid
    assert one.overview is None
    assert np.prod(one.cell / p.cell) >= 4  # cells a quarter of the area or less
    b = p.counts.shape[0]
    assert p.counts.size + o["counts"].size <= MAX_COUNTS  # the pass's memory, as before
    # every row once: on the fine grid, on the overview's alone, or outside both
    np.testing.assert_array_equal(p.totals[:k], np.bincount(label, minlength=k))
    assert p.n == z.shape[0]
    # the fine levels count the rows on the fine grid exactly; the overview's finest all rows
    shape = p.shape
    np.testing.assert_array_equal(p.counts[:k], _histograms(z, label, source.classes,
                                                            p.extent[:, 0], shape, p.cell))
    levels = p.overview_levels()
    assert len(levels) == o["n_levels"]
    np.testing.assert_array_equal(levels[-1][:k], _histograms(z, label, source.classes,
                                                               o["lower"], o["shape"], o["cell"]))
    for coarse, fine in itertools.pairwise(levels):
        np.testing.assert_array_equal(coarse, fine.reshape(b, coarse.shape[1], 2, coarse.shape[2], 2)
                                      .sum(axis=(2, 4)))
    assert levels[0].sum() + p.outside == z.shape[0]
    if k == 2:  # z[0] = 0 an edge of every overview level's cells, as of the fine grid's
        coarsest = o["cell"][0] * 2 ** (o["n_levels"] - 1)
        assert abs(-o["lower"][0] / coarsest - round(-o["lower"][0] / coarsest)) < 1e-9


def test_a_cloud_with_no_far_rows_keeps_one_grid():
    # the overview only where it buys cells four times finer: a plain cloud is as before
    for source in (_thin_source(), _needle_source()):
        assert build_view(source).pyramid.overview is None


@pytest.mark.parametrize("far", [(3000.0, 3000.0), (400.0, 0.0), (0.0, -1e6)])
def test_far_rows_at_any_distance_or_along_one_axis_keep_the_tiers(far, monkeypatch):
    # the overview's cells were whole blocks of the fine grid's, so past ~300 core widths it
    # could not reach and the view fell back to one coarse grid; a far group along one axis
    # failed the per-axis gain test; and rows on the overview alone were never sampled
    import streamproj.view
    from streamproj.plot.picture import Source

    rng = np.random.default_rng(41)
    n = 40_000
    label = rng.integers(0, 3, size=n)
    z = rng.normal(size=(n, 2)) + np.array([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.5]])[label]
    away = (label == 2) & (rng.random(n) < 0.02)  # 0.7 % of the rows, far out
    z[away] += far
    source = Source(Blocks({"z": z, "label": label}, block_rows=4_099), np.arange(3), np.eye(2),
                    np.zeros(2), np.eye(3, 2), np.zeros(3), ["z0", "z1"], "far", "model", "y")
    p = build_view(source).pyramid
    assert p.overview is not None
    with monkeypatch.context() as m:
        m.setattr(streamproj.view, "_tiers", lambda *a: None)
        one = build_view(source).pyramid
    assert np.prod(one.cell / p.cell) >= 4
    o = p.overview
    np.testing.assert_array_equal(p.overview_levels()[-1][:3], _histograms(
        z, label, source.classes, o["lower"], o["shape"], o["cell"]))
    np.testing.assert_array_equal(p.counts[:3], _histograms(z, label, source.classes,
                                                            p.extent[:, 0], p.shape, p.cell))
    np.testing.assert_array_equal(p.totals[:3], np.bincount(label, minlength=3))
    # the overview's cells of far rows are marked, the fine grid's rows not
    beyond = ~((z >= p.extent[:, 0]) & (z < p.extent[:, 1])).all(axis=1)
    cells = ((z[beyond] - o["lower"]) / o["cell"]).astype(int)
    assert p.overview_only()[cells[:, 0], cells[:, 1]].all()
    assert p.overview_only().sum() == len({tuple(c) for c in cells})
    # far rows are in the sample, in tiles of their own: most of a small far group (in the
    # first view's edge tiles, or one of its tiles, a tile's worth of 48 at most)
    sampled = np.isin(p.sample["row"], np.flatnonzero(away))
    assert sampled.sum() >= away.sum() // 2 > p.per_tile
    np.testing.assert_array_equal(p.sample["x"], z[p.sample["row"], 0])


def test_a_row_on_the_fine_grids_edge_is_in_the_overview_too():
    # the overview, centred by its own arithmetic, ended a few ulps short of the fine grid: a
    # row there was drawn on the fine grid and lost from the overview, n and the totals
    import streamproj.view as view

    bulk, limits = np.array([[-1.9, 1.2]] * 2), np.array([[-3400.0, 1.2], [-1.9, 1.2]])
    cm = ClassMap(np.arange(3))
    single = finest_within(limits, cm.n_buckets, MAX_COUNTS, (None, None), view._coarsest)
    extent, (finest, coarsest, widen), overview = view._tiers(limits, bulk, cm.n_buckets,
                                                              (None, None), single)
    p = Pyramid(cm, extent, finest=finest, coarsest=coarsest, widen=widen, overview=overview,
                n_rows=3)
    o = p.overview
    assert o["lower"][0] + o["shape"][0] * o["cell"][0] < p.extent[0, 1]  # (the gap)
    edge = 1.1999999999999  # on the fine grid, beyond the overview by its arithmetic
    p.add({"z": np.array([[edge, 0.0], [0.5, 0.5], [-3000.0, 0.0]]), "label": np.array([0, 1, 2])})
    assert p.counts.sum() == 2
    assert p.overview["counts"].sum() == 3
    assert p.n == 3
    np.testing.assert_array_equal(p.totals, [1, 1, 1, 0])


def test_browser_draws_the_fine_grid_where_no_far_row_is_in_view(page_of):
    view = build_view(_far_source(k=4))
    p = view.pyramid
    fine, over = p.levels(), p.overview_levels()
    page, problems = page_of(view)
    box = page.locator("#sp-canvas").bounding_box()

    def hover_at(x, y):
        sx, sy = page.evaluate("([x, y]) => window.streamproj.toScreen(x, y)", [x, y])
        page.mouse.move(box["x"] + sx, box["y"] + sy)
        return page.evaluate("window.streamproj.hover")

    state = page.evaluate("window.streamproj.state()")
    assert state["tier"] == "overview"  # the far group is in the first view: every row drawn
    assert "overview level" in page.inner_text("#sp-status")
    assert "overview of" in page.inner_text("#sp-notes")
    assert "tiles of their own" in page.inner_text("#sp-notes")
    h = hover_at(0.0, 0.0)
    assert h["tier"] == "overview"
    assert h["counts"] == _hovered_counts(over, h)
    # zoomed into the core (no row beyond the fine grid in view): the fine grid's cells
    page.evaluate("() => { const api = window.streamproj, r = api.plotRect();"
                  " const [x, y] = api.toScreen(0, 0); api.zoom(16, x, y); }")
    state = page.evaluate("window.streamproj.state()")
    assert state["tier"] == "fine", state
    h = hover_at(3.0, 0.1)  # the heart of class 1
    assert h["tier"] == "fine"
    assert h["counts"] == _hovered_counts(fine, h)
    assert sum(h["counts"]) > 0
    # panned to the far group: the overview again, with its rows
    page.evaluate("window.streamproj.panTo(247, 160)")  # (class 0 about (-3, 0), moved)
    state = page.evaluate("window.streamproj.state()")
    assert state["tier"] == "overview", state
    h = hover_at(247.0, 160.0)
    assert h["counts"] == _hovered_counts(over, h)
    assert sum(h["counts"]) > 0
    # zoomed into the far group: the overview's cells, and its sampled rows once they are big
    for _ in range(12):
        state = page.evaluate("window.streamproj.state()")
        if state["pointsShown"]:
            break
        page.evaluate("() => { const api = window.streamproj, [x, y] = api.toScreen(247, 160);"
                      " api.zoom(2, x, y); }")
    assert state["tier"] == "overview", state
    assert state["level"] == state["overviewLevels"] - 1
    assert state["pointsShown"] > 0  # (rows beyond the fine grid were never sampled)
    assert problems == []


def _thin_source(n=20_000, seed=8, spread=(0.3, 3.0)):
    """Two classes ten times as long along z[1] as across z[0] (scripts/bench_plot.py's shape)."""
    from streamproj.plot.picture import Source

    rng = np.random.default_rng(seed)
    label = rng.integers(0, 2, size=n)
    z = rng.normal(size=(n, 2)) * spread
    z[:, 0] += (label - 0.5) * 0.5
    return Source(Blocks({"z": z, "label": label}), np.array([0, 1]), np.eye(2), np.zeros(2),
                  np.array([[1.0, 0.0]]), np.zeros(1), ["z0", "z1"], "thin", "model", "y")


def test_a_long_thin_cloud_gets_finer_cells_in_the_same_memory():
    view = build_view(_thin_source())
    p = view.pyramid
    assert p.counts.size <= MAX_COUNTS  # the pass's memory, as for a square cloud
    # the grid follows the cloud: 1024 x 4096 cells (a square grid's 2048 gave 512 x 2048,
    # a quarter of the memory)
    assert p.shape == (1024, 4096)
    assert view.stored_levels == len(p.levels()) == 10
    assert p.counts.sum() == 20_000


def test_a_cloud_widest_across_the_boundary_keeps_its_cells_within_the_memory():
    # z[0] the longer side: putting 0 on a cell edge pushed the grid's end out, and the side
    # doubled to 4096 x 2048 cells, 3 x 2^23 counts past the bound; now the cells widen a little
    from streamproj.plot.reading import class_spread_limits, with_zero

    source = _thin_source(spread=(3.0, 2.0))
    p = build_view(source).pyramid
    assert p.counts.size <= MAX_COUNTS
    assert p.shape == (2048, 2048)
    z, label = source.blocks.arrays["z"], source.blocks.arrays["label"]
    limits = with_zero(class_spread_limits(z, label, reach=2.0, pad=0.2), 0)  # (the view's)
    assert p.cell[0] <= np.ptp(limits, axis=1).max() / 2048 * 8 / 7 * (1 + 1e-9)
    edge = -p.extent[0, 0] / (p.cell[0] * 256)
    assert abs(edge - round(edge)) < 1e-9  # 0 is a coarsest cell's edge, so every level's


def test_the_finest_grid_is_the_largest_that_fits_edges_included():
    rng = np.random.default_rng(9)
    for _ in range(200):
        lo = rng.normal(size=2) * 5
        extent = np.column_stack([lo, lo + np.exp(rng.normal(size=2) * 1.5)])
        edges = (0.0 if rng.random() < 0.5 else None, None)
        buckets = int(rng.integers(2, 200))
        finest, coarsest, widen = finest_within(extent, buckets, 2**24, edges)
        assert coarsest == 8
        lower, (gx, gy), cell = grid(extent, finest, coarsest, edges, widen)
        assert buckets * gx * gy <= 2**24
        slack = 1e-12 * np.abs(extent).max()  # (centred: lower rounds to the extent's start)
        assert np.all(lower <= extent[:, 0] + slack)
        assert np.all(lower + np.array([gx, gy]) * cell >= extent[:, 1] - slack)
        if edges[0] is not None:
            edge = -lower[0] / (cell[0] * (finest // coarsest))
            assert abs(edge - round(edge)) < 1e-9
        # the finest that fits: twice as fine does not, nor this fine with no widened cells
        for f, how in [(2 * finest, "double"), (2 * finest, "cell")] + (
                [(finest, "double")] if widen == "cell" else []):
            _, (gx2, gy2), _ = grid(extent, f, coarsest, edges, how)
            assert buckets * gx2 * gy2 > 2**24


# ---------------------------------------------------------------- real browser
def _browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    reason = None
    if sync_playwright is None:
        reason = "playwright is not installed (pip install -e '.[test]')"
    elif not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        reason = f"no chromium at {CHROMIUM} (apt-get install chromium)"
    if reason:
        msg = f"BROWSER TESTS OF THE HTML VIEW SKIPPED: {reason}"
        warnings.warn(msg, stacklevel=2)
        pytest.skip(msg)
    return sync_playwright


@pytest.fixture(scope="module")
def page_of(tmp_path_factory):
    sync_playwright = _browser()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists()
                                     else shutil.which("chromium"))

        def open_view(view):
            path = tmp_path_factory.mktemp("view") / "v.html"
            view.save(path)
            page = browser.new_page(viewport={"width": 1200, "height": 780})
            problems = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("request", lambda r: problems.append(f"network: {r.url}")
                    if not r.url.startswith(("file:", "data:", "blob:")) else None)
            page.goto(path.as_uri())
            page.wait_for_function("window.streamproj && window.streamproj.ready", timeout=30_000)
            return page, problems

        yield open_view
        browser.close()


PIXELS = """() => { const c = document.getElementById('sp-canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let ink = 0, orange = 0, blue = 0, sum = 0;
  for (let i = 0; i < d.length; i += 4) {
    const r = d[i], g = d[i + 1], b = d[i + 2];
    if (r < 245 || g < 245 || b < 245) ink++;
    if (r > b + 60 && g > b + 10) orange++;
    if (b > r + 60) blue++;
    sum = (sum * 31 + r + 7 * g + 13 * b) % 1000000007;
  }
  return {ink, orange, blue, sum}; }"""


@pytest.fixture(scope="module")
def two_class_view():
    X, y = make_classes(n=20_000, p=4, k=2, seed=7, spread=3.0)
    m = sp.BoundaryProjector().fit(X, y)
    return view_projection(m, X, y)


@pytest.mark.parametrize("shape", [(3, 16, 32), (1, 1, 1), (2, 8, 8)])
def test_a_level_is_stored_as_the_box_of_cells_holding_rows_and_nothing_is_lost(shape):
    import base64
    import zlib

    from streamproj.view.html import _pack_level

    rng = np.random.default_rng(shape[1])
    for counts in (np.zeros(shape, np.uint32), np.full(shape, 7, np.uint32),
                   np.where(rng.random(shape) < 0.05, rng.integers(1, 70_000, shape), 0)):
        counts = counts.astype(np.uint32)
        blob, dtype, (ox, oy, bx, by) = _pack_level(counts)
        stored = np.frombuffer(zlib.decompress(base64.b64decode(blob)), dtype=f"<{dtype}")
        back = np.zeros_like(counts)
        back[:, ox : ox + bx, oy : oy + by] = stored.reshape(shape[0], bx, by)
        np.testing.assert_array_equal(back, counts)
        if counts.any():  # the box is the smallest: each of its edges holds a row
            box = counts[:, ox : ox + bx, oy : oy + by]
            for edge in (box[:, 0], box[:, -1], box[:, :, 0], box[:, :, -1]):
                assert edge.any()


def test_browser_every_level_the_page_holds_is_the_pyramids(page_of):
    view = build_view(_far_source(k=4))  # both tiers, the data in a small part of each grid
    p = view.pyramid
    page, problems = page_of(view)
    for tier, levels in (("fine", p.levels()), ("overview", p.overview_levels())):
        assert levels
        for depth, counts in enumerate(levels[: view.stored_levels if tier == "fine" else None]):
            held = page.evaluate("([t, l]) => window.streamproj.countsDigest(t, l)", [tier, depth])
            flat = counts.reshape(-1).astype(np.int64)
            at = np.arange(flat.size)
            assert held == [flat.size, int(flat.sum()), int(flat @ (at % 65521 + 1)),
                            int(flat @ (at % 8191 + 1))], (tier, depth)
    assert problems == []


def test_browser_page_loads_without_errors_and_draws(page_of, two_class_view):
    page, problems = page_of(two_class_view)
    px = page.evaluate(PIXELS)
    assert problems == []
    assert px["ink"] > 5000
    assert px["orange"] > 500
    assert px["blue"] > 500


def test_browser_zoom_changes_the_view(page_of, two_class_view):
    page, problems = page_of(two_class_view)
    before = page.evaluate(PIXELS)
    s0 = page.evaluate("window.streamproj.state().s")
    box = page.locator("#sp-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -600)
    page.wait_for_function(f"window.streamproj.state().s > {s0} * 1.5")
    after = page.evaluate(PIXELS)
    assert after["sum"] != before["sum"]
    assert page.evaluate("window.streamproj.state().level") >= 1
    assert problems == []


def test_browser_hiding_a_class_removes_its_colour(page_of, two_class_view):
    page, problems = page_of(two_class_view)
    assert page.evaluate(PIXELS)["orange"] > 500
    page.click('#sp-legend li[data-bucket="1"]')
    px = page.evaluate(PIXELS)
    assert px["orange"] == 0
    assert px["blue"] > 500
    page.click('#sp-legend li[data-bucket="1"]')
    assert page.evaluate(PIXELS)["orange"] > 500
    assert problems == []


def _hovered_counts(levels, hover):
    """The pyramid's counts of the cell hovered: its level's cells, merged ``mx x my``."""
    mx, my, ix, iy = hover["mx"], hover["my"], hover["ix"], hover["iy"]
    cells = levels[hover["level"]][:, ix * mx:(ix + 1) * mx, iy * my:(iy + 1) * my]
    return cells.sum(axis=(1, 2)).tolist()


def test_browser_hover_shows_the_pyramids_counts(page_of, two_class_view):
    page, problems = page_of(two_class_view)
    box = page.locator("#sp-canvas").bounding_box()
    levels = two_class_view.pyramid.levels()
    checked = 0
    for fx, fy in [(0.45, 0.5), (0.55, 0.45), (0.5, 0.6), (0.4, 0.4)]:
        page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
        hover = page.evaluate("window.streamproj.hover")
        if not hover or hover["counts"] is None:
            continue
        shown = page.eval_on_selector_all(
            "#sp-tip tr[data-bucket]", "els => els.map(e => [+e.dataset.bucket,"
            " +e.querySelector('td[data-count]').dataset.count])")
        truth = levels[hover["level"]][:, hover["ix"], hover["iy"]]
        # the classes present in the cell, largest first
        want = sorted(((k, int(v)) for k, v in enumerate(truth) if v), key=lambda kv: -kv[1])
        assert [tuple(row) for row in shown] == want
        assert hover["counts"] == truth.tolist()
        checked += sum(v for _, v in shown)
    assert checked > 0
    assert problems == []


def test_browser_hover_follows_a_zoom_and_a_stretch_under_a_still_pointer(page_of, two_class_view):
    # the tooltip kept the cell and counts from before a zoom (or the x key) until the mouse moved
    page, problems = page_of(two_class_view)
    box = page.locator("#sp-canvas").bounding_box()
    levels = two_class_view.pyramid.levels()
    page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5)
    before = page.evaluate("window.streamproj.hover")
    shown = page.inner_text("#sp-tip")
    for act in ("wheel", "x"):
        if act == "wheel":
            page.mouse.wheel(0, -1500)  # zoom in about 9x, the pointer still
        else:
            page.keyboard.press("x")
        page.wait_for_timeout(100)
        after = page.evaluate("window.streamproj.hover")
        assert (after["level"], after["ix"], after["iy"]) != (before["level"], before["ix"],
                                                              before["iy"])
        text = page.inner_text("#sp-tip")
        assert text != shown
        got = page.eval_on_selector_all(
            "#sp-tip tr[data-bucket]", "els => els.map(e => +e.querySelector('td[data-count]')"
            ".dataset.count)")
        lv = levels[after["level"]]
        mx, my = after["mx"], after["my"]  # cells merged (stretched) or not
        truth = lv[:, after["ix"] * mx:(after["ix"] + 1) * mx,
                   after["iy"] * my:(after["iy"] + 1) * my].sum(axis=(1, 2))
        assert sorted(got, reverse=True) == sorted((int(v) for v in truth if v), reverse=True)
        before, shown = after, text
    assert problems == []


def test_browser_key_starts_at_one_row_and_a_grids_view_names_its_axes(page_of):
    # the key's left end was white (0 rows) under the label "1"; a 3-axis model's view showed
    # z[0] against z[1] without saying that there were more axes
    X, y = make_coin(n=4000)
    view = view_projection(sp.BoundaryProjector(n_components=3).fit(X, y), X, y)
    page, problems = page_of(view)
    left = page.evaluate("""() => { const k = document.getElementById('sp-key');
      return Array.from(k.getContext('2d').getImageData(0, k.height >> 1, 1, 1).data); }""")
    assert left[3] >= 255 * 0.25 - 1  # at least the shading's least opacity, as 1 row has
    assert page.inner_text("#sp-key-labels, #sp-keylabels").split()[0] == "1"
    assert "z[0] against z[1] of 3 axes" in page.inner_text("#sp-subtitle")
    assert problems == []


def test_browser_the_plot_fits_a_small_window(page_of, two_class_view):
    # the canvas was 640 px tall whatever the window: at 800 x 600 its x axis was cut off
    page, problems = page_of(two_class_view)
    page.set_viewport_size({"width": 800, "height": 600})
    page.wait_for_timeout(100)
    box = page.locator("#sp-canvas").bounding_box()
    assert box["y"] + box["height"] <= 600
    assert box["height"] >= 320
    r = page.evaluate("window.streamproj.plotRect()")
    assert r["t"] + r["h"] < box["height"]  # the axis below the plot is on the canvas
    page.set_viewport_size({"width": 1200, "height": 1000})  # and no taller than before
    page.wait_for_timeout(100)
    assert page.locator("#sp-canvas").bounding_box()["height"] <= 642
    assert problems == []


def _densest_in_view(page, view, hidden=()):
    """The most rows (shown classes) in one drawn cell that meets the plot, from the pyramid."""
    st = page.evaluate("window.streamproj.state()")
    r = page.evaluate("window.streamproj.plotRect()")
    (dx0, dy1) = page.evaluate(f"window.streamproj.toData({r['l']}, {r['t']})")
    (dx1, dy0) = page.evaluate(f"window.streamproj.toData({r['l'] + r['w']}, {r['t'] + r['h']})")
    p = view.pyramid
    lv = p.levels()[st["level"]].astype(float)
    mx, my = st["merge"]
    b, gx, gy = lv.shape
    cells = lv.reshape(b, gx // mx, mx, gy // my, my).sum(axis=(2, 4))
    cells[list(hidden)] = 0
    cw = (p.extent[0][1] - p.extent[0][0]) / (gx // mx)
    ch = (p.extent[1][1] - p.extent[1][0]) / (gy // my)
    ix0 = max(0, int(np.floor((dx0 - p.extent[0][0]) / cw)))
    ix1 = min(gx // mx, int(np.ceil((dx1 - p.extent[0][0]) / cw)))
    iy0 = max(0, int(np.floor((dy0 - p.extent[1][0]) / ch)))
    iy1 = min(gy // my, int(np.ceil((dy1 - p.extent[1][0]) / ch)))
    total = cells.sum(axis=0)
    return total[ix0:ix1, iy0:iy1].max(), total.max(), total[ix0:ix1, iy0:iy1].sum()


def test_browser_the_shading_scale_is_the_densest_cell_in_view(page_of, two_class_view):
    # the scale was each level's densest cell anywhere: zoomed into a sparse part the cells
    # all drew near the least opacity, and a zoomed-in dense core was flat
    page, problems = page_of(two_class_view)
    in_view, anywhere, _ = _densest_in_view(page, two_class_view)
    assert page.evaluate("window.streamproj.vmax") == in_view == anywhere
    assert page.inner_text("#sp-keylabels").split()[-1] == f"{int(in_view):,}"
    # zoomed in 16x about a sparse cell (a tenth of the densest one's rows) off the core
    p = two_class_view.pyramid
    total = p.levels()[page.evaluate("window.streamproj.state().level")].sum(axis=0)
    ix, iy = np.argwhere((total > 0) & (total <= total.max() / 10))[0]
    x = p.extent[0][0] + (ix + 0.5) * (p.extent[0][1] - p.extent[0][0]) / total.shape[0]
    y = p.extent[1][0] + (iy + 0.5) * (p.extent[1][1] - p.extent[1][0]) / total.shape[1]
    page.evaluate(f"() => window.streamproj.zoom(16, ...window.streamproj.toScreen({x}, {y}))")
    in_view, anywhere, _ = _densest_in_view(page, two_class_view)
    assert 0 < in_view < anywhere
    assert page.evaluate("window.streamproj.vmax") == in_view
    assert page.inner_text("#sp-keylabels").split()[-1] == f"{int(in_view):,}"
    # the densest cell in view is drawn fully opaque: the scale's top is used
    alpha = page.evaluate("""() => { const c = document.getElementById('sp-canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let a = 0; for (let i = 3; i < d.length; i += 4) a = Math.max(a, d[i]); return a; }""")
    assert alpha == 255
    # a hidden class leaves the scale to the classes shown
    page.click('#sp-legend li[data-bucket="1"]')
    shown, _, _ = _densest_in_view(page, two_class_view, hidden=[1])
    assert page.evaluate("window.streamproj.vmax") == shown
    page.click('#sp-legend li[data-bucket="1"]')
    assert problems == []


def test_two_class_view_has_a_cell_edge_at_the_boundary_on_every_level():
    # classes far from symmetric about the boundary, and a flat cloud (few cells across z[0])
    X, y = make_classes(n=20_000, p=4, k=2, seed=11, spread=2.0)
    X[y == 1] *= 3.0
    m = sp.BoundaryProjector().fit(X, y)
    view = view_projection(m, X, y)
    p = view.pyramid
    z = m.transform(X)
    (x0, x1), (y0, y1) = p.extent
    inside = (z[:, 0] >= x0) & (z[:, 0] < x1) & (z[:, 1] >= y0) & (z[:, 1] < y1)
    assert np.min(np.abs(z[:, 0])) > 1e-9  # no row within rounding of the boundary
    levels = p.levels()
    assert len(levels) >= 8
    for counts in levels:
        _, gx, gy = counts.shape
        assert gx >= 2
        assert gy >= 2
        width = (x1 - x0) / gx
        assert width == (y1 - y0) / gy  # square cells: the page draws one size for both axes
        edge = -x0 / width
        assert abs(edge - round(edge)) < 1e-9  # 0 is a cell edge at this level
        right = counts[:, round(edge):, :].sum()
        assert right == np.count_nonzero(inside & (z[:, 0] > 0))  # no cell straddles 0


def test_view_memory_is_bounded_whatever_the_number_of_classes():
    X, y = make_classes(n=3000, p=4, k=60, seed=2)
    m = sp.BoundaryProjector().fit(X, y)
    view = view_projection(m, X, y, top=59)
    counts = view.pyramid.counts
    assert counts.shape[0] == 60
    assert counts.size <= 2**24
    assert len(view.pyramid.levels()) >= 8


def test_browser_hover_beside_the_boundary_reports_one_side_only(page_of, two_class_view):
    page, problems = page_of(two_class_view)
    box = page.locator("#sp-canvas").bounding_box()
    for side in (-1, 1):
        x, y = page.evaluate(f"() => {{ const s = window.streamproj.state();"
                             f" return window.streamproj.toScreen({side} * 1.5 / s.s, s.cy); }}")
        page.mouse.move(box["x"] + x, box["y"] + y)
        hover = page.evaluate("window.streamproj.hover")
        p = two_class_view.pyramid
        lv = p.levels()[hover["level"]]
        width = (p.extent[0][1] - p.extent[0][0]) / lv.shape[1]
        edge = -p.extent[0][0] / width  # z[0] = 0 is a cell edge, up to rounding
        assert abs(edge - round(edge)) < 1e-9
        # the cell lies on one side (compared by index: lo + width rounds to +1e-15)
        assert (hover["ix"] < round(edge)) if side < 0 else (hover["ix"] >= round(edge))
    assert problems == []


def test_a_cloud_far_from_the_boundary_keeps_its_resolution():
    # all rows at z[0] ~ 1000: the extent is not stretched to reach 0
    rng = np.random.default_rng(3)
    z = np.column_stack([1000 + rng.normal(size=20_000) * 0.5, rng.normal(size=20_000)])
    labels = (z[:, 0] > 1000).astype(int)
    cm = ClassMap(np.array([0, 1]))
    p = Pyramid(cm, np.array([[998.0, 1002.0], [-4.0, 4.0]]), finest=256, coarsest=8,
                edges=(0.0, None))
    stream(Blocks({"z": z, "label": labels}), p.add)
    assert p.extent[0, 1] - p.extent[0, 0] <= 2 * 4.0 + 1e-9  # at most one doubling
    assert p.extent[0, 0] <= 998.0
    assert p.extent[0, 1] >= 1002.0
    coarse = p.cell[0] * 32
    assert abs(p.extent[0, 0] / coarse - round(p.extent[0, 0] / coarse)) < 1e-9
    assert np.count_nonzero(p.counts.sum(axis=0)) > 2000  # not a handful of cells


def test_the_sample_is_tiled_where_the_data_are_not_over_the_whole_extent():
    # the extent is twice the data's reach (for zooming out): tiles over it were mostly empty,
    # and at 10M rows 0.3 % of the rows were dots; tiled over the first view they are 1.8x more
    rng = np.random.default_rng(4)
    z = rng.normal(size=(200_000, 2))
    labels = (z[:, 0] > 0).astype(int)
    cm = ClassMap(np.array([0, 1]))
    extent = np.array([[-10.0, 10.0], [-10.0, 10.0]])
    kept = {}
    for window in (None, np.array([[-3.0, 3.0], [-3.0, 3.0]])):
        p = Pyramid(cm, extent, finest=256, coarsest=8, tiles=16, per_tile=4, window=window)
        stream(Blocks({"z": z, "label": labels}, block_rows=30_000), p.add)
        kept[window is None] = p.sample
        assert p.counts.sum() == len(z)  # the counts do not depend on the tiling
    whole, data = kept[True], kept[False]
    assert len(np.unique(data["tile"])) >= 3 * len(np.unique(whole["tile"]))
    assert len(data["row"]) >= 3 * len(whole["row"])
    assert len(data["row"]) <= 16 * 16 * 4
    # rows beyond the window are still sampled, in its edge tiles
    far = np.abs(data["x"]) > 3.2
    assert far.any()
    edge = data["tile"][far] // 16
    assert set(edge.tolist()) <= {0, 15}


BOUNDARY_PIXELS = """() => { const c = document.getElementById('sp-canvas'), api = window.streamproj;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, r = api.plotRect();
  const b = api.boundary, K = b.b.length, dpr = window.devicePixelRatio || 1;
  const score = (x, y, k) => x * b.A[0][k] + y * b.A[1][k] + b.b[k];
  let dark = 0, worst = 0;
  for (let py = Math.ceil(r.t + 2); py < r.t + r.h - 2; py++)
    for (let px = Math.ceil(r.l + 2); px < r.l + r.w - 2; px++) {
      const i = 4 * (Math.round(py * dpr) * c.width + Math.round(px * dpr));
      if (d[i] > 80 || d[i + 1] > 80 || d[i + 2] > 80) continue;
      dark++;
      // screen distance to the tie of the two best classes at this pixel
      const [x, y] = api.toData(px + 0.5, py + 0.5);
      const s = [...Array(K).keys()].map((k) => score(x, y, k)).map((v, k) => [v, k]).sort((u, v) => v[0] - u[0]);
      const [p, q] = [s[0][1], s[1][1]];
      const [x2, y2] = api.toData(px + 1.5, py + 0.5), [x3, y3] = api.toData(px + 0.5, py + 1.5);
      const gap = (u, v) => score(u, v, p) - score(u, v, q), g0 = gap(x, y);
      const per = Math.hypot(gap(x2, y2) - g0, gap(x3, y3) - g0);
      worst = Math.max(worst, g0 / per);
    }
  return {dark, worst}; }"""


def test_browser_lda_boundaries_are_the_ties_themselves_not_a_staircase(page_of):
    # K > 2: the winning class changes on straight lines; they were drawn as 2-px squares
    # where a 2-px grid of winners changed, up to ~3 px off the line
    X, y = make_classes(n=6000, p=4, k=3, seed=9, spread=3.0)
    page, problems = page_of(view_projection(sp.BoundaryProjector().fit(X, y), X, y))
    for bucket in (0, 1, 2):  # only the boundaries (and the axes' frame) left
        page.click(f'#sp-legend li[data-bucket="{bucket}"]')
    got = page.evaluate(BOUNDARY_PIXELS)
    assert got["dark"] > 300
    assert got["worst"] < 1.5, got  # every dark pixel within 1.5 px of a tie of the two best
    assert "LDA boundaries in this plane" in page.inner_text("#sp-legend")
    assert problems == []


def test_browser_tie_segments_are_the_pngs_exact_polygon_edges(page_of, many_class_view):
    # the view's K > 2 lines are the same winning-polygon edges as the PNG's (which are tested
    # against a brute-force winner map); it searched every pair along sampled lines, O(K^3)
    from streamproj.plot.picture import _tie_segments

    page, problems = page_of(many_class_view)
    rng = np.random.default_rng(12)
    for k in (2, 3, 7, 40, 300):
        A, b = rng.normal(size=(2, k)), rng.normal(size=k)
        if k == 7:  # a class twice and parallel ties: degenerate on purpose
            A[:, 1], A[:, 6], b[6] = 2 * A[:, 0], A[:, 2], b[2]
        box = (-2.0, 3.0, -1.5, 1.0)
        got = page.evaluate("([box, A, b]) => window.streamproj.tieSegments(...box, A, b)",
                            [box, A.tolist(), b.tolist()])
        want = _tie_segments(((box[0], box[1]), (box[2], box[3])), A, b)
        assert len(got) == len(want), k
        g = np.asarray(got, dtype=float).reshape(-1, 2, 2)
        w = np.asarray(want, dtype=float).reshape(-1, 2, 2)
        # each drawn segment is one of the PNG's, either way round, and none twice
        same = np.minimum(np.abs(g[:, None] - w[None]).max(axis=(2, 3)),
                          np.abs(g[:, None] - w[None, :, ::-1]).max(axis=(2, 3)))
        assert np.all(same.min(axis=1) < 1e-9), k
        assert len(set(same.argmin(axis=1))) == len(w), k
    assert problems == []


def test_browser_says_when_the_boundaries_are_a_slice(page_of, many_class_view):
    # twelve classes, two axes: the rule needs eleven directions, the plane shows a slice
    page, problems = page_of(many_class_view)
    legend = page.inner_text("#sp-legend")
    assert "LDA boundaries (slice)" in legend
    assert "the rule also uses directions not shown" in legend
    assert problems == []


@pytest.fixture(scope="module")
def many_class_view():
    X, y = make_classes(n=20_000, p=4, k=12, seed=5, spread=2.0)
    m = sp.BoundaryProjector().fit(X, y)
    return view_projection(m, X, y, top=12)


def test_browser_hover_lists_only_the_classes_in_the_cell_largest_first(page_of, many_class_view):
    page, problems = page_of(many_class_view)
    box = page.locator("#sp-canvas").bounding_box()
    levels = many_class_view.pyramid.levels()
    checked = 0
    for fx, fy in [(0.5, 0.5), (0.45, 0.55), (0.55, 0.45), (0.4, 0.6), (0.6, 0.4)]:
        page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
        hover = page.evaluate("window.streamproj.hover")
        if not hover or hover["counts"] is None:
            continue
        truth = levels[hover["level"]][:, hover["ix"], hover["iy"]]
        shown = page.eval_on_selector_all("#sp-tip td[data-count]",
                                          "els => els.map(e => +e.dataset.count)")
        assert shown == sorted((int(v) for v in truth if v), reverse=True)  # no rows of 0
        total = page.inner_text("#sp-tip tr:last-child td.n")
        assert int(total.replace(",", "")) == int(truth.sum())
        checked += 1 if 0 < len(shown) < len(truth) - 1 else 0
    assert checked > 0  # some cell held some of the 12 classes, not all
    assert problems == []


def test_pyramid_counts_each_class_over_all_rows_those_outside_and_not_finite_included():
    rng = np.random.default_rng(4)
    z = rng.normal(size=(20_000, 2))
    y = rng.integers(0, 2, size=20_000)
    z[:5], y[:5] = [500.0, 0.0], 2  # a class of 5 rows, all far outside the extent
    z[5:8, 1] = np.nan  # rows the view cannot place
    y[5:8] = 1
    p = Pyramid(ClassMap(np.arange(3)), np.array([[-4.0, 4.0], [-4.0, 4.0]]), finest=64)
    stream(Blocks({"z": z, "label": y}, block_rows=1000), p.add, workers=2)
    inside = p.counts.sum(axis=(1, 2))
    (x0, x1), (y0, y1) = p.extent
    drawn = (z[:, 0] >= x0) & (z[:, 0] < x1) & (z[:, 1] >= y0) & (z[:, 1] < y1)
    np.testing.assert_array_equal(inside, np.bincount(y[drawn], minlength=4))
    np.testing.assert_array_equal(p.totals, np.bincount(y, minlength=4))  # "other" last: none
    assert p.outside == np.count_nonzero(~drawn)
    assert p.non_finite == 3


@pytest.fixture(scope="module")
def stray_class_view():
    """Two big classes and a class of 5 rows far from them, outside the view's extent."""
    X, y = make_classes(n=60_000, p=4, k=2, seed=7, spread=3.0)
    X = np.vstack([X, np.full((5, 4), 200.0)])
    y = np.concatenate([y, [2] * 5])
    m = sp.BoundaryProjector().fit(X, y)
    return view_projection(m, X, y)


def test_browser_legend_gives_each_classs_rows_and_how_many_are_drawn(page_of, stray_class_view):
    p = stray_class_view.pyramid
    assert p.outside == 5
    assert p.counts[2].sum() == 0
    page, problems = page_of(stray_class_view)
    legend = page.eval_on_selector_all("#sp-legend li[data-bucket]",
                                       "els => els.map(e => e.textContent)")
    drawn = p.counts.sum(axis=(1, 2))
    assert legend[:2] == [f"{k} ({drawn[k]:,})" for k in range(2)]  # all drawn: just the rows
    assert legend[2] == "2 (5 rows, 0 drawn)"
    notes = page.inner_text("#sp-notes")
    assert "5 rows (< 0.01 %) lie outside" in notes
    assert "0.00 %" not in notes
    assert problems == []


def test_browser_class_names_are_text_in_the_legend_and_the_hover(page_of):
    # the names went into innerHTML: "<b>big</b>" read "big", and an <img onerror> label ran script
    from streamproj.plot.picture import Source

    names = np.array(["<=50K", "<b>big</b>", '<img src=x onerror="window.pwned=1">', "a &amp; b",
                      "<!--<script>"])
    rng = np.random.default_rng(3)
    label = np.repeat(np.arange(5), 500)
    z = rng.normal(size=(2500, 2)) + np.array([[0, 0], [4, 0], [0, 4], [4, 4], [8, 8]])[label]
    source = Source(Blocks({"z": z, "label": names[label]}), np.sort(names), np.eye(2),
                    np.zeros(2), np.eye(5, 2), np.zeros(5), ["z0", "z1"], "d", "m", "y")
    page, problems = page_of(build_view(source))
    legend = page.eval_on_selector_all("#sp-legend li[data-bucket]",
                                       "els => els.map(e => e.textContent)")
    assert legend == [f"{name} (500)" for name in np.sort(names)]
    assert page.evaluate("window.pwned") is None
    page.evaluate("window.streamproj.panTo(4, 0)")  # the centre of class "<b>big</b>"
    box = page.locator("#sp-canvas").bounding_box()
    r = page.evaluate("window.streamproj.plotRect()")
    centre = (r["l"] + r["w"] / 2, r["t"] + r["h"] / 2)
    page.evaluate("([x, y]) => window.streamproj.zoom(0.25, x, y)", centre)  # cells holding it
    page.mouse.move(box["x"] + centre[0], box["y"] + centre[1])
    assert "<b>big</b>" in page.inner_text("#sp-tip")
    assert problems == []  # (the <img> asked for a file "x")


def _zoom_to_finest_cell(page, view, px):
    """Zoom about the plot's centre until the finest cells are ``px`` screen pixels a side."""
    s = page.evaluate("window.streamproj.state().s")
    page.evaluate("(f) => { const r = window.streamproj.plotRect();"
                  " window.streamproj.zoom(f, r.l + r.w / 2, r.t + r.h / 2); }",
                  px / (view.pyramid.cell.min() * s))


def test_browser_sampled_rows_only_where_cells_are_big_and_the_density_shows_through(
        page_of, two_class_view):
    page, problems = page_of(two_class_view)
    finest = len(two_class_view.pyramid.levels()) - 1
    # finest cells of 4 px: the cells are the detail, no points yet (20,000 rows are sparse
    # over them in view: the next coarser level's 8 px cells may be drawn instead)
    _zoom_to_finest_cell(page, two_class_view, 4)
    state = page.evaluate("window.streamproj.state()")
    assert state["sizedLevel"] == finest
    assert state["level"] in (finest, finest - 1)
    assert state["pointsShown"] == 0
    # cells of 20 px: the points, small, a bounded number, the cells visible around them
    _zoom_to_finest_cell(page, two_class_view, 20)
    state = page.evaluate("window.streamproj.state()")
    assert state["level"] == finest
    assert 0 < state["pointsShown"] <= state["pointsCap"]
    with_points = page.evaluate(PIXELS)
    page.uncheck("#sp-points")
    assert page.evaluate("window.streamproj.state().pointsShown") == 0
    without = page.evaluate(PIXELS)
    page.check("#sp-points")
    area = page.evaluate("() => { const c = document.getElementById('sp-canvas');"
                         " return c.width * c.height; }")
    # each small dot changes a few pixels; the ink of the cells stays (they are not hidden)
    assert without["ink"] > 0.5 * with_points["ink"]
    assert with_points["sum"] != without["sum"]
    dot_pixels = page.evaluate("""() => { const s = window.streamproj; const c = document.getElementById('sp-canvas');
      const ctx = c.getContext('2d'); const a = ctx.getImageData(0, 0, c.width, c.height).data;
      s.showPoints(false); const b = ctx.getImageData(0, 0, c.width, c.height).data; s.showPoints(true);
      let n = 0; for (let i = 0; i < a.length; i += 4)
        if (Math.abs(a[i] - b[i]) + Math.abs(a[i + 1] - b[i + 1]) + Math.abs(a[i + 2] - b[i + 2]) > 30) n++;
      return n; }""")
    dpr = page.evaluate("window.devicePixelRatio")
    assert dot_pixels <= 25 * dpr * dpr * state["pointsShown"]  # at most ~5 x 5 px a dot
    assert dot_pixels < 0.15 * area
    # each dot has a dark ring, so it shows on a cell of its own colour (a 1.3 px dot with a
    # faint ring was not seen there)
    dark = """() => { const c = document.getElementById('sp-canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] < 240) n++; return n; }"""
    with_dark = page.evaluate(dark)
    page.evaluate("window.streamproj.showPoints(false)")
    without_dark = page.evaluate(dark)
    page.evaluate("window.streamproj.showPoints(true)")
    assert with_dark - without_dark >= 4 * dpr * dpr * state["pointsShown"]
    notes = page.inner_text("#sp-notes")
    assert "sample" in notes
    # the status line says how many rows the points stand for: the cells' rows in view
    _, _, rows = _densest_in_view(page, two_class_view)
    assert page.evaluate("window.streamproj.rowsInView") == rows
    status = page.inner_text("#sp-status")
    assert f"{state['pointsShown']:,} sampled rows drawn" in status
    assert f"of about {int(rows):,} rows in view" in status
    assert problems == []


def test_notes_say_the_sample_is_not_proportional_when_it_thins(page_of):
    X, y = make_classes(n=60_000, p=4, k=2, seed=3, spread=3.0)
    m = sp.BoundaryProjector().fit(X, y)
    view = view_projection(m, X, y, tiles=8, per_tile=20)  # far fewer than the rows
    page, problems = page_of(view)
    notes = page.inner_text("#sp-notes")
    assert "at most 20 rows in each of 8 x 8 tiles" in notes
    assert "not proportional to the rows" in notes
    assert problems == []


COLOURED_COLUMNS = """() => { const c = document.getElementById('sp-canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, seen = new Set();
  for (let i = 0; i < d.length; i += 4) {
    const r = d[i], b = d[i + 2];
    if (b > r + 60 || r > b + 60 && d[i + 1] > b) seen.add((i / 4) % c.width);
  }
  return seen.size; }"""


def test_browser_stretch_fills_the_width_with_a_coin_and_says_so(page_of, coin_view):
    view = coin_view
    page, problems = page_of(view)
    assert page.evaluate("window.streamproj.state().k") == 1  # equal aspect by default
    s0 = page.evaluate("window.streamproj.state().s")
    equal = page.evaluate(PIXELS)
    equal_columns = page.evaluate(COLOURED_COLUMNS)
    assert "equal" in page.inner_text("#sp-stretch")
    assert "x" in page.get_attribute("#sp-stretch", "title")  # its key
    page.click("#sp-stretch")
    state = page.evaluate("window.streamproj.state()")
    assert state["k"] > 4
    assert state["s"] == pytest.approx(s0)  # y as it was: the height bounds the coin
    note = f"x magnified {state['k']:.1f}x"
    assert state["aspect"].startswith(note)  # drawn on the canvas
    assert f"stretched {state['k']:.1f}x" in page.inner_text("#sp-stretch")
    assert note in page.inner_text("#sp-status")
    # the coin is drawn across most of the width: columns holding a class's colour
    assert page.evaluate(COLOURED_COLUMNS) > 4 * equal_columns
    # the hover still reads the cell under the cursor, by its own edges
    box = page.locator("#sp-canvas").bounding_box()
    levels = view.pyramid.levels()
    for fx in (0.3, 0.45, 0.55, 0.7):
        page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * 0.5)
        hover = page.evaluate("window.streamproj.hover")
        assert hover["counts"] == _hovered_counts(levels, hover)
        (x0, _), (y0, _) = view.pyramid.extent
        assert x0 + hover["ix"] * hover["cell"] <= hover["x"] < x0 + (hover["ix"] + 1) * hover["cell"]
        assert y0 + hover["iy"] * hover["cellY"] <= hover["y"] < y0 + (hover["iy"] + 1) * hover["cellY"]
    page.mouse.move(box["x"] + 2, box["y"] + 2)
    page.keyboard.press("x")  # back to equal aspect
    assert page.evaluate("window.streamproj.state().k") == 1
    assert page.evaluate(PIXELS)["sum"] == equal["sum"]
    assert problems == []


RUNS = """() => { const c = document.getElementById('sp-canvas'), r = window.streamproj.plotRect();
  const dpr = window.devicePixelRatio || 1, d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const at = (x, y) => { const i = 4 * (y * c.width + x); return d[i] << 16 | d[i + 1] << 8 | d[i + 2]; };
  // below the aspect note, inside the frame: ink pixels, and those like their right / lower neighbour
  let ink = 0, right = 0, below = 0;
  for (let y = Math.ceil((r.t + 26) * dpr); y < Math.floor((r.t + r.h - 2) * dpr); y++)
    for (let x = Math.ceil((r.l + 2) * dpr); x < Math.floor((r.l + r.w - 2) * dpr); x++) {
      const v = at(x, y);
      if (v === 0xffffff) continue;
      ink++; if (at(x + 1, y) === v) right++; if (at(x, y + 1) === v) below++;
    }
  // mean runs of one colour along x and along y
  return {ink, along_x: 1 / (1 - right / ink), along_y: 1 / (1 - below / ink)}; }"""


@pytest.fixture(scope="module")
def coin_view():
    X, y = make_coin(n=20_000, p=6, seed=4)  # z[0] some ten times narrower than z[1]
    return view_projection(sp.BoundaryProjector().fit(X, y), X, y)


def test_browser_a_long_class_or_data_name_does_not_squeeze_the_plot(page_of):
    # a class name of 300 letters widened the side panel to its length: the plot was squeezed
    # to its 300 px minimum and the notes ran off the page's right edge (the title too)
    from streamproj.plot.picture import Source

    rng = np.random.default_rng(5)
    label = rng.integers(0, 2, 3000)
    z = rng.normal(size=(3000, 2)) + np.array([[-2.0, 0.0], [2.0, 0.0]])[label]
    names = np.array(["L" * 300, "b"])  # (in sorted order)
    source = Source(Blocks({"z": z, "label": names[label]}), names, np.eye(2), np.zeros(2),
                    np.array([[1.0, 0.0]]), np.zeros(1), ["z0", "z1"], "x" * 200, "m", "y")
    page, problems = page_of(build_view(source))
    width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # nothing off the page
    assert page.locator("#sp-canvas").bounding_box()["width"] > 0.6 * width
    side = page.evaluate("(() => { const s = document.getElementById('sp-side');"
                         " return [s.scrollWidth, s.clientWidth]; })()")
    assert side[0] <= side[1]
    assert "L" * 300 in page.inner_text("#sp-legend").replace("\n", "")
    assert problems == []


def test_browser_a_small_stretch_is_not_said_as_1_0x(page_of):
    # x stretched 4 % against y read "x magnified 1.0x against y" and "x: stretched 1.0x":
    # equal aspect, to the reader, when it was not
    from streamproj.plot.picture import Source

    rng = np.random.default_rng(4)
    label = rng.integers(0, 2, 40_000)
    # a uniform box a little narrower than the plot (about 828 x 586 px): x fills it at ~1.04
    z = rng.uniform(-1, 1, size=(40_000, 2)) * [1.3586, 1.0]
    source = Source(Blocks({"z": z, "label": label}), np.array([0, 1]), np.eye(2), np.zeros(2),
                    np.array([[1.0, 0.0]]), np.zeros(1), ["z0", "z1"], "d", "m", "y")
    page, problems = page_of(build_view(source))
    page.click("#sp-stretch")
    k = page.evaluate("window.streamproj.state().k")
    assert 1 < k < 1.095
    for text in (page.evaluate("window.streamproj.aspectText"), page.inner_text("#sp-stretch")):
        shown = float(re.search(r"([\d.]+)x", text).group(1))
        assert shown != 1.0
        assert abs(shown - k) < 0.006, text
    assert problems == []


def test_browser_stretched_cells_are_about_square_on_screen_and_hover_their_counts(
        page_of, coin_view):
    # x stretched ~15x: the level was chosen by the cells' height, so each cell was a pixel
    # tall and ~15 wide (streaks); now cells of a finer level merged along y, about square
    page, problems = page_of(coin_view)
    page.click("#sp-stretch")
    levels = coin_view.pyramid.levels()
    box = page.locator("#sp-canvas").bounding_box()
    dpr = page.evaluate("window.devicePixelRatio")
    for zoom in (1, 8):
        if zoom > 1:
            page.evaluate("(f) => { const r = window.streamproj.plotRect();"
                          " window.streamproj.zoom(f, r.l + r.w / 2, r.t + r.h / 2); }", zoom)
        runs = page.evaluate(RUNS)
        assert runs["ink"] > 10_000
        assert runs["along_x"] < 2 * runs["along_y"], runs  # (streaks: 10 times)
        state = page.evaluate("window.streamproj.state()")
        assert state["k"] > 4
        w, h = state["cellPx"]
        assert 0.5 <= w / h <= 2, state
        assert min(w, h) * dpr >= 1
        assert state["merge"][0] == 1 < state["merge"][1]
        for fx, fy in [(0.45, 0.5), (0.55, 0.45), (0.5, 0.55), (0.4, 0.5)]:
            page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
            hover = page.evaluate("window.streamproj.hover")
            assert [hover["mx"], hover["my"]] == state["merge"]
            assert hover["counts"] == _hovered_counts(levels, hover)
            shown = page.eval_on_selector_all("#sp-tip td[data-count]",
                                              "els => els.map(e => +e.dataset.count)")
            assert shown == sorted((v for v in hover["counts"] if v), reverse=True)
    page.keyboard.press("x")  # equal aspect: the coin's cells (finer across it) merged along x
    state = page.evaluate("window.streamproj.state()")
    w, h = state["cellPx"]
    assert 0.5 <= w / h <= 2, state
    assert state["merge"][1] == 1, state
    assert problems == []


def test_browser_past_the_finest_level_stretched_cells_keep_their_detail(page_of, coin_view):
    # zoomed past the finest level with x stretched, every cell was merged along y until square:
    # cells of 180 x 187 px where the pyramid holds 180 x 12 (16 cells summed into one)
    page, problems = page_of(coin_view)
    page.evaluate("window.streamproj.stretch(true)")
    levels = coin_view.pyramid.levels()
    box = page.locator("#sp-canvas").bounding_box()
    dpr = page.evaluate("window.devicePixelRatio")

    def own_cells(state):  # the level's own cells on screen, before any merging
        return [px / m for px, m in zip(state["cellPx"], state["merge"], strict=True)]

    for _ in range(16):
        state = page.evaluate("window.streamproj.state()")
        if state["level"] == len(levels) - 1 and min(own_cells(state)) * dpr >= 8:
            break
        page.evaluate("() => { const r = window.streamproj.plotRect();"
                      " window.streamproj.zoom(2, r.l + r.w / 2, r.t + r.h / 2); }")
    state = page.evaluate("window.streamproj.state()")
    assert state["level"] == len(levels) - 1, state
    w, h = own_cells(state)
    assert min(w, h) * dpr >= 8, state
    assert max(w, h) > 4 * min(w, h), state  # long cells
    assert state["merge"] == [1, 1], state  # the finest cells as they are
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    hover = page.evaluate("window.streamproj.hover")
    assert [hover["mx"], hover["my"]] == [1, 1]
    assert hover["counts"] == _hovered_counts(levels, hover)
    # short of that, the shorter side is still merged (no streaks): the test above
    assert problems == []


def test_browser_a_sliver_of_data_says_how_to_stretch_it(page_of, coin_view, two_class_view):
    # the demo's coin opened at equal aspect in 5 % of the canvas with nothing on it saying why
    page, problems = page_of(coin_view)
    assert page.evaluate("window.streamproj.state().k") == 1  # still equal aspect first
    hint = page.evaluate("window.streamproj.aspectText")
    assert "narrower than the plot: press x to stretch x" in hint, hint
    page.keyboard.press("x")
    assert page.evaluate("window.streamproj.aspectText").startswith("x magnified")
    page.keyboard.press("x")
    assert "press x" in page.evaluate("window.streamproj.aspectText")
    page.evaluate("() => { const r = window.streamproj.plotRect();"
                  " window.streamproj.zoom(8, r.l + r.w / 2, r.t + r.h / 2); }")
    assert page.evaluate("window.streamproj.aspectText") == ""  # zoomed in: not in the way
    round_page, problems2 = page_of(two_class_view)
    assert round_page.evaluate("window.streamproj.aspectText") == ""
    assert problems == problems2 == []


def test_browser_hover_totals_the_classes_shown_and_stays_on_the_canvas(page_of, many_class_view):
    # with a class hidden the tooltip's total still counted its rows
    page, problems = page_of(many_class_view)
    box = page.locator("#sp-canvas").bounding_box()
    levels = many_class_view.pyramid.levels()
    state = page.evaluate("window.streamproj.state()")
    (mx, my), lv = state["merge"], levels[state["level"]]
    cells = lv.reshape(lv.shape[0], lv.shape[1] // mx, mx, lv.shape[2] // my, my).sum(axis=(2, 4))
    mixed = np.argwhere((cells > 0).sum(axis=0) >= 3)  # cells of three classes or more
    assert len(mixed) > 0
    (x0, _), (y0, _) = many_class_view.pyramid.extent
    cw, ch = (c * 2.0 ** (len(levels) - 1 - state["level"]) for c in many_class_view.pyramid.cell)
    for ix, iy in mixed[:: max(1, len(mixed) // 4)][:4]:
        sx, sy = page.evaluate("([x, y]) => window.streamproj.toScreen(x, y)",
                               [x0 + (ix + 0.5) * cw * mx, y0 + (iy + 0.5) * ch * my])
        page.mouse.move(box["x"] + sx, box["y"] + sy)
        truth = cells[:, ix, iy]
        assert page.evaluate("window.streamproj.hover")["counts"] == truth.tolist()
        gone = int(np.argmax(truth))
        page.evaluate(f"window.streamproj.toggle({gone})")  # the cell's largest class hidden
        row = page.eval_on_selector("#sp-tip tr[data-total]",
                                    "e => [+e.dataset.total, +e.dataset.hidden, e.innerText]")
        assert row[:2] == [int(truth.sum() - truth[gone]), int(truth[gone])]
        assert "total shown" in row[2]
        assert f"+{int(truth[gone]):,} hidden" in row[2]
        page.evaluate(f"window.streamproj.toggle({gone})")
        row = page.eval_on_selector("#sp-tip tr[data-total]", "e => [+e.dataset.total, e.innerText]")
        assert row[0] == int(truth.sum())
        assert "hidden" not in row[1]
    # the tooltip flips left of and above the pointer at the canvas's far corner: it was placed
    # at most 200 px from the right edge whatever its width, and ran off the bottom
    page.click('#sp-legend li[data-bucket="0"]')
    for fx, fy in [(0.97, 0.93), (0.99, 0.5), (0.5, 0.93), (0.1, 0.1)]:
        page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
        tip = page.locator("#sp-tip").bounding_box()
        if tip is None:  # outside the plot: no tooltip
            continue
        assert tip["x"] >= box["x"] - 0.5, (fx, fy, tip, box)
        assert tip["y"] >= box["y"] - 0.5, (fx, fy, tip, box)
        assert tip["x"] + tip["width"] <= box["x"] + box["width"] + 0.5, (fx, fy, tip, box)
        assert tip["y"] + tip["height"] <= box["y"] + box["height"] + 0.5, (fx, fy, tip, box)
    assert problems == []


def _needle_source(n=20_000, thin=1e-4):
    """Two classes ``1 / thin`` times as long along z[1] as across z[0] (features in units apart)."""
    from streamproj.plot.picture import Source

    rng = np.random.default_rng(5)
    label = rng.integers(0, 2, size=n)
    z = rng.normal(size=(n, 2)) * (3.0 * thin, 3.0)
    z[:, 0] += (label - 0.5) * thin
    return Source(Blocks({"z": z, "label": label}), np.array([0, 1]), np.eye(2), np.zeros(2),
                  np.array([[1.0, 0.0]]), np.zeros(1), ["z0", "z1"], "needle", "model", "y")


def test_finer_cells_across_a_thin_side_leave_room_for_its_edge():
    # the thin side's finer cells filled its least cells, so moving its start to an edge
    # (z[0] = 0) pushed the end out and doubled the side: twice the memory
    assert grid([[0.0, 17.0], [1.0, 2.0]], 8, 2, (None, 0.0))[1] == (8, 8)
    assert grid([[-0.73, 0.27], [-5.0, 5.0]], 512, 4, (0.0, None))[1] == (256, 512)
    lower, shape, cell = grid([[0.0, 9e-306], [0.0, 1.0]], 512, 8)  # no overflow
    assert lower[0] + shape[0] * cell[0] >= 9e-306


def test_a_cloud_ten_thousand_times_thinner_than_long_gets_cells_across_it():
    # cells were square: across z[0] the cloud met 1 or 2 columns of them, at any zoom
    source = _needle_source()
    view = build_view(source)
    p = view.pyramid
    assert p.counts.size <= MAX_COUNTS
    assert p.counts.sum() + p.outside == 20_000
    occupied = np.count_nonzero(p.counts.sum(axis=(0, 2)))
    assert occupied > 200, occupied  # (2 before)
    assert p.cell[1] / p.cell[0] >= 2**10  # finer across by a power of two
    edge = -p.extent[0, 0] / (p.cell[0] * p.shape[0] / 2 ** (p.n_levels - 1))
    assert abs(edge - round(edge)) < 1e-6  # z[0] = 0 still a coarsest cell's edge
    # every level still counts its rows exactly
    z, label = source.blocks.arrays["z"], source.blocks.arrays["label"]
    (x0, x1), (y0, y1) = p.extent
    for lv in p.levels()[::3]:
        _, gx, gy = lv.shape
        ref = np.histogram2d(z[label == 1, 0], z[label == 1, 1],
                             bins=(np.linspace(x0, x1, gx + 1), np.linspace(y0, y1, gy + 1)))[0]
        np.testing.assert_array_equal(lv[1], ref)


def test_browser_a_needle_of_a_cloud_stretched_fills_the_plot_with_square_cells(page_of):
    view = build_view(_needle_source())
    page, problems = page_of(view)
    page.click("#sp-stretch")
    state = page.evaluate("window.streamproj.state()")
    assert state["k"] > 1000
    w, h = state["cellPx"]
    assert 0.5 <= w / h <= 2, state  # square on screen
    assert min(w, h) < 8, state  # and small
    r = page.evaluate("window.streamproj.plotRect()")
    dpr = page.evaluate("window.devicePixelRatio")
    assert page.evaluate(COLOURED_COLUMNS) > 0.5 * r["w"] * dpr  # both classes, side by side
    px = page.evaluate(PIXELS)
    assert px["orange"] > 2000
    assert px["blue"] > 2000
    # the x axis's labels (-5.00e-4 and the like) inside the canvas and apart: the last one was
    # cut at the canvas's edge
    labels = page.evaluate("window.streamproj.xTickLabels")
    width = page.evaluate("document.getElementById('sp-canvas').getBoundingClientRect().width")
    assert len(labels) >= 3
    assert labels[0]["left"] >= 0
    assert labels[-1]["right"] <= width
    assert all(a["right"] + 6 <= b["left"] for a, b in itertools.pairwise(labels))
    assert problems == []


FAR_FROM_TIES = """() => { const api = window.streamproj, b = api.boundary, r = api.plotRect(), K = b.b.length;
  // the point of the plot farthest from any boundary of the class that wins there
  const score = (x, y, k) => x * b.A[0][k] + y * b.A[1][k] + b.b[k];
  let best = null;
  for (let i = 1; i < 40; i++) for (let j = 1; j < 40; j++) {
    const [x, y] = api.toData(r.l + r.w * i / 40, r.t + r.h * j / 40);
    const s = [...Array(K).keys()].map((k) => score(x, y, k)), p = s.indexOf(Math.max(...s));
    let d = Infinity;
    for (let q = 0; q < K; q++) if (q !== p)
      d = Math.min(d, (s[p] - s[q]) / Math.hypot(b.A[0][p] - b.A[0][q], b.A[1][p] - b.A[1][q]));
    if (!best || d > best.d) best = { x, y, d };
  }
  return best; }"""


def test_browser_the_boundary_entry_names_a_line_only_while_one_is_drawn(page_of, many_class_view):
    # zoomed into one class's region, no slice line is drawn: the legend still said "(slice)"
    page, problems = page_of(many_class_view)
    assert "LDA boundaries (slice)" in page.inner_text("#sp-legend")
    far = page.evaluate(FAR_FROM_TIES)
    # zoom about that point until the whole plot is within half its distance from a tie
    rect = page.evaluate("window.streamproj.plotRect()")
    s = page.evaluate("window.streamproj.state().s")
    factor = 2 * np.hypot(rect["w"], rect["h"]) / (s * far["d"])
    x, y = page.evaluate("([x, y]) => window.streamproj.toScreen(x, y)", [far["x"], far["y"]])
    page.evaluate("([f, x, y]) => window.streamproj.zoom(f, x, y)", [factor, x, y])
    assert page.evaluate("window.streamproj.state().s") == pytest.approx(s * factor)
    legend = page.inner_text("#sp-legend")
    assert "(slice)" not in legend
    assert "no LDA boundary in this view" in legend
    assert page.evaluate("window.streamproj.state().boundaryDrawn") is False
    page.click("#sp-reset")
    assert "LDA boundaries (slice)" in page.inner_text("#sp-legend")
    assert page.evaluate("window.streamproj.state().boundaryDrawn") is True
    assert problems == []


def _far_from_zero():
    """A hyperplane-centred frame of data with a mean of 1e7: z[1] about 2e7, spread 3."""
    X, y = make_coin(n=3000, offset=1e7)
    m = sp.BoundaryProjector(center="hyperplane").fit(X, y)
    return view_projection(m, X, y), m.transform(X)


def test_sampled_rows_keep_their_coordinates_far_from_zero_and_past_float32():
    # stored as float32 coordinates, the dots of 3,000 rows had 11 heights (an error of 150
    # cells), and coordinates past 3.4e38 became infinities
    view, z = _far_from_zero()
    X, y = make_coin(n=3000)
    m = sp.BoundaryProjector().fit(X * 1e40, y)
    for v, zz in ((view, z), (view_projection(m, X * 1e40, y), m.transform(X * 1e40))):
        back, rows = _sample_of(v)
        assert np.all(np.abs(back - zz[rows][:, list(v.pyramid.axes)]) < 1e-3 * v.pyramid.cell)
        # the boundary's side of every dot is the row's
        np.testing.assert_array_equal(back[:, 0] > 0, zz[rows, 0] > 0)


def test_browser_a_sampled_row_is_where_its_row_is(page_of):
    view, z = _far_from_zero()
    page, problems = page_of(view)
    got = np.array(page.evaluate(
        "() => Array.from({length: 200}, (_, p) => window.streamproj.point(p * 7))"))
    rows = got[:, 2].astype(int)
    assert np.all(np.abs(got[:, :2] - z[rows][:, :2]) < 1e-3 * view.pyramid.cell)
    assert problems == []


def _sample_of(view):
    """The sampled rows' coordinates and indices as the page decodes them."""
    import base64
    import zlib

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        payload, _ = encode_view(view.pyramid, {"names": view.pyramid.classmap.names})
    pts = payload["points"]
    dtype = "<f8" if pts["bytes"] == 8 else "<f4"
    raw = np.frombuffer(zlib.decompress(base64.b64decode(pts["xy"])), dtype).reshape(-1, 2)
    rows = np.frombuffer(zlib.decompress(base64.b64decode(pts["row"])), "<f8").astype(int)
    return np.asarray(pts["origin"]) + raw * np.asarray(pts["unit"]), rows


def _far_group_in_tiny_units():
    """A cloud in units of 1e-3 with a far group at 1e37, which the overview samples."""
    from streamproj.plot.picture import Source

    rng = np.random.default_rng(41)
    n = 40_000
    label = rng.integers(0, 3, size=n)
    z = (rng.normal(size=(n, 2)) + np.array([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.5]])[label]) * 1e-3
    away = (label == 2) & (rng.random(n) < 0.02)
    z[away] += 1e37
    source = Source(Blocks({"z": z, "label": label}, block_rows=4_099), np.arange(3), np.eye(2),
                    np.zeros(2), np.eye(3, 2), np.zeros(3), ["z0", "z1"], "far", "model", "y")
    view = build_view(source)
    assert view.pyramid.overview is not None
    return view, z, away


def test_a_sampled_row_past_float32_in_finest_cells_keeps_its_coordinates():
    # the far group is 4e41 finest cells out, past float32's range: its offsets became
    # infinities (with a warning) and its dots were drawn nowhere
    view, z, away = _far_group_in_tiny_units()
    back, rows = _sample_of(view)
    assert np.isin(rows, np.flatnonzero(away)).any()
    np.testing.assert_array_equal(back, z[rows][:, list(view.pyramid.axes)])


def test_browser_a_sampled_row_past_float32_in_cells_is_where_its_row_is(page_of):
    view, z, away = _far_group_in_tiny_units()
    page, problems = page_of(view)
    rows = np.sort(view.pyramid.sample["row"])  # the page holds the sample in row order
    picked = np.flatnonzero(np.isin(rows, np.flatnonzero(away)))[:50].tolist() + list(range(50))
    got = np.array(page.evaluate("(ps) => ps.map((p) => window.streamproj.point(p))", picked))
    rows = got[:, 2].astype(int)
    assert np.isin(rows, np.flatnonzero(away)).any()
    np.testing.assert_array_equal(got[:, :2], z[rows][:, :2])
    assert problems == []


# ---------------------------------------------------------------- sparse rows: coarser cells
def _two_classes(n, spread=3.0, seed=7, keep=None):
    """Two Gaussian classes (``keep``: how many rows of class 1 to keep, the rest dropped)."""
    X, y = make_classes(n=n, p=4, k=2, seed=seed, spread=spread)
    if keep is not None:
        drop = np.flatnonzero(y == 1)[keep:]
        X, y = np.delete(X, drop, axis=0), np.delete(y, drop)
    return view_projection(sp.BoundaryProjector().fit(X, y), X, y)


def _is_sparse(counts, hidden, box):
    """datashader's dynspread test over the cells in ``box``: fewer than half the cells holding
    a shown row have one among their 8 neighbours."""
    ix0, ix1, iy0, iy1 = box
    shown = [k for k in range(counts.shape[0]) if k not in hidden]
    held = counts[shown][:, ix0:ix1, iy0:iy1].sum(axis=0) > 0
    pad = np.pad(held, 1)
    near = np.zeros_like(held)
    for dx, dy in itertools.product((-1, 0, 1), repeat=2):
        if dx or dy:
            near |= pad[1 + dx:pad.shape[0] - 1 + dx, 1 + dy:pad.shape[1] - 1 + dy]
    return held.any() and np.count_nonzero(held & near) < 0.5 * np.count_nonzero(held)


def _expected_levels(page, view, hidden=()):
    """The level of cells a device pixel a side, and the one drawn: coarser (to 8 px cells at
    most, never off the finest level where its sampled rows show) while the rows in view are
    sparse. For square cells at equal aspect (no merging)."""
    st = page.evaluate("window.streamproj.state()")
    assert (st["k"], st["merge"], st["tier"]) == (1, [1, 1], "fine")
    dpr = page.evaluate("window.devicePixelRatio")
    r = page.evaluate("window.streamproj.plotRect()")
    (dx0, dy1) = page.evaluate(f"window.streamproj.toData({r['l']}, {r['t']})")
    (dx1, dy0) = page.evaluate(f"window.streamproj.toData({r['l'] + r['w']}, {r['t'] + r['h']})")
    p = view.pyramid
    (x0, x1), (y0, y1) = p.extent
    levels = p.levels()[: view.stored_levels]

    def side(lv):  # (the cell's sides in data units)
        return (x1 - x0) / lv.shape[1], (y1 - y0) / lv.shape[2]

    def box(lv):
        cw, ch = side(lv)
        gx, gy = lv.shape[1:]
        return (max(0, int(np.floor((dx0 - x0) / cw))), min(gx, int(np.ceil((dx1 - x0) / cw))),
                max(0, int(np.floor((dy0 - y0) / ch))), min(gy, int(np.ceil((dy1 - y0) / ch))))

    sized = max([0] + [i for i, lv in enumerate(levels) if min(side(lv)) * st["s"] * dpr >= 1])
    level = sized
    while level > 0:
        if max(side(levels[level - 1])) * st["s"] * dpr > 8:
            break
        if level == len(levels) - 1 and min(side(levels[level])) * st["s"] >= 8:
            break
        if not _is_sparse(levels[level], hidden, box(levels[level])):
            break
        level -= 1
    return sized, level, box(levels[level])


TINTED = """() => { const c = document.getElementById('sp-canvas'), r = window.streamproj.plotRect();
  const dpr = window.devicePixelRatio || 1, d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  // inside the plot: pixels of a class's colour, however faint (grey and black are not)
  let blue = 0, orange = 0;
  for (let y = Math.ceil((r.t + 2) * dpr); y < Math.floor((r.t + r.h - 2) * dpr); y++)
    for (let x = Math.ceil((r.l + 2) * dpr); x < Math.floor((r.l + r.w - 2) * dpr); x++) {
      const i = 4 * (y * c.width + x);
      if (d[i + 2] > d[i] + 20) blue++; else if (d[i] > d[i + 2] + 20) orange++;
    }
  return {blue, orange, both: blue + orange}; }"""


@pytest.fixture(scope="module")
def sparse_view():
    return _two_classes(1000)


def test_browser_sparse_rows_are_drawn_in_coarser_cells_than_pixels(page_of, sparse_view):
    # 1,000 rows over cells of 1.5 px: most cells in view hold one row, nearly all alone, a
    # dust of single pixels; the coarser level's cells (3 px, at most 8) are seen
    page, problems = page_of(sparse_view)
    sized, level, _ = _expected_levels(page, sparse_view)
    state = page.evaluate("window.streamproj.state()")
    assert state["level"] == level < sized
    assert state["sizedLevel"] == sized
    assert max(state["cellPx"]) * page.evaluate("window.devicePixelRatio") <= 8
    assert state["pointsShown"] == 0
    # the pixels the rows coloured before: a pixel-size cell each that holds one (all in view)
    dpr = page.evaluate("window.devicePixelRatio")
    (x0, x1), _ = sparse_view.pyramid.extent
    fine = sparse_view.pyramid.levels()[sized]
    area = ((x1 - x0) / fine.shape[1] * state["s"] * dpr) ** 2
    dust = np.count_nonzero(fine.sum(axis=0)) * area
    tinted = page.evaluate(TINTED)
    assert tinted["both"] > 2.5 * dust, (tinted, dust)
    assert tinted["blue"] > 500
    assert tinted["orange"] > 500
    status = page.inner_text("#sp-status")
    assert f"level {level + 1} of" in status
    assert f"{sized - level} level{'s' if sized - level > 1 else ''} coarser: rows sparse" in status
    assert problems == []


def test_browser_sparse_rows_hover_the_coarser_cells_counts_and_hide_a_class(page_of, sparse_view):
    page, problems = page_of(sparse_view)
    levels = sparse_view.pyramid.levels()
    level = page.evaluate("window.streamproj.state().level")
    (x0, x1), (y0, y1) = sparse_view.pyramid.extent
    total = levels[level].sum(axis=0)
    box = page.locator("#sp-canvas").bounding_box()
    held = np.argwhere(total > 1)  # cells of 2 rows or more, some of both classes
    for ix, iy in held[:: max(1, len(held) // 6)]:
        x = x0 + (ix + 0.5) * (x1 - x0) / total.shape[0]
        y = y0 + (iy + 0.5) * (y1 - y0) / total.shape[1]
        sx, sy = page.evaluate("([x, y]) => window.streamproj.toScreen(x, y)", [x, y])
        page.mouse.move(box["x"] + sx, box["y"] + sy)
        hover = page.evaluate("window.streamproj.hover")
        assert (hover["level"], hover["ix"], hover["iy"]) == (level, ix, iy)
        assert hover["counts"] == _hovered_counts(levels, hover)
        assert int(page.get_attribute("#sp-tip tr[data-total]", "data-total")) == total[ix, iy]
    page.mouse.move(box["x"] + 2, box["y"] + 2)
    # a class hidden: its colour gone, the measure of the class shown alone
    page.click('#sp-legend li[data-bucket="1"]')
    tinted = page.evaluate(TINTED)
    assert tinted["orange"] == 0
    assert tinted["blue"] > 500
    sized, want, _ = _expected_levels(page, sparse_view, hidden=[1])
    assert page.evaluate("window.streamproj.state().level") == want < sized
    page.click('#sp-legend li[data-bucket="1"]')
    assert page.evaluate(TINTED)["orange"] > 500
    assert problems == []


def test_browser_a_hidden_dense_class_leaves_a_sparse_one_its_coarser_cells(page_of):
    # 60,000 rows of class 0 and 400 of class 1: dense, the pixel-size level; class 0 hidden,
    # the few rows shown are measured alone and drawn coarser
    view = _two_classes(120_000, keep=400)
    page, problems = page_of(view)
    sized, level, _ = _expected_levels(page, view)
    assert page.evaluate("window.streamproj.state().level") == level == sized
    assert "coarser" not in page.inner_text("#sp-status")
    page.click('#sp-legend li[data-bucket="0"]')
    sized, level, _ = _expected_levels(page, view, hidden=[0])
    assert page.evaluate("window.streamproj.state().level") == level < sized
    assert "coarser: rows sparse" in page.inner_text("#sp-status")
    tinted = page.evaluate(TINTED)
    assert tinted["blue"] == 0
    assert tinted["orange"] > 200
    page.click('#sp-legend li[data-bucket="0"]')
    assert page.evaluate("window.streamproj.state().level") == page.evaluate(
        "window.streamproj.state().sizedLevel")
    assert problems == []


def test_browser_sparse_rows_still_show_their_sampled_rows_zoomed_in(page_of, sparse_view):
    page, problems = page_of(sparse_view)
    finest = len(sparse_view.pyramid.levels()) - 1
    # about the densest finest cell (a sampled row in view however far in)
    (x0, x1), (y0, y1) = sparse_view.pyramid.extent
    total = sparse_view.pyramid.levels()[finest].sum(axis=0)
    ix, iy = np.unravel_index(np.argmax(total), total.shape)
    page.evaluate("([x, y]) => window.streamproj.panTo(x, y)",
                  [x0 + (ix + 0.5) * (x1 - x0) / total.shape[0], y0 + (iy + 0.5) * (y1 - y0) / total.shape[1]])
    # finest cells of 4 px: sparse, the next coarser level's 8 px cells (no points: as before)
    _zoom_to_finest_cell(page, sparse_view, 4)
    state = page.evaluate("window.streamproj.state()")
    sized, level, _ = _expected_levels(page, sparse_view)
    assert (state["sizedLevel"], state["level"]) == (sized, level) == (finest, finest - 1)
    assert state["pointsShown"] == 0
    # finest cells over 4 px: the next coarser level's would pass 8 px, the finest level is
    # drawn; from 8 px with its sampled rows, however sparse
    for px in (6, 9, 12, 30):
        _zoom_to_finest_cell(page, sparse_view, px)
        state = page.evaluate("window.streamproj.state()")
        assert state["level"] == state["sizedLevel"] == finest
        assert (state["pointsShown"] > 0) == (px >= 8)
        assert "coarser" not in page.inner_text("#sp-status")
    assert problems == []


@pytest.fixture(scope="module")
def dense_view():
    return _two_classes(1_000_000, spread=1.0)


@pytest.mark.parametrize("stretch", [False, True])
def test_browser_dense_rows_keep_the_pixel_size_level(page_of, dense_view, stretch):
    # a million rows in two overlapping classes: never sparse, the level chosen as before (by
    # the cells' size on screen alone) at any zoom, stretched too (merged cells)
    page, problems = page_of(dense_view)
    if stretch:
        page.evaluate("window.streamproj.stretch(true)")
    for zoom in (1, 2, 2, 2, 2, 4, 4):
        page.evaluate("(f) => { const r = window.streamproj.plotRect();"
                      " window.streamproj.zoom(f, r.l + r.w / 2, r.t + r.h / 2); }", zoom)
        state = page.evaluate("window.streamproj.state()")
        assert state["level"] == state["sizedLevel"], (zoom, state)
        assert "coarser" not in page.inner_text("#sp-status")
        if not stretch:
            assert _expected_levels(page, dense_view)[:2] == (state["level"], state["level"])
    assert problems == []


def test_browser_a_class_named_other_is_not_the_rest(page_of):
    X, y = make_classes(n=4000, p=4, k=10, seed=2)
    names = np.array([f"c{v}" for v in y], dtype="<U5")
    names[y == 0] = "other"
    names[y == 1] = "other"  # the largest: coloured under its own name
    m = sp.BoundaryProjector().fit(X, names)
    page, problems = page_of(view_projection(m, X, names, top=3))
    assert "are 'other classes'" in page.inner_text("#sp-notes")
    legend = page.inner_text("#sp-legend")
    assert legend.count("other classes") == 1
    assert legend.count("other") == 2  # the class, and the rest
    assert problems == []


def test_browser_labels_the_model_does_not_know_are_said_to_be_other(page_of):
    # rows of a class the model lacks were grey 'other' with no word of why (and, past --top,
    # counted with the classes not shown: "the rest are 'other'")
    import json
    import re

    X, y = make_classes(n=6000, p=4, k=12, seed=2)
    m = sp.BoundaryProjector().fit(X, y)
    labels = y.copy()
    labels[:700] = 99
    for top, hidden in ((8, True), (20, False)):
        view = view_projection(m, X, labels, top=top)
        data = re.search(r'<script type="application/json" id="sp-data">(.*?)</script>', view.html,
                         re.S)
        assert json.loads(data.group(1))["unknown"] == 700
        page, problems = page_of(view)
        notes = page.inner_text("#sp-notes")
        assert "700 rows (11.67 %) have labels the model does not know" in notes
        assert ("12 classes: the 8 largest have colours, the other 4 classes" in notes) == hidden
        assert problems == []
    known = view_projection(m, X, y)
    data = re.search(r'<script type="application/json" id="sp-data">(.*?)</script>', known.html,
                     re.S)
    assert json.loads(data.group(1))["unknown"] == 0


def test_browser_a_sampled_row_of_a_class_without_a_colour_is_hovered_by_its_name(page_of):
    # the dot of a class past --top (grey, "other") was hovered as "row 3283 · other": the
    # view's hover names every class, and a label the model lacks stays "other"
    X, y = make_classes(n=6000, p=4, k=12, seed=2)
    m = sp.BoundaryProjector().fit(X, y)
    labels = y.copy()
    labels[-300:] = 99
    view = view_projection(m, X, labels, top=3)
    cm, s = view.pyramid.classmap, view.pyramid.sample
    page, problems = page_of(view)
    box = page.locator("#sp-canvas").bounding_box()
    other = np.flatnonzero(s["bucket"] == cm.n_buckets - 1)
    hidden = other[labels[s["row"][other]] != 99]
    unknown = other[labels[s["row"][other]] == 99]
    assert hidden.size
    assert unknown.size
    for p in (hidden[0], hidden[-1], unknown[0]):
        page.evaluate("([x, y]) => window.streamproj.panTo(x, y)", [s["x"][p], s["y"][p]])
        _zoom_to_finest_cell(page, view, 20)
        r = page.evaluate("window.streamproj.plotRect()")
        page.mouse.move(box["x"] + r["l"] + r["w"] / 2, box["y"] + r["t"] + r["h"] / 2)
        assert page.evaluate("window.streamproj.hoverRow") == s["row"][p]
        first = page.inner_text("#sp-tip").splitlines()[0]
        label = labels[s["row"][p]]
        assert first == (f"row {s['row'][p]} · {label} (other)" if label != 99
                         else f"row {s['row'][p]} · other")
        page.evaluate("window.streamproj.zoom(1 / 4096, 0, 0)")
    assert problems == []


def test_browser_tick_labels_tell_their_ticks_apart_far_from_zero_and_zoomed_in(page_of):
    # z[1] about 2.3e7 with a spread of 3 (a hyperplane-centred frame): every y tick read
    # "2.33e+7"; zoomed in 4,096x, each axis's ticks one label
    view, _ = _far_from_zero()
    page, problems = page_of(view)
    for zoom in (1, 64, 4096):
        s = page.evaluate("window.streamproj.state().s")
        page.evaluate("(f) => { const r = window.streamproj.plotRect();"
                      " window.streamproj.zoom(f, r.l + r.w / 2, r.t + r.h / 2); }",
                      zoom * page.evaluate("window.streamproj.home().s") / s)
        for axis in ("xTickLabels", "yTickLabels"):
            ticks = page.evaluate(f"window.streamproj.{axis}")
            labels = [t["text"] for t in ticks]
            assert len(labels) >= 2, (zoom, axis)
            assert len(set(labels)) == len(labels), (zoom, axis, labels)
            # each label is its tick's value, to a tenth of the step between ticks
            values = np.array([t["value"] for t in ticks])
            step = np.diff(values).min()
            assert np.allclose([float(t) for t in labels], values, rtol=0, atol=0.1 * step), \
                (zoom, axis, labels)
        # the hovered cell's edges, too: "cell x 0.1 to 0.1005, y 2.33e+7 to 2.33e+7" read one
        box = page.locator("#sp-canvas").bounding_box()
        r = page.evaluate("window.streamproj.plotRect()")
        page.mouse.move(box["x"] + r["l"] + r["w"] / 2, box["y"] + r["t"] + r["h"] / 2)
        edges = re.search(r"cell x (\S+) to (\S+), y (\S+) to (\S+)", page.inner_text("#sp-tip"))
        assert edges, page.inner_text("#sp-tip")
        x0, x1, y0, y1 = map(float, edges.groups())
        assert x0 < x1, edges.group(0)
        assert y0 < y1, edges.group(0)
    assert problems == []


def test_rows_exactly_on_the_boundary_are_counted_on_its_side_the_classifier_gives_them():
    # a row at z[0] = 0 is the classifier's "z[0] <= 0" class, and was counted in the cell from
    # 0 to the right, on the other class's side of the line the page draws
    m, X, y = coin_with_rows_at_centre(300)
    z0 = m.transform(X)[:, 0]
    for axes in ((0, 1), (1, 0)):
        p = view_projection(m, X, y, axes=axes).pyramid
        a = axes.index(0)
        lower, cell, n = p.extent[a, 0], p.cell[a], p.shape[a]
        at = round(-lower / cell)
        assert abs(lower + at * cell) < 1e-9 * cell * n  # (a cell edge at the boundary)
        counts = np.moveaxis(p.counts, 1 + a, 1)  # (B, cells along z[0], the other axis)
        assert counts[:, at:].sum() == np.count_nonzero(z0 > 0)
        assert counts[0, :at].sum() == np.count_nonzero((z0 <= 0) & (y == 0))
        assert p.counts.sum() == len(y)  # (every row inside the extent)
