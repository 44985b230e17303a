"""Conformance with files written by other people's code: one test per data file of the peer corpus.

The corpus (files written by catalyst's and MindInsight's tests, MindSpore's SummaryRecord, tbparse's and
tensorboardX's fixtures, and logs pasted in MindSpore and mindformers documentation) lives outside the
repository, with a MANIFEST saying who wrote each file and what the peer's own test asserts.  It is read
where it lies: ``MSNB_PEER_CORPUS``, else ``peer-corpus`` in the ``shared`` folder beside the checkout; the
tests skip, saying why, when it is absent.

Each TensorBoard file is compared with TensorBoard's own EventAccumulator, tag by tag: every value it reads,
msnb reads the same (or reports, naming the tag, that it does not read that kind), and msnb reads nothing it
does not.  Files TensorBoard cannot read (MindSpore's format, logs) are compared with the values the MANIFEST
and the peers' metadata give.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

import msnb

CORPUS = Path(os.environ.get("MSNB_PEER_CORPUS") or Path(__file__).resolve().parents[3] / "shared" / "peer-corpus")
FILES = CORPUS / "files"
MANIFEST = CORPUS / "MANIFEST.md"


def _manifest_files() -> list:
    """``(sha256 prefix, size, path)`` of every data file the MANIFEST's file list names (its JSON metadata left out)."""
    if not MANIFEST.is_file():
        return []
    text = MANIFEST.read_text(encoding="utf-8")
    block = text[text.index("## File list") :]
    block = block[block.index("```") + 3 :]
    block = block[: block.index("```")]
    out = []
    for line in block.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and not parts[2].endswith(".json"):
            out.append((parts[0], int(parts[1]), parts[2]))
    return out


ENTRIES = _manifest_files()
PARAMS = [pytest.param(e, id=e[2]) for e in ENTRIES] or [
    pytest.param(
        None, marks=pytest.mark.skip(reason=f"peer corpus not found at {CORPUS} (other projects' files, kept outside the repository; set MSNB_PEER_CORPUS)")
    )
]


def test_the_manifest_lists_every_data_file():
    if not ENTRIES:
        pytest.skip(f"peer corpus not found at {CORPUS}")
    assert len(ENTRIES) == 56


# ------------------------------------------------------------------ TensorBoard's own reader


def _accumulator(path: Path):
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(path), size_guidance=dict.fromkeys(ea.DEFAULT_SIZE_GUIDANCE, 0))
    acc.Reload()
    return acc


def _rows(table, tag):
    return list(table.where(tag=tag).rows())


def _not_read(result, tag) -> bool:
    return any(p.kind == "not_read" and f"tag {tag!r}" in p.message for p in result.problems)


def _same_events(rows, events):
    assert [(r["step"], r["wall_time"]) for r in rows] == [(e.step, e.wall_time) for e in events]


def _check_tensor_tag(result, acc, tag) -> None:
    from tensorboard.util import tensor_util

    events = acc.Tensors(tag)
    plugin = acc.SummaryMetadata(tag).plugin_data.plugin_name
    arrays = [tensor_util.make_ndarray(e.tensor_proto) for e in events]
    if plugin == "scalars":
        rows = _rows(result.scalars, tag)
        _same_events(rows, events)
        assert [r["value"] for r in rows] == [float(a.item()) for a in arrays]
    elif plugin == "text" or (plugin == "" and arrays and arrays[0].dtype == object):
        rows = _rows(result.texts, tag)
        _same_events(rows, events)
        assert [r["text"] for r in rows] == ["\n".join(x.decode("utf-8") for x in np.ravel(a)) for a in arrays]
    elif plugin == "histograms":
        rows = _rows(result.histograms, tag)
        _same_events(rows, events)
        for r, a in zip(rows, arrays):
            np.testing.assert_array_equal(r["left"], a[:, 0])
            np.testing.assert_array_equal(r["right"], a[:, 1])
            np.testing.assert_array_equal(r["counts"], a[:, 2])
            assert math.isnan(r["sum"])  # TF2 records no sum: unknown, not an estimate passed off as one
        sums, estimated = result.histograms.where(tag=tag).estimated_sum()
        assert estimated.all() and np.isfinite(sums).all()
    elif arrays and arrays[0].dtype == object:  # a string tensor of another plugin (custom_scalars layouts...)
        assert _not_read(result, tag) and not any(len(getattr(result, t).where(tag=tag)) for t in ("texts", "tensors", "scalars"))
    else:
        rows = _rows(result.tensors, tag)
        _same_events(rows, events)
        for r, a in zip(rows, arrays):
            assert tuple(r["dims"]) == a.shape
            np.testing.assert_array_equal(r["values"], a)


