"""Whole jobs on stored data: fit, update, forget, merge, relocate, project, run.

Each job glues the pure pieces together — :mod:`streamproj.sources` to open
inputs, :mod:`streamproj.ledger` to know which rows are new,
:mod:`streamproj.store` for files, :mod:`streamproj.passes` and
:mod:`streamproj.outputs` for the Dask passes, the estimator for the math — so
the command line stays a thin parser around these functions. Every job
returns a JSON-ready report (``--json`` prints it).

The model keeps one summary per source (a file each in its version's
``summaries/``, beside ``stats.npz``): O(sources × (p² + K·p)) floats on disk
with the default pooled scatter, O(sources × K·p²) with per-class scatter (at
p = 1,000, 8 MB a source). An update reads only the summaries of the sources
it grows, and links those it leaves as they were into the new version. That is
what makes ``forget`` and sliding windows exact: the remaining summaries are
merged again (never subtracted); those jobs read them all.
"""

import contextlib
import dataclasses
import fnmatch
import os
import re
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from scipy.linalg import subspace_angles

from . import gpu, ledger, outputs, sources, store
from ._version import __version__
from .cluster import dask_cluster, require_sbatch
from .errors import (
    BadValuesError,
    ClusterError,
    IncompatibleStatsError,
    InputError,
    InvalidParameterError,
    ModelError,
    OutputExistsError,
    SourceChangedError,
    StorageError,
    StreamprojError,
    StreamprojWarning,
)
from .estimator import BoundaryProjector, check_params, load
from .outputs import projection_arrays
from .passes import accumulate, default_kernel, finish_summary, first_bad_row, summary_graph
from .progress import compute_with_progress
from .record import ModelRecord
from .sources import Source, expand, open_source
from .stats import DETAILS, PASS1_KERNELS, ClassStats
from .validation import as_dask_rows, check_discrete_classes

__all__ = [
    "check_config",
    "dask_cluster",
    "fit_model",
    "forget_sources",
    "is_output",
    "merge_models",
    "model_info",
    "output_info",
    "project",
    "project_model",
    "projection_arrays",
    "relocate_sources",
    "run_job",
    "update_model",
]

#: ``[output] mode = "auto"`` rewrites past this drift (degrees) unless the config says otherwise.
DEFAULT_REPROJECT_DEGREES = 1.0


def _names(text, path):
    """Whether ``text`` names ``path`` as a whole word (a model "m" is not in "damaged")."""
    return re.search(rf"(?:^|[\s'(]){re.escape(str(path))}(?:$|[\s:')])", text) is not None


@contextlib.contextmanager
def _context(prefix, columns=None):
    """Prefix user errors with where they happened (the file and array).

    ``columns``: the source's feature names, to name a bad value's column
    (``(column 3)`` becomes ``(column emb_3)``).
    """
    try:
        yield
    except StreamprojError as exc:
        # Errors about the output, the disk or the cluster, and changed or copied sources,
        # already say where they happened.
        if isinstance(exc, StorageError | OutputExistsError | ClusterError | SourceChangedError):
            raise
        text = str(exc)
        if columns and isinstance(exc, BadValuesError):
            text = re.sub(r"\(column (\d+)\)",
                          lambda m: f"(column {columns[int(m.group(1))]})"
                          if int(m.group(1)) < len(columns) else m.group(0), text)
        # (a model's reader names the model's path itself: "m: no model at m" said it twice)
        if not text.startswith(prefix) and not (isinstance(exc, ModelError) and _names(text, prefix)):
            text = f"{prefix}: {text}"
        if text == str(exc):
            raise
        raise type(exc)(text) from None


class _Clock:
    """Wall-clock seconds of a job's steps, for the report."""

    def __init__(self):
        self.start = time.perf_counter()
        self.steps = {}

    @contextlib.contextmanager
    def __call__(self, name):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.steps[name] = round(self.steps.get(name, 0.0) + time.perf_counter() - t, 4)

    def report(self):
        return {**self.steps, "total": round(time.perf_counter() - self.start, 4)}


def _versions(model_version=None):
    out = {"streamproj": __version__}
    if model_version is not None:
        out["model"] = model_version
    return out


# ------------------------------------------------------------------ inputs
def _specs(inputs):
    if isinstance(inputs, str | os.PathLike):
        return [os.fspath(inputs)]
    return [os.fspath(i) for i in inputs]


def _looks_zarr(url):
    if str(url).rstrip("/").endswith(".zarr"):
        return True
    path = Path(str(url))
    return store.is_local(url) and path.is_dir() and any(
        (path / n).exists() for n in ("zarr.json", ".zgroup"))


def open_inputs(inputs, x="X", y="y", features=None, label=None, require_y=True,
                allow_missing_chunks=False, model_columns=None):
    """Expand globs and open every input as a :class:`~streamproj.sources.Source`.

    All sources must have the same features; the error names both.
    ``model_columns``: how the model's tables were read (:func:`_model_columns`),
    tried first where ``features`` or ``label`` is not given, so a later table
    with other columns beside them (a text column, the label under its own
    name) is read as the model was (:func:`_open_as_the_model`).
    """
    out: list[Source] = []
    specs = _specs(inputs)
    remote = next((s for s in specs if not store.is_local(s)), None)
    options = None if remote is None else store.storage_options(remote)
    with _unreadable(", ".join(specs)):
        urls = expand(specs, options)
    for url in urls:
        with _unreadable(url):
            options = None if store.is_local(url) else store.storage_options(url)
            src = _open_as_the_model(url, x, y, features, label, require_y, options,
                                     model_columns)
            if src is None:
                src = open_source(url, x, y, features, label, require_y, options,
                                  allow_missing_chunks=allow_missing_chunks)
        if out and src.n_features != out[0].n_features:
            msg = (f"{src.names[0]} has {src.n_features} features but {out[0].names[0]} has "
                   f"{out[0].n_features}; every input must have the same features")
            raise InputError(msg)
        if out and src.kind == out[0].kind and src.feature_names != out[0].feature_names:
            msg = (f"{src.names[0]} has features {', '.join(src.feature_names[:8])}… but "
                   f"{out[0].names[0]} has {', '.join(out[0].feature_names[:8])}…; every input "
                   "must have the same features")
            raise InputError(msg)
        out.append(src)
    return out


def _open_changed(inputs, x, y, features, label, require_y, allow_missing_chunks, model_columns,
                  ledgers):
    """:func:`open_inputs` for a step that skips what it holds: ``(sources, skipped)``.

    A Zarr store that every ledger in ``ledgers`` holds under the same arrays,
    with the same file listing (names, sizes, times), is not opened: its
    entries (one per ledger) go to ``skipped`` as ``(position among the
    matches, entries)``. A nightly glob over every day otherwise opened each
    store's metadata every night (8 ms each here, growing with the days).
    The last match is always opened, so there is a source to report on.
    Tables (``features``, ``label``, a model of tables) are all opened.
    """
    if features is not None or label is not None or model_columns is not None or not ledgers:
        return open_inputs(inputs, x, y, features, label, require_y, allow_missing_chunks,
                           model_columns), []
    specs = _specs(inputs)
    remote = next((s for s in specs if not store.is_local(s)), None)
    options = None if remote is None else store.storage_options(remote)
    with _unreadable(", ".join(specs)):
        urls = expand(specs, options)
    keep, skipped = [], []
    for at, url in enumerate(urls):
        entry = None if at == len(urls) - 1 else _held_unchanged(url, x, y, ledgers)
        if entry is None:
            keep.append(url)
        else:
            skipped.append((at, entry))
    return open_inputs(keep, x, y, None, None, require_y, allow_missing_chunks), skipped


def _held_by_model(meta):
    """The model's ledger entries a store may be left unopened for: held, or dropped before.

    A dropped one (``evicted_sources``: forget, or the window) carries the
    time it was dropped, by which its report says "evicted before".
    """
    return [*(meta.get("sources") or []), *meta.get("evicted_sources", [])]


def _held_unchanged(url, x, y, ledgers):
    """Each ledger's entry for the Zarr store ``url`` if every ledger holds it unchanged, else None."""
    if not _looks_zarr(url):
        return None
    key = {"url": url, "kind": "zarr", "x": x, "y": y}
    entries = [ledger.find(held, key) for held in ledgers]
    if any(e is None or e.get("stamp") is None for e in entries):
        return None
    now = sources.listing_digest(url, "zarr")
    if now is None or any(e["stamp"] != now for e in entries):
        return None
    # and as many rows as held: a store that grew (or shrank) keeping its files' names, sizes
    # and times (coarse clocks, copies that keep times), or that grew between a job's opening
    # and its listing, must be opened, as every store was before
    if any(store.stored_rows(url, x) != int(e["rows"]) for e in entries):
        return None
    return entries


@contextlib.contextmanager
def _unreadable(where):
    """An unreachable store or unreadable file becomes one InputError naming it."""
    try:
        yield
    except StreamprojError:
        raise
    except Exception as exc:
        if not isinstance(exc, OSError | RuntimeError | ValueError | KeyError | TypeError) and \
                "botocore" not in type(exc).__module__ and "aiohttp" not in type(exc).__module__:
            raise
        text = " ".join(str(exc).split())[:300]
        msg = f"cannot read {where}: {type(exc).__name__}: {text}"
        raise InputError(msg) from None


def _location(src):
    """The file or folder of a source (an HDF5 dataset path dropped), for overlap checks."""
    return ledger.location(src.key())


def _refuse_overlap(entries, src, holder):
    """Refuse a new source whose file or folder overlaps one ``entries`` hold (rows twice)."""
    clash = ledger.overlapping(entries, src.key())
    if clash is None:
        return
    if clash["url"] == src.url:  # one file or store, read with other arrays, columns or labels
        def read(key):
            return f"{key.get('kind', 'zarr')} X={key.get('x')!r}, labels={key.get('y')!r}"

        msg = (f"{src.spec} read as {read(src.key())} overlaps its reading as {read(clash)}, "
               f"{holder}: its rows would be counted twice; read it as before (labels added "
               f"since cannot be merged or appended: write those rows to a new source)")
    else:
        msg = (f"{src.spec} overlaps {clash['url']}, {holder} (a folder and a file of it): its "
               "rows would be counted twice; name that source as before")
    raise SourceChangedError(msg)


def _refuse_copies(srcs, holder, held=(), dropped=(), fix=None, dropped_fix=None):
    """Refuse a new source whose rows another holds under another path (moved or copied).

    ``srcs`` are the new sources (in the job's order), checked against the
    ``held`` ledger entries, the ``dropped`` ones (forgotten or out of the
    window) and each other (either of two may hold the other's rows and
    more). Their fingerprints come from the reads the job makes anyway.
    ``holder`` names who holds ``held`` ("model m"); ``fix`` is what to do
    about a moved source, ``dropped_fix`` about a copy of a dropped one.
    """
    given: list = []
    opened: dict = {}

    def prefix_of(entry, rows):
        # a held source that still lies where it was read, as recorded, is the witness of
        # whether its first rows are a shorter source's (missing chunks read as fill values:
        # it may have been merged so, and one that changed since fails its fingerprint)
        try:
            there = _open_relocated(entry, entry["url"], holder, opened, True)
            if (there.n_rows < int(entry["rows"])
                    or there.fingerprint(int(entry["rows"])) != ledger.fingerprint_of(entry)):
                return None
            return there.fingerprint(rows)
        except (ValueError, OSError):  # (StreamprojError is a ValueError)
            return None

    for src in srcs:
        for entries, whose, how in (
                (held, f"which {holder} holds (moved or copied?)", fix),
                (dropped, f"which {holder} dropped before (forget, or its window)", dropped_fix)):
            _refuse_if(ledger.same_rows(entries, src, prefix_of), src, whose, how)
        _refuse_if(ledger.same_rows([e for _, e in given], src), src, "also given")
        head = src.head(labels=False)
        for other, _ in given:  # an earlier, longer one holding all of src's rows
            # (or as many: src unlabelled, other labelled, whose fingerprint the first test
            # compared with its labels). Their rows alone: same_rows judges the labels
            if (head is not None and other.n_rows >= src.n_rows
                    and other.head(labels=False) == head):
                _refuse_if(ledger.same_rows([_entry_of(src)], other), other, "also given")
        given.append((src, _entry_of(src)))


def _refuse_if(same, src, whose, fix=None):
    """Raise the copy's error when ``same`` (the entry whose rows ``src`` holds) is not None."""
    if same is None:
        return
    # the first and last rows, shapes and dtypes agree: "looks like", not "is"
    rows = int(same["rows"])
    if rows > src.n_rows:  # a copy cut short, confirmed by the held source where it lies
        what = (f"has the first {src.n_rows} of the {rows} rows (judged by its first and last "
                f"256 rows, read again there, shape and dtypes) of")
    else:
        what = (f"{'has the same' if rows == src.n_rows else 'starts with the'} {rows} rows "
                f"(judged by the first and last 256, shape and dtypes) "
                f"{'as' if rows == src.n_rows else 'of'}")
    msg = (f"{src.spec} {what} {same['url']}, {whose}: its rows would be counted twice; "
           f"{fix or 'give only one of them'}")
    raise SourceChangedError(msg)


def _entry_of(src):
    """What :func:`ledger.same_rows` compares of a source not in any ledger yet."""
    return {**src.key(), "rows": src.n_rows, "fingerprint": src.fingerprint(), "head": src.head(),
            **ledger.rows_fields(src)}


def _moved_fix(relocate, what):
    # sources are kept by path (symbolic links resolved), so a move cannot be told from a copy
    return (f"leave the copy out; if the data moved, tell it so with 'streamproj {relocate}' "
            f"(or {what} with --overwrite)")


