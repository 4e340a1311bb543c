"""The nightly benchmark runs end to end at a tiny size and checks its own output."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_nightly.py"


def test_bench_nightly_tiny_run(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--nights", "3", "--rows", "3000", "--features", "6",
         "--chunk-rows", "1000", "--fit-rows", "4000", "--repeats", "1", "--json-out",
         str(tmp_path / "r.json")],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    nightly = result["nightly"]
    assert [n["output"] for n in nightly["nights"]] == ["written", "appended", "appended"]
    assert [n["rows_written"] for n in nightly["nights"]] == [3000] * 3
    assert nightly["rows_covered_once"]
    assert nightly["final_max_rel_diff"] <= 1e-12
    assert result["fit"]["parquet_over_zarr"] > 0
