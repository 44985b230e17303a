"""The ``msnb`` command: argument parsing over the library, nothing more.

Exit codes: 0 success, 1 a check found a blocking problem (``report``: written,
but a run failed or none could be judged), 2 bad usage or input (or nothing
readable), 3 ``export --strict`` skipped damaged records.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import __version__
from .errors import MsnbError, NothingReadable, UsageError
from .heap import keep_scratch_memory

# shared with %mfmon_plot; the number is msnb.analysis.bands.BANDS_ABOVE (a test checks), spelled out so the parser needs no numpy
BANDS_HELP = "draw each run's ranks as bands (min-max, 10-90 %%, median) with the flagged ranks as lines; default: on for runs of more than 16 ranks"


def _cmd_install_kernel(args) -> int:
    from . import kernel

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
        print(f"  with {len(spec['env'])} environment variable(s): {', '.join(sorted(spec['env']))}")
    if not args.no_check:
        from .kernel_check import check_kernel

        print("Checking it the way an editor will start it (skip with --no-check)...")
        readiness = check_kernel(args.name, spec_dir=path)
        print(readiness.format_text())
        if readiness.blocking:
            print(f"The kernelspec is installed, but the kernel is not ready: fix the errors above, then `msnb doctor --kernel {args.name}`.")
            return 1
    return 0


def _cmd_uninstall_kernel(args) -> int:
    from . import kernel

    path = kernel.uninstall(args.name, force=args.force, user=args.user, sys_prefix=args.sys_prefix, prefix=args.prefix)
    print(f"Removed kernelspec {args.name!r} from {path}")
    return 0


def _cmd_list_kernels(args) -> int:
    from . import kernel

    infos = kernel.list_kernels()
    if args.json:
        print(json.dumps([i.as_dict() for i in infos], indent=2))
        return 0
    if not infos:
        print("No kernelspecs found.")
    for info in infos:
        marks = []
        if info.made_by_msnb:
            marks.append("msnb")
        if not info.interpreter_exists:
            marks.append("interpreter missing")
        mark = f"  [{', '.join(marks)}]" if marks else ""
        print(f"{info.name:<20} {info.display_name!r}{mark}\n{'':<20} {info.interpreter}\n{'':<20} {info.resource_dir}")
    return 0


def _cmd_config(args) -> int:
    from .config import check_config
    from .environment import installed_major

    report = check_config(args.file, steps=args.steps, protobuf_major=installed_major("protobuf"))
    print(report.to_json() if args.json else report.format_text())
    return 0


def _cmd_plot(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from .events.runs import read_for_plot
    from .outputs import figure_out
    from .plot.render import plain_text
    from .plot.scalars import plot_read

    out = figure_out(args.out, args.dpi)  # before any reading: a bad --out or --dpi is one line, not a traceback at the end
    result = read_for_plot(args.paths, verify=not args.no_verify)
    for problem in result.problems:
        print(f"msnb plot: {problem.severity}: {problem}", file=sys.stderr)
    report = plot_read(result, args.paths, tags=args.tags, smooth=args.smooth, x=args.x, ranks=args.ranks, log=args.log, bands=args.bands)
    plain_text(report.figure)  # tag and run names from files are no TeX
    report.figure.savefig(out, dpi=args.dpi)
    if args.json:
        print(json.dumps({**report.as_dict(), "out": out}, indent=2))
    else:
        print(f"wrote {out}: " + report.format_text())
        for line in report.notes():  # a run listed but with no curve in a panel says so
            print(f"  note: {line}")
    return 0


def _cmd_check(args) -> int:
    from .analysis.check import check

    result = check(args.paths, tag=args.tag or "loss", verify=not args.no_verify)
    print(json.dumps(result.as_dict(), indent=2) if args.json else result.format_text())
    return result.exit_code


def _cmd_runs(args) -> int:
    from .panel import runs

    table = runs(args.base, tag=args.tag or "loss", active_within=args.active_within, verify=not args.no_verify)
    if args.json:
        for problem in table.all_problems:  # stdout stays one JSON document
            print(f"msnb runs: {problem.severity}: {problem}", file=sys.stderr)
    print(table.to_json() if args.json else table.format_text())
    return table.exit_code


def _cmd_smoke(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from .plot.live import LiveView
    from .smoke.options import DEFAULT_OUT, SmokeOptions
    from .smoke.runner import run_smoke, save_figure

    options = SmokeOptions.from_namespace(args, live=not (args.no_live or args.json))
    view = LiveView(text=True, stream=sys.stderr, total=args.steps, title="msnb smoke", min_interval=2.0, status=None) if options.live else None
    result = run_smoke(options=options, view=view)
    saved = bool(args.out) and result.figure is not None and save_figure(result, args.out) is None
    if args.json:
        print(json.dumps({**result.as_dict(), "plot": os.path.abspath(args.out) if saved else None}, indent=2))
    else:
        print(result.format_text())
        if saved:
            print(
                f"  plot: wrote {os.path.abspath(args.out)}" + (" (in the current directory; --out FILE to write elsewhere)" if args.out == DEFAULT_OUT else "")
            )
    return 0 if result.passed else 1


def _cmd_model_types(path: str, as_json: bool) -> int:
    from .registry import scan_model_types

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
        print(f"Scanned {found['files']} .py/.yaml file(s): {len(found['definitions'])} model_type definition(s)")
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
    from . import doctor

    if args.model_types:
        return _cmd_model_types(args.model_types, args.json)
    if args.kernel is not None:
        return _cmd_doctor_kernel(args.kernel, args.json)

    report = doctor.run(probe=args.probe)
    print(report.to_json() if args.json else report.format_text())
    return 1 if report.blocking else 0


def _cmd_doctor_kernel(name: str, as_json: bool) -> int:
    from .kernel_check import check_kernel

    readiness = check_kernel(name)
    print(readiness.to_json() if as_json else readiness.format_text())
    return 1 if readiness.blocking else 0


def _cmd_export_parquet(args) -> int:
    from .bridges.parquet import export
    from .events.problems import SKIPPED_KINDS

    if not args.out:
        raise UsageError("--format parquet writes a dataset directory: give it with --out DIR")
    report = export(args.path, args.out, verify=not args.no_verify)
    for problem in report.problems:
        print(f"msnb export: {problem.severity}: {problem}", file=sys.stderr)
    print(report.format_text())
    skipped = [p for p in report.problems if p.kind in SKIPPED_KINDS]
    if args.strict and skipped:
        print(f"msnb export: error: {len(skipped)} damaged or truncated record(s) skipped (--strict)", file=sys.stderr)
        return 3
    return 0


def _cmd_export(args) -> int:
    from .events import read
    from .events.export import write

    if args.format == "parquet":
        return _cmd_export_parquet(args)

    result = read(args.path, verify=not args.no_verify)
    for problem in result.problems:
        print(f"msnb export: {problem.severity}: {problem}", file=sys.stderr)
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
        print(f"msnb export: error: {len(skipped)} damaged or truncated record(s) skipped (--strict)", file=sys.stderr)
        return 3
    return 0


def _cmd_health(args) -> int:
    from .analysis.health import Settings, health

    settings = Settings(window=args.window, threshold=args.threshold)
    report = health(args.path, tag_prefix=args.tag_prefix or None, settings=settings, verify=not args.no_verify)
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.format_text())
    return 1 if report.anomalous else 0


def _cmd_convert(args) -> int:
    from .bridges.tensorboard import convert

    def progress(report):
        if not args.json:
            print(f"msnb convert: {report.total} row(s) written so far", file=sys.stderr)

    follow = {"follow": True, "interval": args.interval, "timeout": args.timeout, "on_pass": progress} if args.follow else {}
    report = convert(args.src, args.dst, verify=not args.no_verify, **follow)
    for problem in report.problems:
        print(f"msnb convert: {problem.severity}: {problem}", file=sys.stderr)
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.format_text())
    return 0


def _cmd_report(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from .html_report import report

    baseline = {"baseline": args.baseline} if args.baseline else {}  # precision alignment (msnb compare)
    result = report(args.paths, out=args.out, config=args.config, title=args.title, tag=args.tag or "loss", verify=not args.no_verify, **baseline)
    if args.json:
        print(json.dumps({"out": result.path, "bytes": result.bytes, "runs": result.runs, "passed": result.passed}, indent=2))
    else:
        print(result.format_text())
    return result.exit_code


def _cmd_compare(args) -> int:
    from .analysis.compare import compare
    from .compare_options import compare_kwargs
    from .outputs import figure_out

    out = figure_out(args.out) if args.out else None  # before any reading: a bad --out is one line, not a traceback at the end
    result = compare(**compare_kwargs(args))
    if out:
        import matplotlib

        matplotlib.use("Agg")
        from .plot.compare import plot_compare
        from .plot.render import plain_text

        figure = plot_compare(result)
        plain_text(figure)  # tag names from files are no TeX
        figure.savefig(out, dpi=100)
    if args.json:
        print(json.dumps({**result.as_dict(), "out": os.path.abspath(out) if out else None}, indent=2))
    else:
        print(result.format_text())
        if out:
            print(f"  figure: wrote {os.path.abspath(out)}")
    return result.exit_code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msnb", description="MindSpore training, observable from notebooks.")
    parser.add_argument("--version", action="version", version=f"msnb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

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

    p = sub.add_parser("uninstall-kernel", help="remove a kernelspec msnb installed")
    p.add_argument("--name", default="mindspore")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="look only in this user's kernels folder")
    where.add_argument("--sys-prefix", action="store_true", help="look only in this Python environment (sys.prefix)")
    where.add_argument("--prefix", metavar="DIR", help="look only in DIR/share/jupyter/kernels (where install-kernel --prefix DIR put it)")
    p.add_argument("--force", action="store_true", help="remove a kernelspec folder even if msnb did not make it (never a package's own files)")
    p.set_defaults(func=_cmd_uninstall_kernel)

    p = sub.add_parser("list-kernels", help="list kernelspecs, marking msnb's and those whose interpreter is gone")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_list_kernels)

    from .events.export import KIND_CHOICES, KINDS

    p = sub.add_parser("export", help="write what a summary/event/log path holds as CSV or JSON Lines to stdout, or as a Parquet dataset")
    p.add_argument("path", help="a file, a run directory or a tree of runs")
    p.add_argument("--kind", default="scalars", choices=KIND_CHOICES, metavar="KIND", help=f"one of {', '.join(KINDS)} (default: scalars)")
    p.add_argument("--format", default="csv", choices=["csv", "jsonl", "parquet"], help="parquet: every kind, Hive-partitioned under --out DIR")
    p.add_argument("--out", metavar="DIR", help="the Parquet dataset's directory (--format parquet); exporting again adds only what is new")
    p.add_argument("--strict", action="store_true", help="exit 3 when any damaged or truncated record was skipped")
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

    p = sub.add_parser("plot", help="draw the scalar curves under PATH(s) to a PNG or SVG file")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--out", required=True, help="FILE.png or FILE.svg")
    p.add_argument("--tags", help="comma-separated tags or panel names (loss, lr, grad_norm, step_time, throughput)")
    p.add_argument("--smooth", type=float, default=0.6)
    p.add_argument("--x", default="step", choices=["step", "wall", "relative"])
    p.add_argument("--ranks", action="store_true", help="one line per rank")
    p.add_argument("--bands", action=argparse.BooleanOptionalAction, default=None, help=BANDS_HELP)
    p.add_argument("--log", action="store_true", help="logarithmic y axis")
    p.add_argument("--dpi", type=int, default=100)
    p.add_argument("--json", action="store_true", help="print the report as JSON (runs, tags, points, flags)")
    p.add_argument("--no-verify", action="store_true")
    p.set_defaults(func=_cmd_plot)

    p = sub.add_parser("check", help="judge existing runs: NaN/Inf, loss trend and stall, spikes, rank divergence, step time")
    p.add_argument("paths", nargs="+", metavar="PATH", help="a run directory (rank_N folders), a file, a log, or a directory of runs")
    p.add_argument("--json", action="store_true", help='print {"passed", "runs": [...], "flags": [...]} as one JSON document')
    p.add_argument("--tag", help="the loss tag to judge, or its meaning (default: loss, which finds loss/auto, lm-loss...)")
    p.add_argument("--no-verify", action="store_true", help="skip CRC checks")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("runs", help="the team panel: one row per run under BASE (status, ranks, last loss, trend, verdict, flags, size, age)")
    p.add_argument("base", metavar="BASE", help="the directory holding the runs (run directories of event files or rank_N folders, nested folders allowed)")
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"runs": [{"run", "status", "ranks", "missing_ranks", "last_step", "last_loss", "passed", "flags", "bytes", "last_write"}]}',
    )
    p.add_argument("--active-within", type=float, default=300.0, metavar="SECONDS", help="a run written to within this many seconds is active (default 300)")
    p.add_argument("--tag", help="the loss tag to judge, or its meaning (default: loss, which finds loss/auto, lm-loss...)")
    p.add_argument("--no-verify", action="store_true", help="skip CRC checks (faster; damage may go unnoticed)")
    p.set_defaults(func=_cmd_runs)

    p = sub.add_parser("smoke", help="a short monitored training on the best device, judged from the files it wrote")
    from .smoke.options import add_smoke_arguments

    add_smoke_arguments(p)
    p.set_defaults(func=_cmd_smoke)

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
    p.add_argument("path", help="a run directory (TensorBoard rank_N folders, logs), a tree of runs or a file")
    p.add_argument("--json", action="store_true", help='print {"first": ..., "cascade": [...], "ranks": [...], "tags_scanned": N}')
    p.add_argument("--tag-prefix", action="append", metavar="PREFIX", help="only tags starting with PREFIX, e.g. local_norm (repeatable)")
    p.add_argument("--window", type=int, default=64, help="trailing points each point is compared with (default 64)")
    p.add_argument("--threshold", type=float, default=10.0, help="robust z-score that counts as a departure (default 10)")
    p.add_argument("--no-verify", action="store_true", help="skip CRC checks (faster; damage may go unnoticed)")
    p.set_defaults(func=_cmd_health)

    p = sub.add_parser("report", help="one self-contained HTML file: verdict, curves, step time, histograms, config lint, lineage, problems, versions")
    p.add_argument("paths", nargs="+", metavar="PATH", help="a run directory (rank_N folders), a file, a log, or a directory of runs")
    p.add_argument("--out", required=True, metavar="FILE", help="the HTML file to write (replaced if it exists)")
    p.add_argument("--config", metavar="YAML", help="the run's config: shown resolved, with its lint findings")
    p.add_argument("--title", help="the page's title (default: msnb report: PATH...)")
    p.add_argument("--tag", help="the loss tag to judge, or its meaning (default: loss)")
    p.add_argument("--json", action="store_true", help='print {"out", "bytes", "runs", "passed"}')
    p.add_argument("--no-verify", action="store_true", help="skip CRC checks")
    p.add_argument("--baseline", metavar="PATH", help="add a precision-alignment section: each PATH judged against this baseline run (see msnb compare)")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "compare", help="precision alignment: judge a candidate run against a baseline (Megatron-LM, Hugging Face...) by MindSpore's migration standard"
    )
    from .compare_options import add_compare_arguments

    add_compare_arguments(p)
    p.set_defaults(func=_cmd_compare)
    return parser


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