def _refuse_new_copies(plan, model_path):
    """:func:`_refuse_copies` for the sources an update adds to the model (``plan``: its plan)."""
    _refuse_copies([src for src, entry, _ in plan["work"] if entry is None], f"model {model_path}",
                   plan["entries"], plan["evicted"],
                   _moved_fix(f"relocate {model_path} OLD NEW", "refit the model"),
                   "leave it out: its rows were dropped from the model (if the data moved, "
                   f"tell it so with 'streamproj relocate {model_path} OLD NEW')")


def _refuse_appended_copies(held, parts, out):
    """:func:`_refuse_copies` for the sources an append adds to OUT (``held``: OUT's ledger)."""
    _refuse_copies([src for src, _, entry in parts if entry is None], f"output {out}", held,
                   fix=_moved_fix(f"relocate MODEL OLD NEW --output {out}", f"rewrite {out}"))


def _model_columns(meta):
    """How a model's table sources were read, to read later tables alike; None for arrays only.

    Returns
    -------
    dict
        ``features``: the model's columns, in its order; ``label``: the label
        column of its newest table source; ``labels``: each table source's own
        label column by URL; ``kinds``: the table kinds it merged.
    """
    tables = [e for e in (meta or {}).get("sources") or []
              if isinstance(e, dict) and e.get("kind") in _NAMED_KINDS]
    names = (meta or {}).get("feature_names")
    if not tables or not names:
        return None
    labels = {e.get("url"): e.get("y") for e in tables if isinstance(e.get("y"), str)}
    newest = tables[-1].get("y")
    return {"features": [str(n) for n in names], "label": newest if isinstance(newest, str) else None,
            "labels": labels, "kinds": {e.get("kind") for e in tables}}


def _open_as_the_model(url, x, y, features, label, require_y, options, model_columns):
    """A table opened with the model's columns and label where the user names none; else None.

    Only Parquet, CSV and xarray inputs (and a Zarr store when the model read
    Zarr stores as xarray datasets); the label is the one this source was read
    with before, else the model's newest table's, and it is optional where
    labels are (``project``). ``--y NAME`` names a table's label column too.
    """
    if model_columns is None:
        return None
    kind = sources.input_kind(url, options)
    if kind not in _NAMED_KINDS and not (kind == "zarr" and "xarray" in model_columns["kinds"]):
        return None
    user_label = label if label is not None else (y if y != "y" else None)
    feats = features if features is not None else model_columns["features"]
    if user_label is not None:
        attempt = lambda: open_source(url, x, y, feats, label, require_y, options)  # noqa: E731
    else:
        known = model_columns["labels"].get(sources.normalise_url(url, options)) \
            or model_columns["label"] or y
        # as the default label (y=), not a given one: absent is no labels where they are optional
        attempt = lambda: open_source(url, x, known, feats, None, require_y, options)  # noqa: E731
    try:
        return attempt()
    except InputError as exc:
        # opened as given instead: a Zarr store may hold arrays (X, y) rather than the
        # variables the model read, and a table lacking one of the model's columns is then
        # named by _match_columns; where that fails too, this error is the one to say
        try:
            return open_source(url, x, y, features, label, require_y, options)
        except InputError:
            raise exc from None


def _check_features(src, model, model_path):
    if src.n_features != model.n_features_in_:
        msg = (f"{src.names[0]} has {src.n_features} features but model {model_path} was fitted on "
               f"{model.n_features_in_}")
        raise IncompatibleStatsError(msg)


def _match_columns(srcs, model, model_path, ledger_entries):
    """``srcs`` with each table's feature columns put in the model's order, by name.

    Parquet, CSV and xarray inputs name their columns: a file whose columns are
    the model's in another order (or with others beside them) is read in the
    model's order, and one lacking a column the model was fitted on is
    refused, rather than its columns being taken by position (which weighs the
    wrong features, silently). A model's names are names when a source it
    merged was a table (or it records none: fitted on a DataFrame in Python);
    one fitted on Zarr or HDF5 arrays only (``x0, x1, …``) matches by position.
    """
    names = getattr(model, "feature_names_in_", None)
    kinds = {e.get("kind", "zarr") for e in ledger_entries or [] if isinstance(e, dict)}
    if names is None or (kinds and not kinds & set(_NAMED_KINDS)):
        return list(srcs)
    names = [str(n) for n in names]
    matched = []
    for src in srcs:
        if src.kind not in _NAMED_KINDS or list(src.feature_names) == names:
            matched.append(src)
            continue
        missing = [n for n in names if n not in src.feature_names]
        if missing:
            msg = (f"{src.names[0]} has no column {missing[0]!r}, one of the "
                   f"{len(names)} that model {model_path} was fitted on "
                   f"({sources.listing(names)}); it has {sources.listing(src.feature_names)}: "
                   "give the inputs the model's columns (their order may differ)")
            raise InputError(msg)
        where = [src.feature_names.index(n) for n in names]
        # the columns (Parquet, CSV, xarray variables) are recorded in the model's order; a
        # 2-D xarray variable stays named by its variable, and is matched again when reopened
        x = tuple(names) if isinstance(src.x, tuple) else src.x
        matched.append(dataclasses.replace(src, X=src.X[:, where], feature_names=tuple(names), x=x))
    return matched


def _plain(stats):
    """A copy of a summary without batch stamps: sources merge by the ledger, not by stamps."""
    out = stats.copy()
    if hasattr(out, "batches"):
        out.batches = {}
    return out


def _merge_all(summaries):
    """Merge summaries in the order given (plain arithmetic); None for none."""
    total = None
    for s in summaries:
        total = _plain(s) if total is None else total + _plain(s)
    return total


def _labelled_rows(src, start):
    """Rows ``[start:]`` of a source and their labels, which fitting and updating need."""
    if src.y is None:
        msg = f"{src.names[1]} is missing: fitting and updating need labels"
        raise InputError(msg)
    return src.X[start:src.n_rows], src.y[start:src.n_rows]


def _summary_lazy(src, start, detail, max_summary_memory=None, bfloat16=False, n_classes=None):
    """Pass 1 over the rows ``[start:]`` of a source, as a lazy graph (see :func:`summary_graph`)."""
    X, y = _labelled_rows(src, start)
    with _context(src.spec, _named_columns(src)):
        return summary_graph(X, y, detail, row_offset=start, names=src.names,
                             max_summary_memory=max_summary_memory, bfloat16=bfloat16,
                             n_classes=n_classes, kernel=default_kernel())  # as the ledger records


_NAMED_KINDS = ("parquet", "csv", "xarray")  # inputs whose columns have names


def _named_columns(src):
    """Feature names worth naming in an error: the columns or variables of a table or dataset."""
    return src.feature_names if src.kind in _NAMED_KINDS else None


def _finish(src, result):
    with _context(src.spec, _named_columns(src)):
        return _discrete(src, _plain(finish_summary(result)))


def _summarise(src, start, detail, progress, max_summary_memory=None, bfloat16=False,
               n_classes=None):
    X, y = _labelled_rows(src, start)
    with _context(src.spec, _named_columns(src)):
        return _discrete(src, _plain(accumulate(
            X, y, detail, progress=progress, row_offset=start, names=src.names,
            max_summary_memory=max_summary_memory, bfloat16=bfloat16, n_classes=n_classes,
            kernel=default_kernel())))  # as the ledger records


def _discrete(src, stats):
    """``stats``, once its classes are class labels (a regression target read as y is refused)."""
    check_discrete_classes(stats.classes, src.names[1])
    return stats


def _boundary_file(params):
    """The boundary file named in ``params``, if the boundary is one."""
    boundary = (params or {}).get("boundary")
    return str(boundary) if isinstance(boundary, str | Path) else None


def _check_boundary_file(path, n_features, name):
    """A boundary file's coefficients must match the data; the error names the file."""
    coef = store.read_boundary(path)["coef"]
    p = coef.shape[-1]
    if p != n_features:
        msg = (f"{path}: the boundary has {p} coefficients per row but {name} has "
               f"{n_features} features; give a boundary fitted on these features")
        raise InputError(msg)


def _read(model_path):
    """The model's record and its per-source summaries, errors prefixed with its path."""
    with _context(str(model_path)):
        return store.read_record_and_summaries(model_path)


def _feature_meta(model, meta, srcs):
    names = meta.get("feature_names") if meta else None
    if names is None and srcs and srcs[0].kind != "zarr":
        names = list(srcs[0].feature_names)
    return {"feature_names": names} if names else {}


# -------------------------------------------------------------------- fit
def fit_model(inputs, model_path, x="X", y="y", params=None, overwrite=False, progress=False,
              allow_missing_chunks=False, features=None, label=None, keep_last=None, max_age=None,
              before_write=None):
    """Fit a new model from one or more inputs (globs allowed) and save it; returns a report.

    ``params`` are the estimator's, checked before any input is opened
    (:func:`~streamproj.estimator.check_params` raises
    :class:`~streamproj.errors.InvalidParameterError` naming the parameter).
    ``before_write(model, entries, srcs)``, if given, is called with the
    solved model, its ledger entries and the opened sources before anything
    is written: an error it raises leaves the model as it was.
    """
    check_params(params or {})
    _check_window(max_age)
    clock = _Clock()
    with clock("open"):
        srcs = open_inputs(inputs, x, y, features, label, True, allow_missing_chunks)
    store.check_disjoint(*[("input", _location(s)) for s in srcs],
                         ("boundary file", _boundary_file(params)), ("model", model_path))
    store.check_not_held(model_path, "model")  # (a new model: not inside another's folders)
    store.check_replaceable(model_path, "model")
    with store.model_lock(model_path):
        existing = _existing_model(model_path)
        if existing is not False and not overwrite:
            msg = (f"model {model_path} exists; use 'streamproj update' to merge new rows, "
                   "or --overwrite to refit from scratch")
            raise OutputExistsError(msg)
        if _boundary_file(params):
            _check_boundary_file(_boundary_file(params), srcs[0].n_features, srcs[0].names[0])
        model = BoundaryProjector(**(params or {}), progress=progress)
        with _context(srcs[0].spec):  # (the solve says it too, after every row is read)
            model._check_components(srcs[0].n_features)
        detail = model.summary_detail()
        summaries: dict[str, ClassStats] = {}
        entries: list[dict] = []
        reports: list[dict] = []
        with clock("pass1"):
            # before pass 1: the fingerprint is two chunks fit reads for its ledger anyway
            _refuse_copies(srcs, "this fit")
            listings = [ledger.stamp(src) for src in srcs]  # before the rows are read
            for src, listing in zip(srcs, listings, strict=True):
                batch = _summarise(src, 0, detail, progress, model.max_summary_memory,
                                   model.bfloat16)
                sid = ledger.new_id(entries)
                summaries[sid] = batch
                entries.append(ledger.record(src, src.n_rows, sid=sid, listing=listing,
                                             batch=(0, src.n_rows, batch.fingerprint(),
                                                    default_kernel())))
                reports.append({"url": src.url, "status": "merged", "rows_merged": src.n_rows,
                                "rows_skipped": 0})
        entries, evicted = _apply_window(entries, keep_last, max_age)
        summaries = {e["id"]: summaries[e["id"]] for e in entries}
        # the sources the window dropped were read but are not in the model: reported as such
        # and recorded as evicted, so a later update leaves them out (it merged them again,
        # and dropped newer days to make room)
        dropped = {ledger.key_of(e) for e in evicted}
        for src, rep in zip(srcs, reports, strict=True):
            if ledger.key_of(src.key()) in dropped:
                rep.update(status="evicted", rows_merged=0)
        with clock("solve"), _context(srcs[0].spec):
            model.fit_stats(_merge_all(summaries[e["id"]] for e in entries))
        if before_write is not None:
            before_write(model, entries, srcs)
        n = int(sum(int(e["rows"]) for e in entries))  # rows in the model
        history = [{"event": "fit", "time": store.timestamp(), "rows_added": n,
                    "n_samples": model.stats_.n_samples,
                    "sources": [e["url"] for e in entries], "evicted": [e["url"] for e in evicted]}]
        with clock("write"):
            record = model.to_state().with_meta(sources=entries, history=history,
                                                **_evicted_meta({}, evicted),
                                                **_feature_meta(model, None, srcs))
            version = store.write_record(model_path, record, base=existing or None,
                                         summaries=summaries)
    return {"command": "fit", "status": "fitted", "model": str(model_path), "version": version,
            "rows": n, "classes": model.classes_.tolist(), "counts": model.stats_.counts.tolist(),
            "model_id": model.model_id_, "sources": reports,
            "evicted": [e["url"] for e in evicted], "timings": clock.report(),
            "versions": _versions(version)}


def _check_window(max_age):
    """A ``max_age`` that is no age, refused before any row is read (the window reads it after)."""
    if isinstance(max_age, str):
        try:
            ledger.parse_age(max_age)
        except InputError as exc:
            expected = 'a number and a unit (s, m, h, d or w), such as "30d"'
            raise InvalidParameterError(str(exc), "max_age", max_age, expected) from None


def _apply_window(entries, keep_last, max_age):
    """``(kept, evicted)`` entries of a sliding window (see :func:`ledger.to_evict`)."""
    if keep_last is None and max_age is None:
        return entries, []
    evicted = ledger.to_evict(entries, keep_last, max_age)
    gone = {id(e) for e in evicted}
    kept = [e for e in entries if id(e) not in gone]
    if not kept:
        msg = "the window (keep_last / max_age) leaves no source in the model; widen it"
        raise InputError(msg)
    return kept, evicted


def _evicted_meta(meta, evicted):
    """``model.json``'s ``evicted_sources``: what the window or ``forget`` dropped, so it stays out.

    Each is the source's ledger key and rows at eviction (no summary: it is
    gone). An update skips a source listed here (a glob keeps matching old
    days); refitting starts the list afresh.
    """
    now = store.timestamp()
    gone = [{k: v for k, v in e.items() if k not in ("id", "batches")} | {"evicted": now}
            for e in evicted]
    carried = [e for e in meta.get("evicted_sources", [])
               if all(ledger.find([e], g) is None for g in gone)]
    return {"evicted_sources": carried + gone} if carried or gone else {}


