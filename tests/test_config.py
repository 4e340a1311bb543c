import glob
import os
from pathlib import Path

import pytest

from streamproj.cluster import slurm_cluster
from streamproj.config import load_config
from streamproj.errors import InputError
from streamproj.jobs import check_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.toml")))
def test_shipped_configs_validate(name):
    config = load_config(CONFIGS / name)
    assert config.model.n_components >= 1
    assert config.input.path.startswith("/")


def test_relative_paths_are_relative_to_the_config_file(tmp_path):
    (tmp_path / "jobs").mkdir()
    path = tmp_path / "jobs" / "j.toml"
    path.write_text('[input]\npath = "d.zarr"\n[model]\npath = "../m"\nshrinkage = 0.2\n'
                    '[output]\npath = "s3://bucket/out.zarr"\n')
    config = load_config(path)
    assert config.input.path == str(tmp_path / "jobs" / "d.zarr")
    assert Path(config.model.path).resolve() == tmp_path / "m"
    assert config.model.shrinkage == 0.2
    assert config.output.path == "s3://bucket/out.zarr"
    # local URLs with relative paths too (from the working directory, another run would read
    # other data); absolute ones stay as written
    path.write_text('[input]\npaths = ["file://d.zarr", "local://e/*.zarr", "file:///abs/f.zarr"]\n'
                    '[model]\npath = "local://m"\n')
    config = load_config(path)
    assert config.input.paths == [f"file://{tmp_path / 'jobs' / 'd.zarr'}",
                                  f"local://{tmp_path / 'jobs' / 'e' / '*.zarr'}",
                                  "file:///abs/f.zarr"]
    assert config.model.path == f"local://{tmp_path / 'jobs' / 'm'}"


def test_relative_paths_of_a_linked_config_are_beside_the_link_not_its_target(tmp_path):
    # resolved from the link's target's folder: the job read and wrote in another directory
    (tmp_path / "jobs").mkdir()
    (tmp_path / "dotfiles").mkdir()
    (tmp_path / "dotfiles" / "j.toml").write_text('[input]\npath = "d.zarr"\n[model]\npath = "m"\n')
    (tmp_path / "jobs" / "j.toml").symlink_to(tmp_path / "dotfiles" / "j.toml")
    config = load_config(tmp_path / "jobs" / "j.toml")
    assert config.input.path == str(tmp_path / "jobs" / "d.zarr")
    assert config.model.path == str(tmp_path / "jobs" / "m")


