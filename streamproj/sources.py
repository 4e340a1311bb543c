"""Reading inputs: an INPUT spec becomes lazily read rows, labels and an identity.

One job: turn what a user names on the command line or in a config (a Zarr
group, a Parquet file or folder, a CSV file, an HDF5 dataset, a NetCDF or
Zarr dataset read by xarray; a local path or any URL fsspec reads) into a
:class:`Source`: ``X`` as a 2-D dask array chunked by rows only, ``y`` as a
1-D dask array on the same row chunks, the feature names, and a small JSON
identity (URL, arrays or columns, rows, dtype, a fingerprint of the first and
last rows) for the model's ledger of sources.

Nothing here reads all rows: opening reads metadata (Zarr and HDF5 headers,
Parquet footers, a NetCDF header) — except CSV, which has no row index, so
opening a CSV reads it once, parsing only its first column, to count the rows
of each block. Each chunk of rows is read by one task that returns the chunk's
features and labels together, so a pass that needs both reads the chunk once.

Formats and how rows are chunked:

``zarr``
    a Zarr group (format 2 or 3) holding arrays named by ``x`` and ``y``
    (opened by :func:`streamproj.store.open_input`); the array's own chunks.
``parquet``
    a Parquet file, or a folder of them (read in sorted order); columns named
    by ``features`` and ``label``; a chunk is one or more whole row groups of
    one file; row counts come from the footers.
``csv``
    a CSV file with a header row; columns as for Parquet; a chunk is a block
    of bytes cut at a line end (one block per file when compressed).
``hdf5``
    ``file.h5:/group/X`` (or ``x`` as the dataset path); ``y`` relative to
    the group of X unless it starts with ``/``; the file is opened by each
    chunk's task, so the tasks run on threads or on a cluster alike.
``xarray``
    a NetCDF file, or a Zarr store read with ``kind="xarray"``: ``x`` names a
    2-D (row, feature) variable, or ``features`` names 1-D variables; ``y`` or
    ``label`` names the label variable.
"""

import fnmatch
import glob as _glob
import hashlib
import io
import lzma
import os
import posixpath
import re
import warnings
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize

from . import store
from .errors import InputError, StreamprojWarning
from .progress import local_scheduler
from .validation import (
    DEFAULT_CHUNK_BYTES,
    as_dask_labels,
    as_dask_rows,
    check_matrix,
    text_labels,
    text_labels_block,
)

__all__ = ["FINGERPRINT_ROWS", "KINDS", "Source", "check_exists", "expand", "input_kind", "listing",
           "listing_digest", "normalise_url", "open_source", "open_sources", "recorded_options",
           "split_dataset"]

KINDS = ("zarr", "parquet", "csv", "hdf5", "xarray")
#: Rows hashed at each end of a source by :meth:`Source.fingerprint`.
FINGERPRINT_ROWS = 256

_GLOB = re.compile(r"[*?\[]")
_EXTENSIONS = {
    ".zarr": "zarr",
    ".parquet": "parquet", ".parq": "parquet", ".pq": "parquet",
    ".csv": "csv",
    ".h5": "hdf5", ".hdf5": "hdf5", ".hdf": "hdf5", ".he5": "hdf5",
    ".nc": "xarray", ".nc4": "xarray", ".netcdf": "xarray", ".cdf": "xarray",
}
_COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".zip")
_MAGIC = ((b"PAR1", "parquet"), (b"\x89HDF\r\n\x1a\n", "hdf5"), (b"CDF\x01", "xarray"),
          (b"CDF\x02", "xarray"))
_LISTED = 20  # names shown in a "columns: ..." list before it is cut short
#: What a message about a missing feature column tells to do (a caller without
#: ``--features`` passes its own as :func:`open_source`'s ``hint``).
_FEATURES_HINT = "name the features with --features"


# ------------------------------------------------------------------ the type
def listing_digest(url: str, kind: str) -> str | None:
    """:meth:`Source.listing` of the files at ``url`` (no Source needed: nothing is opened)."""
    import fsspec

    if kind == "hdf5":
        cut = url.rfind(":/")
        url = url[:cut] if cut > url.find("://") + 2 else url
    try:
        fs, path = fsspec.core.url_to_fs(url)
        infos = list(fs.find(path, detail=True).values()) if fs.isdir(path) else [fs.info(path)]
    except Exception:  # a listing is an optimisation; any failure means "read the rows"
        return None
    h = hashlib.blake2b(digest_size=16)
    for info in sorted(infos, key=lambda i: str(i.get("name"))):
        when = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("created")
        h.update(f"{info.get('name')}|{info.get('size')}|{when}\n".encode())
    return h.hexdigest()


