"""Ledgers of sources: which rows of which input a model (or an output) holds.

One job: decide, for an opened :class:`~streamproj.sources.Source` and a
ledger (the list of entries a model's ``model.json`` or an output's attributes
keep), whether the source is new, was taken in full before (skip), grew since
(take only its new rows) or changed (refuse) — and keep the entries, and
say which of them a moved folder or bucket prefix holds (:func:`relocated`).

An entry is JSON::

    {"id": "s000003", "url": ..., "kind": "zarr", "x": "X", "y": "y",
     "features": [...], "rows": 200000, "fingerprint": "<first/last rows>",
     "stamp": "<file sizes and times>", "added": ISO time, "merged": ISO time,
     "batches": [{"start": 0, "stop": 200000, "fingerprint": "<summary>", "kernel": 2}],
     "origin": {"model": ..., "model_id": ..., "version": ...}}   # merged from another model

Checking that rows taken before are unchanged must not cost a read of them
every night, or a job over many sources costs O(all rows) again. So an entry
keeps a *stamp* of the source's files (names, sizes, modification times, as
fsspec lists them: one listing, no data read). A source whose row count and
stamp are unchanged is skipped without reading it; otherwise the first and
last rows it held are fingerprinted (:meth:`streamproj.sources.Source.fingerprint`, at most two
chunks) and must match; ``--verify`` re-reads all of them. Entries written by
streamproj 0.1 have ``edges`` (the same fingerprint) and no ``kind``
(a Zarr group).
"""

import datetime as _dt
import fnmatch
import posixpath
import re

from . import store
from .errors import InputError, SourceChangedError

__all__ = [
    "file_fields",
    "find",
    "fingerprint_of",
    "held_rows",
    "key_of",
    "location",
    "matching",
    "new_id",
    "overlapping",
    "parse_age",
    "prefixes",
    "record",
    "relocated",
    "rows_fields",
    "same_rows",
    "same_source",
    "stamp",
    "to_evict",
]

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def key_of(entry):
    """What identifies a source in a ledger entry or key, as a hashable tuple.

    A Zarr array's path is normalised: ``X``, ``/X``, ``X/`` and ``g/../X`` are
    one array (a respelling must not merge its rows a second time).
    """
    x, y, kind = entry.get("x"), entry.get("y"), entry.get("kind", "zarr")
    if kind == "zarr":
        x, y = _array_path(x), _array_path(y)
    return (entry.get("url"), kind, tuple(x) if isinstance(x, list) else x, y)


def _array_path(name):
    if not isinstance(name, str) or not name.strip("/"):
        return name
    return posixpath.normpath("/" + name).lstrip("/")


def location(entry):
    """The file or folder of a ledger entry or source key (an HDF5 dataset path dropped)."""
    url = str(entry.get("url"))
    if entry.get("kind") == "hdf5":
        cut = url.rfind(":/")
        if cut > url.find("://") + 2:
            url = url[:cut]
    return url


def overlapping(ledger, key):
    """An entry of ``ledger`` whose file or folder overlaps the source ``key``'s but is not it.

    A Parquet folder and one of its files, a file and the folder holding it, or
    a table opened again with another label: the same rows under another name,
    which merging would count twice. (A Zarr group's arrays and an HDF5 file's
    datasets are told apart by their paths: two of one file are two sources;
    but one array or dataset with other labels, or a Zarr store read again as
    an xarray dataset, is the same rows.)
    """
    want, where = key_of(key), location(key)
    for entry in ledger:
        kinds = {key.get("kind"), entry.get("kind", "zarr")}
        if key_of(entry) == want:
            continue
        if "zarr" in kinds:
            same_store = entry.get("url") == key.get("url")
            if kinds == {"zarr"} and same_store and key_of(entry)[2] == want[2]:
                return entry  # one X array, other labels (y added later, or another one)
            if kinds == {"zarr", "xarray"} and same_store:
                return entry
            continue
        if kinds == {"hdf5"}:  # datasets of one file are sources of their own, as Zarr arrays
            if entry.get("url") == key.get("url"):  # one dataset, other labels
                return entry
            continue
        if store.overlaps(where, location(entry)):
            return entry
    return None


