"""The options of ``msnb compare`` and ``%mfmon_compare``, declared once so the two cannot drift apart.

Both parsers are built from :data:`COMPARE_OPTIONS`; :func:`compare_kwargs` turns
what either parsed into the keyword arguments of :func:`msnb.analysis.compare.compare`.
"""

from __future__ import annotations

import argparse

from .options import Option, add_arguments, magic_arguments_from

COMPARE_OPTIONS: tuple[Option, ...] = (
    Option(
        ("baseline",), "the reference run: a Megatron-LM log, a trainer_state.json, a CSV/JSONL of step,tag,value, or anything msnb reads", metavar="BASELINE"
    ),
    Option(("candidate",), "the run to judge: a log, event file, summary, run or rank directory msnb reads", metavar="CANDIDATE"),
    Option(
        ("--baseline-rerun",),
        "another run of the baseline (determinism off): its own spread relaxes the tolerance (repeatable)",
        action="append",
        default=None,
        metavar="PATH",
        dest="reruns",
    ),
    Option(("--tag",), "the loss tag: a name on both sides or BASELINE_TAG=CANDIDATE_TAG (default: the loss by meaning: lm loss, loss, loss/auto...)"),
    Option(("--steps",), "compare only these baseline steps, A:B inclusive (A: or :B open-ended)", metavar="A:B"),
    Option(("--offset",), "add N to the candidate's steps (a candidate counting from 0 against a baseline from 1: 1)", type=int, default=0, metavar="N"),
    Option(("--rank",), "the candidate's ranks: 'median' (their median per step) or a rank number", default="median", metavar="N|median"),
    Option(("--out",), "also save the figure (curves, difference with tolerance band, lr, grad norm) to this PNG/SVG file", metavar="FILE"),
    Option(
        ("--json",),
        'print {"passed", "baseline", "candidate", "common_steps", "tolerance", "checks", "first_divergence"} as one JSON document',
        action="store_true",
        where="cli",
    ),
    Option(("--no-verify",), "skip CRC checks of event files", action="store_true", where="cli"),
)


def add_compare_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Declare every ``msnb compare`` option on *parser* (the ``compare`` subparser); returns it."""
    return add_arguments(parser, COMPARE_OPTIONS)


compare_magic_arguments = magic_arguments_from(COMPARE_OPTIONS)  # the compare magic's arguments, from the same list


def compare_kwargs(args: argparse.Namespace) -> dict:
    """The arguments of :func:`msnb.analysis.compare.compare` from a namespace either parser produced."""
    return {
        "baseline": args.baseline,
        "candidate": args.candidate,
        "reruns": list(args.reruns or []),
        "tag": args.tag,
        "steps": args.steps,
        "offset": args.offset,
        "rank": args.rank,
        "verify": not getattr(args, "no_verify", False),
    }
