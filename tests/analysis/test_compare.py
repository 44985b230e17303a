"""``msnb compare``: pairs of runs in every real format, judged by MindSpore's migration accuracy standard.

Baselines are written as their frameworks write them: Megatron-LM's ``training_log``
line (with and without its timestamp, every step or every 10), Megatron's
TensorBoard tags with spaces by TensorBoard's own writer (as torch's
SummaryWriter writes them), Hugging Face's ``trainer_state.json``.  Candidates are
mindformers' MFLossMonitor log lines (both loss forms) and mindformers'
TensorBoard files by tensorboardX.  Each scenario changes one thing and checks
that exactly the check that should fail fails, at the step it should.
"""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import msnb
from msnb.analysis.compare_rules import CompareRules
from msnb.errors import NothingReadable, UsageError
from msnb.events.tags import resolve
from tests.conftest import ipython_json

N = 1200  # steps: over the standard's 1,000
# other people's real training logs, read in place (never copied here); MSNB_PEER_CORPUS points elsewhere
CORPUS = Path(os.environ.get("MSNB_PEER_CORPUS") or Path(__file__).resolve().parents[3] / "shared" / "peer-corpus") / "files" / "baselines"


# ------------------------------------------------------------------ the runs
def run_values(n=N, *, seed=0, warmup=100, noise=0.0):
    """A loss falling from ~10 to ~2, a linear warmup then constant lr, a grad norm near 1.5."""
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(seed)
    loss = (2.0 + 8.0 * np.exp(-steps / 300.0)) * (1.0 + noise * rng.uniform(-1.0, 1.0, n))
    lr = 1e-4 * np.minimum(1.0, steps / warmup)
    grad = 1.5 + 0.2 * np.exp(-steps / 200.0) + 0.02 * rng.standard_normal(n)
    return {"steps": steps, "loss": loss, "lr": lr, "grad": grad}


def candidate_of(base, *, seed=1, noise=0.002):
    """The baseline's curve within +-noise (relative), as a faithful migration trains it."""
    rng = np.random.default_rng(seed)
    out = {k: v.copy() for k, v in base.items()}
    out["loss"] = base["loss"] * (1.0 + noise * rng.uniform(-1.0, 1.0, base["loss"].size))
    return out


# ------------------------------------------------------------------ the writers
def write_megatron_log(path, run, *, timestamps=True, every=1, total=None):
    total = total or int(run["steps"][-1])
    with open(path, "w") as f:
        f.write("using world size: 8, data-parallel size: 8\n------------------------ arguments ------------------------\n")
        for s, loss, lr, grad in zip(run["steps"], run["loss"], run["lr"], run["grad"]):
            if s % every:
                continue
            stamp = "[2024-06-01 10:00:00] " if timestamps else ""
            f.write(
                f" {stamp}iteration {s:8d}/{total:8d} | consumed samples: {s * 8:12d} | elapsed time per iteration (ms): 311.9 | "
                f"learning rate: {lr:.3E} | global batch size:     8 | lm loss: {loss:.6E} | loss scale: 262144.0 | grad norm: {grad:.3f} | "
                f"number of skipped iterations:   0 | number of nan iterations:   0 |\n"
            )
            if s % 500 == 0:
                f.write(f" validation loss at iteration {s} | lm loss value: {loss:.6E} | lm loss PPL: {math.exp(min(loss, 50)):.6E} | \n")


