"""Pictures of a projection, drawn without loading all rows.

- :func:`plot_output` / :func:`draw_output`: the static picture of a
  projection written by ``streamproj project`` (PNG, or the interactive HTML
  view when the file name ends in ``.html``).
- :func:`plot_projection`: the same picture of a fitted model over in-memory
  or dask data (numpy, dask, pandas), returning a matplotlib Figure.
- :func:`view_output` / :func:`view_projection`: the interactive view
  (:class:`streamproj.view.View`, shown inline in Jupyter).

Modules: :mod:`.reading` (blocks, one streaming pass), :mod:`.summary` (sums
over rows), :mod:`.figure` (drawing), :mod:`.picture` (putting them together).
matplotlib is imported only when a picture is drawn.
"""

import numpy as np

from ..errors import InputError
from .figure import PALETTE
from .reading import coordinates

__all__ = [
    "PALETTE",
    "add_plot_parser",
    "coordinates",
    "draw_output",
    "plot_output",
    "plot_projection",
    "projection_scores",
    "view_output",
    "view_projection",
]


def draw_output(out, model=None, *, axes=None, stretch=False, top=8, compare_pca=None,
                qda=False, input_url=None, size=None, dpi=100):
    """The static picture of a projection, as a ``matplotlib.figure.Figure``.

    Parameters
    ----------
    out : str or Path
        A projection's Zarr group (``streamproj project``).
    model : BoundaryProjector, optional
        Needed for ``compare_pca`` and ``qda``.
    axes : (i, j), optional
        Draw this pair of axes; default ``(0, 1)``, or a pair grid of the first
        four axes when the projection has three or more.
    stretch : bool
        Fill each panel instead of equal aspect (the figure says so).
    top : int
        Classes drawn in their own colour (the largest); the rest are "other".
    compare_pca : None, "raw", "standardized" or "both"
        Add ordinary PCA of the input rows, on the features as given and/or
        standardised.
    qda : bool
        Also draw where the QDA boundary crosses each plane.
    input_url : str, optional
        Input rows for the PCA panel (default: the source recorded in ``out``).
    size : (width, height) in pixels, optional
    """
    from .. import store
    from .picture import draw_source, output_source

    source = output_source(out)
    X = None
    if compare_pca:
        url = input_url or source.input_url
        if not url:
            msg = f"{out} does not record its input; pass --input INPUT for the PCA panel"
            raise InputError(msg)
        X, _ = store.open_input(url, require_y=False)
        if X.shape[0] != source.blocks.n:
            msg = (f"{url} has {X.shape[0]} rows but {out} has {source.blocks.n}; "
                   "pass the input that was projected (--input)")
            raise InputError(msg)
    return draw_source(source, model=model, axes=axes, stretch=stretch, top=top,
                       compare_pca=compare_pca, qda=qda, X=X, size=size, dpi=dpi)


def plot_output(out, figure, model=None, **options):
    """Draw a projection to ``figure``: a PNG, or the interactive view if it ends in ``.html``.

    Keyword options are those of :func:`draw_output` (PNG) or
    :func:`view_output` (HTML). Returns the figure's path.
    """
    if str(figure).lower().endswith((".html", ".htm")):
        view_output(out, **{k: v for k, v in options.items() if k in ("axes", "top")}).save(figure)
        return figure
    fig = draw_output(out, model, **options)
    fig.savefig(figure, dpi=fig.dpi)
    return figure


def plot_projection(model, X, y=None, *, axes=None, stretch=False, top=8, compare_pca=None,
                    qda=False, data_name="data", size=None, dpi=100):
    """The picture of a fitted model over ``X`` (numpy, dask, pandas), as a Figure.

    Rows are projected and binned block by block (dask input stays lazy: one
    block in memory per thread). ``y`` colours the rows (default: the
    predicted class). Options as :func:`draw_output`.
    """
    from .picture import draw_source, model_source

    source = model_source(model, X, y, data_name)
    return draw_source(source, model=model, axes=axes, stretch=stretch, top=top,
                       compare_pca=compare_pca, qda=qda, X=X, size=size, dpi=dpi)