def _existing_model(model_path):
    """The live version of the model at ``model_path``; False when nothing is there.

    Something that is there but is no readable model raises (so --overwrite
    never replaces it).
    """
    if store.is_local(model_path):
        local = store.local_path(model_path)
        if not local.exists() or (local.is_dir() and not any(local.iterdir())):
            return False
    try:
        version = store.read_record(model_path).version
    except StreamprojError:
        if not store.is_local(model_path) and not store.model_exists(model_path):
            return False
        raise
    return version


# ------------------------------------------------------------------ drift
def _drift(old, new):
    """How far the model moved: normal angle and principal angles, in degrees."""
    out: dict[str, float | list[float]] = {}
    if old.coef_.shape[0] == 1 and new.coef_.shape[0] == 1:
        # atan2(sine, cosine): arccos of a cosine near 1 loses half the digits of a small angle.
        u, v = old.components_[0], new.components_[0]
        cos = float(u @ v)
        out["normal_angle_deg"] = float(np.degrees(np.arctan2(np.linalg.norm(u - cos * v), cos)))
    elif old.coef_.shape[0] == new.coef_.shape[0]:
        r = min(old.coef_.shape[0] - 1, old.components_.shape[0])
        angles = subspace_angles(old.components_[:r].T, new.components_[:r].T)
        out["boundary_angles_deg"] = sorted(np.degrees(angles).tolist())
    if old.components_.shape == new.components_.shape:
        angles = subspace_angles(old.components_.T, new.components_.T)
        out["axes_angles_deg"] = sorted(np.degrees(angles).tolist())
    return out


def _boundary_drift(drift):
    """The largest angle the boundary moved (normal, or boundary directions), degrees; None if unknown."""
    angles = [drift["normal_angle_deg"]] if "normal_angle_deg" in drift else []
    angles += drift.get("boundary_angles_deg", [])
    return max(angles) if angles else None


def _frame_drift(frame, model):
    """``(degrees, why)``: the largest angle between an output's frame and the model (inf: incompatible)."""
    if frame.n_features_in_ != model.n_features_in_:
        return float("inf"), "the model has other features"
    if frame.components_.shape != model.components_.shape:
        return float("inf"), "the model has another number of axes"
    if np.asarray(frame.classes_).tolist() != np.asarray(model.classes_).tolist():
        return float("inf"), "the model's classes changed"
    d = _drift(frame, model)
    angles = [d.get("normal_angle_deg", 0.0), *d.get("boundary_angles_deg", []),
              *d.get("axes_angles_deg", [])]
    return float(max(angles)), None


# ----------------------------------------------------------------- update
def update_model(model_path, inputs, x="X", y="y", progress=False, verify=False,
                 allow_missing_chunks=False, features=None, label=None, keep_last=None,
                 max_age=None, max_summary_memory=None, before_write=None):
    """Merge the rows of each source that the model has not seen; returns a report.

    Sources merged before (same resolved URL and arrays or columns, per the
    model's ledger) are skipped, a grown source merges only its new rows, a
    source whose merged rows changed is refused with the model untouched.
    ``keep_last`` / ``max_age`` then drop the oldest sources exactly.
    ``before_write``: as :func:`fit_model`'s, when there is a new version to write.
    """
    check_params({"max_summary_memory": max_summary_memory})
    _check_window(max_age)
    clock = _Clock()
    with clock("open"):
        meta = store.read_model_meta(model_path)
        if meta is None:  # no model there (or a damaged one): said before any input is opened,
            store.check_writable_location(model_path, "model")  # whose own errors (its label
            store.read_record(model_path)  # column...) would not tell; '' is no model either
        # (--verify reads every held source again: they are all opened). A store the model
        # dropped (forget, its window) is held too: it is not merged again, opened or not
        held = [_held_by_model(meta)] if meta and not verify else []
        srcs, skipped = _open_changed(inputs, x, y, features, label, True, allow_missing_chunks,
                                      _model_columns(meta), held)
    store.check_disjoint(*[("input", _location(s)) for s in srcs], ("model", model_path))
    with store.model_lock(model_path):
        plan = _plan_update(model_path, srcs, verify, progress, clock, skipped)
        old = plan["old"]
        batches = []
        for src, _, _ in plan["work"]:
            src.fingerprint()  # its edge chunks before the pass (see ledger.record), as the listing
        _refuse_new_copies(plan, model_path)  # so a copy is refused before its pass
        for src, _entry, start in plan["work"]:
            with clock("pass1"):
                batches.append(_summarise(src, start, old.summary_detail(), progress,
                                          max_summary_memory, old.bfloat16,
                                          old.stats_.n_classes))
        report, _ = _commit_update(model_path, plan, batches, srcs, keep_last, max_age, clock,
                                   before_write)
        return report


def _plan_update(model_path, srcs, verify, progress, clock, skipped=()):
    """Which rows of each source are new to the model (read under the model's lock).

    ``skipped``: the matches :func:`_open_changed` left unopened, reported as
    skipped in their places.

    Returns a dict: the model's ``record`` and per-source ``summaries``, the
    ``old`` estimator, the ledger ``entries``, ``work`` — ``(source, ledger
    entry or None, first new row)`` for each source with new rows — and one
    report per source.
    """
    record, summaries = _read(model_path)
    old = BoundaryProjector.from_state(record)
    # in the caller's list: a nightly run's projection of the same rows takes these sources
    srcs[:] = _match_columns(srcs, old, model_path, record.meta.get("sources"))
    entries = [dict(e) for e in record.meta.get("sources", [])]
    evicted = record.meta.get("evicted_sources", [])
    work, reports, to_verify = [], [], []
    fix = "refit the model from its sources, or write new rows to a new source"
    for src in srcs:
        _check_features(src, old, model_path)
        entry = ledger.find(entries, src.key())
        if entry is None:
            _refuse_overlap(entries, src, f"which model {model_path} merged before")
        if entry is None and ledger.find(evicted, src.key()) is not None:
            # the window or forget dropped it: a glob still matching it must not merge it again
            reports.append({"url": src.url, "status": "evicted before", "rows_merged": 0,
                            "rows_skipped": src.n_rows})
            continue
        with clock("check"):
            start = ledger.held_rows(entry, src, f"model {model_path}", fix)
        if verify and entry:
            to_verify.append((src, entry))
        if start == src.n_rows:
            reports.append({"url": src.url, "status": "skipped", "rows_merged": 0,
                            "rows_skipped": start})
            continue
        work.append((src, entry, start))
        reports.append({"url": src.url, "status": "grown" if start else "merged",
                        "rows_merged": src.n_rows - start, "rows_skipped": start})
    # every batch's kernel known (and a GPU there for kernel 3) before any source is re-read
    kernels = [[_batch_kernel(batch, src) for batch in entry.get("batches", [])]
               for src, entry in to_verify]
    for (src, entry), known in zip(to_verify, kernels, strict=True):
        with clock("verify"):
            _verify_rows(old, src, entry, known, progress)
    for at, (entry, *_) in skipped:  # in ascending places: each lands where it was matched
        reports.insert(at, {"url": entry["url"],
                            "status": "evicted before" if "evicted" in entry else "skipped",
                            "rows_merged": 0, "rows_skipped": int(entry["rows"])})
    # the listings before the rows are read (see ledger.record)
    listings = {id(src): ledger.stamp(src) for src, _, _ in work}
    return {"record": record, "skipped": len(skipped), "summaries": summaries, "old": old,
            "entries": entries, "evicted": evicted, "work": work, "reports": reports,
            "listings": listings}


def _commit_update(model_path, plan, batches, srcs, keep_last, max_age, clock, before_write=None):
    """Merge the new rows' summaries (one per ``plan["work"]`` item) and write the new version.

    The caller has refused copies of held sources (:func:`_refuse_new_copies`);
    ``before_write`` is :func:`update_model`'s.

    Returns the report and the model as written (the old one when unchanged).
    """
    record, summaries, old = plan["record"], plan["summaries"], plan["old"]
    entries, reports = plan["entries"], plan["reports"]
    meta, stats = record.meta, record.stats
    unsourced = stats.n_samples - sum(int(e["rows"]) for e in entries)
    new = [src.url for src, entry, _ in plan["work"] if entry is None]
    if unsourced and new:
        # (no ledger entry to compare them with: a model fitted in Python and saved, then
        # updated with the rows it was fitted on, counted them twice without a word)
        warnings.warn(f"model {model_path} holds {unsourced:,} rows of no source (added in "
                      f"Python with partial_fit, or fitted there), so update cannot tell whether "
                      f"the rows of {', '.join(new)} are among them: they are merged as new "
                      "rows; refit the model from its sources with streamproj fit if they are",
                      StreamprojWarning, stacklevel=2)
    for (src, entry, start), batch in zip(plan["work"], batches, strict=True):
        sid = (entry or {}).get("id") or (None if entry else ledger.new_id(entries))
        if sid is not None:
            summaries[sid] = summaries[sid] + batch if sid in summaries else batch
        new_entry = ledger.record(src, src.n_rows, previous=entry, sid=sid,
                                  listing=plan["listings"].get(id(src)),
                                  batch=(start, src.n_rows, batch.fingerprint(), default_kernel()))
        if entry is None:
            entries.append(new_entry)
        else:
            entries[entries.index(entry)] = new_entry
    kept, evicted = _apply_window(entries, keep_last, max_age)
    if evicted:
        _refuse_unsourced(unsourced, model_path, "its window (keep_last, max_age)")
    n_new = sum(r["rows_merged"] for r in reports)
    base = {"command": "update", "model": str(model_path), "sources": reports,
            "evicted": [e["url"] for e in evicted]}
    if not batches and not evicted:
        held = sum(r["rows_skipped"] for r in reports if r["status"] != "evicted before")
        gone = [r["url"] for r in reports if r["status"] == "evicted before"]
        said = [f"all {held:,} rows were merged before"] if held or not gone else []
        if gone:  # forgotten, or out of the window: a glob still matching them merges nothing
            one = len(gone) == 1
            said.append(f"{len(gone)} source{'' if one else 's'} {'was' if one else 'were'} removed "
                        f"from the model before (forget, or its window) and {'is' if one else 'are'} "
                        "not merged again")
        return {**base, "status": "unchanged", "version": meta["version"], "rows_added": 0,
                "n_samples": stats.n_samples, "drift_deg": 0.0,
                "message": f"{_named(srcs, plan.get('skipped', 0))}: {'; '.join(said)}; "
                           "model unchanged",
                "timings": clock.report(), "versions": _versions(meta["version"])}, old
    new = BoundaryProjector.from_state(record)
    with clock("solve"), _context(srcs[0].spec):
        if evicted:
            new.fit_stats(_remaining(kept, summaries, model_path, record.stats))
        else:
            new.partial_fit_stats(_merge_all(batches))
    # nothing read: those of sources left as they were are linked into the new version
    summaries = summaries.only(e["id"] for e in kept if e.get("id") in summaries)
    added_classes = sorted(set(new.classes_.tolist()) - set(old.classes_.tolist()))
    if before_write is not None:
        before_write(new, kept, srcs)
    drift = _drift(old, new)
    history = [*meta.get("history", []), {
        "event": "update", "time": store.timestamp(),
        "sources": [r["url"] for r in reports if r["rows_merged"]], "rows_added": n_new,
        "n_samples": new.stats_.n_samples, "new_classes": added_classes,
        "evicted": base["evicted"], **drift}]
    with clock("write"):
        version = store.write_record(
            model_path, new.to_state().with_meta(**{"sources": kept, "history": history,
                                     **_feature_meta(new, meta, srcs),
                                     **_evicted_meta(meta, evicted)}),
            base=record.version, summaries=summaries)
    return {**base, "status": "updated", "version": version, "rows_added": n_new,
            "n_samples": new.stats_.n_samples, "new_classes": added_classes, **drift,
            "drift_deg": _boundary_drift(drift), "timings": clock.report(),
            "versions": _versions(version)}, new


def _named(srcs, skipped):
    """The sources of a message: those opened, and how many more were left unopened."""
    named = ", ".join(s.spec for s in srcs)
    return f"{named} and {skipped} more unchanged (not opened)" if skipped else named


def _refuse_unsourced(rows, model_path, what):
    """Refuse to drop sources from a model holding ``rows`` rows of no source.

    Rows added in Python (``partial_fit``, a model fitted there and saved) have
    no per-source summary: rebuilding the model from the sources kept would
    drop them silently.
    """
    if rows:
        msg = (f"model {model_path} holds {rows:,} rows of no source (added in Python with "
               f"partial_fit, or fitted there), which {what} cannot keep when it drops sources: "
               "refit the model from its sources with streamproj fit")
        raise ModelError(msg)


def _remaining(entries, summaries, model_path, stats):
    """The exact summary of the rows of ``entries``: their per-source summaries merged again.

    ``stats``: the model's summary, which each summary read from a file must agree with.
    """
    lacking = [e["url"] for e in entries if e.get("id") not in summaries]
    if lacking:
        msg = (f"model {model_path} has no per-source summary of {lacking[0]} (merged by "
               "streamproj 0.1), so it cannot drop sources exactly; refit it from its sources")
        raise ModelError(msg)
    for e in entries:
        if summaries.stored(e["id"]):  # (one merged in by this job is sound)
            _check_summary(summaries[e["id"]], e, stats, summaries.name_of(e["id"]))
    return _merge_all(summaries[e["id"]] for e in entries)


_LABEL_KINDS = {"b": "boolean", "i": "numeric", "u": "numeric", "f": "numeric", "U": "text",
                "S": "text"}


def _text(classes):
    """Bytes labels as the UTF-8 text they stand for (as merging them with text labels reads them)."""
    return np.char.decode(classes, "utf-8", "replace") if classes.dtype.kind == "S" else classes


