"""Nothing the user owns is ever lost: each case through the command line.

Every refusal is exit status 2 with one line on stderr, and the user's files
are bit-identical afterwards (a digest of the whole folder before and after).
"""

import errno
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import zarr
from conftest import make_classes, one_error_line, write_zarr
from conftest import run_cli as run

import streamproj as sp
from streamproj import sources, store
from streamproj.errors import InputError


def tree(path):
    """Digest of names, bytes and modes of everything under ``path``."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files) + dirs:
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode())
            h.update(str(os.lstat(full).st_mode).encode())
            if os.path.isfile(full) and not os.path.islink(full):
                with open(full, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


@pytest.fixture
def setup(tmp_path):
    """Input data, a fitted model and a projection, in a folder of their own."""
    X, y = make_classes(n=300, p=3, seed=70)
    d = tmp_path / "work"
    d.mkdir()
    write_zarr(d / "d.zarr", X, y, chunk_rows=100)
    assert run("fit", d / "d.zarr", "--model", d / "m") == 0
    assert run("project", d / "m", d / "d.zarr", "--output", d / "o.zarr") == 0
    return d, X, y


def refused(capsys, root, *argv, match):
    before = tree(root)
    assert run(*argv) == 2
    line = one_error_line(capsys)
    assert match in line, line
    assert tree(root) == before
    return line


# ------------------------------------------------------------ 1. --overwrite
def test_overwrite_never_replaces_a_folder_that_is_not_a_streamproj_output(setup, capsys, tmp_path):
    d, *_ = setup
    thesis = tmp_path / "thesis"
    (thesis / "chapters").mkdir(parents=True)
    (thesis / "chapters" / "one.tex").write_text("years of work")
    (thesis / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", thesis, "--overwrite",
            match="is not a streamproj output (no streamproj attributes in its zarr.json)")
    refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", thesis, "--overwrite",
            match="is not a streamproj model directory")
    (tmp_path / "notes.txt").write_text("a file")
    refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", tmp_path / "notes.txt", "--overwrite",
            match="notes.txt is a file, not a streamproj model directory")
    assert (tmp_path / "notes.txt").read_text() == "a file"
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", tmp_path / "notes.txt",
            "--overwrite", match="is not a streamproj output (it is a file, not a folder)")
    (thesis / "zarr.json").unlink()
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", thesis, "--overwrite",
            match="is not a streamproj output (a folder with no zarr.json, holding chapters)")
    # an empty folder and a streamproj output are replaced
    (tmp_path / "empty").mkdir()
    assert run("project", d / "m", d / "d.zarr", "--output", tmp_path / "empty", "--overwrite") == 0
    assert store.open_output(tmp_path / "empty")["projection"].shape == (300, 2)


def test_append_starts_an_output_in_an_empty_folder_as_where_nothing_is(setup, capsys, tmp_path):
    """``project --append`` (and a job's append mode) fills an empty folder, as a path with nothing.

    It was refused as "exists; pass --overwrite", which --append does not take;
    a job had written its model by then. Without --append an empty folder is
    still refused (it exists: --overwrite replaces it), and a folder with
    anything in it is never touched.
    """
    d, *_ = setup
    (tmp_path / "empty").mkdir()
    os.chmod(tmp_path / "empty", 0o700)
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", tmp_path / "empty",
            match="exists; pass --overwrite")
    assert run("project", d / "m", d / "d.zarr", "--output", tmp_path / "empty", "--append") == 0
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'empty'}: projection (300 x 2)")
    assert store.open_output(tmp_path / "empty")["projection"].shape == (300, 2)
    assert stat.S_IMODE(os.stat(tmp_path / "empty").st_mode) == 0o700  # (its permissions kept)
    assert run("project", d / "m", d / "d.zarr", "--output", tmp_path / "empty", "--append") == 0
    assert "unchanged: it holds all 300 rows already" in capsys.readouterr().out
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("mine")
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", tmp_path / "notes",
            "--append", match="notes")
    # a job in append mode: the model step and then OUT, in one run
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "out").mkdir()
    (tmp_path / "job" / "job.toml").write_text(
        f'[input]\npath = "{d / "d.zarr"}"\n[model]\npath = "m"\n'
        '[output]\npath = "out"\nmode = "append"\n')
    assert run("run", tmp_path / "job" / "job.toml", "--no-progress") == 0
    assert store.open_output(tmp_path / "job" / "out")["projection"].shape == (300, 2)


def test_append_to_a_folder_of_the_users_says_what_it_holds(setup, capsys, tmp_path):
    # it said "no Zarr group at FOLDER": as if the user had mistyped a Zarr path
    d, *_ = setup
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    line = refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", folder,
                   "--append", match=f"{folder} exists and is not a streamproj output (a folder "
                                     "with no zarr.json, holding notes.txt); --append (mode='append') "
                                     "adds rows")
    assert "left untouched" in line
    # a job in append (or auto) mode says the same, naming its key, before the model step
    for mode in ("append", "auto"):
        job = tmp_path / f"{mode}.toml"
        job.write_text(f'[input]\npath = "{d / "d.zarr"}"\n[model]\npath = "{tmp_path / "m2"}"\n'
                       f'[output]\npath = "notes"\nmode = "{mode}"\n')
        line = refused(capsys, tmp_path, "run", job, "--no-progress",
                       match=f"[output] path {folder} exists and is not a streamproj output (a "
                             f'folder with no zarr.json, holding notes.txt); [output] mode = "{mode}" '
                             "adds rows")
        assert not (tmp_path / "m2").exists()
    # a model directory is said to be one; more names than a few are cut short
    shutil.copytree(d / "m", tmp_path / "other")
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", tmp_path / "other",
            "--append", match="is not a streamproj output (a streamproj model directory)")
    for i in range(6):
        (folder / f"n{i}").write_text("mine")
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", folder, "--append",
            match="holding n0, n1, n2, n3, n4, … (7 in all)); --append")



@pytest.mark.parametrize(("mode", "how"), [("append", "--append (mode='append')"),
                                         ("auto", "mode='auto'")])
def test_a_python_append_to_a_folder_of_the_users_names_its_mode(setup, tmp_path, mode, how):
    # it said "--append adds rows" to a Python caller of mode="auto" too
    from streamproj import jobs

    d, *_ = setup
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(sp.errors.OutputExistsError,
                       match=re.escape(f"holding notes.txt); {how} adds rows to an output")):
        jobs.project_model(d / "m", [str(d / "d.zarr")], str(folder), mode=mode)
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("mode", ['mode = "rewrite"\n', "", 'mode = "rewrite"\noverwrite = true\n'])
def test_a_rewriting_job_says_what_a_folder_of_the_users_holds(setup, capsys, tmp_path, mode):
    # it said only "exists and is not a streamproj output; it is never replaced"
    d, *_ = setup
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    job = tmp_path / "job.toml"
    job.write_text(f'[input]\npath = "{d / "d.zarr"}"\n[model]\npath = "{tmp_path / "m2"}"\n'
                   f'[output]\npath = "notes"\n{mode}')
    refused(capsys, tmp_path, "run", job, "--no-progress",
            match=f"[output] path {folder} exists and is not a streamproj output (a folder with "
                  "no zarr.json, holding notes.txt); it is never replaced: choose another output")
    assert not (tmp_path / "m2").exists()  # refused before the model step


def test_an_empty_folder_that_gains_a_file_during_the_write_is_left_untouched(tmp_path):
    # the finished folder is renamed onto it, which the OS refuses once it holds something
    (tmp_path / "out").mkdir()

    def write():
        with store.output_group(tmp_path / "out", empty_ok=True) as group:
            group.attrs["x"] = 1
            (tmp_path / "out" / "mine.txt").write_text("put there meanwhile")

    with pytest.raises(sp.errors.OutputExistsError, match="was an empty folder when the write began"):
        write()
    assert os.listdir(tmp_path / "out") == ["mine.txt"]
    assert sorted(os.listdir(tmp_path)) == ["out"]  # (no copy left beside it)


@pytest.mark.parametrize("role", ["output", "model"])
def test_a_folder_made_at_a_new_path_during_the_write_is_left_untouched(tmp_path, capsys,
                                                                        monkeypatch, role):
    """Nothing was there when the write began; another program made a folder with a file
    there meanwhile: refused, the file kept (it was swapped aside and deleted)."""
    X, y = make_classes(n=200, p=3, seed=76)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=100)
    if role == "output":
        assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m") == 0
    target = tmp_path / ("o.zarr" if role == "output" else "m")
    consolidate = store.zarr.consolidate_metadata if role == "output" else None
    write_version = store._write_version

    def meanwhile():
        target.mkdir()
        (target / "mine.txt").write_text("made meanwhile")

    if role == "output":
        def late_consolidate(*args, **kwargs):
            out = consolidate(*args, **kwargs)
            meanwhile()
            return out
        monkeypatch.setattr(store.zarr, "consolidate_metadata", late_consolidate)
        argv = ["project", tmp_path / "m", tmp_path / "d.zarr", "--output", target]
    else:
        def late_version(*args, **kwargs):
            write_version(*args, **kwargs)
            meanwhile()
        monkeypatch.setattr(store, "_write_version", late_version)
        argv = ["fit", tmp_path / "d.zarr", "--model", target]
    capsys.readouterr()
    assert run(*argv) == 2
    line = one_error_line(capsys)
    assert f"{role} {target} was nothing when the write began but now holds something" in line
    assert os.listdir(target) == ["mine.txt"]
    assert (target / "mine.txt").read_text() == "made meanwhile"
    assert not [p for p in os.listdir(tmp_path) if p.startswith(f".{target.name}")]


def test_an_interrupted_fill_of_an_empty_folder_leaves_the_folder(tmp_path, monkeypatch):
    """The empty folder is replaced in one rename: interrupted there, it is still there, as it was.

    (rmdir and then rename left a moment with nothing at the path: a kill there lost the
    user's folder and its permissions.)"""
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o750)
    rename = os.rename

    def interrupted(src, dst, *args, **kwargs):
        if os.fspath(dst) == str(out):
            raise KeyboardInterrupt
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt), store.output_group(out, empty_ok=True) as group:
        group.attrs["x"] = 1
    monkeypatch.undo()
    assert out.is_dir()
    assert os.listdir(out) == []
    assert out.stat().st_mode & 0o777 == 0o750
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_a_folder_with_a_current_file_and_no_version_is_not_called_a_model(tmp_path):
    # LevelDB keeps a CURRENT file too: a refusal names what the folder holds instead
    db = tmp_path / "ldb"
    db.mkdir()
    for name in ("CURRENT", "LOCK", "LOG", "MANIFEST-000001", "000003.log"):
        (db / name).write_text("x")
    kind, why = store.local_state(db)
    assert kind == "foreign"
    assert "model" not in why
    assert why.startswith("a folder with no zarr.json, holding 000003.log, CURRENT, LOCK")
    model = tmp_path / "m"
    X, y = make_classes(n=200, p=3, seed=75)
    sp.BoundaryProjector().fit(X, y).save(model)
    assert store.local_state(model) == ("foreign", "a streamproj model directory")


