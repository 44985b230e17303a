"""`msnb check`, `msnb.check` and `%mfmon_check` on runs written by the real writers: exit codes, the JSON shape, the magic."""

import json

import pytest

import msnb
from tests.conftest import ipython_json
from tests.scenarios import build


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return build(tmp_path_factory.getbasetemp() / "judge_scenarios")


def _shape(doc):
    assert set(doc) == {"passed", "runs", "flags", "same_series", "memory"} and isinstance(doc["passed"], bool)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in doc["same_series"].items())
    for run in doc["runs"]:
        assert set(run) == {"run", "ranks", "passed", "checks", "flags", "judged_from"}
        assert isinstance(run["run"], str) and all(isinstance(r, int) for r in run["ranks"])
        for c in run["checks"]:
            assert set(c) == {"name", "status", "detail"} and c["status"] in ("pass", "warn", "fail", "skip")
        for f in run["flags"]:
            assert set(f) == {"run", "rank", "tag", "step", "reason"}
    assert doc["flags"] == [f for run in doc["runs"] for f in run["flags"]]


def test_cli_exit_codes_and_json(corpus, run_msnb, tmp_path):
    ok = run_msnb("check", corpus / "healthy_4", "--json", check=0)
    doc = json.loads(ok.stdout)  # exactly one JSON document on stdout
    _shape(doc)
    assert doc["passed"] and doc["runs"][0]["ranks"] == [0, 1, 2, 3] and doc["flags"] == []

    warned = run_msnb("check", corpus / "stalled", check=0)  # warnings do not fail
    assert "WARN  loss_stalled" in warned.stdout and warned.stdout.strip().splitlines()[-1].startswith("PASSED")

    bad = run_msnb("check", corpus / "healthy_2", corpus / "nan_rank", "--json", check=1)
    doc = json.loads(bad.stdout)
    _shape(doc)
    assert [r["passed"] for r in doc["runs"]] == [True, False]
    assert doc["flags"][0] | {"reason": ""} == {"run": "nan_rank", "rank": 2, "tag": "loss", "step": 150, "reason": ""}  # not nan_rank/tensorboard

    text = run_msnb("check", corpus / "drift_4", check=1).stdout
    assert "FAIL  rank_divergence" in text and "FLAG rank 1" in text

    nothing = run_msnb("check", tmp_path / "nothing", check=2)
    assert nothing.stdout == "" and nothing.stderr.startswith("msnb check: error: no scalars")
    run_msnb("check", corpus / "healthy_2", "--tag", "nope", check=2)
    run_msnb("check", check=2)  # no path: argparse usage


def test_python_api_and_tag_alias(corpus):
    r = msnb.read(corpus / "healthy_ms_2")
    steps, values = r.scalars.series("loss", rank=0)
    assert steps.size == 200 and r.scalars.resolve_tag("loss") == "loss"
    result = msnb.check(r)
    assert result.passed and repr(result) == result.format_text() and result.format_text().splitlines()[-1].startswith("PASSED")
    assert "<table>" in result._repr_html_()
    with pytest.raises(msnb.errors.NothingReadable):
        msnb.check(r, tag="grad_norm")


def test_magic_in_a_real_ipython_shell(corpus, tmp_path):
    answer = ipython_json(
        f"r = ip.run_line_magic('mfmon_check', '{corpus / 'drift_2'}')\n"
        f"bad = ip.run_cell('%mfmon_check {tmp_path / 'nothing'}')\n"
        "print(json.dumps({'doc': r.as_dict(), 'failed': not bad.success, 'error': type(bad.error_in_exec).__name__}))\n",
        timeout=120,
    )
    _shape(answer["doc"])
    assert [f["rank"] for f in answer["doc"]["flags"]] == [1]
    assert answer["failed"] and answer["error"] == "UsageError"


def test_a_two_rank_run_whose_loss_never_moved_fails(corpus, run_msnb):
    """Learning rate 0 on both ranks for 300 steps: the loss never fell, and the learning rate is named as the likely cause."""
    out = run_msnb("check", corpus / "lr_zero", check=1)
    line = next(x for x in out.stdout.splitlines() if "loss_falling" in x)
    assert line.lstrip().startswith("FAIL  loss_falling: loss never fell") and "300 points (steps 1-300, median of 2 ranks)" in line
    assert "likely cause: the learning rate (learning-rate) is 0 on all 600 records" in line
    assert out.stdout.strip().splitlines()[-1].startswith("FAILED: 1 run, 1 failed")
    converged = run_msnb("check", corpus / "converged_early", "--json", check=0)
    (run,) = json.loads(converged.stdout)["runs"]
    assert {c["name"]: c["status"] for c in run["checks"]}["loss_falling"] == "pass"
