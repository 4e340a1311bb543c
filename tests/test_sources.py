"""Inputs in every supported format read back the same rows, lazily, chunk by chunk."""

import os
import re
import shutil
import warnings

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr
from conftest import make_classes, one_error_line, write_zarr

import streamproj as sp
from streamproj import sources
from streamproj.cli import main
from streamproj.errors import BadValuesError, InputError, StreamprojError, StreamprojWarning

h5py = pytest.importorskip("h5py")
xr = pytest.importorskip("xarray")

N, P, K = 1000, 5, 3
COLS = [f"emb_{i}" for i in range(P)]


def _frame(X, y):
    df = pd.DataFrame(X, columns=COLS)
    df.insert(2, "label", y)  # the label between features: selection must not depend on order
    return df


def _parquet(path, df, row_group_size=None):
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), str(path),
                   row_group_size=row_group_size)


@pytest.fixture(scope="module")
def data():
    X, y = make_classes(n=N, p=P, k=K, seed=11)
    return X, y


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, data):
    """The same rows in every format; returns {name: (spec, open_source kwargs)}."""
    X, y = data
    d = tmp_path_factory.mktemp("inputs")
    df = _frame(X, y)
    write_zarr(d / "v3.zarr", X, y, chunk_rows=100)
    g = zarr.open_group(str(d / "v2.zarr"), mode="w", zarr_format=2)
    g.create_array("X", data=X, chunks=(100, P))
    g.create_array("y", data=y, chunks=(100,))
    _parquet(d / "one.parquet", df, row_group_size=150)
    (d / "folder").mkdir()
    (d / "days").mkdir()
    for i in range(4):
        part = df.iloc[i * 250 : (i + 1) * 250]
        _parquet(d / "folder" / f"part-{i}.parquet", part)
        _parquet(d / "days" / f"day-{i}.parquet", part)
    (d / "folder" / "_SUCCESS").write_text("")  # not data: skipped like dask and Spark do
    df.to_csv(d / "t.csv", index=False)
    with h5py.File(d / "t.h5", "w") as f:
        f.create_dataset("g/X", data=X, chunks=(100, P))
        f.create_dataset("g/y", data=y)
    ds = xr.Dataset({"X": (("row", "feature"), X), "y": (("row",), y)},
                    coords={"feature": COLS})
    ds.to_netcdf(d / "t.nc", engine="h5netcdf", encoding={"X": {"chunksizes": (100, P)}})
    flat = xr.Dataset({c: (("row",), X[:, i]) for i, c in enumerate(COLS)} | {"label": (("row",), y)})
    flat.to_zarr(d / "flat.zarr", mode="w", zarr_format=3, consolidated=False)
    return {
        "zarr-v3": (d / "v3.zarr", {}),
        "zarr-v2": (d / "v2.zarr", {}),
        "parquet-file": (d / "one.parquet", {"features": "emb_*", "label": "label",
                                             "chunk_rows": 300}),
        "parquet-folder": (d / "folder", {"features": COLS, "label": "label"}),
        "csv": (d / "t.csv", {"features": ",".join(COLS), "label": "label", "chunk_rows": 200}),
        "hdf5": (f"{d / 't.h5'}:/g/X", {"chunk_rows": 250}),
        "netcdf": (d / "t.nc", {"chunk_rows": 200}),
        "xarray-zarr": (d / "flat.zarr", {"kind": "xarray", "features": "emb_*", "label": "label",
                                          "chunk_rows": 250}),
        "days": (d / "days", {}),
    }


FORMATS = ["zarr-v3", "zarr-v2", "parquet-file", "parquet-folder", "csv", "hdf5", "netcdf",
           "xarray-zarr"]


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_reads_the_same_rows_in_row_chunks(inputs, data, name):
    X, y = data
    spec, kw = inputs[name]
    src = sources.open_source(spec, **kw)
    assert src.kind == name.split("-")[0].replace("netcdf", "xarray")
    assert (src.n_rows, src.n_features) == (N, P)
    assert src.X.chunks[1] == (P,)  # all features in one chunk
    assert len(src.X.chunks[0]) > 1  # never one chunk of everything
    assert src.y.chunks[0] == src.X.chunks[0]
    with dask.config.set(scheduler="threads"):  # h5py and xarray readers under threads
        got_X, got_y = dask.compute(src.X, src.y)
    np.testing.assert_array_equal(got_X, X)
    np.testing.assert_array_equal(got_y, y)
    assert src.X.dtype == np.float64


@pytest.mark.parametrize("name", FORMATS)
def test_accumulate_on_a_source_matches_numpy(inputs, data, name):
    X, y = data
    spec, kw = inputs[name]
    src = sources.open_source(spec, **kw)
    want = sp.accumulate(X, y)
    got = sp.accumulate(src.X, src.y, names=src.names)
    np.testing.assert_array_equal(got.classes, want.classes)
    np.testing.assert_array_equal(got.counts, want.counts)
    np.testing.assert_allclose(got.means, want.means, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.within, want.within, rtol=1e-12, atol=1e-12)


def test_feature_names_and_message_names(inputs):
    spec, kw = inputs["parquet-file"]
    src = sources.open_source(spec, **kw)
    assert src.feature_names == tuple(COLS)  # the label column between them is left out
    assert src.names == (f"{spec}[emb_*]", f"{spec}:label")
    assert sources.open_source(inputs["netcdf"][0]).feature_names == tuple(COLS)  # coordinate
    assert sources.open_source(inputs["zarr-v3"][0]).feature_names == tuple(f"x{i}" for i in range(P))
    h5 = sources.open_source(inputs["hdf5"][0])
    assert h5.names == (f"{inputs['hdf5'][0]}", f"{inputs['hdf5'][0][:-2]}/y")


def test_parquet_default_features_are_every_column_but_the_label(inputs, data):
    src = sources.open_source(inputs["days"][0] / "day-1.parquet", label="label")
    assert src.feature_names == tuple(COLS)
    np.testing.assert_array_equal(src.X.compute(), data[0][250:500])


def test_parquet_glob_expands_to_sorted_sources_that_add_up(inputs, data, tmp_path):
    X, y = data
    days = inputs["days"][0]
    srcs = sources.open_sources([str(days / "day-*.parquet")], label="label")
    assert [os.path.basename(s.url) for s in srcs] == [f"day-{i}.parquet" for i in range(4)]
    np.testing.assert_array_equal(np.concatenate([s.X.compute() for s in srcs]), X)
    total = sum((sp.accumulate(s.X, s.y) for s in srcs[1:]), sp.accumulate(srcs[0].X, srcs[0].y))
    np.testing.assert_array_equal(total.counts, sp.accumulate(X, y).counts)
    np.testing.assert_allclose(total.means, sp.accumulate(X, y).means, rtol=1e-12, atol=1e-12)


def test_parquet_is_read_row_group_by_row_group_never_all_at_once(inputs, monkeypatch):
    calls = {"rows": [], "labels": []}

    def counting(name, key):
        real = getattr(sources, name)

        def reader(*args):
            out = real(*args)
            calls[key].append(len(out))
            return out

        monkeypatch.setattr(sources, name, reader)

    counting("_read_parquet_rows", "rows")
    counting("_read_parquet_labels", "labels")
    spec, kw = inputs["parquet-file"]
    src = sources.open_source(spec, **kw)
    assert calls == {"rows": [], "labels": []}  # opening reads footers only
    assert src.X.chunks[0] == (300, 300, 300, 100)  # whole 150-row groups, at most 300 rows
    with dask.config.set(scheduler="sync"):
        sp.accumulate(src.X, src.y)
    # Each chunk read exactly once, none holding more than 300 rows.
    assert sorted(calls["rows"]) == sorted(calls["labels"]) == [100, 300, 300, 300]
    calls["rows"].clear()
    src.identity()
    # The fingerprint reads only the chunks holding the first and last 256 rows (0:300, 600:1000).
    assert sorted(calls["rows"]) == [100, 300, 300]


def test_hdf5_is_read_by_one_task_per_chunk(inputs, monkeypatch):
    calls = []
    real = sources._read_hdf5_rows

    def counting(*args):
        out = real(*args)
        calls.append((args[2], len(out)))
        return out

    monkeypatch.setattr(sources, "_read_hdf5_rows", counting)
    src = sources.open_source(inputs["hdf5"][0], chunk_rows=250)
    assert calls == []
    with dask.config.set(scheduler="threads"):
        sp.accumulate(src.X, src.y)
    assert sorted(calls) == [("/g/X", 250)] * 4 + [("/g/y", 250)] * 4


def test_hdf5_dataset_given_with_x_and_y_paths(inputs, data):
    path = inputs["hdf5"][0].split(":/")[0]
    src = sources.open_source(path, x="/g/X", y="/g/y", chunk_rows=300)
    assert src.url.endswith("t.h5:/g/X")
    np.testing.assert_array_equal(src.y.compute(), data[1])


