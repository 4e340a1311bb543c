import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import make_classes, make_coin, write_zarr

import streamproj as sp
from streamproj import jobs
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
    with pytest.raises(OutputExistsError, match="--overwrite"):
        jobs.project(m, X, tmp_path / "out.zarr")
    jobs.project(m, X * 2, tmp_path / "out.zarr", overwrite=True)
    out = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    np.testing.assert_allclose(out["projection"][:], m.transform(X * 2), rtol=1e-13)


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