def test_the_current_folder_is_never_replaced_under_the_shell(setup, capsys, monkeypatch):
    """An output or new model that is (or holds) the current folder is refused before the pass.

    The finished write is renamed onto the folder: a shell that ran
    ``project --append .`` from inside it was left in a deleted folder, where
    the next command said only "No such file or directory".
    """
    d, *_ = setup
    (d / "here").mkdir()
    monkeypatch.chdir(d / "here")
    for flag in ("--append", "--overwrite"):
        refused(capsys, d, "project", d / "m", d / "d.zarr", "--output", ".", flag,
                match="output . is the current folder: a finished write replaces that folder")
    refused(capsys, d, "fit", d / "d.zarr", "--model", ".", match="model . is the current folder")
    (d / "job.toml").write_text(f'[input]\npath = "{d / "d.zarr"}"\n[model]\npath = "m2"\n'
                                '[output]\npath = "here"\nmode = "append"\n')
    refused(capsys, d, "run", d / "job.toml", match="is the current folder")  # before the model step
    assert not (d / "m2").exists()
    monkeypatch.chdir(d / "o.zarr" / "projection")  # inside an output: --overwrite replaces it
    refused(capsys, d, "project", d / "m", d / "d.zarr", "--output", d / "o.zarr", "--overwrite",
            match=f"output {d / 'o.zarr'} holds the current folder")
    assert os.getcwd() == str(d / "o.zarr" / "projection")
    monkeypatch.chdir(d)  # from outside, the same writes go ahead
    assert run("project", d / "m", d / "d.zarr", "--output", "here", "--append") == 0
    assert store.open_output(d / "here")["projection"].shape == (300, 2)


def test_a_mount_point_is_refused_before_the_pass_not_after_it(setup, capsys, monkeypatch):
    """No rename replaces a mount point: an empty one was refused only once the pass was done."""
    d, *_ = setup
    (d / "mnt").mkdir()
    mounted = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: str(p) == str(d / "mnt") or mounted(p))
    computed = []
    monkeypatch.setattr(sp.jobs, "compute_with_progress",
                        lambda *a, **k: computed.append(1) or pytest.fail("the pass ran"))
    refused(capsys, d, "project", d / "m", d / "d.zarr", "--output", d / "mnt", "--append",
            match=f"output {d / 'mnt'} is a mount point: a finished write cannot be renamed onto "
                  f"it; name a folder inside it (e.g. {d / 'mnt' / 'out.zarr'})")
    refused(capsys, d, "fit", d / "d.zarr", "--model", d / "mnt", match="is a mount point")
    assert not computed


def test_an_empty_model_folder_that_gains_a_file_during_the_fit_is_left_untouched(
        tmp_path, capsys, monkeypatch):
    # as for outputs: the finished model is renamed onto the folder, not swapped aside and deleted
    X, y = make_classes(n=200, p=3, seed=74)
    write_zarr(tmp_path / "d.zarr", X, y, chunk_rows=100)
    (tmp_path / "m").mkdir()
    write_version = store._write_version

    def meanwhile(*args, **kwargs):
        write_version(*args, **kwargs)
        (tmp_path / "m" / "mine.txt").write_text("put there meanwhile")

    monkeypatch.setattr(store, "_write_version", meanwhile)
    assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m") == 2
    line = one_error_line(capsys)
    assert f"model {tmp_path / 'm'} was an empty folder when the write began" in line
    assert os.listdir(tmp_path / "m") == ["mine.txt"]
    assert (tmp_path / "m" / "mine.txt").read_text() == "put there meanwhile"
    assert sorted(os.listdir(tmp_path)) == ["d.zarr", "m"]  # (no copy left beside it)
    monkeypatch.setattr(store, "_write_version", write_version)  # still empty: filled
    (tmp_path / "m" / "mine.txt").unlink()
    assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m") == 0
    assert sp.load(tmp_path / "m").n_features_in_ == 3


def test_overwrite_never_loses_what_a_user_put_inside_an_output(setup, capsys, tmp_path):
    # a streamproj output is replaced whole: a file of the user's inside it would go with it
    d, *_ = setup
    (d / "o.zarr" / "my_notes.txt").write_text("what I saw in this picture")
    line = refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", d / "o.zarr",
                   "--overwrite", match="also holds my_notes.txt")
    assert "left untouched" in line
    (d / "o.zarr" / "my_notes.txt").unlink()
    (d / "o.zarr" / "mine").mkdir()  # a folder that is not a Zarr node
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", d / "o.zarr",
            "--overwrite", match="also holds mine")
    (d / "o.zarr" / "mine").rmdir()
    # at any depth: inside a group, among an array's chunks, a link
    out = d / "o.zarr"
    for made, named in ((out / "frame" / "userstuff" / "a", "frame/userstuff"),
                        (out / "projection" / "c" / "notes.txt", "projection/c/notes.txt"),
                        (out / "projection" / "c" / "0" / "x.bak", "projection/c/0/x.bak")):
        made.parent.mkdir(exist_ok=True)
        made.write_text("mine")
        refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", out,
                "--overwrite", match=f"also holds {named},")
        assert made.read_text() == "mine"
        made.unlink()
        if made.parent.name == "userstuff":
            made.parent.rmdir()
    (out / "y" / "c" / "link").symlink_to(tmp_path)
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", out, "--overwrite",
            match="also holds y/c/link,")
    (out / "y" / "c" / "link").unlink()
    # a Zarr node of the user's: an array beside streamproj's, a group inside the frame
    group = zarr.open_group(str(out), mode="r+")
    group.create_array("my_notes", shape=(3,), dtype="f8")[:] = [1.0, 2.0, 3.0]
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", out, "--overwrite",
            match="also holds my_notes,")
    del group["my_notes"]
    zarr.open_group(str(out / "frame"), mode="r+").create_group("extra")
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", out, "--overwrite",
            match="also holds frame/extra,")
    shutil.rmtree(out / "frame" / "extra")
    assert store.foreign_inside(out, store.OUTPUT_NODES) is None
    assert run("project", d / "m", d / "d.zarr", "--output", d / "o.zarr", "--overwrite") == 0


