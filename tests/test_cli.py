import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import make_classes, one_error_line, write_zarr
from conftest import run_cli as run

import streamproj as sp
from streamproj.cli import main


@pytest.fixture
def batches(tmp_path):
    X, y = make_classes(n=1500, p=5, k=3, seed=30)
    parts = {"A": slice(0, 600), "B": slice(600, 1000), "C": slice(1000, 1500)}
    for name, rows in parts.items():
        write_zarr(tmp_path / f"{name}.zarr", X[rows], y[rows], chunk_rows=64)
    return tmp_path, X, y, parts


def model_equals_fit(model_dir, X, y, tol=1e-10):
    got = sp.load(model_dir)
    ref = sp.BoundaryProjector().fit(X, y)
    for name in ("coef_", "intercept_", "components_", "center_"):
        a, b = getattr(got, name), getattr(ref, name)
        assert np.max(np.abs(a - b)) <= tol * np.max(np.abs(b)), name


def test_fit_project_roundtrip(batches, capsys):
    d, X, y, parts = batches
    assert run("fit", d / "A.zarr", "--model", d / "m", "--n-components", 3) == 0
    assert run("project", d / "m", d / "A.zarr", "--output", d / "out.zarr") == 0
    out = zarr.open_group(str(d / "out.zarr"), mode="r")
    model = sp.load(d / "m")
    np.testing.assert_allclose(out["projection"][:], model.transform(X[parts["A"]]), rtol=1e-13, atol=1e-13)
    said = capsys.readouterr().out
    assert "fitted" in said
    # the summary names every array written (three classes: their decisions too)
    assert f"projection (600 x 3), {', '.join(['predicted', 'decision', 'y'])}" in said
    assert {"predicted", "decision", "y"} <= set(out.array_keys())


def test_a_bad_max_age_is_refused_before_any_row_is_read(batches, capsys, monkeypatch):
    # it was read when the window was applied, after the whole pass over the inputs
    d, _, _, _ = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    capsys.readouterr()

    def no_pass(*args, **kwargs):
        msg = "rows were read"
        raise AssertionError(msg)

    monkeypatch.setattr("streamproj.jobs._summarise", no_pass)
    before = sorted(p.name for p in d.rglob("*"))
    for argv in (["fit", d / "B.zarr", "--model", d / "m2"], ["update", d / "m", d / "B.zarr"]):
        assert run(*argv, "--max-age", "3x") == 2, argv
        assert one_error_line(capsys) == ('streamproj: error: --max-age must be a number and a '
                                          'unit (s, m, h, d or w), such as "30d"; got \'3x\'')
    assert sorted(p.name for p in d.rglob("*")) == before


def test_more_axes_than_features_are_refused_before_any_row_is_read(batches, capsys, monkeypatch):
    # the solve refused them, after the whole pass over the inputs
    d, _, _, _ = batches

    def no_pass(*args, **kwargs):
        msg = "rows were read"
        raise AssertionError(msg)

    monkeypatch.setattr("streamproj.jobs._summarise", no_pass)
    assert run("fit", d / "A.zarr", "--model", d / "m", "--n-components", 6) == 2
    assert one_error_line(capsys).endswith(
        "A.zarr: n_components=6 is more than the 5 feature(s) of X; ask for at most 5")
    assert not (d / "m").exists()


def test_updates_merge_only_new_rows(batches, capsys):
    d, X, y, parts = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    assert run("update", d / "m", d / "B.zarr") == 0
    out = capsys.readouterr().out
    assert "+400 rows" in out
    assert "boundary directions moved" in out
    assert "principal angles" in out
    model_equals_fit(d / "m", X[:1000], y[:1000])
    version = sp.load(d / "m").meta_["version"]
    assert run("update", d / "m", d / "B.zarr") == 0
    assert "model unchanged" in capsys.readouterr().out
    assert sp.load(d / "m").meta_["version"] == version
    # append batch C's rows to B's arrays: only they are merged
    group = zarr.open_group(str(d / "B.zarr"), mode="a")
    n_b = group["X"].shape[0]
    group["X"].resize((n_b + 500, 5))
    group["y"].resize((n_b + 500,))
    group["X"][n_b:] = X[parts["C"]]
    group["y"][n_b:] = y[parts["C"]]
    assert run("update", d / "m", d / "B.zarr") == 0
    assert "+500 rows" in capsys.readouterr().out
    model_equals_fit(d / "m", X, y)
    info = json.loads((capsys.readouterr(), run("info", d / "m"), capsys.readouterr().out)[2])
    assert info["n_samples"] == 1500
    assert len(info["history"]) == 3
    assert [s["rows"] for s in info["sources"]] == [600, 900]


def test_verify_names_the_labels_too_when_a_label_changed(batches, capsys):
    # "rows 0..599 of A.zarr/X ... have changed" when only y[300] had (found by a new user)
    d, X, y, parts = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    group = zarr.open_group(str(d / "A.zarr"), mode="a")
    group["y"][300] = 1 - group["y"][300]
    assert run("update", d / "m", d / "A.zarr", "--verify") == 2
    line = one_error_line(capsys)
    assert "A.zarr/X or their labels in " in line
    assert "A.zarr/y (merged on" in line
    assert "have changed since" in line
    model_equals_fit(d / "m", X[:600], y[:600])


def test_update_refuses_changed_rows_and_keeps_the_model(batches, capsys):
    d, X, y, parts = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    group = zarr.open_group(str(d / "A.zarr"), mode="a")
    group["X"][0, 0] = 99.0
    assert run("update", d / "m", d / "A.zarr") == 2
    assert "have changed since" in one_error_line(capsys)
    model_equals_fit(d / "m", X[:600], y[:600])


