"""What to change when a stage does not fit the card, or when mindformers would refuse the launch: advice computed with
the estimate's own arithmetic (:mod:`msnb.fullsize.memory`), and shown only when msnb's own checks pass it.

Each layout offered has the launch's device count, is one that :func:`~msnb.fullsize.memory.layout_refusals` (the
rules of mindformers' training graph and MindSpore's 1F1B rule) and the layer split accept, and has its largest stage
within what MindSpore may use of the card by the same estimate.  Full recompute is offered with what it would save of
the largest stage.  A refused ``offset`` gets one that splits the layers as mindformers requires (proved by
:func:`~msnb.fullsize.memory.layers_per_stage`).  It is advice from an estimate: ``msnb preflight`` with the edit runs
mindformers' own checks on it.
"""

from __future__ import annotations

import dataclasses

from ..config.run_config import uses_legacy
from ..errors import MsnbError
from .memory import GIB, layers_per_stage, layout_refusals, read_run_to_size, stage_rows, stage_sizing, ulysses_degree, whole_number

MAX_LAYOUTS = 3  # layouts offered, nearest to the file's first


@dataclasses.dataclass(frozen=True)
class Advice:
    """One change and what it gives: ``("parallel_config.model_parallel 8, parallel_config.data_parallel 1", "largest stage 21.0 GiB")``."""

    change: str
    gives: str

    def line(self) -> str:
        return f"{self.change}: {self.gives}"


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def _heads_allow(mc: dict, tp: int) -> bool:
    heads = whole_number(mc, "num_attention_heads", "num_heads")
    kv = whole_number(mc, "num_query_groups", "num_key_value_heads", "n_kv_heads", "multi_query_group_num", default=heads)
    return (not heads or heads % tp == 0) and (not kv or kv % tp == 0)


