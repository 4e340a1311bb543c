"""Zarr inputs and outputs, boundary files and the model directory — all file I/O lives here.

Model directory layout (every write is crash-safe)::

    MODEL/
      CURRENT            name of the live version, e.g. "v000003"
      v000003/
        model.json       parameters, classes, identity, sources merged, history
        stats.npz        the mergeable ClassStats
        solution.npz     components, center, coef, intercept

A new version is written completely into its own folder before ``CURRENT`` is
replaced (``os.replace`` is atomic), so a reader or a job killed at any point
sees either the old model or the new one. Jobs that update a model hold
the lock file ``.MODEL.lock`` beside it. A model written for the first time
is built in a temporary sibling folder and renamed into place.
"""

import contextlib
import datetime as _dt
import fcntl
import json
import os
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path

import numpy as np
import zarr

from .errors import InputError, ModelError, OutputExistsError
from .stats import ClassStats, check_matrix

__all__ = [
    "MODEL_FORMAT",
    "create_output_array",
    "is_local",
    "model_lock",
    "open_input",
    "open_output",
    "output_group",
    "read_boundary",
    "read_model",
    "timestamp",
    "write_model",
]

MODEL_FORMAT = "streamproj-model"
MODEL_FORMAT_VERSION = 1
_CURRENT = "CURRENT"


def timestamp():
    """The current UTC time as recorded in models and outputs (ISO 8601, seconds)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# ------------------------------------------------------------------- inputs
def is_local(url):
    """True for a plain path or a ``file://`` URL."""
    return "://" not in str(url) or str(url).startswith("file://")


def _local_path(url):
    url = str(url)
    return Path(url[len("file://") :] if url.startswith("file://") else url)


def _open_group(url, mode="r", storage_options=None):
    if is_local(url) and not _local_path(url).exists():
        msg = f"no such input: {url}"
        raise InputError(msg)
    try:
        return zarr.open_group(
            str(_local_path(url)) if is_local(url) else url,
            mode=mode,
            storage_options=None if is_local(url) else storage_options,
        )
    except (FileNotFoundError, KeyError, ValueError, TypeError) as exc:
        msg = f"{url} is not a readable Zarr group ({type(exc).__name__}: {exc})"
        raise InputError(msg) from None


def _array(group, url, name, flag):
    try:
        arr = group[name]
    except KeyError:
        names = sorted(group.array_keys())
        msg = (
            f"{url} has no array {name!r} (arrays: {', '.join(names) or 'none'}); "
            f"name the right one with {flag}"
        )
        raise InputError(msg) from None
    if not isinstance(arr, zarr.Array):
        msg = f"{url}/{name} is a group, not an array"
        raise InputError(msg)
    return arr


def open_input(url, x="X", y="y", require_y=True, storage_options=None):
    """Open the Zarr arrays of an input group lazily.

    Returns
    -------
    X : zarr.Array of shape (n, p)
    y : zarr.Array of shape (n,) or None when absent and not required
    """
    group = _open_group(url, "r", storage_options)
    X = _array(group, url, x, "--x")
    check_matrix(X, f"{url}/{x}")
    labels = None
    if require_y or y in group:
        labels = _array(group, url, y, "--y")
        if labels.ndim != 1 or labels.shape[0] != X.shape[0]:
            msg = (
                f"{url}/{y} must be 1-D with one label per row of {x} ({X.shape[0]} rows); "
                f"it has shape {labels.shape}"
            )
            raise InputError(msg)
    return X, labels


