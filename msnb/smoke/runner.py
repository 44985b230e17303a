"""The smoke runner: a short, monitored training in a child process, watched live, then judged.

``run_smoke()`` is what ``%mfmon_smoke`` and ``msnb smoke`` call.  It goes in
four steps, each its own function:

- :func:`prepare` checks the options, the device, the config and the paths
  before anything is created, so a mistake is one line (a ``SmokeError``) and
  leaves nothing behind;
- :func:`launch` makes the private scratch directory and starts the guard
  (:mod:`msnb.smoke.guard`), which starts the worker or msrun;
- :func:`watch` follows the scratch directory with msnb's incremental reader
  and draws the live view; Ctrl-C, SIGTERM, SIGHUP or ``timeout`` stop the
  child and all its workers;
- :func:`judge` reads the files from disk, judges them and draws the figures
  (a figure that cannot be drawn is a warning, never a lost verdict).

A crash, a hang or a NaN stays in the child.  Every process of a run carries
``MSNB_SMOKE_ID`` in its environment, so none escapes the final sweep, and the
guard ends the training even when this process is killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import yaml

from ..config import load_config, monitor_settings
from ..config.lint import lint
from ..config.run_types import check_run_types
from ..environment import installed_major
from ..errors import SmokeError, UsageError
from ..events import Follower, read
from ..events.discovery import walk
from ..outputs import figure_out
from ..outputs import save_figure as write_figure
from ..plot.live import LiveView, one_loss_source
from ..plot.render import plain_text
from ..process_sweep import marked, sweep
from ..words import count
from .device import device_status
from .figures import smoke_figures
from .guard import MARKER_VAR
from .judge_skeleton import steps_trained
from .judging import judge_smoke
from .kept import check_place, scratch_directory
from .memory_estimate import model_sizes, refuse_unless_it_fits
from .memory_watch import MemoryWatch
from .mindformers_judging import judge_mindformers_smoke, log_scalars, not_rehearsed_reason
from .mindformers_plan import (
    DELETE,
    PINNED_MINDFORMERS,
    Change,
    ModelPlan,
    child_config,
    installed_mindformers,
    is_mindformers_run,
    plan_mindformers,
    summary_root,
)
from .options import BUILTIN_STEPS, DEFAULT_OUT, MINDFORMERS_STEPS, SmokeOptions
from .result import SmokeResult
from .shipped_configs import with_shipped_config
from .tested_stack import check_tested_stack, screen_config
from .verdict import FAIL, PASS, WARN, Check, ProcessOutcome

DEFAULT_LR = 0.05
DEFAULT_COLLECT_FREQ = 5
LOG_TAIL_LINES = 25
COMPILING_EVERY_S = 5.0
STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    keep = [line for line in text.splitlines() if line.strip()]
    return "\n".join(keep[-lines:])


def _kill_run(proc: subprocess.Popen, marker: str, grace: float = 5.0) -> None:
    """Stop the child and everything it started, msrun's workers included.

    The guard is asked first (it stops msrun with the signal msrun cleans up
    on); whatever still carries the marker afterwards is killed.
    """
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(grace + 2)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    sweep(MARKER_VAR, marker, grace, also=lambda: [proc.pid] if proc.poll() is None else [])
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass


def _read_step_times(workdir: Path) -> dict:
    out = {}
    for path in sorted(workdir.glob("step_times*.csv")):
        rank = int(path.stem.split("rank")[1]) if "rank" in path.stem else 0
        try:
            if path.stat().st_size <= len("step,ms,collected,wall\n"):  # the header only: no step was timed
                continue
            rows = np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2))
        except (ValueError, OSError):
            continue
        if rows.size == 0 or rows.shape[1] < 4:
            continue
        out[rank] = (rows[:, 0].astype(int), rows[:, 1], rows[:, 2].astype(bool), rows[:, 3])
    return out


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


def _inputs(options: SmokeOptions) -> list:
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
            figure_out(options.out, inputs=_inputs(options))
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
    options = replace(options, steps=options.steps or BUILTIN_STEPS, batch_size=options.batch_size or 32, mode=options.mode or "pynative")
    msrun = None
    if options.workers > 1:
        msrun = find_msrun()
        if msrun is None:
            raise SmokeError(
                f"--workers {options.workers} starts the workers with msrun, MindSpore's launcher, which is neither beside {sys.executable} "
                "nor on PATH; install MindSpore in this environment (it ships msrun) or run with --workers 1"
            )
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
    msrun = None
    if options.workers > 1:
        msrun = find_msrun()
        if msrun is None:
            raise SmokeError(
                f"--workers {options.workers} starts mindformers' data-parallel workers with msrun, MindSpore's launcher, which is neither beside "
                f"{sys.executable} nor on PATH; install MindSpore in this environment (it ships msrun) or run with --workers 1"
            )
        if options.summary_dir is not None:
            raise SmokeError(
                f"--summary-dir with --workers {options.workers}: each rank writes mindformers' own output/summary/rank_N; use --keep to keep them"
            )
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


@dataclass
class Launched:
    """A started run: its scratch directory, where the summaries go, the guard process and the run's marker."""

    prepared: Prepared
    workdir: Path
    summary: Path
    spec: dict
    proc: subprocess.Popen
    marker: str
    log_path: Path
    started: float
    _log: object = None


