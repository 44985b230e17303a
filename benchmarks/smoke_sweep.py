"""The shipped-config sweep: ``msnb smoke`` on every training and finetune YAML the installed mindformers ships.

    python benchmarks/smoke_sweep.py [--pattern qwen3] [--steps 8] [--markdown docs/SMOKE_SWEEP.md]
    python benchmarks/smoke_sweep.py --preflight-only [--markdown docs/SMOKE_SWEEP.md]

Each shipped config is turned into what a user writes before launching it: a
copy in a folder of their own with monitoring added (MFLossMonitor,
SummaryMonitor and CheckpointMonitor callbacks, a ``monitor_config`` with
``monitor_on`` and the formats people ask for, a ``tensorboard`` section).
Then ``msnb smoke COPY --json`` runs as a subprocess, one config after another
(they would only fight over the cores), and the table says, per config: the
model class, the outcome (``passed``, ``failed``, ``not_rehearsed``, or
``refused`` when the smoke would not start), its one-line reason, the seconds
and the peak resident memory of the whole process tree (msnb, its guard, the
training child), sampled every 0.2 s.

The goal the table is read against: every config ``passed`` or
``not_rehearsed`` with a specific reason; a ``failed`` only where the
unmodified config fails on Ascend too; never a crash inside msnb.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path

import yaml

TRAINING_MODES = ("train", "finetune")
MONITORING_CALLBACKS = (
    {"type": "MFLossMonitor", "per_print_times": 1},
    {"type": "SummaryMonitor", "summary_dir": "./output/summary", "collect_freq": 1, "collect_specified_data": {"collect_landscape": None}},
    {"type": "CheckpointMonitor", "prefix": "sweep", "save_checkpoint_steps": 4, "keep_checkpoint_max": 1, "checkpoint_format": "safetensors"},
)
MONITOR_CONFIG = {
    "monitor_on": True,
    "dump_path": "./dump",
    "target": [".*"],
    "invert": False,
    "step_interval": 1,
    "local_loss_format": ["log", "tensorboard"],
    "device_local_loss_format": ["log", "tensorboard"],
    "local_norm_format": ["log", "tensorboard"],
    "optimizer_state_format": ["log", "tensorboard"],
    "weight_state_format": ["log", "tensorboard"],
    "throughput_baseline": None,
    "print_struct": False,
}
TENSORBOARD = {
    "tensorboard_dir": "./output/tensorboard",
    "tensorboard_queue_size": 10,
    "log_loss_scale_to_tensorboard": True,
    "log_timers_to_tensorboard": True,
}


# The config.json of the Hugging Face model folder a user points a placeholder pretrained_model_dir at (the published
# files' size and architecture keys): the sweep writes it, so the smoke shrinks a model from a folder that is here.
HF_CONFIGS = {
    "Qwen3-32B": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False, "attention_dropout": 0.0,
                  "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 25600, "max_position_embeddings": 40960,
                  "num_attention_heads": 64, "num_hidden_layers": 64, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
                  "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 151936},
    "Qwen3-30B-A3B": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False, "attention_dropout": 0.0,
                      "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144,
                      "max_position_embeddings": 40960, "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32,
                      "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
                      "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
                      "vocab_size": 151936},
    "DeepSeek-V3": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "attention_bias": False, "first_k_dense_replace": 3,
                    "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
                    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
                    "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
                    "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
                    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
                    "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "v_head_dim": 128,
                    "vocab_size": 129280},
}  # fmt: skip


def hf_model_for(shipped: Path, data: dict) -> str:
    """Which published model a config with a placeholder pretrained_model_dir is meant for."""
    text = f"{shipped} {data.get('pretrained_model_dir')}".lower()
    if "deepseek" in text:
        return "DeepSeek-V3"
    return "Qwen3-30B-A3B" if "moe" in text else "Qwen3-32B"


MARKDOWN_INTRO = """\
# The shipped-config sweep

