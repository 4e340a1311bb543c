"""Drawing the static picture from accumulated summaries (matplotlib, no pyplot).

The rules: both axes of a projection are in the data's units, so panels
have equal aspect unless a stretch is asked for (and then the figure says
so); where classes overlap a pixel's colour is the classes' colours mixed by
their counts and its opacity grows with the log of the total count (the
density key reads it back); titles, legends, keys and notes sit outside the
data area.
"""

import functools
import math
import warnings

import numpy as np

from ..errors import InputError

__all__ = ["OTHER_COLOR", "PALETTE", "Panel", "draw", "shade"]

# Okabe–Ito (black swapped for Tol's wine, which mixes better): distinguishable
# with the common colour-vision deficiencies. "other" is grey.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#882255"]
OTHER_COLOR = "#8C8C8C"
MIN_ALPHA = 0.25
SOFT_EXTRA = 8  # colours past the palette taken from muted tones before the whole gamut
BOUNDARY_COLOR = "#111111"
MIN_DENSITY_ROWS = 200  # fewer rows of a class: the margin panel draws them as ticks
FILLED_UP_TO = 4  # classes in the margin panel drawn filled under their outlines (more: outlines)
SLIVER_IN = 0.15  # a panel narrower than this (inches) draws no boundary: its twin does
MARGIN_FINE = 16  # the margin histograms are counted this many times finer than drawn for most


def _tick_formatter():
    return _tick_formatter_class()()


@functools.cache
def _tick_formatter_class():
    from matplotlib.ticker import Formatter

    class Ticks(Formatter):
        """:func:`_tick` labels in as many digits as tell the axis's ticks apart.

        Four significant digits labelled every tick of z[1] about 2.3e7 (a hyperplane-
        centred frame) with a spread of 3 "2.332e7".
        """

        digits = 4

        def set_locs(self, locs):
            super().set_locs(locs)
            values = np.unique(np.asarray(locs, dtype=np.float64))
            values = values[np.isfinite(values)]
            self.digits = 4
            if values.size < 2:
                return
            # each label within a tenth of the step of its tick (distinct labels alone could
            # round steps of 0.25 to .2, .5, .8)
            near = 0.1 * np.diff(values).min()
            while self.digits < 17 and any(abs(float(_tick(v, digits=self.digits)) - v) > near
                                           for v in values):
                self.digits += 1

        def __call__(self, value, pos=None):
            return _tick(value, pos, self.digits)

    return Ticks


def _in_view(locator):
    """``locator`` less the locations outside its axis's view: the same ticks drawn.

    matplotlib makes a tick (five artists, about 1 ms) for every location a
    locator gives and draws those in view; MaxNLocator's reach a step beyond
    the limits on either side: one tick in five of the figure was made and
    dropped. Only for formatters that label each location on its own.
    """
    return _in_view_class()(locator)


@functools.cache
def _in_view_class():
    from matplotlib.ticker import Locator

    class InView(Locator):
        def __init__(self, base):
            self.base = base

        def set_axis(self, axis):
            super().set_axis(axis)
            self.base.set_axis(axis)

        def __call__(self):
            if self.axis is None:
                return self.base()
            lo, hi = sorted(self.axis.get_view_interval())
            slack = (hi - lo) * 1e-10  # matplotlib's own test of "in view" (linear axes)
            return [v for v in self.base() if lo - slack <= v <= hi + slack]

        def nonsingular(self, v0, v1):
            return self.base.nonsingular(v0, v1)

        def view_limits(self, vmin, vmax):
            return self.base.view_limits(vmin, vmax)

    return InView


def _lab(rgb):
    """CIELAB (D65) of sRGB colours in [0, 1]: distances there track how different they look."""
    rgb = np.asarray(rgb, dtype=np.float64)
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    to_xyz = np.array([[0.4124564, 0.3575761, 0.1804375],
                       [0.2126729, 0.7151522, 0.0721750],
                       [0.0193339, 0.1191920, 0.9503041]])
    xyz = lin @ to_xyz.T / np.array([0.95047, 1.0, 1.08883])
    eps = (6 / 29) ** 3
    f = np.where(xyz > eps, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]),
                     200 * (f[..., 1] - f[..., 2])], axis=-1)