@dataclass(frozen=True, eq=False)
class Source:
    """One opened input: lazily read rows and labels, and what identifies them.

    Attributes
    ----------
    spec : str
        The input as the user gave it (used in messages).
    url : str
        Normalised location: the resolved real path of a local input, or the
        URL with its protocol, without a trailing slash (plus ``:/path`` for
        an HDF5 dataset).
    kind : {"zarr", "parquet", "csv", "hdf5", "xarray"}
    X : dask.array.Array of shape (n_rows, n_features)
        Chunked by rows only, in the stored dtype (Parquet and CSV integer
        columns become float64, so a missing value is a NaN that pass 1 reports).
    y : dask.array.Array of shape (n_rows,) or None
        Labels on the row chunks of ``X``; None when the input has none and
        none were required. Text labels are ``object`` arrays of ``str``.
    feature_names : tuple of str
        Column or variable names; ``x0, x1, …`` for unnamed array columns.
    x : str or tuple of str
        What ``X`` was read from: an array, dataset path or variable, or the
        feature columns / variables in order.
    label : str or None
        The array, dataset, column or variable ``y`` was read from.
    names : (str, str)
        What to call X and y in messages, e.g. ``("day1.parquet[emb_*]",
        "day1.parquet:label")``.
    files : tuple of str
        The files of a Parquet folder, in the order their rows appear.
    file_stats : tuple of (int, str, bool)
        For each of ``files``: its rows, a digest of its footer's statistics
        of the columns read (each column's least and greatest value and its
        nulls, over all row groups), and whether every row group has them: a
        file replaced by one of as many rows in which some column's least,
        greatest value or nulls differ is told apart without reading it.
    """

    spec: str
    url: str
    kind: str
    X: da.Array = field(repr=False)
    y: da.Array | None = field(repr=False)
    feature_names: tuple
    x: str | tuple
    label: str | None
    names: tuple
    files: tuple = ()
    file_stats: tuple = ()
    # fingerprints already read, by row count (and the files' listing, as "listing"): the
    # ledgers of the model and of an output ask for the same one in one job, and each
    # costs a read of the edge chunks (a LIST call on an object store)
    _fingerprints: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of features (columns of X)."""
        return int(self.X.shape[1])

    def key(self) -> dict[str, Any]:
        """What identifies this source in a ledger, whatever its rows: url, kind, x and y.

        Returns
        -------
        dict
            JSON-ready; two openings of the same input with the same arrays or
            columns give equal keys.
        """
        x = list(self.x) if isinstance(self.x, tuple) else self.x
        return {"url": self.url, "kind": self.kind, "x": x, "y": self.label}

    def fingerprint(self, rows: int | None = None, labels: bool = True) -> str:
        """Digest of shape, dtypes and the first and last rows of the first ``rows`` rows.

        Reads at most two chunks (those holding the first and last
        :data:`FINGERPRINT_ROWS` rows), so it notices a source rewritten or
        truncated without reading it; re-summarising the rows is the thorough
        check. ``rows`` smaller than ``n_rows`` fingerprints a prefix: a source
        that grew by appended rows keeps the fingerprint of its old rows.

        Parameters
        ----------
        rows : int, optional
            How many leading rows to cover (default: all).
        labels : bool
            False: the digest these rows give read without their labels (an
            output holds the rows, so an unlabelled reading of them is theirs too).

        Returns
        -------
        str
            32 hexadecimal digits (blake2b).
        """
        rows = self._fingerprint_rows(rows)
        if rows not in self._fingerprints:
            self.set_fingerprint(rows, dask.compute(*self.fingerprint_parts(rows), **local_scheduler()))
        return self._fingerprints[rows if labels else ("rows", rows)]

    def _fingerprint_rows(self, rows):
        rows = self.n_rows if rows is None else int(rows)
        if not 0 <= rows <= self.n_rows:
            msg = f"{self.names[0]} has {self.n_rows} rows; cannot fingerprint the first {rows}"
            raise InputError(msg)
        return rows

    def fingerprint_parts(self, rows: int | None = None) -> list:
        """The lazy row slices :meth:`fingerprint` digests, to compute with other work.

        A caller that reads the same chunks anyway computes these in its own
        graph (so each chunk is read once) and hands the values to
        :meth:`set_fingerprint`.

        Parameters
        ----------
        rows : int, optional
            As for :meth:`fingerprint`.

        Returns
        -------
        list of dask.array.Array
        """
        rows = self._fingerprint_rows(rows)
        k = min(FINGERPRINT_ROWS, rows)
        parts = [self.X[:k], self.X[rows - k : rows]]
        if self.y is not None:
            parts += [self.y[:k], self.y[rows - k : rows]]
        return parts

    def set_fingerprint(self, rows: int | None, values: Sequence[Any]) -> None:
        """Digest the computed :meth:`fingerprint_parts` of ``rows`` and keep it."""
        rows = self._fingerprint_rows(rows)
        y_dtype = None if self.y is None else self.y.dtype
        self._fingerprints[rows] = _digest(f"{self.n_features}|{self.X.dtype}|{y_dtype}|{rows}",
                                           values)
        # the same rows read without labels (X's parts come first)
        self._fingerprints["rows", rows] = _digest(
            f"{self.n_features}|{self.X.dtype}|None|{rows}", values[:2])
        if rows >= FINGERPRINT_ROWS:  # the first rows are those of every longer prefix
            self._fingerprints["head"] = _digest(f"{self.n_features}|{self.X.dtype}|{y_dtype}|head",
                                                 values[::2])  # X's and y's first rows
            self._fingerprints["rows", "head"] = _digest(
                f"{self.n_features}|{self.X.dtype}|None|head", values[:1])

    def head(self, rows: int | None = None, labels: bool = True) -> str | None:
        """Digest of shape, dtypes and the first :data:`FINGERPRINT_ROWS` rows (None if fewer).

        The same for every prefix of at least that many rows (``rows``:
        the prefix's length, default all), so a source that holds another's
        rows and more has its head: a cheap first test before the prefix's
        fingerprint is read (:func:`streamproj.ledger.same_rows`).
        """
        if self._fingerprint_rows(rows) < FINGERPRINT_ROWS:
            return None
        if "head" not in self._fingerprints:
            self.fingerprint()
        return self._fingerprints["head" if labels else ("rows", "head")]

    def listing(self) -> str | None:
        """Digest of the listing (names, sizes, modification times) of this source's files.

        One directory listing (one LIST call on an object store); no data is
        read. Taken once per opening, so every ledger of one job records the
        listing taken before its rows were read. None when the files cannot be
        listed (then the fingerprint decides).
        """
        if "listing" not in self._fingerprints:
            self._fingerprints["listing"] = listing_digest(self.url, self.kind)
        return self._fingerprints["listing"]

    def identity(self) -> dict[str, Any]:
        """A JSON-ready ledger entry: key, rows, dtypes and fingerprint.

        Returns
        -------
        dict
            ``url, kind, x, y, features, n_rows, n_features, dtype, y_dtype,
            fingerprint`` (and ``files`` for a Parquet folder).
        """
        out = {**self.key(), "features": list(self.feature_names), "n_rows": self.n_rows,
               "n_features": self.n_features, "dtype": str(self.X.dtype),
               "y_dtype": None if self.y is None else str(self.y.dtype),
               "fingerprint": self.fingerprint()}
        if self.files:
            out["files"] = list(self.files)
        return out


def _digest(text, parts):
    """blake2b (16 bytes) of ``text`` and then the bytes of each array in ``parts``."""
    h = hashlib.blake2b(text.encode(), digest_size=16)
    for part in parts:
        h.update(_bytes_of(np.asarray(part)))
    return h.hexdigest()


def _bytes_of(values):
    """Bytes that stand for an array's values (text joined, so its width does not matter)."""
    if values.dtype.kind in "OUS":
        return "\x1f".join(map(str, values.tolist())).encode()
    return np.ascontiguousarray(values).tobytes()


# ---------------------------------------------------------------- locations
def _strip_file(url):
    return url[len("file://"):] if url.startswith("file://") else url


def _fs(url, storage_options=None):
    """The fsspec filesystem and path of a URL (a local path gives the local filesystem)."""
    from fsspec.core import url_to_fs

    if store.is_local(url):
        path = os.path.realpath(store.expand_user(_strip_file(url)))
        return url_to_fs(path)[0], path
    try:
        return url_to_fs(url, **(storage_options or {}))
    except (ImportError, ValueError) as exc:
        msg = f"cannot read {url}: {exc}"
        raise InputError(msg) from None


def _normalise(fs, path):
    """The URL a ledger records: the real local path, or protocol://path without a trailing slash."""
    path = path.rstrip("/") or "/"
    if _is_local_fs(fs):
        return path
    return fs.unstrip_protocol(path)


def _is_local_fs(fs):
    return "file" in np.atleast_1d(fs.protocol).tolist()


def recorded_options(entry: dict, spec: str | None = None) -> dict[str, Any]:
    """What to give :func:`open_source` to open again the source a ledger ``entry`` records.

    ``spec`` is where to read it (default the recorded URL). Feature columns or
    variables come back as ``features``/``label``; an HDF5 dataset named in
    ``spec`` itself (``file.h5:/group/X``) is not named again as ``x``.

    Returns
    -------
    dict
        Keyword arguments ``x``, ``y``, ``features`` and ``label``.
    """
    spec = str(entry["url"] if spec is None else spec)
    x, label = entry.get("x"), entry.get("y")
    if isinstance(x, list):  # columns or variables
        return {"x": "X", "y": "y", "features": x, "label": label}
    if _split_inner(spec, entry.get("kind"))[1] is not None:
        x = "X"  # the spec names the dataset; the labels' path is absolute or beside it
    return {"x": x or "X", "y": label or "y", "features": None, "label": None}


def _split_inner(spec, kind=None):
    """Split ``file.h5:/group/X`` into the file and the dataset path (None if there is none)."""
    matches = list(re.finditer(r":/(?!/)", spec))
    if not matches:
        return spec, None
    cut = matches[-1].start()
    base = spec[:cut]
    if kind == "hdf5" or _suffix_kind(base) == "hdf5":
        return base, spec[cut + 1 :]
    return spec, None


def split_dataset(spec: str) -> tuple[str, str | None]:
    """An input's file and its HDF5 dataset path: ``("c.h5", "/grp/X")`` for ``c.h5:/grp/X``.

    ``(spec, None)`` where ``spec`` names no dataset (only a file with an HDF5
    suffix is split; a pattern too: ``day-*.h5:/X``).
    """
    return _split_inner(os.fspath(spec))


def _suffix_kind(path):
    name = path.rstrip("/").lower()
    for comp in _COMPRESSIONS:
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    return _EXTENSIONS.get(posixpath.splitext(name)[1])


def expand(paths: str | os.PathLike | Iterable[str | os.PathLike],
           storage_options: dict | None = None) -> list[str]:
    """Expand globs into a sorted, de-duplicated list of concrete inputs.

    Parameters
    ----------
    paths : str, path-like or iterable of them
        Local paths or fsspec URLs; ``*``, ``?`` and ``[...]`` are patterns
        (``**`` matches folders at any depth), except in a local path that
        exists as written (``day[1].zarr``). An HDF5 dataset path after the
        file (``day-*.h5:/g/X``) is kept on each match.
    storage_options : dict, optional
        Passed to fsspec for remote URLs (e.g. an S3 endpoint).

    Returns
    -------
    list of str
        Normalised locations (see :attr:`Source.url`), sorted. Literal paths
        are not checked here; :func:`open_source` reports a missing one.

    Raises
    ------
    InputError
        A pattern matches nothing, or a path is empty.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("day2.parquet", "day1.parquet", "notes.txt"):
    ...     (folder / name).touch()
    >>> [pathlib.Path(url).name for url in expand([folder / "day*.parquet", folder / "day1.parquet"])]
    ['day1.parquet', 'day2.parquet']
    >>> expand(folder / "week*.parquet")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streamproj.errors.InputError: no input matches '.../week*.parquet'
    >>> import shutil
    >>> shutil.rmtree(folder)
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    found = set()
    for spec in paths:
        spec = os.fspath(spec)
        if not spec.strip():  # (the current folder, to the OS: an unset variable, not a choice)
            msg = "the input path is empty; give a folder, file or URL"
            raise InputError(msg)
        base, inner = _split_inner(spec)
        suffix = f":{inner}" if inner else ""
        fs, path = _fs(base, storage_options) if not _GLOB.search(base) else (None, None)
        if fs is not None:
            found.add(_normalise(fs, path) + suffix)
            continue
        if store.is_local(base):
            pattern = store.expand_user(_strip_file(base)).rstrip("/")
            if os.path.lexists(pattern):  # a name that exists as written: "day[1].zarr" is a name
                found.add(os.path.realpath(pattern) + suffix)
                continue
            matches = sorted({os.path.realpath(m) for m in _glob.glob(pattern, recursive=True)})
        else:
            fs, pattern = _fs(base, storage_options)
            matches = sorted(_normalise(fs, m) for m in fs.glob(pattern.rstrip("/")))
        if not matches:
            msg = f"no input matches {spec!r}"
            raise InputError(msg)
        found.update(m + suffix for m in matches)
    return sorted(found)


def normalise_url(spec: str | os.PathLike, storage_options: dict | None = None) -> str:
    """The URL a ledger records for the file or folder ``spec`` (:attr:`Source.url`)."""
    base, _ = _split_inner(os.fspath(spec))
    fs, path = _fs(base, storage_options)
    return _normalise(fs, path)


def check_exists(spec: str | os.PathLike, storage_options: dict | None = None) -> None:
    """Refuse an input that is not there, as :func:`open_source` would; nothing is opened.

    ``spec`` may be a pattern (it must match something) and name an HDF5
    dataset after the file (``day.h5:/g/X``: the file must exist). A ``run``
    checks this of its ``[output] input`` before the model step writes the model.

    Raises
    ------
    InputError
        ``no such input: …`` (or the pattern matches nothing).
    """
    for url in expand(spec, storage_options):
        base, _ = _split_inner(url)
        fs, path = _fs(base, storage_options)
        if not fs.exists(path):
            msg = f"no such input: {base}"
            raise InputError(msg)


def input_kind(spec: str | os.PathLike, storage_options: dict | None = None) -> str | None:
    """The format :func:`open_source` would read ``spec`` as (None when it cannot tell).

    By the name, a folder's contents or the first bytes, as :func:`open_source`
    detects it; nothing else is read.
    """
    base, _ = _split_inner(os.fspath(spec))
    try:
        fs, path = _fs(base, storage_options)
        return _detect(fs, path, base) if fs.exists(path) else None
    except (InputError, OSError, ValueError):
        return None


def _detect(fs, path, spec):
    """The kind of input at ``path``: by its name, a folder's contents, or its first bytes."""
    kind = _suffix_kind(path)
    if kind:
        return kind
    if fs.isdir(path):
        names = {posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)}
        if not names - {posixpath.basename(path.rstrip("/"))}:  # (some stores list the folder itself)
            msg = f"{spec} is an empty folder: no Zarr store or Parquet files in it"
            raise InputError(msg)
        if names & {"zarr.json", ".zgroup", ".zarray"}:
            return "zarr"
        if _parquet_files(fs, path):
            return "parquet"
    else:
        with fs.open(path, "rb") as f:
            head = f.read(8)
        for magic, found in _MAGIC:
            if head.startswith(magic):
                return found
    msg = (f"{spec}: unknown input format; name it with a known extension "
           f"({', '.join(sorted(_EXTENSIONS))}) (in Python, or pass kind= one of {', '.join(KINDS)})")
    raise InputError(msg)


