"""Many sources per model: ledger, formats, forget, sliding windows, federated merge, reports."""

import datetime as dt
import json
import os
import re
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest
import zarr
from conftest import make_classes, on_row_reads, one_error_line, write_days, write_zarr
from test_faults import tree

import streamproj as sp
from streamproj import jobs, ledger, store
from streamproj.cli import main
from streamproj.config import load_config
from streamproj.errors import IncompatibleStatsError, InputError, SourceChangedError

COLS = [f"emb_{i}" for i in range(5)]


@pytest.fixture
def days(tmp_path):
    X, y = make_classes(n=1500, p=5, k=2, seed=21)
    return write_days(tmp_path, X, y, days=5, chunk_rows=80)


def assert_fit_on(model_dir, X, y, tol=1e-10):
    got, ref = sp.load(model_dir), sp.BoundaryProjector().fit(X, y)
    for name in ("coef_", "intercept_", "components_", "center_"):
        a, b = getattr(got, name), getattr(ref, name)
        assert np.max(np.abs(a - b)) <= tol * np.max(np.abs(b)), name
    assert got.stats_.n_samples == len(y)


def rows(*days):
    return np.concatenate([np.arange(i * 300, (i + 1) * 300) for i in days])


def test_a_held_source_whose_labels_changed_is_said_to_have_changed_labels_too(days):
    """Relabelled rows were refused as "the first 300 rows of day-0.zarr/X have changed":
    X had not (the fingerprint covers the labels too), and the message did not say so."""
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    zarr.open_group(str(d / "day-0.zarr"), mode="a")["y"][5] = 1 - y[5]
    with pytest.raises(SourceChangedError, match=r"first 300 rows of .*day-0\.zarr/X or their "
                                                 r"labels .*day-0\.zarr/y \(taken into model"):
        jobs.update_model(d / "m", d / "day-0.zarr")


def test_glob_skips_merged_sources_merges_grown_ones_and_refuses_changed(days):
    d, X, y = days
    jobs.fit_model(str(d / "day-[01].zarr"), d / "m")
    assert_fit_on(d / "m", X[rows(0, 1)], y[rows(0, 1)])
    rep = jobs.update_model(d / "m", str(d / "day-*.zarr"))
    assert [s["status"] for s in rep["sources"]] == ["skipped", "skipped", "merged", "merged", "merged"]
    assert rep["rows_added"] == 900
    assert_fit_on(d / "m", X, y)
    assert jobs.update_model(d / "m", str(d / "day-*.zarr"))["status"] == "unchanged"
    # day-4 grows by 100 rows (of day 0's, counted again on purpose: they are new rows of day 4)
    g = zarr.open_group(str(d / "day-4.zarr"), mode="a")
    g["X"].resize((400, 5))
    g["y"].resize((400,))
    g["X"][300:], g["y"][300:] = X[:100], y[:100]
    rep = jobs.update_model(d / "m", str(d / "day-*.zarr"))
    assert rep["sources"][4] == {"url": str((d / "day-4.zarr").resolve()), "status": "grown",
                                 "rows_merged": 100, "rows_skipped": 300}
    assert_fit_on(d / "m", np.vstack([X, X[:100]]), np.concatenate([y, y[:100]]))
    # day-1 changes: refused, the model untouched
    version = sp.load(d / "m").meta_["version"]
    g = zarr.open_group(str(d / "day-1.zarr"), mode="a")
    g["X"][0] = X[300] * 2
    with pytest.raises(SourceChangedError, match="day-1.zarr/X"):
        jobs.update_model(d / "m", str(d / "day-*.zarr"))
    assert sp.load(d / "m").meta_["version"] == version


def test_forget_equals_a_fit_on_the_remaining_sources(days):
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    jobs.update_model(d / "m", [d / "day-1.zarr", d / "day-2.zarr"])
    jobs.update_model(d / "m", str(d / "day-*.zarr"))
    rep = jobs.forget_sources(d / "m", d / "day-1.zarr")
    assert rep["rows_removed"] == 300
    assert_fit_on(d / "m", X[rows(0, 2, 3, 4)], y[rows(0, 2, 3, 4)])
    (d / "day-1.zarr").rename(d / "moved.zarr")  # forgotten, then moved: not merged back
    with pytest.raises(SourceChangedError, match=r"moved\.zarr has the same 300 rows .* as "
                                                 r".*day-1\.zarr, which model .* dropped before"
                                                 r".*; leave it out: its rows were dropped"):
        jobs.update_model(d / "m", d / "moved.zarr")
    (d / "moved.zarr").rename(d / "day-1.zarr")
    (d / "day-3.zarr").rename(d / "gone.zarr")  # a deleted source can still be forgotten, by glob
    jobs.forget_sources(d / "m", str(d / "day-[34].zarr"))
    assert_fit_on(d / "m", X[rows(0, 2)], y[rows(0, 2)])
    assert [s["url"].rsplit("/", 1)[1] for s in jobs.model_info(d / "m")["sources"]] == [
        "day-0.zarr", "day-2.zarr"]
    with pytest.raises(InputError, match="holds no source"):
        jobs.forget_sources(d / "m", d / "day-1.zarr")
    with pytest.raises(InputError, match="without rows"):
        jobs.forget_sources(d / "m", str(d / "day-*.zarr"))


def test_forget_of_a_source_named_with_brackets_forgets_it_alone(tmp_path):
    # its name read as a glob too: forgetting day[1].zarr forgot day1.zarr as well, for good
    X, y = make_classes(n=600, p=3, k=2, seed=22)
    names = ["day[1].zarr", "day1.zarr", "day2.zarr"]
    for i, name in enumerate(names):
        write_zarr(tmp_path / name, X[i * 200:(i + 1) * 200], y[i * 200:(i + 1) * 200],
                   chunk_rows=100)
    jobs.fit_model([tmp_path / name for name in names], tmp_path / "m")
    rep = jobs.forget_sources(tmp_path / "m", tmp_path / "day[1].zarr")
    assert [s["url"] for s in rep["sources"]] == [str(tmp_path / "day[1].zarr")]
    assert_fit_on(tmp_path / "m", X[200:], y[200:])


def test_a_glob_does_not_merge_back_what_the_window_evicted(days):
    # nightly.toml's shape: one glob over every day, keep_last 2, run every night
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    jobs.update_model(d / "m", d / "day-1.zarr")
    first = jobs.update_model(d / "m", str(d / "day-[0-3].zarr"), keep_last=2)
    assert sorted(u.rsplit("/", 1)[1] for u in first["evicted"]) == ["day-0.zarr", "day-1.zarr"]
    assert_fit_on(d / "m", X[rows(2, 3)], y[rows(2, 3)])
    again = jobs.update_model(d / "m", str(d / "day-[0-3].zarr"), keep_last=2)
    assert again["status"] == "unchanged"
    assert {s["url"].rsplit("/", 1)[1]: s["status"] for s in again["sources"]} == {
        "day-0.zarr": "evicted before", "day-1.zarr": "evicted before",
        "day-2.zarr": "skipped", "day-3.zarr": "skipped"}
    # the message counts the rows merged before apart from the sources removed before
    assert again["message"].endswith(f": all {2 * 300} rows were merged before; 2 sources were "
                                     "removed from the model before (forget, or its window) and "
                                     "are not merged again; model unchanged")
    assert_fit_on(d / "m", X[rows(2, 3)], y[rows(2, 3)])
    # the next day arrives: merged, the oldest kept one evicted, the evicted ones stay out
    nxt = jobs.update_model(d / "m", str(d / "day-*.zarr"), keep_last=2)
    assert [u.rsplit("/", 1)[1] for u in nxt["evicted"]] == ["day-2.zarr"]
    assert_fit_on(d / "m", X[rows(3, 4)], y[rows(3, 4)])
    # forgetting keeps the memory of what was evicted
    jobs.forget_sources(d / "m", d / "day-3.zarr")
    last = jobs.update_model(d / "m", str(d / "day-*.zarr"))
    assert last["status"] == "unchanged"
    assert_fit_on(d / "m", X[rows(4)], y[rows(4)])


def test_a_first_fit_over_a_backlog_records_what_its_window_dropped(days, monkeypatch, capsys):
    # a first fit of more days than keep_last kept the newest but recorded nothing of the rest:
    # the next update merged the oldest day again and dropped a newer one to make room (a wrong
    # model, exit 0), and the report counted the dropped rows as fitted
    d, X, y = days
    rep = jobs.fit_model(str(d / "day-[0-2].zarr"), d / "m", keep_last=2)
    assert rep["rows"] == 600
    assert [s["status"] for s in rep["sources"]] == ["evicted", "merged", "merged"]
    assert [u.rsplit("/", 1)[1] for u in rep["evicted"]] == ["day-0.zarr"]
    meta = store.read_model(d / "m")[0]
    assert [e["url"].rsplit("/", 1)[1] for e in meta["evicted_sources"]] == ["day-0.zarr"]
    assert meta["history"][0]["rows_added"] == 600
    again = jobs.update_model(d / "m", str(d / "day-[0-2].zarr"), keep_last=2)
    assert again["status"] == "unchanged"
    assert [s["status"] for s in again["sources"]] == ["evicted before", "skipped", "skipped"]
    assert_fit_on(d / "m", X[rows(1, 2)], y[rows(1, 2)])
    jobs.update_model(d / "m", str(d / "day-[0-3].zarr"), keep_last=2)
    assert_fit_on(d / "m", X[rows(2, 3)], y[rows(2, 3)])
    # the command line says what the model holds and what the window dropped
    assert main(["fit", str(d / "day-[0-2].zarr"), "--model", str(d / "m2"),
                 "--keep-last", "1"]) == 0
    out = capsys.readouterr().out
    assert "on 300 rows of 1 source (" in out
    assert out.rstrip().endswith("; forgot 2 source(s) outside the window")
    # a nightly run started on a backlog keeps the newest days from the first night on
    (d / "data").mkdir()
    for i in range(4):
        (d / f"day-{i}.zarr").rename(d / "data" / f"day-{i}.zarr")
    job = d / "job.toml"
    job.write_text('[input]\npaths = ["data/day-*.zarr"]\n[model]\npath = "m3"\nkeep_last = 2\n'
                   '[output]\npath = "o.zarr"\nmode = "append"\n')
    monkeypatch.chdir(d)
    assert main(["run", str(job)]) == 0
    assert_fit_on(d / "m3", X[rows(2, 3)], y[rows(2, 3)])
    (d / "day-4.zarr").rename(d / "data" / "day-4.zarr")
    assert main(["run", str(job)]) == 0
    assert_fit_on(d / "m3", X[rows(3, 4)], y[rows(3, 4)])
    assert store.open_output(d / "o.zarr")["projection"].shape[0] == 1500


def test_window_keeps_the_newest_sources_exactly(days):
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m", keep_last=3)
    for i in range(1, 5):
        rep = jobs.update_model(d / "m", d / f"day-{i}.zarr", keep_last=3)
    assert rep["evicted"] == [str((d / "day-1.zarr").resolve())]
    assert_fit_on(d / "m", X[rows(2, 3, 4)], y[rows(2, 3, 4)])
    # max_age: sources first merged long ago fall out
    meta = store.read_model(d / "m")[0]
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(days=40)).isoformat(timespec="seconds")
    entries = [dict(e) for e in meta["sources"]]
    entries[0]["added"] = old
    assert ledger.to_evict(entries, max_age="30d") == [entries[0]]
    assert ledger.to_evict(entries, keep_last=2) == [entries[0]]
    with pytest.raises(InputError, match="max_age"):
        ledger.parse_age("a month")


