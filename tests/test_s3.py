"""Object stores: a real S3-compatible server (moto's server mode) on 127.0.0.1."""

import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr
from conftest import make_classes, one_error_line, write_zarr

import streamproj as sp
from streamproj import store
from streamproj.cli import main
from streamproj.errors import InputError, ModelError

moto_server = pytest.importorskip("moto.server")
s3fs = pytest.importorskip("s3fs")
boto3 = pytest.importorskip("boto3")

BUCKET = "streamproj-test"


@pytest.fixture(scope="module")
def endpoint():
    """A moto S3 server on a free port of 127.0.0.1, and the AWS settings that point to it."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    s3fs.S3FileSystem.clear_instance_cache()
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    try:
        yield env["AWS_ENDPOINT_URL"]
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def bucket(endpoint, request):
    """A fresh prefix in the bucket for one test."""
    return f"s3://{BUCKET}/{request.node.name.replace('[', '-').replace(']', '')}"


def keys(prefix):
    fs = s3fs.S3FileSystem()
    return sorted(fs.find(prefix.replace("s3://", "")))


def s3_zarr(url, X, y, chunk_rows=100):
    group = zarr.open_group(url, mode="w")
    group.create_array("X", data=X, chunks=(chunk_rows, X.shape[1]))
    group.create_array("y", data=y, chunks=(chunk_rows,))


def close(a, b, tol=1e-10):
    return np.max(np.abs(a - b)) <= tol * np.max(np.abs(b))


@pytest.mark.slow
def test_fit_update_project_with_s3_input_model_and_output(bucket, capsys):
    X, y = make_classes(n=900, p=4, k=3, seed=50)
    s3_zarr(f"{bucket}/a.zarr", X[:500], y[:500])
    s3_zarr(f"{bucket}/b.zarr", X[500:], y[500:])
    model, out = f"{bucket}/model", f"{bucket}/out.zarr"
    assert main(["fit", f"{bucket}/a.zarr", "--model", model, "--no-progress"]) == 0
    assert main(["update", model, f"{bucket}/b.zarr", "--no-progress"]) == 0
    assert main(["update", model, f"{bucket}/b.zarr", "--no-progress"]) == 0  # nothing new
    assert "model unchanged" in capsys.readouterr().out
    got, ref = sp.load(model), sp.BoundaryProjector().fit(X, y)
    for name in ("coef_", "components_", "center_"):
        assert close(getattr(got, name), getattr(ref, name)), name
    assert not os.path.exists("s3:")  # nothing written to a local folder named "s3:"
    names = keys(model)
    assert f"{BUCKET}/test_fit_update_project_with_s3_input_model_and_output/model/CURRENT" in names
    assert len({n.split("/")[-2] for n in names if n.endswith("model.json")}) == 2  # v1 and v2 kept
    assert main(["project", model, f"{bucket}/b.zarr", "--output", out, "--no-progress"]) == 0
    group = store.open_output(out)
    np.testing.assert_allclose(group["projection"][:], got.transform(X[500:]), rtol=1e-12, atol=1e-12)
    assert main(["info", model]) == 0
    assert '"n_samples": 900' in capsys.readouterr().out


@pytest.mark.slow
def test_interrupted_overwrite_leaves_the_old_output_readable(bucket, capsys):
    X, y = make_classes(n=600, p=3, seed=51)
    s3_zarr(f"{bucket}/d.zarr", X, y)
    bad = X.copy()
    bad[550, 1] = np.inf  # the new pass fails near its end
    s3_zarr(f"{bucket}/bad.zarr", bad, y)
    model, out = f"{bucket}/m", f"{bucket}/out.zarr"
    assert main(["fit", f"{bucket}/d.zarr", "--model", model]) == 0
    assert main(["project", model, f"{bucket}/d.zarr", "--output", out]) == 0
    before = store.open_output(out)["projection"][:]
    assert main(["project", model, f"{bucket}/bad.zarr", "--output", out, "--overwrite"]) == 2
    assert "row 550" in one_error_line(capsys)
    np.testing.assert_array_equal(store.open_output(out)["projection"][:], before)
    fs = s3fs.S3FileSystem()
    children = [c.rsplit("/", 1)[-1] for c in fs.ls(out.replace("s3://", ""), detail=False)]
    assert len([c for c in children if c.startswith("v")]) == 1  # the failed version was removed
    assert main(["project", model, f"{bucket}/bad.zarr", "--output", f"{bucket}/new.zarr"]) == 2
    one_error_line(capsys)
    assert keys(f"{bucket}/new.zarr") == []  # a failed first write leaves nothing


@pytest.mark.slow
def test_an_append_or_a_nightly_run_creates_its_first_output_on_s3(bucket, tmp_path, capsys):
    # a missing local output is created by --append; on S3 the command failed "no output at",
    # so a nightly job writing to S3 in append or auto mode could never make its first output
    X, y = make_classes(n=600, p=3, seed=52)
    s3_zarr(f"{bucket}/a.zarr", X[:300], y[:300])
    s3_zarr(f"{bucket}/b.zarr", X[300:], y[300:])
    model, out = f"{bucket}/m", f"{bucket}/out.zarr"
    assert main(["fit", f"{bucket}/a.zarr", "--model", model]) == 0
    assert main(["project", model, f"{bucket}/a.zarr", "--output", out, "--append"]) == 0
    assert main(["project", model, f"{bucket}/b.zarr", "--output", out, "--append"]) == 0
    np.testing.assert_allclose(store.open_output(out)["projection"][:], sp.load(model).transform(X),
                               rtol=1e-12, atol=1e-12)
    job = tmp_path / "job.toml"
    job.write_text(f'[input]\npaths = ["{bucket}/a.zarr", "{bucket}/b.zarr"]\n'
                   f'[model]\npath = "{bucket}/m2"\n[output]\npath = "{bucket}/o2.zarr"\n'
                   'mode = "auto"\n')
    capsys.readouterr()
    assert main(["run", str(job)]) == 0, capsys.readouterr().err
    assert store.open_output(f"{bucket}/o2.zarr")["projection"].shape == (600, 2)
    # an output in a bucket that is not there: refused before the model step writes anything
    job.write_text(job.read_text().replace(f"{bucket}/m2", f"{bucket}/m3")
                   .replace(f"{bucket}/o2.zarr", "s3://no-such-bucket-here/o.zarr"))
    assert main(["run", str(job)]) == 2
    assert "no bucket 'no-such-bucket-here'" in one_error_line(capsys)
    assert keys(f"{bucket}/m3") == []


KILL_S3_PROJECT = """
import os, sys, time
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
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_killed_overwrite_keeps_the_old_output_and_readers_refuse_an_unfinished_one(bucket, tmp_path,
                                                                                   capsys):
    X, y = make_classes(n=600, p=3, seed=52)
    s3_zarr(f"{bucket}/d.zarr", X, y)
    s3_zarr(f"{bucket}/d2.zarr", 2 * X, y)
    model, out, fresh = f"{bucket}/m", f"{bucket}/out.zarr", f"{bucket}/fresh.zarr"
    assert main(["fit", f"{bucket}/d.zarr", "--model", model]) == 0
    assert main(["project", model, f"{bucket}/d.zarr", "--output", out]) == 0
    before = store.open_output(out)["projection"][:]
    kill_when_ready(KILL_S3_PROJECT.format(
        argv=["project", model, f"{bucket}/d2.zarr", "--output", out, "--overwrite"]))
    np.testing.assert_array_equal(store.open_output(out)["projection"][:], before)
    # a first write killed midway: every reader refuses it with one line
    kill_when_ready(KILL_S3_PROJECT.format(argv=["project", model, f"{bucket}/d.zarr", "--output", fresh]))
    with pytest.raises(InputError, match="incomplete"):
        store.open_output(fresh)
    assert main(["plot", fresh, "--output", str(tmp_path / "f.png")]) == 2
    assert "is incomplete" in one_error_line(capsys)
    assert not (tmp_path / "f.png").exists()
    # rerunning the commands repairs both
    assert main(["project", model, f"{bucket}/d.zarr", "--output", fresh]) == 0
    assert main(["project", model, f"{bucket}/d2.zarr", "--output", out, "--overwrite"]) == 0
    np.testing.assert_allclose(store.open_output(out)["projection"][:], sp.load(model).transform(2 * X),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(store.open_output(fresh)["projection"][:], before)


def test_overwrite_refuses_a_foreign_s3_prefix(bucket, capsys):
    X, y = make_classes(n=300, p=3, seed=53)
    s3_zarr(f"{bucket}/d.zarr", X, y)
    fs = s3fs.S3FileSystem()
    fs.pipe_file(f"{bucket}/thesis/chapter1.tex".replace("s3://", ""), b"precious")
    assert main(["fit", f"{bucket}/d.zarr", "--model", f"{bucket}/m"]) == 0
    assert main(["project", f"{bucket}/m", f"{bucket}/d.zarr", "--output", f"{bucket}/thesis",
                 "--overwrite"]) == 2
    assert "is not a streamproj output" in one_error_line(capsys)
    assert fs.cat_file(f"{bucket}/thesis/chapter1.tex".replace("s3://", "")) == b"precious"
    assert main(["fit", f"{bucket}/d.zarr", "--model", f"{bucket}/thesis", "--overwrite"]) == 2
    assert "thesis" in one_error_line(capsys)
    assert keys(f"{bucket}/thesis") == [f"{BUCKET}/test_overwrite_refuses_a_foreign_s3_prefix/thesis/chapter1.tex"]


def test_s3_overlap_and_urls_spelled_differently(bucket, capsys):
    X, y = make_classes(n=300, p=3, seed=54)
    s3_zarr(f"{bucket}/d.zarr", X, y)
    assert main(["fit", f"{bucket}/d.zarr", "--model", f"{bucket}//d.zarr/model/"]) == 2
    assert "overlap" in one_error_line(capsys)
    assert keys(f"{bucket}/d.zarr/model") == []


def test_s3_model_orphan_version_is_skipped_and_pointer_is_checked(bucket, capsys):
    X, y = make_classes(n=400, p=3, seed=55)
    s3_zarr(f"{bucket}/a.zarr", X[:200], y[:200])
    s3_zarr(f"{bucket}/b.zarr", X[200:], y[200:])
    model = f"{bucket}/m"
    assert main(["fit", f"{bucket}/a.zarr", "--model", model]) == 0
    fs = s3fs.S3FileSystem()
    root = model.replace("s3://", "")
    fs.copy(f"{root}/v000001", f"{root}/v000002", recursive=True)  # a killed writer's orphan
    assert main(["update", model, f"{bucket}/b.zarr"]) == 0
    assert "(v000003)" in capsys.readouterr().out
    assert sp.load(model).stats_.n_samples == 400
    fs.pipe_file(f"{root}/CURRENT", b"../../elsewhere\n")
    with pytest.raises(ModelError, match="not a version folder"):
        sp.load(model)


def test_unreachable_endpoint_is_one_line_and_quick(endpoint, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        start = time.monotonic()
        code = main(["fit", f"s3://{BUCKET}/d.zarr", "--model", str(tmp_path / "m")])
        line = one_error_line(capsys)
        took = time.monotonic() - start
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
    assert code == 2, line
    assert "s3://streamproj-test/d.zarr" in line, line
    assert took < 120  # a guard against the old multi-minute retries, not a timing assertion
    assert not (tmp_path / "m").exists()


def test_plot_to_a_url_is_refused_and_writes_nothing_local(bucket, tmp_path, capsys, monkeypatch):
    X, y = make_classes(n=300, p=3, seed=56)
    write_zarr(tmp_path / "d.zarr", X, y)
    assert main(["fit", str(tmp_path / "d.zarr"), "--model", str(tmp_path / "m")]) == 0
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "d.zarr"), "--output",
                 str(tmp_path / "o.zarr")]) == 0
    monkeypatch.chdir(tmp_path)
    assert main(["plot", str(tmp_path / "o.zarr"), "--output", f"{bucket}/fig.png"]) == 2
    assert "local files only" in one_error_line(capsys)
    assert not (tmp_path / "s3:").exists()
    store.write_bytes(f"{bucket}/fig.png", b"\x89PNG data")  # the helper plot can call
    assert s3fs.S3FileSystem().cat_file(f"{bucket}/fig.png".replace("s3://", "")) == b"\x89PNG data"


