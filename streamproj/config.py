"""TOML job configs → frozen dataclasses, validated with errors that name the key and file.

The config checks the form of each key (its type, the job's own options); the
estimator's parameters (``[model]`` n_components, shrinkage, center …) are
passed as given and checked by the estimator when the job starts, which names
the file and key (:func:`streamproj.jobs.check_config`).

A job is: fit (or update) a model from an input, then project an input to an
output. Example::

    [input]
    path = "data.zarr"          # local path or any fsspec URL
    # paths = ["events/day-*.zarr", "extra.parquet"]   # or several inputs, globs allowed
    x = "X"                     # Zarr/HDF5 array of rows (HDF5 also "file.h5:/group/X")
    y = "y"
    features = "emb_*"          # Parquet/CSV columns or xarray variables (names, patterns)
    label = "label"             # their label column
    allow_missing_chunks = false  # true: read a missing chunk file as the fill value

    [model]
    path = "model"
    mode = "auto"               # "fit", "update", or "auto" (update if the model exists)
    n_components = 2
    shrinkage = "none"          # "none", "auto", "oas" or a number in [0, 1]
    center = "mean"             # or "hyperplane"
    boundary = "coef.json"      # optional: JSON/NPZ with coef and intercept
    keep_last = 30              # optional sliding window: the newest 30 sources …
    max_age = "30d"             # … and/or sources first merged less than 30 days ago

    [output]
    path = "projection.zarr"    # optional: no projection when absent
    mode = "auto"               # "rewrite" (default), "append" or "auto"
    reproject_above_degrees = 1.0  # append/auto: rewrite when the model moved more
    decision = true             # optional: write decision (default: when K <= 16)
    overwrite = true            # rewrite mode: replace an existing output (append and
                                # auto replace it by themselves when they rewrite it, and
                                # start it in an empty folder by themselves too)

    [dask]
    scheduler = "tcp://10.0.0.5:8786"   # optional: a dask.distributed scheduler
    timeout = 300               # seconds without any worker before the job gives up

    [dask.slurm]                # optional: start workers with dask-jobqueue
    jobs = 4
    cores = 8
    memory = "32GB"
    walltime = "01:00:00"

    [run]
    progress = true
    alert_above_degrees = 2.0   # exit status 3 when the boundary moved more
"""

import glob
import os
import re
import tomllib
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path

from . import sources, store
from .errors import InputError

__all__ = ["DaskConfig", "InputConfig", "JobConfig", "ModelConfig", "OutputConfig", "RunConfig",
           "SlurmConfig", "load_config", "shrinkage_value"]


@dataclass(frozen=True)
class InputConfig:
    """``[input]``: where the rows are and which arrays or columns hold them."""

    path: str | None = None
    paths: list = field(default_factory=list)  # path, or several paths and globs (resolved)
    x: str = "X"
    y: str = "y"
    features: str | list | None = None
    label: str | None = None
    allow_missing_chunks: bool = False


@dataclass(frozen=True)
class ModelConfig:
    """``[model]``: the model directory, the job's mode, the estimator's parameters (as given), the window."""

    path: str
    mode: str = "auto"
    n_components: int = 2
    shrinkage: str | float | None = None
    center: str = "mean"
    boundary: str | None = None
    keep_class_scatter: bool = False
    keep_last: int | None = None
    max_age: str | None = None


@dataclass(frozen=True)
class OutputConfig:
    """``[output]``: where and how the projection is written."""

    path: str | None = None
    overwrite: bool = False
    input: str | list | None = None  # project other inputs than those fitted (default: the same)
    mode: str = "rewrite"
    reproject_above_degrees: float | None = None
    decision: bool | None = None

    @property
    def inputs(self):
        """The inputs to project as a list (None: those of [input])."""
        if self.input is None:
            return None
        return [self.input] if isinstance(self.input, str) else list(self.input)


@dataclass(frozen=True)
class SlurmConfig:
    """``[dask.slurm]``: dask-jobqueue workers on SLURM."""

    jobs: int = 1
    cores: int = 1
    memory: str = "4GB"
    processes: int = 1
    walltime: str = "01:00:00"
    queue: str | None = None
    account: str | None = None
    job_extra_directives: list = field(default_factory=list)


@dataclass(frozen=True)
class DaskConfig:
    """``[dask]``: the scheduler the job runs on."""

    scheduler: str | None = None
    timeout: float | None = None  # seconds without workers; None: cluster.DEFAULT_TIMEOUT
    slurm: SlurmConfig | None = None


