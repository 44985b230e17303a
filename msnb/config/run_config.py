"""Which kind of YAML a user handed over: a mindformers run config (a model to train) or a monitoring block only."""

from __future__ import annotations


def is_mindformers_run(data: dict) -> bool:
    """Whether a loaded YAML is a mindformers run config (a model to train), not only a ``monitor_config`` block.

    Args:
        data: the resolved YAML.

    Returns:
        True when it has ``model.model_config`` and a ``trainer``, ``run_mode`` or ``runner_config``.
    """
    model = data.get("model") if isinstance(data, dict) else None
    return isinstance(model, dict) and isinstance(model.get("model_config"), dict) and any(k in data for k in ("trainer", "run_mode", "runner_config"))


__all__ = ["is_mindformers_run"]