@pytest.mark.parametrize("append", [False, True])
def test_a_file_put_inside_an_output_during_the_pass_is_never_lost(setup, capsys, monkeypatch,
                                                                    append):
    # it was checked for before the pass only: the finished copy was swapped in and the old
    # folder deleted with the user's file in it
    d, X, y = setup
    write_zarr(d / "more.zarr", *make_classes(n=50, p=3, seed=71))
    consolidate = store.zarr.consolidate_metadata

    def late_consolidate(*args, **kwargs):
        out = consolidate(*args, **kwargs)
        (d / "o.zarr" / "my_notes.txt").write_text("written during the pass")
        return out

    monkeypatch.setattr(store.zarr, "consolidate_metadata", late_consolidate)
    argv = [d / "d.zarr", d / "more.zarr", "--output", d / "o.zarr",
            "--append" if append else "--overwrite"]
    assert run("project", d / "m", *argv) == 2
    assert "also holds my_notes.txt" in one_error_line(capsys)
    assert (d / "o.zarr" / "my_notes.txt").read_text() == "written during the pass"
    assert store.open_output(d / "o.zarr")["projection"].shape == (300, 2)
    assert not [p for p in os.listdir(d) if p.startswith(".o.zarr")]


def test_every_chunk_layout_zarr_writes_is_its_own(tmp_path):
    # a 0-d array's one chunk file "c", and keys with the "." separator ("c.0.1")
    group = zarr.open_group(str(tmp_path / "z.zarr"), mode="w")
    group.create_array("s", shape=(), dtype="f8")[...] = 1.0
    dotted = group.create_array("a", shape=(4, 4), chunks=(2, 2), dtype="f8",
                                chunk_key_encoding={"name": "default", "separator": "."})
    dotted[:] = 1.0
    assert (tmp_path / "z.zarr" / "a" / "c.0.1").is_file()
    assert store.foreign_inside(tmp_path / "z.zarr") is None
    (tmp_path / "z.zarr" / "a" / "c.0.x").write_text("mine")
    assert store.foreign_inside(tmp_path / "z.zarr").as_posix() == "a/c.0.x"


def test_a_config_pointing_output_at_home_is_refused(setup, capsys, tmp_path, monkeypatch):
    d, *_ = setup
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "cv.pdf").write_bytes(b"%PDF precious")
    monkeypatch.setenv("HOME", str(home))
    config = d / "job.toml"
    config.write_text('[input]\npath = "d.zarr"\n[model]\npath = "m"\n'
                      '[output]\npath = "~"\noverwrite = true\n')
    refused(capsys, tmp_path, "run", config, match="is not a streamproj output")


# ---------------------------------------------------------------- 2. overlap
@pytest.mark.parametrize("where", ["same", "inside", "contains"])
def test_output_overlapping_the_input_is_refused(setup, capsys, tmp_path, where):
    d, *_ = setup
    out = {"same": d / "d.zarr", "inside": d / "d.zarr" / "coords", "contains": d}[where]
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", out, "--overwrite",
            match="must not overlap")


def test_model_overlapping_input_or_output_is_refused(setup, capsys, tmp_path):
    d, *_ = setup
    refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", d / "d.zarr" / "model",
            match="must not overlap")
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", d / "m",
            "--overwrite", match="must not overlap")
    os.symlink(d / "d.zarr", tmp_path / "alias.zarr")  # the same folder by another name
    refused(capsys, tmp_path, "project", d / "m", tmp_path / "alias.zarr", "--output",
            d / "d.zarr", "--overwrite", match="must not overlap")


def test_run_config_overlap_names_the_file_and_keys(setup, capsys, tmp_path):
    d, *_ = setup
    config = d / "job.toml"
    config.write_text('[input]\npath = "d.zarr"\n[model]\npath = "m"\n'
                      '[output]\npath = "d.zarr"\noverwrite = true\n')
    line = refused(capsys, tmp_path, "run", config, match="must not overlap")
    assert "job.toml" in line
    assert "[input] path" in line
    assert "[output] path" in line


# ----------------------------------------------------- 5. lock on the real path
def test_the_lock_is_keyed_on_the_real_path(tmp_path):
    (tmp_path / "m").mkdir()
    os.symlink(tmp_path / "m", tmp_path / "link")
    assert store._lock_path(tmp_path / "link") == store._lock_path(tmp_path / "m")