def write_megatron_tensorboard(directory, run):
    """Megatron's tags as torch's SummaryWriter keeps them (spaces and all), by TensorBoard's own event writer."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    os.makedirs(directory, exist_ok=True)
    writer = EventFileWriter(str(directory))
    for s, loss, lr, grad in zip(run["steps"], run["loss"], run["lr"], run["grad"]):
        values = [summary_pb2.Summary.Value(tag=t, simple_value=float(v)) for t, v in (("lm loss", loss), ("learning-rate", lr), ("grad-norm", grad))]
        writer.add_event(event_pb2.Event(step=int(s), wall_time=1.7e9 + float(s), summary=summary_pb2.Summary(value=values)))
    writer.close()


def write_trainer_state(path, run, *, every=1):
    history = [
        {"epoch": float(s) / len(run["steps"]), "grad_norm": float(g), "learning_rate": float(lr), "loss": round(float(loss), 4), "step": int(s)}
        for s, loss, lr, g in zip(run["steps"], run["loss"], run["lr"], run["grad"])
        if s % every == 0
    ]
    history.append({"epoch": 1.0, "step": int(run["steps"][-1]), "train_loss": 3.1, "train_runtime": 100.0})
    with open(path, "w") as f:
        json.dump({"global_step": int(run["steps"][-1]), "log_history": history, "logging_steps": every}, f, indent=2)


def write_mindformers_log(path, run, *, sink=False, rank_lines=False):
    """MFLossMonitor's line through mindformers' logger (both loss forms: ``loss:[x/avg]`` and sink mode's ``loss: x``)."""
    n = len(run["steps"])
    with open(path, "w") as f:
        for s, loss, lr, grad in zip(run["steps"], run["loss"], run["lr"], run["grad"]):
            shown = f"loss: {loss:.6f}, " if sink else f"loss:[{loss:.6f}/{loss:.6f}], "
            f.write(
                f"2024-06-01 10:00:00,100 - mindformers[mindformers/core/callback/callback.py:747] - INFO - {{ Epoch:[  1/  1], step:[{s:5d}/{n:5d}], "
                f"{shown}per_step_time: 120ms, lr: {lr}, overflow cond: False, loss_scale: 1.0, global_norm: [{grad}], train_throughput_per_npu: 1.2T\n"
            )


def write_mindformers_tensorboard(directory, run):
    """mindformers' Trainer writes ``loss``, ``learning-rate`` and ``grad-norm`` per rank with tensorboardX."""
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(directory))
    for s, loss, lr, grad in zip(run["steps"], run["loss"], run["lr"], run["grad"]):
        w.add_scalar("loss", float(loss), int(s))
        w.add_scalar("learning-rate", float(lr), int(s))
        w.add_scalar("grad-norm", float(grad), int(s))
    w.close()


BASELINES = {
    "megatron-log": lambda d, run: (write_megatron_log(d / "train.log", run), d / "train.log")[1],
    "megatron-log-no-timestamp": lambda d, run: (write_megatron_log(d / "stdout.out", run, timestamps=False), d / "stdout.out")[1],
    "megatron-log-interval-10": lambda d, run: (write_megatron_log(d / "train.log", run, every=10), d / "train.log")[1],
    "megatron-tensorboard": lambda d, run: (write_megatron_tensorboard(d / "tb", run), d / "tb")[1],
    "hf-trainer-state": lambda d, run: (write_trainer_state(d / "trainer_state.json", run), d / "trainer_state.json")[1],
}
CANDIDATES = {
    "mindformers-log": lambda d, run: (write_mindformers_log(d / "info.log", run), d / "info.log")[1],
    "mindformers-log-sink": lambda d, run: (write_mindformers_log(d / "info.log", run, sink=True), d / "info.log")[1],
    "mindformers-tensorboard": lambda d, run: (write_mindformers_tensorboard(d / "tensorboard" / "rank_0", run), d / "tensorboard")[1],
}


def pair(tmp_path, base_run, cand_run, base_kind="megatron-log", cand_kind="mindformers-log"):
    (tmp_path / "b").mkdir(exist_ok=True)
    (tmp_path / "c").mkdir(exist_ok=True)
    return BASELINES[base_kind](tmp_path / "b", base_run), CANDIDATES[cand_kind](tmp_path / "c", cand_run)


def statuses(result):
    return {c.name: c.status for c in result.checks}


# ------------------------------------------------------------------ the readers
def test_megatron_log_lines_read_with_and_without_timestamps(tmp_path):
    run = run_values(30)
    write_megatron_log(tmp_path / "a.log", run)
    write_megatron_log(tmp_path / "b.log", run, timestamps=False, every=10)
    a = msnb.read(tmp_path / "a.log")
    b = msnb.read(tmp_path / "b.log")
    steps, loss = a.scalars.series("lm loss")
    assert steps.tolist() == list(range(1, 31)) and np.allclose(loss, run["loss"], rtol=1e-6)
    assert b.scalars.series("lm loss")[0].tolist() == [10, 20, 30]
    assert {"learning rate", "grad norm", "loss scale", "consumed samples"} <= set(a.scalars.tags())
    assert np.isfinite(a.scalars.wall_time).all() and np.isnan(b.scalars.wall_time).all()
    assert a.problems == [] and b.problems == []


