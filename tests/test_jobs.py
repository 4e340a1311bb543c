import time
import warnings

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import make_classes, make_coin, write_zarr

import streamproj as sp
from streamproj import jobs, passes, store
from streamproj.cli import main
from streamproj.errors import BadValuesError, OutputExistsError


def test_project_writes_coords_decision_and_labels(tmp_path):
    X, y = make_coin(n=1000)
    group = write_zarr(tmp_path / "in.zarr", X, y, chunk_rows=128)
    m = sp.BoundaryProjector(n_components=3).fit(group["X"], group["y"])
    jobs.project(m, group["X"], tmp_path / "out.zarr", y=group["y"])
    out = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    np.testing.assert_allclose(out["projection"][:], m.transform(X), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(out["decision"][:], m.decision_function(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(out["predicted"][:], m.predict(X))
    np.testing.assert_array_equal(out["y"][:], y)
    assert out["projection"].chunks == (128, 3)
    attrs = out.attrs["streamproj"]
    assert attrs["model_id"] == m.model_id_
    np.testing.assert_array_equal(attrs["components"], m.components_)
    assert out.attrs["axis_names"][:2] == ["signed distance to boundary", "boundary-parallel PC 1"]
    assert out.attrs["complete"] is True


def test_output_opens_in_xarray_with_named_dimensions(tmp_path):
    X, y = make_classes(n=300, p=4, k=3, seed=1)
    m = sp.BoundaryProjector().fit(X, y)
    jobs.project(m, X, tmp_path / "out.zarr", y=y)
    ds = xr.open_zarr(tmp_path / "out.zarr")
    assert ds["projection"].dims == ("row", "component")
    assert ds["decision"].dims == ("row", "class")
    assert ds["y"].dims == ("row",)
    assert ds["class"].values.tolist() == [0, 1, 2]
    assert ds["component"].values.tolist() == ["Fisher direction 1", "Fisher direction 2"]
    # the 0.1 name shadowed Dataset.coords; the contract's name does not
    assert "coords" not in ds.variables


def test_existing_output_needs_overwrite(tmp_path):
    X, y = make_coin(n=200)
    m = sp.BoundaryProjector().fit(X, y)
    jobs.project(m, X, tmp_path / "out.zarr")
    with pytest.raises(OutputExistsError, match="--overwrite .* with --append"):
        jobs.project(m, X, tmp_path / "out.zarr")
    jobs.project(m, X * 2, tmp_path / "out.zarr", overwrite=True)
    (tmp_path / "folder").mkdir()  # not an output: nothing to append to
    (tmp_path / "folder" / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError) as info:
        jobs.project(m, X, tmp_path / "folder")
    assert "--append" not in str(info.value)
    out = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    np.testing.assert_allclose(out["projection"][:], m.transform(X * 2), rtol=1e-13)


def _late_for_early_rows(block, block_info=None):
    # the first chunks finish last: pass 2's first error in time is a later row's
    if block_info[0]["chunk-location"][0] < 3:
        time.sleep(0.3)
    return block


def test_projection_names_the_first_bad_row_not_the_first_chunk_to_fail(tmp_path, capsys):
    # pass 2 said "row 950" of rows with a bad row 120 (chunks of 100): the chunk that
    # failed first in time; pass 1 merges its errors in row order and said 120
    X, y = make_coin(n=2000)
    m = sp.BoundaryProjector(chunk_rows=100).fit(X, y)
    bad = X.copy()
    bad[120, 1] = np.inf
    bad[950, 2] = np.nan
    lazy = da.from_array(bad, chunks=(100, -1)).map_blocks(_late_for_early_rows, dtype=bad.dtype)
    with pytest.raises(BadValuesError, match=r"non-finite value \(inf\) in row 120 \(column 1\)"):
        jobs.project(m, lazy, tmp_path / "out.zarr")
    assert not (tmp_path / "out.zarr").exists()
    # on the command line too, from a stored model, a fresh output and an append; several
    # inputs name the input and its own row
    write_zarr(tmp_path / "good.zarr", X, y, chunk_rows=100)
    write_zarr(tmp_path / "bad.zarr", bad, y, chunk_rows=100)
    assert main(["fit", str(tmp_path / "good.zarr"), "--model", str(tmp_path / "m")]) == 0
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "good.zarr"), "--output",
                 str(tmp_path / "o.zarr")]) == 0
    capsys.readouterr()
    real = passes._project_block

    def late(block, *args, block_info=None, **kwargs):
        _late_for_early_rows(block, block_info)
        return real(block, *args, block_info=block_info, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(passes, "_project_block", late)
        for argv, said in (
                (["project", str(tmp_path / "m"), str(tmp_path / "bad.zarr"), "--output",
                  str(tmp_path / "new.zarr")], "bad.zarr/X has a non-finite value (inf) in row 120"),
                (["project", str(tmp_path / "m"), str(tmp_path / "bad.zarr"), "--output",
                  str(tmp_path / "o.zarr"), "--append"], "in row 120 (column 1)"),
                (["project", str(tmp_path / "m"), str(tmp_path / "good.zarr"),
                  str(tmp_path / "bad.zarr"), "--output", str(tmp_path / "two.zarr")],
                 "bad.zarr/X has a non-finite value (inf) in row 120")):
            assert main(argv) == 2
            assert said in capsys.readouterr().err
    assert not (tmp_path / "new.zarr").exists()
    assert not (tmp_path / "two.zarr").exists()
    np.testing.assert_allclose(store.open_output(tmp_path / "o.zarr")["projection"][:],
                               sp.load(tmp_path / "m").transform(X), rtol=1e-13)

def test_failed_projection_leaves_nothing_and_keeps_the_old_output(tmp_path):
    X, y = make_coin(n=500)
    m = sp.BoundaryProjector(chunk_rows=50).fit(X, y)
    jobs.project(m, X, tmp_path / "out.zarr")
    bad = X.copy()
    bad[437, 1] = np.inf
    with pytest.raises(BadValuesError, match="row 437"):
        jobs.project(m, bad, tmp_path / "fresh.zarr")
    assert not (tmp_path / "fresh.zarr").exists()
    with pytest.raises(BadValuesError, match="row 437"):
        jobs.project(m, bad, tmp_path / "out.zarr", overwrite=True)
    out = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    np.testing.assert_allclose(out["projection"][:], m.transform(X), rtol=1e-13)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zarr"]


def _job(tmp_path, paths, out, overwrite=False):
    config = tmp_path / "job.toml"
    config.write_text(f'[input]\npaths = ["{paths}"]\n[model]\npath = "{tmp_path / "m"}"\n'
                      f'[output]\npath = "{out}"\noverwrite = {str(overwrite).lower()}\n')
    from streamproj.config import load_config

    return load_config(config)


def test_a_job_whose_input_glob_matches_its_output_is_refused_before_anything(tmp_path):
    X, y = make_classes(n=200, p=3, seed=72)
    (tmp_path / "data").mkdir()
    write_zarr(tmp_path / "data" / "day-0.zarr", X, y, chunk_rows=50)
    config = _job(tmp_path, tmp_path / "data" / "*.zarr", tmp_path / "data" / "proj.zarr")
    with pytest.raises(sp.errors.InputError, match=r"pattern .*\*.zarr matches the \[output\] path"):
        jobs.run_job(config)
    assert not (tmp_path / "m").exists()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["day-0.zarr"]


def test_an_hdf5_input_pattern_is_matched_against_the_output_by_its_files(tmp_path):
    """``day-*.h5:/X`` matches files; its dataset path made it match no output path at all."""
    h5py = pytest.importorskip("h5py")
    X, y = make_classes(n=200, p=3, seed=72)
    (tmp_path / "data").mkdir()
    with h5py.File(tmp_path / "data" / "day-0.h5", "w") as f:
        f["X"], f["y"] = X, y
    config = _job(tmp_path, f"{tmp_path / 'data' / 'day-*.h5'}:/X", tmp_path / "data" / "day-9.h5")
    with pytest.raises(sp.errors.InputError, match=r"pattern .*day-\*.h5:/X matches the \[output\] path"):
        jobs.run_job(config)
    assert not (tmp_path / "m").exists()


def test_a_jobs_missing_array_or_column_is_named_by_its_config_key(tmp_path, capsys):
    """The sources' messages (shared with the command line) said "name it with --label"."""
    import pandas as pd
    from conftest import one_error_line
    from conftest import run_cli as run

    X, y = make_classes(n=200, p=3, seed=72)
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(cls=y)
    frame.to_csv(tmp_path / "d.csv", index=False)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=50)
    cases = [('paths = ["d.csv"]', "has no label column 'y'", "name it with [input] label"),
             ('paths = ["d.csv"]\nlabel = "cls"\nfeatures = ["a", "zz"]',
              "has no column 'zz'", "name the features with [input] features"),
             ('paths = ["d.zarr"]\ny = "cls"', "has no array 'cls'",
              "name the right one with [input] y"),
             ('paths = ["d.zarr"]\nx = "XX"', "has no array 'XX'",
              "name the right one with [input] x")]
    for i, (inputs, what, key) in enumerate(cases):
        job = tmp_path / f"job{i}.toml"
        job.write_text(f'[input]\n{inputs}\n[model]\npath = "m"\n[output]\npath = "o"\n')
        assert run("run", job) == 2
        line = one_error_line(capsys)
        assert line.startswith(f"streamproj: error: {job}: "), line
        assert what in line, line
        assert line.endswith(key), line
        assert "--" not in line, line
    # the project step's inputs too: a model fitted, then an [output] input without labels
    (tmp_path / "job.toml").write_text('[input]\npaths = ["d.zarr"]\n[model]\npath = "m"\n')
    assert run("run", tmp_path / "job.toml") == 0
    capsys.readouterr()
    other = zarr.open_group(str(tmp_path / "other.zarr"), mode="w")
    other.create_array("rows", data=X, chunks=(50, 3))
    (tmp_path / "job.toml").write_text('[input]\npaths = ["d.zarr"]\n[model]\npath = "m"\n'
                                       '[output]\npath = "o"\ninput = ["other.zarr"]\n')
    assert run("run", tmp_path / "job.toml") == 2
    line = one_error_line(capsys)
    assert "has no array 'X'" in line, line
    assert line.endswith("with [input] x"), line
    assert not (tmp_path / "o").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_jobs_input_named_like_a_flag_keeps_its_name_in_the_message(tmp_path, capsys):
    """The flags became keys inside names too: "run--label.csv" was said as "run[input] label.csv"."""
    import pandas as pd
    from conftest import one_error_line
    from conftest import run_cli as run

    X, y = make_classes(n=200, p=3, seed=72)
    (tmp_path / "exp--x").mkdir()
    pd.DataFrame(X, columns=["a", "b", "c"]).to_csv(tmp_path / "exp--x" / "run--label.csv",
                                                      index=False)
    job = tmp_path / "job.toml"
    job.write_text('[input]\npaths = ["exp--x/run--label.csv"]\n[model]\npath = "m"\n')
    assert run("run", job) == 2
    line = one_error_line(capsys)
    assert f"{tmp_path / 'exp--x' / 'run--label.csv'} has no label column 'y'" in line, line
    assert line.endswith("name it with [input] label"), line


