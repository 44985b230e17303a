"""msnb reads MindSpore's own summaries value for value, as MindSpore's summary_pb2 decodes them."""

import hashlib
import json
import math

import numpy as np
import pytest

import msnb
from msnb.events import NO_RANK

from .conftest import load_expected


def as_float(v):
    return {None: math.nan, "inf": math.inf, "-inf": -math.inf}.get(v, v) if not isinstance(v, float) else v


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def file_entry(root, run_dir):
    expected = load_expected(root)["files"]
    (key,) = [k for k in expected if k.startswith(run_dir + "/") and not k.endswith("_lineage")]
    return expected[key]


@pytest.fixture(scope="module")
def ms(ms_files):
    return msnb.read(ms_files)


def test_nothing_skipped_on_intact_files(ms):
    assert ms.problems == []
    kinds = sorted(f["kind"] for f in ms.files)
    assert kinds.count("ms_summary") == 6 and kinds.count("ms_lineage") == 2 and kinds.count("log") == 1


def test_scalars_match_summary_pb2_value_for_value(ms, ms_files):
    for run in ("record", "record_custom", "collector"):
        want = file_entry(ms_files, run)["scalars"]
        got = ms.scalars.where(run=run, rank=0)
        assert len(got) == len(want), run
        for (tag, step, wall, value), t, s, w, v in zip(want, got.tag, got.step, got.wall_time, got.value):
            assert (t, s, w) == (tag, step, wall)
            assert same(v, float(np.float32(as_float(value))))


def test_nan_and_inf_are_kept(ms):
    steps, values = ms.scalars.where(run="record").series("loss")
    assert math.isnan(values[steps == 77][0]) and math.isinf(values[steps == 78][0])
    assert len(steps) == 120  # every point kept


def test_histograms_match(ms, ms_files):
    want = file_entry(ms_files, "record")["histograms"]
    got = ms.histograms.where(run="record")
    assert len(got) == len(want) == 3
    for w, row in zip(want, got.rows()):
        assert (row["tag"], row["step"]) == (w["tag"], w["step"])
        for key in ("min", "max", "sum", "count", "nan_count", "pos_inf_count", "neg_inf_count"):
            assert row[key] == w[key], key
        np.testing.assert_array_equal(row["left"], w["left"])
        np.testing.assert_array_equal(row["right"], np.add(w["left"], w["width"]))
        np.testing.assert_array_equal(row["counts"], w["counts"])
        assert row["counts"].sum() == row["count"]


def test_tensors_and_images_match(ms, ms_files):
    entry = file_entry(ms_files, "record")
    tensors = ms.tensors.where(run="record")
    assert len(tensors) == len(entry["tensors"]) == 3
    for w, row in zip(entry["tensors"], tensors.rows()):
        assert row["dims"] == tuple(w["dims"]) == (2, 3)
        assert row["dtype"] == "float32"
        np.testing.assert_array_equal(row["values"].ravel(), np.float32(w["float_data"]))
        assert row["values"].shape == (2, 3)
    images = ms.images.where(run="record")
    assert len(images) == len(entry["images"]) == 3
    for w, row in zip(entry["images"], images.rows()):
        assert (row["height"], row["width"], row["colorspace"]) == (w["height"], w["width"], w["colorspace"])
        assert hashlib.sha256(row["png"]).hexdigest() == w["sha256"]
        assert row["png"][:8] == b"\x89PNG\r\n\x1a\n"


def test_versions_custom_names_and_graph_steps(ms, ms_files):
    by_run = {f["run"]: f for f in ms.files if f["kind"] == "ms_summary"}
    assert by_run["record_custom"]["version"] == "MindSpore.Event:1"
    assert by_run["record_custom"]["path"].endswith("_custom")
    graphs = ms.markers.where(run="collector", kind="graph")
    assert graphs.step.tolist() == file_entry(ms_files, "collector")["graph_steps"]
    assert (graphs.bytes > 0).all()


