"""Will a mindformers model train in this machine's memory?  Estimated from the config's own sizes, before anything starts.

A 32B model at its own size (``--shrink never``) grew a CPU child to 6.9 GB in a
minute on a 24 GB machine before anything stopped it.  The estimate here is a
floor, not a forecast: weights and gradients in the config's ``params_dtype``,
Adam's two moments in float32, and the activations one layer keeps for the
backward pass (its input alone when the config recomputes), from the
config's own ``num_hidden_layers``, ``hidden_size``, heads, experts,
``seq_length`` and batch.  A run whose floor exceeds the memory available
cannot be rehearsed here, and says so in one line.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import NotRehearsed
from ..words import count

_DTYPE_BYTES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2, "float64": 8}


def _int(mc: dict, *names, default: int = 0) -> int:
    """The first of *names* that is a whole number in *mc* (sizes from a hostile file: bools, strings and huge values are no size)."""
    for name in names:
        value = mc.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40:
            return value
    return default


def _dtype_bytes(value, default: int = 4) -> int:
    return _DTYPE_BYTES.get(str(value).strip().lower().removeprefix("mstype."), default) if value is not None else default


@dataclass(frozen=True)
class MemoryEstimate:
    """The floor of a model's training memory, in bytes, and the parts it is made of."""

    parameters: int
    weights: int
    gradients: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations


# sizes a model class fills in when the YAML leaves them out (mindformers 1.9's DeepseekV3Config defaults)
_CLASS_DEFAULTS = {
    "deepseek_v3": {
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "first_k_dense_replace": 3,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "moe_intermediate_size": 2048,
    },
}


def parameter_count(mc: dict) -> int:
    """Parameters of a decoder-only model from its config's sizes (dense or MoE, grouped-query or latent attention)."""
    mc = {**_CLASS_DEFAULTS.get(str(mc.get("model_type")), {}), **mc}
    layers = _int(mc, "num_hidden_layers", "num_layers")
    hidden = _int(mc, "hidden_size")
    heads = _int(mc, "num_attention_heads", "num_heads", default=max(1, hidden // 128))
    head_dim = _int(mc, "head_dim", "kv_channels", default=hidden // heads if heads else 0)
    kv_heads = _int(mc, "num_key_value_heads", "n_kv_heads", "multi_query_group_num", default=heads)
    ffn = _int(mc, "intermediate_size", "ffn_hidden_size", default=4 * hidden)
    vocab = _int(mc, "vocab_size", "padded_vocab_size")
    if mc.get("multi_latent_attention") and _int(mc, "kv_lora_rank"):
        q_rank, kv_rank = _int(mc, "q_lora_rank"), _int(mc, "kv_lora_rank")
        rope, nope, v_dim = _int(mc, "qk_rope_head_dim", default=64), _int(mc, "qk_nope_head_dim", default=128), _int(mc, "v_head_dim", default=128)
        q = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        attention = q + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim) + heads * v_dim * hidden
    else:
        attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    gated = 3 if mc.get("gated_linear_unit", True) or str(mc.get("hidden_act", "")).lower() in ("swiglu", "silu") else 2
    dense_mlp = gated * hidden * ffn
    experts = _int(mc, "n_routed_experts", "num_experts", "num_moe_experts")
    if experts:
        moe_ffn = _int(mc, "moe_intermediate_size", "moe_ffn_hidden_size", default=ffn)
        shared = _int(mc, "n_shared_experts", "moe_shared_expert_intermediate_size")
        dense_layers = min(layers, _int(mc, "first_k_dense_replace"))
        moe_mlp = gated * hidden * moe_ffn * (experts + shared) + hidden * experts
        mlp_total = dense_layers * dense_mlp + (layers - dense_layers) * moe_mlp
    else:
        mlp_total = layers * dense_mlp
    untied = not mc.get("tie_word_embeddings", False) or mc.get("untie_embeddings_and_output_weights", False)
    return layers * attention + mlp_total + vocab * hidden * (2 if untied else 1)


def estimate(mc: dict, *, batch: int, seq: int | None = None, recompute: bool = False) -> MemoryEstimate:
    """The floor of the training memory of the model *mc* describes (see the module's docstring).

    Args:
        mc: the config's ``model.model_config``.
        batch: the batch trained.
        seq: the sequence length (default: the config's ``seq_length``).
        recompute: the config recomputes each layer in the backward pass (only its input is kept).
    """
    params = parameter_count(mc)
    width = _dtype_bytes(mc.get("params_dtype", mc.get("param_init_type")))
    compute = _dtype_bytes(mc.get("compute_dtype"), default=2)
    layers, hidden = _int(mc, "num_hidden_layers", "num_layers"), _int(mc, "hidden_size")
    tokens = max(1, batch) * (seq or _int(mc, "seq_length", default=1))
    per_layer = tokens * hidden * compute * (1 if recompute else 16)  # kept per layer: its input, or ~16 hidden-sized tensors
    return MemoryEstimate(params, params * width, params * width, params * 8, layers * per_layer)


def available_bytes() -> int | None:
    """Memory this process may still use: the smaller of MemAvailable and the cgroup's limit less its usage (None when unknown)."""
    found = []
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f.read(1 << 16).decode("ascii", "replace").splitlines():
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in (("memory.max", "memory.current"), ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")):
        try:
            with open(f"/sys/fs/cgroup/{limit_file}") as f:
                limit = f.read(64).strip()
            with open(f"/sys/fs/cgroup/{usage_file}") as f:
                usage = int(f.read(64).strip())
            if limit.isdigit() and int(limit) < 1 << 60:
                found.append(max(0, int(limit) - usage))
        except (OSError, ValueError):
            continue
    return min(found) if found else None


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB"


def refuse_unless_it_fits(mc: dict, *, batch: int, seq: int | None, recompute: bool, workers: int, where: str) -> MemoryEstimate:
    """Raise :class:`~msnb.errors.NotRehearsed` in one line when the model's floor exceeds the memory available.

    Args:
        mc: the model config the child will train (after any shrinking).
        batch: the batch trained.
        seq: the sequence length trained.
        recompute: the config recomputes layers.
        workers: data-parallel workers, each holding the whole model.
        where: the config's file, for the message.

    Returns:
        The estimate, when it fits (or when the memory available cannot be read).
    """
    est = estimate(mc, batch=batch, seq=seq, recompute=recompute)
    need = est.total * max(1, workers)
    free = available_bytes()
    if free is not None and need > free:
        each = f" for each of {count(workers, 'worker')}" if workers > 1 else ""
        raise NotRehearsed(
            f"{where}: the model needs at least {_gb(need)} to train ({est.parameters / 1e9:,.2f} B parameters: weights and gradients "
            f"{_gb(est.weights + est.gradients)}, Adam's moments {_gb(est.optimizer)}, activations {_gb(est.activations)}{each}) and "
            f"{_gb(free)} of memory is available here: not rehearsed at its own size (let --shrink shrink it, or run it on a larger machine)"
        )
    return est


__all__ = ["MemoryEstimate", "available_bytes", "estimate", "parameter_count", "refuse_unless_it_fits"]
