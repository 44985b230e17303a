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

import ast
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from ..config.run_config import uses_legacy
from ..environment import available_memory_bytes
from ..errors import NotRehearsed, SmokeError
from ..words import count

_DTYPE_BYTES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2, "float64": 8}


def whole_number(mc: dict, *names, default: int = 0) -> int:
    """The first of *names* that is a whole number in *mc* (sizes from a hostile file: bools, strings and huge values are no size)."""
    for name in names:
        value = mc.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40:
            return value
    return default


def dtype_bytes(value, default: int = 4) -> int:
    """The bytes of one value of a dtype name (``bfloat16``, ``mstype.float32``...); *default* when unset or unknown."""
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


# model types whose training class builds q/k norms whatever the config says (qk_layernorm=True in the layer spec:
# mindformers/models/qwen3/modeling_qwen3_train.py:47, models/qwen3_moe/modeling_qwen3_moe_train.py:56)
_QK_NORMS_ALWAYS = ("qwen3", "qwen3_moe")


# mindformers 1.9's TransformerConfig.seq_length: what a model trains at when neither the YAML nor config.json gives one
MCORE_DEFAULT_SEQ = 4096
_HF_CONFIG_LIMIT = 4 << 20  # a Hugging Face config.json is a few kB; anything larger is not one
_CLASS_FILE_LIMIT = 1 << 20


def read_hf_config(folder: Path) -> dict:
    """*folder*'s config.json as a dict, refusing anything that is not a small JSON object, naming the file."""
    path = folder / "config.json"
    try:
        with open(path, "rb") as f:
            raw = f.read(_HF_CONFIG_LIMIT + 1)
        if len(raw) > _HF_CONFIG_LIMIT:
            raise SmokeError(f"{path}: larger than {_HF_CONFIG_LIMIT >> 20} MiB, not a Hugging Face config.json")
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError) as exc:
        raise SmokeError(f"{path}: pretrained_model_dir's config.json cannot be read ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise SmokeError(f"{path}: pretrained_model_dir's config.json is not a JSON object")
    return data


def _literal_defaults(cls: ast.ClassDef) -> dict:
    """The literal keyword defaults of a config class's ``__init__`` (what the class fills in when the YAML is silent)."""
    init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    if init is None:
        return {}
    args = init.args.args + init.args.kwonlyargs
    defaults = [None] * (len(init.args.args) - len(init.args.defaults)) + list(init.args.defaults) + list(init.args.kw_defaults)
    out = {}
    for arg, node in zip(args, defaults):
        if node is None:
            continue
        try:
            value = ast.literal_eval(node)
        except (ValueError, SyntaxError, TypeError, RecursionError):
            continue
        if isinstance(value, (int, float, str, bool)):
            out[arg.arg] = value
    return out


@lru_cache(maxsize=1)
def _installed_config_classes() -> dict:
    """``{model_type or class name: (class name, defaults)}`` for every config class the installed mindformers ships, read from
    its source files (mindformers is not imported: it writes ``./output``); empty when mindformers is not installed."""
    try:
        dist = metadata.distribution("mindformers")
    except metadata.PackageNotFoundError:
        return {}
    found: dict = {}
    for f in dist.files or ():
        parts = f.parts
        if len(parts) != 4 or parts[:2] != ("mindformers", "models") or not parts[3].endswith(".py") or "config" not in parts[3]:
            continue
        try:
            path = Path(dist.locate_file(f))
            if path.stat().st_size > _CLASS_FILE_LIMIT:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            defaults = _literal_defaults(cls)
            if not defaults:
                continue
            found.setdefault(cls.name, (cls.name, defaults))
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "model_type" for t in stmt.targets):
                    if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                        found.setdefault(_norm(stmt.value.value), (cls.name, defaults))
    return found


def _norm(name: str) -> str:
    return "".join(ch for ch in str(name).lower() if ch.isalnum()).removesuffix("forcausallm")


