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
# took 2.4-2.6 s to read, 2.3-2.7 s of CPU in the kernel. Kept for the next chunk (blocks
# up to 64 MiB from the heap, 256 MiB of free heap kept, one arena for all threads so any
# thread reuses what another freed): read 1.05-1.34 s, the fit 5.84 s instead of 6.65 s,
# its peak RSS 530 MB instead of 572 MB. Larger chunks (100k x 4,096 float16: 82 MB)
# are left to mmap: kept, they raised the fit's peak by 173 MB and saved no time there.
# (glibc's environment variable, mallopt's parameter from malloc.h, the value)
_MALLOC_SETTINGS = (("MALLOC_MMAP_THRESHOLD_", -3, 64 * 2**20),
                    ("MALLOC_TRIM_THRESHOLD_", -1, 256 * 2**20),
                    ("MALLOC_ARENA_MAX", -8, 1))


def _wanted():
    if os.environ.get("STREAMPROJ_MALLOC", "").strip().lower() == "system":
        return False
    return not any(name in os.environ for name, _, _ in _MALLOC_SETTINGS)


def allocator_environ() -> dict[str, str]:
    """:func:`tune_allocator`'s settings as glibc's environment variables, for a child process."""
    return {name: str(value) for name, _, value in _MALLOC_SETTINGS} if _wanted() else {}


def tune_allocator() -> bool:
    """Keep freed memory in this process for the next chunk (glibc's malloc); True if set.

    The ``streamproj`` command calls it for its own process; a program using
    the library may call it too (it changes malloc for the whole process:
    blocks up to 64 MiB come from the heap, up to 256 MiB of freed heap is
    kept for reuse rather than returned to the system, and all threads share
    one arena). Left alone on other C libraries, where
    ``STREAMPROJ_MALLOC=system``, and where the user set any of glibc's
    ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or ``MALLOC_ARENA_MAX``.
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
    done = [mallopt(param, value) for _, param, value in _MALLOC_SETTINGS]  # each, whatever the others
    return all(ok == 1 for ok in done)


def main() -> int:
    """Run :func:`streamproj.cli.main` on ``sys.argv``; returns the exit status."""
    tune_allocator()
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("streamproj: interrupted\n")
        return 130
    status = run()
    if threading.current_thread() is threading.main_thread():
        # the work is done and reported: shutdown (threads joined, files closed) runs to the
        # end (the process exits next: the console script and ``python -m`` return this)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return status
