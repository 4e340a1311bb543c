"""Pictures of a projection, drawn without loading all rows.

Up to ``point_limit`` rows the points themselves are drawn, one marker per
class. Above it, per-class 2-D histograms are accumulated chunk by chunk (one
Dask reduction; peak memory is one chunk plus the histograms) and rendered as
alpha-blended density images. The decision boundary is the line ``z[0] = 0``;
with more classes the LDA decision regions are outlined in the plane.
"""

import dask.array as da
import numpy as np

from . import solvers, store
from .errors import InputError
from .passes import as_dask_labels, as_dask_rows, compute
from .stats import ClassStats

__all__ = ["PALETTE", "add_plot_parser", "class_histograms", "plot_output", "projection_scores"]

# Okabe–Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
POINT_LIMIT = 20_000


def _block_histograms(coords, labels, classes, xedges, yedges):
    coords = np.asarray(coords)
    labels = np.asarray(labels).ravel()
    out = np.zeros((1, len(classes), len(xedges) - 1, len(yedges) - 1))
    for k, label in enumerate(classes):
        sel = labels == label
        out[0, k] = np.histogram2d(coords[sel, 0], coords[sel, 1], bins=(xedges, yedges))[0]
    return out


def class_histograms(coords, labels, classes, bins=160, limits=None):
    """Per-class 2-D histograms of the first two columns of ``coords``, chunk by chunk.

    Parameters
    ----------
    coords : array-like (n, ≥2), numpy, dask or chunked (Zarr)
    labels : array-like (n,)
    classes : ndarray (K,)
    bins : int
    limits : ((xmin, xmax), (ymin, ymax)), optional
        Default: the data range, padded by 2 % (one extra, cheap reduction).

    Returns
    -------
    hist : ndarray (K, bins, bins)
    xedges, yedges : ndarray (bins + 1,)
    """
    coords = as_dask_rows(coords, name="coords")[:, :2]
    labels = as_dask_labels(labels, coords.chunks[0], ("coords", "labels"))
    if limits is None:
        lo, hi = compute(coords.min(axis=0), coords.max(axis=0))
        pad = 0.02 * np.maximum(hi - lo, 1e-12)
        limits = ((lo[0] - pad[0], hi[0] + pad[0]), (lo[1] - pad[1], hi[1] + pad[1]))
    xedges = np.linspace(*limits[0], bins + 1)
    yedges = np.linspace(*limits[1], bins + 1)
    per_chunk = da.map_blocks(
        _block_histograms, coords, labels[:, None], classes, xedges, yedges,
        dtype=np.float64, chunks=((1,) * coords.numblocks[0], (len(classes),), (bins,), (bins,)),
        new_axis=[2, 3], meta=np.empty((0, 0, 0, 0)),
    )
    (hist,) = compute(per_chunk.sum(axis=0))
    return hist, xedges, yedges


def pca_axes(stats):
    """Ordinary PCA from the summaries: top-2 eigenvectors of the total scatter (2, p)."""
    _evals, evecs = np.linalg.eigh(stats.total)
    top = evecs[:, ::-1][:, :2]
    idx = np.argmax(np.abs(top), axis=0)
    return (top * np.sign(top[idx, np.arange(2)])).T


def _density_image(hist, colors):
    """Alpha-blend the classes' log densities into one RGBA image (y up)."""
    from matplotlib.colors import to_rgb

    image = np.ones((*hist.shape[1:], 3))
    for k in np.argsort(hist.sum(axis=(1, 2)))[::-1]:  # biggest class first, underneath
        h = np.log1p(hist[k])
        a = 0.85 * h / h.max() if h.max() > 0 else h
        image = image * (1 - a[..., None]) + np.array(to_rgb(colors[k])) * a[..., None]
    return np.transpose(image, (1, 0, 2))


