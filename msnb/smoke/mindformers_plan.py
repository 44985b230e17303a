"""What a smoke run of a mindformers run YAML trains: the config's own model, shrunk, its outputs in the scratch directory.

A mindformers run YAML describes a model for a cluster: 64 layers x 5120
hidden, 4096 tokens, model and pipeline parallel over 16 cards.  The smoke
trains *that architecture class* through mindformers' own ``Trainer`` with the
config's own callbacks, at a size that steps in milliseconds, so that the
monitoring chain (MFLossMonitor, TrainingStateMonitor, SummaryMonitor,
CheckpointMonitor, TensorBoard) is proven in a minute instead of discovered
broken after hours in a queue.

This module is plain Python over the YAML *as mindformers reads it* (base
configs merged, ``${}`` left literal). Every change it makes is one of three
kinds, recorded as a :class:`Change` with its reason, and nothing else is ever
changed:

- ``shrink``: sizes, batch, steps, parallel degrees to 1, the learning rate a
  small model learns at;
- ``rehearse``: what the CPU (or GPU) cannot run as Ascend does, replaced by an
  equivalent (float32, the unfused norm, the MoE layers dense);
- ``isolate``: every output and input outside the run redirected into the
  scratch folder (or cleared: no production checkpoint is loaded).

A change that would make a crashing config run (a missing key added, a
conflicting switch flipped) is not one of them: such a config fails, and
:mod:`msnb.config.mindformers_rules` names why. The child
(:mod:`msnb.smoke.mindformers_worker`) loads the user's own file with
mindformers' ``MindFormerConfig`` and applies exactly these changes, as
overrides, on that object. This module imports neither MindSpore nor
mindformers.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ..config.run_config import is_mindformers_run
from ..errors import NotRehearsed, SmokeError
from .memory_estimate import MCORE_DEFAULT_SEQ, estimate, model_sizes, read_hf_config

# The mindformers release msnb's CPU rehearsal and shrinking were written against (the pin msnb installs).
PINNED_MINDFORMERS = "1.9"

# Small sizes that every architecture class mindformers 1.9 ships accepts (2 heads of 32, kv heads dividing heads).
SMALL = {"layers": 2, "hidden": 64, "heads": 2, "kv_heads": 2, "head_dim": 32, "ffn": 128, "vocab": 256, "seq": 32, "batch": 2}

# Each dimension under the names mindformers' model configs give it (legacy and new architecture alike).
_DIMENSIONS = {
    "layers": ("num_hidden_layers", "num_layers"),
    "hidden": ("hidden_size",),
    "heads": ("num_attention_heads", "num_heads"),
    "kv_heads": ("num_key_value_heads", "n_kv_heads", "multi_query_group_num"),
    "head_dim": ("head_dim", "kv_channels"),
    "ffn": ("intermediate_size", "ffn_hidden_size"),
    "vocab": ("vocab_size", "padded_vocab_size"),
    "seq": ("seq_length",),
}
_POSITIONS = ("max_position_embeddings", "max_position_embedding")
# DeepSeek's multi-head latent attention and MoE sizes, made small and consistent with the above
_MLA_AND_MOE = {
    "q_lora_rank": 16,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 8,
    "moe_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 32,
    "n_routed_experts": 4,
    "num_experts": 4,
    "num_moe_experts": 4,
    "num_experts_per_tok": 2,
    "moe_router_topk": 2,
    "n_group": 1,
    "topk_group": 1,
}
_MTP = ("mtp_depth", "num_nextn_predict_layers", "mtp_num_layers")
_DTYPE_KEYS = ("compute_dtype", "param_init_type", "params_dtype", "layernorm_compute_type", "layernorm_compute_dtype", "softmax_compute_type",
               "softmax_compute_dtype", "rotary_dtype", "router_dense_type")  # fmt: skip
# the dtype keys every new-architecture model_config accepts (mindformers' TransformerConfig)
_MCORE_DTYPE_KEYS = ("params_dtype", "compute_dtype", "layernorm_compute_dtype", "softmax_compute_dtype", "rotary_dtype")
# monitor_config formats that rely on TensorDump, which has no CPU kernel (and the substitutes that do work on CPU)
TENSORDUMP_FORMATS = ("local_loss_format", "local_norm_format", "device_local_norm_format")
CPU_SUBSTITUTES = "monitor_config.device_local_loss_format (per-device loss) and runner_wrapper.local_norm: True (per-parameter norms in the log)"
# the wrapper the CPU rehearsal registers (mindformers' MFTrainOneStepCell with the IsFinite overflow check)
CPU_WRAPPER = "MsnbCPUTrainOneStepCell"
# callbacks that write what a smoke reads, and the name each is known by in the verdict
KNOWN_CALLBACKS = ("MFLossMonitor", "SummaryMonitor", "CheckpointMonitor", "TrainingStateMonitor")
_DATA_PATH_KEYS = ("data_path", "dataset_dir", "path", "data_dir")

SHRINK, REHEARSE, ISOLATE = "shrink", "rehearse", "isolate"
KINDS = (SHRINK, REHEARSE, ISOLATE)
DELETE = "<deleted>"  # the value of a Change that removes its key


@dataclass(frozen=True)
class Change:
    """One key the smoke changes in the user's config: its kind (shrink, rehearse, isolate), before, after and why."""

    kind: str
    path: tuple  # keys (str) and list indices (int) from the root
    before: object
    after: object  # DELETE removes the key
    why: str

    @property
    def key(self) -> str:
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out

    def override(self) -> dict:
        """What the child applies on mindformers' own config object."""
        if self.after is DELETE:
            return {"path": list(self.path), "delete": True, "before": _jsonable(self.before)}
        return {"path": list(self.path), "value": self.after, "before": _jsonable(self.before)}

    def as_dict(self) -> dict:
        return {"kind": self.kind, "key": self.key, "before": _jsonable(self.before), "after": None if self.after is DELETE else self.after,
                "deleted": self.after is DELETE, "why": self.why}  # fmt: skip


def _jsonable(value):
    return value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else repr(value)


