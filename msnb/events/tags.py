"""What tags mean: the one vocabulary for the spellings of MindSpore, mindformers, Megatron-LM and Hugging Face.

``loss`` is written ``loss/auto`` by MindSpore's SummaryCollector, ``loss`` by
mindformers' TensorBoard writer and ``lm-loss`` or ``lm_loss`` elsewhere, ``lm loss`` by Megatron-LM; every
layer above the reader asks for the *meaning* (``"loss"``) and gets whichever
spelling the data holds, with the real tag reported back.

Two orders over one vocabulary, for a meaning whose own name is not among a run's tags: msnb's own views
(:data:`ALIASES`) prefer msnb's and MindSpore's spellings, a comparison with another framework's run
(:data:`COMPARED`, ``msnb compare``) prefers Megatron-LM's (``lm loss``, ``learning rate``) and knows Hugging Face's
``train/...`` too.  Every spelling means one thing in both (a test holds them to it).
"""

from __future__ import annotations

# meaning -> spellings, most specific first
ALIASES: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "loss/auto", "lm_loss", "lm-loss", "lm loss", "train_loss"),
    "lr": ("lr", "learning-rate", "learning_rate", "learning rate"),
    "grad_norm": ("grad-norm", "global_norm", "grad_norm", "grad norm"),
    "step_time": ("step_time_ms", "iteration-time", "per_step_time", "step_time", "elapsed time per iteration (ms)"),
    # samples (or tokens) a second and FLOP/s are two units: one axis for both flattens one of them to zero
    "throughput": ("throughput",),
    "flops": ("model-flops-throughput-per-npu", "throughput per GPU (TFLOP/s/GPU)"),
    "loss_scale": ("loss-scale", "loss_scale", "scale_sense", "loss scale"),
    "batch_size": ("batch-size", "batch_size", "global_batch_size", "global batch size"),
}
# meaning -> spellings as a comparison with another framework's run prefers them, most specific first: Megatron's log
# and torch's TensorBoard writer keep the space, tensorboardX turns it into "_", Hugging Face writes "train/...";
# a meaning not listed here is compared in :data:`ALIASES`' order
COMPARED: dict[str, tuple[str, ...]] = {
    "loss": ("lm loss", "lm-loss", "lm_loss", "loss", "loss/auto", "train/loss", "train_loss"),
    "grad_norm": ("grad norm", "grad-norm", "grad_norm", "global_norm", "train/grad_norm"),
    "lr": ("learning rate", "learning-rate", "learning_rate", "lr", "train/learning_rate"),
    "loss_scale": ("loss scale", "loss-scale", "loss_scale", "scale_sense"),
    "skipped": ("number of skipped iterations",),  # Megatron: steps the fp16 loss scaler skipped since the last line
}
# real tag -> the unit its values are in, for the tags whose writer says it: mindformers prints its throughput as
# "samples/s/p" (1.x's progress line) and its model FLOPs as "...T" per NPU (TFLOP/s); Megatron-LM names the unit in the tag
UNITS: dict[str, str] = {
    "throughput": "samples/s per device",
    "model-flops-throughput-per-npu": "TFLOP/s per device",
    "throughput per GPU (TFLOP/s/GPU)": "TFLOP/s per GPU",
    "step_time_ms": "ms",
    "elapsed time per iteration (ms)": "ms",
}
DEFAULT_PANELS = ("loss", "lr", "grad_norm", "step_time", "throughput", "flops")
# schedules and counters follow a plan, not noise: drawing them smoothed makes them lag
SCHEDULES = ("lr", "loss_scale", "batch_size")


def _order(compared: bool) -> dict:
    return {**ALIASES, **COMPARED} if compared else ALIASES


def meaning(tag: str, *, compared: bool = False) -> str | None:
    """The meaning (a key of :data:`ALIASES`, or of :data:`COMPARED` with *compared*) of a real tag or of a meaning's
    own name, else None."""
    order = _order(compared)
    if tag in order:
        return tag
    return next((m for m, names in order.items() if tag in names), None)


def resolve(name: str, available, *, compared: bool = False) -> str | None:
    """The real tag in *available* that *name* (a real tag or a meaning) stands for, else None.

    Args:
        name: a real tag or a meaning.
        available: the tags a run holds.
        compared: in the order a comparison with another framework's run prefers (:data:`COMPARED`).
    """
    have = available if isinstance(available, (set, frozenset, dict)) else set(available)
    if name in have:
        return name
    m = meaning(name, compared=compared)
    if m is None:
        return None
    return next((t for t in _order(compared)[m] if t in have), None)


def unit(tag: str) -> str | None:
    """The unit of a real tag's values (:data:`UNITS`), else None: a tag whose writer does not say its unit has none."""
    return UNITS.get(tag)


def is_schedule(tag: str) -> bool:
    """True for tags that follow a schedule (learning rate, loss scale, batch size)."""
    return meaning(tag) in SCHEDULES


def spellings(names, *, compared: bool = False) -> frozenset[str]:
    """Every real tag that the names in *names* (real tags or meanings) may be written as.

    Used to read only some tags: ``["loss"]`` stands for ``loss``, ``loss/auto``,
    ``lm-loss``...; a name that is no meaning and no spelling of one stands for itself.

    Args:
        names: an iterable of tags or meanings (a single string counts as one name).
        compared: the spellings of other frameworks too (:data:`COMPARED`).

    Returns:
        The set of real tags to keep.
    """
    if isinstance(names, str):
        names = [names]
    out = set()
    for name in names:
        out.add(name)
        for m in {meaning(name), meaning(name, compared=compared)} - {None}:
            out.update(ALIASES.get(m, ()))
            if compared:
                out.update(COMPARED.get(m, ()))
    return frozenset(out)
