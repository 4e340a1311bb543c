"""Progress bars over chunks: local scheduler, a LocalCluster, and two jobs on one scheduler."""

import threading

import numpy as np
import pytest
import zarr
from conftest import make_classes

from streamproj import progress
from streamproj.errors import BadValuesError
from streamproj.passes import accumulate, project_blocks, store_projection
from streamproj.validation import as_dask_rows


class FakeBar:
    """Stands in for tqdm: records every update, per bar."""

    def __init__(self, total, desc):
        self.total, self.desc, self.n, self.updates, self.closed = total, desc, 0, [], False

    def update(self, k):
        self.updates.append(k)
        self.n += k

    def close(self):
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    opened = []
    lock = threading.Lock()

    def open_bar(total, desc):
        bar = FakeBar(total, desc)
        with lock:
            opened.append(bar)
        return bar

    monkeypatch.setattr(progress, "_open_bar", open_bar)
    return opened


def _assert_counted_every_chunk(bar, n_chunks):
    # One update of 1 per chunk task, none from the top-up at the end.
    assert bar.closed
    assert bar.total == n_chunks
    assert bar.updates == [1] * n_chunks, bar.updates


def _project_into_zarr(tmp_path, X, chunk_rows, name):
    # Two outputs share the projection, as jobs.project's do, so its chunk tasks keep their names.
    rows = as_dask_rows(X, chunk_rows)
    coords = project_blocks(rows, np.zeros(X.shape[1]), np.eye(2, X.shape[1]))
    group = zarr.open_group(str(tmp_path / f"{name}.zarr"), mode="w")
    targets = [group.create_array(n, shape=a.shape, chunks=(chunk_rows, *a.shape[1:]), dtype="f8")
               for n, a in (("coords", coords), ("sum", coords.sum(axis=1)))]
    store_projection([coords, coords.sum(axis=1)], targets, progress=True,
                     total=rows.numblocks[0])
    return targets[0][:]


def test_local_bars_count_every_chunk(tmp_path, bars):
    X, y = make_classes(n=700, p=4, seed=50)
    stats = accumulate(X, y, chunk_rows=100, progress=True)
    assert stats.n_samples == 700
    coords = _project_into_zarr(tmp_path, X, 100, "local")
    np.testing.assert_allclose(coords, X[:, :2])
    pass1, pass2 = bars
    assert pass1.desc == "pass 1: summaries"
    assert pass2.desc == "pass 2: projection"
    _assert_counted_every_chunk(pass1, 7)
    _assert_counted_every_chunk(pass2, 7)


def test_local_bar_is_real_tqdm_on_stderr(capsys):
    X, y = make_classes(n=300, p=3, seed=51)
    accumulate(X, y, chunk_rows=100, progress=True)
    err = capsys.readouterr().err
    assert "pass 1: summaries: 100%" in err, err
    assert "3/3" in err, err


def _forbid_progress_paths(monkeypatch):
    def forbidden(*args, **kwargs):
        msg = "progress=False must be a plain dask.compute"
        raise AssertionError(msg)

    for name in ("_open_bar", "_compute_on_client", "_LocalChunkBar"):
        monkeypatch.setattr(progress, name, forbidden)


def test_no_progress_is_a_plain_compute_locally(monkeypatch):
    _forbid_progress_paths(monkeypatch)
    X, y = make_classes(n=300, p=3, seed=52)
    assert progress._distributed_client() is None
    assert accumulate(X, y, chunk_rows=100).n_samples == 300


def test_errors_close_the_bar_and_raise_the_tasks_error(bars):
    X, y = make_classes(n=300, p=3, seed=53)
    X[150, 1] = np.nan
    with pytest.raises(BadValuesError, match="row 150"):
        accumulate(X, y, chunk_rows=100, progress=True)
    (bar,) = bars
    # pass 1 reports a chunk's error after the merge (so the first bad row of the whole
    # array is named), so every chunk may be counted; the bar must still be closed
    assert bar.closed
    assert bar.n <= bar.total


# ------------------------------------------------------------------ on a cluster
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0") as cluster:
        yield cluster


@pytest.fixture
def cluster_client(cluster):
    with distributed.Client(cluster) as client:
        yield client


def test_no_progress_is_a_plain_compute_on_a_cluster(monkeypatch, cluster_client):
    _forbid_progress_paths(monkeypatch)
    X, y = make_classes(n=300, p=3, seed=52)
    assert progress._distributed_client() is cluster_client
    assert accumulate(X, y, chunk_rows=100).n_samples == 300


