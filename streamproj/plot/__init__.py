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

import contextlib

import numpy as np
import zarr

from .. import store
from ..errors import InputError, StreamprojError
from .figure import PALETTE
from .reading import coordinates

__all__ = [
    "PALETTE",
    "check_figure",
    "check_plot_options",
    "coordinates",
    "draw_output",
    "is_view",
    "plot_output",
    "plot_projection",
    "plot_stored",
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
        Draw each panel square (a pair grid as one block) instead of at equal
        aspect; the figure states how much x is magnified against y.
    top : int
        Classes drawn in their own colour (the largest, 199 at most as in the
        HTML view); the rest are "other".
    compare_pca : None, "raw", "standardized" or "both"
        Add ordinary PCA of the input rows, on the features as given and/or
        standardised.
    qda : bool
        Also draw where the QDA boundary crosses each plane.
    input_url : str, optional
        Input rows for the PCA panel (default: the source recorded in ``out``).
    size : (width, height) in pixels, optional
    """
    from .picture import draw_source, output_source

    source = output_source(out)
    if model is not None:
        recorded, given = source.model_id, getattr(model, "model_id_", None)
        if recorded and given and recorded != given:
            # An update gives a model a new id while an appended output keeps the frame
            # it was written in: "did not write" was false for the model's own directory.
            attrs = (out if isinstance(out, zarr.Group) else store.open_output(out)).attrs.get(
                "streamproj")
            meta = attrs if isinstance(attrs, dict) else {}
            then = " ".join(str(meta[k]) for k in ("model_path", "model_version") if meta.get(k))
            now = getattr(model, "meta_", {}).get("version")
            msg = (f"{out} is in the frame of model id {recorded}" + (f" ({then})" if then else "")
                   + f", not of the model given (id {given}" + (f", version {now}" if now else "")
                   + "): an update since moved that model (an append keeps OUT's frame), or it "
                   "is another model; rewrite OUT in this model's frame first (streamproj project "
                   "MODEL INPUT... --output OUT --overwrite), or draw it without --model")
            raise InputError(msg)
    X = None
    if compare_pca and model is not None:  # (without a model draw_source says what is missing)
        url = input_url or source.input_url
        if not url:
            msg = f"{out} does not record its input; pass --input INPUT for the PCA panel"
            raise InputError(msg)
        X = _projected_input(out, source, url, model)
    return draw_source(source, model=model, axes=axes, stretch=stretch, top=top,
                       compare_pca=compare_pca, qda=qda, X=X, size=size, dpi=dpi)


def _projected_input(out, source, url, model):
    """The rows of the input OUT was projected from (lazy), for the PCA panel.

    The PCA panel colours the input's rows with OUT's labels, row by row, so
    they must be the very rows projected: the same count, and, where OUT
    records its input, the same fingerprint (first and last rows).
    """
    from .. import sources

    recorded = source.recorded_sources or []
    if len(recorded) > 1:
        msg = (f"{out} holds the rows of {len(recorded)} inputs; the PCA panel reads one input "
               "row by row: project that input to an output of its own to compare")
        raise InputError(msg)
    entry = recorded[0] if recorded else {}
    # (plot has no --features: the model's columns, or the recorded ones, are read)
    hint = "pass the input that was projected (--input)"
    if entry:
        src = sources.open_source(url, **sources.recorded_options(entry, url), require_y=False,
                                  hint=hint)
    else:  # no record (written from memory, or by 0.1): the model's columns where it has names
        names = getattr(model, "feature_names_in_", None)
        src = sources.open_source(url, features=None if names is None else list(names),
                                  require_y=False, hint=hint)
    if src.n_features != model.n_features_in_:
        msg = (f"{url} has {src.n_features} features but the model was fitted on "
               f"{model.n_features_in_}; {hint}")
        raise InputError(msg)
    if src.n_rows != source.blocks.n:
        msg = f"{url} has {src.n_rows} rows but {out} has {source.blocks.n}; {hint}"
        raise InputError(msg)
    if entry.get("fingerprint") and src.fingerprint(src.n_rows) != entry["fingerprint"]:
        msg = (f"{url} is not the input {out} was projected from: its first and last rows "
               f"differ from those of {entry.get('url')} when it was projected; pass that input "
               "(--input), or project this one")
        raise InputError(msg)
    return src.X


def plot_output(out, figure, model=None, **options):
    """Draw a projection to ``figure``: a PNG, or the interactive view if it ends in ``.html``.

    Keyword options are those of :func:`draw_output` (PNG) or
    :func:`view_output` (HTML). Returns the figure's path.
    """
    from .. import store

    if str(figure).lower().endswith((".html", ".htm")):
        view = view_output(out, **{k: v for k, v in options.items() if k in ("axes", "top")})
        with store.storage_errors(f"figure {figure}"):
            view.save(figure)
        return figure
    fig = draw_output(out, model, **options)
    save_figure(fig, figure)
    return figure


def save_figure(fig, figure):
    """Write a matplotlib figure to ``figure`` marked as streamproj's, all or nothing.

    The bytes are made in memory and renamed over the file (a full disk or a
    kill leaves the old figure whole); the mark (:data:`FIGURE_MARK`, in the
    format's own metadata) is what lets a later plot replace it.
    """
    import io
    import os

    import matplotlib as mpl

    from .. import store

    if not isinstance(figure, str | os.PathLike):  # a file object of the caller's: as matplotlib
        fig.savefig(figure, dpi=fig.dpi)
        return figure
    name = os.fspath(figure)
    suffix = name.lower().rsplit(".", 1)[-1] if "." in os.path.basename(name) else ""
    suffix = suffix if suffix in fig.canvas.get_supported_filetypes() else mpl.rcParams[
        "savefig.format"]
    options = _mark_options(suffix)
    if suffix == "png":
        # zlib level 3, not Pillow's 6: half the encoding time (17 against 35 ms for the
        # demo's figure) and a file as small (flat colour fields compress either way)
        options["pil_kwargs"] = {"compress_level": 3}
    buf = io.BytesIO()
    with _opaque(fig) if suffix in ("eps", "ps") else contextlib.nullcontext(), \
            _glyphs_said_once(name):
        fig.savefig(buf, format=suffix, dpi=fig.dpi, **options)
    store.write_bytes(figure, buf.getbuffer())  # a full disk or no permission: one line, named
    return figure


@contextlib.contextmanager
def _glyphs_said_once(name):
    """The "Glyph N missing from font(s) F." warnings of a save as one, naming the characters.

    A class name with a character the font lacks (an emoji) warned in matplotlib's words,
    once for each place that drew it, and named neither the character nor what became of
    it. Other warnings are passed on as they were.
    """
    import re
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    missing: dict[str, str] = {}  # character: the fonts that lack it
    for w in caught:
        glyph = re.fullmatch(r"Glyph (\d+) \(.*\) missing from font\(s\) (.+)\.", str(w.message))
        if glyph and issubclass(w.category, UserWarning):
            missing.setdefault(chr(int(glyph.group(1))), glyph.group(2))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        from ..errors import StreamprojWarning

        chars = ", ".join(f"{c} (U+{ord(c):04X})" for c in missing)
        fonts = ", ".join(dict.fromkeys(missing.values()))
        msg = (f"{name}: the figure's font ({fonts}) has no glyph for {chars}, drawn as an "
               "empty box; the HTML view (--output VIEW.html) draws it in the browser's fonts")
        warnings.warn(msg, StreamprojWarning, stacklevel=4)


@contextlib.contextmanager
def _opaque(fig):
    """``fig`` with every partly transparent image and patch blended onto what lies behind it.

    PostScript has no transparency, and the density is drawn as opacity: an
    EPS drew every filled cell at full strength, the empty cells black and the
    density key black (matplotlib said only "rendered opaque"). Images are
    blended onto their axes' colour (the figure's where the axes are clear,
    else white), patches onto white; all are put back as they were on leaving.
    """
    from matplotlib.colors import to_rgba
    from matplotlib.image import AxesImage
    from matplotlib.patches import Patch

    def back(image):
        for color in (image.axes.get_facecolor(), fig.get_facecolor()):
            rgba = to_rgba(color)
            if rgba[3] > 0:  # (blended onto white where it is partly clear)
                return np.array([c * rgba[3] + (1 - rgba[3]) for c in rgba[:3]])
        return np.ones(3)

    images, patches = [], []  # what was there, put back on leaving
    try:
        for image in fig.findobj(AxesImage):
            data = image.get_array()
            rgba = np.asarray(data)
            if rgba.ndim == 3 and rgba.shape[2] == 4:
                images.append((image, data))
                alpha = np.clip(np.nan_to_num(rgba[..., 3:]), 0, 1)
                image.set_data(np.nan_to_num(rgba[..., :3]) * alpha + back(image) * (1 - alpha))
        for patch in fig.findobj(Patch):
            face = to_rgba(patch.get_facecolor())
            edge = to_rgba(patch.get_edgecolor())
            if face[3] < 1 or edge[3] < 1:
                patches.append((patch, patch.get_alpha(), face, edge))
                patch.set_alpha(None)
                for color, setter in ((face, patch.set_facecolor), (edge, patch.set_edgecolor)):
                    if color[3] > 0:  # (a colour of no opacity stays none: nothing is drawn)
                        setter([c * color[3] + (1 - color[3]) for c in color[:3]])
        yield fig
    finally:
        for image, data in images:
            image.set_data(data)
        for patch, alpha, face, edge in patches:
            patch.set_alpha(alpha)
            patch.set_facecolor(face)
            patch.set_edgecolor(edge)


def _mark_options(suffix):
    """The ``savefig`` keywords that put :data:`FIGURE_MARK` in a file of this type."""
    mark = FIGURE_MARK.decode()
    if suffix == "png":
        return {"metadata": {"Software": mark}}
    if suffix in ("pdf", "svg", "eps", "ps"):
        return {"metadata": {"Creator": mark}}
    # The colours are counts mixed by class: WebP is written lossless, and JPEG (lossy by
    # design) at quality 95 with full colour resolution (Pillow's 75 and halved chroma blurred
    # the mixed colours of neighbouring cells into each other).
    if suffix in ("jpg", "jpeg"):
        return {"pil_kwargs": {"comment": mark, "quality": 95, "subsampling": 0}}
    if suffix in ("tif", "tiff"):
        return {"pil_kwargs": {"description": mark}}
    if suffix == "webp":
        return {"pil_kwargs": {"xmp": FIGURE_MARK, "lossless": True}}
    return {}


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


def plot_stored(out, figure, model_path=None, **options):
    """:func:`plot_output` with the model read from its directory (when one is given).

    The HTML view takes only ``axes`` and ``top`` and no model. Returns the figure's path.
    """
    if str(figure).lower().endswith((".html", ".htm")):
        return plot_output(out, figure, axes=options.get("axes"), top=options.get("top", 8))
    from ..estimator import load

    model = load(model_path) if model_path else None
    return plot_output(out, figure, model, **options)


# Figures plot writes carry this in their format's metadata (PNG Software, PDF/SVG/PS
# Creator, JPEG comment, TIFF description, WebP XMP); plot replaces no other file.
FIGURE_MARK = b"made by streamproj plot"
_MARK_SPAN = 65536  # the mark is within this many bytes of a figure's start or end
# The HTML view names its maker near its top (view/template.html); other HTML is the user's.
VIEW_MARKER = b'<meta name="generator" content="streamproj view">'
# Views written before the marker (2026-11-24) are known by their title.
_OLD_VIEW_TITLE = b"<title>Boundary-preserving projection of "
# The file types plot writes, by the name's ending (matplotlib's, and the HTML view).
FIGURE_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".eps",
                   ".ps", ".html", ".htm")
# --size: below this the title, legend and notes do not fit; above it a PNG is gigabytes.
SIZE_RANGE = ((640, 480), (8000, 8000))


def is_ours(path):
    """True for a file plot may replace: a figure or a view streamproj wrote."""
    with open(path, "rb") as f:
        head = f.read(_MARK_SPAN)
        size = f.seek(0, 2)
        f.seek(max(len(head), size - _MARK_SPAN))
        tail = f.read()
    return FIGURE_MARK in head or FIGURE_MARK in tail or is_view(head[:1024])


def is_view(head):
    """True for the first kilobyte of an HTML view streamproj wrote (of any version)."""
    return VIEW_MARKER in head or _OLD_VIEW_TITLE in head


def check_plot_options(figure, size=None, **static_only):
    """Refuse a figure name plot cannot write, a --size out of range, or options HTML ignores.

    ``static_only``: option name -> value given, for the options only static figures take.
    """
    name = str(figure).lower()
    if not name.endswith(FIGURE_SUFFIXES):
        msg = (f"plot --output {figure}: the name must end in one of "
               f"{', '.join(FIGURE_SUFFIXES)} (it chooses the file type)")
        raise InputError(msg)
    if name.endswith((".html", ".htm")):
        given = [k for k, v in {**static_only, "size": size}.items() if v not in (None, False)]
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in given)
            verb = "apply" if len(given) > 1 else "applies"
            msg = (f"plot --output {figure}: {flags} {verb} to static figures only; the HTML "
                   "view takes --axes and --top")
            raise InputError(msg)
    if size is not None:
        (lo_w, lo_h), (hi_w, hi_h) = SIZE_RANGE
        if not (lo_w <= size[0] <= hi_w and lo_h <= size[1] <= hi_h):
            msg = (f"--size must be between {lo_w}x{lo_h} and {hi_w}x{hi_h} pixels; "
                   f"got {size[0]}x{size[1]}")
            raise InputError(msg)


def check_figure(figure, out, model_path=None):
    """Refuse a figure path that is not local, overlaps OUT or the model, or is not an image.

    Its folder is made (as fit makes its model's folder); nothing else is touched.
    """
    from pathlib import Path

    from .. import store
    from ..errors import OutputExistsError

    if not store.is_local(figure):
        msg = (f"plot --output {figure}: figures are written to local files only; write it "
               "locally and upload it (streamproj.store.write_bytes does it in Python)")
        raise InputError(msg)
    recorded = []  # the model and inputs OUT was made from: a figure must not land in them
    with contextlib.suppress(StreamprojError, OSError):  # the reader says what is wrong later
        meta = store.open_output(out).attrs.get("streamproj", {})
        recorded = [("model that wrote it", meta.get("model_path"))] + [
            ("input", s.get("url")) for s in meta.get("sources") or [] if isinstance(s, dict)]
    store.check_disjoint(("figure", figure), ("projection", out), ("model", model_path),
                         held=False)
    for role, url in recorded:  # the figure against each (they may be the --model itself)
        store.check_disjoint(("figure", figure), (role, url), held=False)
    store.check_not_held(figure, "figure")  # (last: the overlaps above name both places)
    path = Path(store.expand_user(figure))
    if path.is_dir():
        msg = f"plot --output {figure} is a folder; give a file name such as {path / 'plot.png'}"
        raise OutputExistsError(msg)
    if path.exists():
        import stat

        # a device or FIFO (behind a link, /dev/null itself) would be replaced by a file, and
        # an empty file behind a link is someone's (a lock, a marker), not a figure
        if not stat.S_ISREG(path.stat().st_mode) or (path.is_symlink() and not path.stat().st_size):
            what = "a link to an empty file" if stat.S_ISREG(path.stat().st_mode) else \
                "not a regular file (a device, FIFO or socket)"
            msg = (f"plot --output {figure} is {what}; it was left untouched: choose another "
                   "file name")
            raise OutputExistsError(msg)
        if path.stat().st_size and not is_ours(path):
            msg = (f"plot --output {figure} exists and is not a figure streamproj wrote (figures "
                   "it wrote before 2026-11-25 carry no mark: remove those once); it was left "
                   "untouched: choose another file name")
            raise OutputExistsError(msg)
    with store.storage_errors(f"figure {figure}"):
        path.parent.mkdir(parents=True, exist_ok=True)
