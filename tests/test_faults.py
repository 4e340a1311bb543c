"""Fault injection at every commit step of model and output writes.

A kill (``os._exit``) right after each rename/replace/exchange/removal (and each
hard link of a kept summary) that :mod:`streamproj.store` performs, and a full
disk (ENOSPC) at each file write.
After each fault the old model or output is intact (or, between the two renames
of a replacement, restored by the next run), and rerunning the command succeeds
with the right result and no leftovers.
"""

import contextlib
import errno
import hashlib
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import zarr
from conftest import make_classes, write_zarr

import streamproj as sp
from streamproj import store
from streamproj.cli import main

KILL_AT_STEP = """
import os, sys, types
import streamproj.store as store
K, NO_EXCHANGE = int(sys.argv[1]), sys.argv[2] == "1"
steps = [0]
def step(fn):
    def inner(*args, **kwargs):
        out = fn(*args, **kwargs)
        steps[0] += 1
        if steps[0] == K:
            os._exit(9)
        return out
    return inner
proxy = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
proxy.rename, proxy.replace, proxy.link = step(os.rename), step(os.replace), step(os.link)
store.os = proxy
store._remove = step(store._remove)
store._exchange = (lambda src, dest: False) if NO_EXCHANGE else step(store._exchange)
from streamproj.cli import main
code = main(sys.argv[3:])
print("STEPS", steps[0], flush=True)
sys.exit(code)
"""