def _draw_regions(ax, plane_to_scores, limits, color="#222222", label=None, style="-"):
    """Outline where the winning class changes, on a grid over the plane."""
    gx = np.linspace(*limits[0], 400)
    gy = np.linspace(*limits[1], 400)
    mx, my = np.meshgrid(gx, gy)
    scores = plane_to_scores(np.column_stack([mx.ravel(), my.ravel()]))
    winner = scores.argmax(axis=1).reshape(mx.shape) if scores.ndim == 2 else (scores > 0).reshape(mx.shape)
    levels = np.arange(winner.max()) + 0.5 if winner.max() > 0 else [0.5]
    cs = ax.contour(mx, my, winner.astype(float), levels=levels, colors=color, linewidths=1.6,
                    linestyles=style)
    if label:
        cs.set_label(label)


def _panel(ax, data, classes, colors, title, xlabel, ylabel, footer):
    kind, payload, limits = data
    if kind == "points":
        pts, labels = payload
        markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
        for k, label in enumerate(classes):
            sel = labels == label
            ax.scatter(pts[sel, 0], pts[sel, 1], s=6, alpha=0.55, color=colors[k % len(colors)],
                       marker=markers[k % len(markers)], linewidths=0, label=str(label))
    else:
        hist, xedges, yedges = payload
        ax.imshow(_density_image(hist, colors), origin="lower", aspect="auto",
                  extent=(xedges[0], xedges[-1], yedges[0], yedges[-1]), interpolation="nearest")
        for k, label in enumerate(classes):  # legend entries for the density colours
            ax.scatter([], [], s=30, marker="s", color=colors[k % len(colors)], label=str(label))
    ax.set_xlim(*limits[0])
    ax.set_ylim(*limits[1])
    ax.set_title(title, fontsize=13, pad=26)
    ax.set_xlabel(xlabel, fontsize=11)
    ax.set_ylabel(ylabel, fontsize=11)
    ax.text(0.5, -0.16, footer, transform=ax.transAxes, ha="center", va="top", fontsize=10.5)


def _legend(ax):
    """One row of legend entries between the title and the axes, clear of the data."""
    entries = len(ax.get_legend_handles_labels()[0])
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=min(entries, 6), fontsize=9,
              frameon=False, markerscale=2.5, handlelength=1.6, columnspacing=1.2)


def _gather(coords, labels, classes, point_limit, bins):
    """Points (small data) or per-class histograms (large data) of the first two coordinates."""
    n = coords.shape[0]
    if n <= point_limit:
        pts = np.asarray(coords[:, :2], dtype=np.float64)
        lab = np.asarray(labels[:])
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        pad = 0.04 * np.maximum(hi - lo, 1e-12)
        limits = ((lo[0] - pad[0], hi[0] + pad[0]), (lo[1] - pad[1], hi[1] + pad[1]))
        return ("points", (pts, lab), limits)
    hist, xe, ye = class_histograms(coords, labels, classes, bins)
    return ("hist", (hist, xe, ye), ((xe[0], xe[-1]), (ye[0], ye[-1])))


def _plane_choice(z, comps, center, coef, intercept):
    """Index of the class the linear rule picks at the plane point ``center + z @ comps``."""
    scores = (center + np.asarray(z)[:, : comps.shape[0]] @ comps) @ coef.T + intercept
    return (scores[:, 0] > 0).astype(np.intp) if coef.shape[0] == 1 else scores.argmax(axis=1)


def projection_scores(group):
    """Accuracy of the classifier on a projection's rows, and how often its 2-D picture agrees.

    Agreement is measured on the two plotted coordinates alone: the class the
    decision rule gives the point of the plane where each row is drawn,
    against the class the classifier gives the row itself.

    Returns
    -------
    accuracy : float or None (None when the output holds no labels ``y``)
    agreement : float
    """
    meta = group.attrs["streamproj"]
    z = as_dask_rows(group["coords"], name="coords")
    rows = z.chunks[0]
    classes = np.asarray(meta["classes"])
    predicted = as_dask_labels(group["predicted"], rows)
    comps = np.asarray(meta["components"])[:2]
    center, coef = np.asarray(meta["center"]), np.asarray(meta["coef"])
    intercept = np.asarray(meta["intercept"])
    shown = z.map_blocks(_plane_choice, comps, center, coef, intercept, dtype=np.intp,
                         drop_axis=1, meta=np.empty(0, np.intp))
    shown = shown.map_blocks(classes.take, dtype=classes.dtype)
    parts = [(shown == predicted).mean()]
    if "y" in group:
        parts.append((as_dask_labels(group["y"], rows) == predicted).mean())
    results = compute(*parts)
    return (float(results[1]) if len(results) > 1 else None), float(results[0])


