"""The static picture of a projection: from rows (a Zarr output or a model over data) to a Figure.

One bounded sample of blocks sets robust limits, then one streaming pass
over the rows fills every panel's counts (:class:`~.summary.PictureSummary`);
drawing works on those sums only (:mod:`.figure`).
"""

import dataclasses
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import zarr

from .. import solvers, store
from ..errors import InputError, SingularScatterError
from ..stats import ClassStats, bfloat16_to_float32
from . import figure as figmod
from .reading import (
    Blocks,
    ClassMap,
    class_spread_limits,
    coordinates,
    count_classes,
    sample_columns,
    sample_rows,
    spread_limits,
    stream,
    with_zero,
)
from .summary import PictureSummary

__all__ = ["Source", "draw_source", "model_source", "output_source"]

MAX_GRID_AXES = 4
# A lone panel this many times taller than wide (x short), or wider than tall (y short: it
# spreads over the figure's width), also gets a magnified twin.
MAGNIFY_ABOVE = (3.0, 6.0)
# any k: the twin's fine counts stay about a square grid whatever k is (_finer_counts), and
# features in units 10^6 apart make z[0] that much narrower than the PCs
MAX_MAGNIFY = 10**15
QDA_COLOR = "#111111"  # dotted; not a class colour (the palette's vermilion was class 6's)
# where QDA's boundary runs along LDA's (equal class covariances) the wide dots stick out on
# both sides of the thinner solid line drawn over them: both stay visible
QDA_WIDTH = 3.0
LDA_ON_TOP = 3  # zorder: over the QDA contour (2)
LEGEND_CLASSES = 24  # legend entries for classes at most (the rest counted in one note)


@dataclasses.dataclass
class Source:
    """Projected rows and the frame they were projected in.

    ``blocks`` holds ``z`` (n, d), ``label`` (the colours: ``y``, else the
    predicted class) and, when known, ``y`` and ``predicted``.
    """

    blocks: Blocks
    classes: np.ndarray
    components: np.ndarray
    center: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    axis_names: list
    data_name: str
    model_text: str
    labels_are: str  # "y" or "predicted"
    input_url: str | None = None
    model_id: str | None = None  # of the model that wrote a stored projection
    recorded_sources: list | None = None  # OUT's record of the inputs its rows came from


def _axis_names(d, coef_rows, n_classes):
    first = (["signed distance to boundary"] if coef_rows == 1
             else [f"Fisher direction {i + 1}" for i in range(min(d, n_classes - 1))])
    return first + [f"boundary-parallel PC {i + 1}" for i in range(d - len(first))]


def output_source(out):
    """A :class:`Source` over a projection written by ``streamproj project``."""
    group = out if isinstance(out, zarr.Group) else store.open_output(out)
    attrs: dict[str, Any] = group.attrs.asdict()
    meta: dict[str, Any] = attrs.get("streamproj", {})
    # a corrupt chunk is one line naming the array and rows, not a codec traceback
    z = store.CheckedArray(coordinates(group, str(out)), f"{out}/projection")
    arrays = {"z": z}
    if "y" in group:
        arrays["y"] = store.CheckedArray(group["y"], f"{out}/y")
    if "predicted" in group:
        arrays["predicted"] = store.CheckedArray(group["predicted"], f"{out}/predicted")
    if "y" not in arrays and "predicted" not in arrays:
        msg = f"{out} holds neither 'y' nor 'predicted'; a picture needs one to colour the rows"
        raise InputError(msg)
    for name in ("y", "predicted"):  # (said of OUT's arrays, not of the picture's "z")
        if name in arrays and arrays[name].shape[0] != z.shape[0]:
            msg = (f"{out}/{name} has {arrays[name].shape[0]:,} rows but {out}/projection has "
                   f"{z.shape[0]:,}; the output is damaged: rewrite it (project ... --overwrite)")
            raise InputError(msg)
    arrays["label"] = arrays["y"] if "y" in arrays else arrays["predicted"]
    classes = np.asarray(meta["classes"])
    coef = np.asarray(meta["coef"], dtype=np.float64)
    d = z.shape[1]
    names = attrs.get("axis_names") or _axis_names(d, coef.shape[0], len(classes))
    source = meta.get("source")
    data = Path(str(source)).name if source else Path(str(out)).name
    held = [e for e in meta.get("sources") or [] if isinstance(e, dict)]
    if len(held) > 1:  # the title names the data the picture shows, not its first part
        data = f"{Path(str(held[0].get('url'))).name} and {len(held) - 1} more source" + (
            "s" if len(held) > 2 else "")
    shrink = meta.get("shrinkage")
    model = (f"model {str(meta.get('model_id', '?'))[:8]} "
             f"({'no shrinkage' if shrink is None else f'shrinkage {shrink}'}, "
             f"centre {meta.get('center_mode', 'mean')})")
    return Source(Blocks(arrays), classes, np.asarray(meta["components"], dtype=np.float64),
                  np.asarray(meta["center"], dtype=np.float64), coef,
                  np.asarray(meta["intercept"], dtype=np.float64), list(names), data, model,
                  "y" if "y" in arrays else "predicted", source, meta.get("model_id"),
                  meta.get("sources"))