@functools.lru_cache(maxsize=4)
def _extra_colors(count):
    """``count`` colours beyond the palette, each as far (CIELAB) as it can be from all before.

    Greedy farthest-point choice over a grid of sRGB colours: not greyish
    (grey is "other"), not so light that it vanishes on white, not so dark
    that it reads as the boundary's black; the first ``SOFT_EXTRA`` also not
    fully saturated. Deterministic.
    """
    from matplotlib.colors import to_rgb

    axis = np.linspace(0.0, 1.0, 16)
    grid = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), axis=-1).reshape(-1, 3)
    lab = _lab(grid)
    chroma = np.hypot(lab[:, 1], lab[:, 2])
    ok = (chroma >= 25) & (lab[:, 0] >= 30) & (lab[:, 0] <= 88)
    grid, lab, chroma = grid[ok], lab[ok], chroma[ok]
    # the first few from muted, mid-light colours, as the palette's own: the farthest points
    # of the whole gamut are pure blue, lime and magenta, harsh beside it
    soft = (chroma <= 80) & (lab[:, 0] >= 35) & (lab[:, 0] <= 80)
    taken = _lab([to_rgb(c) for c in [*PALETTE, OTHER_COLOR, BOUNDARY_COLOR, "#ffffff"]])
    nearest = np.min(np.linalg.norm(lab[:, None] - taken[None], axis=-1), axis=1)
    picked = []
    for n in range(count):
        best = int(np.argmax(np.where(soft, nearest, -1.0) if n < SOFT_EXTRA else nearest))
        picked.append(tuple(grid[best]))
        nearest = np.minimum(nearest, np.linalg.norm(lab - lab[best], axis=1))
    return picked


def bucket_colors(classmap):
    """RGB (n_buckets, 3) in [0, 1]: the palette for the shown classes, grey for "other".

    Past the palette's eight, each further class gets the colour farthest
    (CIELAB) from every colour already used, so no two classes share one.
    """
    from matplotlib.colors import to_rgb

    shown = classmap.n_buckets - 1
    extra = _extra_colors(shown - len(PALETTE)) if shown > len(PALETTE) else []
    colors = [to_rgb(c) for c in PALETTE[:shown]] + list(extra) + [to_rgb(OTHER_COLOR)]
    return np.array(colors)