# ------------------------------------------------------------------ opening
def open_sources(paths: str | os.PathLike | Iterable[str | os.PathLike], x: str = "X",
                 y: str = "y", features: Iterable[str] | None = None, label: str | None = None,
                 require_y: bool = True, storage_options: dict | None = None,
                 kind: str | None = None, chunk_rows: int | None = None) -> list["Source"]:
    """Expand ``paths`` (globs allowed) and open every source; all must have the same features.

    Parameters are those of :func:`expand` and :func:`open_source`.

    Returns
    -------
    list of Source
        In the order of :func:`expand`.

    Raises
    ------
    InputError
        A pattern matches nothing, a source cannot be opened, or two sources
        have different feature counts or names.
    """
    out: list[Source] = []
    for url in expand(paths, storage_options):
        src = open_source(url, x, y, features, label, require_y, storage_options, kind, chunk_rows)
        if out and src.feature_names != out[0].feature_names:
            first = out[0]
            msg = (f"{src.names[0]} has {src.n_features} features "
                   f"({listing(src.feature_names)}) but {first.names[0]} has {first.n_features} "
                   f"({listing(first.feature_names)}); every input must have the same features")
            raise InputError(msg)
        out.append(src)
    return out


def open_source(spec: str | os.PathLike, x: str = "X", y: str = "y",
                features: Iterable[str] | None = None, label: str | None = None,
                require_y: bool = True, storage_options: dict | None = None,
                kind: str | None = None, chunk_rows: int | None = None, *,
                hint: str = _FEATURES_HINT, allow_missing_chunks: bool = False) -> "Source":
    """Open one input lazily.

    Parameters
    ----------
    spec : str or path-like
        A local path or fsspec URL; ``file.h5:/group/X`` names an HDF5 dataset.
        Globs are :func:`expand`'s job.
    x : str
        Zarr array or HDF5 dataset of the rows, or the 2-D xarray variable.
    y : str
        Array, dataset, column or variable of the labels (``label`` overrides
        it for Parquet, CSV and xarray).
    features : str or list of str, optional
        Parquet/CSV columns or xarray 1-D variables of the features: names or
        glob patterns (``"emb_*"``), a list or one comma-separated string.
        Default for Parquet/CSV: every column but the label.
    label : str, optional
        The label column or variable.
    require_y : bool
        Raise when the labels are missing; otherwise ``y`` is None then.
    storage_options : dict, optional
        fsspec options for remote URLs.
    kind : {"zarr", "parquet", "csv", "hdf5", "xarray"}, optional
        The format; by default from the name, a folder's contents or the
        first bytes. A Zarr store is read as a plain group unless ``"xarray"``.
    chunk_rows : int, optional
        Rows per chunk (Parquet: a chunk still holds whole row groups; CSV:
        an estimate that sets the block size). By default the stored chunks,
        or about 64 MiB of float64 per chunk.
    hint : str
        What a message about a feature column or variable not found tells to
        do; the default, ``"name the features with --features"``, is the
        command line's (``plot``, without that option, passes its own).
    allow_missing_chunks : bool
        Read rows an HDF5 file never wrote (a chunk not in the file) as the
        dataset's fill value instead of refusing them (Zarr inputs: see
        :func:`streamproj.store.open_input`).

    Returns
    -------
    Source

    Raises
    ------
    InputError
        The input is missing, of an unknown format, lacks a named array,
        column or variable, has a non-numeric feature, no features, or was
        given options that do not apply to its format.
    """
    spec = os.fspath(spec)
    if kind is not None and kind not in KINDS:
        msg = f"unknown input kind {kind!r}; use one of {', '.join(KINDS)}"
        raise InputError(msg)
    base, inner = _split_inner(spec, kind)
    fs, path = _fs(base, storage_options)
    if not fs.exists(path):
        hint = " (a pattern: expand it first)" if _GLOB.search(base) else ""
        msg = f"no such input: {base}{hint}"
        raise InputError(msg)
    detected = kind is None
    kind = kind or _detect(fs, path, base)
    url = _normalise(fs, path)
    ctx = _Ctx(spec=spec, base=base, url=url, fs=fs, path=path, storage_options=storage_options,
               chunk_rows=chunk_rows, require_y=require_y, hint=hint,
               allow_missing_chunks=allow_missing_chunks)
    if kind in ("zarr", "hdf5"):
        if features is not None or label is not None:
            what = "a Zarr group" if kind == "zarr" else "an HDF5 file"
            msg = (f"{base} is {what}: it holds arrays, not columns; name them with --x/--y "
                   "instead of --features/--label")
            if kind == "zarr" and detected:
                # named variables of a Zarr store: an xarray dataset (xarray.Dataset.to_zarr)
                try:
                    return _open_xarray(ctx, x, features, label or y, label is not None)
                except _NotADataset:
                    raise InputError(msg) from None
            raise InputError(msg)
        if kind == "zarr":
            return _open_zarr(ctx, x, y)
        return _open_hdf5(ctx, inner, x, y)
    if kind == "xarray":
        return _open_xarray(ctx, x, features, label or y, label is not None)
    if x != "X":
        msg = (f"{base} is a {kind} table: it has columns, not arrays; choose them with "
               f"--features (not --x {x})")
        raise InputError(msg)
    if kind == "parquet":
        return _open_parquet(ctx, features, label or y, label is not None)
    return _open_csv(ctx, features, label or y, label is not None)


@dataclass(frozen=True)
class _Ctx:
    """Where an input is and how it is to be read (shared by the per-format openers)."""

    spec: str
    base: str
    url: str
    fs: object
    path: str
    storage_options: dict | None
    chunk_rows: int | None
    require_y: bool
    hint: str  # what a message about a feature not found tells to do
    allow_missing_chunks: bool = False  # rows never written (HDF5) or missing chunks (Zarr): fill

    @property
    def local(self):
        return _is_local_fs(self.fs)


def listing(names: Iterable[Any]) -> str:
    """``a, b, c`` — at most a screenful of names.

    A name that is empty, or starts or ends with white space, is quoted: a CSV header
    ``a, b, y`` listed ``y`` beside "has no label column 'y'" (the column is ``' y'``).
    """
    names = list(names)
    shown = ", ".join(repr(n) if isinstance(n, str) and (n != n.strip() or not n) else str(n)
                      for n in names[:_LISTED])
    if len(names) > _LISTED:
        shown += f", … ({len(names)} in all)"
    return shown or "none"


def _separator_hint(columns):
    """What to do when a CSV header read as one column is split by another separator, else ''.

    ``a;b;y`` read as one column ``'a;b;y'``, and "has no label column 'y'" alone
    left the user to spot why.
    """
    if len(columns) != 1 or not isinstance(columns[0], str):
        return ""
    for sep, name in ((";", "';'"), ("\t", "tabs"), ("|", "'|'")):
        if sep in columns[0]:
            return (f"the header looks separated by {name}: CSV inputs must be separated by "
                    f"commas (e.g. pandas.read_csv(path, sep=...).to_csv(new_path, index=False))")
    return ""


