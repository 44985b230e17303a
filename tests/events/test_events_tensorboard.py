"""TensorBoard event files (tensorboardX, as mindformers writes them) and mindformers' logs."""

import math

import numpy as np
import pytest

import msnb
from tests.conftest import load_expected


def same(a: float, b) -> bool:
    return (b is None and math.isnan(a)) or a == b


@pytest.fixture(scope="module")
def tb(tb_files):
    return msnb.read(tb_files)


def test_tensorboardx_scalars_value_for_value(tb, tb_files):
    assert tb.problems == []
    expected = load_expected(tb_files)["files"]
    assert len(expected) == 2
    for rel, entry in expected.items():
        rank = int(rel.split("rank_")[1].split("/")[0])
        got = tb.scalars.where(rank=rank)
        assert got.run.tolist() == ["tensorboard"] * len(got)
        want = entry["scalars"]
        assert len(got) == len(want)
        for (tag, step, wall, value), t, s, w, v in zip(want, got.tag, got.step, got.wall_time, got.value):
            assert (t, s, w) == (tag, step, wall)
            # simple_value is float32 on disk; the TF2 double keeps its double precision
            assert same(v, value if value is None or tag == "tf2/double" else float(np.float32(value)))


def test_nan_on_one_rank_is_kept(tb):
    steps, values = tb.scalars.series("loss", rank=1)
    assert math.isnan(values[steps == 60][0])
    assert not np.isnan(tb.scalars.series("loss", rank=0)[1]).any()


def test_tf2_style_tensor_scalars(tb):
    steps, values = tb.scalars.series("tf2/float", rank=0)
    assert steps.tolist() == [101, 102] and values.tolist() == [25.25, 25.5]
    steps, values = tb.scalars.series("tf2/double", rank=0)
    assert values.tolist() == [101 * 0.125, 102 * 0.125]


def test_text_and_histograms(tb, tb_files):
    expected = load_expected(tb_files)["files"]
    for rel, entry in expected.items():
        rank = int(rel.split("rank_")[1].split("/")[0])
        texts = tb.texts.where(rank=rank)
        assert [(t, s, [x]) for t, s, x in zip(texts.tag, texts.step, texts.text)] == [tuple(x) for x in entry["texts"]]
        hists = tb.histograms.where(rank=rank)
        assert len(hists) == len(entry["histograms"]) == 4
        for want, row in zip(entry["histograms"], hists.rows()):
            assert (row["tag"], row["step"], row["min"], row["max"], row["sum"], row["count"]) == (
                want["tag"],
                want["step"],
                want["min"],
                want["max"],
                want["sum"],
                want["num"],
            )
            np.testing.assert_array_equal(row["counts"], want["bucket"])
            np.testing.assert_array_equal(row["right"][:-1], want["bucket_limit"][:-1])
            assert row["counts"].sum() == row["count"]


def test_mindformers_tensorboard_and_log(mf_files):
    """A training monitored by MFLossMonitor: its TensorBoard scalars and its log lines agree with the losses the step saw."""
    expected = load_expected(mf_files)
    recorded = expected["train_losses"]  # (global step, loss, global norm)
    result = msnb.read(mf_files)
    assert result.problems == []

    board = result.scalars.where(run="tensorboard", rank=0)
    assert {"loss", "learning-rate", "grad-norm", "batch-size"} <= set(board.tags())
    steps, losses = board.series("loss")
    assert steps.tolist() == [s for s, _, _ in recorded] == list(range(1, 21))
    np.testing.assert_array_equal(losses, np.float32([loss for _, loss, _ in recorded]))
    np.testing.assert_array_equal(board.series("grad-norm")[1], np.float32([n for _, _, n in recorded]))
    assert board.series("learning-rate")[1].tolist() == [pytest.approx(expected["lr"])] * 20

    log = result.scalars.where(run="output/log", rank=0)
    steps, losses = log.series("loss")
    assert steps.tolist() == list(range(1, 21))  # epoch 2 step 1 is global step 11
    np.testing.assert_allclose(losses, [loss for _, loss, _ in recorded], atol=5e-7)  # printed with 6 decimals
    np.testing.assert_allclose(log.series("global_norm")[1], [n for _, _, n in recorded], rtol=1e-6)
    assert log.series("lr")[1].tolist() == [expected["lr"]] * 20
    assert log.series("loss_scale")[1].tolist() == [1.0] * 20
    assert (log.series("step_time_ms")[1] >= 0).all() and (log.series("throughput")[1] > 0).all()
    walls = log.where(tag="loss").wall_time
    assert np.isfinite(walls).all() and (np.diff(walls) >= 0).all()


