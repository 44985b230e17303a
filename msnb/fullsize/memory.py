"""How much memory each card needs for a mindformers config at its full size, under its own parallel layout.

The smoke trains a shrunk copy on one CPU device, so it never learns whether the real job fits the cluster's cards.
This module answers that from the config alone, before anything starts: per pipeline stage, the weights,
gradients and optimizer state a card holds after tensor (``model_parallel``), pipeline (``pipeline_stage``, the
``offset`` list), expert (``expert_parallel``) and data parallelism (MindSpore's parallel optimizer:
``parallel.enable_parallel_optimizer`` and ``parallel.parallel_optimizer_config``) have split them, and the
activations kept for the backward pass per micro-batch under the config's ``recompute_config``, times the
micro-batches a 1F1B pipeline keeps in flight on that stage; under a pipeline or gradient accumulation, the
optimizer step's scaled copy of the accumulated gradients where it is more than those activations.  The sizes come from
:func:`msnb.fullsize.sizes.model_sizes`: the same sources the real run builds its model from.

It is an estimate of what is *counted* (listed in :attr:`CardMemory.leaves_out`), not a measurement: MindSpore's
memory planner, communication buffers and fragmentation come on top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..config import load_config
from ..config.run_config import is_mindformers_run, uses_legacy
from ..config.shipped import resolve_shipped
from ..errors import SizeRefused, UsageError
from .cards import CARDS, card_names, card_size
from .sizes import ModelParts, ModelSizes, dtype_bytes, model_parts, model_sizes, whole_number
from .views import ShownOnce

GIB = 1 << 30
MAX_STAGES = 4096  # more pipeline stages than any cluster runs: a hostile file's, refused before a row is made for each

# the sizes that decide the memory: taken from a class's defaults where a missing config.json would give them, no estimate
_CORE_SIZES = ("num_hidden_layers", "hidden_size", "intermediate_size", "vocab_size", "num_attention_heads")

# what the estimate does not count (said with every estimate)
LEAVES_OUT = (
    "communication buffers (all-reduce / all-gather / all-to-all / pipeline send-receive) and their fusion buckets",
    "the weights the parallel optimizer all-gathers again for a layer's backward pass (level3, or a recomputed layer with "
    "parallel_optimizer_comm_recompute: transient; with level1 and level2 those kept from the forward pass are counted in the weights)",
    "each micro-batch's own gradients before they are added into the accumulation buffer (transient); at the optimizer step under a "
    "pipeline or gradient accumulation one scaled copy of the accumulated gradients is counted, not a second one gradient clipping may make",
    "the compute-dtype (bfloat16) copies mindformers' layers cast from float32 weights (parallel_core's Linear: cast(weight, compute_dtype)): "
    "whether MindSpore's compiled graph keeps them from the forward to the backward pass or casts again is its compiler's choice, not "
    "found documented; at most 2 bytes a parameter of the layers not fully recomputed, per micro-batch in flight",
    "MindSpore's memory planner, workspace of the kernels, and fragmentation",
    "the framework's and the driver's own reserve (the card's HBM is more than MindSpore may use: see context.max_device_memory)",
    "the dataset queue, prefetch and sink-mode buffers on the card",
    "parameters below parallel_optimizer_threshold are not sharded by the parallel optimizer (counted as sharded: they are norms, kilobytes)",
    "activations of a custom layer pattern (select_recompute given as operator patterns is counted as mindformers' default: the MLP's activation)",
)


@dataclass(frozen=True)
class Layout:
    """A config's parallel layout, as mindformers reads it from ``parallel_config`` and ``parallel``."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    cp: int = 1
    micro_batch_num: int = 1
    gradient_accumulation: int = 1
    sequence_parallel: bool = False
    parallel_optimizer: bool = False
    optimizer_shard: int = -1  # optimizer_weight_shard_size (-1: the whole data-parallel group)
    optimizer_level: str = "level1"
    gradient_accumulation_shard: bool = False
    scheduler: str = "1f1b"

    @property
    def devices(self) -> int:
        return self.dp * self.tp * self.cp * self.pp

    def words(self) -> str:
        parts = [f"dp {self.dp}", f"tp {self.tp}", f"pp {self.pp}"]
        parts += [f"ep {self.ep}"] if self.ep > 1 else []
        parts += [f"cp {self.cp}"] if self.cp > 1 else []
        po = f"parallel optimizer {self.optimizer_level}" if self.parallel_optimizer else "no parallel optimizer"
        return f"{', '.join(parts)} ({self.devices} cards), {self.micro_batch_num} micro-batches, {po}"


def _pos(node: dict, *names, default: int = 1) -> int:
    value = whole_number(node, *names, default=default)
    return value if value > 0 else default


def _truthy(value) -> bool:
    return value not in (None, False, 0, "") and str(value).lower() != "false"


def read_layout(config: dict, overrides: dict | None = None) -> Layout:
    """The layout a config trains with (``parallel_config``, ``parallel``, ``runner_config``), *overrides* (parallel_config keys) on top."""
    pc = dict(config.get("parallel_config") or {}) if isinstance(config.get("parallel_config"), dict) else {}
    pc.update(overrides or {})
    par = config.get("parallel") if isinstance(config.get("parallel"), dict) else {}
    poc = par.get("parallel_optimizer_config") if isinstance(par.get("parallel_optimizer_config"), dict) else {}
    runner = config.get("runner_config") if isinstance(config.get("runner_config"), dict) else {}
    pipe = par.get("pipeline_config") if isinstance(par.get("pipeline_config"), dict) else {}
    level = str(poc.get("optimizer_level") or "level1")
    return Layout(
        dp=_pos(pc, "data_parallel", "data_parallel_size"),
        tp=_pos(pc, "model_parallel", "tensor_model_parallel_size"),
        pp=_pos(pc, "pipeline_stage", "pipeline_model_parallel_size"),
        ep=_pos(pc, "expert_parallel", "expert_model_parallel_size"),
        cp=_pos(pc, "context_parallel", "context_parallel_size"),
        micro_batch_num=_pos(pc, "micro_batch_num"),
        gradient_accumulation=_pos(runner, "gradient_accumulation_steps"),
        sequence_parallel=_truthy(pc.get("use_seq_parallel", pc.get("sequence_parallel"))),
        parallel_optimizer=_truthy(par.get("enable_parallel_optimizer")),
        optimizer_shard=whole_number(poc, "optimizer_weight_shard_size", default=-1) or -1,
        optimizer_level=level if level in ("level1", "level2", "level3") else "level1",
        gradient_accumulation_shard=_truthy(poc.get("gradient_accumulation_shard")),
        scheduler=str(pipe.get("pipeline_scheduler") or "1f1b"),
    )


