"""Is a kernel ready, started the way an editor will start it? (``msnb doctor --kernel``)

A kernel that works from a terminal can still fail in VS Code on a remote
server: the editor's server starts it from ``kernel.json`` alone (its argv and
env) in an environment that never sourced the user's profile or CANN's
``set_env.sh``.  So the check starts the kernel through jupyter_client exactly
like a front end, from a fresh minimal environment (HOME, PATH=/usr/bin:/bin,
LANG, not this shell's variables), runs a probe inside, stops it, and compares
what the kernel has with what a login shell (``bash -lc env``) and the machine
(an installed CANN toolkit) have.  Each problem becomes a
:class:`~msnb.findings.Finding` with its fix.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import re
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_core.paths import SYSTEM_JUPYTER_PATH

from .environment import ASCEND_HOME_VARS, ascend_variables, installed_ascend_toolkit, login_shell_env, npu_device_nodes
from .errors import KernelSpecError, UnsafeFile
from .findings import ERROR, INFO, WARNING, Finding
from .kernel import MARKER, kernels_dir, locate, read_spec, removal_command, where_of
from .process_sweep import sweep
from .processes import end_process_group
from .safe_files import loads_json
from .status import ResultView
from .words import count

DEFAULT_KERNEL = "mindspore"
MARK = "__msnb_probe__"
# A ``$VAR`` or ``${VAR}`` reference: jupyter_client expands it from the front end's environment, other front ends do not.
_REFERENCE = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")
# Signs in an error text that the Ascend (CANN) libraries were not found.
_ASCEND_LOAD_ERROR = re.compile(r"libascend|libge_|libhccl|libacl|libmindspore_ascend|ascend.*cannot open shared object", re.IGNORECASE)

# What runs inside the kernel: plain Python with no msnb import of its own, so it
# reports honestly on a kernel whose msnb is missing, old or broken.
_BASIC_PROBE = f"""
def __msnb_probe():
    import json, os, platform, sys
    info = {{"python": platform.python_version(), "executable": sys.executable, "env": dict(os.environ)}}
    try:
        import msnb
        info["msnb"] = getattr(msnb, "__version__", "?")
        info["msnb_path"] = os.path.dirname(msnb.__file__)
    except Exception as exc:
        info["msnb"] = None
        info["msnb_error"] = f"{{type(exc).__name__}}: {{exc}}"
    ip = get_ipython()
    info["extensions"] = sorted(ip.extension_manager.loaded)
    info["magics"] = sorted(m for m in ip.magics_manager.magics["line"] if m.startswith("mfmon_"))
    print({MARK!r} + json.dumps(info))
__msnb_probe()
del __msnb_probe
"""

_MINDSPORE_PROBE = f"""
def __msnb_probe():
    import json, time
    started = time.perf_counter()
    try:
        import mindspore as ms
        info = {{"mindspore": ms.__version__, "device_target": ms.get_context("device_target")}}
        try:
            from mindspore import hal
            info["available"] = {{d: bool(hal.is_available(d)) for d in ("Ascend", "GPU", "CPU")}}
        except Exception as exc:
            info["available_error"] = f"{{type(exc).__name__}}: {{exc}}"
    except BaseException as exc:
        info = {{"mindspore": None, "mindspore_error": f"{{type(exc).__name__}}: {{exc}}"}}
    info["import_s"] = round(time.perf_counter() - started, 3)
    print({MARK!r} + json.dumps(info))