def _as_rows(values):
    """A numpy or dask array from whatever a model returns (dask/pandas/polars frames included)."""
    if isinstance(values, da.Array):
        return values
    if hasattr(values, "to_dask_array"):
        return values.to_dask_array(lengths=True)
    if hasattr(values, "to_numpy"):
        return values.to_numpy()
    return np.asarray(values)


def model_source(model, X, y=None, data_name="data"):
    """A :class:`Source` over ``model.transform(X)``, lazily for dask input."""
    z = _as_rows(model.transform(X))
    predicted = _as_rows(model.predict(X))
    arrays = {"z": z, "predicted": predicted}
    if y is not None:
        arrays["y"] = _as_rows(y).ravel() if not isinstance(y, da.Array) else y
    arrays["label"] = arrays.get("y", predicted)
    comps = np.asarray(model.components_, dtype=np.float64)
    coef = np.asarray(model.coef_, dtype=np.float64)
    classes = np.asarray(model.classes_)
    model_text = (f"{type(model).__name__}(shrinkage={getattr(model, 'shrinkage', None)}, "
                  f"center={getattr(model, 'center', 'mean')!r})")
    return Source(Blocks(arrays), classes, comps, np.asarray(model.center_, dtype=np.float64),
                  coef, np.asarray(model.intercept_, dtype=np.float64),
                  _axis_names(comps.shape[0], coef.shape[0], len(classes)), data_name,
                  model_text, "y" if y is not None else "predicted")


def _pairs(d, axes):
    """(row, col, (i, j)) of the panels: one pair, or the lower triangle of the first axes."""
    if axes is not None:
        i, j = (int(a) for a in axes)
        if not (0 <= i < d and 0 <= j < d) or i == j:
            msg = (f"axes (--axes on the command line) must be two different axes in "
                   f"0..{d - 1}; got {tuple(axes)} (the projection has {d}; more need a model "
                   "fitted with a larger --n-components)")
            raise InputError(msg)
        return [(0, 0, (i, j))]
    if d < 2:
        msg = f"the projection has {d} axis; a picture needs n_components >= 2"
        raise InputError(msg)
    m = min(d, MAX_GRID_AXES)
    return [(j - 1, i, (i, j)) for j in range(1, m) for i in range(j)]


def _bins(limits, pairs, n, stretch, resolution):
    """Cells per pair: square in data units (one cell size for all panels), unless stretched."""
    # about eight rows per cell on average: finer cells would show sampling noise, not density
    res = int(np.clip(np.sqrt(max(n, 1) / 8), 50, resolution))
    if stretch:
        return dict.fromkeys(pairs, (res, res))
    used = sorted({a for p in pairs for a in p})
    cell = max(limits[a, 1] - limits[a, 0] for a in used) / res
    return {p: tuple(int(max(8, np.ceil((limits[a, 1] - limits[a, 0]) / cell))) for a in p)
            for p in pairs}


def _on_the_boundary(limits, bins, margin_bins):
    """Limits and cell counts with a cell edge exactly at ``z[0] = 0`` (one boundary).

    Otherwise one column of cells straddles the boundary and mixes rows of
    both sides. Axis 0's range grows by less than one cell on each side; the
    margin histogram gets a multiple of the grid's columns so that 0 is one of
    its edges too.
    """
    lo, hi = limits[0]
    along = [b[p.index(0)] for p, b in bins.items() if 0 in p]
    if not along or not lo < 0 < hi:
        return limits, bins, margin_bins
    width = (hi - lo) / along[0]
    below = int(np.ceil(-lo / width))
    count = below + int(np.ceil(hi / width))
    limits = limits.copy()
    limits[0] = (-below * width, (count - below) * width)
    bins = {p: tuple(count if a == 0 else n for a, n in zip(p, b, strict=True))
            for p, b in bins.items()}
    return limits, bins, count * max(1, int(np.ceil(margin_bins / count)))


