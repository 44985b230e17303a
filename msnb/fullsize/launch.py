"""The launch line: the device count (and the cards a node) a launcher command line starts, read as the launcher reads it.

Understood: MindSpore's ``msrun`` (``mindspore/parallel/cluster/run.py``), torchrun-style launchers
(``torchrun``, ``python -m torch.distributed.run``) and mindformers' ``scripts/msrun_launcher.sh``.  ``msrun`` and
torchrun parse their options with argparse, so a repeated option means its last value, and only the options
before the training script are the launcher's (what follows is the script's own).  ``msrun_launcher.sh`` takes 1, 2,
6 or 9 arguments and gives each form its own cards a node.

A count that is not a whole number of 1 or more, written in the digits 0-9, is refused in one line (a
:class:`~msnb.errors.SmokeError`, exit 2) before anything starts: msnb never reads a count the launcher would not.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from ..errors import SmokeError

DEFAULT_PER_NODE = 8  # mindformers' get_device_num_per_node(): DEVICE_NUM_PER_NODE, 8 when it is not set

# torchrun's options that take no value (torch/distributed/run.py); every other option of both launchers takes one
_TORCHRUN_FLAGS = frozenset(
    {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path", "--virtual-local-rank", "--virtual_local_rank"}
)
_MSRUN_NAMES = ("msrun", "mindspore.parallel.cluster.run")
_TORCHRUN_NAMES = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
_LAUNCHER_SCRIPT = "msrun_launcher.sh"
_SCRIPT_FORMS = (1, 2, 6, 9)  # the argument counts msrun_launcher.sh accepts; any other prints its usage and exits 1
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Launch:
    """What a launch line starts: the device count, the cards a node (None: not said by the line), and where each came from."""

    devices: int
    per_node: int | None
    devices_from: str
    per_node_from: str = ""


def count(name: str, value) -> int:
    """*value* as a device count: a whole number of 1 or more in the digits 0-9, else one usage line naming *name*."""
    text = "" if value is None else str(value)
    if not _DIGITS.fullmatch(text):
        raise SmokeError(f"--launch: {name} {text!r} is not a device count (a whole number of 1 or more, written in the digits 0-9)")
    n = int(text)
    if n < 1:
        raise SmokeError(f"--launch: {name} {text} is not a device count: a launch starts at least 1 device")
    return n


def launcher_options(words: list, flags: frozenset = frozenset()) -> dict:
    """The launcher's options before its script, as argparse keeps them: each name's last value.

    An option is ``--name=value`` or ``--name value`` (*flags* take no value); the first word that is no option is the
    script, and what follows it is the script's own.
    """
    out: dict = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--" or not word.startswith("-") or word == "-":
            break
        if "=" in word and word.startswith("--"):
            name, value = word.split("=", 1)
            out[name] = value
            i += 1
        elif word in flags:
            i += 1
        else:
            out[word] = words[i + 1] if i + 1 < len(words) else None
            i += 2
    return out


def _last(options: dict, names: tuple):
    """The value argparse keeps for an option spelled several ways (``--nproc_per_node`` and ``--nproc-per-node``): the last given."""
    found = [(name, value) for name, value in options.items() if name in names]
    return found[-1] if found else (None, None)


def _msrun(options: dict, line: str) -> Launch:
    name, total = _last(options, ("--worker_num",))
    if name is None:
        raise SmokeError(f"--launch {line!r}: msrun without --worker_num starts its default of 8 workers; say --worker_num=N (or give --devices N)")
    devices = count("--worker_num", total)
    local_name, local = _last(options, ("--local_worker_num",))
    if local_name is None:
        return Launch(devices, DEFAULT_PER_NODE, f"msrun --worker_num={devices}", "msrun's default --local_worker_num of 8")
    per_node = count("--local_worker_num", local)
    return Launch(devices, per_node, f"msrun --worker_num={devices}", f"--launch's --local_worker_num={per_node}")


def _torchrun_nodes(value) -> int:
    """torchrun's ``--nnodes``: N, or ``MIN:MAX`` when both are the same (an elastic range starts an unknown count)."""
    text = "" if value is None else str(value)
    if ":" in text:
        low, high = text.split(":", 1)
        if count("--nnodes", low) != count("--nnodes", high):
            raise SmokeError(f"--launch: --nnodes {text}: an elastic range starts a count not known before the launch; give --devices N")
        return int(low)
    return count("--nnodes", text)