def test_update_reports_a_new_class(tmp_path, capsys):
    X, y = make_classes(n=600, p=4, k=3, seed=31)
    write_zarr(tmp_path / "a.zarr", X[y < 2], y[y < 2])
    write_zarr(tmp_path / "b.zarr", X[y == 2], y[y == 2])
    run("fit", tmp_path / "a.zarr", "--model", tmp_path / "m")
    assert run("update", tmp_path / "m", tmp_path / "b.zarr") == 0
    assert "new classes: 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("make", "argv", "expected"),
    [
        ("nan", ["fit", "{d}/bad.zarr", "--model", "{d}/m"], r"bad.zarr/X has a non-finite value \(nan\) in row 77"),
        ("short_y", ["fit", "{d}/bad.zarr", "--model", "{d}/m"], "bad.zarr/y must be 1-D with one label per row of X"),
        ("one_class", ["fit", "{d}/bad.zarr", "--model", "{d}/m"], "bad.zarr: LDA needs at least two classes"),
        ("singular", ["fit", "{d}/bad.zarr", "--model", "{d}/m"], "bad.zarr: the within-class covariance is singular.*shrinkage"),
        ("one_d", ["fit", "{d}/bad.zarr", "--model", "{d}/m"], "bad.zarr/X must be 2-D"),
        ("nan", ["fit", "{d}/missing.zarr", "--model", "{d}/m"], "no such input: .*missing.zarr"),
        ("nan", ["fit", "{d}/bad.zarr", "--model", "{d}/m", "--x", "features"], "has no array 'features' .*arrays: X, y.*--x"),
        ("nan", ["fit", "{d}/bad.zarr", "--model", "{d}/m", "--shrinkage", "lots"], "--shrinkage must be 'none', 'auto', 'oas'.*got 'lots'"),
        ("nan", ["info", "{d}/nomodel"], "nothing at .*nomodel: info describes a streamproj model directory"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, make, argv, expected):
    import re

    X, y = make_classes(n=200, p=4, seed=32)
    if make == "nan":
        X[77, 2] = np.nan
    if make == "one_class":
        y[:] = 1
    if make == "singular":
        X[:, 3] = X[:, 0] + X[:, 1]
    if make == "one_d":
        X = X[:, :1].ravel()
    group = zarr.open_group(str(tmp_path / "bad.zarr"), mode="w")
    group.create_array("X", data=X, chunks=(50,) + X.shape[1:])
    group.create_array("y", data=y[:-1] if make == "short_y" else y, chunks=(50,))
    code = run(*[a.format(d=tmp_path) for a in argv])
    line = one_error_line(capsys)
    assert code == 2
    assert re.search(expected, line), line
    assert not (tmp_path / "m").exists()


def test_a_bad_shrinkage_is_said_in_the_flags_spelling(tmp_path, capsys):
    """The flag's message spells its no-shrinkage value as the flag takes it (none).

    It said "must be None, ..." where the CLI and the docs say none; the Python
    API, whose value is None, keeps scikit-learn's own message.
    """
    X, y = make_classes(n=200, p=3, seed=34)
    write_zarr(tmp_path / "in.zarr", X, y, chunk_rows=50)
    assert run("fit", tmp_path / "in.zarr", "--model", tmp_path / "m", "--shrinkage", "1.5") == 2
    assert one_error_line(capsys) == ("streamproj: error: --shrinkage must be 'none', 'auto', "
                                      "'oas' or a float in [0, 1]; got 1.5")
    assert not (tmp_path / "m").exists()
    with pytest.raises(sp.errors.InvalidParameterError, match="must be None, a str among"):
        sp.BoundaryProjector(shrinkage=1.5).fit(X, y)


@pytest.mark.parametrize("what_is_there", ["nothing", "empty", "file"])
def test_info_on_nothing_says_what_info_reads(tmp_path, capsys, what_is_there):
    """``info PATH`` with nothing there (or a file) names both things info describes.

    It said "no model at PATH: fit one there first", advice that misleads someone
    who mistyped an output's path (info also describes outputs); a file was "not a
    streamproj model directory".
    """
    path = tmp_path / "nothere"
    if what_is_there == "empty":
        path.mkdir()
    elif what_is_there == "file":
        path.write_text("a,b,y\n1,2,0\n")
    assert run("info", path) == 2
    line = one_error_line(capsys)
    what = {"empty": f"{path} is an empty folder", "nothing": f"nothing at {path}",
            "file": f"{path} is a file"}[what_is_there]
    assert line == (f"streamproj: error: {what}: info describes a streamproj model directory "
                    "(written by 'streamproj fit' or save()) or an output (written by "
                    "'streamproj project')")
    assert sorted(p.name for p in tmp_path.iterdir()) == (
        [] if what_is_there == "nothing" else ["nothere"])


@pytest.mark.parametrize(("made", "held"), [
    ("notes", "a folder with no zarr.json, holding notes.txt"),
    ("group", "no streamproj attributes in its zarr.json"),
    # (a damaged output's zarr.json was "no streamproj attributes", as another's group)
    ("damaged", "its zarr.json is not a JSON object: damaged, or not Zarr's"),
])
def test_info_on_a_folder_of_the_users_says_what_it_holds(tmp_path, capsys, made, held):
    """It said only "F is not a streamproj model directory (no CURRENT file)"."""
    path = tmp_path / "mine"
    path.mkdir()
    if made == "notes":
        (path / "notes.txt").write_text("mine")
    elif made == "group":  # a Zarr group of the user's, e.g. an input
        (path / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    else:
        (path / "zarr.json").write_text('{"zarr_format": 3, "node_type": "gro')
    before = sorted(p.name for p in path.iterdir())
    assert run("info", path) == 2
    line = one_error_line(capsys)
    assert line == (f"streamproj: error: {path} is neither a streamproj model directory (no "
                    f"CURRENT file) nor an output ({held}): info describes a streamproj model "
                    "directory (written by 'streamproj fit' or save()) or an output (written "
                    "by 'streamproj project')")
    assert sorted(p.name for p in path.iterdir()) == before


@pytest.mark.parametrize("command", ["update", "project"])
def test_a_missing_model_is_said_before_its_inputs_are_read(tmp_path, capsys, command):
    """A mistyped MODEL is named once, with what to do, before a table's label is looked for.

    ``update nomodel rows.parquet`` said that the table had no label column 'y'
    (the model, had there been one, would have named it); and the model's path
    was said twice ("nomodel: no model at nomodel").
    """
    import pandas as pd

    X, y = make_classes(n=200, p=3, seed=33)
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(kind=y)
    frame.to_parquet(tmp_path / "rows.parquet")
    out = ["--output", tmp_path / "o.zarr"] if command == "project" else []
    assert run(command, tmp_path / "nomodel", tmp_path / "rows.parquet", *out) == 2
    line = one_error_line(capsys)
    model = str(tmp_path / "nomodel")
    assert line == (f"streamproj: error: no model at {model}: fit one there first "
                    f"('streamproj fit INPUT --model {model}', or save() a fitted "
                    "BoundaryProjector there)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.parquet"]


def test_existing_output_and_model_are_refused(batches, capsys):
    d, *_ = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    assert run("fit", d / "A.zarr", "--model", d / "m") == 2
    assert "exists; use 'streamproj update'" in one_error_line(capsys)
    run("project", d / "m", d / "A.zarr", "--output", d / "o.zarr")
    assert run("project", d / "m", d / "A.zarr", "--output", d / "o.zarr") == 2
    assert "--overwrite" in one_error_line(capsys)
    assert run("project", d / "m", d / "A.zarr", "--output", d / "o.zarr", "--overwrite") == 0


def test_feature_mismatch_on_update(batches, tmp_path, capsys):
    d, X, y, _ = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    write_zarr(tmp_path / "narrow.zarr", X[:50, :4], y[:50])
    assert run("update", d / "m", tmp_path / "narrow.zarr") == 2
    assert "narrow.zarr/X has 4 features but model" in one_error_line(capsys)


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit"])
    assert exc.value.code == 2
    one_error_line(capsys)
    # with --json, one JSON object on stdout as for any other error
    for argv, command in ((["fit", "d.zarr", "--model", "m", "--json", "--bogus"], "fit"),
                          (["project", "m", "d.zarr", "--json"], "project"),
                          (["fit", "d.zarr", "--js"], "fit")):  # argparse takes abbreviations
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        out = capsys.readouterr().out
        report = json.loads(out)
        assert (report["command"], report["status"], report["exit_code"]) == (command, "error", 2)
        assert report["error_type"] == "UsageError"


def test_run_config_fit_then_update(batches, capsys):
    d, X, y, _ = batches
    config = d / "job.toml"
    config.write_text(textwrap.dedent("""
        [input]
        path = "A.zarr"
        [model]
        path = "model"
        [output]
        path = "coords.zarr"
        overwrite = true
    """))
    assert run("run", config) == 0
    config.write_text(config.read_text().replace('path = "A.zarr"', 'path = "B.zarr"'))
    assert run("run", config) == 0
    assert "+400 rows" in capsys.readouterr().out
    model_equals_fit(d / "model", X[:1000], y[:1000])
    out = zarr.open_group(str(d / "coords.zarr"), mode="r")
    assert out["projection"].shape == (400, 2)


def test_run_reports_paths_with_dot_dot_folded(batches, capsys):
    """``run``'s report names ``d/model``, not ``d/configs/../model``.

    A config's relative paths are joined to its folder; the ``..`` stood in
    every line. A URL is left as written.
    """
    d = batches[0]
    (d / "configs").mkdir()
    config = d / "configs" / "job.toml"
    config.write_text(textwrap.dedent("""
        [input]
        path = "../A.zarr"
        [model]
        path = "./../model"
        [output]
        path = "../sub/./../coords.zarr"
    """))
    assert run("run", config, "--no-progress") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"fitted {d / 'model'} (v000001) on 600 rows")
    assert lines[1].startswith(f"wrote {d / 'coords.zarr'}: projection (600 x 2)")
    assert run("run", config, "--json") == 2  # (the output exists): said of the folded path too
    report = json.loads(capsys.readouterr().out)
    assert report["error"].startswith(f"[output] path {d / 'coords.zarr'} exists")


@pytest.mark.parametrize(("section", "text", "meant"), [
    ("model", "s3:/bucket/m", "s3://bucket/m"),
    ("output", "s3:bucket/o.zarr", "s3://bucket/o.zarr"),
    ("input", "s3:/bucket/day.zarr", "s3://bucket/day.zarr"),
    ("input", "s3:/bucket/day.h5:/grp/X", "s3://bucket/day.h5:/grp/X"),
])
def test_run_refuses_a_misspelt_url_in_the_config_as_the_command_line_does(
        batches, capsys, section, text, meant):
    # made relative to the config, "s3:/bucket/m" was a local folder named "s3:", written
    d = batches[0]
    paths = {"input": "A.zarr", "model": "model", "output": "o.zarr", section: text}
    job = d / "job.toml"
    job.write_text("".join(f'[{s}]\npath = "{p}"\n' for s, p in paths.items()))
    before = sorted(os.listdir(d))
    assert run("run", job, "--no-progress") == 2
    line = one_error_line(capsys)
    assert f"{job}: [{section}] path {text} looks like a URL missing '//'" in line
    assert f"did you mean {meant}?" in line
    assert sorted(os.listdir(d)) == before


def test_run_reads_an_hdf5_dataset_named_after_its_file_as_the_command_line_does(
        tmp_path, capsys, monkeypatch):
    # "c.h5:/grp/X" starts like a URL "c.h5:" without its '//': the config refused it
    h5py = pytest.importorskip("h5py")
    X, y = make_classes(n=400, p=4, seed=33)
    jobs_dir = tmp_path / "jobs"
    jobs_dir.mkdir()
    with h5py.File(jobs_dir / "c.h5", "w") as f:
        f.create_dataset("grp/X", data=X)
        f.create_dataset("grp/y", data=y)
    job = jobs_dir / "job.toml"
    job.write_text('[input]\npaths = ["c.h5:/grp/X"]\n[model]\npath = "m"\n'
                   '[output]\npath = "o.zarr"\ninput = "c.h5:/grp/X"\n')
    monkeypatch.chdir(tmp_path)  # the file is beside the config, not in the working folder
    assert run("run", job, "--no-progress") == 0
    assert "on 400 rows of 1 source" in capsys.readouterr().out
    model_equals_fit(jobs_dir / "m", X, y)
    assert run("info", jobs_dir / "m") == 0
    sources = json.loads(capsys.readouterr().out)["sources"]
    assert [s["url"] for s in sources] == [f"{jobs_dir / 'c.h5'}:/grp/X"]
    out = zarr.open_group(str(jobs_dir / "o.zarr"), mode="r")
    np.testing.assert_array_equal(out["y"][:], y)
    assert run("fit", jobs_dir / "c.h5:/grp/X", "--model", tmp_path / "cli") == 0
    model_equals_fit(tmp_path / "cli", X, y)


NO_USER = "~streamproj-no-such-user"


@pytest.mark.parametrize("argv", [
    ["fit", "A.zarr", "--model", f"{NO_USER}/m", "--no-progress"],
    ["fit", f"{NO_USER}/A.zarr", "--model", "m2", "--no-progress"],
    ["project", "m", "A.zarr", "--output", f"{NO_USER}/o.zarr", "--no-progress"],
    ["plot", "o.zarr", "--output", f"{NO_USER}/f.png"],
    ["info", f"{NO_USER}/m"],
])
def test_a_path_in_an_unknown_users_home_is_refused_in_one_line(batches, capsys, monkeypatch, argv):
    # Path.expanduser's "RuntimeError: Could not determine home directory", a traceback
    d = batches[0]
    monkeypatch.chdir(d)
    assert run("fit", "A.zarr", "--model", "m", "--no-progress") == 0
    assert run("project", "m", "A.zarr", "--output", "o.zarr", "--no-progress") == 0
    capsys.readouterr()
    before = sorted(os.listdir(d))
    assert run(*argv) == 2
    line = one_error_line(capsys)
    assert f"cannot expand {NO_USER} in {NO_USER}/" in line
    assert f"there is no user '{NO_USER[1:]}'" in line
    assert sorted(os.listdir(d)) == before


def test_a_folder_named_like_a_home_that_is_here_is_read_as_named(batches, monkeypatch):
    # ~tmp (no such user) was read before home paths were checked; a folder of that name here
    # still is, where no user has it
    import shutil

    d = batches[0]
    monkeypatch.chdir(d)
    shutil.copytree(d / "A.zarr", d / f"{NO_USER}data")
    assert run("fit", f"{NO_USER}data", "--model", "m", "--no-progress") == 0


# ------------------------------------------------------------ crash safety
KILL_DURING_UPDATE = """
import sys, time
import streamproj.store as store
original = store._write_version
def paused(folder, *args, **kwargs):
    original(folder, *args, **kwargs)
    if "{when}" == "before-swap":
        print("READY", flush=True); time.sleep(60)
def half(folder, meta, stats, solution, *rest, **kwargs):
    folder.mkdir(parents=True)
    (folder / "model.json").write_text("{{")
    print("READY", flush=True); time.sleep(60)
store._write_version = half if "{when}" == "half-written" else paused
from streamproj.cli import main
sys.exit(main({argv!r}))
"""

KILL_DURING_PROJECT = """
import sys, time
import zarr
original = zarr.Array.__setitem__
calls = []
def slow(self, key, value):
    original(self, key, value)
    calls.append(1)
    if len(calls) == 3:
        print("READY", flush=True); time.sleep(60)
zarr.Array.__setitem__ = slow
from streamproj.cli import main
sys.exit(main({argv!r}))
"""


def kill_when_ready(script):
    # ``with`` closes the pipes (left open they leak a ResourceWarning)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        line = proc.stdout.readline()
        assert line.strip() == "READY", (line, proc.stderr.read())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("when", ["half-written", "before-swap"])
def test_sigkill_during_update_keeps_the_old_model(batches, when):
    d, X, y, _ = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    argv = ["update", str(d / "m"), str(d / "B.zarr")]
    kill_when_ready(KILL_DURING_UPDATE.format(when=when, argv=argv))
    model_equals_fit(d / "m", X[:600], y[:600])
    assert run("update", d / "m", d / "B.zarr") == 0
    model_equals_fit(d / "m", X[:1000], y[:1000])


@pytest.mark.slow
def test_sigkill_during_project_leaves_no_output(batches):
    d, X, y, _ = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    argv = ["project", str(d / "m"), str(d / "A.zarr"), "--output", str(d / "out.zarr")]
    kill_when_ready(KILL_DURING_PROJECT.format(argv=argv))
    assert not (d / "out.zarr").exists()
    assert run("project", *argv[1:]) == 0
    out = zarr.open_group(str(d / "out.zarr"), mode="r")
    np.testing.assert_allclose(out["projection"][:], sp.load(d / "m").transform(X[:600]), rtol=1e-13)


@pytest.mark.slow
def test_concurrent_updates_lose_no_batch(batches):
    d, X, y, _ = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    procs = [subprocess.Popen([sys.executable, "-m", "streamproj", "update", str(d / "m"),
                               str(d / f"{name}.zarr"), "--no-progress"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("B", "C")]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    model_equals_fit(d / "m", X, y)
    assert len(sp.load(d / "m").meta_["history"]) == 3


def test_verify_catches_a_change_in_the_middle_of_merged_rows(batches, capsys):
    d, X, y, _ = batches
    run("fit", d / "A.zarr", "--model", d / "m")
    assert run("update", d / "m", d / "A.zarr", "--verify") == 0  # unchanged rows verify
    assert "model unchanged" in capsys.readouterr().out
    group = zarr.open_group(str(d / "A.zarr"), mode="a")
    group["X"][300, 1] += 1e-9  # far from both ends: the quick edge check cannot see it
    assert run("update", d / "m", d / "A.zarr") == 0
    assert "model unchanged" in capsys.readouterr().out
    assert run("update", d / "m", d / "A.zarr", "--verify") == 2
    assert "rows 0..599 of" in one_error_line(capsys)
    model_equals_fit(d / "m", X[:600], y[:600])


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_fit_with_a_boundary_file(tmp_path, capsys, suffix):
    from sklearn.linear_model import LogisticRegression

    X, y = make_classes(n=800, p=4, seed=33)
    write_zarr(tmp_path / "d.zarr", X, y)
    clf = LogisticRegression().fit(X, y)
    path = tmp_path / f"boundary{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"coef": clf.coef_.tolist(), "intercept": clf.intercept_.tolist()}))
    else:
        np.savez(path, coef=clf.coef_, intercept=clf.intercept_)
    assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m", "--boundary", path) == 0
    model = sp.load(tmp_path / "m")
    np.testing.assert_array_equal(model.predict(X), clf.predict(X))
    info = json.loads((capsys.readouterr(), run("info", tmp_path / "m", "--no-progress"),
                       capsys.readouterr().out)[2])
    assert info["boundary"]["source"] == f"file {path}"


def test_bad_boundary_files(tmp_path, capsys):
    X, y = make_classes(n=200, p=4, seed=34)
    write_zarr(tmp_path / "d.zarr", X, y)
    (tmp_path / "b.json").write_text('{"coef": [[1, 2, 3, 4]]}')
    assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m", "--boundary", tmp_path / "b.json") == 2
    assert "lacks intercept" in one_error_line(capsys)
    (tmp_path / "c.json").write_text('{"coef": [[1, 2, 3]], "intercept": [0]}')
    assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m", "--boundary", tmp_path / "c.json") == 2
    line = one_error_line(capsys)
    assert "c.json: the boundary has 3 coefficients per row but" in line
    assert "has 4 features" in line
    assert not (tmp_path / "m").exists()
    # in a job's config, the message names the key (it named the file only)
    job = tmp_path / "job.toml"
    job.write_text('[input]\npath = "d.zarr"\n[model]\npath = "m"\nboundary = "gone.json"\n')
    assert run("run", job) == 2
    line = one_error_line(capsys)
    assert "job.toml: [model] boundary: no boundary file at" in line
    assert "gone.json" in line
    assert not (tmp_path / "m").exists()


def test_run_progress_follows_the_flag_then_the_config(batches, capsys):
    d, *_ = batches
    config = d / "job.toml"
    config.write_text('[input]\npath = "A.zarr"\n[model]\npath = "model"\nmode = "fit"\n'
                      '[run]\nprogress = true\n')
    assert run("run", config) == 0
    assert "pass 1: summaries: 100%" in capsys.readouterr().err
    assert run("run", config, "--no-progress") == 0
    assert "pass 1" not in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["update", "{t}/m", "{t}/nothere.zarr"],
                                  ["relocate", "{t}/m", "{t}/a", "{t}/b"],
                                  ["info", "{t}/nothere"],
                                  ["plot", "{t}/o.zarr", "--output", "{t}/x.txt"]])
def test_json_errors_are_one_object_on_stdout_and_one_line_on_stderr(tmp_path, capsys, argv):
    code = main([a.format(t=tmp_path) for a in argv] + ["--json"])
    captured = capsys.readouterr()
    assert code == 2
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("streamproj: error: ")
    rep = json.loads(captured.out)
    assert rep["status"] == "error"
    assert rep["command"] == argv[0]
    assert rep["exit_code"] == 2
    assert rep["error"] == err[0].removeprefix("streamproj: error: ")


def test_relocate_says_what_moved_in_one_line(batches, capsys):
    d, X, y, parts = batches
    (d / "in").mkdir()
    for name in "AB":
        (d / f"{name}.zarr").rename(d / "in" / f"{name}.zarr")
    assert run("fit", d / "in" / "A.zarr", d / "in" / "B.zarr", "--model", d / "m") == 0
    assert run("project", d / "m", d / "in" / "A.zarr", "--output", d / "o.zarr") == 0
    (d / "in").rename(d / "out")
    # grown since it moved: its new rows are left to the next update
    g = zarr.open_group(str(d / "out" / "B.zarr"), mode="a")
    g["X"].resize((500, 5))
    g["y"].resize((500,))
    g["X"][400:], g["y"][400:] = X[parts["C"]][:100], y[parts["C"]][:100]
    capsys.readouterr()
    assert run("relocate", d / "m", d / "in", d / "out", "--output", d / "o.zarr") == 0
    said = capsys.readouterr().out.strip()
    assert said == (f"relocated {(d / 'in').resolve()} to {(d / 'out').resolve()} in {d / 'm'} "
                    f"(v000002): 2 sources (1 with new rows, for the next update); {d / 'o.zarr'}: "
                    "1 source")
    assert run("update", d / "m", d / "out" / "A.zarr", d / "out" / "B.zarr") == 0
    assert "+100 rows" in capsys.readouterr().out
    model_equals_fit(d / "m", np.vstack([X[:1000], X[parts["C"]][:100]]),
                     np.concatenate([y[:1000], y[parts["C"]][:100]]))
    # usage: OLD and NEW are both needed
    assert run("relocate", d / "m", d / "out") == 2
    assert "the following arguments are required: NEW" in one_error_line(capsys)


def test_an_append_of_labelled_rows_onto_an_output_without_labels_says_so(tmp_path, capsys):
    X, y = make_classes(n=400, p=3, k=2, seed=12)
    write_zarr(tmp_path / "bare.zarr", X[:200])
    write_zarr(tmp_path / "labelled.zarr", X[200:], y[200:])
    write_zarr(tmp_path / "fit.zarr", X, y)
    assert main(["fit", str(tmp_path / "fit.zarr"), "--model", str(tmp_path / "m")]) == 0
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "bare.zarr"),
                 "--output", str(tmp_path / "o.zarr")]) == 0
    capsys.readouterr()
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "bare.zarr"),
                 str(tmp_path / "labelled.zarr"), "--output", str(tmp_path / "o.zarr"),
                 "--append"]) == 0
    said = capsys.readouterr().out
    assert "appended 200 rows" in said
    assert "their labels are not stored, as OUT has no y" in said


