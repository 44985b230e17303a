"""Where a mindformers run reads its YAML differently from msnb, or dies on it at startup: predicted from the file.

msnb reads a run YAML for its own purposes (``msnb config``, the smoke's plan)
and resolves ``${a.b}`` references there. mindformers' own loader
(``MindFormerConfig``) does not: the real run sees the text ``${...}``. A
smoke that trained on msnb's reading would approve a run that dies on the
cluster, so every such difference is a finding here, naming the key, the file
and line, and what the real run will see. Each rule cites the mindformers code
it predicts; tests run the unmodified config through mindformers until the
crash the rule names.
"""

from __future__ import annotations

from ..findings import ERROR, Finding
from .loader import LoadedConfig
from .run_config import is_mindformers_run

# MindFormerConfig(path) reads a file only when its name ends so: `arg.endswith('yaml') or arg.endswith('yml')`
# (mindformers/tools/register/config.py, __init__): case-sensitive, no dot needed ("qyaml" is read, "q.YAML" is not)
YAML_SUFFIXES = ("yaml", "yml")
MAX_REFERENCES_SAID = 20  # a file with hundreds of ${} gets the first ones named and a count


def _strings(node, prefix: str = ""):
    """(dotted key, string) for every string in *node*, depth first; list items as ``key[i]``."""
    todo = [(prefix, node)]
    seen = set()
    while todo:
        key, value = todo.pop()
        if isinstance(value, str):
            yield key, value
        elif isinstance(value, (dict, list)):
            if id(value) in seen:  # YAML anchors share one object: said once
                continue
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else ((f"[{i}]", v) for i, v in enumerate(value))
            children = []
            for k, v in items:
                name = k if isinstance(k, str) and k.startswith("[") else str(k)
                child = f"{key}{name}" if name.startswith("[") else (f"{key}.{name}" if key else name)
                children.append((child, v))
            todo.extend(reversed(children))


def _where(loaded: LoadedConfig, dotted: str) -> str:
    base = dotted.split("[", 1)[0]
    line = loaded.lines.get(base)
    return f"{loaded.where(base)}" + (f":{line}" if line else "")


def literal_references(loaded: LoadedConfig) -> list[Finding]:
    """Every ``${...}`` in the files as mindformers reads them: left literal by ``MindFormerConfig``."""
    tree = loaded.literal if loaded.literal is not None else loaded.data
    found = [(k, v) for k, v in _strings(tree) if "${" in v]
    out = []
    for key, text in found[:MAX_REFERENCES_SAID]:
        shown = text if len(text) <= 80 else text[:77] + "..."
        out.append(
            Finding(
                "mindformers-literal-reference",
                ERROR,
                f"{_where(loaded, key)}: mindformers' MindFormerConfig does not resolve ${{...}}: the real run sees the string {shown!r} "
                "here (msnb resolves it only for its own reading)",
                fix="write the value itself; mindformers has no reference syntax",
                key=key,
            )
        )
    if len(found) > MAX_REFERENCES_SAID:
        more = len(found) - MAX_REFERENCES_SAID
        out.append(Finding("mindformers-literal-reference", ERROR, f"and {more} more ${{...}} left literal by mindformers", key=found[MAX_REFERENCES_SAID][0]))
    return out


def _tensorboard_dir(data: dict):
    tb = data.get("tensorboard")
    return tb.get("tensorboard_dir") if isinstance(tb, dict) else None


def missing_scale_sense(loaded: LoadedConfig) -> list[Finding]:
    """``runner_wrapper`` without ``scale_sense`` beside a TensorBoard directory: KeyError before the first step.

    mindformers 1.9's ``write_args_to_tensorboard`` (mindformers/utils/tensorboard.py, ``_handle_runner_wrapper``)
    reads ``config.runner_wrapper['scale_sense']``; a ``runner_wrapper`` given in the YAML replaces the template's
    (which has one) whole, so without the key the run raises ``KeyError: 'scale_sense'`` while setting up TensorBoard.
    """
    data = loaded.literal if loaded.literal is not None else loaded.data
    wrapper = data.get("runner_wrapper")
    if not isinstance(wrapper, dict) or "scale_sense" in wrapper or not _tensorboard_dir(data):
        return []
    return [
        Finding(
            "mindformers-scale-sense-missing",
            ERROR,
            f"{_where(loaded, 'runner_wrapper')}: runner_wrapper has no scale_sense and tensorboard.tensorboard_dir is set: mindformers' "
            "write_args_to_tensorboard (mindformers/utils/tensorboard.py, _handle_runner_wrapper) reads runner_wrapper['scale_sense'], so the "
            "run dies with KeyError: 'scale_sense' before its first step",
            fix="add runner_wrapper.scale_sense (1.0, or a DynamicLossScaleUpdateCell mapping)",
            key="runner_wrapper.scale_sense",
        )
    ]


def mindformers_reads_name(path) -> bool:
    """Whether ``MindFormerConfig(path)`` reads the file: its name ends in ``yaml`` or ``yml``, case-sensitive, no dot needed."""
    return str(path).endswith(YAML_SUFFIXES)


def unread_file_name(loaded: LoadedConfig) -> list[Finding]:
    """``MindFormerConfig`` reads a path only when it ends in yaml/yml (case-sensitive); any other name loads an empty config."""
    if mindformers_reads_name(loaded.path):
        return []
    return [
        Finding(
            "mindformers-file-name",
            ERROR,
            f"{loaded.path}: mindformers' MindFormerConfig reads a file only when its name ends in 'yaml' or 'yml' (case-sensitive): the real run starts with an empty config",
            fix="rename the file to end in .yaml",
            key="",
        )
    ]


def startup_findings(loaded: LoadedConfig) -> list[Finding]:
    """Every difference between msnb's reading of a mindformers run YAML and mindformers' own, and each predicted startup crash.

    Args:
        loaded: the YAML as :func:`msnb.config.load_config` read it (its ``literal`` tree is what mindformers sees).

    Returns:
        Error findings (empty for a YAML that is not a mindformers run config).
    """
    if not is_mindformers_run(loaded.literal if loaded.literal is not None else loaded.data):
        return []
    return unread_file_name(loaded) + literal_references(loaded) + missing_scale_sense(loaded)


__all__ = ["startup_findings", "literal_references", "missing_scale_sense", "unread_file_name", "mindformers_reads_name"]
