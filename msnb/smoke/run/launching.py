"""A prepared smoke run started: its private scratch directory, the child's spec (built-in model or mindformers
config) and the guard (:mod:`msnb.smoke.run.guard`), which starts the worker or msrun.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

from ...fullsize.launch import per_node_words, read_launch
from ...processes import child_environment
from ..mindformers.child import child_config
from .guard import MARKER_VAR
from .kept import scratch_directory
from .preparing import Prepared

DEFAULT_LR = 0.05


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Launched:
    """A started run: its scratch directory, where the summaries go, the guard process and the run's marker."""

    prepared: Prepared
    workdir: Path
    summary: Path
    spec: dict
    proc: subprocess.Popen
    marker: str
    log_path: Path
    started: float
    _log: object = None


def _spec(prepared: Prepared, workdir: Path, summary: Path, code_path: Path | None, collect_freq: int) -> dict:
    o, loaded = prepared.options, prepared.loaded
    mf_model = None
    if loaded is not None and isinstance(loaded.get("model"), dict) and ("trainer" in loaded.data or "run_mode" in loaded.data):
        arch = (loaded.get("model.arch") or {}).get("type") if isinstance(loaded.get("model.arch"), dict) else None
        mf_model = arch or "a mindformers model"
    return {
        "mindformers_model": mf_model,
        "steps": int(o.steps),
        "batch_size": int(o.batch_size),
        "lr": float(o.lr if o.lr is not None else DEFAULT_LR),
        "device": prepared.device,
        "mode": o.mode,
        "config": str(workdir / "monitor.yaml"),
        "workdir": str(workdir),
        "collect_freq": collect_freq,
        "code": str(code_path) if code_path else None,
        "module": prepared.module,
        "module_path": prepared.module_path,
        "sink_size": o.sink_size,
        "distributed": o.workers > 1,
        "seed": 0,
    }


