"""The interactive view of a projection: one self-contained HTML file, no server.

:func:`build_view` makes one streaming pass over the projected rows into a
per-class density :class:`~.pyramid.Pyramid` (8-10 zoom levels) and a bounded
hashed sample of rows, and writes them into a page (:mod:`.html`) whose
hand-written script (``view.js``) pans, zooms, shows the per-class counts of
the classes in the cell under the cursor, hides and shows classes from the
legend (which gives each class's rows and how many are drawn), always draws the
boundary ``z[0] = 0``, stretches x against y on request (and says so on the
canvas; a finer level's cells, merged along the other axis, stay about square
on screen), and once the finest cells are large draws the sampled rows as small
dots with their row index. Where a few far rows (a heavy tail, a small far
class) set the extent, a fine grid covers the bulk of the rows and a coarser
overview every row; the page draws the fine grid wherever no row beyond it is
in view. :class:`View` saves the page or shows it inline in
Jupyter.
"""

import html as _html

import numpy as np

from .. import solvers
from ..plot.reading import (
    ClassMap,
    class_spread_limits_each,
    count_classes,
    sample_columns,
    spread_limits,
    stream,
    with_zero,
)
from .html import DEFAULT_BUDGET, encode_view, render_page
from .pyramid import Pyramid, finest_within, grid

__all__ = ["View", "build_view"]

MAX_VIEW_CLASSES = 200  # one byte per sampled row's class, "other" included
MAX_COUNTS = 2**24  # the finest grid's counts (64 MiB of uint32): the pass's memory


class View:
    """A built interactive view: ``save(path)``, ``html``, and inline display in Jupyter.

    Attributes
    ----------
    html : str
        The whole page.
    pyramid : Pyramid
        The counts it shows (``pyramid.levels()[level][:, ix, iy]`` is what a
        hover over that cell reports; over the overview, where there is one,
        ``pyramid.overview_levels()``).
    stored_levels : int
        Levels embedded (the rest were over the size budget).
    """

    def __init__(self, html, pyramid, stored_levels):
        self.html, self.pyramid, self.stored_levels = html, pyramid, stored_levels

    def save(self, path):
        """Write the page to ``path`` (one file, opens in any browser offline), all or nothing."""
        from .. import store

        store.write_bytes(path, self.html.encode("utf-8"))
        return path

    def _repr_html_(self):
        return (f'<iframe srcdoc="{_html.escape(self.html, quote=True)}" '
                'style="width:100%;height:760px;border:0" sandbox="allow-scripts"></iframe>')


def _colors_hex(classmap):
    from matplotlib.colors import to_hex

    from ..plot.figure import bucket_colors

    return [to_hex(c) for c in bucket_colors(classmap)]


