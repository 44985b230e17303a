"""The pre-flight's child: mindformers' own startup checks on a run YAML at full size, on CPU, building no weights.

    python -m msnb.smoke.preflight_worker SPEC.json

Runs in a scratch directory (importing mindformers writes ``./output/log`` in
the current directory), never in the user's kernel.  Every check is
mindformers' own function called as its Trainer calls it; the only thing set by
hand is what those functions read about the launch: ``RANK_SIZE`` (the device
count, read by ``get_real_group_size`` when no communication is initialised),
``DEVICE_NUM_PER_NODE`` and the auto-parallel mode ``build_context`` would set.
Each check's outcome (passed / failed / warned / not checked), the message
mindformers raised or logged and the source line that raised it go to
``preflight.json``; the parent maps them to YAML keys and lines.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import signal
import sys
import traceback

from .guard import set_parent_death_signal
from .import_guards import guard_deepseek_v4_import

PASSED, FAILED, WARNED, NOT_CHECKED = "passed", "failed", "warned", "not checked"


def _source(tb_or_path, lineno=None) -> str:
    """``mindformers/...py:LINE`` of the innermost mindformers frame (the line that raised), or of a log record."""
    if lineno is not None:
        path = tb_or_path
    else:
        frames = traceback.extract_tb(tb_or_path)
        inner = [f for f in frames if "mindformers" in f.filename.replace("\\", "/").split("/")] or frames
        path, lineno = inner[-1].filename, inner[-1].lineno
    parts = path.replace("\\", "/").split("/")
    if "mindformers" in parts:
        parts = parts[len(parts) - parts[::-1].index("mindformers") - 1 :]
    return "/".join(parts) + f":{lineno}"


class _Warnings(logging.Handler):
    """The warnings mindformers' logger emits while a check runs, with the line that emitted them."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        if record.levelno < logging.WARNING:
            return
        # mindformers logs through a wrapper class (tools/logger.py): the caller is the frame below it
        frames = [f for f in traceback.extract_stack() if "/mindformers/" in f.filename.replace("\\", "/") and not f.filename.endswith("logger.py")]
        if frames:
            self.records.append({"message": record.getMessage(), "source": _source(frames[-1].filename, frames[-1].lineno)})


class Checks:
    """Runs one mindformers function at a time and records its outcome, its message and where it came from."""

    def __init__(self, handler: _Warnings):
        self.handler = handler
        self.results = []

    def run(self, name: str, func, *, warn_only=()):
        """*func*() under *name*: passed, failed (the exception) or warned (mindformers' logged warnings containing a *warn_only* word).

        A file mindformers could not read here (``OSError``: a ``pretrained_model_dir`` on the cluster's disk) is "not checked", never failed.
        """
        start = len(self.handler.records)
        try:
            value = func()
        except OSError as exc:  # a path of the cluster's, absent here: not the config's fault
            self.not_checked(name, f"mindformers could not read a file here: {exc}")
            return None
        except Exception as exc:  # mindformers' own rule raised: the finding
            self.results.append(
                {"check": name, "outcome": FAILED, "message": str(exc).strip(), "error": type(exc).__name__, "source": _source(exc.__traceback__)}
            )
            return None
        said = [r for r in self.handler.records[start:] if any(w in r["message"] for w in warn_only)]
        if said:
            for r in said:
                self.results.append({"check": name, "outcome": WARNED, "message": r["message"], "source": r["source"]})
        else:
            self.results.append({"check": name, "outcome": PASSED})
        return value

    def not_checked(self, name: str, why: str):
        self.results.append({"check": name, "outcome": NOT_CHECKED, "message": why})


LAYER_SPLIT = "LayerSetting (layers per pipeline stage, offset, recompute lists)"


def _transformer_key_map() -> dict:
    """TransformerConfig field -> the model_config keys mindformers converts into it (COMMON_CONFIG_MAPPING, reversed)."""
    from mindformers.parallel_core import transformer_config_utils as tcu  # deferred: mindformers (the child only)

    out = {}
    for yaml_keys, target in tcu.COMMON_CONFIG_MAPPING.items():
        name = target if isinstance(target, str) else target[0]
        for key in yaml_keys if isinstance(yaml_keys, tuple) else (yaml_keys,):
            out.setdefault(name, []).append(key)
    return out


def _mcore_model_config(config):
    """The new-architecture model config exactly as ``build_model`` makes it (mindformers/models/build_model.py), building no network."""
    from mindformers.models.build_config import get_model_config  # deferred: mindformers (the child only)

    model = copy.deepcopy(config.model)
    if config.get("pretrained_model_dir"):  # as the Trainer's create_network does: the folder's config.json is merged in
        model.pretrained_model_dir = config.pretrained_model_dir
    default_args = {"parallel_config": config.parallel_config}
    default_args.update(config.moe_config or {})
    model_config = get_model_config(model, default_args=default_args)
    for key, value in default_args.items():
        model_config.__setattr__(key, value)
    return model_config