def tree(path):
    """Digest of every file under ``path`` (names and bytes)."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode())
            with open(full, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def run_killed(k, argv, no_exchange=False):
    proc = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(k), "1" if no_exchange else "0",
                           *map(str, argv)], capture_output=True, text=True, timeout=120)
    if proc.returncode == 9:
        return None
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split("STEPS")[-1])


@pytest.fixture
def data(tmp_path):
    X, y = make_classes(n=400, p=3, k=2, seed=60)
    write_zarr(tmp_path / "a.zarr", X[:250], y[:250], chunk_rows=125)
    write_zarr(tmp_path / "b.zarr", X[250:], y[250:], chunk_rows=125)
    return tmp_path, X, y


def same_model(path, X, y):
    got, ref = sp.load(path), sp.BoundaryProjector().fit(X, y)
    return np.max(np.abs(got.components_ - ref.components_)) < 1e-9


def _holds(check):
    try:
        return check()
    except sp.StreamprojError:
        return False


def _reset(d, template):
    """Put the model and output back as they were before the command under test."""
    for name in ("m", "o.zarr"):
        shutil.rmtree(d / name, ignore_errors=True)
        if (template / name).exists():
            shutil.copytree(template / name, d / name)


def count_steps(argv, no_exchange=False):
    """Run the command in this process, counting the commit steps that KILL_AT_STEP counts."""
    import types

    steps = [0]

    def step(fn):
        def inner(*args, **kwargs):
            out = fn(*args, **kwargs)
            steps[0] += 1
            return out
        return inner

    proxy = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    proxy.rename, proxy.replace, proxy.link = step(os.rename), step(os.replace), step(os.link)
    saved = store.os, store._remove, store._exchange
    store.os, store._remove = proxy, step(store._remove)
    store._exchange = (lambda src, dest: False) if no_exchange else step(store._exchange)
    try:
        assert main([str(a) for a in argv]) == 0
    finally:
        store.os, store._remove, store._exchange = saved
    return steps[0]


def _kill_sweep(d, argv, after_kill, after_rerun, no_exchange=False):
    """Kill the command after step k, for every k; check, rerun, check, reset. Returns the steps."""
    template = d.parent / f"{d.name}-template"
    shutil.rmtree(template, ignore_errors=True)
    template.mkdir()
    for name in ("m", "o.zarr"):
        if (d / name).exists():
            shutil.copytree(d / name, template / name)
    _reset(d, template)
    n = count_steps(argv, no_exchange)
    for k in range(1, n + 1):
        _reset(d, template)
        assert run_killed(k, argv, no_exchange) is None, (argv, k)
        after_kill(k)
        already = _holds(after_rerun)  # killed after the last commit step: the job was done
        code = main([str(a) for a in argv])
        # the rerun succeeds (or, for a fit or a first projection already done, says it exists) …
        # (a relocation already done says that nothing is left under OLD)
        assert code == 0 or (already and argv[0] in ("fit", "project", "relocate")
                             and "--overwrite" not in argv), (argv, k)
        assert after_rerun(), (argv, k)  # … with the right result …
        assert leftovers(d) == [], (argv, k, leftovers(d))  # … and cleans what the kill left
        if (d / "m").exists():
            assert leftovers(d / "m") == [], (argv, k)
            versions = sorted(p.name for p in (d / "m").iterdir() if p.name.startswith("v"))
            assert versions[-1] == (d / "m" / "CURRENT").read_text().strip(), (argv, k)
    assert after_rerun()
    return n


@pytest.mark.slow
def test_kill_after_every_commit_step(data):
    d, X, y = data
    fitted_a = lambda: same_model(d / "m", X[:250], y[:250])  # noqa: E731
    fitted_ab = lambda: same_model(d / "m", X, y)  # noqa: E731

    def fit_killed(k):
        assert not (d / "m").exists() or fitted_a()

    assert _kill_sweep(d, ["fit", d / "a.zarr", "--model", d / "m"], fit_killed, fitted_a) >= 2

    def update_killed(k):
        assert fitted_a() or fitted_ab()

    assert _kill_sweep(d, ["update", d / "m", d / "b.zarr"], update_killed, fitted_ab) >= 2

    rows = lambda n: lambda: store.open_output(d / "o.zarr")["projection"].shape == (n, 2)  # noqa: E731

    def project_killed(k):
        assert not (d / "o.zarr").exists() or rows(150)()

    assert _kill_sweep(d, ["project", d / "m", d / "b.zarr", "--output", d / "o.zarr"],
                       project_killed, rows(150)) >= 1
    for no_exchange in (False, True):
        def overwrite_killed(k, no_exchange=no_exchange):
            if (d / "o.zarr").exists():
                assert store.open_output(d / "o.zarr")["projection"].shape[0] in (150, 250)
            else:  # between the two renames: readers say so; the rerun restores, then replaces
                assert no_exchange, k
                with pytest.raises(sp.InputError, match="interrupted"):
                    store.open_output(d / "o.zarr")

        steps = _kill_sweep(d, ["project", d / "m", d / "a.zarr", "--output", d / "o.zarr",
                                "--overwrite"], overwrite_killed, rows(250), no_exchange)
        assert steps == (3 if no_exchange else 2)
        _reset(d, d.parent / f"{d.name}-template")


# ------------------------------------------------------------------ ENOSPC
@contextlib.contextmanager
def disk_full_at(k, monkeypatch):
    """The k-th file write of a model or output fails with ENOSPC (0: never)."""
    import zarr.storage._local as local

    count = [0]

    def maybe_fail(path):
        count[0] += 1
        if count[0] == k:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    original_put = local._put

    def put(path, value, exclusive=False):
        maybe_fail(path)
        return original_put(path, value, exclusive)

    real_open = open

    def open_(file, mode="r", *args, **kwargs):
        if "w" in mode or "x" in mode:  # "x": the model's files, made new, never overwritten
            maybe_fail(file)
        return real_open(file, mode, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(local, "_put", put)
        m.setattr(store, "open", open_, raising=False)
        yield count


def enospc_sweep(d, argv, check, monkeypatch, capsys):
    """Fail each write in turn; every time: one line, user files bit-identical, no leftovers."""
    before = {p.name: tree(p) for p in d.iterdir() if not p.name.startswith(".")}
    k = 1
    while True:
        with disk_full_at(k, monkeypatch) as count:
            code = main([str(a) for a in argv])
        err = capsys.readouterr().err.strip().splitlines()
        if code == 0:
            assert count[0] < k
            break
        assert code == 2, (k, err)
        assert len(err) == 1, (k, err)
        assert "No space left on device" in err[0], err[0]
        assert "free some space" in err[0], err[0]
        assert {p.name: tree(p) for p in d.iterdir() if not p.name.startswith(".")} == before, k
        assert leftovers(d) == [], (k, leftovers(d))
        k += 1
    assert k > 3
    assert check()
    return k - 1


@pytest.mark.slow
def test_disk_full_at_every_write_of_fit_update_and_project(data, monkeypatch, capsys):
    d, X, y = data
    n_fit = enospc_sweep(d, ["fit", d / "a.zarr", "--model", d / "m"],
                         lambda: same_model(d / "m", X[:250], y[:250]), monkeypatch, capsys)
    n_update = enospc_sweep(d, ["update", d / "m", d / "b.zarr"],
                            lambda: same_model(d / "m", X, y), monkeypatch, capsys)
    assert n_fit >= 4
    assert n_update >= 4
    assert leftovers(d / "m") == []
    assert main([str(a) for a in ("project", d / "m", d / "b.zarr", "--output", d / "o.zarr")]) == 0
    model = sp.load(d / "m")
    n_project = enospc_sweep(
        d, ["project", d / "m", d / "a.zarr", "--output", d / "o.zarr", "--overwrite"],
        lambda: np.allclose(zarr.open_group(str(d / "o.zarr"))["projection"][:],
                            model.transform(X[:250]), rtol=1e-12, atol=1e-12),
        monkeypatch, capsys)
    assert n_project >= 10  # every chunk and metadata file of the output


# --------------------------------------------------------------- relocate
def _moved(d):
    """Model m (of old/a.zarr and old/b.zarr) and output o.zarr (of old/a.zarr); old/ moved to new/."""
    (d / "old").mkdir()
    for name in ("a.zarr", "b.zarr"):
        (d / name).rename(d / "old" / name)
    assert main(["fit", str(d / "old" / "*.zarr"), "--model", str(d / "m")]) == 0
    assert main([str(a) for a in ("project", d / "m", d / "old" / "a.zarr", "--output",
                                  d / "o.zarr")]) == 0
    (d / "old").rename(d / "new")

    def where():
        """The folders the model's and the output's ledgers name (as sets)."""
        model = {os.path.basename(os.path.dirname(e["url"]))
                 for e in sp.load(d / "m").meta_["sources"]}
        out = {os.path.basename(os.path.dirname(e["url"]))
               for e in store.open_output(d / "o.zarr").attrs["streamproj"]["sources"]}
        return model, out

    return where


@pytest.mark.slow
@pytest.mark.parametrize("no_exchange", [False, True])
def test_kill_after_every_commit_step_of_a_relocation(data, no_exchange):
    d, X, y = data
    where = _moved(d)
    summary = sp.load(d / "m").model_id_

    def killed(k):
        # each of the two is whole, as it was or relocated; the model's numbers never change
        assert sp.load(d / "m").model_id_ == summary
        assert same_model(d / "m", X, y)
        if not (d / "o.zarr").exists():  # between the two renames: the rerun puts it back
            assert no_exchange, k
            with pytest.raises(sp.InputError, match="interrupted"):
                store.open_output(d / "o.zarr")
            return
        model, out = where()
        assert model in ({"old"}, {"new"}), k
        assert out in ({"old"}, {"new"}), k
        assert store.open_output(d / "o.zarr")["projection"].shape == (250, 2)

    def relocated():
        return where() == ({"new"}, {"new"}) and sp.load(d / "m").model_id_ == summary

    steps = _kill_sweep(d, ["relocate", d / "m", d / "old", d / "new", "--output", d / "o.zarr"],
                        killed, relocated, no_exchange)
    assert steps >= 4


@pytest.mark.slow
def test_disk_full_at_every_write_of_a_relocation(data, monkeypatch, capsys):
    d, X, y = data
    _moved(d)
    shutil.rmtree(d / "o.zarr")  # the model alone: a failed write leaves everything as it was
    where_model = lambda: {os.path.basename(os.path.dirname(e["url"]))  # noqa: E731
                           for e in sp.load(d / "m").meta_["sources"]}
    n = enospc_sweep(d, ["relocate", d / "m", d / "old", d / "new"],
                     lambda: where_model() == {"new"} and same_model(d / "m", X, y),
                     monkeypatch, capsys)
    assert n >= 3
    assert leftovers(d / "m") == []


def test_a_ctrl_c_after_the_switch_to_a_new_version_keeps_that_version(data, monkeypatch):
    # a KeyboardInterrupt in the model folder's fsync, after CURRENT names the new version:
    # the roll-back removed that version, and the model said "CURRENT names v000002, which
    # is not a folder in the model; the model is damaged" from then on
    from streamproj import jobs

    d, X, y = data
    jobs.fit_model(d / "a.zarr", d / "m")
    write_pointer = store._write_pointer

    def interrupted_after_the_replace(folder, name):
        def fsync(path):
            raise KeyboardInterrupt

        with monkeypatch.context() as m:
            m.setattr(store, "_fsync", fsync)
            write_pointer(folder, name)

    monkeypatch.setattr(store, "_write_pointer", interrupted_after_the_replace)
    with pytest.raises(KeyboardInterrupt):
        jobs.update_model(d / "m", d / "b.zarr")
    monkeypatch.undo()
    assert (d / "m" / "CURRENT").read_text().strip() == "v000002"
    assert same_model(d / "m", X, y)
    assert jobs.update_model(d / "m", d / "b.zarr")["status"] == "unchanged"
    assert sorted(p.name for p in (d / "m").iterdir()) == ["CURRENT", "v000001", "v000002"]


@pytest.mark.parametrize("argv", [["--overwrite"], ["--append"]])
def test_a_failed_second_rename_of_a_replacement_puts_the_old_output_back(data, monkeypatch,
                                                                           capsys, argv):
    # without an atomic exchange a replacement is two renames; when the second failed (EIO,
    # a Windows sharing violation), OUT was left missing until another process restored it
    import types

    d, *_ = data
    assert main([str(a) for a in ("fit", d / "a.zarr", "--model", d / "m")]) == 0
    assert main([str(a) for a in ("project", d / "m", d / "b.zarr", "--output", d / "o.zarr")]) == 0
    before = tree(d / "o.zarr")
    capsys.readouterr()

    def rename(src, dest):
        if ".tmp-" in os.path.basename(src) and os.path.basename(dest) == "o.zarr":
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(src))
        return os.rename(src, dest)

    proxy = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    proxy.rename = rename
    monkeypatch.setattr(store, "os", proxy)
    monkeypatch.setattr(store, "_exchange", lambda src, dest: False)
    code = main([str(a) for a in ("project", d / "m", d / "a.zarr", d / "b.zarr", "--output",
                                  d / "o.zarr", *argv)])
    assert code == 2
    assert "Input/output error" in capsys.readouterr().err
    assert tree(d / "o.zarr") == before
    assert leftovers(d) == []
