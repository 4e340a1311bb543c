"""Whole chunks decoded straight into the result (streamproj.direct) read what zarr reads."""

import tracemalloc

import dask.array as da
import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, ZstdCodec

import streamproj as sp
from streamproj import direct, validation
from streamproj.direct import DirectChunks, _zstd_content_size, direct_reader


def _array(path, data, chunks, **kw):
    z = zarr.create_array(str(path), shape=data.shape, chunks=chunks, dtype=data.dtype, **kw)
    z[...] = data
    return zarr.open_array(str(path), mode="r")


def _data(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    return (rng.normal(size=shape) * 1e3).astype(dtype)


def _whole_chunks(z):
    """Every whole-chunk selection of a row-chunked array, as dask asks for them."""
    rows = z.chunks[0]
    return [(slice(s, min(s + rows, z.shape[0])), *(slice(0, n) for n in z.shape[1:]))
            for s in range(0, z.shape[0], rows)]


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "int64", "float16",
                                   "float32", "float64", "complex64"])
@pytest.mark.parametrize("compressors", ["default", None])
@pytest.mark.parametrize(("shape", "chunks"), [((1000, 7), (128, 7)), ((1000, 7), (1000, 7)),
                                               ((999, 3), (100, 8)), ((257,), (16,)),
                                               ((5, 4), (1, 4))])
def test_every_whole_chunk_is_read_directly_and_equals_zarrs(tmp_path, dtype, compressors,
                                                              shape, chunks):
    data = _data(dtype, shape)
    kw = {} if compressors == "default" else {"compressors": None}
    z = _array(tmp_path / "a.zarr", data, chunks, **kw)
    reader = direct_reader(z)
    assert isinstance(reader, DirectChunks)
    for i, key in enumerate(_whole_chunks(z)):
        got = reader._layout.read(key)
        written = (tmp_path / "a.zarr" / "c" / str(i)).exists()  # (none where all fill value)
        assert (got is not None) == written  # read here, not by zarr
        if not written:
            got = reader[key]
        want = z[key]
        assert got.dtype == want.dtype
        assert got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    lazy = da.from_array(reader, chunks=(z.chunks[0], *z.shape[1:]), asarray=True, fancy=False)
    assert lazy.compute().tobytes() == data.tobytes()


def test_other_selections_and_unwritten_chunks_are_zarrs(tmp_path):
    data = _data("float64", (100, 4))
    data[20:40] = -7.5  # the fill value: zarr writes no chunk of it
    z = _array(tmp_path / "a.zarr", data, (20, 4), fill_value=-7.5)
    reader = direct_reader(z)
    assert not (tmp_path / "a.zarr" / "c" / "1" / "0").exists()
    assert reader._layout.read((slice(20, 40), slice(0, 4))) is None
    for key in [(slice(20, 40), slice(0, 4)), (slice(5, 15), slice(0, 4)),
                (slice(0, 20), slice(1, 3)), (slice(0, 20, 2), slice(0, 4)), (3, slice(0, 4)),
                (slice(0, 40), slice(0, 4)), (Ellipsis,), (slice(None), slice(None))]:
        np.testing.assert_array_equal(reader[key], z[key])


@pytest.mark.parametrize("how", ["blosc", "gzip", "zstd-then-gzip", "sharded", "v2",
                                 "big-endian", "text"])
def test_layouts_it_does_not_know_are_left_to_zarr(tmp_path, how):
    data = _data("int16" if how == "big-endian" else "float32", (200, 3))
    kw: dict = {}
    if how == "blosc":
        kw["compressors"] = BloscCodec()
    elif how == "gzip":
        kw["compressors"] = GzipCodec()
    elif how == "zstd-then-gzip":
        kw["compressors"] = (ZstdCodec(), GzipCodec())
    elif how == "sharded":
        kw["shards"] = (100, 3)
    elif how == "v2":
        kw["zarr_format"] = 2
    elif how == "big-endian":
        kw["serializer"] = BytesCodec(endian="big")
    if how == "text":
        z = zarr.create_array(str(tmp_path / "a.zarr"), shape=(3,), chunks=(2,), dtype=str)
        z[:] = np.array(["a", "bb", "ccc"])
        z = zarr.open_array(str(tmp_path / "a.zarr"), mode="r")
    else:
        z = _array(tmp_path / "a.zarr", data, (50, 3), **kw)
    assert direct_reader(z) is z


def test_a_damaged_chunk_is_read_again_by_zarr_which_says_so(tmp_path):
    data = _data("float64", (100, 4))
    z = _array(tmp_path / "a.zarr", data, (50, 4))
    chunk = tmp_path / "a.zarr" / "c" / "1" / "0"
    raw = chunk.read_bytes()
    reader = direct_reader(z)
    for damaged in (raw[:-9], raw[:3], b"not zstd at all", raw[:5] + b"\x00" * 40):
        chunk.write_bytes(damaged)
        assert reader._layout.read((slice(50, 100), slice(0, 4))) is None
        with pytest.raises(Exception) as mine:  # noqa: PT011 (zarr's own error, whatever it is)
            reader[50:100, 0:4]
        with pytest.raises(type(mine.value)):
            z[50:100, 0:4]
    # a frame of another size than the chunk's (written for another shape)
    chunk.write_bytes(ZstdCodec()._zstd_codec.encode(np.zeros(10)))
    assert reader._layout.read((slice(50, 100), slice(0, 4))) is None