def test_dot_dot_is_folded_only_where_it_names_the_same_place(tmp_path):
    """``jobs/../m`` is said as ``m``; ``link/../m`` (the link's target's parent) is kept.

    A URL (a local one too) is kept as written.
    """
    (tmp_path / "jobs").mkdir()
    (tmp_path / "elsewhere" / "real").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere" / "real")
    text = ('[input]\npaths = ["../d.zarr", "./e/../day-*.zarr", "file://../f.zarr"]\n'
            '[model]\npath = "../m"\n[output]\npath = "s3://b/x/../o.zarr"\n')
    for folder in ("jobs", "link"):
        (tmp_path / folder / "j.toml").write_text(text)
    config = load_config(tmp_path / "jobs" / "j.toml")
    assert config.input.paths == [str(tmp_path / "d.zarr"), str(tmp_path / "jobs" / "day-*.zarr"),
                                  f"file://{tmp_path / 'jobs'}/../f.zarr"]
    assert config.model.path == str(tmp_path / "m")
    assert config.output.path == "s3://b/x/../o.zarr"
    config = load_config(tmp_path / "link" / "j.toml")
    assert config.model.path == f"{tmp_path / 'link'}/../m"  # (is elsewhere/m)
    assert config.input.paths[1] == str(tmp_path / "link" / "day-*.zarr")  # (no '..' left)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[input]\npath = "d"\n[model]\npath = "m"\ncentre = "mean"\n',
         r"unknown key 'centre' in \[model\]; valid keys: .*center"),
        ('[input]\npath = "d"\n[model]\npath = "m"\nn_components = "two"\n',
         r"\[model\] n_components must be an integer; got 'two'"),
        ('[input]\npath = "d"\n[model]\npath = "m"\nmode = "sometimes"\n',
         r"mode must be one of 'fit', 'update', 'auto'"),
        ('[input]\npath = "d"\n[model]\npath = "m"\n[dask]\nworkers = 3\n',
         r"unknown key 'workers' in \[dask\]"),
        ('[input]\npath = "d"\n[model]\npath = "m"\n[dask.slurm]\ncores = "8"\n',
         r"\[dask.slurm\] cores must be an integer"),
        ('[input]\npath = "d"\n[modle]\npath = "m"\n', r"unknown section \[modle\]"),
        ('[input]\npath = "d"\n', r"missing section \[model\]"),
        ('[input]\nx = "X"\n[model]\npath = "m"\n', r"\[input\] needs 'path'"),
        ('[input\npath = "d"\n', "not valid TOML"),
        ('[input]\npath = "d"\n[model]\npath = "m"\n[output]\noverwrite = "yes"\n',
         r"\[output\] overwrite must be true or false"),
        # (accepted silently: the job made no projection)
        ('[input]\npath = "d"\n[model]\npath = "m"\n[output]\nmode = "append"\n',
         r"\[output\] has no path"),
        ('[input]\npath = "d"\n[model]\npath = "m"\n[output]\npath = "o.zarr"\ninput = []\n',
         r"\[output\] input is empty"),
        ('[input]\npath = "d"\nlabel = ""\n[model]\npath = "m"\n', r"\[input\] label is empty"),
        # ('' is the config's own folder: read as an input, or a boundary "Is a directory")
        ('[input]\npaths = ["d", ""]\n[model]\npath = "m"\n', r"\[input\] paths holds an empty path"),
        ('[input]\npath = "d"\n[model]\npath = "m"\n[output]\npath = "o.zarr"\ninput = [" "]\n',
         r"\[output\] input holds an empty path"),
        ('[input]\npath = "d"\n[model]\npath = "m"\nboundary = ""\n',
         r"\[model\] boundary holds an empty path"),
        ('[input]\npath = "d"\n[model]\npath = ""\n', r"\[model\] path holds an empty path"),
        # (os: "ValueError: embedded null byte", a traceback)
        ('[input]\npath = "d"\n[model]\npath = "m\\u0000x"\n', r"\[model\] path 'm\\x00x' holds a NUL"),
        ('[input]\npaths = ["d\\u0000"]\n[model]\npath = "m"\n', r"\[input\] paths 'd\\x00' holds a NUL"),
        ('[input]\npath = "d"\n[model]\npath = "~streamproj-no-such-user/m"\n',
         r"\[model\] path: cannot expand ~streamproj-no-such-user in ~streamproj-no-such-user/m: "
         "there is no user"),
        # (not expanded: a folder named "$HOME" was made next to the config)
        ('[input]\npath = "d"\n[model]\npath = "$HOME/m"\n',
         r"\[model\] path \$HOME/m names the environment variable \$HOME: variables are not expanded"),
        ('[input]\npaths = ["${DATA}/d-*.zarr"]\n[model]\npath = "m"\n',
         r"\[input\] paths \$\{DATA\}/d-\*.zarr names the environment variable \$\{DATA\}"),
    ],
)
def test_bad_configs_name_the_key_and_file(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as exc:
        load_config(path)
    assert str(path) in str(exc.value)


def test_missing_config_file(tmp_path):
    with pytest.raises(InputError, match="no config file"):
        load_config(tmp_path / "nope.toml")


def test_slurm_section_builds_a_jobqueue_script():
    pytest.importorskip("dask_jobqueue")
    config = load_config(CONFIGS / "slurm.toml")
    cluster = slurm_cluster(config.dask.slurm)
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "#SBATCH -p normal" in script
    assert "#SBATCH --exclusive" in script
    assert "#SBATCH --cpus-per-task=8" in script
    assert "#SBATCH -t 01:00:00" in script
    assert "--nthreads 8" in script
    assert "--memory-limit 29.80GiB" in script


@pytest.mark.parametrize(("text", "message"), [
    ('[input]\npath = "d"\n[model]\npath = "m"\nshrinkage = 1.5\n',
     r"\[model\] shrinkage must be 'none', 'auto', 'oas' or a float in \[0, 1\]; got 1.5"),
    ('[input]\npath = "d"\n[model]\npath = "m"\nshrinkage = "lots"\n', r"\[model\] shrinkage must be"),
    ('[input]\npath = "d"\n[model]\npath = "m"\ncenter = "median"\n',
     r"\[model\] center must be one of 'mean', 'hyperplane'; got 'median'"),
    ('[input]\npath = "d"\n[model]\npath = "m"\nn_components = 0\n',
     r"\[model\] n_components must be a whole number of at least 1; got 0"),
    ('[input]\npath = "d"\n[model]\npath = "m"\n[dask]\ntimeout = -1\n', r"\[dask\] timeout must be a positive"),
    ('[input]\npath = "d"\nallow_missing_chunks = "yes"\n[model]\npath = "m"\n',
     r"\[input\] allow_missing_chunks must be true or false"),
])
def test_bad_values_name_the_file_and_key(tmp_path, text, message):
    # the config checks the form of its keys; the estimator checks its parameters when the
    # job starts (check_config), and the error names the file and key either way
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as exc:
        check_config(load_config(path))
    assert str(exc.value).startswith(str(path))


def test_estimator_parameters_pass_through_as_given(tmp_path):
    path = tmp_path / "j.toml"
    path.write_text('[input]\npath = "d"\n[model]\npath = "m"\nshrinkage = "lots"\n')
    assert load_config(path).model.shrinkage == "lots"  # raw: only the estimator judges it
    path.write_text('[input]\npath = "d"\n[model]\npath = "m"\nshrinkage = "0.25"\n')
    assert load_config(path).model.shrinkage == 0.25
    path.write_text('[input]\npath = "d"\n[model]\npath = "m"\n')
    assert load_config(path).model.shrinkage is None


def test_dask_timeout_and_missing_chunks_options(tmp_path):
    path = tmp_path / "j.toml"
    path.write_text('[input]\npath = "d"\nallow_missing_chunks = true\n[model]\npath = "m"\n'
                    '[dask]\nscheduler = "tcp://127.0.0.1:8786"\ntimeout = 30\n')
    config = load_config(path)
    assert config.dask.timeout == 30
    assert config.input.allow_missing_chunks is True


def test_incremental_keys(tmp_path):
    path = tmp_path / "j.toml"
    path.write_text('[input]\npaths = ["days/day-*.zarr", "s3://b/x.parquet"]\nfeatures = "emb_*"\n'
                    'label = "label"\n[model]\npath = "m"\nkeep_last = 30\nmax_age = "30d"\n'
                    '[output]\npath = "o.zarr"\nmode = "auto"\nreproject_above_degrees = 0.5\n'
                    '[run]\nalert_above_degrees = 2\n')
    config = load_config(path)
    assert config.input.paths == [str(tmp_path / "days" / "day-*.zarr"), "s3://b/x.parquet"]
    assert config.input.path == config.input.paths[0]
    assert (config.input.features, config.input.label) == ("emb_*", "label")
    assert (config.model.keep_last, config.model.max_age) == (30, "30d")
    assert (config.output.mode, config.output.reproject_above_degrees) == ("auto", 0.5)
    assert config.run.alert_above_degrees == 2
    assert load_config(CONFIGS / "nightly.toml").output.mode == "auto"
    # overwrite beside an append or auto mode, as the module's example has it, still loads
    path.write_text('[input]\npath = "d"\n[model]\npath = "m"\n[output]\npath = "o"\n'
                    'mode = "auto"\noverwrite = true\n')
    assert load_config(path).output.overwrite


@pytest.mark.parametrize(("text", "message"), [
    ('[input]\npaths = "d"\n[model]\npath = "m"\n', r"\[input\] paths must be a list"),
    ('[input]\npaths = [1]\n[model]\npath = "m"\n', r"\[input\] paths must be a list of strings"),
    ('[input]\npath = "d"\n[model]\npath = "m"\nkeep_last = 0\n', r"\[model\] keep_last must be at least 1"),
    ('[input]\npath = "d"\n[model]\npath = "m"\nmax_age = "a month"\n', r"\[model\] max_age must be"),
    ('[input]\npath = "d"\n[model]\npath = "m"\n[output]\nmode = "sometimes"\n',
     r"\[output\] mode must be one of 'rewrite', 'append', 'auto'"),
    ('[input]\npath = "d"\n[model]\npath = "m"\n[output]\nreproject_above_degrees = -1\n',
     r"reproject_above_degrees must be a non-negative"),
    # a threshold the default mode ("rewrite") would ignore, as --reproject-above without --append
    ('[input]\npath = "d"\n[model]\npath = "m"\n[output]\npath = "o"\noverwrite = true\n'
     'reproject_above_degrees = 1.0\n',
     r"\[output\] reproject_above_degrees applies to mode 'append' or 'auto' only; mode is 'rewrite'"),
    ('[input]\npath = "d"\n[model]\npath = "m"\n[run]\nalert_above_degrees = "high"\n',
     r"\[run\] alert_above_degrees must be a number"),
    # nan compares false with everything: the alert and the rewrite would never fire
    ('[input]\npath = "d"\n[model]\npath = "m"\n[run]\nalert_above_degrees = nan\n',
     r"\[run\] alert_above_degrees must be a number \(not nan\); got nan"),
    ('[input]\npath = "d"\n[model]\npath = "m"\n[output]\nreproject_above_degrees = nan\n',
     r"\[output\] reproject_above_degrees must be a number \(not nan\)"),
    ('[input]\npath = "d"\n[model]\npath = "m"\nshrinkage = nan\n',
     r"\[model\] shrinkage must be a string or a number \(not nan\)"),
    ('[input]\npath = "d"\npaths = ["e"]\n[model]\npath = "m"\n',
     r"\[input\] give either 'path' \(one input\) or 'paths' \(several\), not both"),
])
def test_bad_incremental_keys_name_the_key(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as exc:
        check_config(load_config(path))
    assert str(exc.value).startswith(str(path))


def test_a_misspelt_url_is_refused_but_a_local_name_given_as_such_is_read(tmp_path):
    path = tmp_path / "j.toml"
    path.write_text('[input]\npath = "d"\n[model]\npath = "m"\nboundary = "gs:b/coef.json"\n')
    with pytest.raises(InputError, match=r"\[model\] boundary gs:b/coef.json .*did you mean gs://b/coef.json"):
        load_config(path)
    # an input of that name that exists is a local one; file:// says so anywhere
    (tmp_path / "day:1.zarr").mkdir()
    path.write_text('[input]\npaths = ["day:1.zarr"]\n[model]\npath = "file://s3:/m"\n')
    config = load_config(path)
    assert config.input.paths == [str(tmp_path / "day:1.zarr")]
    assert config.model.path == f"file://{tmp_path / 's3:' / 'm'}"


def test_a_dollar_that_names_no_set_variable_is_part_of_the_name(tmp_path, monkeypatch):
    # $RECYCLE.BIN, or an object key with a $ in it, was refused as an environment variable
    monkeypatch.delenv("STREAMPROJ_NO_SUCH_VARIABLE", raising=False)
    path = tmp_path / "job.toml"
    path.write_text('[input]\npath = "d"\n[model]\npath = "$STREAMPROJ_NO_SUCH_VARIABLE/m"\n')
    assert load_config(path).model.path == str(tmp_path / "$STREAMPROJ_NO_SUCH_VARIABLE" / "m")
    monkeypatch.setenv("STREAMPROJ_NO_SUCH_VARIABLE", "x")  # set: meant as a variable, refused
    with pytest.raises(InputError, match="names the environment variable"):
        load_config(path)


def test_dot_dot_after_a_pattern_is_kept_for_the_links_it_matches(tmp_path):
    """``links/*/../shared.zarr`` names each match's target's parent: folded, it named nothing."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "store" / "a").mkdir(parents=True)
    (tmp_path / "store" / "shared.zarr").mkdir()
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "a").symlink_to(tmp_path / "store" / "a")
    (tmp_path / "jobs" / "j.toml").write_text(
        '[input]\npaths = ["../links/*/../shared.zarr"]\n[model]\npath = "../m"\n')
    config = load_config(tmp_path / "jobs" / "j.toml")
    assert config.input.paths == [f"{tmp_path / 'jobs'}/../links/*/../shared.zarr"]
    assert [os.path.realpath(p) for p in glob.glob(config.input.paths[0])] == [
        str(tmp_path / "store" / "shared.zarr")]


@pytest.mark.parametrize("dask", ['scheduler = "tcp://127.0.0.1:9"\ntimeout = 30\n',
                                  "slurm = {cores = 2, memory = \"4GB\"}\n"])
def test_a_cluster_job_says_its_input_is_missing_before_reaching_the_cluster(tmp_path, monkeypatch,
                                                                             capsys, dask):
    # configs/cluster.toml with no /shared/data.zarr tried the scheduler for its 20 s first
    from streamproj import cluster, jobs
    from streamproj.cli import main

    def never(*args, **kwargs):
        msg = "the cluster was reached for"
        raise AssertionError(msg)

    real = jobs.dask_cluster
    monkeypatch.setattr(jobs, "dask_cluster", lambda scheduler=None, slurm=None, timeout=None: (
        real(None) if scheduler is None and slurm is None else never()))
    monkeypatch.setattr(cluster, "slurm_cluster", never)
    monkeypatch.setattr(jobs, "require_sbatch", lambda source: None)
    path = tmp_path / "j.toml"
    path.write_text(f'[input]\npath = "missing.zarr"\n[model]\npath = "m"\n[dask]\n{dask}')
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"streamproj: error: {path}: [input] paths: no such input: {tmp_path / 'missing.zarr'}")