def test_a_job_refuses_a_foreign_output_before_it_writes_the_model(tmp_path):
    X, y = make_classes(n=200, p=3, seed=73)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=50)
    home = tmp_path / "home"
    (home / "thesis").mkdir(parents=True)
    (home / "thesis" / "ch1.tex").write_text("years")
    with pytest.raises(OutputExistsError, match="is not a streamproj output"):
        jobs.run_job(_job(tmp_path, tmp_path / "d.zarr", home, overwrite=True))
    assert not (tmp_path / "m").exists()
    assert (home / "thesis" / "ch1.tex").read_text() == "years"


def test_a_job_refuses_a_missing_output_input_before_it_writes_the_model(tmp_path):
    # found only by the project step, after the model was written, and not named as the key
    X, y = make_classes(n=200, p=3, seed=74)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=50)
    config = tmp_path / "job.toml"
    config.write_text('[input]\npath = "d.zarr"\n[model]\npath = "m"\n'
                      '[output]\npath = "o.zarr"\ninput = ["d.zarr", "missing.zarr"]\n')
    from streamproj.config import load_config

    with pytest.raises(sp.errors.InputError) as exc:
        jobs.run_job(load_config(config))
    assert str(exc.value) == f"{config}: [output] input: no such input: {tmp_path / 'missing.zarr'}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.zarr", "job.toml"]


