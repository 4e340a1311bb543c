"""The model record (streamproj.record): made and read by the estimator, stored by the store."""

import dataclasses
import re

import numpy as np
import pytest
import zarr
from conftest import make_classes, write_zarr
from sklearn.linear_model import LogisticRegression

import streamproj as sp
from streamproj import jobs, store
from streamproj.errors import InputError, NotFittedError, SingularScatterError
from streamproj.record import PARAMETERS, ModelRecord


@pytest.fixture(scope="module")
def fitted():
    X, y = make_classes(n=300, p=4, k=3, seed=41)
    return sp.BoundaryProjector(n_components=2, shrinkage=0.1).fit(X, y), X


def test_to_state_is_pure_and_frozen(fitted):
    model, _ = fitted
    a, b = model.to_state(), model.to_state()
    assert a.meta == b.meta  # no clock, no file: the same model gives the same record
    assert "saved" not in a.meta
    assert "version" not in a.meta
    assert a.params["shrinkage"] == 0.1
    assert a.meta["classes"] == [0, 1, 2]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.meta = {}
    assert a.stats is model.stats_
    np.testing.assert_array_equal(a.solution["components"], model.components_)


def test_with_meta_makes_a_new_record(fitted):
    record = fitted[0].to_state()
    grown = record.with_meta(sources=[{"url": "a.zarr"}], history=[{"event": "fit"}])
    assert grown.sources == [{"url": "a.zarr"}]
    assert grown.history == [{"event": "fit"}]
    assert record.sources == []
    assert record.history == []
    assert "sources" not in record.meta


def test_from_state_gives_the_same_model(fitted):
    model, X = fitted
    back = sp.BoundaryProjector.from_state(model.to_state())
    np.testing.assert_allclose(back.transform(X), model.transform(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(back.predict(X), model.predict(X))
    assert back.get_params() == {**model.get_params(), "progress": False}


def _spy_lda(monkeypatch):
    from streamproj import solvers

    seen, real = [], solvers.lda

    def lda(*args, **kwargs):
        seen.append(kwargs.get("check_singular", True))
        return real(*args, **kwargs)

    monkeypatch.setattr(solvers, "lda", lda)
    return seen


def test_loading_its_own_record_skips_only_the_singularity_test(fitted, monkeypatch, tmp_path):
    model, X = fitted
    seen = _spy_lda(monkeypatch)
    back = sp.BoundaryProjector.from_state(model.to_state())
    np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))
    with store.model_lock(tmp_path / "m"):  # and after a round trip through the store
        store.write_record(tmp_path / "m", model.to_state())
    again = sp.load(tmp_path / "m")
    assert seen == [False]  # solved on first use, not on load
    np.testing.assert_array_equal(again.decision_function(X), model.decision_function(X))
    assert seen == [False, False]