def test_identity_is_stable_and_changes_with_the_edge_rows(inputs, data, tmp_path):
    X, y = data
    spec, kw = inputs["parquet-file"]
    a = sources.open_source(spec, **kw).identity()
    b = sources.open_source(spec, **{**kw, "chunk_rows": 150}).identity()
    assert a == b  # the fingerprint does not depend on the chunking
    assert a["url"] == os.path.realpath(spec)
    assert a["n_rows"] == N
    assert a["y"] == "label"
    assert a["x"] == COLS
    assert a["dtype"] == "float64"
    for row in (0, N - 1):
        changed = _frame(X, y)
        changed.loc[row, "emb_3"] += 1e-9
        _parquet(tmp_path / "c.parquet", changed, row_group_size=150)
        other = sources.open_source(tmp_path / "c.parquet", **kw).identity()
        assert other["fingerprint"] != a["fingerprint"], row
    relabelled = _frame(X, y)
    relabelled.loc[N - 1, "label"] = (y[-1] + 1) % K
    _parquet(tmp_path / "c.parquet", relabelled, row_group_size=150)
    assert sources.open_source(tmp_path / "c.parquet", **kw).fingerprint() != a["fingerprint"]


def test_a_grown_source_keeps_the_fingerprint_of_its_old_rows(tmp_path, data):
    X, y = data
    write_zarr(tmp_path / "g.zarr", X[:600], y[:600])
    old = sources.open_source(tmp_path / "g.zarr").identity()
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="a")
    group["X"].append(X[600:])
    group["y"].append(y[600:])
    grown = sources.open_source(tmp_path / "g.zarr")
    assert grown.n_rows == N
    assert grown.fingerprint(rows=600) == old["fingerprint"]
    assert grown.fingerprint() != old["fingerprint"]
    assert grown.key() == {k: old[k] for k in ("url", "kind", "x", "y")}


def test_expand_sorts_deduplicates_and_keeps_the_hdf5_dataset(inputs, tmp_path, monkeypatch):
    days = inputs["days"][0]
    monkeypatch.chdir(days)
    got = sources.expand(["day-[23].parquet", str(days / "day-*.parquet"), "./day-0.parquet"])
    assert got == [str(days.resolve() / f"day-{i}.parquet") for i in range(4)]
    h5 = inputs["hdf5"][0]
    pattern = h5.replace("t.h5", "t*.h5")
    assert sources.expand(pattern) == [os.path.realpath(h5.split(":/")[0]) + ":/g/X"]
    with pytest.raises(InputError, match=r"no input matches '.*nothing-\*\.zarr'"):
        sources.expand([str(days / "day-0.parquet"), str(days / "nothing-*.zarr")])
    # a name with brackets that exists as written is that name, not a pattern
    shutil.copy(days / "day-0.parquet", days / "day[1].parquet")
    assert sources.expand(str(days / "day[1].parquet")) == [str(days.resolve() / "day[1].parquet")]
    assert sources.expand(str(days / "day-[1].parquet")) == [str(days.resolve() / "day-1.parquet")]


def test_text_labels_from_parquet_and_csv(tmp_path, data):
    X, y = data
    names = np.array(["cat", "dog", "eel"])[y]
    df = _frame(X, names)
    _parquet(tmp_path / "s.parquet", df, row_group_size=300)
    df.to_csv(tmp_path / "s.csv", index=False)
    want = sp.accumulate(X, names)
    for path in (tmp_path / "s.parquet", tmp_path / "s.csv"):
        src = sources.open_source(path, label="label", chunk_rows=300)
        assert src.y.dtype == object
        assert src.y.compute().tolist() == names.tolist()
        got = sp.accumulate(src.X, src.y)
        assert got.classes.tolist() == want.classes.tolist()
        np.testing.assert_array_equal(got.counts, want.counts)


def test_a_parquet_folder_mixing_number_and_text_labels_is_refused(tmp_path, data):
    # 0 in one file and "0" in another would become one class
    X, y = data
    (tmp_path / "mix").mkdir()
    _parquet(tmp_path / "mix" / "a.parquet", _frame(X[:100], y[:100]))
    _parquet(tmp_path / "mix" / "b.parquet", _frame(X[100:], y[100:].astype(str)))
    with pytest.raises(InputError, match=r"mix \(b\.parquet\): label column 'label' holds "
                                         r"\S*string values, but .*a\.parquet\) holds int64"):
        sources.open_source(tmp_path / "mix", label="label")
    # integers beside floats are one kind, but not integers float64 cannot hold
    _parquet(tmp_path / "mix" / "a.parquet", _frame(X[:100], y[:100] + 2**53))
    _parquet(tmp_path / "mix" / "b.parquet", _frame(X[100:], y[100:].astype(float)))
    src = sources.open_source(tmp_path / "mix", label="label")
    first_odd = int(np.flatnonzero(y[:100] == 1)[0])
    with pytest.raises(InputError, match=rf"mix: the label 'label' is 9007199254740993 at row "
                                         rf"{first_odd}, which float64"):
        sp.accumulate(src.X, src.y, names=src.names)
    _parquet(tmp_path / "mix" / "a.parquet", _frame(X[:100], y[:100]))
    assert sources.open_source(tmp_path / "mix", label="label").y.compute().dtype == np.float64
    _parquet(tmp_path / "mix" / "b.parquet", _frame(X[100:], y[100:].astype(str)))
    # categorical text beside plain text, and integers beside floats, are one kind each
    _parquet(tmp_path / "mix" / "a.parquet",
             _frame(X[:100], pd.Categorical(y[:100].astype(str))))
    assert sources.open_source(tmp_path / "mix", label="label").y.compute().shape == (len(y),)


def test_float32_is_kept_and_integer_features_become_float64(tmp_path, data):
    X, y = data
    df = pd.DataFrame({"a": X[:, 0].astype(np.float32), "b": X[:, 1].astype(np.float32), "y": y})
    _parquet(tmp_path / "f.parquet", df)
    assert sources.open_source(tmp_path / "f.parquet").X.dtype == np.float32
    df["c"] = np.arange(N)
    _parquet(tmp_path / "i.parquet", df)
    src = sources.open_source(tmp_path / "i.parquet")
    assert src.X.dtype == np.float64
    np.testing.assert_array_equal(src.X[:, 2].compute(), np.arange(N))


def test_labels_are_optional_when_not_required(tmp_path, data):
    X, _ = data
    _parquet(tmp_path / "u.parquet", pd.DataFrame(X, columns=COLS))
    src = sources.open_source(tmp_path / "u.parquet", require_y=False)
    assert src.y is None
    assert src.label is None
    assert src.identity()["y"] is None
    write_zarr(tmp_path / "u.zarr", X)
    assert sources.open_source(tmp_path / "u.zarr", require_y=False).y is None
    with pytest.raises(InputError, match=r"u\.parquet has no label column 'y'"):
        sources.open_source(tmp_path / "u.parquet")


# --------------------------------------------------------------------- errors
def _error(spec, **kw):
    with pytest.raises(StreamprojError) as info:
        sources.open_source(spec, **kw)
    text = str(info.value)
    assert "\n" not in text
    return text


def test_missing_input_and_unknown_format(tmp_path):
    assert _error(tmp_path / "gone.parquet") == f"no such input: {tmp_path / 'gone.parquet'}"
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01junk")
    text = _error(tmp_path / "blob.bin")
    assert str(tmp_path / "blob.bin") in text
    assert "unknown input format" in text
    assert "(in Python, or pass kind=" in text  # (the command line has no --kind)
    (tmp_path / "nothing").mkdir()  # a folder not filled yet: said as such
    assert _error(tmp_path / "nothing") == (f"{tmp_path / 'nothing'} is an empty folder: no Zarr "
                                            "store or Parquet files in it")
    assert "unknown input kind 'excel'" in _error(tmp_path / "blob.bin", kind="excel")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    assert "bad.parquet is not a readable Parquet file" in _error(tmp_path / "bad.parquet")


def test_column_errors_name_the_file_and_the_column(inputs, tmp_path, data):
    spec = inputs["parquet-file"][0]
    text = _error(spec, features=["emb_0", "nope"], label="label")
    assert text.startswith(f"{spec} has no column 'nope' (columns: emb_0, emb_1, label, emb_2")
    text = _error(spec, features="zz_*", label="label")
    assert text.startswith(f"{spec}: the feature pattern 'zz_*' matches no column (columns: ")
    text = _error(spec, features="emb_*", label="target")
    assert text.startswith(f"{spec} has no label column 'target' (columns: emb_0")
    assert "--label" in text
    assert "'label' is the label column" in _error(spec, features=["emb_0", "label"], label="label")
    X, y = data
    df = _frame(X, y)
    df["city"] = "Oslo"
    _parquet(tmp_path / "s.parquet", df)
    text = _error(tmp_path / "s.parquet", label="label")  # default: every column but the label
    assert text.startswith(f"{tmp_path / 's.parquet'}: feature column 'city' holds large_string values, not numbers")
    assert "leave it out of --features" in text
    _parquet(tmp_path / "only.parquet", pd.DataFrame({"label": y}))
    text = _error(tmp_path / "only.parquet", label="label")
    assert text.startswith(f"{tmp_path / 'only.parquet'} has no feature columns (columns: label)")
    assert "has no column 'x'" in _error(inputs["csv"][0], features="x", label="label")
    assert "x is not allowed" not in _error(spec, x="emb", label="label")
    assert "choose them with --features" in _error(spec, x="emb", label="label")


