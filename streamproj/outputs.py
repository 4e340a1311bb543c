"""Pass-2 outputs: the arrays a projection writes, its frame, and appending to it.

An output (OUT) holds, per row, ``projection`` (n×d), ``predicted``,
``decision`` (written when asked, or for K ≤ 16 classes) and ``y`` when the
input has labels; coordinate variables ``component`` (axis names) and
``class`` (labels) so ``xarray.open_zarr(OUT)`` gives a labelled dataset; and
in its attributes the *frame* it was written in (axes, centre, boundary,
classes, the model's id, version and path; the model itself in the ``frame``
subgroup) and, per source, the row ranges it holds. Appending projects new
rows in that frame, whatever the model has become since.
"""

import uuid

import dask.array as da
import numpy as np

from . import store
from .errors import InputError
from .passes import project_blocks, score_blocks, store_projection
from .solvers import scores_to_index
from .validation import (
    as_dask_labels,
    as_dask_rows,
    block_start,
    plain_labels,
    refuse_too_large,
    text_labels,
)

__all__ = [
    "DECISION_MAX_CLASSES",
    "axis_names",
    "frame_attrs",
    "projection_arrays",
    "write_arrays",
    "written_names",
]

#: ``decision`` is written by default up to this many classes (it is n×K float64).
DECISION_MAX_CLASSES = 16


def _uniform_rows(X):
    """Row chunks all of one size (but the last), as a Zarr chunk grid needs.

    The size is the largest input chunk's: the first one's (a first file of
    3 rows) chunked the whole output, and every append to it, 3 rows a file.
    """
    rows = max(X.chunks[0], default=0)
    if all(c == rows for c in X.chunks[0][:-1]) and X.chunks[0][-1] <= rows:
        return X
    return X.rechunk((rows, -1))


def projection_arrays(model, X, y=None, names=("X", "y")):
    """Lazy output arrays of pass 2: projection, decision, predicted (and y).

    Returns
    -------
    dict of name to (dask array, dimension names)
    """
    X = _uniform_rows(as_dask_rows(X, model.chunk_rows, names[0]))
    coords = project_blocks(X, model.center_, model.components_, names[0],
                            bfloat16=getattr(model, "bfloat16", False))
    coef = model.coef_
    if coef.shape[0] == 1:
        # coords[:, 0] is w·(x - c) with c on the boundary, so the decision value is ‖coef‖·z0.
        decision = coords[:, 0].map_blocks(_scaled_decision, float(np.linalg.norm(coef)),
                                           names[0], dtype=np.float64)
        index = scores_to_index(decision)
        decision_dims: tuple[str, ...] = ("row",)
    else:
        # Centred forms: X @ coef.T + intercept itself cancels digits far from the origin.
        # (Rows as they are: the caller matched the source's features to the model's.) The
        # decisions and the scores share their centre: one cast of each block (and bfloat16
        # decoded) for both.
        K = coef.shape[0]
        both = score_blocks(X, model._score_center_, np.vstack([coef, model._score_coef_]),
                            np.concatenate([model._decision_offset_, model._score_offset_]),
                            bfloat16=getattr(model, "bfloat16", False))
        decision = both[:, :K]
        index = scores_to_index(both[:, K:])
        decision_dims = ("row", "class")
    predicted = model._take_classes(index)
    arrays = {
        "projection": (coords, ("row", "component")),
        "decision": (decision, decision_dims),
        "predicted": (predicted, ("row",)),
    }
    if y is not None:
        labels = as_dask_labels(y, X.chunks[0], names)
        arrays["y"] = (_like_classes(labels, model.classes_, names[1]), ("row",))
    return arrays


def _scaled_decision(z0, scale, name, block_info=None):
    """``scale · z0``: a row whose decision value overflows is refused, named (not written as inf)."""
    with np.errstate(over="ignore"):
        out = z0 * scale
    refuse_too_large(np.isinf(out) & np.isfinite(z0), block_start(block_info), name,
                     "to project in float64 (its decision value overflows)")
    return out


