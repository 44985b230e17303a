"""The ``monitor_config`` block: msnb's keys, mindformers' keys, and their types.

Users keep one ``monitor_config`` block that every job pulls in through
``base_config``.  msnb reads its own keys (summary directory, collection
frequency, printing, early stop) and accepts mindformers' ``monitor_config``
keys beside them, so a mindformers YAML loads without error.  A key that is
in neither set is an error naming the file and the key, as in mindformers.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from ..words import plural
from .loader import ConfigError, LoadedConfig

# mindformers 1.9.0, tools/register/template.py: MonitorConfig (tests compare with the installed one)
MINDFORMERS_MONITOR_KEYS = frozenset(
    {
        "monitor_on",
        "dump_path",
        "target",
        "invert",
        "step_interval",
        "local_loss_format",
        "local_norm_format",
        "device_local_norm_format",
        "device_local_loss_format",
        "optimizer_state_format",
        "weight_state_format",
        "max_attention_logit_format",
        "throughput_baseline",
        "print_struct",
        "check_for_global_norm",
        "global_norm_spike_threshold",
        "global_norm_spike_count_threshold",
        "stable_rank_config",
        "health_checkpoint",
    }
)

# MindSpore's SummaryCollector collect_specified_data keys
SUMMARY_COLLECT_KEYS = frozenset(
    {
        "collect_metric",
        "collect_graph",
        "collect_train_lineage",
        "collect_eval_lineage",
        "collect_input_data",
        "collect_dataset_graph",
        "histogram_regular",
        "collect_landscape",
    }
)
# msnb's own spelling for histogram selection, turned into histogram_regular
HISTOGRAM_SETTINGS_KEYS = frozenset({"regular", "every_parameter"})

EARLY_STOP_KEYS = {
    "monitor": str,
    "window": int,
    "patience": int,
    "min_delta": (int, float),
    "mode": str,
    "stop_on_nan": bool,
    "min_steps": int,
}


@dataclass
class EarlyStopSettings:
    """Stop when the moving average of the monitored value over *window* steps
    has not improved by *min_delta* for *patience* steps (after *min_steps*)."""

    monitor: str = "loss"
    window: int = 20
    patience: int = 100
    min_delta: float = 0.0
    mode: str = "min"
    stop_on_nan: bool = True
    min_steps: int = 0


@dataclass
class MonitorSettings:
    """msnb's reading of a ``monitor_config`` block, with defaults filled in."""

    summary_dir: str = "./summary"
    summary_base_dir: str | None = None
    collect_freq: int = 10
    collect_tensor_freq: int | None = None
    flush_interval: float | None = None
    max_file_size: int | None = None
    per_print_times: int = 1
    keep_default_callbacks: bool = True
    per_rank_dir: bool = True
    collect_specified_data: dict = field(default_factory=dict)
    histogram_settings: dict | None = None
    custom_lineage_data: dict | None = None
    early_stop: EarlyStopSettings | None = None
    mindformers: dict = field(default_factory=dict)  # mindformers' own monitor_config keys, untouched
    present: frozenset = frozenset()  # msnb keys the user wrote (defaults are not "written")


_TYPES = {
    "summary_dir": str,
    "summary_base_dir": (str, type(None)),
    "collect_freq": int,
    "collect_tensor_freq": (int, type(None)),
    "flush_interval": (int, float, type(None)),
    "max_file_size": (int, type(None)),
    "per_print_times": int,
    "keep_default_callbacks": bool,
    "per_rank_dir": bool,
    "collect_specified_data": (dict, type(None)),
    "histogram_settings": (dict, type(None)),
    "custom_lineage_data": (dict, type(None)),
    "early_stop": (dict, bool, type(None)),
}
MSNB_MONITOR_KEYS = frozenset(_TYPES)


def _type_name(t) -> str:
    if isinstance(t, tuple):
        return " or ".join(_type_name(x) for x in t)
    return {type(None): "null", str: "a string", int: "an integer", float: "a number", bool: "true/false", dict: "a mapping"}.get(t, t.__name__)


def _check_type(value, expected, key: str, locate):
    # YAML's true/false are bools, which are also ints in Python: keep them apart
    ok = isinstance(value, expected) and not (isinstance(value, bool) and bool not in (expected if isinstance(expected, tuple) else (expected,)))
    if not ok:
        text = repr(value)
        raise ConfigError(f"expected {_type_name(expected)}, got {text if len(text) <= 60 else text[:57] + '...'}", **locate(key))