@pytest.mark.slow
def test_updates_through_a_symlink_and_the_path_lose_no_batch(tmp_path):
    X, y = make_classes(n=900, p=3, seed=71)
    for i, rows in enumerate((slice(0, 300), slice(300, 600), slice(600, 900))):
        write_zarr(tmp_path / f"{i}.zarr", X[rows], y[rows], chunk_rows=100)
    assert run("fit", tmp_path / "0.zarr", "--model", tmp_path / "m") == 0
    os.symlink(tmp_path / "m", tmp_path / "link")
    procs = [subprocess.Popen([sys.executable, "-m", "streamproj", "update", str(tmp_path / model),
                               str(tmp_path / f"{i}.zarr"), "--no-progress"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for model, i in (("m", 1), ("link", 2))]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert sp.load(tmp_path / "m").stats_.n_samples == 900
    assert not (tmp_path / ".m.lock").exists()
    assert not (tmp_path / ".link.lock").exists()


# ------------------------------------------------------ 6. orphans and CURRENT
def test_an_orphan_version_does_not_wedge_the_model(setup, capsys, tmp_path):
    import shutil

    d, X, y = setup
    shutil.copytree(d / "m" / "v000001", d / "m" / "v000002")  # renamed, CURRENT never switched
    (d / "m" / "v000002" / store._UNCOMMITTED).write_bytes(b"")
    write_zarr(d / "more.zarr", X[:50] + 1.0, y[:50])
    assert run("update", d / "m", d / "more.zarr") == 0  # the orphan is removed, its number reused
    assert "(v000002)" in capsys.readouterr().out
    assert sorted(p.name for p in (d / "m").iterdir()) == ["CURRENT", "v000001", "v000002"]
    assert sp.load(d / "m").stats_.n_samples == 350
    assert not (d / "m" / "v000002" / store._UNCOMMITTED).exists()  # committed now
    shutil.copytree(d / "m" / "v000002", d / "m" / "v000009")
    (d / "m" / "v000009" / store._UNCOMMITTED).write_bytes(b"")
    assert run("fit", d / "d.zarr", "--model", d / "m", "--overwrite") == 0
    assert "(v000003)" in capsys.readouterr().out
    assert sorted(p.name for p in (d / "m").iterdir()) == ["CURRENT", "v000002", "v000003"]


@pytest.mark.parametrize("when", ["after", "before"])
def test_a_kill_at_the_switch_then_a_hand_rollback_keeps_the_version(setup, capsys, when):
    # killed right after CURRENT named v000002 (the marker was still there), then CURRENT set
    # back by hand: the next update deleted v000002 as an orphan (found by the review)
    d, X, y = setup
    write_zarr(d / "b.zarr", X[:50] + 1.0, y[:50])
    write_zarr(d / "c.zarr", X[50:90] - 1.0, y[50:90])
    script = textwrap.dedent(f"""
        import os, sys
        from streamproj import cli, store
        write = store._write_pointer
        def killed(folder, name):
            if {when == "after"}:
                write(folder, name)
            os._exit(137)  # a SIGKILL: no except, no finally
        store._write_pointer = killed
        sys.exit(cli.main(["update", {str(d / "m")!r}, {str(d / "b.zarr")!r}, "--no-progress"]))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 137, proc.stderr
    assert (d / "m" / "CURRENT").read_text().strip() == ("v000002" if when == "after" else "v000001")
    assert not (d / "m" / "v000002" / store._UNCOMMITTED).exists()
    written = tree(d / "m" / "v000002")
    (d / "m" / "CURRENT").write_text("v000001\n")
    assert run("update", d / "m", d / "c.zarr") == 0
    assert "(v000003)" in capsys.readouterr().out
    assert tree(d / "m" / "v000002") == written
    assert sp.load(d / "m").stats_.n_samples == 340
    (d / "m" / "CURRENT").write_text("v000002\n")
    assert sp.load(d / "m").stats_.n_samples == 350


def test_a_version_rolled_back_by_hand_is_kept_and_its_name_never_reused(setup, capsys):
    # `echo v000001 > m/CURRENT` after an update: the next update deleted v000002 as an
    # orphan and wrote another v000002 in its place (found by the review)
    d, X, y = setup
    write_zarr(d / "b.zarr", X[:50] + 1.0, y[:50])
    write_zarr(d / "c.zarr", X[50:90] - 1.0, y[50:90])
    write_zarr(d / "e.zarr", X[90:120] + 2.0, y[90:120])
    assert run("update", d / "m", d / "b.zarr") == 0
    rolled_back = tree(d / "m" / "v000002")
    (d / "m" / "CURRENT").write_text("v000001\n")
    assert run("update", d / "m", d / "c.zarr") == 0
    assert "(v000003)" in capsys.readouterr().out
    assert tree(d / "m" / "v000002") == rolled_back
    assert run("update", d / "m", d / "e.zarr") == 0  # the next one prunes v000001 (an ancestor)
    assert sorted(p.name for p in (d / "m").iterdir()) == ["CURRENT", "v000002", "v000003", "v000004"]
    assert tree(d / "m" / "v000002") == rolled_back
    assert sp.load(d / "m").stats_.n_samples == 370
    (d / "m" / "CURRENT").write_text("v000002\n")  # and it can be taken back
    assert sp.load(d / "m").stats_.n_samples == 350


def test_a_damaged_link_of_the_chain_stops_the_pruning_before_a_rolled_back_version(setup):
    # v2 rolled back from (v1 -> v3 -> v4); with v3's model.json unreadable, the next update
    # took the chain for a pre-chain model and deleted every version below v3: v2 too
    d, X, y = setup
    for name, rows, shift in (("b", slice(0, 50), 1.0), ("c", slice(50, 90), -1.0),
                              ("e", slice(90, 120), 2.0), ("f", slice(120, 140), 0.5)):
        write_zarr(d / f"{name}.zarr", X[rows] + shift, y[rows])
    assert run("update", d / "m", d / "b.zarr") == 0  # v2
    rolled_back = tree(d / "m" / "v000002")
    (d / "m" / "CURRENT").write_text("v000001\n")
    assert run("update", d / "m", d / "c.zarr") == 0  # v3, from v1
    assert run("update", d / "m", d / "e.zarr") == 0  # v4, from v3 (v1 pruned)
    (d / "m" / "v000003" / "model.json").write_text("{damaged")
    assert run("update", d / "m", d / "f.zarr") == 0  # v5, from v4: prunes v3, not past it
    names = sorted(p.name for p in (d / "m").iterdir())
    assert "v000002" in names
    assert tree(d / "m" / "v000002") == rolled_back


def _two_updates_under(monkeypatch, model, name):
    """Make ``store.NAME``'s first call return after two writes moved ``CURRENT`` on (and pruned)."""
    real, calls = getattr(store, name), []

    def racing(*args, **kwargs):
        out = real(*args, **kwargs)
        if not calls:
            calls.append(1)
            for _ in range(2):  # a writer holds the lock: readers do not
                with store.model_lock(model):
                    record = store.read_record(model)
                    store.write_record(model, record, base=record.version)
        return out

    monkeypatch.setattr(store, name, racing)
    return calls


@pytest.mark.parametrize("name", ["_current_version", "read_record"])
def test_a_reader_retries_when_writers_move_the_model_under_it(setup, capsys, monkeypatch, name):
    # info between two updates said the model was damaged (its version pruned under it) or
    # 'moved on … rerun the job' (a stress loop: 21 % of infos beside a busy writer)
    d, *_ = setup
    calls = _two_updates_under(monkeypatch, d / "m", name)
    capsys.readouterr()
    assert run("info", d / "m") == 0, capsys.readouterr().err
    assert calls
    assert '"version": "v000003"' in capsys.readouterr().out


@pytest.mark.parametrize("pointer", ["../../etc", "/tmp/elsewhere", "v000007"])
def test_current_may_only_name_a_version_inside_the_model(setup, capsys, tmp_path, pointer):
    d, *_ = setup
    (d / "m" / "CURRENT").write_text(pointer + "\n")
    refused(capsys, tmp_path, "info", d / "m", match="CURRENT")
    refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", d / "m", "--overwrite", match="CURRENT")


# ----------------------------------------------------------- 8. leftovers
def test_stale_leftovers_are_cleaned_but_not_those_of_a_live_writer(setup, capsys):
    d, *_ = setup
    host = store._HOST
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = f"{host}-99999999-0123abcd"
        live = f"{host}-{sleeper.pid}-0123abcd"
        for name in (f".m.tmp-{dead}", f".o.zarr.tmp-{dead}", f".o.zarr.old-{dead}",
                     f".o.zarr.tmp-{live}", f".m.tmp-{live}"):
            (d / name).mkdir()
            (d / name / "junk").write_bytes(b"x" * 1000)
        (d / "m" / f".v000002.tmp-{dead}").mkdir()
        (d / ".m.lock").write_text("")  # left by a killed job
        write_zarr(d / "more.zarr", *make_classes(n=40, p=3, seed=72))
        assert run("update", d / "m", d / "more.zarr") == 0
        assert run("project", d / "m", d / "d.zarr", "--output", d / "o.zarr", "--overwrite") == 0
        hidden = sorted(p.name for p in d.iterdir() if p.name.startswith("."))
        assert hidden == sorted([f".m.tmp-{live}", f".o.zarr.tmp-{live}"])
        assert not [p for p in (d / "m").iterdir() if p.name.startswith(".")]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_failed_fit_leaves_no_lock_file_and_no_folders(tmp_path, capsys):
    X, y = make_classes(n=100, p=3, seed=73)
    X[5, 0] = np.nan
    write_zarr(tmp_path / "bad.zarr", X, y)
    assert run("fit", tmp_path / "bad.zarr", "--model", tmp_path / "new" / "sub" / "m") == 2
    one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.zarr"]


# -------------------------------------------------------- 9. missing chunks
def test_a_missing_chunk_is_an_error_naming_its_rows(setup, capsys, tmp_path):
    d, X, y = setup
    os.remove(d / "d.zarr" / "X" / "c" / "1" / "0")
    line = refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", d / "m2",
                   match="d.zarr/X: the chunk file of rows 100..199 is missing")
    assert "--allow-missing-chunks" in line
    assert "the fill value 0.0)" in line  # the value, not numpy's repr np.float64(0.0)
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", d / "o2.zarr",
            match="rows 100..199")
    assert run("fit", d / "d.zarr", "--model", d / "m2", "--allow-missing-chunks") == 0


def test_a_sharded_array_with_rows_never_written_is_refused(tmp_path, capsys):
    """A shard holding only some of its chunks: the others read as the fill value (exit 0).

    zarr counts every chunk of a stored shard as written, so the check passed; a writer that
    wrote rows 40..44 of a grown array and died left rows 45..59 as zeros in the fit.
    """
    X, y = make_classes(n=60, p=3, seed=74)
    for n, written in ((60, [(0, 60)]), (57, [(0, 57)]), (60, [(0, 45)]), (60, [(0, 5), (10, 60)])):
        path = tmp_path / f"s{n}-{len(written)}-{written[0][1]}.zarr"
        g = zarr.open_group(str(path), mode="w")
        a = g.create_array("X", shape=(n, 3), chunks=(5, 3), shards=(20, 3), dtype="f8", fill_value=0.0)
        for start, stop in written:
            a[start:stop] = X[start:stop]
        g.create_array("y", data=y[:n], chunks=(5,), shards=(20,))
        if written == [(0, n)]:  # every row written (the last shard cut short): read as it is
            src = sources.open_source(path)
            np.testing.assert_array_equal(src.X.compute(), X[:n])
            continue
        first = written[0][1]
        rows = f"{first}..{first + 4}"
        with pytest.raises(InputError, match=rf"X: the chunk file of rows {rows} is missing"):
            sources.open_source(path)
        refused(capsys, tmp_path, "fit", path, "--model", tmp_path / "m", match=f"rows {rows}")
        allowed = sources.open_source(path, allow_missing_chunks=True).X.compute()
        np.testing.assert_array_equal(allowed[first : first + 5], 0.0)


def test_class_sorted_labels_whose_chunks_zarr_skipped_fit(tmp_path, capsys):
    """zarr writes no chunk that holds only the fill value: a run of label 0 must still fit."""
    rng = np.random.default_rng(5)
    y = np.repeat([0, 1], 300)
    X = rng.normal(size=(600, 3)) + 2.0 * y[:, None]
    write_zarr(tmp_path / "sorted.zarr", X, y)
    assert not (tmp_path / "sorted.zarr" / "y" / "c" / "0").exists()  # never written
    assert run("fit", tmp_path / "sorted.zarr", "--model", tmp_path / "m") == 0
    assert sp.load(tmp_path / "m").stats_.counts.tolist() == [300, 300]


# ------------------------------------------------------ one-line errors
def test_zero_feature_columns(tmp_path, capsys):
    group = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    group.create_array("X", shape=(10, 0), dtype="f8", chunks=(5, 1))
    group.create_array("y", data=np.arange(10) % 2, chunks=(5,))
    refused(capsys, tmp_path, "fit", tmp_path / "d.zarr", "--model", tmp_path / "m",
            match="d.zarr/X has no feature columns")


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_chunk_names_the_array_and_rows(setup, capsys, tmp_path, damage):
    d, *_ = setup
    chunk = d / "d.zarr" / "X" / "c" / "2" / "0"
    data = chunk.read_bytes()
    chunk.write_bytes(b"\x00garbage" * 20 if damage == "garbage" else data[: len(data) // 2])
    refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", d / "m2",
            match="d.zarr/X: rows 200..299 cannot be read")
    refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", "--output", d / "o2.zarr",
            match="rows 200..299 cannot be read")


@pytest.mark.parametrize("which", ["group", "array"])
def test_a_corrupt_zarr_json(setup, capsys, tmp_path, which):
    d, *_ = setup
    meta = d / "d.zarr" / ("zarr.json" if which == "group" else "X/zarr.json")
    meta.write_text(meta.read_text()[:40])
    refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", d / "m2",
            match="is not a readable Zarr")