@dataclass(frozen=True)
class RunConfig:
    """``[run]``: progress bars and the drift alert."""

    progress: bool | None = None
    alert_above_degrees: float | None = None


@dataclass(frozen=True)
class JobConfig:
    """A whole job config; ``source`` is the file it was read from."""

    input: InputConfig
    model: ModelConfig
    output: OutputConfig = field(default_factory=OutputConfig)
    dask: DaskConfig = field(default_factory=DaskConfig)
    run: RunConfig = field(default_factory=RunConfig)
    source: str = ""


_MODES = ("fit", "update", "auto")
_VARIABLE = re.compile(r"\$(?:[A-Za-z_]\w*|\{[^}]*\})")
_OUTPUT_MODES = ("rewrite", "append", "auto")


def shrinkage_value(value: str | float | None) -> str | float | None:
    """The shrinkage a flag or key gives, converted by its form only: "none" is None, "0.3" is 0.3.

    Anything else is passed on as it is, for the estimator to check (the one place
    parameters are validated).

    >>> shrinkage_value("none"), shrinkage_value("0.3"), shrinkage_value("auto")
    (None, 0.3, 'auto')
    """
    if not isinstance(value, str):
        return value
    if value.strip().lower() == "none":
        return None
    try:
        return float(value)
    except ValueError:
        return value


def _type_ok(value, annotation):
    kinds = {
        str: (str,),
        int: (int,),
        float: (int, float),
        bool: (bool,),
        list: (list,),
        str | None: (str,),
        str | float | None: (str, int, float),
        bool | None: (bool,),
        float | None: (int, float),
        int | None: (int,),
        str | list | None: (str, list),
    }[annotation]
    if isinstance(value, bool) and bool not in kinds:
        return False
    if isinstance(value, float) and value != value:  # TOML's nan: no threshold, no size, no time
        return False
    return isinstance(value, kinds)


def _describe(annotation):
    return {str: "a string", int: "an integer", float: "a number (not nan)",
            bool: "true or false", list: "a list", str | None: "a string",
            str | float | None: "a string or a number (not nan)", bool | None: "true or false",
            float | None: "a number (not nan)", int | None: "an integer",
            str | list | None: "a string or a list of strings"}[annotation]


def _build(cls, table, where, file, nested=None):
    nested = nested or {}
    if not isinstance(table, dict):
        msg = f"{file}: [{where}] must be a table"
        raise InputError(msg)
    known = {f.name: f for f in fields(cls)}
    values = {}
    for key, value in table.items():
        if key not in known or (key in nested and not isinstance(value, dict)):
            if key in nested:
                msg = f"{file}: [{where}.{key}] must be a table"
            else:
                msg = (f"{file}: unknown key {key!r} in [{where}]; valid keys: "
                       f"{', '.join(sorted(known))}")
            raise InputError(msg)
        if key in nested:
            values[key] = _build(nested[key], value, f"{where}.{key}", file)
            continue
        if not _type_ok(value, known[key].type):
            msg = (f"{file}: [{where}] {key} must be {_describe(known[key].type)}; "
                   f"got {value!r}")
            raise InputError(msg)
        values[key] = value
    try:
        return cls(**values)
    except TypeError:
        missing = [f.name for f in fields(cls) if f.name not in values
                   and f.default is MISSING and f.default_factory is MISSING]
        msg = f"{file}: [{where}] needs {', '.join(repr(m) for m in missing)}"
        raise InputError(msg) from None