def shade(grid, colors, vmax=None, min_alpha=MIN_ALPHA):
    """Categorical shading: per cell the classes' colours mixed by count, opacity by log count.

    Parameters
    ----------
    grid : ndarray (B, bx, by) of counts
    colors : ndarray (B, 3)
    vmax : float, optional
        Count at full opacity (default: the largest cell total).

    Returns
    -------
    rgba : ndarray (by, bx, 4), row 0 at the bottom (``origin="lower"``)
    """
    grid = np.asarray(grid, dtype=np.float64)
    total = grid.sum(axis=0)
    vmax = float(vmax or max(total.max(), 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        mix = np.einsum("kxy,kc->xyc", grid, colors) / total[..., None]
        alpha = min_alpha + (1 - min_alpha) * np.log1p(total) / math.log1p(vmax)
    rgba = np.zeros((*total.shape, 4))
    filled = total > 0
    rgba[filled, :3] = mix[filled]
    rgba[filled, 3] = np.clip(alpha[filled], 0, 1)
    return np.transpose(rgba, (1, 0, 2))


class Panel:
    """One density panel: a grid of counts and how to draw it.

    Parameters
    ----------
    grid : ndarray (B, bx, by)
    limits : ((x0, x1), (y0, y1))
    xlabel, ylabel : str
    title : str, optional
    boundary : callable(ax, limits) or None
        Draws the decision boundary in this plane.
    note : str, optional
        Text under the panel.
    magnify : (side, k), optional
        Drawn ``k`` times magnified along side 0 (x) or 1 (y): a twin of a
        true-shape panel (its label says so).
    fine : int
        Cells of ``grid`` in one cell of the true shape's (a twin's grid is
        counted finer, so that its cells look square): shaded as those are.
    stretch : float, optional
        Drawn with x this many times longer than y, unit for unit (set by
        :func:`draw` when asked to stretch; the figure states it).
    """

    def __init__(self, grid, limits, xlabel, ylabel, title=None, boundary=None, note=None,
                 magnify=None, fine=1, stretch=None):
        self.grid, self.limits = grid, limits
        self.xlabel, self.ylabel, self.title = xlabel, ylabel, title
        self.boundary, self.note, self.magnify, self.fine = boundary, note, magnify, fine
        self.stretch = stretch

    @property
    def spans(self):
        """Width and height of the plotted limits."""
        (x0, x1), (y0, y1) = self.limits
        return x1 - x0, y1 - y0

    @property
    def drawn_spans(self):
        """The spans as drawn at equal aspect: a magnified side ``k`` times longer."""
        w, h = self.spans
        if self.magnify is None:
            return w, h
        side, k = self.magnify
        return (w * k, h) if side == 0 else (w, h * k)


def _draw_panel(ax, panel, colors, vmax, twin=False, small=False):
    (x0, x1), (y0, y1) = panel.limits
    ax.imshow(shade(panel.grid, colors, vmax), origin="lower", extent=(x0, x1, y0, y1),
              interpolation="nearest", aspect="auto")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    # exactly k times (a twin: its label says so), or as stretched (the notes say so)
    ax.set_aspect(1.0 / _stretch_of(panel), adjustable="box")
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    height_in = ax.get_position().height * ax.figure.get_figheight()
    # a panel a few pixels across shows its boundaries as a solid bar (they cross it steeply):
    # its magnified twin draws them
    if panel.boundary is not None and min(width_in, height_in) >= SLIVER_IN:
        panel.boundary(ax, panel.limits)
    fs = 8.5 if small else 10
    ax.set_xlabel(panel.xlabel, fontsize=fs)
    ax.set_ylabel(panel.ylabel, fontsize=fs)
    ax.tick_params(labelsize=8)
    from matplotlib.ticker import FixedLocator, MaxNLocator

    # (at a fixed aspect, equal or stretched, a panel may be a sliver; a twin has room)
    narrow_box = width_in < 1.6 and not twin
    if narrow_box:  # a tall thin panel (equal aspect): the labels must fit its width
        ax.set_xlabel(panel.xlabel.split(":")[0], fontsize=fs)
    if height_in < 1.6 and not twin:  # a wide flat one: and its height
        ax.set_ylabel(panel.ylabel.split(":")[0], fontsize=fs)
    if panel.title and not narrow_box:
        # y given: matplotlib then skips re-placing the title over the tick labels at each draw
        # (tight boxes of every axis); the ticks are below, so it stayed at 1.0 anyway
        ax.set_title(panel.title, fontsize=11, y=1.0)
    for axis, size, (lo, hi), most in ((ax.xaxis, width_in, (x0, x1), 4 if small else 6),
                                       (ax.yaxis, height_in, (y0, y1), 6)):
        if size < 0.25:  # a line, not a panel: no room for a label (its twin has them)
            axis.set_major_locator(FixedLocator([]))
        elif size < 0.7 and lo < 0 < hi:  # room for one label: the boundary's (or centre's) 0
            axis.set_major_locator(FixedLocator([0.0]))
        else:
            axis.set_major_locator(_in_view(MaxNLocator(2 if size < 1.2 else most)))
        axis.set_major_formatter(_tick_formatter())


def _tick(value, _pos=None, digits=4):
    """A tick label with its own exponent (``400``, ``0.025``, ``4e6``, ``-1.5e-6``).

    matplotlib's default puts one shared "1e6" at the axis's end, where it
    overprinted the panel's title. ``digits`` significant digits at most.
    """
    text = f"{value:.{digits}g}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")
    return "0" if text in ("-0", "0") else text


def _margin_step(counts, rows, most=MARGIN_FINE):
    """Fine bins per drawn bin of one class's histogram: a power of two up to ``most``.

    The histograms are counted ``most`` times finer than a wide class needs,
    so that a narrow class (its rows in a few percent of the panel) is drawn
    in many bins, not 2 or 3: the coarsest step that still puts about
    ``sqrt(rows)`` bins (12 to 40) across the class's central 98 %.
    """
    cum = np.cumsum(counts)
    lo, hi = np.searchsorted(cum, [0.01 * rows, 0.99 * rows])
    spread = int(hi - lo) + 1
    want = float(np.clip(np.sqrt(rows), 12, 40))
    step = most
    while step > 1 and spread / step < want:
        step //= 2
    return step


def _margin_panel(ax, margin, limits, colors, names, wrong, rows, binary, label):
    """Per-class densities of z[0] (each class integrates to 1), boundary at 0.

    A class of fewer than ``MIN_DENSITY_ROWS`` rows is drawn as ticks where
    its rows are (when another class has more).
    """
    lo, hi = limits
    nbins = margin.shape[1]
    edges = np.linspace(lo, hi, nbins + 1)
    width = (hi - lo) / nbins
    # densities of coordinates near 1e300 are near 1e-301, a y range matplotlib takes for
    # none (each histogram was drawn flat on 0): drawn in units of 10^-e, which the axis says
    e = int(np.floor(np.log10(hi - lo))) if hi - lo > 1e100 else 0
    width /= 10.0**e
    from matplotlib.patches import StepPatch

    lines = []
    top = 0.0
    # a class of a few rows is a handful of spikes far above every other density: its
    # rows are drawn as ticks on the axis instead, and the scale is the other classes'
    few = [bool(0 < r < MIN_DENSITY_ROWS) for r in rows]
    if all(f for f, r in zip(few, rows, strict=True) if r):
        few = [False] * len(few)
    centres = (edges[:-1] + edges[1:]) / 2
    # filled under their outlines for a few classes; past FILLED_UP_TO the fills piled up
    # into mud and hid the outlines, which alone tell the classes apart
    fill = sum(1 for f, r in zip(few, rows, strict=True) if r and not f) <= FILLED_UP_TO
    for k in range(margin.shape[0]):
        if rows[k] == 0:
            continue
        if few[k]:
            at = centres[margin[k] > 0]
            ax.plot(at, np.full(at.shape, 0.03), ls="none", marker="|", ms=9, mew=1.6,
                    color=colors[k], transform=ax.get_xaxis_transform(), clip_on=False)
        else:
            f = _margin_step(margin[k], rows[k])
            starts = np.arange(0, nbins, f)
            dens = np.add.reduceat(margin[k], starts) / (rows[k] * width * np.diff([*starts, nbins]))
            steps = edges[[*starts, nbins]]
            top = max(top, float(dens.max()))
            # as ax.stairs draws them, without its costly data-limit update (limits set below)
            if fill:
                ax.add_artist(StepPatch(dens, steps, baseline=0, facecolor=colors[k],
                                        linewidth=0, alpha=0.25, fill=True))
            # (above every class's fill: the next class's covered this one's outline)
            ax.add_artist(StepPatch(dens, steps, baseline=0, edgecolor=colors[k], lw=1.4,
                                    fill=False, zorder=1.5))
        if binary is not None and k in binary:
            side = "> 0" if k == binary[0] else "≤ 0"
            lines.append(f"{names[k]}: {wrong[k] / rows[k]:.1%} of {rows[k]:,} on the wrong side "
                         f"(z[0] {side})")
    if binary is not None:
        ax.axvline(0.0, color=BOUNDARY_COLOR, lw=1.6)
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, top * (1 + ax.margins()[1]) if top > 0 else 1)
    fig = ax.figure
    box = ax.get_position()
    width_in, height_in = box.width * fig.get_figwidth(), box.height * fig.get_figheight()
    ax.set_xlabel(_first_fitting([label, label.split(":")[0]], width_in, 10, fig.dpi),
                  fontsize=10)
    unit = f" (x1e-{e})" if e else ""
    ax.set_ylabel(_first_fitting([f"density within each class{unit}", f"density{unit}"], height_in,
                                 10, fig.dpi), fontsize=10)
    ax.tick_params(labelsize=8)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(_in_view(axis.get_major_locator()))
        axis.set_major_formatter(_tick_formatter())
    titles = (["margin: distance to the boundary", "margin"] if binary is not None
              else [f"classes along {label}", label.split(":")[0]])
    ax.set_title(_first_fitting(titles, width_in, 11, fig.dpi), fontsize=11, y=1.0)  # see _draw_panel
    return lines


