"""The ``msnb`` command: argument parsing over the library, nothing more.

Exit codes: 0 success, 1 a check found a blocking problem (``report``: written,
but a run failed or none could be judged), 2 bad usage or input (or nothing
readable), 3 ``export --strict`` skipped damaged records (``memory``: 0 fits, 1 does not fit or mindformers would refuse the
launch, 3 no card and no ``context.max_device_memory``, nothing judged; ``preflight`` and ``smoke``: 3 not checked or
not rehearsed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

from .compare_options import add_compare_arguments, compare_kwargs
from .environment import installed_major
from .errors import MsnbError, NothingReadable, NotRehearsed, UsageError
from .heap import keep_scratch_memory
from .options import CHECK_OPTIONS, HEALTH_OPTIONS, KIND_CHOICES, KIND_NAMES, PLOT_OPTIONS, REPORT_OPTIONS, RUNS_OPTIONS, add_arguments
from .outputs import figure_out
from .outputs import save_figure as write_figure
from .smoke.run.options import EXIT_CODES, MEMORY_OPTIONS, PREFLIGHT_OPTIONS, SmokeOptions, add_smoke_arguments
from .version import __version__
from .words import count


def _cmd_install_kernel(args) -> int:
    from . import kernel  # deferred: jupyter_core and shlex, for the kernel commands only

    env = kernel.parse_env_assignments(args.env)
    path = kernel.install(
        name=args.name,
        display_name=args.display_name,
        user=True,
        sys_prefix=args.sys_prefix,
        prefix=args.prefix,
        env=env,
        ascend_env=args.ascend_env,
        force=args.force,
    )
    print(f"Installed kernelspec {args.name!r} ({args.display_name}) in {path}")
    spec = json.loads((path / "kernel.json").read_text())
    if spec.get("env"):
        print(f"  with {count(len(spec['env']), 'environment variable')}: {', '.join(sorted(spec['env']))}")
    chosen = bool(args.sys_prefix or args.prefix)  # an environment's prefix the user asked for is no mistake to warn about
    if args.no_check:  # the check says the same among its findings
        from .kernel_check import spec_location_finding  # deferred: the kernel check (msnb.kernel, jupyter_core, uuid, queue)

        location = spec_location_finding(args.name, str(path), prefix_chosen=chosen)
        if location is not None:
            print(f"{location.severity.upper()} {location.message}" + (f"\n  fix: {location.fix}" if location.fix else ""))
    else:
        from .kernel_check import check_kernel  # deferred: the kernel check (msnb.kernel, jupyter_core, uuid, queue)

        print("Checking it the way an editor will start it (skip with --no-check)...")
        readiness = check_kernel(args.name, spec_dir=path, prefix_chosen=chosen)
        print(readiness.format_text())
        if readiness.exit_code:
            print(f"The kernelspec is installed, but the kernel is not ready: fix the errors above, then `msnb doctor --kernel {args.name}`.")
            return 1
    return 0


def _cmd_uninstall_kernel(args) -> int:
    from . import kernel  # deferred: jupyter_core and shlex, for the kernel commands only

    if args.all:
        removed, refused = kernel.uninstall_all(args.name, force=args.force)
    else:
        removed = [kernel.uninstall(args.name, force=args.force, user=args.user, sys_prefix=args.sys_prefix, prefix=args.prefix)]
        refused = []
    for path in removed:
        print(f"Removed kernelspec {args.name!r} {kernel.where_of(path.parent)[0]}: {path}")
    for info, why in refused:
        print(f"Left kernelspec {args.name!r} {info.where}: {why}")
    left = kernel.locate(args.name)
    if not left:
        print(f"No kernelspec named {args.name!r} is left where Jupyter looks: front ends no longer offer it.")
        return 0
    first = left[0]
    print(f"Jupyter and editors now start the kernelspec {args.name!r} {first.where}: {first.resource_dir}")
    for info in left[1:]:
        print(f"  also left, never started while the one above exists: {info.resource_dir} ({info.where})")
    if not refused:
        others = f"; every one named {args.name!r}: msnb uninstall-kernel --name {args.name} --all" if len(left) > 1 else ""
        print(f"To remove it too: {kernel.removal_command(first)}{others}")
    return 1 if refused else 0


def _cmd_list_kernels(args) -> int:
    from . import kernel  # deferred: jupyter_core and shlex, for the kernel commands only

    infos = kernel.list_kernels()
    if args.json:
        print(json.dumps([i.as_dict() for i in infos], indent=2))
        return 0
    if not infos:
        print("No kernelspecs found.")
    copies = {}
    for info in infos:
        copies[info.name] = copies.get(info.name, 0) + 1
    for info in infos:
        marks = []
        if info.made_by_msnb:
            marks.append("msnb")
        if not info.interpreter_exists:
            marks.append("interpreter missing")
        if info.shadowed_by:
            marks.append("SHADOWED: never started, the one above comes first")
        elif copies[info.name] > 1:
            marks.append(f"started: first of {copies[info.name]} named {info.name!r}")
        mark = f"  [{', '.join(marks)}]" if marks else ""
        print(f"{info.name:<20} {info.display_name!r}{mark}\n{'':<20} {info.interpreter}\n{'':<20} {info.resource_dir}  ({info.where})")
    shadowed = [i for i in infos if i.shadowed_by]
    if shadowed:
        print(
            "\nA front end starts, for each name, the first kernelspec in Jupyter's search order; a shadowed one is never started."
            "\nRemove one: "
            + "; ".join(sorted({kernel.removal_command(i) for i in shadowed}))
            + "; every one of a name: msnb uninstall-kernel --name NAME --all"
        )
    return 0


def _cmd_config(args) -> int:
    from .config import check_config  # deferred: PyYAML and the config reader

    report = check_config(args.file, steps=args.steps, protobuf_major=installed_major("protobuf"))
    print(report.to_json() if args.json else report.format_text())
    return 0


def _cmd_preflight(args) -> int:
    from .fullsize.preflight import run_preflight  # deferred: PyYAML and the config reader (mindformers runs in a child)

    result = run_preflight(args.file, devices=args.devices, launch=args.launch, devices_per_node=args.devices_per_node, card_gb=args.card_gb, card=args.card)
    if args.json:
        print(result.to_json())
    else:
        from .fullsize.views import preflight_text  # deferred: the views

        print(preflight_text(result, verbose=args.verbose, color_stream=sys.stdout))
    return result.exit_code


def _say(command: str, problems) -> None:
    """What reading met, on stderr: one line per kind of problem, the files sharing it counted."""
    from .events.problems import grouped  # deferred: the readers (msnb.events), loaded already by whoever read something

    for line in grouped(problems):
        print(f"msnb {command}: {line}", file=sys.stderr)


def _cmd_plot(args) -> int:
    import matplotlib  # deferred: matplotlib

    matplotlib.use("Agg")
    # deferred: numpy, the readers, the figures' code and the judge (msnb.events, msnb.plot, msnb.analysis)
    from .events.runs import read_runs
    from .plot.render import plain_text
    from .plot.scalars import plot_read

    out = figure_out(args.out, args.dpi, inputs=args.paths)  # before any reading: a bad --out or --dpi is one line, not a traceback at the end
    result = read_runs(args.paths, verify=not args.no_verify)
    _say("plot", result.problems)
    report = plot_read(result, args.paths, tags=args.tags, smooth=args.smooth, x=args.x, ranks=args.ranks, log=args.log, bands=args.bands)
    plain_text(report.figure)  # tag and run names from files are no TeX
    write_figure(report.figure, out, dpi=args.dpi)
    if args.json:
        print(report.to_json(out=out))
    else:
        print(f"wrote {out}: " + report.format_text())
        for line in report.notes():  # a run listed but with no curve in a panel says so
            print(f"  note: {line}")
    return report.exit_code


def _cmd_check(args) -> int:
    from .analysis.check import check  # deferred: the judge (msnb.analysis)

    result = check(args.paths, tag=args.tag, verify=not args.no_verify)
    print(result.to_json() if args.json else result.format_text())
    return result.exit_code


def _cmd_runs(args) -> int:
    from .panel import runs  # deferred: the panel and the judge

    table = runs(args.base, tag=args.tag, active_within=args.active_within, verify=not args.no_verify)
    if args.json:
        _say("runs", table.all_problems)  # stdout stays one JSON document
    print(table.to_json() if args.json else table.format_text())
    return table.exit_code


def _cmd_smoke(args) -> int:
    import matplotlib  # deferred: matplotlib

    matplotlib.use("Agg")
    # deferred: the smoke runner (PyYAML, the config reader, the judge, the figures' code)
    from .plot.live import LiveView
    from .smoke.run.runner import run_smoke, save_figure

    options = SmokeOptions.from_namespace(args, live=not (args.no_live or args.json))
    view = LiveView(text=True, stream=sys.stderr, total=args.steps, title="msnb smoke", min_interval=2.0, status=None) if options.live else None
    try:
        result = run_smoke(options=options, view=view)
    except MsnbError as exc:
        if args.json:  # every outcome has its JSON: a refusal (exit 2) and what msnb cannot rehearse here (exit 3) too
            outcome = "not_rehearsed" if isinstance(exc, NotRehearsed) else "refused"
            print(json.dumps({"outcome": outcome, "passed": False, "reason": str(exc), "exit_code": exc.exit_code}, indent=2))
        raise
    saved = bool(args.out) and result.figure is not None and save_figure(result, args.out) is None
    if args.json:
        print(result.to_json(plot=result.figure_file if saved else None))
    else:
        print(result.format_text())  # its last line says where the figure went
    return result.exit_code


def _cmd_memory(args) -> int:
    from .fullsize.memory import estimate_card_memory  # deferred: PyYAML and the config reader

    if args.out:
        figure_out(args.out, inputs=[args.config])  # before the table: a bad --out is one line, not an error after the answer
    est = estimate_card_memory(args.config, devices=args.devices, card_gb=args.card_gb, card=args.card)
    if args.against:
        from .fullsize.against import against  # deferred: the readers

        est = against(est, args.against)
    if args.json:
        print(json.dumps(est.as_dict(), indent=2))
    elif args.against:
        print(est.format_text())
    else:
        from .fullsize.views import memory_text  # deferred: the views

        print(memory_text(est, verbose=args.verbose, color_stream=sys.stdout))
    if args.out:
        from .fullsize.figure import save_memory_figure  # deferred: matplotlib

        print(f"msnb memory: wrote {save_memory_figure(est, args.out)}", file=sys.stderr if args.json else sys.stdout)
    return est.exit_code


def _cmd_model_types(path: str, as_json: bool) -> int:
    from .registry import scan_model_types  # deferred: PyYAML and the config reader

    found = scan_model_types(path)

    def use(u):
        return {"name": u.name, "file": u.file, "line": u.line, "kind": u.kind, "owner": u.owner}

    if as_json:
        print(
            json.dumps(
                {
                    "files": found["files"],
                    "definitions": [use(u) for u in found["definitions"]],
                    "duplicates": {k: [use(u) for u in v] for k, v in found["duplicates"].items()},
                    "collisions": {k: {"library": v["library"], "uses": [use(u) for u in v["uses"]]} for k, v in found["collisions"].items()},
                    "unknown": [use(u) for u in found["unknown"]],
                    "problems": found["problems"],
                },
                indent=2,
            )
        )
    else:
        print(f"Scanned {count(found['files'], '.py/.yaml file')}: {count(len(found['definitions']), 'model_type definition')}")
        for name, v in sorted(found["collisions"].items()):
            print(f"  COLLISION {name!r} is shipped by {v['library']}:")
            for u in v["uses"]:
                print(f"    {u.file}:{u.line} ({u.owner or u.kind})")
        for name, items in sorted(found["duplicates"].items()):
            print(f"  DUPLICATE {name!r} is defined by {len(items)} classes:")
            for u in items:
                print(f"    {u.file}:{u.line} class {u.owner}")
        for u in found["unknown"]:
            print(f"  UNKNOWN   {u.file}:{u.line} uses model_type {u.name!r}, defined nowhere in the project nor shipped")
        for problem in found["problems"]:
            print(f"  SKIPPED   {problem['file']}: {problem['problem']}")
        if not (found["collisions"] or found["duplicates"]):
            print("  no duplicates or collisions")
    return 1 if found["collisions"] or found["duplicates"] else 0


def _cmd_doctor(args) -> int:
    from . import doctor  # deferred: the doctor (msnb.environment, msnb.kernel, jupyter_core)

    if args.model_types:
        return _cmd_model_types(args.model_types, args.json)
    if args.kernel is not None:
        return _cmd_doctor_kernel(args.kernel, args.json)

    report = doctor.run(probe=args.probe)
    print(report.to_json() if args.json else report.format_text())
    return report.exit_code


def _cmd_doctor_kernel(name: str, as_json: bool) -> int:
    from .kernel_check import check_kernel  # deferred: the kernel check (msnb.kernel, jupyter_core, uuid, queue)

    readiness = check_kernel(name)
    print(readiness.to_json() if as_json else readiness.format_text())
    return readiness.exit_code


def _cmd_export_parquet(args) -> int:
    from .bridges.parquet import export  # deferred: numpy and the Parquet bridge (pyarrow on use)
    from .events.problems import SKIPPED_KINDS  # deferred: numpy and the readers (msnb.events)

    if not args.out:
        raise UsageError("--format parquet writes a dataset directory: give it with --out DIR")
    report = export(args.path, args.out, verify=not args.no_verify, wait=args.wait, on_wait=lambda line: print(f"msnb export: {line}", file=sys.stderr))
    _say("export", report.problems)
    print(report.format_text())
    skipped = [p for p in report.problems if p.kind in SKIPPED_KINDS]
    if args.strict and skipped:
        print(f"msnb export: error: {count(len(skipped), 'damaged or truncated record')} skipped (--strict)", file=sys.stderr)
        return 3
    return 0


def _cmd_export(args) -> int:
    if args.format == "parquet":
        return _cmd_export_parquet(args)
    if args.out:  # csv and jsonl go to standard output: a --out left unused would leave the user without the file
        raise UsageError(f"--out is the Parquet dataset's directory (--format parquet); {args.format} goes to standard output: redirect it (> FILE)")
    # deferred: numpy and the readers (msnb.events)
    from .events import read
    from .events.export import write

    result = read(args.path, verify=not args.no_verify)
    _say("export", result.problems)
    if result.empty:
        raise NothingReadable(f"nothing readable in {args.path}")
    try:
        n = write(result, args.kind, args.format, sys.stdout)
    except BrokenPipeError:
        return 0  # the reader of a pipe stopped early (| head): not an error
    skipped = result.skipped
    if not n:
        print(f"msnb export: note: {args.path} holds no {args.kind} (it has: {result!r})", file=sys.stderr)
    if args.strict and skipped:
        print(f"msnb export: error: {count(len(skipped), 'damaged or truncated record')} skipped (--strict)", file=sys.stderr)
        return 3
    return 0


def _cmd_health(args) -> int:
    from .analysis.health import Settings, health  # deferred: the judge (msnb.analysis)

    settings = Settings(window=args.window, threshold=args.threshold, min_history=args.min_history)
    report = health(args.path, tag_prefix=args.tag_prefix or None, settings=settings, verify=not args.no_verify)
    print(report.to_json() if args.json else report.format_text())
    return report.exit_code


def _cmd_convert(args) -> int:
    from .bridges.tensorboard import convert  # deferred: the TensorBoard writer

    def progress(report):
        if not args.json:
            print(f"msnb convert: {count(report.total, 'row')} written so far", file=sys.stderr)

    follow = {"follow": True, "interval": args.interval, "timeout": args.timeout, "on_pass": progress} if args.follow else {}
    report = convert(args.src, args.dst, verify=not args.no_verify, **follow)
    _say("convert", report.problems)
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.format_text())
    return 0


def _cmd_report(args) -> int:
    import matplotlib  # deferred: matplotlib

    matplotlib.use("Agg")
    from .html_report import report  # deferred: the report (PyYAML, the judge, the doctor, the figures' code)

    baseline = {"baseline": args.baseline} if args.baseline else {}  # precision alignment (msnb compare)
    result = report(args.paths, out=args.out, config=args.config, title=args.title, tag=args.tag, verify=not args.no_verify, **baseline)
    print(result.to_json() if args.json else result.format_text())
    return result.exit_code


def _cmd_compare(args) -> int:
    from .analysis.compare import compare  # deferred: the judge (msnb.analysis)

    kwargs = compare_kwargs(args)
    # before any reading: a bad --out is one line, not a traceback at the end; the baseline and candidate are never replaced
    out = figure_out(args.out, inputs=[kwargs.get("baseline"), kwargs.get("candidate"), *(kwargs.get("reruns") or ())]) if args.out else None
    result = compare(**kwargs)
    if args.json:
        drawn = out is not None and _compare_figure(result, out)
        print(result.to_json(out=out if drawn else None))
    else:
        print(result.format_text())  # the verdict first: a figure that cannot be drawn never hides it
        if out is not None and _compare_figure(result, out):
            print(f"  figure: wrote {out}")
    return result.exit_code


def _compare_figure(result, out: str) -> bool:
    """Draw and save the comparison's figure; a figure that cannot be drawn is a warning, never the verdict's end."""
    import matplotlib  # deferred: matplotlib

    matplotlib.use("Agg")
    # deferred: the figures' code
    from .plot.compare import plot_compare
    from .plot.render import plain_text

    try:
        with warnings.catch_warnings():  # numpy's overflow warnings on +-1e308: the warning below says what matters
            warnings.simplefilter("ignore")
            figure = plot_compare(result)
            plain_text(figure)  # tag names from files are no TeX
            write_figure(figure, out)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - matplotlib's errors on extreme values (OverflowError, ValueError...): the verdict stands
        print(
            f"msnb compare: warning: the figure could not be drawn ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); {out} was not written",
            file=sys.stderr,
        )
        return False
    return True


COMMAND_EXIT_CODES = {
    **EXIT_CODES,
    "install-kernel": "exit codes: 0 installed (and ready, unless --no-check), 1 installed but the kernel is not ready, 2 bad usage",
    "uninstall-kernel": "exit codes: 0 removed (or none was there), 1 a kernelspec was left (another owner's: --force removes it), 2 bad usage",
    "list-kernels": "exit codes: 0 listed, 2 bad usage",
    "export": "exit codes: 0 exported, 2 bad usage or nothing readable, 3 --strict and damaged or truncated records were skipped",
    "convert": "exit codes: 0 converted, 2 bad usage or nothing readable",
    "config": "exit codes: 0 read and resolved (its lint findings are printed, not an exit status), 2 a file that cannot be read or resolved",
    "plot": "exit codes: 0 drawn (a plot shows its flags and does not judge), 2 bad usage or nothing readable",
    "check": "exit codes: 0 every run passed (warnings allowed), 1 a run failed, 2 bad usage or nothing readable",
    "runs": "exit codes: 0 no run's verdict failed (warnings allowed), 1 a run failed, 2 bad usage or nothing readable",
    "doctor": "exit codes: 0 nothing blocks (warnings allowed), 1 something blocks (with its fix), 2 bad usage or no such kernel (--kernel)",
    "health": "exit codes: 0 no anomaly in a training series and no failed run, 1 an anomaly or a failed run, 2 bad usage or nothing readable",
    "report": "exit codes: 0 written and every judged run passed, 1 written but a run failed or none could be judged, 2 bad usage or nothing readable",
    "compare": "exit codes: 0 no check failed (warnings allowed), 1 a check failed, 2 bad usage or nothing readable",
}
"""What each command's --help says of its exit codes (tests/test_robust_commands.py walks every help)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msnb", description="MindSpore training, observable from notebooks.")
    parser.add_argument("--version", action="version", version=f"msnb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    _add_kernel_commands(sub)
    _add_file_commands(sub)

    p = sub.add_parser(
        "preflight",
        help="mindformers' own startup checks on a run YAML at full size, for the devices the launch will have (no training)",
        epilog=EXIT_CODES["preflight"],
    )
    add_arguments(p, PREFLIGHT_OPTIONS).set_defaults(func=_cmd_preflight)

    p = sub.add_parser("plot", help="draw the scalar curves under the PATHs to a PNG or SVG file")
    add_arguments(p, PLOT_OPTIONS).set_defaults(func=_cmd_plot)

    p = sub.add_parser("check", help="judge existing runs: NaN/Inf, loss trend and stall, spikes, rank divergence, step time")
    add_arguments(p, CHECK_OPTIONS).set_defaults(func=_cmd_check)

    p = sub.add_parser("runs", help="the team panel: one row per run under BASE (status, ranks, last loss, trend, verdict, flags, size, age)")
    add_arguments(p, RUNS_OPTIONS).set_defaults(func=_cmd_runs)

    p = sub.add_parser("smoke", help="a short monitored training on the best device, judged from the files it wrote", epilog=EXIT_CODES["smoke"])
    add_smoke_arguments(p)
    p.set_defaults(func=_cmd_smoke)

    p = sub.add_parser(
        "memory",
        help="per-card memory of a mindformers config at full size under its parallel layout, a row per pipeline stage (0 fits, 1 not, 3 nothing judged)",
        epilog=EXIT_CODES["memory"],
    )
    add_arguments(p, MEMORY_OPTIONS)
    p.set_defaults(func=_cmd_memory)

    p = sub.add_parser("doctor", help="check versions, known-bad combinations, devices and kernels")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--probe", action="store_true", help="start MindSpore in a child process to confirm the device")
    p.add_argument("--model-types", metavar="PATH", help="scan .py/.yaml files under PATH for model_type duplicates and collisions")
    p.add_argument(
        "--kernel",
        nargs="?",
        const="mindspore",
        metavar="NAME",
        help="start kernel NAME (default: mindspore) as an editor does and check it is ready; exit 2 if there is no such kernel",
    )
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser("health", help="the first anomaly across ranks x tags x steps (which rank, which parameter, which step) and what followed")
    add_arguments(p, HEALTH_OPTIONS).set_defaults(func=_cmd_health)

    p = sub.add_parser("report", help="one self-contained HTML file: verdict, curves, step time, histograms, config lint, lineage, problems, versions")
    add_arguments(p, REPORT_OPTIONS).set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "compare", help="precision alignment: judge a candidate run against a baseline (Megatron-LM, Hugging Face...) by MindSpore's migration standard"
    )
    add_compare_arguments(p)
    p.set_defaults(func=_cmd_compare)
    for name, command in sub.choices.items():  # every help states its exit codes
        command.epilog = COMMAND_EXIT_CODES[name]
    return parser


