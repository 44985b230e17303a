"""The pre-flight's child: mindformers' own startup checks on a run YAML at full size, on CPU, building no weights.

    python -m msnb.fullsize.child SPEC.json

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

import contextlib
import copy
import json
import logging
import os
import signal
import sys
import traceback

from ..config.run_config import uses_legacy
from ..processes import LAUNCH_VARIABLES, set_parent_death_signal
from . import build, compiler_rules
from .import_guards import guard_deepseek_v4_import
from .standin import STOOD_IN, cluster_standin

PASSED, FAILED, WARNED, NOT_CHECKED, MSNB_ERROR = "passed", "failed", "warned", "not checked", "msnb error"
MODEL, DATA = "model", "data"  # a rule on the model or the layout (not run: "not checked") / on the dataset (listed apart)


def _source(tb_or_path, lineno=None) -> str:
    """``mindformers/...py:LINE`` of the innermost mindformers frame (the line that raised), or of a log record.

    For an exception mindformers' registry raised again with the class's name in front (``register.py``), the line
    that raised first: the exception it was handling.
    """
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


def _first_raise(exc: BaseException) -> BaseException:
    """The exception that started *exc*: through the registry's re-raises (``raise type(e)(f'{cls}: {e}')``), to the first."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        earlier = exc.__cause__ or exc.__context__
        if earlier is None or str(earlier) not in str(exc):
            return exc
        exc = earlier
    return exc


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
    """Runs one step at a time and records its outcome, its message and where it came from.

    A raise in mindformers' or MindSpore's code is a finding; one whose innermost frame is msnb's own code (a step
    msnb wrote wrongly, a stand-in that answered wrongly) is msnb's error, kept with its traceback and never blamed
    on the config.
    """

    def __init__(self, handler: _Warnings):
        self.handler = handler
        self.results = []

    def run(self, name: str, func, *, warn_only=(), kind: str = MODEL):
        """*func*() under *name*: passed, failed (the exception) or warned (mindformers' logged warnings containing a *warn_only* word).

        A file mindformers could not read here (``OSError``: a ``pretrained_model_dir`` on the cluster's disk) is "not checked", never failed.
        """
        start = len(self.handler.records)
        try:
            value = func()
        except OSError as exc:  # a path of the cluster's, absent here: not the config's fault
            self.not_checked(name, f"mindformers could not read a file here: {exc}", kind=kind)
            return None
        except Exception as exc:
            if _raised_by_msnb(exc):  # msnb's own fault: said as such, never the config's
                self.results.append(
                    {"check": name, "outcome": MSNB_ERROR, "message": f"{type(exc).__name__}: {exc}".strip(), "traceback": traceback.format_exc()[-4000:]}
                )
                return None
            self.results.append(  # mindformers' or MindSpore's own rule raised: the finding
                {"check": name, "outcome": FAILED, "message": str(exc).strip(), "error": type(exc).__name__, "source": _source(_first_raise(exc).__traceback__)}
            )
            return None
        said = [r for r in self.handler.records[start:] if any(w in r["message"] for w in warn_only)]
        if said:
            for r in said:
                self.results.append({"check": name, "outcome": WARNED, "message": r["message"], "source": r["source"]})
        else:
            self.results.append({"check": name, "outcome": PASSED})
        return value

    def passed(self, name: str, message: str = ""):
        self.results.append({"check": name, "outcome": PASSED, "message": message})

    def failed(self, name: str, message: str, source: str):
        """A rule msnb states on a tool's behalf (MindSpore's graph compiler): *source* names where its text comes from."""
        self.results.append({"check": name, "outcome": FAILED, "message": message, "source": source})

    def not_checked(self, name: str, why: str, *, kind: str = MODEL):
        """A rule not run: on the model or layout (*kind* ``model``: the outcome is "not checked"), or on the data (listed apart)."""
        self.results.append({"check": name, "outcome": NOT_CHECKED, "message": why, "kind": kind})


_MSNB_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _raised_by_msnb(exc: BaseException) -> bool:
    """Whether the innermost frame of *exc*'s traceback is msnb's own code (not mindformers', MindSpore's or Python's)."""
    frames = traceback.extract_tb(_first_raise(exc).__traceback__)
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(_MSNB_PACKAGE + os.sep)


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


def _cluster_only(config) -> bool:
    """Whether the model's sizes come from a ``pretrained_model_dir`` config.json that is not here (the cluster's disk)."""
    folder = config.get("pretrained_model_dir")
    return bool(folder) and not os.path.isfile(os.path.join(str(folder), "config.json"))


