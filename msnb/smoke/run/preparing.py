"""A smoke run prepared before anything is created: options, device, config, paths and msrun checked, a mindformers
config planned, so that a mistake is one line (a ``SmokeError``) and leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from ...config import load_config, monitor_settings
from ...config.lint import lint
from ...config.run_types import check_run_types
from ...config.shipped import with_shipped_config
from ...environment import installed_major
from ...errors import SmokeError, UsageError
from ...events.discovery import walk
from ...fullsize.sizes import model_sizes, refuse_unless_it_fits
from ...outputs import figure_out
from ..mindformers.plan import (
    PINNED_MINDFORMERS,
    ModelPlan,
    installed_mindformers,
    is_mindformers_run,
    plan_mindformers,
)
from ..mindformers.tested_stack import check_tested_stack, screen_config
from .device import device_status
from .kept import check_place
from .options import BUILTIN_STEPS, DEFAULT_OUT, MINDFORMERS_STEPS, SmokeOptions

DEFAULT_COLLECT_FREQ = 5


def _effective_monitor(config, *, summary_dir: str, collect_freq: int | None) -> tuple[dict, object]:
    """The monitor_config the child uses: the user's, pointed at the smoke directory."""
    block: dict = {}
    loaded = None
    if config is not None:
        loaded = load_config(config)
        settings = monitor_settings(loaded)  # validates; raises ConfigError naming file and key
        block = {k: v for k, v in (loaded.get("monitor_config") or {}).items() if k in settings.present}
    block["summary_dir"] = summary_dir
    block["collect_freq"] = int(collect_freq or block.get("collect_freq") or DEFAULT_COLLECT_FREQ)
    block["per_print_times"] = 1
    block["keep_default_callbacks"] = True
    block["flush_interval"] = 1
    block["per_rank_dir"] = True
    return {"monitor_config": block}, loaded


