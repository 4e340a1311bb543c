"""streamproj: boundary-preserving projections of labelled data larger than memory.

One streaming pass accumulates per-class summaries (counts, means, scatter);
Fisher/LDA, QDA and the boundary-preserving axes are solved from them; a second
pass writes the projected coordinates. See ``BoundaryProjector``.
"""

from .errors import (
    BadValuesError,
    DuplicateBatchWarning,
    IncompatibleStatsError,
    InputError,
    ModelError,
    NotFittedError,
    OutputExistsError,
    SingularScatterError,
    SourceChangedError,
    StreamprojError,
    StreamprojWarning,
)
from .estimator import BoundaryProjector, load
from .passes import accumulate
from .stats import ClassStats

__version__ = "0.1.0"

__all__ = [
    "BadValuesError",
    "BoundaryProjector",
    "ClassStats",
    "DuplicateBatchWarning",
    "IncompatibleStatsError",
    "InputError",
    "ModelError",
    "NotFittedError",
    "OutputExistsError",
    "SingularScatterError",
    "SourceChangedError",
    "StreamprojError",
    "StreamprojWarning",
    "__version__",
    "accumulate",
    "load",
]
