"""streamproj: boundary-preserving projections of labelled data larger than memory.

One streaming pass accumulates per-class summaries (counts, means, scatter);
Fisher/LDA, QDA and the boundary-preserving axes are solved from them; a second
pass writes the projected coordinates. See ``BoundaryProjector``.

Summaries merge exactly, so batches can be summarised apart (on other
machines, on other days) and added:

>>> import numpy as np
>>> import streamproj as sp
>>> X = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 9.0]])
>>> y = np.array([0, 0, 1, 1])
>>> merged = sp.accumulate(X[:2], y[:2]) + sp.accumulate(X[2:], y[2:])
>>> merged
ClassStats(n_samples=4, n_features=2, classes=[0, 1], detail='pooled')
>>> merged.means
array([[1., 2.],
       [5., 7.]])
>>> bool(np.allclose(merged.within, sp.accumulate(X, y).within))
True
"""

# The names below are imported when first used (PEP 562): ``import streamproj`` stays
# light, so the command line can take a Ctrl-C while its heavy imports (scikit-learn,
# dask, zarr) run and say one line instead of a traceback (see ``_launch``).
import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers and editors: the names, eagerly
    from . import errors, solvers  # noqa: F401
    from ._version import __version__
    from .errors import *  # noqa: F403
    from .estimator import BoundaryProjector, load
    from .passes import accumulate
    from .qda import StreamingQDA
    from .record import ModelRecord
    from .stats import ClassStats

# errors.__all__, written out (importing errors imports scikit-learn); a test keeps them equal
_ERRORS = (
    "BadValuesError", "ClusterError", "DeviceError", "DuplicateBatchWarning", "IncompatibleStatsError",
    "InputError", "InvalidParameterError", "ModelError", "NotFittedError", "OutputExistsError",
    "SingularScatterError", "SourceChangedError", "StorageError", "StreamprojError",
    "StreamprojWarning", "SummaryMemoryError",
)
_WHERE = {
    "BoundaryProjector": "estimator", "load": "estimator", "accumulate": "passes",
    "StreamingQDA": "qda", "ModelRecord": "record", "ClassStats": "stats",
    # (importlib.metadata: 40 ms of the command's start, before it can take a Ctrl-C)
    "__version__": "_version",
    **dict.fromkeys(_ERRORS, "errors"),
}
_MODULES = ("errors", "solvers")

__all__ = [
    "BoundaryProjector",
    "ClassStats",
    "ModelRecord",
    "StreamingQDA",
    "__version__",
    "accumulate",
    "load",
    "solvers",
    *_ERRORS,
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    elif name in _MODULES or (not name.startswith("__")
                              and importlib.util.find_spec(f"{__name__}.{name}") is not None):
        # a submodule (streamproj.store), as the eager package gave them all
        value = importlib.import_module(f".{name}", __name__)
    else:
        msg = f"module 'streamproj' has no attribute {name!r}"
        raise AttributeError(msg)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