def _layer_split(checks, config, tc) -> None:
    """mindformers' split of the layers over the pipeline stages (``LayerSetting``, which every new-architecture
    ``TransformerBlock`` and its MTP block build first): the offsets against the layer count, no empty middle stage,
    the recompute lists per stage.  Built with the pipeline context the run sets (``parallel.pipeline_config``), no weights.
    """
    import mindspore as ms  # deferred: MindSpore and mindformers, in the child process only
    from mindformers.parallel_core.training_graph.transformer.utils import LayerSetting  # (deferred as above)

    pipeline = (config.get("parallel") or {}).get("pipeline_config")
    if pipeline:  # as mindformers' ParallelOperator passes config.parallel to MindSpore: interleave and scheduler; no mapping: MindSpore's own refusal
        set_pipeline = checks.run(
            "parallel.pipeline_config (MindSpore's auto-parallel context)",
            lambda: ms.set_auto_parallel_context(pipeline_config=dict(pipeline) if isinstance(pipeline, dict) else pipeline) or True,
        )
        if set_pipeline is None:
            return
    checks.run(LAYER_SPLIT, lambda: LayerSetting(tc.num_layers, tc.offset, tc, tc.virtual_pipeline_model_parallel_size))


def _cluster_only(config) -> bool:
    """Whether the model's sizes come from a ``pretrained_model_dir`` config.json that is not here (the cluster's disk)."""
    folder = config.get("pretrained_model_dir")
    return bool(folder) and not os.path.isfile(os.path.join(str(folder), "config.json"))


def preflight(spec: dict) -> dict:
    """Every check, in the order mindformers' Trainer meets them; returns what ``preflight.json`` holds.

    What it sets (mindformers' context singleton, MindSpore's auto-parallel context, the launch's environment, a log
    handler) is undone before it returns, so the smoke's child can train the shrunk config afterwards in the same process.
    """
    # deferred: MindSpore and mindformers, in the child process only
    import mindspore as ms
    from mindformers.core.context.build_context import MFContextOperator
    from mindformers.tools.logger import get_logger

    saved = {name: os.environ.get(name) for name in ("RANK_SIZE", "RANK_ID", "DEVICE_NUM_PER_NODE")}
    handler = _Warnings()
    get_logger().addHandler(handler)
    try:
        return _preflight(spec, handler)
    finally:
        get_logger().removeHandler(handler)
        MFContextOperator._instance = None
        ms.reset_auto_parallel_context()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _preflight(spec: dict, handler) -> dict:
    # deferred: MindSpore and mindformers, in the child process only
    import mindformers
    import mindspore as ms
    from mindformers import MindFormerConfig
    from mindformers.core.context.build_context import MFContextOperator, build_mf_context
    from mindformers.core.parallel_config import build_parallel_config
    from mindformers.tools import check_rules as rules

    checks = Checks(handler)
    MFContextOperator._instance = None  # a singleton: each config of a batch gets its own mindformers context (use_legacy...)
    for name in ("RANK_SIZE", "DEVICE_NUM_PER_NODE"):
        os.environ.pop(name, None)
    devices, per_node = spec.get("devices"), spec.get("per_node")
    if per_node:
        os.environ["DEVICE_NUM_PER_NODE"] = str(per_node)
    config = checks.run("MindFormerConfig (mindformers' loader and file-name rule)", lambda: MindFormerConfig(spec["config"]))
    out = {"mindformers": getattr(mindformers, "__version__", "?"), "checks": checks.results}
    if config is None:
        return out
    if not config.get("model") or not config.model.get("model_config"):
        checks.results[-1] = {
            "check": checks.results[-1]["check"],
            "outcome": FAILED,
            "message": "MindFormerConfig read no model.model_config from the file: mindformers reads a config only when its name ends in 'yaml' or 'yml'",
            "source": "mindformers/tools/register/config.py",
        }
        return out
    legacy = config.get("use_legacy", True) is not False
    # mindformers' context validators and its own context (use_legacy, run_mode) as build_context makes them; no device, no communication
    checks.run("context validators (build_mf_context)", lambda: build_mf_context(copy.deepcopy(config)))
    from mindformers.tools.utils import PARALLEL_MODE  # deferred: mindformers, in the child process only

    use_parallel = bool(config.get("use_parallel"))
    mode = (config.get("parallel") or {}).get("parallel_mode", 0)
    mode = PARALLEL_MODE.get(mode, mode) if not isinstance(mode, str) or mode not in PARALLEL_MODE.values() else mode
    ms.set_auto_parallel_context(parallel_mode=mode if use_parallel else "stand_alone")
    if not use_parallel:
        checks.not_checked("parallel layout", "use_parallel is not True: mindformers trains on one device and resets the parallel degrees to 1")
    built = checks.run("build_parallel_config (parallel, recompute, swap, MoE configs)", lambda: build_parallel_config(config) or True)
    if built is None:
        return out
    pc = config.parallel_config
    product = pc.data_parallel * pc.model_parallel * (pc.context_parallel or 1) * pc.pipeline_stage
    out["layout"] = {
        "data_parallel": pc.data_parallel,
        "model_parallel": pc.model_parallel,
        "context_parallel": pc.context_parallel or 1,
        "pipeline_stage": pc.pipeline_stage,
        "expert_parallel": getattr(pc, "expert_parallel", None),
        "product": product,
        "use_parallel": use_parallel,
        "parallel_mode": mode,
    }
    os.environ["RANK_ID"] = "0"
    server_warning = ("server_num", "vocab_size", "hidden_size")
    if devices:
        os.environ["RANK_SIZE"] = str(devices)
        checks.run(f"check_rules._check_parallel ({devices} devices)", lambda: rules._check_parallel(config), warn_only=server_warning)
    else:
        checks.not_checked(
            "device count = data_parallel * model_parallel * context_parallel * pipeline_stage", "the device count is unknown (give --devices or --launch)"
        )
    if not devices or (checks.results[-1]["outcome"] == FAILED and "device_num" in checks.results[-1].get("message", "")):
        # the rest of _check_parallel (context parallel, MoE, pipeline scheduler) at the layout's own count
        os.environ["RANK_SIZE"] = str(product)
        # at a count nobody gave, its warnings (server count, divisibility by the device count) would be guesses: not said
        checks.run(f"check_rules._check_parallel, the rest (at the layout's {product} devices)", lambda: rules._check_parallel(config))
    checks.run("check_rules._check_recompute", lambda: rules._check_recompute(config))
    checks.run("check_rules._check_config_campacity", lambda: rules._check_config_campacity(config))
    checks.run("check_rules._check_swap", lambda: rules._check_swap(config))
    _model_checks(checks, config, out, legacy)
    checks.not_checked("dataset and runner rules (check_runner_config)", "they need the dataset itself, which the pre-flight does not open")
    checks.not_checked("TrainingArguments rules", "a YAML run reaches the Trainer as MindFormerConfig, not TrainingArguments")
    return out


