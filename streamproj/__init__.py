"""streamproj: boundary-preserving projections of labelled data larger than memory.

One streaming pass accumulates per-class summaries (counts, means, scatter);
Fisher/LDA, QDA and the boundary-preserving axes are solved from them; a second
pass writes the projected coordinates. See ``BoundaryProjector``.
"""

from . import errors, solvers
from .errors import *  # noqa: F403  (the error hierarchy is public API)
from .estimator import BoundaryProjector, load
from .passes import accumulate
from .qda import StreamingQDA
from .stats import ClassStats

__version__ = "0.1.0"

__all__ = [
    "BoundaryProjector",
    "ClassStats",
    "StreamingQDA",
    "__version__",
    "accumulate",
    "load",
    "solvers",
    *errors.__all__,
]