def _hparams_contents(acc) -> dict:
    try:
        return acc.PluginTagToContent("hparams")
    except KeyError:  # no summary of that plugin
        return {}


def _check_hparams(result, acc) -> None:
    from tensorboard.plugins.hparams import plugin_data_pb2

    contents = _hparams_contents(acc)
    want = []
    for tag in sorted(contents):
        data = plugin_data_pb2.HParamsPluginData.FromString(contents[tag])
        which = data.WhichOneof("data")
        if which == "session_start_info":
            values = {}
            for name, v in data.session_start_info.hparams.items():
                kind = v.WhichOneof("kind")
                values[name] = None if kind == "null_value" else getattr(v, kind)
            want.append(("hparams", values))
        elif which == "session_end_info":
            want.append(("hparams_end", data.session_end_info.status))
        elif which == "experiment":
            want.append(("hparams_experiment", sorted(h.name for h in data.experiment.hparam_infos)))
    got = []
    for row in result.lineage.rows():
        if row["kind"] == "hparams":
            got.append(("hparams", row["fields"]))
        elif row["kind"] == "hparams_end":
            got.append(("hparams_end", {"unknown": 0, "success": 1, "failure": 2, "running": 3}[row["fields"]["status"]]))
        elif row["kind"] == "hparams_experiment":
            got.append(("hparams_experiment", sorted(row["fields"]["hparams"])))
    assert sorted(got, key=repr) == sorted(want, key=repr)


def _against_event_accumulator(path: Path, result) -> None:
    acc = _accumulator(path)
    tags = acc.Tags()
    seen = set()
    for tag in tags["scalars"]:
        rows = _rows(result.scalars, tag)
        events = acc.Scalars(tag)
        _same_events(rows, events)
        assert [r["value"] for r in rows] == [float(np.float32(e.value)) for e in events]
        seen.add(tag)
    for tag in tags["histograms"]:
        rows = _rows(result.histograms, tag)
        events = acc.Histograms(tag)
        _same_events(rows, events)
        for r, e in zip(rows, events):
            h = e.histogram_value
            assert (r["min"], r["max"], r["sum"], r["count"]) == (h.min, h.max, h.sum, h.num)  # proto3: an absent 0 is 0
            np.testing.assert_array_equal(r["counts"], h.bucket)
            np.testing.assert_array_equal(r["right"][:-1], h.bucket_limit[:-1])
            assert r["right"][-1] == h.bucket_limit[-1] or (abs(h.bucket_limit[-1]) > 1e300 and r["right"][-1] == h.max)
        seen.add(tag)
    for tag in tags["images"]:
        rows = _rows(result.images, tag)
        events = acc.Images(tag)
        _same_events(rows, events)
        assert [(r["height"], r["width"], r["png"]) for r in rows] == [(e.height, e.width, e.encoded_image_string) for e in events]
        seen.add(tag)
    for tag in tags["audio"]:
        assert _not_read(result, tag)
        seen.add(tag)
    for tag in tags["tensors"]:
        _check_tensor_tag(result, acc, tag)
        seen.add(tag)
    _check_hparams(result, acc)
    hparam_tags = set(_hparams_contents(acc))
    for kind in ("scalars", "histograms", "images", "texts", "tensors"):
        assert set(getattr(result, kind).tag.tolist()) <= seen, f"msnb read {kind} TensorBoard does not know"
    assert (len(result.lineage) > 0) == bool(hparam_tags)
    assert not result.skipped


# ------------------------------------------------------------------ what the MANIFEST and the peers' metadata give

LOGS = {
    # MindSpore LossMonitor pasted in documentation: global step = (epoch - 1) * 1875 + step
    "mindspore_docs_logs/callback_r19_lossmonitor1875.log": None,
    "mindspore_docs_logs/lenet_eval_during_training.log": None,
    "mindspore_docs_logs/pipeline_sapp_rank0_stdout.log": None,
    "mindspore_docs_logs/quick_start_r11_pynative.log": None,
    "mindformers_docs_logs/ha_llama2_13b/msrun_log/worker_0.log": {
        "steps": [1, 2, 3, 4, 5],
        "loss": [10.649, 10.633, 9.673, 9.287, 8.867],
        "step_time_ms": [103328, 1752, 1754, 1756, 1758],
        "lr": [0.0, 1e-05, 9.981987e-06, 9.928079e-06, 9.8386645e-06],
        "loss_scale": [1.0] * 5,
        "model-flops-throughput-per-npu": [2.896, 170.738, 170.523, 170.319, 170.173],
        # printed as "[1 31049]" and "[1 508834]" (two numbers: declined, reported), then "global_norm [10.579812]" without a colon
        "global_norm": ([3, 4, 5], [10.579812, 21.932272, 16.986555]),
        "declined": "global_norm",
    },
    "mindformers_docs_logs/pynative_deepseek/msrun_log/worker_0.log": {
        "steps": [1, 2],
        "loss": [11.813965, 11.755612],
        "step_time_ms": [13570, 710],
        "lr": [1e-05, 1e-05],
        "grad_norm": [13.831877, 19.926786],
        # load_balancing_loss marks mindformers 2.x's dynamic-graph trainer (1.9's _print_log has no such field), whose
        # "T" is TFLOPS (FLOPs / (ms x 1e9)): read as printed, and no unit fault to name
        "model-flops-throughput-per-npu": [1.36, 25.92],
        "load_balancing_loss": [1.093977, 1.106543],
    },
}
_LOSS_MONITOR = re.compile(r"^epoch: (\d+) step: (\d+), loss is (\S+)$")