MF_LINES = """\
2025-03-01 10:00:00,100 - mindformers[mindformers/core/callback/callback.py:747] - INFO - { Epoch:[  1/  2], step:[    1/    3], loss:[2.500000/2.500000], per_step_time: 120ms, lr: 0.0001, overflow cond: False, loss_scale: 1024.0, global_norm: [1.75], train_throughput_per_npu: 1.234T
2025-03-01 10:00:00,200 - mindformers[mindformers/core/callback/callback.py:764] - INFO -   16.7% |████████      | 33.33333 samples/s/p  0:00:10 }
2025-03-01 10:00:01,100 - mindformers[mindformers/core/callback/callback.py:747] - INFO - { Epoch:[  1/  2], step:[    3/    3], loss: 2.100000, per_step_time: 110ms, lr: [1.e-04], overflow cond: False, loss_scale: 1024.0, global_norm: [1.5]
2025-03-01 10:00:02,100 - mindformers[mindformers/core/callback/callback.py:747] - INFO - { Epoch:[  2/  2], step:[    2/    3], loss: nan, per_step_time: 100ms, lr: 0.0001, overflow cond: True, loss_scale: 512.0, global_norm: [inf]
"""


def test_mfloss_monitor_line_forms(tmp_path):
    """Normal and sink-mode loss forms, bracketed lr/norm, NaN/Inf, throughput from the progress line."""
    log = tmp_path / "worker_3.log"
    log.write_text(MF_LINES)
    result = msnb.read(log)
    sc = result.scalars
    assert set(sc.rank.tolist()) == {3}  # msrun's worker_N.log names the rank
    steps, losses = sc.series("loss")
    assert steps.tolist() == [1, 3, 5]
    assert losses[:2].tolist() == [2.5, 2.1] and math.isnan(losses[2])
    assert sc.series("global_norm")[1][:2].tolist() == [1.75, 1.5] and math.isinf(sc.series("global_norm")[1][2])
    assert sc.series("lr")[1].tolist() == [1e-4] * 3
    assert sc.series("loss_scale")[1].tolist() == [1024.0, 1024.0, 512.0]
    assert sc.series("step_time_ms")[1].tolist() == [120.0, 110.0, 100.0]
    assert sc.series("throughput")[0].tolist() == [1] and sc.series("throughput")[1].tolist() == [33.33333]


def test_loss_monitor_epochs_without_time_monitor(tmp_path):
    """Without TimeMonitor, an epoch's length is the last step printed in it."""
    log = tmp_path / "train.log"
    log.write_text("".join(f"epoch: {e} step: {s}, loss is {10 - e - s / 10}\n" for e in (1, 2, 3) for s in range(1, 6)))
    steps, _ = msnb.read(log).scalars.series("loss")
    assert steps.tolist() == list(range(1, 16))


def test_unrecognised_log_given_explicitly_is_reported(tmp_path):
    log = tmp_path / "notes.log"
    log.write_text("nothing to see here\n")
    result = msnb.read(log)
    assert result.empty
    assert [p.kind for p in result.problems] == ["foreign"] and str(log) in str(result.problems[0])


# ------------------------------------------------------------------ conformance with other writers (issue: files written by others)


def _accumulator(path):
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(path), size_guidance=dict.fromkeys(ea.DEFAULT_SIZE_GUIDANCE, 0))
    acc.Reload()
    return acc


def test_histogram_statistics_of_zero_read_as_zero_as_tensorboard_reads_them(tmp_path):
    """HistogramProto is proto3: a min, max or sum of exactly 0 is not written, and means 0 (a ReLU's min, a dead gradient)."""
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(3)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_histogram("relu", np.maximum(rng.standard_normal(1000), 0.0), 1)
        w.add_histogram("dead", np.zeros(64), 1)
        w.add_histogram("negative", -np.abs(rng.standard_normal(100)) - 1.0, 1)
    got = msnb.read(tmp_path)
    assert got.problems == []
    (path,) = tmp_path.glob("events.out.tfevents.*")
    acc = _accumulator(path)
    for tag in ("relu", "dead", "negative"):
        (row,) = got.histograms.where(tag=tag).rows()
        (event,) = acc.Histograms(tag)
        h = event.histogram_value
        assert (row["min"], row["max"], row["sum"], row["count"]) == (h.min, h.max, h.sum, h.num)
    (dead,) = got.histograms.where(tag="dead").rows()
    assert (dead["min"], dead["max"], dead["sum"], dead["count"]) == (0.0, 0.0, 0.0, 64)
    assert next(got.histograms.where(tag="relu").rows())["min"] == 0.0