def _magnify(limits, placed, stretch):
    """``{pair: (side, k)}`` for the panels whose equal aspect would leave them a sliver.

    A lone panel with a side ``MAGNIFY_ABOVE`` times shorter than the other
    (in the data's units) is also drawn ``k`` times magnified along it, in a
    panel of its own beside (or under) the true shape. In a pair grid only
    z[0] is magnified: the boundary's normal is a discriminant, not a
    variance direction, so it is the axis that is often far narrower than
    the principal components; the grid's z[0] column gets a magnified twin.
    """
    if stretch:
        return {}
    if len(placed) == 1:
        pair = placed[0][2]
        spans = [limits[a, 1] - limits[a, 0] for a in pair]
        short = int(np.argmin(spans))
        ratio = spans[1 - short] / spans[short]
        if not ratio >= MAGNIFY_ABOVE[short]:
            return {}
        return {pair: (short, int(min(np.floor(ratio), MAX_MAGNIFY)))}
    column = [p for _, _, p in placed if p[0] == 0]
    others = {a for _, _, p in placed for a in p} - {0}
    ratio = max(limits[a, 1] - limits[a, 0] for a in others) / (limits[0, 1] - limits[0, 0])
    if not column or not ratio >= MAGNIFY_ABOVE[0]:
        return {}
    k = int(min(np.floor(ratio), MAX_MAGNIFY))
    return dict.fromkeys(column, (0, k))


def _times(k):
    """A magnification as the labels say it: ``8``, ``6,933``, ``1.27e+12``."""
    return f"{k:,}" if k < 10**7 else f"{k:.3g}"


def _finer_counts(limits, bins, magnify):
    """``{pair: (side, f)}``: how much finer a twin's cells are counted than the true shape's.

    Drawn ``k`` times magnified, a cell ``f`` times finer along that side
    looks square: ``f = k`` unless the true shape's short side already has
    more cells than square ones (``_bins`` gives it at least 8).
    """
    out = {}
    for pair, (side, k) in magnify.items():
        short, long = pair[side], pair[1 - side]
        cells = (limits[short, 1] - limits[short, 0]) / bins[pair][side]
        square = (limits[long, 1] - limits[long, 0]) / bins[pair][1 - side]
        out[pair] = (side, max(1, round(k * cells / square)))
    return out


def _qda_of(model):
    """The model's unregularised QDA for ``--qda``; a singular class covariance says what to do.

    The solver's own advice ("increase reg_param") names an option ``plot``
    does not have.
    """
    try:
        return model.qda()
    except SingularScatterError as exc:
        text = str(exc).replace("; increase reg_param", "")
        msg = (f"--qda draws QDA without regularisation, and {text}: draw without --qda, or "
               "in Python fit streamproj.StreamingQDA(reg_param=...) to classify with it")
        raise SingularScatterError(msg) from None


def _twin_places(placed, magnify):
    """(row, col) of each placed pair's magnified twin, or None: beside or under its true shape.

    A lone panel's twin sits right of it (x magnified) or under it (y
    magnified); a grid's z[0] column gets a twin column right of it, and the
    grid's other columns move one to the right.
    """
    out: list[tuple[int, int] | None] = []
    for r, c, pair in placed:
        if pair not in magnify:
            out.append(None)
        elif len(placed) == 1:
            out.append((0, 1) if magnify[pair][0] == 0 else (1, 0))
        else:
            out.append((r, c + 1))
    return out


def _plane_scores(source, i, j):
    """``z[i], z[j] -> scores`` of the linear rule at the plane's points: (A (2, K), b (K,))."""
    comps = source.components[[i, j]]
    A = comps @ source.coef.T
    b = source.center @ source.coef.T + source.intercept
    return A, b


def _boundary_drawer(source, i, j, qda_model, exact, ties=()):
    """The decision boundary in the plane of axes (i, j), as a drawing function.

    ``exact``: the plane holds the linear rule (:func:`~streamproj.solvers.plane_holds_rule`);
    otherwise its boundaries are a slice, drawn dashed. ``ties``: for K > 2
    classes, the plane's tie segments within its limits (:func:`_tie_segments`).
    """
    binary = source.coef.shape[0] == 1

    def draw(ax, limits):
        if binary and i == 0:
            ax.axvline(0.0, color=figmod.BOUNDARY_COLOR, lw=1.6, zorder=LDA_ON_TOP)
        elif binary and j == 0:
            ax.axhline(0.0, color=figmod.BOUNDARY_COLOR, lw=1.6, zorder=LDA_ON_TOP)
        elif not binary:
            _linear_regions(ax, ties, figmod.BOUNDARY_COLOR,
                            style="-" if exact else (0, (4, 2)), lw=1.4 if exact else 1.0)
        # two classes: a plane without z[0] lies in LDA's boundary z[0] = 0, and QDA's, when
        # near it, crosses that plane in shapes of no meaning (a large ellipse for a
        # boundary a hair from LDA's): QDA is drawn where z[0] is
        if qda_model is not None and (not binary or 0 in (i, j)):
            comps = source.components[[i, j]]
            _regions(ax, limits,
                     lambda z: solvers.qda_log_posterior(qda_model, source.center + z @ comps),
                     QDA_COLOR, ":")

    return draw


