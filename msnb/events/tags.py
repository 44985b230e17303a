"""What tags mean: one vocabulary for the spellings of MindSpore, mindformers and msnb's log reader.

``loss`` is written ``loss/auto`` by MindSpore's SummaryCollector, ``loss`` by
mindformers' TensorBoard writer and ``lm-loss`` or ``lm_loss`` elsewhere, ``lm loss`` by Megatron-LM; every
layer above the reader asks for the *meaning* (``"loss"``) and gets whichever
spelling the data holds, with the real tag reported back.
"""

from __future__ import annotations

# meaning -> spellings, most specific first
ALIASES: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "loss/auto", "lm_loss", "lm-loss", "lm loss", "train_loss"),
    "lr": ("lr", "learning-rate", "learning_rate", "learning rate"),
    "grad_norm": ("grad-norm", "global_norm", "grad_norm", "grad norm"),
    "step_time": ("step_time_ms", "iteration-time", "per_step_time", "step_time", "elapsed time per iteration (ms)"),
    "throughput": ("throughput", "model-flops-throughput-per-npu", "throughput per GPU (TFLOP/s/GPU)"),
    "loss_scale": ("loss-scale", "loss_scale", "scale_sense", "loss scale"),
    "batch_size": ("batch-size", "batch_size", "global_batch_size", "global batch size"),
}
DEFAULT_PANELS = ("loss", "lr", "grad_norm", "step_time", "throughput")
# schedules and counters follow a plan, not noise: drawing them smoothed makes them lag
SCHEDULES = ("lr", "loss_scale", "batch_size")


def meaning(tag: str) -> str | None:
    """The meaning (a key of :data:`ALIASES`) of a real tag or of a meaning's own name, else None."""
    if tag in ALIASES:
        return tag
    return next((m for m, spellings in ALIASES.items() if tag in spellings), None)


def resolve(name: str, available) -> str | None:
    """The real tag in *available* that *name* (a real tag or a meaning) stands for, else None."""
    have = available if isinstance(available, (set, frozenset, dict)) else set(available)
    if name in have:
        return name
    m = meaning(name)
    if m is None:
        return None
    return next((t for t in ALIASES[m] if t in have), None)


def is_schedule(tag: str) -> bool:
    """True for tags that follow a schedule (learning rate, loss scale, batch size)."""
    return meaning(tag) in SCHEDULES


def spellings(names) -> frozenset[str]:
    """Every real tag that the names in *names* (real tags or meanings) may be written as.

    Used to read only some tags: ``["loss"]`` stands for ``loss``, ``loss/auto``,
    ``lm-loss``...; a name that is no meaning and no spelling of one stands for itself.

    Args:
        names: an iterable of tags or meanings (a single string counts as one name).

    Returns:
        The set of real tags to keep.
    """
    if isinstance(names, str):
        names = [names]
    out = set()
    for name in names:
        out.add(name)
        m = meaning(name)
        if m is not None:
            out.update(ALIASES[m])
    return frozenset(out)