def _short(value) -> str:
    text = "null" if value is None else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _keys_phrase(items: list) -> str:
    """``model.model_config: num_layers 64 -> 2, hidden_size 5120 -> 64, runner_config.batch_size 1 -> 2``: a parent said once."""
    parts, last_parent = [], None
    for c in items:
        parent = Change(c.kind, c.path[:-1], None, None, "").key if len(c.path) > 1 else ""
        leaf = f"[{c.path[-1]}]" if isinstance(c.path[-1], int) else str(c.path[-1])
        after = "removed" if c.after is DELETE else _short(c.after)
        what = f"{leaf} {_short(c.before)} -> {after}"
        parts.append(what if parent == last_parent or not parent else f"{parent}: {what}")
        last_parent = parent
    return ", ".join(parts)


def describe_changes(changes: list) -> dict:
    """kind -> one phrase per reason, listing every key changed for it: ``runner_config: batch_size 1 -> 2 (the smoke's batch)``."""
    grouped: dict = {}
    for c in changes:
        grouped.setdefault(c.kind, {}).setdefault(c.why, []).append(c)
    out = {}
    for kind in KINDS:
        phrases = [f"{_keys_phrase(items)} ({why})" for why, items in grouped.get(kind, {}).items()]
        if phrases:
            out[kind] = phrases
    return out


def change_lines(changes: list) -> list[str]:
    """``shrink: ...``, ``rehearse: ...``, ``isolate: ...``: every change, one line a kind."""
    return [f"{kind}: " + "; ".join(phrases) for kind, phrases in describe_changes(changes).items()]