def _check_log(rel: str, result) -> None:
    want = LOGS[rel]
    assert not [p for p in result.problems if p.kind != "not_read"]
    sc = result.scalars
    if want is None:  # LossMonitor: every printed line, at (epoch - 1) * 1875 + step
        printed = [m.groups() for m in map(_LOSS_MONITOR.match, (FILES / rel).read_text().splitlines()) if m]
        steps, values = sc.series("loss")
        assert steps.tolist() == [(int(e) - 1) * 1875 + int(s) for e, s, _ in printed]
        assert values.tolist() == [float(v) for _, _, v in printed]
        assert sc.tags() == ["loss"]
        return
    expected_tags = {"loss", "step_time_ms", "lr", "loss_scale", "global_norm", "grad_norm", "model-flops-throughput-per-npu", "load_balancing_loss"} & set(
        want
    )
    assert set(sc.tags()) == expected_tags
    for tag in expected_tags:
        steps, values = sc.series(tag)
        want_steps, want_values = want[tag] if isinstance(want[tag], tuple) else (want["steps"], want[tag])
        assert steps.tolist() == want_steps and values.tolist() == pytest.approx([float(v) for v in want_values], rel=1e-12), tag
    declined = [p for p in result.problems if p.kind == "not_read"]
    if "declined" in want:
        assert len(declined) == 1 and repr(want["declined"]) in declined[0].message and "[1 31049]" in declined[0].message
    else:
        assert declined == []


def _check_generated(rel: str, result) -> None:
    """MindInsight's log generators: the values its tests compare against (``generator_metadata.json``)."""
    meta = json.loads((FILES / "mindinsight/generated/generator_metadata.json").read_text())[rel.split("generated/", 1)[1]]
    assert result.problems == []
    counts = {"scalars": 0, "histograms": 0, "tensors": 0, "images": 0, "markers": 0}
    for key, entries in meta.items():
        tag, kind = key.rsplit("/", 1)
        if kind == "scalar":
            rows = _rows(result.scalars, tag)
            assert [(r["step"], r["wall_time"], r["value"]) for r in rows] == [(e["step"], e["wall_time"], float(np.float32(e["value"]))) for e in entries]
            counts["scalars"] += len(rows)
        elif kind == "histogram":
            rows = _rows(result.histograms, tag)
            assert [(r["step"], r["wall_time"], r["min"], r["max"]) for r in rows] == [(e["step"], e["wall_time"], e["min"], e["max"]) for e in entries]
            for r, e in zip(rows, entries):
                b = np.asarray(e["buckets"], dtype=np.float64)
                np.testing.assert_array_equal(r["left"], b[:, 0])
                np.testing.assert_array_equal(r["right"], b[:, 0] + b[:, 1])
                np.testing.assert_array_equal(r["counts"], b[:, 2])
            counts["histograms"] += len(rows)
        elif kind == "tensor":
            rows = _rows(result.tensors, tag)
            assert [(r["step"], r["wall_time"], tuple(r["dims"])) for r in rows] == [(e["step"], e["wall_time"], tuple(e["value"]["dims"])) for e in entries]
            for r, e in zip(rows, entries):
                assert e["value"]["data_type"] == 11 and r["dtype"] == "float32"
                np.testing.assert_array_equal(np.ravel(r["values"]), np.float32(e["value"]["float_data"]))
            counts["tensors"] += len(rows)
        elif kind == "image":
            rows = _rows(result.images, tag)
            assert [(r["step"], r["wall_time"], r["height"], r["width"], r["colorspace"]) for r in rows] == [
                (e["step"], e["wall_time"], e["height"], e["width"], 3) for e in entries
            ]
            assert all(r["png"].startswith(b"\x89PNG") for r in rows)
            counts["images"] += len(rows)
        elif kind == "landscape":
            rows = [r for r in _rows(result.markers, tag) if r["kind"] == "loss_landscape"]
            assert [(r["step"], r["wall_time"]) for r in rows] == [(e["step"], e["wall_time"]) for e in entries]
            counts["markers"] += len(rows)
    graphs = result.markers.where(kind="graph")
    counts["markers"] += len(graphs)
    assert len(graphs) == (1 if "log_operations" in rel else 0)
    for kind, n in counts.items():
        assert len(getattr(result, kind)) == n, kind


