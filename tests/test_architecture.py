"""The layout rules of ARCHITECTURE.md, checked on the source with ``ast``.

The table of allowed imports is read from ARCHITECTURE.md itself, so the page and
the check cannot drift apart. Rules the code does not keep yet are
``xfail(strict=True)`` with their reason: fixing one makes its test XPASS, which
fails, and the mark is then removed.
"""

import ast
import importlib
import importlib.metadata
import inspect
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "streamproj"
GROUPS = ("plot", "view")  # packages that count as one module in the table


def _module_name(path):
    """``streamproj.plot.figure`` for ``streamproj/plot/figure.py``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(name):
    """The row of the table a module belongs to: ``plot.figure`` -> ``plot``."""
    if name == "streamproj":
        return "streamproj"
    first = name.removeprefix("streamproj.").split(".")[0]
    return first


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path, name=None):
    """Every import in a module, anywhere in it: ``(node, imported module, names or None)``.

    Relative imports are resolved to absolute names; ``from . import x`` gives
    ``streamproj.x`` when x is a module and the package with name x otherwise.
    ``name`` is the module's dotted name (default: from its path).
    """
    name = name or _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.extend((node, alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            names = [alias.name for alias in node.names]
            if node.module is None or target in ("streamproj", "streamproj.plot", "streamproj.view"):
                # ``from . import jobs, __version__``: modules, or attributes of the package
                for n in names:
                    sub = f"{target}.{n}"
                    if sub in MODULES:
                        out.append((node, sub, None))
                    else:
                        out.append((node, target, [n]))
            else:
                out.append((node, target, names))
    return out


def _internal(path):
    """The table rows a module imports from (itself and its own package left out)."""
    return _internal_of(path, _module_name(path))


def _internal_of(path, name):
    own = _unit(name)
    used = set()
    for _, target, _ in _imports(path, name):
        if target.split(".")[0] != "streamproj" or target == "streamproj":
            continue
        unit = _unit(target)
        if unit != own:
            used.add(unit)
    return used


def _table():
    """``{module: allowed imports}`` from the table in ARCHITECTURE.md."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.fullmatch(r"`[\w.]+`", cells[0]):
            continue
        allowed = set(re.findall(r"`([\w.]+)`", cells[2]))
        rows[cells[0].strip("`")] = allowed | {"errors"}
    return rows


TABLE = _table()



def test_the_table_covers_every_module():
    units = {_unit(name) for name in MODULES}
    assert units - set(TABLE) == set(), "add a row to ARCHITECTURE.md for these modules"
    assert {"stats", "solvers", "store", "cli", "jobs"} <= set(TABLE)


@pytest.mark.parametrize("unit", sorted({_unit(name) for name in MODULES}))
def test_modules_import_only_what_their_row_allows(unit):
    used = set()
    for name, path in MODULES.items():
        if _unit(name) == unit:
            used |= _internal(path)
    assert used - TABLE.get(unit, set()) == set()


FILE_AND_PARALLEL = {"os", "pathlib", "io", "json", "shutil", "tempfile", "glob", "zarr",
                     "fsspec", "s3fs", "h5py", "pyarrow", "pandas", "polars", "xarray", "dask",
                     "distributed"}


@pytest.mark.parametrize("unit", ["stats", "solvers"])
def test_math_imports_no_file_format_or_parallel_library(unit):
    found = {t.split(".")[0] for _, t, _ in _imports(MODULES[f"streamproj.{unit}"])}
    assert found & FILE_AND_PARALLEL == set()


def test_imports_are_found_anywhere_and_resolved(tmp_path):
    # the rules above must be able to fail: top-level, lazy and relative imports are all seen
    module = tmp_path / "stats.py"
    module.write_text("import os\nfrom zarr import open_group\n"
                      "def f():\n    from .store import write_model\n"
                      "    from . import jobs, __version__\n")
    found = {(t, tuple(n or ())) for _, t, n in _imports(module, "streamproj.stats")}
    assert found == {("os", ()), ("zarr", ("open_group",)), ("streamproj.store", ("write_model",)),
                     ("streamproj.jobs", ()), ("streamproj", ("__version__",))}
    assert _internal_of(module, "streamproj.stats") == {"store", "jobs"}