def test_tf2_histograms_say_their_sum_is_unknown_and_estimate_it_apart(tmp_path):
    """TF2 histograms hold buckets only: the sum column says NaN (unknown), estimated_sum gives the bucket estimate and says so."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.histogram import summary_v2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    data = np.arange(10.0)
    writer = EventFileWriter(str(tmp_path))
    writer.add_event(event_pb2.Event(wall_time=1.5, step=3, summary=summary_v2.histogram_pb("w", data, buckets=5)))
    writer.close()
    tf1 = tmp_path / "tf1"
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(tf1)) as w:
        w.add_histogram("w", data, 3)
    got = msnb.read(tmp_path)
    v2 = got.histograms.where(run=".")
    (row,) = v2.rows()
    assert math.isnan(row["sum"]) and row["counts"].sum() == row["count"] == 10
    assert (row["min"], row["max"]) == (0.0, 9.0)  # TF2 draws its edges from the data's extremes
    sums, estimated = v2.estimated_sum()
    assert estimated.tolist() == [True] and sums[0] == pytest.approx(45.0, rel=0.1)
    exact = got.histograms.where(run="tf1")
    sums, estimated = exact.estimated_sum()
    assert estimated.tolist() == [False] and sums.tolist() == [45.0] == exact.sum.tolist()


def test_hyper_parameters_written_by_tensorboardx_read_as_lineage(tmp_path):
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(tmp_path)) as w:
        w.add_hparams({"lr": 0.1, "optimizer": "adam", "warmup": True, "layers": 12}, {"hparam/accuracy": 0.9})
    got = msnb.read(tmp_path)
    assert got.problems == []
    rows = {r["kind"]: r["fields"] for r in got.lineage.rows()}
    assert rows["hparams"] == {"lr": 0.1, "optimizer": "adam", "warmup": True, "layers": 12.0}
    assert rows["hparams_experiment"]["hparams"] == {"lr": "float64", "optimizer": "string", "warmup": "bool", "layers": "float64"}
    assert rows["hparams_experiment"]["metrics"] == ["hparam/accuracy"]
    assert rows["hparams_end"] == {"status": "success"}
    assert got.scalars.series("hparam/accuracy")[1].tolist() == [pytest.approx(0.9)]
    assert msnb.read(tmp_path, tags=["loss"]).lineage.kind.tolist() == got.lineage.kind.tolist()  # lineage has no tag: always kept


def _wav(samples: int, rate: int) -> bytes:
    import io
    import wave

    buf = io.BytesIO()
    with wave.open(buf, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(b"\x00\x00" * samples)
    return buf.getvalue()


def test_only_the_text_plugin_is_text_other_plugins_strings_are_reported(tmp_path):
    """A custom_scalars layout is a serialized proto in a string tensor: not text, and said so once (audio too)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboardX import SummaryWriter

    layout = {"Losses": {"both": ["Multiline", ["loss/train", "loss/eval"]]}}
    with SummaryWriter(str(tmp_path)) as w:
        w.add_custom_scalars(layout)
        w.add_text("notes", "hello **world**", 1)
    writer = EventFileWriter(str(tmp_path / "audio"))
    for step in (1, 2):
        audio = summary_pb2.Summary.Audio(sample_rate=8000, num_channels=1, length_frames=100, encoded_audio_string=_wav(100, 8000), content_type="audio/wav")
        writer.add_event(
            event_pb2.Event(wall_time=1.0 + step, step=step, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="clip", audio=audio)]))
        )
    writer.close()
    got = msnb.read(tmp_path)
    assert [(r["tag"], r["text"]) for r in got.texts.rows()] == [("notes/text_summary", "hello **world**")]  # tensorboardX adds the suffix
    assert len(got.tensors) == 0 and len(got.scalars) == 0
    not_read = sorted((p.kind, p.severity, p.message.split(":")[0]) for p in got.problems)
    assert not_read == [("not_read", "info", "tag 'clip'"), ("not_read", "info", "tag 'custom_scalars__config__'")]  # once per tag, not per step
    assert "custom_scalars" in str(got.problems) and "audio" in str(got.problems)


PYNATIVE_LINES = [
    # as mindformers/pynative/callback/loss_callback.py formats them (mindformers 1.9.0): the f-strings of _print_log
    "{ "
    + ", ".join(
        [
            f"step:[{1:5d}/{10:5d}]",
            f"loss: {11.813965:10.6f}",
            f"per_step_time: {13570:6d}ms",
            f"lr: {1e-05:10.6e}",
            f"grad_norm: {13.831877:10.6f}",
            f"throughput: {1.36:6.2f}T",
        ]
    )
    + " }",
    "{ "
    + ", ".join([f"step:[{2:5d}/{10:5d}]", f"loss: {11.755612:10.6f}", f"per_step_time: {710:6d}ms", "grad_norm: NaN", f"throughput: {25.92:6.2f}T"])
    + " }",
]