def _few_labels(classes, most=3):
    shown = ", ".join(map(repr, classes[:most].tolist()))
    return shown + (", …" if classes.shape[0] > most else "")


def _check_summary(summary, entry, stats, where):
    """Refuse a source's stored summary that is not of its ledger entry's rows in this model.

    One copied over another's file, or of other features or labels, was merged silently
    (a forget left 300 rows of a source of 200) or failed with a traceback.
    """
    fault = None
    classes = summary.classes
    if summary.n_features != stats.n_features:
        fault = f"it summarises {summary.n_features} features, but the model {stats.n_features}"
    elif summary.n_samples != int(entry["rows"]):
        fault = (f"it summarises {summary.n_samples:,} rows, but model.json's ledger holds "
                 f"{int(entry['rows']):,} rows of {entry['url']}")
    elif stats.n_classes and _LABEL_KINDS[classes.dtype.kind] != _LABEL_KINDS[stats.classes.dtype.kind]:
        fault = (f"its classes are {_LABEL_KINDS[classes.dtype.kind]} labels "
                 f"({classes[:3].tolist()}), but the model's are "
                 f"{_LABEL_KINDS[stats.classes.dtype.kind]} ({stats.classes[:3].tolist()})")
    elif (unknown := classes[~np.isin(_text(classes), _text(stats.classes))]).size:
        fault = (f"it holds the class {unknown[0].item()!r}, which the model's classes "
                 f"({stats.classes[:6].tolist()}) do not include")
    elif DETAILS.index(summary.detail) < DETAILS.index(stats.detail):
        fault = f"it keeps {summary.detail!r} scatter, but the model keeps {stats.detail!r}"
    if fault is not None:
        msg = f"{where} is damaged: {fault}; refit the model from its sources"
        raise ModelError(msg)


def _batch_kernel(batch, src):
    """The pass-1 kernel that summed a ledger batch (1 where none is recorded: before kernels)."""
    kernel = batch.get("kernel", 1)
    if kernel not in PASS1_KERNELS:
        msg = (f"rows {batch['start']}..{batch['stop'] - 1} of {src.names[0]} were summed by "
               f"pass-1 kernel {kernel!r}, which this streamproj does not know; upgrade "
               "streamproj to verify them")
        raise ModelError(msg)
    if kernel == gpu.KERNEL and gpu.backend() is None:
        gpu.check_device("cuda", what=(f"rows {batch['start']}..{batch['stop'] - 1} of "
                                       f"{src.names[0]} were summed on a GPU (pass-1 kernel "
                                       f"{kernel}): verifying them"))
    return kernel


def _verify_rows(model, src, entry, kernels, progress):
    """Re-read every merged row range and check it summarises exactly as when it was merged.

    Pass 1 is deterministic for a given chunking (a fixed merge tree, one BLAS
    thread per task), so an unchanged range gives the same fingerprint bit for
    bit. It reads the rows as the merge did (a bfloat16 model's uint16 bits as
    bfloat16). ``kernels``: each batch's pass-1 kernel (:func:`_batch_kernel`),
    checked by the caller for every source before any is read.
    """
    batches = entry.get("batches", [])
    for batch, kernel in zip(batches, kernels, strict=True):
        a, b = batch["start"], batch["stop"]
        with _context(src.names[0]):
            # summed as when merged: the kernel sets the order of the additions
            again = accumulate(src.X[a:b], src.y[a:b], model.summary_detail(), progress=progress,
                               row_offset=a, names=src.names, bfloat16=model.bfloat16,
                               kernel=kernel)
        if again.fingerprint() != batch["fingerprint"]:
            # (the summary holds both: a label edited alone was blamed on X)
            rows = f"rows {a}..{b - 1} of {src.names[0]}" + (
                f" or their labels in {src.names[1]}" if src.y is not None else "")
            msg = (f"{rows} (merged on {entry['merged']}) have changed since; refit the model "
                   "from its sources")
            if kernel == gpu.KERNEL:  # cuBLAS repeats its sums on the same GPU and library only
                msg += (" (they were summed on a GPU: another GPU model or CUDA library "
                        "sums them in another order, which looks like a change)")
            raise SourceChangedError(msg)


# ----------------------------------------------------------------- forget
def forget_sources(model_path, patterns):
    """Remove sources from a model exactly: the other sources' summaries are merged again.

    ``patterns``: source locations as given to ``update`` (globs match the
    URLs in the ledger, so a deleted file can still be forgotten).
    """
    clock = _Clock()
    patterns = _specs(patterns)
    with store.model_lock(model_path):
        record, summaries = _read(model_path)
        meta = record.meta
        entries = list(meta.get("sources", []))
        gone = []
        for pattern in patterns:
            found = ledger.matching(entries, pattern)
            if not found:
                listed = ", ".join(str(e.get("url")) for e in entries[:10]) or "none"
                msg = f"model {model_path} holds no source {pattern} (its sources: {listed})"
                raise InputError(msg)
            gone += [e for e in found if e not in gone]
        kept = [e for e in entries if e not in gone]
        _refuse_unsourced(record.stats.n_samples - sum(int(e["rows"]) for e in entries),
                          model_path, "forget")
        if not kept:
            msg = (f"forgetting {', '.join(patterns)} would leave model {model_path} without rows; "
                   "delete the model instead")
            raise InputError(msg)
        for e in gone:
            if e.get("id") not in summaries:
                _remaining([e], summaries, model_path, record.stats)
        old = BoundaryProjector.from_state(record)
        new = BoundaryProjector.from_state(record)
        with clock("solve"), _context(str(model_path)):
            new.fit_stats(_remaining(kept, summaries, model_path, record.stats))
        drift = _drift(old, new)
        history = [*meta.get("history", []), {
            "event": "forget", "time": store.timestamp(), "sources": [e["url"] for e in gone],
            "rows_removed": int(sum(e["rows"] for e in gone)), "n_samples": new.stats_.n_samples,
            **drift}]
        with clock("write"):
            version = store.write_record(
                model_path, new.to_state().with_meta(**{"sources": kept, "history": history,
                                         **_feature_meta(new, meta, []),
                                         **_evicted_meta(meta, gone)}),
                base=record.version,
                summaries=summaries.only(e["id"] for e in kept))
    return {"command": "forget", "status": "forgotten", "model": str(model_path), "version": version,
            "sources": [{"url": e["url"], "status": "forgotten", "rows_removed": e["rows"]} for e in gone],
            "rows_removed": int(sum(e["rows"] for e in gone)), "n_samples": new.stats_.n_samples,
            **drift, "drift_deg": _boundary_drift(drift), "timings": clock.report(),
            "versions": _versions(version)}


# ------------------------------------------------------------------ merge
def _features_of(meta):
    if meta.get("feature_names"):
        return list(meta["feature_names"])
    firsts = [e.get("features") for e in meta.get("sources", []) if e.get("kind", "zarr") != "zarr"]
    return firsts[0] if firsts and firsts[0] else None


def merge_models(model_path, others):
    """Merge models fitted elsewhere into ``model_path`` exactly, keeping every source's provenance.

    Refuses models with other features, summary detail, kind of labels or
    reading of their sources (``bfloat16``), and sources that two models share
    (the same location and arrays, or the same rows by fingerprint) — merging
    them would count their rows twice, as would a model with rows of no source
    that this one is, or merged before.
    """
    clock = _Clock()
    others = _specs(others)
    store.check_disjoint(("model", model_path), *[(f"model to merge #{i + 1}", o)
                                                  for i, o in enumerate(others)])
    loaded = []
    for other in others:
        record, summaries = _read(other)
        for e in record.meta.get("sources", []):  # linked into this model: checked as forget would
            if e.get("id") in summaries:
                _check_summary(summaries[e["id"]], e, record.stats, summaries.name_of(e["id"]))
        # read now, not later: this job holds no lock of the other models
        loaded.append((other, record.meta, record.stats, dict(summaries.items()),
                       BoundaryProjector.from_state(record).get_params()))
    with store.model_lock(model_path):
        record, summaries = _read(model_path)
        meta, stats = record.meta, record.stats
        entries = [dict(e) for e in meta.get("sources", [])]
        mine = _features_of(meta)
        added: list[dict] = []
        totals: list[ClassStats] = []
        reports: list[dict] = []
        old = BoundaryProjector.from_state(record)
        lineages: list[list[str]] = []  # (each merged model's own and those merged into it)
        for other, ometa, ostats, osummaries, oparams in loaded:
            if bool(oparams.get("bfloat16")) != bool(old.bfloat16) and ometa.get("sources"):
                # how the sources' rows are read, not how the model is solved: update and
                # --verify read every source as this model does (bfloat16 bits as integers);
                # a model of rows given in Python has none to read again, and merges exactly
                how = {True: "as bfloat16 (uint16 bit patterns, bfloat16=True)",
                       False: "as the numbers stored (bfloat16=False)"}
                msg = (f"model {other} reads its sources {how[bool(oparams.get('bfloat16'))]} but "
                       f"{model_path} {how[bool(old.bfloat16)]}; update and --verify would read "
                       f"them as {model_path} does: refit one of them with the other's setting")
                raise IncompatibleStatsError(msg)
            if ostats.n_features != stats.n_features:
                msg = (f"model {other} was fitted on {ostats.n_features} features but {model_path} "
                       f"on {stats.n_features}; only models of the same features merge")
                raise IncompatibleStatsError(msg)
            theirs = _features_of(ometa)
            if mine and theirs and list(mine) != list(theirs):
                msg = (f"model {other} has features {', '.join(theirs[:6])}… but {model_path} has "
                       f"{', '.join(mine[:6])}…; only models of the same features merge")
                raise IncompatibleStatsError(msg)
            kinds = [_LABEL_KINDS[c.dtype.kind] for c in (ostats.classes, stats.classes)]
            if ostats.n_classes and stats.n_classes and kinds[0] != kinds[1]:
                msg = (f"model {other} has {kinds[0]} classes ({_few_labels(ostats.classes)}) but "
                       f"{model_path} {kinds[1]} ones ({_few_labels(stats.classes)}); only models "
                       "of the same kind of labels merge")
                raise IncompatibleStatsError(msg)
            if ostats.detail != stats.detail:
                msg = (f"model {other} keeps {ostats.detail} summaries but {model_path} keeps "
                       f"{stats.detail}; refit one of them with the other's parameters")
                raise IncompatibleStatsError(msg)
            _refuse_merged_before(other, ometa, ostats, meta, lineages, model_path)
            for e in ometa.get("sources", []):
                same = ledger.same_source(entries + added, e)
                if same is not None:
                    msg = (f"model {other} and {model_path} share the source {e['url']} "
                           f"({e['rows']} rows; in {model_path} as {same['url']}); merging would "
                           f"count its rows twice: forget it from one of them first")
                    raise InputError(msg)
                gone = ledger.same_source(meta.get("evicted_sources", []), e)
                if gone is not None:  # as update refuses it: forgotten rows do not come back
                    msg = (f"model {other} holds the source {e['url']} ({e['rows']} rows), which "
                           f"{model_path} dropped before as {gone['url']} (forget, or its "
                           f"window); forget it from {other} first")
                    raise InputError(msg)
                if e.get("id") not in osummaries:
                    msg = (f"model {other} has no per-source summary of {e['url']} (written by "
                           "streamproj 0.1); refit it with this version before merging")
                    raise ModelError(msg)
                sid = ledger.new_id(entries + added)
                origin = e.get("origin") or {"model": store.normalise(other),
                                             "model_id": ometa.get("model_id"),
                                             "version": ometa.get("version")}
                summaries[sid] = osummaries[e["id"]]
                added.append({**e, "id": sid, "origin": origin})
            totals.append(ostats)
            reports.append({"model": str(other), "model_id": ometa.get("model_id"),
                            "version": ometa.get("version"), "rows_merged": ostats.n_samples,
                            "sources": [e["url"] for e in ometa.get("sources", [])]})
            lineages.append(sorted(_lineage(ometa)))
        for other, *_, oparams in loaded:  # (once every model is accepted)
            _say_other_params(other, oparams, model_path, old.get_params())
        new = BoundaryProjector.from_state(record)
        with clock("solve"), _context(str(model_path)):
            new.partial_fit_stats(_merge_all(totals))
        drift = _drift(old, new)
        history = [*meta.get("history", []), {
            "event": "merge", "time": store.timestamp(),
            "models": [{**r, "lineage": ids} for r, ids in zip(reports, lineages, strict=True)],
            "rows_added": int(sum(r["rows_merged"] for r in reports)),
            "n_samples": new.stats_.n_samples, **drift}]
        with clock("write"):
            version = store.write_record(
                model_path, new.to_state().with_meta(**{"sources": entries + added, "history": history,
                                         **_feature_meta(new, meta, []),
                                         **_evicted_meta(meta, [])}),
                base=record.version, summaries=summaries)
    return {"command": "merge", "status": "merged", "model": str(model_path), "version": version,
            "models": reports, "rows_added": int(sum(r["rows_merged"] for r in reports)),
            "n_samples": new.stats_.n_samples, **drift, "drift_deg": _boundary_drift(drift),
            "timings": clock.report(), "versions": _versions(version)}


def _lineage(meta):
    """The model ids whose rows a model holds: its own and every model merged into it, at any depth."""
    ids = {meta.get("model_id")}
    for h in meta.get("history", []):
        if isinstance(h, dict) and h.get("event") == "merge":
            for m in h.get("models", []):
                if isinstance(m, dict):
                    ids.add(m.get("model_id"))
                    ids.update(m.get("lineage") or [])
    ids.discard(None)
    return ids