def test_store_takes_only_classstats_from_the_math():
    taken = set()
    for _, target, names in _imports(MODULES["streamproj.store"]):
        if target in ("streamproj.solvers", "streamproj.estimator", "streamproj.qda",
                      "streamproj.passes"):
            taken.add(target)
        if target == "streamproj.stats":
            taken |= set(names or ["*"])
    assert taken == {"ClassStats"}


def test_nothing_imports_the_command_line():
    importers = sorted(name for name, path in MODULES.items()
                       if name != "streamproj._launch"
                       and any(t == "streamproj.cli" for _, t, _ in _imports(path)))
    assert importers == []


@pytest.mark.parametrize("name", [n for n in sorted(MODULES) if n != "streamproj"])
def test_no_module_imports_the_package_itself(name):
    hits = [t for _, t, names in _imports(MODULES[name])
            if t == "streamproj" and not (names and all(n in MODULES for n in names))]
    assert hits == [], "read the version from streamproj._version"


def _parses_arguments(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "argparse":
            return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("add_parser", "add_argument", "add_subparsers")):
            return True
    return False


@pytest.mark.parametrize("name", [n for n in sorted(MODULES) if n != "streamproj.cli"])
def test_only_the_command_line_parses_arguments(name):
    assert not _parses_arguments(MODULES[name])


def test_the_command_line_does_parse_arguments():
    assert _parses_arguments(MODULES["streamproj.cli"])  # the rule above can fail


POSIX_ONLY = {"fcntl", "termios", "pwd", "grp", "resource"}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_posix_only_modules_are_imported_inside_functions(name):
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    for node in ast.walk(tree):
        if isinstance(node, ast.If | ast.Try | ast.With):
            top += [n for n in node.body if isinstance(n, ast.Import | ast.ImportFrom)]
    found = {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
    found |= {n.module for n in top if isinstance(n, ast.ImportFrom) and n.module}
    assert found & POSIX_ONLY == set()


def test_the_version_is_typed_once():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    typed = pyproject["project"]["version"]
    literal = re.compile(r"""__version__\s*(?::\s*\w+\s*)?=\s*["']""")
    assert [n for n, p in MODULES.items() if literal.search(p.read_text(encoding="utf-8"))] == []
    import streamproj

    assert streamproj.__version__ == typed
    assert importlib.metadata.version("streamproj") == typed


def test_a_source_checkout_reads_the_version_from_pyproject():
    from streamproj import _version

    assert _version._source_checkout_version() == _version.__version__


TYPED_API = ("solvers", "qda", "validation", "sources", "progress", "cluster", "errors")


def _public_callables():
    import streamproj

    # what ``import streamproj`` gives (the estimators, summaries, accumulate, load), then
    # every public name of the typed modules
    units = [("", streamproj), *((u, importlib.import_module(f"streamproj.{u}")) for u in TYPED_API)]
    for unit, module in units:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield f"{unit}.{name}", obj
            elif inspect.isclass(obj) and (obj.__module__ == module.__name__ or not unit):
                for attr, member in vars(obj).items():
                    func = member.fget if isinstance(member, property) else member
                    if inspect.isfunction(func) and (not attr.startswith("_") or attr == "__init__"):
                        yield f"{unit}.{name}.{attr}", func


@pytest.mark.parametrize(("name", "func"), list(_public_callables()),
                         ids=[n for n, _ in _public_callables()])
def test_the_public_api_is_annotated(name, func):
    signature = inspect.signature(inspect.unwrap(func))
    missing = [p.name for p in signature.parameters.values()
               if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    assert missing == [], f"{name}: parameters without a type: {missing}"
    assert signature.return_annotation is not inspect.Signature.empty, f"{name}: no return type"
