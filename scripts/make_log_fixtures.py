"""Regenerate tests/events/fixtures/mindformers_*_pynative.log from each mindformers release's own formatting code.

    pip download mindformers==2.0.0 --no-deps -d WHEELS
    pip download mindformers==2.1.0 --no-deps -d WHEELS
    python scripts/make_log_fixtures.py WHEELS [--installed]   # --installed adds 1.9 from the installed mindformers

For each release, the source of ``mindformers/pynative/callback/loss_callback.py`` is read from the wheel (or the
installed package), its ``_print_log`` method is compiled on its own (nothing else of mindformers is imported) and
called on known values; the lines it logs become the fixture, and the values themselves go to a JSON file beside it,
which the tests compare what msnb reads against.  Nothing here is typed by hand but the values.
"""

from __future__ import annotations

import argparse
import ast
import json
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "events" / "fixtures"
SOURCE = "mindformers/pynative/callback/loss_callback.py"


class _Logger:
    """Collects what ``logger.info`` is given, formatted as the logging module formats it."""

    def __init__(self):
        self.lines: list[str] = []

    def info(self, msg, *args):
        self.lines.append(msg % args if args else msg)

    warning = info


def print_log_of(source: str):
    """The release's ``_print_log`` as a plain function, compiled from its own source."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_print_log":
            node.decorator_list = []
            module = ast.Module(body=[node], type_ignores=[])
            logger = _Logger()
            namespace = {"logger": logger, "Dict": dict, "Any": object}
            exec(compile(module, SOURCE, "exec"), namespace)  # the release's own code, and nothing else of it
            return namespace["_print_log"], logger
    raise SystemExit(f"no _print_log in {SOURCE}")


def cases(release: str) -> list[dict]:
    """Known values, one dict per logged step; the keys each release reads (others are ignored by it)."""
    out = []
    for step in range(1, 7):
        info = {
            "cur_step": step,
            "max_steps": 200,
            "loss": 3.0 - 0.125 * step,
            "step_time": 1200 + step,
            "learning_rate": 1e-4 * step,
            "grad_norm": 0.5 + 0.25 * step,
            "throughput": 1234.5 + step,
        }
        if release != "1.9.0":
            info.update({"consumed_samples": 64 * step, "global_batch_size": 64, "load_balancing_loss": 0.015625 * step, "indexer_loss": 0.25})
            info["mtp_loss"] = f"mtp_1_loss: {0.5 * step:10.6f}, mtp_2_loss: {0.25 * step:10.6f}"
        if step == 3 and release != "1.9.0":  # a non-last pipeline stage's line
            info = {"cur_step": step, "max_steps": 200, "loss": None, "step_time": 1203, "consumed_samples": 192, "global_batch_size": 64}
        out.append(info)
    return out


def source_of(release: str, wheels: Path) -> str:
    if release == "1.9.0":
        import importlib.util

        spec = importlib.util.find_spec("mindformers")
        return (Path(spec.origin).parent / SOURCE.split("/", 1)[1]).read_text()
    with zipfile.ZipFile(wheels / f"mindformers-{release}-py3-none-any.whl") as z:
        return z.read(SOURCE).decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", type=Path)
    parser.add_argument("--installed", action="store_true", help="also write 1.9.0's from the installed mindformers")
    args = parser.parse_args()
    releases = ["2.0.0", "2.1.0"] + (["1.9.0"] if args.installed else [])
    OUT.mkdir(parents=True, exist_ok=True)
    for release in releases:
        print_log, logger = print_log_of(source_of(release, args.wheels))
        values = cases(release)
        for info in values:
            print_log(None, info)
        stamped = [
            f"2026-10-01 12:00:{i:02d},000 - mindformers[mindformers/pynative/callback/loss_callback.py] - INFO - {line}" for i, line in enumerate(logger.lines)
        ]
        (OUT / f"mindformers_{release}_pynative.log").write_text("\n".join(stamped) + "\n")
        (OUT / f"mindformers_{release}_pynative.json").write_text(json.dumps(values, indent=1) + "\n")
        print(f"{release}: {len(stamped)} lines")


if __name__ == "__main__":
    main()