`msnb smoke` on every training and finetune YAML the installed mindformers ships (`run_mode` train or finetune, found
through the package's own file list), each first turned into what a user writes before launching it: a copy in a
folder of their own with MFLossMonitor, SummaryMonitor and CheckpointMonitor callbacks, a `monitor_config` with
`monitor_on` and the log and TensorBoard formats people ask for, and a `tensorboard` section; a placeholder
`pretrained_model_dir` (`/path/to/...`) points at a Hugging Face folder holding the published model's `config.json`.
Written by `python benchmarks/smoke_sweep.py --markdown docs/SMOKE_SWEEP.md` (`--pattern GLOB` for a subset,
`--steps N`); the seconds include MindSpore's graph compilation, which dominates, and the peak RSS is that of the
whole process tree (msnb, its guard, the training child), sampled every 0.2 s.

Outcomes: `passed` (exit 0); `failed` (exit 1: the config or its training is at fault); `not_rehearsed` (exit 3:
msnb cannot rehearse it here, naming what would run it); `refused` (exit 2: no smoke can start from this file); a
traceback whose innermost frame is msnb's own code is listed as `msnb error`, a bug, never a verdict (the child's
`ConfigFault`, the config's fault found before training, excepted).
"""
MARKDOWN_OUTRO = """
## Reading it

- Every `passed` row warns that a few loss points are too few to judge a trend (`loss_falling`): the sweep proves that each config builds, steps and writes through every callback; a longer
  `msnb smoke CONFIG` judges the training itself. `tensordump_metrics` warns that `local_loss_format` and
  `local_norm_format` need TensorDump, which has no CPU kernel (they run on Ascend).
- The MoE configs (DeepSeek-V3, Qwen3-MoE, TeleChat3-MoE, the MoE templates) train with every layer dense on CPU
  (`first_k_dense_replace` set to the layer count; Qwen3-MoE's layer spec built dense in the child): the router, the
  experts and their auxiliary loss are not rehearsed, which the verdict's `rehearse` line says and `loss_components`
  warns about where a loss component then stays at 0.
- `glm4/finetune_glm4_9b.yaml` fails for the config's own reason: with the `tensorboard` section a user adds, the
  shipped config's missing `runner_wrapper.scale_sense` makes mindformers' `write_args_to_tensorboard` raise
  `KeyError: 'scale_sense'` before step 1. `config_lint` predicts it from mindformers' source, and
  `tests/smoke/test_smoke_trust.py` runs the unmodified file through mindformers until that same crash.
- `general/run_general_task.yaml` is a template whose model sections say "please edit by hand": no smoke can start
  from it until a model class is named, so it is refused in one line.
- The four `general/llm_*_template.yaml` rows fail before training, on memory, and that is the config's failure, not
  msnb's: the sweep points each template at a published model (Qwen3-32B, Qwen3-30B-A3B for the MoE ones), and the
  templates' own layout, dp 2 x tp 2 x pp 2 on 8 cards without recompute, gives every card 8.2 B parameters of
  Qwen3-32B: 30.5 GiB of float32 weights, as much again of gradients, 30.5 GiB of AdamW moments after the parallel
  optimizer's split, before one activation, against the templates' `max_device_memory: 58GB` (the smoke's pre-flight
  says 126.1 GiB with activations, 159.2 GiB for the MoE one, and `msnb memory` offers layouts that fit). Every other
  check of their pre-flight passes with the full-size network built.
- `telechat3_moe` fails its pre-flight on its `offset` (proved above) and on memory: its `expert_parallel: 1` leaves all
  192 routed experts of a stage's layers on every card (mindformers' `GroupedMLP` splits experts over `ep` alone), so
  their float32 gradient buffer (`gradient_accumulation_shard: False`) is 42 GiB a card before anything else.
"""


def shipped_configs() -> tuple[Path, list[Path]]:
    """The installed mindformers' configs folder and its training and finetune YAMLs (``run_mode`` train or finetune)."""
    files = metadata.files("mindformers") or []
    root = Path(metadata.distribution("mindformers").locate_file("configs")).resolve()
    yamls = sorted({Path(f.locate()).resolve() for f in files if str(f).startswith("configs/") and str(f).endswith(".yaml")})
    found = []
    for path in yamls:
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and data.get("run_mode") in TRAINING_MODES:
            found.append(path)
    return root, found


def with_monitoring(shipped: Path, folder: Path) -> Path:
    """A user's copy of ``shipped`` in ``folder``, with the callbacks, monitor_config and tensorboard section added."""
    data = yaml.safe_load(shipped.read_text())
    if isinstance(data.get("base_config"), str) and not os.path.isabs(data["base_config"]):
        data["base_config"] = str((shipped.parent / data["base_config"]).resolve())  # the copy lives elsewhere
    callbacks = [c for c in data.get("callbacks") or [] if isinstance(c, dict)]
    have = {c.get("type") for c in callbacks}
    callbacks += [dict(c) for c in MONITORING_CALLBACKS if c["type"] not in have]
    data["callbacks"] = callbacks
    data["monitor_config"] = {**(data.get("monitor_config") or {}), **MONITOR_CONFIG}
    data["tensorboard"] = {**(data.get("tensorboard") or {}), **TENSORBOARD}
    pretrained = data.get("pretrained_model_dir")
    if isinstance(pretrained, str) and pretrained and not Path(pretrained).exists():  # a placeholder: the user's own folder
        name = hf_model_for(shipped, data)
        hf = folder / "hf" / name
        hf.mkdir(parents=True, exist_ok=True)
        (hf / "config.json").write_text(json.dumps(HF_CONFIGS[name], indent=2))
        data["pretrained_model_dir"] = str(hf)
    copy = folder / f"{shipped.parent.name}__{shipped.name}"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return copy


def model_class(shipped: Path) -> str:
    data = yaml.safe_load(shipped.read_text()) or {}
    model = data.get("model") or {}
    mc = model.get("model_config") or {}
    arch = model.get("arch") or {}
    trainer = data.get("trainer") or {}
    for name in (
        arch.get("type") if isinstance(arch, dict) else None,
        mc.get("architectures"),
        mc.get("model_type"),
        trainer.get("model_name"),
        mc.get("type"),
    ):
        if isinstance(name, list) and name:
            name = name[0]
        if isinstance(name, str) and name:
            return name
    return "-"


class PeakRSS(threading.Thread):
    """The peak of the summed resident memory of a process and all its descendants, sampled every 0.2 s."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self._done = pid, 0, threading.Event()

    def run(self) -> None:
        import psutil  # deferred: only the sweep samples memory

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._done.is_set():
            total = 0
            try:
                for proc in [root, *root.children(recursive=True)]:
                    try:
                        total += proc.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                break
            self.peak = max(self.peak, total)
            self._done.wait(0.2)

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


def _without_path(text: str) -> str:
    """``/tmp/x/copy.yaml:12: what`` -> ``what``: the copy's path says nothing in a table about the shipped file."""
    return text.split(": ", 1)[1] if text.startswith((os.sep, ".")) and ": " in text else text


def _reason(verdict: dict) -> str:
    for key in ("reason", "not_rehearsed", "refused"):
        if isinstance(verdict.get(key), str) and verdict[key]:
            return _without_path(verdict[key])
    checks = [c for c in verdict.get("checks") or [] if isinstance(c, dict)]
    failing = [c for c in checks if str(c.get("status")).lower() == "fail"]
    if failing:
        first = failing[0]
        reason = f"{first.get('name')}: {first.get('detail') or first.get('message') or ''}".strip()
        predicted = [f for f in verdict.get("findings") or [] if isinstance(f, dict) and f.get("severity") == "error" and f.get("message")]
        if predicted:  # config_lint's prediction, from mindformers' own source: the unmodified config dies the same way
            message = str(predicted[0]["message"])
            reason += "; the unmodified config dies too: " + _without_path(message)
        return reason
    warns = [str(c.get("name")) for c in checks if str(c.get("status")).lower() == "warn"]
    return f"warnings: {', '.join(warns)}" if warns else ""


def _in_msnb(traceback: str) -> bool:
    """Whether a traceback's innermost frame is msnb's own code (a bug the sweep exists to find, never a verdict).

    The child's ``ConfigFault`` is msnb's code on purpose: the config's fault found before training (the full-size
    pre-flight's finding, an unregistered model type), a verdict.
    """
    lines = traceback.strip().splitlines()
    if lines and lines[-1].startswith(("ConfigFault:", "msnb.smoke.mindformers.worker.ConfigFault:")):
        return False
    frames = [line for line in lines if line.strip().startswith('File "')]
    return bool(frames) and f"{os.sep}msnb{os.sep}" in frames[-1]


def smoke(config: Path, steps: int, timeout: float) -> dict:
    """Run ``msnb smoke CONFIG --json`` and read its outcome, reason, time and peak memory (the verdict is kept beside the config)."""
    command = [sys.executable, "-m", "msnb.cli", "smoke", str(config), "--json", "--steps", str(steps), "--timeout", str(int(timeout))]
    t0 = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=config.parent)
    sampler = PeakRSS(proc.pid)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout + 120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    seconds, peak = time.monotonic() - t0, sampler.stop()
    config.with_suffix(".verdict.json").write_text(out)
    config.with_suffix(".stderr.txt").write_text(err)
    try:
        verdict = json.loads(out)
    except ValueError:
        verdict = {}
    if not isinstance(verdict, dict):
        verdict = {}
    code = proc.returncode
    outcome = verdict.get("outcome") or {0: "passed", 1: "failed", 2: "refused", 3: "not_rehearsed"}.get(code, f"crashed (exit {code})")
    reason = _reason(verdict) if verdict else ""
    if not reason:
        lines = [line for line in err.splitlines() if line.strip()]
        reason = lines[-1] if lines else ""
    if code not in (0, 1, 2, 3) or "Traceback (most recent call last)" in err:
        outcome, reason = "msnb error", (err.strip().splitlines() or ["?"])[-1]
    elif _in_msnb(str(verdict.get("traceback") or "")):
        outcome = f"msnb error ({outcome})"
    return {"outcome": outcome, "reason": " ".join(reason.split()), "seconds": seconds, "peak_rss_mib": peak / 2**20, "exit": code}