def test_a_caller_without_features_option_gives_its_own_hint(inputs, tmp_path, data):
    # plot reads the model's columns (it has no --features): it gives its own hint, which the
    # message carries where "name the features with --features" stands by default
    hint = "pass the input that was projected (--input)"
    for name in ("parquet-file", "csv"):
        spec = inputs[name][0]
        default = _error(spec, features=["emb_0", "nope"], label="label")
        given = _error(spec, features=["emb_0", "nope"], label="label", hint=hint)
        assert default.endswith("); name the features with --features"), name
        assert given == default.replace("name the features with --features", hint), name
    text = _error(inputs["xarray-zarr"][0], kind="xarray", features=["emb_0", "nope"], label="label",
                  hint=hint)
    assert text.endswith(f"has no variable 'nope' (variables: emb_0, emb_1, emb_2, emb_3, emb_4, "
                         f"label); {hint}")
    X, y = data
    _frame(X, y).to_csv(tmp_path / "idx.csv")  # the index's blank header: the same hint
    text = _error(tmp_path / "idx.csv", label="label", hint=hint)
    assert text.endswith(f"(a pandas index, written by to_csv without index=False?); {hint}, "
                         "or give the column a name")

def test_options_that_do_not_apply_to_arrays(inputs):
    text = _error(inputs["zarr-v3"][0], features="emb_*")
    assert text.startswith(f"{inputs['zarr-v3'][0]} is a Zarr group: it holds arrays, not columns")
    assert "--x/--y" in text
    assert "HDF5 file" in _error(inputs["hdf5"][0], label="label")


def test_array_and_variable_errors_list_what_exists(inputs, tmp_path):
    text = _error(inputs["zarr-v3"][0], x="Z")
    assert "has no array 'Z' (arrays: X, y)" in text
    h5 = inputs["hdf5"][0].split(":/")[0]
    text = _error(f"{h5}:/g/Z")
    assert text.startswith(f"{h5}:/g/Z: no such dataset (datasets in /g: X, y)")
    assert "group, not a dataset" in _error(f"{h5}:/g")
    # none beside the name ("datasets in /: none", the file given alone): the file's, by path
    assert f"{h5}:/X: no such dataset (datasets in the file: /g/X, /g/y)" in _error(h5)
    text = _error(inputs["netcdf"][0], x="Z")
    assert text.startswith(f"{inputs['netcdf'][0]} has no variable 'Z' (variables: X, y)")
    text = _error(inputs["xarray-zarr"][0], kind="xarray", features="emb_*", label="target")
    assert "has no label variable 'target' (variables: emb_0" in text


def test_a_group_named_as_the_dataset_lists_the_datasets_it_holds(tmp_path):
    """``--x grp`` (a group) lists what grp holds, cut at 20; it listed the file's root.

    The datasets beside the group (or, with none there, the whole file's) are
    not what someone naming the group was after.
    """
    h5 = tmp_path / "g.h5"
    with h5py.File(h5, "w") as f:
        f["top"] = np.zeros(3)
        f["grp/X"] = np.zeros((4, 2))
        f["grp/y"] = np.zeros(4)
        f["grp/sub/Z"] = np.zeros((4, 2))
        for i in range(25):
            f[f"many/d{i:02}"] = np.zeros(2)
        f.create_group("empty")
    assert _error(h5, x="grp").startswith(
        f"{h5}:/grp: a group, not a dataset (datasets in /grp: X, sub/Z, y); name the right one")
    assert f"{h5}:/grp: a group, not a dataset (datasets in /grp: X, sub/Z, y)" in _error(f"{h5}:/grp")
    text = _error(h5, x="many")
    assert "(datasets in /many: d00, d01," in text
    assert "d19, … (25 in all))" in text
    assert "d20" not in text
    # a group holding none: the file's, by path, as before
    assert "/empty: a group, not a dataset (datasets in the file: /grp/X, " in _error(h5, x="empty")


def test_a_late_label_of_another_type_in_a_csv_names_its_row(tmp_path, capsys):
    # one block of 300,000 rows: pandas' piecewise parsing warned "mixed types" on stderr,
    # and the error named the block's first row, not the label's
    rng = np.random.default_rng(3)
    n = 300_000
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                          "label": rng.integers(0, 2, n)}).astype({"label": object, "a": object})
    frame.loc[n - 998, "label"] = 2.5
    frame.to_csv(tmp_path / "late.csv", index=False)
    code = main(["fit", str(tmp_path / "late.csv"), "--features", "a,b", "--label", "label",
                 "--model", str(tmp_path / "m")])
    assert code == 2
    assert re.search(rf"the label 'label' is 2\.5 at row {n - 998}, but the labels before it "
                     "are int64", one_error_line(capsys))
    frame.loc[n - 998, "label"] = "cat"  # a word among integers: the column is read as text
    frame.to_csv(tmp_path / "late.csv", index=False)
    code = main(["fit", str(tmp_path / "late.csv"), "--features", "a,b", "--label", "label",
                 "--model", str(tmp_path / "m")])
    assert code == 2
    assert f"the label 'label' is 'cat' at row {n - 998}, but" in one_error_line(capsys)
    frame.loc[n - 998, "label"] = 1
    frame.loc[n - 5, "a"] = "x"
    frame.to_csv(tmp_path / "late.csv", index=False)
    code = main(["fit", str(tmp_path / "late.csv"), "--features", "a,b", "--label", "label",
                 "--model", str(tmp_path / "m")])
    assert code == 2
    assert f"column 'a' holds 'x' at row {n - 5}, not a number" in one_error_line(capsys)


def test_bad_values_found_while_reading_name_the_row(tmp_path, data):
    X, y = data
    df = _frame(X, y).astype({"emb_1": object})
    df.loc[700, "emb_1"] = "abc"
    df.to_csv(tmp_path / "bad.csv", index=False)
    src = sources.open_source(tmp_path / "bad.csv", label="label", chunk_rows=200)
    with pytest.raises(InputError, match=r"bad\.csv: column 'emb_1' holds 'abc' at row 700, not a number"):
        sp.accumulate(src.X, src.y, names=src.names)
    table = pa.Table.from_pandas(_frame(X, y), preserve_index=False)
    labels = pa.array(np.where(np.arange(N) == 420, None, y).tolist(), type=pa.int64())
    pq.write_table(table.set_column(2, "label", labels), tmp_path / "null.parquet",
                   row_group_size=100)
    src = sources.open_source(tmp_path / "null.parquet", label="label")
    with pytest.raises(InputError, match=r"null\.parquet: the label 'label' is missing at row 420"):
        sp.accumulate(src.X, src.y, names=src.names)
    df = _frame(X, y)
    df.loc[333, "emb_4"] = np.nan
    _parquet(tmp_path / "nan.parquet", df, row_group_size=100)
    src = sources.open_source(tmp_path / "nan.parquet", label="label")
    with pytest.raises(BadValuesError, match=r"nan\.parquet\[emb_0,.*row 333"):
        sp.accumulate(src.X, src.y, names=src.names)


def test_sources_with_different_features_are_refused(inputs, tmp_path, data):
    X, y = data
    _parquet(tmp_path / "a.parquet", _frame(X, y))
    _parquet(tmp_path / "b.parquet", _frame(X, y).drop(columns="emb_4"))
    with pytest.raises(InputError, match=r"b\.parquet\[.*has 4 features .* every input must have"):
        sources.open_sources(str(tmp_path / "*.parquet"), label="label")


# ------------------------------------------------------------------ object store
@pytest.fixture(scope="module")
def s3():
    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": f"http://{host}:{port}", "region_name": "us-east-1"}}
    fs = s3fs.S3FileSystem(**options)
    fs.call_s3("create_bucket", Bucket="streamproj-test")
    yield fs, options
    server.stop()


def test_object_store_sources_read_like_local_ones(s3, inputs, data):
    fs, options = s3
    X, y = data
    days = inputs["days"][0]
    for i in range(4):
        fs.put(str(days / f"day-{i}.parquet"), f"streamproj-test/days/day-{i}.parquet")
    fs.put(str(inputs["csv"][0]), "streamproj-test/t.csv")
    fs.put(inputs["hdf5"][0].split(":/")[0], "streamproj-test/t.h5")
    urls = sources.expand("s3://streamproj-test/days/day-*.parquet", storage_options=options)
    assert urls == [f"s3://streamproj-test/days/day-{i}.parquet" for i in range(4)]
    srcs = sources.open_sources(urls, label="label", storage_options=options)
    np.testing.assert_array_equal(np.concatenate([s.X.compute() for s in srcs]), X)
    assert srcs[0].identity()["url"] == "s3://streamproj-test/days/day-0.parquet"
    folder = sources.open_source("s3://streamproj-test/days/", label="label",
                                 storage_options=options)
    assert folder.url == "s3://streamproj-test/days"
    assert len(folder.X.chunks[0]) == 4
    csv = sources.open_source("s3://streamproj-test/t.csv", label="label", chunk_rows=300,
                              storage_options=options)
    h5 = sources.open_source("s3://streamproj-test/t.h5:/g/X", chunk_rows=300,
                             storage_options=options)
    for src in (folder, csv, h5):
        np.testing.assert_array_equal(src.X.compute(), X)
        np.testing.assert_array_equal(src.y.compute(), y)
    with pytest.raises(InputError, match=r"no input matches 's3://streamproj-test/none-\*'"):
        sources.expand("s3://streamproj-test/none-*", storage_options=options)


