"""Pass 1 and the projection on a GPU (``--device cuda``, :mod:`streamproj.gpu`).

Most tests run the device code with numpy standing in for CuPy
(``gpu.use_backend(np)``): the same functions, so their arithmetic, layouts and
plumbing are checked on every machine. The tests marked ``needs_gpu`` run it on
a real GPU through CuPy and skip, saying so, where there is none.
"""

import json

import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import offset_classes, one_error_line, rel_err, two_pass, write_zarr

import streamproj as sp
from streamproj import gpu, jobs
from streamproj import stats as stats_module
from streamproj.cli import main
from streamproj.errors import DeviceError
from streamproj.passes import accumulate

needs_gpu = pytest.mark.skipif(
    gpu.backend() is None or gpu.backend() is np,
    reason="no GPU here: CuPy is not installed or sees no device (these run on a GPU machine)")


@pytest.fixture
def stand_in():
    """The device functions on numpy: no GPU needed."""
    with gpu.use_backend(np):
        yield


@pytest.fixture
def no_gpu():
    """As on a machine without CuPy or a GPU, whatever this one has."""
    with gpu.use_backend(None):
        yield


def assert_exact(stats, ref, tol=1e-10):
    scale = np.abs(ref["within"]).max()
    assert np.abs(stats.within - ref["within"]).max() <= tol * scale
    assert np.abs((stats.means - ref["means"]) + stats.mean_residuals).max() <= tol * max(
        1.0, np.abs(ref["means"]).max())
    assert np.array_equal(stats.counts, ref["counts"])


def small_panels(monkeypatch):
    """Send p = 7 down the wide layout: panels of 3 columns (a ragged last one)."""
    monkeypatch.setattr(stats_module, "_PANEL_MIN_WIDTH", 2)
    monkeypatch.setattr(stats_module, "_GRAM_PANEL", 3)
    monkeypatch.setattr(stats_module, "_FINISH_COLUMNS", 3)


