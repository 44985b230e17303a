"""Lint rules for monitoring settings: each finding has a rule, a severity, the key, one line of why and the fix.

The result depends only on the arguments and the installed MindSpore: the
protobuf major version is passed in by the caller, and whether it breaks the
dataset graph is read from MindSpore's generated modules (:mod:`msnb.requirements`);
the keys the rules
read outside ``monitor_config`` are type-checked first, so a config holding
``parallel: semi_auto`` is a :class:`ConfigError` naming file, key and line,
never a crash inside a rule.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from ..findings import ERROR, INFO, WARNING, Finding
from ..requirements import dataset_graph_breaks
from ..words import count
from .loader import LoadedConfig
from .mindformers_rules import startup_findings
from .monitor_schema import MonitorSettings, monitor_settings
from .run_config import is_mindformers_run
from .run_types import check_run_types

__all__ = ["Finding", "lint", "is_distributed", "sink_size", "LintFacts", "RULES"]

_EVERYTHING = {"", ".*", "^.*$", ".+", ".", "^.*", ".*$"}
_PRINTERS = {"LossMonitor", "MFLossMonitor", "TimeMonitor"}
_MINDFORMERS_SECTIONS = {"trainer", "model", "run_mode"}  # keys only a mindformers run config has
_PARALLEL_DEGREES = ("data_parallel", "model_parallel", "pipeline_stage", "context_parallel")


def is_distributed(data: dict) -> bool:
    """Does this mindformers-style config describe a run over several devices?

    Args:
        data: the loaded tree (types of ``parallel``/``parallel_config`` already checked, or not dicts: then ignored).

    Returns:
        True when ``use_parallel`` is on, a parallel mode other than stand-alone is set, or the parallel degrees multiply past 1.
    """
    if data.get("use_parallel") is True:
        return True
    parallel = data.get("parallel")
    mode = str(parallel.get("parallel_mode", "") if isinstance(parallel, dict) else "").lower()
    if mode and mode not in ("0", "stand_alone", "standalone"):
        return True
    pc = data.get("parallel_config")
    pc = pc if isinstance(pc, dict) else {}
    product = 1
    for k in _PARALLEL_DEGREES:
        v = pc.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 1:
            product *= v
    return product > 1


def _names_rank(path: str) -> bool:
    """Does *path* already name a rank (``.../rank_3``) or a per-rank template (``rank_{rank_id}``, ``rank_${RANK_ID}``)?"""
    # deferred: numpy and the readers (msnb.events), which reading a YAML does not need
    from ..events.discovery import rank_of_path

    if rank_of_path(path) is not None:
        return True
    return any(re.match(r"(?i)^(rank|device)[_-]?[{$<%]", part) for part in re.split(r"[\\/]", str(path)))


def sink_size(data: dict) -> int | None:
    """Steps per sink when ``runner_config.sink_mode`` is on (mindformers' spelling of ``dataset_sink_mode``), else None.

    Args:
        data: the loaded tree.

    Returns:
        ``runner_config.sink_size`` when sink mode is on and it is a positive integer; None otherwise
        (sink mode off, or ``sink_size: -1``, which sinks a whole epoch at once).
    """
    runner = data.get("runner_config")
    if not isinstance(runner, dict) or runner.get("sink_mode") is not True:
        return None
    size = runner.get("sink_size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def lint(
    config: LoadedConfig | dict,
    settings: MonitorSettings | None = None,
    *,
    steps: int | None = None,
    distributed: bool | None = None,
    protobuf_major: int | None = None,
) -> list[Finding]:
    """Findings for a loaded configuration (or a plain dict with a ``monitor_config``).

    Args:
        config: a :class:`LoadedConfig`, or a plain dict (then no file or line is known).
        settings: its ``monitor_config`` already parsed (parsed here when None).
        steps: how long the run is, when known (short runs may collect often).
        distributed: override what the config says about several devices.
        protobuf_major: the installed protobuf's major version (``msnb.doctor.installed_major("protobuf")``);
            None (unknown) leaves out the rule that depends on it; with protobuf >= 4 the rule fires only where the
            installed MindSpore's generated modules break the dataset graph (2.9's do, 2.10's do not).

    Returns:
        The findings, in the order of :data:`RULES`, then mindformers' startup findings.

    Raises:
        ConfigError: a key a rule reads holds the wrong type (file, key and line named).
    """
    loaded = config if isinstance(config, LoadedConfig) else LoadedConfig(data=config, path="<dict>")
    check_run_types(loaded)  # the one type check of the run YAML's sections (the smoke's prepare calls it too)
    facts = LintFacts(loaded, loaded.data, settings or monitor_settings(loaded), steps, distributed, protobuf_major)
    out: list[Finding] = [found for rule in RULES for found in rule(facts)]
    out += startup_findings(loaded)
    return out


@dataclass(frozen=True)
class LintFacts:
    """What every rule reads: the config, its parsed ``monitor_config`` and what the caller knows of the run."""

    loaded: LoadedConfig
    data: dict
    s: MonitorSettings
    steps: int | None
    distributed: bool | None
    protobuf_major: int | None


MC = "monitor_config"


def duplicate_keys(f: LintFacts) -> list[Finding]:
    """A key written twice in one mapping: YAML keeps the later one silently."""
    return [
        Finding(
            "duplicate-key",
            WARNING,
            f"'{key}' appears twice in {file} (lines {first} and {second}); the later one wins",
            fix=f"delete one of the two '{key}' lines",
            key=key,
        )
        for file, key, first, second in f.loaded.duplicates
    ]


def collect_freq_low(f: LintFacts) -> list[Finding]:
    """Recording every few steps on a long run costs step time and disk."""
    s = f.s
    if not (s.collect_freq < 10 and (f.steps is None or f.steps >= 1000)):
        return []
    return [
        Finding(
            "collect-freq-low",
            WARNING,
            f"collect_freq {s.collect_freq} records a summary every {count(s.collect_freq, 'step')}: on a long run that costs step time and disk",
            fix="use 10 or more",
            key=f"{MC}.collect_freq",
        )
    ]


def sink_mode_collect_freq(f: LintFacts) -> list[Finding]:
    """In dataset sink mode callbacks run once per sink: collect_freq counts sinks, and meets step counters rarely."""
    sink = sink_size(f.data)
    if sink is None or sink <= 1:
        return []
    freq = f.s.collect_freq
    # MindSpore's SummaryCollector (what msnb's monitor hands collect_freq to) counts it in sinks in this mode
    collector = f"MindSpore's SummaryCollector counts collect_freq in sinks when dataset sink mode is on: {freq} sinks are {freq * sink} steps"
    if not freq % sink:
        return [Finding("sink-mode-summary-unit", INFO, f"runner_config.sink_mode is on with sink_size {sink}: {collector}", key=f"{MC}.collect_freq")]
    if freq < sink:
        effect = f"collect_freq {freq} is smaller than that: the effective frequency is the sink size, one record every {sink} steps at most"
    else:
        effect = f"collect_freq {freq} is not a multiple of it: step-counting callbacks record only where both meet, every {freq * sink // math.gcd(freq, sink)} steps"
    return [
        Finding(
            "sink-mode-collect-freq",
            WARNING,
            f"runner_config.sink_mode is on with sink_size {sink}: callbacks run once per sink, every {sink} steps, so {effect}, "
            f"and curves jump in strides of the sink ({collector})",
            fix=f"set collect_freq to a multiple of sink_size ({sink}, {2 * sink}, ...)",
            key=f"{MC}.collect_freq",
        )
    ]


def histogram_every_parameter(f: LintFacts) -> list[Finding]:
    """Histograms of every parameter at each collection slow the steps and swell the summary."""
    s = f.s
    regular = s.collect_specified_data.get("histogram_regular")
    every = bool((s.histogram_settings or {}).get("every_parameter")) or (isinstance(regular, str) and regular.strip() in _EVERYTHING)
    if not every:
        return []
    return [
        Finding(
            "histogram-every-parameter",
            WARNING,
            "histograms of every parameter at each collection: slow steps and a large summary",
            fix="name the layers you need in histogram_regular",
            key=f"{MC}.collect_specified_data.histogram_regular",
        )
    ]


def summary_dir_per_rank(f: LintFacts) -> list[Finding]:
    """Ranks writing into one summary_dir collide; msnb's per_rank_dir splits them (and says where)."""
    s, data = f.s, f.data
    dist = is_distributed(data) if f.distributed is None else f.distributed
    # msnb's summary_dir: a mindformers run config writes its own summaries (SummaryMonitor) unless the user set msnb's key
    own_summary_dir = not is_mindformers_run(data) or "summary_dir" in s.present
    if not (dist and not _names_rank(s.summary_dir) and own_summary_dir):
        return []
    if s.per_rank_dir:
        return [
            Finding(
                "summary-dir-per-rank",
                INFO,
                f"distributed run: msnb's callbacks write to {s.summary_dir}/rank_<id>; tools that read summary_dir directly see one directory per rank",
                key=f"{MC}.summary_dir",
            )
        ]
    return [
        Finding(
            "summary-dir-no-rank",
            WARNING,
            "distributed run with one summary_dir for every rank: their files collide and the curves interleave",
            fix="add rank_<id> to summary_dir or set per_rank_dir: true",
            key=f"{MC}.summary_dir",
        )
    ]


def duplicate_printing(f: LintFacts) -> list[Finding]:
    """A printing callback listed while msnb keeps its default ones prints every step twice."""
    s, data = f.s, f.data
    types = [c.get("type") for c in (data.get("callbacks") or []) if isinstance(c, dict)]
    printers = sorted(set(t for t in types if isinstance(t, str)) & _PRINTERS)
    # keep_default_callbacks is msnb's key: a mindformers run config's callbacks are mindformers' own, unless the user set it
    msnb_callbacks = not is_mindformers_run(data) or "keep_default_callbacks" in s.present
    if not (s.keep_default_callbacks and printers and msnb_callbacks):
        return []
    return [
        Finding(
            "duplicate-printing",
            WARNING,
            f"callbacks lists {', '.join(printers)} while keep_default_callbacks is on: every step is printed twice",
            fix="set keep_default_callbacks: false",
            key="callbacks",
        )
    ]


def early_stop_raw_loss(f: LintFacts) -> list[Finding]:
    """An early stop that judges single loss values stops a run on one bad batch."""
    out = []
    if f.s.early_stop is not None and f.s.early_stop.window <= 1:
        out.append(
            Finding(
                "early-stop-raw-loss",
                WARNING,
                "early stop with window 1 judges the raw step loss, which is noisy: one bad batch stops the run",
                fix="use a window of 10 or more",
                key=f"{MC}.early_stop.window",
            )
        )
    for i, c in enumerate(f.data.get("callbacks") or []):
        if isinstance(c, dict) and c.get("type") == "EarlyStopping" and str(c.get("monitor", "eval_loss")).endswith("loss"):
            out.append(
                Finding(
                    "early-stop-raw-loss",
                    WARNING,
                    "EarlyStopping compares single loss values: it judges the raw loss",
                    fix="use msnb's monitor_config.early_stop, which judges a moving average",
                    key=f"callbacks[{i}]",
                )
            )
    return out


def summary_dir_placement(f: LintFacts) -> list[Finding]:
    """Where summary_dir lies against summary_base_dir decides whether MindInsight and a read of the base find the run."""
    s = f.s
    if not s.summary_base_dir:
        return []
    base = os.path.normpath(os.path.abspath(os.path.expanduser(s.summary_base_dir)))
    run = os.path.normpath(os.path.abspath(os.path.expanduser(s.summary_dir)))
    rel = os.path.relpath(run, base)
    if rel == ".":
        return [
            Finding(
                "summary-dir-is-base",
                WARNING,
                "summary_dir is summary_base_dir itself: MindInsight and msnb list runs as its subdirectories, so this run has no name beside the others",
                fix="point summary_dir at a subdirectory named after the run",
                key=f"{MC}.summary_dir",
            )
        ]
    if rel.startswith(".."):
        return [
            Finding(
                "summary-dir-outside-base",
                WARNING,
                f"summary_dir {s.summary_dir} is not under summary_base_dir {s.summary_base_dir}: MindInsight will not find it, nor will reading the base directory",
                fix="put summary_dir under summary_base_dir",
                key=f"{MC}.summary_dir",
            )
        ]
    if len(rel.split(os.sep)) > 1:
        return [
            Finding(
                "summary-dir-too-deep",
                INFO,
                f"summary_dir is {len(rel.split(os.sep))} levels below summary_base_dir: MindInsight lists only its direct children (msnb reads any depth)",
                key=f"{MC}.summary_dir",
            )
        ]
    return []


def dataset_graph_protobuf(f: LintFacts) -> list[Finding]:
    """The installed MindSpore's generated modules decide whether this protobuf crashes the dataset graph's collection."""
    if not (dataset_graph_breaks(f.protobuf_major) and f.s.collect_specified_data.get("collect_dataset_graph", True)):
        return []
    return [
        Finding(
            "dataset-graph-protobuf",
            INFO,
            f"protobuf {f.protobuf_major}.x makes this MindSpore's SummaryCollector crash while collecting the dataset graph; msnb's callbacks turn it off",
            key=f"{MC}.collect_specified_data.collect_dataset_graph",
        )
    ]


def msnb_keys_in_mindformers_config(f: LintFacts) -> list[Finding]:
    """mindformers refuses unknown monitor_config keys while loading its config: msnb's keys there kill the run."""
    s = f.s
    if not (_MINDFORMERS_SECTIONS & set(f.data) and s.present):
        return []
    return [
        Finding(
            "msnb-keys-in-mindformers-config",
            ERROR,
            f"mindformers rejects unknown monitor_config keys (KeyError: \"The config 'monitor_config' gets an unexpected key\", "
            f"mindformers/tools/register/template.py) and {', '.join(sorted(s.present))} are msnb's: the run dies while loading its config",
            fix="keep them in a file that only msnb reads",
            key=MC,
        )
    ]


# The rules, in the order their findings are listed; a new rule is one function of LintFacts added here.
RULES = (
    duplicate_keys,
    collect_freq_low,
    sink_mode_collect_freq,
    histogram_every_parameter,
    summary_dir_per_rank,
    duplicate_printing,
    early_stop_raw_loss,
    summary_dir_placement,
    dataset_graph_protobuf,
    msnb_keys_in_mindformers_config,
)
