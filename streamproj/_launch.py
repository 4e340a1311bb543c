"""The ``streamproj`` command's entry point: the command line, with Ctrl-C said in one line.

It imports nothing heavy itself (``import streamproj`` is light), so a Ctrl-C
while the command's own imports run (scikit-learn, dask, zarr: a second or two)
is exit 130 with one line, not a traceback; and once the command has finished
and said so, a Ctrl-C during the interpreter's shutdown cannot turn its success
into "interrupted".
"""

import signal
import sys
import threading

__all__ = ["main"]


def main() -> int:
    """Run :func:`streamproj.cli.main` on ``sys.argv``; returns the exit status."""
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
