"""Drawing the static picture from accumulated summaries (matplotlib, no pyplot).

The rules: both axes of a projection are in the data's units, so panels
have equal aspect unless a stretch is asked for (and then the figure says
so); where classes overlap a pixel's colour is the classes' colours mixed by
their counts and its opacity grows with the log of the total count (the
density key reads it back); titles, legends, keys and notes sit outside the
data area.
"""

import math

import numpy as np

__all__ = ["OTHER_COLOR", "PALETTE", "Panel", "draw", "shade"]

# Okabe–Ito (black swapped for Tol's wine, which mixes better): distinguishable
# with the common colour-vision deficiencies. "other" is grey.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#882255"]
OTHER_COLOR = "#8C8C8C"
MIN_ALPHA = 0.25
BOUNDARY_COLOR = "#111111"


def bucket_colors(classmap):
    """RGB (n_buckets, 3) in [0, 1]: the palette for the shown classes, grey for "other"."""
    from matplotlib.colors import to_rgb

    shown = classmap.n_buckets - 1
    extra = []
    if shown > len(PALETTE):
        import matplotlib

        cmap = matplotlib.colormaps["tab20"]
        extra = [cmap(i % 20) for i in range(shown - len(PALETTE))]
    colors = [to_rgb(c) for c in (PALETTE + extra)[:shown]] + [to_rgb(OTHER_COLOR)]
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
    """

    def __init__(self, grid, limits, xlabel, ylabel, title=None, boundary=None, note=None):
        self.grid, self.limits = grid, limits
        self.xlabel, self.ylabel, self.title = xlabel, ylabel, title
        self.boundary, self.note = boundary, note

    @property
    def spans(self):
        """Width and height of the plotted limits."""
        (x0, x1), (y0, y1) = self.limits
        return x1 - x0, y1 - y0


def _draw_panel(ax, panel, colors, vmax, stretch, small=False):
    (x0, x1), (y0, y1) = panel.limits
    ax.imshow(shade(panel.grid, colors, vmax), origin="lower", extent=(x0, x1, y0, y1),
              interpolation="nearest", aspect="auto")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("auto" if stretch else "equal", adjustable="box")
    if panel.boundary is not None:
        panel.boundary(ax, panel.limits)
    fs = 8.5 if small else 10
    ax.set_xlabel(panel.xlabel, fontsize=fs)
    ax.set_ylabel(panel.ylabel, fontsize=fs)
    ax.tick_params(labelsize=8)
    narrow_box = ax.get_position().width * ax.figure.get_figwidth() < 1.6 and not stretch
    if narrow_box:  # a tall thin panel (equal aspect): the labels must fit its width
        ax.set_xlabel(panel.xlabel.split(":")[0], fontsize=fs)
    if panel.title and not narrow_box:
        ax.set_title(panel.title, fontsize=11)
    from matplotlib.ticker import MaxNLocator

    narrow = ax.get_position().width * ax.figure.get_figwidth() < 1.2
    ax.xaxis.set_major_locator(MaxNLocator(2 if narrow else 4 if small else 6))
    ax.yaxis.set_major_locator(MaxNLocator(6))


def _margin_panel(ax, margin, limits, colors, names, wrong, rows, binary, label):
    """Per-class densities of z[0] (each class integrates to 1), boundary at 0."""
    lo, hi = limits
    nbins = margin.shape[1]
    edges = np.linspace(lo, hi, nbins + 1)
    width = (hi - lo) / nbins
    from matplotlib.patches import StepPatch

    lines = []
    top = 0.0
    for k in range(margin.shape[0]):
        if rows[k] == 0:
            continue
        dens = margin[k] / (rows[k] * width)
        top = max(top, float(dens.max()))
        # as ax.stairs draws them, without its costly data-limit update (limits are set below)
        ax.add_artist(StepPatch(dens, edges, baseline=0, facecolor=colors[k], linewidth=0,
                                alpha=0.25, fill=True))
        ax.add_artist(StepPatch(dens, edges, baseline=0, edgecolor=colors[k], lw=1.4, fill=False))
        if binary is not None and k in binary:
            side = "> 0" if k == binary[0] else "≤ 0"
            lines.append(f"{names[k]}: {wrong[k] / rows[k]:.1%} of {rows[k]:,} on the wrong side "
                         f"(z[0] {side})")
    if binary is not None:
        ax.axvline(0.0, color=BOUNDARY_COLOR, lw=1.6)
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, top * (1 + ax.margins()[1]) if top > 0 else 1)
    ax.set_xlabel(label, fontsize=10)
    ax.set_ylabel("density within each class", fontsize=10)
    ax.tick_params(labelsize=8)
    title = "margin: distance to the boundary" if binary is not None else f"classes along {label}"
    ax.set_title(title, fontsize=11)
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
    kax.set_title(f"rows per cell ({cell}); colour = classes mixed by count", fontsize=8, loc="left")
    return kax


def draw(projection, *, title, subtitle, legend, colors, margin=None, pca=(), notes=(),
         stretch=False, size=None, dpi=100):
    """Lay out and draw the whole figure; returns a ``matplotlib.figure.Figure``.

    Parameters
    ----------
    projection : list of (row, col, Panel)
        The projection's panels on a lower-triangular grid (one panel: ``(0, 0)``).
    legend : list of (label, color, kind) with kind "patch" or "line"
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

    panels = [p for _, _, p in projection] + list(pca)
    vmax = max(max(float(p.grid.sum(axis=0).max()) for p in panels), 1.0)
    nrow = 1 + max(r for r, _, _ in projection)
    ncol = 1 + max(c for _, c, _ in projection)
    # equal aspect: the grid's columns and rows are as wide and tall as their data spans
    col_span = [next(p.spans[0] for _, c, p in projection if c == j) for j in range(ncol)]
    row_span = [next(p.spans[1] for r, _, p in projection if r == i) for i in range(nrow)]
    legend_rows = math.ceil(len(legend) / 6)
    margin_lines = margin.pop("lines", []) if margin is not None else []
    text = list(margin_lines) + list(notes)
    top_in = 1.0 + 0.24 * legend_rows
    bottom_in = 0.9 + 0.55 + 0.17 * len(text) + 0.15
    main_h = 4.0 if nrow == 1 else 4.8
    ratio = sum(col_span) / sum(row_span)
    proj_w = float(np.clip(ratio * main_h, 0.6, 7.0)) if not stretch else main_h * 1.1
    pca_w = [float(np.clip(p.spans[0] / p.spans[1] * main_h, 1.3, 5.0)) if not stretch
             else main_h * 1.1 for p in pca]
    margin_w = 3.2 if margin is not None else 0.0
    widths = [proj_w] + ([margin_w] if margin is not None else []) + pca_w
    if size is None:
        fig_w = sum(widths) + 1.0 * len(widths) + 0.6
        fig_h = main_h + top_in + bottom_in
    else:
        fig_w, fig_h = size[0] / dpi, size[1] / dpi
    fig = Figure(figsize=(fig_w, fig_h), dpi=dpi)
    FigureCanvasAgg(fig)  # a raster canvas of its own: no pyplot, no global state
    bottom = bottom_in / fig_h
    top = 1 - top_in / fig_h
    outer = fig.add_gridspec(1, len(widths), width_ratios=widths, left=0.7 / fig_w,
                             right=1 - 0.25 / fig_w, bottom=bottom, top=top,
                             wspace=1.0 * len(widths) / sum(widths))
    small = nrow > 1 or proj_w < 2.0
    inner = outer[0].subgridspec(nrow, ncol, width_ratios=col_span, height_ratios=row_span,
                                 wspace=0.08, hspace=0.08)
    axes = {}
    for r, c, panel in projection:
        ax = fig.add_subplot(inner[r, c])
        _draw_panel(ax, panel, colors, vmax, stretch, small)
        axes[(r, c)] = ax
        if nrow > 1:
            if r < nrow - 1:
                ax.set_xlabel("")
                ax.tick_params(labelbottom=False)
            if c > 0:
                ax.set_ylabel("")
                ax.tick_params(labelleft=False)
        if panel.note:
            ax.text(0.5, -0.22 if nrow == 1 else -0.35, panel.note, transform=ax.transAxes,
                    ha="center", va="top", fontsize=8.5, color="#444444")
    if nrow > 1:  # share limits along the grid's rows and columns
        for (r, c), ax in axes.items():
            if (r, 0) in axes and c > 0:
                ax.sharey(axes[(r, 0)])
            if (nrow - 1, c) in axes and r < nrow - 1:
                ax.sharex(axes[(nrow - 1, c)])
    main_axes = list(axes.values())
    slot = 1
    if margin is not None:
        _margin_panel(fig.add_subplot(outer[slot]), **margin)
        slot += 1
    for panel in pca:
        ax = fig.add_subplot(outer[slot])
        _draw_panel(ax, panel, colors, vmax, stretch)
        if panel.note:
            ax.text(0.5, -0.16, panel.note, transform=ax.transAxes, ha="center", va="top",
                    fontsize=8.5, color="#444444")
        main_axes.append(ax)
        slot += 1
    fig.suptitle(title, x=0.5 / fig_w, ha="left", y=1 - 0.12 / fig_h, va="top", fontsize=13,
                 fontweight="bold")
    fig.text(0.5 / fig_w, 1 - 0.42 / fig_h, subtitle, ha="left", va="top", fontsize=9.5,
             color="#333333")
    handles = [Patch(color=c, label=label) if kind == "patch"
               else Line2D([], [], color=c, lw=1.8, ls="--" if kind == "dashed" else "-", label=label)
               for label, c, kind in legend]
    fig.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.5 / fig_w, top + 0.42 / fig_h),
               ncol=min(len(handles), 6), frameon=False, fontsize=9, handlelength=1.4,
               columnspacing=1.3, borderaxespad=0)
    cell = _cell_text(projection[0][2])
    notes_h = 0.1 + 0.17 * len(text)
    _density_key(fig, [0.7 / fig_w, (notes_h + 0.22) / fig_h, min(3.0, fig_w - 1.0) / fig_w,
                       0.13 / fig_h], vmax, cell)
    fig.text(0.5 / fig_w, 0.1 / fig_h, "\n".join(text), ha="left", va="bottom", fontsize=8.5,
             color="#222222", linespacing=1.35)
    fig.streamproj_axes = main_axes  # type: ignore[attr-defined]  # for tests and callers: the data axes, in drawing order
    return fig


def _cell_text(panel):
    (x0, x1), (y0, y1) = panel.limits
    _, bx, by = panel.grid.shape
    return f"cell {(x1 - x0) / bx:.3g} x {(y1 - y0) / by:.3g}"