# ------------------------------------------------------------------ pass 1
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize(("k", "separation"), [(2, 0.5), (3, 1e4), (40, 50.0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.float64])
def test_device_pass_1_matches_the_two_pass_reference(stand_in, monkeypatch, wide, k, separation,
                                                       dtype):
    # a huge mean, classes close (one shared shift) or far apart (a shift per class), many
    # classes in blocks of 16 (the one-hot products), rows in several device blocks, and
    # 700-row chunks that do not divide n
    if wide:
        small_panels(monkeypatch)
    monkeypatch.setattr(gpu, "_CLASS_BLOCK", 16)
    monkeypatch.setattr(gpu, "_DEVICE_BLOCK_BYTES", 8 * 7 * 300)
    X, y = offset_classes(n=3000, p=7, k=k, offset=3e4, seed=3, separation=separation)
    X = X.astype(dtype)
    ref = two_pass(X, y)
    got = accumulate(X, y, chunk_rows=700, kernel=gpu.KERNEL)
    assert_exact(got, ref)
    assert rel_err(got.within, accumulate(X, y, chunk_rows=700).within) < 1e-12


@pytest.mark.parametrize("detail", ["per_class", "fourth"])
def test_device_per_class_details_match_the_cpu(stand_in, detail):
    X, y = offset_classes(n=2500, p=6, k=4, offset=1e3, seed=5, separation=20.0)
    X = X.astype(np.float32)
    cpu = accumulate(X, y, detail, chunk_rows=600)
    dev = accumulate(X, y, detail, chunk_rows=600, kernel=gpu.KERNEL)
    assert_exact(dev, two_pass(X, y))
    for name in ("class_scatter", "comoment21", "comoment22"):
        if getattr(cpu, name) is not None:
            assert rel_err(getattr(dev, name), getattr(cpu, name)) < 1e-12, name


def test_device_pass_1_on_one_row_chunks_and_bfloat16(stand_in):
    X, y = offset_classes(n=40, p=5, k=2, offset=10.0, seed=6)
    assert_exact(accumulate(X, y, chunk_rows=1, kernel=gpu.KERNEL), two_pass(X, y))
    bits = (X.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 = top half
    decoded = stats_module.bfloat16_to_float32(bits)
    got = accumulate(bits, y, chunk_rows=7, bfloat16=True, kernel=gpu.KERNEL)
    assert_exact(got, two_pass(decoded, y))


def test_a_bad_row_is_named_on_the_device_too(stand_in):
    X, y = offset_classes(n=300, p=4, k=2, offset=0.0, seed=7)
    X[211, 2] = np.nan
    with pytest.raises(sp.BadValuesError, match="row 211"):
        accumulate(X, y, chunk_rows=100, kernel=gpu.KERNEL)


def test_big_endian_rows_reach_the_device_swapped_and_sum_exactly(stand_in, tmp_path):
    # CuPy copies a non-native byte order's raw bytes without swapping them (a Zarr v2
    # '>f4' array): the numpy stand-in would hide it, so the hand-over itself is checked
    X, y = offset_classes(n=900, p=6, k=3, offset=2e3, seed=15, separation=8.0)
    big = X.astype(">f4")
    handed = gpu._to_device(np, big[:5])
    assert handed.dtype.isnative
    assert np.array_equal(handed, X.astype(np.float32)[:5])
    assert_exact(accumulate(big, y, chunk_rows=250, kernel=gpu.KERNEL),
                 two_pass(X.astype(np.float32), y))
    model = sp.BoundaryProjector(chunk_rows=250).fit(X.astype(np.float32), y)
    with gpu.using("cuda"):
        Z = model.transform(big)
    assert rel_err(Z, model.transform(X.astype(np.float32))) < 1e-12


def test_rows_a_gpu_cannot_take_are_refused_before_reading(stand_in):
    X, y = offset_classes(n=60, p=3, k=2, offset=0.0, seed=16)
    wide = X.astype(np.longdouble)
    with pytest.raises(sp.InputError, match="X holds float128 values, which a GPU cannot take"):
        accumulate(wide, y, kernel=gpu.KERNEL)
    model = sp.BoundaryProjector().fit(X, y)
    with pytest.raises(sp.InputError, match="which a GPU cannot take"):
        sp.passes.project_blocks(sp.validation.as_dask_rows(wide), model.center_,
                                 model.components_, device="cuda")
    with gpu.using("cuda"), pytest.raises(sp.InputError, match="which a GPU cannot take"):
        model.transform(wide)
    assert model.transform(wide).shape == (60, model.components_.shape[0])  # the CPU takes them


class OutOfMemoryError(Exception):
    """Stands for CuPy's (its module is what marks an error as the GPU's)."""


OutOfMemoryError.__module__ = "cupy.cuda.memory"


def test_a_gpu_failure_mid_pass_is_one_line_and_writes_nothing(stand_in, tmp_path, capsys,
                                                                monkeypatch):
    X, y = offset_classes(n=400, p=4, k=2, offset=0.0, seed=17)
    write_zarr(tmp_path / "in.zarr", X, y, chunk_rows=150)

    def fail(*_args):
        msg = "out of memory allocating 1,073,741,824 bytes"
        raise OutOfMemoryError(msg)

    monkeypatch.setattr(gpu, "_class_sums_and_gram", fail)
    monkeypatch.setattr(gpu, "_centred_product", fail)
    assert main(["fit", str(tmp_path / "in.zarr"), "--model", str(tmp_path / "m"),
                 "--device", "cuda"]) == 2
    line = one_error_line(capsys)
    assert "the GPU failed: OutOfMemoryError: out of memory allocating" in line
    assert "--chunk-rows" in line
    assert not (tmp_path / "m").exists()
    assert main(["fit", str(tmp_path / "in.zarr"), "--model", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "in.zarr"), "--output",
                 str(tmp_path / "out.zarr"), "--device", "cuda"]) == 2
    assert "the GPU failed: OutOfMemoryError" in one_error_line(capsys)
    assert not (tmp_path / "out.zarr").exists()
    other = "not the GPU's"
    with pytest.raises(ValueError, match=other), gpu._device_errors():  # passed through as it is
        raise ValueError(other)


def test_the_device_kernel_is_the_devices_default_and_the_estimators(stand_in, monkeypatch):
    monkeypatch.setattr(gpu, "_DEVICE_BLOCK_BYTES", 8 * 5 * 64)  # another order than the CPU's
    X, y = offset_classes(n=1200, p=5, k=3, offset=100.0, seed=8, separation=5.0)
    calls = []
    real = gpu._centred_product
    monkeypatch.setattr(gpu, "_centred_product", lambda *a: calls.append(1) or real(*a))
    with gpu.using("cuda"):
        on_device = sp.BoundaryProjector(chunk_rows=500).fit(X, y)
        Z = on_device.transform(X)  # rows in memory go to the device too
        lazy = on_device.transform(da.from_array(X, chunks=500)).compute()
    assert len(calls) == 1 + 3  # one call in memory, one per dask chunk
    on_cpu = sp.BoundaryProjector(chunk_rows=500).fit(X, y)
    assert on_device.stats_.fingerprint() == accumulate(X, y, chunk_rows=500,
                                                        kernel=gpu.KERNEL).fingerprint()
    assert on_device.stats_.fingerprint() != on_cpu.stats_.fingerprint()  # another order
    assert rel_err(on_device.components_, on_cpu.components_) < 1e-10
    assert rel_err(Z, on_cpu.transform(X)) < 1e-10
    assert rel_err(lazy, on_cpu.transform(X)) < 1e-10
    assert gpu.current_device() == "cpu"  # the block's choice ends with it


# --------------------------------------------------------------- projection
@pytest.mark.parametrize("k", [2, 4])
def test_projection_on_the_device_equals_the_cpus(stand_in, tmp_path, k, monkeypatch):
    monkeypatch.setattr(gpu, "_DEVICE_BLOCK_BYTES", 8 * 6 * 128)  # several device blocks
    X, y = offset_classes(n=900, p=6, k=k, offset=5e3, seed=9, separation=10.0)
    X = X.astype(np.float32)
    model = sp.BoundaryProjector(chunk_rows=250).fit(X, y)
    jobs.project(model, X, tmp_path / "cpu.zarr", y=y)
    with gpu.using("cuda"):
        jobs.project(model, X, tmp_path / "gpu.zarr", y=y)
    cpu, dev = zarr.open_group(tmp_path / "cpu.zarr", mode="r"), zarr.open_group(tmp_path / "gpu.zarr", mode="r")
    for name in ("projection", "decision"):
        assert rel_err(dev[name][:], cpu[name][:]) < 1e-12, name
    assert np.array_equal(dev["predicted"][:], cpu["predicted"][:])


# ------------------------------------------------------------- no GPU here
def test_asking_for_a_gpu_where_there_is_none_is_one_clear_error(no_gpu):
    X, y = offset_classes(n=50, p=3, k=2, offset=0.0, seed=1)
    with pytest.raises(DeviceError, match="kernel=3 .*needs a GPU that CuPy can use"):
        accumulate(X, y, kernel=gpu.KERNEL)
    with pytest.raises(DeviceError, match="device='cuda' needs a GPU"), gpu.using("cuda"):
        pass
    with pytest.raises(DeviceError, match="device='tpu': expected one of 'cpu', 'cuda'"):
        gpu.check_device("tpu")
    model = sp.BoundaryProjector().fit(X, y)
    with pytest.raises(DeviceError, match="needs a GPU"):
        sp.passes.project_blocks(sp.validation.as_dask_rows(X), model.center_, model.components_,
                                 device="cuda")


def test_a_gpu_that_cannot_multiply_is_found_at_lookup_not_mid_pass(monkeypatch):
    # CuPy installed without the CUDA libraries sees the GPU but fails at its first product
    import sys
    import types

    class Rows:
        def __matmul__(self, other):
            msg = "libcublas.so.12: cannot open shared object file"
            raise ImportError(msg)

    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: 1)),
        ones=lambda shape: Rows())
    monkeypatch.setitem(sys.modules, "cupy", fake)
    module, why = gpu._lookup()
    assert module is None
    assert why == ("CuPy cannot compute on the GPU (ImportError: libcublas.so.12: cannot open "
                   "shared object file)")


