"""The full-size pre-flight: mindformers' own startup checks on a run YAML as the cluster will run it, in seconds, on CPU.

The smoke trains a shrunk copy (every parallel degree 1, one CPU device), so
what mindformers checks about the full-size job at startup (the device count
against ``dp*mp*cp*pp``, heads and query groups against tensor parallelism,
experts against expert parallelism, the recompute list against the pipeline,
context parallelism without flash attention...) would otherwise pass the smoke
and fail on the cluster.  Here mindformers' own functions run on the unshrunk
config in a child process (:mod:`msnb.fullsize.child`; importing
mindformers writes ``./output/log`` in the current directory, and the kernel
must stay alive), building no weights, with the device count the launch will
have: from ``devices``, from the launcher's command line (``launch``), or
unknown, when the device-count rule is "not checked", never passed.

Each finding names the YAML key, its file and line, and the mindformers source
line that raised it; what mindformers only logs as a warning is a warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from ..config.mindformers_rules import mindformers_reads_name
from ..config.shipped import resolve_shipped
from ..errors import SmokeError
from ..processes import Stopped, StopSignals, child_environment, end_process_group
from ..status import ResultView
from .launch import per_node_words, read_launch, say_cards_a_node
from .views import ShownOnce

PASSED, FAILED, NOT_CHECKED, MSNB_ERROR = "passed", "failed", "not checked", "msnb error"
DATA = "data"  # a rule about the dataset, not run because the dataset is not opened: listed apart, never "not checked"
PREFLIGHT_TIMEOUT = 180.0  # seconds: importing mindformers is ~3 s; a stuck child is msnb's failure, "not checked"
_DEVICE_RULE = "data_parallel * model_parallel * context_parallel * pipeline_stage"


def launch_devices(launch: str) -> tuple[int, int | None, str]:
    """The device count, the cards a node and where the count came from, as the launcher reads *launch*
    (:func:`msnb.fullsize.launch.read_launch`).

    Raises:
        SmokeError: a line no launcher msnb reads, or a count that is not a whole number of 1 or more.
    """
    read = read_launch(launch)
    return read.devices, read.per_node, read.devices_from


@dataclass
class PreflightCheck:
    """One mindformers check: its outcome, mindformers' own message, the YAML key and line, and the mindformers line that raised."""

    check: str
    outcome: str  # passed / failed / warning / not checked / msnb error
    message: str = ""
    key: str = ""
    where: str = ""  # FILE:LINE of the key in the user's YAML
    source: str = ""  # mindformers/...py:LINE that raised or logged it
    kind: str = "model"  # "model": a rule on the model or the layout; "data": on the dataset (not run: listed apart)
    suggestions: list = field(default_factory=list)  # edits of the config proved to pass the same checks ("key value, ...")

    def line(self) -> str:
        said = f"{self.check}: {self.outcome}"
        if self.message:
            said += f": {self.message}"
        if self.key:
            said += f" [{self.key}" + (f" at {self.where}" if self.where else "") + "]"
        if self.source:
            said += f" (raised at {self.source})"
        if self.suggestions:
            said += f"; change to (proved: the pre-flight passes with it): {' or '.join(self.suggestions)}"
        return said