def _ints(row) -> bool:
    return isinstance(row, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in row)


def layers_per_stage(layers: int, pp: int, offset, interleave: int = 1) -> tuple[list[int], str | None]:
    """mindformers' split of *layers* over *pp* stages, as its ``LayerSetting`` computes it: ``layers // (pp x
    interleave)`` a chunk, plus the ``offset`` broadcast to (interleave, pp) (an int, a list a stage, or a list a
    chunk row), each stage holding one chunk a row; and a note when the split does not add up (mindformers refuses
    that: the offsets must add up to the remainder; here the remainder is put on the last stage)."""
    interleave = max(1, interleave)
    if isinstance(offset, list) and offset and all(isinstance(o, list) for o in offset):
        rows = [r for r in offset if len(r) == pp and _ints(r)]
        interleave = len(rows) or interleave
    elif isinstance(offset, list) and len(offset) == pp and _ints(offset):
        rows = [offset] * interleave
    elif isinstance(offset, int) and not isinstance(offset, bool):
        rows = [[offset] * pp] * interleave
    else:
        rows = [[0] * pp] * interleave
    chunk = layers // (pp * interleave)
    per = [sum(chunk + r[i] for r in rows) for i in range(pp)]
    note = None
    if any(n < 0 for n in per) or sum(per) != layers:
        note = f"offset {offset!r} splits {layers} layers over {pp} stages as {per}, which does not add up to {layers}: mindformers refuses it (LayerSetting._check_inputs, parallel_core/training_graph/transformer/utils.py:585-603)"
        per = [max(0, n) for n in per]
        per[-1] += max(0, layers - sum(per))
    return per, note


def _per_stage(value, pp: int, per: list[int]) -> list[int]:
    """A recompute setting as layers recomputed per stage: True (all), a count a stage, or a count a chunk row and
    stage (pipeline interleave: summed over the rows), else none."""
    if isinstance(value, bool) or value is None:
        return list(per) if value else [0] * pp
    if isinstance(value, list):
        if value and all(isinstance(v, list) for v in value):
            rows = [r for r in value if _ints(r)]
            value = [sum(r[i] for r in rows if i < len(r)) for i in range(pp)]
        counts = [v if isinstance(v, int) and not isinstance(v, bool) else (per[i] if v is True else 0) for i, v in enumerate(value[:pp])]
        counts += [0] * (pp - len(counts))
        return [min(c, n) for c, n in zip(counts, per)]
    if isinstance(value, dict):
        return list(per) if value else [0] * pp  # operator patterns: counted as mindformers' default select on every layer
    return list(per) if _truthy(value) else [0] * pp


@dataclass
class StageMemory:
    """One pipeline stage's memory on one card, in bytes."""

    stage: int
    layers: int
    first_layer: int
    parameters: int  # held by one card of this stage, before the parallel optimizer's sharding
    weights: int
    gradients: int
    optimizer: int
    activations_per_micro_batch: int
    micro_batches_in_flight: int
    full_recompute_layers: int = 0
    select_recompute_layers: int = 0
    gathered: int = 0  # of the weights: what the parallel optimizer all-gathered and keeps from the forward to the backward pass
    # what the optimizer step holds beyond the gradients: the scaled copy of the accumulated gradients (pipeline or
    # gradient accumulation, see _step_gradients), when every activation has been freed
    step_gradients: int = 0

    @property
    def activations(self) -> int:
        return self.activations_per_micro_batch * self.micro_batches_in_flight

    @property
    def step_extra(self) -> int:
        """What the optimizer step holds beyond the activations the backward pass held: the stage's peak is the larger."""
        return max(0, self.step_gradients - self.activations)

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.step_extra

    def as_dict(self) -> dict:
        return {
            "stage": self.stage,
            "layers": self.layers,
            "first_layer": self.first_layer,
            "parameters": self.parameters,
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "activations_per_micro_batch": self.activations_per_micro_batch,
            "micro_batches_in_flight": self.micro_batches_in_flight,
            "activations": self.activations,
            "total": self.total,
            "full_recompute_layers": self.full_recompute_layers,
            "select_recompute_layers": self.select_recompute_layers,
            "gathered_weights": self.gathered,
            "step_gradients": self.step_gradients,
            "step_extra": self.step_extra,
        }


def _gib(n: float) -> str:
    return f"{n / GIB:,.1f}"


