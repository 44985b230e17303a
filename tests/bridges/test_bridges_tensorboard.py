"""``msnb convert``: the converted tree, read back by TensorBoard's own loader, holds what ``msnb.read`` reads.

The oracle is TensorBoard itself (its ``EventAccumulator`` over its own protobuf
classes, and a headless TensorBoard server), never msnb's reader of tfevents.
"""

import json
import logging
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import msnb
from msnb.bridges.tensorboard import STATE_FILE, AlreadyTensorBoard, convert

ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

ALL = {"scalars": 0, "histograms": 0, "images": 0, "tensors": 0, "compressedHistograms": 0}


def load(directory) -> "ea.EventAccumulator":
    acc = ea.EventAccumulator(str(directory), size_guidance=ALL)
    acc.Reload()
    return acc


def out_dir(dst: Path, run: str, rank: int, src_name: str) -> Path:
    d = dst / (src_name if run == "." else run)
    return d / f"rank_{rank}" if rank >= 0 else d


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).astype(np.float32)


def same_f32(a, b) -> bool:
    return np.array_equal(f32(a), f32(b), equal_nan=True)


def groups(table):
    keys = sorted(set(zip(table.run.tolist(), table.rank.tolist())))
    return {k: table.where(run=k[0], rank=k[1]) for k in keys}


