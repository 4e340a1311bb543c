"""Zarr inputs and outputs, boundary files and the model directory — all file I/O lives here.

What is atomic where
--------------------
*Local model directory* (``MODEL``)::

    MODEL/
      CURRENT            name of the live version, e.g. "v000003"
      v000003/
        model.json       parameters, classes, identity, sources merged, history
        stats.npz        the mergeable ClassStats
        solution.npz     components, center, coef, intercept, classes (and the
                         classes declared to partial_fit, when any were)
        summaries/       one NPZ per source of the ledger (``s000001.npz``, …): that
                         source's own ClassStats, read only when a job needs it

A new version is written completely into a hidden staging folder, renamed to
``vNNNNNN`` and only then named by ``CURRENT`` (replaced with ``os.replace``,
atomic), so a reader or a job killed at any point sees the old model or the
new one. Its ``.uncommitted`` marker, dropped once the version is complete and
just before ``CURRENT`` names it, tells a killed write's orphan from a version
the user rolled back from by hand (kept). A source's summary that a new version keeps unchanged is hard-linked
from the version before (copied where the file system has no hard links): a
nightly update writes its new source's summary, not every source's again.
Writers hold the lock file ``.MODEL.lock`` beside the model's real path
(symlinks resolved), and ``MODEL/.lock`` once it is a model, from before they
read ``CURRENT`` until they are done, and delete them on release (a user who
may not write the parent folder holds the inner one alone). A model written
for the first time is built in a hidden sibling and renamed into place.

*Object-store model* (``s3://…/MODEL``): the same layout; ``CURRENT`` is one
small object written last with a single PUT (atomic on S3), and before it is
written the job checks that nobody moved ``CURRENT`` since it read the model.
On S3 a version's first object is created only where none is (``If-None-Match``),
so two jobs that chose the same version name never write into one version (a
store that does not implement the condition, and other stores, get a plain PUT).

*Local output*: written in a hidden sibling ``.OUT.tmp-…`` and swapped into
place at the end — on Linux with one ``renameat2(RENAME_EXCHANGE)`` (atomic),
elsewhere with two renames whose gap is repaired by the next writer (the old
output is put back).

*Appending to an output* (``project --append``) builds the new output the same
way, from a copy of the old one: locally a folder of hard links to its chunk
files (metadata files and each array's last, partial chunk are copied, so no
write can reach the live output), on an object store a server-side copy of its
current version. The copy is grown and swapped in like a new output, so a
killed append leaves the output as it was, and costs O(files) links, not a
rewrite of the rows.

*Object-store output*: ``OUT/zarr.json`` is a pointer to a complete version
``OUT/v…/``; a new output is written under a fresh version prefix and the
pointer (one small object) is switched last, so the old output stays readable
until the new one is complete. Readers go through :func:`open_output`.

Leftovers of killed jobs (hidden ``.tmp-``/``.old-`` folders, orphan versions,
lock files) are removed by the next writer of the same model or output, never
those of a writer that is still alive.
"""

import collections.abc
import contextlib
import datetime as _dt
import errno
import hashlib
import io
import json
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
import time
import urllib.parse
import uuid
import warnings
import weakref
import zipfile
from pathlib import Path

import numpy as np
import zarr

from .direct import direct_reader
from .errors import InputError, ModelError, OutputExistsError, StorageError, StreamprojError
from .record import ModelRecord
from .stats import ClassStats
from .validation import check_matrix

__all__ = [
    "MODEL_FORMAT",
    "OUTPUT_NODES",
    "PROJECTION_NAMES",
    "Summaries",
    "check_disjoint",
    "check_ledger",
    "check_not_held",
    "check_output_reachable",
    "check_output_whole",
    "check_replaceable",
    "check_writable_location",
    "create_output_array",
    "expand_user",
    "foreign_folder",
    "foreign_inside",
    "grow_output_array",
    "is_local",
    "local_kind",
    "local_path",
    "local_state",
    "looks_like_output",
    "misspelt_url",
    "model_exists",
    "model_lock",
    "normalise",
    "open_input",
    "open_output",
    "output_group",
    "overlaps",
    "read_boundary",
    "read_model",
    "read_model_meta",
    "read_output_frame",
    "read_record",
    "read_record_and_summaries",
    "read_summaries",
    "refuse_foreign_append",
    "restore_interrupted",
    "storage_errors",
    "storage_options",
    "stored_rows",
    "tidy_output",
    "timestamp",
    "write_bytes",
    "write_coordinate",
    "write_model",
    "write_output_frame",
    "write_record",
]

MODEL_FORMAT = "streamproj-model"
MODEL_FORMAT_VERSION = 1
OUTPUT_FORMAT = "streamproj-output"
#: Names of an output's coordinates array: the contract's first; 0.1 wrote ``coords``.
PROJECTION_NAMES = ("projection", "coords")
# The output's subgroup holding the model it was projected with (write_output_frame).
_FRAME = "frame"
_CURRENT = "CURRENT"
# model.json's name of the version a version was written from (its pruning follows that chain)
_PREVIOUS = "previous_version"
_VERSION = re.compile(r"^v\d{6}$")
_OUT_VERSION = re.compile(r"^v\d{14}-[0-9a-f]{8}$")
# Object-store calls fail in seconds, not minutes, when the endpoint is unreachable.
REMOTE_TIMEOUT = 10
# A leftover on an object store (no lock, no pid to check) is stale after this long.
REMOTE_STALE_SECONDS = 3600
_HOST = socket.gethostname().replace("-", "_")[:40] or "host"


def timestamp():
    """The current UTC time as recorded in models and outputs (ISO 8601, seconds)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# ------------------------------------------------------------ paths, URLs
def is_local(url):
    """True for a plain path or a ``file://`` URL."""
    return "://" not in str(url) or str(url).startswith("file://")


def expand_user(path: object) -> str:
    """A local path with a leading ``~`` or ``~user`` expanded; one that cannot be is refused.

    ``Path.expanduser`` raised RuntimeError there (a traceback) and
    ``os.path.expanduser`` leaves it as written (a folder named ``~nosuchuser``
    made in the working folder); every local path streamproj reads or writes
    is expanded here.

    Raises
    ------
    InputError
        No such user, or (a plain ``~``) no home folder.
    """
    text = os.fspath(path) if isinstance(path, os.PathLike) else str(path)
    if not text.startswith("~"):
        return text
    expanded = os.path.expanduser(text)
    if expanded == text:
        user = re.split(r"[/\\]", text, maxsplit=1)[0][1:]
        if user and os.path.lexists(re.split(r"[/\\]", text, maxsplit=1)[0]):
            return text  # a folder of that name here ("~tmp"): read as it is named
        why = f"there is no user {user!r}" if user else "there is no home folder (HOME is not set)"
        msg = f"cannot expand ~{user} in {text}: {why}; give the full path"
        raise InputError(msg)
    return expanded


def local_path(url: object) -> Path:
    """The path a plain path or ``file://`` URL names (``~`` expanded, links kept).

    ``expand_user`` alone kept the ``file://``: the path "did not exist".
    """
    url = str(url)
    return Path(expand_user(url[len("file://") :] if url.startswith("file://") else url))


def _real(url):
    """The absolute path with every symlink resolved (the path need not exist)."""
    return Path(os.path.realpath(local_path(url)))


def normalise(url):
    """A canonical name for a location: the real path, or the URL with one spelling."""
    if is_local(url):
        return str(_real(url))
    protocol, rest = str(url).split("://", 1)
    protocol = protocol.lower()
    protocol = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}.get(protocol, protocol)
    rest = re.sub(r"/+", "/", rest).strip("/")
    return f"{protocol}://{rest}"


def overlaps(a: object, b: object) -> bool:
    """True when locations ``a`` and ``b`` are one, or one lies inside the other."""
    return _inside(a, b) or _inside(b, a)


def _inside(a, b):
    """True when location ``a`` is ``b`` or lies inside it."""
    a, b = normalise(a), normalise(b)
    if is_local(a) != is_local(b):
        return False
    return a == b or a.startswith(b.rstrip("/") + "/")


# Protocols whose writes do not outlive the process: a model or output there is lost.
_TRANSIENT = ("memory://",)


def check_writable_location(url: object, role: str = "output") -> None:
    """Refuse a place to write that would silently not be what was meant.

    A local name that starts like a URL without its ``//`` (``s3:/bucket/m``,
    ``s3:bucket/m``, ``gs:x``) would create a local folder named ``s3:``; a
    ``memory://`` URL keeps nothing once the command ends.
    """
    text = str(url)
    if not text.strip():  # '' is the current folder to os and pathlib: never what was meant
        msg = f"the {role} path is empty; give a folder or file name"
        raise InputError(msg)
    if text.lower().startswith(_TRANSIENT):
        msg = (f"the {role} {text} is in memory only and would be lost when the command "
               "ends; give a local path or a persistent URL (s3://, gs://, file://)")
        raise InputError(msg)
    meant = misspelt_url(text)
    if meant is not None:
        msg = (f"the {role} {text} looks like a URL missing '//' (did you mean "
               f"{meant}?); nothing was written")
        raise InputError(msg)


def misspelt_url(text: str) -> str | None:
    """The URL a local name that starts like one without its ``//`` meant; None for other names.

    ``s3:/bucket/m`` and ``s3:bucket/m`` would be a local folder named ``s3:``
    (a drive letter, ``C:``, is a name):

    >>> misspelt_url("s3:/bucket/m"), misspelt_url("s3:bucket/m"), misspelt_url("data/m")
    ('s3://bucket/m', 's3://bucket/m', None)

    A ``file:`` path keeps its leading slash (``file://tmp/x`` is the relative
    ``tmp/x``):

    >>> misspelt_url("file:/tmp/x")
    'file:///tmp/x'
    """
    if not is_local(text) or text.startswith("file://"):
        return None
    first = text.split("/", 1)[0].split(os.sep, 1)[0]
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]+:.*", first) and not re.fullmatch(r"[A-Za-z]:.*", first):
        scheme = first.split(":", 1)[0]
        rest = text[len(scheme) + 1:]
        return f"{scheme}://{rest if scheme.lower() == 'file' else rest.lstrip('/')}"
    return None


def check_not_held(url: object, role: str = "output") -> None:
    """Refuse a local place to write inside a model, an output or an array (:func:`_holder_above`)."""
    holder = _holder_above(url) if is_local(url) else None
    if holder is not None:
        kind, where = holder
        fate = {"model": "the model's next updates remove its old versions, and anything in them",
                "streamproj output": "its next --append or --overwrite refuses what it did not "
                                     "write",
                "Zarr array": "an array's folder holds its chunks alone"}[kind]
        msg = f"the {role} {url} is inside the {kind} {where} ({fate}); choose a place outside it"
        raise InputError(msg)


def _is_model_dir(folder):
    """Whether ``folder`` is a model directory: its ``CURRENT`` and a ``vNNNNNN`` version.

    (A ``CURRENT`` file alone is other software's too: LevelDB keeps one.)
    """
    return (folder / _CURRENT).is_file() and any(
        _VERSION.match(e.name) and e.is_dir() for e in folder.iterdir())


def _holder_above(url):
    """``(kind, folder)`` of the nearest folder above ``url`` that nothing else may be written in.

    By the path as given and with links resolved: a model directory (its
    ``CURRENT`` and a ``vNNNNNN`` version), a streamproj output (a Zarr group
    with streamproj's attributes), or a Zarr array. A plain Zarr group holds
    whatever its user puts there (outputs as child groups of a project's
    store among them), so it is no holder. None when there is none.
    """
    given = Path(os.path.abspath(local_path(url)))
    seen: set[Path] = set()
    for start in (given, _real(url)):
        for folder in start.parents:
            if folder in seen:
                continue
            seen.add(folder)
            try:
                if _is_model_dir(folder):
                    return "model", folder
                if (folder / ".zarray").is_file():
                    return "Zarr array", folder
                meta = folder / "zarr.json"
                if meta.is_file():
                    node = json.loads(meta.read_bytes())
                    if isinstance(node, dict) and node.get("node_type") == "array":
                        return "Zarr array", folder
                    attrs = node.get("attributes") if isinstance(node, dict) else None
                    if isinstance(attrs, dict) and isinstance(attrs.get("streamproj"), dict):
                        return "streamproj output", folder
            except (OSError, ValueError):  # (unreadable: holds nothing we know of)
                continue
    return None