@dataclass
class PreflightResult(ResultView, ShownOnce):
    """What the pre-flight found: passed (every check ran, none failed), failed (a finding), or not checked."""

    config: str
    devices: int | None
    devices_from: str
    checks: list = field(default_factory=list)
    mindformers: str = ""
    error: str = ""  # msnb could not run the checks at all
    seconds: float = 0.0
    memory: object = None  # the per-card memory estimate (msnb.fullsize.memory.CardMemory), when one was made
    stood_in: list = field(default_factory=list)  # what the child stood in for to build the full-size run on CPU (communication...)
    traceback: str = ""  # msnb's own failure's traceback, kept for a report (never blamed on the config)
    layout: dict = field(default_factory=dict)  # the parallel layout mindformers built (dp, mp, cp, pp, ep, micro-batches)
    dims: dict = field(default_factory=dict)  # heads, kv heads, layers, experts as the file gives them
    scheduler: str = "1f1b"  # the pipeline scheduler the run asks MindSpore for

    @property
    def findings(self) -> list:
        return [c for c in self.checks if c.outcome == FAILED]

    @property
    def warnings(self) -> list:
        return [c for c in self.checks if c.outcome == "warning"]

    @property
    def not_checked(self) -> list:
        """Rules on the model or the layout that did not run (each makes the outcome "not checked")."""
        return [c for c in self.checks if c.outcome == NOT_CHECKED and c.kind != DATA]

    @property
    def data_rules(self) -> list:
        """Rules about the dataset, not run because the pre-flight does not open it: listed apart."""
        return [c for c in self.checks if c.outcome == NOT_CHECKED and c.kind == DATA]

    @property
    def msnb_errors(self) -> list:
        """Steps where msnb's own code raised: msnb's fault, never the config's."""
        return [c for c in self.checks if c.outcome == MSNB_ERROR]

    @property
    def outcome(self) -> str:
        """failed: a finding (whatever else went wrong); passed: every rule on the model and layout ran and none failed;
        else not checked (msnb could not run a check, the device count is unknown, or a rule did not run)."""
        if self.findings:
            return FAILED
        if self.error or self.devices is None or not self.checks or self.msnb_errors or self.not_checked:
            return NOT_CHECKED
        return PASSED

    @property
    def passed(self) -> bool | None:
        return {PASSED: True, FAILED: False}.get(self.outcome)

    @property
    def exit_code(self) -> int:
        """0 passed, 1 a finding, 3 could not check (msnb's limit or an unknown device count, never the config's fault)."""
        return {PASSED: 0, FAILED: 1}.get(self.outcome, 3)

    def as_dict(self) -> dict:
        out = {
            "config": self.config,
            "outcome": self.outcome,
            "passed": self.passed,
            "devices": self.devices,
            "devices_from": self.devices_from,
            "mindformers": self.mindformers,
            "seconds": round(self.seconds, 2),
            "checks": [vars(c).copy() for c in self.checks],
            "stood_in": list(self.stood_in),
        }
        if self.error:
            out["error"] = self.error
        if self.traceback:
            out["traceback"] = self.traceback
        if self.memory is not None:
            out["memory"] = self.memory.as_dict()
        return out

    def headline(self) -> str:
        """One line: the outcome and its reason."""
        if self.findings:
            first = self.findings[0]
            more = f" (and {len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
            return f"pre-flight failed: {first.message}" + (f" [{first.key} at {first.where}]" if first.where else "") + more
        if self.error:
            return f"pre-flight not checked: msnb could not run the checks ({self.error}): msnb's limit, not the config's fault"
        if self.msnb_errors:
            first = self.msnb_errors[0]
            return f"pre-flight not checked: msnb's own error in {first.check} ({first.message}): msnb's limit, not the config's fault"
        if self.devices is None:
            return f"pre-flight not checked: the device count is unknown, so {_DEVICE_RULE} = device count was not checked (give --devices N or --launch)"
        if self.not_checked:
            return f"pre-flight not checked: {'; '.join(c.check + ': ' + c.message for c in self.not_checked)}"
        apart = [c.check for c in self.data_rules]
        return f"pre-flight passed at {self.devices} devices ({self.devices_from})" + (f"; rules about the data not run: {'; '.join(apart)}" if apart else "")

    def format_text(self, verbose: bool = False) -> str:
        """The verdict, each finding with its fix, the warnings; every check, what stood in and the memory with *verbose*
        (:func:`msnb.fullsize.views.preflight_text`)."""
        from .views import preflight_text  # deferred: the views

        return preflight_text(self, verbose=verbose)

    def _repr_html_(self) -> str:
        from .views import preflight_html  # deferred: the views (matplotlib for the memory's picture)

        return preflight_html(self)

    def __repr__(self) -> str:
        return f"<PreflightResult {os.path.basename(self.config)}: {self.outcome}, {len(self.findings)} findings, {len(self.warnings)} warnings>"