def class_defaults(mc: dict, trainer_model: str | None = None) -> tuple[str | None, dict]:
    """The installed mindformers config class the model is built from and its defaults: ``(class name, defaults)``.

    The class is named by ``model_config.type`` (legacy), else ``model_type``, ``architectures`` or the trainer's
    ``model_name`` (the new architecture's registered types); ``(None, {})`` when none is found.
    """
    classes = _installed_config_classes()
    archs = mc.get("architectures")
    for name in (mc.get("type"), mc.get("model_type"), archs[0] if isinstance(archs, list) and archs else archs, trainer_model):
        if isinstance(name, str) and name:
            hit = classes.get(name) or classes.get(_norm(name))
            if hit is not None:
                return hit
    return None, dict(_CLASS_DEFAULTS.get(str(mc.get("model_type")), {}))


@dataclass
class ModelSizes:
    """The model config mindformers builds from, merged the way it merges (class defaults < config.json < the YAML), with
    where each size came from."""

    config: dict
    sources: dict = field(default_factory=dict)  # key -> "the YAML", "<dir>/config.json" or "<Class>'s default"
    notes: list = field(default_factory=list)
    missing_folder: bool = False  # pretrained_model_dir is named and has no config.json here

    def source_words(self) -> str:
        """``sizes from the YAML (5), /m/config.json (8)``: each source and how many size keys it gave."""
        counts: dict = {}
        for key in _SIZE_KEYS:
            if key in self.sources:
                counts[self.sources[key]] = counts.get(self.sources[key], 0) + 1
        return ", ".join(f"{src} ({n})" for src, n in counts.items()) or "nowhere"


# the size keys whose source is reported
_SIZE_KEYS = ("num_hidden_layers", "num_layers", "hidden_size", "num_attention_heads", "num_heads", "num_key_value_heads", "n_kv_heads",
              "multi_query_group_num", "head_dim", "kv_channels", "intermediate_size", "ffn_hidden_size", "vocab_size", "padded_vocab_size",
              "seq_length", "n_routed_experts", "num_experts", "moe_intermediate_size")  # fmt: skip


def model_sizes(config: dict, *, base: Path | None = None) -> ModelSizes:
    """The sizes the real run builds its model with, from the same sources mindformers reads.

    The YAML's ``model.model_config`` wins; under it, for the new architecture (``use_legacy: False``),
    ``pretrained_model_dir``'s config.json when that folder is here; under both, the defaults of the installed
    mindformers' config class (and ``seq_length`` 4096, TransformerConfig's default).

    Args:
        config: the run config as mindformers reads it (a dict).
        base: where a relative ``pretrained_model_dir`` is found (default: the current directory, as mindformers does).

    Raises:
        SmokeError: a config.json that is not a small JSON object.
    """
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    yaml_mc = model.get("model_config") if isinstance(model.get("model_config"), dict) else {}
    legacy = uses_legacy(config)
    merged: dict = {}
    sources: dict = {}
    notes: list = []
    hf: dict = {}
    pretrained = config.get("pretrained_model_dir")
    if not legacy and isinstance(pretrained, str) and pretrained:
        folder = Path(pretrained).expanduser()
        if not folder.is_absolute() and base is not None:
            folder = base / folder
        if (folder / "config.json").is_file():
            hf = read_hf_config(folder)
        else:
            notes.append(f"pretrained_model_dir {pretrained!r} has no config.json here: its sizes are not known")
    trainer = config.get("trainer") if isinstance(config.get("trainer"), dict) else {}
    cls, defaults = class_defaults({**hf, **yaml_mc}, trainer.get("model_name") if not legacy else None)
    for key, value in defaults.items():
        merged[key], sources[key] = value, f"{cls}'s default" if cls else "the class default"
    if not legacy and "seq_length" not in yaml_mc and "seq_length" not in hf:
        merged["seq_length"], sources["seq_length"] = MCORE_DEFAULT_SEQ, "TransformerConfig's default"
    where = f"{pretrained}/config.json"
    for key, value in hf.items():
        merged[key], sources[key] = value, where
    for key, value in yaml_mc.items():
        merged[key], sources[key] = value, "the YAML"
    if cls is None and not any(k in merged for k in ("num_hidden_layers", "num_layers")):
        notes.append("no layer count in the YAML, config.json or an installed mindformers config class: the sizes are not known")
    return ModelSizes(merged, sources, notes, missing_folder=bool(hf == {} and any("has no config.json here" in n for n in notes)))