@pytest.mark.parametrize(("file", "damage", "message"), [
    ("stats.npz", "truncate", "stats.npz is damaged"),
    ("solution.npz", "truncate", "solution.npz is damaged"),
    ("solution.npz", "drop", "solution.npz is damaged: it lacks center"),
    ("stats.npz", "drop", "stats.npz is damaged"),
    ("model.json", "truncate", "model.json is damaged"),
])
def test_a_damaged_model_file(setup, capsys, tmp_path, file, damage, message):
    d, *_ = setup
    path = d / "m" / "v000001" / file
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    else:
        with np.load(path) as data:
            content = {k: data[k] for k in data.files}
        content.pop("center" if file == "solution.npz" else sorted(content)[-1])
        with open(path, "wb") as f:
            np.savez(f, **content)
    for argv in (["info", d / "m"], ["update", d / "m", d / "d.zarr"],
                 ["project", d / "m", d / "d.zarr", "--output", d / "o2.zarr"]):
        refused(capsys, tmp_path, *argv, match=message)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda s: s[0].pop("rows"), "entry 1 of its 'sources' ({'url'"),
    (lambda s: s[0].update(rows="300"), "its 'rows' is '300'"),
    (lambda s: s[0].update(rows=-1), "its 'rows' is -1"),
    (lambda s: s.append("day-9.zarr"), "entry 2 of its 'sources' (day-9.zarr…): it is not a table"),
])
def test_a_hand_edited_ledger_is_one_line_naming_the_entry(setup, capsys, tmp_path, edit, message):
    """A model.json source without its rows crashed update with a KeyError (exit 1)."""
    import json

    d, *_ = setup
    path = d / "m" / "v000001" / "model.json"
    meta = json.loads(path.read_text())
    edit(meta["sources"])
    path.write_text(json.dumps(meta))
    for argv in (["info", d / "m"], ["update", d / "m", d / "d.zarr"],
                 ["project", d / "m", d / "d.zarr", "--output", d / "o2.zarr"]):
        line = refused(capsys, tmp_path, *argv, match="m/v000001/model.json is damaged: ")
        assert message in line
    # an output's ledger too, with a sound model
    assert run("fit", d / "d.zarr", "--model", d / "m3") == 0
    path = d / "o.zarr" / "zarr.json"
    meta = json.loads(path.read_text())
    edit(meta["attributes"]["streamproj"]["sources"])
    path.write_text(json.dumps(meta))
    line = refused(capsys, tmp_path, "project", d / "m3", d / "d.zarr", "--output", d / "o.zarr",
                   "--append", match="o.zarr/zarr.json is damaged: ")
    assert message in line


@pytest.mark.parametrize(("file", "edit", "message"), [
    # model.json: an unknown parameter and a history that is no list were tracebacks (exit 1);
    # classes, counts, n_features and n_components unlike the NPZ files were believed
    ("model.json", lambda m: m["params"].update(foo=1), "model.json's 'params' has unknown key 'foo'"),
    ("model.json", lambda m: m["params"].update(boundary=7),
     "model.json's 'params' has boundary 7; it must be null or a table"),
    ("model.json", lambda m: m.update(history=5), "model.json's 'history' must be a list; got int"),
    ("model.json", lambda m: m.update(classes=["a", "b"]),
     "model.json's 'classes' is ['a', 'b'], but solution.npz's is [0, 1]"),
    ("model.json", lambda m: m.update(counts=[1, 2]), "model.json's 'counts' is [1, 2], but stats.npz's"),
    ("model.json", lambda m: m.update(n_features=5), "model.json's 'n_features' is 5, but stats.npz's is 3"),
    ("model.json", lambda m: m.update(n_components=1),
     "model.json's 'n_components' is 1, but solution.npz's is 2"),
    # solution.npz: NaN axes blamed the input's rows, mis-shaped ones its number of features;
    # other classes than the summary's gave an output whose class labels were not its predictions
    ("solution.npz", lambda z: z.update(components=z["components"] * np.nan),
     "solution.npz's 'components' holds NaN or infinity"),
    ("solution.npz", lambda z: z.update(coef=z["coef"] * np.inf), "solution.npz's 'coef' holds NaN or infinity"),
    ("solution.npz", lambda z: z.update(components=np.ones((2, 5))),
     "solution.npz's 'components' has shape (2, 5); stats.npz summarises 3 features"),
    ("solution.npz", lambda z: z.update(center=np.ones(4)), "solution.npz's 'center' has shape (4,)"),
    ("solution.npz", lambda z: z.update(intercept=np.ones(3)), "solution.npz's 'intercept' has shape (3,)"),
    ("solution.npz", lambda z: z.update(classes=z["classes"] + 5),
     "solution.npz's 'classes' ([5, 6]) are not the classes stats.npz summarises ([0, 1])"),
    ("solution.npz", lambda z: z.update(classes=z["classes"][::-1]), "solution.npz's 'classes' ([1, 0]) are not in order"),
])
def test_a_hand_edited_model_version_is_one_line_naming_the_file(setup, capsys, tmp_path, file, edit, message):
    import json

    d, *_ = setup
    path = d / "m" / "v000001" / file
    if file == "model.json":
        content = json.loads(path.read_text())
        edit(content)
        path.write_text(json.dumps(content))
    else:
        with np.load(path) as data:
            content = {k: data[k] for k in data.files}
        edit(content)
        with open(path, "wb") as f:
            np.savez(f, **content)
    for argv in (["info", d / "m"], ["update", d / "m", d / "d.zarr"],
                 ["project", d / "m", d / "d.zarr", "--output", d / "o2.zarr"],
                 ["project", d / "m", d / "d.zarr", "--output", d / "o.zarr", "--append"]):
        line = refused(capsys, tmp_path, *argv, match=f"model {d / 'm'} (version v000001) is damaged: ")
        assert message in line
    with pytest.raises(sp.ModelError, match=re.escape(message)):
        sp.load(d / "m")


@pytest.mark.parametrize(("edit", "message"), [
    # believed: reversed classes turned the next update's boundary round (174.7 degrees), a
    # NaN scatter blamed the new input ("feature 0 has no variance"), mis-shaped means were a
    # ValueError traceback, float counts were truncated; all of them projected silently
    (lambda z: z.update(classes=z["classes"][::-1].copy()),
     "its 'classes' ([1, 0]) are not sorted distinct labels"),
    (lambda z: z["within"].__setitem__((0, 0), np.nan), "its 'within' holds NaN or infinity"),
    (lambda z: z.update(means=z["means"][:, :2]),
     "its 'means' has shape (2, 2); 2 classes of 3 features need (2, 3)"),
    (lambda z: z.update(within=np.zeros(3)), "its 'within' has shape (3,); it must be square"),
    (lambda z: z.update(counts=z["counts"] + 0.5), "its 'counts' (shape (2,), dtype float64) must be"),
    (lambda z: z.pop("means"), "it lacks 'means'"),
])
def test_a_hand_edited_summary_is_one_line_naming_the_file_and_array(setup, capsys, tmp_path, edit,
                                                                      message):
    d, *_ = setup
    path = d / "m" / "v000001" / "stats.npz"
    with np.load(path) as data:
        content = {k: data[k] for k in data.files}
    edit(content)
    with open(path, "wb") as f:
        np.savez(f, **content)
    for argv in (["info", d / "m"], ["update", d / "m", d / "d.zarr"],
                 ["project", d / "m", d / "d.zarr", "--output", d / "o2.zarr"]):
        line = refused(capsys, tmp_path, *argv, match=f"{d / 'm' / 'v000001' / 'stats.npz'} is damaged: ")
        assert message in line
    with pytest.raises(sp.ModelError, match=re.escape(message)):
        sp.load(d / "m")