def test_compressed_csv_is_one_block(inputs, data, tmp_path):
    X, y = data
    _frame(X, y).to_csv(tmp_path / "t.csv.gz", index=False)
    src = sources.open_source(tmp_path / "t.csv.gz", label="label", chunk_rows=100)
    assert src.kind == "csv"
    assert src.X.chunks[0] == (N,)
    np.testing.assert_array_equal(src.X.compute(), X)


def test_a_damaged_compressed_csv_is_one_error_line(data, tmp_path, capsys):
    # a cut-short or corrupt .gz/.xz was a zlib/EOFError/LZMAError traceback, exit 1
    import gzip
    import lzma

    X, y = data
    text = _frame(X, y).to_csv(index=False).encode()
    whole = gzip.compress(text)
    flipped = bytearray(whole)
    flipped[20:40] = bytes(20)
    for name, raw, said in [("cut.csv.gz", whole[:-100], "cannot be read to its end "
                             "(EOFError: Compressed file ended"),
                            ("bad.csv.gz", bytes(flipped), "is not a readable CSV file"),
                            ("cut.csv.xz", lzma.compress(text)[:-40], "EOFError")]:
        (tmp_path / name).write_bytes(raw)
        assert main(["fit", str(tmp_path / name), "--label", "label",
                     "--model", str(tmp_path / "m")]) == 2
        line = one_error_line(capsys)
        assert f"{tmp_path / name} " in line, line
        assert said in line, line
        assert not (tmp_path / "m").exists()


def test_a_compressed_csv_without_its_codec_says_so(tmp_path, monkeypatch):
    # fsspec knows .zst only with zstandard installed: read raw, the file was "not a readable
    # CSV file (UnicodeDecodeError: ...)"
    import fsspec.utils

    monkeypatch.delitem(fsspec.utils.compressions, "zst", raising=False)
    (tmp_path / "t.csv.zst").write_bytes(b"(\xb5/\xfd" + bytes(range(200)))
    with pytest.raises(InputError, match=re.escape(
            f"{tmp_path / 't.csv.zst'}: no codec for .zst files is installed (for .zst: the "
            "zstandard package); install it, or decompress the file")):
        sources.open_source(tmp_path / "t.csv.zst", label="label")


@pytest.mark.parametrize("name", ["one.parquet", "t.csv"])
def test_projecting_a_table_source_raises_no_feature_name_warning(inputs, tmp_path, name):
    # the sources' columns are matched to the model's by name; scikit-learn's check on
    # the bare rows warned "X does not have valid feature names" (an error here)
    from streamproj import jobs

    spec = str(next(v[0] for v in inputs.values() if str(v[0]).endswith(name)))
    jobs.fit_model(spec, tmp_path / "m", label="label", features="emb_*")
    rep = jobs.project_model(tmp_path / "m", spec, tmp_path / "o.zarr", label="label",
                             features="emb_*")
    assert rep["rows"] == N


def test_a_zarr_dataset_with_named_variables_opens_by_its_columns(inputs):
    # what the CLI and configs can say (they have no kind): --features/--label on a Zarr store
    spec, options = inputs["xarray-zarr"]
    plain = sources.open_source(spec, features="emb_*", label="label")
    given = sources.open_source(spec, **options)
    assert plain.kind == given.kind == "xarray"
    np.testing.assert_array_equal(plain.X.compute(), given.X.compute())
    # a plain group with arrays still gets the one-line hint
    with pytest.raises(InputError, match="holds arrays, not columns; name them with --x/--y"):
        sources.open_source(inputs["zarr-v3"][0], label="label")


@pytest.mark.parametrize("step", ["fit", "project", "append"])
def test_a_bad_value_in_a_table_names_its_row_and_column(tmp_path, data, step):
    """(An append named "(column 3)": its errors took OUT's name and no columns.)"""
    from streamproj import jobs

    X, y = data
    df = _frame(X, y)
    df.loc[777, "emb_3"] = np.nan
    _parquet(tmp_path / "bad.parquet", df, row_group_size=200)
    if step != "fit":
        _parquet(tmp_path / "good.parquet", _frame(X, y))
        jobs.fit_model(tmp_path / "good.parquet", tmp_path / "m", label="label")
    if step == "append":
        jobs.project_model(tmp_path / "m", tmp_path / "good.parquet", tmp_path / "o.zarr",
                           label="label")
    def run():
        if step == "fit":
            return jobs.fit_model(tmp_path / "bad.parquet", tmp_path / "m", label="label")
        return jobs.project_model(tmp_path / "m", tmp_path / "bad.parquet",
                                  tmp_path / "o.zarr", label="label",
                                  mode="append" if step == "append" else "rewrite")

    with pytest.raises(BadValuesError, match=r"bad.parquet\[.*\] has a non-finite value \(nan\) "
                                             r"in row 777 \(column emb_3\)"):
        run()


def test_recorded_options_reopen_what_a_ledger_entry_names():
    from streamproj.sources import recorded_options

    h5 = {"url": "/d/in.h5:/grp/X", "kind": "hdf5", "x": "/grp/X", "y": "/grp/lab"}
    assert recorded_options(h5) == {"x": "X", "y": "/grp/lab", "features": None, "label": None}
    # the same file given without the dataset suffix names the dataset as x
    assert recorded_options(h5, "/d/in.h5")["x"] == "/grp/X"
    table = {"url": "/d/t.parquet", "kind": "parquet", "x": ["a", "b"], "y": "cls"}
    assert recorded_options(table) == {"x": "X", "y": "y", "features": ["a", "b"], "label": "cls"}
    zarr_entry = {"url": "/d/z.zarr", "kind": "zarr", "x": "emb", "y": "lab"}
    assert recorded_options(zarr_entry) == {"x": "emb", "y": "lab", "features": None, "label": None}


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")  # fixed-width bytes
def test_fixed_width_bytes_labels_in_zarr_are_text_and_meet_parquet_text(tmp_path, data, capsys):
    # b"cat" in a Zarr array and "cat" in a Parquet file are one class, as HDF5's bytes are
    X, y = data
    names = np.array(["cat", "dog", "eel"])[y]
    write_zarr(tmp_path / "b.zarr", X[:300], names[:300].astype("S3"))
    _parquet(tmp_path / "t.parquet", _frame(X[300:], names[300:]))
    src = sources.open_source(tmp_path / "b.zarr")
    assert src.y.dtype.kind == "U"
    assert src.y.compute().tolist() == names[:300].tolist()
    assert main(["fit", str(tmp_path / "b.zarr"), "--model", str(tmp_path / "m")]) == 0
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "t.parquet"), "--label", "label"]) == 0
    model = sp.load(tmp_path / "m")
    assert model.classes_.tolist() == ["cat", "dog", "eel"]
    np.testing.assert_array_equal(model.stats_.counts, np.bincount(y))
    # a label that is not UTF-8 is one line naming its row, and nothing is written
    bad = names[:300].astype("S3")
    bad[157] = b"\xffo"
    write_zarr(tmp_path / "bad.zarr", X[:300], bad)
    capsys.readouterr()
    assert main(["fit", str(tmp_path / "bad.zarr"), "--model", str(tmp_path / "m2")]) == 2
    assert re.search(r"bad\.zarr/y label b'\\xffo' at row 157 is not UTF-8 text$", one_error_line(capsys))
    assert not (tmp_path / "m2").exists()
    # Zarr's variable-length bytes too
    from zarr.core.dtype import VariableLengthBytes

    group = write_zarr(tmp_path / "vb.zarr", X[:300])
    labels = group.create_array("y", shape=(300,), chunks=(100,), dtype=VariableLengthBytes())
    labels[:] = np.array([n.encode() for n in names[:300]], dtype=object)
    assert sources.open_source(tmp_path / "vb.zarr").y.compute().tolist() == names[:300].tolist()


def test_binary_labels_in_parquet_are_text_and_meet_string_labels(tmp_path, data, capsys):
    # a binary label column (written by Spark or from bytes) gave classes b'cat', b'dog' where
    # the same labels in Zarr or HDF5 are 'cat', 'dog'; beside a file of strings it was refused
    X, y = data
    names = np.array(["cat", "dog", "eel"])[y]
    (tmp_path / "days").mkdir()
    table = pa.Table.from_pandas(_frame(X[:400], names[:400]), preserve_index=False)
    table = table.set_column(2, "label", pa.array([n.encode() for n in names[:400]], pa.binary()))
    pq.write_table(table, tmp_path / "days" / "a.parquet", row_group_size=100)
    _parquet(tmp_path / "days" / "b.parquet", _frame(X[400:], names[400:]))
    src = sources.open_source(tmp_path / "days", label="label")
    assert src.y.compute().tolist() == names.tolist()
    assert main(["fit", str(tmp_path / "days"), "--label", "label", "--model", str(tmp_path / "m")]) == 0
    assert sp.load(tmp_path / "m").classes_.tolist() == ["cat", "dog", "eel"]
    # a label that is not UTF-8 names its row
    labels = [n.encode() for n in names[:400]]
    labels[257] = b"\xffo"
    pq.write_table(table.set_column(2, "label", pa.array(labels, pa.binary())),
                   tmp_path / "days" / "a.parquet", row_group_size=100)
    capsys.readouterr()
    assert main(["fit", str(tmp_path / "days"), "--label", "label", "--model", str(tmp_path / "m2")]) == 2
    assert re.search(r"label b'\\xffo' at row 257 is not UTF-8 text$", one_error_line(capsys))
    assert not (tmp_path / "m2").exists()


