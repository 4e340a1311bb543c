"""dask.distributed and dask-jobqueue: start-up, a watchdog over the workers, shutdown.

Every wait has a limit. Connecting to a scheduler gives up after
``CONNECT_TIMEOUT``; SLURM clusters are refused at once where ``sbatch`` is
missing; and while a job computes, a watchdog thread ends it with one line if
the cluster has had no worker (or the scheduler could not be reached) for
``timeout`` seconds — instead of waiting forever for workers that will not come.
"""

import contextlib
import shutil
import threading
import time
from collections.abc import Iterator
from typing import Any

from .errors import ClusterError

__all__ = ["CONNECT_TIMEOUT", "DEFAULT_TIMEOUT", "dask_cluster", "require_sbatch", "slurm_cluster"]

# How long to keep trying to reach a dask scheduler (it may still be starting).
CONNECT_TIMEOUT = "20s"
# Seconds a job waits while the cluster has no worker, before it gives up.
DEFAULT_TIMEOUT = 300.0
_POLL = 0.5


class _Watchdog:
    """Cancels the client's work once the cluster has been without workers for ``timeout`` s."""

    def __init__(self, client, timeout):
        self.client, self.timeout = client, float(timeout)
        self.fired = None  # the reason, once it fired
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamproj-watchdog", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _workers(self):
        try:
            return len(self.client.nthreads(callback_timeout=max(1.0, min(5.0, self.timeout))))
        except Exception:  # unreachable scheduler: counted like no worker
            return None

    def _run(self):
        since = None
        while not self._stop.wait(_POLL):
            n = self._workers()
            if n:
                since = None
                continue
            since = since or time.monotonic()
            if time.monotonic() - since >= self.timeout:
                self.fired = ("no worker" if n == 0 else "the scheduler did not answer")
                self._cancel()
                return

    def _cancel(self):
        with contextlib.suppress(Exception):
            futures = list(self.client.futures)
            self.client.cancel(futures, force=True, reason="streamproj: no workers")
        with contextlib.suppress(Exception):
            self.client.close(timeout=2)


@contextlib.contextmanager
def dask_cluster(scheduler: str | None = None, slurm: Any = None,
                 timeout: float | None = None) -> Iterator[Any]:
    """Run the passes on a dask.distributed cluster for the duration of the block.

    ``scheduler``: the address of a running scheduler. ``slurm``: a
    :class:`~streamproj.config.SlurmConfig`; workers are started as SLURM jobs
    with dask-jobqueue. Neither: Dask's local threaded scheduler. ``timeout``:
    seconds without any worker before the job ends with :class:`ClusterError`
    (default :data:`DEFAULT_TIMEOUT`).
    """
    if scheduler is None and slurm is None:
        yield None
        return
    if scheduler is not None and not str(scheduler).strip():
        msg = ("the dask scheduler's address is empty (--scheduler, or [dask] scheduler); give "
               "one such as tcp://host:8786, or leave it out to run here")
        raise ClusterError(msg)
    try:
        from distributed import Client
    except ImportError:
        msg = "running on a cluster needs dask.distributed: pip install 'streamproj[distributed]'"
        raise ClusterError(msg) from None
    timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
    cluster = None
    with contextlib.ExitStack() as stack:
        if slurm is not None:
            require_sbatch("this job")
            cluster = slurm_cluster(slurm)
            stack.callback(_quietly, cluster.close)
            cluster.scale(jobs=slurm.jobs)
            target, where = cluster, f"the SLURM cluster's scheduler {cluster.scheduler_address}"
        else:
            target, where = scheduler, f"the dask scheduler at {scheduler}"
        try:
            client = Client(target, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            msg = f"cannot reach {where}: {exc}"
            raise ClusterError(msg) from None
        except (ValueError, TypeError) as exc:  # ("missing port number in address 'notaurl'")
            hint = " (an address looks like tcp://host:8786)" if slurm is None else ""
            msg = f"cannot reach {where}: {exc}{hint}"
            raise ClusterError(msg) from None
        stack.callback(_quietly, client.close)
        watchdog = stack.enter_context(_Watchdog(client, timeout))
        try:
            yield client
        except BaseException as exc:
            if watchdog.fired is not None:
                msg = (f"{where} had {watchdog.fired} for {timeout:g} s, so the job stopped "
                       f"(set [dask] timeout to wait longer); nothing was written "
                       f"({type(exc).__name__})")
                raise ClusterError(msg) from None
            if _killed(exc):
                msg = (f"a task of the job killed the workers of {where} again and again "
                       f"({_first_line(exc)}): out of memory? (smaller chunks, or more memory "
                       "per worker); what it was writing was not committed")
                raise ClusterError(msg) from None
            if _lost(exc):  # the scheduler went away
                msg = (f"the job lost {where} ({type(exc).__name__}: {_first_line(exc)}), so it "
                       "stopped; what it was writing was not committed")
                raise ClusterError(msg) from None
            raise


def _lost(exc):
    """Whether ``exc`` is the connection to the scheduler lost under a job."""
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    return isinstance(exc, FutureCancelledError | CommClosedError)


def _killed(exc):
    """Whether ``exc`` is a task that killed every worker it ran on (distributed gave up on it)."""
    from distributed.scheduler import KilledWorker

    return isinstance(exc, KilledWorker)


def _first_line(exc):
    return (str(exc).strip().splitlines() or [""])[0][:200]


def _quietly(close):
    with contextlib.suppress(Exception):
        close()


def slurm_cluster(slurm: Any) -> Any:
    """A dask-jobqueue ``SLURMCluster`` from a config section (no jobs submitted yet).

    Refused at once where SLURM is not installed (no ``sbatch`` on PATH):
    dask-jobqueue would otherwise retry submitting for many minutes.
    """
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        msg = "SLURM jobs need dask-jobqueue: pip install 'streamproj[slurm]'"
        raise ClusterError(msg) from None
    kwargs = {k: v for k, v in vars(slurm).items() if k != "jobs" and v is not None}
    return SLURMCluster(**kwargs)


def require_sbatch(where: str) -> None:
    """Refuse a SLURM job on a machine without SLURM, naming the config."""
    if shutil.which("sbatch") is None:
        msg = (f"{where} asks for SLURM workers ([dask.slurm]) but SLURM is not installed here "
               "(no 'sbatch' on PATH); run it on a SLURM login node, or remove [dask.slurm]")
        raise ClusterError(msg)