def test_megatron_nan_and_bad_lines_are_points_and_problems_not_errors(tmp_path):
    path = tmp_path / "train.log"
    good = " iteration        1/     100 | learning rate: 1.000E-05 | lm loss: 1.043863E+01 | grad norm: 26.203 |\n"
    path.write_text(
        good
        + " iteration        2/     100 | learning rate: 2.000E-05 | lm loss: NAN | grad norm: INF |\n"
        + " iteration        3/     100 | garbage without fields |\n"
        + " iteration 99999999999999999999999/ 1 | lm loss: 1.0 |\n"
        + " iteration        4/     100 | lm loss: "
        + "9" * 100_000
        + " |\n"
        + " iteration        5/     100 | lm loss: "
        + "9" * (2 << 20)
        + " |\n"
    )
    r = msnb.read(path)
    steps, loss = r.scalars.series("lm loss")
    assert steps.tolist() == [1, 2] and math.isnan(loss[1])  # a 100,000-digit field is no number
    assert np.isinf(r.scalars.series("grad norm")[1][1])
    assert any("line 3" in p.message for p in r.problems)
    assert any(p.kind == "line" for p in r.problems)  # the 2 MB line: its start parsed, reported


def test_hf_trainer_state_and_tables(tmp_path):
    run = run_values(40)
    write_trainer_state(tmp_path / "trainer_state.json", run, every=5)
    r = msnb.read(tmp_path / "trainer_state.json")
    assert r.scalars.series("loss")[0].tolist() == list(range(5, 41, 5))
    assert r.scalars.series("train_loss")[0].tolist() == [40]  # the summary entry: its own tag, not the per-step loss
    (tmp_path / "long.csv").write_text("step,tag,value\n1,loss,2.5\n2,loss,2.4\n3,loss,oops\n")
    (tmp_path / "wide.csv").write_text("step,loss,lr\n1,2.5,0.1\n2,2.4,0.1\n")
    (tmp_path / "p.jsonl").write_text('{"step": 1, "tag": "loss", "value": 2.5}\n{"step": "x", "tag": "loss", "value": 1}\nnot json\n')
    long, wide, jl = (msnb.read(tmp_path / n) for n in ("long.csv", "wide.csv", "p.jsonl"))
    assert long.scalars.series("loss")[1].tolist() == [2.5, 2.4] and "line 4" in long.problems[0].message
    assert wide.scalars.series("lr")[1].tolist() == [0.1, 0.1]
    assert jl.scalars.series("loss")[0].tolist() == [1] and len(jl.problems) == 2


def test_byte_order_marks_are_read(tmp_path):
    (tmp_path / "a.csv").write_text("step,loss\n1,2.0\n", encoding="utf-8-sig")
    (tmp_path / "trainer_state.json").write_text('{"log_history": [{"step": 1, "loss": 2.0}]}', encoding="utf-8-sig")
    for name in ("a.csv", "trainer_state.json"):
        r = msnb.read(tmp_path / name)
        assert r.scalars.series("loss")[1].tolist() == [2.0] and r.problems == []


def test_hostile_json_is_a_problem(tmp_path):
    (tmp_path / "trainer_state.json").write_text("[" * 100_000)
    r = msnb.read(tmp_path / "trainer_state.json")
    assert not len(r.scalars) and r.problems[0].kind == "foreign"


def test_megatron_tensorboard_tags_with_spaces_are_found_by_meaning(tmp_path):
    run = run_values(50)
    write_megatron_tensorboard(tmp_path / "tb", run)
    tags = msnb.read(tmp_path / "tb").scalars.tags()
    assert "lm loss" in tags
    assert resolve("loss", tags, compared=True) == "lm loss" and resolve("lr", tags, compared=True) == "learning-rate"


# ------------------------------------------------------------------ the verdicts
@pytest.mark.parametrize("cand_kind", sorted(CANDIDATES))
@pytest.mark.parametrize("base_kind", sorted(BASELINES))
def test_an_aligned_pair_passes_in_every_format(tmp_path, base_kind, cand_kind):
    base = run_values()
    b, c = pair(tmp_path, base, candidate_of(base), base_kind, cand_kind)
    result = msnb.compare(b, c)
    assert result.passed, result.format_text()
    assert result.first_divergence is None
    expect = 120 if base_kind == "megatron-log-interval-10" else N
    assert result.common_steps == expect
    assert statuses(result)["coverage"] == ("warn" if expect < 1000 else "pass")
    assert [c.name for c in result.checks] == ["lr_schedule", "first_loss", "mean_error", "grad_norm", "finite", "coverage"]
    assert statuses(result)["lr_schedule"] == "pass" and statuses(result)["grad_norm"] == "pass"