def _refuse_merged_before(other, ometa, ostats, meta, lineages, model_path):
    """Refuse a model whose rows of no source this model holds already (it, or merged before).

    Rows fitted or added in Python have no ledger entry for :func:`ledger.same_source` to
    find: a copy of the model, or one merged twice, counted them twice, silently. Such
    rows cannot be forgotten, so a model merged before still holds them. Merges are
    followed at any depth (C merged B, then A, which merged B, merges C); ``lineages``:
    those of the models this same merge took already.
    """
    unsourced = ostats.n_samples - sum(int(e["rows"]) for e in ometa.get("sources", []))
    model_id = ometa.get("model_id")
    if not unsourced or not model_id:
        return
    held = _lineage(meta).union(*lineages)
    shared = _lineage(ometa) & held
    if model_id == meta.get("model_id"):
        how = "is the same model (one is a copy of the other)"
    elif model_id in held:
        how = "merged it before"
    elif shared:
        how = f"holds a model it holds too (model id {min(shared)}, merged into both)"
    else:
        return
    msg = (f"model {other} holds {unsourced:,} rows of no source (fitted or added in Python), "
           f"and {model_path} {how}: merging it would count them twice")
    raise InputError(msg)


def _say_other_params(other, theirs, model_path, mine):
    """Warn that a merged model's own solve parameters are not the merged model's.

    The summaries merge exactly whatever the parameters; the merged model is
    solved with ``model_path``'s (shrinkage, priors, centre, ...).
    """
    quiet = ("progress", "chunk_rows", "max_summary_memory")
    differ = [k for k in sorted(mine) if k not in quiet and not _same_param(theirs.get(k), mine[k])]
    if differ:
        shown = ", ".join(f"{k}={_short_repr(theirs.get(k))} (here {_short_repr(mine[k])})"
                          for k in differ)
        msg = (f"model {other} was fitted with {shown}; its summaries merge exactly, and the "
               f"merged model is solved with {model_path}'s parameters")
        warnings.warn(msg, StreamprojWarning, stacklevel=3)


def _short_repr(value, most=60):
    text = " ".join(repr(value).split())  # (a boundary's arrays print over lines)
    return text if len(text) <= most else text[: most - 1] + "…"


def _same_param(a, b):
    """Parameters equal as values (a boundary is a table of arrays and labels)."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(_same_param(a[k], b[k]) for k in a))
    if a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return a is b or (type(a) is type(b) and a == b)
    try:
        x, y = np.asarray(a), np.asarray(b)
        return x.shape == y.shape and bool(np.array_equal(x, y))
    except (TypeError, ValueError):
        return False


# --------------------------------------------------------------- relocate
def relocate_sources(model_path, old, new, outputs=(), verify=False, allow_missing_chunks=False):
    """Tell a model, and outputs, that the sources under ``old`` now lie under ``new``; returns a report.

    Sources are kept by location, so a moved source is otherwise a copy of rows
    held (refused by ``update``, ``project`` and ``run``). Each ledger entry
    under ``old`` is opened at its new place, which must hold its rows: at
    least as many, with the entry's fingerprint (first and last rows, shapes,
    dtypes) and, for a Parquet folder, no file of as many rows with other
    footer statistics, as :func:`ledger.held_rows` checks a held source.
    ``verify`` also re-reads every row range the model merged, as ``update
    --verify`` does. The entry keeps its id, times, batches and summary, and
    takes the new place's URL and file listing, so the next update skips it
    without reading it (and merges only rows it gained since).

    Every check is made, for the model and each output, before anything is
    written; then the model gets a new version whose summaries, solution and
    model id are the old ones bit for bit (its history says what moved where,
    and when), and each output's attributes are swapped in as an append swaps
    them (store.output_group). A ledger holding nothing under ``old`` is left
    as it was (a rerun after a relocation cut short between the model and an
    output finishes the output); none holding anything there is refused.

    Parameters
    ----------
    model_path : str or path-like
    old, new : str or path-like
        Location prefixes: local paths (relative to the working folder, with
        symbolic links resolved as the ledger records them) or URLs. Only
        whole path components match.
    outputs : str or sequence of str, optional
        Outputs whose ledgers to relocate in the same job.
    verify : bool, default False
    allow_missing_chunks : bool, default False
        Open Zarr stores at the new place with missing chunk files read as the
        fill value (as they were merged with ``--allow-missing-chunks``).

    Returns
    -------
    dict
        ``sources`` (each moved entry of the model: ``from``, ``url``,
        ``rows``, ``rows_new``), ``evicted`` (dropped sources renamed),
        ``outputs`` (the same per output) and the model's ``version``.

    Raises
    ------
    InputError
        Nothing lies under ``old``, a source cannot be read at its new place,
        or its new place is another source's.
    SourceChangedError
        A source at its new place does not hold the rows its entry records.
    """
    clock = _Clock()
    outputs = _specs(outputs) if outputs else []
    new_url = store.normalise(new)
    store.check_disjoint(("model", model_path), *[("output", o) for o in outputs])
    with store.model_lock(model_path):
        record, summaries = _read(model_path)
        meta = record.meta
        states = [(out, _relocatable_output(out)) for out in outputs]
        evicted = list(meta.get("evicted_sources") or [])
        old_url = _old_prefix(old, model_path, [record.sources, evicted],
                              [(out, state["attrs"]["sources"]) for out, state in states])
        if old_url == new_url:
            msg = f"{old} and {new} are one location ({new_url}): nothing to relocate"
            raise InputError(msg)
        opened: dict = {}
        with clock("check"):
            entries, moves = _relocate_ledger(record.sources, old_url, new_url,
                                              f"model {model_path}", opened, allow_missing_chunks,
                                              "refit the model from its sources")
            if verify:
                model = BoundaryProjector.from_state(record)
                known = [[_batch_kernel(b, src) for b in entry.get("batches", [])]
                         for entry, _, src in moves]
                for (entry, _, src), kernels in zip(moves, known, strict=True):
                    with _relocating(entry, src):
                        _verify_rows(model, src, entry, kernels, False)
            renamed = [(e, ledger.relocated(e, old_url, new_url)) for e in evicted]
            # a dropped source's listing at its new place (its rows are never merged again, so
            # nothing is read): a nightly run leaves it unopened while an output holds it too
            gone = [{**e, "url": url, "stamp": sources.listing_digest(url, e.get("kind", "zarr"))}
                    if url else e for e, url in renamed]
            plans = [(out, state, *_relocate_ledger(state["attrs"]["sources"], old_url, new_url,
                                                    f"output {out}", opened, allow_missing_chunks,
                                                    f"rewrite {out} with --overwrite"))
                     for out, state in states]
        for _, moved, _ in [*moves, *[m for *_, out_moves in plans for m in out_moves]]:
            # as update checks its inputs: a source's new place must not be the model or an output
            store.check_disjoint(("input", ledger.location(moved)), ("model", model_path),
                                 *[("output", o) for o in outputs])
        for out, _, _, out_moves in plans:
            if out_moves:  # (refused after the model was written, it was relocated alone)
                store.check_output_whole(out)
        now = store.timestamp()
        version = meta["version"]
        with clock("write"):
            if moves or any(url for _, url in renamed):
                history = [*record.history, {
                    "event": "relocate", "time": now, "from": old_url, "to": new_url,
                    "sources": [{"from": e["url"], "to": m["url"]} for e, m, _ in moves],
                    "evicted": [{"from": e["url"], "to": url} for e, url in renamed if url]}]
                fields = {k: v for k, v in meta.items() if k != "version"}  # the store's to set
                # the same summaries, solution and model id: only the ledger and history change
                same = ModelRecord({**fields, "sources": entries, "history": history,
                                    **({"evicted_sources": gone} if gone else {})},
                                   record.stats, record.solution)
                version = store.write_record(model_path, same, base=record.version,
                                             summaries=summaries)
            for out, state, out_entries, out_moves in plans:
                if out_moves:
                    _relocate_output(out, state["attrs"], out_entries, out_moves, old_url,
                                     new_url, now)
    return {"command": "relocate", "status": "relocated", "model": str(model_path),
            "model_status": "relocated" if version != meta["version"] else "unchanged",
            "version": version, "from": old_url, "to": new_url,
            "sources": _moved_report(moves),
            "evicted": [{"from": e["url"], "url": url} for e, url in renamed if url],
            "outputs": [{"output": str(out), "status": "relocated" if m else "unchanged",
                         "sources": _moved_report(m)} for out, _, _, m in plans],
            "timings": clock.report(), "versions": _versions(version)}


def _moved_report(moves):
    return [{"from": e["url"], "url": m["url"], "rows": int(e["rows"]),
             "rows_new": src.n_rows - int(e["rows"])} for e, m, src in moves]


def _relocatable_output(out):
    """The state of an output whose ledger ``relocate`` may rewrite (refused: none, or no ledger)."""
    # what a killed writer left is repaired first (an output between the two renames of a
    # swap is put back), as the model's lock does for the model: also when nothing is moved
    store.tidy_output(out)
    state = _output_state(out)
    if state is None:
        msg = f"no output at {out}; name an existing output with --output, or leave it out"
        raise InputError(msg)
    if state["attrs"].get("sources") is None:
        msg = (f"output {out} records no sources (written from rows in memory, or by streamproj "
               "0.1): there is nothing of it to relocate; leave --output out")
        raise InputError(msg)
    return state


def _old_prefix(old, model_path, model_ledgers, out_ledgers):
    """``old`` normalised as the ledgers record locations; refused when no entry lies under it.

    A local ``old`` is tried with its symbolic links resolved (as sources are
    recorded), then as written, made absolute: a folder moved and replaced by
    a link to its new place resolves to the new place now.
    """
    text = str(old)
    spelled = [store.normalise(text)]
    if store.is_local(text):
        plain = text[len("file://"):] if text.startswith("file://") else text
        spelled.append(os.path.abspath(store.expand_user(plain)))
    every = [e for held in [*model_ledgers, *(h for _, h in out_ledgers)] for e in held]
    for prefix in spelled:
        if any(ledger.relocated(e, prefix, prefix) is not None for e in every):
            return prefix
    holders = " and ".join([f"model {model_path}", *[f"output {o}" for o, _ in out_ledgers]])
    held, every_folder = ledger.prefixes(every), ledger.prefixes(every, n=len(every))
    where = ", ".join(held) + (f" and {len(every_folder) - len(held)} more"
                               if len(every_folder) > len(held) else "")
    msg = (f"{holders} {'hold' if out_ledgers else 'holds'} no source under {spelled[0]} "
           f"(a prefix matches whole folder names): the sources lie under "
           f"{where or 'no folder'}; give OLD as the ledger names them (streamproj info "
           f"{model_path})")
    raise InputError(msg)


@contextlib.contextmanager
def _relocating(entry, src):
    """A refusal of a source's new place becomes one line saying what was not relocated."""
    try:
        yield
    except SourceChangedError as exc:
        msg = f"cannot relocate {entry['url']} to {src.url}: {exc}"
        raise SourceChangedError(msg) from None


def _relocate_ledger(entries, old, new, holder, opened, allow_missing_chunks, redo):
    """``(entries, moves)``: a ledger with its sources under ``old`` moved under ``new``, checked.

    ``moves`` are ``(entry, moved entry, source at the new place)``;
    ``opened`` caches the sources opened (the model's and an output's ledgers
    name the same ones: each is listed and fingerprinted once); ``redo`` is
    what to do when the rows differ (for messages).
    """
    out, moves = [], []
    fix = f"these are not the rows {holder} took: give NEW where they moved unchanged, or {redo}"
    for entry in entries:
        target = ledger.relocated(entry, old, new)
        if target is None:
            out.append(entry)
            continue
        rows = int(entry["rows"])
        if ledger.fingerprint_of(entry) is None:
            msg = (f"cannot relocate {entry['url']}: {holder} records no fingerprint of its "
                   f"{rows} rows (taken from rows in memory), so they cannot be checked at "
                   f"{target}; {redo}")
            raise InputError(msg)
        src = _open_relocated(entry, target, holder, opened, allow_missing_chunks)
        if ledger.key_of({**entry, "url": src.url}) != ledger.key_of(src.key()):
            def read(key):
                return f"{key.get('kind', 'zarr')} X={key.get('x')!r}, labels={key.get('y')!r}"

            msg = (f"cannot relocate {entry['url']} to {target}: it reads there as "
                   f"{read(src.key())}, but {holder} took it as {read(entry)}; give NEW where "
                   f"it moved unchanged, or {redo}")
            raise SourceChangedError(msg)
        with _relocating(entry, src):
            # (its listing is no evidence: every name in it changed; its rows decide)
            ledger.held_rows({**entry, "stamp": None}, src, holder, fix)
        moved = {k: v for k, v in entry.items() if k not in ("files", "file_stats")}
        # the listing taken before the rows were read, and only of a source taken in full: one
        # that grew since has its new rows found, and read, by the next update or append
        full = src.n_rows == rows
        moved.update({**src.key(), "stamp": ledger.stamp(src) if full else None,
                      **(ledger.file_fields(src) if full else _held_file_fields(entry))})
        out.append(moved)
        moves.append((entry, moved, src))
    for _, moved, _ in moves:  # a new place that is (or overlaps) another source's
        others = [e for e in out if e is not moved]
        clash = ledger.find(others, moved) or ledger.overlapping(others, moved)
        if clash is not None:
            msg = (f"cannot relocate to {moved['url']}: {holder} holds {clash['url']}, which "
                   "is or overlaps it, as a source of its own; relocate a narrower OLD, or "
                   "forget one of them first")
            raise InputError(msg)
    return out, moves


def _held_file_fields(entry):
    """A ledger entry's own Parquet ``files`` and ``file_stats`` (those of the rows it holds)."""
    return {k: entry[k] for k in ("files", "file_stats") if k in entry}