@pytest.mark.slow
def test_a_local_folder_moved_to_s3_is_relocated_and_skipped_there(bucket, tmp_path, capsys,
                                                                  monkeypatch):
    from streamproj import jobs

    X, y = make_classes(n=900, p=3, k=2, seed=57)
    (tmp_path / "events").mkdir()
    for i in (0, 1):
        write_zarr(tmp_path / "events" / f"day-{i}.zarr", X[i * 300:(i + 1) * 300],
                   y[i * 300:(i + 1) * 300], chunk_rows=100)
    model, out = tmp_path / "m", tmp_path / "o.zarr"
    assert main(["fit", str(tmp_path / "events" / "day-*.zarr"), "--model", str(model)]) == 0
    assert main(["project", str(model), str(tmp_path / "events" / "day-*.zarr"), "--output",
                 str(out)]) == 0
    # the folder moves to the bucket (uploaded, then removed here)
    fs = s3fs.S3FileSystem()
    fs.put(str(tmp_path / "events"), f"{bucket}/events".replace("s3://", ""), recursive=True)
    import shutil

    shutil.rmtree(tmp_path / "events")
    glob = f"{bucket}/events/day-*.zarr"
    assert main(["update", str(model), glob]) == 2
    assert "moved or copied" in one_error_line(capsys)
    # a trailing slash and the scheme's other spelling are the same place
    assert main(["relocate", str(model), f"{tmp_path}/events/",
                 f"S3://{bucket[len('s3://'):]}/events/", "--output", str(out)]) == 0
    capsys.readouterr()
    held = [e["url"] for e in sp.load(model).meta_["sources"]]
    assert held == [f"{bucket}/events/day-{i}.zarr" for i in (0, 1)]
    # the next update lists the moved stores and opens none of them but the last one
    s3_zarr(f"{bucket}/events/day-2.zarr", X[600:], y[600:])
    opened = []
    real = jobs.open_source
    monkeypatch.setattr(jobs, "open_source",
                        lambda url, *a, **k: opened.append(url) or real(url, *a, **k))
    report = jobs.update_model(model, glob)
    assert [s["status"] for s in report["sources"]] == ["skipped", "skipped", "merged"]
    assert opened == [f"{bucket}/events/day-2.zarr"]
    got, ref = sp.load(model), sp.BoundaryProjector().fit(X, y)
    for name in ("coef_", "components_", "center_"):
        assert close(getattr(got, name), getattr(ref, name)), name
    assert jobs.project_model(model, glob, out, mode="append",
                              reproject_above=90)["rows_written"] == 300