def preflight(spec: dict, out: dict | None = None) -> dict:
    """Every check, in the order a real run meets them; returns what ``preflight.json`` holds for this config.

    *out* is filled as the checks run, so a caller whose call raised (msnb's own failure) keeps every result made before.
    What it sets (mindformers' context singletons, MindSpore's contexts, the launch's environment, a log handler,
    the communication stand-in) is undone before it returns, so the next config of a batch starts clean.
    """
    # deferred: MindSpore and mindformers, in the child process only
    import mindspore as ms
    from mindformers.core.context.build_context import Context, MFContextOperator
    from mindformers.tools.logger import get_logger

    out = {} if out is None else out
    saved = {name: os.environ.get(name) for name in LAUNCH_VARIABLES}
    groups = _parallel_groups_state()
    handler = _Warnings()
    get_logger().addHandler(handler)
    try:
        _preflight(spec, handler, out)
        return out
    finally:
        get_logger().removeHandler(handler)
        MFContextOperator._instance = None
        Context._instance = None
        ms.reset_auto_parallel_context()
        _restore_parallel_groups(groups)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _parallel_groups_state() -> dict:
    """mindformers' module-level parallel groups (set by ``initialize_model_parallel`` as the network is built)."""
    from mindformers.parallel_core.inference import parallel_state  # deferred: mindformers (the child only)

    return {name: value for name, value in vars(parallel_state).items() if name.startswith("_") and name.lstrip("_").isupper()}


def _restore_parallel_groups(saved: dict) -> None:
    from mindformers.parallel_core.inference import parallel_state  # deferred: mindformers (the child only)

    for name, value in saved.items():
        setattr(parallel_state, name, value)


def _preflight(spec: dict, handler, out: dict) -> None:
    # deferred: MindSpore and mindformers, in the child process only
    import mindformers
    from mindformers import MindFormerConfig
    from mindformers.core.context.build_context import Context, MFContextOperator

    checks = Checks(handler)
    out.update({"mindformers": getattr(mindformers, "__version__", "?"), "checks": checks.results, "stood_in": []})
    MFContextOperator._instance = None  # singletons: each config of a batch gets its own context (use_legacy, run mode)
    Context._instance = None
    for name in LAUNCH_VARIABLES:
        os.environ.pop(name, None)
    devices, per_node = spec.get("devices"), spec.get("per_node")
    if per_node:
        os.environ["DEVICE_NUM_PER_NODE"] = str(per_node)
    config = checks.run("MindFormerConfig (mindformers' loader and file-name rule)", lambda: MindFormerConfig(spec["config"]))
    if config is None:
        return
    if not config.get("model") or not config.model.get("model_config"):
        checks.results[-1] = {
            "check": checks.results[-1]["check"],
            "outcome": FAILED,
            "message": "MindFormerConfig read no model.model_config from the file: mindformers reads a config only when its name ends in 'yaml' or 'yml'",
            "source": "mindformers/tools/register/config.py",
        }
        return
    for key, value in spec.get("overrides", []):  # a suggestion being proved: the same checks on the config with that change
        _set_dotted(config, key, value)
    use_parallel = bool(config.get("use_parallel"))
    world = devices or _layout_product(config) or 1
    os.environ["RANK_ID"] = "0"
    os.environ["RANK_SIZE"] = str(world)
    with _cluster(use_parallel, world, out) as cluster:
        if not _context(checks, config, out):
            return
        layout = _parallel_layout(checks, config, out, use_parallel)
        if layout is None:
            return
        _check_rules(checks, config, devices, layout, cluster)
        network = _model_checks(checks, config, out)
        trainer = build.trainer_parts(checks, config, network, out) if network is not None else None
        build.callbacks(checks, config, trainer, out)
    out["dims"] = _dims(config)
    out["scheduler"] = compiler_rules.scheduler_of(config)
    compiler_rules.run(checks, config, layout)
    if not any(c["check"] == build.RUNNER_RULES for c in checks.results):  # the network step did not reach the dataset
        checks.not_checked(build.RUNNER_RULES, "they need the dataset, which the pre-flight did not reach", kind=DATA)
    checks.not_checked("TrainingArguments rules", "a YAML run reaches the Trainer as MindFormerConfig, not TrainingArguments", kind=DATA)


# a model's dimension as the configs of either architecture name it (new architecture, Hugging Face, legacy)
_DIM_NAMES = {
    "heads": ("num_attention_heads", "num_heads", "n_head"),
    "kv_heads": ("num_query_groups", "num_key_value_heads", "n_kv_heads", "multi_query_group_num"),
    "layers": ("num_layers", "num_hidden_layers", "n_layer"),
    "experts": ("num_moe_experts", "num_experts", "n_routed_experts"),
}