def test_mindformers_dynamic_graph_trainer_log(tmp_path):
    log = tmp_path / "worker_0.log"
    log.write_text("".join(f"2025-06-01 10:00:0{i},000 - mindformers[loss_callback.py:190] - INFO - {line}\n" for i, line in enumerate(PYNATIVE_LINES)))
    got = msnb.read(log)
    # nothing only 2.x prints: the lines could be 1.9's, whose throughput is 1000x too small; named, never rescaled
    assert [(p.kind, p.severity) for p in got.problems] == [("unit", "warning")]
    assert "mindformers 1.9" in got.problems[0].message and "1000 times too small" in got.problems[0].message
    sc = got.scalars
    assert sc.series("loss")[0].tolist() == [1, 2] and sc.series("loss")[1].tolist() == [11.813965, 11.755612]
    assert sc.series("step_time_ms")[1].tolist() == [13570.0, 710.0]
    assert sc.series("lr")[0].tolist() == [1] and sc.series("lr")[1].tolist() == [1e-05]
    steps, norms = sc.series("grad_norm")
    assert steps.tolist() == [1, 2] and norms[0] == 13.831877 and math.isnan(norms[1])
    assert sc.series("model-flops-throughput-per-npu")[1].tolist() == [1.36, 25.92]
    assert sc.resolve_tag("flops") == "model-flops-throughput-per-npu" and sc.resolve_tag("throughput") is None  # FLOP/s, not samples/s
    assert np.isfinite(sc.wall_time).all()


def test_mfloss_monitor_throughput_per_npu_read_and_a_two_number_norm_declined(tmp_path):
    """train_throughput_per_npu is read under mindformers' TensorBoard tag; "global_norm: [1 31049]" is two numbers: not read, reported."""
    head = "2025-04-07 15:34:27,308 - [mindformers/core/callback/callback.py:529] - INFO - { Epoch:[  1/  2], step:[    {s}/   19], loss: 10.649, "
    lines = [
        head.replace("{s}", "1")
        + "per_step_time: 103328ms, lr: 0.0, overflow cond: False, loss_scale: 1.0, global_norm: [1 31049], train_throughput_per_npu: 2.896T",
        head.replace("{s}", "2")
        + "per_step_time: 1752ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0, global_norm: [1 508834], train_throughput_per_npu: 170.738T",
        head.replace("{s}", "3") + "lm_loss: 10.5, per_step_time: 1754ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0, global_norm: [10.579812]",
    ]
    log = tmp_path / "worker_0.log"
    log.write_text("\n".join(lines) + "\n")
    got = msnb.read(log)
    sc = got.scalars
    assert sc.series("model-flops-throughput-per-npu")[1].tolist() == [2.896, 170.738]
    steps, norms = sc.series("global_norm")
    assert steps.tolist() == [3] and norms.tolist() == [10.579812]  # never 1.0
    assert sc.series("lm_loss")[1].tolist() == [10.5]
    (problem,) = got.problems
    assert problem.kind == "not_read" and problem.severity == "warning"
    assert "'global_norm'" in problem.message and "2 lines" in problem.message and "line 1" in problem.message and "[1 31049]" in problem.message


def test_loss_monitor_upper_case_nan_and_inf_are_non_finite_points(tmp_path):
    """MindSpore prints an overflowed loss as NAN or INF: each is a point, not a skipped line."""
    log = tmp_path / "train.log"
    log.write_text(
        "epoch: 1 step: 1, loss is 2.5\nepoch: 1 step: 2, loss is INF\nepoch: 1 step: 3, loss is NAN\nepoch: 1 step: 4, loss is -INF\nepoch: 1 step: 5, loss is information\n"
    )
    steps, values = msnb.read(log).scalars.series("loss")
    assert steps.tolist() == [1, 2, 3, 4]
    assert values[0] == 2.5 and values[1] == math.inf and math.isnan(values[2]) and values[3] == -math.inf


def test_one_line_limit_for_every_log_line(tmp_path):
    """A TrainingStateMonitor list longer than 16 KiB is read whole; a line past the one limit (1 MiB) is parsed by its start and reported."""
    from msnb.events import logs, training_state

    assert logs.MAX_LINE == training_state.MAX_LINE == 1 << 20
    heads = [0.5 + i / 10_000 for i in range(4000)]  # about 40 KB of numbers
    prefix = "2025-01-01 00:00:00,000 - mindformers[callback.py:1496] - INFO - Epoch:[  1/  1], step:[    1/   10] "
    long_list = prefix + "max_attention_logit/layers.0.attention: [" + ", ".join(map(str, heads)) + "]"
    too_long = "epoch: 1 step: 2, loss is 1.5 " + "x" * (1 << 20)
    log = tmp_path / "train.log"
    log.write_text(long_list + "\n" + too_long + "\n")
    got = msnb.read(log)
    assert len(got.scalars.where(tag="max_attention_logit/layers.0.attention/head_3999")) == 1
    assert got.scalars.series("loss")[1].tolist() == [1.5]
    (problem,) = got.problems
    assert problem.kind == "line" and "1,048,576 characters" in problem.message
