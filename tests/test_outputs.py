"""Outputs appended to in their own frame: complete, no duplicates, rewritten past a drift, crash-safe."""

import json
import subprocess
import sys
import warnings
from functools import partial

import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import make_classes, on_row_reads, write_days, write_zarr
from test_faults import KILL_AT_STEP, leftovers, tree

import streamproj as sp
from streamproj import jobs, outputs, sources, store
from streamproj.cli import main
from streamproj.config import load_config
from streamproj.errors import OutputExistsError, SourceChangedError


@pytest.fixture
def days(tmp_path):
    X, y = make_classes(n=1200, p=4, k=3, seed=11)
    return write_days(tmp_path, X, y, days=4, chunk_rows=70)


def assert_rewritten_in_the_model_frame(d, rows):
    """OUT (d/o.zarr) is in the frame of the model d/m and holds ``rows`` projected in it."""
    frame = frame_of(d / "o.zarr")
    assert frame.model_id_ == sp.load(d / "m").model_id_
    np.testing.assert_allclose(store.open_output(d / "o.zarr")["projection"][:],
                               frame.transform(rows), rtol=1e-12, atol=1e-12)


def frame_of(out):
    group = store.open_output(out)
    return sp.BoundaryProjector.from_saved(*store.read_output_frame(group))