def test_a_loaded_model_solves_its_lda_on_first_use_only(fitted):
    model, X = fitted
    back = sp.BoundaryProjector.from_state(model.to_state())
    assert "covariance_" not in vars(back)  # not solved yet ...
    for name in ("priors_", "means_", "covariance_", "scalings_"):  # ... and exactly the fit's
        np.testing.assert_array_equal(getattr(back, name), getattr(model, name))
    assert "_deferred_lda" not in vars(back)
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))
    with pytest.raises(AttributeError, match="no attribute 'nothing_'"):
        back.nothing_  # noqa: B018 - other names are still missing
    # parameters set after loading change nothing until a refit, solved or not (as scikit-learn's)
    late = sp.BoundaryProjector.from_state(model.to_state()).set_params(shrinkage=0.9,
                                                                          priors=[0.1, 0.1, 0.8])
    np.testing.assert_array_equal(late.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(late.predict_proba(X), model.predict_proba(X))


def test_a_loaded_model_survives_pickling_and_threads_unsolved(fitted, monkeypatch):
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    model, X = fitted
    back = pickle.loads(pickle.dumps(sp.BoundaryProjector.from_state(model.to_state())))
    seen = _spy_lda(monkeypatch)
    with ThreadPoolExecutor(4) as pool:  # four threads ask at once: one solve
        got = list(pool.map(lambda _: back.decision_function(X), range(4)))
    assert seen == [False]
    for g in got:
        np.testing.assert_array_equal(g, model.decision_function(X))


def test_projecting_two_classes_from_a_saved_model_solves_nothing(monkeypatch, tmp_path):
    X, y = make_classes(n=400, p=5, k=2, seed=7)
    write_zarr(tmp_path / "in.zarr", X, y, chunk_rows=150)
    jobs.fit_model([str(tmp_path / "in.zarr")], tmp_path / "m")
    seen = _spy_lda(monkeypatch)
    jobs.project_model(tmp_path / "m", [str(tmp_path / "in.zarr")], tmp_path / "out.zarr")
    assert seen == []  # the stored axes and boundary are all a projection of two classes needs
    out = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    model = sp.load(tmp_path / "m")
    np.testing.assert_allclose(out["decision"][:], model.decision_function(X), rtol=1e-12)
    np.testing.assert_array_equal(out["predicted"][:], model.predict(X))
    assert seen == [False]


def test_another_versions_or_an_edited_record_is_tested_again(fitted, monkeypatch):
    model, X = fitted
    seen = _spy_lda(monkeypatch)
    meta, stats, solution = model.to_state()
    old = {k: v for k, v in meta.items() if k != "singularity_test"}  # as 0.1 wrote them
    sp.BoundaryProjector.from_state(ModelRecord(old, stats, solution))
    assert seen == [True]
    # summaries swapped for numerically singular ones (a column that nearly repeats another):
    # the record's model_id no longer matches, so the test runs and refuses them
    y = model.predict(X)
    meta, _, solution = sp.BoundaryProjector().fit(X, y).to_state()  # no shrinkage
    bad = np.asarray(X, dtype=np.float64).copy()
    bad[:, -1] = bad[:, 0] + 1e-9 * np.random.default_rng(0).standard_normal(bad.shape[0])
    edited = sp.BoundaryProjector.from_state(ModelRecord(meta, sp.ClassStats.from_rows(bad, y),
                                                          solution))
    with pytest.raises(SingularScatterError, match="smallest eigenvalue"):
        edited.decision_function(X)  # the LDA is solved (and tested) on first use
    assert "singularity_test" not in edited.to_state().meta  # nor vouched for when saved


def test_an_edited_singular_record_of_three_classes_names_its_axes_and_says_why_it_fails(fitted):
    # K > 2: the axes' names must not need the deferred LDA (they once solved it and raised);
    # what does need it says the record was edited, not only that the scatter is singular
    model, X = fitted
    meta, _, solution = sp.BoundaryProjector(n_components=2).fit(X, model.predict(X)).to_state()
    bad = np.asarray(X, dtype=np.float64).copy()
    bad[:, -1] = bad[:, 0] + 1e-9 * np.random.default_rng(1).standard_normal(bad.shape[0])
    edited = sp.BoundaryProjector.from_state(
        ModelRecord(meta, sp.ClassStats.from_rows(bad, model.predict(X)), solution))
    assert edited.get_feature_names_out().tolist() == ["lda1", "lda2"]
    np.testing.assert_array_equal(edited.transform(X), (X - solution["center"]) @ solution["components"].T)
    with pytest.raises(SingularScatterError, match=r"record was changed after it was saved.*"
                                                  r"smallest eigenvalue"):
        edited.predict(X)
    with pytest.raises(SingularScatterError, match="asked for priors_"):
        edited.priors_  # noqa: B018


def test_a_records_parameters_are_the_estimators():
    # the store refuses a model.json naming another parameter (it gave a TypeError traceback)
    assert set(sp.BoundaryProjector().get_params(deep=False)) == PARAMETERS


def test_records_of_every_kind_of_fit_are_consistent():
    # what the store checks on reading must pass every record the estimator writes
    X, y = make_classes(n=300, p=4, k=3, seed=47)
    two = y < 2
    names = np.array(["b", "a"])[y % 2]
    models = [
        sp.BoundaryProjector().fit(X, y),
        sp.BoundaryProjector(n_components=1).fit(X, y % 2),
        sp.BoundaryProjector().partial_fit(X[two], y[two], classes=[0, 1, 2]),
        sp.BoundaryProjector().partial_fit(X, y, classes=[0, 1, 2, 3]),
        sp.BoundaryProjector(boundary=(np.ones(4), 0.5)).fit(X, y % 2),
        sp.BoundaryProjector(boundary={"coef": np.ones(4), "intercept": 0.5,
                                       "classes": np.array(["b", "a"])}).fit(X, names),
        sp.BoundaryProjector().fit(X, names.astype("S")),
        # a given boundary of K rows (a K-class classifier's), K = 3: it was refused as damaged
        sp.BoundaryProjector(boundary=LogisticRegression().fit(X, y)).fit(X, y),
        sp.BoundaryProjector(keep_class_scatter=True).fit(X, y),
    ]
    for model in models:
        assert model.to_state().fault() is None, model


def test_unfitted_model_has_no_record():
    with pytest.raises(NotFittedError):
        sp.BoundaryProjector().to_state()


def test_the_store_writes_and_reads_records_both_ways(fitted, tmp_path):
    model, X = fitted
    # a record written by the store reads back as the older (meta, stats, solution) tuple ...
    with store.model_lock(tmp_path / "a"):
        assert store.write_record(tmp_path / "a", model.to_state()) == "v000001"
    meta, stats, solution = store.read_model(tmp_path / "a")
    assert meta["version"] == "v000001"
    assert "saved" in meta
    assert sp.BoundaryProjector.from_saved(meta, stats, solution).predict(X).tolist() == \
        model.predict(X).tolist()
    # ... and a model written the older way (to_meta + write_model) reads as a record
    with store.model_lock(tmp_path / "b"):
        store.write_model(tmp_path / "b", model.to_meta(), model.stats_, model.to_state().solution)
    record = store.read_record(tmp_path / "b")
    assert isinstance(record, ModelRecord)
    assert record.version == "v000001"
    np.testing.assert_allclose(sp.BoundaryProjector.from_state(record).transform(X),
                               model.transform(X), rtol=1e-12, atol=1e-12)


def test_jobs_keep_the_ledger_in_the_record(tmp_path):
    X, y = make_classes(n=200, p=3, seed=42)
    write_zarr(tmp_path / "a.zarr", X[:100], y[:100])
    write_zarr(tmp_path / "b.zarr", X[100:], y[100:])
    jobs.fit_model(tmp_path / "a.zarr", tmp_path / "m")
    jobs.update_model(tmp_path / "m", [tmp_path / "b.zarr"])
    record = store.read_record(tmp_path / "m")
    assert [s["url"].rsplit("/", 1)[-1] for s in record.sources] == ["a.zarr", "b.zarr"]
    assert [h["event"] for h in record.history] == ["fit", "update"]
    assert record.stats.n_samples == 200


def test_a_loaded_model_updated_in_memory_no_longer_claims_its_saved_version(tmp_path):
    X, y = make_classes(n=300, p=4, seed=43)
    with store.model_lock(tmp_path / "m"):
        store.write_record(tmp_path / "m", sp.BoundaryProjector().fit(X[:150], y[:150]).to_state())
    model = sp.load(tmp_path / "m")
    assert model.meta_["version"] == "v000001"
    model.partial_fit(X[150:], y[150:])
    assert not hasattr(model, "meta_")
    jobs.project(model, X, tmp_path / "out.zarr")
    group = store.open_output(tmp_path / "out.zarr")
    attrs = group.attrs["streamproj"]
    meta, _, _ = store.read_output_frame(group)
    assert attrs["model_id"] == meta["model_id"] == model.model_id_
    assert attrs["model_version"] is None


def test_declared_classes_without_rows_and_their_priors_survive_a_record(tmp_path):
    X, y = make_classes(n=300, p=4, k=3, seed=44)
    two = y < 2
    model = sp.BoundaryProjector(priors=[0.2, 0.3, 0.5]).partial_fit(X[two], y[two],
                                                                     classes=[0, 1, 2])
    back = sp.BoundaryProjector.from_state(model.to_state())
    np.testing.assert_array_equal(back.classes_, [0, 1, 2])
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))
    # the class without rows arrives later: both models take it the same way
    model.partial_fit(X[~two], y[~two])
    back.partial_fit(X[~two], y[~two])
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))