@pytest.mark.parametrize("onset", [300, 800])
def test_a_drift_fails_with_the_step_it_began(tmp_path, onset):
    base = run_values()
    cand = candidate_of(base)
    later = cand["steps"] > onset
    cand["loss"][later] *= 1.0 + 0.0004 * (cand["steps"][later] - onset)
    result = msnb.compare(*pair(tmp_path, base, cand))
    assert not result.passed and statuses(result)["mean_error"] == "fail"
    d = result.first_divergence
    assert d is not None and abs(d.step - onset) <= 40, result.format_text()
    assert "drifts" in d.reason and d.baseline is not None and d.candidate is not None


def test_a_late_drift_with_a_small_whole_run_mean_still_fails(tmp_path):
    base = run_values(3000)
    cand = candidate_of(base)
    late = cand["steps"] > 2850
    cand["loss"][late] *= 1.05
    result = msnb.compare(*pair(tmp_path, base, cand))
    m = result.check("mean_error")
    assert m.value["rel"] < 0.01 < m.value["tail_rel"], m.detail  # the whole-run mean passes: only the window catches it
    assert m.status == "fail" and abs(result.first_divergence.step - 2851) <= 10


def test_a_two_percent_first_loss_error_fails_first_loss_only(tmp_path):
    base = run_values()
    cand = candidate_of(base)
    cand["loss"][0] *= 1.02
    result = msnb.compare(*pair(tmp_path, base, cand))
    assert {k for k, v in statuses(result).items() if v != "pass"} == {"first_loss"}, result.format_text()
    assert result.check("first_loss").value["rel"] == pytest.approx(0.02, rel=0.15)


def test_a_different_warmup_fails_lr_schedule_at_step_1(tmp_path):
    base = run_values()
    cand = candidate_of(base)
    cand["lr"] = run_values(warmup=200)["lr"]
    result = msnb.compare(*pair(tmp_path, base, cand))
    assert statuses(result)["lr_schedule"] == "fail" and "from step 1:" in result.check("lr_schedule").detail
    assert "skipped" not in result.check("lr_schedule").detail  # the baseline logged no skipped iteration: no hint about skips
    assert result.first_divergence.step == 1 and "learning rates" in result.first_divergence.reason
    assert [c.name for c in result.checks].index("lr_schedule") < [c.name for c in result.checks].index("first_loss")


def test_a_1_2_percent_error_fails_alone_and_passes_within_a_rerun_spread_of_1_5(tmp_path):
    base = run_values()
    cand = candidate_of(base, noise=0.0)
    cand["loss"] = base["loss"] * (1.0 + 0.012 * np.where(np.arange(N) % 2, 1, -1))  # fluctuates around zero: no drift
    rerun = candidate_of(base, noise=0.0)
    rerun["loss"] = base["loss"] * (1.0 + 0.015 * np.where(np.arange(N) % 3, 1, -1))
    b, c = pair(tmp_path, base, cand)
    (tmp_path / "r").mkdir()
    r = BASELINES["megatron-log"](tmp_path / "r", rerun)
    alone = msnb.compare(b, c)
    assert statuses(alone)["mean_error"] == "fail" and not alone.passed
    relaxed = msnb.compare(b, c, reruns=[r])
    assert relaxed.passed, relaxed.format_text()
    assert relaxed.tolerance["mean_rel"] == pytest.approx(0.015, rel=0.01) and relaxed.tolerance["reruns"] == 1
    assert relaxed.first_divergence is None
    assert relaxed.baseline == [str(b), str(r)]
    # the figure: a candidate a step above, a step below draws its per-step difference as dots at the two levels, not a
    # line joining them (1,500 zig-zags were one solid grey block)
    from msnb.plot.compare import plot_compare

    per_step = [line for line in plot_compare(relaxed).axes[1].get_lines() if line.get_label() == "candidate - baseline per step"]
    assert len(per_step) == 1 and per_step[0].get_linestyle() == "None" and per_step[0].get_marker() == "."
    levels = np.round(np.abs(per_step[0].get_ydata()), 1)
    assert set(levels.tolist()) <= {1.2}  # every dot at +-1.2 %


