import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench.py"


@pytest.mark.slow
def test_bench_out_of_core_path_runs_and_checks(tmp_path):
    """The benchmark's memory-limited run and its in-memory check, on tiny data (no timing asserted)."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(tmp_path), "--sizes", "20k",
         "--memory-limit-gb", "1.5", "--only-out-of-core"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("Out-of-core"))
    error = float(re.search(r"two-pass float64 LDA ([0-9.e+-]+)", line).group(1))
    assert error < 1e-10
    assert "prediction agreement with scikit-learn LDA 100.00%" in line


def test_every_mutation_of_the_mutation_check_still_finds_its_text():
    # a formula rewritten without its mutation counts as a survivor only when the script
    # is run by hand; here a stale one fails at once
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("mutation_check", root / "scripts" / "mutation_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stale = [name for name, path, text, _ in module.MUTATIONS
             if (root / path).read_text().count(text) != 1]
    assert stale == []


def test_the_merge_benchmark_runs_and_reports_each_detail(tmp_path):
    """scripts/bench_merge.py on tiny partials: one row per (K, detail), no timing asserted."""
    script = SCRIPT.parent / "bench_merge.py"
    proc = subprocess.run([sys.executable, str(script), "--classes", "1,3", "--features", "64",
                           "--rows", "200", "--repeats", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\| \d+ \| ", line)]
    assert [r.split("|")[1:3] for r in rows] == [[" 1 ", " per_class "], [" 1 ", " fourth "],
                                                  [" 3 ", " per_class "], [" 3 ", " fourth "]]
    assert all(float(r.split("|")[4]) < 6 for r in rows)  # peak extra (13 before), (K, p, p) arrays


def test_the_gpu_benchmark_times_every_task_on_a_stand_in(tmp_path, capsys):
    """scripts/bench_gpu.py's rounds and report on tiny data, numpy standing in for CuPy."""
    import importlib.util

    import numpy as np

    from streamproj import gpu

    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT.parent / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = module.bench.dataset(tmp_path, 3_000, 12, "float32", 700)
    with gpu.use_backend(np):
        times = module.rounds(path, 2)
    assert set(times) == {*module.TASKS, "pass1", "pass1_cuda"}
    assert all(len(t) == 2 and min(t) > 0 for t in times.values())
    module.report("tiny", times)
    out = capsys.readouterr().out
    assert out.count("median of per-round ratios") == len(module.RATIOS)


def test_the_benchmarks_targets_are_the_readmes(capsys):
    """bench.py's ratio table prints the targets README's "Where every target stands" holds it to."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    n = 2_000_000
    results = [{"task": task, "rows": n, "cols": 100, "ok": True, "median": 1.0, "seconds": [1.0]}
               for task in ("read", "read_write", "fit", "project")]
    module.report(results, n, [n], None)
    printed = dict(re.findall(r"^\| (.+?) \([^|]*\) \| [^|]* \| <= ([0-9.]+) \|$",
                              capsys.readouterr().out, flags=re.M))
    readme = (SCRIPT.parents[1] / "README.md").read_text()
    for name in ("fit / read floor", "project / read+write floor"):
        want = re.search(rf"^\| {re.escape(name)}, 2M \u00d7 100 [^|]*\| [^|]* \| ≤ ([0-9.]+)", readme,
                         flags=re.M)
        assert want, name
        assert printed[name] == want[1], name
