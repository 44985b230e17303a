"""msprobe's training-state monitor outputs: read by every command, judged by health, repaired where 26.2.0 writes rows short.

The files are msprobe's own (mindstudio-probe 26.2.0 driving a 30-step MindSpore run on CPU, healthy and with the
inputs of step 20 x1000), kept outside the repository in the peer corpus and read where they lie:
``MSNB_PEER_CORPUS``, else ``peer-corpus`` in the ``shared`` folder beside the checkout; the corpus tests skip,
saying where they looked, when it is absent.  The byte-level tests write msprobe's formats themselves.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import msnb
from msnb.analysis import Rules
from msnb.analysis.health import first_anomaly
from msnb.analysis.judge import judge_run
from msnb.events import ScalarTable
from msnb.events import msprobe as msprobe_module
from msnb.events.msprobe import anomaly_tag
from tests.conftest import ipython_json

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("MSNB_PEER_CORPUS") or REPO.parent / "shared" / "peer-corpus") / "files" / "msprobe"
needs_corpus = pytest.mark.skipif(not (CORPUS / "faulty").is_dir(), reason=f"msprobe corpus not found at {CORPUS} (set MSNB_PEER_CORPUS)")


def cli(*args, timeout=300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "msnb.cli", *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)


# ---------------------------------------------------------------- the corpus


@needs_corpus
def test_the_faulty_runs_first_anomaly_is_the_step_20_input_before_the_gradients():
    report = msnb.health(CORPUS / "faulty")
    assert report.first is not None
    assert (report.first.step, report.first.rank) == (20, 0)
    assert report.first.tag.startswith("actv/fc1.input/"), report.first
    later = [a.tag for a in report.cascade if a.step == 20]
    grads = [i for i, t in enumerate(later) if t.startswith("grad_unreduced/")]
    actv = [i for i, t in enumerate(later) if t.startswith("actv/")]
    assert grads and actv and max(actv) < min(grads), "msprobe's call order: the forward activations before the weight gradients"


@needs_corpus
@pytest.mark.parametrize("run", ["healthy", "healthy_t10"])
def test_the_healthy_run_has_no_anomaly(run):
    report = msnb.health(CORPUS / run)
    assert report.first is None, report.format_text()
    assert report.series_scanned > 200


@needs_corpus
def test_v2_and_v1_read_the_same_numbers():
    v1 = msnb.read(CORPUS / "faulty").scalars
    v2 = msnb.read(CORPUS / "v2_faulty").scalars
    s1, a = v1.series("actv/fc1.input/norm")
    s2, b = v2.series("module/forward/fc1.input.0/norm")
    assert list(s1) == list(s2) == list(range(30))
    assert np.allclose(a, b, rtol=1e-6)
    assert msnb.health(CORPUS / "v2_faulty").first.step == 20


@needs_corpus
def test_anomaly_json_becomes_markers_on_the_series_tags():
    result = msnb.read(CORPUS / "faulty")
    raw = json.loads((CORPUS / "faulty" / "anomaly_detected" / "rank0" / "anomaly.json").read_text())
    assert len(result.markers) == len(raw)
    assert set(result.markers.tag.tolist()) <= set(result.scalars.tags()), "every marker names a series the CSVs hold"
    assert set(result.markers.kind.tolist()) == {"msprobe AnomalyTurbulence"}
    assert set(result.markers.rank.tolist()) == {0} and set(result.markers.run.tolist()) == {"."}
    step20 = result.markers.take(result.markers.step == 20)
    assert "actv/fc1.input/norm" in step20.tag.tolist()


@needs_corpus
def test_the_short_rows_are_repaired_and_said(tmp_path):
    result = msnb.read(CORPUS / "faulty")
    repaired = [p for p in result.problems if p.kind == "repaired"]
    assert len(repaired) == 60 and all("exp_avg" in Path(p.path).name for p in repaired)  # 30 steps x exp_avg, exp_avg_sq
    steps, norms = result.scalars.series("exp_avg/fc1.weight/norm")
    assert list(steps) == list(range(30))
    assert norms[20] == pytest.approx(0.09007598)  # the value under "min" in the file: the step was written third


@needs_corpus
def test_every_command_reads_an_msprobe_folder(tmp_path):
    faulty, healthy = CORPUS / "faulty", CORPUS / "healthy"
    result = msnb.read(faulty)
    assert len(result.scalars) > 10_000 and not result.skipped
    proc = cli("check", faulty, "--json")
    assert proc.returncode == 1, proc.stderr
    verdict = json.loads(proc.stdout)
    checks = {c["name"]: c for c in verdict["runs"][0]["checks"]}
    assert checks["loss_spikes"]["status"] == "fail" and "step 21" in checks["loss_spikes"]["detail"]
    assert checks["msprobe"]["status"] == "warn" and "966 points" in checks["msprobe"]["detail"]
    proc = cli("health", faulty, "--json")
    assert proc.returncode == 1 and json.loads(proc.stdout)["first"]["step"] == 20, proc.stderr
    assert cli("health", healthy).returncode == 0
    assert cli("health", faulty, "--min-history", "8", "--threshold", "1e9").returncode in (0, 1)
    out = tmp_path / "p.png"
    proc = cli("plot", faulty, "--tags", "loss,actv/fc1.input/norm", "--out", out)
    assert proc.returncode == 0 and out.stat().st_size > 1000, proc.stderr
    proc = cli("runs", CORPUS, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    assert {"faulty", "healthy", "v2_faulty"} <= {r["run"] for r in json.loads(proc.stdout)["runs"]}
    report = tmp_path / "r.html"
    proc = cli("report", faulty, "--out", report)
    assert proc.returncode == 1 and report.stat().st_size > 1000, proc.stderr
    proc = cli("export", faulty, "--kind", "scalars")
    assert proc.returncode == 0 and "actv/fc1.input/norm" in proc.stdout, proc.stderr
    proc = cli("compare", healthy, faulty, "--json")
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    proc = cli("convert", faulty, tmp_path / "tb", "--to", "tensorboard")
    assert proc.returncode == 0 and "(and the same in 59 more)" in proc.stderr, proc.stderr  # one line for 60 files repaired alike
    assert len(msnb.read(tmp_path / "tb").scalars) == len(result.scalars)
    board = msnb.board(faulty)
    assert "actv/fc1.input/norm" in board.data.tag_names() and any(f.step == 21 for f in board.data.flags())


# ---------------------------------------------------------------- bytes written here


V1_HEADER = "vpp_stage,name,step,min,max,mean,norm,nans,zeros,shape,dtype\n"


def _v1(tmp_path, files: dict) -> Path:
    run = tmp_path / "run"
    folder = run / "Dec05_02-31-03-rank3-88949a87"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return run


def test_a_one_column_short_row_is_read_as_meant(tmp_path):
    run = _v1(tmp_path, {"exp_avg_7-7.csv": V1_HEADER + 'exp_avg.fc1.weight,-0.5,7,0.25,0.01,0.9,0.0,0.0,"(32, 16)",Float32\n'})
    result = msnb.read(run)
    got = {t: v for t, v in zip(result.scalars.tag.tolist(), result.scalars.value.tolist())}
    assert got == {
        "exp_avg/fc1.weight/min": -0.5,
        "exp_avg/fc1.weight/max": 0.25,
        "exp_avg/fc1.weight/mean": 0.01,
        "exp_avg/fc1.weight/norm": 0.9,
        "exp_avg/fc1.weight/nans": 0.0,
        "exp_avg/fc1.weight/zeros": 0.0,
    }
    assert set(result.scalars.step.tolist()) == {7} and set(result.scalars.rank.tolist()) == {3}
    assert [p.kind for p in result.problems] == ["repaired"]


def test_damaged_rows_are_skipped_and_said_and_intact_rows_kept(tmp_path):
    good = '0,fc1.weight,{s},-1,1,0,{n},0.0,0.0,"(2, 2)",Float32\n'
    text = V1_HEADER + good.format(s=0, n=1.0) + "garbage,,\n" + "0," + "x" * 200_000 + "\n" + good.format(s=1, n=2.0) + "0,fc1.weight,2,-1,1"  # torn last row
    run = _v1(tmp_path, {"grad_reduced_0-2.csv": text, "actv_0-0.csv": "\ufeffnot,a,msprobe,header\n1,2,3\n", "param_origin_0-0.csv": b"\xff\xfe\x00v\x00p"})
    result = msnb.read(run)
    steps, norms = result.scalars.series("grad_reduced/fc1.weight/norm")
    assert list(steps) == [0, 1] and list(norms) == [1.0, 2.0]
    said = " ".join(str(p) for p in result.problems)
    assert "3 fields where the header has 11" in said and "longer than" in said and "2 rows skipped" not in said
    # a file whose name fits but whose head is no msprobe header is not taken for one
    assert not any("actv_0-0" in f["path"] for f in result.files)


def test_anomaly_tags_map_onto_the_csv_tags():
    assert anomaly_tag("0:fc1.input:0/rank0/actv", "norm") == "actv/fc1.input/norm"
    assert anomaly_tag("0:fc2.bias/rank0/acc_grad", "mean") == "grad_unreduced/fc2.bias/mean"
    assert anomaly_tag("0:fc2.bias/rank0/post_grad", "mean") == "grad_reduced/fc2.bias/mean"
    assert anomaly_tag("exp_avg_sq.fc1.weight", "norm") == "exp_avg_sq/fc1.weight/norm"
    assert anomaly_tag("1:layers.0.mlp:2/rank5/actv_grad", "max") == "actv_grad/1:layers.0.mlp:2/max"


def test_a_hostile_anomaly_json_is_a_problem_not_a_crash(tmp_path):
    folder = tmp_path / "run" / "anomaly_detected" / "rank0"
    folder.mkdir(parents=True)
    (folder / "anomaly.json").write_text('{"a": {"step": 1, "tag_name": "x", "message": "' + "Rule " * 10_000 + '"}, "b": [1, 2]}')
    result = msnb.read(tmp_path / "run")
    assert len(result.markers) == 0 and any("2 entries" in str(p) for p in result.problems)
    (folder / "anomaly.json").write_text('{"a": ' * 100_000)  # nested past any depth, and torn
    result = msnb.read(tmp_path / "run")
    assert any(p.kind == "decode" for p in result.problems)


# ---------------------------------------------------------------- short runs judged


def _loss(values) -> ScalarTable:
    n = len(values)
    return ScalarTable(run=["r"] * n, rank=[0] * n, tag=["loss"] * n, step=list(range(1, n + 1)), wall_time=[0.0] * n, value=values)


def test_a_1000x_blow_up_at_step_20_of_30_is_a_spike_and_the_first_anomaly():
    rng = np.random.default_rng(0)
    loss = 0.7 * np.exp(-0.05 * np.arange(30)) * np.exp(0.1 * rng.standard_normal(30))
    loss[19] *= 1000  # step 20
    loss[20:] *= 1.5  # the loss comes back, not quite as low
    verdict = judge_run(_loss(loss), "r")
    spikes = {c.name: c for c in verdict.checks}["loss_spikes"]
    assert spikes.status == "fail" and "step 20" in spikes.detail, spikes
    assert first_anomaly(msnb.events.ReadResult(scalars=_loss(loss))).step == 20


def test_a_100x_one_step_jump_is_a_spike_in_a_smoke_and_not_in_a_long_run():
    rng = np.random.default_rng(1)
    for n, flagged in ((30, True), (1000, False)):
        loss = 2.0 * np.exp(0.05 * rng.standard_normal(n))
        loss[n // 2] *= 100
        status = {c.name: c for c in judge_run(_loss(loss), "r").checks}["loss_spikes"].status
        assert (status == "fail") == flagged, (n, status)


def test_healthy_short_runs_raise_no_spike_and_no_anomaly():
    rng = np.random.default_rng(2)
    for _ in range(40):
        n = int(rng.integers(20, 201))
        steps = np.arange(1, n + 1)
        loss = (0.5 + 2.5 / np.sqrt(steps)) * np.exp(rng.uniform(0.02, 0.4) * rng.standard_normal(n))
        loss[int(rng.integers(n // 4, 3 * n // 4))] *= rng.uniform(3, 20)  # a bad batch the loss recovers from
        verdict = judge_run(_loss(loss), "r", rules=Rules())
        assert {c.name: c for c in verdict.checks}["loss_spikes"].status == "pass"


def test_a_followed_csv_gives_each_row_once_and_holds_back_a_partial_line(tmp_path):
    run = _v1(tmp_path, {"actv_0-9.csv": "vpp_stage,name,step,micro_step,min,max,mean,norm,nans,zeros,shape,dtype\n"})
    path = next(run.glob("*/actv_0-9.csv"))
    row = '0,fc1.input,{s},0,-1,1,0,{n},0.0,0.0,"(64, 16)",Float32\n'
    follower = msnb.events.Follower(run)
    with open(path, "a") as f:
        f.write(row.format(s=0, n=1.0) + row.format(s=1, n=2.0)[:20])  # a row being written
    first = follower.poll()
    assert first.scalars.series("actv/fc1.input/norm")[1].tolist() == [1.0]
    with open(path, "a") as f:
        f.write(row.format(s=1, n=2.0)[20:] + row.format(s=2, n=3.0))
    follower.poll()
    steps, norms = follower.result.scalars.series("actv/fc1.input/norm")
    assert steps.tolist() == [0, 1, 2] and norms.tolist() == [1.0, 2.0, 3.0]
    assert not follower.result.problems


def test_v2_micro_steps_and_stages_keep_their_rows_apart(tmp_path):
    folder = tmp_path / "out" / "rank_5"
    folder.mkdir(parents=True)
    (folder / "weight_grad_step0-9.csv").write_text(
        "vpp_stage,step,module_name,scope,micro_step,min,max,mean,norm,nans\n"
        "-1,0,fc1.weight,unreduced,1,0,1,0.5,1.0,0.0\n"
        "-1,0,fc1.weight,unreduced,2,0,1,0.5,2.0,0.0\n"
        "1,0,fc1.weight,unreduced,1,0,1,0.5,3.0,0.0\n"
    )
    result = msnb.read(tmp_path / "out")
    got = {t: v for t, v in zip(result.scalars.tag.tolist(), result.scalars.value.tolist()) if t.endswith("/norm")}
    assert got == {"weight_grad/unreduced/fc1.weight/norm": 1.0, "weight_grad/unreduced/fc1.weight:2/norm": 2.0, "weight_grad/unreduced/1:fc1.weight/norm": 3.0}
    assert set(result.scalars.rank.tolist()) == {5} and set(result.scalars.run.tolist()) == {"."}


OPS = ("min", "max", "mean", "norm", "nans", "zeros")


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["fc1.input", "fc2.output", "layers.0.attention.wq", "a,b", 'q"uote']),
            st.integers(0, 10**6),
            st.lists(st.floats(allow_nan=False, width=32), min_size=6, max_size=6),
        ),
        max_size=30,
    ),
    chunk=st.integers(16, 400),
    crlf=st.booleans(),
)
def test_chunked_reading_equals_pythons_csv_module_on_the_whole_file(tmp_path_factory, rows, chunk, crlf):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n" if crlf else "\n")
    w.writerow(["vpp_stage", "name", "step", *OPS, "shape", "dtype"])
    for name, step, values in rows:
        w.writerow(["0", name, step, *[repr(v) for v in values], "(2, 2)", "Float32"])
    run = _v1(tmp_path_factory.mktemp("csv"), {"grad_reduced_0-0.csv": buf.getvalue()})
    oracle = []  # the whole file parsed by Python's csv module, then named as the reader names rows
    for r in csv.DictReader(io.StringIO(buf.getvalue())):
        oracle += [(f"grad_reduced/{r['name']}/{op}", int(r["step"]), float(r[op])) for op in OPS]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(msprobe_module, "CHUNK", chunk)
        got = msnb.read(run).scalars
    assert list(zip(got.tag.tolist(), got.step.tolist(), got.value.tolist())) == oracle


@needs_corpus
def test_the_health_magic_takes_min_history():
    faulty = str(CORPUS / "faulty")
    out = ipython_json(
        f"auto = ip.run_line_magic('mfmon_health', {faulty!r})\n"
        f"given = ip.run_line_magic('mfmon_health', {faulty + ' --min-history 25'!r})\n"
        "try:\n"
        f"    ip.run_line_magic('mfmon_health', {faulty + ' --min-history 2'!r})\n"
        "    err = None\n"
        "except UsageError as e:\n"
        "    err = str(e)\n"
        "print(json.dumps({'auto': auto.first.step, 'given': given.settings.min_history, 'err': err}))\n",
        timeout=300,
    )
    assert out["auto"] == 20 and out["given"] == 25
    assert "min_history" in out["err"]


ROW_TEXTS = [
    '0,fc1.input,{s},0,-1.5,2.5,0.1,3.0,0.0,0.0,"(64, 32)",Float32',
    "0,fc2.output,{s},1,1e-3,nan,inf,-inf,0.0,0.0,(64),Float32",
    '1,fc1.input,{s},0,1,2,3,4,5,6,"(2, 2)",Float16',
    'fc1.weight,0.5,{s},1.0,2.0,3.0,4.0,5.0,"(4,)",Float32',  # one column short: 26.2.0's exp_avg rows
    '0,"a,b",{s},0,1,2,3,4,5,6,"(2, 2)",Float32',
    "0,fc1.input,{s},0,x,2,3,4,5,6,(2),Float32",
    "0,fc1.input,\u0661{s},0,1,2,3,4,5,6,(2),Float32",
    "0,fc1.input,{s},0, 1.5 ,2,3,4,5,6,(2),Float32",
    "",
    "0,fc1.input,{s},0,1,2,3,4,5,6,(2),Float32\r",
    "0,fc\u00e9.input,{s},0,1,2,3,4,5,6,(2),Float32",
    "0,fc1.input,{s},0,1_0,2,3,4,5,6,(2),Float32",
    "0,fc1.input,-{s},0,1,2,3,4,5,6,(2),Float32",
    "0,fc1.input,+{s},0,1,2,3,4,5,6,(2),Float32",
    "0,fc1.input,1_{s},0,1,2,3,4,5,6,(2),Float32",
    "0,fc1.input, {s} ,0,1,2,3,4,5,6,(2),Float32",
    "0,fc1.input,1234567890123456789{s},0,1,2,3,4,5,6,(2),Float32",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ROW_TEXTS), st.integers(0, 50)), min_size=1, max_size=40), st.integers(64, 2048))
def test_rows_read_in_bulk_equal_rows_read_one_by_one(tmp_path_factory, rows, chunk):
    """The pattern over a chunk gives what reading each row with the csv module gives, problems included (or leaves the chunk to it)."""
    text = "vpp_stage,name,step,micro_step,min,max,mean,norm,nans,zeros,shape,dtype\n" + "".join(r.format(s=s) + "\n" for r, s in rows)
    run = _v1(tmp_path_factory.mktemp("csv"), {"exp_avg_0-50.csv": text})
    results = []
    for bulk in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(msprobe_module, "CHUNK", chunk)
            if not bulk:
                mp.setattr(msprobe_module.CsvFile, "_bulk", lambda self, body: None)
            r = msnb.read(run)
        s = r.scalars
        results.append((list(zip(s.tag.tolist(), s.step.tolist(), [repr(v) for v in s.value.tolist()])), sorted(str(p) for p in r.problems)))
    assert results[0] == results[1]


def test_a_plain_chunk_is_read_in_bulk(tmp_path):
    """msprobe's own rows (a quoted shape, no other quote) take the bulk way."""
    body = b"".join(b'0,layers.%d.fc.input,%d,0,-1.5,2.5,0.1,3.0,0.0,0.0,"(64, 32)",Float32\n' % (i % 7, i) for i in range(100))
    state = msprobe_module.CsvFile(str(tmp_path / "actv_0-99.csv"))
    state._set_header("vpp_stage,name,step,micro_step,min,max,mean,norm,nans,zeros,shape,dtype", [])
    got = state._bulk(body)
    assert got is not None
    (codes, steps, values), lines, rows = got
    assert (lines, rows, codes.size) == (100, 100, 600)
    assert steps[:6].tolist() == [0] * 6 and values[:6].tolist() == [-1.5, 2.5, 0.1, 3.0, 0.0, 0.0]


def test_a_crlf_file_whose_last_column_is_a_name_keeps_the_cr_out_of_the_name(tmp_path):
    folder = tmp_path / "out" / "rank_0"
    folder.mkdir(parents=True)
    (folder / "module_step0-0.csv").write_bytes(b"vpp_stage,step,micro_step,min,module_name\r\n-1,0,0,1.0,fc1\r\n")
    tags = set(msnb.read(tmp_path / "out").scalars.tag.tolist())
    assert tags == {"module/fc1/min"}, tags


def test_a_step_of_a_digit_int_refuses_is_a_skipped_row_not_a_crash(tmp_path):
    """'²' is a digit to str.isdigit() but no number to int(): the row is skipped and said."""
    run = _v1(tmp_path, {"actv_0-1.csv": "vpp_stage,name,step,micro_step,min\n0,fc1.input,\u00b2,0,1.0\n0,fc1.input,1,0,2.0\n"})
    result = msnb.read(run)
    assert result.scalars.value.tolist() == [2.0]
    assert any("no whole number" in str(p) for p in result.problems)
