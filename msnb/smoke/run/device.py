"""Which device a smoke run trains on: Ascend when present, else GPU, else CPU."""

from __future__ import annotations

from ...errors import SmokeError

DEVICES = ("Ascend", "GPU", "CPU")


def device_status(requested: str | None = None) -> tuple[str, str, bool]:
    """The device to train on, why, and whether msnb's checks found it usable.

    A requested device that is not usable is still returned (the run shows
    what MindSpore says about it), with ``usable`` False, so that the verdict's
    ``device`` check fails with the reason instead of passing.

    Args:
        requested: "Ascend", "GPU" or "CPU" in any case, or None for the best one present.

    Returns:
        (device, reason, usable).

    Raises:
        SmokeError: for an unknown device name, or when no device can run MindSpore.
    """
    # deferred: importlib.metadata, subprocess; the magics load this module at every kernel start
    from ...environment import detect_devices, installed_versions

    found = detect_devices(installed_versions())
    if requested:
        name = next((d for d in DEVICES if d.lower() == str(requested).lower()), None)
        if name is None:
            raise SmokeError(f"unknown device {requested!r}; choose Ascend, GPU or CPU")
        status = next(d for d in found if d.device == name)
        if status.usable:
            return name, f"{name} requested with --device: {status.reason}", True
        return name, f"{name} requested with --device, but it is not usable here: {status.reason}", False
    for status in found:
        if status.usable:
            others = "; ".join(f"no {d.device}: {d.reason}" for d in found if d.device != status.device and not d.usable)
            return status.device, f"{status.device}: {status.reason}" + (f" ({others})" if others else ""), True
    raise SmokeError("no device can run MindSpore here: " + "; ".join(f"{d.device}: {d.reason}" for d in found))


def choose_device(requested: str | None = None) -> tuple[str, str]:
    """(device, why): *requested* if given (any case), else the first usable one msnb's doctor finds.

    Args:
        requested: a device name in any case, or None.

    Returns:
        (device, reason); see :func:`device_status` for whether it is usable.
    """
    name, why, _usable = device_status(requested)
    return name, why
