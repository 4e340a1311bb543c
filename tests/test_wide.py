"""Wide data: the in-place Gram kernel, embedding inputs (float16, bfloat16) and the memory plan."""

import json

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import make_classes, offset_classes, one_error_line, two_pass, write_zarr

import streamproj as sp
from streamproj import gpu, jobs
from streamproj import stats as stats_module
from streamproj.cli import main
from streamproj.errors import InputError, InvalidParameterError, SummaryMemoryError
from streamproj.passes import accumulate
from streamproj.stats import (
    ClassStats,
    bfloat16_to_float32,
    chunk_nbytes,
    parse_memory,
    summary_nbytes,
)


def assert_close_to_reference(stats, ref, tol=1e-10):
    scale = np.abs(ref["within"]).max()
    assert np.abs(stats.within - ref["within"]).max() <= tol * scale
    assert np.abs((stats.means - ref["means"]) + stats.mean_residuals).max() <= tol * max(
        1.0, np.abs(ref["means"]).max())


# ------------------------------------------------------------------ the kernel
def small_panels(monkeypatch):
    """Send p = 7 down the wide path: panels of 3 columns (a ragged last one), several
    finishing column blocks."""
    monkeypatch.setattr(stats_module, "_PANEL_MIN_WIDTH", 2)
    monkeypatch.setattr(stats_module, "_GRAM_PANEL", 3)
    monkeypatch.setattr(stats_module, "_FINISH_COLUMNS", 3)