def parse_monitor_config(block, *, loaded: LoadedConfig | None = None, prefix: str = "monitor_config") -> MonitorSettings:
    """Validate a ``monitor_config`` mapping into :class:`MonitorSettings`."""

    def locate(dotted: str) -> dict:
        """file, key and line of a dotted key, for ConfigError."""
        return loaded.locate(dotted) if loaded else {"file": None, "key": dotted}

    def where(key: str) -> dict:
        return locate(f"{prefix}.{key}")

    if block is None:
        block = {}
    if not isinstance(block, dict):
        raise ConfigError(f"monitor_config must be a mapping, got {block!r}", **locate(prefix))
    settings = MonitorSettings()
    present = set()
    for key, value in block.items():
        dotted = f"{prefix}.{key}"
        if key in MINDFORMERS_MONITOR_KEYS:
            settings.mindformers[key] = value
            continue
        if key not in MSNB_MONITOR_KEYS:
            close = difflib.get_close_matches(str(key), sorted(MSNB_MONITOR_KEYS | MINDFORMERS_MONITOR_KEYS), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            known = ", ".join(sorted(MSNB_MONITOR_KEYS))
            raise ConfigError(
                f"unknown key '{key}' in monitor_config; {hint}(msnb knows: {known}; mindformers' own monitor_config keys are accepted too)",
                **where(key),
            )
        _check_type(value, _TYPES[key], dotted, locate)
        present.add(key)
        if key == "early_stop":
            settings.early_stop = _parse_early_stop(value, dotted, locate)
        elif key == "collect_specified_data":
            settings.collect_specified_data = _parse_collect(value or {}, dotted, locate)
        else:
            setattr(settings, key, value)
    if settings.collect_freq < 1:
        raise ConfigError(f"collect_freq must be 1 or more, got {settings.collect_freq}", **where("collect_freq"))
    if settings.per_print_times < 0:
        raise ConfigError(f"per_print_times must be 0 (off) or more, got {settings.per_print_times}", **where("per_print_times"))
    if settings.flush_interval is not None and not 0 < settings.flush_interval < float("inf"):
        raise ConfigError("flush_interval is in seconds and must be a positive number", **where("flush_interval"))
    if settings.histogram_settings:
        unknown = set(settings.histogram_settings) - HISTOGRAM_SETTINGS_KEYS
        if unknown:
            raise ConfigError(
                f"unknown {plural(len(unknown), 'key')} {sorted(unknown)} in histogram_settings (known: regular, every_parameter)",
                **where("histogram_settings"),
            )
    settings.present = frozenset(present)
    return settings


def _parse_collect(value: dict, dotted: str, locate) -> dict:
    for key, v in value.items():
        if key not in SUMMARY_COLLECT_KEYS:
            raise ConfigError(
                f"unknown key '{key}' in collect_specified_data (SummaryCollector knows: {', '.join(sorted(SUMMARY_COLLECT_KEYS))})",
                **locate(f"{dotted}.{key}"),
            )
        if key == "histogram_regular":
            _check_type(v, (str, type(None)), f"{dotted}.{key}", locate)
        elif key == "collect_landscape":
            _check_type(v, (dict, type(None)), f"{dotted}.{key}", locate)
        else:
            _check_type(v, bool, f"{dotted}.{key}", locate)
    return dict(value)


def _parse_early_stop(value, dotted: str, locate) -> EarlyStopSettings | None:
    if value is False or value is None:
        return None
    if value is True:
        return EarlyStopSettings()
    es = EarlyStopSettings()
    for key, v in value.items():
        if key not in EARLY_STOP_KEYS:
            raise ConfigError(f"unknown key '{key}' in early_stop (known: {', '.join(EARLY_STOP_KEYS)})", **locate(f"{dotted}.{key}"))
        _check_type(v, EARLY_STOP_KEYS[key], f"{dotted}.{key}", locate)
        setattr(es, key, float(v) if key == "min_delta" else v)
    if es.mode not in ("min", "max"):
        raise ConfigError(f"mode must be 'min' or 'max', got {es.mode!r}", **locate(f"{dotted}.mode"))
    if es.window < 1 or es.patience < 1:
        raise ConfigError("window and patience must be 1 or more", **locate(dotted))
    return es


def monitor_settings(loaded: LoadedConfig) -> MonitorSettings:
    """The ``monitor_config`` block of a loaded file (defaults when it has none)."""
    return parse_monitor_config(loaded.get("monitor_config"), loaded=loaded)