def fingerprint_of(entry):
    """The fingerprint a ledger entry records (0.1 called it ``edges``); None when it has none."""
    return entry.get("fingerprint") or entry.get("edges")


def same_rows(ledger, src, prefix_of=None):
    """An entry of ``ledger`` whose rows ``src`` holds under another name (all, or its first rows), or None.

    A source moved or copied to another path is a new key with the same rows
    (and, if it grew since, more; or, cut short, fewer): merging it would
    count them twice. An entry of as many rows is compared by fingerprint
    (first and last rows, shapes and dtypes); one of fewer rows by its head
    (the first rows: from the fingerprint a job reads anyway), then, only if
    the heads agree, by the fingerprint of that prefix of ``src`` (its two
    edge chunks). One of more rows with ``src``'s head may hold ``src`` as its
    first rows: ``prefix_of(entry, rows)`` gives the fingerprint of that
    entry's first ``rows`` rows read where it lies, or None where it cannot be
    read as recorded; only an equal one counts (the first 256 rows alone are
    no proof: daily files may all start with the same reference rows, and the
    held one may be deleted once merged). Empty sources are never the same
    rows.
    """
    rows, want = src.n_rows, key_of(src.key())
    others = [e for e in ledger if key_of(e) != want and int(e["rows"]) > 0]

    def labels(e):
        # An output holds rows, not labels: a source read without labels and a labelled copy
        # of it hold the same rows, compared by the digests of their rows alone
        return e.get("y") is not None and src.label is not None

    def recorded(e, field):
        if e.get("y") is not None and src.label is None:
            return e.get(f"rows_{field}")  # (see rows_fields; an entry from before has none)
        return fingerprint_of(e) if field == "fingerprint" else e.get(field)

    same = next((e for e in others if int(e["rows"]) == rows
                 and recorded(e, "fingerprint") == src.fingerprint(rows, labels(e))), None)
    if same is not None:
        return same
    if src.head() is None or not any(recorded(e, "head") for e in others):
        return None
    for e in others:
        if recorded(e, "head") != src.head(labels=labels(e)) or int(e["rows"]) == rows:
            continue
        if int(e["rows"]) < rows:
            if src.fingerprint(int(e["rows"]), labels(e)) == recorded(e, "fingerprint"):
                return e
            continue
        theirs = prefix_of(e, rows) if prefix_of is not None else None
        if theirs is not None and theirs == src.fingerprint(rows, labels(e)):
            return e
    return None


def same_source(ledger, entry):
    """The entry of ``ledger`` for the same source as another ledger's ``entry``, or None.

    With no rows to read (two models' ledgers): the same key, or as many rows
    with the same fingerprint; or, of two entries of different lengths, the
    same head (first rows): one may be the other grown, and that counts.
    """
    prints = fingerprint_of(entry)
    return find(ledger, entry) or next(
        (f for f in ledger if prints and fingerprint_of(f) == prints
         and f["rows"] == entry["rows"]), None) or next(
        (f for f in ledger if entry.get("head") and f.get("head") == entry["head"]
         and f["rows"] != entry["rows"]), None)


def find(ledger, key):
    """The entry of ``ledger`` for a source key (:meth:`streamproj.sources.Source.key`), or None."""
    want = key_of(key)
    return next((e for e in ledger if key_of(e) == want), None)


def stamp(src):
    """Digest of the listing (names, sizes, modification times) of a source's files.

    :meth:`streamproj.sources.Source.listing`: one directory listing per
    opening (one LIST call on an object store), no data read; None when the
    files cannot be listed (then the fingerprint decides).
    """
    return src.listing()