def _density_key(fig, rect, vmax, cell):
    """A horizontal key from 1 row per cell to ``vmax`` (log), in the shading's grey ramp."""
    from matplotlib.colors import to_rgb

    kax = fig.add_axes(rect)
    top = max(vmax, 2.0)
    counts = np.geomspace(1, top, 256)
    grey = np.array(to_rgb("#333333"))
    grid = counts[None, :, None] * np.ones((1, 1, 1))  # one class, 256 x 1
    rgba = shade(grid, grey[None, :], vmax=top)
    kax.imshow(rgba, origin="lower", extent=(0, 1, 0, 1), aspect="auto", interpolation="nearest")
    ticks = [t for t in (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000) if t <= top]
    kax.set_xticks([math.log(t) / math.log(top) for t in ticks], [f"{t:,}" for t in ticks])
    kax.set_yticks([])
    kax.tick_params(labelsize=7.5, length=2)
    kax.set_title(f"rows per cell ({cell}); colour = classes mixed by count", fontsize=8, loc="left",
                  y=1.0)
    return kax


def draw(projection, *, title, subtitle, legend, colors, margin=None, pca=(), notes=(),
         stretch=False, size=None, dpi=100):
    """Lay out and draw the whole figure; returns a ``matplotlib.figure.Figure``.

    Parameters
    ----------
    projection : list of (row, col, Panel)
        The projection's panels on a grid (one panel: ``(0, 0)``). Panels with
        ``magnify`` set are magnified twins, drawn ``k`` times longer along
        their side; every panel of a grid column (row) draws the same span.
    legend : list of (label, color, kind), kind "patch", "line", "dashed", "dotted" or
        "text" (no swatch: give the colour "none")
    colors : ndarray (B, 3)
    margin : dict, optional
        Keyword arguments of the margin panel (see ``_margin_panel``).
    pca : sequence of Panel
        Comparison panels, drawn to the right.
    notes : sequence of str
        Lines under the figure.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    panels = [p for _, _, p in projection if p.magnify is None] + list(pca)
    vmax = max(max(float(p.grid.sum(axis=0).max()) for p in panels), 1.0)
    nrow = 1 + max(r for r, _, _ in projection)
    ncol = 1 + max(c for _, c, _ in projection)
    # equal aspect: the grid's columns and rows are as wide and tall as their data spans
    # (a twin's, magnified)
    col_span = [next(p.drawn_spans[0] for _, c, p in projection if c == j) for j in range(ncol)]
    row_span = [next(p.drawn_spans[1] for r, _, p in projection if r == i) for i in range(nrow)]
    if stretch:
        notes = [*notes, _stretch_panels(projection, pca, sum(row_span) / sum(col_span))]
    # one key for every panel: its cell is said there when all are alike, else each panel's
    # in the notes (the key gave the first panel's alone, under a pair grid of other sizes)
    sizes: dict[str, list[str]] = {}
    for p in panels:
        sizes.setdefault(_cell_size(p), []).append(_plane_name(p))
    if len(sizes) == 1:
        cell = f"cell {next(iter(sizes))}"
    else:
        cell = "each panel's cell in the notes"
        notes = [*notes, "cells of the density key: " + "; ".join(
            f"{', '.join(names)} {size}" for size, names in sizes.items())]
    margin_lines = margin.pop("lines", []) if margin is not None else []
    main_h = 4.0 if nrow == 1 else 4.8
    ratio = sum(col_span) / sum(row_span)
    proj_w = float(np.clip(ratio * main_h, 0.6, 7.0)) if not stretch else main_h * 1.1
    pca_w = [float(np.clip(p.spans[0] / p.spans[1] * main_h, 1.3, 5.0)) if not stretch
             else main_h * 1.1 for p in pca]
    margin_w = 3.2 if margin is not None else 0.0
    widths = [proj_w] + ([margin_w] if margin is not None else []) + pca_w
    noted = list(pca)  # the panels beside the projection that carry a note
    notes_given = [p.note for p in noted]

    def layout(dpi):
        """The figure's size and its text bands (inches) when drawn at ``dpi``."""
        fig_w = sum(widths) + 1.0 * len(widths) + 0.6 if size is None else size[0] / dpi
        # text is broken to the figure's width, and the bands above and below the panels
        # grow with its lines: nothing is clipped at the right edge of a narrow figure
        room = fig_w - 0.5 - 0.15
        title_lines = _wrap([title], room, 13, "bold", dpi)
        subtitle_lines = _wrap([subtitle], room, 9.5, dpi=dpi)
        text = _wrap(list(margin_lines) + list(notes), room, 8.5, dpi=dpi)
        legend_cols = _legend_columns(legend, room, dpi)
        legend_rows = math.ceil(len(legend) / legend_cols)
        sub_in = 0.17 * len(subtitle_lines)
        title_in = 0.22 * len(title_lines)
        top_in = 0.61 + title_in + sub_in + 0.24 * legend_rows
        # each panel's width in inches as the grid below will lay it out (an equal-aspect
        # panel shrinks to its data's shape): its notes are wrapped to it, and the band
        # under the panels is as tall as the longest
        wspace = 1.0 * len(widths) / sum(widths)
        avg = (fig_w - 0.95) / (len(widths) + (len(widths) - 1) * wspace)
        slots = [w / np.mean(widths) * avg for w in widths]
        slot_w = slots[len(widths) - len(pca):]

        def bottom_band(panel_h):
            for panel, note, w in zip(noted, notes_given, slot_w, strict=True):
                if note:
                    aspect = panel.spans[0] / panel.spans[1] * _stretch_of(panel)
                    shown_w = w if panel.magnify else min(w, panel_h * aspect)
                    panel.note = "\n".join(_wrap(note.splitlines(), max(shown_w, 1.0) + 0.3, 8.5,
                                                  dpi=dpi))
            note_lines = max((len(p.note.splitlines()) for p in panels if p.note), default=0)
            # notes, the density key, the panels' tick labels and axis label, their own notes
            return 0.15 + 0.16 * len(text) + 1.0 + (0.14 * note_lines + 0.2 if note_lines else 0.0)

        bottom_in = bottom_band(main_h)
        fig_h = main_h + top_in + bottom_in if size is None else size[1] / dpi
        if size is not None:  # the panels are as tall as the text leaves room for
            bottom_in = bottom_band(fig_h - top_in - bottom_in)
        if fig_h - top_in - bottom_in < 0.8 - 1e-9:  # too little height left for the panels
            need = math.ceil((top_in + bottom_in + 0.8) * dpi - 1e-6)
            msg = (f"a figure {size[0]}x{size[1]} is too small for its text ({len(legend)} legend "
                   f"entries, {len(text)} lines of notes): give --size {size[0]}x{need} or taller, "
                   "or fewer classes with --top")
            raise InputError(msg)
        return fig_w, fig_h, top_in, bottom_in, title_lines, title_in, subtitle_lines, text, \
            legend_cols, wspace

    # a small fixed size in pixels is drawn at a lower dpi (larger in inches): its text
    # then takes less of it, and the panels more (down to 72 % of the text's size)
    for scale in ((1.0,) if size is None else (1.0, 0.85, 0.72)):
        try:
            (fig_w, fig_h, top_in, bottom_in, title_lines, title_in, subtitle_lines, text,
             legend_cols, wspace) = layout(dpi * scale)
        except InputError:
            if scale == 0.72:
                raise
            continue
        if size is None or fig_h - top_in - bottom_in >= 0.45 * fig_h:  # the panels' share
            break
    dpi = dpi * scale
    fig = Figure(figsize=(fig_w, fig_h), dpi=dpi)
    FigureCanvasAgg(fig)  # a raster canvas of its own: no pyplot, no global state
    bottom = bottom_in / fig_h
    top = 1 - top_in / fig_h
    outer = fig.add_gridspec(1, len(widths), width_ratios=widths, left=0.7 / fig_w,
                             right=1 - 0.25 / fig_w, bottom=bottom, top=top,
                             wspace=wspace)
    small = nrow > 1 or proj_w < 2.0
    inner = outer[0].subgridspec(nrow, ncol, width_ratios=col_span, height_ratios=row_span,
                                 wspace=0.08, hspace=0.08)
    axes = {}
    later = []
    for r, c, panel in projection:
        ax = fig.add_subplot(inner[r, c])
        if panel.magnify is None:
            _draw_panel(ax, panel, colors, vmax, small=small)
        else:  # ``fine`` of its cells hold one true-shape cell's rows
            _draw_panel(ax, panel, colors, vmax / panel.fine, twin=True, small=small)
            later.append(ax)
        axes[(r, c)] = ax
        if len(projection) > 1:  # labels once per grid row and column
            if r < nrow - 1:
                ax.set_xlabel("")
                ax.tick_params(labelbottom=False)
            if c > 0:
                ax.set_ylabel("")
                ax.tick_params(labelleft=False)
        if panel.note:
            _panel_note(ax, panel.note)
    if len(projection) > 1:  # share limits along the grid's rows and columns
        for (r, c), ax in axes.items():
            if (r, 0) in axes and c > 0:
                ax.sharey(axes[(r, 0)])
            if (nrow - 1, c) in axes and r < nrow - 1:
                ax.sharex(axes[(nrow - 1, c)])
    main_axes = [ax for ax in axes.values() if ax not in later]
    slot = 1
    if margin is not None:
        _margin_panel(fig.add_subplot(outer[slot]), **margin)
        slot += 1
    for panel in pca:
        ax = fig.add_subplot(outer[slot])
        _draw_panel(ax, panel, colors, vmax)
        if panel.note:
            _panel_note(ax, panel.note)
        main_axes.append(ax)
        slot += 1
    fig.suptitle("\n".join(title_lines), x=0.5 / fig_w, ha="left", y=1 - 0.12 / fig_h, va="top", fontsize=13,
                 fontweight="bold")
    fig.text(0.5 / fig_w, 1 - (0.2 + title_in) / fig_h, "\n".join(subtitle_lines), ha="left", va="top",
             fontsize=9.5, color="#333333", linespacing=1.2)
    handles = [Patch(color=c, label=label) if kind in ("patch", "text")
               else Line2D([], [], color=c, lw=3.0 if kind == "dotted" else 1.8, label=label,
                         ls={"dashed": (0, (4, 2)), "dotted": ":"}.get(kind, "-"))
               for label, c, kind in legend]
    fig.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.5 / fig_w, top + 0.42 / fig_h),
               ncol=legend_cols, frameon=False, fontsize=9, handlelength=1.4,
               columnspacing=1.3, borderaxespad=0)
    notes_h = 0.1 + 0.16 * len(text)
    _density_key(fig, [0.7 / fig_w, (notes_h + 0.22) / fig_h, min(3.0, fig_w - 1.0) / fig_w,
                       0.13 / fig_h], vmax, cell)
    fig.text(0.5 / fig_w, 0.1 / fig_h, "\n".join(text), ha="left", va="bottom", fontsize=8.5,
             color="#222222", linespacing=1.35)
    # every text here is plain: class names, file and axis names are the user's, and a pair of
    # "$" in one was mathtext (a label "$10-$20" drawn in italics, "$\x$" failed the plot)
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        t.set_parse_math(False)
    fig.streamproj_axes = main_axes  # type: ignore[attr-defined]  # for tests and callers: the data axes, in drawing order
    fig.streamproj_magnified = later  # type: ignore[attr-defined]  # and the magnified twins, if any
    return fig


