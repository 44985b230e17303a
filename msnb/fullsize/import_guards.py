"""Make ``import mindformers`` survive a missing ``hyper_parallel``, in the smoke's child only.

mindformers 2.0 imports DeepSeek-V4's dynamic-graph model at package import, without the guard its other
dynamic-graph models have (2.1 added it), and that model needs ``hyper_parallel``, which no package index carries.
Without it ``import mindformers`` fails for every model.  Before the child imports mindformers,
:func:`guard_deepseek_v4_import` puts a stand-in for that one module in ``sys.modules``: importing succeeds, and
building DeepSeek-V4 raises ImportError naming the missing package (the runner refuses DeepSeek-V4 configs before
that: :mod:`msnb.smoke.mindformers.tested_stack`).  Nothing is done when ``hyper_parallel`` is installed or the import is guarded.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types

from ..environment import package_dir

V4_PACKAGE = "models/deepseek4"
V4_MODULE = "mindformers.models.deepseek4.modeling_deepseek_v4_pynative"
# an import of the dynamic-graph module at column 0 (a guarded one sits indented under try:)
_UNGUARDED = re.compile(r"^from \.modeling_deepseek_v4_pynative import ", re.M)
_MAX_SOURCE = 1 << 20  # the module is a few KB; a huge file is not the one we know


def _hyper_parallel_installed() -> bool:
    try:
        return importlib.util.find_spec("hyper_parallel") is not None
    except (ImportError, ValueError):
        return False


def imports_v4_unguarded(source: str) -> bool:
    """Whether ``modeling_deepseek_v4.py``'s text imports the dynamic-graph module outside a ``try:`` (2.0 does, 2.1 does not)."""
    return bool(_UNGUARDED.search(source))


def _unguarded_v4_import() -> bool:
    pkg = package_dir("mindformers")
    if pkg is None:
        return False
    path = pkg / V4_PACKAGE / "modeling_deepseek_v4.py"
    try:
        with open(path, "rb") as f:
            source = f.read(_MAX_SOURCE).decode("utf-8", errors="replace")
    except OSError:
        return False
    return imports_v4_unguarded(source)


def guard_deepseek_v4_import() -> str | None:
    """Stand in for DeepSeek-V4's dynamic-graph module when ``hyper_parallel`` is absent and mindformers imports it unguarded.

    Call before ``import mindformers``.

    Returns:
        One line for the verdict's ``cpu_rehearsal`` check, or None when nothing was needed.
    """
    if V4_MODULE in sys.modules or _hyper_parallel_installed() or not _unguarded_v4_import():
        return None

    class PyNativeDeepseekV4ForCausalLM:
        """Stand-in: DeepSeek-V4's dynamic-graph model needs hyper_parallel."""

        def __init__(self, *args, **kwargs):
            raise ImportError("DeepSeek-V4's dynamic-graph model needs hyper_parallel, which is not installed (msnb's smoke made only its import harmless)")

    stand_in = types.ModuleType(V4_MODULE, "msnb's stand-in: DeepSeek-V4's dynamic-graph model needs hyper_parallel")
    stand_in.PyNativeDeepseekV4ForCausalLM = PyNativeDeepseekV4ForCausalLM
    sys.modules[V4_MODULE] = stand_in
    return "DeepSeek-V4's dynamic-graph module -> a stand-in, so that `import mindformers` works without hyper_parallel (DeepSeek-V4 itself is not rehearsed)"


__all__ = ["guard_deepseek_v4_import", "imports_v4_unguarded"]
