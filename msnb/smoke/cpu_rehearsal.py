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
when the module it patches is absent.  The files they patch are byte-identical
in mindformers 1.9, 2.0 and 2.1; the runner rehearses only the pairs the smoke
is tested with (:mod:`msnb.smoke.tested_stack`) and says *not rehearsed* for
any other before starting anything.
"""

from __future__ import annotations

import importlib

from .mindformers_plan import CPU_WRAPPER


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

    cls = type(CPU_WRAPPER, (MFTrainOneStepCell,), {"get_overflow_status": get_overflow_status, "__module__": __name__})
    MindFormerRegister.register_cls(cls, module_type=MindFormerModuleType.WRAPPER, alias=CPU_WRAPPER)
    return f"runner_wrapper MFTrainOneStepCell -> {CPU_WRAPPER}: the overflow check uses IsFinite (NPUGetFloatStatusV2 is Ascend's)"


def _fused_rms_norm() -> str | None:
    norm = _module("mindformers.parallel_core.training_graph.transformer.norm")
    if norm is None or not hasattr(norm, "FusedRMSNorm"):
        return None
    norm.FusedRMSNorm = norm.RMSNorm
    return "fused RmsNorm -> RMSNorm (the new-architecture layer specs hard-code the fused kernel, whatever fused_norm says)"


def _outer() -> str | None:
    rope = _module("mindformers.parallel_core.training_graph.base_models.common.embeddings.rotary_pos_embedding")
    if rope is None or not hasattr(rope, "Outer"):
        return None
    from mindspore import nn, ops  # deferred: MindSpore (the mindspore extra)

    class Outer(nn.Cell):
        """x outer y as a reshape and a broadcast multiply."""

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
            if attn_mask is not None:
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
    return "FlashAttentionScore -> softmax attention (the training layer spec uses it even with use_flash_attention off)"


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
    return "embedding lookup -> Gather (EmbeddingDenseBackward is Ascend's)"


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

    router.TopkExt = lambda: ops.TopK(sorted=True)
    return "TopkExt in the MoE router -> TopK"


def _glm2_norm() -> str | None:
    glm2 = _module("mindformers.models.glm2.glm2_modules")
    if glm2 is None or not hasattr(glm2, "ChatGLM2RMSNorm"):
        return None
    from mindspore.ops import operations as P  # deferred: MindSpore (the mindspore extra)

    glm2.check_rmsnorm_big_kernel_valid = lambda: False
    glm2.ChatGLM2RMSNorm.cast = P.Cast()  # the unfused branch uses a cast only the fused branch defines
    return "ChatGLM2RMSNorm: the unfused formula (its fused RmsNorm is Ascend's)"


LEGACY = (_overflow_wrapper,)
LEGACY_GLM = (_glm2_norm,)
NEW_ARCHITECTURE = (_overflow_wrapper, _fused_rms_norm, _outer, _flash_attention, _embedding_backward, _moe_router)
PYNATIVE_ONLY = (_pynative_models, _pynative_ops)


def apply(*, legacy: bool, family: str = "", pynative: bool = False) -> list[str]:
    """Replace the Ascend-only kernels the run's model class reaches, in this process; call before the Trainer builds it.

    Args:
        legacy: a legacy model (``use_legacy: True``): only the overflow check (and ChatGLM2's norm) need replacing.
        family: the model's class or name (a GLM model gets ChatGLM2's norm replaced).
        pynative: whether the run is in PyNative mode (new-architecture models need three more replacements).

    Returns:
        One line per replacement made, for the verdict's ``cpu_rehearsal`` check.
    """
    if legacy:
        steps = LEGACY + (LEGACY_GLM if "glm" in family.lower() else ())
    else:
        steps = NEW_ARCHITECTURE + (PYNATIVE_ONLY if pynative else ())
    return [line for line in (step() for step in steps) if line]


__all__ = ["apply"]
