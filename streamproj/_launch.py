"""The ``streamproj`` command's entry point: the command line, with Ctrl-C said in one line.

It imports nothing heavy itself (``import streamproj`` is light), so a Ctrl-C
while the command's own imports run (scikit-learn, dask, zarr: a second or two)
is exit 130 with one line, not a traceback; and once the command has finished
and said so, a Ctrl-C during the interpreter's shutdown cannot turn its success
into "interrupted".
"""

import ctypes
import os
import signal
import sys
import threading

__all__ = ["allocator_environ", "main", "tune_allocator"]

# glibc's malloc gives a freed block above its mmap threshold (32 MiB at most, by default)
# back to the system at once, so a process reading Zarr chunks faults in every page of two
# fresh buffers per chunk (the compressed bytes and the decoded ones). On the test machine
# that was most of a read: 300,000 x 1,000 float32 rows in 10,000-row (40 MB) zstd chunks
# took 1.7-2.9 s to read, as much CPU in the kernel. Kept for the next chunk (blocks up
# to 64 MiB from the heap; 128 MiB of free heap kept, twice the threshold as glibc keeps
# them when it moves them itself; one arena, so any thread reuses what another freed):
# read 1.4 s, the fit 5.9-6.4 s against 6.4-6.8 s, its peak RSS 539-543 MB against 570 MB
# (one process each, a noisy machine). Chunks over 64 MiB stay with mmap; at 100k x 4,096
# float16 (82 MB chunks) the fit took as long (28 s) and peaked at 836 MB against 684-724
# MB with glibc's defaults, within the 781-990 MB five bench rounds spread over.
# (glibc's environment variable, mallopt's parameter from malloc.h, the value)
_MALLOC_SETTINGS = (("MALLOC_MMAP_THRESHOLD_", -3, 64 * 2**20),
                    ("MALLOC_TRIM_THRESHOLD_", -1, 128 * 2**20),
                    ("MALLOC_ARENA_MAX", -8, 1))


def _wanted():
    if os.environ.get("STREAMPROJ_MALLOC", "").strip().lower() == "system":
        return False
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):  # the user's own malloc settings
        return False
    return not any(name in os.environ for name, _, _ in _MALLOC_SETTINGS)


def allocator_environ() -> dict[str, str]:
    """:func:`tune_allocator`'s settings as glibc's environment variables, for a child process."""
    return {name: str(value) for name, _, value in _MALLOC_SETTINGS} if _wanted() else {}


def tune_allocator() -> bool:
    """Keep freed memory in this process for the next chunk (glibc's malloc); True if set.

    The ``streamproj`` command calls it first thing, for its own process. It
    changes malloc for the whole process: blocks up to 64 MiB come from the
    heap, up to 128 MiB of freed heap is kept for reuse rather than returned
    to the system, and threads share one arena (so one thread reuses what
    another freed; malloc calls then take turns, which costs nothing that
    measured for pass 1's few large buffers). Arenas made before the call
    stay. Left alone on other C libraries, where ``STREAMPROJ_MALLOC=system``,
    and where the user set malloc themselves: glibc's ``MALLOC_MMAP_THRESHOLD_``,
    ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_ARENA_MAX`` or a ``glibc.malloc``
    tunable in ``GLIBC_TUNABLES``.
    """
    if not _wanted():
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        mallopt = ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    (_, mmap_param, mmap_value), *rest = _MALLOC_SETTINGS
    # The threshold first, and nothing else where it is refused (mallopt(3) documents a cap
    # of 32 MiB, which some glibc releases keep): a trim threshold set alone stops glibc
    # from raising the mmap threshold as it goes, leaving every block over 128 KiB to mmap.
    if mallopt(mmap_param, mmap_value) != 1 and mallopt(mmap_param, 32 * 2**20) != 1:
        return False
    done = [mallopt(param, value) for _, param, value in rest]  # each, whatever the others
    return all(ok == 1 for ok in done)


def main() -> int:
    """Run :func:`streamproj.cli.main` on ``sys.argv``; returns the exit status."""
    tune_allocator()
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("streamproj: interrupted\n")
        return 130
    try:
        status = run()
    except KeyboardInterrupt:
        # a second Ctrl-C as the command returned from saying the first (``timeout -s INT``
        # signals the process and then its group): said already, so no traceback after it
        status = 130
    if threading.current_thread() is threading.main_thread():
        # the work is done and reported: shutdown (threads joined, files closed) runs to the
        # end (the process exits next: the console script and ``python -m`` return this)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return status