def _stretch_panels(projection, pca, factor):
    """Set each panel's stretch and return the note that states it.

    A stretch fills a square: the projection's panels (a pair grid as one
    block: one scale for every panel) by ``factor``, each PCA panel by its own.
    Set on the axes' aspect, so that the magnification stated is the one drawn
    whatever room the layout leaves (the ratio of the spans was stated while
    the panel filled its slot: 13.7x drawn where 11.5x was said, 2.1x in a grid).
    """
    for _, _, panel in projection:
        panel.stretch = factor
    for panel in pca:
        panel.stretch = panel.spans[1] / panel.spans[0]
    own = "; in the PCA panel" + ("s " if len(pca) > 1 else " ") + ", ".join(
        f"{p.stretch:.3g}x" for p in pca) if pca else ""
    return (f"STRETCHED: the axes share units but are drawn at different scales (x is magnified "
            f"{factor:.3g}x against y{own}); drop --stretch for equal aspect")


def _stretch_of(panel):
    """How much longer ``panel`` draws x than y against equal aspect (its magnification)."""
    if panel.magnify is None:
        return float(panel.stretch or 1.0)
    side, k = panel.magnify
    return float(k) if side == 0 else 1.0 / k


def _text_width(text, fontsize, weight="normal", dpi=100):
    """Width in inches of one line of ``text`` as matplotlib draws it at ``fontsize`` and ``dpi``.

    The sum of each character's hinted advance at that dpi (measured once per
    character, as ten in a row, the way the Agg renderer lays text out) and
    4 % for kerning: a figure's wrapping measures a few hundred trial lines,
    and laying out each one in FreeType cost 0.6 ms.
    """
    return 1.04 * sum(_char_width(c, fontsize, weight, dpi) for c in text)