def test_bytes_labels_given_in_python_are_kept_as_bytes_through_a_save(tmp_path, data):
    # as scikit-learn keeps them; model.json describes them as text, the NPZ keeps the bytes
    X, y = data
    labels = np.array([b"cat", b"dog", b"\xff"])[y]
    model = sp.BoundaryProjector().fit(X, labels)
    model.save(tmp_path / "m")
    back = sp.load(tmp_path / "m")
    assert back.classes_.tolist() == [b"cat", b"dog", b"\xff"]
    np.testing.assert_array_equal(back.predict(X), model.predict(X))
    assert back.model_id_ == model.model_id_


def test_a_feature_named_as_written_wins_over_the_pattern_it_spells(tmp_path, data):
    X, y = data
    frame = pd.DataFrame({"x[0]": X[:, 0], "x0": X[:, 1], "x[1]": X[:, 2], "label": y})
    _parquet(tmp_path / "b.parquet", frame)
    src = sources.open_source(tmp_path / "b.parquet", features=["x[1]", "x[0]"], label="label")
    assert src.feature_names == ("x[1]", "x[0]")
    np.testing.assert_array_equal(src.X.compute(), X[:, [2, 0]])
    assert sources.open_source(tmp_path / "b.parquet", features="x*", label="label").n_features == 3


def test_csv_labels_keep_one_type_in_every_block(tmp_path):
    """pandas guessed each block's type again: "007" became 7 where no "A12" was near."""
    n = 3000
    rng = np.random.default_rng(2)
    codes = np.where(rng.random(n) < 0.5, "007", "010").astype(object)
    codes[:200] = "A12"  # only in the first block: the file's labels are text
    flags = np.where(rng.random(n) < 0.5, "True", "False").astype(object)
    frame = pd.DataFrame({"a": rng.normal(size=n), "code": codes, "flag": flags})
    frame.to_csv(tmp_path / "codes.csv", index=False)
    src = sources.open_source(tmp_path / "codes.csv", features=["a"], label="code", chunk_rows=100)
    assert src.X.numblocks[0] > 5
    assert sorted(set(src.y.compute().tolist())) == ["007", "010", "A12"]
    # booleans: a block holding a stray word is refused at its row, not read as all True
    assert sources.open_source(tmp_path / "codes.csv", features=["a"], label="flag",
                               chunk_rows=100).y.compute().tolist() == (flags == "True").tolist()
    frame.loc[2500, "flag"] = "unknown"
    frame.to_csv(tmp_path / "codes.csv", index=False)
    src = sources.open_source(tmp_path / "codes.csv", features=["a"], label="flag", chunk_rows=100)
    with pytest.raises(InputError, match=r"the label 'flag' is 'unknown' at row 2500, but the "
                                         r"labels before it are bool"):
        src.y.compute()


def test_hdf5_rows_never_written_are_refused_unless_allowed(tmp_path, data, capsys):
    # a chunk HDF5 never stored reads as the fill value: 200 rows of zeros were fitted as
    # data, exit 0 (a Zarr store with a chunk missing is refused)
    X, y = data
    path = tmp_path / "holes.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("X", shape=X.shape, dtype="f8", chunks=(200, 2), fillvalue=0.0)
        d[:400] = X[:400]
        d[600:] = X[600:]
        d[400:600, 2:] = X[400:600, 2:]  # some chunks of the band written, not all
        f.create_dataset("y", data=y, chunks=(200,))
        f.create_dataset("contiguous", shape=X.shape, dtype="f8")  # never written at all
        f.create_dataset("Xfull", data=X, chunks=(200, 2))
        f.create_dataset("labels", shape=y.shape, dtype=y.dtype, chunks=(300,))
        f["labels"][:600] = y[:600]
    with pytest.raises(InputError, match=re.escape(
            f"{path}:/X: rows 400..599 were never written (their chunk is not in the file), so "
            "they would read as the fill value 0.0; write them, or pass --allow-missing-chunks")):
        sources.open_source(path)
    with pytest.raises(InputError, match="/contiguous: rows 0..999 were never written"):
        sources.open_source(path, x="/contiguous")
    with pytest.raises(InputError, match="/labels: rows 600..899 were never written"):
        sources.open_source(path, x="/Xfull", y="labels")
    allowed = sources.open_source(path, allow_missing_chunks=True)
    got = allowed.X.compute()
    np.testing.assert_array_equal(got[400:600, :2], 0.0)
    np.testing.assert_array_equal(np.delete(got, np.s_[400:600], axis=0),
                                  np.delete(X, np.s_[400:600], axis=0))
    # the command line: one line and nothing written; --allow-missing-chunks reads them
    assert main(["fit", str(path), "--model", str(tmp_path / "m")]) == 2
    assert "rows 400..599 were never written" in one_error_line(capsys)
    assert not (tmp_path / "m").exists()
    assert main(["fit", str(path), "--model", str(tmp_path / "m"), "--allow-missing-chunks"]) == 0
    assert sp.load(tmp_path / "m").stats_.n_samples == len(y)
    with h5py.File(tmp_path / "whole.h5", "w") as f:  # every chunk written: read as before
        f.create_dataset("X", data=X, chunks=(128, 2))
        f.create_dataset("y", data=y, chunks=(128,))
    np.testing.assert_array_equal(sources.open_source(tmp_path / "whole.h5").X.compute(), X)


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")  # fixed-width bytes
def test_allow_missing_chunks_reads_a_zarr_store_as_without_it(tmp_path, data):
    # --allow-missing-chunks opened Zarr stores by a path of its own: fixed-width bytes
    # labels stayed bytes (classes b'cat', not 'cat'), and a store not named *.zarr (an
    # object store's day1/) was refused with "pass --allow-missing-chunks"
    from streamproj import jobs

    X, y = data
    names = np.array(["cat", "dog", "eel"])[y].astype("S3")
    X = X.copy()
    X[200:300] = 0.0  # one chunk of the fill value: never written
    write_zarr(tmp_path / "day1", X, names)
    with pytest.raises(InputError, match=r"day1/X: the chunk file of rows 200\.\.299 is missing"):
        jobs.open_inputs([tmp_path / "day1"])
    (src,) = jobs.open_inputs([tmp_path / "day1"], allow_missing_chunks=True)
    np.testing.assert_array_equal(src.X.compute(), X)
    assert src.y.compute().tolist() == names.astype(str).tolist()
    assert main(["fit", str(tmp_path / "day1"), "--model", str(tmp_path / "m"),
                 "--allow-missing-chunks"]) == 0
    assert sp.load(tmp_path / "m").classes_.tolist() == ["cat", "dog", "eel"]
    # an object store's folder: no .zarr to tell it by
    import fsspec

    url = f"memory://{tmp_path.name}/day1"
    fsspec.filesystem("memory").put(str(tmp_path / "day1"), url, recursive=True)
    try:
        (src,) = jobs.open_inputs([url], allow_missing_chunks=True)
        np.testing.assert_array_equal(src.X.compute(), X)
    finally:
        fsspec.filesystem("memory").rm(f"memory://{tmp_path.name}", recursive=True)


@pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")  # consolidated in v3
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_stale_consolidated_metadata_does_not_hide_rows(tmp_path, data, zarr_format):
    # a store consolidated, then grown by a writer that did not consolidate again: the
    # group's consolidated copy gave X's old shape, and the fit took 600 of 1000 rows, exit 0
    X, y = data
    path = tmp_path / "s.zarr"
    group = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    group.create_array("X", data=X[:600], chunks=(100, P))
    group.create_array("y", data=y[:600], chunks=(100,))
    zarr.consolidate_metadata(str(path))
    group = zarr.open_group(str(path), mode="a", use_consolidated=False)
    group["X"].resize(X.shape)
    group["X"][600:] = X[600:]
    group["y"].resize(y.shape)
    group["y"][600:] = y[600:]
    assert zarr.open_group(str(path))["X"].shape[0] == 600  # what zarr says by default
    src = sources.open_source(path)
    np.testing.assert_array_equal(src.X.compute(), X)
    np.testing.assert_array_equal(src.y.compute(), y)
    flat = tmp_path / "flat.zarr"  # an xarray dataset the same way
    xr.Dataset({c: (("row",), X[:600, i]) for i, c in enumerate(COLS)}
               | {"label": (("row",), y[:600])}).to_zarr(flat, mode="w", consolidated=True,
                                                          zarr_format=zarr_format)
    group = zarr.open_group(str(flat), mode="a", use_consolidated=False)
    for name, values in [*((c, X[:, i]) for i, c in enumerate(COLS)), ("label", y)]:
        group[name].resize(values.shape)
        group[name][600:] = values[600:]
    src = sources.open_source(flat, features="emb_*", label="label")
    np.testing.assert_array_equal(src.X.compute(), X)