@dataclass(frozen=True)
class ModelParts:
    """A decoder-only model's parameters by where they live: per layer (attention and dense MLP split by tensor parallelism,
    experts by expert and tensor parallelism, norms and router whole), and once (embedding, output head, final norm,
    multi-token-prediction layers)."""

    layers: int
    hidden: int
    attention: int  # one layer's attention projections
    norms: int  # one layer's norms (and q/k norms)
    dense_mlp: int  # one dense layer's MLP
    experts: int  # one MoE layer's routed experts, all of them
    shared_experts: int  # one MoE layer's shared experts
    router: int  # one MoE layer's router
    dense_layers: int  # the first layers that are dense in an MoE model (all of them in a dense model)
    embedding: int
    head: int  # the output projection (a copy of the embedding when tied)
    tied: bool
    final_norm: int
    mtp_layers: int  # multi-token-prediction layers, after the last stage's layers
    mtp_extra: int  # one MTP layer's own projection and norms

    @property
    def moe(self) -> bool:
        return self.experts > 0

    def layer(self, index: int) -> int:
        """Parameters of layer *index* (0-based)."""
        if self.moe and index >= self.dense_layers:
            return self.attention + self.norms + self.experts + self.shared_experts + self.router
        return self.attention + self.norms + self.dense_mlp

    @property
    def total(self) -> int:
        mtp = self.mtp_layers * (self.layer(self.layers) + self.mtp_extra)
        dense = self.dense_layers if self.moe else self.layers  # counted, not looped: a hostile file may say 10**12 layers
        layers = dense * self.layer(0) + (self.layers - dense) * self.layer(self.layers)
        return layers + self.embedding + (0 if self.tied else self.head) + self.final_norm + mtp