PREFLIGHT_BEGIN, PREFLIGHT_END = "<!-- preflight table: benchmarks/smoke_sweep.py -->", "<!-- end of the preflight table -->"


PREFLIGHT_READING = """- Each pre-flight builds what the cluster builds: the run's context (`build_context`, the communication start stood in
  for), `check_rules`, the model config, its `TransformerConfig` and layer split, then the full-size network through the
  Trainer's own `create_network_without_param_init` (parameters without data), the training wrapper, the optimizer and
  its learning-rate schedule, the run's wrapper and every callback, and MindSpore's graph-compiler pipeline rules.
  "checks run" counts the steps that ran; "full-size network" says whether the network was built.
- What stood in, for every config that builds in parallel: "communication" (this process answers as rank 0 of the
  launch's devices: `init`, `get_rank`, `get_group_size`, `create_group`; nothing is sent), "device_target CPU" (for
  Ascend), "parameters without data" (MindSpore's `no_init_parameters`) and "dataset size" (1,000,000 steps where the
  learning-rate schedule asks it: a refusal there is a rule about the data, never a finding).
- Rules not run, on every config, listed apart because they are about the data: the dataset and runner rules
  (`check_runner_config`, which needs the dataset) and `TrainingArguments` (a YAML run never reaches them). They do not
  change the outcome.
- "not checked" (exit 3): the finetune configs and the general templates take their sizes from a `pretrained_model_dir`
  (`/path/to/...`) that is not on this machine, so neither the model config nor the network can be built here; the
  pre-flight says so rather than pass them. Give the folder (or a copy of its config.json) and they are built.
- Findings, each proved: `general/run_general_task.yaml`, the edit-by-hand template, names no model type, and
  mindformers' own registry raises the KeyError quoted (the same that stops the smoke); `telechat3_moe`: 45 layers over 8
  pipeline stages with `offset: 0`, which mindformers' `LayerSetting` refuses (the offsets must add up to 45 % 8 = 5) when
  its `TransformerBlock` is built, on mindformers 1.9 and 2.0 alike; the proved suggestion is the even offset list.
- The `server_num % pipeline_stage` warnings are mindformers' own (`check_rules._check_parallel` logs them): at 16 cards
  and mindformers' default of 8 devices a node (`DEVICE_NUM_PER_NODE`), 2 servers do not divide 4 or 16 pipeline stages."""


