"""Running the passes' graphs: the scheduler in charge, BLAS threads, progress bars.

:func:`compute_with_progress` is the one place where streamproj computes a Dask
graph. It picks the scheduler in charge (a ``dask.distributed`` client when one
is active, else Dask's local threaded scheduler) and, when asked, shows a tqdm
bar over the chunk tasks — the tasks whose key names start with a prefix such
as ``"streamproj-summary-"``:

- locally, a :class:`dask.callbacks.Callback` passed to this one ``compute``
  counts the chunk tasks as they finish;
- on a cluster, the graph is submitted once with the chunk keys wanted as well
  as the results, and the bar counts the client's own chunk futures with
  :func:`distributed.as_completed`. Nothing runs on the scheduler, so any number
  of jobs can share one scheduler and each bar counts only its own chunks.

Chunk tasks that Dask's optimisation fuses into their consumer (pass 2 with a
single output array) keep no name of their own; a bar counts them when the
compute ends, so a finished bar always shows every chunk.
"""

import sys
from typing import Any

import dask
import dask.threaded
from dask.callbacks import Callback, normalize_callback
from threadpoolctl import threadpool_limits

__all__ = ["compute_with_progress", "local_scheduler"]


def compute_with_progress(*objects: Any, progress: bool = False, prefix: str = "",
                          total: int | None = None, desc: str | None = None,
                          optimize_graph: bool = True) -> tuple[Any, ...]:
    """``dask.compute`` with an optional tqdm bar over the chunk tasks named by ``prefix``.

    Parameters
    ----------
    *objects
        Dask collections (or other objects, passed through), as for :func:`dask.compute`.
    progress : bool
        Show a bar on stderr. Without it this is exactly ``dask.compute``
        (under the BLAS limit below): no callback, no extra futures.
    prefix : str
        Start of the key names of the chunk tasks the bar counts.
    total : int, optional
        Number of chunks (default: the number of chunk tasks in the graph).
    desc : str, optional
        The bar's label.
    optimize_graph : bool
        As for :func:`dask.compute`. False keeps every task under its own key,
        so graphs of different kinds (a pass-1 summary and a pass-2 store) that
        read the same chunks share those reads: Dask optimises arrays and
        delayed objects apart, and fusing a chunk read into each consumer would
        read it once per consumer.

    Returns
    -------
    tuple
        One result per object, as :func:`dask.compute` returns them.

    Notes
    -----
    The BLAS pinning lives here because this is the only function that knows
    which scheduler runs the graph. On the local threaded scheduler Dask
    already keeps every core busy with chunks, and BLAS threads on top fight
    for the same cores (measured: 6 core-seconds instead of 3 for pass 1 on
    2M x 100 rows), so BLAS gets one thread per Dask thread for the duration
    of the compute (threadpoolctl's limit is process-wide, so it is scoped to
    the compute and restored after). Distributed workers in their own
    processes get the same setting from their nanny (``OPENBLAS_NUM_THREADS=1``,
    Dask's default); workers in this process (``processes=False``) get it from
    the same limit, which a client holds for its compute too: with two BLAS
    threads their products differed in the last bit, and ``update --verify``
    compares pass 1's bits.
    """
    client = _distributed_client()
    with threadpool_limits(limits=1, user_api="blas"):
        if client is None:
            local = local_scheduler()
            if not progress:
                return dask.compute(*objects, optimize_graph=optimize_graph, **local)
            # Given to this compute only (not the global ``with callback:``), so two
            # jobs computing at once in one process never count each other's tasks.
            bar = _LocalChunkBar(prefix, total, desc)
            return dask.compute(*objects, optimize_graph=optimize_graph, **local,
                                callbacks=[*Callback.active, normalize_callback(bar)])
        if not progress:
            return dask.compute(*objects, optimize_graph=optimize_graph)
        return _compute_on_client(client, objects, prefix, total, desc, optimize_graph)


def _open_bar(total, desc):
    """A tqdm bar over chunks on stderr (tests replace this to count updates).

    Parameters
    ----------
    total : int or None
        Number of chunks.
    desc : str or None
        The bar's label.

    Returns
    -------
    tqdm.tqdm
    """
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="chunk", file=sys.stderr)


def _key_name(key):
    """The name part of a Dask key (``"x-1"`` or ``("x", 3)`` -> ``"x-1"`` / ``"x"``).

    Parameters
    ----------
    key : str or tuple
        A Dask key.

    Returns
    -------
    str or None
        None when the key has no string name.
    """
    name = key[0] if isinstance(key, tuple) else key
    return name if isinstance(name, str) else None


def _is_chunk(key, prefix):
    """Whether ``key`` names one of the chunk tasks a bar counts.

    Parameters
    ----------
    key : str or tuple
        A Dask key.
    prefix : str
        Start of the chunk tasks' key names.

    Returns
    -------
    bool
    """
    name = _key_name(key)
    return name is not None and name.startswith(prefix)


