"""The Python examples in the documentation run, in order, as written."""

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "docs" / "sklearn.md"]


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_python_blocks_run(path):
    blocks = python_blocks(path)
    assert blocks, f"{path} has no python blocks"
    namespace = {"__name__": "__docs__"}
    out = io.StringIO()
    for i, block in enumerate(blocks):
        with contextlib.redirect_stdout(out):
            exec(compile(block, f"{path.name}[block {i}]", "exec"), namespace)
    printed = out.getvalue()
    # what the comments promise
    if path.name == "sklearn.md":
        assert "['lda1', 'lda2', 'pc1']" in printed
        assert "True" in printed.split("\n")
        assert "DataFrame ['lda1', 'lda2']" in printed
        assert "(178, 2)" in printed