def check_disjoint(*named: tuple[str, object], held: bool = True) -> None:
    """Refuse when two of the named locations overlap (equal, or one inside the other).

    Parameters
    ----------
    named : (str, str or None)
        ``(role, location)`` pairs, e.g. ``("input", "data.zarr")``; None is skipped.
    held : bool
        Also refuse an output or a figure inside a model, a streamproj output
        or a Zarr array (:func:`check_not_held`; a model is read as often as
        written, so its writers call that themselves); a caller with more
        places to compare first passes False and calls it itself.
    """
    given = [(role, url) for role, url in named if url is not None]
    for role, url in given:
        if role in ("model", "output", "figure"):
            check_writable_location(url, role)
    for i, (role_a, a) in enumerate(given):
        for role_b, b in given[i + 1 :]:
            if _inside(a, b) or _inside(b, a):
                relation = "is" if normalise(a) == normalise(b) else (
                    "is inside" if _inside(a, b) else "contains")
                msg = (f"the {role_a} {a} {relation} the {role_b} {b}; they must not overlap "
                       f"(choose another {role_b if role_b in ('output', 'model') else role_a})")
                raise InputError(msg)
    for role, url in given if held else ():  # (after the overlaps, which name both places)
        if role in ("output", "figure") or role.startswith("[output] path"):
            check_not_held(url, role)


def _storage_options(url, given=None):
    options = dict(given or {})
    if str(url).lower().startswith(("s3://", "s3a://")):
        config = {"connect_timeout": REMOTE_TIMEOUT, "read_timeout": 6 * REMOTE_TIMEOUT,
                  "retries": {"max_attempts": 3, "mode": "standard"}}
        options["config_kwargs"] = {**config, **options.get("config_kwargs", {})}
    return options


def storage_options(url):
    """Fsspec options streamproj uses for ``url`` (short timeouts on object stores)."""
    return _storage_options(url)


def _fs(url):
    """An fsspec filesystem and the path of ``url`` in it."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(str(url), **_storage_options(url))
    except (ImportError, ValueError) as exc:
        msg = f"cannot open {url}: {exc}"
        raise InputError(msg) from None


def _is_expected(exc):
    """Errors of a broken file or an unreachable store, as opposed to streamproj's own."""
    return isinstance(exc, Exception) and not isinstance(exc, StreamprojError)


@contextlib.contextmanager
def storage_errors(where):
    """Turn an OS error (permission, read-only, full disk, …) into a one-line StorageError."""
    try:
        yield
    except StreamprojError:
        raise
    except OSError as exc:
        raise StorageError(_describe_os_error(exc, where)) from None


def _describe_os_error(exc, where):
    path = exc.filename or where
    reason = exc.strerror or str(exc) or type(exc).__name__
    hints = {errno.ENOSPC: "free some space or write elsewhere",
             errno.EROFS: "the file system is read-only; write elsewhere",
             errno.EACCES: "you lack permission there",
             errno.EPERM: "you lack permission there"}
    hint = hints.get(exc.errno)
    return f"cannot write {where}: {reason}: {path}" + (f" ({hint})" if hint else "")


# ----------------------------------------------------------- liveness
def _tag():
    """A unique suffix naming this writer: host, pid, random."""
    return f"{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


# The names streamproj's writers give their temporaries: ``….tmp-HOST-PID-8hex`` / ``.old-``.
_LEFTOVER = re.compile(r"\.(?:tmp|old)-(.+)-(\d+)-[0-9a-f]{8}$")


def _dead_leftover(name):
    """True for a temporary a streamproj writer named (:func:`_tag`) that no live one holds.

    Anything else — a user's ``.OUT.tmp-backup`` included — is not ours to remove.
    """
    return _LEFTOVER.search(name) is not None and not _alive(name)


def _alive(name):
    """False when a leftover's name says it was made by a dead process on this host."""
    match = _LEFTOVER.search(name)
    if not match:
        return False
    host, pid = match.group(1), int(match.group(2))
    if host != _HOST or os.name == "nt":  # (os.kill would end a Windows process)
        return False  # cleaned only under the lock, so no writer of another host is live
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _remove_straggling(path, wait=0.2):
    """Remove a failed write's folder, again if Zarr's own writer threads re-create it."""
    _remove(path)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if path.exists():
            _remove(path)