__msnb_probe()
del __msnb_probe
"""


@dataclass
class KernelReadiness(ResultView):
    """What ``msnb doctor --kernel`` found about one kernel; ``blocking`` when a finding is an error."""

    name: str
    path: str
    python: str
    display_name: str = ""
    starts: bool = False
    start_s: float = 0.0  # seconds until the kernel answered, or until it failed; 0.0 when it was not started
    inside: dict = field(default_factory=dict)
    findings: list = field(default_factory=list)
    # The kernel's whole environment as the probe saw it: kept for the comparisons, never printed (it may hold secrets).
    environment: dict | None = field(default=None, repr=False)

    @property
    def blocking(self) -> bool:
        """True when a finding is an error: the kernel will not work as a MindSpore notebook kernel."""
        return any(f.severity == ERROR for f in self.findings)

    @property
    def passed(self) -> bool:
        """The kernel is ready: nothing blocks (``msnb doctor --kernel`` exits 0)."""
        return not self.blocking

    def as_dict(self) -> dict:
        """The JSON ``msnb doctor --kernel --json`` prints."""
        return {
            "kernel": {"name": self.name, "path": self.path, "python": self.python, "starts": self.starts, "start_s": self.start_s, "inside": self.inside},
            "findings": [{"rule": f.rule, "severity": str(f.severity), "message": f.message, "fix": f.fix} for f in self.findings],
        }

    def __repr__(self) -> str:
        errors = sum(f.severity == ERROR for f in self.findings)
        return f"<KernelReadiness {self.name!r}: {'starts' if self.starts else 'does not start'}, {count(len(self.findings), 'finding')}, {errors} blocking>"

    def format_text(self) -> str:
        """The report as ``msnb doctor --kernel`` prints it: the kernel, what ran inside, the findings with fixes."""
        inside = self.inside
        lines = [f"Kernel      {self.name} ({self.display_name or 'no display name'})  {self.path}", f"Python      {self.python}"]
        if self.starts:
            lines.append(f"Starts      yes, ready in {self.start_s:.1f} s (from kernel.json alone, in a fresh minimal environment, as an editor starts it)")
        else:
            lines.append(f"Starts      no (gave up after {self.start_s:.1f} s)" if self.start_s else "Starts      no (not attempted)")
        if inside.get("python"):
            msnb = f"msnb {inside['msnb']}" if inside.get("msnb") else "msnb not importable"
            magics = "magics loaded" if inside.get("magics_loaded") else "magics NOT loaded"
            if inside.get("mindspore"):
                ms = f"MindSpore {inside['mindspore']} on {inside.get('device') or '?'}"
            elif "mindspore_error" in inside:
                ms = "MindSpore does not import"
            else:
                ms = "MindSpore not checked"
            lines.append(f"Inside      Python {inside['python']}, {msnb} ({magics}), {ms}")
        ascend = inside.get("ascend_env") or {}
        if ascend:
            lines.append("Ascend env  " + "; ".join(f"{k}={':'.join(v) if isinstance(v, list) else v}" for k, v in ascend.items()))
        lines.append("")
        if self.findings:
            lines.append("Findings")
            for f in self.findings:
                first, *more = f.message.splitlines() or [""]
                lines.append(f"  {str(f.severity).upper():<8} {first} [{f.rule}]")
                lines.extend(f"           | {line}" for line in more)
                if f.fix:
                    lines.append(f"           fix: {f.fix}")
        else:
            lines.append("Findings    none: this kernel is ready")
        return "\n".join(lines)


def front_end_env(source: dict | None = None) -> dict:
    """A fresh environment like the one a desktop editor's server starts kernels from.

    Only who the user is and the locale survive; ``PATH`` is the system's
    ``/usr/bin:/bin``.  Nothing the user's shell profile or ``set_env.sh`` added.

    Args:
        source: where to take HOME, USER, LOGNAME and LANG from (default: this process's environment).

    Returns:
        The environment, ready for ``KernelManager.start_kernel(env=...)``.
    """
    source = os.environ if source is None else source
    env = {"PATH": "/usr/bin:/bin", "LANG": source.get("LANG") or "C.UTF-8"}
    for key in ("HOME", "USER", "LOGNAME"):
        if source.get(key):
            env[key] = source[key]
    return env


def _same_kernel(one, other) -> bool:
    """Two kernelspec folders that start the same command with the same environment variables (names aside)."""
    try:
        a, b = (json.loads((Path(d) / "kernel.json").read_text()) for d in (one, other))
    except (OSError, ValueError):
        return False
    if not (isinstance(a, dict) and isinstance(b, dict) and isinstance(a.get("argv"), list) and isinstance(b.get("argv"), list)):
        return False
    if not a["argv"] or not b["argv"] or a["argv"][1:] != b["argv"][1:] or (a.get("env") or {}) != (b.get("env") or {}):
        return False
    one_python, other_python = str(a["argv"][0]), str(b["argv"][0])
    if one_python == other_python:
        return True
    try:  # bin/python and bin/python3 of one environment (the same folder: two environments' links share their target)
        return Path(one_python).parent == Path(other_python).parent and os.path.samefile(one_python, other_python)
    except OSError:
        return False


def spec_location_finding(name: str, resource_dir: str, prefix_chosen: bool = False) -> Finding | None:
    """``kernel-location``: a kernelspec shadowed by another of the same name, nowhere Jupyter looks, or found only
    under an environment prefix (editors list it conditionally).

    The fix is never the install just made: a shadowed kernelspec is fixed by
    removing the one that comes first (or this one), and a ``--user`` install
    is advised alone only where the user's folder comes before this one in
    Jupyter's search order (in a virtual environment it does not).  With
    *prefix_chosen* (``install-kernel --sys-prefix`` or ``--prefix``: the user
    asked for that place) a kernelspec found only under its prefix is said as
    information, not warned about as a mistake; shadowed or not found at all
    still warns.
    """
    from jupyter_client.kernelspec import KernelSpecManager  # deferred: jupyter_client (zmq, traitlets)

    here = Path(resource_dir).resolve()
    found = locate(name)
    this = next((i for i in found if Path(i.resource_dir).resolve() == here), None)
    if not found or this is None:
        first = f"; they start the one {found[0].where} ({found[0].resource_dir})" if found else ""
        if found and found[0].option:  # a --user copy could be shadowed by that one: replace the one they start
            fix = f"install it over the one they start: msnb install-kernel --name {name} {found[0].option} --force"
        else:
            fix = f"install it where they look: msnb install-kernel --user --name {name}"
        where = f"Jupyter and editors do not find the kernelspec at {here}: its folder is not on Jupyter's search path{first}"
        return Finding("kernel-location", WARNING, where, fix)
    if this.shadowed_by:
        first = found[0]
        if _same_kernel(first.resource_dir, here):
            # the README's steps install --sys-prefix for the tests, then for the user: one kernel, found twice
            return Finding(
                "kernel-location",
                INFO,
                f"the kernelspec {name!r} {first.where} ({first.resource_dir}) comes first in Jupyter's search order and starts the "
                f"same interpreter with the same settings as this one {this.where}: notebooks get the same kernel either way",
            )
        return Finding(
            "kernel-location",
            WARNING,
            f"Jupyter and editors start another kernelspec named {name!r}: the one {first.where} ({first.resource_dir}) comes first "
            f"in their search order, so this one {this.where} ({here}) is never started (`msnb list-kernels` shows both)",
            f"remove the one that comes first: {removal_command(first)} (or keep it and remove this one: {removal_command(this)})",
        )
    user_dir = kernels_dir(True, None)
    everywhere = [user_dir, *(Path(p) / "kernels" for p in SYSTEM_JUPYTER_PATH)]
    if any(here.parent == d.resolve() or (d / name / "kernel.json").is_file() for d in everywhere):
        return None
    kernels = here.parent
    if kernels.parts[-3:] == ("share", "jupyter", "kernels"):
        where = f"the environment prefix {kernels.parent.parent.parent}"
    else:
        where = str(kernels)
    on_path = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p and Path(p).resolve() == kernels.parent]
    how = " (found here only because JUPYTER_PATH names it)" if on_path else ""
    dirs = [Path(d).resolve() for d in KernelSpecManager().kernel_dirs]
    user_first = user_dir.resolve() in dirs and (kernels not in dirs or dirs.index(user_dir.resolve()) < dirs.index(kernels))
    if user_first:
        fix = f"install it for the user instead, with the same interpreter: msnb install-kernel --user --name {name}"
    else:  # a --user copy alone would be shadowed by this one: move it, do not copy it
        fix = (
            f"move it to the user's folder (a user copy alone would be shadowed by this one, which Jupyter searches first {where_of(kernels)[0]}): "
            f"msnb install-kernel --user --name {name} && {removal_command(this)}"
        )
    if prefix_chosen:  # where the user asked for it: said, with what that means and how to change it, not warned about
        return Finding(
            "kernel-location",
            INFO,
            f"the kernelspec {name!r} is installed under {where}{how}, as asked: Jupyter lists it when started from that "
            "environment, and VS Code while that environment's interpreter is selected",
            f"to have editors list it whatever interpreter is selected, {fix}",
        )
    return Finding(
        "kernel-location",
        WARNING,
        f"the kernelspec {name!r} lives only under {where}{how}: VS Code lists it only while that "
        "environment's interpreter is selected, and Jupyter only when started from that environment",
        fix,
    )


def _set_env_script(toolkit_home: str | None) -> str:
    """The usual place of CANN's set_env.sh next to a toolkit home, for the fix's command line."""
    if toolkit_home:
        home = Path(toolkit_home)
        for candidate in (home.parent / "set_env.sh", home / "set_env.sh", home / "bin" / "setenv.bash"):
            if candidate.is_file():
                return str(candidate)
    return "/usr/local/Ascend/ascend-toolkit/set_env.sh"


def _tail(text: str, lines: int = 15) -> str:
    """The last *lines* non-empty lines, without ipykernel's routine warning about transport encryption."""
    kept = [line for line in text.strip().splitlines() if line.strip() and "transport encryption" not in line][-lines:]
    return "\n".join(kept)


class _KernelDied(Exception):
    """The kernel process ended while a probe ran (a crash in ``import mindspore`` is the usual one)."""


def _run_probe(kc, km, code: str, timeout: float) -> tuple[dict | None, str]:
    """Execute *code* in the kernel; returns (the JSON it printed after MARK, the tail of its stderr or its error).

    Watches the kernel process while waiting, so a crash is reported at once
    instead of after *timeout*; raises :class:`_KernelDied` or ``TimeoutError``.
    Memory stays bounded whatever the kernel prints: the answer line is kept
    (up to :data:`MAX_PROBE_ANSWER`), of everything else only the last
    :data:`MAX_OUTPUT_TAIL` characters.
    """
    out, err = _ProbeOutput(), _Tail()
    msg_id = kc.execute(code, silent=False, store_history=False)
    deadline = time.monotonic() + timeout
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no answer within {timeout:.0f} s")
        try:
            msg = kc.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            if not km.is_alive():
                raise _KernelDied(err.text()) from None
            continue
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            text = str(content.get("text", ""))
            out.feed(text) if content.get("name") == "stdout" else err.add(text)
        elif kind == "error":
            err.add(f"{content.get('ename')}: {content.get('evalue')}")
        elif kind == "status" and content.get("execution_state") == "idle":
            break
    out.finish()
    if out.answer is not None:
        try:
            answer = loads_json(out.answer, where="the probe's answer")
        except UnsafeFile as exc:
            return None, f"{exc}\n{err.text()}"
        if isinstance(answer, dict):
            return answer, err.text()
    if out.too_big:
        return None, f"the probe's answer was larger than {MAX_PROBE_ANSWER} characters\n{err.text()}"
    return None, err.text() or out.tail.text()


MAX_PROBE_ANSWER = 16 << 20  # characters of the probe's answer line (the kernel's whole environment as JSON)
MAX_OUTPUT_TAIL = 64 << 10  # characters of any other output kept (the end of a crash is what matters)


class _Tail:
    """The last :data:`MAX_OUTPUT_TAIL` characters of a stream, however much it carries."""

    def __init__(self, limit: int = MAX_OUTPUT_TAIL):
        self.limit = limit
        self._pieces: collections.deque = collections.deque()
        self._size = 0

    def add(self, text: str) -> None:
        if len(text) >= self.limit:
            self._pieces.clear()
            text = text[-self.limit :]
            self._size = 0
        self._pieces.append(text)
        self._size += len(text)
        while self._size - len(self._pieces[0]) >= self.limit:
            self._size -= len(self._pieces.popleft())

    def text(self) -> str:
        return "".join(self._pieces)[-self.limit :]


class _ProbeOutput:
    """A probe's stdout: its answer line (the one starting with MARK) kept whole, the rest only as a tail."""

    def __init__(self):
        self.answer: str | None = None
        self.too_big = False
        self.tail = _Tail()
        self._pieces: list[str] = []
        self._size = 0
        self._state = "start"  # start (not yet known), answer (a MARK line), skip (another line, or too long)

    def feed(self, text: str) -> None:
        self.tail.add(text)
        lines = text.split("\n")
        for line in lines[:-1]:
            self._add(line)
            self._end_line()
        self._add(lines[-1])

    def _add(self, piece: str) -> None:
        if self._state == "skip" or not piece:
            return
        self._pieces.append(piece)
        self._size += len(piece)
        if self._state == "start" and self._size >= len(MARK):
            head = "".join(self._pieces)
            self._pieces, self._state = [head], ("answer" if head.startswith(MARK) and self.answer is None else "skip")
        if self._state == "skip" or self._size > MAX_PROBE_ANSWER + len(MARK):
            self.too_big = self.too_big or self._state == "answer"
            self._pieces, self._size, self._state = [], 0, "skip"

    def _end_line(self) -> None:
        if self._state == "answer":
            self.answer = "".join(self._pieces)[len(MARK) :]
        self._pieces, self._size, self._state = [], 0, "start"

    def finish(self) -> None:
        self._end_line()


def _log_tail(path: Path, limit: int = MAX_OUTPUT_TAIL) -> str:
    """The last *limit* bytes of the kernel's own output file, decoded (the file may hold gigabytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _resolve(name: str, spec_dir: str | os.PathLike | None):
    """(KernelSpecManager, KernelSpec) for *name*, from *spec_dir* when given; no such kernel raises KernelSpecError (exit 2)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel  # deferred: jupyter_client (zmq, traitlets)

    ksm = KernelSpecManager(kernel_dirs=[str(Path(spec_dir).parent)]) if spec_dir is not None else KernelSpecManager()
    try:
        found = ksm.find_kernel_specs()
    except (OSError, ValueError) as exc:
        raise KernelSpecError(f"the kernelspecs cannot be listed: {exc}") from None
    if name in found:
        read_spec(Path(found[name]) / "kernel.json")  # the shape checked here, before jupyter_client parses it with no bounds
    try:
        return ksm, ksm.get_kernel_spec(name)
    except NoSuchKernel:
        raise KernelSpecError(f"no kernelspec named {name!r} is installed (see `msnb list-kernels`)") from None
    except Exception as exc:  # traitlets' TraitError for a field of the wrong type, OSError, ValueError
        raise KernelSpecError(f"the kernelspec {name!r} cannot be read: {' '.join(str(exc).split())}") from None


def _interpreter_findings(findings: list, python: str, base_env: dict, reinstall: str | None, name: str) -> bool:
    """Whether the kernelspec's interpreter exists for the front end; a bare ``python`` or a missing one is a finding.

    Returns:
        True when the interpreter exists (a bare one does: the front end supplies it).
    """
    # jupyter_client runs a bare "python"/"python3"/"python3.X" with its own interpreter, VS Code with the selected one
    front_end_python = python in {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
    if front_end_python:
        exists = True
        findings.append(
            Finding(
                "kernel-python-relative",
                INFO,
                f"kernel.json starts a bare {python!r}: Jupyter runs it with the server's own Python ({sys.executable} here), "
                "VS Code with whichever interpreter is selected, so the kernel's packages depend on the front end",
                "install a kernel that names its interpreter in full: msnb install-kernel --name NAME (run with that Python)",
            )
        )
    else:
        exists = bool(python) and (os.path.exists(python) if os.path.isabs(python) else shutil.which(python, path=base_env["PATH"]) is not None)
    if not exists:
        findings.append(
            Finding(
                "kernel-python-missing",
                ERROR,
                f"kernel.json starts {python or '(empty argv)'}, which does not exist"
                + ("" if os.path.isabs(python or "/") else f" on the front end's PATH ({base_env['PATH']})")
                + ": front ends hide such kernels or fail to start them",
                reinstall or f"reinstall the kernel from the environment it should use, or remove it: jupyter kernelspec remove {name}",
            )
        )
    return exists


def _reference_findings(references: dict, seen: dict, made_by_msnb: bool) -> list:
    """A ``${VAR}`` in kernel.json's env: literal text when the front end lacks VAR, an expansion only some front ends do."""
    out = []
    for key, value in references.items():
        got = seen.get(key)
        left = sorted({m.group(0) for m in _REFERENCE.finditer(value)} & {m.group(0) for m in _REFERENCE.finditer(got or "")})
        literal = bool(left)
        if literal:
            message = (
                f"kernel.json sets {key}={value!r}; started here the kernel got {got!r}: {', '.join(left)} stayed literal text "
                "because the front end's environment lacks the variable"
            )
        elif got is not None:
            message = f"kernel.json sets {key}={value!r}; jupyter_client expanded it to {got!r} here, but other front ends take it literally"
        else:
            message = f"kernel.json sets {key}={value!r}; front ends disagree on expanding references (some take them literally)"
        out.append(
            Finding(
                "kernel-env-unexpanded",
                ERROR if literal else WARNING,
                message,
                "store the value in full, as `msnb install-kernel --ascend-env <set_env.sh>` does"
                + f" (or `--env {key}=<the full value>`)"
                + (" and reinstall" if made_by_msnb else ""),
            )
        )
    return out


def check_kernel(
    name: str = DEFAULT_KERNEL,
    *,
    spec_dir: str | os.PathLike | None = None,
    prefix_chosen: bool = False,
    env: dict | None = None,
    startup_timeout: float = 90.0,
    mindspore_timeout: float = 180.0,
    shell_env: dict | None = None,
    dev_dir: str = "/dev",
) -> KernelReadiness:
    """Start kernel *name* as a front end does, probe it, stop it, and judge whether it is ready.

    Args:
        name: the kernelspec's name (``msnb list-kernels`` shows them).
        spec_dir: read the kernelspec from this folder instead of Jupyter's search path
            (``msnb install-kernel`` checks what it just wrote, wherever that went).
        prefix_chosen: the user asked for the kernelspec's environment prefix (``install-kernel --sys-prefix``
            or ``--prefix``): its living only there is information, not a ``kernel-location`` warning.
        env: the environment the front end starts kernels from (default: :func:`front_end_env`).
        startup_timeout: seconds to wait for the kernel to answer.
        mindspore_timeout: seconds to wait for ``import mindspore`` inside the kernel.
        shell_env: a login shell's environment to compare with (default: ``bash -lc env``, started from *env*).
        dev_dir: where device nodes live (NPUs are ``davinci0``, ``davinci1``...).

    Returns:
        A :class:`KernelReadiness`; a kernel that does not start is a finding, not an exception.

    Raises:
        KernelSpecError: no kernelspec of that name exists (the CLI exits 2).
    """
    ksm, spec = _resolve(name, spec_dir)
    base_env = front_end_env() if env is None else dict(env)
    argv = list(spec.argv or [])
    python = argv[0].replace("{resource_dir}", spec.resource_dir) if argv else ""
    made_by_msnb = MARKER in (spec.metadata or {})
    report = KernelReadiness(name=name, path=spec.resource_dir, python=python, display_name=spec.display_name)
    findings = report.findings
    reinstall = f"msnb install-kernel --name {name} --force  # run with the Python that should start it" if made_by_msnb else None

    exists = _interpreter_findings(findings, python, base_env, reinstall, name)
    not_text = sorted(k for k, v in (spec.env or {}).items() if not isinstance(v, str))
    if not_text:
        findings.append(
            Finding(
                "kernel-env-invalid",
                ERROR,
                f"kernel.json's env holds values that are not strings ({', '.join(not_text)}): front ends refuse to start the kernel",
                "write every env value as a string, or reinstall the kernel" + (f": {reinstall}" if reinstall else ""),
            )
        )
    references = {k: v for k, v in (spec.env or {}).items() if isinstance(v, str) and _REFERENCE.search(v)}
    location = spec_location_finding(name, spec.resource_dir, prefix_chosen=prefix_chosen)

    if exists and not not_text:  # a non-string env value stops every front end before the kernel runs
        _start_and_probe(report, ksm, base_env, startup_timeout, mindspore_timeout, made_by_msnb)

    findings += _reference_findings(references, report.inside.get("env_of_spec", {}), made_by_msnb)
    _ascend_findings(report, base_env, shell_env, dev_dir)
    if location is not None:
        findings.append(location)
    return report


def _start_and_probe(report: KernelReadiness, ksm, base_env: dict, startup_timeout: float, mindspore_timeout: float, made_by_msnb: bool) -> None:
    """Start the kernel, fill ``report.inside`` from the probes, add start/extension/MindSpore findings, stop it."""
    from jupyter_client.manager import KernelManager  # deferred: jupyter_client (zmq, traitlets)

    findings = report.findings
    with tempfile.TemporaryDirectory(prefix="msnb-kernel-check-") as tmp:
        log_path = Path(tmp) / "kernel-output.log"
        work = Path(tmp) / "notebook-dir"
        work.mkdir()
        km = KernelManager(kernel_name=report.name, kernel_spec_manager=ksm)
        kc = None
        marker = uuid.uuid4().hex
        pgid = None
        with open(log_path, "wb") as log:
            started = time.perf_counter()
            try:
                km.start_kernel(env={**base_env, MARKER_VAR: marker}, stdout=log, stderr=log, cwd=str(work))
                pgid = getattr(km.provisioner, "pgid", None)
                kc = km.client()
                kc.start_channels()
                kc.wait_for_ready(timeout=startup_timeout)
                report.starts = True
                report.start_s = round(time.perf_counter() - started, 3)
            except Exception as exc:
                report.start_s = round(time.perf_counter() - started, 3)
                # Whatever stops the start (RuntimeError "Kernel died before replying", TimeoutError, OSError for an
                # argv that cannot run, TypeError for a malformed kernel.json) is what a front end meets too: a finding.
                log.flush()
                stderr = _tail(_log_tail(log_path))
                findings.append(
                    Finding(
                        "kernel-start-failed",
                        ERROR,
                        f"the kernel did not start ({type(exc).__name__}: {exc})" + (f"; its output ends with:\n{stderr}" if stderr else "; it wrote nothing"),
                        _start_fix(stderr, report),
                    )
                )
            try:
                if report.starts:
                    _probe(report, kc, km, mindspore_timeout, made_by_msnb)
            except _KernelDied as died:
                log.flush()
                # Python-level output reached us over iopub before the end; a native crash's went to the process's stderr
                stderr = _tail(str(died) + "\n" + _log_tail(log_path))
                code = km.provisioner.process.returncode if km.provisioner is not None and getattr(km.provisioner, "process", None) else None
                how = f" (exit status {code})" if code is not None else ""
                findings.append(
                    Finding(
                        "kernel-mindspore-import-failed" if report.inside.get("python") else "kernel-start-failed",
                        ERROR,
                        f"the kernel died{how} while {'importing MindSpore' if report.inside.get('python') else 'answering its first probe'}"
                        + (f"; its output ends with:\n{stderr}" if stderr else "; it wrote nothing"),
                        f"run `{shlex.quote(report.python)} -c 'import mindspore'` in a terminal with the kernel's environment to see the crash; "
                        "a CANN that does not match MindSpore is the usual cause",
                    )
                )
            finally:
                if kc is not None:
                    kc.stop_channels()
                if km.has_kernel:
                    km.shutdown_kernel(now=True)
                km.cleanup_resources()
                _end_leftovers(pgid, marker)


MARKER_VAR = "MSNB_KERNEL_CHECK_ID"
"""Set in the checked kernel's environment, so what it started (even a ``setsid`` daemon) can be found and ended."""


def _end_leftovers(pgid: int | None, marker: str, grace: float = 2.0) -> None:
    """End whatever the checked kernel left running: its process group, then anything carrying its marker.

    ``shutdown_kernel`` signals the kernel's process group only while the
    kernel lives; a kernel that died first, or a child that left the group
    with ``setsid``, would outlive the check.  Never this process's own group.
    """
    end_process_group(pgid)
    sweep(MARKER_VAR, marker, grace, poll=0.05)


def _start_fix(stderr: str, report: KernelReadiness) -> str:
    python = shlex.quote(report.python)
    missing = re.search(r"No module named '?([A-Za-z0-9_.]+)", stderr)
    if missing:
        module = missing.group(1).split(".")[0]
        if module in ("ipykernel", "ipykernel_launcher", "msnb"):
            return f"{python} -m pip install {'ipykernel' if module.startswith('ipykernel') else 'msnb'}"
        return f"the kernel's Python lacks the module {module!r} its argv or start-up imports: install it into that Python, or fix kernel.json's argv"
    if _ASCEND_LOAD_ERROR.search(stderr):
        return f"msnb install-kernel --name {report.name} --ascend-env <set_env.sh>"
    return f"run the kernel's command by hand to see why: {' '.join(shlex.quote(a) for a in _argv_for_hand(report))}"


def _argv_for_hand(report: KernelReadiness) -> list[str]:
    try:
        spec = read_spec(Path(report.path) / "kernel.json")
        return [a.replace("{connection_file}", "/tmp/msnb-connection.json") for a in spec.get("argv") or []]
    except KernelSpecError:
        return [report.python]


def _probe(report: KernelReadiness, kc, km, mindspore_timeout: float, made_by_msnb: bool) -> None:
    findings = report.findings
    try:
        basic, err = _run_probe(kc, km, _BASIC_PROBE, timeout=60)
    except TimeoutError:
        basic, err = None, "it did not answer within 60 s"
    if basic is None:
        findings.append(Finding("kernel-probe-failed", ERROR, f"the kernel started but could not run a probe: {_tail(err, 5) or 'no output'}", ""))
        return
    kernel_env = basic.pop("env", None)
    kernel_env = {k: v for k, v in kernel_env.items() if k != MARKER_VAR} if isinstance(kernel_env, dict) else {}
    try:
        spec_env = read_spec(Path(report.path) / "kernel.json").get("env") or {}
    except KernelSpecError:
        spec_env = {}
    basic["env_of_spec"] = {k: kernel_env.get(k) for k in spec_env}
    basic["ascend_env"] = ascend_variables(kernel_env)
    basic["magics_loaded"] = "mfmon_doctor" in basic["magics"]
    report.inside.update(basic)
    report.environment = kernel_env

    if not basic["magics_loaded"]:
        if basic.get("msnb") is None:
            why = f"msnb is not importable in the kernel's Python ({basic.get('msnb_error')})"
            fix = f"{shlex.quote(report.python)} -m pip install msnb"
        else:
            why = "msnb's magics are not loaded (the kernel's argv does not load the extension)"
            if made_by_msnb:
                fix = f"msnb install-kernel --name {report.name}, or run `%load_ext msnb` in each notebook"
            else:  # not msnb's kernelspec: never suggest overwriting another tool's kernel
                fix = "run `%load_ext msnb` in each notebook, or use msnb's kernel: msnb install-kernel"
        findings.append(
            Finding("kernel-extension-missing", ERROR if made_by_msnb or report.name == DEFAULT_KERNEL else WARNING, f"{why}: %mfmon_* magics fail", fix)
        )

    try:
        ms, err = _run_probe(kc, km, _MINDSPORE_PROBE, timeout=mindspore_timeout)
    except TimeoutError:
        findings.append(
            Finding(
                "kernel-mindspore-timeout",
                WARNING,
                f"`import mindspore` in the kernel did not finish within {mindspore_timeout:.0f} s",
                "start the kernel and run `import mindspore` by hand; a hung device driver or a slow shared disk are usual causes",
            )
        )
        return
    if ms is None:
        ms = {"mindspore": None, "mindspore_error": _tail(err, 5) or "no output"}
    available = ms.pop("available", None) or {}
    ms["device"] = next((d for d in ("Ascend", "GPU", "CPU") if available.get(d)), ms.get("device_target"))
    if available:
        ms["devices_available"] = available
    load_errors = _ascend_load_errors(err)
    if load_errors:
        ms["ascend_load_errors"] = load_errors
    report.inside.update(ms)
    if ms.get("mindspore") is None:
        error = ms.get("mindspore_error", "")
        if "No module named 'mindspore'" in error:
            # msnb reads and plots without MindSpore; only training and smoke runs need it (as in `msnb doctor`)
            findings.append(
                Finding(
                    "kernel-mindspore-missing",
                    WARNING,
                    "MindSpore is not installed in the kernel's Python: notebooks can read and plot summaries, but not train or run %mfmon_smoke",
                    f"{shlex.quote(report.python)} -m pip install mindspore, or install the kernel from the environment that has it",
                )
            )
            return
        if _ASCEND_LOAD_ERROR.search(error):
            fix = f"msnb install-kernel --name {report.name} --ascend-env <set_env.sh>"
        else:
            fix = "run `import mindspore` in a terminal with the kernel's Python to see the full error"
        findings.append(Finding("kernel-mindspore-import-failed", ERROR, f"MindSpore does not import in the kernel: {error}", fix))


def _ascend_load_errors(stderr: str) -> list[str]:
    """MindSpore's "cannot load the Ascend plugin" lines from the probe's stderr, each once and short."""
    found = []
    for line in stderr.splitlines():
        if _ASCEND_LOAD_ERROR.search(line):
            text = line.split("Error message:", 1)[-1].strip()[:300]
            if text not in found:
                found.append(text)
    return found[:3]


def _ascend_findings(report: KernelReadiness, base_env: dict, shell_env: dict | None, dev_dir: str) -> None:
    """``kernel-ascend-*``: the machine or the login shell has CANN or NPUs, the kernel's environment or MindSpore does not."""
    inside = report.inside
    npus = npu_device_nodes(dev_dir)
    if inside.get("mindspore") and npus and not (inside.get("devices_available") or {}).get("Ascend"):
        errors = inside.get("ascend_load_errors") or []
        report.findings.append(
            Finding(
                "kernel-ascend-unavailable",
                ERROR,
                f"this machine has {count(len(npus), 'NPU')} ({dev_dir}/{npus[0]}...) but MindSpore {inside['mindspore']} in the kernel cannot use them"
                + (f": {errors[0]}" if errors else " (is this MindSpore build the Ascend one?)"),
                f"msnb install-kernel --name {report.name} --ascend-env <set_env.sh>  # CANN's libraries must be on the kernel's LD_LIBRARY_PATH"
                if errors
                else "install MindSpore's Ascend build into the kernel's Python",
            )
        )
    kernel_env = report.environment
    if kernel_env is None:  # not started: judge what the front end would pass
        from jupyter_client.kernelspec import KernelSpecManager  # deferred: jupyter_client (zmq, traitlets)

        try:
            spec_env = KernelSpecManager(kernel_dirs=[str(Path(report.path).parent)]).get_kernel_spec(report.name).env or {}
        except Exception:  # the spec was readable a moment ago; a vanished one only loses this comparison
            spec_env = {}
        kernel_env = {**base_env, **spec_env}
    if shell_env is None:
        shell_env = login_shell_env(env=base_env) or {}
    kernel_ascend = ascend_variables(kernel_env)
    shell_ascend = ascend_variables(shell_env)
    toolkit = installed_ascend_toolkit()
    shell_home = next((shell_env[v] for v in ASCEND_HOME_VARS if shell_env.get(v)), None)
    kernel_home_var = next((v for v in ASCEND_HOME_VARS if kernel_env.get(v)), None)
    fix = f"msnb install-kernel --name {report.name} --ascend-env {_set_env_script(shell_home or toolkit)}"

    if kernel_home_var is None and (toolkit or shell_home):
        where = []
        if shell_home:
            where.append(f"the login shell has {', '.join(k for k in shell_ascend if k.startswith('ASCEND_'))}")
        if toolkit:
            where.append(f"a CANN toolkit is installed at {toolkit}")
        findings_missing = [k for k in shell_ascend if k not in kernel_ascend]
        report.findings.append(
            Finding(
                "kernel-ascend-env-missing",
                ERROR,
                f"{' and '.join(where)}, but the kernel's environment has no Ascend variables"
                + (f" (missing: {', '.join(findings_missing)})" if findings_missing else "")
                + ": MindSpore's Ascend backend will not load in the notebook although it works in a terminal",
                fix,
            )
        )
        return
    if kernel_home_var is not None:
        home = kernel_env[kernel_home_var]
        if not os.path.isdir(home):
            report.findings.append(
                Finding("kernel-ascend-env-stale", ERROR, f"the kernel's {kernel_home_var}={home} does not exist (CANN moved or was upgraded?)", fix)
            )
            return
        if shell_ascend.get("LD_LIBRARY_PATH") and not kernel_ascend.get("LD_LIBRARY_PATH"):
            report.findings.append(
                Finding(
                    "kernel-ascend-env-missing",
                    ERROR,
                    f"the kernel has {kernel_home_var} but none of the Ascend LD_LIBRARY_PATH entries the login shell has "
                    f"({':'.join(shell_ascend['LD_LIBRARY_PATH'][:3])}...): CANN's libraries will not be found",
                    fix,
                )
            )
        elif shell_home and os.path.realpath(shell_home) != os.path.realpath(home):
            report.findings.append(
                Finding("kernel-ascend-env-differs", INFO, f"the kernel uses CANN at {home}, the login shell at {shell_home}", f"to follow the shell: {fix}")
            )