def _resolve(path, base, file, key, writes=False, source=False):
    """Paths in a config are relative to the config file; URLs stay as they are.

    A local URL with a relative path (``file://data/a.zarr``) is relative to the
    config file too: resolved against the working directory, the same job run
    from elsewhere would read other data into the same model.

    A name that starts like a URL without its ``//`` (``s3:/bucket/m``) is
    refused, naming ``key``, as the command line refuses it: made relative to
    the config, it was a local folder named ``s3:``. Where the job only reads
    (``writes`` false), a local file or folder of that name that exists is read.

    An input (``source``) may name an HDF5 dataset after its file, as on the
    command line (``c.h5:/grp/X``): the file part is resolved and checked as
    above, the dataset path kept as written.
    """
    if path is None:
        return path
    if not path.strip():  # (the config's own folder: read as an input, or written as a model)
        msg = f"{file}: {key} holds an empty path; give a file, folder or URL, or leave it out"
        raise InputError(msg)
    # "c.h5:/grp/X" starts like a URL "c.h5:" without its '//': judge the file part alone
    inner = sources.split_dataset(path)[1] if source else None
    name, suffix = (path, "") if inner is None else (path[: -len(inner) - 1], f":{inner}")
    if "\0" in path:  # (os: "embedded null byte")
        msg = (f"{file}: {key} {path!r} holds a NUL character (\\u0000), which no "
               "file name can hold")
        raise InputError(msg)
    # ${NAME}, or $NAME where NAME is set (a folder named '$HOME' was made next to the config);
    # an unset $NAME is a name as written ($RECYCLE.BIN, an object key with a $ in it)
    variable = next((m for m in _VARIABLE.finditer(path)
                     if m.group(0).startswith("${") or m.group(0)[1:] in os.environ), None)
    if variable:
        msg = (f"{file}: {key} {path} names the environment variable {variable.group(0)}: "
               "variables are not expanded in a config (~ is); write the path out")
        raise InputError(msg)
    scheme, sep, rest = name.partition("://")
    try:
        if sep and scheme in ("file", "local"):  # (a local name as written: file://s3:/x is local)
            return f"{scheme}://{_local(rest, base)}{suffix}" if rest and not rest.startswith("/") \
                else path
        if sep:
            return path
        resolved = _folded(_local(name, base))
    except InputError as exc:  # ~nosuchuser
        msg = f"{file}: {key}: {exc}"
        raise InputError(msg) from None
    meant = store.misspelt_url(path) if store.misspelt_url(name) else None  # (dataset and all)
    if meant is not None and (writes or not glob.glob(resolved)):
        msg = (f"{file}: {key} {path} looks like a URL missing '//' (did you mean {meant}?); "
               "nothing was written")
        raise InputError(msg)
    return resolved + suffix


def _local(path, base):
    p = Path(store.expand_user(path))
    return str(p if p.is_absolute() else (base / p))


def _folded(path):
    """``path`` with its ``.`` and ``..`` folded (``jobs/../m`` is ``m``) where that names the same place.

    Reports and messages said ``configs/../m``. To the OS ``link/..`` is the
    parent of the link's target, not the folder holding the link: there the path
    is kept as written.
    """
    parts = path.split(os.sep)
    last_up = max((i for i, part in enumerate(parts) if part == ".."), default=-1)
    if any(glob.has_magic(part) for part in parts[:last_up]):
        # "links/*/..": realpath takes "*" for a folder of that name, not the links it
        # matches, whose targets' parents ".." names
        return path
    folded = os.path.normpath(path)
    return folded if os.path.realpath(folded) == os.path.realpath(path) else path


