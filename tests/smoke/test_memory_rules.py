"""The card options, the memory judged in every pre-flight, sizes from the config mindformers reads, and the layouts
mindformers refuses: each from a shipped config of the installed mindformers with one key changed, the shipped file
as the control.

A refusal's message quotes mindformers' (or MindSpore's) own text and cites where it is raised; each citation is
checked against the installed source here, so a quote that drifts from the code it names fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from msnb.cli import build_parser, main
from msnb.config.shipped import shipped_configs_dir
from msnb.errors import SizeRefused
from msnb.fullsize.cards import card_names
from msnb.fullsize.memory import ONE_F_ONE_B, estimate_card_memory, memory_check

SHIPPED = shipped_configs_dir()
DENSE = SHIPPED / "qwen3" / "pretrain_qwen3_32b_4k.yaml" if SHIPPED else None
MOE = SHIPPED / "qwen3_moe" / "pretrain_qwen3_30b_a3b_4k.yaml" if SHIPPED else None
needs_mindformers = pytest.mark.skipif(MOE is None or not MOE.is_file(), reason="mindformers with its shipped configs is not installed")
REPO = Path(__file__).resolve().parents[2]


def _changed(tmp_path: Path, source: Path, name: str, change) -> Path:
    data = yaml.safe_load(source.read_text())
    change(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "msnb.cli", *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


# ---- --card and --card-gb: one declaration, every help, refused in one line --------------------------------------


def _help(command: str) -> str:
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    return sub.format_help()


@pytest.mark.parametrize("command", ["preflight", "memory", "smoke"])
def test_every_command_with_a_memory_check_takes_both_card_options_and_states_its_exit_codes(command):
    text = " ".join(_help(command).split())
    assert "--card-gb G" in text and "--card NAME" in text and card_names() in text
    assert "exit codes: 0 " in text and " 1 " in text and " 2 bad usage" in text and " 3 " in text


def test_the_magics_take_the_same_card_options():
    from msnb.magics import MsnbMagics

    for magic in (MsnbMagics.mfmon_preflight, MsnbMagics.mfmon_memory, MsnbMagics.mfmon_smoke):
        flags = {f for a in magic.parser._actions for f in a.option_strings}
        assert {"--card-gb", "--card"} <= flags, magic.__name__
        card = next(a for a in magic.parser._actions if "--card" in a.option_strings)
        assert card_names() in card.help


@pytest.mark.parametrize("value", ["nan", "inf", "-64", "0", "-inf", "1e400"])
@pytest.mark.parametrize("command", ["preflight", "memory", "smoke"])
def test_a_card_memory_that_is_no_finite_number_above_zero_is_one_usage_line(tmp_path, capsys, command, value):
    config = tmp_path / "run.yaml"
    config.write_text("run_mode: train\nmodel:\n  model_config:\n    num_layers: 2\n")
    code = main([command, str(config), f"--card-gb={value}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"msnb {command}: error: --card-gb ") and "is not a card's memory in GiB" in err


@pytest.mark.parametrize("out", ["{tmp}/missing/memory.png", "{tmp}/run.yaml", "/proc/self/memory.png", "{tmp}/memory.bmp"])
def test_a_bad_memory_out_is_refused_before_the_table_is_printed(tmp_path, capsys, out):
    """The figure's file is checked first, as every --out is: one line on stderr, nothing on stdout, exit 2."""
    config = tmp_path / "run.yaml"
    config.write_text("run_mode: train\nmodel:\n  model_config:\n    num_layers: 2\n")
    code = main(["memory", str(config), "--devices", "8", "--out", out.format(tmp=tmp_path)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("msnb memory: error: --out "), captured


# ---- memory in every pre-flight ---------------------------------------------------------------------------------


def _dense_on_8_cards(d):
    """The issue's example: Qwen3-32B (32.8 B) on 8 cards with pipeline_stage 1 (offset and recompute lists for one stage)."""
    d["parallel_config"].update(data_parallel=8, model_parallel=1, pipeline_stage=1, micro_batch_num=1)
    d["model"]["model_config"]["offset"] = 0


@needs_mindformers
def test_the_memory_is_judged_against_max_device_memory_when_no_card_is_named(tmp_path):
    path = _changed(tmp_path, DENSE, "dense8", _dense_on_8_cards)
    est, said = memory_check(path, devices=8)
    assert est.judged_against == "context.max_device_memory" and est.usable_gb == 58 and est.largest_stage.total > 400 * 2**30
    assert said["outcome"] == "failed" and "more than context.max_device_memory's 58 GiB" in said["message"]
    control, said = memory_check(DENSE, devices=16)  # the shipped layout, 42.2 GiB a card
    assert said["outcome"] == "passed" and control.fits is True and "of context.max_device_memory's 58 GiB" in said["message"]
    no_limit = _changed(tmp_path, DENSE, "nolimit", lambda d: d["context"].pop("max_device_memory"))
    est, said = memory_check(no_limit, devices=16)
    assert said["outcome"] == "not checked" and est.exit_code == 3 and "nothing is judged" in said["message"]
    est, said = memory_check(no_limit, devices=16, card="910B2")  # a card named: judged against it
    assert said["outcome"] == "passed" and est.judged_against == "the card"
    _, said = memory_check(no_limit, devices=16, card="910B4")  # 32 GB: the largest stage's 42.2 GiB does not fit
    assert said["outcome"] == "failed" and "more than the card's 910B4 (32 GiB)" in said["message"]


@needs_mindformers
def test_the_smokes_pre_flight_judges_the_memory_and_fails_a_model_that_cannot_fit(tmp_path):
    """No card named: the config's context.max_device_memory (58GB) is what the 32.8 B model on 8 cards is judged against."""
    from msnb.smoke import run_smoke

    path = _changed(tmp_path, DENSE, "dense8", _dense_on_8_cards)
    result = run_smoke(str(path), live=False, steps=3, devices=8)
    assert result.passed is False and result.steps_trained == 0, result.format_text()
    preflight = result.check("preflight")
    assert preflight.status == "fail" and "per-card memory" in preflight.detail and "more than context.max_device_memory's 58 GiB" in preflight.detail


@needs_mindformers
def test_a_size_mindformers_would_refuse_is_a_finding_naming_the_key(tmp_path):
    for value in (0, -5, 1.5, "big"):
        path = _changed(tmp_path, DENSE, f"vocab{value}", lambda d, v=value: d["model"]["model_config"].__setitem__("vocab_size", v))
        with pytest.raises(SizeRefused) as caught:
            estimate_card_memory(path, card_gb=64)
        assert caught.value.key == "model.model_config.vocab_size" and caught.value.exit_code == 1
        assert str(caught.value).startswith(f"model.model_config.vocab_size at {path}: {value!r} is not a size a model is built with")
        _, said = memory_check(path, devices=16)
        assert said["outcome"] == "failed" and said["key"] == "model.model_config.vocab_size"
    run = _cli("memory", str(path), "--card", "910B2")
    assert run.returncode == 1 and "model.model_config.vocab_size" in run.stderr and run.stderr.count("\n") == 1
    # the rule quoted is MindSpore's own: its initializer refuses each of these shapes with that text
    proof = subprocess.run(
        [
            sys.executable,
            "-c",
            "from mindspore.common.initializer import initializer, Normal\n"
            "for v in (0, -5, 1.5, 'big'):\n"
            "    try: initializer(Normal(0.02), [v, 5120]); print('built')\n"
            "    except ValueError as e: print('refused' if \"must be positive integer\" in str(e) else e)\n",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proof.stdout.split() == ["refused"] * 4, proof.stderr[-2000:]


# ---- layouts mindformers refuses ----------------------------------------------------------------------------------


def _cited_source_holds_the_quote(refusal: str) -> None:
    """The file and lines a refusal cites hold the text it quotes (mindformers' installed source)."""
    root = Path(importlib.util.find_spec("mindformers").submodule_search_locations[0]).parent
    cite = refusal.rsplit(", ", 1)[-1].rstrip(")")
    file, lines = cite.rsplit(":", 1)
    first, _, last = lines.partition("-")
    text = (root / file).read_text().splitlines()[int(first) - 1 : int(last or first)]
    quote = refusal.split("('", 1)[1].split("', ", 1)[0]
    words = [w for w in quote.replace("...", " ").split() if w]
    assert all(w.strip("'") in " ".join(text) for w in words), (refusal, text)


MOE_CHANGES = {
    "expert_parallel 16 (does not divide dp 1 x tp 4)": (lambda d: d["parallel_config"].update(expert_parallel=16), "moe/ffn.py:189-195"),
    "expert_parallel 3 (128 experts)": (lambda d: d["parallel_config"].update(expert_parallel=3), "moe/moe_layer.py:60-63"),
    "use_seq_parallel off": (lambda d: d["parallel_config"].update(use_seq_parallel=False), "moe/moe_layer.py:143-146"),
}


@needs_mindformers
@pytest.mark.parametrize("name", list(MOE_CHANGES))
def test_a_moe_layout_mindformers_refuses_is_refused_by_msnb_memory_with_its_source(tmp_path, name):
    change, where = MOE_CHANGES[name]
    path = _changed(tmp_path, MOE, "moe", change)
    est = estimate_card_memory(path, card="910B2")
    (refusal,) = [r for r in est.refusals if where in r]  # expert_parallel 3 divides neither the 128 experts nor dp x tp: both said
    assert est.exit_code == 1
    for each in est.refusals:
        _cited_source_holds_the_quote(each)
    assert est.verdict().startswith("mindformers would refuse this launch") and "REFUSED: " in est.format_text()
    control = estimate_card_memory(MOE, card="910B2")
    assert control.refusals == [] and control.exit_code == 0


@needs_mindformers
def test_kv_heads_not_a_multiple_of_model_parallel_is_refused(tmp_path):
    """Qwen3-32B has 8 kv heads (64 query heads): model_parallel 16 is refused by ParallelAttention, 8 is built."""
    path = _changed(tmp_path, DENSE, "mp16", lambda d: d["parallel_config"].update(model_parallel=16))
    (refusal,) = estimate_card_memory(path, card="910B2").refusals
    assert refusal.startswith("8 kv heads") and "attention.py:177-180" in refusal
    _cited_source_holds_the_quote(refusal)
    assert estimate_card_memory(_changed(tmp_path, DENSE, "mp8", lambda d: d["parallel_config"].update(model_parallel=8)), card="910B2").refusals == []


@needs_mindformers
def test_fewer_micro_batches_than_stages_is_mindsporess_1f1b_refusal_not_an_idle_note(tmp_path):
    path = _changed(tmp_path, DENSE, "micro2", lambda d: d["parallel_config"].update(micro_batch_num=2))
    est = estimate_card_memory(path, card="910B2")
    (refusal,) = est.refusals
    assert ONE_F_ONE_B in refusal and "micro_batch_num 2 is less than pipeline_stage 4" in refusal and est.exit_code == 1
    assert not [n for n in est.notes if "idles" in n]
    frontend = Path(importlib.util.find_spec("mindspore").submodule_search_locations[0]) / "lib" / "libmindspore_frontend.so"
    if frontend.is_file():  # the text MindSpore's graph compiler raises, in the library the message names
        assert ONE_F_ONE_B.encode() in frontend.read_bytes()


@needs_mindformers
def test_msnb_memory_exits_1_when_mindformers_refuses_the_launch(tmp_path):
    refused = _cli("memory", str(DENSE), "--devices", "8", "--card", "910B2", "--json")
    said = json.loads(refused.stdout)
    assert refused.returncode == 1 and said["fits"] is True and "should be equal to device_num" in said["refusals"][0]
    assert _cli("memory", str(DENSE), "--devices", "16", "--card", "910B2").returncode == 0


# ---- the config mindformers reads: a symlinked YAML's base_config -----------------------------------------------


@needs_mindformers
def test_a_symlinked_yamls_base_config_is_joined_to_the_links_folder_as_mindformers_joins_it(tmp_path):
    """mindformers' MindFormerConfig joins a relative base_config to os.path.dirname(filename), the link's folder."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    base = yaml.safe_load(DENSE.read_text())
    for folder, vocab in ((here, 151936), (there, 1000)):
        base["model"]["model_config"]["vocab_size"] = vocab
        (folder / "base.yaml").write_text(yaml.safe_dump(base, sort_keys=False))
    (there / "run.yaml").write_text("base_config: base.yaml\nseed: 1\n")
    (here / "run.yaml").symlink_to(there / "run.yaml")
    from msnb.config import load_config

    assert load_config(here / "run.yaml").data["model"]["model_config"]["vocab_size"] == 151936
    assert load_config(there / "run.yaml").data["model"]["model_config"]["vocab_size"] == 1000
    proof = subprocess.run(
        [sys.executable, "-c", f"from mindformers import MindFormerConfig; print(MindFormerConfig({str(here / 'run.yaml')!r}).model.model_config.vocab_size)"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proof.stdout.split()[-1:] == ["151936"], proof.stderr[-2000:]
    assert estimate_card_memory(here / "run.yaml").parameters == estimate_card_memory(DENSE).parameters


# ---- the cards a node behind mindformers' server count ------------------------------------------------------------


@needs_mindformers
def test_the_server_count_warning_says_the_cards_a_node_it_assumed(tmp_path):
    """Qwen3-32B's 4 stages on 16 cards: 2 servers of 8 (2 % 4 != 0, mindformers warns); 4 servers of 4 do not warn."""
    from msnb.fullsize.preflight import run_preflight

    said = {}
    for name, kwargs in {
        "launch": {"launch": "msrun --worker_num=16 --local_worker_num=8 run_mindformer.py"},
        "default": {"devices": 16},
        "given": {"devices": 16, "devices_per_node": 4},
    }.items():
        result = run_preflight(DENSE, memory=False, **kwargs)
        said[name] = [c.message for c in result.warnings if "server_num" in c.message]
    assert said["launch"] and said["launch"][0].endswith("(8 cards a node assumed (from --launch's --local_worker_num=8))")
    assert said["default"] and said["default"][0].endswith(
        "(8 cards a node assumed (mindformers' default: DEVICE_NUM_PER_NODE is not set; give --devices-per-node N))"
    )
    assert said["given"] == []  # 4 servers of 4 cards: 4 % 4 == 0