@pytest.mark.parametrize(("k", "separation"), [(2, 0.5), (3, 50.0), (80, 50.0)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_in_place_panel_kernel_matches_the_two_pass_reference(monkeypatch, k, separation, order):
    # a narrow threshold sends these small chunks down the wide (column panel) path, with
    # a shared shift, per-class shifts, and the sorted class sums of many classes; panels of
    # 3 columns leave a ragged last panel
    small_panels(monkeypatch)
    X, y = offset_classes(n=3000, p=7, k=k, offset=3e5, seed=3, separation=separation)
    X = np.asarray(X, order=order)
    s = ClassStats.from_rows(X, y)
    assert_close_to_reference(s, two_pass(X, y))
    assert np.array_equal(s.within, s.within.T)  # mirrored, so exactly symmetric


@pytest.mark.parametrize("rows", [1, 3, 1024])
@pytest.mark.parametrize("width", [stats_module._PANEL_MIN_WIDTH,
                                   stats_module._PANEL_MIN_WIDTH + 2 * stats_module._GRAM_PANEL + 7])
def test_each_panel_splits_off_its_diagonal_block_with_the_same_bits(rows, width):
    # the panel kernel multiplies the rows above each diagonal block (gemm) and the block
    # itself (syrk) apart: every upper entry must keep the bits of the one product over
    # [0, j1) that recorded summaries (kernel 2) were made with, or they stop verifying
    block = np.random.default_rng(rows).standard_normal((rows + 5, width))[5:, :]  # a view
    product = np.zeros((width, width), order="F")
    stats_module._add_gram(product, block, stats_module.gram_buffer(width))
    stats_module._add_gram(product, block[::-1], stats_module.gram_buffer(width))
    recorded = np.zeros((width, width), order="F")  # kernel 2 before the split, verbatim
    buffer = stats_module.gram_buffer(width)
    for part in (block, block[::-1]):
        for j0, j1 in stats_module._panel_bounds(width):
            out = buffer[: j1 * (j1 - j0)].reshape((j1, j1 - j0), order="F")
            np.matmul(part[:, :j1].T, part[:, j0:j1], out=out)
            recorded[:j1, j0:j1] += out
    assert np.array_equal(np.triu(product), np.triu(recorded))


def test_real_width_takes_the_panel_path_and_merges_stay_exact():
    width = stats_module._PANEL_MIN_WIDTH + 5
    X, y = make_classes(n=1300, p=width, k=3, seed=4, offset=1e3)
    parts = [ClassStats.from_rows(X[i:i + 500], y[i:i + 500]) for i in range(0, 1300, 500)]
    merged = parts[0] + parts[1] + parts[2]
    ref = two_pass(X, y)
    assert_close_to_reference(merged, ref, tol=1e-9)
    assert np.array_equal(merged.within, merged.within.T)


# ------------------------------------------------------ pass 1's partials
@pytest.mark.parametrize("k", [1, 3, 80])
def test_partials_kept_in_panels_merge_exactly(monkeypatch, k):
    # sorted labels: the 37-row chunks hold different classes, so their one-hot products
    # differ in width (and 80 classes take the sorted sums, no one-hot columns)
    small_panels(monkeypatch)
    X, y = offset_classes(n=700, p=7, k=k, offset=3e5, seed=5, separation=50.0)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    chunk = stats_module.partial_summary(X[:37], y[:37])
    assert isinstance(chunk.within, stats_module._UpperPanels)
    with dask.config.set(scheduler="threads", num_workers=1):
        one = accumulate(X, y, chunk_rows=37)
    with dask.config.set(scheduler="threads", num_workers=2):
        two = accumulate(X, y, chunk_rows=37)
    assert_close_to_reference(one, two_pass(X, y))
    assert isinstance(one.within, np.ndarray)
    assert np.array_equal(one.within, one.within.T)
    for name in ("counts", "means", "mean_residuals", "within"):
        assert np.array_equal(getattr(one, name), getattr(two, name))


def test_panels_hold_about_half_the_matrix():
    panels = stats_module._UpperPanels(4098)
    assert panels.buffer.nbytes <= 0.54 * 4098**2 * 8  # half, plus half a panel per column


@pytest.mark.parametrize("wide", [True, False])
def test_partials_merge_from_read_only_memory(monkeypatch, wide):
    # dask.distributed may hand a merge partials whose memory cannot be written
    if wide:
        small_panels(monkeypatch)
    X, y = offset_classes(n=300, p=7, k=3, offset=10.0, seed=6)
    partial = stats_module.partial_summary

    def frozen(stats):
        memory = stats.within.buffer if wide else stats.within
        memory.flags.writeable = False
        return stats

    a = stats_module.merge_partials(frozen(partial(X[:100], y[:100])), partial(X[100:], y[100:]))
    b = stats_module.merge_partials(partial(X[:100], y[:100]), partial(X[100:], y[100:]))
    a, b = stats_module.finish_partial(a), stats_module.finish_partial(b)
    assert np.array_equal(a.within, b.within)
    assert np.array_equal(a.within, stats_module.finish_partial(a).within)  # again: no change
    assert_close_to_reference(a, two_pass(X, y))


def test_a_bad_row_in_a_wide_chunk_is_named(monkeypatch):
    small_panels(monkeypatch)
    X, y = offset_classes(n=300, p=7, k=2, offset=0.0, seed=7)
    X[123, 4] = np.nan
    with pytest.raises(sp.errors.BadValuesError, match="123"):
        accumulate(X, y, chunk_rows=50)


def test_block_rows_grow_with_width_down_to_a_minimum():
    assert stats_module._block_rows(10**6, 100) == stats_module._BLOCK_BYTES // 800
    assert stats_module._block_rows(10**6, 2048) == stats_module._MIN_BLOCK_ROWS
    assert stats_module._block_rows(300, 4096) == 300


# --------------------------------------------------------------- embeddings
def test_product_blocks_are_taller_below_the_panel_width_from_kernel_2():
    # kernel 2 amortises the p×p temporary each block's product adds over 4,096 rows;
    # kernel 1 (batches recorded without a kernel) blocked by 1,024, as before
    rows = stats_module._gram_block_rows
    assert rows(10**6, 1002) == stats_module._MIN_PRODUCT_ROWS == 4096
    assert rows(10**6, 1002, kernel=1) == stats_module._MIN_BLOCK_ROWS == 1024
    assert rows(10**6, 102) == rows(10**6, 102, kernel=1) == stats_module._BLOCK_BYTES // 816
    assert rows(10**6, 2050) == rows(10**6, 2050, kernel=1) == 1024  # the panels: unchanged
    with pytest.raises(ValueError, match="unknown pass-1 kernel 4"):
        rows(10, 10, kernel=4)
    # refused before anything is read, as a parameter
    with pytest.raises(InvalidParameterError,
                       match=r"kernel=4: this streamproj sums pass 1 with kernel \[1, 2, 3\]"):
        accumulate(np.zeros((4, 2)), np.array([0, 0, 1, 1]), kernel=4)


def test_every_kernel_sums_exactly_and_each_reproduces_its_own_bits():
    X, y = offset_classes(6000, 150, 3, offset=1e5, seed=4)
    ref = two_pass(X, y)
    with gpu.use_backend(np):  # kernel 3's device code, with numpy standing in for CuPy
        got = {k: accumulate(X, y, chunk_rows=5000, kernel=k) for k in stats_module.PASS1_KERNELS}
    for stats in got.values():
        assert_close_to_reference(stats, ref)
    # the blocks differ (2,595 rows against 4,096), so the last bits do: a batch must be
    # verified with the kernel that summed it
    assert got[1].fingerprint() != got[2].fingerprint()
    assert accumulate(X, y, chunk_rows=5000, kernel=1).fingerprint() == got[1].fingerprint()


def _model_json(model_dir):
    return next(model_dir.glob("v*/model.json"))


def test_verify_sums_a_batch_recorded_before_kernels_as_it_was_summed(tmp_path, capsys):
    # A model merged by the code before kernel 2 holds fingerprints of kernel-1 sums and
    # no "kernel" in its ledger: --verify must re-sum them so, not call the rows changed.
    X, y = offset_classes(6000, 150, 2, offset=50.0, seed=5)
    write_zarr(tmp_path / "in.zarr", X.astype(np.float32), y, chunk_rows=5000)
    assert main(["fit", str(tmp_path / "in.zarr"), "--model", str(tmp_path / "m")]) == 0
    path = _model_json(tmp_path / "m")
    meta = json.loads(path.read_text())
    (batch,) = meta["sources"][0]["batches"]
    assert batch["kernel"] == stats_module.PASS1_KERNEL
    rows = zarr.open_group(str(tmp_path / "in.zarr"), mode="r")
    old = accumulate(rows["X"][:], rows["y"][:], chunk_rows=5000, kernel=1).fingerprint()
    assert old != batch["fingerprint"]
    del batch["kernel"]
    batch["fingerprint"] = old
    path.write_text(json.dumps(meta))
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "in.zarr"), "--verify"]) == 0
    assert "model unchanged" in capsys.readouterr().out
    # still a real check: one changed value in the middle is caught
    zarr.open_group(str(tmp_path / "in.zarr"), mode="r+")["X"][2500, 7] += 1.0
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "in.zarr"), "--verify"]) == 2
    assert "have changed since" in capsys.readouterr().err
    # a kernel from a newer streamproj is named, not guessed at
    batch["kernel"] = 99
    path.write_text(json.dumps(meta))
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "in.zarr"), "--verify"]) == 2
    assert "pass-1 kernel 99, which this streamproj does not know" in capsys.readouterr().err


