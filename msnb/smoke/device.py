"""Which device a smoke run trains on: Ascend when present, else GPU, else CPU."""

from __future__ import annotations

from ..errors import SmokeError

DEVICES = ("Ascend", "GPU", "CPU")


def choose_device(requested: str | None = None) -> tuple[str, str]:
    """(device, why): *requested* if given (any case), else the first usable one msnb's doctor finds."""
    from ..doctor import detect_devices, installed_versions

    found = detect_devices(installed_versions())
    if requested:
        name = next((d for d in DEVICES if d.lower() == requested.lower()), None)
        if name is None:
            raise SmokeError(f"unknown device {requested!r}; choose Ascend, GPU or CPU")
        status = next(d for d in found if d.device == name)
        why = f"{name} requested with --device" + ("" if status.usable else f" (msnb's checks say: {status.reason})")
        return name, why
    for status in found:
        if status.usable:
            others = "; ".join(f"no {d.device}: {d.reason}" for d in found if d.device != status.device and not d.usable)
            return status.device, f"{status.device}: {status.reason}" + (f" ({others})" if others else "")
    raise SmokeError("no device can run MindSpore here: " + "; ".join(f"{d.device}: {d.reason}" for d in found))