@dataclass
class CardMemory(ShownOnce):
    """Per-card memory of a config at full size: a row per pipeline stage, the card, and what is not counted."""

    config: str
    layout: Layout
    stages: list
    card_gb: float | None
    card_name: str | None
    usable_gb: float | None  # what MindSpore may use of the card: the smaller of the card and context.max_device_memory
    devices: int | None  # the cards the launch has, when given
    micro_batch: int
    seq: int
    parameters: int
    sizes_from: str
    notes: list = field(default_factory=list)
    leaves_out: list = field(default_factory=lambda: list(LEAVES_OUT))
    refusals: list = field(default_factory=list)  # what mindformers or MindSpore would refuse of this layout or launch, with its source
    judged_against: str = ""  # "the card", "context.max_device_memory", or "" (nothing judged)

    @property
    def largest_stage(self) -> StageMemory:
        return max(self.stages, key=lambda s: (s.total, -s.stage))

    @property
    def fits(self) -> bool | None:
        """Whether the largest stage fits what MindSpore may use of the card; None when the card is unknown."""
        if self.usable_gb is None:
            return None
        return self.largest_stage.total <= self.usable_gb * GIB

    @property
    def exit_code(self) -> int:
        """1 mindformers would refuse the layout or the launch, or the largest stage does not fit; 0 it fits; 3 no card and no
        ``context.max_device_memory`` (the estimate is printed, nothing is judged)."""
        if self.refusals:
            return 1
        return {True: 0, False: 1, None: 3}[self.fits]

    def verdict(self) -> str:
        """The memory's verdict, after what mindformers would refuse of the launch when it would."""
        return ("mindformers would refuse this launch (REFUSED above); " if self.refusals else "") + self.memory_verdict()

    def memory_verdict(self) -> str:
        """Whether the largest stage fits, and against what: the card, ``context.max_device_memory``, or nothing."""
        big = self.largest_stage
        need = f"the largest stage (stage {big.stage}) needs {_gib(big.total)} GiB a card"
        if self.usable_gb is None:
            return f"{need}; neither a card (--card-gb G or --card NAME: {card_names()}) nor context.max_device_memory is given, so nothing is judged"
        if self.card_gb is None:
            of = f"context.max_device_memory's {self.usable_gb:g} GiB (no card named: a card with less memory than that is not checked)"
        else:
            card = f"{self.card_name} ({self.card_gb:g} GiB)" if self.card_name else f"{self.card_gb:g} GiB"
            of = f"{self.usable_gb:g} GiB usable of the card {card}" if self.usable_gb != self.card_gb else f"the card's {card}"
        if self.fits:
            return f"fits: {need} of {of}, {_gib(self.usable_gb * GIB - big.total)} GiB left for what is not counted"
        return f"does not fit: {need}, more than {of}"

    def format_text(self, verbose: bool = False) -> str:
        """The verdict, what mindformers refuses and what to change, a row per stage (the largest first); what is not
        counted with *verbose* (:func:`msnb.fullsize.views.memory_text`)."""
        from .views import memory_text  # deferred: the views

        return memory_text(self, verbose=verbose)

    def _repr_html_(self) -> str:
        from .views import memory_html  # deferred: the views (matplotlib for the picture)

        return memory_html(self)

    def __repr__(self) -> str:
        big = self.largest_stage
        fits = {True: "fits", False: "does not fit", None: "card unknown"}[self.fits]
        return f"<CardMemory {Path(self.config).name}: {len(self.stages)} stages, largest {_gib(big.total)} GiB (stage {big.stage}), {fits}>"

    def as_dict(self) -> dict:
        lay = self.layout
        return {
            "config": self.config,
            "fits": self.fits,
            "verdict": self.verdict(),
            "card_gb": self.card_gb,
            "card": self.card_name,
            "usable_gb": self.usable_gb,
            "devices": self.devices,
            "layout": {k: getattr(lay, k) for k in lay.__dataclass_fields__} | {"cards": lay.devices},
            "micro_batch": self.micro_batch,
            "seq": self.seq,
            "parameters": self.parameters,
            "sizes_from": self.sizes_from,
            "largest_stage": self.largest_stage.stage,
            "stages": [s.as_dict() for s in sorted(self.stages, key=lambda s: (-s.total, s.stage))],
            "notes": list(self.notes),
            "refusals": list(self.refusals),
            "judged_against": self.judged_against,
            "leaves_out": list(self.leaves_out),
            "unit": "bytes",
        }


def _max_device_memory(config: dict) -> float | None:
    """``context.max_device_memory`` (``"58GB"``) in GiB: what MindSpore may use of the card."""
    ctx = config.get("context") if isinstance(config.get("context"), dict) else {}
    value = str(ctx.get("max_device_memory") or "").strip().upper()
    if value.endswith("GB"):
        try:
            got = float(value[:-2])
        except ValueError:
            return None
        return got if math.isfinite(got) and got > 0 else None
    return None


def _optimizer_states(config: dict) -> int:
    """Bytes of optimizer state per parameter: Adam-like 2 float32 moments, momentum 1, plain SGD none."""
    opt = config.get("optimizer") if isinstance(config.get("optimizer"), dict) else {}
    kind = str(opt.get("type") or "AdamW").lower()
    if "adam" in kind or "lamb" in kind or "came" in kind:
        return 8
    if "momentum" in kind:
        return 4
    if kind == "sgd":
        return 0
    return 8


