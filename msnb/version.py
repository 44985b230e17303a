"""msnb's version, written once: the package, ``msnb --version``, the kernel's banner, the report's footer and the
wheel's metadata (pyproject.toml reads it from here) take it from this module, which imports nothing."""

__version__ = "0.1.0"