def _leaf_index(lines: dict) -> dict:
    """YAML leaf name -> its dotted keys, in file order."""
    out = {}
    for dotted in sorted(lines, key=lambda k: lines[k] or 0):
        out.setdefault(dotted.rsplit(".", 1)[-1], []).append(dotted)
    return out


# the sections mindformers' startup checks read: a word of a message is looked up among their keys only
_CHECKED_SECTIONS = ("model.model_config.", "parallel_config.", "recompute_config.", "swap_config.", "moe_config.", "parallel.", "context.")
_PARALLEL_KEY_WORDS = (
    ("device_num", "parallel_config.data_parallel"),
    ("context_parallel is only available", "parallel_config.context_parallel"),
    ('must contain the key "type"', "model.model_config.type"),  # the registry found no class to build: the model names none
    # rules the full-size network's constructors and MindSpore's compiler hold: the layout key a user changes to meet them
    ("'kv_num_heads' must be a multiple of 'tensor_parallel", "parallel_config.model_parallel"),
    ("to be divisible by expert_model_parallel_size", "parallel_config.expert_parallel"),
    ("expert_model_parallel_size must divide", "parallel_config.expert_parallel"),
    ("MoE and tensor parallelism", "parallel_config.use_seq_parallel"),
    ("When zero_bubble_v is enabled, micro_batch_num", "parallel_config.micro_batch_num"),
    ("For zero_bubble_v scheduler, micro_size", "parallel_config.micro_batch_num"),
    ("When zero_bubble_v is enabled, pp_interleave_num", "parallel_config.pp_interleave_num"),
    ("For 1F1B Scheduler", "parallel_config.micro_batch_num"),
    ("weight aggregation is not supported", "monitor_config.stable_rank_config.do_aggregation"),
    ("per epoch size must be more than 0", "runner_config.sink_size"),
)


def _key_of(message: str, loaded, transformer_keys: dict) -> str:
    """The YAML key a mindformers message is about: a named key of the file (or the model_config key mindformers converts into it)."""
    for word, key in _PARALLEL_KEY_WORDS:
        if word in message:
            return key
    leaves = _leaf_index({k: v for k, v in loaded.lines.items() if k.startswith(_CHECKED_SECTIONS)}) if loaded is not None else {}
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message):
        for name in [word, *transformer_keys.get(word, [])]:
            if name in leaves:
                return leaves[name][0]
    return ""


def checks_from(said: dict, loaded) -> list:
    """The child's checks as :class:`PreflightCheck` objects, each finding and warning given its YAML key, file and line."""
    tkeys = said.get("transformer_keys") or {}
    out = []
    for c in said.get("checks", []):
        outcome = {"warned": "warning"}.get(c["outcome"], c["outcome"])
        message = " ".join(str(c.get("message", "")).split())
        if len(message) > 400:
            message = message[:397] + "..."
        key = _key_of(message, loaded, tkeys) if outcome in (FAILED, "warning") else ""
        where = ""
        if key and loaded is not None:
            line = loaded.lines.get(key)
            where = f"{loaded.where(key)}" + (f":{line}" if line else "")
        out.append(PreflightCheck(c["check"], outcome, message, key, where, c.get("source", ""), c.get("kind") or "model"))
    return out


def _per_node_of(launch, per_node) -> tuple:
    """(cards a node, where that came from): *per_node* (``--devices-per-node``), else the launch line's, else None
    (mindformers' default of 8)."""
    if per_node is not None:
        if isinstance(per_node, bool) or not isinstance(per_node, int) or per_node < 1:
            raise SmokeError(f"--devices-per-node {per_node!r}: the cards a node are a whole number of 1 or more")
        return per_node, f"--devices-per-node {per_node}"
    if launch:
        read = read_launch(launch)
        return read.per_node, read.per_node_from
    return None, ""