def _fsync(path):
    with contextlib.suppress(OSError):  # not every OS or file system syncs folders
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _exchange(src, dest):
    """Atomically swap two existing folders (Linux ``renameat2``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dest), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(dest))


def _swap_in(src, dest):
    """Put the finished folder ``src`` at ``dest``, replacing what is there.

    One atomic exchange where the platform has it; else two renames, and the
    next writer puts the old folder back if a kill falls between them
    (:func:`_recover`).
    """
    if not dest.exists():
        os.rename(src, dest)
    elif _exchange(src, dest):
        _remove(src)  # now holds the old one
    else:
        old = dest.parent / f".{dest.name}.old-{_tag()}"
        os.rename(dest, old)
        try:
            os.rename(src, dest)
        except BaseException:
            # a failed write changes nothing: the old folder back (else the next writer does)
            with contextlib.suppress(OSError):
                os.rename(old, dest)
            raise
        _remove(old)
    _fsync(dest.parent)


def _fill_empty(src, dest, url, role="output", was="an empty folder"):
    """Put the finished folder ``src`` at ``dest``, an empty folder (or nothing) when the write began.

    A POSIX ``rename`` replaces an empty folder in one step and refuses one that
    is not empty: a file put there during the pass is never lost with the folder
    (a swap would have deleted it with the old folder), and there is no moment
    with nothing at ``dest`` (``rmdir`` then ``rename`` left one: a kill between
    them lost the folder). Windows renames onto no folder, so there it is
    removed with ``rmdir`` first, which refuses a folder that is not empty too.
    ``role``: "output" or "model", as said in the refusal (an
    :class:`OutputExistsError` or a :class:`ModelError`); ``was``: what was at
    ``dest`` when the write began, as said there.
    """
    try:
        if os.name == "nt":
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(dest)
        os.rename(src, dest)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise  # (a mount point, permissions: said by storage_errors)
        other = "another output" if role == "output" else "another path"
        msg = (f"{role} {url} was {was} when the write began but now holds something; "
               f"it was left untouched: empty it, or choose {other}")
        raise (OutputExistsError if role == "output" else ModelError)(msg) from None
    _fsync(dest.parent)


def check_replaceable(url: object, role: str = "output") -> None:
    """Refuse, before a pass, a local output or new model folder no rename can replace.

    An output folder is always replaced by its finished copy; a model folder
    only while empty (a model's versions are added inside it). See
    :func:`_refuse_unreplaceable`; a no-op for object stores.
    """
    if not is_local(url):
        return
    dest = _real(url)
    with storage_errors(f"{role} {url}"):
        if role == "model" and dest.is_dir() and any(dest.iterdir()):
            return
        _refuse_unreplaceable(dest, url, role)


def _refuse_unreplaceable(dest, url, role="output"):
    """Refuse, before any work, a folder the finished write could not be renamed onto.

    The current folder (or one holding it): the rename would leave the shell
    that ran the command in a deleted folder, where a second run said only
    "No such file or directory". A mount point: no rename replaces it, so the
    refusal came only after the whole pass. Raises :class:`InputError`.
    """
    try:
        here = Path(os.path.realpath(os.getcwd()))  # (resolved as ``dest`` is: Windows keeps
        # a subst drive or a junction in getcwd)
    except OSError:  # the current folder was deleted: it cannot be ``dest``
        here = None
    if here is not None and (here == dest or dest in here.parents):
        which = "is the current folder" if here == dest else "holds the current folder"
        msg = (f"{role} {url} {which}: a finished write replaces that folder, which would "
               f"leave your shell in a deleted one; run the command from outside it (from "
               f"{dest.parent}, name it {dest.name})")
        raise InputError(msg)
    if dest.is_dir() and os.path.ismount(dest):
        msg = (f"{role} {url} is a mount point: a finished write cannot be renamed onto it; "
               f"name a folder inside it (e.g. {dest / ('out.zarr' if role == 'output' else 'model')})")
        raise InputError(msg)


def _inherit_permissions(old, new):
    """Give the finished copy ``new`` the owner and permissions of the output ``old`` it replaces.

    The copy is made under the process's umask: a user who restricted the output
    (``chmod 700``, a group folder) would find it opened up after every write.
    Folders take the old root's mode, new files that of its ``zarr.json``; files
    shared with ``old`` (hard links) already have theirs. Nothing to do, and no
    walk, when the old output has what the copy got (its root and its own
    ``zarr.json``, written fresh): the usual case.
    """
    st = os.stat(old)
    meta = old / "zarr.json"
    dir_mode = stat.S_IMODE(st.st_mode)
    file_mode = stat.S_IMODE(os.stat(meta).st_mode) if meta.exists() else dir_mode & 0o666
    owner = (st.st_uid, st.st_gid)
    got, got_meta = os.stat(new), os.stat(new / "zarr.json")
    if (dir_mode, file_mode, owner) == (stat.S_IMODE(got.st_mode), stat.S_IMODE(got_meta.st_mode),
                                        (got.st_uid, got.st_gid)):
        return
    for root, _dirs, files in os.walk(new):
        _set_permissions(root, dir_mode, owner)
        for name in files:
            path = os.path.join(root, name)
            if os.stat(path).st_nlink == 1:
                _set_permissions(path, file_mode, owner)


def _take_permissions(old, new):
    """Give the tree ``new`` the owner and mode of the empty folder ``old`` it fills (files less x).

    Made under the umask, a new model took a private folder's place world-readable.
    """
    st = os.stat(old)
    mode, owner = stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)
    for root, _dirs, files in os.walk(new):
        _set_permissions(root, mode, owner)
        for name in files:
            _set_permissions(os.path.join(root, name), mode & 0o666, owner)


def _set_permissions(path, mode, owner):
    info = os.stat(path)
    if (info.st_uid, info.st_gid) != owner:
        # the owner where allowed (root), else the group (a member may), else as made
        for uid, gid in (owner, (-1, owner[1])):
            try:
                os.chown(path, uid, gid)
                break
            except PermissionError:
                continue
    os.chmod(path, mode)  # after chown, which clears setgid bits


def _recover(dest):
    """Repair what a killed writer left beside ``dest``; call with ``dest``'s lock held.

    A kill between the two renames of a replacement leaves ``dest`` missing and
    the old folder in ``.NAME.old-…``: it is put back. Other leftovers of dead
    writers are removed.
    """
    if not dest.parent.is_dir():
        return
    prefix = f".{dest.name}."
    leftovers = [p for p in dest.parent.iterdir()
                 if p.name.startswith(prefix) and _dead_leftover(p.name)]
    olds = sorted((p for p in leftovers if p.name.startswith(prefix + "old-")),
                  key=lambda p: p.stat().st_mtime)
    if olds and not dest.exists() and not dest.is_symlink():
        os.rename(olds[-1], dest)
        leftovers.remove(olds[-1])
    for p in leftovers:
        _remove(p)


# ------------------------------------------------------------------ locks
@contextlib.contextmanager
def _lock_file(lock_path):
    """Hold an exclusive lock on ``lock_path``; the file is deleted on release.

    POSIX: ``flock``, re-checked after waking that the file is still the one
    named ``lock_path`` (a holder deletes it on release), so deleting lock
    files is safe. Windows: the ``filelock`` package.
    """
    if os.name == "nt":  # pragma: no cover
        from filelock import FileLock

        with FileLock(str(lock_path)):
            yield
        return
    import fcntl  # POSIX only; imported here so the module loads on Windows

    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except IsADirectoryError:
            msg = (f"cannot take the lock {lock_path}: it is a folder, not streamproj's lock "
                   "file; move it away")
            raise StorageError(msg) from None
        except PermissionError as denied:
            # another user's lock file: flock works on a read-only handle; if there is
            # none to open, the folder itself is not writable: say that, not "missing"
            try:
                fd = os.open(lock_path, os.O_RDONLY)
            except FileNotFoundError:
                raise denied from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                named = os.stat(lock_path)
            except FileNotFoundError:
                named = None
        except BaseException:
            os.close(fd)
            raise
        if named is not None and (named.st_ino, named.st_dev) == (held.st_ino, held.st_dev):
            break
        os.close(fd)  # the holder before us deleted it: lock the new file
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        os.close(fd)


def _lock_path(url):
    if is_local(url):
        real = _real(url)
        return real.parent / f".{real.name}.lock"
    # No locks on object stores: serialise the writers of this machine at least.
    digest = hashlib.blake2b(normalise(url).encode(), digest_size=12).hexdigest()
    folder = Path(tempfile.gettempdir()) / "streamproj-locks"
    folder.mkdir(exist_ok=True)
    return folder / f"{digest}.lock"


def _make_parents(path, url, what):
    """Create the missing parents of ``path``; returns them, deepest first.

    One of them a file: one line naming it (mkdir's "File exists" named neither it nor why).
    """
    made = []
    parent = path.parent
    while not parent.exists():
        made.append(parent)
        parent = parent.parent
    if not parent.is_dir():
        msg = f"cannot write {what} {url}: {parent} is a file, not a folder; choose a path outside it"
        raise StorageError(msg)
    path.parent.mkdir(parents=True, exist_ok=True)
    return made


# A local model's second lock, inside it: its writers take turns even where its parent
# folder (which holds the first, ``.MODEL.lock``) is closed to some of them.
_INNER_LOCK = ".lock"


@contextlib.contextmanager
def _locked(url, what, inner=False):
    """Hold the lock of ``url``; ``inner``: that inside the model folder too, once it is one.

    The lock beside the folder is taken first (a first fit has no folder to
    lock yet), then the inner one; a user who may not write the parent but may
    write the model takes the inner lock alone, which every writer of an
    existing model takes, so they still run one after the other.
    """
    made = []
    try:
        with contextlib.ExitStack() as stack:
            with storage_errors(f"the lock of {what} {url}"):
                local = is_local(url)
                if local:
                    made = _make_parents(_real(url), url, what)
                try:
                    stack.enter_context(_lock_file(_lock_path(url)))
                except PermissionError:
                    if not (inner and local and _is_model_dir(_real(url))):
                        raise
                if inner and local and _is_model_dir(_real(url)):
                    stack.enter_context(_lock_file(_real(url) / _INNER_LOCK))
            yield
    finally:
        if made and not _real(url).exists():
            for folder in made:  # folders made for a job that wrote nothing
                with contextlib.suppress(OSError):
                    folder.rmdir()


def check_output_reachable(url):
    """Refuse an output that could not be written, before a job writes anything else.

    A local one: its lock file is made and removed (its missing folders too),
    which fails where the folder cannot be created or written. On S3: its
    bucket must exist and answer (a store that cannot be listed, or denies
    only the write, shows that when the output is written).
    A nightly ``run`` checks this before its model step, which used to commit
    the model and then fail on the output.
    """
    if is_local(url):
        check_replaceable(url)
        with _locked(url, "output"):
            return
    fs, root = _fs(url)
    if "s3" not in fs.protocol:  # (other stores: their first write tells)
        return
    bucket, _, prefix = root.strip("/").partition("/")
    try:  # what a writer allowed under the prefix alone may ask; fs.exists(bucket) is not
        fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except FileNotFoundError:
        msg = f"cannot write output {url}: there is no bucket {bucket!r}"
        raise StorageError(msg) from None
    except PermissionError:
        return  # not allowed to list: a write may still be
    except Exception as exc:
        if not _is_expected(exc):
            raise
        msg = f"cannot reach output {url}: {type(exc).__name__}: {_short(exc)}"
        raise StorageError(msg) from None


@contextlib.contextmanager
def model_lock(path):
    """Hold the model's exclusive lock for a read–merge–write cycle.

    Keyed on the real path (symlinks resolved), so two jobs reaching one model
    by different names still run one after the other; take it before reading
    the current version. Leftovers of killed writers are cleaned on entry.
    """
    with _locked(path, "model", inner=True):
        if is_local(path):
            with storage_errors(f"model {path}"):
                if _is_model_dir(_real(path)):  # (before any work, and before leftovers go)
                    _refuse_read_only_model(_real(path), path)
                _recover(_real(path))
                _clean_model(_real(path))
        yield


# ------------------------------------------------------------------- inputs
def _open_group(url, mode="r", storage_options=None, use_consolidated=None):
    if is_local(url) and not local_path(url).exists():
        msg = f"no such input: {url}"
        raise InputError(msg)
    try:
        return zarr.open_group(
            str(local_path(url)) if is_local(url) else url,
            mode=mode,
            storage_options=None if is_local(url) else _storage_options(url, storage_options),
            use_consolidated=use_consolidated,
        )
    except FileNotFoundError:
        if is_local(url) and _is_model_dir(local_path(url)):  # (a pattern that matched a model)
            msg = (f"{url} is a streamproj model directory, not input rows; if a pattern "
                   "matched it, narrow the pattern to leave the model out")
            raise InputError(msg) from None
        msg = f"no Zarr group at {url}"
        raise InputError(msg) from None
    except Exception as exc:
        if not _is_expected(exc):
            raise
        msg = f"{url} is not a readable Zarr group (its zarr.json: {type(exc).__name__}: {_short(exc)})"
        raise InputError(msg) from None


def _short(exc):
    return " ".join(str(exc).split())[:300]


def _array(group, url, name, flag):
    try:
        arr = group[name]
    except KeyError:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            names = sorted(group.array_keys())
        if caught:  # zarr met metadata it could not read (a damaged zarr.json) and warned
            msg = (f"{url} has no readable array {name!r} (arrays: {', '.join(names) or 'none'}; "
                   f"zarr could not read some metadata: {_short(caught[0].message)}); "
                   f"check {url}/{name}/zarr.json")
            raise InputError(msg) from None
        if isinstance(group.attrs.get("streamproj"), dict):  # (a pattern that matched an output)
            msg = (f"{url} is a streamproj output (projected coordinates), not input rows; if a "
                   "pattern matched it, narrow the pattern to leave the outputs out")
            raise InputError(msg) from None
        msg = (
            f"{url} has no array {name!r} (arrays: {', '.join(names) or 'none'}); "
            f"name the right one with {flag}"
        )
        raise InputError(msg) from None
    except Exception as exc:
        if not _is_expected(exc):
            raise
        msg = f"{url}/{name} is not a readable Zarr array (its zarr.json: {type(exc).__name__}: {_short(exc)})"
        raise InputError(msg) from None
    if not isinstance(arr, zarr.Array):
        msg = f"{url}/{name} is a group, not an array"
        raise InputError(msg)
    return arr


class CheckedArray:
    """A Zarr array whose reads name the array and rows when a chunk cannot be decoded.

    Dask reads it chunk by chunk like the Zarr array it wraps; a corrupt or
    truncated chunk raises :class:`InputError` instead of a codec traceback.
    """

    def __init__(self, array, label):
        self.array, self.label = array, label
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim
        self.chunks = array.chunks
        self._token = uuid.uuid4().hex
        # whole chunks of zarr's default layout decoded in place (the rest, and every error,
        # by zarr): validation's readers cannot see the Zarr array inside this wrapper
        self._read = direct_reader(array)

    def __len__(self):
        return self.shape[0]

    @property
    def whole_chunks(self):
        """True where reads of one whole chunk each are the fast ones (see :mod:`.direct`)."""
        return bool(getattr(self._read, "whole_chunks", False))

    def __dask_tokenize__(self):
        return ("streamproj-checked", self.label, self.shape, str(self.dtype), self._token)

    def __array__(self, dtype=None, copy=None):
        data = self[...]
        return data if dtype is None else data.astype(dtype)

    def __getitem__(self, key):
        try:
            return self._read[key]
        except Exception as exc:
            if not _is_expected(exc):
                raise
            rows = _rows_of(key, self.shape[0])
            msg = (f"{self.label}: rows {rows} cannot be read ({type(exc).__name__}: {_short(exc)}); "
                   "a chunk file is corrupt or truncated: restore it or rewrite the array")
            raise InputError(msg) from None


def _rows_of(key, n):
    first = key[0] if isinstance(key, tuple) and key else key
    if isinstance(first, slice):
        start, stop, _ = first.indices(n)
        return f"{start}..{stop - 1}"
    if isinstance(first, int | np.integer):
        return str(int(first))
    return f"0..{n - 1}"


def _first_missing_chunk(arr):
    """Row range of the first chunk (shard) of ``arr`` that has no file, or None.

    A sharded array's stored shards are searched too, for a chunk their index
    does not hold: zarr counts every chunk of a stored shard as written.
    """
    if arr.nchunks_initialized >= arr.nchunks and not arr.shards:
        return None
    try:
        from zarr.core.array import _shards_initialized
        from zarr.core.sync import sync

        present = set(sync(_shards_initialized(arr._async_array)))
        keys = list(arr._async_array._iter_shard_keys())
        coords = list(arr._async_array._iter_shard_coords())
        inner = _first_unwritten_in_shards(arr, [(k, c) for k, c in zip(keys, coords, strict=True)
                                                 if k in present]) if arr.shards else None
    except (ImportError, AttributeError):  # zarr internals moved: name no rows
        return (0, arr.shape[0] - 1)
    rows = (arr.shards or arr.chunks)[0]
    for key, coord in zip(keys, coords, strict=True):
        if key not in present:
            start = coord[0] * rows
            if inner is None or start < inner[0]:
                return (start, min(start + rows, arr.shape[0]) - 1)
            break
    return inner


def _first_unwritten_in_shards(arr, shards):
    """Row range of the first chunk that the index of a stored shard does not hold, or None.

    ``shards``: the (key, shard coordinates) of the stored shards. One read of
    each shard's index (its last or first bytes), all at once.
    """
    import asyncio

    from zarr.codecs.sharding import ShardingCodec
    from zarr.core.sync import sync

    codec = next((c for c in arr.metadata.codecs if isinstance(c, ShardingCodec)), None)
    if codec is None or not shards:
        return None
    per_shard = tuple(s // c for s, c in zip(arr.shards, arr.chunks, strict=True))
    grid = np.array([-(-n // c) for n, c in zip(arr.shape, arr.chunks, strict=True)])
    where = arr._async_array.store_path

    async def indexes():
        return await asyncio.gather(*[codec._load_shard_index_maybe(where / key, per_shard)
                                      for key, _ in shards])

    first = None  # (the lowest row of all: shards side by side across the columns too)
    for (_, coord), index in zip(shards, sync(indexes()), strict=True):
        if index is None:  # (gone since it was listed: read as missing by the reader)
            continue
        unwritten = np.argwhere(~index.get_full_chunk_map()) + np.multiply(coord, per_shard)
        unwritten = unwritten[(unwritten < grid).all(axis=1)]  # (past the array's end: never stored)
        if unwritten.size:
            band = int(unwritten[:, 0].min())
            first = band if first is None else min(first, band)
    if first is None:
        return None
    start = first * arr.chunks[0]
    return (start, min(start + arr.chunks[0], arr.shape[0]) - 1)


def _check_chunks(arr, label):
    missing = _first_missing_chunk(arr)
    if missing is not None:
        fill = np.asarray(arr.fill_value).item()  # 0.0, not numpy's repr np.float64(0.0)
        msg = (f"{label}: the chunk file of rows {missing[0]}..{missing[1]} is missing (deleted, "
               f"or never written because it held only the fill value {fill!r}); "
               "pass --allow-missing-chunks to read missing chunks as the fill value")
        raise InputError(msg)


def stored_rows(url, x="X"):
    """Rows of the Zarr array ``x`` of the group at ``url``, from its metadata file alone.

    One small read (``zarr.json``, or v2's ``.zarray``) instead of opening
    the group; None when that cannot tell (no such file, consolidated or
    unusual layouts): the caller then opens the input.
    """
    name = "/".join(p for p in str(x).split("/") if p not in ("", "."))
    if not name or ".." in name.split("/"):
        return None
    try:
        fs, root = _fs(url)
    except InputError:
        return None
    for meta in ("zarr.json", ".zarray"):
        try:
            doc = json.loads(fs.cat_file(f"{str(root).rstrip('/')}/{name}/{meta}"))
        except Exception:  # absent, unreadable, not JSON: an optimisation, so "cannot tell"
            continue
        shape = doc.get("shape") if isinstance(doc, dict) else None
        if isinstance(shape, list) and shape and isinstance(shape[0], int):
            return shape[0]
    return None


def open_input(url, x="X", y="y", require_y=True, storage_options=None,
               allow_missing_chunks=False):
    """Open the Zarr arrays of an input group lazily.

    Returns
    -------
    X : CheckedArray of shape (n, p)
    y : CheckedArray of shape (n,) or None when absent and not required
    """
    # the arrays' own metadata, not the group's consolidated copy: one left stale by a writer
    # that grew X afterwards gave its old shape, and the new rows were left out without a word
    group = _open_group(url, "r", storage_options, use_consolidated=False)
    X = _array(group, url, x, "--x")
    check_matrix(X, f"{url}/{x}")
    if X.shape[1] == 0:
        msg = f"{url}/{x} has no feature columns (shape {X.shape}); it needs at least one"
        raise InputError(msg)
    labels = None
    if require_y or y in group:
        labels = _array(group, url, y, "--y")
        if labels.ndim != 1 or labels.shape[0] != X.shape[0]:
            msg = (
                f"{url}/{y} must be 1-D with one label per row of {x} ({X.shape[0]} rows); "
                f"it has shape {labels.shape}"
            )
            raise InputError(msg)
    if not allow_missing_chunks:
        # Only X is checked: zarr does not store a chunk that holds only the fill
        # value, and a run of one label (class-sorted data, label 0) is exactly that,
        # while a chunk of rows that are all zero in every feature is rare.
        try:
            if X is not None:
                _check_chunks(X, f"{url}/{x}")
        except StreamprojError:
            raise
        except Exception as exc:
            msg = f"cannot list the chunks of {url}: {type(exc).__name__}: {_short(exc)}"
            raise InputError(msg) from None
    return (CheckedArray(X, f"{url}/{x}"),
            None if labels is None else CheckedArray(labels, f"{url}/{y}"))


# ------------------------------------------------------------------ outputs
def _attrs_of(meta_bytes):
    try:
        meta = json.loads(meta_bytes)
    except (ValueError, UnicodeDecodeError):
        return None
    return meta.get("attributes", {}) if isinstance(meta, dict) else None


_NOT_OURS = "no streamproj attributes in its zarr.json"


def _local_state(dest):
    """What is at a local output path (absent, empty, streamproj or foreign), and why foreign."""
    if not dest.exists() and not dest.is_symlink():
        return "absent", None
    if not dest.is_dir():
        return "foreign", "it is a file, not a folder"
    entries = list(dest.iterdir())
    if not entries:
        return "empty", None
    meta = dest / "zarr.json"
    if not meta.is_file() and _is_model_dir(dest):
        return "foreign", "a streamproj model directory"
    if not meta.is_file():
        # named, so the user sees which folder of theirs it is
        return "foreign", f"a folder with no zarr.json, holding {_named(entries)}"
    try:
        raw = meta.read_bytes()
    except OSError as exc:
        return "foreign", f"its zarr.json cannot be read ({type(exc).__name__})"
    attrs = _attrs_of(raw)
    if isinstance(attrs, dict) and isinstance(attrs.get("streamproj"), dict):
        return "streamproj", None
    if attrs is None:  # (said as "no streamproj attributes", a damaged output passed for another's)
        return "foreign", "its zarr.json is not a JSON object: damaged, or not Zarr's"
    return "foreign", _NOT_OURS


def _named(entries, shown=5):
    """``a, b, … (12 in all)``: the names of some folder entries, sorted."""
    names = sorted(e.name for e in entries)
    more = f", … ({len(names)} in all)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def refuse_foreign_append(url, how="--append", shown=None):
    """Refuse to add rows to a local path that holds something streamproj did not write.

    Said with what is there (:func:`_local_state`), as a rewrite's refusal says it;
    opening it as an output said only "no Zarr group at …". ``how``: what asked
    for the append (``--append``, a job's ``[output] mode``); ``shown``: how ``url``
    is named (a job's ``[output] path …``). No-op for an output,
    an empty folder, nothing, or a remote URL (its reader says what it found).
    """
    if not is_local(url):
        return
    with storage_errors(f"output {url}"):
        kind, why = _local_state(_real(url))
    if kind == "foreign":
        _refuse_foreign_append(shown or url, why, how)


def _refuse_foreign_append(named, why, how="--append"):
    msg = (f"{named} exists and is not a streamproj output ({why}); {how} adds rows "
           "to an output written by 'streamproj project', so it was left untouched: choose "
           "another output")
    raise OutputExistsError(msg)


def local_state(url) -> tuple[str, str | None]:
    """:func:`local_kind` and, for "foreign", what is there ("a streamproj model directory", …)."""
    return _local_state(_real(url))


def local_kind(url) -> str:
    """What is at a local output path: "absent", "empty", "streamproj" or "foreign"."""
    return local_state(url)[0]


def foreign_folder(url) -> str | None:
    """What a local folder that is neither a streamproj output nor a model directory holds.

    As :func:`_local_state` says it ("a folder with no zarr.json, holding notes.txt");
    None for anything else (nothing, an empty folder, a file, an output, a model, a remote
    URL, an unreadable folder), which its reader describes.
    """
    if not is_local(url):
        return None
    dest = _real(url)
    try:
        if not dest.is_dir() or (dest / _CURRENT).is_file():
            return None  # (a model, or damaged one: the model reader says which)
        kind, why = _local_state(dest)
    except OSError:
        return None
    return why if kind == "foreign" else None


def looks_like_output(url) -> bool:
    """True when ``url`` carries a streamproj output's marks, complete and readable or not.

    For telling an output from a model directory before reading either (``info``).
    """
    if is_local(url):
        return local_kind(url) == "streamproj"
    fs, root = _fs(url)
    try:
        kind, _ = _remote_state(fs, str(root).rstrip("/"))
    except Exception:  # unreachable: let the reader say why
        return False
    return kind in ("pointer", "unfinished", "legacy")


def _refuse_foreign(url, why=_NOT_OURS):
    """Refuse an output path that holds something streamproj did not write, saying ``why``."""
    msg = (f"{url} exists and is not a streamproj output ({why}); --overwrite only replaces "
           "a streamproj output or an empty folder, so it was left untouched: choose another "
           "output")
    raise OutputExistsError(msg)


_CHUNK_NAME = re.compile(r"[0-9]+")
# Chunk files an array node holds directly: v2-style keys ("0.0"), v3 keys with the "."
# separator ("c.0.0"), and a 0-d array's one chunk ("c").
_FLAT_CHUNK_NAME = re.compile(r"c|c(\.[0-9]+)+|[0-9]+(\.[0-9]+)*")
# Every node a streamproj output has held, by group (0.1 wrote "coords", and the decision
# of every row): a node of another name inside an output is the user's.
OUTPUT_NODES = {
    "": frozenset({*PROJECTION_NAMES, "predicted", "decision", "y", "component", "class", _FRAME}),
    _FRAME: frozenset({"stats", "solution"}),
}


def _node_type(folder):
    with contextlib.suppress(OSError, ValueError, UnicodeDecodeError, AttributeError):
        return json.loads((folder / "zarr.json").read_bytes()).get("node_type")
    return None


def _chunk_folder_foreign(folder, rel):
    for entry in sorted(folder.iterdir()):
        if not _CHUNK_NAME.fullmatch(entry.name) or entry.is_symlink():
            return rel / entry.name
        if entry.is_dir():
            found = _chunk_folder_foreign(entry, rel / entry.name)
            if found is not None:
                return found
        elif not entry.is_file():
            return rel / entry.name
    return None


def foreign_inside(dest, nodes=None) -> Path | None:
    """The first path inside a local Zarr tree that its writer did not put there, or None.

    A group holds its ``zarr.json`` and child nodes (folders with their own
    ``zarr.json``); an array its ``zarr.json`` and its chunks (a ``c`` folder
    of numbered folders and files, or chunk files named as Zarr names them).
    ``nodes``: the child names each group may hold, by the group's path
    (``""`` for the root, e.g. :data:`OUTPUT_NODES`); a group it does not name
    may hold none. Anything else (a user's notes or array, a link, a stray
    folder, at any depth) would be lost with the tree. Returns the path
    relative to ``dest``.
    """
    def node(folder, rel):
        array = _node_type(folder) == "array"
        allowed = None if nodes is None else nodes.get(rel.as_posix() if rel.parts else "", ())
        for entry in sorted(folder.iterdir()):
            name, here = entry.name, rel / entry.name
            if entry.is_symlink():
                return here
            if name == "zarr.json" and entry.is_file():
                continue
            if entry.is_dir() and (entry / "zarr.json").is_file() and not array:
                found = here if allowed is not None and name not in allowed else node(entry, here)
            elif array and name == "c" and entry.is_dir():
                found = _chunk_folder_foreign(entry, here)
            elif array and entry.is_file() and _FLAT_CHUNK_NAME.fullmatch(name):
                found = None
            else:
                found = here
            if found is not None:
                return found
        return None

    return node(Path(dest), Path())


def _refuse_foreign_entries(url, dest):
    """Refuse to replace a local output that holds something no streamproj writer puts there.

    An output is Zarr nodes and chunks all the way down (:func:`foreign_inside`);
    anything else (a user's notes, a stray file, at any depth) would be lost
    with the output, so it is named and nothing is touched.
    """
    found = foreign_inside(dest, OUTPUT_NODES)
    if found is not None:
        msg = (f"{url} is a streamproj output but also holds {found.as_posix()}, which streamproj "
               "did not write; it was left untouched: move that out of it, or choose another output")
        raise OutputExistsError(msg)


def _refuse_read_only(url, dest):
    """Refuse to replace a local output that is read-only, or that this process could not delete.

    A rename in its parent passed over ``chmod -R a-w`` (as :func:`write_bytes`
    refuses a read-only file), and the old folder, which only its owner could
    then delete, was left hidden beside it (``.OUT.tmp-…``), one more copy with
    each rewrite. The folders two levels deep only (the output, its nodes, their
    ``c`` chunk folders and the frame's arrays; ``chmod -R`` makes those read-only
    too): every chunk folder of a big output was walked, once more per check, and a
    nightly append checks several times.
    """
    def folders_in(folder):
        return [e for e in folder.iterdir() if e.is_dir() and not e.is_symlink()]

    nodes = folders_in(dest)
    for root in [dest, *nodes, *(inner for node in nodes for inner in folders_in(node))]:
        mode = os.stat(root).st_mode
        if not mode & 0o222 or not os.access(root, os.W_OK | os.X_OK):
            rel = Path(root).relative_to(dest).as_posix()
            where = url if rel == "." else f"{str(url).rstrip('/')}/{rel}"
            msg = (f"{where} is not writable by you (mode {stat.filemode(mode)}); output {url} "
                   "was left untouched: make it writable to replace it, or choose another output")
            raise OutputExistsError(msg)


def check_output_whole(url: object) -> None:
    """Refuse, before a job's model step, a local output its write would refuse to replace.

    One that holds what streamproj did not write, or is not writable
    (:func:`output_group` refuses both): a ``run`` or ``relocate`` committed
    the model first, then was refused on the output. A no-op for anything
    but a local streamproj output.
    """
    if not is_local(url):
        return
    dest = _real(url)
    with storage_errors(f"output {url}"):
        if _local_state(dest)[0] == "streamproj":
            _refuse_foreign_entries(url, dest)
            _refuse_read_only(url, dest)


def _refuse_existing(url, appendable):
    more = (", or add new rows to it in its frame with --append (an output that 'streamproj "
            "project' wrote from its inputs)" if appendable else "")
    msg = f"output {url} exists; pass --overwrite (overwrite=True) to replace it{more}"
    raise OutputExistsError(msg)


def tidy_output(url):
    """Remove what killed writers left beside a local output (and its stale lock); no-op remotely."""
    if not is_local(url):
        return
    dest = _real(url)
    with _locked(url, "output"), storage_errors(f"output {url}"):
        _recover(dest)


def restore_interrupted(url):
    """Put back the output that a replacement killed between its two renames took away.

    A job that plans from what is at ``url`` (an append, a nightly run) took the
    missing output as nothing there, then found it restored inside the write
    and refused it as existing. No-op unless ``url`` is missing with a dead
    writer's old copy beside it; remotely too.
    """
    if not is_local(url):
        return
    dest = _real(url)
    with storage_errors(f"output {url}"):
        if dest.exists() or dest.is_symlink() or not dest.parent.is_dir():
            return
        prefix = f".{dest.name}.old-"
        if not any(p.name.startswith(prefix) and _dead_leftover(p.name)
                   for p in dest.parent.iterdir()):
            return
    tidy_output(url)


def _refuse_append(url, kind):
    what = {"absent": "nothing is there", "empty": "it is an empty folder",
            "foreign": "it is not a streamproj output",
            "legacy": "it has no versions to copy (written before object-store versions)",
            "unfinished": "its first write never finished"}.get(kind, kind)
    msg = f"cannot append to {url}: {what}; write it in full first (--overwrite)"
    raise OutputExistsError(msg)


def _check_expected(url, attrs, expect):
    """Refuse when the output was rewritten since the job read it (optimistic concurrency)."""
    got = (attrs or {}).get("streamproj", {}).get("write_id") if isinstance(attrs, dict) else None
    if expect is not None and got != expect:
        msg = f"output {url} was rewritten by another job while this one worked; rerun the job"
        raise OutputExistsError(msg)


def _clone_output(src, dest):
    """A copy of the output folder ``src`` at ``dest`` that shares its chunk files (hard links).

    Metadata files are copied (they are rewritten), and so is the last, partial
    row chunk of every array (an append rewrites it): nothing written into the
    clone can reach the live output, even by a writer that rewrites files in place.
    Where hard links are not supported, files are copied.
    """
    for root, _dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        os.mkdir(dest / rel)
        for name in files:
            a, b = Path(root) / name, dest / rel / name
            if name.endswith(".json") or name.startswith(".z"):
                shutil.copyfile(a, b)
                continue
            try:
                os.link(a, b)
            except OSError:
                shutil.copyfile(a, b)
    group = zarr.open_group(str(dest), mode="r")
    for name, arr in group.arrays():
        rows = arr.chunks[0]
        if arr.ndim and arr.shape[0] % rows:
            key = arr.metadata.encode_chunk_key((arr.shape[0] // rows,) + (0,) * (arr.ndim - 1))
            target = dest / name / key
            if target.exists():
                target.unlink()
                shutil.copyfile(src / name / key, target)


@contextlib.contextmanager
def output_group(url, overwrite=False, attrs=None, append=False, expect=None, empty_ok=False):
    """A Zarr group that appears at ``url`` only when the block succeeds.

    ``overwrite`` replaces only a streamproj output or an empty folder;
    ``empty_ok`` an empty folder only (a job that takes one as nothing there). Local
    outputs are written to a hidden sibling and swapped into place; object-store
    outputs are written under a new version prefix and the pointer is switched
    last (see the module docstring).

    ``append``: the block gets a writable copy of the existing output (local:
    hard links to its chunk files; object store: a server-side copy of its
    current version) and may grow its arrays; the copy replaces the output as
    a new one would, so a killed append leaves the output as it was.
    ``expect``: the ``write_id`` the output must still have (else nothing is written).
    """
    if not is_local(url):
        with _locked(url, "output"), _remote_output(url, overwrite, attrs, append, expect) as group:
            yield group
        return
    dest = _real(url)
    with _locked(url, "output"), storage_errors(f"output {url}"):
        _recover(dest)
        kind, why = _local_state(dest)
        if append and kind == "foreign":
            _refuse_foreign_append(url, why)
        if append and kind != "streamproj":
            _refuse_append(url, kind)
        if kind == "foreign":
            _refuse_foreign(url, why)
        if kind != "absent" and not overwrite and not append and not (empty_ok and kind == "empty"):
            _refuse_existing(url, kind == "streamproj")
        if kind == "streamproj":
            _refuse_foreign_entries(url, dest)
            _refuse_read_only(url, dest)
        if kind == "streamproj" and expect is not None:
            _check_expected(url, _attrs_of((dest / "zarr.json").read_bytes()), expect)
        _refuse_unreplaceable(dest, url)
        tmp = dest.parent / f".{dest.name}.tmp-{_tag()}"
        guard, group = _WriteGuard(), None
        try:
            if append:
                _clone_output(dest, tmp)
                group = zarr.open_group(str(tmp), mode="r+")
            else:
                group = zarr.open_group(str(tmp), mode="w-")
            group.attrs.update({**(attrs or {}), "complete": False})
            _register_guard(group, guard)
            with zarr.config.set({"array.write_empty_chunks": True}):  # appended chunks too
                yield group
            group.attrs["complete"] = True
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "consolidated metadata is not in the v3 spec"
                zarr.consolidate_metadata(str(tmp))
            if dest.exists():
                _inherit_permissions(dest, tmp)
            if kind in ("empty", "absent"):
                # what another program put there during the pass is refused, not swapped away
                _fill_empty(tmp, dest, url, was="an empty folder" if kind == "empty" else "nothing")
            else:
                # what was put inside OUT during the pass would be deleted with the old folder
                _refuse_foreign_entries(url, dest)
                _swap_in(tmp, dest)
        finally:
            guard.close()  # chunk writes still running in other threads end first
            if tmp.exists():
                _remove_straggling(tmp)


def _remote_state(fs, root):
    """``(kind, pointer attrs)`` of an object-store output location."""
    try:
        raw = fs.cat_file(f"{root}/zarr.json")
    except FileNotFoundError:
        raw = None
    if raw is None:
        try:
            listed = fs.ls(root, detail=False)
        except FileNotFoundError:
            listed = []
        return ("absent" if not listed else "foreign"), None
    attrs = _attrs_of(raw)
    if not isinstance(attrs, dict):
        return "foreign", None
    pointer = attrs.get(OUTPUT_FORMAT)
    if isinstance(pointer, dict):
        return ("pointer" if pointer.get("current") else "unfinished"), pointer
    if isinstance(attrs.get("streamproj"), dict):
        return "legacy", None
    return "foreign", None


def _pointer_bytes(current):
    doc = {"zarr_format": 3, "node_type": "group",
           "attributes": {OUTPUT_FORMAT: {"format_version": 1, "current": current,
                                          "switched": timestamp()}}}
    return json.dumps(doc, indent=2).encode()


@contextlib.contextmanager
def _remote_output(url, overwrite, attrs, append=False, expect=None):
    fs, root = _fs(url)
    root = root.rstrip("/")
    with _remote_errors(f"output {url}"):
        kind, pointer = _remote_state(fs, root)
        if append and kind != "pointer":
            _refuse_append(url, kind)
        if kind == "foreign":
            _refuse_foreign(url)
        if kind in ("pointer", "legacy") and not overwrite and not append:
            _refuse_existing(url, kind == "pointer")
        if kind == "absent":
            # Claim the prefix first, so that a kill leaves a recognisable, unfinished output.
            fs.pipe_file(f"{root}/zarr.json", _pointer_bytes(None))
        version = f"v{_dt.datetime.now(_dt.UTC):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:8]}"
        base = str(url).rstrip("/")
        try:
            if kind == "pointer" and expect is not None:
                _check_expected(
                    url, _attrs_of(fs.cat_file(f"{root}/{pointer['current']}/zarr.json")), expect)
            if append:
                # A server-side copy: no chunk passes through this machine.
                fs.copy(f"{root}/{pointer['current']}", f"{root}/{version}", recursive=True)
                group = zarr.open_group(f"{base}/{version}", mode="r+",
                                        storage_options=_storage_options(url))
        except StreamprojError:
            raise
        except Exception:
            if kind != "pointer":
                raise
            with contextlib.suppress(Exception):
                _rm_straggling(fs, f"{root}/{version}", wait=0)
            if (_remote_state(fs, root)[1] or {}).get("current") != pointer["current"]:
                # another machine switched the pointer and removed the version this one
                # started from (its zarr.json gone; a GroupNotFoundError from an empty copy)
                msg = (f"output {url} was changed by another job while this one began; "
                       "rerun the job")
                raise OutputExistsError(msg) from None
            raise
        if not append:
            group = zarr.open_group(f"{base}/{version}", mode="w-",
                                    storage_options=_storage_options(url))
        group.attrs.update({**(attrs or {}), "complete": False})
    guard = _WriteGuard()
    _register_guard(group, guard)
    try:
        with zarr.config.set({"array.write_empty_chunks": True}):  # appended chunks too
            yield group
        guard.close()
        with _remote_errors(f"output {url}"):
            group.attrs["complete"] = True
            previous = _remote_state(fs, root)
            if (previous[1] or {}).get("current") != (pointer or {}).get("current"):
                # another machine switched it while this job wrote: switching now would drop
                # the rows that job added (and it removed the version this one started from)
                kind = "taken"  # (its pointer is not ours to remove)
                msg = f"output {url} was changed by another job while this one wrote; rerun the job"
                raise OutputExistsError(msg)
            fs.pipe_file(f"{root}/zarr.json", _pointer_bytes(version))  # the switch
            keep = {version, "zarr.json"}
            for entry in fs.ls(root, detail=False):
                name = entry.rstrip("/").rsplit("/", 1)[-1]
                if name in keep:
                    continue
                if _OUT_VERSION.match(name) and not _stale_remote(fs, entry, name, previous):
                    continue  # perhaps a live writer elsewhere
                fs.rm(entry, recursive=True)
    except BaseException:
        guard.close()  # chunk writes still running in other threads end first
        with contextlib.suppress(Exception):
            _rm_straggling(fs, f"{root}/{version}")
            if kind == "absent":  # nothing was there: leave nothing
                fs.rm(f"{root}/zarr.json")
        raise


def _rm_straggling(fs, path, wait=0.2):
    """Remove a failed write's prefix, again if Zarr's own writer tasks add to it."""
    fs.rm(path, recursive=True)
    time.sleep(wait)
    fs.invalidate_cache(path)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def _stale_remote(fs, path, name, previous):
    """A version that the pointer named before the switch, or one older than the stale age."""
    pointer = previous[1] or {}
    if pointer.get("current") == name:
        return True
    written = _dt.datetime.strptime(name[1:15], "%Y%m%d%H%M%S").replace(tzinfo=_dt.UTC)
    return (_dt.datetime.now(_dt.UTC) - written).total_seconds() > REMOTE_STALE_SECONDS


@contextlib.contextmanager
def _remote_errors(where):
    try:
        yield
    except StreamprojError:
        raise
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise StorageError(_describe_os_error(exc, where)) from None
        msg = f"cannot write {where}: {type(exc).__name__}: {_short(exc)}"
        raise StorageError(msg) from None


# An object-store output's pointer read again when the version it named vanished meanwhile
_POINTER_READS = 3

_WRITES_OUT = "a projection is the Zarr group 'streamproj project MODEL INPUT --output OUT' writes"


def open_output(url, missing_ok=False):
    """Open a complete projection written by ``streamproj project`` for reading.

    Follows an object-store output's pointer; refuses an output whose writing
    did not finish. ``missing_ok``: None where nothing is at an object-store
    location (an append creates it, as for a local path), from the same one
    read of its state.
    """
    if is_local(url):
        dest = local_path(url)
        if not dest.exists():
            real = _real(url)
            olds = ([p for p in real.parent.glob(f".{real.name}.old-*") if _LEFTOVER.search(p.name)]
                    if real.parent.is_dir() else [])
            if olds:
                msg = (f"{url} is missing because its replacement was interrupted; rerun the "
                       "command that writes it (the old output is restored first)")
                raise InputError(msg)
        if dest.is_dir() and (dest / _CURRENT).is_file():
            msg = f"{url} is a streamproj model directory, not a projection ({_WRITES_OUT})"
            raise InputError(msg)
        if dest.is_file():
            msg = f"{url} is a file, not a streamproj projection ({_WRITES_OUT})"
            raise InputError(msg)
        # a folder of the user's is named by what it holds (opening it said only "no Zarr
        # group at OUT"); a zarr.json that is there is left to the checks below
        held = None if (dest / "zarr.json").exists() else foreign_folder(url)
        if held is not None:
            msg = f"{url} is not a streamproj projection ({held}; {_WRITES_OUT})"
            raise InputError(msg)
        group = _open_group(url, "r")
    else:
        for attempt in range(_POINTER_READS):
            kind, pointer = _read_remote_state(url)
            if kind == "absent" and missing_ok:
                return None
            if kind == "absent":
                msg = f"no output at {url}"
                raise InputError(msg)
            if kind == "unfinished":
                msg = (f"{url} is incomplete: the job writing it was interrupted before it "
                       "finished; rerun that job")
                raise InputError(msg)
            if kind != "pointer":
                group = _open_group(url, "r")
                break
            try:
                group = _open_group(f"{str(url).rstrip('/')}/{pointer['current']}", "r")
            except InputError:
                # another machine switched the pointer and removed the version it named
                # between the two reads: read the version it names now
                if attempt + 1 == _POINTER_READS or _read_remote_state(url) == (kind, pointer):
                    raise
                continue
            url = f"{str(url).rstrip('/')}/{pointer['current']}"
            break
    attrs = group.attrs.asdict()
    if not isinstance(attrs.get("streamproj"), dict):
        msg = f"{url} is not a streamproj projection (no streamproj attributes; {_WRITES_OUT})"
        raise InputError(msg)
    if attrs.get("complete") is not True:
        msg = (f"{url} is incomplete: the job writing it was interrupted before it finished; "
               "rerun that job")
        raise InputError(msg)
    if not any(name in group for name in PROJECTION_NAMES):
        msg = f"{url} is not a streamproj projection (no 'projection' array, nor 0.1's 'coords')"
        raise InputError(msg)
    # every chunk of an output is written (write_empty_chunks): a missing one is damage,
    # which Zarr would otherwise read as zeros
    for name, arr in group.arrays():
        missing = _first_missing_chunk(arr)
        if missing is not None:
            msg = (f"{url}/{name}: the chunk file of rows {missing[0]}..{missing[1]} is missing; "
                   "the output is damaged: rewrite it (project ... --overwrite)")
            raise InputError(msg)
    return group


class _WriteGuard:
    """Counts chunk writes in flight, so a failed output is removed only after the last one.

    When one chunk fails, dask's threaded scheduler raises at once while other
    threads may still be writing (and re-creating folders); removing the
    temporary output before they finish would leave a half folder behind.
    """

    def __init__(self):
        import threading

        self._cond = threading.Condition()
        self._active = 0
        self._closed = False

    def __enter__(self):
        with self._cond:
            if self._closed:
                msg = "the output is closed (finished, or failed): nothing more is written to it"
                raise RuntimeError(msg)
            self._active += 1

    def __exit__(self, *exc):
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def close(self, timeout=120):
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: self._active == 0, timeout=timeout)


_GUARDS: dict[int, "_WriteGuard"] = {}


def _register_guard(group, guard):
    """Count ``group``'s chunk writes with ``guard`` for as long as the group object lives.

    Kept after the output is finished or has failed, so that a writer still
    holding the group (in another thread) finds the closed guard and is
    refused; dropped when the group is collected (its id may
    then be reused).
    """
    _GUARDS[id(group)] = guard
    weakref.finalize(group, _GUARDS.pop, id(group), None)


class _GuardedArray:
    """A Zarr array whose writes are counted by a :class:`_WriteGuard` (in this process)."""

    def __init__(self, array, guard):
        self._bind(array, guard)

    def _bind(self, array, guard):
        self.array, self.guard = array, guard
        self.shape, self.dtype, self.ndim, self.chunks = array.shape, array.dtype, array.ndim, array.chunks

    def __setitem__(self, key, value):
        if self.guard is None:
            self.array[key] = value
            return
        with self.guard:
            self.array[key] = value

    def __getitem__(self, key):
        return self.array[key]

    def __getstate__(self):  # on a distributed worker: no guard to share
        return {"array": self.array, "guard": None}

    def __setstate__(self, state):
        self._bind(state["array"], state["guard"])


def create_output_array(group, name, shape, chunks, dtype, dims, attrs=None):
    """An array in an output group, with named dimensions (``xarray.open_zarr`` reads them).

    Every chunk is written, even one equal to the fill value, so a missing
    chunk file in an output always means damage.
    """
    array = group.create_array(
        name,
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        dimension_names=dims,
        attributes=attrs or {},
        config={"write_empty_chunks": True},
    )
    guard = _GUARDS.get(id(group))
    return array if guard is None else _GuardedArray(array, guard)


def write_coordinate(group, name, values):
    """A small 1-D coordinate variable (its dimension has its name), e.g. ``component`` or ``class``."""
    values = np.asarray(values)
    dtype = str if values.dtype.kind in "OUS" else values.dtype
    if dtype is str:
        values = values.astype(str).astype(object)
    arr = group.create_array(name, shape=values.shape, chunks=(max(1, values.shape[0]),), dtype=dtype,
                             dimension_names=(name,), config={"write_empty_chunks": True})
    arr[:] = values
    return arr


class _Shifted:
    """Writes to rows ``[a:b]`` land in rows ``[a+offset : b+offset]`` of the wrapped array."""

    def __init__(self, array, offset):
        self.array, self.offset = array, int(offset)
        self.shape, self.dtype, self.ndim, self.chunks = array.shape, array.dtype, array.ndim, array.chunks

    def __setitem__(self, key, value):
        key = key if isinstance(key, tuple) else (key,)
        first = key[0]
        start, stop = first.start or 0, first.stop
        self.array[(slice(start + self.offset, stop + self.offset), *key[1:])] = value


def grow_output_array(group, name, n_rows):
    """Resize an output array of an appending group to ``n_rows``; a target for the new rows only.

    Returns an object whose row 0 is the first new row (for ``dask.array.store``).
    """
    array = group[name]
    old = array.shape[0]
    array.resize((n_rows, *array.shape[1:]))
    guard = _GUARDS.get(id(group))
    return _Shifted(array if guard is None else _GuardedArray(array, guard), old)


def write_bytes(url, data):
    """Write a small file (e.g. a figure) to a path or URL, all or nothing.

    Local: a hidden sibling renamed over the destination (parents created).
    Object store: one PUT.
    """
    if not is_local(url):
        fs, path = _fs(url)
        with _remote_errors(str(url)):
            fs.pipe_file(path, bytes(data))
        return url
    # through a symlink to its target (the link stays), keeping the file's permissions
    dest = Path(os.path.realpath(local_path(url)))
    if dest.exists() and not stat.S_ISREG(dest.stat().st_mode):  # renamed over, it is gone
        msg = (f"{url} is not a regular file (a device, FIFO, socket or folder); it was left "
               "untouched: choose another file name")
        raise OutputExistsError(msg)
    if dest.exists() and not dest.stat().st_mode & 0o222:  # (a rename would pass over it)
        msg = (f"{url} is read-only (mode {stat.filemode(dest.stat().st_mode)}); it was left "
               "untouched: make it writable to replace it, or choose another file name")
        raise OutputExistsError(msg)
    with storage_errors(str(url)):
        dest.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(dest.stat().st_mode) if dest.exists() else None
        tmp = dest.parent / f".{dest.name}.tmp-{_tag()}"
        try:
            tmp.write_bytes(data)
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, dest)
        finally:
            if tmp.exists():
                tmp.unlink()
    return url


# --------------------------------------------------------------- boundaries
def read_boundary(path):
    """Read ``coef`` and ``intercept`` (and optional ``classes``) from a JSON or NPZ file.

    Every problem names the boundary file: missing keys, text where numbers
    belong, ragged or mismatched shapes.
    """
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
    except Exception as exc:
        if not _is_expected(exc):
            raise
        msg = f"{path} is not a readable JSON or NPZ boundary file: {_short(exc)}"
        raise InputError(msg) from None
    if not isinstance(content, dict):
        msg = f"{path} must hold an object with 'coef' and 'intercept'"
        raise InputError(msg)
    missing = [k for k in ("coef", "intercept") if k not in content]
    if missing:
        msg = f"{path} lacks {' and '.join(missing)}; a boundary file needs 'coef' and 'intercept'"
        raise InputError(msg)
    values = {}
    for key in ("coef", "intercept"):
        try:
            values[key] = np.asarray(content[key], dtype=np.float64)
        except (TypeError, ValueError):
            msg = f"{path}: {key} must be numbers in a regular array; got {_short(content[key])}"
            raise InputError(msg) from None
        if not np.isfinite(values[key]).all():
            msg = f"{path}: {key} holds NaN or infinite values"
            raise InputError(msg)
    coef, intercept = values["coef"], values["intercept"]
    if coef.ndim not in (1, 2) or coef.size == 0:
        msg = f"{path}: coef must be a vector (p,) or a matrix (m, p); got shape {coef.shape}"
        raise InputError(msg)
    rows = 1 if coef.ndim == 1 else coef.shape[0]
    if intercept.ndim > 1 or intercept.size != rows:
        msg = (f"{path}: intercept must hold {rows} number{'s' if rows > 1 else ''} (one per row "
               f"of coef {coef.shape}); got shape {intercept.shape}")
        raise InputError(msg)
    classes = content.get("classes")
    return {
        "coef": coef,
        "intercept": intercept.reshape(-1),
        "classes": None if classes is None else np.asarray(classes),
    }


# ------------------------------------------------------------------- models
def _json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return _json_default(value.item()) if isinstance(value, np.bytes_) else value.item()
    if isinstance(value, bytes):
        # bytes labels (fixed-width Zarr, numpy 'S'): the JSON describes them as text;
        # the NPZ beside it keeps them as bytes, exactly
        return value.decode("utf-8", "backslashreplace")
    msg = f"cannot store {type(value).__name__} in model.json"
    raise TypeError(msg)


def _npz_buffer(arrays):
    """An NPZ of ``arrays`` in memory, as a memoryview of its buffer (no copy)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getbuffer()


def _npz_bytes(arrays):
    return bytes(_npz_buffer(arrays))


def _summaries_bytes(summaries):
    """One NPZ holding each source's ClassStats, its arrays named ``<source id>__<array>``."""
    return _npz_bytes({f"{sid}__{name}": arr for sid, stats in summaries.items()
                       for name, arr in stats.to_arrays().items()})


def _version_files(meta, stats, solution):
    """The files of a model version but its per-source summaries, as bytes."""
    meta = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, **meta}
    return {"model.json": json.dumps(meta, indent=2, default=_json_default).encode(),
            "stats.npz": _npz_bytes(stats.to_arrays()), "solution.npz": _npz_bytes(solution)}


def _new_file(path, data):
    """Write ``data`` to a new file at ``path``: never through a name that exists (or links)."""
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


# In a version written beside the live one until it is complete: a version holding it that
# ``CURRENT`` does not name is an interrupted write's (removable); one without it was committed
# (rolled back from by hand, written before the marker, or killed just before the switch).
_UNCOMMITTED = ".uncommitted"


def _write_version(folder, meta, stats, solution, summaries=None, pending=False):
    os.mkdir(folder)  # mode 0o777 less the umask, like every other folder the user makes
    if pending:
        _new_file(folder / _UNCOMMITTED, b"")
    for name, data in _version_files(meta, stats, solution).items():
        _new_file(folder / name, data)
    if summaries is not None:
        _write_summaries(folder / _SUMMARIES, summaries)
    _fsync(folder)


# A local version's per-source summaries: one NPZ per source id (quoted into a file name).
_SUMMARIES = "summaries"


# Ids whose quoted names would be longer are stored under a hash (file systems cap names
# at 255 bytes), and the version's ``long-ids.json`` says whose file each is.
_MAX_NAME = 160
_LONG_IDS = "long-ids.json"


def _summary_name(sid):
    """The file name of a source id's summary.

    The id quoted, capitals quoted too (no two ids share a name on a
    case-insensitive file system); ids too long for that, by their hash.
    """
    quoted = "".join(f"%{ord(c):02X}" if "A" <= c <= "Z" else urllib.parse.quote(c, safe="")
                     for c in str(sid))
    if len(quoted) > _MAX_NAME:
        return "%%" + hashlib.sha256(str(sid).encode()).hexdigest() + ".npz"
    return quoted + ".npz"


# os.link's refusals that mean "no hard links here": copy the bytes instead
_NO_LINKS = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS,
             errno.EACCES}


def _write_summaries(folder, summaries):
    """One file per source in ``folder``; those unchanged since the version read are linked.

    A hard link is a second name for the same bytes, which are never changed in
    place, only unlinked with their version; so the new version is complete by
    itself, and pruning the old one leaves it whole.
    """
    os.mkdir(folder)
    long_ids = {}
    for sid in summaries:
        name = _summary_name(sid)
        if name.startswith("%%"):
            long_ids[name] = str(sid)
        target = folder / name
        kept = summaries.unchanged_file(sid) if isinstance(summaries, Summaries) else None
        if kept is not None:
            try:
                os.link(kept, target)
                continue
            except OSError as exc:
                if exc.errno not in _NO_LINKS:
                    raise
            _new_file(target, Path(kept).read_bytes())  # no hard links here: copy the bytes
            continue
        _new_file(target, _npz_bytes(summaries[sid].to_arrays()))
    if long_ids:
        _new_file(folder / _LONG_IDS, json.dumps(long_ids).encode())
    _fsync(folder)


def _version_number(name):
    return int(name[1:]) if _VERSION.match(name) else -1


def _check_pointer(path, name):
    """The version ``CURRENT`` names, refusing anything but a version folder inside the model."""
    if not _VERSION.match(name):
        msg = (f"{path}/{_CURRENT} names {name[:60]!r}, not a version folder of the model "
               "(vNNNNNN); the model directory is damaged")
        raise ModelError(msg)
    return name


def _current_version(path):
    pointer = path / _CURRENT
    if not pointer.is_file():
        return None
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        msg = f"{path}/{_CURRENT} is not text (it should name a version, e.g. v000001); the model is damaged"
        raise ModelError(msg) from None
    _check_pointer(path, name)
    if not (path / name).is_dir():
        msg = f"{path}/{_CURRENT} names {name}, which is not a folder in the model; the model is damaged"
        raise ModelError(msg)
    return name


def _clean_model(path):
    """Remove staging folders and orphan versions (kills between rename and ``CURRENT``).

    An orphan is told by its :data:`_UNCOMMITTED` marker; any other version
    ``CURRENT`` does not name was committed (``CURRENT`` set back by hand) and
    is kept. The live version's marker (a kill right after the switch) is dropped.
    """
    if not path.is_dir() or not (path / _CURRENT).is_file():
        return
    try:
        current = _current_version(path)
    except ModelError:
        return  # never delete anything from a model we cannot read
    for item in path.iterdir():
        if item.name.startswith(".") and ".tmp-" in item.name and _dead_leftover(item.name):
            _remove(item)
        elif item.name == current:
            _committed(item)
        elif _orphan(item):
            _remove(item)


def _orphan(folder):
    """True for a version folder renamed into place that ``CURRENT`` never named."""
    return (_version_number(folder.name) >= 0 and not folder.is_symlink()
            and (folder / _UNCOMMITTED).is_file())


def _committed(folder):
    """Drop a version's :data:`_UNCOMMITTED` marker: it is complete, and ``CURRENT`` names it next."""
    try:
        os.unlink(folder / _UNCOMMITTED)
    except FileNotFoundError:
        return
    except OSError:
        return  # (the next writer tries again; readers never look at it)
    _fsync(folder)


_UNREADABLE = object()  # (a model.json that cannot be read: where its chain leads is unknown)


def _previous_of(path, name):
    """The version ``name`` was written from, as its ``model.json`` says.

    None where it says none (written before the chain was kept);
    :data:`_UNREADABLE` where the file cannot be read.
    """
    try:
        meta = json.loads((path / name / "model.json").read_bytes())
    except (OSError, ValueError, UnicodeDecodeError):
        return _UNREADABLE
    if not isinstance(meta, dict):
        return _UNREADABLE
    previous = meta.get(_PREVIOUS)
    if previous is None:
        return None
    return previous if isinstance(previous, str) and _VERSION.match(previous) else _UNREADABLE


def _ancestors(path, name, versions):
    """The versions ``name`` descends from: their ``model.json`` chain, else all numbered below.

    Only these (and orphans) are pruned: a version the user rolled back from by
    hand is on no chain of the live one, so it stays until the user removes it.
    """
    found: list[str] = []
    seen = {name}
    while name in versions:  # (one pruned already: so were those it came from)
        previous = _previous_of(path, name)
        if previous is _UNREADABLE:  # (a damaged link: prune no further than what is known)
            break
        if previous is None:  # written before the chain was kept: every version below it
            number = _version_number(name)
            return found + [v for v in versions if _version_number(v) < number and v not in seen]
        if previous in seen:  # (a loop edited in by hand)
            break
        seen.add(previous)
        found.append(previous)
        name = previous
    return [v for v in found if v in versions]


def read_model_meta(path):
    """The ``model.json`` of a model's live version (no arrays read); None when no model is there."""
    try:
        _, files = _model_files(path, names=("model.json",))
        meta = json.loads(files["model.json"])
    except (ModelError, ValueError, UnicodeDecodeError):
        return None
    return meta if isinstance(meta, dict) else None


def _read_remote_state(url):
    """:func:`_remote_state` of an object-store output URL; an unreadable store is one line."""
    fs, root = _fs(url)
    try:
        return _remote_state(fs, root.rstrip("/"))
    except Exception as exc:
        if not _is_expected(exc):
            raise
        msg = f"cannot read {url}: {type(exc).__name__}: {_short(exc)}"
        raise InputError(msg) from None


def model_exists(path):
    """True when ``path`` holds a readable model (no error for a missing one)."""
    try:
        read_model(path)
    except ModelError:
        return False
    return True


def write_model(path, meta, stats, solution, base=None, summaries=None):
    """Write a model version; returns its name. The previous version's ancestors are pruned.

    Locally, the new version's ``model.json`` names the one it was written
    from (``previous_version``); versions off that chain (rolled back from by
    hand) are kept.

    The caller holds :func:`model_lock`. ``base``: the version the new one was
    derived from; if ``CURRENT`` names another by now, nothing is written.
    ``summaries``: one ClassStats per source id of the ledger (a mapping; a
    :class:`Summaries` read from this model links the files of those it did
    not change), stored beside the model's own summary (same version, same
    commit): locally one file per source, on an object store one
    ``summaries.npz``.
    """
    if not is_local(path):
        # (the chain is a local model's: a local model saved here named its local versions)
        meta = {k: v for k, v in meta.items() if k != _PREVIOUS}
        return _write_remote_model(path, meta, stats, solution, base, summaries)
    with storage_errors(f"model {path}"):
        return _write_local_model(_real(path), path, meta, stats, solution, base, summaries)


def write_record(path, record, base=None, summaries=None):
    """:func:`write_model` of a :class:`~streamproj.record.ModelRecord`, stamped ``saved`` now."""
    return write_model(path, {**record.meta, "saved": timestamp()}, record.stats, record.solution,
                       base=base, summaries=summaries)


def _write_local_model(path, typed, meta, stats, solution, base, summaries=None):
    if path.exists() and not path.is_dir():
        msg = f"{typed} exists and is not a model directory"
        raise ModelError(msg)
    current = _current_version(path) if path.is_dir() else None
    if path.exists() and current is None and any(path.iterdir()):
        msg = f"{typed} exists and is not a streamproj model directory; choose another path"
        raise ModelError(msg)
    if base is not None and current != base:
        msg = (f"model {typed} moved to version {current} while this job worked from {base}; "
               "rerun the job")
        raise ModelError(msg)
    if current is None:
        _refuse_unreplaceable(path, typed, "model")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.tmp-{_tag()}"
        was = "an empty folder" if path.exists() else "nothing"
        meta = {k: v for k, v in meta.items() if k != _PREVIOUS}  # the first: from none
        try:
            os.mkdir(tmp)
            _write_version(tmp / "v000001", meta, stats, solution, summaries)
            _write_pointer(tmp, "v000001")
            if path.exists():  # a folder restricted before the fit (chmod 700) stays so
                _take_permissions(path, tmp)
            # an empty folder at path (e.g. made by hand), or nothing, is filled, never swapped
            # away with whatever was put there during the fit
            _fill_empty(tmp, path, typed, role="model", was=was)
        finally:
            if tmp.exists():
                _remove(tmp)
        return "v000001"
    # Numbered above every version there, kept (rolled back from) or orphan: never reused.
    number = max(_version_number(p.name) for p in path.iterdir()) + 1
    name = f"v{number:06d}"
    staging = path / f".{name}.tmp-{_tag()}"
    try:
        _write_version(staging, {**meta, _PREVIOUS: current}, stats, solution, summaries,
                       pending=True)
        os.rename(staging, path / name)
    finally:
        if staging.exists():
            _remove(staging)
    # The marker goes before the switch: a kill between the two leaves a complete version
    # CURRENT never named (kept, like one rolled back from), where the other order left the
    # live version marked, and a hand rollback before the next writer made it an "orphan".
    _committed(path / name)
    try:
        _write_pointer(path, name)
    except BaseException:
        # never made current: roll back; a Ctrl-C after the switch (in the folder's fsync)
        # would have removed the version CURRENT now names
        if _pointed(path) != name:
            _remove(path / name)
        raise
    versions = [p.name for p in path.iterdir() if _version_number(p.name) >= 0]
    for old in _ancestors(path, current, versions):
        if old not in (name, current):
            _remove(path / old)
    for old in versions:
        if old not in (name, current) and _orphan(path / old):
            _remove(path / old)
    return name


def _refuse_read_only_model(path, typed):
    """Refuse to add a version to a model folder that is read-only (``chmod -R a-w``).

    Its owner is refused by the folder itself; root passed over it, wrote a
    new version and removed the old one from a model frozen read-only. As
    :func:`_refuse_read_only` refuses to replace a read-only output.
    """
    mode = os.stat(path).st_mode
    if not mode & 0o222 or not os.access(path, os.W_OK | os.X_OK):
        msg = (f"model {typed} is not writable by you (mode {stat.filemode(mode)}); it was left "
               "untouched: make it writable to change it, or write another model")
        raise ModelError(msg)


def _write_pointer(folder, name):
    pointer_tmp = folder / f".{_CURRENT}.tmp-{_tag()}"
    with open(pointer_tmp, "w") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(pointer_tmp, folder / _CURRENT)
    _fsync(folder)


def _pointed(path):
    """The name ``CURRENT`` holds now, unchecked; None where it cannot be read."""
    try:
        return (path / _CURRENT).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _remote_current(fs, root):
    try:
        name = fs.cat_file(f"{root}/{_CURRENT}").decode().strip()
    except FileNotFoundError:
        return None
    return _check_pointer(root, name)


def _write_remote_model(url, meta, stats, solution, base, summaries=None):
    fs, root = _fs(url)
    root = root.rstrip("/")
    with _remote_errors(f"model {url}"):
        current = _remote_current(fs, root)
        if current is None:
            try:
                listed = fs.ls(root, detail=False)
            except FileNotFoundError:
                listed = []
            if listed:
                msg = f"{url} exists and is not a streamproj model directory; choose another path"
                raise ModelError(msg)
        if base is not None and current != base:
            msg = (f"model {url} moved to version {current} while this job worked from {base}; "
                   "rerun the job")
            raise ModelError(msg)
        names = [e.rstrip("/").rsplit("/", 1)[-1] for e in (fs.ls(root, detail=False) if current else [])]
        number = max([_version_number(n) for n in names] + [0]) + 1
        name = f"v{number:06d}"
        files = _version_files(meta, stats, solution)
        if summaries is not None:  # objects have no links: one NPZ of every source's summary
            files["summaries.npz"] = _summaries_bytes(summaries)
        (first, data), *rest = files.items()
        if not _claim(fs, f"{root}/{name}/{first}", data):
            msg = (f"model {url} is being written by another job (its version {name}); rerun "
                   "this job when that one has finished")
            raise ModelError(msg)
        for file, data in rest:
            fs.pipe_file(f"{root}/{name}/{file}", data)
        now = _remote_current(fs, root)
        if now != current:
            if now != name:  # (a writer that did not claim the name may have committed it)
                fs.rm(f"{root}/{name}", recursive=True)
            msg = f"model {url} was changed by another job while this one wrote; rerun the job"
            raise ModelError(msg)
        fs.pipe_file(f"{root}/{_CURRENT}", (name + "\n").encode())  # the switch: one PUT
        for other in names:
            n = _version_number(other)
            if n < 0 or other in (name, current):
                continue
            if n < _version_number(current or "v000000") or _old_remote(fs, f"{root}/{other}"):
                fs.rm(f"{root}/{other}", recursive=True)
    return name


def _claim(fs, path, data):
    """Write ``path`` only if no object is there (S3's If-None-Match); False when one is.

    Two jobs on different machines that read the same ``CURRENT`` pick the same
    version name: unclaimed, the later one's files replaced the earlier one's,
    and the one refused then removed the version the other had made current.
    A store that does not take the condition gets a plain PUT, as before.
    """
    if "s3" not in fs.protocol:
        fs.pipe_file(path, data)
        return True
    try:
        fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        return False
    except OSError as exc:
        # s3fs names only AWS's own refusal FileExistsError: a store's 412 without the
        # condition named, or 409 (a conditional write racing another), is the name taken too
        code = getattr(exc.__cause__, "response", {}).get("Error", {}).get("Code")
        if code in ("PreconditionFailed", "ConditionalRequestConflict"):
            return False
        if code != "NotImplemented":
            raise
        fs.pipe_file(path, data)  # a store without conditional writes: a plain PUT, as before
    return True


def _old_remote(fs, path):
    try:
        files = fs.ls(path, detail=True)
        newest = max(f.get("LastModified") or f.get("mtime") for f in files)
    except (FileNotFoundError, ValueError, TypeError):
        return False
    if isinstance(newest, _dt.datetime):
        age = _dt.datetime.now(_dt.UTC) - newest.astimezone(_dt.UTC)
        return age.total_seconds() > REMOTE_STALE_SECONDS
    return time.time() - float(newest) > REMOTE_STALE_SECONDS


# A reader holds no lock: writers may move CURRENT on, and prune what it was reading.
_READ_TRIES = 3


class _MovedOn(ModelError):
    """The version a reader was reading is no longer the live one (it may be pruned)."""


def _model_files(path, names=("model.json", "stats.npz", "solution.npz"), optional=()):
    """``(version, {file: bytes})`` of the live version of a local or remote model.

    A file named in ``optional`` that the version lacks is left out. Read
    again when ``CURRENT`` moved on under the reader (a local version pruned
    meanwhile said the model was damaged).
    """
    return _again_if_moved(lambda: _model_files_once(path, names, optional))


def _again_if_moved(read):
    """``read()``, again (up to :data:`_READ_TRIES` in all) while it raises :class:`_MovedOn`."""
    for _ in range(_READ_TRIES - 1):
        with contextlib.suppress(_MovedOn):
            return read()
    return read()


def _moved_from(path, current):
    """The :class:`_MovedOn` of a reader of version ``current`` of ``path``."""
    msg = f"model {path} moved on from version {current} while this job read it; rerun the job"
    return _MovedOn(msg)


def _moved_on(path, folder, current):
    """A :class:`_MovedOn` when ``CURRENT`` no longer names ``current``; None when it still does."""
    now = _pointed(folder)
    if now is None or now == current:
        return None
    return _moved_from(path, current)


def _model_files_once(path, names, optional):
    if is_local(path):
        folder = local_path(path)
        if not folder.is_dir():
            msg = (f"{path} is a file, not a streamproj model directory" if folder.exists()
                   else f"no model at {path}: fit one there first ('streamproj fit INPUT "
                        f"--model {path}', or save() a fitted BoundaryProjector there)")
            raise ModelError(msg)
        named = _pointed(folder)
        try:
            current = _current_version(folder)
        except ModelError:  # (naming a version pruned since: moved on)
            moved = _moved_on(path, folder, named)
            if moved is None:
                raise
            raise moved from None
        if current is None:
            msg = f"{path} is not a streamproj model directory (no {_CURRENT} file)"
            raise ModelError(msg)
        read = lambda name: (folder / current / name).read_bytes()  # noqa: E731
    else:
        fs, root = _fs(path)
        root = root.rstrip("/")
        try:
            current = _remote_current(fs, root)
        except ModelError:
            raise
        except Exception as exc:
            if not _is_expected(exc):
                raise
            msg = f"cannot read model {path}: {type(exc).__name__}: {_short(exc)}"
            raise ModelError(msg) from None
        if current is None:
            msg = f"no model at {path} (no {_CURRENT} object)"
            raise ModelError(msg)
        read = lambda name: fs.cat_file(f"{root}/{current}/{name}")  # noqa: E731
    files = {}
    for name in names:
        try:
            files[name] = read(name)
        except FileNotFoundError:
            if name in optional:
                continue
            moved = _moved_on(path, local_path(path), current) if is_local(path) else None
            if moved is not None:  # pruned by writers since: not damage
                raise moved from None
            msg = f"model {path} (version {current}) is damaged: cannot read {name}: it is missing"
            raise ModelError(msg) from None
        except Exception as exc:
            if not _is_expected(exc):
                raise
            msg = f"model {path} (version {current}) is damaged: cannot read {name}: {_short(exc)}"
            raise ModelError(msg) from None
    return current, files


_SOLUTION_KEYS = ("components", "center", "coef", "intercept", "classes")


def _npz(data, where):
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as exc:
        msg = f"{where} is damaged (truncated or not an NPZ file: {_short(exc) or type(exc).__name__})"
        raise ModelError(msg) from None
    except Exception as exc:  # zlib.error and friends of a corrupt member
        if not _is_expected(exc):
            raise
        msg = f"{where} is damaged ({type(exc).__name__}: {_short(exc)})"
        raise ModelError(msg) from None


def read_model(path):
    """Read the live version of a model directory (local or on an object store).

    Returns
    -------
    meta : dict
    stats : ClassStats
    solution : dict of str to ndarray
    """
    current, files = _model_files(path)
    where = f"{str(path).rstrip('/')}/{current}"
    try:
        meta = json.loads(files["model.json"])
    except (ValueError, UnicodeDecodeError) as exc:
        msg = f"{where}/model.json is damaged: {_short(exc)}"
        raise ModelError(msg) from None
    if not isinstance(meta, dict) or meta.get("format") != MODEL_FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else None
        msg = f"{path} is not a streamproj model (format {got!r})"
        raise ModelError(msg)
    if meta.get("format_version", 0) > MODEL_FORMAT_VERSION:
        msg = f"model {path} was written by a newer streamproj (format {meta['format_version']}); upgrade streamproj"
        raise ModelError(msg)
    if not isinstance(meta.get("params"), dict):
        msg = f"{where}/model.json is damaged: it has no 'params'"
        raise ModelError(msg)
    solution = _npz(files["solution.npz"], f"{where}/solution.npz")
    lacking = [k for k in _SOLUTION_KEYS if k not in solution]
    if lacking:
        msg = f"{where}/solution.npz is damaged: it lacks {', '.join(lacking)}"
        raise ModelError(msg)
    arrays = _npz(files["stats.npz"], f"{where}/stats.npz")
    try:
        stats = ClassStats.from_arrays(arrays)
    except StreamprojError as exc:
        msg = f"{where}/stats.npz is damaged: {exc}"
        raise ModelError(msg) from None
    except Exception as exc:
        if not _is_expected(exc):
            raise
        msg = f"{where}/stats.npz is damaged ({type(exc).__name__}: {_short(exc)})"
        raise ModelError(msg) from None
    for key in ("sources", "evicted_sources"):
        check_ledger(meta.get(key), f"{where}/model.json", key, ModelError)
    fault = ModelRecord(meta, stats, solution).fault()
    if fault is not None:  # edited by hand: refused here, not by a traceback or a wrong output later
        msg = f"model {path} (version {current}) is damaged: {fault}"
        raise ModelError(msg)
    meta["version"] = current
    return meta, stats, solution


def check_ledger(entries, where, key="sources", error=None):
    """Refuse a ledger (a model's or an output's ``sources``) edited into what jobs cannot read.

    Each entry must be a table with a text ``url`` and a whole number of
    ``rows`` (0.1's entries have no ``id``: not required); the error names the
    entry and the key. None (no ledger) passes.
    """
    error = error or ModelError
    if entries is None:
        return
    if not isinstance(entries, list):
        msg = f"{where} is damaged: its {key!r} must be a list; got {type(entries).__name__}"
        raise error(msg)
    for i, entry in enumerate(entries):
        bad = _ledger_entry_fault(entry)
        if bad is not None:
            msg = (f"{where} is damaged: entry {i + 1} of its {key!r} ({_short(str(entry))[:60]}…): "
                   f"{bad}")
            raise error(msg)


def _ledger_entry_fault(entry):
    """What is wrong with one ledger entry (None when nothing is)."""
    if not isinstance(entry, dict):
        return "it is not a table"
    if "url" not in entry:
        return "it lacks 'url'"
    if not isinstance(entry["url"], str):
        return f"its 'url' is {entry['url']!r}"
    if "rows" not in entry:
        return "it lacks 'rows'"
    rows = entry["rows"]
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
        return f"its 'rows' is {rows!r}"
    return None


def read_record(path):
    """The live version of a model directory as a :class:`~streamproj.record.ModelRecord`."""
    meta, stats, solution = read_model(path)
    return ModelRecord(meta, stats, solution, where=str(path))


def read_record_and_summaries(path):
    """:func:`read_record` and :func:`read_summaries` of one version, read again if it moved on.

    For readers without the model's lock (``info``, the other models of a
    merge): an update between the two reads made them fail with "rerun the job".
    """
    def read():
        record = read_record(path)
        return record, read_summaries(path, record.version)

    return _again_if_moved(read)


def read_summaries(path, version=None):
    """The per-source summaries of a model's live version, as :class:`Summaries`.

    A local version's summaries are read one by one as a job asks for them
    (an update of new sources reads none); an object store's, and a version
    written before they had a file each, at once. Models written before
    per-source summaries existed give an empty mapping. ``version``: refuse
    (ModelError) when the live version is another one.
    """
    current, _ = _model_files(path, names=())
    if version is not None and current != version:
        msg = f"model {path} moved to version {current} while this job read {version}; rerun the job"
        raise _MovedOn(msg)
    where = f"{str(path).rstrip('/')}/{current}"
    if is_local(path):
        return _local_summaries(path, current, where)
    _, files = _model_files(path, names=("summaries.npz",), optional=("summaries.npz",))
    return _summaries_of_npz(files.get("summaries.npz"), where)


def _local_summaries(path, current, where):
    """:func:`read_summaries` of local version ``current``, refusing one replaced meanwhile.

    Writers hold the model's lock; a reader that does not (``info``, a merge's
    other models) may find the version pruned by two updates while it lists it.
    """
    model = local_path(path)
    version = model / current
    try:
        names = sorted(os.listdir(version / _SUMMARIES))
    except FileNotFoundError:
        names = None
    except OSError as exc:
        msg = f"cannot read {where}/{_SUMMARIES}: {_short(exc)}"
        raise ModelError(msg) from None
    if names is None:  # a version written before a file per source, or none at all
        try:
            data = (version / "summaries.npz").read_bytes()
        except FileNotFoundError:
            if not version.is_dir():
                raise _moved_from(path, current) from None
            data = None
        summaries = _summaries_of_npz(data, where)
    else:
        long_ids = {}
        if _LONG_IDS in names:
            try:
                long_ids = json.loads((version / _SUMMARIES / _LONG_IDS).read_bytes())
            except FileNotFoundError:
                raise _moved_from(path, current) from None
            except (OSError, ValueError) as exc:
                msg = f"{where}/{_SUMMARIES}/{_LONG_IDS} is damaged: {_short(exc)}"
                raise ModelError(msg) from None
        files = {}
        for name in names:
            if name.endswith(".npz"):
                sid = long_ids.get(name) or urllib.parse.unquote(name[:-4])
                files[sid] = version / _SUMMARIES / name
        summaries = Summaries(files, where)
    # another version made current meanwhile: this one may be pruned, its listing partial
    if _current_version(model) != current:
        raise _moved_from(path, current)
    return summaries


def _summaries_of_npz(data, where):
    """The :class:`Summaries` held in one ``summaries.npz`` (None: none held)."""
    summaries = Summaries(where=where)
    if data is None:
        return summaries
    grouped: dict[str, dict[str, np.ndarray]] = {}
    for key, arr in _npz(data, f"{where}/summaries.npz").items():
        sid, _, name = key.partition("__")
        grouped.setdefault(sid, {})[name] = arr
    for sid, arrays in grouped.items():
        summaries[sid] = _summary_of(arrays, f"{where}/summaries.npz")
    summaries._in_npz = set(grouped)
    return summaries


def _summary_of(arrays, where):
    try:
        return ClassStats.from_arrays(arrays)
    except (StreamprojError, KeyError, ValueError) as exc:
        msg = f"{where} is damaged: {_short(exc)}"
        raise ModelError(msg) from None


class Summaries(collections.abc.MutableMapping):
    """A model's per-source summaries, ``{source id: ClassStats}``, each read when first asked for.

    What :func:`read_summaries` gives and :func:`write_model` takes: those
    read from a file and not replaced since are linked into the next version,
    not written again (:meth:`unchanged_file`).

    Parameters
    ----------
    files : dict of str to Path, optional
        The file of each source's summary.
    where : str
        The version, for error messages.
    """

    def __init__(self, files=None, where="the model"):
        self._files = dict(files or {})
        self._values: dict[str, ClassStats] = {}
        self._where = where
        self._in_npz: set[str] = set()  # read from a version's one summaries.npz

    def __getitem__(self, sid):
        if sid not in self._values:
            path = self._files[sid]  # KeyError for a source it does not hold
            where = f"{self._where}/{_SUMMARIES}/{path.name}"
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                msg = (f"{where} is gone: a newer version of the model replaced this one while "
                       "the job read it; rerun the job")
                raise ModelError(msg) from None
            except OSError as exc:
                msg = f"cannot read {where}: {_short(exc)}"
                raise ModelError(msg) from None
            self._values[sid] = _summary_of(_npz(data, where), where)
        return self._values[sid]

    def __setitem__(self, sid, stats):
        self._files.pop(sid, None)
        self._in_npz.discard(sid)
        self._values[sid] = stats

    def __delitem__(self, sid):
        if sid not in self:
            raise KeyError(sid)
        self._files.pop(sid, None)
        self._values.pop(sid, None)
        self._in_npz.discard(sid)

    def __contains__(self, sid):
        return sid in self._files or sid in self._values

    def __iter__(self):
        return iter(dict.fromkeys([*self._files, *self._values]))

    def __len__(self):
        return len(self._files.keys() | self._values.keys())

    def name_of(self, sid):
        """Where ``sid``'s summary was read from, for messages."""
        path = self._files.get(sid)
        if path is not None:
            return f"{self._where}/{_SUMMARIES}/{path.name}"
        if sid in self._in_npz:
            return f"{self._where}/summaries.npz ({sid})"
        return f"{self._where}'s summary {sid}"

    def stored(self, sid):
        """True when ``sid``'s summary is one read from the model (not set since)."""
        return sid in self._files or sid in self._in_npz

    def unchanged_file(self, sid):
        """The file ``sid``'s summary was read from, if it was not replaced since; else None."""
        return self._files.get(sid)

    def only(self, sids):
        """The same summaries (nothing read) of the given source ids that it holds, in that order."""
        out = Summaries(where=self._where)
        for sid in sids:
            if sid in self._files:
                out._files[sid] = self._files[sid]
                if sid in self._values:
                    out._values[sid] = self._values[sid]
            elif sid in self._values:
                out._values[sid] = self._values[sid]
        return out


# ------------------------------------------------------- output frames
_FRAME_CHUNK = 2**20


def write_output_frame(group, record):
    """Store the model an output was projected with in its ``frame`` subgroup.

    ``record`` is a :class:`~streamproj.record.ModelRecord` (``saved`` is
    stamped now when it has none). The model's files are kept byte for byte
    (``model.json`` as attributes, the two NPZ files as uint8 arrays), so the
    output's frame can be rebuilt exactly long after the model directory has
    moved on.
    """
    # Counted by the output's guard, as the pass's chunks are: a frame written from another
    # thread is waited for when the output fails, and refused once it has (see output_group).
    guard = _GUARDS.get(id(group))
    with contextlib.nullcontext() if guard is None else guard:
        _write_frame(group, record)


def _write_frame(group, record):
    meta, stats, solution = record
    meta.setdefault("saved", timestamp())
    frame = group.create_group(_FRAME, attributes={"model": json.loads(
        json.dumps(meta, default=_json_default))})
    for name, arrays in (("stats", stats.to_arrays()), ("solution", solution)):
        raw = np.frombuffer(_npz_buffer(arrays), dtype=np.uint8)  # a view: no copy of the NPZ
        # Uncompressed: zstd saved 5 % of a p = 4,096 scatter's 134 MB (float64 mantissas)
        # for 0.16 s more to write and 0.13 s more to read it. In 1 MiB chunks: Zarr copies
        # each chunk being written about five times, so a one-chunk frame peaked at 6x the
        # summary (tracemalloc, p = 2,048), 1 MiB chunks at 1.6x (the NPZ and a few MiB).
        arr = frame.create_array(name, shape=raw.shape, chunks=(max(1, min(raw.size, _FRAME_CHUNK)),),
                                 dtype=np.uint8, dimension_names=(f"{_FRAME}_{name}_bytes",),
                                 compressors=None)
        arr[:] = raw


def read_output_frame(group, where="OUT"):
    """The :class:`~streamproj.record.ModelRecord` an output was written with; None for 0.1 outputs.

    It unpacks as ``meta, stats, solution``.
    """
    if _FRAME not in group:
        return None
    try:
        frame = group[_FRAME]
        meta = dict(frame.attrs["model"])
        arrays = _npz(bytes(frame["stats"][:]), f"{where}/frame/stats")
        try:
            stats = ClassStats.from_arrays(arrays)
        except ModelError as exc:  # (its message names the array, not where it lies)
            msg = f"{where}/frame/stats is damaged: {exc}; rewrite the output"
            raise InputError(msg) from None
        solution = _npz(bytes(frame["solution"][:]), f"{where}/frame/solution")
    except StreamprojError:
        raise
    except Exception as exc:
        if not _is_expected(exc):
            raise
        msg = f"{where}/frame is damaged ({type(exc).__name__}: {_short(exc)}); rewrite the output"
        raise InputError(msg) from None
    return ModelRecord(meta, stats, solution)