def _open_relocated(entry, target, holder, opened, allow_missing_chunks):
    """The source of a ledger ``entry`` opened at ``target`` as it was taken (labels optional)."""
    options = sources.recorded_options(entry, target)
    cache = (target, repr(sorted(options.items())))
    if cache not in opened:
        try:
            (src,) = open_inputs([target], **options, require_y=False,
                                 allow_missing_chunks=allow_missing_chunks)
        except ValueError as exc:  # (StreamprojError is one)
            msg = (f"cannot relocate {entry['url']} ({holder} holds {entry['rows']} rows of it) "
                   f"to {target}: it cannot be read there ({' '.join(str(exc).split())}); move "
                   "it there first, or give NEW where it went")
            raise InputError(msg) from None
        ledger.stamp(src)  # the listing before any row is read (see ledger.record)
        opened[cache] = src
    return opened[cache]


def _relocate_output(out, attrs, entries, moves, old, new, now):
    """Swap in OUT with its ledger moved: a copy of it (hard links) with new attributes, as an append."""
    new_attrs = {**attrs, "sources": entries, "write_id": uuid.uuid4().hex,
                 "history": [*attrs.get("history", []),
                             {"time": now, "action": "relocated", "rows": 0, "from": old,
                              "to": new, "sources": [m["url"] for _, m, _ in moves]}]}
    with store.output_group(out, append=True, expect=attrs.get("write_id"),
                            attrs={"streamproj": new_attrs}):
        pass  # no rows: the attributes are the change, written last with the swap


# ---------------------------------------------------------------- project
def project(model, X, out, y=None, overwrite=False, progress=False, source=None,
            names=("X", "y"), decision=None):
    """Pass 2 from memory or any array: write ``projection`` (n×d), ``predicted``, ``decision`` and ``y``.

    The group is chunked like the input rows and carries the frame (axes,
    centre, classes, the model itself) in its attributes and ``frame``
    subgroup; its arrays have named dimensions and coordinate variables, so
    ``xarray.open_zarr(out)`` gives a labelled dataset. Nothing appears at
    ``out`` unless the whole pass succeeds. Rows given this way are tied to no
    source, so such an output cannot be appended to.
    """
    model._check_fitted()  # refuses an unfitted model before any work
    # parameters set since the fit are solved now, as save does: the frame (to_state) would
    # solve them after the rows were projected with the old solution
    model._solve_as_set("project")
    X = as_dask_rows(X, model.chunk_rows, names[0])
    arrays = projection_arrays(model, X, y, names)
    n = int(arrays["projection"][0].shape[0])
    ranges = None if source is None else [{"url": str(source), "rows": n, "ranges": [[0, n, 0]]}]
    with first_bad_row(X, names[0], getattr(model, "bfloat16", False)):
        _write_full(model, getattr(model, "meta_", None), None, arrays, out, overwrite, decision,
                    progress, ranges)
    return out


def _write_full(model, meta, model_path, arrays, out, overwrite, decision, progress, ranges,
                action="written", srcs=(), empty_ok=False):
    """Write a whole output in ``model``'s frame; returns the model id it records.

    The model id (a hash of the p×p summary: 0.18 s at p = 4,096) is computed
    in a side thread while the pass reads and projects the rows. The frame is
    written after the pass: written beside it, its p×p NPZ sat on top of the
    pass's chunks (+134 MB at p = 4,096) for no time saved (run O in
    docs/bench-results.md). ``ranges`` is the per-source row ranges, or a
    function giving them once the fingerprints of ``srcs`` are known: those
    edge rows are read in the pass's own graph, from chunks it reads anyway.
    ``empty_ok``: an empty folder at ``out`` is filled, as a path with nothing there.
    """
    n = int(arrays["projection"][0].shape[0])
    keep = outputs.wants_decision(model, decision)
    with ThreadPoolExecutor(1, thread_name_prefix="streamproj-model-id") as side:
        # One record (its model_id hashes the p×p summary) for the frame and the attributes.
        pending = side.submit(model.to_state)
        with store.output_group(out, overwrite=overwrite, empty_ok=empty_ok) as group:
            stored, total = outputs.write_arrays(group, arrays, model, keep, compute=False)
            prints = [src.fingerprint_parts(src.n_rows) for src in srcs]
            values = compute_with_progress(
                stored, *[part for parts in prints for part in parts], progress=progress,
                prefix="streamproj-project-", total=total, desc="pass 2: projection",
                optimize_graph=not srcs)  # unfused, the edge rows share the pass's reads
            at = 1
            for src, parts in zip(srcs, prints, strict=True):
                src.set_fingerprint(src.n_rows, values[at:at + len(parts)])
                at += len(parts)
            record = pending.result()
            model_id = record.meta["model_id"]
            if meta is not None:  # a model read from its directory keeps its version and stamp
                record = ModelRecord(meta, record.stats, record.solution)
            store.write_output_frame(group, record)
            # the attributes last: they name the model id and the sources' fingerprints
            group.attrs.update(outputs.frame_attrs(
                model, meta, model_path, ranges() if callable(ranges) else ranges, n, keep,
                action, model_id=model_id))
    return model_id


def _source_ranges(srcs, stamps, out_path):
    """OUT's record of the rows of ``srcs``; ``stamps``: their file listings, taken before the rows were read."""
    _refuse_copies(srcs, f"output {out_path}")  # (their fingerprints: from the pass just made)
    out, at = [], 0
    for src, stamp in zip(srcs, stamps, strict=True):
        out.append({**_entry_of(src), "stamp": stamp, "merged": store.timestamp(),
                    "ranges": [[0, src.n_rows, at]], **ledger.file_fields(src)})
        at += src.n_rows
    return out


def _output_state(out):
    """The attributes and frame model of an existing output; None when nothing is there."""
    if store.is_local(out) and not store.local_path(out).exists():
        return None
    try:
        group = store.open_output(out, missing_ok=True)  # (None: nothing on an object store yet)
    except StreamprojError:
        folder = store.local_path(out) if store.is_local(out) else None
        if folder is not None and folder.is_dir() and not any(folder.iterdir()):
            return None  # an empty folder
        raise
    if group is None:
        return None
    attrs = group.attrs.asdict()
    store.check_ledger(attrs["streamproj"].get("sources"), f"{out}/zarr.json", "sources",
                       InputError)
    frame = store.read_output_frame(group, str(out))
    names = [n for n in store.PROJECTION_NAMES if n in group]
    return {"attrs": attrs["streamproj"], "frame": frame, "arrays": set(group.array_keys()),
            "rows": int(group[names[0]].shape[0])}


def project_model(model_path, inputs, out, x="X", y="y", overwrite=False, progress=False,
                  allow_missing_chunks=False, features=None, label=None, mode="rewrite",
                  reproject_above=None, decision=None, require_y=False):
    """Project inputs with a saved model into a Zarr output; returns a report.

    ``mode``: ``"rewrite"`` writes OUT in full (``overwrite`` to replace it);
    ``"append"`` adds only rows OUT does not hold yet, in OUT's own frame —
    unless the model has moved more than ``reproject_above`` degrees from that
    frame, then OUT is rewritten in the model's frame; ``"auto"`` is append
    with ``reproject_above`` defaulting to :data:`DEFAULT_REPROJECT_DEGREES`.
    ``require_y``: refuse an input without its labels (by default OUT is then
    written without ``y``).
    """
    clock = _Clock()
    if mode not in ("rewrite", "append", "auto"):
        msg = f"output mode must be 'rewrite', 'append' or 'auto'; got {mode!r}"
        raise InputError(msg)
    if mode == "auto" and reproject_above is None:
        reproject_above = DEFAULT_REPROJECT_DEGREES
    with _context(str(model_path)):
        record = store.read_record(model_path)
    meta = record.meta
    model = BoundaryProjector.from_state(record)
    with clock("open"):
        srcs = open_inputs(inputs, x, y, features, label, require_y, allow_missing_chunks,
                           _model_columns(meta))
    store.check_disjoint(*[("input", _location(s)) for s in srcs], ("model", model_path),
                         ("output", out))
    store.check_replaceable(out)  # (output_group checks too, inside the input's error context)
    store.restore_interrupted(out)  # before OUT's state is read (an append plans from it)
    srcs = _match_columns(srcs, model, model_path, meta.get("sources"))
    for src in srcs:
        _check_features(src, model, model_path)
    if mode != "rewrite":
        # (opening it said only "no Zarr group at OUT"); named as the command line and a
        # Python caller ask for it (the command line's --append is mode="append")
        how = "--append (mode='append')" if mode == "append" else f"mode={mode!r}"
        store.refuse_foreign_append(out, how)
    state = None if mode == "rewrite" else _output_state(out)
    reason, drift = None, None
    if state is not None:
        frame, drift, reason = _output_plan(state, model, out, reproject_above)
        if frame is not None:
            _say_decision_kept(state, decision, out)
            report = _append(state, frame, srcs, out, progress, clock)
            return {**_project_base(model.model_id_, model_path, out, model), **report,
                    "drift_deg": drift, "frame_model_id": frame.model_id_,
                    "frame_version": state["attrs"].get("model_version"),
                    "timings": clock.report(), "versions": _versions(meta["version"])}
    if state is not None and state["attrs"].get("sources"):
        # a rewrite in the new frame holds every row OUT held, not just this run's inputs
        srcs = _with_held_sources(state, srcs, out, model, model_path, allow_missing_chunks,
                                  meta.get("sources"))
    X, Y, names = outputs.concat_rows([(s, 0) for s in srcs], model.classes_)
    with clock("pass2"), _context(srcs[0].spec if len(srcs) == 1 else str(out),
                                  _named_columns(srcs[0]) if len(srcs) == 1 else None):
        arrays = projection_arrays(model, X, Y, names)
        action = "rewritten" if state is not None else "written"
        # The listings before the rows are read: a source rewritten during the pass then
        # differs from its record, and the next append checks its rows (SourceChangedError).
        stamps = [ledger.stamp(src) for src in srcs]
        # append and auto take an empty folder as nothing there (_output_state): they start
        # OUT in it, as at a path with nothing; --overwrite was refused beside --append
        with first_bad_row(X, names[0], getattr(model, "bfloat16", False)):
            model_id = _write_full(model, meta, model_path, arrays, out,
                                   overwrite or state is not None, decision, progress,
                                   lambda: _source_ranges(srcs, stamps, out), action, srcs,
                                   empty_ok=mode != "rewrite")
    return {**_project_base(model_id, model_path, out, model), "status": "projected",
            "output_action": action, "reason": reason,
            "arrays": outputs.written_names(arrays, outputs.wants_decision(model, decision)),
            "rows": int(X.shape[0]), "rows_written": int(X.shape[0]), "drift_deg": drift,
            "sources": [{"url": s.url, "rows_written": s.n_rows, "rows_skipped": 0} for s in srcs],
            "timings": clock.report(), "versions": _versions(meta["version"])}


def _output_plan(state, model, out, reproject_above,
                 fix="rewrite it once with --overwrite (or allow it with --reproject-above DEGREES)"):
    """What projecting ``model`` does to the existing OUT whose ``state`` is given.

    Returns ``(frame, drift, reason)``: OUT's frame when the rows are appended
    in it, else None and why OUT is rewritten in the model's frame.

    Raises
    ------
    OutputExistsError
        OUT can be neither appended to nor, under ``reproject_above``, rewritten.
    """
    if state["frame"] is None or state["attrs"].get("sources") is None:
        reason = "OUT records no frame or source rows (written by streamproj 0.1 or from memory)"
        drift = float("inf")
    elif not all(map(ledger.fingerprint_of, state["attrs"]["sources"])):
        # jobs.project(..., source=...) names its rows' source but could not fingerprint it
        reason = "OUT was written from rows in memory: its sources' rows cannot be checked"
        drift = float("inf")
    else:
        frame = BoundaryProjector.from_state(state["frame"])
        drift, reason = _frame_drift(frame, model)
    if reproject_above is not None and drift > reproject_above:
        return None, drift, reason or (f"the model moved {drift:.4g}° from OUT's frame "
                                       f"(> {reproject_above:g}°)")
    if reason is not None:
        msg = f"cannot append to {out}: {reason}; {fix}"
        raise OutputExistsError(msg)
    return frame, drift, None


def _with_held_sources(state, srcs, out, model, model_path, allow_missing_chunks,
                       model_sources=None,
                       replace="replace {out} with --overwrite (without --append)"):
    """The sources OUT records (reopened, in OUT's order) followed by the new ones in ``srcs``.

    A recorded source that cannot be read any more is refused in one line: a
    rewrite without it would drop the rows OUT holds of it.
    """
    given = {ledger.key_of(s.key()): s for s in srcs}
    out_srcs = []
    for entry in state["attrs"]["sources"]:
        src = given.pop(ledger.key_of(entry), None)
        if src is None:
            try:
                (src,) = open_inputs([entry["url"]], **sources.recorded_options(entry),
                                     require_y=False, allow_missing_chunks=allow_missing_chunks)
            except (StreamprojError, ValueError) as exc:
                msg = (f"cannot rewrite {out} in the model's frame: it holds {entry['rows']} rows "
                       f"of {entry['url']}, which cannot be read now ({exc}); give that input "
                       f"too, or {replace.format(out=out)}")
                raise InputError(msg) from None
            if src.n_rows < int(entry["rows"]):
                msg = (f"cannot rewrite {out} in the model's frame: {entry['url']} has "
                       f"{src.n_rows} rows but {out} holds {entry['rows']} of it")
                raise InputError(msg)
            (src,) = _match_columns([src], model, model_path, model_sources)
            _check_features(src, model, model_path)
        out_srcs.append(src)
    return out_srcs + [s for s in srcs if ledger.key_of(s.key()) in given]