def _target_rows(n_features, chunk_rows, unit=1):
    """Rows per chunk: ``chunk_rows`` or ~64 MiB of float64, a multiple of ``unit`` (≥ unit)."""
    rows = chunk_rows or max(1, DEFAULT_CHUNK_BYTES // (8 * max(1, n_features)))
    return max(unit, rows // unit * unit)


def _x_label(ctx, features, feature_names):
    """Name of a tabular X in messages: the user's selection, or the columns when few."""
    if features is not None:
        shown = features if isinstance(features, str) else ",".join(features)
    elif len(feature_names) <= 5:
        shown = ",".join(feature_names)
    else:
        shown = f"{feature_names[0]},…,{feature_names[-1]}"
    return f"{ctx.base}[{shown}]"


def _feature_items(features):
    """``--features`` as a list of names or patterns (a comma-separated string split), or None."""
    if features is None:
        return None
    return [s.strip() for s in features.split(",")] if isinstance(features, str) else list(features)


def _read_twice(names, features, label):
    """Column names given more than once that would be read (a feature or the label).

    pandas renames a CSV's second ``f0`` to ``f0.1``; pyarrow cannot pick one
    of two: either way the column read is not the one meant. One left out of
    ``features`` is no matter.
    """
    items = _feature_items(features)
    return {n for n in names if names.count(n) > 1 and (items is None or n in items or n == label)}


def _select(where, columns, numeric, features, label, label_given, require_y, what="column",
            skip=(), hint=_FEATURES_HINT, csv=False):
    """Resolve the feature and label names of a table.

    Parameters
    ----------
    where : str
        The file, for messages.
    columns : list of str
        Every column (or variable) in stored order.
    numeric : callable
        ``numeric(name) -> (bool, type description)``.
    features : None, str or list of str
        Names or glob patterns; None means every column but the label.
    label : str
        The label column's name.
    label_given : bool
        The label was named by the user (so a missing one is always an error).
    require_y : bool
    skip : collection of str
        Columns that are no features unless named (a saved pandas index).
    hint : str
        What the message about a feature not found tells to do.
    csv : bool
        The table is a CSV file (a header of one column may be split by another separator).

    Returns
    -------
    (list of str, str or None)
        Feature names in order, and the label (None when absent and optional).
    """
    plural = f"{what}s"
    if label in columns:
        lab = label
    elif label_given or require_y:
        msg = (f"{where} has no label {what} {label!r} ({plural}: {listing(columns)}); "
               f"{(csv and _separator_hint(columns)) or 'name it with --label'}")
        raise InputError(msg)
    else:
        lab = None
    if features is None:
        chosen = [c for c in columns if c != label and c not in skip]
    else:
        items = _feature_items(features)
        chosen = []
        for item in items:
            if _GLOB.search(item) and item not in columns:  # a name as written wins ("x[0]")
                hits = [c for c in columns if fnmatch.fnmatchcase(c, item) and c != label]
                if not hits:
                    msg = (f"{where}: the feature pattern {item!r} matches no {what} "
                           f"({plural}: {listing(columns)})")
                    raise InputError(msg)
            elif item not in columns:
                msg = f"{where} has no {what} {item!r} ({plural}: {listing(columns)}); {hint}"
                raise InputError(msg)
            elif item == label:
                msg = f"{where}: {item!r} is the label {what}; it cannot also be a feature"
                raise InputError(msg)
            else:
                hits = [item]
            chosen += [c for c in hits if c not in chosen]
    if not chosen:
        msg = (f"{where} has no feature {plural} ({plural}: {listing(columns)}); "
               f"{(csv and _separator_hint(columns)) or 'name them with --features'}")
        raise InputError(msg)
    for name in chosen:
        ok, kind = numeric(name)
        if not ok:
            msg = (f"{where}: feature {what} {name!r} holds {kind}, not numbers; leave it out of "
                   "--features")
            raise InputError(msg)
    return chosen, lab


def _feature_dtype(dtypes):
    """X's dtype: the stored float type, float64 when any feature is stored as integers."""
    dtype = np.result_type(*dtypes)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def _lazy_array(func, args_per_chunk, lengths, tail_shape, dtype, what):
    """A dask array of row chunks, chunk ``i`` read by ``func(*args_per_chunk[i])``.

    X and y are read by separate tasks (each reads only its own columns or
    dataset): dask optimises each array's graph on its own, so a task shared
    by both would be copied into each and run twice anyway.
    """
    if not lengths:
        return da.zeros((0, *tail_shape), dtype=dtype)
    token = tokenize(what, args_per_chunk)
    parts = [da.from_delayed(dask.delayed(func, pure=True)(*args, dask_key_name=f"{what}-{token}-{i}"),
                             shape=(n, *tail_shape), dtype=dtype, name=f"{what}-{token}-{i}-array")
             for i, (args, n) in enumerate(zip(args_per_chunk, lengths, strict=True))]
    return da.concatenate(parts, axis=0)


def _labels(values, where, label, offset, y_dtype):
    """A chunk's labels as numpy in the declared dtype; a missing label is an error naming its row."""
    missing = _missing(values)
    if missing is not None:
        msg = (f"{where}: the label {label!r} is missing at row {offset + missing}; every row "
               "needs a label")
        raise InputError(msg)
    values = np.asarray(values)
    if y_dtype.kind == "O":
        return values.astype(str).astype(object) if values.dtype != object else values
    if values.dtype.kind in "iu" and y_dtype.kind == "f":
        # integer labels read as floats (other files of the source hold floats): two
        # integers float64 cannot tell apart would become one class
        with np.errstate(invalid="ignore"):
            inexact = np.flatnonzero(values.astype(y_dtype).astype(values.dtype) != values)
        if inexact.size:
            row = int(inexact[0])
            msg = (f"{where}: the label {label!r} is {values[row]} at row {offset + row}, which "
                   f"{y_dtype} (the labels' type across the source, some of them floats) cannot "
                   "hold exactly; give the labels one type")
            raise InputError(msg)
    if y_dtype.kind == "b" and values.dtype.kind in "OUS":
        # booleans read as text in a block (one cell of it is not a boolean): numpy would
        # call every non-empty text True
        return _text_booleans(values, where, label, offset)
    try:
        return values.astype(y_dtype, casting="same_kind" if values.dtype.kind in "fc" else "unsafe")
    except (TypeError, ValueError):
        listed = values.tolist()
        row = _first_not_of(listed, y_dtype)
        msg = (f"{where}: the label {label!r} is {listed[row]!r} at row {offset + row}, but "
               f"the labels before it are {y_dtype}; one source needs one label type")
        raise InputError(msg) from None


_BOOLEANS = {"True": True, "TRUE": True, "true": True, "False": False, "FALSE": False,
             "false": False}  # the spellings pandas reads as booleans


def _text_booleans(values, where, label, offset):
    """Booleans spelled as text, as pandas reads them; any other value names its row."""
    listed = values.tolist()
    out = np.empty(len(listed), dtype=bool)
    for i, value in enumerate(listed):
        held = _BOOLEANS.get(value) if isinstance(value, str) else (
            value if isinstance(value, bool | np.bool_) else None)
        if held is None:
            msg = (f"{where}: the label {label!r} is {value!r} at row {offset + i}, but the "
                   "labels before it are bool; one source needs one label type")
            raise InputError(msg)
        out[i] = held
    return out


def _first_not_of(values, dtype):
    """Index of the first label ``dtype`` cannot hold (0 when none is found).

    Text that parses as ``dtype`` (a CSV column read as text because of one
    bad cell holds "0", "1" ...) is held; a number must survive the cast.
    """
    for i, value in enumerate(values):
        try:
            held = np.array(value).astype(dtype, casting="unsafe").item()
        except (TypeError, ValueError, OverflowError):
            return i
        if not isinstance(value, str | bytes) and held != value:
            return i
    return 0


def _missing(values):
    """Index of the first missing value (None, NaN, pandas NA) in a label array, or None."""
    import pandas as pd

    mask = np.asarray(pd.isna(values))
    return int(np.flatnonzero(mask)[0]) if mask.any() else None


# --------------------------------------------------------------------- zarr
def _text(labels, name):
    """Labels stored as fixed-width bytes, read as UTF-8 text (as HDF5's are).

    b"cat" written by one tool and "cat" in a Parquet file (or an update) are one class.
    """
    if labels.dtype.kind == "O":  # Zarr's variable-length bytes (its strings pass unchanged)
        return labels.map_blocks(text_labels_block, name, dtype=object,
                                 meta=np.empty((0,), dtype=object))
    if labels.dtype.kind != "S":
        return labels
    return labels.map_blocks(text_labels_block, name, dtype=np.dtype(f"U{max(labels.dtype.itemsize, 1)}"))


def _open_zarr(ctx, x, y):
    X, Y = store.open_input(ctx.base, x, y, require_y=ctx.require_y,
                            storage_options=ctx.storage_options,
                            allow_missing_chunks=ctx.allow_missing_chunks)
    names = (f"{ctx.base}/{x}", f"{ctx.base}/{y}")
    rows = as_dask_rows(X, ctx.chunk_rows, names[0])
    labels = None if Y is None else _text(as_dask_labels(Y, rows.chunks[0], names), names[1])
    return Source(spec=ctx.spec, url=ctx.url, kind="zarr", X=rows, y=labels,
                  feature_names=tuple(f"x{i}" for i in range(rows.shape[1])), x=x,
                  label=None if Y is None else y, names=names)


# ------------------------------------------------------------------ parquet
def _parquet_files(fs, path):
    """Data files of a Parquet folder, sorted (names starting with ``_`` or ``.`` are not data)."""
    files = [f for f in fs.find(path) if _suffix_kind(f) == "parquet"
             and not any(part.startswith(("_", ".")) for part in
                         posixpath.relpath(f, path.rstrip("/")).split("/"))]
    return sorted(files)


def _parquet_file(ctx_local, fs, path):
    """A ``pyarrow.parquet.ParquetFile`` and the handle to close (None for a local path)."""
    import pyarrow.parquet as pq

    if ctx_local:
        return pq.ParquetFile(path), None
    handle = fs.open(path, "rb")
    return pq.ParquetFile(handle), handle


def _arrow_numeric(t):
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _arrow_numpy_dtype(t):
    import pyarrow as pa

    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return np.dtype(t.to_pandas_dtype())
    return np.dtype(object)


def _label_family(t):
    """numbers, booleans, or anything else (strings, ...): labels of two families never merge."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):  # categorical: the kind of its values
        t = t.value_type
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "text"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "text"  # bytes, read as UTF-8 text (as Zarr's and HDF5's are)
    return str(t)


def _open_parquet(ctx, features, label, label_given):
    import pyarrow as pa

    fs = ctx.fs
    files = [ctx.path] if fs.isfile(ctx.path) else _parquet_files(fs, ctx.path)
    if not files:
        msg = f"{ctx.base} is a folder with no Parquet files (*.parquet)"
        raise InputError(msg)
    footers = []
    for f in files:
        shown = f if len(files) == 1 else f"{ctx.base} ({posixpath.relpath(f, ctx.path)})"
        try:
            pf, handle = _parquet_file(ctx.local, fs, f)
            try:
                footers.append((f, shown, pf.schema_arrow,
                                [pf.metadata.row_group(i).num_rows
                                 for i in range(pf.metadata.num_row_groups)], pf.metadata))
            finally:
                if handle is not None:
                    handle.close()
        except (pa.ArrowException, OSError) as exc:
            msg = f"{shown} is not a readable Parquet file ({type(exc).__name__}: {exc})"
            raise InputError(msg) from None
    _, where, schema, _, _ = footers[0]
    where = ctx.base if len(files) == 1 else where

    def numeric(name):
        t = schema.field(name).type
        return _arrow_numeric(t), f"{t} values"

    # a DataFrame's index that pandas saved with it (``__index_level_0__``, or a named one) is
    # no feature: the row numbers were fitted as data
    index = [c for c in (schema.pandas_metadata or {}).get("index_columns", []) if isinstance(c, str)]
    twice = sorted(_read_twice(schema.names, features, label))
    if twice:  # (pyarrow failed with "Column f0 does not exist in schema")
        msg = f"{where} has two columns named {twice[0]!r}; give each column its own name"
        raise InputError(msg)
    cols, lab = _select(where, schema.names, numeric, features, label, label_given, ctx.require_y,
                        skip=index, hint=ctx.hint)
    x_types, y_types = [], []
    for _f, shown, sch, _, _ in footers:
        for name in [*cols, *([lab] if lab else [])]:
            if name not in sch.names:
                msg = (f"{shown} has no column {name!r} (columns: {listing(sch.names)}); "
                       "every file of a Parquet folder needs the same columns")
                raise InputError(msg)
            if name != lab and not _arrow_numeric(sch.field(name).type):
                msg = (f"{shown}: feature column {name!r} holds {sch.field(name).type} values, "
                       "not numbers; leave it out of --features")
                raise InputError(msg)
        x_types += [_arrow_numpy_dtype(sch.field(c).type) for c in cols]
        if lab:
            y_types.append(_arrow_numpy_dtype(sch.field(lab).type))
            first, now = footers[0][2].field(lab).type, sch.field(lab).type
            if _label_family(first) != _label_family(now):
                # (0 and "0" would become one class)
                msg = (f"{shown}: label column {lab!r} holds {now} values, but "
                       f"{footers[0][1]} holds {first}; every file of a Parquet folder needs "
                       "labels of one kind (numbers, booleans or strings)")
                raise InputError(msg)
    if features is None:
        _note_named_index(ctx.base, [c for c in index if c != lab])
    x_dtype = _feature_dtype(x_types)
    y_dtype = None if lab is None else np.result_type(*y_types)
    target = _target_rows(len(cols), ctx.chunk_rows)
    names = (_x_label(ctx, features, cols), f"{ctx.base}:{lab or label}")
    fs = None if ctx.local else ctx.fs
    x_args, y_args, lengths, offset = [], [], [], 0
    for f, _shown, _sch, groups, _ in footers:
        for rgs, n in _group_row_groups(groups, target):
            x_args.append((fs, f, tuple(rgs), tuple(cols), x_dtype.str))
            y_args.append((fs, f, tuple(rgs), lab, None if y_dtype is None else y_dtype.str,
                           ctx.base, offset))
            lengths.append(n)
            offset += n
    X = _lazy_array(_read_parquet_rows, x_args, lengths, (len(cols),), x_dtype,
                    f"streamproj-read-parquet-{ctx.url}")
    y = None if lab is None else _lazy_array(_read_parquet_labels, y_args, lengths, (), y_dtype,
                                             f"streamproj-read-parquet-{ctx.url}-labels")
    rel = tuple(posixpath.relpath(f, ctx.path) for f in files) if len(files) > 1 or files[0] != ctx.path else ()
    stats = tuple((sum(groups), *_footer_stats(meta, [*cols, *([lab] if lab else [])]))
                  for _, _, _, groups, meta in footers) if rel else ()
    return Source(spec=ctx.spec, url=ctx.url, kind="parquet", X=X, y=y, feature_names=tuple(cols),
                  x=tuple(cols), label=lab, names=names, files=rel, file_stats=stats)


def _note_named_index(where, index):
    """Warn that the default features leave out a named index pandas saved.

    An unnamed one (``__index_level_0__``) is row numbers; a named one (``id``,
    ``timestamp``) may have been meant as a feature, and the model would have
    one feature fewer without a word.
    """
    named = [c for c in index if not re.fullmatch(r"__index_level_\d+__", c)]
    if not named:
        return
    one = len(named) == 1
    msg = (f"{where}: {'column' if one else 'columns'} {', '.join(map(repr, named))}, the "
           f"DataFrame index pandas saved, {'is' if one else 'are'} left out of the features; "
           f"to fit {'it' if one else 'them'} too, name {'it' if one else 'them'} among the "
           "features with --features (or the features key)")
    warnings.warn(msg, StreamprojWarning, stacklevel=4)


def _footer_stats(meta, columns):
    """``(digest, complete)`` of a Parquet file's statistics of ``columns``.

    The digest covers each column's least and greatest value and its nulls,
    taken over all row groups, so the same rows written with other row
    groups or compression give the same digest. ``complete``: every row
    group has them for every column (a writer may leave them out; then the
    digest decides nothing).
    """
    wanted: dict[str, list[Any]] = {name: [None, None, 0, True] for name in columns}
    for g in range(meta.num_row_groups):  # (min, max, nulls, every group has statistics)
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            acc = wanted.get(chunk.path_in_schema)
            if acc is None:
                continue
            st = chunk.statistics
            if st is None or not st.has_min_max:
                acc[3] = False
                continue
            acc[0] = st.min if acc[0] is None else min(acc[0], st.min)
            acc[1] = st.max if acc[1] is None else max(acc[1], st.max)
            acc[2] += st.null_count if st.has_null_count else 0
    h = hashlib.blake2b(digest_size=12)
    h.update(str(meta.num_rows).encode())
    for name in columns:
        lo, hi, nulls, _ = wanted[name]
        h.update(f"|{name}|{lo!r}|{hi!r}|{nulls}".encode())
    return h.hexdigest(), all(acc[3] and acc[0] is not None for acc in wanted.values())


def _group_row_groups(groups, target):
    """Consecutive row groups of one file gathered into chunks of at most ``target`` rows.

    A row group is never split (it is Parquet's unit of reading); one larger
    than ``target`` is a chunk of its own. Empty row groups are skipped.

    Returns
    -------
    list of (list of int, int)
        Row-group indices and row count of each chunk.
    """
    out: list[tuple[list[int], int]] = []
    current: list[int] = []
    n = 0
    for i, rows in enumerate(groups):
        if rows == 0:
            continue
        if current and n + rows > target:
            out.append((current, n))
            current, n = [], 0
        current.append(i)
        n += rows
    if current:
        out.append((current, n))
    return out


def _read_parquet_table(fs, path, row_groups, columns):
    """Whole row groups of one Parquet file, only the named columns."""
    pf, handle = _parquet_file(fs is None, fs, path)
    try:
        return pf.read_row_groups(list(row_groups), columns=list(columns), use_threads=False)
    finally:
        if handle is not None:
            handle.close()


def _read_parquet_rows(fs, path, row_groups, columns, dtype):
    """One chunk of X: the feature columns of whole row groups of one Parquet file."""
    table = _read_parquet_table(fs, path, row_groups, columns)
    # Column by column into a Fortran-ordered block: one contiguous copy per column.
    X = np.empty((table.num_rows, len(columns)), dtype=np.dtype(dtype), order="F")
    for j, name in enumerate(columns):
        X[:, j] = table.column(name).to_numpy()
    return X


def _read_parquet_labels(fs, path, row_groups, label, dtype, where, offset):
    """One chunk of y: the label column of whole row groups of one Parquet file."""
    table = _read_parquet_table(fs, path, row_groups, [label])
    values = table.column(label).to_numpy()
    if values.dtype == object:
        # a binary column's labels are text (b"cat" and a string file's "cat" are one class,
        # as in Zarr and HDF5); missing ones are left to _labels
        values = text_labels(values, offset, f"{where}:{label}")
    return _labels(values, where, label, offset, np.dtype(dtype))


# ---------------------------------------------------------------------- csv
def _open_csv(ctx, features, label, label_given):
    import pandas as pd
    from dask.bytes import read_bytes
    from fsspec.utils import infer_compression

    compression = infer_compression(ctx.path)
    suffix = posixpath.splitext(ctx.path.lower())[1]
    if compression is None and suffix in _COMPRESSIONS:
        # fsspec registers a codec only when its package is there (.zst: zstandard); read
        # raw, the compressed bytes were "not a readable CSV file (UnicodeDecodeError ...)"
        msg = (f"{ctx.base}: no codec for {suffix} files is installed (for .zst: the zstandard "
               "package); install it, or decompress the file")
        raise InputError(msg)
    try:
        with ctx.fs.open(ctx.path, "rb", compression=compression) as f:
            head_bytes = f.read(1 << 16)
            # the header and a row at least (a wide file's header alone can pass 64 KiB)
            while head_bytes.count(b"\n") < 2 and len(head_bytes) < 1 << 26:
                if _cr_only(head_bytes):  # (no need to read 64 MiB to say so)
                    break
                more = f.read(1 << 16)
                if not more:
                    break
                head_bytes += more
            else:
                head_bytes = head_bytes[: head_bytes.rfind(b"\n") + 1]  # a cut line: a missing value
        cr_only = _cr_only(head_bytes)
        if not cr_only:  # (refused below, not as "not a readable CSV file")
            # every column by name (a callable usecols), so a line longer than the header
            # neither shifts the columns (index_col) nor warns: reading X refuses it, by row
            head = pd.read_csv(io.BytesIO(head_bytes), nrows=1000, index_col=False,
                               usecols=lambda _: True)
    except (ValueError, OSError, UnicodeDecodeError, *_DAMAGED) as exc:  # (ParserError: a ValueError)
        msg = f"{ctx.base} is not a readable CSV file ({type(exc).__name__}: {exc})"
        raise InputError(msg) from None
    if cr_only:
        # read in blocks split at "\n", such a file is one block (all of it in memory) and
        # its header line runs to the end of the file
        msg = (f"{ctx.base}: its lines end in a carriage return alone (CR, old Mac line "
               "endings), which cannot be read in blocks; convert the line endings to LF or "
               "CRLF (e.g. tr '\\r' '\\n')")
        raise InputError(msg)
    columns = [str(c) for c in head.columns]
    _check_csv_header(ctx.base, head_bytes, features, label, ctx.hint)
    if head.empty:  # (a text file says nothing of its columns' types without a row)
        msg = f"{ctx.base} has a header but no rows; leave it out until it has some"
        raise InputError(msg)

    def numeric(name):
        col = head[name]
        if col.dtype.kind in "biuf":
            return True, ""
        bad = np.flatnonzero(np.asarray(pd.to_numeric(col, errors="coerce").isna() & col.notna()))
        at = int(bad[0]) if bad.size else 0
        return False, f"{col.iloc[at]!r} at row {at}"

    cols, lab = _select(ctx.base, columns, numeric, features, label, label_given, ctx.require_y,
                        hint=ctx.hint, csv=True)
    x_dtype = np.dtype(np.float64)  # text has no stored type; integers become floats too
    y_dtype = None
    if lab is not None:
        texts = pd.read_csv(io.BytesIO(head_bytes), nrows=1000, usecols=[lab], dtype={lab: str},
                            index_col=False, low_memory=False, **_AS_WRITTEN)[lab]
        y_dtype = _csv_label_dtype(texts.dropna())
    blocksize = None
    if compression is None:
        line_bytes = max(1, len(head_bytes) // max(1, head_bytes.count(b"\n")))
        blocksize = _target_rows(len(cols), ctx.chunk_rows) * line_bytes
    url = ctx.path if ctx.local else ctx.url
    _, blocks = read_bytes(url, delimiter=b"\n", blocksize=blocksize, sample=False,
                           compression=compression, **({} if ctx.local else ctx.storage_options or {}))
    blocks = blocks[0]
    # CSV has no row index: count each block's rows (parsing only its first column) once.
    try:
        counts = dask.compute(*[dask.delayed(_count_csv_rows, pure=True)(b, i == 0, columns, ctx.base)
                                for i, b in enumerate(blocks)], **local_scheduler())
    except (OSError, *_DAMAGED) as exc:  # (a compressed file is read whole here: its end too)
        msg = f"{ctx.base} cannot be read to its end ({type(exc).__name__}: {exc})"
        raise InputError(msg) from None
    names = (_x_label(ctx, features, cols), f"{ctx.base}:{lab or label}")
    x_args, y_args, lengths, offset = [], [], [], 0
    for i, (b, n) in enumerate(zip(blocks, counts, strict=True)):
        if n:
            x_args.append((b, i == 0, tuple(columns), tuple(cols), ctx.base, offset))
            y_args.append((b, i == 0, tuple(columns), lab,
                           None if y_dtype is None else y_dtype.str, ctx.base, offset))
            lengths.append(n)
            offset += n
    X = _lazy_array(_read_csv_rows, x_args, lengths, (len(cols),), x_dtype,
                    f"streamproj-read-csv-{ctx.url}")
    y = None if lab is None else _lazy_array(_read_csv_labels, y_args, lengths, (), y_dtype,
                                             f"streamproj-read-csv-{ctx.url}-labels")
    return Source(spec=ctx.spec, url=ctx.url, kind="csv", X=X, y=y, feature_names=tuple(cols),
                  x=tuple(cols), label=lab, names=names)


def _cr_only(head_bytes):
    """The first line of a CSV file's bytes holds a carriage return before its end.

    That is a file whose lines end in CR alone (old Mac, some Excel exports):
    a CRLF file's first line ends in its only CR.
    """
    return b"\r" in head_bytes.split(b"\n", 1)[0].rstrip(b"\r")


def _check_csv_header(where, head_bytes, features, label, hint=_FEATURES_HINT):
    """Refuse a header pandas would rename where the renamed columns are read.

    pandas reads ``f0,f0`` as ``f0, f0.1`` and a blank name as ``Unnamed: 0``
    (``DataFrame.to_csv`` writes its index so): taken as features, the row
    numbers became data. With ``--features`` naming others, they are left
    alone (Excel's trailing commas make blank names too).
    """
    import csv

    line = head_bytes.split(b"\n", 1)[0].decode("utf-8-sig", errors="replace").rstrip("\r")
    names = next(csv.reader([line]), [])
    twice = _read_twice([n for n in names if n.strip()], features, label)  # (blanks: below)
    seen = set()
    for i, name in enumerate(names):
        if not name.strip():
            if features is None:
                msg = (f"{where}: column {i + 1} of the header has no name (a pandas index, "
                       f"written by to_csv without index=False?); {hint}, or give the column "
                       "a name")
                raise InputError(msg)
        elif name in seen and name in twice:
            msg = f"{where}: the header names column {name!r} twice; give each column its own name"
            raise InputError(msg)
        seen.add(name)


# what a damaged or cut-short compressed file raises when read (gzip's bad header and bz2's
# bad data are OSErrors): not OSErrors, so they were tracebacks
_DAMAGED = (EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile)
_EXTRA = "\x00streamproj: a field past the header's"
# only an empty field is missing (pandas applies it to every column read: the label's alone)
_AS_WRITTEN = {"keep_default_na": False, "na_values": [""]}
# numbers one way only: a sign and spaces around are allowed (libsvm's +1/-1, ", "-separated
# files), leading zeros are not ("007" beside "7" would be one class)
_PLAIN_INTEGER = r"\s*[-+]?(0|[1-9][0-9]*)\s*"
_PLAIN_NUMBER = r"\s*[-+]?((0|[1-9][0-9]*)(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\s*"
# what pandas reads as missing: among number labels a missing label, among text a class name
_MISSING_WORDS = frozenset({"#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                            "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None",
                            "n/a", "nan", "null"})


def _csv_frame(data, first, columns, usecols, dtype=None, where="CSV", strict=False, offset=0,
               as_written=False):
    """Parse one block of CSV bytes (the first holds the header) into a DataFrame.

    ``strict``: a line with more fields than the header is refused (read by
    name with ``usecols``, pandas dropped a line's extra fields, so a stray
    comma shifted its values silently): one more column is named and read,
    which only such a line fills. ``as_written``: only an empty field is
    missing, not pandas' missing-value words ("NA", "null", "nan" ...).
    ``index_col=False`` throughout: lines one field longer than the header (a
    trailing comma) made pandas take the first column for the index, and the
    label was read from the column after it.
    """
    import pandas as pd

    na = _AS_WRITTEN if as_written else {}
    # low_memory=False: one type per column for the whole block (pandas would otherwise infer
    # types piece by piece and warn "mixed types" on stderr, beside the one error line)
    try:
        if strict:
            # pandas wants some line as long as the names: a last line of empty fields, dropped
            tail = b"" if data.endswith(b"\n") else b"\n"
            frame = pd.read_csv(io.BytesIO(data + tail + b"," * len(columns) + b"\n"),
                                header=0 if first else None, names=[*columns, _EXTRA],
                                usecols=[*usecols, _EXTRA], index_col=False, low_memory=False,
                                dtype=dtype, **na).iloc[:-1]
            extra = np.flatnonzero(frame[_EXTRA].notna().to_numpy())
            if extra.size:
                msg = (f"{where}: the line of row {offset + int(extra[0])} has more fields than "
                       f"the header's {len(columns)} (a comma inside an unquoted value?)")
                raise InputError(msg)
            return frame[list(usecols)]
        if first:
            return pd.read_csv(io.BytesIO(data), usecols=usecols, index_col=False,
                               low_memory=False, dtype=dtype, **na)
        return pd.read_csv(io.BytesIO(data), header=None, names=list(columns), usecols=usecols,
                           index_col=False, low_memory=False, dtype=dtype, **na)
    except ValueError as exc:  # (pandas' ParserError is one)
        if "fields in line" in str(exc) or "passed names did not match" in str(exc):
            msg = (f"{where}: a line has more fields than the header ({' '.join(str(exc).split())}; "
                   "a comma inside an unquoted value?)")
            raise InputError(msg) from None
        if not isinstance(exc, pd.errors.ParserError):
            raise
        msg = (f"{where}: cannot parse a block of it ({' '.join(str(exc).split())}); the file is "
               "read in blocks split at line ends, so a quoted field holding a line break cannot "
               "be read: remove the line breaks inside fields, or convert the file to Parquet")
        raise InputError(msg) from None


def _count_csv_rows(data, first, columns, where="CSV"):
    """Rows in one block of CSV bytes."""
    if not data.strip():
        return 0
    return len(_csv_frame(data, first, columns, [columns[0]], where=where))


def _read_csv_rows(data, first, columns, features, where, offset):
    """One chunk of X: the feature columns of one block of CSV bytes, as float64."""
    import pandas as pd

    frame = _csv_frame(data, first, columns, list(features), where=where, strict=True,
                       offset=offset)
    X = np.empty((len(frame), len(features)), dtype=np.float64, order="F")
    for j, name in enumerate(features):
        col = frame[name]
        if col.dtype.kind not in "biuf":
            numbers = pd.to_numeric(col, errors="coerce")
            bad = np.flatnonzero(np.asarray(numbers.isna() & col.notna()))
            if bad.size:
                msg = (f"{where}: column {name!r} holds {col.iloc[bad[0]]!r} at row "
                       f"{offset + int(bad[0])}, not a number")
                raise InputError(msg)
            col = numbers
        X[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
    return X


def _read_csv_labels(data, first, columns, label, dtype, where, offset):
    """One chunk of y: the label column of one block of CSV bytes.

    The labels are read as text in every block (pandas would guess each
    block's type again, and a block without "A12" would turn "007" into 7),
    then given the type the file's first rows chose (:func:`_csv_label_dtype`).
    """
    texts = _csv_frame(data, first, columns, [label], {label: str}, where, as_written=True)[label]
    missing = np.flatnonzero(texts.isna().to_numpy())
    if missing.size:
        msg = (f"{where}: the label {label!r} is missing at row {offset + int(missing[0])}; every "
               "row needs a label")
        raise InputError(msg)
    return _typed_csv_labels(texts, where, label, offset, np.dtype(dtype))


def _csv_label_dtype(texts):
    """The type of a CSV file's labels, from the text of its first rows (a pandas Series).

    Integers written plainly (``-12``, ``0``: no leading zero, + sign or
    space) are int64 (uint64 past it), True/False as pandas spells them bool,
    plain numbers some of which have a decimal point or an exponent float64;
    anything else is text, each spelling its own class: "007" beside "7" (one
    integer), or "NA" (a missing value to pandas), are labels as written.
    """
    texts = texts[~texts.isin(_MISSING_WORDS)]  # (missing labels among numbers: refused later)
    if texts.empty:
        return np.dtype(object)
    if texts.isin(list(_BOOLEANS)).all():
        return np.dtype(bool)
    for dtype in (np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float64)):
        if _number_labels(texts, dtype)[1] is None:
            return dtype
    return np.dtype(object)


def _number_labels(texts, dtype):
    """Labels as numbers of ``dtype``, and the first one no plain number of it (None if none).

    ``texts`` is a pandas Series of text, none missing. A text is refused that
    ``dtype`` reads, but that another spelling of the same number could
    stand beside ("007", or a 17-digit integer as float64): beside "7" it
    would become one class. A sign and spaces around are allowed.
    """
    plain = texts.str.fullmatch(_PLAIN_INTEGER if dtype.kind in "iu" else _PLAIN_NUMBER)
    bad = np.flatnonzero(~plain.to_numpy(dtype=bool))
    if bad.size:
        return None, int(bad[0])
    try:
        values = _parsed(texts, dtype)
    except (ValueError, OverflowError):  # (a plain integer past the type's range)
        info = np.iinfo(dtype)
        past = (i for i, text in enumerate(texts) if not info.min <= int(text) <= info.max)
        return None, next(past, 0)
    if dtype.kind == "f":
        for at in np.flatnonzero(np.abs(values) >= 2**53):  # (an integer float64 holds exactly?)
            text = texts.iloc[at]
            if not any(c in text for c in ".eE") and int(text) != int(values[at]):
                return None, int(at)
    return values, None


def _parsed(texts, dtype):
    """Plain numbers (a pandas Series of text) as a numpy array of ``dtype``."""
    texts = texts.str.strip().str.removeprefix("+")  # (" 1", "+1": Arrow reads neither)
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # (Python's int and float, one by one: some ten times slower)
        return texts.to_numpy(dtype=object).astype(dtype)
    values = np.asarray(pc.cast(pa.array(texts), pa.from_numpy_dtype(dtype)), dtype=dtype)
    return values if values.flags.writeable else values.copy()  # (Arrow's memory is read-only)


def _typed_csv_labels(texts, where, label, offset, dtype):
    """A block's labels (a pandas Series of text, none missing) in the type of the file's first rows.

    A label that type does not hold as written is refused, naming its row.
    """
    if dtype.kind == "O":
        return texts.to_numpy(dtype=object)
    missing = np.flatnonzero(texts.isin(_MISSING_WORDS).to_numpy())
    if missing.size:  # "NA" among integers is R's missing value, not a class
        msg = (f"{where}: the label {label!r} is missing at row {offset + int(missing[0])} "
               f"({texts.iloc[missing[0]]!r} among {dtype} labels); every row needs a label")
        raise InputError(msg)
    if dtype.kind == "b":
        if not texts.isin(list(_BOOLEANS)).all():  # (names the row of the first other word)
            return _text_booleans(texts.to_numpy(dtype=object), where, label, offset)
        return texts.isin([k for k, v in _BOOLEANS.items() if v]).to_numpy(dtype=bool)
    values, bad = _number_labels(texts, dtype)
    if bad is None:
        return values
    text, row = texts.iloc[bad], offset + bad
    try:
        number = int(text) if dtype.kind in "iu" else float(text)
    except ValueError:
        number = None
    if number is not None and (dtype.kind in "iu" or np.isfinite(number)) and str(number) != text:
        msg = (f"{where}: the label {label!r} at row {row} is written {text!r}, which reads as "
               f"{str(number)!r}: the labels are read as {dtype} (as the file's first rows are "
               "written), so both spellings would be one class; write each label one way")
    else:
        shown = text if re.fullmatch(_PLAIN_NUMBER, text) else repr(text)
        msg = (f"{where}: the label {label!r} is {shown} at row {row}, but the labels before it "
               f"are {dtype}; one source needs one label type")
    raise InputError(msg)


# --------------------------------------------------------------------- hdf5
def _h5_open(fs, path):
    """Open an HDF5 file read-only (a local path, or an fsspec file for remote URLs)."""
    import h5py

    if fs is None:
        return h5py.File(path, "r")
    return h5py.File(fs.open(path, "rb"), "r")


def _open_hdf5(ctx, inner, x, y):
    import h5py

    if inner and x != "X":
        msg = f"{ctx.spec} names its dataset ({inner}); drop --x {x} or the ':{inner}' suffix"
        raise InputError(msg)
    xpath = posixpath.normpath(posixpath.join("/", inner or x))
    ypath = posixpath.normpath(posixpath.join(posixpath.dirname(xpath), y))
    names = (f"{ctx.base}:{xpath}", f"{ctx.base}:{ypath}")
    fs = None if ctx.local else ctx.fs
    try:
        f = _h5_open(fs, ctx.path)
    except OSError as exc:
        msg = f"{ctx.base} is not a readable HDF5 file ({exc})"
        raise InputError(msg) from None
    with f:
        ds = _h5_dataset(f, ctx.base, xpath, "--x")
        check_matrix(ds, names[0])
        n, p = ds.shape
        x_dtype = _plain_dtype(ds.dtype)
        unit = ds.chunks[0] if ds.chunks else 1
        y_dtype, label = None, None
        if ctx.require_y or ypath in f:
            yds = _h5_dataset(f, ctx.base, ypath, "--y")
            if yds.ndim != 1 or yds.shape[0] != n:
                msg = (f"{names[1]} must be 1-D with one label per row of {names[0]} ({n} rows); "
                       f"it has shape {yds.shape}")
                raise InputError(msg)
            text = h5py.check_string_dtype(yds.dtype) is not None
            y_dtype, label = (np.dtype(object) if text else _plain_dtype(yds.dtype)), ypath
        if not ctx.allow_missing_chunks:
            for dataset, name in ((ds, names[0]), *([(yds, names[1])] if label else [])):
                _check_h5_written(dataset, name)
    rows = _target_rows(p, ctx.chunk_rows, unit if not ctx.chunk_rows else 1)
    starts = list(range(0, n, rows))
    lengths = [min(a + rows, n) - a for a in starts]
    X = _lazy_array(_read_hdf5_rows, [(fs, ctx.path, xpath, a, a + m, None)
                                      for a, m in zip(starts, lengths, strict=True)],
                    lengths, (p,), x_dtype, f"streamproj-read-hdf5-{ctx.url}:{xpath}")
    Y = None
    if label is not None and y_dtype is not None:
        text_name = names[1] if y_dtype.kind == "O" else None
        Y = _lazy_array(_read_hdf5_rows, [(fs, ctx.path, label, a, a + m, text_name)
                                          for a, m in zip(starts, lengths, strict=True)],
                        lengths, (), y_dtype, f"streamproj-read-hdf5-{ctx.url}:{label}")
    return Source(spec=ctx.spec, url=f"{ctx.url}:{xpath}", kind="hdf5", X=X, y=Y,
                  feature_names=tuple(f"x{i}" for i in range(p)), x=xpath, label=label,
                  names=names)


def _h5_unwritten(ds):
    """Row range of the first chunk of rows ``ds`` never wrote, or None.

    HDF5 stores a chunk on its first write (even one of fill values only,
    unlike Zarr), so a chunk not in the file holds rows nobody wrote: they
    read as the fill value. A contiguous dataset shows only whether any of
    it was written.
    """
    n = ds.shape[0]
    if n == 0:
        return None
    if ds.chunks is None:
        return (0, n - 1) if ds.id.get_storage_size() == 0 else None
    rows = ds.chunks[0]
    across = -(-int(np.prod(ds.shape[1:], dtype=np.int64)) // int(np.prod(ds.chunks[1:], dtype=np.int64)))
    expected, stored = -(-n // rows) * across, ds.id.get_num_chunks()
    if stored >= expected:
        return None
    held = np.zeros(-(-n // rows), dtype=np.int64)  # chunks stored per band of rows
    for i in range(stored):
        held[ds.id.get_chunk_info(i).chunk_offset[0] // rows] += 1
    band = int(np.flatnonzero(held < across)[0])
    return (band * rows, min((band + 1) * rows, n) - 1)


def _check_h5_written(ds, name):
    missing = _h5_unwritten(ds)
    if missing is not None:
        fill = ds.fillvalue.item() if hasattr(ds.fillvalue, "item") else ds.fillvalue
        msg = (f"{name}: rows {missing[0]}..{missing[1]} were never written (their chunk is not "
               f"in the file), so they would read as the fill value {fill!r}; write them, or pass "
               "--allow-missing-chunks to read them as the fill value")
        raise InputError(msg)


def _h5_dataset(f, where, path, flag):
    import h5py

    obj = f.get(path)
    if isinstance(obj, h5py.Dataset):
        return obj
    found: list[str] = []
    if isinstance(obj, h5py.Group):
        # a group named as the dataset: the datasets it holds (at any depth, named from
        # it) are the likely meant ones, not those beside it
        folder = obj.name
        obj.visititems(lambda name, v: found.append(name) if isinstance(v, h5py.Dataset) else None)
        found.sort()
    else:
        folder = posixpath.dirname(path)
        parent = f.get(folder)
        found = sorted(k for k, v in parent.items() if isinstance(v, h5py.Dataset)) \
            if isinstance(parent, h5py.Group) else []
    if not found:  # none beside it ("datasets in /: none"): the file's, wherever they are
        folder = "the file"
        f.visititems(lambda name, v: found.append(f"/{name}") if isinstance(v, h5py.Dataset)
                     else None)
    what = "a group, not a dataset" if isinstance(obj, h5py.Group) else "no such dataset"
    msg = (f"{where}:{path}: {what} (datasets in {folder}: {listing(found)}); "
           f"name the right one with {flag} or file.h5:/group/X")
    raise InputError(msg)


def _plain_dtype(dtype):
    """``dtype`` without h5py's metadata (an enum's names): numpy warns when saving it."""
    return np.dtype(dtype.str) if dtype.metadata and dtype.fields is None else dtype


def _read_hdf5_rows(fs, path, dataset, start, stop, text=None):
    """Rows ``start:stop`` of one HDF5 dataset; the file is opened by this task and closed.

    ``text``: the labels' name when the dataset holds strings. They are decoded
    as UTF-8 whatever the dataset's declared encoding (h5py stores numpy bytes
    as "ASCII" even when they hold UTF-8), and one that is not names its row.
    """
    with _h5_open(fs, path) as f:
        raw = f[dataset][start:stop]
    if not text:
        return raw.view(_plain_dtype(raw.dtype))
    return text_labels(raw, start, text).astype(object)  # fixed-width or variable-length bytes


# ------------------------------------------------------------------- xarray
class _NotADataset(InputError):
    """xarray cannot open the store (a plain Zarr group, not a dataset)."""


def _open_xarray(ctx, x, features, label, label_given):
    import xarray as xr

    target = ctx.path if ctx.local else ctx.url
    is_zarr = ctx.fs.isdir(ctx.path) or _suffix_kind(ctx.path) == "zarr"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "failed to open consolidated metadata"
            if is_zarr:
                ds = xr.open_zarr(target, chunks=None, consolidated=False,  # (see store.open_input)
                                  storage_options=None if ctx.local else ctx.storage_options)
            else:
                ds = xr.open_dataset(target if ctx.local else ctx.fs.open(ctx.path, "rb"),
                                     chunks=None)
    except (ValueError, OSError, KeyError) as exc:
        msg = f"{ctx.base} is not a dataset xarray can read ({type(exc).__name__}: {exc})"
        raise _NotADataset(msg) from None
    # Zarr lists variables in no particular order: patterns match in natural order (emb_2 < emb_10).
    variables = sorted((str(v) for v in ds.data_vars), key=_natural)

    def numeric(name):
        dtype = ds[name].dtype
        return dtype.kind in "biuf", f"{dtype} values"

    if features is not None and x != "X":
        msg = f"{ctx.base}: name the features either with --x (one 2-D variable) or --features"
        raise InputError(msg)
    if features is None:
        if x not in variables:
            msg = (f"{ctx.base} has no variable {x!r} (variables: {listing(variables)}); name "
                   "the 2-D feature variable with --x, or 1-D ones with --features")
            raise InputError(msg)
        var = ds[x]
        if var.ndim != 2:
            msg = (f"{ctx.base}:{x} must be 2-D (rows x features); it has dimensions "
                   f"{var.dims}; name 1-D feature variables with --features")
            raise InputError(msg)
        ok, what = numeric(x)
        if not ok:
            msg = f"{ctx.base}:{x} holds {what}, not numbers"
            raise InputError(msg)
        row_dim, feat_dim = var.dims
        _, lab = _select(ctx.base, variables, numeric, [x], label, label_given, ctx.require_y,
                         what="variable")
        cols = ([str(v) for v in ds[feat_dim].values.tolist()] if feat_dim in ds.coords
                else [f"x{i}" for i in range(var.shape[1])])
        used = [x]
        xname = f"{ctx.base}:{x}"
    else:
        used, lab = _select(ctx.base, variables, numeric, features, label, label_given,
                            ctx.require_y, what="variable", hint=ctx.hint)
        dims = {ds[v].dims for v in used}
        if len(dims) != 1 or len(next(iter(dims))) != 1:
            msg = (f"{ctx.base}: feature variables must be 1-D on one row dimension; they have "
                   f"dimensions {', '.join(f'{v}{ds[v].dims}' for v in used)}")
            raise InputError(msg)
        row_dim = next(iter(dims))[0]
        cols = list(used)
        xname = _x_label(ctx, features, cols)
    if lab is not None and ds[lab].dims != (row_dim,):
        if features is None and ds[lab].dims == (feat_dim,):  # X stored (feature, row)
            msg = (f"{ctx.base}:{x} has dimensions {var.dims}: its rows run along {feat_dim!r}, "
                   f"as {lab}'s do, but X is read as (rows x features); store it transposed "
                   f"(e.g. ds[{x!r}].transpose({feat_dim!r}, {row_dim!r}) in xarray)")
            raise InputError(msg)
        msg = (f"{ctx.base}:{lab} must be 1-D along {row_dim!r} (one label per row); it has "
               f"dimensions {ds[lab].dims}")
        raise InputError(msg)
    disk = _disk_chunk(ds[used[0]], row_dim)
    rows = _target_rows(len(cols), ctx.chunk_rows, disk if not ctx.chunk_rows else 1)
    keep = ds[[*used, *([lab] if lab else [])]]
    keep = keep.chunk({d: (rows if d == row_dim else -1) for d in keep.dims})
    X = keep[x].data if features is None else da.stack([keep[v].data for v in used], axis=1)
    if X.dtype.kind != "f":
        X = X.astype(np.float64)
    X = X.rechunk({1: -1})
    y = None
    if lab is not None:
        y = _text(keep[lab].data, f"{ctx.base}:{lab}")
        if y.dtype.kind == "U":
            y = y.astype(object)
    names = (xname, f"{ctx.base}:{lab or label}")
    return Source(spec=ctx.spec, url=ctx.url, kind="xarray", X=X, y=y, feature_names=tuple(cols),
                  x=x if features is None else tuple(used), label=lab, names=names)


def _natural(name):
    """Sort key that orders the numbers inside names by value."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


def _disk_chunk(var, row_dim):
    """Rows per stored chunk of an xarray variable along ``row_dim`` (1 when unknown)."""
    enc = var.encoding
    preferred = enc.get("preferred_chunks") or {}
    if row_dim in preferred:
        return int(preferred[row_dim])
    sizes = enc.get("chunksizes") or enc.get("chunks")
    if sizes:
        return int(sizes[var.dims.index(row_dim)])
    return 1
