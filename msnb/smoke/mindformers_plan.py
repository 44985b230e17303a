"""What a smoke run of a mindformers run YAML trains: the config's own model, shrunk, its outputs in the scratch directory.

A mindformers run YAML describes a model for a cluster: 64 layers x 5120
hidden, 4096 tokens, model and pipeline parallel over 16 cards.  The smoke
trains *that architecture class* through mindformers' own ``Trainer`` with the
config's own callbacks, at a size that steps in milliseconds, so that the
monitoring chain (MFLossMonitor, TrainingStateMonitor, SummaryMonitor,
CheckpointMonitor, TensorBoard) is proven in a minute instead of discovered
broken after hours in a queue.

This module is plain Python over the loaded YAML: it decides what is shrunk,
what is redirected into the scratch directory and what is turned off, and it
says each of those things in words for the verdict.  It imports neither
MindSpore nor mindformers; :mod:`msnb.smoke.mindformers_worker` does, in the
child.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ..config.monitor_schema import MINDFORMERS_MONITOR_KEYS
from ..config.run_config import is_mindformers_run
from ..errors import SmokeError
from .memory_estimate import estimate

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
# monitor_config formats that rely on TensorDump, which has no CPU kernel (and the substitutes that do work on CPU)
TENSORDUMP_FORMATS = ("local_loss_format", "local_norm_format", "device_local_norm_format")
CPU_SUBSTITUTES = "monitor_config.device_local_loss_format (per-device loss) and runner_wrapper.local_norm: True (per-parameter norms in the log)"
# the wrapper the CPU rehearsal registers (mindformers' MFTrainOneStepCell with the IsFinite overflow check)
CPU_WRAPPER = "MsnbCPUTrainOneStepCell"
# callbacks that write what a smoke reads, and the name each is known by in the verdict
KNOWN_CALLBACKS = ("MFLossMonitor", "SummaryMonitor", "CheckpointMonitor", "TrainingStateMonitor")
_DATA_PATH_KEYS = ("data_path", "dataset_dir", "path", "data_dir")


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
    config: dict  # the config the child loads (paths are filled in by child_config)
    changes: list = field(default_factory=list)  # one line per change, each with its reason
    tensordump_off: list = field(default_factory=list)  # monitor_config keys turned off (no TensorDump kernel on CPU)
    callbacks: list = field(default_factory=list)  # the callbacks that will run, by type
    monitor_formats: dict = field(default_factory=dict)  # TrainingStateMonitor's *_format keys that are on, with their targets
    data: str = "synthetic"  # "synthetic" or "config"
    data_note: str = ""
    columns: list = field(default_factory=list)
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


def _set(node: dict, key: str, value, changes: list, why: str, path: str) -> None:
    if node.get(key) != value:
        changes.append(f"{path + '.' if path else ''}{key}: {node.get(key)!r} -> {value!r} ({why})")
        node[key] = value


def _first(node: dict, names) -> str | None:
    return next((n for n in names if n in node), None)


# where a legacy config class keeps a dimension the YAML may leave to the class's default (a 7B default is no smoke)
_LEGACY_DEFAULT_KEYS = {
    "LlamaConfig": {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_heads", "vocab": "vocab_size", "seq": "seq_length"},
    "ChatGLM2Config": {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_attention_heads", "vocab": "padded_vocab_size", "seq": "seq_length",
                       "ffn": "ffn_hidden_size", "head_dim": "kv_channels"},
}  # fmt: skip


def _shrink_model(mc: dict, plan_changes: list, keep_vocab: bool) -> tuple[dict, dict]:
    before, after = {}, {}
    for dim, key in _LEGACY_DEFAULT_KEYS.get(mc.get("type"), {}).items():
        if _first(mc, _DIMENSIONS[dim]) is None and not (dim == "vocab" and keep_vocab):
            mc[key] = SMALL[dim]
            before[dim], after[dim] = "its class default", SMALL[dim]
    for dim, names in _DIMENSIONS.items():
        key = _first(mc, names)
        if key is None:
            continue
        before[dim] = mc[key]
        if dim == "vocab" and keep_vocab:
            after[dim] = mc[key]
            continue
        small = SMALL[dim]
        if dim == "kv_heads" and key == "multi_query_group_num":
            small = 1 if mc.get("multi_query_attention") else SMALL["kv_heads"]
        mc[key] = small
        after[dim] = small
    if "head_dim" not in before and "heads" in before and "hidden" in before:
        after["head_dim"] = SMALL["hidden"] // SMALL["heads"]
    for key in _POSITIONS:
        if key in mc:
            mc[key] = 2 * SMALL["seq"]  # at least the sequence length
    for key, value in _MLA_AND_MOE.items():
        if key in mc and mc[key] is not None:
            mc[key] = value
    if mc.get("n_routed_experts"):  # DeepSeek's router groups default to 8, which must divide the (now 4) experts
        mc["n_group"], mc["topk_group"] = 1, 1
    for key in _MTP:
        if isinstance(mc.get(key), int) and mc[key] > 1:
            mc[key] = 1
    if "offset" in mc:
        mc["offset"] = 0  # per pipeline stage in the shipped configs; one stage here
    if "batch_size" in mc:
        mc["batch_size"] = SMALL["batch"]
    changed = ", ".join(f"{d} {before[d]} -> {after[d]}" for d in before if before[d] != after.get(d))
    if changed:
        plan_changes.append(f"model.model_config: {changed} (shrunk: the same architecture class at a size that trains in seconds)")
    return before, after


def _moe_dense(mc: dict, changes: list) -> None:
    """MoE dispatch (CumsumExt, SortExt, GroupedMatmul...) has no CPU kernel: every layer dense."""
    layers = mc.get(_first(mc, _DIMENSIONS["layers"]) or "", None)
    if "first_k_dense_replace" in mc and isinstance(layers, int):
        _set(mc, "first_k_dense_replace", layers, changes, "MoE layers made dense: the MoE dispatcher has no CPU kernel", "model.model_config")
    elif any(mc.get(k) for k in ("num_experts", "num_moe_experts", "n_routed_experts", "moe_layer_freq")):
        raise SmokeError(
            "model.model_config: this MoE model cannot be rehearsed on the CPU backend (the MoE dispatcher has no CPU kernel and the config has "
            "no first_k_dense_replace to make every layer dense); run the smoke on Ascend"
        )


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


def _sizes_from_pretrained_dir(cfg: dict, mc: dict, legacy: bool, changes: list, loaded) -> None:
    """A finetune config takes its model's sizes from ``pretrained_model_dir``'s config.json: fill them in when that folder is not here.

    Without the folder mindformers fails at start (``config.json does not exist``); the smoke needs only the
    architecture class, which ``trainer.model_name`` (or ``model_config.model_type``) names.
    """
    if legacy or _first(mc, _DIMENSIONS["layers"]) is not None:
        return
    pretrained = cfg.get("pretrained_model_dir")
    here = isinstance(pretrained, str) and pretrained and (Path(pretrained).expanduser() / "config.json").is_file()
    if here:
        return
    name = mc.get("model_type") or ((cfg.get("trainer") or {}).get("model_name") if isinstance(cfg.get("trainer"), dict) else None)
    if not isinstance(name, str) or not name or name.lower() in ("llm", "general"):
        where = loaded.where("model.model_config")
        raise SmokeError(
            f"{where}: model.model_config gives no model sizes and pretrained_model_dir ({pretrained or 'unset'}) has no config.json here; "
            "point pretrained_model_dir at a Hugging Face model folder, or give model_type and the sizes in model.model_config"
        )
    mc.setdefault("model_type", name.lower())
    mc.setdefault("architectures", [f"{name}ForCausalLM"])
    for key, dim in _MCORE_SIZES.items():
        mc.setdefault(key, SMALL[dim])
    mc.setdefault("max_position_embeddings", 2 * SMALL["seq"])
    cfg["pretrained_model_dir"] = ""
    changes.append(
        f"pretrained_model_dir: {pretrained!r} is not on this machine, so model.model_config got {mc['model_type']}'s class "
        f"({mc['architectures'][0]}) at the smoke's sizes instead of that folder's config.json"
    )


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
    """Turn a user's mindformers run YAML into the config a smoke child trains.

    Args:
        loaded: the :class:`~msnb.config.LoadedConfig` of the run YAML (base_config and ``${}`` resolved).
        device: "Ascend", "GPU" or "CPU": where it will train.
        shrink: "auto" (always on CPU and GPU, on Ascend when the model would not fit one card), "always" or "never".
        steps: how many steps to train.
        batch_size: the batch size (default: 2 when shrunk, else the config's).
        lr: the learning rate (default: 5e-3 when shrunk, so a small model learns within a smoke run; else the config's).
        mode: "graph" or "pynative" (default: the config's ``context.mode``).
        data: "auto" (the config's dataset when its files exist here, else synthetic), "config" or "synthetic".
        sink_size: rehearse sink mode with this sink size (default: sink mode off).
        workers: data-parallel workers (more than 1: mindformers' own data parallelism, started by msrun).

    Returns:
        The plan; ``config`` still has placeholder paths (see :func:`child_config`).

    Raises:
        SmokeError: a config that no smoke run can train (not a training config, an MoE model on CPU, a missing dataset
            with ``data="config"``), naming the key and the file.
    """
    source = Path(loaded.path).name
    cfg = copy.deepcopy(loaded.data)
    run_mode = cfg.get("run_mode", "train")
    if isinstance(run_mode, str) and run_mode not in ("train", "finetune"):
        raise SmokeError(f"{loaded.where('run_mode')}: run_mode is {run_mode!r}; a smoke run trains, so give a train or finetune config")
    legacy = _is_legacy(cfg)
    changes: list = []
    mc = cfg["model"]["model_config"]
    big = estimate(mc, batch=1, seq=1).total  # weights, gradients and Adam's moments: the floor of its training memory
    do_shrink = shrink == "always" or (shrink == "auto" and (device != "Ascend" or big > 24e9))
    train = cfg.get("train_dataset") if isinstance(cfg.get("train_dataset"), dict) else {}
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
    _sizes_from_pretrained_dir(cfg, mc, legacy, changes, loaded)
    before, after = ({}, {})
    if do_shrink:
        before, after = _shrink_model(mc, changes, keep_vocab=use_config_data)
    else:
        before = {d: mc.get(_first(mc, names)) for d, names in _DIMENSIONS.items() if _first(mc, names)}
        after = dict(before)
    runner = cfg.setdefault("runner_config", {})
    bs = batch_size or (SMALL["batch"] if do_shrink else runner.get("batch_size") or SMALL["batch"])
    _set(runner, "batch_size", bs, changes, "the smoke's batch", "runner_config")
    if "batch_size" in train:
        train["batch_size"] = bs
    if "batch_size" in mc:
        mc["batch_size"] = bs
    _set(runner, "epochs", 1, changes, f"{steps} steps of one pass over the smoke's data", "runner_config")
    runner["sink_mode"] = bool(sink_size)
    if sink_size:
        runner["sink_size"] = int(sink_size)
    if (runner.get("gradient_accumulation_steps") or 1) != 1:
        _set(runner, "gradient_accumulation_steps", 1, changes, "one step per batch", "runner_config")
    # one device, or N data-parallel workers: every other parallel degree 1
    if workers > 1:
        _set(cfg, "use_parallel", True, changes, f"{workers} data-parallel workers under msrun", "")
    else:
        _set(cfg, "use_parallel", False, changes, "one device", "")
    pc = cfg.setdefault("parallel_config", {})
    degrees = []
    for key in ("data_parallel", "model_parallel", "pipeline_stage", "context_parallel", "expert_model_parallel", "micro_batch_num"):
        if key in pc and pc[key] != 1:
            degrees.append(f"{key} {pc[key]} -> 1")
            pc[key] = 1
    if pc.get("use_seq_parallel"):
        degrees.append("use_seq_parallel off")
    pc["use_seq_parallel"] = False
    if workers > 1:
        pc["data_parallel"] = workers
        degrees = [d for d in degrees if not d.startswith("data_parallel")] + [f"data_parallel {workers}"]
    if degrees:
        changes.append(f"parallel_config: {', '.join(degrees)} ({'data parallel only' if workers > 1 else 'one device'})")
    par = cfg.setdefault("parallel", {})
    par["parallel_mode"] = 0  # data parallel (one device: no communication at all)
    if workers > 1:
        par["full_batch"] = False  # each worker feeds its own batches
    par["enable_alltoall"] = False
    par["enable_parallel_optimizer"] = False
    par.pop("dataset_strategy", None)
    if isinstance(cfg.get("recompute_config"), dict):
        for key in ("recompute", "select_recompute", "parallel_optimizer_comm_recompute", "mp_comm_recompute"):
            if key in cfg["recompute_config"]:
                cfg["recompute_config"][key] = False
    cfg["micro_batch_interleave_num"] = 1
    # a smoke trains from scratch: no production checkpoint is loaded or resumed
    for key, value in (("load_checkpoint", ""), ("resume_training", False), ("auto_trans_ckpt", False), ("src_strategy_path_or_dir", ""), ("profile", False)):
        if cfg.get(key) not in (None, value, "", False):
            changes.append(f"{key}: {cfg[key]!r} -> {value!r} (a smoke trains from scratch, writing nothing outside its directory)")
        cfg[key] = value
    ctx = cfg.setdefault("context", {})
    ctx["device_target"] = device
    if mode is not None:
        ctx["mode"] = 0 if mode == "graph" else 1
    ctx.pop("save_graphs_path", None)
    ctx["save_graphs"] = False
    if device != "Ascend":
        for key in ("max_device_memory", "ascend_config", "memory_optimize_level"):
            ctx.pop(key, None)
        for key in _DTYPE_KEYS:
            if key in mc and mc[key] in ("bfloat16", "float16"):
                mc[key] = "float32"
        if any(k in mc for k in _DTYPE_KEYS):
            changes.append(f"model.model_config dtypes: float32 on {device} (bfloat16/float16 kernels are Ascend's)")
        llama = legacy and (mc.get("type") == "LlamaConfig" or _model_family(cfg).lower().startswith("llama"))
        for key, value, why in (
            ("use_flash_attention", False, "flash attention is an Ascend kernel"),
            ("fused_rms_norm", False, "the fused RmsNorm is an Ascend kernel"),
        ):
            if key in mc or llama:  # LlamaConfig's defaults are the fused kernels
                _set(mc, key, value, changes, why, "model.model_config")
        if llama or legacy and "use_rope_slice" in mc:
            _set(mc, "use_rope_slice", True, changes, "the default rotate_half uses a broadcast BatchMatMul the CPU backend rejects", "model.model_config")
        if device == "CPU":
            _moe_dense(mc, changes)
    # learning rate: a shrunk model learns at a small model's rate within a smoke run
    sched = cfg.get("lr_schedule") if isinstance(cfg.get("lr_schedule"), dict) else None
    use_lr = lr if lr is not None else (5e-3 if do_shrink else None)
    if sched is not None and use_lr is not None:
        _set(sched, "learning_rate", float(use_lr), changes, "--lr" if lr is not None else "a shrunk model's learning rate, which --lr sets", "lr_schedule")
        for key in ("lr_end", "min_lr", "end_learning_rate"):
            if isinstance(sched.get(key), (int, float)) and sched[key] > use_lr:
                sched[key] = float(use_lr)
        if "total_steps" in sched:
            sched["total_steps"] = -1
    if isinstance(cfg.get("optimizer"), dict) and lr is not None and "learning_rate" in cfg["optimizer"]:
        cfg["optimizer"]["learning_rate"] = float(lr)
    # the overflow check: MFTrainOneStepCell's falls into the Ascend branch on CPU
    wrapper = cfg.setdefault("runner_wrapper", {"type": "MFTrainOneStepCell", "scale_sense": 1.0, "use_clip_grad": True})
    if device == "CPU" and wrapper.get("type", "MFTrainOneStepCell") == "MFTrainOneStepCell":
        wrapper["type"] = CPU_WRAPPER
    if cfg.get("tensorboard") is not None and "scale_sense" not in wrapper:
        wrapper["scale_sense"] = 1.0  # mindformers' TensorBoard argument writer reads it (KeyError without)
        changes.append("runner_wrapper.scale_sense: 1.0 (mindformers' TensorBoard config writer needs it when a tensorboard section exists)")
    # monitoring: TensorDump has no CPU kernel; msnb's own monitor_config keys are not mindformers'
    tensordump_off: list = []
    monitor = cfg.get("monitor_config") if isinstance(cfg.get("monitor_config"), dict) else None
    formats: dict = {}
    if monitor is not None:
        for key in [k for k in monitor if k not in MINDFORMERS_MONITOR_KEYS]:
            monitor.pop(key)  # mindformers raises KeyError on keys it does not know
        if device == "CPU":
            for key in TENSORDUMP_FORMATS:
                if monitor.get(key):
                    tensordump_off.append(key)
                    monitor[key] = None
            monitor["dump_path"] = ""
        if monitor.get("monitor_on"):
            formats = {k: v for k, v in monitor.items() if k.endswith("_format") and v}
    callbacks = [c.get("type") for c in cfg.get("callbacks") or [] if isinstance(c, dict) and c.get("type")]
    if monitor is not None and monitor.get("monitor_on") and "TrainingStateMonitor" not in callbacks:
        callbacks.append("TrainingStateMonitor")
    columns = _columns(cfg, legacy)
    if use_config_data:
        data_note = "the config's own dataset (" + ", ".join(p for _, p in paths) + ")"
    else:
        why = "--data synthetic" if data == "synthetic" else ("its dataset is not on this machine" if paths else "the config names no dataset files")
        data_note = f"synthetic token ids ({why}): columns {', '.join(columns)}, a counting pattern a model can learn"
        train["num_parallel_workers"] = 1
        train["python_multiprocessing"] = False
    cores = os.cpu_count() or 1
    if isinstance(train.get("num_parallel_workers"), int) and train["num_parallel_workers"] > cores:
        changes.append(f"train_dataset.num_parallel_workers: {train['num_parallel_workers']} -> {cores} (this machine's cores; MindSpore refuses more)")
        train["num_parallel_workers"] = cores
    if isinstance(train.get("data_loader"), dict) and isinstance(train["data_loader"].get("config"), dict) and "seq_length" in train["data_loader"]["config"]:
        train["data_loader"]["config"]["seq_length"] = after.get("seq", mc.get("seq_length"))
    if isinstance(cfg.get("train_dataset_task"), dict):
        cfg["train_dataset_task"]["dataset_config"] = train  # the YAML anchor the two share
    for dropped in ("eval_dataset", "eval_dataset_task", "do_eval"):
        cfg.pop(dropped, None)
    return ModelPlan(
        family=_model_family(cfg),
        legacy=legacy,
        source=source,
        shrunk=do_shrink,
        before=before,
        after=after,
        config=cfg,
        changes=changes,
        tensordump_off=tensordump_off,
        callbacks=callbacks,
        monitor_formats=formats,
        data="config" if use_config_data else "synthetic",
        data_note=data_note,
        columns=columns,
        tensorboard=isinstance(cfg.get("tensorboard"), dict),
        lr=use_lr,
        workers=workers,
    )


def child_config(plan: ModelPlan, workdir: Path, summary: Path) -> dict:
    """The plan's config with every output inside the smoke's directory.

    Args:
        plan: what :func:`plan_mindformers` returned.
        workdir: the scratch directory (the child's working directory: mindformers writes ``./output/log`` there).
        summary: where SummaryMonitor writes with one worker (the scratch ``summary`` folder or the user's
            ``--summary-dir``); with several, each rank writes ``output/summary/rank_N`` (see :func:`summary_root`).

    Returns:
        A new config dict: ``output_dir``, TensorBoard, SummaryMonitor, CheckpointMonitor and the dump path redirected.
    """
    cfg = copy.deepcopy(plan.config)
    out = workdir / "output"
    cfg["output_dir"] = str(out)
    if isinstance(cfg.get("tensorboard"), dict):
        cfg["tensorboard"]["tensorboard_dir"] = str(out / "tensorboard")
    for cb in cfg.get("callbacks") or []:
        if not isinstance(cb, dict):
            continue
        if cb.get("type") == "SummaryMonitor":
            # one worker: the smoke's summary folder; several: mindformers' own output_dir/summary/rank_N (one folder a rank)
            cb["summary_dir"] = str(summary) if plan.workers == 1 else None
        elif cb.get("type") == "CheckpointMonitor":
            cb.pop("directory", None)  # under output_dir/checkpoint
            cb["save_checkpoint_steps"] = max(1, min(int(cb.get("save_checkpoint_steps") or 1), 10))
        elif cb.get("type") == "ProfileMonitor":
            cb["output_path"] = str(out / "profile")
    monitor = cfg.get("monitor_config")
    if isinstance(monitor, dict) and monitor.get("dump_path"):
        monitor["dump_path"] = str(out / "dump")
    par = cfg.get("parallel")
    if isinstance(par, dict) and isinstance(par.get("strategy_ckpt_config"), dict):
        par["strategy_ckpt_config"]["save_file"] = str(out / "strategy" / "ckpt_strategy.ckpt")
    if isinstance(cfg.get("checkpoint"), dict) and "save_path" in cfg["checkpoint"]:
        cfg["checkpoint"]["save_path"] = str(out / "checkpoint")
    return cfg


def summary_root(plan: ModelPlan, workdir: Path, summary: Path) -> Path:
    """Where the run's SummaryMonitor files are: the smoke's summary folder, or ``output/summary`` with several workers."""
    return summary if plan.workers == 1 else workdir / "output" / "summary"


__all__ = ["summary_root", "PINNED_MINDFORMERS", "ModelPlan", "is_mindformers_run", "installed_mindformers", "plan_mindformers", "child_config"]