def _say_decision_kept(state, decision, out, asked=None):
    """Warn when an append is asked for ``decision`` (or not) and OUT keeps what it was written with.

    The appended rows get the arrays OUT has: ``--decision`` onto an output
    written without it added none, without a word. ``asked``: how the
    request is named (default: the command line's flag).
    """
    held = "decision" in state["arrays"]
    if decision is None or bool(decision) == held:
        return
    flag = "--decision" if decision else "--no-decision"
    what = (f"{out} was written without decision, and an append adds none" if not held else
            f"{out} holds decision, and an append writes it for the new rows too")
    msg = f"{asked or flag}: {what}; rewrite {out} once with --overwrite {flag}"
    warnings.warn(msg, StreamprojWarning, stacklevel=3)


def _project_base(model_id, model_path, out, model):
    return {"command": "project", "output": str(out), "model": str(model_path),
            "model_id": model_id, "n_components": int(model.components_.shape[0])}


def _plan_append(state, srcs, out, clock, fix=None):
    """``(source, first row OUT lacks, OUT's entry)`` for each source with rows OUT lacks, and reports.

    ``fix``: what a refusal offers (default: the command line's ``--overwrite``).
    """
    held = state["attrs"]["sources"]
    parts, reports = [], []
    fix = fix or f"rewrite {out} with --overwrite"
    for src in srcs:
        entry = ledger.find(held, src.key())
        if entry is None:
            _refuse_overlap(held, src, f"whose rows output {out} holds")
        with clock("check"):
            start = ledger.held_rows(entry, src, f"output {out}", fix)
        reports.append({"url": src.url, "rows_written": src.n_rows - start, "rows_skipped": start})
        if start < src.n_rows:
            parts.append((src, start, entry))
    return parts, reports


def _refuse_missing_labels(state, parts, out, fix=None):
    """An OUT that holds labels takes no rows without them (``parts``: :func:`_plan_append`'s)."""
    lacking = next((s for s, _, _ in parts if s.y is None), None)
    if "y" in state["arrays"] and lacking is not None:
        msg = (f"{out} holds labels (y) but {lacking.names[1]} is missing; give the label "
               f"array or column, or {fix or f'rewrite {out} with --overwrite'}")
        raise InputError(msg)


def _append(state, frame, srcs, out, progress, clock, in_one_pass=None):
    """Append the rows of ``srcs`` that OUT does not hold, in OUT's frame (``frame``).

    ``in_one_pass``: instead of computing the projection, hand its lazy store
    (and chunk count) to this callable, which computes it with other graphs
    over the same rows before the new output is swapped in, and refuses
    copies of OUT's sources (:func:`_refuse_appended_copies`) once their
    fingerprints are read.
    """
    attrs = state["attrs"]
    held = [dict(e) for e in attrs["sources"]]
    parts, reports = _plan_append(state, srcs, out, clock)
    n_old = state["rows"]
    if not parts:
        store.tidy_output(out)  # a job killed after its swap left the old copy behind
        return {"status": "projected", "output_action": "unchanged", "rows": n_old,
                "rows_written": 0, "sources": reports}
    X, Y, names = outputs.concat_rows([(s, a) for s, a, _ in parts],
                                      frame.classes_ if "y" in state["arrays"] else None)
    _refuse_missing_labels(state, parts, out)
    listings = {id(src): ledger.stamp(src) for src, _, _ in parts}  # before the rows are read
    def grown_attrs():
        """OUT's attributes once it holds the new rows (records their sources' fingerprints)."""
        sources, at = [dict(e) for e in held], n_old
        for src, start, entry in parts:
            grown = ledger.record(src, src.n_rows, previous=entry, listing=listings[id(src)])
            grown["ranges"] = [*(entry or {}).get("ranges", []), [start, src.n_rows, at]]
            grown.update(ledger.rows_fields(src, src.n_rows))
            grown.pop("batches", None)
            at += src.n_rows - start
            if entry is None:
                sources.append(grown)
            else:
                sources[sources.index(entry)] = grown
        now = store.timestamp()
        return {**attrs, "sources": sources, "rows": at, "written": now,
                "write_id": uuid.uuid4().hex,
                "history": [*attrs.get("history", []),
                            {"time": now, "action": "appended", "rows": at - n_old}]}

    # in one pass the fingerprints come from that pass's reads: OUT's attributes are
    # written after it (the copy is marked incomplete until then, as always)
    if in_one_pass is None:  # (in one pass, the caller refuses copies, before the model is written)
        _refuse_appended_copies(held, parts, out)
    new_attrs = grown_attrs() if in_one_pass is None else attrs
    columns = _named_columns(parts[0][0]) if len(parts) == 1 else None  # "(column b)", not 1
    with (clock("pass2"), _context(str(out), columns),
          first_bad_row(X, names[0], getattr(frame, "bfloat16", False))):
        arrays = projection_arrays(frame, X, Y if "y" in state["arrays"] else None, names)
        with store.output_group(out, append=True, expect=attrs.get("write_id"),
                                attrs={"streamproj": new_attrs}) as group:
            lazy = outputs.write_arrays(group, arrays, frame, "decision" in state["arrays"],
                                        progress, append_at=n_old,
                                        compute=in_one_pass is None)
            if in_one_pass is not None:
                in_one_pass(*lazy)
                new_attrs = grown_attrs()
                group.attrs["streamproj"] = new_attrs
    at = new_attrs["rows"]
    report = {"status": "projected", "output_action": "appended", "rows": at,
              "rows_written": at - n_old, "sources": reports}
    if Y is not None and "y" not in state["arrays"]:
        report["labels_not_stored"] = True  # OUT was written without y: said, not dropped silently
    return report


# ------------------------------------------------------------------- info
def refuse_nothing_to_describe(path):
    """Refuse a local ``path`` that can be neither a model nor an output, saying what info reads.

    The model reader's "no model at PATH: fit one there first" advised fitting to
    someone who may have mistyped an output's path.
    """
    if not store.is_local(path):
        return  # a remote location's readers say what they found there
    kind = store.local_kind(path)
    held = store.foreign_folder(path)
    if held is not None:
        # the model reader said only "no CURRENT file": not what the folder is
        what = (f"{path} is neither a streamproj model directory (no CURRENT file) nor an "
                f"output ({held})")
    elif kind in ("absent", "empty"):
        what = f"nothing at {path}" if kind == "absent" else f"{path} is an empty folder"
    elif store.local_path(path).is_file():
        what = f"{path} is a file"  # (the model reader's "not a streamproj model directory")
    else:
        return  # a model or an output: its reader says what is wrong
    msg = (f"{what}: info describes a streamproj model directory (written by 'streamproj fit' "
           "or save()) or an output (written by 'streamproj project')")
    raise InputError(msg)


def model_info(model_path):
    """The JSON-ready description of a saved model."""
    (meta, stats, solution), summaries = store.read_record_and_summaries(model_path)
    info = {k: meta.get(k) for k in ("model_id", "version", "streamproj_version", "saved",
                                     "classes", "counts", "n_features", "n_components",
                                     "summary_detail")}
    info["kind"] = "model"
    info["n_samples"] = stats.n_samples
    params = meta.get("params", {})
    info["shrinkage"] = params.get("shrinkage")
    info["center"] = params.get("center")
    coef = solution["coef"]
    info["boundary"] = {
        "source": "LDA" if params.get("boundary") is None else params["boundary"].get("source"),
        "coef": coef.tolist(),
        "intercept": solution["intercept"].tolist(),
        "unit_normal": (coef[0] / np.linalg.norm(coef[0])).tolist() if coef.shape[0] == 1 else None,
    }
    info["components"] = solution["components"].tolist()
    info["center_point"] = solution["center"].tolist()
    info["sources"] = [{k: v for k, v in s.items() if k not in ("edges", "stamp")}
                       for s in meta.get("sources", [])]
    info["per_source_summaries"] = len(summaries)
    info["history"] = meta.get("history", [])
    return info


def output_info(out, model_path=None):
    """The JSON-ready description of an output: its frame, rows per source, and drift to the model.

    The model is ``model_path``, else the one the output records; drift is
    None when that model cannot be read.
    """
    state = _output_state(out)
    if state is None:
        msg = f"no output at {out}"
        raise InputError(msg)
    attrs = state["attrs"]
    info = {"kind": "output", "output": str(out), "rows": state["rows"],
            "arrays": sorted(state["arrays"]),
            "frame": {"model_id": attrs.get("model_id"), "model_version": attrs.get("model_version"),
                      "model_path": attrs.get("model_path"), "classes": attrs.get("classes"),
                      "center_mode": attrs.get("center_mode"), "written": attrs.get("written")},
            "sources": [{"url": s.get("url"), "rows": s.get("rows"), "ranges": s.get("ranges")}
                        for s in attrs.get("sources") or []],
            "history": attrs.get("history", [])}
    path = model_path or attrs.get("model_path")
    info["model"] = {"path": path, "version": None, "drift_deg": None}
    if path and state["frame"] is not None:
        try:
            current = load(path)
        except StreamprojError as exc:
            info["model"]["error"] = str(exc)
        else:
            drift, why = _frame_drift(BoundaryProjector.from_state(state["frame"]), current)
            info["model"].update({"version": current.meta_["version"], "model_id": current.model_id_,
                                  "drift_deg": None if why else drift, "incompatible": why})
    return info


def is_output(path):
    """True when ``path`` holds a streamproj output (a Zarr group) rather than a model directory."""
    try:
        store.open_output(path)
    except StreamprojError:
        # a damaged or unfinished output is still an output: its reader says what is wrong
        return store.looks_like_output(path)
    return True


def model_exists(model_path):
    """True when ``model_path`` holds a readable model."""
    return store.model_exists(model_path)


# -------------------------------------------------------------------- run
def _check_job_paths(config):
    """No location of a job may overlap another it writes (named by config key)."""
    inp, mod, out = config.input, config.model, config.output
    with _context(config.source):
        written = (("[model] path", mod.path), ("[output] path", out.path))
        store.check_disjoint(*[("[input] paths", p) for p in inp.paths],
                             ("[model] boundary", mod.boundary), *written)
        if mod.path is not None:  # (the output's is checked above)
            store.check_not_held(mod.path, "[model] path")
        # (not against [input]: projecting the rows the model was fitted on is the default)
        store.check_disjoint(*[("[output] input", p) for p in (out.inputs or [])],
                             ("[model] boundary", mod.boundary), *written, held=False)
        # a glob over the inputs' folder may come to match what the job writes there
        for role, target in (("[model] path", mod.path), ("[output] path", out.path)):
            if target is None or not store.is_local(target):
                continue
            real = os.path.realpath(store.local_path(target))
            for pattern in [*inp.paths, *(out.inputs or [])]:
                # an HDF5 pattern matches files: its dataset path (':/X') is no part of them
                full = os.path.realpath(store.local_path(sources.split_dataset(pattern)[0]))
                if any(c in str(pattern) for c in "*?[") and fnmatch.fnmatch(real, full):
                    msg = (f"[input] paths pattern {pattern} matches the {role} {target}: a "
                           "later run would read it as an input; narrow the pattern or move it")
                    raise InputError(msg)
        # refused before the model step, so a bad [output] path changes nothing
        if out.path is not None and out.mode != "rewrite":
            store.refuse_foreign_append(out.path, f'[output] mode = "{out.mode}"',
                                        f"[output] path {out.path}")
        kind, held = (store.local_state(out.path)
                      if out.path is not None and store.is_local(out.path) else (None, None))
        if kind == "foreign":  # said with what is there, as an append's refusal says it
            msg = (f"[output] path {out.path} exists and is not a streamproj output ({held}); it "
                   "is never replaced: choose another output")
            raise OutputExistsError(msg)
        if out.path is not None and out.mode == "rewrite" and not out.overwrite and (
                store.local_kind(out.path) != "absent" if store.is_local(out.path)
                else _output_state(out.path) is not None):
            msg = (f"[output] path {out.path} exists and [output] overwrite is false: set "
                   'overwrite = true to write it afresh each run, or mode = "append" (or '
                   '"auto") to add each run\'s new rows')
            raise OutputExistsError(msg)


@contextlib.contextmanager
def _input_key_named(config):
    """An input error of a job is said with its config file and key, not a command-line flag.

    An ``[input] paths`` entry that matches nothing (not checked before the model
    step as ``[output] input`` is: that would list every source twice a night);
    a missing array, column or label, whose message (shared with the command
    line) says which flag names it: the ``[input]`` key does in a job.
    """
    try:
        yield
    except InputError as exc:
        text = str(exc)
        if text.startswith(("no input matches ", "no such input: ")):
            msg = f"{config.source}: [input] paths: {exc}"
            raise InputError(msg) from None
        keyed = _INPUT_FLAGS.sub(lambda m: _INPUT_KEYS[m.group(1)], text)
        if keyed == text:
            raise
        msg = keyed if keyed.startswith(str(config.source)) else f"{config.source}: {keyed}"
        raise InputError(msg) from None


# the command line's flags for the [input] keys, as the sources' messages name them; a flag
# stands alone (after a space, '(' or '/': "--features/--label"), never inside a path's or a
# column's name ("day--x.zarr", "'run--label'"), which the message quotes as given
_INPUT_KEYS = {"x/--y": "[input] x and y", "x": "[input] x", "y": "[input] y",
               "label": "[input] label", "features": "[input] features"}
_INPUT_FLAGS = re.compile(r"(?<![\w.'\"-])--(x/--y|x|y|label|features)(?![\w.-])")


def _check_output_inputs(config):
    """Each ``[output] input`` exists, checked before the model step writes the model."""
    for spec in config.output.inputs or []:
        options = None if store.is_local(spec) else store.storage_options(spec)
        with _context(f"{config.source}: [output] input"), _unreadable(spec):
            sources.check_exists(spec, options)


def _fit_params(model):
    """The estimator parameters of a ``[model]`` section, as given."""
    return {"n_components": model.n_components, "shrinkage": model.shrinkage,
            "center": model.center, "boundary": model.boundary,
            "keep_class_scatter": model.keep_class_scatter}