def _label_kind(dtype):
    # booleans and numbers are one kind here: numpy compares True == 1, as predicted == y does
    return "text" if dtype.kind in "USOT" else "numbers"


def _like_classes(labels, classes, name):
    """``labels`` when they are of the classes' kind (text, or numbers and booleans); else refused.

    Integer labels 0/1 beside the text classes "0"/"1" would store a ``y`` that
    ``predicted`` never equals (0 % accuracy in every report). Labels typed per
    chunk (object: Parquet, CSV) are checked chunk by chunk.
    """
    classes = np.asarray(classes)
    want = (_label_kind(classes.dtype), ", ".join(map(repr, classes[:3].tolist()))
            + (", …" if classes.size > 3 else ""))
    if labels.dtype.kind == "O":
        return labels.map_blocks(_kind_block, want, name, dtype=object,
                                 meta=np.empty((0,), dtype=object))
    _check_kind(_label_kind(labels.dtype), want, name, str(labels.dtype))
    return labels


def _kind_block(block, want, name, block_info=None):
    block = np.asarray(block)
    if block.size:  # a chunk holds one type (mixed ones are refused where they are stored)
        first = block[0]
        kind = "text" if isinstance(first, str | bytes) else "numbers"
        start = block_start(block_info)
        if isinstance(name, RowsOf):  # rows of several inputs: the input and its own row
            name, start = name.locate(start)
        _check_kind(kind, want, name, f"{first!r} at row {start}")
    return block


def _check_kind(kind, want, name, what):
    if kind != want[0]:
        msg = (f"{name} holds {kind} ({what}) but the model's classes are {want[0]} ({want[1]}): "
               "y and predicted would never be equal; give labels of the model's type")
        raise InputError(msg)


def axis_names(model):
    """Names of the projection axes, for the ``component`` coordinate."""
    d = model.components_.shape[0]
    if model.coef_.shape[0] == 1:
        first = ["signed distance to boundary"]
    else:
        first = [f"Fisher direction {i + 1}" for i in range(min(d, len(model.classes_) - 1))]
    rest = [f"boundary-parallel PC {i + 1}" for i in range(d - len(first))]
    return first + rest


def wants_decision(model, decision):
    """Whether ``decision`` is written: when asked (True/False), else for K ≤ 16 classes."""
    if decision is not None:
        return bool(decision)
    return len(model.classes_) <= DECISION_MAX_CLASSES


def frame_attrs(model, meta=None, model_path=None, sources=None, n_rows=0, decision=True,
                action="written", model_id=None):
    """The attributes of an output written in ``model``'s frame.

    ``sources``: the per-source row ranges (None when the rows came from memory,
    which an append cannot extend). ``model_id``: ``model.model_id_`` where the
    caller has it already.
    """
    meta = meta or getattr(model, "meta_", None) or {}
    now = store.timestamp()
    return {
        "streamproj": {
            "format_version": 2,
            "write_id": uuid.uuid4().hex,
            "model_id": model_id or model.model_id_,
            "model_version": meta.get("version"),
            "model_path": None if model_path is None else store.normalise(model_path),
            "streamproj_version": meta.get("streamproj_version"),
            "components": model.components_.tolist(),
            "center": model.center_.tolist(),
            "coef": model.coef_.tolist(),
            "intercept": model.intercept_.tolist(),
            "classes": np.asarray(model.classes_).tolist(),
            "center_mode": model.center,
            "shrinkage": model.shrinkage,
            "decision": bool(decision),
            "source": None if not sources else sources[0]["url"],
            "sources": sources,
            "rows": int(n_rows),
            "written": now,
            "history": [{"time": now, "action": action, "rows": int(n_rows)}],
        },
        "axis_names": axis_names(model),
    }