def test_the_command_refuses_a_missing_gpu_before_reading_anything(no_gpu, tmp_path, capsys):
    X, y = offset_classes(n=200, p=3, k=2, offset=0.0, seed=2)
    write_zarr(tmp_path / "in.zarr", X, y)
    for argv in (["fit", str(tmp_path / "in.zarr"), "--model", str(tmp_path / "m"), "--device", "cuda"],
                 ["fit", str(tmp_path / "nowhere.zarr"), "--model", str(tmp_path / "m"), "--device", "cuda"]):
        assert main(argv) == 2
        line = one_error_line(capsys)
        assert "device='cuda' needs a GPU that CuPy can use" in line
        assert not (tmp_path / "m").exists()
    assert main(["fit", str(tmp_path / "in.zarr"), "--model", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    before = sorted(p.name for p in (tmp_path / "m").rglob("*"))
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "in.zarr"), "--output",
                 str(tmp_path / "out.zarr"), "--device", "cuda"]) == 2
    assert "needs a GPU" in one_error_line(capsys)
    assert not (tmp_path / "out.zarr").exists()
    assert sorted(p.name for p in (tmp_path / "m").rglob("*")) == before


# ------------------------------------------------------------------ ledger
def _batches(model_dir):
    path = next(model_dir.glob("v*/model.json"))
    return path, json.loads(path.read_text())