def test_a_label_outside_the_declared_classes_is_refused_after_a_load():
    # summaries merged into a loaded model (the update and merge jobs) meet the same check
    # as partial_fit: otherwise classes_ kept [0, 1, 2] while the summaries held 0, 1 and 3
    X, y = make_classes(n=400, p=4, k=4, seed=45)
    two = y < 2
    model = sp.BoundaryProjector().partial_fit(X[two], y[two], classes=[0, 1, 2])
    back = sp.BoundaryProjector.from_state(model.to_state())
    new = sp.ClassStats.from_rows(X[y == 3], y[y == 3])
    for m in (model, back):
        with pytest.raises(InputError, match="label 3, which is not among the classes"):
            m.partial_fit_stats(new)


def test_declared_classes_all_with_rows_survive_save_and_load(tmp_path):
    # classes_ equals the rows' classes here, so only the stored declaration tells a loaded
    # model that classes=[0, 1, 2] fixed the label set (it merged label 7 silently)
    X, y = make_classes(n=300, p=3, k=3, seed=46)
    model = sp.BoundaryProjector().partial_fit(X, y, classes=[0, 1, 2])
    model.save(tmp_path / "m")
    back = sp.load(tmp_path / "m")
    with pytest.raises(InputError, match="label 7, which is not among the classes"):
        back.partial_fit(X[:5], np.full(5, 7))
    np.testing.assert_array_equal(back.classes_, [0, 1, 2])
    # a record written before the declaration was stored keeps its behaviour: no label set
    meta, stats, solution = model.to_state()
    del solution["declared_classes"]
    old = sp.BoundaryProjector.from_state(ModelRecord(meta, stats, solution))
    old.partial_fit(X[:5], np.full(5, 7))
    np.testing.assert_array_equal(old.classes_, [0, 1, 2, 7])