def _devices_of(devices, launch, per_node=None) -> tuple:
    """(devices, devices per node, where the count and the cards a node came from) from *devices* or *launch*, and *per_node*."""
    if devices is not None and launch:
        raise SmokeError("give --devices or --launch, not both")
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 1):
        raise SmokeError(f"--devices {devices!r}: a device count is a whole number of 1 or more")
    per, per_from = _per_node_of(launch, per_node)
    if launch:
        devices, _, devices_from = launch_devices(launch)
    elif devices is None:
        return None, per, "unknown: neither --devices nor --launch was given"
    else:
        devices_from = "--devices"
    return devices, per, f"{devices_from}; {per_node_words(per, per_from)}"


def _screen(path: str):
    """The config as msnb reads it (for keys and lines); a YAML that is no mindformers run config is refused in one line."""
    # deferred: PyYAML and the config reader
    from ..config import load_config
    from ..config.run_config import is_mindformers_run

    loaded = load_config(path)
    if not is_mindformers_run(loaded.data):
        raise SmokeError(f"{path} is not a mindformers run config (it needs model.model_config and trainer, run_mode or runner_config): nothing to pre-flight")
    return loaded


def _name_refused(path: str, devices, devices_from) -> PreflightResult:
    check = PreflightCheck(
        "MindFormerConfig file-name rule",
        FAILED,
        "mindformers' MindFormerConfig reads a file only when its name ends in 'yaml' or 'yml' (case-sensitive): the real run starts with an empty config",
        "",
        path,
        "mindformers/tools/register/config.py (MindFormerConfig.__init__)",
    )
    return PreflightResult(path, devices, devices_from, [check])


def run_preflights(items: list, *, timeout: float = PREFLIGHT_TIMEOUT, suggest: bool = True) -> list:
    """Several configs' pre-flights: ``[(path, devices, launch[, devices_per_node]), ...]``, each in a child process of its own.

    One child per config, as each cluster job is a process of its own: building one full-size network sets
    process-wide state (MindSpore's contexts, CPU affinity, mindformers' parallel groups) that a second build in the
    same process would trip over, and that refusal would be msnb's doing blamed on the second config.

    With *suggest*, each finding with a numeric fix gets the edits proved to pass (the pre-flight run again on the
    config with each edit: :func:`_prove_suggestions`).

    Returns:
        A :class:`PreflightResult` per item, in order (no memory section: see :func:`run_preflight`).
    """
    prepared, results = [], {}
    for i, (path, devices, launch, *per_node) in enumerate(items):
        path = os.fspath(path)
        devices, per_node, devices_from = _devices_of(devices, launch, *per_node)
        loaded = _screen(path)
        if not mindformers_reads_name(path):
            results[i] = _name_refused(path, devices, devices_from)
            continue
        prepared.append((i, path, loaded, devices, per_node, devices_from))
    workdir = tempfile.mkdtemp(prefix="msnb-preflight-")
    try:
        for i, path, loaded, devices, per_node, devices_from in prepared:
            run = {"workdir": workdir, "config": os.path.abspath(path), "devices": devices, "per_node": per_node}
            results[i] = _one_child(workdir, run, path, loaded, devices_from, timeout)
            if suggest and results[i].findings:
                _prove_suggestions(workdir, run, path, loaded, devices_from, timeout, results[i])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return [results[i] for i in range(len(items))]


def _one_child(workdir: str, run: dict, path: str, loaded, devices_from: str, timeout: float) -> PreflightResult:
    """One config's pre-flight in its own child; its result given YAML keys and lines."""
    (result,) = _children(workdir, [run], path, loaded, devices_from, timeout)
    return result


PROOFS_AT_ONCE = 2  # children proving suggestions side by side: each is one busy thread and about 1.1 GB


