"""The model record: everything a saved model is, as one frozen value.

A :class:`ModelRecord` is what the estimator produces
(:meth:`~streamproj.estimator.BoundaryProjector.to_state`) and consumes
(:meth:`~streamproj.estimator.BoundaryProjector.from_state`), what
:mod:`streamproj.store` writes to and reads from a model version (and an
output's frame), and what jobs add the source ledger and history to
(:meth:`ModelRecord.with_meta`), without reaching into the estimator.

It holds three parts, as stored: ``meta`` (``model.json``: parameters,
classes, counts, sources, history …), ``stats`` (``stats.npz``) and
``solution`` (``solution.npz``: components, center, coef, intercept, classes).
Making, reading and changing a record touches no file and no clock.

>>> import numpy as np
>>> from streamproj.stats import ClassStats
>>> stats = ClassStats.from_rows(np.array([[0.0, 1.0], [2.0, 3.0]]), np.array([0, 1]))
>>> record = ModelRecord({"params": {"n_components": 1}}, stats, {})
>>> record.with_meta(sources=[{"url": "a.zarr"}]).sources
[{'url': 'a.zarr'}]
>>> record.sources  # the record itself never changes
[]
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .stats import ClassStats

__all__ = ["PARAMETERS", "ModelRecord"]

#: The names a record's ``params`` may hold: BoundaryProjector's parameters (a test keeps
#: the two the same). A name outside them is an edit the estimator cannot be built from.
PARAMETERS = frozenset({"n_components", "shrinkage", "center", "priors", "boundary", "chunk_rows",
                        "keep_class_scatter", "progress", "max_summary_memory", "bfloat16"})


@dataclass(frozen=True)
class ModelRecord:
    """One model as stored: ``meta`` (model.json), ``stats`` and ``solution`` arrays.

    Parameters
    ----------
    meta : dict
        JSON-ready description: ``params``, ``classes``, ``counts``,
        ``n_features``, ``model_id`` …, and the ledger (``sources``,
        ``history``) when jobs keep one. ``version`` and ``saved`` are set by
        the store on reading and writing.
    stats : ClassStats
        The model's merged summary.
    solution : dict of str to ndarray
        ``components``, ``center``, ``coef``, ``intercept`` and ``classes``;
        ``declared_classes`` when ``partial_fit`` was given ``classes=``.
    where : str, optional
        The model directory it was read from, for messages (not part of the record).
    """

    meta: Mapping[str, Any]
    stats: ClassStats
    solution: Mapping[str, np.ndarray]
    where: str | None = field(default=None, compare=False)

    @property
    def params(self) -> dict[str, Any]:
        """The estimator's parameters, as stored."""
        return dict(self.meta.get("params") or {})

    @property
    def sources(self) -> list[dict[str, Any]]:
        """The source ledger (empty when the model keeps none)."""
        return list(self.meta.get("sources") or [])

    @property
    def history(self) -> list[dict[str, Any]]:
        """What was done to the model, oldest first."""
        return list(self.meta.get("history") or [])

    @property
    def version(self) -> str | None:
        """The model version this record was read from (None when not read from a store)."""
        return self.meta.get("version")

    def with_meta(self, **fields: Any) -> "ModelRecord":
        """A copy with these ``model.json`` fields set (``sources=…``, ``history=…``)."""
        return replace(self, meta={**self.meta, **fields})

    def fault(self) -> str | None:
        """What makes this record inconsistent, naming the file at fault; None when nothing does.

        A model directory edited by hand must be refused when it is read, not
        found out by a traceback, a wrong file blamed or a wrong output later:
        ``params`` a table of the estimator's parameters, ``sources`` and
        ``history`` lists, the solution's arrays finite numbers shaped as the
        summary says (``n_features``, classes, ``n_components``), its classes
        holding the summary's (and the declared ones), and ``model.json``'s
        ``classes``, ``counts``, ``n_features`` and ``n_components`` those of
        the NPZ files. Cheap: no O(p²) work, one finiteness pass over the small
        solution arrays (the summary is not hashed; its model id is not checked).
        Fields a record lacks (written by an earlier version) are not asked for.
        """
        meta, stats, solution = self.meta, self.stats, self.solution
        params = meta.get("params")
        if not isinstance(params, dict):
            return f"model.json's 'params' must be a table; got {type(params).__name__}"
        unknown = [k for k in params if k not in PARAMETERS]
        if unknown:
            return (f"model.json's 'params' has unknown key {str(unknown[0])!r} "
                    f"(known: {', '.join(sorted(PARAMETERS))})")
        boundary = params.get("boundary")
        if boundary is not None and not isinstance(boundary, dict):
            return f"model.json's 'params' has boundary {_short(boundary)}; it must be null or a table"
        for key in ("sources", "history"):
            if meta.get(key) is not None and not isinstance(meta[key], list):
                return f"model.json's {key!r} must be a list; got {type(meta[key]).__name__}"
        p, k = stats.n_features, stats.n_classes
        for name in ("components", "center", "coef", "intercept", "classes"):
            if name not in solution:
                return f"solution.npz lacks {name!r}"
        arrays = {}
        for name in ("components", "center", "coef", "intercept"):
            arr = np.asarray(solution[name])
            if arr.dtype.kind not in "fiu":
                return f"solution.npz's {name!r} is not numbers (dtype {arr.dtype})"
            if not np.isfinite(arr).all():
                return f"solution.npz's {name!r} holds NaN or infinity"
            arrays[name] = arr
        components = arrays["components"]
        if components.ndim != 2 or components.shape[0] < 1 or components.shape[1] != p:
            return (f"solution.npz's 'components' has shape {components.shape}; stats.npz "
                    f"summarises {p} features, so it must be (n_components, {p})")
        if arrays["center"].shape != (p,):
            return (f"solution.npz's 'center' has shape {arrays['center'].shape}; stats.npz "
                    f"summarises {p} features, so it must be ({p},)")
        # one row for two classes, K for K > 2; a given boundary has its classifier's rows (one,
        # or one per class of the summary or of the solution's classes)
        given_rows = [1, k, int(np.asarray(solution["classes"]).shape[0])]
        rows = given_rows if isinstance(boundary, dict) else [1] if k <= 2 else [k]
        if arrays["coef"].shape[0] in rows:
            rows = [arrays["coef"].shape[0]]
        for name, shape in (("coef", (rows[0], p)), ("intercept", (rows[0],))):
            if arrays[name].shape != shape:
                return (f"solution.npz's {name!r} has shape {arrays[name].shape}; stats.npz "
                        f"summarises {k} classes and {p} features, so it must be {shape}")
        classes = np.asarray(solution["classes"])
        given = boundary.get("classes") if isinstance(boundary, dict) else None
        if classes.ndim != 1 or np.unique(classes).shape[0] != classes.shape[0]:
            return f"solution.npz's 'classes' ({_few(classes)}) are not a list of distinct labels"
        if given is None and not np.array_equal(np.unique(classes), classes):
            return f"solution.npz's 'classes' ({_few(classes)}) are not in order"
        if not np.isin(stats.classes, classes).all():
            return (f"solution.npz's 'classes' ({_few(classes)}) are not the classes stats.npz "
                    f"summarises ({_few(stats.classes)})")
        if given is not None and (not isinstance(given, list) or _as_json(classes) != _as_json(given)):
            return (f"solution.npz's 'classes' ({_few(classes)}) are not the boundary's classes "
                    f"in model.json's 'params' ({_few(given)})")
        if "declared_classes" in solution and given is None:
            declared = np.asarray(solution["declared_classes"])
            if declared.shape != classes.shape or not np.array_equal(declared, classes):
                return (f"solution.npz's 'declared_classes' ({_few(declared)}) are not its "
                        f"'classes' ({_few(classes)})")
        for key, value, what in (("classes", _as_json(classes), "solution.npz's"),
                                 ("counts", stats.counts.tolist(), "stats.npz's"),
                                 ("n_features", p, "stats.npz's"),
                                 ("n_components", components.shape[0], "solution.npz's")):
            stored = _as_json(meta[key]) if key in meta and isinstance(meta[key], list) else meta.get(key)
            if key in meta and stored != value:
                shown = _few(meta[key]) if isinstance(meta[key], list) else repr(meta[key])
                return (f"model.json's {key!r} is {shown}, but {what} is "
                        f"{_few(value) if isinstance(value, list) else value}")
        names = meta.get("feature_names")
        if names is not None and (not isinstance(names, list) or len(names) != p):
            got = f"{len(names)} names" if isinstance(names, list) else type(names).__name__
            return f"model.json's 'feature_names' must be a list of {p} names (stats.npz's features); got {got}"
        return None

    def __iter__(self) -> Iterator[Any]:
        """``meta, stats, solution = record``, as the store's tuples were unpacked."""
        return iter((dict(self.meta), self.stats, dict(self.solution)))


def _as_json(values: Any) -> list[Any]:
    """Labels as ``model.json`` describes them (bytes as text, as the store writes them)."""
    listed = values if isinstance(values, list) else np.asarray(values).tolist()
    return [v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else v for v in listed]


def _short(value: Any, most: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= most else text[:most] + "…"


def _few(values: Any, most: int = 6) -> str:
    """A short, one-line account of some labels or counts."""
    shown = _as_json(values)
    text = ", ".join(map(repr, shown[:most]))
    return f"[{text}{', …' if len(shown) > most else ''}]"