def layer_activations(mc: dict, *, micro: int, seq: int, layout: Layout, moe: bool, mode: str) -> int:
    """Bytes one layer keeps for its backward pass for one micro-batch (mode ``none``, ``select`` or ``full`` recompute).

    Counted tensor by tensor in the compute dtype, after the tensor-parallel split (the hidden-sized ones split only
    with sequence parallelism), the sequence split by context parallelism (the count of Korthikanti et al., "Reducing
    Activation Recomputation in Large Transformer Models", generalised to grouped-query attention and gated MLPs):

    - ``full``: the layer's input alone;
    - hidden-sized: the two norms' inputs and outputs (4);
    - attention: q, k, v and the attention output; with flash attention its softmax statistics (float32), without
      it the scores, the softmax and its dropout mask (heads x seq x seq);
    - MLP: gated, the gate and up projections, the activation and the product (4 x ffn; ``select`` recomputes the
      activation and the product, mindformers' default pattern: 2 x ffn); not gated, 2 x ffn (1 with ``select``);
    - MoE: the same for top-k experts per token, the shared experts, the permuted tokens before and after the
      all-to-all (2 x top-k x hidden) and the router's float32 logits.
    """
    w = dtype_bytes(mc.get("compute_dtype"), default=2)
    hidden = whole_number(mc, "hidden_size")
    tokens = micro * max(1, seq // layout.cp)
    tp = layout.tp
    hid = w * tokens * hidden // (tp if layout.sequence_parallel else 1)
    if mode == "full":
        return hid
    heads = whole_number(mc, "num_attention_heads", "num_heads", default=max(1, hidden // 128))
    head_dim = whole_number(mc, "head_dim", "kv_channels", default=hidden // heads if heads else 0)
    kv = whole_number(mc, "num_key_value_heads", "n_kv_heads", "multi_query_group_num", default=heads)
    if mc.get("multi_latent_attention") and whole_number(mc, "kv_lora_rank"):
        qk = whole_number(mc, "qk_nope_head_dim", default=128) + whole_number(mc, "qk_rope_head_dim", default=64)
        v_dim = whole_number(mc, "v_head_dim", default=128)
        latent = w * tokens * (whole_number(mc, "q_lora_rank") + whole_number(mc, "kv_lora_rank"))
        attention = latent + w * tokens * heads * (2 * qk + 2 * v_dim) // tp
    else:
        attention = w * tokens * (heads * head_dim * 2 + 2 * kv * head_dim) // tp
    if _truthy(mc.get("use_flash_attention", True)):
        attention += 8 * tokens * heads // tp
    else:
        attention += (2 * w + 1) * micro * heads * max(1, seq // layout.cp) * seq // tp
    gated = mc.get("gated_linear_unit", True) or str(mc.get("hidden_act", "")).lower() in ("swiglu", "silu")
    kept = (2 if mode == "select" else 4) if gated else (1 if mode == "select" else 2)
    if moe:
        ffn = whole_number(mc, "moe_intermediate_size", "moe_ffn_hidden_size", default=whole_number(mc, "intermediate_size", "ffn_hidden_size"))
        topk = whole_number(mc, "num_experts_per_tok", "moe_router_topk", default=1)
        experts = whole_number(mc, "n_routed_experts", "num_experts", "num_moe_experts")
        shared = whole_number(mc, "moe_shared_expert_intermediate_size", default=whole_number(mc, "n_shared_experts") * ffn)
        mlp = kept * w * tokens * (topk * ffn + shared) // tp + 2 * w * tokens * topk * hidden + 4 * tokens * experts
    else:
        ffn = whole_number(mc, "intermediate_size", "ffn_hidden_size", default=4 * hidden)
        mlp = kept * w * tokens * ffn // tp
    return 4 * hid + attention + mlp


@dataclass(frozen=True)
class _RunToSize:
    """A run config read for the estimate: its merged dict, the model's sizes and parts, and the layout it trains with.

    Only a config that can be sized becomes one (:func:`read_run_to_size` refuses the others), so the steps after it
    never meet a model without layers or a pipeline with more stages than layers.
    """

    path: object  # the config as loaded (the installed mindformers' copy for a configs/... name not here)
    config: dict
    sizes: ModelSizes
    parts: ModelParts
    layout: Layout

    @property
    def model_config(self) -> dict:
        return self.sizes.config


# sizes mindformers builds parameters with: each a dimension of a weight's shape
SHAPE_KEYS = ("hidden_size", "vocab_size", "padded_vocab_size", "num_attention_heads", "num_heads", "num_key_value_heads", "n_kv_heads",
              "num_query_groups", "multi_query_group_num", "head_dim", "kv_channels", "intermediate_size", "ffn_hidden_size",
              "moe_intermediate_size", "moe_ffn_hidden_size")  # fmt: skip
_INITIALIZER_RULE = "\"the value of 'shape' must be positive integer\", mindspore/common/initializer.py:879"


def _refuse_sizes(sizes: ModelSizes, loaded) -> None:
    """A size the model is built with that mindformers would refuse is the config's finding, never counted as 0.

    Raises:
        SizeRefused: a size that is no whole number of 1 or more (``vocab_size: 0``, ``-8``, ``1.5``, ``"big"``).
        UsageError: a size msnb cannot count with (``True``, or more than 2**40): msnb's limit, not a finding.
    """
    for key in SHAPE_KEYS:
        value = sizes.config.get(key)
        if value is None:
            continue
        source = sizes.sources.get(key, "the config")
        if source.endswith("default"):  # a class's default for a size this model does not use (a dense model's MoE sizes)
            continue
        where = f"model.model_config.{key} at {loaded.where('model.model_config.' + key)}" if source == "the YAML" else f"{key} in {source}"
        if isinstance(value, bool) or (isinstance(value, int) and value >= 1 << 40):
            raise UsageError(f"{where}: {value!r} is no size msnb can count with: the memory is not estimated")
        if not isinstance(value, int) or value < 1:
            raise SizeRefused(
                f"{where}: {value!r} is not a size a model is built with (a whole number of 1 or more): mindformers makes its weights with it, "
                f"and MindSpore's initializer refuses a shape that is not ({_INITIALIZER_RULE})",
                key=f"model.model_config.{key}" if source == "the YAML" else key,
            )


def read_run_to_size(config_path, layout) -> _RunToSize:
    """Load *config_path*, size its model from the sources the real run reads, and take its layout (*layout* on top).

    Raises:
        UsageError: no mindformers run config; sizes that are only on the cluster (a pretrained_model_dir not here);
            no layer count or hidden size; more pipeline stages than layers (or than :data:`MAX_STAGES`).
    """
    config_path, _ = resolve_shipped(config_path)  # configs/qwen3/... not here: the installed mindformers' own copy
    loaded = load_config(config_path)
    cfg = loaded.literal if getattr(loaded, "literal", None) is not None else loaded.data
    if not is_mindformers_run(cfg):
        raise UsageError(
            f"{loaded.path}: not a mindformers run config (model.model_config and a trainer, run_mode or runner_config): it describes no model to size"
        )
    sizes = model_sizes(cfg)
    _refuse_sizes(sizes, loaded)
    defaulted = [k for k in _CORE_SIZES if k in sizes.sources and sizes.sources[k].endswith("default")]
    if sizes.missing_folder and defaulted:  # the cluster's sizes are in that folder: a class's defaults would be a guess
        raise UsageError(
            f"{loaded.where('pretrained_model_dir')}: pretrained_model_dir {cfg.get('pretrained_model_dir')!r} has no config.json here, and the "
            f"model's {', '.join(defaulted)} come from it on the cluster; run msnb memory where that folder is, or point "
            "pretrained_model_dir at a copy of its config.json"
        )
    lay = layout if isinstance(layout, Layout) else read_layout(cfg, layout if isinstance(layout, dict) else None)
    parts = model_parts(sizes.config)
    if not parts.layers or not parts.hidden:
        why = "; ".join(sizes.notes) or "neither the YAML, a pretrained_model_dir config.json nor an installed mindformers config class gives them"
        raise UsageError(f"{loaded.where('model.model_config')}: the model's layer count and hidden size are not known ({why})")
    if lay.pp > max(1, parts.layers) or lay.pp > MAX_STAGES:
        raise UsageError(
            f"{loaded.where('parallel_config.pipeline_stage')}: parallel_config.pipeline_stage {lay.pp} is more than the model's {parts.layers} layers "
            f"(or than {MAX_STAGES}): no stage can be without a layer"
        )
    return _RunToSize(config_path, cfg, sizes, parts, lay)


@dataclass(frozen=True)
class _StageSizing:
    """What every stage's row is computed from: the model, the layout, the layers and recomputed layers of each stage,
    the micro-batch and the bytes of a parameter, of its optimizer state and of an activation."""

    model_config: dict
    parts: ModelParts
    layout: Layout
    layers: list  # per stage
    full_recompute: list  # layers fully recomputed, per stage
    select_recompute: list  # layers with mindformers' select recompute, per stage
    comm_recompute: bool  # parallel_optimizer_comm_recompute: a fully recomputed layer gathers its weights again
    micro: int
    seq: int
    param_bytes: int
    optimizer_bytes: int
    compute_bytes: int

    @property
    def dense_layer(self) -> int:
        """Parameters one card holds of a dense layer (attention and MLP split by tensor parallelism, norms whole)."""
        return (self.parts.attention + self.parts.dense_mlp) // self.layout.tp + self.parts.norms

    @property
    def moe_dense(self) -> int:
        """Parameters one card holds of a MoE layer's attention, shared experts, norms and router."""
        return (self.parts.attention + self.parts.shared_experts) // self.layout.tp + self.parts.norms + self.parts.router

    @property
    def moe_experts(self) -> int:
        """Parameters one card holds of a MoE layer's routed experts: split by expert_parallel alone."""
        return self.parts.experts // self.layout.ep

    def _shard(self, group: int) -> int:
        """The parallel optimizer's split of a parameter held alike by *group* cards (1: not split)."""
        lay = self.layout
        if not lay.parallel_optimizer:
            return 1
        size = lay.optimizer_shard if 0 < lay.optimizer_shard <= group and group % lay.optimizer_shard == 0 else group
        return max(1, size)

    @property
    def dense_shard(self) -> int:
        """The split of a non-expert weight: over the stage's cards holding the same slice of it (dp x cp)."""
        return self._shard(self.layout.dp * self.layout.cp)

    @property
    def expert_shard(self) -> int:
        """The split of a routed expert's weight: mindformers' GroupedMLP lays experts out ("ep", None), ep dividing
        data_parallel x model_parallel, each whole on its card and held by the stage's other cards alike."""
        lay = self.layout
        return self._shard(max(1, lay.dp * lay.tp * lay.cp // lay.ep))

    @property
    def grads_sharded(self) -> bool:
        """Whether the gradients are split like the optimizer state (level2, level3, or gradient_accumulation_shard)."""
        lay = self.layout
        return lay.parallel_optimizer and (lay.optimizer_level in ("level2", "level3") or lay.gradient_accumulation_shard)

    @property
    def keeps_gathered(self) -> bool:
        """level1 and level2 keep the weights all-gathered in the forward pass until the backward (MindSpore's
        optimizer_level: level3 gathers them again instead)."""
        return self.layout.parallel_optimizer and self.layout.optimizer_level in ("level1", "level2")

    def moe_in(self, a: int, b: int) -> int:
        """MoE layers among layers a..b-1 (the first dense_layers are dense); counted, never looped over."""
        return max(0, b - max(a, self.parts.dense_layers)) if self.parts.moe and b > a else 0


def stage_sizing(run: _RunToSize) -> tuple[_StageSizing, str | None]:
    """The layers of each stage (mindformers' split, pipeline interleave included), the layers each recomputes, the
    micro-batch and the bytes per value; with the note saying when the config's ``offset`` does not add up."""
    cfg, mc, lay, parts = run.config, run.model_config, run.layout, run.parts
    pipe = cfg.get("parallel", {}).get("pipeline_config") if isinstance(cfg.get("parallel"), dict) else None
    interleaved = isinstance(pipe, dict) and _truthy(pipe.get("pipeline_interleave"))
    interleave = _pos(mc, "pp_interleave_num", "virtual_pipeline_model_parallel_size") if interleaved else 1
    per, split_note = layers_per_stage(parts.layers, lay.pp, mc.get("offset", 0), interleave)
    rc = cfg.get("recompute_config") if isinstance(cfg.get("recompute_config"), dict) else {}
    runner = cfg.get("runner_config") if isinstance(cfg.get("runner_config"), dict) else {}
    sizing = _StageSizing(
        model_config=mc,
        parts=parts,
        layout=lay,
        layers=per,
        full_recompute=_per_stage(rc.get("recompute", False), lay.pp, per),
        select_recompute=_per_stage(rc.get("select_recompute", False), lay.pp, per),
        # a fully recomputed layer with parallel_optimizer_comm_recompute gathers its weights again in its recomputation
        comm_recompute=_truthy(rc.get("parallel_optimizer_comm_recompute")),
        micro=_pos(runner, "batch_size"),
        seq=whole_number(mc, "seq_length", default=4096),
        param_bytes=dtype_bytes(mc.get("params_dtype", mc.get("param_init_type"))),
        optimizer_bytes=_optimizer_states(cfg),
        compute_bytes=dtype_bytes(mc.get("compute_dtype"), default=2),
    )
    return sizing, split_note


def _layer_parameters(sz: _StageSizing, i: int, first: int, n: int) -> tuple[int, int, int]:
    """``(dense, expert, gathered)`` parameters one card holds of stage *i*'s *n* layers from layer *first*: before the
    parallel optimizer's split, and what level1 / level2 keep all-gathered of them beyond this card's shard (none of a
    layer fully recomputed with parallel_optimizer_comm_recompute)."""
    moe = sz.moe_in(first, first + n)
    dense = (n - moe) * sz.dense_layer + moe * sz.moe_dense
    expert = moe * sz.moe_experts
    gathered = 0
    if sz.keeps_gathered:
        sd, se = sz.dense_shard, sz.expert_shard
        kept_from = first + (sz.full_recompute[i] if sz.comm_recompute else 0)
        kept_moe = sz.moe_in(kept_from, first + n)
        kept_dense = first + n - kept_from - kept_moe
        moe_gathered = sz.moe_dense - sz.moe_dense // sd + sz.moe_experts - sz.moe_experts // se
        gathered = kept_dense * (sz.dense_layer - sz.dense_layer // sd) + kept_moe * moe_gathered
    return dense, expert, gathered


def _end_parameters(sz: _StageSizing, i: int) -> tuple[int, int]:
    """``(dense, expert)`` parameters one card of stage *i* holds outside the layers: the embedding on the first stage;
    the head, the final norm and the multi-token-prediction layers on the last (a tied head is a copy of the embedding
    there, and the embedding itself when there is one stage)."""
    parts, lay = sz.parts, sz.layout
    tp, ep = lay.tp, lay.ep
    dense = expert = 0
    if i == 0:
        dense += parts.embedding // tp
    if i == lay.pp - 1:
        dense += parts.head // tp + parts.final_norm
        if parts.mtp_layers:
            # each MTP layer as mindformers builds it: a decoder layer (its norms and, MoE, its router whole, as in the
            # decoder's layers) and its own eh_proj (split) with enorm, hnorm and final_layernorm (whole)
            mtp_moe = parts.moe and parts.layers >= parts.dense_layers
            own_norms = 3 * parts.hidden
            split = parts.attention + (parts.shared_experts if mtp_moe else parts.dense_mlp) + parts.mtp_extra - own_norms
            whole = parts.norms + own_norms + (parts.router if mtp_moe else 0)
            dense += parts.mtp_layers * (split // tp + whole)
            expert += parts.mtp_layers * (parts.experts // ep if mtp_moe else 0)
    if i == 0 and lay.pp == 1 and parts.tied:
        dense -= parts.head // tp
    return dense, expert


def _stage_activations(sz: _StageSizing, i: int, first: int, n: int) -> int:
    """Bytes stage *i* keeps for the backward pass per micro-batch: each layer under its recompute mode (full, select,
    none; MoE or dense), the embedding's output on the first stage, the logits and their float32 copy on the last."""
    lay, parts = sz.layout, sz.parts
    acts = 0
    f, sel = sz.full_recompute[i], max(sz.full_recompute[i], sz.select_recompute[i])
    for mode, a, b in (("full", 0, f), ("select", f, sel), ("none", sel, n)):
        if b <= a:
            continue
        m = sz.moe_in(first + a, first + b)
        for is_moe, count_ in ((True, m), (False, b - a - m)):
            if count_:
                acts += count_ * layer_activations(sz.model_config, micro=sz.micro, seq=sz.seq, layout=lay, moe=is_moe, mode=mode)
    tokens = sz.micro * max(1, sz.seq // lay.cp)
    if i == 0:
        acts += sz.compute_bytes * tokens * parts.hidden // (lay.tp if lay.sequence_parallel else 1)
    if i == lay.pp - 1:
        vocab = parts.embedding // max(1, parts.hidden)
        acts += (sz.compute_bytes + 4) * tokens * vocab // lay.tp
    return acts


def _micro_batches_in_flight(lay: Layout, i: int) -> int:
    """Micro-batches whose activations stage *i* holds at once: all of them under GPipe, the stages after it under
    1F1B (at most micro_batch_num), one without a pipeline."""
    if lay.pp == 1:
        return 1
    if lay.scheduler.lower() == "gpipe":
        return lay.micro_batch_num
    return min(lay.pp - i, lay.micro_batch_num)


def _step_gradients(sz: _StageSizing, params: int, sharded: int) -> int:
    """Bytes the optimizer step holds beyond the gradients' accumulation buffer, on one card of a stage holding
    *params* parameters (*sharded* after the parallel optimizer's split).

    mindformers trains a pipeline (``pipeline_stage`` > 1), or gradient accumulation under semi/auto parallel, with
    ``MFPipelineWithLossScaleCell`` (``trainer/base_trainer.py``, ``_reset_wrapper_for_pipeline_parallel`` and
    ``_reset_wrapper_for_grad_accu``). Its accumulation buffer ``accu_grads`` is a clone of the weights in their dtype,
    a Parameter that lives the whole job (counted as the gradients), and at the step ``tensor_grad_scale_pipeline``
    (``wrapper/wrapper.py``) makes ``new_grad = accu_grad * reciprocal(scale)``, a new tensor for every gradient, before
    it zeroes ``accu_grads``; all of them are alive until ``ClipGradNorm`` has the global norm and the optimizer has
    used them (with the parallel optimizer, ``tensor_shard_grad_scale_pipeline`` copies the reduce-scattered shard).
    One copy is counted; by then the backward pass has freed the activations, so the stage's peak is the larger of the
    two (:attr:`StageMemory.step_extra`). Without a pipeline or accumulation the gradients are the step's own and
    nothing is added."""
    lay = sz.layout
    if lay.pp == 1 and lay.gradient_accumulation == 1:
        return 0
    return sz.param_bytes * (sharded if lay.parallel_optimizer else params)


def _stage_memory(sz: _StageSizing, i: int, first: int) -> StageMemory:
    """Stage *i*'s row, its layers starting at layer *first*: weights (with what the parallel optimizer keeps gathered),
    gradients and optimizer state after the parallel optimizer's split, activations per micro-batch and in flight."""
    n = sz.layers[i]
    dense, expert, gathered = _layer_parameters(sz, i, first, n)
    end_dense, end_expert = _end_parameters(sz, i)
    dense, expert = dense + end_dense, expert + end_expert
    if sz.keeps_gathered:  # the embedding, the head and the MTP layers are never recomputed
        rest = end_dense + end_expert
        gathered += rest - rest // sz.dense_shard
    sharded = dense // sz.dense_shard + expert // sz.expert_shard
    width = sz.param_bytes
    return StageMemory(
        stage=i,
        layers=n,
        first_layer=first,
        parameters=dense + expert,
        weights=width * sharded + width * gathered,
        gradients=width * (sharded if sz.grads_sharded else (dense + expert)),
        optimizer=sz.optimizer_bytes * sharded,
        activations_per_micro_batch=_stage_activations(sz, i, first, n),
        micro_batches_in_flight=_micro_batches_in_flight(sz.layout, i),
        full_recompute_layers=sz.full_recompute[i],
        select_recompute_layers=min(n, sz.select_recompute[i]),
        gathered=width * gathered,
        step_gradients=_step_gradients(sz, dense + expert, sharded),
    )


def stage_rows(sz: _StageSizing) -> list[StageMemory]:
    """A row per pipeline stage, each stage's layers following the previous stage's."""
    stages, first = [], 0
    for i, n in enumerate(sz.layers):
        stages.append(_stage_memory(sz, i, first))
        first += n
    return stages


_TRAINING_GRAPH = "mindformers/parallel_core/training_graph/transformer"
ONE_F_ONE_B = "For 1F1B Scheduler, MicroBatch num must be larger or equal than StageNum"


def ulysses_degree(config: dict) -> int:
    """``parallel_config.ulysses_degree_in_cp``: mindformers' ``hierarchical_context_parallel_sizes`` (1 when unset)."""
    pc = config.get("parallel_config") if isinstance(config.get("parallel_config"), dict) else {}
    return _pos(pc, "ulysses_degree_in_cp")


def _attention_refusals(mc: dict, lay: Layout, ulysses: int) -> list[str]:
    """ParallelAttention's rules (the training graph's attention; latent attention is another class): heads and kv heads
    against tensor parallelism."""
    if _truthy(mc.get("multi_latent_attention")):
        return []
    heads = whole_number(mc, "num_attention_heads", "num_heads")
    kv = whole_number(mc, "num_query_groups", "num_key_value_heads", "n_kv_heads", "multi_query_group_num", default=heads)
    out = []
    if heads and heads % (lay.tp * ulysses):
        out.append(
            f"num_attention_heads {heads} is not a multiple of model_parallel {lay.tp} x ulysses_degree_in_cp {ulysses}: mindformers' ParallelAttention "
            f"refuses it ('num_heads' must be a multiple of 'tensor_parallel * ulysses_cp_num', {_TRAINING_GRAPH}/attention.py:173-176)"
        )
    if heads and 0 < kv < heads and kv % (lay.tp * ulysses) and kv % lay.tp:
        out.append(
            f"{kv} kv heads (num_query_groups / num_key_value_heads / n_kv_heads) are not a multiple of model_parallel {lay.tp}: mindformers' "
            f"ParallelAttention refuses it ('kv_num_heads' must be a multiple of 'tensor_parallel * ulysses_cp_num', {_TRAINING_GRAPH}/attention.py:177-180)"
        )
    return out


def _moe_refusals(mc: dict, lay: Layout) -> list[str]:
    """The MoE layer's rules: experts over expert_parallel, expert_parallel over data_parallel x model_parallel, and MoE
    with tensor parallelism only with sequence parallelism."""
    experts = whole_number(mc, "num_moe_experts", "n_routed_experts", "num_experts", "expert_num")
    if not experts:
        return []
    out = []
    if experts % lay.ep:
        out.append(
            f"num_moe_experts {experts} is not divisible by expert_parallel {lay.ep}: mindformers' MoELayer refuses it "
            f"('Expected num_moe_experts ... to be divisible by expert_model_parallel_size', {_TRAINING_GRAPH}/moe/moe_layer.py:60-63)"
        )
    if (lay.dp * lay.tp) % lay.ep:
        out.append(
            f"expert_parallel {lay.ep} does not divide data_parallel {lay.dp} x model_parallel {lay.tp}: mindformers' FFNGroupedGEMM.shard refuses it "
            f"('expert_model_parallel_size must divide (data_parallel_size * tensor_model_parallel_size) exactly', {_TRAINING_GRAPH}/moe/ffn.py:189-195)"
        )
    if lay.tp > 1 and not lay.sequence_parallel:
        out.append(
            f"MoE with model_parallel {lay.tp} and use_seq_parallel off: mindformers' MoELayer refuses it ('performance may degrade if MoE and "
            f"tensor parallelism are enabled without also enabling sequence parallelism', {_TRAINING_GRAPH}/moe/moe_layer.py:143-146)"
        )
    return out


def layout_refusals(mc: dict, lay: Layout, *, legacy: bool = False, ulysses: int = 1) -> list[str]:
    """What mindformers (the new architecture's training graph) or MindSpore's graph compiler would refuse of *lay* for the
    model *mc*, each with the text it raises and where: an empty list is a layout they build and compile.

    The training graph's constructor rules (attention heads, MoE) hold for ``use_legacy: False``; MindSpore's 1F1B rule
    (micro-batches at least the pipeline stages, raised by its frontend library, ``libmindspore_frontend.so``) for every model.
    """
    out = [] if legacy else _attention_refusals(mc, lay, ulysses) + _moe_refusals(mc, lay)
    if lay.pp > 1 and lay.micro_batch_num < lay.pp and lay.scheduler.lower() == "1f1b":
        out.append(
            f"micro_batch_num {lay.micro_batch_num} is less than pipeline_stage {lay.pp}: MindSpore's graph compiler refuses it under its 1F1B "
            f"pipeline scheduler ('{ONE_F_ONE_B}', MindSpore's frontend library libmindspore_frontend.so)"
        )
    return out


def _devices_refusal(devices: int | None, lay: Layout) -> list[str]:
    """mindformers' device-count rule: the launch's cards must be the layout's (check_rules._check_parallel)."""
    if devices is not None and devices != lay.devices:
        return [
            f"--devices {devices}, but the layout (data_parallel x model_parallel x context_parallel x pipeline_stage) uses {lay.devices} cards: "
            "mindformers refuses that launch ('should be equal to device_num', mindformers/tools/check_rules.py, _check_parallel); "
            "the estimate is for the layout"
        ]
    return []


def _usable_memory(config: dict, gb: float | None) -> tuple[float | None, list[str], str]:
    """What MindSpore may use of a card: the card, or ``context.max_device_memory`` when smaller (said in a note); with no
    card, ``context.max_device_memory`` alone; and what the estimate is judged against."""
    mdm = _max_device_memory(config)
    if gb is None:
        return mdm, [], ("context.max_device_memory" if mdm is not None else "")
    if mdm is not None and mdm < gb:
        return mdm, [f"context.max_device_memory {mdm:g}GB: MindSpore uses at most that much of the card"], "the card"
    return gb, [], "the card"


def _pipeline_notes(lay: Layout) -> list[str]:
    """What the in-flight count assumes of the pipeline: a scheduler counted as 1F1B keeps them."""
    if lay.pp > 1 and lay.scheduler.lower() not in ("1f1b", "gpipe"):
        return [f"pipeline_scheduler {lay.scheduler}: micro-batches in flight counted as 1F1B keeps them"]
    return []


def estimate_card_memory(config_path, *, devices: int | None = None, layout=None, card_gb=None, card: str | None = None) -> CardMemory:
    """Per-card memory of the run *config_path* describes, at full size under its parallel layout.

    Args:
        config_path: a mindformers run YAML (its base configs merged, as mindformers reads it).
        devices: the cards the launch has (a note when the layout wants another count; ``msnb preflight`` checks it).
        layout: a :class:`Layout`, or a dict of ``parallel_config`` keys over the config's own.
        card_gb: the card's memory in GiB (or a card's name, see :data:`CARDS`); None: unknown, nothing is judged.
        card: a card's name (``910B2``), instead of *card_gb*.

    Returns:
        The :class:`CardMemory`: a row per pipeline stage, the card, the verdict and what is not counted.

    Raises:
        UsageError: an unknown card or a card size that is no number.
        ConfigError, SmokeError: a config that cannot be read, or a config.json that is not one.
    """
    gb, name = card_size(card_gb, card)
    run = read_run_to_size(config_path, layout)
    sizing, split_note = stage_sizing(run)
    stages = stage_rows(sizing)
    usable, card_notes, against = _usable_memory(run.config, gb)
    notes = list(run.sizes.notes) + card_notes
    refusals = _devices_refusal(devices, run.layout) + ([split_note] if split_note else [])
    refusals += layout_refusals(run.model_config, run.layout, legacy=uses_legacy(run.config), ulysses=ulysses_degree(run.config))
    return CardMemory(
        config=str(Path(str(run.path))),
        layout=run.layout,
        stages=stages,
        card_gb=gb,
        card_name=name,
        usable_gb=usable,
        devices=devices,
        micro_batch=sizing.micro,
        seq=sizing.seq,
        parameters=run.parts.total,
        sizes_from=run.sizes.source_words(),
        notes=notes + _pipeline_notes(run.layout),
        refusals=refusals,
        judged_against=against,
    )


MEMORY_CHECK = "per-card memory (msnb's estimate at full size)"


def memory_check(config_path, *, devices: int | None = None, card_gb=None, card: str | None = None) -> tuple[CardMemory | None, dict]:
    """The per-card memory as a pre-flight check (``msnb preflight`` and the smoke's pre-flight): ``(estimate, check)``.

    The check (``check``, ``outcome``, ``message``, ``key``) fails when the largest stage does not fit the card (else
    ``context.max_device_memory``) or when a size is one mindformers would refuse; it is "not checked" when neither a
    card nor ``context.max_device_memory`` is given, or when msnb cannot size the model here, never passed.
    """
    from ..errors import MsnbError  # the root: whatever msnb could not size is said, not raised

    try:
        est = estimate_card_memory(config_path, devices=devices, card_gb=card_gb, card=card)
    except SizeRefused as exc:
        return None, {"check": MEMORY_CHECK, "outcome": "failed", "message": str(exc), "key": exc.key}
    except MsnbError as exc:  # no sizes to estimate from here (a pretrained_model_dir of the cluster's): said, never passed
        return None, {"check": MEMORY_CHECK, "outcome": "not checked", "message": str(exc), "key": ""}
    outcome = {True: "passed", False: "failed", None: "not checked"}[est.fits]
    return est, {"check": MEMORY_CHECK, "outcome": outcome, "message": est.memory_verdict(), "key": "parallel_config" if est.fits is False else ""}


__all__ = [
    "CARDS",
    "LEAVES_OUT",
    "CardMemory",
    "Layout",
    "StageMemory",
    "card_size",
    "estimate_card_memory",
    "layer_activations",
    "layers_per_stage",
    "layout_refusals",
    "memory_check",
    "read_layout",
]
