"""MindSpore callbacks built from a ``monitor_config`` (MindSpore is imported only here).

``build_monitor_callbacks(cfg)`` accepts a YAML path, a loaded configuration, a
``monitor_config`` mapping or :class:`~msnb.config.MonitorSettings`, and returns
the callbacks that do the monitoring: LossMonitor and TimeMonitor, a
SummaryCollector with safe defaults writing to a per-rank directory, a periodic
flush so followers see data while the job runs, the smoothed early stop, and
the mindformers callbacks the config lists (built by mindformers).
"""

from __future__ import annotations

import os

from ..config import ConfigError, LoadedConfig, MonitorSettings, load_config, parse_monitor_config
from ..environment import installed_major
from ..events.discovery import rank_of_path
from ..requirements import dataset_graph_breaks


def _communication_initialised() -> bool:
    """Whether init() ran, asked without side effects.

    Calling get_rank() before init() "works" in MindSpore 2.9 but sets up
    standalone communication state that doubled the step time of a small
    graph-mode network in msnb's benchmark (0.9 -> 1.8 ms); so look first.
    """
    try:
        from mindspore.communication._comm_helper import GlobalComm  # optional: MindSpore (the mindspore extra)
    except ImportError:
        return False
    return bool(getattr(GlobalComm, "INITED", False))


def current_rank() -> tuple[int | None, int]:
    """(rank, world size) of this process: MindSpore's communication if initialised, else msrun's environment."""
    if _communication_initialised():
        try:
            from mindspore.communication import get_group_size, get_rank  # deferred: MindSpore (the mindspore extra)

            return int(get_rank()), int(get_group_size())
        except Exception:  # initialised but unusable: fall back to the environment
            pass
    for rank_var, size_var in (("RANK_ID", "RANK_SIZE"), ("MS_NODE_ID", "MS_WORKER_NUM")):
        rank, size = os.environ.get(rank_var), os.environ.get(size_var)
        if rank is not None and rank.isdigit():
            return int(rank), int(size) if size and size.isdigit() else 1
    return None, 1


def summary_dir_for_rank(settings: MonitorSettings, rank: int | None, world: int) -> str:
    """``summary_dir/rank_<id>`` in a distributed run (unless the path already names a rank)."""
    path = os.path.expanduser(settings.summary_dir)
    if settings.per_rank_dir and world > 1 and rank is not None and rank_of_path(path) is None:
        path = os.path.join(path, f"rank_{rank}")
    return path


def safe_collect_specified_data(settings: MonitorSettings) -> dict:
    """SummaryCollector's collect_specified_data with msnb's safer defaults.

    - the loss landscape is off unless asked for: MindSpore's default saves a
      checkpoint at every step of its intervals;
    - the dataset graph is off where protobuf >= 4 would crash the collector (MindSpore 2.9's generated modules;
      2.10's work with protobuf 7, see :mod:`msnb.requirements`);
    - ``histogram_settings`` becomes ``histogram_regular``.
    """
    data = dict(settings.collect_specified_data)
    data.setdefault("collect_landscape", None)
    if dataset_graph_breaks(installed_major("protobuf")):  # protobuf >= 4 with MindSpore's old-style generated modules
        data["collect_dataset_graph"] = False
    hs = settings.histogram_settings or {}
    if "histogram_regular" not in data:
        if hs.get("every_parameter"):
            data["histogram_regular"] = ".*"
        elif hs.get("regular"):
            data["histogram_regular"] = hs["regular"]
    return data


def _as_settings(cfg) -> tuple[MonitorSettings, list]:
    if isinstance(cfg, MonitorSettings):
        return cfg, []
    if isinstance(cfg, (str, os.PathLike)):
        cfg = load_config(cfg)
    if isinstance(cfg, LoadedConfig):
        callbacks = cfg.data.get("callbacks") or []
        return parse_monitor_config(cfg.data.get("monitor_config"), loaded=cfg), callbacks
    if isinstance(cfg, dict):
        if "monitor_config" in cfg:
            return parse_monitor_config(cfg["monitor_config"]), cfg.get("callbacks") or []
        return parse_monitor_config(cfg), []
    raise TypeError(f"expected a YAML path, a loaded config, a monitor_config mapping or MonitorSettings, got {type(cfg).__name__}")


def build_monitor_callbacks(cfg, *, rank: int | None = None, world_size: int | None = None, extra_callbacks=None) -> list:
    """The MindSpore callbacks a ``monitor_config`` asks for, in the order they should run."""
    from mindspore.train import LossMonitor, SummaryCollector, TimeMonitor  # deferred: MindSpore (the mindspore extra)

    from .callbacks import PeriodicFlush, SmoothedEarlyStop  # deferred: MindSpore (msnb.monitor.callbacks subclasses its Callback)

    settings, listed = _as_settings(cfg)
    if extra_callbacks:
        listed = list(listed) + list(extra_callbacks)
    detected_rank, detected_world = current_rank()
    rank = detected_rank if rank is None else rank
    world = detected_world if world_size is None else world_size

    callbacks = []
    if settings.keep_default_callbacks and settings.per_print_times > 0:
        callbacks.append(LossMonitor(settings.per_print_times))
        callbacks.append(TimeMonitor())
    summary_dir = summary_dir_for_rank(settings, rank, world)
    collector_kwargs = {
        "collect_freq": settings.collect_freq,
        "collect_specified_data": safe_collect_specified_data(settings),
        "keep_default_action": True,
    }
    if settings.collect_tensor_freq is not None:
        collector_kwargs["collect_tensor_freq"] = settings.collect_tensor_freq
    if settings.max_file_size is not None:
        collector_kwargs["max_file_size"] = settings.max_file_size
    if settings.custom_lineage_data:
        collector_kwargs["custom_lineage_data"] = settings.custom_lineage_data
    collector = SummaryCollector(summary_dir, **collector_kwargs)
    callbacks.append(collector)
    if settings.flush_interval:
        callbacks.append(PeriodicFlush(collector, settings.flush_interval))
    if settings.early_stop is not None:
        callbacks.append(SmoothedEarlyStop(settings.early_stop))
    if listed:
        callbacks.extend(build_listed_callbacks(listed))
    return callbacks


def build_listed_callbacks(listed) -> list:
    """Callbacks named in a config's ``callbacks`` list, built by mindformers' own builder."""
    try:
        from mindformers.core.callback.build_callback import build_callback  # optional: mindformers (the mindformers extra)
    except ImportError as exc:
        types = ", ".join(str(c.get("type")) for c in listed if isinstance(c, dict))
        raise ConfigError(f"the config lists mindformers callbacks ({types}) but mindformers cannot be imported: {exc}", key="callbacks") from None
    built = []
    for i, item in enumerate(listed):
        if not isinstance(item, dict) or "type" not in item:
            raise ConfigError(f"each callback needs a 'type', got {item!r}", key=f"callbacks[{i}]")
        try:
            built.append(build_callback(dict(item)))
        except Exception as exc:  # mindformers raises many kinds; name the entry that failed
            raise ConfigError(f"mindformers could not build {item.get('type')}: {exc}", key=f"callbacks[{i}]") from exc
    return built