def _int_or(value, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _preflight_devices(o) -> dict:
    """What the smoke's pre-flight is told: the device count it checks the layout against (--devices, --launch's, or
    unknown: then "not checked"), the cards a node (--devices-per-node, --launch's, or mindformers' 8, said in words),
    and the card the per-card memory is judged against (--card-gb / --card, else the config's context.max_device_memory)."""
    per_node, per_node_from = (o.devices_per_node, f"--devices-per-node {o.devices_per_node}") if o.devices_per_node else (None, "")
    devices = o.devices
    if o.launch:
        read = read_launch(o.launch)
        devices = read.devices
        if per_node is None:
            per_node, per_node_from = read.per_node, read.per_node_from
    return {
        "devices": devices,
        "per_node": per_node,
        "per_node_words": per_node_words(per_node, per_node_from),
        "card_gb": o.card_gb,
        "card": o.card,
    }


def _mindformers_spec(prepared: Prepared, workdir: Path, summary: Path) -> dict:
    """The child's spec: the user's own file, the plan's changes and the isolate changes as overrides on mindformers' reading of it.

    ``run.yaml`` beside it is what msnb expects mindformers to train (for a person reading a kept scratch folder);
    the child never loads it.
    """
    o, plan = prepared.options, prepared.plan
    config, isolate = child_config(plan, workdir, summary)
    changes = list(plan.changes) + list(isolate)
    (workdir / "run.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (workdir / "changes.json").write_text(json.dumps([c.as_dict() for c in changes], indent=1))  # every change, for a person
    (workdir / "isolate.json").write_text(json.dumps([c.as_dict() for c in isolate]))  # those made at launch, for the verdict
    collect = next(
        (_int_or(cb.get("collect_freq"), 1) for cb in config.get("callbacks") or [] if isinstance(cb, dict) and cb.get("type") == "SummaryMonitor"), 1
    )
    mc = config.get("model", {}).get("model_config", {})
    vocab = next((mc[k] for k in ("vocab_size", "padded_vocab_size") if k in mc), None)
    return {
        "mindformers_model": plan.family,
        "legacy": plan.legacy,
        "steps": int(o.steps),
        "device": prepared.device,
        "mode": o.mode,
        "config": str(Path(prepared.loaded.path).resolve()),
        "overrides": [c.override() for c in changes],
        "seq": _int_or(mc.get("seq_length"), 32),
        "vocab": _int_or(vocab, 256),
        "workdir": str(workdir),
        "collect_freq": collect,
        "data": plan.data,
        "columns": plan.columns,
        "mindrecord": plan.mindrecord,  # the config's own MindRecord files, cut to the shrunk sequence in the child
        "seq_before": plan.before.get("seq"),
        "seq_after": plan.after.get("seq"),
        "distributed": o.workers > 1,
        "seed": 0,
        "preflight": _preflight_devices(o),  # mindformers' own startup checks on the unshrunk config first (msnb.fullsize.preflight)
    }


def launch(prepared: Prepared) -> Launched:
    """Make the scratch directory, write the child's spec and start the guard.

    Args:
        prepared: what :func:`prepare` returned.

    Returns:
        The running launch, for :func:`watch`.
    """
    o = prepared.options
    started = time.monotonic()
    workdir = scratch_directory(o.keep)  # a private temporary directory (0700), or the user's --keep DIR
    try:
        summary = prepared.summary or workdir / "summary"
        summary.mkdir(parents=True, exist_ok=True, mode=0o700)
        if prepared.plan is not None:
            spec = _mindformers_spec(prepared, workdir, summary)
        else:
            monitor = {"monitor_config": {**prepared.monitor["monitor_config"], "summary_dir": str(summary)}}
            (workdir / "monitor.yaml").write_text(yaml.safe_dump(monitor, sort_keys=False))
            code_path = None
            if o.code is not None:
                code_path = workdir / "user_code.py"
                code_path.write_text(o.code)
            spec = _spec(prepared, workdir, summary, code_path, monitor["monitor_config"]["collect_freq"])
        (workdir / "spec.json").write_text(json.dumps(spec))

        marker = uuid.uuid4().hex
        (workdir / "tmp").mkdir(mode=0o700)  # the child's temporary files (mindformers' parallel_speed_up_*.json) go with the scratch folder
        tmp = str(workdir / "tmp")
        # MARKER_VAR marks every process of this run, whatever session it is in
        env = child_environment(workdir, **{MARKER_VAR: marker}, PYTHONUNBUFFERED="1", TMPDIR=tmp, TMP=tmp, TEMP=tmp)
        bin_dir = str(Path(sys.executable).parent)
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")  # msrun starts `python` from PATH
        if prepared.plan is not None and o.workers == 1:
            command = [sys.executable, "-m", "msnb.smoke.mindformers.worker", str(workdir / "spec.json")]
            stop = signal.SIGTERM
        elif o.workers == 1:
            command = [sys.executable, "-m", "msnb.smoke.builtin.worker", str(workdir / "spec.json")]
            stop = signal.SIGTERM
        else:
            command = [
                prepared.msrun,
                f"--worker_num={o.workers}",
                f"--local_worker_num={o.workers}",
                f"--master_port={_free_port()}",
                f"--log_dir={workdir / 'logs'}",
                "--join=True",
                str(Path(__file__).with_name("msrun_entry.py")),
                str(workdir / "spec.json"),
            ]
            stop = signal.SIGINT  # msrun stops its workers, scheduler and log tails on SIGINT only
        guard = [sys.executable, str(Path(__file__).with_name("guard.py")), str(workdir), "1" if o.keep else "0", str(os.getpid()), str(int(stop)), "--"]
        log_path = workdir / "train.log"
        log = open(log_path, "wb")
        proc = subprocess.Popen(guard + command, stdout=log, stderr=subprocess.STDOUT, cwd=str(workdir), env=env, start_new_session=True)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Launched(prepared, workdir, summary, spec, proc, marker, log_path, started, log)
