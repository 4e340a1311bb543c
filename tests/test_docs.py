"""The Python examples in README.md run, in order, as written, and print what they promise."""

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples write data.zarr, model, out.zarr
    blocks = python_blocks(README)
    assert len(blocks) >= 5, "README.md lost its python examples"
    namespace = {"__name__": "__readme__"}
    out = io.StringIO()
    for i, block in enumerate(blocks):
        with contextlib.redirect_stdout(out):
            exec(compile(block, f"README.md[block {i}]", "exec"), namespace)
    lines = out.getvalue().splitlines()
    # what the comments promise
    assert lines[:2] == ["True", "1.0"]
    assert lines[2] == "(2, 10) (10,)"
    assert lines[3] == "True"  # merged summaries give fit's coef
    assert lines[4] == "True"  # an external classifier's predictions are kept
    assert "['lda1', 'lda2', 'pc1']" in lines
    assert lines.count("True") >= 4  # class-sorted partial_fit equals fit
    assert "DataFrame ['lda1', 'lda2']" in lines
    assert "(178, 2)" in lines
    assert lines[-1] == "100000 2"