def shipped_devices(path: Path, data: dict) -> tuple[int, str]:
    """The device count a shipped config is launched on: its file name's ``16p`` when it has one, else its own layout's product.

    mindformers' wheel ships no launch script or README per config; the file name (``..._16p_pp16.yaml``) is the one
    place that states a count, and every other shipped config's ``parallel_config`` is written for exactly
    ``dp * mp * cp * pp`` cards (mindformers' docs launch them so).
    """
    import re

    named = re.search(r"_(\d+)p(?:_|\.yaml$)", path.name)
    if named:
        return int(named.group(1)), f"file name ({named.group(1)}p)"
    pc = data.get("parallel_config") or {}
    degrees = [int(pc.get(k) or 1) for k in ("data_parallel", "model_parallel", "context_parallel", "pipeline_stage")]
    product = degrees[0] * degrees[1] * degrees[2] * degrees[3]
    return product, "its parallel_config (dp x mp x cp x pp = " + " x ".join(map(str, degrees)) + ")"


def preflight_rows(root: Path, configs: list) -> list:
    """``msnb preflight`` on every shipped config at its shipped device count, all in one child (mindformers imported once)."""
    from msnb.fullsize.preflight import run_preflights

    items, counts = [], []
    for path in configs:
        devices, source = shipped_devices(path, yaml.safe_load(path.read_text()) or {})
        items.append((path, devices, None))
        counts.append(source)
    results = run_preflights(items)
    rows = []
    for path, source, result in zip(configs, counts, results):
        said = [c.line() for c in result.findings] or [f"warning: {c.message}" for c in result.warnings]
        if result.msnb_errors or result.error:
            said.append(f"msnb's own error: {result.error or result.msnb_errors[0].message}")
        ran = [c for c in result.checks if c.outcome in ("passed", "warning", "failed")]
        rows.append(
            {
                "config": str(path.relative_to(root)),
                "devices": result.devices,
                "count_from": source,
                "outcome": result.outcome,
                "said": _without_path("; ".join(said) or "every check that ran passed").replace(str(root.parent) + "/", ""),
                "ran": len(ran),
                "network": next((c.outcome for c in result.checks if c.check.startswith("the full-size network")), "not reached"),
                "stood_in": "; ".join(_stand_in_word(s) for s in result.stood_in),
                "not_checked": "; ".join(f"{c.check}: {c.message}" for c in result.not_checked),
                "data_rules": "; ".join(c.check for c in result.data_rules),
                "seconds": round(result.seconds, 1),
            }
        )
    return rows


