"""What to change, for a pre-flight finding: candidate edits of the config, each proved before it is shown.

A finding that only says what is wrong leaves the user to guess a layout, and a guess can fail the next check.
For the findings whose fix is a number (the device count against dp*mp*cp*pp, heads or kv heads against
``model_parallel``, experts against ``expert_parallel``, ``expert_parallel`` against dp*mp, sequence parallelism under
MoE with tensor parallelism, micro-batches against pipeline stages, a layer ``offset``), this module proposes the
nearest edits, keeping the device count.  :func:`msnb.fullsize.preflight.run_preflight` runs the whole pre-flight again
on the config with each edit (a child of its own) and prints only those that pass: a suggestion that fails its own
check is never shown.  The arithmetic here is pure, over the layout and the model's dimensions the child reported.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_PER_FINDING = 2  # proved edits shown for one finding (each costs a full pre-flight to prove)

PC = "parallel_config."


@dataclass(frozen=True)
class Edit:
    """Keys of the config and their new values, as one suggestion: ``{"parallel_config.data_parallel": 2}``."""

    changes: tuple  # ((dotted key, value), ...)

    def words(self) -> str:
        return ", ".join(f"{key} {value}" for key, value in self.changes)

    def as_overrides(self) -> list:
        return [[key, value] for key, value in self.changes]


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0] if n and n > 0 else []


def _edit(**changes) -> Edit:
    return Edit(tuple((PC + key if "." not in key else key, value) for key, value in changes.items()))


def for_devices(layout: dict, devices: int) -> list:
    """Layouts of *devices* devices that change one degree of the file's: data parallel first, then pipeline, then tensor."""
    dp, mp, cp, pp = (layout.get(k) or 1 for k in ("data_parallel", "model_parallel", "context_parallel", "pipeline_stage"))
    out = []
    for key, others in (("data_parallel", mp * cp * pp), ("pipeline_stage", dp * mp * cp), ("model_parallel", dp * cp * pp)):
        if others and devices % others == 0 and devices // others >= 1:
            out.append(_edit(**{key: devices // others}))
    return out


def for_model_parallel(layout: dict, dims: dict) -> list:
    """``model_parallel`` values that divide the attention heads and the kv heads, the device count kept by data parallel."""
    dp, mp = layout.get("data_parallel") or 1, layout.get("model_parallel") or 1
    heads, kv = dims.get("heads") or 0, dims.get("kv_heads") or dims.get("heads") or 0
    out = []
    for new in sorted((d for d in _divisors(heads) if kv % d == 0 and d != mp), key=lambda d: (abs(d - mp), -d)):
        if (dp * mp) % new == 0:
            out.append(_edit(model_parallel=new, data_parallel=dp * mp // new))
    return out


def for_expert_parallel(layout: dict, dims: dict) -> list:
    """``expert_parallel`` values that divide the experts and data_parallel * model_parallel (mindformers' two MoE rules)."""
    dp, mp, ep = (layout.get(k) or 1 for k in ("data_parallel", "model_parallel", "expert_parallel"))
    experts = dims.get("experts") or 0
    fits = [d for d in _divisors(dp * mp) if experts % d == 0 and d != ep]
    return [_edit(expert_parallel=d) for d in sorted(fits, key=lambda d: (abs(d - ep), -d))]


def for_micro_batches(layout: dict, scheduler: str) -> list:
    stages = layout.get("pipeline_stage") or 1
    return [_edit(micro_batch_num=(2 if scheduler == "zero_bubble_v" else 1) * stages)]


def for_offset(layout: dict, dims: dict) -> list:
    """An offset list that splits the layers over the stages as evenly as they go (the remainder on the last stages)."""
    stages, layers = layout.get("pipeline_stage") or 1, dims.get("layers") or 0
    if stages < 2 or layers < stages:
        return []
    extra = layers % stages
    return [_edit(**{"model.model_config.offset": [0] * (stages - extra) + [1] * extra})]


def candidates(key: str, message: str, layout: dict, dims: dict, devices: int | None, scheduler: str = "1f1b") -> list:
    """The edits worth proving for a finding about *key* (the YAML key the finding names), nearest first."""
    if not layout:
        return []
    if key == PC + "data_parallel" and devices and "device_num" in message:
        return for_devices(layout, devices)
    if key == PC + "model_parallel":
        return for_model_parallel(layout, dims)
    if key == PC + "expert_parallel":
        return for_expert_parallel(layout, dims)
    if key == PC + "use_seq_parallel":
        return [_edit(use_seq_parallel=True)]
    if key == PC + "micro_batch_num":
        return for_micro_batches(layout, scheduler)
    if key == "model.model_config.offset":
        return for_offset(layout, dims)
    return []


__all__ = ["MAX_PER_FINDING", "Edit", "candidates"]