def _unshared(node):
    """A copy in which no two keys share one object: a YAML anchor (``*train_dataset``) is a copy in mindformers' reading too."""
    if isinstance(node, dict):
        return {k: _unshared(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_unshared(v) for v in node]
    return node


class _Edits:
    """The working copy of the config and every change made to it; the only way the plan changes a key."""

    def __init__(self, data: dict):
        self.data = data
        self.changes: list[Change] = []

    def get(self, path: tuple, default=None):
        node = self.data
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                return default
        return node

    def node(self, path: tuple) -> dict | None:
        found = self.get(path)
        return found if isinstance(found, dict) else None

    def set(self, kind: str, path: tuple, value, why: str) -> None:
        """Set *path* to *value* (parents made as mappings) and record it, unless it already holds that value."""
        assert kind in KINDS, kind
        node = self.data
        for part in path[:-1]:
            child = node[part] if isinstance(node, list) else node.get(part)
            if not isinstance(child, (dict, list)):
                child = {}
                node[part] = child
            node = child
        last = path[-1]
        present = (isinstance(node, dict) and last in node) or (isinstance(node, list) and isinstance(last, int) and last < len(node))
        before = node[last] if present else None
        if present and before == value and type(before) is type(value):
            return
        node[last] = value
        self.changes.append(Change(kind, tuple(path), before, value, why))

    def delete(self, kind: str, path: tuple, why: str) -> None:
        parent = self.node(path[:-1]) if len(path) > 1 else self.data
        if parent is None or path[-1] not in parent:
            return
        before = parent.pop(path[-1])
        self.changes.append(Change(kind, tuple(path), before, DELETE, why))


def installed_mindformers() -> str | None:
    """The installed mindformers' version, from its metadata (mindformers is not imported: it writes ``./output``)."""
    try:
        return metadata.version("mindformers")
    except metadata.PackageNotFoundError:
        return None


@dataclass
class ModelPlan:
    """What the smoke's child trains, and every change made to the user's config, in words for the verdict."""

    family: str  # "Qwen3", "LlamaForCausalLM", ...
    legacy: bool
    source: str  # the YAML's file name
    shrunk: bool
    before: dict  # dimension -> the config's value
    after: dict  # dimension -> the value trained
    config: dict  # the config as mindformers reads it, with the changes applied (paths are filled in by child_config)
    changes: list = field(default_factory=list)  # every Change, each one of the three kinds with its reason
    tensordump_off: list = field(default_factory=list)  # monitor_config keys turned off (no TensorDump kernel on CPU)
    callbacks: list = field(default_factory=list)  # the callbacks that will run, by type
    monitor_formats: dict = field(default_factory=dict)  # TrainingStateMonitor's *_format keys that are on, with their targets
    data: str = "synthetic"  # "synthetic" or "config"
    data_note: str = ""
    columns: list = field(default_factory=list)
    mindrecord: list = field(default_factory=list)  # the config's own MindRecord files or folders, when trained on
    tensorboard: bool = False
    lr: float | None = None  # the learning rate trained with, when the smoke set it
    workers: int = 1

    def describe(self) -> str:
        """One line: which model, from which file, at what size, through what."""
        kind = "legacy" if self.legacy else "mcore"
        size = ""
        if self.shrunk and self.before.get("layers") is not None:
            b_l, b_h = self.before.get("layers"), self.before.get("hidden")
            a_l, a_h = self.after.get("layers"), self.after.get("hidden")
            size = f", shrunk from {b_l} layers x {b_h} hidden to {a_l} x {a_h}"
        elif not self.shrunk:
            size = ", at its own size"
        return f"{self.family} ({kind}) from {self.source}{size}, through mindformers' Trainer"

    def change_lines(self) -> list[str]:
        """``shrink: ...``, ``rehearse: ...``, ``isolate: ...``: every change, by kind, for the verdict."""
        return change_lines(self.changes)


def _model_family(data: dict) -> str:
    model = data.get("model") or {}
    arch = model.get("arch") if isinstance(model.get("arch"), dict) else {}
    mc = model.get("model_config") or {}
    archs = mc.get("architectures")
    for candidate in (
        arch.get("type"),
        archs[0] if isinstance(archs, list) and archs else archs,
        (data.get("trainer") or {}).get("model_name") if isinstance(data.get("trainer"), dict) else None,
        mc.get("model_type"),
        mc.get("type"),
    ):
        if isinstance(candidate, str) and candidate:
            return candidate
    return "a mindformers model"


def _is_legacy(data: dict) -> bool:
    value = data.get("use_legacy", True)  # mindformers' default
    return value is not False and str(value).lower() != "false"


def _first(node: dict, names) -> str | None:
    return next((n for n in names if n in node), None)


# where a legacy config class keeps a dimension the YAML may leave to the class's default (a 7B default is no smoke)
_LEGACY_DEFAULT_KEYS = {
    "LlamaConfig": {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_heads", "vocab": "vocab_size", "seq": "seq_length"},
    "ChatGLM2Config": {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_attention_heads", "vocab": "padded_vocab_size", "seq": "seq_length",
                       "ffn": "ffn_hidden_size", "head_dim": "kv_channels"},
}  # fmt: skip
MC = ("model", "model_config")
SHRUNK = "shrunk: the same architecture class at a size that trains in seconds"


def _shrink_model(ed: _Edits, keep_vocab: bool) -> tuple[dict, dict]:
    mc = ed.node(MC)
    before, after = {}, {}
    for dim, key in _LEGACY_DEFAULT_KEYS.get(mc.get("type"), {}).items():
        if _first(mc, _DIMENSIONS[dim]) is None and not (dim == "vocab" and keep_vocab):
            ed.set(SHRINK, MC + (key,), SMALL[dim], SHRUNK + " (the YAML left it to the class's default)")
            before[dim], after[dim] = "its class default", SMALL[dim]
    if mc.get("multi_latent_attention") or mc.get("model_type") == "deepseek_v3":  # DeepSeek-V3's class defaults are the 671B's
        for key, value in (("num_attention_heads", SMALL["heads"]), ("num_key_value_heads", SMALL["kv_heads"]), *_MLA_AND_MOE.items()):
            if key not in mc and key not in ("num_experts", "num_moe_experts", "moe_router_topk", "moe_shared_expert_intermediate_size"):
                ed.set(SHRINK, MC + (key,), value, SHRUNK + " (the YAML left it to the class's default)")
                if key == "num_attention_heads":
                    before["heads"], after["heads"] = "its class default", value
    for dim, names in _DIMENSIONS.items():
        key = _first(mc, names)
        if key is None or dim in after:
            continue
        before[dim] = mc[key]
        if dim == "vocab" and keep_vocab:
            after[dim] = mc[key]
            continue
        small = SMALL[dim]
        if dim == "kv_heads" and key == "multi_query_group_num":
            small = 1 if mc.get("multi_query_attention") else SMALL["kv_heads"]
        ed.set(SHRINK, MC + (key,), small, SHRUNK)
        after[dim] = small
    if "head_dim" not in before and "heads" in before and "hidden" in before:
        after["head_dim"] = SMALL["hidden"] // SMALL["heads"]
    for key in _POSITIONS:
        if key in mc:
            ed.set(SHRINK, MC + (key,), 2 * SMALL["seq"], SHRUNK + " (at least the sequence length)")
    for key, value in _MLA_AND_MOE.items():
        if key in mc and mc[key] is not None:
            ed.set(SHRINK, MC + (key,), value, SHRUNK)
    if mc.get("n_routed_experts"):  # DeepSeek's router groups default to 8, which must divide the (now 4) experts
        for key in ("n_group", "topk_group"):
            ed.set(SHRINK, MC + (key,), 1, SHRUNK + " (router groups dividing the shrunk experts)")
    for key in _MTP:
        if isinstance(mc.get(key), int) and mc[key] > 1:
            ed.set(SHRINK, MC + (key,), 1, SHRUNK + " (one multi-token-prediction layer)")
    if "offset" in mc:
        ed.set(SHRINK, MC + ("offset",), 0, "one pipeline stage")
    return before, after


_MOE_KEYS = ("num_experts", "num_moe_experts", "n_routed_experts", "moe_layer_freq", "first_k_dense_replace")


def _is_moe(mc: dict) -> bool:
    model_type = str(mc.get("model_type") or "")
    return model_type == "deepseek_v3" or model_type.endswith("_moe") or any(mc.get(k) for k in _MOE_KEYS)


def _moe_dense(ed: _Edits, loaded) -> None:
    """The MoE layers' dispatch (GroupedMatmul, CumsumExt, SortExt, the token permutation) has no CPU kernel: every layer dense.

    ``first_k_dense_replace`` is mindformers' own switch (every new-architecture TransformerConfig reads it): equal
    to the layer count, each layer builds the dense MLP of ``intermediate_size`` instead of the routed experts, so the
    router, the experts and their auxiliary loss are not rehearsed (the change says so). Qwen3-MoE, whose layer spec
    ignores it, is built dense by the CPU rehearsal in the child.
    """
    mc = ed.node(MC)
    if not _is_moe(mc):
        return
    layers = mc.get(_first(mc, _DIMENSIONS["layers"]) or "", None)
    if not isinstance(layers, int) or isinstance(layers, bool):
        raise NotRehearsed(
            f"{loaded.where('model.model_config')}: this MoE model's layer count is not a number here, so its layers cannot be made dense for "
            "the CPU backend (the MoE dispatcher, GroupedMatmul, has no CPU kernel); the smoke runs it on Ascend"
        )
    why = "every MoE layer dense: the MoE dispatcher (GroupedMatmul, token permutation) has no CPU kernel; router, experts and aux loss not rehearsed"
    ed.set(REHEARSE, MC + ("first_k_dense_replace",), layers, why)
    if isinstance(mc.get("moe_layer_freq"), int) and not isinstance(mc.get("moe_layer_freq"), bool) and mc["moe_layer_freq"] > 1:
        ed.set(REHEARSE, MC + ("moe_layer_freq",), 1, why + " (mindformers refuses first_k_dense_replace beside moe_layer_freq > 1)")
    elif isinstance(mc.get("moe_layer_freq"), list):
        ed.set(REHEARSE, MC + ("moe_layer_freq",), [0] * layers, why)


# where packed documents' attention is switched on: the model's key, and the dataset flags from which mindformers' Trainer
# turns that key on (BaseTrainer: the Megatron loader's config, the Hugging Face loader, the common loader's adaptor)
EOD_COMPRESSION_KEYS = (
    ("model", "model_config", "use_eod_attn_mask_compression"),
    ("train_dataset", "data_loader", "config", "create_compressed_eod_mask"),
    ("train_dataset", "data_loader", "create_compressed_eod_mask"),
    ("train_dataset", "data_loader", "adaptor_config", "compress_mask"),
)


def _no_cpu_attention(ed: _Edits, loaded) -> None:
    """Attention variants whose flash-attention kernel the CPU rehearsal cannot replace: not rehearsed, said before launch.

    Packed documents' attention is one feature wherever it is switched on: in ``model_config``, or by a dataset flag
    from which mindformers turns ``use_eod_attn_mask_compression`` on itself (legacy and new architecture alike).
    """
    for path in EOD_COMPRESSION_KEYS:
        if ed.get(path):
            key = ".".join(path)
            how, has = ("", " has") if path[0] == "model" else (f"{key} makes mindformers switch on ", ", which has")
            raise NotRehearsed(
                f"{loaded.where(key)}: {how}use_eod_attn_mask_compression (packed documents: FlashAttentionScore in the TND layout with "
                f"actual_seq_qlen){has} no CPU replacement here; it runs on Ascend"
            )
    if ed.get(MC + ("experimental_attention_variant",)) == "dsa":
        raise NotRehearsed(
            f"{loaded.where('model.model_config.experimental_attention_variant')}: DeepSeek sparse attention (dsa: the lightning indexer "
            "and sparse flash attention kernels) has no CPU replacement here; it runs on Ascend"
        )


def _is_mindrecord(train: dict, path: str) -> bool:
    loader = train.get("data_loader") if isinstance(train.get("data_loader"), dict) else {}
    return loader.get("type") == "MindDataset" or path.endswith(".mindrecord")


def _model_class_named(data: dict) -> bool:
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    arch = model.get("arch") if isinstance(model.get("arch"), dict) else {}
    mc = model.get("model_config") if isinstance(model.get("model_config"), dict) else {}
    return any(isinstance(v, str) and v for v in (arch.get("type"), mc.get("type")))


def _dataset_paths(train: dict) -> list:
    loader = train.get("data_loader") if isinstance(train.get("data_loader"), dict) else {}
    found = []
    for node in (loader, loader.get("config") if isinstance(loader.get("config"), dict) else {}):
        for key in _DATA_PATH_KEYS:
            value = node.get(key)
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, str) and ("/" in item or os.sep in item) and not _is_number(item):
                    found.append((key, item))
    return found


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _dataset_exists(path: str) -> bool:
    p = Path(path).expanduser()
    return p.exists() or Path(str(p) + ".bin").exists() or Path(str(p) + ".idx").exists()


def _columns(data: dict, legacy: bool) -> list:
    train = data.get("train_dataset") if isinstance(data.get("train_dataset"), dict) else {}
    cols = train.get("input_columns")
    if isinstance(cols, list) and cols and all(isinstance(c, str) for c in cols):
        return list(cols)
    # what BaseTrainer gives a new-architecture model without input_columns (the Megatron loader's columns)
    return ["input_ids"] if legacy else ["input_ids", "labels", "loss_mask", "position_ids"]


# the sizes a new-architecture model_config needs when the YAML leaves them to pretrained_model_dir's config.json
_MCORE_SIZES = {"num_hidden_layers": "layers", "hidden_size": "hidden", "num_attention_heads": "heads", "num_key_value_heads": "kv_heads",
                "head_dim": "head_dim", "intermediate_size": "ffn", "vocab_size": "vocab", "seq_length": "seq"}  # fmt: skip
# the new-architecture model types mindformers 1.9 registers (MindFormerRegister CONFIG, legacy=False), with their causal-LM class
MCORE_MODEL_TYPES = {"deepseek_v3": "DeepseekV3ForCausalLM", "glm4": "Glm4ForCausalLM", "glm4_moe": "Glm4MoeForCausalLM", "qwen2": "Qwen2ForCausalLM",
                     "qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM", "telechat": "TeleChat2ForCausalLM",
                     "telechat3": "TeleChat3ForCausalLM", "telechat3_moe": "TeleChat3MoeForCausalLM"}  # fmt: skip
# every size-like key of a Hugging Face config.json that the smoke shrinks (the YAML's model_config overrides that file)
_HF_SIZE_KEYS = tuple(n for names in _DIMENSIONS.values() for n in names) + _POSITIONS + tuple(_MLA_AND_MOE) + _MTP + (
    "first_k_dense_replace", "moe_layer_freq")  # fmt: skip


def registered_model_type(name: str) -> str | None:
    """The registered new-architecture model type a name means (``deepseekV3`` -> ``deepseek_v3``), or None."""
    key = "".join(ch for ch in str(name).lower() if ch.isalnum())
    for known in MCORE_MODEL_TYPES:
        if key in (known.replace("_", ""), known.replace("_", "") + "forcausallm"):
            return known
    return None


def _sizes_from_pretrained_dir(ed: _Edits, legacy: bool, loaded, shrinking: bool = True) -> list:
    """A finetune config takes its model's sizes from ``pretrained_model_dir``'s config.json.

    mindformers merges that file under the YAML's ``model_config`` (the YAML wins).  When the folder is here, the
    size-like keys the file gives and the YAML does not are read into the plan's view of ``model_config`` (what the
    real run trains with, so nothing is recorded) and the shrink then overrides each in the YAML, listed with the
    file's value; the file still supplies everything else.  When the folder is not here, mindformers would fail at
    start (``config.json does not exist``); the smoke needs only the architecture class, which
    ``model_config.model_type`` or ``trainer.model_name`` names, so that class gets the smoke's sizes, listed.
    """
    mc = ed.node(MC)
    if legacy:
        return []
    pretrained = ed.get(("pretrained_model_dir",))
    folder = Path(pretrained).expanduser() if isinstance(pretrained, str) and pretrained else None
    if folder is not None and (folder / "config.json").is_file():
        if not shrinking:  # trained at the folder's own sizes: nothing to override
            return []
        hf = read_hf_config(folder)
        taken = [k for k in _HF_SIZE_KEYS if k in hf and k not in mc and isinstance(hf[k], int) and not isinstance(hf[k], bool)]
        for key in taken:
            mc[key] = hf[key]  # what the merge gives the real run; the shrink overrides it in the YAML
        if "seq_length" not in mc:
            mc["seq_length"] = MCORE_DEFAULT_SEQ
            taken.append("seq_length")
        return taken
    if not pretrained and _first(mc, _DIMENSIONS["layers"]) is not None:  # no folder named: the YAML gives the sizes
        if "seq_length" not in mc and shrinking:
            mc["seq_length"] = MCORE_DEFAULT_SEQ  # what the real run trains at; the shrink overrides it, naming the default
            return ["seq_length"]
        return []
    needs_sizes = _first(mc, _DIMENSIONS["layers"]) is None or "seq_length" not in mc or _first(mc, _DIMENSIONS["vocab"]) is None
    if not needs_sizes and registered_model_type(mc.get("model_type", "")):
        return []
    trainer = ed.node(("trainer",)) or {}
    name = mc.get("model_type") or trainer.get("model_name")
    model_type = registered_model_type(name) if isinstance(name, str) else None
    if model_type is None:
        unknown = f"the model name {name!r} is none of the types mindformers registers ({', '.join(MCORE_MODEL_TYPES)}), so " if name else ""
        raise SmokeError(
            f"{loaded.where('model.model_config')}: model.model_config gives no model sizes and pretrained_model_dir ({pretrained or 'unset'}) has "
            f"no config.json here; {unknown}point pretrained_model_dir at a Hugging Face model folder, or give model_type and the sizes in model.model_config"
        )
    why = f"pretrained_model_dir {pretrained!r} is not on this machine: {model_type}'s class at the smoke's sizes instead of that folder's config.json"
    if mc.get("model_type") != model_type:
        ed.set(SHRINK, MC + ("model_type",), model_type, why)
    if "architectures" not in mc:
        ed.set(SHRINK, MC + ("architectures",), [MCORE_MODEL_TYPES[model_type]], why)
    for key, dim in _MCORE_SIZES.items():
        if key not in mc and not (dim == "layers" and _first(mc, _DIMENSIONS["layers"])):
            ed.set(SHRINK, MC + (key,), SMALL[dim], why)
    if "max_position_embeddings" not in mc:
        ed.set(SHRINK, MC + ("max_position_embeddings",), 2 * SMALL["seq"], why)
    ed.set(SHRINK, ("pretrained_model_dir",), "", why)
    return []


def _learning_rate(ed: _Edits, use_lr: float, lr_given: bool, steps: int) -> None:
    """The smoke's rate in every schedule (plain and grouped), from step 1, kept over the smoke's steps.

    A warm-up of 2,000 steps would keep a 40-step smoke near 0, and ``total_steps: -1`` makes a cosine decay
    over the smoke's own steps (to ``lr_end`` at its last step): either way the loss cannot fall for the right reason.
    """
    why = "--lr" if lr_given else "a shrunk model's learning rate, which --lr sets"
    schedules = [("lr_schedule",)]
    grouped = ed.node(("grouped_lr_schedule",))
    if grouped is not None:
        if isinstance(grouped.get("default"), dict):
            schedules.append(("grouped_lr_schedule", "default"))
        for i, group in enumerate(grouped.get("grouped") or []):
            if isinstance(group, dict):
                schedules.append(("grouped_lr_schedule", "grouped", i))
    for path in schedules:
        sched = ed.node(path)
        if sched is None:
            continue
        ed.set(SHRINK, path + ("learning_rate",), float(use_lr), why)
        for key in ("lr_end", "min_lr", "end_learning_rate", "warmup_lr_init"):
            if isinstance(sched.get(key), (int, float)) and not isinstance(sched.get(key), bool) and sched[key] > use_lr:
                ed.set(SHRINK, path + (key,), float(use_lr), "at most the smoke's rate")
        for key in ("warmup_steps", "warmup_ratio"):
            if isinstance(sched.get(key), (int, float)) and not isinstance(sched.get(key), bool) and sched[key] > 0:
                ed.set(SHRINK, path + (key,), 0, "no warm-up in a smoke: the rate from step 1")
        if "total_steps" in sched or "decay_steps" in sched:
            # a decay over 1,000x the smoke's steps: the rate stays within 0.1% of the smoke's for the whole smoke
            for key in ("total_steps", "decay_steps"):
                if key in sched:
                    ed.set(
                        SHRINK, path + (key,), 1000 * max(1, steps), f"the rate kept at the smoke's: the schedule would decay over the smoke's {steps} steps"
                    )
    optimizer = ed.node(("optimizer",))
    if optimizer is not None and lr_given and "learning_rate" in optimizer:
        ed.set(SHRINK, ("optimizer", "learning_rate"), float(use_lr), "--lr")


def _parallel_off(ed: _Edits, workers: int, legacy: bool, columns: list, device: str) -> None:
    """Every parallel degree 1, or with several workers mindformers' data parallelism over them.

    A new-architecture model reads its degrees from ``parallel_config`` under semi-auto parallel only: in
    data-parallel mode mindformers resets ``data_parallel`` to 1 and the model then refuses N ranks
    (``total_model_size(1) != world_size(N)``). On Ascend and GPU its workers keep semi-auto parallel with
    ``data_parallel`` N and the dataset split N ways (its own cluster layout); the CPU has no semi-auto parallel,
    so there they run data-parallel mode and the CPU rehearsal gives the model's parallel state the N ranks.
    """
    one = f"{workers} data-parallel workers under msrun" if workers > 1 else "one device"
    ed.set(SHRINK, ("use_parallel",), workers > 1, one)
    pc = ed.node(("parallel_config",)) or {}
    for key in ("data_parallel", "model_parallel", "pipeline_stage", "context_parallel", "expert_model_parallel", "micro_batch_num"):
        if key in pc and pc[key] != 1 and not (key == "data_parallel" and workers > 1):
            ed.set(SHRINK, ("parallel_config", key), 1, one)
    if workers > 1:
        ed.set(SHRINK, ("parallel_config", "data_parallel"), workers, one)
    if pc.get("use_seq_parallel"):
        ed.set(SHRINK, ("parallel_config", "use_seq_parallel"), False, one)
    par = ed.node(("parallel",))
    semi_auto = workers > 1 and not legacy and device != "CPU"
    if par is not None or workers > 1:
        if semi_auto:
            ed.set(SHRINK, ("parallel", "parallel_mode"), 1, "semi-auto parallel: where a new-architecture model reads data_parallel")
        elif workers > 1 and not legacy:
            ed.set(SHRINK, ("parallel", "parallel_mode"), 0, "data parallel: the CPU has no semi-auto parallel (the model's sharding not rehearsed)")
        else:
            ed.set(SHRINK, ("parallel", "parallel_mode"), 0, "data parallel" if workers > 1 else one)
        if workers > 1:
            ed.set(SHRINK, ("parallel", "full_batch"), False, "each worker feeds its own batches")
        for key in ("enable_alltoall", "enable_parallel_optimizer"):
            if (par or {}).get(key):
                ed.set(SHRINK, ("parallel", key), False, one)
        if semi_auto:
            ed.set(SHRINK, ("parallel", "dataset_strategy"), [[workers, 1] for _ in columns], "each worker its own rows of every column")
        elif par is not None and "dataset_strategy" in par:
            ed.delete(SHRINK, ("parallel", "dataset_strategy"), one)
    recompute = ed.node(("recompute_config",))
    if recompute is not None:
        for key in ("recompute", "select_recompute", "parallel_optimizer_comm_recompute", "mp_comm_recompute"):
            if recompute.get(key) not in (None, False):
                ed.set(SHRINK, ("recompute_config", key), False, "nothing to recompute at the smoke's size")
    if (ed.get(("micro_batch_interleave_num",)) or 1) != 1:
        ed.set(SHRINK, ("micro_batch_interleave_num",), 1, one)


def _on_this_device(ed: _Edits, device: str, legacy: bool, family: str, mode: str | None, loaded) -> None:
    """What this device cannot run as Ascend does, replaced by its plain equivalent (rehearse)."""
    ed.set(REHEARSE, ("context", "device_target"), device, f"the smoke trains on {device}")
    if mode is not None:
        ed.set(REHEARSE, ("context", "mode"), 0 if mode == "graph" else 1, "--mode")
    if ed.get(("context", "save_graphs")):
        ed.set(ISOLATE, ("context", "save_graphs"), False, "no graph dumps outside the scratch folder")
    if device == "Ascend":
        return
    for key in ("max_device_memory", "ascend_config", "memory_optimize_level"):
        if ed.get(("context", key)) is not None:
            ed.delete(REHEARSE, ("context", key), f"an Ascend setting {device} has no use for")
    mc = ed.node(MC)
    if device == "CPU":
        _no_cpu_attention(ed, loaded)
    if not legacy:
        for key in _MCORE_DTYPE_KEYS:  # the new-architecture classes compute in bfloat16 where the YAML is silent
            if key not in mc:
                ed.set(REHEARSE, MC + (key,), "float32", f"bfloat16 kernels are Ascend's: float32 on {device} (the class default is bfloat16)")
    for key in _DTYPE_KEYS:
        if mc.get(key) in ("bfloat16", "float16"):
            ed.set(REHEARSE, MC + (key,), "float32", f"bfloat16/float16 kernels are Ascend's: float32 on {device}")
    llama = legacy and (mc.get("type") == "LlamaConfig" or family.lower().startswith("llama"))
    compressed = bool(mc.get("use_attn_mask_compression"))
    for key, value, why in (
        ("use_flash_attention", False, "flash attention is an Ascend kernel"),
        ("fused_rms_norm", False, "the fused RmsNorm is an Ascend kernel"),
    ):
        if key == "use_flash_attention" and compressed:
            continue  # mindformers refuses flash attention off with mask compression: the kernel is replaced in the child instead
        if key in mc or llama:  # LlamaConfig's defaults are the fused kernels
            ed.set(REHEARSE, MC + (key,), value, why)
    if llama or legacy and "use_rope_slice" in mc:
        ed.set(REHEARSE, MC + ("use_rope_slice",), True, "the default rotate_half uses a broadcast BatchMatMul the CPU backend rejects")


def _monitoring(ed: _Edits, device: str) -> tuple[list, dict]:
    """TensorDump-based monitor formats off on CPU (no kernel); the formats that stay on, for the verdict."""
    monitor = ed.node(("monitor_config",))
    off: list = []
    if monitor is None:
        return off, {}
    if device == "CPU":
        for key in TENSORDUMP_FORMATS:
            if monitor.get(key):
                off.append(key)
                ed.set(REHEARSE, ("monitor_config", key), None, "TensorDump has no CPU kernel (on Ascend it runs)")
        if monitor.get("dump_path"):
            ed.set(ISOLATE, ("monitor_config", "dump_path"), "", "no TensorDump output on CPU")
    formats = {k: v for k, v in monitor.items() if isinstance(k, str) and k.endswith("_format") and v} if monitor.get("monitor_on") else {}
    return off, formats


def plan_mindformers(
    loaded,
    *,
    device: str,
    shrink: str = "auto",
    steps: int,
    batch_size: int | None = None,
    lr: float | None = None,
    mode: str | None = None,
    data: str = "auto",
    sink_size: int | None = None,
    workers: int = 1,
) -> ModelPlan:
    """Turn a user's mindformers run YAML into the changes a smoke child applies on mindformers' own reading of it.

    Args:
        loaded: the :class:`~msnb.config.LoadedConfig` of the run YAML (its ``literal`` tree, ``${}`` unresolved, is what
            mindformers reads and what is planned on).
        device: "Ascend", "GPU" or "CPU": where it will train.
        shrink: "auto" (always on CPU and GPU, on Ascend when the model would not fit one card), "always" or "never".
        steps: how many steps to train.
        batch_size: the batch size (default: 2 when shrunk, else the config's).
        lr: the learning rate (default: 5e-3 when shrunk, so a small model learns within a smoke run; else the config's).
        mode: "graph" or "pynative" when asked for (default: the config's ``context.mode``, unchanged).
        data: "auto" (the config's dataset when its files exist here, else synthetic), "config" or "synthetic".
        sink_size: rehearse sink mode with this sink size (default: sink mode off).
        workers: data-parallel workers (more than 1: mindformers' own data parallelism, started by msrun).

    Returns:
        The plan: every change (shrink, rehearse, isolate) with its reason; outputs are isolated by :func:`child_config`.

    Raises:
        SmokeError: a config that no smoke run can train (not a training config, a missing dataset with
            ``data="config"``), naming the key and the file.
        NotRehearsed: a config msnb cannot rehearse on this device (an MoE model with no dense form on CPU).
    """
    source = Path(loaded.path).name
    ed = _Edits(_unshared(loaded.literal if loaded.literal is not None else loaded.data))
    cfg = ed.data
    run_mode = cfg.get("run_mode", "train")
    if isinstance(run_mode, str) and run_mode not in ("train", "finetune"):
        raise SmokeError(f"{loaded.where('run_mode')}: run_mode is {run_mode!r}; a smoke run trains, so give a train or finetune config")
    legacy = _is_legacy(cfg)
    if legacy and not _model_class_named(cfg):
        raise SmokeError(
            f"{loaded.where('model')}: model.arch.type and model.model_config.type are empty, so mindformers has no model to build; "
            "name the model class (a template's 'please edit by hand' sections need filling in)"
        )
    family = _model_family(cfg)
    mc = ed.node(MC)
    # weights, gradients and Adam's moments at the sizes the real run builds (YAML, pretrained_model_dir's config.json, class defaults)
    big = estimate(model_sizes(cfg).config, batch=1, seq=1).total
    do_shrink = shrink == "always" or (shrink == "auto" and (device != "Ascend" or big > 24e9))
    train = ed.node(("train_dataset",)) or {}
    paths = _dataset_paths(train)
    if data == "config":
        missing = [(k, p) for k, p in paths if not _dataset_exists(p)]
        if not paths:
            raise SmokeError(f"{loaded.where('train_dataset')}: --data config, but train_dataset.data_loader names no data files")
        if missing:
            raise SmokeError(
                f"{loaded.where('train_dataset')}: --data config, but train_dataset.data_loader.{missing[0][0]} {missing[0][1]} does not exist here"
            )
        use_config_data = True
    elif data == "synthetic":
        use_config_data = False
    else:
        use_config_data = bool(paths) and all(_dataset_exists(p) for _, p in paths)
    from_hf = _sizes_from_pretrained_dir(ed, legacy, loaded, shrinking=do_shrink)
    if do_shrink:
        before, after = _shrink_model(ed, keep_vocab=use_config_data)
        where = f"{ed.get(('pretrained_model_dir',))}/config.json"
        for i, c in enumerate(ed.changes):  # say where the values overridden came from (seq_length: mindformers' default)
            if c.path[:2] == MC and len(c.path) == 3 and c.path[2] in from_hf:
                origin = "mindformers' default, given by neither file" if c.path[2] == "seq_length" and c.before == MCORE_DEFAULT_SEQ else where
                ed.changes[i] = dataclasses.replace(c, why=f"{c.why}; the value in {origin}")
    else:
        before = {d: mc.get(_first(mc, names)) for d, names in _DIMENSIONS.items() if _first(mc, names)}
        after = dict(before)
    runner = ed.node(("runner_config",)) or {}
    bs = batch_size or (SMALL["batch"] if do_shrink else runner.get("batch_size") or SMALL["batch"])
    for path in (
        (("runner_config", "batch_size"),)
        + ((("train_dataset", "batch_size"),) if "batch_size" in train else ())
        + ((MC + ("batch_size",),) if "batch_size" in mc else ())
    ):
        ed.set(SHRINK, path, bs, "--batch-size" if batch_size else "the smoke's batch")
    ed.set(SHRINK, ("runner_config", "epochs"), 1, f"{steps} steps of one pass over the smoke's data")
    if sink_size:
        ed.set(SHRINK, ("runner_config", "sink_mode"), True, "--sink-size")
        ed.set(SHRINK, ("runner_config", "sink_size"), int(sink_size), "--sink-size")
    else:  # mindformers' template defaults to sink mode on when the YAML does not say
        ed.set(SHRINK, ("runner_config", "sink_mode"), False, "callbacks every step (--sink-size N rehearses sink mode)")
    if (runner.get("gradient_accumulation_steps") or 1) != 1:
        ed.set(SHRINK, ("runner_config", "gradient_accumulation_steps"), 1, "one step per batch")
    _parallel_off(ed, workers, legacy, _columns(cfg, legacy), device)
    # a smoke trains from scratch: no production checkpoint is loaded or resumed
    for key, value in (("load_checkpoint", ""), ("resume_training", False), ("auto_trans_ckpt", False), ("src_strategy_path_or_dir", ""), ("profile", False)):
        if cfg.get(key) not in (None, value, "", False):
            ed.set(ISOLATE, (key,), value, "a smoke trains from scratch and reads nothing outside its folder")
    if cfg.get("do_eval"):
        ed.set(SHRINK, ("do_eval",), False, "no evaluation in a smoke")
    _on_this_device(ed, device, legacy, family, mode, loaded)
    if device == "CPU":
        _moe_dense(ed, loaded)
    use_lr = lr if lr is not None else (5e-3 if do_shrink else None)
    if use_lr is not None:
        _learning_rate(ed, use_lr, lr is not None, steps)
    # the overflow check: MFTrainOneStepCell's falls into the Ascend branch on CPU (the template's default wrapper is that class too)
    wrapper = ed.node(("runner_wrapper",))
    if device == "CPU" and (wrapper is None or wrapper.get("type", "MFTrainOneStepCell") == "MFTrainOneStepCell"):
        ed.set(REHEARSE, ("runner_wrapper", "type"), CPU_WRAPPER, "MFTrainOneStepCell with the IsFinite overflow check (NPUGetFloatStatusV2 is Ascend's)")
    tensordump_off, formats = _monitoring(ed, device)
    callbacks = [c.get("type") for c in cfg.get("callbacks") or [] if isinstance(c, dict) and c.get("type")]
    monitor = ed.node(("monitor_config",))
    if monitor is not None and monitor.get("monitor_on") and "TrainingStateMonitor" not in callbacks:
        callbacks.append("TrainingStateMonitor")
    columns = _columns(cfg, legacy)
    if use_config_data:
        data_note = "the config's own dataset (" + ", ".join(p for _, p in paths) + ")"
        if any(_is_mindrecord(train, p) for _, p in paths) and before.get("seq") != after.get("seq"):
            data_note += f", every column cut to the shrunk sequence ({before.get('seq')} -> {after.get('seq')} tokens, offsets kept)"
            marker = next((c for c in ("loss_mask", "labels") if c in columns), None)
            if marker:  # a finetune row's first tokens are its prompt, trained on nothing: the window holds its trained tokens
                data_note += f", a row's window from half a window before its first trained token ({marker})"
    else:
        why = "--data synthetic" if data == "synthetic" else ("its dataset is not on this machine" if paths else "the config names no dataset files")
        data_note = f"synthetic token ids ({why}): columns {', '.join(columns)}, a counting pattern a model can learn"
    cores = os.cpu_count() or 1
    workers_key = train.get("num_parallel_workers")
    if isinstance(workers_key, int) and not isinstance(workers_key, bool) and workers_key > cores:
        ed.set(REHEARSE, ("train_dataset", "num_parallel_workers"), cores, "this machine's cores; MindSpore refuses more")
    loader_cfg = ed.node(("train_dataset", "data_loader", "config"))
    if loader_cfg is not None and "seq_length" in loader_cfg and "seq" in after:
        ed.set(SHRINK, ("train_dataset", "data_loader", "config", "seq_length"), after["seq"], SHRUNK + " (the dataset's sequence with the model's)")
    _mirror_dataset_task(ed, loaded)
    return ModelPlan(
        family=family,
        legacy=legacy,
        source=source,
        shrunk=do_shrink,
        before=before,
        after=after,
        config=cfg,
        changes=ed.changes,
        tensordump_off=tensordump_off,
        callbacks=callbacks,
        monitor_formats=formats,
        data="config" if use_config_data else "synthetic",
        mindrecord=[p for _, p in paths if use_config_data and _is_mindrecord(train, p)],
        data_note=data_note,
        columns=columns,
        tensorboard=isinstance(cfg.get("tensorboard"), dict),
        lr=use_lr,
        workers=workers,
    )


def _mirror_dataset_task(ed: _Edits, loaded) -> None:
    """``train_dataset_task.dataset_config`` is usually the YAML anchor of ``train_dataset``: mindformers reads it as a copy, so change both."""
    literal = loaded.literal if loaded.literal is not None else loaded.data
    task = literal.get("train_dataset_task")
    if not (isinstance(task, dict) and isinstance(task.get("dataset_config"), dict) and task["dataset_config"] == literal.get("train_dataset")):
        return
    for c in list(ed.changes):
        if c.path[:1] == ("train_dataset",):
            target = ("train_dataset_task", "dataset_config") + c.path[1:]
            if c.after is DELETE:
                ed.delete(c.kind, target, c.why)
            else:
                ed.set(c.kind, target, copy.deepcopy(c.after), c.why)


def child_config(plan: ModelPlan, workdir: Path, summary: Path) -> tuple[dict, list]:
    """The plan's config with every output inside the smoke's directory, and the isolate changes that put them there.

    Args:
        plan: what :func:`plan_mindformers` returned.
        workdir: the scratch directory (the child's working directory: mindformers writes ``./output/log`` there).
        summary: where SummaryMonitor writes with one worker (the scratch ``summary`` folder or the user's
            ``--summary-dir``); with several, each rank writes ``output/summary/rank_N`` (see :func:`summary_root`).

    Returns:
        ``(config, changes)``: a new config dict (``output_dir``, TensorBoard, SummaryMonitor, CheckpointMonitor, the
        dump path and the strategy file redirected), and the isolate changes made, to be applied by the child after
        the plan's own.
    """
    ed = _Edits(_unshared(plan.config))
    cfg = ed.data
    out = workdir / "output"
    here = "isolated: written into the smoke's scratch folder"
    ed.set(ISOLATE, ("output_dir",), str(out), here)
    if isinstance(cfg.get("tensorboard"), dict):
        ed.set(ISOLATE, ("tensorboard", "tensorboard_dir"), str(out / "tensorboard"), here)
    for i, cb in enumerate(cfg.get("callbacks") or []):
        if not isinstance(cb, dict):
            continue
        if cb.get("type") == "SummaryMonitor":
            # one worker: the smoke's summary folder; several: mindformers' own output_dir/summary/rank_N (one folder a rank)
            ed.set(ISOLATE, ("callbacks", i, "summary_dir"), str(summary) if plan.workers == 1 else None, here)
        elif cb.get("type") == "CheckpointMonitor":
            if "directory" in cb:
                ed.delete(ISOLATE, ("callbacks", i, "directory"), here + " (under output_dir/checkpoint)")
            every = cb.get("save_checkpoint_steps")
            small = max(1, min(every if isinstance(every, int) and not isinstance(every, bool) else 1, 10))
            if every != small and (isinstance(every, int) and not isinstance(every, bool)):
                ed.set(SHRINK, ("callbacks", i, "save_checkpoint_steps"), small, "a checkpoint within the smoke's steps")
        elif cb.get("type") == "ProfileMonitor":
            ed.set(ISOLATE, ("callbacks", i, "output_path"), str(out / "profile"), here)
    monitor = cfg.get("monitor_config")
    if isinstance(monitor, dict) and monitor.get("dump_path"):
        ed.set(ISOLATE, ("monitor_config", "dump_path"), str(out / "dump"), here)
    par = cfg.get("parallel")
    if isinstance(par, dict) and isinstance(par.get("strategy_ckpt_config"), dict):
        ed.set(ISOLATE, ("parallel", "strategy_ckpt_config", "save_file"), str(out / "strategy" / "ckpt_strategy.ckpt"), here)
    if isinstance(cfg.get("checkpoint"), dict) and "save_path" in cfg["checkpoint"]:
        ed.set(ISOLATE, ("checkpoint", "save_path"), str(out / "checkpoint"), here)
    return cfg, ed.changes


def summary_root(plan: ModelPlan, workdir: Path, summary: Path) -> Path:
    """Where the run's SummaryMonitor files are: the smoke's summary folder, or ``output/summary`` with several workers."""
    return summary if plan.workers == 1 else workdir / "output" / "summary"


__all__ = [
    "summary_root", "PINNED_MINDFORMERS", "ModelPlan", "Change", "KINDS", "SHRINK", "REHEARSE", "ISOLATE", "describe_changes", "change_lines",
    "is_mindformers_run", "installed_mindformers", "plan_mindformers", "child_config",
]  # fmt: skip
