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

from . import errors, solvers
from ._version import __version__
from .errors import *  # noqa: F403  (the error hierarchy is public API)
from .estimator import BoundaryProjector, load
from .passes import accumulate
from .qda import StreamingQDA
from .record import ModelRecord
from .stats import ClassStats

__all__ = [
    "BoundaryProjector",
    "ClassStats",
    "ModelRecord",
    "StreamingQDA",
    "__version__",
    "accumulate",
    "load",
    "solvers",
    *errors.__all__,
]
