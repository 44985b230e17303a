"""What a mindformers config needs to train on this device as a smoke: parallelism off, dtypes, attention, MoE
layers dense, TensorDump metrics off on CPU (each a ``rehearse`` or ``shrink`` change, said in the verdict).
"""

from __future__ import annotations

from ...errors import NotRehearsed
from .changes import ISOLATE, REHEARSE, SHRINK, Edits
from .family import MC, first_key
from .sizes import DIMENSIONS

_DTYPE_KEYS = ("compute_dtype", "param_init_type", "params_dtype", "layernorm_compute_type", "layernorm_compute_dtype", "softmax_compute_type",
               "softmax_compute_dtype", "rotary_dtype", "router_dense_type")  # fmt: skip


# the dtype keys every new-architecture model_config accepts (mindformers' TransformerConfig)
_MCORE_DTYPE_KEYS = ("params_dtype", "compute_dtype", "layernorm_compute_dtype", "softmax_compute_dtype", "rotary_dtype")


# monitor_config formats that rely on TensorDump, which has no CPU kernel (and the substitutes that do work on CPU)
TENSORDUMP_FORMATS = ("local_loss_format", "local_norm_format", "device_local_norm_format")


CPU_SUBSTITUTES = "monitor_config.device_local_loss_format (per-device loss) and runner_wrapper.local_norm: True (per-parameter norms in the log)"


# the wrapper the CPU rehearsal registers (mindformers' MFTrainOneStepCell with the IsFinite overflow check)
CPU_WRAPPER = "MsnbCPUTrainOneStepCell"


_MOE_KEYS = ("num_experts", "num_moe_experts", "n_routed_experts", "moe_layer_freq", "first_k_dense_replace")


def _is_moe(mc: dict) -> bool:
    model_type = str(mc.get("model_type") or "")
    return model_type == "deepseek_v3" or model_type.endswith("_moe") or any(mc.get(k) for k in _MOE_KEYS)


def moe_dense(ed: Edits, loaded) -> None:
    """The MoE layers' dispatch (GroupedMatmul, CumsumExt, SortExt, the token permutation) has no CPU kernel: every layer dense.

    ``first_k_dense_replace`` is mindformers' own switch (every new-architecture TransformerConfig reads it): equal
    to the layer count, each layer builds the dense MLP of ``intermediate_size`` instead of the routed experts, so the
    router, the experts and their auxiliary loss are not rehearsed (the change says so). Qwen3-MoE, whose layer spec
    ignores it, is built dense by the CPU rehearsal in the child.
    """
    mc = ed.node(MC)
    if not _is_moe(mc):
        return
    layers = mc.get(first_key(mc, DIMENSIONS["layers"]) or "", None)
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


def _no_cpu_attention(ed: Edits, loaded) -> None:
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


def parallel_off(ed: Edits, workers: int, legacy: bool, columns: list, device: str) -> None:
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


def on_this_device(ed: Edits, device: str, legacy: bool, family: str, mode: str | None, loaded) -> None:
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


def monitoring_on_device(ed: Edits, device: str) -> tuple[list, dict]:
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