def _label_csv(path, labels):
    rng = np.random.default_rng(5)
    n = len(labels)
    pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "label": labels}).to_csv(
        path, index=False)


def _labels_kept_as_written(path, labels, chunk_rows):
    """A CSV of ``labels`` reads them as text as written, and a fit has one class per spelling."""
    _label_csv(path, labels)
    src = sources.open_source(path, label="label", chunk_rows=chunk_rows)
    assert src.y.dtype == object
    assert src.y.compute().tolist() == labels.tolist()
    assert main(["fit", str(path), "--label", "label", "--model", str(path.with_suffix(".m"))]) == 0
    assert sp.load(path.with_suffix(".m")).classes_.tolist() == sorted(set(labels))


def test_csv_labels_spelled_like_one_number_are_not_one_class(tmp_path, capsys):
    """Labels 007, 7 and 8 were read as the integers 7, 7 and 8: two classes, exit 0."""
    rng = np.random.default_rng(4)
    codes = np.array(["007", "7", "8"], dtype=object)[rng.integers(0, 3, 600)]
    _labels_kept_as_written(tmp_path / "codes.csv", codes, 100)
    # labels written plainly keep their types: int64, uint64, bool, float64
    for labels, want in ((["0", "1", "-12"], np.array([0, 1, -12])),
                         (["18446744073709551615", "1"], np.array([2**64 - 1, 1], dtype=np.uint64)),
                         (["True", "false"], np.array([True, False])),
                         (["0.0", "1.0", "2.5", "1e-05"], np.array([0, 1, 2.5, 1e-5]))):
        _label_csv(tmp_path / "plain.csv", labels * 100)
        y = sources.open_source(tmp_path / "plain.csv", label="label").y
        assert y.dtype == want.dtype
        assert y.compute().dtype == want.dtype
        np.testing.assert_array_equal(y.compute(), np.tile(want, 100))
    # the first rows set the type; a later block that spells a number otherwise is refused
    for odd, kind in (("007", "int64"), ("-07", "int64")):
        _label_csv(tmp_path / "late.csv", ["1", "2", "7", "0"] * 500 + [odd] + ["1"] * 10)
        src = sources.open_source(tmp_path / "late.csv", label="label", chunk_rows=100)
        assert src.y.dtype == np.int64
        spelled = str(int(odd))
        with pytest.raises(InputError, match=rf"late\.csv: the label 'label' at row 2000 is written "
                                             rf"{re.escape(repr(odd))}, which reads as '{spelled}': the "
                                             rf"labels are read as {kind} .* both spellings would "
                                             "be one class"):
            src.y.compute()
    # a sign and spaces around a number are one spelling of it (libsvm's +1/-1, ", " files),
    # and R's NA among integers is a missing label, as before
    for labels, want in ((["+1", "-1"], [1, -1]), ([" 1", " 0 "], [1, 0]), ([".5", "1."], [0.5, 1.0])):
        _label_csv(tmp_path / "signs.csv", labels * 100)
        y = sources.open_source(tmp_path / "signs.csv", label="label").y
        assert y.dtype.kind in "if"
        np.testing.assert_array_equal(y.compute(), np.tile(want, 100))
    _label_csv(tmp_path / "r.csv", ["0", "1", "1", "NA"] + ["1"] * 40)
    assert main(["fit", str(tmp_path / "r.csv"), "--label", "label",
                 "--model", str(tmp_path / "m3")]) == 2
    assert ("the label 'label' is missing at row 3 ('NA' among int64 labels)"
            in one_error_line(capsys))
    _label_csv(tmp_path / "late.csv", ["1.5", "2"] * 500 + ["007"])
    with pytest.raises(InputError, match=r"row 1000 is written '007', which reads as '7\.0'"):
        sources.open_source(tmp_path / "late.csv", label="label", chunk_rows=100).y.compute()
    _label_csv(tmp_path / "late.csv", ["1.5", "2"] * 500 + ["9007199254740993"])
    with pytest.raises(InputError, match=r"written '9007199254740993', which reads as "
                                         r"'9007199254740992\.0'"):
        sources.open_source(tmp_path / "late.csv", label="label", chunk_rows=100).y.compute()
    _label_csv(tmp_path / "late.csv", ["7", "8"] * 500 + ["007"])  # past the first 1000 rows
    assert main(["fit", str(tmp_path / "late.csv"), "--label", "label",
                 "--model", str(tmp_path / "m2")]) == 2
    assert ("late.csv: the label 'label' at row 1000 is written '007', which reads as '7'"
            in one_error_line(capsys))
    assert not (tmp_path / "m2").exists()


def test_csv_class_names_pandas_reads_as_missing_are_labels(tmp_path, capsys):
    """A class "NA" (North America), "None", "null" or "nan" was "the label is missing at row 3"."""
    rng = np.random.default_rng(6)
    names = np.array(["NA", "EU", "None", "null", "nan", "N/A"], dtype=object)
    regions = names[rng.integers(0, len(names), 3000)]
    _labels_kept_as_written(tmp_path / "r.csv", regions, 200)
    # an empty field is still a missing label, in any block; features read "NA" as missing still
    for at in (3, 2500):
        lines = (tmp_path / "r.csv").read_text().splitlines()
        lines[at + 1] = "NA,0.5,"
        (tmp_path / "e.csv").write_text("\n".join(lines) + "\n")
        src = sources.open_source(tmp_path / "e.csv", label="label", chunk_rows=200)
        assert np.isnan(src.X[at, 0].compute())
        with pytest.raises(InputError, match=rf"e\.csv: the label 'label' is missing at row {at}; "
                                             "every row needs a label"):
            src.y.compute()
    # among integers, a later "NA" is a missing label (R's), named as written
    _label_csv(tmp_path / "n.csv", ["0", "1"] * 600 + ["NA"])
    assert main(["fit", str(tmp_path / "n.csv"), "--label", "label",
                 "--model", str(tmp_path / "m2")]) == 2
    assert ("n.csv: the label 'label' is missing at row 1200 ('NA' among int64 labels)"
            in one_error_line(capsys))


def test_hdf5_text_labels_are_utf8_whatever_their_declared_encoding(tmp_path, data, capsys):
    """h5py stores numpy bytes as 'ASCII' strings; UTF-8 in them crashed the fit (exit 1)."""
    X, y = data
    names = np.array(["café", "naïve", "cat"])[y]
    utf8 = np.array([s.encode("utf-8") for s in names])
    with h5py.File(tmp_path / "t.h5", "w") as f:
        f["X"] = X
        f["fixed"] = utf8
        f.create_dataset("vlen", data=names.astype(object), dtype=h5py.string_dtype())
        bad = utf8.copy()
        bad[321] = b"\xffcat"
        f["bad"] = bad
    for y_name in ("fixed", "vlen"):
        src = sources.open_source(f"{tmp_path / 't.h5'}:/X", y=y_name, chunk_rows=100)
        assert src.y.compute().tolist() == names.tolist()
    assert main(["fit", f"{tmp_path / 't.h5'}:/X", "--y", "fixed", "--model", str(tmp_path / "m")]) == 0
    assert sp.load(tmp_path / "m").classes_.tolist() == ["café", "cat", "naïve"]
    capsys.readouterr()
    assert main(["fit", f"{tmp_path / 't.h5'}:/X", "--y", "bad", "--model", str(tmp_path / "m2")]) == 2
    assert re.search(r"t\.h5:/bad label b'\\xffcat' at row 321 is not UTF-8 text$",
                     one_error_line(capsys))
    assert not (tmp_path / "m2").exists()


def test_hdf5_enum_labels_are_their_integers_and_print_no_numpy_warning(tmp_path, data, capsys):
    """An h5py enum dtype carries metadata: saving the classes printed numpy's 'metadata on a
    dtype is not saved to an npy/npz' warning on every fit."""
    X, y = data
    with h5py.File(tmp_path / "e.h5", "w") as f:
        f["X"] = X
        f.create_dataset("y", data=y.astype("i1"),
                         dtype=h5py.enum_dtype({f"c{k}": k for k in range(K)}, basetype="i1"))
    src = sources.open_source(tmp_path / "e.h5", chunk_rows=100)
    assert src.y.dtype.metadata is None
    assert src.y.compute().dtype.metadata is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["fit", str(tmp_path / "e.h5"), "--model", str(tmp_path / "m")]) == 0
    assert "warning" not in capsys.readouterr().err
    assert sp.load(tmp_path / "m").classes_.tolist() == list(range(K))