def test_two_machines_updating_one_s3_model_leave_it_readable(bucket, tmp_path, capsys, monkeypatch):
    # Two jobs on different machines (no shared lock) read the same CURRENT and picked the
    # same version name: the later one's files replaced the first one's committed version,
    # and its refusal then removed that version, so CURRENT named nothing and the model was lost.
    X, y = make_classes(n=600, p=3, seed=58)
    for i in range(3):
        s3_zarr(f"{bucket}/d{i}.zarr", X[i * 200:(i + 1) * 200], y[i * 200:(i + 1) * 200])
    model = f"{bucket}/m"
    assert main(["fit", f"{bucket}/d0.zarr", "--model", model]) == 0
    locks = iter(range(100))  # every job its own lock file, as on another machine
    monkeypatch.setattr(store, "_lock_path", lambda url: tmp_path / f"{next(locks)}.lock")
    real, other = store._version_files, []

    def the_other_machine_commits_first(*args):
        if not other:  # this job has read CURRENT and chosen its version's name
            other.append(None)
            other[0] = main(["update", model, f"{bucket}/d1.zarr"])
        return real(*args)

    monkeypatch.setattr(store, "_version_files", the_other_machine_commits_first)
    capsys.readouterr()
    assert main(["update", model, f"{bucket}/d2.zarr"]) == 2
    assert other == [0]
    assert "another job" in one_error_line(capsys)
    got = sp.load(model)
    assert [e["url"] for e in got.meta_["sources"]] == [f"{bucket}/d0.zarr", f"{bucket}/d1.zarr"]
    ref = sp.BoundaryProjector().fit(X[:400], y[:400])
    for name in ("coef_", "components_", "center_"):
        assert close(getattr(got, name), getattr(ref, name)), name