def _add_kernel_commands(sub) -> None:
    """install-kernel, uninstall-kernel and list-kernels."""
    p = sub.add_parser("install-kernel", help='register the "MindSpore Kernel" for Jupyter and VS Code')
    p.add_argument("--name", default="mindspore", help="kernel name (lower-case, digits, . _ -); default: mindspore")
    p.add_argument("--display-name", default="MindSpore Kernel", help="name shown in kernel pickers")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for this user (the default)")
    where.add_argument("--sys-prefix", action="store_true", help="install into this Python environment (sys.prefix)")
    where.add_argument("--prefix", metavar="DIR", help="install under DIR/share/jupyter/kernels")
    p.add_argument("--env", action="append", metavar="KEY=VALUE", default=[], help="set a variable in the kernel's environment (repeatable)")
    p.add_argument(
        "--ascend-env",
        metavar="SET_ENV_SH",
        help="source this script (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh) and record what it sets in the kernelspec",
    )
    p.add_argument("--force", action="store_true", help="replace a kernelspec of that name that msnb did not make for this interpreter")
    p.add_argument("--no-check", action="store_true", help="do not start the installed kernel to check it is ready")
    p.set_defaults(func=_cmd_install_kernel)

    p = sub.add_parser(
        "uninstall-kernel", help="remove a kernelspec msnb installed (the one Jupyter starts, unless --user/--sys-prefix/--prefix/--all), saying what is left"
    )
    p.add_argument("--name", default="mindspore")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="look only in this user's kernels folder")
    where.add_argument("--sys-prefix", action="store_true", help="look only in this Python environment (sys.prefix)")
    where.add_argument("--prefix", metavar="DIR", help="look only in DIR/share/jupyter/kernels (where install-kernel --prefix DIR put it)")
    where.add_argument("--all", action="store_true", help="remove every kernelspec of that name Jupyter can find, the shadowed ones too")
    p.add_argument("--force", action="store_true", help="remove a kernelspec folder even if msnb did not make it (never a package's own files)")
    p.set_defaults(func=_cmd_uninstall_kernel)

    p = sub.add_parser(
        "list-kernels", help="list kernelspecs: where each lives, msnb's, those whose interpreter is gone, those shadowed by one of the same name"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_list_kernels)