def test_a_nan_fails_finite_at_its_step(tmp_path):
    base = run_values()
    cand = candidate_of(base)
    cand["loss"][733] = math.nan  # step 734
    result = msnb.compare(*pair(tmp_path, base, cand))
    assert statuses(result)["finite"] == "fail" and result.check("finite").value == 734
    assert "candidate" in result.check("finite").detail
    assert result.first_divergence.step == 734 and result.first_divergence.candidate is None


def test_a_15_percent_higher_global_norm_fails_grad_norm(tmp_path):
    base = run_values()
    cand = candidate_of(base)
    cand["grad"] = base["grad"] * 1.15
    result = msnb.compare(*pair(tmp_path, base, cand, "hf-trainer-state", "mindformers-tensorboard"))
    assert {k for k, v in statuses(result).items() if v == "fail"} == {"grad_norm"}
    assert result.check("grad_norm").value == pytest.approx(0.15, rel=0.02) and result.check("grad_norm").limit == 0.10


def test_ranks_median_or_one_rank_and_restarts(tmp_path):
    base = run_values()
    (tmp_path / "b").mkdir()
    b = BASELINES["megatron-log"](tmp_path / "b", base)
    good = candidate_of(base)
    bad = candidate_of(base, seed=3)
    bad["loss"] = bad["loss"] * 1.2
    for rank, run in ((0, good), (1, good), (2, bad)):
        write_mindformers_tensorboard(tmp_path / "c" / f"rank_{rank}", run)
    median = msnb.compare(b, tmp_path / "c")
    assert median.passed and median.ranks["candidate"] == "median of 3 ranks"
    one = msnb.compare(b, tmp_path / "c", rank=2)
    assert not one.passed and one.ranks["candidate"] == "rank 2"
    with pytest.raises(UsageError, match="no rank 7"):
        msnb.compare(b, tmp_path / "c", rank=7)
    # a job restarted from step 600 wrote 600.. again: the later records win, as in msnb check
    restarted, tail = tmp_path / "restart.log", tmp_path / "tail.log"
    first = {k: v[:700] for k, v in candidate_of(base, seed=4).items()}
    first["loss"] = first["loss"] * 1.3
    write_mindformers_log(restarted, first)
    write_mindformers_log(tail, {k: v[599:] for k, v in good.items()})
    restarted.write_text(restarted.read_text() + tail.read_text())
    result = msnb.compare(b, restarted, steps="600:")
    assert result.passed and any("restarted" in n for n in result.notes), result.format_text()


def test_offset_steps_and_tag_options(tmp_path):
    base = run_values()
    cand = candidate_of(base)
    zero_based = {k: v.copy() for k, v in cand.items()}
    zero_based["steps"] = cand["steps"] - 1  # a candidate counting from 0
    b, c = pair(tmp_path, base, zero_based)
    assert msnb.compare(b, c, offset=1).common_steps == N
    window = msnb.compare(b, c, offset=1, steps="100:199")
    assert window.common_steps == 100 and window.step_range == [100, 199]
    assert msnb.compare(b, c, offset=1, tag="lm loss=loss").tags["loss"] == {"baseline": "lm loss", "candidate": "loss"}
    with pytest.raises(UsageError, match="no tag"):
        msnb.compare(b, c, tag="nope")
    with pytest.raises(UsageError, match="--steps"):
        msnb.compare(b, c, steps="9:1")
    with pytest.raises(NothingReadable, match="no common step"):
        msnb.compare(b, c, offset=10_000)
    strict = msnb.compare(b, c, offset=1, rules=CompareRules(mean_rel=0.0001, mean_abs=0.0))
    assert statuses(strict)["mean_error"] == "fail"


def test_result_json_shape(tmp_path):
    base = run_values()
    result = msnb.compare(*pair(tmp_path, base, candidate_of(base)))
    doc = json.loads(json.dumps(result.as_dict(), allow_nan=False))
    assert {"passed", "baseline", "candidate", "common_steps", "tolerance", "checks", "first_divergence"} <= set(doc)
    for check in doc["checks"]:
        assert set(check) == {"name", "status", "detail", "value", "limit"}
    assert "ALIGNED" in result.format_text() and "<table>" in result._repr_html_() and result.exit_code == 0