@pytest.mark.parametrize(("given", "said"), [('"day-*.zarr"', "no input matches '{d}/day-*.zarr'"),
                                             ('"day-1.zarr"', "no such input: {d}/day-1.zarr")])
@pytest.mark.parametrize("mode", ["fit", "update"])
def test_a_job_whose_input_matches_nothing_names_the_config_key(tmp_path, given, said, mode):
    # "no input matches '/data/events/day-*.zarr'" named neither the config nor its key
    from streamproj.config import load_config

    if mode == "update":
        X, y = make_classes(n=200, p=3, seed=76)
        write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=50)
        jobs.fit_model([tmp_path / "d.zarr"], tmp_path / "m")
    config = tmp_path / "job.toml"
    config.write_text(f'[input]\npath = {given}\n[model]\npath = "m"\n')
    with pytest.raises(sp.errors.InputError) as exc:
        jobs.run_job(load_config(config))
    assert str(exc.value) == f"{config}: [input] paths: " + said.format(d=tmp_path)


@pytest.mark.parametrize("given", ['"d-*.zarr"', '"d-1.zarr"', '["./d-0.zarr", "d-1.zarr"]'])
def test_a_job_projects_an_output_input_that_names_what_it_fits(tmp_path, given):
    # refused as an overlap of [input] and [output] input, though projecting the fitted rows
    # is what the job does without the key
    X, y = make_classes(n=400, p=3, seed=75)
    write_zarr(tmp_path / "d-0.zarr", X[:200], y[:200], chunk_rows=50)
    write_zarr(tmp_path / "d-1.zarr", X[200:], y[200:], chunk_rows=50)
    config = tmp_path / "job.toml"
    config.write_text('[input]\npaths = ["d-*.zarr"]\n[model]\npath = "m"\n'
                      f'[output]\npath = "o.zarr"\ninput = {given}\n')
    from streamproj.config import load_config

    jobs.run_job(load_config(config))
    rows = X[200:] if given == '"d-1.zarr"' else X
    out = zarr.open_group(str(tmp_path / "o.zarr"), mode="r")
    np.testing.assert_allclose(out["projection"][:], sp.load(tmp_path / "m").transform(rows),
                               rtol=1e-10, atol=1e-12)