def test_append_after_each_update_keeps_the_frame_and_every_row_once(days):
    d, X, y = days
    (d / "in").mkdir()
    glob = str(d / "in" / "day-*.zarr")
    for night in range(4):  # one new store a night; the model moves, the output's frame does not
        (d / f"day-{night}.zarr").rename(d / "in" / f"day-{night}.zarr")
        if night == 0:
            jobs.fit_model(glob, d / "m")
        else:
            assert jobs.update_model(d / "m", glob)["status"] == "updated"
        rep = jobs.project_model(d / "m", glob, d / "o.zarr", mode="append")
        assert rep["output_action"] == ("written" if night == 0 else "appended")
        assert rep["rows_written"] == 300
        assert rep["rows"] == 300 * (night + 1)
        if night == 0:
            frame_id = store.open_output(d / "o.zarr").attrs["streamproj"]["model_id"]
        else:
            assert rep["drift_deg"] > 0
    again = jobs.project_model(d / "m", glob, d / "o.zarr", mode="append")
    assert again["output_action"] == "unchanged"
    assert again["rows_written"] == 0
    out = store.open_output(d / "o.zarr")
    attrs = out.attrs["streamproj"]
    assert attrs["model_id"] == frame_id  # the frame never changed
    frame = frame_of(d / "o.zarr")
    assert frame.model_id_ == frame_id
    # rows complete, no duplicates: the ranges tile the output, and every row is the
    # projection of its source row in the recorded frame
    proj = out["projection"][:]
    assert proj.shape == (1200, 2)
    covered = np.zeros(1200, int)
    for src in attrs["sources"]:
        i = int(src["url"].rsplit("day-", 1)[1].split(".")[0])
        for a, b, at in src["ranges"]:
            covered[at:at + b - a] += 1
            np.testing.assert_allclose(proj[at:at + b - a], frame.transform(X[i * 300 + a:i * 300 + b]),
                                       rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(out["y"][at:at + b - a], y[i * 300 + a:i * 300 + b])
            np.testing.assert_array_equal(out["predicted"][at:at + b - a],
                                          frame.predict(X[i * 300 + a:i * 300 + b]))
    assert (covered == 1).all()
    assert [h["action"] for h in attrs["history"]][:2] == ["written", "appended"]
    assert leftovers(d) == []


def test_grown_source_appends_only_its_new_rows(days):
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    jobs.project_model(d / "m", d / "day-0.zarr", d / "o.zarr", mode="append")
    group = zarr.open_group(str(d / "day-0.zarr"), mode="a")
    group["X"].resize((500, 4))
    group["y"].resize((500,))
    group["X"][300:] = X[300:500]
    group["y"][300:] = y[300:500]
    rep = jobs.project_model(d / "m", d / "day-0.zarr", d / "o.zarr", mode="append")
    assert rep["rows_written"] == 200
    assert rep["sources"][0]["rows_skipped"] == 300
    out = store.open_output(d / "o.zarr")
    np.testing.assert_allclose(out["projection"][:], frame_of(d / "o.zarr").transform(X[:500]),
                               rtol=1e-12, atol=1e-12)
    assert out.attrs["streamproj"]["sources"][0]["ranges"] == [[0, 300, 0], [300, 500, 300]]
    # a changed source is refused, the output untouched
    before = tree(d / "o.zarr")
    group["X"][5] = X[5] + 1
    group["X"].resize((600, 4))
    group["y"].resize((600,))
    group["X"][500:] = X[500:600]
    group["y"][500:] = y[500:600]
    with pytest.raises(SourceChangedError, match="day-0.zarr"):
        jobs.project_model(d / "m", d / "day-0.zarr", d / "o.zarr", mode="append")
    assert tree(d / "o.zarr") == before


def test_drift_past_the_threshold_rewrites_in_the_new_frame(days):
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    jobs.project_model(d / "m", d / "day-0.zarr", d / "o.zarr", mode="append")
    jobs.update_model(d / "m", [d / "day-1.zarr", d / "day-2.zarr"])
    drift = jobs.output_info(d / "o.zarr")["model"]["drift_deg"]
    assert drift > 0.01
    # below the threshold: appended in the old frame
    low = jobs.project_model(d / "m", d / "day-1.zarr", d / "o.zarr", mode="append",
                             reproject_above=drift * 2)
    assert low["output_action"] == "appended"
    high = jobs.project_model(d / "m", [d / "day-0.zarr", d / "day-1.zarr"], d / "o.zarr",
                              mode="append", reproject_above=drift / 2)
    assert high["output_action"] == "rewritten"
    assert "moved" in high["reason"]
    model = sp.load(d / "m")
    out = store.open_output(d / "o.zarr")
    assert out.attrs["streamproj"]["model_id"] == model.model_id_
    np.testing.assert_allclose(out["projection"][:], model.transform(X[:600]), rtol=1e-12, atol=1e-12)
    info = jobs.output_info(d / "o.zarr")
    assert info["model"]["drift_deg"] < 1e-6
    assert info["frame"]["model_version"] == model.meta_["version"]
    # append without a threshold never rewrites silently when the frame cannot hold the model
    jobs.fit_model(d / "day-3.zarr", d / "m2")
    write_zarr(d / "two.zarr", X[:300, :], (y[:300] > 0).astype(int), chunk_rows=70)
    jobs.fit_model(d / "two.zarr", d / "m2", overwrite=True)
    with pytest.raises(OutputExistsError, match="classes changed"):
        jobs.project_model(d / "m2", d / "day-2.zarr", d / "o.zarr", mode="append")


def test_append_to_a_0_1_output_rewrites_or_refuses(days):
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    model = sp.load(d / "m")
    jobs.project(model, X[:300], d / "mem.zarr", y=y[:300])  # rows from memory: no sources
    with pytest.raises(OutputExistsError, match="no frame or source rows"):
        jobs.project_model(d / "m", d / "day-0.zarr", d / "mem.zarr", mode="append")
    rep = jobs.project_model(d / "m", d / "day-0.zarr", d / "mem.zarr", mode="auto")
    assert rep["output_action"] == "rewritten"
    # rows from memory said to come from a file: that file's rows cannot be checked, so an
    # append of it would add them a second time: refused
    rows = zarr.open_group(str(d / "day-0.zarr"), mode="r")
    jobs.project(model, rows["X"][:], d / "named.zarr", y=rows["y"][:], source=d / "day-0.zarr")
    with pytest.raises(OutputExistsError, match="written from rows in memory"):
        jobs.project_model(d / "m", d / "day-0.zarr", d / "named.zarr", mode="append")
    assert store.open_output(d / "named.zarr")["projection"].shape[0] == 300


def test_0_1_outputs_with_coords_stay_readable(days):
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    jobs.project_model(d / "m", d / "day-0.zarr", d / "o.zarr")
    # what 0.1 wrote: the coordinates under "coords", no frame, no coordinate variables
    old = zarr.open_group(str(d / "old.zarr"), mode="w")
    src = store.open_output(d / "o.zarr")
    old.attrs.update({"streamproj": {k: v for k, v in src.attrs["streamproj"].items()
                                     if k in ("model_id", "components", "center", "classes")},
                      "complete": True})
    old.create_array("coords", data=src["projection"][:], chunks=(70, 2), dimension_names=("row", "component"))
    old.create_array("predicted", data=src["predicted"][:], chunks=(70,), dimension_names=("row",))
    assert store.open_output(d / "old.zarr")["coords"].shape == (300, 2)
    info = jobs.output_info(d / "old.zarr")
    assert info["rows"] == 300
    assert info["model"]["drift_deg"] is None
    from streamproj.plot.reading import coordinates

    np.testing.assert_array_equal(coordinates(store.open_output(d / "old.zarr"))[:], src["projection"][:])


def test_decision_only_when_asked_or_few_classes(tmp_path):
    X, y = make_classes(n=400, p=20, k=18, seed=2)
    write_zarr(tmp_path / "many.zarr", X, y, chunk_rows=100)
    jobs.fit_model(tmp_path / "many.zarr", tmp_path / "m", params={"n_components": 2})
    jobs.project_model(tmp_path / "m", tmp_path / "many.zarr", tmp_path / "o.zarr")
    assert "decision" not in store.open_output(tmp_path / "o.zarr")
    jobs.project_model(tmp_path / "m", tmp_path / "many.zarr", tmp_path / "o.zarr", overwrite=True,
                       decision=True)
    out = store.open_output(tmp_path / "o.zarr")
    assert out["decision"].shape == (400, 18)
    model = sp.load(tmp_path / "m")
    np.testing.assert_array_equal(out["predicted"][:], model.predict(X))


def test_xarray_selects_by_class_label_and_axis_name(tmp_path):
    """The README's example, run as written."""
    X, y = make_classes(n=500, p=4, k=3, seed=4)
    write_zarr(tmp_path / "data.zarr", X, np.arange(3)[y], chunk_rows=100)
    jobs.fit_model(tmp_path / "data.zarr", tmp_path / "model")
    jobs.project_model(tmp_path / "model", tmp_path / "data.zarr", tmp_path / "out.zarr")
    # --- README example ---
    ds = xr.open_zarr(tmp_path / "out.zarr")                 # consolidated metadata, lazy
    z = ds.projection.sel(component="Fisher direction 1")    # an axis by name
    score = ds.decision.sel({"class": 2})                    # a class's decision value by label
    mine = ds.projection.where((ds.predicted == 2).compute(), drop=True)  # rows predicted as 2
    # ---
    model = sp.load(tmp_path / "model")
    np.testing.assert_allclose(z.values, model.transform(X)[:, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(score.values, model.decision_function(X)[:, 2], rtol=1e-9, atol=1e-9)
    assert mine.sizes["row"] == int((model.predict(X) == 2).sum())


# ------------------------------------------------------------ kills
def _run_killed(k, argv):
    proc = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(k), "0", *map(str, argv)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode == 9:
        return None
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split("STEPS")[-1])


@pytest.mark.slow
def test_sigkill_at_every_commit_step_of_an_append(days):
    d, X, y = days
    assert main(["fit", str(d / "day-0.zarr"), "--model", str(d / "m")]) == 0
    assert main(["project", str(d / "m"), str(d / "day-0.zarr"), "--output", str(d / "o.zarr")]) == 0
    assert main(["update", str(d / "m"), str(d / "day-1.zarr")]) == 0
    template = tree(d / "o.zarr")
    frame = frame_of(d / "o.zarr")
    argv = ["project", d / "m", d / "day-0.zarr", d / "day-1.zarr", "--output", d / "o.zarr", "--append"]
    k = 1
    while True:
        steps = _run_killed(k, argv)
        if steps is not None:
            break
        # killed: the output is exactly as it was (or, when the kill fell after the swap, complete)
        state = tree(d / "o.zarr")
        if state != template:
            assert store.open_output(d / "o.zarr")["projection"].shape == (600, 2)
        # the rerun completes it, and cleans up what the kill left
        assert _run_killed(10_000, argv) is not None
        out = store.open_output(d / "o.zarr")
        np.testing.assert_allclose(out["projection"][:], frame.transform(X[:600]), rtol=1e-12, atol=1e-12)
        assert leftovers(d) == [], (k, leftovers(d))
        # back to the one-day output for the next kill
        main(["project", str(d / "m"), str(d / "day-0.zarr"), "--output", str(d / "o.zarr"), "--overwrite"])
        zarr_out = store.open_output(d / "o.zarr")
        assert zarr_out["projection"].shape == (300, 2)
        frame = frame_of(d / "o.zarr")
        template = tree(d / "o.zarr")
        k += 1
    assert k >= 2  # the swap and the removal of the old copy were each killed


def _interrupted_between_the_renames(out):
    """OUT as a replacement killed between its two renames left it (no atomic exchange)."""
    out.rename(out.parent / f".{out.name}.old-{store._HOST}-99999999-0123abcd")


@pytest.mark.parametrize("how", ["append", "nightly"])
def test_an_append_rerun_after_a_kill_between_the_renames_restores_and_appends(days, how):
    # the reader's message says "rerun the command that writes it (the old output is
    # restored first)": the append took the missing OUT as nothing there, restored it
    # inside the write, then refused it as existing ("pass --overwrite")
    d, X, y = days
    (d / "in").mkdir()
    for day in ("day-0.zarr", "day-1.zarr"):
        (d / day).rename(d / "in" / day)
    config = _nightly_config(d)
    jobs.run_job(load_config(config)) if how == "nightly" else (
        jobs.fit_model(d / "in" / "day-0.zarr", d / "m"),
        jobs.project_model(d / "m", d / "in" / "day-0.zarr", d / "o.zarr"))
    _interrupted_between_the_renames(d / "o.zarr")
    if how == "nightly":
        (d / "day-2.zarr").rename(d / "in" / "day-2.zarr")
        rep = jobs.run_job(load_config(config))["steps"][1]
    else:
        rep = jobs.project_model(d / "m", str(d / "in" / "day-*.zarr"), d / "o.zarr",
                                 mode="append")
    assert rep["output_action"] == "appended"
    assert leftovers(d) == []
    frame = frame_of(d / "o.zarr")
    rows = X[:900] if how == "nightly" else X[:600]
    np.testing.assert_allclose(store.open_output(d / "o.zarr")["projection"][:],
                               frame.transform(rows), rtol=1e-12, atol=1e-12)


def test_json_report_of_append(days, capsys):
    d, X, y = days
    assert main(["fit", str(d / "day-0.zarr"), "--model", str(d / "m"), "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert fit["command"] == "fit"
    assert fit["sources"][0]["rows_merged"] == 300
    argv = ["project", str(d / "m"), str(d / "day-*.zarr"), "--output", str(d / "o.zarr"), "--append",
            "--json"]
    assert main(argv) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["output_action"] == "written"
    assert rep["rows"] == 1200
    assert main(argv) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["output_action"] == "unchanged"
    assert {"timings", "versions", "sources", "drift_deg"} <= set(rep)
    assert all(s["rows_skipped"] == 300 for s in rep["sources"])


def _nightly_config(d, mode="append", threshold=None):
    path = d / "job.toml"
    lines = ["[input]", f'paths = ["{d / "in"}/day-*.zarr"]', "[model]", f'path = "{d / "m"}"',
             'mode = "auto"', "[output]", f'path = "{d / "o.zarr"}"', f'mode = "{mode}"']
    if threshold is not None:
        lines.append(f"reproject_above_degrees = {threshold}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _count_reads(monkeypatch, n_features):
    """Count reads of each X chunk (row start), by zarr or by streamproj.direct, in any thread."""
    reads = {}

    def count(where, rows):
        key = (where, rows.start if isinstance(rows, slice) else None)
        reads[key] = reads.get(key, 0) + 1

    on_row_reads(monkeypatch, n_features, count)
    return reads


def test_nightly_run_reads_each_new_row_once_and_equals_two_steps(days, monkeypatch):
    d, X, y = days
    (d / "in").mkdir()
    config = _nightly_config(d)
    for night in range(3):
        (d / f"day-{night}.zarr").rename(d / "in" / f"day-{night}.zarr")
        if night == 2:
            # fingerprints read the chunks holding the first and last 10 rows
            monkeypatch.setattr(sources, "FINGERPRINT_ROWS", 10)
            reads = _count_reads(monkeypatch, X.shape[1])
        report = jobs.run_job(load_config(config))
        if night == 0:
            assert [s["command"] for s in report["steps"]] == ["fit", "project"]
            continue
        update, project = report["steps"]
        assert update["status"] == "updated"
        assert update["rows_added"] == 300
        assert project["output_action"] == "appended"
        assert project["one_read"] is True
        assert project["rows_written"] == 300
        # the report's model is the one written (solved in memory, not read back)
        saved = sp.load(d / "m")
        assert project["model_id"] == saved.model_id_
        assert project["versions"]["model"] == saved.meta_["version"] == update["version"]
        assert project["drift_deg"] == jobs._frame_drift(frame_of(d / "o.zarr"), saved)[0]
    monkeypatch.undo()
    # night 2 read each chunk of the one new store once for the model and the output
    # (5 chunks of 70 rows cover 300), the fingerprint both ledgers record included
    new = {k[1]: v for k, v in reads.items() if "day-2" in k[0] and k[1] is not None}
    assert new == {0: 1, 70: 1, 140: 1, 210: 1, 280: 1}
    # the same as the two-step path: the model equals one fit of all rows, the output
    # holds every row once, projected in its recorded (first night's) frame
    whole = sp.BoundaryProjector().fit(X[:900], y[:900])
    model = sp.load(d / "m")
    np.testing.assert_allclose(model.coef_, whole.coef_, rtol=1e-10)
    out = store.open_output(d / "o.zarr")
    frame = frame_of(d / "o.zarr")
    assert out["projection"].shape == (900, 2)
    for src in out.attrs["streamproj"]["sources"]:
        i = int(src["url"].rsplit("day-", 1)[1].split(".")[0])
        for a, b, at in src["ranges"]:
            np.testing.assert_allclose(out["projection"][at:at + b - a],
                                       frame.transform(X[i * 300 + a:i * 300 + b]),
                                       rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(out["y"][at:at + b - a], y[i * 300 + a:i * 300 + b])
    assert leftovers(d) == []


@pytest.mark.parametrize("mode", ["auto", "append"])
def test_nightly_run_past_the_threshold_rewrites(days, mode):
    d, X, _y = days
    (d / "in").mkdir()
    config = _nightly_config(d, mode=mode, threshold=1e-9)
    for night in range(2):
        (d / f"day-{night}.zarr").rename(d / "in" / f"day-{night}.zarr")
        report = jobs.run_job(load_config(config))
    # the model this night's update made is past the threshold: rewritten the same night
    assert report["steps"][1]["output_action"] == "rewritten"
    assert report["steps"][1]["drift_deg"] > 1e-9
    assert_rewritten_in_the_model_frame(d, X[:600])


def test_a_nightly_rewrite_whose_output_holds_a_users_file_leaves_the_model_as_it_was(days):
    # the output's write refused it only after the model step had committed the new rows
    d, X, _y = days
    (d / "in").mkdir()
    config = _nightly_config(d, mode="rewrite")
    config.write_text(config.read_text() + "overwrite = true\n")
    (d / "day-0.zarr").rename(d / "in" / "day-0.zarr")
    jobs.run_job(load_config(config))
    (d / "day-1.zarr").rename(d / "in" / "day-1.zarr")
    (d / "o.zarr" / "notes.txt").write_text("mine")
    before = tree(d / "m"), tree(d / "o.zarr")
    with pytest.raises(OutputExistsError, match="also holds notes.txt"):
        jobs.run_job(load_config(config))
    assert (tree(d / "m"), tree(d / "o.zarr")) == before


@pytest.mark.parametrize("why", ["read-only", "a file of the user's"])
def test_a_night_with_nothing_new_leaves_an_output_it_could_not_replace_unchanged(days, why):
    # the checks that refuse such an output before the model step ran before planning: a
    # night with no new rows was refused on an archived (chmod -R a-w) output, which it
    # would not have written; with new rows it is refused, and the model left as it was
    d, _X, _y = days
    (d / "in").mkdir()
    config = _nightly_config(d)
    (d / "day-0.zarr").rename(d / "in" / "day-0.zarr")
    jobs.run_job(load_config(config))
    if why == "read-only":
        (d / "o.zarr").chmod(0o555)
    else:
        (d / "o.zarr" / "notes.txt").write_text("mine")
    try:
        report = jobs.run_job(load_config(config))
        assert report["steps"][-1]["output_action"] == "unchanged"
        (d / "day-1.zarr").rename(d / "in" / "day-1.zarr")
        before = tree(d / "m"), tree(d / "o.zarr")
        with pytest.raises(OutputExistsError, match="not writable by you" if why == "read-only"
                           else "also holds notes.txt"):
            jobs.run_job(load_config(config))
        assert (tree(d / "m"), tree(d / "o.zarr")) == before
    finally:
        (d / "o.zarr").chmod(0o755)

def test_nightly_run_with_an_output_behind_the_model_appends_what_it_lacks(days):
    d, X, y = days
    (d / "in").mkdir()
    config = _nightly_config(d)
    (d / "day-0.zarr").rename(d / "in" / "day-0.zarr")
    jobs.run_job(load_config(config))
    (d / "day-1.zarr").rename(d / "in" / "day-1.zarr")
    jobs.update_model(d / "m", str(d / "in" / "day-*.zarr"))  # the model moves on alone
    (d / "day-2.zarr").rename(d / "in" / "day-2.zarr")
    report = jobs.run_job(load_config(config))
    update, project = report["steps"]
    assert update["rows_added"] == 300
    assert project["rows_written"] == 600
    assert "one_read" not in project
    frame = frame_of(d / "o.zarr")
    np.testing.assert_allclose(np.sort(store.open_output(d / "o.zarr")["projection"][:, 0]),
                               np.sort(frame.transform(X[:900])[:, 0]), rtol=1e-12, atol=1e-12)


def test_a_rewrite_in_the_new_frame_keeps_every_row_the_output_held(days):
    # append day-1 (OUT holds days 0-1), then rewrite past the threshold given day-2 only:
    # the rewrite must hold days 0, 1 and 2 (it kept only day-2 before)
    d, X, _y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    jobs.project_model(d / "m", d / "day-0.zarr", d / "o.zarr")
    jobs.update_model(d / "m", [d / "day-1.zarr", d / "day-2.zarr"])
    jobs.project_model(d / "m", d / "day-1.zarr", d / "o.zarr", mode="append")
    rep = jobs.project_model(d / "m", d / "day-2.zarr", d / "o.zarr", mode="append",
                             reproject_above=0.0)
    assert rep["output_action"] == "rewritten"
    assert rep["rows"] == 900
    assert_rewritten_in_the_model_frame(d, X[:900])


def test_a_rewrite_that_cannot_read_a_held_source_is_refused_untouched(days):
    d, _X, _y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    jobs.project_model(d / "m", d / "day-0.zarr", d / "o.zarr")
    jobs.update_model(d / "m", d / "day-1.zarr")
    before = tree(d / "o.zarr")
    (d / "day-0.zarr").rename(d / "moved.zarr")
    with pytest.raises(sp.errors.InputError, match=r"cannot rewrite .*o.zarr.* holds 300 rows of "
                                                   r".*day-0.zarr, which cannot be read now"):
        jobs.project_model(d / "m", d / "day-1.zarr", d / "o.zarr", mode="append",
                           reproject_above=0.0)
    assert tree(d / "o.zarr") == before
    assert leftovers(d) == []


def test_project_reads_each_chunk_once_with_the_fingerprint_it_records(days, monkeypatch):
    """The edge rows of the fingerprint come from the pass's own reads, and match a fresh one."""
    d, X, _y = days
    src = d / "day-0.zarr"
    jobs.fit_model(str(src), d / "m")
    monkeypatch.setattr(sources, "FINGERPRINT_ROWS", 10)
    reads = _count_reads(monkeypatch, X.shape[1])
    report = jobs.project_model(d / "m", [str(src)], d / "o.zarr")
    monkeypatch.undo()
    assert {k[1]: v for k, v in reads.items() if k[1] is not None} == {
        0: 1, 70: 1, 140: 1, 210: 1, 280: 1}
    monkeypatch.setattr(sources, "FINGERPRINT_ROWS", 10)
    fresh = sources.open_source(str(src)).fingerprint()
    (entry,) = store.open_output(d / "o.zarr").attrs["streamproj"]["sources"]
    assert entry["fingerprint"] == fresh
    # the model id in the attributes, the frame and the report is the model's own
    model = sp.load(d / "m")
    out = store.open_output(d / "o.zarr")
    assert out.attrs["streamproj"]["model_id"] == report["model_id"] == model.model_id_
    assert frame_of(d / "o.zarr").model_id_ == model.model_id_


@pytest.mark.parametrize("fails", ["pass", "frame"])
def test_a_failure_of_the_pass_or_the_frame_leaves_nothing(days, monkeypatch, fails):
    """The model id is hashed in a side thread: whichever step fails, nothing is left behind."""
    d, _X, _y = days
    jobs.fit_model(str(d / "day-0.zarr"), d / "m")

    def failing_frame(group, record):
        msg = "output o.zarr: no space left on device (injected)"
        raise store.StorageError(msg)

    def failing_pass(*args, **kwargs):
        msg = "row 3 of day-0.zarr is bad (injected)"
        raise sp.errors.InputError(msg)

    if fails == "frame":
        monkeypatch.setattr(store, "write_output_frame", failing_frame)
    else:
        monkeypatch.setattr(jobs, "compute_with_progress", failing_pass)
    error = store.StorageError if fails == "frame" else sp.errors.InputError
    with pytest.raises(error, match="injected"):
        jobs.project_model(d / "m", [str(d / "day-0.zarr")], d / "o.zarr")
    assert not (d / "o.zarr").exists()
    assert [p.name for p in d.iterdir() if p.name.startswith(".o.zarr")] == []


@pytest.mark.parametrize("when", ["during", "after"])
def test_a_frame_writer_outliving_a_failed_output_leaves_nothing(tmp_path, monkeypatch, when):
    """A frame written from another thread: waited for when the output fails, refused after."""
    import threading
    import time

    X, y = make_classes(n=300, p=4, k=2, seed=3)
    record = sp.BoundaryProjector().fit(X, y).to_state()
    entered, failed, errors = threading.Event(), threading.Event(), []
    original = store._write_frame

    def slow(group, rec):
        entered.set()
        time.sleep(0.3)  # still writing when the output fails
        original(group, rec)

    monkeypatch.setattr(store, "_write_frame", slow)

    def writer(group):
        if when == "after":
            failed.wait(5)
        try:
            store.write_output_frame(group, record)
        except RuntimeError as exc:
            errors.append(exc)

    threads = []

    def failing_pass():
        with store.output_group(tmp_path / "o.zarr") as group:
            threads.append(threading.Thread(target=writer, args=(group,)))
            threads[0].start()
            if when == "during":
                entered.wait(5)
            msg = "injected failure of the pass"
            raise ValueError(msg)

    with pytest.raises(ValueError, match="injected"):
        failing_pass()
    failed.set()
    (thread,) = threads
    thread.join(5)
    assert list(tmp_path.iterdir()) == []
    assert [str(e) for e in errors] == (["the output is closed (finished, or failed): nothing more is written to it"] if when == "after" else [])


def test_a_source_rewritten_during_the_pass_is_caught_by_the_next_append(days, monkeypatch):
    """OUT records its sources' file listings as they were before their rows were read."""
    d, X, _y = days
    src = d / "day-0.zarr"
    jobs.fit_model(str(src), d / "m")
    original = jobs.compute_with_progress

    def rewritten_during_the_pass(*args, **kwargs):
        values = original(*args, **kwargs)
        zarr.open_group(str(src), mode="r+")["X"][:] = X[:300] * 2  # another writer, meanwhile
        return values

    monkeypatch.setattr(jobs, "compute_with_progress", rewritten_during_the_pass)
    jobs.project_model(d / "m", [str(src)], d / "o.zarr")
    monkeypatch.undo()
    with pytest.raises(SourceChangedError):
        jobs.project_model(d / "m", [str(src)], d / "o.zarr", mode="append")


@pytest.mark.parametrize("step", ["fit", "update", "append"])
def test_a_source_rewritten_while_a_job_reads_it_is_caught_by_the_next_job(days, monkeypatch, step):
    """Ledgers record listings and fingerprints as they were before the rows were read."""
    d, X, _y = days
    src, new = d / "day-0.zarr", d / "day-1.zarr"
    if step != "fit":
        jobs.fit_model(str(src), d / "m")
        jobs.project_model(d / "m", [str(src)], d / "o.zarr")
    target = src if step == "fit" else new
    owner, wrapped = (outputs, "write_arrays") if step == "append" else (jobs, "accumulate")
    original = getattr(owner, wrapped)

    def rewritten_meanwhile(*args, **kwargs):
        values = original(*args, **kwargs)
        zarr.open_group(str(target), mode="r+")["X"][:] = X[:300] * 2  # another writer
        return values

    monkeypatch.setattr(owner, wrapped, rewritten_meanwhile)
    if step == "fit":
        jobs.fit_model(str(src), d / "m")
    elif step == "update":
        jobs.update_model(d / "m", str(new))
    else:
        jobs.project_model(d / "m", [str(new)], d / "o.zarr", mode="append")
    monkeypatch.undo()
    again = (partial(jobs.project_model, d / "m", [str(new)], d / "o.zarr", mode="append")
             if step == "append" else partial(jobs.update_model, d / "m", str(target)))
    with pytest.raises(SourceChangedError):  # not "merged before, skipped" for ever after
        again()


def _text_store(path, X, labels, chunk_rows=70):
    group = zarr.open_group(str(path), mode="w")
    group.create_array("X", data=X, chunks=(chunk_rows, X.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Zarr: fixed-width text has no v3 spec yet
        group.create_array("y", data=labels, chunks=(chunk_rows,))


def test_text_labels_from_parquet_are_projected_plotted_and_read_back(tmp_path):
    """Parquet text labels (object per chunk) become Zarr strings; plots and xarray read them."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    X, y = make_classes(n=500, p=3, k=3, seed=5)
    names = np.array(["cat", "dog", "a much longer class name"])[y]
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(label=names)
    frame.to_parquet(tmp_path / "rows.parquet", row_group_size=120)
    assert main(["fit", str(tmp_path / "rows.parquet"), "--y", "label",
                 "--model", str(tmp_path / "m")]) == 0
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "rows.parquet"), "--y", "label",
                 "--output", str(tmp_path / "o.zarr")]) == 0
    ds = xr.open_zarr(tmp_path / "o.zarr")
    assert ds["y"].values.tolist() == names.tolist()
    model = sp.load(tmp_path / "m")
    assert ds["predicted"].values.tolist() == model.predict(frame[["a", "b", "c"]]).tolist()
    for figure in ("p.png", "v.html"):
        assert main(["plot", str(tmp_path / "o.zarr"), "--output", str(tmp_path / figure)]) == 0
    accuracy, _ = sp.plot.projection_scores(str(tmp_path / "o.zarr"))
    assert accuracy == np.mean(model.predict(frame[["a", "b", "c"]]) == names)


@pytest.fixture
def short_then_long(tmp_path):
    """OUT (o.zarr) of the first 200 rows, labelled cat/dog; b.zarr's rows add 'elephant'."""
    X, y = make_classes(n=400, p=3, k=2, seed=6)
    _text_store(tmp_path / "a.zarr", X[:200], np.array(["cat", "dog"])[y[:200]])
    _text_store(tmp_path / "b.zarr", X[200:], np.array(["cat", "elephant"])[y[200:]])
    jobs.fit_model([str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")], tmp_path / "m")
    jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr")], tmp_path / "o.zarr")
    return y


def test_appended_text_labels_longer_than_the_first_are_kept_whole(tmp_path, short_then_long):
    y = short_then_long
    report = jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")],
                                tmp_path / "o.zarr", mode="append")
    assert report["output_action"] == "appended"
    out = store.open_output(tmp_path / "o.zarr")
    assert set(out["y"][:].tolist()) == {"cat", "dog", "elephant"}
    assert out["y"][200:].tolist() == np.array(["cat", "elephant"])[y[200:]].tolist()


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")
def test_an_old_output_with_fixed_width_labels_refuses_a_longer_one_and_is_untouched(
        tmp_path, short_then_long):
    """Outputs written before variable-length strings hold text in a fixed width."""
    # as streamproj wrote it before: y in three characters
    old = zarr.open_group(str(tmp_path / "o.zarr"), mode="r+")
    labels = old["y"][:].astype("U3")
    del old["y"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old.create_array("y", data=labels, chunks=(70,), dimension_names=("row",))
        zarr.consolidate_metadata(str(tmp_path / "o.zarr"))
    before = tree(tmp_path / "o.zarr")
    with pytest.raises(sp.errors.InputError, match=r"labels in 3 characters.*'elephant' at row \d+"):
        jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")],
                           tmp_path / "o.zarr", mode="append")
    assert tree(tmp_path / "o.zarr") == before


def test_text_label_chunks_are_checked_and_named_by_row():
    from streamproj.outputs import _text_block

    info = [{"array-location": [(100, 103)]}]
    assert _text_block(np.array([b"cat", b"dog", b"x"]), "y", block_info=info).tolist() == [
        "cat", "dog", "x"]
    assert _text_block(np.array(["cat", "dog"], dtype=object), "y").dtype.kind == "U"
    with pytest.raises(sp.errors.InputError, match=r"y label b'\\xff' at row 102 of the rows being written is not UTF-8"):
        _text_block(np.array([b"a", b"b", b"\xff"]), "y", block_info=info)
    with pytest.raises(sp.errors.InputError,
                       match=r"text labels in some rows but int64 labels in others \(at row 100 "):
        _text_block(np.array([1, 2, 3], dtype=np.int64), "y", block_info=info)
    with pytest.raises(sp.errors.BadValuesError, match="row 101"):
        _text_block(np.array(["a", None, "b"], dtype=object), "y", block_info=info)
    with pytest.raises(sp.errors.InputError, match="'horse' at row 101 of the rows being written"):
        _text_block(np.array(["cat", "horse"]), "y", np.dtype("U3"), block_info=info)


def test_text_labels_appended_to_numeric_ones_are_refused_and_out_untouched(tmp_path):
    """Parquet text labels (typed per chunk) and Zarr ones, onto an output of int labels."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    X, y = make_classes(n=400, p=3, k=2, seed=8)
    write_zarr(tmp_path / "a.zarr", X[:200], y[:200], chunk_rows=70)
    jobs.fit_model(str(tmp_path / "a.zarr"), tmp_path / "m")
    jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr")], tmp_path / "o.zarr")
    frame = pd.DataFrame(X[200:], columns=["x0", "x1", "x2"]).assign(y=["7", "8"] * 100)
    frame.to_parquet(tmp_path / "b.parquet", row_group_size=70)
    _text_store(tmp_path / "c.zarr", X[200:], np.array(["7", "8"] * 100))
    before = tree(tmp_path / "o.zarr")
    for new, kind in (("b.parquet", "text"), ("c.zarr", "<U1")):
        with pytest.raises(sp.errors.InputError, match=kind):
            jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr"), str(tmp_path / new)],
                               tmp_path / "o.zarr", mode="append", features=["x0", "x1", "x2"]
                               if new.endswith("parquet") else None)
        assert tree(tmp_path / "o.zarr") == before


def test_labels_an_output_cannot_hold_exactly_are_refused_and_out_untouched(tmp_path):
    """0.5 onto int64 labels was stored as 0; labels it holds exactly (1.0 as 1) are appended."""
    X, y = make_classes(n=600, p=3, k=2, seed=9)
    write_zarr(tmp_path / "a.zarr", X[:200], y[:200], chunk_rows=70)
    write_zarr(tmp_path / "half.zarr", X[200:400], y[200:400] + 0.5, chunk_rows=70)
    write_zarr(tmp_path / "whole.zarr", X[400:], y[400:].astype(np.float64), chunk_rows=70)
    jobs.fit_model(str(tmp_path / "a.zarr"), tmp_path / "m")
    jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr")], tmp_path / "o.zarr")
    before = tree(tmp_path / "o.zarr")
    with pytest.raises(sp.errors.InputError, match=r"OUT holds its y labels as int64, which cannot "
                                                   r"hold the label [01]\.5 at row \d+ of the rows "
                                                   r"being written \(it would be stored as [01]\)"):
        jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr"), str(tmp_path / "half.zarr")],
                           tmp_path / "o.zarr", mode="append")
    assert tree(tmp_path / "o.zarr") == before
    jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr"), str(tmp_path / "whole.zarr")],
                       tmp_path / "o.zarr", mode="append")
    stored = zarr.open_group(str(tmp_path / "o.zarr"), mode="r")["y"]
    assert stored.dtype == np.int64
    np.testing.assert_array_equal(stored[:], np.concatenate([y[:200], y[400:]]))


def test_a_label_chunk_is_stored_exactly_or_refused_by_row():
    from streamproj.outputs import _numbers_block

    info = [{"array-location": [(100, 103)]}]
    assert _numbers_block(np.array([1.0, 0.0, 1.0]), "y", np.int64, info).dtype == np.int64
    with pytest.raises(sp.errors.InputError, match=r"cannot hold the label 9007199254740993 at "
                                                   r"row 102 .*stored as 9007199254740992"):
        _numbers_block(np.array([1, 2, 2**53 + 1]), "y", np.float64, info)
    with pytest.raises(sp.errors.InputError, match=r"as int8, .* label 300 at row 101"):
        _numbers_block(np.array([1, 300, 2]), "predicted", np.int8, info)
    assert _numbers_block(np.array([3, 4]), "y", np.int64).dtype == np.int64


def test_labels_of_another_kind_than_the_classes_are_refused(tmp_path):
    """Int labels 0/1 projected by a model of text classes "0"/"1": y never equalled predicted."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    X, y = make_classes(n=400, p=3, k=2, seed=10)
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"])
    frame.assign(label=y.astype(str)).to_parquet(tmp_path / "text.parquet", row_group_size=70)
    frame.assign(label=y == 1).to_parquet(tmp_path / "bool.parquet", row_group_size=70)
    write_zarr(tmp_path / "int.zarr", X, y, chunk_rows=70)
    jobs.fit_model(str(tmp_path / "text.parquet"), tmp_path / "mt", label="label")
    jobs.fit_model(str(tmp_path / "int.zarr"), tmp_path / "mi")
    cases = [("mt", "int.zarr", {}, r"int\.zarr/y holds numbers \(int64\) but the model's classes "
                                    r"are text \('0', '1'\)"),
             ("mi", "text.parquet", {"label": "label"}, r"holds text \('[01]' at row \d+\) but the "
                                                        r"model's classes are numbers \(0, 1\)"),
]
    for model, data, options, message in cases:
        with pytest.raises(sp.errors.InputError, match=message):
            jobs.project_model(tmp_path / model, [str(tmp_path / data)], tmp_path / "o.zarr",
                               **options)
        assert not (tmp_path / "o.zarr").exists()
    jobs.project_model(tmp_path / "mt", [str(tmp_path / "text.parquet")], tmp_path / "o.zarr",
                       label="label")
    out = zarr.open_group(str(tmp_path / "o.zarr"), mode="r")
    assert np.mean(out["y"][:] == out["predicted"][:]) > 0.8
    # booleans beside numbers compare as numpy compares them (True == 1): written
    jobs.project_model(tmp_path / "mi", [str(tmp_path / "bool.parquet")], tmp_path / "ob.zarr",
                       label="label")
    out = zarr.open_group(str(tmp_path / "ob.zarr"), mode="r")
    assert np.mean(out["y"][:] == out["predicted"][:]) > 0.8


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")
def test_labels_of_several_inputs_are_checked_input_by_input_and_named(tmp_path):
    """Int labels 0/1 given beside text labels were made the text "0"/"1" and written silently.

    (One dask concatenation of ``<U1`` and ``int64`` labels is text: the int
    input alone was refused, with the text one it passed; float labels 1.0
    became a new class "1.0".) A refusal names the input and its row, not OUT.
    """
    X, y = make_classes(n=600, p=3, k=2, seed=15)
    _text_store(tmp_path / "text.zarr", X[:200], y[:200].astype(str))
    write_zarr(tmp_path / "int.zarr", X[200:400], y[200:400], chunk_rows=70)
    write_zarr(tmp_path / "float.zarr", X[400:], y[400:].astype(np.float64), chunk_rows=70)
    jobs.fit_model(str(tmp_path / "text.zarr"), tmp_path / "mt")
    jobs.project_model(tmp_path / "mt", [str(tmp_path / "text.zarr")], tmp_path / "o.zarr")
    before = tree(tmp_path / "o.zarr")
    for other in ("int.zarr", "float.zarr"):
        for mode, out in (("rewrite", "o2.zarr"), ("append", "o.zarr")):
            for given in ([other], ["text.zarr", other]):
                with pytest.raises(sp.errors.InputError,
                                   match=rf"/{other}/y holds numbers"):
                    jobs.project_model(tmp_path / "mt", [str(tmp_path / g) for g in given],
                                       tmp_path / out, mode=mode)
            assert not (tmp_path / "o2.zarr").exists()
            assert tree(tmp_path / "o.zarr") == before
    # labels typed per chunk (Parquet) are named by their input and its row too
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame(X[:200], columns=["x0", "x1", "x2"]).assign(y=y[:200].astype(str))
    frame.to_parquet(tmp_path / "text.parquet", row_group_size=70)
    jobs.fit_model(str(tmp_path / "int.zarr"), tmp_path / "mi")
    jobs.project_model(tmp_path / "mi", [str(tmp_path / "int.zarr")], tmp_path / "oi.zarr")
    with pytest.raises(sp.errors.InputError, match=r"text\.parquet:y holds text \('[01]' at row "
                                                   r"(0|70|140)\) but the model's classes are numbers"):
        jobs.project_model(tmp_path / "mi", [str(tmp_path / "int.zarr"),
                                             str(tmp_path / "text.parquet")],
                           tmp_path / "oi.zarr", mode="append", y="y")


def test_a_bad_value_among_several_inputs_names_its_input_and_row(tmp_path):
    """It named "2 inputs" and the row of the concatenation."""
    import pickle

    from streamproj.outputs import RowsOf

    X, y = make_classes(n=600, p=3, k=2, seed=14)
    bad = X[300:].copy()
    bad[123, 1] = np.nan
    write_zarr(tmp_path / "a.zarr", X[:300], y[:300], chunk_rows=70)
    write_zarr(tmp_path / "b.zarr", bad, y[300:], chunk_rows=70)
    jobs.fit_model(str(tmp_path / "a.zarr"), tmp_path / "m")
    jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr")], tmp_path / "o.zarr")
    for mode, out in (("append", "o.zarr"), ("rewrite", "o2.zarr")):
        with pytest.raises(sp.errors.BadValuesError, match=r"b\.zarr/X has a non-finite value "
                                                           r"\(nan\) in row 123 \(column 1\)"):
            jobs.project_model(tmp_path / "m", [str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")],
                               tmp_path / out, mode=mode)
    named = pickle.loads(pickle.dumps(RowsOf([("a", 0, 10), ("b", 5, 20)])))  # to dask workers
    assert (str(named), named.locate(3), named.locate(12)) == ("2 inputs", ("a", 3), ("b", 7))


def test_an_output_is_chunked_like_the_largest_input_chunk_not_a_small_first_one(tmp_path):
    # OUT took the first input chunk's rows as its grid: a first Parquet file (or Zarr store)
    # of 3 rows chunked the whole output, and every later append, 3 rows a file
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    X, y = make_classes(n=803, p=3, seed=91)
    (tmp_path / "pq").mkdir()
    for name, rows in (("a", slice(0, 3)), ("b", slice(3, 803))):
        pd.DataFrame(X[rows], columns=["f0", "f1", "f2"]).assign(label=y[rows]).to_parquet(
            tmp_path / "pq" / f"{name}.parquet")
    write_zarr(tmp_path / "a-small.zarr", X[:5], y[:5], chunk_rows=5)
    write_zarr(tmp_path / "b-big.zarr", X[5:], y[5:], chunk_rows=200)
    for inputs, label, rows in (([tmp_path / "pq"], "label", 800),
                                ([tmp_path / "a-small.zarr", tmp_path / "b-big.zarr"], None, 200)):
        model, out = tmp_path / f"m{rows}", tmp_path / f"o{rows}.zarr"
        jobs.fit_model(inputs, model, label=label)
        jobs.project_model(model, inputs, out, label=label)
        group = store.open_output(out)
        for name in ("projection", "predicted", "decision", "y"):
            assert group[name].chunks[0] == rows, name
        frame = frame_of(out)
        np.testing.assert_allclose(group["projection"][:],
                                   (X - frame.center_) @ frame.components_.T, rtol=1e-12,
                                   atol=1e-12)
        assert group["y"][:].tolist() == y.tolist()


@pytest.mark.filterwarnings("default::streamproj.errors.StreamprojWarning")  # (as on a terminal)
def test_an_append_asked_for_decision_says_it_keeps_the_outputs_arrays(days, capsys):
    # the appended rows get the arrays OUT has: --decision onto an output written without it
    # added none, and a nightly run's [output] decision = true likewise, without a word
    d, _X, _y = days
    glob = str(d / "day-*.zarr")
    for night in (0, 1):
        (d / f"day-{night}.zarr").rename(d / f"in-{night}.zarr")
    assert main(["fit", str(d / "in-0.zarr"), "--model", str(d / "m")]) == 0
    assert main(["project", str(d / "m"), str(d / "in-0.zarr"), "--output", str(d / "o.zarr"),
                 "--no-decision"]) == 0
    capsys.readouterr()
    assert main(["project", str(d / "m"), str(d / "in-0.zarr"), str(d / "in-1.zarr"),
                 "--output", str(d / "o.zarr"), "--append", "--decision"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"streamproj: warning: --decision: {d / 'o.zarr'} was written without "
                      "decision, and an append adds none; rewrite "
                      f"{d / 'o.zarr'} once with --overwrite --decision"), err
    assert "decision" not in store.open_output(d / "o.zarr")
    job = d / "job.toml"
    job.write_text(f'[input]\npaths = ["{glob}"]\n[model]\npath = "m"\n'
                   '[output]\npath = "o.zarr"\nmode = "append"\ndecision = true\n')
    assert main(["run", str(job), "--no-progress"]) == 0  # day-2 and day-3: in one pass
    err = capsys.readouterr().err
    assert f"warning: {job}: [output] decision = true: {d / 'o.zarr'} was written without" in err
    assert store.open_output(d / "o.zarr")["projection"].shape[0] == 1200
    assert main(["project", str(d / "m"), str(d / "in-0.zarr"), "--output", str(d / "o.zarr"),
                 "--append"]) == 0
    assert "warning" not in capsys.readouterr().err
