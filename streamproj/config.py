"""TOML job configs → frozen dataclasses, validated with errors that name the key and file.

A job is: fit (or update) a model from an input, then project an input to an
output. Example::

    [input]
    path = "data.zarr"          # local path or any fsspec URL
    x = "X"
    y = "y"
    allow_missing_chunks = false  # true: read a missing chunk file as the fill value

    [model]
    path = "model"
    mode = "auto"               # "fit", "update", or "auto" (update if the model exists)
    n_components = 2
    shrinkage = "none"          # "none", "auto", "oas" or a number in [0, 1]
    center = "mean"             # or "hyperplane"
    boundary = "coef.json"      # optional: JSON/NPZ with coef and intercept

    [output]
    path = "coords.zarr"        # optional: no projection when absent
    overwrite = true

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
"""

import tomllib
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from .errors import InputError, StreamprojError
from .solvers import validate_shrinkage

__all__ = ["DaskConfig", "InputConfig", "JobConfig", "ModelConfig", "OutputConfig", "SlurmConfig", "load_config"]


@dataclass(frozen=True)
class InputConfig:
    path: str
    x: str = "X"
    y: str = "y"
    allow_missing_chunks: bool = False


@dataclass(frozen=True)
class ModelConfig:
    path: str
    mode: str = "auto"
    n_components: int = 2
    shrinkage: str | float = "none"
    center: str = "mean"
    boundary: str | None = None
    keep_class_scatter: bool = False


@dataclass(frozen=True)
class OutputConfig:
    path: str | None = None
    overwrite: bool = False
    input: str | None = None  # project another input than the one fitted (default: the same)


@dataclass(frozen=True)
class SlurmConfig:
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
    scheduler: str | None = None
    timeout: float | None = None  # seconds without workers; None: cluster.DEFAULT_TIMEOUT
    slurm: SlurmConfig | None = None


@dataclass(frozen=True)
class RunConfig:
    progress: bool | None = None


@dataclass(frozen=True)
class JobConfig:
    input: InputConfig
    model: ModelConfig
    output: OutputConfig = field(default_factory=OutputConfig)
    dask: DaskConfig = field(default_factory=DaskConfig)
    run: RunConfig = field(default_factory=RunConfig)
    source: str = ""


_MODES = ("fit", "update", "auto")
_CENTERS = ("mean", "hyperplane")


def _type_ok(value, annotation):
    kinds = {
        str: (str,),
        int: (int,),
        float: (int, float),
        bool: (bool,),
        list: (list,),
        str | None: (str,),
        str | float: (str, int, float),
        bool | None: (bool,),
        float | None: (int, float),
    }[annotation]
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def _describe(annotation):
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false",
            list: "a list", str | None: "a string", str | float: "a string or a number",
            bool | None: "true or false", float | None: "a number"}[annotation]


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


def _resolve(path, base):
    """Paths in a config are relative to the config file; URLs stay as they are."""
    if path is None or "://" in path:
        return path
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else (base / p))


def load_config(path):
    """Read and validate a job config. Relative paths are relative to the config file."""
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
    if model.center not in _CENTERS:
        msg = f"{path}: [model] center must be one of {', '.join(map(repr, _CENTERS))}; got {model.center!r}"
        raise InputError(msg)
    try:
        validate_shrinkage(model.shrinkage)
    except StreamprojError as exc:
        msg = f"{path}: [model] {exc}"
        raise InputError(msg) from None
    if model.n_components < 1:
        msg = f"{path}: [model] n_components must be at least 1; got {model.n_components}"
        raise InputError(msg)
    if built.get("dask") and built["dask"].scheduler and built["dask"].slurm:
        msg = f"{path}: [dask] give either scheduler or [dask.slurm], not both"
        raise InputError(msg)
    if built.get("dask") and built["dask"].timeout is not None and built["dask"].timeout <= 0:
        msg = f"{path}: [dask] timeout must be a positive number of seconds; got {built['dask'].timeout!r}"
        raise InputError(msg)
    base = path.resolve().parent
    inp = built["input"]
    built["input"] = InputConfig(_resolve(inp.path, base), inp.x, inp.y, inp.allow_missing_chunks)
    built["model"] = ModelConfig(**{**model.__dict__, "path": _resolve(model.path, base),
                                    "boundary": _resolve(model.boundary, base)})
    if "output" in built:
        out = built["output"]
        built["output"] = OutputConfig(_resolve(out.path, base), out.overwrite, _resolve(out.input, base))
    return JobConfig(**built, source=str(path))