def test_rank_directories(ms):
    ranks = ms.scalars.where(run="ranks")
    assert sorted(set(ranks.rank.tolist())) == [0, 1]
    s1, v1 = ranks.series("loss", rank=1)
    s0, v0 = ranks.series("loss", rank=0)
    np.testing.assert_allclose(v1 - v0, 1.0, rtol=1e-6)
    assert s0.tolist() == list(range(1, 51))


def lineage_expected(ms_files, run):
    files = load_expected(ms_files)["files"]
    (key,) = [k for k in files if k.startswith(run + "/") and k.endswith("_lineage")]
    return {rec["kind"]: rec for rec in files[key]["lineage"]}


def test_train_lineage_and_user_defined_info(ms, ms_files):
    want = lineage_expected(ms_files, "collector")
    got = {row["kind"]: row for row in ms.lineage.where(run="collector").rows()}
    assert set(got) == set(want) == {"train", "dataset_graph", "user_defined"}
    fields = got["train"]["fields"]
    for key in ("optimizer", "loss_function", "epoch", "parallel_mode", "device_num", "batch_size", "network", "train_dataset_size"):
        assert fields[key] == want["train"][key], key
    assert fields["learning_rate"] == pytest.approx(want["train"]["learning_rate"], rel=1e-7)
    assert fields["loss"] == pytest.approx(want["train"]["loss"], rel=1e-7)
    assert got["train"]["rank"] == 0
    assert got["user_defined"]["fields"] == want["user_defined"]["info"] == {"team": "msnb", "seed": 7, "ratio": 0.5}
    graph = got["dataset_graph"]["fields"]
    assert "GeneratorDataset" in repr(graph) or "NumpySlicesDataset" in repr(graph) or "Batch" in repr(graph)


def test_evaluation_lineage(ms, ms_files):
    want = lineage_expected(ms_files, "evaluation")["evaluation"]
    (row,) = ms.lineage.where(run="evaluation", kind="evaluation").rows()
    assert row["fields"]["metric"] == json.loads(want["metric"])
    assert row["fields"]["valid_dataset_size"] == want["valid_dataset_size"] == 160


def test_old_mindspore_files(ms, ms_files):
    """ "Mindspore.Event:1" and names without a device id, as older MindSpore wrote them; a loss landscape."""
    entry = load_expected(ms_files)["files"]["legacy/events.out.events.summary.1600000000.oldhost_MS"]
    (info,) = [f for f in ms.files if f["run"] == "legacy"]
    assert info["version"] == entry["version"] == "Mindspore.Event:1"
    assert info["rank"] == NO_RANK
    got = ms.scalars.where(run="legacy")
    assert [[t, s, w, v] for t, s, w, v in zip(got.tag, got.step, got.wall_time, got.value)] == [
        [t, s, w, float(np.float32(v))] for t, s, w, v in entry["scalars"]
    ]
    landscapes = ms.markers.where(run="legacy", kind="loss_landscape")
    assert landscapes.step.tolist() == entry["landscape_steps"] == [5]
    assert landscapes.tag.tolist() == ["landscape"]


def test_loss_monitor_and_time_monitor_log(ms, ms_files):
    recorded = load_expected(ms_files)["train_losses"]  # (global step, loss) seen by a callback
    log = ms.scalars.where(run="collector", rank=NO_RANK)
    steps, losses = log.series("loss")
    assert steps.tolist() == [s for s, _ in recorded] == list(range(1, 41))
    np.testing.assert_allclose(losses, [loss for _, loss in recorded], rtol=1e-6)
    t_steps, t_values = log.series("step_time_ms")
    assert t_steps.tolist() == [20, 40]  # TimeMonitor prints once per epoch, after its last step
    assert (t_values > 0).all()


def test_single_file_path(ms_files):
    path = next((ms_files / "record").glob("*_MS"))
    one = msnb.read(path)
    assert one.runs == ["."]
    assert len(one.scalars) == 240 and len(one.histograms) == 3


def test_read_does_not_need_mindspore(ms_files):
    """Reading must work where MindSpore is absent: block its import and read."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['mindspore'] = None; sys.modules['mindformers'] = None\n"
        "import msnb; r = msnb.read(sys.argv[1]); print(len(r.scalars), len(r.problems))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(ms_files)], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) > 0 and out[1] == "0"