def test_a_csv_field_holding_a_line_break_across_blocks_is_one_clear_error(tmp_path):
    """It was pandas' ParserError (a traceback in Python, 'EOF inside string' on the command line)."""
    rng = np.random.default_rng(3)
    quoted = '"note:\nend"'  # a label holding a line break, quoted as CSV allows
    lines = ["a,b,y"] + [f"{rng.normal()},{rng.normal()},{quoted if i % 7 == 0 else 'plain'}"
                         for i in range(3000)]
    (tmp_path / "nl.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"nl\.csv: cannot parse a block of it \(.*EOF inside "
                                         r"string.*\); .* a quoted field holding a line break"):
        sources.open_source(tmp_path / "nl.csv", label="y", chunk_rows=100).y.compute()


def test_a_saved_pandas_index_is_no_feature(tmp_path, data, capsys):
    # a DataFrame saved with its index (Parquet's __index_level_0__, a named index, to_csv's
    # unnamed first column) had the row numbers fitted as a feature, silently
    X, y = data
    df = _frame(X, y)
    df.index = np.arange(len(df)) + 100  # (a filtered frame: not a RangeIndex)
    pq.write_table(pa.Table.from_pandas(df, preserve_index=True), str(tmp_path / "idx.parquet"))
    pq.write_table(pa.Table.from_pandas(df.rename_axis("row_id")), str(tmp_path / "named.parquet"))
    for name in ("idx", "named"):
        with warnings.catch_warnings():  # (the named one is said: below)
            warnings.simplefilter("ignore", StreamprojWarning)
            src = sources.open_source(tmp_path / f"{name}.parquet", label="label")
        assert src.feature_names == tuple(COLS), name
        np.testing.assert_array_equal(src.X.compute(), X)
    named = sources.open_source(tmp_path / "named.parquet", label="label", features="row_id,emb_0")
    np.testing.assert_array_equal(named.X.compute()[:, 0], np.arange(N) + 100)  # when asked for
    df.to_csv(tmp_path / "idx.csv")  # pandas' default: the index first, its header blank
    assert main(["fit", str(tmp_path / "idx.csv"), "--label", "label",
                 "--model", str(tmp_path / "m")]) == 2
    assert "idx.csv: column 1 of the header has no name" in one_error_line(capsys)
    assert not (tmp_path / "m").exists()
    src = sources.open_source(tmp_path / "idx.csv", label="label", features=COLS)
    np.testing.assert_allclose(src.X.compute(), X, rtol=1e-15)


def test_a_named_pandas_index_left_out_is_said(tmp_path, data):
    # df.set_index("id").to_parquet(p): "id" was left out of the default features without a
    # word, and a model meant to use it had one feature fewer
    X, y = data
    df = _frame(X, y)
    df.index = np.arange(len(df)) + 100
    df.rename_axis("row_id").to_parquet(tmp_path / "named.parquet")
    df.to_parquet(tmp_path / "idx.parquet")  # unnamed: __index_level_0__, row numbers
    with pytest.warns(StreamprojWarning) as caught:
        src = sources.open_source(tmp_path / "named.parquet", label="label")
    assert src.feature_names == tuple(COLS)
    assert [str(w.message) for w in caught] == [
        f"{tmp_path / 'named.parquet'}: column 'row_id', the DataFrame index pandas saved, is "
        "left out of the features; to fit it too, name it among the features with --features "
        "(or the features key)"]
    assert caught[0].filename == __file__  # (the caller's line)
    # silent: an unnamed index, the named one asked for or left out by name, or taken as the label
    src = sources.open_source(tmp_path / "named.parquet", label="label",
                              features=["row_id", *COLS])
    assert src.feature_names == ("row_id", *COLS)
    assert sources.open_source(tmp_path / "named.parquet", label="label",
                               features=COLS).feature_names == tuple(COLS)
    assert sources.open_source(tmp_path / "idx.parquet", label="label").feature_names == tuple(COLS)
    df.set_index("label").to_parquet(tmp_path / "by_label.parquet")
    assert sources.open_source(tmp_path / "by_label.parquet",
                               label="label").feature_names == tuple(COLS)
    df.set_index(["label", "emb_0"]).to_parquet(tmp_path / "two.parquet")
    with pytest.warns(StreamprojWarning, match=r"two\.parquet: column 'emb_0', the DataFrame index "):
        assert sources.open_source(tmp_path / "two.parquet",
                                   label="label").feature_names == tuple(COLS[1:])


@pytest.mark.filterwarnings("default::streamproj.errors.StreamprojWarning")  # (as on a terminal)
def test_fit_says_once_on_stderr_that_a_named_pandas_index_is_left_out(tmp_path, data, capsys):
    X, y = data
    df = _frame(X, y).set_axis(pd.Index(np.arange(len(y)) + 100, name="row_id"))
    df.to_parquet(tmp_path / "named.parquet")
    (tmp_path / "days").mkdir()
    for i in range(3):
        df.iloc[i::3].to_parquet(tmp_path / "days" / f"day-{i}.parquet")
    for spec in ("named.parquet", "days"):
        capsys.readouterr()
        assert main(["fit", str(tmp_path / spec), "--label", "label",
                     "--model", str(tmp_path / f"m-{spec}")]) == 0
        err = capsys.readouterr().err
        assert err == (f"streamproj: warning: {tmp_path / spec}: column 'row_id', the DataFrame "
                       "index pandas saved, is left out of the features; to fit it too, name it "
                       "among the features with --features (or the features key)\n"), spec
        assert sp.load(tmp_path / f"m-{spec}").feature_names_in_.tolist() == COLS
    assert main(["fit", str(tmp_path / "named.parquet"), "--label", "label", "--features",
                 f"row_id,{','.join(COLS)}", "--model", str(tmp_path / "m-all")]) == 0
    assert capsys.readouterr().err == ""
    assert sp.load(tmp_path / "m-all").feature_names_in_.tolist() == ["row_id", *COLS]

def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path):
    (tmp_path / "dup.csv").write_text("f0,f0,label\n1,2,0\n3,4,1\n")
    with pytest.raises(InputError, match=r"dup\.csv: the header names column 'f0' twice"):
        sources.open_source(tmp_path / "dup.csv", label="label")


def test_a_csv_line_with_a_field_too_many_is_refused_in_any_block(tmp_path, capsys):
    # "1,234.5" typed unquoted in a later block: pandas, reading by name, dropped the last field
    # and shifted the others, and the fit used the shifted row (exit 0)
    rng = np.random.default_rng(8)
    rows = [f"{rng.integers(0, 2)},{rng.normal():.6f},{rng.normal():.6f},{rng.normal():.6f}"
            for _ in range(6000)]
    for at in (4, 3000, 5999):  # in the first block, in a later one, the last line
        bad = list(rows)
        bad[at] = "1,1,234.5,0.5,0.7"
        (tmp_path / "lf.csv").write_text("label,a,b,c\n" + "\n".join(bad) + "\n")
        with pytest.raises(InputError, match=rf"lf\.csv(: the line of row {at} has more fields "
                                             r"than the header's 4|: a line has more fields than the "
                                             r"header| is not a readable CSV file "
                                             r".*Expected 4 fields in line 6)"):
            sources.open_source(tmp_path / "lf.csv", label="label", chunk_rows=500).X.compute()
    assert main(["fit", str(tmp_path / "lf.csv"), "--label", "label",
                 "--model", str(tmp_path / "m")]) == 2
    assert "lf.csv: the line of row 5999 has more fields than the header's 4" in one_error_line(capsys)
    # with a quote in the block, the block is parsed whole: refused as well
    bad = list(rows)
    bad[3000], bad[3001] = '1,"1",234.5,0.5,0.7', '0,"2",1,1'
    (tmp_path / "q.csv").write_text("label,a,b,c\n" + "\n".join(bad) + "\n")
    with pytest.raises(InputError, match=r"q\.csv: (the line of row 3000|a line) has more fields"):
        sources.open_source(tmp_path / "q.csv", label="label", chunk_rows=500).X.compute()
    assert not (tmp_path / "m").exists()


def test_csv_headers_that_pandas_renames_are_refused_only_where_read(tmp_path):
    # Excel's trailing commas (blank names) and a repeated column left out by --features read as
    # before; a wide file whose header passes the first 64 KiB is not "a header with no rows"
    (tmp_path / "t.csv").write_text("a,b,y,,\n1,2,0,,\n3,4,1,,\n")
    src = sources.open_source(tmp_path / "t.csv", label="y", features="a,b")
    np.testing.assert_array_equal(src.X.compute(), [[1, 2], [3, 4]])
    (tmp_path / "n.csv").write_text("a,b,y,note,note\n1,2,0,x,z\n3,4,1,x,z\n")
    assert sources.open_source(tmp_path / "n.csv", label="y", features=["a", "b"]).X.shape == (2, 2)
    with pytest.raises(InputError, match="names column 'note' twice"):
        sources.open_source(tmp_path / "n.csv", label="y", features="a,note")
    names = [f"c{i:05d}" for i in range(6000)]
    rows = [",".join(["1.5"] * 6000) + ",0", ",".join(["2.5"] * 6000) + ",1"]
    (tmp_path / "wide.csv").write_text(",".join([*names, "y"]) + "\n" + "\n".join(rows) + "\n")
    src = sources.open_source(tmp_path / "wide.csv", label="y")
    assert src.X.shape == (2, 6000)
    np.testing.assert_array_equal(src.y.compute(), [0, 1])


def test_a_csv_with_a_header_and_no_rows(tmp_path, capsys):
    # a traceback (IndexError) before
    (tmp_path / "h.csv").write_text("f0,f1,label\n")
    code = main(["fit", str(tmp_path / "h.csv"), "--label", "label", "--model", str(tmp_path / "m")])
    assert code == 2
    assert "h.csv has a header but no rows" in one_error_line(capsys)
    (tmp_path / "v.csv").write_text("f0,f1,label\n1.5,2,0\nabc,3,1\n")
    code = main(["fit", str(tmp_path / "v.csv"), "--label", "label", "--model", str(tmp_path / "m")])
    assert code == 2
    assert "feature column 'f0' holds 'abc' at row 1" in one_error_line(capsys)