def _seconds(text: str) -> float:
    """A number of seconds, 0 or more (argparse's type: a bad one is a usage error, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (value >= 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"seconds must be 0 or more: {text!r}")
    return value


def _add_file_commands(sub) -> None:
    """export, convert and config: what msnb reads, written in other formats or resolved."""
    p = sub.add_parser("export", help="write what a summary/event/log path holds as CSV or JSON Lines to stdout, or as a Parquet dataset")
    p.add_argument("path", help="a file, a run directory or a tree of runs")
    p.add_argument("--kind", default="scalars", choices=KIND_CHOICES, metavar="KIND", help=f"one of {', '.join(KIND_NAMES)} (default: scalars)")
    p.add_argument("--format", default="csv", choices=["csv", "jsonl", "parquet"], help="parquet: every kind, Hive-partitioned under --out DIR")
    p.add_argument("--out", metavar="DIR", help="the Parquet dataset's directory (--format parquet); exporting again adds only what is new")
    p.add_argument("--strict", action="store_true", help="exit 3 when any damaged or truncated record was skipped")
    p.add_argument(
        "--wait",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="--format parquet: how long to wait for another export's lock on --out before stopping with exit 2 (default: 60)",
    )
    p.add_argument("--no-verify", action="store_true", help="skip CRC checks (faster; damage may go unnoticed)")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("convert", help="write MindSpore summaries, lineage and logs as TensorBoard event files")
    p.add_argument("src", help="a summary file, a run directory or a tree of runs")
    p.add_argument("--to", required=True, choices=["tensorboard"], help="the target format")
    p.add_argument("dst", help="the TensorBoard log directory to write (runs appear as DST/<run>/rank_N)")
    p.add_argument("--follow", action="store_true", help="keep converting as the job writes (Ctrl-C stops)")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between passes with --follow")
    p.add_argument("--timeout", type=float, default=None, help="stop following after this many seconds")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-verify", action="store_true", help="skip CRC checks (faster; damage may go unnoticed)")
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser("config", help="print a YAML config resolved (base_config, ${} references) with lint findings")
    p.add_argument("file", help="a mindformers-style YAML file")
    p.add_argument("--json", action="store_true", help='print {"config": ..., "findings": [...]}')
    p.add_argument("--steps", type=int, help="how many steps the run will take (short runs may collect often)")
    p.set_defaults(func=_cmd_config)


def main(argv=None) -> int:
    """Run one command; an :class:`~msnb.errors.MsnbError` becomes one line on stderr and its exit code.

    Any other exception is a bug in msnb and keeps its traceback.  Ctrl-C is
    the user's choice, not a bug: one line and exit status 130 (128 + SIGINT),
    as a shell reports it.
    """
    args = build_parser().parse_args(argv)
    keep_scratch_memory()  # this process is msnb's own: reading keeps its scratch arrays' pages (see msnb.heap)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"msnb {args.command}: interrupted", file=sys.stderr)
        return 130
    except MsnbError as exc:
        print(f"msnb {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # the reader of our output went away (e.g. `| head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
