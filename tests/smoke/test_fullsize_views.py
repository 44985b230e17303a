"""How the pre-flight and the per-card memory read: the verdict first, each finding once with its fix, details folded."""

from __future__ import annotations

import argparse

import pytest

from msnb.cli import build_parser
from msnb.fullsize.advice import memory_advice
from msnb.fullsize.memory import estimate_card_memory
from msnb.fullsize.preflight import PreflightCheck, PreflightResult
from msnb.fullsize.views import memory_text, preflight_html, preflight_text, preflight_word
from msnb.status import COLORS, FAIL, WARN

SHIPPED_32B = "configs/qwen3/pretrain_qwen3_32b_4k.yaml"  # the installed mindformers' own copy (resolve_shipped)


def _result(*checks) -> PreflightResult:
    return PreflightResult("run.yaml", 32, "--devices", list(checks), "1.9.0", stood_in=["communication: rank 0 of 32"])


def _passed(name: str) -> PreflightCheck:
    return PreflightCheck(name, "passed")


def test_a_finding_is_shown_once_first_with_its_fix_and_the_passed_checks_folded():
    finding = PreflightCheck(
        "check_rules._check_parallel (32 devices)", "failed", "dp*mp*sp*pp = 16 != device_num(32)", "parallel_config.data_parallel", "run.yaml:88",
        "mindformers/tools/check_rules.py:187", suggestions=["parallel_config.data_parallel 2", "parallel_config.model_parallel 8"],
    )  # fmt: skip
    r = _result(_passed("MindFormerConfig"), finding, _passed("TransformerConfig"), PreflightCheck("dataset rules", "not checked", "no dataset", kind="data"))
    text = preflight_text(r)
    lines = text.splitlines()
    assert lines[0] == "msnb preflight FAILED: 1 finding, 2 checks passed, 1 rule about the data not run"
    assert text.count("device_num(32)") == 1 and "parallel_config.data_parallel 2" in text and "fix (each proved" in text
    assert "TransformerConfig" not in text and "--verbose lists them" in lines[-1]
    verbose = preflight_text(r, verbose=True)
    assert "[PASS] TransformerConfig" in verbose and "communication: rank 0 of 32" in verbose and verbose.count("device_num(32)") == 1
    page = preflight_html(r)
    assert f"color:{COLORS[FAIL]}'>msnb preflight FAILED</b>" in page and "<details>" in page and page.index("fix") < page.index("<details>")


def test_a_pass_mindformers_warned_about_never_reads_as_a_plain_pass():
    r = _result(_passed("MindFormerConfig"), PreflightCheck("server count", "warning", "8 cards a node assumed"))
    assert r.outcome == "passed" and preflight_word(r) == "PASSED with 1 warning"
    assert preflight_text(r).startswith("msnb preflight PASSED with 1 warning:")
    assert f"color:{COLORS[WARN]}'>msnb preflight PASSED with 1 warning</b>" in preflight_html(r)
    assert preflight_word(_result(_passed("MindFormerConfig"))) == "PASSED"


def test_an_unknown_device_count_is_not_checked_and_says_why():
    r = PreflightResult("run.yaml", None, "unknown", [_passed("MindFormerConfig")], "1.9.0")
    text = preflight_text(r)
    assert text.startswith("msnb preflight NOT CHECKED:") and "the device count is unknown" in text


def test_a_refused_launch_exits_1_says_so_first_and_shows_layouts_of_its_cards():
    est = estimate_card_memory(SHIPPED_32B, devices=32, card="910B2")
    assert est.fits is True and est.refusals and est.exit_code == 1  # it fits, but mindformers refuses 32 cards for a 16-card layout
    text = memory_text(est)
    assert text.startswith("msnb memory FAILED: mindformers refuses this launch")
    fixes = [a.change for a in memory_advice(est)]
    assert fixes == ["parallel_config.model_parallel 8", "parallel_config.data_parallel 2"]  # the pre-flight proves these two (test_preflight)


def test_a_stage_that_does_not_fit_gets_layouts_that_fit_by_the_same_arithmetic():
    est = estimate_card_memory(SHIPPED_32B, card_gb=32)
    assert est.fits is False and est.exit_code == 1
    (advice,) = memory_advice(est)  # pipeline_stage is kept (the offset list is per stage); 16 cards have no layout that fits
    assert advice.change == "parallel_config.model_parallel 8" and "32 cards (2 times the 16" in advice.gives
    fixed = estimate_card_memory(SHIPPED_32B, card_gb=32, layout={"model_parallel": 8})
    assert fixed.fits and not fixed.refusals and f"{fixed.largest_stage.total / (1 << 30):,.1f} GiB" in advice.gives


def test_a_refused_offset_gets_one_that_adds_up(tmp_path):
    import yaml

    from msnb.config.shipped import resolve_shipped

    data = yaml.safe_load(open(resolve_shipped(SHIPPED_32B)[0]).read())
    data["model"]["model_config"]["offset"] = [1, 0, 0, 0]
    path = tmp_path / "offset.yaml"
    path.write_text(yaml.safe_dump(data))
    est = estimate_card_memory(path, card="910B2")
    assert est.refusals and est.exit_code == 1
    assert "model.model_config.offset [0, 0, 0, 0]" in [a.change for a in memory_advice(est)]


def _subcommands(parser, prefix=""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield prefix + name, sub
                yield from _subcommands(sub, prefix + name + " ")


@pytest.mark.parametrize("name", [n for n, _ in _subcommands(build_parser())])
def test_every_help_states_its_exit_codes(name):
    sub = dict(_subcommands(build_parser()))[name]
    assert "exit codes: 0" in sub.format_help(), name


def test_preflight_memory_and_smoke_share_one_card_declaration():
    helps = {n: s.format_help() for n, s in _subcommands(build_parser()) if n in ("preflight", "memory", "smoke")}
    from msnb.fullsize.cards import card_names

    for name, text in helps.items():
        assert "--card-gb G" in text and "--card NAME" in text and card_names() in " ".join(text.split()), name
