"""The CPU rehearsal: Ascend-only kernels of mindformers (1.9, 2.0) replaced by plain MindSpore equivalents, in the smoke's child only.

mindformers' models call a handful of kernels that MindSpore's CPU backend
does not have (``Unsupported op [RmsNorm] on CPU`` and the like), and no
config key reaches some of them (the new-architecture layer specs hard-code the
fused norm and flash attention).  To train the user's own architecture class
on a laptop or a CI machine, the smoke's child swaps each for an equivalent
made of ordinary operations *before* the Trainer builds the network.  The
numerics are those of the unfused formulas, which is what a rehearsal of the
monitoring needs; nothing is changed on Ascend, and nothing here ever runs in
the user's kernel (importing this module changes nothing: :func:`apply` does).

Each replacement is a function that returns one line for the verdict, or None
when the module it patches is absent.  A replacement that builds a layer marks
itself reached when the network builds one (in ``__init__``, which runs in
Python in graph mode too): the verdict names only the replacements the model
used, never a MoE replacement for a dense model.  The files they patch are byte-identical
in mindformers 1.9, 2.0 and 2.1; the runner rehearses only the pairs the smoke
is tested with (:mod:`msnb.smoke.mindformers.tested_stack`) and says *not rehearsed* for
any other before starting anything.
"""

from __future__ import annotations

import importlib
import sys

from .device import CPU_WRAPPER

REACHED: set = set()  # the replacements whose layer the network built (their functions' names)


def reached(lines: list) -> list:
    """The ``(name, line)`` pairs :func:`apply` returned, kept where the replacement was reached or marks nothing."""
    return [line for name, line in lines if name not in _MARKED or name in REACHED]


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _overflow_wrapper() -> str | None:
    """MFTrainOneStepCell's overflow check falls into the Ascend branch (NPUGetFloatStatusV2) on CPU: use IsFinite."""
    # deferred: mindformers and MindSpore, imported only when apply() runs in the smoke's child
    from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
    from mindformers.wrapper import MFTrainOneStepCell
    from mindspore.nn.wrap.loss_scale import _ascend_grad_overflow

    def get_overflow_status(self, status, compute_output):
        return self._get_distributed_overflow_status_on_infnan_mode(_ascend_grad_overflow, compute_output)

    def __init__(self, *args, **kwargs):
        MFTrainOneStepCell.__init__(self, *args, **kwargs)
        REACHED.add("_overflow_wrapper")

    cls = type(CPU_WRAPPER, (MFTrainOneStepCell,), {"__init__": __init__, "get_overflow_status": get_overflow_status, "__module__": __name__})
    MindFormerRegister.register_cls(cls, module_type=MindFormerModuleType.WRAPPER, alias=CPU_WRAPPER)
    return f"runner_wrapper MFTrainOneStepCell -> {CPU_WRAPPER}: the overflow check uses IsFinite (NPUGetFloatStatusV2 is Ascend's)"