def test_the_ledger_records_device_batches_and_verify_sums_them_there(tmp_path, capsys,
                                                                       monkeypatch):
    X, y = offset_classes(n=3000, p=5, k=2, offset=40.0, seed=3)
    write_zarr(tmp_path / "a.zarr", X[:2000].astype(np.float32), y[:2000], chunk_rows=700)
    write_zarr(tmp_path / "b.zarr", X[2000:].astype(np.float32), y[2000:], chunk_rows=700)
    model = str(tmp_path / "m")
    with gpu.use_backend(np):
        assert main(["fit", str(tmp_path / "a.zarr"), "--model", model, "--device", "cuda"]) == 0
        assert main(["update", model, str(tmp_path / "b.zarr")]) == 0  # the CPU's kernel
        _, meta = _batches(tmp_path / "m")
        kernels = [b["kernel"] for s in meta["sources"] for b in s["batches"]]
        assert kernels == [gpu.KERNEL, stats_module.PASS1_KERNEL]
        # each batch re-summed as it was summed: unchanged
        assert main(["update", model, str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr"),
                     "--verify"]) == 0
        assert "model unchanged" in capsys.readouterr().out
        zarr.open_group(str(tmp_path / "a.zarr"), mode="r+")["X"][1500, 3] += 0.5
        assert main(["update", model, str(tmp_path / "a.zarr"), "--verify"]) == 2
        line = one_error_line(capsys)
        assert "rows 0..1999 of " in line
        assert "a.zarr/X" in line
        assert "have changed since" in line
        assert "summed on a GPU" in line
    # where no GPU is, a GPU batch cannot be summed again: said before any row is read, the
    # CPU's batches of another source given first included
    X2, y2 = offset_classes(n=1000, p=5, k=2, offset=40.0, seed=19)
    write_zarr(tmp_path / "c.zarr", X2.astype(np.float32), y2, chunk_rows=700)
    second = str(tmp_path / "m2")  # the CPU's batches (b) come before the GPU's (c) in order
    assert main(["fit", str(tmp_path / "b.zarr"), "--model", second]) == 0
    with gpu.use_backend(np):
        assert main(["update", second, str(tmp_path / "c.zarr"), "--device", "cuda"]) == 0
    capsys.readouterr()
    with gpu.use_backend(None):
        read = []
        real = jobs.accumulate
        monkeypatch.setattr(jobs, "accumulate", lambda *a, **k: read.append(1) or real(*a, **k))
        for m, given, gpu_source in ((model, ["a.zarr"], "a.zarr"),
                                     (second, ["b.zarr", "c.zarr"], "c.zarr")):
            assert main(["update", m, *(str(tmp_path / g) for g in given), "--verify"]) == 2
            line = one_error_line(capsys)
            assert (f"{gpu_source}/X were summed on a GPU (pass-1 kernel 3): verifying them "
                    "needs a GPU") in line
        assert read == []  # not even the CPU's batches of b were read again


