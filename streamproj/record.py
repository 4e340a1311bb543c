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
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .stats import ClassStats

__all__ = ["ModelRecord"]


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
    """

    meta: Mapping[str, Any]
    stats: ClassStats
    solution: Mapping[str, np.ndarray]

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

    def __iter__(self) -> Iterator[Any]:
        """``meta, stats, solution = record``, as the store's tuples were unpacked."""
        return iter((dict(self.meta), self.stats, dict(self.solution)))