def projection_scores(group):
    """Accuracy of the classifier on a projection's rows, and how often its picture agrees.

    Agreement is measured on the plane of the first two axes: the class the
    decision rule gives the point where each row is drawn, against the class
    the classifier gives the row itself. One streaming pass.

    Returns
    -------
    accuracy : float or None (None when the output holds no labels ``y``)
    agreement : float
    """
    from .picture import _choice, output_source
    from .reading import ClassMap, stream
    from .summary import PictureSummary

    source = output_source(group)
    summary = PictureSummary(ClassMap(source.classes), np.array([[-1.0, 1.0]]), [], {},
                             margin_bins=1, choice=_choice(source))
    names = [n for n in ("z", "label", "y", "predicted") if n in source.blocks.arrays]
    stream(source.blocks, summary.add, names)
    accuracy = summary.correct / summary.labelled if summary.labelled else None
    return accuracy, summary.agree / max(summary.predicted, 1)


def view_output(out, *, axes=None, top=8, **options):
    """The interactive view of a projection (:class:`streamproj.view.View`)."""
    from ..view import build_view
    from .picture import output_source

    return build_view(output_source(out), axes=axes, top=top, **options)


def view_projection(model, X, y=None, *, axes=None, top=8, data_name="data", **options):
    """The interactive view of a fitted model over ``X`` (shown inline in Jupyter)."""
    from ..view import build_view
    from .picture import model_source

    return build_view(model_source(model, X, y, data_name), axes=axes, top=top, **options)


# ----------------------------------------------------------------- command line
def _parse_pair(text, flag):
    try:
        pair = tuple(int(v) for v in text.replace("x", ",").split(","))
        if len(pair) != 2:
            raise ValueError
    except ValueError:
        msg = f"{flag} must be two numbers, e.g. {'0,2' if flag == '--axes' else '1400x650'}; got {text!r}"
        raise InputError(msg) from None
    return pair


def add_plot_parser(sub, common):
    p = sub.add_parser("plot", help="draw a projection (OUT) to a PNG, or an interactive HTML view")
    p.add_argument("out", metavar="OUT", help="Zarr group written by 'streamproj project'")
    p.add_argument("--output", required=True, metavar="FIG.png|VIEW.html")
    p.add_argument("--model", metavar="MODEL", help="model directory (for --compare-pca and --qda)")
    p.add_argument("--compare-pca", nargs="?", const="raw", choices=["raw", "standardized", "both"],
                   help="add ordinary PCA of the input rows: features as given (raw, the default), "
                        "standardized, or both")
    p.add_argument("--qda", action="store_true", help="draw where the QDA boundary crosses the plane")
    p.add_argument("--input", metavar="INPUT", help="input rows for --compare-pca (default: OUT's source)")
    p.add_argument("--axes", metavar="I,J", help="draw axes I and J (default 0,1; a grid when d >= 3)")
    p.add_argument("--stretch", action="store_true",
                   help="fill the panels instead of equal aspect (the figure says so)")
    p.add_argument("--top", type=int, default=8, metavar="N",
                   help="colour the N largest classes, the rest grey as 'other' (default 8)")
    p.add_argument("--size", metavar="WxH", help="PNG size in pixels (default: fitted to the data)")
    common(p)
    p.set_defaults(func=_plot_command)


def _plot_command(args):
    from ..estimator import load

    size = _parse_pair(args.size, "--size") if args.size else None
    if size and min(size) < 100:
        msg = f"--size must be WIDTHxHEIGHT in pixels, each >= 100; got {args.size!r}"
        raise InputError(msg)
    axes = _parse_pair(args.axes, "--axes") if args.axes else None
    if args.top < 1:
        msg = f"--top must be at least 1; got {args.top}"
        raise InputError(msg)
    if str(args.output).lower().endswith((".html", ".htm")):
        plot_output(args.out, args.output, axes=axes, top=args.top)
    else:
        model = load(args.model) if args.model else None
        plot_output(args.out, args.output, model, axes=axes, stretch=args.stretch, top=args.top,
                    compare_pca=args.compare_pca, qda=args.qda, input_url=args.input, size=size)
    print(f"wrote {args.output}")