def test_two_machines_appending_to_one_s3_output_lose_no_rows(bucket, tmp_path, capsys, monkeypatch):
    # Two appends on different machines started from the same version: the later switch
    # replaced the earlier one's, whose rows were gone although it said it had appended them.
    X, y = make_classes(n=600, p=3, seed=59)
    for i in range(3):
        s3_zarr(f"{bucket}/d{i}.zarr", X[i * 200:(i + 1) * 200], y[i * 200:(i + 1) * 200])
    model, out = f"{bucket}/m", f"{bucket}/out.zarr"
    assert main(["fit", f"{bucket}/d0.zarr", "--model", model]) == 0
    assert main(["project", model, f"{bucket}/d0.zarr", "--output", out]) == 0
    locks = iter(range(100))  # every job its own lock file, as on another machine
    monkeypatch.setattr(store, "_lock_path", lambda url: tmp_path / f"{next(locks)}.lock")
    real, other = store._register_guard, []

    def the_other_machine_appends_meanwhile(*args):
        if not other:  # this job has read the pointer and copied the version it names
            other.append(None)
            other[0] = main(["project", model, f"{bucket}/d1.zarr", "--output", out, "--append"])
        return real(*args)

    monkeypatch.setattr(store, "_register_guard", the_other_machine_appends_meanwhile)
    capsys.readouterr()
    assert main(["project", model, f"{bucket}/d2.zarr", "--output", out, "--append"]) == 2
    assert other == [0]
    assert "changed by another job" in one_error_line(capsys)
    ref = sp.load(model).transform(X)
    np.testing.assert_allclose(store.open_output(out)["projection"][:], ref[:400], rtol=1e-12, atol=1e-12)
    assert main(["project", model, f"{bucket}/d2.zarr", "--output", out, "--append"]) == 0  # rerun
    np.testing.assert_allclose(store.open_output(out)["projection"][:], ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("where", ["_remote_output", "_read_remote_state"])
def test_an_append_whose_starting_version_another_machine_removed_says_so(bucket, tmp_path, capsys,
                                                                         monkeypatch, where):
    # The other machine switched the pointer (and removed the version it named) between this
    # job's read of the pointer and its copy: "cannot write ...: GroupNotFoundError: ...";
    # or between the job's first read of the output and its opening of that version: "no
    # Zarr group at OUT/v…" (which a reader now follows to the new version)
    X, y = make_classes(n=600, p=3, seed=61)
    for i in range(3):
        s3_zarr(f"{bucket}/d{i}.zarr", X[i * 200:(i + 1) * 200], y[i * 200:(i + 1) * 200])
    model, out = f"{bucket}/m", f"{bucket}/out.zarr"
    assert main(["fit", f"{bucket}/d0.zarr", "--model", model]) == 0
    assert main(["project", model, f"{bucket}/d0.zarr", "--output", out]) == 0
    locks = iter(range(100))  # every job its own lock file, as on another machine
    monkeypatch.setattr(store, "_lock_path", lambda url: tmp_path / f"{next(locks)}.lock")
    real, other = store._remote_state, []

    def the_other_machine_appends_after_this_one_read_the_pointer(fs, root):
        state = real(fs, root)
        if not other and state[0] == "pointer" and sys._getframe(1).f_code.co_name == where:
            other.append(None)
            other[0] = main(["project", model, f"{bucket}/d1.zarr", "--output", out, "--append"])
        return state

    monkeypatch.setattr(store, "_remote_state", the_other_machine_appends_after_this_one_read_the_pointer)
    capsys.readouterr()
    ref = sp.load(model).transform(X)
    if where == "_read_remote_state":  # the plan reads the new version: nothing to rerun
        assert main(["project", model, f"{bucket}/d2.zarr", "--output", out, "--append"]) == 0
        assert other == [0]
        np.testing.assert_allclose(store.open_output(out)["projection"][:], ref, rtol=1e-12, atol=1e-12)
        return
    assert main(["project", model, f"{bucket}/d2.zarr", "--output", out, "--append"]) == 2
    assert other == [0]
    assert one_error_line(capsys).endswith("was changed by another job while this one began; rerun the job")
    np.testing.assert_allclose(store.open_output(out)["projection"][:], ref[:400], rtol=1e-12, atol=1e-12)
    assert main(["project", model, f"{bucket}/d2.zarr", "--output", out, "--append"]) == 0  # rerun
    np.testing.assert_allclose(store.open_output(out)["projection"][:], ref, rtol=1e-12, atol=1e-12)

@pytest.mark.parametrize(("code", "claimed", "plain"), [
    ("PreconditionFailed", False, False),  # a store's 412 without the condition named
    ("ConditionalRequestConflict", False, False),  # AWS's 409: another conditional write races
    ("NotImplemented", True, True),  # no conditional writes: a plain PUT, as before
    ("InternalError", None, False),  # anything else is an error, never a plain PUT over it
])
def test_a_version_claim_refused_by_the_store_is_never_a_plain_put_over_it(code, claimed, plain):
    botocore = pytest.importorskip("botocore.exceptions")

    class Store:
        protocol = ("s3", "s3a")

        def __init__(self):
            self.puts = []

        def pipe_file(self, path, data, mode="overwrite"):
            if mode == "create":
                exc = OSError(5, code)
                exc.__cause__ = botocore.ClientError({"Error": {"Code": code}}, "PutObject")
                raise exc
            self.puts.append(path)

    fs = Store()
    if claimed is None:
        with pytest.raises(OSError, match=code):
            store._claim(fs, "b/m/v000002/model.json", b"{}")
    else:
        assert store._claim(fs, "b/m/v000002/model.json", b"{}") is claimed
    assert fs.puts == (["b/m/v000002/model.json"] if plain else [])


def test_a_local_model_saved_to_s3_names_no_local_version_it_came_from(bucket, tmp_path):
    """A local model.json names the version it was written from (its pruning chain); saved to
    an object store, that local name was carried into the remote model.json."""
    import json

    import s3fs

    X, y = make_classes(n=400, p=3, seed=52)
    local = tmp_path / "m"
    assert main(["fit", _local_zarr(tmp_path / "a.zarr", X[:200], y[:200]), "--model",
                 str(local), "--no-progress"]) == 0
    assert main(["update", str(local), _local_zarr(tmp_path / "b.zarr", X[200:], y[200:]),
                 "--no-progress"]) == 0
    assert "previous_version" in json.loads((local / "v000002" / "model.json").read_text())
    sp.load(local).save(f"{bucket}/model")
    record = store.read_record(local)  # (as a job copies a record: its meta as read)
    with store.model_lock(f"{bucket}/copied"):
        store.write_record(f"{bucket}/copied", record)
    fs = s3fs.S3FileSystem()
    remote = [n for n in fs.find(bucket.replace("s3://", "")) if n.endswith("model.json")]
    assert remote
    for name in remote:
        assert "previous_version" not in json.loads(fs.cat(name))


def _local_zarr(path, X, y):
    group = zarr.open_group(str(path), mode="w")
    group.create_array("X", data=X, chunks=(100, X.shape[1]))
    group.create_array("y", data=y, chunks=(100,))
    return str(path)