@pytest.mark.parametrize(("params", "message"), [
    ({"center": 5}, "The 'center' parameter of BoundaryProjector must be"),
    ({"n_components": -3}, "The 'n_components' parameter of BoundaryProjector must be"),
    ({"shrinkage": "sometimes"}, "The 'shrinkage' parameter of BoundaryProjector must be"),
])
def test_a_hand_edited_parameter_value_is_refused_on_reading(setup, capsys, tmp_path, params, message):
    # believed until the next update's fit validated it; the model's projections and repr
    # meanwhile showed a centre or a dimension it did not have
    import json

    d, *_ = setup
    path = d / "m" / "v000001" / "model.json"
    content = json.loads(path.read_text())
    content["params"].update(params)
    path.write_text(json.dumps(content))
    for argv in (["update", d / "m", d / "d.zarr"],
                 ["project", d / "m", d / "d.zarr", "--output", d / "o2.zarr"]):
        line = refused(capsys, tmp_path, *argv,
                       match=f"model {d / 'm'} (version v000001) is damaged: its stored parameters")
        assert message in line
    assert not (d / "o2.zarr").exists()
    with pytest.raises(sp.ModelError, match=re.escape(message)):
        sp.load(d / "m")


@pytest.mark.parametrize(("stored", "read"), [("none", None), ("None", None), ("0.25", 0.25)])
def test_a_shrinkage_stored_as_the_first_models_stored_it_is_read(setup, stored, read):
    # before parameters were checked by the estimator (845f778), BoundaryProjector(shrinkage=
    # "none") was accepted, normalised where it was used, and stored as given: such a model
    # loaded, projected and (its shrinkage read as the solver reads it) updated
    import json

    d, X, _ = setup
    path = d / "m" / "v000001" / "model.json"
    content = json.loads(path.read_text())
    content["params"]["shrinkage"] = stored
    path.write_text(json.dumps(content))
    model = sp.load(d / "m")
    assert model.shrinkage == read
    assert model.transform(X[:5]).shape == (5, 2)