def _model_checks(checks, config, out: dict, legacy: bool) -> None:
    """The model config as the Trainer builds it; for the new architecture its ``TransformerConfig`` and layer split."""
    from mindformers.models.build_config import build_model_config  # deferred: mindformers, in the child process only

    if legacy:
        checks.run(
            "model config (build_model_config)",
            lambda: build_model_config(config.model.model_config, default_args={"parallel_config": config.parallel_config, "moe_config": config.moe_config}),
        )
        checks.not_checked("TransformerConfig.__post_init__", "use_legacy is not False: the legacy architecture builds no TransformerConfig")
        checks.not_checked(LAYER_SPLIT, "the legacy architecture splits its layers in each model class as it builds it (llama, glm2)")
    elif _cluster_only(config):
        why = f"the sizes come from pretrained_model_dir {config.pretrained_model_dir!r}, whose config.json is not on this machine"
        checks.not_checked("model config (get_model_config)", why)
        checks.not_checked("TransformerConfig.__post_init__", why)
        checks.not_checked(LAYER_SPLIT, why)
    else:
        model_config = checks.run("model config (get_model_config, as build_model does)", lambda: _mcore_model_config(config))
        if model_config is not None:
            tc = checks.run("TransformerConfig (convert_to_transformer_config, __post_init__)", lambda: model_config.convert_to_transformer_config())
            out["transformer_keys"] = _transformer_key_map()
            if tc is not None:
                _layer_split(checks, config, tc)
            else:
                checks.not_checked(LAYER_SPLIT, "the TransformerConfig could not be built")
            if tc is not None and getattr(tc, "num_moe_experts", None):
                checks.not_checked(
                    "num_moe_experts divisible by expert_parallel",
                    "mindformers checks it when it builds the MoE layer (parallel_core/training_graph/transformer/moe/moe_layer.py), which builds weights",
                )
        else:
            checks.not_checked("TransformerConfig.__post_init__", "the model config could not be built")
            checks.not_checked(LAYER_SPLIT, "the model config could not be built")


def main(spec_path: str) -> int:
    set_parent_death_signal(signal.SIGKILL)
    with open(spec_path) as f:
        spec = json.load(f)
    os.chdir(spec["workdir"])  # mindformers' ./output/log lands in the scratch directory
    guard_deepseek_v4_import()
    said = []
    for run in spec["runs"]:  # several configs in one child: mindformers is imported once
        try:
            out = preflight(run)
        except Exception as exc:  # msnb's own failure: the parent says "could not check"
            traceback.print_exc()
            out = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500]}
        said.append(out)
        with open(os.path.join(spec["workdir"], "preflight.json"), "w") as f:  # after each: a child stopped midway keeps what it did
            json.dump(said, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
