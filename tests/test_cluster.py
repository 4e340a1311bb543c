import contextlib

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
                                  dashboard_address=":0") as cluster:
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
        assert "pass 1: summaries: 100%" in err, err
        assert "12/12" in err, err
        assert "pass 2: projection: 100%" in err, err
    local, remote = sp.load(tmp_path / "m-local"), sp.load(tmp_path / "m-cluster")
    for name in ("coef_", "intercept_", "components_", "center_"):
        a, b = getattr(remote, name), getattr(local, name)
        assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b)), name
    a = zarr.open_group(str(tmp_path / "o-cluster.zarr"), mode="r")["projection"][:]
    b = zarr.open_group(str(tmp_path / "o-local.zarr"), mode="r")["projection"][:]
    assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b))


@pytest.mark.slow
def test_workers_in_this_process_give_pass_one_the_local_bits(tmp_path):
    # an in-process cluster's workers share this process's BLAS: with two BLAS threads the
    # wide products differed in the last bit, which update --verify would call a change
    from streamproj.passes import accumulate

    X, y = make_classes(n=6000, p=1100, k=3, seed=63)
    write_zarr(tmp_path / "d.zarr", X + 10.0, y, chunk_rows=1500)
    group = zarr.open_group(str(tmp_path / "d.zarr"), mode="r")
    local = accumulate(group["X"], group["y"])
    # dashboard_address=None still served 0.0.0.0:8787 (and the worker's page on every
    # interface): the test failed whenever 8787 was taken. Both on loopback, any free port.
    with (distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                   dashboard_address="127.0.0.1:0",
                                   worker_dashboard_address="127.0.0.1:0") as cluster,
          distributed.Client(cluster)):
        remote = accumulate(group["X"], group["y"])
    assert np.array_equal(local.within, remote.within)
    assert local.fingerprint() == remote.fingerprint()


@pytest.mark.slow
def test_errors_on_the_cluster_are_still_one_line(tmp_path, cluster, capsys):
    X, y = make_classes(n=500, p=3, seed=41)
    X[321, 1] = np.inf
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=100)
    code = main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m"),
                 "--scheduler", cluster.scheduler_address])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert "d.zarr/X has a non-finite value (inf) in row 321" in err[0]


def test_unreachable_scheduler_is_a_clear_error(tmp_path, capsys, monkeypatch):
    from streamproj import cluster

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", "1s")
    X, y = make_classes(n=100, p=3, seed=42)
    write_zarr(tmp_path / "d.zarr", X, y)
    code = main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m"),
                 "--scheduler", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert "cannot reach the dask scheduler" in err[0]


SLOW_TASKS = """
import time
import streamproj.stats as stats
original = stats._encode_labels  # called once by every chunk's summary
def slow(*args, **kwargs):
    time.sleep(0.3)
    return original(*args, **kwargs)
stats._encode_labels = slow
"""


def _slow_data_and_worker(tmp_path, seed):
    """Data in ``d.zarr``, and a function starting a worker whose every chunk summary is slow."""
    import os
    import subprocess
    import sys

    X, y = make_classes(n=3000, p=3, seed=seed)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=100)
    (tmp_path / "slowtasks.py").write_text(SLOW_TASKS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}

    def start(address):
        return subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                 "--no-nanny", "--nthreads", "1", "--host", "127.0.0.1",
                                 "--no-dashboard", "--preload", "slowtasks"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return start


def _main_in_a_thread(argv, lost):
    """``main(argv)`` in a thread, its exit code; a guard against a hang, not a timing assertion."""
    import threading

    outcome = {}
    job = threading.Thread(target=lambda: outcome.update(code=main(argv)), daemon=True)
    job.start()
    job.join(timeout=120)
    assert not job.is_alive(), f"the job hung after losing {lost}"
    return outcome["code"]


@pytest.mark.slow
def test_every_worker_killed_mid_pass_ends_with_one_line(tmp_path, capsys):
    """Two worker processes (127.0.0.1 only) die mid-pass: one line within [dask] timeout."""
    import threading

    start_worker = _slow_data_and_worker(tmp_path, 43)
    with distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=":0") as cluster:
        address = cluster.scheduler_address
        workers = [start_worker(address) for _ in range(2)]
        try:
            with distributed.Client(address) as watcher:
                watcher.wait_for_workers(2, timeout=60)

                def kill_when_busy():
                    while not any(watcher.processing().values()):
                        threading.Event().wait(0.05)
                    for w in workers:
                        w.kill()

                killer = threading.Thread(target=kill_when_busy, daemon=True)
                killer.start()
                config = tmp_path / "job.toml"
                config.write_text(f'[input]\npath = "d.zarr"\n[model]\npath = "m"\n'
                                  f'[dask]\nscheduler = "{address}"\ntimeout = 2\n')
                outcome = {"code": _main_in_a_thread(["run", str(config)], "every worker")}
                killer.join(timeout=10)
        finally:
            for w in workers:
                w.kill()
                w.wait()
    err = capsys.readouterr().err.strip().splitlines()
    err = [line for line in err if line.startswith("streamproj:")]
    assert outcome["code"] == 2, err
    assert len(err) == 1, err
    assert f"the dask scheduler at {address} had no worker for 2 s" in err[0]
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("address", ["notaurl", "", " "])
def test_a_malformed_scheduler_address_is_one_line(tmp_path, capsys, address):
    # "notaurl" was a ValueError traceback (exit 1); "" got past "no scheduler given"
    X, y = make_classes(n=100, p=3, seed=44)
    write_zarr(tmp_path / "d.zarr", X, y)
    code = main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m"),
                 "--scheduler", address])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err
    assert "scheduler" in err[0]
    assert not (tmp_path / "m").exists()


@pytest.mark.slow
def test_the_scheduler_killed_mid_pass_ends_with_one_line(tmp_path, capsys):
    """The scheduler process (127.0.0.1 only) dies mid-pass: one line, exit 2, nothing written."""
    import json
    import subprocess
    import sys
    import threading
    import time

    start_worker = _slow_data_and_worker(tmp_path, 45)
    file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                               "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
                               str(file)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(600):
            if file.exists() and file.read_text().strip():
                break
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        procs.append(start_worker(address))
        with distributed.Client(address) as watcher:
            watcher.wait_for_workers(1, timeout=60)

            def kill_when_busy():
                with contextlib.suppress(Exception):
                    while not any(watcher.processing().values()):
                        threading.Event().wait(0.05)
                procs[0].kill()

            killer = threading.Thread(target=kill_when_busy, daemon=True)
            killer.start()
            outcome = {"code": _main_in_a_thread(["fit", str(tmp_path / "d.zarr"), "--model",
                                                  str(tmp_path / "m"), "--scheduler", address],
                                                 "its scheduler")}
            killer.join(timeout=10)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if line.startswith("streamproj:")]
    assert outcome["code"] == 2, err
    assert len(err) == 1, err
    assert address in err[0]
    assert not (tmp_path / "m").exists()