def test_an_empty_path_is_refused_not_taken_for_the_current_folder(tmp_path, capsys, monkeypatch):
    X, y = make_classes(n=200, p=3, k=2, seed=13)
    write_zarr(tmp_path / "d.zarr", X, y)
    assert main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m")]) == 0
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    for argv, role in ((["project", str(tmp_path / "m"), str(tmp_path / "d.zarr"), "--output", "",
                         "--overwrite"], "output"),
                       (["fit", str(tmp_path / "d.zarr"), "--model", ""], "model"),
                       (["update", "", str(tmp_path / "d.zarr")], "model"),
                       (["demo", ""], "demo folder")):
        capsys.readouterr()
        assert main(argv) == 2, argv
        assert f"the {role} path is empty" in one_error_line(capsys)
    assert list(here.iterdir()) == []
    assert here.exists()


def test_an_empty_input_or_name_is_refused_not_read_from_the_current_folder(tmp_path, capsys,
                                                                            monkeypatch):
    # fit "$DATA" with DATA unset: '' is the current folder, read as a Parquet folder (a
    # model fitted on whatever was there); --x '' said "d.zarr/ is a group, not an array"
    X, y = make_classes(n=200, p=3, k=2, seed=13)
    write_zarr(tmp_path / "d.zarr", X, y)
    here = tmp_path / "here"
    here.mkdir()
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "y": y}), str(here / "p.parquet"))
    assert main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m")]) == 0
    monkeypatch.chdir(here)
    m, d = str(tmp_path / "m"), str(tmp_path / "d.zarr")
    for argv, said in ((["fit", "", "--model", str(tmp_path / "m2")], "the input path is empty"),
                       (["fit", d, " ", "--model", str(tmp_path / "m2")], "the input path is empty"),
                       (["update", m, ""], "the input path is empty"),
                       (["project", m, "", "--output", str(tmp_path / "o.zarr")],
                        "the input path is empty"),
                       (["project", "", d, "--output", str(tmp_path / "o.zarr")],
                        "the model path is empty"),
                       (["fit", d, "--model", str(tmp_path / "m2"), "--boundary", ""],
                        "the boundary path is empty"),
                       (["fit", d, "--model", str(tmp_path / "m2"), "--x", ""], "--x is empty"),
                       (["update", m, d, "--y", " "], "--y is empty"),
                       (["fit", d, "--model", str(tmp_path / "m2"), "--label", ""],
                        "--label is empty"),
                       (["forget", m, ""], "the source path is empty"),
                       (["merge", m, ""], "the model to merge path is empty"),
                       (["info", ""], "the model or output path is empty"),
                       (["relocate", m, "", str(tmp_path)], "the OLD path is empty"),
                       (["run", ""], "the config path is empty")):
        before = sorted(p.name for p in tmp_path.rglob("*"))
        assert main([*argv, "--no-progress"] if argv[0] in ("fit", "update", "project")
                    else argv) == 2, argv
        assert said in one_error_line(capsys), argv
        assert sorted(p.name for p in tmp_path.rglob("*")) == before, argv