def held_rows(entry, src, what, fix):
    """Rows of ``src`` that ``entry`` holds, after checking they are unchanged.

    Parameters
    ----------
    entry : dict or None
        The ledger entry of the source (None: a new source, 0 rows held).
    src : Source
    what : str
        Who holds the rows, for messages ("model m", "output o.zarr").
    fix : str
        What to do about a changed source, for messages.

    Returns
    -------
    int
        Rows held; the rows from there on are new.

    Raises
    ------
    SourceChangedError
        Rows were removed, or the rows held have changed.
    """
    if entry is None:
        return 0
    rows = int(entry["rows"])
    when = entry.get("merged", "earlier")
    if src.n_rows < rows:
        msg = (f"{src.names[0]} has {src.n_rows} rows but {what} holds {rows} of them (taken on "
               f"{when}): rows were removed; {fix}")
        raise SourceChangedError(msg)
    if src.n_rows == rows and entry.get("stamp") is not None and entry.get("stamp") == stamp(src):
        return rows  # same files, same sizes and times: nothing to read
    replaced = _replaced_file(entry, src)
    if replaced is not None:
        msg = (f"{replaced} of {src.names[0]} (taken into {what} on {when}) was replaced by a "
               "file of as many rows whose Parquet statistics (a column's least or greatest "
               f"value, or its nulls) differ; {fix}")
        raise SourceChangedError(msg)
    expected = fingerprint_of(entry)
    if expected is not None and src.fingerprint(rows) != expected:
        # (the fingerprint covers the labels too: relabelled rows were said to be X's change)
        labels = "" if src.y is None else f" or their labels {src.names[1]}"
        msg = (f"the first {rows} rows of {src.names[0]}{labels} (taken into {what} on {when}) "
               f"have changed since; {fix}")
        raise SourceChangedError(msg)
    return rows


def rows_fields(src, rows=None):
    """An output's entry's digests of a labelled source's rows read without labels ({} otherwise).

    An output holds rows, not labels: a later unlabelled copy of these rows is
    compared by them (:func:`same_rows`), as a labelled copy of rows held
    unlabelled is by the entry's own fingerprint.
    """
    if src.label is None:
        return {}
    out = {"rows_fingerprint": src.fingerprint(rows, labels=False)}
    head = src.head(rows, labels=False)
    if head is not None:
        out["rows_head"] = head
    return out


def file_fields(src):
    """A Parquet folder's ``files`` and ``file_stats`` for its ledger entries ({} otherwise)."""
    out: dict[str, list] = {}
    if src.files:
        out["files"] = list(src.files)
    if src.file_stats:
        out["file_stats"] = [list(f) for f in src.file_stats]
    return out


def _replaced_file(entry, src):
    """A file of a Parquet folder that holds as many rows as when merged but other statistics.

    The fingerprint reads the folder's first and last rows only: a file in
    the middle replaced by one of the same length passed it. Its footer
    tells it apart when a column's least or greatest value or its nulls
    changed (not an edit inside those: ``--verify`` reads the rows). A file
    whose row count changed is left to the row counts and the fingerprint (a
    last file still being written grows).
    """
    then = dict(zip(entry.get("files") or [], entry.get("file_stats") or [], strict=False))
    if not then or not src.file_stats:
        return None
    for name, (rows, digest, complete) in zip(src.files, src.file_stats, strict=True):
        held = then.get(name)
        # decided by statistics only where both footers have them all: a writer that leaves
        # them out (or a compaction of the same rows) is left to the fingerprint
        if (held is not None and len(held) > 2 and held[2] and complete
                and int(held[0]) == int(rows) and held[1] != digest):
            return name
    return None


def new_id(ledger):
    """A source id not used in ``ledger`` (``s000001``, ``s000002``, …)."""
    used = [int(e["id"][1:]) for e in ledger if str(e.get("id", "")).startswith("s")
            and str(e["id"][1:]).isdigit()]
    return f"s{max(used, default=0) + 1:06d}"


def record(src, rows, previous=None, sid=None, batch=None, now=None, listing=None):
    """The ledger entry of ``src`` holding its first ``rows`` rows.

    Parameters
    ----------
    listing : str, optional
        The source's :func:`stamp`, taken before its rows were read (default:
        taken now). Taken after, a source rewritten while the job read it
        would be recorded as unchanged and skipped ever after.
    previous : dict, optional
        The source's entry before; its id, ``added`` time, batches and origin are kept.
    batch : (int, int, str, int), optional
        ``(start, stop, summary fingerprint, pass-1 kernel)`` of the rows just
        taken (the kernel lets ``update --verify`` sum them again as they were).
    """
    now = now or store.timestamp()
    previous = previous or {}
    batches = list(previous.get("batches", []))
    if batch is not None:
        start, stop, fingerprint, kernel = batch
        batches.append({"start": int(start), "stop": int(stop), "fingerprint": fingerprint,
                        "kernel": int(kernel)})
    entry = {**src.key(), "features": list(src.feature_names), "rows": int(rows),
             "fingerprint": src.fingerprint(rows), "head": src.head(rows),
             "stamp": (listing or stamp(src)) if rows == src.n_rows else None,
             "added": previous.get("added", now), "merged": now, "batches": batches}
    if sid or previous.get("id"):
        entry["id"] = sid or previous["id"]
    entry.update(file_fields(src))
    if previous.get("origin"):
        entry["origin"] = previous["origin"]
    return entry