def test_every_kind_reads_back_the_same_in_tensorboard(ms_files, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    src = tmp_path / "src"
    shutil.copytree(ms_files, src)
    dst = tmp_path / "tb"
    report = convert(src, dst)
    result = msnb.read(src)
    assert report.written["scalars"] == len(result.scalars) and report.written["histograms"] == len(result.histograms)
    assert report.problems == [] and report.not_converted  # the graph and the loss landscape are counted, not written

    loaded = {}

    def acc_for(run, rank):
        d = out_dir(dst, run, rank, src.name)
        if d not in loaded:
            assert list(d.glob("events.out.tfevents.*")), f"no event file in {d}"
            loaded[d] = load(d)
        return loaded[d]

    checked = dict.fromkeys(["scalars", "histograms", "images", "tensors", "hparams", "text"], 0)
    eval_metrics = {}
    for (run, rank), rows in groups(result.lineage).items():
        for kind, fields in zip(rows.kind.tolist(), rows.fields.tolist()):
            if kind == "evaluation" and isinstance(fields.get("metric"), dict):
                eval_metrics.setdefault((run, rank), {}).update(fields["metric"])

    for (run, rank), rows in groups(result.scalars).items():
        acc = acc_for(run, rank)
        extra = {f"eval/{k}" for k in eval_metrics.get((run, rank), {})}
        assert set(acc.Tags()["scalars"]) == set(rows.tags()) | extra
        for tag in rows.tags():
            steps, values = rows.series(tag)
            got = acc.Scalars(tag)
            assert [e.step for e in got] == steps.tolist()
            assert same_f32([e.value for e in got], values)
            checked["scalars"] += len(got)
    for (run, rank), metrics in eval_metrics.items():
        got = {t: acc_for(run, rank).Scalars(f"eval/{t}")[0].value for t in metrics}
        assert same_f32(list(got.values()), list(metrics.values()))

    for (run, rank), rows in groups(result.histograms).items():
        acc = acc_for(run, rank)
        assert set(acc.Tags()["histograms"]) == set(rows.tag.tolist())
        for tag in set(rows.tag.tolist()):
            mine = rows.where(tag=tag)
            got = acc.Histograms(tag)
            assert [e.step for e in got] == mine.step.tolist()
            for e, right, counts, hmin, hmax, n in zip(got, mine.right, mine.counts, mine.min, mine.max, mine.count):
                h = e.histogram_value
                assert np.array_equal(h.bucket_limit, right) and np.array_equal(h.bucket, counts)  # bucket limits and counts preserved
                assert (h.min, h.max, h.num) == (hmin, hmax, n)
                checked["histograms"] += 1

    for (run, rank), rows in groups(result.images).items():
        acc = acc_for(run, rank)
        got = acc.Images(rows.tag[0])
        assert [e.step for e in got] == rows.step.tolist()
        assert [e.encoded_image_string for e in got] == rows.png.tolist()
        assert [(e.height, e.width) for e in got] == list(zip(rows.height.tolist(), rows.width.tolist()))
        assert all(e.encoded_image_string[:4] == b"\x89PNG" for e in got)
        checked["images"] += len(got)

    for (run, rank), rows in groups(result.tensors).items():
        acc = acc_for(run, rank)
        got = acc.Tensors(rows.tag[0])
        assert [e.step for e in got] == rows.step.tolist()
        for e, values, dims in zip(got, rows["values"], rows.dims):
            arr = tensor_util.make_ndarray(e.tensor_proto)
            assert arr.shape == tuple(dims) and same_f32(arr, values)
            checked["tensors"] += 1

    for (run, rank), rows in groups(result.lineage).items():
        acc = acc_for(run, rank)
        text_tags = {t for t in acc.Tags()["tensors"] if t.startswith("lineage/")}
        assert text_tags == {f"lineage/{k}" for k in rows.kind.tolist()}
        for tag in text_tags:
            for e in acc.Tensors(tag):
                body = tensor_util.make_ndarray(e.tensor_proto).ravel()[0].decode()
                assert body.startswith("```\n") and json.loads(body.strip("`\n")) in rows.where(kind=tag.split("/", 1)[1]).fields.tolist()
                checked["text"] += 1
        hp_fields = {}
        for kind, fields in zip(rows.kind.tolist(), rows.fields.tolist()):
            if kind in ("train", "user_defined"):
                hp_fields.update(fields)
        if not hp_fields:
            continue
        content = acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
        start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
        for key, want in hp_fields.items():
            if isinstance(want, (dict, list)) or want is None:
                continue
            got = start.hparams[key]
            if isinstance(want, str):
                assert got.string_value == want
            elif isinstance(want, bool):
                assert got.bool_value == want
            elif math.isfinite(want):
                assert got.number_value == want
            checked["hparams"] += 1

    assert all(checked.values()), checked  # every kind was present and compared
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == []  # TensorBoard's loader read every record without a complaint


def _grow_source(ms_files, tmp_path):
    (orig,) = (ms_files / "record").glob("*_MS")
    data = orig.read_bytes()
    src = tmp_path / "job"
    src.mkdir()
    path = src / orig.name
    return data, path


def test_idempotent_and_only_what_the_source_added(ms_files, tmp_path):
    data, path = _grow_source(ms_files, tmp_path)
    cut = len(data) // 2 + 7  # mid-record: the second half completes it
    path.write_bytes(data[:cut])
    dst = tmp_path / "tb"
    first = convert(path.parent, dst)
    assert first.written["scalars"] > 0 and any(p.kind == "truncated" for p in first.problems)
    (out,) = dst.rglob("events.out.tfevents.*")
    before = (out.stat().st_size, out.stat().st_mtime_ns)

    again = convert(path.parent, dst)
    assert again.total == 0 and again.unchanged == 1 and again.files == []
    assert (out.stat().st_size, out.stat().st_mtime_ns) == before  # nothing rewritten, nothing appended

    with open(path, "ab") as f:
        f.write(data[cut:])
    grown = convert(path.parent, dst)
    full = msnb.read(path.parent)
    assert first.written["scalars"] + grown.written["scalars"] == len(full.scalars)
    assert first.written["histograms"] + grown.written["histograms"] == len(full.histograms)
    assert list(dst.rglob("events.out.tfevents.*")) == [out]  # appended to the same file
    acc = load(out.parent)
    for tag in full.scalars.tags():
        steps, values = full.scalars.series(tag)
        got = acc.Scalars(tag)
        assert [e.step for e in got] == steps.tolist() and same_f32([e.value for e in got], values)  # no duplicates, nothing lost
    assert len(acc.Images("sample")) == len(full.images)

    out.unlink()  # the output deleted, the ledger kept: everything is written again, into a new file
    redone = convert(path.parent, dst)
    assert redone.written["scalars"] == len(full.scalars) and len(redone.files) == 1
    assert [e.step for e in load(out.parent).Scalars("loss")] == full.scalars.series("loss")[0].tolist()

    path.unlink()
    path.write_bytes(data[:cut])  # replaced by a new, shorter file: converted again from its start
    replaced = convert(path.parent, dst)
    assert replaced.written["scalars"] == first.written["scalars"]
    state = json.loads((dst / STATE_FILE).read_text())
    assert list(state["sources"]) == [str(path)]


def test_follow_converts_while_the_job_writes(ms_files, tmp_path):
    data, path = _grow_source(ms_files, tmp_path)
    chunks = [data[i : i + 997] for i in range(0, len(data), 997)][:40] + [data[997 * 40 :]]
    path.write_bytes(b"")
    pending = list(chunks)
    seen_totals = []

    def job_writes(report):
        seen_totals.append(report.total)
        if pending:
            with open(path, "ab") as f:
                f.write(pending.pop(0))

    dst = tmp_path / "live"
    report = convert(path.parent, dst, follow=True, interval=0.0, stop=lambda: not pending, on_pass=job_writes)
    full = msnb.read(path.parent)
    assert report.passes >= len(chunks) and seen_totals[-1] > seen_totals[1] > 0  # rows arrived pass by pass
    assert report.written["scalars"] == len(full.scalars) and report.written["images"] == len(full.images)
    assert not any(p.kind == "truncated" for p in report.problems)  # partial records waited for the next pass
    acc = load(next(dst.rglob("events.out.tfevents.*")).parent)
    for tag in full.scalars.tags():
        steps, values = full.scalars.series(tag)
        assert [e.step for e in acc.Scalars(tag)] == steps.tolist() and same_f32([e.value for e in acc.Scalars(tag)], values)
    assert convert(path.parent, dst).total == 0  # a later one-shot conversion adds nothing


def test_a_tfevents_source_is_refused(tb_files, tmp_path, run_msnb):
    with pytest.raises(AlreadyTensorBoard, match="TensorBoard reads them as they are"):
        convert(tb_files, tmp_path / "out")
    proc = run_msnb("convert", tb_files, "--to", "tensorboard", tmp_path / "out", check=2)
    assert proc.stderr.startswith("msnb convert: error: ") and proc.stderr.count("\n") == 1 and "tfevents" in proc.stderr
    assert not list((tmp_path / "out").rglob("*tfevents*"))


def test_cli_convert_json_and_nothing_readable(ms_files, tmp_path, run_msnb):
    proc = run_msnb("convert", ms_files / "ranks", "--to", "tensorboard", tmp_path / "tb", "--json", check=0)
    report = json.loads(proc.stdout)
    assert report["written"]["scalars"] == len(msnb.read(ms_files / "ranks").scalars) and len(report["files"]) == 2
    again = run_msnb("convert", ms_files / "ranks", "--to", "tensorboard", tmp_path / "tb", check=0)
    assert "nothing new" in again.stdout
    live = run_msnb("convert", ms_files / "record", "--to", "tensorboard", tmp_path / "live", "--follow", "--interval", "0.2", "--timeout", "1", check=0)
    assert " written so far" in live.stderr and "(s)" not in live.stderr and live.stdout.startswith("wrote ")  # the last pass's report
    assert len(load(next((tmp_path / "live").rglob("events.out.tfevents.*")).parent).Scalars("lr")) == 120
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_msnb("convert", empty, "--to", "tensorboard", tmp_path / "tb2", check=2)
    assert "nothing msnb can read" in proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


def _post_json(url: str, body: dict, timeout: float = 10.0):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def test_headless_tensorboard_lists_the_runs_and_scalar_tags(ms_files, tmp_path):
    dst = tmp_path / "tb"
    for run in ("ranks", "record", "collector"):
        convert(ms_files / run, dst / run)
    port = _free_port()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(dst), "--host", "127.0.0.1", "--port", str(port), "--load_fast", "false"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        runs = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                runs = _get_json(base + "/data/runs")
                loaded = _get_json(base + "/data/plugin/scalars/tags") if len(runs) >= 5 else {}
                if all(loaded.get(run) for run in ("ranks/ranks/rank_0", "ranks/ranks/rank_1", "record/record/rank_0")):
                    break  # listed and loaded: TensorBoard lists a run as it adds it, before its reload has read it
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace")[-2000:]
            time.sleep(0.5)
        assert sorted(runs) == ["collector/collector", "collector/collector/rank_0", "ranks/ranks/rank_0", "ranks/ranks/rank_1", "record/record/rank_0"]
        tags = _get_json(base + "/data/plugin/scalars/tags")
        assert set(tags["ranks/ranks/rank_0"]) == {"loss"} and set(tags["record/record/rank_0"]) == {"loss", "lr"}
        points = _get_json(base + "/data/plugin/scalars/scalars?run=ranks/ranks/rank_1&tag=loss")
        steps, values = msnb.read(ms_files / "ranks").scalars.series("loss", rank=1)
        assert [p[1] for p in points] == steps.tolist() and same_f32([p[2] for p in points], values)
        listing = _get_json(base + "/data/plugins_listing")
        assert all(listing[p]["enabled"] for p in ("scalars", "histograms", "images", "text", "hparams"))
        # the HPARAMS tab's query: one session for the collector's run, with the lineage's hyper-parameters
        query = {"experimentName": "", "allowedStatuses": ["STATUS_SUCCESS", "STATUS_UNKNOWN"], "colParams": [], "startIndex": 0, "sliceSize": 100}
        groups_ = _post_json(base + "/data/plugin/hparams/session_groups", query)["sessionGroups"]
        train = msnb.read(ms_files / "collector").lineage.where(kind="train").fields[0]
        (group,) = groups_
        assert group["name"] == "collector/collector/rank_0"
        assert group["hparams"]["optimizer"] == train["optimizer"] and group["hparams"]["batch_size"] == train["batch_size"]
        assert group["hparams"]["team"] == "msnb"  # custom lineage data
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