def _stand_in_word(said: str) -> str:
    """A stand-in's short name for the table (the whole sentence is in the reading below it)."""
    for word, short in (
        ("communication", "communication"),
        ("context.device_target", "device_target CPU"),
        ("parameters", "parameters without data"),
        ("the dataset", "dataset size"),
    ):
        if said.startswith(word):
            return short
    return said.split(":")[0]


def preflight_table(rows: list) -> str:
    lines = [
        "| config | devices (from) | outcome | checks run | full-size network | stood in | findings and warnings | not checked (and why) | seconds |",
        "|---|---|---|---:|---|---|---|---|---:|",
    ]
    for r in rows:
        cells = [
            r["config"], f"{r['devices']} ({r['count_from']})", r["outcome"], r.get("ran", ""), r.get("network", ""), r.get("stood_in", ""),
            r["said"], r["not_checked"], r["seconds"],
        ]  # fmt: skip
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def table(rows: list) -> str:
    lines = ["| config | model class | outcome | reason | seconds | peak RSS (MiB) |", "|---|---|---|---|---:|---:|"]
    for r in rows:
        reason = r["reason"].replace("|", "\\|")
        lines.append(f"| {r['config']} | {r['model']} | {r['outcome']} | {reason} | {r['seconds']:.0f} | {r['peak_rss_mib']:.0f} |")
    return "\n".join(lines)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pattern", action="append", default=[], help="only configs whose path under configs/ matches this glob (repeatable), e.g. 'qwen3/*'")
    parser.add_argument("--steps", type=int, default=8, help="steps per smoke (default 8)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one smoke may take (default 900)")
    parser.add_argument("--markdown", help="also write the table, with date, versions and total time, to this file")
    parser.add_argument("--json", dest="json_out", help="also write the rows as JSON to this file")
    parser.add_argument("--keep", help="write the user-like configs into this folder (kept) instead of a temporary one")
    parser.add_argument(
        "--from-json",
        nargs="+",
        metavar="ROWS",
        help="run nothing: render the rows of earlier --json files as one table (a config in several: the last file's row)",
    )
    parser.add_argument(
        "--verdicts", action="append", default=[], help="with --from-json: re-read each row's reason from the verdicts kept in this --keep folder"
    )
    parser.add_argument("--note", help="a sentence added after the markdown's first line (how and where the sweep ran)")
    parser.add_argument(
        "--preflight-only",
        action="store_true",
        help="run only msnb preflight on every shipped config at its shipped device count (one child, seconds); with --markdown, its section is replaced",
    )
    args = parser.parse_args(argv)
    if args.preflight_only:
        return _preflight_only(args)
    if args.from_json:
        parts = [json.loads(Path(p).read_text()) for p in args.from_json]
        latest = {r["config"]: r for part in parts for r in part["rows"]}  # a config run again: its later row counts
        rows = [latest[name] for name in sorted(latest)]
        for row in rows:
            for folder in args.verdicts:
                kept = Path(folder) / (row["config"].replace("/", "__")[: -len(".yaml")] + ".verdict.json")
                if kept.is_file() and kept.stat().st_size:
                    row["reason"] = " ".join(_reason(json.loads(kept.read_text())).split()) or row["reason"]
        total, steps = sum(r["seconds"] for r in rows), parts[0]["steps"]
        load = max((p["load"] for p in parts if isinstance(p.get("load"), (int, float))), default=None)
    else:
        rows, total, load = run_sweep(args), 0.0, os.getloadavg()[0]
        if rows is None:
            return 2
        total, steps = rows.pop(), args.steps
    print(table(rows))
    print(f"\n{len(rows)} configs, {steps} steps each, {total / 60:.1f} min in all")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"rows": rows, "total_s": total, "steps": steps, "load": load}, indent=2))
    if args.markdown:
        counts = {}
        for r in rows:
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        head = (
            f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()} ({os.cpu_count()} cores"
            f"{'' if load is None else f', load average {load:.0f} at the start'}), "
            f"mindformers {_version('mindformers')}, MindSpore {_version('mindspore')}, msnb {_version('msnb')}, Python {platform.python_version()}: "
            f"{len(rows)} configs, {steps} steps each, {total / 60:.1f} min of smoke runs in all "
            f"({', '.join(f'{n} {k}' for k, n in sorted(counts.items()))})."
        )
        head += f" {args.note}" if args.note else ""
        root, configs = shipped_configs()
        configs = [c for c in configs if str(c.relative_to(root)) in {r["config"] for r in rows}]
        section = _preflight_section(preflight_rows(root, configs)) if configs else ""
        Path(args.markdown).write_text(f"{MARKDOWN_INTRO}\n{head}\n\n{table(rows)}\n{MARKDOWN_OUTRO}{section}")
    return 0 if all(r["outcome"] in ("passed", "not_rehearsed") for r in rows) else 1