def _linear_regions(ax, ties, color, style="-", lw=1.4):
    """Where the winning class changes: the tie segments (:func:`_tie_segments`), exactly.

    Each class wins on a convex polygon (:func:`_winning_polygons`); the
    edges between two classes' polygons are drawn once, as the segments they
    are (straight at any zoom, unlike a contour of a grid of cells).
    """
    xs: list[float] = []
    ys: list[float] = []
    for start, end in ties:
        xs.extend([start[0], end[0], np.nan])
        ys.extend([start[1], end[1], np.nan])
    if xs:
        ax.plot(xs, ys, color=color, lw=lw, ls=style, solid_capstyle="butt", zorder=LDA_ON_TOP)


def _tie_segments(limits, A, b):
    """The segments inside ``limits`` where two classes tie and no third scores higher.

    Parameters
    ----------
    limits : ((x0, x1), (y0, y1))
    A : ndarray (2, K)
    b : ndarray (K,)

    Returns
    -------
    list of (start, end), each an ndarray (2,)
    """
    out = []
    for p, (vertices, by) in enumerate(_winning_polygons(limits, A, b)):
        m = len(vertices)
        for e in range(m):
            start, end = vertices[e], vertices[(e + 1) % m]
            # an edge shared with class by[e]: drawn from the lower class only (a cut through a
            # vertex leaves an edge of no length)
            if by[e] > p and not np.array_equal(start, end):
                out.append((start, end))
    return out


def _winning_polygons(limits, A, b):
    """Each class's region of the box, where its score ``z @ A[:, k] + b[k]`` is the highest.

    A region is the box cut by the half-planes ``s_k >= s_q``: a convex
    polygon, found by cutting with the most violated half-plane until none
    is violated at any vertex (then, by convexity, nowhere). That takes a
    few cuts per class whatever ``K`` is (each checks all ``K`` at once),
    where testing every pair of classes took ``O(K^3)``.

    Returns
    -------
    list of (vertices (m, 2), by (m,)): ``by[e]`` is the class whose tie
    cut edge ``e`` (from vertex ``e`` to ``e + 1``), -1 for the box's sides.
    An empty region has no vertices.
    """
    (x0, x1), (y0, y1) = limits
    box = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float64)
    k = A.shape[1]
    scale = np.abs(box) @ np.abs(A) + np.abs(b)  # the scores' size: the ties' rounding
    out = []
    for p in range(k):
        normal = A[:, [p]] - A  # (2, K): s_p - s_q = z @ normal + offset
        offset = b[p] - b
        tol = 1e-12 * (scale[:, p, None] + scale).max(axis=0)
        vertices, by = box, np.full(4, -1)
        for _ in range(4 * k + 4):
            h = vertices @ normal + offset
            h[:, p] = 0.0
            worst = h.min(axis=0) + tol
            q = int(np.argmin(worst))
            if worst[q] >= 0:
                break
            vertices, by = _cut(vertices, by, h[:, q], q)
            if len(vertices) < 3:
                vertices, by = np.empty((0, 2)), np.empty(0, dtype=int)
                break
        out.append((vertices, by))
    return out


def _cut(vertices, by, h, q):
    """The part of a convex polygon where ``h >= 0`` (``h`` at each vertex); new edge by ``q``."""
    m = len(vertices)
    keep_v, keep_by = [], []
    for e in range(m):
        a, c = vertices[e], vertices[(e + 1) % m]
        ha, hc = h[e], h[(e + 1) % m]
        if ha >= 0:
            keep_v.append(a)
            keep_by.append(by[e])
            if hc < 0:  # leaves: the cut line runs from here to where the polygon comes back
                keep_v.append(a + (c - a) * (ha / (ha - hc)))
                keep_by.append(q)
        elif hc >= 0:  # comes back in
            keep_v.append(a + (c - a) * (ha / (ha - hc)))
            keep_by.append(by[e])
    return np.asarray(keep_v).reshape(-1, 2), np.asarray(keep_by, dtype=int)


def _regions(ax, limits, scores, color, style):
    """Outline where the winning class changes, on a grid over the plane."""
    (x0, x1), (y0, y1) = limits
    gx = np.linspace(x0, x1, 300)
    gy = np.linspace(y0, y1, 300)
    mx, my = np.meshgrid(gx, gy)
    s = scores(np.column_stack([mx.ravel(), my.ravel()]))
    winner = solvers.scores_to_index(s).reshape(mx.shape).astype(float)
    if winner.max() > winner.min():
        levels = np.arange(winner.max()) + 0.5
        ax.contour(mx, my, winner, levels=levels, colors=color, linewidths=QDA_WIDTH,
                   linestyles=style)


def _winner(classes, scores):
    """``(class, placed)`` of each row's scores: its winning class, and whether it has one.

    A NaN coordinate (an overflowed projection) is on neither side of a
    boundary and in no region: its row agrees with no classifier (it was
    given the first class, and "agreed" wherever the classifier said so).
    """
    nan = np.isnan(scores)
    return classes.take(solvers.scores_to_index(scores)), ~(nan if nan.ndim == 1 else nan.any(axis=1))