def test_cluster_bars_count_every_chunk(tmp_path, bars, cluster_client):
    X, y = make_classes(n=900, p=4, seed=54)
    local = accumulate(X, y, chunk_rows=100, progress=False, row_offset=0)
    stats = accumulate(X, y, chunk_rows=100, progress=True)
    assert np.array_equal(stats.counts, local.counts)
    assert np.allclose(stats.means, local.means)
    coords = _project_into_zarr(tmp_path, X, 100, "cluster")
    np.testing.assert_allclose(coords, X[:, :2])
    pass1, pass2 = bars
    _assert_counted_every_chunk(pass1, 9)
    _assert_counted_every_chunk(pass2, 9)
    assert not set(cluster_client.futures), "chunk and result futures are all released"


def test_cluster_errors_close_the_bar_and_raise_the_tasks_error(bars, cluster_client):
    X, y = make_classes(n=300, p=3, seed=55)
    X[250, 0] = np.inf
    with pytest.raises(BadValuesError, match="row 250"):
        accumulate(X, y, chunk_rows=100, progress=True)
    (bar,) = bars
    assert bar.closed
    assert bar.n <= bar.total


@pytest.mark.parametrize("clients", ["one shared client", "a client each"])
@pytest.mark.parametrize("data", ["different data", "the same data"])
def test_two_concurrent_jobs_on_one_scheduler_each_count_their_own_chunks(
        bars, cluster, cluster_client, clients, data):
    jobs = [make_classes(n=1100, p=3, seed=56), make_classes(n=700, p=3, seed=57)]
    if data == "the same data":
        jobs = [jobs[0], jobs[0]]
    expected = [len(X) // 100 for X, _ in jobs]
    own = [cluster_client] * 2
    if clients == "a client each":
        own = [distributed.Client(cluster, set_as_default=False) for _ in jobs]
    start = threading.Barrier(len(jobs))
    results, errors = [None] * len(jobs), []

    def job(i):
        X, y = jobs[i]
        try:
            with own[i].as_current():
                start.wait()
                results[i] = accumulate(X, y, chunk_rows=100, progress=True, names=(f"X{i}", "y"))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(i,)) for i in range(len(jobs))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        if clients == "a client each":
            for client in own:
                client.close()
    assert not errors, errors
    for (X, _), stats in zip(jobs, results, strict=True):
        assert stats.n_samples == len(X)
    assert sorted(bar.total for bar in bars) == sorted(expected)
    for bar in bars:
        _assert_counted_every_chunk(bar, bar.total)


def test_a_local_job_never_imports_distributed(tmp_path):
    """Given no scheduler, dask.compute imports distributed to look for a client (0.12-0.20 s a
    process): a fit, a projection, a score of dask arrays and the command line's fit, project and plot on
    the local scheduler never need it."""
    import subprocess
    import sys

    code = f"""
import sys
import numpy as np, zarr
import dask.array as da
from streamproj.cli import main
rng = np.random.default_rng(0)
X = rng.normal(size=(3000, 5)); y = (X[:, 0] > 0).astype(np.int8)
g = zarr.open_group({str(tmp_path / 'd.zarr')!r}, mode="w")
g.create_array("X", data=X, chunks=(700, 5)); g.create_array("y", data=y, chunks=(700,))
import streamproj as sp
m = sp.BoundaryProjector().fit(g["X"], g["y"])
m.transform(g["X"][:500])
m.score(da.from_zarr(g["X"]), da.from_zarr(g["y"]))
for argv in (["fit", {str(tmp_path / 'd.zarr')!r}, "--model", {str(tmp_path / 'm')!r}],
             ["project", {str(tmp_path / 'm')!r}, {str(tmp_path / 'd.zarr')!r}, "--output", {str(tmp_path / 'o.zarr')!r}],
             ["plot", {str(tmp_path / 'o.zarr')!r}, "--output", {str(tmp_path / 'f.png')!r}]):
    try:
        main(argv)
    except SystemExit as exc:
        assert not exc.code, exc.code
print("distributed" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False", done.stderr


def test_the_local_scheduler_is_named_only_where_dask_would_choose_it():
    import sys
    import types
    from unittest import mock

    import dask

    with mock.patch.dict(sys.modules), dask.config.set(scheduler=None):
        sys.modules.pop("distributed", None)
        assert progress.local_scheduler() == {"scheduler": dask.threaded.get}
        with dask.config.set(scheduler="sync"):  # the user's choice stays dask's to apply
            assert progress.local_scheduler() == {}
        # distributed imported: a client may be active, dask looks for it as always
        sys.modules["distributed"] = types.ModuleType("distributed")
        assert progress.local_scheduler() == {}