def _pca_coordinates(X, stats, model):
    """Lazy coordinates on the standard PCA plane, and its best 2-D LDA line's disagreement.

    Returns
    -------
    coords : dask array (n, 2)
    disagree : dask scalar, share of rows where the plane's best linear rule and the
        classifier pick different classes
    axes : (2, p)
    """
    axes = solvers.pca_axes(stats.total)
    mean = stats.mean
    rows = as_dask_rows(X, name="X")
    coords = rows.map_blocks(lambda b: np.subtract(b, mean, dtype=np.float64) @ axes.T,
                             dtype=np.float64, chunks=(rows.chunks[0], (2,)))
    # the best linear classifier in the PCA plane, solved from the summaries projected on it
    plane = ClassStats(stats.classes, stats.counts, (stats.means - mean) @ axes.T,
                       axes @ stats.within @ axes.T)
    lda2 = solvers.lda(plane)
    scores2 = coords @ lda2.coef.T + lda2.intercept
    choice2 = (scores2[:, 0] > 0).astype(int) if lda2.coef.shape[0] == 1 else scores2.argmax(axis=1)
    full = model.decision_function(rows)
    choice = (full > 0).astype(int) if full.ndim == 1 else full.argmax(axis=1)
    return coords, (choice2 != choice).mean(), axes