def _layouts(run, devices: int) -> list:
    """(dp, tp, pp) of *devices* cards (cp and ep kept), the file's pipeline kept unless its offset is 0 and the layers split evenly."""
    lay, mc = run.layout, run.model_config
    offset = mc.get("offset", 0)
    free_pp = offset in (0, None, [], False) or (isinstance(offset, list) and not any(offset))
    if devices % lay.cp:
        return []
    out = []
    for pp in _divisors(devices // lay.cp):
        if pp != lay.pp and (not free_pp or run.parts.layers % pp or pp > run.parts.layers):
            continue
        for tp in _divisors(devices // (lay.cp * pp)):
            dp = devices // (lay.cp * pp * tp)
            if (dp, tp, pp) != (lay.dp, lay.tp, lay.pp) and _heads_allow(mc, tp):
                out.append((dp, tp, pp))
    return out


def _largest(run, overrides: dict | None = None) -> int | None:
    """The largest stage's bytes under *overrides* (parallel_config keys), None when msnb's checks refuse that layout."""
    try:
        sized = read_run_to_size(run.path, overrides) if overrides else run
    except MsnbError:
        return None
    sizing, split_note = stage_sizing(sized)
    if split_note or layout_refusals(sized.model_config, sized.layout, legacy=uses_legacy(sized.config), ulysses=ulysses_degree(sized.config)):
        return None
    return max(s.total for s in stage_rows(sizing))


def layout_advice(est) -> list:
    """Layouts of the launch's cards (else the file's) whose largest stage fits what MindSpore may use of the card, nearest
    first; when none does, those of twice and four times the cards."""
    if est.usable_gb is None:
        return []
    run = read_run_to_size(est.config, None)
    devices = est.devices or run.layout.devices
    for more in (1, 2, 4):
        found = _fitting(run, devices * more, est.usable_gb, "" if more == 1 else f" ({more} times the {devices} the launch has)")
        if found or est.fits is not False:
            return found
    return []


def _fitting(run, devices: int, usable_gb: float, more: str) -> list:
    limit = usable_gb * GIB
    found = []
    for dp, tp, pp in _layouts(run, devices):
        keys = {"data_parallel": dp, "model_parallel": tp, "pipeline_stage": pp}
        need = _largest(run, keys)
        if need is not None and need <= limit:
            old = {"data_parallel": run.layout.dp, "model_parallel": run.layout.tp, "pipeline_stage": run.layout.pp}
            changed = {k: v for k, v in keys.items() if old[k] != v}
            found.append((len(changed), need, changed))
    found.sort(key=lambda f: (f[0], f[1]))
    return [
        Advice(
            ", ".join(f"parallel_config.{k} {v}" for k, v in changed.items()),
            f"{devices} cards{more}, largest stage {need / GIB:,.1f} GiB of {usable_gb:g} GiB",
        )
        for _, need, changed in found[:MAX_LAYOUTS]
    ]


def recompute_advice(est) -> list:
    """Full recompute on every layer, with what it saves of the largest stage (none when every layer already recomputes)."""
    run = read_run_to_size(est.config, None)
    sizing, split_note = stage_sizing(run)
    if split_note or sizing.full_recompute == sizing.layers:
        return []
    now = max(s.total for s in stage_rows(sizing))
    full = max(s.total for s in stage_rows(dataclasses.replace(sizing, full_recompute=list(sizing.layers))))
    if full >= now:
        return []
    fits = ""
    if est.usable_gb is not None:
        fits = ": fits" if full <= est.usable_gb * GIB else f": still more than {est.usable_gb:g} GiB"
    return [
        Advice(
            "recompute_config.recompute True (full recompute on every layer)", f"largest stage {full / GIB:,.1f} GiB, {(now - full) / GIB:,.1f} GiB less{fits}"
        )
    ]


def optimizer_advice(est) -> list:
    """MindSpore's parallel optimizer (the weights' optimizer state and, at level2, gradients split over data parallelism), when off and dp > 1."""
    run = read_run_to_size(est.config, None)
    lay = run.layout
    if lay.parallel_optimizer or lay.dp * lay.cp < 2:
        return []
    now = _largest(run)
    after = _largest(run, dataclasses.replace(lay, parallel_optimizer=True, optimizer_level="level1"))
    if now is None or after is None or after >= now:
        return []
    fits = "" if est.usable_gb is None else (": fits" if after <= est.usable_gb * GIB else f": still more than {est.usable_gb:g} GiB")
    return [Advice("parallel.enable_parallel_optimizer True", f"largest stage {after / GIB:,.1f} GiB, {(now - after) / GIB:,.1f} GiB less{fits}")]


def offset_advice(est) -> list:
    """An ``offset`` that splits the layers over the stages as mindformers requires, when the file's does not."""
    run = read_run_to_size(est.config, None)
    if not stage_sizing(run)[1]:
        return []
    pp, layers = run.layout.pp, run.parts.layers
    extra = layers % pp
    offset = [0] * (pp - extra) + [1] * extra
    per, note = layers_per_stage(layers, pp, offset)
    if note:
        return []
    return [Advice(f"model.model_config.offset {offset}", f"{layers} layers over {pp} stages as {per}")]


def memory_advice(est) -> list:
    """Every piece of advice for *est* (a :class:`~msnb.fullsize.memory.CardMemory`): none when it fits and nothing is refused.

    msnb's own failure to compute advice is never the user's: it gives no advice, and the verdict stands.
    """
    if est.fits is not False and not est.refusals:
        return []
    out = []
    for advise in (offset_advice, layout_advice, optimizer_advice, recompute_advice):
        try:
            out += advise(est)
        except MsnbError:
            continue
    if est.fits is not False:  # refused but fits: only what makes the launch one mindformers accepts
        out = [a for a in out if a.change.startswith(("parallel_config", "model.model_config.offset"))]
    return out


__all__ = ["Advice", "layout_advice", "memory_advice", "offset_advice", "optimizer_advice", "recompute_advice"]