def find_msrun() -> str | None:
    """MindSpore's launcher, looked for where the child will look for ``python``: this interpreter's directory, then PATH.

    Returns:
        Its path, or None when it is on neither.
    """
    return shutil.which("msrun", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def _resolve_module(module: str) -> tuple[str, str | None]:
    """(what the child loads, the directory a module name is imported from): a file is resolved against the caller's cwd."""
    as_path = Path(module).expanduser()
    if module.endswith(".py") or os.sep in module or (os.altsep and os.altsep in module) or as_path.exists():
        full = (Path.cwd() / as_path).resolve() if not as_path.is_absolute() else as_path.resolve()
        if not full.is_file():
            raise SmokeError(f"--module {module}: " + (f"not a file: {full}" if full.exists() else f"no such file (looked for {full})"))
        return str(full), None
    return module, os.getcwd()


def _check_summary_dir(summary_dir) -> Path:
    target = Path(summary_dir).expanduser()
    target = (Path.cwd() / target) if not target.is_absolute() else target
    check_place("--summary-dir", target)  # refused before anything is made
    if target.exists() and not target.is_dir():
        raise SmokeError(f"--summary-dir {summary_dir}: is a file, not a directory")
    try:
        target.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise SmokeError(f"--summary-dir {summary_dir}: cannot create it ({exc.strerror or exc})") from None
    if not os.access(target, os.W_OK | os.X_OK):
        raise SmokeError(f"--summary-dir {summary_dir}: not writable")
    left: list = []
    earlier = next((d / names[0] for d, names in walk(target, left) if names), None)  # the bounded walk: `/` is not walked whole
    if earlier is not None or left:  # their records would be judged as this run's
        what = f"already holds {earlier}" if earlier is not None else f"cannot be looked through ({left[0]})"
        raise SmokeError(f"--summary-dir {summary_dir}: {what}; give a new or empty directory")
    return target.resolve()


@dataclass
class Prepared:
    """What :func:`prepare` found valid: nothing has been started or created yet (bar a user's --summary-dir)."""

    options: SmokeOptions
    device: str
    device_reason: str
    device_usable: bool
    loaded: object  # the user's config, loaded, or None
    monitor: dict  # the monitor_config the child will use (its summary_dir is set at launch)
    findings: list
    module: str | None
    module_path: str | None  # where a module *name* is imported from (the caller's cwd)
    msrun: str | None
    summary: Path | None  # the user's --summary-dir, resolved
    plan: ModelPlan | None = None  # a mindformers config's own model, when the YAML is a mindformers run config


def smoke_inputs(options: SmokeOptions) -> list:
    """The files a smoke reads, which its figure may never replace."""
    module = options.module if options.module and os.path.splitext(str(options.module))[1] == ".py" else None
    return [p for p in (options.config, module) if p is not None]


def prepare(options: SmokeOptions) -> Prepared:
    """Check everything a run needs before anything is created: options, device, config, module, msrun, paths.

    Args:
        options: the run's options.

    Returns:
        The checked plan, for :func:`launch`.

    Raises:
        SmokeError: a bad option, a missing module file or msrun, an unusable --summary-dir.
        ConfigError: a config that cannot be loaded.
    """
    options = with_shipped_config(options)  # configs/qwen3/... not here: the installed mindformers' own copy, said on stderr
    options.validate()
    if options.out:  # the figure's file, by the one output rule, before anything starts: never the config, a link or a device
        try:
            figure_out(options.out, inputs=smoke_inputs(options))
        except UsageError as exc:
            if str(options.out) != DEFAULT_OUT or not str(exc).endswith("is not writable"):
                raise
            # the default figure in a folder that cannot be written: not asked for, so the run goes on and the verdict warns
    loaded_first = load_config(options.config) if options.config is not None else None
    screen_config(loaded_first, builtin=options.code is None and options.module is None)  # NotRehearsed: never the built-in model in its place
    if loaded_first is not None:
        check_run_types(loaded_first)  # runner_config: 5, callbacks: 5, ...: one line naming the key, before the plan reads them
    if loaded_first is not None and is_mindformers_run(loaded_first.data):
        return _prepare_mindformers(options, loaded_first)
    if options.devices is not None or options.launch:
        raise SmokeError("--devices and --launch are for a mindformers run config: its pre-flight checks the full-size layout against them")
    options = replace(options, steps=options.steps or BUILTIN_STEPS, batch_size=options.batch_size or 32, mode=options.mode or "pynative")
    msrun = _msrun(options.workers, "the workers")
    module, module_path = _resolve_module(str(options.module)) if options.module else (None, None)
    monitor, loaded = _effective_monitor(options.config, summary_dir="<the smoke directory>", collect_freq=options.collect_freq)
    distributed = options.workers > 1
    pb = installed_major("protobuf")
    findings = lint(loaded, steps=options.steps, distributed=distributed, protobuf_major=pb) if loaded is not None else []
    findings += [
        f
        for f in lint(monitor, steps=options.steps, distributed=distributed, protobuf_major=pb)  # what the child will actually use
        if f.rule not in {x.rule for x in findings} and f.severity != "info"
    ]
    summary = _check_summary_dir(options.summary_dir) if options.summary_dir else None
    device, reason, usable = device_status(options.device)
    return Prepared(options, device, reason, usable, loaded, monitor, findings, module, module_path, msrun, summary)


def _msrun(workers: int, whom: str):
    """msrun, MindSpore's launcher, when more than one worker is asked for (None for one); refused in one line when absent."""
    if workers <= 1:
        return None
    msrun = find_msrun()
    if msrun is None:
        raise SmokeError(
            f"--workers {workers} starts {whom} with msrun, MindSpore's launcher, which is neither beside {sys.executable} "
            "nor on PATH; install MindSpore in this environment (it ships msrun) or run with --workers 1"
        )
    return msrun


def _mindformers_mode(loaded, options: SmokeOptions) -> str:
    if options.mode is not None:
        return options.mode
    mode = loaded.get("context.mode", 0)
    return "pynative" if str(mode).strip().lower() in ("1", "pynative", "pynative_mode") else "graph"


def _recomputes(config: dict) -> bool:
    """Whether the run recomputes its layers in the backward pass (mindformers' ``recompute_config.recompute``)."""
    rc = config.get("recompute_config")
    return isinstance(rc, dict) and rc.get("recompute") not in (None, False, 0)


def _prepare_mindformers(options: SmokeOptions, loaded) -> Prepared:
    """A mindformers run YAML: its own model, through mindformers' Trainer, checked and planned before anything starts."""
    where = loaded.path
    if options.code is not None or options.module is not None:
        raise SmokeError(
            f"{where} is a mindformers run config, which trains its own model; give the model as the YAML, or as code/--module with a YAML of monitor_config only"
        )
    msrun = _msrun(options.workers, "mindformers' data-parallel workers")
    if options.workers > 1 and options.summary_dir is not None:
        raise SmokeError(f"--summary-dir with --workers {options.workers}: each rank writes mindformers' own output/summary/rank_N; use --keep to keep them")
    version = installed_mindformers()
    if version is None:
        raise SmokeError(
            f"{where} is a mindformers run config, and mindformers is not installed here: pip install 'msnb[mindformers]' (mindformers=={PINNED_MINDFORMERS}.0)"
        )
    device, reason, usable = device_status(options.device)
    check_tested_stack(device, version)  # NotRehearsed: a CPU rehearsal with releases outside the tested set
    mode = _mindformers_mode(loaded, options)
    options = replace(options, steps=options.steps or MINDFORMERS_STEPS, mode=mode)
    plan = plan_mindformers(
        loaded,
        device=device,
        shrink=options.shrink,
        steps=options.steps,
        batch_size=options.batch_size,
        lr=options.lr,
        mode=mode,
        data=options.data,
        sink_size=options.sink_size,
        workers=options.workers,
    )
    options = replace(options, batch_size=int(plan.config["runner_config"]["batch_size"]))
    # the sizes the child builds: the YAML's, pretrained_model_dir's config.json under them, the class defaults under both
    sizes = model_sizes(plan.config)
    refuse_unless_it_fits(
        sizes.config,
        batch=options.batch_size,
        seq=None,
        recompute=_recomputes(plan.config),
        workers=options.workers,
        where=str(where),
        sizes_from=sizes.source_words(),
    )
    monitor_settings(loaded)  # validates monitor_config; raises ConfigError naming file and key
    findings = lint(loaded, steps=options.steps, protobuf_major=installed_major("protobuf"))  # the real run's settings, distributed or not
    summary = _check_summary_dir(options.summary_dir) if options.summary_dir else None
    return Prepared(options, device, reason, usable, loaded, {}, findings, None, None, msrun, summary, plan)