def _choice(source):
    if len(source.classes) == 2:
        return lambda z: _winner(source.classes, z[:, 0])
    A, b = _plane_scores(source, 0, 1)
    return lambda z: _winner(source.classes, z[:, :2] @ A + b)


def _plane_rule(stats, lin, origin, classes):
    """``z -> (class, placed)`` (:func:`_winner`) by the LDA of the plane ``z = (x - origin) @ lin.T`` alone.

    Solved from the model's summaries mapped onto the plane: the best linear
    rule that sees only the plane (``z`` is centred: no cancellation).
    """
    plane = ClassStats(stats.classes, stats.counts, (stats.means - origin) @ lin.T,
                       lin @ stats.within @ lin.T)
    lda2 = solvers.lda(plane)
    classes = np.asarray(classes)

    def choice(z):
        s = z[:, :2] @ lda2.coef.T + lda2.intercept
        return _winner(classes, s[:, 0] if s.shape[1] == 1 else s)

    return choice


def _own_choice(source, model):
    """``z -> (class, placed)`` by the best rule of the plane of z[0], z[1] on its own, or None.

    For K > 2 classes with the model at hand: the measure the PCA panels are
    judged by, so the two are comparable (the plane's cut of the full rule,
    which the picture draws, is a harsher test). None for two classes (the
    plane holds the rule) or without the model's summaries.
    """
    if model is None or len(source.classes) <= 2 or source.components.shape[0] < 2:
        return None
    return _plane_rule(model.stats_, source.components[:2], source.center, model.classes_)


def _classmap(source, top):
    # two classes each keep their own bucket: the wrong-side lines name them, and "other"
    # also holds labels the model does not know (--top 1 reported those as class 0's)
    if len(source.classes) <= max(top, 2):
        return ClassMap(source.classes)
    # no more than the view colours: the shown classes' places, and so their colours, differed
    # between the two past it (the PNG's legend sends the reader to the view to name them)
    from ..view import MAX_VIEW_CLASSES

    top = min(top, MAX_VIEW_CLASSES - 1)
    counts, _unknown = count_classes(source.blocks, "label", source.classes)
    return ClassMap(source.classes, counts, top)


def summarize(source, axes=None, stretch=False, top=8, resolution=420, model=None):
    """Robust limits from a sample, then one pass.

    Returns the filled :class:`PictureSummary`, the placed pairs
    (:func:`_pairs`) and the magnified twins (:func:`_magnify`).
    """
    d = source.blocks.arrays["z"].shape[1]
    placed = _pairs(d, axes)
    pairs = [p for _, _, p in placed]
    classmap = _classmap(source, top)
    sample = sample_columns(source.blocks, ["z", "label"])
    limits = class_spread_limits(sample["z"], sample["label"])
    binary = None
    if len(source.classes) == 2:
        binary = (classmap.bucket_of_class(0), classmap.bucket_of_class(1))
        limits = with_zero(limits, 0)  # the boundary (a class far on one side drew none)
    bins = _bins(limits, pairs, source.blocks.n, stretch, resolution)
    margin_bins = 200
    if binary is not None:
        limits, bins, margin_bins = _on_the_boundary(limits, bins, margin_bins)
    # counted finer, for narrow classes; 0 stays an edge of every coarsening (powers of 2)
    margin_bins *= figmod.MARGIN_FINE
    magnify = _magnify(limits, placed, stretch)
    summary = PictureSummary(classmap, limits, pairs, bins, margin_bins=margin_bins,
                             binary=binary, choice=_choice(source),
                             own_choice=_own_choice(source, model),
                             finer=_finer_counts(limits, bins, magnify))
    names = [n for n in ("z", "label", "y", "predicted") if n in source.blocks.arrays]
    stream(source.blocks, summary.add, names)
    return summary, placed, magnify


