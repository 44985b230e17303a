"""A smoke run's options: one list that feeds ``msnb smoke``, ``%mfmon_smoke`` and :class:`SmokeOptions`.

An option is declared once here, with its help text and default, so that the
command line and the magic cannot drift apart: both parsers are built from
:data:`SMOKE_OPTIONS`, and both hand what they parsed to
:meth:`SmokeOptions.from_namespace`.  Range checks live in
:meth:`SmokeOptions.validate`, so the Python API refuses the same things.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
from dataclasses import dataclass, fields

from ...errors import SmokeError
from ...fullsize.cards import card_names, card_size
from ...options import Option, add_arguments, magic_arguments_from
from .device import DEVICES
from .kept import check_keep, check_place

DEFAULT_OUT = "msnb_smoke.png"
BUILTIN_STEPS = 200
MINDFORMERS_STEPS = 40  # a mindformers model compiles for ~10 s on CPU, then steps in tens of ms with every monitor on
SHRINK_CHOICES = ("auto", "always", "never")
DATA_CHOICES = ("auto", "config", "synthetic")
LIMITS = {"steps": 1_000_000, "batch_size": 65_536, "workers": 64, "collect_freq": 1_000_000, "sink_size": 1_000_000}  # a smoke run is short and small


def _whole(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass
class SmokeOptions:
    """Everything a smoke run is told; ``run_smoke(**fields)`` and both front ends build one of these."""

    config: str | os.PathLike | None = None
    steps: int | None = None  # 200 for the built-in model, MINDFORMERS_STEPS for a mindformers config
    batch_size: int | None = None  # 32 for the built-in model; 2 for a shrunk mindformers model, else the config's
    lr: float | None = None
    collect_freq: int | None = None
    device: str | None = None
    workers: int = 1
    summary_dir: str | os.PathLike | None = None
    keep: bool | str | os.PathLike = False  # True keeps the temporary directory; a path is the run's directory from the start
    live: bool = True
    code: str | None = None
    module: str | None = None
    mode: str | None = None  # pynative for the built-in model; a mindformers config's own context.mode
    timeout: float | None = None
    sink_size: int | None = None
    out: str | os.PathLike | None = None
    shrink: str = "auto"
    data: str = "auto"
    devices: int | None = None  # the device count the cluster's launch will have: the pre-flight checks the layout against it
    launch: str | None = None  # or the launcher line it is read from (msrun --worker_num=N ...)
    devices_per_node: int | None = None  # the cards a node, for mindformers' server count (default: --launch's, else mindformers' 8)
    card_gb: float | str | None = None  # the card's memory in GiB (or a card's name): the pre-flight judges the per-card memory against it
    card: str | None = None  # or the card by name (msnb.fullsize.cards.CARDS)

    def validate(self) -> None:
        """Refuse options no run could honour, before anything is started or created.

        Raises:
            SmokeError: naming the option and what it accepts.
        """
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if value is None and name in ("collect_freq", "sink_size", "steps", "batch_size"):
                continue
            if not _whole(value) or not 1 <= value <= limit:
                raise SmokeError(f"--{name.replace('_', '-')} must be a whole number of 1 or more, at most {limit:,} (got {value!r})")
        if self.timeout is not None and not (isinstance(self.timeout, numbers.Real) and math.isfinite(self.timeout) and self.timeout > 0):
            raise SmokeError(f"--timeout must be a number of seconds above 0 (got {self.timeout!r})")
        if self.mode not in (None, "pynative", "graph"):
            raise SmokeError(f"--mode must be pynative or graph (got {self.mode!r})")
        if self.shrink not in SHRINK_CHOICES:
            raise SmokeError(f"--shrink must be one of {', '.join(SHRINK_CHOICES)} (got {self.shrink!r})")
        if self.data not in DATA_CHOICES:
            raise SmokeError(f"--data must be one of {', '.join(DATA_CHOICES)} (got {self.data!r})")
        if self.code is not None and self.module is not None:
            raise SmokeError("give the model as the cell's code or as --module, not both")
        if self.lr is not None and not isinstance(self.lr, numbers.Real):
            raise SmokeError(f"--lr must be a number (got {self.lr!r})")
        if self.devices is not None and self.launch:
            raise SmokeError("give --devices or --launch, not both")
        if self.devices is not None and (not _whole(self.devices) or self.devices < 1):
            raise SmokeError(f"--devices must be a whole number of 1 or more (got {self.devices!r})")
        if self.devices_per_node is not None and (not _whole(self.devices_per_node) or self.devices_per_node < 1):
            raise SmokeError(f"--devices-per-node must be a whole number of 1 or more (got {self.devices_per_node!r})")
        if self.launch:
            from ...fullsize.launch import read_launch  # the launcher line read now: a line with no count is refused before anything starts

            read_launch(self.launch)
        card_size(self.card_gb, self.card)  # an unknown card or a memory that is no number above 0: refused before anything starts
        check_keep(self.keep)
        if self.summary_dir is not None:
            check_place("--summary-dir", self.summary_dir)  # before the folder is made, and before anything starts

    @classmethod
    def from_namespace(cls, args: argparse.Namespace, options=None, **extra) -> SmokeOptions:
        """The options an argparse (or magic_arguments) parser produced from :data:`SMOKE_OPTIONS`.

        Args:
            args: the parsed namespace; options a parser did not declare keep their defaults.
            options: the option list the parser was built from (default :data:`SMOKE_OPTIONS`).
            **extra: fields the front end supplies itself (the cell's ``code``, ``live``).

        Returns:
            The options (the magic's line was split as a shell does, so quotes are already gone).

        Raises:
            SmokeError: a declared option whose value would land nowhere (no field, not one the front ends use).
        """
        names = {f.name for f in fields(cls)}
        values = {}
        for opt in SMOKE_OPTIONS if options is None else options:
            if not hasattr(args, opt.key):
                continue
            if opt.key in names:
                values[opt.key] = getattr(args, opt.key)
            elif opt.key == "no_live":
                values["live"] = not args.no_live
            elif opt.key not in FRONT_END_KEYS:
                raise SmokeError(f"the smoke option {opt.flags[0]} would be ignored: {opt.key!r} is no field of SmokeOptions")
        values.update(extra)
        return cls(**values)


FRONT_END_KEYS = frozenset({"json"})
"""Options that only the front ends read (the CLI prints the verdict as JSON); every other one is a field."""


def _device(text: str) -> str:
    name = next((d for d in DEVICES if d.lower() == str(text).lower()), None)
    if name is None:
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; choose {', '.join(DEVICES)}")
    return name


def device_count(text: str) -> int:
    """An argparse type: a count of devices, a whole number of 1 or more written in the digits 0-9 (``int`` also takes '８')."""
    if not (isinstance(text, str) and text.isascii() and text.isdigit() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"{text!r} is not a device count (a whole number of 1 or more, in the digits 0-9)")
    return int(text)


LAUNCH_OPTIONS: tuple[Option, ...] = (
    Option(
        ("--devices",),
        "the device count the cluster's launch will have: the pre-flight checks the full-size layout against it (default: unknown, not checked)",
        type=device_count,
        metavar="N",
    ),
    Option(("--launch",), 'or the launcher line it is read from, quoted ("msrun --worker_num=16 --local_worker_num=8 ...")', metavar="CMD"),
    Option(
        ("--devices-per-node",),
        "the cards a node, for mindformers' server count (its DEVICE_NUM_PER_NODE; default: --launch's local worker count, else mindformers' 8)",
        type=device_count,
        metavar="N",
    ),
)
"""Where the pre-flight's device count comes from: the same declaration on ``msnb preflight``, ``msnb smoke`` and their magics."""

CARD_OPTIONS: tuple[Option, ...] = (
    Option(
        ("--card-gb",),
        "the card's memory in GiB, a number above 0 (e.g. 64): the largest pipeline stage is judged against it "
        "(default: the config's context.max_device_memory, else the memory is not judged)",
        metavar="G",
    ),
    Option(("--card",), f"or the card by name: {card_names()} (Huawei's published memory: docs/MEMORY.md)", metavar="NAME"),
)
"""The card the per-card memory is judged against: the same declaration on ``msnb preflight``, ``msnb memory``, ``msnb smoke`` and their magics."""


def add_card_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Declare ``--card-gb`` and ``--card`` on *parser*; returns it."""
    return add_arguments(parser, CARD_OPTIONS)


card_magic_arguments = magic_arguments_from(CARD_OPTIONS)
"""``--card-gb`` and ``--card`` as IPython ``magic_arguments`` (a magic with only these options; the others add them through their lists)."""

VERBOSE = Option(
    ("--verbose", "-v"),
    "also list every check that ran, what stood in for the cluster, the memory table and what the estimate does not count "
    "(a notebook folds them under the verdict)",
    action="store_true",
    where="cli",
)

PREFLIGHT_OPTIONS: tuple[Option, ...] = (
    Option(("file",), "a mindformers run YAML", metavar="RUN.yaml"),
    *LAUNCH_OPTIONS,
    *CARD_OPTIONS,
    Option(("--json",), 'print {"outcome", "passed", "devices", "checks": [...], "memory"} as one JSON document', action="store_true", where="cli"),
    VERBOSE,
)

MEMORY_OPTIONS: tuple[Option, ...] = (
    Option(("config",), "a mindformers run YAML, estimated at its full size under its own parallel layout", metavar="RUN.yaml"),
    Option(
        ("--devices",),
        "the cards the launch has: a launch mindformers would refuse (another count than the layout's) exits 1",
        type=device_count,
        metavar="N",
    ),
    *CARD_OPTIONS,
    Option(
        ("--against",),
        "a job's (or a DryRun's) folder: each stage's estimate beside the peak its ranks' logs report (MindSpore's memory report), and the error",
        metavar="DIR",
    ),
    Option(("--out",), "draw the stages (weights, gradients, optimizer state, activations; measured peaks with --against) into FILE.png", metavar="FILE.png"),
    Option(("--json",), 'print {"fits", "verdict", "stages": [...], "leaves_out", "against", ...} as one JSON document (bytes)', action="store_true"),
    VERBOSE,
)

EXIT_CODES = {
    "preflight": "exit codes: 0 passed (every check ran, none failed), 1 a finding, 2 bad usage (an option, a launch line, "
    "a file that is no mindformers run config), 3 not checked (a rule that did not run, an unknown device count, msnb's own error)",
    "memory": "exit codes: 0 the largest stage fits the card (or context.max_device_memory), 1 it does not fit or mindformers would "
    "refuse the layout or the launch, 2 bad usage (an unknown card, a config that cannot be sized), 3 no card and no "
    "context.max_device_memory: nothing judged",
    "smoke": "exit codes: 0 passed, 1 a check failed (the full-size pre-flight's findings included), 2 bad usage, "
    "3 not rehearsed here (msnb's limit, never the config's)",
}
"""What each command's --help says of its exit codes."""


SMOKE_OPTIONS: tuple[Option, ...] = (
    Option(
        ("config",),
        "a mindformers run YAML, whose own model is trained through mindformers' Trainer with its callbacks; or a YAML whose "
        "monitor_config to test on the built-in model (default: none, msnb's own settings)",
        nargs="?",
        metavar="CONFIG",
    ),
    Option(("--steps",), f"training steps to run (default: {BUILTIN_STEPS}; {MINDFORMERS_STEPS} for a mindformers model)", type=int),
    Option(("--batch-size",), "batch size (default: 32 for the built-in model; 2 for a shrunk mindformers model, else the config's)", type=int),
    Option(("--lr",), "learning rate (default: 0.05 for the built-in model; 5e-3 for a shrunk mindformers model, else the config's)", type=float),
    Option(("--collect-freq",), "SummaryCollector's collect_freq (default: the config's, else 5)", type=int),
    Option(("--device",), "Ascend, GPU or CPU, any case (default: Ascend, else GPU, else CPU)", type=_device, metavar="DEVICE"),
    Option(("--workers",), "data-parallel CPU workers; more than 1 starts them with msrun (default: 1)", type=int, default=1),
    *LAUNCH_OPTIONS,
    *CARD_OPTIONS,
    Option(("--summary-dir",), "write the summaries here, and keep them, instead of in a temporary directory (default: temporary)", metavar="DIR"),
    Option(
        ("--keep",),
        "keep the run's files after a pass (they are always kept after a failure): in DIR, a new or empty folder, or with no DIR in the "
        "temporary directory; msnb check, plot and report read the folder whole (default: removed after a pass)",
        default=False,
        nargs="?",
        const=True,
        metavar="DIR",
    ),
    Option(("--no-live",), "no live view while it runs", action="store_true"),
    Option(("--module",), "a .py file (relative to the current directory) or an importable module defining net, loss_fn, optimizer, dataset (or build())"),
    Option(
        ("--mode",),
        "MindSpore's execution mode (default: pynative for the built-in model; a mindformers config's own context.mode)",
        choices=("pynative", "graph"),
    ),
    Option(
        ("--shrink",),
        "a mindformers model's size: auto (shrunk on CPU and GPU, and on Ascend when it would not fit one card), always, or never (default: auto)",
        default="auto",
        choices=SHRINK_CHOICES,
    ),
    Option(
        ("--data",),
        "a mindformers model's data: auto (the config's dataset when its files exist here, else synthetic token ids), config, or synthetic (default: auto)",
        default="auto",
        choices=DATA_CHOICES,
    ),
    Option(("--timeout",), "stop the training after this many seconds (default: no limit)", type=float),
    Option(("--sink-size",), "rehearse dataset_sink_mode=True with this sink_size (default: sink mode off)", type=int, metavar="N"),
    Option(("--out",), "also save the final figure to this PNG/SVG file", where="magic", metavar="FILE"),
    Option(
        ("--out",),
        f"where to save the final figure; the default is a file in the current directory (default: {DEFAULT_OUT})",
        default=DEFAULT_OUT,
        where="cli",
        metavar="FILE",
    ),
    Option(("--json",), "print the verdict as one JSON document (passed, checks, summary_dir, ...)", action="store_true", where="cli"),
)


def add_smoke_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Declare every ``msnb smoke`` option on *parser* (the ``smoke`` subparser); returns it."""
    return add_arguments(parser, SMOKE_OPTIONS)


smoke_magic_arguments = magic_arguments_from(SMOKE_OPTIONS)
"""Decorate the smoke magic with IPython ``magic_arguments`` built from the same list."""