def model_parts(mc: dict) -> ModelParts:
    """Where a decoder-only model's parameters are, from its config's sizes (dense or MoE, grouped-query or latent attention)."""
    mc = {**_CLASS_DEFAULTS.get(str(mc.get("model_type")), {}), **mc}
    layers = whole_number(mc, "num_hidden_layers", "num_layers")
    hidden = whole_number(mc, "hidden_size")
    heads = whole_number(mc, "num_attention_heads", "num_heads", default=max(1, hidden // 128))
    head_dim = whole_number(mc, "head_dim", "kv_channels", default=hidden // heads if heads else 0)
    kv_heads = whole_number(mc, "num_key_value_heads", "n_kv_heads", "multi_query_group_num", default=heads)
    ffn = whole_number(mc, "intermediate_size", "ffn_hidden_size", default=4 * hidden)
    vocab = whole_number(mc, "vocab_size", "padded_vocab_size")
    qk_norms = mc.get("qk_layernorm") or str(mc.get("model_type")) in _QK_NORMS_ALWAYS
    norms = 2 * hidden + (2 * head_dim if qk_norms else 0)
    if mc.get("multi_latent_attention") and whole_number(mc, "kv_lora_rank"):
        q_rank, kv_rank = whole_number(mc, "q_lora_rank"), whole_number(mc, "kv_lora_rank")
        rope, nope, v_dim = (
            whole_number(mc, "qk_rope_head_dim", default=64),
            whole_number(mc, "qk_nope_head_dim", default=128),
            whole_number(mc, "v_head_dim", default=128),
        )
        q = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        attention = q + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim) + heads * v_dim * hidden
        norms = 2 * hidden + q_rank + kv_rank
    else:
        attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    gated = 3 if mc.get("gated_linear_unit", True) or str(mc.get("hidden_act", "")).lower() in ("swiglu", "silu") else 2
    experts = whole_number(mc, "n_routed_experts", "num_experts", "num_moe_experts")
    moe_ffn = whole_number(mc, "moe_intermediate_size", "moe_ffn_hidden_size", default=ffn)
    shared_ffn = whole_number(mc, "moe_shared_expert_intermediate_size", default=whole_number(mc, "n_shared_experts") * moe_ffn) if experts else 0
    untied = not mc.get("tie_word_embeddings", False) or mc.get("untie_embeddings_and_output_weights", False)
    return ModelParts(
        layers=layers,
        hidden=hidden,
        attention=attention,
        norms=norms,
        dense_mlp=gated * hidden * ffn,
        experts=gated * hidden * moe_ffn * experts,
        shared_experts=gated * hidden * shared_ffn,
        router=hidden * experts,
        dense_layers=min(layers, whole_number(mc, "first_k_dense_replace")) if experts else layers,
        embedding=vocab * hidden,
        head=vocab * hidden,
        tied=not untied,
        final_norm=hidden,
        mtp_layers=whole_number(mc, "num_nextn_predict_layers", "mtp_depth", "mtp_num_layers"),
        mtp_extra=2 * hidden * hidden + 3 * hidden,
    )


def parameter_count(mc: dict) -> int:
    """Parameters of a decoder-only model from its config's sizes (see :func:`model_parts`)."""
    return model_parts(mc).total


def estimate(mc: dict, *, batch: int, seq: int | None = None, recompute: bool = False) -> MemoryEstimate:
    """The floor of the training memory of the model *mc* describes (see the module's docstring).

    Args:
        mc: the config's ``model.model_config``.
        batch: the batch trained.
        seq: the sequence length (default: the config's ``seq_length``).
        recompute: the config recomputes each layer in the backward pass (only its input is kept).
    """
    params = parameter_count(mc)
    width = dtype_bytes(mc.get("params_dtype", mc.get("param_init_type")))
    compute = dtype_bytes(mc.get("compute_dtype"), default=2)
    layers, hidden = whole_number(mc, "num_hidden_layers", "num_layers"), whole_number(mc, "hidden_size")
    tokens = max(1, batch) * (seq or whole_number(mc, "seq_length", default=1))
    per_layer = tokens * hidden * compute * (1 if recompute else 16)  # kept per layer: its input, or ~16 hidden-sized tensors
    return MemoryEstimate(params, params * width, params * width, params * 8, layers * per_layer)


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB"


def refuse_unless_it_fits(mc: dict, *, batch: int, seq: int | None, recompute: bool, workers: int, where: str, sizes_from: str = "") -> MemoryEstimate:
    """Raise :class:`~msnb.errors.NotRehearsed` in one line when the model's floor exceeds the memory available.

    Args:
        mc: the model config the child will train (after any shrinking).
        batch: the batch trained.
        seq: the sequence length trained.
        recompute: the config recomputes layers.
        workers: data-parallel workers, each holding the whole model.
        where: the config's file, for the message.
        sizes_from: where the sizes came from (:meth:`ModelSizes.source_words`), for the message.

    Returns:
        The estimate, when it fits (or when the memory available cannot be read).
    """
    est = estimate(mc, batch=batch, seq=seq, recompute=recompute)
    need = est.total * max(1, workers)
    free = available_memory_bytes()
    if free is not None and need > free:
        each = f" for each of {count(workers, 'worker')}" if workers > 1 else ""
        raise NotRehearsed(
            f"{where}: the model needs at least {_gb(need)} to train ({est.parameters / 1e9:,.2f} B parameters: weights and gradients "
            f"{_gb(est.weights + est.gradients)}, Adam's moments {_gb(est.optimizer)}, activations {_gb(est.activations)}{each}) and "
            f"{_gb(free)} of memory is available here: not rehearsed at its own size (let --shrink shrink it, or run it on a larger machine)"
            + (f"; sizes from {sizes_from}" if sizes_from else "")
        )
    return est


__all__ = [
    "MCORE_DEFAULT_SEQ",
    "MemoryEstimate",
    "ModelParts",
    "ModelSizes",
    "model_parts",
    "class_defaults",
    "estimate",
    "model_sizes",
    "parameter_count",
    "read_hf_config",
    "refuse_unless_it_fits",
]