def _pca_panel(model, X, labels, classmap, mode, resolution):
    """Ordinary PCA of the input rows (raw or standardised features), one pass."""
    stats = model.stats_
    mean = stats.mean
    total = stats.total
    if mode == "standardized":
        scale = np.sqrt(np.maximum(np.diag(total) / max(stats.n_samples - 1, 1), 1e-300))
        corr = total / np.outer(scale, scale)
        lin = solvers.pca_axes(corr) / scale  # z = ((x - μ)/σ) @ E.T
        note = "features standardised (z-scores) before PCA"
    else:
        lin = solvers.pca_axes(total)
        note = "features as given (not standardised)"
    # the best linear rule in this plane, solved from the summaries mapped onto it
    choice = _plane_rule(stats, lin, mean, model.classes_)
    blocks = Blocks({"x": X, "label": labels})
    bfloat16 = getattr(model, "bfloat16", False)  # rows as stored: decode them as the model does

    def decode(x):
        return bfloat16_to_float32(x) if bfloat16 else x

    def centred(x):
        return np.subtract(x, mean, dtype=np.float64) @ lin.T

    def project(x):
        return centred(decode(x))

    limits = spread_limits(project(sample_rows(blocks, "x", max_rows=100_000)))
    pair = (0, 1)
    summary = PictureSummary(classmap, limits, [pair],
                             _bins(limits, [pair], blocks.n, False, resolution), margin_bins=1,
                             choice=choice)

    def work(block, _start):
        x = decode(block["x"])
        # the model's classes of a block of rows (not model.predict: a numpy block has no
        # column names, and a model fitted on named columns would warn on every block)
        predicted = model._take_classes(solvers.scores_to_index(model._scores(x)))
        summary.add({"z": centred(x), "label": block["label"], "predicted": predicted})

    stream(blocks, work)
    disagree = 1 - summary.agree / max(summary.predicted, 1)
    title = "standard PCA" + (" (standardised)" if mode == "standardized" else "")
    text = (f"{note}\nthe best line in this plane disagrees with\nthe classifier on "
            f"{disagree:.1%} of rows; {summary.outside[pair]:,} "
            f"row{'' if summary.outside[pair] == 1 else 's'} outside")
    return figmod.Panel(summary.grids[pair], (limits[0], limits[1]), "PC 1", "PC 2", title,
                        note=text)


def _class_legend(names, rows, colors, most=LEGEND_CLASSES):
    """Legend entries of the classes drawn: all of them, or the ``most`` largest and a note.

    Past a few dozen colours no one matches a swatch to a class; a legend of
    them all filled the figure (``--top 200``). The view's hover names them.
    """
    # one line each: a class name past 40 characters is cut (the notes keep it)
    entries = [(f"{name if len(name) <= 40 else name[:39] + '…'} ({r:,})", colors[k], "patch")
               for k, (name, r) in enumerate(zip(names, rows, strict=True)) if r > 0]
    if len(entries) <= most:
        return entries, None
    drawn = [k for k, r in enumerate(rows) if r > 0]
    keep = sorted(sorted(drawn, key=lambda k: -rows[k])[:most])  # the largest, in order
    rest = [k for k in drawn if k not in set(keep)]
    other = f" ({names[-1]!r} is one)" if rows[-1] > 0 else ""  # the last bucket: see ClassMap
    note = (f"legend: the {len(keep)} largest of the {len(drawn):,} colours drawn{other}; the "
            f"other {len(rest):,} ({sum(int(rows[k]) for k in rest):,} rows) are named by the "
            "HTML view's hover (--output view.html; it colours up to 199 classes, --top 199)")
    return [entries[drawn.index(k)] for k in keep], note


def _classes_outside(summary, share=0.1, most=3):
    """Notes for the classes of which ``share`` or more of the rows fall outside some panel."""
    cm, rows = summary.classmap, summary.rows
    worst = summary.outside_any_rows
    hit = [k for k in np.argsort(-worst / np.maximum(rows, 1), kind="stable")
           if rows[k] and worst[k] >= share * rows[k]]
    lines = [f"class {cm.names[k]}: {worst[k]:,} of its {rows[k]:,} rows "
             f"({worst[k] / rows[k]:.0%}) fall outside the limits" for k in hit[:most]]
    if len(hit) > most:
        lines.append(f"and {len(hit) - most} more classes with {share:.0%} or more of their rows "
                     "outside")
    return lines


def _far_rows(summary, axes, far=10.0):
    """A note for each drawn axis whose rows reach ``far`` times the drawn range beyond it.

    A handful of rows a million units out are "5 rows outside" in the limits'
    note, yet they can pull the classifier's means and scatter: say how far.
    """
    lines = []
    for a in axes:
        lo, hi = summary.limits[a]
        least, most = summary.extremes[a]
        reach = max(lo - least, most - hi)
        if reach > far * (hi - lo):
            at = least if lo - least >= most - hi else most
            # (an infinite coordinate, a projection that overflowed, is no multiple of a range)
            beyond = (f"{reach / (hi - lo):.3g}x the drawn range beyond the limits"
                      if np.isfinite(reach) else "infinitely far: their projection overflowed")
            lines.append(f"far outliers: rows reach z[{a}] = {at:.3g}, {beyond}; rows "
                         "that far can pull a classifier's means and scatter")
    return lines


def _wrong_side(summary):
    if summary.binary is None:
        return []
    cm, rows, wrong = summary.classmap, summary.rows, summary.wrong

    def share(k):  # (a few rows of many are not "0.00%", and none of none no share at all)
        return "< 0.01%" if 0 < wrong[k] < 0.00005 * rows[k] else f"{wrong[k] / rows[k]:.2%}"

    return [f"class {cm.names[k]}: no rows here" if not rows[k] else
            f"class {cm.names[k]}: {share(k)} of its {rows[k]:,} rows on the "
            f"wrong side of the boundary (z[0] {'> 0' if k == summary.binary[0] else '≤ 0'})"
            for k in summary.binary]