def test_float16_rows_accumulate_exactly_as_their_float64_values():
    X, y = make_classes(n=2000, p=12, k=3, seed=5)
    X16 = X.astype(np.float16)
    a, b = ClassStats.from_rows(X16, y), ClassStats.from_rows(X16.astype(np.float64), y)
    for name in ("counts", "means", "mean_residuals", "within"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_float16_fit_matches_float64_of_the_same_values():
    X, y = make_classes(n=1500, p=8, k=2, seed=6)
    X16 = X.astype(np.float16)
    m16 = sp.BoundaryProjector().fit(X16, y)
    m64 = sp.BoundaryProjector().fit(X16.astype(np.float64), y)
    np.testing.assert_array_equal(m16.coef_, m64.coef_)
    np.testing.assert_array_equal(m16.stats_.within, m64.stats_.within)


def to_bfloat16_bits(X):
    """float32 values rounded toward zero to bfloat16, as their uint16 bit patterns."""
    return (np.asarray(X, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_bfloat16_decoding_is_exact():
    values = np.array([0.0, -0.0, 1.0, -2.5, 3.140625, 1e30, -1e-30, np.inf], dtype=np.float32)
    bits = to_bfloat16_bits(values)
    decoded = bfloat16_to_float32(bits)
    assert decoded.dtype == np.float32
    # every value above is a bfloat16 (its low 16 bits are zero) except 1e30 and -1e-30
    exact = (values.view(np.uint32) & 0xFFFF) == 0
    np.testing.assert_array_equal(decoded[exact], values[exact])
    assert np.all(np.abs(decoded[~exact] - values[~exact]) <= np.abs(values[~exact]) * 2**-7)


def test_bfloat16_rows_give_the_summary_and_model_of_their_values():
    X, y = make_classes(n=1800, p=10, k=3, seed=7, offset=5.0)
    bits = to_bfloat16_bits(X)
    values = bfloat16_to_float32(bits)
    a, b = ClassStats.from_rows(bits, y, bfloat16=True), ClassStats.from_rows(values, y)
    assert np.array_equal(a.within, b.within)
    assert np.array_equal(a.means, b.means)
    m = sp.BoundaryProjector(bfloat16=True, chunk_rows=500).fit(bits, y)
    ref = sp.BoundaryProjector(chunk_rows=500).fit(values, y)
    np.testing.assert_array_equal(m.coef_, ref.coef_)
    np.testing.assert_allclose(m.transform(bits), ref.transform(values), rtol=0, atol=1e-12)
    lazy = m.transform(da.from_array(bits, chunks=(400, -1)))
    np.testing.assert_allclose(lazy.compute(), ref.transform(values), rtol=0, atol=1e-12)
    assert (m.predict(bits) == ref.predict(values)).all()
    # off, uint16 rows are integers: a different model
    assert not np.allclose(sp.BoundaryProjector(chunk_rows=500).fit(bits, y).coef_, ref.coef_)


def test_bfloat16_needs_uint16_rows():
    X, y = make_classes(n=300, p=4, seed=8)
    with pytest.raises(InputError, match="bfloat16=True reads bfloat16 values stored as uint16"):
        sp.BoundaryProjector(bfloat16=True).fit(X.astype(np.float32), y)
    with pytest.raises(InputError, match="has dtype float32"):
        ClassStats.from_rows(X.astype(np.float32), y, bfloat16=True)


def test_bfloat16_through_the_command_line(tmp_path, capsys):
    X, y = make_classes(n=900, p=6, k=2, seed=9, offset=2.0)
    bits = to_bfloat16_bits(X)
    write_zarr(tmp_path / "in.zarr", bits, y, chunk_rows=200)
    assert main(["fit", str(tmp_path / "in.zarr"), "--model", str(tmp_path / "m"), "--bfloat16"]) == 0
    assert main(["project", str(tmp_path / "m"), str(tmp_path / "in.zarr"),
                 "--output", str(tmp_path / "out.zarr")]) == 0
    model = sp.load(tmp_path / "m")
    assert model.bfloat16
    ref = sp.BoundaryProjector().fit(bfloat16_to_float32(bits), y)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-10)
    coords = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")["projection"][:]
    np.testing.assert_allclose(coords, ref.transform(bfloat16_to_float32(bits)), atol=1e-9)
    # --verify re-reads the merged rows as bfloat16, as the merge read them
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "in.zarr"), "--verify"]) == 0
    zarr.open_group(str(tmp_path / "in.zarr"), mode="r+")["X"][450, 2] = bits[450, 2] + 1
    assert main(["update", str(tmp_path / "m"), str(tmp_path / "in.zarr"), "--verify"]) == 2
    assert "have changed since" in capsys.readouterr().err