def _dims(config) -> dict:
    """Heads, kv heads, layers and experts of the model as the file gives them (for suggestions; 0 where not given)."""
    model = config.model.model_config
    out = {}
    for dim, names in _DIM_NAMES.items():
        value = next((model.get(n) for n in names if isinstance(model.get(n), int) and not isinstance(model.get(n), bool)), None)
        out[dim] = value or 0
    experts = getattr(config.get("moe_config"), "expert_num", None)  # the legacy architecture's MoE block (a MoEConfig once built)
    if not out["experts"] and isinstance(experts, int) and not isinstance(experts, bool):
        out["experts"] = experts
    return out


def _set_dotted(config, key: str, value) -> None:
    """``a.b.c = value`` on a MindFormerConfig (a suggested change, before any check reads it)."""
    *path, last = key.split(".")
    node = config
    for part in path:
        node = node[part]
    node[last] = value


def _layout_product(config) -> int | None:
    """dp*mp*cp*pp of the file's own layout (mindformers' ``build_parallel_config`` on a copy): the count a launch of unknown size is checked at."""
    from mindformers.core.parallel_config import build_parallel_config  # deferred: mindformers (the child only)

    probe = copy.deepcopy(config)
    try:
        build_parallel_config(probe)
        pc = probe.parallel_config
        return pc.data_parallel * pc.model_parallel * (pc.context_parallel or 1) * pc.pipeline_stage
    except Exception:  # its own check below says why; here only the count is wanted
        return None


@contextlib.contextmanager
def _cluster(use_parallel: bool, world: int, out: dict):
    """The communication stand-in (:mod:`msnb.fullsize.standin`) when the run is parallel; declared in *out*."""
    if not use_parallel:
        yield None
        return
    out["stood_in"].append(f"{STOOD_IN} ({world} devices)")
    with cluster_standin(world) as cluster:
        yield cluster


def _context(checks, config, out: dict) -> bool:
    """mindformers' ``build_context`` as ``run_mindformer.py`` calls it: validators, MindSpore's context, the parallel context.

    ``init_communication`` runs as on the cluster (its HCCL start stood in for), so the auto-parallel context holds
    the device count, the pipeline stages and ``parallel.pipeline_config`` before any model code reads them.
    """
    from mindformers.core.context.build_context import build_context  # deferred: mindformers (the child only)

    context = config.get("context") or {}
    target = context.get("device_target")
    if target not in (None, "CPU"):
        out["stood_in"].append(f"context.device_target: CPU stands in for {target} (MindSpore's context; no kernel runs)")
    config.context = context
    config.context.device_target = "CPU"
    return (
        checks.run("context (build_context: validators, MindSpore's context, parallel context and pipeline_config)", lambda: build_context(config) or True)
        is not None
    )


def _parallel_layout(checks, config, out: dict, use_parallel: bool):
    """The Trainer's reading of ``monitor_config`` and ``build_parallel_config``; the layout they give (None: refused)."""
    from mindformers.core.parallel_config import build_parallel_config  # deferred: mindformers (the child only)
    from mindformers.trainer.trainer import Trainer  # (deferred as above)

    if not use_parallel:
        checks.passed("parallel layout", "use_parallel is not True: mindformers trains on one device and resets the parallel degrees to 1")
    monitor = checks.run("monitor_config (Trainer._reassign_monitor_config)", lambda: Trainer._reassign_monitor_config(_TrainerView(config)) or True)
    if monitor is None:
        return None
    if checks.run("build_parallel_config (parallel, recompute, swap, MoE configs)", lambda: build_parallel_config(config) or True) is None:
        return None
    pc = config.parallel_config
    layout = {
        "data_parallel": pc.data_parallel,
        "model_parallel": pc.model_parallel,
        "context_parallel": pc.context_parallel or 1,
        "pipeline_stage": pc.pipeline_stage,
        "expert_parallel": getattr(pc, "expert_parallel", None),
        "micro_batch_num": getattr(pc, "micro_batch_num", None),
        "use_parallel": use_parallel,
    }
    layout["product"] = layout["data_parallel"] * layout["model_parallel"] * layout["context_parallel"] * layout["pipeline_stage"]
    out["layout"] = layout
    return layout


class _TrainerView:
    """What ``Trainer._reassign_monitor_config`` reads of the Trainer: its config (the method runs unchanged on it)."""

    def __init__(self, config):
        self.config = config