def _coarsest(finest):
    return max(1, min(8, finest // 128))  # 8 zoom levels or more


# The fine grid of a two-tier pyramid covers the bulk of the rows (spread_limits of all rows
# together) this much wider on each side (of its span): a little panning stays on it.
TIER_MARGIN = 0.25
# ... and is used only where its cells are at least this many times smaller in area than one
# grid over the whole extent would give, and no more than twice as long on either side.
TIER_GAIN = 4


def _tiers(limits, bulk, n_buckets, edges, single):
    """``(extent, (finest, coarsest, widen), overview)`` of a two-tier pyramid, or None.

    A few far rows (a heavy tail, a small far class) set the view's wide
    limits, so one grid over them spent its cells on empty space: the data's
    core, under 1 % of the extent, got coarse cells at every zoom. Half the
    counts go to a fine grid over the ``bulk`` of the rows (widened by
    :data:`TIER_MARGIN`), half to an overview over the whole extent that
    counts every row (``overview``: its ``(extent, finest, coarsest, widen)``
    for :class:`~.pyramid.Pyramid`); the page draws the fine grid wherever no
    row beyond it is in view. None where that does not make the cells
    :data:`TIER_GAIN` times smaller.
    """
    span = bulk[:, 1] - bulk[:, 0]
    inner = np.column_stack([np.maximum(bulk[:, 0] - TIER_MARGIN * span, limits[:, 0]),
                             np.minimum(bulk[:, 1] + TIER_MARGIN * span, limits[:, 1])])
    fine = finest_within(inner, n_buckets, MAX_COUNTS // 2, edges, _coarsest)
    lower, shape, cell = grid(inner, fine[0], fine[1], edges, fine[2])
    gain = grid(limits, single[0], single[1], edges, single[2])[2] / cell
    if gain.prod() < TIER_GAIN or gain.min() < 0.5:
        return None
    # the overview holds the fine grid too: a row on it is counted in both
    whole = np.column_stack([np.minimum(limits[:, 0], lower),
                             np.maximum(limits[:, 1], lower + np.array(shape) * cell)])
    overview = (whole, *finest_within(whole, n_buckets, MAX_COUNTS // 2, edges, _coarsest))
    return inner, fine, overview


def build_view(source, axes=None, top=8, finest=None, tiles=64, per_tile=48,
               budget=DEFAULT_BUDGET):
    """The :class:`View` of a :class:`~streamproj.plot.picture.Source`, in one pass over its rows.

    Parameters
    ----------
    axes : (i, j), optional
        Axes drawn as x and y (default 0, 1).
    top : int
        Classes with their own colour; the rest are "other".
    finest : int, optional
        Cells along the longer side of the finest level: default the most
        (a power of two) whose grid, at the extent's aspect, holds at most
        ``MAX_COUNTS`` counts, all classes' together (the finest grid is the
        pass's memory): 2048 for a square cloud of up to four colours, 4096
        for one four times as long as it is wide.
    tiles, per_tile : int
        The sample's tiling and rows kept per tile.
    budget : int
        Bytes of encoded levels at most.
    """
    from ..plot.picture import _pairs

    blocks = source.blocks
    d = blocks.arrays["z"].shape[1]
    ((_, _, (i, j)),) = _pairs(d, axes if axes is not None else (0, 1))
    top = min(top, MAX_VIEW_CLASSES - 1)
    if len(source.classes) > top:
        counts, _ = count_classes(blocks, "label", source.classes)
        classmap = ClassMap(source.classes, counts, top)
    else:
        classmap = ClassMap(source.classes)
    # wide limits (the user zooms in), set as the PNG's are (every class's own range, a few
    # far rows ignored), twice as far out; rows beyond them are counted and said
    sample = sample_columns(blocks, ["z", "label"])
    z = sample["z"][:, [i, j]]
    # (and the first view: the PNG's own, spread_limits' defaults), from one look at the sample
    limits, first_view = class_spread_limits_each(z, sample["label"], [(2.0, 0.2), (0.5, 0.05)])
    binary = len(source.classes) == 2
    if binary and 0 in (i, j):  # the boundary is always in view
        limits, first_view = (with_zero(lim, (i, j).index(0)) for lim in (limits, first_view))
    # two classes: z[0] = 0 is a cell edge at every level, so no cell mixes rows of both sides
    edges = tuple(0.0 if binary and axis == 0 else None for axis in (i, j))
    # the finest grid is the pass's memory: at most MAX_COUNTS whatever the classes, laid
    # over the extent's aspect (a long thin cloud had a square grid's memory and used a
    # quarter of it)
    extent, overview = limits, None
    if finest:
        coarsest, widen = _coarsest(finest), "double"
    else:
        finest, coarsest, widen = finest_within(limits, classmap.n_buckets, MAX_COUNTS, edges,
                                                _coarsest)
        bulk = spread_limits(z)  # all rows together: a small far class is not the bulk
        if binary and 0 in (i, j):
            bulk = with_zero(bulk, (i, j).index(0))
        tiered = _tiers(limits, bulk, classmap.n_buckets, edges, (finest, coarsest, widen))
        if tiered is not None:
            extent, (finest, coarsest, widen), overview = tiered
    pyramid = Pyramid(classmap, extent, (i, j), finest=finest, coarsest=coarsest, tiles=tiles,
                      per_tile=per_tile, n_rows=blocks.n, edges=edges, widen=widen,
                      window=first_view, overview=overview)
    stream(blocks, pyramid.add, ["z", "label"])
    names = source.axis_names
    boundary: dict[str, object] = {"kind": "none"}
    if binary and i == 0:
        boundary = {"kind": "x"}
    elif binary and j == 0:
        boundary = {"kind": "y"}
    elif not binary:
        comps = source.components[[i, j]]
        boundary = {"kind": "regions", "A": (comps @ source.coef.T).tolist(),
                    "b": (source.center @ source.coef.T + source.intercept).tolist(),
                    "exact": solvers.plane_holds_rule(source.components, source.coef, i, j)}
    rows = pyramid.drawn.astype(np.float64)
    title = f"Boundary-preserving projection of {source.data_name}"
    meta = {
        "title": title,
        "subtitle": (f"{blocks.n:,} rows · {len(source.classes)} classes · "
                     + (f"z[{i}] against z[{j}] of {d} axes · " if d > 2 else "") +
                     f"colour = {'true class (y)' if source.labels_are == 'y' else 'predicted class'}"
                     f" · {source.model_text}"),
        "names": classmap.names,
        "colors": _colors_hex(classmap),
        "rows": rows.tolist(),  # drawn: inside the extent
        "totals": pyramid.totals.tolist(),  # all rows of each class
        "non_finite": pyramid.non_finite,
        "n": blocks.n,
        "xlabel": f"z[{i}]: {names[i]}",
        "ylabel": f"z[{j}]: {names[j]}",
        "boundary": boundary,
        "classes_total": len(source.classes),
        # rows in "other" whose label is none of the model's classes (not classes not shown)
        "unknown": int(pyramid.totals[-1]) - classmap.hidden_rows,
        "data_extent": first_view.tolist(),  # the first view: as the PNG's limits
    }
    payload, stored = encode_view(pyramid, meta, budget)
    return View(render_page(payload, title), pyramid, stored)
