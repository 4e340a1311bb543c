"""The ``streamproj`` command: parse, call the library, print. Exit 0 on success, 2 on bad input."""

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

from . import __version__, jobs, store
from .cluster import dask_cluster
from .config import load_config
from .errors import InputError, OutputExistsError, StreamprojError
from .solvers import validate_shrinkage
from .stats import parse_memory

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, as for every other user error (argparse would add the usage block).
        sys.stderr.write(f"streamproj: error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


def _shrinkage(text):
    try:
        return validate_shrinkage(text)
    except StreamprojError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _memory(text):
    try:
        return parse_memory(text, "--max-summary-memory")
    except StreamprojError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _memory_arg(p):
    p.add_argument("--max-summary-memory", type=_memory, default=None, metavar="SIZE",
                   help="refuse a summary (plus chunks in flight) larger than SIZE, e.g. 4GB "
                        "(default: half the machine's memory)")


def _common(p, compute=True):
    if compute:
        p.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on this dask.distributed scheduler (e.g. tcp://host:8786)")
        p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bars over chunks (default: on when stderr is a terminal)")


def _input_args(p):
    p.add_argument("--x", default="X", metavar="NAME", help="array of rows in INPUT (default: X)")
    p.add_argument("--y", default="y", metavar="NAME", help="array of labels in INPUT (default: y)")
    p.add_argument("--allow-missing-chunks", action="store_true",
                   help="read a missing chunk file of INPUT as the fill value instead of refusing")


def build_parser():
    parser = _Parser(
        prog="streamproj",
        description="Boundary-preserving projections of labelled Zarr data larger than memory.",
    )
    parser.add_argument("--version", action="version", version=f"streamproj {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("fit", help="summarise INPUT in one pass, solve, and save a model")
    p.add_argument("input", metavar="INPUT", help="Zarr group (path or URL) with X and y")
    p.add_argument("--model", required=True, metavar="MODEL", help="model directory to write")
    _input_args(p)
    p.add_argument("--n-components", type=int, default=2, metavar="D", help="projection axes (default 2)")
    p.add_argument("--shrinkage", type=_shrinkage, default=None, metavar="none|auto|oas|FLOAT",
                   help="within-class covariance shrinkage (default none)")
    p.add_argument("--center", choices=["mean", "hyperplane"], default="mean",
                   help="centring of the boundary-parallel PCA (default mean)")
    p.add_argument("--boundary", metavar="FILE",
                   help="JSON/NPZ with coef and intercept of a linear classifier to keep instead of LDA")
    p.add_argument("--keep-class-scatter", action="store_true",
                   help="keep per-class scatter matrices (needed for QDA)")
    p.add_argument("--overwrite", action="store_true", help="refit over an existing model")
    p.add_argument("--bfloat16", action="store_true",
                   help="X holds bfloat16 values stored as uint16 bit patterns")
    _memory_arg(p)
    _common(p)
    p.set_defaults(func=_fit)

    p = sub.add_parser("update", help="merge the rows of INPUT that MODEL has not seen")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("input", metavar="INPUT")
    _input_args(p)
    p.add_argument("--verify", action="store_true",
                   help="re-read rows merged before to check they are unchanged (slow)")
    _memory_arg(p)
    _common(p)
    p.set_defaults(func=_update)

    p = sub.add_parser("project", help="write the projected coordinates of INPUT to Zarr")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("input", metavar="INPUT")
    p.add_argument("--output", required=True, metavar="OUT", help="Zarr group to write")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    _input_args(p)
    _common(p)
    p.set_defaults(func=_project)

    p = sub.add_parser("run", help="run a job from a TOML config: fit or update, then project")
    p.add_argument("config", metavar="CONFIG.toml")
    _memory_arg(p)
    _common(p)
    p.set_defaults(func=_run)

    p = sub.add_parser("info", help="print a model's description as JSON")
    p.add_argument("model", metavar="MODEL")
    _common(p)  # accepted like everywhere, though info reads no rows
    p.set_defaults(func=_info)

    from .plot import add_plot_parser  # matplotlib is only imported when plotting

    add_plot_parser(sub, _common)
    from .demo import add_demo_parser

    add_demo_parser(sub, _common)
    return parser


def _fit(args):
    params = {"n_components": args.n_components, "shrinkage": args.shrinkage,
              "center": args.center, "boundary": args.boundary,
              "keep_class_scatter": args.keep_class_scatter, "bfloat16": args.bfloat16,
              "max_summary_memory": args.max_summary_memory}
    report = jobs.fit_model(args.input, args.model, args.x, args.y, params,
                            overwrite=args.overwrite, progress=args.progress,
                            allow_missing_chunks=args.allow_missing_chunks)
    counts = ", ".join(f"{c}: {n:,}" for c, n in zip(report["classes"], report["counts"], strict=True))
    print(f"fitted {report['model']} ({report['version']}) on {report['rows']:,} rows ({counts})")


def _describe_update(report):
    if report["status"] == "unchanged":
        return report["message"]
    parts = [f"updated {report['model']} ({report['version']}): +{report['rows_added']:,} rows, "
             f"{report['n_samples']:,} in all"]
    if report.get("new_classes"):
        parts.append(f"new classes: {', '.join(map(str, report['new_classes']))}")
    if "normal_angle_deg" in report:
        parts.append(f"boundary normal moved {report['normal_angle_deg']:.4g}°")
    if "boundary_angles_deg" in report:
        parts.append("boundary directions moved " + ", ".join(f"{a:.4g}°" for a in report["boundary_angles_deg"]))
    if "axes_angles_deg" in report:
        parts.append("axes principal angles " + ", ".join(f"{a:.4g}°" for a in report["axes_angles_deg"]))
    return "; ".join(parts)


def _update(args):
    print(_describe_update(jobs.update_model(args.model, args.input, args.x, args.y,
                                             progress=args.progress, verify=args.verify,
                                             allow_missing_chunks=args.allow_missing_chunks,
                                             max_summary_memory=args.max_summary_memory)))


def _project(args):
    report = jobs.project_model(args.model, args.input, args.output, args.x, args.y,
                                overwrite=args.overwrite, progress=args.progress,
                                allow_missing_chunks=args.allow_missing_chunks)
    print(f"wrote {report['output']}: coords ({report['rows']:,} x {report['n_components']}), "
          "decision, predicted")


def _run(args):
    config = load_config(args.config)
    if args.scheduler:
        from dataclasses import replace

        config = replace(config, dask=replace(config.dask, scheduler=args.scheduler, slurm=None))
    progress = args.progress
    if progress is None:  # neither --progress nor --no-progress: the config, else the terminal
        progress = config.run.progress if config.run.progress is not None else sys.stderr.isatty()
    for report in jobs.run_job(config, progress=progress, max_summary_memory=args.max_summary_memory):
        if report["status"] in ("updated", "unchanged"):
            print(_describe_update(report))
        elif report["status"] == "fitted":
            print(f"fitted {report['model']} ({report['version']}) on {report['rows']:,} rows")
        else:
            print(f"wrote {report['output']}: coords ({report['rows']:,} x {report['n_components']})")


def _info(args):
    print(json.dumps(jobs.model_info(args.model), indent=2))


# What an image file matplotlib writes starts with; plot replaces no other file.
_IMAGE_MAGIC = (b"\x89PNG", b"%PDF", b"<?xml", b"<svg", b"\xff\xd8\xff", b"%!PS", b"II*\x00", b"MM\x00*")


def _check_figure(args):
    """The figure path of ``plot``: local, outside OUT and the model, never clobbering a non-image."""
    figure = args.output
    if not store.is_local(figure):
        msg = (f"plot --output {figure}: figures are written to local files only; write it "
               "locally and upload it (streamproj.store.write_bytes does it in Python)")
        raise InputError(msg)
    store.check_disjoint(("projection", args.out), ("model", getattr(args, "model", None)),
                         ("figure", figure))
    path = Path(figure).expanduser()
    if path.is_dir():
        msg = f"plot --output {figure} is a folder; give a file name such as {path / 'plot.png'}"
        raise OutputExistsError(msg)
    if path.exists():
        with open(path, "rb") as f:
            head = f.read(8)
        if head and not head.startswith(_IMAGE_MAGIC):
            msg = (f"plot --output {figure} exists and is not an image; it was left untouched: "
                   "choose another file name")
            raise OutputExistsError(msg)
    with store.storage_errors(f"figure {figure}"):
        path.parent.mkdir(parents=True, exist_ok=True)  # as fit makes its model's folder


def _quiet_broken_pipe():
    """stdout's reader went away (``streamproj info | head``): say nothing more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _one_line(text):
    return " ".join(str(text).split())


def _show_warning(message, category, filename, lineno, file=None, line=None):
    sys.stderr.write(f"streamproj: warning: {_one_line(message)}\n")


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "progress", False) is None and args.command != "run":
        # Progress bars by default only where someone watches (run also consults its config).
        args.progress = sys.stderr.isatty()
    warnings.showwarning = _show_warning
    try:
        if args.command == "plot":
            _check_figure(args)
        # run takes its cluster from the config; info computes nothing
        scheduler = getattr(args, "scheduler", None) if args.command not in ("run", "info") else None
        with dask_cluster(scheduler):
            args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()
        return 0
    except StreamprojError as exc:
        sys.stderr.write(f"streamproj: error: {_one_line(exc)}\n")
        return 2
    except OSError as exc:  # the last resort: still one line, naming the file
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"streamproj: error: {_one_line(exc.strerror or exc)}{where}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("streamproj: interrupted\n")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