class _LocalChunkBar(Callback):
    """A tqdm bar over the tasks whose key starts with ``prefix`` (local schedulers)."""

    def __init__(self, prefix, total, desc):
        super().__init__()
        self.prefix, self.total, self.desc = prefix, total, desc
        self.bar = None

    def _start(self, dsk):
        if self.total is None:
            self.total = sum(_is_chunk(key, self.prefix) for key in dsk)
        self.bar = _open_bar(self.total, self.desc)

    def _posttask(self, key, result, dsk, state, worker_id):
        if self.bar is not None and _is_chunk(key, self.prefix):
            self.bar.update(1)

    def _finish(self, dsk, state, errored):
        if self.bar is not None:
            if not errored and self.bar.n < self.total:
                # chunks whose tasks dask fused under other names count too
                self.bar.update(self.total - self.bar.n)
            self.bar.close()


def local_scheduler() -> dict[str, Any]:
    """``dask.compute``'s keyword for the threaded scheduler where no client can be active.

    Given no scheduler, ``dask.compute`` looks for a distributed client by
    importing ``distributed`` (0.12-0.20 s in each new process here, 12-20 %
    of reading 2M x 100 rows), which no client can be without. Naming the threaded
    scheduler, dask's own default for arrays and delayed objects, skips that;
    where ``distributed`` is imported already, or dask's config names a
    scheduler, dask chooses as it always does.

    Returns
    -------
    dict
        ``{"scheduler": dask.threaded.get}``, or empty.
    """
    if ("distributed" in sys.modules or dask.config.get("scheduler", None) is not None
            or dask.config.get("get", None) is not None):
        return {}
    # the function itself: a name ("threads") makes dask import distributed to look for a
    # client all the same
    return {"scheduler": dask.threaded.get}


def _distributed_client():
    """The active ``dask.distributed`` client, or None (not installed or none active).

    Returns
    -------
    distributed.Client or None
    """
    if "distributed" not in sys.modules:
        return None  # no client without the module: do not pay its import (~0.15 s) to learn so
    from distributed import get_client

    try:
        return get_client()
    except ValueError:
        return None


def _optimized_graph(collections, optimize_graph=True):
    """The graph ``dask.compute`` would submit for ``collections``, and its result keys.

    Built the way :func:`dask.compute` and ``Client.compute`` build it, so the
    graph that runs with a bar is the one that runs without: the same
    optimisation, the same shared (not recomputed) chunk tasks.

    Parameters
    ----------
    collections : list
        Dask collections.
    optimize_graph : bool
        As for :func:`dask.compute`.

    Returns
    -------
    graph : Mapping
        Key -> task, optimised, with one finalize task per collection.
    keys : list
        The keys of the collections' results, in order.
    """
    from dask._expr import FinalizeCompute
    from dask.base import collections_to_expr
    from dask.core import flatten

    finalized = FinalizeCompute(collections_to_expr(collections, optimize_graph=optimize_graph))
    expr = finalized.optimize()
    return expr.__dask_graph__(), list(flatten(expr.__dask_keys__()))


def _compute_on_client(client, objects, prefix, total, desc, optimize_graph=True):
    """Compute ``objects`` on ``client`` in one submission, counting chunk futures.

    The chunk keys are wanted alongside the results only until each finishes:
    its future is released at once, so the scheduler frees the chunk as soon as
    the tasks that consume it have run, as it would without the bar.

    Parameters
    ----------
    client : distributed.Client
        The active client.
    objects : tuple
        As for :func:`dask.compute`.
    prefix : str
        Start of the chunk tasks' key names.
    total : int or None
        Number of chunks (default: the chunk tasks in the graph).
    desc : str or None
        The bar's label.
    optimize_graph : bool
        As for :func:`dask.compute`.

    Returns
    -------
    tuple
        As :func:`dask.compute`.
    """
    from dask.base import unpack_collections
    from distributed import as_completed

    collections, repack = unpack_collections(*objects)
    if not collections:
        return objects
    graph, keys = _optimized_graph(collections, optimize_graph)
    chunk_keys = [key for key in graph if _is_chunk(key, prefix)]
    if total is None:
        total = len(chunk_keys)
    futures = client.get(graph, [*keys, *chunk_keys], sync=False)
    results, chunks = futures[: len(keys)], futures[len(keys) :]
    bar = _open_bar(total, desc)
    try:
        for future in as_completed(chunks):
            if future.status != "finished":
                break  # the results fail too; gather below raises the task's own error
            bar.update(1)
            future.release()
        values = client.gather(results)
        if bar.n < total:  # chunk tasks dask fused into their consumer (a lone pass-2 output)
            bar.update(total - bar.n)
    finally:
        bar.close()
        for future in (*chunks, *results):
            future.release()  # idempotent; after an error, frees chunks not yet counted
    return repack(values)