def test_the_package_names_every_error_and_imports_nothing_heavy():
    code = ("import sys, streamproj; heavy = [m for m in ('sklearn', 'dask', 'zarr', 'numpy') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    import streamproj
    from streamproj import errors

    assert sorted(streamproj._ERRORS) == sorted(errors.__all__)
    assert all(getattr(streamproj, name) is getattr(errors, name) for name in errors.__all__)


def test_every_argument_of_every_command_is_explained_in_its_help():
    from streamproj.cli import build_parser

    for name, sub in build_parser()._subcommands.items():
        for action in sub._actions:
            assert action.help, (name, action.dest)


def test_the_help_gives_the_defaults_the_commands_use():
    from streamproj.cli import build_parser

    commands = build_parser()._subcommands

    def helped(command, dest):
        return next(a.help for a in commands[command]._actions if a.dest == dest)

    # run's progress bars follow [run] progress first; a table's label is --y's name (y)
    assert "[run] progress" in helped("run", "progress")
    assert "default: the --y name" in helped("fit", "label")


@pytest.mark.parametrize("module", ["streamproj.cli", "streamproj._version"])
def test_a_ctrl_c_during_the_commands_imports_is_one_line_and_130(module):
    # deterministic: the import of the command line itself is interrupted; and of the
    # version, which ``import streamproj`` read (importlib.metadata: most of the 50 ms
    # before the command's guard) eagerly: a Ctrl-C there was a traceback
    code = textwrap.dedent(f"""
        import sys
        class Interrupt:
            def find_spec(self, name, path=None, target=None):
                if name == {module!r}:
                    raise KeyboardInterrupt
        sys.meta_path.insert(0, Interrupt())
        from streamproj._launch import main
        sys.exit(main())
    """)
    proc = subprocess.run([sys.executable, "-c", code, "info", "x"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 130
    assert proc.stderr == "streamproj: interrupted\n"
    import streamproj

    assert streamproj.__version__ == sp._version.__version__


def test_a_second_ctrl_c_while_the_first_is_said_is_still_one_line_and_130():
    # ``timeout -s INT`` signals the process and then its group: the second SIGINT came as
    # the command returned its 130, a traceback after "interrupted"
    code = textwrap.dedent("""
        import os, signal, sys
        from streamproj import _launch, cli
        def interrupted(args):
            raise KeyboardInterrupt  # the first Ctrl-C, during the command
        cli._info = interrupted
        said = cli.main
        def twice():
            status = said()
            os.kill(os.getpid(), signal.SIGINT)  # the second, as the first is reported
            return status
        cli.main = twice
        sys.exit(_launch.main())
    """)
    proc = subprocess.run([sys.executable, "-c", code, "info", "x"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 130
    assert proc.stderr == "streamproj: interrupted\n"


_FAULTS = textwrap.dedent("""
    import json, resource, sys
    import zarr
    from streamproj._launch import tune_allocator
    tuned = tune_allocator() if sys.argv[2] == "tune" else None
    X = zarr.open_array(sys.argv[1], mode="r")
    X[:]  # the first read: imports, codecs and first-touch costs out of the count
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        X[:]
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    print(json.dumps({"tuned": tuned, "faults": after - before}))
""")


def _faults(path, how, env):
    proc = subprocess.run([sys.executable, "-c", _FAULTS, str(path), how], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _transparent_huge_pages_always():
    try:
        return "[always]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"),
                    reason="tune_allocator sets glibc's malloc; other C libraries are left alone")
@pytest.mark.skipif(_transparent_huge_pages_always(),
                    reason="transparent huge pages 'always': the kernel faults in 2 MiB at a time")
def test_the_command_keeps_freed_chunk_buffers_instead_of_faulting_them_in_again(tmp_path):
    # A 34 MB chunk of bytes zstd cannot compress (both its buffers over glibc's largest
    # mmap threshold, 32 MiB): each read allocates the compressed and the decoded bytes
    # afresh, and with glibc's defaults every page of both is faulted in again (as with
    # 10,000 x 1,000 float32 chunks, 40 MB).
    rows = np.random.default_rng(0).integers(0, 256, size=(10_000, 3_400), dtype=np.uint8)
    zarr.create_array(str(tmp_path / "X.zarr"), data=rows, chunks=rows.shape)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "STREAMPROJ_MALLOC")}
    pages = rows.nbytes // 4096
    system = _faults(tmp_path / "X.zarr", "system", env)
    tuned = _faults(tmp_path / "X.zarr", "tune", env)
    assert tuned["tuned"] is True
    assert system["faults"] > 3 * pages  # both buffers, every read
    assert tuned["faults"] * 8 < system["faults"]  # kept and reused
    # the user's own malloc settings, and STREAMPROJ_MALLOC=system, are left alone
    for mine in ({"MALLOC_TRIM_THRESHOLD_": "131072"}, {"MALLOC_ARENA_MAX": "4"},
                 {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"},
                 {"STREAMPROJ_MALLOC": "system"}):
        assert _faults(tmp_path / "X.zarr", "tune", {**env, **mine})["tuned"] is False, mine


def test_info_of_a_model_against_another_model_is_refused_not_ignored(tmp_path, capsys):
    # --model is the model an output's drift is measured against; given with a model it was
    # silently ignored (exit 0), which reads as if two models had been compared
    X, y = make_classes(n=200, p=3, k=2, seed=13)
    write_zarr(tmp_path / "d.zarr", X, y)
    assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m") == 0
    capsys.readouterr()
    assert run("info", tmp_path / "m", "--model", tmp_path / "m") == 2
    assert "info compares an output (OUT) with a model" in one_error_line(capsys)


def test_a_singular_scatter_says_the_flag_on_the_command_line(tmp_path, capsys):
    # "use shrinkage (e.g. shrinkage='auto' or 0.1)": Python's keyword, to a command-line user
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    X = np.column_stack([X, X[:, 0] + X[:, 1]])  # a collinear column
    y = np.arange(40) % 2
    write_zarr(tmp_path / "d.zarr", X, y)
    assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m") == 2
    line = one_error_line(capsys)
    assert "--shrinkage auto on the command line" in line
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(("dtype", "offset"), [(np.int64, 2**60), (np.uint64, 2**64 - 2**20)])
def test_wide_integer_rows_are_projected_exactly_to_zarr(tmp_path, dtype, offset):
    # pass 2 cast 64-bit integers beyond 2^53 to float64 before the centre came off:
    # every coordinate written was off by up to the rounding of the rows (256 at 2^60)
    from conftest import exact_minus, two_pass, wide_integer_rows

    X, y, small = wide_integer_rows(offset, dtype, n=1000)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=333)
    assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m", "--n-components", 3) == 0
    model = sp.load(tmp_path / "m")
    within = two_pass(small, y)["within"]
    assert np.max(np.abs(model.stats_.within - within)) < 1e-14 * np.max(np.abs(within))
    assert run("project", tmp_path / "m", tmp_path / "d.zarr", "--output", tmp_path / "out.zarr") == 0
    got = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")["projection"][:]
    ref = exact_minus(X, model.center_) @ model.components_.T
    assert np.max(np.abs(got - ref)) < 1e-14 * np.max(np.abs(ref))


def test_inputs_are_read_in_the_sorted_order_of_their_names_as_the_help_says(tmp_path, capsys):
    # given 'b.zarr a.zarr', a.zarr's rows come first (the README and --help say so; a user
    # matching OUT's rows to the order typed got the wrong rows)
    X, y = make_classes(n=400, p=3, k=2, seed=21)
    write_zarr(tmp_path / "a.zarr", X[:150], y[:150])
    write_zarr(tmp_path / "b.zarr", X[150:], y[150:])
    assert run("fit", tmp_path / "b.zarr", tmp_path / "a.zarr", "--model", tmp_path / "m") == 0
    assert run("project", tmp_path / "m", tmp_path / "b.zarr", tmp_path / "a.zarr",
               "--output", tmp_path / "o.zarr") == 0
    out = zarr.open_group(str(tmp_path / "o.zarr"), mode="r")
    np.testing.assert_allclose(out["projection"][:], sp.load(tmp_path / "m").transform(X),
                               rtol=1e-12, atol=1e-12)
    ranges = [(s["url"].rsplit("/", 1)[-1], s["ranges"]) for s in out.attrs["streamproj"]["sources"]]
    assert ranges == [("a.zarr", [[0, 150, 0]]), ("b.zarr", [[0, 250, 150]])]
    capsys.readouterr()
    assert run("project", "--help") == 0
    assert "sorted order of their names" in " ".join(capsys.readouterr().out.split())


def test_project_refuses_labels_named_with_y_that_are_not_there(tmp_path, capsys):
    # 'project M d.zarr --y lable' wrote OUT without y, exit 0 (found by the jobs' adversary);
    # unnamed, the labels are read where there are some and left out where there are none
    X, y = make_classes(n=300, p=3, k=2, seed=4)
    g = write_zarr(tmp_path / "d.zarr", X, None)
    g.create_array("label", data=y, chunks=(100,))
    write_zarr(tmp_path / "fit.zarr", X, y)
    assert run("fit", tmp_path / "fit.zarr", "--model", tmp_path / "m") == 0
    capsys.readouterr()
    assert run("project", tmp_path / "m", tmp_path / "d.zarr", "--y", "lable",
               "--output", tmp_path / "o.zarr") == 2
    assert "has no array 'lable' (arrays: X, label)" in one_error_line(capsys)
    assert not (tmp_path / "o.zarr").exists()
    assert run("project", tmp_path / "m", tmp_path / "d.zarr", "--y", "label",
               "--output", tmp_path / "o.zarr") == 0
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "o.zarr"))["y"][:], y)
    assert run("project", tmp_path / "m", tmp_path / "d.zarr", "--output", tmp_path / "p.zarr") == 0
    assert "y" not in zarr.open_group(str(tmp_path / "p.zarr"))
    (tmp_path / "d.csv").write_text("a,b,c,label\n" + "\n".join(
        f"{r[0]},{r[1]},{r[2]},{v}" for r, v in zip(X, y, strict=True)) + "\n")
    capsys.readouterr()
    assert run("project", tmp_path / "m", tmp_path / "d.csv", "--y", "lable",
               "--output", tmp_path / "q.zarr") == 2
    assert "has no label column 'lable'" in one_error_line(capsys)
    assert not (tmp_path / "q.zarr").exists()


def test_a_row_too_large_to_project_is_named_itself(tmp_path, capsys):
    # "X rows from 0 are too large to project in float64" for a huge value in row 9 only
    X, y = make_classes(n=300, p=3, k=2, seed=8)
    write_zarr(tmp_path / "fit.zarr", X, y)
    assert run("fit", tmp_path / "fit.zarr", "--model", tmp_path / "m") == 0
    w = sp.load(tmp_path / "m").components_
    # a row whose coordinates overflow, and one whose coordinates are finite but whose
    # decision value (‖coef‖·z[0]) overflows: that was written as inf, with a warning
    for signs, what in ((np.sign(w[0]), "coordinates"), (np.sign(w[0]) * [1, 1, -1], None)):
        big = X.copy()
        big[109] = 1.7e308 * signs
        write_zarr(tmp_path / "d.zarr", big, y)
        capsys.readouterr()
        assert run("project", tmp_path / "m", tmp_path / "d.zarr", "--output",
                   tmp_path / "o.zarr") == 2
        line = one_error_line(capsys)
        assert "d.zarr/X row 109 is too large to project in float64" in line
        if what:
            assert f"its {what} overflow" in line
        assert not (tmp_path / "o.zarr").exists()