# ------------------------------------------------------------------ outputs
@contextlib.contextmanager
def output_group(url, overwrite=False, attrs=None):
    """A fresh Zarr group that appears at ``url`` only when the block succeeds.

    Local outputs are written to a temporary sibling and renamed into place,
    so a failure or a kill leaves nothing at the destination. Remote outputs
    cannot be renamed atomically; they are written in place and marked
    ``complete`` in their attributes last.
    """
    exists = _exists(url)
    if exists and not overwrite:
        msg = f"output {url} exists; pass --overwrite (overwrite=True) to replace it"
        raise OutputExistsError(msg)
    if not is_local(url):
        group = zarr.open_group(url, mode="w")
        group.attrs.update({**(attrs or {}), "complete": False})
        yield group
        group.attrs["complete"] = True
        return
    dest = _local_path(url)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        group = zarr.open_group(str(tmp), mode="w-")
        group.attrs.update({**(attrs or {}), "complete": False})
        yield group
        group.attrs["complete"] = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "consolidated metadata is not in the v3 spec"
            zarr.consolidate_metadata(str(tmp))
        _replace_dir(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _exists(url):
    if is_local(url):
        return _local_path(url).exists()
    try:
        zarr.open_group(url, mode="r")
    except (FileNotFoundError, KeyError, ValueError):
        return False
    return True


def _replace_dir(src, dest):
    """Move a finished folder to ``dest``, replacing what is there with two renames."""
    if not dest.exists():
        os.rename(src, dest)
        return
    old = dest.parent / f".{dest.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(dest, old)
    os.rename(src, dest)
    shutil.rmtree(old, ignore_errors=True)


def open_output(url):
    """Open a projection written by ``streamproj project`` for reading."""
    group = _open_group(url, "r")
    if "coords" not in group:
        msg = f"{url} is not a streamproj projection (no 'coords' array)"
        raise InputError(msg)
    return group


def create_output_array(group, name, shape, chunks, dtype, dims, attrs=None):
    """An array in an output group, with named dimensions (``xarray.open_zarr`` reads them)."""
    return group.create_array(
        name,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        dimension_names=dims,
        attributes=attrs or {},
    )


# --------------------------------------------------------------- boundaries
def read_boundary(path):
    """Read ``coef`` and ``intercept`` (and optional ``classes``) from a JSON or NPZ file."""
    path = Path(path)
    if not path.exists():
        msg = f"no boundary file at {path}"
        raise InputError(msg)
    try:
        if path.suffix.lower() == ".npz":
            with np.load(path, allow_pickle=False) as data:
                content = {k: data[k] for k in data.files}
        else:
            content = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        msg = f"{path} is not a readable JSON or NPZ boundary file: {exc}"
        raise InputError(msg) from None
    missing = [k for k in ("coef", "intercept") if k not in content]
    if missing:
        msg = f"{path} lacks {' and '.join(missing)}; a boundary file needs 'coef' and 'intercept'"
        raise InputError(msg)
    classes = content.get("classes")
    return {
        "coef": np.asarray(content["coef"], dtype=np.float64),
        "intercept": np.asarray(content["intercept"], dtype=np.float64),
        "classes": None if classes is None else np.asarray(classes),
    }


# ------------------------------------------------------------------- models
def _json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    msg = f"cannot store {type(value).__name__} in model.json"
    raise TypeError(msg)


def _write_version(folder, meta, stats, solution):
    folder.mkdir(parents=True)
    meta = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, **meta}
    (folder / "model.json").write_text(json.dumps(meta, indent=2, default=_json_default))
    stats.save(folder / "stats.npz")
    with open(folder / "solution.npz", "wb") as f:
        np.savez(f, **solution)
    for item in folder.iterdir():
        _fsync(item)
    _fsync(folder)


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _current_version(path):
    pointer = path / _CURRENT
    if not pointer.is_file():
        return None
    return pointer.read_text().strip()


def write_model(path, meta, stats, solution):
    """Write a model version; returns its name. Old versions beyond the previous one are pruned.

    The caller holds :func:`model_lock` when the model exists already.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        msg = f"{path} exists and is not a model directory"
        raise ModelError(msg)
    if path.exists() and any(path.iterdir()) and _current_version(path) is None:
        msg = f"{path} exists and is not a streamproj model directory; choose another path"
        raise ModelError(msg)
    if not path.exists() or _current_version(path) is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
        try:
            _write_version(tmp / "v000001", meta, stats, solution)
            (tmp / _CURRENT).write_text("v000001\n")
            if path.exists():  # an empty folder (e.g. made for the lock) is replaced
                path.rmdir()
            os.rename(tmp, path)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return "v000001"
    current = _current_version(path)
    number = int(current.lstrip("v")) + 1
    name = f"v{number:06d}"
    staging = path / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        _write_version(staging, meta, stats, solution)
        os.rename(staging, path / name)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    pointer_tmp = path / f".{_CURRENT}.tmp-{uuid.uuid4().hex[:8]}"
    pointer_tmp.write_text(name + "\n")
    _fsync(pointer_tmp)
    os.replace(pointer_tmp, path / _CURRENT)
    _fsync(path)
    for old in path.glob("v[0-9]*"):
        if old.name not in (name, current):
            shutil.rmtree(old, ignore_errors=True)
    return name


def read_model(path):
    """Read the live version of a model directory.

    Returns
    -------
    meta : dict
    stats : ClassStats
    solution : dict of str to ndarray
    """
    path = Path(path)
    if not path.is_dir():
        msg = f"no model at {path}"
        raise ModelError(msg)
    current = _current_version(path)
    if current is None:
        msg = f"{path} is not a streamproj model directory (no {_CURRENT} file)"
        raise ModelError(msg)
    folder = path / current
    try:
        meta = json.loads((folder / "model.json").read_text())
        with np.load(folder / "solution.npz", allow_pickle=False) as data:
            solution = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        msg = f"model {path} (version {current}) is damaged: {exc}"
        raise ModelError(msg) from None
    if meta.get("format") != MODEL_FORMAT:
        msg = f"{path} is not a streamproj model (format {meta.get('format')!r})"
        raise ModelError(msg)
    if meta.get("format_version", 0) > MODEL_FORMAT_VERSION:
        msg = f"model {path} was written by a newer streamproj (format {meta['format_version']}); upgrade streamproj"
        raise ModelError(msg)
    stats = ClassStats.load(folder / "stats.npz")
    meta["version"] = current
    return meta, stats, solution


@contextlib.contextmanager
def model_lock(path):
    """Hold an exclusive lock on a model for a read–merge–write cycle.

    Two jobs updating one model run one after the other, so neither batch is
    lost. (POSIX ``flock``: reliable on local disks; on NFS check that locks work.)
    """
    path = Path(path)
    # A sibling file, so the lock is the same before and after the model first exists.
    lock_path = path.parent / f".{path.name}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
