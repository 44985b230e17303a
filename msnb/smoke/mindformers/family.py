"""Which model a mindformers YAML describes: its family, legacy or new architecture, the registered model types."""

from __future__ import annotations

from ...config.run_config import uses_legacy
from ...errors import SmokeError


def model_family(data: dict) -> str:
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


def first_key(node: dict, names) -> str | None:
    return next((n for n in names if n in node), None)


MC = ("model", "model_config")


def _model_class_named(data: dict) -> bool:
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    arch = model.get("arch") if isinstance(model.get("arch"), dict) else {}
    mc = model.get("model_config") if isinstance(model.get("model_config"), dict) else {}
    return any(isinstance(v, str) and v for v in (arch.get("type"), mc.get("type")))


# the new-architecture model types mindformers 1.9 registers (MindFormerRegister CONFIG, legacy=False), with their causal-LM class
MCORE_MODEL_TYPES = {"deepseek_v3": "DeepseekV3ForCausalLM", "glm4": "Glm4ForCausalLM", "glm4_moe": "Glm4MoeForCausalLM", "qwen2": "Qwen2ForCausalLM",
                     "qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM", "telechat": "TeleChat2ForCausalLM",
                     "telechat3": "TeleChat3ForCausalLM", "telechat3_moe": "TeleChat3MoeForCausalLM"}  # fmt: skip


def registered_model_type(name: str) -> str | None:
    """The registered new-architecture model type a name means (``deepseekV3`` -> ``deepseek_v3``), or None."""
    key = "".join(ch for ch in str(name).lower() if ch.isalnum())
    for known in MCORE_MODEL_TYPES:
        if key in (known.replace("_", ""), known.replace("_", "") + "forcausallm"):
            return known
    return None


def check_trainable(loaded, cfg: dict) -> None:
    """Refuse, naming the key, a YAML no smoke can train: not a train or finetune run, or a legacy model with no class named.

    Raises:
        SmokeError: naming the key and the file.
    """
    run_mode = cfg.get("run_mode", "train")
    if isinstance(run_mode, str) and run_mode not in ("train", "finetune"):
        raise SmokeError(f"{loaded.where('run_mode')}: run_mode is {run_mode!r}; a smoke run trains, so give a train or finetune config")
    if uses_legacy(cfg) and not _model_class_named(cfg):
        raise SmokeError(
            f"{loaded.where('model')}: model.arch.type and model.model_config.type are empty, so mindformers has no model to build; "
            "name the model class (a template's 'please edit by hand' sections need filling in)"
        )