def _check_mindspore_ut(rel: str, result) -> None:
    """MindSpore's own summary unit tests, run with MindSpore 2.9: what was fed (``mindspore_ut_meta.json``) and what the tests assert."""
    test = rel.split("/")[1]
    meta = json.loads((FILES / "mindspore_ut/mindspore_ut_meta.json").read_text())[test]
    assert result.problems == [] and result.files[0]["version"].startswith("MindSpore.Event:")
    fed = meta["fed"]
    if test.startswith("test_scalar"):
        got = [(r["tag"], r["step"], r["value"]) for r in result.scalars.rows()]
        assert got == [tuple(x) for x in fed] and len(got) == {"test_scalar_summary_sample": 8}.get(test, 198)
    elif test.startswith("test_tensor"):
        got = list(result.tensors.rows())
        assert len(got) == len(fed) == 792
        for r, (tag, step, dtype, dims, values) in zip(got, fed):
            assert (r["tag"], r["step"], r["dtype"], tuple(r["dims"])) == (tag, step, dtype, tuple(dims))
            np.testing.assert_array_equal(np.ravel(r["values"]).astype(np.float64), values)
    else:
        rows = list(result.histograms.rows())
        assert len(rows) == len(fed)
        for r, want in zip(rows, fed):
            for key in ("step", "count", "nan_count", "pos_inf_count", "neg_inf_count"):
                assert r[key] == want[key], key
            finite = r["count"] - r["nan_count"] - r["pos_inf_count"] - r["neg_inf_count"]
            assert r["counts"].sum() == finite
            if want["min"] is None:  # nothing finite: MindSpore (proto2) writes no min, max or sum, and msnb says unknown
                assert math.isnan(r["min"]) and math.isnan(r["max"])
            else:
                assert (r["min"], r["max"]) == pytest.approx((want["min"], want["max"]), rel=1e-6)
                assert r["sum"] == pytest.approx(want["sum"], rel=1e-6, abs=1e-6)
        if "expected_buckets" in meta:
            assert len(rows[0]["counts"]) == meta["expected_buckets"]


# ------------------------------------------------------------------ one test per file


@pytest.mark.parametrize("entry", PARAMS)
def test_peer_file(entry):
    sha_prefix, size, rel = entry
    path = FILES / rel
    data = path.read_bytes()
    assert (len(data), hashlib.sha256(data).hexdigest()[: len(sha_prefix)]) == (size, sha_prefix), "the corpus file changed since its MANIFEST"
    result = msnb.read(path, workers=1)
    if rel.endswith(".log"):
        _check_log(rel, result)
    elif "tfevents" in path.name:
        _against_event_accumulator(path, result)
        if rel.startswith("catalyst/"):  # catalyst's own assertions on its committed bytes
            assert [(r["tag"], r["step"], r["value"]) for r in result.scalars.rows()] == [("x", 1, 1.0), ("y", 1, -1.0), ("x", 2, 2.0)]
            image = next(result.images.rows())
            assert (image["tag"], image["step"], image["height"], image["width"], image["colorspace"]) == ("z", 1, 2, 2, 3)
            assert result.files[0]["version"] is None and result.problems == []  # its first record holds only a wall time
    elif rel == "mindinsight/crc_zero/summary.01":
        # both checksums zeroed: MindInsight with its CRC check loads nothing ("Check crc failed"), without it 3 scalars
        assert result.empty and any(p.kind == "foreign" and "verify=False" in p.message for p in result.problems)
        unchecked = msnb.read(path, verify=False, workers=1)
        assert unchecked.problems == []
        assert [(r["tag"], r["step"], r["wall_time"], r["value"]) for r in unchecked.scalars.rows()] == [
            ("tag_name", step, 1576335527.6856437, value) for step, value in ((1, 0.20900745689868927), (3, 0.2605031728744507), (5, 0.9734034538269043))
        ]
    elif rel.startswith("mindinsight/generated/"):
        _check_generated(rel, result)
        assert msnb.read(path.parent, workers=1).files[0]["path"] == str(path), "a MindInsight-named summary is found in a directory walk"
    elif rel.startswith("mindspore_ut/"):
        _check_mindspore_ut(rel, result)
    else:  # pragma: no cover - a new kind of file in the corpus needs a comparison here
        pytest.fail(f"no comparison for {rel}")