def test_a_csv_with_cr_only_line_ends_is_one_error_line_in_every_command(tmp_path, capsys):
    """Old Mac line ends (CR alone): a traceback (csv.Error from the header check) and exit 1."""
    lines = ["a,b,label"] + [f"{i % 7}.5,{(i * 3) % 5}.25,{i % 2}" for i in range(50)]
    (tmp_path / "cr.csv").write_bytes(("\r".join(lines) + "\r").encode())
    (tmp_path / "lf.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "crlf.csv").write_bytes(("\r\n".join(lines) + "\r\n").encode())
    refused = (r"^(streamproj: error: )?\S*/cr\.csv: its lines end in a carriage return alone "
               r"\(CR, old Mac line endings\), which cannot be read in blocks; convert the line "
               r"endings to LF or CRLF")
    with pytest.raises(InputError, match=refused):
        sources.open_source(tmp_path / "cr.csv", label="label")
    cr, m = str(tmp_path / "cr.csv"), str(tmp_path / "m")
    assert main(["fit", cr, "--label", "label", "--model", m]) == 2
    assert re.search(refused, one_error_line(capsys))
    assert not (tmp_path / "m").exists()
    assert main(["fit", str(tmp_path / "lf.csv"), "--label", "label", "--model", m]) == 0
    # LF and CRLF files read the same
    np.testing.assert_array_equal(
        sources.open_source(tmp_path / "crlf.csv", label="label").X.compute(),
        sources.open_source(tmp_path / "lf.csv", label="label").X.compute())
    capsys.readouterr()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    job = tmp_path / "job.toml"
    job.write_text(f'[input]\npaths = ["{cr}"]\nlabel = "label"\n[model]\npath = "{m}"\n'
                   f'mode = "auto"\n[output]\npath = "{tmp_path / "o.zarr"}"\n')
    for argv in (["update", m, cr, "--label", "label"],
                 ["project", m, cr, "--output", str(tmp_path / "o.zarr")],
                 ["run", str(job)]):
        assert main(argv) == 2, argv
        assert re.search(refused, one_error_line(capsys)), argv
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted([*before, "job.toml"])


def test_a_parquet_file_with_a_column_name_twice(tmp_path):
    # "cannot read …: KeyError: 'Column f0 does not exist in schema'" before
    table = pa.table([pa.array([1.0, 2.0]), pa.array([3.0, 4.0]), pa.array([0, 1])],
                     names=["f0", "f0", "label"])
    pq.write_table(table, str(tmp_path / "dup.parquet"))
    with pytest.raises(InputError, match=r"dup\.parquet has two columns named 'f0'"):
        sources.open_source(tmp_path / "dup.parquet", label="label")


def test_a_column_name_with_spaces_around_it_is_listed_quoted(tmp_path, capsys):
    # "has no label column 'y' (columns: a, b, y)" contradicted itself: the header was 'a, b, y'
    (tmp_path / "d.csv").write_text("a, b, y\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n")
    assert main(["fit", str(tmp_path / "d.csv"), "--label", "y", "--model",
                 str(tmp_path / "m")]) == 2
    assert "(columns: a, ' b', ' y')" in one_error_line(capsys)
    assert sources.listing(["a", "", "x y", "z"]) == "a, '', x y, z"
    assert not (tmp_path / "m").exists()


def test_a_netcdf_x_stored_feature_by_row_is_said_so(tmp_path, capsys):
    # "t.nc:y must be 1-D along 'feature' (one label per row); it has dimensions ('row',)":
    # the label was right, X the other way round
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(0)
    ds = xr.Dataset({"X": (("feature", "row"), rng.normal(size=(5, 200))),
                     "y": (("row",), rng.integers(0, 2, 200))})
    ds.to_netcdf(tmp_path / "t.nc", engine="h5netcdf")
    assert main(["fit", str(tmp_path / "t.nc"), "--model", str(tmp_path / "m")]) == 2
    line = one_error_line(capsys)
    assert "t.nc:X has dimensions ('feature', 'row'): its rows run along 'row', as y's do" in line
    assert "ds['X'].transpose('row', 'feature')" in line
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(("sep", "said"), [(";", "';'"), ("\t", "tabs"), ("|", "'|'")])
def test_a_csv_separated_by_something_else_is_said_so(tmp_path, capsys, sep, said):
    # a European export ('a;b;y'): "has no label column 'y' (columns: a;b;y)" and no more
    (tmp_path / "d.csv").write_text(f"a{sep}b{sep}y\n1{sep}2{sep}0\n3{sep}4{sep}1\n")
    for extra in ([], ["--label", "a"]):
        assert main(["fit", str(tmp_path / "d.csv"), "--model", str(tmp_path / "m"), *extra]) == 2
        line = one_error_line(capsys)
        assert f"the header looks separated by {said}: CSV inputs must be separated by commas" in line
    assert not (tmp_path / "m").exists()
    # a Parquet column with a semicolon in its name is no separator
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.table({"a;b": [1.0, 2.0]}), str(tmp_path / "d.parquet"))
    assert main(["fit", str(tmp_path / "d.parquet"), "--model", str(tmp_path / "m")]) == 2
    assert "looks separated" not in one_error_line(capsys)


def test_a_csv_whose_lines_end_in_a_comma_reads_each_column_as_named(tmp_path):
    # every line one empty field past the header (an export's trailing comma): pandas took the
    # first column for the index, so the labels were read from the next column (y = a's values)
    # in a file of one block (a label last was "missing"), and one of several blocks was refused
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 600)
    a, b = rng.normal(size=600).round(4), rng.normal(size=600).round(4)
    for order in (["y", "a", "b"], ["a", "y", "b"], ["a", "b", "y"]):
        cols = {"y": y, "a": a, "b": b}
        lines = [",".join(order)] + [",".join(str(cols[c][i]) for c in order) + ","
                                     for i in range(600)]
        (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
        for chunk_rows in (None, 50):  # one block, several
            src = sources.open_source(tmp_path / "t.csv", label="y", chunk_rows=chunk_rows)
            assert src.feature_names == ("a", "b")
            np.testing.assert_array_equal(src.y.compute(), y)
            np.testing.assert_array_equal(src.X.compute(), np.column_stack([a, b]))


def test_a_csv_whose_every_line_has_a_field_too_many_is_one_error_line(tmp_path, capsys):
    # R's write.csv without row.names=FALSE: row names with no name in the header. Read with
    # index_col=False (lines ending in a comma), pandas warns "Length of header or names does
    # not match length of data" on stderr beside the error line
    rows = [f"{i},{i % 7}.5,{(i * 3) % 5}.25,{i % 2}" for i in range(40)]
    (tmp_path / "r.csv").write_text("a,b,label\n" + "\n".join(rows) + "\n")
    assert main(["fit", str(tmp_path / "r.csv"), "--label", "label", "--model",
                 str(tmp_path / "m"), "--no-progress"]) == 2
    assert "r.csv: the line of row 0 has more fields than the header's 3" in one_error_line(capsys)
    assert not (tmp_path / "m").exists()


def test_an_empty_input_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _parquet(tmp_path / "p.parquet", pd.DataFrame({"a": [1.0, 2.0], "label": [0, 1]}))
    for paths in ("", [" "], [tmp_path / "p.parquet", ""]):
        with pytest.raises(InputError, match="the input path is empty"):
            sources.open_sources(paths, label="label")


def test_a_pattern_matching_the_jobs_own_output_or_model_says_what_it_matched(tmp_path, capsys):
    """'g/*.zarr' matched g/out.zarr once it was written (then 'has no array X: name the right
    one with --x') and a model folder g/m.zarr ('no Zarr group at'): each is named for what
    it is, and nothing is written."""
    X, y = make_classes(n=600)
    (tmp_path / "g").mkdir()
    write_zarr(tmp_path / "g" / "day1.zarr", X, y)
    pattern = str(tmp_path / "g" / "*.zarr")
    model, out = tmp_path / "m", tmp_path / "g" / "out.zarr"
    assert main(["fit", pattern, "--model", str(model)]) == 0
    assert main(["project", str(model), pattern, "--output", str(out)]) == 0
    before = sorted(p.name for p in out.rglob("*"))
    capsys.readouterr()
    assert main(["project", str(model), pattern, "--output", str(out), "--overwrite"]) == 2
    line = one_error_line(capsys)
    assert f"{out} is a streamproj output (projected coordinates), not input rows" in line
    assert "narrow the pattern" in line
    assert sorted(p.name for p in out.rglob("*")) == before
    shutil.rmtree(out)
    inner = tmp_path / "g" / "m.zarr"
    assert main(["fit", str(tmp_path / "g" / "day1.zarr"), "--model", str(inner)]) == 0
    version = (inner / "CURRENT").read_text()
    capsys.readouterr()
    assert main(["update", str(inner), pattern]) == 2
    line = one_error_line(capsys)
    assert f"{inner} is a streamproj model directory, not input rows" in line
    assert (inner / "CURRENT").read_text() == version
