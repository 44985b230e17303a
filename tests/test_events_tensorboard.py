"""TensorBoard event files (tensorboardX, as mindformers writes them) and mindformers' logs."""

import math

import numpy as np
import pytest

import msnb

from .conftest import load_expected


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
