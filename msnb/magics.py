"""msnb's IPython magics: thin shells over the library.

Loading this module must stay cheap: the kernel imports it at start-up, so
MindSpore and mindformers are only imported inside the magics that need them.
"""

from __future__ import annotations

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring


@magics_class
class MsnbMagics(Magics):
    """The ``%mfmon_*`` magics."""

    @magic_arguments()
    @argument("--json", action="store_true", help="return the report as a JSON-ready dict instead of printing it")
    @argument("--probe", action="store_true", help="also start MindSpore in a child process to confirm the device")
    @line_magic
    def mfmon_doctor(self, line):
        """Check this environment for MindSpore monitoring: versions, known-bad
        combinations with their fixes, usable devices and installed kernels.

        Returns the report (a ``msnb.doctor.Report``), so ``r = %mfmon_doctor``
        keeps it for later cells.
        """
        from . import doctor

        args = parse_argstring(self.mfmon_doctor, line)
        report = doctor.run(probe=args.probe)
        if args.json:
            return report.as_dict()
        print(report.format_text())
        return report

    @magic_arguments()
    @argument("file", help="a mindformers-style YAML file")
    @argument("--steps", type=int, default=None, help="how many steps the run will take")
    @line_magic
    def mfmon_config(self, line):
        """Show a YAML config resolved (base_config inheritance and ${a.b}
        references applied) with the lint findings for its monitoring settings.

        Returns a ``msnb.config.ConfigReport``; a broken file shows the error
        (file and key) instead of a traceback.
        """
        from .config import ConfigError, check_config

        args = parse_argstring(self.mfmon_config, line)
        try:
            return check_config(args.file, steps=args.steps)
        except ConfigError as exc:
            print(f"msnb: {exc}")
            return None


def magic_names() -> list[str]:
    """The line and cell magics msnb registers, as ``%name`` / ``%%name``."""
    names = [f"%{n}" for n in MsnbMagics.magics.get("line", {})]
    names += [f"%%{n}" for n in MsnbMagics.magics.get("cell", {})]
    return sorted(names)