def _spec(prepared: Prepared, workdir: Path, summary: Path, code_path: Path | None, collect_freq: int) -> dict:
    o, loaded = prepared.options, prepared.loaded
    mf_model = None
    if loaded is not None and isinstance(loaded.get("model"), dict) and ("trainer" in loaded.data or "run_mode" in loaded.data):
        arch = (loaded.get("model.arch") or {}).get("type") if isinstance(loaded.get("model.arch"), dict) else None
        mf_model = arch or "a mindformers model"
    return {
        "mindformers_model": mf_model,
        "steps": int(o.steps),
        "batch_size": int(o.batch_size),
        "lr": float(o.lr if o.lr is not None else DEFAULT_LR),
        "device": prepared.device,
        "mode": o.mode,
        "config": str(workdir / "monitor.yaml"),
        "workdir": str(workdir),
        "collect_freq": collect_freq,
        "code": str(code_path) if code_path else None,
        "module": prepared.module,
        "module_path": prepared.module_path,
        "sink_size": o.sink_size,
        "distributed": o.workers > 1,
        "seed": 0,
    }


def _int_or(value, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _mindformers_spec(prepared: Prepared, workdir: Path, summary: Path) -> dict:
    """The child's spec: the user's own file, the plan's changes and the isolate changes as overrides on mindformers' reading of it.

    ``run.yaml`` beside it is what msnb expects mindformers to train (for a person reading a kept scratch folder);
    the child never loads it.
    """
    o, plan = prepared.options, prepared.plan
    config, isolate = child_config(plan, workdir, summary)
    changes = list(plan.changes) + list(isolate)
    (workdir / "run.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (workdir / "changes.json").write_text(json.dumps([c.as_dict() for c in changes], indent=1))  # every change, for a person
    (workdir / "isolate.json").write_text(json.dumps([c.as_dict() for c in isolate]))  # those made at launch, for the verdict
    collect = next(
        (_int_or(cb.get("collect_freq"), 1) for cb in config.get("callbacks") or [] if isinstance(cb, dict) and cb.get("type") == "SummaryMonitor"), 1
    )
    mc = config.get("model", {}).get("model_config", {})
    vocab = next((mc[k] for k in ("vocab_size", "padded_vocab_size") if k in mc), None)
    return {
        "mindformers_model": plan.family,
        "legacy": plan.legacy,
        "steps": int(o.steps),
        "device": prepared.device,
        "mode": o.mode,
        "config": str(Path(prepared.loaded.path).resolve()),
        "overrides": [c.override() for c in changes],
        "seq": _int_or(mc.get("seq_length"), 32),
        "vocab": _int_or(vocab, 256),
        "workdir": str(workdir),
        "collect_freq": collect,
        "data": plan.data,
        "columns": plan.columns,
        "mindrecord": plan.mindrecord,  # the config's own MindRecord files, cut to the shrunk sequence in the child
        "seq_before": plan.before.get("seq"),
        "seq_after": plan.after.get("seq"),
        "distributed": o.workers > 1,
        "seed": 0,
    }


def launch(prepared: Prepared) -> Launched:
    """Make the scratch directory, write the child's spec and start the guard.

    Args:
        prepared: what :func:`prepare` returned.

    Returns:
        The running launch, for :func:`watch`.
    """
    o = prepared.options
    started = time.monotonic()
    workdir = scratch_directory(o.keep)  # a private temporary directory (0700), or the user's --keep DIR
    try:
        summary = prepared.summary or workdir / "summary"
        summary.mkdir(parents=True, exist_ok=True, mode=0o700)
        if prepared.plan is not None:
            spec = _mindformers_spec(prepared, workdir, summary)
        else:
            monitor = {"monitor_config": {**prepared.monitor["monitor_config"], "summary_dir": str(summary)}}
            (workdir / "monitor.yaml").write_text(yaml.safe_dump(monitor, sort_keys=False))
            code_path = None
            if o.code is not None:
                code_path = workdir / "user_code.py"
                code_path.write_text(o.code)
            spec = _spec(prepared, workdir, summary, code_path, monitor["monitor_config"]["collect_freq"])
        (workdir / "spec.json").write_text(json.dumps(spec))

        env = dict(os.environ)
        marker = uuid.uuid4().hex
        env[MARKER_VAR] = marker  # marks every process of this run, whatever session it is in
        env["PYTHONUNBUFFERED"] = "1"
        (workdir / "tmp").mkdir(mode=0o700)  # the child's temporary files (mindformers' parallel_speed_up_*.json) go with the scratch folder
        env["TMPDIR"] = env["TMP"] = env["TEMP"] = str(workdir / "tmp")
        bin_dir = str(Path(sys.executable).parent)
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")  # msrun starts `python` from PATH
        if prepared.plan is not None and o.workers == 1:
            command = [sys.executable, "-m", "msnb.smoke.mindformers_worker", str(workdir / "spec.json")]
            stop = signal.SIGTERM
        elif o.workers == 1:
            command = [sys.executable, "-m", "msnb.smoke.worker", str(workdir / "spec.json")]
            stop = signal.SIGTERM
        else:
            command = [
                prepared.msrun,
                f"--worker_num={o.workers}",
                f"--local_worker_num={o.workers}",
                f"--master_port={_free_port()}",
                f"--log_dir={workdir / 'logs'}",
                "--join=True",
                str(Path(__file__).with_name("msrun_entry.py")),
                str(workdir / "spec.json"),
            ]
            stop = signal.SIGINT  # msrun stops its workers, scheduler and log tails on SIGINT only
        guard = [sys.executable, str(Path(__file__).with_name("guard.py")), str(workdir), "1" if o.keep else "0", str(os.getpid()), str(int(stop)), "--"]
        log_path = workdir / "train.log"
        log = open(log_path, "wb")
        proc = subprocess.Popen(guard + command, stdout=log, stderr=subprocess.STDOUT, cwd=str(workdir), env=env, start_new_session=True)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Launched(prepared, workdir, summary, spec, proc, marker, log_path, started, log)


class Stopped(BaseException):
    """A stop signal (SIGTERM, SIGHUP) arrived while a smoke run was being watched."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class StopSignals:
    """SIGTERM and SIGHUP during a smoke run: held, except while the run is watched, where they raise :class:`Stopped`.

    Held signals (one that came while launching or judging) are raised at the
    start of watching, or delivered to the previous handlers when the run is
    over.  Signals can only be handled in the main thread; elsewhere this does
    nothing, and the guard's parent-death signal still stops the run.
    """

    def __init__(self):
        self.held: list[int] = []
        self.raising = False
        self.previous: dict = {}

    def _handle(self, signum, frame):
        if self.raising:
            self.raising = False  # once: a second signal is held while the children are stopped
            raise Stopped(signum)
        self.held.append(signum)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def watching(self) -> None:
        """From now on a stop signal raises :class:`Stopped` (at once, if one was held)."""
        if self.held:
            raise Stopped(self.held.pop(0))
        self.raising = True

    def done(self) -> None:
        """From now on stop signals are held again."""
        self.raising = False

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(self.held):  # delivered now, to whoever handled them before
            signal.raise_signal(sig)


@dataclass
class Watched:
    """How the watched run ended."""

    returncode: int | None
    interrupted: bool = False
    timed_out: bool = False
    stopped_by: str | None = None
    first_live_wall: float | None = None
    everything: object = None
    extra_checks: list = field(default_factory=list)
    out_of_memory: str | None = None  # why the run was stopped (or killed) with this machine's memory nearly gone


def _mindformers_label(run: str) -> str:
    """The live view's legend for a mindformers run: the loss comes from MFLossMonitor's lines in mindformers' log."""
    return "MFLossMonitor (mindformers' log)" if run == "output/log" or run.startswith("output/log/") else run


def _live_source(prepared: Prepared):
    """What the live view draws: for a mindformers model, MFLossMonitor's lines as they are written (the other
    writers repeat the same loss); otherwise the run that logs the loss most often (the summary repeats it)."""
    return one_loss_source if prepared.plan is None else log_scalars


def watch(launched: Launched, view=None, *, poll_interval: float = 0.25, signals: StopSignals | None = None, memory: MemoryWatch | None = None) -> Watched:
    """Follow the run until it ends, is interrupted, times out or a stop signal arrives; then stop every process of it.

    Args:
        launched: what :func:`launch` returned.
        view: a live view with ``update(scalars, status=..., step=..., force=...)``, or None.
        poll_interval: seconds between polls of the scratch directory.
        signals: the run's :class:`StopSignals`; a stop signal while watching ends the run.
        memory: the run's :class:`~msnb.smoke.memory_watch.MemoryWatch` (default: one keeping 5% of the machine free, at
            most 1 GiB); the run is stopped before this machine runs out of memory.

    Returns:
        How it ended, and everything read while it ran.
    """
    o = launched.prepared.options
    follower = Follower(launched.workdir)
    live_scalars = _live_source(launched.prepared)
    out = Watched(None)
    memory = memory if memory is not None else MemoryWatch(launched.marker)
    compiling_said = 0.0  # when to say "compiling" again
    try:
        if signals is not None:
            signals.watching()
        while launched.proc.poll() is None:
            new = follower.poll()
            if len(new.scalars) and out.first_live_wall is None:
                out.first_live_wall = time.time()
            if view is not None:
                if len(new.scalars):
                    shown = live_scalars(follower.result.scalars)
                    if len(shown):
                        view.update(shown, step=int(np.max(shown.step)))
                elif out.first_live_wall is None and time.monotonic() >= compiling_said and any(launched.workdir.glob("step_times*.csv")):
                    # a sign of life every few seconds: compiling a mindformers model takes tens of seconds on CPU
                    waited = time.monotonic() - launched.started
                    view.update(status=f"waiting for the first step (compiling)... {waited:.0f} s since start", force=True)
                    compiling_said = time.monotonic() + COMPILING_EVERY_S
            if o.timeout is not None and time.monotonic() - launched.started > o.timeout:
                out.timed_out = True
                break
            out.out_of_memory = memory.poll()
            if out.out_of_memory is not None:
                break
            time.sleep(poll_interval)
    except KeyboardInterrupt:
        out.interrupted = True
    except Stopped as stop:
        out.stopped_by = stop.name
    finally:
        try:
            _kill_run(launched.proc, launched.marker)
        finally:
            if signals is not None:
                signals.done()
            launched._log.close()
    out.returncode = launched.proc.returncode
    if out.out_of_memory is None and not (out.interrupted or out.timed_out or out.stopped_by):
        out.out_of_memory = memory.after_exit(out.returncode)
    left = marked(MARKER_VAR, launched.marker)
    if left:
        out.extra_checks.append(Check("cleanup", FAIL, f"{count(len(left), 'process')} of this run could not be stopped: pids {left}"))
    follower.close()
    out.everything = follower.result
    return out


def _draw(summary_read, times, live_read=None) -> tuple[object, object, list]:
    """The final figures; a failure to draw one is a warning check, and the other is still drawn."""
    try:
        figure, hist_figure = smoke_figures(summary_read, times, live_read)
        return figure, hist_figure, []
    except Exception as exc:  # drawing is another layer's code; whatever it raises, the verdict stands
        first = f"{type(exc).__name__}: {exc}"
    try:
        figure, _ = smoke_figures(replace(summary_read, histograms=type(summary_read.histograms)()), times, live_read)
        return figure, None, [Check("figures", WARN, f"the histogram figure could not be drawn ({first}); the curves were")]
    except Exception as exc:  # noqa: BLE001 - same reason
        return None, None, [Check("figures", WARN, f"no figure could be drawn ({first}; without histograms: {type(exc).__name__}: {exc})")]


def save_figure(result: SmokeResult, out) -> Check | None:
    """Save the run's final figure to *out*; a failure becomes a warning check added to the verdict.

    Args:
        result: a finished smoke run.
        out: a .png or .svg path.

    Returns:
        The warning check when it could not be saved (also appended to ``result.checks``), else None.
    """
    if result.figure is None:
        return None
    try:
        path = figure_out(out, inputs=result.inputs)  # checked before the run too (prepare); again here, where it is written
        plain_text(result.figure)  # names from files are no TeX
        write_figure(result.figure, path)
        result.figure_file = path
        result.figure_note = "in the current directory; --out FILE to write elsewhere" if str(out) == DEFAULT_OUT else ""
        return None
    except Exception as exc:  # a missing directory, a read-only place, an unknown extension: the verdict stands
        check = Check("figure_file", WARN, f"could not save the figure to {out}: {type(exc).__name__}: {exc}")
        result.checks.append(check)
        return check


def check_sink(sink_size: int | None, device: str, mode: str, times: dict) -> list[Check]:
    """Whether ``--sink-size`` rehearsed sink mode, from the step numbers the callbacks saw.

    In sink mode the callbacks run once per sink of N steps, SummaryCollector's
    collect_freq counts sinks, and the log line changes.  MindSpore 2.9 trains
    on CPU, and in PyNative mode, without sink mode (one step at a time), so
    there the option is accepted but changes nothing: a warning says so.
    """
    if not sink_size:
        return []
    steps = [t[0] for t in times.values() if t[0].size > 1]
    stride = int(np.median(np.concatenate([np.diff(s) for s in steps]))) if steps else None
    if stride == sink_size:
        return [Check("sink_mode", PASS, f"dataset_sink_mode=True, sink_size={sink_size}: callbacks ran every {stride} steps, as in the real run")]
    why = (
        "MindSpore trains on CPU without sink mode"
        if device == "CPU"
        else ("MindSpore's PyNative mode trains without sink mode (use --mode graph)" if mode == "pynative" else "MindSpore did not sink the dataset")
    )
    seen = f"callbacks ran every {count(stride, 'step')}" if stride else "no steps were timed"
    return [Check("sink_mode", WARN, f"sink mode not rehearsed: {why}; dataset_sink_mode=True, sink_size={sink_size} was accepted but {seen}")]


def _read_json(path: Path) -> dict | None:
    """A small JSON file the child wrote (None when absent or not JSON: the child may have died before writing it)."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class MindformersRun:
    """Everything the verdict of a mindformers smoke run is made from (see :func:`msnb.smoke.mindformers_judging.judge_mindformers_smoke`)."""

    plan: ModelPlan
    outcome: ProcessOutcome
    everything: object  # what the Follower read in the scratch directory: logs, TensorBoard files, summaries
    summary_read: object  # the summary directory read on its own
    times: dict
    device_usable: bool
    device_reason: str
    findings: list
    workdir: Path
    summary: Path
    collect_freq: int
    stopped_by: str | None
    rehearsal: dict | None
    failures: list  # each failing rank's failure.json: stage, line, cause (config, kernel, msnb), kernel, rank
    launch_changes: list  # the changes made at launch (outputs isolated in the scratch folder)


def _launch_changes(workdir: Path) -> list:
    """The changes made at launch (outputs isolated in the scratch folder), as :class:`Change` objects for the verdict."""
    try:
        changes = json.loads((workdir / "isolate.json").read_text())
    except (OSError, ValueError):
        return []
    return [Change(c["kind"], (c["key"],), c["before"], DELETE if c.get("deleted") else c["after"], c["why"]) for c in changes]


def judge(launched: Launched, watched: Watched) -> SmokeResult:
    """Read what the run left on disk, judge it, draw the figures; remove the scratch directory when it is not needed.

    Args:
        launched: the run.
        watched: how it ended.

    Returns:
        The verdict with its tables and figures.
    """
    prepared, o, workdir, summary = launched.prepared, launched.prepared.options, launched.workdir, launched.summary
    if prepared.plan is not None:
        summary = summary_root(prepared.plan, workdir, summary)
    summary_read = read(summary)
    times = _read_step_times(workdir)
    logs = workdir / "logs"
    log_tail = _tail(launched.log_path) or "\n".join(_tail(p) for p in sorted(logs.glob("worker_*.log")))
    if o.workers > 1 and watched.returncode not in (0, None):
        worker_tails = [f"--- {p.name}\n{_tail(p, 12)}" for p in sorted(logs.glob("worker_*.log"))]
        log_tail = "\n".join([log_tail] + worker_tails).strip()
    elapsed = time.monotonic() - launched.started
    outcome = ProcessOutcome(watched.returncode, watched.interrupted, watched.timed_out, elapsed, log_tail)

    flags: list = []  # the judge's flags on the loss, beside its checks
    if prepared.plan is not None:
        checks = judge_mindformers_smoke(
            MindformersRun(
                plan=prepared.plan,
                outcome=outcome,
                everything=watched.everything,
                summary_read=summary_read,
                times=times,
                device_usable=prepared.device_usable,
                device_reason=prepared.device_reason,
                findings=prepared.findings,
                workdir=workdir,
                summary=summary,
                collect_freq=int(launched.spec.get("collect_freq") or 1),
                stopped_by=watched.stopped_by,
                rehearsal=_read_json(workdir / "rehearsal.json"),
                failures=[f for p in sorted(workdir.glob("failure*.json")) if (f := _read_json(p))],
                launch_changes=_launch_changes(workdir),
            ),
            flags_out=flags,
        )
    else:
        checks = judge_smoke(
            outcome,
            summary_read,
            watched.everything,
            times,
            launched.spec,
            prepared.device,
            prepared.device_reason,
            prepared.findings,
            summary,
            o.workers,
            device_usable=prepared.device_usable,
            stopped_by=watched.stopped_by,
            flags_out=flags,
        )
    figure, hist_figure, figure_checks = _draw(summary_read, times, watched.everything)
    checks += check_sink(o.sink_size, prepared.device, o.mode, times) + watched.extra_checks + figure_checks
    if watched.out_of_memory is not None:  # this machine's limit: nothing the run wrote is judged, nothing is blamed on the config
        checks = [c for c in checks if c.name in ("device", "cleanup") or c.status != FAIL and c.name != "process"]
        checks.append(Check("process", WARN, f"not rehearsed after {count(steps_trained(times), 'step')}: {watched.out_of_memory}"))
    passed = not any(c.status == FAIL for c in checks)
    not_rehearsed = watched.out_of_memory
    if prepared.plan is not None and passed and not_rehearsed is None:
        not_rehearsed = not_rehearsed_reason([f for p in sorted(workdir.glob("failure*.json")) if (f := _read_json(p))])
    trained = steps_trained(times)
    first_step_wall = min((float(t[3][0]) for t in times.values() if t[3].size), default=None)
    delay = (watched.first_live_wall - first_step_wall) if watched.first_live_wall and first_step_wall else None
    # stopped on purpose (Ctrl-C, SIGTERM, SIGHUP): nobody is waiting for a post-mortem, whichever way it was stopped
    cancelled = watched.stopped_by is not None or watched.interrupted
    kept = o.keep or o.summary_dir is not None or (not passed and not cancelled) or not_rehearsed is not None
    if (passed or cancelled) and not_rehearsed is None and not o.keep:
        shutil.rmtree(workdir, ignore_errors=True)  # logs and spec; the summaries too unless --summary-dir put them elsewhere
    return SmokeResult(
        passed=passed and not_rehearsed is None,
        not_rehearsed=not_rehearsed,
        checks=checks,
        summary_dir=str(summary),
        kept=kept,
        device=prepared.device,
        device_reason=prepared.device_reason,
        steps=int(o.steps),
        steps_trained=trained,
        elapsed_s=elapsed,
        workdir=str(workdir),
        tables=watched.everything,
        step_times={r: t[:3] for r, t in times.items()},
        log_tail=log_tail,
        findings=prepared.findings,
        figure=figure,
        histogram_figure=hist_figure,
        first_live_delay_s=delay,
        ranks=sorted(times) if times else [],
        flags=flags,
    )


def run_smoke(config=None, *, view=None, poll_interval: float = 0.25, options: SmokeOptions | None = None, **fields) -> SmokeResult:
    """Train a few small-batch steps under monitoring and judge what was written.

    Args:
        config: a YAML whose ``monitor_config`` to test (its collection settings
            are used; the summary goes to the smoke directory), or None.
        view: a live view to draw into; by default one is made when ``live``.
        poll_interval: seconds between reads of the run's files.
        options: a :class:`~msnb.smoke.options.SmokeOptions`; or give its fields
            as keywords: ``steps``, ``batch_size``, ``lr``, ``collect_freq``,
            ``device``, ``workers`` (> 1 starts data-parallel CPU workers with
            msrun), ``summary_dir``, ``keep``, ``live``, ``code`` (source
            defining ``net``, ``loss_fn``, ``optimizer``, ``dataset`` or a
            ``build()``), ``module`` (a file, relative to the current
            directory, or a module doing the same), ``mode`` ("pynative" or
            "graph"), ``timeout`` (seconds), ``sink_size``.

    Returns:
        The :class:`~msnb.smoke.result.SmokeResult`.  The scratch directory is
        removed after a pass (unless ``keep``) and after a stop signal; it is
        kept after a failure.

    Raises:
        SmokeError: options that no run could honour (before anything starts).
        ConfigError: a config that cannot be loaded (before anything starts).
    """
    if options is None:
        options = SmokeOptions(config=config, **fields)
    elif config is not None or fields:
        raise SmokeError("give either options=SmokeOptions(...) or keyword options, not both")
    prepared = prepare(options)
    if options.live and view is None:
        view = LiveView(title=f"msnb smoke on {prepared.device}", total=prepared.options.steps, tags=["loss"], min_interval=0.3, status=None)
    if view is not None:
        if view.total is None:  # the steps left to the default (200, or 40 for mindformers): the percentage and the ETA need them
            view.total = prepared.options.steps
        if prepared.plan is not None:
            view.label_for_run = _mindformers_label
        view.update(status=f"starting MindSpore on {prepared.device}...", force=True)
    with StopSignals() as signals:
        launched = launch(prepared)
        try:
            watched = watch(launched, view, poll_interval=poll_interval, signals=signals)
            result = judge(launched, watched)
            result.inputs = _inputs(options)
        except BaseException:
            if launched.proc.poll() is None:
                _kill_run(launched.proc, launched.marker)
            raise
    if view is not None:
        # the verdict below shows the curves and says PASSED/FAILED: the live view ends on one line, without either
        view.close(None, status=f"training ended after {count(result.steps_trained, 'step')}; the verdict follows")
    return result


__all__ = ["SmokeOptions", "prepare", "launch", "watch", "judge", "run_smoke", "save_figure", "find_msrun"]
