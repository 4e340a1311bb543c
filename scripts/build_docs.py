"""Build the API reference from the docstrings into ``docs/api/`` (pdoc), failing on any fault.

Usage::

    python scripts/build_docs.py [--output docs/api]

The build fails (exit status 1, one line per fault) when

- a module cannot be imported, or pdoc warns about anything (Python warnings
  are errors while the reference is built);
- a cross-reference in a docstring (``:class:`…```, ``:func:`…```,
  ``:meth:`…```, ``:attr:`…```, ``:data:`…```, ``:mod:`…```, ``:exc:`…```)
  names nothing that exists: references are resolved the way a reader would,
  from the docstring's class, then its module, then the package;
- a link in the generated pages points to a page or anchor that was not built.

pdoc itself leaves an unresolvable name as plain text, so the last two checks
are made here.
"""

import argparse
import builtins
import html.parser
import importlib
import pkgutil
import re
import shutil
import sys
import types
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "streamproj"
ROLE = re.compile(r":(?:py:)?(class|func|meth|attr|data|mod|exc|obj):`([^`]+)`")


def public_modules():
    """Every module of the package whose name has no part starting with ``_``."""
    package = importlib.import_module(PACKAGE)
    names = [PACKAGE]
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{PACKAGE}."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def _import_attr(dotted):
    """The object a fully qualified name names, or raise LookupError."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if not hasattr(obj, part):
                raise LookupError(dotted)
            obj = getattr(obj, part)
        return obj
    raise LookupError(dotted)


def _declared(cls, name):
    """True when class ``cls`` declares an attribute ``name`` without a class value.

    Dataclass fields and annotated instance attributes (``url: str``) exist on
    every instance but not on the class.
    """
    return any(name in getattr(k, "__annotations__", {}) for k in getattr(cls, "__mro__", ()))


def _lookup(start, dotted):
    """Follow ``dotted`` attribute by attribute from ``start``; raise LookupError."""
    obj = start
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if isinstance(obj, dict):
            if part not in obj:
                raise LookupError(dotted)
            obj = obj[part]
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        elif isinstance(obj, type) and _declared(obj, part) and i == len(parts) - 1:
            return None
        else:
            raise LookupError(dotted)
    return obj


def resolve(target, module, owner=None):
    """True when a docstring reference ``target`` names something that exists.

    Parameters
    ----------
    target : str
        The text of the role: ``name``, ``~a.b.name``, ``.sibling.name`` or
        ``title <a.b.name>``.
    module : types.ModuleType
        The module of the docstring.
    owner : type, optional
        The class of the docstring (for ``:meth:`partial_fit```).
    """
    if target.endswith(">") and "<" in target:
        target = target[target.rindex("<") + 1 : -1]
    target = target.lstrip("~!").removesuffix("()").strip()
    if target.startswith("."):
        package = module.__name__ if hasattr(module, "__path__") else module.__package__
        target = importlib.util.resolve_name(target, package)
    starts = [s for s in (owner, vars(module)) if s is not None]
    for start in starts:
        try:
            _lookup(start, target)
            return True
        except LookupError:
            pass
    try:
        _import_attr(target)
        return True
    except LookupError:
        pass
    for start in (importlib.import_module(PACKAGE), builtins):
        try:
            _lookup(start, target)
            return True
        except LookupError:
            pass
    return False


def _documented(module):
    """``(qualname, owner class or None, docstring)`` of a module and the public things it defines.

    Private names (a leading ``_``, not in ``__all__``) have no entry in the
    reference, so their docstrings are not checked here.
    """
    yield module.__name__, None, module.__doc__ or ""
    exported = set(getattr(module, "__all__", ()))
    for name, obj in vars(module).items():
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if name.startswith("_") and name not in exported:
            continue
        if isinstance(obj, type):
            yield f"{module.__name__}.{name}", obj, obj.__doc__ or ""
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                func = member.fget if isinstance(member, property) else member
                func = getattr(func, "__func__", func)
                doc = getattr(func, "__doc__", None)
                if isinstance(func, types.FunctionType) and doc:
                    yield f"{module.__name__}.{name}.{attr}", obj, doc
        elif isinstance(obj, types.FunctionType):
            yield f"{module.__name__}.{name}", None, obj.__doc__ or ""


def broken_references(modules):
    """Every docstring reference in ``modules`` that names nothing, as messages."""
    faults = []
    for name in modules:
        module = importlib.import_module(name)
        for where, owner, doc in _documented(module):
            for _, target in ROLE.findall(doc):
                if not resolve(target, module, owner):
                    faults.append(f"{where}: the reference {target!r} names nothing")
    return faults


class _Links(html.parser.HTMLParser):
    """The ids and the relative hrefs of one generated page."""

    def __init__(self):
        super().__init__()
        self.ids, self.hrefs = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        href = attrs.get("href")
        if tag == "a" and href and not re.match(r"[a-z]+:|//", href):
            self.hrefs.append(href)


def broken_links(output):
    """Every link between generated pages whose page or anchor was not built."""
    pages = {}
    for page in output.rglob("*.html"):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        pages[page.resolve()] = parser
    faults = []
    for page, parser in pages.items():
        for href in parser.hrefs:
            path, _, anchor = href.partition("#")
            target = (page.parent / path).resolve() if path else page
            if target not in pages:
                faults.append(f"{page.relative_to(output.resolve())}: link to a page not built: {href}")
            elif anchor and anchor not in pages[target].ids:
                faults.append(f"{page.relative_to(output.resolve())}: link to a missing anchor: {href}")
    return faults


def build(output):
    """Render the reference into ``output``; return the faults found (empty: success)."""
    import pdoc
    import pdoc.extract
    import pdoc.render

    modules = public_modules()
    # pdoc adds a package's submodules itself (those in its __all__): name each module once
    specs, covered = [], set()
    for name in modules:
        if name not in covered:
            specs.append(name)
            covered.update(pdoc.extract.walk_specs([name]))
    pdoc.render.configure(docformat="numpy", search=True, show_source=False,
                          template_directory=ROOT / "docs" / "templates")
    if output.exists():
        shutil.rmtree(output)
    pdoc.pdoc(*specs, output_directory=output)
    return broken_references(modules) + broken_links(output)


def main(argv=None):
    """Build the reference; print each fault and return 1 if there is any."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "api")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an import failure or a pdoc warning fails the build
        faults = build(args.output)
    for fault in faults:
        print(f"build_docs: {fault}", file=sys.stderr)
    if faults:
        print(f"build_docs: {len(faults)} fault(s); the reference in {args.output} is incomplete",
              file=sys.stderr)
        return 1
    print(f"build_docs: the API reference is in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