def test_the_device_is_refused_before_a_cluster_is_reached(no_gpu, tmp_path, capsys, monkeypatch):
    X, y = offset_classes(n=100, p=3, k=2, offset=0.0, seed=18)
    write_zarr(tmp_path / "in.zarr", X, y)
    reached = []
    monkeypatch.setattr(jobs, "dask_cluster", lambda address: reached.append(address))
    assert main(["fit", str(tmp_path / "in.zarr"), "--model", str(tmp_path / "m"), "--device",
                 "cuda", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "needs a GPU that CuPy can use" in one_error_line(capsys)
    assert reached == []


# --------------------------------------------------------------- a real GPU
@needs_gpu
@pytest.mark.parametrize(("p", "k", "dtype"), [(7, 2, np.float32), (130, 3, np.float16),
                                                (1030, 5, np.float32), (40, 700, np.float64)])
def test_cupy_pass_1_matches_the_reference_and_repeats_its_bits(p, k, dtype):
    X, y = offset_classes(n=6000, p=p, k=k, offset=1e4, seed=11, separation=30.0)
    X = X.astype(dtype)
    got = accumulate(X, y, chunk_rows=2500, kernel=gpu.KERNEL)
    assert_exact(got, two_pass(X, y))
    again = accumulate(X, y, chunk_rows=2500, kernel=gpu.KERNEL)
    assert again.fingerprint() == got.fingerprint()  # what update --verify relies on


@needs_gpu
def test_cupy_takes_fortran_ordered_rows_and_wide_panels(monkeypatch):
    # a DataFrame's values are column-major; panels of 3 columns with a ragged last one
    small_panels(monkeypatch)
    X, y = offset_classes(n=3000, p=7, k=3, offset=1e3, seed=14, separation=20.0)
    X = np.asarray(X.astype(np.float32), order="F")
    assert_exact(accumulate(X, y, chunk_rows=900, kernel=gpu.KERNEL), two_pass(X, y))
    model = sp.BoundaryProjector().fit(X, y)
    calls = []
    real = gpu._centred_product
    monkeypatch.setattr(gpu, "_centred_product", lambda *a: calls.append(1) or real(*a))
    with gpu.using("cuda"):
        Z = model.transform(X)
        lazy = model.transform(da.from_array(X, chunks=(700, 7))).compute()
    assert len(calls) == 1 + 5  # the device did the work, in memory and chunk by chunk
    assert rel_err(Z, model.transform(X)) < 1e-12
    assert rel_err(lazy, model.transform(X)) < 1e-12


@needs_gpu
@pytest.mark.parametrize("detail", ["per_class", "fourth"])
def test_cupy_per_class_details_match_the_cpu(detail):
    X, y = offset_classes(n=4000, p=20, k=3, offset=1e3, seed=12, separation=10.0)
    cpu = accumulate(X, y, detail, chunk_rows=1500)
    dev = accumulate(X, y, detail, chunk_rows=1500, kernel=gpu.KERNEL)
    for name in ("within", "class_scatter", "comoment21", "comoment22"):
        if getattr(cpu, name) is not None:
            assert rel_err(getattr(dev, name), getattr(cpu, name)) < 1e-11, name


@needs_gpu
def test_cupy_projection_and_the_command(tmp_path, capsys):
    X, y = offset_classes(n=5000, p=64, k=3, offset=1e3, seed=13, separation=8.0)
    write_zarr(tmp_path / "in.zarr", X.astype(np.float32), y, chunk_rows=1200)
    model = str(tmp_path / "m")
    assert main(["fit", str(tmp_path / "in.zarr"), "--model", model, "--device", "cuda"]) == 0
    assert main(["project", model, str(tmp_path / "in.zarr"), "--output", str(tmp_path / "g.zarr"),
                 "--device", "cuda"]) == 0
    assert main(["project", model, str(tmp_path / "in.zarr"), "--output", str(tmp_path / "c.zarr")]) == 0
    assert main(["update", model, str(tmp_path / "in.zarr"), "--verify"]) == 0
    capsys.readouterr()
    g, c = (zarr.open_group(str(tmp_path / n), mode="r") for n in ("g.zarr", "c.zarr"))
    assert rel_err(g["projection"][:], c["projection"][:]) < 1e-12
    assert np.array_equal(g["predicted"][:], c["predicted"][:])
