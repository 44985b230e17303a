"""The ``msnb`` command: argument parsing over the library, nothing more.

Exit codes: 0 success, 1 a check found a blocking problem, 2 bad usage or
input (or nothing readable), 3 ``export --strict`` skipped damaged records.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import __version__
from .errors import MsnbError, NothingReadable, UsageError


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
    return 0


def _cmd_uninstall_kernel(args) -> int:
    from . import kernel

    path = kernel.uninstall(args.name, force=args.force)
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

    report = check_config(args.file, steps=args.steps)
    print(report.to_json() if args.json else report.format_text())
    return 0


def _cmd_plot(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from .plot import plot_scalars, read_for_plot
    from .plot.scalars import run_labeller

    result = read_for_plot(args.paths, verify=not args.no_verify)
    for problem in result.problems:
        print(f"msnb plot: {problem.severity}: {problem}", file=sys.stderr)
    if not len(result.scalars):
        raise NothingReadable(f"no scalars under {', '.join(args.paths)}")
    tags = [t.strip() for t in args.tags.split(",")] if args.tags else None
    report = plot_scalars(result.scalars, tags=tags, smooth=args.smooth, x=args.x, ranks=args.ranks, log=args.log, label_for_run=run_labeller(args.paths))
    report.figure.savefig(args.out, dpi=args.dpi)
    if args.json:
        print(json.dumps({**report.as_dict(), "out": args.out}, indent=2))
    else:
        print(f"wrote {args.out}: " + report.format_text())
    return 0


def _cmd_smoke(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from .plot.live import LiveView
    from .smoke import run_smoke

    view = None if args.no_live or args.json else LiveView(text=True, stream=sys.stderr, total=args.steps, title="msnb smoke", min_interval=2.0)
    result = run_smoke(
        args.config,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        collect_freq=args.collect_freq,
        device=args.device,
        workers=args.workers,
        summary_dir=args.summary_dir,
        keep=args.keep,
        live=view is not None,
        view=view,
        module=args.module,
        mode=args.mode,
        timeout=args.timeout,
    )
    if result.figure is not None and args.out:
        result.figure.savefig(args.out, dpi=100)
    if args.json:
        print(json.dumps({**result.as_dict(), "plot": args.out if result.figure is not None else None}, indent=2))
    else:
        print(result.format_text())
        if result.figure is not None and args.out:
            print(f"  plot: {args.out}")
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
        if not (found["collisions"] or found["duplicates"]):
            print("  no duplicates or collisions")
    return 1 if found["collisions"] or found["duplicates"] else 0


def _cmd_doctor(args) -> int:
    from . import doctor

    if args.model_types:
        return _cmd_model_types(args.model_types, args.json)

    report = doctor.run(probe=args.probe)
    print(report.to_json() if args.json else report.format_text())
    return 1 if report.blocking else 0


def _cmd_export_parquet(args) -> int:
    from .bridges.parquet import export

    if not args.out:
        raise UsageError("--format parquet writes a dataset directory: give it with --out DIR")
    report = export(args.path, args.out, verify=not args.no_verify)
    for problem in report.problems:
        print(f"msnb export: {problem.severity}: {problem}", file=sys.stderr)
    print(report.format_text())
    skipped = [p for p in report.problems if p.kind in ("truncated", "crc", "header", "decode")]
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
    n = write(result, args.kind, args.format, sys.stdout)
    skipped = result.skipped
    if not n:
        print(f"msnb export: note: {args.path} holds no {args.kind} (it has: {result!r})", file=sys.stderr)
    if args.strict and skipped:
        print(f"msnb export: error: {len(skipped)} damaged or truncated record(s) skipped (--strict)", file=sys.stderr)
        return 3
    return 0


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
    p.set_defaults(func=_cmd_install_kernel)

    p = sub.add_parser("uninstall-kernel", help="remove a kernelspec msnb installed")
    p.add_argument("--name", default="mindspore")
    p.add_argument("--force", action="store_true", help="remove it even if msnb did not make it")
    p.set_defaults(func=_cmd_uninstall_kernel)

    p = sub.add_parser("list-kernels", help="list kernelspecs, marking msnb's and those whose interpreter is gone")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_list_kernels)

    p = sub.add_parser("export", help="write what a summary/event/log path holds as CSV or JSON Lines to stdout, or as a Parquet dataset")
    p.add_argument("path", help="a file, a run directory or a tree of runs")
    p.add_argument("--kind", default="scalars", choices=["scalars", "histograms", "tensors", "images", "lineage", "text"])
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
    p.add_argument("--log", action="store_true", help="logarithmic y axis")
    p.add_argument("--dpi", type=int, default=100)
    p.add_argument("--json", action="store_true", help="print the report as JSON (runs, tags, points, flags)")
    p.add_argument("--no-verify", action="store_true")
    p.set_defaults(func=_cmd_plot)

    p = sub.add_parser("smoke", help="a short monitored training on the best device, judged from the files it wrote")
    p.add_argument("config", nargs="?", help="a YAML whose monitor_config to test (optional)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=None, help="learning rate (built-in model: 0.05)")
    p.add_argument("--collect-freq", type=int, default=None, help="SummaryCollector's collect_freq (default: the config's, else 5)")
    p.add_argument("--device", choices=["Ascend", "GPU", "CPU", "ascend", "gpu", "cpu"], help="default: Ascend, else GPU, else CPU")
    p.add_argument("--workers", type=int, default=1, help="data-parallel CPU workers started with msrun")
    p.add_argument("--summary-dir", help="write the summaries here (kept) instead of a temporary directory")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory after a pass")
    p.add_argument("--no-live", action="store_true", help="no progress lines while it runs")
    p.add_argument("--module", help="a .py file or module defining net, loss_fn, optimizer, dataset (or build())")
    p.add_argument("--mode", choices=["pynative", "graph"], default="pynative", help="MindSpore execution mode")
    p.add_argument("--timeout", type=float, default=None, help="stop the training after this many seconds")
    p.add_argument("--out", default="msnb_smoke.png", help="where to write the plot (default: msnb_smoke.png)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON (passed, checks, summary_dir, ...)")
    p.set_defaults(func=_cmd_smoke)

    p = sub.add_parser("doctor", help="check versions, known-bad combinations, devices and kernels")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--probe", action="store_true", help="start MindSpore in a child process to confirm the device")
    p.add_argument("--model-types", metavar="PATH", help="scan .py/.yaml files under PATH for model_type duplicates and collisions")
    p.set_defaults(func=_cmd_doctor)
    return parser


def main(argv=None) -> int:
    """Run one command; an :class:`~msnb.errors.MsnbError` becomes one line on stderr and its exit code.

    Any other exception is a bug in msnb and keeps its traceback.
    """
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
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