def draw_source(source, *, model=None, axes=None, stretch=False, top=8, compare_pca=None,
                qda=False, X=None, size=None, dpi=100, resolution=420):
    """The whole figure for a :class:`Source`; see :func:`streamproj.plot.draw_output`."""
    if (compare_pca or qda) and model is None:
        asked = [name for name, on in (("--compare-pca", compare_pca), ("--qda", qda)) if on]
        msg = (f"{' and '.join(asked)} need{'s' if len(asked) == 1 else ''} the model: pass "
               "--model MODEL (in Python, model=...)")
        raise InputError(msg)
    qda_model = _qda_of(model) if qda else None  # before the pass: a refusal costs no reading
    if size is not None:  # a large figure gets finer cells (they were 9 px at 3000x1600)
        resolution = max(resolution, round(resolution * max(size[0] / 1600, size[1] / 800)))
    summary, placed, magnify = summarize(source, axes, stretch, top, resolution, model)
    cm = summary.classmap
    colors = figmod.bucket_colors(cm)
    names = source.axis_names
    panels = []
    # the magnified twins' places: right of their true shape (x), or under it (y)
    twins = {pair: where for (_, _, pair), where
             in zip(placed, _twin_places(placed, magnify), strict=True) if where}
    # whether each plane holds the linear rule (else its boundaries are a slice)
    exact = [solvers.plane_holds_rule(source.components, source.coef, i, j)
             for _, _, (i, j) in placed]
    # K > 2: each plane's tie segments, found once for its panel, its twin and the legend
    ties = {(i, j): [] if summary.binary is not None else _tie_segments(
        (summary.limits[i], summary.limits[j]), *_plane_scores(source, i, j))
        for _, _, (i, j) in placed}
    for (r, c, (i, j)), holds in zip(placed, exact, strict=True):
        lim = (summary.limits[i], summary.limits[j])
        labels = [f"z[{i}]: {names[i]}", f"z[{j}]: {names[j]}"]
        drawer = _boundary_drawer(source, i, j, qda_model, holds, ties[(i, j)])
        shift = int(bool(twins) and len(placed) > 1 and c > 0)  # the grid's twin column
        panels.append((r, c + shift, figmod.Panel(summary.grid((i, j)), lim, labels[0],
                                                  labels[1], boundary=drawer)))
        if (i, j) in twins:
            side, k = magnify[(i, j)]
            which = (i, j)[side]
            labels[side] = f"z[{which}] magnified {_times(k)}x"
            # a lone twin's title says what it is: right of a tall sliver, or over a flat
            # strip's (the twin under it has no room for one)
            title = (f"z[{which}] magnified {_times(k)}x (true shape: left)"
                     if len(placed) == 1 and side == 0 else None)
            panels.append((*twins[(i, j)], figmod.Panel(
                summary.grids[(i, j)], lim, labels[0], labels[1], title, boundary=drawer,
                magnify=(side, k), fine=summary.finer[(i, j)][1])))
    if len(placed) == 1:
        pair = placed[0][2]
        panels[0][2].title = ("boundary-preserving projection" if not twins
                              else "true shape (equal aspect)" if magnify[pair][0] == 0
                              else f"true shape (equal aspect); under it z[{pair[1]}] magnified "
                                   f"{_times(magnify[pair][1])}x")
    n = summary.n
    binary = summary.binary
    margin = {"margin": summary.margin, "limits": summary.limits[0], "colors": colors,
              "names": cm.names, "wrong": summary.wrong, "rows": summary.rows,
              "binary": binary, "label": f"z[0]: {names[0]}", "lines": _wrong_side(summary)}
    pca = []
    if compare_pca:
        modes = ["raw", "standardized"] if compare_pca == "both" else [compare_pca]
        labels = source.blocks.arrays["label"]
        pca = [_pca_panel(model, X, labels, cm, mode, resolution) for mode in modes]
    # a legend entry is one line: a class name past 40 characters is cut (the notes keep it)
    legend, legend_note = _class_legend(cm.names, summary.rows, colors)
    if binary is not None:
        # drawn in every panel with z[0] (its limits hold 0), in no other
        if any(0 in pair for _, _, pair in placed):
            legend.append(("decision boundary z[0] = 0", figmod.BOUNDARY_COLOR, "line"))
        else:
            legend.append(("the boundary z[0] = 0 is not a line in this plane", "none", "text"))
    else:
        # an entry for what some panel draws: a plane can show no tie at all
        shown = [bool(ties[pair]) for _, _, pair in placed]
        if any(e and s for e, s in zip(exact, shown, strict=True)):
            legend.append(("LDA boundaries", figmod.BOUNDARY_COLOR, "line"))
        if any(s and not e for e, s in zip(exact, shown, strict=True)):
            legend.append(("LDA boundaries (slice)", figmod.BOUNDARY_COLOR, "dashed"))
        if not any(shown):
            legend.append(("no LDA boundary crosses the drawn limits", "none", "text"))
    with_z0 = any(0 in pair for _, _, pair in placed)
    if qda_model is not None and (binary is None or with_z0):
        legend.append(("QDA boundary (slice)", QDA_COLOR, "dotted"))
    notes = []
    if qda_model is not None and binary is not None and not all(0 in p for _, _, p in placed):
        notes.append("QDA's boundary is drawn only in panels with z[0]: the others lie in LDA's "
                     "boundary z[0] = 0, where QDA's crossing has no meaningful shape")
    if twins and len(placed) > 1:
        k = magnify[placed[0][2]][1]
        notes.append(f"the grid's second column is its first (z[0]) magnified {_times(k)}x: the same "
                     "rows; the first column is the true shape")
    if any(label.endswith("(slice)") for label, _, _ in legend):
        notes.append("(slice): the rule also depends on directions a panel does not show; drawn is "
                     "where the panel's plane through the centre (those directions at 0) cuts it")
    if summary.labelled:
        notes.append(f"classifier accuracy on these rows {summary.correct / summary.labelled:.2%}")
    if summary.predicted:
        where = ("LDA regions in the plane of z[0], z[1]" if binary is None
                 else "boundary: the line z[0] = 0" if with_z0
                 else "the side of z[0] = 0 each row is on; this plane does not show z[0]")
        notes.append(f"the picture agrees with the classifier on "
                     f"{summary.agree / summary.predicted:.2%} of rows ({where})")
    if summary.predicted and summary.own_choice is not None:  # K > 2, the model at hand
        judged = "judged as the PCA panels are" if compare_pca else "a kinder test than the above"
        notes.append(f"{judged}: the best line of its own in the plane of z[0], z[1] disagrees "
                     f"with the classifier on {1 - summary.agree_own / summary.predicted:.1%} "
                     "of rows")
    outside = summary.outside_any
    notes.extend(_classes_outside(summary))
    if outside:
        notes.extend(_far_rows(summary, sorted({a for _, _, p in placed for a in p})))
    notes.append(f"limits: a sample's range, at most half the 1-99 % quantiles' width beyond them, "
                 f"padded 5 %; {outside:,} of {n:,} rows ({outside / max(n, 1):.2%}) fall outside "
                 + ("and are not drawn" if len(placed) == 1 else "some panel and are not drawn there"))
    if summary.nan_rows:  # (counted outside above, but no limit leaves a NaN out: said so)
        notes.append(f"{summary.nan_rows:,} row{'' if summary.nan_rows == 1 else 's'} "
                     f"({summary.nan_rows / max(n, 1):.2%}) "
                     f"{'has' if summary.nan_rows == 1 else 'have'} a NaN coordinate and "
                     f"{'is' if summary.nan_rows == 1 else 'are'} not drawn")
    if legend_note:
        notes.append(legend_note)
    if cm.n_buckets - 1 < len(source.classes):
        from ..view import MAX_VIEW_CLASSES

        hidden = len(source.classes) - (cm.n_buckets - 1)
        notes.append(f"{len(source.classes):,} classes: the {cm.n_buckets - 1} largest are shown, "
                     f"the other {hidden:,} class{'es' if hidden != 1 else ''} "
                     f"({cm.hidden_rows:,} rows) {'are' if hidden != 1 else 'is'} grey ({cm.other_name!r}); "
                     + ("--top N colours more" if cm.n_buckets < MAX_VIEW_CLASSES
                        else f"{MAX_VIEW_CLASSES - 1} are the most coloured, as in the HTML view"))
    # "other" also holds the rows whose label is none of the model's classes (new data
    # projected by an older model): said, not left to pass for classes not shown
    unknown = int(summary.rows[-1]) - cm.hidden_rows
    if unknown:
        notes.append(f"{unknown:,} rows ({unknown / max(n, 1):.2%}) have labels the model does not "
                     f"know (none of its {len(source.classes):,} classes): grey, in {cm.other_name!r}")
    d = source.blocks.arrays["z"].shape[1]
    if axes is None and d > MAX_GRID_AXES:
        notes.append(f"axes z[{MAX_GRID_AXES}]..z[{d - 1}] not drawn; choose a pair with --axes I,J")
    # (stretched: the figure states the magnification it draws, figmod.draw)
    title = f"Boundary-preserving projection of {source.data_name}"
    subtitle = (f"{n:,} rows · {len(source.classes)} classes · {d} axes · colour = "
                f"{'true class (y)' if source.labels_are == 'y' else 'predicted class'} · "
                f"{source.model_text}")
    fig = figmod.draw(panels, title=title, subtitle=subtitle, legend=legend, colors=colors,
                      margin=margin, pca=pca, notes=notes, stretch=stretch, size=size, dpi=dpi)
    fig.streamproj_summary = summary
    fig.streamproj_magnify = magnify
    return fig