def _say_kept_params(config):
    """Warn of ``[model]`` parameters an update does not apply: the model keeps those it was fitted with.

    Only keys set away from their default (a key left out reads as its
    default, which says nothing of the model's); a boundary file is not
    compared. An edited ``shrinkage`` or ``n_components`` was ignored without
    a word, night after night.
    """
    meta = store.read_model_meta(config.model.path)
    theirs = (meta or {}).get("params")
    if not isinstance(theirs, dict):
        return
    defaults = {f.name: f.default for f in dataclasses.fields(config.model)}
    for key, value in _fit_params(config.model).items():
        if key == "boundary" or key not in theirs or _same_param(value, defaults[key]):
            continue
        if not _same_param(value, theirs[key]):
            msg = (f"{config.source}: [model] {key} = {_short_repr(value)}, but model "
                   f"{config.model.path} was fitted with {_short_repr(theirs[key])}, which an "
                   'update keeps; refit it (mode = "fit") to change it')
            warnings.warn(msg, StreamprojWarning, stacklevel=3)


def check_config(config):
    """Check what a job config gives the estimator and the ledger; errors name the file and key.

    The config itself checks only the form of its keys; this runs the
    estimator's own check (:func:`~streamproj.estimator.check_params`) on the
    ``[model]`` parameters, whatever the job's mode, before anything is read.
    """
    try:
        check_params(_fit_params(config.model))
    except InvalidParameterError as exc:
        where = f"{config.source}: [model] {exc.parameter}"
        raise exc.relabel(where) from None
    if config.model.max_age is not None:
        ledger.parse_age(config.model.max_age, f"{config.source}: [model] max_age")
    if config.model.boundary is not None:  # read now: its errors name the key, not the file only
        try:
            store.read_boundary(config.model.boundary)
        except InputError as exc:
            msg = f"{config.source}: [model] boundary: {exc}"
            raise InputError(msg) from None


def _output_guard(config, state=None):
    """A check for a job's model step: whether the project step after it can write OUT.

    That step appends to OUT in its frame, rewrites OUT in the new model's
    frame when the model moved past ``reproject_above_degrees`` (or OUT has
    no frame), reading again every source OUT holds, or refuses. Each of its
    refusals (a held source changed or gone, labels missing, a copy, an OUT
    it can neither append to nor rewrite) is checked with the solved model
    before the model's new version is written, so that it leaves the model
    and OUT as they were. None when OUT is written afresh or does not exist.
    ``state``: OUT's :func:`_output_state` where the caller read it already
    (a nightly run's one pass, which appends from that same state).
    """
    inp, out = config.input, config.output
    if not out.path or out.mode == "rewrite":
        return None
    state = _output_state(out.path) if state is None else state
    if state is None:
        return None
    threshold = _reproject_threshold(out)
    fix = ('write it afresh once ([output] mode = "rewrite", overwrite = true), or allow '
           "that with [output] reproject_above_degrees")

    def check(model, entries, srcs):
        store.check_output_whole(out.path)  # (OUT is written after the model: refused first)
        try:
            _check_output_follows(model, entries, srcs)
        except StreamprojError as exc:
            msg = f"model {config.model.path} left as it was: {exc}"
            raise type(exc)(msg) from None

    def _check_output_follows(model, entries, srcs):
        frame, _, _ = _output_plan(state, model, out.path, threshold, fix)
        if out.inputs:
            names = getattr(model, "feature_names_in_", None)
            meta = {"sources": entries, "feature_names": None if names is None else list(names)}
            srcs = open_inputs(out.inputs, inp.x, inp.y, inp.features, inp.label, False,
                               inp.allow_missing_chunks, _model_columns(meta))
        srcs = list(srcs)
        if frame is not None:  # appended: what the append refuses, refused now
            afresh = f'write {out.path} afresh ([output] mode = "rewrite", overwrite = true)'
            parts, _ = _plan_append(state, srcs, out.path, _Clock(), afresh)
            _refuse_missing_labels(state, parts, out.path, afresh)
            _refuse_appended_copies(state["attrs"]["sources"], parts, out.path)
        elif state["attrs"].get("sources"):
            _with_held_sources(state, srcs, out.path, model, config.model.path,
                               inp.allow_missing_chunks, entries,
                               'write {out} afresh ([output] mode = "rewrite", overwrite = true)')

    return check


def _update_and_append(config, progress, max_summary_memory, clock, common):
    """A nightly step in one read of the new rows: update the model and append them to OUT.

    OUT's frame is fixed before the pass, so the new rows' summaries and their
    projection are one Dask computation: each chunk is read and decompressed
    once for both. The model is committed first, then OUT is swapped in; a kill
    between the two leaves a model that holds rows OUT lacks, which the next
    run appends. Falls back to :func:`update_model` (and the job's project
    step) when OUT does not exist or cannot take exactly the model's new rows
    (a frame past the threshold, an output behind the model).

    Returns
    -------
    list of dict
        The update's report, and the projection's when it was done here.
    """
    inp, mod, out = config.input, config.model, config.output
    state = _output_state(out.path)
    done = None
    if state is not None and state["frame"] is not None and state["attrs"].get("sources"):
        with clock("open"):
            meta = store.read_model_meta(mod.path)
            # held unchanged by the model (or dropped by it) and by OUT: not opened
            held = [_held_by_model(meta), state["attrs"]["sources"]] if meta else []
            srcs, skipped = _open_changed(inp.paths, inp.x, inp.y, inp.features, inp.label, True,
                                          inp.allow_missing_chunks, _model_columns(meta), held)
        store.check_disjoint(*[("input", _location(s)) for s in srcs], ("model", mod.path),
                             ("output", out.path))
        with store.model_lock(mod.path):
            done = _one_pass(config, state, srcs, progress, max_summary_memory, clock, skipped)
    if done is None:
        return [update_model(mod.path, inp.paths, progress=progress, keep_last=mod.keep_last,
                             max_age=mod.max_age, max_summary_memory=max_summary_memory,
                             before_write=_output_guard(config), **common)]
    # (the model just written, as solved in memory: not read and solved again)
    update, appended, frame, model = done
    _say_decision_kept(state, out.decision, out.path,
                       f"{config.source}: [output] decision = {str(out.decision).lower()}")
    for at, (_, held) in skipped:  # OUT's report names the stores left unopened too
        appended["sources"].insert(at, {"url": held["url"], "rows_written": 0,
                                        "rows_skipped": int(held["rows"])})
    drift, _ = _frame_drift(frame, model)  # to the model as it is now, as project reports
    project = {**_project_base(model.model_id_, mod.path, out.path, model), **appended, "drift_deg": drift,
               "frame_model_id": frame.model_id_,
               "frame_version": state["attrs"].get("model_version"),
               "one_read": bool(appended.get("rows_written")),
               "timings": clock.report(), "versions": _versions(update["version"])}
    return [update, project]


def _reproject_threshold(out):
    """Degrees past which a job rewrites OUT in the model's frame (None: never), per ``[output]``."""
    if out.mode == "auto" and out.reproject_above_degrees is None:
        return DEFAULT_REPROJECT_DEGREES
    return out.reproject_above_degrees


def _one_pass(config, state, srcs, progress, max_summary_memory, clock, skipped=()):
    """:func:`_update_and_append`'s work under the model's lock; None when it cannot be one pass."""
    mod, out = config.model, config.output
    frame = BoundaryProjector.from_state(state["frame"])
    plan = _plan_update(mod.path, srcs, False, progress, clock, skipped)
    old = plan["old"]
    drift, reason = _frame_drift(frame, old)
    threshold = _reproject_threshold(out)
    if reason is not None or (threshold is not None and drift > threshold):
        return None  # OUT is rewritten (or refused) anyway: nothing to share
    parts, _ = _plan_append(state, srcs, out.path, clock)
    if not plan["work"] and not parts and mod.keep_last is None and mod.max_age is None:
        # nothing new to either: both unchanged here (two steps opened every source again)
        update, model = _commit_update(mod.path, plan, [], srcs, None, None, clock)
        return update, _append(state, frame, srcs, out.path, progress, clock), frame, model
    if not plan["work"] or ([(id(s), a) for s, _, a in plan["work"]]
                            != [(id(s), a) for s, a, _ in parts]):
        return None  # nothing new for the model, or OUT is behind it: two steps
    lazies = [_summary_lazy(src, start, old.summary_detail(), max_summary_memory, old.bfloat16,
                            old.stats_.n_classes)
              for src, _, start in plan["work"]]
    # the ledgers record each source's fingerprint at its new length: its edge rows
    # come from the chunks this pass reads anyway
    prints = [src.fingerprint_parts() for src, _, _ in plan["work"]]
    reports = {}

    def both(stored, _n_chunks):
        with clock("pass1+2"):
            values = compute_with_progress(
                *[lazy for lazy, _ in lazies], *[a for edges in prints for a in edges], stored,
                progress=progress, prefix="streamproj-summary-",
                total=sum(n for _, n in lazies), desc="one pass: summaries and projection",
                optimize_graph=False)
        results, at = values[:len(lazies)], len(lazies)
        for (src, _, _), edges in zip(plan["work"], prints, strict=True):
            src.set_fingerprint(None, values[at:at + len(edges)])
            at += len(edges)
        batches = [_finish(src, r)
                   for (src, _, _), r in zip(plan["work"], results, strict=True)]
        # both ledgers before the model is written: a refusal then leaves both as they were
        _refuse_new_copies(plan, mod.path)
        _refuse_appended_copies(state["attrs"]["sources"], parts, out.path)
        reports["update"], reports["model"] = _commit_update(
            mod.path, plan, batches, srcs, mod.keep_last, mod.max_age, clock,
            _output_guard(config, state))

    appended = _append(state, frame, srcs, out.path, progress, clock, in_one_pass=both)
    return reports["update"], appended, frame, reports["model"]


def run_job(config, progress=None, max_summary_memory=None):
    """A whole scheduled job from a :class:`~streamproj.config.JobConfig`: fit or update, then project.

    Returns one report: ``steps`` (the fit/update and project reports),
    ``drift_deg`` and ``alert`` (a message when the boundary moved more than
    ``[run] alert_above_degrees``).
    """
    check_config(config)
    check_params({"max_summary_memory": max_summary_memory})  # from the caller, not the config
    clock = _Clock()
    show = config.run.progress if progress is None else progress
    inp, mod, out = config.input, config.model, config.output
    if out.path:  # before OUT's state is read (the checks and the append plan from it)
        store.restore_interrupted(out.path)
    _check_job_paths(config)
    _check_output_inputs(config)
    if out.path:  # before the model step: it commits the model, and OUT must follow
        store.check_output_reachable(out.path)
        if out.mode == "rewrite":  # (rewritten whatever the model step does; else _output_guard)
            store.check_output_whole(out.path)
    if config.dask.slurm is not None and config.dask.scheduler is None:
        require_sbatch(config.source)
    if config.dask.scheduler is not None or config.dask.slurm is not None:
        # a cluster takes up to its timeout to reach (minutes to start under slurm): an input
        # that is not there is said first (one listing more, worth it only here)
        with _input_key_named(config):
            for spec in inp.paths:
                options = None if store.is_local(spec) else store.storage_options(spec)
                with _unreadable(spec):
                    sources.check_exists(spec, options)
    steps = []
    common = {"x": inp.x, "y": inp.y, "features": inp.features, "label": inp.label,
              "allow_missing_chunks": inp.allow_missing_chunks}
    with dask_cluster(config.dask.scheduler, config.dask.slurm, config.dask.timeout):
        mode = mod.mode
        if mode == "auto":
            mode = "update" if model_exists(mod.path) else "fit"
        if mode == "update":
            _say_kept_params(config)
        with clock("model"), _input_key_named(config):
            if mode == "fit":
                params = {**_fit_params(mod), "max_summary_memory": max_summary_memory}
                steps.append(fit_model(inp.paths, mod.path, params=params,
                                       overwrite=mod.mode == "fit", progress=bool(show),
                                       keep_last=mod.keep_last, max_age=mod.max_age,
                                       before_write=_output_guard(config), **common))
            elif out.path and out.mode != "rewrite" and not out.inputs:
                steps.extend(_update_and_append(config, bool(show), max_summary_memory, clock,
                                                common))
            else:
                steps.append(update_model(mod.path, inp.paths, progress=bool(show),
                                          keep_last=mod.keep_last, max_age=mod.max_age,
                                          max_summary_memory=max_summary_memory,
                                          before_write=_output_guard(config), **common))
        if out.path and len(steps) == 2 and steps[1].get("output_action") == "appended":
            threshold = _reproject_threshold(out)
            if threshold is not None and steps[1]["drift_deg"] > threshold:
                # the update moved the model past the threshold: rewritten as project would
                with clock("project"), _input_key_named(config):
                    again = project_model(mod.path, inp.paths, out.path, progress=bool(show),
                                          mode=out.mode,
                                          reproject_above=out.reproject_above_degrees,
                                          decision=out.decision, **common)
                if again["output_action"] == "rewritten":
                    steps[1] = again
        elif out.path and len(steps) == 1:  # (two steps: the one pass projected already)
            with clock("project"), _input_key_named(config):
                steps.append(project_model(mod.path, out.inputs or inp.paths, out.path,
                                           overwrite=out.overwrite,
                                           progress=bool(show), mode=out.mode,
                                           reproject_above=out.reproject_above_degrees,
                                           decision=out.decision, **common))
    drift = steps[0].get("drift_deg")
    report = {"command": "run", "config": config.source, "status": "ok", "steps": steps,
              "drift_deg": drift, "alert": None, "timings": clock.report(),
              "versions": _versions(steps[0].get("version"))}
    threshold = config.run.alert_above_degrees
    if threshold is not None and drift is not None and drift > threshold:
        report["status"] = "alert"
        report["alert"] = (f"{config.source}: the boundary of model {mod.path} moved {drift:.4g}° "
                           f"(alert_above_degrees = {threshold:g})")
    return report