def test_a_merge_says_when_the_other_models_parameters_are_not_the_merged_ones(days, capsys):
    # the other model's shrinkage was dropped without a word: its summaries merge exactly, but
    # the merged model is solved with the target's parameters
    d, X, y = days
    assert main(["fit", str(d / "day-0.zarr"), "--model", str(d / "a")]) == 0
    assert main(["fit", str(d / "day-1.zarr"), "--model", str(d / "b"), "--shrinkage", "0.3"]) == 0
    assert main(["fit", str(d / "day-2.zarr"), "--model", str(d / "c")]) == 0
    capsys.readouterr()
    with pytest.warns(sp.StreamprojWarning, match=re.escape(
            f"model {d / 'b'} was fitted with shrinkage=0.3 (here None); its summaries merge "
            f"exactly, and the merged model is solved with {d / 'a'}'s parameters")):
        jobs.merge_models(d / "a", [d / "b"])
    assert sp.load(d / "a").shrinkage is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same parameters: nothing said
        jobs.merge_models(d / "a", [d / "c"])
    assert_fit_on(d / "a", X[rows(0, 1, 2)], y[rows(0, 1, 2)])
    # models given the same boundary merge without a word (comparing the boundaries' arrays
    # raised "truth value of an array is ambiguous": a traceback); another boundary is said
    import json

    (d / "b.json").write_text(json.dumps({"coef": [[1, 0, 0, 0, 0]], "intercept": [0.0]}))
    (d / "b2.json").write_text(json.dumps({"coef": [[0, 1, 0, 0, 0]], "intercept": [0.5]}))
    for name, day, file in (("g", 3, "b.json"), ("h", 4, "b.json"), ("i", 0, "b2.json")):
        assert main(["fit", str(d / f"day-{day}.zarr"), "--model", str(d / name),
                     "--boundary", str(d / file)]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jobs.merge_models(d / "g", [d / "h"])
    with pytest.warns(sp.StreamprojWarning, match=r"was fitted with boundary=\{'coef': "):
        jobs.merge_models(d / "g", [d / "i"])


def test_merge_of_two_models_equals_one_fit_and_refuses_shared_sources(days, tmp_path):
    d, X, y = days
    jobs.fit_model([d / "day-0.zarr", d / "day-1.zarr"], d / "site-a")
    jobs.fit_model(str(d / "day-[234].zarr"), d / "site-b")
    rep = jobs.merge_models(d / "site-a", [d / "site-b"])
    assert rep["rows_added"] == 900
    assert_fit_on(d / "site-a", X, y)
    info = jobs.model_info(d / "site-a")
    origins = [s.get("origin", {}).get("model") for s in info["sources"]]
    assert origins[:2] == [None, None]
    assert set(origins[2:]) == {str((d / "site-b").resolve())}
    # the merged sources can be forgotten exactly, like local ones
    jobs.forget_sources(d / "site-a", d / "day-3.zarr")
    assert_fit_on(d / "site-a", X[rows(0, 1, 2, 4)], y[rows(0, 1, 2, 4)])
    # shared sources are refused
    jobs.fit_model(d / "day-2.zarr", d / "site-c")
    with pytest.raises(InputError, match="share the source"):
        jobs.merge_models(d / "site-a", [d / "site-c"])
    # a copy of the same rows elsewhere is recognised by its fingerprint
    zarr_copy = d / "copy.zarr"
    write_zarr(zarr_copy, X[:300], y[:300], chunk_rows=80)
    jobs.fit_model(zarr_copy, d / "site-d")
    with pytest.raises(InputError, match="share the source"):
        jobs.merge_models(d / "site-a", [d / "site-d"])
    # nor a copy that has grown since (its first 256 rows agree: no rows to read, so that counts)
    grown = np.concatenate([rows(0), rows(3)[:50]])
    write_zarr(d / "grown.zarr", X[grown], y[grown], chunk_rows=80)
    jobs.fit_model(d / "grown.zarr", d / "site-h")
    with pytest.raises(InputError, match="share the source"):
        jobs.merge_models(d / "site-a", [d / "site-h"])
    # nor do rows forgotten come back through another model, by name or as a copy
    jobs.fit_model(d / "day-3.zarr", d / "site-f")
    shutil.copytree(d / "day-3.zarr", d / "copy-3.zarr")
    jobs.fit_model(d / "copy-3.zarr", d / "site-g")
    for site in ("site-f", "site-g"):
        with pytest.raises(InputError, match=r"day-3\.zarr \(forget, or its window\)"):
            jobs.merge_models(d / "site-a", [d / site])
    assert_fit_on(d / "site-a", X[rows(0, 1, 2, 4)], y[rows(0, 1, 2, 4)])
    # other features are refused
    Z, w = make_classes(n=200, p=3, k=2, seed=1)
    write_zarr(d / "narrow.zarr", Z, w)
    jobs.fit_model(d / "narrow.zarr", d / "site-e")
    with pytest.raises(IncompatibleStatsError, match="3 features"):
        jobs.merge_models(d / "site-a", [d / "site-e"])


def test_rows_of_no_source_are_not_merged_twice(days, capsys):
    # models fitted in Python have no ledger to find shared rows by: a copy of the model, or
    # one merged a second time, was merged silently (600 rows of 300, then 800 of 400)
    d, X, y = days
    sp.BoundaryProjector().fit(X[:300], y[:300]).save(d / "a")
    sp.BoundaryProjector().fit(X[300:400], y[300:400]).save(d / "c")
    shutil.copytree(d / "a", d / "b")
    shutil.copytree(d / "c", d / "c2")
    assert main(["merge", str(d / "a"), str(d / "b")]) == 2
    assert "b holds 300 rows of no source (fitted or added in Python), and " \
           f"{d / 'a'} is the same model (one is a copy of the other)" in one_error_line(capsys)
    assert main(["merge", str(d / "a"), str(d / "c"), str(d / "c2")]) == 2
    assert f"{d / 'a'} merged it before: merging it would count them twice" in one_error_line(capsys)
    assert main(["merge", str(d / "a"), str(d / "c")]) == 0
    assert main(["merge", str(d / "a"), str(d / "c2")]) == 2
    assert "c2 holds 100 rows of no source" in one_error_line(capsys)
    assert sp.load(d / "a").stats_.n_samples == 400
    # at any depth: e merged a copy of c, and a (which merged c) merging e counted c's rows twice
    sp.BoundaryProjector().fit(X[400:500], y[400:500]).save(d / "e")
    shutil.copytree(d / "c2", d / "c3")
    assert main(["merge", str(d / "e"), str(d / "c3")]) == 0
    assert main(["merge", str(d / "a"), str(d / "e")]) == 2
    assert "e holds 200 rows of no source (fitted or added in Python), and " \
           f"{d / 'a'} holds a model it holds too (model id " in one_error_line(capsys)
    assert sp.load(d / "a").stats_.n_samples == 400


def test_a_summary_of_other_rows_in_one_summaries_file_is_refused(days, capsys):
    # versions written before a file per source keep them all in summaries.npz: read at once,
    # they were taken as merged by the job itself and not checked
    d, X, y = days
    jobs.fit_model([d / "day-0.zarr", d / "day-1.zarr"], d / "m")
    version = d / "m" / "v000001"
    summaries = dict(store.read_summaries(d / "m").items())
    summaries["s000002"] = sp.accumulate(X[:600], y[:600])
    (version / "summaries.npz").write_bytes(bytes(store._summaries_bytes(summaries)))
    shutil.rmtree(version / "summaries")
    before = tree(d)
    assert main(["forget", str(d / "m"), str(d / "day-0.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert ("v000001/summaries.npz (s000002) is damaged: it summarises 600 rows, but model.json's "
            "ledger holds 300 rows of") in err[0]
    assert tree(d) == before


def test_a_summary_of_bytes_labels_agrees_with_a_model_of_their_text():
    # bytes labels merge with text labels as their UTF-8 text: a source's summary of b"caf\xc3\xa9"
    # (read by an earlier version) holds a class of a model whose classes are text
    X, y = make_classes(n=40, p=2, seed=3)
    labels = np.where(y == 1, "café", "dog")
    summary = sp.accumulate(X, np.char.encode(labels, "utf-8"))
    model = sp.accumulate(X, labels) + sp.accumulate(X, labels)
    jobs._check_summary(summary, {"url": "a.zarr", "rows": 40}, model, "s.npz")
    with pytest.raises(sp.ModelError, match="s.npz is damaged: it holds the class b'x'"):
        jobs._check_summary(sp.accumulate(X, np.full(40, b"x")), {"url": "a.zarr", "rows": 40},
                            model, "s.npz")


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")  # text labels
def test_a_merge_of_other_labels_names_the_model_that_has_them(days, capsys):
    # "cannot merge string labels with numeric labels ([0, 1] vs ['x', 'z'])" named the model
    # merged into, not the one (of several) with the other labels
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "site-a")
    jobs.fit_model(d / "day-1.zarr", d / "site-b")
    write_zarr(d / "text.zarr", X[:300] + 1, np.where(y[:300] == 1, "x", "z"))
    write_zarr(d / "flags.zarr", X[:300] + 2, y[:300].astype(bool))
    for name, what in (("text", "text classes ('x', 'z')"), ("flags", "boolean classes (False, True)")):
        jobs.fit_model(d / f"{name}.zarr", d / f"site-{name}")
        assert main(["merge", str(d / "site-a"), str(d / "site-b"), str(d / f"site-{name}")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"streamproj: error: model {d / f'site-{name}'} has {what} but "
                       f"{d / 'site-a'} numeric ones (0, 1); only models of the same kind of "
                       "labels merge"]
    assert sp.load(d / "site-a").meta_["version"] == "v000001"


def test_parquet_csv_and_hdf5_inputs_equal_the_zarr_result(days):
    h5py = pytest.importorskip("h5py")
    d, X, y = days
    df = pd.DataFrame(X[:600], columns=COLS).assign(label=y[:600], note="x")
    df.iloc[:300].to_parquet(d / "p-0.parquet", row_group_size=70)
    df.iloc[300:].to_parquet(d / "p-1.parquet", row_group_size=70)
    df.to_csv(d / "t.csv", index=False)
    with h5py.File(d / "t.h5", "w") as f:
        f.create_dataset("g/X", data=X[:600], chunks=(90, 5))
        f.create_dataset("g/y", data=y[:600])
    jobs.fit_model(str(d / "day-[01].zarr"), d / "zarr-model")
    ref = sp.load(d / "zarr-model")
    for name, spec, kw in [("parquet", str(d / "p-*.parquet"), {"features": "emb_*", "label": "label"}),
                           ("csv", d / "t.csv", {"features": ",".join(COLS), "label": "label"}),
                           ("hdf5", f"{d / 't.h5'}:/g/X", {})]:
        jobs.fit_model(spec, d / name, **kw)
        got = sp.load(d / name)
        for attr in ("coef_", "components_", "center_"):
            np.testing.assert_allclose(getattr(got, attr), getattr(ref, attr), rtol=1e-10, atol=1e-12)
        jobs.project_model(d / name, spec, d / f"{name}.zarr", **kw)
        np.testing.assert_allclose(store.open_output(d / f"{name}.zarr")["projection"][:],
                                   ref.transform(X[:600]), rtol=1e-9, atol=1e-9)
    # an update by the same glob skips the Parquet files it merged
    assert jobs.update_model(d / "parquet", str(d / "p-*.parquet"), features="emb_*",
                             label="label")["status"] == "unchanged"
    # errors name the file and the column
    with pytest.raises(InputError, match=r"p-0.parquet.*(lable|column)"):
        jobs.fit_model(d / "p-0.parquet", d / "bad", features="emb_*", label="lable")
    assert not (d / "bad").exists()


def test_json_reports_of_every_command(days, capsys):
    d, X, y = days

    def js(*argv):
        code = main([str(a) for a in argv] + ["--json"])
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1, out
        return code, json.loads(out[0])

    code, rep = js("fit", d / "day-0.zarr", "--model", d / "m")
    assert code == 0
    assert rep["command"] == "fit"
    assert rep["sources"][0]["rows_merged"] == 300
    code, rep = js("update", d / "m", d / "day-*.zarr")
    assert code == 0
    assert [(s["status"], s["rows_merged"], s["rows_skipped"]) for s in rep["sources"]] == [
        ("skipped", 0, 300)] + [("merged", 300, 0)] * 4
    assert rep["drift_deg"] > 0
    assert rep["normal_angle_deg"] == rep["drift_deg"]
    assert {"timings", "versions", "version", "n_samples"} <= set(rep)
    assert rep["versions"]["streamproj"] == sp.__version__
    assert rep["timings"]["total"] > 0
    code, rep = js("project", d / "m", d / "day-*.zarr", "--output", d / "o.zarr", "--append")
    assert rep["output_action"] == "written"
    assert rep["rows_written"] == 1500
    code, rep = js("forget", d / "m", d / "day-4.zarr")
    assert rep["rows_removed"] == 300
    assert rep["sources"][0]["status"] == "forgotten"
    code, rep = js("info", d / "o.zarr")
    assert rep["kind"] == "output"
    assert rep["model"]["drift_deg"] > 0
    assert rep["frame"]["model_version"] == "v000002"
    code, rep = js("info", d / "m")
    assert rep["kind"] == "model"
    assert rep["per_source_summaries"] == 4
    Z, w = make_classes(n=200, p=5, k=2, seed=3)
    write_zarr(d / "elsewhere.zarr", Z, w)
    jobs.fit_model(d / "elsewhere.zarr", d / "other")
    code, rep = js("merge", d / "m", d / "other")
    assert code == 0
    assert rep["rows_added"] == 200
    assert rep["models"][0]["model_id"]


def _config(d, alert):
    path = d / "job.toml"
    path.write_text(f'''
[input]
paths = ["day-*.zarr"]
[model]
path = "m"
[output]
path = "o.zarr"
mode = "auto"
reproject_above_degrees = 90.0
[run]
alert_above_degrees = {alert}
''')
    return path


def test_run_alerts_with_exit_3_when_the_boundary_moves_too_far(days, capsys):
    d, X, y = days
    (d / "later").mkdir()
    for i in (1, 2, 3, 4):
        (d / f"day-{i}.zarr").rename(d / "later" / f"day-{i}.zarr")
    assert main(["run", str(_config(d, 1e-6)), "--json"]) == 0  # a fit has no drift
    first = json.loads(capsys.readouterr().out)
    assert first["steps"][0]["command"] == "fit"
    assert first["alert"] is None
    for i in (1, 2, 3, 4):
        (d / "later" / f"day-{i}.zarr").rename(d / f"day-{i}.zarr")
    code = main(["run", str(_config(d, 1e-6)), "--json"])
    captured = capsys.readouterr()
    assert code == 3
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("streamproj: alert: ")
    assert "moved" in err[0]
    rep = json.loads(captured.out)
    assert rep["status"] == "alert"
    assert rep["drift_deg"] > 1e-6
    assert rep["steps"][1]["output_action"] == "appended"
    # the same night again: nothing moved, no alert
    assert main(["run", str(_config(d, 1e-6)), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["steps"][0]["status"] == "unchanged"
    assert rep["steps"][1]["output_action"] == "unchanged"
    with pytest.raises(SystemExit) as exc:
        main(["run", str(_config(d, 1e-6)), "--alert-above", "-1"])
    assert exc.value.code == 2


def test_a_source_respelled_is_not_merged_or_appended_twice(days):
    """`--x /X`, `--x X/` and a folder's files: the same rows, which merged again before."""
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    jobs.project_model(d / "m", [str(d / "day-0.zarr")], d / "o.zarr")
    for x, y_name in (("/X", "/y"), ("X/", "y/")):
        report = jobs.update_model(d / "m", d / "day-0.zarr", x=x, y=y_name)
        assert report["status"] == "unchanged", x
        appended = jobs.project_model(d / "m", [str(d / "day-0.zarr")], d / "o.zarr",
                                      mode="append", x=x, y=y_name)
        assert appended["output_action"] == "unchanged", x
    assert_fit_on(d / "m", X[rows(0)], y[rows(0)])
    # a Parquet folder, then its files (and the other way round): refused, model and OUT kept
    (d / "pdir").mkdir()
    for i in (1, 2):
        pd.DataFrame(X[rows(i)], columns=COLS).assign(label=y[rows(i)]).to_parquet(
            d / "pdir" / f"p{i}.parquet")
    jobs.fit_model(d / "pdir", d / "mp", label="label")
    jobs.project_model(d / "mp", [str(d / "pdir")], d / "op.zarr", label="label")
    before = (sp.load(d / "mp").model_id_, store.open_output(d / "op.zarr").attrs.asdict())
    with pytest.raises(SourceChangedError, match=r"p1\.parquet overlaps .*pdir, which model .* "
                                                 r"merged before .* counted twice"):
        jobs.update_model(d / "mp", str(d / "pdir" / "*.parquet"), label="label")
    with pytest.raises(SourceChangedError, match=r"p2\.parquet overlaps .*pdir, whose rows "
                                                 r"output .*op\.zarr holds"):
        jobs.project_model(d / "mp", [str(d / "pdir" / "p2.parquet")], d / "op.zarr",
                           label="label", mode="append")
    assert (sp.load(d / "mp").model_id_, store.open_output(d / "op.zarr").attrs.asdict()) == before
    # two arrays of one Zarr group stay two sources
    group = zarr.open_group(str(d / "day-1.zarr"))
    group.create_array("X2", data=X[rows(2)], chunks=(80, 5))
    group.create_array("y2", data=y[rows(2)], chunks=(80,))
    jobs.update_model(d / "m", d / "day-1.zarr")
    jobs.update_model(d / "m", d / "day-1.zarr", x="X2", y="y2")
    assert_fit_on(d / "m", X[rows(0, 1, 2)], y[rows(0, 1, 2)])
    # but one X array with other labels is the same rows: labels added later, or another array
    group.create_array("y3", data=1 - y[rows(1)], chunks=(80,))  # relabelled
    with pytest.raises(SourceChangedError, match=r"day-1\.zarr read as zarr X='X', labels='y3' "
                                                 r"overlaps its reading as zarr X='X', labels='y', "
                                                 r"which model .* merged before"):
        jobs.update_model(d / "m", d / "day-1.zarr", y="y3")
    write_zarr(d / "late.zarr", X[rows(3)])  # no labels yet
    jobs.project_model(d / "m", [str(d / "late.zarr")], d / "late-out.zarr")
    zarr.open_group(str(d / "late.zarr")).create_array("y", data=y[rows(3)], chunks=(100,))
    with pytest.raises(SourceChangedError, match="counted twice"):
        jobs.project_model(d / "m", [str(d / "late.zarr")], d / "late-out.zarr", mode="append")
    assert store.open_output(d / "late-out.zarr")["projection"].shape[0] == 300
    assert_fit_on(d / "m", X[rows(0, 1, 2)], y[rows(0, 1, 2)])


def test_a_moved_or_copied_source_is_refused_not_merged_twice(days, capsys):
    """A folder moved (every path changes) or a store copied: new names, the same rows."""
    d, X, y = days
    a = d / "a"
    a.mkdir()
    for i in (0, 1):
        (d / f"day-{i}.zarr").rename(a / f"day-{i}.zarr")
    jobs.fit_model(a / "day-0.zarr", a / "m")
    jobs.project_model(a / "m", [str(a / "day-0.zarr")], a / "o.zarr")
    b = a.rename(d / "b")  # the whole project moved
    before = (sp.load(b / "m").model_id_, store.open_output(b / "o.zarr").attrs.asdict())
    with pytest.raises(SourceChangedError, match=r"b/day-0\.zarr has the same 300 rows \(judged "
                                                 r"by the first and last 256, shape and dtypes\) as "
                                                 r".*a/day-0\.zarr, "
                                                 r"which model .* holds \(moved or copied\?\): its "
                                                 r"rows would be counted twice; .* refit the model"):
        jobs.update_model(b / "m", str(b / "day-*.zarr"))
    with pytest.raises(SourceChangedError, match=r"which output .*o\.zarr holds .* rewrite "):
        jobs.project_model(b / "m", [str(b / "day-1.zarr"), str(b / "day-0.zarr")], b / "o.zarr",
                           mode="append")
    # the nightly job, in one pass: refused before the model is written, in one line, exit 2
    (b / "job.toml").write_text(f'[input]\npaths = ["{b}/day-*.zarr"]\n[model]\npath = "{b}/m"\n'
                                f'mode = "auto"\n[output]\npath = "{b}/o.zarr"\nmode = "append"\n')
    assert main(["run", str(b / "job.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"streamproj: error: {b / 'day-0.zarr'} has the same")  # not OUT's
    assert "counted twice" in err
    assert "\n" not in err
    assert (sp.load(b / "m").model_id_, store.open_output(b / "o.zarr").attrs.asdict()) == before
    assert_fit_on(b / "m", X[rows(0)], y[rows(0)])
    # moved, and grown since (the last day still being written): its first rows are held
    grown = np.concatenate([rows(0), rows(4)[:100]])
    write_zarr(b / "grown.zarr", X[grown], y[grown], chunk_rows=80)
    with pytest.raises(SourceChangedError, match=r"grown\.zarr starts with the 300 rows \(judged "
                                                 r"by the first and last 256.*\) of .*a/day-0"):
        jobs.update_model(b / "m", b / "grown.zarr")
    with pytest.raises(SourceChangedError, match=r"grown\.zarr starts with the 300 rows .*output"):
        jobs.project_model(b / "m", [str(b / "grown.zarr")], b / "o.zarr", mode="append")
    for order in ([b / "day-0.zarr", b / "grown.zarr"], [b / "grown.zarr", b / "day-0.zarr"]):
        with pytest.raises(SourceChangedError, match=r"grown\.zarr starts with the 300 rows "
                                                     r".*day-0\.zarr, also given"):
            jobs.fit_model([str(p) for p in order], b / "m2")
    job = (b / "job.toml").read_text().replace("day-*.zarr", "grown.zarr")
    (b / "grown.toml").write_text(job)  # and in the nightly job's one pass
    assert main(["run", str(b / "grown.toml")]) == 2
    assert "grown.zarr starts with the 300 rows" in capsys.readouterr().err
    assert (sp.load(b / "m").model_id_, store.open_output(b / "o.zarr").attrs.asdict()) == before
    jobs.update_model(b / "m", str(b / "day-1.zarr"))  # new rows still merge
    assert_fit_on(b / "m", X[rows(0, 1)], y[rows(0, 1)])
    # a copy given beside its original (new to the model, or to fit): refused, nothing written
    for i in (1, 2):
        shutil.copytree(d / f"day-{i + 1}.zarr", b / f"new-{i}.zarr")
    shutil.copytree(b / "new-1.zarr", b / "new-copy.zarr")
    before = (sp.load(b / "m").model_id_, store.open_output(b / "o.zarr").attrs.asdict())
    with pytest.raises(SourceChangedError, match=r"same 300 rows .* as .*new-1\.zarr, also given"):
        jobs.update_model(b / "m", str(b / "new-*.zarr"))
    with pytest.raises(SourceChangedError, match=r"same 300 rows .* as .*, also given"):
        jobs.fit_model([str(b / "new-1.zarr"), str(b / "new-copy.zarr")], b / "m2")
    with pytest.raises(SourceChangedError, match=r"same 300 rows .* as .*, also given"):
        jobs.project_model(b / "m", [str(b / "new-1.zarr"), str(b / "new-copy.zarr")],
                           b / "o2.zarr")
    assert not (b / "m2").exists()
    assert not (b / "o2.zarr").exists()
    assert (sp.load(b / "m").model_id_, store.open_output(b / "o.zarr").attrs.asdict()) == before


def test_a_copy_cut_short_is_refused_and_a_different_source_with_the_same_head_is_not(days,
                                                                                      capsys):
    """A copy of a held source's first rows was merged again: its rows counted twice, silently."""
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    jobs.project_model(d / "m", [str(d / "day-0.zarr")], d / "o.zarr")
    before = (sp.load(d / "m").model_id_, store.open_output(d / "o.zarr").attrs.asdict())
    write_zarr(d / "head.zarr", X[:280], y[:280], chunk_rows=70)  # the first 280 of day-0's 300
    short = r"head\.zarr has the first 280 of the 300 rows \(judged by its first and last 256.*\) of "
    with pytest.raises(SourceChangedError, match=short + r".*day-0\.zarr, which model .* holds"):
        jobs.update_model(d / "m", d / "head.zarr")
    with pytest.raises(SourceChangedError, match=short + r".*day-0\.zarr, which output .* holds"):
        jobs.project_model(d / "m", [str(d / "head.zarr")], d / "o.zarr", mode="append")
    (d / "job.toml").write_text(f'[input]\npaths = ["{d}/day-0.zarr", "{d}/head.zarr"]\n'
                                f'[model]\npath = "{d}/m"\nmode = "auto"\n'
                                f'[output]\npath = "{d}/o.zarr"\nmode = "append"\n')
    assert main(["run", str(d / "job.toml")]) == 2
    assert one_error_line(capsys).startswith(
        f"streamproj: error: {d / 'head.zarr'} has the first 280 of the 300")
    # given together, in either order (one is a copy of the other's first rows)
    for order in ([d / "day-0.zarr", d / "head.zarr"], [d / "head.zarr", d / "day-0.zarr"]):
        with pytest.raises(SourceChangedError, match=r"280 .*also given"):
            jobs.fit_model([str(p) for p in order], d / "m2")
    assert not (d / "m2").exists()
    assert (sp.load(d / "m").model_id_, store.open_output(d / "o.zarr").attrs.asdict()) == before
    # other rows after the same 256 first ones: read where the original lies, not a copy
    other = np.concatenate([np.arange(256), 600 + np.arange(24)])
    write_zarr(d / "same-head.zarr", X[other], y[other], chunk_rows=70)
    jobs.update_model(d / "m", d / "same-head.zarr")
    jobs.project_model(d / "m", [str(d / "same-head.zarr")], d / "o.zarr", mode="append")
    merged = np.concatenate([rows(0), other])
    assert_fit_on(d / "m", X[merged], y[merged])
    # the original deleted once merged (as the window lets one): the first 256 rows alone prove
    # nothing (daily files may all start with the same reference rows), so a source starting
    # so merges; a copy cut short of a deleted source is not recognised (README: Limits)
    shutil.rmtree(d / "day-0.zarr")
    again = np.concatenate([np.arange(256), 900 + np.arange(30)])
    write_zarr(d / "next.zarr", X[again], y[again], chunk_rows=70)
    jobs.update_model(d / "m", d / "next.zarr")
    assert_fit_on(d / "m", X[np.concatenate([merged, again])], y[np.concatenate([merged, again])])


def test_a_copy_cut_short_of_a_store_merged_with_missing_chunks_is_judged_as_it_was_read(days):
    # the witness was opened refusing missing chunks: it could not be read, and the first 256
    # rows alone refused a different source
    d, X, y = days
    next(p for p in sorted((d / "day-0.zarr" / "X").rglob("*")) if p.is_file()
         and p.name != "zarr.json" and "c" in p.parts[-3:]).unlink()  # a chunk of X lost
    jobs.fit_model(d / "day-0.zarr", d / "m", allow_missing_chunks=True)
    held = zarr.open_group(str(d / "day-0.zarr"), mode="r")
    Xh, yh = held["X"][:], held["y"][:]  # as merged: the lost chunk read as its fill value
    write_zarr(d / "cut.zarr", Xh[:280], yh[:280], chunk_rows=70)
    with pytest.raises(SourceChangedError, match=r"cut\.zarr has the first 280 of the 300"):
        jobs.update_model(d / "m", d / "cut.zarr", allow_missing_chunks=True)
    other = np.concatenate([Xh[:256], X[900:924]]), np.concatenate([yh[:256], y[900:924]])
    write_zarr(d / "same-head.zarr", *other, chunk_rows=70)
    jobs.update_model(d / "m", d / "same-head.zarr", allow_missing_chunks=True)
    assert sp.load(d / "m").stats_.n_samples == 300 + 280


def test_a_labelled_copy_of_rows_an_output_holds_unlabelled_is_refused(days, capsys):
    """An output holds rows, not labels: unlabelled rows projected, then a copy of them with
    their labels (grown, or as many), were appended or written twice, the labels being part
    of the fingerprint."""
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    write_zarr(d / "rows.zarr", X[rows(1)])  # new rows, no labels yet
    jobs.project_model(d / "m", [str(d / "rows.zarr")], d / "o.zarr")
    write_zarr(d / "labelled.zarr", X[rows(1)], y[rows(1)], chunk_rows=80)
    write_zarr(d / "grown.zarr", X[rows(1, 2)], y[rows(1, 2)], chunk_rows=80)
    before = store.open_output(d / "o.zarr").attrs.asdict()
    for copy, how in (("labelled", "has the same"), ("grown", "starts with the")):
        assert main(["project", str(d / "m"), str(d / f"{copy}.zarr"), "--output",
                     str(d / "o.zarr"), "--append"]) == 2
        err = one_error_line(capsys)
        assert f"{copy}.zarr {how} 300 rows" in err
        assert "rows.zarr, which output" in err
    assert store.open_output(d / "o.zarr").attrs.asdict() == before
    # given together, in either order
    for given in (["rows", "grown"], ["labelled", "rows"], ["rows", "labelled"]):
        assert main(["project", str(d / "m"), *[str(d / f"{g}.zarr") for g in given],
                     "--output", str(d / "both.zarr")]) == 2
        assert "also given: its rows would be counted twice" in one_error_line(capsys)
    assert not (d / "both.zarr").exists()


def test_a_labelled_prefix_given_with_its_unlabelled_rows_is_refused(days, capsys):
    """Given together in one command: the unlabelled 600 rows and a labelled copy of their
    first 300 were written as 900 rows, in either order (the heads were compared with labels)."""
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    write_zarr(d / "rows.zarr", X[rows(1, 2)])
    write_zarr(d / "labelled.zarr", X[rows(1)], y[rows(1)], chunk_rows=80)
    for given in (["rows", "labelled"], ["labelled", "rows"]):
        assert main(["project", str(d / "m"), *[str(d / f"{g}.zarr") for g in given],
                     "--output", str(d / "both.zarr")]) == 2
        assert "also given: its rows would be counted twice" in one_error_line(capsys)
    assert not (d / "both.zarr").exists()


def test_an_unlabelled_copy_of_rows_an_output_took_labelled_is_refused(days, capsys):
    """The mirror case: an output without labels (its first rows had none) takes labelled rows,
    then a copy of them without labels (as many, or grown). Its entries record the digests of
    the rows alone to compare them by."""
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    write_zarr(d / "first.zarr", X[rows(0)])  # no labels: the output holds none
    jobs.project_model(d / "m", [str(d / "first.zarr")], d / "o.zarr")
    write_zarr(d / "labelled.zarr", X[rows(1)], y[rows(1)])
    assert main(["project", str(d / "m"), str(d / "labelled.zarr"), "--output",
                 str(d / "o.zarr"), "--append"]) == 0
    capsys.readouterr()
    write_zarr(d / "rows.zarr", X[rows(1)], chunk_rows=80)
    write_zarr(d / "grown.zarr", X[rows(1, 2)], chunk_rows=80)
    before = store.open_output(d / "o.zarr").attrs.asdict()
    for copy, how in (("rows", "has the same"), ("grown", "starts with the")):
        assert main(["project", str(d / "m"), str(d / f"{copy}.zarr"), "--output",
                     str(d / "o.zarr"), "--append"]) == 2
        err = one_error_line(capsys)
        assert f"{copy}.zarr {how} 300 rows" in err
        assert "labelled.zarr, which output" in err
    assert store.open_output(d / "o.zarr").attrs.asdict() == before
    # and a new output written from labelled rows records them too
    jobs.project_model(d / "m", [str(d / "first.zarr"), str(d / "labelled.zarr")],
                       d / "p.zarr")
    entries = store.open_output(d / "p.zarr").attrs["streamproj"]["sources"]
    assert [("rows_fingerprint" in e, "rows_head" in e) for e in entries] == [
        (False, False), (True, True)]


def test_a_copy_is_refused_by_every_path_before_anything_is_written(days, capsys, monkeypatch):
    """An output rewritten in a moved frame, and a nightly run whose output holds rows its model lacks."""
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    shutil.copytree(d / "day-0.zarr", d / "early-copy.zarr")
    with monkeypatch.context() as m:  # update refuses the copy before its pass reads it
        m.setattr(jobs, "_summarise", lambda *a, **k: pytest.fail("the copy was read"))
        with pytest.raises(SourceChangedError, match="early-copy"):
            jobs.update_model(d / "m", d / "early-copy.zarr")
    jobs.project_model(d / "m", [str(d / "day-0.zarr")], d / "o.zarr")
    jobs.fit_model(d / "day-1.zarr", d / "m", overwrite=True)  # o.zarr holds rows m lacks
    jobs.project_model(d / "m", [str(d / "day-1.zarr")], d / "o.zarr", mode="append",
                       reproject_above=180)
    shutil.copytree(d / "day-0.zarr", d / "copy.zarr")
    before = (sp.load(d / "m").meta_["version"], store.open_output(d / "o.zarr").attrs.asdict())
    # the append's rewrite in the model's frame re-reads what OUT holds: the copy is refused there
    with pytest.raises(SourceChangedError, match=r"copy\.zarr has the same 300 rows .*day-0\.zarr"):
        jobs.project_model(d / "m", [str(d / "copy.zarr")], d / "o.zarr", mode="append",
                           reproject_above=0)
    # in one pass, the output's ledger is checked before the model is written
    (d / "job.toml").write_text(f'[input]\npaths = ["{d}/copy.zarr"]\n[model]\npath = "{d}/m"\n'
                                f'mode = "update"\n[output]\npath = "{d}/o.zarr"\n'
                                'mode = "append"\n')
    assert main(["run", str(d / "job.toml")]) == 2
    err = capsys.readouterr().err
    assert re.search(r"copy\.zarr has the same 300 rows .* which output .*o\.zarr holds", err)
    assert (sp.load(d / "m").meta_["version"],
            store.open_output(d / "o.zarr").attrs.asdict()) == before


def test_two_datasets_of_one_hdf5_file_are_two_sources(days):
    h5py = pytest.importorskip("h5py")
    d, X, y = days
    with h5py.File(d / "d.h5", "w") as f:
        for day in (1, 2):
            f[f"day{day}/X"], f[f"day{day}/y"] = X[rows(day)], y[rows(day)]
    jobs.fit_model(f"{d / 'd.h5'}:/day1/X", d / "m", y="/day1/y")
    jobs.project_model(d / "m", [f"{d / 'd.h5'}:/day1/X"], d / "o.zarr", y="/day1/y")
    jobs.update_model(d / "m", f"{d / 'd.h5'}:/day2/X", y="/day2/y")
    report = jobs.project_model(d / "m", [f"{d / 'd.h5'}:/day2/X"], d / "o.zarr", y="/day2/y",
                                mode="append")
    assert report["rows"] == 600
    assert_fit_on(d / "m", X[rows(1, 2)], y[rows(1, 2)])
    # one dataset with other labels is the same rows: refused
    with h5py.File(d / "d.h5", "a") as f:
        f["day1/other"] = 1 - y[rows(1)]
    with pytest.raises(SourceChangedError, match="counted twice"):
        jobs.update_model(d / "m", f"{d / 'd.h5'}:/day1/X", y="/day1/other")


def test_rows_of_no_source_are_never_dropped_silently(days):
    """Saving over a ledgered model dropped its ledger; forget then dropped rows added in Python."""
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    model = sp.load(d / "m")
    model.partial_fit(X[rows(1)], y[rows(1)])
    with pytest.raises(InputError, match=r"ledger records 1 source .* save it to a new path"):
        model.save(d / "m")
    assert sp.load(d / "m").stats_.n_samples == 300
    # a model fitted in Python, then updated from sources: forget and windows refuse
    sp.BoundaryProjector().fit(X[rows(0)], y[rows(0)]).save(d / "py")
    no_source = r"holds 300 rows of no source .* cannot tell whether the rows of .*day-1.zarr"
    with pytest.warns(sp.StreamprojWarning, match=no_source):
        jobs.update_model(d / "py", d / "day-1.zarr")
    with pytest.warns(sp.StreamprojWarning, match=no_source.replace("day-1", "day-2")):
        jobs.update_model(d / "py", d / "day-2.zarr")
    with pytest.raises(sp.errors.ModelError, match=r"holds 300 rows of no source .* which forget "
                                                   r"cannot keep"):
        jobs.forget_sources(d / "py", d / "day-2.zarr")
    with pytest.raises(sp.errors.ModelError, match="which its window"), \
            pytest.warns(sp.StreamprojWarning, match="holds 300 rows of no source"):
        jobs.update_model(d / "py", d / "day-3.zarr", keep_last=1)
    assert_fit_on(d / "py", X[rows(0, 1, 2)], y[rows(0, 1, 2)])


# ------------------------------------------------------- per-source summary files
def _summary_files(model_dir):
    """``{version: {file name: os.stat}}`` of each version's per-source summaries."""
    return {v.name: {f.name: f.stat() for f in sorted((v / "summaries").iterdir())}
            for v in sorted(model_dir.glob("v*"))}


def _count_summary_reads(monkeypatch):
    reads = []
    real = store._summary_of
    monkeypatch.setattr(store, "_summary_of",
                        lambda arrays, where: reads.append(where) or real(arrays, where))
    return reads


def test_an_update_links_the_summaries_it_keeps_and_reads_none_of_them(days, monkeypatch):
    d, X, y = days
    jobs.fit_model([d / "day-0.zarr", d / "day-1.zarr"], d / "m")
    before = _summary_files(d / "m")["v000001"]
    assert sorted(before) == ["s000001.npz", "s000002.npz"]
    reads = _count_summary_reads(monkeypatch)
    jobs.update_model(d / "m", d / "day-2.zarr")  # a new source: no summary read
    assert reads == []
    jobs.update_model(d / "m", str(d / "day-*.zarr"))
    assert reads == []
    files = _summary_files(d / "m")
    assert sorted(files) == ["v000002", "v000003"]  # v000001 pruned; its files live on
    for name, st in before.items():  # the same bytes, never written again
        assert files["v000003"][name].st_ino == st.st_ino
        assert files["v000003"][name].st_nlink == 2  # v000002's name and v000003's
    assert_fit_on(d / "m", X, y)
    # a grown source: its own summary is read (and written anew), no other
    g = zarr.open_group(str(d / "day-4.zarr"), mode="a")
    g["X"].resize((400, 5))
    g["y"].resize((400,))
    g["X"][300:], g["y"][300:] = X[:100], y[:100]
    jobs.update_model(d / "m", d / "day-4.zarr")
    assert len(reads) == 1
    assert reads[0].endswith("/summaries/s000005.npz")
    latest = _summary_files(d / "m")["v000004"]
    assert latest["s000005.npz"].st_ino != files["v000003"]["s000005.npz"].st_ino
    assert latest["s000001.npz"].st_ino == before["s000001.npz"].st_ino
    # forget reads the rest and equals a fit on them; merged summaries stay exact
    jobs.forget_sources(d / "m", d / "day-4.zarr")
    assert_fit_on(d / "m", X[rows(0, 1, 2, 3)], y[rows(0, 1, 2, 3)])
    assert jobs.model_info(d / "m")["per_source_summaries"] == 4


def test_summaries_are_copied_where_the_file_system_has_no_hard_links(days, monkeypatch):
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")

    def no_links(*_args):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(store.os, "link", no_links)
    jobs.update_model(d / "m", d / "day-1.zarr")
    files = _summary_files(d / "m")
    old, new = files["v000001"]["s000001.npz"], files["v000002"]["s000001.npz"]
    assert old.st_ino != new.st_ino
    assert new.st_nlink == 1
    assert ((d / "m/v000001/summaries/s000001.npz").read_bytes()
            == (d / "m/v000002/summaries/s000001.npz").read_bytes())
    jobs.forget_sources(d / "m", d / "day-1.zarr")
    assert_fit_on(d / "m", X[rows(0)], y[rows(0)])


def test_a_model_with_one_summaries_file_is_read_and_written_a_file_a_source(days):
    # versions written before this layout keep every source's summary in summaries.npz
    d, X, y = days
    jobs.fit_model([d / "day-0.zarr", d / "day-1.zarr"], d / "m")
    version = d / "m" / "v000001"
    summaries = dict(store.read_summaries(d / "m").items())
    (version / "summaries.npz").write_bytes(bytes(store._summaries_bytes(summaries)))
    shutil.rmtree(version / "summaries")
    held = store.read_summaries(d / "m")
    assert sorted(held) == ["s000001", "s000002"]
    assert held["s000001"].fingerprint() == summaries["s000001"].fingerprint()
    jobs.update_model(d / "m", d / "day-2.zarr")
    assert sorted(p.name for p in (d / "m/v000002/summaries").iterdir()) == [
        "s000001.npz", "s000002.npz", "s000003.npz"]
    jobs.forget_sources(d / "m", d / "day-0.zarr")
    assert_fit_on(d / "m", X[rows(1, 2)], y[rows(1, 2)])


def test_a_damaged_summary_file_is_one_line_when_it_is_needed(days, capsys):
    d, X, y = days
    jobs.fit_model([d / "day-0.zarr", d / "day-1.zarr"], d / "m")
    damaged = d / "m" / "v000001" / "summaries" / "s000001.npz"
    damaged.write_bytes(damaged.read_bytes()[:100])
    assert main(["update", str(d / "m"), str(d / "day-2.zarr")]) == 0  # not needed: not read
    capsys.readouterr()
    before = sorted(p.name for p in (d / "m").iterdir())
    assert main(["forget", str(d / "m"), str(d / "day-1.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "v000002/summaries/s000001.npz is damaged" in err[0]
    assert sorted(p.name for p in (d / "m").iterdir()) == before


@pytest.mark.parametrize(("summary", "message"), [
    # a sound summary of other rows copied over a source's: forget left 600 rows of sources of
    # 300 and 300, silently; other features were a ValueError traceback; other labels or a new
    # class changed the model's classes
    (lambda X, y: sp.accumulate(X[:600], y[:600]),
     "it summarises 600 rows, but model.json's ledger holds 300 rows of"),
    (lambda X, y: sp.accumulate(X[:300, :4], y[:300]), "it summarises 4 features, but the model 5"),
    (lambda X, y: sp.accumulate(X[:300], np.where(y[:300] == 1, "a", "b")),
     "its classes are text labels (['a', 'b']), but the model's are numeric ([0, 1])"),
    (lambda X, y: sp.accumulate(X[:300], np.arange(300) % 3),
     "it holds the class 2, which the model's classes ([0, 1]) do not include"),
])
def test_a_summary_file_of_other_rows_is_refused_where_it_is_merged(days, capsys, summary, message):
    d, X, y = days
    jobs.fit_model([d / "day-0.zarr", d / "day-1.zarr"], d / "m")
    jobs.fit_model(d / "day-2.zarr", d / "other")
    for model, sid in (("m", "s000002"), ("other", "s000001")):
        summary(X, y).save(d / model / "v000001" / "summaries" / f"{sid}.npz")
    before = tree(d)
    for argv in (["forget", d / "m", d / "day-0.zarr"], ["update", d / "m", d / "day-3.zarr",
                                                         "--keep-last", "2"],
                 ["merge", d / "day-4-model", d / "other"]):
        if argv[0] == "merge":
            jobs.fit_model(d / "day-4.zarr", d / "day-4-model")
            before = tree(d)
        assert main([str(a) for a in argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        sid = "other/v000001/summaries/s000001" if argv[0] == "merge" else "m/v000001/summaries/s000002"
        assert f"{sid}.npz is damaged: {message}" in err[0]
        assert tree(d) == before


def test_any_source_id_has_a_file_of_its_own_and_none_is_written_through(days, monkeypatch):
    d, X, y = days
    jobs.fit_model([d / "day-0.zarr", d / "day-1.zarr"], d / "m")
    record = store.read_record(d / "m")
    held = store.read_summaries(d / "m")
    one = held["s000001"]
    # ids a hand-edited ledger could hold: case twins (one file on a case-insensitive
    # file system if only quoted), separators, and one too long for a file name
    odd = ["S1", "s1", "a/b", "a%2Fb", "..", "é", "x" * 300]
    names = [store._summary_name(i) for i in odd]
    assert len({n.lower() for n in names}) == len(odd)
    assert all(len(n) <= 200 and "/" not in n for n in names)
    store.write_record(d / "m", record, base=record.version,
                       summaries={**dict.fromkeys(odd, one), "s000002": held["s000002"]})
    back = store.read_summaries(d / "m")
    assert sorted(back) == sorted([*odd, "s000002"])
    assert all(back[i].fingerprint() == one.fingerprint() for i in odd)
    # linked once more: the same ids, nothing read
    store.write_record(d / "m", store.read_record(d / "m"), base="v000002", summaries=back.only(back))
    again = store.read_summaries(d / "m")
    assert sorted(again) == sorted(back)
    assert again["x" * 300].fingerprint() == one.fingerprint()
    # a name that exists is never written through (a link's bytes are the live version's)
    live = d / "m" / "v000003" / "summaries" / "s000002.npz"
    before = live.read_bytes()
    monkeypatch.setattr(store, "_summary_name", lambda sid: "same.npz")
    with pytest.raises(FileExistsError):
        store._write_summaries(d / "twins", {"a": one, "b": one})
    with pytest.raises(FileExistsError):
        store._new_file(d / "m" / "v000003" / "summaries" / "s000002.npz", b"overwritten")
    assert live.read_bytes() == before


def test_a_reader_without_the_lock_is_told_to_rerun_when_its_version_moves_on(days, monkeypatch):
    d, X, y = days
    jobs.fit_model(d / "day-0.zarr", d / "m")
    real = store.os.listdir
    raced = []

    def listdir(path):
        if str(path).endswith("/summaries") and not raced:  # two updates land meanwhile
            raced.append(1)
            jobs.update_model(d / "m", d / "day-1.zarr")
            jobs.update_model(d / "m", d / "day-2.zarr")
        return real(path)

    monkeypatch.setattr(store.os, "listdir", listdir)
    with pytest.raises(sp.ModelError, match="moved on from version v000001 while this job read it; "
                                             "rerun the job"):
        store.read_summaries(d / "m")
    monkeypatch.setattr(store.os, "listdir", real)
    assert sorted(store.read_summaries(d / "m")) == ["s000001", "s000002", "s000003"]


def test_a_nightly_run_lists_each_source_once_and_opens_only_what_changed(days, monkeypatch,
                                                                         capsys):
    # the model's ledger and the output's both check every held source; one listing each
    # (on an object store a LIST call per source, which grew with every night)
    from streamproj import sources

    d, X, y = days
    (d / "later").mkdir()
    for i in (3, 4):
        (d / f"day-{i}.zarr").rename(d / "later" / f"day-{i}.zarr")
    assert main(["run", str(_config(d, 90.0))]) == 0
    (d / "later" / "day-3.zarr").rename(d / "day-3.zarr")
    capsys.readouterr()
    listed, opened = [], []
    real = sources.listing_digest
    monkeypatch.setattr(sources, "listing_digest",
                        lambda url, kind: listed.append(url) or real(url, kind))
    real_open = jobs.open_source
    monkeypatch.setattr(jobs, "open_source",
                        lambda url, *a, **k: opened.append(url) or real_open(url, *a, **k))
    assert main(["run", str(_config(d, 90.0)), "--json"]) == 0
    assert sorted(listed) == sorted(str((d / f"day-{i}.zarr").resolve()) for i in range(4))
    # the days both ledgers hold with the same listing are not opened (8 ms a store, every
    # night, for every day a glob matches)
    assert opened == [str((d / "day-3.zarr").resolve())]
    assert_fit_on(d / "m", X[rows(0, 1, 2, 3)], y[rows(0, 1, 2, 3)])
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [r["status"] for r in steps[0]["sources"]] == ["skipped"] * 3 + ["merged"]
    assert [r["rows_written"] for r in steps[1]["sources"]] == [0, 0, 0, 300]
    opened.clear()
    assert main(["run", str(_config(d, 90.0)), "--json"]) == 0  # nothing new: the last is opened
    assert opened == [str((d / "day-3.zarr").resolve())]
    assert "day-3.zarr and 3 more unchanged (not opened): all 1,200 rows were merged before" in \
        json.loads(capsys.readouterr().out)["steps"][0]["message"]
    # and a source changed since is still caught by its listing and fingerprint
    g = zarr.open_group(str(d / "day-1.zarr"), mode="a")
    g["X"][0] = X[300] * 2
    assert main(["run", str(_config(d, 90.0))]) == 2


@pytest.mark.parametrize("path", ["one pass", "two steps", "refit"])
def test_a_job_that_could_not_rewrite_its_output_leaves_the_model_as_it_was(days, path):
    # The model moves past reproject_above_degrees, so the project step must rewrite OUT in the
    # new frame from every source OUT holds; one of them is gone. This was found after the
    # model's new version was written (exit 2 after a write); now before anything is.
    d, X, y = days
    (d / "later").mkdir()
    for i in (1, 2, 3, 4):
        (d / f"day-{i}.zarr").rename(d / "later" / f"day-{i}.zarr")
    job = d / "job.toml"
    job.write_text(f'''
[input]
paths = ["day-*.zarr"]
[model]
path = "m"
mode = "{'fit' if path == 'refit' else 'auto'}"
[output]
path = "o.zarr"
mode = "auto"
reproject_above_degrees = 0.0
''')
    assert main(["run", str(job)]) == 0
    (d / "later" / "day-1.zarr").rename(d / "day-1.zarr")
    if path == "two steps":  # OUT behind the model: the job cannot do both in one pass
        jobs.update_model(d / "m", str(d / "day-*.zarr"))
    shutil.move(d / "day-0.zarr", d / "later" / "day-0.zarr")
    (d / "later" / "day-2.zarr").rename(d / "day-2.zarr")
    before = (sorted(p.name for p in (d / "m").iterdir()), (d / "m" / "CURRENT").read_text(),
              store.open_output(d / "o.zarr").attrs.asdict())
    with pytest.raises(InputError, match=r"model .*m left as it was: cannot rewrite .*o\.zarr in "
                                         r"the model's frame: it holds 300 rows of .*day-0\.zarr, "
                                         r"which cannot be read now"):
        jobs.run_job(load_config(job))
    assert before == (sorted(p.name for p in (d / "m").iterdir()), (d / "m" / "CURRENT").read_text(),
                      store.open_output(d / "o.zarr").attrs.asdict())
    # given back, the same job rewrites OUT in the new frame from all of its rows
    shutil.move(d / "later" / "day-0.zarr", d / "day-0.zarr")
    report = jobs.run_job(load_config(job))
    assert report["steps"][1]["output_action"] == "rewritten"
    held = rows(0, 1, 2)
    assert_fit_on(d / "m", X[held], y[held])
    np.testing.assert_allclose(zarr.open_group(str(d / "o.zarr"), mode="r")["projection"][:],
                               sp.load(d / "m").transform(X[held]), rtol=0, atol=1e-12)


def test_a_parquet_file_replaced_mid_folder_by_as_many_rows_is_refused(days):
    # The fingerprint reads the folder's first and last 256 rows: a middle file replaced by one
    # of as many rows passed it, and the model kept rows the folder no longer holds.
    d, X, y = days
    (d / "pq").mkdir()

    def write(i, values, **kw):
        pd.DataFrame(values, columns=COLS).assign(label=y[rows(i)]).to_parquet(
            d / "pq" / f"p{i}.parquet", **kw)

    for i in (0, 1, 2):
        write(i, X[rows(i)])
    jobs.fit_model(d / "pq", d / "m", label="label")
    jobs.project_model(d / "m", [str(d / "pq")], d / "o.zarr", label="label")
    assert all(len(e["file_stats"]) == 3 for e in sp.load(d / "m").meta_["sources"])
    before = (sp.load(d / "m").model_id_, store.open_output(d / "o.zarr").attrs.asdict())
    # the same rows again, in other row groups and compression: not a change; other rows by a
    # writer that leaves the statistics out: nothing to tell them by (left to --verify)
    write(1, X[rows(1)], row_group_size=37, compression="gzip")
    assert jobs.update_model(d / "m", d / "pq", label="label")["status"] == "unchanged"
    write(1, X[rows(1)] * 1.001, write_statistics=False)
    assert jobs.update_model(d / "m", d / "pq", label="label")["status"] == "unchanged"
    # other values, as many rows: refused by the model and by OUT, both left as they were
    write(1, X[rows(1)] * 1.001)
    with pytest.raises(SourceChangedError, match=r"p1\.parquet of .*pq.* was replaced by a file "
                                                 r"of as many rows whose Parquet statistics"):
        jobs.update_model(d / "m", d / "pq", label="label")
    with pytest.raises(SourceChangedError, match=r"p1\.parquet .* was replaced"):
        jobs.project_model(d / "m", [str(d / "pq")], d / "o.zarr", label="label", mode="append")
    assert before == (sp.load(d / "m").model_id_, store.open_output(d / "o.zarr").attrs.asdict())
    # put back, a new file is merged (and appended) as ever
    write(1, X[rows(1)])
    write(3, X[rows(3)])
    assert jobs.update_model(d / "m", d / "pq", label="label")["rows_added"] == 300
    assert_fit_on(d / "m", X[rows(0, 1, 2, 3)], y[rows(0, 1, 2, 3)])


@pytest.mark.parametrize("case", ["no record", "held row edited", "no labels", "rewrite"])
def test_a_job_whose_project_step_would_refuse_leaves_the_model_as_it_was(days, case):
    d, X, y = days
    (d / "later").mkdir()
    for i in (1, 2, 3, 4):
        (d / f"day-{i}.zarr").rename(d / "later" / f"day-{i}.zarr")
    # (appended, not rewritten in the new frame: a rewrite reads the sources as they are now)
    out_input = 'input = ["extra*.zarr"]\nreproject_above_degrees = 90.0\n' if case in (
        "held row edited", "no labels") else ""
    mode = {"no record": "append", "rewrite": "rewrite"}.get(case, "auto")
    job = d / "job.toml"
    job.write_text(f'[input]\npaths = ["day-*.zarr"]\n[model]\npath = "m"\n'
                   f'[output]\npath = "o.zarr"\nmode = "{mode}"\n{out_input}')
    if case == "no record":  # an output written from rows in memory keeps no source record
        jobs.fit_model(d / "day-0.zarr", d / "m")
        jobs.project(sp.load(d / "m"), X[rows(0)], d / "o.zarr", y=y[rows(0)])
    else:
        if out_input:  # a source only OUT reads (a test set)
            write_zarr(d / "extra.zarr", X[rows(4)][:50], y[rows(4)][:50], chunk_rows=50)
        assert main(["run", str(job)]) == 0
    if case == "held row edited":  # changed since OUT took its rows
        zarr.open_group(str(d / "extra.zarr"), mode="a")["X"][0] = X[0] * 3
    if case == "no labels":  # another one, without labels, for an OUT that holds them
        write_zarr(d / "extra2.zarr", X[rows(4)][50:90], None, chunk_rows=40)
    (d / "later" / "day-1.zarr").rename(d / "day-1.zarr")
    before = (sorted(p.name for p in (d / "m").iterdir()), (d / "m" / "CURRENT").read_text(),
              store.open_output(d / "o.zarr").attrs.asdict())
    expected = {"no record": r"cannot append to .*records no frame or source rows.*\[output\] mode",
                "held row edited": r"first 50 rows of .*extra\.zarr/X .* have changed since; "
                                   r"write .*o\.zarr afresh \(\[output\] mode = \"rewrite\"",
                "no labels": r"holds labels \(y\) but .*extra2\.zarr/y is missing; .* write "
                             r".*o\.zarr afresh \(\[output\] mode",
                "rewrite": r"\[output\] path .*o\.zarr exists and \[output\] overwrite is false"}
    with pytest.raises(sp.errors.StreamprojError, match=expected[case]) as err:
        jobs.run_job(load_config(job))
    if case != "rewrite":  # (refused with the job's paths, before the model step)
        assert str(err.value).startswith("model ")
        assert "left as it was" in str(err.value)
    assert before == (sorted(p.name for p in (d / "m").iterdir()), (d / "m" / "CURRENT").read_text(),
                      store.open_output(d / "o.zarr").attrs.asdict())


@pytest.mark.parametrize("change", ["grown", "shrunk"])
def test_a_store_resized_under_the_same_listing_is_opened_not_skipped(tmp_path, change):
    # Equal listings (coarse clocks, copies that keep times, a store that grew between a job's
    # opening and its listing) do not prove equal rows: the store's metadata is read too.
    from streamproj import sources

    X, y = make_classes(n=1200, p=5, k=2, seed=22)
    for i in (0, 1):  # uncompressed 1,000-row chunks: resizing keeps every file's size
        g = zarr.open_group(str(tmp_path / f"day-{i}.zarr"), mode="w")
        g.create_array("X", data=X[i * 600:i * 600 + 600], chunks=(1000, 5), compressors=None)
        g.create_array("y", data=y[i * 600:i * 600 + 600], chunks=(1000,), compressors=None)
    jobs.fit_model(str(tmp_path / "day-*.zarr"), tmp_path / "m")
    day0 = tmp_path / "day-0.zarr"
    times = {p: (p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in day0.rglob("*")}
    g = zarr.open_group(str(day0), mode="a")
    n = 900 if change == "grown" else 300
    g["X"].resize((n, 5))
    g["y"].resize((n,))
    if change == "grown":
        g["X"][600:] = X[:300] + 1.0
        g["y"][600:] = y[:300]
    for p, (a, m) in times.items():  # the same names, sizes and times as when merged
        os.utime(p, ns=(a, m))
    (entry,) = [e for e in sp.load(tmp_path / "m").meta_["sources"] if "day-0" in e["url"]]
    assert sources.listing_digest(entry["url"], "zarr") == entry["stamp"]  # the listing cannot tell
    if change == "grown":
        report = jobs.update_model(tmp_path / "m", str(tmp_path / "day-*.zarr"))
        assert report["sources"][0]["status"] == "grown"
        assert report["rows_added"] == 300
    else:
        with pytest.raises(SourceChangedError, match="rows were removed"):
            jobs.update_model(tmp_path / "m", str(tmp_path / "day-*.zarr"))


# ------------------------------------------------------------------- relocate
def _nightly(d, data):
    """A nightly job over ``data/day-*.zarr`` (relative to ``d``): model ``m``, output ``o.zarr``."""
    path = d / "job.toml"
    path.write_text(f'[input]\npaths = ["{data}/day-*.zarr"]\n[model]\npath = "m"\n'
                    '[output]\npath = "o.zarr"\nmode = "auto"\nreproject_above_degrees = 90.0\n')
    return path


def _opened(monkeypatch):
    """The inputs a job opens, and the Zarr stores whose rows (X, 5 features) it reads."""
    opened, read = [], set()
    real_open = jobs.open_source
    monkeypatch.setattr(jobs, "open_source",
                        lambda url, *a, **k: opened.append(url) or real_open(url, *a, **k))
    on_row_reads(monkeypatch, 5, lambda where, _rows: read.add(where.split(".zarr")[0] + ".zarr"))
    return opened, read


def test_a_nightly_window_leaves_the_stores_it_dropped_unopened(days, monkeypatch, capsys):
    # keep_last = 2 and an output that keeps every row: each store the model dropped was opened
    # every night from then on (both ledgers must hold a store to leave it shut, and the model's
    # dropped ones did not count), so a night's cost grew with the days
    d, X, y = days
    (d / "data").mkdir()
    job = d / "job.toml"
    job.write_text('[input]\npaths = ["data/day-*.zarr"]\n[model]\npath = "m"\nkeep_last = 2\n'
                   '[output]\npath = "o.zarr"\nmode = "append"\n')
    monkeypatch.chdir(d)
    for night in range(5):
        (d / f"day-{night}.zarr").rename(d / "data" / f"day-{night}.zarr")
        opened, read = _opened(monkeypatch)
        assert main(["run", str(job), "--json"]) == 0
        steps = json.loads(capsys.readouterr().out)["steps"]
        if night == 0:  # (fitted and projected: two steps)
            continue
        newest = str(d.resolve() / "data" / f"day-{night}.zarr")
        assert opened == [newest]  # the new store alone, whatever the model dropped before
        assert read == {"file://" + newest}
        assert [r["status"] for r in steps[0]["sources"]] == (
            ["evicted before"] * max(0, night - 2) + ["skipped"] * min(night, 2) + ["merged"])
        assert [r["rows_written"] for r in steps[1]["sources"]] == [0] * night + [300]
    assert_fit_on(d / "m", X[rows(3, 4)], y[rows(3, 4)])
    assert store.open_output(d / "o.zarr")["projection"].shape[0] == 1500
    # a dropped store that changed since is opened again (and, dropped, still not merged)
    write_zarr(d / "data" / "day-0.zarr", X[rows(0)][::-1], y[rows(0)][::-1], chunk_rows=80)
    opened, _ = _opened(monkeypatch)
    assert main(["run", str(job)]) == 2  # OUT holds day-0's rows, which changed
    assert str(d.resolve() / "data" / "day-0.zarr") in opened
    assert "day-0.zarr" in one_error_line(capsys)


def test_a_moved_folder_of_zarr_stores_is_relocated_and_the_nightly_run_skips_it(days, monkeypatch,
                                                                                capsys):
    d, X, y = days
    (d / "data").mkdir()
    for i in range(5):
        (d / f"day-{i}.zarr").rename(d / "data" / f"day-{i}.zarr")
    (d / "later").mkdir()
    (d / "data" / "day-3.zarr").rename(d / "later" / "day-3.zarr")
    (d / "data" / "day-4.zarr").rename(d / "later" / "day-4.zarr")
    assert main(["run", str(_nightly(d, "data"))]) == 0
    jobs.forget_sources(d / "m", d / "data" / "day-0.zarr")  # dropped: must stay out when moved
    old = sp.load(d / "m")
    old_stats, old_solution = store.read_record(d / "m").stats, store.read_record(d / "m").solution
    summaries = _summary_files(d / "m")[old.meta_["version"]]
    (d / "data").rename(d / "archive")  # mv /data/events /archive/events
    job = _nightly(d, "archive")
    capsys.readouterr()
    assert main(["run", str(job)]) == 2  # refused as copies, and the message says what to do
    err = one_error_line(capsys)
    assert re.search(r"archive/day-0\.zarr has the same 300 rows .* which model .* dropped before "
                     r".* leave it out: .* \(if the data moved, tell it so with 'streamproj "
                     r"relocate .*m OLD NEW'\)$", err), err
    with pytest.raises(SourceChangedError, match=r"archive/day-1\.zarr has the same 300 rows .* "
                                                 r"which model .* holds \(moved or copied\?\): .* "
                                                 r"tell it so with 'streamproj relocate .*m OLD NEW' "
                                                 r"\(or refit the model with --overwrite\)$"):
        jobs.update_model(d / "m", d / "archive" / "day-1.zarr")
    # relocated from the folder as typed (relative, with a trailing slash), model and output
    monkeypatch.chdir(d)
    reads = _count_summary_reads(monkeypatch)
    assert main(["relocate", "m", "data/", "archive", "--output", "o.zarr", "--json"]) == 0
    assert reads == []  # no summary read, none written: each is linked into the new version
    rep = json.loads(capsys.readouterr().out)
    assert rep["from"] == str(d.resolve() / "data")
    assert rep["to"] == str(d.resolve() / "archive")
    assert [(s["from"], s["url"], s["rows"], s["rows_new"]) for s in rep["sources"]] == [
        (str(d.resolve() / "data" / f"day-{i}.zarr"), str(d.resolve() / "archive" / f"day-{i}.zarr"),
         300, 0) for i in (1, 2)]
    assert [e["url"] for e in rep["evicted"]] == [str(d.resolve() / "archive" / "day-0.zarr")]
    assert rep["outputs"][0]["status"] == "relocated"
    assert len(rep["outputs"][0]["sources"]) == 3  # the output still holds day-0's rows
    # the model's numbers are the same, bit for bit: summaries, solution, model id
    new = sp.load(d / "m")
    assert new.meta_["version"] != old.meta_["version"]
    assert new.model_id_ == old.model_id_
    record = store.read_record(d / "m")
    for (k, a), (k2, b) in zip(sorted(old_stats.to_arrays().items()),
                               sorted(record.stats.to_arrays().items()), strict=True):
        assert k == k2
        assert np.array_equal(a, b), k
    for k in old_solution:
        assert np.array_equal(old_solution[k], record.solution[k]), k
    for name, st in summaries.items():  # the very same files (hard links)
        assert _summary_files(d / "m")[new.meta_["version"]][name].st_ino == st.st_ino
    event = record.history[-1]
    assert (event["event"], event["from"], event["to"]) == ("relocate", rep["from"], rep["to"])
    assert event["time"]
    held = {e["url"]: e for e in record.sources}
    assert sorted(held) == [str(d.resolve() / "archive" / f"day-{i}.zarr") for i in (1, 2)]
    assert all(e["added"] and e["batches"] and e["id"] for e in held.values())
    # the next night: the moved stores are not even opened, one new day is merged and appended
    (d / "later" / "day-3.zarr").rename(d / "archive" / "day-3.zarr")
    opened, read = _opened(monkeypatch)
    assert main(["run", str(job), "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    # (day-0, which the model dropped and OUT holds, is left shut too)
    assert opened == [str(d.resolve() / "archive" / "day-3.zarr")]
    assert read == {"file://" + str(d.resolve() / "archive" / "day-3.zarr")}
    assert [r["status"] for r in steps[0]["sources"]] == ["evicted before", "skipped", "skipped",
                                                          "merged"]
    assert [r["rows_written"] for r in steps[1]["sources"]] == [0, 0, 0, 300]
    assert steps[1]["one_read"] is True
    assert_fit_on(d / "m", X[rows(1, 2, 3)], y[rows(1, 2, 3)])
    assert store.open_output(d / "o.zarr")["projection"].shape[0] == 1200
    # update by the new glob: unchanged; forget by the new URL works
    assert jobs.update_model(d / "m", "archive/day-*.zarr")["status"] == "unchanged"
    jobs.forget_sources(d / "m", "archive/day-1.zarr")
    assert_fit_on(d / "m", X[rows(2, 3)], y[rows(2, 3)])


def test_a_moved_parquet_folder_is_relocated_and_skipped_without_reading_its_rows(days,
                                                                                 monkeypatch):
    from streamproj import sources

    d, X, y = days
    (d / "pq").mkdir()

    def write(folder, i):
        pd.DataFrame(X[rows(i)], columns=COLS).assign(label=y[rows(i)]).to_parquet(
            folder / f"p{i}.parquet", row_group_size=100)

    for i in (0, 1, 2):
        write(d / "pq", i)
    jobs.fit_model(d / "pq", d / "m", label="label")
    jobs.project_model(d / "m", [str(d / "pq")], d / "o.zarr", label="label")
    shutil.move(d / "pq", d / "moved")
    write(d / "moved", 3)  # and it grew since: those rows are the next update's
    rep = jobs.relocate_sources(d / "m", d / "pq", d / "moved", [d / "o.zarr"])
    assert [(s["rows"], s["rows_new"]) for s in rep["sources"]] == [(900, 300)]
    (entry,) = sp.load(d / "m").meta_["sources"]
    assert entry["url"] == str((d / "moved").resolve())
    assert entry["stamp"] is None  # grown: its new rows are found, and read, by the next update
    assert len(entry["file_stats"]) == 3  # those of the rows the model holds
    assert jobs.update_model(d / "m", d / "moved", label="label")["rows_added"] == 300
    assert_fit_on(d / "m", X[rows(0, 1, 2, 3)], y[rows(0, 1, 2, 3)])
    assert jobs.project_model(d / "m", [str(d / "moved")], d / "o.zarr", label="label",
                              mode="append", reproject_above=90)["rows_written"] == 300
    # moved again, unchanged: the next update and append read no row of it
    shutil.move(d / "moved", d / "again")
    jobs.relocate_sources(d / "m", d / "moved", d / "again", d / "o.zarr")
    monkeypatch.setattr(sources, "_read_parquet_rows",
                        lambda *a, **k: pytest.fail("a row of a relocated source was read"))
    assert jobs.update_model(d / "m", d / "again", label="label")["status"] == "unchanged"
    assert jobs.project_model(d / "m", [str(d / "again")], d / "o.zarr", label="label",
                              mode="append", reproject_above=90)["output_action"] == "unchanged"


def test_a_file_moved_by_its_own_name_and_a_folder_left_as_a_link(days):
    d, X, y = days
    jobs.fit_model([d / "day-0.zarr", d / "day-1.zarr"], d / "m")
    # OLD and NEW may be a source itself
    (d / "day-0.zarr").rename(d / "first.zarr")
    jobs.relocate_sources(d / "m", d / "day-0.zarr", d / "first.zarr")
    assert jobs.update_model(d / "m", [d / "first.zarr", d / "day-1.zarr"])["status"] == "unchanged"
    # a folder moved and replaced by a link to its new place: OLD is the link's name as written
    (d / "data").mkdir()
    (d / "day-2.zarr").rename(d / "data" / "day-2.zarr")
    jobs.update_model(d / "m", d / "data" / "day-2.zarr")
    (d / "data").rename(d / "archive")
    (d / "data").symlink_to(d / "archive")
    rep = jobs.relocate_sources(d / "m", d / "data", d / "archive")
    assert rep["from"] == str(d.resolve() / "data")
    assert jobs.update_model(d / "m", str(d / "data" / "day-*.zarr"))["status"] == "unchanged"
    assert_fit_on(d / "m", X[rows(0, 1, 2)], y[rows(0, 1, 2)])


def _moved_project(d):
    """Model ``m`` and output ``o.zarr`` of ``data/day-{0,1,2}.zarr``, the folder moved to ``new``."""
    (d / "data").mkdir()
    for i in (0, 1, 2):
        (d / f"day-{i}.zarr").rename(d / "data" / f"day-{i}.zarr")
    jobs.fit_model(str(d / "data" / "day-*.zarr"), d / "m")
    jobs.project_model(d / "m", [str(d / "data" / "day-*.zarr")], d / "o.zarr")
    (d / "data").rename(d / "new")


@pytest.mark.parametrize("case", ["missing", "changed", "shrunk", "no labels", "not a prefix",
                                  "one location", "taken", "output's source changed",
                                  "no output", "output from memory", "a file in the output",
                                  "read-only output"])
def test_a_relocation_that_cannot_be_checked_is_refused_and_writes_nothing(days, case, capsys):
    d, X, y = days
    _moved_project(d)
    argv = ["relocate", d / "m", d / "data", d / "new", "--output", d / "o.zarr"]
    new = d / "new"
    if case == "missing":  # one store was not moved with the others
        shutil.rmtree(new / "day-1.zarr")
    elif case == "changed":
        zarr.open_group(str(new / "day-2.zarr"), mode="a")["X"][-1] = X[0]
    elif case == "shrunk":
        g = zarr.open_group(str(new / "day-1.zarr"), mode="a")
        g["X"].resize((200, 5))
        g["y"].resize((200,))
    elif case == "no labels":
        shutil.rmtree(new / "day-0.zarr" / "y")
    elif case == "not a prefix":  # .../dat is no prefix of .../data
        argv[2:4] = [d / "dat", d / "new"]
    elif case == "one location":
        argv[2:4] = [d / "new", d / "new/"]
        jobs.relocate_sources(d / "m", d / "data", d / "new", d / "o.zarr")
    elif case == "taken":  # day-0's new place is where another source of the model lies
        write_zarr(d / "other" / "day-0.zarr", X[rows(4)], y[rows(4)], chunk_rows=80)
        jobs.update_model(d / "m", d / "other" / "day-0.zarr")
        shutil.rmtree(d / "other" / "day-0.zarr")
        shutil.copytree(new / "day-0.zarr", d / "other" / "day-0.zarr")
        argv[2:4] = [d / "data" / "day-0.zarr", d / "other" / "day-0.zarr"]
    elif case == "output's source changed":  # OUT holds a source the model does not: checked too
        new.rename(d / "data")
        write_zarr(d / "data" / "extra.zarr", X[rows(4)][:50], y[rows(4)][:50], chunk_rows=50)
        jobs.project_model(d / "m", [str(d / "data" / "extra.zarr")], d / "o.zarr", mode="append")
        (d / "data").rename(new)
        zarr.open_group(str(new / "extra.zarr"), mode="a")["X"][0] = X[1]
    elif case == "no output":
        argv[-1] = d / "nothing.zarr"
    elif case == "output from memory":  # no sources recorded at all
        jobs.project(sp.load(d / "m"), X[:10], d / "mem.zarr")
        argv[-1] = d / "mem.zarr"
    elif case == "a file in the output":  # refused on the output after the model was relocated
        (d / "o.zarr" / "notes.txt").write_text("mine")
    elif case == "read-only output":
        (d / "o.zarr").chmod(0o555)
    before = {p: tree(d / p) for p in ("m", "o.zarr")}
    assert main([str(a) for a in argv]) == 2
    err = one_error_line(capsys)
    expected = {
        "missing": r"cannot relocate .*data/day-1\.zarr \(model .*m holds 300 rows of it\) to "
                   r".*new/day-1\.zarr: it cannot be read there \(.*\); move it there first, or "
                   r"give NEW where it went$",
        "changed": r"cannot relocate .*data/day-2\.zarr to .*new/day-2\.zarr: the first 300 rows "
                   r"of .*new/day-2\.zarr/X or their labels .*new/day-2\.zarr/y \(taken into model "
                   r".*\) have changed since; these are "
                   r"not the rows model .*m took: give NEW where they moved unchanged, or refit",
        "shrunk": r"cannot relocate .*data/day-1\.zarr to .*: .*day-1\.zarr/X has 200 rows but "
                  r"model .*m holds 300 of them .* rows were removed",
        "no labels": r"cannot relocate .*data/day-0\.zarr to .*new/day-0\.zarr: it reads there as "
                     r"zarr X='X', labels=None, but model .*m took it as zarr X='X', labels='y'",
        "not a prefix": r"model .*m and output .*o\.zarr hold no source under .*/dat \(a prefix "
                        r"matches whole folder names\): the sources lie under .*/data; give OLD",
        "one location": r"are one location .*: nothing to relocate",
        "taken": r"cannot relocate to .*other/day-0\.zarr: model .*m holds .*other/day-0\.zarr, "
                 r"which is or overlaps it, as a source of its own",
        "output's source changed": r"cannot relocate .*data/extra\.zarr to .*new/extra\.zarr: the "
                                   r"first 50 rows .* these are not the rows output .*o\.zarr "
                                   r"took: .* rewrite .*o\.zarr with --overwrite",
        "no output": r"no output at .*nothing\.zarr",
        "output from memory": r"output .*mem\.zarr records no sources .* leave --output out",
        "a file in the output": r"o\.zarr is a streamproj output but also holds notes\.txt",
        "read-only output": r"o\.zarr is not writable by you \(mode dr-xr-xr-x\)",
    }[case]
    assert re.search(expected, err), err
    assert {p: tree(d / p) for p in ("m", "o.zarr")} == before  # nothing written


def test_a_relocation_cut_short_before_the_output_is_finished_by_running_it_again(days, capsys):
    # The model is committed first, then the output is swapped in (two stores: no single
    # commit). A model relocated alone leaves the nightly job refusing the output's copies, and
    # says how to go on; the same command, rerun with the output, leaves the model as it is.
    d, X, y = days
    _moved_project(d)
    job = _nightly(d, "new")
    jobs.relocate_sources(d / "m", d / "data", d / "new")
    version = sp.load(d / "m").meta_["version"]
    assert main(["run", str(job)]) == 2
    assert re.search(r"which output .*o\.zarr holds \(moved or copied\?\): .* 'streamproj relocate "
                     r"MODEL OLD NEW --output .*o\.zarr' \(or rewrite", one_error_line(capsys))
    rep = jobs.relocate_sources(d / "m", d / "data", d / "new", [d / "o.zarr"])
    assert (rep["model_status"], rep["version"]) == ("unchanged", version)
    assert rep["outputs"][0]["status"] == "relocated"
    assert main(["relocate", d / "m", d / "data", d / "new", "--output", d / "o.zarr"]) == 2
    assert "hold no source under" in one_error_line(capsys)  # all done: nothing is left there
    write_zarr(d / "new" / "day-3.zarr", X[rows(3)], y[rows(3)], chunk_rows=80)
    assert main(["run", str(job)]) == 0
    assert_fit_on(d / "m", X[rows(0, 1, 2, 3)], y[rows(0, 1, 2, 3)])
    held = store.open_output(d / "o.zarr").attrs["streamproj"]
    assert held["history"][-2]["action"] == "relocated"
    assert [e["url"] for e in held["sources"]] == [str((d / "new" / f"day-{i}.zarr").resolve())
                                                   for i in range(4)]


def test_relocate_verify_reads_every_merged_range_at_the_new_place(days):
    d, X, y = days
    write_zarr(d / "data" / "big.zarr", X[:900], y[:900], chunk_rows=80)
    jobs.fit_model(d / "data" / "big.zarr", d / "m")
    (d / "data").rename(d / "new")
    # a change inside the merged rows that the first and last 256 do not show
    zarr.open_group(str(d / "new" / "big.zarr"), mode="a")["X"][450] = X[0]
    before = tree(d / "m")
    with pytest.raises(SourceChangedError, match=r"cannot relocate .*data/big\.zarr to "
                                                 r".*new/big\.zarr: rows 0\.\.899 of .* changed"):
        jobs.relocate_sources(d / "m", d / "data", d / "new", verify=True)
    assert tree(d / "m") == before
    zarr.open_group(str(d / "new" / "big.zarr"), mode="a")["X"][450] = X[450]
    assert jobs.relocate_sources(d / "m", d / "data", d / "new", verify=True)["model_status"] == \
        "relocated"
    assert_fit_on(d / "m", X[:900], y[:900])


def test_a_relocation_leaves_an_output_holding_none_of_the_moved_sources_as_it_is(days, capsys):
    # the output's read-only and foreign-file checks ran before the plan: an archived
    # (chmod a-w) output that holds none of the moved sources was refused, not "unchanged"
    d, X, y = days
    _moved_project(d)
    jobs.project_model(d / "m", [str(d / "day-3.zarr")], d / "other.zarr")  # (not moved)
    (d / "other.zarr").chmod(0o555)
    try:
        assert main(["relocate", str(d / "m"), str(d / "data"), str(d / "new"), "--output",
                     str(d / "other.zarr"), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert [o["status"] for o in report["outputs"]] == ["unchanged"]
    finally:
        (d / "other.zarr").chmod(0o755)
