"""A mindformers model's sizes: read from the YAML and ``pretrained_model_dir``'s Hugging Face config.json, then shrunk.

The same architecture class at a size that trains in seconds: every dimension under every name mindformers'
model configs give it, DeepSeek's latent attention and MoE sizes kept consistent, the learning rate a small
model learns at.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ...errors import SmokeError
from ...fullsize.sizes import MCORE_DEFAULT_SEQ, estimate, model_sizes, read_hf_config
from .changes import SHRINK, Edits
from .family import MC, MCORE_MODEL_TYPES, first_key, registered_model_type

# Small sizes that every architecture class mindformers 1.9 ships accepts (2 heads of 32, kv heads dividing heads).
SMALL = {"layers": 2, "hidden": 64, "heads": 2, "kv_heads": 2, "head_dim": 32, "ffn": 128, "vocab": 256, "seq": 32, "batch": 2}


# Each dimension under the names mindformers' model configs give it (legacy and new architecture alike).
DIMENSIONS = {
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


# where a legacy config class keeps a dimension the YAML may leave to the class's default (a 7B default is no smoke)
_LEGACY_DEFAULT_KEYS = {
    "LlamaConfig": {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_heads", "vocab": "vocab_size", "seq": "seq_length"},
    "ChatGLM2Config": {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_attention_heads", "vocab": "padded_vocab_size", "seq": "seq_length",
                       "ffn": "ffn_hidden_size", "head_dim": "kv_channels"},
}  # fmt: skip


SHRUNK = "shrunk: the same architecture class at a size that trains in seconds"


def _shrink_model(ed: Edits, keep_vocab: bool) -> tuple[dict, dict]:
    mc = ed.node(MC)
    before, after = {}, {}
    for dim, key in _LEGACY_DEFAULT_KEYS.get(mc.get("type"), {}).items():
        if first_key(mc, DIMENSIONS[dim]) is None and not (dim == "vocab" and keep_vocab):
            ed.set(SHRINK, MC + (key,), SMALL[dim], SHRUNK + " (the YAML left it to the class's default)")
            before[dim], after[dim] = "its class default", SMALL[dim]
    if mc.get("multi_latent_attention") or mc.get("model_type") == "deepseek_v3":  # DeepSeek-V3's class defaults are the 671B's
        for key, value in (("num_attention_heads", SMALL["heads"]), ("num_key_value_heads", SMALL["kv_heads"]), *_MLA_AND_MOE.items()):
            if key not in mc and key not in ("num_experts", "num_moe_experts", "moe_router_topk", "moe_shared_expert_intermediate_size"):
                ed.set(SHRINK, MC + (key,), value, SHRUNK + " (the YAML left it to the class's default)")
                if key == "num_attention_heads":
                    before["heads"], after["heads"] = "its class default", value
    for dim, names in DIMENSIONS.items():
        key = first_key(mc, names)
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


# the sizes a new-architecture model_config needs when the YAML leaves them to pretrained_model_dir's config.json
_MCORE_SIZES = {"num_hidden_layers": "layers", "hidden_size": "hidden", "num_attention_heads": "heads", "num_key_value_heads": "kv_heads",
                "head_dim": "head_dim", "intermediate_size": "ffn", "vocab_size": "vocab", "seq_length": "seq"}  # fmt: skip


# every size-like key of a Hugging Face config.json that the smoke shrinks (the YAML's model_config overrides that file)
_HF_SIZE_KEYS = tuple(n for names in DIMENSIONS.values() for n in names) + _POSITIONS + tuple(_MLA_AND_MOE) + _MTP + (
    "first_k_dense_replace", "moe_layer_freq")  # fmt: skip


def _sizes_from_pretrained_dir(ed: Edits, legacy: bool, loaded, shrinking: bool = True) -> list:
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
    if not pretrained and first_key(mc, DIMENSIONS["layers"]) is not None:  # no folder named: the YAML gives the sizes
        if "seq_length" not in mc and shrinking:
            mc["seq_length"] = MCORE_DEFAULT_SEQ  # what the real run trains at; the shrink overrides it, naming the default
            return ["seq_length"]
        return []
    needs_sizes = first_key(mc, DIMENSIONS["layers"]) is None or "seq_length" not in mc or first_key(mc, DIMENSIONS["vocab"]) is None
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
        if key not in mc and not (dim == "layers" and first_key(mc, DIMENSIONS["layers"])):
            ed.set(SHRINK, MC + (key,), SMALL[dim], why)
    if "max_position_embeddings" not in mc:
        ed.set(SHRINK, MC + ("max_position_embeddings",), 2 * SMALL["seq"], why)
    ed.set(SHRINK, ("pretrained_model_dir",), "", why)
    return []


def set_learning_rate(ed: Edits, use_lr: float, lr_given: bool, steps: int) -> None:
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


def should_shrink(cfg: dict, shrink: str, device: str) -> bool:
    """``always``; ``auto`` off Ascend, or on Ascend when weights, gradients and Adam's moments would pass 24 GB."""
    # weights, gradients and Adam's moments at the sizes the real run builds (YAML, pretrained_model_dir's config.json, class defaults)
    big = estimate(model_sizes(cfg).config, batch=1, seq=1).total
    return shrink == "always" or (shrink == "auto" and (device != "Ascend" or big > 24e9))


def plan_sizes(ed: Edits, loaded, mc: dict, *, legacy: bool, shrinking: bool, keep_vocab: bool) -> tuple[dict, dict]:
    """The model's sizes before and after: read (the YAML, ``pretrained_model_dir``'s config.json) and, when shrinking, shrunk."""
    from_hf = _sizes_from_pretrained_dir(ed, legacy, loaded, shrinking=shrinking)
    if not shrinking:
        before = {d: mc.get(first_key(mc, names)) for d, names in DIMENSIONS.items() if first_key(mc, names)}
        return before, dict(before)
    before, after = _shrink_model(ed, keep_vocab=keep_vocab)
    where = f"{ed.get(('pretrained_model_dir',))}/config.json"
    for i, c in enumerate(ed.changes):  # say where the values overridden came from (seq_length: mindformers' default)
        if c.path[:2] == MC and len(c.path) == 3 and c.path[2] in from_hf:
            origin = "mindformers' default, given by neither file" if c.path[2] == "seq_length" and c.before == MCORE_DEFAULT_SEQ else where
            ed.changes[i] = dataclasses.replace(c, why=f"{c.why}; the value in {origin}")
    return before, after