def _aligned(n_old, m, rows):
    """Row chunks of ``m`` new rows so that each lands in whole chunks of a grid of ``rows`` after ``n_old``."""
    first = min(m, (rows - n_old % rows) % rows or rows)
    out = [first] if first else []
    left = m - first
    out += [rows] * (left // rows)
    if left % rows:
        out.append(left % rows)
    return tuple(out)


def written_names(arrays, decision):
    """The names :func:`write_arrays` stores: ``decision`` only where kept, ``y`` where given."""
    return [n for n in ("projection", "predicted", "decision", "y") if n in arrays
            and (n != "decision" or decision)]


def write_arrays(group, arrays, model, decision, progress=False, append_at=None, compute=True):
    """Store lazy ``arrays`` (from :func:`projection_arrays`) in an output group, in one compute.

    A fresh group (``append_at`` None) gets the arrays, the coordinate
    variables and is chunked like the first input rows; an append grows the
    group's own arrays from row ``append_at`` on, chunked on their grid.
    ``compute=False`` creates or grows the arrays and returns the lazy store
    (and its chunk count) for the caller to compute with other graphs.
    """
    names = written_names(arrays, decision)
    sources, targets = [], []
    if append_at is None:
        rows = arrays["projection"][0].chunks[0][0]
        for name in names:
            arr, dims = arrays[name]
            chunks = (rows, *tuple(arr.shape[1:]))
            dtype = arr.dtype
            if dtype.kind in "USOT":
                # text labels (y, predicted): Zarr's variable-length UTF-8 strings, which any
                # label fits (an appended one too) and which Zarr's v3 spec defines
                arr, dtype = _as_text(arr, name), str
            targets.append(store.create_output_array(group, name, arr.shape, chunks, dtype, dims))
            sources.append(arr.rechunk(chunks) if arr.chunks[0][0] != rows else arr)
        store.write_coordinate(group, "component", np.asarray(axis_names(model)))
        store.write_coordinate(group, "class", np.asarray(model.classes_))
    else:
        for name in names:
            arr, _dims = arrays[name]
            target = store.grow_output_array(group, name, append_at + arr.shape[0])
            rows = target.chunks[0]
            text = target.dtype.kind in "UST"
            # object labels are typed per chunk (Parquet, CSV): checked there
            if arr.dtype.kind not in "USTO" if text else arr.dtype.kind in "UST":
                msg = (f"OUT holds {target.dtype} labels in {name}, and these are {arr.dtype}; "
                       "labels must be of one type")
                raise InputError(msg)
            if text:
                arr = _as_text(arr, name, target.dtype)
            elif name in ("y", "predicted") and arr.dtype != target.dtype:
                # labels typed per chunk, or of another dtype than OUT's (0.5 onto int64
                # labels would be stored as 0): each chunk is checked to be stored exactly
                arr = arr.map_blocks(_numbers_block, name, target.dtype, dtype=target.dtype,
                                     meta=np.empty((0,), dtype=target.dtype))
            sources.append(arr.rechunk((_aligned(append_at, arr.shape[0], rows), *arr.shape[1:])))
            targets.append(target)
    total = len(sources[0].chunks[0]) if sources else 0
    stored = store_projection(sources, targets, progress=progress, total=total, compute=compute)
    return None if compute else (stored, total)


def _as_text(arr, name, target=None):
    """Lazy text labels for a Zarr string array (:func:`_text_block` on every chunk)."""
    return arr.map_blocks(_text_block, name, target, dtype=object,
                          meta=np.empty((0,), dtype=object))


# what an append an output cannot take exactly says to do
_REWRITE_ONCE = ('rewrite OUT once (streamproj project ... --overwrite, or one run with [output] '
                 'mode = "rewrite")')


def _numbers_block(block, name, target, block_info=None):
    """A chunk of labels for OUT's array of numeric labels (dtype ``target``), stored exactly.

    Text is refused, and so is a label ``target`` cannot hold (0.5 onto int64
    labels, 2**53 + 1 onto float64 ones), naming its row.
    """
    start = block_start(block_info)
    block = np.asarray(block)
    if block.dtype.kind == "O":  # typed per chunk (Parquet, CSV): missing or mixed ones named
        block = plain_labels(block, start, name)
    if block.dtype.kind in "US":
        msg = (f"{name} label {str(block[0])!r} at row {start} of the rows being written is text, "
               "and OUT holds numeric labels; labels must be of one type")
        raise InputError(msg)
    target = np.dtype(target)
    if block.dtype == target:
        return block
    with np.errstate(invalid="ignore", over="ignore"):
        stored = block.astype(target)
        lost = np.flatnonzero(stored.astype(block.dtype) != block)
    if lost.size:
        row = int(lost[0])
        msg = (f"OUT holds its {name} labels as {target}, which cannot hold the label "
               f"{block[row].item()!r} at row {start + row} of the rows being written (it would "
               f"be stored as {stored[row].item()!r}); {_REWRITE_ONCE}")
        raise InputError(msg)
    return stored


def _text_block(block, name, target=None, block_info=None):
    """A chunk of text labels as Zarr's string arrays take them; other labels are refused.

    ``target``: the dtype of the array they are appended to; fixed-width text
    (outputs written before variable-length strings) must hold every label
    whole, or a label would be cut short.
    """
    block = np.asarray(block)
    start = block_start(block_info)
    if block.dtype.kind == "O":  # labels typed per chunk (Parquet, CSV): missing or mixed ones named
        block = plain_labels(block, start, name)
    block = text_labels(block, start, name, " of the rows being written")
    if block.dtype.kind not in "UT":
        msg = (f"{name} has text labels in some rows but {block.dtype} labels in others (at row "
               f"{start} of the rows being written); class labels must be of one type")
        raise InputError(msg)
    target = None if target is None else np.dtype(target)
    if target is not None and target.kind == "U" and block.size:
        width = target.itemsize // 4
        long = np.strings.str_len(block) > width
        if long.any():
            row = int(np.flatnonzero(long)[0])
            msg = (f"OUT holds its {name} labels in {width} characters, and the label "
                   f"{str(block[row])!r} at row {start + row} of the rows being written is longer "
                   f"(it would be cut short); {_REWRITE_ONCE}, which stores labels of any length")
            raise InputError(msg)
    return block


def concat_rows(parts, classes=None):
    """One lazy array of the rows ``[start:]`` of each ``(Source, start)``; labels when all have them.

    ``classes``: the model's, when the labels are to be stored: each input's
    labels of one dtype are checked to be of their kind (text, or numbers and
    booleans) here, input by input, as one concatenation of text and numbers
    would be text (``0`` and ``1.0`` beside ``"0"`` as ``"0"`` and ``"1.0"``).

    Returns
    -------
    X, y : dask arrays (y None unless every source has labels)
    names : (str, str)
        What to call X and y in errors: the source's names, or for several
        :class:`RowsOf` that name the source and row a bad value is in.
    """
    X = da.concatenate([src.X[start:] for src, start in parts], axis=0)
    ys = [src.y[start:] for src, start in parts if src.y is not None]
    for src, _ in parts if classes is not None and len(ys) == len(parts) else ():
        if src.y.dtype.kind != "O":  # (labels typed per chunk are checked chunk by chunk)
            _like_classes(src.y, classes, src.names[1])
    y = None if len(ys) < len(parts) else da.concatenate(ys, axis=0)
    # (rows of one input from its row ``start`` on are named in its own numbering: a bad row
    # 150 of an input grown from 100 rows was "row 50" in an append, "row 150" in an update)
    names = tuple(parts[0][0].names[i] if len(parts) == 1 and not parts[0][1] else RowsOf(
        [(src.names[i], start, src.n_rows - start) for src, start in parts]) for i in (0, 1))
    return X, y, names


class RowsOf(str):
    """The name ("N inputs") of rows of several inputs, one after another; it says whose a row is.

    Of one input (its rows from some row on), its name.

    ``parts``: ``(name, first row taken, rows taken)`` per input, in order.
    """

    parts: list

    def __new__(cls, parts):
        named = super().__new__(cls, f"{len(parts)} inputs" if len(parts) > 1 else parts[0][0])
        named.parts = list(parts)
        return named

    def __getnewargs__(self):  # pickled (to dask workers) with its parts, not its text
        return (self.parts,)

    def locate(self, row):
        """``(input's name, its row)`` of row ``row`` of the concatenation."""
        for name, first, count in self.parts:
            if row < count:
                return name, first + row
            row -= count
        return str(self), row
