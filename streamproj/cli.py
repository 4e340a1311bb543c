"""The ``streamproj`` command: parse, call the library, print. Exit 0 on success, 2 on bad input."""

import argparse
import json
import os
import re
import sys
import warnings

from . import demo, gpu, jobs, plot
from ._version import __version__
from .config import load_config, shrinkage_value
from .errors import InputError, InvalidParameterError, StreamprojError

__all__ = ["main"]


class _UsageError(Exception):
    """A command line argparse refused; :func:`main` reports it (exit 2)."""


class _Parser(argparse.ArgumentParser):
    _subcommands: dict = {}  # noqa: RUF012  (the top parser's, set by build_parser)

    def error(self, message):
        # One line, as for every other user error (argparse would add the usage block).
        msg = f"{message} (see '{self.prog} --help')"
        raise _UsageError(msg)


def _flag(parameter):
    """The flag that sets an estimator parameter: ``n_components`` is ``--n-components``."""
    return "--" + str(parameter).replace("_", "-")


def _common(p, compute=True, progress_default="on when stderr is a terminal"):
    if compute:
        p.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on this dask.distributed scheduler (e.g. tcp://host:8786)")
        p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help=f"progress bars over chunks (default: {progress_default})")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout (for schedulers) instead of text")


def _memory_arg(p):
    p.add_argument("--max-summary-memory", default=None, metavar="SIZE",
                   help="refuse a summary (plus chunks in flight) larger than SIZE, e.g. 4GB "
                        "(default: half the machine's memory)")


def _device_arg(p):
    p.add_argument("--device", choices=gpu.DEVICES, default="cpu",
                   help="where pass 1's products and the projection run: cpu (default), or cuda "
                        "for an NVIDIA GPU through CuPy")


def _input_args(p):
    p.add_argument("--x", default="X", metavar="NAME",
                   help="Zarr/HDF5 array of rows in INPUT (default: X); HDF5 also FILE.h5:/group/X")
    p.add_argument("--y", default="y", metavar="NAME", help="array of labels in INPUT (default: y)")
    p.add_argument("--features", metavar="A,B,C|PATTERN",
                   help="Parquet/CSV columns or xarray variables of the features (names or "
                        "patterns such as 'emb_*'; default: every column but the label)")
    p.add_argument("--label", metavar="COLUMN",
                   help="Parquet/CSV column or xarray variable of the labels (default: the --y name, "
                        "y; a model of tables reads later ones with the column it read before)")
    p.add_argument("--allow-missing-chunks", action="store_true",
                   help="read a missing chunk file of INPUT as the fill value instead of refusing")


def _window_args(p):
    p.add_argument("--keep-last", type=_positive_int, metavar="N",
                   help="sliding window: keep only the N newest sources (older ones are forgotten exactly)")
    p.add_argument("--max-age", metavar="AGE",
                   help="sliding window: forget sources first merged longer ago than AGE (e.g. 30d, 12h)")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"must be a whole number of at least 1; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _degrees(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        msg = f"must be a non-negative number of degrees; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


INPUTS_HELP = ("inputs: Zarr groups, Parquet files or folders, CSV, HDF5 (FILE.h5:/group/X), "
               "NetCDF; paths or URLs, globs allowed ('events/day-*.zarr'); read in the sorted "
               "order of their names, whatever order they are given in")


