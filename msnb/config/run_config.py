"""Which kind of YAML a user handed over: a mindformers run config (a model to train) or a monitoring block only.

mindformers has shipped two layouts of training config: the Trainer's (``model.model_config`` beside ``trainer``,
``run_mode`` or ``runner_config``; every release) and, since 2.0, the dynamic-graph trainer's (top-level
``training:``, ``parallelism:``, ``lr_scheduler:``, the model's fields directly under ``model:``).  A YAML that looks
like a training config of either, or of one yet to come, must never be mistaken for a monitoring block: msnb would
otherwise train its own model in its place and call that a pass.
"""

from __future__ import annotations

# Top-level sections of the dynamic-graph trainer's config (mindformers 2.0's mindformers.pynative.config.TrainConfig)
DYNAMIC_GRAPH_SECTIONS = ("training", "parallelism", "lr_scheduler")
# Top-level sections only a training config of some mindformers generation has (never msnb's monitoring YAML)
TRAINING_SECTIONS = frozenset(
    {
        "model",
        "trainer",
        "run_mode",
        "runner_config",
        "runner_wrapper",
        "train_dataset",
        "train_dataset_task",
        "parallel_config",
        "parallel",
        "optimizer",
        "lr_schedule",
        "checkpoint",
        "recompute_config",
        *DYNAMIC_GRAPH_SECTIONS,
    }
)


def is_mindformers_run(data: dict) -> bool:
    """Whether a loaded YAML is a mindformers Trainer run config (a model to train), not only a ``monitor_config`` block.

    Args:
        data: the resolved YAML.

    Returns:
        True when it has ``model.model_config`` and a ``trainer``, ``run_mode`` or ``runner_config``.
    """
    model = data.get("model") if isinstance(data, dict) else None
    return isinstance(model, dict) and isinstance(model.get("model_config"), dict) and any(k in data for k in ("trainer", "run_mode", "runner_config"))


def uses_legacy(data) -> bool:
    """Whether mindformers builds the run's model from its legacy classes, with ``use_legacy`` read as mindformers reads
    it: unset or null is legacy (``is_legacy_model``), anything else by its truth value (``if not use_legacy``). So a
    quoted ``"False"``, a non-empty string, is legacy to mindformers, and to msnb with it.

    Args:
        data: the resolved YAML (a dict or mindformers' ``MindFormerConfig``).
    """
    value = data.get("use_legacy", True)
    return True if value is None else bool(value)


def is_dynamic_graph_run(data: dict) -> bool:
    """Whether a loaded YAML is a config of mindformers' dynamic-graph trainer (2.0 and later).

    Args:
        data: the resolved YAML.

    Returns:
        True when it has a ``training`` mapping and a ``parallelism`` or ``lr_scheduler`` mapping or a ``model``.
    """
    if not isinstance(data, dict) or not isinstance(data.get("training"), dict):
        return False
    return any(isinstance(data.get(k), dict) for k in ("parallelism", "lr_scheduler", "model"))


def training_sections(data: dict) -> list[str]:
    """The top-level sections of *data* that only a mindformers training config has, in the file's order.

    Args:
        data: the resolved YAML.

    Returns:
        Their names; empty for a YAML of ``monitor_config`` (and ``callbacks``) only.
    """
    return [k for k in data if k in TRAINING_SECTIONS] if isinstance(data, dict) else []


def looks_like_training_config(data: dict) -> bool:
    """Whether a YAML looks like a training config of some mindformers generation, understood or not.

    Two sections of :data:`TRAINING_SECTIONS` are enough: a monitoring YAML has none, and one alone (an
    ``optimizer:`` note beside ``monitor_config``) is not a run.

    Args:
        data: the resolved YAML.

    Returns:
        True for a Trainer config, a dynamic-graph config, and anything shaped like them.
    """
    found = training_sections(data)
    return len(found) >= 2 or is_mindformers_run(data) or is_dynamic_graph_run(data)


__all__ = [
    "DYNAMIC_GRAPH_SECTIONS",
    "TRAINING_SECTIONS",
    "is_mindformers_run",
    "is_dynamic_graph_run",
    "uses_legacy",
    "training_sections",
    "looks_like_training_config",
]
