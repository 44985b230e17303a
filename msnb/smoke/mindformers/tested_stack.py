"""The releases msnb's smoke is tested with, and the configs it will not stand in for: checked before anything starts.

The CPU rehearsal (:mod:`msnb.smoke.mindformers.cpu_rehearsal`) replaces a handful of mindformers' Ascend-only kernels by
name.  Those files are byte-identical in mindformers 1.9, 2.0 and 2.1, and the smoke's own tests run with each
pair in :data:`TESTED` (two environments in CI); any other pair may change them, so a smoke on CPU with another
release is *not rehearsed* (:class:`~msnb.errors.NotRehearsed`, exit 3), never a guess that may pass falsely.

Some configs are not rehearsed whatever the release: mindformers' dynamic-graph trainer configs (a trainer msnb does
not drive), DeepSeek-V4 (its model classes exist only for that trainer), and any YAML shaped like a training config
that msnb does not understand.  msnb never trains its own model in their place.

Everything here reads package metadata and files; nothing imports mindformers (which writes ``./output``).
"""

from __future__ import annotations

import importlib.util
from importlib import metadata

from ...config.run_config import DYNAMIC_GRAPH_SECTIONS, is_dynamic_graph_run, is_mindformers_run, looks_like_training_config, training_sections
from ...environment import package_dir, version_tuple
from ...errors import NotRehearsed, SmokeError

# (mindformers, MindSpore) major.minor pairs the smoke's CPU rehearsal and mindformers smoke tests run with
TESTED = ((1, 9), (2, 9)), ((2, 0), (2, 10))
# the dynamic-graph trainer, where a release ships it (looked for as a file: importing it needs hyper_parallel)
DYNAMIC_TRAINER = "pynative/trainer/trainer.py"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _pair_text(pair) -> str:
    (mf, ms) = pair
    return f"mindformers {mf[0]}.{mf[1]} with MindSpore {ms[0]}.{ms[1]}"


def tested_pairs_text() -> str:
    """The tested set in words, for messages: ``mindformers 1.9 with MindSpore 2.9, mindformers 2.0 with MindSpore 2.10``."""
    return ", ".join(_pair_text(p) for p in TESTED)


def hyper_parallel_installed() -> bool:
    """Whether ``hyper_parallel`` (mindformers 2.0's parallel library, on no package index) can be imported here."""
    try:
        return importlib.util.find_spec("hyper_parallel") is not None
    except (ImportError, ValueError):
        return False


def check_tested_stack(device: str, mindformers: str | None = None, mindspore: str | None = None) -> None:
    """Refuse a CPU rehearsal with a mindformers / MindSpore pair outside :data:`TESTED`, in one line.

    Args:
        device: where the smoke will train; only CPU is rehearsed (Ascend and GPU run mindformers' own kernels).
        mindformers: the installed mindformers version (default: read from its metadata).
        mindspore: the installed MindSpore version (default: read from its metadata).

    Raises:
        NotRehearsed: on CPU with another pair, naming both releases and the tested set.
    """
    if device != "CPU":
        return
    mf = mindformers or _version("mindformers") or "?"
    ms = mindspore or _version("mindspore") or "not installed"
    pair = (version_tuple(mf)[:2], version_tuple(ms)[:2])
    if pair in TESTED:
        return
    raise NotRehearsed(
        f"mindformers {mf} with MindSpore {ms} is outside the releases msnb's CPU rehearsal is tested with ({tested_pairs_text()}): "
        "run the smoke on Ascend, or on CPU in an environment with one of those pairs (docs/STACKS.md)"
    )


def _is_deepseek_v4(data: dict) -> bool:
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    nodes = [
        model,
        model.get("model_config") if isinstance(model.get("model_config"), dict) else {},
        model.get("arch") if isinstance(model.get("arch"), dict) else {},
    ]
    names = []
    for node in nodes:
        for key in ("model_type", "type", "architectures"):
            value = node.get(key)
            names.extend(value if isinstance(value, list) else [value])
    trainer = data.get("trainer") if isinstance(data.get("trainer"), dict) else {}
    names.append(trainer.get("model_name"))
    return any(isinstance(n, str) and "deepseekv4" in n.lower().replace("_", "").replace("-", "") for n in names)


def _dynamic_graph_reason() -> str:
    version = _version("mindformers")
    pkg = package_dir("mindformers")
    if version is None or pkg is None:
        return "mindformers is not installed here"
    if not (pkg / DYNAMIC_TRAINER).is_file():
        return f"mindformers {version}, installed here, has no dynamic-graph trainer (mindformers 2.0 added it)"
    if not hyper_parallel_installed():
        return f"mindformers {version}'s dynamic-graph trainer imports hyper_parallel, which is not installed here (no package index carries it)"
    return "msnb's smoke drives mindformers' Trainer, not its dynamic-graph trainer"


def screen_config(loaded, *, builtin: bool) -> None:
    """Refuse, before anything starts, a config msnb cannot rehearse: never replaced by msnb's built-in model.

    Args:
        loaded: the user's :class:`~msnb.config.LoadedConfig`, or None (no config: nothing to screen).
        builtin: whether the smoke would otherwise train msnb's built-in model with it (no code, no --module).

    Raises:
        NotRehearsed: a dynamic-graph trainer config, a DeepSeek-V4 config, or (with ``builtin``) a YAML shaped like a
            mindformers training config that msnb does not understand; the message names the file and why.
        SmokeError: (with ``builtin``) a YAML with a ``model:`` but no run around it: neither a mindformers run config
            nor msnb's smoke config (exit 2).
    """
    if loaded is None:
        return
    data, where = loaded.data, loaded.path
    if is_dynamic_graph_run(data):
        sections = ", ".join(f"{k}:" for k in DYNAMIC_GRAPH_SECTIONS if k in data)
        raise NotRehearsed(
            f"{where} is a config of mindformers' dynamic-graph trainer ({sections}); {_dynamic_graph_reason()}, so msnb cannot rehearse it here: "
            "run it with mindformers' own launcher on Ascend"
        )
    if is_mindformers_run(data) and _is_deepseek_v4(data):
        why = (
            "hyper_parallel, which is not installed here,"
            if not hyper_parallel_installed()
            else "mindformers' dynamic-graph trainer, which msnb's smoke does not drive,"
        )
        raise NotRehearsed(f"{where} trains DeepSeek-V4, whose model classes need {why} so msnb cannot rehearse it here: run it on Ascend")
    if builtin and not is_mindformers_run(data) and looks_like_training_config(data):
        raise NotRehearsed(
            f"{where} looks like a mindformers training config ({', '.join(training_sections(data))}) that msnb does not understand, "
            "so msnb will not train its built-in model in its place: give a mindformers Trainer config (model.model_config and trainer, "
            "run_mode or runner_config), or a YAML of monitor_config only"
        )
    if builtin and not is_mindformers_run(data) and "model" in data:
        # a model of its own with no run around it (model.model_config beside monitor_config): never the built-in model in its place
        raise SmokeError(
            f"{where} is neither a mindformers run config (model.model_config and trainer, run_mode or runner_config) nor msnb's smoke config "
            f"(monitor_config only): it has {', '.join(k + ':' for k in training_sections(data))}"
        )


__all__ = ["TESTED", "tested_pairs_text", "hyper_parallel_installed", "check_tested_stack", "screen_config"]
