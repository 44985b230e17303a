"""The types of a run YAML's sections, checked once before anything reads them.

A mindformers run config is read by msnb's lint, by the smoke's plan and by
mindformers itself; each assumed ``runner_config`` is a mapping and
``callbacks`` a list of mappings, so ``runner_config: 5`` or ``callbacks: 5``
ended in a traceback before anything started.  :func:`check_run_types` is the
one check, called by ``msnb config`` (through the lint) and by the smoke's
prepare: a wrong type is one :class:`~msnb.errors.ConfigError` naming the key,
the file and the line.  YAML's null is always accepted ("not set").
"""

from __future__ import annotations

from ..errors import ConfigError
from .loader import LoadedConfig

_SECTIONS = {
    "use_parallel": (bool,),
    "parallel": (dict,),
    "parallel_config": (dict,),
    "callbacks": (list,),
    "runner_config": (dict,),
    "runner_config.sink_mode": (bool,),
    "runner_config.sink_size": (int,),
    "runner_config.batch_size": (int,),
    "runner_config.epochs": (int,),
    "runner_config.gradient_accumulation_steps": (int,),
    "runner_wrapper": (dict,),
    "context": (dict,),
    "context.mode": (int, str),
    "recompute_config": (dict,),
    "train_dataset": (dict,),
    "train_dataset_task": (dict,),
    "trainer": (dict,),
    "model": (dict,),
    "model.model_config": (dict,),
}
_MODEL_SIZES = (
    "num_hidden_layers",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "ffn_hidden_size",
    "vocab_size",
    "seq_length",
    "n_routed_experts",
    "moe_intermediate_size",
)
_CALLBACK_INTS = {"CheckpointMonitor": ("save_checkpoint_steps", "keep_checkpoint_max"), "SummaryMonitor": ("collect_freq",)}
_WORDS = {bool: "true/false", dict: "a mapping", list: "a list", int: "an integer", str: "a name"}


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fits(value, expected: tuple) -> bool:
    return isinstance(value, expected) and (bool in expected or not isinstance(value, bool))


def check_run_types(loaded: LoadedConfig) -> None:
    """Raise :class:`ConfigError` (key, file, line) for the first section or setting that holds the wrong type.

    Args:
        loaded: the loaded config (any YAML: keys it does not have are not checked).

    Raises:
        ConfigError: naming the key, e.g. ``runner_config: expected a mapping, got 5``.
    """
    keys = [*_SECTIONS.items(), *((f"model.model_config.{k}", (int,)) for k in _MODEL_SIZES)]
    for dotted, expected in keys:
        parent = dotted.rpartition(".")[0]
        if parent and not isinstance(loaded.get(parent), dict):
            continue
        value = loaded.get(dotted)
        if value is not None and not _fits(value, expected):
            raise ConfigError(f"expected {' or '.join(_WORDS[t] for t in expected)}, got {_shown(value)}", **loaded.locate(dotted))
    for i, callback in enumerate(loaded.get("callbacks") or []):
        where = loaded.locate("callbacks") | {"key": f"callbacks[{i}]"}
        if not isinstance(callback, dict):
            raise ConfigError(f"a callback must be a mapping with a type, got {_shown(callback)}", **where)
        kind = callback.get("type")
        if kind is not None and not isinstance(kind, str):
            raise ConfigError(f"a callback's type must be a class name, got {_shown(kind)}", **where | {"key": f"callbacks[{i}].type"})
        for name in _CALLBACK_INTS.get(kind, ()):
            value = callback.get(name)
            if value is not None and not _fits(value, (int,)):
                raise ConfigError(f"expected an integer, got {_shown(value)}", **where | {"key": f"callbacks[{i}].{name} ({kind})"})


__all__ = ["check_run_types"]