def test_a_bfloat16_model_and_a_plain_one_do_not_merge(tmp_path, capsys):
    # merged (with a warning), the plain model's update of the bfloat16 model's grown source
    # read its uint16 bit patterns as integers: class means of 7,500, the boundary turned
    # 99.8 degrees, exit 0
    X, y = make_classes(n=600, p=3, k=2, seed=10)
    bits = to_bfloat16_bits(X)
    write_zarr(tmp_path / "a.zarr", X[:300], y[:300])
    write_zarr(tmp_path / "u.zarr", bits[300:], y[300:])
    assert main(["fit", str(tmp_path / "a.zarr"), "--model", str(tmp_path / "m")]) == 0
    assert main(["fit", str(tmp_path / "u.zarr"), "--model", str(tmp_path / "mu"), "--bfloat16"]) == 0
    capsys.readouterr()
    for mine, other, how in (("m", "mu", "as bfloat16 (uint16 bit patterns, bfloat16=True) but"),
                             ("mu", "m", "as the numbers stored (bfloat16=False) but")):
        assert main(["merge", str(tmp_path / mine), str(tmp_path / other)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        assert f"model {tmp_path / other} reads its sources {how} {tmp_path / mine}" in err[0]
        assert sp.load(tmp_path / mine).meta_["version"] == "v000001"
    # a bfloat16 model of rows given in Python has no sources to read again: it merges exactly
    sp.BoundaryProjector(bfloat16=True).fit(bits[300:], y[300:]).save(tmp_path / "py")
    with pytest.warns(sp.StreamprojWarning, match="was fitted with bfloat16=True"):
        jobs.merge_models(tmp_path / "m", [tmp_path / "py"])
    assert sp.load(tmp_path / "m").stats_.n_samples == 600


# -------------------------------------------------------------- memory plan
def test_summary_sizes():
    p, k = 4096, 10
    assert summary_nbytes(p, k, "pooled") == 8 * (p * p + 2 * k * p + k)
    assert summary_nbytes(p, k, "per_class") - summary_nbytes(p, k, "pooled") == 8 * k * p * p
    assert summary_nbytes(p, k, "fourth") - summary_nbytes(p, k, "pooled") == 8 * 3 * k * p * p
    real = ClassStats.from_rows(*make_classes(n=300, p=9, k=3, seed=1), detail="fourth")
    held = sum(a.nbytes for a in (real.counts, real.means, real.mean_residuals, real.within,
                                  real.class_scatter, real.comoment21, real.comoment22))
    assert summary_nbytes(9, 3, "fourth") == held
    assert chunk_nbytes(100, 2, "pooled", 10_000, itemsize=4) >= 10_000 * 100 * 4 + 8 * 102 * 102
    # wide chunks hold their product's upper triangle in panels, and the plan counts those
    assert stats_module._product_nbytes(4096, 4098) == stats_module._UpperPanels(4098).buffer.nbytes
    assert chunk_nbytes(4096, 2, "pooled", 10_000, 2) >= 10_000 * 4096 * 2 + 0.5 * 8 * 4098**2


@pytest.mark.parametrize(("text", "expected"), [
    (123, 123), ("123", 123), ("2GB", 2 * 10**9), ("2 gb", 2 * 10**9), ("512MiB", 512 * 2**20),
    ("1.5G", 1.5e9), ("1e9", 10**9), ("64kB", 64_000),
])
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("bad", ["lots", "0", "-1GB", "2XB", True, "nan"])
def test_parse_memory_refuses_nonsense(bad):
    with pytest.raises(InputError, match="max_summary_memory must be a number of bytes"):
        parse_memory(bad)


def test_default_budget_is_a_fraction_of_this_machine():
    from streamproj.passes import default_memory_budget

    assert parse_memory(None) is None  # the caller's default applies
    budget = default_memory_budget()
    assert budget is None or budget > 2**20


def test_pooled_summary_over_budget_is_refused_before_reading(one_worker):
    X, y = make_classes(n=400, p=300, k=2, seed=2)
    # 300² float64 = 720 kB: a 500 kB budget cannot hold it
    with pytest.raises(SummaryMemoryError, match=r"'pooled' summary of 300 features .* "
                                                 r"max_summary_memory=500 kB"):
        sp.BoundaryProjector(max_summary_memory="500kB").fit(X, y)
    sp.BoundaryProjector(max_summary_memory="50MB").fit(X, y)


@pytest.fixture
def one_worker():
    with dask.config.set(num_workers=1):  # the plan counts the chunks in flight
        yield


def need(p, k, detail, rows, itemsize=8):
    return summary_nbytes(p, k, detail) + chunk_nbytes(p, k, detail, rows, itemsize)


def test_auto_shrinkage_over_budget_suggests_the_pooled_detail(one_worker):
    X, y = make_classes(n=2000, p=60, k=10, seed=3)  # in memory: one chunk, K known before
    budget = (need(60, 10, "pooled", 2000) + need(60, 10, "fourth", 2000)) // 2
    with pytest.raises(SummaryMemoryError, match="'fourth' summary of 60 features and 10 classes.*"
                                                 "the pooled detail .* float shrinkage"):
        sp.BoundaryProjector(shrinkage="auto", max_summary_memory=budget).fit(X, y)
    sp.BoundaryProjector(shrinkage=0.1, max_summary_memory=budget).fit(X, y)


def test_lazy_labels_are_checked_by_the_chunks_before_allocating(one_worker):
    # K is unknown before reading lazy labels: the plan uses 2, a chunk meets all 10
    X, y = make_classes(n=2000, p=60, k=10, seed=4)
    budget = need(60, 2, "fourth", 500) + 1000
    assert budget < need(60, 10, "fourth", 500)
    with pytest.raises(SummaryMemoryError, match="60 features and 10 classes"):
        accumulate(da.from_array(X, chunks=(500, -1)), da.from_array(y, chunks=500), "fourth",
                   max_summary_memory=budget)


def test_merges_check_the_union_of_the_classes(one_worker):
    # sorted labels: a chunk holds one or two of the 10 classes, a merge of four many more
    X, y = make_classes(n=2000, p=60, k=10, seed=5)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    budget = 10**6
    assert need(60, 2, "fourth", 200) <= budget < 3 * summary_nbytes(60, 4, "fourth")
    with pytest.raises(SummaryMemoryError, match="merging chunk summaries"):
        accumulate(da.from_array(X, chunks=(200, -1)), da.from_array(y, chunks=200), "fourth",
                   max_summary_memory=budget)
    accumulate(da.from_array(X, chunks=(200, -1)), da.from_array(y, chunks=200), "pooled",
               max_summary_memory=budget)


def test_parameter_is_not_saved_with_the_model(tmp_path):
    X, y = make_classes(n=300, p=4, seed=6)
    m = sp.BoundaryProjector(max_summary_memory="1GB", bfloat16=False).fit(X, y)
    m.save(tmp_path / "m")
    loaded = sp.load(tmp_path / "m")
    assert loaded.max_summary_memory is None
    assert loaded.bfloat16 is False


@pytest.mark.parametrize("command", ["fit", "update", "run"])
def test_command_line_refuses_with_one_line_and_writes_nothing(tmp_path, capsys, command):
    X, y = make_classes(n=400, p=300, k=2, seed=7)
    write_zarr(tmp_path / "in.zarr", X, y, chunk_rows=100)
    model = tmp_path / "m"
    if command == "update":
        write_zarr(tmp_path / "old.zarr", X[:10], y[:10], chunk_rows=100)
        assert main(["fit", str(tmp_path / "old.zarr"), "--model", str(model),
                     "--shrinkage", "0.1"]) == 0
        capsys.readouterr()
        before = sorted(p.name for p in model.rglob("*"))
        argv = ["update", str(model), str(tmp_path / "in.zarr")]
    elif command == "fit":
        argv = ["fit", str(tmp_path / "in.zarr"), "--model", str(model)]
    else:
        config = tmp_path / "job.toml"
        config.write_text(f'[input]\npath = "{tmp_path / "in.zarr"}"\n[model]\npath = "{model}"\n'
                          f'mode = "fit"\n[output]\npath = "{tmp_path / "out.zarr"}"\n')
        argv = ["run", str(config)]
    assert main([*argv, "--max-summary-memory", "500kB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("streamproj: error: ")
    assert "max_summary_memory=500 kB" in err[0]
    assert "--max-summary-memory" in err[0]
    if command == "update":
        assert sorted(p.name for p in model.rglob("*")) == before
    else:
        assert not model.exists() or not any(model.iterdir())
    assert not (tmp_path / "out.zarr").exists()


def test_command_line_refuses_a_bad_size(tmp_path, capsys):
    X, y = make_classes(n=100, p=3, seed=8)
    write_zarr(tmp_path / "in.zarr", X, y)
    # the estimator checks it (the one place), before any row is read; the error names the flag
    assert main(["fit", str(tmp_path / "in.zarr"), "--model", str(tmp_path / "m"),
                 "--max-summary-memory", "lots"]) == 2
    assert not (tmp_path / "m").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--max-summary-memory must be a number of bytes" in err[0]


def test_bfloat16_outputs_of_three_classes_decide_on_the_values(tmp_path):
    # K > 2 decisions and predicted classes are computed from the rows' values, not from
    # their uint16 bit patterns (they were: the decisions were off by 9e5)
    import zarr

    from streamproj import jobs

    X, y = make_classes(n=900, p=6, k=3, seed=12, offset=2.0)
    bits = to_bfloat16_bits(X)
    values = bfloat16_to_float32(bits)
    m = sp.BoundaryProjector(bfloat16=True, chunk_rows=200).fit(bits, y)
    ref = sp.BoundaryProjector(chunk_rows=200).fit(values, y)
    jobs.project(m, da.from_array(bits, chunks=(200, -1)), tmp_path / "out.zarr", y=y)
    group = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    expected = ref.decision_function(values)
    np.testing.assert_allclose(group["decision"][:], expected, rtol=0,
                               atol=1e-12 * np.abs(expected).max())
    assert (group["predicted"][:] == ref.predict(values)).all()


def test_bfloat16_rows_in_the_pca_panel():
    from streamproj.plot.picture import _pca_panel
    from streamproj.plot.reading import ClassMap

    X, y = make_classes(n=900, p=6, k=3, seed=13, offset=2.0)
    bits = to_bfloat16_bits(X)
    values = bfloat16_to_float32(bits)
    m = sp.BoundaryProjector(bfloat16=True).fit(bits, y)
    ref = sp.BoundaryProjector().fit(values, y)
    cm = ClassMap(np.unique(y))
    a = _pca_panel(m, bits, y, cm, "raw", 60)
    b = _pca_panel(ref, values, y, cm, "raw", 60)
    assert a.note == b.note  # the same disagreement with the classifier, rows outside
    np.testing.assert_array_equal(a.grid, b.grid)


def test_bfloat16_carries_over_to_the_qda_model():
    X, y = make_classes(n=900, p=5, k=3, seed=14, offset=2.0)
    bits = to_bfloat16_bits(X)
    values = bfloat16_to_float32(bits)
    qda = sp.BoundaryProjector(bfloat16=True, keep_class_scatter=True).fit(bits, y).to_qda()
    assert qda.bfloat16
    ref = sp.StreamingQDA().fit(values, y)
    np.testing.assert_allclose(qda.predict_proba(bits), ref.predict_proba(values), rtol=1e-12,
                               atol=1e-14)
    assert (sp.StreamingQDA(bfloat16=True).fit(bits, y).predict(bits) == ref.predict(values)).all()


def test_a_bfloat16_model_decodes_its_updates_and_refuses_decoded_rows(tmp_path, capsys):
    # the README: the saved model remembers --bfloat16, so update decodes the raw uint16 rows
    # the same way, and float rows given to it are refused in one line
    X, y = make_classes(n=1200, p=6, k=3, seed=15, offset=2.0)
    bits = to_bfloat16_bits(X)
    write_zarr(tmp_path / "a.zarr", bits[:600], y[:600], chunk_rows=200)
    write_zarr(tmp_path / "b.zarr", bits[600:], y[600:], chunk_rows=200)
    write_zarr(tmp_path / "floats.zarr", bfloat16_to_float32(bits[600:]), y[600:], chunk_rows=200)
    m = str(tmp_path / "m")
    assert main(["fit", str(tmp_path / "a.zarr"), "--model", m, "--bfloat16"]) == 0
    assert main(["update", m, str(tmp_path / "b.zarr")]) == 0
    ref = sp.BoundaryProjector().fit(bfloat16_to_float32(bits), y)
    np.testing.assert_allclose(sp.load(m).coef_, ref.coef_, rtol=1e-10)
    capsys.readouterr()
    assert main(["update", m, str(tmp_path / "floats.zarr")]) == 2
    assert "bfloat16" in one_error_line(capsys)
    np.testing.assert_allclose(sp.load(m).coef_, ref.coef_, rtol=1e-10)  # untouched
    # project too: float rows read as bit patterns were written as other numbers (exit 0);
    # small whole numbers too, which no check for non-finite values catches
    write_zarr(tmp_path / "small.zarr", np.arange(600 * 6).reshape(600, 6) % 5.0, y[600:],
               chunk_rows=200)
    for name in ("floats.zarr", "small.zarr"):
        assert main(["project", m, str(tmp_path / name), "--output", str(tmp_path / "o.zarr")]) == 2
        assert "but bfloat16=True reads bfloat16 values" in one_error_line(capsys)
        assert not (tmp_path / "o.zarr").exists()


def test_the_memory_plan_refuses_in_one_line_on_the_command_line(tmp_path, capsys):
    X, y = make_classes(n=900, p=60, k=2, seed=16)
    write_zarr(tmp_path / "e.zarr", X.astype(np.float16), y, chunk_rows=300)
    status = main(["fit", str(tmp_path / "e.zarr"), "--model", str(tmp_path / "m"),
                   "--shrinkage", "auto", "--max-summary-memory", "100kB"])
    assert status == 2
    line = one_error_line(capsys)
    assert "more than max_summary_memory=100 kB" in line
    # the labels are not read yet: the plan counts two classes and says so
    assert "summary of 60 features and at least 2 classes needs" in line
    assert "pooled detail" in line
    assert "--max-summary-memory" in line
    assert not (tmp_path / "m").exists()