def matching(ledger, pattern):
    """Entries whose URL is ``pattern`` (normalised like a source's), else those matching it as a glob."""
    inner = ""
    cut = str(pattern).rfind(":/")
    if cut > 0 and "://" not in str(pattern)[cut : cut + 3]:
        pattern, inner = str(pattern)[:cut], str(pattern)[cut:]
    target = store.normalise(pattern) + inner
    exact = [e for e in ledger if e.get("url") == target]
    # a source's own name is no glob: "day[1].zarr" also matched day1.zarr
    return exact or [e for e in ledger if fnmatch.fnmatchcase(str(e.get("url")), target)]


def relocated(entry, old, new):
    """The URL of a ledger entry's source moved from under ``old`` to under ``new``; None if not under ``old``.

    ``old`` and ``new`` are normalised locations (:func:`streamproj.store.normalise`).
    A prefix matches whole path components of the entry's file or folder
    (:func:`location`): ``/data/ev`` is no prefix of ``/data/events``. An HDF5
    dataset path after the file (``:/group/X``) is kept.

    >>> relocated({"url": "/data/events/d1.zarr"}, "/data/events", "s3://b/ev")
    's3://b/ev/d1.zarr'
    >>> relocated({"url": "/data/events/d1.zarr"}, "/data/ev", "/x") is None
    True
    >>> relocated({"url": "/d/f.h5:/g/X", "kind": "hdf5"}, "/d/f.h5", "/e/f.h5")
    '/e/f.h5:/g/X'
    """
    url, where, stem = str(entry.get("url")), location(entry), str(old).rstrip("/")
    if where != old and not where.startswith(stem + "/"):
        return None
    return str(new).rstrip("/") + url[len(stem):]


def prefixes(entries, n=5):
    """The folders (or buckets) holding the sources of ``entries``, the first ``n``, for messages.

    >>> prefixes([{"url": "/d/a.zarr"}, {"url": "/d/b.zarr"}, {"url": "s3://b/x/c.parquet"}])
    ['/d', 's3://b/x']
    """
    out: list[str] = []
    for entry in entries:
        folder = posixpath.dirname(location(entry).rstrip("/"))
        if folder and folder not in out:
            out.append(folder)
    return out[:n]


def parse_age(text, where="max_age"):
    """Seconds in an age such as ``"30d"``, ``"12h"``, ``"2w"``, ``"90m"``, ``"3600s"``."""
    match = _AGE.match(str(text))
    if not match:
        msg = f"{where} must be a number and a unit (s, m, h, d or w), such as \"30d\"; got {text!r}"
        raise InputError(msg)
    return float(match.group(1)) * _UNITS[match.group(2)]


def to_evict(ledger, keep_last=None, max_age=None, now=None):
    """Entries that fall out of a sliding window: beyond the newest ``keep_last``, or older than ``max_age``.

    A source's age is the time it was first taken (``added``); sources are
    ordered by it (ties keep ledger order).

    Parameters
    ----------
    keep_last : int, optional
    max_age : str or float, optional
        ``"30d"`` style, or seconds.
    now : datetime, optional
    """
    order = sorted(range(len(ledger)), key=lambda i: (ledger[i].get("added", ""), i))
    out = set()
    if keep_last is not None:
        out.update(order[: max(0, len(order) - int(keep_last))])
    if max_age is not None:
        seconds = max_age if isinstance(max_age, int | float) else parse_age(max_age)
        now = now or _dt.datetime.now(_dt.UTC)
        for i, e in enumerate(ledger):
            added = e.get("added")
            if added and (now - _dt.datetime.fromisoformat(added)).total_seconds() > seconds:
                out.add(i)
    return [ledger[i] for i in sorted(out)]