def test_table_columns_are_matched_to_the_model_by_name_not_position(tmp_path):
    """A Parquet/CSV file with the model's columns in another order was read by position."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from streamproj.config import load_config

    X, y = make_classes(n=900, p=4, k=2, seed=4)
    X = X * [1.0, 2.0, 3.0, 4.0]
    frame = pd.DataFrame(X, columns=list("abcd")).assign(label=y)
    frame[:300].to_parquet(tmp_path / "abcd.parquet")
    (tmp_path / "in").mkdir()
    frame[300:600][["d", "label", "b", "a", "c"]].assign(extra=1.0).to_parquet(
        tmp_path / "in" / "day-1.parquet")
    frame[600:][["c", "a", "d", "b", "label"]].to_csv(tmp_path / "in" / "day-2.csv", index=False)
    jobs.fit_model(str(tmp_path / "abcd.parquet"), tmp_path / "m", label="label")
    jobs.project_model(tmp_path / "m", [str(tmp_path / "abcd.parquet")], tmp_path / "o.zarr",
                       label="label")
    # project: the reordered file (with a column more) is read in the model's order
    first = sp.load(tmp_path / "m")
    jobs.project_model(tmp_path / "m", [str(tmp_path / "in" / "day-1.parquet")],
                       tmp_path / "o1.zarr", label="label", features=["d", "b", "a", "c"])
    got = zarr.open_group(str(tmp_path / "o1.zarr"), mode="r")["projection"][:]
    np.testing.assert_allclose(got, first.transform(frame[list("abcd")][300:600]), rtol=1e-13,
                               atol=1e-12)
    # update and a nightly one-pass run: the same model as one fit of the rows
    jobs.update_model(tmp_path / "m", [str(tmp_path / "in" / "day-1.parquet")], label="label")
    config = tmp_path / "job.toml"
    config.write_text(f'[input]\npaths = ["{tmp_path / "in"}/day-2.csv"]\nlabel = "label"\n'
                      f'[model]\npath = "{tmp_path / "m"}"\nmode = "auto"\n'
                      f'[output]\npath = "{tmp_path / "o.zarr"}"\nmode = "append"\n')
    update, project = jobs.run_job(load_config(config))["steps"]
    assert update["rows_added"] == 300
    assert project["one_read"] is True
    assert project["rows_written"] == 300
    whole = sp.BoundaryProjector().fit(X, y)
    model = sp.load(tmp_path / "m")
    np.testing.assert_allclose(model.coef_, whole.coef_, rtol=1e-10)
    out = zarr.open_group(str(tmp_path / "o.zarr"), mode="r")["projection"][:]
    np.testing.assert_allclose(out[300:], first.transform(frame[list("abcd")][600:]), rtol=1e-13,
                               atol=1e-12)
    # a file lacking one of the model's columns is refused, naming it
    frame.rename(columns={"a": "zzz"}).to_parquet(tmp_path / "renamed.parquet")
    with pytest.raises(sp.errors.InputError, match=r"renamed\.parquet.* has no column 'a', one of "
                                                   r"the 4 that model .* was fitted on \(a, b, c, d\)"):
        jobs.update_model(tmp_path / "m", [str(tmp_path / "renamed.parquet")], label="label")


def test_table_columns_named_like_positions_are_matched_by_name_too(tmp_path):
    """A Parquet file whose columns really are x0, x1, x2 (a model of tables, not arrays)."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    X, y = make_classes(n=400, p=3, k=2, seed=15)
    frame = pd.DataFrame(X * [1.0, 5.0, 25.0], columns=["x0", "x1", "x2"]).assign(label=y)
    frame.to_parquet(tmp_path / "a.parquet")
    frame[["x2", "x1", "x0", "label"]].to_parquet(tmp_path / "r.parquet")
    jobs.fit_model(str(tmp_path / "a.parquet"), tmp_path / "m", label="label")
    for name in ("a", "r"):
        jobs.project_model(tmp_path / "m", [str(tmp_path / f"{name}.parquet")],
                           tmp_path / f"o{name}.zarr", label="label")
    a, r = (zarr.open_group(str(tmp_path / f"o{n}.zarr"), mode="r")["projection"][:] for n in "ar")
    np.testing.assert_array_equal(a, r)