def load_config(path):
    """Read and validate a job config. Relative paths are relative to the config file's folder as named."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        msg = f"no config file at {path}"
        raise InputError(msg) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        msg = f"{path}: not valid TOML: {exc}"
        raise InputError(msg) from None
    sections = {"input": InputConfig, "model": ModelConfig, "output": OutputConfig,
                "dask": DaskConfig, "run": RunConfig}
    for key in raw:
        if key not in sections:
            msg = f"{path}: unknown section [{key}]; valid sections: {', '.join(sections)}"
            raise InputError(msg)
    for required in ("input", "model"):
        if required not in raw:
            msg = f"{path}: missing section [{required}]"
            raise InputError(msg)
    built = {
        name: _build(cls, raw[name], name, path, {"slurm": SlurmConfig} if name == "dask" else None)
        for name, cls in sections.items() if name in raw
    }
    model = built["model"]
    if model.mode not in _MODES:
        msg = f"{path}: [model] mode must be one of {', '.join(map(repr, _MODES))}; got {model.mode!r}"
        raise InputError(msg)
    if built.get("dask") and built["dask"].scheduler and built["dask"].slurm:
        msg = f"{path}: [dask] give either scheduler or [dask.slurm], not both"
        raise InputError(msg)
    if built.get("dask") and built["dask"].timeout is not None and built["dask"].timeout <= 0:
        msg = f"{path}: [dask] timeout must be a positive number of seconds; got {built['dask'].timeout!r}"
        raise InputError(msg)
    _check_extras(path, built)
    # the folder the config was named in: a link to it reads and writes beside the link, not
    # beside its target (absolute, not resolved; '..' is left to the OS, as when it was read,
    # folded by _folded only where that names the same place)
    base = path.absolute().parent
    inp = built["input"]
    key = "[input] path" if inp.path else "[input] paths"
    paths = [_resolve(p, base, path, key, source=True)
             for p in ([inp.path] if inp.path else []) + list(inp.paths)]
    built["input"] = replace(inp, path=paths[0], paths=paths)
    built["model"] = ModelConfig(**{**model.__dict__,
                                    "path": _resolve(model.path, base, path, "[model] path", True),
                                    "boundary": _resolve(model.boundary, base, path, "[model] boundary"),
                                    "shrinkage": shrinkage_value(model.shrinkage)})
    if "output" in built:
        out = built["output"]
        given = out.inputs
        given = None if given is None else [_resolve(p, base, path, "[output] input", source=True)
                                         for p in given]
        # the inputs of [input] named again: the same as leaving the key out (one pass, nightly)
        built["output"] = replace(out, path=_resolve(out.path, base, path, "[output] path", True),
                                  input=None if given == paths else given)
    return JobConfig(**built, source=str(path))


def _check_extras(path, built):
    """Checks of the keys added for incremental jobs (inputs, windows, output modes, alerts)."""
    inp = built["input"]
    if not inp.path and not inp.paths:
        msg = f"{path}: [input] needs 'path' or 'paths'"
        raise InputError(msg)
    if inp.path and inp.paths:
        msg = (f"{path}: [input] give either 'path' (one input) or 'paths' (several), not both; "
               f"got path = {inp.path!r} and paths = {inp.paths!r}")
        raise InputError(msg)
    for name, values in (("[input] paths", inp.paths), ("[output] input", None)):
        if values is not None and not all(isinstance(v, str) for v in values):
            msg = f"{path}: {name} must be a list of strings; got {values!r}"
            raise InputError(msg)
    if isinstance(inp.features, list) and not all(isinstance(v, str) for v in inp.features):
        msg = f"{path}: [input] features must be a string or a list of strings; got {inp.features!r}"
        raise InputError(msg)
    for key in ("x", "y", "label", "features"):  # '' was taken as not given (label: 'y' named)
        value = getattr(inp, key)
        if isinstance(value, str) and not value.strip():
            msg = f"{path}: [input] {key} is empty; name it, or leave the key out"
            raise InputError(msg)
    model = built["model"]
    if model.keep_last is not None and model.keep_last < 1:
        msg = f"{path}: [model] keep_last must be at least 1; got {model.keep_last}"
        raise InputError(msg)
    out = built.get("output")
    if out is not None:
        if out.mode not in _OUTPUT_MODES:
            msg = (f"{path}: [output] mode must be one of {', '.join(map(repr, _OUTPUT_MODES))}; "
                   f"got {out.mode!r}")
            raise InputError(msg)
        if out.reproject_above_degrees is not None and out.reproject_above_degrees < 0:
            msg = (f"{path}: [output] reproject_above_degrees must be a non-negative number of "
                   f"degrees; got {out.reproject_above_degrees!r}")
            raise InputError(msg)
        if out.reproject_above_degrees is not None and out.mode == "rewrite":
            # (ignored there: OUT was rewritten every run, as --reproject-above without --append)
            msg = (f"{path}: [output] reproject_above_degrees applies to mode 'append' or 'auto' "
                   "only; mode is 'rewrite' (the default): set mode, or leave the key out")
            raise InputError(msg)
        if isinstance(out.input, list) and not all(isinstance(v, str) for v in out.input):
            msg = f"{path}: [output] input must be a string or a list of strings; got {out.input!r}"
            raise InputError(msg)
        if not out.path:  # (its other keys were ignored: the job made no projection, silently)
            msg = (f"{path}: [output] has no path; give one (where the projection is written), "
                   "or leave the section out")
            raise InputError(msg)
        if out.input is not None and not out.inputs:
            msg = f"{path}: [output] input is empty; name the inputs to project, or leave it out"
            raise InputError(msg)
    run = built.get("run")
    if run is not None and run.alert_above_degrees is not None and run.alert_above_degrees < 0:
        msg = (f"{path}: [run] alert_above_degrees must be a non-negative number of degrees; "
               f"got {run.alert_above_degrees!r}")
        raise InputError(msg)