def _children(workdir: str, runs: list, path: str, loaded, devices_from: str, timeout: float) -> list:
    """Pre-flights of *runs* (one config, each run with its own overrides) in children of their own, side by side: the
    first in *workdir*, the others in folders of their own inside it. Their results, in order, given YAML keys and lines."""
    started = time.monotonic()
    dirs = [workdir] + [os.path.join(workdir, f"child-{i}") for i in range(1, len(runs))]
    runs = [dict(run, workdir=folder) for run, folder in zip(runs, dirs)]
    envs = [_prepare(folder, run) for folder, run in zip(dirs, runs)]
    try:
        errors = _run_children(dirs, envs, timeout)
    except Stopped as stop:  # the scratch folder first, then the signal as it would have come (by default the end)
        shutil.rmtree(workdir, ignore_errors=True)
        signal.raise_signal(stop.signum)
        raise SmokeError(f"the pre-flight was stopped by {stop.name}") from None
    seconds = time.monotonic() - started
    return [_collect(folder, run, path, loaded, devices_from, error, seconds) for folder, run, error in zip(dirs, runs, errors)]


def _prepare(folder: str, run: dict) -> dict:
    """*folder* made ready for one child (its spec written, an earlier child's result removed); the child's environment."""
    os.makedirs(folder, exist_ok=True)
    for name in ("spec.json", "preflight.json"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(folder, name))
    with open(os.path.join(folder, "spec.json"), "w") as f:
        json.dump({"workdir": folder, "runs": [run]}, f)
    return child_environment(folder, TMPDIR=folder, PYTHONUNBUFFERED="1")  # this machine's launch, if any, is not the cluster's


def _collect(folder: str, run: dict, path: str, loaded, devices_from: str, error: str, seconds: float) -> PreflightResult:
    """What one child wrote in *folder*, as a :class:`PreflightResult` (what went wrong with the child kept)."""
    try:
        with open(os.path.join(folder, "preflight.json")) as f:
            said_all = json.load(f)
    except (OSError, ValueError):
        said_all = []
    said = said_all[0] if said_all and isinstance(said_all[0], dict) else {}
    problem = said.get("error") or ("" if said else (error or "the pre-flight's child wrote no result"))
    if error and said and not problem and not said.get("done"):
        problem = error  # the child died midway: what it did is kept, the rest was not checked
    result = PreflightResult(
        path, run["devices"], devices_from, checks_from(said, loaded), said.get("mindformers", ""), problem, seconds,
        stood_in=said.get("stood_in") or [],
    )  # fmt: skip
    result.traceback = said.get("traceback") or next((c.get("traceback", "") for c in said.get("checks", []) if c.get("traceback")), "")
    result.layout, result.dims, result.scheduler = said.get("layout") or {}, said.get("dims") or {}, said.get("scheduler") or "1f1b"
    return result


MAX_PROOFS = 4  # pre-flights run to prove suggestions, for one config (each builds the full-size network again)


def _prove_suggestions(workdir: str, run: dict, path: str, loaded, devices_from: str, timeout: float, result: PreflightResult) -> None:
    """For each finding with a numeric fix, the nearest edits (:mod:`msnb.fullsize.suggest`), each proved by the
    whole pre-flight on the config with that edit in a child of its own; only those that pass are kept on the finding.

    Up to :data:`PROOFS_AT_ONCE` proofs run side by side, never more than could still be shown, so the edits proved and
    kept are those proving them one by one would give."""
    from .suggest import MAX_PER_FINDING, candidates  # deferred: only after a finding

    proofs = 0
    for finding in result.findings:
        edits = candidates(finding.key, finding.message, result.layout, result.dims, result.devices, result.scheduler)
        while edits and proofs < MAX_PROOFS and len(finding.suggestions) < MAX_PER_FINDING:
            batch = edits[: min(PROOFS_AT_ONCE, MAX_PROOFS - proofs, MAX_PER_FINDING - len(finding.suggestions))]
            edits, proofs = edits[len(batch) :], proofs + len(batch)
            proved = _children(workdir, [dict(run, overrides=edit.as_overrides()) for edit in batch], path, loaded, devices_from, timeout)
            for edit, proof in zip(batch, proved):
                if proof.outcome != FAILED and not proof.msnb_errors and not proof.error:
                    finding.suggestions.append(edit.words())