def _fused_rms_norm() -> str | None:
    norm = _module("mindformers.parallel_core.training_graph.transformer.norm")
    if norm is None or not hasattr(norm, "FusedRMSNorm"):
        return None

    class RMSNormForFused(norm.RMSNorm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            REACHED.add("_fused_rms_norm")

    norm.FusedRMSNorm = RMSNormForFused
    return "fused RmsNorm -> RMSNorm (the new-architecture layer specs hard-code the fused kernel, whatever fused_norm says)"


def _outer() -> str | None:
    rope = _module("mindformers.parallel_core.training_graph.base_models.common.embeddings.rotary_pos_embedding")
    if rope is None or not hasattr(rope, "Outer"):
        return None
    from mindspore import nn, ops  # deferred: MindSpore (the mindspore extra)

    class Outer(nn.Cell):
        """x outer y as a reshape and a broadcast multiply."""

        def __init__(self):
            super().__init__()
            REACHED.add("_outer")

        def construct(self, x, y):
            return ops.reshape(x, (-1, 1)) * ops.reshape(y, (1, -1))

        def shard(self, *args, **kwargs):
            return self

    rope.Outer = Outer
    return "Outer in RoPE -> reshape-multiply"


def _flash_attention() -> str | None:
    fa = _module("mindformers.parallel_core.training_graph.transformer.flash_attention")
    if fa is None or not hasattr(fa, "FlashAttentionScore"):
        return None
    # deferred: MindSpore (the mindspore extra)
    import mindspore as ms
    from mindspore import nn, ops

    class SoftmaxAttention(nn.Cell):
        """softmax(Q K^T * scale + mask * -1e4) V, in float32; mask 1 means masked, as for FlashAttentionScore."""

        def __init__(self, head_num, keep_prob=1.0, scale_value=1.0, pre_tokens=2147483647, next_tokens=0, inner_precise=0, input_layout="BSH", sparse_mode=0):
            super().__init__()
            self.head_num, self.scale, self.layout = head_num, scale_value, input_layout
            # sparse modes 2 and 3 (mask compression) pass a fixed 2048 x 2048 causal mask; 4 a band: build the exact mask instead
            self.built_mask = sparse_mode in (2, 3, 4)
            self.pre_tokens = 2147483647 if sparse_mode in (2, 3) else pre_tokens
            self.next_tokens = 0 if sparse_mode in (2, 3) else next_tokens
            self.sparse_mode_right_down = sparse_mode == 3
            REACHED.add("_flash_attention")

        def _bnsd(self, x):
            if self.layout == "BSH":
                b, s, h = x.shape
                return ops.transpose(ops.reshape(x, (b, s, self.head_num, h // self.head_num)), (0, 2, 1, 3))
            if self.layout == "SBH":
                s, b, h = x.shape
                return ops.transpose(ops.reshape(x, (s, b, self.head_num, h // self.head_num)), (1, 2, 0, 3))
            return x

        def construct(self, query, key, value, real_shift=None, drop_mask=None, padding_mask=None, attn_mask=None, prefix=None,
                      actual_seq_qlen=None, actual_seq_kvlen=None):  # fmt: skip
            q, k, v = self._bnsd(query), self._bnsd(key), self._bnsd(value)
            if k.shape[1] != q.shape[1]:  # grouped-query attention: repeat the kv heads
                k = ops.repeat_interleave(k, q.shape[1] // k.shape[1], 1)
                v = ops.repeat_interleave(v, q.shape[1] // v.shape[1], 1)
            scores = ops.matmul(q.astype(ms.float32), ops.transpose(k.astype(ms.float32), (0, 1, 3, 2))) * self.scale
            if self.built_mask:
                sq, skv = q.shape[2], k.shape[2]
                i = ops.reshape(ops.arange(sq, dtype=ms.int32), (-1, 1)) + (skv - sq if self.sparse_mode_right_down else 0)
                j = ops.reshape(ops.arange(skv, dtype=ms.int32), (1, -1))
                masked = ops.logical_or(j - i > self.next_tokens, i - j > self.pre_tokens)
                scores = scores + masked.astype(ms.float32) * -10000.0
            elif attn_mask is not None:
                scores = scores + attn_mask.astype(ms.float32) * -10000.0
            out = ops.matmul(ops.softmax(scores, -1), v.astype(ms.float32)).astype(query.dtype)
            if self.layout == "BSH":
                b, n, s, d = out.shape
                out = ops.reshape(ops.transpose(out, (0, 2, 1, 3)), (b, s, n * d))
            elif self.layout == "SBH":
                b, n, s, d = out.shape
                out = ops.reshape(ops.transpose(out, (2, 0, 1, 3)), (s, b, n * d))
            return scores, scores, scores, out

        def shard(self, *args, **kwargs):
            return self

        def add_prim_attr(self, *args, **kwargs):
            return self

    fa.FlashAttentionScore = SoftmaxAttention
    return "FlashAttentionScore -> softmax attention (the training layer spec uses it even with use_flash_attention off, and rebuilds a compressed mask)"


def _compressed_mask() -> str | None:
    """With mask compression, CausalMaskGenerate refuses a sequence under 2048 (its fixed mask's size): build that mask anyway.

    Only the smoke's shrunk sequence is under 2048 (the real run's is what the config says); the fixed 2048 x 2048
    mask is what flash attention receives whatever the sequence, and the CPU rehearsal's softmax attention rebuilds
    the exact causal mask from the sequence length.
    """
    mg = _module("mindformers.parallel_core.training_graph.transformer.mask_generate")
    if mg is None or not hasattr(mg, "CausalMaskGenerate"):
        return None
    original = mg.CausalMaskGenerate.__init__

    def __init__(self, seq_length, *args, **kwargs):
        compressed = kwargs.get("use_attn_mask_compression", args[6] if len(args) > 6 else False)
        original(self, max(seq_length, 2048) if compressed else seq_length, *args, **kwargs)
        self.seq_length = seq_length
        if compressed and seq_length < 2048:
            REACHED.add("_compressed_mask")

    mg.CausalMaskGenerate.__init__ = __init__
    return "CausalMaskGenerate: the compressed 2048 x 2048 mask built for the shrunk sequence (mindformers wants a sequence of 2048 or more)"


def _embedding_backward() -> str | None:
    layers = _module("mindformers.parallel_core.training_graph.tensor_parallel.layers")
    if layers is None or not hasattr(layers, "VocabParallelEmbedding"):
        return None
    from mindspore import ops  # deferred: MindSpore (the mindspore extra)

    def embedding_func(self, input_, weight):
        bs, seq_len = input_.shape
        out = ops.gather(weight, ops.reshape(input_, (bs * seq_len,)), 0)
        return ops.reshape(out, (bs, seq_len, weight.shape[1]))

    layers.VocabParallelEmbedding.embedding_func = embedding_func
    built = layers.VocabParallelEmbedding.__init__

    def __init__(self, *args, **kwargs):
        built(self, *args, **kwargs)
        REACHED.add("_embedding_backward")

    layers.VocabParallelEmbedding.__init__ = __init__
    # mindformers' Morph types the lookup's output as the token ids (int32); the Gather above returns the weights' dtype,
    # which is what an embedding dropout (hidden_dropout > 0) downstream must see
    layers.embedding_infer_dtype = lambda *args: args[1]
    return "embedding lookup -> Gather, typed as the weights (EmbeddingDenseBackward is Ascend's)"


def _pynative_models() -> str | None:
    """The PyNative model classes need the absent ``hyper_parallel`` package: train the graph classes eagerly."""
    done = []
    q3 = _module("mindformers.models.qwen3.modeling_qwen3")
    if q3 is not None and getattr(q3, "PyNativeQwen3ForCausalLM", 0) is None:
        q3.PyNativeQwen3ForCausalLM = q3.TrainingQwen3ForCausalLM
        done.append("Qwen3")
    ds3 = _module("mindformers.models.deepseek3.modeling_deepseek_v3")
    if ds3 is not None and getattr(ds3, "PyNativeDeepseekV3ForCausalLM", 0) is None:
        train = _module("mindformers.models.deepseek3.modeling_deepseek_v3_train")
        if train is not None:
            ds3.PyNativeDeepseekV3ForCausalLM = train.TrainingDeepseekV3ForCausalLM
            done.append("DeepseekV3")
    return f"PyNative {', '.join(done)} -> the graph-training classes run eagerly (hyper_parallel is absent)" if done else None


def _pynative_ops() -> str | None:
    """Morph raises outside graph mode; OneHotExt and ZerosLikeExt have no CPU kernel."""
    # deferred: MindSpore (the mindspore extra)
    from mindspore import ops
    from mindspore.ops.operations.debug_ops import Morph

    Morph.__call__ = lambda self, *args: self.__morph_fn__(*args)
    loss = _module("mindformers.parallel_core.training_graph.loss_func")
    if loss is not None:
        loss.OneHotExt = ops.OneHot
        loss.ZerosLikeExt = ops.ZerosLike
    return "Morph runs its function eagerly; OneHotExt -> OneHot, ZerosLikeExt -> ZerosLike"


def _moe_router() -> str | None:
    router = _module("mindformers.parallel_core.training_graph.transformer.moe.router")
    if router is None or not hasattr(router, "TopkExt"):
        return None
    from mindspore import ops  # deferred: MindSpore (the mindspore extra)

    def topk():  # called where the router builds its layers
        REACHED.add("_moe_router")
        return ops.TopK(sorted=True)

    router.TopkExt = topk
    return "TopkExt in the MoE router -> TopK"


def _glm2_norm() -> str | None:
    glm2 = _module("mindformers.models.glm2.glm2_modules")
    if glm2 is None or not hasattr(glm2, "ChatGLM2RMSNorm"):
        return None
    from mindspore.ops import operations as P  # deferred: MindSpore (the mindspore extra)

    def unfused() -> bool:  # asked where ChatGLM2RMSNorm builds itself
        REACHED.add("_glm2_norm")
        return False

    glm2.check_rmsnorm_big_kernel_valid = unfused
    glm2.ChatGLM2RMSNorm.cast = P.Cast()  # the unfused branch uses a cast only the fused branch defines
    return "ChatGLM2RMSNorm: the unfused formula (its fused RmsNorm is Ascend's)"


def _replace_class(module, name: str, replacement) -> list:
    """Swap ``module.name`` and every already imported mindformers module's own reference to the same class."""
    original = getattr(module, name)
    setattr(module, name, replacement)
    holders = [module.__name__]
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith("mindformers.") and mod is not module and getattr(mod, name, None) is original:
            setattr(mod, name, replacement)
            holders.append(mod_name)
    return holders


# the new-architecture modules that import Dropout by name (imported before the swap, so each gets the CPU class)
_DROPOUT_USERS = (
    "mindformers.parallel_core.training_graph.transformer.transformer_layer",
    "mindformers.parallel_core.training_graph.base_models.common.embeddings.language_model_embedding",
    "mindformers.parallel_core.training_graph.tensor_parallel.lora_layers",
)


def _dropout() -> str | None:
    """mindformers' Dropout calls DropoutExt (Ascend's; LoRA's lora_dropout, hidden and embedding dropout): use Dropout."""
    mod = _module("mindformers.parallel_core.training_graph.transformer.dropout")
    if mod is None or not hasattr(mod, "Dropout"):
        return None
    for name in _DROPOUT_USERS:
        _module(name)
    # deferred: MindSpore (the mindspore extra)
    from mindspore import nn
    from mindspore.ops import operations as P

    class Dropout(nn.Cell):
        """Inverted dropout with MindSpore's Dropout primitive (it has a CPU kernel); identity when p is 0 or not training."""

        def __init__(self, drop_prob: float = 0.5):
            super().__init__()
            self.p = drop_prob
            self.use_dropout = drop_prob != 0
            self.dropout = P.Dropout(keep_prob=1.0 - drop_prob) if self.use_dropout else None
            if self.use_dropout:
                REACHED.add("_dropout")

        def construct(self, x):
            if not self.training or not self.use_dropout:
                return x
            out, _ = self.dropout(x)
            return out

        def shard(self, strategy):
            return self

    _replace_class(mod, "Dropout", Dropout)
    return "Dropout (LoRA's lora_dropout, hidden and embedding dropout) -> MindSpore's Dropout (DropoutExt is Ascend's)"


def _fused_swiglu() -> str | None:
    """``hidden_act: fusedswiglu`` (or swiglu with bias_swiglu_fusion) builds the Swiglu kernel, Ascend's: split, SiLU, multiply."""
    act = _module("mindformers.parallel_core.training_graph.activation")
    if act is None or "fusedswiglu" not in getattr(act, "ACTIVATION_MAP", {}):
        return None
    from mindspore import nn, ops  # deferred: MindSpore (the mindspore extra)

    class _SwigluFormula(nn.Cell):
        """silu(x[..., :h/2]) * x[..., h/2:], the fused kernel's formula; shard and add_prim_attr accepted and ignored."""

        def construct(self, x, dim=-1):
            x_1, x_2 = ops.chunk(x, 2, dim)
            return ops.silu(x_1) * x_2

        def shard(self, *args, **kwargs):
            return self

        def add_prim_attr(self, *args, **kwargs):
            return self

        def recompute(self, *args, **kwargs):
            return self

    class FusedSwiGlu(nn.Cell):
        def __init__(self, config=None):
            super().__init__()
            self.swiglu = _SwigluFormula()
            REACHED.add("_fused_swiglu")

        def construct(self, x, dim=-1):
            return self.swiglu(x, dim)

        def shard(self, config):
            return self

        def sharding_propagation(self, config):
            return self

    act.FusedSwiGlu = FusedSwiGlu
    act.ACTIVATION_MAP["fusedswiglu"] = FusedSwiGlu
    return "FusedSwiGlu (hidden_act fusedswiglu, bias_swiglu_fusion) -> split, SiLU, multiply (Swiglu is Ascend's)"


def _qwen3_moe_dense() -> str | None:
    """Qwen3-MoE builds every layer with the experts (no first_k_dense_replace): build its layer spec dense on CPU.

    The MoE dispatcher (GroupedMatmul, CumsumExt, SortExt, the token permutation) has no CPU kernel; each layer then
    gets the dense MLP of ``intermediate_size``, so the router, the experts and their auxiliary loss are not rehearsed.
    """
    train = _module("mindformers.models.qwen3_moe.modeling_qwen3_moe_train")
    if train is None or not hasattr(train, "get_gpt_layer_local_spec"):
        return None
    spec = train.get_gpt_layer_local_spec

    def dense_spec(*args, **kwargs):
        if kwargs.get("num_experts"):
            REACHED.add("_qwen3_moe_dense")
        kwargs["num_experts"] = None
        return spec(*args, **kwargs)

    train.get_gpt_layer_local_spec = dense_spec
    return "Qwen3-MoE layers built dense (the MoE dispatcher has no CPU kernel: router, experts and aux loss not rehearsed)"


def _data_parallel_state() -> str | None:
    """Several CPU workers: the model's parallel state over all of them, as mindformers' data-parallel mode means.

    CPU has no semi-auto parallel (``Invalid backend: CPU``), so msrun's workers run mindformers' data-parallel mode,
    in which the Trainer resets ``parallel_config.data_parallel`` to 1 (the wrapper all-reduces the gradients); the
    new-architecture GPTModel then builds its parallel state from that 1 and refuses the N ranks
    (``total_model_size(1) != world_size(N)``). Each rank holding the whole model is a data-parallel group of N.
    """
    gpt = _module("mindformers.parallel_core.training_graph.base_models.gpt.gpt_model")
    if gpt is None or not hasattr(gpt, "initialize_model_parallel"):
        return None
    # deferred: MindSpore (the mindspore extra), in the training child only
    from mindspore.communication import get_group_size
    from mindspore.context import ParallelMode
    from mindspore.parallel._utils import _get_parallel_mode

    original = gpt.initialize_model_parallel

    def initialize_model_parallel(*args, **kwargs):
        sizes = [kwargs.get(k, 1) or 1 for k in ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")]
        world = get_group_size()
        if not args and _get_parallel_mode() == ParallelMode.DATA_PARALLEL and world > 1 and sizes == [1, 1, 1, 1]:
            kwargs["data_parallel_size"] = world
            REACHED.add("_data_parallel_state")
        return original(*args, **kwargs)

    gpt.initialize_model_parallel = initialize_model_parallel
    return (
        "the model's parallel state: data_parallel 1 -> the workers (CPU has no semi-auto parallel; in data-parallel mode mindformers resets "
        "data_parallel to 1, which the new-architecture model refuses beside several ranks); its semi-auto sharding is not rehearsed"
    )


LEGACY = (_overflow_wrapper,)
LEGACY_GLM = (_glm2_norm,)
NEW_ARCHITECTURE = (
    _overflow_wrapper,
    _fused_rms_norm,
    _outer,
    _flash_attention,
    _embedding_backward,
    _moe_router,
    _dropout,
    _fused_swiglu,
    _compressed_mask,
    _qwen3_moe_dense,
    _data_parallel_state,
)
PYNATIVE_ONLY = (_pynative_models, _pynative_ops)
# the replacements that mark themselves reached (the others are said whenever they were made)
_MARKED = frozenset(
    f.__name__
    for f in (_overflow_wrapper, _fused_rms_norm, _outer, _flash_attention, _compressed_mask, _embedding_backward)
    + (_moe_router, _glm2_norm, _dropout, _fused_swiglu, _qwen3_moe_dense, _data_parallel_state)
)


def apply(*, legacy: bool, family: str = "", pynative: bool = False) -> list[str]:
    """Replace the Ascend-only kernels the run's model class reaches, in this process; call before the Trainer builds it.

    Args:
        legacy: a legacy model (``use_legacy: True``): only the overflow check (and ChatGLM2's norm) need replacing.
        family: the model's class or name (a GLM model gets ChatGLM2's norm replaced).
        pynative: whether the run is in PyNative mode (new-architecture models need three more replacements).

    Returns:
        ``(name, line)`` per replacement made; :func:`reached` keeps those the network used, for the verdict's
        ``cpu_rehearsal`` check.
    """
    if legacy:
        steps = LEGACY + (LEGACY_GLM if "glm" in family.lower() else ())
    else:
        steps = NEW_ARCHITECTURE + (PYNATIVE_ONLY if pynative else ())
    return [(step.__name__, line) for step, line in ((step, step()) for step in steps) if line]


__all__ = ["apply", "reached"]