def test_a_zero_baseline_and_odd_rules_still_give_strict_json(tmp_path):
    (tmp_path / "base.csv").write_text("step,loss,lr\n" + "".join(f"{s},{0.0 if s == 1 else 1.0},0.0\n" for s in range(1, 40)))
    (tmp_path / "cand.jsonl").write_text("".join(json.dumps({"step": s, "tag": "loss", "value": 0.5}) + "\n" for s in range(1, 40)))
    result = msnb.compare(tmp_path / "base.csv", tmp_path / "cand.jsonl", rules=CompareRules(tail_fraction=0.0, tail_min_points=0, divergence_window=0))
    doc = json.loads(json.dumps(result.as_dict(), allow_nan=False))
    assert doc["checks"][1]["name"] == "first_loss" and doc["checks"][1]["value"]["rel"] is None  # 0.5 against 0: no finite relative error
    assert statuses(result)["mean_error"] == "fail" and statuses(result)["lr_schedule"] == "warn"  # no lr on the candidate


# ------------------------------------------------------------------ the command and the figure
def test_cli_exit_codes_json_and_figure(tmp_path, run_msnb):
    base = run_values()
    cand = candidate_of(base)
    b, c = pair(tmp_path, base, cand)
    drifted = {k: v.copy() for k, v in cand.items()}
    drifted["loss"][600:] *= 1.0 + 0.0004 * np.arange(N - 600)
    (tmp_path / "d").mkdir()
    d = CANDIDATES["mindformers-log"](tmp_path / "d", drifted)
    ok = run_msnb("compare", b, c, "--json", "--out", tmp_path / "fig.png", check=0)
    doc = json.loads(ok.stdout)
    assert doc["passed"] is True and doc["common_steps"] == N
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"
    bad = run_msnb("compare", b, d, check=1)
    assert "NOT ALIGNED" in bad.stdout and "first divergence at step" in bad.stdout
    missing = run_msnb("compare", b, tmp_path / "missing.log", check=2)
    assert "msnb compare: error:" in missing.stderr and "missing.log" in missing.stderr
    run_msnb("compare", b, c, "--steps", "x", check=2)
    run_msnb("compare", b, c, "--out", tmp_path / "no" / "dir.png", check=2)


def test_the_figure_draws_every_panel(tmp_path):
    from msnb.plot.compare import plot_compare

    base = run_values()
    cand = candidate_of(base)
    cand["loss"][800:] *= 1.05
    result = msnb.compare(*pair(tmp_path, base, cand), reruns=[])
    fig = plot_compare(result)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles == ["loss", "relative difference of the loss (%)", "learning rate", "global norm"]
    marked = [line for line in fig.axes[1].get_lines() if list(line.get_xdata()) == [result.first_divergence.step] * 2]
    assert marked, "the divergent step is marked"


# ------------------------------------------------------------------ other people's logs
@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no corpus of real baseline logs at {CORPUS} (set MSNB_PEER_CORPUS)")
def test_real_baselines_parse_and_the_real_pair_compares():
    files = sorted(p for p in CORPUS.rglob("*") if p.is_file())
    assert files
    for path in files:
        r = msnb.read(path)
        assert r is not None and len(r.scalars), path
        assert resolve("loss", r.scalars.tags(), compared=True) in ("lm loss", "loss"), path
        assert [p for p in r.problems if p.kind != "line"] == [], (path, r.problems[:3])
    tp4 = msnb.read(CORPUS / "megatron" / "llm-action_gpt2-345m_tp4.log")
    steps, loss = tp4.scalars.series("lm loss")
    assert steps[0] == 100 and loss[0] == pytest.approx(9.654853) and steps.size == 20
    # the same model with TP 4 and with PP 4: the loss within the standard on 20 common steps (a coverage warning), but the
    # learning rates part at step 300: the fp16 loss scaler skipped an iteration in one run (its log says so), and
    # Megatron's scheduler does not advance on a skipped iteration
    result = msnb.compare(CORPUS / "megatron" / "llm-action_gpt2-345m_tp4.log", CORPUS / "megatron" / "llm-action_gpt2-345m_pp4.log")
    assert result.common_steps == 20
    assert statuses(result) == {"lr_schedule": "fail", "first_loss": "pass", "mean_error": "pass", "grad_norm": "pass", "finite": "pass", "coverage": "warn"}
    assert result.first_divergence.step == 300 and result.first_divergence.baseline == pytest.approx(1.331e-05)
    assert "the baseline's 16, the candidate's 15" in result.check("lr_schedule").detail


