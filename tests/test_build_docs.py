"""The API reference build (scripts/build_docs.py) finds broken references and links."""

import importlib.util
import sys
from pathlib import Path

import pytest

import streamproj.sources

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "build_docs.py"


@pytest.fixture(scope="module")
def build_docs():
    spec = importlib.util.spec_from_file_location("build_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("target", "found"), [
    ("Source", True),                                   # a name in the docstring's module
    ("Source.url", True),                               # a dataclass field
    ("Source.no_such_field", False),
    ("~streamproj.errors.InputError", True),            # fully qualified, shortened
    ("streamproj.errors.NoSuchError", False),
    (".passes.accumulate", True),                       # relative to the package
    (".passes.no_such_function", False),
    ("expand <streamproj.sources.expand>", True),       # a title and a target
    ("dask.compute", True),                             # another package
    ("no_such_name", False),
])
def test_references_resolve_as_a_reader_would(build_docs, target, found):
    assert build_docs.resolve(target, streamproj.sources) is found


def test_a_broken_reference_in_a_public_docstring_is_reported(build_docs, tmp_path, monkeypatch):
    (tmp_path / "docmod.py").write_text(
        '"""See :func:`helper` and :class:`Missing`."""\n\n'
        "def helper():\n"
        '    """Call :meth:`Thing.run` and :func:`_private_thing`."""\n\n'
        "class Thing:\n"
        '    """A thing; see :meth:`run` and :meth:`walk`."""\n\n'
        "    def run(self):\n"
        '        """Run (not :attr:`speed`)."""\n\n'
        "def _private_thing():\n"
        '    """Not in the reference, so :func:`whatever` is not checked."""\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        faults = build_docs.broken_references(["docmod"])
    finally:
        sys.modules.pop("docmod", None)
    assert sorted(faults) == [
        "docmod.Thing.run: the reference 'speed' names nothing",
        "docmod.Thing: the reference 'walk' names nothing",
        "docmod: the reference 'Missing' names nothing",
    ]


def test_links_to_pages_or_anchors_never_written_are_reported(build_docs, tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.html").write_text(
        '<h1 id="top">a</h1><a href="#top">ok</a><a href="b.html#f">ok</a>'
        '<a href="b.html#gone">bad anchor</a><a href="c.html">bad page</a>'
        '<a href="https://example.org/x.html">outside</a>'
    )
    (tmp_path / "pkg" / "b.html").write_text('<div id="f"></div><a href="a.html">ok</a>')
    faults = build_docs.broken_links(tmp_path)
    assert sorted(faults) == [
        "pkg/a.html: link to a missing anchor: b.html#gone",
        "pkg/a.html: link to a page not built: c.html",
    ]