@functools.lru_cache(maxsize=8192)
def _char_width(char, fontsize, weight, dpi):
    from matplotlib.backends.backend_agg import get_hinting_flag
    from matplotlib.font_manager import FontProperties, findfont, get_font

    font = get_font(findfont(FontProperties(weight=weight)))
    font.set_size(fontsize, dpi)
    with warnings.catch_warnings():  # a glyph the font lacks: said once, as the figure is saved
        warnings.simplefilter("ignore")
        font.set_text(char * 10, 0.0, flags=get_hinting_flag())
    return font.get_width_height()[0] / 64 / 10 / dpi  # 26.6 fixed point pixels -> inches


def _wrap(lines, width_in, fontsize, weight="normal", dpi=100):
    """Lines broken at spaces so that each fits ``width_in`` inches (measured, not guessed).

    A word longer than the line (a long file name) is cut where it must be.
    """
    out = []
    for line in lines:
        words, current = line.split(" "), ""
        for word in words:
            trial = f"{current} {word}" if current else word
            if current and _text_width(trial, fontsize, weight, dpi) > width_in:
                out.append(current)
                current = "  " + word  # a continued line is indented
            else:
                current = trial
            while _text_width(current, fontsize, weight, dpi) > width_in and len(current) > 8:
                cut = len(current) - 1
                while cut > 4 and _text_width(current[:cut], fontsize, weight, dpi) > width_in:
                    cut = max(4, int(cut * 0.9))
                out.append(current[:cut])
                current = "  " + current[cut:]
        out.append(current)
    return out