def _check_rules(checks, config, devices, layout: dict, cluster) -> None:
    """``check_rules``' parts as ``base_trainer`` calls them, at the launch's device count (or the layout's own, said)."""
    from mindformers.tools import check_rules as rules  # deferred: mindformers (the child only)

    server_warning = ("server_num", "vocab_size", "hidden_size")
    if devices:
        checks.run(f"check_rules._check_parallel ({devices} devices)", lambda: rules._check_parallel(config), warn_only=server_warning)
    else:
        checks.not_checked(
            "device count = data_parallel * model_parallel * context_parallel * pipeline_stage", "the device count is unknown (give --devices or --launch)"
        )
    if not devices or (checks.results[-1]["outcome"] == FAILED and "device_num" in checks.results[-1].get("message", "")):
        # the rest of _check_parallel (context parallel, MoE, pipeline scheduler) at the layout's own count
        # (the count read from RANK_SIZE, or from the communication stand-in where the run is parallel)
        os.environ["RANK_SIZE"] = str(layout["product"])
        world = cluster.world if cluster is not None else None
        if cluster is not None:
            cluster.world = layout["product"]
        # at a count nobody gave, its warnings (server count, divisibility by the device count) would be guesses: not said
        checks.run(f"check_rules._check_parallel, the rest (at the layout's {layout['product']} devices)", lambda: rules._check_parallel(config))
        os.environ["RANK_SIZE"] = str(devices or layout["product"])
        if cluster is not None:
            cluster.world = world
    checks.run("check_rules._check_recompute", lambda: rules._check_recompute(config))
    checks.run("check_rules._check_config_campacity", lambda: rules._check_config_campacity(config))
    checks.run("check_rules._check_swap", lambda: rules._check_swap(config))


def _model_checks(checks, config, out: dict):
    """The model config and, for the new architecture, its ``TransformerConfig`` and layer split; then the full-size network.

    Returns the network built (parameters without data), or None when it was not built.
    """
    from mindformers.models.build_config import build_model_config  # deferred: mindformers, in the child process only

    legacy = uses_legacy(config)
    if not legacy and _cluster_only(config):
        why = f"the sizes come from pretrained_model_dir {config.pretrained_model_dir!r}, whose config.json is not on this machine"
        for name in ("model config (get_model_config)", "TransformerConfig.__post_init__", LAYER_SPLIT, build.NETWORK):
            checks.not_checked(name, why)
        return None
    if legacy:
        built = checks.run(
            "model config (build_model_config)",
            lambda: build_model_config(config.model.model_config, default_args={"parallel_config": config.parallel_config, "moe_config": config.moe_config}),
        )
        if built is None:
            checks.not_checked(build.NETWORK, "the model config could not be built")
            return None
    else:
        model_config = checks.run("model config (get_model_config, as build_model does)", lambda: _mcore_model_config(config))
        if model_config is None:
            checks.not_checked(build.NETWORK, "the model config could not be built")
            return None
        tc = checks.run("TransformerConfig (convert_to_transformer_config, __post_init__)", lambda: model_config.convert_to_transformer_config())
        out["transformer_keys"] = _transformer_key_map()
        if tc is None:
            checks.not_checked(build.NETWORK, "the TransformerConfig could not be built")
            return None
        if checks.run(LAYER_SPLIT, lambda: _layer_split(tc)) is None:
            checks.not_checked(build.NETWORK, "mindformers' layer split refused the layout")
            return None
    return build.network(checks, config, out)


def _layer_split(tc):
    """mindformers' split of the layers over the pipeline stages (``LayerSetting``, which every new-architecture
    ``TransformerBlock`` and its MTP block build first): the offsets against the layer count, no empty middle stage,
    the recompute lists per stage; with the pipeline context ``build_context`` set from ``parallel.pipeline_config``.
    """
    from mindformers.parallel_core.training_graph.transformer.utils import LayerSetting  # deferred: mindformers (the child only)

    return LayerSetting(tc.num_layers, tc.offset, tc, tc.virtual_pipeline_model_parallel_size)


def main(spec_path: str) -> int:
    set_parent_death_signal(signal.SIGKILL)
    with open(spec_path) as f:
        spec = json.load(f)
    os.chdir(spec["workdir"])  # mindformers' ./output/log lands in the scratch directory
    guard_deepseek_v4_import()
    said = []
    for run in spec["runs"]:  # several configs in one child: mindformers is imported once
        out = {}
        try:
            preflight(run, out)
            out["done"] = True
        except Exception as exc:  # msnb's own failure: "could not check", every result made before it kept
            traceback.print_exc()
            out["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            out["traceback"] = traceback.format_exc()[-4000:]
        said.append(out)
        with open(os.path.join(spec["workdir"], "preflight.json"), "w") as f:  # after each: a child stopped midway keeps what it did
            json.dump(said, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