def _preflight_section(rows: list) -> str:
    said = {o: sum(r["outcome"] == o for r in rows) for o in ("passed", "failed", "not checked")}
    return (
        f"\n{PREFLIGHT_BEGIN}\n## The full-size pre-flight\n\n"
        "`msnb preflight`'s mindformers checks (its startup checks at full size: docs/COMMANDS.md; the memory check is the smoke rows' above and `msnb memory`'s) on each shipped config at its shipped "
        "device count: the count its file name states (`_16p_`), else the one its own `parallel_config` is written for "
        "(dp x mp x cp x pp; mindformers' wheel ships no launch script per config). "
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC with mindformers {_version('mindformers')}: "
        f"{len(rows)} configs, {', '.join(f'{n} {k}' for k, n in said.items() if n)}, "
        f"{sum(r['seconds'] for r in rows):.1f} s in all (a child process per config, and per suggestion proved).\n\n{preflight_table(rows)}\n\n{PREFLIGHT_READING}\n{PREFLIGHT_END}\n"
    )


def _preflight_only(args) -> int:
    root, configs = shipped_configs()
    if args.pattern:
        configs = [c for c in configs if any(fnmatch.fnmatch(str(c.relative_to(root)), p) or p in str(c.relative_to(root)) for p in args.pattern)]
    rows = preflight_rows(root, configs)
    print(preflight_table(rows))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"preflight": rows}, indent=2))
    if args.markdown:
        path = Path(args.markdown)
        text = path.read_text() if path.is_file() else ""
        section = _preflight_section(rows)
        if PREFLIGHT_BEGIN in text and PREFLIGHT_END in text:
            before, rest = text.split(PREFLIGHT_BEGIN, 1)
            text = before.rstrip("\n") + "\n" + section + rest.split(PREFLIGHT_END, 1)[1].lstrip("\n")
        else:
            text = text.rstrip("\n") + "\n" + section
        path.write_text(text)
    return 0 if all(r["outcome"] == "passed" for r in rows) else 1


def run_sweep(args) -> list | None:
    """Smoke every matching shipped config, one after another; the rows, then the total seconds as the last item."""
    root, configs = shipped_configs()
    if args.pattern:
        configs = [c for c in configs if any(fnmatch.fnmatch(str(c.relative_to(root)), p) or p in str(c.relative_to(root)) for p in args.pattern)]
    if not configs:
        print("smoke_sweep: no shipped training or finetune config matched (is mindformers installed?)", file=sys.stderr)
        return None
    t0 = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="msnb_sweep_") as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for shipped in configs:
            name = str(shipped.relative_to(root))
            result = smoke(with_monitoring(shipped, folder), args.steps, args.timeout)
            rows.append({"config": name, "model": model_class(shipped), **result})
            print(
                f"{name}: {result['outcome']} in {result['seconds']:.0f} s, {result['peak_rss_mib']:.0f} MiB: {result['reason'][:300]}",
                file=sys.stderr,
                flush=True,
            )
    return [*rows, time.monotonic() - t0]


if __name__ == "__main__":
    sys.exit(main())