def plot_output(out, figure, model=None, compare_pca=False, qda=False, input_url=None,
                size=None, point_limit=POINT_LIMIT, bins=160, dpi=100):
    """Draw a projection written by ``streamproj project`` to a PNG file.

    Parameters
    ----------
    out : str or Path
        The projection's Zarr group.
    figure : str or Path
        PNG to write, ``size`` pixels (width, height); default 800x650, or
        1400x650 with the PCA panel.
    model : BoundaryProjector, optional
        Needed for ``compare_pca`` (its summaries give the PCA axes) and ``qda``.
    input_url : str, optional
        Input rows for the PCA panel (default: the source recorded in ``out``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    group = store.open_output(out)
    attrs = group.attrs.asdict()
    meta = attrs.get("streamproj", {})
    coords = group["coords"]
    if coords.shape[1] < 2:
        msg = f"{out}/coords has {coords.shape[1]} column; a picture needs n_components >= 2"
        raise InputError(msg)
    labels = group["y"] if "y" in group else group["predicted"]
    classes = np.asarray(meta["classes"])
    names = attrs.get("axis_names", ["axis 1", "axis 2"])
    colors = PALETTE if len(classes) <= len(PALETTE) else [plt.cm.tab20(i % 20) for i in range(len(classes))]
    if (compare_pca or qda) and model is None:
        msg = "--compare-pca and --qda need the model: pass --model MODEL"
        raise InputError(msg)

    panels = 2 if compare_pca else 1
    width, height = size or ((1400, 650) if panels == 2 else (800, 650))
    fig, axs = plt.subplots(1, panels, figsize=(width / dpi, height / dpi), dpi=dpi, squeeze=False)
    data = _gather(coords, labels, classes, point_limit, bins)
    coef = np.asarray(meta["coef"])
    accuracy, agreement = projection_scores(group)
    if coef.shape[0] == 1:
        footer = f"the picture agrees with the classifier on {agreement:.1%} of points (boundary: z[0] = 0)"
    else:
        footer = f"regions in this plane agree with the classifier on {agreement:.1%} of points"
    if accuracy is not None:
        footer = f"classifier accuracy {accuracy:.1%}\n" + footer
    _panel(axs[0, 0], data, classes, colors, "Boundary-preserving projection",
           names[0], names[1], footer)
    ax = axs[0, 0]
    if coef.shape[0] == 1:
        ax.axvline(0.0, color="#222222", lw=1.8, label="decision boundary")
    else:
        comps = np.asarray(meta["components"])[:2]
        center = np.asarray(meta["center"])
        intercept = np.asarray(meta["intercept"])
        _draw_regions(ax, lambda z: (center + z @ comps) @ coef.T + intercept, data[2])
        ax.plot([], [], color="#222222", lw=1.6, label="LDA boundaries (in this plane)")
    if qda:
        q = model.qda()
        comps = model.components_[:2]
        _draw_regions(ax, lambda z: solvers.qda_log_posterior(q, model.center_ + z @ comps),
                      data[2], color="#D55E00", style="--")
        ax.plot([], [], color="#D55E00", lw=1.6, ls="--", label="QDA boundary (in this plane)")
    _legend(ax)

    if compare_pca:
        source = input_url or meta.get("source")
        if not source:
            msg = f"{out} does not record its input; pass --input for the PCA panel"
            raise InputError(msg)
        X, _Y = store.open_input(source, require_y=False)
        if X.shape[0] != coords.shape[0]:
            msg = f"{source} has {X.shape[0]} rows but {out} has {coords.shape[0]}; pass the right --input"
            raise InputError(msg)
        pcs, disagree, _ = _pca_coordinates(X, model.stats_, model)
        pca_labels = labels
        (disagree,) = compute(disagree)
        pca_data = _gather(pcs, pca_labels, classes, point_limit, bins)
        foot = ("best line in this plane disagrees with the classifier\n"
                f"on {disagree:.1%} of points")
        _panel(axs[0, 1], pca_data, classes, colors, "Standard PCA", "PC 1", "PC 2", foot)
        _legend(axs[0, 1])
    fig.subplots_adjust(left=0.08, right=0.98, top=0.86, bottom=0.22, wspace=0.22)
    fig.savefig(figure, dpi=dpi)
    plt.close(fig)
    return figure


def add_plot_parser(sub, common):
    p = sub.add_parser("plot", help="draw a projection (OUT) to a PNG file")
    p.add_argument("out", metavar="OUT", help="Zarr group written by 'streamproj project'")
    p.add_argument("--output", required=True, metavar="FIG.png")
    p.add_argument("--model", metavar="MODEL", help="model directory (for --compare-pca and --qda)")
    p.add_argument("--compare-pca", action="store_true",
                   help="add a panel with ordinary PCA of the same data")
    p.add_argument("--qda", action="store_true", help="draw where the QDA boundary crosses the plane")
    p.add_argument("--input", metavar="INPUT", help="input rows for --compare-pca (default: OUT's source)")
    p.add_argument("--size", metavar="WxH",
                   help="figure size in pixels (default 800x650; 1400x650 with --compare-pca)")
    p.add_argument("--points", type=int, default=POINT_LIMIT, metavar="N",
                   help=f"draw points up to N rows, densities above (default {POINT_LIMIT:,})")
    common(p)
    p.set_defaults(func=_plot_command)


def _plot_command(args):
    from .estimator import load

    size = None
    if args.size:
        try:
            size = tuple(int(v) for v in args.size.lower().split("x"))
            if len(size) != 2 or min(size) < 100:
                raise ValueError
        except ValueError:
            msg = f"--size must be WIDTHxHEIGHT in pixels (each >= 100), e.g. 1400x650; got {args.size!r}"
            raise InputError(msg) from None
    model = load(args.model) if args.model else None
    plot_output(args.out, args.output, model, args.compare_pca, args.qda, args.input,
                size, args.points)
    print(f"wrote {args.output}")
