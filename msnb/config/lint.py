"""Lint rules for monitoring settings: each finding has a rule, a severity, the key and one line of why."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass

from ..doctor import installed_major
from .loader import LoadedConfig
from .monitor_schema import MonitorSettings, monitor_settings

ERROR, WARNING, INFO = "error", "warning", "info"
_EVERYTHING = {"", ".*", "^.*$", ".+", ".", "^.*", ".*$"}
_PRINTERS = {"LossMonitor", "MFLossMonitor", "TimeMonitor"}
_MINDFORMERS_SECTIONS = {"trainer", "model", "run_mode"}  # keys only a mindformers run config has


@dataclass
class Finding:
    rule: str
    severity: str
    key: str
    message: str

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.severity}: {self.key}: {self.message} [{self.rule}]"


def is_distributed(data: dict) -> bool:
    """Does this mindformers-style config describe a run over several devices?"""
    if data.get("use_parallel") is True:
        return True
    mode = str((data.get("parallel") or {}).get("parallel_mode", "")).lower()
    if mode and mode not in ("0", "stand_alone", "standalone"):
        return True
    pc = data.get("parallel_config") or {}
    product = 1
    for k in ("data_parallel", "model_parallel", "pipeline_stage", "context_parallel"):
        v = pc.get(k)
        if isinstance(v, int) and v > 1:
            product *= v
    return product > 1


def lint(config: LoadedConfig | dict, settings: MonitorSettings | None = None, *, steps: int | None = None, distributed: bool | None = None) -> list[Finding]:
    """Findings for a loaded configuration (or a plain dict with a ``monitor_config``).

    *steps*: how long the run is, when known (short runs may collect often);
    *distributed*: override what the config says about several devices.
    """
    loaded = config if isinstance(config, LoadedConfig) else LoadedConfig(data=config, path="<dict>")
    data = loaded.data
    s = settings or monitor_settings(loaded)
    out: list[Finding] = []
    mc = "monitor_config"

    for file, key, first, second in loaded.duplicates:
        out.append(Finding("duplicate-key", WARNING, key, f"'{key}' appears twice in {file} (lines {first} and {second}); the later one wins"))

    if s.collect_freq < 10 and (steps is None or steps >= 1000):
        out.append(
            Finding(
                "collect-freq-low",
                WARNING,
                f"{mc}.collect_freq",
                f"collect_freq {s.collect_freq} records a summary every {s.collect_freq} step(s): on a long run that costs step time and disk; use 10 or more",
            )
        )

    regular = s.collect_specified_data.get("histogram_regular")
    every = bool((s.histogram_settings or {}).get("every_parameter")) or (isinstance(regular, str) and regular.strip() in _EVERYTHING)
    if every:
        out.append(
            Finding(
                "histogram-every-parameter",
                WARNING,
                f"{mc}.collect_specified_data.histogram_regular",
                "histograms of every parameter at each collection: slow steps and a large summary; name the layers you need",
            )
        )

    dist = is_distributed(data) if distributed is None else distributed
    has_rank = bool(re.search(r"rank", s.summary_dir, re.I))
    if dist and not has_rank:
        if s.per_rank_dir:
            out.append(
                Finding(
                    "summary-dir-per-rank",
                    INFO,
                    f"{mc}.summary_dir",
                    f"distributed run: msnb's callbacks write to {s.summary_dir}/rank_<id>; tools that read summary_dir directly see one directory per rank",
                )
            )
        else:
            out.append(
                Finding(
                    "summary-dir-no-rank",
                    WARNING,
                    f"{mc}.summary_dir",
                    "distributed run with one summary_dir for every rank: their files collide and the curves interleave; add rank_<id> or set per_rank_dir: true",
                )
            )

    callbacks = data.get("callbacks") or []
    types = [c.get("type") for c in callbacks if isinstance(c, dict)]
    printers = sorted(set(types) & _PRINTERS)
    if s.keep_default_callbacks and printers:
        out.append(
            Finding(
                "duplicate-printing",
                WARNING,
                "callbacks",
                f"callbacks lists {', '.join(printers)} while keep_default_callbacks is on: every step is printed twice; set keep_default_callbacks: false",
            )
        )

    if s.early_stop is not None and s.early_stop.window <= 1:
        out.append(
            Finding(
                "early-stop-raw-loss",
                WARNING,
                f"{mc}.early_stop.window",
                "early stop with window 1 judges the raw step loss, which is noisy: one bad batch stops the run; use a window of 10 or more",
            )
        )
    for i, c in enumerate(callbacks):
        if isinstance(c, dict) and c.get("type") == "EarlyStopping" and str(c.get("monitor", "eval_loss")).endswith("loss"):
            out.append(
                Finding(
                    "early-stop-raw-loss",
                    WARNING,
                    f"callbacks[{i}]",
                    "EarlyStopping compares single loss values: it judges the raw loss; msnb's monitor_config.early_stop judges a moving average",
                )
            )

    if s.summary_base_dir:
        base = os.path.normpath(os.path.abspath(os.path.expanduser(s.summary_base_dir)))
        run = os.path.normpath(os.path.abspath(os.path.expanduser(s.summary_dir)))
        rel = os.path.relpath(run, base)
        if rel == ".":
            out.append(
                Finding(
                    "summary-dir-is-base",
                    WARNING,
                    f"{mc}.summary_dir",
                    "summary_dir is summary_base_dir itself: MindInsight and msnb list runs as its subdirectories, so this run has no name beside the others",
                )
            )
        elif rel.startswith(".."):
            out.append(
                Finding(
                    "summary-dir-outside-base",
                    WARNING,
                    f"{mc}.summary_dir",
                    f"summary_dir {s.summary_dir} is not under summary_base_dir {s.summary_base_dir}: MindInsight will not find it, nor will reading the base directory",
                )
            )
        elif len(rel.split(os.sep)) > 1:
            out.append(
                Finding(
                    "summary-dir-too-deep",
                    INFO,
                    f"{mc}.summary_dir",
                    f"summary_dir is {len(rel.split(os.sep))} levels below summary_base_dir: MindInsight lists only its direct children (msnb reads any depth)",
                )
            )

    major = installed_major("protobuf")
    if major is not None and major >= 4 and s.collect_specified_data.get("collect_dataset_graph", True):
        out.append(
            Finding(
                "dataset-graph-protobuf",
                INFO,
                f"{mc}.collect_specified_data.collect_dataset_graph",
                f"protobuf {major}.x makes SummaryCollector crash while collecting the dataset graph; msnb's callbacks turn it off",
            )
        )

    if _MINDFORMERS_SECTIONS & set(data) and s.present:
        out.append(
            Finding(
                "msnb-keys-in-mindformers-config",
                WARNING,
                mc,
                f"mindformers rejects unknown monitor_config keys (KeyError), and {', '.join(sorted(s.present))} are msnb's: "
                "keep them in a file that only msnb reads",
            )
        )
    return out
