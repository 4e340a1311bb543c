"""Errors and warnings raised by streamproj.

Every error a user can cause is a :class:`StreamprojError` (a ``ValueError``),
so callers can catch one type, and the command line can turn it into a single
``streamproj: error: …`` line instead of a traceback.
"""

from sklearn.exceptions import NotFittedError as _SklearnNotFittedError
from sklearn.utils._param_validation import InvalidParameterError as _SklearnInvalidParameterError

__all__ = [
    "BadValuesError",
    "ClusterError",
    "DeviceError",
    "DuplicateBatchWarning",
    "IncompatibleStatsError",
    "InputError",
    "InvalidParameterError",
    "ModelError",
    "NotFittedError",
    "OutputExistsError",
    "SingularScatterError",
    "SourceChangedError",
    "StorageError",
    "StreamprojError",
    "StreamprojWarning",
    "SummaryMemoryError",
]


class StreamprojError(ValueError):
    """Base class of every error streamproj raises for bad input or usage."""


class InputError(StreamprojError):
    """The input has the wrong shape, type, length or is missing."""


class BadValuesError(InputError):
    """The input holds NaN or infinite values (the message names the first bad row)."""

    #: The bad row's index in the whole array checked, where one row is named.
    row: int | None = None
    #: Raised by one chunk of several checked in parallel: an earlier chunk may hold an
    #: earlier bad row (see ``passes.first_bad_row``).
    in_any_order: bool = False


class IncompatibleStatsError(StreamprojError):
    """Two summaries (or a summary and new rows) cannot be merged."""


class SingularScatterError(StreamprojError):
    """A covariance that must be inverted is singular; shrinkage or reg_param fixes it."""


class InvalidParameterError(InputError, _SklearnInvalidParameterError):
    """An estimator parameter has a wrong type or value (also scikit-learn's error).

    ``parameter``, ``value`` and ``expected`` (what it may be, in words) let a
    caller say the same of the flag or config key the value came from
    (:meth:`relabel`).
    """

    def __init__(self, message: str, parameter: str | None = None, value: object = None,
                 expected: str | None = None) -> None:
        super().__init__(message)
        self.parameter, self.value, self.expected = parameter, value, expected

    def relabel(self, where: str) -> "InvalidParameterError":
        """The same error said of ``where`` (a flag, or a config file and key).

        The new error names no ``parameter``: it is said of its origin already.
        """
        if self.expected is None:
            msg = f"{where}: {self}"
        else:
            msg = f"{where} must be {self.expected}; got {self.value!r}"
        return InvalidParameterError(msg, None, self.value, self.expected)


class NotFittedError(StreamprojError, _SklearnNotFittedError):
    """The estimator is used before ``fit`` (also scikit-learn's ``NotFittedError``)."""


class ModelError(StreamprojError):
    """A model directory is missing, damaged, or of an unknown format."""


class OutputExistsError(StreamprojError):
    """The destination exists and overwriting was not asked for."""


class SourceChangedError(StreamprojError):
    """Rows merged into a model earlier have changed since."""


class StorageError(StreamprojError):
    """A file or object could not be written: permission, read-only file system, full disk, network."""


class DeviceError(StreamprojError):
    """The device asked for is unknown or not there (``"cuda"`` without CuPy or a GPU)."""


class ClusterError(StreamprojError):
    """The dask cluster cannot be started or reached, or lost every worker."""


class SummaryMemoryError(StreamprojError):
    """The summary asked for (and its working set) would not fit the memory budget."""


class StreamprojWarning(UserWarning):
    """Base class of streamproj's warnings."""


class DuplicateBatchWarning(StreamprojWarning):
    """A batch that the summary already holds was merged again; it was not counted twice."""