def test_a_model_of_tables_reads_later_tables_with_its_columns_and_label(tmp_path, capsys):
    """Without --features/--label again, a text column beside them broke project and update."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from conftest import one_error_line

    from streamproj.cli import main

    X, y = make_classes(n=600, p=3, k=2, seed=16)
    frame = pd.DataFrame(X, columns=["emb_0", "emb_1", "emb_2"]).assign(
        other=np.arange(600.0), label=np.where(y == 1, "cat", "dog"), note="text")
    frame[:300].to_parquet(tmp_path / "a.parquet")
    frame[300:].to_parquet(tmp_path / "b.parquet")
    assert main(["fit", str(tmp_path / "a.parquet"), "--model", str(tmp_path / "m"),
                 "--features", "emb_*", "--label", "label"]) == 0
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "a.parquet"), "--output",
                 str(tmp_path / "o.zarr")]) == 0
    out = zarr.open_group(str(tmp_path / "o.zarr"), mode="r")
    assert out["y"][:].tolist() == frame["label"][:300].tolist()
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "b.parquet")]) == 0
    whole = sp.BoundaryProjector().fit(X, np.where(y == 1, "cat", "dog"))
    np.testing.assert_allclose(sp.load(tmp_path / "m").coef_, whole.coef_, rtol=1e-10)
    # a table's --y still names its label column
    frame.assign(grp=np.where(y == 1, "dog", "cat")).to_parquet(tmp_path / "g.parquet")
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "g.parquet"), "--output",
                 str(tmp_path / "og.zarr"), "--y", "grp"]) == 0
    out = zarr.open_group(str(tmp_path / "og.zarr"), mode="r")
    assert out["y"][:].tolist() == np.where(y == 1, "dog", "cat").tolist()
    # rows without the label column are projected without labels, the text column left out
    frame.drop(columns="label").to_parquet(tmp_path / "nolabel.parquet")
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "nolabel.parquet"), "--output",
                 str(tmp_path / "on.zarr")]) == 0
    assert "y" not in zarr.open_group(str(tmp_path / "on.zarr"), mode="r")
    # a table lacking one of the model's columns names it
    frame.drop(columns="emb_2").to_parquet(tmp_path / "short.parquet")
    capsys.readouterr()
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "short.parquet")]) == 2
    assert "'emb_2'" in one_error_line(capsys)


def test_each_table_is_read_again_with_its_own_label_column(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    X, y = make_classes(n=400, p=3, k=2, seed=18)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame[:200].assign(label=y[:200]).to_parquet(tmp_path / "f0.parquet")
    frame[200:].assign(lab2=y[200:]).to_parquet(tmp_path / "f1.parquet")
    jobs.fit_model(str(tmp_path / "f0.parquet"), tmp_path / "m", label="label")
    jobs.update_model(tmp_path / "m", [str(tmp_path / "f1.parquet")], label="lab2")
    # a nightly glob without --label: each file as it was merged, so both are skipped
    report = jobs.update_model(tmp_path / "m", [str(tmp_path / "f*.parquet")])
    assert [s["status"] for s in report["sources"]] == ["skipped", "skipped"]


@pytest.mark.parametrize("mode", ["append", "rewrite"])
def test_a_run_whose_output_cannot_be_written_leaves_the_model_as_it_was(tmp_path, capsys, mode):
    # the model step committed a new version, then the project step failed on OUT's lock: exit 2,
    # "status": "error", and a model that had moved with nothing saying so
    from conftest import one_error_line

    from streamproj import store
    from streamproj.cli import main

    X, y = make_classes(n=600, p=3, seed=61)
    write_zarr(tmp_path / "p0.zarr", X[:300], y[:300], chunk_rows=100)
    (tmp_path / "blocked").write_text("a file where the output's folder would be")
    job = tmp_path / "job.toml"
    job.write_text('[input]\npaths = ["p*.zarr"]\n[model]\npath = "m"\n'
                   f'[output]\npath = "blocked/o.zarr"\nmode = "{mode}"\noverwrite = true\n')
    assert main(["run", str(job)]) == 2
    assert "blocked" in one_error_line(capsys)
    assert not (tmp_path / "m").exists()  # no model made either
    assert jobs.fit_model(tmp_path / "p0.zarr", tmp_path / "m")["status"] == "fitted"
    version = store.read_record(tmp_path / "m").version
    write_zarr(tmp_path / "p1.zarr", X[300:], y[300:], chunk_rows=100)
    assert main(["run", str(job)]) == 2
    assert "blocked" in one_error_line(capsys)
    assert store.read_record(tmp_path / "m").version == version
    assert sp.load(tmp_path / "m").stats_.n_samples == 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked", "job.toml", "m", "p0.zarr",
                                                          "p1.zarr"]


def test_a_regression_target_given_as_labels_is_refused_by_the_command_as_by_the_estimator(
        tmp_path, capsys):
    # a float y of measurements became 128 classes through the command line, exit 0; the
    # estimator refused the same arrays ("continuous")
    from conftest import one_error_line

    from streamproj.cli import main

    X, y = make_classes(n=400, p=3, seed=5)
    write_zarr(tmp_path / "good.zarr", X, y.astype(np.float64))  # whole-number floats: classes
    target = np.round(X[:, 0] * 2, 1)
    write_zarr(tmp_path / "target.zarr", X, target)
    with pytest.raises(sp.StreamprojError, match="continuous"):
        sp.BoundaryProjector().fit(zarr.open_group(str(tmp_path / "target.zarr"))["X"],
                                   zarr.open_group(str(tmp_path / "target.zarr"))["y"])
    assert main(["fit", str(tmp_path / "target.zarr"), "--model", str(tmp_path / "m")]) == 2
    line = one_error_line(capsys)
    assert "Unknown label type: continuous" in line
    assert "target.zarr/y has dtype float64" in line
    assert not (tmp_path / "m").exists()
    assert main(["fit", str(tmp_path / "good.zarr"), "--model", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    # a later source holding one (update reads only the new source)
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "target.zarr")]) == 2
    assert "Unknown label type: continuous" in one_error_line(capsys)
    assert sp.load(tmp_path / "m").stats_.n_samples == 400


def test_a_model_error_keeps_its_prefix_unless_it_names_the_path_as_a_word():
    # "prefix in text" took the model "m" as named by any message holding the letter m
    from streamproj.errors import ModelError

    for message, said in [("the model is damaged", "m: the model is damaged"),
                          ("no model at m: fit one there first", "no model at m: fit one there first"),
                          ("model m (version v000001) is damaged", "model m (version v000001) is damaged")]:
        with pytest.raises(ModelError) as info, jobs._context("m"):
            raise ModelError(message)
        assert str(info.value) == said


def test_update_of_a_model_fitted_in_python_warns_that_its_rows_cannot_be_told_apart(tmp_path):
    # fitted from the rows in Python and saved, then updated with the same rows' store: they
    # were counted twice ("+2,000 rows, 4,000 in all") without a word
    X, y = make_coin(n=600)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=100)
    sp.BoundaryProjector().fit(X, y).save(tmp_path / "m")
    with pytest.warns(sp.StreamprojWarning, match=r"holds 600 rows of no source .* cannot tell "
                      r"whether the rows of .*d\.zarr are among them"):
        jobs.update_model(tmp_path / "m", [str(tmp_path / "d.zarr")])
    with warnings.catch_warnings():  # the source is in the ledger now: nothing new to say
        warnings.simplefilter("error")
        jobs.update_model(tmp_path / "m", [str(tmp_path / "d.zarr")])
    # a model fitted from its sources has none of no source
    assert main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m2")]) == 0
    X2, y2 = make_coin(n=300, seed=5)
    write_zarr(tmp_path / "e.zarr", X2, y2, chunk_rows=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jobs.update_model(tmp_path / "m2", [str(tmp_path / "e.zarr")])


def test_a_bad_row_of_a_grown_source_is_named_in_the_sources_own_rows(tmp_path, capsys):
    # a.zarr grown from 100 to 200 rows with a NaN at its row 150: an append said "row 50" (the
    # rows it projected, counted from the first new one); update said "row 150"
    X, y = make_coin(n=200)
    write_zarr(tmp_path / "a.zarr", X[:100], y[:100], chunk_rows=50)
    assert main(["fit", str(tmp_path / "a.zarr"), "--model", str(tmp_path / "m")]) == 0
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "a.zarr"), "--output",
                 str(tmp_path / "o.zarr")]) == 0
    bad = X.copy()
    bad[150, 1] = np.nan
    write_zarr(tmp_path / "a.zarr", bad, y, chunk_rows=50)
    capsys.readouterr()
    said = "a.zarr/X has a non-finite value (nan) in row 150 (column 1)"
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "a.zarr"), "--output",
                 str(tmp_path / "o.zarr"), "--append"]) == 2
    assert said in capsys.readouterr().err
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "a.zarr")]) == 2
    assert said in capsys.readouterr().err
    job = tmp_path / "night.toml"
    job.write_text(f'[input]\npath = "{tmp_path / "a.zarr"}"\n[model]\npath = "{tmp_path / "m"}"\n'
                   f'mode = "update"\n[output]\npath = "{tmp_path / "o.zarr"}"\nmode = "append"\n')
    assert main(["run", str(job)]) == 2  # the one pass: summaries and projection together
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("change", [{"shrinkage": 0.5}, {"n_components": 1}])
def test_project_after_set_params_writes_coordinates_of_the_frame_it_records(tmp_path, change):
    # the frame (to_state) solved the parameters set since the fit, in a side thread, after the
    # coordinates had been projected with the old solution: the output's frame was not theirs
    X, y = make_classes(n=300, p=4, k=3, seed=1)
    m = sp.BoundaryProjector().fit(X, y)
    m.set_params(**change)
    jobs.project(m, X, tmp_path / "out.zarr", y=y)
    out = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    frame = store.read_output_frame(out)
    written = out["projection"][:]
    assert written.shape[1] == frame.solution["components"].shape[0]
    again = (X - frame.solution["center"]) @ frame.solution["components"].T
    np.testing.assert_allclose(written, again, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(written, m.transform(X), rtol=1e-12, atol=1e-12)
    assert out.attrs["streamproj"]["model_id"] == m.model_id_


@pytest.mark.filterwarnings("default::streamproj.errors.StreamprojWarning")  # (as on a terminal)
def test_a_run_that_updates_says_which_model_parameters_of_its_config_it_keeps(tmp_path, capsys):
    # an update keeps the model's own parameters: a [model] shrinkage or n_components edited
    # in the config was ignored without a word, night after night
    X, y = make_classes(n=400, p=4, seed=93)
    write_zarr(tmp_path / "a.zarr", X[:200], y[:200], chunk_rows=64)
    write_zarr(tmp_path / "b.zarr", X[200:], y[200:], chunk_rows=64)
    job = tmp_path / "job.toml"
    write = lambda inputs, model: job.write_text(  # noqa: E731
        f'[input]\npaths = [{inputs}]\n[model]\npath = "m"\n{model}\n')
    write('"a.zarr"', 'shrinkage = "auto"')
    assert main(["run", str(job), "--no-progress"]) == 0
    assert "warning" not in capsys.readouterr().err  # a fit: nothing to say
    write('"a.zarr", "b.zarr"', 'shrinkage = "oas"\nn_components = 3\ncenter = "mean"')
    assert main(["run", str(job), "--no-progress"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(lines) == 2, lines  # center is the model's; a key left out says nothing
    assert "[model] n_components = 3, but model" in lines[0], lines[0]
    assert "fitted with 2, which an update keeps" in lines[0], lines[0]
    assert lines[1].startswith(f"streamproj: warning: {job}: [model] shrinkage = 'oas', but "
                               "model "), lines[1]
    assert "fitted with 'auto', which an update keeps" in lines[1], lines[1]
    model = sp.load(tmp_path / "m")
    assert (model.shrinkage, model.n_components, model.stats_.n_samples) == ("auto", 2, 400)
    write('"a.zarr", "b.zarr"', 'mode = "update"')
    assert main(["run", str(job), "--no-progress"]) == 0
    assert "warning" not in capsys.readouterr().err