def test_the_magic_compares_shows_the_figure_and_saves_it(tmp_path):

    base = run_values()
    cand = candidate_of(base)
    cand["lr"] = run_values(warmup=200)["lr"]
    b, c = pair(tmp_path, base, cand)
    state = ipython_json(
        f"r = ip.run_line_magic('mfmon_compare', \"'{b}' {c} --rank median --out {tmp_path / 'fig.png'}\")\n"
        "try:\n"
        f"    ip.run_line_magic('mfmon_compare', '{b} {c} --steps nine')\n"
        "    bad = None\n"
        "except UsageError as e:\n"
        "    bad = str(e)\n"
        "print(json.dumps({'type': type(r).__name__, 'passed': r.passed, 'failed': [x.name for x in r.checks if x.status == 'fail'], 'bad': bad}))\n"
    )
    assert state["type"] == "CompareResult" and state["passed"] is False and state["failed"] == ["lr_schedule"]
    assert state["bad"].startswith("msnb: --steps")
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_report_with_a_baseline_adds_the_alignment_section(tmp_path, run_msnb):
    base = run_values()
    cand = candidate_of(base)
    cand["loss"][900:] *= 1.05
    b, c = pair(tmp_path, base, cand)
    run_msnb("report", c, "--out", tmp_path / "r.html", "--baseline", b)
    page = (tmp_path / "r.html").read_text()
    assert 'id="alignment"' in page and "Precision alignment against the baseline" in page
    assert "mean_error" in page and "Left the baseline at step" in page and "data:image/png;base64," in page
    plain = run_msnb("report", c, "--out", tmp_path / "plain.html")
    assert plain.returncode in (0, 1) and 'id="alignment"' not in (tmp_path / "plain.html").read_text()
    missing = run_msnb("report", c, "--out", tmp_path / "m.html", "--baseline", tmp_path / "nope.log", check=2)
    assert "nope.log" in missing.stderr and not (tmp_path / "m.html").exists()


def test_a_checkpoint_folder_with_trainer_state_is_a_baseline(tmp_path):
    base = run_values()
    (tmp_path / "checkpoint-1200").mkdir()
    write_trainer_state(tmp_path / "checkpoint-1200" / "trainer_state.json", base)
    (tmp_path / "c").mkdir()
    c = CANDIDATES["mindformers-log"](tmp_path / "c", candidate_of(base, noise=0.0005))
    result = msnb.compare(tmp_path / "checkpoint-1200", c)
    assert result.passed and result.tags["loss"]["baseline"] == "loss" and result.common_steps == N