def _first_fitting(texts, width_in, fontsize, dpi):
    """The first of ``texts`` (longest first) that fits ``width_in`` inches, else the last."""
    return next((t for t in texts if _text_width(t, fontsize, dpi=dpi) <= width_in), texts[-1])


def _panel_note(ax, note, fontsize=8.5):
    """``note`` under the panel, below its tick labels and axis label (wrapped by :func:`draw`)."""
    ax.annotate(note, (0.5, 0.0), xycoords="axes fraction", xytext=(0, -36),
                textcoords="offset points", ha="center", va="top", fontsize=fontsize,
                color="#444444")


def _legend_columns(legend, width_in, dpi, fontsize=9):
    """Columns of the legend row that fit ``width_in`` (handle, gap and label measured)."""
    per = max(_text_width(label, fontsize, dpi=dpi) for label, _, _ in legend) + 0.55
    return int(max(1, min(len(legend), 6, width_in // per)))


def _cell_size(panel):
    (x0, x1), (y0, y1) = panel.limits
    _, bx, by = panel.grid.shape
    return f"{(x1 - x0) / bx:.3g} x {(y1 - y0) / by:.3g}"


def _plane_name(panel):
    """``z[0] x z[1]``: a panel's axes without their descriptions."""
    return f"{panel.xlabel.split(':')[0]} x {panel.ylabel.split(':')[0]}"
