"""msnb reads MindSpore's own summaries value for value, as MindSpore's summary_pb2 decodes them."""

import contextlib
import hashlib
import json
import math

import numpy as np
import pytest

import msnb
from msnb.events import NO_RANK
from tests.conftest import load_expected


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


# ------------------------------------------------------------------ files as other tools name and frame them


def _same_rows(a, b) -> None:
    for kind in ("scalars", "histograms"):
        x, y = getattr(a, kind), getattr(b, kind)
        assert len(x) == len(y) > 0, kind
        for c in ("tag", "step", "wall_time"):
            assert getattr(x, c).tolist() == getattr(y, c).tolist()
    np.testing.assert_array_equal(a.scalars.value, b.scalars.value)


def test_mindinsight_style_names_are_found_in_a_walk_and_read(ms_files, tmp_path):
    """MindInsight takes any name ending in summary.<digits> (its tests write summary.01); so does msnb's walk."""
    original = next((ms_files / "record").glob("*_MS"))
    want = msnb.read(original)
    for name in ("summary.01", "train.summary.1700000000", "hellosummary.98786"):
        run = tmp_path / name.replace(".", "_")
        run.mkdir()
        (run / name).write_bytes(original.read_bytes())
        got = msnb.read(tmp_path, workers=1).scalars.where(run=run.name)
        assert len(got) == len(want.scalars), name
    (tmp_path / "notes_summary.2024.csv").write_text("not a summary\n")
    assert all(not f["path"].endswith(".csv") for f in msnb.read(tmp_path).files)


def test_records_without_checksums_are_named_as_such_and_read_unchecked(ms_files, tmp_path):
    """MindInsight's tests zero both checksums of every record: verify=True reads nothing and says why; verify=False reads every record."""
    original = next((ms_files / "record").glob("*_MS"))
    data = bytearray(original.read_bytes())
    pos = 0
    while pos + 12 <= len(data):
        n = int.from_bytes(data[pos : pos + 8], "little")
        data[pos + 8 : pos + 12] = bytes(4)
        data[pos + 12 + n : pos + 16 + n] = bytes(4)
        pos += 16 + n
    zeroed = tmp_path / "summary.01"
    zeroed.write_bytes(bytes(data))
    checked = msnb.read(zeroed)
    assert checked.empty and checked.problems[-1].kind == "foreign" and "verify=False" in checked.problems[-1].message
    unchecked = msnb.read(zeroed, verify=False)
    assert unchecked.problems == []
    _same_rows(unchecked, msnb.read(original))
    renamed = tmp_path / "unknown_name.bin"  # a name msnb does not know: the framing alone says what it is
    renamed.write_bytes(bytes(data))
    _same_rows(msnb.read(renamed, verify=False), msnb.read(original))


def test_lineage_converted_to_tensorboard_reads_back_as_hyper_parameters(ms, ms_files, tmp_path):
    """msnb convert writes train lineage and user-defined info as hparams: reading the result gives them back, as TensorBoard reads them."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    from msnb.bridges.tensorboard import convert

    convert(ms_files / "collector", tmp_path / "tb")
    back = msnb.read(tmp_path / "tb")
    (row,) = back.lineage.where(kind="hparams").rows()
    train = next(ms.lineage.where(run="collector", kind="train").rows())["fields"]
    assert row["fields"]["optimizer"] == train["optimizer"] and row["fields"]["batch_size"] == float(train["batch_size"])
    assert {k: row["fields"][k] for k in ("team", "seed", "ratio")} == {"team": "msnb", "seed": 7.0, "ratio": 0.5}
    contents = []
    for path in (tmp_path / "tb").rglob("events.out.tfevents.*"):
        acc = event_accumulator.EventAccumulator(str(path))
        acc.Reload()
        with contextlib.suppress(KeyError):  # a file with no hparams summary
            contents.append(acc.PluginTagToContent("hparams")["_hparams_/session_start_info"])
    (content,) = contents
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    assert {k: getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()} == row["fields"]
    (end,) = back.lineage.where(kind="hparams_end").fields.tolist()
    assert end["status"] == "success" and end["end_time_secs"] == row["wall_time"]