@pytest.mark.parametrize("seed", range(6))
def test_damaged_baselines_never_raise(tmp_path, seed):
    rng = np.random.default_rng(seed)
    run = run_values(60)
    write_megatron_log(tmp_path / "train.log", run)
    write_trainer_state(tmp_path / "trainer_state.json", run)
    (tmp_path / "t.csv").write_text("step,tag,value\n" + "".join(f"{s},loss,{v}\n" for s, v in zip(run["steps"], run["loss"])))
    for name in ("train.log", "trainer_state.json", "t.csv"):
        data = bytearray((tmp_path / name).read_bytes())
        for _ in range(20):  # flipped bytes, a cut, a burst of garbage
            data[int(rng.integers(len(data)))] = int(rng.integers(256))
        cut = int(rng.integers(len(data) // 2, len(data)))
        damaged = bytes(data[:cut]) + rng.bytes(int(rng.integers(1, 3000))) + b"iteration 5/ | : | lm loss: \xff|\n"
        (tmp_path / f"bad_{name}").write_bytes(damaged)
        got = msnb.read(tmp_path / f"bad_{name}")
        assert got is None or isinstance(got.problems, list)


def test_reading_only_some_megatron_fields_gives_the_same_points(tmp_path):
    """The few-fields path (one pattern per line, learned from the lines) equals the field-by-field read, fields missing or not."""
    run = run_values(300)
    write_megatron_log(tmp_path / "train.log", run, every=3)
    text = (tmp_path / "train.log").read_text().splitlines(keepends=True)
    text[5] = text[5].replace(" grad norm:", " grad-norm-missing:")  # a line without one field, as the fp16 scaler's skipped steps print
    text[9] = text[9].replace("lm loss: ", "lm loss: NAN ").replace("E+00 |", " |", 1)
    (tmp_path / "train.log").write_text("".join(text))
    paths = [tmp_path / "train.log"] + ([CORPUS / "megatron" / "bigscience_meg_gpt2_base_n4_dp1_tp4_pp4-1809579.out"] if CORPUS.is_dir() else [])
    wanted = ["lm loss", "grad norm", "learning rate", "number of skipped iterations", "validation lm loss value"]
    for path in paths:
        few = msnb.read(path, tags=wanted).scalars
        every = msnb.read(path).scalars
        every = every.take(np.isin(every.tag, wanted))
        a, b = np.lexsort((few.step, few.tag)), np.lexsort((every.step, every.tag))
        assert len(few) == len(every) > 0
        for column in ("tag", "step"):
            assert np.array_equal(getattr(few, column)[a], getattr(every, column)[b]), (path, column)
        assert np.array_equal(few.value[a], every.value[b], equal_nan=True)
        assert np.array_equal(few.wall_time[a], every.wall_time[b], equal_nan=True)


def test_real_writers_mindformers_log_against_its_tensorboard_and_a_megatron_log(mf_files, tmp_path):
    """mindformers' own MFLossMonitor and TensorBoard writer, on one CPU training: the log and the event files compare as aligned."""
    from tests.conftest import load_expected

    expected = load_expected(mf_files)
    log = next(mf_files.rglob("info.log"))
    same = msnb.compare(log, mf_files / "tensorboard")
    assert same.common_steps == expected["epochs"] * expected["steps_per_epoch"]
    assert statuses(same)["first_loss"] == statuses(same)["mean_error"] == "pass" and statuses(same)["lr_schedule"] == "pass"
    # a Megatron-LM baseline of the very losses the training returned, printed as Megatron prints them
    steps = np.array([s for s, _loss, _norm in expected["train_losses"]])
    run = {
        "steps": steps,
        "loss": np.array([x for _s, x, _n in expected["train_losses"]]),
        "lr": np.full(steps.size, expected["lr"]),
        "grad": np.array([n for _s, _x, n in expected["train_losses"]]),
    }
    write_megatron_log(tmp_path / "megatron.log", run)
    result = msnb.compare(tmp_path / "megatron.log", log)
    assert {c.name for c in result.checks if c.status == "fail"} == set(), result.format_text()
    assert result.tags["loss"] == {"baseline": "lm loss", "candidate": "loss"}


def test_real_writers_a_mindspore_summary_as_the_candidate(ms_files, tmp_path):
    """SummaryCollector's ``loss/auto`` against a CSV baseline of its own values, 0.1 % off: aligned."""
    collector = Path(ms_files) / "collector"  # SummaryCollector's summary beside LossMonitor's log of the same training
    scalars = msnb.read(collector).scalars
    auto = scalars.take(scalars.tag == "loss/auto")
    (tmp_path / "baseline.csv").write_text("step,tag,value\n" + "".join(f"{s},lm loss,{v * 1.001!r}\n" for s, v in zip(auto.step, auto.value)))
    result = msnb.compare(tmp_path / "baseline.csv", collector, tag="lm loss=loss/auto")
    assert result.tags["loss"] == {"baseline": "lm loss", "candidate": "loss/auto"} and result.common_steps == len(set(auto.step.tolist()))
    by_meaning = msnb.compare(tmp_path / "baseline.csv", collector)  # both spellings there: the log's "loss" is taken, the same values
    assert by_meaning.tags["loss"]["candidate"] == "loss" and by_meaning.passed
    assert statuses(result)["mean_error"] == "pass" and statuses(result)["lr_schedule"] == "warn"  # SummaryCollector writes no lr


def test_one_vocabulary_each_spelling_means_one_thing_and_a_comparison_prefers_the_language_model_loss():
    from msnb.events.tags import ALIASES, COMPARED, meaning

    for m, names in COMPARED.items():
        assert set(ALIASES.get(m, ())) <= set(names), m  # the comparison's order covers every spelling msnb's views know
        assert all(meaning(t, compared=True) == m for t in names)
    for m, names in ALIASES.items():
        assert all(meaning(t) == m == meaning(t, compared=True) for t in names)
    both = {"loss/auto", "lm_loss"}  # two spellings of the loss in one run, "loss" itself not among them
    assert resolve("loss", both) == "loss/auto" and resolve("loss", both, compared=True) == "lm_loss"
    assert resolve("loss", both | {"loss"}, compared=True) == "loss"  # a tag named as it is written is that tag
    assert resolve("lr", {"train/learning_rate"}, compared=True) == "train/learning_rate" and resolve("lr", {"train/learning_rate"}) is None