def test_the_zstd_header_gives_the_size_it_was_written_with():
    from numcodecs.zstd import Zstd

    for n in (0, 1, 255, 256, 300, 65_791, 65_792, 70_000, 2**24 + 5):
        frame = Zstd().encode(np.zeros(n, dtype=np.uint8))
        assert _zstd_content_size(frame) == n
    assert _zstd_content_size(b"\x28\xb5\x2f") is None
    assert _zstd_content_size(b"PK\x03\x04" + b"\x00" * 20) is None


def test_a_whole_chunk_peaks_at_its_compressed_bytes_and_itself(tmp_path):
    """zarr decodes into a buffer of its own and copies it out: about three times the chunk."""
    data = _data("float64", (40_000, 50))  # one 16 MB chunk, barely compressible
    z = _array(tmp_path / "a.zarr", data, (40_000, 50))
    compressed = (tmp_path / "a.zarr" / "c" / "0" / "0").stat().st_size
    key = (slice(0, 40_000), slice(0, 50))
    reader = direct_reader(z)
    peaks = {}
    for name, read in (("zarr", lambda: z[key]), ("direct", lambda: reader[key])):
        read()  # (warm: zarr's first read builds its codec pipeline)
        tracemalloc.start()
        got = read()
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert got.tobytes() == data.tobytes()
    assert peaks["direct"] <= compressed + data.nbytes + 2**20
    assert peaks["direct"] < 0.8 * peaks["zarr"]


def _count_direct_reads(monkeypatch):
    """A list that gets, for each whole-chunk read asked of streamproj.direct, whether it read it."""
    reads = []
    real = direct._Layout.read

    def counted(self, key):
        out = real(self, key)
        reads.append(out is not None)
        return out

    monkeypatch.setattr(direct._Layout, "read", counted)
    return reads


def test_a_fit_and_its_projection_read_directly_have_the_bits_of_zarrs(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    y = (rng.random(3000) < 0.4).astype(np.int64)
    X = (rng.normal(size=(3000, 6)) + y[:, None] * [1, 0, 2, 0, 0, 1] + 1e4).astype(np.float32)
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    g.create_array("X", data=X, chunks=(700, 6))
    g.create_array("y", data=y, chunks=(700,))
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="r")
    reads = _count_direct_reads(monkeypatch)
    fast = sp.BoundaryProjector().fit(g["X"], g["y"])
    z_fast = fast.transform(g["X"])
    z_fast = np.asarray(z_fast.compute() if hasattr(z_fast, "compute") else z_fast)
    # every chunk of X in the fit and in the transform (dask's look at an empty selection,
    # for its meta, is zarr's)
    assert sum(reads) >= 2 * 5
    monkeypatch.setattr(validation, "direct_reader", lambda a: a)
    slow = sp.BoundaryProjector().fit(g["X"], g["y"])
    z_slow = slow.transform(g["X"])
    z_slow = np.asarray(z_slow.compute() if hasattr(z_slow, "compute") else z_slow)
    assert fast.stats_.fingerprint() == slow.stats_.fingerprint()
    assert z_fast.tobytes() == z_slow.tobytes()


def test_the_commands_read_directly_too_and_a_damaged_chunk_is_still_named(tmp_path, monkeypatch,
                                                                             capsys):
    # the CLI and the jobs open Zarr inputs through the store's CheckedArray, which the
    # readers did not see into: every chunk went through zarr's copy (found profiling a night)
    from conftest import run_cli

    from streamproj import store

    rng = np.random.default_rng(5)
    y = (rng.random(2000) < 0.5).astype(np.int8)
    X = (rng.normal(size=(2000, 5)) + y[:, None]).astype(np.float32)
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    g.create_array("X", data=X, chunks=(300, 5))
    g.create_array("y", data=y, chunks=(300,))
    reads = _count_direct_reads(monkeypatch)
    assert run_cli("fit", tmp_path / "d.zarr", "--model", tmp_path / "m1") == 0
    assert sum(reads) >= 7  # every chunk of X (and of y)
    del reads[:]
    assert run_cli("project", tmp_path / "m1", tmp_path / "d.zarr", "--output",
                   tmp_path / "o1.zarr") == 0
    assert sum(reads) >= 7
    monkeypatch.setattr(store, "direct_reader", lambda a: a)
    assert run_cli("fit", tmp_path / "d.zarr", "--model", tmp_path / "m2") == 0
    assert run_cli("project", tmp_path / "m2", tmp_path / "d.zarr", "--output",
                   tmp_path / "o2.zarr") == 0
    assert sp.load(tmp_path / "m1").stats_.fingerprint() == sp.load(tmp_path / "m2").stats_.fingerprint()
    fast, slow = (zarr.open_group(str(tmp_path / o), mode="r")["projection"][:]
                  for o in ("o1.zarr", "o2.zarr"))
    assert fast.tobytes() == slow.tobytes()
    monkeypatch.undo()
    capsys.readouterr()
    chunk = tmp_path / "d.zarr" / "X" / "c" / "3" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-20])
    assert run_cli("fit", tmp_path / "d.zarr", "--model", tmp_path / "m3") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "d.zarr/X: rows 900..1199 cannot be read" in err[0]