def _run_children(dirs: list, envs: list, timeout: float) -> list:
    """The pre-flight's children, one per folder, started together and waited on; what went wrong with each ("" when
    nothing).

    SIGTERM or SIGHUP while they run stops every child and raises :class:`Stopped` once the signals are given back.
    """
    with StopSignals() as signals, contextlib.ExitStack() as logs:
        procs: list = []
        try:
            for folder, env in zip(dirs, envs):
                log = logs.enter_context(open(os.path.join(folder, "preflight.log"), "ab"))
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "msnb.fullsize.child", os.path.join(folder, "spec.json")],
                        cwd=folder,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )  # fmt: skip
                )
            signals.watching()
            codes = _wait_all(procs, timeout)
            signals.done()
        finally:  # each child leads its own session: end every process in it, what an exited child left behind included
            for proc in procs:
                end_process_group(proc.pid)
                proc.wait()
    said = {None: f"mindformers' checks did not finish in {timeout:.0f} s", 0: ""}
    return [said.get(code, f"the pre-flight's child exited with status {code}") for code in codes]


def _wait_all(procs: list, timeout: float) -> list:
    """Each child's exit status, or None for one still running when *timeout* seconds have passed."""
    deadline = time.monotonic() + timeout
    codes = [None] * len(procs)
    for i, proc in enumerate(procs):
        with contextlib.suppress(subprocess.TimeoutExpired):
            codes[i] = proc.wait(max(0.0, deadline - time.monotonic()))
    return codes


def run_preflight(
    config,
    *,
    devices: int | None = None,
    launch: str | None = None,
    timeout: float = PREFLIGHT_TIMEOUT,
    memory: bool = True,
    card_gb=None,
    card: str | None = None,
    devices_per_node: int | None = None,
) -> PreflightResult:
    """mindformers' own startup checks on *config* at full size, in a child process; see the module's docstring.

    Args:
        config: a mindformers run YAML.
        devices: the device count the launch will have (None: from *launch*, else unknown).
        launch: the launcher command line the cluster will run (msrun, torchrun-style, msrun_launcher.sh).
        timeout: seconds before the child is stopped (then "not checked").
        memory: add the per-card memory estimate (:func:`msnb.fullsize.memory.estimate_card_memory`).
        card_gb: the card's memory in GiB (a number above 0) or a card's name, for the memory check (None: the config's
            ``context.max_device_memory``, else "not checked").
        card: or the card by name (:data:`msnb.fullsize.cards.CARDS`).
        devices_per_node: the cards a node, for mindformers' server count (None: *launch*'s local worker count, else
            mindformers' default of 8, said with its warning).

    Raises:
        SmokeError: both devices and launch, a launch line with no count or a count that is no whole number of 1 or more,
            a file that is not a mindformers run config.
        UsageError: an unknown card, both card and card_gb, a card's memory that is no finite number above 0.
        ConfigError: a file that cannot be read.
    """
    from .cards import card_size  # before anything starts: a card that is no card is one line

    card_size(card_gb, card)
    config, _ = resolve_shipped(config)  # configs/qwen3/... not here: the installed mindformers' own copy (its path is shown)
    result = run_preflights([(config, devices, launch, devices_per_node)], timeout=timeout)[0]
    say_cards_a_node(result.checks, per_node_words(*_per_node_of(launch, devices_per_node)))
    if memory and mindformers_reads_name(result.config):
        _add_memory(result, result.config, result.devices, card_gb, card)
    return result


def _add_memory(result: PreflightResult, path: str, devices, card_gb, card=None) -> None:
    """The per-card memory table (:mod:`msnb.fullsize.memory`) as a section and a check: not fitting the card (else the
    config's ``context.max_device_memory``) or a size mindformers would refuse is a finding; no card and no
    ``max_device_memory`` is "not checked"."""
    from .memory import memory_check  # deferred: the memory table reads the config (PyYAML) only when asked for

    result.memory, said = memory_check(path, devices=devices, card_gb=card_gb, card=card)
    result.checks.append(PreflightCheck(said["check"], said["outcome"], said["message"], said["key"]))


__all__ = ["PreflightCheck", "PreflightResult", "launch_devices", "mindformers_reads_name", "run_preflight", "run_preflights", "checks_from"]