def test_a_frame_written_compressed_reads_as_the_uncompressed_one(tmp_path):
    # Frames are written uncompressed since 2026-11-25; outputs written before hold zstd
    # frame arrays, which must still give the same record, byte for byte.
    import warnings

    import zarr

    X, y = make_classes(n=300, p=5, seed=45)
    model = sp.BoundaryProjector().fit(X, y)
    jobs.project(model, X, tmp_path / "out.zarr")
    frame = zarr.open_group(str(tmp_path / "out.zarr" / "frame"), mode="r+")
    assert all(not frame[name].compressors for name in ("stats", "solution"))
    before = store.read_output_frame(store.open_output(tmp_path / "out.zarr"))
    for name in ("stats", "solution"):
        raw = frame[name][:]
        del frame[name]
        arr = frame.create_array(name, shape=raw.shape, chunks=raw.shape, dtype=np.uint8,
                                 dimension_names=(f"frame_{name}_bytes",))
        arr[:] = raw
        assert arr.compressors
    with warnings.catch_warnings():  # "consolidated metadata is not in the v3 spec"
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(tmp_path / "out.zarr"))  # as the output was written then
    after = store.read_output_frame(store.open_output(tmp_path / "out.zarr"))
    assert after.meta == before.meta
    assert after.stats.fingerprint() == before.stats.fingerprint()
    for key in before.solution:
        np.testing.assert_array_equal(after.solution[key], before.solution[key])
    assert sp.BoundaryProjector.from_state(after).model_id_ == model.model_id_


def test_a_damaged_summary_in_an_output_frame_is_named(tmp_path):
    # a NaN summary in the frame was read as the output's model: its projections then moved
    stats = sp.ClassStats(np.array([0, 1]), np.array([5, 5]), np.zeros((2, 2)),
                          np.full((2, 2), np.nan))
    solution = {"components": np.eye(2), "center": np.zeros(2), "coef": np.ones((1, 2)),
                "intercept": np.zeros(1), "classes": np.array([0, 1])}
    group = zarr.open_group(str(tmp_path / "out.zarr"), mode="w")
    store.write_output_frame(group, ModelRecord({"model_id": "m"}, stats, solution))
    with pytest.raises(InputError, match=re.escape(
            "o.zarr/frame/stats is damaged: its 'within' holds NaN or infinity; rewrite the output")):
        store.read_output_frame(group, "o.zarr")


def test_writing_an_output_frame_copies_its_summary_little(tmp_path, monkeypatch):
    # Zarr copies a chunk it writes about five times: the frame's NPZ goes in small chunks,
    # so writing it peaks near the NPZ itself (one chunk peaked at 6x the summary).
    import tracemalloc

    import zarr

    monkeypatch.setattr(store, "_FRAME_CHUNK", 2**14)
    rng = np.random.default_rng(46)
    p = 600
    within = np.asfortranarray(rng.standard_normal((p, p)))
    stats = sp.ClassStats(np.array([0, 1]), np.array([5, 5]), rng.standard_normal((2, p)), within)
    solution = {"components": rng.standard_normal((2, p)), "center": np.zeros(p),
                "coef": np.ones((1, p)), "intercept": np.zeros(1), "classes": np.array([0, 1])}
    group = zarr.open_group(str(tmp_path / "out.zarr"), mode="w")
    tracemalloc.start()
    try:
        store.write_output_frame(group, ModelRecord({"model_id": "m"}, stats, solution))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * within.nbytes, peak / within.nbytes
    assert group["frame/stats"].chunks == (2**14,)
    back = store.read_output_frame(group)
    assert back.stats.fingerprint() == stats.fingerprint()
    np.testing.assert_array_equal(back.solution["components"], solution["components"])