@pytest.mark.parametrize(("content", "message"), [
    ('{"coef": [["a", "b", "c"]], "intercept": [0]}', "b.json: coef must be numbers"),
    ('{"coef": [[1, 2, 3], [1, 2]], "intercept": [0, 1]}', "b.json: coef must be numbers"),
    ('{"coef": [[1, 2, 3]], "intercept": [0, 1]}', "b.json: intercept must hold 1 number"),
    ('{"coef": [[[1, 2, 3]]], "intercept": [0]}', "b.json: coef must be a vector"),
    ('{"coef": [1, 2], "intercept": 0}', "b.json: the boundary has 2 coefficients"),
    ('[1, 2, 3]', "b.json must hold an object"),
])
def test_a_bad_boundary_file_is_named(setup, capsys, tmp_path, content, message):
    d, *_ = setup
    (d / "b.json").write_text(content)
    line = refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", d / "m2", "--boundary",
                   d / "b.json", match=message)
    assert "d.zarr" not in line.split("b.json")[0]


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_unwritable_places_say_which_path(setup, capsys, tmp_path, monkeypatch, code):
    d, X, y = setup
    import zarr.storage._local as local

    write_zarr(d / "more.zarr", X[:30] + 1, y[:30])

    def put(path, value, exclusive=False):
        raise OSError(code, os.strerror(code), str(path))

    real_open = open

    def open_(file, mode="r", *args, **kwargs):
        if "w" in mode:
            raise OSError(code, os.strerror(code), str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(local, "_put", put)
    monkeypatch.setattr(store, "open", open_, raising=False)
    local_before = tree(tmp_path)
    for argv, where in ((["update", d / "m", d / "more.zarr"], "model"),
                        (["project", d / "m", d / "d.zarr", "--output", d / "o.zarr", "--overwrite"],
                         "output")):
        assert run(*argv) == 2
        line = one_error_line(capsys)
        assert f"cannot write {where}" in line, line
        assert os.strerror(code) in line, line
        assert str(d) in line, line
        assert tree(tmp_path) == local_before


def test_info_into_a_closed_pipe_exits_quietly(setup):
    d, *_ = setup
    with subprocess.Popen([sys.executable, "-m", "streamproj", "info", str(d / "m")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        proc.stdout.close()  # like `| head` that has read enough
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0
    assert err == b""


def test_plot_into_a_missing_folder_creates_it_and_never_clobbers_a_non_image(setup, capsys, tmp_path):
    d, *_ = setup
    figure = tmp_path / "figs" / "new" / "p.png"
    assert run("plot", d / "o.zarr", "--output", figure) == 0
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert run("plot", d / "o.zarr", "--output", figure) == 0  # an image is replaced
    (tmp_path / "paper.tex").write_text("\\documentclass")
    refused(capsys, tmp_path, "plot", d / "o.zarr", "--output", tmp_path / "paper.tex",
            match="the name must end in one of")
    (tmp_path / "paper.pdf").write_text("\\documentclass")  # a figure's name, not a figure
    refused(capsys, tmp_path, "plot", d / "o.zarr", "--output", tmp_path / "paper.pdf",
            match="is not a figure streamproj wrote")
    (tmp_path / "thesis.pdf").write_bytes(b"%PDF-1.7\nmy thesis\n")  # an image, not ours
    refused(capsys, tmp_path, "plot", d / "o.zarr", "--output", tmp_path / "thesis.pdf",
            match="is not a figure streamproj wrote")


def test_slurm_config_without_slurm_is_one_quick_line(capsys, monkeypatch, tmp_path):
    from pathlib import Path

    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    config = Path(__file__).resolve().parents[1] / "configs" / "slurm.toml"
    assert run("run", config) == 2
    line = one_error_line(capsys)
    assert "slurm.toml" in line
    assert "SLURM is not installed" in line
    assert "sbatch" in line


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_model_directory_follows_the_umask(tmp_path, umask):
    X, y = make_classes(n=100, p=3, seed=74)
    write_zarr(tmp_path / "d.zarr", X, y)
    old = os.umask(umask)
    try:
        assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m") == 0
    finally:
        os.umask(old)
    for path in (tmp_path / "m", tmp_path / "m" / "v000001"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o777 & ~umask, path


def test_a_model_fitted_into_a_private_empty_folder_stays_private(tmp_path):
    # the folder made with umask modes took the empty folder's place: chmod 700 became 755
    X, y = make_classes(n=100, p=3, seed=74)
    write_zarr(tmp_path / "d.zarr", X, y)
    (tmp_path / "m").mkdir()
    (tmp_path / "m").chmod(0o700)
    assert run("fit", tmp_path / "d.zarr", "--model", tmp_path / "m") == 0
    assert stat.S_IMODE((tmp_path / "m").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "m" / "v000001" / "model.json").stat().st_mode) == 0o600
    assert sp.load(tmp_path / "m").n_features_in_ == 3


def test_config_output_directory_is_created_like_fit(setup, tmp_path):
    d, *_ = setup
    config = d / "job.toml"
    config.write_text(textwrap.dedent("""
        [input]
        path = "d.zarr"
        [model]
        path = "m"
        [output]
        path = "deep/er/o.zarr"
    """))
    assert run("run", config) == 0
    assert store.open_output(d / "deep" / "er" / "o.zarr")["projection"].shape == (300, 2)


# ------------------------------------------------ names that only look like ours
def test_user_files_named_like_temporaries_are_never_removed_or_renamed(setup, monkeypatch):
    d, *_ = setup
    mine = {
        d / ".o.zarr.tmp-mybackup": "backup",
        d / ".o.zarr.old-2024": "last year",
        d / "m" / ".notes.tmp-1": "notes",
        d / ".p.zarr.old-mine": "mine",
    }
    for path, text in mine.items():
        path.mkdir()
        (path / "f.txt").write_text(text)
    monkeypatch.chdir(d)
    assert run("project", d / "m", d / "d.zarr", "--output", d / "o.zarr", "--overwrite") == 0
    assert run("update", d / "m", d / "d.zarr") == 0
    # a missing output with a lookalike ".old-" beside it: nothing is "restored" from it
    assert run("project", d / "m", d / "d.zarr", "--output", d / "p.zarr") == 0
    for path, text in mine.items():
        assert (path / "f.txt").read_text() == text, path
    assert not (d / "p.zarr" / "f.txt").exists()


@pytest.mark.parametrize(("argv", "role", "fix"), [
    (["fit", "{d}/d.zarr", "--model", "s3:/bucket/m"], "model", "s3://bucket/m"),
    (["fit", "{d}/d.zarr", "--model", "s3:bucket/m"], "model", "s3://bucket/m"),
    (["project", "{d}/m", "{d}/d.zarr", "--output", "gs:bucket/o.zarr"], "output", "gs://bucket/o.zarr"),
    (["plot", "{d}/o.zarr", "--output", "s3:fig.png"], "figure", "s3://fig.png"),
    # an absolute path keeps its slash: "file://tmp/…" (the fix it offered) is tmp/… here
    (["project", "{d}/m", "{d}/d.zarr", "--output", "file:{d}/o2.zarr"], "output",
     "file://{d}/o2.zarr"),
])
def test_a_url_missing_its_slashes_writes_no_local_folder(setup, capsys, monkeypatch, argv, role,
                                                            fix):
    d, *_ = setup
    monkeypatch.chdir(d)
    line = refused(capsys, d, *[a.format(d=d) for a in argv], match="looks like a URL missing '//'")
    assert f"the {role} " in line
    assert f"did you mean {fix.format(d=d)}?" in line


@pytest.mark.parametrize("argv", [["fit", "{d}/d.zarr", "--model", "memory://m"],
                                  ["project", "{d}/m", "{d}/d.zarr", "--output", "memory://o.zarr"]])
def test_an_in_memory_url_is_refused_as_a_place_to_keep_anything(setup, capsys, argv):
    d, *_ = setup
    refused(capsys, d, *[a.format(d=d) for a in argv], match="is in memory only")


def test_a_current_pointer_that_is_not_text_is_one_line(setup, capsys):
    d, *_ = setup
    (d / "m" / "CURRENT").write_bytes(b"\x00\xffjunk\n")
    for argv in (["info", d / "m"], ["update", d / "m", d / "d.zarr"],
                 ["project", d / "m", d / "d.zarr", "--output", d / "q.zarr"]):
        line = refused(capsys, d, *argv, match="CURRENT is not text")
        assert "the model is damaged" in line


# ------------------------------------------------------------- damaged outputs
def test_a_missing_output_chunk_is_refused_by_every_reader(setup, capsys, tmp_path):
    # outputs write every chunk, so a missing chunk file is damage, never zeros
    d, *_ = setup
    out = d / "o.zarr"
    chunk = next(p for p in (out / "projection").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.unlink()
    for argv in (["info", out], ["plot", out, "--output", tmp_path / "f.png"],
                 ["project", d / "m", d / "d.zarr", "--output", out, "--append"]):
        line = refused(capsys, d, *argv, match="is missing; the output is damaged")
        assert "o.zarr/projection" in line
    assert not (tmp_path / "f.png").exists()


def test_a_truncated_output_chunk_is_one_line_naming_the_rows(setup, capsys, tmp_path):
    d, *_ = setup
    out = d / "o.zarr"
    chunk = next(p for p in (out / "projection").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.write_bytes(chunk.read_bytes()[:10])
    line = refused(capsys, d, "plot", out, "--output", tmp_path / "f.png", match="cannot be read")
    assert "o.zarr/projection: rows " in line


def test_appended_chunks_of_fill_values_are_written_too(tmp_path):
    # predicted holds class index 0 (the fill value) for a whole chunk: still a file on disk
    X, y = make_classes(n=200, p=3, seed=71)
    X[100:] = X[y == 0][:1]  # the second day: every row predicted as class 0
    write_zarr(tmp_path / "a.zarr", X[:100], y[:100], chunk_rows=50)
    write_zarr(tmp_path / "b.zarr", X[100:], y[100:], chunk_rows=50)
    assert run("fit", tmp_path / "a.zarr", "--model", tmp_path / "m") == 0
    assert run("project", tmp_path / "m", tmp_path / "a.zarr", "--output", tmp_path / "o.zarr") == 0
    assert run("project", tmp_path / "m", tmp_path / "b.zarr", "--output", tmp_path / "o.zarr",
               "--append") == 0
    assert run("info", tmp_path / "o.zarr") == 0


def test_plot_never_writes_into_the_model_or_inputs_its_output_came_from(setup, capsys):
    d, *_ = setup
    for target in (d / "m" / "x.png", d / "d.zarr" / "y.png"):
        line = refused(capsys, d, "plot", d / "o.zarr", "--output", target,
                       match="they must not overlap (choose another figure)")
        assert f"the figure {target} is inside" in line


def test_nothing_is_written_inside_another_model_or_zarr_store(setup, capsys, tmp_path):
    # an output and a figure inside a model's version folder were accepted, and the model's
    # second update after removed that folder with them; a figure inside another output made
    # its next --append refuse it
    d, X, y = setup
    write_zarr(d / "e.zarr", X[:150], y[:150], chunk_rows=100)
    assert run("fit", d / "e.zarr", "--model", d / "m2") == 0
    assert run("project", d / "m2", d / "e.zarr", "--output", d / "o2.zarr") == 0
    capsys.readouterr()
    cases = [
        (("project", d / "m2", d / "e.zarr", "--output", d / "m" / "v000001" / "out.zarr"),
         f"is inside the model {d / 'm'} (the model's next updates remove its old versions"),
        (("plot", d / "o2.zarr", "--output", d / "m" / "v000001" / "fig.png"),
         f"is inside the model {d / 'm'}"),
        (("plot", d / "o2.zarr", "--output", d / "o.zarr" / "fig.png"),
         f"is inside the streamproj output {d / 'o.zarr'} (its next --append or --overwrite "
         "refuses"),
        (("fit", d / "e.zarr", "--model", d / "m" / "v000001" / "model"),
         f"the model {d / 'm' / 'v000001' / 'model'} is inside the model {d / 'm'}"),
        (("project", d / "m2", d / "e.zarr", "--output", d / "d.zarr" / "X" / "p.zarr"),
         f"is inside the Zarr array {d / 'd.zarr' / 'X'}"),
    ]
    (d / "link").symlink_to(d / "m")  # the same model by another name
    cases.append((("plot", d / "o2.zarr", "--output", d / "link" / "v000001" / "f.png"),
                  f"is inside the model {d / 'link'}"))
    for argv, match in cases:
        refused(capsys, d, *argv, match=match)
    # beside them, in a plain folder next to them, and in a user's own Zarr group (a project's
    # store holding outputs as child groups, a model beside its data): as before
    assert run("plot", d / "o2.zarr", "--output", d / "figs" / "f.png") == 0
    assert run("project", d / "m2", d / "e.zarr", "--output", d / "outs" / "p.zarr") == 0
    assert run("project", d / "m2", d / "e.zarr", "--output", d / "d.zarr" / "p.zarr") == 0
    assert run("fit", d / "e.zarr", "--model", d / "d.zarr" / "model") == 0
    assert run("project", d / "d.zarr" / "model", d / "e.zarr", "--output", d / "o3.zarr") == 0


def test_a_damaged_array_zarr_json_is_one_line_naming_it(setup, capsys):
    d, *_ = setup
    (d / "d.zarr" / "X" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array"}')
    line = refused(capsys, d, "fit", d / "d.zarr", "--model", d / "m2",
                   match="has no readable array 'X'")
    assert "d.zarr/X/zarr.json" in line


def test_overwrite_and_append_keep_the_outputs_permissions(setup, tmp_path):
    """The swapped-in copy took the umask's modes: a restricted output became world-readable."""
    import os
    import stat

    d, X, y = setup
    write_zarr(d / "more.zarr", X[:150] + 1.0, y[:150], chunk_rows=100)

    def modes(root):
        return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode)
                for p in [root, *root.rglob("*")]}

    os.chmod(d / "o.zarr", 0o750)
    os.chmod(d / "o.zarr" / "zarr.json", 0o640)
    assert run("project", d / "m", d / "d.zarr", "--output", d / "o.zarr", "--overwrite") == 0
    got = modes(d / "o.zarr")
    assert got.pop(".") == 0o750
    assert {m for k, m in got.items() if (d / "o.zarr" / k).is_dir()} == {0o750}
    assert {m for k, m in got.items() if (d / "o.zarr" / k).is_file()} == {0o640}
    os.chmod(d / "o.zarr", 0o700)
    for p in (d / "o.zarr").rglob("*"):
        os.chmod(p, 0o700 if p.is_dir() else 0o600)
    assert run("project", d / "m", d / "d.zarr", d / "more.zarr", "--output", d / "o.zarr",
               "--append") == 0
    got = modes(d / "o.zarr")
    assert got.pop(".") == 0o700
    assert {m for k, m in got.items() if (d / "o.zarr" / k).is_dir()} == {0o700}
    assert {m for k, m in got.items() if (d / "o.zarr" / k).is_file()} == {0o600}


@pytest.mark.parametrize("flag", ["--overwrite", "--append"])
@pytest.mark.parametrize("where", [".", "projection/c"])
def test_a_read_only_output_is_never_replaced(setup, capsys, tmp_path, flag, where):
    # the rename in its parent passed over 'chmod -R a-w'; for its owner (not root) the old
    # folder could then not be deleted and stayed hidden beside it, one more with each run
    d, X, y = setup
    write_zarr(d / "more.zarr", X[:50] + 1.0, y[:50], chunk_rows=100)
    folder = d / "o.zarr" / where
    folder.chmod(0o555)
    try:
        line = refused(capsys, tmp_path, "project", d / "m", d / "d.zarr", d / "more.zarr",
                       "--output", d / "o.zarr", flag, match="is not writable by you")
        assert "dr-xr-xr-x" in line
        assert not [p for p in os.listdir(d) if p.startswith(".o.zarr")]
    finally:
        folder.chmod(0o755)
    assert run("project", d / "m", d / "d.zarr", d / "more.zarr", "--output", d / "o.zarr",
               flag) == 0


@pytest.mark.parametrize("argv", [("update", "{m}", "{d}/more.zarr"), ("forget", "{m}", "{d}/d.zarr"),
                                  ("fit", "{d}/more.zarr", "--model", "{m}", "--overwrite")])
def test_a_read_only_model_is_never_changed(setup, capsys, tmp_path, argv):
    # its owner was refused by the folder; root wrote a new version into a model frozen with
    # 'chmod -R a-w' and removed its old one (outputs refuse that already)
    d, X, y = setup
    write_zarr(d / "more.zarr", X[:50] + 1.0, y[:50], chunk_rows=100)
    write_zarr(d / "extra.zarr", X[50:90] - 1.0, y[50:90], chunk_rows=100)
    assert run("update", d / "m", d / "extra.zarr") == 0  # (two versions: an update pruned one)
    folders = [d / "m", *[p for p in (d / "m").iterdir() if p.is_dir()]]
    for folder in folders:
        folder.chmod(0o555)
    try:
        before = tree(d / "m")
        args = [a.format(m=d / "m", d=d) for a in argv]
        assert run(*args) == 2
        line = one_error_line(capsys)
        assert "is not writable by you" in line or "Permission denied" in line, line
        assert tree(d / "m") == before
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert run(*[a.format(m=d / "m", d=d) for a in argv]) == 0
    assert run("project", d / "m", d / "d.zarr", "--output", d / "o2.zarr") == 0  # read as ever


# The command in a fresh interpreter that keeps no capability to pass over file modes:
# root (whom permissions do not stop) is then held to them as the files' owner, as any user.
WITHOUT_DAC = """
import ctypes, sys
class Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]
libc = ctypes.CDLL(None, use_errno=True)
header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
assert libc.capget(ctypes.byref(header), data) == 0, ctypes.get_errno()
mask = ~0b1110 & 0xFFFFFFFF  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
for field in ("effective", "permitted", "inheritable"):
    setattr(data[0], field, getattr(data[0], field) & mask)
assert libc.capset(ctypes.byref(header), data) == 0, ctypes.get_errno()
from streamproj.cli import main
print("imported", flush=True)
sys.exit(main(sys.argv[1:]))
"""


def _held_to_modes(*argv):
    """``streamproj ARGV`` held to file modes even when run by root: ``(status, stderr)``."""
    if sys.platform != "linux":
        pytest.skip("drops Linux capabilities to hold root to file modes")
    proc = subprocess.run([sys.executable, "-c", WITHOUT_DAC, *map(str, argv), "--no-progress"],
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr


def test_a_model_in_a_folder_you_may_not_write_is_updated(tmp_path):
    # its lock file sat beside it, in the parent: 'cannot write the lock … Permission denied'
    # for a model folder the user may write (found by the review)
    X, y = make_classes(n=200, p=3, seed=74)
    write_zarr(tmp_path / "a.zarr", X[:100], y[:100])
    write_zarr(tmp_path / "b.zarr", X[100:], y[100:])
    parent = tmp_path / "parent"
    parent.mkdir()
    assert run("fit", tmp_path / "a.zarr", "--model", parent / "m") == 0
    parent.chmod(0o555)
    try:
        assert _held_to_modes("fit", tmp_path / "a.zarr", "--model", parent / "n")[0] == 2
        code, err = _held_to_modes("update", parent / "m", tmp_path / "b.zarr")
    finally:
        parent.chmod(0o755)
    assert code == 0, err
    assert sp.load(parent / "m").stats_.n_samples == 200
    assert sorted(os.listdir(parent)) == ["m"]
    assert sorted(os.listdir(parent / "m")) == ["CURRENT", "v000001", "v000002"]


def test_writers_locked_out_of_the_parent_or_not_take_turns(tmp_path):
    # one that may not write the parent takes the lock inside the model alone: so every
    # writer must hold that one too, whatever spelling of the path it was given
    if sys.platform != "linux":
        pytest.skip("drops Linux capabilities to hold root to file modes")
    X, y = make_classes(n=300, p=3, seed=75)
    for name, rows in (("a", slice(0, 100)), ("b", slice(100, 200)), ("c", slice(200, 300))):
        write_zarr(tmp_path / f"{name}.zarr", X[rows], y[rows])
    (tmp_path / "parent").mkdir()
    assert run("fit", tmp_path / "a.zarr", "--model", tmp_path / "parent" / "m") == 0
    os.symlink(tmp_path / "parent", tmp_path / "again")
    script = lambda held: [sys.executable, "-c", WITHOUT_DAC] if held else [  # noqa: E731
        sys.executable, "-c", "import sys; from streamproj.cli import main; print('imported', "
        "flush=True); sys.exit(main(sys.argv[1:]))"]
    procs = []
    with store._lock_file(tmp_path / "parent" / "m" / store._INNER_LOCK):
        (tmp_path / "parent").chmod(0o555)
        try:
            for held, model, source in ((True, "parent", "b"), (False, "again", "c")):
                procs.append(subprocess.Popen(
                    [*script(held), "update", str(tmp_path / model / "m"),
                     str(tmp_path / f"{source}.zarr"), "--no-progress"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            for proc in procs:
                assert proc.stdout.readline() == "imported\n"
            time.sleep(3)  # (an update of 100 rows takes well under a second)
            assert [proc.poll() for proc in procs] == [None, None]
            assert not (tmp_path / "parent" / "m" / "v000002").exists()
        finally:
            (tmp_path / "parent").chmod(0o755)
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert sp.load(tmp_path / "parent" / "m").stats_.n_samples == 300
    assert sorted(os.listdir(tmp_path / "parent" / "m")) == ["CURRENT", "v000002", "v000003"]


@pytest.mark.parametrize("argv", [
    ("fit", "{d}/d.zarr", "--model", "{d}/f/m"),
    ("forget", "{d}/f/m", "{d}/d.zarr"),
    ("project", "{d}/m", "{d}/d.zarr", "--output", "{d}/f/o.zarr"),
    ("fit", "{d}/d.zarr", "--model", "{d}/f/sub/m"),
])
def test_a_path_inside_a_file_is_one_line_naming_the_file(setup, capsys, tmp_path, argv):
    # it said "cannot write the lock of model f/m: File exists: …/f" (found by the review)
    d, *_ = setup
    (d / "f").write_text("notes")
    line = refused(capsys, tmp_path, *(a.format(d=d) for a in argv), match=f"{d}/f is a file, not a folder")
    assert "lock" not in line
    assert "File exists" not in line


def test_a_folder_where_the_lock_goes_is_one_line(setup, capsys, tmp_path):
    d, X, y = setup
    (d / ".n.lock").mkdir()
    refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", d / "n",
            match=f"{d}/.n.lock: it is a folder, not streamproj's lock file; move it away")


def test_a_file_url_names_the_same_model_and_output_as_the_path(setup, capsys, tmp_path):
    # jobs looked for "file:///…/m" as a plain path, which did not exist: fit refitted an
    # existing model without --overwrite (a second fit pruned the first fit's version), and
    # --append took the output as nothing there, then refused it as existing
    d, X, y = setup
    url = lambda path: f"file://{path}"  # noqa: E731
    refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", url(d / "m"),
            match="exists; use 'streamproj update'")
    write_zarr(d / "more.zarr", X[:50] + 1.0, y[:50], chunk_rows=100)
    assert run("project", d / "m", d / "d.zarr", d / "more.zarr", "--output", url(d / "o.zarr"),
               "--append") == 0
    assert store.open_output(d / "o.zarr")["projection"].shape == (350, 2)


def test_a_boundary_too_large_for_float64_is_one_line(setup, capsys, tmp_path):
    """Its norm overflowed with a warning line printed before the error line."""
    d, *_ = setup
    (d / "b.json").write_text('{"coef": [1e308, 1e308, 1], "intercept": [0]}')
    refused(capsys, tmp_path, "fit", d / "d.zarr", "--model", d / "m2", "--boundary", d / "b.json",
            match="too large for float64 (its norm overflows")


def test_a_ledger_written_by_streamproj_0_1_is_read(setup, capsys):
    """0.1's entries have no id, kind or batches, and 'edges' for the fingerprint."""
    import json

    d, *_ = setup
    path = d / "m" / "v000001" / "model.json"
    meta = json.loads(path.read_text())
    for entry in meta["sources"]:
        for key in ("id", "kind", "batches"):
            entry.pop(key, None)
        entry["edges"] = entry.pop("fingerprint")
    path.write_text(json.dumps(meta))
    assert run("info", d / "m") == 0
    assert sp.load(d / "m").stats_.n_samples == 300
