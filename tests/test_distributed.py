import numpy as np
import pytest
import zarr
from conftest import make_classes, write_zarr

import streamproj as sp
from streamproj.cli import main

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        yield cluster


@pytest.mark.slow
def test_cluster_run_equals_local_run(tmp_path, cluster, capsys):
    X, y = make_classes(n=3000, p=6, seed=40)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=250)
    for where, extra in (("local", []), ("cluster", ["--scheduler", cluster.scheduler_address])):
        assert main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / f"m-{where}"),
                     "--shrinkage", "auto", "--progress", *extra]) == 0
        assert main(["project", str(tmp_path / f"m-{where}"), str(tmp_path / "d.zarr"),
                     "--output", str(tmp_path / f"o-{where}.zarr"), "--progress", *extra]) == 0
        err = capsys.readouterr().err
        assert "pass 1: summaries: 100%" in err and "12/12" in err, err
        assert "pass 2: projection: 100%" in err, err
    local, remote = sp.load(tmp_path / "m-local"), sp.load(tmp_path / "m-cluster")
    for name in ("coef_", "intercept_", "components_", "center_"):
        a, b = getattr(remote, name), getattr(local, name)
        assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b)), name
    a = zarr.open_group(str(tmp_path / "o-cluster.zarr"), mode="r")["coords"][:]
    b = zarr.open_group(str(tmp_path / "o-local.zarr"), mode="r")["coords"][:]
    assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b))


@pytest.mark.slow
def test_errors_on_the_cluster_are_still_one_line(tmp_path, cluster, capsys):
    X, y = make_classes(n=500, p=3, seed=41)
    X[321, 1] = np.inf
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=100)
    code = main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m"),
                 "--scheduler", cluster.scheduler_address])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "d.zarr/X has a non-finite value (inf) in row 321" in err[0]


def test_unreachable_scheduler_is_a_clear_error(tmp_path, capsys, monkeypatch):
    from streamproj import cluster

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", "1s")
    X, y = make_classes(n=100, p=3, seed=42)
    write_zarr(tmp_path / "d.zarr", X, y)
    code = main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m"),
                 "--scheduler", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "cannot reach the dask scheduler" in err[0]