def _torchrun(options: dict, line: str) -> Launch:
    per_name, per = _last(options, ("--nproc_per_node", "--nproc-per-node"))
    if per_name is None:
        raise SmokeError(f"--launch {line!r}: no --nproc_per_node (torchrun then starts 1 process a node); give --devices N")
    if str(per) in ("auto", "cpu", "gpu", "xpu"):
        raise SmokeError(f"--launch: {per_name} {per}: the count comes from the machine the launch runs on; give --devices N")
    per_node = count(per_name, per)
    nodes_name, nodes = _last(options, ("--nnodes",))
    n_nodes = 1 if nodes_name is None else _torchrun_nodes(nodes)
    return Launch(n_nodes * per_node, per_node, f"--nnodes {n_nodes} x {per_name} {per_node}", f"--launch's {per_name} {per_node}")


def _launcher_script(rest: list) -> Launch:
    """mindformers' ``msrun_launcher.sh "CMD" [WORKER_NUM [LOCAL_WORKER ...]]``, each of its forms as the script reads it."""
    n = len(rest)
    if n not in _SCRIPT_FORMS:
        raise SmokeError(f"--launch: msrun_launcher.sh takes 1, 2, 6 or 9 arguments, not {n}: it prints its usage and exits")
    if n == 1:
        return Launch(8, 8, "msrun_launcher.sh's default of 8 workers", "msrun_launcher.sh's default of 8 a node")
    total = count("msrun_launcher.sh's WORKER_NUM", rest[1])
    if n == 9:
        local = count("msrun_launcher.sh's LOCAL_WORKER", rest[2])
        return Launch(total, local, f"msrun_launcher.sh worker count {total}", f"msrun_launcher.sh's LOCAL_WORKER {local}")
    return Launch(total, total, f"msrun_launcher.sh worker count {total}", f"msrun_launcher.sh's single-node form: all {total} on one node")


def read_launch(launch: str) -> Launch:
    """The :class:`Launch` a launcher command line starts.

    Raises:
        SmokeError: a line none of the launchers understood, or one whose count is not a whole number of 1 or more.
    """
    try:
        words = shlex.split(launch)
    except ValueError as exc:
        raise SmokeError(f"--launch: {exc}") from None
    names = [os.path.basename(w) for w in words]
    for i, name in enumerate(names):
        if name == _LAUNCHER_SCRIPT:
            return _launcher_script(words[i + 1 :])
        if name in _MSRUN_NAMES:
            return _msrun(launcher_options(words[i + 1 :]), launch)
        if name in _TORCHRUN_NAMES:
            return _torchrun(launcher_options(words[i + 1 :], _TORCHRUN_FLAGS), launch)
    raise SmokeError(
        f'--launch {launch!r}: no device count found: no launcher msnb reads (msrun --worker_num=N, torchrun --nnodes A --nproc_per_node B, or msrun_launcher.sh "CMD" N); '
        "give --devices N"
    )


def per_node_words(per_node: int | None, said_from: str = "") -> str:
    """How many cards a node mindformers' server count was computed with, and where that number came from."""
    if per_node is None:
        return f"{DEFAULT_PER_NODE} cards a node assumed (mindformers' default: DEVICE_NUM_PER_NODE is not set; give --devices-per-node N)"
    return f"{per_node} cards a node assumed (from {said_from})" if said_from else f"{per_node} cards a node assumed"


def say_cards_a_node(checks: list, words: str) -> None:
    """Add to mindformers' server-count warning (``server_num % pipeline_stage``, check_rules._check_parallel: server_num is
    the device count over DEVICE_NUM_PER_NODE) the cards a node it was computed with, and where that number came from."""
    for check in checks:
        if check.outcome == "warning" and "server_num" in check.message and "cards a node assumed" not in check.message:
            check.message = f"{check.message} ({words})"


__all__ = ["DEFAULT_PER_NODE", "Launch", "count", "launcher_options", "per_node_words", "read_launch", "say_cards_a_node"]