def build_parser():
    parser = _Parser(
        prog="streamproj",
        description="Boundary-preserving projections of labelled data larger than memory. "
                    "Exit status: 0 success, 2 bad input or usage (one line on stderr), "
                    "3 drift alert (run with alert_above_degrees), 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"streamproj {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser._subcommands = sub.choices  # filled in below: the commands, for error reports

    p = sub.add_parser("fit", help="summarise INPUT in one pass, solve, and save a model")
    p.add_argument("input", metavar="INPUT", nargs="+", help=INPUTS_HELP)
    p.add_argument("--model", required=True, metavar="MODEL", help="model directory to write")
    _input_args(p)
    p.add_argument("--n-components", type=int, default=2, metavar="D", help="projection axes (default 2)")
    p.add_argument("--shrinkage", type=shrinkage_value, default=None, metavar="none|auto|oas|FLOAT",
                   help="within-class covariance shrinkage (default none)")
    p.add_argument("--center", choices=["mean", "hyperplane"], default="mean",
                   help="centring of the boundary-parallel PCA (default mean)")
    p.add_argument("--boundary", metavar="FILE",
                   help="JSON/NPZ with coef and intercept of a linear classifier to keep instead of LDA")
    p.add_argument("--keep-class-scatter", action="store_true",
                   help="keep per-class scatter matrices (needed for QDA)")
    p.add_argument("--overwrite", action="store_true", help="refit over an existing model")
    _window_args(p)
    p.add_argument("--bfloat16", action="store_true",
                   help="X holds bfloat16 values stored as uint16 bit patterns")
    _memory_arg(p)
    _device_arg(p)
    _common(p)
    p.set_defaults(func=_fit)

    p = sub.add_parser("update", help="merge the rows of each INPUT that MODEL has not seen")
    p.add_argument("model", metavar="MODEL", help="model directory (or URL) to update")
    p.add_argument("input", metavar="INPUT", nargs="+", help=INPUTS_HELP)
    _input_args(p)
    p.add_argument("--verify", action="store_true",
                   help="re-read rows merged before to check they are unchanged (slow)")
    _window_args(p)
    _memory_arg(p)
    _device_arg(p)
    _common(p)
    p.set_defaults(func=_update)

    p = sub.add_parser("project", help="write the projected coordinates of INPUT to Zarr")
    p.add_argument("model", metavar="MODEL", help="model directory (or URL) to project with")
    p.add_argument("input", metavar="INPUT", nargs="+", help=INPUTS_HELP)
    p.add_argument("--output", required=True, metavar="OUT", help="Zarr group to write")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    how.add_argument("--append", action="store_true",
                     help="add only rows OUT does not hold yet, in OUT's own frame")
    p.add_argument("--reproject-above", type=_degrees, metavar="DEG",
                   help="with --append: rewrite OUT in the model's frame when the model moved "
                        "more than DEG degrees from OUT's frame")
    p.add_argument("--decision", action=argparse.BooleanOptionalAction, default=None,
                   help="write the decision values (default: when there are at most 16 classes)")
    _input_args(p)
    _device_arg(p)
    _common(p)
    p.set_defaults(func=_project)

    p = sub.add_parser("forget", help="remove the rows of SOURCE from MODEL exactly")
    p.add_argument("model", metavar="MODEL", help="model directory (or URL) to remove them from")
    p.add_argument("source", metavar="SOURCE", nargs="+",
                   help="a source as given to update (globs match the model's ledger)")
    _common(p, compute=False)
    p.set_defaults(func=_forget)

    p = sub.add_parser("merge", help="merge models fitted elsewhere into MODEL exactly")
    p.add_argument("model", metavar="MODEL", help="model directory (or URL) to merge into")
    p.add_argument("others", metavar="OTHER_MODEL", nargs="+",
                   help="models of the same features, fitted on other sources (left as they are)")
    _common(p, compute=False)
    p.set_defaults(func=_merge)

    p = sub.add_parser("relocate", help="tell MODEL (and OUT) that its sources under OLD moved to NEW")
    p.add_argument("model", metavar="MODEL", help="model directory (or URL) whose sources moved")
    p.add_argument("old", metavar="OLD", help="where the sources were: a folder or URL prefix "
                                              "(whole folder names match)")
    p.add_argument("new", metavar="NEW", help="where they are now; each must hold the rows "
                                              "the ledger records")
    p.add_argument("--output", action="append", default=[], metavar="OUT",
                   help="relocate this output's ledger too, in the same command (repeatable)")
    p.add_argument("--verify", action="store_true",
                   help="re-read every row range MODEL merged at its new place (slow)")
    p.add_argument("--allow-missing-chunks", action="store_true",
                   help="read a missing chunk file at the new place as the fill value")
    _common(p, compute=False)
    p.set_defaults(func=_relocate)

    p = sub.add_parser("run", help="run a job from a TOML config: fit or update, then project")
    p.add_argument("config", metavar="CONFIG.toml",
                   help="the job (TOML); its relative paths are relative to this file")
    p.add_argument("--alert-above", type=_degrees, metavar="DEG",
                   help="exit with status 3 when the boundary moved more than DEG degrees "
                        "(overrides [run] alert_above_degrees)")
    _memory_arg(p)
    _device_arg(p)
    _common(p, progress_default="the config's [run] progress, else on when stderr is a terminal")
    p.set_defaults(func=_run)

    p = sub.add_parser("info", help="describe a model, or an output and its drift, as JSON")
    p.add_argument("model", metavar="MODEL|OUT", help="a model directory, or an output OUT")
    p.add_argument("--model", dest="against", metavar="MODEL",
                   help="for an output: the model to measure drift against (default: the one it records)")
    _common(p)  # accepted like everywhere, though info reads no rows
    p.set_defaults(func=_info)

    p = sub.add_parser("plot", help="draw a projection (OUT) to a PNG, or an interactive HTML view")
    p.add_argument("out", metavar="OUT", help="Zarr group written by 'streamproj project'")
    p.add_argument("--output", required=True, metavar="FIG.png|VIEW.html",
                   help="the file to write; its name chooses the type: .png, .svg, .pdf, .jpg, "
                        ".webp, .tif, .eps, or .html for the interactive view")
    p.add_argument("--model", metavar="MODEL", help="model directory (for --compare-pca and --qda)")
    p.add_argument("--compare-pca", nargs="?", const="raw", choices=["raw", "standardized", "both"],
                   help="add ordinary PCA of the input rows: features as given (raw, the default), "
                        "standardized, or both")
    p.add_argument("--qda", action="store_true", help="draw where the QDA boundary crosses the plane")
    p.add_argument("--input", metavar="INPUT", help="input rows for --compare-pca (default: OUT's source)")
    p.add_argument("--axes", metavar="I,J", help="draw axes I and J (default 0,1; a grid when d >= 3)")
    p.add_argument("--stretch", action="store_true",
                   help="draw the panels square instead of at equal aspect (the figure says how "
                        "much x is magnified against y)")
    p.add_argument("--top", type=int, default=8, metavar="N",
                   help="colour the N largest classes, the rest grey as 'other' (default 8)")
    p.add_argument("--size", metavar="WxH", help="PNG size in pixels (default: fitted to the data)")
    _common(p)
    p.set_defaults(func=_plot)

    p = sub.add_parser("demo", help="make the seed's 'coin' data in DIR and run everything on it")
    p.add_argument("dir", metavar="DIR", help="folder for data.zarr, model, projection.zarr, demo.png, view.html")
    p.add_argument("--rows", type=int, default=200_000, help="rows to generate (default 200,000)")
    p.add_argument("--features", type=int, default=10, help="features (default 10)")
    p.add_argument("--chunk-rows", type=int, default=50_000, help="rows per Zarr chunk (default 50,000)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the data (default 0)")
    _common(p)
    p.set_defaults(func=_demo)
    return parser


def _emit(args, report, text):
    """Print the report: one JSON object with --json, else the text lines."""
    if getattr(args, "json", False):
        print(json.dumps(report, default=str))
    else:
        print(text)


def _inputs(args):
    return {"x": args.x, "y": args.y, "features": args.features, "label": args.label,
            "allow_missing_chunks": args.allow_missing_chunks}


def _fit(args):
    params = {"n_components": args.n_components, "shrinkage": args.shrinkage,
              "center": args.center, "boundary": args.boundary,
              "keep_class_scatter": args.keep_class_scatter, "bfloat16": args.bfloat16,
              "max_summary_memory": args.max_summary_memory}
    report = jobs.fit_model(args.input, args.model, params=params, overwrite=args.overwrite,
                            progress=args.progress, keep_last=args.keep_last,
                            max_age=args.max_age, **_inputs(args))
    _emit(args, report, _describe_fit(report))


def _describe_fit(report):
    counts = ", ".join(f"{c}: {n:,}" for c, n in zip(report["classes"], report["counts"], strict=True))
    held = [s for s in report["sources"] if s["status"] != "evicted"]
    text = (f"fitted {report['model']} ({report['version']}) on {report['rows']:,} rows "
            f"of {len(held)} source{'s' if len(held) != 1 else ''} ({counts})")
    if report.get("evicted"):
        text += f"; forgot {len(report['evicted'])} source(s) outside the window"
    return text


def _describe_update(report):
    if report["status"] == "unchanged":
        return report["message"]
    parts = [f"updated {report['model']} ({report['version']}): +{report['rows_added']:,} rows, "
             f"{report['n_samples']:,} in all"]
    skipped = [s for s in report.get("sources", []) if s["status"] == "skipped"]
    if skipped:
        parts.append(f"{len(skipped)} source{'s' if len(skipped) != 1 else ''} merged before, skipped")
    if report.get("evicted"):
        parts.append(f"forgot {len(report['evicted'])} source(s) outside the window")
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
    report = jobs.update_model(args.model, args.input, progress=args.progress, verify=args.verify,
                               keep_last=args.keep_last, max_age=args.max_age,
                               max_summary_memory=args.max_summary_memory, **_inputs(args))
    _emit(args, report, _describe_update(report))


def _describe_project(report):
    action = report.get("output_action", "written")
    if action == "unchanged":
        return f"{report['output']} unchanged: it holds all {report['rows']:,} rows already"
    if action == "appended":
        text = (f"appended {report['rows_written']:,} rows to {report['output']} in its frame "
                f"(drift {report['drift_deg']:.4g}°); {report['rows']:,} rows in all")
        if report.get("labels_not_stored"):
            text += ("; their labels are not stored, as OUT has no y (rewrite it with --overwrite "
                     "to keep labels)")
        return text
    others = [n for n in report.get("arrays", ["projection", "predicted"]) if n != "projection"]
    text = (f"wrote {report['output']}: projection ({report['rows']:,} x {report['n_components']}), "
            + ", ".join(others))
    if action == "rewritten":
        text = f"rewrote {report['output']} in the model's frame ({report['reason']}): " + text.split(": ", 1)[1]
    return text


def _project(args):
    if args.reproject_above is not None and not args.append:
        msg = "--reproject-above applies to --append only"
        raise InputError(msg)
    # labels named on the command line are read, or refused where missing: a mistyped
    # --y wrote OUT without y, exit 0 (unnamed, "y" is read where there is one)
    report = jobs.project_model(args.model, args.input, args.output, overwrite=args.overwrite,
                                progress=args.progress, mode="append" if args.append else "rewrite",
                                reproject_above=args.reproject_above, decision=args.decision,
                                require_y=args.y != "y", **_inputs(args))
    _emit(args, report, _describe_project(report))


def _forget(args):
    report = jobs.forget_sources(args.model, args.source)
    text = (f"forgot {len(report['sources'])} source(s) ({report['rows_removed']:,} rows) from "
            f"{report['model']} ({report['version']}); {report['n_samples']:,} rows remain")
    _emit(args, report, text)


def _merge(args):
    report = jobs.merge_models(args.model, args.others)
    text = (f"merged {len(report['models'])} model(s) into {report['model']} ({report['version']}): "
            f"+{report['rows_added']:,} rows, {report['n_samples']:,} in all")
    _emit(args, report, text)


def _describe_relocate(report):
    def counted(moves):
        grown = sum(1 for m in moves if m["rows_new"])
        text = f"{len(moves)} source{'s' if len(moves) != 1 else ''}"
        return text + (f" ({grown} with new rows, for the next update)" if grown else "")

    model = (f"{report['model']} ({report['version']}): {counted(report['sources'])}"
             if report["model_status"] == "relocated" else f"{report['model']}: unchanged")
    if report["evicted"]:
        model += f", {len(report['evicted'])} dropped before"
    parts = [f"relocated {report['from']} to {report['to']} in {model}"]
    parts += [f"{o['output']}: {counted(o['sources']) if o['sources'] else 'unchanged'}"
              for o in report["outputs"]]
    return "; ".join(parts)


def _relocate(args):
    report = jobs.relocate_sources(args.model, args.old, args.new, args.output, verify=args.verify,
                                   allow_missing_chunks=args.allow_missing_chunks)
    _emit(args, report, _describe_relocate(report))


# Exit status of a job whose boundary moved more than its alert threshold.
EXIT_ALERT = 3


def _run(args):
    config = load_config(args.config)
    from dataclasses import replace

    if args.scheduler:
        config = replace(config, dask=replace(config.dask, scheduler=args.scheduler, slurm=None))
    if args.alert_above is not None:
        config = replace(config, run=replace(config.run, alert_above_degrees=args.alert_above))
    progress = args.progress
    if progress is None:  # neither --progress nor --no-progress: the config, else the terminal
        progress = config.run.progress if config.run.progress is not None else sys.stderr.isatty()
    report = jobs.run_job(config, progress=progress, max_summary_memory=args.max_summary_memory)
    lines = []
    for step in report["steps"]:
        if step["command"] == "update":
            lines.append(_describe_update(step))
        elif step["command"] == "fit":
            lines.append(_describe_fit(step))
        else:
            lines.append(_describe_project(step))
    _emit(args, report, "\n".join(lines))
    if report["alert"]:
        sys.stdout.flush()
        sys.stderr.write(f"streamproj: alert: {_one_line(report['alert'])}\n")
        return EXIT_ALERT
    return 0


def _info(args):
    if jobs.is_output(args.model):
        info = jobs.output_info(args.model, args.against)
    elif args.against is not None:  # not silently ignored: it reads like a comparison of two models
        msg = (f"--model {args.against}: info compares an output (OUT) with a model; "
               f"{args.model} is not an output (info MODEL describes one model)")
        raise InputError(msg)
    else:
        jobs.refuse_nothing_to_describe(args.model)
        info = jobs.model_info(args.model)
    print(json.dumps(info) if args.json else json.dumps(info, indent=2))


def _pair(text, flag):
    """``"0,2"`` or ``"1400x650"`` as two whole numbers."""
    try:
        pair = tuple(int(v) for v in text.replace("x", ",").split(","))
        if len(pair) != 2:
            raise ValueError
    except ValueError:
        msg = f"{flag} must be two numbers, e.g. {'0,2' if flag == '--axes' else '1400x650'}; got {text!r}"
        raise InputError(msg) from None
    return pair


def _plot(args):
    size = _pair(args.size, "--size") if args.size else None
    axes = _pair(args.axes, "--axes") if args.axes else None
    if args.top < 1:
        msg = f"--top must be at least 1; got {args.top}"
        raise InputError(msg)
    plot.plot_stored(args.out, args.output, args.model, axes=axes, stretch=args.stretch,
                     top=args.top, compare_pca=args.compare_pca, qda=args.qda,
                     input_url=args.input, size=size)
    print(f"wrote {args.output}")


def _demo(args):
    if args.rows < 20 or args.features < 3 or args.chunk_rows < 1:
        msg = "--rows must be at least 20, --features at least 3, --chunk-rows at least 1"
        raise InputError(msg)
    if args.seed < 0:  # (numpy's seeds are not negative: its traceback came after DIR's data went)
        msg = f"--seed must be 0 or more; got {args.seed}"
        raise InputError(msg)
    print(demo.describe(demo.run_demo(args.dir, args.rows, args.features, args.chunk_rows,
                                      args.seed, args.progress)))


def _quiet_broken_pipe():
    """The reader of stdout went away (``streamproj info | head``): say nothing more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _one_line(text):
    return " ".join(str(text).split())


def _show_warning(message, category, filename, lineno, file=None, line=None):
    sys.stderr.write(f"streamproj: warning: {_one_line(message)}\n")


def _as_json(args):
    """Commands that print text of their own: their lines become the ``message`` of one JSON object."""
    import contextlib
    import io
    import time

    buf, start = io.StringIO(), time.perf_counter()
    with contextlib.redirect_stdout(buf):
        code = args.func(args)
    print(json.dumps({"command": args.command, "status": "ok",
                      "message": buf.getvalue().strip(),
                      "timings": {"total": round(time.perf_counter() - start, 4)},
                      "versions": {"streamproj": __version__}}))
    return code


def _error(args, message, kind):
    """The one error line on stderr (and with --json, one JSON object on stdout); exit 2."""
    sys.stderr.write(f"streamproj: error: {message}\n")
    if getattr(args, "json", False):
        # a scheduler logging stdout gets a record of the failure too
        print(json.dumps({"command": args.command, "status": "error", "error": message,
                          "error_type": kind, "exit_code": 2}))
        sys.stdout.flush()
    return 2


def _negative_pairs(argv):
    """``argv`` with ``--axes -1,0`` written ``--axes=-1,0`` (and ``--size -5x100``).

    argparse takes a value that starts with '-' and is not one number for an
    option, and says only "expected one argument".
    """
    out, at = [], 0
    while at < len(argv):
        if argv[at] in ("--axes", "--size") and at + 1 < len(argv) and re.fullmatch(
                r"-[\d.,x\s-]+", argv[at + 1]):
            out.append(f"{argv[at]}={argv[at + 1]}")
            at += 2
        else:
            out.append(argv[at])
            at += 1
    return out


# What each argument that names a place is called when it is empty (by argparse ``dest``).
_PLACES = {"input": "input", "model": "model", "output": "output", "source": "source",
           "others": "model to merge", "old": "OLD", "new": "NEW", "config": "config",
           "out": "projection", "boundary": "boundary", "against": "model", "dir": "demo folder"}
_NAMES = ("x", "y", "features", "label")


def _refuse_empty(args):
    """Refuse an empty path or name: to the OS '' is the current folder.

    ``fit "$DATA"`` with DATA unset read the current folder as the input; ``--x ''``
    was "d.zarr/ is a group, not an array".
    """
    def empty(value):
        values = value if isinstance(value, list) else [value]
        return any(isinstance(v, str) and not v.strip() for v in values)

    for dest, role in _PLACES.items():
        if empty(getattr(args, dest, None)):
            if args.command == "info" and dest == "model":
                role = "model or output"
            msg = f"the {role} path is empty; give a folder, file or URL (an unset shell variable?)"
            raise InputError(msg)
    for dest in _NAMES:
        if empty(getattr(args, dest, None)):
            msg = f"--{dest} is empty; name it, or leave the option out"
            raise InputError(msg)


def main(argv=None):
    """Run ``streamproj`` with ``argv`` (default: the command line); returns the exit status."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        args = parser.parse_args(_negative_pairs(argv))
    except _UsageError as exc:
        # (with --json among the arguments, a scheduler logging stdout gets its record too)
        command = next((a for a in argv if a in parser._subcommands), None)
        wants_json = any(len(a) > 3 and "--json".startswith(a) for a in argv)  # or --js, --jso
        _error(argparse.Namespace(json=wants_json, command=command), str(exc), "UsageError")
        raise SystemExit(2) from None
    if getattr(args, "progress", False) is None and args.command != "run":
        # Progress bars by default only where someone watches (run also consults its config).
        args.progress = sys.stderr.isatty()
    warnings.showwarning = _show_warning
    try:
        _refuse_empty(args)
        if args.command == "plot":
            plot.check_plot_options(
                args.output, _pair(args.size, "--size") if args.size else None,
                model=args.model, compare_pca=args.compare_pca, qda=args.qda,
                stretch=args.stretch, input=args.input)
            plot.check_figure(args.output, args.out, args.model)
        # run takes its cluster from the config; info computes nothing
        scheduler = getattr(args, "scheduler", None) if args.command not in ("run", "info") else None
        # the device first: a missing GPU is refused before a cluster is reached
        with gpu.using(getattr(args, "device", "cpu")), jobs.dask_cluster(scheduler):
            if args.json and args.command in ("plot", "demo"):
                code = _as_json(args)
            else:
                code = args.func(args)
        sys.stdout.flush()
        if code:
            return code
    except BrokenPipeError:
        _quiet_broken_pipe()
        return 0
    except StreamprojError as exc:
        if isinstance(exc, InvalidParameterError) and exc.parameter:
            exc = exc.relabel(_flag(exc.parameter))  # the estimator's check, said of the flag
        return _error(args, _one_line(exc), type(exc).__name__)
    except OSError as exc:  # the last resort: still one line, naming the file
        where = f": {exc.filename}" if exc.filename else ""
        return _error(args, f"{_one_line(exc.strerror or exc)}{where}", type(exc).__name__)
    except KeyboardInterrupt:
        sys.stderr.write("streamproj: interrupted\n")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
